//! A party's times around the one it asked for: what a refusal offers
//! instead ("Times that can seat 4 that day: 19:00, 19:15"), and what lets
//! memory refuse the crowd at a full time without the database. The room's
//! times six hours either side, with covers left and whether a free table
//! or joined set seats the party: from memory's room (its tables and the
//! stays on them, `catalogue::tables::fit`, as fresh as memory's counters)
//! when memory may be believed; else as the database answers
//! (`hf_bookable_times`), kept in memory while none of those times changed
//! and for [`AROUND_FRESH_FOR`] at most. Every booking is still decided by
//! the database.

use std::sync::Arc;
use std::time::{Duration, Instant};

use chrono::{DateTime, Utc};
use sqlx::PgPool;

use crate::catalogue::tables::times::{BookableTime, bookable, nearest_of};
use crate::live::LiveStock;

/// How long memory offers a kept answer at most.
pub(crate) const AROUND_FRESH_FOR: Duration = Duration::from_secs(5);

/// How long a refusal waits for memory to see what the database saw.
const AGREE_WITHIN: Duration = Duration::from_millis(200);

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

/// The times around `product_id`'s for `party`, from memory only: its
/// room's tables and stays, else an answer the database gave and nothing
/// has changed since.
pub(crate) fn kept(live: &LiveStock, product_id: &str, party: i32) -> Option<Arc<Around>> {
    let from_room = live.now().and_then(|snapshot| {
        let time = snapshot.settings().dining_of(product_id)?;
        let window = (time.starts_at - WINDOW, time.starts_at + WINDOW);
        let times = snapshot.bookable(&time.room, window, party)?;
        Some(Arc::new(Around {
            at: time.starts_at,
            times,
        }))
    });
    from_room.or_else(|| live.kept_value(&key(product_id, party), AROUND_FRESH_FOR))
}

/// The times around `product_id`'s for `party`, who was refused at it:
/// from memory once it agrees, else read (and kept). `None`: `product_id`
/// is no time of a room.
pub(crate) async fn around(
    live: &LiveStock,
    pool: &PgPool,
    product_id: &str,
    party: i32,
) -> sqlx::Result<Option<Arc<Around>>> {
    // the party was refused at its time: memory may lag the commit that
    // took the table by milliseconds, so its answer is taken once it
    // agrees (the time asked seats nobody of the party), waited for a
    // moment; else the database's
    let agree_by = Instant::now() + AGREE_WITHIN;
    while let Some(kept) = kept(live, product_id, party) {
        if kept.asked().is_none_or(|asked| !asked.seats) {
            return Ok(Some(kept));
        }
        if Instant::now() >= agree_by {
            break;
        }
        tokio::time::sleep(Duration::from_millis(2)).await;
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
