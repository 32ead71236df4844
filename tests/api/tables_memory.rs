//! A table drop answered from memory (issue 45): whether a room seats a
//! party at a time is answered in memory (`catalogue::tables::fit`) as
//! the database answers it (`hf_bookable_times`); memory follows every
//! booking and release; a room's bookings open at a set moment.

use std::collections::HashMap;

use chrono::{Duration, NaiveTime, Utc};
use holdfast::catalogue::tables::fit;
use holdfast::catalogue::tables::times::{bookable, publish_day};
use holdfast::catalogue::tables::{JoinSpec, PeriodSpec, RoomSpec, TurnSpec};
use holdfast::checkout::{self, StartOutcome};
use holdfast::clock::ShopZone;
use holdfast_testkit::*;

use crate::seats_best::Lcg;
use crate::tables::{ROOM, at, book, booking, day, room, table};
use holdfast_testkit::engine;

/// A room of 5 to 12 tables of random sizes, some joinable in pairs,
/// lunch and dinner, two or three turns, a small pacing.
fn random_room(rng: &mut Lcg) -> RoomSpec {
    let sizes = [(1, 2), (1, 2), (2, 4), (3, 4), (4, 6), (6, 8), (8, 10)];
    let n = 5 + rng.next(8) as usize;
    let tables: Vec<_> = (1..=n)
        .map(|i| {
            let (min, max) = sizes[rng.next(sizes.len() as u64) as usize];
            table(&format!("T{i}"), min, max, 100 + rng.next(3) as i32 * 10)
        })
        .collect();
    let joins: Vec<JoinSpec> = (1..n)
        .step_by(3)
        .filter(|_| rng.next(2) == 0)
        .map(|i| JoinSpec {
            id: format!("T{i}+T{}", i + 1),
            tables: vec![format!("T{i}"), format!("T{}", i + 1)],
            min_party: tables[i - 1].max_party.max(tables[i].max_party) + 1,
            max_party: tables[i - 1].max_party + tables[i].max_party,
            priority: 100,
        })
        .collect();
    let mut spec = room(8 + rng.next(12) as i32, tables, joins);
    spec.periods.push(PeriodSpec {
        name: "lunch".into(),
        weekdays: (1..=7).collect(),
        opens: NaiveTime::from_hms_opt(12, 0, 0).unwrap(),
        last_seating: NaiveTime::from_hms_opt(14, 30, 0).unwrap(),
        deposit_minor: 0,
        deposit_from_party: 1,
        cancel_hours: 24,
    });
    spec.turns = match rng.next(3) {
        0 => vec![TurnSpec {
            up_to_party: 10,
            minutes: 90,
        }],
        1 => vec![
            TurnSpec {
                up_to_party: 2,
                minutes: 75,
            },
            TurnSpec {
                up_to_party: 6,
                minutes: 120,
            },
        ],
        _ => spec.turns.clone(),
    };
    spec
}

/// Each resource's covers left, as `hf_bookable_times` counts them.
async fn covers(db: &TestDb) -> HashMap<String, i32> {
    let rows: Vec<(String, i32)> = sqlx::query_as("select id, total - held - sold from resources")
        .fetch_all(&db.pool)
        .await
        .unwrap();
    rows.into_iter().collect()
}

#[tokio::test]
async fn memory_says_what_the_database_says_of_every_time_and_party() {
    let mut rng = Lcg(45);
    let (mut compared, mut seats, mut refused, mut held_back) = (0, 0, 0, 0);
    for round in 0..6 {
        let db = TestDb::new().await;
        let spec = random_room(&mut rng);
        holdfast::catalogue::tables::save_room(&db.pool, &spec)
            .await
            .unwrap();
        publish_day(&db.pool, ShopZone::UTC, ROOM, day())
            .await
            .unwrap();
        let times: Vec<(u32, u32)> = (12..23)
            .flat_map(|h| [0, 15, 30, 45].map(|m| (h, m)))
            .filter(|&(h, m)| {
                (12..=14).contains(&h) && (h, m) <= (14, 30)
                    || (18..=22).contains(&h) && (h, m) <= (22, 30)
            })
            .collect();
        for k in 0..24 {
            let party = [1, 2, 2, 2, 3, 4, 4, 5, 6, 8, 10][rng.next(11) as usize];
            let (h, m) = times[rng.next(times.len() as u64) as usize];
            book(&db, &format!("r{round}-{k}"), party, h, m).await;
        }
        // the same stays judged with each rule for fuller parties
        for least_fill in [0, 50, 66, 90] {
            sqlx::query("update dining_rooms set least_fill = $2 where collection = $1")
                .bind(ROOM)
                .bind(least_fill)
                .execute(&db.pool)
                .await
                .unwrap();
            let plans = fit::plans(&db.pool).await.unwrap();
            let plan = plans.iter().find(|p| p.room == ROOM).unwrap();
            let stays = fit::stays(&db.pool, &[ROOM])
                .await
                .unwrap()
                .remove(ROOM)
                .unwrap();
            let left = covers(&db).await;
            let window = (at(0, 0), at(23, 59));
            for party in 1..=10 {
                let database = bookable(&db.pool, ROOM, window.0, window.1, party)
                    .await
                    .unwrap();
                let memory =
                    plan.bookable(&stays, window, party, Utc::now(), |r| left.get(r).copied());
                assert_eq!(
                    memory, database,
                    "room {round}, least_fill {least_fill}, party {party}"
                );
                assert_eq!(database.len(), times.len());
                compared += database.len();
                for t in &database {
                    if t.seats {
                        seats += 1;
                    } else {
                        refused += 1;
                    }
                }
                if least_fill > 0 {
                    let all =
                        plan.bookable(&stays, window, party, Utc::now(), |r| left.get(r).copied());
                    let mut loose = plan.clone();
                    loose.least_fill = 0;
                    let free =
                        loose.bookable(&stays, window, party, Utc::now(), |r| left.get(r).copied());
                    held_back += free
                        .iter()
                        .zip(&all)
                        .filter(|(f, a)| f.seats && !a.seats)
                        .count();
                }
            }
        }
    }
    // the comparison met every answer: times that seat, times that do
    // not, and times a rule for fuller parties holds back
    assert!(compared > 5_000, "compared {compared}");
    assert!(
        seats > 500 && refused > 500,
        "{seats} seat, {refused} refused"
    );
    assert!(held_back > 100, "held back {held_back}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn memory_follows_each_booking_and_release_of_a_table() {
    let db = TestDb::new().await;
    let mut spec = room(40, vec![table("T1", 1, 4, 100)], vec![]);
    // a deposit: the booking is held while its guest pays
    spec.periods[0].deposit_minor = 1000;
    crate::tables::set_up(&db, &spec).await;
    let live = holdfast::live::LiveStock::start(db.pool.clone());
    let seats = |live: &holdfast::live::LiveStock| {
        live.now()
            .and_then(|s| s.bookable(ROOM, (at(19, 0), at(19, 1)), 2))
            .and_then(|t| t.first().map(|t| t.seats))
    };
    assert!(live.refresh().await);
    assert_eq!(seats(&live), Some(true));
    let StartOutcome::Started { order, .. } =
        checkout::start_checkout(&db.pool, &booking("seven", 2, 19, 0))
            .await
            .unwrap()
    else {
        panic!("expected a booking");
    };
    // the booking reaches memory by its notification, not a full read
    let begun = std::time::Instant::now();
    while seats(&live) != Some(false) {
        assert!(
            begun.elapsed() < std::time::Duration::from_secs(1),
            "memory never saw the booking"
        );
        tokio::time::sleep(std::time::Duration::from_millis(5)).await;
    }
    // 21:00 is free
    let later = live
        .now()
        .and_then(|s| s.bookable(ROOM, (at(21, 0), at(21, 1)), 2))
        .unwrap();
    assert!(later[0].seats);
    checkout::release_order(&db.pool, order.id, engine::expired_by_provider())
        .await
        .unwrap();
    let begun = std::time::Instant::now();
    while seats(&live) != Some(true) {
        assert!(
            begun.elapsed() < std::time::Duration::from_secs(1),
            "memory never saw the release"
        );
        tokio::time::sleep(std::time::Duration::from_millis(5)).await;
    }
    // a table taken out of the room by staff reaches memory too
    let mut fewer = spec.clone();
    fewer.tables = vec![table("T2", 6, 8, 100)];
    holdfast::catalogue::tables::save_room(&db.pool, &fewer)
        .await
        .unwrap();
    let begun = std::time::Instant::now();
    while seats(&live) != Some(false) {
        assert!(
            begun.elapsed() < std::time::Duration::from_secs(1),
            "memory never saw the set-up"
        );
        tokio::time::sleep(std::time::Duration::from_millis(5)).await;
    }
}

/// The room's times whose sale opens at `at` (none: open now).
async fn opening_at(db: &TestDb, at: Option<chrono::DateTime<Utc>>) -> i64 {
    sqlx::query_scalar(
        "select count(*) from products p join dining_times t on t.product_id = p.id \
          where t.room = $1 and p.sale_opens_at is not distinct from $2",
    )
    .bind(ROOM)
    .bind(at)
    .fetch_one(&db.pool)
    .await
    .unwrap()
}

#[tokio::test]
async fn a_rooms_bookings_open_at_its_moment_and_the_days_published_later_too() {
    let db = TestDb::new().await;
    let mut spec = room(40, vec![table("T1", 1, 4, 100)], vec![]);
    // as PostgreSQL keeps it: microseconds
    let opening = chrono::DurationRound::duration_trunc(
        Utc::now() + Duration::seconds(2),
        Duration::microseconds(1),
    )
    .unwrap();
    spec.bookings_open_at = Some(opening);
    crate::tables::set_up(&db, &spec).await;
    assert_eq!(opening_at(&db, Some(opening)).await, 19);
    // before the moment: not on sale, nothing held
    let early = checkout::start_checkout(&db.pool, &booking("early", 2, 19, 0))
        .await
        .unwrap();
    assert!(matches!(early, StartOutcome::NotOnSale { .. }), "{early:?}");
    assert_eq!(crate::tables::live_pins(&db).await, 0);
    // a day published later opens at the same moment
    let made = publish_day(&db.pool, ShopZone::UTC, ROOM, day() + Duration::days(1))
        .await
        .unwrap();
    assert_eq!(made, 19);
    assert_eq!(opening_at(&db, Some(opening)).await, 38);
    // at the moment: booked
    let wait = (opening - Utc::now()).to_std().unwrap_or_default();
    tokio::time::sleep(wait + std::time::Duration::from_millis(50)).await;
    assert_eq!(book(&db, "on-time", 2, 19, 0).await.unwrap(), ["T1"]);
    // the setting moved on: the times not begun follow it; cleared, they
    // are open now
    let later = opening + Duration::days(1);
    spec.bookings_open_at = Some(later);
    holdfast::catalogue::tables::save_room(&db.pool, &spec)
        .await
        .unwrap();
    assert_eq!(opening_at(&db, Some(later)).await, 38);
    spec.bookings_open_at = None;
    holdfast::catalogue::tables::save_room(&db.pool, &spec)
        .await
        .unwrap();
    assert_eq!(opening_at(&db, None).await, 38);
    assert_eq!(
        holdfast::catalogue::tables::read_room(&db.pool, ROOM)
            .await
            .unwrap()
            .unwrap()
            .bookings_open_at,
        None
    );
}
