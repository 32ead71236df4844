//! Build the web server from settings. Tests bind port 0.

use std::net::TcpListener;
use std::sync::Arc;
use std::sync::atomic::AtomicU64;

use actix_web::dev::Server;
use actix_web::middleware::from_fn;
use actix_web::{App, HttpServer, web};
use sqlx::PgPool;

use crate::checkout::Provider;
use crate::configuration::{Secret, ServerSettings};
use crate::payments::razorpay::{RazorpayAdapter, RazorpaySettings};
use crate::payments::stripe::StripeAdapter;
use crate::routes::{self, admin, shop};
use crate::staff::SessionKey;

/// What every handler shares.
#[derive(Debug, Clone)]
pub struct Shop {
    pub pool: PgPool,
    /// Checkout, combined per resource where it can be.
    pub checkouts: crate::checkout::Checkouts,
    pub stripe: StripeAdapter,
    pub stripe_webhook_secret: Option<Secret>,
    /// How browsers and providers reach us, without a trailing slash.
    pub base_url: String,
    /// Life of a provider payment session.
    pub session_minutes: i64,
    pub razorpay: Option<RazorpayShop>,
    /// The providers a shopper may choose, the default first.
    pub providers: Vec<Provider>,
    /// Signs staff session cookies.
    pub session_key: SessionKey,
    /// Content Security Policy violations browsers reported.
    pub csp_reports: Arc<AtomicU64>,
}

impl Shop {
    /// Cookies are marked `Secure` when the shop is served over HTTPS.
    pub fn secure_cookies(&self) -> bool {
        self.base_url.starts_with("https://")
    }
}

/// What the shop needs for Razorpay's redirect-mode checkout.
#[derive(Debug, Clone)]
pub struct RazorpayShop {
    pub adapter: RazorpayAdapter,
    /// Signs the checkout callback (`order_id|payment_id`).
    pub key_secret: Secret,
    /// Signs webhooks.
    pub webhook_secret: Option<Secret>,
    /// Razorpay's checkout script (or the sandbox's stand-in).
    pub checkout_script: String,
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
                .route("/healthz", web::get().to(routes::healthz))
                .route("/metrics", web::get().to(routes::metrics))
                .route("/csp-report", web::post().to(routes::csp_report))
                .route("/static/razorpay.js", web::get().to(shop::razorpay_script))
                .route("/admin/login", web::get().to(admin::login_page))
                .route("/admin/login", web::post().to(admin::login))
                .service(
                    web::scope("/admin")
                        .wrap(from_fn(admin::require_staff))
                        .route("", web::get().to(admin::home))
                        .route("/", web::get().to(admin::home))
                        .route("/logout", web::post().to(admin::logout))
                        .route("/resources", web::get().to(admin::resources))
                        .route("/resources/{id}", web::get().to(admin::resource))
                        .route(
                            "/resources/{id}/capacity",
                            web::post().to(admin::set_capacity),
                        )
                        .route("/resources/{id}/repair", web::post().to(admin::repair))
                        .route("/holds", web::get().to(admin::holds))
                        .route("/holds/{id}", web::get().to(admin::hold))
                        .route("/holds/{id}/release", web::post().to(admin::release_hold))
                        .route("/orders", web::get().to(admin::orders))
                        .route("/orders/{id}", web::get().to(admin::order))
                        .route(
                            "/orders/{order}/jobs/{job}/retry",
                            web::post().to(admin::retry_refund),
                        )
                        .route("/activity", web::get().to(admin::activity)),
                )
                .route("/", web::get().to(shop::catalogue))
                .route("/c/{collection}", web::get().to(shop::collection))
                .route("/basket", web::get().to(shop::basket))
                .route("/basket/add", web::post().to(shop::add_to_basket))
                .route("/basket/remove", web::post().to(shop::remove_from_basket))
                .route("/checkout", web::post().to(shop::start_checkout))
                .route(
                    "/checkout/return/{token}",
                    web::get().to(shop::checkout_return),
                )
                .route(
                    "/checkout/cancel/{token}",
                    web::get().to(shop::checkout_cancel),
                )
                .route("/pay/razorpay/{token}", web::get().to(shop::razorpay_page))
                .route(
                    "/checkout/razorpay/callback",
                    web::post().to(shop::razorpay_callback),
                )
                .route("/orders/{token}", web::get().to(shop::order_page))
                .route("/static/shop.css", web::get().to(shop::stylesheet))
                .route("/webhooks/stripe", web::post().to(routes::stripe_webhook))
                .route(
                    "/webhooks/razorpay",
                    web::post().to(routes::razorpay_webhook),
                )
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

    use crate::payments::sandbox::{Sandbox, SandboxSettings};
    use crate::payments::stripe::StripeSettings;

    let listener = TcpListener::bind(settings.addr)
        .with_context(|| format!("cannot listen on {}", settings.addr))?;
    let sandboxed = settings.stripe.is_none() && settings.razorpay.is_none();
    let mut stripe_webhook_secret = None;
    let mut razorpay = None;
    let mut providers = Vec::new();
    let stripe_settings = if sandboxed {
        let mut sandbox_settings = SandboxSettings::development();
        sandbox_settings.stripe_webhook_url =
            Some(format!("{}/webhooks/stripe", settings.base_url));
        sandbox_settings.razorpay_webhook_url =
            Some(format!("{}/webhooks/razorpay", settings.base_url));
        let sandbox_listener = TcpListener::bind(settings.sandbox_addr).with_context(|| {
            format!("cannot listen on {} for the sandbox", settings.sandbox_addr)
        })?;
        let sandbox = Sandbox::build(
            sandbox_listener,
            sandbox_settings.clone(),
            format!("http://{}", settings.sandbox_addr),
        )?;
        let stripe_base = sandbox.stripe.api_base();
        razorpay = Some(RazorpayShop {
            adapter: RazorpayAdapter::new(&RazorpaySettings {
                key_id: sandbox_settings.razorpay_key_id.clone(),
                key_secret: sandbox_settings.razorpay_key_secret.clone(),
                api_base: sandbox.razorpay.api_base(),
            })?,
            key_secret: sandbox_settings.razorpay_key_secret.clone(),
            webhook_secret: Some(sandbox_settings.razorpay_webhook_secret.clone()),
            checkout_script: sandbox.razorpay.checkout_script_url(),
        });
        tokio::spawn(sandbox.run_until_stopped());
        let catalogue = std::path::Path::new("fixtures/catalogue.json");
        if catalogue.exists() {
            let report = crate::checkout::catalogue::CatalogueFile::read(catalogue)?
                .load(&pool)
                .await?;
            tracing::info!(products = report.products, "demo catalogue loaded");
        }
        tracing::warn!(
            sandbox = %stripe_base,
            "no provider keys: payments go to the built-in sandbox, no real money moves"
        );
        stripe_webhook_secret = Some(sandbox_settings.stripe_webhook_secret.clone());
        providers.push(Provider::Stripe);
        StripeSettings {
            secret_key: sandbox_settings.stripe_secret_key,
            api_base: stripe_base,
        }
    } else {
        if let Some(keys) = &settings.razorpay {
            razorpay = Some(RazorpayShop {
                adapter: RazorpayAdapter::new(&RazorpaySettings {
                    key_id: keys.key_id.clone(),
                    key_secret: keys.key_secret.clone(),
                    api_base: keys.api_base.clone(),
                })?,
                key_secret: keys.key_secret.clone(),
                webhook_secret: keys.webhook_secret.clone(),
                checkout_script: keys.checkout_script.clone(),
            });
        }
        match &settings.stripe {
            Some(keys) => {
                stripe_webhook_secret = keys.webhook_secret.clone();
                providers.push(Provider::Stripe);
                StripeSettings {
                    secret_key: keys.secret_key.clone(),
                    api_base: keys.api_base.clone(),
                }
            }
            // not offered: an adapter nobody calls
            None => StripeSettings {
                secret_key: Secret::new("sk_unused"),
                api_base: "https://api.stripe.com/".into(),
            },
        }
    };
    if providers.contains(&Provider::Stripe) && stripe_webhook_secret.is_none() {
        tracing::warn!("no STRIPE_WEBHOOK_SECRET: every Stripe webhook will be refused");
    }
    if let Some(razorpay) = &razorpay {
        providers.push(Provider::Razorpay);
        if razorpay.webhook_secret.is_none() {
            tracing::warn!("no RAZORPAY_WEBHOOK_SECRET: every Razorpay webhook will be refused");
        }
    }
    let stripe = StripeAdapter::new(&stripe_settings)?;
    if with_worker {
        spawn_worker(
            pool.clone(),
            stripe.clone(),
            razorpay.as_ref().map(|r| r.adapter.clone()),
            settings.sweep_every_seconds,
            settings.reconcile,
            settings.outbox_lease_seconds,
            "serve",
        );
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
    let shop = Shop {
        checkouts: crate::checkout::Checkouts::new(pool.clone()),
        pool,
        stripe,
        stripe_webhook_secret,
        base_url: settings.base_url.clone(),
        session_minutes: settings.session_minutes,
        razorpay,
        providers,
        session_key,
        csp_reports: Arc::default(),
    };
    let app = Application::build(listener, shop)?;
    tracing::info!(url = %settings.base_url, "the shop is open");
    println!("Holdfast is serving the shop at {}", settings.base_url);
    app.run_until_stopped().await?;
    Ok(())
}

/// The sweeper, reconciliation and the outbox, on a schedule, until the process ends.
pub fn spawn_worker(
    pool: PgPool,
    stripe: StripeAdapter,
    razorpay: Option<RazorpayAdapter>,
    every_seconds: u64,
    reconcile: crate::worker::reconcile::ReconcileTimes,
    outbox_lease_seconds: u64,
    name: &str,
) {
    use std::time::Duration;

    use crate::inventory::Inventory;
    use crate::worker::Sweeper;
    use crate::worker::outbox::Outbox;

    let every = Duration::from_secs(every_seconds.max(1));
    let sweeper = Sweeper::new(
        Inventory::new(pool.clone()),
        format!("sweeper:{name}:{}", std::process::id()),
    );
    tokio::spawn(sweeper.run_forever(every));
    let pool_for_orders = pool.clone();
    let reconciler =
        crate::worker::reconcile::Reconciler::new(pool.clone(), stripe.clone(), razorpay.clone())
            .with_times(reconcile);
    let outbox = Outbox::new(pool, stripe)
        .with_razorpay(razorpay)
        .with_lease(Duration::from_secs(outbox_lease_seconds));
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
}
