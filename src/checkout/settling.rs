//! A payment the provider says is committed but not yet money (a bank
//! debit settling, a bank that has not answered): the confirm routine moves
//! its order into the settling phase, in the transaction that changes the
//! order. The engine keeps the units until the method's deadline plus the
//! grace delay (`hf_begin_settling`); the order says `settling`, the
//! shopper is mailed, and `order.settling` goes to the shop's webhooks.
//! docs/design.md, "Money that takes days".

use chrono::{DateTime, Utc};
use serde::Serialize;
use sqlx::{PgExecutor, Postgres, Transaction};
use uuid::Uuid;

use super::{Result, outbox};
use crate::inventory::{self, HoldId, SettleOutcome};
use crate::payments::ProviderPayment;

/// What moving an order into the settling phase came to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Settled {
    /// It settles (now, or already did): its units are held until `until`.
    Settling {
        method: String,
        until: DateTime<Utc>,
    },
    /// Its holds ended, or it is paid: nothing to settle; the money, if it
    /// comes, is judged then.
    NotWaiting,
    /// Its hold is gone.
    Unknown,
}

/// Move the order of a matching, pending payment into the settling phase
/// (or find it there already: the webhook, the return and reconciliation
/// all report the same debit). The order is locked by the caller.
pub(super) async fn begin(
    tx: &mut Transaction<'_, Postgres>,
    order_id: Uuid,
    payment: &ProviderPayment,
    hold: HoldId,
    actor: &str,
) -> Result<Settled> {
    let outcome = inventory::begin_settling(
        &mut **tx,
        hold,
        payment.provider.as_str(),
        payment.method.as_deref(),
        actor,
    )
    .await?;
    let phase = match outcome {
        SettleOutcome::Settling { phase } | SettleOutcome::Replayed { phase } => phase,
        SettleOutcome::Confirmed | SettleOutcome::Expired | SettleOutcome::Released => {
            return Ok(Settled::NotWaiting);
        }
        SettleOutcome::NotFound => {
            tracing::warn!(order = %order_id, "the order's hold is gone");
            return Ok(Settled::Unknown);
        }
    };
    let moved: Option<Uuid> = sqlx::query_scalar(
        "update orders set state = 'settling', settle_method = $2, settling_until = $3, \
                updated_at = now() \
          where id = $1 and state = 'pending' returning id",
    )
    .bind(order_id)
    .bind(&phase.method)
    .bind(phase.deadline)
    .fetch_optional(&mut **tx)
    .await?;
    if moved.is_some() {
        outbox::queue(&mut **tx, &outbox::OutboxJob::OrderSettling { order_id }).await?;
        tracing::info!(order = %order_id, method = %phase.method, until = %phase.deadline, "payment settling");
    }
    Ok(Settled::Settling {
        method: phase.method,
        until: phase.deadline,
    })
}

/// What an order's pages and its staff need of its settling and of the
/// late-money rule.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, sqlx::FromRow)]
pub struct SettlingView {
    /// `provider:method`, while or after the order settled.
    pub settle_method: Option<String>,
    /// Until when its units were (or are) the shopper's.
    pub settling_until: Option<DateTime<Utc>>,
    /// `claimed_again` or `refunded`: money that came after the holds
    /// ended.
    pub late_money: Option<String>,
    pub late_money_at: Option<DateTime<Utc>>,
}

impl SettlingView {
    /// The method as people read it (`SEPA Direct Debit`).
    pub fn method_words(&self) -> String {
        self.settle_method
            .as_deref()
            .map(method_words)
            .unwrap_or_default()
    }

    /// What the late-money rule decided, in words; empty: nothing came late.
    pub fn late_words(&self) -> &'static str {
        late_money_words(self.late_money.as_deref())
    }
}

/// What the late-money rule decided (`orders.late_money`), in staff's
/// words; empty: nothing came late.
pub fn late_money_words(decided: Option<&str>) -> &'static str {
    match decided {
        Some("claimed_again") => "late money: units claimed again",
        Some("refunded") => "late money: refunded",
        _ => "",
    }
}

/// A settling method (`stripe:sepa_debit`) in words for the shopper and
/// staff.
pub fn method_words(method: &str) -> String {
    let (_, name) = method.split_once(':').unwrap_or(("", method));
    match name {
        "sepa_debit" => "SEPA Direct Debit".into(),
        "us_bank_account" => "ACH Direct Debit".into(),
        "bacs_debit" => "Bacs Direct Debit".into(),
        "au_becs_debit" => "BECS Direct Debit".into(),
        "acss_debit" => "pre-authorised debit".into(),
        "upi" => "UPI".into(),
        "netbanking" => "netbanking".into(),
        "card" => "card".into(),
        "*" | "" => "a bank payment".into(),
        other => other.replace('_', " "),
    }
}

/// An order's settling and late-money facts.
pub async fn settling_of<'e>(
    executor: impl PgExecutor<'e>,
    order_id: Uuid,
) -> sqlx::Result<SettlingView> {
    Ok(sqlx::query_as(
        "select settle_method, settling_until, late_money, late_money_at from orders where id = $1",
    )
    .bind(order_id)
    .fetch_optional(executor)
    .await?
    .unwrap_or_default())
}
