//! A dining room's booking page (`/dining/{room}`): the guest chooses a
//! day and a party size (the first day with a time for the party unless
//! they chose one), and sees the times that can still seat the party by
//! service, with the tables left for it, from memory's room
//! (`catalogue::tables::fit`; the database's answer,
//! `catalogue::tables::times::bookable`, while memory may not be
//! believed); a time is booked by adding the
//! party to the basket (its product, the party as its quantity), and the
//! checkout's one transaction seats it (docs/design.md, "Tables: a party
//! at a time"). Nobody ever picks a table.

use actix_web::http::StatusCode;
use actix_web::{HttpRequest, HttpResponse, web};
use askama::Template;
use chrono::{Duration, NaiveDate, NaiveTime};
use serde::Deserialize;

use crate::catalogue::tables::fit::PeriodPlan;
use crate::catalogue::tables::times::{BookableTime, bookable};
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
    /// "2 tables left for 4", as memory counts them; empty when it
    /// cannot.
    left: String,
}

/// The times of one service ("Lunch", "Dinner").
struct Service {
    heading: String,
    times: Vec<TimeRow>,
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
    /// The times that seat the party, by service, in time order.
    services: Vec<Service>,
    /// The times full for the party, "18:00, 18:15", or empty.
    full: String,
    /// When the day's bookings open, in words, if they have not yet (a
    /// table drop); empty otherwise.
    opens: String,
    error: String,
}

/// What the booking page says of a room and its services.
struct RoomFacts {
    name: String,
    description: String,
    currency: String,
    largest_party: i32,
    days_ahead: i32,
    periods: Vec<PeriodPlan>,
}

/// The room as memory knows it, else as the database has it; `None`: no
/// such room.
async fn room_facts(shop: &Shop, room_id: &str) -> Result<Option<RoomFacts>, ShopError> {
    let remembered = shop
        .live
        .now()
        .and_then(|s| s.room(room_id).map(|m| m.plan.clone()));
    if let Some(plan) = remembered {
        return Ok(Some(RoomFacts {
            name: plan.name.clone(),
            description: plan.description.clone(),
            currency: plan.currency.clone(),
            largest_party: plan.largest_party,
            days_ahead: plan.days_ahead,
            periods: plan.periods.clone(),
        }));
    }
    #[derive(sqlx::FromRow)]
    struct Room {
        name: String,
        description: String,
        currency: String,
        largest_party: i32,
        days_ahead: i32,
    }
    let room = retry("dining_read", Bound::Shopper, || {
        sqlx::query_as::<_, Room>(
            "select name, description, currency, largest_party, days_ahead from dining_rooms \
              where collection = $1 and archived_at is null",
        )
        .bind(room_id)
        .fetch_optional(&shop.pool)
    })
    .await?;
    let Some(room) = room else {
        return Ok(None);
    };
    let periods = retry("dining_read", Bound::Shopper, || {
        sqlx::query_as::<_, PeriodPlan>(
            "select name, deposit_minor, deposit_from_party, cancel_hours from dining_periods \
              where room = $1 order by opens, name",
        )
        .bind(room_id)
        .fetch_all(&shop.pool)
    })
    .await?;
    Ok(Some(RoomFacts {
        name: room.name,
        description: room.description,
        currency: room.currency,
        largest_party: room.largest_party,
        days_ahead: room.days_ahead,
        periods,
    }))
}

/// The first day from `today` to `last` with a time that seats `party`,
/// as memory knows the room (`None`: none, or memory cannot say).
fn first_day_with_times(
    shop: &Shop,
    room_id: &str,
    (today, last): (NaiveDate, NaiveDate),
    party: i32,
) -> Option<NaiveDate> {
    let from = shop.zone().at(today, NaiveTime::MIN).ok()?;
    let to = shop
        .zone()
        .at(last + Duration::days(1), NaiveTime::MIN)
        .ok()?;
    let snapshot = shop.live.now()?;
    let times = snapshot.bookable(room_id, (from, to), party)?;
    let plan = &snapshot.room(room_id)?.plan;
    let now = snapshot.database_now();
    let first = times.iter().find(|t| {
        t.seats
            && plan
                .time(&t.product_id)
                .is_some_and(|time| time.sale_opens_at.is_none_or(|at| at <= now))
    })?;
    Some(shop.zone().local(first.starts_at).date_naive())
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
    let room = room_facts(&shop, room_id.as_str())
        .await?
        .ok_or_else(unknown)?;
    let today = shop.zone().today(chrono::Utc::now());
    let last = today + Duration::days(i64::from(room.days_ahead));
    let mut error = String::new();
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
    let party_i32 = i32::try_from(party).unwrap_or(2);
    let date = match query
        .date
        .as_deref()
        .map(str::trim)
        .filter(|d| !d.is_empty())
    {
        // the first day that has a time for the party, not a day whose
        // service is over
        None => {
            first_day_with_times(&shop, room_id.as_str(), (today, last), party_i32).unwrap_or(today)
        }
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
    let from = shop
        .zone()
        .at(date, NaiveTime::MIN)
        .map_err(|e| ShopError::internal(anyhow::anyhow!(e)))?;
    let mut rows = day_times(&shop, room_id.as_str(), from, party_i32).await?;
    // a table drop: times whose bookings open later are not offered yet,
    // and the page says when they open
    let opening = not_open_yet(&shop, room_id.as_str(), &rows);
    let opens = opening
        .iter()
        .map(|(_, at)| *at)
        .min()
        .map(|at| format!("Bookings for this day open {}.", shop.zone().long(at)))
        .unwrap_or_default();
    rows.retain(|t| !opening.iter().any(|(id, _)| *id == t.product_id));
    // the policy a booking of this party copies: shown before paying
    let policy = room
        .periods
        .iter()
        .filter(|p| p.deposit_minor > 0 && p.deposit_from_party <= party_i32)
        .max_by_key(|p| (p.deposit_minor, p.cancel_hours));
    let (deposit, cancel_hours) = policy.map_or((0, 0), |p| (p.deposit_minor, p.cancel_hours));
    let clock = |at| shop.zone().local(at).format("%H:%M").to_string();
    let services = services(&shop, room_id.as_str(), &room.periods, &rows, party_i32).await?;
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
        services,
        full: rows
            .iter()
            .filter(|t| !t.seats)
            .map(|t| clock(t.starts_at))
            .collect::<Vec<_>>()
            .join(", "),
        opens,
        error,
    };
    let status = if page.error.is_empty() {
        StatusCode::OK
    } else {
        StatusCode::BAD_REQUEST
    };
    render(status, &page)
}

/// The day's times whose bookings open later, with that moment, as
/// memory knows them (a table drop; none while memory may not be believed:
/// the checkout still refuses them as not on sale yet).
fn not_open_yet(
    shop: &Shop,
    room_id: &str,
    rows: &[BookableTime],
) -> Vec<(String, chrono::DateTime<chrono::Utc>)> {
    let Some(snapshot) = shop.live.now() else {
        return Vec::new();
    };
    let Some(memory) = snapshot.room(room_id) else {
        return Vec::new();
    };
    let now = snapshot.database_now();
    rows.iter()
        .filter_map(|t| {
            let at = memory.plan.time(&t.product_id)?.sale_opens_at?;
            (at > now).then(|| (t.product_id.clone(), at))
        })
        .collect()
}

/// The times that seat the party, by service in the room's order, each
/// saying how many tables are left for the party (memory's count, with
/// the covers the time has left); what memory cannot place goes under
/// one heading.
async fn services(
    shop: &Shop,
    room_id: &str,
    periods: &[PeriodPlan],
    rows: &[BookableTime],
    party: i32,
) -> Result<Vec<Service>, ShopError> {
    let snapshot = shop.live.now();
    let memory = snapshot.as_ref().and_then(|s| s.room(room_id));
    let seating: Vec<&BookableTime> = rows.iter().filter(|t| t.seats).collect();
    // each time's period: memory's, else the database's
    let period_of: std::collections::HashMap<String, String> = match memory {
        Some(m) => seating
            .iter()
            .filter_map(|t| {
                Some((
                    t.product_id.clone(),
                    m.plan.time(&t.product_id)?.period.clone(),
                ))
            })
            .collect(),
        None => {
            let ids: Vec<String> = seating.iter().map(|t| t.product_id.clone()).collect();
            retry("dining_read", Bound::Shopper, || {
                sqlx::query_as::<_, (String, String)>(
                    "select product_id, period from dining_times where product_id = any($1)",
                )
                .bind(&ids)
                .fetch_all(&shop.pool)
            })
            .await?
            .into_iter()
            .collect()
        }
    };
    let mut services: Vec<(Option<usize>, Service)> = Vec::new();
    for t in seating {
        let at = periods
            .iter()
            .position(|p| period_of.get(&t.product_id) == Some(&p.name));
        let left = memory
            .and_then(|m| {
                let time = m.plan.time(&t.product_id)?;
                let tables = m.plan.tables_for(&m.stays, time, party);
                let by_covers = usize::try_from(t.covers_left / party.max(1)).unwrap_or(0);
                Some(tables.min(by_covers))
            })
            .map(|n| match n {
                1 => format!("The last table for {party}"),
                n => format!("{n} tables left for {party}"),
            })
            .unwrap_or_default();
        let row = TimeRow {
            product_id: t.product_id.clone(),
            time: shop.zone().local(t.starts_at).format("%H:%M").to_string(),
            left,
        };
        match services.iter_mut().find(|(p, _)| *p == at) {
            Some((_, service)) => service.times.push(row),
            None => services.push((
                at,
                Service {
                    heading: at.map_or_else(|| "Times".to_owned(), |i| periods[i].heading()),
                    times: vec![row],
                },
            )),
        }
    }
    services.sort_by_key(|(at, _)| at.unwrap_or(usize::MAX));
    Ok(services.into_iter().map(|(_, s)| s).collect())
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
