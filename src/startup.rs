//! Build the web server from settings. Tests bind port 0.

use std::net::TcpListener;

use actix_web::dev::Server;
use actix_web::middleware::from_fn;
use actix_web::{App, HttpServer, web};
use sqlx::PgPool;

use crate::configuration::ServerSettings;
use crate::keys::SessionKey;
use crate::payments::{ProviderSettings, Providers};
use crate::routes;
use crate::state::Shop;
#[cfg(feature = "sandbox")]
use holdfast_sandbox::SandboxSettings;

/// The providers from their settings; with no keys at all, the sandbox at
/// `HOLDFAST_SANDBOX_ADDR` (where `holdfast serve` runs it), for a worker
/// beside such a shop.
pub fn configured_providers(
    settings: &ServerSettings,
    providers: &ProviderSettings,
) -> anyhow::Result<Providers> {
    if providers.is_empty() {
        #[cfg(feature = "sandbox")]
        {
            return Providers::build(&crate::payments::default_sandbox_settings(
                &SandboxSettings::development(),
                &format!("http://{}", settings.sandbox_addr),
            ));
        }
        #[cfg(not(feature = "sandbox"))]
        {
            let _ = settings;
            anyhow::bail!(NO_KEYS_NO_SANDBOX);
        }
    }
    Providers::build(providers)
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
                .wrap(from_fn(routes::edge::one_moment))
                .wrap(from_fn(routes::edge::refuse_unstorable_text))
                .wrap(tracing_actix_web::TracingLogger::<
                    crate::telemetry::RequestSpan,
                >::new())
                .wrap(routes::security_headers(https))
                // outermost: the "one moment" page is in the shop's name too
                .wrap(from_fn(routes::edge::storefront))
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
                .configure(routes::api::routes)
                .configure(routes::shop::routes)
                .configure(routes::seats::routes)
                .configure(routes::tables::routes)
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
/// the worker; with no provider keys at all, the sandbox (playing every
/// provider) and the demo catalogue too.
pub async fn serve(
    settings: ServerSettings,
    providers: ProviderSettings,
    pool: PgPool,
    with_worker: bool,
) -> anyhow::Result<()> {
    use anyhow::Context;

    let sandboxed = providers.is_empty();
    if sandboxed {
        sandbox_is_safe(&settings)?;
    }
    let listener = TcpListener::bind(settings.addr)
        .with_context(|| format!("cannot listen on {}", settings.addr))?;
    let payments = if sandboxed {
        run_sandbox(&settings, &pool).await?
    } else {
        Providers::build(&providers)?
    };
    for warning in providers.warnings() {
        tracing::warn!("{warning}");
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
    if with_worker {
        spawn_worker(
            pool.clone(),
            payments.clone(),
            &settings,
            sandboxed,
            "serve",
            &session_key,
        )?;
    }
    let shop = Shop::from_settings(&settings, pool, payments, session_key);
    let app = Application::build(listener, shop)?;
    tracing::info!(url = %settings.base_url, "the shop is open");
    println!("Holdfast is serving the shop at {}", settings.base_url);
    app.run_until_stopped().await?;
    Ok(())
}

/// Without keys: the sandbox (playing every provider, and the mail server
/// unless real mail is configured) at `HOLDFAST_SANDBOX_ADDR`, the
/// demo catalogue in a shop that sells nothing yet, and the providers
/// pointed at the sandbox.
#[cfg(feature = "sandbox")]
async fn run_sandbox(settings: &ServerSettings, pool: &PgPool) -> anyhow::Result<Providers> {
    use anyhow::Context;

    use holdfast_sandbox::Sandbox;

    let mut sandbox_settings = SandboxSettings::development();
    crate::payments::point_sandbox_at(&mut sandbox_settings, &settings.base_url);
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
    for hint in crate::payments::sandbox_hints(&sandbox, &settings.base_url) {
        println!("{hint}");
    }
    tokio::spawn(sandbox.run_until_stopped());
    // the demo goes into an empty shop only: once staff sell anything,
    // a restart leaves what they changed as they left it
    let catalogue = std::path::Path::new("fixtures/catalogue.json");
    if catalogue.exists() && crate::catalogue::sells_nothing(pool).await? {
        let report = crate::catalogue::CatalogueFile::read(catalogue)?
            .load_in(pool, settings.time_zone)
            .await?;
        tracing::info!(products = report.products, "demo catalogue loaded");
    }
    tracing::warn!(
        sandbox = %base,
        "no provider keys: payments go to the built-in sandbox, no real money moves"
    );
    // each provider's default ways of paying, as against the real ones
    Providers::build(&crate::payments::default_sandbox_settings(
        &sandbox_settings,
        &base,
    ))
}

/// A build without the sandbox cannot serve without keys.
#[cfg(not(feature = "sandbox"))]
async fn run_sandbox(_: &ServerSettings, _: &PgPool) -> anyhow::Result<Providers> {
    anyhow::bail!(NO_KEYS_NO_SANDBOX)
}

#[cfg(not(feature = "sandbox"))]
const NO_KEYS_NO_SANDBOX: &str = "no provider keys are set and this build has no sandbox \
     (built without the `sandbox` feature): set a provider's keys (docs/providers.md)";

/// Without keys the shop takes test money from the built-in sandbox, whose
/// secrets are published (docs/sandbox.md): anyone could sign a payment. That is only
/// safe where the public cannot reach the shop (it listens on loopback and
/// is not served over HTTPS), unless `HOLDFAST_SANDBOX=1` says a public
/// demo is meant.
pub fn sandbox_is_safe(settings: &ServerSettings) -> anyhow::Result<()> {
    let private = settings.addr.ip().is_loopback() && !settings.base_url.starts_with("https://");
    if private || settings.sandbox_anywhere {
        return Ok(());
    }
    anyhow::bail!(
        "refusing to take test money from the built-in sandbox on {} ({}): set {} \
         (or HOLDFAST_SANDBOX=1 for a public demo)",
        settings.addr,
        settings.base_url,
        ProviderSettings::KEYS_TO_SET,
    )
}

/// Where shoppers' mail goes: `HOLDFAST_SMTP_URL`; without it, the
/// sandbox's mail server when the sandbox stands in for the providers;
/// otherwise nowhere (with a warning: the order page still has the codes).
pub fn configured_mailer(
    settings: &ServerSettings,
    sandboxed: bool,
) -> anyhow::Result<Option<crate::worker::mail::Mailer>> {
    let url = match &settings.smtp_url {
        Some(url) => url.expose().to_owned(),
        None if sandboxed => {
            format!("smtp://{}", settings.sandbox_smtp_addr)
        }
        None => {
            tracing::warn!("no HOLDFAST_SMTP_URL: shoppers get no e-mail");
            return Ok(None);
        }
    };
    crate::worker::mail::Mailer::new(
        &url,
        &settings.mail_from,
        settings.time_zone,
        &settings.base_url,
    )
    .map(Some)
    .map_err(|e| anyhow::anyhow!(e))
}

/// The sweeper, reconciliation, the outbox and housekeeping, on a
/// schedule, until the process ends.
pub fn spawn_worker(
    pool: PgPool,
    payments: Providers,
    settings: &ServerSettings,
    sandboxed: bool,
    name: &str,
    // opens outgoing webhooks' secrets: the web processes' key
    session_key: &SessionKey,
) -> anyhow::Result<()> {
    let mailer = configured_mailer(settings, sandboxed)?;
    use std::time::Duration;

    use crate::inventory::Inventory;
    use crate::worker::Sweeper;
    use crate::worker::outbox::{Lane, Outbox};
    /// Webhook deliveries a worker process runs at once.
    const WEBHOOK_DELIVERERS: usize = 4;

    let every = Duration::from_secs(settings.sweep_every_seconds.max(1));
    tokio::spawn(
        crate::worker::housekeeping::Housekeeping::new(
            pool.clone(),
            settings.retention_days,
            settings.limits.address_rate,
        )
        .run_forever(),
    );
    tokio::spawn(crate::worker::schedules::run_forever(
        pool.clone(),
        settings.time_zone,
    ));
    let sweeper = Sweeper::new(
        Inventory::new(pool.clone()),
        format!("sweeper:{name}:{}", std::process::id()),
    );
    tokio::spawn(sweeper.run_forever(every));
    let pool_for_orders = pool.clone();
    let reconciler = crate::worker::reconcile::Reconciler::new(pool.clone(), payments.clone())
        .with_times(settings.reconcile);
    let deliveries = crate::outgoing::Deliveries::new(
        pool.clone(),
        session_key.clone(),
        settings.webhooks_allow_private,
    );
    let outbox = Outbox::new(pool, payments)
        .with_lease(Duration::from_secs(settings.outbox_lease_seconds))
        .with_mailer(mailer)
        .with_webhooks(deliveries);
    let webhook_outbox = outbox.clone();
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
            if let Err(error) = outbox.drain_lane(Lane::Shop).await {
                tracing::warn!(%error, "outbox pass failed");
            }
        }
    });
    // outgoing webhooks in a lane of their own, a few at once, so neither
    // a dead receiver nor a backlog of events holds up the shop's own jobs
    for _ in 0..WEBHOOK_DELIVERERS {
        let outbox = webhook_outbox.clone();
        tokio::spawn(async move {
            let mut ticker = tokio::time::interval(every);
            loop {
                ticker.tick().await;
                if let Err(error) = outbox.drain_lane(Lane::Webhooks).await {
                    tracing::warn!(%error, "webhook delivery pass failed");
                }
            }
        });
    }
    Ok(())
}
