//! Draft and published: a new event (and its tiers), schedule or stock
//! item starts as a draft, which the shop's pages, its basket and
//! checkout, and the JSON API never show nor sell; staff preview it behind
//! the admin's guard and publish it; going back to draft is refused once
//! anything of it was ordered.

use holdfast::staff::api_keys::Scope;
use holdfast_testkit::*;
use reqwest::StatusCode;
use serde_json::Value;

use crate::api_v1::key_with;

const EVENT: &str = "quay-night";
const TIER: &str = "quay-night-general";
const JAR: &str = "sea-salt";

async fn post(
    app: &TestApp,
    staff: &reqwest::Client,
    csrf: &str,
    path: &str,
    fields: &[(&str, &str)],
) -> reqwest::Response {
    let mut form = vec![("csrf", csrf)];
    form.extend_from_slice(fields);
    app.admin_post(staff, path, &form).await
}

async fn shop_status(app: &TestApp, path: &str) -> StatusCode {
    http_client()
        .get(format!("{}{path}", app.address))
        .send()
        .await
        .unwrap()
        .status()
}

/// The product ids the JSON API lists.
async fn api_products(app: &TestApp, token: &str) -> Vec<String> {
    let catalogue: Value = http_client()
        .get(format!("{}/api/v1/catalogue", app.address))
        .bearer_auth(token)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    catalogue["products"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["id"].as_str().unwrap().to_owned())
        .collect()
}

/// A shopper's attempt to buy one of `product`: the basket's answer.
async fn add_to_basket(app: &TestApp, product: &str) -> StatusCode {
    browser()
        .post(format!("{}/basket/add", app.address))
        .form(&[("product_id", product), ("qty", "1")])
        .send()
        .await
        .unwrap()
        .status()
}

/// A checkout through the API naming `product`: its status.
async fn api_checkout(app: &TestApp, token: &str, product: &str) -> u16 {
    http_client()
        .post(format!("{}/api/v1/checkouts", app.address))
        .bearer_auth(token)
        .header(
            "Idempotency-Key",
            format!("draft-{product}-{}", uuid::Uuid::new_v4()),
        )
        .json(&serde_json::json!({
            "lines": [{ "product_id": product, "qty": 1 }],
            "name": "Ada",
            "email": "ada@example.com"
        }))
        .send()
        .await
        .unwrap()
        .status()
        .as_u16()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_draft_is_invisible_and_unsellable_until_published_and_stays_once_ordered() {
    let app = spawn_app().await;
    app.load_demo().await;
    app.add_staff().await;
    let token = key_with(&app, &[Scope::ReadCatalogue, Scope::StartCheckouts]).await;
    let (staff, csrf) = app.staff_browser().await;

    // a new event with a tier, and a new stock item on the demo's shelf
    let made = post(
        &app,
        &staff,
        &csrf,
        "/admin/catalogue/events",
        &[
            ("title", "Quay night"),
            ("id", EVENT),
            ("starts_at", "2030-06-20 20:00"),
        ],
    )
    .await;
    assert_eq!(made.status(), StatusCode::SEE_OTHER);
    let made = post(
        &app,
        &staff,
        &csrf,
        &format!("/admin/catalogue/events/{EVENT}/tiers"),
        &[
            ("name", "General"),
            ("price", "20"),
            ("capacity", "50"),
            ("max_per_order", "4"),
        ],
    )
    .await;
    assert_eq!(made.status(), StatusCode::SEE_OTHER);
    let made = post(
        &app,
        &staff,
        &csrf,
        "/admin/catalogue/stock",
        &[
            ("name", "Sea salt"),
            ("id", JAR),
            ("shelf", "Pantry"),
            ("price", "6"),
            ("capacity", "30"),
            ("max_per_order", "4"),
        ],
    )
    .await;
    assert_eq!(
        made.status(),
        StatusCode::SEE_OTHER,
        "{}",
        made.text().await.unwrap()
    );
    app.settled().await;

    // drafts: the admin says so; the shop, the basket, the checkout and
    // the API neither show nor sell them
    let page = app
        .admin_page(&staff, &format!("/admin/catalogue/events/{EVENT}"))
        .await;
    assert!(page.contains("Not in the shop yet"), "{page}");
    assert!(
        page.contains(&format!("href=\"/admin/catalogue/preview/{EVENT}\"")),
        "{page}"
    );
    assert!(!page.contains("id=\"view-in-shop\""), "{page}");
    let list = app.admin_page(&staff, "/admin/catalogue").await;
    assert!(list.contains("draft: not in the shop"), "{list}");
    assert_eq!(
        shop_status(&app, &format!("/c/{EVENT}")).await,
        StatusCode::NOT_FOUND
    );
    let home = read_page(&browser(), &format!("{}/", app.address)).await;
    assert!(
        !home.contains("Quay night") && !home.contains("Sea salt"),
        "{home}"
    );
    let pantry = read_page(&browser(), &format!("{}/c/pantry", app.address)).await;
    assert!(!pantry.contains("Sea salt"), "{pantry}");
    for product in [TIER, JAR] {
        assert_ne!(
            add_to_basket(&app, product).await,
            StatusCode::SEE_OTHER,
            "{product}"
        );
        assert!(
            !api_products(&app, &token)
                .await
                .contains(&product.to_owned())
        );
        let refused = api_checkout(&app, &token, product).await;
        assert!((400..500).contains(&refused), "{product}: {refused}");
    }
    let orders: i64 = sqlx::query_scalar("select count(*) from orders")
        .fetch_one(&app.db.pool)
        .await
        .unwrap();
    assert_eq!(orders, 0, "no order was started for a draft");

    // the preview: the shop's page with the draft, for staff only
    let preview = app
        .admin_page(&staff, &format!("/admin/catalogue/preview/{EVENT}"))
        .await;
    assert!(
        preview.contains("Quay night") && preview.contains("General"),
        "{preview}"
    );
    assert!(
        preview.contains("id=\"preview-note\""),
        "said to be a preview"
    );
    assert!(
        preview.contains(&format!(
            "href=\"/admin/catalogue/events/{EVENT}\">Back to editing"
        )),
        "{preview}"
    );
    let anonymous = http_client()
        .get(format!("{}/admin/catalogue/preview/{EVENT}", app.address))
        .send()
        .await
        .unwrap();
    assert_ne!(anonymous.status(), StatusCode::OK);
    assert!(!anonymous.text().await.unwrap().contains("Quay night"));

    // published: on sale, in the API, "View in shop"
    for (thing, back) in [
        (
            format!("collections/{EVENT}"),
            format!("/admin/catalogue/events/{EVENT}"),
        ),
        (
            format!("products/{JAR}"),
            format!("/admin/catalogue/stock/{JAR}"),
        ),
    ] {
        let done = post(
            &app,
            &staff,
            &csrf,
            &format!("/admin/catalogue/{thing}/publish"),
            &[("back", &back)],
        )
        .await;
        assert_eq!(location(&done), format!("{back}?notice=published"));
    }
    app.settled().await;
    let page = app
        .admin_page(&staff, &format!("/admin/catalogue/events/{EVENT}"))
        .await;
    assert!(page.contains("id=\"view-in-shop\">View in shop"), "{page}");
    assert!(page.contains(&format!("href=\"/c/{EVENT}\"")), "{page}");
    assert_eq!(
        shop_status(&app, &format!("/c/{EVENT}")).await,
        StatusCode::OK
    );
    let listed = api_products(&app, &token).await;
    assert!(
        listed.contains(&TIER.to_owned()) && listed.contains(&JAR.to_owned()),
        "{listed:?}"
    );
    assert_eq!(add_to_basket(&app, JAR).await, StatusCode::SEE_OTHER);

    // back to draft: refused once ordered (said, nothing changed), done
    // while nothing was
    assert_eq!(api_checkout(&app, &token, TIER).await, 201);
    let refused = post(
        &app,
        &staff,
        &csrf,
        &format!("/admin/catalogue/collections/{EVENT}/unpublish"),
        &[],
    )
    .await;
    assert_eq!(
        location(&refused),
        "/admin/catalogue?notice=unpublish_refused&lines=1"
    );
    let page = app.admin_page(&staff, &location(&refused)).await;
    assert!(
        page.contains("Refused: it has been ordered (1 order lines)"),
        "{page}"
    );
    assert_eq!(
        shop_status(&app, &format!("/c/{EVENT}")).await,
        StatusCode::OK
    );
    let back = post(
        &app,
        &staff,
        &csrf,
        &format!("/admin/catalogue/products/{JAR}/unpublish"),
        &[],
    )
    .await;
    assert_eq!(location(&back), "/admin/catalogue?notice=unpublished");
    app.settled().await;
    assert!(!api_products(&app, &token).await.contains(&JAR.to_owned()));
    // a restore or a save never puts a draft on sale
    let active: bool =
        sqlx::query_scalar("update products set active = true where id = $1 returning active")
            .bind(JAR)
            .fetch_one(&app.db.pool)
            .await
            .unwrap();
    assert!(!active, "the database keeps a draft off sale");
}
