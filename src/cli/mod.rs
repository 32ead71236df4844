//! Operator commands. `--db` or `DATABASE_URL` picks the database (without
//! either, the private cluster); `--json` prints one JSON value for machines.
//! Each command is a function of its own: [`shop`] (serve, worker, migrate,
//! catalogue, staff), [`vouchers`], [`engine`] (resources, holds, sweeps,
//! the drift check, settings), [`after_sale`] (refunds, redemptions),
//! [`webhooks`] (outgoing webhook endpoints), [`api_keys`] (the JSON API's
//! keys).

mod after_sale;
mod api_keys;
mod engine;
mod queue;
mod shop;
mod vouchers;
mod webhooks;

use std::process::ExitCode;

use clap::{Parser, Subcommand};
use serde::Serialize;

use crate::configuration::{DatabaseSettings, ServerSettings};
use crate::database;
use crate::inventory::{CapScope, HoldState, Inventory};
use crate::payments::ProviderSettings;

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
    /// Vouchers: discount and access codes with a limited number of uses
    Voucher {
        #[command(subcommand)]
        action: VoucherAction,
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
    /// collected; 5 already used, 6 refunded, 7 not valid or not paid)
    Redeem {
        code: String,
        /// Where: the door or counter
        #[arg(long, default_value = "")]
        place: String,
    },
    /// Refund a paid order, whole or some units; the units go back on sale
    /// (unless --keep-off-sale) and the worker asks the provider
    Refund(RefundArgs),
    /// Show or change the shared settings
    Settings(SettingsChange),
    /// A product's drop queue: turn it on, draw it, verify its order
    Queue {
        #[command(subcommand)]
        action: queue::QueueAction,
    },
    /// Outgoing webhooks: endpoints that hear of sales, refunds, redemptions
    Webhooks {
        #[command(subcommand)]
        action: webhooks::WebhookAction,
    },
    /// API keys: what the shop's other systems sign JSON API requests with
    ApiKeys {
        #[command(subcommand)]
        action: api_keys::ApiKeyAction,
    },
}

/// `holdfast refund`'s arguments.
#[derive(Debug, clap::Args)]
pub(super) struct RefundArgs {
    pub order_id: String,
    /// Units to refund: N (an order of one line), or PRODUCT:N, once
    /// per product; default: everything not refunded yet
    #[arg(long)]
    pub units: Vec<String>,
    /// Why (the shopper is told)
    #[arg(long)]
    pub reason: String,
    /// Keep the units off sale (a cancelled slot)
    #[arg(long)]
    pub keep_off_sale: bool,
    /// Refund units whose codes were already redeemed (recorded)
    #[arg(long)]
    pub override_redeemed: bool,
    /// A key of 16 to 64 letters, digits, - or _: run again with the
    /// same key (after a lost connection), it is the same refund
    #[arg(long)]
    pub key: Option<String>,
}

/// `holdfast settings`' arguments: what to change (nothing: show them).
#[derive(Debug, clap::Args)]
pub(super) struct SettingsChange {
    #[arg(long)]
    pub hold_ttl: Option<String>,
    #[arg(long)]
    pub payment_window: Option<String>,
    /// A number, or "none"
    #[arg(long)]
    pub account_cap: Option<String>,
    #[arg(long, value_enum)]
    pub cap_scope: Option<CapScope>,
    #[arg(long)]
    pub max_extensions: Option<i32>,
    #[arg(long)]
    pub extension: Option<String>,
    /// How long after a settling payment's deadline its money still
    /// counts as in time (`1d`; `0s` for none)
    #[arg(long)]
    pub settle_grace: Option<String>,
    /// A delayed method's window, `provider:method=N` with `bd` (business
    /// days) or `d` (days) after N: `stripe:sepa_debit=14bd`,
    /// `razorpay:*=5d`. Repeat for several.
    #[arg(long)]
    pub settle_window: Vec<String>,
}

#[derive(Debug, Subcommand)]
enum StaffAction {
    /// Add a staff member, or set a new password for one (ending their
    /// sessions). The password is read from standard input. A new account
    /// needs --role (but the shop's first, which is an owner); an existing
    /// account's role changes only when --role is given.
    Add {
        email: String,
        /// owner, box-office or door
        #[arg(long, value_parser = parse_role)]
        role: Option<crate::staff::roles::Role>,
    },
    /// Every account: e-mail, role, two-factor on or off, disabled or not
    List,
    /// Turn an account's two-factor sign-in off (a lost phone and lost
    /// recovery codes), ending its sessions; it signs in with its password
    /// and sets two-factor up again
    ResetTwoFactor { email: String },
}

fn parse_role(name: &str) -> Result<crate::staff::roles::Role, String> {
    crate::staff::roles::Role::parse(name)
        .ok_or_else(|| format!("{name:?} is not a role: owner, box-office or door"))
}

#[derive(Debug, Subcommand)]
enum CatalogueAction {
    /// Load a catalogue file (default: the demo catalogue)
    Load {
        #[arg(long, default_value = "fixtures/catalogue.json")]
        file: std::path::PathBuf,
    },
    /// Write what the shop sells now (what the admin made) as a catalogue
    /// file, times in HOLDFAST_TIME_ZONE's offset: loading it gives the
    /// same catalogue
    Export {
        /// Where to write it (default: standard output)
        #[arg(long)]
        file: Option<std::path::PathBuf>,
    },
}

#[derive(Debug, Subcommand)]
enum VoucherAction {
    /// Create a voucher (a code that exists is left as it is)
    Add(vouchers::AddArgs),
    /// Every voucher with its uses: in all, held by open checkouts, used
    List,
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
    // how long a request waits for the database in a failover (serve and
    // worker refuse bad settings themselves; other commands keep the default)
    if let Ok(server) = ServerSettings::from_env() {
        crate::retry::set_shopper_wait(server.db_wait);
    }
    let settings = DatabaseSettings::from_env()?.with_url(cli.db.clone());
    let json = cli.json;
    let max_connections = match &cli.command {
        Command::Serve { .. } => 32,
        _ => 4,
    };
    let pool = database::connect_and_migrate(&settings, max_connections).await?;

    let ctx = Ctx { pool, json };
    match cli.command {
        Command::Migrate => shop::migrate(&ctx).await,
        Command::Catalogue {
            action: CatalogueAction::Load { file },
        } => shop::catalogue_load(&ctx, file).await,
        Command::Catalogue {
            action: CatalogueAction::Export { file },
        } => shop::catalogue_export(&ctx, file).await,
        Command::Voucher {
            action: VoucherAction::Add(args),
        } => vouchers::add(&ctx, args).await,
        Command::Voucher {
            action: VoucherAction::List,
        } => vouchers::list(&ctx).await,
        Command::Staff {
            action: StaffAction::Add { email, role },
        } => shop::staff_add(&ctx, email, role).await,
        Command::Staff {
            action: StaffAction::List,
        } => shop::staff_list(&ctx).await,
        Command::Staff {
            action: StaffAction::ResetTwoFactor { email },
        } => shop::staff_reset_two_factor(&ctx, email).await,
        Command::Serve { no_worker } => shop::serve(&ctx, no_worker).await,
        Command::Worker => shop::worker(&ctx).await,
        Command::Resource { id, total } => engine::resource(&ctx, id, total).await,
        Command::Sweep { limit } => engine::sweep(&ctx, limit).await,
        Command::Show { resource } => engine::show(&ctx, resource).await,
        Command::Holds {
            resource,
            state,
            older_than,
            limit,
        } => engine::holds(&ctx, resource, state, older_than, limit).await,
        Command::Check { repair } => engine::check(&ctx, repair).await,
        Command::Refund(request) => after_sale::refund(&ctx, request).await,
        Command::Redeem { code, place } => after_sale::redeem(&ctx, code, place).await,
        Command::Settings(changes) => engine::settings(&ctx, changes).await,
        Command::Queue { action } => queue::run(&ctx, action).await,
        Command::Webhooks { action } => webhooks::run(&ctx, action).await,
        Command::ApiKeys { action } => api_keys::run(&ctx, action).await,
    }
}

/// What every command has: the database, and whether to print JSON.
pub(super) struct Ctx {
    pub pool: sqlx::PgPool,
    pub json: bool,
}

impl Ctx {
    pub fn inventory(&self) -> Inventory {
        Inventory::new(self.pool.clone())
    }
}

/// Who acts from the command line, as redemptions, refunds and changes to
/// staff accounts record it.
fn cli_actor() -> String {
    format!(
        "command line ({})",
        std::env::var("USER").unwrap_or_else(|_| "unknown user".to_owned())
    )
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
