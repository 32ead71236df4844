//! `holdfast-tools`: simulate, the benchmarks, the sandbox on its own.
//! `--db` or `DATABASE_URL` picks the database (without either, the private
//! cluster, as `holdfast` does); `--json` prints one JSON value.

use std::process::ExitCode;

use clap::{Parser, Subcommand};
use holdfast::cli::print;
use holdfast::configuration::{DatabaseSettings, ServerSettings};
use holdfast::database;
use holdfast::inventory::{Capacity, ResourceId, Span};
use holdfast::payments::ProviderKind as Provider;
use holdfast_tools::{bench, simulate};

/// Exit code of `simulate` when its ledger finds a violation.
const EXIT_VIOLATION: u8 = 4;

#[derive(Debug, Parser)]
#[command(
    name = "holdfast-tools",
    version,
    about = "Holdfast's simulate, benchmarks and provider sandbox"
)]
struct Cli {
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
    /// Run the provider sandbox on its own (Stripe's API under /stripe)
    Sandbox {
        #[arg(long, default_value_t = 8081)]
        port: u16,
        /// Where to deliver webhooks (default: HOLDFAST_BASE_URL/webhooks/stripe)
        #[arg(long)]
        webhook_url: Option<String>,
    },
    /// Seeded shoppers through the sandbox against few units; prints the
    /// ledger (exit 4 on any violation). Uses its own database,
    /// holdfast_simulate, recreated each run.
    Simulate {
        #[arg(long, default_value_t = 2000)]
        shoppers: usize,
        #[arg(long, default_value_t = 1)]
        seed: u64,
        #[arg(long, value_enum, default_value_t = SimProvider::Both)]
        provider: SimProvider,
        /// Units across the four products (default: shoppers / 5, at least 8)
        #[arg(long)]
        units: Option<i64>,
        /// Shoppers acting at once; 1 (the default) keeps a seed's ledger
        /// the same from run to run
        #[arg(long, default_value_t = 1)]
        lanes: usize,
        /// The database to recreate for the run
        #[arg(long, default_value = "holdfast_simulate")]
        database: String,
        /// Leave reconciliation out, to see what it saves (expect violations)
        #[arg(long)]
        without_reconciliation: bool,
    },
    /// Race buyers for a few units on a fresh resource
    Bench {
        #[arg(long, default_value_t = 10, allow_negative_numbers = true)]
        units: i64,
        #[arg(long, default_value_t = 500)]
        buyers: usize,
        /// Run the read-then-write implementation instead of the engine
        #[arg(long)]
        naive: bool,
        /// Database connections the buyers share
        #[arg(long, default_value_t = 64)]
        connections: u32,
    },
    /// A crowd of shoppers for one product of a running shop, paying at
    /// the Stripe sandbox, until it is sold for good; then the ledger
    /// (exit 4 if it does not hold). See bench/flash-sale.
    FlashSale(FlashSaleArgs),
    /// Pages watching one product of a running shop over server-sent
    /// events, and how fast a capacity change reaches every one of them
    Watch {
        /// The shop (http://host:port)
        #[arg(long)]
        shop: String,
        #[arg(long)]
        product: String,
        #[arg(long, default_value_t = 5_000)]
        streams: usize,
        #[arg(long, default_value_t = 5)]
        changes: usize,
    },
    /// Holds per second on one resource
    Throughput(ThroughputArgs),
    /// Prepared API checkouts (JSON lines of {"key", "body"} on stdin)
    /// sent to a running shop at one moment; each answer, timed from it,
    /// a JSON line on stdout (bench/table-drop)
    Fire {
        /// The shop (http://host:port)
        #[arg(long)]
        shop: String,
        /// The moment (RFC 3339; default: now)
        #[arg(long)]
        at: Option<chrono::DateTime<chrono::Utc>>,
        #[arg(long, default_value_t = 64)]
        connections: usize,
    },
}

// The flags of `flash-sale` (its help is the variant's, above).
#[derive(Debug, clap::Args)]
struct FlashSaleArgs {
    /// The shop
    #[arg(long)]
    shop: String,
    /// The Stripe sandbox (`holdfast-tools sandbox`), with /stripe
    #[arg(long)]
    sandbox: String,
    #[arg(long)]
    product: String,
    /// The collection whose page the crowd browses
    #[arg(long)]
    collection: String,
    #[arg(long, default_value_t = 10_000)]
    shoppers: usize,
    /// Shoppers on their way at once
    #[arg(long, default_value_t = 1_000)]
    concurrency: usize,
    /// Share of winners who leave the payment page instead of paying
    #[arg(long, default_value_t = 0.05)]
    abandon: f64,
    /// Give up after this many seconds
    #[arg(long, default_value_t = 300)]
    limit: u64,
    /// Instead of the crowd, the payment burst: --shoppers check out,
    /// --concurrency at a time, then all pay at once and the webhooks
    /// confirm; prints grants/s and confirmations/s
    #[arg(long)]
    burst: bool,
    /// In the burst, every shopper comes back to the shop after paying
    /// (the returns confirm too, racing the webhooks)
    #[arg(long, requires = "burst")]
    returns: bool,
}

// The flags of `throughput` (its help is the variant's, above).
#[derive(Debug, clap::Args)]
struct ThroughputArgs {
    #[arg(long, default_value_t = 5.0)]
    seconds: f64,
    #[arg(long, default_value_t = 32)]
    concurrency: usize,
    /// An existing resource (default: a fresh one with room for everything)
    #[arg(long)]
    resource: Option<String>,
    /// TTL of each hold (e.g. 1s, for expiry churn); default: the setting
    #[arg(long)]
    ttl: Option<String>,
    /// How often a sweeper runs alongside (default: every second with --ttl)
    #[arg(long)]
    sweep_every: Option<String>,
    /// Also print holds granted in each second
    #[arg(long)]
    per_second: bool,
    /// Take holds through the combiner (concurrent holds share calls)
    #[arg(long)]
    combine: bool,
    /// Run the direct path, the combiner and neveroversell's nos_hold
    /// (fetched from PyPI, in its own database on the same server) one
    /// after another with the same callers, and print the ratios
    #[arg(long, conflicts_with_all = ["combine", "resource"])]
    compare_neveroversell: bool,
}

#[derive(Debug, Clone, Copy, clap::ValueEnum)]
enum SimProvider {
    Stripe,
    Razorpay,
    Both,
}

#[tokio::main]
async fn main() -> ExitCode {
    let cli = Cli::parse();
    holdfast::telemetry::init("warn,sqlx::pool::acquire=error");
    match run(cli).await {
        Ok(code) => code,
        Err(error) => {
            eprintln!("holdfast-tools: {error:#}");
            ExitCode::FAILURE
        }
    }
}

async fn run(cli: Cli) -> anyhow::Result<ExitCode> {
    let json = cli.json;
    let settings =
        || Ok::<_, anyhow::Error>(DatabaseSettings::from_env()?.with_url(cli.db.clone()));
    match cli.command {
        // the sandbox stands in for a provider: it needs no database
        Command::Sandbox { port, webhook_url } => {
            let server = ServerSettings::from_env()?;
            let mut sandbox = holdfast_sandbox::SandboxSettings::development();
            sandbox.razorpay_webhook_url = Some(
                webhook_url
                    .as_ref()
                    .map(|url| url.replace("/webhooks/stripe", "/webhooks/razorpay"))
                    .unwrap_or_else(|| format!("{}/webhooks/razorpay", server.base_url)),
            );
            sandbox.stripe_webhook_url =
                Some(webhook_url.unwrap_or_else(|| format!("{}/webhooks/stripe", server.base_url)));
            let addr = std::net::SocketAddr::from(([127, 0, 0, 1], port));
            let listener = std::net::TcpListener::bind(addr)
                .map_err(|e| anyhow::anyhow!("cannot listen on {addr}: {e}"))?;
            let sandbox =
                holdfast_sandbox::Sandbox::build(listener, sandbox, format!("http://{addr}"))?;
            println!(
                "sandbox: Stripe API at {} (its test keys: docs/sandbox.md)",
                sandbox.stripe.api_base()
            );
            sandbox.run_until_stopped().await?;
        }
        Command::Simulate {
            shoppers,
            seed,
            provider,
            units,
            lanes,
            database: name,
            without_reconciliation,
        } => {
            let providers = match provider {
                SimProvider::Stripe => vec![Provider::Stripe],
                SimProvider::Razorpay => vec![Provider::Razorpay],
                SimProvider::Both => vec![Provider::Stripe, Provider::Razorpay],
            };
            let pool = database::recreate(&settings()?, &name, 32).await?;
            let options = simulate::SimulateOptions {
                shoppers,
                seed,
                providers,
                units,
                lanes,
                reconcile: !without_reconciliation,
            };
            let ledger = simulate::run(pool, &options).await?;
            print(json, &ledger, || ledger.text());
            if !ledger.violations.is_empty() {
                return Ok(ExitCode::from(EXIT_VIOLATION));
            }
        }
        Command::Bench {
            units,
            buyers,
            naive,
            connections,
        } => {
            let pool = database::connect_and_migrate(&settings()?, connections).await?;
            let report = bench::race(pool, Capacity::parse(units)?, buyers, naive).await?;
            print(json, &report, || report.line());
        }
        Command::FlashSale(args) => return flash_sale(json, &settings, args).await,
        Command::Watch {
            shop,
            product,
            streams,
            changes,
        } => {
            anyhow::ensure!(
                streams > 0 && changes > 0,
                "--streams and --changes must be at least 1"
            );
            let pool = database::connect_and_migrate(&settings()?, 2).await?;
            let report =
                holdfast_tools::watch::watch(pool, &shop, &product, streams, changes).await?;
            print(json, &report, || report.lines());
            if report.missed > 0 {
                return Ok(ExitCode::from(4));
            }
        }
        Command::Throughput(args) => throughput(json, &settings, args).await?,
        Command::Fire {
            shop,
            at,
            connections,
        } => {
            let token = std::env::var("HOLDFAST_API_TOKEN")
                .map_err(|_| anyhow::anyhow!("set HOLDFAST_API_TOKEN to the API key's token"))?;
            let shots = std::io::read_to_string(std::io::stdin())?
                .lines()
                .filter(|l| !l.trim().is_empty())
                .map(serde_json::from_str)
                .collect::<Result<Vec<holdfast_tools::fire::Shot>, _>>()?;
            let at = at.unwrap_or_else(chrono::Utc::now);
            let answers = holdfast_tools::fire::fire(&shop, &token, shots, at, connections).await?;
            for answer in answers {
                println!("{}", serde_json::to_string(&answer)?);
            }
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// `flash-sale`: the crowd, or the payment burst; exit 4 when its ledger
/// does not hold.
async fn flash_sale(
    json: bool,
    settings: &impl Fn() -> anyhow::Result<DatabaseSettings>,
    args: FlashSaleArgs,
) -> anyhow::Result<ExitCode> {
    let FlashSaleArgs {
        shop,
        sandbox,
        product,
        collection,
        shoppers,
        concurrency,
        abandon,
        limit,
        burst,
        returns,
    } = args;
    anyhow::ensure!(
        (0.0..=1.0).contains(&abandon),
        "--abandon is a share from 0 to 1"
    );
    anyhow::ensure!(
        shoppers > 0 && concurrency > 0,
        "--shoppers and --concurrency must be at least 1"
    );
    let pool = database::connect_and_migrate(&settings()?, 4).await?;
    let options = holdfast_tools::flash::FlashOptions {
        shop: shop.trim_end_matches('/').to_owned(),
        sandbox: sandbox.trim_end_matches('/').to_owned(),
        product,
        collection,
        shoppers,
        concurrency,
        abandon,
        limit: std::time::Duration::from_secs(limit),
        returns,
    };
    if burst {
        let report = holdfast_tools::flash::burst(pool, options).await?;
        print(json, &report, || report.lines());
        if report.paid != report.orders as i64 || report.drifting_resources != 0 {
            return Ok(ExitCode::from(4));
        }
        return Ok(ExitCode::SUCCESS);
    }
    let report = holdfast_tools::flash::run(pool, options).await?;
    print(json, &report, || report.lines());
    if !report.holds() {
        return Ok(ExitCode::from(4));
    }
    Ok(ExitCode::SUCCESS)
}

/// `throughput`: holds per second on one resource, or the comparison with
/// neveroversell.
async fn throughput(
    json: bool,
    settings: &impl Fn() -> anyhow::Result<DatabaseSettings>,
    args: ThroughputArgs,
) -> anyhow::Result<()> {
    let ThroughputArgs {
        seconds,
        concurrency,
        resource,
        ttl,
        sweep_every,
        per_second,
        combine,
        compare_neveroversell,
    } = args;
    let connections = (concurrency as u32).clamp(2, 500) + 2;
    let pool = database::connect_and_migrate(&settings()?, connections).await?;
    let options = bench::ThroughputOptions {
        seconds,
        concurrency,
        resource: resource.as_deref().map(ResourceId::parse).transpose()?,
        ttl: ttl
            .as_deref()
            .map(|t| Span::parse_text("--ttl", t))
            .transpose()?,
        sweep_every: sweep_every
            .as_deref()
            .map(|t| Span::parse_text("--sweep-every", t))
            .transpose()?,
        path: if combine {
            bench::HoldPath::Combined
        } else {
            bench::HoldPath::Direct
        },
    };
    if compare_neveroversell {
        let comparison = bench::compare(pool, options).await?;
        print(json, &comparison, || comparison.lines());
        return Ok(());
    }
    let report = bench::throughput(pool, options).await?;
    if json {
        let mut value = serde_json::json!({
            "holds": report.holds,
            "seconds": report.seconds,
            "holds_per_second": report.holds_per_second,
            "p50_ms": report.p50_ms,
            "p99_ms": report.p99_ms,
        });
        if per_second {
            value["per_second"] = serde_json::json!(report.per_second);
        }
        println!("{value}");
    } else {
        println!("{}", report.line());
        if per_second {
            for (second, holds) in report.per_second.iter().enumerate() {
                println!("  second {:>3}: {holds} holds", second + 1);
            }
        }
    }
    Ok(())
}
