//! The shoppers' mail, through a real SMTP server (the sandbox's, over
//! TCP) and the real worker: one confirmation per paid order, mail that
//! waits when the server is down, QR codes that decode to the codes, and a
//! calendar file whose time is the slot's.

use futures::future::join_all;
use holdfast::checkout::{self, AttachOutcome, Fulfilment, Source};
use holdfast::payments::PaymentPage;
use holdfast::worker::mail::Mailer;
use holdfast::worker::outbox::Outbox;
use holdfast_sandbox::mail::Received;
use mail_parser::{MessageParser, MimeHeaders};

use holdfast_testkit::clock::{berlin, next_change};
use holdfast_testkit::engine::{paid, report, started};
use holdfast_testkit::*;

fn mailer(app: &TestApp, smtp: &str, zone: holdfast::clock::ShopZone) -> Mailer {
    Mailer::new(
        smtp,
        "Holdfast shop <shop@holdfast.test>",
        zone,
        &app.address,
    )
    .unwrap()
}

/// Run the outbox (with mail) until nothing is due, making waiting jobs
/// due again between passes.
async fn send_all(app: &TestApp, mailer: &Mailer) {
    let outbox =
        Outbox::new(app.db.pool.clone(), app.sandbox.providers()).with_mailer(Some(mailer.clone()));
    for _ in 0..20 {
        outbox.drain().await.unwrap();
        let pending: i64 = sqlx::query_scalar(
            "select count(*) from outbox_jobs where state = 'pending' \
               and kind in ('order_confirmation', 'refund_notice')",
        )
        .fetch_one(&app.db.pool)
        .await
        .unwrap();
        if pending == 0 {
            return;
        }
        sqlx::query("update outbox_jobs set run_after = now() where state = 'pending'")
            .execute(&app.db.pool)
            .await
            .unwrap();
    }
}

/// An order started and on its payment page (not paid yet).
async fn paying(app: &TestApp, key: &str, lines: &[(&str, i64)]) -> checkout::Order {
    let order = started(&app.db, key, lines).await;
    let page = PaymentPage {
        id: format!("cs_test_{key}"),
        url: format!("http://sandbox/pay/cs_test_{key}"),
        expires_at: chrono::Utc::now() + chrono::Duration::minutes(30),
    };
    let AttachOutcome::Paying { order } = checkout::attach_payment(&app.db.pool, order.id, &page)
        .await
        .unwrap()
    else {
        panic!("expected paying");
    };
    order
}

fn parsed(message: &Received) -> mail_parser::Message<'_> {
    MessageParser::default().parse(&message.raw).unwrap()
}

/// The code a QR image shows.
pub(crate) fn decode_qr(png_bytes: &[u8]) -> String {
    let decoder = png::Decoder::new(std::io::Cursor::new(png_bytes));
    let mut reader = decoder.read_info().unwrap();
    let mut pixels = vec![0; reader.output_buffer_size().unwrap()];
    let info = reader.next_frame(&mut pixels).unwrap();
    assert_eq!(info.color_type, png::ColorType::Grayscale);
    let (width, height) = (info.width as usize, info.height as usize);
    let mut image =
        rqrr::PreparedImage::prepare_from_greyscale(width, height, |x, y| pixels[y * width + x]);
    let grids = image.detect_grids();
    assert_eq!(grids.len(), 1, "one QR code in the image");
    grids[0].decode().unwrap().1
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_hundred_racing_confirmations_send_one_mail_per_order() {
    let app = spawn_app().await;
    app.load_demo().await;
    let smtp = app.sandbox.smtp();
    let mailer = mailer(&app, &smtp, holdfast::clock::ShopZone::UTC);
    let mut orders = Vec::new();
    for i in 0..20 {
        orders.push(
            paying(
                &app,
                &format!("race-{i:02}"),
                &[("harbour-lights-general", 1)],
            )
            .await,
        );
    }
    // each order's payment reported five times at once (webhooks, returns,
    // reconciliation): a hundred confirmations
    let mut reports = Vec::new();
    for order in &orders {
        for n in 0..5 {
            let source = [Source::Webhook, Source::Return, Source::Reconciliation][n % 3];
            reports.push(report(&app.db, order.id, &format!("pi_{}", order.token), source).await);
        }
    }
    let results = join_all(
        reports
            .iter()
            .map(|r| checkout::confirm_payment(&app.db.pool, r)),
    )
    .await;
    let fulfilled = results
        .iter()
        .filter(|r| matches!(r.as_ref().unwrap(), Fulfilment::Fulfilled { .. }))
        .count();
    assert_eq!(fulfilled, 20);
    // two workers at once, then again: every order mailed exactly once
    let worker = || {
        Outbox::new(app.db.pool.clone(), app.sandbox.providers()).with_mailer(Some(mailer.clone()))
    };
    let (first, second) = (worker(), worker());
    let (a, b) = futures::join!(first.drain(), second.drain());
    a.unwrap();
    b.unwrap();
    send_all(&app, &mailer).await;
    let messages = app.sandbox.mail.messages();
    assert_eq!(messages.len(), 20, "one confirmation per order");
    let mut to: Vec<String> = messages.iter().map(|m| m.to.join(",")).collect();
    to.dedup();
    assert!(to.iter().all(|t| t == "ada@example.com"), "{to:?}");
    let mut ids: Vec<String> = messages
        .iter()
        .map(|m| parsed(m).message_id().unwrap().to_owned())
        .collect();
    ids.sort();
    ids.dedup();
    assert_eq!(ids.len(), 20, "one message per order, each its own");
    for message in &messages {
        let message = parsed(message);
        assert!(message.subject().unwrap().starts_with("Your order is paid"));
        assert!(message.body_text(0).is_some() && message.body_html(0).is_some());
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_mail_server_that_is_down_delays_mail_and_loses_none() {
    let app = spawn_app().await;
    app.load_demo().await;
    let smtp = app.sandbox.smtp();
    // nobody listens here at all
    let nowhere = format!("smtp://127.0.0.1:{}", free_port());
    for i in 0..3 {
        paid(&app.db, &format!("down-{i}"), &[("harbour-lights-vip", 1)]).await;
    }
    let down = Outbox::new(app.db.pool.clone(), app.sandbox.providers()).with_mailer(Some(mailer(
        &app,
        &nowhere,
        holdfast::clock::ShopZone::UTC,
    )));
    down.drain().await.unwrap();
    // the server answers "try again later"
    app.sandbox.mail.set_refusing(true);
    sqlx::query("update outbox_jobs set run_after = now() where state = 'pending'")
        .execute(&app.db.pool)
        .await
        .unwrap();
    let refusing = Outbox::new(app.db.pool.clone(), app.sandbox.providers())
        .with_mailer(Some(mailer(&app, &smtp, holdfast::clock::ShopZone::UTC)));
    refusing.drain().await.unwrap();
    let waiting: Vec<(i32, Option<String>)> = sqlx::query_as(
        "select attempts, last_error from outbox_jobs \
          where kind = 'order_confirmation' and state = 'pending' order by id",
    )
    .fetch_all(&app.db.pool)
    .await
    .unwrap();
    assert_eq!(waiting.len(), 3, "nothing was dropped");
    assert!(
        waiting
            .iter()
            .all(|(attempts, error)| *attempts == 2 && error.is_some())
    );
    assert!(app.sandbox.mail.messages().is_empty());
    // the secret of a mail server URL never shows in a job's error
    assert!(
        waiting
            .iter()
            .all(|(_, e)| !e.as_deref().unwrap_or("").contains("password"))
    );
    // back up: everything goes, once
    app.sandbox.mail.set_refusing(false);
    send_all(&app, &mailer(&app, &smtp, holdfast::clock::ShopZone::UTC)).await;
    assert_eq!(app.sandbox.mail.messages().len(), 3);
    send_all(&app, &mailer(&app, &smtp, holdfast::clock::ShopZone::UTC)).await;
    assert_eq!(app.sandbox.mail.messages().len(), 3);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_confirmation_carries_each_code_as_a_qr_code_and_the_slot_in_a_calendar() {
    let app = spawn_app_shaped(TestDb::new().await, |_, shop| shop.default_zone = berlin()).await;
    // a pickup slot at 03:30 on the night the clocks go forward, and a concert
    let (spring, ahead) = next_change(berlin(), true);
    let file: holdfast::catalogue::CatalogueFile = serde_json::from_value(serde_json::json!({
        "currency": "eur",
        "pickup_slots": {
            "collection": "bakery", "name": "Night loaf", "description": "",
            "price_minor": 900, "capacity": 4, "days_ahead": [ahead], "times": ["03:30"]
        },
        "products": [{
            "id": "harbour-lights-vip", "collection": "harbour-lights", "kind": "ticket",
            "name": "Harbour Lights — VIP", "price_minor": 9000, "capacity": 20,
            "days_ahead": 14, "time": "19:30"
        }]
    }))
    .unwrap();
    file.load_in(&app.db.pool, berlin()).await.unwrap();
    let slot: String = sqlx::query_scalar("select id from products where kind = 'pickup_slot'")
        .fetch_one(&app.db.pool)
        .await
        .unwrap();
    let order = paid(
        &app.db,
        "mail-1",
        &[(slot.as_str(), 1), ("harbour-lights-vip", 2)],
    )
    .await;
    let smtp = app.sandbox.smtp();
    send_all(&app, &mailer(&app, &smtp, berlin())).await;
    let messages = app.sandbox.mail.messages();
    assert_eq!(messages.len(), 1);
    let message = parsed(&messages[0]);
    let text = message.body_text(0).unwrap().into_owned();
    let html = message.body_html(0).unwrap().into_owned();
    let pickup = crate::item_code(&app.db.pool, order.id, "pickup_slot")
        .await
        .unwrap();
    let tickets: Vec<String> = sqlx::query_scalar(
        "select code from order_items where order_id = $1 and code like 'TKT-%' order by code",
    )
    .bind(order.id)
    .fetch_all(&app.db.pool)
    .await
    .unwrap();
    assert_eq!(tickets.len(), 2);
    // what was bought, when (the shop's hour, with its zone), the codes,
    // the link
    assert!(text.contains("03:30 CEST"), "{text}");
    assert!(text.contains(&pickup), "{text}");
    for code in &tickets {
        assert!(
            text.contains(code.as_str()) && html.contains(code.as_str()),
            "{text}"
        );
    }
    let link = format!("{}/orders/{}", app.address, order.token);
    assert!(text.contains(&link) && html.contains(&link), "{text}");
    assert!(!html.contains("<script"), "no script: {html}");
    assert!(!html.contains("src=\"http"), "no remote images: {html}");
    // every code's QR image, inline, decodes back to the code
    let mut decoded = Vec::new();
    let mut calendar = None;
    for part in message.attachments() {
        let kind = part
            .content_type()
            .map(|c| format!("{}/{}", c.ctype(), c.subtype().unwrap_or("")));
        match kind.as_deref() {
            Some("image/png") => decoded.push(decode_qr(part.contents())),
            Some("text/calendar") => {
                calendar = Some(String::from_utf8_lossy(part.contents()).into_owned())
            }
            other => panic!("an attachment of {other:?}"),
        }
    }
    decoded.sort();
    let mut expected = tickets.clone();
    expected.push(pickup.clone());
    expected.sort();
    assert_eq!(decoded, expected);
    // the calendar's event is the slot's moment: 03:30 in Berlin that night
    // (the concert has an event of its own)
    let calendar = calendar.expect("a calendar file for the pickup slot");
    let slot_event = calendar
        .split("BEGIN:VEVENT")
        .find(|event| event.contains("SUMMARY:Night loaf"))
        .expect("the slot's event");
    let start = slot_event
        .lines()
        .find_map(|l| l.strip_prefix("DTSTART:"))
        .expect("DTSTART");
    let start = chrono::NaiveDateTime::parse_from_str(start.trim(), "%Y%m%dT%H%M%SZ")
        .unwrap()
        .and_utc();
    assert_eq!(berlin().local(start).date_naive(), spring);
    assert_eq!(berlin().time(start), "03:30 CEST");
    let starts_at: chrono::DateTime<chrono::Utc> =
        sqlx::query_scalar("select starts_at from products where id = $1")
            .bind(&slot)
            .fetch_one(&app.db.pool)
            .await
            .unwrap();
    assert_eq!(start, starts_at);

    // a staff refund tells the shopper how much, for which units, why, and
    // which code stopped working; no internal payment id
    let refunded = holdfast::staff::refunds::refund_order(
        &app.db.pool,
        &holdfast::staff::refunds::RefundRequest {
            order_id: order.id,
            units: vec![("harbour-lights-vip".into(), 1)],
            reason: "The balcony is closed for repairs".into(),
            restock: true,
            override_redeemed: false,
            by: "grace@holdfast.test".into(),
            staff: None,
            key: None,
        },
    )
    .await
    .unwrap();
    assert!(matches!(
        refunded,
        holdfast::staff::refunds::RefundOutcome::Queued { .. }
    ));
    send_all(&app, &mailer(&app, &smtp, berlin())).await;
    let messages = app.sandbox.mail.messages();
    assert_eq!(messages.len(), 2);
    let notice = parsed(&messages[1]);
    assert!(
        notice
            .subject()
            .unwrap()
            .starts_with("Refund issued: €90.00"),
        "{:?}",
        notice.subject()
    );
    let text = notice.body_text(0).unwrap();
    assert!(text.contains("The balcony is closed for repairs"), "{text}");
    assert!(text.contains("for Harbour Lights — VIP × 1."), "{text}");
    let stopped: String = sqlx::query_scalar(
        "select code from order_items where order_id = $1 and state = 'refunded'",
    )
    .bind(order.id)
    .fetch_one(&app.db.pool)
    .await
    .unwrap();
    assert!(
        text.contains(&format!("These codes no longer admit anyone: {stopped}")),
        "{text}"
    );
    assert!(!text.contains("pi_"), "no internal payment id: {text}");

    // the sandbox's mail page lists both and shows the order link
    let inbox = http_client()
        .get(format!("{}/mail", app.sandbox.base))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(
        inbox.contains("Your order is paid") && inbox.contains("Refund issued"),
        "{inbox}"
    );
    let first = http_client()
        .get(format!("{}/mail/0", app.sandbox.base))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(first.contains(&format!("href=\"{link}\"")), "{first}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn money_that_cannot_be_sold_goes_back_with_a_mail_saying_why() {
    let app = spawn_app().await;
    app.load_demo().await;
    let smtp = app.sandbox.smtp();
    let order = paying(&app, "late-1", &[("wild-honey", 2)]).await;
    checkout::release_order(&app.db.pool, order.id, expired_by_provider())
        .await
        .unwrap();
    // the money arrives after the reservation ended, reported twice
    let late = report(&app.db, order.id, "pi_late_1", Source::Webhook).await;
    for _ in 0..2 {
        assert!(matches!(
            checkout::confirm_payment(&app.db.pool, &late)
                .await
                .unwrap(),
            Fulfilment::RefundQueued { .. }
        ));
    }
    send_all(&app, &mailer(&app, &smtp, holdfast::clock::ShopZone::UTC)).await;
    let messages = app.sandbox.mail.messages();
    assert_eq!(messages.len(), 1, "one notice for one payment");
    let notice = parsed(&messages[0]);
    assert_eq!(notice.subject(), Some("Refund issued: €28.00"));
    let text = notice.body_text(0).unwrap();
    assert!(text.contains("pi_late_1"), "{text}");
    assert!(
        text.contains("arrived after your order had ended"),
        "{text}"
    );
    assert!(text.contains(&format!("/orders/{}", order.token)), "{text}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_confirmation_is_in_the_shops_name_and_colour_with_its_logo_inside() {
    let app = spawn_app().await;
    app.load_demo().await;
    sqlx::query("update storefront set name = 'Harbour Market', accent = '#7a1f5c'")
        .execute(&app.db.pool)
        .await
        .unwrap();
    let logo = {
        let picture = image::RgbImage::from_pixel(300, 100, image::Rgb([122, 31, 92]));
        let mut out = std::io::Cursor::new(Vec::new());
        image::DynamicImage::ImageRgb8(picture)
            .write_to(&mut out, image::ImageFormat::Png)
            .unwrap();
        holdfast::images::check(&out.into_inner()).unwrap()
    };
    let by = holdfast::audit::Actor::Operator("test");
    let target = holdfast::images::Target::Logo;
    assert!(
        holdfast::images::put_up(&app.db.pool, by, target, Some(&logo))
            .await
            .unwrap()
    );
    paid(&app.db, "mail-shop", &[("harbour-lights-vip", 1)]).await;
    send_all(&app, &mailer(&app, &app.sandbox.smtp(), berlin())).await;
    let messages = app.sandbox.mail.messages();
    assert_eq!(messages.len(), 1);
    let message = parsed(&messages[0]);
    assert_eq!(
        message.from().unwrap().first().unwrap().name(),
        Some("Harbour Market")
    );
    let html = message.body_html(0).unwrap().into_owned();
    assert!(html.contains(">Harbour Market</span>"), "{html}");
    assert!(html.contains("background:#7a1f5c;"), "{html}");
    assert!(html.contains("name=\"viewport\""), "{html}");
    // the logo is inside the mail, never fetched from elsewhere
    assert!(html.contains("<img src=\"cid:logo\""), "{html}");
    assert!(!html.contains("src=\"http"), "no remote images: {html}");
    let inline_logo = message
        .attachments()
        .find(|part| part.content_id() == Some("logo"))
        .expect("the logo, inline");
    let decoded = image::load_from_memory(inline_logo.contents()).unwrap();
    assert_eq!((decoded.width(), decoded.height()), (160, 53));
    assert!(message.body_text(0).unwrap().contains("Thank you"));
}

/// The zone the owner chose on Settings is the mail's too, whatever the
/// server was started with (issue 46).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_confirmation_tells_the_time_in_the_zone_the_owner_chose() {
    let app = spawn_app().await;
    let file: holdfast::catalogue::CatalogueFile = serde_json::from_value(serde_json::json!({
        "currency": "inr",
        "products": [{
            "id": "late-show", "collection": "late-show", "kind": "ticket",
            "name": "The late show", "price_minor": 90000, "capacity": 10,
            "days_ahead": 10, "time": "19:30"
        }]
    }))
    .unwrap();
    file.load_in(&app.db.pool, holdfast::clock::ShopZone::UTC)
        .await
        .unwrap();
    sqlx::query("update storefront set time_zone = 'Asia/Kolkata'")
        .execute(&app.db.pool)
        .await
        .unwrap();
    paid(&app.db, "late-1", &[("late-show", 1)]).await;
    let smtp = app.sandbox.smtp();
    send_all(&app, &mailer(&app, &smtp, holdfast::clock::ShopZone::UTC)).await;
    let messages = app.sandbox.mail.messages();
    assert_eq!(messages.len(), 1);
    let text = parsed(&messages[0]).body_text(0).unwrap().into_owned();
    assert!(
        text.contains("01:00 IST") && !text.contains("UTC"),
        "{text}"
    );
}

/// A table's confirmation says how and until when to cancel it, with the
/// link (issue 46: the mail did not say how to cancel a table).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tables_confirmation_says_how_to_cancel_it() {
    let app = spawn_app().await;
    let mut spec = crate::tables::room(40, vec![crate::tables::table("T1", 1, 4, 100)], vec![]);
    spec.periods[0].deposit_minor = 1000;
    crate::tables::set_up(&app.db, &spec).await;
    let order = crate::tables::paid_booking(&app.db, "cancel-mail", 2, 19, 30).await;
    let smtp = app.sandbox.smtp();
    send_all(&app, &mailer(&app, &smtp, holdfast::clock::ShopZone::UTC)).await;
    let messages = app.sandbox.mail.messages();
    assert_eq!(messages.len(), 1);
    let message = parsed(&messages[0]);
    let text = message.body_text(0).unwrap().into_owned();
    let html = message.body_html(0).unwrap().into_owned();
    let link = format!("{}/orders/{}/cancel", app.address, order.token);
    assert!(
        text.contains("You can cancel until") && text.contains("deposit of €20.00"),
        "{text}"
    );
    assert!(
        text.contains(&format!("To cancel your table: {link}")),
        "{text}"
    );
    assert!(html.contains(&format!("href=\"{link}\"")), "{html}");
}
