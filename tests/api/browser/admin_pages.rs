//! Every page of the admin, from the route table it is built from
//! (`routes::admin::ROUTES`), for each role, on a phone (390×844) and on a
//! desk (1280×900): the page never scrolls sideways (a wide table scrolls
//! inside its own box), axe-core finds nothing against WCAG 2.1 A/AA, and
//! nothing reloads the page on a timer. A page a role may not open is
//! visited too: its refusal must read as well as any page. Screenshots go
//! to `target/screenshots/admin/<role>-<size>-<page>.png`. Bringing back
//! what was archived and reviewing a refund are walked through too.

use super::*;

/// The shop's things the route table's `{…}` segments name: one of each,
/// so every page shows something.
struct Things {
    order: String,
    hold: String,
    endpoint: String,
}

/// A path for a route pattern, its segments filled from [`Things`].
fn concrete(pattern: &str, things: &Things) -> String {
    let path = match pattern {
        "/resources/{id}" => "/resources/wild-honey".to_owned(),
        "/holds/{id}" => format!("/holds/{}", things.hold),
        "/orders/{id}" => format!("/orders/{}", things.order),
        "/catalogue/events/{id}" => "/catalogue/events/harbour-lights".to_owned(),
        "/catalogue/events/{id}/tiers/new" => {
            "/catalogue/events/harbour-lights/tiers/new".to_owned()
        }
        "/catalogue/events/{id}/tiers/{tier}" => {
            "/catalogue/events/harbour-lights/tiers/harbour-lights-general".to_owned()
        }
        "/catalogue/events/{id}/sections/new" => {
            "/catalogue/events/winter-gala/sections/new".to_owned()
        }
        "/catalogue/events/{id}/sections/{section}" => {
            "/catalogue/events/winter-gala/sections/winter-gala-stalls".to_owned()
        }
        "/catalogue/schedules/{id}" => "/catalogue/schedules/bakery".to_owned(),
        "/catalogue/stock/{id}" => "/catalogue/stock/wild-honey".to_owned(),
        "/catalogue/preview/{id}" => "/catalogue/preview/harbour-lights".to_owned(),
        "/webhooks/{id}" => format!("/webhooks/{}", things.endpoint),
        "/dining/{room}" => "/dining/harbour-bistro".to_owned(),
        "/dining/{room}/setup" => "/dining/harbour-bistro/setup".to_owned(),
        other => {
            assert!(!other.contains('{'), "no value for {other}: add one");
            other.to_owned()
        }
    };
    format!("/admin{path}")
}

/// A file name for a page: `catalogue-events-harbour-lights`.
fn page_name(path: &str) -> String {
    let name = path
        .trim_start_matches("/admin")
        .trim_matches('/')
        .replace('/', "-");
    if name.is_empty() {
        "home".to_owned()
    } else {
        name
    }
}

async fn signed_in(driver: &Driver, app: &TestApp, email: &str, password: &str) -> Browser {
    let browser = Browser::open(driver, shots_for(&format!("admin-pages/{email}"))).await;
    browser.go(&format!("{}/admin/login", app.address)).await;
    browser.fill("input[name=email]", email).await;
    browser.fill("input[name=password]", password).await;
    browser.click("#login button[type=submit]").await;
    for _ in 0..200 {
        if !browser.path().await.starts_with("/admin/login") {
            return browser;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("{email} could not sign in");
}

/// Whether the menu's links are on screen.
async fn menu_shown(browser: &Browser) -> bool {
    browser
        .client
        .execute(
            "return document.querySelector('.admin-nav .group-link').checkVisibility();",
            vec![],
        )
        .await
        .unwrap()
        .as_bool()
        .unwrap()
}

/// What is wrong with the page as it is, one line per fault.
async fn faults(browser: &Browser) -> Vec<String> {
    let mut found = Vec::new();
    let measured = browser
        .client
        .execute(
            "const d = document.documentElement; \
             return [d.scrollWidth, d.clientWidth, \
                     document.querySelectorAll('meta[http-equiv=refresh i]').length];",
            vec![],
        )
        .await
        .unwrap();
    let measured: Vec<u64> = measured
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_u64().unwrap_or(0))
        .collect();
    if measured[0] > measured[1] {
        found.push(format!(
            "scrolls sideways: {} px wide in {} px",
            measured[0], measured[1]
        ));
    }
    if measured[2] > 0 {
        found.push("reloads itself on a timer (meta refresh)".to_owned());
    }
    found.extend(browser.axe_violations().await);
    found
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_admin_page_fits_a_phone_and_a_desk_for_every_role() {
    let (app, driver, _turn) = shop_and_driver().await;
    app.add_staff().await;
    app.add_staff_as("box@holdfast.test", Role::BoxOffice).await;
    app.add_staff_as("door@holdfast.test", Role::Door).await;
    let paid = app
        .buy(&browser(), &Purchase::of("harbour-lights-vip", 2))
        .await;
    app.start(&browser(), &Purchase::of("wild-honey", 1)).await;
    let (staff, csrf) = app.staff_browser().await;
    let added = app
        .admin_post(
            &staff,
            "/admin/webhooks",
            &[
                ("csrf", &csrf),
                ("url", "https://93.184.216.34/hook"),
                ("event", "order.paid"),
            ],
        )
        .await;
    assert!(added.status().is_success(), "{}", added.status());
    let things = Things {
        order: paid.started.order_id.to_string(),
        hold: sqlx::query_scalar::<_, uuid::Uuid>(
            "select id from holds where state in ('held', 'awaiting_payment') limit 1",
        )
        .fetch_one(&app.db.pool)
        .await
        .unwrap()
        .to_string(),
        endpoint: sqlx::query_scalar::<_, String>("select id from webhook_endpoints limit 1")
            .fetch_one(&app.db.pool)
            .await
            .unwrap(),
    };
    let folder = target_screenshots().join("admin");
    std::fs::create_dir_all(&folder).unwrap();
    let mut all_faults = Vec::new();
    let mut visited = 0;
    for (role, email, password) in [
        (Role::Owner, STAFF_EMAIL, STAFF_PASSWORD),
        (Role::BoxOffice, "box@holdfast.test", PASSWORD),
        (Role::Door, "door@holdfast.test", PASSWORD),
    ] {
        let browser = signed_in(&driver, &app, email, password).await;
        for (width, height, size) in [(390, 844, "phone"), (1280, 900, "desk")] {
            browser.client.set_window_size(width, height).await.unwrap();
            // the menu: folded on a phone until asked for, open on a desk
            browser
                .go(&format!("{}/admin/two-factor", app.address))
                .await;
            assert_eq!(menu_shown(&browser).await, size == "desk", "{size}");
            if size == "phone" {
                browser.click(".menu-toggle").await;
                assert!(menu_shown(&browser).await);
                let png = browser.client.screenshot().await.unwrap();
                std::fs::write(
                    folder.join(format!("{}-phone-menu.png", role.as_str())),
                    png,
                )
                .unwrap();
            }
            for route in ROUTES {
                if route.verb != Verb::Get || route.path.ends_with(".csv") || route.path == "/" {
                    continue;
                }
                let path = concrete(route.path, &things);
                browser.go(&format!("{}{path}", app.address)).await;
                visited += 1;
                if role.may(route.permission) {
                    let png = browser.client.screenshot().await.unwrap();
                    let name = format!("{}-{size}-{}.png", role.as_str(), page_name(&path));
                    std::fs::write(folder.join(name), png).unwrap();
                }
                for fault in faults(&browser).await {
                    all_faults.push(format!("{} {size} {path}: {fault}", role.as_str()));
                }
            }
        }
        browser.close().await;
    }
    assert!(visited > 150, "only {visited} pages visited");
    assert!(all_faults.is_empty(), "{all_faults:#?}");
    // the admin's own scripts never reload a page on a timer either
    let script = std::fs::read_to_string(workspace_root().join("static/admin.js")).unwrap();
    assert!(!script.contains("reload"), "static/admin.js reloads a page");
}

/// The figures of one of the home page's tiles, as the page shows them now.
async fn tile(browser: &Browser, window: &str, figure: &str) -> String {
    browser
        .client
        .execute(
            "const [window, figure] = arguments; \
             const big = document.querySelector(`[data-window=\"${window}\"] .big`); \
             return big ? (big.getAttribute(figure) || '') : '';",
            vec![window.into(), figure.into()],
        )
        .await
        .unwrap()
        .as_str()
        .unwrap_or_default()
        .to_owned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_home_page_follows_a_sale_without_reloading() {
    let (app, driver, _turn) = shop_and_driver().await;
    app.add_staff().await;
    app.buy(&browser(), &Purchase::of("harbour-lights-vip", 2))
        .await;
    let folder = target_screenshots().join("admin");
    std::fs::create_dir_all(&folder).unwrap();
    let owner = signed_in(&driver, &app, STAFF_EMAIL, STAFF_PASSWORD).await;
    assert_eq!(owner.path().await, "/admin", "owners land on Home");
    for (width, height, size) in [(390, 844, "phone"), (1280, 900, "desk")] {
        owner.client.set_window_size(width, height).await.unwrap();
        owner.go(&format!("{}/admin", app.address)).await;
        let before: i64 = tile(&owner, "today", "data-orders").await.parse().unwrap();
        // a mark a reload would wipe
        owner
            .client
            .execute("window.stayed = true;", vec![])
            .await
            .unwrap();
        // the stream is open before the sale
        tokio::time::sleep(Duration::from_millis(800)).await;
        app.buy(
            &browser(),
            &Purchase::of("harbour-lights-general", 3).by("Live Shopper", "live@example.com"),
        )
        .await;
        let mut after = before;
        for _ in 0..100 {
            after = tile(&owner, "today", "data-orders")
                .await
                .parse()
                .unwrap_or(before);
            if after > before {
                break;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        assert_eq!(after, before + 1, "{size}: the figures followed the sale");
        let stayed = owner
            .client
            .execute("return window.stayed === true;", vec![])
            .await
            .unwrap();
        assert_eq!(
            stayed,
            serde_json::json!(true),
            "{size}: the page was not reloaded"
        );
        assert!(owner.text("#recent").await.contains("Live Shopper"));
        let faults = faults(&owner).await;
        assert!(faults.is_empty(), "{size}: {faults:#?}");
        let height = owner
            .client
            .execute("return document.documentElement.scrollHeight;", vec![])
            .await
            .unwrap()
            .as_u64()
            .unwrap_or(1000)
            .clamp(600, 4000) as u32;
        owner.client.set_window_size(width, height).await.unwrap();
        let png = owner.client.screenshot().await.unwrap();
        std::fs::write(folder.join(format!("home-{size}-whole.png")), png).unwrap();
    }
    // the orders, searched for the shopper, on a phone and a desk
    for (width, height, size) in [(390, 844, "phone"), (1280, 900, "desk")] {
        owner.client.set_window_size(width, height).await.unwrap();
        owner.go(&format!("{}/admin/orders", app.address)).await;
        owner.fill("#order-search input[name=q]", "live shop").await;
        owner.click("#order-search button[type=submit]").await;
        let found = owner.wait_for_text("#found", "2 orders match").await;
        assert!(found.contains("2 orders match"), "{found}");
        assert!(
            owner
                .text("#orders")
                .await
                .contains("3 × Harbour Lights — General admission")
        );
        let faults = faults(&owner).await;
        assert!(faults.is_empty(), "{size}: {faults:#?}");
        let png = owner.client.screenshot().await.unwrap();
        std::fs::write(folder.join(format!("orders-search-{size}.png")), png).unwrap();
    }
    // archiving asks first, naming the thing, with no script needed
    for (width, height, size) in [(390, 844, "phone"), (1280, 900, "desk")] {
        owner.client.set_window_size(width, height).await.unwrap();
        owner
            .go(&format!("{}/admin/catalogue/stock/wild-honey", app.address))
            .await;
        owner.click("#archive-confirm > summary").await;
        let asked = owner.text("#archive-confirm .confirm-box").await;
        assert!(
            asked.contains("Archive Wild heather honey")
                && asked.contains("? It leaves the shop at once"),
            "{asked}"
        );
        let faults = faults(&owner).await;
        assert!(faults.is_empty(), "{size}: {faults:#?}");
        owner
            .client
            .execute(
                "document.querySelector('#archive-confirm').scrollIntoView();",
                vec![],
            )
            .await
            .unwrap();
        let png = owner.client.screenshot().await.unwrap();
        std::fs::write(folder.join(format!("confirm-archive-{size}.png")), png).unwrap();
    }
    let archived: Option<chrono::DateTime<chrono::Utc>> =
        sqlx::query_scalar("select archived_at from products where id = 'wild-honey'")
            .fetch_one(&app.db.pool)
            .await
            .unwrap();
    assert!(archived.is_none(), "asking changed nothing");
    owner.click("#archive button[type=submit]").await;
    owner.wait_for_text("#notice", "Archived").await;
    let archived: Option<chrono::DateTime<chrono::Utc>> =
        sqlx::query_scalar("select archived_at from products where id = 'wild-honey'")
            .fetch_one(&app.db.pool)
            .await
            .unwrap();
    assert!(archived.is_some());
    assert_no_policy_reports(&app).await;
    owner.close().await;
}

/// Saves what the browser shows as `target/screenshots/admin/<name>.png`,
/// the whole page tall (up to 3000 px).
async fn shot_whole(browser: &Browser, width: u32, name: &str) {
    let height = browser
        .client
        .execute("return document.documentElement.scrollHeight;", vec![])
        .await
        .unwrap()
        .as_u64()
        .unwrap_or(900)
        .clamp(600, 3000) as u32;
    browser.client.set_window_size(width, height).await.unwrap();
    let png = browser.client.screenshot().await.unwrap();
    let folder = target_screenshots().join("admin");
    std::fs::create_dir_all(&folder).unwrap();
    std::fs::write(folder.join(format!("{name}.png")), png).unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn what_was_archived_comes_back_and_a_refund_states_its_amount_before_it_is_sent() {
    let (app, driver, _turn) = shop_and_driver().await;
    app.add_staff().await;
    let paid = app
        .buy(
            &browser(),
            &Purchase::of("harbour-lights-vip", 2).by("Ada Lovelace", "ada@example.com"),
        )
        .await;
    let order = paid.started.order_id;
    let (staff, csrf) = app.staff_browser().await;
    for path in [
        "/admin/catalogue/products/wild-honey/archive",
        "/admin/catalogue/collections/bakery/archive",
    ] {
        let answer = app
            .admin_post(&staff, path, &[("csrf", csrf.as_str())])
            .await;
        assert_eq!(answer.status(), reqwest::StatusCode::SEE_OTHER, "{path}");
    }
    let owner = signed_in(&driver, &app, STAFF_EMAIL, STAFF_PASSWORD).await;
    for (width, height, size) in [(390, 844, "phone"), (1280, 900, "desk")] {
        owner.client.set_window_size(width, height).await.unwrap();
        owner
            .go(&format!("{}/admin/catalogue/archived", app.address))
            .await;
        assert!(
            owner
                .text("[data-archived-collection=bakery]")
                .await
                .contains("schedule")
        );
        owner
            .click("[data-archived-product=wild-honey] details.confirm > summary")
            .await;
        let asked = owner
            .text("[data-archived-product=wild-honey] .confirm-box")
            .await;
        assert!(
            asked.contains("Put Wild heather honey, 250 g back in Pantry? Its 40 units left"),
            "{asked}"
        );
        let faults = faults(&owner).await;
        assert!(faults.is_empty(), "{size}: {faults:#?}");
        shot_whole(&owner, width, &format!("archived-{size}")).await;
    }
    owner
        .click("[data-archived-product=wild-honey] button[type=submit]")
        .await;
    owner.wait_for_text("#notice", "Restored").await;
    let archived: Option<chrono::DateTime<chrono::Utc>> =
        sqlx::query_scalar("select archived_at from products where id = 'wild-honey'")
            .fetch_one(&app.db.pool)
            .await
            .unwrap();
    assert!(archived.is_none(), "restored");

    // the refund: the amount live as the numbers change, then reviewed
    let (paid_minor, currency): (i64, String) =
        sqlx::query_as("select amount_minor, currency from orders where id = $1")
            .bind(order)
            .fetch_one(&app.db.pool)
            .await
            .unwrap();
    let money = |minor: i64| holdfast::money::format(minor, &currency);
    for (width, height, size) in [(390, 844, "phone"), (1280, 900, "desk")] {
        owner.client.set_window_size(width, height).await.unwrap();
        owner
            .go(&format!("{}/admin/orders/{order}", app.address))
            .await;
        let said = owner.text("#refund-amount").await;
        assert!(
            said.contains(&format!(
                "The 2 units chosen give back {}",
                money(paid_minor)
            )),
            "{said}"
        );
        owner
            .fill("#refund input[name='units:harbour-lights-vip']", "1")
            .await;
        owner
            .wait_for_text(
                "#refund-amount",
                &format!("The 1 unit chosen gives back {}", money(paid_minor / 2)),
            )
            .await;
        owner
            .fill("#refund input[name=reason]", "Moved to a friend's table")
            .await;
        owner.click("#refund button[value=review]").await;
        let review = owner.wait_for_text("#refund-review", "Refund").await;
        assert!(
            review.contains(&format!(
                "{} of the {} left to refund",
                money(paid_minor / 2),
                money(paid_minor)
            )),
            "{review}"
        );
        assert_eq!(
            owner.text("#refund-send").await,
            format!("Refund {}", money(paid_minor / 2))
        );
        let faults = faults(&owner).await;
        assert!(faults.is_empty(), "{size}: {faults:#?}");
        shot_whole(&owner, width, &format!("refund-review-{size}")).await;
        owner.client.set_window_size(width, height).await.unwrap();
    }
    let refunded: i64 = sqlx::query_scalar("select refunded_minor from orders where id = $1")
        .bind(order)
        .fetch_one(&app.db.pool)
        .await
        .unwrap();
    assert_eq!(refunded, 0, "reviewing refunded nothing");
    owner.click("#refund-send").await;
    owner.wait_for_text("#notice", "Refund queued").await;
    let refunded: i64 = sqlx::query_scalar("select refunded_minor from orders where id = $1")
        .bind(order)
        .fetch_one(&app.db.pool)
        .await
        .unwrap();
    assert_eq!(refunded, paid_minor / 2);
    owner.close().await;
}
