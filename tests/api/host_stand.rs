//! The host stand's evening (issue 46): walk-ins seated now on a free
//! table through the same pins and constraint as a booking, racing
//! shoppers for it; the floor's tables now and next; a booking found by
//! its code, name or phone; and an evening of 40 bookings over two
//! services and 10 walk-ins, seated, moved and marked no-show through the
//! stand, whose counts are the items' and whose tables are never
//! double-booked.

use chrono::{DateTime, NaiveDate, NaiveTime, Timelike, Utc};
use futures::future::join_all;
use holdfast::catalogue::tables::PeriodSpec;
use holdfast::catalogue::tables::times::publish_day;
use holdfast::catalogue::{Choice, ChoiceFields};
use holdfast::checkout::{self, CheckoutStart, Customer, StartOutcome, WantedLine};
use holdfast::clock::ShopZone;
use holdfast::inventory::IdempotencyKey;
use holdfast::payments::ProviderKind;
use holdfast_testkit::engine::{account, assert_no_drift};
use holdfast_testkit::*;
use serde_json::Value;

use crate::tables::{ROOM, at, booking, paid_start, room, set_up, table};

async fn count(db: &TestDb, sql: &str) -> i64 {
    sqlx::query_scalar(sql).fetch_one(&db.pool).await.unwrap()
}

/// Two live pins of one table that overlap: the constraint's promise.
const DOUBLE_BOOKED: &str = "select count(*) from table_pins a join table_pins b \
     on a.room = b.room and a.table_id = b.table_id and a.ctid < b.ctid \
    where a.live and b.live and a.during && b.during";

async fn walk_in(db: &TestDb, party: i32, set: Option<&str>, now: DateTime<Utc>) -> Value {
    sqlx::query_scalar("select hf_walk_in($1, $2, $3, 'Guest', 'host@example.com', $4, null)")
        .bind(ROOM)
        .bind(party)
        .bind(set)
        .bind(now)
        .fetch_one(&db.pool)
        .await
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_walk_in_and_a_hundred_shoppers_race_for_one_table_and_one_of_them_has_it() {
    let db = TestDb::new().await;
    set_up(&db, &room(1000, vec![table("T1", 1, 4, 100)], vec![])).await;
    // fifty shoppers book T1 at 19:00 while fifty walk-ins are seated at
    // it at 19:00, all at once
    let shoppers = join_all((0..50).map(|i| {
        let pool = db.pool.clone();
        async move {
            matches!(
                checkout::start_checkout(&pool, &booking(&format!("race-{i}"), 2, 19, 0))
                    .await
                    .unwrap(),
                StartOutcome::Started { .. }
            )
        }
    }));
    let walkers = join_all((0..50).map(|_| walk_in(&db, 2, Some("T1"), at(19, 0))));
    let (shoppers, walkers) = tokio::join!(shoppers, walkers);
    let booked = shoppers.iter().filter(|b| **b).count();
    let seated = walkers.iter().filter(|w| w["outcome"] == "seated").count();
    assert_eq!(booked + seated, 1, "one party has T1 at 19:00");
    assert!(
        walkers
            .iter()
            .all(|w| w["outcome"] == "seated" || w["outcome"] == "not_free"),
        "{walkers:?}"
    );
    assert_eq!(count(&db, DOUBLE_BOOKED).await, 0);
    assert_eq!(
        count(&db, "select count(*) from walk_ins").await,
        i64::try_from(seated).unwrap()
    );
    assert_no_drift(&db.inventory()).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_walk_in_form_sent_twenty_times_at_once_seats_its_party_once() {
    let db = TestDb::new().await;
    set_up(
        &db,
        &room(
            1000,
            vec![table("T1", 1, 4, 100), table("T2", 1, 4, 100)],
            vec![],
        ),
    )
    .await;
    // the same form (its own id, made when the page was drawn) sent again
    // and again, as a stand whose answers are lost in a failover retries
    let once = uuid::Uuid::new_v4();
    let answers = join_all((0..20).map(|_| {
        sqlx::query_scalar::<_, Value>(
            "select hf_walk_in($1, 2, null, 'Guest', 'host@example.com', $2, $3)",
        )
        .bind(ROOM)
        .bind(at(19, 0))
        .bind(once)
        .fetch_one(&db.pool)
    }))
    .await;
    let answers: Vec<Value> = answers.into_iter().map(Result::unwrap).collect();
    assert!(
        answers
            .iter()
            .all(|a| a["outcome"] == "seated" && a["id"] == once.to_string()),
        "{answers:?}"
    );
    assert_eq!(answers.iter().filter(|a| a["again"] == true).count(), 19);
    assert_eq!(count(&db, "select count(*) from walk_ins").await, 1);
    assert_eq!(
        count(
            &db,
            "select count(*) from table_pins where walk_in is not null"
        )
        .await,
        1,
        "one table claimed, the other still free"
    );
    assert_eq!(count(&db, DOUBLE_BOOKED).await, 0);
    // that id in another room's form (forged): nobody seated there
    let mut other = room(1000, vec![table("O1", 1, 4, 100)], vec![]);
    other.id = "other-room".into();
    holdfast::catalogue::tables::save_room(&db.pool, &other)
        .await
        .unwrap();
    let forged: Value = sqlx::query_scalar(
        "select hf_walk_in('other-room', 2, null, 'Guest', 'host@example.com', $1, $2)",
    )
    .bind(at(19, 0))
    .bind(once)
    .fetch_one(&db.pool)
    .await
    .unwrap();
    assert_eq!(forged["outcome"], "not_ours");
    assert_eq!(count(&db, "select count(*) from walk_ins").await, 1);
    assert_no_drift(&db.inventory()).await;
}

#[tokio::test]
async fn a_walk_in_takes_a_table_until_its_next_booking_and_frees_it_when_it_leaves() {
    let db = TestDb::new().await;
    set_up(
        &db,
        &room(
            1000,
            vec![
                table("T1", 1, 4, 100),
                table("T2", 1, 4, 110),
                table("T8", 5, 8, 100),
            ],
            vec![],
        ),
    )
    .await;
    // T1 is booked at 20:00; at 18:45 a walk-in of two is seated at T2,
    // free all evening, before T1, free only until 20:00
    let first = checkout::start_checkout(&db.pool, &booking("t1", 2, 20, 0))
        .await
        .unwrap();
    assert!(matches!(first, StartOutcome::Started { .. }));
    let best = walk_in(&db, 2, None, at(18, 45)).await;
    assert_eq!(best["outcome"], "seated");
    assert_eq!(best["tables"], serde_json::json!(["T2"]));
    // the party's turn, two hours
    let until: DateTime<Utc> = serde_json::from_value(best["until"].clone()).unwrap();
    assert_eq!(until, at(20, 45));
    // T1 asked for by name: seated until its booking at 20:00
    let named = walk_in(&db, 3, Some("T1"), at(18, 45)).await;
    assert_eq!(named["outcome"], "seated");
    let until: DateTime<Utc> = serde_json::from_value(named["until"].clone()).unwrap();
    assert_eq!(until, at(20, 0));
    // a shopper's party at 19:00 cannot have T1 or T2 under the walk-ins
    // (the free sets count a pin without a hold): T8 does not seat two,
    // so the shopper is told no table, nothing held
    assert!(matches!(
        checkout::start_checkout(&db.pool, &booking("over-walk-in", 2, 19, 0))
            .await
            .unwrap(),
        StartOutcome::NoTable { .. } | StartOutcome::SoldOut { .. }
    ));
    // taken now; too small; no such table; none left for four
    assert_eq!(
        walk_in(&db, 2, Some("T1"), at(19, 0)).await["outcome"],
        "not_free"
    );
    assert_eq!(
        walk_in(&db, 2, Some("T8"), at(19, 0)).await["outcome"],
        "does_not_fit"
    );
    assert_eq!(
        walk_in(&db, 2, Some("T99"), at(19, 0)).await["outcome"],
        "unknown_set"
    );
    assert_eq!(
        walk_in(&db, 4, None, at(19, 0)).await["outcome"],
        "none_free"
    );
    // a table booked within the half hour is not offered: at 19:40 T1 is
    // free (the walk-in leaves first) but its booking comes at 20:00
    let id: uuid::Uuid = serde_json::from_value(named["id"].clone()).unwrap();
    let left: String = sqlx::query_scalar("select hf_walk_in_left($1, $2, $3)")
        .bind(ROOM)
        .bind(id)
        .bind(at(19, 30))
        .fetch_one(&db.pool)
        .await
        .unwrap();
    assert_eq!(left, "left");
    let again: String = sqlx::query_scalar("select hf_walk_in_left($1, $2, $3)")
        .bind(ROOM)
        .bind(id)
        .bind(at(19, 35))
        .fetch_one(&db.pool)
        .await
        .unwrap();
    assert_eq!(again, "left_before");
    assert_eq!(
        walk_in(&db, 2, Some("T1"), at(19, 40)).await["outcome"],
        "not_free"
    );
    // the one who left holds nothing; T2's walk-in still holds T2
    assert_eq!(
        count(
            &db,
            "select count(*) from table_pins where walk_in is not null and live"
        )
        .await,
        1
    );
    // a party of none or of a thousand is refused in words, nothing made
    for party in [0, 1000] {
        let refused =
            sqlx::query("select hf_walk_in($1, $2, null, '', 'host@example.com', now(), null)")
                .bind(ROOM)
                .bind(party)
                .execute(&db.pool)
                .await
                .unwrap_err();
        assert!(
            refused.to_string().contains("a party is 1 to 100 guests"),
            "{refused}"
        );
    }
    assert_eq!(count(&db, "select count(*) from walk_ins").await, 2);
    assert_eq!(count(&db, DOUBLE_BOOKED).await, 0);
    assert_no_drift(&db.inventory()).await;
}

/// A zone whose clock now reads 15:xx, so that today's two services (17:00
/// and 20:00) are still ahead and the stand's today is their day.
fn zone_at_three_in_the_afternoon() -> ShopZone {
    let hour = i64::from(Utc::now().hour());
    let mut offset = (15 - hour).rem_euclid(24);
    if offset > 14 {
        offset -= 24;
    }
    // Etc/GMT's sign is POSIX's: Etc/GMT-3 is three hours ahead of UTC
    let name = match offset {
        0 => "Etc/GMT".to_owned(),
        o if o > 0 => format!("Etc/GMT-{o}"),
        o => format!("Etc/GMT+{}", -o),
    };
    ShopZone::parse(&name).unwrap()
}

/// A paid booking of `party` at `time` on the zone's today.
async fn paid(
    db: &TestDb,
    zone: ShopZone,
    today: NaiveDate,
    key: &str,
    party: i64,
    time: NaiveTime,
) -> checkout::Order {
    let starts = zone.at(today, time).unwrap();
    let choice = Choice::from_fields(ChoiceFields {
        party: Some(party),
        at: Some(starts),
        ..ChoiceFields::default()
    })
    .unwrap();
    let start = CheckoutStart {
        checkout_key: IdempotencyKey::parse(key).unwrap(),
        order_token: checkout::codes::order_token(),
        voucher: None,
        account: account(&format!("basket-{key}")),
        lines: vec![WantedLine {
            product_id: format!("{ROOM}-{}-{}", today.format("%Y%m%d"), time.format("%H%M")),
            choice,
        }],
        customer: Customer::parse(&format!("Guest {key}"), &format!("{key}@example.com")).unwrap(),
        provider: ProviderKind::Stripe,
        limits: Default::default(),
    };
    paid_start(db, key, &start).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn an_evening_of_forty_bookings_and_ten_walk_ins_is_counted_as_the_items_say() {
    let zone = zone_at_three_in_the_afternoon();
    let db = TestDb::new().await;
    let today = zone.today(Utc::now());
    // twenty tables for up to four, four for up to eight; two services
    let mut tables: Vec<_> = (1..=20)
        .map(|n| table(&format!("T{n}"), 1, 4, 100 + n))
        .collect();
    tables.extend((1..=4).map(|n| table(&format!("B{n}"), 5, 8, 100 + n)));
    let mut spec = room(1000, tables, vec![]);
    spec.book_until_minutes = 0;
    spec.periods = vec![
        PeriodSpec {
            name: "early".into(),
            opens: NaiveTime::from_hms_opt(17, 0, 0).unwrap(),
            last_seating: NaiveTime::from_hms_opt(17, 45, 0).unwrap(),
            deposit_minor: 1000,
            ..spec.periods[0].clone()
        },
        PeriodSpec {
            name: "late".into(),
            opens: NaiveTime::from_hms_opt(20, 0, 0).unwrap(),
            last_seating: NaiveTime::from_hms_opt(20, 45, 0).unwrap(),
            deposit_minor: 1000,
            ..spec.periods[0].clone()
        },
    ];
    holdfast::catalogue::tables::save_room(&db.pool, &spec)
        .await
        .unwrap();
    assert_eq!(publish_day(&db.pool, zone, ROOM, today).await.unwrap(), 8);
    // forty bookings: five a quarter hour, parties of 2 to 4 (one of 6 a
    // service), guests with phones
    let mut orders = Vec::new();
    for (n, hh) in (0..40).map(|n| (n, if n < 20 { 17 } else { 20 })) {
        let mm = 15 * ((n % 20) / 5);
        let party = if n % 20 == 0 { 6 } else { 2 + n % 3 };
        let order = paid(
            &db,
            zone,
            today,
            &format!("b{n}"),
            party,
            NaiveTime::from_hms_opt(hh, u32::try_from(mm).unwrap(), 0).unwrap(),
        )
        .await;
        orders.push(order);
    }
    sqlx::query("update orders set customer_phone = '+49 30 1234 ' || lpad(number_suffix, 4, '0') from (select id as oid, (row_number() over (order by created_at))::text as number_suffix from orders) x where x.oid = orders.id")
        .execute(&db.pool)
        .await
        .unwrap();
    let app = spawn_app_shaped(db, move |_, shop| shop.default_zone = zone).await;
    app.add_staff().await;
    let (staff, csrf) = app.staff_browser().await;
    let stand = format!("/admin/dining/{ROOM}");
    let said = |response: &reqwest::Response| {
        location(response)
            .split("said=")
            .nth(1)
            .unwrap_or_default()
            .split('#')
            .next()
            .unwrap_or_default()
            .to_owned()
    };
    let post = |path: String, form: Vec<(&'static str, String)>| {
        let (staff, csrf) = (staff.clone(), csrf.clone());
        let app = &app;
        async move {
            let mut fields: Vec<(&str, &str)> = vec![("csrf", csrf.as_str())];
            fields.extend(form.iter().map(|(k, v)| (*k, v.as_str())));
            app.admin_post(&staff, &format!("/admin/dining/{ROOM}/{path}"), &fields)
                .await
        }
    };
    // ten walk-ins at once ask for T1: one is seated there
    let race = join_all((0..10).map(|_| {
        post(
            "walk-in".into(),
            vec![
                ("party", "2".into()),
                ("name", "Race".into()),
                ("table", "T1".into()),
            ],
        )
    }))
    .await;
    let race: Vec<String> = race.iter().map(said).collect();
    assert_eq!(race.iter().filter(|s| *s == "walked_in").count(), 1);
    assert_eq!(
        race.iter().filter(|s| *s == "walk_in_not_free").count(),
        9,
        "{race:?}"
    );
    // nine more at once, each at the best free table: nine tables
    let more = join_all((0..9).map(|n| {
        post(
            "walk-in".into(),
            vec![
                ("party", (2 + n % 3).to_string()),
                ("name", String::new()),
                ("table", String::new()),
            ],
        )
    }))
    .await;
    assert!(more.iter().all(|r| said(r) == "walked_in"));
    // what a walk-in cannot be: no party, a party of a thousand, a table
    // that does not seat them, no token; nothing made
    for (party, table, words) in [
        ("", "", "walk_in_party"),
        ("abc", "", "walk_in_party"),
        ("1000", "", "walk_in_party"),
        ("2", "B1", "walk_in_too_small"),
        ("2", "T99", "walk_in_no_such_table"),
    ] {
        let refused = post(
            "walk-in".into(),
            vec![("party", party.into()), ("table", table.into())],
        )
        .await;
        assert_eq!(refused.status(), 303, "{party} {table}");
        assert_eq!(said(&refused), words, "{party} {table}");
    }
    let forged = app
        .admin_post(
            &staff,
            &format!("/admin/dining/{ROOM}/walk-in"),
            &[("party", "2")],
        )
        .await;
    assert_eq!(forged.status(), 403);
    assert_eq!(count(&app.db, "select count(*) from walk_ins").await, 10);
    assert_eq!(
        count(
            &app.db,
            "select count(distinct t) from walk_ins, unnest(tables) t"
        )
        .await,
        10
    );
    // the evening: thirty parties seated, five no-shows, five moved
    let holds: Vec<(uuid::Uuid, String)> = sqlx::query_as(
        "select b.hold_id, o.number from bookings b join orders o on o.id = b.order_id \
          order by b.starts_at, o.created_at",
    )
    .fetch_all(&app.db.pool)
    .await
    .unwrap();
    let date = today.format("%Y-%m-%d").to_string();
    let taps = join_all(holds.iter().take(30).map(|(hold, _)| {
        post(
            "seat".into(),
            vec![("hold", hold.to_string()), ("date", date.clone())],
        )
    }))
    .await;
    assert!(taps.iter().all(|r| said(r) == "seated"));
    for (hold, _) in &holds[30..35] {
        let marked = post(
            "no-show".into(),
            vec![("hold", hold.to_string()), ("date", date.clone())],
        )
        .await;
        assert_eq!(said(&marked), "no_show");
    }
    let mut moved = 0;
    for (hold, number) in &holds[35..40] {
        let page = app.admin_page(&staff, &stand).await;
        let row = page
            .split(&format!("data-booking=\"{number}\""))
            .nth(1)
            .unwrap();
        let row = &row[..row.find("</tr>").unwrap()];
        let to = row
            .split("<option>")
            .nth(1)
            .and_then(|o| o.split("</option>").next())
            .unwrap_or_else(|| panic!("{number} may move nowhere: {row}"));
        let answer = post(
            "move".into(),
            vec![
                ("hold", hold.to_string()),
                ("date", date.clone()),
                ("to", to.to_owned()),
            ],
        )
        .await;
        assert_eq!(said(&answer), "moved");
        moved += 1;
    }
    assert_eq!(moved, 5);
    // a no-show is not moved: its stay ended at the mark
    let no_show = post(
        "move".into(),
        vec![
            ("hold", holds[30].0.to_string()),
            ("date", date.clone()),
            ("to", "T20".into()),
        ],
    )
    .await;
    assert_eq!(said(&no_show), "not_standing");
    // three walk-ins leave
    let walked: Vec<uuid::Uuid> =
        sqlx::query_scalar("select id from walk_ins order by seated_at limit 3")
            .fetch_all(&app.db.pool)
            .await
            .unwrap();
    for id in &walked {
        let left = post("walk-in/left".into(), vec![("walk_in", id.to_string())]).await;
        assert_eq!(said(&left), "left");
    }
    // the day's counts are the items' and the walk-ins'
    let page = app.admin_page(&staff, &stand).await;
    let items = |sql: &'static str| count(&app.db, sql);
    let guests = items("select sum(party) from bookings").await;
    let seated = items("select count(*) from order_items where state = 'used'").await;
    let no_shows = items("select count(*) from bookings where no_show_at is not null").await;
    let walk_in_guests = items("select sum(party) from walk_ins").await;
    assert_eq!((seated, no_shows), (30, 5));
    let heading = format!(
        "40 bookings, {guests} guests: {seated} seated, {} expected, {no_shows} no-shows; \
         10 walk-ins, {walk_in_guests} guests",
        40 - seated - no_shows
    );
    assert!(page.contains(&heading), "{heading}\n{page}");
    // the floor: each table once; the walk-ins still here seated on theirs
    for n in 1..=20 {
        assert!(page.contains(&format!("data-table=\"T{n}\"")), "T{n}");
    }
    let seated_tiles = page.matches("class=\"tile seated\"").count();
    assert_eq!(seated_tiles, 7, "the seven walk-ins still here");
    // found by code, by name, by the phone's last digits
    let code: String = sqlx::query_scalar(
        "select i.code from order_items i join bookings b on b.hold_id = i.booking \
          join orders o on o.id = b.order_id where o.number = $1",
    )
    .bind(&holds[0].1)
    .fetch_one(&app.db.pool)
    .await
    .unwrap();
    for typed in [code.to_lowercase(), "Guest b7".into(), "1234 0012".into()] {
        let found = app
            .admin_page(&staff, &format!("{stand}?q={}", typed.replace(' ', "+")))
            .await;
        assert!(found.contains("Found for"), "{typed}: {found}");
        assert_eq!(found.matches("data-found=").count(), 1, "{typed}");
    }
    let nothing = app.admin_page(&staff, &format!("{stand}?q=%25")).await;
    assert!(nothing.contains("No booking from yesterday on matches"));
    assert_eq!(count(&app.db, DOUBLE_BOOKED).await, 0);
    assert_no_drift(&app.db.inventory()).await;
}
