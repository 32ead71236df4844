//! The Razorpay path end to end: the same checkout start, the same confirm
//! routine, the same outbox, through the real adapter and the sandbox.

use futures::future::join_all;
use holdfast::checkout::catalogue::CatalogueFile;
use holdfast::configuration::Secret;
use holdfast::payments::ProviderError;
use holdfast::webhooks::signature::hmac_sha256_hex;

use crate::helpers::*;

async fn load_demo(app: &TestApp) {
    CatalogueFile::read(concat!(env!("CARGO_MANIFEST_DIR"), "/fixtures/catalogue.json").as_ref())
        .unwrap()
        .load(&app.db.pool)
        .await
        .unwrap();
}

/// A shopper checks out with Razorpay; returns (order token, Razorpay order
/// id, the sandbox's hosted page URL with the callback as Checkout would
/// send it).
async fn start(
    app: &TestApp,
    shopper: &reqwest::Client,
    product: &str,
    qty: i64,
) -> (String, String, String) {
    let added = shopper
        .post(format!("{}/basket/add", app.address))
        .form(&[("product_id", product), ("qty", &qty.to_string())])
        .send()
        .await
        .unwrap();
    assert_eq!(added.status(), 303);
    let basket = shopper
        .get(format!("{}/basket", app.address))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(
        basket.contains("value=\"razorpay\""),
        "both providers are offered"
    );
    let key = field(&basket, "checkout_key");
    let started = shopper
        .post(format!("{}/checkout", app.address))
        .form(&[
            ("checkout_key", key.as_str()),
            ("name", "Ravi Shopper"),
            ("email", "ravi@example.com"),
            ("provider", "razorpay"),
        ])
        .send()
        .await
        .unwrap();
    assert_eq!(started.status(), 303);
    let pay_page_url = location(&started);
    let token = pay_page_url.rsplit('/').next().unwrap().to_owned();
    assert_eq!(
        pay_page_url,
        format!("{}/pay/razorpay/{token}", app.address)
    );
    // our page loads Razorpay Checkout with the order id we stored
    let page = shopper
        .get(&pay_page_url)
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
    let razorpay_order: String =
        sqlx::query_scalar("select provider_session_id from orders where token = $1")
            .bind(&token)
            .fetch_one(&app.db.pool)
            .await
            .unwrap();
    assert!(razorpay_order.starts_with("order_") && page.contains(&razorpay_order));
    // what checkout.js's open() does in redirect mode
    let hosted = format!(
        "{}/razorpay/pay/{razorpay_order}?callback_url={}&cancel_url={}",
        app.sandbox.base,
        urlencode(&format!("{}/checkout/razorpay/callback", app.address)),
        urlencode(&format!("{}/checkout/cancel/{token}", app.address)),
    );
    (token, razorpay_order, hosted)
}

fn urlencode(text: &str) -> String {
    text.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => {
                (b as char).to_string()
            }
            _ => format!("%{b:02X}"),
        })
        .collect()
}

/// Press an action on the hosted page; returns the callback form's fields.
async fn press(shopper: &reqwest::Client, hosted: &str, action: &str) -> Vec<(String, String)> {
    let page = shopper
        .get(hosted)
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    let callback = field(&page, "callback_url");
    let cancel = field(&page, "cancel_url");
    let (base, _) = hosted.split_once('?').unwrap();
    let answer = shopper
        .post(format!("{base}/{action}"))
        .form(&[("callback_url", callback), ("cancel_url", cancel)])
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    [
        "razorpay_payment_id",
        "razorpay_order_id",
        "razorpay_signature",
    ]
    .iter()
    .map(|name| (name.to_string(), field(&answer, name)))
    .collect()
}

async fn callback(
    app: &TestApp,
    shopper: &reqwest::Client,
    fields: &[(String, String)],
) -> reqwest::Response {
    shopper
        .post(format!("{}/checkout/razorpay/callback", app.address))
        .form(fields)
        .send()
        .await
        .unwrap()
}

async fn accepted_webhooks(app: &TestApp, at_least: usize) {
    wait_for_accepted(|| app.sandbox.razorpay.ledger(), at_least).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_shopper_pays_with_razorpay_and_gets_codes() {
    let app = spawn_app().await;
    load_demo(&app).await;
    let shopper = browser();
    let (token, razorpay_order, hosted) = start(&app, &shopper, "harbour-lights-vip", 2).await;
    let fields = press(&shopper, &hosted, "pay").await;
    assert_eq!(fields[1].1, razorpay_order);
    let back = callback(&app, &shopper, &fields).await;
    assert_eq!(back.status(), 303);
    assert_eq!(location(&back), format!("/orders/{token}"));
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
    // payment.captured and order.paid both arrive: one sale
    accepted_webhooks(&app, 2).await;
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
    assert_eq!(paid_with, fields[0].1);
}

#[tokio::test]
async fn a_forged_callback_changes_nothing_and_says_so() {
    let app = spawn_app().await;
    load_demo(&app).await;
    let shopper = browser();
    let (token, razorpay_order, _) = start(&app, &shopper, "wild-honey", 1).await;
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
            .post(format!("{}/checkout/razorpay/callback", app.address))
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
    load_demo(&app).await;
    let shopper = browser();
    let (token, razorpay_order, _) = start(&app, &shopper, "wild-honey", 1).await;
    let secret = app.sandbox.settings.razorpay_webhook_secret.clone();
    let captured = serde_json::json!({
        "entity": "event", "event": "payment.captured",
        "payload": { "payment": { "entity": { "id": "pay_webhook1", "order_id": razorpay_order, "status": "captured" } } },
    })
    .to_string();
    let post = |body: String, signature: Option<String>, event_id: Option<&'static str>| {
        let mut request = reqwest::Client::new()
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

#[tokio::test]
async fn a_concurrent_duplicate_refund_gets_409_and_one_refund_happens() {
    let sandbox = spawn_sandbox();
    let razorpay = sandbox.razorpay_adapter();
    let order = razorpay
        .create_order("holdfast-order-1", 5000, "inr")
        .await
        .unwrap();
    assert_eq!(
        (order.amount, order.currency.as_str(), order.status.as_str()),
        (5000, "INR", "created")
    );
    // pay it on the hosted page (no callback needed here)
    let paid = reqwest::Client::new()
        .post(format!("{}/razorpay/pay/{}/pay", sandbox.base, order.id))
        .form(&[("callback_url", "")])
        .send()
        .await
        .unwrap();
    assert_eq!(paid.status(), 200);
    let payment_id = sandbox.razorpay.ledger().charges[0].payment_intent.clone();
    let payment = razorpay.fetch_payment(&payment_id).await.unwrap();
    assert_eq!(
        (payment.status.as_str(), payment.order_id.as_deref()),
        ("captured", Some(order.id.as_str()))
    );

    let results = join_all((0..4).map(|_| razorpay.refund(&payment_id, "refund:job-42"))).await;
    let ok: Vec<&String> = results
        .iter()
        .filter_map(|r| r.as_ref().ok().map(|(id, _)| id))
        .collect();
    let conflicts = results
        .iter()
        .filter(|r| matches!(r, Err(ProviderError::Refused { status: 409, .. })))
        .count();
    assert_eq!(ok.len() + conflicts, 4, "{results:?}");
    assert!(
        conflicts >= 1,
        "concurrent duplicates are refused: {results:?}"
    );
    assert!(ok.iter().all(|id| *id == ok[0]));
    // afterwards the key replays the same refund
    let (again, state) = razorpay.refund(&payment_id, "refund:job-42").await.unwrap();
    assert_eq!(
        (&again, state),
        (ok[0], holdfast::payments::RefundState::Settled)
    );
    assert_eq!(sandbox.razorpay.ledger().refunds.len(), 1);
    // wrong keys are refused without printing them
    let wrong = holdfast::payments::razorpay::RazorpayAdapter::new(
        &holdfast::payments::razorpay::RazorpaySettings {
            key_id: "rzp_test_x".into(),
            key_secret: Secret::new("super-secret-value"),
            api_base: sandbox.razorpay.api_base(),
        },
    )
    .unwrap();
    let refused = wrong.fetch_payment(&payment_id).await.unwrap_err();
    assert!(matches!(
        refused,
        ProviderError::Refused { status: 401, .. }
    ));
    assert!(!format!("{refused:?} {wrong:?}").contains("super-secret-value"));
}
