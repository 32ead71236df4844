//! Riding through a failover. When the primary is lost (a machine dies,
//! Patroni switches over, a managed database fails over), every connection
//! to it breaks and, for ten seconds or so, there is nobody to connect to;
//! then the endpoint (HAProxy, a managed database's DNS name) leads to the
//! new primary. What a shopper, a provider or the worker was doing then is
//! not lost: each unit of work (a transaction, or a read) is run again,
//! whole, until it goes through or its bound runs out.
//!
//! - **What is retried**: connection-class failures (I/O, a pool that
//!   found no connection in time, SQLSTATE class 08, 57P01–57P03 as a
//!   server shuts down, 25006 from a node that was demoted under us, 53300
//!   while too many connect at once) and 40001/40P01 (serialization and
//!   deadlock, where PostgreSQL rolled the transaction back). Business
//!   answers, constraint violations among them, are never retried.
//! - **Unknown outcomes**: a failure at or after COMMIT may have committed.
//!   Every unit retried here is written so that running it again is safe
//!   and says what the first run did: it carries the same idempotency key
//!   (a checkout key and its order token, a webhook's event id, a refund's
//!   key, an outbox job's dedupe key, a redemption's attempt id) and reads
//!   back what a committed first run wrote rather than doing it twice.
//! - **Connections to a demoted node** are dropped: once a failure says the
//!   primary went away, no connection made before it is handed out again
//!   ([`still_good`], the pool's `before_acquire`).
//! - **Told once**: the first retry after a quiet spell logs that the
//!   database is away, the first success after it how long it was; every
//!   retry is counted in `/metrics`.
//!
//! It depends on nothing else in the crate: the batches, the database and
//! every use case call it.

use std::collections::BTreeMap;
use std::future::Future;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// How long a unit of work may wait for the database to come back.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Bound {
    /// A shopper's request: longer than a failover takes
    /// (`HOLDFAST_DB_WAIT_SECONDS`, default 20), then the "one moment" page.
    Shopper,
    /// A provider's webhook: shorter than the provider waits for an
    /// answer, then 503 (the provider sends it again).
    Webhook,
    /// The worker's passes, which come round again on their own.
    Worker,
}

/// The bounds, in milliseconds; set once at start ([`set_shopper_wait`]).
static SHOPPER_WAIT_MS: AtomicU64 = AtomicU64::new(20_000);
const WEBHOOK_WAIT: Duration = Duration::from_secs(4);
const WORKER_WAIT: Duration = Duration::from_secs(5);

/// `HOLDFAST_DB_WAIT_SECONDS`: how long a shopper's request waits.
pub fn set_shopper_wait(wait: Duration) {
    SHOPPER_WAIT_MS.store(
        u64::try_from(wait.as_millis()).unwrap_or(u64::MAX),
        Ordering::Relaxed,
    );
}

impl Bound {
    pub fn wait(self) -> Duration {
        match self {
            Bound::Shopper => Duration::from_millis(SHOPPER_WAIT_MS.load(Ordering::Relaxed)),
            Bound::Webhook => WEBHOOK_WAIT,
            Bound::Worker => WORKER_WAIT,
        }
    }
}

/// What a failure means for trying again.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Failure {
    /// The database was away or rolled the work back: run it again whole.
    Transient(&'static str),
    /// An answer, or a failure another try will not mend.
    Final,
}

/// An error that can say whether the database was away.
pub trait Retryable {
    fn failure(&self) -> Failure;
}

impl Retryable for sqlx::Error {
    fn failure(&self) -> Failure {
        classify(self)
    }
}

/// What a sqlx failure means for trying again.
pub fn classify(error: &sqlx::Error) -> Failure {
    match error {
        sqlx::Error::Io(_) => Failure::Transient("io"),
        sqlx::Error::PoolTimedOut => Failure::Transient("pool_timed_out"),
        sqlx::Error::WorkerCrashed => Failure::Transient("worker_crashed"),
        sqlx::Error::Tls(_) => Failure::Transient("tls"),
        sqlx::Error::Database(db) => match db.code().as_deref() {
            Some(code) if code.starts_with("08") => Failure::Transient("connection"),
            Some("57P01" | "57P02" | "57P03") => Failure::Transient("shutdown"),
            Some("25006") => Failure::Transient("read_only"),
            Some("53300") => Failure::Transient("too_many_connections"),
            Some("40001") => Failure::Transient("serialization"),
            Some("40P01") => Failure::Transient("deadlock"),
            _ => Failure::Final,
        },
        _ => Failure::Final,
    }
}

/// Run `work` until it succeeds, fails for good, or `bound` has passed
/// while the database was away; the last failure is returned then. `what`
/// names the work in the metrics.
pub async fn retry<T, E, F, Fut>(what: &'static str, bound: Bound, mut work: F) -> Result<T, E>
where
    E: Retryable,
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<T, E>>,
{
    let started = Instant::now();
    let mut pause = Duration::from_millis(50);
    let mut waited = false;
    loop {
        match work().await {
            Ok(done) => {
                if waited {
                    back_again();
                }
                return Ok(done);
            }
            Err(error) => {
                let Failure::Transient(reason) = error.failure() else {
                    return Err(error);
                };
                note_disruption(reason);
                count(&RETRIES, (what, reason));
                if started.elapsed() + pause > bound.wait() {
                    count(&GAVE_UP, (what, ""));
                    return Err(error);
                }
                waited = true;
                tokio::time::sleep(pause).await;
                pause = (pause * 2).min(Duration::from_secs(1));
            }
        }
    }
}

/// Retries so far, by (what, reason); units that gave up, by what; spells
/// away. `/metrics` shows them ([`counts`]).
type Tally = Mutex<BTreeMap<(&'static str, &'static str), u64>>;
static RETRIES: Tally = Mutex::new(BTreeMap::new());
static GAVE_UP: Tally = Mutex::new(BTreeMap::new());
static OUTAGES: AtomicU64 = AtomicU64::new(0);

fn count(tally: &Tally, key: (&'static str, &'static str)) {
    *tally
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .entry(key)
        .or_insert(0) += 1;
}

/// What the retries did in this process, for `/metrics`.
#[derive(Debug, Clone, Default)]
pub struct Counts {
    /// ((what, reason), retries)
    pub retries: Vec<((&'static str, &'static str), u64)>,
    /// (what, units that waited their whole bound and failed)
    pub gave_up: Vec<(&'static str, u64)>,
    /// Spells the database was away.
    pub outages: u64,
}

pub fn counts() -> Counts {
    let read = |tally: &Tally| {
        tally
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .iter()
            .map(|(k, v)| (*k, *v))
            .collect::<Vec<_>>()
    };
    Counts {
        retries: read(&RETRIES),
        gave_up: read(&GAVE_UP)
            .into_iter()
            .map(|((what, _), n)| (what, n))
            .collect(),
        outages: OUTAGES.load(Ordering::Relaxed),
    }
}

/// When the primary was last seen to go away, in milliseconds since
/// [`EPOCH`]; 0: never.
static DISRUPTED_AT: AtomicU64 = AtomicU64::new(0);
static EPOCH: std::sync::LazyLock<Instant> = std::sync::LazyLock::new(Instant::now);
/// The spell the database has been away: since when, and how many retries.
static AWAY: Mutex<Option<(Instant, u64)>> = Mutex::new(None);

fn since_epoch() -> u64 {
    u64::try_from(EPOCH.elapsed().as_millis()).unwrap_or(u64::MAX)
}

/// A failure says the primary may be gone: connections made before now are
/// not handed out again, and the spell is logged once.
fn note_disruption(reason: &'static str) {
    // the server went away (not a busy pool, a rollback or a crowd at
    // the door): connections made before now may lead to a demoted node
    if matches!(reason, "io" | "connection" | "shutdown" | "read_only") {
        DISRUPTED_AT.store(since_epoch().max(1), Ordering::Relaxed);
    }
    let mut away = AWAY.lock().unwrap_or_else(|p| p.into_inner());
    match away.as_mut() {
        Some((_, retries)) => *retries += 1,
        None => {
            tracing::warn!(
                reason,
                wait = ?Bound::Shopper.wait(),
                "the database is away: requests wait for it and are tried again whole"
            );
            OUTAGES.fetch_add(1, Ordering::Relaxed);
            *away = Some((Instant::now(), 1));
        }
    }
}

/// The first success after a spell away.
fn back_again() {
    let spell = AWAY.lock().unwrap_or_else(|p| p.into_inner()).take();
    if let Some((since, retries)) = spell {
        tracing::warn!(
            after = ?since.elapsed(),
            retries,
            "the database is back"
        );
    }
}

/// Whether a pooled connection of this age may be handed out: not if it
/// was made before the primary was last seen to go away (it may lead to a
/// node that is now a standby, which answers every write with 25006).
pub fn still_good(age: Duration) -> bool {
    let disrupted = DISRUPTED_AT.load(Ordering::Relaxed);
    if disrupted == 0 {
        return true;
    }
    let since = Duration::from_millis(since_epoch().saturating_sub(disrupted));
    age < since
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_connection_class_failures_and_rollbacks_are_tried_again() {
        let io = sqlx::Error::Io(std::io::Error::new(
            std::io::ErrorKind::UnexpectedEof,
            "closed",
        ));
        assert_eq!(classify(&io), Failure::Transient("io"));
        assert_eq!(
            classify(&sqlx::Error::PoolTimedOut),
            Failure::Transient("pool_timed_out")
        );
        assert_eq!(classify(&sqlx::Error::RowNotFound), Failure::Final);
        assert_eq!(
            classify(&sqlx::Error::ColumnNotFound("x".into())),
            Failure::Final
        );
    }

    #[tokio::test]
    async fn a_final_failure_is_not_tried_again_and_a_transient_one_is_until_it_passes() {
        let mut tries = 0;
        let answer: Result<(), sqlx::Error> = retry("test", Bound::Worker, || {
            tries += 1;
            async { Err(sqlx::Error::RowNotFound) }
        })
        .await;
        assert!(answer.is_err());
        assert_eq!(tries, 1);

        let mut tries = 0;
        let answer: Result<u32, sqlx::Error> = retry("test", Bound::Worker, || {
            tries += 1;
            let now = tries;
            async move {
                if now < 3 {
                    Err(sqlx::Error::PoolTimedOut)
                } else {
                    Ok(now)
                }
            }
        })
        .await;
        assert_eq!(answer.unwrap(), 3);
    }
}
