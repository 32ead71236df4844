//! A fresh, migrated database per test, cloned from a template in the same
//! PostgreSQL server the app uses (the private cluster under `.holdfast/`
//! unless `DATABASE_URL` names another), and what tests read from it whole.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};

use holdfast::catalogue::CatalogueFile;
use holdfast::configuration::DatabaseSettings;
use holdfast::database::{self, MIGRATOR, quote_identifier};
use holdfast::inventory::Inventory;
use sqlx::postgres::PgConnectOptions;
use sqlx::{Connection, PgPool};
use uuid::Uuid;

/// The server's admin URL, resolved once per test process.
static SERVER: OnceLock<String> = OnceLock::new();

/// Logs at `info` when `TEST_LOG` is set; quiet otherwise.
fn init_logs() {
    if std::env::var("TEST_LOG").is_ok() {
        holdfast::telemetry::init("info");
    }
}

/// The repository's root: the product's package, above the kit's and the
/// tools' (whose tests share the one private cluster).
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

/// `options` counting into `handed_out` every connection the pool hands
/// out: an idle one before it is given (`before_acquire`), a new one once
/// it is open (`after_connect`).
fn counted(
    options: sqlx::postgres::PgPoolOptions,
    handed_out: &Arc<AtomicU64>,
) -> sqlx::postgres::PgPoolOptions {
    let (idle, new) = (handed_out.clone(), handed_out.clone());
    options
        .before_acquire(move |_, _| {
            idle.fetch_add(1, Ordering::SeqCst);
            Box::pin(async { Ok(true) })
        })
        .after_connect(move |_, _| {
            new.fetch_add(1, Ordering::SeqCst);
            Box::pin(async { Ok(()) })
        })
}

fn with_database(url: &str, name: &str) -> PgConnectOptions {
    url.parse::<PgConnectOptions>()
        .expect("admin url")
        .database(name)
}

/// Name of the template for the current migrations (and the kinds and
/// providers the code knows, whose rows the migrations write), so a
/// changed migration or a new kind gets a new template rather than a
/// stale one.
fn template_name() -> String {
    use holdfast::catalogue::{CollectionKind, ProductKind};
    use holdfast::payments::ProviderKind;
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    let lists = ProductKind::ALL
        .iter()
        .map(|k| k.as_str())
        .chain(CollectionKind::ALL.iter().map(|k| k.as_str()))
        .chain(ProviderKind::ALL.iter().map(|p| p.as_str()));
    let bytes = MIGRATOR
        .iter()
        .flat_map(|migration| migration.checksum.iter().copied())
        .chain(lists.flat_map(|name| name.bytes().chain([0])));
    for byte in bytes {
        hash ^= u64::from(byte);
        hash = hash.wrapping_mul(0x0100_0000_01b3);
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
    /// Connections `pool` has handed out ([`TestDb::round_trips`]).
    handed_out: Arc<AtomicU64>,
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
        Self::created(admin, admin_url, Some(&template), max).await
    }

    /// An empty database of its own, not migrated: for a test that
    /// migrates it in steps (data written as an older schema held it).
    pub async fn unmigrated() -> Self {
        init_logs();
        let admin_url = admin_url().await;
        let admin = PgPool::connect(&admin_url).await.expect("admin pool");
        Self::created(admin, admin_url, None, 10).await
    }

    async fn created(admin: PgPool, admin_url: String, template: Option<&str>, max: u32) -> Self {
        let name = format!("t_{}", Uuid::new_v4().simple());
        let from = template
            .map(|template| format!(" template {}", quote_identifier(template)))
            .unwrap_or_default();
        sqlx::query(&format!(
            "create database {}{from}",
            quote_identifier(&name)
        ))
        .execute(&admin)
        .await
        .expect("create test database");
        admin.close().await;
        let handed_out = Arc::new(AtomicU64::new(0));
        let pool = counted(
            sqlx::postgres::PgPoolOptions::new()
                .max_connections(max)
                .acquire_timeout(std::time::Duration::from_secs(60)),
            &handed_out,
        )
        .connect_with(with_database(&admin_url, &name))
        .await
        .expect("test pool");
        let url = with_database_url(&admin_url, &name);
        Self {
            pool,
            name,
            url,
            admin_url,
            handed_out,
        }
    }

    /// Connections this database's pool has handed out so far: an idle
    /// one taken or a new one opened, whoever asked (the shop, or the test
    /// itself). Every query, transaction or call on the pool takes one, so
    /// a stretch in which this does not move made no database round trip
    /// through the pool (the shop's memory reads on a pool of its own).
    pub fn round_trips(&self) -> u64 {
        self.handed_out.load(Ordering::SeqCst)
    }

    pub fn inventory(&self) -> Inventory {
        Inventory::new(self.pool.clone())
    }

    /// Load the demo catalogue ([`load_demo`]).
    pub async fn load_demo(&self) {
        load_demo(&self.pool).await;
    }

    /// The demo catalogue's first pickup slot.
    pub async fn first_slot(&self) -> String {
        holdfast::catalogue::products(&self.pool, Some("bakery"))
            .await
            .unwrap()[0]
            .id
            .clone()
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

/// Load the demo catalogue (`fixtures/catalogue.json`: eight pickup slots,
/// two ticket tiers, one jar of honey) into `pool`'s database.
pub async fn load_demo(pool: &PgPool) {
    CatalogueFile::read(&workspace_root().join("fixtures/catalogue.json"))
        .expect("the demo catalogue parses")
        .load(pool)
        .await
        .expect("load the demo catalogue");
}

/// Everything a request could change, as one fingerprint: equal before and
/// after means nothing changed.
pub async fn snapshot(pool: &PgPool) -> Vec<String> {
    let mut prints = Vec::new();
    for table in [
        "resources",
        "holds",
        "hold_events",
        "orders",
        "payment_refs",
        "outbox_jobs",
        "staff_actions",
        "staff_sessions",
        "login_throttle",
        "staff",
        "staff_recovery_codes",
        "staff_settings",
        "collections",
        "products",
        "schedules",
        "vouchers",
    ] {
        let print: String = sqlx::query_scalar(&format!(
            "select '{table}:' || count(*) || ':' || coalesce(md5(string_agg(t::text, '|' order by t::text)), '') from {table} t"
        ))
        .fetch_one(pool)
        .await
        .unwrap();
        prints.push(print);
    }
    prints
}
