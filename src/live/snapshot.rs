//! The catalogue and its stock at one moment ([`Snapshot`]): what memory
//! answers pages from, how it is read from the database (the catalogue
//! whole, or the levels of the resources notified), and how a read is
//! merged into the last snapshot, with what changed.

use std::collections::{BTreeSet, HashMap};
use std::sync::Arc;
use std::time::Instant;

use chrono::{DateTime, Utc};
use sqlx::PgPool;

use super::settings::{ShopSettings, read_settings};
use crate::catalogue::seats::SectionSeats;
use crate::catalogue::tables::fit::RoomMemory;
use crate::catalogue::tables::times::BookableTime;
use crate::catalogue::{Availability, Product, Stock};

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

    /// Whether the resource row is still at `version`.
    pub(super) fn is_version(&self, version: &str) -> bool {
        self.version == version
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
    /// Seated sections on sale and their seats, by product id
    /// ([`super::seats`]).
    pub(super) sections: HashMap<String, Arc<SectionSeats>>,
    /// Dining rooms and the stays on their tables, by room
    /// ([`super::rooms`]).
    pub(super) rooms: HashMap<String, RoomMemory>,
    /// When everything was last read.
    pub(super) read_at: Instant,
    /// The database's clock less this process's, as the last full read saw
    /// it: memory judges sale windows by the database's clock.
    clock_offset: chrono::Duration,
    /// The shop's settings, as the last full read found them.
    settings: Arc<ShopSettings>,
    /// When the last full read began, by this process's clock: everything
    /// committed before it is in memory.
    full_read_began: DateTime<Utc>,
}

/// What a full read finds besides the levels: the catalogue, the clock
/// and the settings.
pub(super) struct FullRead {
    pub(super) products: Vec<Product>,
    pub(super) clock_offset: chrono::Duration,
    pub(super) settings: Arc<ShopSettings>,
    pub(super) began: DateTime<Utc>,
}

impl Snapshot {
    /// The database's clock now, as memory knows it (this process's clock
    /// plus the offset its last full read measured; off by at most that
    /// read's round trip).
    pub fn database_now(&self) -> DateTime<Utc> {
        Utc::now() + self.clock_offset
    }

    /// The shop's settings, as the last full read found them.
    pub fn settings(&self) -> &ShopSettings {
        &self.settings
    }

    /// When the last full read began: every change committed before it is
    /// in memory, and none after it that memory has not heard of.
    pub fn full_read_began(&self) -> DateTime<Utc> {
        self.full_read_began
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
                    description: p.description.clone(),
                    price_minor: p.price_minor,
                    currency: p.currency.clone(),
                    starts_at: p.starts_at,
                    collection: p.collection.clone(),
                    collection_title: p.collection_title.clone(),
                    collection_lede: p.collection_lede.clone(),
                    collection_venue: p.collection_venue.clone(),
                    collection_doors_at: p.collection_doors_at,
                    kind: p.kind,
                    available_now: level.available,
                    max_per_order: p.max_per_order,
                    pending_units: level.pending,
                    first_back_at: level.first_ends_at,
                    sale_opens_at: p.sale_opens_at,
                    sale_closes_at: p.sale_closes_at,
                    queue_open: p.queue_open,
                    queue_commitment: p.queue_commitment.clone(),
                    image_id: p.image_id.clone(),
                    collection_image_id: p.collection_image_id.clone(),
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

    /// A seated section on sale and its seats (`None`: no such section,
    /// or not on sale).
    pub fn section(&self, product: &str) -> Option<&Arc<SectionSeats>> {
        self.sections.get(product)
    }

    /// The seated section on sale that sells `resource`'s units.
    pub fn section_on(&self, resource: &str) -> Option<&Arc<SectionSeats>> {
        self.sections
            .values()
            .find(|s| s.head.resource_id == resource)
    }

    /// A dining room as memory knows it (not archived).
    pub fn room(&self, room: &str) -> Option<&RoomMemory> {
        self.rooms.get(room)
    }

    /// The room's times from `from` until `to` a party of `party` could
    /// book now, earliest first, as `hf_bookable_times` answers (covers
    /// as a hold could take them); `None`: memory knows no such room.
    pub fn bookable(
        &self,
        room: &str,
        (from, to): (DateTime<Utc>, DateTime<Utc>),
        party: i32,
    ) -> Option<Vec<BookableTime>> {
        let memory = self.rooms.get(room)?;
        Some(memory.plan.bookable(
            &memory.stays,
            (from, to),
            party,
            self.database_now(),
            |resource| self.levels.get(resource).map(|l| l.available.max(0)),
        ))
    }
}

#[derive(sqlx::FromRow)]
pub(super) struct LevelRow {
    pub(super) resource_id: String,
    available_now: i32,
    pending: i32,
    first_ends_at: Option<DateTime<Utc>>,
    pub(super) version: String,
}

const LEVELS: &str = "select r.id as resource_id, s.available_now, s.pending, s.first_ends_at, \
                             r.xmin::text as version \
                        from resources r cross join lateral hf_stock(r.id) s \
                       where r.id = any($1)";

/// Reads the whole catalogue: the same order as `catalogue::availability`.
pub(super) async fn read_all(
    pool: &PgPool,
    old: Option<&Snapshot>,
) -> sqlx::Result<(FullRead, Vec<LevelRow>)> {
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
    let settings = read_settings(pool, old.map(|o| &*o.settings)).await?;
    Ok((
        FullRead {
            products,
            clock_offset,
            settings: Arc::new(settings),
            began: before,
        },
        levels,
    ))
}

pub(super) async fn read_levels(pool: &PgPool, resources: &[&str]) -> sqlx::Result<Vec<LevelRow>> {
    sqlx::query_as(LEVELS).bind(resources).fetch_all(pool).await
}

impl Snapshot {
    /// A read merged into the last snapshot, `old`: `products` replaces the
    /// catalogue (a full read), and the levels read replace theirs;
    /// `sections` are the seated sections now, with the products whose
    /// seats changed (as the seats' module merged them). The new snapshot,
    /// and the stock of the products whose level (or seats) changed;
    /// `None` before the first full read (nothing to merge into).
    pub(super) fn merged(
        old: Option<&Snapshot>,
        full: Option<FullRead>,
        rows: Vec<LevelRow>,
        (sections, seats_changed): (HashMap<String, Arc<SectionSeats>>, Vec<String>),
        rooms: HashMap<String, RoomMemory>,
    ) -> Option<(Snapshot, Vec<Stock>)> {
        let now = Utc::now();
        let (
            full,
            FullRead {
                products,
                clock_offset,
                settings,
                began: full_read_began,
            },
        ) = match (full, old) {
            (Some(read), _) => (true, read),
            (None, Some(old)) => (
                false,
                FullRead {
                    products: old.products.clone(),
                    clock_offset: old.clock_offset,
                    settings: old.settings.clone(),
                    began: old.full_read_began,
                },
            ),
            (None, None) => return None,
        };
        let mut levels = if full {
            HashMap::with_capacity(rows.len())
        } else {
            old.map(|o| o.levels.clone()).unwrap_or_default()
        };
        let mut changed_resources = Vec::new();
        for row in rows {
            let before = old.and_then(|o| o.levels.get(&row.resource_id));
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
        let read_at = match (old, full) {
            (Some(old), false) => old.read_at,
            _ => Instant::now(),
        };
        let snapshot = Snapshot {
            products,
            by_id,
            levels,
            sections,
            rooms,
            read_at,
            clock_offset,
            settings,
            full_read_began,
        };
        let changes: Vec<Stock> = snapshot
            .products
            .iter()
            .filter(|p| changed_resources.contains(&p.resource_id) || seats_changed.contains(&p.id))
            .filter_map(|p| snapshot.stock_of(&p.id))
            .collect();
        Some((snapshot, changes))
    }
}
