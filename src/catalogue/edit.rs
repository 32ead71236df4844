//! Changes to what is sold, one at a time: what the catalogue file and the
//! admin both do. Capacity goes through the engine (refused below what is
//! held and sold, with the numbers); a price change applies to checkouts
//! started after it (an order keeps the prices it was started with); a
//! sale window is the product's, decided by the database's clock;
//! archiving hides, and nothing money touched is deleted.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use sqlx::PgPool;

use super::ProductKind;
use crate::inventory::{Capacity, InvalidInput, Inventory, ResourceId, UpsertOutcome};

/// A product's most units per order, unless the catalogue says otherwise.
pub const DEFAULT_MAX_PER_ORDER: i32 = 10;

/// What a collection groups.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, sqlx::Type)]
#[serde(rename_all = "snake_case")]
#[sqlx(type_name = "text", rename_all = "snake_case")]
pub enum CollectionKind {
    /// An event and its tiers.
    Event,
    /// A pickup schedule and its slots.
    Schedule,
    /// Stock on a shelf.
    Shelf,
}

impl CollectionKind {
    /// The kind of product a collection of this kind holds.
    pub fn products(self) -> ProductKind {
        match self {
            CollectionKind::Event => ProductKind::Ticket,
            CollectionKind::Schedule => ProductKind::PickupSlot,
            CollectionKind::Shelf => ProductKind::Stock,
        }
    }
}

/// A collection as it is written.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CollectionEdit {
    pub id: String,
    pub kind: CollectionKind,
    pub title: String,
    #[serde(default)]
    pub lede: String,
    /// An event's moment, and when its doors open.
    #[serde(default)]
    pub starts_at: Option<DateTime<Utc>>,
    #[serde(default)]
    pub doors_at: Option<DateTime<Utc>>,
    #[serde(default)]
    pub venue: String,
    #[serde(default)]
    pub position: i32,
}

/// A product as it is written, with its capacity.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ProductEdit {
    pub id: String,
    pub collection: String,
    pub kind: ProductKind,
    pub name: String,
    pub description: String,
    pub price_minor: i64,
    pub currency: String,
    pub capacity: i64,
    pub starts_at: Option<DateTime<Utc>>,
    pub max_per_order: i32,
    pub sale_opens_at: Option<DateTime<Utc>>,
    pub sale_closes_at: Option<DateTime<Utc>>,
    pub hidden: bool,
    /// Its place on the page; `None` keeps the one it has (or puts a new
    /// product last).
    pub position: Option<i32>,
}

/// What writing a product did.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "outcome", rename_all = "snake_case")]
pub enum PutProduct {
    Created,
    Updated,
    /// Everything but the capacity was written: the engine refused to go
    /// below what is held and sold.
    CapacityKept {
        requested: i64,
        held: i32,
        sold: i32,
    },
}

fn bad(message: impl Into<String>) -> InvalidInput {
    InvalidInput(message.into())
}

/// Text a page shows: at most `max` characters, no control characters
/// (line breaks are allowed in descriptions).
fn words(field: &str, value: &str, max: usize, lines: bool) -> Result<(), InvalidInput> {
    if value.chars().count() > max {
        return Err(bad(format!("{field} is at most {max} characters")));
    }
    if value
        .chars()
        .any(|c| c == '\0' || (c.is_control() && !(lines && (c == '\n' || c == '\r'))))
    {
        return Err(bad(format!(
            "{field} must not contain control characters (a NUL, a tab)"
        )));
    }
    Ok(())
}

/// An id of a collection or a product: lower-case letters, digits and
/// hyphens, starting with a letter or digit.
pub fn check_slug(field: &str, id: &str, max: usize) -> Result<(), InvalidInput> {
    let ok = !id.is_empty()
        && id.len() <= max
        && id.bytes().next().is_some_and(|b| b.is_ascii_alphanumeric())
        && id
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-');
    if ok {
        Ok(())
    } else {
        Err(bad(format!(
            "{field} {id:?} must be 1 to {max} lower-case letters, digits and hyphens"
        )))
    }
}

impl CollectionEdit {
    pub fn check(&self) -> Result<(), InvalidInput> {
        check_slug("a collection's id", &self.id, 100)?;
        if self.title.trim().is_empty() {
            return Err(bad("a collection needs a title"));
        }
        words("the title", &self.title, 200, false)?;
        words("the lede", &self.lede, 1000, true)?;
        words("the venue", &self.venue, 200, false)?;
        if let (Some(doors), Some(starts)) = (self.doors_at, self.starts_at)
            && doors > starts
        {
            return Err(bad("the doors open before the event starts"));
        }
        Ok(())
    }
}

impl ProductEdit {
    pub fn check(&self) -> Result<ResourceId, InvalidInput> {
        // a product's id is its resource's: letters, digits and `-_.:`;
        // `voucher:` names a voucher's uses, never a product
        let id_ok = !self.id.is_empty()
            && self.id.len() <= 200
            && self
                .id
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b"-_.:".contains(&b))
            && !self.id.starts_with("voucher:");
        if !id_ok {
            return Err(bad(format!(
                "a product's id {:?} must be 1 to 200 letters, digits, -, _, . or : \
                 (and not start with voucher:)",
                self.id
            )));
        }
        if self.name.trim().is_empty() {
            return Err(bad("a product needs a name"));
        }
        words("the name", &self.name, 200, false)?;
        words("the description", &self.description, 5000, true)?;
        if !(1..=100).contains(&self.max_per_order) {
            return Err(bad("the most one order may take is 1 to 100"));
        }
        if self.price_minor < 0 {
            return Err(bad("the price is zero or more"));
        }
        if self.currency.len() != 3 || !self.currency.bytes().all(|b| b.is_ascii_lowercase()) {
            return Err(bad("the currency is three lower-case letters, like eur"));
        }
        Capacity::parse(self.capacity)?;
        if let (Some(opens), Some(closes)) = (self.sale_opens_at, self.sale_closes_at)
            && opens >= closes
        {
            return Err(bad("the sale must open before it closes"));
        }
        ResourceId::parse(&self.id)
    }
}

/// Create or change a collection (and bring it back if it was archived).
pub async fn put_collection(pool: &PgPool, edit: &CollectionEdit) -> anyhow::Result<()> {
    edit.check()?;
    sqlx::query(
        "insert into collections (id, kind, title, lede, starts_at, doors_at, venue, position) \
         values ($1, $2, $3, $4, $5, $6, $7, $8) \
         on conflict (id) do update \
            set kind = excluded.kind, title = excluded.title, lede = excluded.lede, \
                starts_at = excluded.starts_at, doors_at = excluded.doors_at, \
                venue = excluded.venue, position = excluded.position, archived_at = null, \
                updated_at = now()",
    )
    .bind(&edit.id)
    .bind(edit.kind)
    .bind(edit.title.trim())
    .bind(&edit.lede)
    .bind(edit.starts_at)
    .bind(edit.doors_at)
    .bind(&edit.venue)
    .bind(edit.position)
    .execute(pool)
    .await?;
    Ok(())
}

/// Create or change a product and its resource's capacity (through the
/// engine). An archived product comes back on sale.
pub async fn put_product(pool: &PgPool, edit: &ProductEdit) -> anyhow::Result<PutProduct> {
    let resource = edit.check()?;
    let capacity = Capacity::parse(edit.capacity)?;
    let outcome = match Inventory::new(pool.clone())
        .upsert_resource(&resource, capacity)
        .await?
    {
        UpsertOutcome::Created { .. } => PutProduct::Created,
        UpsertOutcome::Updated { .. } => PutProduct::Updated,
        UpsertOutcome::CapacityBelowCommitted { counters, .. } => PutProduct::CapacityKept {
            requested: edit.capacity,
            held: counters.held,
            sold: counters.sold,
        },
    };
    sqlx::query(
        "insert into products (id, resource_id, kind, name, description, price_minor, currency, \
                               starts_at, collection, position, max_per_order, sale_opens_at, \
                               sale_closes_at, hidden) \
         values ($1, $1, $2, $3, $4, $5, $6, $7, $8, \
                 coalesce($9, (select coalesce(max(position) + 1, 0) from products \
                                where collection = $8)), \
                 $10, $11, $12, $13) \
         on conflict (id) do update \
            set kind = excluded.kind, name = excluded.name, description = excluded.description, \
                price_minor = excluded.price_minor, currency = excluded.currency, \
                starts_at = excluded.starts_at, collection = excluded.collection, \
                position = coalesce($9, products.position), \
                max_per_order = excluded.max_per_order, sale_opens_at = excluded.sale_opens_at, \
                sale_closes_at = excluded.sale_closes_at, hidden = excluded.hidden, \
                active = true, archived_at = null",
    )
    .bind(&edit.id)
    .bind(edit.kind)
    .bind(edit.name.trim())
    .bind(&edit.description)
    .bind(edit.price_minor)
    .bind(&edit.currency)
    .bind(edit.starts_at)
    .bind(&edit.collection)
    .bind(edit.position)
    .bind(edit.max_per_order)
    .bind(edit.sale_opens_at)
    .bind(edit.sale_closes_at)
    .bind(edit.hidden)
    .execute(pool)
    .await?;
    Ok(outcome)
}

/// Take a product off the shop. Its orders, codes and history stay; its
/// holds run their course. False when there is no such product on sale.
pub async fn archive_product(pool: &PgPool, id: &str) -> sqlx::Result<bool> {
    let archived = sqlx::query(
        "update products set active = false, archived_at = now() where id = $1 and active",
    )
    .bind(id)
    .execute(pool)
    .await?;
    Ok(archived.rows_affected() == 1)
}

/// Take a collection (an event, a schedule, a shelf) and every product of
/// it off the shop; a schedule stops publishing slots.
pub async fn archive_collection(pool: &PgPool, id: &str) -> sqlx::Result<bool> {
    let mut tx = pool.begin().await?;
    let archived = sqlx::query(
        "update collections set archived_at = now(), updated_at = now() \
          where id = $1 and archived_at is null",
    )
    .bind(id)
    .execute(&mut *tx)
    .await?;
    sqlx::query(
        "update products set active = false, archived_at = now() where collection = $1 and active",
    )
    .bind(id)
    .execute(&mut *tx)
    .await?;
    sqlx::query(
        "update pickup_schedules set archived_at = now() where collection = $1 and archived_at is null",
    )
    .bind(id)
    .execute(&mut *tx)
    .await?;
    tx.commit().await?;
    Ok(archived.rows_affected() == 1)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ticket() -> ProductEdit {
        ProductEdit {
            id: "harbour-lights-general".into(),
            collection: "harbour-lights".into(),
            kind: ProductKind::Ticket,
            name: "General".into(),
            description: "Standing.\nDoors at 19:00.".into(),
            price_minor: 3500,
            currency: "eur".into(),
            capacity: 200,
            starts_at: None,
            max_per_order: 10,
            sale_opens_at: None,
            sale_closes_at: None,
            hidden: false,
            position: None,
        }
    }

    #[test]
    fn a_product_is_refused_for_what_the_shop_could_not_show_or_sell() {
        assert!(ticket().check().is_ok());
        for broken in [
            ProductEdit {
                id: "not a slug".into(),
                ..ticket()
            },
            ProductEdit {
                id: "voucher:FANS".into(),
                ..ticket()
            },
            ProductEdit {
                name: " ".into(),
                ..ticket()
            },
            ProductEdit {
                name: "tab\there".into(),
                ..ticket()
            },
            ProductEdit {
                max_per_order: 0,
                ..ticket()
            },
            ProductEdit {
                price_minor: -1,
                ..ticket()
            },
            ProductEdit {
                currency: "EUR".into(),
                ..ticket()
            },
            ProductEdit {
                capacity: -5,
                ..ticket()
            },
            ProductEdit {
                sale_opens_at: Some(chrono::Utc::now()),
                sale_closes_at: Some(chrono::Utc::now() - chrono::Duration::hours(1)),
                ..ticket()
            },
        ] {
            assert!(broken.check().is_err(), "{broken:?}");
        }
    }
}
