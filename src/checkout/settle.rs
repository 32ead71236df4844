//! From a payment a provider reported to the confirm routine: an
//! authorised payment is captured first, if its order still wants it (a
//! provider call, so outside any transaction); a payment for no order of
//! ours is kept for staff.

use sqlx::{PgExecutor, PgPool};
use uuid::Uuid;

use super::{
    CheckoutError, Confirmations, Fulfilment, OrderState, PaymentReport, Source, order_by_id,
    payment_matches,
};
use crate::payments::{PaymentProvider, PaymentStatus, ProviderError, ProviderPayment};

#[derive(Debug, thiserror::Error)]
pub enum SettleError {
    #[error(transparent)]
    Checkout(#[from] CheckoutError),
    #[error(transparent)]
    Provider(#[from] ProviderError),
}

impl crate::retry::Retryable for SettleError {
    fn failure(&self) -> crate::retry::Failure {
        match self {
            SettleError::Checkout(error) => error.failure(),
            // the provider's own failures are the worker's and
            // reconciliation's to try again
            SettleError::Provider(_) => crate::retry::Failure::Final,
        }
    }
}

impl From<sqlx::Error> for SettleError {
    fn from(error: sqlx::Error) -> Self {
        SettleError::Checkout(CheckoutError::Database(error))
    }
}

/// Bring a reported payment for `order_id` to the confirm routine. An
/// authorised payment that matches an order still waiting for it (pending
/// or settling, its holds alive) is captured first (for its full amount),
/// and so is one for an order whose holds expired if the late-money rule
/// could claim its units again (the confirm routine decides, under the
/// locks, and refunds a capture that lost the race). Any other (the order
/// ended, or the payment is not what it asks) is left to its provider,
/// which gives it back by itself, rather than captured only to be
/// refunded.
pub async fn settle_payment(
    confirmations: &Confirmations,
    provider: &dyn PaymentProvider,
    order_id: Uuid,
    payment: ProviderPayment,
    source: Source,
) -> Result<Fulfilment, SettleError> {
    let pool = confirmations.pool();
    let mut payment = payment;
    if payment.status == PaymentStatus::Authorized && wanted(pool, order_id, &payment).await? {
        payment = provider.capture(&payment).await?;
    }
    let report = PaymentReport {
        order_id,
        payment,
        source,
    };
    Ok(confirmations.confirm(report).await?)
}

/// Whether an order wants an authorised payment (unlocked reads: the
/// confirm routine decides again under the lock): it matches the order,
/// and the order waits for it, or its holds expired and the late-money
/// rule could claim them again now.
async fn wanted(
    pool: &PgPool,
    order_id: Uuid,
    payment: &ProviderPayment,
) -> Result<bool, SettleError> {
    let Some(order) = order_by_id(pool, order_id).await? else {
        return Ok(false);
    };
    let matches = payment_matches(
        (
            order.provider,
            order.provider_session_id.as_deref(),
            order.amount_minor,
            &order.currency,
        ),
        payment,
    )
    .is_ok();
    if !matches {
        return Ok(false);
    }
    Ok(match (order.state, order.hold_id) {
        (OrderState::Pending | OrderState::Settling, _) => holds_alive(pool, order_id).await?,
        (OrderState::Expired, Some(hold)) => {
            crate::inventory::claimable(pool, crate::inventory::HoldId(hold))
                .await
                .map_err(CheckoutError::from)?
        }
        _ => false,
    })
}

/// Whether every hold of an order is alive and inside its time: between a
/// hold's deadline and the sweeper, its order still reads `pending`, and
/// money captured then would only be refunded.
async fn holds_alive(pool: &PgPool, order_id: Uuid) -> sqlx::Result<bool> {
    sqlx::query_scalar(
        "select coalesce(bool_and(h.state in ('held', 'awaiting_payment') \
                                  and coalesce(h.payment_deadline, h.expires_at) > now()), false) \
           from orders o join holds h on h.purchase_id = o.hold_id \
          where o.id = $1",
    )
    .bind(order_id)
    .fetch_one(pool)
    .await
}

/// Keep a signed payment for a page Holdfast does not know, for staff:
/// never acknowledged and forgotten. Seen again, it is updated.
pub async fn record_orphan<'e>(
    executor: impl PgExecutor<'e>,
    payment: &ProviderPayment,
    seen_in: &str,
) -> sqlx::Result<()> {
    sqlx::query(
        "insert into orphan_payments \
                (provider, payment_ref, page_id, amount_minor, currency, status, order_hint, seen_in) \
         values ($1, $2, $3, $4, $5, $6, $7, $8) \
         on conflict (provider, payment_ref) do update \
            set status = excluded.status, last_seen_at = now(), seen_in = excluded.seen_in",
    )
    .bind(payment.provider)
    .bind(&payment.payment_ref)
    .bind(&payment.page_id)
    .bind(payment.amount_minor)
    .bind(&payment.currency)
    .bind(payment.status.as_str())
    .bind(payment.order_hint)
    .bind(seen_in)
    .execute(executor)
    .await?;
    tracing::warn!(
        provider = %payment.provider,
        payment = %payment.payment_ref,
        "a signed payment for a page Holdfast does not know: kept for staff"
    );
    Ok(())
}
