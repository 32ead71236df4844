//! Housekeeping against real rows: what bots and time leave behind goes,
//! everything money touched stays.

use holdfast::worker::housekeeping::{Housekeeping, Tidied};

use holdfast_testkit::*;

/// A shopper who starts paying for one jar, is sent to the Stripe page and
/// leaves checkout: the order's token.
async fn left(app: &TestApp) -> String {
    let shopper = browser();
    let started = app.start(&shopper, &Purchase::of("wild-honey", 1)).await;
    let pressed = app.leave(&shopper, &started.cancel_url).await;
    assert_eq!(pressed.status(), 200);
    started.token
}

async fn exists(app: &TestApp, token: &str) -> bool {
    sqlx::query_scalar("select exists (select 1 from orders where token = $1)")
        .bind(token)
        .fetch_one(&app.db.pool)
        .await
        .unwrap()
}

async fn age(app: &TestApp, token: &str, days: i32) {
    sqlx::query("update orders set created_at = now() - $2 * interval '1 day' where token = $1")
        .bind(token)
        .bind(f64::from(days))
        .execute(&app.db.pool)
        .await
        .unwrap();
}

/// As the reconciler leaves an order once its final check is done.
async fn reconciled(app: &TestApp, token: &str) {
    sqlx::query("update orders set reconciled_at = now() where token = $1")
        .bind(token)
        .execute(&app.db.pool)
        .await
        .unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn housekeeping_forgets_what_was_never_paid_and_keeps_what_money_touched() {
    let app = spawn_app().await;
    app.load_demo().await;

    // paid, long ago: kept for ever
    let bought = app.buy(&browser(), &Purchase::of("wild-honey", 1)).await;
    assert_eq!(bought.returned().status, 303);
    let paid = token_of(&bought.order_url());
    app.wait_for_state(&paid, "paid").await;
    // cancelled long ago, the reconciler done with it: forgotten
    let gone = left(&app).await;
    // cancelled long ago, its final reconciliation check still to come: kept
    let unchecked = left(&app).await;
    app.outbox().await;
    // cancelled long ago, its page not closed yet (a job pending): kept
    let closing = left(&app).await;
    // cancelled today: kept
    let recent = left(&app).await;
    for token in [&paid, &gone, &unchecked, &closing] {
        age(&app, token, 31).await;
    }
    for token in [&paid, &gone, &closing, &recent] {
        reconciled(&app, token).await;
    }

    // a basket untouched for a month, and one from today (leaving checkout
    // gave the left orders' lines back to their baskets: those are fresh)
    let given_back: Vec<String> = sqlx::query_scalar("select distinct basket_id from basket_lines")
        .fetch_all(&app.db.pool)
        .await
        .unwrap();
    let stale = browser();
    app.add(&stale, "harbour-lights-general", 1).await;
    sqlx::query(
        "update basket_lines set added_at = now() - interval '31 days' \
          where basket_id <> all($1)",
    )
    .bind(&given_back)
    .execute(&app.db.pool)
    .await
    .unwrap();
    let fresh = browser();
    app.add(&fresh, "wild-honey", 2).await;

    // throttle rows: a window long past, a lock still on, a window open
    sqlx::query(
        "insert into login_throttle (key, attempts, window_started_at, locked_until) values \
         ('address:192.0.2.1', 3, now() - interval '1 hour', null), \
         ('address:192.0.2.2', 30, now() - interval '1 hour', now() + interval '5 minutes'), \
         ('address:192.0.2.3', 2, now(), null)",
    )
    .execute(&app.db.pool)
    .await
    .unwrap();
    // a staff session that has ended, and one that has not
    app.add_staff().await;
    app.staff_browser().await;
    app.staff_browser().await;
    sqlx::query(
        "update staff_sessions set expires_at = now() - interval '1 minute' \
          where id_hash = (select id_hash from staff_sessions order by id_hash limit 1)",
    )
    .execute(&app.db.pool)
    .await
    .unwrap();
    // rate buckets: one idle past refilling (30/60s: 60 s), one in use
    sqlx::query(
        "insert into rate_buckets (key, tokens, refreshed_at) values \
         ('192.0.2.1', 0, now() - interval '61 seconds'), ('192.0.2.3', 0, now())",
    )
    .execute(&app.db.pool)
    .await
    .unwrap();

    let lines_before: i64 = sqlx::query_scalar("select count(*) from order_lines")
        .fetch_one(&app.db.pool)
        .await
        .unwrap();
    let housekeeping = Housekeeping::new(
        app.db.pool.clone(),
        30,
        holdfast::limits::Limits::default().address_rate,
    );
    let tidied = housekeeping.run_once().await.unwrap();
    assert_eq!(
        tidied,
        Tidied {
            basket_lines: 1,
            orders: 1,
            throttle_rows: 1,
            staff_sessions: 1,
            rate_buckets: 1,
        }
    );
    assert!(!exists(&app, &gone).await);
    for kept in [&paid, &unchecked, &closing, &recent] {
        assert!(exists(&app, kept).await, "{kept}");
    }
    let lines_after: i64 = sqlx::query_scalar("select count(*) from order_lines")
        .fetch_one(&app.db.pool)
        .await
        .unwrap();
    assert_eq!(lines_after, lines_before - 1, "its line went with it");
    let gone_page = browser()
        .get(format!("{}/orders/{gone}", app.address))
        .send()
        .await
        .unwrap();
    assert_eq!(gone_page.status(), 404);
    let basket = fresh
        .get(format!("{}/basket", app.address))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(basket.contains("Wild heather honey"), "{basket}");
    let throttle: Vec<String> = sqlx::query_scalar("select key from login_throttle order by key")
        .fetch_all(&app.db.pool)
        .await
        .unwrap();
    // (the staff logins above opened a window for this machine's address)
    assert_eq!(
        throttle,
        [
            "address:127.0.0.1",
            "address:192.0.2.2",
            "address:192.0.2.3"
        ]
    );
    let buckets: Vec<String> = sqlx::query_scalar("select key from rate_buckets")
        .fetch_all(&app.db.pool)
        .await
        .unwrap();
    assert_eq!(buckets, ["192.0.2.3"]);
    assert_no_drift(&app.db.inventory()).await;

    // a second pass, and a second housekeeper at once, find nothing more
    let (again, other) = tokio::join!(housekeeping.run_once(), housekeeping.run_once());
    assert_eq!(again.unwrap(), Tidied::default());
    assert_eq!(other.unwrap(), Tidied::default());
}
