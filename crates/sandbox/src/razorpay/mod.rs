//! The Razorpay part of the sandbox, under `/razorpay`.
//!
//! API (JSON, HTTP basic auth with the key id and key secret, Razorpay's
//! error shape `{"error":{"code":"BAD_REQUEST_ERROR","description":…}}`):
//! - `POST /v1/orders`, `GET /v1/orders/{id}`, `GET /v1/orders/{id}/payments`;
//! - `GET /v1/payments/{id}`, `POST /v1/payments/{id}/capture`;
//! - `POST /v1/payments/{id}/refund`, `GET /v1/payments/{id}/refunds`,
//!   `GET /v1/payments/{id}/refunds/{refund}`, `GET /v1/refunds/{id}`;
//! - anything else: 404 in Razorpay's error shape.
//!
//! Rules it enforces, as Razorpay documents them: orders refuse fields
//! Razorpay does not take, a receipt over 40 characters, more than 15
//! notes; capture follows the order's `payment` settings (automatic within
//! `automatic_expiry_period` minutes, at least 12) and otherwise the
//! account's, which here is manual: a payment stays `authorized` until
//! `POST …/capture` with its exact amount and currency, and is refunded by
//! Razorpay if nobody captures it (a test control plays the days passing);
//! a second payment on a paid order is refunded at once; only captured
//! payments are refunded, never beyond what was captured;
//! `X-Refund-Idempotency` must be at least 10 letters, digits, `-` or `_`,
//! a repeat with the same body gets the first answer, another body is
//! refused, and a repeat while the first is in flight gets 409; refunds
//! start `pending` and are `processed` (or `failed`) later.
//!
//! Also: a stand-in for Razorpay Checkout in redirect mode (`checkout.js`
//! and a hosted page that posts the signed callback, or on a declined card
//! the `error[…]` fields), and webhooks signed with `X-Razorpay-Signature`
//! and numbered with `X-Razorpay-Event-Id`, retried like the Stripe part's.
//! Request bodies are JSON; a body in another content type is refused.
//! Test controls, under `/_sandbox`: `orders/{id}/delivery?mode=…`,
//! `orders/{id}/pay?amount=N&late=true` (a payment as the checkout would
//! make it: less than the order, or authorised after the capture window),
//! `payments/{id}/authorize-late` (a bank that did not answer in time says
//! yes: a late authorisation), `days-pass?days=N` (what nobody captured
//! within 5 days goes back), `auto-refund` (every uncaptured authorisation
//! goes back),
//! `refunds/{id}/settle?outcome=processed|failed`, `refunds/auto?after_ms=N`
//! (or none: never), `ledger`.

pub(crate) mod objects;
mod page;
pub(crate) mod requests;
mod routes;

use std::collections::HashMap;
use std::time::Duration;

use actix_web::HttpRequest;
use actix_web::http::header;
use chrono::Utc;
use serde_json::{Value, json};

pub(crate) use objects::RazorpayError;
pub(crate) use routes::routes;

use self::objects::{Capture, Order, Payment, Refund};
use crate::delivery::{self, Courier, DeliveryMode, Endpoint, Outgoing, Pacing};
use crate::idempotency::Replays;
use crate::ledger::{Charge, Delivery, Ledger, RefundRecord};
use crate::signature::{hmac_sha256_hex, same_text};
use crate::state::Shared;
use crate::{SandboxSettings, random_id};

/// How long Razorpay keeps asking a bank that did not answer, and may
/// authorise the payment late; and how long an authorisation may wait for
/// its capture before it is refunded: "Razorpay polls the APIs
/// intermittently for 5 days … payments that are not captured within this
/// time period will be refunded automatically"
/// (razorpay.com/docs/payments/payments/capture-settings/api).
pub const LATE_AUTHORISATION_SECONDS: i64 = 5 * 24 * 3600;

#[derive(Debug)]
struct State {
    webhook_url: Option<String>,
    refunds_settle_after: Option<Duration>,
    orders: HashMap<String, Order>,
    payments: HashMap<String, Payment>,
    refunds: Vec<Refund>,
    /// `X-Refund-Idempotency` keys and their first answers
    refund_keys: Replays,
    ledger: Ledger,
}

/// The Razorpay stand-in. Cheap to clone; clones share state.
#[derive(Clone)]
pub struct RazorpaySandbox {
    settings: SandboxSettings,
    public_base: String,
    state: Shared<State>,
    courier: Courier,
}

impl std::fmt::Debug for RazorpaySandbox {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RazorpaySandbox")
            .field("public_base", &self.public_base)
            .finish_non_exhaustive()
    }
}

impl RazorpaySandbox {
    pub fn new(settings: SandboxSettings, public_base: String) -> Self {
        let state = Shared::new(State {
            webhook_url: settings.razorpay_webhook_url.clone(),
            refunds_settle_after: settings.refunds_settle_after,
            orders: HashMap::new(),
            payments: HashMap::new(),
            refunds: Vec::new(),
            refund_keys: Replays::default(),
            ledger: Ledger::default(),
        });
        Self {
            courier: Courier::new(settings.retry_base, settings.max_attempts),
            settings,
            public_base,
            state,
        }
    }

    /// The base URL a Razorpay client should use (`…/razorpay/`).
    pub fn api_base(&self) -> String {
        format!("{}/razorpay/", self.public_base)
    }

    /// The stand-in for Razorpay's checkout script.
    pub fn checkout_script_url(&self) -> String {
        format!("{}/razorpay/checkout.js", self.public_base)
    }

    pub fn set_webhook_url(&self, url: String) {
        self.state.with(|state| state.webhook_url = Some(url));
    }

    pub fn ledger(&self) -> Ledger {
        self.state.with(|state| state.ledger.clone())
    }

    pub fn set_delivery(&self, order_id: &str, mode: DeliveryMode) -> bool {
        self.state
            .with(|state| match state.orders.get_mut(order_id) {
                Some(order) => {
                    order.pacing.mode = mode;
                    true
                }
                None => false,
            })
    }

    /// How long new refunds stay pending; `None`: until settled by hand.
    pub fn set_refunds_settle_after(&self, after: Option<Duration>) {
        self.state.with(|state| state.refunds_settle_after = after);
    }

    /// Refunds still pending: (refund id, the order of their payment).
    pub fn pending_refunds(&self) -> Vec<(String, String)> {
        self.state.with(|state| {
            state
                .refunds
                .iter()
                .filter(|r| r.status == "pending")
                .map(|r| (r.id.clone(), r.order_id.clone()))
                .collect()
        })
    }

    /// The ids of every payment made on an order, oldest first.
    pub fn order_payments(&self, order_id: &str) -> Vec<String> {
        self.state.with(|state| {
            state
                .orders
                .get(order_id)
                .map(|order| order.payments.clone())
                .unwrap_or_default()
        })
    }

    /// A payment as Razorpay shows it.
    pub fn payment(&self, id: &str) -> Option<Value> {
        self.state
            .with(|state| state.payments.get(id).map(Payment::to_json))
    }

    /// HTTP basic auth with the key id and key secret
    /// (razorpay.com/docs/api/authentication).
    fn authorised(&self, request: &HttpRequest) -> bool {
        use base64::Engine;
        let expected = format!(
            "{}:{}",
            self.settings.razorpay_key_id,
            self.settings.razorpay_key_secret.expose()
        );
        request
            .headers()
            .get(header::AUTHORIZATION)
            .and_then(|value| value.to_str().ok())
            .and_then(|value| value.strip_prefix("Basic "))
            .and_then(|encoded| {
                base64::engine::general_purpose::STANDARD
                    .decode(encoded)
                    .ok()
            })
            .and_then(|decoded| String::from_utf8(decoded).ok())
            .is_some_and(|given| same_text(&given, &expected))
    }

    /// Sign and deliver one event about an order, following its delivery
    /// mode.
    fn emit(&self, order_id: &str, event_type: &str, payload: Value) {
        let contains: Vec<&str> = payload
            .as_object()
            .map(|o| o.keys().map(String::as_str).collect())
            .unwrap_or_default();
        let event = json!({
            "entity": "event", "account_id": "acc_holdfast_sandbox", "event": event_type,
            "contains": contains, "payload": payload, "created_at": Utc::now().timestamp(),
            "x_event_id": random_id("evt"),
        });
        let batch = self
            .state
            .with(|state| match state.orders.get_mut(order_id) {
                Some(order) => order.pacing.plan(event),
                None => Pacing::default().plan(event),
            });
        delivery::send(self, batch);
    }

    /// Mark a payment captured: money, a paid order, the events.
    fn capture_in(state: &mut State, payment_id: &str) -> Option<(Value, Value, String)> {
        let payment = state.payments.get_mut(payment_id)?;
        payment.status = "captured";
        payment.captured = true;
        let payment = payment.clone();
        let paid = state
            .orders
            .get(&payment.order_id)?
            .amount_paid(&state.payments);
        let order = state.orders.get_mut(&payment.order_id)?;
        // paid once what was captured covers the order
        if paid >= order.amount {
            order.status = "paid";
        }
        let metadata = order.notes.clone();
        state.ledger.charges.push(Charge {
            payment_intent: payment.id.clone(),
            session_id: payment.order_id.clone(),
            amount: payment.amount,
            currency: payment.currency.clone(),
            metadata,
        });
        let order = state.orders.get(&payment.order_id)?;
        Some((
            payment.to_json(),
            order.to_json(&state.payments),
            payment.order_id.clone(),
        ))
    }

    fn captured_events(&self, (payment, order, order_id): (Value, Value, String)) {
        self.emit(
            &order_id,
            "payment.captured",
            json!({ "payment": { "entity": payment } }),
        );
        self.emit(
            &order_id,
            "order.paid",
            json!({ "payment": { "entity": payment }, "order": { "entity": order } }),
        );
    }

    /// A payment authorised on an order, as Razorpay Checkout makes it:
    /// for `amount` (the order's, unless a test says less), captured at
    /// once if the order asked for automatic capture and the authorisation
    /// came within its window (`late`: it did not). A second payment on a
    /// paid order is refunded at once. Returns the payment id.
    pub fn authorize(
        &self,
        order_id: &str,
        amount: Option<i64>,
        late: bool,
    ) -> Result<String, String> {
        enum Then {
            Captured(Value, (Value, Value, String)),
            Authorized(Value),
            Returned(Value, Value),
        }
        let then = self.state.with(|state| {
            let order = state
                .orders
                .get_mut(order_id)
                .ok_or_else(|| "no such order".to_owned())?;
            let already_paid = order.status == "paid";
            let payment = Payment {
                id: random_id("pay"),
                order_id: order.id.clone(),
                amount: amount.unwrap_or(order.amount),
                currency: order.currency.clone(),
                status: "authorized",
                captured: false,
                amount_refunded: 0,
                created_at: Utc::now().timestamp(),
                error: None,
                method: "card",
            };
            if !already_paid {
                order.status = "attempted";
            }
            order.payments.push(payment.id.clone());
            let automatic = match order.capture {
                Capture::Automatic { window_minutes } => {
                    !late
                        && Utc::now().timestamp().saturating_sub(order.created_at)
                            <= window_minutes.saturating_mul(60)
                }
                Capture::Manual => false,
            };
            let id = payment.id.clone();
            state.payments.insert(id.clone(), payment);
            if already_paid {
                // Razorpay refunds a payment on an order that is paid already
                let refund = Self::provider_refund_in(state, &id)
                    .ok_or_else(|| "no such payment".to_owned())?;
                let payment = state
                    .payments
                    .get(&id)
                    .map(Payment::to_json)
                    .unwrap_or_default();
                return Ok::<_, String>((id, Then::Returned(refund, payment)));
            }
            let authorized = state
                .payments
                .get(&id)
                .map(Payment::to_json)
                .unwrap_or_default();
            if automatic {
                let captured =
                    Self::capture_in(state, &id).ok_or_else(|| "no such order".to_owned())?;
                Ok((id, Then::Captured(authorized, captured)))
            } else {
                Ok((id, Then::Authorized(authorized)))
            }
        })?;
        let (id, then) = then;
        match then {
            Then::Captured(authorized, captured) => {
                self.emit(
                    order_id,
                    "payment.authorized",
                    json!({ "payment": { "entity": authorized } }),
                );
                self.captured_events(captured);
            }
            Then::Authorized(authorized) => {
                self.emit(
                    order_id,
                    "payment.authorized",
                    json!({ "payment": { "entity": authorized } }),
                );
            }
            Then::Returned(refund, payment) => {
                self.emit(
                    order_id,
                    "refund.processed",
                    json!({ "refund": { "entity": refund }, "payment": { "entity": payment } }),
                );
            }
        }
        Ok(id)
    }

    /// The shopper pays by netbanking and the bank does not answer:
    /// Razorpay marks the payment `failed` (`payment_timed_out`) after 10
    /// minutes (at once here), sends `payment.failed`, and keeps asking the
    /// bank, which may still authorise it for days
    /// (razorpay.com/docs/payments/payments/late-authorisation). Returns
    /// the payment id.
    pub fn bank_silent(&self, order_id: &str) -> Result<String, String> {
        let payment = self.state.with(|state| {
            let order = state
                .orders
                .get_mut(order_id)
                .ok_or_else(|| "no such order".to_owned())?;
            if order.status == "created" {
                order.status = "attempted";
            }
            let payment = Payment {
                id: random_id("pay"),
                order_id: order.id.clone(),
                amount: order.amount,
                currency: order.currency.clone(),
                status: "failed",
                captured: false,
                amount_refunded: 0,
                created_at: Utc::now().timestamp(),
                error: Some(("Payment was not completed on time.", objects::TIMED_OUT)),
                method: "netbanking",
            };
            order.payments.push(payment.id.clone());
            state.payments.insert(payment.id.clone(), payment.clone());
            Ok::<_, String>(payment)
        })?;
        self.emit(
            order_id,
            "payment.failed",
            json!({ "payment": { "entity": payment.to_json() } }),
        );
        Ok(payment.id)
    }

    /// The bank answers a payment that timed out: it is authorised late
    /// (while Razorpay still polls, 5 days from the payment's creation,
    /// razorpay.com/docs/payments/payments/capture-settings/api), with
    /// `payment.authorized`. Captured by Razorpay only within the order's
    /// automatic window; on an order paid meanwhile, refunded at once
    /// (razorpay.com/docs/payments/payments/late-authorisation/handle).
    pub fn authorize_late(&self, payment_id: &str) -> Result<(), String> {
        let now = Utc::now().timestamp();
        let (order_id, authorized, returned) = self.state.with(|state| {
            let payment = state
                .payments
                .get_mut(payment_id)
                .ok_or_else(|| "no such payment".to_owned())?;
            let timed_out = payment.status == "failed"
                && payment
                    .error
                    .is_some_and(|(_, reason)| reason == objects::TIMED_OUT);
            if !timed_out || now.saturating_sub(payment.created_at) > LATE_AUTHORISATION_SECONDS {
                return Err("no bank is still answering for this payment".to_owned());
            }
            payment.status = "authorized";
            payment.error = None;
            let order_id = payment.order_id.clone();
            let order = state
                .orders
                .get(&order_id)
                .ok_or_else(|| "no such order".to_owned())?;
            if order.status == "paid" {
                let refund = Self::provider_refund_in(state, payment_id)
                    .ok_or_else(|| "no such payment".to_owned())?;
                let payment = state.payments.get(payment_id).map(Payment::to_json);
                return Ok((order_id, None, Some((refund, payment))));
            }
            let automatic = match order.capture {
                Capture::Automatic { window_minutes } => {
                    now.saturating_sub(order.created_at) <= window_minutes.saturating_mul(60)
                }
                Capture::Manual => false,
            };
            let json = state.payments.get(payment_id).map(Payment::to_json);
            let captured = if automatic {
                Self::capture_in(state, payment_id)
            } else {
                None
            };
            Ok((order_id, Some((json, captured)), None))
        })?;
        if let Some((payment, captured)) = authorized {
            self.emit(
                &order_id,
                "payment.authorized",
                json!({ "payment": { "entity": payment } }),
            );
            if let Some(captured) = captured {
                self.captured_events(captured);
            }
        }
        if let Some((refund, payment)) = returned {
            self.emit(
                &order_id,
                "refund.processed",
                json!({ "refund": { "entity": refund }, "payment": { "entity": payment } }),
            );
        }
        Ok(())
    }

    /// `days` pass at Razorpay: every order and payment is that much
    /// older, so its automatic capture window and its bank's late answer
    /// are that much further behind; an authorisation nobody captured
    /// within 5 days of its creation goes back to its payer (Razorpay's
    /// automatic refund). Returns how many went back.
    pub fn days_pass(&self, days: i64) -> usize {
        let by = days.clamp(0, 366).saturating_mul(24 * 3600);
        let now = Utc::now().timestamp();
        let overdue: Vec<String> = self.state.with(|state| {
            for order in state.orders.values_mut() {
                order.created_at = order.created_at.saturating_sub(by);
            }
            for payment in state.payments.values_mut() {
                payment.created_at = payment.created_at.saturating_sub(by);
            }
            state
                .payments
                .values()
                .filter(|p| {
                    p.status == "authorized"
                        && now.saturating_sub(p.created_at) > LATE_AUTHORISATION_SECONDS
                })
                .map(|p| p.id.clone())
                .collect()
        });
        self.refund_uncaptured(&overdue)
    }

    /// Razorpay gives a payment back by itself (an authorisation nobody
    /// captured, a payment on a paid order): processed at once, recorded as
    /// the provider's own.
    fn provider_refund_in(state: &mut State, payment_id: &str) -> Option<Value> {
        let payment = state.payments.get_mut(payment_id)?;
        if !payment.captured {
            // the shopper's money was held all the same: it moved, and back
            state.ledger.charges.push(Charge {
                payment_intent: payment.id.clone(),
                session_id: payment.order_id.clone(),
                amount: payment.amount,
                currency: payment.currency.clone(),
                metadata: json!({ "captured": false }),
            });
        }
        let amount = payment.left();
        payment.status = "refunded";
        payment.amount_refunded = payment.amount;
        let refund = Refund {
            id: random_id("rfnd"),
            payment_id: payment.id.clone(),
            order_id: payment.order_id.clone(),
            amount,
            currency: payment.currency.clone(),
            notes: json!({}),
            receipt: None,
            speed: "normal".into(),
            status: "processed",
            created_at: Utc::now().timestamp(),
        };
        state.ledger.refunds.push(RefundRecord {
            id: refund.id.clone(),
            payment_intent: payment.id.clone(),
            amount,
            idempotency_key: None,
            status: "succeeded",
            by_provider: true,
        });
        let json = refund.to_json();
        state.refunds.push(refund);
        Some(json)
    }

    /// Days pass: every authorisation nobody captured goes back to its
    /// payer. Returns how many.
    pub fn auto_refund_uncaptured(&self) -> usize {
        let ids: Vec<String> = self.state.with(|state| {
            state
                .payments
                .values()
                .filter(|p| p.status == "authorized")
                .map(|p| p.id.clone())
                .collect()
        });
        self.refund_uncaptured(&ids)
    }

    /// These authorisations go back to their payers, each with its
    /// `refund.processed`.
    fn refund_uncaptured(&self, ids: &[String]) -> usize {
        let returned: Vec<(String, Value, Value)> = self.state.with(|state| {
            ids.iter()
                .filter_map(|id| {
                    let refund = Self::provider_refund_in(state, id)?;
                    let payment = state.payments.get(id)?;
                    Some((payment.order_id.clone(), refund, payment.to_json()))
                })
                .collect()
        });
        for (order_id, refund, payment) in &returned {
            self.emit(
                order_id,
                "refund.processed",
                json!({ "refund": { "entity": refund }, "payment": { "entity": payment } }),
            );
        }
        returned.len()
    }

    /// A pending refund ends: processed, or failed (the money stays with
    /// the merchant and the payment can be refunded again).
    pub fn settle_refund(&self, refund_id: &str, processed: bool) -> Result<(), String> {
        let (refund, payment, order_id) = self.state.with(|state| {
            let refund = state
                .refunds
                .iter_mut()
                .find(|r| r.id == refund_id)
                .ok_or_else(|| "no such refund".to_owned())?;
            if refund.status != "pending" {
                return Err(format!("the refund is {} already", refund.status));
            }
            refund.status = if processed { "processed" } else { "failed" };
            let refund = refund.clone();
            if let Some(record) = state.ledger.refunds.iter_mut().find(|r| r.id == refund_id) {
                record.status = if processed { "succeeded" } else { "failed" };
            }
            let payment = state
                .payments
                .get_mut(&refund.payment_id)
                .ok_or_else(|| "no such payment".to_owned())?;
            if !processed {
                payment.amount_refunded = payment.amount_refunded.saturating_sub(refund.amount);
                payment.status = "captured";
            }
            Ok((refund.clone(), payment.to_json(), refund.order_id.clone()))
        })?;
        let event = if processed {
            "refund.processed"
        } else {
            "refund.failed"
        };
        self.emit(
            &order_id,
            event,
            json!({ "refund": { "entity": refund.to_json() }, "payment": { "entity": payment } }),
        );
        Ok(())
    }

    fn signature(&self, order_id: &str, payment_id: &str) -> String {
        hmac_sha256_hex(
            self.settings.razorpay_key_secret.expose().as_bytes(),
            format!("{order_id}|{payment_id}").as_bytes(),
        )
    }
}

/// The shop's `/webhooks/razorpay`: the event's JSON, signed with
/// `X-Razorpay-Signature` (hex HMAC-SHA256 of the body with the webhook
/// secret) and numbered with `X-Razorpay-Event-Id`
/// (razorpay.com/docs/webhooks/validate-test).
impl Endpoint for RazorpaySandbox {
    fn courier(&self) -> &Courier {
        &self.courier
    }

    fn url(&self) -> Option<String> {
        self.state.with(|state| state.webhook_url.clone())
    }

    fn outgoing(&self, mut event: Value) -> Outgoing {
        // the event id travels in a header, as Razorpay sends it
        let event_id = event
            .as_object_mut()
            .and_then(|object| object.remove("x_event_id"))
            .and_then(|id| id.as_str().map(str::to_owned))
            .unwrap_or_default();
        let event_type = event
            .get("event")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_owned();
        Outgoing {
            event_id,
            event_type,
            body: event.to_string(),
        }
    }

    fn headers(&self, outgoing: &Outgoing) -> Vec<(&'static str, String)> {
        let signature = hmac_sha256_hex(
            self.settings.razorpay_webhook_secret.expose().as_bytes(),
            outgoing.body.as_bytes(),
        );
        vec![
            ("X-Razorpay-Signature", signature),
            ("X-Razorpay-Event-Id", outgoing.event_id.clone()),
        ]
    }

    fn record(&self, delivery: Delivery) {
        self.state
            .with(|state| state.ledger.deliveries.push(delivery));
    }
}
