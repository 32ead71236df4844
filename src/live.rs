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

use std::collections::{BTreeSet, HashMap};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, RwLock, Weak};
use std::time::{Duration, Instant};

use chrono::{DateTime, Utc};
use sqlx::PgPool;
use sqlx::postgres::{PgListener, PgPoolOptions};
use tokio::sync::{broadcast, mpsc, oneshot};

use crate::catalogue::{Availability, Product, Stock};

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

/// Most pages one process lets watch at once; past it a page polls.
pub const MAX_WATCHERS: usize = 20_000;

/// Least time between two events to one watching page: a hot tier changes
/// with every batch, and thousands of pages need not hear each one.
pub const WATCH_GAP: Duration = Duration::from_millis(250);

/// A quiet watch says it is still there this often (and so learns whether
/// the page is).
pub const WATCH_KEEPALIVE: Duration = Duration::from_secs(15);

/// One page watching some products (`GET /availability/stream`).
#[derive(Debug)]
pub struct Watch {
    ids: Vec<String>,
    wanted: std::collections::HashSet<String>,
    changes: broadcast::Receiver<Arc<Vec<Stock>>>,
    live: LiveStock,
    /// What the page was last told, and when.
    sent: Option<(Instant, Vec<Stock>)>,
}

/// What a watch has for its page next.
#[derive(Debug)]
pub enum Watched {
    /// What is left of the watched products now.
    Changed(Vec<Stock>),
    /// Nothing changed for [`WATCH_KEEPALIVE`].
    Quiet,
}

impl Watch {
    /// The watched product ids.
    pub fn ids(&self) -> &[String] {
        &self.ids
    }

    /// The next thing to tell the page: at once what is left now, then
    /// whenever one of its products changes (at most every
    /// [`WATCH_GAP`]); `None` when the shop is going away or cannot read.
    pub async fn next(&mut self) -> Option<Watched> {
        use broadcast::error::{RecvError, TryRecvError};
        loop {
            if let Some((at, _)) = &self.sent {
                let at = *at;
                match tokio::time::timeout(WATCH_KEEPALIVE, self.changes.recv()).await {
                    Err(_) => return Some(Watched::Quiet),
                    Ok(Err(RecvError::Closed)) => return None,
                    // too far behind: what memory says now covers it
                    Ok(Err(RecvError::Lagged(_))) => {}
                    Ok(Ok(changed)) => {
                        if !changed.iter().any(|s| self.wanted.contains(&s.id)) {
                            continue;
                        }
                    }
                }
                tokio::time::sleep_until((at + WATCH_GAP).into()).await;
                // whatever came meanwhile is in what memory says now
                while matches!(
                    self.changes.try_recv(),
                    Ok(_) | Err(TryRecvError::Lagged(_))
                ) {}
            }
            let stock = self.live.stock(&self.ids).await.ok()?;
            if self.sent.as_ref().is_some_and(|(_, sent)| *sent == stock) {
                continue;
            }
            self.sent = Some((Instant::now(), stock.clone()));
            return Some(Watched::Changed(stock));
        }
    }
}

impl Drop for Watch {
    fn drop(&mut self) {
        self.live.inner.watchers.fetch_sub(1, Ordering::SeqCst);
    }
}

/// One resource as memory last read it.
#[derive(Debug, Clone, PartialEq)]
pub struct Level {
    /// Units a hold could take now (plain holds past their TTL count as
    /// free, as in `hf_stock`).
    pub available: i32,
    /// Units held by shoppers checking out or paying.
    pub pending: i32,
    /// When the first of those holds ends.
    pub first_ends_at: Option<DateTime<Utc>>,
    /// The resource row's version (its `xmin`): any change makes a new one.
    version: String,
    /// When this process first saw this version.
    pub changed_at: DateTime<Utc>,
}

impl Level {
    /// Whether a hold the database would take now may end before `now`:
    /// then the database may have units memory does not show.
    pub fn something_due(&self, now: DateTime<Utc>) -> bool {
        self.first_ends_at.is_some_and(|at| at <= now)
    }
}

/// The catalogue and its stock at one moment.
#[derive(Debug)]
pub struct Snapshot {
    /// Active products, in page order.
    products: Vec<Product>,
    by_id: HashMap<String, usize>,
    /// By resource id.
    levels: HashMap<String, Level>,
    /// When everything was last read.
    read_at: Instant,
    /// The database's clock less this process's, as the last full read saw
    /// it: memory judges sale windows by the database's clock.
    clock_offset: chrono::Duration,
}

impl Snapshot {
    /// The database's clock now, as memory knows it (this process's clock
    /// plus the offset its last full read measured; off by at most that
    /// read's round trip).
    pub fn database_now(&self) -> DateTime<Utc> {
        Utc::now() + self.clock_offset
    }

    /// Active products of one collection (or all) with what is left, in page
    /// order: what `catalogue::availability` reads from the database.
    pub fn availability(&self, collection: Option<&str>) -> Vec<Availability> {
        self.products
            .iter()
            .filter(|p| !p.hidden && collection.is_none_or(|c| p.collection == c))
            .filter_map(|p| {
                let level = self.levels.get(&p.resource_id)?;
                Some(Availability {
                    id: p.id.clone(),
                    hidden: p.hidden,
                    collection_position: p.collection_position,
                    name: p.name.clone(),
                    price_minor: p.price_minor,
                    currency: p.currency.clone(),
                    starts_at: p.starts_at,
                    collection: p.collection.clone(),
                    collection_title: p.collection_title.clone(),
                    collection_lede: p.collection_lede.clone(),
                    kind: p.kind,
                    available_now: level.available,
                    max_per_order: p.max_per_order,
                    pending_units: level.pending,
                    first_back_at: level.first_ends_at,
                    sale_opens_at: p.sale_opens_at,
                    sale_closes_at: p.sale_closes_at,
                    queue_open: p.queue_open,
                    queue_commitment: p.queue_commitment.clone(),
                })
            })
            .collect()
    }

    /// What is left of these products (unknown ids left out), sorted by id:
    /// what `catalogue::stock` reads from the database.
    pub fn stock(&self, ids: &[String]) -> Vec<Stock> {
        let ids: BTreeSet<&String> = ids.iter().collect();
        ids.into_iter().filter_map(|id| self.stock_of(id)).collect()
    }

    fn stock_of(&self, id: &str) -> Option<Stock> {
        let (_, level) = self.product(id)?;
        Some(Stock {
            id: id.to_owned(),
            available: level.available.max(0),
            pending: level.pending,
            first_back_at: level.first_ends_at,
        })
    }

    /// An active product and its resource's level.
    pub fn product(&self, id: &str) -> Option<(&Product, &Level)> {
        let product = &self.products[*self.by_id.get(id)?];
        Some((product, self.levels.get(&product.resource_id)?))
    }

    /// The level of a resource.
    pub fn level(&self, resource: &str) -> Option<&Level> {
        self.levels.get(resource)
    }
}

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
    /// Pages watching.
    watchers: AtomicUsize,
    /// Asks for a full read now; answered once it is in.
    read_now: mpsc::UnboundedSender<oneshot::Sender<()>>,
}

/// A page as the database last answered it.
#[derive(Debug, Clone)]
struct KeptPage {
    html: bytes::Bytes,
    /// The resource whose changes make it stale.
    resource: String,
    /// When the reads behind it began.
    read_at: DateTime<Utc>,
    kept_at: Instant,
}

/// Entries of a memory of answers at most; a full one starts again.
const KEPT_AT_MOST: usize = 100_000;

fn keep<V>(map: &std::sync::Mutex<HashMap<String, V>>, key: &str, value: V) {
    let mut map = map.lock().expect("never poisoned");
    if map.len() >= KEPT_AT_MOST {
        map.clear();
    }
    map.insert(key.to_owned(), value);
}

/// What the listening task tells the refreshing one.
enum Heard {
    Connected,
    Lost,
    Stock(String),
    Catalogue,
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
            watchers: AtomicUsize::new(0),
        });
        tokio::spawn(keep_fresh(Arc::downgrade(&inner), pool.clone(), asked));
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

    /// A page watching these products, or `None` when [`MAX_WATCHERS`]
    /// already are.
    pub fn watch(&self, ids: Vec<String>) -> Option<Watch> {
        let watchers = self.inner.watchers.fetch_add(1, Ordering::SeqCst);
        if watchers >= MAX_WATCHERS {
            self.inner.watchers.fetch_sub(1, Ordering::SeqCst);
            return None;
        }
        Some(Watch {
            wanted: ids.iter().cloned().collect(),
            ids,
            changes: self.changes(),
            live: self.clone(),
            sent: None,
        })
    }

    /// Pages watching now.
    pub fn watchers(&self) -> usize {
        self.inner.watchers.load(Ordering::SeqCst)
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

    /// Remember that the database refused this checkout form as short, on
    /// a read that began at `read_at`.
    pub fn remember_refused_form(&self, key: &str, read_at: DateTime<Utc>) {
        keep(&self.inner.refused_forms, key, read_at);
    }

    /// When the database last refused this form as short (the read's
    /// start), if it did: memory may refuse it again while nothing it
    /// wants changed since.
    pub fn refused_form_at(&self, key: &str) -> Option<DateTime<Utc>> {
        self.inner
            .refused_forms
            .lock()
            .expect("never poisoned")
            .get(key)
            .copied()
    }

    /// Keep a page the database answered (its reads began at `read_at`),
    /// to answer again while `resource` is unchanged.
    pub fn keep_page(&self, key: &str, resource: &str, read_at: DateTime<Utc>, html: bytes::Bytes) {
        let kept = KeptPage {
            html,
            resource: resource.to_owned(),
            read_at,
            kept_at: Instant::now(),
        };
        keep(&self.inner.pages, key, kept);
    }

    /// A kept page, if memory may be believed, it is younger than
    /// `fresh_for`, and its resource has not changed since its reads.
    pub fn kept_page(&self, key: &str, fresh_for: Duration) -> Option<bytes::Bytes> {
        let answer = |answer: &str| crate::metrics::kept_page(answer);
        let kept = self
            .inner
            .pages
            .lock()
            .expect("never poisoned")
            .get(key)
            .cloned();
        let Some(kept) = kept else {
            answer("not_kept");
            return None;
        };
        let Some(level) = self.now().and_then(|s| s.level(&kept.resource).cloned()) else {
            answer("untrusted");
            return None;
        };
        if kept.kept_at.elapsed() >= fresh_for {
            answer("stale");
            return None;
        }
        if level.changed_at >= kept.read_at {
            answer("changed");
            return None;
        }
        answer("memory");
        Some(kept.html)
    }

    /// Forget a kept page (its shopper changed something).
    pub fn forget_page(&self, key: &str) {
        self.inner.pages.lock().expect("never poisoned").remove(key);
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

#[derive(sqlx::FromRow)]
struct LevelRow {
    resource_id: String,
    available_now: i32,
    pending: i32,
    first_ends_at: Option<DateTime<Utc>>,
    version: String,
}

const LEVELS: &str = "select r.id as resource_id, s.available_now, s.pending, s.first_ends_at, \
                             r.xmin::text as version \
                        from resources r cross join lateral hf_stock(r.id) s \
                       where r.id = any($1)";

/// Reads the whole catalogue: the same order as `catalogue::availability`.
async fn read_all(pool: &PgPool) -> sqlx::Result<(Vec<Product>, Vec<LevelRow>, chrono::Duration)> {
    // the database's clock against ours, around one small query
    let before = Utc::now();
    let database: DateTime<Utc> = sqlx::query_scalar("select clock_timestamp()")
        .fetch_one(pool)
        .await?;
    let after = Utc::now();
    let clock_offset = database - (before + (after - before) / 2);
    let products: Vec<Product> = sqlx::query_as(&format!(
        "select {} from products p join collections c on c.id = p.collection \
          where p.active order by {}",
        crate::catalogue::PRODUCT_COLUMNS,
        crate::catalogue::PAGE_ORDER
    ))
    .fetch_all(pool)
    .await?;
    let resources: Vec<&str> = products.iter().map(|p| p.resource_id.as_str()).collect();
    let levels = read_levels(pool, &resources).await?;
    Ok((products, levels, clock_offset))
}

async fn read_levels(pool: &PgPool, resources: &[&str]) -> sqlx::Result<Vec<LevelRow>> {
    sqlx::query_as(LEVELS).bind(resources).fetch_all(pool).await
}

impl Inner {
    fn current(&self) -> Option<Arc<Snapshot>> {
        self.snapshot.read().expect("never poisoned").clone()
    }

    /// Merge levels just read into memory; `products` replaces the catalogue
    /// (a full read). Tells the watchers what changed.
    fn merge(&self, products: Option<(Vec<Product>, chrono::Duration)>, rows: Vec<LevelRow>) {
        let now = Utc::now();
        let old = self.current();
        let full = products.is_some();
        let (products, clock_offset) = match (products, &old) {
            (Some(read), _) => read,
            (None, Some(old)) => (old.products.clone(), old.clock_offset),
            (None, None) => return, // nothing to merge into before the first full read
        };
        let mut levels = if full {
            HashMap::with_capacity(rows.len())
        } else {
            old.as_ref().map(|o| o.levels.clone()).unwrap_or_default()
        };
        let mut changed_resources = Vec::new();
        for row in rows {
            let before = old.as_ref().and_then(|o| o.levels.get(&row.resource_id));
            let changed_at = match before {
                Some(before) if before.version == row.version => before.changed_at,
                _ => now,
            };
            let level = Level {
                available: row.available_now,
                pending: row.pending,
                first_ends_at: row.first_ends_at,
                version: row.version,
                changed_at,
            };
            if before.is_none_or(|b| {
                (b.available, b.pending, b.first_ends_at)
                    != (level.available, level.pending, level.first_ends_at)
            }) {
                changed_resources.push(row.resource_id.clone());
            }
            levels.insert(row.resource_id, level);
        }
        let by_id = products
            .iter()
            .enumerate()
            .map(|(i, p)| (p.id.clone(), i))
            .collect();
        let read_at = match (&old, full) {
            (Some(old), false) => old.read_at,
            _ => Instant::now(),
        };
        let snapshot = Snapshot {
            products,
            by_id,
            levels,
            read_at,
            clock_offset,
        };
        let changes: Vec<Stock> = snapshot
            .products
            .iter()
            .filter(|p| changed_resources.contains(&p.resource_id))
            .filter_map(|p| snapshot.stock_of(&p.id))
            .collect();
        *self.snapshot.write().expect("never poisoned") = Some(Arc::new(snapshot));
        if !changes.is_empty() {
            // no watcher is fine
            let _ = self.changes.send(Arc::new(changes));
        }
    }
}

/// The task behind [`LiveStock`]: reads everything at once, every
/// [`REFRESH_EVERY`] and whenever the listener (re)connects, and what is
/// notified as it is, every notification that arrived together in one read.
async fn keep_fresh(
    inner: Weak<Inner>,
    pool: PgPool,
    mut asked: mpsc::UnboundedReceiver<oneshot::Sender<()>>,
) {
    let (heard_tx, mut heard) = mpsc::unbounded_channel();
    // the listener has a connection of its own, named so it can be found
    let options = (*pool.connect_options())
        .clone()
        .application_name(LISTENER_NAME);
    let listen_pool = PgPoolOptions::new()
        .max_connections(1)
        .connect_lazy_with(options);
    tokio::spawn(listen(listen_pool.clone(), heard_tx));
    let mut tick = tokio::time::interval(REFRESH_EVERY);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut complained = false;
    let mut listening = false;
    let mut hearing = true;
    loop {
        let mut full = false;
        let mut resources = BTreeSet::new();
        let mut waiting = Vec::new();
        tokio::select! {
            _ = tick.tick() => full = true,
            Some(done) = asked.recv() => {
                full = true;
                waiting.push(done);
                while let Ok(done) = asked.try_recv() {
                    waiting.push(done);
                }
            }
            got = heard.recv(), if hearing => {
                hearing = got.is_some();
                let mut next = got;
                while let Some(event) = next.take() {
                    match event {
                        Heard::Stock(id) => {
                            resources.insert(id);
                        }
                        Heard::Catalogue => full = true,
                        Heard::Connected => {
                            listening = true;
                            full = true;
                        }
                        Heard::Lost => listening = false,
                    }
                    next = heard.try_recv().ok();
                }
            }
        }
        let Some(me) = inner.upgrade() else { break };
        me.listening.store(listening, Ordering::Relaxed);
        if !full && !resources.is_empty() {
            let ids: Vec<&str> = resources.iter().map(String::as_str).collect();
            match read_levels(&pool, &ids).await {
                Ok(rows) => {
                    me.notified_reads.fetch_add(1, Ordering::Relaxed);
                    me.merge(None, rows);
                }
                // the next tick reads everything
                Err(error) => tracing::debug!(%error, "cannot read the notified stock"),
            }
            continue;
        }
        if !full {
            continue;
        }
        match read_all(&pool).await {
            Ok((products, rows, clock_offset)) => {
                me.full_reads.fetch_add(1, Ordering::Relaxed);
                me.merge(Some((products, clock_offset)), rows);
                complained = false;
                for done in waiting {
                    let _ = done.send(());
                }
            }
            Err(error) => {
                if !complained {
                    tracing::warn!(%error, "cannot read the stock; pages read the database until it comes back");
                    complained = true;
                }
            }
        }
    }
    listen_pool.close().await;
}

/// Listens on its own connection and tells [`keep_fresh`] what it hears,
/// when it connects and when the connection is lost; connects again until
/// `keep_fresh` is gone.
async fn listen(pool: PgPool, heard: mpsc::UnboundedSender<Heard>) {
    let mut complained = false;
    loop {
        let mut listener = match subscribe(&pool).await {
            Ok(listener) => listener,
            Err(error) => {
                if heard.is_closed() || pool.is_closed() {
                    return;
                }
                if !complained {
                    tracing::warn!(%error, "cannot listen for stock changes; reading every {REFRESH_EVERY:?} meanwhile");
                    complained = true;
                }
                tokio::time::sleep(Duration::from_millis(200)).await;
                continue;
            }
        };
        complained = false;
        if heard.send(Heard::Connected).is_err() {
            return;
        }
        while let Ok(Some(notification)) = listener.try_recv().await {
            let event = match notification.channel() {
                "hf_catalogue" => Heard::Catalogue,
                _ => Heard::Stock(notification.payload().to_owned()),
            };
            if heard.send(event).is_err() {
                return;
            }
        }
        if heard.send(Heard::Lost).is_err() {
            return;
        }
    }
}

async fn subscribe(pool: &PgPool) -> sqlx::Result<PgListener> {
    let mut listener = PgListener::connect_with(pool).await?;
    // a lost connection is ours to replace, after saying so
    listener.eager_reconnect(false);
    listener.listen_all(["hf_stock", "hf_catalogue"]).await?;
    Ok(listener)
}
