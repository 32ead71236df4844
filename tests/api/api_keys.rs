//! API keys in the admin: owners make them with scopes (the token shown
//! once, only its hash kept), see their last use, revoke them; nobody else
//! may; every change is in Activity.

use holdfast::staff::api_keys;
use holdfast::staff::roles::Role;
use holdfast_testkit::*;
use reqwest::StatusCode;

fn token_on(page: &str) -> String {
    let start = page
        .find("<code id=\"token\">")
        .expect("the token is shown")
        + 17;
    page[start..].split('<').next().unwrap().to_owned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn owners_make_keys_shown_once_stored_hashed_used_and_revoked() {
    let app = spawn_app().await;
    app.add_staff().await;
    app.add_staff_as("bo@holdfast.test", Role::BoxOffice).await;
    app.add_staff_as("door@holdfast.test", Role::Door).await;
    let (staff, csrf) = app.staff_browser().await;

    // bad input changes nothing
    for form in [
        vec![("csrf", csrf.as_str()), ("name", "Storefront")],
        vec![
            ("csrf", &csrf),
            ("name", "Storefront"),
            ("scope", "everything"),
        ],
        vec![("csrf", &csrf), ("name", ""), ("scope", "read_orders")],
    ] {
        let answer = app.admin_post(&staff, "/admin/api-keys", &form).await;
        assert_eq!(answer.status(), StatusCode::BAD_REQUEST, "{form:?}");
        // said on the API keys page, with what was typed
        let page = answer.text().await.unwrap();
        assert!(page.contains("id=\"form-errors\""), "{page}");
        assert!(page.contains("id=\"make-key\""), "{page}");
        let name = form.iter().find(|(n, _)| *n == "name").unwrap().1;
        assert!(
            page.contains(&format!("name=\"name\" value=\"{name}\"")),
            "{page}"
        );
    }
    assert!(api_keys::list(&app.db.pool).await.unwrap().is_empty());

    let made = app
        .admin_post(
            &staff,
            "/admin/api-keys",
            &[
                ("csrf", &csrf),
                ("name", "Door scanners"),
                ("scope", "redeem"),
                ("scope", "read_orders"),
            ],
        )
        .await;
    assert_eq!(made.status(), StatusCode::OK);
    let token = token_on(&made.text().await.unwrap());
    assert!(token.starts_with("hf_"), "{token}");
    let secret = token.rsplit('_').next().unwrap().to_owned();
    // never again, and nowhere in the database
    let page = app.admin_page(&staff, "/admin/api-keys").await;
    assert!(page.contains("Door scanners") && !page.contains(&secret));
    let dump = snapshot(&app.db.pool).await.join("\n");
    assert!(!dump.contains(&secret), "the token is stored in the clear");
    assert!(page.contains("never"), "not used yet");

    // it signs; a wrong secret, another shape, nothing do not
    let key = api_keys::authenticate(&app.db.pool, &token)
        .await
        .unwrap()
        .unwrap();
    assert!(key.may(api_keys::Scope::Redeem) && !key.may(api_keys::Scope::Refund));
    let wrong = format!("{}x", &token[..token.len() - 1]);
    for bad in [wrong.as_str(), "hf_", "", "Bearer x", &token[..20]] {
        assert!(
            api_keys::authenticate(&app.db.pool, bad)
                .await
                .unwrap()
                .is_none(),
            "{bad}"
        );
    }
    let page = app.admin_page(&staff, "/admin/api-keys").await;
    let row = page
        .split(&format!("data-key=\"{}\"", key.id))
        .nth(1)
        .unwrap();
    let last_used = row.split("class=\"last-used\">").nth(1).unwrap();
    assert!(
        !last_used.starts_with("never"),
        "its last use is shown: {last_used}"
    );

    // box office and door may not see or make keys
    for email in ["bo@holdfast.test", "door@holdfast.test"] {
        let (other, other_csrf) = app.signed_in(email, PASSWORD).await;
        let page = other
            .get(format!("{}/admin/api-keys", app.address))
            .send()
            .await
            .unwrap();
        assert_eq!(page.status(), StatusCode::FORBIDDEN, "{email}");
        let revoke = app
            .admin_post(
                &other,
                &format!("/admin/api-keys/{}/revoke", key.id),
                &[("csrf", &other_csrf)],
            )
            .await;
        assert_eq!(revoke.status(), StatusCode::FORBIDDEN, "{email}");
    }
    assert!(
        api_keys::authenticate(&app.db.pool, &token)
            .await
            .unwrap()
            .is_some()
    );

    // revoked: it signs nothing
    let revoked = app
        .admin_post(
            &staff,
            &format!("/admin/api-keys/{}/revoke", key.id),
            &[("csrf", &csrf)],
        )
        .await;
    assert_eq!(revoked.status(), StatusCode::SEE_OTHER);
    assert!(
        api_keys::authenticate(&app.db.pool, &token)
            .await
            .unwrap()
            .is_none()
    );
    let page = app.admin_page(&staff, "/admin/api-keys").await;
    assert!(page.contains("revoked"));
    let activity = app.admin_page(&staff, "/admin/activity").await;
    assert!(activity.contains("add_api_key") && activity.contains("revoke_api_key"));
}
