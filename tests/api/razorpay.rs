//! The Razorpay path end to end: the same checkout start, the same confirm
//! routine, the same outbox, through the real adapter and the sandbox.

use holdfast::configuration::Secret;
use holdfast::payments::ProviderKind;
use holdfast::payments::signature::hmac_sha256_hex;

use holdfast_testkit::*;

/// Ravi checks out with Razorpay. Both providers were offered, and the
/// shop's own page opens Razorpay Checkout with the order it stored and
/// the order's own return address.
async fn start(app: &TestApp, shopper: &reqwest::Client, product: &str, qty: i64) -> Started {
    let purchase = Purchase::of(product, qty)
        .with(ProviderKind::Razorpay)
        .by("Ravi Shopper", "ravi@example.com");
    let started = app.start(shopper, &purchase).await;
    assert!(
        started.basket.contains("name=\"method\" value=\"card\""),
        "the shopper chooses a way to pay"
    );
    let token = &started.token;
    assert_eq!(started.location, format!("{}/pay/{token}", app.address));
    // our page loads Razorpay Checkout with the order id we stored
    let page = shopper
        .get(&started.location)
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(
        page.contains(&app.sandbox.razorpay.checkout_script_url()),
        "{page}"
    );
    let razorpay_order = &started.page_id;
    assert!(razorpay_order.starts_with("order_") && page.contains(razorpay_order.as_str()));
    // redirect mode comes back to the order's own return address
    assert!(
        page.contains(&format!("{}/checkout/return/{token}", app.address)),
        "{page}"
    );
    started
}

async fn accepted_webhooks(app: &TestApp, at_least: usize) {
    wait_for_accepted(|| app.sandbox.razorpay.ledger(), at_least).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_shopper_pays_with_razorpay_and_gets_codes() {
    let app = spawn_app().await;
    app.load_demo().await;
    let shopper = browser();
    let started = start(&app, &shopper, "harbour-lights-vip", 2).await;
    let token = &started.token;
    // the callback names the order (asserted as it is paid)
    let paid = app.pay(&shopper, &started, &Payment::default()).await;
    assert_eq!(paid.returned().status, 303);
    assert_eq!(paid.order_url(), format!("/orders/{token}"));
    let page = shopper
        .get(format!("{}/orders/{token}", app.address))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(page.contains("Thank you, Ravi Shopper"), "{page}");
    assert_eq!(page.matches("class=\"ticket-code\"").count(), 2);
    // payment.authorized, payment.captured and order.paid all arrive: one
    // sale
    accepted_webhooks(&app, 3).await;
    let status = app
        .db
        .inventory()
        .status(&rid("harbour-lights-vip"))
        .await
        .unwrap()
        .unwrap();
    assert_eq!((status.held, status.sold), (0, 2));
    let paid_with: String = sqlx::query_scalar("select payment_ref from orders")
        .fetch_one(&app.db.pool)
        .await
        .unwrap();
    assert_eq!(Some(paid_with), paid.payment_ref);
}

#[tokio::test]
async fn a_forged_callback_changes_nothing_and_says_so() {
    let app = spawn_app().await;
    app.load_demo().await;
    let shopper = browser();
    let Started {
        token,
        page_id: razorpay_order,
        ..
    } = start(&app, &shopper, "wild-honey", 1).await;
    let forged_signature = hmac_sha256_hex(
        b"not the key secret",
        format!("{razorpay_order}|pay_forged").as_bytes(),
    );
    for fields in [
        vec![
            ("razorpay_payment_id", "pay_forged"),
            ("razorpay_order_id", razorpay_order.as_str()),
            ("razorpay_signature", forged_signature.as_str()),
        ],
        vec![
            ("razorpay_payment_id", "pay_forged"),
            ("razorpay_order_id", razorpay_order.as_str()),
        ],
        vec![
            ("razorpay_payment_id", "pay_forged"),
            ("razorpay_order_id", "order_unknown"),
            ("razorpay_signature", forged_signature.as_str()),
        ],
    ] {
        let response = shopper
            .post(format!("{}/checkout/return/{token}", app.address))
            .form(&fields)
            .send()
            .await
            .unwrap();
        assert_eq!(response.status(), 400);
        assert!(
            response
                .text()
                .await
                .unwrap()
                .contains("We could not verify this payment")
        );
    }
    assert_eq!(app.order_state(&token).await, "pending");
    let claimed: i64 = sqlx::query_scalar("select count(*) from payment_refs")
        .fetch_one(&app.db.pool)
        .await
        .unwrap();
    assert_eq!(claimed, 0);
}

#[tokio::test]
async fn razorpay_webhooks_are_verified_deduplicated_and_order_free() {
    let app = spawn_app().await;
    app.load_demo().await;
    let shopper = browser();
    let Started {
        token,
        page_id: razorpay_order,
        ..
    } = start(&app, &shopper, "wild-honey", 1).await;
    let secret =
        holdfast::configuration::Secret::new(app.sandbox.settings.razorpay_webhook_secret.expose());
    let captured = serde_json::json!({
        "entity": "event", "event": "payment.captured",
        "payload": { "payment": { "entity": {
            "id": "pay_webhook1", "order_id": razorpay_order, "status": "captured",
            "amount": 1400, "currency": "EUR",
        } } },
    })
    .to_string();
    let post = |body: String, signature: Option<String>, event_id: Option<&'static str>| {
        let mut request = holdfast_testkit::http_client()
            .post(format!("{}/webhooks/razorpay", app.address))
            .header("Content-Type", "application/json")
            .body(body);
        if let Some(signature) = signature {
            request = request.header("X-Razorpay-Signature", signature);
        }
        if let Some(id) = event_id {
            request = request.header("X-Razorpay-Event-Id", id);
        }
        async move { request.send().await.unwrap().status().as_u16() }
    };
    let sign = |body: &str, key: &Secret| hmac_sha256_hex(key.expose().as_bytes(), body.as_bytes());
    // forged, unsigned, without an event id, malformed: 400, nothing changes
    assert_eq!(
        post(
            captured.clone(),
            Some(sign(&captured, &Secret::new("wrong"))),
            Some("evt_1")
        )
        .await,
        400
    );
    assert_eq!(post(captured.clone(), None, Some("evt_1")).await, 400);
    assert_eq!(
        post(captured.clone(), Some(sign(&captured, &secret)), None).await,
        400
    );
    assert_eq!(
        post(
            "{oops".into(),
            Some(sign("{oops", &secret)),
            Some("evt_bad")
        )
        .await,
        400
    );
    assert_eq!(app.order_state(&token).await, "pending");
    // the real thing three times: one effect
    for _ in 0..3 {
        assert_eq!(
            post(
                captured.clone(),
                Some(sign(&captured, &secret)),
                Some("evt_1")
            )
            .await,
            200
        );
    }
    assert_eq!(app.order_state(&token).await, "paid");
    // payment.failed for the same order is ignored; unknown types are 200
    let failed = serde_json::json!({ "entity": "event", "event": "payment.failed", "payload": { "payment": { "entity": { "id": "pay_x", "order_id": razorpay_order, "status": "failed" } } } }).to_string();
    assert_eq!(
        post(failed.clone(), Some(sign(&failed, &secret)), Some("evt_2")).await,
        200
    );
    let unknown = serde_json::json!({ "entity": "event", "event": "invoice.paid", "payload": {} })
        .to_string();
    assert_eq!(
        post(
            unknown.clone(),
            Some(sign(&unknown, &secret)),
            Some("evt_3")
        )
        .await,
        200
    );
    assert_eq!(app.order_state(&token).await, "paid");
    let events: i64 =
        sqlx::query_scalar("select count(*) from webhook_events where provider = 'razorpay'")
            .fetch_one(&app.db.pool)
            .await
            .unwrap();
    assert_eq!(events, 3);
}
