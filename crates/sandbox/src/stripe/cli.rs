//! `stripe listen` and `stripe events resend` against the sandbox, offline,
//! as they work against Stripe. Written from the Stripe CLI's public source
//! (github.com/stripe/stripe-cli: pkg/stripeauth, pkg/websocket, pkg/proxy,
//! pkg/cmd/resource/events_resend.go) and its documentation
//! (docs.stripe.com/cli/listen, /cli/events/resend):
//!
//! 1. `POST /v1/stripecli/sessions` (form: `device_name`,
//!    `websocket_features[]`, `forward_to_url`, …), authenticated by the
//!    API key, answers the websocket's URL and id, the feature it is for,
//!    how often the CLI should reconnect (`reconnect_delay`, seconds), the
//!    account's default and latest API versions, and the webhook signing
//!    `secret` the CLI prints (`--print-secret` prints only that).
//! 2. The CLI opens the websocket with the subprotocol
//!    `stripecli-devproxy-v1`, its id in a `Websocket-Id` header and
//!    `?websocket_feature=webhooks`; an id the sandbox does not know is
//!    refused with "Unknown WebSocket ID.", and the CLI asks for a new
//!    session. It pings every few seconds (answered with pongs) and
//!    reconnects with the same id every `reconnect_delay`.
//! 3. Each event goes to each connected session as
//!    `{"type":"webhook_event","webhook_id","webhook_conversation_id",
//!    "event_payload":<the event's JSON, a string>,"http_headers":{…,
//!    "Stripe-Signature"},"endpoint":{"api_version":…}}`, twice: once at
//!    the account's default version (`api_version` null) and once at the
//!    latest (`api_version` named); the CLI keeps the one it asked for
//!    (`--latest` or not) and filters by its `--events` itself. It answers
//!    each with `{"type":"event_ack",…}`, and each one it forwarded with
//!    `{"type":"webhook_response","status",…,"notification_id":<event id>}`
//!    carrying the local endpoint's status, which the sandbox keeps in its
//!    ledger ([`Carrier::StripeCli`]).
//! 4. `stripe events resend <id>` posts `for_stripecli=true` to
//!    `/v1/events/{id}/retry`: the event goes to every session again.
//!
//! The signing secret: the real CLI's is the same on every run for an
//! account and device ("The webhook signing secret provided will not change
//! between restarts", docs.stripe.com/cli/listen). The sandbox is one
//! account, and its CLI secret is its configured webhook secret
//! (`SandboxSettings::stripe_webhook_secret`): a shop that verifies the
//! sandbox's own deliveries verifies what `stripe listen` forwards, and a
//! shop configured with the printed secret (`STRIPE_WEBHOOK_SECRET`) verifies
//! both.
//!
//! A session whose websocket closes stops receiving; what is made while it
//! is away waits (a little while, a bounded number) and goes out when it
//! reconnects, with its own id or as a new session of the same device.

use std::collections::{HashMap, VecDeque};
use std::time::{Duration, Instant};

use actix_web::http::StatusCode;
use actix_web::{HttpRequest, HttpResponse, web};
use actix_ws::Message;
use chrono::Utc;
use serde_json::{Value, json};
use tokio::sync::mpsc;

use super::objects::{StripeDialect, StripeError};
use super::requests::CliSessionRequest;
use super::{StripeSandbox, default_api_version, latest_api_version};
use crate::delivery::Endpoint;
use crate::dialect::Body;
use crate::ledger::{Carrier, Delivery};
use crate::signature::{Secret, stripe_signature_header};
use crate::state::Shared;
use crate::{SandboxSettings, random_id};

/// The websocket subprotocol the CLI speaks (pkg/websocket/client.go).
pub const SUBPROTOCOL: &str = "stripecli-devproxy-v1";

/// The one websocket feature the sandbox serves: snapshot webhook events.
const WEBHOOKS: &str = "webhooks";

/// How often the CLI is told to reconnect (its `ReconnectInterval`).
const RECONNECT_DELAY: Duration = Duration::from_secs(60);

/// How long a session that is away is kept, its events waiting: long
/// enough for the CLI's reconnect or a restart.
const AWAY_FOR_AT_MOST: Duration = Duration::from_secs(120);

/// How many events wait for a session that is away.
const MOST_WAITING: usize = 1000;

/// A connection that sends nothing (the CLI pings every two seconds) for
/// this long is gone.
const SILENT_FOR_AT_MOST: Duration = Duration::from_secs(30);

/// Every event type the Stripe part of the sandbox makes. Recent CLIs want
/// the events named (`--events`, or `--all-snapshot`).
pub const EVENTS: [&str; 8] = [
    "checkout.session.completed",
    "checkout.session.async_payment_succeeded",
    "checkout.session.async_payment_failed",
    "checkout.session.expired",
    "refund.created",
    "refund.updated",
    "refund.failed",
    "charge.refund.updated",
];

/// The command a developer runs so that the official Stripe CLI forwards
/// the events of the sandbox at `sandbox_base` (`http://127.0.0.1:8081`)
/// to the shop at `shop_base` (`http://127.0.0.1:8080`), signed with the
/// secret the shop already verifies. The CLI takes an API base only on
/// `http://127.0.0.1` (pkg/stripe/url.go) and drops its path, so the
/// sandbox's root is given. The API key is written out only when it is the
/// development key (public, in the README); otherwise the command reads it
/// from `STRIPE_API_KEY`.
pub fn listen_command(settings: &SandboxSettings, sandbox_base: &str, shop_base: &str) -> String {
    let api_base = sandbox_base
        .trim_end_matches('/')
        .replacen("://localhost", "://127.0.0.1", 1);
    let key = if settings.stripe_secret_key == SandboxSettings::development().stripe_secret_key {
        settings.stripe_secret_key.expose().to_owned()
    } else {
        "\"$STRIPE_API_KEY\"".to_owned()
    };
    format!(
        "stripe listen --api-base {api_base} --api-key {key} --skip-update --events {} \
         --forward-to {}/webhooks/stripe",
        EVENTS.join(","),
        shop_base.trim_end_matches('/')
    )
}

/// The `stripe listen` sessions of the account.
#[derive(Clone)]
pub(crate) struct Listeners {
    secret: Secret,
    state: Shared<HashMap<String, Listener>>,
}

#[derive(Debug)]
struct Listener {
    device_name: String,
    /// The `webhook_id` of its messages: the CLI's "endpoint".
    webhook_id: String,
    /// The open websocket (which one, and its outbox), while connected.
    connection: Option<(u64, mpsc::UnboundedSender<String>)>,
    /// When it was last connected (or made).
    since: Instant,
    ever_connected: bool,
    /// Events made while it was away.
    waiting: VecDeque<Value>,
}

impl Listener {
    fn gone(&self, now: Instant) -> bool {
        self.connection.is_none() && now.duration_since(self.since) > AWAY_FOR_AT_MOST
    }
}

static GENERATION: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1);

impl Listeners {
    pub(crate) fn new(secret: Secret) -> Self {
        Self {
            secret,
            state: Shared::default(),
        }
    }

    /// How many sessions have their websocket open.
    pub(crate) fn connected(&self) -> usize {
        self.state.with(|listeners| {
            listeners
                .values()
                .filter(|l| l.connection.is_some())
                .count()
        })
    }

    /// A new session for `device_name`. A session of the same device that
    /// was connected and is away is taken over: its waiting events are the
    /// new one's (a `stripe listen` restarted). One never connected (still
    /// starting, or a `--print-secret`) is left alone.
    fn open(&self, device_name: &str) -> String {
        let id = random_id("wsid");
        let now = Instant::now();
        self.state.with(|listeners| {
            listeners.retain(|_, l| !l.gone(now));
            let mut waiting = VecDeque::new();
            let away: Vec<String> = listeners
                .iter()
                .filter(|(_, l)| {
                    l.device_name == device_name && l.ever_connected && l.connection.is_none()
                })
                .map(|(id, _)| id.clone())
                .collect();
            let ever_connected = !away.is_empty();
            for old in away {
                if let Some(old) = listeners.remove(&old) {
                    waiting.extend(old.waiting);
                }
            }
            listeners.insert(
                id.clone(),
                Listener {
                    device_name: device_name.to_owned(),
                    webhook_id: random_id("we"),
                    connection: None,
                    since: now,
                    ever_connected,
                    waiting,
                },
            );
        });
        id
    }

    /// The websocket `id` is open: it receives from now on, beginning with
    /// what waited for it. `None` if the id is unknown (or long gone).
    fn connect(&self, id: &str, outbox: mpsc::UnboundedSender<String>) -> Option<u64> {
        let generation = GENERATION.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let now = Instant::now();
        let (waiting, webhook_id) = self.state.with(|listeners| {
            listeners.retain(|_, l| !l.gone(now));
            let listener = listeners.get_mut(id)?;
            listener.connection = Some((generation, outbox.clone()));
            listener.since = now;
            listener.ever_connected = true;
            Some((
                std::mem::take(&mut listener.waiting),
                listener.webhook_id.clone(),
            ))
        })?;
        for event in waiting {
            for message in self.messages(&event, &webhook_id) {
                let _ = outbox.send(message);
            }
        }
        Some(generation)
    }

    /// The websocket of `generation` closed (a newer one of the same id
    /// stays).
    fn disconnect(&self, id: &str, generation: u64) {
        self.state.with(|listeners| {
            if let Some(listener) = listeners.get_mut(id)
                && listener
                    .connection
                    .as_ref()
                    .is_some_and(|(current, _)| *current == generation)
            {
                listener.connection = None;
                listener.since = Instant::now();
            }
        });
    }

    /// Send one event to every session: now to those connected; later to
    /// those away (that were connected once).
    pub(crate) fn broadcast(&self, event: &Value) {
        let now = Instant::now();
        let open: Vec<(mpsc::UnboundedSender<String>, String)> = self.state.with(|listeners| {
            listeners.retain(|_, l| !l.gone(now));
            let mut open = Vec::new();
            for listener in listeners.values_mut() {
                match &listener.connection {
                    Some((_, outbox)) => open.push((outbox.clone(), listener.webhook_id.clone())),
                    None if listener.ever_connected => {
                        if listener.waiting.len() >= MOST_WAITING {
                            listener.waiting.pop_front();
                        }
                        listener.waiting.push_back(event.clone());
                    }
                    None => {}
                }
            }
            open
        });
        for (outbox, webhook_id) in open {
            for message in self.messages(event, &webhook_id) {
                let _ = outbox.send(message);
            }
        }
    }

    /// The two `webhook_event` messages of one event: at the account's
    /// default API version and at the latest, each signed now.
    fn messages(&self, event: &Value, webhook_id: &str) -> Vec<String> {
        [
            (Value::Null, default_api_version()),
            (json!(latest_api_version()), latest_api_version()),
        ]
        .into_iter()
        .map(|(endpoint_version, version)| {
            let mut payload = event.clone();
            if let Some(object) = payload.as_object_mut() {
                object.insert("api_version".into(), json!(version));
            }
            let payload = payload.to_string();
            let signature =
                stripe_signature_header(&self.secret, Utc::now().timestamp(), payload.as_bytes());
            json!({
                "type": "webhook_event",
                "webhook_id": webhook_id,
                "webhook_conversation_id": random_id("wc"),
                "event_payload": payload,
                "http_headers": {
                    "Accept": "*/*; q=0.5, application/xml",
                    "Cache-Control": "no-cache",
                    "Content-Type": "application/json; charset=utf-8",
                    "Stripe-Signature": signature,
                    "User-Agent": "Stripe/1.0 (+https://stripe.com/docs/webhooks)",
                },
                "endpoint": { "api_version": endpoint_version },
            })
            .to_string()
        })
        .collect()
    }
}

/// `POST /v1/stripecli/sessions`.
pub(crate) async fn create_session(
    sandbox: web::Data<StripeSandbox>,
    request: HttpRequest,
    body: Body<StripeDialect>,
) -> HttpResponse {
    if let Err(refusal) = sandbox.authorised(&request) {
        return refusal.response();
    }
    let asked = match CliSessionRequest::parse(body.content_type.as_deref(), &body.bytes) {
        Ok(asked) => asked,
        Err(refusal) => return refusal.response(),
    };
    if !asked.websocket_features.iter().any(|f| f == WEBHOOKS) {
        return StripeError::invalid(
            "The sandbox streams snapshot events only: ask for the `webhooks` websocket feature.",
            Some("websocket_features"),
        )
        .response();
    }
    let id = sandbox.cli.open(&asked.device_name);
    let websocket_url = format!(
        "{}/stripe/v1/stripecli/websocket",
        sandbox
            .public_base
            .replacen("https://", "wss://", 1)
            .replacen("http://", "ws://", 1)
    );
    HttpResponse::Ok().json(json!({
        "websocket_url": websocket_url,
        "websocket_id": id,
        "websocket_authorized_feature": WEBHOOKS,
        "reconnect_delay": RECONNECT_DELAY.as_secs(),
        "secret": sandbox.cli.secret.expose(),
        "display_connect_filter_warning": false,
        "default_version": default_api_version(),
        "latest_version": latest_api_version(),
        "device_token": random_id("dt"),
    }))
}

/// `GET /v1/stripecli/websocket?websocket_feature=webhooks` with
/// `Websocket-Id`: the CLI's connection.
pub(crate) async fn websocket(
    sandbox: web::Data<StripeSandbox>,
    request: HttpRequest,
    body: web::Payload,
) -> HttpResponse {
    let unknown = || {
        StripeError::new(
            StatusCode::BAD_REQUEST,
            "invalid_request_error",
            None,
            "Unknown WebSocket ID.",
            None,
        )
        .response()
    };
    let Some(id) = request
        .headers()
        .get("Websocket-Id")
        .and_then(|value| value.to_str().ok())
        .map(str::to_owned)
    else {
        return unknown();
    };
    let known = sandbox.cli.state.with(|listeners| {
        listeners
            .get(&id)
            .is_some_and(|listener| !listener.gone(Instant::now()))
    });
    if !known {
        return unknown();
    }
    let feature = web::Query::<HashMap<String, String>>::from_query(request.query_string())
        .ok()
        .and_then(|query| query.get("websocket_feature").cloned());
    if feature.as_deref() != Some(WEBHOOKS) {
        return StripeError::invalid(
            "This websocket carries the `webhooks` feature.",
            Some("websocket_feature"),
        )
        .response();
    }
    let (response, session, stream) =
        match actix_ws::handle_with_protocols(&request, body, &[SUBPROTOCOL]) {
            Ok(handshake) => handshake,
            Err(_) => {
                return StripeError::invalid("This URL takes a websocket connection.", None)
                    .response();
            }
        };
    let (outbox, inbox) = mpsc::unbounded_channel();
    let Some(generation) = sandbox.cli.connect(&id, outbox) else {
        return unknown();
    };
    let sandbox = sandbox.get_ref().clone();
    actix_web::rt::spawn(async move {
        converse(&sandbox, session, stream, inbox).await;
        sandbox.cli.disconnect(&id, generation);
    });
    response
}

/// One connection's life: what the sandbox has to send goes out, the CLI's
/// pings are answered, its replies are kept, until either side closes.
async fn converse(
    sandbox: &StripeSandbox,
    mut session: actix_ws::Session,
    mut stream: actix_ws::MessageStream,
    mut inbox: mpsc::UnboundedReceiver<String>,
) {
    loop {
        tokio::select! {
            message = tokio::time::timeout(SILENT_FOR_AT_MOST, stream.recv()) => {
                match message {
                    Ok(Some(Ok(Message::Text(text)))) => reply(sandbox, &text),
                    Ok(Some(Ok(Message::Ping(bytes)))) => {
                        if session.pong(&bytes).await.is_err() {
                            return;
                        }
                    }
                    Ok(Some(Ok(Message::Close(_)))) | Ok(Some(Err(_))) | Ok(None) | Err(_) => break,
                    Ok(Some(Ok(_))) => {}
                }
            }
            outgoing = inbox.recv() => match outgoing {
                Some(text) => {
                    if session.text(text).await.is_err() {
                        return;
                    }
                }
                None => break,
            },
        }
    }
    let _ = session.close(None).await;
}

/// A message from the CLI: an acknowledgement (nothing to do), or the local
/// endpoint's answer to a forwarded event, kept in the ledger. Anything
/// else is ignored, as the CLI ignores what it does not know.
fn reply(sandbox: &StripeSandbox, text: &str) {
    let Ok(message) = serde_json::from_str::<Value>(text) else {
        return;
    };
    if message.get("type").and_then(Value::as_str) != Some("webhook_response") {
        return;
    }
    let Some(event_id) = message.get("notification_id").and_then(Value::as_str) else {
        return;
    };
    let event_type = sandbox.state.with(|state| {
        state
            .events
            .get(event_id)
            .and_then(|event| event.get("type"))
            .and_then(Value::as_str)
            .map(str::to_owned)
    });
    let Some(event_type) = event_type else {
        return;
    };
    let status = message
        .get("status")
        .and_then(Value::as_u64)
        .and_then(|s| u16::try_from(s).ok());
    sandbox.record(Delivery {
        event_id: event_id.to_owned(),
        event_type,
        status,
        attempt: 1,
        via: Carrier::StripeCli,
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_command_names_the_sandbox_root_and_the_shop() {
        let settings = SandboxSettings::development();
        assert_eq!(
            listen_command(
                &settings,
                "http://localhost:8081/",
                "http://127.0.0.1:8080/"
            ),
            format!(
                "stripe listen --api-base http://127.0.0.1:8081 --api-key sk_test_holdfast_sandbox \
                 --skip-update --events {} --forward-to http://127.0.0.1:8080/webhooks/stripe",
                EVENTS.join(",")
            )
        );
        let mut other = settings;
        other.stripe_secret_key = Secret::new("sk_test_not_public");
        assert!(
            !listen_command(&other, "http://127.0.0.1:8081", "http://127.0.0.1:8080")
                .contains("not_public")
        );
    }

    #[test]
    fn a_session_away_keeps_its_events_for_its_device() {
        let listeners = Listeners::new(Secret::new("whsec_test"));
        let first = listeners.open("laptop");
        let (outbox, mut inbox) = mpsc::unbounded_channel();
        let generation = listeners.connect(&first, outbox).unwrap();
        listeners.broadcast(&json!({"id": "evt_1", "type": "x"}));
        // at the default version and at the latest
        assert!(inbox.try_recv().unwrap().contains("evt_1"));
        assert!(inbox.try_recv().unwrap().contains("evt_1"));
        listeners.disconnect(&first, generation);
        listeners.broadcast(&json!({"id": "evt_2", "type": "x"}));
        assert!(inbox.try_recv().is_err(), "nothing reaches a closed socket");
        // a new session of the same device resumes with what waited
        let second = listeners.open("laptop");
        let (outbox, mut inbox) = mpsc::unbounded_channel();
        listeners.connect(&second, outbox).unwrap();
        assert!(inbox.try_recv().unwrap().contains("evt_2"));
        assert!(
            listeners
                .connect(&first, mpsc::unbounded_channel().0)
                .is_none()
        );
    }
}
