//! A guest cancels their booking from the order page (issue 36, part 5):
//! the policy copied onto the booking is said before paying and on the
//! order page; before the cut-off the deposit is refunded in full and the
//! freed table is offered to the waiting list of that time in the same
//! transaction; after it nothing changes and the deposit is kept; a
//! booking that cost nothing is cancelled until its time. Twenty cancels
//! of one order at once make one refund.

use futures::future::join_all;
use holdfast::waitlist::{self, Confirmed, JoinRequest, Joined};
use holdfast_testkit::*;

use crate::tables::{ROOM, day, live_pins, room, set_up, table, tables_of, time_id};

/// A room of one four-top whose dinner asks €10 a guest, cancellable
/// until `cancel_hours` before (the times are three days ahead).
async fn bistro(app: &TestApp, deposit_minor: i64, cancel_hours: i32) {
    let mut spec = room(10, vec![table("T1", 1, 4, 100)], vec![]);
    spec.periods[0].deposit_minor = deposit_minor;
    spec.periods[0].cancel_hours = cancel_hours;
    set_up(&app.db, &spec).await;
    app.settled().await;
}

async fn count(app: &TestApp, sql: &str) -> i64 {
    sqlx::query_scalar(sql)
        .fetch_one(&app.db.pool)
        .await
        .unwrap()
}

async fn post_cancel(app: &TestApp, token: &str) -> reqwest::Response {
    browser()
        .post(format!("{}/orders/{token}/cancel", app.address))
        .send()
        .await
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_cancel_before_the_cut_off_refunds_the_deposit_and_offers_the_table_to_the_waiting_list()
{
    let app = spawn_app().await;
    bistro(&app, 1000, 24).await;
    // the policy is said before paying
    let times = read_page(
        &browser(),
        &format!(
            "{}/dining/{ROOM}?date={}&party=4",
            app.address,
            day().format("%Y-%m-%d")
        ),
    )
    .await;
    assert!(
        times.contains(
            "It is refunded in full if you cancel at least 24 hours before your time; \
             after that it is kept."
        ),
        "{times}"
    );
    let guest = browser();
    let paid = app
        .buy(
            &guest,
            &Purchase::of(&time_id(19, 30), 4).by("Ada", "ada@example.com"),
        )
        .await;
    let token = paid.started.token.clone();
    let order = app.order_id(&token).await;
    assert_eq!(tables_of(&app.db, order).await, ["T1"]);
    // Grace waits for 19:30: covers are left, the one table is not
    let joined = waitlist::join(
        &app.db.pool,
        &JoinRequest {
            product_id: time_id(19, 30),
            name: "Grace Waiting".into(),
            email: "grace@example.com".into(),
            qty: 2,
            provider: holdfast::payments::ProviderKind::Stripe,
            address: None,
        },
    )
    .await
    .unwrap();
    assert_eq!(joined, Joined::Mailed);
    let grace: String =
        sqlx::query_scalar("select token from waitlist_entries where email = 'grace@example.com'")
            .fetch_one(&app.db.pool)
            .await
            .unwrap();
    assert_eq!(
        waitlist::confirm(&app.db.pool, &grace).await.unwrap(),
        Confirmed::InLine
    );
    // the order page says the policy and links to the cancel
    let page = read_page(&guest, &format!("{}/orders/{token}", app.address)).await;
    assert!(
        page.contains("and your deposit of €40.00 is refunded in full; after that it is kept."),
        "{page}"
    );
    assert!(
        page.contains(&format!("href=\"/orders/{token}/cancel\"")),
        "{page}"
    );
    // the link asks first and changes nothing
    let ask = read_page(&guest, &format!("{}/orders/{token}/cancel", app.address)).await;
    assert!(ask.contains("Cancel your booking?"), "{ask}");
    assert!(
        ask.contains("your deposit of €40.00 is refunded in full"),
        "{ask}"
    );
    assert_eq!(count(&app, "select count(*) from order_refunds").await, 0);
    // twenty cancels at once: one refund
    let answers = join_all((0..20).map(|_| post_cancel(&app, &token))).await;
    for answer in &answers {
        assert_eq!(answer.status(), 303);
    }
    assert_eq!(count(&app, "select count(*) from order_refunds").await, 1);
    let (amount, jobs): (i64, i64) = sqlx::query_as(
        "select (select sum(amount_minor) from order_refunds)::int8, \
                (select count(*) from outbox_jobs where kind = 'refund')",
    )
    .fetch_one(&app.db.pool)
    .await
    .unwrap();
    assert_eq!((amount, jobs), (4000, 1));
    // the table went to Grace, in the transaction that freed it
    let state: String = sqlx::query_scalar("select state from waitlist_entries where token = $1")
        .bind(&grace)
        .fetch_one(&app.db.pool)
        .await
        .unwrap();
    assert_eq!(state, "offered");
    let offer: uuid::Uuid =
        sqlx::query_scalar("select order_id from waitlist_entries where token = $1")
            .bind(&grace)
            .fetch_one(&app.db.pool)
            .await
            .unwrap();
    assert_eq!(tables_of(&app.db, offer).await, ["T1"]);
    let same_transaction: bool = sqlx::query_scalar(
        "select (select e.xmin::text from hold_events e join bookings b on b.hold_id = e.hold_id \
                  where e.kind = 'returned' and b.order_id = $1) \
              = (select xmin::text from bookings where order_id = $2)",
    )
    .bind(order)
    .bind(offer)
    .fetch_one(&app.db.pool)
    .await
    .unwrap();
    assert!(same_transaction);
    // the order page says it is cancelled, and the money is on its way
    let page = read_page(&guest, &format!("{}/orders/{token}", app.address)).await;
    assert!(page.contains("Your booking is cancelled"), "{page}");
    assert!(
        page.contains("your deposit of €40.00 is on its way back to you"),
        "{page}"
    );
    assert!(!page.contains("/cancel\""), "{page}");
    assert_eq!(live_pins(&app.db).await, 1);
    engine::assert_no_drift(&app.db.inventory()).await;
}

#[tokio::test]
async fn past_the_cut_off_the_page_says_the_deposit_is_kept_and_a_cancel_changes_nothing() {
    let app = spawn_app().await;
    // the times are three days ahead: 96 hours before is already past
    bistro(&app, 1000, 96).await;
    let guest = browser();
    let paid = app
        .buy(
            &guest,
            &Purchase::of(&time_id(19, 30), 4).by("Ada", "ada@example.com"),
        )
        .await;
    let token = paid.started.token.clone();
    let page = read_page(&guest, &format!("{}/orders/{token}", app.address)).await;
    assert!(
        page.contains("your deposit of €40.00 is kept. Please call the restaurant"),
        "{page}"
    );
    assert!(!page.contains("/cancel\""), "{page}");
    // the ask goes back to the order; a POST anyway is refused
    let ask = browser()
        .get(format!("{}/orders/{token}/cancel", app.address))
        .send()
        .await
        .unwrap();
    assert_eq!(ask.status(), 303);
    let refused = post_cancel(&app, &token).await;
    assert_eq!(refused.status(), 303);
    assert_eq!(
        refused.headers()["location"],
        format!("/orders/{token}?cancel=refused").as_str()
    );
    // the order page says why
    let page = read_page(
        &guest,
        &format!("{}/orders/{token}?cancel=refused", app.address),
    )
    .await;
    assert!(
        page.contains("Your booking was not cancelled: bookings could be cancelled until"),
        "{page}"
    );
    assert_eq!(count(&app, "select count(*) from order_refunds").await, 0);
    assert_eq!(
        count(&app, "select count(*) from orders where state = 'paid'").await,
        1
    );
    assert_eq!(live_pins(&app.db).await, 1);
    engine::assert_no_drift(&app.db.inventory()).await;
}

#[tokio::test]
async fn a_booking_that_cost_nothing_is_cancelled_until_its_time_with_nothing_to_refund() {
    let app = spawn_app().await;
    // no deposit: the 96 hours do not apply, the booking's time does
    bistro(&app, 0, 96).await;
    let guest = browser();
    app.add(&guest, &time_id(19, 30), 2).await;
    let answer = app.checkout(&guest).await;
    assert_eq!(answer.status(), 303);
    let token = answer.headers()["location"]
        .to_str()
        .unwrap()
        .trim_start_matches("/orders/")
        .to_owned();
    let page = read_page(&guest, &format!("{}/orders/{token}", app.address)).await;
    assert!(page.contains("there is nothing to pay."), "{page}");
    assert!(
        page.contains(&format!("href=\"/orders/{token}/cancel\"")),
        "{page}"
    );
    assert_eq!(post_cancel(&app, &token).await.status(), 303);
    let page = read_page(&guest, &format!("{}/orders/{token}", app.address)).await;
    assert!(page.contains("Your booking is cancelled"), "{page}");
    assert!(page.contains("Nothing was charged."), "{page}");
    assert_eq!(
        count(
            &app,
            "select count(*) from outbox_jobs where kind = 'refund'"
        )
        .await,
        0
    );
    assert_eq!(
        count(&app, "select count(*) from orders where state = 'refunded'").await,
        1
    );
    assert_eq!(live_pins(&app.db).await, 0);
    assert_eq!(
        engine::held_and_sold(&app.db, &time_id(19, 30)).await,
        (0, 0)
    );
    engine::assert_no_drift(&app.db.inventory()).await;
}

/// A paid booking of four at 19:30 (deposit €10 a guest, cancellable
/// until 24 hours before): its order's token and id.
async fn booked(app: &TestApp, guest: &reqwest::Client) -> (String, uuid::Uuid) {
    let paid = app
        .buy(
            guest,
            &Purchase::of(&time_id(19, 30), 4).by("Ada", "ada@example.com"),
        )
        .await;
    let token = paid.started.token.clone();
    let order = app.order_id(&token).await;
    (token, order)
}

/// Nothing changed by a refused cancel: no refund, the order paid, its
/// table still pinned.
async fn nothing_changed(app: &TestApp) {
    assert_eq!(count(app, "select count(*) from order_refunds").await, 0);
    assert_eq!(
        count(app, "select count(*) from orders where state = 'paid'").await,
        1
    );
    assert_eq!(live_pins(&app.db).await, 1);
    engine::assert_no_drift(&app.db.inventory()).await;
}

/// A cancel answered 303 to the order page with the refusal flag, and the
/// page's words for it.
async fn refused_page(app: &TestApp, guest: &reqwest::Client, token: &str) -> String {
    let answer = post_cancel(app, token).await;
    assert_eq!(answer.status(), 303);
    assert_eq!(
        answer.headers()["location"],
        format!("/orders/{token}?cancel=refused").as_str()
    );
    read_page(
        guest,
        &format!("{}/orders/{token}?cancel=refused", app.address),
    )
    .await
}

#[tokio::test]
async fn a_seated_or_no_show_booking_is_not_cancelled_and_the_order_page_says_why() {
    let app = spawn_app().await;
    bistro(&app, 1000, 24).await;
    let guest = browser();
    let (token, order) = booked(&app, &guest).await;
    // nobody came: the host stand's mark (its statement)
    sqlx::query("update bookings set no_show_at = now(), no_show_by = 'host@example.com' where order_id = $1")
        .bind(order)
        .execute(&app.db.pool)
        .await
        .unwrap();
    let page = refused_page(&app, &guest, &token).await;
    assert!(
        page.contains("Your booking was not cancelled: the restaurant recorded that nobody came"),
        "{page}"
    );
    nothing_changed(&app).await;
    // the page without the flag says no refusal
    let plain = read_page(&guest, &format!("{}/orders/{token}", app.address)).await;
    assert!(!plain.contains("cancel-refused"), "{plain}");
    // undo it, and seat the party at the host stand: its code redeemed
    sqlx::query("update bookings set no_show_at = null, no_show_by = null where order_id = $1")
        .bind(order)
        .execute(&app.db.pool)
        .await
        .unwrap();
    let code = crate::item_code(&app.db.pool, order, "table")
        .await
        .unwrap();
    let seated = holdfast::redemption::redeem(
        &app.db.pool,
        &code,
        &holdfast::redemption::Door {
            by: "host@example.com",
            place: "host stand",
            checks: None,
            overrule: false,
            attempt: uuid::Uuid::new_v4(),
        },
    )
    .await
    .unwrap();
    assert!(
        matches!(
            seated.outcome,
            holdfast::redemption::Outcome::Redeemed { .. }
        ),
        "{:?}",
        seated.outcome
    );
    // seated: the page offers no cancel, and a POST anyway is refused
    let plain = read_page(&guest, &format!("{}/orders/{token}", app.address)).await;
    assert!(!plain.contains("/cancel\""), "{plain}");
    let page = refused_page(&app, &guest, &token).await;
    assert!(
        page.contains("Your booking was not cancelled: your party was seated"),
        "{page}"
    );
    nothing_changed(&app).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn the_cut_off_is_read_under_the_orders_lock_so_a_cancel_that_waited_past_it_changes_nothing()
{
    let app = spawn_app().await;
    bistro(&app, 1000, 24).await;
    let guest = browser();
    let (token, order) = booked(&app, &guest).await;
    // something else holds the order (a payment's news, a refund) while
    // the guest presses Cancel, before the cut-off
    let mut other = app.db.pool.begin().await.unwrap();
    sqlx::query("select 1 from orders where id = $1 for update")
        .bind(order)
        .execute(&mut *other)
        .await
        .unwrap();
    let cancelling = tokio::spawn({
        let address = app.address.clone();
        let token = token.clone();
        async move {
            browser()
                .post(format!("{address}/orders/{token}/cancel"))
                .send()
                .await
                .unwrap()
        }
    });
    // the cancel waits for the order's lock
    for _ in 0..200 {
        let waiting: i64 = sqlx::query_scalar(
            "select count(*) from pg_stat_activity \
              where wait_event_type = 'Lock' and datname = current_database()",
        )
        .fetch_one(&app.db.pool)
        .await
        .unwrap();
        if waiting > 0 {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(25)).await;
    }
    // meanwhile the cut-off passes
    sqlx::query(
        "update bookings set cancel_until = clock_timestamp() - interval '1 second' \
          where order_id = $1",
    )
    .bind(order)
    .execute(&app.db.pool)
    .await
    .unwrap();
    other.rollback().await.unwrap();
    let answer = cancelling.await.unwrap();
    assert_eq!(answer.status(), 303);
    assert_eq!(
        answer.headers()["location"],
        format!("/orders/{token}?cancel=refused").as_str()
    );
    nothing_changed(&app).await;
}

#[tokio::test]
async fn a_cancel_the_database_fails_says_nothing_changed_in_the_shops_words() {
    let app = spawn_app().await;
    bistro(&app, 1000, 24).await;
    let guest = browser();
    let (token, _) = booked(&app, &guest).await;
    // the refund's row cannot be written: the cancel's transaction fails
    sqlx::query(
        "alter table order_refunds add constraint test_no_refunds check (amount_minor < 0) not valid",
    )
    .execute(&app.db.pool)
    .await
    .unwrap();
    let answer = post_cancel(&app, &token).await;
    assert_eq!(answer.status(), 503);
    let page = answer.text().await.unwrap();
    assert!(page.contains("Your booking is not cancelled yet"), "{page}");
    assert!(
        page.contains("Nothing changed: your booking stands and nothing was refunded."),
        "{page}"
    );
    for engine_word in ["sqlstate", "constraint", "order_refunds"] {
        assert!(
            !page.to_lowercase().contains(engine_word),
            "{engine_word}: {page}"
        );
    }
    nothing_changed(&app).await;
    // the order page still offers the cancel
    let plain = read_page(&guest, &format!("{}/orders/{token}", app.address)).await;
    assert!(
        plain.contains(&format!("href=\"/orders/{token}/cancel\"")),
        "{plain}"
    );
}
