//! PostgreSQL stopped and started under load, on a cluster of this test's
//! own: while it is gone, shoppers' requests wait for it (each unit of work
//! tried again whole, `src/retry.rs`) rather than fail; none waits longer
//! than the outage lasts plus a moment; once it is back every shopper's
//! checkout ends as exactly one order. Past the wait's bound, a shopper
//! gets the "one moment" page.

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
async fn postgres_stopped_under_load_makes_shoppers_wait_and_loses_or_doubles_nothing() {
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
    // with a payment page (resubmitting the same form after anything else)
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
    let waited = log
        .iter()
        .filter(|(_, _, took)| *took > Duration::from_secs(1))
        .count();
    let others: Vec<_> = log
        .iter()
        .filter(|(_, status, _)| ![200, 303].contains(status))
        .collect();
    let down = back_at - down_at;
    eprintln!(
        "outage: {} requests, {waited} waited over a second, slowest {slowest:?}, down {down:?}",
        log.len(),
    );
    // a request waits for the database rather than fail: the outage is
    // shorter than the wait's bound (20 s)
    assert!(others.is_empty(), "only 200 and 303: {others:?}");
    assert!(waited > 0, "the outage was felt");
    assert!(
        log.iter()
            .any(|(what, _, took)| *what != "catalogue" && *took > Duration::from_secs(1)),
        "shoppers felt it too"
    );
    // nobody waited much longer than the database was away
    assert!(
        slowest < down + Duration::from_secs(5),
        "no request hung: {slowest:?} for an outage of {down:?}"
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

/// Past the wait's bound (one second here, `HOLDFAST_DB_WAIT_SECONDS`), a
/// shopper gets the "one moment" page: 503 with `Retry-After`, saying what
/// is happening, going by itself to the page it came for (a form, to the
/// basket); and once the database is back, the shop answers as before.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn past_the_wait_a_shopper_gets_the_one_moment_page_that_tries_again() {
    let home = std::path::PathBuf::from(format!(
        "/var/tmp/holdfast-moment-{}",
        uuid::Uuid::new_v4().simple()
    ));
    let cluster = LocalCluster::new(home.clone(), free_port());
    let starter = cluster.clone();
    tokio::task::spawn_blocking(move || starter.ensure_running())
        .await
        .unwrap()
        .expect("a cluster of our own");
    let url = cluster.url("postgres");
    let port = free_port();
    let address = format!("http://127.0.0.1:{port}");
    let mut server = std::process::Command::new(env!("CARGO_BIN_EXE_holdfast"))
        .args(["serve"])
        .env("DATABASE_URL", &url)
        .env("HOLDFAST_ADDR", format!("127.0.0.1:{port}"))
        .env(
            "HOLDFAST_SANDBOX_ADDR",
            format!("127.0.0.1:{}", free_port()),
        )
        .env(
            "HOLDFAST_SANDBOX_SMTP_ADDR",
            format!("127.0.0.1:{}", free_port()),
        )
        .env("HOLDFAST_DB_WAIT_SECONDS", "1")
        .env("RUST_LOG", "warn")
        .env_remove("STRIPE_SECRET_KEY")
        .env_remove("RAZORPAY_KEY_ID")
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("holdfast serve");
    let client = browser();
    let mut up = false;
    for _ in 0..300 {
        if let Ok(answer) = client.get(format!("{address}/healthz")).send().await
            && answer.status() == 200
        {
            up = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(up, "holdfast serve came up");
    let added = client
        .post(format!("{address}/basket/add"))
        .form(&[("product_id", "harbour-lights-general"), ("qty", "1")])
        .send()
        .await
        .unwrap();
    assert_eq!(added.status(), 303);

    let stopper = cluster.clone();
    tokio::task::spawn_blocking(move || stopper.stop())
        .await
        .unwrap()
        .unwrap();
    let started = Instant::now();
    let page = client
        .get(format!("{address}/basket"))
        .send()
        .await
        .unwrap();
    let waited = started.elapsed();
    assert_eq!(page.status(), 503);
    assert_eq!(page.headers()["retry-after"], "5");
    let text = page.text().await.unwrap();
    assert!(text.contains("One moment"), "{text}");
    assert!(
        text.contains(r#"<meta http-equiv="refresh" content="5; url=/basket">"#),
        "a page read with GET comes back to itself: {text}"
    );
    assert!(
        waited >= Duration::from_millis(900) && waited < Duration::from_secs(6),
        "it waited about its bound first: {waited:?}"
    );
    let form = client
        .post(format!("{address}/basket/add"))
        .form(&[("product_id", "harbour-lights-general"), ("qty", "1")])
        .send()
        .await
        .unwrap();
    assert_eq!(form.status(), 503);
    let text = form.text().await.unwrap();
    assert!(
        text.contains(r#"content="5; url=/basket""#),
        "a form goes to the basket: {text}"
    );
    let health = client
        .get(format!("{address}/healthz"))
        .send()
        .await
        .unwrap();
    assert_eq!(health.status(), 503);

    let starter = cluster.clone();
    tokio::task::spawn_blocking(move || starter.ensure_running())
        .await
        .unwrap()
        .unwrap();
    let mut back = false;
    for _ in 0..100 {
        let page = client
            .get(format!("{address}/basket"))
            .send()
            .await
            .unwrap();
        if page.status() == 200 {
            let text = page.text().await.unwrap();
            assert!(
                text.contains("Harbour Lights"),
                "the basket as it was: {text}"
            );
            back = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    assert!(back, "the shop answers again once the database is back");
    let _ = server.kill();
    let _ = server.wait();
    let stopper = cluster.clone();
    let _ = tokio::task::spawn_blocking(move || stopper.stop()).await;
    let _ = std::fs::remove_dir_all(&home);
}
