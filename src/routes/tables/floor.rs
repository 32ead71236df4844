//! The host stand's floor (issue 46): the room's tables by area, each with
//! who sits there now and who comes next, drawn from the same pins the
//! engine claims (a booking's or a walk-in's); the walk-ins of the day;
//! and a booking found by its code, its guest's name or phone.

use chrono::{DateTime, Utc};
use sqlx::PgPool;
use uuid::Uuid;

/// A stay on a table, as the floor shows it.
#[derive(sqlx::FromRow, Clone)]
pub struct Stay {
    pub table_id: String,
    pub from: DateTime<Utc>,
    pub to: DateTime<Utc>,
    pub party: i32,
    pub name: String,
    /// booked, seated, no-show, walk-in
    pub state: String,
}

/// A table of the room and what stands on it around a moment.
pub struct Table {
    pub id: String,
    pub seats: String,
    pub now: Option<Stay>,
    pub next: Option<Stay>,
    /// Every stay of the day on it, in order (no-shows too).
    pub day: Vec<Stay>,
}

impl Table {
    /// The tile's one word: free, seated, expected (a booking whose time
    /// has come and whose party has not), or booked later.
    pub fn state(&self) -> &'static str {
        match &self.now {
            Some(stay) if stay.state == "seated" || stay.state == "walk-in" => "seated",
            Some(_) => "expected",
            None => "free",
        }
    }
}

/// An area of the room and its tables, in the set-up's order.
pub struct Area {
    pub name: String,
    pub tables: Vec<Table>,
}

/// The room's tables by area around `moment`, from the stays of `from` to
/// `to` (the day): `now` the stay that covers the moment, `next` the first
/// after it.
pub async fn floor(
    pool: &PgPool,
    room: &str,
    moment: DateTime<Utc>,
    from: DateTime<Utc>,
    to: DateTime<Utc>,
) -> sqlx::Result<Vec<Area>> {
    let tables: Vec<(String, String, i32, i32)> = sqlx::query_as(
        "select id, area, min_party, max_party from dining_tables \
          where room = $1 and archived_at is null order by area, position, id",
    )
    .bind(room)
    .fetch_all(pool)
    .await?;
    let stays: Vec<Stay> = sqlx::query_as(
        "select p.table_id, lower(p.during) as from, upper(p.during) as to, \
                coalesce(b.party, w.party) as party, \
                coalesce(o.customer_name, nullif(w.name, ''), 'Walk-in') as name, \
                case when w.id is not null then 'walk-in' \
                     when b.no_show_at is not null then 'no-show' \
                     when exists (select 1 from order_items i \
                                   where i.booking = b.hold_id and i.state = 'used') \
                          then 'seated' \
                     else 'booked' end as state \
           from table_pins p \
           left join bookings b on b.hold_id = p.hold_id \
           left join orders o on o.id = b.order_id \
           left join walk_ins w on w.id = p.walk_in \
          where p.room = $1 and p.live and p.during && tstzrange($2, $3, '[)') \
            and (w.id is not null or o.state = 'paid') \
          order by lower(p.during)",
    )
    .bind(room)
    .bind(from)
    .bind(to)
    .fetch_all(pool)
    .await?;
    let mut areas: Vec<Area> = Vec::new();
    for (id, area, min, max) in tables {
        let on = |stay: &&Stay| stay.table_id == id && stay.state != "no-show";
        let now = stays
            .iter()
            .filter(on)
            .find(|s| s.from <= moment && moment < s.to)
            .cloned();
        let next = stays.iter().filter(on).find(|s| s.from > moment).cloned();
        let seats = if min == max || min == 1 {
            format!("{max} seats")
        } else {
            format!("{min}–{max} seats")
        };
        let day = stays.iter().filter(|s| s.table_id == id).cloned().collect();
        let table = Table {
            id,
            seats,
            now,
            next,
            day,
        };
        match areas.last_mut() {
            Some(last) if last.name == area => last.tables.push(table),
            _ => areas.push(Area {
                name: area,
                tables: vec![table],
            }),
        }
    }
    Ok(areas)
}

/// A walk-in party of the day.
#[derive(sqlx::FromRow)]
pub struct WalkIn {
    pub id: Uuid,
    pub party: i32,
    pub name: String,
    pub tables: Vec<String>,
    pub seated_at: DateTime<Utc>,
    pub until: DateTime<Utc>,
    pub left_at: Option<DateTime<Utc>>,
}

/// The walk-ins seated in the room from `from` to `to`, in order.
pub async fn walk_ins(
    pool: &PgPool,
    room: &str,
    from: DateTime<Utc>,
    to: DateTime<Utc>,
) -> sqlx::Result<Vec<WalkIn>> {
    sqlx::query_as(
        "select id, party, name, tables, seated_at, until, left_at from walk_ins \
          where room = $1 and seated_at >= $2 and seated_at < $3 order by seated_at, id",
    )
    .bind(room)
    .bind(from)
    .bind(to)
    .fetch_all(pool)
    .await
}

/// A table or joined set free for a walk-in now.
#[derive(sqlx::FromRow)]
pub struct FreeSet {
    pub set_id: String,
    pub max_party: i32,
    pub taken_at: Option<DateTime<Utc>>,
}

/// Every table and joined set free now for a party of up to its size,
/// smallest first (the walk-in form's choices).
pub async fn free_now(pool: &PgPool, room: &str, now: DateTime<Utc>) -> sqlx::Result<Vec<FreeSet>> {
    sqlx::query_as(
        "select distinct on (s.max_party, s.set_id) s.set_id, s.max_party, s.taken_at \
           from (select coalesce(max(max_party), 0) as largest from ( \
                   select max_party from dining_tables where room = $1 and archived_at is null \
                   union all \
                   select max_party from dining_joins where room = $1 and archived_at is null) m) l, \
                generate_series(1, l.largest) party, \
                hf_walk_in_sets($1, party, $2) s \
          order by s.max_party, s.set_id",
    )
    .bind(room)
    .bind(now)
    .fetch_all(pool)
    .await
}

/// What a search finds: the words a host types, matched against the
/// booking's code, the guest's name and phone (digits alone).
pub fn search_terms(typed: &str) -> Option<(String, String)> {
    let typed = typed.trim();
    if typed.is_empty() || typed.chars().count() > 100 {
        return None;
    }
    let digits: String = typed.chars().filter(char::is_ascii_digit).collect();
    Some((typed.to_owned(), digits))
}
