//! Connecting to PostgreSQL: the configured server, or a private cluster.

pub mod cluster;

use std::time::Duration;

use anyhow::Context;
use sqlx::migrate::Migrator;
use sqlx::postgres::{PgConnectOptions, PgPoolOptions};
use sqlx::{PgConnection, PgPool};

use crate::catalogue::{Code, CollectionKind, ProductKind};
use crate::configuration::{DatabaseSettings, Secret};
use crate::payments::ProviderKind;
use cluster::LocalCluster;

/// The migrations in `migrations/`, compiled into the binary. Run them with
/// [`migrate`], which also writes the lists the code owns.
pub static MIGRATOR: Migrator = sqlx::migrate!("./migrations");

/// Bring a database up to date: the migrations, then the lists the code
/// owns (every product kind, every payment provider), so that adding a kind
/// or a provider to the code needs no migration. Every way into a database
/// (`holdfast migrate`, `serve`, the tools, the tests) goes through here.
pub async fn migrate(conn: &mut PgConnection) -> anyhow::Result<()> {
    adopt_rewritten_migrations(conn).await?;
    MIGRATOR
        .run(&mut *conn)
        .await
        .context("cannot apply the migrations")?;
    write_known_lists(conn)
        .await
        .context("cannot write the product kinds and payment providers")
}

/// Migrations whose text was rewritten after databases applied it, with the
/// checksum those databases recorded: (version, old SHA-384). 0003 made the
/// benchmark's naive tables; it was emptied when they moved to the tool.
const REWRITTEN: [(i64, &str); 1] = [(
    3,
    "69b3e37934551c77c9f2eba14abe58447c49534eb10ea85633ff8a6ee9e13b6d\
     779739a042e81df2f5558e96a04fc387",
)];

/// A database that applied a rewritten migration's old text records the
/// new checksum instead, so the migrator accepts it (the later migration
/// that undoes the old text, 0016 for 0003, still runs).
async fn adopt_rewritten_migrations(conn: &mut PgConnection) -> anyhow::Result<()> {
    let tracked: bool = sqlx::query_scalar("select to_regclass('_sqlx_migrations') is not null")
        .fetch_one(&mut *conn)
        .await?;
    if !tracked {
        return Ok(());
    }
    for (version, old) in REWRITTEN {
        let Some(migration) = MIGRATOR.iter().find(|m| m.version == version) else {
            continue;
        };
        let old = hex::decode(old).context("a rewritten migration's old checksum")?;
        sqlx::query(
            "update _sqlx_migrations set checksum = $3 where version = $1 and checksum = $2",
        )
        .bind(version)
        .bind(old)
        .bind(migration.checksum.as_ref())
        .execute(&mut *conn)
        .await?;
    }
    Ok(())
}

/// `product_kinds` from [`ProductKind::ALL`], `collection_kinds` from
/// [`CollectionKind::ALL`], and the CHECKs that name
/// every provider from [`ProviderKind::ALL`] (rewritten only when the list
/// changed, so a `migrate` at every start takes no table lock).
async fn write_known_lists(conn: &mut PgConnection) -> anyhow::Result<()> {
    let kinds: Vec<&str> = ProductKind::ALL.iter().map(|k| k.as_str()).collect();
    let codes: Vec<Option<&str>> = ProductKind::ALL
        .iter()
        .map(|k| k.code().map(Code::as_str))
        .collect();
    sqlx::query(
        "insert into product_kinds (kind, code) select * from unnest($1::text[], $2::text[]) \
         on conflict (kind) do update set code = excluded.code \
          where product_kinds.code is distinct from excluded.code",
    )
    .bind(&kinds)
    .bind(&codes)
    .execute(&mut *conn)
    .await?;
    let collections: Vec<&str> = CollectionKind::ALL.iter().map(|k| k.as_str()).collect();
    sqlx::query(
        "insert into collection_kinds (kind) select * from unnest($1::text[]) \
         on conflict (kind) do nothing",
    )
    .bind(&collections)
    .execute(&mut *conn)
    .await?;
    let mut providers: Vec<&str> = ProviderKind::ALL.iter().map(|p| p.as_str()).collect();
    providers.sort_unstable();
    for (table, constraint) in [
        ("orders", "order_provider_known"),
        ("orphan_payments", "orphan_provider_known"),
        ("settle_windows", "settle_window_provider_known"),
    ] {
        let definition: Option<String> = sqlx::query_scalar(
            "select pg_get_constraintdef(oid) from pg_constraint \
              where conname = $1 and conrelid = to_regclass($2)",
        )
        .bind(constraint)
        .bind(table)
        .fetch_optional(&mut *conn)
        .await?;
        if definition.as_deref().map(quoted_words) == Some(providers.clone()) {
            continue;
        }
        let list = providers
            .iter()
            .map(|name| format!("'{}'", name.replace('\'', "''")))
            .collect::<Vec<_>>()
            .join(", ");
        // NOT VALID then VALIDATE: the rows are checked without holding
        // off writes for the scan
        let mut tx = sqlx::Connection::begin(&mut *conn).await?;
        sqlx::query(&format!(
            "alter table {table} drop constraint if exists {constraint}, \
             add constraint {constraint} check (provider in ({list})) not valid"
        ))
        .execute(&mut *tx)
        .await?;
        tx.commit().await?;
        sqlx::query(&format!(
            "alter table {table} validate constraint {constraint}"
        ))
        .execute(&mut *conn)
        .await?;
    }
    Ok(())
}

/// The quoted words of a constraint's definition, sorted: the names a
/// `check (provider in (…))` allows.
fn quoted_words(definition: &str) -> Vec<&str> {
    let mut words: Vec<&str> = definition.split('\'').skip(1).step_by(2).collect();
    words.sort_unstable();
    words
}

/// The database URL to use: `DATABASE_URL` as is, or a database in the
/// private cluster, which is started (and created) when needed.
pub async fn resolve_url(settings: &DatabaseSettings) -> anyhow::Result<Secret> {
    if let Some(url) = &settings.url {
        return Ok(url.clone());
    }
    let cluster = LocalCluster::new(settings.home.clone(), settings.local_port);
    let starter = cluster.clone();
    tokio::task::spawn_blocking(move || starter.ensure_running())
        .await
        .context("the cluster start-up task failed")??;
    create_database_if_missing(&cluster, &settings.local_database).await?;
    Ok(Secret::new(cluster.url(&settings.local_database)))
}

async fn create_database_if_missing(cluster: &LocalCluster, name: &str) -> anyhow::Result<()> {
    let admin = connect(&Secret::new(cluster.url("postgres")), 1).await?;
    let exists: bool =
        sqlx::query_scalar("select exists (select 1 from pg_database where datname = $1)")
            .bind(name)
            .fetch_one(&admin)
            .await?;
    if !exists {
        // identifiers cannot be bound; the name comes from our own settings
        // and is quoted as an identifier
        let statement = format!("create database {}", quote_identifier(name));
        if let Err(error) = sqlx::query(&statement).execute(&admin).await {
            // another process may have created it a moment ago
            let raced = error
                .as_database_error()
                .and_then(|e| e.code())
                .is_some_and(|code| code == "42P04");
            if !raced {
                return Err(error).context("cannot create the database");
            }
        }
    }
    admin.close().await;
    Ok(())
}

/// A new, empty, migrated database called `name` on the configured server
/// (or in the private cluster), dropping one of that name first. For runs
/// that must start from nothing, like `simulate`.
pub async fn recreate(
    settings: &DatabaseSettings,
    name: &str,
    max_connections: u32,
) -> anyhow::Result<PgPool> {
    let base: PgConnectOptions = resolve_url(settings)
        .await?
        .expose()
        .parse()
        .context("DATABASE_URL is not a valid PostgreSQL URL")?;
    let admin = PgPoolOptions::new()
        .max_connections(1)
        .acquire_timeout(ACQUIRE_TIMEOUT)
        .connect_with(base.clone().database("postgres"))
        .await
        .context("cannot connect to the server's postgres database")?;
    for statement in [
        format!(
            "drop database if exists {} with (force)",
            quote_identifier(name)
        ),
        format!("create database {}", quote_identifier(name)),
    ] {
        sqlx::query(&statement)
            .execute(&admin)
            .await
            .with_context(|| format!("cannot recreate the database {name}"))?;
    }
    admin.close().await;
    let pool = PgPoolOptions::new()
        .max_connections(max_connections)
        .acquire_timeout(ACQUIRE_TIMEOUT)
        .connect_with(base.database(name))
        .await
        .context("cannot connect to the new database")?;
    migrate(&mut *pool.acquire().await?).await?;
    Ok(pool)
}

/// Quote a PostgreSQL identifier.
pub fn quote_identifier(name: &str) -> String {
    format!("\"{}\"", name.replace('"', "\"\""))
}

/// How long a request waits for a connection before it is answered 503.
const ACQUIRE_TIMEOUT: Duration = Duration::from_secs(2);

/// A pool that fails fast when the server is gone instead of hanging.
pub async fn connect(url: &Secret, max_connections: u32) -> anyhow::Result<PgPool> {
    let options: PgConnectOptions = url
        .expose()
        .parse()
        .context("DATABASE_URL is not a valid PostgreSQL URL")?;
    PgPoolOptions::new()
        .max_connections(max_connections)
        .acquire_timeout(ACQUIRE_TIMEOUT)
        // a connection made before the primary last went away may lead to
        // a node that is now a standby: never hand it out again
        .before_acquire(|_, meta| Box::pin(async move { Ok(crate::retry::still_good(meta.age)) }))
        .connect_with(options)
        .await
        .context("cannot connect to PostgreSQL")
}

/// Connect and bring the schema up to date.
pub async fn connect_and_migrate(
    settings: &DatabaseSettings,
    max_connections: u32,
) -> anyhow::Result<PgPool> {
    let url = resolve_url(settings).await?;
    let pool = connect(&url, max_connections).await?;
    migrate(&mut *pool.acquire().await?).await?;
    Ok(pool)
}
