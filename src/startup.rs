//! Build the web server from settings. Tests bind port 0.

use std::net::TcpListener;
use std::sync::Arc;

use actix_web::dev::Server;
use actix_web::middleware::from_fn;
use actix_web::{App, HttpServer, web};
use sqlx::PgPool;

use crate::configuration::ServerSettings;
use crate::payments::http::{TrustedRoots, client_builder};
use crate::payments::razorpay::{RazorpayProvider, RazorpaySettings};
use crate::payments::stripe::{StripeProvider, StripeSettings};
use crate::payments::{PaymentProvider, Providers};
use crate::routes;
use crate::staff::SessionKey;
use crate::state::Shop;
#[cfg(feature = "sandbox")]
use holdfast_sandbox::SandboxSettings;

/// Where each provider's API is, when no keys are set: the sandbox's
/// development keys at the sandbox's address.
#[cfg(feature = "sandbox")]
pub fn sandbox_keys(
    sandbox: &SandboxSettings,
    base: &str,
    stripe_payment_methods: Vec<String>,
) -> (StripeSettings, RazorpaySettings) {
    (
        StripeSettings {
            secret_key: crate::configuration::Secret::new(sandbox.stripe_secret_key.expose()),
            api_base: format!("{base}/stripe/"),
            webhook_secrets: vec![crate::configuration::Secret::new(
                sandbox.stripe_webhook_secret.expose(),
            )],
            payment_methods: stripe_payment_methods,
        },
        RazorpaySettings {
            key_id: sandbox.razorpay_key_id.clone(),
            key_secret: crate::configuration::Secret::new(sandbox.razorpay_key_secret.expose()),
            webhook_secrets: vec![crate::configuration::Secret::new(
                sandbox.razorpay_webhook_secret.expose(),
            )],
            api_base: format!("{base}/razorpay/"),
            checkout_script: format!("{base}/razorpay/checkout.js"),
        },
    )
}

/// The adapters for whichever providers have settings, Stripe first, each
/// with its own HTTPS client (Holdfast's TLS setup, `roots` trusted).
pub fn build_providers(
    stripe: Option<&StripeSettings>,
    razorpay: Option<&RazorpaySettings>,
    roots: &TrustedRoots,
) -> anyhow::Result<Providers> {
    let http = |timeout: std::time::Duration| -> anyhow::Result<reqwest::Client> {
        Ok(client_builder(roots).timeout(timeout).build()?)
    };
    let mut offered: Vec<Arc<dyn PaymentProvider>> = Vec::new();
    if let Some(stripe) = stripe {
        // well under the outbox's two-minute lease, so a hung call can
        // never run concurrently with its own retry
        offered.push(Arc::new(StripeProvider::new(
            stripe,
            http(std::time::Duration::from_secs(20))?,
        )?));
    }
    if let Some(razorpay) = razorpay {
        offered.push(Arc::new(RazorpayProvider::new(
            razorpay,
            http(crate::payments::razorpay::TIMEOUT)?,
        )?));
    }
    Ok(Providers::new(offered))
}

/// The providers from the environment's keys; with none at all, the
/// sandbox at `HOLDFAST_SANDBOX_ADDR` (where `holdfast serve` runs it).
pub fn configured_providers(settings: &ServerSettings) -> anyhow::Result<Providers> {
    let roots = settings.provider_roots()?;
    if settings.stripe.is_none() && settings.razorpay.is_none() {
        #[cfg(feature = "sandbox")]
        {
            let (stripe, razorpay) = sandbox_keys(
                &SandboxSettings::development(),
                &format!("http://{}", settings.sandbox_addr),
                vec!["card".into()],
            );
            return build_providers(Some(&stripe), Some(&razorpay), &roots);
        }
        #[cfg(not(feature = "sandbox"))]
        anyhow::bail!(NO_KEYS_NO_SANDBOX);
    }
    let stripe = settings.stripe.as_ref().map(|keys| StripeSettings {
        secret_key: keys.secret_key.clone(),
        api_base: keys.api_base.clone(),
        webhook_secrets: keys.webhook_secrets.clone(),
        payment_methods: keys.payment_methods.clone(),
    });
    let razorpay = settings.razorpay.as_ref().map(|keys| RazorpaySettings {
        key_id: keys.key_id.clone(),
        key_secret: keys.key_secret.clone(),
        webhook_secrets: keys.webhook_secrets.clone(),
        api_base: keys.api_base.clone(),
        checkout_script: keys.checkout_script.clone(),
    });
    build_providers(stripe.as_ref(), razorpay.as_ref(), &roots)
}

/// A server bound and ready to run, with the port it got.
pub struct Application {
    pub port: u16,
    server: Server,
}

impl Application {
    pub fn build(listener: TcpListener, shop: Shop) -> anyhow::Result<Self> {
        let port = listener.local_addr()?.port();
        let pool = web::Data::new(shop.pool.clone());
        let https = shop.secure_cookies();
        let shop = web::Data::new(shop);
        let server = HttpServer::new(move || {
            App::new()
                .wrap(from_fn(routes::edge::refuse_unstorable_text))
                .wrap(tracing_actix_web::TracingLogger::<
                    crate::telemetry::RequestSpan,
                >::new())
                .wrap(routes::security_headers(https))
                .app_data(pool.clone())
                .app_data(shop.clone())
                // request bodies are small everywhere; the webhook routes
                // read theirs with their own limit
                .app_data(web::PayloadConfig::new(64 * 1024))
                .app_data(
                    web::FormConfig::default()
                        .limit(16 * 1024)
                        .error_handler(|_, _| routes::bad_form().into()),
                )
                .app_data(
                    web::QueryConfig::default().error_handler(|_, _| routes::bad_form().into()),
                )
                .app_data(web::PathConfig::default().error_handler(|_, _| {
                    routes::ShopError::not_found("there is nothing at this address").into()
                }))
                .default_service(web::to(routes::not_found))
                .configure(routes::health::routes)
                .configure(routes::security::routes)
                .configure(routes::admin::routes)
                .configure(routes::shop::routes)
                .configure(routes::webhooks::routes)
        })
        .listen(listener)?
        .run();
        Ok(Self { port, server })
    }

    pub async fn run_until_stopped(self) -> std::io::Result<()> {
        self.server.await
    }
}

/// Everything `holdfast serve` runs: the shop, and unless told otherwise
/// the worker; with no provider keys at all, the sandbox (playing Stripe and
/// Razorpay) and the demo catalogue too.
pub async fn serve(
    settings: ServerSettings,
    pool: PgPool,
    with_worker: bool,
) -> anyhow::Result<()> {
    use anyhow::Context;

    let sandboxed = settings.stripe.is_none() && settings.razorpay.is_none();
    if sandboxed {
        sandbox_is_safe(&settings)?;
    }
    let listener = TcpListener::bind(settings.addr)
        .with_context(|| format!("cannot listen on {}", settings.addr))?;
    let payments = if sandboxed {
        run_sandbox(&settings, &pool).await?
    } else {
        configured_providers(&settings)?
    };
    if let Some(keys) = &settings.stripe
        && keys.webhook_secrets.is_empty()
    {
        tracing::warn!("no STRIPE_WEBHOOK_SECRET: every Stripe webhook will be refused");
    }
    if let Some(keys) = &settings.razorpay
        && keys.webhook_secrets.is_empty()
    {
        tracing::warn!("no RAZORPAY_WEBHOOK_SECRET: every Razorpay webhook will be refused");
    }
    if with_worker {
        spawn_worker(pool.clone(), payments.clone(), &settings, "serve")?;
    }
    let session_key = match &settings.session_key {
        Some(key) => SessionKey::new(key.clone())?,
        None if settings.base_url.starts_with("https://") => {
            anyhow::bail!(
                "HOLDFAST_SESSION_KEY must be set when the shop is served over HTTPS \
                 (at least 32 characters, the same on every web process)"
            )
        }
        None => {
            tracing::warn!(
                "HOLDFAST_SESSION_KEY is not set: staff sessions are signed with a random \
                 development key, end when this process does and do not work across servers"
            );
            eprintln!(
                "WARNING: HOLDFAST_SESSION_KEY is not set; using a random development key for staff sessions"
            );
            SessionKey::generate()
        }
    };
    let shop = Shop::from_settings(&settings, pool, payments, session_key);
    let app = Application::build(listener, shop)?;
    tracing::info!(url = %settings.base_url, "the shop is open");
    println!("Holdfast is serving the shop at {}", settings.base_url);
    app.run_until_stopped().await?;
    Ok(())
}

/// Without keys: the sandbox (playing Stripe and Razorpay, and the mail
/// server unless real mail is configured) at `HOLDFAST_SANDBOX_ADDR`, the
/// demo catalogue, and the providers pointed at the sandbox.
#[cfg(feature = "sandbox")]
async fn run_sandbox(settings: &ServerSettings, pool: &PgPool) -> anyhow::Result<Providers> {
    use anyhow::Context;

    use holdfast_sandbox::Sandbox;

    let mut sandbox_settings = SandboxSettings::development();
    sandbox_settings.stripe_webhook_url = Some(format!("{}/webhooks/stripe", settings.base_url));
    sandbox_settings.razorpay_webhook_url =
        Some(format!("{}/webhooks/razorpay", settings.base_url));
    let sandbox_listener = TcpListener::bind(settings.sandbox_addr)
        .with_context(|| format!("cannot listen on {} for the sandbox", settings.sandbox_addr))?;
    let base = format!("http://{}", settings.sandbox_addr);
    let sandbox = Sandbox::build(sandbox_listener, sandbox_settings.clone(), base.clone())?;
    // and the mail server, unless real mail is configured
    if settings.smtp_url.is_none() {
        let smtp = TcpListener::bind(settings.sandbox_smtp_addr).with_context(|| {
            format!(
                "cannot listen on {} for the sandbox's mail server",
                settings.sandbox_smtp_addr
            )
        })?;
        sandbox.mail.serve(smtp)?;
        println!("Shoppers' mail arrives at {base}/mail");
    }
    tokio::spawn(sandbox.run_until_stopped());
    let catalogue = std::path::Path::new("fixtures/catalogue.json");
    if catalogue.exists() {
        let report = crate::checkout::catalogue::CatalogueFile::read(catalogue)?
            .load_in(pool, settings.time_zone)
            .await?;
        tracing::info!(products = report.products, "demo catalogue loaded");
    }
    tracing::warn!(
        sandbox = %base,
        "no provider keys: payments go to the built-in sandbox, no real money moves"
    );
    let (stripe, razorpay) = sandbox_keys(&sandbox_settings, &base, vec!["card".into()]);
    build_providers(Some(&stripe), Some(&razorpay), &TrustedRoots::mozilla())
}

/// A build without the sandbox cannot serve without keys.
#[cfg(not(feature = "sandbox"))]
async fn run_sandbox(_: &ServerSettings, _: &PgPool) -> anyhow::Result<Providers> {
    anyhow::bail!(NO_KEYS_NO_SANDBOX)
}

#[cfg(not(feature = "sandbox"))]
const NO_KEYS_NO_SANDBOX: &str = "no provider keys are set and this build has no sandbox \
     (built without the `sandbox` feature): set STRIPE_SECRET_KEY or RAZORPAY_KEY_ID";

/// Without keys the shop takes test money from the built-in sandbox, whose
/// secrets are in the README: anyone could sign a payment. That is only
/// safe where the public cannot reach the shop (it listens on loopback and
/// is not served over HTTPS), unless `HOLDFAST_SANDBOX=1` says a public
/// demo is meant.
pub fn sandbox_is_safe(settings: &ServerSettings) -> anyhow::Result<()> {
    let private = settings.addr.ip().is_loopback() && !settings.base_url.starts_with("https://");
    if private || settings.sandbox_anywhere {
        return Ok(());
    }
    anyhow::bail!(
        "refusing to take test money from the built-in sandbox on {} ({}): set \
         STRIPE_SECRET_KEY and STRIPE_WEBHOOK_SECRET, or RAZORPAY_KEY_ID, RAZORPAY_KEY_SECRET \
         and RAZORPAY_WEBHOOK_SECRET (or HOLDFAST_SANDBOX=1 for a public demo)",
        settings.addr,
        settings.base_url
    )
}

/// The sweeper, reconciliation, the outbox and housekeeping, on a
/// schedule, until the process ends.
/// Where shoppers' mail goes: `HOLDFAST_SMTP_URL`; without it, the
/// sandbox's mail server when the sandbox stands in for the providers;
/// otherwise nowhere (with a warning: the order page still has the codes).
pub fn configured_mailer(settings: &ServerSettings) -> anyhow::Result<Option<crate::mail::Mailer>> {
    let url = match &settings.smtp_url {
        Some(url) => url.expose().to_owned(),
        None if settings.stripe.is_none() && settings.razorpay.is_none() => {
            format!("smtp://{}", settings.sandbox_smtp_addr)
        }
        None => {
            tracing::warn!("no HOLDFAST_SMTP_URL: shoppers get no e-mail");
            return Ok(None);
        }
    };
    crate::mail::Mailer::new(
        &url,
        &settings.mail_from,
        settings.time_zone,
        &settings.base_url,
    )
    .map(Some)
    .map_err(|e| anyhow::anyhow!(e))
}

pub fn spawn_worker(
    pool: PgPool,
    payments: Providers,
    settings: &ServerSettings,
    name: &str,
) -> anyhow::Result<()> {
    let mailer = configured_mailer(settings)?;
    use std::time::Duration;

    use crate::inventory::Inventory;
    use crate::worker::Sweeper;
    use crate::worker::outbox::Outbox;

    let every = Duration::from_secs(settings.sweep_every_seconds.max(1));
    tokio::spawn(
        crate::worker::housekeeping::Housekeeping::new(
            pool.clone(),
            settings.retention_days,
            settings.limits.address_rate,
        )
        .run_forever(),
    );
    let sweeper = Sweeper::new(
        Inventory::new(pool.clone()),
        format!("sweeper:{name}:{}", std::process::id()),
    );
    tokio::spawn(sweeper.run_forever(every));
    let pool_for_orders = pool.clone();
    let reconciler = crate::worker::reconcile::Reconciler::new(pool.clone(), payments.clone())
        .with_times(settings.reconcile);
    let outbox = Outbox::new(pool, payments)
        .with_lease(Duration::from_secs(settings.outbox_lease_seconds))
        .with_mailer(mailer);
    tokio::spawn(async move {
        let mut ticker = tokio::time::interval(every);
        loop {
            ticker.tick().await;
            if let Err(error) = crate::checkout::expire_abandoned_orders(&pool_for_orders).await {
                tracing::warn!(%error, "could not settle abandoned orders");
            }
            match reconciler.run_once(200).await {
                Ok(report) if report.checked > 0 => {
                    tracing::info!(?report, "reconciliation pass");
                }
                Ok(_) => {}
                Err(error) => tracing::warn!(%error, "reconciliation pass failed"),
            }
            if let Err(error) = outbox.drain().await {
                tracing::warn!(%error, "outbox pass failed");
            }
        }
    });
    Ok(())
}
