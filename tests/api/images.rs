//! Images in the admin and the shop (issue 33), over HTTP against the real
//! app and PostgreSQL: an owner uploads a PNG for an event, a JPEG for its
//! tier and a logo; the catalogue, the order page and the header show them
//! at addresses named by their content, served smaller with
//! `Cache-Control: public, max-age=31536000, immutable`. A text file named
//! `.png`, a file over the size limit and images too large in pixels are
//! refused beside the field with words, and nothing is stored.

use std::io::Cursor;

use reqwest::StatusCode;
use sha2::{Digest, Sha256};

use holdfast_testkit::*;

const EVENT: &str = "harbour-lights";
const TIER: &str = "harbour-lights-general";
const IMMUTABLE: &str = "public, max-age=31536000, immutable";

fn png(width: u32, height: u32) -> Vec<u8> {
    let picture = image::RgbImage::from_pixel(width, height, image::Rgb([20, 90, 160]));
    let mut out = Cursor::new(Vec::new());
    image::DynamicImage::ImageRgb8(picture)
        .write_to(&mut out, image::ImageFormat::Png)
        .unwrap();
    out.into_inner()
}

fn jpeg(width: u32, height: u32) -> Vec<u8> {
    let picture = image::RgbImage::from_fn(width, height, |x, y| {
        image::Rgb([(x % 256) as u8, (y % 256) as u8, 128])
    });
    let mut out = Cursor::new(Vec::new());
    image::DynamicImage::ImageRgb8(picture)
        .write_to(&mut out, image::ImageFormat::Jpeg)
        .unwrap();
    out.into_inner()
}

/// The address an image is served at: its content's hash.
fn id_of(bytes: &[u8]) -> String {
    hex::encode(&Sha256::digest(bytes)[..16])
}

/// A browser's upload form: the CSRF token, where to come back, the file
/// under a name and a type of the sender's choosing.
async fn upload(
    app: &TestApp,
    staff: &reqwest::Client,
    path: &str,
    csrf: Option<&str>,
    back: &str,
    file_name: &str,
    bytes: &[u8],
) -> reqwest::Response {
    let boundary = "----holdfast-test-7d1f";
    let mut body = Vec::new();
    let mut text = |name: &str, value: &str| {
        body.extend_from_slice(
            format!(
                "--{boundary}\r\nContent-Disposition: form-data; name=\"{name}\"\r\n\r\n{value}\r\n"
            )
            .as_bytes(),
        )
    };
    if let Some(csrf) = csrf {
        text("csrf", csrf);
    }
    text("back", back);
    body.extend_from_slice(
        format!(
            "--{boundary}\r\nContent-Disposition: form-data; name=\"image\"; \
             filename=\"{file_name}\"\r\nContent-Type: image/png\r\n\r\n"
        )
        .as_bytes(),
    );
    body.extend_from_slice(bytes);
    body.extend_from_slice(format!("\r\n--{boundary}--\r\n").as_bytes());
    staff
        .post(format!("{}{path}", app.address))
        .header(
            "content-type",
            format!("multipart/form-data; boundary={boundary}"),
        )
        .body(body)
        .send()
        .await
        .unwrap()
}

/// How many images and copies are stored, and what the event, the tier
/// and the logo show.
async fn stored(app: &TestApp) -> (i64, i64, Option<String>, Option<String>, Option<String>) {
    let pool = &app.db.pool;
    let images: i64 = sqlx::query_scalar("select count(*) from images")
        .fetch_one(pool)
        .await
        .unwrap();
    let variants: i64 = sqlx::query_scalar("select count(*) from image_variants")
        .fetch_one(pool)
        .await
        .unwrap();
    let event = sqlx::query_scalar("select image_id from collections where id = $1")
        .bind(EVENT)
        .fetch_one(pool)
        .await
        .unwrap();
    let tier = sqlx::query_scalar("select image_id from products where id = $1")
        .bind(TIER)
        .fetch_one(pool)
        .await
        .unwrap();
    let logo = sqlx::query_scalar("select logo_id from storefront")
        .fetch_one(pool)
        .await
        .unwrap();
    (images, variants, event, tier, logo)
}

/// An image as served: its type, its cache header, its ETag, its size.
async fn served(app: &TestApp, src: &str) -> (String, String, String, (u32, u32)) {
    let response = app
        .client
        .get(format!("{}{src}", app.address))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), StatusCode::OK, "GET {src}");
    let header = |name: &str| {
        response
            .headers()
            .get(name)
            .map(|v| v.to_str().unwrap().to_owned())
            .unwrap_or_default()
    };
    let (kind, cache, etag) = (
        header("content-type"),
        header("cache-control"),
        header("etag"),
    );
    let bytes = response.bytes().await.unwrap();
    let decoded = image::load_from_memory(&bytes).unwrap();
    (kind, cache, etag, (decoded.width(), decoded.height()))
}

async fn owner_with_event(app: &TestApp) -> (reqwest::Client, String) {
    app.add_staff().await;
    let (staff, csrf) = app.staff_browser().await;
    let event = app
        .admin_post(
            &staff,
            "/admin/catalogue/events",
            &[
                ("csrf", csrf.as_str()),
                ("title", "Harbour Lights"),
                ("lede", "Lanterns on the water."),
                ("id", EVENT),
                ("starts_at", "2030-06-20 20:00"),
                ("doors_at", "19:00"),
                ("venue", "Pier 4"),
            ],
        )
        .await;
    assert_eq!(event.status(), StatusCode::SEE_OTHER);
    let tier = app
        .admin_post(
            &staff,
            &format!("/admin/catalogue/events/{EVENT}/tiers"),
            &[
                ("csrf", csrf.as_str()),
                ("name", "General"),
                ("description", "Standing."),
                ("price", "35"),
                ("capacity", "100"),
                ("max_per_order", "10"),
                ("sale_opens_at", ""),
                ("sale_closes_at", ""),
            ],
        )
        .await;
    assert_eq!(tier.status(), StatusCode::SEE_OTHER);
    // a new event starts as a draft (drafts::): published, the shop shows it
    let published = app
        .admin_post(
            &staff,
            &format!("/admin/catalogue/collections/{EVENT}/publish"),
            &[("csrf", csrf.as_str())],
        )
        .await;
    assert_eq!(published.status(), StatusCode::SEE_OTHER);
    (staff, csrf)
}

#[tokio::test]
async fn good_images_are_shown_smaller_at_addresses_that_never_change() {
    let app = spawn_app_with(TestDb::new().await).await;
    let (staff, csrf) = owner_with_event(&app).await;
    let wide = png(1200, 600);
    let square = jpeg(800, 800);
    let logo = png(300, 100);

    let back = format!("/admin/catalogue/events/{EVENT}");
    let answer = upload(
        &app,
        &staff,
        &format!("/admin/catalogue/collections/{EVENT}/image"),
        Some(&csrf),
        &back,
        "lanterns.png",
        &wide,
    )
    .await;
    assert_eq!(answer.status(), StatusCode::SEE_OTHER);
    assert_eq!(
        location(&answer),
        format!("{back}?notice=image_saved#image")
    );
    let answer = upload(
        &app,
        &staff,
        &format!("/admin/catalogue/products/{TIER}/image"),
        Some(&csrf),
        &format!("{back}/tiers/{TIER}"),
        "IMG_0001.JPG",
        &square,
    )
    .await;
    assert_eq!(answer.status(), StatusCode::SEE_OTHER);
    let answer = upload(
        &app,
        &staff,
        "/admin/settings/logo",
        Some(&csrf),
        "/admin/settings#image",
        "logo.png",
        &logo,
    )
    .await;
    assert_eq!(answer.status(), StatusCode::SEE_OTHER);
    assert_eq!(
        location(&answer),
        "/admin/settings?notice=image_saved#image"
    );

    // three images, each at the widths not wider than itself: the wide
    // one at 160, 480 and 960, the square at 160, 480 and 800, the logo at
    // 160 and 300
    let (images, variants, event, tier, shop_logo) = stored(&app).await;
    assert_eq!((images, variants), (3, 8));
    assert_eq!(event, Some(id_of(&wide)));
    assert_eq!(tier, Some(id_of(&square)));
    assert_eq!(shop_logo, Some(id_of(&logo)));

    // the admin's pages show them
    let page = app.admin_page(&staff, &back).await;
    assert!(page.contains(&format!("src=\"/images/{}/160\"", id_of(&wide))));

    // the catalogue shows the event's and the tier's at a card's width,
    // and the header the logo
    app.settled().await;
    let catalogue = read_page(&app.client, &format!("{}/", app.address)).await;
    let event_src = format!("/images/{}/480", id_of(&wide));
    let tier_src = format!("/images/{}/480", id_of(&square));
    let logo_src = format!("/images/{}/160", id_of(&logo));
    for src in [&event_src, &tier_src, &logo_src] {
        assert!(
            catalogue.contains(&format!("src=\"{src}\"")),
            "{src} not on the catalogue"
        );
    }
    let (kind, cache, etag, size) = served(&app, &event_src).await;
    assert_eq!(
        (kind.as_str(), cache.as_str(), size),
        ("image/png", IMMUTABLE, (480, 240))
    );
    assert_eq!(etag, format!("\"{}-480\"", id_of(&wide)));
    let (kind, cache, _, size) = served(&app, &tier_src).await;
    assert_eq!(
        (kind.as_str(), cache.as_str(), size),
        ("image/jpeg", IMMUTABLE, (480, 480))
    );
    // a width between two copies gets the narrower; one wider than the
    // image gets the image as it is
    assert_eq!(
        served(&app, &format!("/images/{}/400", id_of(&wide)))
            .await
            .3,
        (160, 80)
    );
    assert_eq!(
        served(&app, &format!("/images/{}/2000", id_of(&logo)))
            .await
            .3,
        (300, 100)
    );
    for missing in [
        format!("/images/{}/480", "0".repeat(32)),
        format!("/images/{}/0", id_of(&wide)),
        "/images/not-an-id/480".to_owned(),
    ] {
        let answer = app
            .client
            .get(format!("{}{missing}", app.address))
            .send()
            .await
            .unwrap();
        assert_eq!(answer.status(), StatusCode::NOT_FOUND, "{missing}");
    }

    // the order page shows the tier's picture beside its line
    let paid = app.buy(&browser(), &Purchase::of(TIER, 1)).await;
    let order = read_page(&app.client, &format!("{}{}", app.address, paid.order_url())).await;
    assert!(
        order.contains(&format!("src=\"/images/{}/160\"", id_of(&square))),
        "{order}"
    );
}

#[tokio::test]
async fn bad_uploads_are_refused_beside_the_field_and_nothing_is_stored() {
    let app = spawn_app_with(TestDb::new().await).await;
    let (staff, csrf) = owner_with_event(&app).await;
    let path = format!("/admin/catalogue/collections/{EVENT}/image");
    let back = format!("/admin/catalogue/events/{EVENT}");
    let nothing = stored(&app).await;
    assert_eq!(nothing, (0, 0, None, None, None));

    let mut oversized = png(64, 64);
    oversized.resize(5 * 1024 * 1024 + 1, 0);
    let cases: [(&str, Vec<u8>, &str); 5] = [
        (
            "photo.png",
            b"Not a picture at all, whatever my name says.\n".to_vec(),
            "That file is not a PNG or JPEG image (whatever its name says).",
        ),
        (
            "big.png",
            oversized,
            "That file is larger than 5 MB. Make it smaller and try again.",
        ),
        (
            "panorama.png",
            png(6001, 10),
            "That image is too large in pixels: at most 6000 pixels a side and 24 megapixels in all.",
        ),
        (
            "bomb.png",
            png(5000, 5000),
            "That image is too large in pixels: at most 6000 pixels a side and 24 megapixels in all.",
        ),
        ("", Vec::new(), "Choose an image file to upload."),
    ];
    for (name, bytes, words) in cases {
        let answer = upload(&app, &staff, &path, Some(&csrf), &back, name, &bytes).await;
        assert_eq!(answer.status(), StatusCode::BAD_REQUEST, "{name}");
        let page = answer.text().await.unwrap();
        assert!(page.contains(words), "{name}: {page}");
        assert!(
            page.contains("aria-invalid=\"true\"") && page.contains("id=\"image-error\""),
            "{name}: the refusal is beside the field"
        );
        assert!(page.contains(&format!("value=\"{back}\"")), "{name}");
        assert_eq!(stored(&app).await, nothing, "{name}: nothing stored");
    }

    // without the session's token: refused before anything is read
    let answer = upload(&app, &staff, &path, None, &back, "a.png", &png(10, 10)).await;
    assert_eq!(answer.status(), StatusCode::FORBIDDEN);
    // to something that is not there
    let answer = upload(
        &app,
        &staff,
        "/admin/catalogue/products/no-such-thing/image",
        Some(&csrf),
        &back,
        "a.png",
        &png(10, 10),
    )
    .await;
    assert_eq!(answer.status(), StatusCode::NOT_FOUND);
    assert_eq!(stored(&app).await, nothing, "nothing stored");

    // a page elsewhere is never gone back to
    let answer = upload(
        &app,
        &staff,
        &path,
        Some(&csrf),
        "https://elsewhere.example/admin/",
        "a.png",
        &png(10, 10),
    )
    .await;
    assert_eq!(answer.status(), StatusCode::SEE_OTHER);
    assert_eq!(location(&answer), "/admin?notice=image_saved#image");
}
