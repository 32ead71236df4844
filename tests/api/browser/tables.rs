//! A guest books a table in a real browser at a phone's size (390×844)
//! and a desk's (1280×900): the catalogue links to the restaurant's page,
//! which answers a day and a party with the times that can seat it; a
//! time goes into the basket as the party's booking, its deposit is paid
//! at the provider, and the order page says the booking in its own words
//! and its cancellation policy; the guest cancels (asked first) and the
//! deposit goes back;
//! the demo's restaurant seats two for nothing, confirmed without a
//! provider. No horizontal scroll; axe-core finds nothing.

use super::*;
use crate::tables::{ROOM, book, day, room, set_up, table, time_id};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_guest_chooses_a_time_for_four_on_a_phone_and_a_desk() {
    let (app, driver, _turn) = shop_and_driver().await;
    app.load_demo().await;
    let shots = target_screenshots().join("tables");
    let _ = std::fs::remove_dir_all(&shots);
    for (width, height, size) in [(390, 844, "phone"), (1280, 900, "desk")] {
        let mut before = Browser::open(&driver, shots.join("before")).await;
        before.client.set_window_size(width, height).await.unwrap();
        before.go(&format!("{}/", app.address)).await;
        before.screenshot(&format!("home-{size}")).await;
        before.close().await;
    }
    let mut spec = room(
        10,
        vec![
            table("T1", 1, 2, 100),
            table("T2", 2, 4, 100),
            table("T3", 2, 4, 100),
        ],
        vec![],
    );
    spec.name = "Dinner at the Bistro".into();
    spec.description = "Twelve tables by the harbour; the kitchen closes at 22:30.".into();
    spec.periods[0].deposit_minor = 1000;
    spec.periods[0].deposit_from_party = 4;
    set_up(&app.db, &spec).await;
    assert!(book(&app.db, "taken-1", 4, 19, 30).await.is_some());
    assert!(book(&app.db, "taken-2", 3, 19, 30).await.is_some());
    app.settled().await;
    for (width, height, size) in [(390, 844, "phone"), (1280, 900, "desk")] {
        let mut guest = Browser::open(&driver, shots.join("after")).await;
        guest.client.set_window_size(width, height).await.unwrap();
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
        guest.go(&format!("{}/", app.address)).await;
        guest.screenshot(&format!("home-{size}")).await;
        assert!(fits(&guest).await, "home ({size}) scrolls sideways");
        guest.click(&format!("a[href='/dining/{ROOM}']")).await;
        guest.wait_for_text("h1", "Dinner at the Bistro").await;
        guest.fill("input[name=date]", "").await;
        guest
            .client
            .execute(
                "document.querySelector('input[name=date]').value = arguments[0];",
                vec![serde_json::json!(day().format("%Y-%m-%d").to_string())],
            )
            .await
            .unwrap();
        guest.fill("input[name=party]", "4").await;
        guest.click(".dining-ask button[type=submit]").await;
        // the answer is a new page: wait for it before reading it
        for _ in 0..100 {
            let url = guest.client.current_url().await.unwrap();
            if url.as_str().contains("party=4") {
                break;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        let heading = guest.wait_for_text("#times-heading", "Times for 4").await;
        assert!(
            heading.contains(&day().format("%-d %b").to_string()),
            "{heading}"
        );
        let deposit = guest.text(".deposit").await;
        assert!(deposit.contains("10.00"), "{deposit}");
        guest.screenshot(&format!("times-{size}")).await;
        assert!(fits(&guest).await, "times ({size}) scroll sideways");
        let violations = guest.axe_violations().await;
        assert!(violations.is_empty(), "times: {violations:#?}");
        // 19:30 is full for four; 21:30 is not
        let body = guest.body().await;
        assert!(!body.contains(&format!("value=\"{}\"", time_id(19, 30))));
        guest
            .click(&format!(
                "input[value='{}'] + input + button",
                time_id(21, 30)
            ))
            .await;
        guest.wait_for_path("/basket").await;
        let basket = guest.body().await;
        assert!(basket.contains("Dinner at the Bistro"), "{basket}");
        // the basket says the party, not a quantity to change
        assert!(basket.contains("Party of 4"), "{basket}");
        assert!(!basket.contains("name=\"qty\""), "{basket}");
        guest.screenshot(&format!("basket-{size}")).await;
        let violations = guest.axe_violations().await;
        assert!(violations.is_empty(), "basket: {violations:#?}");
        // pay the deposit at the provider, and the order page says the
        // booking in its own words, with its code for the host stand
        guest.fill("input[name=name]", "Ada Lovelace").await;
        guest.fill("input[name=email]", "ada@example.com").await;
        guest.fill("input[name=phone]", "+44 20 7946 0000").await;
        guest.click("form.checkout button[type=submit]").await;
        guest.find("#pay").await;
        guest.click("#pay").await;
        guest.wait_for_path("/orders/").await;
        let body = guest.body().await;
        let words = format!("Table for 4, {} 21:30, 2 h", day().format("%a %-d %b"));
        assert!(body.contains(&words), "{words} in {body}");
        assert!(body.contains("Booking code"), "{body}");
        guest.screenshot(&format!("order-{size}")).await;
        assert!(fits(&guest).await, "order ({size}) scrolls sideways");
        let violations = guest.axe_violations().await;
        assert!(violations.is_empty(), "order: {violations:#?}");
        // the policy copied onto the booking, and the cancel: asked first,
        // then the deposit goes back
        let policy = guest.text("#cancel-policy").await;
        assert!(policy.contains("refunded in full"), "{policy}");
        guest.click("a.cancel-booking").await;
        guest.wait_for_text("h1", "Cancel your booking?").await;
        guest.screenshot(&format!("cancel-{size}")).await;
        assert!(fits(&guest).await, "cancel ({size}) scrolls sideways");
        let violations = guest.axe_violations().await;
        assert!(violations.is_empty(), "cancel: {violations:#?}");
        guest.click("form button[type=submit]").await;
        guest.wait_for_text("h1", "Your booking is cancelled").await;
        let body = guest.body().await;
        assert!(body.contains("€40.00 is on its way back"), "{body}");
        guest.screenshot(&format!("cancelled-{size}")).await;
        let violations = guest.axe_violations().await;
        assert!(violations.is_empty(), "cancelled: {violations:#?}");
        // the demo's restaurant seats two tomorrow for nothing: the form
        // confirms, with no provider, and the order page says so
        let tomorrow = (chrono::Utc::now() + chrono::Duration::days(1)).date_naive();
        guest
            .go(&format!(
                "{}/dining/harbour-bistro?date={}&party=2",
                app.address,
                tomorrow.format("%Y-%m-%d")
            ))
            .await;
        guest.wait_for_text("#times-heading", "Times for 2").await;
        guest
            .click("ul.times li:first-child button[type=submit]")
            .await;
        guest.wait_for_path("/basket").await;
        let confirm = guest.text("form.checkout button[type=submit]").await;
        assert_eq!(confirm.trim(), "Confirm");
        guest.fill("input[name=name]", "Ada Lovelace").await;
        guest.fill("input[name=email]", "ada@example.com").await;
        guest.fill("input[name=phone]", "+44 20 7946 0000").await;
        guest.screenshot(&format!("basket-free-{size}")).await;
        let violations = guest.axe_violations().await;
        assert!(violations.is_empty(), "free basket: {violations:#?}");
        guest.click("form.checkout button[type=submit]").await;
        guest.wait_for_path("/orders/").await;
        let body = guest.body().await;
        assert!(
            body.contains("Your order is confirmed. There was nothing to pay."),
            "{body}"
        );
        assert!(body.contains("Table for 2,"), "{body}");
        guest.screenshot(&format!("order-free-{size}")).await;
        assert!(fits(&guest).await, "free order ({size}) scrolls sideways");
        let violations = guest.axe_violations().await;
        assert!(violations.is_empty(), "free order: {violations:#?}");
        guest.close().await;
    }
}
