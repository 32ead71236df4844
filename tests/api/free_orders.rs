//! An order that owes nothing (a booking without a deposit, a basket a
//! voucher takes to €0) is confirmed at once by the one confirm routine,
//! with no provider: no payment page is opened, the shopper lands on the
//! order's page, which says it is confirmed, and the confirmation mail is
//! sent. A race for the last tables confirms exactly as many as there are.

use futures::future::join_all;
use holdfast::vouchers::{self, Created, NewVoucher};

use holdfast_testkit::*;

use crate::tables::{book, day, live_pins, room, set_up, table, tables_of, time_id};

/// The order a checkout's answer sent the shopper to: its token, from
/// the `Location` `/orders/{token}`.
fn order_token(answer: &reqwest::Response) -> String {
    let location = answer
        .headers()
        .get("location")
        .and_then(|l| l.to_str().ok())
        .unwrap_or_default();
    location
        .strip_prefix("/orders/")
        .unwrap_or_else(|| panic!("sent to {location}, not an order's page"))
        .to_owned()
}

/// An order as the free path leaves it.
#[derive(sqlx::FromRow, Debug)]
struct Confirmed {
    id: uuid::Uuid,
    state: String,
    amount_minor: i64,
    provider_session_id: Option<String>,
    payment_ref: Option<String>,
}

async fn confirmed(app: &TestApp, token: &str) -> Confirmed {
    sqlx::query_as(
        "select id, state::text as state, amount_minor, provider_session_id, payment_ref \
           from orders where token = $1",
    )
    .bind(token)
    .fetch_one(&app.db.pool)
    .await
    .unwrap()
}

/// The confirmation mails the outbox sends, drained into the sandbox's
/// SMTP server: their plain texts.
async fn mails(app: &TestApp, expected: usize) -> Vec<String> {
    use holdfast::worker::mail::Mailer;
    use holdfast::worker::outbox::Outbox;
    use mail_parser::MessageParser;
    let mailer = Mailer::new(
        &app.sandbox.smtp(),
        "Holdfast shop <shop@holdfast.test>",
        holdfast::clock::ShopZone::UTC,
        &app.address,
    )
    .unwrap();
    let outbox =
        Outbox::new(app.db.pool.clone(), app.sandbox.providers()).with_mailer(Some(mailer));
    for _ in 0..40 {
        outbox.drain().await.unwrap();
        if app.sandbox.mail.messages().len() >= expected {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    app.sandbox
        .mail
        .messages()
        .iter()
        .map(|m| {
            let message = MessageParser::default().parse(&m.raw).unwrap();
            message.body_text(0).unwrap().into_owned()
        })
        .collect()
}

#[tokio::test]
async fn a_booking_without_a_deposit_is_confirmed_without_a_provider() {
    let app = spawn_app().await;
    set_up(&app.db, &room(10, vec![table("T1", 1, 4, 100)], vec![])).await;
    app.settled().await;
    let guest = browser();
    app.add(&guest, &time_id(19, 30), 2).await;
    let basket = read_page(&guest, &format!("{}/basket", app.address)).await;
    let (key, lines) = (checkout_key(&basket), form_lines(&basket));
    let answer = app.submit_form(&guest, &key, &lines).await;
    assert_eq!(answer.status(), 303);
    let token = order_token(&answer);
    let order = confirmed(&app, &token).await;
    assert_eq!(order.state, "paid");
    assert_eq!(order.amount_minor, 0);
    // no provider saw it: no page, no charge, no event
    assert_eq!(order.provider_session_id, None);
    assert_eq!(
        order.payment_ref.as_deref(),
        Some(format!("free:{}", order.id).as_str())
    );
    assert!(app.sandbox.stripe.ledger().charges.is_empty());
    assert!(app.sandbox.stripe.events().is_empty());
    assert_eq!(tables_of(&app.db, order.id).await, ["T1"]);
    // sold, not held: the engine's counters and the table's pin agree
    assert_eq!(
        engine::held_and_sold(&app.db, &time_id(19, 30)).await,
        (0, 2)
    );
    assert_eq!(live_pins(&app.db).await, 1);
    // the basket is empty and the order's page says it is confirmed
    let basket = read_page(&guest, &format!("{}/basket", app.address)).await;
    assert!(!basket.contains(&time_id(19, 30)), "{basket}");
    let page = read_page(&guest, &format!("{}/orders/{token}", app.address)).await;
    assert!(
        page.contains("Your order is confirmed. There was nothing to pay."),
        "{page}"
    );
    let words = format!("Table for 2, {} 19:30, 2 h", day().format("%a %-d %b"));
    assert!(page.contains(&words), "{words} in {page}");
    // a second submit of the same form goes to the same order
    let again = app.submit_form(&guest, &key, &lines).await;
    assert_eq!(again.status(), 303);
    assert_eq!(order_token(&again), token);
    let orders: i64 = sqlx::query_scalar("select count(*) from orders")
        .fetch_one(&app.db.pool)
        .await
        .unwrap();
    assert_eq!(orders, 1);
    // the confirmation mail, once
    let sent = mails(&app, 1).await;
    assert_eq!(sent.len(), 1);
    assert!(sent[0].contains(&words), "{words} in {}", sent[0]);
    // confirmed, never "paid: €0.00"
    assert!(sent[0].contains("is confirmed; there was nothing to pay"));
    assert!(!sent[0].contains("is paid"), "{}", sent[0]);
    engine::assert_no_drift(&app.db.inventory()).await;
}

#[tokio::test]
async fn a_basket_a_voucher_takes_to_nothing_is_confirmed_without_a_provider() {
    let app = spawn_app().await;
    app.load_demo().await;
    let created = vouchers::create(
        &app.db.pool,
        &NewVoucher {
            code: "ON-THE-HOUSE".into(),
            percent_off: Some(100),
            amount_off_minor: None,
            per_unit: false,
            currency: None,
            uses: 1,
            products: None,
            unlocks: Vec::new(),
            valid_from: None,
            valid_until: None,
            per_buyer: false,
        },
        "eur",
        "tests",
    )
    .await
    .unwrap();
    assert!(matches!(created, Created::Created { .. }), "{created:?}");
    app.settled().await;
    let shopper = browser();
    app.add(&shopper, "harbour-lights-general", 2).await;
    let basket = read_page(&shopper, &format!("{}/basket", app.address)).await;
    let answer = shopper
        .post(format!("{}/checkout", app.address))
        .form(&[
            ("checkout_key", checkout_key(&basket).as_str()),
            ("lines", form_lines(&basket).as_str()),
            ("name", "Ada Shopper"),
            ("email", "ada@example.com"),
            ("phone", "+44 20 7946 0000"),
            ("voucher", "ON-THE-HOUSE"),
        ])
        .send()
        .await
        .unwrap();
    assert_eq!(answer.status(), 303);
    let token = order_token(&answer);
    let order = confirmed(&app, &token).await;
    assert_eq!((order.state.as_str(), order.amount_minor), ("paid", 0));
    assert_eq!(order.provider_session_id, None);
    // a phone is kept for a booking only
    let phone: Option<String> =
        sqlx::query_scalar("select customer_phone from orders where id = $1")
            .bind(order.id)
            .fetch_one(&app.db.pool)
            .await
            .unwrap();
    assert_eq!(phone, None);
    assert!(app.sandbox.stripe.ledger().charges.is_empty());
    // two tickets issued, the voucher's one use sold with them
    let codes: i64 = sqlx::query_scalar("select count(*) from order_items where order_id = $1")
        .bind(order.id)
        .fetch_one(&app.db.pool)
        .await
        .unwrap();
    assert_eq!(codes, 2);
    assert_eq!(
        engine::held_and_sold(&app.db, "voucher:ON-THE-HOUSE").await,
        (0, 1)
    );
    let page = read_page(&shopper, &format!("{}/orders/{token}", app.address)).await;
    assert!(
        page.contains("Your order is confirmed. There was nothing to pay."),
        "{page}"
    );
    assert_eq!(mails(&app, 1).await.len(), 1);
    // a second shopper with the used-up code is refused and holds nothing
    let late = browser();
    app.add(&late, "harbour-lights-general", 1).await;
    let basket = read_page(&late, &format!("{}/basket", app.address)).await;
    let refused = late
        .post(format!("{}/checkout", app.address))
        .form(&[
            ("checkout_key", checkout_key(&basket).as_str()),
            ("lines", form_lines(&basket).as_str()),
            ("name", "Bo Shopper"),
            ("email", "bo@example.com"),
            ("voucher", "ON-THE-HOUSE"),
        ])
        .send()
        .await
        .unwrap();
    assert_ne!(refused.status(), 303);
    let orders: i64 = sqlx::query_scalar("select count(*) from orders")
        .fetch_one(&app.db.pool)
        .await
        .unwrap();
    assert_eq!(orders, 1);
    engine::assert_no_drift(&app.db.inventory()).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_hundred_guests_race_for_three_free_tables_and_exactly_three_are_confirmed() {
    let app = spawn_app().await;
    let tables = vec![
        table("T1", 1, 4, 100),
        table("T2", 1, 4, 90),
        table("T3", 1, 4, 80),
    ];
    set_up(&app.db, &room(40, tables, vec![])).await;
    app.settled().await;
    let answers = join_all((0..100).map(|_| {
        let app = &app;
        async move {
            let guest = browser();
            app.add(&guest, &time_id(19, 30), 2).await;
            app.checkout(&guest).await
        }
    }))
    .await;
    let confirmed: Vec<String> = answers
        .iter()
        .filter(|a| a.status() == 303)
        .map(order_token)
        .collect();
    let refused = answers.iter().filter(|a| a.status() == 409).count();
    assert_eq!((confirmed.len(), refused), (3, 97));
    let states: Vec<(String, i64)> =
        sqlx::query_as("select state::text, count(*) from orders group by state order by state")
            .fetch_all(&app.db.pool)
            .await
            .unwrap();
    assert_eq!(states, [("paid".to_owned(), 3)]);
    assert_eq!(live_pins(&app.db).await, 3);
    assert_eq!(
        engine::held_and_sold(&app.db, &time_id(19, 30)).await,
        (0, 6)
    );
    // and the database still refuses a fourth party at 19:30
    assert_eq!(book(&app.db, "late", 2, 19, 30).await, None);
    engine::assert_no_drift(&app.db.inventory()).await;
}
