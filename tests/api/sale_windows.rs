//! Sale windows: before a product's sale opens its page says when (in the
//! shop's zone) and checkout is refused; after it closes, closed. The
//! opening moment is the database's, the same for every process: checkouts
//! sent across it to two `holdfast serve` processes are never granted
//! before it, and every one sent after it is decided by the engine.

use chrono::{DateTime, Utc};
use futures::future::join_all;
use reqwest::StatusCode;

use holdfast_testkit::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn before_the_sale_the_page_says_when_and_after_it_says_closed() {
    let app = spawn_app().await;
    app.load_demo().await;
    let opens: DateTime<Utc> = sqlx::query_scalar(
        "update products set sale_opens_at = date_trunc('minute', now()) + interval '2 days' \
          where id = 'harbour-lights-vip' returning sale_opens_at",
    )
    .fetch_one(&app.db.pool)
    .await
    .unwrap();
    app.settled().await;
    // the test shop keeps UTC
    let when = holdfast::clock::ShopZone::UTC.long(opens);
    let page = read_page(&browser(), &format!("{}/c/harbour-lights", app.address)).await;
    assert!(page.contains(&format!("On sale from {when}")), "{page}");
    let before = snapshot(&app.db.pool).await;
    let attempt = app
        .try_start(&browser(), &Purchase::of("harbour-lights-vip", 1))
        .await;
    let refused = match attempt {
        Attempt::NotAdded(answer) | Attempt::Refused(answer) => answer,
        Attempt::Started(started) => panic!("sold before its sale opened: {started:?}"),
    };
    assert!(refused.status.is_client_error(), "{refused:?}");
    assert!(refused.body.contains(&when), "{}", refused.body);
    sqlx::query("delete from basket_lines")
        .execute(&app.db.pool)
        .await
        .unwrap();
    assert_eq!(snapshot(&app.db.pool).await, before, "nothing was held");

    sqlx::query(
        "update products set sale_opens_at = null, \
                sale_closes_at = now() - interval '1 minute' \
          where id = 'harbour-lights-vip'",
    )
    .execute(&app.db.pool)
    .await
    .unwrap();
    app.settled().await;
    let page = read_page(&browser(), &format!("{}/c/harbour-lights", app.address)).await;
    assert!(page.contains("Sales have closed"), "{page}");
    let attempt = app
        .try_start(&browser(), &Purchase::of("harbour-lights-vip", 1))
        .await;
    assert!(!matches!(attempt, Attempt::Started(_)), "{attempt:?}");
    // the other tier is on sale as before
    app.start(&browser(), &Purchase::of("harbour-lights-general", 1))
        .await;
}

/// How one checkout sent across the opening was answered.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Told {
    /// Sent to the provider: granted.
    Granted,
    /// "On sale from …".
    NotYet,
    /// Decided by the engine: not enough left.
    Short,
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_hundred_checkouts_across_the_opening_second_on_two_processes() {
    const TICKETS: i64 = 20;
    const SHOPPERS: usize = 100;
    let db = TestDb::with_connections(10).await;
    db.load_demo().await;
    resource(&db.inventory(), "harbour-lights-vip", TICKETS).await;
    let sandbox = spawn_sandbox();
    let mut servers = Vec::new();
    for _ in 0..2 {
        let bin = env!("CARGO_BIN_EXE_holdfast");
        servers.push(Server::serve(bin, &db, &sandbox, &["--no-worker"]).await);
    }
    // every shopper has the VIP ticket in their basket already
    sqlx::query(
        "insert into basket_lines (basket_id, product_id, qty) \
         select lpad(to_hex(n), 64, '0'), 'harbour-lights-vip', 1 \
           from generate_series(1, $1) n",
    )
    .bind(SHOPPERS as i32)
    .execute(&db.pool)
    .await
    .unwrap();
    // the sale opens at a whole second, by the database's clock, a few
    // seconds from now (time for both processes to hear of it)
    let opens: DateTime<Utc> = sqlx::query_scalar(
        "update products set sale_opens_at = date_trunc('second', now()) + interval '5 seconds' \
          where id = 'harbour-lights-vip' returning sale_opens_at",
    )
    .fetch_one(&db.pool)
    .await
    .unwrap();
    let client = http_builder()
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .unwrap();
    // from two seconds before the opening to two after, every 40 ms, to
    // one process and then the other
    let first = opens - chrono::Duration::milliseconds(2000);
    let sent = join_all((0..SHOPPERS).map(|n| {
        let (client, address) = (client.clone(), servers[n % 2].address.clone());
        let at = first + chrono::Duration::milliseconds(40 * n as i64);
        async move {
            let wait = (at - Utc::now()).to_std().unwrap_or_default();
            tokio::time::sleep(wait).await;
            let sent_at = Utc::now();
            let answer = client
                .post(format!("{address}/checkout"))
                .header("Cookie", format!("hf_basket={:064x}", n + 1))
                .form(&[
                    ("checkout_key", format!("opening-second-{n:04}")),
                    ("name", "Ada".into()),
                    ("email", format!("ada{n}@example.com")),
                ])
                .send()
                .await
                .unwrap();
            let status = answer.status();
            let location = answer
                .headers()
                .get("location")
                .map(|l| l.to_str().unwrap().to_owned());
            let body = answer.text().await.unwrap();
            let told = match (status, location) {
                (StatusCode::SEE_OTHER, Some(to)) if to.contains("/stripe/pay/") => Told::Granted,
                (StatusCode::CONFLICT, _) if body.contains("on sale from") => Told::NotYet,
                (StatusCode::CONFLICT, _) if body.contains("sold out") || body.contains("left") => {
                    Told::Short
                }
                (status, location) => panic!("checkout {n}: {status} {location:?} {body}"),
            };
            (sent_at, told)
        }
    }))
    .await;

    let count = |t: Told| sent.iter().filter(|(_, told)| *told == t).count();
    let (granted, not_yet, short) = (
        count(Told::Granted),
        count(Told::NotYet),
        count(Told::Short),
    );
    assert_eq!(granted + not_yet + short, SHOPPERS);
    // every checkout sent after the opening was the engine's to decide
    for (sent_at, told) in &sent {
        if *sent_at >= opens {
            assert_ne!(
                *told,
                Told::NotYet,
                "sent {sent_at}, the sale opened {opens}"
            );
        }
    }
    let after = sent.iter().filter(|(at, _)| *at >= opens).count();
    assert!(after >= 40, "only {after} sent after the opening");
    // the engine granted what there was, and never before the opening
    assert_eq!(
        granted, TICKETS as usize,
        "{not_yet} not yet, {short} short"
    );
    let (orders, earliest): (i64, Option<DateTime<Utc>>) = sqlx::query_as(
        "select count(*), min(o.created_at) from orders o \
           join order_lines l on l.order_id = o.id where l.product_id = 'harbour-lights-vip'",
    )
    .fetch_one(&db.pool)
    .await
    .unwrap();
    assert_eq!(orders, TICKETS);
    assert!(earliest.unwrap() >= opens, "{earliest:?} before {opens}");
    let holds_before: i64 = sqlx::query_scalar(
        "select count(*) from holds where resource_id = 'harbour-lights-vip' and created_at < $1",
    )
    .bind(opens)
    .fetch_one(&db.pool)
    .await
    .unwrap();
    assert_eq!(holds_before, 0, "nothing was held before the opening");
    assert_eq!(
        held_and_sold(&db, "harbour-lights-vip").await,
        (TICKETS as i32, 0)
    );
    assert_no_drift(&db.inventory()).await;
    // the refusals before the opening came from both processes
    assert!(not_yet >= 40, "{not_yet}");
    drop(servers);
}
