//! Ways to pay (issue 33), over HTTP against the real app, PostgreSQL and
//! the providers' sandbox: the shopper chooses a way (a card, SEPA Direct
//! Debit), not a company; the owner decides on the Settings page which
//! provider serves each, among those that take it in the shop's currency;
//! the adapter asks the provider for that way alone, and the sandbox
//! refuses what Stripe refuses (SEPA Direct Debit in anything but euros).

use reqwest::StatusCode;

use holdfast::payments::PaymentProvider;
use holdfast::payments::methods::PayMethod;
use holdfast_testkit::*;

const VIP: &str = "harbour-lights-vip";

/// A shopper's checkout of one VIP ticket paying `method`: the shop's
/// answer.
async fn check_out_with(app: &TestApp, method: &str) -> reqwest::Response {
    let shopper = browser();
    app.add(&shopper, VIP, 1).await;
    let basket = read_page(&shopper, &format!("{}/basket", app.address)).await;
    shopper
        .post(format!("{}/checkout", app.address))
        .form(&[
            ("checkout_key", checkout_key(&basket).as_str()),
            ("lines", form_lines(&basket).as_str()),
            ("name", "Sepa Shopper"),
            ("email", "sepa@example.com"),
            ("method", method),
        ])
        .send()
        .await
        .unwrap()
}

/// The basket's ways to pay, as its form offers them.
async fn ways_offered(app: &TestApp) -> Vec<String> {
    let shopper = browser();
    app.add(&shopper, VIP, 1).await;
    let basket = read_page(&shopper, &format!("{}/basket", app.address)).await;
    basket
        .split("name=\"method\" value=\"")
        .skip(1)
        .map(|rest| rest.split('"').next().unwrap().to_owned())
        .collect()
}

/// The newest order's provider and the payment methods its page offers,
/// as the sandbox's Stripe API says (empty for another provider).
async fn newest_order(app: &TestApp) -> (String, Vec<String>) {
    let (provider, page): (String, Option<String>) = sqlx::query_as(
        "select provider, provider_session_id from orders order by created_at desc limit 1",
    )
    .fetch_one(&app.db.pool)
    .await
    .unwrap();
    if provider != "stripe" {
        return (provider, Vec::new());
    }
    let settings = app.sandbox.stripe_settings();
    let session: serde_json::Value = http_client()
        .get(format!(
            "{}/v1/checkout/sessions/{}",
            settings.api_base.trim_end_matches('/'),
            page.unwrap()
        ))
        .bearer_auth(settings.secret_key.expose())
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let methods = session["allowed_payment_method_types"]
        .as_array()
        .unwrap_or_else(|| panic!("{session}"))
        .iter()
        .map(|m| m.as_str().unwrap().to_owned())
        .collect();
    (provider, methods)
}

async fn stored_choices(app: &TestApp) -> Vec<(String, Option<String>)> {
    sqlx::query_as("select method, provider from pay_methods order by method")
        .fetch_all(&app.db.pool)
        .await
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_shopper_chooses_a_way_to_pay_and_the_owner_decides_who_serves_it() {
    let app = spawn_app().await;
    app.load_demo().await;
    app.add_staff().await;
    let (staff, csrf) = app.staff_browser().await;
    app.settled().await;

    // a shop in euros with both providers' keys: a card and SEPA Direct
    // Debit (Stripe serves both until the owner says otherwise); UPI and
    // net banking take rupees only
    assert_eq!(ways_offered(&app).await, ["card", "sepa_debit"]);
    let answer = check_out_with(&app, "sepa_debit").await;
    assert_eq!(answer.status(), StatusCode::SEE_OTHER);
    assert_eq!(
        newest_order(&app).await,
        ("stripe".to_owned(), vec!["sepa_debit".to_owned()])
    );
    check_out_with(&app, "card").await;
    assert_eq!(
        newest_order(&app).await,
        ("stripe".to_owned(), vec!["card".to_owned()])
    );

    // the Settings page offers, per way, the providers that take it
    let settings = app.admin_page(&staff, "/admin/settings").await;
    assert!(settings.contains("id=\"pay-card\""), "{settings}");
    assert!(settings.contains("id=\"pay-sepa_debit\""));
    assert!(!settings.contains("id=\"pay-upi\""), "rupees only");

    // what a provider does not take is refused beside it, nothing saved
    for (fields, words) in [
        (
            vec![("card", "razorpay"), ("sepa_debit", "razorpay")],
            "Razorpay does not take SEPA Direct Debit.",
        ),
        (
            vec![("upi", "razorpay")],
            "UPI takes only INR, and the shop sells in EUR.",
        ),
    ] {
        let mut form = vec![("csrf", csrf.as_str())];
        form.extend(fields);
        let answer = app.admin_post(&staff, "/admin/settings/pay", &form).await;
        assert_eq!(answer.status(), StatusCode::BAD_REQUEST);
        let page = answer.text().await.unwrap();
        assert!(page.contains(words), "{words}: {page}");
        assert!(page.contains("aria-invalid=\"true\""));
        assert!(stored_choices(&app).await.is_empty(), "nothing saved");
    }

    // the owner sends cards to Razorpay and stops SEPA Direct Debit
    let answer = app
        .admin_post(
            &staff,
            "/admin/settings/pay",
            &[
                ("csrf", csrf.as_str()),
                ("card", "razorpay"),
                ("sepa_debit", "off"),
            ],
        )
        .await;
    assert_eq!(answer.status(), StatusCode::SEE_OTHER);
    assert_eq!(location(&answer), "/admin/settings?notice=pay_saved#pay");
    assert_eq!(
        stored_choices(&app).await,
        [
            ("card".to_owned(), Some("razorpay".to_owned())),
            ("sepa_debit".to_owned(), None)
        ]
    );
    let settings = app.admin_page(&staff, "/admin/settings").await;
    assert!(settings.contains("<option value=\"razorpay\" selected>Razorpay</option>"));
    assert_eq!(ways_offered(&app).await, ["card"]);
    let answer = check_out_with(&app, "card").await;
    assert_eq!(answer.status(), StatusCode::SEE_OTHER);
    assert_eq!(newest_order(&app).await.0, "razorpay");
    let before: i64 = sqlx::query_scalar("select count(*) from orders")
        .fetch_one(&app.db.pool)
        .await
        .unwrap();
    for not_offered in ["sepa_debit", "upi", "cash"] {
        let answer = check_out_with(&app, not_offered).await;
        assert_eq!(answer.status(), StatusCode::BAD_REQUEST, "{not_offered}");
        let page = answer.text().await.unwrap();
        assert!(
            page.contains("That way of paying is not offered. Choose another one."),
            "{page}"
        );
    }
    let after: i64 = sqlx::query_scalar("select count(*) from orders")
        .fetch_one(&app.db.pool)
        .await
        .unwrap();
    assert_eq!(after, before, "no order for a way not offered");
}

#[tokio::test]
async fn stripe_is_asked_for_the_way_alone_and_refuses_sepa_debit_but_in_euros() {
    let sandbox = spawn_sandbox();
    let stripe = sandbox.stripe_provider();
    let mut request = page_request(uuid::Uuid::new_v4(), 60);
    request.method = Some(PayMethod::SepaDebit);
    let page = stripe.open_page(&request).await.unwrap();
    assert!(page.url.contains(&page.id));

    let mut in_dollars = page_request(uuid::Uuid::new_v4(), 60);
    in_dollars.currency = "usd".into();
    in_dollars.method = Some(PayMethod::SepaDebit);
    let refused = stripe.open_page(&in_dollars).await.unwrap_err();
    let said = refused.to_string();
    assert!(
        said.contains("invalid for one or more payment method"),
        "{said}"
    );
    // a card, in dollars, is fine
    in_dollars.method = Some(PayMethod::Card);
    stripe.open_page(&in_dollars).await.unwrap();
}
