//! What each engine operation can come to: values, matched exhaustively
//! by the caller. None of them is an error.

use chrono::{DateTime, Utc};
use serde::Serialize;

use super::{HoldId, HoldState};

/// A single hold, as the hold operations see it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Hold {
    pub id: HoldId,
    pub resource_id: String,
    pub account_id: String,
    pub qty: i32,
    pub state: HoldState,
    pub expires_at: DateTime<Utc>,
    pub payment_deadline: Option<DateTime<Utc>>,
    pub payment_ref: Option<String>,
    pub extensions: i32,
}

/// A purchase: a single hold or a whole basket. The hold-id operations act
/// on purchases; for a basket, `resource_id` is `None` and `qty` is the sum
/// of its lines.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Purchase {
    pub id: HoldId,
    pub resource_id: Option<String>,
    pub account_id: String,
    pub qty: i32,
    /// `None` only if the lines disagree, which the engine never leaves.
    pub state: Option<HoldState>,
    pub expires_at: DateTime<Utc>,
    pub payment_deadline: Option<DateTime<Utc>>,
    pub payment_ref: Option<String>,
    pub extensions: i32,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "status", rename_all = "snake_case")]
pub enum HoldOutcome {
    Held {
        hold: Hold,
        available: i32,
    },
    /// The same (resource, account, idempotency key) was held before.
    Replayed {
        hold: Hold,
    },
    Insufficient {
        available: i32,
    },
    /// The account would hold more than its cap; `remaining` it may still take.
    AccountCap {
        remaining: i32,
    },
    UnknownResource,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "status", rename_all = "snake_case")]
pub enum BeginPaymentOutcome {
    AwaitingPayment { purchase: Purchase },
    Replayed { purchase: Purchase },
    Expired { purchase: Purchase },
    Confirmed { purchase: Purchase },
    Released { purchase: Purchase },
    NotFound,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "status", rename_all = "snake_case")]
pub enum ConfirmOutcome {
    /// The first confirmation: fulfil.
    Confirmed {
        purchase: Purchase,
    },
    /// The same payment again (the other path, a retry): nothing to do.
    AlreadyConfirmed {
        purchase: Purchase,
    },
    /// A second payment for a confirmed purchase: refund it.
    DuplicatePayment {
        purchase: Purchase,
        existing_payment_ref: String,
    },
    /// This payment already bought another purchase: flag for staff.
    PaymentRefInUse {
        purchase: Purchase,
        other_hold_id: HoldId,
    },
    /// The money came too late: refund it.
    Expired {
        purchase: Purchase,
    },
    /// The hold was released before the money came: refund it.
    Released {
        purchase: Purchase,
    },
    NotFound,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "status", rename_all = "snake_case")]
pub enum ReleaseOutcome {
    Released { purchase: Purchase },
    AlreadyReleased { purchase: Purchase },
    Confirmed { purchase: Purchase },
    Expired { purchase: Purchase },
    NotFound,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "status", rename_all = "snake_case")]
pub enum ExtendOutcome {
    Extended { purchase: Purchase },
    NotExtendable { purchase: Purchase },
    NotFound,
}

/// A resource's counters.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, sqlx::FromRow)]
pub struct Counters {
    pub resource_id: String,
    pub total: i32,
    pub held: i32,
    pub sold: i32,
    pub available: i32,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "status", rename_all = "snake_case")]
pub enum UpsertOutcome {
    Created {
        counters: Counters,
    },
    Updated {
        counters: Counters,
    },
    /// Refused: more units are held or sold than the new total.
    CapacityBelowCommitted {
        counters: Counters,
        requested: i32,
    },
}

/// A basket line that was held.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct HeldLine {
    pub resource_id: String,
    pub qty: i32,
    pub hold_id: HoldId,
    pub available: i32,
}

/// A basket line and what is left of its resource, for refusals.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct LineAvailability {
    pub resource_id: String,
    pub requested: i32,
    /// Units left (for `AccountCap`: units the account may still take).
    pub available: i32,
    /// Whether this line is the reason for the refusal.
    pub short: bool,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "status", rename_all = "snake_case")]
pub enum BasketOutcome {
    Held {
        basket_id: HoldId,
        expires_at: DateTime<Utc>,
        lines: Vec<HeldLine>,
    },
    Replayed {
        basket_id: HoldId,
        lines: Vec<HeldLine>,
    },
    /// Nothing was held; the short lines say what is left.
    Insufficient {
        lines: Vec<LineAvailability>,
    },
    AccountCap {
        lines: Vec<LineAvailability>,
    },
    UnknownResource {
        unknown: Vec<String>,
    },
}
