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
//! Test controls, under `/_sandbox`: `orders/{id}/delivery?mode=…`,
//! `orders/{id}/pay?amount=N&late=true` (a payment as the checkout would
//! make it: less than the order, or authorised after the capture window),
//! `auto-refund` (days pass: every uncaptured authorisation goes back),
//! `refunds/{id}/settle?outcome=processed|failed`, `refunds/auto?after_ms=N`
//! (or none: never), `ledger`.

use std::collections::HashMap;
use std::time::Duration;

use actix_web::http::StatusCode;
use actix_web::http::header;
use actix_web::{HttpRequest, HttpResponse, web};
use chrono::Utc;
use serde::Deserialize;
use serde_json::{Map, Value, json};
use sha2::{Digest, Sha256};

use super::{
    AutoQuery, Charge, Delivery, DeliveryMode, DeliveryQuery, Ledger, OutcomeQuery, RefundRecord,
    SandboxSettings, Shared, amount_text, escape, page, plan, post_until_accepted, random_id,
    redirect,
};
use crate::signature::{hmac_sha256_hex, same_text};

/// When a payment on an order is captured.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Capture {
    /// By Razorpay, if authorised within this many minutes of the order.
    Automatic { window_minutes: i64 },
    /// By the merchant's capture call (the account's setting here).
    Manual,
}

#[derive(Debug, Clone)]
struct Order {
    id: String,
    amount: i64,
    currency: String,
    receipt: Option<String>,
    notes: Value,
    created_at: i64,
    capture: Capture,
    /// created, attempted or paid
    status: &'static str,
    payments: Vec<String>,
    delivery: DeliveryMode,
    held_back: Vec<Value>,
}

impl Order {
    fn amount_paid(&self, payments: &HashMap<String, Payment>) -> i64 {
        self.payments
            .iter()
            .filter_map(|id| payments.get(id))
            .filter(|p| p.captured)
            .map(|p| p.amount)
            .sum()
    }

    fn to_json(&self, payments: &HashMap<String, Payment>) -> Value {
        let paid = self.amount_paid(payments).min(self.amount);
        json!({
            "id": self.id, "entity": "order", "amount": self.amount, "amount_paid": paid,
            "amount_due": self.amount - paid, "currency": self.currency, "receipt": self.receipt,
            "offer_id": null, "status": self.status, "attempts": self.payments.len(),
            "notes": self.notes, "created_at": self.created_at,
        })
    }
}

#[derive(Debug, Clone)]
struct Payment {
    id: String,
    order_id: String,
    amount: i64,
    currency: String,
    /// authorized, captured, refunded or failed
    status: &'static str,
    captured: bool,
    amount_refunded: i64,
    created_at: i64,
    error: Option<(&'static str, &'static str)>,
}

impl Payment {
    fn to_json(&self) -> Value {
        let refund_status = match self.amount_refunded {
            0 => Value::Null,
            n if n >= self.amount => json!("full"),
            _ => json!("partial"),
        };
        json!({
            "id": self.id, "entity": "payment", "amount": self.amount, "currency": self.currency,
            "status": self.status, "order_id": self.order_id, "invoice_id": null,
            "international": false, "method": "card", "amount_refunded": self.amount_refunded,
            "refund_status": refund_status, "captured": self.captured, "description": null,
            "card_id": null, "bank": null, "wallet": null, "vpa": null,
            "email": "shopper@example.com", "contact": "+919999999999", "notes": [],
            "fee": null, "tax": null,
            "error_code": self.error.map(|_| "BAD_REQUEST_ERROR"),
            "error_description": self.error.map(|(description, _)| description),
            "error_source": self.error.map(|_| "customer"),
            "error_step": self.error.map(|_| "payment_authorization"),
            "error_reason": self.error.map(|(_, reason)| reason),
            "acquirer_data": {}, "created_at": self.created_at,
        })
    }

    fn left(&self) -> i64 {
        self.amount - self.amount_refunded
    }
}

#[derive(Debug, Clone)]
struct Refund {
    id: String,
    payment_id: String,
    order_id: String,
    amount: i64,
    currency: String,
    notes: Value,
    receipt: Option<String>,
    speed: String,
    /// pending, processed or failed
    status: &'static str,
    created_at: i64,
}

impl Refund {
    fn to_json(&self) -> Value {
        json!({
            "id": self.id, "entity": "refund", "amount": self.amount, "currency": self.currency,
            "payment_id": self.payment_id, "notes": self.notes, "receipt": self.receipt,
            "acquirer_data": { "arn": null }, "created_at": self.created_at, "batch_id": null,
            "status": self.status, "speed_processed": self.speed, "speed_requested": self.speed,
        })
    }
}

/// An `X-Refund-Idempotency` key: the body it came with, and its answer
/// once there is one (`None` while the first request is in flight).
#[derive(Debug, Clone)]
struct RefundKey {
    body: [u8; 32],
    answer: Option<(u16, Value)>,
}

#[derive(Debug)]
struct State {
    webhook_url: Option<String>,
    refunds_settle_after: Option<Duration>,
    orders: HashMap<String, Order>,
    payments: HashMap<String, Payment>,
    refunds: Vec<Refund>,
    refund_keys: HashMap<String, RefundKey>,
    ledger: Ledger,
}

/// The Razorpay stand-in. Cheap to clone; clones share state.
#[derive(Clone)]
pub struct RazorpaySandbox {
    settings: SandboxSettings,
    public_base: String,
    state: Shared<State>,
    http: reqwest::Client,
}

impl std::fmt::Debug for RazorpaySandbox {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RazorpaySandbox")
            .field("public_base", &self.public_base)
            .finish_non_exhaustive()
    }
}

/// Razorpay's error shape.
fn razorpay_error(status: StatusCode, description: &str, field: Option<&str>) -> (u16, Value) {
    (
        status.as_u16(),
        json!({
            "error": {
                "code": "BAD_REQUEST_ERROR",
                "description": description, "source": "business", "step": "payment_initiation",
                "reason": "input_validation_failed", "field": field, "metadata": {},
            }
        }),
    )
}

fn answer((status, body): (u16, Value)) -> HttpResponse {
    HttpResponse::build(StatusCode::from_u16(status).unwrap_or(StatusCode::OK)).json(body)
}

/// A 400 in Razorpay's shape.
fn refused(description: &str, field: Option<&str>) -> (u16, Value) {
    razorpay_error(StatusCode::BAD_REQUEST, description, field)
}

fn bad(description: &str, field: Option<&str>) -> HttpResponse {
    answer(refused(description, field))
}

fn no_such_id() -> HttpResponse {
    answer(unknown_id())
}

fn unknown_id() -> (u16, Value) {
    refused("The id provided does not exist", Some("id"))
}

/// Refuse fields Razorpay does not take, as it does.
fn extra_field(body: &Map<String, Value>, allowed: &[&str]) -> Option<(u16, Value)> {
    body.keys()
        .find(|key| !allowed.contains(&key.as_str()))
        .map(|key| {
            refused(
                &format!("{key} is/are not required and should not be sent"),
                Some(key),
            )
        })
}

/// Notes: at most 15, each value at most 256 characters.
fn notes_problem(notes: &Value) -> Option<(u16, Value)> {
    match notes {
        Value::Null => None,
        Value::Object(map) if map.len() <= 15 => map
            .values()
            .any(|v| v.as_str().is_none_or(|s| s.chars().count() > 256))
            .then(|| {
                refused(
                    "The notes may have up to 15 keys of up to 256 characters each",
                    Some("notes"),
                )
            }),
        Value::Object(_) => Some(refused("The notes may have up to 15 keys", Some("notes"))),
        _ => Some(refused("The notes must be an object", Some("notes"))),
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
            refund_keys: HashMap::new(),
            ledger: Ledger::default(),
        });
        Self {
            settings,
            public_base,
            state,
            http: crate::signature::http_client(Duration::from_secs(10)),
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
                    order.delivery = mode;
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

    /// A payment as Razorpay shows it.
    pub fn payment(&self, id: &str) -> Option<Value> {
        self.state
            .with(|state| state.payments.get(id).map(Payment::to_json))
    }

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

    /// Sign and deliver one event about an order, following its delivery mode.
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
        let (to_send, copies, delay) =
            self.state
                .with(|state| match state.orders.get_mut(order_id) {
                    Some(order) => plan(order.delivery, &mut order.held_back, event),
                    None => plan(DeliveryMode::Normal, &mut Vec::new(), event),
                });
        if to_send.is_empty() || copies == 0 {
            return;
        }
        let sandbox = self.clone();
        tokio::spawn(async move {
            tokio::time::sleep(delay).await;
            for event in to_send {
                for _ in 0..copies {
                    sandbox.deliver(event.clone()).await;
                }
            }
        });
    }

    async fn deliver(&self, mut event: Value) {
        let Some(url) = self.state.with(|state| state.webhook_url.clone()) else {
            return;
        };
        // the event id travels in a header, as Razorpay sends it
        let event_id = event["x_event_id"].as_str().unwrap_or_default().to_owned();
        if let Some(object) = event.as_object_mut() {
            object.remove("x_event_id");
        }
        let event_type = event["event"].as_str().unwrap_or_default().to_owned();
        let body = event.to_string();
        let signature = hmac_sha256_hex(
            self.settings.razorpay_webhook_secret.expose().as_bytes(),
            body.as_bytes(),
        );
        let id = event_id.clone();
        post_until_accepted(
            &self.http,
            &url,
            &body,
            move || {
                vec![
                    ("X-Razorpay-Signature", signature.clone()),
                    ("X-Razorpay-Event-Id", id.clone()),
                ]
            },
            &self.settings,
            |status, attempt| {
                self.state.with(|state| {
                    state.ledger.deliveries.push(Delivery {
                        event_id: event_id.clone(),
                        event_type: event_type.clone(),
                        status,
                        attempt,
                    })
                })
            },
        )
        .await;
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
            };
            if !already_paid {
                order.status = "attempted";
            }
            order.payments.push(payment.id.clone());
            let automatic = match order.capture {
                Capture::Automatic { window_minutes } => {
                    !late && Utc::now().timestamp() - order.created_at <= window_minutes * 60
                }
                Capture::Manual => false,
            };
            let id = payment.id.clone();
            state.payments.insert(id.clone(), payment);
            if already_paid {
                // Razorpay refunds a payment on an order that is paid already
                let refund = Self::provider_refund_in(state, &id)
                    .ok_or_else(|| "no such payment".to_owned())?;
                let payment = state.payments[&id].to_json();
                return Ok::<_, String>((id, Then::Returned(refund, payment)));
            }
            let authorized = state.payments[&id].to_json();
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
        let returned: Vec<(String, Value, Value)> = self.state.with(|state| {
            let ids: Vec<String> = state
                .payments
                .values()
                .filter(|p| p.status == "authorized")
                .map(|p| p.id.clone())
                .collect();
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
                payment.amount_refunded -= refund.amount;
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

pub fn routes(config: &mut web::ServiceConfig) {
    config
        .route("/v1/orders", web::post().to(create_order))
        .route("/v1/orders/{id}", web::get().to(fetch_order))
        .route("/v1/orders/{id}/payments", web::get().to(order_payments))
        .route("/v1/payments/{id}", web::get().to(fetch_payment))
        .route("/v1/payments/{id}/capture", web::post().to(capture))
        .route("/v1/payments/{id}/refund", web::post().to(refund))
        .route("/v1/payments/{id}/refunds", web::get().to(payment_refunds))
        .route(
            "/v1/payments/{id}/refunds/{refund}",
            web::get().to(payment_refund),
        )
        .route("/v1/refunds/{id}", web::get().to(fetch_refund))
        .route("/checkout.js", web::get().to(checkout_script))
        .route("/pay/{order_id}", web::get().to(hosted_page))
        .route("/pay/{order_id}/{action}", web::post().to(hosted_action))
        .route(
            "/_sandbox/orders/{id}/delivery",
            web::post().to(set_delivery),
        )
        .route("/_sandbox/orders/{id}/pay", web::post().to(control_pay))
        .route("/_sandbox/auto-refund", web::post().to(auto_refund))
        .route("/_sandbox/refunds/auto", web::post().to(refunds_auto))
        .route(
            "/_sandbox/refunds/{id}/settle",
            web::post().to(settle_refund),
        )
        .route("/_sandbox/ledger", web::get().to(ledger))
        .default_service(web::to(unknown_route));
}

/// Razorpay's answer to a URL it does not serve.
async fn unknown_route() -> HttpResponse {
    answer(razorpay_error(
        StatusCode::NOT_FOUND,
        "The requested URL was not found on the server.",
        None,
    ))
}

fn unauthorised() -> HttpResponse {
    answer(razorpay_error(
        StatusCode::UNAUTHORIZED,
        "Authentication failed",
        None,
    ))
}

fn json_object(body: &[u8]) -> Result<Map<String, Value>, (u16, Value)> {
    match serde_json::from_slice::<Value>(body) {
        Ok(Value::Object(map)) => Ok(map),
        _ => Err(refused("The request body is not valid JSON", None)),
    }
}

/// The order's `payment` settings: `capture` automatic or manual; for
/// automatic, `capture_options.automatic_expiry_period` (minutes, at least
/// 12); `manual_expiry_period` not below it and at most 7200;
/// `refund_speed` normal or optimum.
fn capture_settings(body: &Map<String, Value>) -> Result<Capture, (u16, Value)> {
    if let Some(legacy) = body.get("payment_capture") {
        return match legacy {
            Value::Bool(true) => Ok(Capture::Automatic {
                window_minutes: i64::MAX / 120,
            }),
            Value::Number(n) if n.as_i64() == Some(1) => Ok(Capture::Automatic {
                window_minutes: i64::MAX / 120,
            }),
            Value::Bool(false) => Ok(Capture::Manual),
            Value::Number(n) if n.as_i64() == Some(0) => Ok(Capture::Manual),
            _ => Err(refused(
                "The payment capture field must be true or false.",
                Some("payment_capture"),
            )),
        };
    }
    let Some(payment) = body.get("payment") else {
        // the account's setting
        return Ok(Capture::Manual);
    };
    let Some(payment) = payment.as_object() else {
        return Err(refused("payment must be an object", Some("payment")));
    };
    if let Some(problem) = extra_field(payment, &["capture", "capture_options"]) {
        return Err(problem);
    }
    let options = payment
        .get("capture_options")
        .cloned()
        .unwrap_or(Value::Null);
    let options = match &options {
        Value::Object(map) => {
            if let Some(problem) = extra_field(
                map,
                &[
                    "automatic_expiry_period",
                    "manual_expiry_period",
                    "refund_speed",
                ],
            ) {
                return Err(problem);
            }
            Some(map)
        }
        Value::Null => None,
        _ => {
            return Err(refused(
                "capture_options must be an object",
                Some("capture_options"),
            ));
        }
    };
    let minutes = |name: &str| options.and_then(|o| o.get(name)).map(|v| v.as_i64());
    if let Some(speed) = options.and_then(|o| o.get("refund_speed"))
        && !matches!(speed.as_str(), Some("normal" | "optimum"))
    {
        return Err(refused(
            "refund_speed must be normal or optimum",
            Some("refund_speed"),
        ));
    }
    match payment.get("capture").and_then(Value::as_str) {
        Some("automatic") => {
            let Some(Some(automatic)) = minutes("automatic_expiry_period") else {
                return Err(refused(
                    "The automatic_expiry_period field is required when capture is automatic.",
                    Some("automatic_expiry_period"),
                ));
            };
            if automatic < 12 {
                return Err(refused(
                    "automatic_expiry_period must be at least 12 minutes",
                    Some("automatic_expiry_period"),
                ));
            }
            if let Some(manual) = minutes("manual_expiry_period") {
                match manual {
                    Some(manual) if manual >= automatic && manual <= 7200 => {}
                    _ => {
                        return Err(refused(
                            "manual_expiry_period must be at least automatic_expiry_period and at most 7200 minutes",
                            Some("manual_expiry_period"),
                        ));
                    }
                }
            }
            Ok(Capture::Automatic {
                window_minutes: automatic,
            })
        }
        Some("manual") => Ok(Capture::Manual),
        _ => Err(refused(
            "The capture field must be automatic or manual.",
            Some("capture"),
        )),
    }
}

async fn create_order(
    sandbox: web::Data<RazorpaySandbox>,
    request: HttpRequest,
    body: web::Bytes,
) -> HttpResponse {
    if !sandbox.authorised(&request) {
        return unauthorised();
    }
    let body = match json_object(&body) {
        Ok(body) => body,
        Err(refusal) => return answer(refusal),
    };
    if let Some(problem) = extra_field(
        &body,
        &[
            "amount",
            "currency",
            "receipt",
            "notes",
            "partial_payment",
            "first_payment_min_amount",
            "payment",
            "payment_capture",
        ],
    ) {
        return answer(problem);
    }
    let Some(amount) = body["amount"].as_i64().filter(|a| *a >= 100) else {
        return bad("The amount must be atleast INR 1.00", Some("amount"));
    };
    let Some(currency) = body["currency"]
        .as_str()
        .filter(|c| c.len() == 3 && c.bytes().all(|b| b.is_ascii_uppercase()))
    else {
        return bad("The currency field is required.", Some("currency"));
    };
    let receipt = match body.get("receipt") {
        None | Some(Value::Null) => None,
        Some(Value::String(r)) if r.chars().count() <= 40 => Some(r.clone()),
        Some(_) => {
            return bad(
                "The receipt may not be greater than 40 characters.",
                Some("receipt"),
            );
        }
    };
    let notes = body.get("notes").cloned().unwrap_or(Value::Null);
    if let Some(problem) = notes_problem(&notes) {
        return answer(problem);
    }
    let capture = match capture_settings(&body) {
        Ok(capture) => capture,
        Err(problem) => return answer(problem),
    };
    let order = Order {
        id: random_id("order"),
        amount,
        currency: currency.to_owned(),
        receipt,
        notes: if notes.is_null() { json!({}) } else { notes },
        created_at: Utc::now().timestamp(),
        capture,
        status: "created",
        payments: Vec::new(),
        delivery: DeliveryMode::Normal,
        held_back: Vec::new(),
    };
    let json = sandbox.state.with(|state| {
        let json = order.to_json(&state.payments);
        state.orders.insert(order.id.clone(), order);
        json
    });
    HttpResponse::Ok().json(json)
}

async fn fetch_order(
    sandbox: web::Data<RazorpaySandbox>,
    request: HttpRequest,
    path: web::Path<String>,
) -> HttpResponse {
    if !sandbox.authorised(&request) {
        return unauthorised();
    }
    match sandbox.state.with(|state| {
        state
            .orders
            .get(path.as_str())
            .map(|order| order.to_json(&state.payments))
    }) {
        Some(order) => HttpResponse::Ok().json(order),
        None => no_such_id(),
    }
}

fn collection(items: Vec<Value>) -> HttpResponse {
    HttpResponse::Ok().json(json!({ "entity": "collection", "count": items.len(), "items": items }))
}

async fn order_payments(
    sandbox: web::Data<RazorpaySandbox>,
    request: HttpRequest,
    path: web::Path<String>,
) -> HttpResponse {
    if !sandbox.authorised(&request) {
        return unauthorised();
    }
    let items = sandbox.state.with(|state| {
        state.orders.get(path.as_str()).map(|order| {
            order
                .payments
                .iter()
                .filter_map(|id| state.payments.get(id).map(Payment::to_json))
                .collect::<Vec<_>>()
        })
    });
    match items {
        Some(items) => collection(items),
        None => no_such_id(),
    }
}

async fn fetch_payment(
    sandbox: web::Data<RazorpaySandbox>,
    request: HttpRequest,
    path: web::Path<String>,
) -> HttpResponse {
    if !sandbox.authorised(&request) {
        return unauthorised();
    }
    match sandbox.payment(&path) {
        Some(payment) => HttpResponse::Ok().json(payment),
        None => no_such_id(),
    }
}

/// `POST /v1/payments/{id}/capture`: only an authorised payment, for
/// exactly its amount and currency.
async fn capture(
    sandbox: web::Data<RazorpaySandbox>,
    request: HttpRequest,
    path: web::Path<String>,
    body: web::Bytes,
) -> HttpResponse {
    if !sandbox.authorised(&request) {
        return unauthorised();
    }
    let body = match json_object(&body) {
        Ok(body) => body,
        Err(refusal) => return answer(refusal),
    };
    if let Some(problem) = extra_field(&body, &["amount", "currency"]) {
        return answer(problem);
    }
    let Some(amount) = body.get("amount").and_then(Value::as_i64) else {
        return bad("The amount must be an integer.", Some("amount"));
    };
    let Some(currency) = body.get("currency").and_then(Value::as_str) else {
        return bad("The currency field is required.", Some("currency"));
    };
    let result = sandbox.state.with(|state| {
        let Some(payment) = state.payments.get(path.as_str()) else {
            return Err(unknown_id());
        };
        if payment.captured {
            return Err(refused("This payment has already been captured", None));
        }
        if payment.status != "authorized" {
            return Err(refused(
                "Only payments which have been authorized and not yet captured can be captured",
                None,
            ));
        }
        if amount != payment.amount {
            return Err(refused(
                "Capture amount must be equal to the amount authorized",
                Some("amount"),
            ));
        }
        if currency != payment.currency {
            return Err(refused(
                "Currency should be same as that of the payment",
                Some("currency"),
            ));
        }
        RazorpaySandbox::capture_in(state, path.as_str()).ok_or_else(unknown_id)
    });
    match result {
        Ok(captured) => {
            let payment = captured.0.clone();
            sandbox.captured_events(captured);
            HttpResponse::Ok().json(payment)
        }
        Err(refusal) => answer(refusal),
    }
}

/// `X-Refund-Idempotency`: at least 10 letters, digits, `-` and `_`.
fn refund_key_ok(key: &str) -> bool {
    (10..=255).contains(&key.len())
        && key
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
}

async fn refund(
    sandbox: web::Data<RazorpaySandbox>,
    request: HttpRequest,
    path: web::Path<String>,
    raw: web::Bytes,
) -> HttpResponse {
    if !sandbox.authorised(&request) {
        return unauthorised();
    }
    let payment_id = path.into_inner();
    let key = request
        .headers()
        .get("X-Refund-Idempotency")
        .and_then(|value| value.to_str().ok())
        .map(str::to_owned);
    if key.as_deref().is_some_and(|k| !refund_key_ok(k)) {
        return bad(
            "X-Refund-Idempotency must be at least 10 characters of letters, digits, hyphens and underscores",
            None,
        );
    }
    let body = if raw.is_empty() {
        Map::new()
    } else {
        match json_object(&raw) {
            Ok(body) => body,
            Err(refusal) => return answer(refusal),
        }
    };
    if let Some(problem) = extra_field(&body, &["amount", "speed", "notes", "receipt"]) {
        return answer(problem);
    }
    let notes = body.get("notes").cloned().unwrap_or(Value::Null);
    if let Some(problem) = notes_problem(&notes) {
        return answer(problem);
    }
    let speed = match body.get("speed") {
        None => "normal".to_owned(),
        Some(Value::String(s)) if s == "normal" || s == "optimum" => s.clone(),
        Some(_) => return bad("speed must be normal or optimum", Some("speed")),
    };
    let amount = match body.get("amount") {
        None => None,
        Some(value) => match value.as_i64().filter(|a| *a > 0) {
            Some(amount) => Some(amount),
            None => return bad("The amount must be an integer.", Some("amount")),
        },
    };
    // a repeat gets the first answer; another body under the key is
    // refused; a repeat while the first is in flight gets 409
    let body_hash: [u8; 32] = Sha256::digest(&raw).into();
    if let Some(key) = &key {
        let seen = sandbox
            .state
            .with(|state| match state.refund_keys.get(key) {
                Some(first) if first.body != body_hash => Some(Err(bad(
                    "Different request with the same idempotency key has already been processed.",
                    None,
                ))),
                Some(RefundKey {
                    answer: Some(answer),
                    ..
                }) => Some(Ok(answer.clone())),
                Some(_) => Some(Err(answer(razorpay_error(
                    StatusCode::CONFLICT,
                    "Another request with the same idempotency key is in progress",
                    None,
                )))),
                None => {
                    state.refund_keys.insert(
                        key.clone(),
                        RefundKey {
                            body: body_hash,
                            answer: None,
                        },
                    );
                    None
                }
            });
        match seen {
            Some(Ok(first)) => return answer(first),
            Some(Err(response)) => return response,
            None => {}
        }
    }
    // the refund takes a moment, as a bank's does
    tokio::time::sleep(Duration::from_millis(30)).await;
    let result = sandbox.state.with(|state| {
        let Some(payment) = state.payments.get_mut(&payment_id) else {
            return Err(razorpay_error(
                StatusCode::BAD_REQUEST,
                "The id provided does not exist",
                Some("id"),
            ));
        };
        if !payment.captured {
            return Err(razorpay_error(
                StatusCode::BAD_REQUEST,
                "Only captured payments can be refunded",
                None,
            ));
        }
        if payment.left() <= 0 {
            return Err(razorpay_error(
                StatusCode::BAD_REQUEST,
                "The payment has been fully refunded already",
                None,
            ));
        }
        let amount = amount.unwrap_or(payment.left());
        if amount > payment.left() {
            return Err(razorpay_error(
                StatusCode::BAD_REQUEST,
                "The refund amount provided is greater than amount captured.",
                Some("amount"),
            ));
        }
        payment.amount_refunded += amount;
        if payment.left() == 0 {
            payment.status = "refunded";
        }
        let refund = Refund {
            id: random_id("rfnd"),
            payment_id: payment.id.clone(),
            order_id: payment.order_id.clone(),
            amount,
            currency: payment.currency.clone(),
            notes: if notes.is_null() {
                json!({})
            } else {
                notes.clone()
            },
            receipt: body
                .get("receipt")
                .and_then(Value::as_str)
                .map(str::to_owned),
            speed: speed.clone(),
            status: "pending",
            created_at: Utc::now().timestamp(),
        };
        state.ledger.refunds.push(RefundRecord {
            id: refund.id.clone(),
            payment_intent: payment.id.clone(),
            amount,
            idempotency_key: key.clone(),
            status: "pending",
            by_provider: false,
        });
        let json = refund.to_json();
        let payment_json = payment.to_json();
        state.refunds.push(refund.clone());
        Ok((json, payment_json, refund))
    });
    match result {
        Ok((json, payment, created)) => {
            if let Some(key) = &key {
                sandbox.state.with(|state| {
                    if let Some(k) = state.refund_keys.get_mut(key) {
                        k.answer = Some((200, json.clone()));
                    }
                });
            }
            sandbox.emit(
                &created.order_id,
                "refund.created",
                json!({ "refund": { "entity": json.clone() }, "payment": { "entity": payment } }),
            );
            if let Some(after) = sandbox.state.with(|s| s.refunds_settle_after) {
                let sandbox = sandbox.clone();
                tokio::spawn(async move {
                    tokio::time::sleep(after).await;
                    let _ = sandbox.settle_refund(&created.id, true);
                });
            }
            HttpResponse::Ok().json(json)
        }
        Err(refused) => {
            // a refusal of the request itself is its answer under the key
            if let Some(key) = &key {
                sandbox.state.with(|state| {
                    if let Some(k) = state.refund_keys.get_mut(key) {
                        k.answer = Some(refused.clone());
                    }
                });
            }
            answer(refused)
        }
    }
}

async fn payment_refunds(
    sandbox: web::Data<RazorpaySandbox>,
    request: HttpRequest,
    path: web::Path<String>,
) -> HttpResponse {
    if !sandbox.authorised(&request) {
        return unauthorised();
    }
    let items = sandbox.state.with(|state| {
        state.payments.contains_key(path.as_str()).then(|| {
            state
                .refunds
                .iter()
                .rev()
                .filter(|r| r.payment_id == *path)
                .map(Refund::to_json)
                .collect::<Vec<_>>()
        })
    });
    match items {
        Some(items) => collection(items),
        None => no_such_id(),
    }
}

fn refund_json(sandbox: &RazorpaySandbox, id: &str, payment: Option<&str>) -> HttpResponse {
    match sandbox.state.with(|state| {
        state
            .refunds
            .iter()
            .find(|r| r.id == id && payment.is_none_or(|p| p == r.payment_id))
            .map(Refund::to_json)
    }) {
        Some(refund) => HttpResponse::Ok().json(refund),
        None => no_such_id(),
    }
}

async fn payment_refund(
    sandbox: web::Data<RazorpaySandbox>,
    request: HttpRequest,
    path: web::Path<(String, String)>,
) -> HttpResponse {
    if !sandbox.authorised(&request) {
        return unauthorised();
    }
    let (payment, refund) = path.into_inner();
    refund_json(&sandbox, &refund, Some(&payment))
}

async fn fetch_refund(
    sandbox: web::Data<RazorpaySandbox>,
    request: HttpRequest,
    path: web::Path<String>,
) -> HttpResponse {
    if !sandbox.authorised(&request) {
        return unauthorised();
    }
    refund_json(&sandbox, &path, None)
}

/// The stand-in for checkout.js in redirect mode: `new Razorpay(options)
/// .open()` sends the browser to the sandbox's hosted page.
async fn checkout_script(sandbox: web::Data<RazorpaySandbox>) -> HttpResponse {
    let base = sandbox.public_base.clone();
    HttpResponse::Ok()
        .content_type("application/javascript")
        .body(format!(
            "window.Razorpay = function (options) {{ this.options = options; }};\n\
             window.Razorpay.prototype.open = function () {{\n\
               var o = this.options;\n\
               var q = 'callback_url=' + encodeURIComponent(o.callback_url) +\n\
                       '&cancel_url=' + encodeURIComponent((o.modal && o.modal.cancel_url) || '');\n\
               window.location.href = '{base}/razorpay/pay/' + encodeURIComponent(o.order_id) + '?' + q;\n\
             }};\n"
        ))
}

#[derive(Debug, Deserialize)]
struct PageQuery {
    callback_url: Option<String>,
    cancel_url: Option<String>,
}

async fn hosted_page(
    sandbox: web::Data<RazorpaySandbox>,
    path: web::Path<String>,
    query: web::Query<PageQuery>,
) -> HttpResponse {
    let order_id = path.into_inner();
    let Some(order) = sandbox.state.with(|s| s.orders.get(&order_id).cloned()) else {
        return HttpResponse::NotFound().body("No such order.");
    };
    let callback = escape(query.callback_url.as_deref().unwrap_or_default());
    let cancel = escape(query.cancel_url.as_deref().unwrap_or_default());
    let id = escape(&order.id);
    let button = |action: &str, label: &str| {
        format!(
            "<form method=\"post\" action=\"/razorpay/pay/{id}/{action}\">\
             <input type=\"hidden\" name=\"callback_url\" value=\"{callback}\">\
             <input type=\"hidden\" name=\"cancel_url\" value=\"{cancel}\">\
             <button id=\"{action}\">{label}</button></form>"
        )
    };
    page(
        "Razorpay Checkout",
        &format!(
            "<h1>Pay {}</h1><p>Order {id}</p>{}{}{}{}{}",
            amount_text(order.amount, &order.currency),
            button("pay", "Pay"),
            button("decline", "Pay with a card that is declined"),
            button("pay-twice", "Pay twice"),
            button(
                "pay-late",
                "Pay, authorised late (after the capture window)"
            ),
            button("abandon", "Close checkout"),
        ),
    )
}

#[derive(Debug, Deserialize)]
struct ActionForm {
    callback_url: Option<String>,
    cancel_url: Option<String>,
}

/// The browser's POST to the shop's callback, as redirect mode sends it.
fn callback_form(callback_url: &str, fields: &[(&str, &str)]) -> HttpResponse {
    let inputs: String = fields
        .iter()
        .map(|(name, value)| {
            format!(
                "<input type=\"hidden\" name=\"{}\" value=\"{}\">",
                escape(name),
                escape(value)
            )
        })
        .collect();
    HttpResponse::Ok().content_type("text/html; charset=utf-8").body(format!(
        "<!doctype html><html><body><form id=\"callback\" method=\"post\" action=\"{}\">{inputs}\
         <noscript><button>Continue</button></noscript></form>\
         <script>document.getElementById('callback').submit();</script></body></html>",
        escape(callback_url)
    ))
}

async fn hosted_action(
    sandbox: web::Data<RazorpaySandbox>,
    path: web::Path<(String, String)>,
    form: web::Form<ActionForm>,
) -> HttpResponse {
    let (order_id, action) = path.into_inner();
    let callback = form.callback_url.clone().unwrap_or_default();
    match action.as_str() {
        "pay" | "pay-late" | "pay-twice" => {
            let first = match sandbox.authorize(&order_id, None, action == "pay-late") {
                Ok(id) => id,
                Err(message) => return page("Checkout", &format!("<h1>{}</h1>", escape(&message))),
            };
            if action == "pay-twice" {
                let _ = sandbox.authorize(&order_id, None, false);
            }
            if callback.is_empty() {
                return page("Paid", "<h1>Paid</h1>");
            }
            let signature = sandbox.signature(&order_id, &first);
            callback_form(
                &callback,
                &[
                    ("razorpay_payment_id", &first),
                    ("razorpay_order_id", &order_id),
                    ("razorpay_signature", &signature),
                ],
            )
        }
        "decline" => {
            let payment = sandbox.state.with(|state| {
                let order = state.orders.get_mut(&order_id)?;
                if order.status == "created" {
                    order.status = "attempted";
                }
                let payment = Payment {
                    id: random_id("pay"),
                    order_id: order_id.clone(),
                    amount: order.amount,
                    currency: order.currency.clone(),
                    status: "failed",
                    captured: false,
                    amount_refunded: 0,
                    created_at: Utc::now().timestamp(),
                    error: Some((
                        "Your payment has been declined by the bank.",
                        "payment_failed",
                    )),
                };
                order.payments.push(payment.id.clone());
                state.payments.insert(payment.id.clone(), payment.clone());
                Some(payment)
            });
            let Some(payment) = payment else {
                return HttpResponse::NotFound().body("No such order.");
            };
            sandbox.emit(
                &order_id,
                "payment.failed",
                json!({ "payment": { "entity": payment.to_json() } }),
            );
            if callback.is_empty() {
                return page(
                    "Declined",
                    "<h1>Your card was declined</h1><p>Go back and try again.</p>",
                );
            }
            // redirect mode tells the shop about a failure too
            let metadata = json!({ "payment_id": payment.id, "order_id": order_id }).to_string();
            callback_form(
                &callback,
                &[
                    ("error[code]", "BAD_REQUEST_ERROR"),
                    (
                        "error[description]",
                        "Your payment has been declined by the bank.",
                    ),
                    ("error[source]", "customer"),
                    ("error[step]", "payment_authorization"),
                    ("error[reason]", "payment_failed"),
                    ("error[metadata]", &metadata),
                ],
            )
        }
        "abandon" => match form.cancel_url.as_deref().filter(|u| !u.is_empty()) {
            Some(url) => redirect(url),
            None => page("Closed", "<h1>You closed the checkout</h1>"),
        },
        _ => HttpResponse::NotFound().body("No such action."),
    }
}

async fn set_delivery(
    sandbox: web::Data<RazorpaySandbox>,
    path: web::Path<String>,
    query: web::Query<DeliveryQuery>,
) -> HttpResponse {
    if sandbox.set_delivery(&path.into_inner(), query.mode) {
        HttpResponse::NoContent().finish()
    } else {
        HttpResponse::NotFound().finish()
    }
}

#[derive(Debug, Deserialize)]
struct PayQuery {
    amount: Option<i64>,
    #[serde(default)]
    late: bool,
}

/// A payment as the checkout would make it, with what the callback would
/// carry: `{payment_id, signature}`.
async fn control_pay(
    sandbox: web::Data<RazorpaySandbox>,
    path: web::Path<String>,
    query: web::Query<PayQuery>,
) -> HttpResponse {
    let order_id = path.into_inner();
    match sandbox.authorize(&order_id, query.amount, query.late) {
        Ok(payment_id) => HttpResponse::Ok().json(json!({
            "payment_id": payment_id,
            "signature": sandbox.signature(&order_id, &payment_id),
        })),
        Err(message) => HttpResponse::NotFound().body(message),
    }
}

async fn auto_refund(sandbox: web::Data<RazorpaySandbox>) -> HttpResponse {
    let returned = sandbox.auto_refund_uncaptured();
    HttpResponse::Ok().json(json!({ "refunded": returned }))
}

async fn settle_refund(
    sandbox: web::Data<RazorpaySandbox>,
    path: web::Path<String>,
    query: web::Query<OutcomeQuery>,
) -> HttpResponse {
    let id = path.into_inner();
    query.settle("processed", |ok| sandbox.settle_refund(&id, ok))
}

async fn refunds_auto(
    sandbox: web::Data<RazorpaySandbox>,
    query: web::Query<AutoQuery>,
) -> HttpResponse {
    sandbox.set_refunds_settle_after(query.after());
    HttpResponse::NoContent().finish()
}

async fn ledger(sandbox: web::Data<RazorpaySandbox>) -> HttpResponse {
    HttpResponse::Ok().json(sandbox.ledger())
}
