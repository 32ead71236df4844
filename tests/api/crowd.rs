//! The flash-sale crowd: pages and sold-out answers from memory, every
//! grant still decided by the database.

use std::time::{Duration, Instant};

use futures::future::join_all;
use holdfast::inventory::{Capacity, HoldOutcome};
use holdfast::live::{LISTENER_NAME, LiveStock, TRUST_FOR};

use holdfast_testkit::*;

async fn basket_page(app: &TestApp, shopper: &reqwest::Client) -> String {
    shopper
        .get(format!("{}/basket", app.address))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap()
}

async fn orders(app: &TestApp) -> i64 {
    sqlx::query_scalar("select count(*) from orders")
        .fetch_one(&app.db.pool)
        .await
        .unwrap()
}

async fn set_capacity(app: &TestApp, resource: &str, total: i64) {
    app.db
        .inventory()
        .upsert_resource(&rid(resource), Capacity::parse(total).unwrap())
        .await
        .unwrap();
}

/// How long until `memory` shows `available` of `product`; fails past the
/// lag bound.
async fn shows(memory: &LiveStock, product: &str, available: i32, since: Instant) -> Duration {
    loop {
        let seen = memory
            .now()
            .and_then(|s| s.stock(&[product.to_owned()]).first().map(|s| s.available));
        if seen == Some(available) {
            return since.elapsed();
        }
        assert!(
            since.elapsed() < TRUST_FOR,
            "{product}: memory still shows {seen:?} instead of {available} after {:?}",
            since.elapsed()
        );
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sold_out_checkout_is_refused_from_memory_and_touches_nothing() {
    let app = spawn_app().await;
    app.load_demo().await;
    set_capacity(&app, "harbour-lights-vip", 1).await;
    app.start(&browser(), &Purchase::of("harbour-lights-vip", 1))
        .await;
    let late = browser();
    app.add(&late, "harbour-lights-vip", 1).await;
    let before = orders(&app).await;

    // every table a checkout reads or writes is locked: an answer that
    // needed the database would wait. The form must be newer than the
    // tier's last change as memory saw it (else the database answers, by
    // design); checked under the lock, when nothing can change any more.
    let (page, lock) = loop {
        app.settled().await;
        tokio::time::sleep(Duration::from_millis(5)).await;
        let page = basket_page(&app, &late).await;
        let mut lock = app.db.pool.begin().await.unwrap();
        sqlx::query(
            "lock table basket_lines, orders, order_lines, holds, resources, products \
             in access exclusive mode",
        )
        .execute(&mut *lock)
        .await
        .unwrap();
        let minted = holdfast::checkout::codes::key_minted_at(&checkout_key(&page)).unwrap();
        let newer = app
            .live
            .now()
            .and_then(|s| s.level("harbour-lights-vip").map(|l| l.changed_at < minted))
            .unwrap_or(false);
        if newer {
            break (page, lock);
        }
        lock.rollback().await.unwrap();
    };
    let refused = tokio::time::timeout(
        Duration::from_secs(5),
        app.submit_form(&late, &checkout_key(&page), &form_lines(&page)),
    )
    .await
    .expect("the refusal waited for the database");
    lock.rollback().await.unwrap();

    assert_eq!(refused.status(), 409);
    assert_eq!(app.live.refusals(), 1);
    let body = refused.text().await.unwrap();
    assert!(body.contains("VIP"), "{body}");
    assert!(body.contains("sold out (you asked for 1)"), "{body}");
    assert!(
        body.contains("Sold out for now: 1 reserved by shoppers who are paying."),
        "{body}"
    );
    // the page offers the form again, with a fresh key
    assert_ne!(checkout_key(&body), checkout_key(&page));
    assert_eq!(orders(&app).await, before);

    // a form without its lines, or made before the last change, goes to
    // the database, which refuses it the same way
    for (key, lines) in [
        (checkout_key(&page), String::new()),
        (format!("1-{}", "a".repeat(64)), form_lines(&page)),
    ] {
        let response = app.submit_form(&late, &key, &lines).await;
        assert_eq!(response.status(), 409);
    }
    assert_eq!(app.live.refusals(), 1);
    assert_eq!(orders(&app).await, before);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_double_submit_that_took_the_last_unit_still_reaches_its_order() {
    let app = spawn_app().await;
    app.load_demo().await;
    set_capacity(&app, "harbour-lights-vip", 1).await;
    let shopper = browser();
    app.add(&shopper, "harbour-lights-vip", 1).await;
    app.settled().await;
    let page = basket_page(&app, &shopper).await;
    let (key, lines) = (checkout_key(&page), form_lines(&page));
    let first = app.submit_form(&shopper, &key, &lines).await;
    assert_eq!(first.status(), 303);
    // memory knows the tier is sold out, and that it changed after the
    // form was made
    app.settled().await;
    let again = app.submit_form(&shopper, &key, &lines).await;
    assert_eq!(again.status(), 303);
    assert_eq!(again.headers()["location"], first.headers()["location"]);
    assert_eq!(app.live.refusals(), 0);
    assert_eq!(orders(&app).await, 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_process_shows_a_change_within_a_second_even_after_its_listener_is_killed() {
    let app = spawn_app().await;
    app.load_demo().await;
    // a second process: its own memory and listener on the same database
    let other = LiveStock::start(app.db.pool.clone());
    assert!(other.refresh().await);
    let processes = [&app.live, &other];
    let mut lags = Vec::new();

    // a capacity change, then the last unit sold through the shop
    let since = Instant::now();
    set_capacity(&app, "harbour-lights-vip", 1).await;
    for memory in processes {
        lags.push(shows(memory, "harbour-lights-vip", 1, since).await);
    }
    let notified = other.reads().1;
    let shopper = browser();
    app.add(&shopper, "harbour-lights-vip", 1).await;
    let since = Instant::now();
    assert_eq!(app.checkout(&shopper).await.status(), 303);
    for memory in processes {
        lags.push(shows(memory, "harbour-lights-vip", 0, since).await);
    }
    // it was the notification that told the other process
    assert!(other.reads().1 > notified);
    // and the catalogue page says so
    let page = browser()
        .get(format!("{}/c/harbour-lights", app.address))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(page.contains("Sold out for now: 1 reserved"), "{page}");

    // both listening connections are killed; a change made at once is
    // still shown within the bound, and both listen again
    let killed: Vec<bool> = sqlx::query_scalar(
        "select pg_terminate_backend(pid) from pg_stat_activity \
          where application_name = $1 and datname = current_database()",
    )
    .bind(LISTENER_NAME)
    .fetch_all(&app.db.pool)
    .await
    .unwrap();
    assert_eq!(killed, [true, true]);
    let since = Instant::now();
    set_capacity(&app, "wild-honey", 7).await;
    for memory in processes {
        lags.push(shows(memory, "wild-honey", 7, since).await);
    }
    let listening = Instant::now();
    while !(app.live.listening() && other.listening()) {
        assert!(
            listening.elapsed() < Duration::from_secs(5),
            "no listener came back"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let listeners: i64 = sqlx::query_scalar(
        "select count(*) from pg_stat_activity \
          where application_name = $1 and datname = current_database()",
    )
    .bind(LISTENER_NAME)
    .fetch_one(&app.db.pool)
    .await
    .unwrap();
    assert_eq!(listeners, 2);
    let notified = other.reads().1;
    let since = Instant::now();
    set_capacity(&app, "wild-honey", 9).await;
    for memory in processes {
        lags.push(shows(memory, "wild-honey", 9, since).await);
    }
    assert!(other.reads().1 > notified);
    lags.sort();
    println!(
        "lag of memory behind the database over {} observations: median {:?}, worst {:?}",
        lags.len(),
        lags[lags.len() / 2],
        lags[lags.len() - 1]
    );
}

/// Twenty places, all held by holds about to expire, and a crowd of 200
/// pressing "pay" again and again: memory refuses while nothing is due,
/// and once the holds are due every place is sold to the crowd.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn holds_that_expire_while_the_crowd_retries_are_sold_to_the_crowd() {
    let app = spawn_app_with(TestDb::with_connections(32).await).await;
    app.load_demo().await;
    set_capacity(&app, "harbour-lights-vip", 20).await;
    let inventory = app.db.inventory();
    for i in 0..20 {
        let mut hold = request(&rid("harbour-lights-vip"), 1, &format!("early-{i}"));
        hold.ttl = Some(ttl(2.0));
        assert!(matches!(
            inventory.hold(&hold).await.unwrap(),
            HoldOutcome::Held { .. }
        ));
    }
    let crowd: Vec<reqwest::Client> = (0..200).map(|_| browser()).collect();
    for shopper in &crowd {
        app.add(shopper, "harbour-lights-vip", 1).await;
    }
    app.settled().await;
    let deadline = Instant::now() + Duration::from_secs(20);
    let won = std::sync::atomic::AtomicUsize::new(0);
    let outcomes = join_all(crowd.iter().map(|shopper| {
        let (app, won) = (&app, &won);
        async move {
            let mut refusals = 0;
            // until the twenty places are sold (or time is up)
            while Instant::now() < deadline && won.load(std::sync::atomic::Ordering::SeqCst) < 20 {
                let page = basket_page(app, shopper).await;
                if !page.contains("name=\"lines\"") {
                    break; // the basket emptied: this shopper is paying
                }
                let response = app
                    .submit_form(shopper, &checkout_key(&page), &form_lines(&page))
                    .await;
                match response.status().as_u16() {
                    303 => {
                        won.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                        return (true, refusals);
                    }
                    409 => refusals += 1,
                    other => panic!("checkout answered {other}"),
                }
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
            (false, refusals)
        }
    }))
    .await;
    let winners = outcomes.iter().filter(|(won, _)| *won).count();
    let refusals: u32 = outcomes.iter().map(|(_, r)| r).sum();
    assert_eq!(winners, 20, "the freed places went to the crowd");
    assert!(refusals > 0);
    assert!(
        app.live.refusals() > 0,
        "memory answered none of the {refusals} refusals"
    );
    assert_eq!(orders(&app).await, 20);
    let status = inventory
        .status(&rid("harbour-lights-vip"))
        .await
        .unwrap()
        .unwrap();
    assert_eq!((status.held, status.available), (20, 0));
    assert_no_drift(&inventory).await;
}

/// Reads server-sent events from a response: the next `data:` line's JSON.
struct Events {
    body: reqwest::Response,
    buffer: String,
}

impl Events {
    async fn open(app: &TestApp, ids: &str) -> Events {
        let response = browser()
            .get(format!("{}/availability/stream?ids={ids}", app.address))
            .send()
            .await
            .unwrap();
        assert_eq!(response.status(), 200);
        assert_eq!(response.headers()["content-type"], "text/event-stream");
        Events {
            body: response,
            buffer: String::new(),
        }
    }

    /// The next event's products as (id, available, pending).
    async fn next(&mut self) -> Vec<(String, i64, i64)> {
        loop {
            if let Some(end) = self.buffer.find("\n\n") {
                let event: String = self.buffer.drain(..end + 2).collect();
                let Some(data) = event.lines().find_map(|l| l.strip_prefix("data: ")) else {
                    continue; // a comment
                };
                let body: serde_json::Value = serde_json::from_str(data).unwrap();
                return body["products"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .map(|p| {
                        (
                            p["id"].as_str().unwrap().to_owned(),
                            p["available"].as_i64().unwrap(),
                            p["pending"].as_i64().unwrap(),
                        )
                    })
                    .collect();
            }
            let chunk = self.body.chunk().await.unwrap().expect("the stream ended");
            self.buffer.push_str(std::str::from_utf8(&chunk).unwrap());
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn five_hundred_open_pages_each_hear_a_change_within_a_second() {
    let app = spawn_app().await;
    app.load_demo().await;
    set_capacity(&app, "harbour-lights-vip", 0).await;
    app.settled().await;
    for bad in ["", "ids=", "ids=,,"] {
        let response = browser()
            .get(format!("{}/availability/stream?{bad}", app.address))
            .send()
            .await
            .unwrap();
        assert_eq!(response.status(), 400, "{bad}");
    }
    let mut pages =
        join_all((0..500).map(|_| Events::open(&app, "harbour-lights-vip,no-such"))).await;
    for page in &mut pages {
        assert_eq!(page.next().await, [("harbour-lights-vip".to_owned(), 0, 0)]);
    }
    assert_eq!(app.live.watchers(), 500);

    // two units come back: every page hears it, within the bound
    let since = Instant::now();
    set_capacity(&app, "harbour-lights-vip", 2).await;
    let heard = join_all(pages.iter_mut().map(|page| async move {
        let event = tokio::time::timeout(TRUST_FOR, page.next()).await;
        (event.ok(), since.elapsed())
    }))
    .await;
    let on_time = heard
        .iter()
        .filter(|(event, _)| {
            event.as_deref() == Some(&[("harbour-lights-vip".to_owned(), 2, 0)][..])
        })
        .count();
    assert_eq!(on_time, 500);
    let mut lags: Vec<Duration> = heard.iter().map(|(_, lag)| *lag).collect();
    lags.sort();
    println!(
        "500 streams: median {:?}, worst {:?} from the change to the page",
        lags[250], lags[499]
    );
    // pages that close stop being watched
    drop(pages);
    let closing = Instant::now();
    while app.live.watchers() > 0 {
        // the shop notices a gone page when it next writes to it
        set_capacity(
            &app,
            "harbour-lights-vip",
            3 + (closing.elapsed().as_millis() % 2) as i64,
        )
        .await;
        assert!(
            closing.elapsed() < Duration::from_secs(5),
            "{} still watching",
            app.live.watchers()
        );
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
}

/// The payment burst after a sale opened: 150 orders on one tier paid at
/// once, every webhook delivered twice. Each order is confirmed exactly
/// once, in combined transactions.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_payment_burst_of_returns_and_webhooks_on_one_tier_is_confirmed_once_each_in_combined_transactions()
 {
    let app = spawn_app_with(TestDb::with_connections(32).await).await;
    app.load_demo().await;
    set_capacity(&app, "harbour-lights-vip", 150).await;
    app.settled().await;
    let shoppers: Vec<reqwest::Client> = (0..150).map(|_| browser()).collect();
    let one = Purchase::of("harbour-lights-vip", 1);
    let checkouts = join_all(shoppers.iter().map(|shopper| app.start(shopper, &one))).await;
    // a third of the payments only their shoppers' returns report (the
    // webhook is lost); the others' webhooks come twice
    for (i, started) in checkouts.iter().enumerate() {
        let mode = if i % 3 == 0 {
            holdfast_sandbox::DeliveryMode::Never
        } else {
            holdfast_sandbox::DeliveryMode::Twice
        };
        assert!(app.sandbox.stripe.set_delivery(&started.page_id, mode));
    }
    let calls_before = app.webhooks.calls();
    // everyone pays at once; the shoppers whose webhooks are lost and every
    // other one of the rest come back to the shop (a return confirms too,
    // racing its webhooks; their deliveries were set above)
    let app = &app;
    join_all(shoppers.iter().zip(&checkouts).enumerate().map(
        |(i, (shopper, started))| async move {
            let back = i % 3 == 0 || i % 2 == 0;
            let report = if back { Report::Both } else { Report::Webhook };
            let paid = app
                .pay(shopper, started, &Payment::default().reported(report))
                .await;
            if back {
                assert_eq!(
                    paid.returned().status,
                    303,
                    "the return leads to the order page"
                );
            }
        },
    ))
    .await;
    let started = Instant::now();
    loop {
        let paid: i64 = sqlx::query_scalar("select count(*) from orders where state = 'paid'")
            .fetch_one(&app.db.pool)
            .await
            .unwrap();
        let deliveries: i64 = sqlx::query_scalar(
            "select count(*) from webhook_events where event_type = 'checkout.session.completed'",
        )
        .fetch_one(&app.db.pool)
        .await
        .unwrap();
        if paid == 150 && deliveries == 100 {
            break;
        }
        assert!(
            started.elapsed() < Duration::from_secs(60),
            "{paid} paid, {deliveries} events"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let status = app
        .db
        .inventory()
        .status(&rid("harbour-lights-vip"))
        .await
        .unwrap()
        .unwrap();
    assert_eq!((status.sold, status.held, status.available), (150, 0, 0));
    let codes: i64 = sqlx::query_scalar("select count(*) from order_items")
        .fetch_one(&app.db.pool)
        .await
        .unwrap();
    assert_eq!(codes, 150);
    let ledger = app.sandbox.stripe.ledger();
    assert_eq!(ledger.charges.len(), 150);
    // nothing on its way back, nothing for staff (the worker is not running
    // here: a refund would wait in the outbox)
    let (refunds, flagged): (i64, i64) = sqlx::query_as(
        "select (select count(*) from outbox_jobs where kind in ('refund', 'payment_returned')), \
                (select count(*) from orders where flag is not null)",
    )
    .fetch_one(&app.db.pool)
    .await
    .unwrap();
    assert_eq!((refunds, flagged), (0, 0));
    let calls = app.webhooks.calls() - calls_before;
    assert!(
        calls < 150,
        "{calls} transactions for 150 payments (100 returns, 200 deliveries): nothing combined"
    );
    println!("150 payments (100 returns, 200 deliveries) in {calls} combined transactions");
    assert_no_drift(&app.db.inventory()).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stale_form_replayed_costs_one_read_then_memory_answers_until_the_product_changes() {
    let app = spawn_app().await;
    app.load_demo().await;
    set_capacity(&app, "harbour-lights-vip", 1).await;
    let late = browser();
    app.add(&late, "harbour-lights-vip", 1).await;
    app.settled().await;
    // the form is made before the sell-out: memory alone cannot refuse it
    let page = basket_page(&app, &late).await;
    let (key, lines) = (checkout_key(&page), form_lines(&page));
    tokio::time::sleep(Duration::from_millis(5)).await;
    app.start(&browser(), &Purchase::of("harbour-lights-vip", 1))
        .await;
    app.settled().await;
    let before = snapshot(&app.db.pool).await;
    let first = app.submit_form(&late, &key, &lines).await;
    assert_eq!(first.status(), 409);
    assert_eq!(app.live.refusals(), 0, "the database answered the first");
    // replayed, as a script would: memory answers, the same way
    for _ in 0..100 {
        let again = app.submit_form(&late, &key, &lines).await;
        assert_eq!(again.status(), 409);
    }
    assert_eq!(app.live.refusals(), 100, "one read, then memory");
    assert_eq!(snapshot(&app.db.pool).await, before, "nothing written");
    // once the product changes, the database answers again: a unit came
    // back, and the same form gets it
    set_capacity(&app, "harbour-lights-vip", 2).await;
    app.settled().await;
    let taken = app.submit_form(&late, &key, &lines).await;
    assert_eq!(taken.status(), 303);
    assert_eq!(app.live.refusals(), 100);
    assert_eq!(orders(&app).await, 2);
}
