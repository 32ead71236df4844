//! The one rule for late money, as the confirm routine applies it: a
//! payment for an order whose holds ended is sold only if the same units
//! can be claimed again at once, and otherwise goes back in full. The
//! engine decides the claim (`hf_claim_again`: all or nothing, under the
//! resources' locks, the waiting list's entries and other holds first);
//! here, under the order's lock, the order's products must still be on
//! sale, and what was decided is recorded on the order (money that goes
//! back as the order's refunded amount, as a staff refund's is). Whichever
//! path reported the money (the return, a webhook, reconciliation, a
//! capture) comes through here. docs/design.md, "One rule for late money".

use sqlx::{Postgres, Transaction};
use uuid::Uuid;

use super::Result;
use crate::inventory::{self, ClaimOutcome, HoldId, PaymentRef};

/// What the rule decided.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum LateMoney {
    /// The same units were free: the order points at its new purchase and
    /// is to be fulfilled with this payment.
    ClaimedAgain,
    /// The money goes back, for this reason (the refund job's).
    Refunded(&'static str),
}

/// Apply the rule to `payment_ref`, which came for `order_id` after its
/// purchase `hold` ended (`released`: let go on purpose, so never claimed
/// again). The order is locked by the caller.
pub(super) async fn judge(
    tx: &mut Transaction<'_, Postgres>,
    order_id: Uuid,
    hold: HoldId,
    payment_ref: &PaymentRef,
    released: bool,
    actor: &str,
) -> Result<LateMoney> {
    let verdict = if released {
        LateMoney::Refunded("hold_released")
    } else if off_sale(tx, order_id).await? {
        LateMoney::Refunded("off_sale")
    } else if booked(tx, order_id).await? {
        // its table may be someone else's by now, and a party without a
        // table is not a sale (docs/design.md, "Tables: a party at a time")
        LateMoney::Refunded("table_released")
    } else {
        match inventory::claim_again(&mut **tx, hold, payment_ref, actor).await? {
            ClaimOutcome::Claimed { purchase_id }
            | ClaimOutcome::AlreadyClaimed { purchase_id } => {
                sqlx::query("update orders set hold_id = $2, updated_at = now() where id = $1")
                    .bind(order_id)
                    .bind(purchase_id.0)
                    .execute(&mut **tx)
                    .await?;
                LateMoney::ClaimedAgain
            }
            ClaimOutcome::Released => LateMoney::Refunded("hold_released"),
            ClaimOutcome::SoldOut { .. } => LateMoney::Refunded("sold_out_after_expiry"),
            ClaimOutcome::LineWaiting { .. } => LateMoney::Refunded("line_waiting"),
            // the engine answered `expired` for this payment a moment ago,
            // under the same locks: none of these can follow
            ClaimOutcome::PaymentRefInUse { .. }
            | ClaimOutcome::NotEnded
            | ClaimOutcome::NotFound => {
                tracing::warn!(order = %order_id, "late money the engine would not judge");
                LateMoney::Refunded("hold_expired")
            }
        }
    };
    let recorded = match verdict {
        LateMoney::ClaimedAgain => "claimed_again",
        LateMoney::Refunded(_) => "refunded",
    };
    // money going back in full is the order's refunded money, where staff
    // refunds add theirs and every reader reads it (the orders export,
    // the API's order, the admin): the payment matched the order's amount
    // (the confirm routine's first look), and an order whose holds ended
    // unpaid had nothing refunded before, so it is `amount_minor`, within
    // what was paid, however many times the money is reported
    sqlx::query(
        "update orders \
            set late_money = $2, late_money_at = now(), updated_at = now(), \
                refunded_minor = case when $2 = 'refunded' then amount_minor \
                                      else refunded_minor end \
          where id = $1",
    )
    .bind(order_id)
    .bind(recorded)
    .execute(&mut **tx)
    .await?;
    crate::metrics::late_money(recorded);
    tracing::info!(order = %order_id, verdict = ?verdict, actor, "late money");
    Ok(verdict)
}

/// Whether one of the order's products is no longer sold (taken off sale,
/// archived, its sale closed): its units are not to be sold again, free or
/// not.
async fn off_sale(tx: &mut Transaction<'_, Postgres>, order_id: Uuid) -> sqlx::Result<bool> {
    sqlx::query_scalar(
        "select exists (select 1 from order_lines l join products p on p.id = l.product_id \
                         where l.order_id = $1 \
                           and (not p.active or p.archived_at is not null \
                                or (p.sale_closes_at is not null and p.sale_closes_at <= now())))",
    )
    .bind(order_id)
    .fetch_one(&mut **tx)
    .await
}

/// Whether the order books a table: its covers could be claimed again,
/// its table not.
async fn booked(tx: &mut Transaction<'_, Postgres>, order_id: Uuid) -> sqlx::Result<bool> {
    sqlx::query_scalar("select exists (select 1 from bookings where order_id = $1)")
        .bind(order_id)
        .fetch_one(&mut **tx)
        .await
}
