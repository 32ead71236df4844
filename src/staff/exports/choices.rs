//! What the exports form offers to choose from: every collection with its
//! products, archived ones too (their orders are still exported).

use chrono::{DateTime, Utc};
use sqlx::{FromRow, PgPool};

/// A product the exports form offers.
#[derive(Debug, Clone, FromRow)]
pub struct ProductChoice {
    pub id: String,
    pub name: String,
    pub collection: String,
    pub starts_at: Option<DateTime<Utc>>,
    pub active: bool,
    /// Whether its units carry codes (a door's list has something to list).
    pub has_codes: bool,
}

/// An event or a part of the shop the exports form offers, with its
/// products.
#[derive(Debug, Clone)]
pub struct CollectionChoice {
    pub id: String,
    pub title: String,
    pub archived: bool,
    pub products: Vec<ProductChoice>,
}

impl CollectionChoice {
    /// Whether a door's list of it has something to list.
    pub fn has_codes(&self) -> bool {
        self.products.iter().any(|p| p.has_codes)
    }
}

/// Every collection with its products, archived ones too (their orders
/// are still exported), in the shop's order.
pub async fn choices(pool: &PgPool) -> sqlx::Result<Vec<CollectionChoice>> {
    #[derive(FromRow)]
    struct Row {
        #[sqlx(flatten)]
        product: ProductChoice,
        collection_title: String,
        collection_archived: bool,
    }
    let rows: Vec<Row> = sqlx::query_as(
        "select p.id, p.name, p.collection, p.starts_at, p.active and p.archived_at is null as active, \
                k.code is not null as has_codes, coalesce(c.title, p.collection) as collection_title, \
                c.archived_at is not null as collection_archived \
           from products p \
           join product_kinds k on k.kind = p.kind \
           left join collections c on c.id = p.collection \
          order by coalesce(c.position, 0), p.collection, p.position, p.starts_at, p.id",
    )
    .fetch_all(pool)
    .await?;
    let mut collections: Vec<CollectionChoice> = Vec::new();
    for row in rows {
        match collections.last_mut() {
            Some(last) if last.id == row.product.collection => last.products.push(row.product),
            _ => collections.push(CollectionChoice {
                id: row.product.collection.clone(),
                title: row.collection_title,
                archived: row.collection_archived,
                products: vec![row.product],
            }),
        }
    }
    Ok(collections)
}
