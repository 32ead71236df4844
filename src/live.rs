//! The shop's stock in memory. A flash-sale crowd refreshes the catalogue,
//! polls what is left and keeps pressing "buy" after the tier sold out; if
//! every one of those requests cost a database round trip, the crowd would
//! take the shop down before the sale did. So each web process keeps the
//! catalogue and every product's available / pending counts in memory, and
//! PostgreSQL says when to read them again:
//!
//! - every change to a resource's counters notifies `hf_stock` with its id
//!   (migration 0014: one notification per resource per transaction, so a
//!   combined batch is one), and a change to the products `hf_catalogue`;
//! - a listening task reads the notified resources again, all that arrived
//!   together in one query;
//! - everything is read again every [`REFRESH_EVERY`], the safety net for a
//!   notification lost with a dropped connection, and at once when the
//!   listening connection comes back.
//!
//! Memory is only ever used to show stock and to refuse: the database alone
//! grants (see `routes::shop::start_checkout`). Memory is believed while
//! the listener is connected (changes arrive milliseconds after their
//! commit) and its last full read is younger than [`LISTENING_TRUST_FOR`],
//! or, with no listener, while that read is younger than [`TRUST_FOR`];
//! otherwise the pages read the database as before. So what a page shows
//! lags the database by milliseconds, and by at most a second while the
//! listener is reconnecting.
//!
//! By concern: the snapshot memory answers from ([`snapshot`]), the task
//! that keeps it fresh ([`refresh`]), seated sections' seats ([`seats`]),
//! dining rooms' tables and stays ([`rooms`]), pages watching stock
//! ([`watch`]) and answers kept while nothing changed ([`kept`]).

mod kept;
mod refresh;
mod rooms;
mod seat_watch;
mod seats;
mod settings;
mod snapshot;
mod watch;

pub use seat_watch::{SeatChange, SeatWatch, SeatsWatched};
pub use settings::{CLAIMS_KEPT_FOR, DiningTime, LiveKey, ShopSettings};
pub use snapshot::{Level, Snapshot};
pub use watch::{MAX_WATCHERS, WATCH_GAP, WATCH_KEEPALIVE, Watch, Watched};

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, RwLock};
use std::time::Duration;

use chrono::{DateTime, Utc};
use sqlx::PgPool;
use tokio::sync::{broadcast, mpsc, oneshot};

use crate::catalogue::seats::SectionSeats;
use crate::catalogue::{Availability, Stock};
use kept::KeptPage;

/// How often everything is read again, notified or not.
pub const REFRESH_EVERY: Duration = Duration::from_millis(500);

/// How old the last full read may be for memory to be believed.
pub const TRUST_FOR: Duration = Duration::from_secs(1);

/// How old it may be while the listener is connected: notifications keep
/// memory current, and full reads may run late when the machine is busy.
pub const LISTENING_TRUST_FOR: Duration = Duration::from_secs(5);

/// The listening connection's `application_name`, to find it in
/// `pg_stat_activity`.
pub const LISTENER_NAME: &str = "holdfast-live";

/// The `application_name` of memory's own connection for its reads.
pub const READER_NAME: &str = "holdfast-memory";

/// The shop's stock in memory, kept fresh by a task of its own that ends
/// when the last clone is dropped. Cheap to clone.
#[derive(Debug, Clone)]
pub struct LiveStock {
    inner: Arc<Inner>,
    /// Where to read when memory may not be believed.
    pool: PgPool,
}

#[derive(Debug)]
struct Inner {
    snapshot: RwLock<Option<Arc<Snapshot>>>,
    /// The listening connection is up.
    listening: AtomicBool,
    /// Products whose stock changed, as each read finds them.
    changes: broadcast::Sender<Arc<Vec<Stock>>>,
    /// Reads so far (full, notified), for the curious and the tests.
    full_reads: AtomicU64,
    notified_reads: AtomicU64,
    /// Checkouts refused from memory.
    refusals: AtomicU64,
    /// Checkout forms the database refused as short, and when the read
    /// behind that answer began: a replay of one is refused from memory
    /// while nothing it wants has changed since ([`LiveStock::refused_form_at`]).
    refused_forms: std::sync::Mutex<HashMap<String, DateTime<Utc>>>,
    /// Pages memory may answer again while what they show is unchanged
    /// ([`LiveStock::kept_page`]).
    pages: std::sync::Mutex<HashMap<String, KeptPage>>,
    /// Pages rendered from memory ([`LiveStock::rendered`]).
    rendered: std::sync::Mutex<HashMap<String, kept::Rendered>>,
    /// Pages watching.
    watchers: AtomicUsize,
    /// Asks for a full read now; answered once it is in.
    read_now: mpsc::UnboundedSender<oneshot::Sender<()>>,
}

impl LiveStock {
    /// Memory for the shop on `pool`, and the task that keeps it fresh.
    /// Call inside a Tokio runtime.
    pub fn start(pool: PgPool) -> Self {
        let (changes, _) = broadcast::channel(1024);
        let (read_now, asked) = mpsc::unbounded_channel();
        let inner = Arc::new(Inner {
            read_now,
            snapshot: RwLock::new(None),
            listening: AtomicBool::new(false),
            changes,
            full_reads: AtomicU64::new(0),
            notified_reads: AtomicU64::new(0),
            refusals: AtomicU64::new(0),
            refused_forms: Default::default(),
            pages: Default::default(),
            rendered: Default::default(),
            watchers: AtomicUsize::new(0),
        });
        tokio::spawn(refresh::keep_fresh(
            Arc::downgrade(&inner),
            pool.clone(),
            asked,
        ));
        Self { inner, pool }
    }

    /// The catalogue and its stock, if memory may be believed now: its last
    /// full read is younger than [`TRUST_FOR`]. `None` means "read the
    /// database".
    pub fn now(&self) -> Option<Arc<Snapshot>> {
        let snapshot = self
            .inner
            .snapshot
            .read()
            .expect("never poisoned")
            .clone()?;
        let age = snapshot.read_at.elapsed();
        // while the listener is up, changes arrive as they commit; a full
        // read running late (a busy machine) does not make memory stale,
        // though a listener silently gone for long might
        let trusted = age < TRUST_FOR || (self.listening() && age < LISTENING_TRUST_FOR);
        trusted.then_some(snapshot)
    }

    /// Active products of one collection (or all) with what is left, in page
    /// order: from memory if it may be believed, else from the database.
    pub async fn availability(&self, collection: Option<&str>) -> sqlx::Result<Vec<Availability>> {
        match self.now() {
            Some(snapshot) => Ok(snapshot.availability(collection)),
            None => crate::catalogue::availability(&self.pool, collection).await,
        }
    }

    /// What is left of these products (unknown ids left out), sorted by id:
    /// from memory if it may be believed, else from the database.
    pub async fn stock(&self, ids: &[String]) -> sqlx::Result<Vec<Stock>> {
        match self.now() {
            Some(snapshot) => Ok(snapshot.stock(ids)),
            None => crate::catalogue::stock(&self.pool, ids).await,
        }
    }

    /// A seated section on sale and its seats: from memory if it may be
    /// believed, else from the database. `None`: no such section on sale.
    pub async fn section_seats(&self, product: &str) -> sqlx::Result<Option<Arc<SectionSeats>>> {
        match self.now() {
            Some(snapshot) => Ok(snapshot.section(product).cloned()),
            None => Ok(crate::catalogue::seats::map::section(&self.pool, product)
                .await?
                .map(Arc::new)),
        }
    }

    /// The shop's currency and the owner's ways to pay: from memory if it
    /// may be believed, else from the database.
    pub async fn ways_to_pay(&self) -> sqlx::Result<(String, crate::payments::methods::Ways)> {
        match self.now() {
            Some(snapshot) => {
                let settings = snapshot.settings();
                Ok((settings.currency.clone(), settings.ways.clone()))
            }
            None => Ok((
                crate::catalogue::shop_currency(&self.pool).await?,
                crate::payments::methods::read(&self.pool).await?,
            )),
        }
    }

    /// How long delayed ways to pay take to settle: from memory if it may
    /// be believed, else from the database.
    pub async fn settle_terms(&self) -> sqlx::Result<crate::payments::timing::SettleTerms> {
        match self.now() {
            Some(snapshot) => Ok(snapshot.settings().settle.clone()),
            None => crate::payments::timing::read(&self.pool).await,
        }
    }

    /// When the first of these products starts (none: none starts at a
    /// moment): from memory if it may be believed, else the database's.
    pub async fn first_start(&self, ids: &[String]) -> sqlx::Result<Option<DateTime<Utc>>> {
        let known = self.now().and_then(|snapshot| {
            ids.iter()
                .map(|id| snapshot.product(id).map(|(p, _)| p.starts_at))
                .collect::<Option<Vec<Option<DateTime<Utc>>>>>()
        });
        match known {
            Some(starts) => Ok(starts.into_iter().flatten().min()),
            None => {
                sqlx::query_scalar(
                    "select min(coalesce(p.starts_at, c.starts_at)) from products p \
                       join collections c on c.id = p.collection where p.id = any($1)",
                )
                .bind(ids)
                .fetch_one(&self.pool)
                .await
            }
        }
    }

    /// Which of these products are a party at a time (a table booking):
    /// from memory's kinds when it knows them all, else the database's.
    pub async fn parties(&self, ids: &[String]) -> sqlx::Result<std::collections::HashSet<String>> {
        use crate::catalogue::ProductKind;
        let known = self.now().and_then(|snapshot| {
            ids.iter()
                .map(|id| {
                    snapshot
                        .product(id)
                        .map(|(p, _)| (id.clone(), p.kind.is_party()))
                })
                .collect::<Option<Vec<(String, bool)>>>()
        });
        let kinds = match known {
            Some(kinds) => kinds,
            None => {
                let rows: Vec<(String, ProductKind)> =
                    sqlx::query_as("select id, kind from products where id = any($1)")
                        .bind(ids)
                        .fetch_all(&self.pool)
                        .await?;
                rows.into_iter()
                    .map(|(id, kind)| (id, kind.is_party()))
                    .collect()
            }
        };
        Ok(kinds
            .into_iter()
            .filter_map(|(id, is_party)| is_party.then_some(id))
            .collect())
    }

    /// Products whose stock changed, as memory learns of them.
    pub fn changes(&self) -> broadcast::Receiver<Arc<Vec<Stock>>> {
        self.inner.changes.subscribe()
    }

    /// Whether the listening connection is up.
    pub fn listening(&self) -> bool {
        self.inner.listening.load(Ordering::Relaxed)
    }

    /// Full reads and notified reads so far.
    pub fn reads(&self) -> (u64, u64) {
        (
            self.inner.full_reads.load(Ordering::Relaxed),
            self.inner.notified_reads.load(Ordering::Relaxed),
        )
    }

    /// Counts a checkout refused from memory.
    pub fn refused(&self) {
        self.inner.refusals.fetch_add(1, Ordering::Relaxed);
        crate::metrics::checkout("sold_out_from_memory");
    }

    /// Checkouts refused from memory so far.
    pub fn refusals(&self) -> u64 {
        self.inner.refusals.load(Ordering::Relaxed)
    }

    /// Reads everything now and returns once memory has it, for a caller
    /// that must see a change it just made (the tests). `false` if the read
    /// failed.
    pub async fn refresh(&self) -> bool {
        let (done, read) = oneshot::channel();
        self.inner.read_now.send(done).is_ok() && read.await.is_ok()
    }
}

impl Inner {
    fn current(&self) -> Option<Arc<Snapshot>> {
        self.snapshot.read().expect("never poisoned").clone()
    }

    /// Merge levels just read into memory; `products` replaces the catalogue
    /// (a full read). Tells the watchers what changed.
    fn merge(
        &self,
        full: Option<snapshot::FullRead>,
        rows: Vec<snapshot::LevelRow>,
        seats: seats::SeatRead,
        rooms: rooms::RoomRead,
    ) {
        let old = self.current();
        let sections = seats::merged_sections(old.as_deref(), seats);
        let rooms = rooms::merged_rooms(old.as_deref(), rooms);
        let Some((snapshot, changes)) =
            Snapshot::merged(old.as_deref(), full, rows, sections, rooms)
        else {
            return; // nothing to merge into before the first full read
        };
        *self.snapshot.write().expect("never poisoned") = Some(Arc::new(snapshot));
        if !changes.is_empty() {
            // no watcher is fine
            let _ = self.changes.send(Arc::new(changes));
        }
    }
}
