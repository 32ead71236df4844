//! Roles, checked on the server for every admin route: enumerated from the
//! route table the admin is built from (`routes::admin::ROUTES`), so a new
//! route cannot be forgotten. A door account may redeem and look an order
//! up; every other route
//! answers it 403, changes nothing, and the refusal is recorded in
//! Activity.

use reqwest::StatusCode;

use holdfast::routes::admin::{ROUTES, Verb};
use holdfast::staff::roles::Role;
use holdfast_testkit::*;

/// A path for a route pattern, its `{…}` segments filled with something
/// plausible (an id that may not exist: the role is decided first).
pub(crate) fn concrete(pattern: &str, order: &str) -> String {
    let filled: Vec<String> = pattern
        .split('/')
        .map(|segment| match segment {
            "{id}" | "{order}" => order.to_owned(),
            "{job}" => "1".to_owned(),
            s if s.starts_with('{') => "x".to_owned(),
            s => s.to_owned(),
        })
        .collect();
    format!("/admin{}", filled.join("/"))
}

async fn set_role(app: &TestApp, role: Role) {
    sqlx::query("update staff set role = $1 where email = $2")
        .bind(role.as_str())
        .bind(STAFF_EMAIL)
        .execute(&app.db.pool)
        .await
        .unwrap();
}

#[tokio::test]
async fn every_route_a_role_lacks_answers_403_changes_nothing_and_is_recorded() {
    let app = spawn_app().await;
    app.load_demo().await;
    app.add_staff().await;
    let order = app
        .start(&browser(), &Purchase::of("harbour-lights-vip", 1))
        .await
        .order_id
        .to_string();
    let (staff, csrf) = app.staff_browser().await;
    for role in [Role::Door, Role::BoxOffice] {
        set_role(&app, role).await;
        let before = snapshot(&app.db.pool).await;
        let refused_before: i64 =
            sqlx::query_scalar("select count(*) from staff_actions where action = 'refused'")
                .fetch_one(&app.db.pool)
                .await
                .unwrap();
        let mut refused = 0;
        for route in ROUTES {
            // signing out is every member's, and would end this session
            if route.path == "/logout" {
                continue;
            }
            let path = concrete(route.path, &order);
            let answer = match route.verb {
                Verb::Get => staff
                    .get(format!("{}{path}", app.address))
                    .send()
                    .await
                    .unwrap(),
                Verb::Post => staff
                    .post(format!("{}{path}", app.address))
                    .form(&[("csrf", csrf.as_str()), ("total", "1"), ("reason", "x")])
                    .send()
                    .await
                    .unwrap(),
            };
            if role.may(route.permission) {
                assert_ne!(
                    answer.status(),
                    StatusCode::FORBIDDEN,
                    "{role}: {:?} {path} is allowed",
                    route.verb
                );
                continue;
            }
            refused += 1;
            assert_eq!(
                answer.status(),
                StatusCode::FORBIDDEN,
                "{role}: {:?} {path} needs {}",
                route.verb,
                route.permission.as_str()
            );
            let page = answer.text().await.unwrap();
            assert!(page.contains("Not for your role"), "{page}");
        }
        assert!(refused > 0, "{role} is refused something");
        // nothing changed but the record of the refusals
        let after = snapshot(&app.db.pool).await;
        let recorded: i64 =
            sqlx::query_scalar("select count(*) from staff_actions where action = 'refused'")
                .fetch_one(&app.db.pool)
                .await
                .unwrap();
        assert_eq!(
            recorded - refused_before,
            refused,
            "{role}: each refusal recorded"
        );
        let changed: Vec<_> = before
            .iter()
            .zip(&after)
            .filter(|(b, a)| b != a && !b.starts_with("staff_actions"))
            .collect();
        assert!(changed.is_empty(), "{role} changed {changed:?}");
    }
}

#[tokio::test]
async fn a_door_account_redeems_looks_up_and_sees_only_its_links() {
    let app = spawn_app().await;
    app.load_demo().await;
    app.add_staff().await;
    let order = app
        .start(&browser(), &Purchase::of("harbour-lights-vip", 1))
        .await
        .order_id
        .to_string();
    set_role(&app, Role::Door).await;
    let (staff, response) = app.try_login(STAFF_EMAIL, STAFF_PASSWORD).await;
    assert_eq!(
        location(&response),
        "/admin/redeem",
        "the door starts at the door"
    );
    let page = app.admin_page(&staff, "/admin/redeem").await;
    for link in [
        "/admin/resources",
        "/admin/orders\"",
        "/admin/activity",
        "/admin/exports",
        "/admin/door-list",
    ] {
        assert!(!page.contains(link), "no {link} link for the door: {page}");
    }
    let csrf = hidden(&page, "csrf");
    let looked_up = app
        .admin_page(&staff, &format!("/admin/orders/{order}"))
        .await;
    assert!(looked_up.contains("Ada"), "{looked_up}");
    let scanned = staff
        .post(format!("{}/admin/redeem", app.address))
        .form(&[("csrf", csrf.as_str()), ("code", "NOT-A-CODE")])
        .send()
        .await
        .unwrap();
    assert_eq!(
        scanned.status(),
        StatusCode::NOT_FOUND,
        "a code that is not valid"
    );
}
