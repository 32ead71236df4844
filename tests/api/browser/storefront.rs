//! The shop is the owner's, in a real browser at a phone's size (390×844)
//! and a desk's (1280×900): the owner's Settings section refuses a colour
//! too light to read, then saves the shop's name, description, colour,
//! contact and links, and the shop's pages show them. No horizontal
//! scroll; axe-core finds nothing.

use super::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_owner_makes_the_shop_theirs_on_a_phone_and_a_desk() {
    let (app, driver, _turn) = shop_and_driver().await;
    app.add_staff().await;
    let mut owner = Browser::open(&driver, shots_for("storefront/owner")).await;
    let mut shopper = Browser::open(&driver, shots_for("storefront/shopper")).await;
    owner.go(&format!("{}/admin/login", app.address)).await;
    owner.fill("input[name=email]", STAFF_EMAIL).await;
    owner.fill("input[name=password]", STAFF_PASSWORD).await;
    owner.click("#login button[type=submit]").await;
    owner.wait_to_leave("/admin/login").await;
    owner.wait_for_path("/admin").await;
    for (width, height, size, name, accent) in [
        (390, 844, "phone", "Harbour Market", "#1d4ed8"),
        (1280, 900, "desk", "Pier Street Bakery", "#7c2d12"),
    ] {
        owner.client.set_window_size(width, height).await.unwrap();
        shopper.client.set_window_size(width, height).await.unwrap();
        let fits = |browser: &Browser| {
            let client = browser.client.clone();
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
        owner.go(&format!("{}/admin/settings", app.address)).await;
        owner.fill("#shop-name", name).await;
        owner
            .fill(
                "#shop-description",
                "Bread, honey and tickets from the harbour.",
            )
            .await;
        owner.fill("#shop-accent", "#ffd700").await;
        owner
            .fill("#shop-contact_email", "hello@harbour.example")
            .await;
        owner
            .fill("#shop-terms_url", "https://harbour.example/terms")
            .await;
        owner.fill("#shop-time_zone", "Europe/Atlantis").await;
        owner.click("#shop button[type=submit]").await;
        let refused = owner.wait_for_text("#shop-accent-error", "too light").await;
        assert!(refused.contains("4.5:1"), "{refused}");
        owner
            .client
            .execute("document.querySelector('#shop').scrollIntoView();", vec![])
            .await
            .unwrap();
        owner.screenshot(&format!("refused-{size}")).await;
        assert!(fits(&owner).await, "settings ({size}) scroll sideways");
        let violations = owner.axe_violations().await;
        assert!(violations.is_empty(), "settings refused: {violations:#?}");
        let zone_refused = owner.text("#shop-time_zone-error").await;
        assert!(
            zone_refused.contains("like Europe/Berlin"),
            "{zone_refused}"
        );
        owner.fill("#shop-accent", accent).await;
        owner.fill("#shop-time_zone", "europe/berlin").await;
        owner.click("#shop button[type=submit]").await;
        owner.wait_for_text("main", "are saved").await;
        owner.screenshot(&format!("saved-{size}")).await;
        owner
            .client
            .execute(
                "document.querySelector('#shop-time_zone').scrollIntoView();",
                vec![],
            )
            .await
            .unwrap();
        owner.screenshot(&format!("zone-{size}")).await;
        let chosen = owner
            .client
            .execute(
                "return document.querySelector('#shop-time_zone').value;",
                vec![],
            )
            .await
            .unwrap();
        assert_eq!(chosen, serde_json::json!("Europe/Berlin"));

        shopper.go(&format!("{}/", app.address)).await;
        assert_eq!(shopper.text("header .brand").await, name);
        let foot = shopper.text("#shop-foot").await;
        assert!(
            foot.contains("Bread, honey and tickets") && foot.contains("Terms"),
            "{foot}"
        );
        let button = shopper.style(".add button", "background-color").await;
        let expected = u32::from_str_radix(&accent[1..], 16).unwrap();
        let rgb = format!(
            "rgb({}, {}, {})",
            expected >> 16,
            (expected >> 8) & 0xff,
            expected & 0xff
        );
        assert_eq!(button, rgb, "the accent paints the buttons");
        shopper.screenshot(&format!("shop-{size}")).await;
        assert!(fits(&shopper).await, "the shop ({size}) scrolls sideways");
        let violations = shopper.axe_violations().await;
        assert!(violations.is_empty(), "the shop: {violations:#?}");
    }
    owner.close().await;
    shopper.close().await;
}
