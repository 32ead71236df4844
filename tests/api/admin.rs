//! The staff admin over HTTP: the one guard, CSRF, the login throttle, the
//! actions and their record, escaping, and the headers every answer wears.

use futures::future::join_all;
use reqwest::StatusCode;
use reqwest::header::{ACCEPT, COOKIE, SET_COOKIE};

use holdfast_testkit::*;

/// One shopper whose checkout is open at the provider (so a hold is
/// awaiting payment). Returns (hold id, order id).
async fn shopper_mid_checkout(app: &TestApp, product: &str, qty: i64) -> (String, String) {
    let started = app.start(&browser(), &Purchase::of(product, qty)).await;
    let hold: uuid::Uuid = sqlx::query_scalar(
        "select h.id from orders o join holds h on h.purchase_id = o.hold_id where o.id = $1",
    )
    .bind(started.order_id)
    .fetch_one(&app.db.pool)
    .await
    .unwrap();
    (hold.to_string(), started.order_id.to_string())
}

/// Every admin route, with what a request to it needs.
fn admin_routes(resource: &str, hold: &str, order: &str, job: i64) -> Vec<(&'static str, String)> {
    vec![
        ("GET", "/admin".into()),
        ("GET", "/admin/".into()),
        ("GET", "/admin/resources".into()),
        ("GET", format!("/admin/resources/{resource}")),
        ("GET", "/admin/holds".into()),
        ("GET", format!("/admin/holds/{hold}")),
        ("GET", "/admin/orders".into()),
        ("GET", "/admin/orders?flagged=1".into()),
        ("GET", format!("/admin/orders/{order}")),
        ("GET", "/admin/activity".into()),
        ("GET", "/admin/no-such-page".into()),
        ("POST", "/admin/logout".into()),
        ("POST", format!("/admin/resources/{resource}/capacity")),
        ("POST", format!("/admin/resources/{resource}/repair")),
        ("POST", format!("/admin/holds/{hold}/release")),
        ("POST", format!("/admin/orders/{order}/jobs/{job}/retry")),
    ]
}

async fn pending_refund_job(app: &TestApp, order: &str) -> i64 {
    sqlx::query_scalar(
        "insert into outbox_jobs (kind, dedupe_key, payload, run_after, attempts, last_error) \
         values ('refund', 'refund:stripe:pi_admin_test', \
                 jsonb_build_object('order_id', $1::text, 'provider', 'stripe', \
                                    'payment_ref', 'pi_admin_test', 'reason', 'test'), \
                 now() + interval '1 hour', 3, 'provider said no') \
         returning id",
    )
    .bind(order)
    .fetch_one(&app.db.pool)
    .await
    .unwrap()
}

#[tokio::test]
async fn every_admin_route_without_a_session_is_refused_and_changes_nothing() {
    let app = spawn_app().await;
    app.load_demo().await;
    app.add_staff().await;
    let (hold, order) = shopper_mid_checkout(&app, "wild-honey", 2).await;
    let job = pending_refund_job(&app, &order).await;
    let before = snapshot(&app.db.pool).await;

    // a cookie signed with another key, and one that is not signed at all
    let forged = format!("hf_staff={}.{}", "ab".repeat(32), "00".repeat(32));
    let unsigned = format!("hf_staff={}", "ab".repeat(32));
    for cookie in [None, Some(forged.as_str()), Some(unsigned.as_str())] {
        for (method, path) in admin_routes("wild-honey", &hold, &order, job) {
            let url = format!("{}{path}", app.address);
            let request = match method {
                "GET" => app.client.get(&url),
                _ => app.client.post(&url).form(&[("csrf", "x"), ("total", "0")]),
            };
            let request = match cookie {
                Some(cookie) => request.header(COOKIE, cookie),
                None => request,
            };
            // as a browser: GETs go to the login form
            let response = request
                .try_clone()
                .unwrap()
                .header(ACCEPT, "text/html")
                .send()
                .await
                .unwrap();
            if method == "GET" {
                assert_eq!(response.status(), StatusCode::SEE_OTHER, "{method} {path}");
                assert_eq!(location(&response), "/admin/login", "{method} {path}");
            } else {
                assert_eq!(
                    response.status(),
                    StatusCode::UNAUTHORIZED,
                    "{method} {path}"
                );
            }
            // as a program: 401
            let response = request.send().await.unwrap();
            assert_eq!(
                response.status(),
                StatusCode::UNAUTHORIZED,
                "{method} {path}"
            );
            let body = response.text().await.unwrap();
            assert!(body.contains("Please log in"), "{body}");
        }
    }
    assert_eq!(snapshot(&app.db.pool).await, before);
}

#[tokio::test]
async fn a_logged_out_cookie_opens_nothing() {
    let app = spawn_app().await;
    app.add_staff().await;
    let (staff, response) = app.try_login(STAFF_EMAIL, STAFF_PASSWORD).await;
    let cookie = response
        .headers()
        .get_all(SET_COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .find(|v| v.starts_with("hf_staff="))
        .expect("a session cookie")
        .to_owned();
    assert!(cookie.contains("HttpOnly"), "{cookie}");
    assert!(cookie.contains("SameSite=Strict"), "{cookie}");
    assert!(cookie.contains("Path=/admin"), "{cookie}");
    let pair = cookie.split(';').next().unwrap().to_owned();
    let page = app.admin_page(&staff, "/admin/resources").await;
    let response = app
        .admin_post(&staff, "/admin/logout", &[("csrf", &hidden(&page, "csrf"))])
        .await;
    assert_eq!(location(&response), "/admin/login");
    let replayed = browser()
        .get(format!("{}/admin/resources", app.address))
        .header(COOKIE, pair)
        .send()
        .await
        .unwrap();
    assert_eq!(replayed.status(), StatusCode::UNAUTHORIZED);
    let recorded: Vec<String> = sqlx::query_scalar("select action from staff_actions order by id")
        .fetch_all(&app.db.pool)
        .await
        .unwrap();
    assert_eq!(recorded, ["login", "logout"]);
}

#[tokio::test]
async fn admin_forms_without_the_sessions_csrf_token_are_refused_and_change_nothing() {
    let app = spawn_app().await;
    app.load_demo().await;
    app.add_staff().await;
    let (hold, order) = shopper_mid_checkout(&app, "wild-honey", 2).await;
    let job = pending_refund_job(&app, &order).await;
    let (staff, csrf) = app.staff_browser().await;
    // another staff session's token is no better than none
    let (_, other_csrf) = app.staff_browser().await;
    assert_ne!(csrf, other_csrf);
    let before = snapshot(&app.db.pool).await;

    let wrong = "f".repeat(64);
    for token in [
        None,
        Some(""),
        Some(wrong.as_str()),
        Some(other_csrf.as_str()),
    ] {
        for (method, path) in admin_routes("wild-honey", &hold, &order, job) {
            if method != "POST" {
                continue;
            }
            let mut form = vec![("total", "0")];
            if let Some(token) = token {
                form.push(("csrf", token));
            }
            let response = app.admin_post(&staff, &path, &form).await;
            assert_eq!(
                response.status(),
                StatusCode::FORBIDDEN,
                "{path} with {token:?}"
            );
            assert!(
                response
                    .text()
                    .await
                    .unwrap()
                    .contains("Nothing was changed")
            );
        }
    }
    assert_eq!(snapshot(&app.db.pool).await, before);
    // still signed in: the refused logout did not log out
    app.admin_page(&staff, "/admin/resources").await;
}

#[tokio::test]
async fn the_login_form_needs_its_own_csrf_cookie() {
    let app = spawn_app().await;
    app.add_staff().await;
    // a cross-site post carries no login cookie
    let response = browser()
        .post(format!("{}/admin/login", app.address))
        .form(&[
            ("email", STAFF_EMAIL),
            ("password", STAFF_PASSWORD),
            ("csrf", &"a".repeat(64)),
        ])
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), StatusCode::FORBIDDEN);
    let sessions: i64 = sqlx::query_scalar("select count(*) from staff_sessions")
        .fetch_one(&app.db.pool)
        .await
        .unwrap();
    assert_eq!(sessions, 0);
}

#[tokio::test]
async fn ten_wrong_passwords_lock_the_address_for_a_while() {
    let app = spawn_app().await;
    app.add_staff().await;
    for attempt in 1..=9 {
        let started = std::time::Instant::now();
        let (_, response) = app.try_login(STAFF_EMAIL, "not the password").await;
        assert_eq!(
            response.status(),
            StatusCode::UNAUTHORIZED,
            "attempt {attempt}"
        );
        let body = response.text().await.unwrap();
        assert!(body.contains("do not match"), "{body}");
        if attempt == 9 {
            // slowed: the ninth answer waits a full second by design (a
            // lower bound only; the hash alone takes far less)
            assert!(started.elapsed() >= std::time::Duration::from_secs(1));
        }
    }
    let (_, tenth) = app.try_login(STAFF_EMAIL, "still not it").await;
    assert_eq!(tenth.status(), StatusCode::TOO_MANY_REQUESTS);
    // now even the right password is refused, and says when to come back
    let (_, right) = app.try_login(STAFF_EMAIL, STAFF_PASSWORD).await;
    assert_eq!(right.status(), StatusCode::TOO_MANY_REQUESTS);
    let retry_after: u64 = right.headers()["retry-after"]
        .to_str()
        .unwrap()
        .parse()
        .unwrap();
    assert!(retry_after > 60 && retry_after <= 15 * 60, "{retry_after}");
    assert!(
        right
            .text()
            .await
            .unwrap()
            .contains("Too many failed logins")
    );
    let sessions: i64 = sqlx::query_scalar("select count(*) from staff_sessions")
        .fetch_one(&app.db.pool)
        .await
        .unwrap();
    assert_eq!(sessions, 0);
    // the lock is for that address; the address is compared as typed, lower-cased
    let (_, shouted) = app
        .try_login(&STAFF_EMAIL.to_uppercase(), STAFF_PASSWORD)
        .await;
    assert_eq!(shouted.status(), StatusCode::TOO_MANY_REQUESTS);
    // when the lock has passed, the right password works again
    sqlx::query("update login_throttle set locked_until = now() - interval '1 second'")
        .execute(&app.db.pool)
        .await
        .unwrap();
    let (_, later) = app.try_login(STAFF_EMAIL, STAFF_PASSWORD).await;
    assert_eq!(later.status(), StatusCode::SEE_OTHER);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_burst_of_parallel_guesses_gets_no_more_than_the_limit_checked() {
    let app = spawn_app().await;
    app.add_staff().await;
    let guesses = 40;
    let statuses = join_all((0..guesses).map(|i| {
        let app = &app;
        async move {
            let (_, response) = app
                .try_login(STAFF_EMAIL, &format!("guess number {i}"))
                .await;
            response.status()
        }
    }))
    .await;
    let refused = statuses
        .iter()
        .filter(|s| **s == StatusCode::UNAUTHORIZED)
        .count();
    let locked = statuses
        .iter()
        .filter(|s| **s == StatusCode::TOO_MANY_REQUESTS)
        .count();
    // attempts are counted before the password is checked: nine wrong
    // answers, the tenth locks, and the rest never reach the hash
    let limit = holdfast::staff::PER_EMAIL_FROM_ADDRESS.lock_after.unwrap();
    assert_eq!(refused, limit as usize - 1);
    assert_eq!(locked, guesses - refused);
    let (_, right) = app.try_login(STAFF_EMAIL, STAFF_PASSWORD).await;
    assert_eq!(right.status(), StatusCode::TOO_MANY_REQUESTS);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_strangers_burst_from_one_address_does_not_lock_the_owner_out() {
    let app = spawn_app().await;
    app.add_staff().await;
    let stranger: std::net::IpAddr = "127.0.0.2".parse().unwrap();
    let statuses = join_all((0..40).map(|i| {
        let app = &app;
        async move {
            let (_, response) = app
                .try_login_with(browser_from(stranger), STAFF_EMAIL, &format!("guess {i}"))
                .await;
            response.status()
        }
    }))
    .await;
    let refused = statuses
        .iter()
        .filter(|s| **s == StatusCode::UNAUTHORIZED)
        .count();
    let limit = holdfast::staff::PER_EMAIL_FROM_ADDRESS.lock_after.unwrap();
    assert_eq!(refused, limit as usize - 1, "{statuses:?}");
    assert_eq!(
        statuses
            .iter()
            .filter(|s| **s == StatusCode::TOO_MANY_REQUESTS)
            .count(),
        40 - refused,
        "{statuses:?}"
    );
    // the stranger is locked out, even with the right password
    let (_, theirs) = app
        .try_login_with(browser_from(stranger), STAFF_EMAIL, STAFF_PASSWORD)
        .await;
    assert_eq!(theirs.status(), StatusCode::TOO_MANY_REQUESTS);
    // the owner, from their own address, is not, and is not slowed either
    let started = std::time::Instant::now();
    let owner: std::net::IpAddr = "127.0.0.3".parse().unwrap();
    let (_, mine) = app
        .try_login_with(browser_from(owner), STAFF_EMAIL, STAFF_PASSWORD)
        .await;
    assert_eq!(mine.status(), StatusCode::SEE_OTHER);
    assert!(started.elapsed() < std::time::Duration::from_secs(3));
    // the owner's success forgets the owner's counts, not the stranger's
    let keys: Vec<String> = sqlx::query_scalar("select key from login_throttle order by key")
        .fetch_all(&app.db.pool)
        .await
        .unwrap();
    assert_eq!(
        keys,
        [
            "address:127.0.0.2".to_owned(),
            "address:127.0.0.3".to_owned(),
            format!("pair:127.0.0.2 {STAFF_EMAIL}"),
        ]
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn guessing_across_many_emails_locks_that_address_only() {
    let app = spawn_app().await;
    app.add_staff().await;
    let guesser: std::net::IpAddr = "127.0.0.4".parse().unwrap();
    let guesses = 40;
    let statuses = join_all((0..guesses).map(|i| {
        let app = &app;
        async move {
            let (_, response) = app
                .try_login_with(
                    browser_from(guesser),
                    &format!("staff{i}@holdfast.test"),
                    "password123",
                )
                .await;
            response.status()
        }
    }))
    .await;
    let limit = holdfast::staff::PER_ADDRESS.lock_after.unwrap() as usize;
    let refused = statuses
        .iter()
        .filter(|s| **s == StatusCode::UNAUTHORIZED)
        .count();
    assert_eq!(refused, limit - 1, "{statuses:?}");
    assert_eq!(
        statuses
            .iter()
            .filter(|s| **s == StatusCode::TOO_MANY_REQUESTS)
            .count(),
        guesses - refused
    );
    // from that address nothing gets through now; from another, the owner does
    let (_, there) = app
        .try_login_with(browser_from(guesser), STAFF_EMAIL, STAFF_PASSWORD)
        .await;
    assert_eq!(there.status(), StatusCode::TOO_MANY_REQUESTS);
    let (_, elsewhere) = app
        .try_login_with(
            browser_from("127.0.0.5".parse().unwrap()),
            STAFF_EMAIL,
            STAFF_PASSWORD,
        )
        .await;
    assert_eq!(elsewhere.status(), StatusCode::SEE_OTHER);
}

#[tokio::test]
async fn staff_release_a_hold_and_its_order_and_the_record_names_them() {
    let app = spawn_app().await;
    app.load_demo().await;
    app.add_staff().await;
    let (hold, order) = shopper_mid_checkout(&app, "wild-honey", 3).await;
    let (staff, csrf) = app.staff_browser().await;

    let list = app
        .admin_page(
            &staff,
            "/admin/holds?resource=wild-honey&state=awaiting_payment",
        )
        .await;
    assert!(list.contains(&format!("data-hold=\"{hold}\"")), "{list}");
    let page = app
        .admin_page(&staff, &format!("/admin/holds/{hold}"))
        .await;
    assert!(page.contains("payment_started"), "history shown: {page}");
    assert!(page.contains("Release this hold"));

    let response = app
        .admin_post(
            &staff,
            &format!("/admin/holds/{hold}/release"),
            &[("csrf", &csrf)],
        )
        .await;
    assert_eq!(response.status(), StatusCode::SEE_OTHER);
    let page = app.admin_page(&staff, &location(&response)).await;
    assert!(
        page.contains("Released: the units are available again."),
        "{page}"
    );
    assert!(!page.contains("Release this hold"));
    assert!(
        page.contains(&format!("staff:{STAFF_EMAIL}")),
        "who is in the history"
    );

    let status = app
        .db
        .inventory()
        .status(&rid("wild-honey"))
        .await
        .unwrap()
        .unwrap();
    assert_eq!((status.held, status.available), (0, 40));
    let state: String = sqlx::query_scalar("select state from orders where id = $1::uuid")
        .bind(&order)
        .fetch_one(&app.db.pool)
        .await
        .unwrap();
    assert_eq!(state, "cancelled");
    // the provider's page is closed too
    let expiring: i64 = sqlx::query_scalar(
        "select count(*) from outbox_jobs where kind = 'expire_session' and payload->>'order_id' = $1",
    )
    .bind(&order)
    .fetch_one(&app.db.pool)
    .await
    .unwrap();
    assert_eq!(expiring, 1);

    // twice is harmless and says so
    let again = app
        .admin_post(
            &staff,
            &format!("/admin/holds/{hold}/release"),
            &[("csrf", &csrf)],
        )
        .await;
    assert!(location(&again).ends_with("notice=already_ended"));
    let recorded: Vec<(String, String, String, String)> = sqlx::query_as(
        "select s.email, a.action, a.target, a.outcome from staff_actions a join staff s on s.id = a.staff_id \
          where a.action = 'release_hold' order by a.id",
    )
    .fetch_all(&app.db.pool)
    .await
    .unwrap();
    let expected = |outcome: &str| {
        (
            STAFF_EMAIL.to_owned(),
            "release_hold".to_owned(),
            hold.clone(),
            outcome.to_owned(),
        )
    };
    assert_eq!(recorded, [expected("released"), expected("already_ended")]);
    let activity = app.admin_page(&staff, "/admin/activity").await;
    assert!(activity.contains("release_hold") && activity.contains(&hold));
    assert_no_drift(&app.db.inventory()).await;
}

#[tokio::test]
async fn a_paid_hold_cannot_be_released_from_the_admin() {
    let app = spawn_app().await;
    app.add_staff().await;
    let inventory = app.db.inventory();
    resource(&inventory, "counter", 5).await;
    let hold = hold_ok(&inventory, &request(&rid("counter"), 2, "walk-in")).await;
    inventory
        .confirm(
            hold.id,
            &holdfast::inventory::PaymentRef::parse("cash-1").unwrap(),
        )
        .await
        .unwrap();
    let (staff, csrf) = app.staff_browser().await;
    let response = app
        .admin_post(
            &staff,
            &format!("/admin/holds/{}/release", hold.id.0),
            &[("csrf", &csrf)],
        )
        .await;
    assert!(location(&response).ends_with("notice=paid"));
    let page = app.admin_page(&staff, &location(&response)).await;
    assert!(page.contains("Refused: this hold is paid for."));
    let status = inventory.status(&rid("counter")).await.unwrap().unwrap();
    assert_eq!((status.sold, status.available), (2, 3));
}

#[tokio::test]
async fn capacity_changes_are_refused_below_what_is_committed_with_the_reason() {
    let app = spawn_app().await;
    app.load_demo().await;
    app.add_staff().await;
    shopper_mid_checkout(&app, "wild-honey", 5).await;
    let (staff, csrf) = app.staff_browser().await;

    let response = app
        .admin_post(
            &staff,
            "/admin/resources/wild-honey/capacity",
            &[("csrf", &csrf), ("total", "3")],
        )
        .await;
    // said beside the field on the resource's page, with what was typed
    assert_eq!(response.status(), StatusCode::BAD_REQUEST);
    let page = response.text().await.unwrap();
    assert!(
        page.contains(
            "id=\"f-total-error\">The capacity cannot go below what is reserved and sold now (5). \
             Nothing was changed."
        ),
        "{page}"
    );
    assert!(page.contains("name=\"total\" value=\"3\""), "{page}");
    let status = app
        .db
        .inventory()
        .status(&rid("wild-honey"))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(status.total, 40);

    let response = app
        .admin_post(
            &staff,
            "/admin/resources/wild-honey/capacity",
            &[("csrf", &csrf), ("total", "5")],
        )
        .await;
    let page = app.admin_page(&staff, &location(&response)).await;
    assert!(page.contains("Capacity changed."));
    assert!(page.contains("<dd id=\"available\">0</dd>"), "{page}");

    for bad in ["-1", "lots", "", "99999999999"] {
        let response = app
            .admin_post(
                &staff,
                "/admin/resources/wild-honey/capacity",
                &[("csrf", &csrf), ("total", bad)],
            )
            .await;
        assert_eq!(response.status(), StatusCode::BAD_REQUEST, "{bad:?}");
        let page = response.text().await.unwrap();
        assert!(page.contains("id=\"f-total-error\""), "{bad:?}: {page}");
    }
    let unknown = app
        .admin_post(
            &staff,
            "/admin/resources/no-such-thing/capacity",
            &[("csrf", &csrf), ("total", "5")],
        )
        .await;
    assert_eq!(unknown.status(), StatusCode::NOT_FOUND);
    assert!(
        app.db
            .inventory()
            .status(&rid("no-such-thing"))
            .await
            .unwrap()
            .is_none(),
        "the admin never creates resources"
    );
    let outcomes: Vec<String> = sqlx::query_scalar(
        "select outcome from staff_actions where action = 'set_capacity' order by id",
    )
    .fetch_all(&app.db.pool)
    .await
    .unwrap();
    assert_eq!(outcomes, ["refused_below_committed", "updated"]);
}

#[tokio::test]
async fn repair_from_the_admin_fixes_drift_the_resources_page_flags() {
    let app = spawn_app().await;
    app.load_demo().await;
    app.add_staff().await;
    shopper_mid_checkout(&app, "wild-honey", 2).await;
    // counters knocked out of line by hand, as a bad restore might
    sqlx::query("update resources set held = 0 where id = 'wild-honey'")
        .execute(&app.db.pool)
        .await
        .unwrap();
    let (staff, csrf) = app.staff_browser().await;
    let page = app.admin_page(&staff, "/admin/resources").await;
    assert!(
        page.contains("differ: the reservations say 2 reserved, 0 sold"),
        "{page}"
    );

    let response = app
        .admin_post(
            &staff,
            "/admin/resources/wild-honey/repair",
            &[("csrf", &csrf)],
        )
        .await;
    let page = app.admin_page(&staff, &location(&response)).await;
    assert!(page.contains("corrected"), "{page}");
    assert!(page.contains("match the reservations"));
    assert_no_drift(&app.db.inventory()).await;
    let response = app
        .admin_post(
            &staff,
            "/admin/resources/wild-honey/repair",
            &[("csrf", &csrf)],
        )
        .await;
    assert!(location(&response).ends_with("notice=no_drift"));
}

#[tokio::test]
async fn a_waiting_refund_can_be_retried_now_and_only_its_own_orders() {
    let app = spawn_app().await;
    app.load_demo().await;
    app.add_staff().await;
    let (_, order) = shopper_mid_checkout(&app, "wild-honey", 1).await;
    let job = pending_refund_job(&app, &order).await;
    let (staff, csrf) = app.staff_browser().await;
    let page = app
        .admin_page(&staff, &format!("/admin/orders/{order}"))
        .await;
    assert!(
        page.contains("provider said no") && page.contains("Retry now"),
        "{page}"
    );

    // through another order's address: not found, nothing changed
    let (_, other) = shopper_mid_checkout(&app, "wild-honey", 1).await;
    let response = app
        .admin_post(
            &staff,
            &format!("/admin/orders/{other}/jobs/{job}/retry"),
            &[("csrf", &csrf)],
        )
        .await;
    assert_eq!(response.status(), StatusCode::NOT_FOUND);

    let response = app
        .admin_post(
            &staff,
            &format!("/admin/orders/{order}/jobs/{job}/retry"),
            &[("csrf", &csrf)],
        )
        .await;
    assert!(location(&response).ends_with("notice=refund_queued"));
    let due: bool = sqlx::query_scalar("select run_after <= now() from outbox_jobs where id = $1")
        .bind(job)
        .fetch_one(&app.db.pool)
        .await
        .unwrap();
    assert!(due);
    let recorded: i64 = sqlx::query_scalar(
        "select count(*) from staff_actions where action = 'retry_refund' and target = $1 and outcome = 'queued'",
    )
    .bind(job.to_string())
    .fetch_one(&app.db.pool)
    .await
    .unwrap();
    assert_eq!(recorded, 1);
}

#[tokio::test]
async fn shopper_text_is_escaped_in_the_admin() {
    let app = spawn_app().await;
    app.load_demo().await;
    app.add_staff().await;
    let name = "<script>alert('owned')</script>";
    let purchase = Purchase::of("wild-honey", 1).by(name, "ada@example.com");
    let order = app.start(&browser(), &purchase).await.order_id;
    let (staff, _) = app.staff_browser().await;
    for path in [
        "/admin/orders".to_owned(),
        format!("/admin/orders/{order}"),
        "/admin/holds".to_owned(),
    ] {
        let page = app.admin_page(&staff, &path).await;
        assert!(!page.contains("<script>alert"), "{path}: {page}");
        if path.starts_with("/admin/orders") {
            assert!(
                page.contains("&#60;script&#62;alert(&#39;owned&#39;)"),
                "{path}: {page}"
            );
        }
    }
}

#[tokio::test]
async fn every_answer_wears_the_security_headers() {
    let app = spawn_app().await;
    app.load_demo().await;
    app.add_staff().await;
    let (staff, _) = app.staff_browser().await;
    for (client, path) in [
        (&app.client, "/"),
        (&app.client, "/basket"),
        (&app.client, "/c/bakery"),
        (&app.client, "/no-such-page"),
        (&app.client, "/orders/not-a-real-token"),
        (&app.client, "/admin/login"),
        (&staff, "/admin/resources"),
        (&staff, "/admin/holds"),
    ] {
        let response = client
            .get(format!("{}{path}", app.address))
            .send()
            .await
            .unwrap();
        let headers = response.headers();
        assert_eq!(
            headers["content-security-policy"],
            holdfast::routes::CONTENT_SECURITY_POLICY,
            "{path}"
        );
        assert_eq!(headers["x-frame-options"], "DENY", "{path}");
        assert_eq!(headers["x-content-type-options"], "nosniff", "{path}");
        assert_eq!(headers["referrer-policy"], "no-referrer", "{path}");
        if path.starts_with("/admin") {
            assert_eq!(headers["cache-control"], "no-store", "{path}");
        }
    }
    // an order page: its link is its key, so it is never cached
    shopper_mid_checkout(&app, "wild-honey", 1).await;
    let token: String = sqlx::query_scalar("select token from orders")
        .fetch_one(&app.db.pool)
        .await
        .unwrap();
    let page = app
        .client
        .get(format!("{}/orders/{token}", app.address))
        .send()
        .await
        .unwrap();
    assert_eq!(page.status(), StatusCode::OK);
    assert_eq!(page.headers()["cache-control"], "no-store");
    assert_eq!(page.headers()["referrer-policy"], "no-referrer");
    // one character off is not found
    let mut near = token.clone();
    near.replace_range(0..1, if token.starts_with('0') { "1" } else { "0" });
    let missing = app
        .client
        .get(format!("{}/orders/{near}", app.address))
        .send()
        .await
        .unwrap();
    assert_eq!(missing.status(), StatusCode::NOT_FOUND);
    let policy = holdfast::routes::CONTENT_SECURITY_POLICY;
    assert!(!policy.contains("unsafe-inline") && !policy.contains("unsafe-eval"));
}

#[tokio::test]
async fn templates_carry_no_inline_script_or_style_for_the_policy_to_refuse() {
    let templates = concat!(env!("CARGO_MANIFEST_DIR"), "/templates");
    let mut checked = 0;
    let mut folders = vec![std::path::PathBuf::from(templates)];
    while let Some(folder) = folders.pop() {
        for entry in std::fs::read_dir(folder).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                folders.push(path);
                continue;
            }
            let text = std::fs::read_to_string(&path).unwrap();
            let name = path.display();
            // a mail is never served under the policy, and mail programs
            // read styles only inline: its templates style inline, and
            // still carry no script or handler
            let mail = path.parent().is_some_and(|p| p.ends_with("mail"));
            if !mail {
                assert!(!text.contains("style="), "{name}: inline style attribute");
                assert!(!text.contains("<style"), "{name}: inline style element");
            }
            for attribute in [
                " onclick=",
                " onload=",
                " onsubmit=",
                " onchange=",
                "javascript:",
            ] {
                assert!(!text.contains(attribute), "{name}: {attribute}");
            }
            for (at, _) in text.match_indices("<script") {
                let tag = &text[at..at + text[at..].find('>').unwrap()];
                assert!(
                    tag.contains("src=") || tag.contains("type=\"application/json\""),
                    "{name}: inline script {tag}"
                );
            }
            checked += 1;
        }
    }
    assert!(checked >= 15, "only {checked} templates found");
}

#[tokio::test]
async fn errors_say_what_went_wrong_and_nothing_internal() {
    let app = spawn_app().await;
    app.load_demo().await;
    let before = snapshot(&app.db.pool).await;
    let cases: Vec<(reqwest::RequestBuilder, StatusCode)> = vec![
        (
            app.client.get(format!("{}/nowhere", app.address)),
            StatusCode::NOT_FOUND,
        ),
        (
            app.client
                .post(format!("{}/basket/add", app.address))
                .form(&[("qty", "1")]),
            StatusCode::BAD_REQUEST,
        ),
        (
            app.client
                .post(format!("{}/basket/add", app.address))
                .header("content-type", "application/x-www-form-urlencoded")
                .body("product_id=wild-honey&qty=%ZZ"),
            StatusCode::BAD_REQUEST,
        ),
        (
            app.client
                .post(format!("{}/basket/add", app.address))
                .header("content-type", "application/x-www-form-urlencoded")
                .body(format!("product_id={}&qty=1", "a".repeat(40_000))),
            StatusCode::BAD_REQUEST,
        ),
        (
            app.client
                .post(format!("{}/admin/login", app.address))
                .body("x".repeat(100_000)),
            StatusCode::BAD_REQUEST,
        ),
        (
            app.client
                .get(format!("{}/orders/{}", app.address, "f".repeat(64))),
            StatusCode::NOT_FOUND,
        ),
    ];
    for (request, expected) in cases {
        let response = request.send().await.unwrap();
        assert_eq!(response.status(), expected);
        let body = response.text().await.unwrap();
        for leak in [
            "missing field",
            "sqlx",
            "panicked",
            "Error {",
            "invalid digit",
            "Payload",
            "postgres",
        ] {
            assert!(!body.contains(leak), "{leak:?} in {body}");
        }
        assert!(body.contains("<h1>"), "a page, not a bare message: {body}");
    }
    assert_eq!(snapshot(&app.db.pool).await, before);
}

#[tokio::test]
async fn an_expired_session_opens_nothing() {
    let app = spawn_app().await;
    app.add_staff().await;
    let (staff, _) = app.staff_browser().await;
    sqlx::query("update staff_sessions set expires_at = now() - interval '1 second'")
        .execute(&app.db.pool)
        .await
        .unwrap();
    let response = staff
        .get(format!("{}/admin/resources", app.address))
        .header(ACCEPT, "text/html")
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), StatusCode::SEE_OTHER);
    assert_eq!(location(&response), "/admin/login");
}

#[tokio::test]
async fn other_methods_and_oversized_forms_are_refused_with_the_headers_on() {
    let app = spawn_app().await;
    app.load_demo().await;
    app.add_staff().await;
    let (staff, csrf) = app.staff_browser().await;
    let before = snapshot(&app.db.pool).await;
    for method in [
        reqwest::Method::PUT,
        reqwest::Method::DELETE,
        reqwest::Method::PATCH,
    ] {
        // no token: refused before routing
        let response = staff
            .request(
                method.clone(),
                format!("{}/admin/resources/wild-honey/repair", app.address),
            )
            .send()
            .await
            .unwrap();
        assert_eq!(response.status(), StatusCode::FORBIDDEN, "{method}");
        // with the token: no such route
        let response = staff
            .request(
                method.clone(),
                format!("{}/admin/resources/wild-honey/repair", app.address),
            )
            .form(&[("csrf", csrf.as_str())])
            .send()
            .await
            .unwrap();
        assert_eq!(response.status(), StatusCode::NOT_FOUND, "{method}");
    }
    let huge = format!("csrf={csrf}&total=5&pad={}", "x".repeat(200_000));
    let response = staff
        .post(format!(
            "{}/admin/resources/wild-honey/capacity",
            app.address
        ))
        .header("content-type", "application/x-www-form-urlencoded")
        .body(huge)
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), StatusCode::PAYLOAD_TOO_LARGE);
    assert_eq!(
        response.headers()["content-security-policy"],
        holdfast::routes::CONTENT_SECURITY_POLICY
    );
    assert_eq!(response.headers()["cache-control"], "no-store");
    // refused at the edge, before the admin's own reading of the form
    assert!(
        response
            .text()
            .await
            .unwrap()
            .contains("nothing was changed")
    );
    let after = snapshot(&app.db.pool).await;
    assert_eq!(after, before);
}

#[tokio::test]
async fn activity_reads_as_sentences_fifty_a_page_with_none_repeated_or_skipped() {
    let app = spawn_app().await;
    app.load_demo().await;
    app.add_staff().await;
    let (staff, _csrf) = app.staff_browser().await;
    // 130 actions by an operator, besides the sign-in
    sqlx::query(
        "insert into staff_actions (operator, action, target, outcome, detail) \
         select 'ops', 'repair_resource', 'wild-honey', 'ok', '{}'::jsonb \
           from generate_series(1, 130)",
    )
    .execute(&app.db.pool)
    .await
    .unwrap();
    let total: i64 = sqlx::query_scalar("select count(*) from staff_actions")
        .fetch_one(&app.db.pool)
        .await
        .unwrap();
    let mut seen: Vec<i64> = Vec::new();
    let mut path = "/admin/activity".to_owned();
    let mut pages = 0;
    loop {
        let page = app.admin_page(&staff, &path).await;
        pages += 1;
        assert!(page.contains(&format!("{total} in all")), "{page}");
        let shown = page.matches("<li data-action=").count();
        seen.extend(
            page.split("of action ")
                .skip(1)
                .map(|rest| rest[..rest.find('<').unwrap()].parse::<i64>().unwrap()),
        );
        assert!(shown <= 50, "{shown}");
        match page.split("href=\"/admin/activity?before=").nth(1) {
            Some(rest) => {
                assert_eq!(shown, 50);
                path = format!(
                    "/admin/activity?before={}",
                    &rest[..rest.find('"').unwrap()]
                );
            }
            None => break,
        }
    }
    assert_eq!(pages, 3);
    assert_eq!(seen.len() as i64, total, "every action once");
    assert!(
        seen.windows(2).all(|w| w[0] > w[1]),
        "newest first, none twice"
    );
    let first = app.admin_page(&staff, "/admin/activity").await;
    assert!(
        first.contains("ops recounted Wild heather honey, 250 g"),
        "{first}"
    );
    let last = app.admin_page(&staff, &path).await;
    assert!(last.contains(&format!("{STAFF_EMAIL} signed in")), "{last}");
    // a page this list did not give
    let refused = staff
        .get(format!("{}/admin/activity?before=yesterday", app.address))
        .send()
        .await
        .unwrap();
    assert_eq!(refused.status(), StatusCode::BAD_REQUEST);
}
