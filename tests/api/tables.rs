//! A table for a party at a time (issue 36), the engine's part: the
//! database chooses the smallest free table or joined set that fits (ties
//! by priority), holds the party's covers of the quarter hour's pacing in
//! the checkout's one transaction, and never double-books a table, even
//! for a statement that skips the application; a booking lives and ends
//! with its hold, and the drift check sees a table that disagrees.

use chrono::{DateTime, Duration, NaiveDate, NaiveTime, Utc};
use futures::future::join_all;
use holdfast::catalogue::tables::times::{bookable, nearest, publish_day};
use holdfast::catalogue::tables::{JoinSpec, PeriodSpec, RoomSpec, TableSpec, TurnSpec};
use holdfast::catalogue::{Choice, ChoiceFields};
use holdfast::checkout::{
    self, AttachOutcome, CheckoutStart, Customer, Fulfilment, Source, StartOutcome, WantedLine,
};
use holdfast::clock::ShopZone;
use holdfast::inventory::IdempotencyKey;
use holdfast::payments::{PaymentPage, ProviderKind};
use holdfast_testkit::engine::{account, assert_no_drift, held_and_sold, report};
use holdfast_testkit::*;

pub(crate) const ROOM: &str = "bistro";

pub(crate) fn table(id: &str, min: i32, max: i32, priority: i32) -> TableSpec {
    TableSpec {
        id: id.into(),
        min_party: min,
        max_party: max,
        area: String::new(),
        priority,
    }
}

/// Dinner every day 18:00–22:30 every 15 minutes, 2 h up to 4 guests and
/// 2 h 30 up to 8, with the tables given.
pub(crate) fn room(pacing: i32, tables: Vec<TableSpec>, joins: Vec<JoinSpec>) -> RoomSpec {
    RoomSpec {
        id: ROOM.into(),
        name: "Dinner at the Bistro".into(),
        description: String::new(),
        currency: "eur".into(),
        interval_minutes: 15,
        pacing,
        days_ahead: 30,
        book_until_minutes: 60,
        largest_party: 10,
        least_fill: 0,
        closed_days: Vec::new(),
        bookings_open_at: None,
        tables,
        joins,
        periods: vec![PeriodSpec {
            name: "dinner".into(),
            weekdays: (1..=7).collect(),
            opens: NaiveTime::from_hms_opt(18, 0, 0).unwrap(),
            last_seating: NaiveTime::from_hms_opt(22, 30, 0).unwrap(),
            deposit_minor: 0,
            deposit_from_party: 1,
            cancel_hours: 24,
        }],
        turns: vec![
            TurnSpec {
                up_to_party: 4,
                minutes: 120,
            },
            TurnSpec {
                up_to_party: 8,
                minutes: 150,
            },
        ],
    }
}

/// The evening booked: three days ahead, in UTC.
pub(crate) fn day() -> NaiveDate {
    (Utc::now() + Duration::days(3)).date_naive()
}

pub(crate) fn at(hh: u32, mm: u32) -> DateTime<Utc> {
    ShopZone::UTC
        .at(day(), NaiveTime::from_hms_opt(hh, mm, 0).unwrap())
        .unwrap()
}

pub(crate) fn time_id(hh: u32, mm: u32) -> String {
    format!("{ROOM}-{}-{hh:02}{mm:02}", day().format("%Y%m%d"))
}

pub(crate) async fn set_up(db: &TestDb, spec: &RoomSpec) {
    holdfast::catalogue::tables::save_room(&db.pool, spec)
        .await
        .expect("room");
    let made = publish_day(&db.pool, ShopZone::UTC, ROOM, day())
        .await
        .expect("times");
    // 18:00, 18:15 … 22:30
    assert_eq!(made, 19);
}

/// The checkout form `key` for a party at a time.
pub(crate) fn booking(key: &str, party: i64, hh: u32, mm: u32) -> CheckoutStart {
    let choice = Choice::from_fields(ChoiceFields {
        party: Some(party),
        at: Some(at(hh, mm)),
        ..ChoiceFields::default()
    })
    .unwrap();
    CheckoutStart {
        checkout_key: IdempotencyKey::parse(key).unwrap(),
        order_token: checkout::codes::order_token(),
        voucher: None,
        account: account(&format!("basket-{key}")),
        lines: vec![WantedLine {
            product_id: time_id(hh, mm),
            choice,
        }],
        customer: Customer::parse("Ada Shopper", "ada@example.com").unwrap(),
        provider: ProviderKind::Stripe,
        limits: Default::default(),
    }
}

/// Book, and say at which tables (`None`: refused, nothing held).
pub(crate) async fn book(
    db: &TestDb,
    key: &str,
    party: i64,
    hh: u32,
    mm: u32,
) -> Option<Vec<String>> {
    match checkout::start_checkout(&db.pool, &booking(key, party, hh, mm))
        .await
        .unwrap()
    {
        StartOutcome::Started { order, .. } => Some(tables_of(db, order.id).await),
        StartOutcome::SoldOut { .. } | StartOutcome::NoTable { .. } => None,
        other => panic!("expected a booking or a refusal, got {other:?}"),
    }
}

pub(crate) async fn tables_of(db: &TestDb, order: uuid::Uuid) -> Vec<String> {
    sqlx::query_scalar("select tables from bookings where order_id = $1")
        .bind(order)
        .fetch_one(&db.pool)
        .await
        .unwrap()
}

pub(crate) async fn live_pins(db: &TestDb) -> i64 {
    sqlx::query_scalar("select count(*) from table_pins where live")
        .fetch_one(&db.pool)
        .await
        .unwrap()
}

#[tokio::test]
async fn the_smallest_free_table_that_fits_ties_by_priority_then_a_joined_set() {
    let db = TestDb::new().await;
    let spec = room(
        100,
        vec![
            table("T1", 1, 2, 100),
            table("T2", 1, 2, 50),
            table("T3", 2, 4, 100),
            table("T4", 2, 4, 100),
            table("T8", 5, 8, 100),
        ],
        vec![JoinSpec {
            id: "T3+T4".into(),
            tables: vec!["T3".into(), "T4".into()],
            min_party: 5,
            max_party: 8,
            priority: 100,
        }],
    );
    set_up(&db, &spec).await;
    // a two takes the two-top of the better priority, never the eight-top
    assert_eq!(book(&db, "a", 2, 19, 30).await.unwrap(), ["T2"]);
    assert_eq!(book(&db, "b", 2, 19, 30).await.unwrap(), ["T1"]);
    // the two-tops are taken: a two sits at a four-top, not the eight
    assert_eq!(book(&db, "c", 2, 19, 30).await.unwrap(), ["T3"]);
    // a seven takes the eight-top; the next seven finds no set whole
    assert_eq!(book(&db, "d", 7, 19, 30).await.unwrap(), ["T8"]);
    assert_eq!(book(&db, "e", 7, 19, 30).await, None);
    // an hour and a half later T3 is still busy (its turn is 2 h), T4 is
    // free: a four sits there
    assert_eq!(book(&db, "f", 4, 21, 0).await.unwrap(), ["T4"]);
    // at 21:30 T3 is free again, T4 is not: no joined set for a six
    assert_eq!(book(&db, "g", 6, 21, 30).await, None);
    // an eight at 18:00 stays until 20:30: the eight-top and the pair are
    // taken from 19:30
    assert_eq!(book(&db, "h", 8, 18, 0).await, None);
    assert_eq!(live_pins(&db).await, 5);
    // a refusal held nothing
    let (held, sold) = held_and_sold(&db, &time_id(19, 30)).await;
    assert_eq!((held, sold), (2 + 2 + 2 + 7, 0));
    assert_no_drift(&db.inventory()).await;
}

#[tokio::test]
async fn a_large_party_takes_a_joined_set_when_no_single_table_seats_it() {
    let db = TestDb::new().await;
    let spec = room(
        100,
        vec![table("T3", 2, 4, 100), table("T4", 2, 4, 100)],
        vec![JoinSpec {
            id: "T3+T4".into(),
            tables: vec!["T3".into(), "T4".into()],
            min_party: 5,
            max_party: 8,
            priority: 100,
        }],
    );
    set_up(&db, &spec).await;
    assert_eq!(book(&db, "six", 6, 19, 30).await.unwrap(), ["T3", "T4"]);
    // both its tables are taken for its turn (2 h 30)
    assert_eq!(book(&db, "two", 2, 21, 45).await, None);
    assert_eq!(book(&db, "two-later", 2, 22, 0).await.unwrap(), ["T3"]);
    assert_no_drift(&db.inventory()).await;
}

#[tokio::test]
async fn pacing_limits_the_covers_that_start_in_a_quarter_hour() {
    let db = TestDb::new().await;
    let spec = room(
        6,
        vec![table("T3", 2, 4, 100), table("T4", 2, 4, 100)],
        vec![],
    );
    set_up(&db, &spec).await;
    assert!(book(&db, "four", 4, 19, 30).await.is_some());
    // a table is free, the kitchen is not: 2 covers left of 6
    assert_eq!(book(&db, "four-again", 4, 19, 30).await, None);
    assert_eq!(book(&db, "two", 2, 19, 30).await.unwrap(), ["T4"]);
    // the next quarter hour has its own covers, but no table until 21:30
    assert_eq!(book(&db, "four-1945", 4, 19, 45).await, None);
    let times = bookable(&db.pool, ROOM, at(19, 0), at(22, 0), 4)
        .await
        .unwrap();
    let seven_thirty = times.iter().find(|t| t.starts_at == at(19, 30)).unwrap();
    assert_eq!((seven_thirty.covers_left, seven_thirty.seats), (0, false));
    let nine_thirty = times.iter().find(|t| t.starts_at == at(21, 30)).unwrap();
    assert_eq!((nine_thirty.covers_left, nine_thirty.seats), (6, true));
    assert_no_drift(&db.inventory()).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn two_hundred_parties_race_for_the_last_table_at_half_past_seven() {
    let db = TestDb::with_connections(40).await;
    let spec = room(
        1000,
        vec![
            table("T1", 1, 4, 100),
            table("T2", 1, 4, 100),
            table("T3", 1, 4, 100),
        ],
        vec![],
    );
    set_up(&db, &spec).await;
    // two of the three tables are taken at 19:30
    assert!(book(&db, "early-1", 4, 19, 0).await.is_some());
    assert!(book(&db, "early-2", 2, 19, 30).await.is_some());
    let outcomes = join_all((0..200).map(|i| {
        let db = &db;
        async move { book(db, &format!("race-{i:03}"), 4, 19, 30).await }
    }))
    .await;
    let winners: Vec<&Vec<String>> = outcomes.iter().flatten().collect();
    assert_eq!(winners.len(), 1, "exactly one party gets the last table");
    assert_eq!(outcomes.iter().filter(|o| o.is_none()).count(), 199);
    // the refused are offered other times: the nearest that seat four.
    // One table is busy 19:00–21:00 and two 19:30–21:30, so nothing
    // before 21:00 seats a party for its two hours
    let offered = nearest(&db.pool, &time_id(19, 30), 4, 3).await.unwrap();
    let starts: Vec<DateTime<Utc>> = offered.iter().map(|t| t.starts_at).collect();
    assert_eq!(starts, [at(21, 0), at(21, 15), at(21, 30)]);
    assert!(offered.iter().all(|t| t.seats && t.covers_left >= 4));
    // the winner's four covers and the early two's are held; three
    // live pins, none overlapping on a table
    assert_eq!(held_and_sold(&db, &time_id(19, 30)).await, (2 + 4, 0));
    assert_eq!(live_pins(&db).await, 3);
    let overlapping: i64 = sqlx::query_scalar(
        "select count(*) from table_pins a join table_pins b \
           on a.room = b.room and a.table_id = b.table_id and a.hold_id < b.hold_id \
          where a.live and b.live and a.during && b.during",
    )
    .fetch_one(&db.pool)
    .await
    .unwrap();
    assert_eq!(overlapping, 0);
    assert_no_drift(&db.inventory()).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn two_hundred_parties_through_the_combiner_share_calls_each_seated_or_told_no_table() {
    let db = TestDb::with_connections(40).await;
    // six tables for two to four, and covers for everyone: the tables are
    // what runs out
    let tables = (1..=6)
        .map(|i| table(&format!("T{i}"), 2, 4, 100))
        .collect();
    set_up(&db, &room(1000, tables, vec![])).await;
    let checkouts = checkout::Checkouts::new(db.pool.clone());
    let barrier = std::sync::Arc::new(tokio::sync::Barrier::new(200));
    // 180 forms; every tenth is sent twice at once (a double click)
    let key = |i: usize| format!("crowd-{:03}", if i % 10 == 1 { i - 1 } else { i });
    let outcomes = join_all((0..200).map(|i| {
        let (checkouts, barrier) = (checkouts.clone(), barrier.clone());
        let form = booking(&key(i), 2, 19, 30);
        tokio::spawn(async move {
            barrier.wait().await;
            checkouts.start(&form).await.unwrap()
        })
    }))
    .await;
    let mut answers: std::collections::BTreeMap<String, Vec<Option<uuid::Uuid>>> =
        Default::default();
    for (i, outcome) in outcomes.into_iter().enumerate() {
        let order = match outcome.unwrap() {
            StartOutcome::Started {
                order, resource, ..
            } => {
                assert_eq!(resource, Some(time_id(19, 30)), "one resource, combined");
                Some(order.id)
            }
            StartOutcome::AlreadyStarted { order } => Some(order.id),
            StartOutcome::NoTable { lines } => {
                assert_eq!((lines[0].requested, lines[0].available), (2, 0));
                None
            }
            other => panic!("expected a table or no table, got {other:?}"),
        };
        answers.entry(key(i)).or_default().push(order);
    }
    // a form sent twice is one answer: the same booking, or no table twice
    assert_eq!(answers.len(), 180);
    assert!(
        answers.values().all(|a| a.iter().all(|o| *o == a[0])),
        "{answers:?}"
    );
    let seated: Vec<uuid::Uuid> = answers.values().filter_map(|a| a[0]).collect();
    assert_eq!(seated.len(), 6, "one party a table");
    let calls = checkouts.calls().0;
    assert!(
        (1..180).contains(&calls),
        "the crowd shared calls, took {calls}"
    );
    // each party at its own table, its covers held once
    let mut tables: Vec<Vec<String>> = Vec::new();
    for order in &seated {
        tables.push(tables_of(&db, *order).await);
    }
    tables.sort();
    tables.dedup();
    assert_eq!(tables.len(), 6);
    assert_eq!(live_pins(&db).await, 6);
    assert_eq!(held_and_sold(&db, &time_id(19, 30)).await, (12, 0));
    let (orders, bookings): (i64, i64) =
        sqlx::query_as("select (select count(*) from orders), (select count(*) from bookings)")
            .fetch_one(&db.pool)
            .await
            .unwrap();
    assert_eq!((orders, bookings), (6, 6));
    assert_no_drift(&db.inventory()).await;
}

/// Start a booking and pay it: its page named, a captured payment for
/// exactly its deposit reported by the webhook, confirmed by the one
/// confirm routine.
pub(crate) async fn paid_booking(
    db: &TestDb,
    key: &str,
    party: i64,
    hh: u32,
    mm: u32,
) -> checkout::Order {
    paid_start(db, key, &booking(key, party, hh, mm)).await
}

/// The checkout `start` (of `key`) booked, paid through a payment page and
/// its webhook, and fulfilled.
pub(crate) async fn paid_start(db: &TestDb, key: &str, start: &CheckoutStart) -> checkout::Order {
    let StartOutcome::Started { order, .. } =
        checkout::start_checkout(&db.pool, start).await.unwrap()
    else {
        panic!("expected a booking");
    };
    let page = PaymentPage {
        id: format!("cs_test_{key}"),
        url: format!("http://sandbox/pay/cs_test_{key}"),
        expires_at: Utc::now() + Duration::minutes(30),
    };
    let AttachOutcome::Paying { .. } = checkout::attach_payment(&db.pool, order.id, &page)
        .await
        .unwrap()
    else {
        panic!("expected paying");
    };
    let report = report(db, order.id, &format!("pi_{key}"), Source::Webhook).await;
    let fulfilled = checkout::confirm_payment(&db.pool, &report).await.unwrap();
    assert_eq!(fulfilled, Fulfilment::Fulfilled { order_id: order.id });
    checkout::order_by_id(&db.pool, order.id)
        .await
        .unwrap()
        .unwrap()
}

async fn hold_of(db: &TestDb, order: uuid::Uuid) -> uuid::Uuid {
    sqlx::query_scalar("select hold_id from bookings where order_id = $1")
        .bind(order)
        .fetch_one(&db.pool)
        .await
        .unwrap()
}

/// The SQLSTATE a statement failed with.
fn sqlstate(result: Result<sqlx::postgres::PgQueryResult, sqlx::Error>) -> String {
    match result {
        Err(sqlx::Error::Database(e)) => e.code().unwrap_or_default().into_owned(),
        other => panic!("expected a refusal, got {other:?}"),
    }
}

#[tokio::test]
async fn a_booking_lives_and_ends_with_its_hold_and_the_database_refuses_a_second_party() {
    let db = TestDb::new().await;
    let mut spec = room(100, vec![table("T1", 1, 4, 100)], vec![]);
    // a deposit of 10.00 a cover: the booking is paid as any order
    spec.periods[0].deposit_minor = 1000;
    set_up(&db, &spec).await;
    let inventory = db.inventory();

    // a booking released (its page expired) frees its table at once
    let StartOutcome::Started { order: left, .. } =
        checkout::start_checkout(&db.pool, &booking("left", 4, 19, 30))
            .await
            .unwrap()
    else {
        panic!("expected a booking");
    };
    assert_eq!(left.amount_minor, 4000);
    assert_eq!(book(&db, "meanwhile", 2, 19, 30).await, None);
    checkout::release_order(&db.pool, left.id, engine::expired_by_provider())
        .await
        .unwrap();
    assert_eq!(live_pins(&db).await, 0);
    assert_no_drift(&inventory).await;

    // paid: confirmed by the one confirm routine, its table kept
    let paid = paid_booking(&db, "paid", 3, 19, 30).await;
    assert_eq!(paid.amount_minor, 3000);
    assert_eq!(tables_of(&db, paid.id).await, ["T1"]);
    assert_eq!(held_and_sold(&db, &time_id(19, 30)).await, (0, 3));
    assert_eq!(live_pins(&db).await, 1);
    assert_no_drift(&inventory).await;

    // no statement can seat a second party at T1 while it is taken: not
    // the released booking's pin made live again, not a new pin that
    // overlaps by a minute
    let released = hold_of(&db, left.id).await;
    let again = sqlx::query("update table_pins set live = true where hold_id = $1")
        .bind(released)
        .execute(&db.pool)
        .await;
    assert_eq!(sqlstate(again), "23P01");
    sqlx::query("delete from table_pins where hold_id = $1")
        .bind(released)
        .execute(&db.pool)
        .await
        .unwrap();
    let overlapping = sqlx::query(
        "insert into table_pins (hold_id, room, table_id, during) \
         values ($1, $2, 'T1', tstzrange($3 - interval '1 hour 59 minutes', $3, '[)'))",
    )
    .bind(released)
    .bind(ROOM)
    .bind(at(21, 30))
    .execute(&db.pool)
    .await;
    assert_eq!(sqlstate(overlapping), "23P01");
    // a pin the hold does not count is drift the check reports
    sqlx::query("update table_pins set live = false where hold_id = $1")
        .bind(hold_of(&db, paid.id).await)
        .execute(&db.pool)
        .await
        .unwrap();
    let drifted: Vec<String> = inventory
        .check(None)
        .await
        .unwrap()
        .into_iter()
        .filter(|r| r.drift)
        .map(|r| r.resource_id)
        .collect();
    assert_eq!(drifted, [time_id(19, 30)]);
    sqlx::query("update table_pins set live = true where hold_id = $1")
        .bind(hold_of(&db, paid.id).await)
        .execute(&db.pool)
        .await
        .unwrap();
    assert_no_drift(&inventory).await;

    // refunded in full: the covers back on sale, the table free, and the
    // next party seated there
    let refund = holdfast::staff::refunds::refund_order(
        &db.pool,
        &holdfast::staff::refunds::RefundRequest {
            order_id: paid.id,
            units: vec![],
            reason: "the party cancelled".into(),
            restock: true,
            override_redeemed: false,
            by: "host@example.com".into(),
            staff: None,
            key: None,
        },
    )
    .await
    .unwrap();
    assert!(
        matches!(
            refund,
            holdfast::staff::refunds::RefundOutcome::Queued { units: 3, .. }
        ),
        "{refund:?}"
    );
    assert_eq!(live_pins(&db).await, 0);
    assert_eq!(held_and_sold(&db, &time_id(19, 30)).await, (0, 0));
    assert_eq!(book(&db, "next", 4, 19, 30).await.unwrap(), ["T1"]);
    assert_no_drift(&inventory).await;
}

#[tokio::test]
async fn a_booking_and_the_rest_of_the_basket_are_held_all_or_nothing() {
    let db = TestDb::new().await;
    db.load_demo().await;
    set_up(&db, &room(100, vec![table("T1", 1, 4, 100)], vec![])).await;
    let with_honey = |key: &str, hh: u32| {
        let mut start = booking(key, 4, hh, 0);
        start
            .lines
            .push(WantedLine::units("wild-honey", engine::qty(2)));
        start
    };
    let honey_before = held_and_sold(&db, "wild-honey").await;
    let StartOutcome::Started { lines, .. } =
        checkout::start_checkout(&db.pool, &with_honey("first", 19))
            .await
            .unwrap()
    else {
        panic!("expected both lines held");
    };
    assert_eq!(lines.len(), 2);
    assert_eq!(
        held_and_sold(&db, "wild-honey").await,
        (honey_before.0 + 2, honey_before.1)
    );
    // the table is taken at 20:00: the honey is not held either
    let refused = checkout::start_checkout(&db.pool, &with_honey("second", 20))
        .await
        .unwrap();
    let StartOutcome::NoTable { lines } = refused else {
        panic!("expected a refusal, got {refused:?}");
    };
    assert_eq!(lines.len(), 1);
    assert_eq!(lines[0].product_id, time_id(20, 0));
    assert_eq!(
        held_and_sold(&db, "wild-honey").await,
        (honey_before.0 + 2, honey_before.1)
    );
    assert_eq!(held_and_sold(&db, &time_id(20, 0)).await, (0, 0));
    assert_no_drift(&db.inventory()).await;
}

#[tokio::test]
async fn money_for_a_booking_whose_hold_expired_goes_back_and_seats_nobody() {
    let db = TestDb::new().await;
    let mut spec = room(100, vec![table("T1", 1, 4, 100)], vec![]);
    spec.periods[0].deposit_minor = 500;
    set_up(&db, &spec).await;
    let StartOutcome::Started { order, .. } =
        checkout::start_checkout(&db.pool, &booking("late", 2, 19, 30))
            .await
            .unwrap()
    else {
        panic!("expected a booking");
    };
    let page = PaymentPage {
        id: "cs_test_late".into(),
        url: "http://sandbox/pay/cs_test_late".into(),
        expires_at: Utc::now() + Duration::minutes(30),
    };
    checkout::attach_payment(&db.pool, order.id, &page)
        .await
        .unwrap();
    // its payment phase ran out: the sweep expires the hold, the table is
    // free, and another party takes it
    sqlx::query(
        "with h as (update holds set payment_deadline = now() - interval '1 second' \
                     where id = $1 and state = 'awaiting_payment' returning resource_id) \
         update resources r set next_deadline = now() - interval '1 second' from h \
          where r.id = h.resource_id",
    )
    .bind(hold_of(&db, order.id).await)
    .execute(&db.pool)
    .await
    .unwrap();
    db.inventory().sweep(100, "test").await.unwrap();
    assert_eq!(live_pins(&db).await, 0);
    assert_eq!(book(&db, "taker", 4, 19, 30).await.unwrap(), ["T1"]);
    // the money arrives: the covers are still there, the table is not,
    // so it goes back in full rather than seating a party nowhere
    let late = report(&db, order.id, "pi_late", Source::Webhook).await;
    let outcome = checkout::confirm_payment(&db.pool, &late).await.unwrap();
    assert_eq!(
        outcome,
        Fulfilment::RefundQueued {
            order_id: order.id,
            reason: "table_released".into()
        }
    );
    assert_eq!(held_and_sold(&db, &time_id(19, 30)).await, (4, 0));
    assert_eq!(live_pins(&db).await, 1);
    assert_no_drift(&db.inventory()).await;
}

async fn move_booking(db: &TestDb, order: uuid::Uuid, to: &str) -> String {
    sqlx::query_scalar("select hf_move_booking($1, $2)")
        .bind(hold_of(db, order).await)
        .bind(to)
        .fetch_one(&db.pool)
        .await
        .unwrap()
}

#[tokio::test]
async fn staff_move_a_booking_only_to_a_free_table_that_seats_its_party() {
    let db = TestDb::new().await;
    let spec = room(
        100,
        vec![
            table("T1", 1, 4, 100),
            table("T2", 1, 4, 100),
            table("T8", 5, 8, 100),
        ],
        vec![],
    );
    set_up(&db, &spec).await;
    let StartOutcome::Started { order: first, .. } =
        checkout::start_checkout(&db.pool, &booking("first", 2, 19, 30))
            .await
            .unwrap()
    else {
        panic!("expected a booking");
    };
    assert_eq!(tables_of(&db, first.id).await, ["T1"]);
    assert_eq!(move_booking(&db, first.id, "T2").await, "moved");
    assert_eq!(tables_of(&db, first.id).await, ["T2"]);
    assert_eq!(move_booking(&db, first.id, "T2").await, "same");
    assert_eq!(move_booking(&db, first.id, "T8").await, "does_not_fit");
    assert_eq!(move_booking(&db, first.id, "T9").await, "unknown_set");
    // T1 is free again, and the next two sits there
    assert_eq!(book(&db, "second", 2, 20, 0).await.unwrap(), ["T1"]);
    assert_eq!(move_booking(&db, first.id, "T1").await, "not_free");
    assert_eq!(tables_of(&db, first.id).await, ["T2"]);
    let pinned: Vec<String> = sqlx::query_scalar(
        "select table_id from table_pins where live and hold_id = $1 order by table_id",
    )
    .bind(hold_of(&db, first.id).await)
    .fetch_all(&db.pool)
    .await
    .unwrap();
    assert_eq!(pinned, ["T2"]);
    // a released booking is not moved
    checkout::release_order(&db.pool, first.id, engine::expired_by_provider())
        .await
        .unwrap();
    assert_eq!(move_booking(&db, first.id, "T1").await, "ended");
    assert_no_drift(&db.inventory()).await;
}

#[tokio::test]
async fn a_refunded_table_goes_to_the_waiting_list_of_its_time_in_the_refunds_transaction() {
    use holdfast::waitlist::{self, Confirmed, JoinRequest, Joined};
    let db = TestDb::new().await;
    let mut spec = room(100, vec![table("T1", 1, 4, 100)], vec![]);
    spec.periods[0].deposit_minor = 1000;
    set_up(&db, &spec).await;
    let first = paid_booking(&db, "first", 4, 19, 30).await;
    let joined = waitlist::join(
        &db.pool,
        &JoinRequest {
            product_id: time_id(19, 30),
            name: "Grace Waiting".into(),
            email: "grace@example.com".into(),
            qty: 2,
            provider: ProviderKind::Stripe,
            address: None,
        },
    )
    .await
    .unwrap();
    assert_eq!(joined, Joined::Mailed);
    let token: String =
        sqlx::query_scalar("select token from waitlist_entries where email = 'grace@example.com'")
            .fetch_one(&db.pool)
            .await
            .unwrap();
    // covers are left, a table is not: the party keeps its place
    assert_eq!(
        waitlist::confirm(&db.pool, &token).await.unwrap(),
        Confirmed::InLine
    );
    let state = || async {
        sqlx::query_scalar::<_, String>("select state from waitlist_entries where token = $1")
            .bind(&token)
            .fetch_one(&db.pool)
            .await
            .unwrap()
    };
    assert_eq!(state().await, "waiting");
    holdfast::staff::refunds::refund_order(
        &db.pool,
        &holdfast::staff::refunds::RefundRequest {
            order_id: first.id,
            units: vec![],
            reason: "the party cancelled".into(),
            restock: true,
            override_redeemed: false,
            by: "host@example.com".into(),
            staff: None,
            key: None,
        },
    )
    .await
    .unwrap();
    assert_eq!(state().await, "offered");
    // the offer is a booking at T1 for two, with its deposit, written by
    // the transaction that gave the first party's covers back
    let offer: uuid::Uuid =
        sqlx::query_scalar("select order_id from waitlist_entries where token = $1")
            .bind(&token)
            .fetch_one(&db.pool)
            .await
            .unwrap();
    assert_eq!(tables_of(&db, offer).await, ["T1"]);
    let amount: i64 = sqlx::query_scalar("select amount_minor from orders where id = $1")
        .bind(offer)
        .fetch_one(&db.pool)
        .await
        .unwrap();
    assert_eq!(amount, 2000);
    let same_transaction: bool = sqlx::query_scalar(
        "select (select e.xmin::text from hold_events e where e.kind = 'returned' \
                  and e.hold_id = $1) = (select xmin::text from bookings where order_id = $2)",
    )
    .bind(hold_of(&db, first.id).await)
    .bind(offer)
    .fetch_one(&db.pool)
    .await
    .unwrap();
    assert!(same_transaction);
    assert_eq!(held_and_sold(&db, &time_id(19, 30)).await, (2, 0));
    assert_eq!(live_pins(&db).await, 1);
    assert_no_drift(&db.inventory()).await;
}

#[tokio::test]
async fn a_dining_room_in_the_catalogue_file_loads_publishes_and_exports_as_it_was() {
    use holdfast::catalogue::CatalogueFile;
    let db = TestDb::new().await;
    let mut spec = room(
        12,
        vec![
            table("T1", 1, 2, 100),
            table("T2", 1, 2, 100),
            table("T8", 5, 8, 10),
        ],
        vec![JoinSpec {
            id: "T1+T2".into(),
            tables: vec!["T1".into(), "T2".into()],
            min_party: 3,
            max_party: 4,
            priority: 100,
        }],
    );
    spec.days_ahead = 2;
    spec.periods[0].deposit_minor = 1500;
    spec.periods[0].deposit_from_party = 6;
    // the file's form: JSON, times as "18:00:00"
    let text = serde_json::json!({ "currency": "eur", "dining_rooms": [spec] }).to_string();
    assert!(text.contains("\"opens\":\"18:00:00\""), "{text}");
    let file: CatalogueFile = serde_json::from_str(&text).unwrap();
    let report = file.load(&db.pool).await.unwrap();
    // today and two days ahead, 18:00 to 22:30 every quarter hour
    assert_eq!(report.times_published, 3 * 19);
    // loading again changes nothing
    assert_eq!(file.load(&db.pool).await.unwrap().times_published, 0);
    let exported = CatalogueFile::export(&db.pool, ShopZone::UTC)
        .await
        .unwrap();
    assert_eq!(exported.dining_rooms, [spec.clone()]);
    assert!(
        exported.products.is_empty(),
        "times are the room's, not products of the file"
    );
    // a join of a table the room does not have is refused, and nothing of
    // the file is written
    let mut bad = spec.clone();
    bad.id = "other".into();
    bad.joins[0].tables[1] = "T9".into();
    let refused = CatalogueFile {
        dining_rooms: vec![bad],
        ..file.clone()
    }
    .load(&db.pool)
    .await
    .unwrap_err();
    assert!(
        format!("{refused:#}").contains("no table T9"),
        "{refused:#}"
    );
    let rooms: i64 = sqlx::query_scalar("select count(*) from dining_rooms")
        .fetch_one(&db.pool)
        .await
        .unwrap();
    assert_eq!(rooms, 1);
}

/// Whether a free table or set seats `party` at hh:mm now, as the booking
/// page and the API say (`hf_bookable_times`).
async fn seats_at(db: &TestDb, party: i32, hh: u32, mm: u32) -> bool {
    let times = bookable(
        &db.pool,
        ROOM,
        at(hh, mm),
        at(hh, mm) + Duration::minutes(1),
        party,
    )
    .await
    .unwrap();
    times.first().is_some_and(|t| t.seats)
}

#[tokio::test]
async fn among_equal_tables_the_stay_that_leaves_no_unusable_gap_goes_first() {
    let db = TestDb::new().await;
    let spec = room(
        100,
        vec![table("T1", 1, 4, 100), table("T2", 1, 4, 100)],
        vec![],
    );
    set_up(&db, &spec).await;
    assert_eq!(book(&db, "seven", 4, 19, 0).await.unwrap(), ["T1"]);
    // a four at 22:00: beside the 19:00 booking (idle 21:00–22:00, the
    // least idle time, the plain smallest fit's choice) an hour is left
    // that no two-hour turn fits; the empty T2 still holds 18:00–20:00
    // and 20:00–22:00 before it. T2 it is
    assert_eq!(book(&db, "ten", 4, 22, 0).await.unwrap(), ["T2"]);
    assert_eq!(book(&db, "six", 4, 18, 0).await.unwrap(), ["T2"]);
    assert_eq!(book(&db, "eight", 4, 20, 0).await.unwrap(), ["T2"]);
    // T1 took 21:00 next (no gap after its booking), and is full till 23:00
    assert_eq!(book(&db, "nine", 4, 21, 0).await.unwrap(), ["T1"]);
    assert_eq!(book(&db, "half-nine", 2, 21, 30).await, None);
    assert_eq!(live_pins(&db).await, 5);
    assert_no_drift(&db.inventory()).await;
}

#[tokio::test]
async fn a_room_that_holds_tables_for_fuller_parties_refuses_what_wastes_a_third() {
    let db = TestDb::new().await;
    let mut spec = room(
        100,
        vec![
            table("T1", 1, 2, 100),
            table("T2", 1, 2, 100),
            table("T6", 4, 6, 100),
        ],
        vec![],
    );
    spec.least_fill = 66;
    set_up(&db, &spec).await;
    // a party of one fills half a two-top: refused, though it is free,
    // and the page offers no time for one
    assert!(!seats_at(&db, 1, 18, 0).await);
    assert_eq!(book(&db, "one", 1, 18, 0).await, None);
    // a couple at 19:15 would leave 18:00–19:15 on the table, shorter
    // than a turn: refused while the page says so too; at 18:45 (45
    // minutes lost: 120 of 165 minutes used) and at 20:00 (none) it sits
    assert!(!seats_at(&db, 2, 19, 15).await);
    assert_eq!(book(&db, "quarter-past-seven", 2, 19, 15).await, None);
    assert!(seats_at(&db, 2, 20, 0).await);
    assert_eq!(book(&db, "eight", 2, 20, 0).await.unwrap(), ["T1"]);
    assert_eq!(
        book(&db, "quarter-to-seven", 2, 18, 45).await.unwrap(),
        ["T2"]
    );
    // beside the 20:00 booking, 18:00 loses nothing: the smallest fit
    // still goes first, and the table is never booked twice
    assert_eq!(book(&db, "six", 2, 18, 0).await.unwrap(), ["T1"]);
    assert_eq!(book(&db, "six-again", 2, 18, 0).await, None);
    // four of six seats is two thirds: the six-top takes a four
    assert_eq!(book(&db, "four", 4, 18, 0).await.unwrap(), ["T6"]);
    // the same party of one in a room that holds nothing back sits
    sqlx::query("update dining_rooms set least_fill = 0 where collection = $1")
        .bind(ROOM)
        .execute(&db.pool)
        .await
        .unwrap();
    assert!(seats_at(&db, 1, 22, 0).await);
    assert_eq!(book(&db, "one-later", 1, 22, 0).await.unwrap(), ["T1"]);
    let (held, _) = held_and_sold(&db, &time_id(18, 0)).await;
    assert_eq!(held, 2 + 4, "a refusal holds no covers");
    let overlapping: i64 = sqlx::query_scalar(
        "select count(*) from table_pins a join table_pins b \
           on a.room = b.room and a.table_id = b.table_id and a.hold_id < b.hold_id \
          where a.live and b.live and a.during && b.during",
    )
    .fetch_one(&db.pool)
    .await
    .unwrap();
    assert_eq!(overlapping, 0);
    assert_no_drift(&db.inventory()).await;
}

async fn times_of(db: &TestDb, room: &str) -> i64 {
    sqlx::query_scalar("select count(*) from dining_times where room = $1")
        .bind(room)
        .fetch_one(&db.pool)
        .await
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn the_worker_publishes_the_days_that_come_into_each_rooms_window() {
    use holdfast::catalogue::tables::times::publish_window;
    use holdfast::worker::schedules::publish_dining_once;
    let db = TestDb::new().await;
    let zone = ShopZone::UTC;
    let now = Utc::now();
    let today = zone.today(now);
    // two rooms, two days ahead; the first is closed in four days
    let mut first = room(20, vec![table("T1", 1, 4, 100)], vec![]);
    first.days_ahead = 2;
    first.closed_days = vec![today + Duration::days(4)];
    let mut second = first.clone();
    second.id = "terrace".into();
    second.closed_days.clear();
    for spec in [&first, &second] {
        holdfast::catalogue::tables::save_room(&db.pool, spec)
            .await
            .unwrap();
    }
    // four workers at once: today and the two days after, every time once
    let passes = join_all((0..4).map(|_| publish_dining_once(&db.pool, zone))).await;
    let made: usize = passes.into_iter().map(|p| p.unwrap().unwrap_or(0)).sum();
    assert_eq!(made, 2 * 3 * 19);
    assert_eq!(publish_dining_once(&db.pool, zone).await.unwrap(), Some(0));
    // a time already published is never changed: the pacing changes, the
    // times of the window keep theirs
    first.pacing = 30;
    holdfast::catalogue::tables::save_room(&db.pool, &first)
        .await
        .unwrap();
    // a day passes: the third day after comes into the window
    let made = publish_window(&db.pool, zone, now + Duration::days(1))
        .await
        .unwrap();
    assert_eq!(made, 2 * 19);
    // another: the fourth is closed for the first room
    let made = publish_window(&db.pool, zone, now + Duration::days(2))
        .await
        .unwrap();
    assert_eq!(made, 19);
    assert_eq!(times_of(&db, ROOM).await, 4 * 19);
    assert_eq!(times_of(&db, "terrace").await, 5 * 19);
    let totals: Vec<(String, i32)> = sqlx::query_as(
        "select to_char(t.starts_at, 'YYYY-MM-DD'), min(r.total) from dining_times t \
           join resources r on r.id = t.resource_id \
          where t.room = $1 group by 1 order by 1",
    )
    .bind(ROOM)
    .fetch_all(&db.pool)
    .await
    .unwrap();
    let days: Vec<(String, i32)> = [(0, 20), (1, 20), (2, 20), (3, 30)]
        .into_iter()
        .map(|(d, total)| {
            (
                (today + Duration::days(d)).format("%Y-%m-%d").to_string(),
                total,
            )
        })
        .collect();
    assert_eq!(totals, days);
    // again, nothing new
    assert_eq!(
        publish_window(&db.pool, zone, now + Duration::days(2))
            .await
            .unwrap(),
        0
    );
    assert_no_drift(&db.inventory()).await;
}
