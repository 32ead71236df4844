//! Checkouts combined per resource: `hf_start_checkouts` and
//! `hf_attach_payments` on their own, the shop's `Checkouts` under real
//! concurrency, two processes' worth of them against one tier, and a server
//! killed with batches in flight.

use std::time::Duration;

use futures::future::join_all;
use holdfast::checkout::{
    self, AttachOutcome, CheckoutStart, Checkouts, Customer, Order, Release, StartOutcome,
    WantedLine,
};
use holdfast::inventory::IdempotencyKey;
use uuid::Uuid;

use holdfast_testkit::*;

fn form(key: &str, basket: &str, product: &str, n: i64) -> CheckoutStart {
    CheckoutStart {
        checkout_key: IdempotencyKey::parse(key).unwrap(),
        // a new submit: its own token
        order_token: holdfast::checkout::codes::order_token(),
        voucher: None,
        account: account(&format!("basket:{basket}")),
        lines: vec![WantedLine::units(product.to_owned(), qty(n))],
        customer: Customer::parse("Ada Shopper", "ada@example.com").unwrap(),
        provider: holdfast::payments::ProviderKind::Stripe,
        limits: Default::default(),
    }
}

fn session(order: &Order) -> holdfast::payments::PaymentPage {
    holdfast::payments::PaymentPage {
        id: format!("cs_test_{}", order.id.simple()),
        url: format!("http://sandbox/pay/{}", order.id.simple()),
        expires_at: chrono::Utc::now() + chrono::Duration::minutes(30),
    }
}

/// The SQLSTATE of a refused call.
fn code(error: &sqlx::Error) -> Option<String> {
    error.as_database_error()?.code().map(|c| c.into_owned())
}

/// One row of `hf_start_checkouts` as the tests read it: its word, its
/// order, its purchase, and what was left for a line it refused.
type StartRow = (String, Option<Uuid>, Option<Uuid>, Option<i32>);

/// One checkout of `qty` of one product, as `hf_start_checkouts` takes it.
fn one(key: &str, product: &str, qty: i32) -> serde_json::Value {
    serde_json::json!({
        "key": key,
        "account": format!("basket:{key}"),
        "token": Uuid::new_v4().simple().to_string(),
        "name": "Ada Shopper",
        "email": "ada@example.com",
        "currency": "eur",
        "provider": "stripe",
        // no limits here: tests of the limits use the shop
        "lines": [{
            "product": product,
            "name": "Harbour Lights — VIP",
            "qty": qty,
            "unit_price": 9000,
            "resource": product,
            "claim": "units",
        }],
    })
}

/// Call `hf_start_checkouts` for `(key, qty)` pairs of one product, as one
/// batch, each key its own basket.
async fn start_batch(
    db: &TestDb,
    product: &str,
    batch: &[(&str, i32)],
) -> Result<Vec<StartRow>, sqlx::Error> {
    let checkouts: Vec<serde_json::Value> = batch
        .iter()
        .map(|(key, qty)| one(key, product, *qty))
        .collect();
    sqlx::query_as(
        "select status, order_id, hold_id, (detail->'lines'->0->>'available')::int \
           from hf_start_checkouts($1)",
    )
    .bind(serde_json::Value::Array(checkouts))
    .fetch_all(&db.pool)
    .await
}

/// Orders, order lines, holds and held units of `resource`, and how many
/// orders do not match their hold and line exactly.
async fn books(db: &TestDb, resource: &str) -> (i64, i64, i64, i32, i64) {
    sqlx::query_as(
        "select (select count(*) from orders o join holds h on h.id = o.hold_id \
                  where h.resource_id = $1), \
                (select count(*) from order_lines l join products p on p.id = l.product_id \
                  where p.resource_id = $1), \
                (select count(*) from holds where resource_id = $1), \
                (select held + sold from resources where id = $1), \
                (select count(*) from orders o \
                   join holds h on h.id = o.hold_id \
                   join order_lines l on l.order_id = o.id \
                  where h.resource_id = $1 \
                    and (h.qty <> l.qty or o.amount_minor <> l.qty * l.unit_price_minor \
                         or h.idempotency_key <> o.checkout_key \
                         or h.account_id not like 'basket:%'))",
    )
    .bind(resource)
    .fetch_one(&db.pool)
    .await
    .unwrap()
}

#[tokio::test]
async fn a_batch_of_mixed_quantities_that_runs_out_halfway_orders_the_first_and_refuses_the_rest() {
    let db = TestDb::new().await;
    db.load_demo().await;
    resource(&db.inventory(), "harbour-lights-vip", 6).await;
    let rows = start_batch(
        &db,
        "harbour-lights-vip",
        &[("k1", 3), ("k2", 1), ("k3", 2), ("k4", 5), ("k5", 1)],
    )
    .await
    .unwrap();
    let statuses: Vec<(&str, Option<i32>)> = rows.iter().map(|r| (r.0.as_str(), r.3)).collect();
    assert_eq!(
        statuses,
        [
            ("started", None),
            ("started", None),
            ("started", None),
            ("sold_out", Some(0)),
            ("sold_out", Some(0)),
        ]
    );
    assert!(rows[..3].iter().all(|r| r.1.is_some() && r.2.is_some()));
    assert!(rows[3..].iter().all(|r| r.1.is_none() && r.2.is_none()));
    // three orders, each with its line and its own hold, six units held
    assert_eq!(books(&db, "harbour-lights-vip").await, (3, 3, 3, 6, 0));
    let events: i64 = sqlx::query_scalar("select count(*) from hold_events where kind = 'held'")
        .fetch_one(&db.pool)
        .await
        .unwrap();
    assert_eq!(events, 3);
    assert_no_drift(&db.inventory()).await;
}

#[tokio::test]
async fn a_checkout_key_repeated_in_a_batch_or_used_before_is_one_order() {
    let db = TestDb::new().await;
    db.load_demo().await;
    let rows = start_batch(
        &db,
        "harbour-lights-vip",
        &[("twice", 2), ("other", 1), ("twice", 2)],
    )
    .await
    .unwrap();
    assert_eq!(rows[0].0, "started");
    assert_eq!(rows[1].0, "started");
    assert_eq!(rows[2].0, "already_started");
    assert_eq!(rows[2].1, rows[0].1, "the first submit's order");
    // a later call with a used key and a new one
    let again = start_batch(&db, "harbour-lights-vip", &[("other", 1), ("third", 1)])
        .await
        .unwrap();
    assert_eq!(
        (again[0].0.as_str(), again[0].1),
        ("already_started", rows[1].1)
    );
    assert_eq!(again[1].0, "started");
    assert_eq!(books(&db, "harbour-lights-vip").await, (3, 3, 3, 4, 0));

    // a double click whose first request is refused: both say so
    resource(&db.inventory(), "harbour-lights-vip", 6).await;
    let refused = start_batch(&db, "harbour-lights-vip", &[("dup", 5), ("dup", 5)])
        .await
        .unwrap();
    let answers: Vec<(&str, Option<Uuid>, Option<i32>)> =
        refused.iter().map(|r| (r.0.as_str(), r.1, r.3)).collect();
    assert_eq!(
        answers,
        [("sold_out", None, Some(2)), ("sold_out", None, Some(2))]
    );
    assert_eq!(books(&db, "harbour-lights-vip").await, (3, 3, 3, 4, 0));
}

/// Orders, holds and held units of the VIP tier.
async fn written(db: &TestDb) -> (i64, i64, i32) {
    sqlx::query_as(
        "select (select count(*) from orders), (select count(*) from holds), \
                (select held from resources where id = 'harbour-lights-vip')",
    )
    .fetch_one(&db.pool)
    .await
    .unwrap()
}

#[tokio::test]
async fn a_malformed_batch_is_refused_whole_and_writes_nothing() {
    let db = TestDb::new().await;
    db.load_demo().await;
    // a checkout without its account
    let mut no_account = one("a", "harbour-lights-vip", 1);
    no_account.as_object_mut().unwrap().remove("account");
    let error = sqlx::query("select * from hf_start_checkouts($1)")
        .bind(serde_json::json!([
            one("b", "harbour-lights-vip", 1),
            no_account
        ]))
        .execute(&db.pool)
        .await
        .unwrap_err();
    assert_eq!(code(&error).as_deref(), Some("22023"));
    // an account the engine refuses, beside a fine one: the whole batch
    // is refused
    let error = start_batch(
        &db,
        "harbour-lights-vip",
        &[("fine", 1), (&"k".repeat(250), 1)],
    )
    .await
    .unwrap_err();
    assert_eq!(code(&error).as_deref(), Some("22023"));
    let (orders, holds, held) = written(&db).await;
    assert_eq!((orders, holds, held), (0, 0, 0));
    // a key already holding units outside any order is not a checkout's:
    // that checkout is refused, the rest of the batch goes on
    sqlx::query("select hf_hold('harbour-lights-vip', 1, 'basket:stray', 'stray')")
        .execute(&db.pool)
        .await
        .unwrap();
    let rows = start_batch(&db, "harbour-lights-vip", &[("fine", 1), ("stray", 1)])
        .await
        .unwrap();
    assert_eq!(
        (rows[0].0.as_str(), rows[1].0.as_str(), rows[1].1),
        ("started", "key_in_use", None)
    );
    let (orders, holds, held) = written(&db).await;
    assert_eq!(
        (orders, holds, held),
        (1, 2, 2),
        "the fine one and the stray hold"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn three_hundred_combined_checkouts_for_forty_places_start_forty_orders_and_pay_them() {
    let db = TestDb::with_connections(40).await;
    db.load_demo().await;
    resource(&db.inventory(), "harbour-lights-vip", 40).await;
    let checkouts = Checkouts::new(db.pool.clone());
    let barrier = std::sync::Arc::new(tokio::sync::Barrier::new(300));
    let outcomes = join_all((0..300).map(|i| {
        let (checkouts, barrier) = (checkouts.clone(), barrier.clone());
        tokio::spawn(async move {
            let start = form(
                &format!("flash-{i}"),
                &format!("b{i}"),
                "harbour-lights-vip",
                1,
            );
            barrier.wait().await;
            checkouts.start(&start).await.unwrap()
        })
    }))
    .await;
    let mut started = Vec::new();
    let mut refused = 0;
    for outcome in outcomes {
        match outcome.unwrap() {
            StartOutcome::Started {
                order,
                lines,
                resource,
            } => {
                assert_eq!(resource.as_deref(), Some("harbour-lights-vip"));
                assert_eq!((lines.len(), lines[0].qty), (1, 1));
                assert_eq!(
                    (order.state.as_str(), order.amount_minor),
                    ("pending", 9000)
                );
                started.push((order, resource));
            }
            StartOutcome::SoldOut { lines } => {
                assert_eq!(lines[0].available, 0);
                refused += 1;
            }
            other => panic!("unexpected {other:?}"),
        }
    }
    assert_eq!((started.len(), refused), (40, 260));
    let (start_calls, _) = checkouts.calls();
    assert!(
        start_calls < 40,
        "forty grants should have shared calls, took {start_calls}"
    );
    assert_eq!(books(&db, "harbour-lights-vip").await, (40, 40, 40, 40, 0));
    // each order as returned is the order as stored
    for (order, _) in &started {
        let stored = checkout::order_by_id(&db.pool, order.id)
            .await
            .unwrap()
            .unwrap();
        assert_eq!(&stored, order);
    }

    // the payment phase, combined too, each basket emptied with it
    for (order, _) in &started {
        sqlx::query(
            "insert into basket_lines (basket_id, product_id, qty) \
             values ($1, 'harbour-lights-vip', 1)",
        )
        .bind(format!("{:064x}", order.id.as_u128()))
        .execute(&db.pool)
        .await
        .unwrap();
    }
    let attached = join_all(started.iter().map(|(order, resource)| {
        let checkouts = checkouts.clone();
        let (order, resource) = (order.clone(), resource.clone());
        tokio::spawn(async move {
            let session = session(&order);
            let basket = format!("{:064x}", order.id.as_u128());
            checkouts
                .attach(order, resource.as_deref(), &session, Some(&basket))
                .await
                .unwrap()
        })
    }))
    .await;
    for attached in attached {
        let AttachOutcome::Paying { order } = attached.unwrap() else {
            panic!("every started order goes on to pay");
        };
        let stored = checkout::order_by_id(&db.pool, order.id)
            .await
            .unwrap()
            .unwrap();
        assert_eq!(stored, order);
    }
    let baskets: i64 = sqlx::query_scalar("select count(*) from basket_lines")
        .fetch_one(&db.pool)
        .await
        .unwrap();
    assert_eq!(
        baskets, 0,
        "every shopper on the way to pay has an empty basket"
    );
    let (_, attach_calls) = checkouts.calls();
    assert!(attach_calls < 40, "took {attach_calls} calls");
    let (paying, late, events): (i64, i64, i64) = sqlx::query_as(
        "select count(*) filter (where h.state = 'awaiting_payment'), \
                count(*) filter (where h.payment_deadline < o.provider_expires_at + interval '4 minutes'), \
                (select count(*) from hold_events where kind = 'payment_started') \
           from holds h join orders o on o.hold_id = h.id",
    )
    .fetch_one(&db.pool)
    .await
    .unwrap();
    assert_eq!((paying, late, events), (40, 0, 40));
    let hint_ok: bool = sqlx::query_scalar(
        "select next_deadline <= (select min(payment_deadline) from holds \
                                   where resource_id = 'harbour-lights-vip') \
           from resources where id = 'harbour-lights-vip'",
    )
    .fetch_one(&db.pool)
    .await
    .unwrap();
    assert!(hint_ok, "the sweeper's hint is never late");
    assert_no_drift(&db.inventory()).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_double_submit_racing_itself_through_the_combiner_is_one_order() {
    let db = TestDb::with_connections(20).await;
    db.load_demo().await;
    let checkouts = Checkouts::new(db.pool.clone());
    let outcomes = join_all((0..20).map(|_| {
        let checkouts = checkouts.clone();
        tokio::spawn(async move {
            checkouts
                .start(&form("same-form", "same-basket", "harbour-lights-vip", 2))
                .await
                .unwrap()
        })
    }))
    .await;
    let mut ids = Vec::new();
    let mut firsts = 0;
    for outcome in outcomes {
        match outcome.unwrap() {
            StartOutcome::Started { order, .. } => {
                firsts += 1;
                ids.push(order.id);
            }
            StartOutcome::AlreadyStarted { order } => ids.push(order.id),
            other => panic!("unexpected {other:?}"),
        }
    }
    assert_eq!(firsts, 1);
    ids.dedup();
    assert_eq!(ids.len(), 1, "every submit found the same order");
    assert_eq!(books(&db, "harbour-lights-vip").await, (1, 1, 1, 2, 0));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn two_processes_combining_checkouts_sell_one_tier_exactly_once() {
    let db = TestDb::with_connections(30).await;
    db.load_demo().await;
    resource(&db.inventory(), "harbour-lights-general", 25).await;
    let other_pool = sqlx::postgres::PgPoolOptions::new()
        .max_connections(30)
        .connect(&db.url)
        .await
        .unwrap();
    let both = [Checkouts::new(db.pool.clone()), Checkouts::new(other_pool)];
    let outcomes = join_all((0..200).map(|i| {
        let checkouts = both[i % 2].clone();
        tokio::spawn(async move {
            let start = form(
                &format!("two-{i}"),
                &format!("t{i}"),
                "harbour-lights-general",
                1,
            );
            checkouts.start(&start).await.unwrap()
        })
    }))
    .await;
    let started = outcomes
        .into_iter()
        .filter(|o| matches!(o.as_ref().unwrap(), StartOutcome::Started { .. }))
        .count();
    assert_eq!(started, 25);
    assert_eq!(
        books(&db, "harbour-lights-general").await,
        (25, 25, 25, 25, 0)
    );
    assert_no_drift(&db.inventory()).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_hundred_baskets_of_a_ticket_and_a_slot_share_calls_and_sell_each_unit_once() {
    let db = TestDb::with_connections(30).await;
    db.load_demo().await;
    let slot = db.first_slot().await;
    resource(&db.inventory(), "harbour-lights-vip", 30).await;
    resource(&db.inventory(), &slot, 100).await;
    let checkouts = Checkouts::new(db.pool.clone());
    let barrier = std::sync::Arc::new(tokio::sync::Barrier::new(100));
    let outcomes = join_all((0..100).map(|i| {
        let (checkouts, barrier) = (checkouts.clone(), barrier.clone());
        let mut basket = form(
            &format!("pair-{i}"),
            &format!("p{i}"),
            "harbour-lights-vip",
            1,
        );
        basket.lines.push(WantedLine::units(slot.clone(), qty(1)));
        tokio::spawn(async move {
            barrier.wait().await;
            checkouts.start(&basket).await.unwrap()
        })
    }))
    .await;
    let (mut started, mut refused) = (0, 0);
    for outcome in outcomes {
        match outcome.unwrap() {
            StartOutcome::Started {
                order,
                lines,
                resource,
            } => {
                assert_eq!(resource, None, "a basket of two resources");
                assert_eq!(lines.len(), 2);
                assert_eq!(
                    order.amount_minor,
                    lines.iter().map(|l| l.paid_minor).sum::<i64>()
                );
                started += 1;
            }
            // only the ticket runs out: the slot is named nowhere
            StartOutcome::SoldOut { lines } => {
                assert_eq!(lines.len(), 1);
                assert_eq!(
                    (lines[0].product_id.as_str(), lines[0].available),
                    ("harbour-lights-vip", 0)
                );
                refused += 1;
            }
            other => panic!("unexpected {other:?}"),
        }
    }
    assert_eq!((started, refused), (30, 70));
    let (calls, _) = checkouts.calls();
    assert!(
        (1..100).contains(&calls),
        "the baskets shared calls, took {calls}"
    );
    assert_eq!(held_and_sold(&db, "harbour-lights-vip").await, (30, 0));
    assert_eq!(held_and_sold(&db, &slot).await, (30, 0));
    // each order holds a basket of two holds, one per line
    let (orders, lines, holds, mismatched): (i64, i64, i64, i64) = sqlx::query_as(
        "select (select count(*) from orders), (select count(*) from order_lines), \
                (select count(*) from holds h join orders o on o.hold_id = h.basket_id), \
                (select count(*) from orders o \
                  where (select count(*) from holds h where h.basket_id = o.hold_id) <> 2)",
    )
    .fetch_one(&db.pool)
    .await
    .unwrap();
    assert_eq!((orders, lines, holds, mismatched), (30, 60, 60, 0));
    assert_no_drift(&db.inventory()).await;
}

#[tokio::test]
async fn a_hold_that_ended_before_its_payment_phase_ends_the_order_and_keeps_the_basket() {
    let db = TestDb::new().await;
    db.load_demo().await;
    let checkouts = Checkouts::new(db.pool.clone());
    let mut orders = Vec::new();
    for key in ["lapsed", "released", "fine"] {
        let StartOutcome::Started {
            order, resource, ..
        } = checkouts
            .start(&form(key, key, "harbour-lights-vip", 1))
            .await
            .unwrap()
        else {
            panic!("expected a start");
        };
        sqlx::query(
            "insert into basket_lines (basket_id, product_id, qty) values ($1, 'harbour-lights-vip', 1)",
        )
        .bind(format!("{key:0>64}"))
        .execute(&db.pool)
        .await
        .unwrap();
        orders.push((key, order, resource));
    }
    // the first lapsed (its TTL passed on the way to the provider), the
    // second was given back
    sqlx::query(
        "with lapsed as (update holds set expires_at = now() - interval '1 second' \
                          where id = $1 returning resource_id, expires_at) \
         update resources r set next_expiry = least(r.next_expiry, l.expires_at) \
           from lapsed l where r.id = l.resource_id",
    )
    .bind(orders[0].1.hold_id)
    .execute(&db.pool)
    .await
    .unwrap();
    checkout::release_order(&db.pool, orders[1].1.id, Release::ShopperLeft)
        .await
        .unwrap();
    let mut states = Vec::new();
    for (key, order, resource) in orders {
        let session = session(&order);
        let outcome = checkouts
            .attach(
                order,
                resource.as_deref(),
                &session,
                Some(&format!("{key:0>64}")),
            )
            .await
            .unwrap();
        let (alive, order) = match outcome {
            AttachOutcome::Paying { order } => (true, order),
            AttachOutcome::Ended { order } => (false, order),
        };
        let stored = checkout::order_by_id(&db.pool, order.id)
            .await
            .unwrap()
            .unwrap();
        assert_eq!(stored, order);
        let basket: i64 =
            sqlx::query_scalar("select count(*) from basket_lines where basket_id = $1")
                .bind(format!("{key:0>64}"))
                .fetch_one(&db.pool)
                .await
                .unwrap();
        states.push((key, alive, stored.state.as_str(), basket));
    }
    assert_eq!(
        states,
        [
            ("lapsed", false, "expired", 1),
            ("released", false, "cancelled", 1),
            ("fine", true, "pending", 0),
        ]
    );
    // the lapsed hold was expired once, with its history
    let (state, by): (String, String) = sqlx::query_as(
        "select h.state, h.ended_by from holds h join orders o on o.hold_id = h.id \
                  where o.checkout_key = 'lapsed'",
    )
    .fetch_one(&db.pool)
    .await
    .unwrap();
    assert_eq!((state.as_str(), by.as_str()), ("expired", "lazy-expiry"));
    assert_eq!(held_and_sold(&db, "harbour-lights-vip").await, (1, 0));
    assert_no_drift(&db.inventory()).await;
}

#[tokio::test]
async fn a_payment_window_no_longer_than_the_hold_ttl_is_refused_and_changes_nothing() {
    let db = TestDb::new().await;
    db.load_demo().await;
    let StartOutcome::Started { order, .. } = Checkouts::new(db.pool.clone())
        .start(&form("short", "short", "harbour-lights-vip", 1))
        .await
        .unwrap()
    else {
        panic!("expected a start");
    };
    // (the one-resource form a process of the release before still calls)
    let error = sqlx::query(
        "select * from hf_attach_payments('harbour-lights-vip', array[$1]::uuid[], array[60], \
            array['cs_x'], array['http://x'], array[now()], array[null]::text[])",
    )
    .bind(order.id)
    .execute(&db.pool)
    .await
    .unwrap_err();
    assert_eq!(code(&error).as_deref(), Some("22023"));
    // an order of a basket of two products is not this path's to attach
    let slot = db.first_slot().await;
    let mut two = form("two-lines", "two-lines", "harbour-lights-vip", 1);
    two.lines.push(WantedLine::units(slot, qty(1)));
    let StartOutcome::Started {
        order: basket_order,
        resource,
        ..
    } = checkout::start_checkout(&db.pool, &two).await.unwrap()
    else {
        panic!("expected a start");
    };
    assert_eq!(resource, None, "a basket of two products is not combined");
    // refused on its own: the others of its batch go on
    let statuses: Vec<String> = sqlx::query_scalar(
        "select status from hf_attach_payments(array['harbour-lights-vip', 'harbour-lights-vip'], \
                  array[$1, $2]::uuid[], \
            array[3600, 3600], array['cs_y', 'cs_z'], array['http://y', 'http://z'], \
            array[now(), now()], array[null, null]::text[])",
    )
    .bind(basket_order.id)
    .bind(order.id)
    .fetch_all(&db.pool)
    .await
    .unwrap();
    assert_eq!(statuses, ["not_one_product", "awaiting_payment"]);
    let basket_session: Option<String> =
        sqlx::query_scalar("select provider_session_id from orders where id = $1")
            .bind(basket_order.id)
            .fetch_one(&db.pool)
            .await
            .unwrap();
    assert_eq!(basket_session, None);
    let (paying, basket_paying, sessions): (i64, i64, i64) = sqlx::query_as(
        "select (select count(*) from holds where state <> 'held'), \
                (select count(*) from holds where basket_id is not null and state <> 'held'), \
                (select count(*) from orders where provider_session_id is not null)",
    )
    .fetch_one(&db.pool)
    .await
    .unwrap();
    assert_eq!(
        (paying, basket_paying, sessions),
        (1, 0, 1),
        "only the one-product order moved on"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_server_killed_with_checkout_batches_in_flight_leaves_nothing_half_written() {
    let db = TestDb::with_connections(10).await;
    db.load_demo().await;
    resource(&db.inventory(), "harbour-lights-general", 100_000).await;
    let sandbox = spawn_sandbox();
    let bin = env!("CARGO_BIN_EXE_holdfast");
    let mut server = Server::serve(bin, &db, &sandbox, &["--no-worker"]).await;
    // shoppers with a ticket each in their basket, checking out at once
    sqlx::query(
        "insert into basket_lines (basket_id, product_id, qty) \
         select lpad(to_hex(n), 64, '0'), 'harbour-lights-general', 1 \
           from generate_series(1, 3000) n",
    )
    .execute(&db.pool)
    .await
    .unwrap();
    let client = holdfast_testkit::http_builder()
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .unwrap();
    let address = server.address.clone();
    let shoppers: Vec<_> = (0..64)
        .map(|lane| {
            let (client, address) = (client.clone(), address.clone());
            tokio::spawn(async move {
                for n in (lane + 1..=3000).step_by(64) {
                    let sent = client
                        .post(format!("{address}/checkout"))
                        .header("Cookie", format!("hf_basket={n:064x}"))
                        .form(&[
                            ("checkout_key", format!("crash-{n}")),
                            ("name", "Ada".into()),
                            ("email", "ada@example.com".into()),
                        ])
                        .send()
                        .await;
                    if sent.is_err() {
                        return;
                    }
                }
            })
        })
        .collect();
    // kill it once orders are flowing
    let mut seen = 0;
    for _ in 0..400 {
        seen = sqlx::query_scalar::<_, i64>("select count(*) from orders")
            .fetch_one(&db.pool)
            .await
            .unwrap();
        if seen > 300 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    assert!(seen > 300, "the checkouts never got going");
    server.child.kill().unwrap();
    server.child.wait().unwrap();
    for shopper in shoppers {
        shopper.await.unwrap();
    }
    // every committed batch is whole: each order has its line and hold,
    // each hold its order and its history, and the counters match
    let (orders, lines, holds, units, mismatched) = books(&db, "harbour-lights-general").await;
    assert!(orders > 300 && orders < 3000, "{orders} orders");
    assert_eq!(
        (lines, holds, i64::from(units), mismatched),
        (orders, orders, orders, 0)
    );
    let (orphans, without_event, paying_without_page): (i64, i64, i64) = sqlx::query_as(
        "select (select count(*) from holds h where not exists \
                   (select 1 from orders o where o.hold_id = h.id)), \
                (select count(*) from holds h where not exists \
                   (select 1 from hold_events e where e.hold_id = h.id and e.kind = 'held')), \
                (select count(*) from holds h join orders o on o.hold_id = h.id \
                  where h.state = 'awaiting_payment' and o.provider_session_id is null)",
    )
    .fetch_one(&db.pool)
    .await
    .unwrap();
    assert_eq!((orphans, without_event, paying_without_page), (0, 0, 0));
    assert_no_drift(&db.inventory()).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn one_form_down_both_paths_at_once_is_one_order_and_never_a_deadlock() {
    let db = TestDb::with_connections(20).await;
    db.load_demo().await;
    let slot = db.first_slot().await;
    resource(&db.inventory(), &slot, 100).await;
    resource(&db.inventory(), "harbour-lights-vip", 100).await;
    let checkouts = Checkouts::new(db.pool.clone());
    for round in 0..30 {
        // the same form, submitted from a basket of one ticket and (after
        // the shopper added a slot in another tab) from a basket of two
        let key = format!("both-{round}");
        let one = form(&key, &key, "harbour-lights-vip", 1);
        let mut two = one.clone();
        // two submits of one form: each its own request, its own token
        two.order_token = holdfast::checkout::codes::order_token();
        two.lines.push(WantedLine::units(slot.clone(), qty(1)));
        let combined = {
            let checkouts = checkouts.clone();
            tokio::spawn(async move { checkouts.start(&one).await.unwrap() })
        };
        let basket = {
            let pool = db.pool.clone();
            tokio::spawn(async move { checkout::start_checkout(&pool, &two).await.unwrap() })
        };
        let outcomes = [combined.await.unwrap(), basket.await.unwrap()];
        let id = |outcome: &StartOutcome| match outcome {
            StartOutcome::Started { order, .. } | StartOutcome::AlreadyStarted { order } => {
                order.id
            }
            other => panic!("round {round}: unexpected {other:?}"),
        };
        let started = outcomes
            .iter()
            .filter(|o| matches!(o, StartOutcome::Started { .. }))
            .count();
        assert_eq!(started, 1, "round {round}: one of the two starts the order");
        assert_eq!(id(&outcomes[0]), id(&outcomes[1]), "round {round}");
    }
    let (orders, holding): (i64, i64) =
        sqlx::query_as("select count(*), count(*) filter (where hold_id is not null) from orders")
            .fetch_one(&db.pool)
            .await
            .unwrap();
    assert_eq!((orders, holding), (30, 30));
    assert_no_drift(&db.inventory()).await;
}

/// A checkout the database refuses outright (here a trigger stands in for
/// a constraint one checkout breaks) fails alone: the call it shared is
/// run again one checkout at a time, so every other shopper of the batch
/// still gets their order, and the refused one writes nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn one_checkout_the_database_refuses_fails_alone_not_its_whole_batch() {
    let db = TestDb::with_connections(40).await;
    db.load_demo().await;
    resource(&db.inventory(), "harbour-lights-vip", 500).await;
    sqlx::raw_sql(
        "create function poison_order() returns trigger language plpgsql as $$ begin \
           if new.customer_email = 'poison@example.com' then \
             raise check_violation using message = 'this order may not be written'; \
           end if; return new; end $$; \
         create trigger poison_order before insert on orders \
           for each row execute function poison_order();",
    )
    .execute(&db.pool)
    .await
    .unwrap();
    let checkouts = Checkouts::new(db.pool.clone());
    let barrier = std::sync::Arc::new(tokio::sync::Barrier::new(200));
    let outcomes = join_all((0..200).map(|i| {
        let (checkouts, barrier) = (checkouts.clone(), barrier.clone());
        tokio::spawn(async move {
            let mut start = form(
                &format!("mixed-{i}"),
                &format!("m{i}"),
                "harbour-lights-vip",
                1,
            );
            if i % 50 == 7 {
                start.customer = Customer::parse("Pat Poison", "poison@example.com").unwrap();
            }
            barrier.wait().await;
            (i, checkouts.start(&start).await)
        })
    }))
    .await;
    let (mut started, mut failed) = (0, 0);
    for outcome in outcomes {
        match outcome.unwrap() {
            (i, Ok(StartOutcome::Started { .. })) if i % 50 != 7 => started += 1,
            (i, Err(_)) if i % 50 == 7 => failed += 1,
            (i, other) => panic!("checkout {i}: unexpected {other:?}"),
        }
    }
    assert_eq!((started, failed), (196, 4));
    let (start_calls, _) = checkouts.calls();
    assert!(
        start_calls < 200,
        "the checkouts shared calls: {start_calls}"
    );
    assert_eq!(
        books(&db, "harbour-lights-vip").await,
        (196, 196, 196, 196, 0)
    );
}

/// The engine's cap per account and resource counts a voucher's use like
/// any hold: a basket whose earlier checkout holds the voucher's last use
/// it may have is refused `over_limit` for a second use, even when its
/// lines alone are within the cap, and nothing more is held.
#[tokio::test]
async fn a_vouchers_use_past_the_cap_per_resource_is_over_the_limit() {
    use holdfast::inventory::{CapScope, InventorySettings};
    let db = TestDb::new().await;
    db.load_demo().await;
    let inventory = db.inventory();
    let settings = inventory.settings().await.unwrap();
    inventory
        .configure(&InventorySettings {
            account_cap: Some(1),
            cap_scope: CapScope::Resource,
            ..settings
        })
        .await
        .unwrap();
    resource(&inventory, "voucher-uses", 100).await;
    let with_use = |key: &str, product: &str| {
        let mut checkout = one(key, product, 1);
        checkout["account"] = serde_json::json!("basket:same");
        checkout["uses"] = serde_json::json!([{ "resource": "voucher-uses" }]);
        checkout
    };
    let call = |checkout: serde_json::Value| {
        let pool = db.pool.clone();
        async move {
            let rows: Vec<(String, Option<Uuid>)> =
                sqlx::query_as("select status, order_id from hf_start_checkouts($1)")
                    .bind(serde_json::json!([checkout]))
                    .fetch_all(&pool)
                    .await
                    .unwrap();
            rows[0].0.clone()
        }
    };
    assert_eq!(
        call(with_use("first", "harbour-lights-general")).await,
        "started"
    );
    // the line's resource sorts before the voucher's: the line is within
    // the cap, the use is not
    assert_eq!(
        call(with_use("second", "harbour-lights-vip")).await,
        "over_limit"
    );
    let held: (i32, i32) = sqlx::query_as(
        "select (select held from resources where id = 'voucher-uses'), \
                (select held from resources where id = 'harbour-lights-vip')",
    )
    .fetch_one(&db.pool)
    .await
    .unwrap();
    assert_eq!(held, (1, 0));
}
