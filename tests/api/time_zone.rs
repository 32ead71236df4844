//! The shop's time zone: slot times read in it, pages showing it, and the
//! nights the clocks change.

use chrono::{NaiveDate, NaiveTime, Utc};
use holdfast::catalogue::CatalogueFile;

use holdfast_testkit::clock::{berlin, next_change};
use holdfast_testkit::*;

fn catalogue(json: serde_json::Value) -> CatalogueFile {
    serde_json::from_value(json).unwrap()
}

async fn page(app: &TestApp, path: &str) -> String {
    browser()
        .get(format!("{}{path}", app.address))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap()
}

#[tokio::test]
async fn slots_on_the_nights_the_clocks_change_show_the_right_local_hour() {
    let app = spawn_app_shaped(TestDb::new().await, |_, shop| shop.default_zone = berlin()).await;
    let (spring, spring_ahead) = next_change(berlin(), true);
    let (autumn, autumn_ahead) = next_change(berlin(), false);
    let file = catalogue(serde_json::json!({
        "currency": "eur",
        "pickup_slots": {
            "collection": "bakery",
            "name": "Night loaf",
            "description": "Baked through the night.",
            "price_minor": 900,
            "capacity": 4,
            "days_ahead": [spring_ahead],
            "times": ["01:30", "03:30"]
        },
        "products": [{
            "id": "autumn-ball",
            "collection": "ball",
            "kind": "ticket",
            "name": "The ball the clocks go back",
            "price_minor": 2000,
            "capacity": 10,
            "days_ahead": autumn_ahead,
            "time": "02:30"
        }]
    }));
    file.load_in(&app.db.pool, berlin()).await.unwrap();
    app.settled().await;

    // the instants: 01:30 CET is 00:30 UTC, 03:30 CEST is 01:30 UTC (one
    // hour apart, not two); 02:30 on the autumn night is its first passing
    let starts: Vec<(String, chrono::DateTime<Utc>)> =
        sqlx::query_as("select id, starts_at from products order by starts_at")
            .fetch_all(&app.db.pool)
            .await
            .unwrap();
    let utc = |day: NaiveDate, h: u32, m: u32| {
        day.and_time(NaiveTime::from_hms_opt(h, m, 0).unwrap())
            .and_utc()
    };
    let mut expected = vec![utc(spring, 0, 30), utc(spring, 1, 30), utc(autumn, 0, 30)];
    expected.sort();
    assert_eq!(starts.iter().map(|s| s.1).collect::<Vec<_>>(), expected);

    // the pages say the local hour with its zone
    let bakery = page(&app, "/c/bakery").await;
    assert!(bakery.contains("pickup "), "{bakery}");
    assert!(bakery.contains("01:30 CET"), "{bakery}");
    assert!(bakery.contains("03:30 CEST"), "{bakery}");
    assert!(!bakery.contains("02:30"), "{bakery}");
    let ball = page(&app, "/c/ball").await;
    assert!(ball.contains(", 02:30 CEST"), "{ball}");

    // a time the clocks skip is refused, naming it, and nothing is written
    let before: i64 = sqlx::query_scalar("select count(*) from products")
        .fetch_one(&app.db.pool)
        .await
        .unwrap();
    let skipped = catalogue(serde_json::json!({
        "currency": "eur",
        "pickup_slots": {
            "collection": "bakery",
            "name": "Ghost loaf",
            "description": "",
            "price_minor": 900,
            "capacity": 4,
            "days_ahead": [spring_ahead],
            "times": ["02:30"]
        }
    }));
    let error = skipped
        .load_in(&app.db.pool, berlin())
        .await
        .unwrap_err()
        .to_string();
    assert!(error.contains("does not exist in Europe/Berlin"), "{error}");
    let after: i64 = sqlx::query_scalar("select count(*) from products")
        .fetch_one(&app.db.pool)
        .await
        .unwrap();
    assert_eq!(after, before);
}

#[tokio::test]
async fn the_time_zone_setting_is_an_iana_name_or_a_clear_refusal() {
    let db = TestDb::new().await;
    let run = |zone: &str| {
        std::process::Command::new(env!("CARGO_BIN_EXE_holdfast"))
            .arg("--db")
            .arg(&db.url)
            .args(["catalogue", "load"])
            .current_dir(env!("CARGO_MANIFEST_DIR"))
            .env_remove("DATABASE_URL")
            .env("HOLDFAST_TIME_ZONE", zone)
            .output()
            .unwrap()
    };
    let refused = run("Mars/Olympus");
    assert_eq!(refused.status.code(), Some(1));
    let said = String::from_utf8_lossy(&refused.stderr);
    assert!(said.contains("HOLDFAST_TIME_ZONE"), "{said}");
    let loaded = run("Asia/Kolkata");
    assert!(loaded.status.success(), "{loaded:?}");
    // the demo's 19:30 concert is 19:30 in Kolkata: 14:00 UTC
    let starts: chrono::DateTime<Utc> =
        sqlx::query_scalar("select starts_at from products where id = 'harbour-lights-vip'")
            .fetch_one(&db.pool)
            .await
            .unwrap();
    assert_eq!(starts.format("%H:%M").to_string(), "14:00");
}

/// The shop `serve` runs is built from its settings in one place, so the
/// pages show times in HOLDFAST_TIME_ZONE as the mail does (a shop built by
/// hand once dropped it and showed UTC).
#[tokio::test]
async fn the_served_shop_shows_times_in_the_configured_zone() {
    let db = TestDb::new().await;
    let mut settings = holdfast::configuration::ServerSettings::local("http://127.0.0.1:1".into());
    settings.time_zone = berlin();
    let shop = holdfast::state::Shop::from_settings(
        &settings,
        db.pool.clone(),
        spawn_sandbox().providers(),
        holdfast::keys::SessionKey::generate(),
    );
    assert_eq!(shop.zone(), berlin());
    assert_eq!(
        holdfast::state::Shop::local(db.pool.clone(), spawn_sandbox().providers(), "x".into())
            .zone(),
        holdfast::clock::ShopZone::UTC
    );
}

#[tokio::test]
async fn the_admins_pickers_read_and_show_the_shops_time_on_the_nights_the_clocks_change() {
    let app = spawn_app_shaped(TestDb::new().await, |_, shop| shop.default_zone = berlin()).await;
    app.add_staff().await;
    let (staff, csrf) = app.staff_browser().await;
    let event = |starts_at: &'static str, doors_at: &'static str| {
        vec![
            ("csrf", csrf.clone()),
            ("title", "Clock night".to_owned()),
            ("lede", String::new()),
            ("id", "clock-night".to_owned()),
            ("starts_at", starts_at.to_owned()),
            ("doors_at", doors_at.to_owned()),
            ("ends_at", String::new()),
            ("venue", "Pier 4".to_owned()),
        ]
    };
    let stored = || async {
        sqlx::query_scalar::<_, Option<chrono::DateTime<Utc>>>(
            "select starts_at from collections where id = 'clock-night'",
        )
        .fetch_optional(&app.db.pool)
        .await
        .unwrap()
        .flatten()
    };
    // the half hour the clocks skip in spring: refused, as typed, nothing made
    let skipped = staff
        .post(format!("{}/admin/catalogue/events", app.address))
        .form(&event("2027-03-28T02:30", ""))
        .send()
        .await
        .unwrap();
    assert_eq!(skipped.status(), reqwest::StatusCode::BAD_REQUEST);
    let page = skipped.text().await.unwrap();
    assert!(page.contains("the clocks skip it"), "{page}");
    assert!(page.contains("type=\"datetime-local\" id=\"f-starts_at\" name=\"starts_at\" value=\"2027-03-28T02:30\""), "{page}");
    assert_eq!(stored().await, None);
    // the hour the clocks repeat in autumn: its first (summer) time
    let made = staff
        .post(format!("{}/admin/catalogue/events", app.address))
        .form(&event("2027-10-31T02:30", "01:45"))
        .send()
        .await
        .unwrap();
    assert_eq!(made.status(), reqwest::StatusCode::SEE_OTHER);
    assert_eq!(
        stored().await.unwrap().to_rfc3339(),
        "2027-10-31T00:30:00+00:00"
    );
    let form = app
        .admin_page(&staff, "/admin/catalogue/events/clock-night")
        .await;
    assert!(form.contains("value=\"2027-10-31T02:30\""), "{form}");
    assert!(
        form.contains("type=\"time\" id=\"f-doors_at\" name=\"doors_at\" value=\"01:45\""),
        "{form}"
    );
    // moved to just after the spring change: shown back as typed
    let moved = staff
        .post(format!(
            "{}/admin/catalogue/events/clock-night",
            app.address
        ))
        .form(&event("2027-03-28T03:00", "01:30"))
        .send()
        .await
        .unwrap();
    assert_eq!(moved.status(), reqwest::StatusCode::SEE_OTHER);
    assert_eq!(
        stored().await.unwrap().to_rfc3339(),
        "2027-03-28T01:00:00+00:00"
    );
    let form = app
        .admin_page(&staff, "/admin/catalogue/events/clock-night")
        .await;
    assert!(form.contains("value=\"2027-03-28T03:00\""), "{form}");
    assert!(form.contains("value=\"01:30\""), "{form}");
    // doors in the skipped half hour of that day: refused beside the field
    let doors = staff
        .post(format!(
            "{}/admin/catalogue/events/clock-night",
            app.address
        ))
        .form(&event("2027-03-28T03:00", "02:15"))
        .send()
        .await
        .unwrap();
    assert_eq!(doors.status(), reqwest::StatusCode::BAD_REQUEST);
    let page = doors.text().await.unwrap();
    assert!(page.contains("id=\"f-doors_at-error\""), "{page}");
    assert!(page.contains("the clocks skip it"), "{page}");
}

/// The owner's zone on Settings (issue 46): shoppers in India read an
/// event at 19:30 UTC as 01:00 IST the next morning once the owner says
/// the shop is in Asia/Kolkata; a name that is no zone is refused beside
/// the field with nothing saved; emptied, the server's zone is back.
#[tokio::test]
async fn the_owner_sets_the_shops_zone_on_settings_and_the_pages_follow() {
    let app = spawn_app().await;
    app.add_staff().await;
    let file = catalogue(serde_json::json!({
        "currency": "inr",
        "products": [{
            "id": "late-show", "collection": "late-show", "kind": "ticket",
            "name": "The late show", "price_minor": 90000, "capacity": 10,
            "days_ahead": 10, "time": "19:30"
        }]
    }));
    file.load_in(&app.db.pool, holdfast::clock::ShopZone::UTC)
        .await
        .unwrap();
    app.settled().await;
    let show = page(&app, "/c/late-show").await;
    assert!(show.contains("19:30 UTC"), "{show}");
    let (owner, csrf) = app.staff_browser().await;
    let save = |zone: &'static str| {
        let (owner, csrf) = (owner.clone(), csrf.clone());
        let app = &app;
        async move {
            app.admin_post(
                &owner,
                "/admin/settings/shop",
                &[
                    ("csrf", csrf.as_str()),
                    ("name", "Harbour Nights"),
                    ("accent", "#0b6e4f"),
                    ("time_zone", zone),
                ],
            )
            .await
        }
    };
    let stored = || async {
        sqlx::query_scalar::<_, String>("select time_zone from storefront")
            .fetch_one(&app.db.pool)
            .await
            .unwrap()
    };
    // any case; stored as the IANA database spells it
    assert_eq!(save(" asia/kolkata ").await.status(), 303);
    assert_eq!(stored().await, "Asia/Kolkata");
    // memory hears of the save: the next page is in the shop's zone
    let mut show = String::new();
    for _ in 0..100 {
        show = page(&app, "/c/late-show").await;
        if show.contains("01:00 IST") {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    assert!(
        show.contains("01:00 IST") && !show.contains("UTC"),
        "{show}"
    );
    let settings = app.admin_page(&owner, "/admin/settings").await;
    assert!(settings.contains("value=\"Asia/Kolkata\""), "{settings}");
    assert!(settings.contains("<option value=\"Europe/Berlin\">"));
    // no such zone: said beside the field, nothing saved
    for wrong in ["Mars/Olympus_Mons", "UTC+5:30", "<script>"] {
        let refused = save(wrong).await;
        assert_eq!(refused.status(), 400, "{wrong}");
        let body = refused.text().await.unwrap();
        assert!(
            body.contains("The time zone is a name like Europe/Berlin"),
            "{body}"
        );
        assert_eq!(stored().await, "Asia/Kolkata");
    }
    // emptied: the server's zone again
    assert_eq!(save("").await.status(), 303);
    assert_eq!(stored().await, "");
    for _ in 0..100 {
        show = page(&app, "/c/late-show").await;
        if show.contains("19:30 UTC") {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    assert!(show.contains("19:30 UTC"), "{show}");
}
