//! Step two, after the provider answered: the payment page is remembered
//! and the holds move into the payment phase.

use serde::Serialize;
use sqlx::PgPool;
use uuid::Uuid;

use crate::inventory::{self, BeginPaymentOutcome, HoldId, Span};
use crate::payments::PaymentPage;

use chrono::{DateTime, Utc};

use super::{CheckoutError, Order, Result};

/// How long past the provider's own expiry a paying hold lives, so a
/// payment the provider accepts finds it alive.
pub(super) const MARGIN_SECONDS: i64 = 5 * 60;

/// The payment window for a provider session that ends at `expires_at`.
pub(super) fn payment_window_seconds(expires_at: DateTime<Utc>) -> i64 {
    (expires_at - Utc::now()).num_seconds().max(0) + MARGIN_SECONDS
}

#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "status", rename_all = "snake_case")]
pub enum AttachOutcome {
    /// The holds live until after the provider's session expires: redirect.
    Paying { order: Order },
    /// The holds ended before payment could start (the sweeper, a release):
    /// the shopper must start again.
    Ended { order: Order },
}

/// Step two, after the provider answered: remember its session and move the
/// holds into the payment phase, with a deadline a margin past the
/// session's own expiry so a payment the provider accepts finds them alive.
pub async fn attach_payment(
    pool: &PgPool,
    order_id: Uuid,
    session: &PaymentPage,
) -> Result<AttachOutcome> {
    let mut tx = pool.begin().await?;
    let hold_id: Option<Uuid> =
        sqlx::query_scalar("select hold_id from orders where id = $1 for update")
            .bind(order_id)
            .fetch_optional(&mut *tx)
            .await?
            .flatten();
    let Some(hold_id) = hold_id else {
        return Err(CheckoutError::InvalidInput(format!(
            "no started order {order_id}"
        )));
    };
    let window = payment_window_seconds(session.expires_at);
    let window = Span::parse(
        "payment window",
        std::time::Duration::from_secs(window as u64),
    )?;
    let outcome = inventory::begin_payment(&mut *tx, HoldId(hold_id), Some(window)).await?;
    // a purchase already confirmed (the money beat us here) is alive too
    let alive = matches!(
        outcome,
        BeginPaymentOutcome::AwaitingPayment { .. }
            | BeginPaymentOutcome::Replayed { .. }
            | BeginPaymentOutcome::Confirmed { .. }
    );
    let order: Order = sqlx::query_as(
        "update orders \
            set provider_session_id = $2, provider_url = $3, provider_expires_at = $4, \
                state = case when $5 or state <> 'pending' then state else 'expired' end, \
                updated_at = now() \
          where id = $1 returning *",
    )
    .bind(order_id)
    .bind(&session.id)
    .bind(&session.url)
    .bind(session.expires_at)
    .bind(alive)
    .fetch_one(&mut *tx)
    .await?;
    tx.commit().await?;
    Ok(if alive {
        AttachOutcome::Paying { order }
    } else {
        AttachOutcome::Ended { order }
    })
}
