//! The real Stripe adapter (async-stripe) against the sandbox over HTTP.

use chrono::{Duration, Utc};
use holdfast::configuration::Secret;
use holdfast::payments::ProviderError;
use holdfast::payments::stripe::{SessionLine, SessionRequest, StripeAdapter, StripeSettings};

use crate::helpers::spawn_sandbox;

fn session_request(key: &str) -> SessionRequest {
    SessionRequest {
        order_id: "order-1".into(),
        currency: "eur".into(),
        lines: vec![
            SessionLine {
                name: "Harbour Lights — VIP".into(),
                qty: 2,
                unit_amount_minor: 9000,
            },
            SessionLine {
                name: "Wild honey".into(),
                qty: 1,
                unit_amount_minor: 1400,
            },
        ],
        customer_email: "ada@example.com".into(),
        success_url: "http://shop.test/checkout/return?session_id={CHECKOUT_SESSION_ID}".into(),
        cancel_url: "http://shop.test/basket".into(),
        expires_at: Utc::now() + Duration::minutes(31),
        idempotency_key: key.into(),
    }
}

#[tokio::test]
async fn sessions_are_created_once_per_key_paid_on_the_page_and_refunded_once() {
    let sandbox = spawn_sandbox();
    let stripe = sandbox.adapter();

    let created = stripe
        .create_session(&session_request("checkout:order-1"))
        .await
        .unwrap();
    assert!(created.id.starts_with("cs_test_"));
    assert_eq!(created.client_reference_id.as_deref(), Some("order-1"));
    assert!(!created.paid);
    let url = created.url.clone().expect("a payment page");
    // the same idempotency key returns the same session
    let again = stripe
        .create_session(&session_request("checkout:order-1"))
        .await
        .unwrap();
    assert_eq!(again.id, created.id);

    // pay on the hosted page: redirected to the success URL with the id
    let browser = reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .unwrap();
    let page = browser
        .get(&url)
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(page.contains("Pay 194.00 EUR"), "{page}");
    let paid = browser.post(format!("{url}/pay")).send().await.unwrap();
    assert_eq!(paid.status(), 303);
    assert_eq!(
        paid.headers()["location"].to_str().unwrap(),
        format!("http://shop.test/checkout/return?session_id={}", created.id)
    );

    let retrieved = stripe.retrieve_session(&created.id).await.unwrap();
    assert!(retrieved.paid);
    let intent = retrieved.payment_intent.expect("a payment intent");
    assert!(intent.starts_with("pi_"));

    // a refund is executed once per key, and a second refund is refused
    let first = stripe.refund(&intent, "refund:job-1").await.unwrap();
    let replay = stripe.refund(&intent, "refund:job-1").await.unwrap();
    assert_eq!(first, replay);
    assert_eq!(first.1, holdfast::payments::RefundState::Settled);
    assert_eq!(sandbox.stripe.ledger().refunds.len(), 1);
    let twice = stripe.refund(&intent, "refund:job-2").await.unwrap_err();
    assert!(
        matches!(twice, ProviderError::Refused { status: 400, .. }),
        "{twice}"
    );

    // the ledger over HTTP agrees: one charge, one refund
    let ledger: serde_json::Value =
        reqwest::get(format!("{}/stripe/_sandbox/ledger", sandbox.base))
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
    assert_eq!(ledger["charges"].as_array().unwrap().len(), 1);
    assert_eq!(ledger["refunds"][0]["idempotency_key"], "refund:job-1");
}

#[tokio::test]
async fn the_sandbox_answers_like_stripe_when_things_are_wrong() {
    let sandbox = spawn_sandbox();
    let stripe = sandbox.adapter();

    let mut too_soon = session_request("k-soon");
    too_soon.expires_at = Utc::now() + Duration::minutes(5);
    let error = stripe.create_session(&too_soon).await.unwrap_err();
    assert!(
        matches!(&error, ProviderError::Refused { status: 400, message } if message.contains("expires_at")),
        "{error}"
    );

    let missing = stripe.retrieve_session("cs_test_nope").await.unwrap_err();
    assert!(
        matches!(missing, ProviderError::Refused { status: 404, .. }),
        "{missing}"
    );

    let wrong_key = StripeAdapter::new(&StripeSettings {
        secret_key: Secret::new("sk_test_wrong"),
        api_base: sandbox.stripe.api_base(),
    })
    .unwrap();
    let refused = wrong_key
        .create_session(&session_request("k-auth"))
        .await
        .unwrap_err();
    assert!(
        matches!(refused, ProviderError::Refused { status: 401, .. }),
        "{refused}"
    );
    assert!(
        !format!("{refused:?}").contains("sk_test"),
        "no key in errors"
    );

    let session = stripe
        .create_session(&session_request("k-expire"))
        .await
        .unwrap();
    let expired = stripe.expire_session(&session.id).await.unwrap();
    assert_eq!(expired.status.as_deref(), Some("expired"));
    let again = stripe.expire_session(&session.id).await.unwrap_err();
    assert!(matches!(again, ProviderError::Refused { status: 400, .. }));

    // nothing listening: the provider is unavailable, which is transient
    let gone = StripeAdapter::new(&StripeSettings {
        secret_key: Secret::new("sk_test_x"),
        api_base: "http://127.0.0.1:1/stripe/".into(),
    })
    .unwrap();
    let outage = gone.retrieve_session("cs_test_x").await.unwrap_err();
    assert!(outage.is_transient(), "{outage}");
}
