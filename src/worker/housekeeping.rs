//! Housekeeping: what bots and time leave behind is forgotten on a
//! schedule, so the tables a flash sale fills do not grow for ever.
//!
//! - baskets untouched for the retention (default 30 days);
//! - orders that were never paid (expired or cancelled, no payment ever
//!   recorded, the final reconciliation check done, no job still to run)
//!   once older than the retention; paid orders, refunds and everything
//!   money touched are kept;
//! - staff login throttle rows whose window and lock have passed, and
//!   staff sessions that have ended;
//! - rate buckets idle long enough to be full again (a missing bucket is
//!   a full one).

use std::time::Duration;

use sqlx::PgPool;

use crate::limits::Rate;

/// How often `serve` and `worker` tidy.
pub const EVERY: Duration = Duration::from_secs(10 * 60);

/// One housekeeper; any number may run at once (each delete is its own
/// statement and deleting twice is harmless).
#[derive(Debug, Clone)]
pub struct Housekeeping {
    pool: PgPool,
    retention_days: u32,
    bucket_full_after: Duration,
}

/// What one pass forgot.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Tidied {
    pub basket_lines: u64,
    pub orders: u64,
    pub throttle_rows: u64,
    pub staff_sessions: u64,
    pub rate_buckets: u64,
}

impl Housekeeping {
    /// `retention_days` (`HOLDFAST_RETENTION_DAYS`, at least 1); `rate`,
    /// the address rate limit in force (`None`: off), tells when an idle
    /// bucket is full again.
    pub fn new(pool: PgPool, retention_days: u32, rate: Option<Rate>) -> Self {
        let bucket_full_after = rate
            .map(|rate| Duration::from_secs_f64(rate.capacity / rate.per_second))
            .unwrap_or_default()
            .max(Duration::from_secs(60));
        Self {
            pool,
            retention_days: retention_days.max(1),
            bucket_full_after,
        }
    }

    /// One pass over everything.
    pub async fn run_once(&self) -> sqlx::Result<Tidied> {
        let basket_lines = sqlx::query(
            "delete from basket_lines b \
              where b.basket_id in (select basket_id from basket_lines group by basket_id \
                                     having max(added_at) < now() - $1 * interval '1 day')",
        )
        .bind(f64::from(self.retention_days))
        .execute(&self.pool)
        .await?
        .rows_affected();
        let orders = self.forget_unpaid_orders().await?;
        let (throttle_rows, staff_sessions) = crate::staff::prune(&self.pool).await?;
        let rate_buckets = sqlx::query(
            "delete from rate_buckets where refreshed_at < now() - $1 * interval '1 second'",
        )
        .bind(self.bucket_full_after.as_secs_f64())
        .execute(&self.pool)
        .await?
        .rows_affected();
        Ok(Tidied {
            basket_lines,
            orders,
            throttle_rows,
            staff_sessions,
            rate_buckets,
        })
    }

    /// Never-paid orders past the retention, with their lines, a thousand
    /// at a time, each batch in one transaction.
    async fn forget_unpaid_orders(&self) -> sqlx::Result<u64> {
        let mut forgotten = 0;
        loop {
            let mut tx = self.pool.begin().await?;
            let ids: Vec<uuid::Uuid> = sqlx::query_scalar(
                "select o.id from orders o \
                  where o.state in ('expired', 'cancelled') \
                    and o.payment_ref is null \
                    and o.created_at < now() - $1 * interval '1 day' \
                    and (o.reconciled_at is not null or o.provider_session_id is null) \
                    and not exists (select 1 from outbox_jobs j \
                                     where j.state = 'pending' \
                                       and j.payload->>'order_id' = o.id::text) \
                  order by o.id limit 1000 \
                  for update skip locked",
            )
            .bind(f64::from(self.retention_days))
            .fetch_all(&mut *tx)
            .await?;
            if ids.is_empty() {
                return Ok(forgotten);
            }
            sqlx::query("delete from order_lines where order_id = any($1)")
                .bind(&ids)
                .execute(&mut *tx)
                .await?;
            // a waiting-list offer that lapsed keeps its entry (the line's
            // history), without the order it was never paid through
            sqlx::query(
                "update waitlist_entries set order_id = null \
                  where order_id = any($1) and state not in ('offered', 'claimed')",
            )
            .bind(&ids)
            .execute(&mut *tx)
            .await?;
            let deleted = sqlx::query(
                "delete from orders where id = any($1) and payment_ref is null \
                    and state in ('expired', 'cancelled')",
            )
            .bind(&ids)
            .execute(&mut *tx)
            .await?
            .rows_affected();
            tx.commit().await?;
            forgotten += deleted;
            if ids.len() < 1000 {
                return Ok(forgotten);
            }
        }
    }

    /// Tidy every [`EVERY`] until the task is dropped; failures are
    /// logged and the next pass tries again.
    pub async fn run_forever(self) {
        let mut ticker = tokio::time::interval(EVERY);
        ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            ticker.tick().await;
            match self.run_once().await {
                Ok(tidied) if tidied != Tidied::default() => {
                    tracing::info!(?tidied, "housekeeping");
                }
                Ok(_) => {}
                Err(error) => tracing::warn!(%error, "housekeeping failed"),
            }
        }
    }
}
