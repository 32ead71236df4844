//! The waiting list of a sold-out product (docs/waiting-list.md). A
//! shopper joins with a name, an e-mail and how many; the entry counts
//! once the link mailed to them confirmed it, and takes its place in line
//! then. The handover is the database's (`hf_hand_over`, migration 0070):
//! the transaction that frees units holds them for the first waiting entry
//! they fit and writes its pending order, so nobody else can take them in
//! between. Claiming opens that order's payment page with the units
//! already the shopper's; an offer not claimed within the product's claim
//! window expires like any hold, and its expiry offers the units on.

use chrono::{DateTime, Utc};
use serde_json::json;
use sqlx::{FromRow, PgPool};
use uuid::Uuid;

use crate::checkout::{self, AttachOutcome, Customer, Desk, Order, OrderState};
use crate::payments::ProviderKind;
use crate::retry::{Bound, retry};
use crate::staff::{Actor, log_action_by, record_by};

/// Where an entry is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EntryState {
    /// Made; its e-mail has not confirmed it, so it does not count yet.
    Unconfirmed,
    /// Confirmed for a drop queue not drawn yet: its place comes at the
    /// draw (`crate::queue`).
    Queued,
    /// In line.
    Waiting,
    /// Units are held for it until its offer ends.
    Offered,
    /// Its offer's order was paid.
    Claimed,
    /// Its offer ran out unclaimed.
    Lapsed,
    /// Taken off the list, by the shopper or staff.
    Removed,
}

impl EntryState {
    pub fn parse(name: &str) -> Option<Self> {
        Some(match name {
            "unconfirmed" => Self::Unconfirmed,
            "queued" => Self::Queued,
            "waiting" => Self::Waiting,
            "offered" => Self::Offered,
            "claimed" => Self::Claimed,
            "lapsed" => Self::Lapsed,
            "removed" => Self::Removed,
            _ => return None,
        })
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Self::Unconfirmed => "unconfirmed",
            Self::Queued => "queued",
            Self::Waiting => "waiting",
            Self::Offered => "offered",
            Self::Claimed => "claimed",
            Self::Lapsed => "lapsed",
            Self::Removed => "removed",
        }
    }
}

/// One entry, with what its pages show.
#[derive(Debug, Clone, FromRow)]
pub struct Entry {
    pub id: Uuid,
    pub product_id: String,
    /// The product's resource: its changes are what move the line.
    pub resource_id: String,
    pub product_name: String,
    pub token: String,
    pub name: String,
    pub email: String,
    pub qty: i32,
    state: String,
    pub line_no: Option<i64>,
    pub created_at: DateTime<Utc>,
    pub confirmed_at: Option<DateTime<Utc>>,
    pub offered_at: Option<DateTime<Utc>>,
    pub offer_expires_at: Option<DateTime<Utc>>,
    pub order_id: Option<Uuid>,
    /// How many confirmed entries of the product's resource wait ahead of
    /// this one (only for a waiting entry).
    pub ahead: Option<i64>,
    /// Units the entries ahead want (waiting, or offered and not paid yet).
    pub wanted_ahead: Option<i64>,
    /// Units of the product not sold and not held by other shoppers: what
    /// the line can still get.
    pub for_the_line: i64,
    /// Whether a group that does not fit holds up the entries behind it.
    pub in_order: bool,
    pub claim_minutes: i32,
    /// The product's drop queue: its commitment (SHA-256 of the seed), if
    /// it has one, and whether it was drawn.
    pub queue_commitment: Option<String>,
    pub queue_drawn: bool,
    pub sale_opens_at: Option<DateTime<Utc>>,
}

impl Entry {
    pub fn state(&self) -> EntryState {
        EntryState::parse(&self.state).unwrap_or(EntryState::Removed)
    }
}

const ENTRY_SQL: &str = "select w.id, w.product_id, p.resource_id, p.name as product_name, w.token, w.name, \
        w.email, w.qty, w.state, w.line_no, w.created_at, w.confirmed_at, w.offered_at, \
        w.offer_expires_at, w.order_id, \
        case when w.state = 'waiting' then \
             (select count(*) from waitlist_entries a join products q on q.id = a.product_id \
               where q.resource_id = p.resource_id and a.state = 'waiting' and a.line_no < w.line_no) \
        end as ahead, \
        case when w.state = 'waiting' then \
             (select coalesce(sum(a.qty), 0)::bigint from waitlist_entries a \
                join products q on q.id = a.product_id \
               where q.resource_id = p.resource_id \
                 and ((a.state = 'waiting' and a.line_no < w.line_no) or a.state = 'offered')) \
        end as wanted_ahead, \
        (select (r.total - r.sold - r.held + coalesce((select sum(h.qty) from holds h \
                  where h.resource_id = r.id and h.state in ('held', 'awaiting_payment') \
                    and h.account_id like 'waitlist%'), 0))::bigint \
           from resources r where r.id = p.resource_id) as for_the_line, \
        p.waitlist_in_order as in_order, p.waitlist_claim_minutes as claim_minutes, \
        p.queue_commitment, p.queue_drawn_at is not null as queue_drawn, p.sale_opens_at \
   from waitlist_entries w join products p on p.id = w.product_id";

/// A link's token: 64 hex digits, or it names nothing.
fn token_shaped(token: &str) -> bool {
    token.len() == 64
        && token
            .bytes()
            .all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
}

/// The entry a link names.
pub async fn entry_by_token(pool: &PgPool, token: &str) -> sqlx::Result<Option<Entry>> {
    if !token_shaped(token) {
        return Ok(None);
    }
    sqlx::query_as(&format!("{ENTRY_SQL} where w.token = $1"))
        .bind(token)
        .fetch_optional(pool)
        .await
}

/// A product's entries, in line (those not yet confirmed last), for staff.
pub async fn entries(pool: &PgPool, product_id: &str) -> sqlx::Result<Vec<Entry>> {
    sqlx::query_as(&format!(
        "{ENTRY_SQL} where w.product_id = $1 \
          order by w.line_no nulls last, w.created_at limit 5000"
    ))
    .bind(product_id)
    .fetch_all(pool)
    .await
}

/// Someone asking to join.
#[derive(Debug, Clone)]
pub struct JoinRequest {
    pub product_id: String,
    pub name: String,
    pub email: String,
    pub qty: i64,
    pub provider: ProviderKind,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Joined {
    /// A confirmation link is on its way (or was, for an entry the e-mail
    /// has already: the answer is the same, so the page tells nobody
    /// whether an address is on the list).
    Mailed,
    /// No such product on sale.
    UnknownProduct,
    /// How many cannot be used: 1 to the product's most per order.
    BadQty { max: i32 },
    /// The name or e-mail cannot be used.
    BadCustomer { reason: String },
}

/// Join a product's waiting list: the entry, unconfirmed, and its
/// confirmation mail, in one transaction.
pub async fn join(pool: &PgPool, request: &JoinRequest) -> sqlx::Result<Joined> {
    let customer = match Customer::parse(&request.name, &request.email) {
        Ok(customer) => customer,
        Err(error) => return Ok(Joined::BadCustomer { reason: error.0 }),
    };
    let max: Option<i32> = sqlx::query_scalar(
        "select max_per_order from products \
          where id = $1 and active and archived_at is null and not hidden",
    )
    .bind(&request.product_id)
    .fetch_optional(pool)
    .await?;
    let Some(max) = max else {
        return Ok(Joined::UnknownProduct);
    };
    if request.qty < 1 || request.qty > i64::from(max) {
        return Ok(Joined::BadQty { max });
    }
    let mut tx = pool.begin().await?;
    let id: Option<Uuid> = sqlx::query_scalar(
        "insert into waitlist_entries (product_id, token, name, email, email_key, qty, provider) \
         values ($1, $2, $3, $4, $5, $6, $7) \
         on conflict (product_id, email_key) where state in ('unconfirmed', 'waiting', 'offered') \
         do nothing returning id",
    )
    .bind(&request.product_id)
    .bind(checkout::codes::order_token())
    .bind(customer.name())
    .bind(customer.email())
    .bind(crate::limits::email_key(customer.email()))
    .bind(request.qty as i32)
    .bind(request.provider.as_str())
    .fetch_optional(&mut *tx)
    .await?;
    if let Some(id) = id {
        sqlx::query(
            "insert into outbox_jobs (kind, dedupe_key, payload) \
             values ('waitlist_mail', 'waitlist_confirm:' || $1::text, \
                     jsonb_build_object('entry_id', $1::uuid, 'what', 'confirm'))",
        )
        .bind(id)
        .execute(&mut *tx)
        .await?;
    }
    tx.commit().await?;
    Ok(Joined::Mailed)
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Confirmed {
    /// In line now (and perhaps offered units at once, if some were free).
    InLine,
    /// It was confirmed before: nothing changed.
    Already,
    /// No such entry, or one that left the list.
    NotFound,
}

/// Confirm an entry by its link: it takes its place in line, and units
/// free now are handed over at once, in the same transaction.
pub async fn confirm(pool: &PgPool, token: &str) -> sqlx::Result<Confirmed> {
    if !token_shaped(token) {
        return Ok(Confirmed::NotFound);
    }
    let mut tx = pool.begin().await?;
    // lock: the product, shared (a queue's draw takes it exclusively), so
    // an entry confirmed while its queue is drawn is either in the draw or
    // behind it, never left out
    let product: Option<(String, String, bool)> = sqlx::query_as(
        "select p.id, p.resource_id, \
                (p.queue_commitment is not null and p.queue_drawn_at is null) \
           from waitlist_entries w join products p on p.id = w.product_id \
          where w.token = $1 and w.state = 'unconfirmed' for share of p",
    )
    .bind(token)
    .fetch_optional(&mut *tx)
    .await?;
    let confirmed: Option<String> = match product {
        None => None,
        Some((_, resource, queued)) => {
            sqlx::query_scalar(
                "update waitlist_entries \
                set state = case when $2 then 'queued' else 'waiting' end, \
                    line_no = case when $2 then null else nextval('waitlist_line') end, \
                    confirmed_at = now() \
              where token = $1 and state = 'unconfirmed' returning $3::text",
            )
            .bind(token)
            .bind(queued)
            .bind(&resource)
            .fetch_optional(&mut *tx)
            .await?
        }
    };
    let answer = match confirmed {
        Some(resource) => {
            sqlx::query("select hf_hand_over($1, clock_timestamp())")
                .bind(resource)
                .execute(&mut *tx)
                .await?;
            Confirmed::InLine
        }
        None => {
            let state: Option<String> =
                sqlx::query_scalar("select state from waitlist_entries where token = $1")
                    .bind(token)
                    .fetch_optional(&mut *tx)
                    .await?;
            match state.as_deref() {
                Some("queued" | "waiting" | "offered" | "claimed" | "lapsed") => Confirmed::Already,
                _ => Confirmed::NotFound,
            }
        }
    };
    tx.commit().await?;
    Ok(answer)
}

/// Take an entry off its list (not one whose units are held: that offer
/// runs its course). True when it was taken off.
pub async fn remove(pool: &PgPool, by: Actor<'_>, entry_id: Uuid) -> sqlx::Result<bool> {
    let mut tx = pool.begin().await?;
    let who = by.name();
    let removed: Option<(String, String)> = sqlx::query_as(
        "update waitlist_entries w set state = 'removed', ended_at = now(), ended_by = $2 \
           from products p \
          where w.id = $1 and w.state in ('unconfirmed', 'queued', 'waiting') \
            and p.id = w.product_id \
         returning w.product_id, p.resource_id",
    )
    .bind(entry_id)
    .bind(&who)
    .fetch_optional(&mut *tx)
    .await?;
    let Some((product, resource)) = removed else {
        return Ok(false);
    };
    // what was set aside for the line is looked at again: for those behind
    // this entry, or back on sale when nobody waits
    sqlx::query("select hf_hand_over($1, clock_timestamp())")
        .bind(&resource)
        .execute(&mut *tx)
        .await?;
    // the line moved though the stock may not have: a new version of the
    // resource's row, and word of it, so every process's kept pages of this
    // line are read again (`LiveStock::kept_page`)
    sqlx::query(
        "with touched as (update resources set updated_at = clock_timestamp() \
                           where id = $1 returning id) \
         select pg_notify('hf_stock', id) from touched",
    )
    .bind(&resource)
    .execute(&mut *tx)
    .await?;
    if let Actor::Staff(_) = by {
        record_by(
            &mut tx,
            by,
            "remove_waitlist_entry",
            &entry_id.to_string(),
            "removed",
            json!({ "product": product }),
        )
        .await?;
    }
    tx.commit().await?;
    if let Actor::Staff(_) = by {
        log_action_by(
            by,
            "remove_waitlist_entry",
            &entry_id.to_string(),
            "removed",
        );
    }
    Ok(true)
}

/// Where claiming an offer ended.
#[derive(Debug)]
pub enum Claim {
    /// The payment page is open, the units still the shopper's: go there.
    Pay { url: String },
    /// Paid already: the order's page.
    Paid { order_token: String },
    /// The offer is not (or no longer) open: its entry says why.
    NotOpen,
    /// The provider could not open a page; the units stay held until the
    /// offer ends, so the shopper can try again.
    ProviderFailed,
}

/// Claim an entry's offer: its order's payment page, opened once (a
/// second claim finds the page the first opened).
pub async fn claim(desk: Desk<'_>, entry: &Entry) -> checkout::Result<Claim> {
    if entry.state() != EntryState::Offered && entry.state() != EntryState::Claimed {
        return Ok(Claim::NotOpen);
    }
    let Some(order_id) = entry.order_id else {
        return Ok(Claim::NotOpen);
    };
    let Some(order) = retry("order_read", Bound::Shopper, || {
        checkout::order_by_id(desk.pool, order_id)
    })
    .await?
    else {
        return Ok(Claim::NotOpen);
    };
    match order.state {
        OrderState::Paid | OrderState::RefundPending | OrderState::Refunded => {
            return Ok(Claim::Paid {
                order_token: order.token,
            });
        }
        OrderState::Pending => {}
        OrderState::Expired | OrderState::Cancelled => return Ok(Claim::NotOpen),
    }
    if let Some(url) = order.provider_url.clone() {
        return Ok(Claim::Pay { url });
    }
    let lines = retry("order_read", Bound::Shopper, || {
        checkout::order_lines(desk.pool, order_id)
    })
    .await?;
    let page = match checkout::open_page(desk, &order, &lines).await {
        Ok(page) => page,
        Err(error) => {
            tracing::warn!(order = %order_id, %error, "the payment provider failed at a waiting-list claim");
            return Ok(Claim::ProviderFailed);
        }
    };
    let attached = retry("claim_attach", Bound::Shopper, || {
        checkout::attach_payment(desk.pool, order_id, &page)
    })
    .await?;
    Ok(match attached {
        AttachOutcome::Paying { order } => Claim::Pay {
            url: order.provider_url.unwrap_or(page.url),
        },
        AttachOutcome::Ended { .. } => Claim::NotOpen,
    })
}

/// The order an offer made, if any.
pub async fn offer_order(pool: &PgPool, entry: &Entry) -> sqlx::Result<Option<Order>> {
    match entry.order_id {
        Some(id) => checkout::order_by_id(pool, id).await,
        None => Ok(None),
    }
}
