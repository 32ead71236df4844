//! The catalogue file: products that point at inventory resources, read
//! from JSON (`fixtures/catalogue.json` is the demo) by `holdfast catalogue
//! load` and by `serve` without keys.

use std::path::Path;

use anyhow::Context;
use chrono::{DateTime, Duration, NaiveTime, Utc};
use serde::{Deserialize, Serialize};
use sqlx::PgPool;

use super::{Product, ProductKind};
use crate::clock::ShopZone;
use crate::inventory::{Capacity, Inventory, ResourceId, UpsertOutcome};

#[derive(Debug, Deserialize)]
pub struct CatalogueFile {
    pub currency: String,
    pub pickup_slots: Option<PickupSlots>,
    #[serde(default)]
    pub products: Vec<ProductSpec>,
}

/// A bakery's slots: the same product at each of `times` (wall-clock
/// times in the shop's zone, `HOLDFAST_TIME_ZONE`) on each day ahead.
/// `times_utc` gives them in UTC instead.
#[derive(Debug, Deserialize)]
pub struct PickupSlots {
    pub collection: String,
    pub name: String,
    pub description: String,
    pub price_minor: i64,
    pub capacity: i64,
    pub days_ahead: Vec<i64>,
    #[serde(default)]
    pub times: Vec<String>,
    #[serde(default)]
    pub times_utc: Vec<String>,
    /// Most boxes one order may take (default 10).
    #[serde(default = "default_max_per_order")]
    pub max_per_order: i32,
}

/// A product's most units per order, unless the catalogue says otherwise.
pub const DEFAULT_MAX_PER_ORDER: i32 = 10;

fn default_max_per_order() -> i32 {
    DEFAULT_MAX_PER_ORDER
}

#[derive(Debug, Deserialize)]
pub struct ProductSpec {
    pub id: String,
    pub collection: String,
    pub kind: ProductKind,
    pub name: String,
    #[serde(default)]
    pub description: String,
    pub price_minor: i64,
    pub capacity: i64,
    pub days_ahead: Option<i64>,
    /// When it happens, `days_ahead` days from today: a wall-clock time in
    /// the shop's zone (`time`) or in UTC (`time_utc`).
    pub time: Option<String>,
    pub time_utc: Option<String>,
    /// Most units one order may take (default 10).
    #[serde(default = "default_max_per_order")]
    pub max_per_order: i32,
}

/// What loading changed.
#[derive(Debug, Default, Serialize)]
pub struct LoadReport {
    pub products: usize,
    pub resources_created: usize,
    /// Resources whose capacity could not shrink below what is committed.
    pub capacity_kept: Vec<String>,
}

/// `time` on the day `days_ahead` from `now`'s date, both in `zone`.
fn at(
    now: DateTime<Utc>,
    zone: ShopZone,
    days_ahead: i64,
    time: &str,
) -> anyhow::Result<DateTime<Utc>> {
    let time = NaiveTime::parse_from_str(time, "%H:%M")
        .with_context(|| format!("{time:?} is not a time like 12:30"))?;
    let day = zone
        .today(now)
        .checked_add_signed(Duration::days(days_ahead))
        .with_context(|| format!("{days_ahead} days ahead is out of range"))?;
    zone.at(day, time).map_err(|e| anyhow::anyhow!(e))
}

impl CatalogueFile {
    pub fn read(path: &Path) -> anyhow::Result<Self> {
        let text = std::fs::read_to_string(path)
            .with_context(|| format!("cannot read {}", path.display()))?;
        serde_json::from_str(&text)
            .with_context(|| format!("{} is not a catalogue", path.display()))
    }

    /// Every product with its capacity and start, dates relative to `now`
    /// in `zone`.
    fn expand(&self, now: DateTime<Utc>, zone: ShopZone) -> anyhow::Result<Vec<(Product, i64)>> {
        let mut products = Vec::new();
        if let Some(slots) = &self.pickup_slots {
            let times = slots
                .times
                .iter()
                .map(|t| (t, zone))
                .chain(slots.times_utc.iter().map(|t| (t, ShopZone::UTC)));
            let times: Vec<_> = times.collect();
            for day in &slots.days_ahead {
                for (time, in_zone) in &times {
                    let starts = at(now, *in_zone, *day, time)?;
                    let id = format!("{}-{}", slots.collection, starts.format("%Y-%m-%d-%H%M"));
                    products.push((
                        Product {
                            resource_id: id.clone(),
                            id,
                            kind: ProductKind::PickupSlot,
                            name: format!("{}, pickup {}", slots.name, zone.short(starts)),
                            description: slots.description.clone(),
                            price_minor: slots.price_minor,
                            currency: self.currency.clone(),
                            starts_at: Some(starts),
                            collection: slots.collection.clone(),
                            max_per_order: slots.max_per_order,
                        },
                        slots.capacity,
                    ));
                }
            }
        }
        for spec in &self.products {
            let starts_at = match (spec.days_ahead, &spec.time, &spec.time_utc) {
                (Some(days), Some(time), None) => Some(at(now, zone, days, time)?),
                (Some(days), None, Some(time)) => Some(at(now, ShopZone::UTC, days, time)?),
                (_, Some(_), Some(_)) => {
                    anyhow::bail!("product {:?}: give time or time_utc, not both", spec.id)
                }
                _ => None,
            };
            products.push((
                Product {
                    id: spec.id.clone(),
                    resource_id: spec.id.clone(),
                    kind: spec.kind,
                    name: spec.name.clone(),
                    description: spec.description.clone(),
                    price_minor: spec.price_minor,
                    currency: self.currency.clone(),
                    starts_at,
                    collection: spec.collection.clone(),
                    max_per_order: spec.max_per_order,
                },
                spec.capacity,
            ));
        }
        Ok(products)
    }

    /// Create or update every resource and product. Loading twice changes
    /// nothing; a capacity that would fall below what is committed is kept.
    /// Every product is checked before anything is written: a bad line
    /// leaves the database as it was.
    pub async fn load(&self, pool: &PgPool) -> anyhow::Result<LoadReport> {
        self.load_in(pool, ShopZone::UTC).await
    }

    /// [`load`](Self::load), with the catalogue's wall-clock times read in
    /// the shop's zone.
    pub async fn load_in(&self, pool: &PgPool, zone: ShopZone) -> anyhow::Result<LoadReport> {
        let inventory = Inventory::new(pool.clone());
        let mut report = LoadReport::default();
        let mut checked = Vec::new();
        for (product, capacity) in self.expand(Utc::now(), zone)? {
            let resource =
                check(&product, capacity).with_context(|| format!("product {:?}", product.id))?;
            checked.push((product, resource, Capacity::parse(capacity)?));
        }
        for (product, resource, capacity) in checked {
            match inventory.upsert_resource(&resource, capacity).await? {
                UpsertOutcome::Created { .. } => report.resources_created += 1,
                UpsertOutcome::Updated { .. } => {}
                UpsertOutcome::CapacityBelowCommitted { .. } => {
                    report.capacity_kept.push(product.resource_id.clone())
                }
            }
            sqlx::query(
                "insert into products (id, resource_id, kind, name, description, price_minor, currency, \
                                       starts_at, collection, position, max_per_order) \
                 values ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11) \
                 on conflict (id) do update \
                    set resource_id = excluded.resource_id, kind = excluded.kind, name = excluded.name, \
                        description = excluded.description, price_minor = excluded.price_minor, \
                        currency = excluded.currency, starts_at = excluded.starts_at, \
                        collection = excluded.collection, position = excluded.position, \
                        max_per_order = excluded.max_per_order, active = true",
            )
            .bind(&product.id)
            .bind(&product.resource_id)
            .bind(product.kind)
            .bind(&product.name)
            .bind(&product.description)
            .bind(product.price_minor)
            .bind(&product.currency)
            .bind(product.starts_at)
            .bind(&product.collection)
            .bind(report.products as i32)
            .bind(product.max_per_order)
            .execute(pool)
            .await
            .with_context(|| format!("cannot store product {}", product.id))?;
            report.products += 1;
        }
        Ok(report)
    }
}

/// One product's fields, as the database will take them.
fn check(product: &Product, capacity: i64) -> anyhow::Result<ResourceId> {
    anyhow::ensure!(
        (1..=100).contains(&product.max_per_order),
        "max_per_order must be 1 to 100"
    );
    anyhow::ensure!(product.price_minor >= 0, "price_minor must be zero or more");
    Capacity::parse(capacity)?;
    for (field, value) in [
        ("id", &product.id),
        ("name", &product.name),
        ("collection", &product.collection),
        ("currency", &product.currency),
    ] {
        anyhow::ensure!(
            !value.chars().any(char::is_control),
            "{field} must not contain control characters (a NUL, a line break)"
        );
    }
    anyhow::ensure!(
        !product.description.contains('\0'),
        "description must not contain a NUL character"
    );
    Ok(ResourceId::parse(&product.resource_id)?)
}
