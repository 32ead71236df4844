//! PostgreSQL stopped and started under load, on a cluster of this test's
//! own: requests fail fast with 503 while it is gone, none hangs, and once
//! it is back every shopper's checkout ends as exactly one order.

use std::sync::Arc;
use std::time::{Duration, Instant};

use holdfast::configuration::DatabaseSettings;
use holdfast::database::cluster::LocalCluster;
use holdfast::startup::Application;
use holdfast::state::Shop;
use tokio::sync::Mutex;

use holdfast_testkit::*;

/// (what, status or 0 for a transport error, how long it took)
type Log = Arc<Mutex<Vec<(&'static str, u16, Duration)>>>;

async fn timed(
    log: &Log,
    what: &'static str,
    request: reqwest::RequestBuilder,
) -> Option<reqwest::Response> {
    let started = Instant::now();
    let answer = request.send().await;
    let status = answer.as_ref().map(|a| a.status().as_u16()).unwrap_or(0);
    log.lock().await.push((what, status, started.elapsed()));
    answer.ok()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn postgres_stopped_under_load_answers_503_fast_and_loses_or_doubles_nothing() {
    let home = std::path::PathBuf::from(format!(
        "/var/tmp/holdfast-outage-{}",
        uuid::Uuid::new_v4().simple()
    ));
    let cluster = LocalCluster::new(home.clone(), free_port());
    let starter = cluster.clone();
    tokio::task::spawn_blocking(move || starter.ensure_running())
        .await
        .unwrap()
        .expect("a cluster of our own");
    let settings = DatabaseSettings {
        url: Some(holdfast::configuration::Secret::new(
            cluster.url("postgres"),
        )),
        home: home.clone(),
        local_port: 0,
        local_database: String::new(),
    };
    let pool = holdfast::database::recreate(&settings, "outage", 20)
        .await
        .unwrap();
    load_demo(&pool).await;

    let sandbox = spawn_sandbox();
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let address = format!("http://{}", listener.local_addr().unwrap());
    sandbox
        .stripe
        .set_webhook_url(format!("{address}/webhooks/stripe"));
    let shop = Shop::local(pool.clone(), sandbox.providers(), address.clone());
    tokio::spawn(
        Application::build(listener, shop)
            .unwrap()
            .run_until_stopped(),
    );

    let log: Log = Arc::default();
    let until = Instant::now() + Duration::from_secs(40);
    // sixteen shoppers: basket, then the checkout form until it is answered
    // with a payment page, resubmitting the same form after a 503
    let shoppers: Vec<_> = (0..16u64)
        .map(|i| {
            let log = log.clone();
            let address = address.clone();
            tokio::spawn(async move {
                // arriving one by one, before, during and after the outage
                tokio::time::sleep(Duration::from_millis(200 + 400 * i)).await;
                let client = holdfast_testkit::http_builder()
                    .cookie_store(true)
                    .redirect(reqwest::redirect::Policy::none())
                    .timeout(Duration::from_secs(30))
                    .build()
                    .unwrap();
                let mut key = None;
                while Instant::now() < until {
                    if key.is_none() {
                        let added = timed(
                            &log,
                            "basket",
                            client
                                .post(format!("{address}/basket/add"))
                                .form(&[("product_id", "harbour-lights-general"), ("qty", "1")]),
                        )
                        .await;
                        if added.is_none_or(|a| a.status() != 303) {
                            tokio::time::sleep(Duration::from_millis(200)).await;
                            continue;
                        }
                        let page =
                            timed(&log, "basket", client.get(format!("{address}/basket"))).await;
                        match page {
                            Some(page) if page.status() == 200 => {
                                key = try_field(&page.text().await.unwrap(), "checkout_key");
                            }
                            _ => {
                                tokio::time::sleep(Duration::from_millis(200)).await;
                                continue;
                            }
                        }
                    }
                    let Some(form_key) = key.clone() else {
                        continue;
                    };
                    let answer = timed(
                        &log,
                        "checkout",
                        client.post(format!("{address}/checkout")).form(&[
                            ("checkout_key", form_key.as_str()),
                            ("name", "Ada Shopper"),
                            ("email", "ada@example.com"),
                            ("provider", "stripe"),
                        ]),
                    )
                    .await;
                    if answer.is_some_and(|a| a.status() == 303) {
                        return Some(form_key);
                    }
                    tokio::time::sleep(Duration::from_millis(200)).await;
                }
                None
            })
        })
        .collect();
    // and readers of the catalogue throughout
    let stop_reading = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let readers: Vec<_> = (0..8)
        .map(|_| {
            let log = log.clone();
            let address = address.clone();
            let stop = stop_reading.clone();
            tokio::spawn(async move {
                let client = holdfast_testkit::http_builder()
                    .timeout(Duration::from_secs(30))
                    .build()
                    .unwrap();
                while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                    timed(&log, "catalogue", client.get(format!("{address}/"))).await;
                    tokio::time::sleep(Duration::from_millis(20)).await;
                }
            })
        })
        .collect();

    // the outage: five seconds without PostgreSQL, in the middle of it all
    tokio::time::sleep(Duration::from_millis(300)).await;
    let stopper = cluster.clone();
    tokio::task::spawn_blocking(move || stopper.stop())
        .await
        .unwrap()
        .unwrap();
    let down_at = Instant::now();
    tokio::time::sleep(Duration::from_secs(5)).await;
    let starter = cluster.clone();
    tokio::task::spawn_blocking(move || starter.ensure_running())
        .await
        .unwrap()
        .unwrap();
    let back_at = Instant::now();
    let mut keys = Vec::new();
    for shopper in shoppers {
        keys.push(shopper.await.unwrap().expect("every shopper got through"));
    }
    tokio::time::sleep(Duration::from_secs(2)).await;
    stop_reading.store(true, std::sync::atomic::Ordering::Relaxed);
    for reader in readers {
        reader.await.unwrap();
    }

    let log = log.lock().await;
    let slowest = log.iter().map(|(_, _, took)| *took).max().unwrap();
    let unavailable = log.iter().filter(|(_, status, _)| *status == 503).count();
    let others: Vec<_> = log
        .iter()
        .filter(|(_, status, _)| ![200, 303, 503].contains(status))
        .collect();
    eprintln!(
        "outage: {} requests, {unavailable} answered 503, slowest {slowest:?}, down {:?}",
        log.len(),
        back_at - down_at
    );
    assert!(others.is_empty(), "only 200, 303 and 503: {others:?}");
    assert!(unavailable > 0, "the outage was felt");
    assert!(
        log.iter()
            .any(|(what, status, _)| *what != "catalogue" && *status == 503),
        "shoppers felt it too"
    );
    // the pool waits at most two seconds for a connection
    assert!(
        slowest < Duration::from_secs(5),
        "no request hung: {slowest:?}"
    );
    // after the return, the catalogue answers again
    let last: Vec<_> = log
        .iter()
        .rev()
        .filter(|(what, _, _)| *what == "catalogue")
        .take(20)
        .collect();
    assert!(last.iter().all(|(_, status, _)| *status == 200), "{last:?}");

    // nothing lost, nothing doubled: one order per form, one unit each
    let (orders, distinct, held): (i64, i64, i32) = sqlx::query_as(
        "select (select count(*) from orders), (select count(distinct checkout_key) from orders), \
                (select held from resources where id = 'harbour-lights-general')",
    )
    .fetch_one(&pool)
    .await
    .unwrap();
    assert_eq!((orders, distinct, held), (16, 16, 16));
    for key in &keys {
        let n: i64 = sqlx::query_scalar("select count(*) from orders where checkout_key = $1")
            .bind(key)
            .fetch_one(&pool)
            .await
            .unwrap();
        assert_eq!(n, 1);
    }
    let drift = holdfast::inventory::Inventory::new(pool.clone())
        .check(None)
        .await
        .unwrap();
    assert!(drift.iter().all(|row| !row.drift), "{drift:?}");
    pool.close().await;
    let stopper = cluster.clone();
    let _ = tokio::task::spawn_blocking(move || stopper.stop()).await;
    let _ = std::fs::remove_dir_all(&home);
}
