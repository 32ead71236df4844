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

/// What a Stripe event asks of Holdfast, decided from the body alone so the
/// decision can be tested (and fuzzed) without a database.
#[derive(Debug, Clone, PartialEq)]
pub enum Action {
    /// A paid Checkout Session for one of our orders: the confirm routine.
    Confirm {
        order_id: Uuid,
        payment_ref: PaymentRef,
    },
    /// A session that will never be paid: give the order's holds back.
    Release {
        order_id: Uuid,
        final_state: &'static str,
    },
    /// A refund of this payment intent finished.
    CloseRefund { payment_intent: String },
    /// A refund of this payment intent failed or was cancelled.
    ReopenRefund { payment_intent: String },
    /// Nothing to do beyond recording the event id.
    Ignore(&'static str),
}

/// A well-formed Stripe event: its id and type (for the dedupe row) and
/// what it asks for.
#[derive(Debug, Clone, PartialEq)]
pub struct ParsedEvent {
    pub id: String,
    pub kind: String,
    pub action: Action,
}

/// Parse a body whose signature has been checked. `Err` is the reason to
/// reject it. Pure: no I/O, no clock.
pub fn parse_event(body: &[u8]) -> Result<ParsedEvent, &'static str> {
    let event: Event =
        serde_json::from_slice(body).map_err(|_| "the body is not a Stripe event")?;
    if event.id.is_empty() || event.id.len() > 255 {
        return Err("the event id is malformed");
    }
    let action = action(&event.kind, &event.data.object);
    Ok(ParsedEvent {
        id: event.id,
        kind: event.kind,
        action,
    })
}

/// Everything `receive` decides before it touches the database: the
/// signature, then the body. `Err` is the text of a `Verdict::Rejected`.
pub fn accept(
    secret: Option<&Secret>,
    signature: Option<&str>,
    body: &[u8],
    now: i64,
) -> Result<ParsedEvent, String> {
    verify_stripe(body, signature, secret, now).map_err(|error| match error {
        SignatureError::NoSecret => "no webhook secret configured".to_owned(),
        other => other.to_string(),
    })?;
    parse_event(body).map_err(str::to_owned)
}

fn action(kind: &str, object: &Value) -> Action {
    match kind {
        "checkout.session.completed" | "checkout.session.async_payment_succeeded" => {
            let facts = session_facts(object);
            match (facts.order_id, facts.paid, facts.payment_intent) {
                (None, _, _) => Action::Ignore("not a Holdfast order"),
                (Some(_), false, _) => Action::Ignore("not paid yet"),
                (Some(_), true, None) => Action::Ignore("paid without a payment intent"),
                (Some(order_id), true, Some(intent)) => match PaymentRef::parse(&intent) {
                    Ok(payment_ref) => Action::Confirm {
                        order_id,
                        payment_ref,
                    },
                    Err(_) => Action::Ignore("malformed payment intent"),
                },
            }
        }
        "checkout.session.expired" | "checkout.session.async_payment_failed" => {
            match session_facts(object).order_id {
                Some(order_id) => Action::Release {
                    order_id,
                    final_state: if kind.ends_with("expired") {
                        "expired"
                    } else {
                        "cancelled"
                    },
                },
                None => Action::Ignore("not a Holdfast order"),
            }
        }
        // A refund's own events say how it ended. (charge.refunded does not
        // say which refund, so it decides nothing.)
        "refund.updated" | "refund.created" | "refund.failed" => {
            let intent = object["payment_intent"].as_str().unwrap_or_default();
            match (object["status"].as_str(), intent.is_empty()) {
                (_, true) => Action::Ignore("refund without a payment intent"),
                (Some("succeeded"), false) => Action::CloseRefund {
                    payment_intent: intent.to_owned(),
                },
                (Some("failed") | Some("canceled"), false) => Action::ReopenRefund {
                    payment_intent: intent.to_owned(),
                },
                _ => Action::Ignore("refund not finished"),
            }
        }
        _ => Action::Ignore("event type not used"),
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
    let event = match accept(secret, signature, body, now) {
        Ok(event) => event,
        Err(reason) => return Ok(Verdict::Rejected(reason)),
    };

    let mut tx = pool.begin().await?;
    if !super::first_delivery(&mut tx, "stripe", &event.id, &event.kind).await? {
        tx.rollback().await?;
        return Ok(Verdict::Duplicate);
    }

    let verdict = match event.action {
        Action::Confirm {
            order_id,
            payment_ref,
        } => {
            let report = PaymentReport {
                order_id,
                provider: Provider::Stripe,
                payment_ref,
                source: "stripe-webhook",
            };
            Verdict::Confirmed(checkout::confirm_payment_in(&mut tx, &report).await?)
        }
        Action::Release {
            order_id,
            final_state,
        } => {
            if checkout::release_order_in(&mut tx, order_id, &event.kind, "stripe", final_state)
                .await?
            {
                Verdict::Released
            } else {
                Verdict::Ignored("not a Holdfast order")
            }
        }
        Action::CloseRefund { payment_intent } => {
            if checkout::close_refund_in(&mut tx, Provider::Stripe, &payment_intent).await? {
                Verdict::RefundClosed
            } else {
                Verdict::Ignored("no refund of ours for that payment")
            }
        }
        Action::ReopenRefund { payment_intent } => {
            if checkout::reopen_refund_in(&mut tx, Provider::Stripe, &payment_intent, &event.kind)
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
