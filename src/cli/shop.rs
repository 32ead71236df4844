//! Running the shop and setting it up: serve, worker, migrate, the
//! catalogue file and staff accounts.

use std::process::ExitCode;

use super::{Ctx, print};
use crate::catalogue::CatalogueFile;
use crate::configuration::ServerSettings;
use crate::payments::ProviderSettings;

/// `holdfast migrate`: the schema is brought up to date on connecting; say so.
pub(super) async fn migrate(ctx: &Ctx) -> anyhow::Result<ExitCode> {
    print(ctx.json, &serde_json::json!({ "migrated": true }), || {
        "migrations applied".to_owned()
    });
    Ok(ExitCode::SUCCESS)
}

/// `holdfast catalogue load`: create or update products and resources from a file.
pub(super) async fn catalogue_load(
    ctx: &Ctx,
    file: std::path::PathBuf,
) -> anyhow::Result<ExitCode> {
    let zone = crate::configuration::time_zone()?;
    let report = CatalogueFile::read(&file)?.load_in(&ctx.pool, zone).await?;
    print(ctx.json, &report, || {
        let mut text = format!(
            "{} products loaded, {} new resources",
            report.products, report.resources_created
        );
        for id in &report.capacity_kept {
            text.push_str(&format!(
                "\n{id}: capacity kept, more is committed than the file says"
            ));
        }
        text
    });
    Ok(ExitCode::SUCCESS)
}

/// `holdfast staff add EMAIL`: a staff member, or a new password for one.
pub(super) async fn staff_add(ctx: &Ctx, email: String) -> anyhow::Result<ExitCode> {
    let email = crate::staff::StaffEmail::parse(&email)?;
    let password = super::read_password()?;
    let outcome = crate::staff::add_staff(&ctx.pool, &email, &password).await?;
    let word = match outcome {
        crate::staff::AddOutcome::Created => "added",
        crate::staff::AddOutcome::PasswordChanged => "password changed",
    };
    print(
        ctx.json,
        &serde_json::json!({ "email": email.as_str(), "outcome": word }),
        || format!("{}: {word}", email.as_str()),
    );
    Ok(ExitCode::SUCCESS)
}

/// `holdfast serve`: the shop (and the worker, unless told otherwise), until stopped.
pub(super) async fn serve(ctx: &Ctx, no_worker: bool) -> anyhow::Result<ExitCode> {
    let providers = ProviderSettings::from_env()?;
    crate::startup::serve(
        ServerSettings::from_env()?,
        providers,
        ctx.pool.clone(),
        !no_worker,
    )
    .await?;
    Ok(ExitCode::SUCCESS)
}

/// `holdfast worker`: the sweeper, the outbox, reconciliation and housekeeping, until stopped.
pub(super) async fn worker(ctx: &Ctx) -> anyhow::Result<ExitCode> {
    let server = ServerSettings::from_env()?;
    let providers = ProviderSettings::from_env()?;
    // with no keys, the sandbox a `holdfast serve` without keys runs
    let payments = crate::startup::configured_providers(&server, &providers)?;
    tracing::info!(every = server.sweep_every_seconds, "worker started");
    crate::startup::spawn_worker(
        ctx.pool.clone(),
        payments,
        &server,
        providers.is_empty(),
        "worker",
    )?;
    std::future::pending::<()>().await;
    Ok(ExitCode::SUCCESS)
}
