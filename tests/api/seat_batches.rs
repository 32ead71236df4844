//! The checkouts' combiner at a seated section, through HTTP (docs/design.md,
//! "Reserved seating", `src/checkout/start_batches.rs`): checkouts of one
//! seated section that arrive together are sent as one call of
//! `hf_start_checkouts`, and each shopper still gets their own answer,
//! exactly as alone: seats granted together, seats taken with others
//! offered, sold out, over a limit. Every count is exact, read from the answers and the database.

use std::collections::HashSet;

use futures::future::join_all;
use holdfast::checkout::Checkouts;
use holdfast::limits::client::Fairness;
use holdfast::limits::{Limits, TrustedProxies};
use holdfast::staff::api_keys::Scope;
use serde_json::{Value, json};

use crate::seats::{api_checkout, books, hall_in};
use holdfast_testkit::*;

/// One shopper's line of the section, named `i`.
fn body(i: usize, email: &str, line: Value) -> Value {
    json!({
        "lines": [line],
        "name": "Ada Shopper",
        "email": email,
        "shopper_address": format!("10.1.{}.{}", i / 250, i % 250 + 1),
    })
}

/// Every body sent at once through the JSON API: each answer, in order.
async fn crowd(app: &TestApp, token: &str, bodies: Vec<Value>) -> Vec<(u16, Value)> {
    join_all(bodies.into_iter().enumerate().map(|(i, body)| async move {
        api_checkout(app, token, &format!("crowd-{i}"), body).await
    }))
    .await
}

/// The seats a 201 answer granted, as labels.
fn granted(body: &Value) -> Vec<String> {
    let sections = body["seats"]
        .as_array()
        .expect("a seat line says its seats");
    assert_eq!(sections.len(), 1, "{body}");
    assert_eq!(sections[0]["product_id"], "hall-stalls", "{body}");
    sections[0]["seats"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s.as_str().unwrap().to_owned())
        .collect()
}

/// Holds of the section whose live seats are not one stretch of a run
/// (next to each other, no aisle between).
async fn apart(app: &TestApp) -> i64 {
    sqlx::query_scalar(
        "select count(*) from (select p.hold_id from seat_pins p join seats s on s.id = p.seat_id \
                                where s.section = 'hall-stalls' and p.live group by p.hold_id \
                               having count(distinct s.run) <> 1 \
                                   or max(s.pos) - min(s.pos) <> count(*) - 1) x",
    )
    .fetch_one(&app.db.pool)
    .await
    .unwrap()
}

/// Seats with more than one live pin (the unique index says none can be).
async fn pinned_twice(app: &TestApp) -> i64 {
    sqlx::query_scalar(
        "select count(*) from (select seat_id from seat_pins where live \
                                group by seat_id having count(*) > 1) x",
    )
    .fetch_one(&app.db.pool)
    .await
    .unwrap()
}

/// The shop, and its checkouts (to count their combined calls).
pub(crate) async fn shop_counting_calls(limits: Option<Limits>) -> (TestApp, Checkouts) {
    let mut checkouts = None;
    let app = spawn_app_shaped(TestDb::new().await, |_, shop| {
        if let Some(limits) = limits {
            shop.fairness = Fairness::new(shop.pool.clone(), limits, TrustedProxies::default());
        }
        checkouts = Some(shop.checkouts.clone());
    })
    .await;
    (app, checkouts.expect("the shop was shaped"))
}

async fn seated_shop(app: &TestApp) -> String {
    app.add_staff().await;
    hall_in(&app.db.pool, 5).await;
    app.settled().await;
    crate::api_v1::key_with(app, &[Scope::StartCheckouts]).await
}

#[tokio::test]
async fn three_hundred_shoppers_for_a_hundred_seats_get_fifty_pairs_together_in_shared_calls() {
    let (app, checkouts) = shop_counting_calls(None).await;
    let token = seated_shop(&app).await;
    let together = json!({ "product_id": "hall-stalls", "qty": 2, "together": true });
    let bodies = (0..300)
        .map(|i| body(i, &format!("crowd{i}@example.com"), together.clone()))
        .collect();
    let answers = crowd(&app, &token, bodies).await;
    let mut seats: Vec<String> = Vec::new();
    let mut refused = 0;
    for (status, body) in &answers {
        match status {
            201 => seats.extend(granted(body)),
            409 => {
                assert_eq!(body["error"]["code"], "sold_out", "{body}");
                refused += 1;
            }
            _ => panic!("{status} {body}"),
        }
    }
    // 5 rows of two runs of 10: fifty pairs, every seat sold once
    assert_eq!((seats.len(), refused), (100, 250));
    assert_eq!(seats.iter().collect::<HashSet<_>>().len(), 100);
    assert_eq!((apart(&app).await, pinned_twice(&app).await), (0, 0));
    assert_eq!(books(&app.db).await, (100, 100, false));
    let calls = checkouts.calls().0;
    assert!(
        (1..50).contains(&calls),
        "fifty grants should have shared calls, took {calls}"
    );
}

#[tokio::test]
async fn named_seats_and_the_best_together_are_decided_in_one_call_each_as_alone() {
    let (app, checkouts) = shop_counting_calls(None).await;
    let token = seated_shop(&app).await;
    // forty ask for the best pair (rows A to D seat them exactly, nearest
    // the stage first); a hundred and sixty name one of row E's ten pairs
    let pair = |k: usize| [format!("E-{}", 2 * k + 1), format!("E-{}", 2 * k + 2)];
    // the j-th shopper naming seats (every fifth asks for the best) names
    // pair j mod 10: sixteen for each
    let named_pair = |i: usize| (i - i / 5 - 1) % 10;
    let bodies = (0..200)
        .map(|i| {
            let line = if i % 5 == 0 {
                json!({ "product_id": "hall-stalls", "qty": 2, "together": true })
            } else {
                json!({ "product_id": "hall-stalls", "seats": pair(named_pair(i)) })
            };
            body(i, &format!("mix{i}@example.com"), line)
        })
        .collect();
    let answers = crowd(&app, &token, bodies).await;
    let (mut best, mut named, mut taken, mut short) = (Vec::new(), [0; 10], 0, 0);
    for (i, (status, body)) in answers.iter().enumerate() {
        match (i % 5 == 0, status) {
            (true, 201) => best.extend(granted(body)),
            (false, 201) => {
                assert_eq!(granted(body), pair(named_pair(i)), "{body}");
                named[named_pair(i)] += 1;
            }
            (false, 409) if body["error"]["code"] == "seats_taken" => {
                // the pair named, both taken by its winner
                assert_eq!(
                    body["error"]["seats"]["seats"],
                    json!(pair(named_pair(i))),
                    "{body}"
                );
                taken += 1;
            }
            // the house full, the counters refuse before any seat is chosen
            (false, 409) if body["error"]["code"] == "sold_out" => short += 1,
            _ => panic!("{i}: {status} {body}"),
        }
    }
    assert_eq!(named, [1; 10], "each named pair sold once");
    assert_eq!(taken + short, 150);
    assert_eq!(best.len(), 80, "every best pair granted");
    assert!(
        best.iter().all(|s| !s.starts_with('E')),
        "the best pairs are nearest the stage: {best:?}"
    );
    assert_eq!(best.iter().collect::<HashSet<_>>().len(), 80);
    assert_eq!((apart(&app).await, pinned_twice(&app).await), (0, 0));
    assert_eq!(books(&app.db).await, (100, 100, false));
    let calls = checkouts.calls().0;
    assert!((1..200).contains(&calls), "took {calls} calls");
}

#[tokio::test]
async fn a_shopper_refused_by_the_limit_per_buyer_inside_a_call_gives_the_seats_back() {
    let (app, checkouts) = shop_counting_calls(Some(Limits {
        per_email: true,
        ..Limits::off()
    }))
    .await;
    let token = seated_shop(&app).await;
    // one buyer may hold 2 seats of the section at once
    sqlx::query("update products set max_per_order = 2 where id = 'hall-stalls'")
        .execute(&app.db.pool)
        .await
        .unwrap();
    app.settled().await;
    // forty-nine buyers and one more, two hundred times: fifty pairs
    // exactly, so a pair kept by a refused request would leave one of the
    // forty-nine without
    let together = json!({ "product_id": "hall-stalls", "qty": 2, "together": true });
    let bodies = (0..249)
        .map(|i| {
            let email = if i % 5 == 0 && i / 5 < 49 {
                format!("buyer{i}@example.com")
            } else {
                "again@example.com".to_owned()
            };
            body(i, &email, together.clone())
        })
        .collect::<Vec<_>>();
    let emails: Vec<String> = bodies
        .iter()
        .map(|b| b["email"].as_str().unwrap().to_owned())
        .collect();
    let answers = crowd(&app, &token, bodies).await;
    let (mut buyers, mut again, mut over, mut short) = (0, 0, 0, 0);
    for ((status, body), email) in answers.iter().zip(&emails) {
        match (email.as_str(), status) {
            ("again@example.com", 201) => again += 1,
            (_, 201) => buyers += 1,
            ("again@example.com", 409) if body["error"]["code"] == "over_limit" => over += 1,
            ("again@example.com", 409) if body["error"]["code"] == "sold_out" => short += 1,
            _ => panic!("{email}: {status} {body}"),
        }
    }
    assert_eq!(
        (buyers, again),
        (49, 1),
        "every buyer seated, the one again once"
    );
    assert_eq!(over + short, 199);
    assert!(over > 0, "some were refused by the limit");
    assert_eq!((apart(&app).await, pinned_twice(&app).await), (0, 0));
    assert_eq!(books(&app.db).await, (100, 100, false));
    // the one buyer holds one order of two
    let held: i64 = sqlx::query_scalar(
        "select coalesce(sum(l.qty), 0) from orders o join order_lines l on l.order_id = o.id \
          where o.customer_email = 'again@example.com'",
    )
    .fetch_one(&app.db.pool)
    .await
    .unwrap();
    assert_eq!(held, 2);
    let calls = checkouts.calls().0;
    assert!((1..249).contains(&calls), "took {calls} calls");
}

/// One call of `hf_start_checkouts` with these forms of the section (key,
/// seats named or `None` for the best 2 together): each one's word, order
/// and the seats it was refused for.
async fn one_call(
    db: &TestDb,
    forms: &[(&str, Option<&str>)],
) -> Vec<(String, Option<uuid::Uuid>, Option<Vec<String>>)> {
    let checkouts: Vec<Value> = forms
        .iter()
        .map(|(key, seats)| {
            json!({
                "key": key, "account": key, "token": key,
                "name": "Ada Shopper", "email": "ada@example.com",
                "currency": "eur", "provider": "stripe",
                "lines": [{
                    "product": "hall-stalls", "name": "Stalls", "qty": 2, "unit_price": 4000,
                    "resource": "hall-stalls", "claim": "seats", "together": true,
                    "seats": seats.map(|s| s.split(',').collect::<Vec<_>>()),
                }],
            })
        })
        .collect();
    sqlx::query_as(
        "select status, order_id, \
                case when detail ? 'seats' \
                     then array(select jsonb_array_elements_text(detail->'seats')) end \
           from hf_start_checkouts($1)",
    )
    .bind(Value::Array(checkouts))
    .fetch_all(&db.pool)
    .await
    .unwrap()
}

#[tokio::test]
async fn a_form_sent_twice_in_one_call_gets_its_firsts_answer_and_never_units_without_seats() {
    let db = TestDb::new().await;
    hall_in(&db.pool, 1).await;
    // are someone else's
    assert_eq!(
        one_call(&db, &[("other", Some("A-1,A-2"))]).await[0].0,
        "started"
    );
    // the same form twice, naming seats taken: refused twice, nothing held
    // (0180 held the second's units with no seat pinned)
    let twice = one_call(
        &db,
        &[("again", Some("A-1,A-2")), ("again", Some("A-1,A-2"))],
    )
    .await;
    assert_eq!(
        twice.iter().map(|t| t.0.as_str()).collect::<Vec<_>>(),
        ["seats_taken", "seats_taken"]
    );
    assert_eq!(twice[1].2, Some(vec!["A-1".to_owned(), "A-2".to_owned()]));
    assert_eq!(books(&db).await, (2, 2, false));
    // granted, the second is the same order, and one pair is pinned
    let twice = one_call(&db, &[("best", None), ("best", None)]).await;
    assert_eq!(
        (twice[0].0.as_str(), twice[1].0.as_str()),
        ("started", "already_started")
    );
    assert_eq!(twice[0].1, twice[1].1);
    assert_eq!(books(&db).await, (4, 4, false));
    let orders: i64 = sqlx::query_scalar("select count(*) from orders")
        .fetch_one(&db.pool)
        .await
        .unwrap();
    assert_eq!(orders, 2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn two_processes_choosing_seats_from_their_own_memory_sell_each_seat_once() {
    use holdfast::catalogue::Choice;
    use holdfast::catalogue::seats::choice::SeatPick;
    use holdfast::checkout::{CheckoutStart, Customer, WantedLine};
    use holdfast::inventory::IdempotencyKey;
    use holdfast::live::LiveStock;

    let db = TestDb::with_connections(30).await;
    hall_in(&db.pool, 5).await;
    // two shops' worth of checkouts, each with its own connections and its
    // own memory of the seats: neither hears of the other's pins before it
    // chooses again
    let mut both = Vec::new();
    for _ in 0..2 {
        let pool = sqlx::postgres::PgPoolOptions::new()
            .max_connections(15)
            .connect(&db.url)
            .await
            .unwrap();
        let live = LiveStock::start(pool.clone());
        assert!(live.refresh().await);
        both.push(Checkouts::remembering(pool, live));
    }
    let barrier = std::sync::Arc::new(tokio::sync::Barrier::new(300));
    let outcomes = join_all((0..300).map(|i| {
        let (checkouts, barrier) = (both[i % 2].clone(), barrier.clone());
        let start = CheckoutStart {
            checkout_key: IdempotencyKey::parse(&format!("two-{i}")).unwrap(),
            order_token: holdfast::checkout::codes::order_token(),
            voucher: None,
            account: account(&format!("basket:t{i}")),
            lines: vec![WantedLine {
                product_id: "hall-stalls".into(),
                choice: Choice::Seats {
                    pick: SeatPick::Best {
                        qty: qty(2),
                        together: true,
                    },
                },
            }],
            customer: Customer::parse("Ada Shopper", &format!("two{i}@example.com")).unwrap(),
            provider: holdfast::payments::ProviderKind::Stripe,
            limits: Default::default(),
        };
        tokio::spawn(async move {
            barrier.wait().await;
            checkouts.start(&start).await.unwrap()
        })
    }))
    .await;
    let mut words = std::collections::BTreeMap::<&str, usize>::new();
    for outcome in &outcomes {
        let outcome = outcome.as_ref().unwrap();
        *words.entry(outcome.word()).or_default() += 1;
        assert!(
            matches!(outcome.word(), "started" | "sold_out" | "not_together"),
            "{outcome:?}"
        );
    }
    let started = words.get("started").copied().unwrap_or(0);
    // each started order holds two seats next to each other, no seat is
    // held twice, and the counters are the pins
    let (held, pins, drift) = books(&db).await;
    assert_eq!(
        (held, pins),
        (2 * started as i32, 2 * started as i64),
        "{words:?}"
    );
    assert!(!drift);
    let apart: i64 = sqlx::query_scalar(
        "select count(*) from (select p.hold_id from seat_pins p join seats s on s.id = p.seat_id \
                                where p.live group by p.hold_id \
                               having count(distinct s.run) <> 1 \
                                   or max(s.pos) - min(s.pos) <> count(*) - 1) x",
    )
    .fetch_one(&db.pool)
    .await
    .unwrap();
    assert_eq!(apart, 0);
    // nobody was refused while two seats together were free: none are now
    // (seats were only taken)
    let pairs_left: i64 = sqlx::query_scalar(
        "select count(*) from seats a join seats b on b.section = a.section and b.run = a.run \
                                                    and b.pos = a.pos + 1 \
          where a.section = 'hall-stalls' \
            and not exists (select 1 from seat_pins p where p.seat_id = a.id and p.live) \
            and not exists (select 1 from seat_pins p where p.seat_id = b.id and p.live)",
    )
    .fetch_one(&db.pool)
    .await
    .unwrap();
    assert_eq!(pairs_left, 0, "{words:?}");
    assert!(started >= 45, "{words:?}");
    // both chose from their memory
    for checkouts in &both {
        assert!(checkouts.seats_chosen_ahead() > 0);
    }
}
