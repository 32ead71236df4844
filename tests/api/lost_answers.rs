//! Unknown outcomes, at exact places: `holdfast` runs as its own process
//! with `HOLDFAST_LOSE_ANSWER_AT` set, and the first time it reaches that
//! point (just after a commit) it fails as if the primary had died before
//! the commit's answer arrived. What a failover leaves by chance, once per
//! fault, happens here every time. The write is run again whole, reads back
//! what the first run did, and everyone is answered as if nothing had
//! happened: never a second order, a second sale or "already used" for the
//! scan that used it.

use std::time::Duration;

use holdfast_testkit::*;

async fn serve_losing(db: &TestDb, sandbox: &TestSandbox, point: &str) -> Server {
    let port = free_port();
    let address = format!("http://127.0.0.1:{port}");
    sandbox
        .stripe
        .set_webhook_url(format!("{address}/webhooks/stripe"));
    let mut command = holdfast_process(env!("CARGO_BIN_EXE_holdfast"), db, sandbox, &["serve"]);
    command
        .env("HOLDFAST_ADDR", format!("127.0.0.1:{port}"))
        .env("HOLDFAST_LOSE_ANSWER_AT", point);
    let server = Server {
        child: command.spawn().expect("start holdfast serve"),
        address,
    };
    ready(&server).await;
    server
}

/// Two VIP tickets in a new shopper's basket, checked out with Stripe:
/// the answer to the form.
async fn check_out(server: &Server, shopper: &reqwest::Client) -> reqwest::Response {
    let added = shopper
        .post(format!("{}/basket/add", server.address))
        .form(&[("product_id", "harbour-lights-vip"), ("qty", "2")])
        .send()
        .await
        .unwrap();
    assert_eq!(added.status(), 303);
    let page = shopper
        .get(format!("{}/basket", server.address))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    shopper
        .post(format!("{}/checkout", server.address))
        .form(&[
            ("checkout_key", field(&page, "checkout_key").as_str()),
            ("name", "Ada Shopper"),
            ("email", "ada@example.com"),
            ("provider", "stripe"),
        ])
        .send()
        .await
        .unwrap()
}

async fn orders(db: &TestDb) -> Vec<(String, Option<String>)> {
    sqlx::query_as("select state, provider_session_id from orders order by created_at")
        .fetch_all(&db.pool)
        .await
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_checkout_whose_commit_answer_was_lost_goes_on_to_pay_with_one_order() {
    let db = TestDb::new().await;
    db.load_demo().await;
    let sandbox = spawn_sandbox();
    let server = serve_losing(&db, &sandbox, "checkout_start").await;
    let shopper = browser();

    let answer = check_out(&server, &shopper).await;
    // sent to pay, as if the answer had arrived: not the order page a
    // second submit of the form is sent to, and not "one moment"
    assert_eq!(answer.status(), 303);
    let pay_at = location(&answer);
    assert!(
        pay_at.starts_with(&format!("{}/stripe/pay/", sandbox.base)),
        "{pay_at}"
    );
    let started = orders(&db).await;
    assert_eq!(started.len(), 1, "one order: {started:?}");
    assert_eq!(started[0].0, "pending");
    assert_eq!(held_and_sold(&db, "harbour-lights-vip").await, (2, 0));

    let paid = shopper.post(format!("{pay_at}/pay")).send().await.unwrap();
    let back = shopper.get(location(&paid)).send().await.unwrap();
    assert_eq!(back.status(), 303);
    assert_eq!(orders(&db).await[0].0, "paid");
    assert_eq!(held_and_sold(&db, "harbour-lights-vip").await, (0, 2));
    let ledger = sandbox.stripe.ledger();
    assert_eq!(ledger.charges.len(), 1);
    assert!(ledger.refunds.is_empty());
    assert_no_drift(&db.inventory()).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_payment_whose_confirmation_answer_was_lost_is_sold_once_and_nobody_sees_an_error() {
    let db = TestDb::new().await;
    db.load_demo().await;
    let sandbox = spawn_sandbox();
    let server = serve_losing(&db, &sandbox, "confirmation").await;
    let shopper = browser();

    let answer = check_out(&server, &shopper).await;
    assert_eq!(answer.status(), 303);
    let paid = shopper
        .post(format!("{}/pay", location(&answer)))
        .send()
        .await
        .unwrap();
    // the return and the webhook race; whichever met the lost answer ran
    // again and found the payment confirmed
    let back = shopper.get(location(&paid)).send().await.unwrap();
    assert_eq!(back.status(), 303);
    assert!(location(&back).starts_with("/orders/"));
    wait_for_event(|| sandbox.stripe.ledger(), "checkout.session.completed").await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    let ledger = sandbox.stripe.ledger();
    assert!(
        ledger
            .deliveries
            .iter()
            .all(|d| d.status.is_some_and(|s| s < 500)),
        "no webhook was answered 5xx: {:?}",
        ledger.deliveries
    );
    assert_eq!(orders(&db).await[0].0, "paid");
    let tickets: i64 = sqlx::query_scalar("select count(*) from order_items")
        .fetch_one(&db.pool)
        .await
        .unwrap();
    assert_eq!(tickets, 2, "one code per ticket, issued once");
    let confirmations: i64 =
        sqlx::query_scalar("select count(*) from outbox_jobs where kind = 'order_confirmation'")
            .fetch_one(&db.pool)
            .await
            .unwrap();
    assert_eq!(confirmations, 1, "one confirmation message");
    assert_eq!(ledger.charges.len(), 1);
    assert!(ledger.refunds.is_empty(), "nothing refunded: {ledger:?}");
    assert_eq!(held_and_sold(&db, "harbour-lights-vip").await, (0, 2));
    assert_no_drift(&db.inventory()).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_scan_whose_commit_answer_was_lost_is_told_admitted_and_the_next_scan_already_used() {
    let db = TestDb::new().await;
    db.load_demo().await;
    let sandbox = spawn_sandbox();
    let port = free_port();
    let address = format!("http://127.0.0.1:{port}");
    sandbox
        .stripe
        .set_webhook_url(format!("{address}/webhooks/stripe"));
    let mut command = holdfast_process(env!("CARGO_BIN_EXE_holdfast"), &db, &sandbox, &["serve"]);
    command.env("HOLDFAST_ADDR", format!("127.0.0.1:{port}"));
    let server = Server {
        child: command.spawn().expect("start holdfast serve"),
        address,
    };
    ready(&server).await;
    let shopper = browser();
    let answer = check_out(&server, &shopper).await;
    let paid = shopper
        .post(format!("{}/pay", location(&answer)))
        .send()
        .await
        .unwrap();
    let _ = shopper.get(location(&paid)).send().await.unwrap();
    let code: String = sqlx::query_scalar("select code from order_items order by code limit 1")
        .fetch_one(&db.pool)
        .await
        .unwrap();

    let scan = |lose: bool| {
        let mut command = holdfast_process(
            env!("CARGO_BIN_EXE_holdfast"),
            &db,
            &sandbox,
            &["--json", "redeem", &code],
        );
        command.args(["--place", "North door"]);
        if lose {
            command.env("HOLDFAST_LOSE_ANSWER_AT", "redemption");
        }
        command
            .stdout(std::process::Stdio::piped())
            .output()
            .expect("run holdfast redeem")
    };
    let first = scan(true);
    assert_eq!(
        first.status.code(),
        Some(0),
        "admitted, not already used by itself"
    );
    let said: serde_json::Value = serde_json::from_slice(&first.stdout).unwrap();
    assert_eq!(said["outcome"], "admitted");
    let second = scan(false);
    assert_eq!(second.status.code(), Some(5), "the next scan: already used");
    let redemptions: i64 = sqlx::query_scalar("select count(*) from redemptions")
        .fetch_one(&db.pool)
        .await
        .unwrap();
    assert_eq!(redemptions, 1);
}
