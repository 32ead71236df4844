//! Verify, dedupe, dispatch into checkout. Each provider module verifies its
//! own signature before parsing; both record the event here, in the same
//! transaction as its effect.

pub mod razorpay;
pub mod signature;
pub mod stripe;

use sqlx::{Postgres, Transaction};

/// Record a provider's event id. Returns false when it was seen before:
/// then the caller changes nothing. A concurrent delivery of the same id
/// waits here for the first transaction and then finds it.
pub async fn first_delivery(
    tx: &mut Transaction<'_, Postgres>,
    provider: &str,
    event_id: &str,
    event_type: &str,
) -> sqlx::Result<bool> {
    let fresh: Option<String> = sqlx::query_scalar(
        "insert into webhook_events (provider, event_id, event_type) values ($1, $2, $3) \
         on conflict do nothing returning event_id",
    )
    .bind(provider)
    .bind(event_id)
    .bind(event_type)
    .fetch_optional(&mut **tx)
    .await?;
    Ok(fresh.is_some())
}
