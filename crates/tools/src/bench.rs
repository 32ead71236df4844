//! `bench` and `throughput`: the figures docs/benchmarks.md quotes.
//! Benchmarks print numbers; tests assert behaviour. Nothing here is timed
//! inside a test.

use std::sync::Arc;
use std::time::{Duration, Instant};

use serde::Serialize;
use sqlx::PgPool;
use tokio::sync::Barrier;
use uuid::Uuid;

use crate::naive::NaiveInventory;
use holdfast::inventory::HoldBatches;
use holdfast::inventory::{
    AccountId, Capacity, HoldOutcome, HoldRequest, Inventory, Quantity, ResourceId, Span,
};
use holdfast::worker::Sweeper;

/// One `bench` run. The JSON keys are exactly these.
#[derive(Debug, Clone, Serialize)]
pub struct BenchReport {
    pub buyers: usize,
    pub units: i64,
    /// Buyers who were told they got a unit.
    pub held: i64,
    /// Units held beyond the total, counted from the hold rows.
    pub oversold: i64,
    /// How far the counters are from the rows.
    pub drift: i64,
    pub elapsed_ms: u64,
}

impl BenchReport {
    pub fn line(&self) -> String {
        format!(
            "{} buyers · {} units · held {} · oversold {} · drift {} · {} ms",
            self.buyers, self.units, self.held, self.oversold, self.drift, self.elapsed_ms
        )
    }
}

/// Race `buyers` concurrent buyers of one unit each for `units` units of a
/// fresh resource, released together by a barrier.
pub async fn race(
    pool: PgPool,
    units: Capacity,
    buyers: usize,
    naive: bool,
) -> anyhow::Result<BenchReport> {
    let resource = ResourceId::parse(&format!("bench-{}", Uuid::new_v4()))?;
    let one = Quantity::parse(1)?;
    let barrier = Arc::new(Barrier::new(buyers + 1));
    let engine = Inventory::new(pool.clone());
    let baseline = NaiveInventory::new(pool);
    if naive {
        baseline.create_resource(&resource, units).await?;
    } else {
        engine.upsert_resource(&resource, units).await?;
    }

    let mut tasks = Vec::with_capacity(buyers);
    for buyer in 0..buyers {
        let barrier = barrier.clone();
        let (engine, baseline, resource) = (engine.clone(), baseline.clone(), resource.clone());
        tasks.push(tokio::spawn(async move {
            let account = AccountId::parse(&format!("buyer-{buyer}"))?;
            barrier.wait().await;
            let granted = if naive {
                baseline.hold(&resource, one, &account).await?
            } else {
                let request = HoldRequest {
                    resource,
                    qty: one,
                    account,
                    idempotency_key: None,
                    ttl: None,
                };
                matches!(engine.hold(&request).await?, HoldOutcome::Held { .. })
            };
            anyhow::Ok(granted)
        }));
    }
    barrier.wait().await;
    let started = Instant::now();
    let mut held = 0;
    for task in tasks {
        if task.await?? {
            held += 1;
        }
    }
    let elapsed_ms = started.elapsed().as_millis() as u64;

    let (rows, drift) = if naive {
        let rows = baseline.units_held(&resource).await?;
        (rows, (baseline.counter(&resource).await? - rows).abs())
    } else {
        let check = engine.check(Some(&resource)).await?;
        let row = check
            .first()
            .ok_or_else(|| anyhow::anyhow!("the bench resource vanished"))?;
        let rows = i64::from(row.rows_held + row.rows_sold);
        let drift = i64::from((row.held - row.rows_held).abs() + (row.sold - row.rows_sold).abs());
        (rows, drift)
    };
    let units = i64::from(units.get());
    Ok(BenchReport {
        buyers,
        units,
        held,
        oversold: (rows - units).max(0),
        drift,
        elapsed_ms,
    })
}

/// How `throughput`'s callers take their holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum HoldPath {
    /// One `hf_hold` call per hold.
    Direct,
    /// Through the combiner: concurrent holds share calls.
    Combined,
    /// neveroversell's `nos_hold`, in its own database on the same server.
    Neveroversell,
}

#[derive(Debug, Clone)]
pub struct ThroughputOptions {
    pub seconds: f64,
    pub concurrency: usize,
    pub resource: Option<ResourceId>,
    pub ttl: Option<Span>,
    pub sweep_every: Option<Span>,
    pub path: HoldPath,
}

#[derive(Debug, Clone, Serialize)]
pub struct ThroughputReport {
    pub holds: u64,
    pub refused: u64,
    pub seconds: f64,
    pub holds_per_second: f64,
    pub p50_ms: f64,
    pub p99_ms: f64,
    /// Holds granted in each whole second of the run.
    pub per_second: Vec<u64>,
}

impl ThroughputReport {
    pub fn line(&self) -> String {
        format!(
            "{} holds in {:.1} s on one resource · {:.0} holds/s · p50 {:.2} ms · p99 {:.2} ms{}",
            self.holds,
            self.seconds,
            self.holds_per_second,
            self.p50_ms,
            self.p99_ms,
            if self.refused > 0 {
                format!(" · {} refused", self.refused)
            } else {
                String::new()
            }
        )
    }
}

/// `concurrency` callers hold one unit at a time on one resource for
/// `seconds`, with a sweeper alongside when holds have a short TTL.
pub async fn throughput(
    pool: PgPool,
    options: ThroughputOptions,
) -> anyhow::Result<ThroughputReport> {
    if !(options.seconds > 0.0 && options.seconds <= 3600.0) {
        anyhow::bail!("--seconds must be between 0 and 3600");
    }
    if options.concurrency == 0 || options.concurrency > 500 {
        anyhow::bail!("--concurrency must be between 1 and 500");
    }
    if options.path == HoldPath::Neveroversell {
        return neveroversell_throughput(pool, &options).await;
    }
    let engine = Inventory::new(pool.clone());
    let combiner = HoldBatches::new(pool);
    let resource = match options.resource.clone() {
        Some(resource) => {
            if engine.status(&resource).await?.is_none() {
                anyhow::bail!("no resource {resource:?}");
            }
            resource
        }
        None => {
            let resource = ResourceId::parse(&format!("throughput-{}", Uuid::new_v4()))?;
            engine
                .upsert_resource(&resource, Capacity::parse(i64::from(i32::MAX / 2))?)
                .await?;
            resource
        }
    };
    let sweep_every = options
        .sweep_every
        .or(options
            .ttl
            .map(|_| Span::parse("sweep interval", Duration::from_secs(1)))
            .transpose()?)
        .map(Span::get);
    let sweeper = sweep_every.map(|every| {
        tokio::spawn(Sweeper::new(engine.clone(), "sweeper:throughput").run_forever(every))
    });

    let run_for = Duration::from_secs_f64(options.seconds);
    let start = Instant::now();
    let mut workers = Vec::with_capacity(options.concurrency);
    for worker in 0..options.concurrency {
        let (engine, combiner, resource) = (engine.clone(), combiner.clone(), resource.clone());
        let ttl = options.ttl;
        let path = options.path;
        workers.push(tokio::spawn(async move {
            let account = AccountId::parse(&format!("throughput-{worker}"))?;
            let request = HoldRequest {
                resource,
                qty: Quantity::parse(1)?,
                account,
                idempotency_key: None,
                ttl,
            };
            let mut latencies = Vec::new();
            let mut granted_at = Vec::new();
            let mut refused = 0u64;
            while start.elapsed() < run_for {
                let began = Instant::now();
                let outcome = match path {
                    HoldPath::Combined => combiner.hold(request.clone()).await?,
                    _ => engine.hold(&request).await?,
                };
                latencies.push(began.elapsed());
                match outcome {
                    HoldOutcome::Held { .. } => granted_at.push(start.elapsed()),
                    _ => refused += 1,
                }
            }
            anyhow::Ok((latencies, granted_at, refused))
        }));
    }
    let report = collect(workers, start, &options).await;
    if let Some(sweeper) = sweeper {
        sweeper.abort();
    }
    report
}

type WorkerResult = anyhow::Result<(Vec<Duration>, Vec<Duration>, u64)>;

/// Latencies and grant times from every caller, as one report.
async fn collect(
    workers: Vec<tokio::task::JoinHandle<WorkerResult>>,
    start: Instant,
    options: &ThroughputOptions,
) -> anyhow::Result<ThroughputReport> {
    let mut latencies = Vec::new();
    let mut granted_at = Vec::new();
    let mut refused = 0;
    for worker in workers {
        let (l, g, r) = worker.await??;
        latencies.extend(l);
        granted_at.extend(g);
        refused += r;
    }
    let seconds = start.elapsed().as_secs_f64();

    latencies.sort();
    let percentile = |p: f64| -> f64 {
        if latencies.is_empty() {
            return 0.0;
        }
        let index = ((latencies.len() as f64 - 1.0) * p).round() as usize;
        latencies[index].as_secs_f64() * 1000.0
    };
    let whole_seconds = options.seconds.ceil() as usize;
    let mut per_second = vec![0u64; whole_seconds.max(1)];
    for at in &granted_at {
        let bucket = (at.as_secs() as usize).min(per_second.len() - 1);
        per_second[bucket] += 1;
    }
    let holds = granted_at.len() as u64;
    Ok(ThroughputReport {
        holds,
        refused,
        seconds,
        holds_per_second: holds as f64 / seconds,
        p50_ms: percentile(0.50),
        p99_ms: percentile(0.99),
        per_second,
    })
}

/// neveroversell 0.1.0's SQL, in its own database on the same server, driven
/// by the same number of callers for the same time (`nos_hold`, one unit,
/// no key, the same TTL).
async fn neveroversell_throughput(
    pool: PgPool,
    options: &ThroughputOptions,
) -> anyhow::Result<ThroughputReport> {
    use anyhow::Context;

    let sql = neveroversell_sql()?;
    let database = "holdfast_neveroversell_bench";
    sqlx::query(&format!("drop database if exists {database} with (force)"))
        .execute(&pool)
        .await?;
    // a fixed identifier: DDL takes no bind parameters
    sqlx::query(&format!("create database {database}"))
        .execute(&pool)
        .await?;
    let nos = sqlx::postgres::PgPoolOptions::new()
        .max_connections(options.concurrency as u32 + 2)
        .connect_with(pool.connect_options().as_ref().clone().database(database))
        .await?;
    for file in ["001_schema.sql", "002_functions.sql", "003_views.sql"] {
        let text = std::fs::read_to_string(sql.join(file))
            .with_context(|| format!("cannot read neveroversell's {file}"))?;
        sqlx::raw_sql(&text).execute(&nos).await?;
    }
    sqlx::query("select nos_upsert_resource('hot', $1)")
        .bind(i32::MAX / 2)
        .execute(&nos)
        .await?;
    let run_for = Duration::from_secs_f64(options.seconds);
    let start = Instant::now();
    let mut workers = Vec::with_capacity(options.concurrency);
    for worker in 0..options.concurrency {
        let nos = nos.clone();
        let ttl = options.ttl.map(Span::seconds);
        workers.push(tokio::spawn(async move {
            let account = format!("throughput-{worker}");
            let mut latencies = Vec::new();
            let mut granted_at = Vec::new();
            let mut refused = 0u64;
            while start.elapsed() < run_for {
                let began = Instant::now();
                let status: String = sqlx::query_scalar(
                    "select (nos_hold('hot', 1, $1, null, $2::float8 * interval '1 second')).status",
                )
                .bind(&account)
                .bind(ttl)
                .fetch_one(&nos)
                .await?;
                latencies.push(began.elapsed());
                if status == "held" {
                    granted_at.push(start.elapsed());
                } else {
                    refused += 1;
                }
            }
            anyhow::Ok((latencies, granted_at, refused))
        }));
    }
    let report = collect(workers, start, options).await;
    nos.close().await;
    report
}

/// SHA-256 of neveroversell-0.1.0-py3-none-any.whl on PyPI.
const NEVEROVERSELL_WHEEL_SHA256: &str =
    "6c17b9be26d2e0ed1918a19fccb329c931b39911301696932196c1cee2c103a4";

/// Where neveroversell's SQL files are: `HOLDFAST_NEVEROVERSELL_SQL`, else
/// `.holdfast/neveroversell/neveroversell/sql`, fetched from PyPI with pip
/// on first use (its code is read at run time, never copied here).
fn neveroversell_sql() -> anyhow::Result<std::path::PathBuf> {
    use std::path::PathBuf;
    use std::process::Command;

    if let Ok(dir) = std::env::var("HOLDFAST_NEVEROVERSELL_SQL") {
        return Ok(PathBuf::from(dir));
    }
    let home = PathBuf::from(".holdfast/neveroversell");
    let sql = home.join("neveroversell/sql");
    if sql.join("002_functions.sql").exists() {
        return Ok(sql);
    }
    std::fs::create_dir_all(&home)?;
    // pinned to the wheel's hash: pip refuses anything else
    let requirements = home.join("requirements.txt");
    std::fs::write(
        &requirements,
        format!("neveroversell==0.1.0 --hash=sha256:{NEVEROVERSELL_WHEEL_SHA256}\n"),
    )?;
    let fetched = Command::new("python3")
        .args([
            "-m",
            "pip",
            "download",
            "--quiet",
            "--no-deps",
            "--require-hashes",
            "-r",
        ])
        .arg(&requirements)
        .arg("-d")
        .arg(&home)
        .status()
        .is_ok_and(|s| s.success());
    let wheel = home.join("neveroversell-0.1.0-py3-none-any.whl");
    let unpacked = fetched
        && Command::new("python3")
            .args(["-m", "zipfile", "-e"])
            .arg(&wheel)
            .arg(&home)
            .status()
            .is_ok_and(|s| s.success());
    if !unpacked || !sql.join("002_functions.sql").exists() {
        anyhow::bail!(
            "neveroversell's SQL is not at {} and pip could not fetch it; run \
             `python3 -m pip download --no-deps neveroversell==0.1.0` and unzip the wheel, \
             or set HOLDFAST_NEVEROVERSELL_SQL to its sql folder",
            sql.display()
        );
    }
    Ok(sql)
}

/// `throughput --compare-neveroversell`: three runs in one process against
/// one server, the same callers and seconds each.
#[derive(Debug, Clone, Serialize)]
pub struct Comparison {
    pub concurrency: usize,
    pub direct: ThroughputReport,
    pub combined: ThroughputReport,
    pub neveroversell: ThroughputReport,
    /// Combined holds per second over neveroversell's.
    pub combined_vs_neveroversell: f64,
    /// Combined holds per second over the direct path's.
    pub combined_vs_direct: f64,
}

impl Comparison {
    pub fn lines(&self) -> String {
        format!(
            "{} callers, one hot resource each run\n\
             direct         {}\n\
             combined       {}\n\
             neveroversell  {}\n\
             combined / neveroversell = {:.1}×, combined / direct = {:.1}×",
            self.concurrency,
            self.direct.line(),
            self.combined.line(),
            self.neveroversell.line(),
            self.combined_vs_neveroversell,
            self.combined_vs_direct,
        )
    }
}

pub async fn compare(pool: PgPool, options: ThroughputOptions) -> anyhow::Result<Comparison> {
    let run = |path| {
        let options = ThroughputOptions {
            path,
            ..options.clone()
        };
        throughput(pool.clone(), options)
    };
    let direct = run(HoldPath::Direct).await?;
    let combined = run(HoldPath::Combined).await?;
    let neveroversell = run(HoldPath::Neveroversell).await?;
    let ratio = |a: &ThroughputReport, b: &ThroughputReport| {
        if b.holds_per_second > 0.0 {
            a.holds_per_second / b.holds_per_second
        } else {
            f64::INFINITY
        }
    };
    Ok(Comparison {
        concurrency: options.concurrency,
        combined_vs_neveroversell: ratio(&combined, &neveroversell),
        combined_vs_direct: ratio(&combined, &direct),
        direct,
        combined,
        neveroversell,
    })
}
