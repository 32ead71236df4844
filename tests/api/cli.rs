//! The operator commands, run as the real binary against a test database.

use std::process::Output;

use serde_json::Value;

use holdfast_testkit::*;

fn holdfast(db: &TestDb, args: &[&str]) -> Output {
    run_command(env!("CARGO_BIN_EXE_holdfast"), db, args)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn check_exits_three_on_drift_and_repair_fixes_one_resource() {
    let db = TestDb::new().await;
    let created = json_output(&holdfast(
        &db,
        &["--json", "resource", "jars", "--total", "40"],
    ));
    assert_eq!(created["status"], "created");
    assert_eq!(holdfast(&db, &["check"]).status.code(), Some(0));

    // corrupt a counter without breaking the constraint
    sqlx::query("update resources set held = held + 1 where id = 'jars'")
        .execute(&db.pool)
        .await
        .unwrap();
    let drift = holdfast(&db, &["--json", "check"]);
    assert_eq!(drift.status.code(), Some(3));
    let report: Value = serde_json::from_slice(&drift.stdout).unwrap();
    assert_eq!(report["drift"], true);

    let repaired = json_output(&holdfast(&db, &["--json", "check", "--repair", "jars"]));
    assert_eq!(
        (
            repaired["held_before"].as_i64(),
            repaired["held_after"].as_i64()
        ),
        (Some(1), Some(0))
    );
    assert_eq!(holdfast(&db, &["check"]).status.code(), Some(0));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_listing_commands_speak_json() {
    let db = TestDb::new().await;
    let inventory = db.inventory();
    let slot = resource(&inventory, "slot", 8).await;
    let mut short = request(&slot, 1, "vera");
    short.ttl = Some(ttl(0.2));
    hold_ok(&inventory, &short).await;
    hold_ok(&inventory, &request(&slot, 2, "walt")).await;

    let shown = json_output(&holdfast(&db, &["--json", "show", "slot"]));
    assert_eq!(shown["status"]["held"], 3);
    assert_eq!(shown["live_holds"].as_array().unwrap().len(), 2);

    let held = json_output(&holdfast(
        &db,
        &["--json", "holds", "--state", "held", "--resource", "slot"],
    ));
    assert_eq!(held.as_array().unwrap().len(), 2);
    let old = json_output(&holdfast(&db, &["--json", "holds", "--older-than", "10m"]));
    assert_eq!(old.as_array().unwrap().len(), 0);

    tokio::time::sleep(std::time::Duration::from_millis(300)).await;
    let swept = json_output(&holdfast(&db, &["--json", "sweep", "--limit", "10"]));
    assert_eq!(swept[0]["expired_holds"], 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_arguments_get_one_clear_line_and_change_nothing() {
    let db = TestDb::new().await;
    resource(&db.inventory(), "slot", 8).await;
    for (args, message) in [
        (
            vec!["resource", "slot", "--total", "-1"],
            "total must be zero or more",
        ),
        (
            vec!["resource", "", "--total", "3"],
            "resource id must not be empty",
        ),
        (vec!["holds", "--older-than", "soon"], "is not a duration"),
        (vec!["show", "missing"], "no resource"),
        (
            vec!["settings", "--payment-window", "1m"],
            "payment_window_exceeds_ttl",
        ),
        (vec!["settings", "--hold-ttl", "0s"], "must be positive"),
    ] {
        let output = holdfast(&db, &args);
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert_eq!(output.status.code(), Some(1), "{args:?}: {stderr}");
        assert!(stderr.contains(message), "{args:?}: {stderr}");
        assert_eq!(stderr.trim().lines().count(), 1, "{args:?}: {stderr}");
    }
    let status = db.inventory().status(&rid("slot")).await.unwrap().unwrap();
    assert_eq!(status.total, 8);
    let settings = db.inventory().settings().await.unwrap();
    assert_eq!(
        (settings.hold_ttl_seconds, settings.payment_window_seconds),
        (900.0, 1800.0)
    );
}

#[tokio::test]
async fn a_database_url_with_a_password_never_prints() {
    let output = std::process::Command::new(env!("CARGO_BIN_EXE_holdfast"))
        .args([
            "--db",
            "postgres://holdfast:hunter2-secret@127.0.0.1:1/nowhere",
            "check",
        ])
        .output()
        .expect("run holdfast");
    assert_eq!(output.status.code(), Some(1));
    let all = format!(
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    assert!(all.contains("cannot connect to PostgreSQL"), "{all}");
    assert!(!all.contains("hunter2"), "the password leaked: {all}");
}

pub(crate) fn holdfast_with_stdin(db: &TestDb, args: &[&str], stdin: &str) -> Output {
    use std::io::Write;

    let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_holdfast"))
        .arg("--db")
        .arg(&db.url)
        .args(args)
        .env_remove("DATABASE_URL")
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("run holdfast");
    child
        .stdin
        .take()
        .unwrap()
        .write_all(stdin.as_bytes())
        .unwrap();
    child.wait_with_output().unwrap()
}

#[tokio::test]
async fn staff_add_reads_the_password_from_stdin_and_stores_only_an_argon2id_hash() {
    let db = TestDb::new().await;
    let password = "a long and secret phrase";
    let added = holdfast_with_stdin(
        &db,
        &["staff", "add", "Grace@Example.com"],
        &format!("{password}\n"),
    );
    assert!(
        added.status.success(),
        "{}",
        String::from_utf8_lossy(&added.stderr)
    );
    let said = String::from_utf8_lossy(&added.stdout).to_string()
        + &String::from_utf8_lossy(&added.stderr);
    assert!(said.contains("grace@example.com: added"), "{said}");
    assert!(!said.contains(password), "the password must never print");
    let hash: String =
        sqlx::query_scalar("select password_hash from staff where email = 'grace@example.com'")
            .fetch_one(&db.pool)
            .await
            .unwrap();
    assert!(hash.starts_with("$argon2id$") && !hash.contains(password));

    // a new password replaces the old and ends its sessions
    sqlx::query(
        "insert into staff_sessions (id_hash, staff_id, csrf_token, expires_at) \
         select sha256('x'), id, repeat('c', 64), now() + interval '1 hour' from staff",
    )
    .execute(&db.pool)
    .await
    .unwrap();
    let changed = holdfast_with_stdin(
        &db,
        &["--json", "staff", "add", "grace@example.com"],
        "another long phrase\n",
    );
    assert_eq!(json_output(&changed)["outcome"], "password changed");
    let sessions: i64 = sqlx::query_scalar("select count(*) from staff_sessions")
        .fetch_one(&db.pool)
        .await
        .unwrap();
    assert_eq!(sessions, 0);

    // refused: short password, no password, a bad address; nothing stored
    for (email, stdin) in [
        ("new@example.com", "short\n"),
        ("new@example.com", ""),
        ("not-an-address", "a long and secret phrase\n"),
    ] {
        let refused = holdfast_with_stdin(&db, &["staff", "add", email], stdin);
        assert!(!refused.status.success(), "{email} {stdin:?}");
        let said = String::from_utf8_lossy(&refused.stderr);
        assert!(said.starts_with("holdfast: "), "{said}");
    }
    let staff: i64 = sqlx::query_scalar("select count(*) from staff")
        .fetch_one(&db.pool)
        .await
        .unwrap();
    assert_eq!(staff, 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn text_that_cannot_be_stored_is_refused_by_every_command_and_changes_nothing() {
    use std::os::unix::ffi::OsStrExt;

    let db = TestDb::new().await;
    let count = || async {
        sqlx::query_scalar::<_, i64>(
            "select (select count(*) from products) + (select count(*) from resources)",
        )
        .fetch_one(&db.pool)
        .await
        .unwrap()
    };
    // arguments that are not UTF-8: clap's own clear refusal
    for args in [
        vec![
            "resource".as_ref(),
            std::ffi::OsStr::from_bytes(b"slot\xff"),
            "--total".as_ref(),
            "3".as_ref(),
        ],
        vec!["show".as_ref(), std::ffi::OsStr::from_bytes(b"\xc3")],
        vec![
            "staff".as_ref(),
            "add".as_ref(),
            std::ffi::OsStr::from_bytes(b"a\xff@b.test"),
        ],
    ] {
        let output = std::process::Command::new(env!("CARGO_BIN_EXE_holdfast"))
            .arg("--db")
            .arg(&db.url)
            .args(&args)
            .env_remove("DATABASE_URL")
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert_eq!(output.status.code(), Some(2), "{args:?}: {stderr}");
        assert!(stderr.contains("invalid UTF-8"), "{stderr}");
    }
    // a control character where an id or e-mail goes
    for (args, message) in [
        (
            vec!["resource", "slot\u{1}", "--total", "3"],
            "control characters",
        ),
        (vec!["staff", "add", "grace\u{7}@holdfast.test"], "e-mail"),
    ] {
        let output = holdfast(&db, &args);
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert_eq!(output.status.code(), Some(1), "{args:?}: {stderr}");
        assert!(stderr.contains(message), "{args:?}: {stderr}");
        assert_eq!(stderr.trim().lines().count(), 1, "{stderr}");
    }
    // a catalogue whose last product carries a NUL: refused before anything
    // is written, naming the product and the field
    let mut catalogue: Value = serde_json::from_str(
        &std::fs::read_to_string(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/fixtures/catalogue.json"
        ))
        .unwrap(),
    )
    .unwrap();
    let last = catalogue["products"].as_array().unwrap().len() - 1;
    catalogue["products"][last]["name"] = "Wild\u{0} honey".into();
    let file = std::env::temp_dir().join(format!("nul-catalogue-{}.json", db.name));
    std::fs::write(&file, catalogue.to_string()).unwrap();
    let output = holdfast(
        &db,
        &["catalogue", "load", "--file", file.to_str().unwrap()],
    );
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains("name must not contain control characters"),
        "{stderr}"
    );
    assert!(stderr.contains("wild-honey"), "{stderr}");
    assert_eq!(stderr.trim().lines().count(), 1, "{stderr}");
    // bytes that are not UTF-8 in the file
    std::fs::write(&file, b"{\"currency\": \"eur\xff\"}").unwrap();
    let output = holdfast(
        &db,
        &["catalogue", "load", "--file", file.to_str().unwrap()],
    );
    assert_eq!(output.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&output.stderr).contains("valid UTF-8"));
    std::fs::remove_file(&file).unwrap();
    assert_eq!(count().await, 0, "nothing was written");
}

/// `holdfast serve` without provider keys, with `env` on top.
pub(crate) fn serve_without_keys(db: &TestDb, env: &[(&str, String)]) -> std::process::Command {
    let mut command = std::process::Command::new(env!("CARGO_BIN_EXE_holdfast"));
    command
        .arg("serve")
        .env("DATABASE_URL", &db.url)
        .env(
            "HOLDFAST_SANDBOX_ADDR",
            format!("127.0.0.1:{}", free_port()),
        )
        .env(
            "HOLDFAST_SANDBOX_SMTP_ADDR",
            format!("127.0.0.1:{}", free_port()),
        )
        .env("RUST_LOG", "warn");
    for name in [
        "STRIPE_SECRET_KEY",
        "RAZORPAY_KEY_ID",
        "PORT",
        "HOLDFAST_ADDR",
        "HOLDFAST_BASE_URL",
        "HOLDFAST_SANDBOX",
    ] {
        command.env_remove(name);
    }
    for (name, value) in env {
        command.env(name, value);
    }
    command
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn serve_without_keys_runs_the_sandbox_only_where_the_public_cannot_reach_it() {
    let db = TestDb::new().await;
    // a public bind (PORT means 0.0.0.0), or HTTPS: one line naming the keys
    for env in [
        vec![("PORT", free_port().to_string())],
        vec![("HOLDFAST_ADDR", format!("0.0.0.0:{}", free_port()))],
        vec![
            ("HOLDFAST_ADDR", format!("127.0.0.1:{}", free_port())),
            ("HOLDFAST_BASE_URL", "https://shop.example".to_owned()),
        ],
    ] {
        let output = serve_without_keys(&db, &env).output().unwrap();
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert_eq!(output.status.code(), Some(1), "{env:?}: {stderr}");
        assert_eq!(stderr.trim().lines().count(), 1, "{stderr}");
        for named in ["STRIPE_SECRET_KEY", "RAZORPAY_KEY_ID", "HOLDFAST_SANDBOX=1"] {
            assert!(stderr.contains(named), "{named}: {stderr}");
        }
        // the sandbox's secrets never print
        let sandbox = holdfast_sandbox::SandboxSettings::development();
        assert!(!stderr.contains(sandbox.stripe_secret_key.expose()));
        // refused before anything was done: the demo catalogue a sandboxed
        // shop loads is not there
        let products: i64 = sqlx::query_scalar("select count(*) from products")
            .fetch_one(&db.pool)
            .await
            .unwrap();
        assert_eq!(products, 0);
    }
    // loopback over HTTP (the README's first command), or a public demo on
    // purpose: it serves
    for env in [
        vec![("HOLDFAST_ADDR", format!("127.0.0.1:{}", free_port()))],
        vec![
            ("PORT", free_port().to_string()),
            ("HOLDFAST_SANDBOX", "1".to_owned()),
        ],
    ] {
        let port = env
            .iter()
            .find_map(|(name, value)| match *name {
                "PORT" => Some(value.clone()),
                _ => value.rsplit(':').next().map(str::to_owned),
            })
            .unwrap();
        let mut child = serve_without_keys(&db, &env)
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap();
        let client = http_client();
        let mut answered = None;
        for _ in 0..300 {
            if let Ok(response) = client
                .get(format!("http://127.0.0.1:{port}/healthz"))
                .send()
                .await
            {
                answered = Some(response.status());
                break;
            }
            if let Some(status) = child.try_wait().unwrap() {
                panic!("{env:?}: serve ended with {status}");
            }
            tokio::time::sleep(std::time::Duration::from_millis(100)).await;
        }
        child.kill().unwrap();
        child.wait().unwrap();
        assert_eq!(answered, Some(reqwest::StatusCode::OK), "{env:?}");
    }
    let products: i64 = sqlx::query_scalar("select count(*) from products")
        .fetch_one(&db.pool)
        .await
        .unwrap();
    assert!(products > 0, "the sandboxed shops loaded the demo");
}

/// Runs `serve` without keys on loopback until its health check answers,
/// then stops it; panics if it ends first.
async fn serve_once(db: &TestDb) {
    let port = free_port();
    let mut child = serve_without_keys(db, &[("HOLDFAST_ADDR", format!("127.0.0.1:{port}"))])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let client = http_client();
    for _ in 0..300 {
        if let Ok(response) = client
            .get(format!("http://127.0.0.1:{port}/healthz"))
            .send()
            .await
        {
            assert_eq!(response.status(), reqwest::StatusCode::OK);
            child.kill().unwrap();
            child.wait().unwrap();
            return;
        }
        if child.try_wait().unwrap().is_some() {
            let output = child.wait_with_output().unwrap();
            panic!("serve ended: {}", String::from_utf8_lossy(&output.stderr));
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    panic!("serve never answered");
}

/// The demo catalogue goes into an empty shop only: a restart leaves what
/// staff changed (a price, a tier archived) as they left it, and starts
/// although a demo product's queue is committed (the demo file would have
/// cleared its sale's opening under the commitment).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn serve_without_keys_loads_the_demo_into_an_empty_shop_only() {
    let db = TestDb::new().await;
    serve_once(&db).await;
    let price = || async {
        sqlx::query_scalar::<_, i64>("select price_minor from products where id = 'wild-honey'")
            .fetch_one(&db.pool)
            .await
            .unwrap()
    };
    assert_eq!(price().await, 1400, "the demo was loaded");
    sqlx::query("update products set price_minor = 1650 where id = 'wild-honey'")
        .execute(&db.pool)
        .await
        .unwrap();
    holdfast::catalogue::edit::archive_product(&db.pool, "harbour-lights-vip")
        .await
        .unwrap();
    sqlx::query(
        "update products set sale_opens_at = now() + interval '2 days' \
          where id = 'harbour-lights-general'",
    )
    .execute(&db.pool)
    .await
    .unwrap();
    holdfast::queue::turn_on(
        &db.pool,
        holdfast::audit::Actor::Operator("tests"),
        "harbour-lights-general",
    )
    .await
    .unwrap();
    // what is sold, as a fingerprint (the worker that serve runs may
    // sweep and keep house meanwhile)
    let sold = || async {
        snapshot(&db.pool)
            .await
            .into_iter()
            .filter(|print| {
                ["collections:", "products:", "schedules:", "resources:"]
                    .iter()
                    .any(|table| print.starts_with(table))
            })
            .collect::<Vec<_>>()
    };
    let before = sold().await;
    serve_once(&db).await;
    assert_eq!(price().await, 1650, "staff's price stays");
    let archived: bool =
        sqlx::query_scalar("select not active from products where id = 'harbour-lights-vip'")
            .fetch_one(&db.pool)
            .await
            .unwrap();
    assert!(archived, "an archived tier stays archived");
    let committed: bool = sqlx::query_scalar(
        "select queue_commitment is not null and sale_opens_at > now() from products \
          where id = 'harbour-lights-general'",
    )
    .fetch_one(&db.pool)
    .await
    .unwrap();
    assert!(committed, "the queue stays committed");
    assert_eq!(before, sold().await, "the restart changed nothing sold");
}

/// Every request gets a span (method, route pattern, request id, status),
/// and what is logged inside the request carries it. Order tokens stay out
/// of the logs: the route is the pattern, never the path.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_request_is_logged_in_its_own_span_with_route_status_and_id() {
    let db = TestDb::new().await;
    let port = free_port();
    let log = std::env::temp_dir().join(format!("holdfast-spans-{port}.log"));
    let mut child = serve_without_keys(
        &db,
        &[
            ("HOLDFAST_ADDR", format!("127.0.0.1:{port}")),
            ("RUST_LOG", "info,holdfast::telemetry=debug".to_owned()),
            ("HOLDFAST_LOG_FORMAT", "json".to_owned()),
        ],
    )
    .stdout(std::process::Stdio::null())
    .stderr(std::fs::File::create(&log).unwrap())
    .spawn()
    .unwrap();
    let client = http_client();
    let base = format!("http://127.0.0.1:{port}");
    let mut up = false;
    for _ in 0..300 {
        if client.get(format!("{base}/healthz")).send().await.is_ok() {
            up = true;
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    assert!(up, "serve came up");
    let secret_token = "tok_never_in_the_logs_0123456789";
    let order = client
        .get(format!("{base}/orders/{secret_token}"))
        .send()
        .await
        .unwrap();
    assert_eq!(order.status(), reqwest::StatusCode::NOT_FOUND);
    // a webhook refused for its signature logs inside the request's span
    let webhook = client
        .post(format!("{base}/webhooks/stripe"))
        .header("Stripe-Signature", "t=1,v1=00")
        .body("{}")
        .send()
        .await
        .unwrap();
    assert_eq!(webhook.status(), reqwest::StatusCode::BAD_REQUEST);
    tokio::time::sleep(std::time::Duration::from_millis(300)).await;
    child.kill().unwrap();
    child.wait().unwrap();
    let text = std::fs::read_to_string(&log).unwrap();
    std::fs::remove_file(&log).unwrap();
    let lines: Vec<serde_json::Value> = text
        .lines()
        .filter_map(|line| serde_json::from_str(line).ok())
        .collect();
    let answered = |route: &str, status: u64| {
        lines
            .iter()
            .find(|line| line["span"]["route"] == route && line["span"]["status"] == status)
    };
    let order_line = answered("/orders/{token}", 404).unwrap_or_else(|| panic!("{text}"));
    assert_eq!(order_line["span"]["method"], "GET");
    let id = order_line["span"]["request_id"].as_str().unwrap();
    assert_eq!(id.len(), 36, "a UUID: {id}");
    assert!(!text.contains(secret_token), "the token was logged: {text}");
    // the webhook's own warning carries its request's span and another id
    let refused = lines
        .iter()
        .find(|line| {
            line["span"]["route"] == "/webhooks/{provider}"
                && line["fields"]["message"] != "request answered"
        })
        .unwrap_or_else(|| panic!("no webhook log inside its span: {text}"));
    assert_ne!(
        refused["span"]["request_id"],
        order_line["span"]["request_id"]
    );
}
