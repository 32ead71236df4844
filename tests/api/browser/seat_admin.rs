//! The owner keeps a seat plan in a real browser (docs/design.md,
//! "Reserved seating", "The seat plan in the admin"): from the event's
//! page to a section's plan, seats ticked from the keyboard and blocked
//! with a note, a shopper's seat refused by name, a category's colour too
//! light refused beside its field; at a phone's size (390×844) and a
//! desk's (1280×900), no sideways scroll and axe-core finding nothing
//! against WCAG 2.1 A/AA. Screenshots: `target/screenshots/seat-plan-*.png`.

use super::*;
use crate::seats::take;

const PLAN: &str = "/admin/catalogue/events/winter-gala/sections/winter-gala-stalls";

/// The page's faults: sideways scroll, and what axe-core finds.
async fn faults(browser: &Browser) -> Vec<String> {
    let widths = browser
        .client
        .execute(
            "const d = document.documentElement; return [d.scrollWidth, d.clientWidth];",
            vec![],
        )
        .await
        .unwrap();
    let widths: Vec<u64> = widths
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_u64().unwrap_or(0))
        .collect();
    let mut found = browser.axe_violations().await;
    if widths[0] > widths[1] {
        found.push(format!("scrolls sideways: {} in {}", widths[0], widths[1]));
    }
    found
}

/// The page whole, at a width, as `target/screenshots/seat-plan-<name>.png`.
async fn shoot(browser: &Browser, width: u32, height: u32, name: &str) {
    browser.client.set_window_size(width, height).await.unwrap();
    let tall = browser
        .client
        .execute("return document.documentElement.scrollHeight;", vec![])
        .await
        .unwrap()
        .as_u64()
        .unwrap_or(u64::from(height))
        .clamp(u64::from(height), 5000) as u32;
    browser.client.set_window_size(width, tall).await.unwrap();
    let png = browser.client.screenshot().await.unwrap();
    std::fs::write(
        target_screenshots().join(format!("seat-plan-{name}.png")),
        png,
    )
    .unwrap();
    browser.client.set_window_size(width, height).await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_owner_blocks_seats_from_the_keyboard_on_a_phone_and_a_desk() {
    let (app, driver, _turn) = shop_and_driver().await;
    app.add_staff().await;
    take(&app.db.pool, "held-c3", "winter-gala-stalls", &["C-3"]).await;
    let owner = Browser::open(&driver, shots_for("seat-plan")).await;
    owner.go(&format!("{}/admin/login", app.address)).await;
    owner.fill("input[name=email]", STAFF_EMAIL).await;
    owner.fill("input[name=password]", STAFF_PASSWORD).await;
    owner.click("#login button[type=submit]").await;
    owner.wait_to_leave("/admin/login").await;
    owner.wait_for_path("/admin").await;
    // from the event's page to the section's plan
    owner
        .go(&format!(
            "{}/admin/catalogue/events/winter-gala",
            app.address
        ))
        .await;
    owner.click(&format!("#sections a[href='{PLAN}']")).await;
    owner.wait_for_path(PLAN).await;
    for (width, height, size) in [(390, 844, "phone"), (1280, 900, "desk")] {
        owner.client.set_window_size(width, height).await.unwrap();
        owner.go(&format!("{}{PLAN}", app.address)).await;
        assert_eq!(faults(&owner).await, Vec::<String>::new(), "{size}");
        shoot(&owner, width, height, size).await;
    }
    // from the keyboard: the box of C-5 takes the focus, Space ticks it
    let c5 = owner.find("input[name=seat][value='C-5']").await;
    c5.send_keys(" ").await.unwrap();
    let c6 = owner.find("input[name=seat][value='C-6']").await;
    c6.send_keys(" ").await.unwrap();
    let ticked = owner
        .client
        .execute(
            "return [...document.querySelectorAll('input[name=seat]:checked')].map(i => i.value);",
            vec![],
        )
        .await
        .unwrap();
    assert_eq!(ticked, serde_json::json!(["C-5", "C-6"]));
    owner.fill("#f-note", "camera").await;
    owner
        .find("button[value=block]")
        .await
        .send_keys("\u{e007}")
        .await
        .unwrap();
    owner.wait_for_text("#notice", "Blocked 2 seats").await;
    assert!(owner.text("#on-sale").await.starts_with("66 seats"));
    let label = owner.text("label.seat-box.blocked[title^='C-5']").await;
    assert!(label.contains('×'), "{label}");
    // a shopper's seat among the ticked: refused, named, ticks kept
    owner.tick("input[name=seat][value='C-3']").await;
    owner.tick("input[name=seat][value='C-4']").await;
    owner.fill("#f-note", "sponsor").await;
    owner.click("button[value=hold_back]").await;
    let said = owner.wait_for_text("#f-seats-error", "Refused").await;
    assert!(said.starts_with("Refused: C-3 is a shopper"), "{said}");
    assert!(
        owner
            .find("input[value='C-4']")
            .await
            .is_selected()
            .await
            .unwrap()
    );
    assert_eq!(faults(&owner).await, Vec::<String>::new(), "refused");
    shoot(&owner, 390, 844, "phone-refused").await;
    // a colour too light for the map, beside its field
    owner.fill("#f-cat-stalls-colour", "#ffd700").await;
    owner.click("#cat-stalls button").await;
    owner
        .wait_for_text("#f-cat-stalls-colour-error", "too light")
        .await;
    assert_eq!(faults(&owner).await, Vec::<String>::new(), "colour");
    shoot(&owner, 1280, 900, "desk-colour-refused").await;
    owner.close().await;
}
