//! The waiting list of a sold-out product (docs/waiting-list.md). A
//! shopper joins with a name, an e-mail and how many; the entry counts
//! once the link mailed to them confirmed it, and takes its place in line
//! then. The handover is the database's (`hf_hand_over`, migration 0070):
//! the transaction that frees units holds them for the first waiting entry
//! they fit and writes its pending order, so nobody else can take them in
//! between. Claiming opens that order's payment page with the units
//! already the shopper's; an offer not claimed within the product's claim
//! window expires like any hold, and its expiry offers the units on.
//!
//! By concern: joining ([`joining`]), taking a place in line and leaving it
//! ([`in_line`]), places in line from memory ([`lines`]), claiming an
//! offer ([`claim`]); what an entry is, here.

mod claim;
mod in_line;
mod joining;
mod lines;

pub use claim::{Claim, claim, offer_order};
pub use in_line::{Confirmed, confirm, remove};
pub use joining::{JoinRequest, Joined, Joins, NewEntry, join};
pub use lines::Lines;

use chrono::{DateTime, Utc};
use sqlx::{FromRow, PgPool};
use uuid::Uuid;

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

/// An entry as its row says, without its place in line ([`Lines::place`]
/// adds that: one read of the whole line per change, not one per page).
const ENTRY_SQL: &str = "select w.id, w.product_id, p.resource_id, p.name as product_name, w.token, w.name, \
        w.email, w.qty, w.state, w.line_no, w.created_at, w.confirmed_at, w.offered_at, \
        w.offer_expires_at, w.order_id, \
        null::bigint as ahead, null::bigint as wanted_ahead, 0::bigint as for_the_line, \
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

/// What is free on the resource goes to its line (the database's
/// handover, `hf_hand_over`): held for the first waiting entry it fits, or
/// back on sale when nobody waits.
pub(crate) async fn hand_over(conn: &mut sqlx::PgConnection, resource: &str) -> sqlx::Result<()> {
    sqlx::query("select hf_hand_over($1, clock_timestamp())")
        .bind(resource)
        .execute(conn)
        .await?;
    Ok(())
}

/// The resource's line moved though its stock may not have: a new version
/// of its row, and word of it, so every process's kept pages of the line
/// (`LiveStock::kept_page`) and its line in memory ([`Lines`]) are read
/// again.
pub(crate) async fn line_moved(conn: &mut sqlx::PgConnection, resource: &str) -> sqlx::Result<()> {
    sqlx::query(
        "with touched as (update resources set updated_at = clock_timestamp() \
                           where id = $1 returning id) \
         select pg_notify('hf_stock', id) from touched",
    )
    .bind(resource)
    .execute(conn)
    .await?;
    Ok(())
}
