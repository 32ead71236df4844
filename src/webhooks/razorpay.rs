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

/// What a Razorpay event asks of Holdfast, decided from the body alone so
/// the decision can be tested (and fuzzed) without a database.
#[derive(Debug, Clone, PartialEq)]
pub enum Action {
    /// A captured payment against a Razorpay order id. Whether the order is
    /// ours needs the database, and that answer comes first, so a malformed
    /// payment id is carried as `None` rather than decided here.
    Confirm {
        razorpay_order: String,
        payment_ref: Option<PaymentRef>,
    },
    /// A refund of this payment finished.
    CloseRefund { payment_id: String },
    /// A refund of this payment failed.
    ReopenRefund { payment_id: String },
    /// Nothing to do beyond recording the event id.
    Ignore(&'static str),
}

/// A verified Razorpay delivery: the event id (from the header) and type
/// for the dedupe row, and what it asks for.
#[derive(Debug, Clone, PartialEq)]
pub struct ParsedEvent {
    pub event_id: String,
    pub kind: String,
    pub action: Action,
}

/// Everything `receive` decides before it touches the database: secret,
/// signature, event id, then the body. `Err` is the text of a
/// `Verdict::Rejected`. Pure: no I/O.
pub fn accept(
    secret: Option<&Secret>,
    signature: Option<&str>,
    event_id: Option<&str>,
    body: &[u8],
) -> Result<ParsedEvent, &'static str> {
    let Some(secret) = secret.filter(|s| !s.expose().is_empty()) else {
        return Err("no webhook secret configured");
    };
    let Some(signature) = signature else {
        return Err("no signature header");
    };
    if !hmac_sha256_matches(secret.expose().as_bytes(), body, signature) {
        return Err("no signature matches");
    }
    let Some(event_id) = event_id.filter(|id| !id.is_empty() && id.len() <= 255) else {
        return Err("no event id header");
    };
    let (kind, action) = parse_event(body)?;
    Ok(ParsedEvent {
        event_id: event_id.to_owned(),
        kind,
        action,
    })
}

/// Parse a body whose signature has been checked into its type and what it
/// asks for. `Err` is the reason to reject it.
pub fn parse_event(body: &[u8]) -> Result<(String, Action), &'static str> {
    let Ok(event) = serde_json::from_slice::<Value>(body) else {
        return Err("the body is not a Razorpay event");
    };
    let Some(kind) = event["event"].as_str().filter(|k| k.len() <= 100) else {
        return Err("the event has no type");
    };
    let action = action(kind, &event);
    Ok((kind.to_owned(), action))
}

fn action(kind: &str, event: &Value) -> Action {
    let payment = &event["payload"]["payment"]["entity"];
    let refund = &event["payload"]["refund"]["entity"];
    match kind {
        "payment.captured" | "order.paid" => {
            match (payment["id"].as_str(), payment["order_id"].as_str()) {
                (Some(payment_id), Some(razorpay_order)) => Action::Confirm {
                    razorpay_order: razorpay_order.to_owned(),
                    payment_ref: PaymentRef::parse(payment_id).ok(),
                },
                _ => Action::Ignore("no payment in the event"),
            }
        }
        // One failed attempt does not end a Razorpay order: the shopper may
        // try another card until the payment window closes, and then the
        // sweeper gives the units back.
        "payment.failed" => Action::Ignore("another attempt can still succeed"),
        "refund.processed" => match refund["payment_id"].as_str() {
            Some(payment_id) => Action::CloseRefund {
                payment_id: payment_id.to_owned(),
            },
            None => Action::Ignore("no refund of ours for that payment"),
        },
        "refund.failed" => match refund["payment_id"].as_str() {
            Some(payment_id) => Action::ReopenRefund {
                payment_id: payment_id.to_owned(),
            },
            None => Action::Ignore("no refund of ours for that payment"),
        },
        _ => Action::Ignore("event type not used"),
    }
}

/// Receive one delivery.
pub async fn receive(
    pool: &PgPool,
    secret: Option<&Secret>,
    signature: Option<&str>,
    event_id: Option<&str>,
    body: &[u8],
) -> Result<Verdict, CheckoutError> {
    let event = match accept(secret, signature, event_id, body) {
        Ok(event) => event,
        Err(reason) => return Ok(Verdict::Rejected(reason.into())),
    };

    let mut tx = pool.begin().await?;
    if !super::first_delivery(&mut tx, "razorpay", &event.event_id, &event.kind).await? {
        tx.rollback().await?;
        return Ok(Verdict::Duplicate);
    }
    let verdict = match event.action {
        Action::Confirm {
            razorpay_order,
            payment_ref,
        } => {
            let order_id =
                checkout::order_by_provider_session(&mut *tx, Provider::Razorpay, &razorpay_order)
                    .await?
                    .map(|order| order.id);
            match (order_id, payment_ref) {
                (Some(order_id), Some(payment_ref)) => {
                    let report = PaymentReport {
                        order_id,
                        provider: Provider::Razorpay,
                        payment_ref,
                        source: "razorpay-webhook",
                    };
                    Verdict::Confirmed(checkout::confirm_payment_in(&mut tx, &report).await?)
                }
                (None, _) => Verdict::Ignored("not a Holdfast order"),
                (_, None) => Verdict::Ignored("malformed payment id"),
            }
        }
        Action::CloseRefund { payment_id } => {
            if checkout::close_refund_in(&mut tx, Provider::Razorpay, &payment_id).await? {
                Verdict::RefundClosed
            } else {
                Verdict::Ignored("no refund of ours for that payment")
            }
        }
        Action::ReopenRefund { payment_id } => {
            if checkout::reopen_refund_in(&mut tx, Provider::Razorpay, &payment_id, "refund.failed")
                .await?
            {
                Verdict::Ignored("refund reopened for another try")
            } else {
                Verdict::Ignored("no refund of ours for that payment")
            }
        }
        Action::Ignore(reason) => Verdict::Ignored(reason),
    };
    tx.commit().await?;
    Ok(verdict)
}
