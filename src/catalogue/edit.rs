//! Changes to what is sold, one at a time: what the catalogue file and the
//! admin both do. Capacity goes through the engine (refused below what is
//! held and sold, with the numbers); a price change applies to checkouts
//! started after it (an order keeps the prices it was started with); a
//! sale window is the product's, decided by the database's clock;
//! archiving hides, and nothing money touched is deleted.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use sqlx::{PgConnection, PgPool};

use super::{CollectionKind, ProductKind};
use crate::inventory::{Capacity, InvalidInput, ResourceId, UpsertOutcome};

/// A product's most units per order, unless the catalogue says otherwise.
pub const DEFAULT_MAX_PER_ORDER: i32 = 10;

/// A collection as it is written.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, sqlx::FromRow)]
pub struct CollectionEdit {
    pub id: String,
    pub kind: CollectionKind,
    pub title: String,
    #[serde(default)]
    pub lede: String,
    /// An event's moment, when it ends, and when its doors open.
    #[serde(default)]
    pub starts_at: Option<DateTime<Utc>>,
    #[serde(default)]
    pub ends_at: Option<DateTime<Utc>>,
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
    /// When it is over (a slot's end, its event's end): its calendar
    /// entry's end.
    #[serde(default)]
    pub ends_at: Option<DateTime<Utc>>,
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

/// An id made of words, for a new collection or product whose id staff
/// did not give: "Harbour Lights — live!" is `harbour-lights-live`
/// (letters and digits lower-cased, everything else one hyphen, at most
/// `max` bytes). Empty when the words have no ASCII letter or digit.
pub fn slug(words: &str, max: usize) -> String {
    let mut id = String::new();
    for c in words.chars() {
        if c.is_ascii_alphanumeric() {
            id.push(c.to_ascii_lowercase());
        } else if !id.is_empty() && !id.ends_with('-') {
            id.push('-');
        }
    }
    id.truncate(max);
    id.trim_end_matches('-').to_owned()
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
        ends_after_start(self.starts_at, self.ends_at)?;
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
        ends_after_start(self.starts_at, self.ends_at)?;
        ResourceId::parse(&self.id)
    }
}

/// An end, where there is one, is after the start.
fn ends_after_start(
    starts: Option<DateTime<Utc>>,
    ends: Option<DateTime<Utc>>,
) -> Result<(), InvalidInput> {
    match (starts, ends) {
        (Some(starts), Some(ends)) if ends <= starts => Err(bad("it must end after it starts")),
        _ => Ok(()),
    }
}

/// A collection's columns as [`CollectionEdit`] reads them.
pub(crate) const COLLECTION_COLUMNS: &str =
    "id, kind, title, lede, starts_at, ends_at, doors_at, venue, position";

/// Every collection that is not archived, in page order.
pub async fn collections(pool: &PgPool) -> sqlx::Result<Vec<CollectionEdit>> {
    sqlx::query_as(&format!(
        "select {COLLECTION_COLUMNS} from collections \
          where archived_at is null order by position, id"
    ))
    .fetch_all(pool)
    .await
}

/// Create or change a collection (and bring it back if it was archived).
pub async fn put_collection(pool: &PgPool, edit: &CollectionEdit) -> anyhow::Result<()> {
    let mut conn = pool.acquire().await?;
    put_collection_in(&mut conn, edit).await
}

/// [`put_collection`], in the caller's transaction.
pub async fn put_collection_in(
    conn: &mut PgConnection,
    edit: &CollectionEdit,
) -> anyhow::Result<()> {
    edit.check()?;
    sqlx::query(
        "insert into collections (id, kind, title, lede, starts_at, doors_at, venue, position, \
                                  ends_at) \
         values ($1, $2, $3, $4, $5, $6, $7, $8, $9) \
         on conflict (id) do update \
            set kind = excluded.kind, title = excluded.title, lede = excluded.lede, \
                starts_at = excluded.starts_at, doors_at = excluded.doors_at, \
                venue = excluded.venue, position = excluded.position, \
                ends_at = excluded.ends_at, archived_at = null, updated_at = now()",
    )
    .bind(&edit.id)
    .bind(edit.kind)
    .bind(edit.title.trim())
    .bind(&edit.lede)
    .bind(edit.starts_at)
    .bind(edit.doors_at)
    .bind(&edit.venue)
    .bind(edit.position)
    .bind(edit.ends_at)
    .execute(&mut *conn)
    .await?;
    Ok(())
}

/// Create or change a product and its resource's capacity (through the
/// engine). An archived product comes back on sale. The resource and the
/// product are written in one transaction.
pub async fn put_product(pool: &PgPool, edit: &ProductEdit) -> anyhow::Result<PutProduct> {
    let mut tx = pool.begin().await?;
    let outcome = put_product_in(&mut tx, edit).await?;
    tx.commit().await?;
    Ok(outcome)
}

/// [`put_product`], in the caller's transaction. The engine takes the
/// resource's lock (held until the caller commits); when it refuses the
/// capacity ([`PutProduct::CapacityKept`]) everything else is written, so
/// a caller that wants all or nothing rolls back.
pub async fn put_product_in(
    conn: &mut PgConnection,
    edit: &ProductEdit,
) -> anyhow::Result<PutProduct> {
    let resource = edit.check()?;
    let capacity = Capacity::parse(edit.capacity)?;
    let outcome = match crate::inventory::upsert_resource(&mut *conn, &resource, capacity).await? {
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
                               sale_closes_at, hidden, ends_at) \
         values ($1, $1, $2, $3, $4, $5, $6, $7, $8, \
                 coalesce($9, (select coalesce(max(position) + 1, 0) from products \
                                where collection = $8)), \
                 $10, $11, $12, $13, $14) \
         on conflict (id) do update \
            set kind = excluded.kind, name = excluded.name, description = excluded.description, \
                price_minor = excluded.price_minor, currency = excluded.currency, \
                starts_at = excluded.starts_at, ends_at = excluded.ends_at, \
                collection = excluded.collection, \
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
    .bind(edit.ends_at)
    .execute(&mut *conn)
    .await?;
    Ok(outcome)
}

/// Take a product off the shop. Its orders, codes and history stay; its
/// holds run their course. False when there is no such product on sale.
pub async fn archive_product(pool: &PgPool, id: &str) -> sqlx::Result<bool> {
    let mut conn = pool.acquire().await?;
    archive_product_in(&mut conn, id).await
}

/// [`archive_product`], in the caller's transaction.
pub async fn archive_product_in(conn: &mut PgConnection, id: &str) -> sqlx::Result<bool> {
    let archived = sqlx::query(
        "update products set active = false, archived_at = now() where id = $1 and archived_at is null",
    )
    .bind(id)
    .execute(&mut *conn)
    .await?;
    Ok(archived.rows_affected() == 1)
}

/// Take a collection (an event, a schedule, a shelf) and every product of
/// it off the shop; a schedule stops publishing slots.
pub async fn archive_collection(pool: &PgPool, id: &str) -> sqlx::Result<bool> {
    let mut tx = pool.begin().await?;
    let archived = archive_collection_in(&mut tx, id).await?;
    tx.commit().await?;
    Ok(archived)
}

/// [`archive_collection`], in the caller's transaction.
pub async fn archive_collection_in(conn: &mut PgConnection, id: &str) -> sqlx::Result<bool> {
    let archived = sqlx::query(
        "update collections set archived_at = now(), updated_at = now() \
          where id = $1 and archived_at is null",
    )
    .bind(id)
    .execute(&mut *conn)
    .await?;
    sqlx::query(
        "update products set active = false, archived_at = now() where collection = $1 and archived_at is null",
    )
    .bind(id)
    .execute(&mut *conn)
    .await?;
    sqlx::query(
        "update schedules set archived_at = now() where collection = $1 and archived_at is null",
    )
    .bind(id)
    .execute(&mut *conn)
    .await?;
    Ok(archived.rows_affected() == 1)
}

/// An event's collection and the moment of each of its tiers (a tier is
/// when its event is, and ends when it ends), in the caller's transaction.
pub async fn put_event_in(conn: &mut PgConnection, edit: &CollectionEdit) -> anyhow::Result<()> {
    put_collection_in(conn, edit).await?;
    sqlx::query(
        "update products set starts_at = $2, ends_at = $3 \
          where collection = $1 and (starts_at, ends_at) is distinct from ($2, $3)",
    )
    .bind(&edit.id)
    .bind(edit.starts_at)
    .bind(edit.ends_at)
    .execute(&mut *conn)
    .await?;
    Ok(())
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
            ends_at: None,
            max_per_order: 10,
            sale_opens_at: None,
            sale_closes_at: None,
            hidden: false,
            position: None,
        }
    }

    #[test]
    fn slugs_are_ids_the_checks_accept() {
        assert_eq!(slug("Harbour Lights — live!", 100), "harbour-lights-live");
        assert_eq!(slug("  VIP (front) ", 100), "vip-front");
        assert_eq!(slug("Brötchen", 100), "br-tchen");
        assert_eq!(slug("ééé", 100), "");
        assert_eq!(slug("a b c d", 4), "a-b");
        assert!(check_slug("x", &slug("Harbour Lights — live!", 100), 100).is_ok());
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
            ProductEdit {
                starts_at: Some(chrono::Utc::now()),
                ends_at: Some(chrono::Utc::now() - chrono::Duration::hours(1)),
                ..ticket()
            },
        ] {
            assert!(broken.check().is_err(), "{broken:?}");
        }
    }
}
