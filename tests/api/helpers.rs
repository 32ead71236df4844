//! Spawning the real thing: a fresh migrated database per test (cloned from a
//! migrated template in the same PostgreSQL server the app uses) and the
//! HTTP server on port 0.

use std::net::TcpListener;
use std::sync::OnceLock;

use holdfast::configuration::DatabaseSettings;
use holdfast::database::{self, MIGRATOR, quote_identifier};
use holdfast::inventory::{
    AccountId, Capacity, HoldOutcome, HoldRequest, Inventory, InventorySettings, Quantity,
    ResourceId, Span,
};
use holdfast::startup::Application;
use sqlx::postgres::PgConnectOptions;
use sqlx::{Connection, PgPool};
use uuid::Uuid;

/// The server's admin URL, resolved once per test process.
static SERVER: OnceLock<String> = OnceLock::new();

fn init_logs() {
    if std::env::var("TEST_LOG").is_ok() {
        holdfast::telemetry::init("info");
    }
}

/// The repository's root: the product's package, and the folder above the
/// tools' (which share these helpers and the one private cluster).
pub fn workspace_root() -> std::path::PathBuf {
    std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .ancestors()
        .find(|dir| dir.join("migrations").is_dir())
        .expect("the repository holds migrations/")
        .to_path_buf()
}

async fn admin_url() -> String {
    if let Some(url) = SERVER.get() {
        return url.clone();
    }
    let mut settings = DatabaseSettings::from_env().expect("settings");
    if std::env::var("HOLDFAST_HOME").is_err() {
        settings.home = workspace_root().join(".holdfast");
    }
    // the tests' databases live next to the application's, in the same server
    settings.local_database = "postgres".into();
    let url = database::resolve_url(&settings)
        .await
        .expect("PostgreSQL must be reachable for the tests")
        .expose()
        .to_owned();
    SERVER.get_or_init(|| url).clone()
}

fn with_database(url: &str, name: &str) -> PgConnectOptions {
    url.parse::<PgConnectOptions>()
        .expect("admin url")
        .database(name)
}

/// Name of the template for the current migrations, so a changed migration
/// gets a new template rather than a stale one.
fn template_name() -> String {
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    for migration in MIGRATOR.iter() {
        for byte in migration.checksum.iter() {
            hash ^= u64::from(*byte);
            hash = hash.wrapping_mul(0x0100_0000_01b3);
        }
    }
    format!("holdfast_tpl_{hash:016x}")
}

async fn ensure_template(admin: &PgPool) -> String {
    let template = template_name();
    let mut conn = admin.acquire().await.expect("admin connection");
    // one process builds the template; the others wait for it
    sqlx::query("select pg_advisory_lock(727274)")
        .execute(&mut *conn)
        .await
        .expect("template lock");
    let exists: bool =
        sqlx::query_scalar("select exists (select 1 from pg_database where datname = $1)")
            .bind(&template)
            .fetch_one(&mut *conn)
            .await
            .expect("template lookup");
    if !exists {
        let building = format!("{template}_building");
        sqlx::query(&format!(
            "drop database if exists {}",
            quote_identifier(&building)
        ))
        .execute(&mut *conn)
        .await
        .expect("drop stale template");
        sqlx::query(&format!("create database {}", quote_identifier(&building)))
            .execute(&mut *conn)
            .await
            .expect("create template");
        let url = admin_url().await;
        // one plain connection, closed explicitly: a pool's connection can
        // outlive pool.close() for a while, and a rename waits for none
        let mut migrating = sqlx::PgConnection::connect_with(&with_database(&url, &building))
            .await
            .expect("connect template");
        database::migrate(&mut migrating)
            .await
            .expect("migrate template");
        migrating.close().await.expect("close template connection");
        let rename = format!(
            "alter database {} rename to {}",
            quote_identifier(&building),
            quote_identifier(&template)
        );
        let mut tries = 0;
        loop {
            // nobody else may use the database being built (we hold the
            // template lock): end any session still on its way out
            sqlx::query(
                "select pg_terminate_backend(pid) from pg_stat_activity \
                  where datname = $1 and pid <> pg_backend_pid()",
            )
            .bind(&building)
            .execute(&mut *conn)
            .await
            .expect("end stray sessions");
            match sqlx::query(&rename).execute(&mut *conn).await {
                Ok(_) => break,
                // 55006: "being accessed by other users"
                Err(sqlx::Error::Database(e))
                    if e.code().as_deref() == Some("55006") && tries < 5 =>
                {
                    tries += 1;
                }
                Err(error) => panic!("publish template: {error}"),
            }
        }
    }
    sqlx::query("select pg_advisory_unlock(727274)")
        .execute(&mut *conn)
        .await
        .expect("template unlock");
    template
}

/// A fresh, migrated database of its own, dropped when the test ends.
pub struct TestDb {
    pub pool: PgPool,
    pub name: String,
    pub url: String,
    admin_url: String,
}

impl TestDb {
    pub async fn new() -> Self {
        Self::with_connections(20).await
    }

    pub async fn with_connections(max: u32) -> Self {
        init_logs();
        let admin_url = admin_url().await;
        let admin = PgPool::connect(&admin_url).await.expect("admin pool");
        let template = ensure_template(&admin).await;
        let name = format!("t_{}", Uuid::new_v4().simple());
        sqlx::query(&format!(
            "create database {} template {}",
            quote_identifier(&name),
            quote_identifier(&template)
        ))
        .execute(&admin)
        .await
        .expect("create test database");
        admin.close().await;
        let pool = sqlx::postgres::PgPoolOptions::new()
            .max_connections(max)
            .acquire_timeout(std::time::Duration::from_secs(60))
            .connect_with(with_database(&admin_url, &name))
            .await
            .expect("test pool");
        let url = with_database_url(&admin_url, &name);
        Self {
            pool,
            name,
            url,
            admin_url,
        }
    }

    pub fn inventory(&self) -> Inventory {
        Inventory::new(self.pool.clone())
    }
}

fn with_database_url(admin_url: &str, name: &str) -> String {
    match admin_url.rsplit_once('/') {
        Some((server, _)) => format!("{server}/{name}"),
        None => format!("{admin_url}/{name}"),
    }
}

impl Drop for TestDb {
    fn drop(&mut self) {
        let (admin_url, name) = (self.admin_url.clone(), self.name.clone());
        // Drop runs inside the test's runtime: do the async work elsewhere.
        let _ = std::thread::spawn(move || {
            let runtime = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .expect("runtime");
            runtime.block_on(async move {
                if let Ok(admin) = PgPool::connect(&admin_url).await {
                    let _ = sqlx::query(&format!(
                        "drop database if exists {} with (force)",
                        quote_identifier(&name)
                    ))
                    .execute(&admin)
                    .await;
                    admin.close().await;
                }
            });
        })
        .join();
    }
}

/// The shop on a random port against its own database and its own sandbox,
/// with the sandbox's webhooks pointed at the shop.
pub struct TestApp {
    pub address: String,
    pub db: TestDb,
    pub sandbox: TestSandbox,
    /// A shopper's browser: keeps cookies, does not follow redirects.
    pub client: reqwest::Client,
    /// Content Security Policy violations browsers reported to the shop.
    pub csp_reports: std::sync::Arc<std::sync::atomic::AtomicU64>,
    /// The shop's stock in memory.
    pub live: holdfast::live::LiveStock,
    /// The shop's webhooks (their combined confirmations).
    pub webhooks: holdfast::webhooks::Webhooks,
}

pub async fn spawn_app() -> TestApp {
    spawn_app_with(TestDb::new().await).await
}

pub async fn spawn_app_with(db: TestDb) -> TestApp {
    spawn_app_shaped(db, |_, _| {}).await
}

/// [`spawn_app_with`], with the shop changed before it opens (other keys,
/// other settings).
pub async fn spawn_app_shaped(
    db: TestDb,
    shape: impl FnOnce(&TestSandbox, &mut holdfast::state::Shop),
) -> TestApp {
    let sandbox = spawn_sandbox();
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind port 0");
    let address = format!("http://127.0.0.1:{}", listener.local_addr().unwrap().port());
    sandbox
        .stripe
        .set_webhook_url(format!("{address}/webhooks/stripe"));
    sandbox
        .razorpay
        .set_webhook_url(format!("{address}/webhooks/razorpay"));
    let mut shop =
        holdfast::state::Shop::local(db.pool.clone(), sandbox.providers(), address.clone());
    // the tests count gauges exactly, before and after what they do
    shop.metrics = holdfast::metrics::Exporter::new(None).fresh_for(std::time::Duration::ZERO);
    let csp_reports = shop.csp_reports.clone();
    shape(&sandbox, &mut shop);
    let live = shop.live.clone();
    let webhooks = shop.webhooks.clone();
    let app = Application::build(listener, shop).expect("build app");
    tokio::spawn(app.run_until_stopped());
    TestApp {
        address,
        db,
        sandbox,
        client: browser(),
        csp_reports,
        live,
        webhooks,
    }
}

/// A new shopper: own cookie jar, redirects left to the test.
pub fn browser() -> reqwest::Client {
    http_builder().cookie_store(true).build().expect("client")
}

/// A new shopper whose connections come from `ip` (another 127.x.y.z
/// address is another client to the shop's limits).
pub fn browser_from(ip: std::net::IpAddr) -> reqwest::Client {
    http_builder()
        .cookie_store(true)
        .local_address(ip)
        .build()
        .expect("client")
}

/// An HTTP client with Holdfast's TLS setup (rustls with aws-lc-rs, the
/// only crypto backend built), redirects left to the test.
pub fn http_builder() -> reqwest::ClientBuilder {
    holdfast::payments::http::client_builder(&holdfast::payments::http::TrustedRoots::mozilla())
}

/// [`http_builder`], built.
pub fn http_client() -> reqwest::Client {
    http_builder().build().expect("client")
}

pub fn rid(id: &str) -> ResourceId {
    ResourceId::parse(id).expect("resource id")
}

pub fn account(id: &str) -> AccountId {
    AccountId::parse(id).expect("account id")
}

pub fn qty(n: i64) -> Quantity {
    Quantity::parse(n).expect("qty")
}

pub async fn resource(inventory: &Inventory, id: &str, total: i64) -> ResourceId {
    let id = rid(id);
    inventory
        .upsert_resource(&id, Capacity::parse(total).expect("total"))
        .await
        .expect("upsert resource");
    id
}

pub fn request(resource: &ResourceId, n: i64, who: &str) -> HoldRequest {
    HoldRequest {
        resource: resource.clone(),
        qty: qty(n),
        account: account(who),
        idempotency_key: None,
        ttl: None,
    }
}

/// Hold and insist it was granted.
pub async fn hold_ok(inventory: &Inventory, request: &HoldRequest) -> holdfast::inventory::Hold {
    match inventory.hold(request).await.expect("hold") {
        HoldOutcome::Held { hold, .. } => hold,
        other => panic!("expected a hold, got {other:?}"),
    }
}

pub fn ttl(seconds: f64) -> Span {
    Span::parse("ttl", std::time::Duration::from_secs_f64(seconds)).expect("ttl")
}

/// Short TTL and payment window, for tests that wait for expiry.
pub async fn fast_clock(inventory: &Inventory, ttl_seconds: f64, window_seconds: f64) {
    let current = inventory.settings().await.expect("settings");
    inventory
        .configure(&InventorySettings {
            hold_ttl_seconds: ttl_seconds,
            payment_window_seconds: window_seconds,
            ..current
        })
        .await
        .expect("configure");
}

/// Every resource's counters agree with its rows.
pub async fn assert_no_drift(inventory: &Inventory) {
    let rows = inventory.check(None).await.expect("check");
    let drifted: Vec<_> = rows.iter().filter(|r| r.drift).collect();
    assert!(drifted.is_empty(), "drift: {drifted:?}");
}

/// The provider sandbox on a random port, and a Stripe adapter pointed at it.
pub struct TestSandbox {
    pub base: String,
    pub stripe: holdfast_sandbox::StripeSandbox,
    pub razorpay: holdfast_sandbox::RazorpaySandbox,
    pub settings: holdfast_sandbox::SandboxSettings,
    /// The sandbox's mailbox; its SMTP server starts with [`TestSandbox::smtp`].
    pub mail: holdfast_sandbox::mail::MailSandbox,
}

impl TestSandbox {
    /// Start the sandbox's mail server on a free port: its `smtp://` URL.
    pub fn smtp(&self) -> String {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind port 0");
        let addr = self.mail.serve(listener).expect("the mail server");
        format!("smtp://{addr}")
    }

    /// Where the shop's Stripe adapter finds this sandbox, and its keys.
    pub fn stripe_settings(&self) -> holdfast::payments::stripe::StripeSettings {
        self.provider_settings()
            .stripe
            .expect("the sandbox plays Stripe")
    }

    /// Where the shop's Razorpay adapter finds this sandbox, and its keys.
    pub fn razorpay_settings(&self) -> holdfast::payments::razorpay::RazorpaySettings {
        self.provider_settings()
            .razorpay
            .expect("the sandbox plays Razorpay")
    }

    /// Every provider pointed at this sandbox, with its keys.
    pub fn provider_settings(&self) -> holdfast::payments::ProviderSettings {
        holdfast::payments::sandbox_settings(&self.settings, &self.base, vec!["card".into()])
    }

    /// The real Stripe adapter, pointed at this sandbox.
    pub fn stripe_provider(&self) -> holdfast::payments::stripe::StripeProvider {
        holdfast::payments::stripe::StripeProvider::new(&self.stripe_settings(), http_client())
            .expect("stripe adapter")
    }

    /// The real Razorpay adapter, pointed at this sandbox.
    pub fn razorpay_provider(&self) -> holdfast::payments::razorpay::RazorpayProvider {
        holdfast::payments::razorpay::RazorpayProvider::new(
            &self.razorpay_settings(),
            http_client(),
        )
        .expect("razorpay adapter")
    }

    /// Every adapter, Stripe first, as a shop with every provider's keys
    /// has them.
    pub fn providers(&self) -> holdfast::payments::Providers {
        holdfast::payments::Providers::build(&self.provider_settings()).expect("providers")
    }
}

pub fn spawn_sandbox() -> TestSandbox {
    use holdfast_sandbox::{Sandbox, SandboxSettings};
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind port 0");
    let base = format!("http://127.0.0.1:{}", listener.local_addr().unwrap().port());
    let mut settings = SandboxSettings::development();
    settings.retry_base = std::time::Duration::from_millis(50);
    settings.refunds_settle_after = Some(std::time::Duration::from_millis(50));
    let sandbox = Sandbox::build(listener, settings.clone(), base.clone()).expect("sandbox");
    let stripe = sandbox.stripe.clone();
    let razorpay = sandbox.razorpay.clone();
    let mail = sandbox.mail.clone();
    tokio::spawn(sandbox.run_until_stopped());
    TestSandbox {
        mail,
        base,
        stripe,
        razorpay,
        settings,
    }
}

impl TestApp {
    /// The shopper leaves checkout as a browser does: the provider sends
    /// them to the cancel URL, which asks; they press "Leave checkout".
    /// The POST's answer.
    pub async fn leave(&self, shopper: &reqwest::Client, cancel_url: &str) -> reqwest::Response {
        let asked = shopper.get(cancel_url).send().await.unwrap();
        assert_eq!(asked.status(), 200, "GET {cancel_url}");
        let page = asked.text().await.unwrap();
        assert!(page.contains("Leave checkout?"), "{page}");
        shopper.post(cancel_url).send().await.unwrap()
    }

    pub async fn order_state(&self, token: &str) -> String {
        sqlx::query_scalar("select state::text from orders where token = $1")
            .bind(token)
            .fetch_one(&self.db.pool)
            .await
            .unwrap()
    }

    /// Wait (five seconds at most) for an order to reach `state`.
    pub async fn wait_for_state(&self, token: &str, state: &str) {
        for _ in 0..100 {
            if self.order_state(token).await == state {
                return;
            }
            tokio::time::sleep(std::time::Duration::from_millis(50)).await;
        }
        panic!(
            "order never reached {state}: it is {}",
            self.order_state(token).await
        );
    }
}

/// Where a redirect points.
pub fn location(response: &reqwest::Response) -> String {
    response.headers()["location"].to_str().unwrap().to_owned()
}

/// Wait (five seconds at most) until `n` webhook deliveries in a sandbox
/// ledger were accepted by the shop.
pub async fn wait_for_accepted(ledger: impl Fn() -> holdfast_sandbox::Ledger, n: usize) {
    for _ in 0..100 {
        if ledger()
            .deliveries
            .iter()
            .filter(|d| d.status == Some(200))
            .count()
            >= n
        {
            return;
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    panic!("webhooks were not accepted: {:?}", ledger().deliveries);
}

/// A form field's value on a page (`name="…" value="…"`), `&amp;` decoded.
pub fn field(page: &str, name: &str) -> String {
    try_field(page, name).unwrap_or_else(|| panic!("no {name} in {page}"))
}

/// [`field`], when the page may not have it.
pub fn try_field(page: &str, name: &str) -> Option<String> {
    let marker = format!("name=\"{name}\" value=\"");
    let start = page.find(&marker)? + marker.len();
    let end = page[start..].find('"')? + start;
    Some(page[start..end].replace("&amp;", "&"))
}

/// A resource's (held, sold) counters.
pub async fn held_and_sold(db: &TestDb, resource: &str) -> (i32, i32) {
    let status = db
        .inventory()
        .status(&rid(resource))
        .await
        .unwrap()
        .unwrap_or_else(|| panic!("no resource {resource}"));
    (status.held, status.sold)
}

/// A captured payment that is exactly what the order asks for: its
/// provider, its page, its amount and currency.
pub async fn payment_for(
    pool: &PgPool,
    order_id: Uuid,
    payment_ref: &str,
) -> holdfast::payments::ProviderPayment {
    let order = holdfast::checkout::order_by_id(pool, order_id)
        .await
        .unwrap()
        .unwrap_or_else(|| panic!("no order {order_id}"));
    holdfast::payments::ProviderPayment {
        provider: order.provider,
        payment_ref: payment_ref.to_owned(),
        page_id: order.provider_session_id.clone(),
        amount_minor: order.amount_minor,
        currency: order.currency.clone(),
        status: holdfast::payments::PaymentStatus::Captured,
        order_hint: Some(order.id),
    }
}

/// A release of an order's units, as a provider's expiry event asks for.
pub fn expired_by_provider() -> holdfast::checkout::Release<'static> {
    holdfast::checkout::Release::PageEnded {
        provider: holdfast::payments::ProviderKind::Stripe,
        event: "checkout.session.expired",
        end: holdfast::payments::PageEnd::Expired,
    }
}

/// The worker's outbox until nothing is due and no refund is still
/// pending at the provider (the sandbox finishes refunds a moment after
/// it accepts them, as banks do): each pass asks a pending refund again by
/// its id, and a refund that failed for any other reason (a connection the
/// sandbox closed as it was reused) is tried again at once rather than
/// after its backoff. Five seconds at most.
pub async fn drain_outbox(
    pool: &PgPool,
    payments: holdfast::payments::Providers,
) -> Vec<holdfast::worker::outbox::JobOutcome> {
    use holdfast::worker::outbox::{JobOutcome, Outbox};
    let outbox = Outbox::new(pool.clone(), payments);
    let mut all = Vec::new();
    for _ in 0..100 {
        let outcomes = outbox.drain().await.expect("outbox");
        let failed = outcomes
            .iter()
            .any(|o| matches!(o, JobOutcome::Failed { kind, .. } if kind == "refund"));
        all.extend(outcomes);
        // a pass that ran nothing is not the end: a refund event being
        // applied holds its job's row, and the worker skips locked jobs
        let pending: i64 = sqlx::query_scalar(
            "select count(*) from outbox_jobs where state = 'pending' and kind = 'refund'",
        )
        .fetch_one(pool)
        .await
        .unwrap();
        if !failed && pending == 0 {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
        // the backoff is over: ask again now
        sqlx::query(
            "update outbox_jobs set run_after = now() where state = 'pending' and kind = 'refund'",
        )
        .execute(pool)
        .await
        .unwrap();
    }
    all
}

/// A test certificate authority, and an HTTPS server of its signing in
/// front of a plain HTTP one (the sandbox): what a provider's TLS looks
/// like to an adapter told to trust that authority.
pub struct TlsFront {
    /// `https://127.0.0.1:<port>`
    pub base: String,
    /// The authority's certificate, PEM.
    pub authority_pem: String,
}

pub async fn tls_front(plain_base: &str) -> TlsFront {
    use rcgen::{
        BasicConstraints, CertificateParams, CertifiedIssuer, DnType, IsCa, KeyPair,
        KeyUsagePurpose,
    };
    use std::sync::Arc;

    let mut authority = CertificateParams::new(Vec::<String>::new()).unwrap();
    authority.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    authority
        .distinguished_name
        .push(DnType::CommonName, "Holdfast test authority");
    authority.key_usages = vec![
        KeyUsagePurpose::KeyCertSign,
        KeyUsagePurpose::CrlSign,
        KeyUsagePurpose::DigitalSignature,
    ];
    let authority = CertifiedIssuer::self_signed(authority, KeyPair::generate().unwrap()).unwrap();
    let server_key = KeyPair::generate().unwrap();
    let server = CertificateParams::new(vec!["127.0.0.1".to_owned(), "localhost".to_owned()])
        .unwrap()
        .signed_by(&server_key, &authority)
        .unwrap();
    let config = rustls::ServerConfig::builder_with_provider(Arc::new(
        rustls::crypto::aws_lc_rs::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .unwrap()
    .with_no_client_auth()
    .with_single_cert(
        vec![server.der().clone()],
        rustls_pki_types::PrivateKeyDer::Pkcs8(server_key.serialize_der().into()),
    )
    .unwrap();
    let acceptor = tokio_rustls::TlsAcceptor::from(Arc::new(config));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let upstream = plain_base.trim_start_matches("http://").to_owned();
    tokio::spawn(async move {
        loop {
            let Ok((stream, _)) = listener.accept().await else {
                return;
            };
            let acceptor = acceptor.clone();
            let upstream = upstream.clone();
            tokio::spawn(async move {
                let Ok(mut tls) = acceptor.accept(stream).await else {
                    return;
                };
                let Ok(mut plain) = tokio::net::TcpStream::connect(&upstream).await else {
                    return;
                };
                let _ = tokio::io::copy_bidirectional(&mut tls, &mut plain).await;
            });
        }
    });
    TlsFront {
        base: format!("https://127.0.0.1:{port}"),
        authority_pem: authority.pem(),
    }
}

/// Wait (five seconds at most) until a webhook of `event_type` from a
/// sandbox was accepted by the shop.
pub async fn wait_for_event(ledger: impl Fn() -> holdfast_sandbox::Ledger, event_type: &str) {
    for _ in 0..100 {
        if ledger()
            .deliveries
            .iter()
            .any(|d| d.event_type == event_type && d.status == Some(200))
        {
            return;
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    panic!("no {event_type} was accepted: {:?}", ledger().deliveries);
}

/// Run a command-line binary (`env!("CARGO_BIN_EXE_…")`) against `db`.
pub fn run_command(binary: &str, db: &TestDb, args: &[&str]) -> std::process::Output {
    std::process::Command::new(binary)
        .arg("--db")
        .arg(&db.url)
        .args(args)
        .env_remove("DATABASE_URL")
        .output()
        .unwrap_or_else(|e| panic!("run {binary}: {e}"))
}

/// The one JSON value a successful command printed.
pub fn json_output(output: &std::process::Output) -> serde_json::Value {
    assert!(
        output.status.success(),
        "exit {:?}: {}",
        output.status.code(),
        String::from_utf8_lossy(&output.stderr)
    );
    serde_json::from_slice(&output.stdout).expect("one JSON value on stdout")
}
