//! The door in a real browser at a phone's size (390×844) and a desk's
//! (1280×900): it chooses what it checks, a scanner's code and Enter
//! redeem without a click while the field keeps focus, another day's
//! pickup code is refused naming what it is for, the owner overrides it,
//! and the count moves. No horizontal scroll; axe-core finds nothing.

use super::*;
use holdfast_testkit::engine::paid;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_door_checks_one_event_and_a_scanner_needs_no_click_on_a_phone_and_a_desk() {
    let (app, driver, _turn) = shop_and_driver().await;
    app.add_staff().await;
    let slot = app.db.first_slot().await;
    let mut staff = Browser::open(&driver, shots_for("door")).await;
    staff.go(&format!("{}/admin/login", app.address)).await;
    staff.fill("input[name=email]", STAFF_EMAIL).await;
    staff.fill("input[name=password]", STAFF_PASSWORD).await;
    staff.click("#login button[type=submit]").await;
    staff.wait_to_leave("/admin/login").await;
    staff.wait_for_path("/admin").await;
    for (before, (width, height, size)) in [(390, 844, "phone"), (1280, 900, "desk")]
        .into_iter()
        .enumerate()
    {
        let order = paid(
            &app.db,
            &format!("door-{size}"),
            &[("harbour-lights-general", 1), (slot.as_str(), 1)],
        )
        .await;
        let ticket: String = sqlx::query_scalar(
            "select code from order_items where order_id = $1 and code like 'TKT-%'",
        )
        .bind(order.id)
        .fetch_one(&app.db.pool)
        .await
        .unwrap();
        let pickup = crate::item_code(&app.db.pool, order.id, "pickup_slot")
            .await
            .unwrap();
        staff.client.set_window_size(width, height).await.unwrap();
        let clean = |page: &str, violations: Vec<String>| {
            assert!(violations.is_empty(), "{page} ({size}): {violations:#?}");
        };
        let client = staff.client.clone();
        let no_sideways = |page: &'static str| {
            let client = client.clone();
            async move {
                let wide = client
                    .execute(
                        "return document.documentElement.scrollWidth <= window.innerWidth;",
                        vec![],
                    )
                    .await
                    .unwrap();
                assert_eq!(
                    wide,
                    serde_json::json!(true),
                    "{page} ({size}) scrolls sideways"
                );
            }
        };

        staff.go(&format!("{}/admin/redeem", app.address)).await;
        let choices = staff.text("main").await;
        assert!(
            choices.contains("Choose what this door checks"),
            "{choices}"
        );
        staff.screenshot(&format!("choose-{size}")).await;
        no_sideways("choosing").await;
        clean("choosing", staff.axe_violations().await);
        // the check-in list's boxes fold under their event, day and shelf:
        // none is shown until its group opens or the filter finds it
        let vip = "input[name=tier][value='harbour-lights-vip']";
        assert!(!staff.find(vip).await.is_displayed().await.unwrap());
        staff
            .fill("#door-tier-picks input[type=search]", "vip")
            .await;
        assert!(staff.find(vip).await.is_displayed().await.unwrap());
        staff.screenshot(&format!("choose-filtered-{size}")).await;
        no_sideways("choosing, filtered").await;
        staff.go(&format!("{}/admin/redeem", app.address)).await;
        staff.click("#door-event-list a").await;
        let counted = staff.wait_for_text("#door-count", "expected").await;
        assert!(
            counted.starts_with(&format!("{before} admitted")),
            "{counted}"
        );
        staff.screenshot(&format!("door-{size}")).await;
        no_sideways("the door").await;
        clean("the door", staff.axe_violations().await);

        // a scanner types the pickup code and Enter: refused, naming its slot
        staff
            .find("#code")
            .await
            .send_keys(&format!("{pickup}\n"))
            .await
            .unwrap();
        let verdict = staff.wait_for_text("#verdict", "Not this door").await;
        assert!(verdict.contains("Bakery pickup"), "{verdict}");
        let focused = staff
            .client
            .execute("return document.activeElement.id;", vec![])
            .await
            .unwrap();
        assert_eq!(focused, serde_json::json!("code"), "the field keeps focus");
        show(&staff, "#door-title").await;
        staff.screenshot(&format!("not-this-door-{size}")).await;
        no_sideways("a refusal").await;
        clean("a refusal", staff.axe_violations().await);
        // the admin's menu stays on top on a phone: the button is pressed
        // where it is
        staff
            .client
            .execute(
                "document.querySelector('#override button').click();",
                vec![],
            )
            .await
            .unwrap();
        let verdict = staff.wait_for_text("#verdict", "override").await;
        assert!(verdict.contains("recorded"), "{verdict}");
        show(&staff, "#door-title").await;
        staff.screenshot(&format!("override-{size}")).await;

        // and the ticket, scanned: admitted, counted, ready for the next
        staff
            .find("#code")
            .await
            .send_keys(&format!("{ticket}\n"))
            .await
            .unwrap();
        staff.wait_for_text("#verdict", "Admitted").await;
        let counted = staff.text("#door-count").await;
        assert!(
            counted.starts_with(&format!("{} admitted", before + 1)),
            "{counted}"
        );
        show(&staff, "#door-title").await;
        staff.screenshot(&format!("admitted-{size}")).await;
        no_sideways("an admission").await;
        clean("an admission", staff.axe_violations().await);
    }
    staff.close().await;
}

/// Scroll so that `css` is at the top, for a screenshot of what follows it.
async fn show(browser: &Browser, css: &str) {
    browser
        .client
        .execute(
            "document.querySelector(arguments[0]).scrollIntoView();",
            vec![css.into()],
        )
        .await
        .unwrap();
}
