//! Two web servers and two workers, each its own process, against one
//! database: a storm of shoppers through both servers for the last VIP
//! places, with the workers sweeping and reconciling underneath.

use std::process::Child;
use std::time::{Duration, Instant};

use holdfast::payments::ProviderKind;

use holdfast_testkit::*;

struct Worker(Child);

impl Drop for Worker {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// One shopper through one server: basket, checkout, pay, return.
/// Returns whether they got a payment page.
async fn shop_at(front: ShopFront) -> bool {
    let shopper = browser();
    let purchase = Purchase::of("harbour-lights-vip", 1).with(ProviderKind::Stripe);
    let started = match front.try_start(&shopper, &purchase).await {
        Attempt::Started(started) => started,
        Attempt::Refused(answer) if answer.status == 409 => return false,
        other => panic!("checkout answered {other:?}"),
    };
    let paid = front.pay(&shopper, &started, &Payment::default()).await;
    assert_eq!(paid.returned().status, 303);
    true
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn two_servers_and_two_workers_sell_the_last_twenty_places_exactly_once() {
    let db = TestDb::new().await;
    db.load_demo().await;
    let sandbox = spawn_sandbox();
    let mut servers = Vec::new();
    for _ in 0..2 {
        let bin = env!("CARGO_BIN_EXE_holdfast");
        servers.push(Server::serve(bin, &db, &sandbox, &["--no-worker"]).await);
    }
    // Stripe's webhooks reach the first server only; the returns come back
    // to whichever server started the checkout
    sandbox
        .stripe
        .set_webhook_url(format!("{}/webhooks/stripe", servers[0].address));
    let _workers: Vec<Worker> = (0..2)
        .map(|_| {
            let mut command =
                holdfast_process(env!("CARGO_BIN_EXE_holdfast"), &db, &sandbox, &["worker"]);
            // the reconcilers race the webhooks and the returns
            command.env("HOLDFAST_RECONCILE_AFTER_SECONDS", "0");
            Worker(command.spawn().unwrap())
        })
        .collect();

    let storm = Instant::now();
    let shoppers: Vec<_> = (0..200)
        .map(|i| {
            let front = ShopFront::new(&servers[i % 2].address, &db, &sandbox);
            tokio::spawn(shop_at(front))
        })
        .collect();
    let mut started = 0;
    for shopper in shoppers {
        started += usize::from(shopper.await.unwrap());
    }
    let elapsed = storm.elapsed();
    // every started checkout was paid; wait for the last confirmations
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let paid: i64 = sqlx::query_scalar("select count(*) from orders where state = 'paid'")
            .fetch_one(&db.pool)
            .await
            .unwrap();
        if paid == 20 || Instant::now() > deadline {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    eprintln!(
        "two-server storm: 200 shoppers through 2 servers in {elapsed:?} ({:.0} checkouts/s), {started} started",
        200.0 / elapsed.as_secs_f64()
    );

    assert_eq!(started, 20, "exactly the twenty places found buyers");
    let (paid, confirmed, codes, sold, held): (i64, i64, i64, i32, i32) = sqlx::query_as(
        "select (select count(*) from orders where state = 'paid'), \
                (select count(*) from hold_events where kind = 'confirmed'), \
                (select count(*) from order_items), \
                sold, held from resources where id = 'harbour-lights-vip'",
    )
    .fetch_one(&db.pool)
    .await
    .unwrap();
    assert_eq!((paid, confirmed, codes, sold, held), (20, 20, 20, 20, 0));
    let ledger = sandbox.stripe.ledger();
    assert_eq!(ledger.charges.len(), 20);
    assert!(ledger.refunds.is_empty());
    let refunds: i64 = sqlx::query_scalar("select count(*) from outbox_jobs where kind = 'refund'")
        .fetch_one(&db.pool)
        .await
        .unwrap();
    assert_eq!(refunds, 0);
    assert_no_drift(&db.inventory()).await;
}
