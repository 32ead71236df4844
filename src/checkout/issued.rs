//! When and where an order's lines happen, in words: what the order page,
//! the mail and the provider's page say under a line's name. (Its codes
//! are its items': [`crate::items`].)

use std::collections::HashMap;

use sqlx::PgPool;
use uuid::Uuid;

use crate::catalogue::ProductKind;
use crate::clock::ShopZone;

/// A line of an order, with what says when and where it happens.
#[derive(sqlx::FromRow)]
struct LineRow {
    product_id: String,
    kind: ProductKind,
    starts_at: Option<chrono::DateTime<chrono::Utc>>,
    doors_at: Option<chrono::DateTime<chrono::Utc>>,
    venue: String,
    /// A table's booking: its party and when it ends.
    party: Option<i32>,
    ends_at: Option<chrono::DateTime<chrono::Utc>>,
}

/// An order's lines with what says when and where each happens, read
/// once and said in long words or short.
pub struct LineTimes(Vec<LineRow>);

impl LineTimes {
    /// The order's lines: each product's own time, else its collection's.
    pub async fn of(pool: &PgPool, order_id: Uuid) -> sqlx::Result<Self> {
        let rows = sqlx::query_as(
            "select l.product_id, p.kind, coalesce(p.starts_at, c.starts_at) as starts_at, \
                    c.doors_at, c.venue, b.party, b.ends_at \
               from order_lines l join products p on p.id = l.product_id \
               join collections c on c.id = p.collection \
               left join bookings b on b.order_id = l.order_id and b.product_id = l.product_id \
              where l.order_id = $1",
        )
        .bind(order_id)
        .fetch_all(pool)
        .await?;
        Ok(Self(rows))
    }

    /// When and where each line happens, by product id: "Sunday 20
    /// December, 19:30 CET · Doors 19:00 CET · The Pier" for a tier (its
    /// kind shows its time), the doors and venue its event gives; lines
    /// whose kind shows no time (a slot's name says it, a jar has none)
    /// are left out. The order page and the mail show it under the line's
    /// name.
    pub fn occasions(self, zone: ShopZone) -> HashMap<String, String> {
        self.0
            .into_iter()
            .filter_map(|row| {
                // a booking says it in its own words: "Table for 4, Fri 18
                // Dec 19:30, 2 h"
                if let (Some(party), Some(starts), Some(ends)) =
                    (row.party, row.starts_at, row.ends_at)
                {
                    return Some((row.product_id, booking_words(party, starts, ends, zone)));
                }
                if !row.kind.shows_time() {
                    return None;
                }
                let when = row.starts_at.map(|at| zone.long(at));
                let doors = row.doors_at.map(|at| format!("Doors {}", zone.time(at)));
                let venue = Some(row.venue.trim().to_owned()).filter(|v| !v.is_empty());
                let words: Vec<String> = [when, doors, venue].into_iter().flatten().collect();
                (!words.is_empty()).then(|| (row.product_id, words.join(" · ")))
            })
            .collect()
    }

    /// When each dated line happens, short ("Mon 20 Dec 19:30 CET"), by
    /// product id: for the provider's line, which has only a name. A kind
    /// whose name says when (a slot) has none.
    pub fn days(self, zone: ShopZone) -> HashMap<String, String> {
        self.0
            .into_iter()
            .filter(|row| row.kind.shows_time())
            .filter_map(|row| Some((row.product_id, zone.short(row.starts_at?))))
            .collect()
    }
}

/// "Table for 4, Fri 18 Dec 19:30, 2 h" (or "2 h 30"), in the shop's zone.
fn booking_words(
    party: i32,
    starts: chrono::DateTime<chrono::Utc>,
    ends: chrono::DateTime<chrono::Utc>,
    zone: ShopZone,
) -> String {
    let minutes = (ends - starts).num_minutes();
    let stay = match (minutes / 60, minutes % 60) {
        (0, m) => format!("{m} min"),
        (h, 0) => format!("{h} h"),
        (h, m) => format!("{h} h {m}"),
    };
    format!(
        "Table for {party}, {}, {stay}",
        zone.local(starts).format("%a %-d %b %H:%M")
    )
}
