//! A guest cancels their booking from the order page (issue 36). The
//! policy is the one copied onto the booking when it was made
//! (`bookings.deposit_per_cover_minor`, `cancel_until`): until the cut-off
//! the booking's covers go back and what was paid for them (the deposit)
//! is refunded in full, through the refund routine staff use
//! ([`super::refunds`]), so in one transaction the engine takes the covers
//! back on sale, the table's pin ends, the waiting list of that time is
//! offered the table, the refund and the guest's notice are queued. A
//! booking that cost nothing may be cancelled until its time. After that
//! the page says the deposit is kept and offers no cancel; the host stand
//! marks a no-show.

use chrono::{DateTime, Utc};
use sqlx::PgPool;
use uuid::Uuid;

use super::refunds::{Picked, RefundOutcome, RefundRequest, check, refund_in};

/// A paid order's bookings, as the order page says their policy.
#[derive(Debug, Clone, PartialEq, Eq, sqlx::FromRow)]
pub struct Policy {
    /// The deposit paid for its bookings, in all (0: none).
    pub deposit_minor: i64,
    pub currency: String,
    /// The last moment a cancel refunds it (or, with no deposit, the
    /// earliest booking's time).
    pub cancel_until: DateTime<Utc>,
    /// By the database's clock, the guest may cancel now.
    pub open: bool,
    /// Covers still booked (not cancelled or refunded).
    pub covers: i64,
}

impl Policy {
    /// The policy as the guest reads it, before the cut-off or after (the
    /// order page, the cancel page, the confirmation mail).
    pub fn words(&self, zone: crate::clock::ShopZone) -> String {
        let until = zone.long(self.cancel_until);
        let deposit = crate::money::format(self.deposit_minor, &self.currency);
        match (self.open, self.deposit_minor > 0) {
            (true, true) => format!(
                "You can cancel until {until} and your deposit of {deposit} is refunded in \
                 full; after that it is kept."
            ),
            (true, false) => format!("You can cancel until {until}; there is nothing to pay."),
            (false, true) => format!(
                "It was possible to cancel until {until}; your deposit of {deposit} is kept. \
                 Please call the restaurant if your plans change."
            ),
            (false, false) => "Please call the restaurant if your plans change.".to_owned(),
        }
    }
}

/// The policy of an order's bookings still standing; `None`: it has none.
pub async fn policy(pool: &PgPool, order_id: Uuid) -> sqlx::Result<Option<Policy>> {
    policy_in(pool, order_id).await
}

/// [`policy`], read by any connection (the cancel's transaction reads it
/// under the order's lock). A booking stands while its item is valid
/// (not seated, refunded or cancelled) and nobody marked it a no-show;
/// the order's other items (a pickup collected) do not matter. `open` compares with the statement's time, not the
/// transaction's: a cancel that waited for the lock sees the time it
/// decides at.
async fn policy_in<'c, E>(db: E, order_id: Uuid) -> sqlx::Result<Option<Policy>>
where
    E: sqlx::Executor<'c, Database = sqlx::Postgres>,
{
    sqlx::query_as(
        "with standing as ( \
             select b.starts_at, b.cancel_until, b.deposit_per_cover_minor, \
                    l.qty - l.refunded_qty as covers \
               from bookings b \
               join order_lines l on l.order_id = b.order_id and l.product_id = b.product_id \
               join order_items i on i.booking = b.hold_id \
              where b.order_id = $1 and l.refunded_qty < l.qty and b.no_show_at is null \
                and i.state = 'valid') \
         select sum(s.deposit_per_cover_minor * s.covers)::int8 as deposit_minor, \
                o.currency, \
                case when sum(s.deposit_per_cover_minor * s.covers) > 0 then min(s.cancel_until) \
                     else min(s.starts_at) end as cancel_until, \
                statement_timestamp() < case when sum(s.deposit_per_cover_minor * s.covers) > 0 \
                             then min(s.cancel_until) else min(s.starts_at) end as open, \
                sum(s.covers)::int8 as covers \
           from standing s, orders o \
          where o.id = $1 and o.state = 'paid' \
          group by o.currency",
    )
    .bind(order_id)
    .fetch_optional(db)
    .await
}

/// What a guest's cancel came to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Cancelled {
    /// The covers went back; `refunded_minor` is on its way to the guest
    /// (0: there was nothing to give back). A second cancel of the order
    /// answers the first again.
    Cancelled { refunded_minor: i64 },
    /// Nothing changed, and why.
    Refused(Refusal),
}

/// Why a guest's cancel changed nothing.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Refusal {
    /// Past the cut-off: the deposit is kept.
    TooLate { cancel_until: DateTime<Utc> },
    /// The party was seated at the host stand.
    Seated,
    /// The host stand recorded that nobody came.
    NoShow,
    /// The shop refunded the booking already.
    Refunded,
    /// No paid booking to cancel (not paid, or no booking in it).
    NotBooked,
}

/// Cancel a paid order's bookings for its guest, in one transaction that
/// first locks the order (as the refund routine, a seat at the host stand
/// and a no-show do), then reads the cut-off and the booking's state, and
/// refunds under that lock: a cancel racing the cut-off, a seat or a
/// no-show is decided by one of them. Safe to send twice: the second finds
/// the same refund (its key is the order's) and changes nothing.
pub async fn cancel(pool: &PgPool, order_id: Uuid) -> super::Result<Cancelled> {
    let key = cancel_key(order_id);
    let mut tx = pool.begin().await?;
    // lock: the order
    sqlx::query("select 1 from orders where id = $1 for no key update")
        .bind(order_id)
        .execute(&mut *tx)
        .await?;
    let policy = match policy_in(&mut *tx, order_id).await? {
        Some(policy) if policy.open => policy,
        Some(policy) => {
            return Ok(Cancelled::Refused(Refusal::TooLate {
                cancel_until: policy.cancel_until,
            }));
        }
        None => {
            if let Some(refunded_minor) = made_before(&mut *tx, &key).await? {
                return Ok(Cancelled::Cancelled { refunded_minor });
            }
            return Ok(Cancelled::Refused(refusal(&mut tx, order_id).await?));
        }
    };
    // the standing bookings' items: they alone are cancelled, whatever
    // else the order holds
    let items: Vec<i64> = sqlx::query_scalar(
        "select i.id from order_items i join bookings b on b.hold_id = i.booking \
          where i.order_id = $1 and i.state = 'valid' and b.no_show_at is null \
          order by i.id",
    )
    .bind(order_id)
    .fetch_all(&mut *tx)
    .await?;
    // nothing of it left to give back (staff refunded it meanwhile): an
    // empty list would ask the refund for the whole order
    if items.is_empty() || policy.covers == 0 {
        return Ok(Cancelled::Refused(Refusal::Refunded));
    }
    let request = RefundRequest {
        order_id,
        units: Vec::new(),
        reason: "cancelled by the guest before the cut-off".into(),
        restock: true,
        override_redeemed: false,
        by: "guest".into(),
        staff: None,
        key: Some(key),
    };
    check(&request).map_err(super::StaffError::InvalidInput)?;
    let picked = Picked {
        items,
        cancels: true,
    };
    let outcome = refund_in(&mut tx, &request, &picked).await?;
    let RefundOutcome::Queued { amount_minor, .. } = outcome else {
        tracing::warn!(order = %order_id, outcome = outcome.as_str(), "a guest's cancel refunded nothing");
        return Ok(Cancelled::Refused(refusal(&mut tx, order_id).await?));
    };
    tx.commit().await?;
    Ok(Cancelled::Cancelled {
        refunded_minor: amount_minor,
    })
}

/// Why a guest's cancel of the order would change nothing now; `None`: it
/// would cancel. What the order page says after a refused cancel.
pub async fn why_not(pool: &PgPool, order_id: Uuid) -> sqlx::Result<Option<Refusal>> {
    let mut conn = pool.acquire().await?;
    Ok(match policy_in(&mut *conn, order_id).await? {
        Some(policy) if policy.open => None,
        Some(policy) => Some(Refusal::TooLate {
            cancel_until: policy.cancel_until,
        }),
        None => Some(refusal(&mut conn, order_id).await?),
    })
}

/// Why an order's bookings cannot be cancelled now (read under its lock).
async fn refusal(tx: &mut sqlx::PgConnection, order_id: Uuid) -> sqlx::Result<Refusal> {
    let (paid, booked, seated, no_show): (bool, bool, bool, bool) = sqlx::query_as(
        "select coalesce((select state = 'paid' from orders where id = $1), false), \
                exists (select 1 from bookings where order_id = $1), \
                exists (select 1 from order_items i join bookings b on b.hold_id = i.booking \
                         where b.order_id = $1 and i.state = 'used'), \
                exists (select 1 from bookings where order_id = $1 and no_show_at is not null)",
    )
    .bind(order_id)
    .fetch_one(&mut *tx)
    .await?;
    Ok(match (booked, seated, no_show) {
        (false, _, _) => Refusal::NotBooked,
        (true, true, _) => Refusal::Seated,
        (true, false, true) => Refusal::NoShow,
        (true, false, false) if paid => Refusal::Refunded,
        _ => Refusal::NotBooked,
    })
}

/// What the guest's cancel of an order refunded, if they cancelled.
pub async fn cancelled(pool: &PgPool, order_id: Uuid) -> sqlx::Result<Option<i64>> {
    made_before(pool, &cancel_key(order_id)).await
}

/// The one refund key of a guest's cancel of an order: a second cancel is
/// the first one, answered again.
fn cancel_key(order_id: Uuid) -> String {
    format!("guest-cancel-{}", order_id.simple())
}

/// The amount a guest's cancel of this key refunded, if it was made.
async fn made_before<'c, E>(db: E, key: &str) -> sqlx::Result<Option<i64>>
where
    E: sqlx::Executor<'c, Database = sqlx::Postgres>,
{
    sqlx::query_scalar("select amount_minor from order_refunds where request_key = $1")
        .bind(key)
        .fetch_optional(db)
        .await
}
