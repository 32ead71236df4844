//! The real Razorpay adapter against the sandbox over HTTP, and the sandbox
//! holding it to Razorpay's rules.

use futures::future::join_all;
use holdfast::configuration::Secret;
use holdfast::payments::razorpay::{RazorpayProvider, RazorpaySettings};
use holdfast::payments::{
    PageStatus, PaymentProvider, PaymentStatus, ProviderError, ProviderPayment, RefundRequest,
    RefundStatus,
};
use uuid::Uuid;

use holdfast_testkit::{http_client, page_request, spawn_sandbox};

fn refund(payment_ref: &str, key: &str, amount: Option<i64>) -> RefundRequest {
    RefundRequest {
        payment_ref: payment_ref.to_owned(),
        amount_minor: amount,
        idempotency_key: key.to_owned(),
        order_id: None,
    }
}

#[tokio::test]
async fn orders_capture_automatically_and_refunds_are_keyed_pending_and_read_by_id() {
    let sandbox = spawn_sandbox();
    sandbox.razorpay.set_refunds_settle_after(None);
    let razorpay = sandbox.razorpay_provider();
    let order_id = Uuid::new_v4();
    let page = razorpay
        .open_page(&page_request(order_id, 31))
        .await
        .unwrap();
    assert!(page.id.starts_with("order_"));
    assert_eq!(page.url, "http://shop.test/pay/token", "our own page");
    let fetched: serde_json::Value = http_client()
        .get(format!(
            "{}v1/orders/{}",
            sandbox.razorpay.api_base(),
            page.id
        ))
        .basic_auth(
            &sandbox.settings.razorpay_key_id,
            Some(sandbox.settings.razorpay_key_secret.expose()),
        )
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(
        (
            fetched["amount"].as_i64(),
            fetched["currency"].as_str(),
            fetched["receipt"].as_str(),
            fetched["status"].as_str()
        ),
        (
            Some(19400),
            Some("EUR"),
            Some(order_id.to_string().as_str()),
            Some("created")
        )
    );

    // paid within the order's window: Razorpay captures it itself
    let payment_id = sandbox.razorpay.authorize(&page.id, None, false).unwrap();
    let state = razorpay.page(&page.id).await.unwrap();
    assert_eq!(state.status, PageStatus::Endless);
    let [payment] = state.payments.as_slice() else {
        panic!("{:?}", state.payments)
    };
    assert_eq!(
        (
            payment.payment_ref.as_str(),
            payment.status,
            payment.amount_minor,
            payment.currency.as_str()
        ),
        (payment_id.as_str(), PaymentStatus::Captured, 19400, "eur")
    );

    // a refund key must be letters, digits, - and _, ten at least: the
    // key Holdfast used to send is refused
    let old_style = format!("refund:razorpay:{payment_id}");
    let refused = razorpay
        .create_refund(&refund(&payment_id, &old_style, None))
        .await
        .unwrap_err();
    assert!(
        matches!(refused, ProviderError::Refused { status: 400, .. }),
        "{refused}"
    );
    let key = holdfast::checkout::refund::idempotency_key(&old_style, 0);
    // concurrent duplicates: one refund, the others told to come back
    let results = join_all((0..4).map(|_| {
        let request = refund(&payment_id, &key, None);
        let razorpay = &razorpay;
        async move { razorpay.create_refund(&request).await }
    }))
    .await;
    let made: Vec<_> = results.iter().filter_map(|r| r.as_ref().ok()).collect();
    let later = results
        .iter()
        .filter(|r| matches!(r, Err(e) if e.is_transient()))
        .count();
    assert_eq!(made.len() + later, 4, "{results:?}");
    assert!(later >= 1, "a duplicate in flight gets 409: {results:?}");
    assert!(made.iter().all(|r| r.id == made[0].id));
    let first = made[0].clone();
    assert_eq!(first.status, RefundStatus::Pending);
    // the same key with the same body: the first answer; another body: no
    let replay = razorpay
        .create_refund(&refund(&payment_id, &key, None))
        .await
        .unwrap();
    assert_eq!(replay, first);
    let other_body = razorpay
        .create_refund(&refund(&payment_id, &key, Some(100)))
        .await
        .unwrap_err();
    assert!(
        matches!(&other_body, ProviderError::Refused { status: 400, message, .. } if message.contains("Different request")),
        "{other_body}"
    );
    // read by its id until it is processed
    assert_eq!(
        razorpay.refund(&first.id).await.unwrap().status,
        RefundStatus::Pending
    );
    sandbox.razorpay.settle_refund(&first.id, true).unwrap();
    assert_eq!(
        razorpay.refund(&first.id).await.unwrap().status,
        RefundStatus::Succeeded
    );
    assert_eq!(
        razorpay.refunds_of(&payment_id).await.unwrap()[0].id,
        first.id
    );
    assert_eq!(sandbox.razorpay.ledger().refunds.len(), 1);
    // nothing is left to refund
    let twice = razorpay
        .create_refund(&refund(&payment_id, &"x".repeat(64), None))
        .await
        .unwrap_err();
    assert!(matches!(twice, ProviderError::Refused { status: 400, .. }));
}

#[tokio::test]
async fn an_authorisation_stays_uncaptured_until_captured_and_goes_back_if_never() {
    let sandbox = spawn_sandbox();
    let razorpay = sandbox.razorpay_provider();
    let page = razorpay
        .open_page(&page_request(Uuid::new_v4(), 31))
        .await
        .unwrap();
    // authorised after the capture window: Razorpay does not capture it
    let late = sandbox.razorpay.authorize(&page.id, None, true).unwrap();
    let payment = razorpay.page(&page.id).await.unwrap().payments[0].clone();
    assert_eq!(payment.status, PaymentStatus::Authorized);
    // an authorised payment cannot be refunded
    let refused = razorpay
        .create_refund(&refund(&late, &"a".repeat(64), None))
        .await
        .unwrap_err();
    assert!(matches!(
        refused,
        ProviderError::Refused { status: 400, .. }
    ));
    assert!(sandbox.razorpay.ledger().charges.is_empty(), "no money yet");
    // capturing it for its amount makes it money; capturing again is
    // nothing new
    let captured = razorpay.capture(&payment).await.unwrap();
    assert_eq!(captured.status, PaymentStatus::Captured);
    assert_eq!(razorpay.capture(&payment).await.unwrap(), captured);
    assert_eq!(sandbox.razorpay.ledger().charges.len(), 1);
    // on another order, a capture for the wrong amount is refused
    let second = razorpay
        .open_page(&page_request(Uuid::new_v4(), 31))
        .await
        .unwrap();
    let other = sandbox.razorpay.authorize(&second.id, None, true).unwrap();
    let wrong = ProviderPayment {
        payment_ref: other.clone(),
        amount_minor: 100,
        ..payment.clone()
    };
    let still = razorpay.capture(&wrong).await.unwrap();
    assert_eq!(still.status, PaymentStatus::Authorized, "not captured");
    // days pass: what nobody captured goes back to the payer
    assert_eq!(sandbox.razorpay.auto_refund_uncaptured(), 1);
    let status = |page: &holdfast::payments::PageState| {
        page.payments
            .iter()
            .map(|p| (p.payment_ref.clone(), p.status))
            .collect::<Vec<_>>()
    };
    assert_eq!(
        status(&razorpay.page(&page.id).await.unwrap()),
        vec![(late, PaymentStatus::Captured)]
    );
    assert_eq!(
        status(&razorpay.page(&second.id).await.unwrap()),
        vec![(other, PaymentStatus::Refunded)]
    );
}

#[tokio::test]
async fn the_sandbox_answers_like_razorpay_when_things_are_wrong() {
    let sandbox = spawn_sandbox();
    let base = sandbox.razorpay.api_base();
    let post = |path: &str, body: serde_json::Value| {
        http_client()
            .post(format!("{base}v1/{path}"))
            .basic_auth(
                &sandbox.settings.razorpay_key_id,
                Some(sandbox.settings.razorpay_key_secret.expose()),
            )
            .json(&body)
            .send()
    };
    let order = |extra: serde_json::Value| {
        let mut body = serde_json::json!({ "amount": 5000, "currency": "INR" });
        body.as_object_mut()
            .unwrap()
            .extend(extra.as_object().unwrap().clone());
        body
    };
    for (extra, field) in [
        (serde_json::json!({ "colour": "blue" }), "colour"),
        (serde_json::json!({ "receipt": "r".repeat(41) }), "receipt"),
        (
            serde_json::json!({ "notes": (0..16).map(|i| (format!("k{i}"), serde_json::json!("v"))).collect::<serde_json::Map<_, _>>() }),
            "notes",
        ),
        (
            serde_json::json!({ "payment": { "capture": "automatic" } }),
            "automatic_expiry_period",
        ),
        (
            serde_json::json!({ "payment": { "capture": "automatic", "capture_options": { "automatic_expiry_period": 5 } } }),
            "automatic_expiry_period",
        ),
        (
            serde_json::json!({ "payment": { "capture": "sometimes" } }),
            "capture",
        ),
    ] {
        let answer = post("orders", order(extra.clone())).await.unwrap();
        assert_eq!(answer.status(), 400, "{extra}");
        let error: serde_json::Value = answer.json().await.unwrap();
        assert_eq!(error["error"]["code"], "BAD_REQUEST_ERROR", "{extra}");
        assert_eq!(error["error"]["field"], field, "{extra}");
    }
    // unknown routes: a 404 in Razorpay's shape
    let route = post("nothing/here", serde_json::json!({})).await.unwrap();
    assert_eq!(route.status(), 404);
    assert_eq!(
        route.json::<serde_json::Value>().await.unwrap()["error"]["code"],
        "BAD_REQUEST_ERROR"
    );
    // unknown ids: 400 "does not exist"
    let razorpay = sandbox.razorpay_provider();
    let missing = razorpay.refund("rfnd_nope").await.unwrap_err();
    assert!(
        matches!(&missing, ProviderError::Refused { status: 400, message, .. } if message.contains("does not exist")),
        "{missing}"
    );
    // wrong keys are refused without printing them
    let wrong = RazorpayProvider::new(
        &RazorpaySettings {
            key_id: "rzp_test_x".into(),
            key_secret: Secret::new("super-secret-value"),
            ..sandbox.razorpay_settings()
        },
        http_client(),
    )
    .unwrap();
    let refused = wrong.page("order_x").await.unwrap_err();
    assert!(matches!(
        refused,
        ProviderError::Refused { status: 401, .. }
    ));
    assert!(!format!("{refused:?} {wrong:?}").contains("super-secret-value"));
}
