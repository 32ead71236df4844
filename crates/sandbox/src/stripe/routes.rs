//! The Stripe part's HTTP face: its API handlers, the routes of the hosted
//! page (`page.rs`) and the test controls. Each handler authenticates,
//! parses with `requests.rs`, and leaves the decisions to `StripeSandbox`.

use std::time::Duration;

use actix_web::http::StatusCode;
use actix_web::{HttpRequest, HttpResponse, web};
use chrono::Utc;
use serde::Deserialize;
use serde_json::{Value, json};

use super::objects::{Session, StripeDialect, StripeError};
use super::requests::{CreateRefund, CreateSession, ListRefunds, RetryEvent, RetryTo};
use super::{StripeSandbox, WEBHOOK_ENDPOINT_ID, cli, refund_in};
use crate::controls::{AutoQuery, DeliveryQuery, OutcomeQuery, later};
use crate::delivery::{self, Batch, Pacing};
use crate::dialect::{self, Body};
use crate::idempotency::{Claim, fingerprint};
use crate::random_id;

type StripeBody = Body<StripeDialect>;

/// Stripe's API (`/v1/…`), as mounted under `/stripe` and at the root.
pub(crate) fn api(config: &mut web::ServiceConfig) {
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
        .route("/v1/payment_intents/{id}", web::get().to(retrieve_intent))
        .route("/v1/refunds", web::post().to(create_refund))
        .route("/v1/refunds", web::get().to(list_refunds))
        .route("/v1/refunds/{id}", web::get().to(retrieve_refund))
        .route("/v1/events/{id}", web::get().to(retrieve_event))
        .route("/v1/events/{id}/retry", web::post().to(retry_event))
        .route(
            "/v1/stripecli/sessions",
            web::post().to(cli::create_session),
        )
        .route("/v1/stripecli/websocket", web::get().to(cli::websocket));
}

/// Everything under `/stripe`: the API, the hosted page, the test
/// controls, and Stripe's refusals for the rest.
pub(crate) fn routes(config: &mut web::ServiceConfig) {
    dialect::rules::<StripeDialect>(config);
    api(config);
    config
        .route("/pay/{id}", web::get().to(super::page::hosted_page))
        .route(
            "/pay/{id}/{action}",
            web::post().to(super::page::hosted_action),
        )
        .route(
            "/_sandbox/sessions/{id}/delivery",
            web::post().to(set_delivery),
        )
        .route(
            "/_sandbox/sessions/{id}/force-pay",
            web::post().to(force_pay),
        )
        .route(
            "/_sandbox/sessions/{id}/settle",
            web::post().to(settle_session),
        )
        .route("/_sandbox/refunds/auto", web::post().to(refunds_auto))
        .route(
            "/_sandbox/refunds/{id}/settle",
            web::post().to(settle_refund),
        )
        .route(
            "/_sandbox/idempotency/expire",
            web::post().to(expire_idempotency),
        )
        .route("/_sandbox/webhook-version", web::post().to(webhook_version))
        .route(
            "/_sandbox/webhook-endpoint",
            web::post().to(webhook_endpoint),
        )
        .route("/_sandbox/latency", web::post().to(latency))
        .route("/_sandbox/ledger", web::get().to(ledger));
}

/// The sandbox's root: Stripe's API again (where the Stripe CLI looks),
/// and Stripe's refusals for everything else but the mail pages.
pub(crate) fn root(config: &mut web::ServiceConfig) {
    dialect::rules::<StripeDialect>(config);
    api(config);
}

impl StripeSandbox {
    /// Answer a POST once per idempotency key
    /// (docs.stripe.com/api/idempotent_requests): the first answer is
    /// replayed, status and body, with `Idempotent-Replayed: true`; the
    /// same key for another endpoint or other parameters is refused, and
    /// so is a repeat while the first is still running (409). Only answers
    /// from a request that got as far as executing are kept (`handle` is
    /// that part).
    fn idempotent(
        &self,
        request: &HttpRequest,
        params: &[u8],
        handle: impl FnOnce() -> (StatusCode, Value),
    ) -> HttpResponse {
        let Some(value) = request.headers().get("Idempotency-Key") else {
            let (status, body) = handle();
            return HttpResponse::build(status).json(body);
        };
        let key = match value.to_str() {
            Ok(key) if !key.is_empty() && key.len() <= 255 => key.to_owned(),
            _ => {
                return StripeError::invalid(
                    "Idempotency keys must be between 1 and 255 characters long.",
                    None,
                )
                .response();
            }
        };
        let endpoint = format!("{} {}", request.method(), request.path());
        let fingerprint = fingerprint(&[endpoint.as_bytes(), params]);
        match self
            .state
            .with(|state| state.idempotency.claim(&key, fingerprint))
        {
            Claim::Mismatch => StripeError::new(
                StatusCode::BAD_REQUEST,
                "idempotency_error",
                None,
                format!(
                    "Keys for idempotent requests can only be used with the same parameters \
                     they were first used with. Try using a key other than '{key}' if you \
                     meant to execute a different request."
                ),
                None,
            )
            .response(),
            Claim::InFlight => StripeError::new(
                StatusCode::CONFLICT,
                "idempotency_error",
                None,
                "There is currently another in-progress request using this Idempotent Key \
                 (that probably means you submitted twice, and the other request is still \
                 going through): please retry in a moment.",
                None,
            )
            .response(),
            Claim::Replay(status, body) => {
                HttpResponse::build(StatusCode::from_u16(status).unwrap_or(StatusCode::OK))
                    .insert_header(("Idempotent-Replayed", "true"))
                    .json(body)
            }
            Claim::First => {
                let (status, body) = handle();
                self.state.with(|state| {
                    state
                        .idempotency
                        .answer(&key, status.as_u16(), body.clone())
                });
                HttpResponse::build(status).json(body)
            }
        }
    }
}

fn answer(result: Result<Value, StripeError>) -> (StatusCode, Value) {
    match result {
        Ok(body) => (StatusCode::OK, body),
        Err(error) => (error.status(), error.body()),
    }
}

async fn create_session(
    sandbox: web::Data<StripeSandbox>,
    request: HttpRequest,
    body: StripeBody,
) -> HttpResponse {
    // the request's trip to Stripe: Stripe's clock is read when it arrives
    let latency = sandbox.state.with(|s| s.latency);
    if !latency.is_zero() {
        tokio::time::sleep(latency).await;
    }
    if let Err(refusal) = sandbox.authorised(&request) {
        return refusal.response();
    }
    sandbox.expire_due();
    let version = request
        .headers()
        .get("Stripe-Version")
        .and_then(|v| v.to_str().ok());
    let now = Utc::now().timestamp();
    let asked = match CreateSession::parse(body.content_type.as_deref(), &body.bytes, version, now)
    {
        Ok(asked) => asked,
        Err(refusal) => return refusal.response(),
    };
    sandbox.idempotent(&request, &body.bytes, || {
        let session = Session {
            id: random_id("cs_test"),
            created: now,
            expires_at: asked.expires_at,
            amount_total: asked.amount_total(),
            currency: asked.currency,
            client_reference_id: asked.client_reference_id,
            metadata: asked.metadata,
            intent_metadata: asked.intent_metadata,
            success_url: Some(asked.success_url),
            cancel_url: asked.cancel_url,
            customer_email: asked.customer_email,
            line_items: asked.line_items,
            allowed_payment_method_types: asked
                .methods_named
                .then(|| asked.payment_method_types.clone()),
            payment_method_types: asked.payment_method_types,
            adaptive_pricing: asked.adaptive_pricing,
            status: "open",
            payment_status: "unpaid",
            payment_intent: None,
            pacing: Pacing::default(),
        };
        let body = session.to_json(&sandbox.public_base);
        sandbox.state.with(|state| {
            state
                .expiries
                .insert((session.expires_at, session.id.clone()));
            state.sessions.insert(session.id.clone(), session)
        });
        (StatusCode::OK, body)
    })
}

/// `GET /v1/payment_intents/{id}`: the PaymentIntent a payment on a page
/// made (docs.stripe.com/api/payment_intents/retrieve).
async fn retrieve_intent(
    sandbox: web::Data<StripeSandbox>,
    request: HttpRequest,
    path: web::Path<String>,
) -> HttpResponse {
    if let Err(refusal) = sandbox.authorised(&request) {
        return refusal.response();
    }
    let id = path.into_inner();
    match sandbox.intent(&id) {
        Some(intent) => HttpResponse::Ok().json(intent),
        None => StripeError::missing("payment_intent", &id, "intent").response(),
    }
}

async fn retrieve_session(
    sandbox: web::Data<StripeSandbox>,
    request: HttpRequest,
    path: web::Path<String>,
) -> HttpResponse {
    if let Err(refusal) = sandbox.authorised(&request) {
        return refusal.response();
    }
    sandbox.expire_due();
    let id = path.into_inner();
    match sandbox.session(&id) {
        Some(body) => HttpResponse::Ok().json(body),
        None => StripeError::missing("checkout.session", &id, "session").response(),
    }
}

async fn expire_session(
    sandbox: web::Data<StripeSandbox>,
    request: HttpRequest,
    path: web::Path<String>,
    body: StripeBody,
) -> HttpResponse {
    if let Err(refusal) = sandbox.authorised(&request) {
        return refusal.response();
    }
    sandbox.expire_due();
    let id = path.into_inner();
    // the expire call takes no parameters but `expand`
    #[derive(Deserialize)]
    #[serde(deny_unknown_fields)]
    struct ExpireForm {
        #[serde(default, rename = "expand")]
        _expand: Vec<String>,
    }
    if let Err(refusal) =
        super::requests::parse_form::<ExpireForm>(body.content_type.as_deref(), &body.bytes)
    {
        return refusal.response();
    }
    let known = sandbox.state.with(|s| s.sessions.contains_key(&id));
    if !known {
        return StripeError::missing("checkout.session", &id, "session").response();
    }
    let mut expired = None;
    let response = sandbox.idempotent(&request, &body.bytes, || {
        answer(
            sandbox
                .state
                .with(|state| match state.sessions.get_mut(&id) {
                    Some(session) if session.status == "open" => {
                        session.status = "expired";
                        let body = session.to_json(&sandbox.public_base);
                        expired = Some(body.clone());
                        Ok(body)
                    }
                    Some(session) => Err(StripeError::invalid(
                        format!(
                            "This Checkout Session is {} and cannot be expired.",
                            session.status
                        ),
                        None,
                    )),
                    None => Err(StripeError::missing("checkout.session", &id, "session")),
                }),
        )
    });
    if let Some(body) = expired {
        sandbox.emit(&id, "checkout.session.expired", body);
    }
    response
}

async fn create_refund(
    sandbox: web::Data<StripeSandbox>,
    request: HttpRequest,
    body: StripeBody,
) -> HttpResponse {
    if let Err(refusal) = sandbox.authorised(&request) {
        return refusal.response();
    }
    sandbox.expire_due();
    let asked = match CreateRefund::parse(body.content_type.as_deref(), &body.bytes) {
        Ok(asked) => asked,
        Err(refusal) => return refusal.response(),
    };
    let key = request
        .headers()
        .get("Idempotency-Key")
        .and_then(|value| value.to_str().ok())
        .map(str::to_owned);
    let mut created = None;
    let response = sandbox.idempotent(&request, &body.bytes, || {
        answer(sandbox.state.with(|state| {
            let refund = refund_in(state, &asked, key.as_deref())?;
            created = Some(refund.clone());
            Ok(refund.to_json())
        }))
    });
    if let Some(refund) = created {
        sandbox.emit_refund(&refund, "created");
        // the bank takes a moment
        let after = sandbox.state.with(|s| s.refunds_settle_after);
        let sandbox = sandbox.get_ref().clone();
        later(after, move || {
            let _ = sandbox.settle_refund(&refund.id, true);
        });
    }
    response
}

async fn retrieve_refund(
    sandbox: web::Data<StripeSandbox>,
    request: HttpRequest,
    path: web::Path<String>,
) -> HttpResponse {
    if let Err(refusal) = sandbox.authorised(&request) {
        return refusal.response();
    }
    sandbox.expire_due();
    let id = path.into_inner();
    match sandbox.state.with(|state| {
        state
            .refunds
            .iter()
            .find(|r| r.id == id)
            .map(|refund| refund.to_json())
    }) {
        Some(body) => HttpResponse::Ok().json(body),
        None => StripeError::missing("refund", &id, "id").response(),
    }
}

async fn list_refunds(sandbox: web::Data<StripeSandbox>, request: HttpRequest) -> HttpResponse {
    if let Err(refusal) = sandbox.authorised(&request) {
        return refusal.response();
    }
    sandbox.expire_due();
    let (payment_intent, limit) = match ListRefunds::parse(request.query_string().as_bytes()) {
        Ok(list) => list,
        Err(refusal) => return refusal.response(),
    };
    let data: Vec<Value> = sandbox.state.with(|state| {
        state
            .refunds
            .iter()
            .rev()
            .filter(|r| {
                payment_intent
                    .as_ref()
                    .is_none_or(|pi| &r.payment_intent == pi)
            })
            .take(limit)
            .map(|refund| refund.to_json())
            .collect()
    });
    HttpResponse::Ok()
        .json(json!({ "object": "list", "data": data, "has_more": false, "url": "/v1/refunds" }))
}

async fn retrieve_event(
    sandbox: web::Data<StripeSandbox>,
    request: HttpRequest,
    path: web::Path<String>,
) -> HttpResponse {
    if let Err(refusal) = sandbox.authorised(&request) {
        return refusal.response();
    }
    sandbox.expire_due();
    let id = path.into_inner();
    match sandbox.state.with(|state| state.events.get(&id).cloned()) {
        Some(event) => HttpResponse::Ok().json(event),
        None => StripeError::missing("event", &id, "id").response(),
    }
}

/// How long Stripe keeps events for a resend: "You can only resend events
/// that have been created within the last 30 days"
/// (docs.stripe.com/cli/events/resend).
const RESEND_WITHIN: i64 = 30 * 24 * 3600;

/// `POST /v1/events/{id}/retry`: `stripe events resend <id>` sends one
/// event again, to every `stripe listen` session (or, with
/// `--webhook-endpoint`, to that endpoint). The answer is the event.
async fn retry_event(
    sandbox: web::Data<StripeSandbox>,
    request: HttpRequest,
    path: web::Path<String>,
    body: StripeBody,
) -> HttpResponse {
    if let Err(refusal) = sandbox.authorised(&request) {
        return refusal.response();
    }
    let id = path.into_inner();
    let retry = match RetryEvent::parse(body.content_type.as_deref(), &body.bytes) {
        Ok(retry) => retry,
        Err(refusal) => return refusal.response(),
    };
    let Some(event) = sandbox.state.with(|state| state.events.get(&id).cloned()) else {
        return StripeError::missing("event", &id, "id").response();
    };
    if let Some(account) = &retry.account {
        // the sandbox is one account, without connected ones
        return StripeError::missing("account", account, "account").response();
    }
    let created = event.get("created").and_then(Value::as_i64).unwrap_or(0);
    if Utc::now().timestamp().saturating_sub(created) > RESEND_WITHIN {
        return StripeError::invalid(
            "You can only resend events that have been created within the last 30 days.",
            None,
        )
        .response();
    }
    let has_endpoint = sandbox.state.with(|state| state.webhook_url.is_some());
    if let RetryTo::Endpoint(endpoint) = &retry.to
        && (endpoint != WEBHOOK_ENDPOINT_ID || !has_endpoint)
    {
        return StripeError::missing("webhook endpoint", endpoint, "webhook_endpoint").response();
    }
    let mut resend = false;
    let response = sandbox.idempotent(&request, &body.bytes, || {
        resend = true;
        (StatusCode::OK, event.clone())
    });
    if resend {
        match retry.to {
            RetryTo::StripeCli => sandbox.cli.broadcast(&event),
            RetryTo::Endpoint(_) => delivery::send(sandbox.get_ref(), Batch::one(event)),
        }
    }
    response
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

async fn settle_session(
    sandbox: web::Data<StripeSandbox>,
    path: web::Path<String>,
    query: web::Query<OutcomeQuery>,
) -> HttpResponse {
    let id = path.into_inner();
    query.settle("succeeded", |ok| sandbox.settle_delayed(&id, ok))
}

async fn settle_refund(
    sandbox: web::Data<StripeSandbox>,
    path: web::Path<String>,
    query: web::Query<OutcomeQuery>,
) -> HttpResponse {
    let id = path.into_inner();
    query.settle("succeeded", |ok| sandbox.settle_refund(&id, ok))
}

async fn refunds_auto(
    sandbox: web::Data<StripeSandbox>,
    query: web::Query<AutoQuery>,
) -> HttpResponse {
    sandbox.set_refunds_settle_after(query.after());
    HttpResponse::NoContent().finish()
}

async fn expire_idempotency(sandbox: web::Data<StripeSandbox>) -> HttpResponse {
    sandbox.expire_idempotency_keys();
    HttpResponse::NoContent().finish()
}

#[derive(Debug, Deserialize)]
struct VersionQuery {
    version: String,
}

async fn webhook_version(
    sandbox: web::Data<StripeSandbox>,
    query: web::Query<VersionQuery>,
) -> HttpResponse {
    sandbox.set_webhook_version(&query.version);
    HttpResponse::NoContent().finish()
}

#[derive(Debug, Deserialize)]
struct EndpointQuery {
    url: Option<String>,
}

/// `?url=…`: the sandbox delivers there from now on; without it, its own
/// deliveries stop (`stripe listen` still gets every event).
async fn webhook_endpoint(
    sandbox: web::Data<StripeSandbox>,
    query: web::Query<EndpointQuery>,
) -> HttpResponse {
    match query.into_inner().url.filter(|url| !url.is_empty()) {
        Some(url) => sandbox.set_webhook_url(url),
        None => sandbox.remove_webhook_url(),
    }
    HttpResponse::NoContent().finish()
}

#[derive(Debug, Deserialize)]
struct LatencyQuery {
    ms: u64,
}

async fn latency(
    sandbox: web::Data<StripeSandbox>,
    query: web::Query<LatencyQuery>,
) -> HttpResponse {
    sandbox.set_latency(Duration::from_millis(query.ms.min(60_000)));
    HttpResponse::NoContent().finish()
}

async fn ledger(sandbox: web::Data<StripeSandbox>) -> HttpResponse {
    HttpResponse::Ok().json(sandbox.ledger())
}
