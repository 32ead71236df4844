//! The Stripe part of the sandbox.

use std::collections::HashMap;
use std::time::Duration;

use actix_web::http::StatusCode;
use actix_web::http::header;
use actix_web::{HttpRequest, HttpResponse, web};
use chrono::Utc;
use serde::Deserialize;
use serde_json::{Value, json};

use super::{
    Charge, Delivery, DeliveryMode, IdempotencyStore, Ledger, RefundRecord, SandboxSettings,
    Shared, escape, page, plan, post_until_accepted, random_id, redirect,
};
use crate::webhooks::signature::{same_text, stripe_signature_header};

#[derive(Debug, Clone)]
struct Session {
    id: String,
    created: i64,
    expires_at: i64,
    amount_total: i64,
    currency: String,
    client_reference_id: Option<String>,
    metadata: HashMap<String, String>,
    success_url: Option<String>,
    cancel_url: Option<String>,
    customer_email: Option<String>,
    line_items: Vec<(String, i64, i64)>,
    /// open, complete or expired
    status: &'static str,
    payment_status: &'static str,
    payment_intent: Option<String>,
    delivery: DeliveryMode,
    held_back: Vec<Value>,
}

impl Session {
    fn to_json(&self, public_base: &str) -> Value {
        json!({
            "id": self.id,
            "object": "checkout.session",
            "amount_subtotal": self.amount_total,
            "amount_total": self.amount_total,
            "automatic_tax": { "enabled": false, "liability": null, "provider": null, "status": null },
            "cancel_url": self.cancel_url,
            "client_reference_id": self.client_reference_id,
            "created": self.created,
            "currency": self.currency,
            "custom_fields": [],
            "custom_text": { "after_submit": null, "shipping_address": null, "submit": null, "terms_of_service_acceptance": null },
            "customer_email": self.customer_email,
            "expires_at": self.expires_at,
            "livemode": false,
            "metadata": self.metadata,
            "mode": "payment",
            "payment_intent": self.payment_intent,
            "payment_method_types": ["card"],
            "payment_status": self.payment_status,
            "shipping_options": [],
            "status": self.status,
            "success_url": self.success_url,
            "url": (self.status == "open").then(|| format!("{public_base}/stripe/pay/{}", self.id)),
        })
    }
}

#[derive(Debug, Default)]
struct State {
    webhook_url: Option<String>,
    sessions: HashMap<String, Session>,
    idempotency: IdempotencyStore,
    ledger: Ledger,
}

/// The Stripe stand-in. Cheap to clone; clones share state.
#[derive(Clone)]
pub struct StripeSandbox {
    settings: SandboxSettings,
    public_base: String,
    state: Shared<State>,
    http: reqwest::Client,
}

impl std::fmt::Debug for StripeSandbox {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StripeSandbox")
            .field("public_base", &self.public_base)
            .finish_non_exhaustive()
    }
}

/// Stripe's error shape.
fn stripe_error(
    status: StatusCode,
    kind: &str,
    message: &str,
    param: Option<&str>,
) -> HttpResponse {
    HttpResponse::build(status).json(json!({
        "error": { "type": kind, "message": message, "param": param }
    }))
}

impl StripeSandbox {
    pub fn new(settings: SandboxSettings, public_base: String) -> Self {
        let state = Shared::default();
        state.with(|s: &mut State| s.webhook_url = settings.stripe_webhook_url.clone());
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

    /// The base URL a Stripe client should use (`…/stripe/`).
    pub fn api_base(&self) -> String {
        format!("{}/stripe/", self.public_base)
    }

    /// Where webhooks go from now on (Holdfast's `/webhooks/stripe`).
    pub fn set_webhook_url(&self, url: String) {
        self.state.with(|state| state.webhook_url = Some(url));
    }

    pub fn ledger(&self) -> Ledger {
        self.state.with(|state| state.ledger.clone())
    }

    /// Change how one session's webhooks are delivered.
    pub fn set_delivery(&self, session_id: &str, mode: DeliveryMode) -> bool {
        self.state
            .with(|state| match state.sessions.get_mut(session_id) {
                Some(session) => {
                    session.delivery = mode;
                    true
                }
                None => false,
            })
    }

    fn authorised(&self, request: &HttpRequest) -> bool {
        let expected = format!("Bearer {}", self.settings.stripe_secret_key.expose());
        request
            .headers()
            .get(header::AUTHORIZATION)
            .and_then(|value| value.to_str().ok())
            .is_some_and(|value| same_text(value, &expected))
    }

    /// Answer a POST once per idempotency key: a replay gets the first answer.
    fn idempotent(
        &self,
        request: &HttpRequest,
        handle: impl FnOnce() -> (StatusCode, Value),
    ) -> HttpResponse {
        let key = request
            .headers()
            .get("Idempotency-Key")
            .and_then(|value| value.to_str().ok())
            .map(|key| format!("{} {}", request.path(), key));
        if let Some(key) = &key
            && let Some((status, body)) = self.state.with(|s| s.idempotency.get(key).cloned())
        {
            return HttpResponse::build(StatusCode::from_u16(status).unwrap_or(StatusCode::OK))
                .insert_header(("Idempotent-Replayed", "true"))
                .json(body);
        }
        let (status, body) = handle();
        if let Some(key) = key
            && status.is_success()
        {
            self.state
                .with(|s| s.idempotency.insert(key, (status.as_u16(), body.clone())));
        }
        HttpResponse::build(status).json(body)
    }

    /// Sign and deliver one event, following the session's delivery mode.
    fn emit(&self, session_id: &str, event_type: &str, object: Value) {
        let event = json!({
            "id": random_id("evt"),
            "object": "event",
            "api_version": "2025-03-31.basil",
            "created": Utc::now().timestamp(),
            "livemode": false,
            "type": event_type,
            "data": { "object": object },
        });
        let (to_send, copies, delay) =
            self.state
                .with(|state| match state.sessions.get_mut(session_id) {
                    Some(session) => plan(session.delivery, &mut session.held_back, event),
                    None => plan(DeliveryMode::Normal, &mut Vec::new(), event),
                });
        if to_send.is_empty() || copies == 0 {
            return;
        }
        // one task per batch, delivering in order: "newest first" and
        // "twice" mean what they say at the receiving end
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

    /// POST the event to the webhook URL until it is accepted or the
    /// attempts run out, doubling the wait each time.
    async fn deliver(&self, event: Value) {
        let Some(url) = self.state.with(|state| state.webhook_url.clone()) else {
            return;
        };
        let body = event.to_string();
        let event_id = event["id"].as_str().unwrap_or_default().to_owned();
        let event_type = event["type"].as_str().unwrap_or_default().to_owned();
        let secret = self.settings.stripe_webhook_secret.clone();
        let signed_body = body.clone();
        post_until_accepted(
            &self.http,
            &url,
            &body,
            move || {
                vec![(
                    "Stripe-Signature",
                    stripe_signature_header(
                        &secret,
                        Utc::now().timestamp(),
                        signed_body.as_bytes(),
                    ),
                )]
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

    /// Complete a session with a new payment, as paying on the page does.
    /// Returns the session's success URL.
    fn pay(&self, session_id: &str, allow_expired: bool) -> Result<Option<String>, String> {
        let (object, success) = self.state.with(|state| {
            let session = state
                .sessions
                .get_mut(session_id)
                .ok_or_else(|| "no such session".to_owned())?;
            let expired =
                session.status == "expired" || session.expires_at <= Utc::now().timestamp();
            if expired && !allow_expired {
                return Err("this payment page has expired".to_owned());
            }
            let payment_intent = random_id("pi");
            session.status = "complete";
            session.payment_status = "paid";
            session.payment_intent = Some(payment_intent.clone());
            state.ledger.charges.push(Charge {
                payment_intent,
                session_id: session.id.clone(),
                amount: session.amount_total,
                currency: session.currency.clone(),
            });
            let success = session
                .success_url
                .as_ref()
                .map(|url| url.replace("{CHECKOUT_SESSION_ID}", &session.id));
            Ok((session.to_json(&self.public_base), success))
        })?;
        self.emit(session_id, "checkout.session.completed", object);
        Ok(success)
    }
}

pub fn routes(config: &mut web::ServiceConfig) {
    config
        .route("/v1/checkout/sessions", web::post().to(create_session))
        .route(
            "/v1/checkout/sessions/{id}",
            web::get().to(retrieve_session),
        )
        .route(
            "/v1/checkout/sessions/{id}/expire",
            web::post().to(expire_session),
        )
        .route("/v1/refunds", web::post().to(create_refund))
        .route("/pay/{id}", web::get().to(hosted_page))
        .route("/pay/{id}/{action}", web::post().to(hosted_action))
        .route(
            "/_sandbox/sessions/{id}/delivery",
            web::post().to(set_delivery),
        )
        .route(
            "/_sandbox/sessions/{id}/force-pay",
            web::post().to(force_pay),
        )
        .route("/_sandbox/ledger", web::get().to(ledger));
}

#[derive(Debug, Deserialize)]
struct CreateSessionForm {
    mode: Option<String>,
    success_url: Option<String>,
    cancel_url: Option<String>,
    client_reference_id: Option<String>,
    customer_email: Option<String>,
    expires_at: Option<i64>,
    #[serde(default)]
    metadata: HashMap<String, String>,
    #[serde(default)]
    line_items: Vec<LineItemForm>,
}

#[derive(Debug, Deserialize)]
struct LineItemForm {
    quantity: Option<i64>,
    price_data: Option<PriceDataForm>,
}

#[derive(Debug, Deserialize)]
struct PriceDataForm {
    currency: String,
    unit_amount: Option<i64>,
    product_data: Option<ProductDataForm>,
}

#[derive(Debug, Deserialize)]
struct ProductDataForm {
    name: String,
}

/// Read Stripe's form encoding (`line_items[0][price_data][currency]=eur`).
fn parse_form<T: for<'de> Deserialize<'de>>(body: &[u8]) -> Result<T, String> {
    serde_qs::Config::new()
        .max_depth(6)
        .use_form_encoding(true)
        .deserialize_bytes(body)
        .map_err(|error| format!("could not read the request: {error}"))
}

fn bad_form(message: String) -> HttpResponse {
    stripe_error(
        StatusCode::BAD_REQUEST,
        "invalid_request_error",
        &message,
        None,
    )
}

fn unauthorised() -> HttpResponse {
    stripe_error(
        StatusCode::UNAUTHORIZED,
        "invalid_request_error",
        "Invalid API Key provided.",
        None,
    )
}

async fn create_session(
    sandbox: web::Data<StripeSandbox>,
    request: HttpRequest,
    body: web::Bytes,
) -> HttpResponse {
    if !sandbox.authorised(&request) {
        return unauthorised();
    }
    let form: CreateSessionForm = match parse_form(&body) {
        Ok(form) => form,
        Err(message) => return bad_form(message),
    };
    let now = Utc::now().timestamp();
    let expires_at = form.expires_at.unwrap_or(now + 24 * 3600);
    if form.mode.as_deref() != Some("payment") {
        return stripe_error(
            StatusCode::BAD_REQUEST,
            "invalid_request_error",
            "The sandbox only supports mode=payment.",
            Some("mode"),
        );
    }
    if !(now + 30 * 60 - 5..=now + 24 * 3600 + 5).contains(&expires_at) {
        return stripe_error(
            StatusCode::BAD_REQUEST,
            "invalid_request_error",
            "The `expires_at` timestamp must be between 30 minutes and 24 hours from Checkout Session creation.",
            Some("expires_at"),
        );
    }
    let mut line_items = Vec::new();
    let mut currency = None;
    for (index, item) in form.line_items.iter().enumerate() {
        let (Some(quantity), Some(price)) = (item.quantity, item.price_data.as_ref()) else {
            return stripe_error(
                StatusCode::BAD_REQUEST,
                "invalid_request_error",
                "Each line item needs a quantity and price_data.",
                Some(&format!("line_items[{index}]")),
            );
        };
        let (Some(amount), Some(product)) = (price.unit_amount, price.product_data.as_ref()) else {
            return stripe_error(
                StatusCode::BAD_REQUEST,
                "invalid_request_error",
                "price_data needs unit_amount and product_data.",
                Some(&format!("line_items[{index}][price_data]")),
            );
        };
        if quantity <= 0 || amount < 0 {
            return stripe_error(
                StatusCode::BAD_REQUEST,
                "invalid_request_error",
                "Invalid quantity or amount.",
                Some(&format!("line_items[{index}]")),
            );
        }
        if currency.get_or_insert_with(|| price.currency.clone()) != &price.currency {
            return stripe_error(
                StatusCode::BAD_REQUEST,
                "invalid_request_error",
                "All line items must share one currency.",
                Some("line_items"),
            );
        }
        line_items.push((product.name.clone(), quantity, amount));
    }
    let Some(currency) = currency else {
        return stripe_error(
            StatusCode::BAD_REQUEST,
            "invalid_request_error",
            "Missing required param: line_items.",
            Some("line_items"),
        );
    };
    sandbox.idempotent(&request, || {
        let session = Session {
            id: random_id("cs_test"),
            created: now,
            expires_at,
            amount_total: line_items.iter().map(|(_, q, a)| q * a).sum(),
            currency,
            client_reference_id: form.client_reference_id,
            metadata: form.metadata,
            success_url: form.success_url,
            cancel_url: form.cancel_url,
            customer_email: form.customer_email,
            line_items,
            status: "open",
            payment_status: "unpaid",
            payment_intent: None,
            delivery: DeliveryMode::Normal,
            held_back: Vec::new(),
        };
        let body = session.to_json(&sandbox.public_base);
        sandbox
            .state
            .with(|state| state.sessions.insert(session.id.clone(), session));
        (StatusCode::OK, body)
    })
}

fn no_such_session(id: &str) -> HttpResponse {
    stripe_error(
        StatusCode::NOT_FOUND,
        "invalid_request_error",
        &format!("No such checkout.session: '{id}'"),
        Some("session"),
    )
}

async fn retrieve_session(
    sandbox: web::Data<StripeSandbox>,
    request: HttpRequest,
    path: web::Path<String>,
) -> HttpResponse {
    if !sandbox.authorised(&request) {
        return unauthorised();
    }
    let id = path.into_inner();
    match sandbox.state.with(|state| {
        state
            .sessions
            .get(&id)
            .map(|s| s.to_json(&sandbox.public_base))
    }) {
        Some(body) => HttpResponse::Ok().json(body),
        None => no_such_session(&id),
    }
}

async fn expire_session(
    sandbox: web::Data<StripeSandbox>,
    request: HttpRequest,
    path: web::Path<String>,
) -> HttpResponse {
    if !sandbox.authorised(&request) {
        return unauthorised();
    }
    let id = path.into_inner();
    let result = sandbox
        .state
        .with(|state| match state.sessions.get_mut(&id) {
            None => Err(None),
            Some(session) if session.status != "open" => Err(Some(session.status)),
            Some(session) => {
                session.status = "expired";
                Ok(session.to_json(&sandbox.public_base))
            }
        });
    match result {
        Ok(body) => {
            sandbox.emit(&id, "checkout.session.expired", body.clone());
            HttpResponse::Ok().json(body)
        }
        Err(None) => no_such_session(&id),
        Err(Some(status)) => stripe_error(
            StatusCode::BAD_REQUEST,
            "invalid_request_error",
            &format!("This Checkout Session is {status} and cannot be expired."),
            None,
        ),
    }
}

#[derive(Debug, Deserialize)]
struct RefundForm {
    payment_intent: Option<String>,
    amount: Option<i64>,
}

async fn create_refund(
    sandbox: web::Data<StripeSandbox>,
    request: HttpRequest,
    body: web::Bytes,
) -> HttpResponse {
    if !sandbox.authorised(&request) {
        return unauthorised();
    }
    let form: RefundForm = match parse_form(&body) {
        Ok(form) => form,
        Err(message) => return bad_form(message),
    };
    let Some(payment_intent) = form.payment_intent else {
        return stripe_error(
            StatusCode::BAD_REQUEST,
            "invalid_request_error",
            "Missing required param: payment_intent.",
            Some("payment_intent"),
        );
    };
    let charge = sandbox.state.with(|state| {
        state
            .ledger
            .charges
            .iter()
            .find(|c| c.payment_intent == payment_intent)
            .cloned()
    });
    let Some(charge) = charge else {
        return stripe_error(
            StatusCode::NOT_FOUND,
            "invalid_request_error",
            &format!("No such payment_intent: '{payment_intent}'"),
            Some("payment_intent"),
        );
    };
    let key = request
        .headers()
        .get("Idempotency-Key")
        .and_then(|value| value.to_str().ok())
        .map(str::to_owned);
    let already = sandbox.state.with(|state| {
        state
            .ledger
            .refunds
            .iter()
            .filter(|r| r.payment_intent == payment_intent)
            .map(|r| r.amount)
            .sum::<i64>()
    });
    let amount = form.amount.unwrap_or(charge.amount - already);
    let replay = key.as_ref().is_some_and(|key| {
        sandbox.state.with(|s| {
            s.idempotency
                .contains_key(&format!("{} {key}", request.path()))
        })
    });
    if !replay && (amount <= 0 || already + amount > charge.amount) {
        return stripe_error(
            StatusCode::BAD_REQUEST,
            "invalid_request_error",
            &format!("Charge for payment_intent {payment_intent} has already been refunded."),
            None,
        );
    }
    let response = sandbox.idempotent(&request, || {
        let refund = RefundRecord {
            id: random_id("re"),
            payment_intent: payment_intent.clone(),
            amount,
            idempotency_key: key.clone(),
        };
        let body = json!({
            "id": refund.id,
            "object": "refund",
            "amount": amount,
            "created": Utc::now().timestamp(),
            "currency": charge.currency,
            "payment_intent": payment_intent,
            "status": "succeeded",
            "metadata": {},
        });
        sandbox
            .state
            .with(|state| state.ledger.refunds.push(refund));
        (StatusCode::OK, body)
    });
    if !replay {
        sandbox.emit(&charge.session_id, "refund.updated", json!({
            "id": "re", "object": "refund", "payment_intent": payment_intent, "status": "succeeded",
        }));
    }
    response
}

async fn hosted_page(sandbox: web::Data<StripeSandbox>, path: web::Path<String>) -> HttpResponse {
    let id = path.into_inner();
    let Some(session) = sandbox.state.with(|s| s.sessions.get(&id).cloned()) else {
        return HttpResponse::NotFound().body("No such payment page.");
    };
    if session.status != "open" || session.expires_at <= Utc::now().timestamp() {
        // Stripe would stop here; the sandbox can also play money that
        // arrives after expiry (an async method settling late)
        let state = if session.status == "open" {
            "expired"
        } else {
            session.status
        };
        let late = if state == "expired" {
            format!(
                "<form method=\"post\" action=\"/stripe/pay/{}/pay-late\">\
                 <button id=\"pay-late\">Pay anyway (money arriving after expiry)</button></form>",
                escape(&session.id)
            )
        } else {
            String::new()
        };
        return page(
            "Payment",
            &format!("<h1>This payment page is {}</h1>{late}", escape(state)),
        );
    }
    let lines: String = session
        .line_items
        .iter()
        .map(|(name, qty, amount)| {
            format!(
                "<li>{} × {} — {}.{:02} {}</li>",
                qty,
                escape(name),
                amount / 100,
                amount % 100,
                escape(&session.currency.to_uppercase())
            )
        })
        .collect();
    let id = escape(&session.id);
    page(
        "Pay",
        &format!(
            "<h1>Pay {}.{:02} {}</h1><ul>{lines}</ul>\
             <form method=\"post\" action=\"/stripe/pay/{id}/pay\"><button id=\"pay\">Pay</button></form>\
             <form method=\"post\" action=\"/stripe/pay/{id}/decline\"><button id=\"decline\">Pay with a card that is declined</button></form>\
             <form method=\"post\" action=\"/stripe/pay/{id}/pay-twice\"><button id=\"pay-twice\">Pay twice</button></form>\
             <form method=\"post\" action=\"/stripe/pay/{id}/abandon\"><button id=\"abandon\">Back to the shop</button></form>",
            session.amount_total / 100,
            session.amount_total % 100,
            escape(&session.currency.to_uppercase())
        ),
    )
}

async fn hosted_action(
    sandbox: web::Data<StripeSandbox>,
    path: web::Path<(String, String)>,
) -> HttpResponse {
    let (id, action) = path.into_inner();
    match action.as_str() {
        "pay" | "pay-twice" => match sandbox.pay(&id, false) {
            Ok(success) => {
                if action == "pay-twice" {
                    // a second charge for the same checkout, as a double
                    // click on a slow bank page can produce
                    let _ = sandbox.pay(&id, true);
                }
                match success {
                    Some(url) => redirect(&url),
                    None => page("Paid", "<h1>Paid</h1>"),
                }
            }
            Err(message) => page("Payment", &format!("<h1>{}</h1>", escape(&message))),
        },
        "pay-late" => match sandbox.pay(&id, true) {
            Ok(Some(url)) => redirect(&url),
            Ok(None) => page("Paid", "<h1>Paid</h1>"),
            Err(message) => page("Payment", &format!("<h1>{}</h1>", escape(&message))),
        },
        "decline" => page(
            "Declined",
            &format!(
                "<h1>Your card was declined</h1><p><a href=\"/stripe/pay/{}\">Try again</a></p>",
                escape(&id)
            ),
        ),
        "abandon" => {
            let cancel = sandbox.state.with(|s| {
                s.sessions
                    .get(&id)
                    .and_then(|session| session.cancel_url.clone())
            });
            match cancel {
                Some(url) => redirect(&url),
                None => page("Left", "<h1>You left the payment page</h1>"),
            }
        }
        _ => HttpResponse::NotFound().body("No such action."),
    }
}

#[derive(Debug, Deserialize)]
struct DeliveryQuery {
    mode: DeliveryMode,
}

async fn set_delivery(
    sandbox: web::Data<StripeSandbox>,
    path: web::Path<String>,
    query: web::Query<DeliveryQuery>,
) -> HttpResponse {
    if sandbox.set_delivery(&path.into_inner(), query.mode) {
        HttpResponse::NoContent().finish()
    } else {
        HttpResponse::NotFound().finish()
    }
}

async fn force_pay(sandbox: web::Data<StripeSandbox>, path: web::Path<String>) -> HttpResponse {
    match sandbox.pay(&path.into_inner(), true) {
        Ok(_) => HttpResponse::NoContent().finish(),
        Err(message) => HttpResponse::NotFound().body(message),
    }
}

async fn ledger(sandbox: web::Data<StripeSandbox>) -> HttpResponse {
    HttpResponse::Ok().json(sandbox.ledger())
}
