//! The Stripe part of the sandbox, under `/stripe`.
//!
//! API (form-encoded requests, Stripe's JSON objects and error shape,
//! `Authorization: Bearer <key>` or HTTP basic with the key as user name):
//! - `POST /v1/checkout/sessions`, `GET /v1/checkout/sessions/{id}`,
//!   `POST /v1/checkout/sessions/{id}/expire`;
//! - `POST /v1/refunds`, `GET /v1/refunds/{id}`,
//!   `GET /v1/refunds?payment_intent=…`;
//! - `GET /v1/events/{id}`;
//! - anything else: Stripe's 404.
//!
//! Rules it enforces, as Stripe documents them: `expires_at` 30 minutes to
//! 24 hours after the request arrives; `Idempotency-Key` (at most 255
//! characters) replays the first answer, status and body, with
//! `Idempotent-Replayed: true`, and the same key with other parameters or
//! another endpoint is an `idempotency_error`; keys are forgotten after 24
//! hours (a test control plays that); refunds start `pending` and finish
//! later (`refund.updated`, or `refund.failed`), and a payment refunded in
//! full refuses another (`charge_already_refunded`); webhook events are
//! `refund.*` for endpoints on API versions from 2024-10-28 and
//! `charge.refund.updated` before; delayed methods (SEPA debit for EUR)
//! are offered only when the session does not restrict its methods, and
//! complete `unpaid`, settling later.
//!
//! The hosted page (`GET /pay/{id}`) offers pay, a declined card, pay
//! twice, a bank debit that settles later (when allowed) and back to the
//! shop. Test controls, under `/_sandbox`: `sessions/{id}/delivery?mode=…`
//! (`normal`, `twice`, `never`, `late`, `reorder`), `sessions/{id}/force-pay`
//! (money after expiry), `sessions/{id}/settle?outcome=succeeded|failed`
//! (a delayed payment), `refunds/{id}/settle?outcome=succeeded|failed`,
//! `refunds/auto?after_ms=N` (or `never`), `idempotency/expire` (24 hours
//! pass), `webhook-version?version=…`, `latency?ms=N` (the request's trip),
//! `ledger`.

use std::collections::HashMap;
use std::time::Duration;

use actix_web::http::StatusCode;
use actix_web::http::header;
use actix_web::{HttpRequest, HttpResponse, web};
use chrono::Utc;
use serde::Deserialize;
use serde_json::{Value, json};
use sha2::{Digest, Sha256};

use super::{
    AutoQuery, Charge, Delivery, DeliveryMode, DeliveryQuery, Ledger, OutcomeQuery, RefundRecord,
    SandboxSettings, Shared, amount_text, escape, page, plan, post_until_accepted, random_id,
    redirect,
};
use crate::signature::{same_text, stripe_signature_header};

/// The API version whose event types the sandbox's webhook endpoint gets
/// unless a test says otherwise: async-stripe's, as Holdfast pins it.
fn default_webhook_version() -> String {
    stripe_shared::version::VERSION.as_str().to_owned()
}

/// The first API version that sends `refund.*` events for card refunds.
const REFUND_EVENTS_SINCE: &str = "2024-10-28";

#[derive(Debug, Clone)]
struct Session {
    id: String,
    created: i64,
    expires_at: i64,
    amount_total: i64,
    currency: String,
    client_reference_id: Option<String>,
    metadata: HashMap<String, String>,
    /// `payment_intent_data[metadata]`, carried to the payment
    intent_metadata: HashMap<String, String>,
    success_url: Option<String>,
    cancel_url: Option<String>,
    customer_email: Option<String>,
    line_items: Vec<(String, i64, i64)>,
    payment_method_types: Vec<String>,
    /// shown in the shopper's currency (the account's default: on)
    adaptive_pricing: bool,
    /// open, complete or expired
    status: &'static str,
    /// paid, unpaid
    payment_status: &'static str,
    payment_intent: Option<String>,
    delivery: DeliveryMode,
    held_back: Vec<Value>,
}

impl Session {
    /// The session as Stripe shows it: every field of Stripe's published
    /// `checkout.session` object.
    fn to_json(&self, public_base: &str) -> Value {
        let mut session = json!({
            "id": self.id,
            "object": "checkout.session",
            "adaptive_pricing": { "enabled": self.adaptive_pricing },
            "after_expiration": null,
            "allow_promotion_codes": null,
            "amount_subtotal": self.amount_total,
            "amount_total": self.amount_total,
            "automatic_tax": { "enabled": false, "liability": null, "provider": null, "status": null },
            "billing_address_collection": null,
            "cancel_url": self.cancel_url,
            "client_reference_id": self.client_reference_id,
            "client_secret": null,
            "collected_information": null,
            "consent": null,
            "consent_collection": null,
            "created": self.created,
            "currency": self.currency,
            "currency_conversion": null,
            "custom_fields": [],
            "custom_text": { "after_submit": null, "shipping_address": null, "submit": null, "terms_of_service_acceptance": null },
            "customer": null,
            "customer_account": null,
            "customer_creation": "if_required",
            "customer_details": self.customer_email.as_ref().map(|email| json!({
                "address": null, "business_name": null, "email": email, "individual_name": null,
                "name": null, "phone": null, "tax_exempt": "none", "tax_ids": [],
            })),
            "customer_email": self.customer_email,
            "discounts": [],
            "expires_at": self.expires_at,
        });
        let rest = json!({
            "integration_identifier": null,
            "invoice": null,
            "invoice_creation": { "enabled": false, "invoice_data": {
                "account_tax_ids": null, "custom_fields": null, "description": null, "footer": null,
                "issuer": null, "metadata": {}, "rendering_options": null,
            } },
            "livemode": false,
            "locale": null,
            "managed_payments": null,
            "metadata": self.metadata,
            "mode": "payment",
            "origin_context": null,
            "payment_intent": self.payment_intent,
            "payment_link": null,
            "payment_method_collection": "if_required",
            "payment_method_configuration_details": null,
            "payment_method_options": {},
            "payment_method_types": self.payment_method_types,
            "payment_status": self.payment_status,
            "permissions": null,
            "phone_number_collection": { "enabled": false },
            "recovered_from": null,
            "saved_payment_method_options": null,
            "setup_intent": null,
            "shipping_address_collection": null,
            "shipping_cost": null,
            "shipping_options": [],
            "status": self.status,
            "submit_type": null,
            "subscription": null,
            "success_url": self.success_url,
            "total_details": { "amount_discount": 0, "amount_shipping": 0, "amount_tax": 0 },
            "ui_mode": "hosted_page",
            "url": (self.status == "open").then(|| format!("{public_base}/stripe/pay/{}", self.id)),
            "wallet_options": null,
        });
        if let (Some(object), Value::Object(rest)) = (session.as_object_mut(), rest) {
            object.extend(rest);
        }
        session
    }

    fn allows(&self, method: &str) -> bool {
        self.payment_method_types.iter().any(|m| m == method)
    }
}

#[derive(Debug, Clone)]
struct Refund {
    id: String,
    payment_intent: String,
    session_id: String,
    amount: i64,
    currency: String,
    created: i64,
    metadata: HashMap<String, String>,
    /// pending, succeeded or failed
    status: &'static str,
}

impl Refund {
    /// The refund as Stripe shows it: every field of Stripe's published
    /// `refund` object.
    fn to_json(&self) -> Value {
        json!({
            "id": self.id,
            "object": "refund",
            "amount": self.amount,
            "balance_transaction": null,
            "charge": format!("ch_{}", self.payment_intent.trim_start_matches("pi_")),
            "created": self.created,
            "currency": self.currency,
            "customer": null,
            "customer_account": null,
            "destination_details": { "card": { "type": "refund" }, "type": "card" },
            "failure_reason": (self.status == "failed").then_some("unknown"),
            "metadata": self.metadata,
            "payment_intent": self.payment_intent,
            "payment_method": null,
            "reason": null,
            "receipt_number": null,
            "source_transfer_reversal": null,
            "status": self.status,
            "transfer_reversal": null,
        })
    }
}

/// The first answer given under an idempotency key.
#[derive(Debug, Clone)]
struct Remembered {
    /// method and path
    endpoint: String,
    /// SHA-256 of the request's parameters
    params: [u8; 32],
    /// `None` while the first request is still executing
    answer: Option<(u16, Value)>,
}

#[derive(Debug)]
struct State {
    webhook_url: Option<String>,
    webhook_version: String,
    latency: Duration,
    refunds_settle_after: Option<Duration>,
    sessions: HashMap<String, Session>,
    /// Every session by its `expires_at` (which never changes), so expiring
    /// the due ones reads only those: a sandbox with a hundred thousand
    /// sessions must not scan them all at every call.
    expiries: std::collections::BTreeSet<(i64, String)>,
    refunds: Vec<Refund>,
    idempotency: HashMap<String, Remembered>,
    events: HashMap<String, Value>,
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
    code: Option<&str>,
    message: &str,
    param: Option<&str>,
) -> (StatusCode, Value) {
    (
        status,
        json!({
            "error": {
                "type": kind, "code": code, "message": message, "param": param,
                "doc_url": code.map(|c| format!("https://stripe.com/docs/error-codes/{}", c.replace('_', "-"))),
            }
        }),
    )
}

fn answer((status, body): (StatusCode, Value)) -> HttpResponse {
    HttpResponse::build(status).json(body)
}

fn invalid(message: &str, param: Option<&str>) -> HttpResponse {
    answer(stripe_error(
        StatusCode::BAD_REQUEST,
        "invalid_request_error",
        None,
        message,
        param,
    ))
}

fn missing(kind: &str, id: &str, param: &str) -> (StatusCode, Value) {
    stripe_error(
        StatusCode::NOT_FOUND,
        "invalid_request_error",
        Some("resource_missing"),
        &format!("No such {kind}: '{id}'"),
        Some(param),
    )
}

impl StripeSandbox {
    pub fn new(settings: SandboxSettings, public_base: String) -> Self {
        let state = Shared::new(State {
            webhook_url: settings.stripe_webhook_url.clone(),
            webhook_version: default_webhook_version(),
            latency: Duration::ZERO,
            refunds_settle_after: settings.refunds_settle_after,
            sessions: HashMap::new(),
            expiries: Default::default(),
            refunds: Vec::new(),
            idempotency: HashMap::new(),
            events: HashMap::new(),
            ledger: Ledger::default(),
        });
        Self {
            settings,
            public_base,
            state,
            http: crate::signature::http_client(Duration::from_secs(10)),
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

    /// The API version the webhook endpoint is on (its events' shapes).
    pub fn set_webhook_version(&self, version: &str) {
        self.state
            .with(|state| state.webhook_version = version.to_owned());
    }

    /// How long each API request takes to reach "Stripe".
    pub fn set_latency(&self, latency: Duration) {
        self.state.with(|state| state.latency = latency);
    }

    /// How long new refunds stay pending; `None`: until settled by hand.
    pub fn set_refunds_settle_after(&self, after: Option<Duration>) {
        self.state.with(|state| state.refunds_settle_after = after);
    }

    /// 24 hours pass: every idempotency key is forgotten.
    pub fn expire_idempotency_keys(&self) {
        self.state.with(|state| state.idempotency.clear());
    }

    /// Refunds still pending: (refund id, the session of their payment).
    pub fn pending_refunds(&self) -> Vec<(String, String)> {
        self.state.with(|state| {
            state
                .refunds
                .iter()
                .filter(|r| r.status == "pending")
                .map(|r| (r.id.clone(), r.session_id.clone()))
                .collect()
        })
    }

    /// Every event made so far (delivered or not), oldest first.
    pub fn events(&self) -> Vec<Value> {
        self.state.with(|state| {
            let mut events: Vec<Value> = state.events.values().cloned().collect();
            events.sort_by_key(|e| (e["created"].as_i64(), e["id"].as_str().map(str::to_owned)));
            events
        })
    }

    /// A session as Stripe shows it.
    pub fn session(&self, id: &str) -> Option<Value> {
        self.state.with(|state| {
            state
                .sessions
                .get(id)
                .map(|session| session.to_json(&self.public_base))
        })
    }

    fn authorised(&self, request: &HttpRequest) -> bool {
        use base64::Engine;
        let key = self.settings.stripe_secret_key.expose();
        let Some(value) = request
            .headers()
            .get(header::AUTHORIZATION)
            .and_then(|value| value.to_str().ok())
        else {
            return false;
        };
        if let Some(bearer) = value.strip_prefix("Bearer ") {
            return same_text(bearer, key);
        }
        // HTTP basic with the key as user name and no password
        value
            .strip_prefix("Basic ")
            .and_then(|encoded| {
                base64::engine::general_purpose::STANDARD
                    .decode(encoded)
                    .ok()
            })
            .and_then(|decoded| String::from_utf8(decoded).ok())
            .is_some_and(|given| same_text(given.trim_end_matches(':'), key))
    }

    /// Answer a POST once per idempotency key: the first answer is replayed,
    /// status and body; the same key for another endpoint or other
    /// parameters is refused. Only answers from a request that got as far
    /// as executing are kept (`handle` is that part).
    fn idempotent(
        &self,
        request: &HttpRequest,
        params: &[u8],
        handle: impl FnOnce() -> (StatusCode, Value),
    ) -> HttpResponse {
        let key = request
            .headers()
            .get("Idempotency-Key")
            .and_then(|value| value.to_str().ok())
            .map(str::to_owned);
        let Some(key) = key else {
            return answer(handle());
        };
        if key.is_empty() || key.len() > 255 {
            return invalid(
                "Idempotency keys must be between 1 and 255 characters long.",
                None,
            );
        }
        let endpoint = format!("{} {}", request.method(), request.path());
        let params: [u8; 32] = Sha256::digest(params).into();
        // look and claim the key in one go: a concurrent twin sees the claim
        let first = self.state.with(|s| match s.idempotency.get(&key) {
            Some(first) => Some(first.clone()),
            None => {
                s.idempotency.insert(
                    key.clone(),
                    Remembered {
                        endpoint: endpoint.clone(),
                        params,
                        answer: None,
                    },
                );
                None
            }
        });
        if let Some(first) = first {
            if first.endpoint != endpoint || first.params != params {
                return answer(stripe_error(
                    StatusCode::BAD_REQUEST,
                    "idempotency_error",
                    None,
                    &format!(
                        "Keys for idempotent requests can only be used with the same parameters \
                         they were first used with. Try using a key other than '{key}' if you \
                         meant to execute a different request."
                    ),
                    None,
                ));
            }
            let Some((status, body)) = first.answer else {
                return answer(stripe_error(
                    StatusCode::CONFLICT,
                    "idempotency_error",
                    None,
                    "There is currently another in-progress request using this Idempotent Key \
                     (that probably means you submitted twice, and the other request is still \
                     going through): please retry in a moment.",
                    None,
                ));
            };
            return HttpResponse::build(StatusCode::from_u16(status).unwrap_or(StatusCode::OK))
                .insert_header(("Idempotent-Replayed", "true"))
                .json(body);
        }
        let (status, body) = handle();
        self.state.with(|s| {
            if let Some(remembered) = s.idempotency.get_mut(&key) {
                remembered.answer = Some((status.as_u16(), body.clone()));
            }
        });
        HttpResponse::build(status).json(body)
    }

    /// Sessions past their `expires_at` expire, as Stripe expires them by
    /// itself, each with its `checkout.session.expired`.
    pub fn expire_due(&self) {
        let now = Utc::now().timestamp();
        let expired: Vec<(String, Value)> = self.state.with(|state| {
            let later = state.expiries.split_off(&(now + 1, String::new()));
            let due = std::mem::replace(&mut state.expiries, later);
            due.into_iter()
                .filter_map(|(_, id)| {
                    let session = state.sessions.get_mut(&id)?;
                    (session.status == "open").then(|| {
                        session.status = "expired";
                        (session.id.clone(), session.to_json(&self.public_base))
                    })
                })
                .collect()
        });
        for (id, object) in expired {
            self.emit(&id, "checkout.session.expired", object);
        }
    }

    /// Sign and deliver one event about a session, following its delivery
    /// mode. The event is kept for `GET /v1/events/{id}`.
    fn emit(&self, session_id: &str, event_type: &str, object: Value) {
        let event = json!({
            "id": random_id("evt"),
            "object": "event",
            "api_version": self.state.with(|s| s.webhook_version.clone()),
            "created": Utc::now().timestamp(),
            "data": { "object": object },
            "livemode": false,
            "pending_webhooks": 1,
            "request": { "id": null, "idempotency_key": null },
            "type": event_type,
        });
        let (to_send, copies, delay) = self.state.with(|state| {
            if let Some(id) = event["id"].as_str() {
                state.events.insert(id.to_owned(), event.clone());
            }
            match state.sessions.get_mut(session_id) {
                Some(session) => plan(session.delivery, &mut session.held_back, event),
                None => plan(DeliveryMode::Normal, &mut Vec::new(), event),
            }
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

    /// A refund's news, as the endpoint's API version words it.
    fn emit_refund(&self, refund: &Refund, change: &str) {
        let modern = self
            .state
            .with(|s| s.webhook_version.as_str() >= REFUND_EVENTS_SINCE);
        let event_type = match (modern, change) {
            (true, "created") => "refund.created",
            (true, "failed") => "refund.failed",
            (true, _) => "refund.updated",
            // older endpoints hear about card refunds only this way
            (false, "created") => return,
            (false, _) => "charge.refund.updated",
        };
        self.emit(&refund.session_id, event_type, refund.to_json());
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

    /// Complete a session with a new card payment, as paying on the page
    /// does. Returns the session's success URL.
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
                metadata: json!(session.intent_metadata),
            });
            Ok((session.to_json(&self.public_base), success_url(session)))
        })?;
        self.emit(session_id, "checkout.session.completed", object);
        Ok(success)
    }

    /// Complete a session with a bank debit (SEPA), which settles days
    /// later: `complete`, `unpaid`, a payment intent, no money yet.
    fn pay_delayed(&self, session_id: &str) -> Result<Option<String>, String> {
        let (object, success) = self.state.with(|state| {
            let session = state
                .sessions
                .get_mut(session_id)
                .ok_or_else(|| "no such session".to_owned())?;
            if session.status != "open" || session.expires_at <= Utc::now().timestamp() {
                return Err("this payment page has expired".to_owned());
            }
            if !session.allows("sepa_debit") {
                return Err("this page does not take bank debits".to_owned());
            }
            session.status = "complete";
            session.payment_status = "unpaid";
            session.payment_intent = Some(random_id("pi"));
            Ok((session.to_json(&self.public_base), success_url(session)))
        })?;
        self.emit(session_id, "checkout.session.completed", object);
        Ok(success)
    }

    /// A delayed payment's bank answers: the money arrives, or it fails.
    pub fn settle_delayed(&self, session_id: &str, succeeded: bool) -> Result<(), String> {
        let object = self.state.with(|state| {
            let session = state
                .sessions
                .get_mut(session_id)
                .ok_or_else(|| "no such session".to_owned())?;
            let Some(intent) = session.payment_intent.clone() else {
                return Err("nothing is settling on this session".to_owned());
            };
            if session.status != "complete" || session.payment_status != "unpaid" {
                return Err("nothing is settling on this session".to_owned());
            }
            if succeeded {
                session.payment_status = "paid";
                state.ledger.charges.push(Charge {
                    payment_intent: intent,
                    session_id: session.id.clone(),
                    amount: session.amount_total,
                    currency: session.currency.clone(),
                    metadata: json!(session.intent_metadata),
                });
            }
            Ok(session.to_json(&self.public_base))
        })?;
        let event = if succeeded {
            "checkout.session.async_payment_succeeded"
        } else {
            "checkout.session.async_payment_failed"
        };
        self.emit(session_id, event, object);
        Ok(())
    }

    /// A pending refund ends: the money went back, or the bank refused it.
    pub fn settle_refund(&self, refund_id: &str, succeeded: bool) -> Result<(), String> {
        let refund = self.state.with(|state| {
            let refund = state
                .refunds
                .iter_mut()
                .find(|r| r.id == refund_id)
                .ok_or_else(|| "no such refund".to_owned())?;
            if refund.status != "pending" {
                return Err(format!("the refund is {} already", refund.status));
            }
            refund.status = if succeeded { "succeeded" } else { "failed" };
            let refund = refund.clone();
            if let Some(record) = state.ledger.refunds.iter_mut().find(|r| r.id == refund_id) {
                record.status = refund.status;
            }
            Ok(refund)
        })?;
        self.emit_refund(&refund, if succeeded { "updated" } else { "failed" });
        Ok(())
    }
}

fn success_url(session: &Session) -> Option<String> {
    session
        .success_url
        .as_ref()
        .map(|url| url.replace("{CHECKOUT_SESSION_ID}", &session.id))
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
        .route("/v1/refunds", web::get().to(list_refunds))
        .route("/v1/refunds/{id}", web::get().to(retrieve_refund))
        .route("/v1/events/{id}", web::get().to(retrieve_event))
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
        .route("/_sandbox/latency", web::post().to(latency))
        .route("/_sandbox/ledger", web::get().to(ledger))
        .default_service(web::to(unknown_route));
}

/// Stripe's answer to a URL it does not serve.
async fn unknown_route(request: HttpRequest) -> HttpResponse {
    answer(stripe_error(
        StatusCode::NOT_FOUND,
        "invalid_request_error",
        None,
        &format!(
            "Unrecognized request URL ({}: {}).",
            request.method(),
            request.path()
        ),
        None,
    ))
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
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
    payment_intent_data: Option<IntentDataForm>,
    #[serde(default)]
    line_items: Vec<LineItemForm>,
    /// what API versions from 2026-09-30 take
    #[serde(default)]
    allowed_payment_method_types: Vec<String>,
    /// what versions before 2026-09-30 take
    #[serde(default)]
    payment_method_types: Vec<String>,
    #[serde(default)]
    adaptive_pricing: Option<AdaptivePricingForm>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct AdaptivePricingForm {
    enabled: Option<bool>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct IntentDataForm {
    #[serde(default)]
    metadata: HashMap<String, String>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct LineItemForm {
    quantity: Option<i64>,
    price_data: Option<PriceDataForm>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct PriceDataForm {
    currency: String,
    unit_amount: Option<i64>,
    product_data: Option<ProductDataForm>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct ProductDataForm {
    name: String,
}

/// Read Stripe's form encoding (`line_items[0][price_data][currency]=eur`).
/// A parameter Stripe does not take is refused, in Stripe's words.
fn parse_form<T: for<'de> Deserialize<'de>>(body: &[u8]) -> Result<T, String> {
    serde_qs::Config::new()
        .max_depth(6)
        .use_form_encoding(true)
        .deserialize_bytes(body)
        .map_err(|error| {
            let text = error.to_string();
            match text
                .split_once("unknown field `")
                .and_then(|(_, rest)| rest.split_once('`'))
            {
                Some((field, _)) => format!("Received unknown parameter: {field}"),
                None => format!("could not read the request: {text}"),
            }
        })
}

/// The first API version without `payment_method_types` on Checkout
/// Sessions (`allowed_payment_method_types` instead).
const ALLOWED_METHODS_SINCE: &str = "2026-09-30";

fn unauthorised() -> HttpResponse {
    answer(stripe_error(
        StatusCode::UNAUTHORIZED,
        "invalid_request_error",
        None,
        "Invalid API Key provided.",
        None,
    ))
}

/// Stripe's metadata limits: 50 keys, keys up to 40 characters without
/// square brackets, values up to 500.
fn metadata_problem(metadata: &HashMap<String, String>, param: &str) -> Option<HttpResponse> {
    if metadata.len() > 50 {
        return Some(invalid("Metadata can have up to 50 keys.", Some(param)));
    }
    for (key, value) in metadata {
        if key.is_empty() || key.chars().count() > 40 || key.contains(['[', ']']) {
            return Some(invalid(
                "Metadata keys must be 1 to 40 characters, without square brackets.",
                Some(param),
            ));
        }
        if value.chars().count() > 500 {
            return Some(invalid(
                "Metadata values can have up to 500 characters.",
                Some(param),
            ));
        }
    }
    None
}

/// The methods a session offers when it names none: the account's
/// dashboard choice, which for EUR includes a bank debit that settles
/// later.
fn dynamic_methods(currency: &str) -> Vec<String> {
    match currency {
        "eur" => vec!["card".into(), "sepa_debit".into()],
        _ => vec!["card".into()],
    }
}

async fn create_session(
    sandbox: web::Data<StripeSandbox>,
    request: HttpRequest,
    body: web::Bytes,
) -> HttpResponse {
    // the request's trip to Stripe: Stripe's clock is read when it arrives
    let latency = sandbox.state.with(|s| s.latency);
    if !latency.is_zero() {
        tokio::time::sleep(latency).await;
    }
    if !sandbox.authorised(&request) {
        return unauthorised();
    }
    sandbox.expire_due();
    let form: CreateSessionForm = match parse_form(&body) {
        Ok(form) => form,
        Err(message) => return invalid(&message, None),
    };
    let now = Utc::now().timestamp();
    if form.mode.as_deref() != Some("payment") {
        return invalid("The sandbox only supports mode=payment.", Some("mode"));
    }
    let expires_at = form.expires_at.unwrap_or(now + 24 * 3600);
    if !(now + 30 * 60..=now + 24 * 3600).contains(&expires_at) {
        return invalid(
            "The `expires_at` timestamp must be between 30 minutes and 24 hours from Checkout Session creation.",
            Some("expires_at"),
        );
    }
    if form
        .client_reference_id
        .as_ref()
        .is_some_and(|id| id.is_empty() || id.chars().count() > 200)
    {
        return invalid(
            "client_reference_id must be 1 to 200 characters.",
            Some("client_reference_id"),
        );
    }
    if form.success_url.is_none() {
        return invalid("Missing required param: success_url.", Some("success_url"));
    }
    let intent_metadata = form
        .payment_intent_data
        .map(|data| data.metadata)
        .unwrap_or_default();
    if let Some(problem) = metadata_problem(&form.metadata, "metadata")
        .or_else(|| metadata_problem(&intent_metadata, "payment_intent_data[metadata]"))
    {
        return problem;
    }
    let mut line_items = Vec::new();
    let mut currency = None;
    for (index, item) in form.line_items.iter().enumerate() {
        let (Some(quantity), Some(price)) = (item.quantity, item.price_data.as_ref()) else {
            return invalid(
                "Each line item needs a quantity and price_data.",
                Some(&format!("line_items[{index}]")),
            );
        };
        let (Some(amount), Some(product)) = (price.unit_amount, price.product_data.as_ref()) else {
            return invalid(
                "price_data needs unit_amount and product_data.",
                Some(&format!("line_items[{index}][price_data]")),
            );
        };
        if quantity <= 0 || amount < 0 {
            return invalid(
                "Invalid quantity or amount.",
                Some(&format!("line_items[{index}]")),
            );
        }
        if currency.get_or_insert_with(|| price.currency.clone()) != &price.currency {
            return invalid(
                "All line items must share one currency.",
                Some("line_items"),
            );
        }
        line_items.push((product.name.clone(), quantity, amount));
    }
    let Some(currency) = currency else {
        return invalid("Missing required param: line_items.", Some("line_items"));
    };
    // the request's API version decides which parameter exists
    let legacy = request
        .headers()
        .get("Stripe-Version")
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v < ALLOWED_METHODS_SINCE);
    if !legacy && !form.payment_method_types.is_empty() {
        return invalid(
            "Received unknown parameter: payment_method_types",
            Some("payment_method_types"),
        );
    }
    if legacy && !form.allowed_payment_method_types.is_empty() {
        return invalid(
            "Received unknown parameter: allowed_payment_method_types",
            Some("allowed_payment_method_types"),
        );
    }
    let named = if form.allowed_payment_method_types.is_empty() {
        form.payment_method_types
    } else {
        form.allowed_payment_method_types
    };
    let payment_method_types = if named.is_empty() {
        dynamic_methods(&currency)
    } else {
        named
    };
    sandbox.idempotent(&request, &body, || {
        let session = Session {
            id: random_id("cs_test"),
            created: now,
            expires_at,
            amount_total: line_items.iter().map(|(_, q, a)| q * a).sum(),
            currency,
            client_reference_id: form.client_reference_id,
            metadata: form.metadata,
            intent_metadata,
            success_url: form.success_url,
            cancel_url: form.cancel_url,
            customer_email: form.customer_email,
            line_items,
            payment_method_types,
            adaptive_pricing: form
                .adaptive_pricing
                .and_then(|a| a.enabled)
                .unwrap_or(true),
            status: "open",
            payment_status: "unpaid",
            payment_intent: None,
            delivery: DeliveryMode::Normal,
            held_back: Vec::new(),
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

async fn retrieve_session(
    sandbox: web::Data<StripeSandbox>,
    request: HttpRequest,
    path: web::Path<String>,
) -> HttpResponse {
    if !sandbox.authorised(&request) {
        return unauthorised();
    }
    sandbox.expire_due();
    let id = path.into_inner();
    match sandbox.session(&id) {
        Some(body) => HttpResponse::Ok().json(body),
        None => answer(missing("checkout.session", &id, "session")),
    }
}

async fn expire_session(
    sandbox: web::Data<StripeSandbox>,
    request: HttpRequest,
    path: web::Path<String>,
    body: web::Bytes,
) -> HttpResponse {
    if !sandbox.authorised(&request) {
        return unauthorised();
    }
    sandbox.expire_due();
    let id = path.into_inner();
    let known = sandbox.state.with(|s| s.sessions.contains_key(&id));
    if !known {
        return answer(missing("checkout.session", &id, "session"));
    }
    let mut expired = None;
    let response = sandbox.idempotent(&request, &body, || {
        sandbox
            .state
            .with(|state| match state.sessions.get_mut(&id) {
                Some(session) if session.status == "open" => {
                    session.status = "expired";
                    let body = session.to_json(&sandbox.public_base);
                    expired = Some(body.clone());
                    (StatusCode::OK, body)
                }
                Some(session) => stripe_error(
                    StatusCode::BAD_REQUEST,
                    "invalid_request_error",
                    None,
                    &format!(
                        "This Checkout Session is {} and cannot be expired.",
                        session.status
                    ),
                    None,
                ),
                None => missing("checkout.session", &id, "session"),
            })
    });
    if let Some(body) = expired {
        sandbox.emit(&id, "checkout.session.expired", body);
    }
    response
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RefundForm {
    payment_intent: Option<String>,
    amount: Option<i64>,
    #[serde(default)]
    metadata: HashMap<String, String>,
}

async fn create_refund(
    sandbox: web::Data<StripeSandbox>,
    request: HttpRequest,
    body: web::Bytes,
) -> HttpResponse {
    if !sandbox.authorised(&request) {
        return unauthorised();
    }
    sandbox.expire_due();
    let form: RefundForm = match parse_form(&body) {
        Ok(form) => form,
        Err(message) => return invalid(&message, None),
    };
    let Some(payment_intent) = form.payment_intent else {
        return invalid(
            "Missing required param: payment_intent.",
            Some("payment_intent"),
        );
    };
    if let Some(problem) = metadata_problem(&form.metadata, "metadata") {
        return problem;
    }
    let key = request
        .headers()
        .get("Idempotency-Key")
        .and_then(|value| value.to_str().ok())
        .map(str::to_owned);
    let mut created = None;
    let response = sandbox.idempotent(&request, &body, || {
        sandbox.state.with(|state| {
            let Some(charge) = state
                .ledger
                .charges
                .iter()
                .find(|c| c.payment_intent == payment_intent)
                .cloned()
            else {
                return missing("payment_intent", &payment_intent, "payment_intent");
            };
            // what is given back, or on its way: failed refunds gave nothing
            let already: i64 = state
                .refunds
                .iter()
                .filter(|r| r.payment_intent == payment_intent && r.status != "failed")
                .map(|r| r.amount)
                .sum();
            let left = charge.amount - already;
            if left <= 0 {
                return stripe_error(
                    StatusCode::BAD_REQUEST,
                    "invalid_request_error",
                    Some("charge_already_refunded"),
                    &format!("Charge for {payment_intent} has already been refunded."),
                    None,
                );
            }
            let amount = form.amount.unwrap_or(left);
            if amount <= 0 || amount > left {
                return stripe_error(
                    StatusCode::BAD_REQUEST,
                    "invalid_request_error",
                    Some("amount_too_large"),
                    &format!(
                        "Refund amount ({amount}) is greater than unrefunded amount on charge ({left})"
                    ),
                    Some("amount"),
                );
            }
            let refund = Refund {
                id: random_id("re"),
                payment_intent: payment_intent.clone(),
                session_id: charge.session_id.clone(),
                amount,
                currency: charge.currency.clone(),
                created: Utc::now().timestamp(),
                metadata: form.metadata.clone(),
                status: "pending",
            };
            state.ledger.refunds.push(RefundRecord {
                id: refund.id.clone(),
                payment_intent: payment_intent.clone(),
                amount,
                idempotency_key: key.clone(),
                status: "pending",
                by_provider: false,
            });
            state.refunds.push(refund.clone());
            created = Some(refund.clone());
            (StatusCode::OK, refund.to_json())
        })
    });
    if let Some(refund) = created {
        sandbox.emit_refund(&refund, "created");
        // the bank takes a moment
        if let Some(after) = sandbox.state.with(|s| s.refunds_settle_after) {
            let sandbox = sandbox.clone();
            tokio::spawn(async move {
                tokio::time::sleep(after).await;
                let _ = sandbox.settle_refund(&refund.id, true);
            });
        }
    }
    response
}

async fn retrieve_refund(
    sandbox: web::Data<StripeSandbox>,
    request: HttpRequest,
    path: web::Path<String>,
) -> HttpResponse {
    if !sandbox.authorised(&request) {
        return unauthorised();
    }
    sandbox.expire_due();
    let id = path.into_inner();
    match sandbox.state.with(|state| {
        state
            .refunds
            .iter()
            .find(|r| r.id == id)
            .map(Refund::to_json)
    }) {
        Some(body) => HttpResponse::Ok().json(body),
        None => answer(missing("refund", &id, "id")),
    }
}

#[derive(Debug, Deserialize)]
struct ListQuery {
    payment_intent: Option<String>,
    limit: Option<usize>,
}

async fn list_refunds(
    sandbox: web::Data<StripeSandbox>,
    request: HttpRequest,
    query: web::Query<ListQuery>,
) -> HttpResponse {
    if !sandbox.authorised(&request) {
        return unauthorised();
    }
    sandbox.expire_due();
    let limit = query.limit.unwrap_or(10);
    if !(1..=100).contains(&limit) {
        return invalid("limit must be between 1 and 100.", Some("limit"));
    }
    let data: Vec<Value> = sandbox.state.with(|state| {
        state
            .refunds
            .iter()
            .rev()
            .filter(|r| {
                query
                    .payment_intent
                    .as_ref()
                    .is_none_or(|pi| &r.payment_intent == pi)
            })
            .take(limit)
            .map(Refund::to_json)
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
    if !sandbox.authorised(&request) {
        return unauthorised();
    }
    sandbox.expire_due();
    let id = path.into_inner();
    match sandbox.state.with(|state| state.events.get(&id).cloned()) {
        Some(event) => HttpResponse::Ok().json(event),
        None => answer(missing("event", &id, "id")),
    }
}

async fn hosted_page(sandbox: web::Data<StripeSandbox>, path: web::Path<String>) -> HttpResponse {
    sandbox.expire_due();
    let id = path.into_inner();
    let Some(session) = sandbox.state.with(|s| s.sessions.get(&id).cloned()) else {
        return HttpResponse::NotFound().body("No such payment page.");
    };
    let id = escape(&session.id);
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
                "<form method=\"post\" action=\"/stripe/pay/{id}/pay-late\">\
                 <button id=\"pay-late\">Pay anyway (money arriving after expiry)</button></form>"
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
                "<li>{} × {} — {}</li>",
                qty,
                escape(name),
                amount_text(*amount, &session.currency)
            )
        })
        .collect();
    let delayed = if session.allows("sepa_debit") {
        format!(
            "<form method=\"post\" action=\"/stripe/pay/{id}/pay-delayed\">\
             <button id=\"pay-delayed\">Pay by SEPA Direct Debit (settles in a few days)</button></form>"
        )
    } else {
        String::new()
    };
    page(
        "Pay",
        &format!(
            "<h1>Pay {}</h1><ul>{lines}</ul>\
             <form method=\"post\" action=\"/stripe/pay/{id}/pay\"><button id=\"pay\">Pay</button></form>\
             <form method=\"post\" action=\"/stripe/pay/{id}/decline\"><button id=\"decline\">Pay with a card that is declined</button></form>\
             <form method=\"post\" action=\"/stripe/pay/{id}/pay-twice\"><button id=\"pay-twice\">Pay twice</button></form>\
             {delayed}\
             <form method=\"post\" action=\"/stripe/pay/{id}/abandon\"><button id=\"abandon\">Back to the shop</button></form>",
            amount_text(session.amount_total, &session.currency)
        ),
    )
}

async fn hosted_action(
    sandbox: web::Data<StripeSandbox>,
    path: web::Path<(String, String)>,
) -> HttpResponse {
    sandbox.expire_due();
    let (id, action) = path.into_inner();
    let done = |result: Result<Option<String>, String>| match result {
        Ok(Some(url)) => redirect(&url),
        Ok(None) => page("Paid", "<h1>Paid</h1>"),
        Err(message) => page("Payment", &format!("<h1>{}</h1>", escape(&message))),
    };
    match action.as_str() {
        "pay" => done(sandbox.pay(&id, false)),
        "pay-twice" => {
            let first = sandbox.pay(&id, false);
            if first.is_ok() {
                // a second charge for the same checkout, as a double
                // click on a slow bank page can produce
                let _ = sandbox.pay(&id, true);
            }
            done(first)
        }
        "pay-late" => done(sandbox.pay(&id, true)),
        "pay-delayed" => done(sandbox.pay_delayed(&id)),
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
