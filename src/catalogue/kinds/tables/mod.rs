//! Tables: a party's table in a dining room, everything that is the table
//! kind's alone (docs/design.md, "Tables: a party at a time"). The kind's
//! sheet ([`sheet`]); the room: what staff
//! set up (its tables, the sets that may be joined, service periods with
//! their cancellation policy, turn times by party size, pacing), kept in
//! the room's own tables (migration 0160), and its bookable times
//! ([`times`]): one product of kind `table` per time, whose resource is
//! the quarter hour's pacing counter. Which table a party gets is the
//! database's choice, in the checkout's one transaction.

pub mod fit;
pub(super) mod sheet;
pub mod times;

use chrono::NaiveTime;
use serde::{Deserialize, Serialize};
use sqlx::PgPool;

use super::CollectionKind;

/// A room as staff (or the catalogue file) describe it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RoomSpec {
    /// Its collection's id (`harbour-bistro`).
    pub id: String,
    /// What a time sells: "Dinner at the Harbour Bistro".
    pub name: String,
    #[serde(default)]
    pub description: String,
    pub currency: String,
    /// Minutes between bookable times (15, 30, 45 or 60).
    #[serde(default = "fifteen")]
    pub interval_minutes: i32,
    /// Covers that may start in any quarter hour.
    pub pacing: i32,
    /// Times are published for today and this many days ahead.
    #[serde(default = "thirty")]
    pub days_ahead: i32,
    /// A time's sale closes this many minutes before it.
    #[serde(default = "sixty")]
    pub book_until_minutes: i32,
    #[serde(default = "ten")]
    pub largest_party: i32,
    /// Holding tables for fuller parties: a booking must use at least this
    /// percentage of the seat-time it takes (its party and turn against
    /// the table's seats and the turn with the time its stay leaves no
    /// turn can use); 0, the default, seats any party a free table fits.
    #[serde(default)]
    pub least_fill: i32,
    pub tables: Vec<TableSpec>,
    #[serde(default)]
    pub joins: Vec<JoinSpec>,
    pub periods: Vec<PeriodSpec>,
    pub turns: Vec<TurnSpec>,
    /// Days the room does not open (a holiday), in the shop's zone: no
    /// times are published for them, and unbooked ones already published
    /// are withdrawn ([`times::close_days`]).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub closed_days: Vec<chrono::NaiveDate>,
    /// A table drop: the moment every time of the room that starts after
    /// it opens for booking (until then the crowd reads "not on sale
    /// yet"); the times published later open then too. None: times open
    /// as they are published.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bookings_open_at: Option<chrono::DateTime<chrono::Utc>>,
}

/// A table: its name, the parties it seats, where it is, its priority.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TableSpec {
    pub id: String,
    #[serde(default = "one")]
    pub min_party: i32,
    pub max_party: i32,
    #[serde(default)]
    pub area: String,
    #[serde(default = "hundred")]
    pub priority: i32,
}

/// Tables that may be joined, as one set.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct JoinSpec {
    pub id: String,
    pub tables: Vec<String>,
    pub min_party: i32,
    pub max_party: i32,
    #[serde(default = "hundred")]
    pub priority: i32,
}

/// A service period: on which weekdays (1 Monday … 7 Sunday), the first
/// and last bookable time, and its policy.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PeriodSpec {
    pub name: String,
    pub weekdays: Vec<i32>,
    pub opens: NaiveTime,
    pub last_seating: NaiveTime,
    /// A deposit per cover paid at booking (0: none) …
    #[serde(default)]
    pub deposit_minor: i64,
    /// … for parties of at least this many.
    #[serde(default = "one")]
    pub deposit_from_party: i32,
    /// A guest may cancel for a full refund until so many hours before.
    #[serde(default = "twenty_four")]
    pub cancel_hours: i32,
}

/// The turn of parties up to a size.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TurnSpec {
    pub up_to_party: i32,
    pub minutes: i32,
}

fn one() -> i32 {
    1
}
fn ten() -> i32 {
    10
}
fn fifteen() -> i32 {
    15
}
fn twenty_four() -> i32 {
    24
}
fn thirty() -> i32 {
    30
}
fn sixty() -> i32 {
    60
}
fn hundred() -> i32 {
    100
}

/// Make a room, or set up an existing one again: its collection, its
/// settings, and its tables, joins, periods and turns as given (tables
/// and joins no longer given are archived: bookings may name them;
/// periods no longer given go unless times of them were published). One
/// transaction; what the database refuses changes nothing.
pub async fn save_room(pool: &PgPool, room: &RoomSpec) -> sqlx::Result<()> {
    put_room(pool, room, false).await.map(|_| ())
}

/// A new room: `false`, and nothing written, when its id belongs to any
/// collection the shop has or had (checked in the save's transaction).
pub async fn create_room(pool: &PgPool, room: &RoomSpec) -> sqlx::Result<bool> {
    put_room(pool, room, true).await
}

async fn put_room(pool: &PgPool, room: &RoomSpec, new: bool) -> sqlx::Result<bool> {
    let mut tx = pool.begin().await?;
    if new {
        let made = sqlx::query(
            "insert into collections (id, kind, title) values ($1, $2, $3) \
             on conflict (id) do nothing",
        )
        .bind(&room.id)
        .bind(CollectionKind::DiningRoom.as_str())
        .bind(&room.name)
        .execute(&mut *tx)
        .await?;
        if made.rows_affected() == 0 {
            return Ok(false);
        }
    }
    sqlx::query(
        "insert into collections (id, kind, title) values ($1, $2, $3) \
         on conflict (id) do update set title = excluded.title, updated_at = now()",
    )
    .bind(&room.id)
    .bind(CollectionKind::DiningRoom.as_str())
    .bind(&room.name)
    .execute(&mut *tx)
    .await?;
    sqlx::query(
        "insert into dining_rooms (collection, name, description, currency, interval_minutes, \
                                   pacing, days_ahead, book_until_minutes, largest_party, \
                                   closed_days, least_fill, bookings_open_at) \
         values ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12) \
         on conflict (collection) do update set name = excluded.name, \
             description = excluded.description, currency = excluded.currency, \
             interval_minutes = excluded.interval_minutes, pacing = excluded.pacing, \
             days_ahead = excluded.days_ahead, book_until_minutes = excluded.book_until_minutes, \
             largest_party = excluded.largest_party, closed_days = excluded.closed_days, \
             least_fill = excluded.least_fill, \
             bookings_open_at = excluded.bookings_open_at, updated_at = now()",
    )
    .bind(&room.id)
    .bind(&room.name)
    .bind(&room.description)
    .bind(&room.currency)
    .bind(room.interval_minutes)
    .bind(room.pacing)
    .bind(room.days_ahead)
    .bind(room.book_until_minutes)
    .bind(room.largest_party)
    .bind(&room.closed_days)
    .bind(room.least_fill)
    .bind(room.bookings_open_at)
    .execute(&mut *tx)
    .await?;
    save_tables(&mut tx, room).await?;
    save_periods(&mut tx, room).await?;
    times::open_at(&mut tx, &room.id).await?;
    tx.commit().await?;
    Ok(true)
}

async fn save_tables(tx: &mut sqlx::PgConnection, room: &RoomSpec) -> sqlx::Result<()> {
    let ids: Vec<&str> = room.tables.iter().map(|t| t.id.as_str()).collect();
    archive_unlisted(tx, "dining_tables", &room.id, &ids).await?;
    for (position, t) in room.tables.iter().enumerate() {
        sqlx::query(
            "insert into dining_tables (room, id, min_party, max_party, area, priority, position) \
             values ($1, $2, $3, $4, $5, $6, $7) \
             on conflict (room, id) do update set min_party = excluded.min_party, \
                 max_party = excluded.max_party, area = excluded.area, \
                 priority = excluded.priority, position = excluded.position, archived_at = null",
        )
        .bind(&room.id)
        .bind(&t.id)
        .bind(t.min_party)
        .bind(t.max_party)
        .bind(&t.area)
        .bind(t.priority)
        .bind(i32::try_from(position).unwrap_or(i32::MAX))
        .execute(&mut *tx)
        .await?;
    }
    let joins: Vec<&str> = room.joins.iter().map(|j| j.id.as_str()).collect();
    archive_unlisted(tx, "dining_joins", &room.id, &joins).await?;
    for j in &room.joins {
        sqlx::query(
            "insert into dining_joins (room, id, tables, min_party, max_party, priority) \
             values ($1, $2, $3, $4, $5, $6) \
             on conflict (room, id) do update set tables = excluded.tables, \
                 min_party = excluded.min_party, max_party = excluded.max_party, \
                 priority = excluded.priority, archived_at = null",
        )
        .bind(&room.id)
        .bind(&j.id)
        .bind(&j.tables)
        .bind(j.min_party)
        .bind(j.max_party)
        .bind(j.priority)
        .execute(&mut *tx)
        .await?;
    }
    Ok(())
}

/// The room's services that `room` no longer lists but that have times
/// published: they stay (a time names its service), so a set-up leaving
/// them out is refused, naming them.
pub async fn periods_in_use(pool: &PgPool, room: &RoomSpec) -> sqlx::Result<Vec<String>> {
    let names: Vec<&str> = room.periods.iter().map(|p| p.name.as_str()).collect();
    sqlx::query_scalar(
        "select d.name from dining_periods d where d.room = $1 and not (d.name = any ($2)) \
            and exists (select 1 from dining_times t where t.room = d.room and t.period = d.name) \
          order by d.name",
    )
    .bind(&room.id)
    .bind(&names)
    .fetch_all(pool)
    .await
}

/// A room's tables (or joins) the saved room no longer lists are archived,
/// not deleted: past bookings still name them.
async fn archive_unlisted(
    tx: &mut sqlx::PgConnection,
    table: &'static str,
    room: &str,
    listed: &[&str],
) -> sqlx::Result<()> {
    sqlx::query(&format!(
        "update {table} set archived_at = now() \
          where room = $1 and archived_at is null and not (id = any ($2))"
    ))
    .bind(room)
    .bind(listed)
    .execute(&mut *tx)
    .await?;
    Ok(())
}

async fn save_periods(tx: &mut sqlx::PgConnection, room: &RoomSpec) -> sqlx::Result<()> {
    // a service no longer listed goes, unless times of it were published
    // (they name it; [`periods_in_use`] says which before a save)
    let names: Vec<&str> = room.periods.iter().map(|p| p.name.as_str()).collect();
    sqlx::query(
        "delete from dining_periods d where d.room = $1 and not (d.name = any ($2)) \
            and not exists (select 1 from dining_times t \
                             where t.room = d.room and t.period = d.name)",
    )
    .bind(&room.id)
    .bind(&names)
    .execute(&mut *tx)
    .await?;
    for p in &room.periods {
        sqlx::query(
            "insert into dining_periods (room, name, weekdays, opens, last_seating, deposit_minor, \
                                         deposit_from_party, cancel_hours) \
             values ($1, $2, $3, $4, $5, $6, $7, $8) \
             on conflict (room, name) do update set weekdays = excluded.weekdays, \
                 opens = excluded.opens, last_seating = excluded.last_seating, \
                 deposit_minor = excluded.deposit_minor, \
                 deposit_from_party = excluded.deposit_from_party, \
                 cancel_hours = excluded.cancel_hours",
        )
        .bind(&room.id)
        .bind(&p.name)
        .bind(&p.weekdays)
        .bind(p.opens)
        .bind(p.last_seating)
        .bind(p.deposit_minor)
        .bind(p.deposit_from_party)
        .bind(p.cancel_hours)
        .execute(&mut *tx)
        .await?;
    }
    sqlx::query("delete from dining_turns where room = $1")
        .bind(&room.id)
        .execute(&mut *tx)
        .await?;
    for t in &room.turns {
        sqlx::query("insert into dining_turns (room, up_to_party, minutes) values ($1, $2, $3)")
            .bind(&room.id)
            .bind(t.up_to_party)
            .bind(t.minutes)
            .execute(&mut *tx)
            .await?;
    }
    Ok(())
}

impl RoomSpec {
    /// What a room must be before anything of it is written (the
    /// database's constraints are the last word): a known shape of id,
    /// tables that seat someone, joins of its own tables, periods and
    /// turns.
    pub fn check(&self) -> Result<(), String> {
        let id_ok = !self.id.is_empty()
            && self.id.len() <= 100
            && self
                .id
                .bytes()
                .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
            && !self.id.starts_with('-');
        if !id_ok {
            return Err(format!(
                "room id {:?}: lower-case letters, digits and dashes",
                self.id
            ));
        }
        if ![15, 30, 45, 60].contains(&self.interval_minutes) {
            return Err("the interval between times is 15, 30, 45 or 60 minutes".into());
        }
        if !(0..=100).contains(&self.least_fill) {
            return Err("the share of a table a party must fill is 0 to 100 (per cent)".into());
        }
        if self.tables.is_empty() || self.periods.is_empty() || self.turns.is_empty() {
            return Err("a room needs tables, service periods and turn times".into());
        }
        for t in &self.tables {
            if t.min_party < 1 || t.min_party > t.max_party || t.max_party > 100 {
                return Err(format!(
                    "table {}: seats {} to {}, which is no party",
                    t.id, t.min_party, t.max_party
                ));
            }
        }
        for j in &self.joins {
            if let Some(unknown) = j
                .tables
                .iter()
                .find(|t| !self.tables.iter().any(|x| &x.id == *t))
            {
                return Err(format!("join {}: no table {unknown}", j.id));
            }
        }
        for p in &self.periods {
            if p.opens > p.last_seating || p.weekdays.iter().any(|d| !(1..=7).contains(d)) {
                return Err(format!(
                    "service period {}: weekdays 1 to 7, opening before its last seating",
                    p.name
                ));
            }
        }
        Ok(())
    }
}

/// A room as it is set up now, in the form [`save_room`] takes (its
/// archived tables and joins left out); `None` when there is none.
pub async fn read_room(pool: &PgPool, id: &str) -> sqlx::Result<Option<RoomSpec>> {
    #[derive(sqlx::FromRow)]
    struct Room {
        name: String,
        description: String,
        currency: String,
        interval_minutes: i32,
        pacing: i32,
        days_ahead: i32,
        book_until_minutes: i32,
        largest_party: i32,
        closed_days: Vec<chrono::NaiveDate>,
        least_fill: i32,
        bookings_open_at: Option<chrono::DateTime<chrono::Utc>>,
    }
    #[derive(sqlx::FromRow)]
    struct Table {
        id: String,
        min_party: i32,
        max_party: i32,
        area: String,
        priority: i32,
    }
    #[derive(sqlx::FromRow)]
    struct Join {
        id: String,
        tables: Vec<String>,
        min_party: i32,
        max_party: i32,
        priority: i32,
    }
    #[derive(sqlx::FromRow)]
    struct Period {
        name: String,
        weekdays: Vec<i32>,
        opens: NaiveTime,
        last_seating: NaiveTime,
        deposit_minor: i64,
        deposit_from_party: i32,
        cancel_hours: i32,
    }
    #[derive(sqlx::FromRow)]
    struct Turn {
        up_to_party: i32,
        minutes: i32,
    }
    let Some(room): Option<Room> = sqlx::query_as(
        "select name, description, currency, interval_minutes, pacing, days_ahead, \
                book_until_minutes, largest_party, closed_days, least_fill, bookings_open_at \
           from dining_rooms where collection = $1 and archived_at is null",
    )
    .bind(id)
    .fetch_optional(pool)
    .await?
    else {
        return Ok(None);
    };
    let tables: Vec<Table> = sqlx::query_as(
        "select id, min_party, max_party, area, priority from dining_tables \
          where room = $1 and archived_at is null order by position, id",
    )
    .bind(id)
    .fetch_all(pool)
    .await?;
    let joins: Vec<Join> = sqlx::query_as(
        "select id, tables, min_party, max_party, priority from dining_joins \
          where room = $1 and archived_at is null order by id",
    )
    .bind(id)
    .fetch_all(pool)
    .await?;
    let periods: Vec<Period> = sqlx::query_as(
        "select name, weekdays, opens, last_seating, deposit_minor, deposit_from_party, \
                cancel_hours \
           from dining_periods where room = $1 order by opens, name",
    )
    .bind(id)
    .fetch_all(pool)
    .await?;
    let turns: Vec<Turn> = sqlx::query_as(
        "select up_to_party, minutes from dining_turns where room = $1 order by up_to_party",
    )
    .bind(id)
    .fetch_all(pool)
    .await?;
    Ok(Some(RoomSpec {
        id: id.to_owned(),
        name: room.name,
        description: room.description,
        currency: room.currency,
        interval_minutes: room.interval_minutes,
        pacing: room.pacing,
        days_ahead: room.days_ahead,
        book_until_minutes: room.book_until_minutes,
        largest_party: room.largest_party,
        least_fill: room.least_fill,
        closed_days: room.closed_days,
        bookings_open_at: room.bookings_open_at,
        tables: tables
            .into_iter()
            .map(|t| TableSpec {
                id: t.id,
                min_party: t.min_party,
                max_party: t.max_party,
                area: t.area,
                priority: t.priority,
            })
            .collect(),
        joins: joins
            .into_iter()
            .map(|j| JoinSpec {
                id: j.id,
                tables: j.tables,
                min_party: j.min_party,
                max_party: j.max_party,
                priority: j.priority,
            })
            .collect(),
        periods: periods
            .into_iter()
            .map(|p| PeriodSpec {
                name: p.name,
                weekdays: p.weekdays,
                opens: p.opens,
                last_seating: p.last_seating,
                deposit_minor: p.deposit_minor,
                deposit_from_party: p.deposit_from_party,
                cancel_hours: p.cancel_hours,
            })
            .collect(),
        turns: turns
            .into_iter()
            .map(|t| TurnSpec {
                up_to_party: t.up_to_party,
                minutes: t.minutes,
            })
            .collect(),
    }))
}
