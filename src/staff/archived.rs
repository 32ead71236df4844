//! What was taken off the shop, and bringing it back. Archiving hides and
//! deletes nothing (`staff::catalogue`), so restoring is the same rows
//! made visible again: a collection (an event, a schedule, a shelf) comes
//! back with exactly the products and schedule archived with it (those
//! written in its archiving's transaction, so with its very moment), and
//! not with what was archived on its own before; a product comes back on
//! its own when its collection is in the shop. Nothing of the engine is
//! touched: a restored thing's capacity, sold and reserved units are what
//! they were. Each restore is one transaction with its Activity record.

use chrono::{DateTime, Utc};
use serde_json::json;
use sqlx::PgPool;

use super::StaffMember;
use crate::audit;
use crate::catalogue::{CollectionKind, ProductKind};

/// A collection off the shop, with what was archived with it.
#[derive(Debug, Clone, sqlx::FromRow)]
pub struct ArchivedCollection {
    pub id: String,
    pub kind: CollectionKind,
    pub title: String,
    pub starts_at: Option<DateTime<Utc>>,
    pub archived_at: DateTime<Utc>,
    /// Its products archived with it (they come back with it).
    pub products: i64,
    /// Units sold of them.
    pub sold: i64,
}

/// A product archived on its own, its collection still in the shop.
#[derive(Debug, Clone, sqlx::FromRow)]
pub struct ArchivedProduct {
    pub id: String,
    pub kind: ProductKind,
    pub name: String,
    pub collection_title: String,
    pub starts_at: Option<DateTime<Utc>>,
    pub archived_at: DateTime<Utc>,
    pub total: i32,
    pub held: i32,
    pub sold: i32,
}

/// Everything of the catalogue that is off the shop, newest first.
#[derive(Debug, Clone, Default)]
pub struct Archived {
    pub collections: Vec<ArchivedCollection>,
    pub products: Vec<ArchivedProduct>,
}

/// What the Archived page lists.
pub async fn archived(pool: &PgPool) -> sqlx::Result<Archived> {
    let collections = sqlx::query_as(
        "select c.id, c.kind, c.title, c.starts_at, c.archived_at, \
                count(p.id) as products, coalesce(sum(r.sold), 0)::bigint as sold \
           from collections c \
           left join products p on p.collection = c.id and p.archived_at = c.archived_at \
           left join resources r on r.id = p.resource_id \
          where c.archived_at is not null \
          group by c.id order by c.archived_at desc, c.id",
    )
    .fetch_all(pool)
    .await?;
    let products = sqlx::query_as(
        "select p.id, p.kind, p.name, c.title as collection_title, p.starts_at, p.archived_at, \
                r.total, r.held, r.sold \
           from products p join collections c on c.id = p.collection \
           join resources r on r.id = p.resource_id \
          where p.archived_at is not null and c.archived_at is null \
          order by p.archived_at desc, p.id",
    )
    .fetch_all(pool)
    .await?;
    Ok(Archived {
        collections,
        products,
    })
}

/// How many things the Archived page lists.
pub async fn count(pool: &PgPool) -> sqlx::Result<i64> {
    sqlx::query_scalar(
        "select (select count(*) from collections where archived_at is not null) \
              + (select count(*) from products p join collections c on c.id = p.collection \
                  where p.archived_at is not null and c.archived_at is null)",
    )
    .fetch_one(pool)
    .await
}

/// What a restore came to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Restored {
    /// Back in the shop, with this many products.
    Done { products: i64 },
    /// Nothing archived by that id: nothing was changed.
    NotArchived,
    /// A product whose collection is archived comes back with it: restore
    /// that (named) first. Nothing was changed.
    CollectionArchived { title: String },
}

/// Bring an archived collection back, with what was archived with it.
pub async fn restore_collection(
    pool: &PgPool,
    staff: &StaffMember,
    id: &str,
) -> super::Result<Restored> {
    #[derive(sqlx::FromRow)]
    struct Row {
        kind: CollectionKind,
        title: String,
        archived_at: DateTime<Utc>,
    }
    let mut tx = pool.begin().await?;
    let row: Option<Row> = sqlx::query_as(
        "select kind, title, archived_at from collections \
          where id = $1 and archived_at is not null for update",
    )
    .bind(id)
    .fetch_optional(&mut *tx)
    .await?;
    let Some(row) = row else {
        return Ok(Restored::NotArchived);
    };
    let products = sqlx::query(
        "update products set active = true, archived_at = null \
          where collection = $1 and archived_at = $2",
    )
    .bind(id)
    .bind(row.archived_at)
    .execute(&mut *tx)
    .await?
    .rows_affected();
    sqlx::query(
        "update schedules set archived_at = null where collection = $1 and archived_at = $2",
    )
    .bind(id)
    .bind(row.archived_at)
    .execute(&mut *tx)
    .await?;
    sqlx::query("update collections set archived_at = null, updated_at = now() where id = $1")
        .bind(id)
        .execute(&mut *tx)
        .await?;
    let products = i64::try_from(products).unwrap_or(i64::MAX);
    audit::commit(
        tx,
        staff,
        "restore_collection",
        id,
        "restored",
        json!({ "kind": row.kind, "title": row.title, "products": products,
                "archived_at": row.archived_at }),
    )
    .await?;
    Ok(Restored::Done { products })
}

/// Bring an archived product back on its own; its collection must be in
/// the shop.
pub async fn restore_product(
    pool: &PgPool,
    staff: &StaffMember,
    id: &str,
) -> super::Result<Restored> {
    #[derive(sqlx::FromRow)]
    struct Row {
        kind: ProductKind,
        collection: String,
        collection_title: String,
        collection_archived: bool,
        held: i32,
        sold: i32,
    }
    let mut tx = pool.begin().await?;
    let row: Option<Row> = sqlx::query_as(
        "select p.kind, p.collection, c.title as collection_title, \
                c.archived_at is not null as collection_archived, r.held, r.sold \
           from products p join collections c on c.id = p.collection \
           join resources r on r.id = p.resource_id \
          where p.id = $1 and p.archived_at is not null for no key update of p",
    )
    .bind(id)
    .fetch_optional(&mut *tx)
    .await?;
    let Some(row) = row else {
        return Ok(Restored::NotArchived);
    };
    if row.collection_archived {
        return Ok(Restored::CollectionArchived {
            title: row.collection_title,
        });
    }
    sqlx::query("update products set active = true, archived_at = null where id = $1")
        .bind(id)
        .execute(&mut *tx)
        .await?;
    audit::commit(
        tx,
        staff,
        "restore_product",
        id,
        "restored",
        json!({ "kind": row.kind, "collection": row.collection, "held": row.held,
                "sold": row.sold }),
    )
    .await?;
    Ok(Restored::Done { products: 1 })
}
