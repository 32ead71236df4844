//! The Stripe part of the sandbox, under `/stripe` (and its API also at the
//! sandbox's root, where the Stripe CLI looks for it: the CLI resolves
//! every path against the host of `--api-base`, dropping its path).
//!
//! API (form-encoded requests, Stripe's JSON objects and error shape,
//! `Authorization: Bearer <key>` or HTTP basic with the key as user name):
//! - `POST /v1/checkout/sessions`, `GET /v1/checkout/sessions/{id}`,
//!   `POST /v1/checkout/sessions/{id}/expire`;
//! - `GET /v1/payment_intents/{id}`: the payment a page took (a debit's
//!   `processing` until its bank answers);
//! - `POST /v1/refunds`, `GET /v1/refunds/{id}`,
//!   `GET /v1/refunds?payment_intent=…`;
//! - `GET /v1/events/{id}`, `POST /v1/events/{id}/retry` (`stripe events
//!   resend`);
//! - `POST /v1/stripecli/sessions` and the websocket it names: what
//!   `stripe listen` talks to (`cli.rs`);
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
//! `charge.refund.updated` before; a session that names no methods offers
//! the dashboard's (SEPA Direct Debit beside the card for EUR), one that
//! names them offers those only, each in its scheme's currency; a debit
//! completes the session `unpaid` and settles later, its PaymentIntent
//! `processing` until then; bodies are form-encoded; amounts have at most
//! eight digits; currencies are lower-case.
//!
//! The hosted page (`GET /pay/{id}`) offers pay, a declined card, pay
//! twice, a bank debit that settles later (when allowed) and back to the
//! shop; for a debit settling, the bank's answer (it pays, it refuses). Test controls, under `/_sandbox`: `sessions/{id}/delivery?mode=…`
//! (`normal`, `twice`, `never`, `late`, `reorder`), `sessions/{id}/force-pay`
//! (money after expiry), `sessions/{id}/settle?outcome=succeeded|failed`
//! (a delayed payment), `refunds/{id}/settle?outcome=succeeded|failed`,
//! `refunds/auto?after_ms=N` (or `never`), `idempotency/expire` (24 hours
//! pass), `webhook-version?version=…`, `webhook-endpoint?url=…` (none: the
//! sandbox's own deliveries stop), `latency?ms=N` (the request's trip),
//! `ledger`.

pub mod cli;
mod methods;
pub(crate) mod objects;
mod page;
pub(crate) mod requests;
mod routes;

use std::collections::{BTreeSet, HashMap};
use std::time::Duration;

use actix_web::HttpRequest;
use actix_web::http::header;
use chrono::Utc;
use serde_json::{Value, json};

pub(crate) use objects::StripeError;
pub(crate) use routes::{root as root_routes, routes};

use self::objects::{Intent, Refund, Session};
use crate::delivery::{self, Courier, DeliveryMode, Endpoint, Outgoing};
use crate::idempotency::Replays;
use crate::ledger::{Charge, Delivery, Ledger, RefundRecord};
use crate::signature::{same_text, stripe_signature_header};
use crate::state::Shared;
use crate::{SandboxSettings, random_id};

/// The API version whose event types the sandbox's webhook endpoint gets
/// unless a test says otherwise, and the account's default version (what
/// `stripe listen` formats events with unless `--latest`): async-stripe's,
/// as Holdfast pins it.
pub fn default_api_version() -> String {
    stripe_shared::version::VERSION.as_str().to_owned()
}

/// The newest API version the sandbox speaks (what `stripe listen
/// --latest` formats events with).
pub fn latest_api_version() -> String {
    default_api_version()
}

/// The first API version that sends `refund.*` events for card refunds.
const REFUND_EVENTS_SINCE: &str = "2024-10-28";

/// The id of the sandbox's one webhook endpoint (for `stripe events
/// resend --webhook-endpoint`).
pub const WEBHOOK_ENDPOINT_ID: &str = "we_holdfast_sandbox";

#[derive(Debug)]
struct State {
    webhook_url: Option<String>,
    webhook_version: String,
    latency: Duration,
    refunds_settle_after: Option<Duration>,
    sessions: HashMap<String, Session>,
    /// Every PaymentIntent a payment on a page made, by id.
    intents: HashMap<String, Intent>,
    /// Every session by its `expires_at` (which never changes), so expiring
    /// the due ones reads only those: a sandbox with a hundred thousand
    /// sessions must not scan them all at every call.
    expiries: BTreeSet<(i64, String)>,
    refunds: Vec<Refund>,
    idempotency: Replays,
    events: HashMap<String, Value>,
    ledger: Ledger,
}

/// The Stripe stand-in. Cheap to clone; clones share state.
#[derive(Clone)]
pub struct StripeSandbox {
    settings: SandboxSettings,
    public_base: String,
    state: Shared<State>,
    courier: Courier,
    cli: cli::Listeners,
}

impl std::fmt::Debug for StripeSandbox {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StripeSandbox")
            .field("public_base", &self.public_base)
            .finish_non_exhaustive()
    }
}

impl StripeSandbox {
    pub fn new(settings: SandboxSettings, public_base: String) -> Self {
        let state = Shared::new(State {
            webhook_url: settings.stripe_webhook_url.clone(),
            webhook_version: default_api_version(),
            latency: Duration::ZERO,
            refunds_settle_after: settings.refunds_settle_after,
            sessions: HashMap::new(),
            intents: HashMap::new(),
            expiries: BTreeSet::new(),
            refunds: Vec::new(),
            idempotency: Replays::default(),
            events: HashMap::new(),
            ledger: Ledger::default(),
        });
        Self {
            courier: Courier::new(settings.retry_base, settings.max_attempts),
            cli: cli::Listeners::new(settings.stripe_webhook_secret.clone()),
            settings,
            public_base,
            state,
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

    /// Stop the sandbox's own deliveries (as when no webhook URL is
    /// configured): events then reach the shop only through `stripe
    /// listen`, or not at all. They are still made and kept.
    pub fn remove_webhook_url(&self) {
        self.state.with(|state| state.webhook_url = None);
    }

    pub fn ledger(&self) -> Ledger {
        self.state.with(|state| state.ledger.clone())
    }

    /// Change how one session's webhooks are delivered.
    pub fn set_delivery(&self, session_id: &str, mode: DeliveryMode) -> bool {
        self.state
            .with(|state| match state.sessions.get_mut(session_id) {
                Some(session) => {
                    session.pacing.mode = mode;
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
        self.state.with(|state| state.idempotency.forget_all());
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
            events.sort_by_key(|e| {
                (
                    e.get("created").and_then(Value::as_i64),
                    e.get("id").and_then(Value::as_str).map(str::to_owned),
                )
            });
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

    /// The `stripe listen` sessions connected now.
    pub fn cli_listeners(&self) -> usize {
        self.cli.connected()
    }

    /// The command a developer runs so that `stripe listen` forwards this
    /// sandbox's events to the shop at `shop_base` (`http://127.0.0.1:8080`):
    /// see [`cli::listen_command`].
    pub fn cli_listen_command(&self, shop_base: &str) -> String {
        cli::listen_command(&self.settings, &self.public_base, shop_base)
    }

    /// The API key of a request, if it is this account's
    /// (docs.stripe.com/api/authentication: Bearer, or HTTP basic with the
    /// key as user name); `Err(given)` says whether a key was given.
    fn authorised(&self, request: &HttpRequest) -> Result<(), StripeError> {
        use base64::Engine;
        let key = self.settings.stripe_secret_key.expose();
        let Some(value) = request
            .headers()
            .get(header::AUTHORIZATION)
            .and_then(|value| value.to_str().ok())
        else {
            return Err(StripeError::unauthorised(false));
        };
        let matches = if let Some(bearer) = value.strip_prefix("Bearer ") {
            same_text(bearer, key)
        } else {
            // HTTP basic with the key as user name and no password
            value
                .strip_prefix("Basic ")
                .and_then(|encoded| {
                    base64::engine::general_purpose::STANDARD
                        .decode(encoded.trim())
                        .ok()
                })
                .and_then(|decoded| String::from_utf8(decoded).ok())
                .is_some_and(|given| same_text(given.trim_end_matches(':'), key))
        };
        if matches {
            Ok(())
        } else {
            Err(StripeError::unauthorised(true))
        }
    }

    /// Sessions past their `expires_at` expire, as Stripe expires them by
    /// itself, each with its `checkout.session.expired`.
    pub fn expire_due(&self) {
        let now = Utc::now().timestamp();
        let expired: Vec<(String, Value)> = self.state.with(|state| {
            let later = state
                .expiries
                .split_off(&(now.saturating_add(1), String::new()));
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

    /// Make one event about a session: kept for `GET /v1/events/{id}`,
    /// delivered to the webhook endpoint following the session's delivery
    /// mode, and sent to every `stripe listen` session.
    fn emit(&self, session_id: &str, event_type: &str, object: Value) {
        let version = self.state.with(|s| s.webhook_version.clone());
        let event = self.keep(event_type, object, &version);
        self.to_endpoint(session_id, event.clone());
        self.cli.broadcast(&event);
    }

    /// A new event of Stripe's shape at `api_version`, kept for `GET
    /// /v1/events/{id}` and resends.
    fn keep(&self, event_type: &str, object: Value, api_version: &str) -> Value {
        let id = random_id("evt");
        let event = json!({
            "id": id,
            "object": "event",
            "api_version": api_version,
            "created": Utc::now().timestamp(),
            "data": { "object": object },
            "livemode": false,
            "pending_webhooks": 1,
            "request": { "id": null, "idempotency_key": null },
            "type": event_type,
        });
        self.state
            .with(|state| state.events.insert(id, event.clone()));
        event
    }

    /// Deliver an event to the webhook endpoint, following the delivery
    /// mode of the session it is about.
    fn to_endpoint(&self, session_id: &str, event: Value) {
        let batch = self
            .state
            .with(|state| match state.sessions.get_mut(session_id) {
                Some(session) => session.pacing.plan(event),
                None => delivery::Pacing::default().plan(event),
            });
        delivery::send(self, batch);
    }

    /// A refund's news, as the endpoint's API version words it; `stripe
    /// listen` is on the account's current versions, which word it
    /// `refund.*`.
    fn emit_refund(&self, refund: &Refund, change: &str) {
        let version = self.state.with(|s| s.webhook_version.clone());
        let event_type = match change {
            "created" => "refund.created",
            "failed" => "refund.failed",
            _ => "refund.updated",
        };
        if version.as_str() >= REFUND_EVENTS_SINCE {
            self.emit(&refund.session_id, event_type, refund.to_json());
            return;
        }
        // older endpoints hear about card refunds only as
        // charge.refund.updated, and of their creation not at all
        if change != "created" {
            let legacy = self.keep("charge.refund.updated", refund.to_json(), &version);
            self.to_endpoint(&refund.session_id, legacy);
        }
        if self.cli.connected() > 0 {
            let current = self.keep(event_type, refund.to_json(), &default_api_version());
            self.cli.broadcast(&current);
        }
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
            let intent = Intent {
                session_id: session.id.clone(),
                created: Utc::now().timestamp(),
                status: "succeeded",
                method: "card",
            };
            state.ledger.charges.push(Charge {
                payment_intent: payment_intent.clone(),
                session_id: session.id.clone(),
                amount: session.amount_total,
                currency: session.currency.clone(),
                metadata: json!(session.intent_metadata),
            });
            let answer = (session.to_json(&self.public_base), success_url(session));
            state.intents.insert(payment_intent, intent);
            Ok(answer)
        })?;
        self.emit(session_id, "checkout.session.completed", object);
        Ok(success)
    }

    /// A PaymentIntent as Stripe shows it.
    pub fn intent(&self, id: &str) -> Option<Value> {
        self.state.with(|state| {
            let intent = state.intents.get(id)?;
            let session = state.sessions.get(&intent.session_id)?;
            Some(intent.to_json(id, session))
        })
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
            let payment_intent = random_id("pi");
            session.payment_intent = Some(payment_intent.clone());
            let answer = (session.to_json(&self.public_base), success_url(session));
            state.intents.insert(
                payment_intent,
                Intent {
                    session_id: session_id.to_owned(),
                    created: Utc::now().timestamp(),
                    status: "processing",
                    method: "sepa_debit",
                },
            );
            Ok(answer)
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
            let nothing = || "nothing is settling on this session".to_owned();
            let intent_id = session.payment_intent.clone().ok_or_else(nothing)?;
            let intent = state.intents.get_mut(&intent_id).ok_or_else(nothing)?;
            if session.status != "complete"
                || session.payment_status != "unpaid"
                || intent.status != "processing"
            {
                return Err(nothing());
            }
            // the bank's answer: the debit succeeded, or it failed and the
            // intent wants a payment method again
            // (docs.stripe.com/payments/paymentintents/lifecycle)
            intent.status = if succeeded {
                "succeeded"
            } else {
                "requires_payment_method"
            };
            if succeeded {
                session.payment_status = "paid";
                state.ledger.charges.push(Charge {
                    payment_intent: intent_id,
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

/// The shop's `/webhooks/stripe`: Stripe's JSON body, `Stripe-Signature:
/// t=…,v1=…` over `"<t>.<body>"` with the endpoint's `whsec_…` secret,
/// signed anew at each attempt (docs.stripe.com/webhooks/signature).
impl Endpoint for StripeSandbox {
    fn courier(&self) -> &Courier {
        &self.courier
    }

    fn url(&self) -> Option<String> {
        self.state.with(|state| state.webhook_url.clone())
    }

    fn outgoing(&self, event: Value) -> Outgoing {
        let field = |name: &str| {
            event
                .get(name)
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_owned()
        };
        Outgoing {
            event_id: field("id"),
            event_type: field("type"),
            body: event.to_string(),
        }
    }

    fn headers(&self, outgoing: &Outgoing) -> Vec<(&'static str, String)> {
        vec![(
            "Stripe-Signature",
            stripe_signature_header(
                &self.settings.stripe_webhook_secret,
                Utc::now().timestamp(),
                outgoing.body.as_bytes(),
            ),
        )]
    }

    fn record(&self, delivery: Delivery) {
        self.state
            .with(|state| state.ledger.deliveries.push(delivery));
    }
}

/// A refund made, kept in the ledger: what `POST /v1/refunds` does once the
/// request is known to be right.
fn refund_in(
    state: &mut State,
    request: &requests::CreateRefund,
    key: Option<&str>,
) -> Result<Refund, StripeError> {
    let payment_intent = &request.payment_intent;
    let Some(charge) = state
        .ledger
        .charges
        .iter()
        .find(|c| &c.payment_intent == payment_intent)
        .cloned()
    else {
        return Err(StripeError::missing(
            "payment_intent",
            payment_intent,
            "payment_intent",
        ));
    };
    // what is given back, or on its way: failed refunds gave nothing
    let already: i64 = state
        .refunds
        .iter()
        .filter(|r| &r.payment_intent == payment_intent && r.status != "failed")
        .map(|r| r.amount)
        .fold(0, i64::saturating_add);
    let left = charge.amount.saturating_sub(already);
    if left <= 0 {
        return Err(StripeError::coded(
            "charge_already_refunded",
            format!("Charge for {payment_intent} has already been refunded."),
            None,
        ));
    }
    let amount = request.amount.unwrap_or(left);
    if amount > left {
        return Err(StripeError::coded(
            "amount_too_large",
            format!(
                "Refund amount ({amount}) is greater than unrefunded amount on charge ({left})"
            ),
            Some("amount"),
        ));
    }
    let refund = Refund {
        id: random_id("re"),
        payment_intent: payment_intent.clone(),
        session_id: charge.session_id.clone(),
        amount,
        currency: charge.currency.clone(),
        created: Utc::now().timestamp(),
        metadata: request.metadata.clone(),
        status: "pending",
    };
    state.ledger.refunds.push(RefundRecord {
        id: refund.id.clone(),
        payment_intent: payment_intent.clone(),
        amount,
        idempotency_key: key.map(str::to_owned),
        status: "pending",
        by_provider: false,
    });
    state.refunds.push(refund.clone());
    Ok(refund)
}
