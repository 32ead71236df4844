//! One order, many kinds (issue 44): every item an order gives a person
//! has its own code, its own state and its own words. A bakery pickup on
//! one day and a table on another no longer share a code, so collecting
//! the bread leaves the table's guest admissible; each door admits only
//! its own items and names them rightly; a guest's cancel marks the table
//! cancelled everywhere and changes nothing else; a refund names the seat
//! that goes back; and 300 scans at three doors of one mixed order set
//! admit every item once, at its own door.

use std::collections::HashMap;

use futures::future::join_all;
use reqwest::StatusCode;

use holdfast::checkout::{
    self, AttachOutcome, CheckoutStart, Customer, Fulfilment, Source, StartOutcome, WantedLine,
};
use holdfast::inventory::IdempotencyKey;
use holdfast::items::{self, Item, ItemState};
use holdfast::payments::{PaymentPage, ProviderKind};
use holdfast_testkit::engine::{account, qty, report};
use holdfast_testkit::*;

use crate::door::{count, scan, verdict};

const ROOM: &str = "harbour-bistro";
const TIER: &str = "harbour-lights-general";
const JARS: &str = "wild-honey";

/// The shop's day of a moment, as a door chooses it (`YYYY-MM-DD`).
fn day_of(at: chrono::DateTime<chrono::Utc>) -> String {
    let zone = holdfast::configuration::time_zone().unwrap();
    zone.local(at).format("%Y-%m-%d").to_string()
}

/// The demo's bakery slots of its first day (each takes eight), and the
/// demo restaurant's bookable times on later days, soonest first.
async fn slots_and_times(
    app: &TestApp,
) -> (Vec<String>, Vec<(String, chrono::DateTime<chrono::Utc>)>) {
    let slots: Vec<(String, chrono::DateTime<chrono::Utc>)> = sqlx::query_as(
        "select id, starts_at from products where collection = 'bakery' order by starts_at, id",
    )
    .fetch_all(&app.db.pool)
    .await
    .unwrap();
    let first_day = day_of(slots[0].1);
    let slots: Vec<String> = slots
        .into_iter()
        .filter(|(_, at)| day_of(*at) == first_day)
        .map(|(id, _)| id)
        .collect();
    let times: Vec<(String, chrono::DateTime<chrono::Utc>)> = sqlx::query_as(
        "select product_id, starts_at from dining_times where room = $1 order by starts_at",
    )
    .bind(ROOM)
    .fetch_all(&app.db.pool)
    .await
    .unwrap();
    let times = times
        .into_iter()
        .filter(|(_, at)| day_of(*at) > first_day)
        .collect();
    (slots, times)
}

/// An order's items, by the kind of what they are.
async fn items_by_kind(app: &TestApp, order: uuid::Uuid) -> HashMap<String, Vec<Item>> {
    let mut by: HashMap<String, Vec<Item>> = HashMap::new();
    for item in items::of_order(&app.db.pool, order).await.unwrap() {
        by.entry(item.kind.as_str().to_owned())
            .or_default()
            .push(item);
    }
    by
}

async fn booking_hold(app: &TestApp, order: uuid::Uuid) -> uuid::Uuid {
    sqlx::query_scalar("select hold_id from bookings where order_id = $1")
        .bind(order)
        .fetch_one(&app.db.pool)
        .await
        .unwrap()
}

/// A bakery pickup, a table for two on a later day and a concert ticket,
/// bought together through the shop.
async fn mixed_purchase(app: &TestApp, guest: &reqwest::Client) -> (String, uuid::Uuid) {
    let (slots, times) = slots_and_times(app).await;
    let paid = app
        .buy(
            guest,
            &Purchase::of(&slots[0], 1)
                .and(&times[0].0, 2)
                .and(TIER, 1)
                .by("Ada Mixed", "ada@example.com"),
        )
        .await;
    let token = paid.started.token.clone();
    let order = app.order_id(&token).await;
    (token, order)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_pickup_a_table_and_a_ticket_have_a_code_each_and_each_door_admits_its_own() {
    let app = spawn_app().await;
    app.load_demo().await;
    app.add_staff().await;
    let guest = browser();
    let (token, order) = mixed_purchase(&app, &guest).await;
    let by = items_by_kind(&app, order).await;
    let (pickup, table, ticket) = (
        by["pickup_slot"][0].clone(),
        by["table"][0].clone(),
        by["ticket"][0].clone(),
    );
    // three items, three codes: a pickup's and a booking's said, a
    // ticket's scanned
    assert_eq!(pickup.code.len(), 6);
    assert_eq!(table.code.len(), 6);
    assert!(ticket.code.starts_with("TKT-"), "{}", ticket.code);
    assert_ne!(pickup.code, table.code);
    assert!(table.booking.is_some());
    assert_ne!(
        day_of(pickup.starts_at.unwrap()),
        day_of(table.starts_at.unwrap())
    );

    // the order page: a card per code, each named for what it is
    let page = read_page(&guest, &format!("{}/orders/{token}", app.address)).await;
    for (item, label) in [
        (&pickup, "Pickup code"),
        (&table, "Booking code"),
        (&ticket, "Your tickets"),
    ] {
        assert!(page.contains(&item.code), "{} in {page}", item.code);
        assert!(page.contains(label), "{label} in {page}");
    }
    assert!(
        page.contains(&format!("calendar.ics?code={}", table.code)),
        "{page}"
    );
    // its lines: the table as its party, the others as counts, and the
    // total the provider was asked for
    let lines = page.split("<table class=\"lines\">").nth(1).unwrap();
    assert!(lines.contains("<td>Party of 2</td>"), "{lines}");
    assert_eq!(lines.matches("<td>× 1</td>").count(), 2, "{lines}");
    let amount: i64 = sqlx::query_scalar("select amount_minor from orders where id = $1")
        .bind(order)
        .fetch_one(&app.db.pool)
        .await
        .unwrap();
    let total = holdfast::money::format(amount, "eur");
    assert!(
        lines.contains(&format!("id=\"order-total\">{total}</th>")),
        "{total} in {lines}"
    );

    // the bakery's counter on the pickup's day
    let (staff, csrf) = app.staff_browser().await;
    let counter = [("day", day_of(pickup.starts_at.unwrap()))];
    let counter: Vec<(&str, &str)> = counter.iter().map(|(n, v)| (*n, v.as_str())).collect();
    let (status, page) = scan(
        &app,
        &staff,
        &csrf,
        &counter,
        "Counter",
        &pickup.code,
        false,
    )
    .await;
    let (outcome, words) = verdict(&page);
    assert_eq!(
        (status, outcome.as_str()),
        (StatusCode::OK, "collected"),
        "{words}"
    );
    assert!(words.contains("Sourdough box"), "{words}");
    assert!(
        !words.contains("Harbour Bistro"),
        "the pickup is not the table: {words}"
    );
    // Tuesday's table at Monday's counter: not this door, named as a table
    let (status, page) = scan(&app, &staff, &csrf, &counter, "Counter", &table.code, false).await;
    let (outcome, words) = verdict(&page);
    assert_eq!(
        (status, outcome.as_str()),
        (StatusCode::CONFLICT, "not_this_door")
    );
    assert!(words.contains("A table at the Harbour Bistro"), "{words}");
    assert!(
        !words.contains("A table at the Harbour Bistro, A table"),
        "the room is said once: {words}"
    );
    // the counter counts the one pickup, not the table
    assert_eq!(count(&page), (1, 1), "{page}");
    // the concert's door
    let event = [("event", "harbour-lights")];
    let (status, page) = scan(&app, &staff, &csrf, &event, "Gate", &pickup.code, false).await;
    assert_eq!(
        (status, verdict(&page).0.as_str()),
        (StatusCode::CONFLICT, "not_this_door")
    );
    let (status, page) = scan(&app, &staff, &csrf, &event, "Gate", &ticket.code, false).await;
    assert_eq!(
        (status, verdict(&page).0.as_str()),
        (StatusCode::OK, "admitted")
    );

    // the next day at the host stand: the guest is seated, not turned away
    let date = day_of(table.starts_at.unwrap());
    let hold = booking_hold(&app, order).await;
    let stand = app
        .admin_post(
            &staff,
            &format!("/admin/dining/{ROOM}/seat"),
            &[
                ("csrf", csrf.as_str()),
                ("hold", &hold.to_string()),
                ("date", &date),
            ],
        )
        .await;
    assert!(stand.status().is_redirection(), "{}", stand.status());
    let location = stand.headers()["location"].to_str().unwrap().to_owned();
    assert!(location.ends_with("said=seated"), "{location}");
    let stand = app
        .admin_page(&staff, &format!("/admin/dining/{ROOM}?date={date}"))
        .await;
    assert!(
        stand.contains(&table.code),
        "the stand shows the booking's code: {stand}"
    );
    assert!(
        stand.contains("<td class=\"state\" data-label=\"State\">seated</td>"),
        "{stand}"
    );

    // each item was used once, at its own place
    let states: Vec<(String, ItemState)> = items::of_order(&app.db.pool, order)
        .await
        .unwrap()
        .into_iter()
        .map(|item| (item.kind.as_str().to_owned(), item.state))
        .collect();
    assert!(
        states.iter().all(|(_, state)| *state == ItemState::Used),
        "{states:?}"
    );
    let places: Vec<(String, String)> = sqlx::query_as(
        "select r.kind, r.place from redemptions r where r.order_id = $1 order by r.kind",
    )
    .bind(order)
    .fetch_all(&app.db.pool)
    .await
    .unwrap();
    assert_eq!(
        places,
        [
            ("pickup_slot".to_owned(), "Counter".to_owned()),
            ("table".to_owned(), "host stand".to_owned()),
            ("ticket".to_owned(), "Gate".to_owned()),
        ]
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_command_line_collects_the_pickup_and_still_seats_the_table() {
    let app = spawn_app().await;
    app.load_demo().await;
    let (token, order) = mixed_purchase(&app, &browser()).await;
    assert!(!token.is_empty());
    let by = items_by_kind(&app, order).await;
    let holdfast = env!("CARGO_BIN_EXE_holdfast");
    for (code, word) in [
        (&by["pickup_slot"][0].code, "collected"),
        (&by["table"][0].code, "seated"),
    ] {
        let output = run_command(holdfast, &app.db, &["redeem", code.as_str()]);
        assert_eq!(output.status.code(), Some(0), "{output:?}");
        let said = String::from_utf8_lossy(&output.stdout);
        assert!(said.contains(word), "{said}");
    }
    // the same code twice: used
    let again = run_command(holdfast, &app.db, &["redeem", &by["table"][0].code]);
    assert_eq!(again.status.code(), Some(5), "{again:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_cancelled_table_says_so_everywhere_and_nothing_else_of_the_order_changes() {
    let app = spawn_app().await;
    app.load_demo().await;
    app.add_staff().await;
    let guest = browser();
    let (token, order) = mixed_purchase(&app, &guest).await;
    let by = items_by_kind(&app, order).await;
    let (pickup, table, ticket) = (
        by["pickup_slot"][0].clone(),
        by["table"][0].clone(),
        by["ticket"][0].clone(),
    );
    // the bread is collected first: the booking still stands
    let counter = holdfast::redemption::Door {
        by: "counter@holdfast.test",
        place: "Counter",
        checks: Some(std::slice::from_ref(&pickup.product_id)),
        overrule: false,
        attempt: uuid::Uuid::new_v4(),
    };
    let collected = holdfast::redemption::redeem(&app.db.pool, &pickup.code, &counter)
        .await
        .unwrap();
    assert!(collected.outcome.lets_through());
    let page = read_page(&guest, &format!("{}/orders/{token}", app.address)).await;
    assert!(page.contains("Cancel this booking"), "{page}");

    // the guest cancels the table
    let cancel = guest
        .post(format!("{}/orders/{token}/cancel", app.address))
        .send()
        .await
        .unwrap();
    assert!(cancel.status().is_redirection() || cancel.status().is_success());
    app.settled().await;

    let after = items_by_kind(&app, order).await;
    assert_eq!(after["table"][0].state, ItemState::Cancelled);
    assert_eq!(after["pickup_slot"][0].state, ItemState::Used);
    assert_eq!(after["ticket"][0].state, ItemState::Valid);
    let state: String = sqlx::query_scalar("select state from orders where id = $1")
        .bind(order)
        .fetch_one(&app.db.pool)
        .await
        .unwrap();
    assert_eq!(state, "paid", "the rest of the order stands");

    // the order page: the table's card says cancelled, with no code, QR
    // or calendar link of its own; the ticket keeps all three
    let page = read_page(&guest, &format!("{}/orders/{token}", app.address)).await;
    let card_start = page
        .find("class=\"code-card item-cancelled used\"")
        .unwrap_or_else(|| panic!("a cancelled card in {page}"));
    let card = &page[card_start..card_start + page[card_start..].find("</div>").unwrap()];
    assert!(
        card.contains("Cancelled: this code admits nobody"),
        "{card}"
    );
    assert!(!card.contains(&table.code), "{card}");
    assert!(!card.contains("<img"), "{card}");
    assert!(
        !page.contains(&format!("calendar.ics?code={}", table.code)),
        "{page}"
    );
    assert!(!page.contains("Cancel this booking"), "{page}");
    // its line says so too; the others do not
    assert_eq!(page.matches("line-state\">Cancelled<").count(), 1, "{page}");
    assert!(page.contains(&ticket.code), "{page}");
    assert!(
        page.contains(&format!("alt=\"QR code of {}\"", ticket.code)),
        "{page}"
    );
    // its calendar file has the ticket, not the table
    let ics = read_page(
        &guest,
        &format!("{}/orders/{token}/calendar.ics", app.address),
    )
    .await;
    assert!(ics.contains(&ticket.code), "{ics}");
    assert!(!ics.contains(&table.code), "{ics}");
    let one = guest
        .get(format!(
            "{}/orders/{token}/calendar.ics?code={}",
            app.address, table.code
        ))
        .send()
        .await
        .unwrap();
    assert_eq!(one.status(), StatusCode::NOT_FOUND);

    // the host stand and its door say cancelled; the ticket still admits
    let (staff, _) = app.staff_browser().await;
    let date = day_of(table.starts_at.unwrap());
    let stand = app
        .admin_page(&staff, &format!("/admin/dining/{ROOM}?date={date}"))
        .await;
    assert!(
        stand.contains("<td class=\"state\" data-label=\"State\">cancelled</td>"),
        "{stand}"
    );
    let stand_door = holdfast::redemption::Door {
        by: "host@holdfast.test",
        place: "host stand",
        checks: Some(std::slice::from_ref(&table.product_id)),
        overrule: false,
        attempt: uuid::Uuid::new_v4(),
    };
    let refused = holdfast::redemption::redeem(&app.db.pool, &table.code, &stand_door)
        .await
        .unwrap();
    assert_eq!(refused.outcome, holdfast::redemption::Outcome::Cancelled);
    let gate = holdfast::redemption::Door {
        by: "gate@holdfast.test",
        place: "Gate",
        checks: None,
        overrule: false,
        attempt: uuid::Uuid::new_v4(),
    };
    let admitted = holdfast::redemption::redeem(&app.db.pool, &ticket.code, &gate)
        .await
        .unwrap();
    assert!(admitted.outcome.lets_through());

    // the mail says the booking is cancelled, naming it
    let mailer = holdfast::worker::mail::Mailer::new(
        &app.sandbox.smtp(),
        "Shop <shop@example.com>",
        holdfast::clock::ShopZone::UTC,
        &app.address,
    )
    .unwrap();
    let outbox =
        holdfast::worker::outbox::Outbox::new(app.db.pool.clone(), app.sandbox.providers())
            .with_mailer(Some(mailer));
    for _ in 0..5 {
        outbox.drain().await.unwrap();
    }
    let messages = app.sandbox.mail.messages();
    let cancelled = messages
        .iter()
        .find(|m| m.subject().starts_with("Your booking is cancelled"))
        .unwrap_or_else(|| panic!("no cancel mail among {} messages", messages.len()));
    let text = mail_parser::MessageParser::default()
        .parse(&cancelled.raw)
        .unwrap()
        .body_text(0)
        .unwrap()
        .into_owned();
    assert!(
        text.contains("your booking is cancelled: A table at the Harbour Bistro"),
        "{text}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refund_names_the_seat_that_goes_back_and_the_other_stays() {
    let app = spawn_app().await;
    app.load_demo().await;
    app.add_staff().await;
    let section = "winter-gala-stalls";
    let paid = app.buy(&browser(), &Purchase::of(section, 2)).await;
    let order = app.order_id(&paid.started.token).await;
    let seats: Vec<(i64, String, String)> = sqlx::query_as(
        "select i.id, s.label, i.code from order_items i join seats s on s.id = i.seat_id \
          where i.order_id = $1 order by s.row_rank, s.run, s.pos",
    )
    .bind(order)
    .fetch_all(&app.db.pool)
    .await
    .unwrap();
    assert_eq!(seats.len(), 2, "{seats:?}");
    let (kept, back) = (&seats[0], &seats[1]);

    // the refund form names each seat with its own box
    let (staff, csrf) = app.staff_browser().await;
    let page = app
        .admin_page(&staff, &format!("/admin/orders/{order}"))
        .await;
    for (id, label, _) in &seats {
        assert!(
            page.contains(&format!("name=\"item:{id}\" checked> Seat {label}")),
            "{page}"
        );
    }
    // review, then refund the second seat alone
    let item = format!("item:{}", back.0);
    let form = |step: &'static str, amount: Option<String>| {
        let mut form = vec![
            ("csrf".to_owned(), csrf.clone()),
            ("refund_key".to_owned(), "seat-refund-key-0001".to_owned()),
            (item.clone(), "on".to_owned()),
            ("reason".to_owned(), "the guest cannot come".to_owned()),
            ("restock".to_owned(), "on".to_owned()),
            ("step".to_owned(), step.to_owned()),
        ];
        if let Some(amount) = amount {
            form.push(("amount_minor".to_owned(), amount));
        }
        form
    };
    let post = |form: Vec<(String, String)>| {
        let (app, staff) = (&app, &staff);
        async move {
            let form: Vec<(&str, &str)> =
                form.iter().map(|(n, v)| (n.as_str(), v.as_str())).collect();
            app.admin_post(staff, &format!("/admin/orders/{order}/refund"), &form)
                .await
        }
    };
    let review = post(form("review", None)).await;
    assert_eq!(review.status(), StatusCode::OK);
    let review = review.text().await.unwrap();
    assert!(
        review.contains(&format!("Stalls: seat {}", back.1)),
        "the review names the seat: {review}"
    );
    let refunded = post(form("refund", Some("4500".to_owned()))).await;
    assert!(refunded.status().is_redirection(), "{}", refunded.status());

    let states: Vec<(String, String)> = sqlx::query_as(
        "select s.label, i.state from order_items i join seats s on s.id = i.seat_id \
          where i.order_id = $1 order by s.label",
    )
    .bind(order)
    .fetch_all(&app.db.pool)
    .await
    .unwrap();
    let mut expected = vec![
        (kept.1.clone(), "valid".to_owned()),
        (back.1.clone(), "refunded".to_owned()),
    ];
    expected.sort();
    assert_eq!(states, expected);
    // that seat is on sale again, the other still pinned to the order
    let (open, live_pins): (String, i64) = sqlx::query_as(
        "select s.state, (select count(*) from seat_pins p where p.seat_id = s.id and p.live) \
           from seats s where s.section = $1 and s.label = $2",
    )
    .bind(section)
    .bind(&back.1)
    .fetch_one(&app.db.pool)
    .await
    .unwrap();
    assert_eq!((open.as_str(), live_pins), ("open", 0));
    let kept_pins: i64 = sqlx::query_scalar(
        "select count(*) from seat_pins p join seats s on s.id = p.seat_id \
          where s.section = $1 and s.label = $2 and p.live",
    )
    .bind(section)
    .bind(&kept.1)
    .fetch_one(&app.db.pool)
    .await
    .unwrap();
    assert_eq!(kept_pins, 1);
    // the record names it, and the order's page says what is left
    let recorded: serde_json::Value =
        sqlx::query_scalar("select units from order_refunds where order_id = $1")
            .bind(order)
            .fetch_one(&app.db.pool)
            .await
            .unwrap();
    assert_eq!(recorded[0]["seats"], serde_json::json!([back.1]));
    assert_eq!(recorded[0]["codes"], serde_json::json!([back.2]));
    let page = app
        .admin_page(&staff, &format!("/admin/orders/{order}"))
        .await;
    assert!(page.contains("1 refunded"), "{page}");
    assert!(page.contains("1 given back"), "{page}");
    assert!(page.contains(&format!(
        "name=\"item:{}\" checked> Seat {}",
        kept.0, kept.1
    )));
    assert!(
        !page.contains(&format!("name=\"item:{}\"", back.0)),
        "{page}"
    );
    // its code no longer admits; the other does
    let gate = holdfast::redemption::Door {
        by: "gate@holdfast.test",
        place: "Gate",
        checks: None,
        overrule: false,
        attempt: uuid::Uuid::new_v4(),
    };
    let refused = holdfast::redemption::redeem(&app.db.pool, &back.2, &gate)
        .await
        .unwrap();
    assert_eq!(refused.outcome, holdfast::redemption::Outcome::Refunded);
    let admitted = holdfast::redemption::redeem(&app.db.pool, &kept.2, &gate)
        .await
        .unwrap();
    assert!(admitted.outcome.lets_through());
    engine::assert_no_drift(&app.db.inventory()).await;
}

/// A paid order of a pickup, a ticket, a jar and a table for two at
/// `time`, started and paid straight through the engine.
async fn paid_mixed(
    app: &TestApp,
    key: &str,
    slot: &str,
    time: (&str, chrono::DateTime<chrono::Utc>),
) -> uuid::Uuid {
    let party = holdfast::catalogue::Choice::from_fields(holdfast::catalogue::ChoiceFields {
        party: Some(2),
        at: Some(time.1),
        ..Default::default()
    })
    .unwrap();
    let one = || qty(1);
    let start = CheckoutStart {
        checkout_key: IdempotencyKey::parse(key).unwrap(),
        order_token: checkout::codes::order_token(),
        voucher: None,
        account: account(&format!("basket-{key}")),
        lines: vec![
            WantedLine::units(slot, one()),
            WantedLine::units(TIER, one()),
            WantedLine::units(JARS, one()),
            WantedLine {
                product_id: time.0.to_owned(),
                choice: party,
            },
        ],
        customer: Customer::parse(&format!("Guest {key}"), &format!("{key}@example.com")).unwrap(),
        provider: ProviderKind::Stripe,
        limits: Default::default(),
    };
    let order = match checkout::start_checkout(&app.db.pool, &start)
        .await
        .unwrap()
    {
        StartOutcome::Started { order, .. } => order,
        other => panic!("{key}: expected a started checkout, got {other:?}"),
    };
    sqlx::query("update orders set provider_session_id = $2 where id = $1")
        .bind(order.id)
        .bind(format!("cs_test_{key}"))
        .execute(&app.db.pool)
        .await
        .unwrap();
    let page = PaymentPage {
        id: format!("cs_test_{key}"),
        url: format!("http://sandbox/pay/cs_test_{key}"),
        expires_at: chrono::Utc::now() + chrono::Duration::minutes(30),
    };
    let AttachOutcome::Paying { .. } = checkout::attach_payment(&app.db.pool, order.id, &page)
        .await
        .unwrap()
    else {
        panic!("expected paying");
    };
    let fulfilled = checkout::confirm_payment(
        &app.db.pool,
        &report(&app.db, order.id, &format!("pi_{key}"), Source::Webhook).await,
    )
    .await
    .unwrap();
    assert_eq!(fulfilled, Fulfilment::Fulfilled { order_id: order.id });
    order.id
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn three_hundred_scans_at_three_doors_admit_each_item_of_a_mixed_set_once_at_its_own_door() {
    let app = spawn_app().await;
    app.load_demo().await;
    app.add_staff().await;
    let (slots, times) = slots_and_times(&app).await;
    // fifteen orders, each a pickup, a ticket, a jar and a table
    let mut orders = Vec::new();
    for n in 0..15 {
        let slot = &slots[n % slots.len()];
        let time = &times[n];
        orders.push(paid_mixed(&app, &format!("mixed-{n:02}"), slot, (&time.0, time.1)).await);
    }
    let mut all: Vec<Item> = items::of_orders(&app.db.pool, &orders).await.unwrap();
    all.sort_by_key(|item| item.id);
    assert_eq!(all.len(), 60, "four items an order");
    let codes: std::collections::HashSet<&str> = all.iter().map(|i| i.code.as_str()).collect();
    assert_eq!(
        codes.len(),
        60,
        "no two items share a code across kinds or orders"
    );

    // three doors: the pickups' counter, the concert's door, and a
    // check-in list of the jars; the tables are the host stand's, no door's
    let pickup_day = day_of(
        all.iter()
            .find(|i| i.kind.as_str() == "pickup_slot")
            .unwrap()
            .starts_at
            .unwrap(),
    );
    let doors: [Vec<(&str, &str)>; 3] = [
        vec![("day", pickup_day.as_str())],
        vec![("event", "harbour-lights")],
        vec![("tier", JARS)],
    ];
    let own_door = |item: &Item| match item.kind.as_str() {
        "pickup_slot" => Some(0),
        "ticket" => Some(1),
        "stock" => Some(2),
        _ => None,
    };
    // five scans a code: three at its own door (a booking's at the
    // counter) and one at each other door; 300 in all, at once
    let mut plan: Vec<(usize, usize)> = Vec::new();
    for (at, item) in all.iter().enumerate() {
        let own = own_door(item).unwrap_or(0);
        for door in [own, own, own, (own + 1) % 3, (own + 2) % 3] {
            plan.push((at, door));
        }
    }
    assert_eq!(plan.len(), 300);
    let mut sessions = Vec::new();
    for _ in 0..6 {
        sessions.push(app.staff_browser().await);
    }
    let scans = plan.iter().enumerate().map(|(n, (at, door))| {
        let (staff, csrf) = &sessions[n % 6];
        let (app, doors, all) = (&app, &doors, &all);
        async move {
            let item = &all[*at];
            let (status, page) = scan(
                app,
                staff,
                csrf,
                &doors[*door],
                &format!("Door {door}"),
                &item.code,
                false,
            )
            .await;
            let (outcome, words) = verdict(&page);
            (*at, *door, status, outcome, words)
        }
    });
    let answers = join_all(scans).await;
    let mut tally: HashMap<String, usize> = HashMap::new();
    let mut admitted: HashMap<usize, usize> = HashMap::new();
    for (at, door, status, outcome, words) in &answers {
        let item = &all[*at];
        *tally.entry(outcome.clone()).or_default() += 1;
        match own_door(item) {
            Some(own) if own == *door => match outcome.as_str() {
                "collected" | "admitted" => {
                    assert_eq!(*status, StatusCode::OK);
                    *admitted.entry(*at).or_default() += 1;
                }
                "already_used" => assert_eq!(*status, StatusCode::CONFLICT),
                other => panic!("{} at its own door: {other} {words}", item.code),
            },
            _ => {
                assert_eq!(
                    outcome, "not_this_door",
                    "{} at door {door}: {words}",
                    item.code
                );
                // named for what it is, not for another item of its order
                let named = match item.kind.as_str() {
                    "pickup_slot" => "Sourdough box",
                    "ticket" => "Harbour Lights",
                    "stock" => "Wild heather honey",
                    _ => "A table at the Harbour Bistro",
                };
                assert!(
                    words.contains(named),
                    "{} named {named}: {words}",
                    item.code
                );
            }
        }
    }
    // exactly: one admission per item a door checks, the rest used or
    // not this door
    assert_eq!(admitted.len(), 45, "{tally:?}");
    assert!(admitted.values().all(|n| *n == 1), "{admitted:?}");
    assert_eq!(
        tally.get("collected").copied().unwrap_or(0),
        30,
        "{tally:?}"
    );
    assert_eq!(tally.get("admitted").copied().unwrap_or(0), 15, "{tally:?}");
    assert_eq!(
        tally.get("already_used").copied().unwrap_or(0),
        90,
        "{tally:?}"
    );
    // a booking's five scans and every other code's two at other doors
    assert_eq!(
        tally.get("not_this_door").copied().unwrap_or(0),
        15 * 5 + 45 * 2,
        "{tally:?}"
    );
    let redemptions: i64 = sqlx::query_scalar("select count(*) from redemptions")
        .fetch_one(&app.db.pool)
        .await
        .unwrap();
    assert_eq!(redemptions, 45);
    let states: Vec<(String, String, i64)> = sqlx::query_as(
        "select p.kind, i.state, count(*) from order_items i join products p on p.id = i.product_id \
          group by p.kind, i.state order by p.kind, i.state",
    )
    .fetch_all(&app.db.pool)
    .await
    .unwrap();
    assert_eq!(
        states,
        [
            ("pickup_slot".to_owned(), "used".to_owned(), 15),
            ("stock".to_owned(), "used".to_owned(), 15),
            ("table".to_owned(), "valid".to_owned(), 15),
            ("ticket".to_owned(), "used".to_owned(), 15),
        ]
    );
    // each door counts its own: all admitted, of all it expects
    let (staff, _) = &sessions[0];
    for door in &doors {
        let query: String = door.iter().map(|(n, v)| format!("{n}={v}")).collect();
        let page = app
            .admin_page(staff, &format!("/admin/redeem?{query}"))
            .await;
        assert_eq!(count(&page), (15, 15), "{query}: {page}");
    }
}
