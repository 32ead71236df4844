//! Bad input gets a clear outcome or error and changes nothing.

use std::time::Duration;

use holdfast::inventory::{
    BeginPaymentOutcome, Capacity, ConfirmOutcome, ExtendOutcome, HoldId, HoldOutcome,
    InventoryError, InventorySettings, PaymentRef, ReleaseOutcome, Span, UpsertOutcome,
};

use holdfast_testkit::*;

/// Everything that could have changed, in one comparable value.
async fn snapshot(db: &TestDb) -> (String, String, String, i64, i64) {
    sqlx::query_as(
        "select (select coalesce(string_agg(row(r.*)::text, ',' order by id), '') from resources r), \
                (select row(hold_ttl, payment_window, account_cap, cap_scope, max_extensions, extension)::text from inventory_settings), \
                (select coalesce(string_agg(row(h.*)::text, ',' order by id), '') from holds h), \
                (select count(*) from hold_events), \
                (select count(*) from payment_refs)",
    )
    .fetch_one(&db.pool)
    .await
    .unwrap()
}

fn sqlstate(error: &sqlx::Error) -> Option<String> {
    error
        .as_database_error()
        .and_then(|e| e.code())
        .map(|c| c.to_string())
}

#[tokio::test]
async fn the_sql_functions_refuse_bad_input_with_a_clear_error_and_change_nothing() {
    let db = TestDb::new().await;
    let inventory = db.inventory();
    let slot = resource(&inventory, "slot", 5).await;
    let hold = hold_ok(&inventory, &request(&slot, 2, "rosa")).await;
    let before = snapshot(&db).await;

    let refusals = [
        (
            "select hf_hold('slot', 0, 'a')",
            "qty must be a positive number",
        ),
        (
            "select hf_hold('slot', -2, 'a')",
            "qty must be a positive number",
        ),
        ("select hf_hold('slot', 1, '')", "account id"),
        (
            "select hf_hold('slot', 1, 'a', null, interval '0')",
            "hold TTL must be positive",
        ),
        (
            "select hf_hold('slot', 1, 'a', null, interval '-5 seconds')",
            "hold TTL must be positive",
        ),
        ("select hf_upsert_resource('', 3)", "resource id"),
        (
            "select hf_upsert_resource('slot', -1)",
            "total must be zero or more",
        ),
        (
            "select hf_hold_basket('{}'::text[], '{}'::int[], 'a')",
            "at least one line",
        ),
        (
            "select hf_hold_basket(array['slot'], array[1, 2], 'a')",
            "one quantity per resource",
        ),
        (
            "select hf_hold_basket(array['slot'], array[0], 'a')",
            "positive qty",
        ),
        (
            "select hf_confirm(gen_random_uuid(), '')",
            "payment reference",
        ),
        ("select hf_release(gen_random_uuid(), '')", "release reason"),
        (
            "select hf_extend(gen_random_uuid(), interval '-1 minute')",
            "extension must be positive",
        ),
        (
            "select hf_begin_payment(gen_random_uuid(), interval '1 minute')",
            "must be longer than the hold TTL",
        ),
        ("select hf_sweep_resource('slot', 0)", "sweep limit"),
    ];
    for (statement, message) in refusals {
        let error = sqlx::query(statement)
            .execute(&db.pool)
            .await
            .expect_err(statement);
        assert_eq!(
            sqlstate(&error).as_deref(),
            Some("22023"),
            "{statement}: {error}"
        );
        assert!(error.to_string().contains(message), "{statement}: {error}");
    }
    assert_eq!(snapshot(&db).await, before);

    // the typed API says the same, and the hold is untouched
    let window = Span::parse("window", Duration::from_secs(60)).unwrap();
    let error = inventory
        .begin_payment(hold.id, Some(window))
        .await
        .unwrap_err();
    assert!(
        matches!(error, InventoryError::InvalidInput(ref m) if m.contains("longer than the hold TTL")),
        "{error}"
    );
    assert_eq!(snapshot(&db).await, before);
}

#[tokio::test]
async fn unknown_ids_get_their_own_outcome_and_change_nothing() {
    let db = TestDb::new().await;
    let inventory = db.inventory();
    resource(&inventory, "slot", 5).await;
    let before = snapshot(&db).await;
    let nobody = HoldId(uuid::Uuid::new_v4());
    let payment = PaymentRef::parse("pi_x").unwrap();

    assert_eq!(
        inventory
            .hold(&request(&rid("missing"), 1, "sam"))
            .await
            .unwrap(),
        HoldOutcome::UnknownResource
    );
    assert_eq!(
        inventory.begin_payment(nobody, None).await.unwrap(),
        BeginPaymentOutcome::NotFound
    );
    assert_eq!(
        inventory.confirm(nobody, &payment).await.unwrap(),
        ConfirmOutcome::NotFound
    );
    assert_eq!(
        inventory.release(nobody, "x", "staff").await.unwrap(),
        ReleaseOutcome::NotFound
    );
    assert_eq!(
        inventory.extend(nobody, None).await.unwrap(),
        ExtendOutcome::NotFound
    );
    assert_eq!(inventory.status(&rid("missing")).await.unwrap(), None);
    assert_eq!(inventory.repair(&rid("missing")).await.unwrap(), None);
    assert_eq!(snapshot(&db).await, before);
}

#[tokio::test]
async fn capacity_below_what_is_committed_is_refused_and_changes_nothing() {
    let db = TestDb::new().await;
    let inventory = db.inventory();
    let slot = resource(&inventory, "slot", 8).await;
    let sold = hold_ok(&inventory, &request(&slot, 3, "tom")).await;
    inventory
        .confirm(sold.id, &PaymentRef::parse("pi_tom").unwrap())
        .await
        .unwrap();
    hold_ok(&inventory, &request(&slot, 2, "uma")).await;
    let before = snapshot(&db).await;

    match inventory
        .upsert_resource(&slot, Capacity::parse(4).unwrap())
        .await
        .unwrap()
    {
        UpsertOutcome::CapacityBelowCommitted {
            counters,
            requested,
        } => {
            assert_eq!(
                (counters.total, counters.held, counters.sold, requested),
                (8, 2, 3, 4)
            );
        }
        other => panic!("expected a refusal, got {other:?}"),
    }
    assert_eq!(snapshot(&db).await, before);
    // exactly what is committed is allowed
    assert!(matches!(
        inventory
            .upsert_resource(&slot, Capacity::parse(5).unwrap())
            .await
            .unwrap(),
        UpsertOutcome::Updated { .. }
    ));
}

#[tokio::test]
async fn settings_that_break_the_rules_are_refused_and_change_nothing() {
    let db = TestDb::new().await;
    let inventory = db.inventory();
    let current = inventory.settings().await.unwrap();
    let before = snapshot(&db).await;
    let bad = [
        InventorySettings {
            hold_ttl_seconds: 0.0,
            ..current.clone()
        },
        InventorySettings {
            hold_ttl_seconds: -60.0,
            ..current.clone()
        },
        InventorySettings {
            payment_window_seconds: current.hold_ttl_seconds,
            ..current.clone()
        },
        InventorySettings {
            payment_window_seconds: 60.0,
            ..current.clone()
        },
        InventorySettings {
            account_cap: Some(0),
            ..current.clone()
        },
        InventorySettings {
            max_extensions: -1,
            ..current.clone()
        },
        InventorySettings {
            extension_seconds: 0.0,
            ..current.clone()
        },
    ];
    for settings in bad {
        let error = inventory.configure(&settings).await.unwrap_err();
        assert!(
            matches!(error, InventoryError::InvalidInput(_)),
            "{settings:?}: {error}"
        );
    }
    assert_eq!(snapshot(&db).await, before);
    assert_eq!(inventory.settings().await.unwrap(), current);
}

/// Every route, with text PostgreSQL cannot store in its path, its query
/// or its form: 400 with the shop's error page and its headers, and
/// nothing changed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn text_that_cannot_be_stored_is_refused_at_the_edge_on_every_route() {
    let app = spawn_app().await;
    app.load_demo().await;
    app.add_staff().await;
    let (staff, csrf) = app.staff_browser().await;
    // a shopper mid-checkout, so the order routes have a real token
    let shopper = browser();
    let token = app
        .start(&shopper, &Purchase::of("wild-honey", 1))
        .await
        .token;
    let before = holdfast_testkit::snapshot(&app.db.pool).await;

    let mut gets: Vec<String> = [
        "/c/%00",
        "/c/bakery%C3",
        "/c/bakery?page=%00",
        "/?q=%FF%FE",
        "/basket?x=%00",
        "/orders/%00",
        "/pay/%00",
        "/checkout/return/%00",
        "/checkout/cancel/%00",
        "/static/shop.css?v=%E9",
        "/healthz?%00",
        "/metrics?x=%00",
        "/admin/login?next=%00",
        "/admin/resources/%00",
        "/admin/orders?state=%00",
        "/admin/holds?resource=%C0%AF",
    ]
    .map(str::to_owned)
    .to_vec();
    gets.push(format!("/orders/{token}%00"));
    gets.push(format!("/checkout/return/{token}?session_id=cs_%00"));
    gets.push(format!("/checkout/cancel/{token}?x=%00"));
    for path in &gets {
        for client in [&shopper, &staff] {
            let response = client
                .get(format!("{}{path}", app.address))
                .send()
                .await
                .unwrap();
            assert_eq!(response.status(), 400, "GET {path}");
            assert!(
                response.headers().contains_key("content-security-policy"),
                "GET {path}"
            );
            let page = response.text().await.unwrap();
            assert!(page.contains("cannot be stored"), "GET {path}: {page}");
        }
    }
    let forms: Vec<(String, String)> = vec![
        (
            "/basket/add".into(),
            "product_id=wild-honey%00&qty=1".into(),
        ),
        ("/basket/add".into(), "product_id=%FF&qty=1".into()),
        ("/basket/remove".into(), "product_id=%00".into()),
        (
            "/checkout".into(),
            "checkout_key=abc&name=Ada%00&email=ada%40example.com".into(),
        ),
        (
            "/checkout".into(),
            "checkout_key=abc&name=Ada&email=ada%40example.com%E9".into(),
        ),
        ("/checkout".into(), "na%00me=Ada".into()),
        (
            "/admin/login".into(),
            "email=grace%00%40holdfast.test&password=x&csrf=y".into(),
        ),
        (
            format!("/checkout/return/{token}"),
            "razorpay_payment_id=pay_%00&razorpay_order_id=order_1&razorpay_signature=00".into(),
        ),
        (format!("/checkout/cancel/{token}"), "x=%00".into()),
        (
            "/admin/resources/wild-honey/capacity".into(),
            format!("csrf={csrf}&total=4%00"),
        ),
        ("/admin/logout".into(), format!("csrf={csrf}%00")),
    ];
    for (path, body) in &forms {
        for client in [&shopper, &staff] {
            let response = client
                .post(format!("{}{path}", app.address))
                .header("Content-Type", "application/x-www-form-urlencoded")
                .body(body.clone())
                .send()
                .await
                .unwrap();
            assert_eq!(response.status(), 400, "POST {path} {body}");
            let page = response.text().await.unwrap();
            assert!(page.contains("cannot be stored"), "POST {path}: {page}");
        }
    }
    // a webhook body with a NUL, raw or escaped, or bytes that are not UTF-8
    for body in [
        br#"{"id":"evt_\u0000","type":"checkout.session.completed"}"#.to_vec(),
        b"{\"id\":\"evt_1\",\"type\":\"x\0\"}".to_vec(),
        b"{\"id\":\"evt_\xff\"}".to_vec(),
    ] {
        for provider in ["stripe", "razorpay"] {
            let response = http_client()
                .post(format!("{}/webhooks/{provider}", app.address))
                .header("Content-Type", "application/json")
                .body(body.clone())
                .send()
                .await
                .unwrap();
            assert_eq!(response.status(), 400, "{provider}");
        }
    }
    assert_eq!(holdfast_testkit::snapshot(&app.db.pool).await, before);
    // and the same shopper goes on as if nothing had happened
    let basket = shopper
        .get(format!("{}/basket", app.address))
        .send()
        .await
        .unwrap();
    assert_eq!(basket.status(), 200);
}
