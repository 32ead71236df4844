//! Ways to pay (issue 33), over HTTP against the real app, PostgreSQL and
//! the providers' sandbox: the shopper chooses a way (a card, SEPA Direct
//! Debit), not a company; the owner decides on the Settings page which
//! provider serves each, among those that take it in the shop's currency;
//! the adapter asks the provider for that way alone, and the sandbox
//! refuses what Stripe refuses (SEPA Direct Debit in anything but euros).
//! Razorpay's embedded checkout is told the way through the options the
//! pay page hands its script (`config.display`), and the JSON API takes a
//! `method` as the form does.

use reqwest::StatusCode;

use holdfast::payments::PaymentProvider;
use holdfast::payments::methods::PayMethod;
use holdfast_testkit::*;

const VIP: &str = "harbour-lights-vip";

/// A jar of honey: it starts at no moment, so a bank debit may pay for it.
const HONEY: &str = "wild-honey";

/// A shopper's checkout of one jar of honey paying `method`: the shop's
/// answer.
async fn check_out_with(app: &TestApp, method: &str) -> reqwest::Response {
    check_out_of(app, HONEY, method).await
}

async fn check_out_of(app: &TestApp, product: &str, method: &str) -> reqwest::Response {
    let shopper = browser();
    app.add(&shopper, product, 1).await;
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
    ways_offered_for(app, HONEY).await
}

async fn ways_offered_for(app: &TestApp, product: &str) -> Vec<String> {
    let shopper = browser();
    app.add(&shopper, product, 1).await;
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

/// The options the pay page hands Razorpay's script (its JSON block).
async fn embed_options(app: &TestApp, shopper: &reqwest::Client, token: &str) -> serde_json::Value {
    let page = read_page(shopper, &format!("{}/pay/{token}", app.address)).await;
    let start = page
        .find("<script id=\"pay-options\" type=\"application/json\">")
        .unwrap_or_else(|| panic!("{page}"));
    let json = page[start..].split_once('>').unwrap().1;
    serde_json::from_str(json.split("</script>").next().unwrap()).unwrap()
}

/// The newest order's token and the way kept on it.
async fn newest_way(app: &TestApp) -> (String, Option<String>) {
    sqlx::query_as("select token, pay_method from orders order by created_at desc limit 1")
        .fetch_one(&app.db.pool)
        .await
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn upi_in_rupees_goes_to_razorpay_whose_checkout_shows_upi_alone() {
    let app = spawn_app().await;
    app.load_demo().await;
    // a shop in rupees: UPI and net banking offered, served by Razorpay
    // (Stripe takes neither), a card by Stripe; no SEPA Direct Debit
    for table in ["products", "schedules"] {
        sqlx::query(&format!("update {table} set currency = 'inr'"))
            .execute(&app.db.pool)
            .await
            .unwrap();
    }
    app.settled().await;
    assert_eq!(ways_offered(&app).await, ["card", "upi", "netbanking"]);

    let shopper = browser();
    app.add(&shopper, VIP, 1).await;
    let basket = read_page(&shopper, &format!("{}/basket", app.address)).await;
    let answer = shopper
        .post(format!("{}/checkout", app.address))
        .form(&[
            ("checkout_key", checkout_key(&basket).as_str()),
            ("lines", form_lines(&basket).as_str()),
            ("name", "Ravi Shopper"),
            ("email", "ravi@example.com"),
            ("method", "upi"),
        ])
        .send()
        .await
        .unwrap();
    assert_eq!(answer.status(), StatusCode::SEE_OTHER);
    assert_eq!(newest_order(&app).await.0, "razorpay");
    let (token, kept) = newest_way(&app).await;
    assert_eq!(kept.as_deref(), Some("upi"), "the way is kept on the order");
    assert_eq!(location(&answer), format!("{}/pay/{token}", app.address));
    // Razorpay Checkout's config.display: one block of UPI, its own
    // blocks (every other method) hidden
    let options = embed_options(&app, &shopper, &token).await;
    assert_eq!(options["currency"], "INR");
    assert_eq!(
        options["config"],
        serde_json::json!({ "display": {
            "blocks": { "chosen": { "name": "UPI", "instruments": [{ "method": "upi" }] } },
            "sequence": ["block.chosen"],
            "preferences": { "show_default_blocks": false },
        } })
    );

    // a Razorpay order started by naming the provider (an older form)
    // chose no way: Checkout shows all of its own
    let shopper = browser();
    app.add(&shopper, VIP, 1).await;
    let basket = read_page(&shopper, &format!("{}/basket", app.address)).await;
    let answer = shopper
        .post(format!("{}/checkout", app.address))
        .form(&[
            ("checkout_key", checkout_key(&basket).as_str()),
            ("lines", form_lines(&basket).as_str()),
            ("name", "Old Form"),
            ("email", "old@example.com"),
            ("provider", "razorpay"),
        ])
        .send()
        .await
        .unwrap();
    assert_eq!(answer.status(), StatusCode::SEE_OTHER);
    let (token, kept) = newest_way(&app).await;
    assert_eq!(kept, None);
    let options = embed_options(&app, &shopper, &token).await;
    assert!(options.get("config").is_none(), "{options}");
    assert_eq!(options["currency"], "INR");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_api_takes_a_way_to_pay_and_refuses_one_not_offered() {
    let app = spawn_app().await;
    app.load_demo().await;
    app.add_staff().await;
    let token =
        crate::api_v1::key_with(&app, &[holdfast::staff::api_keys::Scope::StartCheckouts]).await;
    app.settled().await;
    let checkout = |idem: &'static str, body: serde_json::Value| {
        let (app, token) = (&app, &token);
        async move {
            let answer = http_client()
                .post(format!("{}/api/v1/checkouts", app.address))
                .bearer_auth(token)
                .header("idempotency-key", idem)
                .json(&body)
                .send()
                .await
                .unwrap();
            let status = answer.status();
            (status, answer.json::<serde_json::Value>().await.unwrap())
        }
    };
    let line = serde_json::json!([{ "product_id": "wild-honey", "qty": 1 }]);
    let orders = || async {
        sqlx::query_scalar::<_, i64>("select count(*) from orders")
            .fetch_one(&app.db.pool)
            .await
            .unwrap()
    };

    // SEPA Direct Debit in a shop in euros: Stripe, asked for it alone
    let (status, body) = checkout(
        "sepa-1",
        serde_json::json!({ "lines": line, "name": "Ada", "email": "ada@example.com",
                            "method": "sepa_debit" }),
    )
    .await;
    assert_eq!(status, StatusCode::CREATED, "{body}");
    assert_eq!(
        newest_order(&app).await,
        ("stripe".to_owned(), vec!["sepa_debit".to_owned()])
    );
    assert_eq!(newest_way(&app).await.1.as_deref(), Some("sepa_debit"));

    // a provider alone, as older storefronts send: still taken
    let (status, body) = checkout(
        "old-1",
        serde_json::json!({ "lines": line, "name": "Ada", "email": "ada@example.com",
                            "provider": "razorpay" }),
    )
    .await;
    assert_eq!(status, StatusCode::CREATED, "{body}");
    assert_eq!(newest_order(&app).await.0, "razorpay");

    // no such way, a way not offered in euros, or a provider that does not
    // serve the way: 422 unknown_provider, nothing held, no order
    let before = orders().await;
    for (idem, body) in [
        ("bad-1", serde_json::json!({ "method": "cash" })),
        ("bad-2", serde_json::json!({ "method": "upi" })),
        (
            "bad-3",
            serde_json::json!({ "method": "sepa_debit", "provider": "razorpay" }),
        ),
    ] {
        let mut body = body;
        body["lines"] = line.clone();
        body["name"] = "Ada".into();
        body["email"] = "ada@example.com".into();
        let (status, answer) = checkout(idem, body.clone()).await;
        assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{body}: {answer}");
        assert_eq!(answer["error"]["code"], "unknown_provider", "{answer}");
        assert!(
            answer["error"]["message"]
                .as_str()
                .unwrap()
                .starts_with("That way of paying is not offered here"),
            "{answer}"
        );
    }
    assert_eq!(orders().await, before, "nothing made");
    let held: i64 =
        sqlx::query_scalar("select count(*) from basket_lines where basket_id like 'api-%'")
            .fetch_one(&app.db.pool)
            .await
            .unwrap();
    assert_eq!(held, 0, "no basket for a refused way");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_bank_debit_is_offered_only_for_what_starts_after_it_could_clear() {
    let app = spawn_app().await;
    app.load_demo().await;
    app.add_staff().await;
    let token =
        crate::api_v1::key_with(&app, &[holdfast::staff::api_keys::Scope::StartCheckouts]).await;
    app.settled().await;
    let orders = || async {
        sqlx::query_scalar::<_, i64>("select count(*) from orders")
            .fetch_one(&app.db.pool)
            .await
            .unwrap()
    };
    let why = "SEPA Direct Debit is not offered for this order: the bank can take up to 14 \
               banking days to clear it, and your order starts sooner.";
    // the concert is in 14 days: a debit could clear after it (14 banking
    // days, a day's grace, a day's margin), so the basket offers cards
    // alone and says why; honey starts at no moment
    assert_eq!(ways_offered_for(&app, VIP).await, ["card"]);
    let shopper = browser();
    app.add(&shopper, VIP, 1).await;
    let basket = read_page(&shopper, &format!("{}/basket", app.address)).await;
    assert!(basket.contains(why), "{basket}");
    assert_eq!(ways_offered(&app).await, ["card", "sepa_debit"]);
    // a form sent with the debit anyway is refused with the reason, and
    // the API's too; nothing is made
    let before = orders().await;
    let answer = check_out_of(&app, VIP, "sepa_debit").await;
    assert_eq!(answer.status(), StatusCode::BAD_REQUEST);
    let page = answer.text().await.unwrap();
    assert!(page.contains(why), "{page}");
    let answer = http_client()
        .post(format!("{}/api/v1/checkouts", app.address))
        .bearer_auth(&token)
        .header("idempotency-key", "debit-too-late")
        .json(&serde_json::json!({
            "lines": [{ "product_id": VIP, "qty": 1 }],
            "name": "Ada", "email": "ada@example.com", "method": "sepa_debit",
        }))
        .send()
        .await
        .unwrap();
    assert_eq!(answer.status(), StatusCode::UNPROCESSABLE_ENTITY);
    let body: serde_json::Value = answer.json().await.unwrap();
    assert_eq!(body["error"]["code"], "unknown_provider", "{body}");
    assert!(
        body["error"]["message"].as_str().unwrap().starts_with(why),
        "{body}"
    );
    assert_eq!(orders().await, before, "nothing made");
    let held: i64 =
        sqlx::query_scalar("select coalesce(sum(held), 0)::bigint from resources where id = $1")
            .bind(VIP)
            .fetch_one(&app.db.pool)
            .await
            .unwrap();
    assert_eq!(held, 0, "nothing held");
    // the concert moved two months on: the debit clears in time
    sqlx::query(
        "update products set starts_at = starts_at + interval '60 days', \
                ends_at = ends_at + interval '60 days' \
          where collection = 'harbour-lights'",
    )
    .execute(&app.db.pool)
    .await
    .unwrap();
    app.settled().await;
    assert_eq!(ways_offered_for(&app, VIP).await, ["card", "sepa_debit"]);
    let answer = check_out_of(&app, VIP, "sepa_debit").await;
    assert_eq!(answer.status(), StatusCode::SEE_OTHER);
    assert_eq!(
        newest_order(&app).await,
        ("stripe".to_owned(), vec!["sepa_debit".to_owned()])
    );
}
