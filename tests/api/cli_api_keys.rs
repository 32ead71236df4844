//! `holdfast api-keys` run as the real binary against the shop's database:
//! a key made at the command line signs JSON API requests with exactly its
//! scopes until it is revoked, its token is printed once and never again
//! (not by `list`, not in any log), and bad input exits non-zero having
//! changed nothing.

use std::process::Output;

use holdfast::audit::Actor;
use holdfast::routes::api::{ROUTES, Verb};
use holdfast::staff::api_keys::{self, Scope};
use holdfast_testkit::*;
use reqwest::StatusCode;

/// The command, logging everything it logs (debug, sqlx's statements
/// too), so a test can look for secrets in its logs.
fn holdfast(db: &TestDb, args: &[&str]) -> Output {
    std::process::Command::new(env!("CARGO_BIN_EXE_holdfast"))
        .arg("--db")
        .arg(&db.url)
        .args(args)
        .env_remove("DATABASE_URL")
        .env("RUST_LOG", "debug")
        .output()
        .unwrap_or_else(|e| panic!("run holdfast: {e}"))
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// What every route of the API answers this token: the routes that need a
/// scope, each with its status.
async fn every_route(app: &TestApp, token: &str) -> Vec<(Scope, String, StatusCode)> {
    let client = holdfast::payments::http::client(std::time::Duration::from_secs(30));
    let mut answers = Vec::new();
    for route in ROUTES {
        let Some(scope) = route.scope else { continue };
        let path = format!(
            "/api/v1{}",
            route
                .path
                .replace("{token}", "nosuchtoken")
                .replace("{id}", "00000000-0000-0000-0000-000000000000")
                .replace("{code}", "NO-SUCH-VOUCHER")
        );
        let url = format!("{}{path}", app.address);
        let request = match route.verb {
            Verb::Get => client.get(&url),
            Verb::Post => client
                .post(&url)
                .header("idempotency-key", "cli-key-test")
                .body("{}"),
        };
        let status = request.bearer_auth(token).send().await.unwrap().status();
        answers.push((scope, path, status));
    }
    answers
}

/// Everything `api-keys` could change, as one fingerprint.
async fn fingerprint(db: &TestDb) -> Vec<String> {
    let mut prints = snapshot(&db.pool).await;
    prints.push(
        sqlx::query_scalar(
            "select count(*) || ':' || coalesce(md5(string_agg(k::text, '|' order by k.id)), '') \
               from api_keys k",
        )
        .fetch_one(&db.pool)
        .await
        .unwrap(),
    );
    prints
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_key_made_at_the_command_line_signs_with_exactly_its_scopes_until_revoked() {
    let app = spawn_app().await;
    app.load_demo().await;

    let added = holdfast(
        &app.db,
        &[
            "--json",
            "api-keys",
            "add",
            "Door scanners",
            "--scopes",
            "redeem, read_orders,redeem",
        ],
    );
    let made = json_output(&added);
    let token = made["token"].as_str().unwrap().to_owned();
    let id = made["id"].as_str().unwrap().to_owned();
    assert!(token.starts_with(&format!("hf_{id}_")), "{token}");
    let secret = token.rsplit('_').next().unwrap().to_owned();
    assert_eq!(made["name"], "Door scanners");
    assert_eq!(made["scopes"], serde_json::json!(["redeem", "read_orders"]));
    assert!(
        made["created_by"]
            .as_str()
            .unwrap()
            .starts_with("command line (")
    );
    // the token once, on standard output: not in its logs, nor stored
    assert_eq!(text(&added.stdout).matches(&secret).count(), 1);
    assert!(!text(&added.stderr).contains(&secret), "logged");
    let stored: Vec<String> = sqlx::query_scalar("select k::text from api_keys k")
        .fetch_all(&app.db.pool)
        .await
        .unwrap();
    assert!(!stored.join("\n").contains(&secret), "stored in the clear");

    // exactly its scopes: every route of its scopes takes it, every other
    // route refuses it for its scope
    let answers = every_route(&app, &token).await;
    assert!(answers.len() >= 5);
    for (scope, path, status) in &answers {
        if [Scope::Redeem, Scope::ReadOrders].contains(scope) {
            assert!(
                *status != StatusCode::FORBIDDEN && *status != StatusCode::UNAUTHORIZED,
                "{path}: {status}"
            );
        } else {
            assert_eq!(*status, StatusCode::FORBIDDEN, "{path}");
        }
    }
    let orders = format!("{}/api/v1/orders", app.address);
    let client = holdfast::payments::http::client(std::time::Duration::from_secs(30));
    let answer = client
        .get(&orders)
        .bearer_auth(&token)
        .send()
        .await
        .unwrap();
    assert_eq!(answer.status(), StatusCode::OK);

    // list: the key, its use, who made it; never its token, in text or JSON
    for args in [vec!["--json", "api-keys", "list"], vec!["api-keys", "list"]] {
        let listed = holdfast(&app.db, &args);
        assert!(listed.status.success(), "{}", text(&listed.stderr));
        let (stdout, stderr) = (text(&listed.stdout), text(&listed.stderr));
        assert!(
            stdout.contains(&id) && stdout.contains("Door scanners"),
            "{stdout}"
        );
        assert!(!stdout.contains(&secret) && !stderr.contains(&secret));
        assert!(!stdout.contains("token"), "{stdout}");
    }
    let listed = json_output(&holdfast(&app.db, &["--json", "api-keys", "list"]));
    let key = &listed.as_array().unwrap()[0];
    assert_eq!(key["scopes"], serde_json::json!(["redeem", "read_orders"]));
    assert!(key["last_used_at"].is_string(), "its use is shown: {key}");
    assert!(key["revoked_at"].is_null());
    assert!(
        holdfast(&app.db, &["api-keys", "list"])
            .stdout
            .ends_with(b"live\n")
    );

    // revoked by its name: 401 on every route from now on
    let revoked = holdfast(&app.db, &["--json", "api-keys", "revoke", "Door scanners"]);
    assert_eq!(
        json_output(&revoked),
        serde_json::json!({ "id": id, "name": "Door scanners", "revoked": true })
    );
    assert!(!text(&revoked.stderr).contains(&secret));
    // the shop signs from memory, which hears of a revocation within a
    // second (another process made it)
    let since = std::time::Instant::now();
    while every_route(&app, &token)
        .await
        .iter()
        .any(|(_, _, status)| *status != StatusCode::UNAUTHORIZED)
    {
        assert!(
            since.elapsed() < std::time::Duration::from_secs(1),
            "the revoked key still signs"
        );
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    for (_, path, status) in every_route(&app, &token).await {
        assert_eq!(status, StatusCode::UNAUTHORIZED, "{path}");
    }
    let listed = json_output(&holdfast(&app.db, &["--json", "api-keys", "list"]));
    assert!(listed[0]["revoked_at"].is_string());
    assert!(
        listed[0]["revoked_by"]
            .as_str()
            .unwrap()
            .starts_with("command line (")
    );
    // again, by its id: nothing to change, and it says so
    let again = json_output(&holdfast(&app.db, &["--json", "api-keys", "revoke", &id]));
    assert_eq!(again["revoked"], false);

    // Activity: made and revoked by the command line
    let recorded: Vec<(String, String, String)> = sqlx::query_as(
        "select action, outcome, operator from staff_actions \
          where action in ('add_api_key', 'revoke_api_key') order by id",
    )
    .fetch_all(&app.db.pool)
    .await
    .unwrap();
    let actions: Vec<(&str, &str)> = recorded
        .iter()
        .map(|(action, outcome, _)| (action.as_str(), outcome.as_str()))
        .collect();
    assert_eq!(
        actions,
        [
            ("add_api_key", "ok"),
            ("revoke_api_key", "ok"),
            ("revoke_api_key", "unchanged")
        ]
    );
    assert!(
        recorded
            .iter()
            .all(|(_, _, by)| by.starts_with("command line ("))
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_input_to_api_keys_exits_non_zero_and_changes_nothing() {
    let db = TestDb::new().await;
    json_output(&holdfast(
        &db,
        &[
            "--json",
            "api-keys",
            "add",
            "Storefront",
            "--scopes",
            "start_checkouts",
        ],
    ));
    // two live keys of one name, as the admin may make them
    for _ in 0..2 {
        api_keys::create(
            &db.pool,
            Actor::Operator("tests"),
            "Twins",
            &[Scope::Export],
        )
        .await
        .unwrap();
    }
    let long = "n".repeat(101);
    let before = fingerprint(&db).await;
    for (args, message) in [
        (
            vec![
                "api-keys",
                "add",
                "Reports",
                "--scopes",
                "export,everything",
            ],
            "\"everything\" is not a scope; the scopes are read_catalogue,",
        ),
        (
            vec!["api-keys", "add", "Reports", "--scopes", " , "],
            "name at least one scope",
        ),
        (
            vec!["api-keys", "add", "", "--scopes", "export"],
            "name the key (1 to 100 characters)",
        ),
        (
            vec!["api-keys", "add", "   ", "--scopes", "export"],
            "name the key (1 to 100 characters)",
        ),
        (
            vec!["api-keys", "add", &long, "--scopes", "export"],
            "name the key (1 to 100 characters)",
        ),
        (
            vec!["api-keys", "add", "Tab\tbed", "--scopes", "export"],
            "must not contain control characters",
        ),
        (
            vec!["api-keys", "add", " Storefront ", "--scopes", "export"],
            "a live key is named \"Storefront\" already",
        ),
        (
            vec!["api-keys", "revoke", "nosuchkey"],
            "no key has the id \"nosuchkey\", and no live key that name",
        ),
        (
            vec!["api-keys", "revoke", "000000000000"],
            "no key has the id",
        ),
        (
            vec!["api-keys", "revoke", "Twins"],
            "2 live keys are named \"Twins\"",
        ),
    ] {
        for json in [false, true] {
            let mut run = if json { vec!["--json"] } else { vec![] };
            run.extend(&args);
            let output = holdfast(&db, &run);
            let stderr = text(&output.stderr);
            assert_eq!(output.status.code(), Some(1), "{args:?}: {stderr}");
            assert!(stderr.contains(message), "{args:?}: {stderr}");
            // one line, said last: the error, after whatever was logged
            assert!(
                stderr
                    .trim()
                    .lines()
                    .last()
                    .unwrap()
                    .starts_with("holdfast: "),
                "{stderr}"
            );
            assert!(output.stdout.is_empty(), "{args:?}");
        }
        assert_eq!(fingerprint(&db).await, before, "{args:?} changed something");
    }
    // clap's own refusals: no --scopes, no such command
    for args in [
        vec!["api-keys", "add", "Reports"],
        vec!["api-keys", "rotate", "Storefront"],
    ] {
        let output = holdfast(&db, &args);
        assert_eq!(output.status.code(), Some(2), "{args:?}");
    }
    assert_eq!(fingerprint(&db).await, before);
    // the help names every scope there is
    let help = text(&holdfast(&db, &["api-keys", "add", "--help"]).stdout);
    for scope in Scope::ALL {
        assert!(help.contains(scope.as_str()), "{scope:?}: {help}");
    }
}
