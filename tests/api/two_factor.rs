//! Two-factor sign-in over HTTP: enrolling from the admin (the secret as
//! text, as a QR code and as an `otpauth://` address, confirmed by a code),
//! the second step of signing in (a code, a wrong code, a replayed code, a
//! recovery code once), its place in the login throttle, the owner's
//! setting that requires it of everyone who can refund, and secrets that
//! stay out of pages and logs.

use futures::future::join_all;
use holdfast::configuration::Secret;
use holdfast::staff::roles::Role;
use reqwest::StatusCode;
use reqwest::header::{ACCEPT, SET_COOKIE};

use holdfast_testkit::*;

pub const BOX_OFFICE_EMAIL: &str = "box@holdfast.test";
pub const DOOR_EMAIL: &str = "door@holdfast.test";

/// Seconds since the epoch.
pub fn now() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs()
}

/// The code an authenticator app shows at `at` for a base32 secret.
pub fn code_at(secret: &str, at: u64) -> String {
    let bytes = totp_rs::Secret::try_from_base32(secret.replace(' ', ""))
        .expect("a base32 secret")
        .to_vec();
    totp_rs::Builder::new()
        .with_secret(bytes)
        .build()
        .unwrap()
        .generate(at)
        .to_string()
}

/// A six-digit code that is right at no step the shop accepts now.
pub fn wrong_code(secret: &str) -> String {
    let right: Vec<String> = [-60i64, -30, 0, 30, 60]
        .iter()
        .map(|d| code_at(secret, (now() as i64 + d) as u64))
        .collect();
    (0..1_000_000)
        .map(|n| format!("{n:06}"))
        .find(|c| !right.contains(c))
        .unwrap()
}

/// What enrolling left the member with.
pub struct Enrolled {
    /// Base32, without spaces.
    pub secret: String,
    pub recovery_codes: Vec<String>,
}

fn between<'a>(page: &'a str, start: &str, end: &str) -> Option<&'a str> {
    let from = page.find(start)? + start.len();
    let to = page[from..].find(end)? + from;
    Some(&page[from..to])
}

/// The recovery codes a page shows (once).
fn recovery_codes(page: &str) -> Vec<String> {
    let list = between(page, "class=\"recovery-list\">", "</ol>").unwrap_or("");
    list.split("<code>")
        .skip(1)
        .map(|item| item.split("</code>").next().unwrap().to_owned())
        .collect()
}

// the steps, against any shop's address (a spawned app, or the binary)

async fn page(base: &str, staff: &reqwest::Client, path: &str) -> String {
    let response = staff.get(format!("{base}{path}")).send().await.unwrap();
    assert_eq!(response.status(), StatusCode::OK, "GET {path}");
    response.text().await.unwrap()
}

async fn post(
    base: &str,
    staff: &reqwest::Client,
    path: &str,
    form: &[(&str, &str)],
) -> reqwest::Response {
    staff
        .post(format!("{base}{path}"))
        .form(form)
        .send()
        .await
        .unwrap()
}

/// The password step from a fresh browser.
async fn password_step(
    base: &str,
    email: &str,
    password: &str,
) -> (reqwest::Client, reqwest::Response) {
    let staff = browser();
    let form = page(base, &staff, "/admin/login").await;
    let csrf = hidden(&form, "csrf");
    let response = post(
        base,
        &staff,
        "/admin/login",
        &[("email", email), ("password", password), ("csrf", &csrf)],
    )
    .await;
    (staff, response)
}

/// Enrols a signed-in browser's account: start, read the secret off the
/// page, confirm with a code.
pub async fn enrol(base: &str, staff: &reqwest::Client) -> Enrolled {
    let shown = page(base, staff, "/admin/two-factor").await;
    let csrf = hidden(&shown, "csrf");
    let started = post(base, staff, "/admin/two-factor/start", &[("csrf", &csrf)]).await;
    assert_eq!(location(&started), "/admin/two-factor");
    let shown = page(base, staff, "/admin/two-factor").await;
    let secret = between(&shown, "id=\"secret\">", "</code>")
        .expect("the secret as text")
        .replace(' ', "");
    let confirmed = post(
        base,
        staff,
        "/admin/two-factor/confirm",
        &[("csrf", &csrf), ("code", &code_at(&secret, now()))],
    )
    .await;
    assert_eq!(confirmed.status(), StatusCode::OK);
    let shown = confirmed.text().await.unwrap();
    let recovery_codes = recovery_codes(&shown);
    assert_eq!(recovery_codes.len(), 10, "{shown}");
    Enrolled {
        secret,
        recovery_codes,
    }
}

/// The password step, then `code` on the second step, from one fresh
/// browser: the browser and the second step's answer.
pub async fn sign_in_with_code(
    base: &str,
    email: &str,
    password: &str,
    code: &str,
) -> (reqwest::Client, reqwest::Response) {
    let (staff, response) = password_step(base, email, password).await;
    assert_eq!(response.status(), StatusCode::SEE_OTHER);
    assert_eq!(location(&response), "/admin/login/code");
    let answer = second_step(base, &staff, code).await;
    (staff, answer)
}

/// One code typed on the second step's form.
pub async fn second_step(base: &str, staff: &reqwest::Client, code: &str) -> reqwest::Response {
    let form = page(base, staff, "/admin/login/code").await;
    let csrf = hidden(&form, "csrf");
    post(
        base,
        staff,
        "/admin/login/code",
        &[("code", code), ("csrf", &csrf)],
    )
    .await
}

pub async fn log_out(base: &str, staff: &reqwest::Client) {
    let shown = page(base, staff, "/admin/two-factor").await;
    let out = post(
        base,
        staff,
        "/admin/logout",
        &[("csrf", &hidden(&shown, "csrf"))],
    )
    .await;
    assert_eq!(location(&out), "/admin/login");
}

async fn actions(app: &TestApp, action: &str) -> Vec<(String, String, serde_json::Value)> {
    sqlx::query_as(
        "select coalesce(s.email, a.operator), a.outcome, a.detail from staff_actions a \
           left join staff s on s.id = a.staff_id where a.action = $1 order by a.id",
    )
    .bind(action)
    .fetch_all(&app.db.pool)
    .await
    .unwrap()
}

#[tokio::test]
async fn an_owner_enrols_with_a_code_and_then_signs_in_with_the_password_and_a_code() {
    let app = spawn_app().await;
    app.add_staff().await;
    let (staff, csrf) = app.staff_browser().await;
    let page = app.admin_page(&staff, "/admin/two-factor").await;
    assert!(page.contains("<strong>off</strong>"), "{page}");
    // a GET never makes a secret
    assert!(!page.contains("id=\"secret\""));
    let rows: i64 = sqlx::query_scalar("select count(*) from staff_two_factor")
        .fetch_one(&app.db.pool)
        .await
        .unwrap();
    assert_eq!(rows, 0);

    app.admin_post(&staff, "/admin/two-factor/start", &[("csrf", &csrf)])
        .await;
    let page = app.admin_page(&staff, "/admin/two-factor").await;
    let secret = between(&page, "id=\"secret\">", "</code>")
        .unwrap()
        .replace(' ', "");
    assert_eq!(secret.len(), 32, "160 bits in base32: {secret}");
    // the QR code holds the otpauth address the page spells out
    let uri = between(&page, "id=\"otpauth\">", "</code>")
        .unwrap()
        .replace("&amp;", "&")
        .replace("&#38;", "&");
    assert_eq!(
        uri,
        format!(
            "otpauth://totp/Holdfast%3Agrace%40holdfast%2Etest?secret={secret}&issuer=Holdfast\
             &algorithm=SHA1&digits=6&period=30"
        )
    );
    let data = between(&page, "src=\"data:image/png;base64,", "\"").expect("a QR image");
    use base64::Engine;
    let png = base64::engine::general_purpose::STANDARD
        .decode(data)
        .unwrap();
    assert_eq!(crate::mail::decode_qr(&png), uri);
    // the database keeps it sealed: neither its bytes nor its base32
    let sealed: Vec<u8> = sqlx::query_scalar("select secret_sealed from staff_two_factor")
        .fetch_one(&app.db.pool)
        .await
        .unwrap();
    let raw = totp_rs::Secret::try_from_base32(&secret).unwrap().to_vec();
    assert!(!sealed.windows(raw.len()).any(|w| w == raw.as_slice()));
    assert!(!String::from_utf8_lossy(&sealed).contains(&secret));

    // a wrong code turns nothing on
    let wrong = app
        .admin_post(
            &staff,
            "/admin/two-factor/confirm",
            &[("csrf", &csrf), ("code", &wrong_code(&secret))],
        )
        .await;
    assert!(location(&wrong).ends_with("notice=two_factor_wrong_code"));
    let page = app.admin_page(&staff, &location(&wrong)).await;
    assert!(page.contains("That code is not right"), "{page}");
    assert!(page.contains("id=\"secret\""), "still enrolling");

    let confirmed = app
        .admin_post(
            &staff,
            "/admin/two-factor/confirm",
            &[("csrf", &csrf), ("code", &code_at(&secret, now()))],
        )
        .await;
    assert_eq!(confirmed.status(), StatusCode::OK);
    let page = confirmed.text().await.unwrap();
    let codes = recovery_codes(&page);
    assert_eq!(codes.len(), 10);
    assert!(page.contains("shown only now"));
    // from now on no page shows the secret or the codes again
    for path in [
        "/admin/two-factor",
        "/admin/resources",
        "/admin/staff",
        "/admin/activity",
    ] {
        let page = app.admin_page(&staff, path).await;
        assert!(!page.contains(&secret), "{path} shows the secret");
        assert!(!page.contains("otpauth://"), "{path}");
        for code in &codes {
            assert!(
                !page.contains(code.as_str()),
                "{path} shows a recovery code"
            );
        }
    }
    let page = app.admin_page(&staff, "/admin/two-factor").await;
    assert!(page.contains("10 of 10"), "{page}");
    let hashes: Vec<Vec<u8>> = sqlx::query_scalar("select code_hash from staff_recovery_codes")
        .fetch_all(&app.db.pool)
        .await
        .unwrap();
    assert_eq!(hashes.len(), 10);
    for hash in &hashes {
        for code in &codes {
            assert!(!String::from_utf8_lossy(hash).contains(code.as_str()));
        }
    }
    log_out(&app.address, &staff).await;

    // the password alone opens nothing now: it leads to the code
    let (half, response) = app.try_login(STAFF_EMAIL, STAFF_PASSWORD).await;
    assert_eq!(location(&response), "/admin/login/code");
    let cookies: Vec<&str> = response
        .headers()
        .get_all(SET_COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .collect();
    assert!(
        !cookies.iter().any(|c| c.starts_with("hf_staff=")),
        "{cookies:?}"
    );
    let code_cookie = cookies
        .iter()
        .find(|c| c.starts_with("hf_login_code="))
        .unwrap();
    assert!(code_cookie.contains("HttpOnly") && code_cookie.contains("SameSite=Strict"));
    assert!(code_cookie.contains("Path=/admin/login"));
    let before = half
        .get(format!("{}/admin/resources", app.address))
        .header(ACCEPT, "text/html")
        .send()
        .await
        .unwrap();
    assert_eq!(location(&before), "/admin/login", "not signed in yet");
    let form = app
        .client
        .get(format!("{}/admin/login/code", app.address))
        .send()
        .await
        .unwrap();
    assert_eq!(
        location(&form),
        "/admin/login",
        "no code form without the cookie"
    );

    // the form's token is the challenge's own: without it, no code is checked
    let forged = half
        .post(format!("{}/admin/login/code", app.address))
        .form(&[("code", code_at(&secret, now() + 30).as_str())])
        .send()
        .await
        .unwrap();
    assert_eq!(forged.status(), StatusCode::FORBIDDEN);
    let refused = second_step(&app.address, &half, &wrong_code(&secret)).await;
    assert_eq!(refused.status(), StatusCode::UNAUTHORIZED);
    assert!(
        refused
            .text()
            .await
            .unwrap()
            .contains("That code is not right")
    );
    // the enrolment spent the step it confirmed: the next one signs in
    let signed = second_step(&app.address, &half, &code_at(&secret, now() + 30)).await;
    assert_eq!(signed.status(), StatusCode::SEE_OTHER);
    assert_eq!(location(&signed), "/admin");
    app.admin_page(&half, "/admin/resources").await;
    let logins = actions(&app, "login").await;
    let outcomes: Vec<&str> = logins.iter().map(|(_, o, _)| o.as_str()).collect();
    assert_eq!(outcomes, ["ok", "wrong_code", "ok"]);
    assert_eq!(logins[2].2["second_factor"], "app");
    let on = actions(&app, "two_factor_on").await;
    assert_eq!(on.len(), 1);
    assert_eq!(on[0].0, STAFF_EMAIL);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_code_signs_in_once_and_a_recovery_code_once() {
    let app = spawn_app().await;
    app.add_staff().await;
    let (staff, _) = app.staff_browser().await;
    let enrolled = enrol(&app.address, &staff).await;
    log_out(&app.address, &staff).await;

    // two browsers racing with one fresh code (the step after the one
    // the enrolment spent): one signs in
    let next = code_at(&enrolled.secret, now() + 30);
    let mut racers = Vec::new();
    for _ in 0..2 {
        let (browser, response) = app.try_login(STAFF_EMAIL, STAFF_PASSWORD).await;
        assert_eq!(location(&response), "/admin/login/code");
        racers.push(browser);
    }
    let answers = join_all(racers.iter().map(|b| second_step(&app.address, b, &next))).await;
    let statuses: Vec<StatusCode> = answers.iter().map(|a| a.status()).collect();
    assert_eq!(
        statuses
            .iter()
            .filter(|s| **s == StatusCode::SEE_OTHER)
            .count(),
        1,
        "{statuses:?}"
    );
    assert!(statuses.contains(&StatusCode::UNAUTHORIZED), "{statuses:?}");
    // the same code again, within its window: refused
    let (_, replayed) = sign_in_with_code(&app.address, STAFF_EMAIL, STAFF_PASSWORD, &next).await;
    assert_eq!(replayed.status(), StatusCode::UNAUTHORIZED);
    let logins = actions(&app, "login").await;
    assert_eq!(logins.last().unwrap().1, "code_already_used");

    // a recovery code, once
    let recovery = &enrolled.recovery_codes[3];
    let (rescued, response) = sign_in_with_code(
        &app.address,
        STAFF_EMAIL,
        STAFF_PASSWORD,
        &recovery.to_uppercase(),
    )
    .await;
    assert_eq!(
        location(&response),
        "/admin/two-factor?notice=recovery_code_used&left=9"
    );
    let page = app.admin_page(&rescued, &location(&response)).await;
    assert!(page.contains("9 left"), "{page}");
    assert!(page.contains("9 of 10"), "{page}");
    log_out(&app.address, &rescued).await;
    let (_, again) = sign_in_with_code(&app.address, STAFF_EMAIL, STAFF_PASSWORD, recovery).await;
    assert_eq!(again.status(), StatusCode::UNAUTHORIZED);
    let used: i64 =
        sqlx::query_scalar("select count(*) from staff_recovery_codes where used_at is not null")
            .fetch_one(&app.db.pool)
            .await
            .unwrap();
    assert_eq!(used, 1);
    let logins = actions(&app, "login").await;
    let recovered: Vec<_> = logins
        .iter()
        .filter(|(_, o, d)| o == "ok" && d["second_factor"] == "recovery_code")
        .collect();
    assert_eq!(recovered.len(), 1);
    assert_eq!(logins.last().unwrap().1, "code_already_used");

    // new recovery codes, with a current code: the old ones stop working
    let (staff, csrf) = {
        let (b, r) = sign_in_with_code(
            &app.address,
            STAFF_EMAIL,
            STAFF_PASSWORD,
            &enrolled.recovery_codes[4],
        )
        .await;
        let page = app.admin_page(&b, &location(&r)).await;
        (b, hidden(&page, "csrf"))
    };
    let made = app
        .admin_post(
            &staff,
            "/admin/two-factor/recovery-codes",
            &[("csrf", &csrf), ("code", &enrolled.recovery_codes[5])],
        )
        .await;
    assert_eq!(made.status(), StatusCode::OK);
    let fresh = recovery_codes(&made.text().await.unwrap());
    assert_eq!(fresh.len(), 10);
    log_out(&app.address, &staff).await;
    let (_, old) = sign_in_with_code(
        &app.address,
        STAFF_EMAIL,
        STAFF_PASSWORD,
        &enrolled.recovery_codes[6],
    )
    .await;
    assert_eq!(old.status(), StatusCode::UNAUTHORIZED);
    let (_, new) = sign_in_with_code(&app.address, STAFF_EMAIL, STAFF_PASSWORD, &fresh[0]).await;
    assert_eq!(new.status(), StatusCode::SEE_OTHER);
}

#[tokio::test]
async fn wrong_codes_count_in_the_login_throttle_and_a_right_password_forgets_nothing() {
    let app = spawn_app().await;
    app.add_staff().await;
    let (staff, _) = app.staff_browser().await;
    let enrolled = enrol(&app.address, &staff).await;
    log_out(&app.address, &staff).await;
    let pair = format!("pair:127.0.0.1 {STAFF_EMAIL}");
    let attempts = || async {
        sqlx::query_scalar::<_, i32>("select attempts from login_throttle where key = $1")
            .bind(&pair)
            .fetch_optional(&app.db.pool)
            .await
            .unwrap()
    };
    let wrong = wrong_code(&enrolled.secret);

    // one challenge takes five wrong codes, then the password is asked again
    let (browser, response) = app.try_login(STAFF_EMAIL, STAFF_PASSWORD).await;
    assert_eq!(location(&response), "/admin/login/code");
    assert_eq!(
        attempts().await,
        Some(1),
        "the right password is counted and kept"
    );
    for n in 1..=4 {
        let answer = second_step(&app.address, &browser, &wrong).await;
        assert_eq!(answer.status(), StatusCode::UNAUTHORIZED, "wrong code {n}");
    }
    let fifth = second_step(&app.address, &browser, &wrong).await;
    assert_eq!(fifth.status(), StatusCode::UNAUTHORIZED);
    assert!(fifth.text().await.unwrap().contains("Please log in again"));
    let gone = browser
        .get(format!("{}/admin/login/code", app.address))
        .send()
        .await
        .unwrap();
    assert_eq!(location(&gone), "/admin/login", "the challenge is spent");
    assert_eq!(attempts().await, Some(6));

    // the password again, three more wrong codes: the tenth answer locks
    let (browser, _) = app.try_login(STAFF_EMAIL, STAFF_PASSWORD).await;
    for _ in 0..2 {
        let answer = second_step(&app.address, &browser, &wrong).await;
        assert_eq!(answer.status(), StatusCode::UNAUTHORIZED);
    }
    let tenth = second_step(&app.address, &browser, &wrong).await;
    assert_eq!(tenth.status(), StatusCode::TOO_MANY_REQUESTS);
    assert!(tenth.headers().contains_key("retry-after"));
    // locked: the right password and then the right code are refused too
    let (_, locked) = app.try_login(STAFF_EMAIL, STAFF_PASSWORD).await;
    assert_eq!(locked.status(), StatusCode::TOO_MANY_REQUESTS);
    let sessions: i64 = sqlx::query_scalar("select count(*) from staff_sessions")
        .fetch_one(&app.db.pool)
        .await
        .unwrap();
    assert_eq!(sessions, 0);
    // once the lock has passed, the password and a right code sign in and
    // the e-mail's counts are forgotten
    sqlx::query("update login_throttle set locked_until = now() - interval '1 second'")
        .execute(&app.db.pool)
        .await
        .unwrap();
    let (_, signed) = sign_in_with_code(
        &app.address,
        STAFF_EMAIL,
        STAFF_PASSWORD,
        &code_at(&enrolled.secret, now() + 30),
    )
    .await;
    assert_eq!(signed.status(), StatusCode::SEE_OTHER);
    assert_eq!(attempts().await, None);
}

#[tokio::test]
async fn the_owner_requires_two_factor_of_refunders_and_they_enrol_before_anything_else() {
    let app = spawn_app().await;
    app.load_demo().await;
    app.add_staff().await;
    app.add_staff_as(BOX_OFFICE_EMAIL, Role::BoxOffice).await;
    app.add_staff_as(DOOR_EMAIL, Role::Door).await;
    let (owner, csrf) = app.staff_browser().await;
    let page = app.admin_page(&owner, "/admin/settings").await;
    assert!(page.contains("owner and box office"), "{page}");
    // the owner without two-factor cannot require it (it would shut them out)
    let refused = app
        .admin_post(
            &owner,
            "/admin/settings",
            &[("csrf", &csrf), ("two_factor_for_refunds", "on")],
        )
        .await;
    assert!(location(&refused).ends_with("notice=enrol_first"));
    assert!(
        !holdfast::staff::two_factor::required_for_refunds(&app.db.pool)
            .await
            .unwrap()
    );
    // a box office session already open before the setting changes
    let (early, _) = app.signed_in(BOX_OFFICE_EMAIL, PASSWORD).await;
    enrol(&app.address, &owner).await;
    let saved = app
        .admin_post(
            &owner,
            "/admin/settings",
            &[("csrf", &csrf), ("two_factor_for_refunds", "on")],
        )
        .await;
    assert!(location(&saved).ends_with("notice=settings_saved"));
    let page = app.admin_page(&owner, "/admin/settings").await;
    assert!(page.contains("value=\"on\" checked"), "{page}");
    let recorded = actions(&app, "change_setting").await;
    assert_eq!(
        recorded
            .iter()
            .map(|(who, o, _)| (who.as_str(), o.as_str()))
            .collect::<Vec<_>>(),
        [(STAFF_EMAIL, "on")]
    );

    // the open session is confined from its next request
    let confined = early
        .get(format!("{}/admin/orders", app.address))
        .send()
        .await
        .unwrap();
    assert_eq!(location(&confined), "/admin/two-factor");

    // a box office account is sent to enrol right after its password, and
    // reaches nothing else until it has
    let (boxed, response) = app.try_login(BOX_OFFICE_EMAIL, PASSWORD).await;
    assert_eq!(location(&response), "/admin/two-factor");
    let page = app.admin_page(&boxed, "/admin/two-factor").await;
    assert!(page.contains("set it up to go on"), "{page}");
    assert!(!page.contains("href=\"/admin/orders\""), "no links: {page}");
    let csrf = hidden(&page, "csrf");
    for path in ["/admin/orders", "/admin", "/admin/redeem"] {
        let answer = boxed
            .get(format!("{}{path}", app.address))
            .send()
            .await
            .unwrap();
        assert_eq!(answer.status(), StatusCode::SEE_OTHER, "{path}");
        assert_eq!(location(&answer), "/admin/two-factor", "{path}");
    }
    let order = app
        .start(&browser(), &Purchase::of("wild-honey", 1))
        .await
        .order_id
        .to_string();
    let posted = app
        .admin_post(
            &boxed,
            &format!("/admin/orders/{order}/refund"),
            &[("csrf", &csrf), ("reason", "x")],
        )
        .await;
    assert_eq!(posted.status(), StatusCode::FORBIDDEN);
    assert!(
        posted
            .text()
            .await
            .unwrap()
            .contains("Two-factor sign-in first")
    );
    let enrolled = enrol(&app.address, &boxed).await;
    let orders = app.admin_page(&boxed, "/admin/orders").await;
    assert!(orders.contains("id=\"orders\""), "{orders}");
    // and it cannot turn it off while the owner requires it
    let page = app.admin_page(&boxed, "/admin/two-factor").await;
    assert!(
        !page.contains("/admin/two-factor/off"),
        "no form to turn it off"
    );
    let off = app
        .admin_post(
            &boxed,
            "/admin/two-factor/off",
            &[
                ("csrf", &csrf),
                ("code", &code_at(&enrolled.secret, now() + 30)),
            ],
        )
        .await;
    assert!(location(&off).ends_with("notice=two_factor_required"));
    // the next sign-in asks for its code, then goes to Orders
    log_out(&app.address, &boxed).await;
    let (_, response) = sign_in_with_code(
        &app.address,
        BOX_OFFICE_EMAIL,
        PASSWORD,
        &code_at(&enrolled.secret, now() + 30),
    )
    .await;
    assert_eq!(location(&response), "/admin/orders");

    // the door cannot refund: not asked
    let (_, response) = app.try_login(DOOR_EMAIL, PASSWORD).await;
    assert_eq!(location(&response), "/admin/redeem");
}

/// `holdfast serve` on `port` with this session key, its logs (at the
/// most talkative level) to `log`, once it answers.
async fn serve_with_key(
    db: &TestDb,
    port: u16,
    key: &str,
    log: &std::path::Path,
) -> std::process::Child {
    let mut child = crate::cli::serve_without_keys(
        db,
        &[
            ("HOLDFAST_ADDR", format!("127.0.0.1:{port}")),
            ("HOLDFAST_SESSION_KEY", key.to_owned()),
            ("RUST_LOG", "debug".to_owned()),
        ],
    )
    .stdout(std::process::Stdio::null())
    .stderr(std::fs::File::create(log).unwrap())
    .spawn()
    .unwrap();
    for _ in 0..300 {
        if http_client()
            .get(format!("http://127.0.0.1:{port}/healthz"))
            .send()
            .await
            .is_ok()
        {
            return child;
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    let _ = child.kill();
    let _ = child.wait();
    panic!("serve did not come up");
}

/// The real binary through enrolment and every kind of sign-in: neither
/// the secret, nor a code, nor a recovery code, nor the password is ever
/// written to its logs. Then served with another session key: the app's
/// codes no longer open (the secret was sealed under the old one) and a
/// recovery code still signs in.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn secrets_and_codes_never_reach_the_logs_and_recovery_codes_outlive_the_key() {
    let db = TestDb::new().await;
    holdfast::staff::add_staff(
        &db.pool,
        &holdfast::staff::StaffEmail::parse(STAFF_EMAIL).unwrap(),
        &Secret::new(STAFF_PASSWORD),
    )
    .await
    .unwrap();
    let port = free_port();
    let base = format!("http://127.0.0.1:{port}");
    let log = std::env::temp_dir().join(format!("holdfast-two-factor-{port}.log"));
    let mut child = serve_with_key(&db, port, &"s".repeat(40), &log).await;
    let (staff, response) = password_step(&base, STAFF_EMAIL, STAFF_PASSWORD).await;
    assert_eq!(location(&response), "/admin");
    let enrolled = enrol(&base, &staff).await;
    log_out(&base, &staff).await;
    let wrong = wrong_code(&enrolled.secret);
    let (browser, _) = password_step(&base, STAFF_EMAIL, STAFF_PASSWORD).await;
    second_step(&base, &browser, &wrong).await;
    let right = code_at(&enrolled.secret, now() + 30);
    let signed = second_step(&base, &browser, &right).await;
    assert_eq!(signed.status(), StatusCode::SEE_OTHER);
    log_out(&base, &browser).await;
    let (_, rescued) = sign_in_with_code(
        &base,
        STAFF_EMAIL,
        STAFF_PASSWORD,
        &enrolled.recovery_codes[0],
    )
    .await;
    assert_eq!(rescued.status(), StatusCode::SEE_OTHER);
    tokio::time::sleep(std::time::Duration::from_millis(300)).await;
    child.kill().unwrap();
    child.wait().unwrap();
    let mut text = std::fs::read_to_string(&log).unwrap();
    assert!(
        text.contains("staff logged in with a second factor"),
        "{text}"
    );

    // another key: the app's code is refused, and the log says why
    let mut child = serve_with_key(&db, port, &"t".repeat(40), &log).await;
    let (_, refused) = sign_in_with_code(
        &base,
        STAFF_EMAIL,
        STAFF_PASSWORD,
        &code_at(&enrolled.secret, now() + 30),
    )
    .await;
    assert_eq!(refused.status(), StatusCode::UNAUTHORIZED);
    let (_, rescued) = sign_in_with_code(
        &base,
        STAFF_EMAIL,
        STAFF_PASSWORD,
        &enrolled.recovery_codes[1],
    )
    .await;
    assert_eq!(rescued.status(), StatusCode::SEE_OTHER);
    tokio::time::sleep(std::time::Duration::from_millis(300)).await;
    child.kill().unwrap();
    child.wait().unwrap();
    let second = std::fs::read_to_string(&log).unwrap();
    std::fs::remove_file(&log).unwrap();
    assert!(second.contains("cannot be opened"), "{second}");
    text.push_str(&second);

    // six digits turn up by chance inside ids and times: a code counts as
    // logged when it stands alone
    for code in [&wrong, &right] {
        let alone = text.match_indices(code.as_str()).any(|(at, _)| {
            let before = text[..at].chars().next_back();
            let after = text[at + code.len()..].chars().next();
            !before.is_some_and(|c| c.is_ascii_alphanumeric())
                && !after.is_some_and(|c| c.is_ascii_alphanumeric())
        });
        assert!(!alone, "the code {code} is in the logs");
    }
    let raw = totp_rs::Secret::try_from_base32(&enrolled.secret)
        .unwrap()
        .to_vec();
    let mut never = vec![
        enrolled.secret.clone(),
        hex::encode(&raw),
        STAFF_PASSWORD.to_owned(),
    ];
    never.extend(enrolled.recovery_codes.iter().cloned());
    never.extend(
        enrolled
            .recovery_codes
            .iter()
            .map(|code| code.replace('-', "")),
    );
    for secret in never {
        assert!(!text.contains(&secret), "{secret} is in the logs");
    }
}

#[tokio::test]
async fn turning_it_off_takes_a_current_code_counted_like_a_sign_in() {
    let app = spawn_app().await;
    app.add_staff().await;
    let (staff, csrf) = app.staff_browser().await;
    let enrolled = enrol(&app.address, &staff).await;
    let wrong = wrong_code(&enrolled.secret);
    // a stolen session cookie does not buy unlimited guesses: the login
    // throttle counts these codes too (signing in forgot the earlier counts)
    for n in 1..=9 {
        let answer = app
            .admin_post(
                &staff,
                "/admin/two-factor/off",
                &[("csrf", &csrf), ("code", &wrong)],
            )
            .await;
        assert!(
            location(&answer).ends_with("notice=two_factor_wrong_code"),
            "answer {n}: {}",
            location(&answer)
        );
    }
    let tenth = app
        .admin_post(
            &staff,
            "/admin/two-factor/off",
            &[("csrf", &csrf), ("code", &wrong)],
        )
        .await;
    assert!(location(&tenth).ends_with("notice=two_factor_locked"));
    let locked = app
        .admin_post(
            &staff,
            "/admin/two-factor/off",
            &[("csrf", &csrf), ("code", &enrolled.recovery_codes[0])],
        )
        .await;
    assert!(location(&locked).ends_with("notice=two_factor_locked"));
    assert!(actions(&app, "two_factor_off").await.is_empty());
    sqlx::query("update login_throttle set locked_until = now() - interval '1 second'")
        .execute(&app.db.pool)
        .await
        .unwrap();
    let off = app
        .admin_post(
            &staff,
            "/admin/two-factor/off",
            &[("csrf", &csrf), ("code", &enrolled.recovery_codes[0])],
        )
        .await;
    assert!(location(&off).ends_with("notice=two_factor_off"));
    let page = app.admin_page(&staff, &location(&off)).await;
    assert!(page.contains("<strong>off</strong>"), "{page}");
    let recorded = actions(&app, "two_factor_off").await;
    assert_eq!(recorded.len(), 1);
    assert_eq!(recorded[0].2["confirmed_with"], "recovery_code");
    let left: i64 = sqlx::query_scalar("select count(*) from staff_two_factor")
        .fetch_one(&app.db.pool)
        .await
        .unwrap();
    assert_eq!(left, 0);
    log_out(&app.address, &staff).await;
    let (_, response) = app.try_login(STAFF_EMAIL, STAFF_PASSWORD).await;
    assert_eq!(location(&response), "/admin", "the password alone again");
}
