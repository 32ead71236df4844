//! Crashes at the worst moments, for real: `holdfast serve` runs as its own
//! process with `HOLDFAST_CRASH_AT` set, dies at that point (abort: no
//! cleanup), and is started again. The sandbox lives in the test process,
//! so the money it saw survives the crash. Then the ledger must balance.

use std::time::Duration;

use holdfast::payments::ProviderKind;

use holdfast_testkit::*;

async fn serve(db: &TestDb, sandbox: &TestSandbox, port: u16, crash_at: Option<&str>) -> Server {
    let address = format!("http://127.0.0.1:{port}");
    sandbox
        .stripe
        .set_webhook_url(format!("{address}/webhooks/stripe"));
    sandbox
        .razorpay
        .set_webhook_url(format!("{address}/webhooks/razorpay"));
    let mut command = holdfast_process(env!("CARGO_BIN_EXE_holdfast"), db, sandbox, &["serve"]);
    command.env("HOLDFAST_ADDR", format!("127.0.0.1:{port}"));
    if let Some(point) = crash_at {
        command.env("HOLDFAST_CRASH_AT", point);
    }
    let server = Server {
        child: command.spawn().expect("start holdfast serve"),
        address,
    };
    ready(&server).await;
    server
}

/// Wait for the crashed server to be gone, and say how it ended.
async fn died(server: &mut Server) -> std::process::ExitStatus {
    for _ in 0..100 {
        if let Some(status) = server.child.try_wait().unwrap() {
            return status;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("the server did not die at its crash point");
}

/// Put `qty` VIP tickets in the basket and read the checkout form's key.
async fn basket(server: &Server, shopper: &reqwest::Client, qty: i64) -> String {
    let added = shopper
        .post(format!("{}/basket/add", server.address))
        .form(&[
            ("product_id", "harbour-lights-vip"),
            ("qty", &qty.to_string()),
        ])
        .send()
        .await
        .unwrap();
    assert_eq!(added.status(), 303);
    checkout_key(server, shopper).await
}

async fn checkout_key(server: &Server, shopper: &reqwest::Client) -> String {
    let page = shopper
        .get(format!("{}/basket", server.address))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    field(&page, "checkout_key")
}

async fn submit(
    server: &Server,
    shopper: &reqwest::Client,
    key: &str,
) -> reqwest::Result<reqwest::Response> {
    shopper
        .post(format!("{}/checkout", server.address))
        .form(&[
            ("checkout_key", key),
            ("name", "Ada Shopper"),
            ("email", "ada@example.com"),
            ("provider", "stripe"),
        ])
        .send()
        .await
}

async fn vip(db: &TestDb) -> (i32, i32) {
    held_and_sold(db, "harbour-lights-vip").await
}

async fn wait_until<F, Fut>(what: &str, mut check: F)
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    for _ in 0..200 {
        if check().await {
            return;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("never: {what}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_crash_before_or_after_the_provider_call_gives_the_units_back_and_nothing_is_charged() {
    for point in ["after_checkout_commit", "after_provider_call"] {
        let db = TestDb::new().await;
        db.load_demo().await;
        // plain holds live two seconds, so the way back is quick to watch
        fast_clock(&db.inventory(), 2.0, 60.0).await;
        let sandbox = spawn_sandbox();
        let port = free_port();
        let shopper = browser();

        let mut server = serve(&db, &sandbox, port, Some(point)).await;
        let key = basket(&server, &shopper, 2).await;
        let answer = submit(&server, &shopper, &key).await;
        assert!(answer.is_err(), "{point}: the server died mid-request");
        assert!(!died(&mut server).await.success(), "{point}");
        drop(server);

        // what the crash left: a pending order holding two units, with no
        // payment page we know of
        let (state, session): (String, Option<String>) =
            sqlx::query_as("select state, provider_session_id from orders")
                .fetch_one(&db.pool)
                .await
                .unwrap();
        assert_eq!((state.as_str(), session), ("pending", None), "{point}");
        assert_eq!(vip(&db).await, (2, 0), "{point}");

        // restarted: the sweeper gives the units back at the TTL, and the
        // order stops waiting
        let server = serve(&db, &sandbox, port, None).await;
        wait_until("the units came back", || async { vip(&db).await == (0, 0) }).await;
        wait_until("the order expired", || async {
            sqlx::query_scalar::<_, String>("select state from orders")
                .fetch_one(&db.pool)
                .await
                .unwrap()
                == "expired"
        })
        .await;
        // the same form again finds its order, and holds nothing twice
        let again = submit(&server, &shopper, &key).await.unwrap();
        assert_eq!(again.status(), 303, "{point}");
        assert!(location(&again).starts_with("/orders/"), "{point}");
        assert_eq!(vip(&db).await, (0, 0), "{point}");

        // and a new checkout of the same basket goes all the way
        let front = ShopFront::new(&server.address, &db, &sandbox);
        let basket = Purchase::basket().with(ProviderKind::Stripe);
        let paid = front.buy(&shopper, &basket).await;
        assert_eq!(paid.returned().status, 303, "{point}");
        assert_eq!(vip(&db).await, (0, 2), "{point}");
        let ledger = sandbox.stripe.ledger();
        assert_eq!(
            ledger.charges.len(),
            1,
            "{point}: only the finished checkout was charged"
        );
        assert!(ledger.refunds.is_empty(), "{point}");
        assert_no_drift(&db.inventory()).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_worker_killed_mid_refund_refunds_exactly_once_after_its_restart() {
    let db = TestDb::new().await;
    db.load_demo().await;
    let sandbox = spawn_sandbox();
    let port = free_port();
    let shopper = browser();

    let mut server = serve(&db, &sandbox, port, Some("after_refund_call")).await;
    let front = ShopFront::new(&server.address, &db, &sandbox);
    // two charges for one checkout: one sale and one refund job
    let purchase = Purchase::of("harbour-lights-vip", 1)
        .with(ProviderKind::Stripe)
        .paying(Payment::press("pay-twice").reported(Report::Webhook));
    let paid = front.buy(&shopper, &purchase).await;
    // the shopper comes back too, if the server is still there by then
    let _ = shopper.get(&paid.back_url).send().await;
    // lose the refund's own webhook, so only the job's rerun can close it
    let session = paid.started.page_id.clone();
    wait_until("the refund job was queued", || async {
        sqlx::query_scalar::<_, i64>("select count(*) from outbox_jobs where kind = 'refund'")
            .fetch_one(&db.pool)
            .await
            .unwrap()
            == 1
    })
    .await;
    assert!(
        sandbox
            .stripe
            .set_delivery(&session, holdfast_sandbox::DeliveryMode::Never)
    );
    // the worker takes the refund, the provider makes it, and the process
    // dies before the job is marked done
    assert!(!died(&mut server).await.success());
    drop(server);
    assert_eq!(sandbox.stripe.ledger().refunds.len(), 1);
    let (state, attempts): (String, i32) =
        sqlx::query_as("select state, attempts from outbox_jobs where kind = 'refund'")
            .fetch_one(&db.pool)
            .await
            .unwrap();
    assert_eq!((state.as_str(), attempts), ("pending", 1));

    // restarted: once the dead worker's lease runs out the job runs again,
    // with the same key, and the provider answers with the same refund
    // (pending at first; then the worker reads it by its id until it is
    // done)
    let _server = serve(&db, &sandbox, port, None).await;
    wait_until("the refund job was done", || async {
        sqlx::query_scalar::<_, String>("select state from outbox_jobs where kind = 'refund'")
            .fetch_one(&db.pool)
            .await
            .unwrap()
            == "done"
    })
    .await;
    let (dedupe_key, attempts): (String, i32) =
        sqlx::query_as("select dedupe_key, attempts from outbox_jobs where kind = 'refund'")
            .fetch_one(&db.pool)
            .await
            .unwrap();
    assert!((2..=3).contains(&attempts), "{attempts}");
    let ledger = sandbox.stripe.ledger();
    assert_eq!(ledger.charges.len(), 2);
    assert_eq!(ledger.refunds.len(), 1, "refunded exactly once");
    assert_eq!(
        ledger.refunds[0].idempotency_key.as_deref(),
        Some(holdfast::checkout::refund::idempotency_key(&dedupe_key, 0).as_str())
    );
    // the other charge bought the ticket
    let kept: String = sqlx::query_scalar("select payment_ref from orders where state = 'paid'")
        .fetch_one(&db.pool)
        .await
        .unwrap();
    assert!(ledger.charges.iter().any(|c| c.payment_intent == kept));
    assert_ne!(ledger.refunds[0].payment_intent, kept);
    assert_eq!(vip(&db).await, (0, 1));
    assert_no_drift(&db.inventory()).await;
}
