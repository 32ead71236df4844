//! A dining room's booking page (`/dining/{room}`): the guest chooses a
//! day and a party size, and sees the times that can still seat the
//! party with the covers each has left, as the database answers
//! (`catalogue::tables::times::bookable`); a time is booked by adding the
//! party to the basket (its product, the party as its quantity), and the
//! checkout's one transaction seats it (docs/design.md, "Tables: a party
//! at a time"). Nobody ever picks a table.

use actix_web::http::StatusCode;
use actix_web::{HttpRequest, HttpResponse, web};
use askama::Template;
use chrono::{Duration, NaiveDate, NaiveTime};
use serde::Deserialize;

use crate::catalogue::tables::times::bookable;
use crate::money;
use crate::retry::{Bound, retry};
use crate::routes::ShopError;
use crate::routes::render::render;
use crate::routes::shop::basket_count;
use crate::state::Shop;

#[derive(Deserialize)]
pub struct TimesQuery {
    date: Option<String>,
    party: Option<String>,
}

/// One time on the page that seats the party.
struct TimeRow {
    product_id: String,
    /// "19:30"
    time: String,
    covers_left: i32,
}

#[derive(Template)]
#[template(path = "tables/book.html")]
struct DiningPage {
    basket_count: i64,
    room_id: String,
    name: String,
    description: String,
    /// The day asked for, as the date field takes it.
    date: String,
    /// The day in words: "Fri 18 Dec".
    day: String,
    first_day: String,
    last_day: String,
    party: i64,
    largest_party: i32,
    /// The deposit the party pays per cover, in words, or empty.
    deposit: String,
    /// Cancelled so many hours before its time, a booking's deposit is
    /// refunded in full.
    cancel_hours: i32,
    times: Vec<TimeRow>,
    /// The times full for the party, "18:00, 18:15", or empty.
    full: String,
    error: String,
}

#[derive(sqlx::FromRow)]
struct Room {
    name: String,
    description: String,
    currency: String,
    largest_party: i32,
    days_ahead: i32,
}

/// `GET /dining/{room}?date=2026-12-18&party=4`
pub async fn times(
    shop: web::Data<Shop>,
    request: HttpRequest,
    room_id: web::Path<String>,
    query: web::Query<TimesQuery>,
) -> Result<HttpResponse, ShopError> {
    let unknown = || ShopError::not_found("there is no such restaurant in the shop");
    if room_id.is_empty() || room_id.len() > 100 {
        return Err(unknown());
    }
    let room: Room = retry("dining_read", Bound::Shopper, || {
        sqlx::query_as::<_, Room>(
            "select name, description, currency, largest_party, days_ahead from dining_rooms \
              where collection = $1 and archived_at is null",
        )
        .bind(room_id.as_str())
        .fetch_optional(&shop.pool)
    })
    .await?
    .ok_or_else(unknown)?;
    let today = shop.zone.today(chrono::Utc::now());
    let last = today + Duration::days(i64::from(room.days_ahead));
    let mut error = String::new();
    let date = match query
        .date
        .as_deref()
        .map(str::trim)
        .filter(|d| !d.is_empty())
    {
        None => today,
        Some(typed) => match NaiveDate::parse_from_str(typed, "%Y-%m-%d") {
            Ok(day) if day >= today && day <= last => day,
            _ => {
                error = format!(
                    "Choose a day from {} to {}.",
                    today.format("%a %-d %b"),
                    last.format("%a %-d %b")
                );
                today
            }
        },
    };
    let party = match query
        .party
        .as_deref()
        .map(str::trim)
        .filter(|p| !p.is_empty())
    {
        None => 2,
        Some(typed) => match typed.parse::<i64>() {
            Ok(n) if (1..=i64::from(room.largest_party)).contains(&n) => n,
            _ => {
                error = format!(
                    "A party is 1 to {} guests; for more, please call us.",
                    room.largest_party
                );
                2
            }
        },
    };
    let from = shop
        .zone
        .at(date, NaiveTime::MIN)
        .map_err(|e| ShopError::internal(anyhow::anyhow!(e)))?;
    let party_i32 = i32::try_from(party).unwrap_or(2);
    let rows = day_times(&shop, room_id.as_str(), from, party_i32).await?;
    // the policy a booking of this party copies: shown before paying
    #[derive(sqlx::FromRow)]
    struct Policy {
        deposit_minor: i64,
        cancel_hours: i32,
    }
    let policy = retry("dining_read", Bound::Shopper, || {
        sqlx::query_as::<_, Policy>(
            "select deposit_minor, cancel_hours from dining_periods \
              where room = $1 and deposit_minor > 0 and deposit_from_party <= $2 \
              order by deposit_minor desc, cancel_hours desc limit 1",
        )
        .bind(room_id.as_str())
        .bind(party_i32)
        .fetch_optional(&shop.pool)
    })
    .await?;
    let (deposit, cancel_hours) = policy.map_or((0, 0), |p| (p.deposit_minor, p.cancel_hours));
    let clock = |at| shop.zone.local(at).format("%H:%M").to_string();
    let page = DiningPage {
        basket_count: basket_count(&shop, &request).await?,
        room_id: room_id.into_inner(),
        name: room.name,
        description: room.description,
        date: date.format("%Y-%m-%d").to_string(),
        day: date.format("%a %-d %b").to_string(),
        first_day: today.format("%Y-%m-%d").to_string(),
        last_day: last.format("%Y-%m-%d").to_string(),
        party,
        largest_party: room.largest_party,
        cancel_hours,
        deposit: if deposit > 0 {
            money::format(deposit, &room.currency)
        } else {
            String::new()
        },
        times: rows
            .iter()
            .filter(|t| t.seats)
            .map(|t| TimeRow {
                product_id: t.product_id.clone(),
                time: clock(t.starts_at),
                covers_left: t.covers_left.max(0),
            })
            .collect(),
        full: rows
            .iter()
            .filter(|t| !t.seats)
            .map(|t| clock(t.starts_at))
            .collect::<Vec<_>>()
            .join(", "),
        error,
    };
    let status = if page.error.is_empty() {
        StatusCode::OK
    } else {
        StatusCode::BAD_REQUEST
    };
    render(status, &page)
}

/// How long memory answers a day's times without the database: a change
/// of any of the day's times (a booking, a release) ends it sooner; a
/// table moved by staff, which changes no count, at the latest then.
const DAY_FRESH_FOR: std::time::Duration = std::time::Duration::from_secs(1);

/// A day's times for a party: the crowd is answered from memory (the
/// room's tables and stays; while memory may not be believed, the
/// database's last answer while none of the day's times changed since its
/// read began, for a second at most); the database decides every
/// booking all the same, and a time gone meanwhile is refused at checkout
/// with the nearest that seat the party.
async fn day_times(
    shop: &Shop,
    room_id: &str,
    from: chrono::DateTime<chrono::Utc>,
    party: i32,
) -> Result<Vec<crate::catalogue::tables::times::BookableTime>, ShopError> {
    // memory's room: its tables and the stays on them
    let day = (from, from + Duration::days(1));
    if let Some(times) = shop
        .live
        .now()
        .and_then(|s| s.bookable(room_id, day, party))
    {
        return Ok(times);
    }
    let key = format!("dining:{room_id}:{}:{party}", from.timestamp());
    if let Some(kept) = shop.live.kept_page(&key, DAY_FRESH_FOR)
        && let Ok(rows) = serde_json::from_slice(&kept)
    {
        return Ok(rows);
    }
    // every change committed before this moment is in the read below
    let read_at = chrono::Utc::now();
    let rows = retry("dining_read", Bound::Shopper, || {
        bookable(&shop.pool, room_id, from, from + Duration::days(1), party)
    })
    .await?;
    // kept only when memory knows every time of the day
    let resources: Option<Vec<String>> = shop.live.now().and_then(|snapshot| {
        rows.iter()
            .map(|t| {
                snapshot
                    .product(&t.product_id)
                    .map(|(p, _)| p.resource_id.clone())
            })
            .collect()
    });
    if let (Some(resources), Ok(answer)) = (resources, serde_json::to_vec(&rows))
        && !resources.is_empty()
    {
        shop.live
            .keep_answer(&key, resources, read_at, bytes::Bytes::from(answer));
    }
    Ok(rows)
}

/// Which of these products are a party at a time (a table booking): from
/// memory's kinds when it knows them all, else the database's. The basket
/// and the pay page say such a line as its party, not a quantity.
pub(crate) async fn party_products(
    shop: &Shop,
    ids: &[String],
) -> Result<std::collections::HashSet<String>, ShopError> {
    Ok(retry("basket_read", Bound::Shopper, || shop.live.parties(ids)).await?)
}

/// A line's count in the shop's words: "Party of 4" for a booking.
pub(crate) fn party_words(qty: i32) -> String {
    crate::catalogue::ChoiceKind::Party.count_words(qty)
}
