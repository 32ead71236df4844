//! Every ticket says what it is for (issue 33): a tier named as the admin
//! suggests ("General") reads "Winter Jazz — General" in the basket, on the
//! provider's page, on the order page, in the mail and its calendar file;
//! the event's date, doors and venue are on the catalogue, the order page
//! and the mail, in the shop's zone; the tier's description is where the
//! shopper decides.

use holdfast::worker::mail::Mailer;
use holdfast::worker::outbox::Outbox;
use mail_parser::{MessageParser, MimeHeaders};
use reqwest::StatusCode;

use holdfast_testkit::clock::berlin;
use holdfast_testkit::*;

/// Winter Jazz in Berlin on 20 December 2027, one tier named as the admin
/// suggests, with its doors, venue and description.
pub(crate) fn winter_jazz() -> holdfast::catalogue::CatalogueFile {
    serde_json::from_value(serde_json::json!({
        "currency": "eur",
        "events": [{
            "id": "winter-jazz", "title": "Winter Jazz", "lede": "A night of standards.",
            "starts_at": "2027-12-20T19:30:00+01:00", "doors_at": "2027-12-20T19:00:00+01:00",
            "ends_at": "2027-12-20T22:30:00+01:00", "venue": "The Pier, Harbour Road 1",
            "tiers": [{ "id": "winter-jazz-general", "name": "General",
                        "description": "Standing room, bar at the back.",
                        "price_minor": 3500, "capacity": 100 }]
        }]
    }))
    .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_ticket_names_its_event_date_doors_and_venue_from_the_catalogue_to_the_calendar() {
    let app = spawn_app_shaped(TestDb::new().await, |_, shop| shop.default_zone = berlin()).await;
    let file = winter_jazz();
    file.load_in(&app.db.pool, berlin()).await.unwrap();
    let when = "Monday 20 December, 19:30 CET";
    let (doors, venue) = ("Doors 19:00 CET", "The Pier, Harbour Road 1");

    // the catalogue: date, doors, venue and the tier's description (once
    // the pages' memory has read it)
    app.settled().await;
    let shopper = browser();
    let catalogue = read_page(&shopper, &format!("{}/", app.address)).await;
    for said in [when, doors, venue, "Standing room, bar at the back."] {
        assert!(
            catalogue.contains(said),
            "catalogue says {said}: {catalogue}"
        );
    }
    // the basket
    app.add(&shopper, "winter-jazz-general", 2).await;
    let basket = read_page(&shopper, &format!("{}/basket", app.address)).await;
    assert!(basket.contains("Winter Jazz — General"), "{basket}");
    assert!(basket.contains(when), "the basket says when: {basket}");
    // the provider's line
    let started = app.checkout(&shopper).await;
    assert_eq!(started.status(), StatusCode::SEE_OTHER);
    let provider_page = read_page(&browser(), &location(&started)).await;
    assert!(
        provider_page.contains("Winter Jazz — General, Mon 20 Dec 19:30 CET"),
        "the provider's line, with its date: {provider_page}"
    );
    let paid_page = pay_on_page(&location(&started), "pay").await;
    let back = shopper.get(location(&paid_page)).send().await.unwrap();
    let token = token_of(&location(&back));
    app.wait_for_state(&token, "paid").await;
    // the order page
    let order = read_page(&shopper, &format!("{}/orders/{token}", app.address)).await;
    for said in ["Winter Jazz — General", when, doors, venue] {
        assert!(order.contains(said), "order page says {said}: {order}");
    }
    assert!(!order.contains("UTC"), "the shop's zone, not UTC: {order}");

    // the mail, in the shop's name, and its calendar file
    sqlx::query("update storefront set name = 'Harbour Market'")
        .execute(&app.db.pool)
        .await
        .unwrap();
    let mailer = Mailer::new(
        &app.sandbox.smtp(),
        "Holdfast shop <shop@holdfast.test>",
        berlin(),
        &app.address,
    )
    .unwrap();
    let outbox =
        Outbox::new(app.db.pool.clone(), app.sandbox.providers()).with_mailer(Some(mailer));
    for _ in 0..20 {
        outbox.drain().await.unwrap();
        if !app.sandbox.mail.messages().is_empty() {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    let messages = app.sandbox.mail.messages();
    assert_eq!(messages.len(), 1);
    let message = MessageParser::default().parse(&messages[0].raw).unwrap();
    let from = message.from().and_then(|from| from.first()).unwrap();
    assert_eq!(from.name(), Some("Harbour Market"));
    assert_eq!(from.address(), Some("shop@holdfast.test"));
    let text = message.body_text(0).unwrap().into_owned();
    let html = message.body_html(0).unwrap().into_owned();
    let number: String = sqlx::query_scalar("select number from orders where token = $1")
        .bind(&token)
        .fetch_one(&app.db.pool)
        .await
        .unwrap();
    assert!(order.contains(&number), "the order page says its number");
    for said in ["Winter Jazz — General", when, doors, venue, number.as_str()] {
        assert!(text.contains(said), "mail text says {said}: {text}");
        assert!(html.contains(said), "mail html says {said}: {html}");
    }
    let calendar = message
        .attachments()
        .find(|part| part.content_type().is_some_and(|c| c.ctype() == "text"))
        .map(|part| String::from_utf8_lossy(part.contents()).into_owned())
        .expect("a calendar file");
    assert!(
        calendar.contains("SUMMARY:Winter Jazz — General"),
        "{calendar}"
    );
    assert!(
        calendar.contains("LOCATION:The Pier\\, Harbour Road 1"),
        "{calendar}"
    );
    // the order page's "add to calendar" gives the same file
    let link = format!("/orders/{token}/calendar.ics");
    assert!(order.contains(&format!(r#"href="{link}""#)), "{order}");
    let file = shopper
        .get(format!("{}{link}", app.address))
        .send()
        .await
        .unwrap();
    assert_eq!(file.status(), StatusCode::OK);
    assert!(
        file.headers()["content-type"]
            .to_str()
            .unwrap()
            .starts_with("text/calendar")
    );
    let file = file.text().await.unwrap();
    let events = |ics: &str| -> Vec<String> {
        ics.lines()
            .filter(|l| !l.starts_with("DTSTAMP"))
            .map(str::to_owned)
            .collect()
    };
    assert_eq!(events(&file), events(&calendar));
    // an order that is not paid has none
    let unpaid = app
        .start(&browser(), &Purchase::of("winter-jazz-general", 1))
        .await;
    let none = shopper
        .get(format!(
            "{}/orders/{}/calendar.ics",
            app.address, unpaid.token
        ))
        .send()
        .await
        .unwrap();
    assert_eq!(none.status(), StatusCode::NOT_FOUND);
}
