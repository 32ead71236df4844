//! A guest books a table in the shop (issue 36, the pages): the catalogue
//! links to the dining room's page instead of listing its times; the page
//! answers a day and a party size (the first day with a time for the party
//! unless one is asked) with the times that can still seat the party, by
//! service, and the tables each has left for it; a time
//! is booked through the basket and the checkout's one transaction, which
//! seats the party at a table. Bad input is answered clearly and changes
//! nothing.

use holdfast_testkit::*;

use crate::tables::{ROOM, book, day, room, set_up, table, tables_of, time_id};

#[tokio::test]
async fn a_guest_sees_the_times_that_seat_the_party_and_books_one_through_the_basket() {
    let app = spawn_app().await;
    let mut spec = room(10, vec![table("T1", 1, 4, 100)], vec![]);
    spec.periods[0].deposit_minor = 1000;
    set_up(&app.db, &spec).await;
    app.settled().await;
    // the catalogue links to the room's page and lists none of its times
    let home = read_page(&browser(), &format!("{}/", app.address)).await;
    assert!(home.contains("href=\"/dining/bistro\""), "{home}");
    assert!(!home.contains(&time_id(19, 30)), "{home}");

    // the table is taken 19:30–21:30
    assert_eq!(book(&app.db, "before", 4, 19, 30).await.unwrap(), ["T1"]);
    // the page answers from memory, milliseconds behind the database
    app.settled().await;
    let url = format!(
        "{}/dining/{ROOM}?date={}&party=4",
        app.address,
        day().format("%Y-%m-%d")
    );
    let page = read_page(&browser(), &url).await;
    assert!(page.contains("Times for 4 on"), "{page}");
    assert!(page.contains("A deposit of"), "{page}");
    // 18:00 to 17:30 + 2 h overlap it: full; 21:30 seats four, 10 places
    let bookable = |hhmm: &str| {
        page.contains(&format!(
            "value=\"{ROOM}-{}-{hhmm}\"",
            day().format("%Y%m%d")
        ))
    };
    assert!(!bookable("1930") && !bookable("1800") && !bookable("2115"));
    assert!(bookable("2130") && bookable("2230"));
    assert!(
        page.contains(
            "Full for 4: 18:00, 18:15, 18:30, 18:45, 19:00, 19:15, 19:30, 19:45, \
                       20:00, 20:15, 20:30, 20:45, 21:00, 21:15."
        ),
        "{page}"
    );
    // what is left is said as tables for the party, not covers: one
    // four-top, whatever the pacing's ten places; the times under their
    // service
    assert!(page.contains("The last table for 4"), "{page}");
    assert!(!page.contains("places left"), "{page}");
    assert!(page.contains(">Dinner</h3>"), "{page}");

    // bad input: said, with status 400, and the page still works
    for bad in [
        "party=0",
        "party=11",
        "party=four",
        "date=2020-01-01",
        "date=soon",
    ] {
        let response = browser()
            .get(format!("{}/dining/{ROOM}?{bad}", app.address))
            .send()
            .await
            .unwrap();
        assert_eq!(response.status(), 400, "{bad}");
        let text = response.text().await.unwrap();
        assert!(text.contains("role=\"alert\""), "{bad}: {text}");
    }
    let unknown = browser()
        .get(format!("{}/dining/nowhere", app.address))
        .send()
        .await
        .unwrap();
    assert_eq!(unknown.status(), 404);

    // the guest books 21:30 for four: the basket, then the checkout's one
    // transaction seats them at T1 and asks their deposit
    let guest = browser();
    app.add(&guest, &time_id(21, 30), 4).await;
    let started = app.checkout(&guest).await;
    assert_eq!(started.status(), 303, "{:?}", started.text().await);
    let (order, amount): (uuid::Uuid, i64) = sqlx::query_as(
        "select o.id, o.amount_minor from orders o join order_lines l on l.order_id = o.id \
          where l.product_id = $1",
    )
    .bind(time_id(21, 30))
    .fetch_one(&app.db.pool)
    .await
    .unwrap();
    assert_eq!(amount, 4000);
    assert_eq!(tables_of(&app.db, order).await, ["T1"]);
    // the order page says the booking in its own words, never a table
    let token: String = sqlx::query_scalar("select token from orders where id = $1")
        .bind(order)
        .fetch_one(&app.db.pool)
        .await
        .unwrap();
    let page = read_page(&browser(), &format!("{}/orders/{token}", app.address)).await;
    let words = format!("Table for 4, {} 21:30, 2 h", day().format("%a %-d %b"));
    assert!(page.contains(&words), "{words} in {page}");
    assert!(!page.contains("T1"), "{page}");
    engine::assert_no_drift(&app.db.inventory()).await;
}

#[tokio::test]
async fn a_party_below_the_deposits_size_sees_nothing_to_pay_in_the_basket() {
    let app = spawn_app().await;
    let mut spec = room(
        10,
        vec![table("T1", 1, 4, 100), table("T2", 1, 4, 100)],
        vec![],
    );
    spec.periods[0].deposit_minor = 1000;
    spec.periods[0].deposit_from_party = 4;
    set_up(&app.db, &spec).await;
    app.settled().await;
    let two = browser();
    app.add(&two, &time_id(19, 30), 2).await;
    let basket = read_page(&two, &format!("{}/basket", app.address)).await;
    assert!(
        basket.contains("€0.00") && !basket.contains("€20.00"),
        "{basket}"
    );
    let four = browser();
    app.add(&four, &time_id(19, 30), 4).await;
    let basket = read_page(&four, &format!("{}/basket", app.address)).await;
    assert!(basket.contains("€40.00"), "{basket}");
}

#[tokio::test]
async fn the_basket_says_a_booking_as_its_party_and_refuses_to_change_the_party_there() {
    let app = spawn_app().await;
    let spec = room(10, vec![table("T1", 1, 4, 100)], vec![]);
    set_up(&app.db, &spec).await;
    app.settled().await;
    let guest = browser();
    app.add(&guest, &time_id(19, 30), 4).await;
    let basket = read_page(&guest, &format!("{}/basket", app.address)).await;
    assert!(basket.contains("Party of 4"), "{basket}");
    assert!(basket.contains(">Party</th>"), "{basket}");
    // the header counts the booking as one, not as its four guests, on
    // the basket and on every other page
    assert!(
        basket.contains("Basket <span class=\"count\">1</span>"),
        "{basket}"
    );
    let booking = read_page(&guest, &format!("{}/dining/{ROOM}", app.address)).await;
    assert!(
        booking.contains("Basket <span class=\"count\">1</span>"),
        "{booking}"
    );
    assert!(!basket.contains(">Quantity</th>"), "{basket}");
    // the time is said, and no box changes the party
    let when = day().format("%a %-d %b").to_string();
    assert!(
        basket.contains(&when) && basket.contains("19:30"),
        "{basket}"
    );
    assert!(!basket.contains("name=\"qty\""), "{basket}");
    // a forged change of the party is refused in the shop's words, and
    // the basket keeps the party of four
    let answer = guest
        .post(format!("{}/basket/update", app.address))
        .form(&[("product_id", time_id(19, 30)), ("qty", "9".to_owned())])
        .send()
        .await
        .unwrap();
    assert_eq!(answer.status(), 409);
    let page = answer.text().await.unwrap();
    assert!(page.contains("party is chosen with its time"), "{page}");
    assert!(page.contains("Nothing changed."), "{page}");
    let qty: i32 = sqlx::query_scalar("select qty from basket_lines where product_id = $1")
        .bind(time_id(19, 30))
        .fetch_one(&app.db.pool)
        .await
        .unwrap();
    assert_eq!(qty, 4);
    // a quantity of 0 is the basket's Remove, as for any line
    let removed = guest
        .post(format!("{}/basket/update", app.address))
        .form(&[("product_id", time_id(19, 30)), ("qty", "0".to_owned())])
        .send()
        .await
        .unwrap();
    assert_eq!(removed.status(), 303);
    let left: i64 = sqlx::query_scalar("select count(*) from basket_lines")
        .fetch_one(&app.db.pool)
        .await
        .unwrap();
    assert_eq!(left, 0);
}

#[tokio::test]
async fn the_pay_page_says_a_booking_as_its_party() {
    let app = spawn_app().await;
    let mut spec = room(10, vec![table("T1", 1, 4, 100)], vec![]);
    spec.periods[0].deposit_minor = 1000;
    set_up(&app.db, &spec).await;
    app.settled().await;
    let guest = browser();
    let purchase = Purchase::of(&time_id(19, 30), 4)
        .with(holdfast::payments::ProviderKind::Razorpay)
        .by("Ravi Guest", "ravi@example.com");
    let started = app.start(&guest, &purchase).await;
    let page = read_page(&guest, &started.location).await;
    assert!(page.contains("Party of 4"), "{page}");
    assert!(page.contains(">Party</th>"), "{page}");
    assert!(page.contains("19:30"), "{page}");
}

#[tokio::test]
async fn a_guest_whose_table_went_meanwhile_is_offered_the_nearest_times_that_seat_the_party() {
    let app = spawn_app().await;
    set_up(&app.db, &room(10, vec![table("T1", 1, 4, 100)], vec![])).await;
    app.settled().await;
    let guest = browser();
    app.add(&guest, &time_id(21, 30), 4).await;
    // someone else books the one table at 21:30 while the guest types
    assert_eq!(book(&app.db, "quicker", 2, 21, 30).await.unwrap(), ["T1"]);
    let refused = app.checkout(&guest).await;
    assert_eq!(refused.status(), 409);
    let page = refused.text().await.unwrap();
    // T1 is busy 21:30–23:30: a party of four fits until 19:30
    assert!(
        page.contains("No table for 4 then. Times that can seat 4 that day: 19:00, 19:15, 19:30."),
        "{page}"
    );
    // nothing was held for the guest
    assert_eq!(
        engine::held_and_sold(&app.db, &time_id(21, 30)).await,
        (2, 0)
    );
}

#[tokio::test]
async fn the_confirmation_says_the_booking_and_its_calendar_lasts_the_partys_turn() {
    use holdfast::worker::mail::Mailer;
    use holdfast::worker::outbox::Outbox;
    use mail_parser::{MessageParser, MimeHeaders};
    let app = spawn_app().await;
    let mut spec = room(20, vec![table("T8", 5, 8, 100)], vec![]);
    spec.periods[0].deposit_minor = 1000;
    set_up(&app.db, &spec).await;
    crate::tables::paid_booking(&app.db, "six", 6, 19, 30).await;
    let mailer = Mailer::new(
        &app.sandbox.smtp(),
        "Holdfast shop <shop@holdfast.test>",
        holdfast::clock::ShopZone::UTC,
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
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    let messages = app.sandbox.mail.messages();
    assert_eq!(messages.len(), 1);
    let message = MessageParser::default().parse(&messages[0].raw).unwrap();
    let text = message.body_text(0).unwrap().into_owned();
    // a party of six stays two and a half hours
    let words = format!("Table for 6, {} 19:30, 2 h 30", day().format("%a %-d %b"));
    assert!(text.contains(&words), "{words} in {text}");
    let calendar = message
        .attachments()
        .find(|part| {
            part.content_type()
                .is_some_and(|c| c.ctype() == "text" && c.subtype() == Some("calendar"))
        })
        .map(|part| String::from_utf8_lossy(part.contents()).into_owned())
        .expect("a calendar file");
    let stamp = |key: &str| {
        let value = calendar
            .lines()
            .find_map(|l| l.strip_prefix(key))
            .unwrap_or_else(|| panic!("{key} in {calendar}"));
        chrono::NaiveDateTime::parse_from_str(value.trim(), "%Y%m%dT%H%M%SZ")
            .unwrap()
            .and_utc()
    };
    assert_eq!(stamp("DTSTART:"), crate::tables::at(19, 30));
    assert_eq!(stamp("DTEND:"), crate::tables::at(22, 0));
}

#[tokio::test]
async fn the_api_answers_the_times_that_seat_a_party_and_refuses_a_bad_question() {
    use holdfast::staff::api_keys::Scope;
    let app = spawn_app().await;
    app.add_staff().await;
    set_up(&app.db, &room(10, vec![table("T1", 1, 4, 100)], vec![])).await;
    assert_eq!(book(&app.db, "taken", 4, 19, 30).await.unwrap(), ["T1"]);
    let key = crate::api_v1::key_with(&app, &[Scope::ReadCatalogue]).await;
    // the times answer from memory, milliseconds behind the database
    app.settled().await;
    // the admin's catalogue lists the room and links to no page that is
    // not built yet
    let (staff, _) = app.signed_in(STAFF_EMAIL, STAFF_PASSWORD).await;
    let admin = app.admin_page(&staff, "/admin/catalogue").await;
    assert!(admin.contains("Dinner at the Bistro"), "{admin}");
    assert!(!admin.contains("/admin/catalogue/dining"), "{admin}");
    let ask = |query: String| {
        let key = key.clone();
        let url = format!("{}/api/v1/dining/{ROOM}/times?{query}", app.address);
        async move {
            let response = http_client()
                .get(url)
                .bearer_auth(key)
                .send()
                .await
                .unwrap();
            let status = response.status().as_u16();
            (status, response.json::<serde_json::Value>().await.unwrap())
        }
    };
    let date = day().format("%Y-%m-%d").to_string();
    let (status, body) = ask(format!("date={date}&party=4")).await;
    assert_eq!(status, 200, "{body}");
    let times = body["times"].as_array().unwrap();
    assert_eq!(times.len(), 19, "18:00 … 22:30");
    let seating: Vec<&str> = times
        .iter()
        .filter(|t| t["seats"] == true)
        .map(|t| t["product_id"].as_str().unwrap())
        .collect();
    let expected: Vec<String> = [(21, 30), (21, 45), (22, 0), (22, 15), (22, 30)]
        .iter()
        .map(|(h, m)| time_id(*h, *m))
        .collect();
    assert_eq!(seating, expected);
    let half_past_seven = times
        .iter()
        .find(|t| t["product_id"] == time_id(19, 30).as_str())
        .unwrap();
    assert_eq!(half_past_seven["covers_left"], 6);
    for bad in [
        "party=4",
        format!("date={date}").as_str(),
        "date=soon&party=4",
        &format!("date={date}&party=11"),
    ] {
        let (status, body) = ask(bad.to_owned()).await;
        assert_eq!(status, 400, "{bad}: {body}");
        assert_eq!(body["error"]["code"], "bad_query", "{body}");
    }
    let unknown = http_client()
        .get(format!(
            "{}/api/v1/dining/nowhere/times?date={date}&party=2",
            app.address
        ))
        .bearer_auth(&key)
        .send()
        .await
        .unwrap();
    assert_eq!(unknown.status(), 404);
}

/// The first bookable time a room's page offers, by its product id.
fn first_time_offered(page: &str, room: &str) -> String {
    let marker = format!("value=\"{room}-");
    let at = page
        .find(&marker)
        .unwrap_or_else(|| panic!("no time offered in {page}"));
    let id = &page[at + "value=\"".len()..];
    id[..id.find('"').unwrap()].to_owned()
}

#[tokio::test]
async fn the_demo_restaurant_seats_two_for_nothing_and_asks_six_for_their_deposit() {
    let app = spawn_app().await;
    app.load_demo().await;
    app.settled().await;
    let home = read_page(&browser(), &format!("{}/", app.address)).await;
    assert!(home.contains("href=\"/dining/harbour-bistro\""), "{home}");
    let tomorrow = (chrono::Utc::now() + chrono::Duration::days(1)).date_naive();
    let times = |party: i64| {
        format!(
            "{}/dining/harbour-bistro?date={}&party={party}",
            app.address,
            tomorrow.format("%Y-%m-%d")
        )
    };
    // a party of two: lunch from 12:00, nothing to pay, confirmed at once
    let page = read_page(&browser(), &times(2)).await;
    assert!(!page.contains("A deposit of"), "{page}");
    let time = first_time_offered(&page, "harbour-bistro");
    assert!(time.ends_with("-1200"), "{time}");
    let two = browser();
    app.add(&two, &time, 2).await;
    let answer = app.checkout(&two).await;
    assert_eq!(answer.status(), 303);
    let location = answer.headers()["location"].to_str().unwrap().to_owned();
    assert!(location.starts_with("/orders/"), "{location}");
    let (state, amount, tables): (String, i64, Vec<String>) = sqlx::query_as(
        "select o.state::text, o.amount_minor, b.tables from orders o \
           join bookings b on b.order_id = o.id where o.token = $1",
    )
    .bind(location.trim_start_matches("/orders/"))
    .fetch_one(&app.db.pool)
    .await
    .unwrap();
    // the smallest table that seats two, by priority: a window two-top
    assert_eq!(
        (state.as_str(), amount, tables),
        ("paid", 0, vec!["W1".into()])
    );
    // a party of six: told of the deposit before paying, and sent to pay it
    let page = read_page(&browser(), &times(6)).await;
    assert!(page.contains("A deposit of"), "{page}");
    let six = browser();
    app.add(&six, &first_time_offered(&page, "harbour-bistro"), 6)
        .await;
    let basket = read_page(&six, &format!("{}/basket", app.address)).await;
    assert!(basket.contains("€60.00"), "{basket}");
    let answer = app.checkout(&six).await;
    assert_eq!(answer.status(), 303);
    let location = answer.headers()["location"].to_str().unwrap();
    assert!(!location.starts_with("/orders/"), "{location}");
    engine::assert_no_drift(&app.db.inventory()).await;
}

#[tokio::test]
async fn a_booking_asks_the_guests_phone_and_refuses_one_that_is_not_a_number() {
    let app = spawn_app().await;
    app.load_demo().await;
    set_up(&app.db, &room(10, vec![table("T1", 1, 4, 100)], vec![])).await;
    app.settled().await;
    // a basket of tickets asks no phone
    let shopper = browser();
    app.add(&shopper, "harbour-lights-general", 1).await;
    let basket = read_page(&shopper, &format!("{}/basket", app.address)).await;
    assert!(!basket.contains("name=\"phone\""), "{basket}");
    // a booking does
    let guest = browser();
    app.add(&guest, &time_id(19, 30), 2).await;
    let basket = read_page(&guest, &format!("{}/basket", app.address)).await;
    assert!(
        basket.contains("<input name=\"phone\" type=\"tel\""),
        "{basket}"
    );
    let (key, lines) = (checkout_key(&basket), form_lines(&basket));
    let submit = |phone: &'static str| {
        let (guest, key, lines) = (guest.clone(), key.clone(), lines.clone());
        let url = format!("{}/checkout", app.address);
        async move {
            guest
                .post(url)
                .form(&[
                    ("checkout_key", key.as_str()),
                    ("lines", lines.as_str()),
                    ("name", "Ada Shopper"),
                    ("email", "ada@example.com"),
                    ("phone", phone),
                ])
                .send()
                .await
                .unwrap()
        }
    };
    for (bad, words) in [
        (
            "",
            "please give a phone number, so the restaurant can call you",
        ),
        (
            "call me",
            "please give a phone number like +44 20 7946 0000",
        ),
        ("12345", "please give a phone number like"),
        (
            "+44 20 7946 0000 0000 0000 00",
            "please give a phone number like",
        ),
    ] {
        let refused = submit(bad).await;
        assert_eq!(refused.status(), 400, "{bad:?}");
        let page = refused.text().await.unwrap();
        assert!(page.to_lowercase().contains(words), "{bad:?}: {page}");
        // what was typed stays in the form
        assert!(
            page.contains(&format!("value=\"{bad}\"")),
            "{bad:?}: {page}"
        );
    }
    let orders: i64 = sqlx::query_scalar("select count(*) from orders")
        .fetch_one(&app.db.pool)
        .await
        .unwrap();
    assert_eq!(orders, 0);
    assert_eq!(
        engine::held_and_sold(&app.db, &time_id(19, 30)).await,
        (0, 0)
    );
    let booked = submit(" +44 (20) 7946-0000 ").await;
    assert_eq!(booked.status(), 303);
    let phone: Option<String> = sqlx::query_scalar("select customer_phone from orders")
        .fetch_one(&app.db.pool)
        .await
        .unwrap();
    assert_eq!(phone.as_deref(), Some("+44 (20) 7946-0000"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn the_api_books_a_party_at_a_time_and_a_crowd_for_the_last_table_is_offered_other_times() {
    use futures::future::join_all;
    use holdfast::staff::api_keys::Scope;
    let app = spawn_app().await;
    app.add_staff().await;
    let mut spec = room(
        40,
        vec![table("T1", 1, 4, 100), table("T2", 1, 4, 110)],
        vec![],
    );
    spec.periods[0].deposit_minor = 1000;
    set_up(&app.db, &spec).await;
    app.settled().await;
    let key = crate::api_v1::key_with(&app, &[Scope::StartCheckouts]).await;
    let at = crate::tables::at(19, 30);
    // in Berlin's words, as a client may send it
    let berlin = at
        .with_timezone(&chrono::FixedOffset::east_opt(3600).unwrap())
        .to_rfc3339();
    let post = |idem: String, line: serde_json::Value| {
        let key = key.clone();
        let url = format!("{}/api/v1/checkouts", app.address);
        async move {
            let response = http_client()
                .post(url)
                .bearer_auth(key)
                .header("idempotency-key", idem)
                .json(&serde_json::json!({
                    "lines": [line], "name": "Ada", "email": "ada@example.com",
                    "phone": "+44 20 7946 0000"
                }))
                .send()
                .await
                .unwrap();
            let status = response.status().as_u16();
            (status, response.json::<serde_json::Value>().await.unwrap())
        }
    };
    // the room and the moment: 201 with the table and the stay
    let (status, body) = post(
        "first".into(),
        serde_json::json!({ "product_id": ROOM, "party": 4, "at": berlin }),
    )
    .await;
    assert_eq!(status, 201, "{body}");
    assert_eq!(body["amount_minor"], 4000, "{body}");
    let booking = &body["bookings"][0];
    assert_eq!(booking["product_id"], time_id(19, 30), "{body}");
    assert_eq!(booking["party"], 4);
    assert_eq!(booking["tables"], serde_json::json!(["T1"]));
    let stay = |field: &str| {
        booking[field]
            .as_str()
            .unwrap()
            .parse::<chrono::DateTime<chrono::Utc>>()
            .unwrap()
    };
    assert_eq!(
        (stay("starts_at"), stay("ends_at")),
        (at, crate::tables::at(21, 30))
    );
    // thirty clients race for the last table at 19:30: one gets it, the
    // rest are answered 409 with the nearest times that seat four
    let answers = join_all((0..30).map(|i| {
        post(
            format!("race-{i}"),
            serde_json::json!({ "product_id": time_id(19, 30), "party": 4, "at": at.to_rfc3339() }),
        )
    }))
    .await;
    let won: Vec<&serde_json::Value> = answers
        .iter()
        .filter(|(s, _)| *s == 201)
        .map(|(_, b)| b)
        .collect();
    assert_eq!(won.len(), 1, "{answers:?}");
    assert_eq!(won[0]["bookings"][0]["tables"], serde_json::json!(["T2"]));
    for (status, body) in answers.iter().filter(|(s, _)| *s != 201) {
        assert_eq!(*status, 409, "{body}");
        let message = body["error"]["message"].as_str().unwrap();
        assert!(
            message.contains(&format!(
                "{} at {}",
                time_id(21, 30),
                crate::tables::at(21, 30).to_rfc3339()
            )),
            "{message}"
        );
    }
    assert_eq!(crate::tables::live_pins(&app.db).await, 2);
    // the winner's client sends its request again, several times: its own
    // booking, never "no table" from memory (which knows both tables are
    // taken, and the key's claim)
    let winner = answers.iter().position(|(s, _)| *s == 201).unwrap();
    for _ in 0..5 {
        let (status, again) = post(
            format!("race-{winner}"),
            serde_json::json!({ "product_id": time_id(19, 30), "party": 4, "at": at.to_rfc3339() }),
        )
        .await;
        assert_eq!(status, 201, "{again}");
        assert_eq!(again["order_token"], won[0]["order_token"], "{again}");
    }
    assert_eq!(crate::tables::live_pins(&app.db).await, 2);
    // what is not a booking's line: said, nothing done
    for (line, words) in [
        (
            serde_json::json!({ "product_id": ROOM, "party": 2, "at": berlin, "qty": 2 }),
            "not qty",
        ),
        (
            serde_json::json!({ "product_id": ROOM, "party": 2 }),
            "party and at",
        ),
        (
            serde_json::json!({ "product_id": ROOM, "party": 2, "at": crate::tables::at(19, 40).to_rfc3339() }),
            "no bookable time",
        ),
        (
            serde_json::json!({ "product_id": ROOM, "party": 0, "at": berlin }),
            "1 to 100 guests",
        ),
    ] {
        let (status, body) = post(format!("bad-{words}").replace(' ', "-"), line).await;
        assert_eq!(status, 422, "{body}");
        let message = body["error"]["message"].as_str().unwrap();
        assert!(message.contains(words), "{words}: {message}");
    }
    assert_eq!(crate::tables::live_pins(&app.db).await, 2);
    engine::assert_no_drift(&app.db.inventory()).await;
}

#[tokio::test]
async fn the_crowd_is_answered_from_memory_until_a_time_of_the_day_changes() {
    let app = spawn_app().await;
    set_up(&app.db, &room(10, vec![table("T1", 1, 4, 100)], vec![])).await;
    app.settled().await;
    let url = format!(
        "{}/dining/{ROOM}?date={}&party=4",
        app.address,
        day().format("%Y-%m-%d")
    );
    let bookable =
        |page: &str, hh: u32, mm: u32| page.contains(&format!("value=\"{}\"", time_id(hh, mm)));
    let page = read_page(&browser(), &url).await;
    assert!(bookable(&page, 21, 30), "{page}");
    // a change the shop's memory cannot see (the table taken out behind
    // its back, its notification's trigger not fired): the crowd is
    // answered as before, for a second at most
    sqlx::raw_sql(
        "begin; set local session_replication_role = replica; \
         update dining_tables set archived_at = now() where id = 'T1'; commit;",
    )
    .execute(&app.db.pool)
    .await
    .unwrap();
    // (memory may answer as before until its next full read, at most
    // REFRESH_EVERY away: how soon that read comes is the machine's, so
    // only the bound is asserted; that the crowd's answers read nothing
    // is round_trips::'s)
    let _ = read_page(&browser(), &url).await;
    tokio::time::sleep(std::time::Duration::from_millis(1100)).await;
    let page = read_page(&browser(), &url).await;
    assert!(
        !bookable(&page, 21, 30),
        "the database answers again: {page}"
    );
    sqlx::query("update dining_tables set archived_at = null where id = 'T1'")
        .execute(&app.db.pool)
        .await
        .unwrap();
    tokio::time::sleep(std::time::Duration::from_millis(1100)).await;
    let page = read_page(&browser(), &url).await;
    assert!(bookable(&page, 21, 30), "{page}");
    // a booking of the day changes one of its times: memory reads again
    assert_eq!(book(&app.db, "quick", 4, 21, 30).await.unwrap(), ["T1"]);
    app.settled().await;
    let page = read_page(&browser(), &url).await;
    assert!(
        !bookable(&page, 21, 30) && !bookable(&page, 20, 0),
        "{page}"
    );
    assert!(bookable(&page, 19, 30), "{page}");
}

#[tokio::test]
async fn the_booking_page_opens_on_the_first_day_with_times_by_service_with_tables_left() {
    let app = spawn_app().await;
    let mut spec = room(
        40,
        vec![
            table("T1", 1, 2, 100),
            table("T2", 1, 2, 100),
            table("T4", 3, 4, 100),
        ],
        vec![],
    );
    spec.periods.push(holdfast::catalogue::tables::PeriodSpec {
        name: "lunch".into(),
        weekdays: (1..=7).collect(),
        opens: chrono::NaiveTime::from_hms_opt(12, 0, 0).unwrap(),
        last_seating: chrono::NaiveTime::from_hms_opt(13, 0, 0).unwrap(),
        deposit_minor: 0,
        deposit_from_party: 1,
        cancel_hours: 24,
    });
    holdfast::catalogue::tables::save_room(&app.db.pool, &spec)
        .await
        .unwrap();
    // only the day three days ahead has times: today's would be a dead end
    holdfast::catalogue::tables::times::publish_day(
        &app.db.pool,
        holdfast::clock::ShopZone::UTC,
        ROOM,
        day(),
    )
    .await
    .unwrap();
    assert_eq!(book(&app.db, "two", 2, 19, 30).await.unwrap(), ["T1"]);
    app.settled().await;
    let page = read_page(&browser(), &format!("{}/dining/{ROOM}", app.address)).await;
    assert!(
        page.contains(&format!("value=\"{}\"", day().format("%Y-%m-%d"))),
        "{page}"
    );
    // lunch first, then dinner, each time under its service
    let lunch = page.find(">Lunch</h3>").expect("a lunch heading");
    let dinner = page.find(">Dinner</h3>").expect("a dinner heading");
    assert!(lunch < dinner, "{page}");
    let noon = page.find(&format!("value=\"{}\"", time_id(12, 0))).unwrap();
    let seven = page.find(&format!("value=\"{}\"", time_id(19, 0))).unwrap();
    assert!(lunch < noon && noon < dinner && dinner < seven, "{page}");
    // two two-tops at noon; at 19:30 one is taken, and 18:00–21:00 share it
    assert!(page.contains("2 tables left for 2"), "{page}");
    assert!(page.contains("The last table for 2"), "{page}");
    // a party no time of any day seats: the first day, saying so
    let six = read_page(
        &browser(),
        &format!("{}/dining/{ROOM}?party=6", app.address),
    )
    .await;
    assert!(
        six.contains("There are no times to book that day."),
        "{six}"
    );
}

#[tokio::test]
async fn before_a_rooms_bookings_open_its_page_says_when_and_offers_no_time() {
    let app = spawn_app().await;
    let mut spec = room(10, vec![table("T1", 1, 4, 100)], vec![]);
    spec.bookings_open_at = Some(chrono::Utc::now() + chrono::Duration::hours(2));
    set_up(&app.db, &spec).await;
    app.settled().await;
    let url = format!(
        "{}/dining/{ROOM}?date={}&party=2",
        app.address,
        day().format("%Y-%m-%d")
    );
    let page = read_page(&browser(), &url).await;
    assert!(page.contains("Bookings for this day open"), "{page}");
    assert!(!page.contains("name=\"product_id\""), "{page}");
    assert!(!page.contains("There are no times"), "{page}");
    // open now: the times are offered
    spec.bookings_open_at = None;
    holdfast::catalogue::tables::save_room(&app.db.pool, &spec)
        .await
        .unwrap();
    app.settled().await;
    let page = read_page(&browser(), &url).await;
    assert!(!page.contains("Bookings for this day open"), "{page}");
    assert!(
        page.contains(&format!("value=\"{}\"", time_id(19, 30))),
        "{page}"
    );
}
