//! The Razorpay part of the sandbox, under `/razorpay`: the orders,
//! payments and refunds endpoints Holdfast uses (Razorpay's JSON and error
//! shape, HTTP basic auth, `X-Refund-Idempotency` honoured with a 409 for a
//! concurrent duplicate), a stand-in for the hosted checkout in redirect mode
//! (the signed callback POST), and signed webhooks with retries and the same
//! test controls as the Stripe part.

use std::collections::HashMap;
use std::time::Duration;

use actix_web::http::StatusCode;
use actix_web::http::header;
use actix_web::{HttpRequest, HttpResponse, web};
use chrono::Utc;
use serde::Deserialize;
use serde_json::{Value, json};

use super::{
    Charge, Delivery, DeliveryMode, Ledger, RefundRecord, SandboxSettings, Shared, escape, page,
    plan, post_until_accepted, random_id, redirect,
};
use crate::webhooks::signature::{hmac_sha256_hex, same_text};

#[derive(Debug, Clone)]
struct Order {
    id: String,
    amount: i64,
    currency: String,
    receipt: Option<String>,
    notes: Value,
    created_at: i64,
    /// created, attempted or paid
    status: &'static str,
    payments: Vec<String>,
    delivery: DeliveryMode,
    held_back: Vec<Value>,
}

impl Order {
    fn to_json(&self) -> Value {
        let paid = if self.status == "paid" {
            self.amount
        } else {
            0
        };
        json!({
            "id": self.id, "entity": "order", "amount": self.amount, "amount_paid": paid,
            "amount_due": self.amount - paid, "currency": self.currency, "receipt": self.receipt,
            "status": self.status, "attempts": self.payments.len(), "notes": self.notes,
            "created_at": self.created_at,
        })
    }
}

#[derive(Debug, Clone)]
struct Payment {
    id: String,
    order_id: String,
    amount: i64,
    currency: String,
    status: &'static str,
    created_at: i64,
}

impl Payment {
    fn to_json(&self) -> Value {
        json!({
            "id": self.id, "entity": "payment", "amount": self.amount, "currency": self.currency,
            "status": self.status, "order_id": self.order_id, "method": "card",
            "captured": self.status == "captured", "amount_refunded": 0,
            "created_at": self.created_at,
        })
    }
}

#[derive(Debug, Default)]
struct State {
    webhook_url: Option<String>,
    orders: HashMap<String, Order>,
    payments: HashMap<String, Payment>,
    /// refund idempotency keys: `None` while the first request is running
    refund_keys: HashMap<String, Option<Value>>,
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

fn razorpay_error(status: StatusCode, description: &str, field: Option<&str>) -> HttpResponse {
    HttpResponse::build(status).json(json!({
        "error": {
            "code": "BAD_REQUEST_ERROR",
            "description": description, "source": "business", "step": "payment_initiation",
            "reason": "input_validation_failed", "field": field, "metadata": {},
        }
    }))
}

impl RazorpaySandbox {
    pub fn new(settings: SandboxSettings, public_base: String) -> Self {
        let state = Shared::default();
        state.with(|s: &mut State| s.webhook_url = settings.razorpay_webhook_url.clone());
        Self {
            settings,
            public_base,
            state,
            http: reqwest::Client::builder()
                .timeout(Duration::from_secs(10))
                .build()
                .expect("an HTTP client"),
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

    /// A captured payment on an order, with its events. Returns the payment id.
    fn pay(&self, order_id: &str) -> Result<String, String> {
        let (payment, order) = self.state.with(|state| {
            let order = state
                .orders
                .get_mut(order_id)
                .ok_or_else(|| "no such order".to_owned())?;
            let payment = Payment {
                id: random_id("pay"),
                order_id: order.id.clone(),
                amount: order.amount,
                currency: order.currency.clone(),
                status: "captured",
                created_at: Utc::now().timestamp(),
            };
            order.status = "paid";
            order.payments.push(payment.id.clone());
            let order_json = order.to_json();
            state.ledger.charges.push(Charge {
                payment_intent: payment.id.clone(),
                session_id: order_id.to_owned(),
                amount: payment.amount,
                currency: payment.currency.clone(),
            });
            state.payments.insert(payment.id.clone(), payment.clone());
            Ok::<_, String>((payment, order_json))
        })?;
        self.emit(
            order_id,
            "payment.captured",
            json!({ "payment": { "entity": payment.to_json() } }),
        );
        self.emit(
            order_id,
            "order.paid",
            json!({ "payment": { "entity": payment.to_json() }, "order": { "entity": order } }),
        );
        Ok(payment.id)
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
        .route("/v1/orders/{id}/payments", web::get().to(order_payments))
        .route("/v1/payments/{id}", web::get().to(fetch_payment))
        .route("/v1/payments/{id}/refund", web::post().to(refund))
        .route("/checkout.js", web::get().to(checkout_script))
        .route("/pay/{order_id}", web::get().to(hosted_page))
        .route("/pay/{order_id}/{action}", web::post().to(hosted_action))
        .route(
            "/_sandbox/orders/{id}/delivery",
            web::post().to(set_delivery),
        )
        .route("/_sandbox/ledger", web::get().to(ledger));
}

#[derive(Debug, Deserialize)]
struct CreateOrderBody {
    amount: Option<i64>,
    currency: Option<String>,
    receipt: Option<String>,
    #[serde(default)]
    notes: Value,
}

fn unauthorised() -> HttpResponse {
    razorpay_error(StatusCode::UNAUTHORIZED, "Authentication failed", None)
}

async fn create_order(
    sandbox: web::Data<RazorpaySandbox>,
    request: HttpRequest,
    body: web::Bytes,
) -> HttpResponse {
    if !sandbox.authorised(&request) {
        return unauthorised();
    }
    let Ok(body) = serde_json::from_slice::<CreateOrderBody>(&body) else {
        return razorpay_error(
            StatusCode::BAD_REQUEST,
            "The request body is not valid JSON",
            None,
        );
    };
    let Some(amount) = body.amount.filter(|a| *a >= 100) else {
        return razorpay_error(
            StatusCode::BAD_REQUEST,
            "The amount must be atleast INR 1.00",
            Some("amount"),
        );
    };
    let Some(currency) = body.currency.filter(|c| c.len() == 3) else {
        return razorpay_error(
            StatusCode::BAD_REQUEST,
            "The currency field is required.",
            Some("currency"),
        );
    };
    let order = Order {
        id: random_id("order"),
        amount,
        currency,
        receipt: body.receipt,
        notes: if body.notes.is_null() {
            json!({})
        } else {
            body.notes
        },
        created_at: Utc::now().timestamp(),
        status: "created",
        payments: Vec::new(),
        delivery: DeliveryMode::Normal,
        held_back: Vec::new(),
    };
    let json = order.to_json();
    sandbox
        .state
        .with(|state| state.orders.insert(order.id.clone(), order));
    HttpResponse::Ok().json(json)
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
        Some(items) => HttpResponse::Ok()
            .json(json!({ "entity": "collection", "count": items.len(), "items": items })),
        None => razorpay_error(
            StatusCode::BAD_REQUEST,
            "The id provided does not exist",
            Some("id"),
        ),
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
    match sandbox
        .state
        .with(|state| state.payments.get(path.as_str()).map(Payment::to_json))
    {
        Some(payment) => HttpResponse::Ok().json(payment),
        None => razorpay_error(
            StatusCode::BAD_REQUEST,
            "The id provided does not exist",
            Some("id"),
        ),
    }
}

async fn refund(
    sandbox: web::Data<RazorpaySandbox>,
    request: HttpRequest,
    path: web::Path<String>,
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
    if key.as_ref().is_some_and(|k| k.len() < 10 || k.len() > 255) {
        return razorpay_error(
            StatusCode::BAD_REQUEST,
            "X-Refund-Idempotency must be 10 to 255 characters",
            None,
        );
    }
    // a repeat gets the first answer; a concurrent duplicate gets 409
    if let Some(key) = &key {
        let seen = sandbox
            .state
            .with(|state| match state.refund_keys.get(key) {
                Some(Some(answer)) => Some(Ok(answer.clone())),
                Some(None) => Some(Err(())),
                None => {
                    state.refund_keys.insert(key.clone(), None);
                    None
                }
            });
        match seen {
            Some(Ok(answer)) => return HttpResponse::Ok().json(answer),
            Some(Err(())) => {
                return razorpay_error(
                    StatusCode::CONFLICT,
                    "Another request with the same idempotency key is in progress",
                    None,
                );
            }
            None => {}
        }
    }
    // the refund takes a moment, as a bank's does
    tokio::time::sleep(Duration::from_millis(30)).await;
    let result = sandbox.state.with(|state| {
        let Some(payment) = state.payments.get_mut(&payment_id) else {
            return Err((StatusCode::BAD_REQUEST, "The id provided does not exist"));
        };
        if payment.status != "captured" {
            return Err((StatusCode::BAD_REQUEST, "The payment has been fully refunded already"));
        }
        payment.status = "refunded";
        let refund = RefundRecord {
            id: random_id("rfnd"),
            payment_intent: payment.id.clone(),
            amount: payment.amount,
            idempotency_key: key.clone(),
        };
        let answer = json!({
            "id": refund.id, "entity": "refund", "amount": refund.amount, "currency": payment.currency,
            "payment_id": payment.id, "status": "processed", "speed_processed": "normal",
            "created_at": Utc::now().timestamp(),
        });
        let order_id = payment.order_id.clone();
        state.ledger.refunds.push(refund);
        if let Some(key) = &key {
            state.refund_keys.insert(key.clone(), Some(answer.clone()));
        }
        Ok((answer, order_id))
    });
    match result {
        Ok((answer, order_id)) => {
            sandbox.emit(
                &order_id,
                "refund.processed",
                json!({ "refund": { "entity": answer.clone() } }),
            );
            HttpResponse::Ok().json(answer)
        }
        Err((status, message)) => {
            if let Some(key) = &key {
                sandbox.state.with(|state| state.refund_keys.remove(key));
            }
            razorpay_error(status, message, None)
        }
    }
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
            "<h1>Pay {}.{:02} {}</h1><p>Order {id}</p>{}{}{}{}{}",
            order.amount / 100,
            order.amount % 100,
            escape(&order.currency),
            button("pay", "Pay"),
            button("decline", "Pay with a card that is declined"),
            button("pay-twice", "Pay twice"),
            button("pay-late", "Pay late (after the shop's reservation ended)"),
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
            let first = match sandbox.pay(&order_id) {
                Ok(id) => id,
                Err(message) => return page("Checkout", &format!("<h1>{}</h1>", escape(&message))),
            };
            if action == "pay-twice" {
                let _ = sandbox.pay(&order_id);
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
                order.status = "attempted";
                let payment = Payment {
                    id: random_id("pay"),
                    order_id: order_id.clone(),
                    amount: order.amount,
                    currency: order.currency.clone(),
                    status: "failed",
                    created_at: Utc::now().timestamp(),
                };
                order.payments.push(payment.id.clone());
                state.payments.insert(payment.id.clone(), payment.clone());
                Some(payment)
            });
            match payment {
                Some(payment) => {
                    sandbox.emit(
                        &order_id,
                        "payment.failed",
                        json!({ "payment": { "entity": payment.to_json() } }),
                    );
                    page(
                        "Declined",
                        "<h1>Your card was declined</h1><p>Go back and try again.</p>",
                    )
                }
                None => HttpResponse::NotFound().body("No such order."),
            }
        }
        "abandon" => match form.cancel_url.as_deref().filter(|u| !u.is_empty()) {
            Some(url) => redirect(url),
            None => page("Closed", "<h1>You closed the checkout</h1>"),
        },
        _ => HttpResponse::NotFound().body("No such action."),
    }
}

#[derive(Debug, Deserialize)]
struct DeliveryQuery {
    mode: DeliveryMode,
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

async fn ledger(sandbox: web::Data<RazorpaySandbox>) -> HttpResponse {
    HttpResponse::Ok().json(sandbox.ledger())
}
