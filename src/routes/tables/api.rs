//! A dining room's bookable times over the API (issue 36):
//! `GET /api/v1/dining/{room}/times?date=&party=`, the times of a day that
//! can seat a party, with the places each has left: from memory's room
//! (`catalogue::tables::fit`) when memory may be believed, else as the
//! database answers (`catalogue::tables::times::bookable`); the same
//! answer the booking page shows.

use actix_web::{HttpResponse, web};
use chrono::{Duration, NaiveDate, NaiveTime};
use serde::Deserialize;

use crate::catalogue::tables::times::bookable;
use crate::retry::{Bound, retry};
use crate::routes::api_error::{ApiError, ErrorBody};
use crate::routes::errors::ErrorCode;
use crate::state::Shop;

#[derive(Deserialize)]
pub struct TimesQuery {
    date: Option<String>,
    party: Option<String>,
}

#[derive(sqlx::FromRow)]
struct Room {
    largest_party: i32,
}

/// `GET /api/v1/dining/{room}/times?date=2026-12-18&party=4`
#[utoipa::path(get, path = "/api/v1/dining/{room}/times", tag = "catalogue",
    security(("api_key" = [])),
    params(("room" = String, Path, description = "The dining room's id"),
           ("date" = String, Query, description = "The day, YYYY-MM-DD, in the shop's zone"),
           ("party" = i32, Query, description = "The party's size, 1 to the room's largest")),
    responses((status = 200, description = "Each time of the day: its product, start, the places \
                                             left and whether a free table seats the party now"),
              (status = 400, description = "No day or party, or one out of range", body = ErrorBody),
              (status = 404, description = "No such dining room", body = ErrorBody),
              (status = 401, description = "No live key", body = ErrorBody),
              (status = 403, description = "The key lacks read_catalogue", body = ErrorBody)))]
pub async fn times(
    shop: web::Data<Shop>,
    room_id: web::Path<String>,
    query: web::Query<TimesQuery>,
) -> Result<HttpResponse, ApiError> {
    let snapshot = shop.live.now();
    let remembered = snapshot.as_ref().and_then(|s| s.room(room_id.as_str()));
    let room: Option<Room> = match remembered {
        Some(memory) => Some(Room {
            largest_party: memory.plan.largest_party,
        }),
        None => {
            retry("dining_read", Bound::Shopper, || {
                sqlx::query_as::<_, Room>(
                    "select largest_party from dining_rooms \
                      where collection = $1 and archived_at is null",
                )
                .bind(room_id.as_str())
                .fetch_optional(&shop.pool)
            })
            .await?
        }
    };
    let Some(room) = room else {
        return Err(ApiError::new(ErrorCode::NotFound, "no such dining room"));
    };
    let date = query
        .date
        .as_deref()
        .and_then(|d| NaiveDate::parse_from_str(d.trim(), "%Y-%m-%d").ok());
    let party = query
        .party
        .as_deref()
        .and_then(|p| p.trim().parse::<i32>().ok())
        .filter(|p| (1..=room.largest_party).contains(p));
    let (Some(date), Some(party)) = (date, party) else {
        return Err(ApiError::new(
            ErrorCode::BadQuery,
            format!(
                "ask for a day and a party of 1 to {}: ?date=2026-12-18&party=4; nothing was done",
                room.largest_party
            ),
        ));
    };
    let from = shop
        .zone()
        .at(date, NaiveTime::MIN)
        .map_err(|e| ApiError::new(ErrorCode::BadQuery, e))?;
    let day = (from, from + Duration::days(1));
    let in_memory = remembered.and_then(|_| snapshot.as_ref()?.bookable(&room_id, day, party));
    let times = match in_memory {
        Some(times) => times,
        None => {
            retry("dining_read", Bound::Shopper, || {
                bookable(
                    &shop.pool,
                    room_id.as_str(),
                    from,
                    from + Duration::days(1),
                    party,
                )
            })
            .await?
        }
    };
    Ok(HttpResponse::Ok().json(serde_json::json!({
        "room": room_id.as_str(),
        "date": date,
        "party": party,
        "times": times,
    })))
}
