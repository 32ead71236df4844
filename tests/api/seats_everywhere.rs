//! Everywhere a ticket goes, its seat goes (docs/design.md, "Reserved
//! seating"): the door's printed list says each ticket's seat; the waiting
//! list offers seats together, its page and mail say them, and the order
//! bought names them (over HTTP: sold out, join, a refund frees two seats
//! together, offered, paid); the drop queue's admission holds seats like
//! any checkout, pinned and named, never one seat twice.

use std::time::Duration;

use holdfast::payments::ProviderKind;
use holdfast::staff::refunds::{RefundOutcome, RefundRequest, refund_order};
use holdfast::waitlist::{self, JoinRequest};
use holdfast::worker::mail::Mailer;
use holdfast::worker::outbox::Outbox;
use holdfast_testkit::engine::assert_no_drift;
use holdfast_testkit::*;
use reqwest::StatusCode;
use uuid::Uuid;

const SECTION: &str = "winter-gala-stalls";

/// The demo's stalls with only these seats on sale (every other seat
/// blocked by staff).
async fn only_on_sale(app: &TestApp, labels: &[&str]) {
    let (status,): (String,) = sqlx::query_as(
        "select status from hf_seat_set_state($1, \
             array(select label from seats where section = $1 and state = 'open' \
                      and label <> all ($2)), 'blocked', 'not sold in this test')",
    )
    .bind(SECTION)
    .bind(labels)
    .fetch_one(&app.db.pool)
    .await
    .unwrap();
    assert_eq!(status, "changed");
}

/// An order's codes' seats, once its codes are issued, from the stage back.
async fn seats_of(app: &TestApp, order: Uuid, n: usize) -> Vec<String> {
    for _ in 0..200 {
        let seats: Vec<String> = sqlx::query_scalar(
            "select s.label from order_items c join seats s on s.id = c.seat_id \
              where c.order_id = $1 order by s.row_rank, s.run, s.pos",
        )
        .bind(order)
        .fetch_all(&app.db.pool)
        .await
        .unwrap();
        if seats.len() == n {
            return seats;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("order {order} never had {n} tickets with seats");
}

/// The section's held and sold units, its live pins, and whether the
/// drift check sees drift.
async fn books(app: &TestApp) -> (i32, i32, i64, bool) {
    sqlx::query_as(
        "select r.held, r.sold, \
                (select count(*) from seat_pins p join seats s on s.id = p.seat_id \
                  where s.section = $1 and p.live), \
                (select bool_or(drift) from hf_check(r.id)) \
           from resources r where r.id = (select resource_id from products where id = $1)",
    )
    .bind(SECTION)
    .fetch_one(&app.db.pool)
    .await
    .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_doors_printed_list_says_each_tickets_seat() {
    let app = spawn_app().await;
    app.load_demo().await;
    app.add_staff().await;
    app.settled().await;
    let paid = app.buy(&browser(), &Purchase::of(SECTION, 2)).await;
    let seats = seats_of(&app, paid.started.order_id, 2).await;
    let (staff, _) = app.staff_browser().await;
    let page = app
        .admin_page(&staff, &format!("/admin/door-list?product={SECTION}"))
        .await;
    let table = &page[page.find("id=\"door-list\"").expect("a door list")..];
    for seat in &seats {
        assert!(
            table.contains(&format!("<td>Stalls, seat {seat}</td>")),
            "{seat} in {table}"
        );
    }
    assert!(page.contains("2 codes"), "{page}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refund_frees_two_seats_together_and_the_waiting_list_is_offered_them_and_buys_them() {
    let app = spawn_app().await;
    app.load_demo().await;
    only_on_sale(&app, &["B-3", "B-4", "B-5", "B-6"]).await;
    app.settled().await;
    // sold out: two pairs together
    let first = app.buy(&browser(), &Purchase::of(SECTION, 2)).await;
    let second = app.buy(&browser(), &Purchase::of(SECTION, 2)).await;
    let freed = seats_of(&app, first.started.order_id, 2).await;
    let kept = seats_of(&app, second.started.order_id, 2).await;
    let mut all = [freed.clone(), kept].concat();
    all.sort();
    assert_eq!(all, ["B-3", "B-4", "B-5", "B-6"]);
    app.settled().await;

    // a shopper joins the list for two seats, over HTTP, and confirms
    let shopper = browser();
    let joined = shopper
        .post(format!("{}/waitlist/{SECTION}", app.address))
        .form(&[
            ("name", "Grace"),
            ("email", "grace@example.com"),
            ("qty", "2"),
        ])
        .send()
        .await
        .unwrap();
    assert_eq!(joined.status(), StatusCode::OK);
    let (entry, token): (Uuid, String) =
        sqlx::query_as("select id, token from waitlist_entries where email = 'grace@example.com'")
            .fetch_one(&app.db.pool)
            .await
            .unwrap();
    let entry_url = format!("{}/waitlist/entry/{token}", app.address);
    let confirmed = shopper
        .post(format!("{entry_url}/confirm"))
        .send()
        .await
        .unwrap();
    assert_eq!(confirmed.status(), StatusCode::SEE_OTHER);

    // staff refund the first pair: its two seats, together, are offered
    let refunded = refund_order(
        &app.db.pool,
        &RefundRequest {
            order_id: first.started.order_id,
            units: Vec::new(),
            reason: "The shopper cannot come".into(),
            restock: true,
            override_redeemed: false,
            by: "box-office@example.com".into(),
            staff: None,
            key: None,
        },
    )
    .await
    .unwrap();
    assert!(
        matches!(refunded, RefundOutcome::Queued { .. }),
        "{refunded:?}"
    );
    let offered: Vec<String> = sqlx::query_scalar(
        "select s.label from waitlist_entries w join orders o on o.id = w.order_id \
           join holds h on h.purchase_id = o.hold_id \
           join seat_pins p on p.hold_id = h.id and p.live join seats s on s.id = p.seat_id \
          where w.id = $1 and w.state = 'offered' order by s.row_rank, s.run, s.pos",
    )
    .bind(entry)
    .fetch_all(&app.db.pool)
    .await
    .unwrap();
    assert_eq!(offered, freed, "the entry is offered the seats freed");
    let words = format!("Stalls — {}, {}, together", freed[0], freed[1]);
    app.settled().await;
    let page = shopper
        .get(&entry_url)
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(page.contains("Reserved for you until"), "{page}");
    assert!(
        page.contains(&format!("Your seats: <strong>{words}</strong>.")),
        "{page}"
    );

    // the offer's mail says them, through the real worker and SMTP
    let mailer = Mailer::new(
        &app.sandbox.smtp(),
        "Holdfast shop <shop@holdfast.test>",
        holdfast::clock::ShopZone::UTC,
        &app.address,
    )
    .unwrap();
    Outbox::new(app.db.pool.clone(), app.sandbox.providers())
        .with_mailer(Some(mailer))
        .drain()
        .await
        .unwrap();
    let offer = app
        .sandbox
        .mail
        .messages()
        .into_iter()
        .find(|m| {
            m.to.iter().any(|t| t == "grace@example.com") && m.subject().contains("held for you")
        })
        .expect("the offer's mail");
    let raw = String::from_utf8_lossy(&offer.raw).into_owned();
    let text = mail_parser::MessageParser::default()
        .parse(&offer.raw)
        .and_then(|m| m.body_text(0).map(|t| t.into_owned()))
        .unwrap_or(raw);
    assert!(text.contains(&format!("Your seats: {words}.")), "{text}");

    // she pays: the order names the seats, and her tickets are them
    let claim = shopper
        .post(format!("{entry_url}/claim"))
        .send()
        .await
        .unwrap();
    assert_eq!(claim.status(), StatusCode::SEE_OTHER);
    let pay_url = claim.headers()["location"].to_str().unwrap().to_owned();
    let paid = shopper.post(format!("{pay_url}/pay")).send().await.unwrap();
    assert_eq!(paid.status(), StatusCode::SEE_OTHER);
    let back = paid.headers()["location"].to_str().unwrap().to_owned();
    shopper.get(&back).send().await.unwrap();
    let (order, state, line): (Uuid, String, String) = sqlx::query_as(
        "select o.id, o.state::text, l.name from waitlist_entries w \
           join orders o on o.id = w.order_id join order_lines l on l.order_id = o.id \
          where w.id = $1",
    )
    .bind(entry)
    .fetch_one(&app.db.pool)
    .await
    .unwrap();
    assert_eq!(state, "paid");
    assert!(
        line.ends_with(&format!("Stalls — {}, {}", freed[0], freed[1])),
        "{line}"
    );
    assert_eq!(seats_of(&app, order, 2).await, freed);
    let (held, sold, pins, drift) = books(&app).await;
    assert_eq!((held, sold, pins, drift), (0, 4, 4, false));
    assert_no_drift(&app.db.inventory()).await;
}

/// An entry offered seats: its id, its qty, its seats' positions and
/// labels, its order line's name.
type Offer = (Uuid, i32, Vec<i32>, Vec<String>, String);

async fn join_and_confirm(app: &TestApp, email: &str, qty: i64) -> Uuid {
    waitlist::join(
        &app.db.pool,
        &JoinRequest {
            product_id: SECTION.into(),
            name: "Queued".into(),
            email: email.into(),
            qty,
            provider: ProviderKind::Stripe,
            address: None,
        },
    )
    .await
    .unwrap();
    let (id, token): (Uuid, String) =
        sqlx::query_as("select id, token from waitlist_entries where email = $1")
            .bind(email)
            .fetch_one(&app.db.pool)
            .await
            .unwrap();
    waitlist::confirm(&app.db.pool, &token).await.unwrap();
    id
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_drop_queue_admits_to_a_seated_section_with_seats_held_together_never_twice() {
    let app = spawn_app().await;
    app.load_demo().await;
    // row B's first stretch on sale: B-1 to B-7
    only_on_sale(&app, &["B-1", "B-2", "B-3", "B-4", "B-5", "B-6", "B-7"]).await;
    sqlx::query("update products set sale_opens_at = now() + interval '1 hour' where id = $1")
        .bind(SECTION)
        .execute(&app.db.pool)
        .await
        .unwrap();
    holdfast::queue::turn_on(
        &app.db.pool,
        holdfast::audit::Actor::Operator("test"),
        SECTION,
    )
    .await
    .unwrap();
    // before the draw every seat is set aside for the queue, pinned
    let (held, sold, pins, drift) = books(&app).await;
    assert_eq!((held, sold, pins, drift), (7, 0, 7, false));
    // five groups queue for 2, 2, 3, 1, 2 seats: 10 seats wanted, 7 on sale
    let sizes = [2, 2, 3, 1, 2];
    let mut entries = Vec::new();
    for (i, qty) in sizes.iter().enumerate() {
        entries.push(join_and_confirm(&app, &format!("q{i}@example.com"), *qty).await);
    }
    sqlx::query("update products set sale_opens_at = now() - interval '1 second' where id = $1")
        .bind(SECTION)
        .execute(&app.db.pool)
        .await
        .unwrap();
    assert!(holdfast::queue::draw(&app.db.pool, SECTION).await.unwrap());

    // each admitted group holds its own seats, next to each other, named
    // on its order's line; no seat twice; the pins are the units held
    let offers: Vec<Offer> = sqlx::query_as(
        "select w.id, w.qty, array_agg(s.pos order by s.pos), array_agg(s.label order by s.pos), \
                min(l.name) \
           from waitlist_entries w join orders o on o.id = w.order_id \
           join order_lines l on l.order_id = o.id \
           join holds h on h.purchase_id = o.hold_id \
           join seat_pins p on p.hold_id = h.id and p.live join seats s on s.id = p.seat_id \
          where w.state = 'offered' group by w.id, w.qty",
    )
    .fetch_all(&app.db.pool)
    .await
    .unwrap();
    assert!(!offers.is_empty(), "nobody was admitted");
    let mut granted: Vec<String> = Vec::new();
    for (_, qty, positions, labels, line) in &offers {
        assert_eq!(positions.len(), *qty as usize, "{labels:?}");
        assert!(
            positions.windows(2).all(|w| w[1] == w[0] + 1),
            "not together: {labels:?}"
        );
        assert!(
            line.ends_with(&labels.join(", ")),
            "{line} names {labels:?}"
        );
        granted.extend(labels.iter().cloned());
    }
    let admitted: i32 = offers.iter().map(|o| o.1).sum();
    let mut unique = granted.clone();
    unique.sort();
    unique.dedup();
    assert_eq!(
        unique.len(),
        granted.len(),
        "a seat held twice: {granted:?}"
    );
    // as many as fit together were admitted; the rest wait
    assert!((5..=7).contains(&admitted), "{admitted} seats admitted");
    let (held, sold, pins, drift) = books(&app).await;
    assert_eq!(i64::from(held + sold), pins);
    assert_eq!((sold, drift), (0, false));
    let waiting: i64 =
        sqlx::query_scalar("select count(*) from waitlist_entries where state = 'waiting'")
            .fetch_one(&app.db.pool)
            .await
            .unwrap();
    assert_eq!(waiting as usize + offers.len(), sizes.len());
    assert_no_drift(&app.db.inventory()).await;
}
