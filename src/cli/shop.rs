//! Running the shop and setting it up: serve, worker, migrate, the
//! catalogue file and staff accounts.

use std::process::ExitCode;

use super::{Ctx, cli_actor, print};
use crate::audit::Actor;
use crate::catalogue::CatalogueFile;
use crate::configuration::ServerSettings;
use crate::payments::ProviderSettings;
use crate::staff::accounts::{self, SetUp};
use crate::staff::roles::Role;
use crate::staff::two_factor;

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
    let zone = crate::configuration::shop_zone(&ctx.pool).await?;
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

/// `holdfast catalogue export [--file PATH]`: the catalogue as a file that
/// loads back into the same catalogue.
pub(super) async fn catalogue_export(
    ctx: &Ctx,
    file: Option<std::path::PathBuf>,
) -> anyhow::Result<ExitCode> {
    let zone = crate::configuration::shop_zone(&ctx.pool).await?;
    let catalogue = CatalogueFile::export(&ctx.pool, zone).await?;
    let mut text = serde_json::to_string_pretty(&catalogue)?;
    text.push('\n');
    match file {
        None => print!("{text}"),
        Some(path) => {
            // whole or not at all: a file beside it, renamed into place
            let partial = path.with_extension("partial");
            std::fs::write(&partial, &text)
                .and_then(|()| std::fs::rename(&partial, &path))
                .map_err(|e| anyhow::anyhow!("cannot write {}: {e}", path.display()))?;
            let products = catalogue.products.len()
                + catalogue
                    .events
                    .iter()
                    .map(|e| e.tiers.len())
                    .sum::<usize>();
            print(
                ctx.json,
                &serde_json::json!({
                    "file": path.display().to_string(),
                    "events": catalogue.events.len(),
                    "schedules": catalogue.schedules.len(),
                    "products": products,
                    "vouchers": catalogue.vouchers.len(),
                }),
                || {
                    format!(
                        "{}: {} events, {} schedules, {products} other products and tiers, {} vouchers",
                        path.display(),
                        catalogue.events.len(),
                        catalogue.schedules.len(),
                        catalogue.vouchers.len()
                    )
                },
            );
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// `holdfast staff add EMAIL [--role ROLE]`: a staff member, or a new
/// password (and, with `--role`, a new role) for one.
pub(super) async fn staff_add(
    ctx: &Ctx,
    email: String,
    role: Option<Role>,
) -> anyhow::Result<ExitCode> {
    let email = crate::staff::StaffEmail::parse(&email)?;
    let password = super::read_password()?;
    let outcome = accounts::set_up(&ctx.pool, &cli_actor(), &email, &password, role).await?;
    let (word, role, role_changed) = match outcome {
        SetUp::Created { role } => ("added", role, false),
        SetUp::PasswordChanged { role, role_changed } => ("password changed", role, role_changed),
    };
    print(
        ctx.json,
        &serde_json::json!({
            "email": email.as_str(),
            "outcome": word,
            "role": role,
            "role_changed": role_changed,
        }),
        || {
            let changed = if role_changed { ", role changed" } else { "" };
            format!(
                "{}: {word}{changed} ({})",
                email.as_str(),
                role.label().to_lowercase()
            )
        },
    );
    Ok(ExitCode::SUCCESS)
}

/// `holdfast staff list`: every account, its role and whether it signs in
/// with a second factor.
pub(super) async fn staff_list(ctx: &Ctx) -> anyhow::Result<ExitCode> {
    let rows = accounts::list(&ctx.pool).await?;
    let listed: Vec<serde_json::Value> = rows
        .iter()
        .map(|row| {
            serde_json::json!({
                "email": row.email,
                "role": row.role,
                "two_factor": row.two_factor,
                "disabled": row.disabled,
                "last_login": row.last_login,
            })
        })
        .collect();
    print(ctx.json, &listed, || {
        let width = rows.iter().map(|r| r.email.len()).max().unwrap_or(5).max(5);
        let mut text = format!("{:width$}  {:10}  two-factor", "email", "role");
        for row in &rows {
            text.push_str(&format!(
                "\n{:width$}  {:10}  {}{}",
                row.email,
                row.role.as_str().replace('_', "-"),
                if row.two_factor { "on" } else { "off" },
                if row.disabled { "  (disabled)" } else { "" },
            ));
        }
        if rows.is_empty() {
            text.push_str("\n(no accounts: holdfast staff add EMAIL)");
        }
        text
    });
    Ok(ExitCode::SUCCESS)
}

/// `holdfast staff reset-two-factor EMAIL`: the way back for an account
/// (the last owner's, say) that lost its phone and its recovery codes.
pub(super) async fn staff_reset_two_factor(ctx: &Ctx, email: String) -> anyhow::Result<ExitCode> {
    let email = crate::staff::StaffEmail::parse(&email)?;
    let Some(id) = accounts::find(&ctx.pool, &email).await? else {
        anyhow::bail!("no staff account {}", email.as_str());
    };
    let operator = cli_actor();
    let was_on = two_factor::reset(&ctx.pool, Actor::Operator(&operator), id).await?;
    print(
        ctx.json,
        &serde_json::json!({ "email": email.as_str(), "two_factor_was_on": was_on }),
        || {
            if was_on {
                format!(
                    "{}: two-factor sign-in turned off, sessions ended",
                    email.as_str()
                )
            } else {
                format!("{}: two-factor sign-in was off already", email.as_str())
            }
        },
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
    // outgoing webhooks' secrets open only under the web processes' key
    let session_key = match &server.session_key {
        Some(key) => crate::keys::SessionKey::new(key.clone())?,
        None => crate::keys::SessionKey::generate(),
    };
    crate::startup::spawn_worker(
        ctx.pool.clone(),
        payments,
        &server,
        providers.is_empty(),
        "worker",
        &session_key,
    )?;
    std::future::pending::<()>().await;
    Ok(ExitCode::SUCCESS)
}
