//! The waiting list of a sold-out product (docs/waiting-list.md). A
//! shopper joins with a name, an e-mail and how many; the entry counts
//! once the link mailed to them confirmed it, and takes its place in line
//! then. The handover is the database's (`hf_hand_over`, migration 0070):
//! the transaction that frees units holds them for the first waiting entry
//! they fit and writes its pending order, so nobody else can take them in
//! between. Claiming opens that order's payment page with the units
//! already the shopper's; an offer not claimed within the product's claim
//! window expires like any hold, and its expiry offers the units on.

use std::collections::HashMap;
use std::sync::Arc;

use chrono::{DateTime, Utc};
use serde_json::json;
use sqlx::{FromRow, PgPool};
use uuid::Uuid;

use crate::audit::{self, Actor};
use crate::batching::{Batch, Combiner};
use crate::checkout::{self, AttachOutcome, Customer, Desk, Order, OrderState};
use crate::payments::ProviderKind;
use crate::retry::{Bound, retry};

/// Where an entry is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EntryState {
    /// Made; its e-mail has not confirmed it, so it does not count yet.
    Unconfirmed,
    /// Confirmed for a drop queue not drawn yet: its place comes at the
    /// draw (`crate::queue`).
    Queued,
    /// In line.
    Waiting,
    /// Units are held for it until its offer ends.
    Offered,
    /// Its offer's order was paid.
    Claimed,
    /// Its offer ran out unclaimed.
    Lapsed,
    /// Taken off the list, by the shopper or staff.
    Removed,
}

impl EntryState {
    pub fn parse(name: &str) -> Option<Self> {
        Some(match name {
            "unconfirmed" => Self::Unconfirmed,
            "queued" => Self::Queued,
            "waiting" => Self::Waiting,
            "offered" => Self::Offered,
            "claimed" => Self::Claimed,
            "lapsed" => Self::Lapsed,
            "removed" => Self::Removed,
            _ => return None,
        })
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Self::Unconfirmed => "unconfirmed",
            Self::Queued => "queued",
            Self::Waiting => "waiting",
            Self::Offered => "offered",
            Self::Claimed => "claimed",
            Self::Lapsed => "lapsed",
            Self::Removed => "removed",
        }
    }
}

/// One entry, with what its pages show.
#[derive(Debug, Clone, FromRow)]
pub struct Entry {
    pub id: Uuid,
    pub product_id: String,
    /// The product's resource: its changes are what move the line.
    pub resource_id: String,
    pub product_name: String,
    pub token: String,
    pub name: String,
    pub email: String,
    pub qty: i32,
    state: String,
    pub line_no: Option<i64>,
    pub created_at: DateTime<Utc>,
    pub confirmed_at: Option<DateTime<Utc>>,
    pub offered_at: Option<DateTime<Utc>>,
    pub offer_expires_at: Option<DateTime<Utc>>,
    pub order_id: Option<Uuid>,
    /// How many confirmed entries of the product's resource wait ahead of
    /// this one (only for a waiting entry).
    pub ahead: Option<i64>,
    /// Units the entries ahead want (waiting, or offered and not paid yet).
    pub wanted_ahead: Option<i64>,
    /// Units of the product not sold and not held by other shoppers: what
    /// the line can still get.
    pub for_the_line: i64,
    /// Whether a group that does not fit holds up the entries behind it.
    pub in_order: bool,
    pub claim_minutes: i32,
    /// The product's drop queue: its commitment (SHA-256 of the seed), if
    /// it has one, and whether it was drawn.
    pub queue_commitment: Option<String>,
    pub queue_drawn: bool,
    pub sale_opens_at: Option<DateTime<Utc>>,
}

impl Entry {
    pub fn state(&self) -> EntryState {
        EntryState::parse(&self.state).unwrap_or(EntryState::Removed)
    }
}

/// An entry as its row says, without its place in line ([`Lines::place`]
/// adds that: one read of the whole line per change, not one per page).
const ENTRY_SQL: &str = "select w.id, w.product_id, p.resource_id, p.name as product_name, w.token, w.name, \
        w.email, w.qty, w.state, w.line_no, w.created_at, w.confirmed_at, w.offered_at, \
        w.offer_expires_at, w.order_id, \
        null::bigint as ahead, null::bigint as wanted_ahead, 0::bigint as for_the_line, \
        p.waitlist_in_order as in_order, p.waitlist_claim_minutes as claim_minutes, \
        p.queue_commitment, p.queue_drawn_at is not null as queue_drawn, p.sale_opens_at \
   from waitlist_entries w join products p on p.id = w.product_id";

/// Units of a resource not sold and not held by other shoppers: what its
/// line can still get.
const FOR_THE_LINE_SQL: &str = "select (r.total - r.sold - r.held \
        + coalesce((select sum(h.qty) from holds h \
                     where h.resource_id = r.id and h.state in ('held', 'awaiting_payment') \
                       and h.account_id like 'waitlist%'), 0))::bigint \
   from resources r where r.id = $1";

/// A resource's line as one read saw it: every entry queued, waiting or
/// offered, each waiting one with its place.
#[derive(Debug)]
struct Line {
    /// When the read began: changes committed before it are in it.
    read_at: DateTime<Utc>,
    entries: HashMap<String, Entry>,
}

/// Entries kept in memory at most, in one line or all lines together; a
/// longer line is counted entry by entry.
const LINE_AT_MOST: i64 = 200_000;

/// The lines of the shop's resources in memory: a crowd reloading its
/// places after a change costs one read of the line per process, not one
/// per page (each of which would count the entries ahead). A line is
/// believed while memory may be and its resource has not changed since the
/// line was read (every move in a line changes its resource's row: an
/// offer, a lapse, a payment, the draw, an entry leaving); an entry
/// confirmed since is not in it, and is read again. Cheap to clone.
#[derive(Debug, Clone, Default)]
pub struct Lines {
    inner: Arc<LinesInner>,
}

#[derive(Debug, Default)]
struct LinesInner {
    lines: std::sync::Mutex<HashMap<String, Arc<Line>>>,
    /// One read of a resource's line at a time.
    reads: std::sync::Mutex<HashMap<String, Arc<tokio::sync::Mutex<()>>>>,
    /// One read of any line at a time: a read holds up to LINE_AT_MOST
    /// entries before it is kept, so reads side by side would hold more.
    reading: tokio::sync::Mutex<()>,
}

impl Lines {
    /// The resource's line, if memory has one it may believe.
    fn believed(&self, live: &crate::live::LiveStock, resource: &str) -> Option<Arc<Line>> {
        let level = live.now()?.level(resource).cloned()?;
        let line = self
            .inner
            .lines
            .lock()
            .expect("never poisoned")
            .get(resource)
            .cloned()?;
        (level.changed_at < line.read_at).then_some(line)
    }

    /// The resource's line: believed, or read again (one read at a time per
    /// resource; those who wait for it take it). `None` when memory may not
    /// be believed, or the line is too long to keep.
    async fn line(
        &self,
        pool: &PgPool,
        live: &crate::live::LiveStock,
        resource: &str,
        stale: Option<&Arc<Line>>,
    ) -> sqlx::Result<Option<Arc<Line>>> {
        if live
            .now()
            .and_then(|s| s.level(resource).cloned())
            .is_none()
        {
            return Ok(None);
        }
        let gate = self
            .inner
            .reads
            .lock()
            .expect("never poisoned")
            .entry(resource.to_owned())
            .or_default()
            .clone();
        let _turn = gate.lock().await;
        if let Some(line) = self.believed(live, resource)
            && stale.is_none_or(|s| !Arc::ptr_eq(s, &line))
        {
            return Ok(Some(line));
        }
        let read = {
            let _reading = self.inner.reading.lock().await;
            read_line(pool, resource).await?
        };
        let Some(line) = read else {
            return Ok(None);
        };
        let line = Arc::new(line);
        let mut lines = self.inner.lines.lock().expect("never poisoned");
        lines.remove(resource);
        // bounded: the lines kept hold at most LINE_AT_MOST entries in all;
        // the lines read longest ago make room first
        let mut kept: usize = lines.values().map(|l| l.entries.len()).sum();
        while kept + line.entries.len() > LINE_AT_MOST as usize {
            let Some(oldest) = lines
                .iter()
                .min_by_key(|(_, l)| l.read_at)
                .map(|(r, _)| r.clone())
            else {
                break;
            };
            if let Some(gone) = lines.remove(&oldest) {
                kept -= gone.entries.len();
            }
        }
        lines.insert(resource.to_owned(), line.clone());
        Ok(Some(line))
    }

    /// `entry` with its place in line (how many entries are ahead, what
    /// they want, what the line can still get), from the line in memory.
    pub async fn place(
        &self,
        pool: &PgPool,
        live: &crate::live::LiveStock,
        entry: Entry,
    ) -> sqlx::Result<Entry> {
        if !matches!(
            entry.state(),
            EntryState::Queued | EntryState::Waiting | EntryState::Offered
        ) {
            return Ok(entry);
        }
        let mut stale = None;
        // a second read when the first did not have it (confirmed since)
        for _ in 0..2 {
            let line = match self.believed(live, &entry.resource_id) {
                Some(line) if stale.is_none() => line,
                _ => match self
                    .line(pool, live, &entry.resource_id, stale.as_ref())
                    .await?
                {
                    Some(line) => line,
                    None => break,
                },
            };
            if let Some(placed) = line.entries.get(&entry.token)
                && placed.state == entry.state
            {
                return Ok(placed.clone());
            }
            stale = Some(line);
        }
        placed_alone(pool, entry).await
    }
}

/// Read a resource's line whole, and work out every waiting entry's place.
/// `None` when it is longer than [`LINE_AT_MOST`].
async fn read_line(pool: &PgPool, resource: &str) -> sqlx::Result<Option<Line>> {
    let read_at = Utc::now();
    let mut tx = pool.begin().await?;
    // one snapshot for the line and what is left for it
    sqlx::query("set transaction isolation level repeatable read, read only")
        .execute(&mut *tx)
        .await?;
    let rows: Vec<Entry> = sqlx::query_as(&format!(
        "{ENTRY_SQL} where p.resource_id = $1 and w.state in ('queued', 'waiting', 'offered') \
          order by w.line_no nulls last, w.id limit {}",
        LINE_AT_MOST + 1
    ))
    .bind(resource)
    .fetch_all(&mut *tx)
    .await?;
    let for_the_line: i64 = sqlx::query_scalar(FOR_THE_LINE_SQL)
        .bind(resource)
        .fetch_optional(&mut *tx)
        .await?
        .unwrap_or(0);
    tx.commit().await?;
    if rows.len() as i64 > LINE_AT_MOST {
        return Ok(None);
    }
    let offered: i64 = rows
        .iter()
        .filter(|e| e.state() == EntryState::Offered)
        .map(|e| i64::from(e.qty))
        .sum();
    let (mut ahead, mut wanted) = (0i64, offered);
    let mut entries = HashMap::with_capacity(rows.len());
    for mut entry in rows {
        entry.for_the_line = for_the_line;
        if entry.state() == EntryState::Waiting {
            entry.ahead = Some(ahead);
            entry.wanted_ahead = Some(wanted);
            ahead += 1;
            wanted += i64::from(entry.qty);
        }
        entries.insert(entry.token.clone(), entry);
    }
    Ok(Some(Line { read_at, entries }))
}

/// One entry's place, counted for it alone (memory may not be believed,
/// or its line is too long to keep).
async fn placed_alone(pool: &PgPool, mut entry: Entry) -> sqlx::Result<Entry> {
    entry.for_the_line = sqlx::query_scalar(FOR_THE_LINE_SQL)
        .bind(&entry.resource_id)
        .fetch_optional(pool)
        .await?
        .unwrap_or(0);
    if entry.state() == EntryState::Waiting
        && let Some(line_no) = entry.line_no
    {
        let (ahead, wanted): (i64, i64) = sqlx::query_as(
            "select count(*) filter (where a.state = 'waiting' and a.line_no < $2), \
                    coalesce(sum(a.qty) filter (where (a.state = 'waiting' and a.line_no < $2) \
                                                   or a.state = 'offered'), 0)::bigint \
               from waitlist_entries a join products q on q.id = a.product_id \
              where q.resource_id = $1 and a.state in ('waiting', 'offered')",
        )
        .bind(&entry.resource_id)
        .bind(line_no)
        .fetch_one(pool)
        .await?;
        entry.ahead = Some(ahead);
        entry.wanted_ahead = Some(wanted);
    }
    Ok(entry)
}

/// A link's token: 64 hex digits, or it names nothing.
fn token_shaped(token: &str) -> bool {
    token.len() == 64
        && token
            .bytes()
            .all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
}

/// The entry a link names.
pub async fn entry_by_token(pool: &PgPool, token: &str) -> sqlx::Result<Option<Entry>> {
    if !token_shaped(token) {
        return Ok(None);
    }
    sqlx::query_as(&format!("{ENTRY_SQL} where w.token = $1"))
        .bind(token)
        .fetch_optional(pool)
        .await
}

/// A product's entries, in line (those not yet confirmed last), for staff.
pub async fn entries(pool: &PgPool, product_id: &str) -> sqlx::Result<Vec<Entry>> {
    sqlx::query_as(&format!(
        "{ENTRY_SQL} where w.product_id = $1 \
          order by w.line_no nulls last, w.created_at limit 5000"
    ))
    .bind(product_id)
    .fetch_all(pool)
    .await
}

/// Someone asking to join.
#[derive(Debug, Clone)]
pub struct JoinRequest {
    pub product_id: String,
    pub name: String,
    pub email: String,
    pub qty: i64,
    pub provider: ProviderKind,
    /// The client's address, as limits key it, and the most units of one
    /// product its live entries may want at once (the shop's per-address
    /// cap, `Limits::address_units`); `None`: not counted.
    pub address: Option<(String, i32)>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Joined {
    /// A confirmation link is on its way (or was, for an entry the e-mail
    /// has already: the answer is the same, so the page tells nobody
    /// whether an address is on the list).
    Mailed,
    /// No such product on sale.
    UnknownProduct,
    /// How many cannot be used: 1 to the product's most per order.
    BadQty { max: i32 },
    /// The name or e-mail cannot be used.
    BadCustomer { reason: String },
    /// The client's address has entries for this many units of the
    /// product already: the per-address cap.
    AddressFull { cap: i32 },
}

/// An entry to write: checked, normalised.
#[derive(Debug, Clone)]
pub struct NewEntry {
    token: String,
    name: String,
    email: String,
    email_key: String,
    qty: i32,
    provider: String,
    address: Option<String>,
    cap: Option<i32>,
}

/// The entry a request makes, or why it cannot make one; `max` is the
/// product's most per order.
fn checked(request: &JoinRequest, max: i32) -> Result<NewEntry, Joined> {
    let customer = Customer::parse(&request.name, &request.email)
        .map_err(|error| Joined::BadCustomer { reason: error.0 })?;
    let email_key = crate::limits::email_key(customer.email());
    // the table's shape, checked here: a batch is one statement, and one
    // entry it refuses would refuse every other entry with it
    if !(3..=254).contains(&email_key.chars().count()) {
        return Err(Joined::BadCustomer {
            reason: "please give an e-mail address like you@example.com".into(),
        });
    }
    if request.qty < 1 || request.qty > i64::from(max) {
        return Err(Joined::BadQty { max });
    }
    let (address, cap) = match &request.address {
        Some((address, cap)) if address.len() <= 64 => (Some(address.clone()), Some(*cap)),
        _ => (None, None),
    };
    Ok(NewEntry {
        token: checkout::codes::order_token(),
        name: customer.name().to_owned(),
        email: customer.email().to_owned(),
        email_key,
        qty: request.qty as i32,
        provider: request.provider.as_str().to_owned(),
        address,
        cap,
    })
}

/// The most per order of a product that takes entries (on sale, not
/// hidden), if it is one.
async fn max_per_order(pool: &PgPool, product_id: &str) -> sqlx::Result<Option<i32>> {
    sqlx::query_scalar(
        "select max_per_order from products \
          where id = $1 and active and archived_at is null and not hidden",
    )
    .bind(product_id)
    .fetch_optional(pool)
    .await
}

/// Write entries of one product, each unless its e-mail has one already
/// or its address's live entries of the product would want more than its
/// cap, with their confirmation mails' jobs. Whether each entry was within
/// its address's cap (an e-mail already on the list is, and writes
/// nothing: its answer is the same as a new entry's).
async fn write_entries(
    pool: &PgPool,
    product_id: &str,
    entries: &[NewEntry],
) -> sqlx::Result<Vec<bool>> {
    if !entries
        .iter()
        .any(|e| e.cap.is_some() && e.address.is_some())
    {
        // nothing to count: one statement, as a drop's crowd meets it with
        // the per-address cap off
        insert_plain(pool, product_id, entries).await?;
        return Ok(vec![true; entries.len()]);
    }
    let addresses: Vec<String> = entries.iter().filter_map(|e| e.address.clone()).collect();
    let emails: Vec<String> = entries.iter().map(|e| e.email_key.clone()).collect();
    let mut tx = pool.begin().await?;
    // lock: the batch's addresses, by one of 64 buckets each (a batch takes
    // 64 locks at most, whatever its size), in one order
    sqlx::query(
        "select hf_limit_lock('waitlist-join:' || b) \
           from (select distinct hashtext(a) & 63 as b from unnest($1::text[]) a order by 1) s",
    )
    .bind(&addresses)
    .execute(&mut *tx)
    .await?;
    const LIVE: &str = "('unconfirmed', 'queued', 'waiting', 'offered')";
    let used: Vec<(String, i64)> = sqlx::query_as(&format!(
        "select client_address, sum(qty)::bigint from waitlist_entries \
          where product_id = $1 and client_address = any($2) and state in {LIVE} \
          group by client_address"
    ))
    .bind(product_id)
    .bind(&addresses)
    .fetch_all(&mut *tx)
    .await?;
    let listed: Vec<String> = sqlx::query_scalar(&format!(
        "select email_key from waitlist_entries \
          where product_id = $1 and email_key = any($2) and state in {LIVE}"
    ))
    .bind(product_id)
    .bind(&emails)
    .fetch_all(&mut *tx)
    .await?;
    let mut used: HashMap<String, i64> = used.into_iter().collect();
    let mut listed: std::collections::HashSet<String> = listed.into_iter().collect();
    // in arrival order: an e-mail on the list already (or earlier in this
    // batch) writes nothing and counts nothing; a new one counts against
    // its address's cap only when it is written
    let mut fits = Vec::with_capacity(entries.len());
    let mut written = Vec::with_capacity(entries.len());
    for entry in entries {
        if listed.contains(&entry.email_key) {
            fits.push(true);
            continue;
        }
        let within = match (&entry.address, entry.cap) {
            (Some(address), Some(cap)) => {
                let now = used.entry(address.clone()).or_insert(0);
                if *now + i64::from(entry.qty) <= i64::from(cap) {
                    *now += i64::from(entry.qty);
                    true
                } else {
                    false
                }
            }
            _ => true,
        };
        if within {
            listed.insert(entry.email_key.clone());
            written.push(entry.clone());
        }
        fits.push(within);
    }
    insert_plain(&mut *tx, product_id, &written).await?;
    tx.commit().await?;
    Ok(fits)
}

/// The resource's line moved though its stock may not have: a new version
/// of its row, and word of it, so every process's kept pages of the line
/// (`LiveStock::kept_page`) and its line in memory ([`Lines`]) are read
/// again.
pub(crate) async fn line_moved(conn: &mut sqlx::PgConnection, resource: &str) -> sqlx::Result<()> {
    sqlx::query(
        "with touched as (update resources set updated_at = clock_timestamp() \
                           where id = $1 returning id) \
         select pg_notify('hf_stock', id) from touched",
    )
    .bind(resource)
    .execute(conn)
    .await?;
    Ok(())
}

/// Entries of one product, each unless its e-mail has a live one, and
/// their confirmation mails' jobs: one statement. Rows go in in e-mail
/// order (a place in line is given at confirmation, not here), so two
/// batches sharing e-mails never wait on each other's in opposite orders.
async fn insert_plain<'e>(
    executor: impl sqlx::PgExecutor<'e>,
    product_id: &str,
    entries: &[NewEntry],
) -> sqlx::Result<()> {
    if entries.is_empty() {
        return Ok(());
    }
    let column = |f: fn(&NewEntry) -> String| entries.iter().map(f).collect::<Vec<_>>();
    sqlx::query(
        "with added as ( \
             insert into waitlist_entries \
                    (product_id, token, name, email, email_key, qty, provider, client_address) \
             select $1, x.token, x.name, x.email, x.email_key, x.qty, x.provider, x.address \
               from unnest($2::text[], $3::text[], $4::text[], $5::text[], \
                           $6::int[], $7::text[], $8::text[]) \
                    with ordinality as x (token, name, email, email_key, qty, provider, address, n) \
              order by x.email_key, x.n \
             on conflict (product_id, email_key) \
                where state in ('unconfirmed', 'queued', 'waiting', 'offered') do nothing \
             returning id) \
         insert into outbox_jobs (kind, dedupe_key, payload) \
         select 'waitlist_mail', 'waitlist_confirm:' || id, \
                jsonb_build_object('entry_id', id, 'what', 'confirm') \
           from added",
    )
    .bind(product_id)
    .bind(column(|e| e.token.clone()))
    .bind(column(|e| e.name.clone()))
    .bind(column(|e| e.email.clone()))
    .bind(column(|e| e.email_key.clone()))
    .bind(entries.iter().map(|e| e.qty).collect::<Vec<_>>())
    .bind(column(|e| e.provider.clone()))
    .bind(
        entries
            .iter()
            .map(|e| e.address.clone())
            .collect::<Vec<_>>(),
    )
    .execute(executor)
    .await?;
    Ok(())
}

/// What a written entry answers.
fn joined(fits: bool, entry: &NewEntry) -> Joined {
    match (fits, entry.cap) {
        (false, Some(cap)) => Joined::AddressFull { cap },
        _ => Joined::Mailed,
    }
}

/// Join a product's waiting list: the entry, unconfirmed, and its
/// confirmation mail, in one transaction.
pub async fn join(pool: &PgPool, request: &JoinRequest) -> sqlx::Result<Joined> {
    let Some(max) = max_per_order(pool, &request.product_id).await? else {
        return Ok(Joined::UnknownProduct);
    };
    let entry = match checked(request, max) {
        Ok(entry) => entry,
        Err(refused) => return Ok(refused),
    };
    let fits = write_entries(pool, &request.product_id, std::slice::from_ref(&entry)).await?;
    Ok(joined(fits.first().copied().unwrap_or(false), &entry))
}

/// Statements of one product's joins in flight at once: a batch's time is
/// mostly the database's, so one lane would leave a core idle.
const LANES: u64 = 2;

/// Joins as the shop's pages take them: a crowd signing up for one drop
/// is written by one statement per batch (a [`Combiner`] per product and
/// lane, [`LANES`] lanes), and
/// the product is checked in memory when memory may be believed. Cheap to
/// clone.
#[derive(Debug, Clone)]
pub struct Joins {
    combiner: Combiner<JoinBatch>,
    pool: PgPool,
}

#[derive(Debug)]
struct JoinBatch {
    pool: PgPool,
}

impl Batch for JoinBatch {
    type Request = NewEntry;
    type Reply = sqlx::Result<bool>;
    const MAX: usize = 1000;

    async fn run(&self, key: &str, entries: Vec<NewEntry>) -> Vec<Self::Reply> {
        let product_id = key.split_once(':').map_or(key, |(_, product)| product);
        match write_entries(&self.pool, product_id, &entries).await {
            Ok(fits) if fits.len() == entries.len() => fits.into_iter().map(Ok).collect(),
            Ok(_) => entries.iter().map(|_| Self::lost()).collect(),
            // a refusal of the database's own, not the connection's: each
            // entry alone, so one cannot fail the others
            Err(error)
                if entries.len() > 1
                    && matches!(crate::retry::classify(&error), crate::retry::Failure::Final) =>
            {
                let mut replies = Vec::with_capacity(entries.len());
                for entry in &entries {
                    let one = write_entries(&self.pool, product_id, std::slice::from_ref(entry))
                        .await
                        .map(|fits| fits.first().copied().unwrap_or(false));
                    replies.push(one);
                }
                replies
            }
            Err(error) => entries
                .iter()
                .map(|_| Err(crate::batching::share_error(&error)))
                .collect(),
        }
    }

    fn lost() -> Self::Reply {
        Err(sqlx::Error::Protocol(
            "the waiting list's join ended without an answer".into(),
        ))
    }
}

impl Joins {
    pub fn new(pool: PgPool) -> Self {
        Self {
            combiner: Combiner::new(JoinBatch { pool: pool.clone() }),
            pool,
        }
    }

    /// [`join`], combined with the joins arriving meanwhile.
    pub async fn join(
        &self,
        live: &crate::live::LiveStock,
        request: &JoinRequest,
    ) -> sqlx::Result<Joined> {
        let remembered = live.now().map(|snapshot| {
            snapshot
                .product(&request.product_id)
                .filter(|(p, _)| !p.hidden)
                .map(|(p, _)| p.max_per_order)
        });
        let max = match remembered {
            Some(max) => max,
            None => max_per_order(&self.pool, &request.product_id).await?,
        };
        let Some(max) = max else {
            return Ok(Joined::UnknownProduct);
        };
        let entry = match checked(request, max) {
            Ok(entry) => entry,
            Err(refused) => return Ok(refused),
        };
        // one e-mail always in the same lane, so its joins never race
        // each other; different e-mails in up to LANES statements at once
        let lane = {
            use std::hash::{Hash, Hasher};
            let mut hasher = std::collections::hash_map::DefaultHasher::new();
            entry.email_key.hash(&mut hasher);
            hasher.finish() % LANES
        };
        let fits = self
            .combiner
            .call(&format!("{lane}:{}", request.product_id), entry.clone())
            .await?;
        Ok(joined(fits, &entry))
    }

    /// Statements sent so far (for the tests).
    pub fn calls(&self) -> u64 {
        self.combiner.calls()
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Confirmed {
    /// In line now (and perhaps offered units at once, if some were free).
    InLine,
    /// It was confirmed before: nothing changed.
    Already,
    /// No such entry, or one that left the list.
    NotFound,
}

/// Confirm an entry by its link: it takes its place in line, and units
/// free now are handed over at once, in the same transaction.
pub async fn confirm(pool: &PgPool, token: &str) -> sqlx::Result<Confirmed> {
    if !token_shaped(token) {
        return Ok(Confirmed::NotFound);
    }
    let mut tx = pool.begin().await?;
    // lock: the product, shared (a queue's draw takes it exclusively), so
    // an entry confirmed while its queue is drawn is either in the draw or
    // behind it, never left out
    let product: Option<(String, String, bool)> = sqlx::query_as(
        "select p.id, p.resource_id, \
                (p.queue_commitment is not null and p.queue_drawn_at is null) \
           from waitlist_entries w join products p on p.id = w.product_id \
          where w.token = $1 and w.state = 'unconfirmed' for share of p",
    )
    .bind(token)
    .fetch_optional(&mut *tx)
    .await?;
    let confirmed: Option<String> = match product {
        None => None,
        Some((_, resource, queued)) => {
            // lock: the resource before the entry, as every path that moves
            // a line takes them (an entry leaving, ending a hold, the draw)
            sqlx::query("select 1 from resources where id = $1 for no key update")
                .bind(&resource)
                .execute(&mut *tx)
                .await?;
            sqlx::query_scalar(
                "update waitlist_entries \
                set state = case when $2 then 'queued' else 'waiting' end, \
                    line_no = case when $2 then null else nextval('waitlist_line') end, \
                    confirmed_at = now() \
              where token = $1 and state = 'unconfirmed' returning $3::text",
            )
            .bind(token)
            .bind(queued)
            .bind(&resource)
            .fetch_optional(&mut *tx)
            .await?
        }
    };
    let answer = match confirmed {
        Some(resource) => {
            sqlx::query("select hf_hand_over($1, clock_timestamp())")
                .bind(resource)
                .execute(&mut *tx)
                .await?;
            Confirmed::InLine
        }
        None => {
            let state: Option<String> =
                sqlx::query_scalar("select state from waitlist_entries where token = $1")
                    .bind(token)
                    .fetch_optional(&mut *tx)
                    .await?;
            match state.as_deref() {
                Some("queued" | "waiting" | "offered" | "claimed" | "lapsed") => Confirmed::Already,
                _ => Confirmed::NotFound,
            }
        }
    };
    tx.commit().await?;
    Ok(answer)
}

/// Take an entry off its list (not one whose units are held: that offer
/// runs its course). True when it was taken off.
pub async fn remove(pool: &PgPool, by: Actor<'_>, entry_id: Uuid) -> sqlx::Result<bool> {
    let mut tx = pool.begin().await?;
    let who = by.name();
    // lock: the entry's resource before the entry, as ending a hold takes
    // them (the resource, then the entries in line), so the two never wait
    // on each other in a circle
    let locked: Option<String> = sqlx::query_scalar(
        "select r.id from waitlist_entries w join products p on p.id = w.product_id \
           join resources r on r.id = p.resource_id \
          where w.id = $1 for no key update of r",
    )
    .bind(entry_id)
    .fetch_optional(&mut *tx)
    .await?;
    if locked.is_none() {
        return Ok(false);
    }
    let removed: Option<(String, String)> = sqlx::query_as(
        "update waitlist_entries w set state = 'removed', ended_at = now(), ended_by = $2 \
           from products p \
          where w.id = $1 and w.state in ('unconfirmed', 'queued', 'waiting') \
            and p.id = w.product_id \
         returning w.product_id, p.resource_id",
    )
    .bind(entry_id)
    .bind(&who)
    .fetch_optional(&mut *tx)
    .await?;
    let Some((product, resource)) = removed else {
        return Ok(false);
    };
    // what was set aside for the line is looked at again: for those behind
    // this entry, or back on sale when nobody waits
    sqlx::query("select hf_hand_over($1, clock_timestamp())")
        .bind(&resource)
        .execute(&mut *tx)
        .await?;
    line_moved(&mut tx, &resource).await?;
    if let Actor::Staff(_) = by {
        audit::record(
            &mut tx,
            by,
            "remove_waitlist_entry",
            &entry_id.to_string(),
            "removed",
            json!({ "product": product }),
        )
        .await?;
    }
    tx.commit().await?;
    if let Actor::Staff(_) = by {
        audit::log_action(
            by,
            "remove_waitlist_entry",
            &entry_id.to_string(),
            "removed",
        );
    }
    Ok(true)
}

/// Where claiming an offer ended.
#[derive(Debug)]
pub enum Claim {
    /// The payment page is open, the units still the shopper's: go there.
    Pay { url: String },
    /// Paid already: the order's page.
    Paid { order_token: String },
    /// The offer is not (or no longer) open: its entry says why.
    NotOpen,
    /// The provider could not open a page; the units stay held until the
    /// offer ends, so the shopper can try again.
    ProviderFailed,
}

/// Claim an entry's offer: its order's payment page, opened once (a
/// second claim finds the page the first opened).
pub async fn claim(desk: Desk<'_>, entry: &Entry) -> checkout::Result<Claim> {
    if entry.state() != EntryState::Offered && entry.state() != EntryState::Claimed {
        return Ok(Claim::NotOpen);
    }
    let Some(order_id) = entry.order_id else {
        return Ok(Claim::NotOpen);
    };
    let Some(order) = retry("order_read", Bound::Shopper, || {
        checkout::order_by_id(desk.pool, order_id)
    })
    .await?
    else {
        return Ok(Claim::NotOpen);
    };
    match order.state {
        // paid, or paying by a method that settles later: the order page
        OrderState::Paid
        | OrderState::Settling
        | OrderState::RefundPending
        | OrderState::Refunded => {
            return Ok(Claim::Paid {
                order_token: order.token,
            });
        }
        OrderState::Pending => {}
        OrderState::Expired | OrderState::Cancelled => return Ok(Claim::NotOpen),
    }
    if let Some(url) = order.provider_url.clone() {
        return Ok(Claim::Pay { url });
    }
    let lines = retry("order_read", Bound::Shopper, || {
        checkout::order_lines(desk.pool, order_id)
    })
    .await?;
    let page = match checkout::open_page(desk, &order, &lines).await {
        Ok(page) => page,
        Err(error) => {
            tracing::warn!(order = %order_id, %error, "the payment provider failed at a waiting-list claim");
            return Ok(Claim::ProviderFailed);
        }
    };
    let attached = retry("claim_attach", Bound::Shopper, || {
        checkout::attach_payment(desk.pool, order_id, &page)
    })
    .await?;
    Ok(match attached {
        AttachOutcome::Paying { order } => Claim::Pay {
            url: order.provider_url.unwrap_or(page.url),
        },
        AttachOutcome::Ended { .. } => Claim::NotOpen,
    })
}

/// The order an offer made, if any.
pub async fn offer_order(pool: &PgPool, entry: &Entry) -> sqlx::Result<Option<Order>> {
    match entry.order_id {
        Some(id) => checkout::order_by_id(pool, id).await,
        None => Ok(None),
    }
}
