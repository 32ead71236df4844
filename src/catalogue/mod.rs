//! What is sold: products, each pointing at an inventory resource, their
//! kinds ([`kind`]: every question a kind answers), and the catalogue file
//! ([`file`]). The pages read products through [`crate::live`].

mod file;
mod kind;

use chrono::{DateTime, Utc};
use serde::Serialize;
use sqlx::PgPool;

pub use file::{CatalogueFile, DEFAULT_MAX_PER_ORDER, LoadReport, PickupSlots, ProductSpec};
pub use kind::{Code, ProductKind};

/// A product as the shop shows it.
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
}

/// Active products of one collection (or all), in page order.
pub async fn products(pool: &PgPool, collection: Option<&str>) -> sqlx::Result<Vec<Product>> {
    sqlx::query_as(
        "select id, resource_id, kind, name, description, price_minor, currency, starts_at, collection, \
                max_per_order \
           from products \
          where active and ($1::text is null or collection = $1) \
          order by collection, position, id",
    )
    .bind(collection)
    .fetch_all(pool)
    .await
}

/// A product with what is left of it now (plain holds past their TTL
/// already count as free), for the catalogue pages.
#[derive(Debug, Clone, sqlx::FromRow)]
pub struct Availability {
    pub id: String,
    pub name: String,
    pub price_minor: i64,
    pub currency: String,
    pub starts_at: Option<DateTime<Utc>>,
    pub collection: String,
    pub kind: ProductKind,
    pub available_now: i32,
    pub max_per_order: i32,
    /// Units held by shoppers checking out or paying: they come back if
    /// those shoppers do not finish.
    pub pending_units: i32,
    /// When the first of those holds ends.
    pub first_back_at: Option<DateTime<Utc>>,
}

/// Active products of one collection (or all) with their availability, in
/// page order.
pub async fn availability(
    pool: &PgPool,
    collection: Option<&str>,
) -> sqlx::Result<Vec<Availability>> {
    sqlx::query_as(
        "select p.id, p.name, p.price_minor, p.currency, p.starts_at, p.collection, p.kind, s.available_now, \
                p.max_per_order, s.pending as pending_units, s.first_ends_at as first_back_at \
           from products p cross join lateral hf_stock(p.resource_id) s \
          where p.active and ($1::text is null or p.collection = $1) \
          order by p.collection = 'pantry', p.collection, p.position, p.id",
    )
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
