//! Connecting to PostgreSQL: the configured server, or a private cluster.

pub mod cluster;

use std::time::Duration;

use anyhow::Context;
use sqlx::migrate::Migrator;
use sqlx::postgres::{PgConnectOptions, PgPoolOptions};
use sqlx::{PgConnection, PgPool};

use crate::configuration::{DatabaseSettings, Secret};
use cluster::LocalCluster;

/// The migrations in `migrations/`, compiled into the binary. Run them with
/// [`migrate`].
pub static MIGRATOR: Migrator = sqlx::migrate!("./migrations");

/// Bring a database up to date: the migrations in `migrations/`, and
/// nothing else. The schema, and the rows the code's lists answer to
/// (`product_kinds`, `collection_kinds`, the providers a CHECK names), are
/// the migrations'; `tests/api/kinds_in_the_database.rs` holds them equal
/// to the code. Every way into a database (`holdfast migrate`, `serve`,
/// the tools, the tests) goes through here.
pub async fn migrate(conn: &mut PgConnection) -> anyhow::Result<()> {
    MIGRATOR
        .run(&mut *conn)
        .await
        .context("cannot apply the migrations")
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
