//! Prometheus metrics for `/metrics`, in the text exposition format.
//!
//! Two kinds: counters of what this process decided (holds by outcome,
//! checkouts, confirmations, webhook verdicts, sweeps, reconciliation),
//! kept in memory and reset when the process restarts, as Prometheus
//! expects of counters; and gauges read from the database at scrape time
//! (outbox depth and oldest job, orders by state, drift per resource),
//! which are the same whichever process is asked. Those cost queries, so
//! each process keeps them for ten seconds ([`Exporter`]): a loop of
//! scrapes cannot drain the pool the shoppers need.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{LazyLock, Mutex};

use std::time::{Duration, Instant};

use sha2::{Digest, Sha256};
use sqlx::PgPool;

use crate::configuration::Secret;

/// How long a process keeps the database gauges it read.
pub const GAUGES_FRESH_FOR: Duration = Duration::from_secs(10);

/// Who may scrape `/metrics`, and the database gauges this process read
/// last. Cheap to clone; clones share the cache.
#[derive(Debug, Clone)]
pub struct Exporter {
    token: Option<Secret>,
    fresh_for: Duration,
    cached: std::sync::Arc<tokio::sync::Mutex<Option<(Instant, Gauges)>>>,
}

/// Whether a scrape may see the metrics.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Access {
    Allowed,
    /// A token is set and the request did not carry it.
    NeedsToken,
    /// No token is set and the request did not come from this machine.
    LoopbackOnly,
}

impl Exporter {
    /// `token` (`HOLDFAST_METRICS_TOKEN`) guards the page when set; unset,
    /// only clients on this machine are answered.
    pub fn new(token: Option<Secret>) -> Self {
        Self {
            token,
            fresh_for: GAUGES_FRESH_FOR,
            cached: Default::default(),
        }
    }

    /// Keep the database gauges for `fresh_for` instead (zero: read them
    /// on every scrape, for tests that count exactly).
    pub fn fresh_for(mut self, fresh_for: Duration) -> Self {
        self.fresh_for = fresh_for;
        self
    }

    /// With a token set, the request must carry `Authorization: Bearer
    /// <token>`. Without, it must come from loopback and not through a
    /// proxy: a request a local reverse proxy forwarded (it says so in
    /// `X-Forwarded-For` or `Forwarded`) came from somewhere else.
    pub fn access(
        &self,
        client_is_loopback: bool,
        authorization: Option<&[u8]>,
        forwarded: bool,
    ) -> Access {
        match &self.token {
            Some(token) => {
                let offered = authorization
                    .and_then(|value| value.strip_prefix(b"Bearer "))
                    .unwrap_or_default();
                // compare digests: equal length, no early exit on the secret
                if Sha256::digest(offered) == Sha256::digest(token.expose().as_bytes()) {
                    Access::Allowed
                } else {
                    Access::NeedsToken
                }
            }
            None if client_is_loopback && !forwarded => Access::Allowed,
            None => Access::LoopbackOnly,
        }
    }

    /// The page, reading the database gauges only when this process's copy
    /// is older than [`Exporter::fresh_for`]. Concurrent scrapes wait for
    /// one read instead of each running their own.
    pub async fn render(&self, pool: &PgPool) -> String {
        let gauges = {
            let mut cached = self.cached.lock().await;
            match &*cached {
                Some((read_at, gauges)) if read_at.elapsed() < self.fresh_for => {
                    Some(gauges.clone())
                }
                _ => {
                    let read = read_gauges(pool).await;
                    // a failed read is not kept: the next scrape tries again
                    if let Some(gauges) = &read {
                        *cached = Some((Instant::now(), gauges.clone()));
                    }
                    read
                }
            }
        };
        render_with(gauges)
    }
}

/// Hold decisions, by the engine's outcome names.
const HOLD_OUTCOMES: [&str; 5] = [
    "held",
    "replayed",
    "insufficient",
    "account_cap",
    "unknown_resource",
];

static HOLDS: [AtomicU64; 5] = [const { AtomicU64::new(0) }; 5];

/// How a kept page was asked for: answered from memory, or why it was
/// read from the database instead.
pub const PAGE_ANSWERS: [&str; 5] = ["memory", "not_kept", "untrusted", "stale", "changed"];
static PAGES: [AtomicU64; 5] = [const { AtomicU64::new(0) }; 5];

/// One ask for a page memory may keep (an entry's place in line), by
/// [`PAGE_ANSWERS`]; a counter per answer, no lock (it runs per request).
pub fn kept_page(answer: &str) {
    if let Some(i) = PAGE_ANSWERS.iter().position(|a| *a == answer) {
        PAGES[i].fetch_add(1, Ordering::Relaxed);
    }
}

/// The quieter counters, by (metric, labels).
static COUNTERS: LazyLock<Mutex<BTreeMap<(&'static str, String), u64>>> =
    LazyLock::new(Mutex::default);

/// One hold decision (direct, combined or a basket line's verdict).
pub fn hold(outcome: &str) {
    if let Some(i) = HOLD_OUTCOMES.iter().position(|o| *o == outcome) {
        HOLDS[i].fetch_add(1, Ordering::Relaxed);
    }
}

fn add(metric: &'static str, labels: String, by: u64) {
    if by == 0 {
        return;
    }
    let mut counters = COUNTERS
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner());
    *counters.entry((metric, labels)).or_insert(0) += by;
}

/// A checkout start's outcome.
pub fn checkout(outcome: &str) {
    add("holdfast_checkouts_total", label("outcome", outcome), 1);
}

/// What the confirm routine did with a payment, once committed.
pub fn confirmation(outcome: &str, source: &str) {
    add(
        "holdfast_confirmations_total",
        format!("{},{}", label("outcome", outcome), label("source", source)),
        1,
    );
}

/// A webhook's verdict.
pub fn webhook(provider: &str, verdict: &str) {
    add(
        "holdfast_webhooks_total",
        format!(
            "{},{}",
            label("provider", provider),
            label("verdict", verdict)
        ),
        1,
    );
}

/// One sweep pass and the holds it expired.
pub fn swept(holds: u64) {
    add("holdfast_sweeps_total", String::new(), 1);
    add("holdfast_swept_holds_total", String::new(), holds);
}

/// What the one rule for late money decided: `claimed_again` or
/// `refunded`.
pub fn late_money(verdict: &str) {
    add("holdfast_late_money_total", label("verdict", verdict), 1);
}

/// One reconciliation pass: how many orders ended in each result.
pub fn reconciled(results: &[(&str, u64)]) {
    for (result, count) in results {
        add(
            "holdfast_reconcile_checks_total",
            label("result", result),
            *count,
        );
    }
}

fn label(name: &str, value: &str) -> String {
    let escaped = value
        .replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n");
    format!("{name}=\"{escaped}\"")
}

const HELP: [(&str, &str, &str); 20] = [
    (
        "holdfast_kept_pages_total",
        "counter",
        "Asks for a page memory may keep (a place in line), by answer: from memory, or why the database was read (not kept yet, memory not trusted, older than its bound, its resource changed).",
    ),
    (
        "holdfast_database_retries_total",
        "counter",
        "Units of work this process ran again because the database was away, by what and why.",
    ),
    (
        "holdfast_database_gave_up_total",
        "counter",
        "Units of work that waited their whole bound for the database, by what.",
    ),
    (
        "holdfast_database_outages_total",
        "counter",
        "Spells the database was away, as this process met them.",
    ),
    (
        "holdfast_holds_total",
        "counter",
        "Hold decisions made by this process, by outcome.",
    ),
    (
        "holdfast_checkouts_total",
        "counter",
        "Checkout starts answered by this process, by outcome.",
    ),
    (
        "holdfast_confirmations_total",
        "counter",
        "Payments through the confirm routine in this process, by outcome and path.",
    ),
    (
        "holdfast_webhooks_total",
        "counter",
        "Webhooks received by this process, by provider and verdict.",
    ),
    (
        "holdfast_sweeps_total",
        "counter",
        "Sweep passes run by this process.",
    ),
    (
        "holdfast_swept_holds_total",
        "counter",
        "Holds expired by this process's sweeps.",
    ),
    (
        "holdfast_reconcile_checks_total",
        "counter",
        "Reconciliation checks by this process, by result.",
    ),
    (
        "holdfast_database_up",
        "gauge",
        "1 when the database answered this scrape.",
    ),
    (
        "holdfast_outbox_pending_jobs",
        "gauge",
        "Outbox jobs not done yet, by kind.",
    ),
    (
        "holdfast_outbox_oldest_pending_seconds",
        "gauge",
        "Age of the oldest outbox job not done yet.",
    ),
    (
        "holdfast_orders",
        "gauge",
        "Orders by state (flagged ones also under flagged=\"true\").",
    ),
    (
        "holdfast_reconcile_pending_orders",
        "gauge",
        "Orders whose final reconciliation check is still to come.",
    ),
    (
        "holdfast_late_money_total",
        "counter",
        "Payments that came after their holds ended, by what the late-money rule decided: claimed_again, refunded.",
    ),
    (
        "holdfast_holds_settling",
        "gauge",
        "Holds in the settling phase (a payment that settles in days), per resource: holds and units (both counted in held).",
    ),
    (
        "holdfast_resource_units",
        "gauge",
        "Units per resource by counter: total, held, sold.",
    ),
    (
        "holdfast_resource_drift",
        "gauge",
        "1 when a resource's counters disagree with its hold rows.",
    ),
];

/// The database gauges, or `None` when the database does not answer
/// within three seconds.
async fn read_gauges(pool: &PgPool) -> Option<Gauges> {
    tokio::time::timeout(Duration::from_secs(3), database_gauges(pool))
        .await
        .ok()
        .and_then(|result| {
            result
                .inspect_err(|error| tracing::warn!(%error, "metrics: database gauges unavailable"))
                .ok()
        })
}

/// Everything, in the text format. Database gauges are skipped (and
/// `holdfast_database_up` is 0) when they could not be read.
fn render_with(gauges: Option<Gauges>) -> String {
    let mut samples: BTreeMap<&'static str, Vec<(String, f64)>> = BTreeMap::new();
    for (i, outcome) in HOLD_OUTCOMES.iter().enumerate() {
        samples.entry("holdfast_holds_total").or_default().push((
            label("outcome", outcome),
            HOLDS[i].load(Ordering::Relaxed) as f64,
        ));
    }
    for (i, answer) in PAGE_ANSWERS.iter().enumerate() {
        samples
            .entry("holdfast_kept_pages_total")
            .or_default()
            .push((
                label("answer", answer),
                PAGES[i].load(Ordering::Relaxed) as f64,
            ));
    }
    {
        let counters = COUNTERS
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        for ((metric, labels), value) in counters.iter() {
            samples
                .entry(metric)
                .or_default()
                .push((labels.clone(), *value as f64));
        }
    }
    let retries = crate::retry::counts();
    for ((what, reason), n) in retries.retries {
        samples
            .entry("holdfast_database_retries_total")
            .or_default()
            .push((
                format!("{},{}", label("what", what), label("reason", reason)),
                n as f64,
            ));
    }
    for (what, n) in retries.gave_up {
        samples
            .entry("holdfast_database_gave_up_total")
            .or_default()
            .push((label("what", what), n as f64));
    }
    samples
        .entry("holdfast_database_outages_total")
        .or_default()
        .push((String::new(), retries.outages as f64));
    let up = gauges.is_some();
    for (metric, values) in gauges.unwrap_or_default() {
        samples.entry(metric).or_default().extend(values);
    }
    samples
        .entry("holdfast_database_up")
        .or_default()
        .push((String::new(), if up { 1.0 } else { 0.0 }));

    let mut out = String::new();
    for (name, kind, help) in HELP {
        let Some(values) = samples.get(name) else {
            continue;
        };
        let _ = writeln!(out, "# HELP {name} {help}");
        let _ = writeln!(out, "# TYPE {name} {kind}");
        for (labels, value) in values {
            if labels.is_empty() {
                let _ = writeln!(out, "{name} {value}");
            } else {
                let _ = writeln!(out, "{name}{{{labels}}} {value}");
            }
        }
    }
    out
}

type Gauges = Vec<(&'static str, Vec<(String, f64)>)>;

/// Settling holds and their units, per resource that has any.
async fn settling_gauge(pool: &PgPool) -> sqlx::Result<Vec<(String, f64)>> {
    #[derive(sqlx::FromRow)]
    struct Settling {
        resource_id: String,
        holds: i64,
        units: i64,
    }
    let rows: Vec<Settling> = sqlx::query_as(
        "select resource_id, count(*) as holds, sum(qty)::int8 as units from holds \
          where state = 'awaiting_payment' and settle_deadline is not null \
          group by resource_id order by resource_id",
    )
    .fetch_all(pool)
    .await?;
    Ok(rows
        .into_iter()
        .flat_map(|row| {
            let id = label("resource", &row.resource_id);
            [
                (
                    format!("{id},{}", label("measure", "holds")),
                    row.holds as f64,
                ),
                (
                    format!("{id},{}", label("measure", "units")),
                    row.units as f64,
                ),
            ]
        })
        .collect())
}

async fn database_gauges(pool: &PgPool) -> sqlx::Result<Gauges> {
    let mut gauges: Gauges = Vec::new();
    let jobs: Vec<(String, i64)> = sqlx::query_as(
        "select k.kind, count(j.id) from unnest(array['refund', 'order_confirmation', \
                'expire_session']) as k(kind) \
           left join outbox_jobs j on j.kind = k.kind and j.state = 'pending' \
          group by k.kind order by k.kind",
    )
    .fetch_all(pool)
    .await?;
    gauges.push((
        "holdfast_outbox_pending_jobs",
        jobs.into_iter()
            .map(|(kind, n)| (label("kind", &kind), n as f64))
            .collect(),
    ));
    let oldest: f64 = sqlx::query_scalar(
        "select coalesce(extract(epoch from now() - min(created_at))::float8, 0) \
           from outbox_jobs where state = 'pending'",
    )
    .fetch_one(pool)
    .await?;
    gauges.push((
        "holdfast_outbox_oldest_pending_seconds",
        vec![(String::new(), oldest)],
    ));
    #[derive(sqlx::FromRow)]
    struct OrdersIn {
        state: String,
        orders: i64,
    }
    let orders: Vec<OrdersIn> = sqlx::query_as(
        "select s.state, count(o.id) as orders \
           from unnest(array['pending', 'settling', 'paid', 'expired', 'cancelled', \
                             'refund_pending', 'refunded']) as s(state) \
           left join orders o on o.state = s.state group by s.state order by s.state",
    )
    .fetch_all(pool)
    .await?;
    let flagged: i64 = sqlx::query_scalar("select count(*) from orders where flag is not null")
        .fetch_one(pool)
        .await?;
    let mut order_samples: Vec<(String, f64)> = orders
        .into_iter()
        .map(|row| (label("state", &row.state), row.orders as f64))
        .collect();
    order_samples.push((label("flagged", "true"), flagged as f64));
    gauges.push(("holdfast_orders", order_samples));
    let reconcile: i64 = sqlx::query_scalar(
        "select count(*) from orders where reconciled_at is null and provider_session_id is not null",
    )
    .fetch_one(pool)
    .await?;
    gauges.push((
        "holdfast_reconcile_pending_orders",
        vec![(String::new(), reconcile as f64)],
    ));
    let rows: Vec<(String, i32, i32, i32, bool)> =
        sqlx::query_as("select resource_id, total, held, sold, drift from hf_check(null)")
            .fetch_all(pool)
            .await?;
    let mut units = Vec::new();
    let mut drift = Vec::new();
    for (resource, total, held, sold, drifted) in rows {
        let id = label("resource", &resource);
        units.push((format!("{id},{}", label("counter", "total")), total.into()));
        units.push((format!("{id},{}", label("counter", "held")), held.into()));
        units.push((format!("{id},{}", label("counter", "sold")), sold.into()));
        drift.push((id, if drifted { 1.0 } else { 0.0 }));
    }
    gauges.push(("holdfast_resource_units", units));
    gauges.push(("holdfast_holds_settling", settling_gauge(pool).await?));
    gauges.push(("holdfast_resource_drift", drift));
    Ok(gauges)
}
