//! A room's bookable times: publishing them (one product of kind `table`
//! per time of each service period, its resource the time's pacing
//! counter of the room's pacing in covers), and which of them a party
//! could book now, as the database answers (`hf_bookable_times`: covers
//! left, and whether a free table or joined set seats the party for its
//! turn).

use chrono::{DateTime, Datelike, Duration, NaiveDate, NaiveTime, Timelike, Utc};
use serde::Serialize;
use sqlx::PgPool;

use crate::catalogue::ProductKind;
use crate::clock::ShopZone;

/// A time a party could be offered.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, serde::Deserialize, sqlx::FromRow)]
pub struct BookableTime {
    pub product_id: String,
    pub starts_at: DateTime<Utc>,
    /// Covers of its quarter hour's pacing not held or sold.
    pub covers_left: i32,
    /// A free table (or joined set) seats the party for its turn, and the
    /// covers are there.
    pub seats: bool,
}

#[derive(sqlx::FromRow)]
struct Room {
    name: String,
    currency: String,
    interval_minutes: i32,
    pacing: i32,
    book_until_minutes: i32,
    largest_party: i32,
    closed_days: Vec<NaiveDate>,
    bookings_open_at: Option<DateTime<Utc>>,
}

#[derive(sqlx::FromRow)]
struct Period {
    name: String,
    opens: NaiveTime,
    last_seating: NaiveTime,
    deposit_minor: i64,
}

/// Publish every room's window as of `now`: today and its `days_ahead`
/// days after, in the shop's zone. What the worker does on each pass, so
/// the days that come into a window as time passes are published by
/// themselves; a time already published is never changed, a closed day
/// publishes nothing. The number of times made.
pub async fn publish_window(
    pool: &PgPool,
    zone: ShopZone,
    now: DateTime<Utc>,
) -> sqlx::Result<usize> {
    let rooms: Vec<(String, i32)> = sqlx::query_as(
        "select collection, days_ahead from dining_rooms where archived_at is null \
          order by collection",
    )
    .fetch_all(pool)
    .await?;
    let today = zone.today(now);
    let mut made = 0;
    for (room, days_ahead) in rooms {
        for ahead in 0..=i64::from(days_ahead) {
            made += publish_day(pool, zone, &room, today + Duration::days(ahead)).await?;
        }
    }
    Ok(made)
}

/// Publish the room's times of `day` (in the shop's zone): every time of
/// each service period open that weekday, unless the day is closed. A
/// time already published is left as it is (it may have bookings). The
/// number of times made.
pub async fn publish_day(
    pool: &PgPool,
    zone: ShopZone,
    room_id: &str,
    day: NaiveDate,
) -> sqlx::Result<usize> {
    let room: Room = sqlx::query_as(
        "select name, currency, interval_minutes, pacing, book_until_minutes, largest_party, \
                closed_days, bookings_open_at \
           from dining_rooms where collection = $1 and archived_at is null",
    )
    .bind(room_id)
    .fetch_one(pool)
    .await?;
    if room.closed_days.contains(&day) {
        return Ok(0);
    }
    let periods: Vec<Period> = sqlx::query_as(
        "select name, opens, last_seating, deposit_minor from dining_periods \
          where room = $1 and $2 = any (weekdays) order by opens",
    )
    .bind(room_id)
    .bind(i32::try_from(day.weekday().number_from_monday()).unwrap_or(1))
    .fetch_all(pool)
    .await?;
    let mut tx = pool.begin().await?;
    let mut made = 0;
    for period in &periods {
        let mut time = period.opens;
        loop {
            if let Ok(at) = zone.at(day, time) {
                made += publish_time(&mut tx, zone, room_id, &room, period, at, time).await?;
            }
            let (next, wrapped) =
                time.overflowing_add_signed(Duration::minutes(i64::from(room.interval_minutes)));
            if wrapped != 0 || next > period.last_seating {
                break;
            }
            time = next;
        }
    }
    tx.commit().await?;
    Ok(made)
}

async fn publish_time(
    tx: &mut sqlx::PgConnection,
    zone: ShopZone,
    room_id: &str,
    room: &Room,
    period: &Period,
    at: DateTime<Utc>,
    time: NaiveTime,
) -> sqlx::Result<usize> {
    let local = zone.local(at);
    let id = format!(
        "{room_id}-{}-{}",
        local.format("%Y%m%d"),
        time.format("%H%M")
    );
    let name = ProductKind::Table.unit_name(&room.name, at, zone);
    let position = i32::try_from(time.num_seconds_from_midnight() / 60).unwrap_or(0);
    let made = sqlx::query(
        "with r as (insert into resources (id, total) values ($1, $2) \
                    on conflict (id) do nothing returning id), \
              p as (insert into products (id, resource_id, kind, name, price_minor, currency, \
                                          starts_at, collection, position, max_per_order, \
                                          sale_closes_at, sale_opens_at) \
                    select $1, r.id, $3, $4, $5, $6, $7, $8, $9, $10, \
                           $7 - make_interval(mins => $11), \
                           case when $13 < $7 - make_interval(mins => $11) then $13 end \
                      from r \
                    returning id) \
         insert into dining_times (product_id, room, period, resource_id, starts_at) \
         select p.id, $8, $12, p.id, $7 from p",
    )
    .bind(&id)
    .bind(room.pacing)
    .bind(ProductKind::Table.as_str())
    .bind(&name)
    .bind(period.deposit_minor)
    .bind(&room.currency)
    .bind(at)
    .bind(room_id)
    .bind(position)
    .bind(room.largest_party.min(100))
    .bind(room.book_until_minutes)
    .bind(&period.name)
    .bind(room.bookings_open_at)
    .execute(&mut *tx)
    .await?;
    Ok(usize::try_from(made.rows_affected()).unwrap_or(0))
}

/// The room's times opened as its setting says: each time whose sale
/// closes after `bookings_open_at` opens at that moment, every other one
/// (and all of them, with no setting) as soon as it is published. Run
/// when the room is saved; times already begun are left as they are.
pub async fn open_at(tx: &mut sqlx::PgConnection, room_id: &str) -> sqlx::Result<u64> {
    let changed = sqlx::query(
        "update products p \
            set sale_opens_at = case when r.bookings_open_at < p.sale_closes_at \
                                     then r.bookings_open_at end \
           from dining_times t, dining_rooms r \
          where t.product_id = p.id and r.collection = t.room and t.room = $1 \
            and t.starts_at > now() and p.queue_seed is null \
            and p.sale_opens_at is distinct from \
                (case when r.bookings_open_at < p.sale_closes_at then r.bookings_open_at end)",
    )
    .bind(room_id)
    .execute(&mut *tx)
    .await?
    .rows_affected();
    Ok(changed)
}

/// The room's times from `from` until `to` a party of `party` could book
/// now, earliest first.
pub async fn bookable(
    pool: &PgPool,
    room_id: &str,
    from: DateTime<Utc>,
    to: DateTime<Utc>,
    party: i32,
) -> sqlx::Result<Vec<BookableTime>> {
    sqlx::query_as(
        "select product_id, starts_at, covers_left, seats from hf_bookable_times($1, $2, $3, $4)",
    )
    .bind(room_id)
    .bind(from)
    .bind(to)
    .bind(party)
    .fetch_all(pool)
    .await
}

/// For a party refused at the time of `product_id`: the `n` times of its
/// room that seat it now, nearest to the one asked for first (the same
/// day's, six hours either side).
pub async fn nearest(
    pool: &PgPool,
    product_id: &str,
    party: i32,
    n: usize,
) -> sqlx::Result<Vec<BookableTime>> {
    #[derive(sqlx::FromRow)]
    struct Asked {
        room: String,
        starts_at: DateTime<Utc>,
    }
    let Some(Asked {
        room,
        starts_at: at,
    }) = sqlx::query_as("select room, starts_at from dining_times where product_id = $1")
        .bind(product_id)
        .fetch_optional(pool)
        .await?
    else {
        return Ok(Vec::new());
    };
    let window = Duration::hours(6);
    let times = bookable(pool, &room, at - window, at + window, party).await?;
    Ok(nearest_of(&times, at, n))
}

/// Of a room's bookable times for a party, the `n` others than `at` that
/// seat it, nearest to `at` first.
pub fn nearest_of(times: &[BookableTime], at: DateTime<Utc>, n: usize) -> Vec<BookableTime> {
    let mut times: Vec<BookableTime> = times
        .iter()
        .filter(|t| t.seats && t.starts_at != at)
        .cloned()
        .collect();
    times.sort_by_key(|t| ((t.starts_at - at).num_seconds().abs(), t.starts_at));
    times.truncate(n);
    times
}

/// Withdraw the room's times on its closed days that nobody holds or
/// bought (taken off sale, kept for the record); a time with a booking
/// stays for staff to settle with its guests. The number withdrawn.
pub async fn close_days(pool: &PgPool, zone: ShopZone, room_id: &str) -> sqlx::Result<u64> {
    let withdrawn = sqlx::query(
        "update products p set active = false \
           from dining_times t, dining_rooms r \
          where t.product_id = p.id and r.collection = t.room \
            and t.room = $1 and p.active \
            and (t.starts_at at time zone $2)::date = any (r.closed_days) \
            and not exists (select 1 from bookings b where b.product_id = p.id)",
    )
    .bind(room_id)
    .bind(zone.name())
    .execute(pool)
    .await?
    .rows_affected();
    Ok(withdrawn)
}
