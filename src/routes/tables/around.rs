//! A party's times around the one it asked for: what a refusal offers
//! instead ("Times that can seat 4 that day: 19:00, 19:15"), and what lets
//! memory refuse the crowd at a full time without the database. The room's
//! times six hours either side, as the database last answered for that
//! party (`hf_bookable_times`: covers left, and whether a free table or
//! joined set seats it), kept in memory while none of those times changed
//! (a booking, a release, a table moved: each changes its time's counters)
//! and for [`AROUND_FRESH_FOR`] at most (a table set up by staff changes
//! no counter). Every booking is still decided by the database.

use std::sync::Arc;
use std::time::Duration;

use chrono::{DateTime, Utc};
use sqlx::PgPool;

use crate::catalogue::tables::times::{BookableTime, bookable, nearest_of};
use crate::live::LiveStock;

/// How long memory offers a kept answer at most.
pub(crate) const AROUND_FRESH_FOR: Duration = Duration::from_secs(5);

/// How far either side of the time asked the times offered lie.
const WINDOW: chrono::Duration = chrono::Duration::hours(6);

/// The room's times around one, for one party.
#[derive(Debug)]
pub(crate) struct Around {
    /// The time asked for.
    pub at: DateTime<Utc>,
    /// Its room's bookable times within six hours of it, earliest first.
    pub times: Vec<BookableTime>,
}

impl Around {
    /// The time asked for, if the party could book it at all now.
    pub fn asked(&self) -> Option<&BookableTime> {
        self.times.iter().find(|t| t.starts_at == self.at)
    }

    /// The `n` other times that seat the party, nearest to the one asked
    /// for first.
    pub fn nearest(&self, n: usize) -> Vec<BookableTime> {
        nearest_of(&self.times, self.at, n)
    }
}

fn key(product_id: &str, party: i32) -> String {
    format!("around:{product_id}:{party}")
}

/// The times around `product_id`'s for `party`, from memory only.
pub(crate) fn kept(live: &LiveStock, product_id: &str, party: i32) -> Option<Arc<Around>> {
    live.kept_value(&key(product_id, party), AROUND_FRESH_FOR)
}

/// The times around `product_id`'s for `party`: from memory, else read
/// (and kept). `None`: `product_id` is no time of a room.
pub(crate) async fn around(
    live: &LiveStock,
    pool: &PgPool,
    product_id: &str,
    party: i32,
) -> sqlx::Result<Option<Arc<Around>>> {
    if let Some(kept) = kept(live, product_id, party) {
        return Ok(Some(kept));
    }
    // every change committed before this moment is in the reads below
    let read_at = Utc::now();
    let snapshot = live.now();
    let remembered = snapshot.as_ref().and_then(|s| {
        s.settings()
            .dining_of(product_id)
            .map(|t| (t.room.clone(), t.starts_at))
    });
    let time = match remembered {
        Some(time) => Some(time),
        None => {
            sqlx::query_as("select room, starts_at from dining_times where product_id = $1")
                .bind(product_id)
                .fetch_optional(pool)
                .await?
        }
    };
    let Some((room, at)) = time else {
        return Ok(None);
    };
    let around = Arc::new(Around {
        at,
        times: bookable(pool, &room, at - WINDOW, at + WINDOW, party).await?,
    });
    // kept only when memory knows every time's counters, the asked one's
    // too (a change to any makes it stale)
    let resources: Option<Vec<String>> = snapshot.and_then(|s| {
        std::iter::once(product_id)
            .chain(around.times.iter().map(|t| t.product_id.as_str()))
            .map(|id| s.product(id).map(|(p, _)| p.resource_id.clone()))
            .collect()
    });
    if let Some(resources) = resources {
        live.keep_value(&key(product_id, party), resources, read_at, around.clone());
    }
    Ok(Some(around))
}

/// The `n` times nearest to `product_id`'s that seat `party` now.
pub(crate) async fn nearest(
    live: &LiveStock,
    pool: &PgPool,
    product_id: &str,
    party: i32,
    n: usize,
) -> sqlx::Result<Vec<BookableTime>> {
    Ok(around(live, pool, product_id, party)
        .await?
        .map(|around| around.nearest(n))
        .unwrap_or_default())
}
