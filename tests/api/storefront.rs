//! The shop is the owner's (issue 33): an owner names it, describes it,
//! gives it an accent colour, a contact address and legal links on the
//! Settings page, and every shopper's page shows them (the "one moment"
//! and error pages too); no demo words are left. Bad input is refused
//! field by field and changes nothing; the box office may not.

use reqwest::StatusCode;

use holdfast::staff::roles::Role;
use holdfast_testkit::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_owner_names_the_shop_and_every_page_says_so() {
    let app = spawn_app().await;
    app.load_demo().await;
    app.add_staff().await;
    let shopper = browser();
    let home = read_page(&shopper, &format!("{}/", app.address)).await;
    for demo in ["Holdfast", "sold once, never twice"] {
        assert!(!home.contains(demo), "no demo words: {demo}");
    }
    let (owner, csrf) = app.staff_browser().await;
    let settings = app.admin_page(&owner, "/admin/settings").await;
    assert!(settings.contains("id=\"shop\""), "{settings}");

    // refused field by field, nothing saved
    let before = snapshot(&app.db.pool).await;
    let refused = app
        .admin_post(
            &owner,
            "/admin/settings/shop",
            &[
                ("csrf", &csrf),
                ("name", " "),
                ("accent", "#ffd700"),
                ("contact_email", "not an address"),
                ("terms_url", "javascript:alert(1)"),
            ],
        )
        .await;
    assert_eq!(refused.status(), StatusCode::BAD_REQUEST);
    let page = refused.text().await.unwrap();
    for said in [
        "The shop&#39;s name is needed",
        "too light",
        "an e-mail address like",
        "a web address like",
    ] {
        assert!(page.contains(said), "{said}: {page}");
    }
    assert!(page.contains("javascript:alert(1)"), "what was typed stays");
    assert_eq!(snapshot(&app.db.pool).await, before, "nothing changed");

    // saved
    let saved = app
        .admin_post(
            &owner,
            "/admin/settings/shop",
            &[
                ("csrf", &csrf),
                ("name", "Harbour Market"),
                ("description", "Tickets, bread and honey from the harbour."),
                ("accent", "#1D4ED8"),
                ("contact_email", "hello@harbour.example"),
                ("terms_url", "https://harbour.example/terms"),
                ("privacy_url", "https://harbour.example/privacy"),
                ("imprint_url", ""),
            ],
        )
        .await;
    assert_eq!(saved.status(), StatusCode::SEE_OTHER);
    let recorded: i64 = sqlx::query_scalar(
        "select count(*) from staff_actions where action = 'change_setting' \
            and target = 'storefront' and outcome = 'saved'",
    )
    .fetch_one(&app.db.pool)
    .await
    .unwrap();
    assert_eq!(recorded, 1);
    let home = read_page(&shopper, &format!("{}/", app.address)).await;
    for said in [
        "<title>Harbour Market</title>",
        "class=\"brand\" href=\"/\">Harbour Market</a>",
        "Tickets, bread and honey from the harbour.",
        "href=\"mailto:hello@harbour.example\"",
        "href=\"https://harbour.example/terms\">Terms</a>",
        "href=\"https://harbour.example/privacy\">Privacy</a>",
        "href=\"/static/theme/1d4ed8.css\"",
    ] {
        assert!(home.contains(said), "{said}: {home}");
    }
    assert!(!home.contains("Imprint"), "no empty link");
    let theme = shopper
        .get(format!("{}/static/theme/1d4ed8.css", app.address))
        .send()
        .await
        .unwrap();
    assert_eq!(theme.status(), StatusCode::OK);
    assert!(
        theme.headers()["cache-control"]
            .to_str()
            .unwrap()
            .contains("immutable")
    );
    assert_eq!(
        theme.text().await.unwrap(),
        ":root { --accent: #1d4ed8; }\n"
    );
    let nonsense = shopper
        .get(format!("{}/static/theme/zzzzzz.css", app.address))
        .send()
        .await
        .unwrap();
    assert_eq!(nonsense.status(), StatusCode::NOT_FOUND);
    // the basket, and a page that is not there, in the shop's name too
    let basket = read_page(&shopper, &format!("{}/basket", app.address)).await;
    assert!(basket.contains("Your basket — Harbour Market"), "{basket}");
    let missing = shopper
        .get(format!("{}/c/no-such-page", app.address))
        .send()
        .await
        .unwrap();
    assert_eq!(missing.status(), StatusCode::NOT_FOUND);
    assert!(missing.text().await.unwrap().contains("Harbour Market"));

    // the box office may not
    app.add_staff_as("box@holdfast.test", Role::BoxOffice).await;
    let (box_office, box_csrf) = app.signed_in("box@holdfast.test", PASSWORD).await;
    let before = snapshot(&app.db.pool).await;
    let forbidden = app
        .admin_post(
            &box_office,
            "/admin/settings/shop",
            &[("csrf", &box_csrf), ("name", "Box Office Market")],
        )
        .await;
    assert_eq!(forbidden.status(), StatusCode::FORBIDDEN);
    let after = snapshot(&app.db.pool).await;
    assert_eq!(
        after
            .iter()
            .filter(|row| row.contains("Box Office Market"))
            .count(),
        0
    );
    assert!(before.len() <= after.len());
}
