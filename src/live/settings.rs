//! The shop's settings in memory, read with every full read: what the
//! crowd's answers need besides the stock. The shop's name and looks
//! (every page shows them), the currency most of the
//! catalogue sells in and the ways to pay the owner chose (the basket's
//! form and its answers offer them) with the windows delayed ones settle
//! in, the live API keys (a request is
//! signed without a read; a revoked key stops signing at the next full
//! read, which a revocation asks for at once), the API's `Idempotency-Key`s
//! claimed lately (a key used before is the database's to answer), and the
//! restaurant's bookable times (a booking line of the API names its time
//! by room and moment).
//!
//! A change to any of them notifies `hf_catalogue` (migration 0220), so
//! memory reads them again within milliseconds of the commit; the full
//! read every [`REFRESH_EVERY`](super::REFRESH_EVERY) is the safety net.

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, RwLock};

use chrono::{DateTime, Utc};
use sqlx::PgPool;

use crate::payments::methods::{self, Ways};
use crate::payments::timing::{self, SettleTerms};
use crate::storefront::Storefront;

/// How long memory keeps the `Idempotency-Key`s claimed: a key older than
/// this sent again may be answered as a new request (Stripe keeps its
/// keys at least 24 hours, and so does memory).
pub const CLAIMS_KEPT_FOR: chrono::Duration = chrono::Duration::hours(24);

/// How far back each read looks for claims past the newest it has seen: a
/// claim is one statement, stamped as it starts and visible as it commits,
/// so one stamped earlier may be seen after a later one.
const CLAIMS_OVERLAP: chrono::Duration = chrono::Duration::seconds(10);

/// The shop's settings, as the last full read found them.
#[derive(Default)]
pub struct ShopSettings {
    /// The currency most of the catalogue sells in (`eur` while it sells
    /// nothing): the one the shop's ways to pay are offered for.
    pub currency: String,
    /// The owner's ways to pay.
    pub ways: Ways,
    /// How long delayed ways take to settle: which the basket may offer.
    pub settle: SettleTerms,
    keys: HashMap<String, LiveKey>,
    /// Shared by every snapshot and grown in place by each read (a
    /// snapshot's reader may see claims newer than its read: more reason
    /// to ask the database, never less).
    claims: Arc<RwLock<Claims>>,
    /// The shop's name and looks, as every page shows them.
    pub storefront: Arc<Storefront>,
    /// The restaurant's times on sale, by room in time order, and by
    /// product.
    dining: HashMap<String, Vec<DiningTime>>,
    dining_products: HashMap<String, (String, usize)>,
}

impl std::fmt::Debug for ShopSettings {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ShopSettings")
            .field("currency", &self.currency)
            .field("keys", &self.keys.len())
            .field("dining_times", &self.dining_products.len())
            .finish_non_exhaustive()
    }
}

/// An API key as signing checks it (`staff::api_keys::authenticate_from`):
/// memory keeps them all, live and revoked.
#[derive(Clone, sqlx::FromRow)]
pub struct LiveKey {
    pub id: String,
    pub name: String,
    /// Its scopes' names.
    pub scopes: Vec<String>,
    /// The SHA-256 of its secret.
    pub secret_hash: Vec<u8>,
    pub last_used_at: Option<DateTime<Utc>>,
    /// Revoked: it signs nothing.
    pub revoked_at: Option<DateTime<Utc>>,
}

/// Never its secret's hash.
impl std::fmt::Debug for LiveKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LiveKey")
            .field("id", &self.id)
            .field("name", &self.name)
            .field("revoked", &self.revoked_at.is_some())
            .finish_non_exhaustive()
    }
}

/// A bookable time of a room.
#[derive(Debug, Clone, sqlx::FromRow)]
pub struct DiningTime {
    pub product_id: String,
    pub room: String,
    pub starts_at: DateTime<Utc>,
}

/// The `Idempotency-Key`s claimed within [`CLAIMS_KEPT_FOR`], by API key.
#[derive(Default)]
struct Claims {
    by_key: HashMap<String, HashMap<String, DateTime<Utc>>>,
    /// The newest claim seen.
    newest: Option<DateTime<Utc>>,
    /// When claims past [`CLAIMS_KEPT_FOR`] were last let go.
    pruned_at: Option<DateTime<Utc>>,
}

impl ShopSettings {
    /// The key of this id, live or revoked.
    pub fn key(&self, id: &str) -> Option<&LiveKey> {
        self.keys.get(id)
    }

    /// Whether this API key claimed this `Idempotency-Key` (within
    /// [`CLAIMS_KEPT_FOR`]) before the read.
    pub fn claimed(&self, key_id: &str, idempotency_key: &str) -> bool {
        self.claims
            .read()
            .expect("never poisoned")
            .by_key
            .get(key_id)
            .is_some_and(|claims| claims.contains_key(idempotency_key))
    }

    /// The time a product is, if it is one of a room's.
    pub fn dining_of(&self, product: &str) -> Option<&DiningTime> {
        let (room, i) = self.dining_products.get(product)?;
        self.dining.get(room)?.get(*i)
    }

    /// The time at `at` of the room `named` (or the time `named` is, as
    /// `dining_times` is asked: `room = $1 or product_id = $1`).
    pub fn dining_time(&self, named: &str, at: DateTime<Utc>) -> Option<&DiningTime> {
        let of_room = |room: &str| {
            let times = self.dining.get(room)?;
            let i = times.binary_search_by_key(&at, |t| t.starts_at).ok()?;
            Some(&times[i])
        };
        of_room(named).or_else(|| {
            let (room, i) = self.dining_products.get(named)?;
            let time = &self.dining.get(room)?[*i];
            (time.starts_at == at).then_some(time)
        })
    }
}

/// Reads the settings again, the claims since those `old` has.
pub(super) async fn read_settings(
    pool: &PgPool,
    old: Option<&ShopSettings>,
) -> sqlx::Result<ShopSettings> {
    let currency = crate::catalogue::shop_currency(pool).await?;
    let storefront = Arc::new(Storefront::read(pool).await?);
    let ways = methods::read(pool).await?;
    let settle = timing::read(pool).await?;
    let keys: Vec<LiveKey> = sqlx::query_as(
        "select id, name, scopes, secret_hash, last_used_at, revoked_at from api_keys",
    )
    .fetch_all(pool)
    .await?;
    let claims = old.map(|o| o.claims.clone()).unwrap_or_default();
    let since = {
        let claims = claims.read().expect("never poisoned");
        claims.newest.map(|newest| newest - CLAIMS_OVERLAP)
    };
    let fresh: Vec<(String, String, DateTime<Utc>)> = sqlx::query_as(
        "select api_key_id, idempotency_key, created_at from api_idempotency \
          where created_at >= coalesce($1, now() - make_interval(secs => $2))",
    )
    .bind(since)
    .bind(CLAIMS_KEPT_FOR.num_seconds() as f64)
    .fetch_all(pool)
    .await?;
    {
        let mut claims = claims.write().expect("never poisoned");
        for (key_id, idempotency_key, at) in fresh {
            claims.newest = Some(claims.newest.map_or(at, |n| n.max(at)));
            claims
                .by_key
                .entry(key_id)
                .or_default()
                .insert(idempotency_key, at);
        }
        // claims past their day, and a revoked key's, let go once a minute
        let now = Utc::now();
        if claims
            .pruned_at
            .is_none_or(|at| now - at > chrono::Duration::minutes(1))
        {
            let cutoff = now - CLAIMS_KEPT_FOR;
            let live: HashSet<&str> = keys
                .iter()
                .filter(|k| k.revoked_at.is_none())
                .map(|k| k.id.as_str())
                .collect();
            claims.by_key.retain(|key_id, by_idem| {
                by_idem.retain(|_, at| *at >= cutoff);
                live.contains(key_id.as_str()) && !by_idem.is_empty()
            });
            claims.pruned_at = Some(now);
        }
    }
    let times: Vec<DiningTime> = sqlx::query_as(
        "select t.product_id, t.room, t.starts_at from dining_times t \
           join products p on p.id = t.product_id \
          where p.active order by t.room, t.starts_at",
    )
    .fetch_all(pool)
    .await?;
    let mut dining: HashMap<String, Vec<DiningTime>> = HashMap::new();
    let mut dining_products = HashMap::with_capacity(times.len());
    for time in times {
        let room = dining.entry(time.room.clone()).or_default();
        dining_products.insert(time.product_id.clone(), (time.room.clone(), room.len()));
        room.push(time);
    }
    Ok(ShopSettings {
        currency,
        ways,
        settle,
        keys: keys.into_iter().map(|k| (k.id.clone(), k)).collect(),
        claims,
        storefront,
        dining,
        dining_products,
    })
}
