//! The owner builds, from an empty shop and with the admin's editors
//! alone (fields, boxes, pickers and the seat drawing; no JSON typed),
//! the demo's Harbour Bistro room and the Winter Gala's stalls, in a real
//! browser; the catalogue file exported then holds exactly the demo
//! catalogue's room and stalls. Each page at a phone's size (390×844) and
//! a desk's (1280×900): no sideways scroll, axe-core finding nothing.
//! Screenshots: `target/screenshots/editors/`.

use super::*;
use holdfast::catalogue::CatalogueFile;
use holdfast::clock::ShopZone;

/// The demo catalogue, as the repository ships it.
fn demo() -> CatalogueFile {
    serde_json::from_str(include_str!("../../../fixtures/catalogue.json")).unwrap()
}

/// The page's faults at both sizes, each size's screenshot taken.
async fn looked_at(owner: &Browser, name: &str) {
    let shots = target_screenshots().join("editors");
    std::fs::create_dir_all(&shots).unwrap();
    for (width, height, size) in [(390, 844, "phone"), (1280, 900, "desk")] {
        owner.client.set_window_size(width, height).await.unwrap();
        assert!(
            owner.fits_width().await,
            "{name} scrolls sideways at {size}"
        );
        let violations = owner.axe_violations().await;
        assert!(violations.is_empty(), "{name} at {size}: {violations:#?}");
        let tall = owner
            .client
            .execute("return document.documentElement.scrollHeight;", vec![])
            .await
            .unwrap()
            .as_u64()
            .unwrap_or(u64::from(height))
            .clamp(u64::from(height), 6000) as u32;
        owner.client.set_window_size(width, tall).await.unwrap();
        let png = owner.client.screenshot().await.unwrap();
        std::fs::write(shots.join(format!("{name}-{size}.png")), png).unwrap();
    }
    owner.client.set_window_size(1280, 900).await.unwrap();
}

/// Sets a picker's value as choosing in it does (a time, a date, a colour).
async fn pick(owner: &Browser, css: &str, value: &str) {
    owner
        .client
        .execute(
            "const f = document.querySelector(arguments[0]); f.value = arguments[1]; \
             f.dispatchEvent(new Event('input', {bubbles: true}));",
            vec![css.into(), value.into()],
        )
        .await
        .unwrap();
}

/// The `n`th line (from 1) of a list, adding lines with its button until
/// there is one.
async fn line(owner: &Browser, list: &str, button: &str, n: usize) -> String {
    for _ in 0..=n {
        let lines = owner
            .client
            .execute(
                "return document.querySelectorAll(arguments[0]).length;",
                vec![format!("{list} > .line, {list} > .plan-row").into()],
            )
            .await
            .unwrap()
            .as_u64()
            .unwrap_or(0) as usize;
        if lines >= n {
            return format!("{list} > :nth-child({n})");
        }
        owner.click(button).await;
    }
    panic!("{button} gave no line {n} in {list}");
}

async fn choose(owner: &Browser, css: &str, value: &str) {
    owner
        .find(css)
        .await
        .select_by_value(value)
        .await
        .unwrap_or_else(|e| panic!("{css} has no {value}: {e}"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_owner_builds_the_bistros_room_and_the_galas_stalls_with_the_editors_alone() {
    let _turn = turn().lock().await;
    ensure_installed();
    let app = spawn_app().await;
    let driver = start_driver().await;
    app.add_staff().await;
    let demo = demo();
    let owner = Browser::open(&driver, shots_for("editors")).await;
    owner.go(&format!("{}/admin/login", app.address)).await;
    owner.fill("input[name=email]", STAFF_EMAIL).await;
    owner.fill("input[name=password]", STAFF_PASSWORD).await;
    owner.click("#login button[type=submit]").await;
    owner.wait_to_leave("/admin/login").await;

    // ---- the room, from the catalogue's "New dining room"
    let room = &demo.dining_rooms[0];
    owner.go(&format!("{}/admin/catalogue", app.address)).await;
    owner.click("#create a[href='/admin/dining/new']").await;
    owner.wait_for_path("/admin/dining/new").await;
    looked_at(&owner, "room-new").await;
    owner.fill("#f-name", &room.name).await;
    owner.fill("#f-id", &room.id).await;
    owner.fill("#f-description", &room.description).await;
    choose(&owner, "#f-interval", &room.interval_minutes.to_string()).await;
    owner.fill("#f-pacing", &room.pacing.to_string()).await;
    owner
        .fill("#f-largest_party", &room.largest_party.to_string())
        .await;
    owner
        .fill("#f-days_ahead", &room.days_ahead.to_string())
        .await;
    owner
        .fill("#f-book_until", &room.book_until_minutes.to_string())
        .await;
    for (i, t) in room.tables.iter().enumerate() {
        let at = line(
            &owner,
            "#f-tables",
            "button[data-add-line='f-tables']",
            i + 1,
        )
        .await;
        owner.fill(&format!("{at} [name=table_id]"), &t.id).await;
        owner
            .fill(&format!("{at} [name=table_min]"), &t.min_party.to_string())
            .await;
        owner
            .fill(&format!("{at} [name=table_max]"), &t.max_party.to_string())
            .await;
        owner
            .fill(&format!("{at} [name=table_area]"), &t.area)
            .await;
        choose(
            &owner,
            &format!("{at} [name=table_offered]"),
            &t.priority.to_string(),
        )
        .await;
    }
    for (i, j) in room.joins.iter().enumerate() {
        let at = line(&owner, "#f-joins", "button[data-add-line='f-joins']", i + 1).await;
        owner
            .fill(&format!("{at} [name=join_tables]"), &j.tables.join(" + "))
            .await;
        owner
            .fill(&format!("{at} [name=join_min]"), &j.min_party.to_string())
            .await;
        owner
            .fill(&format!("{at} [name=join_max]"), &j.max_party.to_string())
            .await;
        choose(
            &owner,
            &format!("{at} [name=join_offered]"),
            &j.priority.to_string(),
        )
        .await;
    }
    for (i, p) in room.periods.iter().enumerate() {
        let at = line(
            &owner,
            "#f-periods",
            "button[data-add-line='f-periods']",
            i + 1,
        )
        .await;
        owner
            .fill(&format!("{at} [name=period_name]"), &p.name)
            .await;
        for day in &p.weekdays {
            owner
                .tick(&format!("{at} [name=period_day][value='{day}']"))
                .await;
        }
        pick(
            &owner,
            &format!("{at} [name=period_opens]"),
            &p.opens.format("%H:%M").to_string(),
        )
        .await;
        pick(
            &owner,
            &format!("{at} [name=period_last]"),
            &p.last_seating.format("%H:%M").to_string(),
        )
        .await;
        owner
            .fill(
                &format!("{at} [name=period_deposit]"),
                &format!("{}.{:02}", p.deposit_minor / 100, p.deposit_minor % 100),
            )
            .await;
        owner
            .fill(
                &format!("{at} [name=period_deposit_from]"),
                &p.deposit_from_party.to_string(),
            )
            .await;
        owner
            .fill(
                &format!("{at} [name=period_cancel_hours]"),
                &p.cancel_hours.to_string(),
            )
            .await;
    }
    for (i, t) in room.turns.iter().enumerate() {
        let at = line(&owner, "#f-turns", "button[data-add-line='f-turns']", i + 1).await;
        owner
            .fill(
                &format!("{at} [name=turn_up_to]"),
                &t.up_to_party.to_string(),
            )
            .await;
        owner
            .fill(&format!("{at} [name=turn_minutes]"), &t.minutes.to_string())
            .await;
    }
    looked_at(&owner, "room-filled").await;
    owner.click("#setup > button[type=submit]").await;
    owner
        .wait_for_path(&format!("/admin/dining/{}/setup", room.id))
        .await;
    owner.wait_for_text("#notice", "set-up is saved").await;
    looked_at(&owner, "room-saved").await;
    let exported = CatalogueFile::export(&app.db.pool, ShopZone::UTC)
        .await
        .unwrap();
    assert_eq!(exported.dining_rooms, demo.dining_rooms);

    // ---- the gala, its stalls' category and section
    let gala = demo.events.iter().find(|e| e.id == "winter-gala").unwrap();
    let seating = gala.seating.as_ref().unwrap();
    let (category, stalls) = (&seating.categories[0], &seating.sections[0]);
    owner
        .go(&format!("{}/admin/catalogue/events/new", app.address))
        .await;
    owner.fill("#f-title", &gala.title).await;
    owner.fill("#f-id", &gala.id).await;
    pick(&owner, "#f-starts_at", "2030-12-20T19:00").await;
    owner.fill("#f-venue", "The Assembly Hall").await;
    owner.click("#event-form button[type=submit]").await;
    owner
        .wait_for_path(&format!("/admin/catalogue/events/{}", gala.id))
        .await;
    owner.click("#add-section").await;
    owner
        .wait_for_path(&format!("/admin/catalogue/events/{}/sections/new", gala.id))
        .await;
    looked_at(&owner, "section-new").await;
    owner.fill("#f-cat_name", &category.name).await;
    owner
        .fill(
            "#f-cat_price",
            &format!(
                "{}.{:02}",
                category.price_minor / 100,
                category.price_minor % 100
            ),
        )
        .await;
    pick(&owner, "#f-cat_colour", &category.colour).await;
    owner.click("#category button[type=submit]").await;
    owner.wait_for_text("#notice", "Category added").await;
    owner.fill("#f-name", &stalls.name).await;
    choose(&owner, "#f-category", &category.id).await;
    owner
        .fill("#f-max_per_order", &stalls.max_per_order.to_string())
        .await;
    let numbers = |n: &[i32]| n.iter().map(i32::to_string).collect::<Vec<_>>().join(", ");
    for (i, r) in stalls.rows.iter().enumerate() {
        let at = line(&owner, "#plan-rows", "#add-row", i + 1).await;
        owner.fill(&format!("{at} [name=row]"), &r.row).await;
        owner
            .fill(&format!("{at} [name=first]"), &r.seats[0].to_string())
            .await;
        owner
            .fill(&format!("{at} [name=last]"), &r.seats[1].to_string())
            .await;
        for (name, list) in [
            ("aisles", &r.aisles_after),
            ("wheelchair", &r.wheelchair),
            ("companion", &r.companion),
        ] {
            if !list.is_empty() {
                owner
                    .fill(&format!("{at} [name={name}]"), &numbers(list))
                    .await;
            }
        }
    }
    // the drawing follows the fields: 5 rows of 14, two wheelchair places
    let drawn = owner
        .client
        .execute(
            "return [document.querySelectorAll('#plan-preview circle').length, \
                     document.querySelectorAll('#plan-preview circle.wheelchair').length];",
            vec![],
        )
        .await
        .unwrap();
    assert_eq!(drawn, serde_json::json!([70, 2]));
    looked_at(&owner, "section-filled").await;
    owner.click("#section > button[type=submit]").await;
    owner
        .wait_for_path(&format!(
            "/admin/catalogue/events/{}/sections/{}",
            gala.id, stalls.id
        ))
        .await;
    owner.wait_for_text("#notice", "Section added").await;
    // the seats to block chosen on the drawing, not their boxes
    for seat in &stalls.blocked {
        owner.click(&format!("circle[data-seat='{seat}']")).await;
        assert!(
            owner
                .find(&format!("input[name=seat][value='{seat}']"))
                .await
                .is_selected()
                .await
                .unwrap(),
            "a click on {seat} ticks its box"
        );
    }
    owner.fill("#f-note", "a camera position").await;
    owner.click("button[value=block]").await;
    owner.wait_for_text("#notice", "Blocked 2 seats").await;
    // a blocked seat, its × drawn over it, is ticked by a click too (the
    // mark lets the click through), and unticked by a second
    let d7 = "input[name=seat][value='D-7']";
    owner.click("circle[data-seat='D-7']").await;
    assert!(owner.find(d7).await.is_selected().await.unwrap());
    owner.click("circle[data-seat='D-7']").await;
    assert!(!owner.find(d7).await.is_selected().await.unwrap());
    looked_at(&owner, "section-saved").await;
    // on sale once the event is published
    owner
        .go(&format!(
            "{}/admin/catalogue/events/{}",
            app.address, gala.id
        ))
        .await;
    owner.publish("editors/event-published").await;
    let exported = CatalogueFile::export(&app.db.pool, ShopZone::UTC)
        .await
        .unwrap();
    let made = exported
        .events
        .iter()
        .find(|e| e.id == gala.id)
        .and_then(|e| e.seating.as_ref())
        .expect("the gala is seated");
    assert_eq!(made.categories, std::slice::from_ref(category));
    assert_eq!(made.sections, std::slice::from_ref(stalls));
    owner.close().await;
}
