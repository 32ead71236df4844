//! An order that owes nothing (a booking without a deposit, a voucher
//! that takes the total to zero) is confirmed at once by the one confirm
//! routine, without a provider: no payment page is opened and no money
//! moves, so no provider can report it. The engine sells its holds under
//! a reference of the shop's own (`free:{order}`), and the order is
//! fulfilled as any paid one is (codes, confirmation mail), in one
//! transaction. docs/design.md, "An order of nothing".

use sqlx::PgPool;
use uuid::Uuid;

use crate::inventory::{self, ConfirmOutcome, HoldId, PaymentRef};

use super::confirm::{Fulfilment, fulfil};
use super::{CheckoutError, Result};

/// The order as the free confirmation reads it, locked.
#[derive(sqlx::FromRow)]
struct Owed {
    hold_id: Option<Uuid>,
    amount_minor: i64,
    provider_session_id: Option<String>,
}

/// The reference a free order is sold under: one per order, so a second
/// confirmation of it finds it sold ("already fulfilled").
pub fn free_ref(order_id: Uuid) -> String {
    format!("free:{order_id}")
}

/// Confirm an order of nothing, in a transaction of its own. Refused (and
/// nothing changes) for an order that owes money or has a payment page:
/// those are confirmed only by a provider's report. Safe to run twice: the
/// second finds the order sold.
pub async fn confirm_free(pool: &PgPool, order_id: Uuid) -> Result<Fulfilment> {
    let mut tx = pool.begin().await?;
    let owed: Option<Owed> = sqlx::query_as(
        "select hold_id, amount_minor, provider_session_id from orders where id = $1 for update",
    )
    .bind(order_id)
    .fetch_optional(&mut *tx)
    .await?;
    let Some(owed) = owed else {
        return Ok(Fulfilment::Unknown);
    };
    if owed.amount_minor != 0 || owed.provider_session_id.is_some() {
        return Err(CheckoutError::InvalidInput(format!(
            "order {order_id} owes {} and is paid at a provider",
            owed.amount_minor
        )));
    }
    let Some(hold) = owed.hold_id.map(HoldId) else {
        return Ok(Fulfilment::Unknown);
    };
    let reference = PaymentRef::parse(&free_ref(order_id))?;
    let outcome = inventory::confirm_many(&mut *tx, &[(hold, &reference)])
        .await?
        .pop();
    let fulfilment = match outcome {
        Some(ConfirmOutcome::Confirmed { .. }) => {
            fulfil(&mut tx, &[(order_id, &reference)]).await?;
            Fulfilment::Fulfilled { order_id }
        }
        Some(ConfirmOutcome::AlreadyConfirmed { .. }) => Fulfilment::AlreadyFulfilled { order_id },
        // the holds ended before (released, expired): nothing is sold and
        // nothing is owed back
        other => {
            tracing::warn!(order = %order_id, ?other, "an order of nothing could not be confirmed");
            Fulfilment::Unknown
        }
    };
    tx.commit().await?;
    crate::metrics::confirmation(fulfilment.label(), "free");
    Ok(fulfilment)
}
