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

use super::refunds::{RefundOutcome, RefundRequest, refund_order};

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

/// The policy of an order's bookings still standing; `None`: it has none.
pub async fn policy(pool: &PgPool, order_id: Uuid) -> sqlx::Result<Option<Policy>> {
    sqlx::query_as(
        "with standing as ( \
             select b.starts_at, b.cancel_until, b.deposit_per_cover_minor, \
                    l.qty - l.refunded_qty as covers \
               from bookings b \
               join order_lines l on l.order_id = b.order_id and l.product_id = b.product_id \
              where b.order_id = $1 and l.refunded_qty < l.qty and b.no_show_at is null) \
         select sum(s.deposit_per_cover_minor * s.covers)::int8 as deposit_minor, \
                o.currency, \
                case when sum(s.deposit_per_cover_minor * s.covers) > 0 then min(s.cancel_until) \
                     else min(s.starts_at) end as cancel_until, \
                now() < case when sum(s.deposit_per_cover_minor * s.covers) > 0 \
                             then min(s.cancel_until) else min(s.starts_at) end as open, \
                sum(s.covers)::int8 as covers \
           from standing s, orders o \
          where o.id = $1 and o.state = 'paid' \
          group by o.currency",
    )
    .bind(order_id)
    .fetch_optional(pool)
    .await
}

/// What a guest's cancel came to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Cancelled {
    /// The covers went back; `refunded_minor` is on its way to the guest
    /// (0: there was nothing to give back).
    Cancelled { refunded_minor: i64 },
    /// Past the cut-off: nothing changed, the deposit is kept.
    TooLate { cancel_until: DateTime<Utc> },
    /// The order has no booking standing (none, cancelled before, or not
    /// paid): nothing changed.
    Nothing,
}

/// Cancel a paid order's bookings for its guest. Safe to send twice: the
/// second finds the same refund (its key is the order's) and changes
/// nothing.
pub async fn cancel(pool: &PgPool, order_id: Uuid) -> super::Result<Cancelled> {
    let key = cancel_key(order_id);
    let Some(policy) = policy(pool, order_id).await? else {
        return Ok(match made_before(pool, &key).await? {
            Some(refunded_minor) => Cancelled::Cancelled { refunded_minor },
            None => Cancelled::Nothing,
        });
    };
    if !policy.open {
        return Ok(Cancelled::TooLate {
            cancel_until: policy.cancel_until,
        });
    }
    let units: Vec<(String, i32)> = sqlx::query_as(
        "select l.product_id, l.qty - l.refunded_qty from order_lines l \
          where l.order_id = $1 and l.refunded_qty < l.qty \
            and exists (select 1 from bookings b \
                         where b.order_id = l.order_id and b.product_id = l.product_id \
                           and b.no_show_at is null) \
          order by l.product_id",
    )
    .bind(order_id)
    .fetch_all(pool)
    .await?;
    // nothing of it left to give back (staff refunded it meanwhile): an
    // empty list would ask the refund for the whole order
    if units.is_empty() {
        return Ok(Cancelled::Nothing);
    }
    let outcome = refund_order(
        pool,
        &RefundRequest {
            order_id,
            units,
            reason: "cancelled by the guest before the cut-off".into(),
            restock: true,
            override_redeemed: false,
            by: "guest".into(),
            staff: None,
            key: Some(key),
        },
    )
    .await?;
    Ok(match outcome {
        RefundOutcome::Queued { amount_minor, .. } => Cancelled::Cancelled {
            refunded_minor: amount_minor,
        },
        other => {
            tracing::warn!(order = %order_id, outcome = other.as_str(), "a guest's cancel refunded nothing");
            Cancelled::Nothing
        }
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
async fn made_before(pool: &PgPool, key: &str) -> sqlx::Result<Option<i64>> {
    sqlx::query_scalar("select amount_minor from order_refunds where request_key = $1")
        .bind(key)
        .fetch_optional(pool)
        .await
}
