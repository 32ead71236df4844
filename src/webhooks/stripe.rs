//! `POST /webhooks/stripe`, SPEC §4: verify the raw body's signature before
//! parsing, then write the event's dedupe row and its effect in one
//! transaction, so each event id changes things at most once whatever the
//! retries, duplicates and order of delivery.

use serde::Deserialize;
use serde_json::Value;
use sqlx::PgPool;
use uuid::Uuid;

use super::signature::{SignatureError, verify_stripe};
use crate::checkout::{self, CheckoutError, Fulfilment, PaymentReport, Provider};
use crate::configuration::Secret;
use crate::inventory::PaymentRef;

/// What became of one delivery. Rejections answer 400; everything else 2xx.
#[derive(Debug, Clone, PartialEq)]
pub enum Verdict {
    /// Bad or missing signature, stale timestamp, malformed body.
    Rejected(String),
    /// Seen before: nothing changed.
    Duplicate,
    /// Verified but not for us (unknown type, not paid yet, not our order).
    Ignored(&'static str),
    /// The payment went through the confirm routine.
    Confirmed(Fulfilment),
    /// The order's holds were given back.
    Released,
    /// A refund the provider reports finished.
    RefundClosed,
}

impl Verdict {
    pub fn label(&self) -> &'static str {
        match self {
            Verdict::Rejected(_) => "rejected",
            Verdict::Duplicate => "duplicate",
            Verdict::Ignored(_) => "ignored",
            Verdict::Confirmed(_) => "confirmed",
            Verdict::Released => "released",
            Verdict::RefundClosed => "refund_closed",
        }
    }
}

#[derive(Debug, Deserialize)]
struct Event {
    id: String,
    #[serde(rename = "type")]
    kind: String,
    data: EventData,
}

#[derive(Debug, Deserialize)]
struct EventData {
    object: Value,
}

/// The bits of a Checkout Session event Holdfast acts on.
struct SessionFacts {
    order_id: Option<Uuid>,
    paid: bool,
    payment_intent: Option<String>,
}

fn session_facts(object: &Value) -> SessionFacts {
    let payment_intent = match &object["payment_intent"] {
        Value::String(id) => Some(id.clone()),
        Value::Object(intent) => intent.get("id").and_then(Value::as_str).map(str::to_owned),
        _ => None,
    };
    SessionFacts {
        order_id: object["client_reference_id"]
            .as_str()
            .and_then(|id| Uuid::parse_str(id).ok()),
        paid: matches!(
            object["payment_status"].as_str(),
            Some("paid") | Some("no_payment_required")
        ),
        payment_intent,
    }
}

/// Receive one delivery. `now` is the current unix time.
pub async fn receive(
    pool: &PgPool,
    secret: Option<&Secret>,
    signature: Option<&str>,
    body: &[u8],
    now: i64,
) -> Result<Verdict, CheckoutError> {
    if let Err(error) = verify_stripe(body, signature, secret, now) {
        return Ok(Verdict::Rejected(match error {
            SignatureError::NoSecret => "no webhook secret configured".into(),
            other => other.to_string(),
        }));
    }
    let event: Event = match serde_json::from_slice(body) {
        Ok(event) => event,
        Err(_) => return Ok(Verdict::Rejected("the body is not a Stripe event".into())),
    };
    if event.id.is_empty() || event.id.len() > 255 {
        return Ok(Verdict::Rejected("the event id is malformed".into()));
    }

    let mut tx = pool.begin().await?;
    if !super::first_delivery(&mut tx, "stripe", &event.id, &event.kind).await? {
        tx.rollback().await?;
        return Ok(Verdict::Duplicate);
    }

    let verdict = match event.kind.as_str() {
        "checkout.session.completed" | "checkout.session.async_payment_succeeded" => {
            let facts = session_facts(&event.data.object);
            match (facts.order_id, facts.paid, facts.payment_intent) {
                (None, _, _) => Verdict::Ignored("not a Holdfast order"),
                (Some(_), false, _) => Verdict::Ignored("not paid yet"),
                (Some(_), true, None) => Verdict::Ignored("paid without a payment intent"),
                (Some(order_id), true, Some(intent)) => match PaymentRef::parse(&intent) {
                    Ok(payment_ref) => {
                        let report = PaymentReport {
                            order_id,
                            provider: Provider::Stripe,
                            payment_ref,
                            source: "stripe-webhook",
                        };
                        Verdict::Confirmed(checkout::confirm_payment_in(&mut tx, &report).await?)
                    }
                    Err(_) => Verdict::Ignored("malformed payment intent"),
                },
            }
        }
        "checkout.session.expired" | "checkout.session.async_payment_failed" => {
            match session_facts(&event.data.object).order_id {
                Some(order_id) => {
                    let final_state = if event.kind.ends_with("expired") {
                        "expired"
                    } else {
                        "cancelled"
                    };
                    if checkout::release_order_in(
                        &mut tx,
                        order_id,
                        &event.kind,
                        "stripe",
                        final_state,
                    )
                    .await?
                    {
                        Verdict::Released
                    } else {
                        Verdict::Ignored("not a Holdfast order")
                    }
                }
                None => Verdict::Ignored("not a Holdfast order"),
            }
        }
        // A refund's own events say how it ended. (charge.refunded does not
        // say which refund, so it decides nothing.)
        "refund.updated" | "refund.created" | "refund.failed" => {
            let object = &event.data.object;
            let intent = object["payment_intent"].as_str().unwrap_or_default();
            match (object["status"].as_str(), intent.is_empty()) {
                (_, true) => Verdict::Ignored("refund without a payment intent"),
                (Some("succeeded"), false) => {
                    if checkout::close_refund_in(&mut tx, Provider::Stripe, intent).await? {
                        Verdict::RefundClosed
                    } else {
                        Verdict::Ignored("no refund of ours for that payment")
                    }
                }
                (Some("failed") | Some("canceled"), false) => {
                    if checkout::reopen_refund_in(&mut tx, Provider::Stripe, intent, &event.kind)
                        .await?
                    {
                        Verdict::Ignored("refund reopened for another try")
                    } else {
                        Verdict::Ignored("no refund of ours for that payment")
                    }
                }
                _ => Verdict::Ignored("refund not finished"),
            }
        }
        _ => Verdict::Ignored("event type not used"),
    };
    tx.commit().await?;
    Ok(verdict)
}
