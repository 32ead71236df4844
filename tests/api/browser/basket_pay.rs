//! The basket and the pay page in a real browser at a phone's size
//! (390×844) and a desk's (1280×900): a voucher applied in the basket
//! shows the new total on the Pay button, the pay page (an embedded
//! checkout's) says what is paid for and counts down until when the items
//! are held, and leaving checkout gives the basket back. No horizontal
//! scroll; axe-core finds nothing.

use super::*;
use holdfast::vouchers::{self, NewVoucher};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_voucher_in_the_basket_and_a_counting_pay_page_on_a_phone_and_a_desk() {
    let (app, driver, _turn) = shop_and_driver().await;
    vouchers::create(
        &app.db.pool,
        &NewVoucher {
            code: "TEN-OFF".into(),
            percent_off: None,
            amount_off_minor: Some(1000),
            per_unit: false,
            currency: None,
            uses: 5,
            products: None,
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
    // the owner has cards served by Razorpay, whose checkout opens on our
    // pay page (SEPA Direct Debit stays with Stripe)
    sqlx::query("insert into pay_methods (method, provider) values ('card', 'razorpay')")
        .execute(&app.db.pool)
        .await
        .unwrap();
    let mut shopper = Browser::open(&driver, shots_for("basket-pay")).await;
    for (width, height, size) in [(390, 844, "phone"), (1280, 900, "desk")] {
        shopper.client.set_window_size(width, height).await.unwrap();
        let client = shopper.client.clone();
        let fits = || {
            let client = client.clone();
            async move {
                client
                    .execute(
                        "return document.documentElement.scrollWidth <= window.innerWidth;",
                        vec![],
                    )
                    .await
                    .unwrap()
                    == serde_json::json!(true)
            }
        };
        app.settled().await;
        shopper
            .go(&format!("{}/c/harbour-lights", app.address))
            .await;
        let card = "li[data-product=\"harbour-lights-general\"]";
        shopper.fill(&format!("{card} input[name=qty]"), "2").await;
        shopper.click(&format!("{card} button[type=submit]")).await;
        shopper.to_basket_after_adding(card).await;
        shopper
            .fill("form.voucher input[name=voucher]", "ten-off")
            .await;
        shopper.click("form.voucher button[type=submit]").await;
        shopper.wait_for_text("#voucher-off", "−€10.00").await;
        assert_eq!(
            shopper.text("form.checkout button[type=submit]").await,
            "Pay €60.00"
        );
        shopper.fill("input[name=name]", "Ada Lovelace").await;
        shopper.fill("input[name=email]", "ada@example.com").await;
        // the concert is sooner than a bank debit could clear: cards are
        // the one way, and the page says why the debit is not offered
        let why = shopper.text(".not-offered").await;
        assert!(
            why.contains("SEPA Direct Debit is not offered for this order"),
            "{why}"
        );
        assert!(!shopper.body().await.contains("value=\"sepa_debit\""));
        shopper.screenshot(&format!("basket-voucher-{size}")).await;
        assert!(fits().await, "the basket ({size}) scrolls sideways");
        let violations = shopper.axe_violations().await;
        assert!(violations.is_empty(), "basket: {violations:#?}");

        shopper.click("form.checkout button[type=submit]").await;
        shopper.wait_for_path("/pay/").await;
        let left = shopper.wait_for_text(".held .left-time", " left").await;
        assert!(left.contains(':'), "a countdown: {left}");
        let body = shopper.body().await;
        assert!(body.contains("Harbour Lights — General"), "{body}");
        assert!(body.contains("Pay €60.00"), "{body}");
        shopper.screenshot(&format!("pay-{size}")).await;
        assert!(fits().await, "the pay page ({size}) scrolls sideways");
        let violations = shopper.axe_violations().await;
        assert!(violations.is_empty(), "pay page: {violations:#?}");

        // leaving: the basket comes back, with its voucher
        shopper.click("a[href^=\"/checkout/cancel/\"]").await;
        shopper.wait_for_text("h1", "Leave checkout?").await;
        shopper.click("form button[type=submit]").await;
        shopper.wait_for_text("h1", "Checkout cancelled").await;
        shopper.click("main a[href=\"/basket\"]").await;
        shopper.wait_for_path("/basket").await;
        assert_eq!(
            shopper.text("form.checkout button[type=submit]").await,
            "Pay €60.00"
        );
        shopper.screenshot(&format!("basket-back-{size}")).await;
        // empty it for the next size
        shopper.click("form.remove button").await;
        shopper.wait_for_text("main", "Your basket is empty").await;
    }
    shopper.close().await;
}
