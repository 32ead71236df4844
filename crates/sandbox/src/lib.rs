//! The provider sandbox (SPEC §5): the subsets of Stripe's and Razorpay's
//! HTTP APIs that Holdfast uses, hosted payment pages, and correctly signed
//! webhooks with retries, so that nothing needs a network. The real
//! adapters talk to it by base URL, and so can the providers' official
//! SDKs and the official Stripe CLI (`stripe listen`, `stripe events
//! resend`). It keeps its state in memory and never touches the database.
//!
//! **It refuses what the provider refuses.** Each rule it enforces is one
//! the provider documents (README, "The provider sandbox", lists them with
//! their sources): Stripe's `expires_at` bounds, idempotency keys that
//! replay their first answer and refuse other parameters, refunds that
//! finish later; Razorpay's capture settings, refund keys and their body,
//! 409 while a refund is in flight, authorised payments that stay
//! uncaptured until captured (and are given back if never), the failure
//! callback. A request it cannot read at all (bad JSON or form encoding,
//! the wrong content type, too large, an unknown URL or method, wrong keys)
//! gets the provider's error shape and status, never a dropped connection.
//!
//! Its parts: `stripe/` and `razorpay/` hold each provider's rules and
//! wire shapes (objects, requests, routes; the Stripe CLI's protocol in
//! `stripe/cli.rs`); what both share is written once: the state holder
//! (`state.rs`), webhook delivery with retries (`delivery.rs`), idempotency
//! keys (`idempotency.rs`), the ledger (`ledger.rs`), the hosted pages'
//! frame (`pages.rs`), the test controls (`controls.rs`) and the refusals
//! of unreadable requests (`dialect.rs`). [`fuzzing`] holds the checks the
//! fuzz targets run on the request parsing of both.
//!
//! Its own crate: `holdfast serve` runs it in-process when no keys are set
//! (the `sandbox` feature of the holdfast package, on by default), the
//! tests and the tools use it, and a production build can leave it out.
//! It shares no code with Holdfast's adapters: its signatures, checks and
//! HTTP client are its own, so a mistake on one side is not repeated on
//! the other.

mod controls;
mod delivery;
mod dialect;
pub mod fuzzing;
mod idempotency;
mod ledger;
pub mod mail;
mod pages;
mod razorpay;
mod signature;
mod state;
mod stripe;

use std::net::TcpListener;
use std::time::Duration;

use actix_web::dev::Server;
use actix_web::{App, HttpServer, web};
use rand::Rng;

pub use delivery::DeliveryMode;
pub use dialect::BODY_LIMIT;
pub use ledger::{Carrier, Charge, Delivery, Ledger, RefundRecord};
pub use razorpay::RazorpaySandbox;
pub use signature::Secret;
pub use stripe::StripeSandbox;
/// `stripe listen` against the sandbox: the command line to run, the
/// protocol's subprotocol.
pub use stripe::cli as stripe_cli;

/// How the sandbox is reached and what it signs with.
#[derive(Debug, Clone)]
pub struct SandboxSettings {
    /// The secret key clients must present.
    pub stripe_secret_key: Secret,
    /// The `whsec_…` secret webhooks are signed with, and the one `stripe
    /// listen` sessions get (and print).
    pub stripe_webhook_secret: Secret,
    /// Where webhooks go (Holdfast's `/webhooks/stripe`), if anywhere yet;
    /// `None`: the sandbox's own deliveries are off (`stripe listen` still
    /// gets every event).
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
                .service(web::scope("/stripe").configure(stripe::routes))
                .service(web::scope("/razorpay").configure(razorpay::routes))
                // Stripe's API at the root too, where the Stripe CLI looks
                .configure(stripe::root_routes)
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

pub(crate) fn random_id(prefix: &str) -> String {
    const ALPHABET: &[u8] = b"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789";
    let mut rng = rand::thread_rng();
    let tail: String = (0..24)
        .map(|_| ALPHABET[rng.gen_range(0..ALPHABET.len())] as char)
        .collect();
    format!("{prefix}_{tail}")
}
