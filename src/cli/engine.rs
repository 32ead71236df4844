//! The hold engine's commands: resources, sweeps, holds, the drift check
//! and the shared settings.

use std::process::ExitCode;

use super::{Ctx, SettingsChange, print};
use crate::inventory::{
    Capacity, HoldFilter, HoldState, InventorySettings, ResourceId, SettleWindow, Span,
    UpsertOutcome,
};
use crate::worker::Sweeper;

/// `holdfast resource ID --total N`: create a resource or change its capacity (exit 1 when refused below what is committed).
pub(super) async fn resource(ctx: &Ctx, id: String, total: i64) -> anyhow::Result<ExitCode> {
    let id = ResourceId::parse(&id)?;
    let outcome = ctx
        .inventory()
        .upsert_resource(&id, Capacity::parse(total)?)
        .await?;
    print(ctx.json, &outcome, || match &outcome {
        UpsertOutcome::Created { counters } => {
            format!(
                "created {} with {} units",
                counters.resource_id, counters.total
            )
        }
        UpsertOutcome::Updated { counters } => format!(
            "{}: total {}, held {}, sold {}, available {}",
            counters.resource_id, counters.total, counters.held, counters.sold, counters.available
        ),
        UpsertOutcome::CapacityBelowCommitted {
            counters,
            requested,
        } => format!(
            "refused: {} has {} units held and {} sold, more than {requested}",
            counters.resource_id, counters.held, counters.sold
        ),
    });
    if matches!(outcome, UpsertOutcome::CapacityBelowCommitted { .. }) {
        return Ok(ExitCode::FAILURE);
    }
    Ok(ExitCode::SUCCESS)
}

/// `holdfast sweep`: expire what is due, now.
pub(super) async fn sweep(ctx: &Ctx, limit: u32) -> anyhow::Result<ExitCode> {
    let counts = Sweeper::new(
        ctx.inventory(),
        format!("sweep-command:{}", std::process::id()),
    )
    .with_batch(limit)
    .run_once()
    .await?;
    print(ctx.json, &counts, || {
        if counts.is_empty() {
            return "nothing was due".to_owned();
        }
        counts
            .iter()
            .map(|c| {
                format!(
                    "{}: expired {} holds ({} units)",
                    c.resource_id, c.expired_holds, c.expired_qty
                )
            })
            .collect::<Vec<_>>()
            .join("\n")
    });
    Ok(ExitCode::SUCCESS)
}

/// `holdfast show RESOURCE`: its counters and live holds.
pub(super) async fn show(ctx: &Ctx, resource: String) -> anyhow::Result<ExitCode> {
    let id = ResourceId::parse(&resource)?;
    let Some(status) = ctx.inventory().status(&id).await? else {
        anyhow::bail!("no resource {id:?}");
    };
    let mut live = ctx
        .inventory()
        .holds(&HoldFilter {
            resource: Some(id.clone()),
            state: Some(HoldState::Held),
            ..HoldFilter::default()
        })
        .await?;
    live.extend(
        ctx.inventory()
            .holds(&HoldFilter {
                resource: Some(id),
                state: Some(HoldState::AwaitingPayment),
                ..HoldFilter::default()
            })
            .await?,
    );
    let out = serde_json::json!({ "status": status, "live_holds": live });
    print(ctx.json, &out, || {
        let mut text = format!(
            "{}: total {} · held {} ({} plain, {} paying) · sold {} · available {} \
                 (counting {} past their TTL as free: {})",
            status.resource_id,
            status.total,
            status.held,
            status.held_plain,
            status.held_paying,
            status.sold,
            status.available,
            status.due,
            status.available_now
        );
        for hold in &live {
            text.push_str(&format!(
                "\n  {} {} ×{} {} expires {}",
                hold.id, hold.account_id, hold.qty, hold.state, hold.expires_at
            ));
        }
        text
    });
    Ok(ExitCode::SUCCESS)
}

/// `holdfast holds`: holds, filtered.
pub(super) async fn holds(
    ctx: &Ctx,
    resource: Option<String>,
    state: Option<HoldState>,
    older_than: Option<String>,
    limit: i64,
) -> anyhow::Result<ExitCode> {
    let filter = HoldFilter {
        resource: resource.as_deref().map(ResourceId::parse).transpose()?,
        state,
        older_than: older_than
            .as_deref()
            .map(|text| Span::parse_text("--older-than", text))
            .transpose()?,
        limit: Some(limit),
    };
    let holds = ctx.inventory().holds(&filter).await?;
    print(ctx.json, &holds, || {
        if holds.is_empty() {
            return "no holds".to_owned();
        }
        holds
            .iter()
            .map(|h| {
                format!(
                    "{} {} {} ×{} {} created {} {}",
                    h.id,
                    h.resource_id,
                    h.account_id,
                    h.qty,
                    h.state,
                    h.created_at.format("%Y-%m-%d %H:%M:%S"),
                    h.end_reason.as_deref().unwrap_or("")
                )
            })
            .collect::<Vec<_>>()
            .join("\n")
    });
    Ok(ExitCode::SUCCESS)
}

/// `holdfast check [--repair RESOURCE]`: counters against rows (exit 3 on drift), or one resource repaired.
pub(super) async fn check(ctx: &Ctx, repair: Option<String>) -> anyhow::Result<ExitCode> {
    if let Some(resource) = repair {
        let id = ResourceId::parse(&resource)?;
        let Some(repair) = ctx.inventory().repair(&id).await? else {
            anyhow::bail!("no resource {id:?}");
        };
        print(ctx.json, &repair, || {
            format!(
                "{}: held {} → {}, sold {} → {}{}",
                repair.resource_id,
                repair.held_before,
                repair.held_after,
                repair.sold_before,
                repair.sold_after,
                if repair.repaired { "" } else { " (no change)" }
            )
        });
        return Ok(ExitCode::SUCCESS);
    }
    let rows = ctx.inventory().check(None).await?;
    let drifted = rows.iter().filter(|r| r.drift).count();
    print(
        ctx.json,
        &serde_json::json!({ "drift": drifted > 0, "resources": rows }),
        || {
            let mut text = rows
                .iter()
                .filter(|r| r.drift)
                .map(|r| {
                    format!(
                        "DRIFT {}: counters held {} sold {}, rows held {} sold {}",
                        r.resource_id, r.held, r.sold, r.rows_held, r.rows_sold
                    )
                })
                .collect::<Vec<_>>();
            text.push(format!(
                "{} resources checked, {drifted} with drift",
                rows.len()
            ));
            text.join("\n")
        },
    );
    if drifted > 0 {
        return Ok(ExitCode::from(super::EXIT_DRIFT));
    }
    Ok(ExitCode::SUCCESS)
}

/// `holdfast settings`: show or change the shared settings.
pub(super) async fn settings(ctx: &Ctx, changes: SettingsChange) -> anyhow::Result<ExitCode> {
    let mut settings: InventorySettings = ctx.inventory().settings().await?;
    let SettingsChange {
        hold_ttl,
        payment_window,
        account_cap,
        cap_scope,
        max_extensions,
        extension,
        settle_grace,
        settle_window,
    } = changes;
    let changing = hold_ttl.is_some()
        || payment_window.is_some()
        || account_cap.is_some()
        || cap_scope.is_some()
        || max_extensions.is_some()
        || extension.is_some()
        || settle_grace.is_some();
    if let Some(text) = hold_ttl {
        settings.hold_ttl_seconds = Span::parse_text("--hold-ttl", &text)?.seconds();
    }
    if let Some(text) = payment_window {
        settings.payment_window_seconds = Span::parse_text("--payment-window", &text)?.seconds();
    }
    if let Some(text) = account_cap {
        settings.account_cap = match text.as_str() {
            "none" => None,
            number => Some(number.parse().map_err(|_| {
                anyhow::anyhow!("--account-cap must be a number or \"none\", got {number:?}")
            })?),
        };
    }
    if let Some(scope) = cap_scope {
        settings.cap_scope = scope;
    }
    if let Some(max) = max_extensions {
        settings.max_extensions = max;
    }
    if let Some(text) = extension {
        settings.extension_seconds = Span::parse_text("--extension", &text)?.seconds();
    }
    if let Some(text) = settle_grace {
        settings.settle_grace_seconds = grace(&text)?;
    }
    // every window is read before anything is written
    let windows = settle_window
        .iter()
        .map(|text| window(text))
        .collect::<anyhow::Result<Vec<_>>>()?;
    if changing || !windows.is_empty() {
        settings = ctx
            .inventory()
            .configure_with_windows(&settings, &windows)
            .await?;
    }
    let shown = Shown {
        settle_windows: ctx.inventory().settle_windows().await?,
        settings,
    };
    print(ctx.json, &shown, || format!("{shown:#?}"));
    Ok(ExitCode::SUCCESS)
}

/// What `holdfast settings` shows: the settings, and the delayed methods'
/// windows.
#[derive(Debug, serde::Serialize)]
struct Shown {
    #[serde(flatten)]
    settings: InventorySettings,
    settle_windows: Vec<SettleWindow>,
}

/// `--settle-grace`: a length of time, zero allowed.
fn grace(text: &str) -> anyhow::Result<f64> {
    if text.trim() == "0" {
        return Ok(0.0);
    }
    let duration = humantime::parse_duration(text.trim())
        .map_err(|e| anyhow::anyhow!("--settle-grace {text:?} is not a duration: {e}"))?;
    anyhow::ensure!(
        duration <= std::time::Duration::from_secs(90 * 24 * 3600),
        "--settle-grace must be at most 90 days"
    );
    Ok(duration.as_secs_f64())
}

/// `--settle-window provider:method=Nbd` (business days) or `=Nd` (days).
fn window(text: &str) -> anyhow::Result<SettleWindow> {
    let refused = || {
        anyhow::anyhow!(
            "--settle-window {:?} must look like stripe:sepa_debit=14bd or razorpay:*=5d",
            text.chars().take(80).collect::<String>()
        )
    };
    let (name, length) = text.trim().split_once('=').ok_or_else(refused)?;
    let (provider, method) = name.split_once(':').ok_or_else(refused)?;
    let provider = crate::payments::ProviderKind::parse(provider).ok_or_else(|| {
        anyhow::anyhow!("--settle-window: {provider:?} is not a provider Holdfast speaks to")
    })?;
    let (days, business_days) = match length.strip_suffix("bd") {
        Some(days) => (days, true),
        None => (length.strip_suffix('d').ok_or_else(refused)?, false),
    };
    let days: i32 = days.parse().map_err(|_| refused())?;
    Ok(SettleWindow {
        provider: provider.as_str().to_owned(),
        method: method.to_owned(),
        days,
        business_days,
        source: "set with holdfast settings --settle-window".to_owned(),
    })
}
