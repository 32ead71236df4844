//! Joining a waiting list: a request checked into an entry, written
//! unconfirmed with its confirmation mail's job, unless its e-mail is on
//! the list already or its address's entries would pass the per-address
//! cap. One at a time ([`join`]), or combined with the joins arriving
//! meanwhile, one statement per batch ([`Joins`]).

use std::collections::HashMap;

use sqlx::PgPool;

use crate::batching::{Batch, Combiner};
use crate::checkout::{self, Customer};
use crate::payments::ProviderKind;

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
    /// The units an address's live entries of the product want.
    #[derive(sqlx::FromRow)]
    struct Used {
        client_address: String,
        units: i64,
    }
    let used: Vec<Used> = sqlx::query_as(&format!(
        "select client_address, sum(qty)::bigint as units from waitlist_entries \
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
    let mut used: HashMap<String, i64> = used
        .into_iter()
        .map(|u| (u.client_address, u.units))
        .collect();
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
