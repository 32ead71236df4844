//! Connecting to PostgreSQL: the configured server, or a private cluster.

pub mod cluster;

use std::time::Duration;

use anyhow::Context;
use sqlx::PgPool;
use sqlx::migrate::Migrator;
use sqlx::postgres::{PgConnectOptions, PgPoolOptions};

use crate::configuration::{DatabaseSettings, Secret};
use cluster::LocalCluster;

/// The migrations in `migrations/`, compiled into the binary.
pub static MIGRATOR: Migrator = sqlx::migrate!("./migrations");

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
    MIGRATOR
        .run(&pool)
        .await
        .context("cannot apply the migrations")?;
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
    MIGRATOR
        .run(&pool)
        .await
        .context("cannot apply the migrations")?;
    Ok(pool)
}

/// The same failure again, for each request of a combined call (errors do
/// not clone). An error that means the database is away stays one, so every
/// shopper of the batch is told to try again; anything else keeps its text.
pub fn share_error(error: &sqlx::Error) -> sqlx::Error {
    match error {
        sqlx::Error::PoolTimedOut => sqlx::Error::PoolTimedOut,
        sqlx::Error::PoolClosed => sqlx::Error::PoolClosed,
        sqlx::Error::WorkerCrashed => sqlx::Error::WorkerCrashed,
        sqlx::Error::Io(io) => sqlx::Error::Io(std::io::Error::new(io.kind(), io.to_string())),
        sqlx::Error::Database(db)
            if db.code().is_some_and(|code| {
                code.starts_with("08") || code.starts_with("57P") || code == "53300"
            }) =>
        {
            sqlx::Error::Io(std::io::Error::new(
                std::io::ErrorKind::ConnectionAborted,
                db.message().to_owned(),
            ))
        }
        other => sqlx::Error::Protocol(other.to_string()),
    }
}
