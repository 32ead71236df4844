//! Money that takes days, in the engine: a purchase moved into the settling
//! phase of `awaiting_payment` (`hf_begin_settling`), the one rule for
//! money that comes after a purchase ended (`hf_claim_again`), and whether
//! an ended purchase could be claimed again (`hf_claimable`, a hint read
//! without locks). Migration 0090 writes the functions; docs/design.md,
//! "Money that takes days", says why.

use chrono::{DateTime, Utc};
use serde::Serialize;
use uuid::Uuid;

use super::{HoldId, InventoryError, PaymentRef, Result, classify};

/// What moving a purchase into the settling phase came to.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "status", rename_all = "snake_case")]
pub enum SettleOutcome {
    /// Moved now: its units are the shopper's until `deadline`, and the
    /// sweeper leaves them until `payment_deadline` (the deadline plus the
    /// grace delay).
    Settling {
        phase: SettlingPhase,
    },
    /// It was settling already (the same debit reported again).
    Replayed {
        phase: SettlingPhase,
    },
    /// Paid already: nothing to settle.
    Confirmed,
    /// Its holds ran out before the provider said the shopper committed;
    /// the money, if it comes, meets [`claim_again`].
    Expired,
    /// Let go before the provider said so.
    Released,
    NotFound,
}

/// A purchase's settling phase.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SettlingPhase {
    pub purchase_id: HoldId,
    /// `provider:method`, as the provider names the method (`*`: unnamed).
    pub method: String,
    pub deadline: DateTime<Utc>,
    pub payment_deadline: DateTime<Utc>,
}

/// What the late-money rule decided for a payment that came after its
/// purchase ended.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "status", rename_all = "snake_case")]
pub enum ClaimOutcome {
    /// The same units were free: a new purchase, confirmed with the payment.
    Claimed {
        purchase_id: HoldId,
    },
    /// This payment claimed them again before: the same purchase.
    AlreadyClaimed {
        purchase_id: HoldId,
    },
    /// Someone let the purchase go on purpose: the money goes back.
    Released,
    /// A line does not fit any more.
    SoldOut {
        resource_id: String,
        available: i32,
    },
    /// People wait in line for a line's units: they keep priority.
    LineWaiting {
        resource_id: String,
        available: i32,
    },
    /// The payment bought another purchase.
    PaymentRefInUse {
        other: HoldId,
    },
    /// The purchase has not ended (a caller's mistake: only ended
    /// purchases meet this rule).
    NotEnded,
    NotFound,
}

#[derive(sqlx::FromRow)]
struct SettleRow {
    status: String,
    purchase_id: Option<Uuid>,
    settle_method: Option<String>,
    settle_deadline: Option<DateTime<Utc>>,
    payment_deadline: Option<DateTime<Utc>>,
}

impl SettleRow {
    fn phase(&self) -> Result<SettlingPhase> {
        let missing =
            || InventoryError::Unexpected(format!("a {} row without its phase", self.status));
        Ok(SettlingPhase {
            purchase_id: HoldId(self.purchase_id.ok_or_else(missing)?),
            method: self.settle_method.clone().ok_or_else(missing)?,
            deadline: self.settle_deadline.ok_or_else(missing)?,
            payment_deadline: self.payment_deadline.ok_or_else(missing)?,
        })
    }
}

/// Move a purchase (`id`: a hold of it, or its basket) into the settling
/// phase for a payment `provider` reports committed with `method` (its own
/// name for it; `None` when it does not say), on any executor (the confirm
/// routine's transaction).
pub async fn begin_settling<'e>(
    executor: impl sqlx::PgExecutor<'e>,
    id: HoldId,
    provider: &str,
    method: Option<&str>,
    actor: &str,
) -> Result<SettleOutcome> {
    let row: SettleRow = sqlx::query_as(
        "select status, purchase_id, settle_method, settle_deadline, payment_deadline \
           from hf_begin_settling($1, $2, $3, $4)",
    )
    .bind(id.0)
    .bind(provider)
    .bind(method)
    .bind(actor)
    .fetch_one(executor)
    .await
    .map_err(classify)?;
    Ok(match row.status.as_str() {
        "settling" => SettleOutcome::Settling {
            phase: row.phase()?,
        },
        "replayed" => SettleOutcome::Replayed {
            phase: row.phase()?,
        },
        "confirmed" => SettleOutcome::Confirmed,
        "expired" => SettleOutcome::Expired,
        "released" => SettleOutcome::Released,
        "not_found" => SettleOutcome::NotFound,
        other => {
            return Err(InventoryError::Unexpected(format!(
                "hf_begin_settling status {other:?}"
            )));
        }
    })
}

#[derive(sqlx::FromRow)]
struct ClaimRow {
    status: String,
    purchase_id: Option<Uuid>,
    resource_id: Option<String>,
    available: Option<i32>,
}

/// The one rule for late money: claim the units of the ended purchase
/// `id` again for `payment_ref`, if they are free and nobody in line has a
/// better right to them, all or nothing, in the caller's transaction.
pub async fn claim_again<'e>(
    executor: impl sqlx::PgExecutor<'e>,
    id: HoldId,
    payment_ref: &PaymentRef,
    actor: &str,
) -> Result<ClaimOutcome> {
    let row: ClaimRow = sqlx::query_as(
        "select status, purchase_id, resource_id, available from hf_claim_again($1, $2, $3)",
    )
    .bind(id.0)
    .bind(payment_ref.as_str())
    .bind(actor)
    .fetch_one(executor)
    .await
    .map_err(classify)?;
    let purchase = || {
        row.purchase_id.map(HoldId).ok_or_else(|| {
            InventoryError::Unexpected(format!("a {} claim without its purchase", row.status))
        })
    };
    let line = || {
        (
            row.resource_id.clone().unwrap_or_default(),
            row.available.unwrap_or(0),
        )
    };
    Ok(match row.status.as_str() {
        "claimed" => ClaimOutcome::Claimed {
            purchase_id: purchase()?,
        },
        "already_claimed" => ClaimOutcome::AlreadyClaimed {
            purchase_id: purchase()?,
        },
        "released" => ClaimOutcome::Released,
        "sold_out" => {
            let (resource_id, available) = line();
            ClaimOutcome::SoldOut {
                resource_id,
                available,
            }
        }
        "line_waiting" => {
            let (resource_id, available) = line();
            ClaimOutcome::LineWaiting {
                resource_id,
                available,
            }
        }
        "payment_ref_in_use" => ClaimOutcome::PaymentRefInUse { other: purchase()? },
        "not_ended" => ClaimOutcome::NotEnded,
        "not_found" => ClaimOutcome::NotFound,
        other => {
            return Err(InventoryError::Unexpected(format!(
                "hf_claim_again status {other:?}"
            )));
        }
    })
}

/// Whether the ended purchase `id` could be claimed again now, read
/// without locks: whether an authorisation for it is worth capturing.
/// [`claim_again`] decides, under the locks.
pub async fn claimable<'e>(executor: impl sqlx::PgExecutor<'e>, id: HoldId) -> Result<bool> {
    sqlx::query_scalar("select hf_claimable($1)")
        .bind(id.0)
        .fetch_one(executor)
        .await
        .map_err(classify)
}
