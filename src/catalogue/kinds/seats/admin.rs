//! What the admin's seat plan pages read of a seated event and the calls
//! its changes make (docs/design.md, "Reserved seating", "The seat plan in
//! the admin"): seats blocked, held back and put back through
//! `hf_seat_set_state`, a plan replaced through `hf_seat_plan`, both in
//! the section's lock; a section moved to another category and a
//! category's words, colour and price, each with the price of the
//! sections' products following. Each change takes the caller's
//! transaction, where its audit line is written too.

use sqlx::{PgPool, Postgres, Transaction};

/// A section as its plan page heads it.
#[derive(Debug, Clone, sqlx::FromRow)]
pub struct SectionInfo {
    pub id: String,
    pub event: String,
    pub event_title: String,
    pub name: String,
    pub category: String,
    pub category_name: String,
    pub colour: String,
    pub price_minor: i64,
    pub currency: String,
    /// Its seats on sale, and those held and sold (the engine's counters).
    pub total: i32,
    pub held: i32,
    pub sold: i32,
}

/// A seat as staff see it.
#[derive(Debug, Clone, sqlx::FromRow)]
pub struct SeatInfo {
    pub label: String,
    pub row_label: String,
    pub number: i32,
    pub row_rank: i32,
    pub run: i32,
    pub x: i32,
    pub y: i32,
    pub access: String,
    /// `open`, `blocked` or `held_back`.
    pub state: String,
    pub note: String,
    /// A shopper's: `held` (a checkout under way) or `sold`; `None`: not.
    pub taken: Option<String>,
}

/// A price category of the event.
#[derive(Debug, Clone, sqlx::FromRow)]
pub struct CategoryInfo {
    pub id: String,
    pub name: String,
    pub colour: String,
    pub price_minor: i64,
}

/// A section as its event's page lists it.
#[derive(Debug, Clone, sqlx::FromRow)]
pub struct SectionLine {
    pub id: String,
    pub name: String,
    pub category_name: String,
    pub total: i32,
    pub held: i32,
    pub sold: i32,
    pub blocked: i64,
    pub held_back: i64,
}

/// What a change of seats' state came to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SetOutcome {
    /// Done: seats that changed, and the section's seats on sale now.
    Changed { changed: i32, total: i32 },
    /// Refused, nothing changed: these seats are a shopper's.
    Taken(Vec<String>),
    /// Refused: the section has no such seats.
    Unknown(Vec<String>),
    /// Refused: these seats are not in a state the action changes.
    WrongState(Vec<String>),
}

/// What replacing a plan came to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PlanOutcome {
    Changed {
        added: i32,
        placed: i32,
        removed: i32,
        total: i32,
    },
    /// Refused, nothing changed: the plan drops these seats, a shopper's.
    Taken(Vec<String>),
}

/// The section `section` of the event `event`, if it is one.
pub async fn section(
    pool: &PgPool,
    event: &str,
    section: &str,
) -> sqlx::Result<Option<SectionInfo>> {
    sqlx::query_as(
        "select x.product_id as id, c.id as event, c.title as event_title, x.name, \
                x.category, k.name as category_name, k.colour, p.price_minor, p.currency, \
                r.total, r.held, r.sold \
           from seat_sections x join products p on p.id = x.product_id \
           join resources r on r.id = x.resource_id \
           join collections c on c.id = x.collection \
           join seat_categories k on k.collection = x.collection and k.id = x.category \
          where x.product_id = $1 and x.collection = $2 and p.archived_at is null",
    )
    .bind(section)
    .bind(event)
    .fetch_optional(pool)
    .await
}

/// The section's seats on its plan, from the stage back, with whose they
/// are.
pub async fn seats(pool: &PgPool, section: &str) -> sqlx::Result<Vec<SeatInfo>> {
    sqlx::query_as(
        "select s.label, s.row_label, s.number, s.row_rank, s.run, s.x, s.y, s.access, s.state, \
                s.note, \
                (select case when h.state = 'confirmed' then 'sold' else 'held' end \
                   from seat_pins p join holds h on h.id = p.hold_id \
                  where p.seat_id = s.id and p.live) as taken \
           from seats s where s.section = $1 and s.note <> 'off the plan' \
          order by s.row_rank, s.run, s.pos",
    )
    .bind(section)
    .fetch_all(pool)
    .await
}

/// The event's price categories.
pub async fn categories(pool: &PgPool, event: &str) -> sqlx::Result<Vec<CategoryInfo>> {
    sqlx::query_as(
        "select id, name, colour, price_minor from seat_categories \
          where collection = $1 order by position, id",
    )
    .bind(event)
    .fetch_all(pool)
    .await
}

/// The event's sections on sale, with their counts.
pub async fn sections_of(pool: &PgPool, event: &str) -> sqlx::Result<Vec<SectionLine>> {
    sqlx::query_as(
        "select x.product_id as id, x.name, k.name as category_name, r.total, r.held, r.sold, \
                (select count(*) from seats s where s.section = x.product_id \
                    and s.state = 'blocked' and s.note <> 'off the plan') as blocked, \
                (select count(*) from seats s where s.section = x.product_id \
                    and s.state = 'held_back') as held_back \
           from seat_sections x join products p on p.id = x.product_id \
           join resources r on r.id = x.resource_id \
           join seat_categories k on k.collection = x.collection and k.id = x.category \
          where x.collection = $1 and p.archived_at is null \
          order by x.position, x.product_id",
    )
    .bind(event)
    .fetch_all(pool)
    .await
}

/// Whether "best available" may sell seats apart (`seating_settings`).
pub async fn splits(pool: &PgPool) -> sqlx::Result<bool> {
    sqlx::query_scalar("select splits from seating_settings")
        .fetch_one(pool)
        .await
}

/// Seats to `state` (with `note`), from any of `from`, in the section's
/// lock: all or none (`hf_seat_set_state`).
pub async fn set_state(
    tx: &mut Transaction<'_, Postgres>,
    section: &str,
    labels: &[String],
    state: &str,
    note: &str,
    from: &[&str],
) -> sqlx::Result<SetOutcome> {
    let (status, changed, refused, total): (String, i32, Option<Vec<String>>, Option<i32>) =
        sqlx::query_as("select * from hf_seat_set_state($1, $2, $3, $4, $5)")
            .bind(section)
            .bind(labels)
            .bind(state)
            .bind(note)
            .bind(from)
            .fetch_one(&mut **tx)
            .await?;
    let refused = refused.unwrap_or_default();
    Ok(match status.as_str() {
        "changed" => SetOutcome::Changed {
            changed,
            total: total.unwrap_or(0),
        },
        "refused" => SetOutcome::Taken(refused),
        "wrong_state" => SetOutcome::WrongState(refused),
        _ => SetOutcome::Unknown(refused),
    })
}

/// The section's plan replaced by `rows` (as [`super::fielded_rows`] makes
/// them), in its lock (`hf_seat_plan`).
pub async fn replace_plan(
    tx: &mut Transaction<'_, Postgres>,
    section: &str,
    rows: &serde_json::Value,
) -> sqlx::Result<PlanOutcome> {
    let (status, added, placed, removed, refused, total): (
        String,
        i32,
        i32,
        i32,
        Option<Vec<String>>,
        Option<i32>,
    ) = sqlx::query_as("select * from hf_seat_plan($1, $2)")
        .bind(section)
        .bind(rows)
        .fetch_one(&mut **tx)
        .await?;
    Ok(match status.as_str() {
        "changed" => PlanOutcome::Changed {
            added,
            placed,
            removed,
            total: total.unwrap_or(0),
        },
        _ => PlanOutcome::Taken(refused.unwrap_or_default()),
    })
}

/// The section moved to the event's category `category`, its product
/// sold at the category's price from now on: the category it had and the
/// price it had, or `None` when the event has no such category.
pub async fn set_category(
    tx: &mut Transaction<'_, Postgres>,
    section: &str,
    category: &str,
) -> sqlx::Result<Option<(String, i64)>> {
    let before: Option<(String, i64)> = sqlx::query_as(
        "select x.category, p.price_minor from seat_sections x \
           join products p on p.id = x.product_id \
           join seat_categories k on k.collection = x.collection and k.id = $2 \
          where x.product_id = $1 for update of x, p",
    )
    .bind(section)
    .bind(category)
    .fetch_optional(&mut **tx)
    .await?;
    if before.is_some() {
        sqlx::query(
            "with moved as (update seat_sections set category = $2 where product_id = $1 \
                             returning product_id, collection) \
             update products p set price_minor = k.price_minor \
               from moved m join seat_categories k on k.collection = m.collection and k.id = $2 \
              where p.id = m.product_id",
        )
        .bind(section)
        .bind(category)
        .execute(&mut **tx)
        .await?;
    }
    Ok(before)
}

/// A category's name, colour and price, its sections' products sold at
/// the price from now on: the category as it was, or `None` when the
/// event has no such category.
pub async fn save_category(
    tx: &mut Transaction<'_, Postgres>,
    event: &str,
    category: &CategoryInfo,
) -> sqlx::Result<Option<CategoryInfo>> {
    let before: Option<CategoryInfo> = sqlx::query_as(
        "select id, name, colour, price_minor from seat_categories \
          where collection = $1 and id = $2 for update",
    )
    .bind(event)
    .bind(&category.id)
    .fetch_optional(&mut **tx)
    .await?;
    if before.is_some() {
        sqlx::query(
            "update seat_categories set name = $3, colour = $4, price_minor = $5 \
              where collection = $1 and id = $2",
        )
        .bind(event)
        .bind(&category.id)
        .bind(&category.name)
        .bind(&category.colour)
        .bind(category.price_minor)
        .execute(&mut **tx)
        .await?;
        sqlx::query(
            "update products p set price_minor = $3 from seat_sections x \
              where x.product_id = p.id and x.collection = $1 and x.category = $2 \
                and p.price_minor <> $3",
        )
        .bind(event)
        .bind(&category.id)
        .bind(category.price_minor)
        .execute(&mut **tx)
        .await?;
    }
    Ok(before)
}

/// Whether "best available" may sell seats apart, set; what it was.
pub async fn set_splits(tx: &mut Transaction<'_, Postgres>, splits: bool) -> sqlx::Result<bool> {
    let before: bool = sqlx::query_scalar("select splits from seating_settings for update")
        .fetch_one(&mut **tx)
        .await?;
    sqlx::query("update seating_settings set splits = $1, updated_at = now()")
        .bind(splits)
        .execute(&mut **tx)
        .await?;
    Ok(before)
}

/// A new price category of the event, last in its order; `false` when
/// the event has a category of that id already.
pub async fn add_category(
    tx: &mut Transaction<'_, Postgres>,
    event: &str,
    category: &CategoryInfo,
) -> sqlx::Result<bool> {
    let added = sqlx::query(
        "insert into seat_categories (collection, id, name, colour, price_minor, position) \
         select $1, $2, $3, $4, $5, coalesce(max(position) + 1, 0) \
           from seat_categories where collection = $1 \
         on conflict (collection, id) do nothing",
    )
    .bind(event)
    .bind(&category.id)
    .bind(&category.name)
    .bind(&category.colour)
    .bind(category.price_minor)
    .execute(&mut **tx)
    .await?;
    Ok(added.rows_affected() == 1)
}

/// A new section of the event, last in its order: its product (of the
/// kind seat, written in `tx` already) sold at `category`, and its plan
/// made from `rows` (as [`super::fielded_rows`] makes them).
pub async fn add_section(
    tx: &mut Transaction<'_, Postgres>,
    event: &str,
    section: &str,
    category: &str,
    name: &str,
    rows: &serde_json::Value,
) -> sqlx::Result<PlanOutcome> {
    sqlx::query(
        "insert into seat_sections (product_id, resource_id, collection, category, name, \
                                    position) \
         select p.id, p.resource_id, $2, $3, $4, \
                (select coalesce(max(position) + 1, 0) from seat_sections where collection = $2) \
           from products p where p.id = $1",
    )
    .bind(section)
    .bind(event)
    .bind(category)
    .bind(name)
    .execute(&mut **tx)
    .await?;
    replace_plan(tx, section, rows).await
}
