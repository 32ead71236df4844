//! Staff invited by e-mail: the owner names an address and a role, the
//! mail goes through the outbox and the sandbox's SMTP server, and the
//! link in it lets the invitee choose their own password, once, for 72
//! hours. Only the token's SHA-256 is stored; the outbox forgets the token
//! once the invite is used, cancelled or sent again. A link expired, used,
//! cancelled, replaced or forged gets a page that says so and changes
//! nothing.

use holdfast::worker::mail::Mailer;
use holdfast::worker::outbox::Outbox;
use holdfast_testkit::*;
use mail_parser::MessageParser;
use reqwest::StatusCode;
use sha2::{Digest, Sha256};

const NEW: &str = "ines@holdfast.test";
const CHOSEN: &str = "a passphrase Ines chose herself";

/// Run the outbox with the sandbox's mail server; the links mailed to
/// `to`, oldest first.
async fn mailed_links(app: &TestApp, to: &str) -> Vec<String> {
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
    app.sandbox
        .mail
        .messages()
        .iter()
        .filter(|m| m.to.iter().any(|t| t.contains(to)))
        .map(|m| {
            let parsed = MessageParser::default().parse(&m.raw).unwrap();
            let text = parsed.body_text(0).unwrap().into_owned();
            assert!(text.contains("works once, until"), "{text}");
            let start = text.find("/admin/invite/").expect("a link");
            let end = text[start..]
                .find(char::is_whitespace)
                .map_or(text.len(), |n| start + n);
            text[start..end].to_owned()
        })
        .collect()
}

async fn post_password(
    app: &TestApp,
    link: &str,
    password: &str,
    again: &str,
) -> reqwest::Response {
    http_client()
        .post(format!("{}{link}", app.address))
        .form(&[("password", password), ("again", again)])
        .send()
        .await
        .unwrap()
}

async fn accounts(app: &TestApp) -> i64 {
    sqlx::query_scalar("select count(*) from staff")
        .fetch_one(&app.db.pool)
        .await
        .unwrap()
}

/// Tokens in clear anywhere in the outbox.
async fn tokens_in_outbox(app: &TestApp) -> i64 {
    sqlx::query_scalar("select count(*) from outbox_jobs where payload ? 'token'")
        .fetch_one(&app.db.pool)
        .await
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_invitee_chooses_their_own_password_once_through_the_mailed_link() {
    let app = spawn_app().await;
    app.add_staff().await;
    let (owner, csrf) = app.staff_browser().await;

    let sent = app
        .admin_post(
            &owner,
            "/admin/staff",
            &[
                ("csrf", &csrf),
                ("email", " Ines@Holdfast.test "),
                ("role", "box_office"),
            ],
        )
        .await;
    assert_eq!(location(&sent), "/admin/staff?notice=invite_sent");
    let page = app.admin_page(&owner, &location(&sent)).await;
    assert!(page.contains(&format!("data-invite=\"{NEW}\"")), "{page}");
    assert!(page.contains("Invite sent"), "{page}");
    // the Staff page never asks the owner for someone else's password
    assert!(!page.contains("type=\"password\""), "{page}");
    assert_eq!(
        accounts(&app).await,
        1,
        "no account before the invitee acts"
    );

    let links = mailed_links(&app, NEW).await;
    assert_eq!(links.len(), 1);
    let link = &links[0];
    // sent, its token is kept nowhere in clear, used or not
    assert_eq!(tokens_in_outbox(&app).await, 0);
    let token = link.trim_start_matches("/admin/invite/");
    assert_eq!(token.len(), 64);
    // only the token's SHA-256 is stored; 72 hours
    let (stored, hours): (Vec<u8>, f64) = sqlx::query_as(
        "select token_sha256, extract(epoch from expires_at - sent_at)::float8 / 3600 \
           from staff_invites where email = $1",
    )
    .bind(NEW)
    .fetch_one(&app.db.pool)
    .await
    .unwrap();
    assert_eq!(stored, Sha256::digest(token.as_bytes()).to_vec());
    assert_eq!(hours, 72.0);
    let clear: i64 = sqlx::query_scalar(
        "select count(*) from staff_invites i where i::text like '%' || $1 || '%'",
    )
    .bind(token)
    .fetch_one(&app.db.pool)
    .await
    .unwrap();
    assert_eq!(clear, 0, "the token is not stored in clear");

    // the page names the address and role
    let page = http_client()
        .get(format!("{}{link}", app.address))
        .send()
        .await
        .unwrap();
    assert_eq!(page.status(), StatusCode::OK);
    let page = page.text().await.unwrap();
    assert!(
        page.contains(&format!("id=\"invite-email\">{NEW}<")),
        "{page}"
    );
    assert!(page.contains("Box office"), "{page}");

    // a short password, or two that differ: said beside the field, never
    // echoed, nothing made
    for (password, again, field) in [
        ("short", "short", "password"),
        (CHOSEN, "another passphrase here", "again"),
    ] {
        let refused = post_password(&app, link, password, again).await;
        assert_eq!(refused.status(), StatusCode::BAD_REQUEST);
        let page = refused.text().await.unwrap();
        assert!(page.contains(&format!("id=\"f-{field}-error\"")), "{page}");
        assert!(!page.contains(&format!("value=\"{password}\"")), "{page}");
        assert_eq!(accounts(&app).await, 1);
    }

    // the password chosen: the account exists, with the role, and signs in
    let made = post_password(&app, link, CHOSEN, CHOSEN).await;
    assert_eq!(made.status(), StatusCode::OK);
    assert!(made.text().await.unwrap().contains("Your account is ready"));
    let role: String = sqlx::query_scalar("select role from staff where email = $1")
        .bind(NEW)
        .fetch_one(&app.db.pool)
        .await
        .unwrap();
    assert_eq!(role, "box_office");
    let (_, signed_in) = app.try_login(NEW, CHOSEN).await;
    assert_eq!(location(&signed_in), "/admin/orders");
    assert_eq!(
        tokens_in_outbox(&app).await,
        0,
        "the outbox forgot the token"
    );
    let page = app.admin_page(&owner, "/admin/staff").await;
    assert!(
        !page.contains(&format!("data-invite=\"{NEW}\"")),
        "no longer waiting"
    );
    let activity = app.admin_page(&owner, "/admin/activity").await;
    assert!(activity.contains(NEW), "{activity}");

    // used: the link works no more, for a page or a password
    let before = snapshot(&app.db.pool).await;
    let again = post_password(
        &app,
        link,
        "a different passphrase",
        "a different passphrase",
    )
    .await;
    assert_eq!(again.status(), StatusCode::GONE);
    assert!(again.text().await.unwrap().contains("no longer works"));
    let get = http_client()
        .get(format!("{}{link}", app.address))
        .send()
        .await
        .unwrap();
    assert_eq!(get.status(), StatusCode::GONE);
    // forged: unknown, of any shape
    for forged in [
        "/admin/invite/".to_owned() + &"0".repeat(64),
        "/admin/invite/not-a-token".to_owned(),
        format!("/admin/invite/{}", &token[..63]),
    ] {
        let answer = post_password(&app, &forged, CHOSEN, CHOSEN).await;
        assert_eq!(answer.status(), StatusCode::NOT_FOUND, "{forged}");
        assert!(answer.text().await.unwrap().contains("not an invite link"));
    }
    assert_eq!(snapshot(&app.db.pool).await, before, "nothing changed");
    let (_, old) = app.try_login(NEW, "a different passphrase").await;
    assert_ne!(
        old.status(),
        StatusCode::SEE_OTHER,
        "the password stayed hers"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_resent_invite_kills_the_old_link_and_a_cancelled_or_expired_one_changes_nothing() {
    let app = spawn_app().await;
    app.add_staff().await;
    let (owner, csrf) = app.staff_browser().await;
    let invite = |email: &'static str| {
        let (owner, csrf) = (owner.clone(), csrf.clone());
        let app = &app;
        async move {
            app.admin_post(
                &owner,
                "/admin/staff",
                &[("csrf", &csrf), ("email", email), ("role", "door")],
            )
            .await
        }
    };
    invite(NEW).await;
    let id: i64 = sqlx::query_scalar("select id from staff_invites where email = $1")
        .bind(NEW)
        .fetch_one(&app.db.pool)
        .await
        .unwrap();
    let first = mailed_links(&app, NEW).await;
    assert_eq!(first.len(), 1);
    // sent again: a new link; the old one is dead, the outbox forgot it
    let resent = app
        .admin_post(
            &owner,
            &format!("/admin/staff/invites/{id}/resend"),
            &[("csrf", &csrf)],
        )
        .await;
    assert_eq!(location(&resent), "/admin/staff?notice=invite_resent");
    assert_eq!(tokens_in_outbox(&app).await, 1, "only the new mail's");
    let links = mailed_links(&app, NEW).await;
    assert_eq!(links.len(), 2);
    assert_ne!(links[0], links[1]);
    let old = post_password(&app, &links[0], CHOSEN, CHOSEN).await;
    assert_eq!(old.status(), StatusCode::GONE);
    assert_eq!(accounts(&app).await, 1);
    let id: i64 = sqlx::query_scalar(
        "select id from staff_invites where email = $1 and cancelled_at is null",
    )
    .bind(NEW)
    .fetch_one(&app.db.pool)
    .await
    .unwrap();

    // expired: listed as such, a clear page, nothing made
    sqlx::query(
        "update staff_invites set sent_at = now() - interval '73 hours', \
                expires_at = now() - interval '1 hour' where id = $1",
    )
    .bind(id)
    .execute(&app.db.pool)
    .await
    .unwrap();
    let page = app.admin_page(&owner, "/admin/staff").await;
    assert!(page.contains("link expired"), "{page}");
    let expired = post_password(&app, &links[1], CHOSEN, CHOSEN).await;
    assert_eq!(expired.status(), StatusCode::GONE);
    assert!(expired.text().await.unwrap().contains("has expired"));
    assert_eq!(accounts(&app).await, 1);

    // cancelled: the link is dead and the outbox forgot it
    let cancelled = app
        .admin_post(
            &owner,
            &format!("/admin/staff/invites/{id}/cancel"),
            &[("csrf", &csrf)],
        )
        .await;
    assert_eq!(location(&cancelled), "/admin/staff?notice=invite_cancelled");
    assert_eq!(tokens_in_outbox(&app).await, 0);
    let dead = post_password(&app, &links[1], CHOSEN, CHOSEN).await;
    assert_eq!(dead.status(), StatusCode::GONE);
    assert_eq!(accounts(&app).await, 1);
    // a cancelled invite is not resent nor cancelled twice
    for action in ["resend", "cancel"] {
        let gone = app
            .admin_post(
                &owner,
                &format!("/admin/staff/invites/{id}/{action}"),
                &[("csrf", &csrf)],
            )
            .await;
        assert_eq!(gone.status(), StatusCode::NOT_FOUND, "{action}");
    }
    // inviting an address with an account sends nothing
    let exists = invite(STAFF_EMAIL).await;
    assert_eq!(location(&exists), "/admin/staff?notice=staff_exists");
    let open: i64 = sqlx::query_scalar("select count(*) from staff_invites where email = $1")
        .bind(STAFF_EMAIL)
        .fetch_one(&app.db.pool)
        .await
        .unwrap();
    assert_eq!(open, 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn ten_racing_uses_of_one_link_make_one_account() {
    let app = spawn_app().await;
    app.add_staff().await;
    let (owner, csrf) = app.staff_browser().await;
    app.admin_post(
        &owner,
        "/admin/staff",
        &[("csrf", &csrf), ("email", NEW), ("role", "door")],
    )
    .await;
    let link = mailed_links(&app, NEW).await.remove(0);
    let answers = futures::future::join_all((0..10).map(|n| {
        let (app, link) = (&app, &link);
        async move {
            let password = format!("{CHOSEN} {n}");
            post_password(app, link, &password, &password)
                .await
                .status()
        }
    }))
    .await;
    let made = answers.iter().filter(|s| **s == StatusCode::OK).count();
    let spent = answers.iter().filter(|s| **s == StatusCode::GONE).count();
    assert_eq!((made, spent), (1, 9), "{answers:?}");
    assert_eq!(accounts(&app).await, 2);
    let used: i64 =
        sqlx::query_scalar("select count(*) from staff_invites where used_at is not null")
            .fetch_one(&app.db.pool)
            .await
            .unwrap();
    assert_eq!(used, 1);
}
