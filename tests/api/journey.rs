//! The shop end to end over HTTP: basket, checkout start, the sandbox's
//! hosted page, the signed webhook and the return, the order page; refunds
//! executed through the sandbox by the outbox worker.

use std::time::Duration;

use futures::future::join_all;
use holdfast::configuration::Secret;
use holdfast::payments::PaymentProvider;
use holdfast::payments::stripe::signature::stripe_signature_header;
use holdfast::staff::api_keys::Scope;
use holdfast_sandbox::DeliveryMode;

use holdfast_testkit::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_shopper_buys_the_last_slot_and_two_tickets_and_gets_codes() {
    let app = spawn_app().await;
    app.load_demo().await;
    let slot = app.db.first_slot().await;
    app.db
        .inventory()
        .upsert_resource(
            &rid(&slot),
            holdfast::inventory::Capacity::parse(1).unwrap(),
        )
        .await
        .unwrap();
    app.settled().await;
    let shopper = browser();
    // the bakery's page shows its first day's times, the slot among them
    let bakery = read_page(&shopper, &format!("{}/c/bakery", app.address)).await;
    assert!(
        bakery.contains("Bakery pickup") && bakery.contains("1 left"),
        "the last slot shows: {bakery}"
    );

    let purchase = Purchase::of(&slot, 1).and("harbour-lights-general", 2);
    let started = app.start(&shopper, &purchase).await;
    let session_url = &started.location;
    assert!(
        session_url.starts_with(&format!("{}/stripe/pay/cs_test_", app.sandbox.base)),
        "{session_url}"
    );
    let hosted = shopper
        .get(session_url)
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(hosted.contains("Pay 88.00 EUR"), "{hosted}");
    // while paying, the slot is held: nobody else sees it
    app.settled().await;
    let bakery = read_page(&browser(), &format!("{}/c/bakery", app.address)).await;
    assert!(bakery.contains("Sold out"), "{bakery}");

    let paid = app.pay(&shopper, &started, &Payment::default()).await;
    assert_eq!(paid.returned().status, 303);
    let order_url = paid.order_url();
    let page = shopper
        .get(format!("{}{order_url}", app.address))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(page.contains("Thank you, Ada Shopper"), "{page}");
    assert!(page.contains("class=\"code pickup-code\""));
    assert_eq!(page.matches("class=\"ticket-code\"").count(), 2);

    // the session id alone (it shows up in URLs and history) opens nothing
    let session_id = &started.page_id;
    let stranger = browser()
        .get(format!(
            "{}/checkout/return/{}?session_id={session_id}",
            app.address,
            "0".repeat(64)
        ))
        .send()
        .await
        .unwrap();
    assert_eq!(stranger.status(), 404);
    // cancelling after paying does not claim nothing was charged
    let cancel = shopper
        .get(format!(
            "{}/checkout/cancel/{}",
            app.address,
            token_of(&order_url)
        ))
        .send()
        .await
        .unwrap();
    assert_eq!(cancel.status(), 303);
    assert_eq!(location(&cancel), order_url);
    let pressed = shopper
        .post(format!(
            "{}/checkout/cancel/{}",
            app.address,
            token_of(&order_url)
        ))
        .send()
        .await
        .unwrap();
    assert_eq!(pressed.status(), 303);
    assert_eq!(location(&pressed), order_url);

    // the webhook arrives too and changes nothing more
    wait_for_accepted(|| app.sandbox.stripe.ledger(), 1).await;
    let inventory = app.db.inventory();
    assert_eq!(
        inventory.status(&rid(&slot)).await.unwrap().unwrap().sold,
        1
    );
    assert_eq!(
        inventory
            .status(&rid("harbour-lights-general"))
            .await
            .unwrap()
            .unwrap()
            .sold,
        2
    );
    // a code per ticket, and the slot's pickup code
    let codes: i64 = sqlx::query_scalar("select count(*) from order_items")
        .fetch_one(&app.db.pool)
        .await
        .unwrap();
    assert_eq!(codes, 3);
    assert_no_drift(&inventory).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn abandoning_gives_the_units_back_and_late_money_is_refunded() {
    let app = spawn_app().await;
    app.load_demo().await;
    let shopper = browser();
    let started = app
        .start(&shopper, &Purchase::of("harbour-lights-vip", 3))
        .await;
    let session_url = &started.location;
    assert_eq!(
        app.db
            .inventory()
            .status(&rid("harbour-lights-vip"))
            .await
            .unwrap()
            .unwrap()
            .held,
        3
    );

    // back to the shop from the hosted page
    let left = shopper
        .post(format!("{session_url}/abandon"))
        .send()
        .await
        .unwrap();
    let cancel = location(&left);
    // the provider's cancel URL asks and changes nothing (a link
    // prefetcher or a mail scanner may follow it)
    let before = snapshot(&app.db.pool).await;
    for _ in 0..3 {
        let asked = shopper.get(&cancel).send().await.unwrap();
        assert_eq!(asked.status(), 200);
        assert_eq!(asked.headers()["cache-control"], "no-store");
        let page = asked.text().await.unwrap();
        assert!(page.contains("Leave checkout?"), "{page}");
        assert!(page.contains("Your items go back on sale"), "{page}");
        assert!(page.contains("Harbour Lights"), "{page}");
    }
    assert_eq!(snapshot(&app.db.pool).await, before);
    assert_eq!(
        app.db
            .inventory()
            .status(&rid("harbour-lights-vip"))
            .await
            .unwrap()
            .unwrap()
            .held,
        3
    );
    // pressing the button releases
    let cancelled = shopper.post(&cancel).send().await.unwrap();
    assert_eq!(cancelled.status(), 200);
    assert!(
        cancelled
            .text()
            .await
            .unwrap()
            .contains("Checkout cancelled")
    );
    assert_eq!(
        app.db
            .inventory()
            .status(&rid("harbour-lights-vip"))
            .await
            .unwrap()
            .unwrap()
            .held,
        0
    );
    // pressing it again, or asking again, says the same and changes nothing
    let after = snapshot(&app.db.pool).await;
    let again = shopper.post(&cancel).send().await.unwrap();
    assert_eq!(again.status(), 200);
    let asked = shopper
        .get(&cancel)
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(asked.contains("Checkout cancelled"), "{asked}");
    assert_eq!(snapshot(&app.db.pool).await, after);
    // the worker closes the provider's page as well
    app.outbox().await;
    let session_id = &started.page_id;
    let session = app.sandbox.stripe.session(session_id).unwrap();
    assert_eq!(session["status"], "expired");

    // money arriving after all that is refunded, never sold
    let forced = holdfast_testkit::http_client()
        .post(format!(
            "{}/stripe/_sandbox/sessions/{session_id}/force-pay",
            app.sandbox.base
        ))
        .send()
        .await
        .unwrap();
    assert_eq!(forced.status(), 204);
    let token = token_of(&cancel);
    app.wait_for_state(&token, "refund_pending").await;
    app.refunded_by_the_outbox(&token).await;
    assert_eq!(app.sandbox.stripe.ledger().refunds.len(), 1);
    assert_eq!(
        app.db
            .inventory()
            .status(&rid("harbour-lights-vip"))
            .await
            .unwrap()
            .unwrap()
            .sold,
        0
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn two_hundred_checkouts_over_http_for_ten_units_send_ten_to_the_provider() {
    let app = spawn_app_with(TestDb::with_connections(40).await).await;
    app.load_demo().await;
    app.db
        .inventory()
        .upsert_resource(
            &rid("harbour-lights-vip"),
            holdfast::inventory::Capacity::parse(10).unwrap(),
        )
        .await
        .unwrap();
    let mut shoppers = Vec::new();
    for _ in 0..200 {
        let shopper = browser();
        app.add(&shopper, "harbour-lights-vip", 1).await;
        let page = shopper
            .get(format!("{}/basket", app.address))
            .send()
            .await
            .unwrap()
            .text()
            .await
            .unwrap();
        shoppers.push((shopper, checkout_key(&page)));
    }
    let responses = join_all(
        shoppers
            .iter()
            .map(|(shopper, key)| app.submit_checkout(shopper, key)),
    )
    .await;
    let mut to_provider = 0;
    let mut told = 0;
    for response in responses {
        match response.status().as_u16() {
            303 => {
                assert!(location(&response).contains("/stripe/pay/cs_test_"));
                to_provider += 1;
            }
            409 => {
                let page = response.text().await.unwrap();
                assert!(
                    page.contains("no longer available")
                        && page.contains("Harbour Lights — VIP: sold out"),
                    "{page}"
                );
                told += 1;
            }
            other => panic!("unexpected status {other}"),
        }
    }
    assert_eq!((to_provider, told), (10, 190));
    let status = app
        .db
        .inventory()
        .status(&rid("harbour-lights-vip"))
        .await
        .unwrap()
        .unwrap();
    assert_eq!((status.held, status.available), (10, 0));
    assert_eq!(app.sandbox.stripe.ledger().charges.len(), 0);
}

#[tokio::test]
async fn a_provider_outage_at_checkout_start_releases_the_holds_and_tells_the_shopper() {
    let TestApp { db, sandbox, .. } = spawn_app().await;
    // a shop whose Stripe is unreachable
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let address = format!("http://127.0.0.1:{}", listener.local_addr().unwrap().port());
    let payments = holdfast::payments::Providers::build(&holdfast::payments::ProviderSettings {
        stripe: Some(holdfast::payments::stripe::StripeSettings {
            secret_key: Secret::new("sk_test_x"),
            api_base: "http://127.0.0.1:1/stripe/".into(),
            webhook_secrets: Vec::new(),
            payment_methods: vec!["card".into()],
        }),
        razorpay: None,
        roots: holdfast::payments::http::TrustedRoots::mozilla(),
    })
    .unwrap();
    let shop = holdfast::state::Shop::local(db.pool.clone(), payments, address.clone());
    let live = shop.live.clone();
    let webhooks = shop.webhooks.clone();
    let joins = shop.joins.clone();
    tokio::spawn(
        holdfast::startup::Application::build(listener, shop)
            .unwrap()
            .run_until_stopped(),
    );
    let down = TestApp {
        address,
        db,
        sandbox,
        client: browser(),
        csp_reports: Default::default(),
        live,
        webhooks,
        joins,
    };
    down.load_demo().await;
    let shopper = browser();
    down.add(&shopper, "wild-honey", 5).await;
    let response = down.checkout(&shopper).await;
    assert_eq!(response.status(), 503);
    let page = response.text().await.unwrap();
    assert!(
        page.contains("could not reach the payment provider")
            && page.contains("Nothing was charged"),
        "{page}"
    );
    let status = down
        .db
        .inventory()
        .status(&rid("wild-honey"))
        .await
        .unwrap()
        .unwrap();
    assert_eq!((status.held, status.available), (0, 40));
    let state: String = sqlx::query_scalar("select state from orders")
        .fetch_one(&down.db.pool)
        .await
        .unwrap();
    assert_eq!(state, "cancelled");
}

#[tokio::test]
async fn a_double_submitted_checkout_is_one_order_and_the_same_redirect() {
    let app = spawn_app().await;
    app.load_demo().await;
    let shopper = browser();
    app.add(&shopper, "wild-honey", 1).await;
    let page = shopper
        .get(format!("{}/basket", app.address))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    let key = checkout_key(&page);
    // both submits in flight at once, as a double click sends them
    let (first, second) = tokio::join!(
        app.submit_checkout(&shopper, &key),
        app.submit_checkout(&shopper, &key)
    );
    assert_eq!(
        (first.status(), second.status()),
        (
            reqwest::StatusCode::SEE_OTHER,
            reqwest::StatusCode::SEE_OTHER
        )
    );
    assert_eq!(location(&first), location(&second));
    let (orders, held): (i64, i32) = sqlx::query_as(
        "select (select count(*) from orders), (select held from resources where id = 'wild-honey')",
    )
    .fetch_one(&app.db.pool)
    .await
    .unwrap();
    assert_eq!((orders, held), (1, 1));
}

mod webhooks {
    use super::*;

    fn event(kind: &str, id: &str, object: serde_json::Value) -> String {
        serde_json::json!({ "id": id, "object": "event", "type": kind, "data": { "object": object } }).to_string()
    }

    async fn post(app: &TestApp, body: &str, signature: Option<String>) -> reqwest::Response {
        let mut request = holdfast_testkit::http_client()
            .post(format!("{}/webhooks/stripe", app.address))
            .header("Content-Type", "application/json")
            .body(body.to_owned());
        if let Some(signature) = signature {
            request = request.header("Stripe-Signature", signature);
        }
        request.send().await.unwrap()
    }

    fn sign(app: &TestApp, body: &str, at: i64) -> String {
        stripe_signature_header(
            &holdfast::configuration::Secret::new(
                app.sandbox.settings.stripe_webhook_secret.expose(),
            ),
            at,
            body.as_bytes(),
        )
    }

    /// A checkout on its Stripe page, not paid yet: (session id, order id).
    async fn paid_order(app: &TestApp) -> (String, String) {
        let started = app.start(&browser(), &Purchase::of("wild-honey", 1)).await;
        (started.page_id, started.order_id.to_string())
    }

    async fn effects(app: &TestApp) -> (i64, String, i32) {
        sqlx::query_as(
            "select (select count(*) from webhook_events), \
                    (select string_agg(state, ',' order by created_at) from orders), \
                    (select sold from resources where id = 'wild-honey')",
        )
        .fetch_one(&app.db.pool)
        .await
        .unwrap()
    }

    #[tokio::test]
    async fn forged_stale_malformed_and_oversized_deliveries_are_refused_and_change_nothing() {
        let app = spawn_app().await;
        app.load_demo().await;
        let (session_id, order_id) = paid_order(&app).await;
        let completed = event(
            "checkout.session.completed",
            "evt_forged",
            serde_json::json!({ "id": session_id, "client_reference_id": order_id, "status": "complete", "payment_status": "paid", "payment_intent": "pi_forged", "amount_total": 1400, "currency": "eur" }),
        );
        let now = chrono::Utc::now().timestamp();
        let before = effects(&app).await;
        let forged =
            stripe_signature_header(&Secret::new("whsec_attacker"), now, completed.as_bytes());
        let cases = [
            (completed.clone(), Some(forged)),
            (completed.clone(), None),
            (completed.clone(), Some(sign(&app, &completed, now - 301))),
            (completed.clone(), Some("t=abc,v1=zz".to_owned())),
            ("{not json".to_owned(), Some(sign(&app, "{not json", now))),
            (
                "x".repeat(300 * 1024),
                Some(sign(&app, &"x".repeat(300 * 1024), now)),
            ),
        ];
        for (body, signature) in cases {
            let response = post(&app, &body, signature.clone()).await;
            assert_eq!(response.status(), 400, "{signature:?}");
        }
        assert_eq!(effects(&app).await, before, "nothing changed");

        // a correctly signed event of a type we do not use: 200, ignored
        let unknown = event("customer.created", "evt_unknown", serde_json::json!({}));
        let response = post(&app, &unknown, Some(sign(&app, &unknown, now))).await;
        assert_eq!(response.status(), 200);
    }

    #[tokio::test]
    async fn the_same_event_three_times_and_events_out_of_order_have_one_effect() {
        let app = spawn_app().await;
        app.load_demo().await;
        let (session_id, order_id) = paid_order(&app).await;
        let now = chrono::Utc::now().timestamp();
        let object = serde_json::json!({ "id": session_id, "client_reference_id": order_id, "status": "complete", "payment_status": "paid", "payment_intent": "pi_from_webhook", "amount_total": 1400, "currency": "eur" });
        let completed = event("checkout.session.completed", "evt_paid", object.clone());
        let expired = event("checkout.session.expired", "evt_expired", object);
        // the expiry notice arrives late, after the payment: it must not
        // undo the sale
        for body in [&completed, &completed, &expired, &completed] {
            let response = post(&app, body, Some(sign(&app, body, now))).await;
            assert_eq!(response.status(), 200);
        }
        let (events, states, sold) = effects(&app).await;
        assert_eq!((events, states.as_str(), sold), (2, "paid", 1));
        let confirmations: i64 =
            sqlx::query_scalar("select count(*) from hold_events where kind = 'confirmed'")
                .fetch_one(&app.db.pool)
                .await
                .unwrap();
        assert_eq!(confirmations, 1);
    }
}

mod deliveries {
    use super::*;

    /// One ticket paid on its Stripe page, reported as `report` says, its
    /// webhooks (if any) delivered as `mode` says.
    async fn paid(
        app: &TestApp,
        shopper: &reqwest::Client,
        report: Report,
        mode: DeliveryMode,
    ) -> Paid {
        let payment = Payment::default().reported(report).delivered(mode);
        let purchase = Purchase::of("harbour-lights-general", 1).paying(payment);
        app.buy(shopper, &purchase).await
    }

    async fn counts(app: &TestApp) -> (i64, i64, i64) {
        sqlx::query_as(
            "select (select count(*) from outbox_jobs where kind = 'order_confirmation'), \
                    (select count(*) from outbox_jobs where kind = 'refund'), \
                    (select count(*) from webhook_events)",
        )
        .fetch_one(&app.db.pool)
        .await
        .unwrap()
    }

    #[tokio::test]
    async fn a_lost_webhook_is_covered_by_the_return() {
        let app = spawn_app().await;
        app.load_demo().await;
        let paid = paid(&app, &browser(), Report::Return, DeliveryMode::Normal).await;
        assert_eq!(paid.returned().status, 303);
        assert_eq!(app.order_state(&token_of(&paid.order_url())).await, "paid");
        tokio::time::sleep(Duration::from_millis(300)).await;
        assert!(
            app.sandbox.stripe.ledger().deliveries.is_empty(),
            "nothing was delivered"
        );
        assert_eq!(counts(&app).await, (1, 0, 0));
    }

    #[tokio::test]
    async fn a_late_webhook_still_fulfils_when_the_shopper_never_came_back() {
        let app = spawn_app().await;
        app.load_demo().await;
        let shopper = browser();
        let paid = paid(&app, &shopper, Report::Webhook, DeliveryMode::Late).await;
        let token = paid.started.token;
        assert_eq!(
            app.order_state(&token).await,
            "pending",
            "nothing arrived yet"
        );
        // the order page says it is confirming, and refreshes itself
        let page = shopper
            .get(format!("{}/orders/{token}", app.address))
            .send()
            .await
            .unwrap()
            .text()
            .await
            .unwrap();
        assert!(
            page.contains("Confirming your payment") && page.contains("http-equiv=\"refresh\"")
        );
        wait_for_accepted(|| app.sandbox.stripe.ledger(), 1).await;
        assert_eq!(app.order_state(&token).await, "paid");
    }
}

/// A checkout whose payment page expired at the provider unpaid: the
/// webhook gave its units back, and the order is expired.
async fn expired_page(app: &TestApp, shopper: &reqwest::Client, purchase: &Purchase) -> Started {
    let started = app.start(shopper, purchase).await;
    app.sandbox
        .stripe_provider()
        .close_page(&started.page_id)
        .await
        .unwrap();
    app.wait_for_state(&started.token, "expired").await;
    started
}

#[tokio::test]
async fn paying_on_an_expired_page_is_money_after_expiry_and_is_refunded() {
    let app = spawn_app().await;
    app.load_demo().await;
    let shopper = browser();
    let started = expired_page(&app, &shopper, &Purchase::of("wild-honey", 1)).await;
    let token = &started.token;
    assert_eq!(
        app.db
            .inventory()
            .status(&rid("wild-honey"))
            .await
            .unwrap()
            .unwrap()
            .held,
        0
    );

    let page = shopper
        .get(&started.location)
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(
        page.contains("This payment page is expired") && page.contains("pay-late"),
        "{page}"
    );
    app.pay(&shopper, &started, &Payment::press("pay-late"))
        .await;
    app.wait_for_state(token, "refund_pending").await;
    app.refunded_by_the_outbox(token).await;
    let order = shopper
        .get(format!("{}/orders/{token}", app.address))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(order.contains("Your payment was refunded"), "{order}");
}

/// Late money refunded in full is money the order gave back, read one
/// way: the order's row, the orders export and the API's order each say
/// its whole amount was refunded (it stayed 0.00 while the order said
/// "refunded").
#[tokio::test]
async fn late_money_refunded_in_full_is_the_orders_refunded_amount_everywhere() {
    let app = spawn_app().await;
    app.load_demo().await;
    app.add_staff().await;
    let shopper = browser();
    let started = expired_page(&app, &shopper, &Purchase::of("wild-honey", 2)).await;
    let token = &started.token;
    app.pay(&shopper, &started, &Payment::press("pay-late"))
        .await;
    app.wait_for_state(token, "refund_pending").await;

    // the order's row
    let (amount, refunded, late): (i64, i64, Option<String>) = sqlx::query_as(
        "select amount_minor, refunded_minor, late_money from orders where token = $1",
    )
    .bind(token)
    .fetch_one(&app.db.pool)
    .await
    .unwrap();
    assert_eq!(late.as_deref(), Some("refunded"));
    assert!(amount > 0);
    assert_eq!(refunded, amount, "the order's row");

    // the orders export
    let (staff, _) = app.staff_browser().await;
    let file = super::exports::download(&app, &staff, "/admin/exports/orders.csv").await;
    let rows = super::exports::records(&file.text, super::exports::ORDER_COLUMNS);
    let row = rows
        .iter()
        .find(|r| r["order_id"] == started.order_id.to_string())
        .expect("the order is exported");
    assert_eq!(row["state"], "refund_pending");
    assert_eq!(row["refunded_minor"], amount.to_string(), "the export");
    assert_eq!(row["refunded"], row["amount"], "the export");

    // the API's order
    let key = super::api_v1::key_with(&app, &[Scope::ReadOrders]).await;
    let page: serde_json::Value = holdfast::payments::http::client(Duration::from_secs(30))
        .get(format!("{}/api/v1/orders?limit=200", app.address))
        .bearer_auth(&key)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let order = page["orders"]
        .as_array()
        .unwrap()
        .iter()
        .find(|o| o["token"] == token.as_str())
        .expect("the API lists the order");
    assert_eq!(order["late_money"], "refunded", "{order}");
    assert_eq!(order["refunded_minor"], amount, "the API's order: {order}");
}

#[tokio::test]
async fn the_shop_refuses_bad_input_clearly_and_changes_nothing() {
    let app = spawn_app().await;
    app.load_demo().await;
    let shopper = browser();
    let post = |path: &str, form: Vec<(&'static str, String)>| {
        let request = shopper.post(format!("{}{path}", app.address)).form(&form);
        async move { request.send().await.unwrap() }
    };
    // quantities out of range, unknown products
    assert_eq!(
        post(
            "/basket/add",
            vec![("product_id", "wild-honey".into()), ("qty", "0".into())]
        )
        .await
        .status(),
        400
    );
    assert_eq!(
        post(
            "/basket/add",
            vec![("product_id", "wild-honey".into()), ("qty", "101".into())]
        )
        .await
        .status(),
        400
    );
    assert_eq!(
        post(
            "/basket/add",
            vec![("product_id", "no-such-thing".into()), ("qty", "1".into())]
        )
        .await
        .status(),
        404
    );
    assert_eq!(
        post("/basket/add", vec![("qty", "1".into())])
            .await
            .status(),
        400
    );
    // a malformed e-mail re-shows the basket with the reason; no order
    app.add(&shopper, "wild-honey", 1).await;
    let bad = post(
        "/checkout",
        vec![
            ("checkout_key", "k".repeat(64)),
            ("name", "Ada".into()),
            ("email", "not-an-address".into()),
        ],
    )
    .await;
    assert_eq!(bad.status(), 400);
    assert!(bad.text().await.unwrap().contains("you@example.com"));
    let no_key = post(
        "/checkout",
        vec![("name", "Ada".into()), ("email", "ada@example.com".into())],
    )
    .await;
    assert_eq!(no_key.status(), 400);
    // a forged return, an unknown order link, an unknown page
    for (path, status) in [
        (
            &format!(
                "/checkout/return/{}?session_id=cs_test_forged",
                "0".repeat(64)
            ),
            404,
        ),
        (
            &format!("/checkout/return/{}?session_id=../../etc", "0".repeat(64)),
            404,
        ),
        (&format!("/checkout/return/{}", "0".repeat(64)), 404),
        (&format!("/orders/{}", "0".repeat(64)), 404),
        (&"/orders/short".to_owned(), 404),
        (&"/c/no-such-collection".to_owned(), 404),
    ] {
        let response = shopper
            .get(format!("{}{path}", app.address))
            .send()
            .await
            .unwrap();
        assert_eq!(response.status(), status, "{path}");
        let body = response.text().await.unwrap();
        assert!(
            !body.contains("sqlx") && !body.contains("panicked"),
            "{path}: {body}"
        );
    }
    // an oversized form is refused before it is read
    let huge = post(
        "/basket/add",
        vec![("product_id", "x".repeat(40_000)), ("qty", "1".into())],
    )
    .await;
    assert!(huge.status().is_client_error());
    let (orders, held): (i64, i32) = sqlx::query_as(
        "select (select count(*) from orders), (select coalesce(sum(held), 0)::int from resources)",
    )
    .fetch_one(&app.db.pool)
    .await
    .unwrap();
    assert_eq!((orders, held), (0, 0));
    // and one collection's page shows only that collection
    let slots = shopper
        .get(format!("{}/c/bakery", app.address))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(slots.contains("Bakery pickup") && !slots.contains("Harbour Lights"));
}

#[tokio::test]
async fn checkouts_for_a_sold_out_product_are_refused_without_the_lock_or_an_order() {
    let app = spawn_app().await;
    app.load_demo().await;
    let shopper = browser();
    app.add(&shopper, "harbour-lights-vip", 2).await;
    // everything else is taken by a held (not yet due) hold
    hold_ok(
        &app.db.inventory(),
        &request(&rid("harbour-lights-vip"), 19, "someone-else"),
    )
    .await;
    // another transaction holds the resource's row lock: the locked path
    // would wait for it; a refusal must not
    let mut locker = app.db.pool.begin().await.unwrap();
    sqlx::query("select 1 from resources where id = 'harbour-lights-vip' for update")
        .execute(&mut *locker)
        .await
        .unwrap();
    let response = tokio::time::timeout(Duration::from_secs(5), app.checkout(&shopper))
        .await
        .expect("a sold-out checkout answered without waiting for the lock");
    assert_eq!(response.status(), 409);
    let page = response.text().await.unwrap();
    assert!(page.contains("Harbour Lights — VIP: only 1 left"), "{page}");
    locker.rollback().await.unwrap();
    let orders: i64 = sqlx::query_scalar("select count(*) from orders")
        .fetch_one(&app.db.pool)
        .await
        .unwrap();
    assert_eq!(orders, 0);
    // one unit fits: that checkout goes through the locked path and holds it
    app.start(&browser(), &Purchase::of("harbour-lights-vip", 1))
        .await;
    let status = app
        .db
        .inventory()
        .status(&rid("harbour-lights-vip"))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(status.available, 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn availability_says_what_is_left_and_what_is_pending_and_refuses_bad_questions() {
    let app = spawn_app().await;
    app.load_demo().await;
    app.db
        .inventory()
        .upsert_resource(
            &rid("harbour-lights-vip"),
            holdfast::inventory::Capacity::parse(3).unwrap(),
        )
        .await
        .unwrap();
    app.settled().await;
    let ask = |query: &str| {
        let request = browser().get(format!("{}/availability?{query}", app.address));
        async move { request.send().await.unwrap() }
    };
    let stock = |body: serde_json::Value| -> Vec<(String, i64, i64, bool)> {
        body["products"]
            .as_array()
            .unwrap()
            .iter()
            .map(|p| {
                (
                    p["id"].as_str().unwrap().to_owned(),
                    p["available"].as_i64().unwrap(),
                    p["pending"].as_i64().unwrap(),
                    p["first_back_at"].is_string(),
                )
            })
            .collect()
    };
    let before = ask("ids=harbour-lights-vip,wild-honey,no-such-thing").await;
    assert_eq!(before.status(), 200);
    assert_eq!(before.headers()["cache-control"], "public, max-age=2");
    assert_eq!(
        stock(before.json().await.unwrap()),
        [
            ("harbour-lights-vip".to_owned(), 3, 0, false),
            ("wild-honey".to_owned(), 40, 0, false)
        ]
    );
    // two shoppers paying for 1 and 2 places: sold out, 3 pending
    for qty in [1, 2] {
        app.start(&browser(), &Purchase::of("harbour-lights-vip", qty))
            .await;
    }
    // the answer comes from memory, at most a second behind the database
    let started = std::time::Instant::now();
    loop {
        let during = stock(ask("ids=harbour-lights-vip").await.json().await.unwrap());
        if during == [("harbour-lights-vip".to_owned(), 0, 3, true)] {
            break;
        }
        assert!(
            started.elapsed() < holdfast::live::TRUST_FOR,
            "still {during:?}"
        );
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    // the product page says so, and when the first could come back
    let page = browser()
        .get(format!("{}/c/harbour-lights", app.address))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(
        page.contains("Sold out for now: 3 reserved by shoppers who are paying."),
        "{page}"
    );
    for bad in [
        "".to_owned(),
        "ids=".to_owned(),
        "ids=,,".to_owned(),
        format!("ids={}", vec!["wild-honey"; 101].join(",")),
        format!("ids={}", "x".repeat(201)),
    ] {
        let response = ask(&bad).await;
        assert_eq!(response.status(), 400, "{bad}");
    }
}
