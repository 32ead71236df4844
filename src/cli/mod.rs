//! Operator commands. `--db` or `DATABASE_URL` picks the database (without
//! either, the private cluster); `--json` prints one JSON value for machines.

use std::process::ExitCode;

use clap::{Parser, Subcommand};
use serde::Serialize;

use crate::catalogue::CatalogueFile;
use crate::configuration::{DatabaseSettings, ServerSettings};
use crate::database;
use crate::inventory::{
    CapScope, Capacity, HoldFilter, HoldState, Inventory, InventorySettings, ResourceId, Span,
    UpsertOutcome,
};
use crate::payments::ProviderSettings;
use crate::worker::Sweeper;

/// Exit code of `check` when a counter disagrees with its rows.
pub const EXIT_DRIFT: u8 = 3;

#[derive(Debug, Parser)]
#[command(
    name = "holdfast",
    version,
    about = "A checkout backend for things that run out"
)]
pub struct Cli {
    /// PostgreSQL URL (default: DATABASE_URL, else the private cluster)
    #[arg(long, global = true, env = "DATABASE_URL", hide_env_values = true)]
    db: Option<String>,
    /// Print JSON instead of text
    #[arg(long, global = true)]
    json: bool,
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Migrate, then serve HTTP (and sweep in-process unless --no-worker)
    Serve {
        /// Leave sweeping to a separate `holdfast worker`
        #[arg(long)]
        no_worker: bool,
    },
    /// Sweep expired holds and run outbox jobs on a schedule
    Worker,
    /// Apply the database migrations
    Migrate,
    /// Load the product catalogue (creates or updates products and resources)
    Catalogue {
        #[command(subcommand)]
        action: CatalogueAction,
    },
    /// Staff accounts for the admin
    Staff {
        #[command(subcommand)]
        action: StaffAction,
    },
    /// Create a resource or change its capacity
    Resource {
        id: String,
        #[arg(long, allow_negative_numbers = true)]
        total: i64,
    },
    /// Expire what is due
    Sweep {
        #[arg(long, default_value_t = 1000)]
        limit: u32,
    },
    /// A resource's counters and live holds
    Show { resource: String },
    /// List holds
    Holds {
        #[arg(long)]
        resource: Option<String>,
        #[arg(long, value_enum)]
        state: Option<HoldState>,
        /// Only holds created at least this long ago (e.g. 10m)
        #[arg(long)]
        older_than: Option<String>,
        #[arg(long, default_value_t = 100)]
        limit: i64,
    },
    /// Compare counters with rows (exit 3 on drift); --repair fixes one resource
    Check {
        #[arg(long)]
        repair: Option<String>,
    },
    /// Redeem a ticket or pickup code once (exit 0 when admitted or
    /// collected; 5 already used, 6 refunded, 7 not valid)
    Redeem {
        code: String,
        /// Where: the door or counter
        #[arg(long, default_value = "")]
        place: String,
    },
    /// Refund a paid order, whole or some units; the units go back on sale
    /// (unless --keep-off-sale) and the worker asks the provider
    Refund {
        order_id: String,
        /// Units to refund: N (an order of one line), or PRODUCT:N, once
        /// per product; default: everything not refunded yet
        #[arg(long)]
        units: Vec<String>,
        /// Why (the shopper is told)
        #[arg(long)]
        reason: String,
        /// Keep the units off sale (a cancelled slot)
        #[arg(long)]
        keep_off_sale: bool,
        /// Refund units whose codes were already redeemed (recorded)
        #[arg(long)]
        override_redeemed: bool,
        /// A key of 16 to 64 letters, digits, - or _: run again with the
        /// same key (after a lost connection), it is the same refund
        #[arg(long)]
        key: Option<String>,
    },
    /// Show or change the shared settings
    Settings {
        #[arg(long)]
        hold_ttl: Option<String>,
        #[arg(long)]
        payment_window: Option<String>,
        /// A number, or "none"
        #[arg(long)]
        account_cap: Option<String>,
        #[arg(long, value_enum)]
        cap_scope: Option<CapScope>,
        #[arg(long)]
        max_extensions: Option<i32>,
        #[arg(long)]
        extension: Option<String>,
    },
}

#[derive(Debug, Subcommand)]
enum StaffAction {
    /// Add a staff member, or set a new password for one (ending their
    /// sessions). The password is read from standard input.
    Add { email: String },
}

#[derive(Debug, Subcommand)]
enum CatalogueAction {
    /// Load a catalogue file (default: the demo catalogue)
    Load {
        #[arg(long, default_value = "fixtures/catalogue.json")]
        file: std::path::PathBuf,
    },
}

pub async fn main() -> ExitCode {
    let cli = Cli::parse();
    crate::telemetry::init(
        if matches!(cli.command, Command::Serve { .. } | Command::Worker) {
            "info,sqlx=warn,sqlx::pool::acquire=error"
        } else {
            "warn,sqlx::pool::acquire=error"
        },
    );
    match run(cli).await {
        Ok(code) => code,
        Err(error) => {
            eprintln!("holdfast: {error:#}");
            ExitCode::FAILURE
        }
    }
}

async fn run(cli: Cli) -> anyhow::Result<ExitCode> {
    // a public shop on test money refuses to start before anything else
    if matches!(cli.command, Command::Serve { .. }) {
        let server = ServerSettings::from_env()?;
        if ProviderSettings::from_env()?.is_empty() {
            crate::startup::sandbox_is_safe(&server)?;
        }
    }
    let settings = DatabaseSettings::from_env()?.with_url(cli.db.clone());
    let json = cli.json;
    let max_connections = match &cli.command {
        Command::Serve { .. } => 32,
        _ => 4,
    };
    let pool = database::connect_and_migrate(&settings, max_connections).await?;
    let inventory = Inventory::new(pool.clone());

    match cli.command {
        Command::Migrate => {
            print(json, &serde_json::json!({ "migrated": true }), || {
                "migrations applied".to_owned()
            });
        }
        Command::Catalogue {
            action: CatalogueAction::Load { file },
        } => {
            let zone = crate::configuration::time_zone()?;
            let report = CatalogueFile::read(&file)?.load_in(&pool, zone).await?;
            print(json, &report, || {
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
        }
        Command::Staff {
            action: StaffAction::Add { email },
        } => {
            let email = crate::staff::StaffEmail::parse(&email)?;
            let password = read_password()?;
            let outcome = crate::staff::add_staff(&pool, &email, &password).await?;
            let word = match outcome {
                crate::staff::AddOutcome::Created => "added",
                crate::staff::AddOutcome::PasswordChanged => "password changed",
            };
            print(
                json,
                &serde_json::json!({ "email": email.as_str(), "outcome": word }),
                || format!("{}: {word}", email.as_str()),
            );
        }
        Command::Serve { no_worker } => {
            let providers = ProviderSettings::from_env()?;
            crate::startup::serve(ServerSettings::from_env()?, providers, pool, !no_worker).await?;
        }
        Command::Worker => {
            let server = ServerSettings::from_env()?;
            let providers = ProviderSettings::from_env()?;
            // with no keys, the sandbox a `holdfast serve` without keys runs
            let payments = crate::startup::configured_providers(&server, &providers)?;
            tracing::info!(every = server.sweep_every_seconds, "worker started");
            crate::startup::spawn_worker(pool, payments, &server, providers.is_empty(), "worker")?;
            std::future::pending::<()>().await;
        }
        Command::Resource { id, total } => {
            let id = ResourceId::parse(&id)?;
            let outcome = inventory
                .upsert_resource(&id, Capacity::parse(total)?)
                .await?;
            print(json, &outcome, || match &outcome {
                UpsertOutcome::Created { counters } => {
                    format!(
                        "created {} with {} units",
                        counters.resource_id, counters.total
                    )
                }
                UpsertOutcome::Updated { counters } => format!(
                    "{}: total {}, held {}, sold {}, available {}",
                    counters.resource_id,
                    counters.total,
                    counters.held,
                    counters.sold,
                    counters.available
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
        }
        Command::Sweep { limit } => {
            let counts = Sweeper::new(inventory, format!("sweep-command:{}", std::process::id()))
                .with_batch(limit)
                .run_once()
                .await?;
            print(json, &counts, || {
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
        }
        Command::Show { resource } => {
            let id = ResourceId::parse(&resource)?;
            let Some(status) = inventory.status(&id).await? else {
                anyhow::bail!("no resource {id:?}");
            };
            let mut live = inventory
                .holds(&HoldFilter {
                    resource: Some(id.clone()),
                    state: Some(HoldState::Held),
                    ..HoldFilter::default()
                })
                .await?;
            live.extend(
                inventory
                    .holds(&HoldFilter {
                        resource: Some(id),
                        state: Some(HoldState::AwaitingPayment),
                        ..HoldFilter::default()
                    })
                    .await?,
            );
            let out = serde_json::json!({ "status": status, "live_holds": live });
            print(json, &out, || {
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
        }
        Command::Holds {
            resource,
            state,
            older_than,
            limit,
        } => {
            let filter = HoldFilter {
                resource: resource.as_deref().map(ResourceId::parse).transpose()?,
                state,
                older_than: older_than
                    .as_deref()
                    .map(|text| Span::parse_text("--older-than", text))
                    .transpose()?,
                limit: Some(limit),
            };
            let holds = inventory.holds(&filter).await?;
            print(json, &holds, || {
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
        }
        Command::Check { repair } => {
            if let Some(resource) = repair {
                let id = ResourceId::parse(&resource)?;
                let Some(repair) = inventory.repair(&id).await? else {
                    anyhow::bail!("no resource {id:?}");
                };
                print(json, &repair, || {
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
            let rows = inventory.check(None).await?;
            let drifted = rows.iter().filter(|r| r.drift).count();
            print(
                json,
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
                return Ok(ExitCode::from(EXIT_DRIFT));
            }
        }
        Command::Refund {
            order_id,
            units,
            reason,
            keep_off_sale,
            override_redeemed,
            key,
        } => {
            use crate::staff::refunds::{self, RefundOutcome, RefundRequest};
            let order_id = uuid::Uuid::parse_str(order_id.trim())
                .map_err(|_| anyhow::anyhow!("{order_id:?} is not an order id"))?;
            let mut wanted = Vec::new();
            for item in &units {
                let (product, n) = match item.rsplit_once(':') {
                    Some((product, n)) => (Some(product.to_owned()), n),
                    None => (None, item.as_str()),
                };
                let n: i32 =
                    n.trim().parse().ok().filter(|n| *n >= 1).ok_or_else(|| {
                        anyhow::anyhow!("--units {item:?}: a number of at least 1")
                    })?;
                wanted.push((product, n));
            }
            if wanted.iter().any(|(p, _)| p.is_none()) {
                if wanted.len() > 1 {
                    anyhow::bail!("--units N names one line; with several, give PRODUCT:N each");
                }
                let lines = crate::staff::views::refundable_lines(&pool, order_id).await?;
                match lines.as_slice() {
                    [] => anyhow::bail!("no order {order_id}"),
                    [line] => wanted[0].0 = Some(line.product_id.clone()),
                    _ => anyhow::bail!(
                        "order {order_id} has several lines ({}); say which: --units PRODUCT:N",
                        lines
                            .iter()
                            .map(|l| l.product_id.as_str())
                            .collect::<Vec<_>>()
                            .join(", ")
                    ),
                }
            }
            let request = RefundRequest {
                order_id,
                units: wanted
                    .into_iter()
                    .map(|(p, n)| (p.unwrap_or_default(), n))
                    .collect(),
                reason,
                restock: !keep_off_sale,
                override_redeemed,
                by: cli_actor(),
                staff: None,
                key,
            };
            let outcome = refunds::refund_order(&pool, &request)
                .await
                .map_err(|error| anyhow::anyhow!("{error}"))?;
            print(json, &outcome, || match &outcome {
                RefundOutcome::Queued {
                    refund_id,
                    amount_minor,
                    currency,
                    units,
                    whole,
                } => format!(
                    "refund #{refund_id} queued: {} for {units} unit(s){}",
                    crate::money::format(*amount_minor, currency),
                    if *whole { ", the whole order" } else { "" }
                ),
                RefundOutcome::NotPaid { state } => {
                    format!("refused: the order is {}, not paid", state.as_str())
                }
                RefundOutcome::NothingLeft => "refused: everything was refunded already".into(),
                RefundOutcome::NotInOrder { product_id } => {
                    format!("refused: the order has no {product_id}")
                }
                RefundOutcome::TooMany {
                    product_id,
                    asked,
                    left,
                } => format!("refused: {asked} of {product_id} asked, {left} left to refund"),
                RefundOutcome::Redeemed { codes } => format!(
                    "refused: already redeemed: {} (--override-redeemed to refund anyway)",
                    codes.join(", ")
                ),
                RefundOutcome::NotFound => format!("no order {order_id}"),
            });
            return Ok(match outcome {
                RefundOutcome::Queued { .. } => ExitCode::SUCCESS,
                RefundOutcome::NotFound => ExitCode::from(7),
                _ => ExitCode::from(6),
            });
        }
        Command::Redeem { code, place } => {
            let zone = crate::configuration::time_zone()?;
            let by = cli_actor();
            let place = place.trim();
            let door = crate::redemption::Door { by: &by, place };
            let redeemed = crate::redemption::redeem(&pool, &code, &door)
                .await
                .map_err(|error| match error {
                    sqlx::Error::Database(e) if e.code().as_deref() == Some("22023") => {
                        anyhow::anyhow!("{}", e.message())
                    }
                    other => other.into(),
                })?;
            let outcome = &redeemed.outcome;
            print(
                json,
                &serde_json::json!({
                    "code": redeemed.code,
                    "outcome": outcome.as_str(),
                    "order_id": redeemed.order_id,
                    "customer": redeemed.customer_name,
                    "what": redeemed.what,
                    "used_at": match outcome {
                        crate::redemption::Outcome::AlreadyUsed { at, .. } => Some(at),
                        _ => None,
                    },
                }),
                || redemption_text(&redeemed, zone),
            );
            return Ok(match outcome {
                crate::redemption::Outcome::Admitted | crate::redemption::Outcome::Collected => {
                    ExitCode::SUCCESS
                }
                crate::redemption::Outcome::AlreadyUsed { .. } => ExitCode::from(5),
                crate::redemption::Outcome::Refunded => ExitCode::from(6),
                crate::redemption::Outcome::NotValid => ExitCode::from(7),
            });
        }
        Command::Settings {
            hold_ttl,
            payment_window,
            account_cap,
            cap_scope,
            max_extensions,
            extension,
        } => {
            let mut settings: InventorySettings = inventory.settings().await?;
            let changing = hold_ttl.is_some()
                || payment_window.is_some()
                || account_cap.is_some()
                || cap_scope.is_some()
                || max_extensions.is_some()
                || extension.is_some();
            if let Some(text) = hold_ttl {
                settings.hold_ttl_seconds = Span::parse_text("--hold-ttl", &text)?.seconds();
            }
            if let Some(text) = payment_window {
                settings.payment_window_seconds =
                    Span::parse_text("--payment-window", &text)?.seconds();
            }
            if let Some(text) = account_cap {
                settings.account_cap = match text.as_str() {
                    "none" => None,
                    number => Some(number.parse().map_err(|_| {
                        anyhow::anyhow!(
                            "--account-cap must be a number or \"none\", got {number:?}"
                        )
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
            if changing {
                settings = inventory.configure(&settings).await?;
            }
            print(json, &settings, || format!("{settings:#?}"));
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// Who acts from the command line, as redemptions and refunds record it.
fn cli_actor() -> String {
    format!(
        "command line ({})",
        std::env::var("USER").unwrap_or_else(|_| "unknown user".to_owned())
    )
}

/// One redemption, as staff at a door read it.
fn redemption_text(
    redeemed: &crate::redemption::Redemption,
    zone: crate::clock::ShopZone,
) -> String {
    use crate::redemption::Outcome;
    let who = redeemed.customer_name.as_deref().unwrap_or("");
    let what = redeemed.what.as_deref().unwrap_or("");
    match &redeemed.outcome {
        Outcome::Admitted => format!("{}: admitted — {what} ({who})", redeemed.code),
        Outcome::Collected => format!("{}: collected — {what} ({who})", redeemed.code),
        Outcome::AlreadyUsed { at, by, place } => format!(
            "{}: already used at {} by {by}{}",
            redeemed.code,
            zone.stamp(*at),
            if place.is_empty() {
                String::new()
            } else {
                format!(" ({place})")
            }
        ),
        Outcome::Refunded => format!("{}: refunded — not valid for entry", redeemed.code),
        Outcome::NotValid => format!("{}: not valid", redeemed.code),
    }
}

/// One JSON value for machines, or text for people.
pub fn print<T: Serialize>(json: bool, value: &T, text: impl FnOnce() -> String) {
    if json {
        match serde_json::to_string(value) {
            Ok(line) => println!("{line}"),
            Err(error) => eprintln!("holdfast: cannot print JSON: {error}"),
        }
    } else {
        println!("{}", text());
    }
}

/// One line from standard input; a person typing gets a prompt (on standard
/// error) and no echo. The password never appears in arguments, where `ps`
/// and shell history would keep it.
fn read_password() -> anyhow::Result<crate::configuration::Secret> {
    use std::io::{BufRead, IsTerminal, Write};

    let stdin = std::io::stdin();
    let typing = stdin.is_terminal();
    let stty = |mode: &str| {
        std::process::Command::new("stty")
            .arg(mode)
            .stdin(std::process::Stdio::inherit())
            .status()
            .is_ok_and(|s| s.success())
    };
    let hidden = typing && stty("-echo");
    if typing {
        eprint!("Password (at least 12 characters): ");
        std::io::stderr().flush()?;
    }
    let mut line = String::new();
    let read = stdin.lock().read_line(&mut line);
    if hidden {
        stty("echo");
        eprintln!();
    }
    read?;
    let password = line.trim_end_matches(['\n', '\r']).to_owned();
    if password.is_empty() {
        anyhow::bail!("no password on standard input");
    }
    Ok(crate::configuration::Secret::new(password))
}
