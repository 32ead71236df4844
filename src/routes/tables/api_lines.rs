//! A booking as a line of `POST /api/v1/checkouts` (issue 36):
//! `{"product_id": "harbour-bistro", "party": 4, "at": "2026-12-05T19:30:00+01:00"}`
//! names the room (or one of its times) and the moment; it becomes that
//! time's product with the party as its choice, and the checkout seats it
//! as the shop's form does. The 201 says each booking's tables and stay;
//! a 409 for a table taken names the nearest times that seat the party.

use chrono::{DateTime, FixedOffset, Utc};
use sqlx::PgPool;

use crate::catalogue::{Choice, ChoiceFields};
use crate::checkout::ShortLine;
use crate::routes::api_error::ApiError;
use crate::routes::errors::ErrorCode;

/// What a line asks of a product that is not a table: so many units, or a
/// seated section's seats (by label, or the best so many, together or not).
pub(crate) struct Units {
    pub qty: Option<i32>,
    pub seats: Option<Vec<String>>,
    pub together: Option<bool>,
}

/// A line's product and choice as the basket takes them: a booking's time
/// found from its room (or time) and moment, or so many units.
pub(crate) async fn resolve(
    live: &crate::live::LiveStock,
    pool: &PgPool,
    product_id: &str,
    units: Units,
    party: Option<i32>,
    at: Option<DateTime<FixedOffset>>,
) -> Result<(String, Choice), ApiError> {
    let Units {
        qty,
        seats,
        together,
    } = units;
    let bad = |words: String| ApiError::new(ErrorCode::BadLines, words);
    if party.is_none() && at.is_none() {
        let choice = Choice::from_fields(ChoiceFields {
            qty: qty.map(i64::from),
            seats: seats.clone(),
            together,
            ..ChoiceFields::default()
        })
        .map_err(|_| {
            bad(format!(
                "{product_id}: give qty, 1 to 100 units, or seats by label (or party and at for a table); nothing was done"
            ))
        })?;
        return Ok((product_id.to_owned(), choice));
    }
    let (Some(party), Some(at), None, None, None) = (party, at, qty, seats, together) else {
        return Err(bad(format!(
            "{product_id}: a table takes party and at (a time with its offset), not qty, seats \
             or together; nothing was done"
        )));
    };
    let at = at.with_timezone(&Utc);
    // the room's times from memory; a time it does not know (published
    // since its last read) from the database
    let remembered = live.now().and_then(|snapshot| {
        snapshot
            .settings()
            .dining_time(product_id, at)
            .map(|t| t.product_id.clone())
    });
    let time: Option<String> = match remembered {
        Some(time) => Some(time),
        None => {
            sqlx::query_scalar(
                "select product_id from dining_times \
                  where (room = $1 or product_id = $1) and starts_at = $2",
            )
            .bind(product_id)
            .bind(at)
            .fetch_optional(pool)
            .await?
        }
    };
    let time = time.ok_or_else(|| {
        bad(format!(
            "{product_id} has no bookable time at {}; GET /api/v1/dining/{{room}}/times lists them; \
             nothing was done",
            at.to_rfc3339()
        ))
    })?;
    let choice = Choice::from_fields(ChoiceFields {
        party: Some(i64::from(party)),
        at: Some(at),
        ..ChoiceFields::default()
    })
    .map_err(|_| {
        bad(format!(
            "{product_id}: a party is 1 to 100 guests; nothing was done"
        ))
    })?;
    Ok((time, choice))
}

/// The bookings an order holds, for its 201: each time's product, party,
/// tables and stay.
pub(crate) async fn bookings_of(
    pool: &PgPool,
    order_id: uuid::Uuid,
) -> sqlx::Result<Vec<serde_json::Value>> {
    #[derive(sqlx::FromRow)]
    struct Booked {
        product_id: String,
        party: i32,
        tables: Vec<String>,
        starts_at: DateTime<Utc>,
        ends_at: DateTime<Utc>,
    }
    let booked: Vec<Booked> = sqlx::query_as(
        "select product_id, party, tables, starts_at, ends_at from bookings \
          where order_id = $1 order by starts_at, product_id",
    )
    .bind(order_id)
    .fetch_all(pool)
    .await?;
    Ok(booked
        .into_iter()
        .map(|b| {
            serde_json::json!({
                "product_id": b.product_id,
                "party": b.party,
                "tables": b.tables,
                "starts_at": b.starts_at,
                "ends_at": b.ends_at,
            })
        })
        .collect())
}

/// For refused booking lines: the nearest times that seat each party, as
/// words a client can read ("bistro-20261205-2100 at 2026-12-05T21:00:00+00:00");
/// empty when no refused line is a table's.
pub(crate) async fn nearest_words(
    live: &crate::live::LiveStock,
    pool: &PgPool,
    lines: &[ShortLine],
) -> sqlx::Result<String> {
    let mut words = Vec::new();
    for line in lines {
        let nearest =
            super::around::nearest(live, pool, &line.product_id, line.requested, 3).await?;
        if nearest.is_empty() {
            continue;
        }
        let times: Vec<String> = nearest
            .iter()
            .map(|t| format!("{} at {}", t.product_id, t.starts_at.to_rfc3339()))
            .collect();
        words.push(format!(
            "times that seat {} near {}: {}",
            line.requested,
            line.product_id,
            times.join(", ")
        ));
    }
    Ok(words.join("; "))
}
