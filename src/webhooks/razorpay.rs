//! `POST /webhooks/razorpay`: `X-Razorpay-Signature` (hex HMAC-SHA256 of the
//! raw body with the webhook secret) is checked before parsing; the event
//! id from `X-Razorpay-Event-Id` is recorded in the same transaction as the
//! effect. Razorpay retries for a day and then disables the webhook, so the
//! work is done inside the request's transaction and answered at once.

use serde_json::Value;
use sqlx::PgPool;

use super::signature::hmac_sha256_matches;
use super::stripe::Verdict;
use crate::checkout::{self, CheckoutError, PaymentReport, Provider};
use crate::configuration::Secret;
use crate::inventory::PaymentRef;

/// Receive one delivery.
pub async fn receive(
    pool: &PgPool,
    secret: Option<&Secret>,
    signature: Option<&str>,
    event_id: Option<&str>,
    body: &[u8],
) -> Result<Verdict, CheckoutError> {
    let Some(secret) = secret.filter(|s| !s.expose().is_empty()) else {
        return Ok(Verdict::Rejected("no webhook secret configured".into()));
    };
    let Some(signature) = signature else {
        return Ok(Verdict::Rejected("no signature header".into()));
    };
    if !hmac_sha256_matches(secret.expose().as_bytes(), body, signature) {
        return Ok(Verdict::Rejected("no signature matches".into()));
    }
    let Some(event_id) = event_id.filter(|id| !id.is_empty() && id.len() <= 255) else {
        return Ok(Verdict::Rejected("no event id header".into()));
    };
    let Ok(event) = serde_json::from_slice::<Value>(body) else {
        return Ok(Verdict::Rejected("the body is not a Razorpay event".into()));
    };
    let Some(kind) = event["event"].as_str().filter(|k| k.len() <= 100) else {
        return Ok(Verdict::Rejected("the event has no type".into()));
    };

    let mut tx = pool.begin().await?;
    if !super::first_delivery(&mut tx, "razorpay", event_id, kind).await? {
        tx.rollback().await?;
        return Ok(Verdict::Duplicate);
    }
    let payment = &event["payload"]["payment"]["entity"];
    let verdict = match kind {
        "payment.captured" | "order.paid" => {
            match (payment["id"].as_str(), payment["order_id"].as_str()) {
                (Some(payment_id), Some(razorpay_order)) => {
                    let order_id = checkout::order_by_provider_session(
                        &mut *tx,
                        Provider::Razorpay,
                        razorpay_order,
                    )
                    .await?
                    .map(|order| order.id);
                    match (order_id, PaymentRef::parse(payment_id)) {
                        (Some(order_id), Ok(payment_ref)) => {
                            let report = PaymentReport {
                                order_id,
                                provider: Provider::Razorpay,
                                payment_ref,
                                source: "razorpay-webhook",
                            };
                            Verdict::Confirmed(
                                checkout::confirm_payment_in(&mut tx, &report).await?,
                            )
                        }
                        (None, _) => Verdict::Ignored("not a Holdfast order"),
                        (_, Err(_)) => Verdict::Ignored("malformed payment id"),
                    }
                }
                _ => Verdict::Ignored("no payment in the event"),
            }
        }
        // One failed attempt does not end a Razorpay order: the shopper may
        // try another card until the payment window closes, and then the
        // sweeper gives the units back.
        "payment.failed" => Verdict::Ignored("another attempt can still succeed"),
        "refund.processed" => {
            let refund = &event["payload"]["refund"]["entity"];
            match refund["payment_id"].as_str() {
                Some(payment_id)
                    if checkout::close_refund_in(&mut tx, Provider::Razorpay, payment_id)
                        .await? =>
                {
                    Verdict::RefundClosed
                }
                _ => Verdict::Ignored("no refund of ours for that payment"),
            }
        }
        "refund.failed" => {
            let refund = &event["payload"]["refund"]["entity"];
            match refund["payment_id"].as_str() {
                Some(payment_id)
                    if checkout::reopen_refund_in(
                        &mut tx,
                        Provider::Razorpay,
                        payment_id,
                        "refund.failed",
                    )
                    .await? =>
                {
                    Verdict::Ignored("refund reopened for another try")
                }
                _ => Verdict::Ignored("no refund of ours for that payment"),
            }
        }
        _ => Verdict::Ignored("event type not used"),
    };
    tx.commit().await?;
    Ok(verdict)
}
