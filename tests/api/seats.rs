//! Reserved seating through the checkout (docs/design.md, "Reserved
//! seating"): a line of a seated section claims its units and pins its
//! seats in the checkout's one transaction (`hf_start_checkouts`, with its
//! units), the best together or seats by label, all or none; a
//! seat taken refuses the line and nothing is held. The section is made in
//! SQL (`hf_seat_plan`) until the catalogue loads plans; the database's
//! own rules are proved by bench/seats-db.

use futures::future::join_all;
use holdfast::catalogue::kinds::seats::choice::SeatReason;
use holdfast::catalogue::{Choice, ChoiceFields};
use holdfast::checkout::{self, CheckoutStart, Customer, StartOutcome, WantedLine};
use holdfast::inventory::IdempotencyKey;
use holdfast::staff::api_keys::Scope;
use serde_json::{Value, json};

use holdfast_testkit::*;

/// A hall with one section of `rows` rows of 20 seats (an aisle after 10),
/// sold at 40.00.
async fn hall(db: &TestDb, rows: i32) {
    hall_in(&db.pool, rows).await
}

pub(crate) async fn hall_in(pool: &sqlx::PgPool, rows: i32) {
    sqlx::raw_sql(
        "insert into collections (id, kind, title) values ('hall', 'event', 'The Hall'); \
         insert into seat_categories (collection, id, name, price_minor) \
              values ('hall', 'stalls', 'Stalls', 4000); \
         select hf_upsert_resource('hall-stalls', 0); \
         insert into products (id, resource_id, kind, name, price_minor, currency, collection) \
              values ('hall-stalls', 'hall-stalls', 'seat', 'Stalls', 4000, 'eur', 'hall'); \
         insert into seat_sections (product_id, resource_id, collection, category, name) \
              values ('hall-stalls', 'hall-stalls', 'hall', 'stalls', 'Stalls');",
    )
    .execute(pool)
    .await
    .unwrap();
    sqlx::query(
        "select hf_seat_plan('hall-stalls', (select jsonb_agg(jsonb_build_object( \
                 'row', chr(64 + r), 'rank', r, 'seats', jsonb_build_array(1, 20), \
                 'aisles_after', jsonb_build_array(10))) \
            from generate_series(1, $1) r))",
    )
    .bind(rows)
    .execute(pool)
    .await
    .unwrap();
}

fn start(key: &str, fields: ChoiceFields) -> CheckoutStart {
    start_for(key, "hall-stalls", fields)
}

/// Another shopper holds these seats of `section` (a started checkout):
/// they are taken.
pub(crate) async fn take(pool: &sqlx::PgPool, key: &str, section: &str, seats: &[&str]) {
    let outcome = checkout::start_checkout(pool, &start_for(key, section, named(seats)))
        .await
        .unwrap();
    assert!(
        matches!(outcome, StartOutcome::Started { .. }),
        "{outcome:?}"
    );
}

fn start_for(key: &str, product: &str, fields: ChoiceFields) -> CheckoutStart {
    CheckoutStart {
        checkout_key: IdempotencyKey::parse(key).unwrap(),
        order_token: holdfast::checkout::codes::order_token(),
        voucher: None,
        account: account(&format!("basket:{key}")),
        lines: vec![WantedLine {
            product_id: product.into(),
            choice: Choice::from_fields(fields).unwrap(),
        }],
        customer: Customer::parse("Ada Shopper", "ada@example.com").unwrap(),
        provider: holdfast::payments::ProviderKind::Stripe,
        limits: Default::default(),
    }
}

fn best(qty: i64) -> ChoiceFields {
    ChoiceFields {
        qty: Some(qty),
        together: Some(true),
        ..ChoiceFields::default()
    }
}

fn named(seats: &[&str]) -> ChoiceFields {
    ChoiceFields {
        seats: Some(seats.iter().map(|s| (*s).to_owned()).collect()),
        ..ChoiceFields::default()
    }
}

/// The section's held units, its live pins, and whether hf_check sees drift.
pub(crate) async fn books(db: &TestDb) -> (i32, i64, bool) {
    sqlx::query_as(
        "select r.held, \
                (select count(*) from seat_pins p join seats s on s.id = p.seat_id \
                  where s.section = 'hall-stalls' and p.live), \
                (select bool_or(drift) from hf_check('hall-stalls')) \
           from resources r where r.id = 'hall-stalls'",
    )
    .fetch_one(&db.pool)
    .await
    .unwrap()
}

#[tokio::test]
async fn a_seat_line_holds_the_best_seats_together_or_the_named_ones_all_or_none() {
    let db = TestDb::new().await;
    hall(&db, 1).await;
    let StartOutcome::Started { order, .. } =
        checkout::start_checkout(&db.pool, &start("k1", best(2)))
            .await
            .unwrap()
    else {
        panic!("best 2 together: started");
    };
    let line: String = sqlx::query_scalar("select name from order_lines where order_id = $1")
        .bind(order.id)
        .fetch_one(&db.pool)
        .await
        .unwrap();
    // row A is A-1..A-10, an aisle, A-11..A-20: the pair by the aisle is
    // the middle of the house, and leaves no seat alone
    assert_eq!(line, "The Hall — Stalls — A-9, A-10");
    assert_eq!(books(&db).await, (2, 2, false));

    // A-10 is taken: the line is refused naming it, the nearest pair
    // together offered, and nothing is held or ordered
    let outcome = checkout::start_checkout(&db.pool, &start("k2", named(&["A-10", "A-11"])))
        .await
        .unwrap();
    let StartOutcome::SeatsRefused { refusal } = outcome else {
        panic!("A-10 taken: {outcome:?}");
    };
    assert_eq!(refusal.reason, SeatReason::SeatsTaken);
    assert_eq!(refusal.seats, ["A-10"]);
    assert_eq!(refusal.words(), "A-10 was just taken.");
    assert_eq!(refusal.offers[0], ["A-11", "A-12"], "{refusal:?}");
    let orders: i64 = sqlx::query_scalar("select count(*) from orders where checkout_key = 'k2'")
        .fetch_one(&db.pool)
        .await
        .unwrap();
    assert_eq!(orders, 0);
    assert_eq!(books(&db).await, (2, 2, false));

    // free seats by label, as many as named
    let StartOutcome::Started { order, .. } =
        checkout::start_checkout(&db.pool, &start("k3", named(&["A-8", "A-6", "A-7"])))
            .await
            .unwrap()
    else {
        panic!("A-6..A-8 started");
    };
    assert_eq!(order.amount_minor, 3 * 4000);
    let line: String = sqlx::query_scalar("select name from order_lines where order_id = $1")
        .bind(order.id)
        .fetch_one(&db.pool)
        .await
        .unwrap();
    assert_eq!(line, "The Hall — Stalls — A-6, A-7, A-8");
    assert_eq!(books(&db).await, (5, 5, false));
}

#[tokio::test]
async fn two_hundred_shoppers_for_a_hundred_seats_get_fifty_pairs_together_and_no_seat_twice() {
    let db = TestDb::with_connections(40).await;
    hall(&db, 5).await;
    let outcomes = join_all((0..200).map(|i| {
        let pool = db.pool.clone();
        async move {
            checkout::start_checkout(&pool, &start(&format!("crowd-{i}"), best(2)))
                .await
                .unwrap()
        }
    }))
    .await;
    let started = outcomes
        .iter()
        .filter(|o| matches!(o, StartOutcome::Started { .. }))
        .count();
    let refused = outcomes
        .iter()
        .filter(|o| matches!(o, StartOutcome::SoldOut { .. }))
        .count();
    assert_eq!((started, refused), (50, 150));
    assert_eq!(books(&db).await, (100, 100, false));
    // every pair is two seats next to each other in one run
    let apart: i64 = sqlx::query_scalar(
        "select count(*) from (select p.hold_id from seat_pins p join seats s on s.id = p.seat_id \
                                where s.section = 'hall-stalls' and p.live group by p.hold_id \
                               having count(distinct s.run) <> 1 or max(s.pos) - min(s.pos) <> 1) x",
    )
    .fetch_one(&db.pool)
    .await
    .unwrap();
    assert_eq!(apart, 0);
}

/// A checkout through the JSON API: its status and answer.
pub(crate) async fn api_checkout(
    app: &TestApp,
    token: &str,
    idem: &str,
    body: Value,
) -> (u16, Value) {
    let response = holdfast::payments::http::client(std::time::Duration::from_secs(60))
        .post(format!("{}/api/v1/checkouts", app.address))
        .bearer_auth(token)
        .header("idempotency-key", idem)
        .json(&body)
        .send()
        .await
        .unwrap();
    let status = response.status().as_u16();
    (status, response.json().await.unwrap_or(Value::Null))
}

#[tokio::test]
async fn three_hundred_shoppers_race_for_twenty_named_seats_each_sold_once_and_losers_told_why() {
    let (app, checkouts) = crate::seat_batches::shop_counting_calls(None).await;
    app.add_staff().await;
    hall_in(&app.db.pool, 5).await;
    app.settled().await;
    let token = crate::api_v1::key_with(&app, &[Scope::StartCheckouts]).await;
    // row C's first 20 seats as ten pairs: thirty shoppers name each pair
    let pair = |k: usize| [format!("C-{}", 2 * k + 1), format!("C-{}", 2 * k + 2)];
    let answers = join_all((0..300).map(|i| {
        let (app, token) = (&app, &token);
        let body = json!({
            "lines": [{ "product_id": "hall-stalls", "seats": pair(i % 10) }],
            "name": "Ada Shopper",
            "email": format!("seat{i}@example.com"),
            "shopper_address": format!("10.0.{}.{}", i / 250, i % 250 + 1),
        });
        async move {
            (
                i,
                api_checkout(app, token, &format!("seat-{i}"), body).await,
            )
        }
    }))
    .await;
    let mut won = [0; 10];
    let mut refused = 0;
    for (i, (status, body)) in &answers {
        match status {
            201 => won[i % 10] += 1,
            409 => {
                let error = &body["error"];
                assert_eq!(error["code"], "seats_taken", "{body}");
                // the pair named, both taken by its winner, and others offered
                let taken: Vec<&str> = error["seats"]["seats"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .map(|s| s.as_str().unwrap())
                    .collect();
                assert_eq!(taken, pair(i % 10), "{body}");
                let message = error["message"].as_str().unwrap();
                assert!(message.contains(" were just taken."), "{message}");
                let offers = error["seats"]["offers"].as_array().unwrap();
                assert!(!offers.is_empty(), "{body}");
                for offer in offers {
                    let offer = offer.as_array().unwrap();
                    assert_eq!(offer.len(), 2, "as many as asked for: {body}");
                    assert!(!offer.iter().any(|s| taken.contains(&s.as_str().unwrap())));
                }
                refused += 1;
            }
            _ => panic!("{status} {body}"),
        }
    }
    assert_eq!(won, [1; 10], "each pair sold once");
    assert_eq!(refused, 290);
    let twice: i64 = sqlx::query_scalar(
        "select count(*) from (select seat_id from seat_pins where live \
                                group by seat_id having count(*) > 1) x",
    )
    .fetch_one(&app.db.pool)
    .await
    .unwrap();
    assert_eq!(twice, 0);
    assert_eq!(books(&app.db).await, (20, 20, false));
    // they went through the seats' combiner: requests for the section
    // arriving together shared calls of hf_start_checkouts
    let calls = checkouts.calls().0;
    assert!((1..300).contains(&calls), "took {calls} calls");
}

#[tokio::test]
async fn the_demo_seats_a_hall_from_its_compact_plan_and_a_bad_plan_writes_nothing() {
    let db = TestDb::new().await;
    db.load_demo().await;
    // the stalls: 5 rows of 14, two blocked (a camera position); the
    // balcony: 2 rows of 10, one blocked; standing beside them
    let sections: Vec<(String, i32, i64, i64, i64)> = sqlx::query_as(
        "select x.product_id, r.total, \
                (select count(*) from seats s where s.section = x.product_id), \
                (select count(*) from seats s where s.section = x.product_id \
                    and s.state = 'blocked'), \
                (select count(*) from seats s where s.section = x.product_id \
                    and s.access <> 'none') \
           from seat_sections x join resources r on r.id = x.resource_id \
          where x.collection = 'winter-gala' order by x.position",
    )
    .fetch_all(&db.pool)
    .await
    .unwrap();
    assert_eq!(
        sections,
        [
            ("winter-gala-stalls".into(), 68, 70, 2, 4),
            ("winter-gala-balcony".into(), 19, 20, 1, 0),
        ]
    );
    let standing: (String, i32) = sqlx::query_as(
        "select p.kind::text, r.total from products p join resources r on r.id = p.resource_id \
          where p.id = 'winter-gala-standing'",
    )
    .fetch_one(&db.pool)
    .await
    .unwrap();
    assert_eq!(standing, ("ticket".into(), 40));
    // the aisle after 7 ends a run; D-7 is off sale
    let (runs, d7): (i64, String) = sqlx::query_as(
        "select (select count(distinct run) from seats where section = 'winter-gala-stalls' \
                    and row_label = 'C'), \
                (select state from seats where section = 'winter-gala-stalls' and label = 'D-7')",
    )
    .fetch_one(&db.pool)
    .await
    .unwrap();
    assert_eq!((runs, d7.as_str()), (2, "blocked"));
    assert_eq!(books_of(&db, "winter-gala-stalls").await, (0, 0, false));

    // loaded again: the same seats
    db.load_demo().await;
    let seats: i64 = sqlx::query_scalar("select count(*) from seats")
        .fetch_one(&db.pool)
        .await
        .unwrap();
    assert_eq!(seats, 90);

    // a plan that names a category the event lacks is refused, naming it,
    // and nothing of the file is written
    let fresh = TestDb::new().await;
    let mut file: holdfast::catalogue::CatalogueFile =
        serde_json::from_str(include_str!("../../fixtures/catalogue.json")).unwrap();
    let seating = file.events[1].seating.as_mut().unwrap();
    seating.sections[1].category = "boxes".into();
    let error = format!("{:#}", file.load(&fresh.pool).await.unwrap_err());
    assert!(
        error.contains("section \"winter-gala-balcony\": category \"boxes\" is not one of"),
        "{error}"
    );
    let products: i64 = sqlx::query_scalar("select count(*) from products")
        .fetch_one(&fresh.pool)
        .await
        .unwrap();
    assert_eq!(products, 0);
}

/// A section's held units, its live pins, and whether hf_check sees drift.
async fn books_of(db: &TestDb, section: &str) -> (i32, i64, bool) {
    sqlx::query_as(
        "select r.held, \
                (select count(*) from seat_pins p join seats s on s.id = p.seat_id \
                  where s.section = $1 and p.live), \
                (select bool_or(drift) from hf_check(r.id)) \
           from seat_sections x join resources r on r.id = x.resource_id where x.product_id = $1",
    )
    .bind(section)
    .fetch_one(&db.pool)
    .await
    .unwrap()
}

#[tokio::test]
async fn each_ticket_names_its_seat_on_the_order_page_in_the_calendar_and_at_the_door() {
    let app = spawn_app().await;
    app.load_demo().await;
    app.settled().await;
    let paid = app
        .buy(&browser(), &Purchase::of("winter-gala-stalls", 2))
        .await;
    let order = paid.started.order_id;
    let mut codes: Vec<(String, String)> = Vec::new();
    for _ in 0..200 {
        codes = sqlx::query_as(
            "select c.code, s.label from order_items c join seats s on s.id = c.seat_id \
              where c.order_id = $1 order by s.row_rank, s.run, s.pos",
        )
        .bind(order)
        .fetch_all(&app.db.pool)
        .await
        .unwrap();
        if codes.len() == 2 {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    assert_eq!(codes.len(), 2, "two tickets, each with its seat");
    let (first, second) = (&codes[0].1, &codes[1].1);
    // the order's line names both; each ticket its own
    let items = holdfast::items::of_order(&app.db.pool, order)
        .await
        .unwrap();
    let labels: Vec<String> = items.iter().map(|item| item.what()).collect();
    assert_eq!(
        labels,
        [
            format!("Winter Gala — the Chamber Orchestra — Stalls, seat {first}"),
            format!("Winter Gala — the Chamber Orchestra — Stalls, seat {second}"),
        ]
    );
    let page = browser()
        .get(format!("{}/orders/{}", app.address, paid.started.token))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(page.contains(&format!("Stalls, seat {first}")), "{page}");
    assert!(page.contains(&format!("Stalls, seat {second}")), "{page}");
    let ics = browser()
        .get(format!(
            "{}/orders/{}/calendar.ics",
            app.address, paid.started.token
        ))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    // the calendar's summary names the seats (a comma escaped, RFC 5545)
    assert!(
        ics.contains(&format!(
            "SUMMARY:Winter Gala — the Chamber Orchestra — Stalls — {first}\\, {second}"
        )),
        "{ics}"
    );
    // the attendees' export says each ticket's seat
    app.add_staff().await;
    let (staff, _) = app.staff_browser().await;
    let csv = app.admin_page(&staff, "/admin/exports/attendees.csv").await;
    for seat in [first, second] {
        assert!(csv.contains(&format!("Stalls, seat {seat}")), "{csv}");
    }
    // the door says the seat, so the guest is sent to it
    let (outcome, what, tier): (String, String, String) = sqlx::query_as(
        "select outcome, what, for_tier from hf_redeem($1, 'door@example.com', 'main door')",
    )
    .bind(&codes[0].0)
    .fetch_one(&app.db.pool)
    .await
    .unwrap();
    assert_eq!(outcome, "redeemed");
    assert_eq!(what, format!("Stalls, seat {first}"));
    assert_eq!(tier, format!("Stalls, seat {first}"));
}

#[tokio::test]
async fn the_api_lists_a_sections_seats_with_their_state() {
    let app = spawn_app().await;
    app.load_demo().await;
    app.add_staff().await;
    take(&app.db.pool, "held", "winter-gala-stalls", &["C-1", "C-2"]).await;
    let token = crate::api_v1::key_with(&app, &[Scope::ReadCatalogue]).await;
    let get = |path: String| {
        let token = token.clone();
        async move {
            let response = holdfast::payments::http::client(std::time::Duration::from_secs(30))
                .get(path)
                .bearer_auth(token)
                .send()
                .await
                .unwrap();
            let status = response.status().as_u16();
            (
                status,
                response.json::<Value>().await.unwrap_or(Value::Null),
            )
        }
    };
    let (status, body) = get(format!(
        "{}/api/v1/products/winter-gala-stalls/seats",
        app.address
    ))
    .await;
    assert_eq!(status, 200, "{body}");
    let seats = body["seats"].as_array().unwrap();
    assert_eq!(seats.len(), 70);
    let seat = |label: &str| seats.iter().find(|s| s["label"] == label).unwrap().clone();
    assert_eq!(
        seat("A-1"),
        json!({ "id": seat("A-1")["id"], "label": "A-1", "section": "Stalls", "row": "A",
                "number": 1, "category": "stalls", "price_minor": 4500,
                "accessible": "wheelchair", "state": "free" })
    );
    assert_eq!(seat("C-1")["state"], "taken");
    assert_eq!(seat("D-7")["state"], "blocked");
    let counts = |state: &str| seats.iter().filter(|s| s["state"] == state).count();
    assert_eq!(
        (counts("free"), counts("taken"), counts("blocked")),
        (66, 2, 2)
    );
    // a product that is not a seated section
    let (status, body) = get(format!(
        "{}/api/v1/products/winter-gala-standing/seats",
        app.address
    ))
    .await;
    assert_eq!(
        (status, body["error"]["code"].as_str()),
        (404, Some("not_found"))
    );
}
