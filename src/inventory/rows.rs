//! The rows the engine's functions return, read into outcomes: the one
//! place that knows each function's statuses.

use chrono::{DateTime, Utc};
use uuid::Uuid;

use super::*;

/// The row every hold-level function returns (`hold_result` in SQL).
#[derive(Debug, sqlx::FromRow)]
pub(super) struct ResultRow {
    pub(super) status: String,
    hold_id: Option<Uuid>,
    resource_id: Option<String>,
    account_id: Option<String>,
    qty: Option<i32>,
    state: Option<String>,
    expires_at: Option<DateTime<Utc>>,
    payment_deadline: Option<DateTime<Utc>>,
    payment_ref: Option<String>,
    existing_payment_ref: Option<String>,
    other_hold_id: Option<Uuid>,
    available: Option<i32>,
    extensions: Option<i32>,
}

impl ResultRow {
    /// What hf_confirm answers, read.
    pub(super) fn confirm_outcome(&self) -> Result<ConfirmOutcome> {
        Ok(match self.status.as_str() {
            "confirmed" => ConfirmOutcome::Confirmed {
                purchase: self.purchase()?,
            },
            "already_confirmed" => ConfirmOutcome::AlreadyConfirmed {
                purchase: self.purchase()?,
            },
            "duplicate_payment" => ConfirmOutcome::DuplicatePayment {
                purchase: self.purchase()?,
                existing_payment_ref: self
                    .existing_payment_ref
                    .clone()
                    .ok_or_else(|| self.missing("existing_payment_ref"))?,
            },
            "payment_ref_in_use" => ConfirmOutcome::PaymentRefInUse {
                purchase: self.purchase()?,
                other_hold_id: HoldId(
                    self.other_hold_id
                        .ok_or_else(|| self.missing("other_hold_id"))?,
                ),
            },
            "expired" => ConfirmOutcome::Expired {
                purchase: self.purchase()?,
            },
            "released" => ConfirmOutcome::Released {
                purchase: self.purchase()?,
            },
            "not_found" => ConfirmOutcome::NotFound,
            _ => return Err(self.unexpected()),
        })
    }

    /// What hf_hold and hf_hold_many answer, read.
    pub(super) fn hold_outcome(&self) -> Result<HoldOutcome> {
        crate::metrics::hold(&self.status);
        Ok(match self.status.as_str() {
            "held" => HoldOutcome::Held {
                hold: self.hold()?,
                available: self.available()?,
            },
            "replayed" => HoldOutcome::Replayed { hold: self.hold()? },
            "insufficient" => HoldOutcome::Insufficient {
                available: self.available()?,
            },
            "account_cap" => HoldOutcome::AccountCap {
                remaining: self.available()?,
            },
            "unknown_resource" => HoldOutcome::UnknownResource,
            _ => return Err(self.unexpected()),
        })
    }

    pub(super) fn unexpected(&self) -> InventoryError {
        InventoryError::Unexpected(format!("status {:?}", self.status))
    }

    pub(super) fn missing(&self, field: &str) -> InventoryError {
        InventoryError::Unexpected(format!("{} without {field}", self.status))
    }

    pub(super) fn hold(&self) -> Result<Hold> {
        let state = self.state.as_deref().and_then(HoldState::from_db);
        Ok(Hold {
            id: HoldId(self.hold_id.ok_or_else(|| self.missing("hold_id"))?),
            resource_id: self
                .resource_id
                .clone()
                .ok_or_else(|| self.missing("resource_id"))?,
            account_id: self
                .account_id
                .clone()
                .ok_or_else(|| self.missing("account_id"))?,
            qty: self.qty.ok_or_else(|| self.missing("qty"))?,
            state: state.ok_or_else(|| self.missing("state"))?,
            expires_at: self.expires_at.ok_or_else(|| self.missing("expires_at"))?,
            payment_deadline: self.payment_deadline,
            payment_ref: self.payment_ref.clone(),
            extensions: self.extensions.unwrap_or(0),
        })
    }

    pub(super) fn purchase(&self) -> Result<Purchase> {
        Ok(Purchase {
            id: HoldId(self.hold_id.ok_or_else(|| self.missing("hold_id"))?),
            resource_id: self.resource_id.clone(),
            account_id: self
                .account_id
                .clone()
                .ok_or_else(|| self.missing("account_id"))?,
            qty: self.qty.ok_or_else(|| self.missing("qty"))?,
            state: self.state.as_deref().and_then(HoldState::from_db),
            expires_at: self.expires_at.ok_or_else(|| self.missing("expires_at"))?,
            payment_deadline: self.payment_deadline,
            payment_ref: self.payment_ref.clone(),
            extensions: self.extensions.unwrap_or(0),
        })
    }

    pub(super) fn available(&self) -> Result<i32> {
        self.available.ok_or_else(|| self.missing("available"))
    }
}

/// The row `hf_hold_basket` returns per line.
#[derive(Debug, sqlx::FromRow)]
pub(super) struct BasketRow {
    status: String,
    basket_id: Option<Uuid>,
    resource_id: String,
    qty: i32,
    line_status: String,
    hold_id: Option<Uuid>,
    available: Option<i32>,
    expires_at: Option<DateTime<Utc>>,
}

pub(super) fn basket_outcome(rows: Vec<BasketRow>) -> Result<BasketOutcome> {
    let unexpected = |what: &str| InventoryError::Unexpected(format!("basket row without {what}"));
    let first = rows.first().ok_or_else(|| unexpected("any line"))?;
    crate::metrics::hold(&first.status);
    let held_lines = |rows: &[BasketRow]| -> Result<Vec<HeldLine>> {
        rows.iter()
            .map(|row| {
                Ok(HeldLine {
                    resource_id: row.resource_id.clone(),
                    qty: row.qty,
                    hold_id: HoldId(row.hold_id.ok_or_else(|| unexpected("hold_id"))?),
                    available: row.available.unwrap_or(0),
                })
            })
            .collect()
    };
    let availability = |rows: &[BasketRow], short: &str| -> Vec<LineAvailability> {
        rows.iter()
            .map(|row| LineAvailability {
                resource_id: row.resource_id.clone(),
                requested: row.qty,
                available: row.available.unwrap_or(0),
                short: row.line_status == short,
            })
            .collect()
    };
    Ok(match first.status.as_str() {
        "held" => BasketOutcome::Held {
            basket_id: HoldId(first.basket_id.ok_or_else(|| unexpected("basket_id"))?),
            expires_at: first.expires_at.ok_or_else(|| unexpected("expires_at"))?,
            lines: held_lines(&rows)?,
        },
        "replayed" => BasketOutcome::Replayed {
            // a replay of a single hold made with the same key has no basket id
            basket_id: HoldId(
                first
                    .basket_id
                    .or(first.hold_id)
                    .ok_or_else(|| unexpected("basket_id"))?,
            ),
            lines: held_lines(&rows)?,
        },
        "insufficient" => BasketOutcome::Insufficient {
            lines: availability(&rows, "short"),
        },
        "account_cap" => BasketOutcome::AccountCap {
            lines: availability(&rows, "over_cap"),
        },
        "unknown_resource" => BasketOutcome::UnknownResource {
            unknown: rows
                .iter()
                .filter(|row| row.line_status == "unknown")
                .map(|row| row.resource_id.clone())
                .collect(),
        },
        other => {
            return Err(InventoryError::Unexpected(format!(
                "basket status {other:?}"
            )));
        }
    })
}
