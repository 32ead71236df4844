//! What staff change in what is sold, from the admin: events and their
//! tiers, pickup schedules, stock items, and archiving. Each save is one
//! transaction with the row that records it in Activity (who, what, from
//! what to what), so a save is never half written nor done unrecorded.
//! Capacity goes through the engine (`crate::catalogue::edit`): below what
//! is held and sold it is refused, nothing of the save is written, and the
//! refusal is recorded. A price change applies to checkouts started after
//! it: an order keeps the prices it was started with (its lines carry
//! them). Archiving hides and deletes nothing.
//!
//! The reads the catalogue pages show are here too, beside the saves they
//! lead to.

use chrono::{DateTime, Utc};
use serde_json::{Value, json};
use sqlx::{PgConnection, PgPool};

use super::publishing::{self, Thing};
use super::{StaffError, StaffMember};
use crate::audit;
use crate::catalogue::CollectionKind;
use crate::catalogue::edit::{self, COLLECTION_COLUMNS, CollectionEdit, ProductEdit, PutProduct};
use crate::catalogue::schedules::{self, Published, Schedule};
use crate::catalogue::{PAGE_ORDER, ProductKind};
use crate::clock::ShopZone;

/// What a save came to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Saved {
    /// Written and recorded.
    Done { created: bool },
    /// The engine refused the capacity: that much is held and sold.
    /// Nothing of the save was written.
    CapacityRefused {
        requested: i64,
        held: i32,
        sold: i32,
    },
    /// A new one's id belongs to something else already (perhaps
    /// archived): nothing was written.
    Taken { id: String },
    /// No such event, tier, schedule or stock item to change.
    NotFound,
}

/// A failed edit: bad input stays bad input (400), a database failure a
/// database failure; anything else is ours.
pub(super) fn edit_error(error: anyhow::Error) -> StaffError {
    if let Some(bad) = error.downcast_ref::<crate::inventory::InvalidInput>() {
        return StaffError::InvalidInput(bad.0.clone());
    }
    if let Some(crate::inventory::InventoryError::InvalidInput(message)) =
        error.downcast_ref::<crate::inventory::InventoryError>()
    {
        return StaffError::InvalidInput(message.clone());
    }
    match error.downcast::<sqlx::Error>() {
        Ok(error) => StaffError::Database(error),
        Err(error) => StaffError::Internal(format!("{error:#}")),
    }
}

/// What changed between two versions of a thing, field by field:
/// `{"price_minor": {"from": 3500, "to": 4000}}`.
fn changes(before: &Value, after: &Value) -> Value {
    let (Some(before), Some(after)) = (before.as_object(), after.as_object()) else {
        return json!({});
    };
    let mut changed = serde_json::Map::new();
    for (key, to) in after {
        let from = before.get(key).unwrap_or(&Value::Null);
        if from != to {
            changed.insert(key.clone(), json!({ "from": from, "to": to }));
        }
    }
    Value::Object(changed)
}

/// One product's fields as staff edit them, its capacity from its resource.
#[derive(Debug, Clone, sqlx::FromRow)]
pub struct ProductRow {
    pub id: String,
    pub collection: String,
    pub kind: ProductKind,
    pub name: String,
    pub description: String,
    pub price_minor: i64,
    pub currency: String,
    pub starts_at: Option<DateTime<Utc>>,
    pub ends_at: Option<DateTime<Utc>>,
    pub max_per_order: i32,
    pub sale_opens_at: Option<DateTime<Utc>>,
    pub sale_closes_at: Option<DateTime<Utc>>,
    pub hidden: bool,
    pub active: bool,
    pub draft: bool,
    pub position: i32,
    pub total: i32,
    pub held: i32,
    pub sold: i32,
}

impl ProductRow {
    pub fn available(&self) -> i32 {
        self.total - self.held - self.sold
    }

    /// As it would be written again.
    pub fn edit(&self) -> ProductEdit {
        ProductEdit {
            id: self.id.clone(),
            collection: self.collection.clone(),
            kind: self.kind,
            name: self.name.clone(),
            description: self.description.clone(),
            price_minor: self.price_minor,
            currency: self.currency.clone(),
            capacity: i64::from(self.total),
            starts_at: self.starts_at,
            ends_at: self.ends_at,
            max_per_order: self.max_per_order,
            sale_opens_at: self.sale_opens_at,
            sale_closes_at: self.sale_closes_at,
            hidden: self.hidden,
            position: Some(self.position),
        }
    }
}

const PRODUCT_ROW: &str = "p.id, p.collection, p.kind, p.name, p.description, p.price_minor, \
     p.currency, p.starts_at, p.ends_at, p.max_per_order, p.sale_opens_at, p.sale_closes_at, \
     p.hidden, p.archived_at is null as active, p.draft, p.position, r.total, r.held, r.sold";

/// A collection as the catalogue page lists it, with its products on sale.
#[derive(Debug, Clone)]
pub struct CollectionRow {
    pub collection: CollectionEdit,
    pub products: Vec<ProductRow>,
    /// A schedule's rules, when it is one.
    pub schedule: Option<Schedule>,
    pub draft: bool,
}

/// Every collection not archived, in page order, with its products on
/// sale (hidden ones among them) and their counters.
pub async fn collections(pool: &PgPool) -> sqlx::Result<Vec<CollectionRow>> {
    let collections: Vec<CollectionEdit> = sqlx::query_as(&format!(
        "select {COLLECTION_COLUMNS} from collections \
          where archived_at is null order by position, id"
    ))
    .fetch_all(pool)
    .await?;
    let products: Vec<ProductRow> = sqlx::query_as(&format!(
        "select {PRODUCT_ROW} from products p join collections c on c.id = p.collection \
           join resources r on r.id = p.resource_id \
          where p.archived_at is null and c.archived_at is null order by {PAGE_ORDER}"
    ))
    .fetch_all(pool)
    .await?;
    let schedules = schedules::schedules(pool).await?;
    let drafts = publishing::draft_collections(pool).await?;
    Ok(collections
        .into_iter()
        .map(|collection| CollectionRow {
            draft: drafts.contains(&collection.id),
            products: products
                .iter()
                .filter(|p| p.collection == collection.id)
                .cloned()
                .collect(),
            schedule: schedules
                .iter()
                .find(|s| s.collection == collection.id)
                .cloned(),
            collection,
        })
        .collect())
}

/// A collection of a kind, not archived.
pub async fn collection(
    pool: &PgPool,
    id: &str,
    kind: CollectionKind,
) -> sqlx::Result<Option<CollectionEdit>> {
    sqlx::query_as(&format!(
        "select {COLLECTION_COLUMNS} from collections \
          where id = $1 and kind = $2 and archived_at is null"
    ))
    .bind(id)
    .bind(kind)
    .fetch_optional(pool)
    .await
}

/// The products on sale of a collection, in page order.
pub async fn products_of(pool: &PgPool, collection: &str) -> sqlx::Result<Vec<ProductRow>> {
    sqlx::query_as(&format!(
        "select {PRODUCT_ROW} from products p join collections c on c.id = p.collection \
           join resources r on r.id = p.resource_id \
          where p.archived_at is null and p.collection = $1 order by {PAGE_ORDER}"
    ))
    .bind(collection)
    .fetch_all(pool)
    .await
}

/// A product on sale, of a kind.
pub async fn product(
    pool: &PgPool,
    id: &str,
    kind: ProductKind,
) -> sqlx::Result<Option<ProductRow>> {
    sqlx::query_as(&format!(
        "select {PRODUCT_ROW} from products p join resources r on r.id = p.resource_id \
          where p.id = $1 and p.kind = $2 and p.archived_at is null"
    ))
    .bind(id)
    .bind(kind)
    .fetch_optional(pool)
    .await
}

/// A schedule in force.
pub async fn schedule(pool: &PgPool, collection: &str) -> sqlx::Result<Option<Schedule>> {
    Ok(schedules::schedules(pool)
        .await?
        .into_iter()
        .find(|s| s.collection == collection))
}

/// The shelves stock can go on: (id, title).
pub async fn shelves(pool: &PgPool) -> sqlx::Result<Vec<(String, String)>> {
    sqlx::query_as(
        "select id, title from collections where kind = $1 and archived_at is null \
          order by position, id",
    )
    .bind(ProductKind::Stock.collection())
    .fetch_all(pool)
    .await
}

/// The shelf a stock item goes on, as staff name it: a shelf of the shop
/// by its title (any case) or id, or else a new shelf of that title (to be
/// created with the item).
pub async fn shelf_for(pool: &PgPool, typed: &str) -> super::Result<CollectionEdit> {
    let typed = typed.trim();
    let found: Option<CollectionEdit> = sqlx::query_as(&format!(
        "select {COLLECTION_COLUMNS} from collections \
          where kind = $2 and archived_at is null and (lower(title) = lower($1) or id = $1) \
          order by id = $1 desc, position, id limit 1"
    ))
    .bind(typed)
    .bind(CollectionKind::Shelf)
    .fetch_optional(pool)
    .await?;
    if let Some(found) = found {
        return Ok(found);
    }
    let id = edit::slug(typed, 100);
    if id.is_empty() {
        return Err(StaffError::InvalidInput(
            "name the shelf the item goes on, with at least one letter or digit".into(),
        ));
    }
    Ok(CollectionEdit {
        id,
        kind: CollectionKind::Shelf,
        title: typed.to_owned(),
        lede: String::new(),
        starts_at: None,
        ends_at: None,
        doors_at: None,
        venue: String::new(),
        position: 1000,
    })
}

pub use crate::catalogue::{catalogue_currency, shop_currency};

/// A product as it is now (on sale or archived), its row locked for the
/// save: `no key update`, so a hold ending on its resource can still write
/// an order line for it (the line's foreign key takes the row key-share)
/// while the save waits for that resource.
async fn product_for_update(conn: &mut PgConnection, id: &str) -> sqlx::Result<Option<ProductRow>> {
    sqlx::query_as(&format!(
        "select {PRODUCT_ROW} from products p join resources r on r.id = p.resource_id \
          where p.id = $1 for no key update of p"
    ))
    .bind(id)
    .fetch_optional(&mut *conn)
    .await
}

/// A collection as it is now (of any kind, archived or not), locked.
async fn collection_for_update(
    conn: &mut PgConnection,
    id: &str,
) -> sqlx::Result<Option<(CollectionEdit, bool)>> {
    #[derive(sqlx::FromRow)]
    struct Row {
        #[sqlx(flatten)]
        columns: CollectionEdit,
        archived: bool,
    }
    let row: Option<Row> = sqlx::query_as(&format!(
        "select {COLLECTION_COLUMNS}, archived_at is not null as archived \
           from collections where id = $1 for update"
    ))
    .bind(id)
    .fetch_optional(&mut *conn)
    .await?;
    Ok(row.map(|r| (r.columns, r.archived)))
}

/// Whether a collection id may be given to something new (`new` reads as
/// the page that creates one).
fn reserved(id: &str) -> bool {
    id == "new"
}

/// Create (`new`) or change an event: its collection, and the moment of
/// each of its tiers with it.
pub async fn save_event(
    pool: &PgPool,
    staff: &StaffMember,
    event: &CollectionEdit,
    new: bool,
) -> super::Result<Saved> {
    if !event.kind.holds_tiers() {
        return Err(StaffError::InvalidInput("that is not an event".into()));
    }
    event.check().map_err(|e| StaffError::InvalidInput(e.0))?;
    let mut tx = pool.begin().await?;
    let before = collection_for_update(&mut tx, &event.id).await?;
    let before = match (new, before) {
        (true, Some(_)) => {
            return Ok(Saved::Taken {
                id: event.id.clone(),
            });
        }
        (true, None) if reserved(&event.id) => {
            return Ok(Saved::Taken {
                id: event.id.clone(),
            });
        }
        (true, None) => None,
        (false, Some((before, false))) if before.kind == event.kind => Some(before),
        (false, _) => return Ok(Saved::NotFound),
    };
    let mut event = event.clone();
    if let Some(before) = &before {
        event.position = before.position;
    }
    edit::put_event_in(&mut tx, &event)
        .await
        .map_err(edit_error)?;
    if before.is_none() {
        publishing::start_as_draft(&mut tx, Thing::Collection(&event.id)).await?;
    }
    let after = json!(event);
    let (word, detail) = match &before {
        None => ("created", after),
        Some(before) => ("updated", changes(&json!(before), &after)),
    };
    audit::commit(tx, staff, "save_event", &event.id, word, detail).await?;
    Ok(Saved::Done { created: new })
}

/// What a product save is of: which collection kind it must sit in, and
/// the action Activity names.
struct ProductSave<'a> {
    action: &'static str,
    collection_kind: CollectionKind,
    /// A shelf to create with the product, when it is new.
    new_shelf: Option<&'a CollectionEdit>,
    /// Units to add (or, below zero, remove) to what the engine has now,
    /// in place of the edit's capacity, for a product that exists.
    add_units: Option<i64>,
}

/// Create (`new`) or change an event's tier. Its moment is its event's.
pub async fn save_tier(
    pool: &PgPool,
    staff: &StaffMember,
    tier: &ProductEdit,
    new: bool,
) -> super::Result<Saved> {
    let save = ProductSave {
        action: "save_tier",
        collection_kind: CollectionKind::Event,
        new_shelf: None,
        add_units: None,
    };
    save_product(pool, staff, tier, new, save).await
}

/// Create (`new`) or change a stock item. `shelf` is the shelf it goes on:
/// one the shop has, or a new one, created with it. A new item has the
/// edit's capacity; an item that exists gets `add_units` more (fewer,
/// below zero) than the engine has when the save takes its resource's
/// lock, so two saves at once both count and a checkout never sees half
/// of one.
pub async fn save_stock(
    pool: &PgPool,
    staff: &StaffMember,
    item: &ProductEdit,
    shelf: &CollectionEdit,
    new: bool,
    add_units: i64,
) -> super::Result<Saved> {
    let save = ProductSave {
        action: "save_stock",
        collection_kind: CollectionKind::Shelf,
        new_shelf: Some(shelf),
        add_units: (!new).then_some(add_units),
    };
    save_product(pool, staff, item, new, save).await
}

async fn save_product(
    pool: &PgPool,
    staff: &StaffMember,
    product: &ProductEdit,
    new: bool,
    save: ProductSave<'_>,
) -> super::Result<Saved> {
    if !save.collection_kind.may_hold(product.kind) {
        return Err(StaffError::InvalidInput(format!(
            "an {} sells no {}s",
            save.collection_kind.sheet().noun,
            product.kind.sheet().noun
        )));
    }
    product.check().map_err(|e| StaffError::InvalidInput(e.0))?;
    let mut tx = pool.begin().await?;
    // the collection it sits in (a shelf may come with it)
    let collection = collection_for_update(&mut tx, &product.collection).await?;
    let mut product = product.clone();
    match collection {
        Some((c, false)) if c.kind == save.collection_kind => {
            if c.kind.sheet().lends_its_time {
                product.starts_at = c.starts_at;
                product.ends_at = c.ends_at;
            }
        }
        None if save.new_shelf.is_some_and(|s| s.id == product.collection) => {
            let shelf = save.new_shelf.expect("checked just above");
            edit::put_collection_in(&mut tx, shelf)
                .await
                .map_err(edit_error)?;
        }
        // a new shelf's id belongs to another collection (or an archived one)
        Some(_) if save.new_shelf.is_some_and(|s| s.id == product.collection) => {
            return Ok(Saved::Taken {
                id: product.collection,
            });
        }
        _ => return Ok(Saved::NotFound),
    }
    let before = product_for_update(&mut tx, &product.id).await?;
    let before = match (new, before) {
        (true, Some(_)) => return Ok(Saved::Taken { id: product.id }),
        (true, None) => None,
        (false, Some(b)) if b.active && b.kind == product.kind => Some(b),
        (false, _) => return Ok(Saved::NotFound),
    };
    if let (Some(delta), Some(before)) = (save.add_units, &before) {
        // the engine's count now, its resource locked until the save ends
        let total: i32 =
            sqlx::query_scalar("select total from resources where id = $1 for no key update")
                .bind(&before.id)
                .fetch_one(&mut *tx)
                .await?;
        product.capacity = i64::from(total) + delta;
    }
    // fewer than none: refused as the engine refuses less than is held
    // and sold
    let outcome = match &before {
        Some(before) if product.capacity < 0 => PutProduct::CapacityKept {
            requested: product.capacity,
            held: before.held,
            sold: before.sold,
        },
        _ => edit::put_product_in(&mut tx, &product)
            .await
            .map_err(edit_error)?,
    };
    if let PutProduct::CapacityKept {
        requested,
        held,
        sold,
    } = outcome
    {
        // nothing of the save is written; the refusal is recorded
        tx.rollback().await?;
        audit::commit(
            pool.begin().await?,
            staff,
            save.action,
            &product.id,
            "refused_below_committed",
            json!({ "requested": requested, "held": held, "sold": sold }),
        )
        .await?;
        return Ok(Saved::CapacityRefused {
            requested,
            held,
            sold,
        });
    }
    if before.is_none() && save.collection_kind.products_start_as_drafts() {
        publishing::start_as_draft(&mut tx, Thing::Product(&product.id)).await?;
    }
    let mut after = json!(product);
    if let Some(map) = after.as_object_mut() {
        map.remove("position");
    }
    let (word, detail) = match &before {
        None => ("created", after),
        Some(before) => ("updated", changes(&json!(before.edit()), &after)),
    };
    audit::commit(tx, staff, save.action, &product.id, word, detail).await?;
    Ok(Saved::Done { created: new })
}

/// Create (`new`) or change a pickup schedule, and publish its window
/// now (`now`, in `zone`), in the same transaction: slots that come into
/// it are created, slots without orders follow the schedule, and a slot
/// with orders is never changed ([`schedules::publish_schedule`]).
pub async fn save_schedule(
    pool: &PgPool,
    staff: &StaffMember,
    schedule: &Schedule,
    new: bool,
    zone: ShopZone,
    now: DateTime<Utc>,
) -> super::Result<(Saved, Published)> {
    schedule
        .check()
        .map_err(|e| StaffError::InvalidInput(e.0))?;
    let mut tx = pool.begin().await?;
    let collection = collection_for_update(&mut tx, &schedule.collection).await?;
    let before: Option<Schedule> = match (new, collection) {
        (true, Some(_)) => {
            return Ok((
                Saved::Taken {
                    id: schedule.collection.clone(),
                },
                Published::default(),
            ));
        }
        (true, None) if reserved(&schedule.collection) => {
            return Ok((
                Saved::Taken {
                    id: schedule.collection.clone(),
                },
                Published::default(),
            ));
        }
        (true, None) => None,
        (false, Some((c, false))) if c.kind.made_by_schedules() => {
            match self::schedule(pool, &schedule.collection).await? {
                Some(before) => Some(before),
                None => return Ok((Saved::NotFound, Published::default())),
            }
        }
        (false, _) => return Ok((Saved::NotFound, Published::default())),
    };
    schedules::put_schedule_in(&mut tx, schedule)
        .await
        .map_err(edit_error)?;
    if before.is_none() {
        publishing::start_as_draft(&mut tx, Thing::Collection(&schedule.collection)).await?;
    }
    let published = schedules::publish_schedule(&mut tx, schedule, zone, now)
        .await
        .map_err(edit_error)?;
    let after = json!(schedule);
    let (word, mut detail) = match &before {
        None => ("created", after),
        Some(before) => ("updated", changes(&json!(before), &after)),
    };
    detail["published"] = json!(published);
    audit::commit(
        tx,
        staff,
        "save_schedule",
        &schedule.collection,
        word,
        detail,
    )
    .await?;
    Ok((Saved::Done { created: new }, published))
}

/// Take a product (a tier, a slot, a stock item) off the shop. Its
/// orders, codes and history stay. False when it is not on sale.
pub async fn archive_product(pool: &PgPool, staff: &StaffMember, id: &str) -> super::Result<bool> {
    let mut tx = pool.begin().await?;
    let Some(before) = product_for_update(&mut tx, id).await? else {
        return Ok(false);
    };
    if !edit::archive_product_in(&mut tx, id).await? {
        return Ok(false);
    }
    audit::commit(
        tx,
        staff,
        "archive_product",
        id,
        "archived",
        json!({ "kind": before.kind, "collection": before.collection, "held": before.held,
                "sold": before.sold }),
    )
    .await?;
    Ok(true)
}

/// Take a collection (an event, a schedule, a shelf) and everything on
/// sale in it off the shop; a schedule stops publishing. False when there
/// is no such collection in the shop.
pub async fn archive_collection(
    pool: &PgPool,
    staff: &StaffMember,
    id: &str,
) -> super::Result<bool> {
    let mut tx = pool.begin().await?;
    let Some((before, false)) = collection_for_update(&mut tx, id).await? else {
        return Ok(false);
    };
    let products: i64 = sqlx::query_scalar(
        "select count(*) from products where collection = $1 and archived_at is null",
    )
    .bind(id)
    .fetch_one(&mut *tx)
    .await?;
    if !edit::archive_collection_in(&mut tx, id).await? {
        return Ok(false);
    }
    audit::commit(
        tx,
        staff,
        "archive_collection",
        id,
        "archived",
        json!({ "kind": before.kind, "title": before.title, "products": products }),
    )
    .await?;
    Ok(true)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn changes_name_only_what_changed() {
        let before = json!({ "name": "General", "price_minor": 3500, "capacity": 200 });
        let after = json!({ "name": "General", "price_minor": 4000, "capacity": 200 });
        assert_eq!(
            changes(&before, &after),
            json!({ "price_minor": { "from": 3500, "to": 4000 } })
        );
        assert_eq!(changes(&after, &after), json!({}));
    }
}
