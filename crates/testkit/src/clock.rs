//! Time in tests: the shop's time zone (Berlin, and the nights its clocks
//! change), and time passing as the database sees it ([`pass`]): days go
//! by in one statement, nothing sleeps.

use chrono::{Duration, NaiveDate, NaiveTime, Utc};
use holdfast::clock::ShopZone;
use sqlx::PgPool;

/// Europe/Berlin, a zone whose clocks change twice a year.
pub fn berlin() -> ShopZone {
    ShopZone::parse("Europe/Berlin").unwrap()
}

/// The next day (from tomorrow) whose 02:30 the clocks skip, or pass twice.
pub fn next_change(zone: ShopZone, skipped: bool) -> (NaiveDate, i64) {
    let today = zone.today(Utc::now());
    let half_two = NaiveTime::from_hms_opt(2, 30, 0).unwrap();
    let one = NaiveTime::from_hms_opt(1, 0, 0).unwrap();
    let four = NaiveTime::from_hms_opt(4, 0, 0).unwrap();
    for ahead in 1..400 {
        let day = today + Duration::days(ahead);
        let span = zone.at(day, four).unwrap() - zone.at(day, one).unwrap();
        let found = if skipped {
            zone.at(day, half_two).is_err()
        } else {
            span == Duration::hours(4)
        };
        if found {
            return (day, ahead);
        }
    }
    panic!("no clock change within 400 days");
}

/// `span` passes, as the database sees it: every moment the engine, the
/// worker and reconciliation compare with `now()` (holds' deadlines and
/// when they started, the resources' hints, orders' times, reconciliation's
/// and the outbox's next tries, waiting-list offers) moves back by `span`,
/// in one transaction, so the hints move with the rows and every CHECK
/// still holds. The history (`hold_events`, append-only) keeps its times.
pub async fn pass(pool: &PgPool, span: std::time::Duration) {
    let seconds = span.as_secs_f64();
    let mut tx = pool.begin().await.expect("a transaction");
    // lock as the shop does (orders, then resources in id order, then what
    // hangs off them), so a payment or a sweep under way never deadlocks
    // with time passing
    for statement in [
        "select 1 from orders order by id for update",
        "select 1 from resources order by id for no key update",
    ] {
        sqlx::query(statement)
            .execute(&mut *tx)
            .await
            .unwrap_or_else(|e| panic!("time passing: {e}"));
    }
    for statement in [
        "update holds set created_at = created_at - $1 * interval '1 second', \
                expires_at = expires_at - $1 * interval '1 second', \
                payment_started_at = payment_started_at - $1 * interval '1 second', \
                payment_deadline = payment_deadline - $1 * interval '1 second', \
                confirmed_at = confirmed_at - $1 * interval '1 second', \
                ended_at = ended_at - $1 * interval '1 second', \
                settling_at = settling_at - $1 * interval '1 second', \
                settle_deadline = settle_deadline - $1 * interval '1 second'",
        "update resources set next_expiry = next_expiry - $1 * interval '1 second', \
                next_deadline = next_deadline - $1 * interval '1 second'",
        "update orders set created_at = created_at - $1 * interval '1 second', \
                updated_at = updated_at - $1 * interval '1 second', \
                paid_at = paid_at - $1 * interval '1 second', \
                provider_expires_at = provider_expires_at - $1 * interval '1 second', \
                settling_until = settling_until - $1 * interval '1 second', \
                late_money_at = late_money_at - $1 * interval '1 second', \
                reconcile_after = reconcile_after - $1 * interval '1 second'",
        "update outbox_jobs set run_after = run_after - $1 * interval '1 second' \
          where state = 'pending'",
        "update waitlist_entries set offer_expires_at = offer_expires_at - $1 * interval '1 second', \
                offered_at = offered_at - $1 * interval '1 second'",
    ] {
        sqlx::query(statement)
            .bind(seconds)
            .execute(&mut *tx)
            .await
            .unwrap_or_else(|e| panic!("time passing: {e}"));
    }
    tx.commit().await.expect("time passed");
}
