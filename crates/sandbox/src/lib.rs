//! The provider sandbox (SPEC §5): the subsets of Stripe's and Razorpay's
//! HTTP APIs that Holdfast uses, hosted payment pages, and correctly signed
//! webhooks with retries, so that nothing needs a network. The real
//! adapters talk to it by base URL, and so can the providers' official
//! SDKs. It keeps its state in memory and never touches the database.
//!
//! **It refuses what the provider refuses.** Each rule it enforces is one
//! the provider documents (README, "The provider sandbox", lists them with
//! their sources): Stripe's `expires_at` bounds, idempotency keys that
//! replay their first answer and refuse other parameters, refunds that
//! finish later; Razorpay's capture settings, refund keys and their body,
//! 409 while a refund is in flight, authorised payments that stay
//! uncaptured until captured (and are given back if never), the failure
//! callback. The Stripe part lives in `stripe.rs`, the Razorpay part in
//! `razorpay.rs`; each lists its routes and test controls.

//!
//! Its own crate: `holdfast serve` runs it in-process when no keys are set
//! (the `sandbox` feature of the holdfast package, on by default), the
//! tests and the tools use it, and a production build can leave it out.
//! It shares no code with Holdfast's adapters: its signatures, checks and
//! HTTP client are its own, so a mistake on one side is not repeated on
//! the other.

pub mod mail;
mod razorpay;
mod signature;
mod stripe;

use std::net::TcpListener;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use actix_web::HttpResponse;
use actix_web::dev::Server;
use actix_web::http::header::{self, ContentType};
use actix_web::{App, HttpServer, web};
use rand::Rng;
use serde::Serialize;

pub use signature::Secret;

pub use razorpay::RazorpaySandbox;
pub use stripe::StripeSandbox;

/// How the sandbox is reached and what it signs with.
#[derive(Debug, Clone)]
pub struct SandboxSettings {
    /// The secret key clients must present.
    pub stripe_secret_key: Secret,
    /// The `whsec_…` secret webhooks are signed with.
    pub stripe_webhook_secret: Secret,
    /// Where webhooks go (Holdfast's `/webhooks/stripe`), if anywhere yet.
    pub stripe_webhook_url: Option<String>,
    /// Razorpay's key id and key secret clients must present.
    pub razorpay_key_id: String,
    pub razorpay_key_secret: Secret,
    /// The secret Razorpay webhooks are signed with.
    pub razorpay_webhook_secret: Secret,
    /// Where Razorpay webhooks go (Holdfast's `/webhooks/razorpay`).
    pub razorpay_webhook_url: Option<String>,
    /// First retry delay for failed deliveries; doubles each attempt.
    pub retry_base: Duration,
    /// Attempts before a delivery is given up.
    pub max_attempts: u32,
    /// How long a refund stays pending before it succeeds; `None`: until
    /// a test settles it (`/_sandbox/refunds/{id}/settle`).
    pub refunds_settle_after: Option<Duration>,
}

impl SandboxSettings {
    /// Development defaults: fixed, obviously fake secrets.
    pub fn development() -> Self {
        Self {
            stripe_secret_key: Secret::new("sk_test_holdfast_sandbox"),
            stripe_webhook_secret: Secret::new("whsec_holdfast_sandbox"),
            stripe_webhook_url: None,
            razorpay_key_id: "rzp_test_holdfast_sandbox".into(),
            razorpay_key_secret: Secret::new("rzp_secret_holdfast_sandbox"),
            razorpay_webhook_secret: Secret::new("rzp_webhook_holdfast_sandbox"),
            razorpay_webhook_url: None,
            retry_base: Duration::from_millis(500),
            max_attempts: 8,
            refunds_settle_after: Some(Duration::from_millis(500)),
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

/// Money the provider took: a captured payment (an authorisation is not
/// money until it is captured).
#[derive(Debug, Clone, Serialize)]
pub struct Charge {
    pub payment_intent: String,
    pub session_id: String,
    pub amount: i64,
    pub currency: String,
    /// What the payment carries for the merchant's dashboard (Stripe's
    /// PaymentIntent metadata, Razorpay's order notes).
    pub metadata: serde_json::Value,
}

/// Money given back, or on its way.
#[derive(Debug, Clone, Serialize)]
pub struct RefundRecord {
    pub id: String,
    pub payment_intent: String,
    pub amount: i64,
    pub idempotency_key: Option<String>,
    /// pending, then succeeded or failed (Stripe's words; Razorpay's
    /// processed is succeeded here)
    pub status: &'static str,
    /// Made by the provider itself (Razorpay returning an authorisation
    /// nobody captured, or a second payment on a paid order), not asked for.
    pub by_provider: bool,
}

impl Ledger {
    /// Refunds that gave (or are giving) money back: not the failed ones.
    pub fn refunds_standing(&self) -> impl Iterator<Item = &RefundRecord> {
        self.refunds.iter().filter(|r| r.status != "failed")
    }
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
    pub razorpay: RazorpaySandbox,
    /// The mail server's mailbox (serve it with [`mail::MailSandbox::serve`]);
    /// its messages are on `/mail`.
    pub mail: mail::MailSandbox,
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
        let stripe = StripeSandbox::new(settings.clone(), public_base.clone());
        // Stripe expires a session by itself when its time comes
        let clock = stripe.clone();
        tokio::spawn(async move {
            let mut tick = tokio::time::interval(Duration::from_secs(1));
            loop {
                tick.tick().await;
                clock.expire_due();
            }
        });
        let razorpay = RazorpaySandbox::new(settings, public_base);
        let data = web::Data::new(stripe.clone());
        let razorpay_data = web::Data::new(razorpay.clone());
        let mailbox = mail::MailSandbox::default();
        let mail_data = web::Data::new(mailbox.clone());
        let server = HttpServer::new(move || {
            App::new()
                .app_data(data.clone())
                .app_data(razorpay_data.clone())
                .app_data(mail_data.clone())
                .route("/mail", web::get().to(mail::inbox))
                .route("/mail/{n}", web::get().to(mail::message))
                .app_data(web::PayloadConfig::new(256 * 1024))
                .app_data(web::FormConfig::default().limit(64 * 1024))
                .service(web::scope("/stripe").configure(stripe::routes))
                .service(web::scope("/razorpay").configure(razorpay::routes))
        })
        .workers(2)
        .listen(listener)?
        .run();
        Ok(Self {
            port,
            stripe,
            razorpay,
            mail: mailbox,
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
    fn new(value: T) -> Self {
        Self(Arc::new(Mutex::new(value)))
    }

    fn with<R>(&self, f: impl FnOnce(&mut T) -> R) -> R {
        let mut guard = self
            .0
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        f(&mut guard)
    }
}

/// What the sandbox does with the webhooks of one payment (test controls).
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum DeliveryMode {
    /// Each event once, retried until it is accepted.
    Normal,
    /// Each event twice.
    Twice,
    /// Nothing is delivered: a lost webhook.
    Never,
    /// Each event a few seconds late.
    Late,
    /// Events are held back and delivered newest first once a second one
    /// exists.
    Reorder,
}

/// `?mode=…` of the delivery test control.
#[derive(Debug, serde::Deserialize)]
struct DeliveryQuery {
    mode: DeliveryMode,
}

/// `?outcome=…` of the settle test controls.
#[derive(Debug, serde::Deserialize)]
struct OutcomeQuery {
    outcome: String,
}

impl OutcomeQuery {
    /// Settle something pending as the outcome says: the provider's word
    /// for success (`succeeded` at Stripe, `processed` at Razorpay) or
    /// `failed`. 204 when done, 409 when there was nothing to settle.
    fn settle(
        &self,
        success: &str,
        settle: impl FnOnce(bool) -> Result<(), String>,
    ) -> HttpResponse {
        let succeeded = match self.outcome.as_str() {
            "failed" => false,
            word if word == success => true,
            _ => {
                return HttpResponse::BadRequest().body(format!("outcome is {success} or failed"));
            }
        };
        match settle(succeeded) {
            Ok(()) => HttpResponse::NoContent().finish(),
            Err(message) => HttpResponse::Conflict().body(message),
        }
    }
}

/// `?after_ms=N` of the refunds test control (none: never by itself).
#[derive(Debug, serde::Deserialize)]
struct AutoQuery {
    after_ms: Option<u64>,
}

impl AutoQuery {
    fn after(&self) -> Option<Duration> {
        self.after_ms.map(Duration::from_millis)
    }
}

/// How to send one new event under `mode`: which events (in order), how
/// many copies of each, after what delay. `held_back` keeps reordered events.
fn plan(
    mode: DeliveryMode,
    held_back: &mut Vec<serde_json::Value>,
    event: serde_json::Value,
) -> (Vec<serde_json::Value>, usize, Duration) {
    match mode {
        DeliveryMode::Never => (Vec::new(), 0, Duration::ZERO),
        DeliveryMode::Twice => (vec![event], 2, Duration::ZERO),
        DeliveryMode::Late => (vec![event], 1, Duration::from_secs(3)),
        DeliveryMode::Normal => (vec![event], 1, Duration::ZERO),
        DeliveryMode::Reorder => {
            held_back.push(event);
            if held_back.len() >= 2 {
                let mut events = std::mem::take(held_back);
                events.reverse();
                (events, 1, Duration::ZERO)
            } else {
                (Vec::new(), 1, Duration::ZERO)
            }
        }
    }
}

/// POST a body until the receiver answers 2xx or the attempts run out,
/// doubling the wait each time. `headers` is asked anew for each attempt
/// (Stripe signs with the time of sending). Returns each attempt's status.
async fn post_until_accepted(
    http: &reqwest::Client,
    url: &str,
    body: &str,
    headers: impl Fn() -> Vec<(&'static str, String)>,
    settings: &SandboxSettings,
    mut record: impl FnMut(Option<u16>, u32),
) {
    let mut wait = settings.retry_base;
    for attempt in 1..=settings.max_attempts {
        let mut request = http
            .post(url)
            .header("Content-Type", "application/json")
            .body(body.to_owned());
        for (name, value) in headers() {
            request = request.header(name, value);
        }
        let status = request.send().await.ok().map(|r| r.status().as_u16());
        record(status, attempt);
        if status.is_some_and(|s| (200..300).contains(&s)) {
            return;
        }
        tokio::time::sleep(wait).await;
        wait = (wait * 2).min(Duration::from_secs(60));
    }
}

/// Money as the hosted pages show it.
pub(crate) fn amount_text(minor: i64, currency: &str) -> String {
    format!(
        "{}.{:02} {}",
        minor / 100,
        minor % 100,
        escape(&currency.to_uppercase())
    )
}

pub(crate) fn random_id(prefix: &str) -> String {
    const ALPHABET: &[u8] = b"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789";
    let mut rng = rand::thread_rng();
    let tail: String = (0..24)
        .map(|_| ALPHABET[rng.gen_range(0..ALPHABET.len())] as char)
        .collect();
    format!("{prefix}_{tail}")
}

pub(crate) fn page(title: &str, body: &str) -> HttpResponse {
    HttpResponse::Ok().content_type(ContentType::html()).body(format!(
        "<!doctype html><html lang=\"en\"><head><meta charset=\"utf-8\">\
         <meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\
         <title>{title}</title><style>body{{font-family:system-ui,sans-serif;max-width:30rem;margin:2rem auto;padding:0 1rem}}\
         button{{font-size:1rem;padding:.6rem 1rem;margin:.25rem 0;width:100%}}.note{{color:#555}}</style></head>\
         <body><p class=\"note\">Holdfast payment sandbox — no real money moves.</p>{body}</body></html>"
    ))
}

pub(crate) fn escape(text: &str) -> String {
    text.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
        .replace('\'', "&#39;")
}

pub(crate) fn redirect(url: &str) -> HttpResponse {
    HttpResponse::SeeOther()
        .insert_header((header::LOCATION, url.to_owned()))
        .finish()
}
