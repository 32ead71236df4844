//! The waiting list against a real PostgreSQL: freed units reach the next
//! entry in the transaction that frees them while a crowd retries the same
//! product, 50 entries of mixed group sizes served in order as 30 units
//! come back one by one, an offer that runs out moving on in the same
//! transaction, forged and reused links changing nothing, and a shopper
//! going from the join form to a paid order over HTTP.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::Duration;

use holdfast::checkout::{self, Release, StartOutcome};
use holdfast::payments::ProviderKind;
use holdfast::waitlist::{self, Confirmed, JoinRequest, Joined};
use holdfast_testkit::engine::{assert_no_drift, held_and_sold, start, started};
use holdfast_testkit::*;
use reqwest::StatusCode;
use uuid::Uuid;

pub(crate) const PRODUCT: &str = "wild-honey";

/// The demo shop with `total` units of the product, each held by an order
/// of one: the orders.
pub(crate) async fn sold_out(db: &TestDb, total: i32) -> (String, Vec<checkout::Order>) {
    db.load_demo().await;
    let resource: String = sqlx::query_scalar("select resource_id from products where id = $1")
        .bind(PRODUCT)
        .fetch_one(&db.pool)
        .await
        .unwrap();
    sqlx::query("select hf_upsert_resource($1, $2)")
        .bind(&resource)
        .bind(total)
        .execute(&db.pool)
        .await
        .unwrap();
    let mut orders = Vec::new();
    for i in 0..total {
        orders.push(started(db, &format!("holder-{i}"), &[(PRODUCT, 1)]).await);
    }
    (resource, orders)
}

/// Entries of these sizes joined and confirmed in order: their ids.
pub(crate) async fn line_up(db: &TestDb, sizes: &[i64]) -> Vec<Uuid> {
    let mut ids = Vec::new();
    for (i, qty) in sizes.iter().enumerate() {
        let joined = waitlist::join(
            &db.pool,
            &JoinRequest {
                product_id: PRODUCT.into(),
                name: format!("Waiting {i}"),
                email: format!("wait{i}@example.com"),
                qty: *qty,
                provider: ProviderKind::Stripe,
                address: None,
            },
        )
        .await
        .unwrap();
        assert_eq!(joined, Joined::Mailed);
        let (id, token): (Uuid, String) =
            sqlx::query_as("select id, token from waitlist_entries where email = $1")
                .bind(format!("wait{i}@example.com"))
                .fetch_one(&db.pool)
                .await
                .unwrap();
        assert_eq!(
            waitlist::confirm(&db.pool, &token).await.unwrap(),
            Confirmed::InLine
        );
        ids.push(id);
    }
    ids
}

/// Shoppers who keep trying to buy one unit until told to stop: how many
/// got one.
pub(crate) fn crowd(
    db: &TestDb,
    shoppers: usize,
    stop: Arc<AtomicBool>,
) -> tokio::task::JoinHandle<usize> {
    let pool = db.pool.clone();
    tokio::spawn(async move {
        let won = Arc::new(AtomicUsize::new(0));
        let tasks: Vec<_> = (0..shoppers)
            .map(|s| {
                let (pool, stop, won) = (pool.clone(), stop.clone(), won.clone());
                tokio::spawn(async move {
                    let mut n = 0;
                    while !stop.load(Ordering::Relaxed) {
                        n += 1;
                        let key = format!("crowd-{s}-{n}");
                        if let StartOutcome::Started { .. } =
                            checkout::start_checkout(&pool, &start(&key, &[(PRODUCT, 1)]))
                                .await
                                .unwrap()
                        {
                            won.fetch_add(1, Ordering::SeqCst);
                        }
                        tokio::time::sleep(Duration::from_millis(2)).await;
                    }
                })
            })
            .collect();
        for task in tasks {
            task.await.unwrap();
        }
        won.load(Ordering::SeqCst)
    })
}

pub(crate) async fn states(db: &TestDb, ids: &[Uuid]) -> Vec<String> {
    let mut out = Vec::new();
    for id in ids {
        out.push(
            sqlx::query_scalar("select state from waitlist_entries where id = $1")
                .bind(id)
                .fetch_one(&db.pool)
                .await
                .unwrap(),
        );
    }
    out
}

/// Units held for the line: by offers, and set aside for those it fits
/// nobody yet.
pub(crate) async fn held_for_line(db: &TestDb, resource: &str) -> (i64, i64) {
    sqlx::query_as(
        "select coalesce(sum(qty) filter (where account_id like 'waitlist:%'), 0)::bigint, \
                coalesce(sum(qty) filter (where account_id = 'waitlist-line'), 0)::bigint \
           from holds where resource_id = $1 and state in ('held', 'awaiting_payment')",
    )
    .bind(resource)
    .fetch_one(&db.pool)
    .await
    .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn freed_units_reach_the_line_before_a_retrying_crowd() {
    let db = TestDb::with_connections(40).await;
    let (resource, orders) = sold_out(&db, 20).await;
    let entries = line_up(&db, &[1; 20]).await;
    let stop = Arc::new(AtomicBool::new(false));
    let crowd = crowd(&db, 30, stop.clone());
    tokio::time::sleep(Duration::from_millis(200)).await;
    // half let go by their shoppers, half run out (found by the crowd's
    // own lazy expiry, or the sweeper)
    for (i, order) in orders.iter().enumerate() {
        if i % 2 == 0 {
            checkout::release_order(&db.pool, order.id, Release::ShopperLeft)
                .await
                .unwrap();
        } else {
            sqlx::query("update holds set expires_at = now() - interval '1 second' where id = $1")
                .bind(order.hold_id)
                .execute(&db.pool)
                .await
                .unwrap();
            sqlx::query(
                "update resources set next_expiry = now() - interval '1 hour' where id = $1",
            )
            .bind(&resource)
            .execute(&db.pool)
            .await
            .unwrap();
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    tokio::time::sleep(Duration::from_millis(300)).await;
    sqlx::query("select hf_sweep()")
        .execute(&db.pool)
        .await
        .unwrap();
    tokio::time::sleep(Duration::from_millis(200)).await;
    stop.store(true, Ordering::Relaxed);
    let crowd_won = crowd.await.unwrap();
    assert_eq!(crowd_won, 0, "the crowd took units the line was owed");
    assert_eq!(states(&db, &entries).await, vec!["offered"; 20]);
    assert_eq!(held_for_line(&db, &resource).await, (20, 0));
    assert_eq!(held_and_sold(&db, &resource).await, (20, 0));
    let orders: i64 = sqlx::query_scalar(
        "select count(*) from orders where checkout_key like 'waitlist-%' and state = 'pending'",
    )
    .fetch_one(&db.pool)
    .await
    .unwrap();
    assert_eq!(orders, 20, "each offer is a pending order");
    assert_no_drift(&db.inventory()).await;
}

/// Which entries (by position) a line of these sizes serves as units come
/// back one at a time, and what is left set aside: the rule the database
/// runs, written out.
fn served(sizes: &[i64], freed: i64, in_order: bool) -> (Vec<usize>, i64) {
    let mut waiting: Vec<usize> = (0..sizes.len()).collect();
    let mut out = Vec::new();
    let mut left = 0;
    for _ in 0..freed {
        left += 1;
        let mut still = Vec::new();
        let mut blocked = false;
        for i in waiting {
            if !blocked && sizes[i] <= left {
                left -= sizes[i];
                out.push(i);
            } else {
                if in_order {
                    blocked = true;
                }
                still.push(i);
            }
        }
        waiting = still;
    }
    (out, left)
}

async fn mixed_groups(in_order: bool) {
    let db = TestDb::with_connections(40).await;
    let (resource, orders) = sold_out(&db, 30).await;
    sqlx::query("update products set waitlist_in_order = $2 where id = $1")
        .bind(PRODUCT)
        .bind(in_order)
        .execute(&db.pool)
        .await
        .unwrap();
    let sizes: Vec<i64> = (0..50).map(|i| [2, 1, 3, 1, 4, 2, 1][i % 7]).collect();
    let entries = line_up(&db, &sizes).await;
    let stop = Arc::new(AtomicBool::new(false));
    let crowd = crowd(&db, 20, stop.clone());
    tokio::time::sleep(Duration::from_millis(100)).await;
    for order in &orders {
        checkout::release_order(&db.pool, order.id, Release::ShopperLeft)
            .await
            .unwrap();
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    tokio::time::sleep(Duration::from_millis(200)).await;
    stop.store(true, Ordering::Relaxed);
    assert_eq!(
        crowd.await.unwrap(),
        0,
        "the crowd took units the line was owed"
    );
    let (want, aside) = served(&sizes, 30, in_order);
    // in the order they were served: their offers' holds, by time
    let got: Vec<usize> = sqlx::query_scalar::<_, Uuid>(
        "select w.id from waitlist_entries w join orders o on o.id = w.order_id \
          where w.state = 'offered' order by o.hold_id",
    )
    .fetch_all(&db.pool)
    .await
    .unwrap()
    .into_iter()
    .map(|id| entries.iter().position(|e| *e == id).unwrap())
    .collect();
    assert_eq!(got, want, "the entries served, in the order served");
    let offered: i64 = want.iter().map(|i| sizes[*i]).sum();
    assert_eq!(held_for_line(&db, &resource).await, (offered, aside));
    assert_eq!(offered + aside, 30, "no unit lost or doubled");
    assert_eq!(held_and_sold(&db, &resource).await, (30, 0));
    assert_no_drift(&db.inventory()).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fifty_mixed_groups_are_served_in_order_as_thirty_units_come_back() {
    mixed_groups(false).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn in_strict_order_a_large_group_holds_up_those_behind_it() {
    mixed_groups(true).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_offer_not_claimed_in_time_moves_on_in_the_same_transaction() {
    let db = TestDb::new().await;
    let (resource, orders) = sold_out(&db, 2).await;
    let entries = line_up(&db, &[1, 1, 1]).await;
    checkout::release_order(&db.pool, orders[0].id, Release::ShopperLeft)
        .await
        .unwrap();
    assert_eq!(
        states(&db, &entries).await,
        ["offered", "waiting", "waiting"]
    );
    // the offer's window passes; the sweeper ends it
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
    assert_eq!(
        states(&db, &entries).await,
        ["lapsed", "offered", "waiting"]
    );
    // one transaction expired the first offer and made the second
    let (expired_by, offered_by): (String, String) = sqlx::query_as(
        "select (select xmin::text from holds where account_id = $1), \
                (select xmin::text from holds where account_id = $2)",
    )
    .bind(format!("waitlist:{}", entries[0]))
    .bind(format!("waitlist:{}", entries[1]))
    .fetch_one(&db.pool)
    .await
    .unwrap();
    assert_eq!(expired_by, offered_by);
    // the lapsed offer's order ends as any abandoned order does
    checkout::expire_abandoned_orders(&db.pool).await.unwrap();
    let lapsed_order: String = sqlx::query_scalar(
        "select o.state from orders o join waitlist_entries w on w.order_id = o.id where w.id = $1",
    )
    .bind(entries[0])
    .fetch_one(&db.pool)
    .await
    .unwrap();
    assert_eq!(lapsed_order, "expired");
    assert_eq!(held_and_sold(&db, &resource).await, (2, 0));
    assert_no_drift(&db.inventory()).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn forged_reused_and_duplicate_links_change_nothing() {
    let db = TestDb::new().await;
    let (resource, orders) = sold_out(&db, 1).await;
    let entries = line_up(&db, &[1]).await;
    let before = snapshot(&db.pool).await;
    // forged: the right shape, no entry; or not a token at all
    for forged in ["0".repeat(64), "nope".into(), "../../etc".into()] {
        assert_eq!(
            waitlist::confirm(&db.pool, &forged).await.unwrap(),
            Confirmed::NotFound
        );
    }
    // reused: confirmed before, nothing moves
    let token: String = sqlx::query_scalar("select token from waitlist_entries where id = $1")
        .bind(entries[0])
        .fetch_one(&db.pool)
        .await
        .unwrap();
    assert_eq!(
        waitlist::confirm(&db.pool, &token).await.unwrap(),
        Confirmed::Already
    );
    assert_eq!(snapshot(&db.pool).await, before, "nothing changed");
    // the same e-mail again, written otherwise: the same answer, one entry
    for email in ["WAIT0@example.com", " wait0@EXAMPLE.com "] {
        let joined = waitlist::join(
            &db.pool,
            &JoinRequest {
                product_id: PRODUCT.into(),
                name: "Again".into(),
                email: email.into(),
                qty: 1,
                provider: ProviderKind::Stripe,
                address: None,
            },
        )
        .await
        .unwrap();
        assert_eq!(joined, Joined::Mailed);
    }
    let (entries_now, mails): (i64, i64) = sqlx::query_as(
        "select (select count(*) from waitlist_entries), \
                (select count(*) from outbox_jobs where kind = 'waitlist_mail')",
    )
    .fetch_one(&db.pool)
    .await
    .unwrap();
    assert_eq!((entries_now, mails), (1, 1));
    // bad input: refused, nothing written
    let bad = |qty: i64, email: &str, product: &str| JoinRequest {
        product_id: product.into(),
        name: "Bad".into(),
        email: email.into(),
        qty,
        provider: ProviderKind::Stripe,
        address: None,
    };
    assert!(matches!(
        waitlist::join(&db.pool, &bad(0, "b@example.com", PRODUCT))
            .await
            .unwrap(),
        Joined::BadQty { .. }
    ));
    assert!(matches!(
        waitlist::join(&db.pool, &bad(1000, "b@example.com", PRODUCT))
            .await
            .unwrap(),
        Joined::BadQty { .. }
    ));
    assert!(matches!(
        waitlist::join(&db.pool, &bad(1, "not an address", PRODUCT))
            .await
            .unwrap(),
        Joined::BadCustomer { .. }
    ));
    assert_eq!(
        waitlist::join(&db.pool, &bad(1, "b@example.com", "no-such-thing"))
            .await
            .unwrap(),
        Joined::UnknownProduct
    );
    let count: i64 = sqlx::query_scalar("select count(*) from waitlist_entries")
        .fetch_one(&db.pool)
        .await
        .unwrap();
    assert_eq!(count, 1);
    // a removed entry's link offers nothing, and its units stay on sale
    assert!(
        waitlist::remove(
            &db.pool,
            holdfast::audit::Actor::Operator("shopper"),
            entries[0]
        )
        .await
        .unwrap()
    );
    checkout::release_order(&db.pool, orders[0].id, Release::ShopperLeft)
        .await
        .unwrap();
    assert_eq!(held_for_line(&db, &resource).await, (0, 0));
    assert_eq!(held_and_sold(&db, &resource).await, (0, 0));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_shopper_joins_confirms_is_offered_and_pays_over_http() {
    let app = spawn_app().await;
    app.load_demo().await;
    let resource: String = sqlx::query_scalar("select resource_id from products where id = $1")
        .bind(PRODUCT)
        .fetch_one(&app.db.pool)
        .await
        .unwrap();
    sqlx::query("select hf_upsert_resource($1, 1)")
        .bind(&resource)
        .execute(&app.db.pool)
        .await
        .unwrap();
    let holder = started(&app.db, "the-last-one", &[(PRODUCT, 1)]).await;
    let shopper = browser();
    app.settled().await;
    // the catalogue offers the list for what is sold out
    let page = shopper
        .get(&app.address)
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(page.contains(&format!("/waitlist/{PRODUCT}")), "{page}");
    let form = shopper
        .get(format!("{}/waitlist/{PRODUCT}", app.address))
        .send()
        .await
        .unwrap();
    assert_eq!(form.status(), StatusCode::OK);
    let join = |email: &'static str, qty: &'static str| {
        shopper
            .post(format!("{}/waitlist/{PRODUCT}", app.address))
            .form(&[("name", "Grace"), ("email", email), ("qty", qty)])
            .send()
    };
    assert_eq!(join("grace@example.com", "99").await.unwrap().status(), 422);
    assert_eq!(join("not-an-address", "1").await.unwrap().status(), 422);
    let joined = join("grace@example.com", "1").await.unwrap();
    assert_eq!(joined.status(), StatusCode::OK);
    assert!(joined.text().await.unwrap().contains("Check your e-mail"));
    let token: String = sqlx::query_scalar("select token from waitlist_entries")
        .fetch_one(&app.db.pool)
        .await
        .unwrap();
    let entry_url = format!("{}/waitlist/entry/{token}", app.address);
    // opening the link (a mail scanner would) confirms nothing
    let page = shopper
        .get(&entry_url)
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(page.contains("Confirm my place"), "{page}");
    let confirmed = shopper
        .post(format!("{entry_url}/confirm"))
        .send()
        .await
        .unwrap();
    assert_eq!(confirmed.status(), StatusCode::SEE_OTHER);
    let page = shopper
        .get(&entry_url)
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(page.contains("You are first in line."), "{page}");
    assert!(!page.contains("nobody is ahead of you"), "{page}");
    let forged = shopper
        .get(format!("{}/waitlist/entry/{}", app.address, "f".repeat(64)))
        .send()
        .await
        .unwrap();
    assert_eq!(forged.status(), StatusCode::NOT_FOUND);
    // the unit comes back: it is Grace's (the page is answered from
    // memory until memory has seen the change)
    checkout::release_order(&app.db.pool, holder.id, Release::ShopperLeft)
        .await
        .unwrap();
    app.settled().await;
    let page = shopper
        .get(&entry_url)
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(page.contains("Reserved for you until"), "{page}");
    let claim = shopper
        .post(format!("{entry_url}/claim"))
        .send()
        .await
        .unwrap();
    assert_eq!(claim.status(), StatusCode::SEE_OTHER);
    let pay_url = claim.headers()["location"].to_str().unwrap().to_owned();
    // claimed twice: the same page
    let again = shopper
        .post(format!("{entry_url}/claim"))
        .send()
        .await
        .unwrap();
    assert_eq!(again.headers()["location"].to_str().unwrap(), pay_url);
    let paid = shopper.post(format!("{pay_url}/pay")).send().await.unwrap();
    assert_eq!(paid.status(), StatusCode::SEE_OTHER);
    let back = paid.headers()["location"].to_str().unwrap().to_owned();
    shopper.get(&back).send().await.unwrap();
    let (order_state, entry_state, amount): (String, String, i64) = sqlx::query_as(
        "select o.state, w.state, o.amount_minor from waitlist_entries w \
           join orders o on o.id = w.order_id",
    )
    .fetch_one(&app.db.pool)
    .await
    .unwrap();
    assert_eq!(
        (order_state.as_str(), entry_state.as_str()),
        ("paid", "claimed")
    );
    let price: i64 = sqlx::query_scalar("select price_minor from products where id = $1")
        .bind(PRODUCT)
        .fetch_one(&app.db.pool)
        .await
        .unwrap();
    assert_eq!(amount, price);
    assert_eq!(held_and_sold(&app.db, &resource).await, (0, 1));
    let page = shopper
        .get(&entry_url)
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(
        page.contains("You were served from the waiting list"),
        "{page}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn staff_see_the_line_and_remove_an_entry_which_frees_what_was_set_aside() {
    let app = spawn_app().await;
    app.add_staff().await;
    let (resource, orders) = sold_out(&app.db, 2).await;
    // a group of two waits; one unit comes back and is set aside for it
    let entries = line_up(&app.db, &[2]).await;
    checkout::release_order(&app.db.pool, orders[0].id, Release::ShopperLeft)
        .await
        .unwrap();
    assert_eq!(held_for_line(&app.db, &resource).await, (0, 1));
    let (staff, csrf) = app.signed_in(STAFF_EMAIL, STAFF_PASSWORD).await;
    let page = app.admin_page(&staff, "/admin/waitlist").await;
    assert!(page.contains("wait0@example.com"), "{page}");
    assert!(page.contains("waiting"), "{page}");
    // the line's rules, per product: a claim window out of range is refused
    let refused = app
        .admin_post(
            &staff,
            &format!("/admin/waitlist/{PRODUCT}/rules"),
            &[("csrf", &csrf), ("claim_minutes", "0")],
        )
        .await;
    assert_eq!(refused.status(), StatusCode::BAD_REQUEST);
    let page = refused.text().await.unwrap();
    assert!(
        page.contains(&format!(
            "id=\"rules-{PRODUCT}-error\" role=\"alert\">Minutes to pay is 1 to 1440. Nothing was changed."
        )),
        "{page}"
    );
    let saved = app
        .admin_post(
            &staff,
            &format!("/admin/waitlist/{PRODUCT}/rules"),
            &[("csrf", &csrf), ("claim_minutes", "30"), ("in_order", "1")],
        )
        .await;
    assert_eq!(saved.status(), StatusCode::SEE_OTHER);
    let rules: (i32, bool) = sqlx::query_as(
        "select waitlist_claim_minutes, waitlist_in_order from products where id = $1",
    )
    .bind(PRODUCT)
    .fetch_one(&app.db.pool)
    .await
    .unwrap();
    assert_eq!(rules, (30, true));
    // a queue needs a sale that opens later
    let queue = app
        .admin_post(
            &staff,
            &format!("/admin/waitlist/{PRODUCT}/queue"),
            &[("csrf", &csrf)],
        )
        .await;
    assert_eq!(queue.status(), StatusCode::CONFLICT);
    // said in the product's row of the Waiting list page, not the shop's error page
    let page = queue.text().await.unwrap();
    assert!(
        page.contains(&format!("id=\"queue-{PRODUCT}-error\"")),
        "{page}"
    );
    let removed = app
        .admin_post(
            &staff,
            &format!("/admin/waitlist/{}/remove", entries[0]),
            &[("csrf", &csrf)],
        )
        .await;
    assert_eq!(removed.status(), StatusCode::SEE_OTHER);
    assert_eq!(states(&app.db, &entries).await, ["removed"]);
    // nobody waits now: the unit set aside is back on sale
    assert_eq!(held_for_line(&app.db, &resource).await, (0, 0));
    assert_eq!(held_and_sold(&app.db, &resource).await, (1, 0));
    let again = app
        .admin_post(
            &staff,
            &format!("/admin/waitlist/{}/remove", entries[0]),
            &[("csrf", &csrf)],
        )
        .await;
    assert_eq!(again.status(), StatusCode::NOT_FOUND);
    let recorded: i64 = sqlx::query_scalar(
        "select count(*) from staff_actions where action in ('remove_waitlist_entry', 'waitlist_rules')",
    )
    .fetch_one(&app.db.pool)
    .await
    .unwrap();
    assert_eq!(recorded, 2);
    assert_no_drift(&app.db.inventory()).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_entry_is_mailed_its_links_and_the_offer_is_a_webhook_event() {
    use holdfast::worker::mail::Mailer;
    use holdfast::worker::outbox::Outbox;
    let app = spawn_app().await;
    let key = holdfast::keys::SessionKey::generate();
    holdfast::outgoing::add_endpoint(
        &app.db.pool,
        &key,
        holdfast::audit::Actor::Operator("tests"),
        &holdfast::outgoing::NewEndpoint {
            url: "http://127.0.0.1:9/hooks".into(),
            events: vec![holdfast::outgoing::EventType::WaitlistOffered],
            allow_private: true,
        },
    )
    .await
    .unwrap();
    let (_, orders) = sold_out(&app.db, 1).await;
    let entries = line_up(&app.db, &[1]).await;
    checkout::release_order(&app.db.pool, orders[0].id, Release::ShopperLeft)
        .await
        .unwrap();
    let mailer = Mailer::new(
        &app.sandbox.smtp(),
        "Holdfast shop <shop@holdfast.test>",
        holdfast::clock::ShopZone::parse("Europe/Berlin").unwrap(),
        &app.address,
    )
    .unwrap();
    let outbox =
        Outbox::new(app.db.pool.clone(), app.sandbox.providers()).with_mailer(Some(mailer));
    for _ in 0..5 {
        outbox.drain().await.unwrap();
    }
    let token: String = sqlx::query_scalar("select token from waitlist_entries where id = $1")
        .bind(entries[0])
        .fetch_one(&app.db.pool)
        .await
        .unwrap();
    let link = format!("{}/waitlist/entry/{token}", app.address);
    let messages = app.sandbox.mail.messages();
    let subjects: Vec<String> = messages.iter().map(|m| m.subject()).collect();
    assert_eq!(messages.len(), 2, "{subjects:?}");
    assert!(
        subjects[0].starts_with("Confirm your place"),
        "{subjects:?}"
    );
    assert!(subjects[1].ends_with("held for you"), "{subjects:?}");
    for message in &messages {
        assert_eq!(message.to, ["wait0@example.com"]);
        let parsed = mail_parser::MessageParser::default()
            .parse(&message.raw)
            .unwrap();
        let text = parsed.body_text(0).unwrap();
        assert!(text.contains(&link), "{text}");
    }
    // the offer is an event, with its pending order
    let (kind, data): (String, serde_json::Value) = sqlx::query_as(
        "select event_type, payload->'data' from webhook_messages where event_type = 'waitlist.offered'",
    )
    .fetch_one(&app.db.pool)
    .await
    .unwrap();
    assert_eq!(kind, "waitlist.offered");
    assert_eq!(data["entry_id"], entries[0].to_string());
    assert_eq!(data["qty"], 1);
    assert_eq!(data["order"]["state"], "pending");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn three_hundred_parallel_joins_are_one_entry_per_inbox_in_combined_statements() {
    let app = spawn_app().await;
    app.load_demo().await;
    // 250 shoppers; 50 of them again, their address written otherwise
    let joins = (0..300).map(|i| {
        let email = if i < 250 {
            format!("crowd{i}@example.com")
        } else {
            format!("Crowd{}@EXAMPLE.com", i - 250)
        };
        let url = format!("{}/waitlist/{PRODUCT}", app.address);
        async move {
            browser()
                .post(url)
                .form(&[("name", "Crowd"), ("email", email.as_str()), ("qty", "1")])
                .send()
                .await
                .unwrap()
                .status()
        }
    });
    let statuses = futures::future::join_all(joins).await;
    assert!(
        statuses.iter().all(|s| *s == StatusCode::OK),
        "{statuses:?}"
    );
    let (entries, mails): (i64, i64) = sqlx::query_as(
        "select (select count(*) from waitlist_entries), \
                (select count(*) from outbox_jobs where kind = 'waitlist_mail')",
    )
    .fetch_one(&app.db.pool)
    .await
    .unwrap();
    assert_eq!(
        (entries, mails),
        (250, 250),
        "one entry and one mail per inbox"
    );
    assert!(
        app.joins.calls() < 300,
        "{} statements for 300 joins",
        app.joins.calls()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn places_in_line_are_exact_under_a_crowd_and_move_when_the_line_does() {
    let app = spawn_app().await;
    let (_, orders) = sold_out(&app.db, 1).await;
    app.settled().await;
    let entries = line_up(&app.db, &[1; 60]).await;
    let mut tokens = Vec::new();
    for id in &entries {
        tokens.push(
            sqlx::query_scalar::<_, String>("select token from waitlist_entries where id = $1")
                .bind(id)
                .fetch_one(&app.db.pool)
                .await
                .unwrap(),
        );
    }
    let page = |token: String| {
        let url = format!("{}/waitlist/entry/{token}", app.address);
        async move {
            browser()
                .get(url)
                .send()
                .await
                .unwrap()
                .text()
                .await
                .unwrap()
        }
    };
    let ahead = |n: usize| match n {
        0 => "You are first in line.".to_owned(),
        1 => "1 entry is ahead of you".to_owned(),
        n => format!("{n} entries are ahead of you"),
    };
    // the whole line at once, each page its own place
    let pages = futures::future::join_all(tokens.iter().cloned().map(page)).await;
    for (n, text) in pages.iter().enumerate() {
        assert!(text.contains(&ahead(n)), "entry {n}: {text}");
    }
    assert!(pages[0].contains("You are first in line"), "{}", pages[0]);
    // the second leaves: everyone behind moves up one
    let left = browser()
        .post(format!(
            "{}/waitlist/entry/{}/leave",
            app.address, tokens[1]
        ))
        .send()
        .await
        .unwrap();
    assert_eq!(left.status(), StatusCode::OK);
    app.settled().await;
    let pages = futures::future::join_all(tokens[2..].iter().cloned().map(page)).await;
    for (n, text) in pages.iter().enumerate() {
        assert!(text.contains(&ahead(n + 1)), "entry {}: {text}", n + 2);
    }
    // one confirmed now (the line's resource does not change): at the back
    let late = line_up_one(&app.db, "late@example.com").await;
    assert!(page(late).await.contains(&ahead(59)));
    // the unit comes back: the first is offered, and those behind it are
    // one nearer the front
    checkout::release_order(&app.db.pool, orders[0].id, Release::ShopperLeft)
        .await
        .unwrap();
    app.settled().await;
    assert!(
        page(tokens[0].clone())
            .await
            .contains("Reserved for you until")
    );
    let third = page(tokens[2].clone()).await;
    assert!(third.contains(&ahead(0)), "{third}");
    assert!(page(tokens[59].clone()).await.contains(&ahead(57)));
}

/// One more entry, joined and confirmed: its token.
async fn line_up_one(db: &TestDb, email: &str) -> String {
    waitlist::join(
        &db.pool,
        &JoinRequest {
            product_id: PRODUCT.into(),
            name: "Late".into(),
            email: email.into(),
            qty: 1,
            provider: ProviderKind::Stripe,
            address: None,
        },
    )
    .await
    .unwrap();
    let token: String = sqlx::query_scalar("select token from waitlist_entries where email = $1")
        .bind(email)
        .fetch_one(&db.pool)
        .await
        .unwrap();
    waitlist::confirm(&db.pool, &token).await.unwrap();
    token
}

/// Two servers of one shop, each combining joins into statements, take
/// the same 400 inboxes in opposite orders: a statement of one and a
/// statement of the other sharing e-mails would each wait for the other's
/// row were they written in arrival order; in e-mail order they never do.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_servers_joining_the_same_inboxes_in_opposite_orders_never_deadlock() {
    let db = TestDb::with_connections(30).await;
    db.load_demo().await;
    let live = holdfast::live::LiveStock::start(db.pool.clone());
    let (first, second) = (
        waitlist::Joins::new(db.pool.clone()),
        waitlist::Joins::new(db.pool.clone()),
    );
    let request = |i: usize| JoinRequest {
        product_id: PRODUCT.into(),
        name: "Twice".into(),
        email: format!("both{i}@example.com"),
        qty: 1,
        provider: ProviderKind::Stripe,
        address: None,
    };
    let requests: Vec<JoinRequest> = (0..400).map(request).collect();
    let forward = futures::future::join_all(requests.iter().map(|r| first.join(&live, r)));
    let backward = futures::future::join_all(requests.iter().rev().map(|r| second.join(&live, r)));
    let (forward, backward) = tokio::join!(forward, backward);
    for answer in forward.into_iter().chain(backward) {
        // no retry anywhere: a deadlock would be an error here
        assert_eq!(answer.unwrap(), Joined::Mailed);
    }
    let (entries, mails): (i64, i64) = sqlx::query_as(
        "select (select count(*) from waitlist_entries), \
                (select count(*) from outbox_jobs where kind = 'waitlist_mail')",
    )
    .fetch_one(&db.pool)
    .await
    .unwrap();
    assert_eq!((entries, mails), (400, 400));
    assert!(
        first.calls() < 400 && second.calls() < 400,
        "joins were combined: {} and {} statements",
        first.calls(),
        second.calls()
    );
}
