//! Pickup schedules publish their rolling window on a schedule of their
//! own: each pass adds the slots that came into the window (and takes off
//! sale the ones a changed schedule no longer has, when they have no
//! orders). Dining rooms do the same with their bookable times
//! ([`publish_dining_once`]). One worker at a time publishes, under a
//! transaction's advisory lock; the others skip the pass.

use std::time::Duration;

use sqlx::PgPool;

use crate::catalogue::schedules::{self, Published};
use crate::clock::ShopZone;

/// How often `serve` and `worker` publish: a window of days moves by one
/// slot's length at most between two passes of a five-minute schedule.
pub const EVERY: Duration = Duration::from_secs(5 * 60);

/// The advisory lock's key ("hf_schedules").
const LOCK: i64 = 0x6866_5f73_6368_6564;

/// Publish every schedule's window now, unless another worker is doing it
/// (then `None`). The lock is the transaction's: its end, however it ends
/// (commit, an error, a dropped connection), lets it go.
pub async fn publish_once(pool: &PgPool, zone: ShopZone) -> anyhow::Result<Option<Published>> {
    let mut lock = pool.begin().await?;
    let (got, now): (bool, chrono::DateTime<chrono::Utc>) =
        sqlx::query_as("select pg_try_advisory_xact_lock($1), now()")
            .bind(LOCK)
            .fetch_one(&mut *lock)
            .await?;
    if !got {
        return Ok(None);
    }
    let published = schedules::publish(pool, zone, now).await?;
    lock.commit().await?;
    Ok(Some(published))
}

/// The dining rooms' advisory lock's key ("hf_dining").
const DINING_LOCK: i64 = 0x6866_5f64_696e_696e;

/// Publish every dining room's times for its window of days as of the
/// database's now (`catalogue::tables::times::publish_window`), unless
/// another worker is doing it (then `None`): the number of times made.
pub async fn publish_dining_once(pool: &PgPool, zone: ShopZone) -> anyhow::Result<Option<usize>> {
    let mut lock = pool.begin().await?;
    let (got, now): (bool, chrono::DateTime<chrono::Utc>) =
        sqlx::query_as("select pg_try_advisory_xact_lock($1), now()")
            .bind(DINING_LOCK)
            .fetch_one(&mut *lock)
            .await?;
    if !got {
        return Ok(None);
    }
    let made = crate::catalogue::tables::times::publish_window(pool, zone, now).await?;
    lock.commit().await?;
    Ok(Some(made))
}

/// Publish every [`EVERY`], from the first tick, until the task is dropped:
/// in the zone the owner chose on Settings, else `default_zone` (the
/// server's).
pub async fn run_forever(pool: PgPool, default_zone: ShopZone) {
    let mut ticker = tokio::time::interval(EVERY);
    ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        ticker.tick().await;
        let zone = match crate::storefront::Storefront::read(&pool).await {
            Ok(front) => front.zone_or(default_zone),
            Err(error) => {
                tracing::warn!(%error, "could not read the shop's zone");
                continue;
            }
        };
        match publish_once(&pool, zone).await {
            Ok(Some(done)) if done.created + done.withdrawn + done.updated > 0 => {
                tracing::info!(?done, "pickup schedules published");
            }
            Ok(_) => {}
            Err(error) => tracing::warn!(%error, "could not publish pickup schedules"),
        }
        match publish_dining_once(&pool, zone).await {
            Ok(Some(made)) if made > 0 => tracing::info!(made, "dining times published"),
            Ok(_) => {}
            Err(error) => tracing::warn!(%error, "could not publish dining times"),
        }
    }
}
