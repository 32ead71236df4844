//! The basket that stays out of the way (issue 33, part 4): an add keeps
//! the shopper on the page they were on, with the basket's count in the
//! header (no JavaScript needed); quantities change and lines go in the
//! basket; a voucher applied in the basket shows the new total before
//! paying, and the provider is asked for exactly that; a refusal leads
//! back to a form that can succeed; leaving checkout gives the basket
//! back; the pay page says until when the items are held.

use holdfast::payments::ProviderKind;
use holdfast::vouchers::{self, Created, NewVoucher};
use reqwest::StatusCode;

use holdfast_testkit::*;

/// A POST of `fields` to `path` as the shopper's browser sends a form.
async fn post(
    app: &TestApp,
    shopper: &reqwest::Client,
    path: &str,
    fields: &[(&str, &str)],
) -> reqwest::Response {
    shopper
        .post(format!("{}{path}", app.address))
        .form(fields)
        .send()
        .await
        .unwrap()
}

/// The header's count of units in the basket, as a page shows it.
fn header_count(page: &str) -> Option<String> {
    let link = page.split("class=\"basket-link\"").nth(1)?;
    let count = link.split("<span class=\"count\">").nth(1)?;
    Some(count.split('<').next()?.to_owned())
}

async fn ten_off(app: &TestApp) {
    let created = vouchers::create(
        &app.db.pool,
        &NewVoucher {
            code: "TEN-OFF".into(),
            percent_off: None,
            amount_off_minor: Some(1000),
            per_unit: false,
            currency: None,
            uses: 5,
            products: Some(vec!["harbour-lights-general".into()]),
            unlocks: Vec::new(),
            valid_from: None,
            valid_until: None,
            per_buyer: false,
        },
        "eur",
        "tests",
    )
    .await
    .unwrap();
    assert!(matches!(created, Created::Created { .. }), "{created:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_add_comes_back_to_its_page_with_the_count_and_never_to_another_site() {
    let app = spawn_app().await;
    app.load_demo().await;
    app.settled().await;
    let shopper = browser();
    let page = read_page(&shopper, &format!("{}/c/harbour-lights", app.address)).await;
    assert_eq!(header_count(&page), None, "an empty basket shows no count");
    assert_eq!(hidden(&page, "back"), "/c/harbour-lights");

    let added = post(
        &app,
        &shopper,
        "/basket/add",
        &[
            ("product_id", "harbour-lights-general"),
            ("qty", "2"),
            ("back", "/c/harbour-lights"),
        ],
    )
    .await;
    assert_eq!(added.status(), StatusCode::SEE_OTHER);
    assert_eq!(
        location(&added),
        "/c/harbour-lights?added=harbour-lights-general#p-harbour-lights-general"
    );
    let back = read_page(&shopper, &format!("{}{}", app.address, location(&added))).await;
    assert_eq!(header_count(&back).as_deref(), Some("2"));
    assert_eq!(
        back.matches("Added to your basket.").count(),
        1,
        "said once, at the product added: {back}"
    );
    assert!(back.contains(r#"id="p-harbour-lights-general""#));

    // a page of ours only: another site, a scheme or a protocol-relative
    // address go to the basket instead
    for elsewhere in [
        "//evil.example/",
        "https://evil.example/",
        "/\\evil.example",
        "evil",
    ] {
        let added = post(
            &app,
            &shopper,
            "/basket/add",
            &[
                ("product_id", "wild-honey"),
                ("qty", "1"),
                ("back", elsewhere),
            ],
        )
        .await;
        assert_eq!(added.status(), StatusCode::SEE_OTHER);
        assert_eq!(location(&added), "/basket", "back = {elsewhere}");
    }
    let basket = read_page(&shopper, &format!("{}/basket", app.address)).await;
    assert_eq!(header_count(&basket).as_deref(), Some("6"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn quantities_change_in_the_basket_and_over_the_limit_is_a_form_that_can_succeed() {
    let app = spawn_app().await;
    app.load_demo().await;
    sqlx::query("update products set max_per_order = 4 where id = 'harbour-lights-general'")
        .execute(&app.db.pool)
        .await
        .unwrap();
    let shopper = browser();
    app.add(&shopper, "harbour-lights-general", 1).await;
    app.add(&shopper, "wild-honey", 2).await;
    let qty_of = |page: &str, product: &str| -> String {
        let form = page
            .split("action=\"/basket/update\"")
            .find(|form| form.contains(&format!("value=\"{product}\"")))
            .unwrap_or_else(|| panic!("no quantity form for {product}: {page}"))
            .to_owned();
        form.split("name=\"qty\" value=\"").nth(1).unwrap()[..]
            .split('"')
            .next()
            .unwrap()
            .to_owned()
    };

    let changed = post(
        &app,
        &shopper,
        "/basket/update",
        &[("product_id", "harbour-lights-general"), ("qty", "3")],
    )
    .await;
    assert_eq!(changed.status(), StatusCode::SEE_OTHER);
    assert_eq!(location(&changed), "/basket");
    let basket = read_page(&shopper, &format!("{}/basket", app.address)).await;
    assert_eq!(qty_of(&basket, "harbour-lights-general"), "3");
    assert!(basket.contains("€105.00"), "3 × 35.00: {basket}");

    // over the limit per order: said, with the basket's forms, unchanged
    let before = snapshot(&app.db.pool).await;
    let over = post(
        &app,
        &shopper,
        "/basket/update",
        &[("product_id", "harbour-lights-general"), ("qty", "5")],
    )
    .await;
    assert_eq!(over.status(), StatusCode::CONFLICT, "over_limit's status");
    let page = over.text().await.unwrap();
    assert!(
        page.contains("One order takes at most 4 units of this, and your basket has 3."),
        "{page}"
    );
    assert_eq!(qty_of(&page, "harbour-lights-general"), "3");
    assert!(
        page.contains("action=\"/checkout\""),
        "still a checkout form"
    );
    assert_eq!(snapshot(&app.db.pool).await, before, "nothing changed");

    // an add over the limit: the same words, a way back, the basket's forms
    let over = post(
        &app,
        &shopper,
        "/basket/add",
        &[
            ("product_id", "harbour-lights-general"),
            ("qty", "2"),
            ("back", "/c/harbour-lights"),
        ],
    )
    .await;
    assert_eq!(over.status(), StatusCode::CONFLICT);
    let page = over.text().await.unwrap();
    assert!(page.contains("Nothing was added"), "{page}");
    assert!(page.contains(r#"href="/c/harbour-lights""#), "{page}");
    assert_eq!(qty_of(&page, "harbour-lights-general"), "3");
    assert_eq!(snapshot(&app.db.pool).await, before, "nothing changed");

    // a quantity that is not one is refused; 0 takes the line out
    let bad = post(
        &app,
        &shopper,
        "/basket/update",
        &[("product_id", "wild-honey"), ("qty", "lots")],
    )
    .await;
    assert_eq!(bad.status(), StatusCode::BAD_REQUEST);
    assert_eq!(snapshot(&app.db.pool).await, before, "nothing changed");
    let gone = post(
        &app,
        &shopper,
        "/basket/update",
        &[("product_id", "wild-honey"), ("qty", "0")],
    )
    .await;
    assert_eq!(gone.status(), StatusCode::SEE_OTHER);
    let basket = read_page(&shopper, &format!("{}/basket", app.address)).await;
    assert!(!basket.contains("value=\"wild-honey\""), "{basket}");
    let lines: i64 = sqlx::query_scalar("select count(*) from basket_lines")
        .fetch_one(&app.db.pool)
        .await
        .unwrap();
    assert_eq!(lines, 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_voucher_applied_in_the_basket_shows_the_total_the_provider_is_asked_for() {
    let app = spawn_app().await;
    app.load_demo().await;
    ten_off(&app).await;
    let shopper = browser();
    app.add(&shopper, "harbour-lights-general", 3).await;
    app.add(&shopper, "wild-honey", 1).await;

    // a code that is not one: refused beside its field, nothing kept
    let refused = post(&app, &shopper, "/basket/voucher", &[("voucher", "NOPE-1")]).await;
    assert_eq!(
        refused.status(),
        StatusCode::CONFLICT,
        "bad_voucher's status"
    );
    let page = refused.text().await.unwrap();
    assert!(
        page.contains(r#"<p class="field-error" id="voucher-problem">The code NOPE-1 is not a code of ours.</p>"#),
        "{page}"
    );
    assert!(page.contains(r#"aria-describedby="voucher-problem""#));
    let basket = read_page(&shopper, &format!("{}/basket", app.address)).await;
    assert!(basket.contains("Pay €119.00"), "no voucher: {basket}");

    // applied: the new total before paying
    let applied = post(&app, &shopper, "/basket/voucher", &[("voucher", "ten-off")]).await;
    assert_eq!(applied.status(), StatusCode::SEE_OTHER);
    let basket = read_page(&shopper, &format!("{}/basket", app.address)).await;
    assert!(basket.contains("Voucher TEN-OFF"), "{basket}");
    assert!(basket.contains("−€10.00"), "{basket}");
    assert!(basket.contains("Pay €109.00"), "{basket}");
    assert_eq!(hidden(&basket, "voucher"), "TEN-OFF");

    // the form as the page rendered it: the provider is asked for €109
    let started = post(
        &app,
        &shopper,
        "/checkout",
        &[
            ("checkout_key", &checkout_key(&basket)),
            ("lines", &form_lines(&basket)),
            ("voucher", &hidden(&basket, "voucher")),
            ("name", "Ada Shopper"),
            ("email", "ada@example.com"),
            ("provider", "stripe"),
        ],
    )
    .await;
    assert_eq!(started.status(), StatusCode::SEE_OTHER);
    let session_id = location(&started).rsplit('/').next().unwrap().to_owned();
    let session = app.sandbox.stripe.session(&session_id).unwrap();
    assert_eq!(session["amount_total"], 10_900, "{session}");
    let hosted = read_page(&shopper, &location(&started)).await;
    assert!(hosted.contains("Pay 109.00 EUR"), "{hosted}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn leaving_checkout_gives_the_basket_back_and_the_pay_page_counts_down() {
    let app = spawn_app().await;
    app.load_demo().await;
    ten_off(&app).await;
    let shopper = browser();
    let started = app
        .start(
            &shopper,
            &Purchase::of("harbour-lights-general", 2)
                .and("wild-honey", 1)
                .voucher("TEN-OFF")
                .with(ProviderKind::Razorpay),
        )
        .await;
    // the basket was emptied with the payment phase
    let empty = read_page(&shopper, &format!("{}/basket", app.address)).await;
    assert!(empty.contains("Your basket is empty"), "{empty}");

    // the pay page: what is paid for, and until when it is held
    let pay = read_page(&shopper, &format!("{}/pay/{}", app.address, started.token)).await;
    assert!(pay.contains("Harbour Lights — General"), "{pay}");
    assert!(pay.contains("Voucher TEN-OFF: €10.00 off"), "{pay}");
    let until: chrono::DateTime<chrono::Utc> = pay
        .split("data-held-until=\"")
        .nth(1)
        .and_then(|rest| rest.split('"').next())
        .and_then(|iso| chrono::DateTime::parse_from_rfc3339(iso).ok())
        .unwrap_or_else(|| panic!("no hold time: {pay}"))
        .into();
    let deadline: chrono::DateTime<chrono::Utc> = sqlx::query_scalar(
        "select min(payment_deadline) from holds h join orders o on o.hold_id = h.purchase_id \
          where o.id = $1",
    )
    .bind(started.order_id)
    .fetch_one(&app.db.pool)
    .await
    .unwrap();
    assert_eq!(until.timestamp(), deadline.timestamp());
    assert!(pay.contains("/static/countdown.js"));
    // Razorpay's checkout names the shop, as its pages do
    let brand = pay
        .split("class=\"brand\" href=\"/\">")
        .nth(1)
        .and_then(|rest| rest.split('<').next())
        .unwrap();
    assert!(pay.contains(&format!(r#""name":"{brand}""#)), "{pay}");
    assert!(!pay.contains("Holdfast Market"), "{pay}");
    let script = read_page(&shopper, &format!("{}/static/countdown.js", app.address)).await;
    assert!(script.contains("data-held-until"));

    // leaving: the units go back on sale, the lines back in the basket
    let left = app.leave(&shopper, &started.cancel_url).await;
    assert_eq!(left.status(), StatusCode::OK);
    let said = left.text().await.unwrap();
    assert!(
        said.contains("your items are back in your basket"),
        "{said}"
    );
    let held: i32 = sqlx::query_scalar("select held from resources where id = $1")
        .bind("harbour-lights-general")
        .fetch_one(&app.db.pool)
        .await
        .unwrap();
    assert_eq!(held, 0);
    let basket = read_page(&shopper, &format!("{}/basket", app.address)).await;
    assert_eq!(header_count(&basket).as_deref(), Some("3"));
    assert_eq!(
        form_lines(&basket),
        r#"[["harbour-lights-general",2],["wild-honey",1]]"#
    );
    assert!(
        basket.contains("Pay €74.00"),
        "with the voucher again: {basket}"
    );
    // pressing it again changes nothing
    let after = snapshot(&app.db.pool).await;
    let again = shopper.post(&started.cancel_url).send().await.unwrap();
    assert_eq!(again.status(), StatusCode::OK);
    assert_eq!(snapshot(&app.db.pool).await, after);

    // a browser without the basket's cookie gets a basket of its own
    let elsewhere = browser();
    let second = app
        .start(
            &elsewhere,
            &Purchase::of("wild-honey", 2).with(ProviderKind::Razorpay),
        )
        .await;
    let other = browser();
    let left = app.leave(&other, &second.cancel_url).await;
    assert_eq!(left.status(), StatusCode::OK);
    let basket = read_page(&other, &format!("{}/basket", app.address)).await;
    assert_eq!(form_lines(&basket), r#"[["wild-honey",2]]"#);
}
