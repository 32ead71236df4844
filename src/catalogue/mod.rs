//! What is sold: products, each pointing at an inventory resource, their
//! kinds ([`kinds`]: the room where everything that differs between kinds
//! is answered), and the catalogue file ([`file`]). The pages read products
//! through [`crate::live`].

pub mod edit;
mod file;
pub mod kinds;
pub mod schedules;

use chrono::{DateTime, Utc};
use serde::Serialize;
use sqlx::PgPool;

pub use edit::{CollectionEdit, DEFAULT_MAX_PER_ORDER, ProductEdit, PutProduct};
pub use file::{
    CatalogueFile, EventSpec, LoadReport, PickupSlots, ProductSpec, SaleWindow, TierSpec, When,
    moment,
};
pub use kinds::{
    CalendarEntry, CheckedBy, Choice, ChoiceError, ChoiceFields, ChoiceKind, CodeShape, CodeWords,
    CollectionKind, FillCounts, ProductKind, Sharing,
};
pub use kinds::{seats, tables};

/// A product as the shop shows it, with its collection's words.
#[derive(Debug, Clone, Serialize, sqlx::FromRow)]
pub struct Product {
    pub id: String,
    pub resource_id: String,
    pub kind: ProductKind,
    pub name: String,
    pub description: String,
    pub price_minor: i64,
    pub currency: String,
    pub starts_at: Option<DateTime<Utc>>,
    pub collection: String,
    pub max_per_order: i32,
    /// When its sale opens and closes (the database's clock decides).
    pub sale_opens_at: Option<DateTime<Utc>>,
    pub sale_closes_at: Option<DateTime<Utc>>,
    /// Sold only with a voucher that unlocks it; not in the catalogue.
    pub hidden: bool,
    pub collection_title: String,
    pub collection_lede: String,
    /// Where its event is, and when its doors open (empty, `None`: not
    /// said).
    pub collection_venue: String,
    pub collection_doors_at: Option<DateTime<Utc>>,
    pub collection_position: i32,
    /// Its drop queue takes entries: turned on, not drawn yet.
    pub queue_open: bool,
    /// Its drop queue's commitment (the seed's SHA-256), published from
    /// the moment the queue is turned on.
    pub queue_commitment: Option<String>,
    /// Its image, and its collection's ([`crate::images`]).
    pub image_id: Option<String>,
    pub collection_image_id: Option<String>,
}

/// Where a product's sale stands at a moment.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(tag = "sale", rename_all = "snake_case")]
pub enum Sale {
    Open,
    /// Not yet: it opens then.
    Opens {
        at: DateTime<Utc>,
    },
    /// No longer: it closed then.
    Closed {
        at: DateTime<Utc>,
    },
}

impl Sale {
    /// A sale window at `now`.
    pub fn at(
        opens: Option<DateTime<Utc>>,
        closes: Option<DateTime<Utc>>,
        now: DateTime<Utc>,
    ) -> Self {
        match (opens, closes) {
            (Some(at), _) if now < at => Sale::Opens { at },
            (_, Some(at)) if now >= at => Sale::Closed { at },
            _ => Sale::Open,
        }
    }
}

impl Product {
    /// Where its sale stands at `now` (the database's clock, as memory
    /// knows it: [`crate::live::Snapshot::database_now`]).
    pub fn sale(&self, now: DateTime<Utc>) -> Sale {
        Sale::at(self.sale_opens_at, self.sale_closes_at, now)
    }
}

/// A product's columns as [`Product`] reads them: `p` is the product, `c`
/// its collection.
pub(crate) const PRODUCT_COLUMNS: &str = "p.id, p.resource_id, p.kind, p.name, p.description, \
     p.price_minor, p.currency, p.starts_at, p.collection, p.max_per_order, p.sale_opens_at, \
     p.sale_closes_at, p.hidden, c.title as collection_title, c.lede as collection_lede, \
     c.venue as collection_venue, c.doors_at as collection_doors_at, \
     c.position as collection_position, \
     (p.queue_commitment is not null and p.queue_drawn_at is null) as queue_open, \
     p.queue_commitment, p.image_id, c.image_id as collection_image_id";

/// The order the shop's pages list products in.
pub(crate) const PAGE_ORDER: &str = "c.position, p.collection, p.position, p.id";

/// Active products of one collection (or all), in page order, hidden ones
/// among them.
pub async fn products(pool: &PgPool, collection: Option<&str>) -> sqlx::Result<Vec<Product>> {
    sqlx::query_as(&format!(
        "select {PRODUCT_COLUMNS} \
           from products p join collections c on c.id = p.collection \
          where p.active and ($1::text is null or p.collection = $1) \
          order by {PAGE_ORDER}"
    ))
    .bind(collection)
    .fetch_all(pool)
    .await
}

/// Whether the shop has never had anything to sell: no collection and no
/// product, archived or not. Only such a shop gets the demo catalogue.
pub async fn sells_nothing(pool: &PgPool) -> sqlx::Result<bool> {
    sqlx::query_scalar(
        "select not exists (select 1 from collections) and not exists (select 1 from products)",
    )
    .fetch_one(pool)
    .await
}

/// A product with what is left of it now (plain holds past their TTL
/// already count as free), for the catalogue pages.
#[derive(Debug, Clone, sqlx::FromRow)]
pub struct Availability {
    pub id: String,
    /// Sold only with a voucher that unlocks it (shown only to its code).
    pub hidden: bool,
    /// The collection's place among the others.
    pub collection_position: i32,
    pub name: String,
    /// What staff wrote about it, shown where a shopper decides.
    pub description: String,
    pub price_minor: i64,
    pub currency: String,
    pub starts_at: Option<DateTime<Utc>>,
    pub collection: String,
    pub collection_title: String,
    pub collection_lede: String,
    /// Where its event is, and when its doors open.
    pub collection_venue: String,
    pub collection_doors_at: Option<DateTime<Utc>>,
    pub kind: ProductKind,
    pub available_now: i32,
    pub max_per_order: i32,
    /// Units held by shoppers checking out or paying: they come back if
    /// those shoppers do not finish.
    pub pending_units: i32,
    /// When the first of those holds ends.
    pub first_back_at: Option<DateTime<Utc>>,
    pub sale_opens_at: Option<DateTime<Utc>>,
    pub sale_closes_at: Option<DateTime<Utc>>,
    /// Its drop queue takes entries (before its sale opens).
    pub queue_open: bool,
    /// Its drop queue's commitment, once turned on (drawn or not).
    pub queue_commitment: Option<String>,
    /// Its image, and its collection's ([`crate::images`]).
    pub image_id: Option<String>,
    pub collection_image_id: Option<String>,
}

impl Availability {
    pub fn sale(&self, now: DateTime<Utc>) -> Sale {
        Sale::at(self.sale_opens_at, self.sale_closes_at, now)
    }
}

/// Active products of one collection (or all) with their availability, in
/// page order; hidden ones are left out.
pub async fn availability(
    pool: &PgPool,
    collection: Option<&str>,
) -> sqlx::Result<Vec<Availability>> {
    sqlx::query_as(&format!(
        "select {AVAILABILITY_COLUMNS} \
           from products p join collections c on c.id = p.collection \
          cross join lateral hf_stock(p.resource_id) s \
          where p.active and not p.hidden and ($1::text is null or p.collection = $1) \
          order by {PAGE_ORDER}"
    ))
    .bind(collection)
    .fetch_all(pool)
    .await
}

/// A collection's products not archived, drafts among them, with their
/// availability, in page order; hidden ones left out: staff's preview of
/// what publishing will put in the shop.
pub async fn preview(pool: &PgPool, collection: &str) -> sqlx::Result<Vec<Availability>> {
    sqlx::query_as(&format!(
        "select {AVAILABILITY_COLUMNS} \
           from products p join collections c on c.id = p.collection \
          cross join lateral hf_stock(p.resource_id) s \
          where p.archived_at is null and not p.hidden and p.collection = $1 \
            and c.archived_at is null \
          order by {PAGE_ORDER}"
    ))
    .bind(collection)
    .fetch_all(pool)
    .await
}

const AVAILABILITY_COLUMNS: &str = "p.id, p.hidden, c.position as collection_position, p.name, \
     p.description, p.price_minor, p.currency, p.starts_at, p.collection, \
     c.title as collection_title, c.lede as collection_lede, c.venue as collection_venue, \
     c.doors_at as collection_doors_at, p.kind, s.available_now, p.max_per_order, \
     s.pending as pending_units, s.first_ends_at as first_back_at, p.sale_opens_at, \
     p.sale_closes_at, (p.queue_commitment is not null and p.queue_drawn_at is null) as queue_open, \
     p.queue_commitment, p.image_id, c.image_id as collection_image_id";

/// The hidden products among `ids` (those a voucher unlocks), of one
/// collection or all, with their availability.
pub async fn unlocked(
    pool: &PgPool,
    ids: &[String],
    collection: Option<&str>,
) -> sqlx::Result<Vec<Availability>> {
    sqlx::query_as(&format!(
        "select {AVAILABILITY_COLUMNS} \
           from products p join collections c on c.id = p.collection \
          cross join lateral hf_stock(p.resource_id) s \
          where p.active and p.hidden and p.id = any($1) \
            and ($2::text is null or p.collection = $2) \
          order by {PAGE_ORDER}"
    ))
    .bind(ids)
    .bind(collection)
    .fetch_all(pool)
    .await
}

/// What is left of each of these products now, and what is pending
/// (unknown ids are left out), for the pages' live updates.
#[derive(Debug, Clone, PartialEq, Serialize, sqlx::FromRow)]
pub struct Stock {
    pub id: String,
    pub available: i32,
    pub pending: i32,
    pub first_back_at: Option<DateTime<Utc>>,
}

/// What is left of these products in the database now (unknown ids left
/// out), sorted by id. The pages read [`crate::live::LiveStock::stock`].
pub async fn stock(pool: &PgPool, ids: &[String]) -> sqlx::Result<Vec<Stock>> {
    sqlx::query_as(
        "select p.id, greatest(s.available_now, 0) as available, s.pending, \
                s.first_ends_at as first_back_at \
           from products p cross join lateral hf_stock(p.resource_id) s \
          where p.active and p.id = any($1) \
          order by p.id",
    )
    .bind(ids)
    .fetch_all(pool)
    .await
}

/// The kinds of these products, each once: what a page of their lines
/// must ask (a booking's guest gives a phone).
pub async fn kinds_of(pool: &PgPool, ids: &[String]) -> sqlx::Result<Vec<ProductKind>> {
    if ids.is_empty() {
        return Ok(Vec::new());
    }
    sqlx::query_scalar("select distinct kind from products where id = any($1)")
        .bind(ids)
        .fetch_all(pool)
        .await
}

/// The shop's currency: the one its catalogue sells in (`eur` while it
/// sells nothing yet).
pub async fn shop_currency(pool: &PgPool) -> sqlx::Result<String> {
    Ok(catalogue_currency(pool)
        .await?
        .unwrap_or_else(|| "eur".into()))
}

/// The currency most of what the catalogue sells is in; `None` while it
/// sells nothing.
pub async fn catalogue_currency(pool: &PgPool) -> sqlx::Result<Option<String>> {
    sqlx::query_scalar(
        "select currency from (select currency from products where active \
                               union all select currency from schedules \
                                where archived_at is null) c \
          group by currency order by count(*) desc, currency limit 1",
    )
    .fetch_optional(pool)
    .await
}
