//! Choosing a pickup, a day first (issue 33, part 3), in a real browser at
//! a phone's size (390×844) and a desk's (1280×900). The issue's ordinary
//! schedule (Monday to Saturday, 09:00 to 17:00, half-hourly, six days
//! ahead) made a phone home page 21,974 px tall with a card per slot; now
//! the home page lists the schedule's days with what is left, the
//! schedule's description is said once, and a day's page shows that day's
//! times. No horizontal scroll; axe-core finds nothing.

use super::*;
use holdfast_testkit::clock::berlin;

/// The issue's schedule, under a collection of its own.
fn ordinary_schedule() -> holdfast::catalogue::CatalogueFile {
    serde_json::from_value(serde_json::json!({
        "currency": "eur",
        "schedules": [{
            "collection": "loaves", "title": "Loaf pickup", "lede": "Pick a time to collect.",
            "name": "Sourdough loaf",
            "description": "Baked that morning; bring a bag, we use no plastic.",
            "price_minor": 650, "currency": "eur", "capacity": 6,
            "weekdays": [1, 2, 3, 4, 5, 6], "opens": "09:00:00", "closes": "17:00:00",
            "slot_minutes": 30, "days_ahead": 6
        }]
    }))
    .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pickup_is_chosen_a_day_first_and_the_phone_home_page_is_not_a_wall() {
    let _turn = turn().lock().await;
    ensure_installed();
    let app = spawn_app_shaped(TestDb::new().await, |_, shop| shop.default_zone = berlin()).await;
    ordinary_schedule()
        .load_in(&app.db.pool, berlin())
        .await
        .unwrap();
    // the days the schedule made slots on, and how many each
    let per_day: Vec<(chrono::NaiveDate, i64)> = sqlx::query_as(
        "select (starts_at at time zone 'Europe/Berlin')::date as day, count(*) \
           from products where collection = 'loaves' and active \
          group by 1 order by 1",
    )
    .fetch_all(&app.db.pool)
    .await
    .unwrap();
    let slots: i64 = per_day.iter().map(|(_, n)| n).sum();
    assert!(slots >= 60, "the schedule made a wall's worth: {slots}");
    assert!(per_day.len() <= 7, "{per_day:?}");
    // a whole day: 09:00 to 16:30, every half hour (today may have begun)
    let (full_day, times) = *per_day.iter().find(|(_, n)| *n == 16).unwrap();

    let driver = start_driver().await;
    let mut shopper = Browser::open(&driver, shots_for("pickup-days")).await;
    for (width, height, size) in [(390, 844, "phone"), (1280, 900, "desk")] {
        shopper.client.set_window_size(width, height).await.unwrap();
        app.settled().await;
        shopper.go(&format!("{}/", app.address)).await;
        let (tall, fits, cards): (i64, bool, i64) = {
            let measured = shopper
                .client
                .execute(
                    "return [document.documentElement.scrollHeight, \
                             document.documentElement.scrollWidth <= window.innerWidth, \
                             document.querySelectorAll('li.product').length];",
                    vec![],
                )
                .await
                .unwrap();
            serde_json::from_value(measured).unwrap()
        };
        assert!(fits, "the home page ({size}) scrolls sideways");
        assert_eq!(cards, 0, "no slot is a card on the home page");
        assert!(
            tall <= 2 * 844,
            "the home page ({size}) is {tall} px tall: two phone screens at most"
        );
        let days = shopper.text("#loaves .days").await;
        assert_eq!(
            days.matches(" left").count() + days.matches("sold out").count(),
            per_day.len(),
            "{days}"
        );
        assert!(days.contains("16 times, 96 left"), "{days}");
        let home = shopper.body().await;
        assert_eq!(home.matches("bring a bag").count(), 1, "said once");
        shopper.screenshot(&format!("home-{size}")).await;
        let violations = shopper.axe_violations().await;
        assert!(violations.is_empty(), "home page: {violations:#?}");

        // a day: its times, each with what is left, and nothing else
        let href = format!("/c/loaves?day={full_day}");
        shopper
            .click(&format!("#loaves .days a[href=\"{href}\"]"))
            .await;
        shopper.wait_for_path("/c/loaves").await;
        let (cards, fits, current, six_left): (i64, bool, String, i64) = {
            let measured = shopper
                .client
                .execute(
                    "return [document.querySelectorAll('li.product').length, \
                             document.documentElement.scrollWidth <= window.innerWidth, \
                             document.querySelector('.days a[aria-current]').getAttribute('href'), \
                             Array.from(document.querySelectorAll('li.product .left')) \
                                  .filter(e => e.textContent === '6 left').length];",
                    vec![],
                )
                .await
                .unwrap();
            serde_json::from_value(measured).unwrap()
        };
        assert_eq!(cards, times, "one day's times");
        assert!(fits, "the day's page ({size}) scrolls sideways");
        assert_eq!(current, href);
        let body = shopper.body().await;
        assert_eq!(body.matches("bring a bag").count(), 1, "said once");
        assert_eq!(six_left, 16, "each time with what is left: {body}");
        for time in ["09:00", "16:30"] {
            assert!(body.contains(time), "{time}: {body}");
        }
        shopper.screenshot(&format!("day-{size}")).await;
        let violations = shopper.axe_violations().await;
        assert!(violations.is_empty(), "a day's page: {violations:#?}");

        // adding comes back to the same day, at the slot
        let source = shopper.client.source().await.unwrap();
        assert!(
            source.contains(&format!(r#"name="back" value="/c/loaves?day={full_day}""#)),
            "{source}"
        );
        let card = "li.product:nth-child(3)";
        shopper.click(&format!("{card} button[type=submit]")).await;
        shopper
            .wait_for_text(&format!("{card} .added"), "Added to your basket")
            .await;
        let url = shopper.client.current_url().await.unwrap();
        assert_eq!(
            url.query_pairs()
                .find(|(k, _)| k == "day")
                .map(|(_, v)| v.into_owned()),
            Some(full_day.to_string()),
            "{url}"
        );
        shopper.screenshot(&format!("day-added-{size}")).await;
    }
    shopper.close().await;
}
