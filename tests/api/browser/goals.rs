//! Issue 33's Goals in a real browser, at a phone's size (390×844) and a
//! desk's (1280×900): no sideways scroll, axe-core WCAG 2.1 A/AA finds
//! nothing, and the event's name, date and venue are where the shopper
//! reads them. Each page is kept whole as
//! `target/screenshots/after/<page>-<phone|desk>.png` for the closing note
//! (the "before" ones are in `target/screenshots/before/`).

use mail_parser::{MessageParser, MimeHeaders};

use super::*;
use crate::what_it_is_for::winter_jazz;
use holdfast_testkit::clock::berlin;

/// The sizes every page is looked at.
const SIZES: [(u32, u32, &str); 2] = [(390, 844, "phone"), (1280, 900, "desk")];

impl Browser {
    /// The page at this width: it must not scroll sideways and axe-core
    /// must find nothing; kept whole as `target/screenshots/after/<name>.png`.
    async fn keep_after(&self, driver: &Driver, name: &str, width: u32, height: u32) {
        let fits = self
            .client
            .execute(
                "return document.documentElement.scrollWidth <= window.innerWidth;",
                vec![],
            )
            .await
            .unwrap();
        assert_eq!(fits, serde_json::json!(true), "{name} scrolls sideways");
        let violations = self.axe_violations().await;
        assert!(
            violations.is_empty(),
            "{name}: WCAG 2.1 A/AA: {violations:#?}"
        );
        let tall = self
            .client
            .execute("return document.documentElement.scrollHeight;", vec![])
            .await
            .unwrap()
            .as_u64()
            .unwrap_or(u64::from(height))
            .clamp(u64::from(height), 5000) as u32;
        // the whole page, below the fold too (Chromium's own capture)
        let session = self.client.session_id().await.unwrap().unwrap();
        let shot = self
            .client
            .execute(
                "return [window.innerWidth, document.documentElement.scrollHeight];",
                vec![],
            )
            .await
            .unwrap();
        let page_width = shot[0].as_u64().unwrap_or(u64::from(width));
        let captured: serde_json::Value = http_client()
            .post(format!("{}/session/{session}/goog/cdp/execute", driver.url))
            .json(&serde_json::json!({
                "cmd": "Page.captureScreenshot",
                "params": {
                    "format": "png",
                    "captureBeyondViewport": true,
                    "clip": { "x": 0, "y": 0, "width": page_width, "height": tall, "scale": 1 },
                },
            }))
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        use base64::Engine;
        let png = base64::engine::general_purpose::STANDARD
            .decode(captured["value"]["data"].as_str().expect("a screenshot"))
            .unwrap();
        let folder = target_screenshots().join("after");
        std::fs::create_dir_all(&folder).unwrap();
        std::fs::write(folder.join(format!("{name}.png")), png).unwrap();
    }
}

/// A PNG: a band of one colour on white, as a logo or a poster might be.
fn png(width: u32, height: u32, rgb: [u8; 3]) -> Vec<u8> {
    let picture = image::RgbImage::from_fn(width, height, |x, y| {
        let inside = x > width / 6 && x < width * 5 / 6 && y > height / 4 && y < height * 3 / 4;
        image::Rgb(if inside { rgb } else { [250, 248, 240] })
    });
    let mut out = std::io::Cursor::new(Vec::new());
    image::DynamicImage::ImageRgb8(picture)
        .write_to(&mut out, image::ImageFormat::Png)
        .unwrap();
    out.into_inner()
}

/// The shop named and coloured by its owner, with a logo.
async fn the_owners_shop(app: &TestApp) {
    sqlx::query(
        "update storefront set name = 'Harbour Market', accent = '#7a1f5c', \
                description = 'Concerts and honey on the quay.', \
                contact_email = 'hello@harbour.example'",
    )
    .execute(&app.db.pool)
    .await
    .unwrap();
    let logo = holdfast::images::check(&png(240, 80, [122, 31, 92])).unwrap();
    let by = holdfast::audit::Actor::Operator("goals test");
    let target = holdfast::images::Target::Logo;
    assert!(
        holdfast::images::put_up(&app.db.pool, by, target, Some(&logo))
            .await
            .unwrap()
    );
}

/// The mail the shop's outbox sends (with the mailer the worker has, in
/// `zone`) once at least one has left.
pub(super) async fn mail_sent(
    app: &TestApp,
    zone: holdfast::clock::ShopZone,
) -> Vec<holdfast_sandbox::mail::Received> {
    let mailer = holdfast::worker::mail::Mailer::new(
        &app.sandbox.smtp(),
        "Shop <shop@holdfast.test>",
        zone,
        &app.address,
    )
    .unwrap();
    let outbox =
        holdfast::worker::outbox::Outbox::new(app.db.pool.clone(), app.sandbox.providers())
            .with_mailer(Some(mailer));
    for _ in 0..50 {
        outbox.drain().await.unwrap();
        if !app.sandbox.mail.messages().is_empty() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    app.sandbox.mail.messages()
}

/// The mail's HTML part as a page a browser opens by itself: its inline
/// images (`cid:`) written in as `data:` addresses, as a mail reader shows
/// them.
pub(super) fn mail_as_page(raw: &[u8]) -> String {
    use base64::Engine;
    let message = MessageParser::default().parse(raw).unwrap();
    let mut html = message.body_html(0).unwrap().into_owned();
    for part in message.attachments() {
        let (Some(id), Some(kind)) = (part.content_id(), part.content_type()) else {
            continue;
        };
        let data = format!(
            "data:{}/{};base64,{}",
            kind.ctype(),
            kind.subtype().unwrap_or(""),
            base64::engine::general_purpose::STANDARD.encode(part.contents())
        );
        html = html.replace(&format!("cid:{id}"), &data);
    }
    assert!(!html.contains("cid:"), "every inline image is in the mail");
    html
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_order_mail_reads_on_a_phone_and_a_desk_in_the_shops_name() {
    let _turn = turn().lock().await;
    ensure_installed();
    let app = spawn_app_shaped(TestDb::new().await, |_, shop| shop.default_zone = berlin()).await;
    winter_jazz().load_in(&app.db.pool, berlin()).await.unwrap();
    the_owners_shop(&app).await;
    app.settled().await;
    app.buy(&browser(), &Purchase::of("winter-jazz-general", 2))
        .await;
    let messages = mail_sent(&app, berlin()).await;
    assert_eq!(messages.len(), 1);
    let page = target_screenshots().join("after").join("mail.html");
    std::fs::create_dir_all(page.parent().unwrap()).unwrap();
    std::fs::write(&page, mail_as_page(&messages[0].raw)).unwrap();

    let driver = start_driver().await;
    let reader = Browser::open(&driver, shots_for("goals-mail")).await;
    for (width, height, size) in SIZES {
        reader.client.set_window_size(width, height).await.unwrap();
        reader.go(&format!("file://{}", page.display())).await;
        let text = reader.body().await;
        for said in [
            "Harbour Market",
            "Winter Jazz — General",
            "Monday 20 December, 19:30 CET",
            "The Pier, Harbour Road 1",
            "Your order, any time",
        ] {
            assert!(text.contains(said), "the mail says {said}: {text}");
        }
        // in the shop's colour, the QR codes whole on a phone
        assert_eq!(
            reader
                .style("a[href*='/orders/']", "background-color")
                .await,
            "rgb(122, 31, 92)"
        );
        let qr_width = reader
            .client
            .execute(
                "return [...document.querySelectorAll('img[alt^=\"QR code\"]')]\
                 .map(i => i.naturalWidth > 0 && i.getBoundingClientRect().right <= window.innerWidth);",
                vec![],
            )
            .await
            .unwrap();
        assert_eq!(qr_width, serde_json::json!([true, true]), "{size}");
        reader
            .keep_after(&driver, &format!("mail-{size}"), width, height)
            .await;
    }
    reader.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_catalogue_and_the_order_page_show_the_owners_pictures_on_a_phone_and_a_desk() {
    let (app, driver, _turn) = shop_and_driver().await;
    the_owners_shop(&app).await;
    let by = holdfast::audit::Actor::Operator("goals test");
    for (target, colour) in [
        (
            holdfast::images::Target::Collection("harbour-lights"),
            [20, 90, 160],
        ),
        (
            holdfast::images::Target::Product("harbour-lights-vip"),
            [200, 120, 30],
        ),
    ] {
        let picture = holdfast::images::check(&png(1200, 675, colour)).unwrap();
        assert!(
            holdfast::images::put_up(&app.db.pool, by, target, Some(&picture))
                .await
                .unwrap()
        );
    }
    app.settled().await;
    let paid = app
        .buy(&browser(), &Purchase::of("harbour-lights-vip", 1))
        .await;
    let shopper = Browser::open(&driver, shots_for("goals-pictures")).await;
    // every picture of the page loaded, none wider than the window
    let pictures = |css: &'static str| {
        let client = shopper.client.clone();
        async move {
            // a picture below the fold loads when scrolled to: load them now
            client
                .execute(
                    &format!(
                        "document.querySelectorAll('{css}').forEach(i => i.loading = 'eager');"
                    ),
                    vec![],
                )
                .await
                .unwrap();
            tokio::time::sleep(Duration::from_millis(500)).await;
            client
                .execute(
                    &format!(
                        "return [...document.querySelectorAll('{css}')].map(i => i.complete \
                         && i.naturalWidth > 0 && i.getBoundingClientRect().right <= window.innerWidth);"
                    ),
                    vec![],
                )
                .await
                .unwrap()
        }
    };
    for (width, height, size) in SIZES {
        shopper.client.set_window_size(width, height).await.unwrap();
        shopper.go(&format!("{}/", app.address)).await;
        assert_eq!(pictures("header img.logo").await, serde_json::json!([true]));
        assert_eq!(
            pictures("#harbour-lights img.picture").await,
            serde_json::json!([true, true]),
            "the event's and the VIP tier's"
        );
        shopper
            .keep_after(&driver, &format!("catalogue-{size}"), width, height)
            .await;
        shopper
            .go(&format!("{}{}", app.address, paid.order_url()))
            .await;
        assert_eq!(
            pictures("img.line-picture").await,
            serde_json::json!([true])
        );
        assert!(shopper.body().await.contains("Harbour Lights"));
        shopper
            .keep_after(&driver, &format!("order-{size}"), width, height)
            .await;
    }
    shopper.close().await;
}
