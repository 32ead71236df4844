//! A ticket says what it is for, in a real browser at a phone's size
//! (390×844) and a desk's (1280×900): the catalogue with the event's date,
//! doors, venue and the tier's description; the basket and the order page
//! naming the event with the tier. No horizontal scroll; axe-core finds
//! nothing.

use super::*;
use crate::what_it_is_for::winter_jazz;
use holdfast_testkit::clock::berlin;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_ticket_says_its_event_on_the_catalogue_basket_and_order_page_on_a_phone_and_a_desk() {
    let _turn = turn().lock().await;
    ensure_installed();
    let app = spawn_app_shaped(TestDb::new().await, |_, shop| shop.default_zone = berlin()).await;
    winter_jazz().load_in(&app.db.pool, berlin()).await.unwrap();
    let driver = start_driver().await;
    let mut shopper = Browser::open(&driver, shots_for("tickets-say")).await;
    for (width, height, size) in [(390, 844, "phone"), (1280, 900, "desk")] {
        shopper.client.set_window_size(width, height).await.unwrap();
        let client = shopper.client.clone();
        let wide = |page: &'static str| {
            let client = client.clone();
            async move {
                let fits = client
                    .execute(
                        "return document.documentElement.scrollWidth <= window.innerWidth;",
                        vec![],
                    )
                    .await
                    .unwrap();
                assert_eq!(
                    fits,
                    serde_json::json!(true),
                    "{page} ({size}) scrolls sideways"
                );
            }
        };
        app.settled().await;
        shopper.go(&format!("{}/", app.address)).await;
        let card = shopper.text("#winter-jazz").await;
        for said in [
            "Doors 19:00 CET",
            "The Pier",
            "Standing room",
            "20 December, 19:30 CET",
        ] {
            assert!(card.contains(said), "{said}: {card}");
        }
        shopper.screenshot(&format!("catalogue-{size}")).await;
        wide("catalogue").await;
        let violations = shopper.axe_violations().await;
        assert!(violations.is_empty(), "catalogue: {violations:#?}");

        check_out(
            &mut shopper,
            &app,
            "winter-jazz-general",
            "2",
            &format!("basket-{size}"),
        )
        .await;
        assert!(shopper.body().await.contains("Winter Jazz — General"));
        shopper.screenshot(&format!("provider-{size}")).await;
        shopper.click("#pay").await;
        shopper.wait_for_path("/orders/").await;
        shopper.wait_for_text("h1", "Thank you").await;
        let body = shopper.body().await;
        for said in [
            "Winter Jazz — General",
            "Monday 20 December, 19:30 CET",
            "The Pier",
        ] {
            assert!(body.contains(said), "{said}: {body}");
        }
        // each ticket's card says its date, doors and venue beside its code
        let card = shopper.text(".unit-codes li .when").await;
        assert_eq!(
            card,
            "Monday 20 December, 19:30 CET · Doors 19:00 CET · The Pier, Harbour Road 1"
        );
        shopper.screenshot(&format!("order-{size}")).await;
        wide("order page").await;
        let violations = shopper.axe_violations().await;
        assert!(violations.is_empty(), "order page: {violations:#?}");
        assert_eq!(
            shopper.text(".order-links a").await,
            "Add everything to your calendar"
        );
        // on paper: the tickets with their QR codes, no menus or links
        let session = shopper.client.session_id().await.unwrap().unwrap();
        let media = |media: &'static str| {
            let session = session.clone();
            let url = driver.url.clone();
            async move {
                let set = http_client()
                    .post(format!("{url}/session/{session}/goog/cdp/execute"))
                    .json(&serde_json::json!({
                        "cmd": "Emulation.setEmulatedMedia",
                        "params": { "media": media },
                    }))
                    .send()
                    .await
                    .unwrap();
                assert!(set.status().is_success());
            }
        };
        media("print").await;
        assert_eq!(shopper.style("header.top", "display").await, "none");
        assert_eq!(shopper.style(".order-links", "display").await, "none");
        assert_eq!(
            shopper.style(".unit-codes li", "break-inside").await,
            "avoid"
        );
        assert_eq!(shopper.style(".unit-codes .qr", "display").await, "block");
        shopper.screenshot(&format!("order-printed-{size}")).await;
        media("screen").await;
    }
    shopper.close().await;
}
