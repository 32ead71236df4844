//! The provider sandbox (SPEC §5): the subset of Stripe's HTTP API that
//! Holdfast uses, a hosted payment page, and correctly signed webhooks with
//! retries, so that nothing needs a network. The real adapters talk to it by
//! base URL. It keeps its state in memory and never touches the database.
//!
//! Routes, under `/stripe`:
//! - `POST /v1/checkout/sessions`, `GET /v1/checkout/sessions/{id}`,
//!   `POST /v1/checkout/sessions/{id}/expire`, `POST /v1/refunds`
//!   (form-encoded, Stripe's JSON objects and error shape, `Idempotency-Key`
//!   honoured, `Authorization: Bearer <secret key>` required);
//! - `GET /pay/{id}` the hosted page, `POST /pay/{id}/{action}` with action
//!   `pay`, `decline`, `abandon`, `pay-twice` or `pay-late` (after expiry);
//! - `POST /_sandbox/sessions/{id}/delivery?mode=…` test controls
//!   (`normal`, `twice`, `never`, `late`, `reorder`), `POST
//!   /_sandbox/sessions/{id}/force-pay` (money arriving after expiry),
//!   `GET /_sandbox/ledger`.

mod stripe;

use std::collections::HashMap;
use std::net::TcpListener;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use actix_web::dev::Server;
use actix_web::{App, HttpServer, web};
use serde::Serialize;

use crate::configuration::Secret;

pub use stripe::{DeliveryMode, StripeSandbox};

/// How the sandbox is reached and what it signs with.
#[derive(Debug, Clone)]
pub struct SandboxSettings {
    /// The secret key clients must present.
    pub stripe_secret_key: Secret,
    /// The `whsec_…` secret webhooks are signed with.
    pub stripe_webhook_secret: Secret,
    /// Where webhooks go (Holdfast's `/webhooks/stripe`), if anywhere yet.
    pub stripe_webhook_url: Option<String>,
    /// First retry delay for failed deliveries; doubles each attempt.
    pub retry_base: Duration,
    /// Attempts before a delivery is given up.
    pub max_attempts: u32,
}

impl SandboxSettings {
    /// Development defaults: fixed, obviously fake secrets.
    pub fn development() -> Self {
        Self {
            stripe_secret_key: Secret::new("sk_test_holdfast_sandbox"),
            stripe_webhook_secret: Secret::new("whsec_holdfast_sandbox"),
            stripe_webhook_url: None,
            retry_base: Duration::from_millis(500),
            max_attempts: 8,
        }
    }
}

/// Money that moved at the sandbox, for ledgers and tests.
#[derive(Debug, Clone, Default, Serialize)]
pub struct Ledger {
    pub charges: Vec<Charge>,
    pub refunds: Vec<RefundRecord>,
    pub deliveries: Vec<Delivery>,
}

#[derive(Debug, Clone, Serialize)]
pub struct Charge {
    pub payment_intent: String,
    pub session_id: String,
    pub amount: i64,
    pub currency: String,
}

#[derive(Debug, Clone, Serialize)]
pub struct RefundRecord {
    pub id: String,
    pub payment_intent: String,
    pub amount: i64,
    pub idempotency_key: Option<String>,
}

#[derive(Debug, Clone, Serialize)]
pub struct Delivery {
    pub event_id: String,
    pub event_type: String,
    pub status: Option<u16>,
    pub attempt: u32,
}

/// A running sandbox.
pub struct Sandbox {
    pub port: u16,
    pub stripe: StripeSandbox,
    server: Server,
}

impl Sandbox {
    /// Bind the sandbox to `listener`. `public_base` is how browsers and
    /// clients reach it (e.g. `http://127.0.0.1:8081`).
    pub fn build(
        listener: TcpListener,
        settings: SandboxSettings,
        public_base: String,
    ) -> anyhow::Result<Self> {
        let port = listener.local_addr()?.port();
        let stripe = StripeSandbox::new(settings, public_base);
        let data = web::Data::new(stripe.clone());
        let server = HttpServer::new(move || {
            App::new()
                .app_data(data.clone())
                .app_data(web::PayloadConfig::new(256 * 1024))
                .app_data(web::FormConfig::default().limit(64 * 1024))
                .service(web::scope("/stripe").configure(stripe::routes))
        })
        .workers(2)
        .listen(listener)?
        .run();
        Ok(Self {
            port,
            stripe,
            server,
        })
    }

    pub async fn run_until_stopped(self) -> std::io::Result<()> {
        self.server.await
    }
}

/// Shared mutable state with a short critical section.
#[derive(Debug, Default)]
struct Shared<T>(Arc<Mutex<T>>);

impl<T> Clone for Shared<T> {
    fn clone(&self) -> Self {
        Self(self.0.clone())
    }
}

impl<T> Shared<T> {
    fn with<R>(&self, f: impl FnOnce(&mut T) -> R) -> R {
        let mut guard = self
            .0
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        f(&mut guard)
    }
}

/// Stored responses by idempotency key.
type IdempotencyStore = HashMap<String, (u16, serde_json::Value)>;
