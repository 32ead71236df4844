//! The host stand's day in a real browser at a phone's size (390×844) and
//! a desk's (1280×900): opened from the menu on today, its floor of
//! tables and a walk-in seated and leaving; the day's bookings by time
//! (each a card on a phone, its buttons in reach), one found by its code,
//! a party seated with one tap, and the room's set-up. No horizontal scroll; axe-core
//! finds nothing.

use super::*;
use crate::tables::{ROOM, day, paid_booking, room, set_up, table};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_host_stand_seats_a_party_on_a_phone_and_a_desk() {
    let (app, driver, _turn) = shop_and_driver().await;
    app.add_staff().await;
    let mut spec = room(
        40,
        vec![
            table("T1", 1, 4, 100),
            table("T2", 1, 4, 110),
            table("T3", 1, 4, 120),
            table("T8", 5, 8, 100),
        ],
        vec![],
    );
    spec.name = "Dinner at the Bistro".into();
    spec.periods[0].deposit_minor = 1000;
    set_up(&app.db, &spec).await;
    for (key, party, hh, mm) in [
        ("a", 4, 19, 30),
        ("b", 2, 19, 30),
        ("c", 6, 20, 0),
        ("d", 3, 21, 0),
    ] {
        paid_booking(&app.db, key, party, hh, mm).await;
    }
    let shots = target_screenshots().join("host-stand");
    let _ = std::fs::remove_dir_all(&shots);
    for (width, height, size) in [(390, 844, "phone"), (1280, 900, "desk")] {
        let mut staff = Browser::open(&driver, shots.clone()).await;
        staff.client.set_window_size(width, height).await.unwrap();
        staff.go(&format!("{}/admin/login", app.address)).await;
        staff.fill("input[name=email]", STAFF_EMAIL).await;
        staff.fill("input[name=password]", STAFF_PASSWORD).await;
        staff.click("#login button[type=submit]").await;
        for _ in 0..200 {
            if !staff.path().await.starts_with("/admin/login") {
                break;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        // the menu's Host stand: the shop's rooms (the demo's and this
        // one), each opening its day, today first
        // (on a phone the menu unfolds as its button opens it: #menu)
        staff.go(&format!("{}/admin#menu", app.address)).await;
        staff.click("a[href='/admin/dining']").await;
        staff.wait_for_text("h1", "Host stand").await;
        assert!(
            staff.fits_width().await,
            "the rooms scroll sideways at {size}"
        );
        staff.screenshot(&format!("rooms-{size}")).await;
        let violations = staff.axe_violations().await;
        assert!(violations.is_empty(), "rooms: {violations:#?}");
        staff
            .click(&format!("a[href='/admin/dining/{ROOM}']"))
            .await;
        staff.wait_for_path(&format!("/admin/dining/{ROOM}")).await;
        let today = staff.wait_for_text("#day-heading", "Today, ").await;
        assert!(today.contains("no bookings"), "{today}");
        assert!(
            staff.fits_width().await,
            "today's stand scrolls sideways at {size}"
        );
        staff.screenshot(&format!("today-{size}")).await;
        // the floor: every table a tile, free now; a walk-in of three is
        // seated at the best free table, and its tile says so
        for t in ["T1", "T2", "T3", "T8"] {
            assert!(
                staff
                    .text(&format!("li.tile[data-table='{t}']"))
                    .await
                    .contains("Free now"),
                "{t} at {size}"
            );
        }
        staff.fill("input[name=party]", "3").await;
        staff
            .fill("input[name=name]", &format!("Walk-in {size}"))
            .await;
        staff.click(".walk-in-form button[type=submit]").await;
        staff
            .wait_for_text("#notice", "walk-in party is seated")
            .await;
        let tile = staff.text("li.tile.seated").await;
        assert!(
            tile.contains(&format!("Walk-in: Walk-in {size}, 3")),
            "{tile}"
        );
        assert!(
            staff.fits_width().await,
            "the walk-in's stand scrolls sideways at {size}"
        );
        staff.screenshot(&format!("walk-in-{size}")).await;
        let violations = staff.axe_violations().await;
        assert!(violations.is_empty(), "walk-in: {violations:#?}");
        // they leave: the table is free again
        staff
            .click("tr[data-walk-in] form[action$='/left'] button")
            .await;
        staff.wait_for_text("#notice", "free again").await;
        staff
            .go(&format!(
                "{}/admin/dining/{ROOM}?date={}",
                app.address,
                day().format("%Y-%m-%d")
            ))
            .await;
        let heading = staff.wait_for_text("#day-heading", "4 bookings").await;
        assert!(heading.contains("15 guests"), "{heading}");
        // on a phone each booking is a card: its buttons in reach, nothing
        // off to the side
        assert!(
            staff.fits_width().await,
            "the day scrolls sideways at {size}"
        );
        staff.screenshot(&format!("day-{size}")).await;
        let violations = staff.axe_violations().await;
        assert!(violations.is_empty(), "day: {violations:#?}");
        // a guest gives their code: the stand finds the booking
        let code = staff.text("tr[data-booking] code.booking-code").await;
        staff.fill("input[name=q]", &code.to_lowercase()).await;
        staff.click("form[role=search] button[type=submit]").await;
        let found = staff.wait_for_text("#found-heading", "Found for").await;
        assert!(found.contains(&code.to_lowercase()), "{found}");
        assert!(staff.text("ul.found-list").await.contains(&code));
        assert!(
            staff.fits_width().await,
            "the search scrolls sideways at {size}"
        );
        staff.screenshot(&format!("found-{size}")).await;
        let violations = staff.axe_violations().await;
        assert!(violations.is_empty(), "found: {violations:#?}");
        // the first standing party at 19:30 is seated with one tap
        staff
            .click("tr[data-booking] form[action$='/seat'] button")
            .await;
        staff.wait_for_text("#notice", "seated").await;
        staff.screenshot(&format!("seated-{size}")).await;
        let violations = staff.axe_violations().await;
        assert!(violations.is_empty(), "seated: {violations:#?}");
        staff
            .go(&format!("{}/admin/dining/{ROOM}/setup", app.address))
            .await;
        staff.wait_for_text("h1", "set-up").await;
        staff.screenshot(&format!("setup-{size}")).await;
        let violations = staff.axe_violations().await;
        assert!(violations.is_empty(), "setup: {violations:#?}");
        staff.close().await;
    }
}
