//! Draft and published: a new event, schedule or stock item starts as a
//! draft (migration 0123 keeps a draft's products off sale whoever writes
//! them), which staff preview and then publish. Publishing puts what is
//! not archived on sale; going back to draft is refused once anything of
//! it was ever ordered (its orders and codes must stay in the shop), and
//! said so. Each change is recorded in Activity. `staff::catalogue` makes
//! a new event, schedule or stock item a draft ([`start_as_draft`]); a
//! tier or slot follows its event or schedule.

use sqlx::{PgPool, Postgres, Transaction};

use super::StaffMember;
use crate::audit;

/// What publishing or unpublishing came to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Publishing {
    Done,
    /// It was already so: nothing changed.
    Unchanged,
    /// Back to draft refused: it has orders (this many lines).
    HasOrders(i64),
    /// No such collection or product, not archived.
    NotFound,
}

/// A collection or product: which, and its id.
#[derive(Debug, Clone, Copy)]
pub enum Thing<'a> {
    Collection(&'a str),
    Product(&'a str),
}

impl Thing<'_> {
    fn id(&self) -> &str {
        match self {
            Thing::Collection(id) | Thing::Product(id) => id,
        }
    }
}

/// Whether a collection or product is a draft, locked; `None` when there
/// is none not archived.
async fn draft_for_update(
    tx: &mut Transaction<'_, Postgres>,
    thing: Thing<'_>,
) -> sqlx::Result<Option<bool>> {
    let sql = match thing {
        Thing::Collection(_) => {
            "select draft from collections where id = $1 and archived_at is null for update"
        }
        Thing::Product(_) => {
            "select draft from products where id = $1 and archived_at is null for update"
        }
    };
    sqlx::query_scalar(sql)
        .bind(thing.id())
        .fetch_optional(&mut **tx)
        .await
}

/// Whether a collection or product is a draft (`None`: none such).
pub async fn is_draft(pool: &PgPool, thing: Thing<'_>) -> sqlx::Result<Option<bool>> {
    let mut tx = pool.begin().await?;
    let draft = draft_for_update(&mut tx, thing).await?;
    tx.rollback().await?;
    Ok(draft)
}

/// The admin page where a collection is edited (the catalogue when it
/// has none of its own).
pub async fn editor_of(pool: &PgPool, collection: &str) -> sqlx::Result<String> {
    let kind: Option<crate::catalogue::CollectionKind> =
        sqlx::query_scalar("select kind from collections where id = $1")
            .bind(collection)
            .fetch_optional(pool)
            .await?;
    let segment: String = form_urlencoded::byte_serialize(collection.as_bytes()).collect();
    Ok(kind
        .and_then(|kind| kind.editor(&segment))
        .unwrap_or_else(|| "/admin/catalogue".to_owned()))
}

/// The collections that are drafts, not archived.
pub async fn draft_collections(pool: &PgPool) -> sqlx::Result<Vec<String>> {
    sqlx::query_scalar("select id from collections where draft and archived_at is null")
        .fetch_all(pool)
        .await
}

/// Why nothing changes when `thing` is to become a draft (`draft`) or go
/// on sale: there is none such, or it is so already. Locks its row.
async fn nothing_to_change(
    tx: &mut Transaction<'_, Postgres>,
    thing: Thing<'_>,
    draft: bool,
) -> sqlx::Result<Option<Publishing>> {
    Ok(match draft_for_update(tx, thing).await? {
        None => Some(Publishing::NotFound),
        Some(is) if is == draft => Some(Publishing::Unchanged),
        Some(_) => None,
    })
}

/// Put a draft on sale: a collection with its products not archived (nor
/// drafts of their own), or a product.
pub async fn publish(
    pool: &PgPool,
    staff: &StaffMember,
    thing: Thing<'_>,
) -> super::Result<Publishing> {
    let mut tx = pool.begin().await?;
    if let Some(nothing) = nothing_to_change(&mut tx, thing, false).await? {
        return Ok(nothing);
    }
    match thing {
        Thing::Collection(id) => {
            sqlx::query("update collections set draft = false where id = $1")
                .bind(id)
                .execute(&mut *tx)
                .await?;
            sqlx::query(
                "update products set active = true \
                  where collection = $1 and archived_at is null and not draft",
            )
            .bind(id)
            .execute(&mut *tx)
            .await?;
        }
        Thing::Product(id) => {
            // still off sale while its collection is a draft (the trigger)
            sqlx::query("update products set draft = false, active = true where id = $1")
                .bind(id)
                .execute(&mut *tx)
                .await?;
        }
    }
    let target = thing.id();
    audit::commit(tx, staff, "publish", target, "done", serde_json::json!({})).await?;
    Ok(Publishing::Done)
}

/// Take something back to draft, unless anything of it was ever ordered.
pub async fn unpublish(
    pool: &PgPool,
    staff: &StaffMember,
    thing: Thing<'_>,
) -> super::Result<Publishing> {
    let mut tx = pool.begin().await?;
    if let Some(nothing) = nothing_to_change(&mut tx, thing, true).await? {
        return Ok(nothing);
    }
    let products = match thing {
        Thing::Collection(_) => "select id from products where collection = $1",
        Thing::Product(_) => "select $1::text",
    };
    let ordered: i64 = sqlx::query_scalar(&format!(
        "select count(*) from order_lines where product_id in ({products})"
    ))
    .bind(thing.id())
    .fetch_one(&mut *tx)
    .await?;
    let target = thing.id();
    if ordered > 0 {
        let detail = serde_json::json!({ "order_lines": ordered });
        audit::commit(tx, staff, "unpublish", target, "has_orders", detail).await?;
        return Ok(Publishing::HasOrders(ordered));
    }
    let (mark, products) = match thing {
        Thing::Collection(_) => (
            "update collections set draft = true where id = $1",
            "update products set active = false where collection = $1 and archived_at is null",
        ),
        Thing::Product(_) => (
            "update products set draft = true where id = $1",
            "update products set active = false where id = $1 and archived_at is null",
        ),
    };
    for sql in [mark, products] {
        sqlx::query(sql).bind(target).execute(&mut *tx).await?;
    }
    audit::commit(
        tx,
        staff,
        "unpublish",
        target,
        "done",
        serde_json::json!({}),
    )
    .await?;
    Ok(Publishing::Done)
}

/// A new collection starts as a draft (in its creator's transaction).
pub(super) async fn start_as_draft(
    tx: &mut Transaction<'_, Postgres>,
    thing: Thing<'_>,
) -> sqlx::Result<()> {
    let sql = match thing {
        Thing::Collection(_) => "update collections set draft = true where id = $1",
        Thing::Product(_) => "update products set draft = true, active = false where id = $1",
    };
    sqlx::query(sql).bind(thing.id()).execute(&mut **tx).await?;
    Ok(())
}
