//! What the engine reports beyond an operation's outcome (sweeps, the drift
//! check, a resource's status, holds and their history) and the settings
//! it runs by.

use chrono::{DateTime, Utc};
use serde::Serialize;
use uuid::Uuid;

use super::{HoldState, ResourceId, Span};

/// What one sweep expired on one resource.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, sqlx::FromRow)]
pub struct SweepCount {
    pub resource_id: String,
    pub expired_holds: i32,
    pub expired_qty: i32,
}

/// Counters versus rows for one resource.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, sqlx::FromRow)]
pub struct CheckRow {
    pub resource_id: String,
    pub total: i32,
    pub held: i32,
    pub sold: i32,
    pub rows_held: i32,
    pub rows_sold: i32,
    pub drift: bool,
}

impl CheckRow {
    /// What is left to sell: the total less what is held and sold.
    pub fn available(&self) -> i32 {
        self.total - self.held - self.sold
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, sqlx::FromRow)]
pub struct Repair {
    pub resource_id: String,
    pub held_before: i32,
    pub sold_before: i32,
    pub held_after: i32,
    pub sold_after: i32,
    pub repaired: bool,
}

/// What a shop shows for a resource. `available_now` counts plain holds past
/// their TTL as free, as the next hold will.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, sqlx::FromRow)]
pub struct ResourceStatus {
    pub resource_id: String,
    pub total: i32,
    pub held: i32,
    pub sold: i32,
    pub available: i32,
    pub held_plain: i32,
    pub held_paying: i32,
    pub due: i32,
    pub available_now: i32,
}

/// A hold as staff and operators list it.
#[derive(Debug, Clone, PartialEq, Serialize, sqlx::FromRow)]
pub struct HoldRecord {
    pub id: Uuid,
    pub basket_id: Option<Uuid>,
    pub resource_id: String,
    pub account_id: String,
    pub qty: i32,
    pub state: String,
    pub idempotency_key: Option<String>,
    pub payment_ref: Option<String>,
    pub created_at: DateTime<Utc>,
    pub expires_at: DateTime<Utc>,
    pub payment_deadline: Option<DateTime<Utc>>,
    pub extensions: i32,
    pub ended_at: Option<DateTime<Utc>>,
    pub ended_by: Option<String>,
    pub end_reason: Option<String>,
}

/// One entry of a hold's history.
#[derive(Debug, Clone, PartialEq, Serialize, sqlx::FromRow)]
pub struct HoldEvent {
    pub id: i64,
    pub hold_id: Uuid,
    pub at: DateTime<Utc>,
    pub kind: String,
    pub from_state: Option<String>,
    pub to_state: String,
    pub actor: String,
    pub detail: serde_json::Value,
}

/// Filters for [`Inventory::holds`].
#[derive(Debug, Clone, Default)]
pub struct HoldFilter {
    pub resource: Option<ResourceId>,
    pub state: Option<HoldState>,
    pub older_than: Option<Span>,
    pub limit: Option<i64>,
}

/// The settings every process shares, stored in the database.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct InventorySettings {
    pub hold_ttl_seconds: f64,
    pub payment_window_seconds: f64,
    pub account_cap: Option<i32>,
    pub cap_scope: CapScope,
    pub max_extensions: i32,
    pub extension_seconds: f64,
    /// How long after a settling payment's deadline its money is still
    /// taken as in time (docs/design.md, "Money that takes days").
    pub settle_grace_seconds: f64,
}

/// How long one provider's delayed method may take (`settle_windows`);
/// `method` `*` is any method of the provider not listed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, sqlx::FromRow)]
pub struct SettleWindow {
    pub provider: String,
    pub method: String,
    pub days: i32,
    /// Monday to Friday only, or every day.
    pub business_days: bool,
    /// The provider's documentation the number comes from.
    pub source: String,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, clap::ValueEnum)]
#[serde(rename_all = "snake_case")]
pub enum CapScope {
    /// The cap counts an account's units on each resource separately.
    Resource,
    /// The cap counts an account's units across all resources.
    Global,
}

impl CapScope {
    pub(super) fn as_str(self) -> &'static str {
        match self {
            CapScope::Resource => "resource",
            CapScope::Global => "global",
        }
    }
}
