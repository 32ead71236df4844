//! One order of a bakery pickup, a table on another day and a concert
//! ticket, on its page in a real browser at a phone's size (390×844) and
//! a desk's (1280×900): a card per code, each naming what it is for, with
//! its own calendar link; after the guest cancels the table, its card says
//! so with no code, QR or calendar link, and the pickup and the ticket
//! stand as they were; its mail, read at both sizes, says the table as a
//! party with its code and how to cancel it. No horizontal scroll;
//! axe-core finds nothing.

use super::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_mixed_orders_page_has_a_card_per_code_and_a_cancelled_table_says_so() {
    let (app, driver, _turn) = shop_and_driver().await;
    let shots = target_screenshots().join("mixed-order");
    let _ = std::fs::remove_dir_all(&shots);
    let slot = app.db.first_slot().await;
    let time: String = sqlx::query_scalar(
        "select t.product_id from dining_times t \
          where t.starts_at > (select starts_at from products where id = $1) + interval '1 day' \
          order by t.starts_at limit 1",
    )
    .bind(&slot)
    .fetch_one(&app.db.pool)
    .await
    .unwrap();
    let paid = app
        .buy(
            &browser(),
            &Purchase::of(&slot, 2)
                .and(&time, 2)
                .and("harbour-lights-general", 1)
                .by("Ada Mixed", "ada@example.com"),
        )
        .await;
    let page = format!("{}{}", app.address, paid.order_url());
    let scroll_to = |browser: &Browser, css: &'static str| {
        let client = browser.client.clone();
        async move {
            client
                .execute(
                    "document.querySelector(arguments[0]).scrollIntoView({block: 'start'});",
                    vec![serde_json::json!(css)],
                )
                .await
                .unwrap();
        }
    };
    // the order's mail (sent while everything stands), as a mail reader on
    // a phone and a desk shows it: each item's card whole, the table a
    // party with its code and how to cancel, nothing wider than the screen
    let confirmation = super::goals::mail_sent(&app, holdfast::clock::ShopZone::UTC)
        .await
        .into_iter()
        .find(|m| String::from_utf8_lossy(&m.raw).contains("Ada Mixed"))
        .expect("the order's confirmation");
    std::fs::create_dir_all(&shots).unwrap();
    let mail = shots.join("mail.html");
    std::fs::write(&mail, super::goals::mail_as_page(&confirmation.raw)).unwrap();
    for (width, height, size) in [(390, 844, "phone"), (1280, 900, "desk")] {
        let mut reader = Browser::open(&driver, shots.clone()).await;
        reader.client.set_window_size(width, height).await.unwrap();
        reader.go(&format!("file://{}", mail.display())).await;
        let text = reader.body().await;
        for said in [
            "Sourdough box",
            "Harbour Bistro",
            "Party of 2",
            "Booking code",
            "Harbour Lights",
            "Cancel your table",
        ] {
            assert!(text.contains(said), "the mail says {said} ({size}): {text}");
        }
        assert!(
            !text.contains("UTC × 2\nTable"),
            "a party is one booking: {text}"
        );
        assert!(
            reader.fits_width().await,
            "the mail ({size}) scrolls sideways"
        );
        // the whole mail, as tall as it is
        let tall = reader
            .client
            .execute("return document.documentElement.scrollHeight;", vec![])
            .await
            .unwrap()
            .as_u64()
            .unwrap_or(u64::from(height))
            .clamp(u64::from(height), 5000) as u32;
        reader.client.set_window_size(width, tall).await.unwrap();
        reader.screenshot(&format!("mail-{size}")).await;
        reader.close().await;
    }
    for (stage, cancelled) in [("booked", false), ("cancelled", true)] {
        if cancelled {
            let response = browser()
                .post(format!(
                    "{}/orders/{}/cancel",
                    app.address, paid.started.token
                ))
                .send()
                .await
                .unwrap();
            assert!(response.status().is_redirection() || response.status().is_success());
        }
        for (width, height, size) in [(390, 844, "phone"), (1280, 900, "desk")] {
            let mut shopper = Browser::open(&driver, shots.clone()).await;
            shopper.client.set_window_size(width, height).await.unwrap();
            shopper.go(&page).await;
            shopper.wait_for_text("h1", "Thank you, Ada Mixed").await;
            shopper.screenshot(&format!("{stage}-{size}-top")).await;
            let body = shopper.body().await;
            for said in [
                "Your pickup",
                "Pickup code",
                "Sourdough box",
                "Your table",
                "party of 2",
                "Your tickets",
                "Harbour Lights",
            ] {
                assert!(body.contains(said), "{said} ({stage}, {size}): {body}");
            }
            scroll_to(&shopper, ".code-card.item-valid").await;
            shopper.screenshot(&format!("{stage}-{size}-pickup")).await;
            if cancelled {
                scroll_to(&shopper, ".code-card.item-cancelled").await;
                shopper.screenshot(&format!("{stage}-{size}-table")).await;
                let card = shopper.text(".code-card.item-cancelled").await;
                assert!(
                    card.contains("Cancelled: this code admits nobody"),
                    "{card}"
                );
                assert!(!card.contains("Add to your calendar"), "{card}");
            } else {
                let cards = shopper
                    .client
                    .find_all(fantoccini::Locator::Css(".code-card.item-valid"))
                    .await
                    .unwrap();
                assert_eq!(cards.len(), 2, "the pickup's and the table's");
                assert!(body.contains("Cancel this booking"), "{body}");
            }
            scroll_to(&shopper, ".unit-codes").await;
            shopper.screenshot(&format!("{stage}-{size}-tickets")).await;
            assert!(
                shopper.fits_width().await,
                "{stage} ({size}) scrolls sideways"
            );
            let violations = shopper.axe_violations().await;
            assert!(violations.is_empty(), "{stage} ({size}): {violations:#?}");
            shopper.close().await;
        }
    }
}
