//! Staff refunds of paid orders, through the admin and the command line,
//! against the sandbox's Stripe over HTTP and the real worker.

use futures::future::join_all;
use holdfast_sandbox::DeliveryMode;
use reqwest::StatusCode;

use holdfast_testkit::engine::paid;
use holdfast_testkit::*;

const TIER: &str = "harbour-lights-vip";

async fn refund(
    app: &TestApp,
    staff: &reqwest::Client,
    csrf: &str,
    order: uuid::Uuid,
    units: &[(&str, &str)],
    extra: &[(&str, &str)],
) -> String {
    let mut form: Vec<(String, String)> = vec![
        ("csrf".into(), csrf.into()),
        ("reason".into(), "The band cancelled the encore".into()),
        ("step".into(), "refund".into()),
    ];
    for (product, n) in units {
        form.push((format!("units:{product}"), (*n).into()));
    }
    for (name, value) in extra {
        form.push(((*name).into(), (*value).into()));
    }
    let response = staff
        .post(format!("{}/admin/orders/{order}/refund", app.address))
        .form(&form)
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), StatusCode::SEE_OTHER);
    let back = location(&response);
    back.split("notice=").nth(1).unwrap_or("").to_owned()
}

async fn refunded_minor(app: &TestApp, order: uuid::Uuid) -> (i64, i64, String) {
    sqlx::query_as("select refunded_minor, amount_minor, state::text from orders where id = $1")
        .bind(order)
        .fetch_one(&app.db.pool)
        .await
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_partial_then_a_full_refund_racing_the_late_webhook_give_back_exactly_what_was_paid() {
    let app = spawn_app().await;
    app.load_demo().await;
    app.add_staff().await;
    let (staff, csrf) = app.staff_browser().await;
    // three VIP seats, the webhook late
    let shopper = browser();
    let purchase = Purchase::of(TIER, 3).paying(Payment::default().delivered(DeliveryMode::Late));
    let paid = app.buy(&shopper, &purchase).await;
    assert_eq!(paid.returned().status, 303);
    let session_id = &paid.started.page_id;
    let token = token_of(&paid.order_url());
    assert_eq!(app.order_state(&token).await, "paid");
    let order = app.order_id(&token).await;
    // the tier is sold out: only refunded units can be bought now
    let (held, sold) = held_and_sold(&app.db, TIER).await;
    sqlx::query("update resources set total = $2 where id = $1")
        .bind(TIER)
        .bind(held + sold)
        .execute(&app.db.pool)
        .await
        .unwrap();
    let paid_minor = refunded_minor(&app, order).await.1;
    let unit_price = paid_minor / 3;

    // a partial refund while the return is replayed twenty times and the
    // late webhook arrives
    let returns = (0..20).map(|_| {
        let shopper = shopper.clone();
        let url = format!(
            "{}/checkout/return/{token}?session_id={session_id}",
            app.address
        );
        async move { shopper.get(url).send().await.unwrap().status() }
    });
    let (notice, statuses) = futures::join!(
        refund(
            &app,
            &staff,
            &csrf,
            order,
            &[(TIER, "1")],
            &[("restock", "on")]
        ),
        join_all(returns)
    );
    assert_eq!(notice, "staff_refund_queued");
    assert!(statuses.iter().all(|s| s.is_redirection()), "{statuses:?}");
    let page = shopper
        .get(format!("{}/orders/{token}", app.address))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert_eq!(
        page.matches("Refunded: this code admits nobody").count(),
        1,
        "{page}"
    );
    assert!(page.contains("Part of this order was refunded"), "{page}");
    wait_for_accepted(|| app.sandbox.stripe.ledger(), 1).await;
    assert_eq!(
        refunded_minor(&app, order).await,
        (unit_price, paid_minor, "paid".into())
    );
    // and the rest
    let notice = refund(
        &app,
        &staff,
        &csrf,
        order,
        &[(TIER, "2")],
        &[("restock", "on")],
    )
    .await;
    assert_eq!(notice, "staff_refund_whole");
    assert_eq!(
        refunded_minor(&app, order).await,
        (paid_minor, paid_minor, "refund_pending".into())
    );
    // nothing more to refund, and the database would refuse more anyway
    let notice = refund(&app, &staff, &csrf, order, &[(TIER, "1")], &[]).await;
    assert_eq!(notice, "refund_not_paid");
    let over = sqlx::query("update orders set refunded_minor = amount_minor + 1 where id = $1")
        .bind(order)
        .execute(&app.db.pool)
        .await;
    assert!(
        over.is_err(),
        "the database keeps refunds within what was paid"
    );

    // the worker asks Stripe for each amount, once
    app.outbox().await;
    let ledger = app.sandbox.stripe.ledger();
    let mut amounts: Vec<i64> = ledger.refunds_standing().map(|r| r.amount).collect();
    amounts.sort();
    assert_eq!(amounts, [unit_price, 2 * unit_price]);
    assert_eq!(amounts.iter().sum::<i64>(), ledger.charges[0].amount);
    assert_eq!(app.order_state(&token).await, "refunded");
    let done: i64 = sqlx::query_scalar(
        "select count(*) from outbox_jobs where kind = 'refund' and state = 'done'",
    )
    .fetch_one(&app.db.pool)
    .await
    .unwrap();
    assert_eq!(done, 2);
    // a replayed webhook or return now changes nothing
    for _ in 0..3 {
        shopper
            .get(format!(
                "{}/checkout/return/{token}?session_id={session_id}",
                app.address
            ))
            .send()
            .await
            .unwrap();
    }
    app.outbox().await;
    assert_eq!(app.sandbox.stripe.ledger().refunds.len(), 2);

    // codes of refunded units admit nobody
    let codes: Vec<(String, bool)> =
        sqlx::query_as("select code, state = 'refunded' from order_items where order_id = $1")
            .bind(order)
            .fetch_all(&app.db.pool)
            .await
            .unwrap();
    assert_eq!(codes.len(), 3);
    assert!(codes.iter().all(|(_, refunded)| *refunded));
    let door = holdfast::redemption::Door {
        by: "grace@holdfast.test",
        place: "North door",
        attempt: uuid::Uuid::new_v4(),
        checks: None,
        overrule: false,
    };
    let redeemed = holdfast::redemption::redeem(&app.db.pool, &codes[0].0, &door)
        .await
        .unwrap();
    assert_eq!(redeemed.outcome, holdfast::redemption::Outcome::Refunded);
    // and the shopper's page says why
    let page = shopper
        .get(format!("{}/orders/{token}", app.address))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(page.contains("Your order was refunded"), "{page}");
    assert!(page.contains("The band cancelled the encore"), "{page}");

    // the three seats are on sale again, and the next shopper buys them
    assert_eq!(held_and_sold(&app.db, TIER).await, (held, sold - 3));
    assert_no_drift(&app.db.inventory()).await;
    // (the refunded seats sell again)
    app.start(&browser(), &Purchase::of(TIER, 3)).await;
    let later = browser();
    app.add(&later, TIER, 1).await;
    assert_eq!(app.checkout(&later).await.status(), 409, "and only those");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_used_code_needs_the_override_and_a_cancelled_slot_stays_off_sale() {
    let app = spawn_app().await;
    app.load_demo().await;
    app.add_staff().await;
    let (staff, csrf) = app.staff_browser().await;
    let slot = app.db.first_slot().await;
    let order = paid(&app.db, "override-1", &[(slot.as_str(), 2), (TIER, 2)]).await;
    let ticket: String = sqlx::query_scalar(
        "select code from order_items where order_id = $1 and code like 'TKT-%' \
          order by code limit 1",
    )
    .bind(order.id)
    .fetch_one(&app.db.pool)
    .await
    .unwrap();
    let door = holdfast::redemption::Door {
        by: "grace@holdfast.test",
        place: "",
        attempt: uuid::Uuid::new_v4(),
        checks: None,
        overrule: false,
    };
    let admitted = holdfast::redemption::redeem(&app.db.pool, &ticket, &door)
        .await
        .unwrap();
    assert_eq!(
        admitted.outcome,
        holdfast::redemption::Outcome::Redeemed { word: "admitted" }
    );

    // both seats: one is used, so refused without the override, and
    // nothing changes but the activity record
    let before = snapshot(&app.db.pool).await;
    let notice = refund(
        &app,
        &staff,
        &csrf,
        order.id,
        &[(TIER, "2"), (&slot, "0")],
        &[],
    )
    .await;
    assert_eq!(notice, "refund_redeemed");
    let after = snapshot(&app.db.pool).await;
    let changed: Vec<_> = before
        .iter()
        .zip(&after)
        .filter(|(b, a)| b != a)
        .map(|(b, _)| b.split(':').next().unwrap().to_owned())
        .collect();
    assert_eq!(changed, ["staff_actions"]);
    // one seat, unused: fine; the used one stays valid
    let notice = refund(
        &app,
        &staff,
        &csrf,
        order.id,
        &[(TIER, "1"), (&slot, "0")],
        &[("restock", "on")],
    )
    .await;
    assert_eq!(notice, "staff_refund_queued");
    let used_still_valid: Option<chrono::DateTime<chrono::Utc>> = sqlx::query_scalar(
        "select case when state = 'refunded' then state_at end from order_items where code = $1",
    )
    .bind(&ticket)
    .fetch_one(&app.db.pool)
    .await
    .unwrap();
    assert_eq!(
        used_still_valid, None,
        "the unused code was the one refunded"
    );
    // the cancelled slot: both places, kept off sale
    let (slot_total_before, _): (i32, i32) =
        sqlx::query_as("select total, sold from resources r join products p on p.resource_id = r.id where p.id = $1")
            .bind(&slot)
            .fetch_one(&app.db.pool)
            .await
            .unwrap();
    let notice = refund(
        &app,
        &staff,
        &csrf,
        order.id,
        &[(TIER, "0"), (&slot, "2")],
        &[],
    )
    .await;
    assert_eq!(notice, "staff_refund_queued");
    let (slot_total_after, _): (i32, i32) =
        sqlx::query_as("select total, sold from resources r join products p on p.resource_id = r.id where p.id = $1")
            .bind(&slot)
            .fetch_one(&app.db.pool)
            .await
            .unwrap();
    assert_eq!(slot_total_after, slot_total_before - 2, "kept off sale");
    // the used seat, with the override: recorded as such
    let notice = refund(
        &app,
        &staff,
        &csrf,
        order.id,
        &[(TIER, "1"), (&slot, "0")],
        &[("override_redeemed", "on"), ("restock", "on")],
    )
    .await;
    assert_eq!(notice, "staff_refund_whole");
    let overrides: Vec<bool> = sqlx::query_scalar(
        "select override_redeemed from order_refunds where order_id = $1 order by id",
    )
    .bind(order.id)
    .fetch_all(&app.db.pool)
    .await
    .unwrap();
    assert_eq!(overrides, [false, false, true]);
    let outcomes: Vec<String> = sqlx::query_scalar(
        "select outcome from staff_actions where action = 'refund_order' order by id",
    )
    .fetch_all(&app.db.pool)
    .await
    .unwrap();
    assert_eq!(outcomes, ["redeemed", "queued", "queued", "queued"]);
    let (refunded, paid_minor, state) = refunded_minor(&app, order.id).await;
    assert_eq!((refunded, state.as_str()), (paid_minor, "refund_pending"));
    assert_no_drift(&app.db.inventory()).await;
    // the admin's order page shows what happened
    let page = app
        .admin_page(&staff, &format!("/admin/orders/{}", order.id))
        .await;
    assert!(page.contains("used codes overridden"), "{page}");
    assert!(page.contains("kept off sale"), "{page}");
    assert!(page.contains("The band cancelled the encore"), "{page}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refund_states_its_amount_before_it_is_sent_starting_from_what_is_left() {
    let app = spawn_app().await;
    app.load_demo().await;
    app.add_staff().await;
    let (staff, csrf) = app.staff_browser().await;
    let order = paid(&app.db, "review-1", &[(TIER, 3)]).await;
    let (_, paid_minor, _) = refunded_minor(&app, order.id).await;
    let currency: String = sqlx::query_scalar("select currency from orders where id = $1")
        .bind(order.id)
        .fetch_one(&app.db.pool)
        .await
        .unwrap();
    let money = |minor: i64| holdfast::money::format(minor, &currency);
    let unit = paid_minor / 3;
    // one unit refunded: the form starts from the two left
    let notice = refund(&app, &staff, &csrf, order.id, &[(TIER, "1")], &[]).await;
    assert_eq!(notice, "staff_refund_queued");
    let page = app
        .admin_page(&staff, &format!("/admin/orders/{}", order.id))
        .await;
    assert!(
        page.contains(&format!(
            "name=\"units:{TIER}\" min=\"0\" max=\"2\" value=\"2\""
        )),
        "{page}"
    );
    assert!(
        page.contains(&format!(
            "Everything left to refund: <strong>{}</strong>",
            money(2 * unit)
        )),
        "{page}"
    );
    assert!(page.contains("Review refund</button>"), "{page}");
    let key = hidden(&page, "refund_key");
    let url = format!("{}/admin/orders/{}/refund", app.address, order.id);
    let send = |fields: Vec<(&'static str, String)>| {
        let mut form = vec![
            ("csrf", csrf.clone()),
            ("refund_key", key.clone()),
            ("reason", "Seat moved".to_owned()),
        ];
        form.extend(fields);
        let (staff, url) = (staff.clone(), url.clone());
        async move { staff.post(url).form(&form).send().await.unwrap() }
    };
    let before = snapshot(&app.db.pool).await;
    // the review: the amount for one unit, the button that sends it
    let review = send(vec![(units_field(), "1".into()), ("step", "review".into())]).await;
    assert_eq!(review.status(), StatusCode::OK);
    let review = review.text().await.unwrap();
    assert!(
        review.contains(&format!(
            "<strong id=\"refund-total\">{}</strong> of the {} left to refund",
            money(unit),
            money(2 * unit)
        )),
        "{review}"
    );
    assert!(
        review.contains(&format!("Refund {}</button>", money(unit))),
        "{review}"
    );
    assert!(
        review.contains("value=\"Seat moved\""),
        "the reason typed is kept: {review}"
    );
    assert_eq!(hidden(&review, "amount_minor"), unit.to_string());
    // more than is left: said on the review, with nothing to send
    let too_many = send(vec![(units_field(), "3".into()), ("step", "review".into())]).await;
    assert_eq!(too_many.status(), StatusCode::BAD_REQUEST);
    let too_many = too_many.text().await.unwrap();
    assert!(
        too_many.contains("only 2 left to refund (3 were chosen)"),
        "{too_many}"
    );
    assert!(!too_many.contains("amount_minor"), "{too_many}");
    // the numbers changed after the review: reviewed again, not sent
    let changed = send(vec![
        (units_field(), "2".into()),
        ("step", "refund".into()),
        ("amount_minor", unit.to_string()),
    ])
    .await;
    assert_eq!(changed.status(), StatusCode::CONFLICT);
    let changed = changed.text().await.unwrap();
    assert!(
        changed.contains("The units changed after the review"),
        "{changed}"
    );
    assert!(
        changed.contains(&format!("Refund {}</button>", money(2 * unit))),
        "{changed}"
    );
    assert_eq!(
        snapshot(&app.db.pool).await,
        before,
        "a review changed something"
    );
    // the reviewed amount, sent: exactly that is refunded
    let sent = send(vec![
        (units_field(), "1".into()),
        ("step", "refund".into()),
        ("amount_minor", unit.to_string()),
    ])
    .await;
    assert_eq!(sent.status(), StatusCode::SEE_OTHER);
    assert!(location(&sent).ends_with("notice=staff_refund_queued"));
    assert_eq!(refunded_minor(&app, order.id).await.0, 2 * unit);
    // Activity says it in a sentence, with the order's number and amount
    let number: String = sqlx::query_scalar("select number from orders where id = $1")
        .bind(order.id)
        .fetch_one(&app.db.pool)
        .await
        .unwrap();
    let name: String = sqlx::query_scalar("select name from products where id = $1")
        .bind(TIER)
        .fetch_one(&app.db.pool)
        .await
        .unwrap();
    let activity = app.admin_page(&staff, "/admin/activity").await;
    let said = format!(
        "{STAFF_EMAIL} refunded 1 × {name} of order {number} ({})",
        money(unit)
    );
    assert_eq!(activity.matches(&said).count(), 2, "{said}: {activity}");
}

fn units_field() -> &'static str {
    const FIELD: &str = "units:harbour-lights-vip";
    assert!(FIELD.ends_with(TIER));
    FIELD
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_refunds_are_refused_clearly_and_change_nothing() {
    let app = spawn_app().await;
    app.load_demo().await;
    app.add_staff().await;
    let (staff, csrf) = app.staff_browser().await;
    let order = paid(&app.db, "bad-1", &[(TIER, 2)]).await;
    let before = snapshot(&app.db.pool).await;
    // each form sent to refund at once, as the review's button sends it
    let post = |mut form: Vec<(&'static str, String)>| {
        let staff = staff.clone();
        let url = format!("{}/admin/orders/{}/refund", app.address, order.id);
        form.push(("step", "refund".into()));
        async move { staff.post(url).form(&form).send().await.unwrap() }
    };
    let csrf = csrf.to_owned();
    for (form, status) in [
        // no reason
        (
            vec![
                ("csrf", csrf.clone()),
                ("units:harbour-lights-vip", "1".into()),
            ],
            StatusCode::BAD_REQUEST,
        ),
        // not a number, negative, no units named
        (
            vec![
                ("csrf", csrf.clone()),
                ("reason", "x".into()),
                ("units:harbour-lights-vip", "one".into()),
            ],
            StatusCode::BAD_REQUEST,
        ),
        (
            vec![
                ("csrf", csrf.clone()),
                ("reason", "x".into()),
                ("units:harbour-lights-vip", "-1".into()),
            ],
            StatusCode::BAD_REQUEST,
        ),
        (
            vec![("csrf", csrf.clone()), ("reason", "x".into())],
            StatusCode::BAD_REQUEST,
        ),
        (
            vec![
                ("csrf", csrf.clone()),
                ("reason", "x".into()),
                ("units:harbour-lights-vip", "0".into()),
            ],
            StatusCode::BAD_REQUEST,
        ),
        // a reason past 500 characters
        (
            vec![
                ("csrf", csrf.clone()),
                ("reason", "r".repeat(501)),
                ("units:harbour-lights-vip", "1".into()),
            ],
            StatusCode::BAD_REQUEST,
        ),
    ] {
        let response = post(form.clone()).await;
        assert_eq!(response.status(), status, "{form:?}");
    }
    assert_eq!(snapshot(&app.db.pool).await, before);
    // more than the order has, or a product it does not have: refused,
    // recorded, nothing else changed
    for (units, notice) in [
        (("units:harbour-lights-vip", "3"), "refund_too_many"),
        (("units:wild-honey", "1"), "refund_not_in_order"),
    ] {
        let response = post(vec![
            ("csrf", csrf.clone()),
            ("reason", "x".into()),
            (units.0, units.1.into()),
        ])
        .await;
        assert_eq!(response.status(), StatusCode::SEE_OTHER);
        let back = location(&response);
        assert!(back.ends_with(&format!("notice={notice}")), "{back}");
    }
    let after = snapshot(&app.db.pool).await;
    assert_eq!(before[..6], after[..6], "orders, holds and jobs unchanged");
    // an unknown order
    let response = staff
        .post(format!(
            "{}/admin/orders/{}/refund",
            app.address,
            uuid::Uuid::new_v4()
        ))
        .form(&[("csrf", csrf.as_str()), ("reason", "x"), ("units:a", "1")])
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), StatusCode::NOT_FOUND);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_command_line_refunds_some_units_then_the_rest() {
    let app = spawn_app().await;
    app.load_demo().await;
    let order = paid(&app.db, "cli-refund", &[(TIER, 3)]).await;
    let run = |args: &[&str]| {
        std::process::Command::new(env!("CARGO_BIN_EXE_holdfast"))
            .arg("--db")
            .arg(&app.db.url)
            .args(args)
            .env_remove("DATABASE_URL")
            .output()
            .unwrap()
    };
    let id = order.id.to_string();
    let first = run(&["refund", &id, "--units", "1", "--reason", "Asked by phone"]);
    assert_eq!(first.status.code(), Some(0), "{first:?}");
    assert!(String::from_utf8_lossy(&first.stdout).contains("for 1 unit(s)"));
    let too_many = run(&["refund", &id, "--units", "3", "--reason", "x"]);
    assert_eq!(too_many.status.code(), Some(6));
    assert!(String::from_utf8_lossy(&too_many.stdout).contains("2 left to refund"));
    let rest = run(&[
        "--json",
        "refund",
        &id,
        "--reason",
        "Cancelled",
        "--keep-off-sale",
    ]);
    assert_eq!(rest.status.code(), Some(0), "{rest:?}");
    let json: serde_json::Value = serde_json::from_slice(&rest.stdout).unwrap();
    assert_eq!(json["outcome"], "queued");
    assert_eq!(json["whole"], true);
    assert_eq!(json["units"], 2);
    for bad in [
        vec!["refund", "not-an-id", "--reason", "x"],
        vec!["refund", &id, "--reason", ""],
        vec!["refund", &id, "--units", "0", "--reason", "x"],
    ] {
        let refused = run(&bad);
        assert_eq!(refused.status.code(), Some(1), "{bad:?}");
        assert!(!refused.stderr.is_empty());
    }
    let (refunded, paid_minor, _) = refunded_minor(&app, order.id).await;
    assert_eq!(refunded, paid_minor);
    let by: Vec<String> = sqlx::query_scalar("select refunded_by from order_refunds order by id")
        .fetch_all(&app.db.pool)
        .await
        .unwrap();
    assert_eq!(by.len(), 2);
    assert!(by.iter().all(|b| b.starts_with("command line")));
    assert_no_drift(&app.db.inventory()).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_double_submitted_refund_form_is_one_refund_and_free_units_cost_nothing() {
    let app = spawn_app().await;
    app.load_demo().await;
    app.add_staff().await;
    let (staff, csrf) = app.staff_browser().await;
    // the honey is free today
    sqlx::query("update products set price_minor = 0 where id = 'wild-honey'")
        .execute(&app.db.pool)
        .await
        .unwrap();
    let order = paid(&app.db, "double-1", &[(TIER, 3), ("wild-honey", 1)]).await;
    let page = app
        .admin_page(&staff, &format!("/admin/orders/{}", order.id))
        .await;
    let key = hidden(&page, "refund_key");
    // the same form, pressed five times at once
    let presses = (0..5).map(|_| {
        let staff = staff.clone();
        let url = format!("{}/admin/orders/{}/refund", app.address, order.id);
        let form = vec![
            ("csrf", csrf.clone()),
            ("refund_key", key.clone()),
            ("reason", "Double click".to_owned()),
            ("step", "refund".to_owned()),
            ("units:harbour-lights-vip", "1".to_owned()),
            ("units:wild-honey", "0".to_owned()),
            ("restock", "on".to_owned()),
        ];
        async move {
            let response = staff.post(url).form(&form).send().await.unwrap();
            location(&response)
        }
    });
    let answers = join_all(presses).await;
    assert!(
        answers
            .iter()
            .all(|a| a.ends_with("notice=staff_refund_queued")),
        "{answers:?}"
    );
    let refunds: Vec<i64> =
        sqlx::query_scalar("select amount_minor from order_refunds where order_id = $1")
            .bind(order.id)
            .fetch_all(&app.db.pool)
            .await
            .unwrap();
    let price: i64 = sqlx::query_scalar("select price_minor from products where id = $1")
        .bind(TIER)
        .fetch_one(&app.db.pool)
        .await
        .unwrap();
    assert_eq!(refunds, [price], "one refund for five presses");
    let jobs: i64 = sqlx::query_scalar("select count(*) from outbox_jobs where kind = 'refund'")
        .fetch_one(&app.db.pool)
        .await
        .unwrap();
    assert_eq!(jobs, 1);
    // the same key for another order is refused
    let other = paid(&app.db, "double-2", &[(TIER, 1)]).await;
    let response = staff
        .post(format!("{}/admin/orders/{}/refund", app.address, other.id))
        .form(&[
            ("csrf", csrf.as_str()),
            ("refund_key", key.as_str()),
            ("reason", "x"),
            ("step", "refund"),
            ("units:harbour-lights-vip", "1"),
        ])
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), StatusCode::BAD_REQUEST);

    // the free jar: refunded for nothing, no provider call
    let notice = refund(
        &app,
        &staff,
        &csrf,
        order.id,
        &[(TIER, "0"), ("wild-honey", "1")],
        &[],
    )
    .await;
    assert_eq!(notice, "staff_refund_queued");
    let jobs: i64 = sqlx::query_scalar("select count(*) from outbox_jobs where kind = 'refund'")
        .fetch_one(&app.db.pool)
        .await
        .unwrap();
    assert_eq!(jobs, 1, "nothing to ask the provider for");
    // the rest: the order waits for its two refunds at the provider
    let notice = refund(
        &app,
        &staff,
        &csrf,
        order.id,
        &[(TIER, "2"), ("wild-honey", "0")],
        &[],
    )
    .await;
    assert_eq!(notice, "staff_refund_whole");
    let (refunded, paid_minor, state) = refunded_minor(&app, order.id).await;
    assert_eq!((refunded, state.as_str()), (paid_minor, "refund_pending"));
    let recorded: Vec<i64> = sqlx::query_scalar(
        "select amount_minor from order_refunds where order_id = $1 order by id",
    )
    .bind(order.id)
    .fetch_all(&app.db.pool)
    .await
    .unwrap();
    assert_eq!(recorded, [price, 0, 2 * price]);
    let asked: Vec<i64> = sqlx::query_scalar(
        "select (payload->>'amount_minor')::int8 from outbox_jobs where kind = 'refund' order by id",
    )
    .fetch_all(&app.db.pool)
    .await
    .unwrap();
    assert_eq!(asked, [price, 2 * price]);
    assert_no_drift(&app.db.inventory()).await;
}
