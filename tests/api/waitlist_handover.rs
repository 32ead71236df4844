//! The waiting list's handover from every way units come free, against a
//! real PostgreSQL and over HTTP: two hundred shoppers retrying through the
//! shop's own pages while holds end never get a unit the line is owed; a
//! refund put back on sale and capacity raised go to the line in their own
//! transactions; what is only set aside never stops staff lowering the
//! capacity, nor outlives a product taken off sale; an offer never takes
//! an e-mail past the most per order; the pre-queue counts an address's
//! entries against its cap, under a crowd; removing entries while holds end
//! never deadlocks; a lapsed offer's order is forgotten by housekeeping
//! while its entry stays; forged and stale links over HTTP change nothing.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::Duration;

use futures::future::join_all;
use holdfast::checkout::{self, Release, StartOutcome};
use holdfast::limits::client::Fairness;
use holdfast::limits::{Limits, TrustedProxies};
use holdfast::payments::ProviderKind;
use holdfast::staff::refunds::{self, RefundOutcome, RefundRequest};
use holdfast::waitlist::{self, JoinRequest, Joined};
use holdfast_testkit::engine::{assert_no_drift, held_and_sold, paid, start};
use holdfast_testkit::*;
use reqwest::StatusCode;
use uuid::Uuid;

use super::waitlist::{PRODUCT, held_for_line, line_up, sold_out, states};

async fn resource_of(db: &TestDb) -> String {
    sqlx::query_scalar("select resource_id from products where id = $1")
        .bind(PRODUCT)
        .fetch_one(&db.pool)
        .await
        .unwrap()
}

async fn upsert(db: &TestDb, resource: &str, total: i32) -> String {
    sqlx::query_scalar("select status from hf_upsert_resource($1, $2)")
        .bind(resource)
        .bind(total)
        .fetch_one(&db.pool)
        .await
        .unwrap()
}

/// An entry's token.
async fn token_of(db: &TestDb, id: Uuid) -> String {
    sqlx::query_scalar("select token from waitlist_entries where id = $1")
        .bind(id)
        .fetch_one(&db.pool)
        .await
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_hundred_shoppers_retrying_over_http_never_take_what_comes_back_for_the_line() {
    let app = spawn_app_with(TestDb::with_connections(60).await).await;
    let (resource, orders) = sold_out(&app.db, 20).await;
    app.settled().await;
    let entries = line_up(&app.db, &[1; 20]).await;
    let stop = Arc::new(AtomicBool::new(false));
    let (won, tried) = (Arc::new(AtomicUsize::new(0)), Arc::new(AtomicUsize::new(0)));
    let crowd: Vec<_> = (0..200)
        .map(|_| {
            let (front, stop) = (app.front(), stop.clone());
            let (won, tried) = (won.clone(), tried.clone());
            tokio::spawn(async move {
                let shopper = browser();
                while !stop.load(Ordering::Relaxed) {
                    tried.fetch_add(1, Ordering::Relaxed);
                    if let Attempt::Started(_) =
                        front.try_start(&shopper, &Purchase::of(PRODUCT, 1)).await
                    {
                        won.fetch_add(1, Ordering::SeqCst);
                    }
                    tokio::time::sleep(Duration::from_millis(5)).await;
                }
            })
        })
        .collect();
    tokio::time::sleep(Duration::from_millis(300)).await;
    // half let go, half run out (found by the sweeper or a lazy expiry)
    for (i, order) in orders.iter().enumerate() {
        if i % 2 == 0 {
            checkout::release_order(&app.db.pool, order.id, Release::ShopperLeft)
                .await
                .unwrap();
        } else {
            sqlx::query("update holds set expires_at = now() - interval '1 second' where id = $1")
                .bind(order.hold_id)
                .execute(&app.db.pool)
                .await
                .unwrap();
            sqlx::query(
                "update resources set next_expiry = now() - interval '1 hour' where id = $1",
            )
            .bind(&resource)
            .execute(&app.db.pool)
            .await
            .unwrap();
            sqlx::query("select hf_sweep()")
                .execute(&app.db.pool)
                .await
                .unwrap();
        }
        tokio::time::sleep(Duration::from_millis(30)).await;
    }
    tokio::time::sleep(Duration::from_millis(300)).await;
    stop.store(true, Ordering::Relaxed);
    for shopper in crowd {
        shopper.await.unwrap();
    }
    let tried = tried.load(Ordering::SeqCst);
    assert!(tried >= 400, "the crowd tried only {tried} times");
    assert_eq!(
        won.load(Ordering::SeqCst),
        0,
        "the crowd took units the line was owed ({tried} tries)"
    );
    assert_eq!(states(&app.db, &entries).await, vec!["offered"; 20]);
    assert_eq!(held_for_line(&app.db, &resource).await, (20, 0));
    assert_eq!(held_and_sold(&app.db, &resource).await, (20, 0));
    assert_no_drift(&app.db.inventory()).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refund_put_back_on_sale_goes_to_the_line_in_the_refunds_own_transaction() {
    let db = TestDb::new().await;
    db.load_demo().await;
    let resource = resource_of(&db).await;
    assert_eq!(upsert(&db, &resource, 2).await, "updated");
    let first = paid(&db, "bought-1", &[(PRODUCT, 1)]).await;
    let second = paid(&db, "bought-2", &[(PRODUCT, 1)]).await;
    let entries = line_up(&db, &[1, 1]).await;
    assert_eq!(states(&db, &entries).await, ["waiting", "waiting"]);
    let refund = |order: Uuid, restock: bool| RefundRequest {
        order_id: order,
        units: Vec::new(),
        reason: "changed their mind".into(),
        restock,
        override_redeemed: false,
        by: "tests".into(),
        staff: None,
        key: None,
    };
    let outcome = refunds::refund_order(&db.pool, &refund(first.id, true))
        .await
        .unwrap();
    assert!(
        matches!(outcome, RefundOutcome::Queued { .. }),
        "{outcome:?}"
    );
    assert_eq!(states(&db, &entries).await, ["offered", "waiting"]);
    // the transaction that gave the unit back held it for the entry
    let (returned_by, offered_by): (String, String) = sqlx::query_as(
        "select (select e.xmin::text from hold_events e join holds h on h.id = e.hold_id \
                  where e.kind = 'returned' and h.purchase_id = $1), \
                (select xmin::text from holds where account_id = $2)",
    )
    .bind(first.hold_id)
    .bind(format!("waitlist:{}", entries[0]))
    .fetch_one(&db.pool)
    .await
    .unwrap();
    assert_eq!(returned_by, offered_by);
    // units taken off sale (a cancelled slot) go to nobody
    refunds::refund_order(&db.pool, &refund(second.id, false))
        .await
        .unwrap();
    assert_eq!(states(&db, &entries).await, ["offered", "waiting"]);
    let total: i32 = sqlx::query_scalar("select total from resources where id = $1")
        .bind(&resource)
        .fetch_one(&db.pool)
        .await
        .unwrap();
    assert_eq!(total, 1);
    assert_eq!(held_and_sold(&db, &resource).await, (1, 0));
    assert_no_drift(&db.inventory()).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn capacity_raised_goes_to_the_line_first_and_what_is_set_aside_never_blocks_lowering_it() {
    let db = TestDb::new().await;
    let (resource, orders) = sold_out(&db, 3).await;
    let entries = line_up(&db, &[1, 3]).await;
    // three more: the first entry takes one, the group of three waits for
    // one more and two are set aside for it
    assert_eq!(upsert(&db, &resource, 6).await, "updated");
    assert_eq!(states(&db, &entries).await, ["offered", "waiting"]);
    assert_eq!(held_for_line(&db, &resource).await, (1, 2));
    assert_eq!(held_and_sold(&db, &resource).await, (6, 0));
    // below what shoppers and offers hold: refused, and what was set aside
    // stays set aside
    assert_eq!(upsert(&db, &resource, 3).await, "capacity_below_committed");
    assert_eq!(held_for_line(&db, &resource).await, (1, 2));
    // down to what they hold: only the set-aside units give way
    assert_eq!(upsert(&db, &resource, 4).await, "updated");
    assert_eq!(held_for_line(&db, &resource).await, (1, 0));
    assert_eq!(held_and_sold(&db, &resource).await, (4, 0));
    // one shopper lets go: it is set aside for the group again
    checkout::release_order(&db.pool, orders[0].id, Release::ShopperLeft)
        .await
        .unwrap();
    assert_eq!(held_for_line(&db, &resource).await, (1, 1));
    assert_no_drift(&db.inventory()).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_product_taken_off_sale_keeps_nothing_set_aside() {
    let db = TestDb::new().await;
    let (resource, orders) = sold_out(&db, 2).await;
    line_up(&db, &[2]).await;
    checkout::release_order(&db.pool, orders[0].id, Release::ShopperLeft)
        .await
        .unwrap();
    assert_eq!(held_for_line(&db, &resource).await, (0, 1));
    sqlx::query("update products set archived_at = now() where id = $1")
        .bind(PRODUCT)
        .execute(&db.pool)
        .await
        .unwrap();
    // the next change looks at the line again: nobody can be served from it
    checkout::release_order(&db.pool, orders[1].id, Release::ShopperLeft)
        .await
        .unwrap();
    assert_eq!(held_for_line(&db, &resource).await, (0, 0));
    assert_eq!(held_and_sold(&db, &resource).await, (0, 0));
    assert_no_drift(&db.inventory()).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_offer_never_takes_an_email_past_the_most_per_order() {
    let db = TestDb::new().await;
    // Ada holds all three units, counted against her e-mail (the shop's
    // per-e-mail limit is on); then at most two per order
    let (resource, _) = sold_out(&db, 0).await;
    assert_eq!(upsert(&db, &resource, 3).await, "updated");
    let mut orders = Vec::new();
    for i in 0..3 {
        let mut form = start(&format!("ada-{i}"), &[(PRODUCT, 1)]);
        form.limits.email_key = Some("ada@example.com".into());
        match checkout::start_checkout(&db.pool, &form).await.unwrap() {
            StartOutcome::Started { order, .. } => orders.push(order),
            other => panic!("expected a started checkout, got {other:?}"),
        }
    }
    sqlx::query("update products set max_per_order = 2 where id = $1")
        .bind(PRODUCT)
        .execute(&db.pool)
        .await
        .unwrap();
    let mut entries = Vec::new();
    for email in ["Ada@example.com", "bea@example.com"] {
        let joined = waitlist::join(
            &db.pool,
            &JoinRequest {
                product_id: PRODUCT.into(),
                name: "Waiting".into(),
                email: email.into(),
                qty: 1,
                provider: ProviderKind::Stripe,
                address: None,
            },
        )
        .await
        .unwrap();
        assert_eq!(joined, Joined::Mailed);
        let (id, token): (Uuid, String) =
            sqlx::query_as("select id, token from waitlist_entries where email = $1")
                .bind(email)
                .fetch_one(&db.pool)
                .await
                .unwrap();
        waitlist::confirm(&db.pool, &token).await.unwrap();
        entries.push(id);
    }
    // one of Ada's comes back: she still holds two, so Bea is served
    checkout::release_order(&db.pool, orders[0].id, Release::ShopperLeft)
        .await
        .unwrap();
    assert_eq!(states(&db, &entries).await, ["waiting", "offered"]);
    // another: Ada holds one now, and takes her place's offer
    checkout::release_order(&db.pool, orders[1].id, Release::ShopperLeft)
        .await
        .unwrap();
    assert_eq!(states(&db, &entries).await, ["offered", "offered"]);
    assert_eq!(held_for_line(&db, &resource).await, (2, 0));
    assert_no_drift(&db.inventory()).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn thirty_joins_at_once_from_one_address_get_exactly_its_cap() {
    let limits = Limits {
        address_units: Some(3),
        ..Limits::off()
    };
    let app = spawn_app_shaped(TestDb::new().await, |_, shop| {
        shop.fairness = Fairness::new(
            shop.pool.clone(),
            limits,
            TrustedProxies::parse("127.0.0.1").unwrap(),
        );
    })
    .await;
    app.load_demo().await;
    let join = |i: usize, from: &'static str| {
        let url = format!("{}/waitlist/{PRODUCT}", app.address);
        async move {
            let email = format!("crowd{i}@example.com");
            let answer = browser()
                .post(url)
                .header("X-Forwarded-For", from)
                .form(&[("name", "Crowd"), ("email", email.as_str()), ("qty", "1")])
                .send()
                .await
                .unwrap();
            let status = answer.status();
            (status, answer.text().await.unwrap())
        }
    };
    let answers = join_all((0..30).map(|i| join(i, "203.0.113.7"))).await;
    let took = answers.iter().filter(|(s, _)| *s == StatusCode::OK).count();
    let refused: Vec<_> = answers
        .iter()
        .filter(|(s, _)| *s == StatusCode::UNPROCESSABLE_ENTITY)
        .collect();
    assert_eq!((took, refused.len()), (3, 27), "{answers:?}");
    assert!(
        refused[0]
            .1
            .contains("the most one address may wait for. Nothing was added."),
        "{}",
        refused[0].1
    );
    // another address has a cap of its own
    let other = join_all((30..35).map(|i| join(i, "198.51.100.4"))).await;
    assert_eq!(
        other.iter().filter(|(s, _)| *s == StatusCode::OK).count(),
        3
    );
    let (entries, mails): (Vec<String>, i64) = sqlx::query_as(
        "select array_agg(client_address order by client_address), \
                (select count(*) from outbox_jobs where kind = 'waitlist_mail') \
           from waitlist_entries",
    )
    .fetch_one(&app.db.pool)
    .await
    .unwrap();
    assert_eq!(
        entries,
        [
            "198.51.100.4",
            "198.51.100.4",
            "198.51.100.4",
            "203.0.113.7",
            "203.0.113.7",
            "203.0.113.7"
        ]
    );
    assert_eq!(mails, 6, "one mail per entry written, none for a refusal");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn removing_entries_while_holds_end_never_deadlocks() {
    let db = TestDb::with_connections(20).await;
    let (resource, orders) = sold_out(&db, 40).await;
    // groups of two: each unit that comes back is set aside, then the next
    // one serves a group, so every end of a hold walks the line
    let entries = line_up(&db, &[2; 40]).await;
    let ends = {
        let pool = db.pool.clone();
        tokio::spawn(async move {
            for order in orders {
                checkout::release_order(&pool, order.id, Release::ShopperLeft)
                    .await
                    .unwrap();
            }
        })
    };
    let removals = {
        let pool = db.pool.clone();
        let entries = entries.clone();
        tokio::spawn(async move {
            let mut removed = 0;
            for id in entries.iter().rev() {
                // no retry here: a deadlock would be an error
                if waitlist::remove(&pool, holdfast::audit::Actor::Operator("tests"), *id)
                    .await
                    .unwrap()
                {
                    removed += 1;
                }
            }
            removed
        })
    };
    ends.await.unwrap();
    let removed = removals.await.unwrap();
    let offered = states(&db, &entries)
        .await
        .iter()
        .filter(|s| *s == "offered")
        .count();
    assert_eq!(offered + removed, 40, "every entry offered or removed");
    let (by_offers, aside) = held_for_line(&db, &resource).await;
    assert_eq!(by_offers, 2 * offered as i64);
    assert_eq!(aside, 0, "nobody waits: nothing set aside");
    assert_eq!(held_and_sold(&db, &resource).await, (by_offers as i32, 0));
    assert_no_drift(&db.inventory()).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn housekeeping_forgets_a_lapsed_offers_order_and_keeps_its_entry() {
    let db = TestDb::new().await;
    let (resource, orders) = sold_out(&db, 1).await;
    let entries = line_up(&db, &[1]).await;
    checkout::release_order(&db.pool, orders[0].id, Release::ShopperLeft)
        .await
        .unwrap();
    sqlx::query("update holds set expires_at = now() - interval '1 second' where account_id = $1")
        .bind(format!("waitlist:{}", entries[0]))
        .execute(&db.pool)
        .await
        .unwrap();
    sqlx::query("update resources set next_expiry = now() - interval '1 hour' where id = $1")
        .bind(&resource)
        .execute(&db.pool)
        .await
        .unwrap();
    sqlx::query("select hf_sweep()")
        .execute(&db.pool)
        .await
        .unwrap();
    checkout::expire_abandoned_orders(&db.pool).await.unwrap();
    assert_eq!(states(&db, &entries).await, ["lapsed"]);
    sqlx::query(
        "update orders set created_at = now() - interval '90 days' \
          where state = 'expired' or checkout_key like 'waitlist-%'",
    )
    .execute(&db.pool)
    .await
    .unwrap();
    let tidied = holdfast::worker::housekeeping::Housekeeping::new(db.pool.clone(), 30, None)
        .run_once()
        .await
        .expect("housekeeping passes over a lapsed offer's order");
    assert!(tidied.orders >= 1, "{tidied:?}");
    let (state, order): (String, Option<Uuid>) =
        sqlx::query_as("select state, order_id from waitlist_entries where id = $1")
            .bind(entries[0])
            .fetch_one(&db.pool)
            .await
            .unwrap();
    assert_eq!((state.as_str(), order), ("lapsed", None));
    let offers: i64 =
        sqlx::query_scalar("select count(*) from orders where checkout_key like 'waitlist-%'")
            .fetch_one(&db.pool)
            .await
            .unwrap();
    assert_eq!(offers, 0, "the lapsed offer's order is forgotten");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn forged_and_stale_links_over_http_change_nothing() {
    let app = spawn_app().await;
    let (resource, orders) = sold_out(&app.db, 2).await;
    app.settled().await;
    let entries = line_up(&app.db, &[1, 1]).await;
    checkout::release_order(&app.db.pool, orders[0].id, Release::ShopperLeft)
        .await
        .unwrap();
    assert_eq!(states(&app.db, &entries).await, ["offered", "waiting"]);
    // the offer runs out unclaimed, and moves on
    sqlx::query("update holds set expires_at = now() - interval '1 second' where account_id = $1")
        .bind(format!("waitlist:{}", entries[0]))
        .execute(&app.db.pool)
        .await
        .unwrap();
    sqlx::query("update resources set next_expiry = now() - interval '1 hour' where id = $1")
        .bind(&resource)
        .execute(&app.db.pool)
        .await
        .unwrap();
    sqlx::query("select hf_sweep()")
        .execute(&app.db.pool)
        .await
        .unwrap();
    assert_eq!(states(&app.db, &entries).await, ["lapsed", "offered"]);
    let lapsed = token_of(&app.db, entries[0]).await;
    let before = snapshot(&app.db.pool).await;
    let post = |path: String| {
        let url = format!("{}{path}", app.address);
        async move { browser().post(url).send().await.unwrap().status() }
    };
    let forged = "ab".repeat(32);
    for action in ["confirm", "leave", "claim"] {
        for token in [forged.as_str(), &forged[2..], "not-a-token"] {
            let status = post(format!("/waitlist/entry/{token}/{action}")).await;
            assert!(
                status == StatusCode::NOT_FOUND || status == StatusCode::BAD_REQUEST,
                "{action} with {token}: {status}"
            );
        }
    }
    // the lapsed offer's link: nothing is held for it, and no page opens
    assert_eq!(
        post(format!("/waitlist/entry/{lapsed}/claim")).await,
        StatusCode::CONFLICT
    );
    // confirming or leaving it again moves nothing
    assert_eq!(
        post(format!("/waitlist/entry/{lapsed}/confirm")).await,
        StatusCode::SEE_OTHER
    );
    let left = post(format!("/waitlist/entry/{lapsed}/leave")).await;
    assert_eq!(left, StatusCode::OK);
    assert_eq!(snapshot(&app.db.pool).await, before, "nothing changed");
    let pages: i64 = sqlx::query_scalar(
        "select count(*) from orders where checkout_key like 'waitlist-%' \
            and provider_session_id is not null",
    )
    .fetch_one(&app.db.pool)
    .await
    .unwrap();
    assert_eq!(pages, 0, "no payment page was opened");
    assert_no_drift(&app.db.inventory()).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_address_cap_counts_only_what_its_entries_want() {
    let db = TestDb::new().await;
    db.load_demo().await;
    let join = |email: &str, qty: i64| {
        let request = JoinRequest {
            product_id: PRODUCT.into(),
            name: "Shared".into(),
            email: email.into(),
            qty,
            provider: ProviderKind::Stripe,
            address: Some(("203.0.113.50".into(), 3)),
        };
        let pool = db.pool.clone();
        async move { waitlist::join(&pool, &request).await.unwrap() }
    };
    assert_eq!(join("a@example.com", 2).await, Joined::Mailed);
    // two more would make four: refused, and nothing is counted for it
    assert_eq!(
        join("b@example.com", 2).await,
        Joined::AddressFull { cap: 3 }
    );
    // one more fits
    assert_eq!(join("c@example.com", 1).await, Joined::Mailed);
    // an e-mail already on the list joins again: the same answer as ever
    // (nothing written, nothing counted), though the address is full
    assert_eq!(join("A@example.com", 2).await, Joined::Mailed);
    assert_eq!(
        join("d@example.com", 1).await,
        Joined::AddressFull { cap: 3 }
    );
    let entries: Vec<(String, i32)> =
        sqlx::query_as("select email_key, qty from waitlist_entries order by email_key")
            .fetch_all(&db.pool)
            .await
            .unwrap();
    assert_eq!(
        entries,
        [
            ("a@example.com".to_owned(), 2),
            ("c@example.com".to_owned(), 1)
        ]
    );
}
