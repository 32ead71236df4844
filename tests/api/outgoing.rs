//! Outgoing webhooks, end to end: endpoints registered from the command
//! line and the admin, events written by the transactions that decide
//! them, delivered by the worker to a receiver written with the Standard
//! Webhooks reference library for Python (`tests/sdk/webhook_receiver.py`,
//! `standardwebhooks` from PyPI, installed once into
//! `.holdfast/webhooks-venv`), retried with the same `webhook-id`,
//! refused on private addresses, disabled after failing for days, and
//! replayed from the admin.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use holdfast::configuration::Secret;
use holdfast::keys::SessionKey;
use holdfast::outgoing::Deliveries;
use holdfast::staff::roles::Role;
use holdfast::worker::outbox::Outbox;
use holdfast_testkit::*;
use reqwest::StatusCode;
use serde_json::Value;

/// The session key the shop and its worker share (and seal secrets with).
const KEY: &str = "outgoing-webhooks-test-session-key-0123456789";
const LIBRARY: &str = "standardwebhooks==1.1.0";

/// A virtual environment with the reference library; its python.
pub fn hooks_python() -> PathBuf {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let venv = root.join(".holdfast/webhooks-venv");
    let python = venv.join("bin/python");
    let marker = venv.join(format!("installed-{LIBRARY}"));
    if marker.exists() {
        return python;
    }
    let made = Command::new("python3")
        .args(["-m", "venv"])
        .arg(&venv)
        .status()
        .expect("python3 runs");
    assert!(made.success(), "python3 -m venv failed");
    let installed = Command::new(&python)
        .args([
            "-m",
            "pip",
            "install",
            "--quiet",
            "--disable-pip-version-check",
            LIBRARY,
        ])
        .status()
        .expect("pip runs");
    assert!(installed.success(), "pip could not install {LIBRARY}");
    std::fs::write(&marker, b"").expect("marker");
    python
}

/// The Python receiver, listening on `port`.
struct Receiver {
    child: Child,
    log: PathBuf,
    port: u16,
}

impl Receiver {
    async fn start(port: u16, secret: &str, fail_first: u32) -> Self {
        Self::start_failing_while(port, secret, fail_first, None).await
    }

    /// [`Receiver::start`], answering 500 to everything while `down`
    /// exists.
    async fn start_failing_while(
        port: u16,
        secret: &str,
        fail_first: u32,
        down: Option<&Path>,
    ) -> Self {
        let python = tokio::task::spawn_blocking(hooks_python).await.unwrap();
        let log = std::env::temp_dir().join(format!(
            "holdfast-webhooks-{}-{port}.jsonl",
            std::process::id()
        ));
        let _ = std::fs::remove_file(&log);
        let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/sdk/webhook_receiver.py");
        let mut child = Command::new(python)
            .arg(script)
            .env("PORT", port.to_string())
            .env("SECRET", secret)
            .env("FAIL_FIRST", fail_first.to_string())
            .env("FAIL_WHILE", down.map(Path::as_os_str).unwrap_or_default())
            .env("LOG", &log)
            .stdout(Stdio::null())
            .spawn()
            .expect("the receiver starts");
        for _ in 0..100 {
            if std::net::TcpStream::connect(("127.0.0.1", port)).is_ok() {
                return Self { child, log, port };
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        let _ = child.kill();
        let _ = child.wait();
        panic!("the receiver did not listen on {port}");
    }

    fn url(&self) -> String {
        format!("http://127.0.0.1:{}/hook", self.port)
    }

    /// Every request it received, as it logged them.
    fn requests(&self) -> Vec<Value> {
        std::fs::read_to_string(&self.log)
            .unwrap_or_default()
            .lines()
            .map(|line| serde_json::from_str(line).unwrap())
            .collect()
    }
}

impl Drop for Receiver {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_file(&self.log);
    }
}

fn session_key() -> SessionKey {
    SessionKey::new(Secret::new(KEY)).unwrap()
}

async fn shop() -> TestApp {
    let app = spawn_app_shaped(TestDb::new().await, |_, shop| {
        shop.session_key = session_key();
    })
    .await;
    app.load_demo().await;
    app
}

/// The worker, with webhooks (private addresses refused unless an
/// endpoint was allowed them).
fn worker(app: &TestApp) -> Outbox {
    Outbox::new(app.db.pool.clone(), app.sandbox.providers()).with_webhooks(Deliveries::new(
        app.db.pool.clone(),
        session_key(),
        false,
    ))
}

/// `holdfast webhooks add … --json`, with the shop's session key.
fn add_by_command(app: &TestApp, args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_holdfast"))
        .arg("--db")
        .arg(&app.db.url)
        .args(["--json", "webhooks", "add"])
        .args(args)
        .env_remove("DATABASE_URL")
        .env("HOLDFAST_SESSION_KEY", KEY)
        .output()
        .unwrap()
}

/// Run the worker's outbox `passes` times, the clock moved on to each
/// delivery's next try in between, until `done` says so.
async fn deliver_until(app: &TestApp, outbox: &Outbox, mut done: impl FnMut() -> bool) {
    for _ in 0..40 {
        outbox.drain().await.unwrap();
        if done() {
            return;
        }
        sqlx::query(
            "update outbox_jobs set run_after = now() where kind = 'webhook' and state = 'pending'",
        )
        .execute(&app.db.pool)
        .await
        .unwrap();
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("the deliveries never finished");
}

fn hmac_signature(secret: &str, id: &str, timestamp: i64, body: &str) -> String {
    use base64::Engine;
    use hmac::{Hmac, Mac};
    let key = base64::engine::general_purpose::STANDARD
        .decode(secret.strip_prefix("whsec_").unwrap())
        .unwrap();
    let mut mac = Hmac::<sha2::Sha256>::new_from_slice(&key).unwrap();
    mac.update(format!("{id}.{timestamp}.{body}").as_bytes());
    format!(
        "v1,{}",
        base64::engine::general_purpose::STANDARD.encode(mac.finalize().into_bytes())
    )
}

async fn post_to(url: &str, id: &str, timestamp: &str, signature: &str, body: &str) -> u16 {
    holdfast::payments::http::client(Duration::from_secs(10))
        .post(url)
        .header("webhook-id", id)
        .header("webhook-timestamp", timestamp)
        .header("webhook-signature", signature)
        .header("content-type", "application/json")
        .body(body.to_owned())
        .send()
        .await
        .unwrap()
        .status()
        .as_u16()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sale_reaches_the_reference_receiver_exactly_once_through_two_500s() {
    let app = shop().await;
    let port = free_port();
    // the command line registers it (the receiver is on loopback: allowed
    // for this endpoint only), and prints its secret once
    let url = format!("http://127.0.0.1:{port}/hook");
    let added = json_output(&add_by_command(
        &app,
        &[&url, "--events", "order.paid", "--allow-private"],
    ));
    let secret = added["secret"].as_str().unwrap().to_owned();
    let endpoint = added["id"].as_str().unwrap().to_owned();
    assert!(secret.starts_with("whsec_") && endpoint.starts_with("ep_"));
    // stored sealed: the secret's text is nowhere in the database
    let dump = snapshot(&app.db.pool).await.join("\n");
    assert!(
        !dump.contains(&secret[6..]),
        "the secret is stored in the clear"
    );
    let listed = Command::new(env!("CARGO_BIN_EXE_holdfast"))
        .arg("--db")
        .arg(&app.db.url)
        .args(["webhooks", "list"])
        .env_remove("DATABASE_URL")
        .output()
        .unwrap();
    let listed = String::from_utf8(listed.stdout).unwrap();
    assert!(
        listed.contains(&endpoint) && listed.contains("order.paid"),
        "{listed}"
    );
    assert!(
        !listed.contains(&secret[6..]),
        "list never shows the secret"
    );

    let receiver = Receiver::start(port, &secret, 2).await;
    let paid = app.buy(&browser(), &Purchase::of("wild-honey", 2)).await;
    let outbox = worker(&app);
    deliver_until(&app, &outbox, || {
        receiver.requests().iter().any(|r| r["processed"] == true)
    })
    .await;
    // a few more passes: nothing more arrives
    for _ in 0..3 {
        outbox.drain().await.unwrap();
    }
    let requests = receiver.requests();
    assert_eq!(requests.len(), 3, "two 500s, then one 200: {requests:#?}");
    assert!(
        requests.iter().all(|r| r["verified"] == true),
        "{requests:#?}"
    );
    let id = requests[0]["id"].as_str().unwrap();
    assert!(id.starts_with("msg_"));
    assert!(
        requests.iter().all(|r| r["id"] == id),
        "one webhook-id across retries"
    );
    assert_eq!(
        requests
            .iter()
            .map(|r| r["answered"].as_i64().unwrap())
            .collect::<Vec<_>>(),
        [500, 500, 200]
    );
    assert_eq!(
        requests.iter().filter(|r| r["processed"] == true).count(),
        1,
        "processed exactly once"
    );
    let body: Value = serde_json::from_str(requests[2]["body"].as_str().unwrap()).unwrap();
    assert_eq!(body["type"], "order.paid");
    assert_eq!(body["data"]["order"]["token"], paid.started.token.as_str());
    assert_eq!(body["data"]["order"]["state"], "paid");
    assert_eq!(body["data"]["order"]["lines"][0]["qty"], 2);
    // every attempt kept, with its answer
    let kept: Vec<Option<i32>> =
        sqlx::query_scalar("select status from webhook_attempts where message_id = $1 order by id")
            .bind(id)
            .fetch_all(&app.db.pool)
            .await
            .unwrap();
    assert_eq!(kept, [Some(500), Some(500), Some(200)]);

    // what the library refuses: a forged body, a changed timestamp, a
    // signature made with another secret, a stale (replayed) timestamp
    let real = &requests[2];
    let (ts, sig, real_body) = (
        real["timestamp"].as_str().unwrap(),
        real["signature"].as_str().unwrap(),
        real["body"].as_str().unwrap(),
    );
    let forged = real_body.replace("\"paid\"", "\"refunded\"");
    assert_eq!(post_to(&receiver.url(), id, ts, sig, &forged).await, 400);
    let later = (ts.parse::<i64>().unwrap() + 1).to_string();
    assert_eq!(
        post_to(&receiver.url(), id, &later, sig, real_body).await,
        400
    );
    let other = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSwMfKQ9r8GKYo=";
    let now = chrono::Utc::now().timestamp();
    let wrong = hmac_signature(other, id, now, real_body);
    assert_eq!(
        post_to(&receiver.url(), id, &now.to_string(), &wrong, real_body).await,
        400
    );
    let stale = now - 600;
    let resigned = hmac_signature(&secret, id, stale, real_body);
    assert_eq!(
        post_to(
            &receiver.url(),
            id,
            &stale.to_string(),
            &resigned,
            real_body
        )
        .await,
        400,
        "a timestamp ten minutes old is refused even with a right signature"
    );
    // and the same delivery sent again, rightly signed now, is known by id
    let fresh = hmac_signature(&secret, id, now, real_body);
    assert_eq!(
        post_to(&receiver.url(), id, &now.to_string(), &fresh, real_body).await,
        200
    );
    let last = receiver.requests().pop().unwrap();
    assert_eq!(last["verified"], true);
    assert_eq!(
        last["processed"], false,
        "a repeated id is not processed twice"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn private_addresses_are_refused_at_adding_and_at_delivery() {
    let app = shop().await;
    app.add_staff().await;
    let (staff, csrf) = app.staff_browser().await;
    let port = free_port();
    let url = format!("http://127.0.0.1:{port}/hook");
    // the admin refuses loopback, link-local and private addresses
    for refused in [
        url.as_str(),
        "http://localhost:9/x",
        "http://169.254.169.254/latest",
        "http://10.0.0.7/hook",
        "http://[::1]/hook",
    ] {
        let answer = app
            .admin_post(
                &staff,
                "/admin/webhooks",
                &[("csrf", &csrf), ("url", refused), ("event", "order.paid")],
            )
            .await;
        assert_eq!(answer.status(), StatusCode::BAD_REQUEST, "{refused}");
        let page = answer.text().await.unwrap();
        assert!(page.contains("private, loopback or link-local"), "{page}");
    }
    // a public address, in plain text: names and e-mails go only over TLS
    let answer = app
        .admin_post(
            &staff,
            "/admin/webhooks",
            &[
                ("csrf", &csrf),
                ("url", "http://93.184.216.34/hook"),
                ("event", "order.paid"),
            ],
        )
        .await;
    assert_eq!(answer.status(), StatusCode::BAD_REQUEST);
    let page = answer.text().await.unwrap();
    assert!(page.contains("must start with https://"), "{page}");
    // said on the Webhooks page itself, beside the field, with what was
    // typed kept
    assert!(page.contains("id=\"add-endpoint\""), "{page}");
    assert!(page.contains("id=\"f-url-error\""), "{page}");
    assert!(
        page.contains("value=\"http://93.184.216.34/hook\""),
        "{page}"
    );
    assert!(page.contains("value=\"order.paid\" checked"), "{page}");
    // no event chosen: said beside the events, the address kept
    let answer = app
        .admin_post(
            &staff,
            "/admin/webhooks",
            &[("csrf", &csrf), ("url", "https://93.184.216.34/hook")],
        )
        .await;
    assert_eq!(answer.status(), StatusCode::BAD_REQUEST);
    let page = answer.text().await.unwrap();
    assert!(page.contains("id=\"f-event-error\""), "{page}");
    assert!(
        page.contains("value=\"https://93.184.216.34/hook\""),
        "{page}"
    );
    assert!(page.contains("Nothing was changed."), "{page}");
    // so does the command line, without --allow-private
    let output = add_by_command(&app, &[&url, "--events", "order.paid"]);
    assert!(!output.status.success());
    assert!(String::from_utf8_lossy(&output.stderr).contains("private, loopback or link-local"));
    let none: i64 = sqlx::query_scalar("select count(*) from webhook_endpoints")
        .fetch_one(&app.db.pool)
        .await
        .unwrap();
    assert_eq!(none, 0, "nothing was registered");

    // allowed once, then no longer (as a name whose address changed to a
    // private one would be): the delivery is refused when it would be made
    let added = json_output(&add_by_command(
        &app,
        &[&url, "--events", "order.paid", "--allow-private"],
    ));
    let receiver = Receiver::start(port, added["secret"].as_str().unwrap(), 0).await;
    sqlx::query("update webhook_endpoints set allow_private = false")
        .execute(&app.db.pool)
        .await
        .unwrap();
    app.buy(&browser(), &Purchase::of("wild-honey", 1)).await;
    worker(&app).drain().await.unwrap();
    let error: String = sqlx::query_scalar("select error from webhook_attempts")
        .fetch_one(&app.db.pool)
        .await
        .unwrap();
    assert!(error.contains("private, loopback or link-local"), "{error}");
    assert!(
        receiver.requests().is_empty(),
        "nothing reached the receiver"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_endpoint_failing_for_days_is_disabled_then_enabled_and_replayed_from_the_admin() {
    let app = shop().await;
    app.add_staff().await;
    app.add_staff_as("bo@holdfast.test", Role::BoxOffice).await;
    let (staff, csrf) = app.staff_browser().await;
    let port = free_port();
    let url = format!("http://127.0.0.1:{port}/hook");
    let added = json_output(&add_by_command(
        &app,
        &[
            &url,
            "--events",
            "order.paid,order.refunded",
            "--allow-private",
        ],
    ));
    let endpoint = added["id"].as_str().unwrap().to_owned();
    let secret = added["secret"].as_str().unwrap().to_owned();
    // nobody listens: every attempt fails
    let paid = app.buy(&browser(), &Purchase::of("wild-honey", 1)).await;
    let outbox = worker(&app);
    outbox.drain().await.unwrap();
    // three days and more later, the last try gives up and disables it
    sqlx::query(
        "update outbox_jobs set created_at = created_at - interval '4 days', run_after = now() \
          where kind = 'webhook'",
    )
    .execute(&app.db.pool)
    .await
    .unwrap();
    outbox.drain().await.unwrap();
    let page = app
        .admin_page(&staff, &format!("/admin/webhooks/{endpoint}"))
        .await;
    assert!(
        page.contains("Disabled automatically: nothing was delivered for 3 days"),
        "{page}"
    );
    let listing = app.admin_page(&staff, "/admin/webhooks").await;
    assert!(listing.contains("disabled"));
    assert!(
        !listing.contains(&secret[6..]),
        "the secret is never shown again"
    );
    let (job, message, first_attempts): (i64, String, i64) = sqlx::query_as(
        "select j.id, j.payload ->> 'message_id', \
                (select count(*) from webhook_attempts a where a.job_id = j.id) \
           from outbox_jobs j where kind = 'webhook'",
    )
    .fetch_one(&app.db.pool)
    .await
    .unwrap();
    assert_eq!(first_attempts, 2);
    // a disabled endpoint is sent nothing new
    let (bo, bo_csrf) = app.signed_in("bo@holdfast.test", PASSWORD).await;
    let refund = app
        .admin_post(
            &staff,
            &format!("/admin/orders/{}/refund", paid.started.order_id),
            &[
                ("csrf", &csrf),
                ("reason", "test"),
                ("step", "refund"),
                ("units:wild-honey", "1"),
                ("restock", "on"),
            ],
        )
        .await;
    assert_eq!(refund.status(), StatusCode::SEE_OTHER);
    // a disabled endpoint is sent nothing, but what happens meanwhile is
    // kept for it (a job done and never sent), for a replay to send
    let jobs: Vec<(String, bool)> = sqlx::query_as(
        "select state, payload ? 'while_disabled' from outbox_jobs where kind = 'webhook' \
          order by id",
    )
    .fetch_all(&app.db.pool)
    .await
    .unwrap();
    assert_eq!(
        jobs,
        [("done".to_owned(), false), ("done".to_owned(), true)],
        "nothing pending for a disabled endpoint; the refund's event kept"
    );
    outbox.drain().await.unwrap();
    let tried: i64 = sqlx::query_scalar("select count(*) from webhook_attempts")
        .fetch_one(&app.db.pool)
        .await
        .unwrap();
    assert_eq!(tried, 2, "the kept event is not tried while disabled");
    let page = app
        .admin_page(&staff, &format!("/admin/webhooks/{endpoint}"))
        .await;
    assert!(page.contains("kept (disabled)"), "{page}");

    // box office may not touch webhooks
    let refused = app
        .admin_post(
            &bo,
            &format!("/admin/webhooks/{endpoint}/enable"),
            &[("csrf", &bo_csrf)],
        )
        .await;
    assert_eq!(refused.status(), StatusCode::FORBIDDEN);
    let refused = bo
        .get(format!("{}/admin/webhooks", app.address))
        .send()
        .await
        .unwrap();
    assert_eq!(refused.status(), StatusCode::FORBIDDEN);

    // the receiver is fixed; the owner enables the endpoint and replays
    let receiver = Receiver::start(port, &secret, 0).await;
    let enabled = app
        .admin_post(
            &staff,
            &format!("/admin/webhooks/{endpoint}/enable"),
            &[("csrf", &csrf)],
        )
        .await;
    assert_eq!(enabled.status(), StatusCode::SEE_OTHER);
    let replayed = app
        .admin_post(
            &staff,
            &format!("/admin/webhooks/{endpoint}/deliveries/{job}/replay"),
            &[("csrf", &csrf)],
        )
        .await;
    assert_eq!(replayed.status(), StatusCode::SEE_OTHER);
    outbox.drain().await.unwrap();
    let requests = receiver.requests();
    assert_eq!(requests.len(), 1, "{requests:#?}");
    assert_eq!(requests[0]["verified"], true);
    assert_eq!(
        requests[0]["id"],
        message.as_str(),
        "the replay keeps its webhook-id"
    );
    let page = app
        .admin_page(&staff, &format!("/admin/webhooks/{endpoint}"))
        .await;
    assert!(
        page.contains("delivered") && page.contains("HTTP 200"),
        "{page}"
    );

    // all since a moment: the same message once more, and the refund's,
    // kept while the endpoint was disabled, for the first time
    let since = (chrono::Utc::now() - chrono::Duration::hours(1)).to_rfc3339();
    // a moment not understood: said on the endpoint's page, as typed
    let refused = app
        .admin_post(
            &staff,
            &format!("/admin/webhooks/{endpoint}/replay"),
            &[("csrf", &csrf), ("since", "yesterday teatime")],
        )
        .await;
    assert_eq!(refused.status(), StatusCode::BAD_REQUEST);
    let page = refused.text().await.unwrap();
    assert!(page.contains("id=\"f-since-error\""), "{page}");
    assert!(page.contains("value=\"yesterday teatime\""), "{page}");
    assert!(page.contains("id=\"replay-since\""), "{page}");
    let replayed = app
        .admin_post(
            &staff,
            &format!("/admin/webhooks/{endpoint}/replay"),
            &[("csrf", &csrf), ("since", &since)],
        )
        .await;
    assert_eq!(replayed.status(), StatusCode::SEE_OTHER);
    outbox.drain().await.unwrap();
    let requests = receiver.requests();
    assert_eq!(requests.len(), 3, "{requests:#?}");
    let again = requests[1..]
        .iter()
        .find(|r| r["id"] == message.as_str())
        .expect("the paid event again");
    assert_eq!(again["processed"], false, "the receiver knew it by its id");
    let kept = requests[1..]
        .iter()
        .find(|r| r["id"] != message.as_str())
        .expect("the refund's event");
    assert_eq!(
        (&kept["type"], &kept["verified"], &kept["processed"]),
        (
            &Value::from("order.refunded"),
            &Value::from(true),
            &Value::from(true)
        )
    );
    let activity = app.admin_page(&staff, "/admin/activity").await;
    assert!(activity.contains("replay_webhook") && activity.contains("enable_webhook"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_event_of_a_sale_is_sent_once_each() {
    let app = shop().await;
    app.add_staff().await;
    let (staff, csrf) = app.staff_browser().await;
    let port = free_port();
    let url = format!("http://127.0.0.1:{port}/hook");
    let all = "order.paid,order.refunded,order.expired,order.cancelled,code.redeemed,\
               waitlist.offered,product.sold_out,product.available";
    let added = json_output(&add_by_command(
        &app,
        &[&url, "--events", all, "--allow-private"],
    ));
    let receiver = Receiver::start(port, added["secret"].as_str().unwrap(), 0).await;
    // a product with two units: bought whole (sold out)
    sqlx::query("update resources set total = held + sold + 2 where id = (select resource_id from products where id = 'wild-honey')")
        .execute(&app.db.pool)
        .await
        .unwrap();
    app.settled().await;
    let paid = app.buy(&browser(), &Purchase::of("wild-honey", 2)).await;
    // a ticket, redeemed at the door
    let ticket = app
        .buy(&browser(), &Purchase::of("harbour-lights-general", 1))
        .await;
    let code: String = sqlx::query_scalar("select code from order_items where order_id = $1")
        .bind(ticket.started.order_id)
        .fetch_one(&app.db.pool)
        .await
        .unwrap();
    let redeemed = app
        .admin_post(
            &staff,
            "/admin/redeem",
            &[("csrf", &csrf), ("code", &code), ("place", "door 1")],
        )
        .await;
    assert!(redeemed.status().is_success() || redeemed.status().is_redirection());
    let refund = |units: &'static str| {
        let path = format!("/admin/orders/{}/refund", paid.started.order_id);
        let (app, staff, csrf) = (&app, &staff, &csrf);
        async move {
            app.admin_post(
                staff,
                &path,
                &[
                    ("csrf", csrf.as_str()),
                    ("reason", "test"),
                    ("step", "refund"),
                    ("units:wild-honey", units),
                    ("restock", "on"),
                ],
            )
            .await
            .status()
        }
    };
    // one unit back (part of the order), on sale again
    assert_eq!(refund("1").await, StatusCode::SEE_OTHER);
    app.settled().await;
    // a shopper who leaves the payment page
    let left = browser();
    let started = app.start(&left, &Purchase::of("wild-honey", 1)).await;
    app.leave(&left, &started.cancel_url).await;
    app.settled().await;
    // another whose payment page runs out
    let lapsing = app.start(&browser(), &Purchase::of("wild-honey", 1)).await;
    sqlx::query(
        "update holds set expires_at = now() - interval '1 second', \
                payment_deadline = now() - interval '1 second' \
          where purchase_id = (select hold_id from orders where id = $1)",
    )
    .bind(lapsing.order_id)
    .execute(&app.db.pool)
    .await
    .unwrap();
    sqlx::query("update resources set next_deadline = now() - interval '1 hour'")
        .execute(&app.db.pool)
        .await
        .unwrap();
    sqlx::query("select hf_sweep()")
        .execute(&app.db.pool)
        .await
        .unwrap();
    holdfast::checkout::expire_abandoned_orders(&app.db.pool)
        .await
        .unwrap();
    assert_eq!(app.order_state(&lapsing.token).await, "expired");
    app.settled().await;
    // the last unit sold; a shopper joins the waiting list and is offered
    // the rest of the first order when it comes back
    app.buy(&browser(), &Purchase::of("wild-honey", 1)).await;
    let joined = browser()
        .post(format!("{}/waitlist/wild-honey", app.address))
        .form(&[
            ("name", "Wren"),
            ("email", "wren@example.com"),
            ("qty", "1"),
        ])
        .send()
        .await
        .unwrap();
    assert_eq!(joined.status(), StatusCode::OK);
    let token: String = sqlx::query_scalar("select token from waitlist_entries")
        .fetch_one(&app.db.pool)
        .await
        .unwrap();
    holdfast::waitlist::confirm(&app.db.pool, &token)
        .await
        .unwrap();
    assert_eq!(refund("1").await, StatusCode::SEE_OTHER);
    deliver_all(&app, &worker(&app)).await;
    let requests = receiver.requests();
    assert!(
        requests
            .iter()
            .all(|r| r["verified"] == true && r["answered"] == 200)
    );
    let ids: std::collections::HashSet<&str> =
        requests.iter().map(|r| r["id"].as_str().unwrap()).collect();
    assert_eq!(ids.len(), requests.len(), "each event once");
    let sent: i64 = sqlx::query_scalar("select count(*) from webhook_messages")
        .fetch_one(&app.db.pool)
        .await
        .unwrap();
    assert_eq!(requests.len() as i64, sent, "every event reached it");
    let bodies: Vec<Value> = requests
        .iter()
        .map(|r| serde_json::from_str(r["body"].as_str().unwrap()).unwrap())
        .collect();
    let of = |kind: &str| -> Vec<&Value> { bodies.iter().filter(|b| b["type"] == kind).collect() };
    for expected in [
        "order.paid",
        "order.refunded",
        "order.expired",
        "order.cancelled",
        "code.redeemed",
        "waitlist.offered",
        "product.sold_out",
        "product.available",
    ] {
        assert!(
            !of(expected).is_empty(),
            "{expected} missing from {bodies:#?}"
        );
    }
    // the refunds: part of the order, then the rest
    let refunds: Vec<(bool, i64)> = of("order.refunded")
        .iter()
        .map(|b| {
            (
                b["data"]["refund"]["whole"].as_bool().unwrap(),
                b["data"]["order"]["amount_minor"].as_i64().unwrap(),
            )
        })
        .collect();
    assert_eq!(refunds.len(), 2, "{refunds:?}");
    assert_eq!(
        refunds.iter().map(|r| r.0).collect::<Vec<_>>(),
        [false, true]
    );
    let expired = of("order.expired");
    assert_eq!(expired.len(), 1);
    assert_eq!(expired[0]["data"]["order"]["token"], lapsing.token.as_str());
    let cancelled = of("order.cancelled");
    assert_eq!(
        cancelled[0]["data"]["order"]["token"],
        started.token.as_str()
    );
    let offered = of("waitlist.offered");
    assert_eq!(offered.len(), 1);
    assert_eq!(offered[0]["data"]["qty"], 1);
    assert_eq!(offered[0]["data"]["product_id"], "wild-honey");
}

/// Run the worker's outbox until no delivery is pending.
async fn deliver_all(app: &TestApp, outbox: &Outbox) {
    for _ in 0..40 {
        outbox.drain().await.unwrap();
        let pending: i64 = sqlx::query_scalar(
            "select count(*) from outbox_jobs where kind = 'webhook' and state = 'pending'",
        )
        .fetch_one(&app.db.pool)
        .await
        .unwrap();
        if pending == 0 {
            return;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("deliveries still pending");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_receiver_down_for_a_while_gets_every_event_afterwards_exactly_once() {
    let app = shop().await;
    let port = free_port();
    let url = format!("http://127.0.0.1:{port}/hook");
    let added = json_output(&add_by_command(
        &app,
        &[
            &url,
            "--events",
            "order.paid,order.cancelled,product.sold_out,product.available",
            "--allow-private",
        ],
    ));
    let down = std::env::temp_dir().join(format!("holdfast-receiver-down-{port}"));
    std::fs::write(&down, b"down").unwrap();
    let receiver =
        Receiver::start_failing_while(port, added["secret"].as_str().unwrap(), 0, Some(&down))
            .await;
    // a sale while it is down: the honey sells out, one shopper leaves
    // (back on sale), the last jar goes
    sqlx::query("update resources set total = held + sold + 3 where id = (select resource_id from products where id = 'wild-honey')")
        .execute(&app.db.pool)
        .await
        .unwrap();
    app.settled().await;
    app.buy(&browser(), &Purchase::of("wild-honey", 2)).await;
    let left = browser();
    let started = app.start(&left, &Purchase::of("wild-honey", 1)).await;
    app.leave(&left, &started.cancel_url).await;
    app.settled().await;
    app.buy(&browser(), &Purchase::of("wild-honey", 1)).await;
    let outbox = worker(&app);
    for _ in 0..3 {
        outbox.drain().await.unwrap();
        sqlx::query(
            "update outbox_jobs set run_after = now() where kind = 'webhook' and state = 'pending'",
        )
        .execute(&app.db.pool)
        .await
        .unwrap();
    }
    let while_down = receiver.requests();
    let messages: Vec<String> = sqlx::query_scalar("select id from webhook_messages order by id")
        .fetch_all(&app.db.pool)
        .await
        .unwrap();
    assert!(messages.len() >= 5, "{messages:?}");
    assert!(
        while_down.len() >= 3 * messages.len(),
        "each event was tried while the receiver was down: {}",
        while_down.len()
    );
    assert!(while_down.iter().all(|r| r["answered"] == 500));
    // back up: everything reaches it, each event processed once
    std::fs::remove_file(&down).unwrap();
    deliver_until(&app, &outbox, || {
        receiver
            .requests()
            .iter()
            .filter(|r| r["processed"] == true)
            .count()
            >= messages.len()
    })
    .await;
    for _ in 0..3 {
        outbox.drain().await.unwrap();
    }
    let requests = receiver.requests();
    assert!(requests.iter().all(|r| r["verified"] == true));
    let mut processed: Vec<String> = requests
        .iter()
        .filter(|r| r["processed"] == true)
        .map(|r| r["id"].as_str().unwrap().to_owned())
        .collect();
    processed.sort();
    assert_eq!(processed, messages, "every event once, by its id");
    for id in &messages {
        let ok = requests
            .iter()
            .filter(|r| r["id"] == id.as_str() && r["answered"] == 200)
            .count();
        assert_eq!(ok, 1, "{id} answered 200 {ok} times");
    }
    let pending: i64 = sqlx::query_scalar(
        "select count(*) from outbox_jobs where kind = 'webhook' and state = 'pending'",
    )
    .fetch_one(&app.db.pool)
    .await
    .unwrap();
    assert_eq!(pending, 0);
    let _ = std::fs::remove_file(&down);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deliveries_to_a_dead_receiver_never_hold_up_the_shops_own_jobs() {
    use holdfast::worker::outbox::Lane;
    let app = shop().await;
    app.add_staff().await;
    let (staff, csrf) = app.staff_browser().await;
    // an address that never answers (allowed: it is private)
    json_output(&add_by_command(
        &app,
        &[
            "http://10.255.255.1:9/hook",
            "--events",
            "order.paid,order.refunded",
            "--allow-private",
        ],
    ));
    let paid = app.buy(&browser(), &Purchase::of("wild-honey", 1)).await;
    let refunded = app
        .admin_post(
            &staff,
            &format!("/admin/orders/{}/refund", paid.started.order_id),
            &[
                ("csrf", &csrf),
                ("reason", "test"),
                ("step", "refund"),
                ("units:wild-honey", "1"),
                ("restock", "on"),
            ],
        )
        .await;
    assert_eq!(refunded.status(), StatusCode::SEE_OTHER);
    // the shop's lane: the refund goes to the provider; no delivery is tried
    let outcomes = worker(&app).drain_lane(Lane::Shop).await.unwrap();
    assert!(
        outcomes
            .iter()
            .all(|o| !format!("{o:?}").contains("webhook")),
        "{outcomes:?}"
    );
    let jobs: Vec<(String, String, i32)> =
        sqlx::query_as("select kind, state, attempts from outbox_jobs order by id")
            .fetch_all(&app.db.pool)
            .await
            .unwrap();
    // the refund was asked of the provider (it answers pending; a later
    // pass looks again), the confirmation and refund mails sent
    assert!(
        jobs.iter()
            .any(|(kind, _, attempts)| kind == "refund" && *attempts >= 1),
        "{jobs:?}"
    );
    assert!(
        jobs.iter()
            .filter(|(kind, _, _)| kind != "webhook" && kind != "refund")
            .all(|(_, state, _)| state == "done"),
        "{jobs:?}"
    );
    let webhooks: Vec<_> = jobs
        .iter()
        .filter(|(kind, _, _)| kind == "webhook")
        .collect();
    assert_eq!(webhooks.len(), 2, "{jobs:?}");
    assert!(
        webhooks
            .iter()
            .all(|(_, state, attempts)| state == "pending" && *attempts == 0),
        "{jobs:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_seated_sale_names_each_tickets_seat_in_its_webhooks() {
    let app = shop().await;
    app.add_staff().await;
    let (staff, csrf) = app.staff_browser().await;
    let port = free_port();
    let url = format!("http://127.0.0.1:{port}/hook");
    let added = json_output(&add_by_command(
        &app,
        &[
            &url,
            "--events",
            "order.paid,code.redeemed",
            "--allow-private",
        ],
    ));
    let receiver = Receiver::start(port, added["secret"].as_str().unwrap(), 0).await;
    app.settled().await;
    let paid = app
        .buy(&browser(), &Purchase::of("winter-gala-stalls", 2))
        .await;
    let mut codes: Vec<(String, String)> = Vec::new();
    for _ in 0..200 {
        codes = sqlx::query_as(
            "select c.code, s.label from order_items c join seats s on s.id = c.seat_id \
              where c.order_id = $1 order by s.row_rank, s.run, s.pos",
        )
        .bind(paid.started.order_id)
        .fetch_all(&app.db.pool)
        .await
        .unwrap();
        if codes.len() == 2 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(codes.len(), 2, "two tickets, each with its seat");
    // the first ticket admitted at the door
    let redeemed = app
        .admin_post(
            &staff,
            "/admin/redeem",
            &[("csrf", &csrf), ("code", &codes[0].0), ("place", "door 1")],
        )
        .await;
    assert!(redeemed.status().is_success() || redeemed.status().is_redirection());
    let outbox = worker(&app);
    let bodies = |receiver: &Receiver| -> Vec<Value> {
        receiver
            .requests()
            .iter()
            .filter(|r| r["processed"] == true)
            .map(|r| serde_json::from_str(r["body"].as_str().unwrap()).unwrap())
            .collect()
    };
    deliver_until(&app, &outbox, || bodies(&receiver).len() == 2).await;
    let bodies = bodies(&receiver);
    let of = |kind: &str| bodies.iter().find(|b| b["type"] == kind).unwrap().clone();
    // the order's line names its seats, from the stage back
    let line = of("order.paid")["data"]["order"]["lines"][0].clone();
    assert_eq!(line["product_id"], "winter-gala-stalls");
    assert_eq!(
        line["seats"],
        serde_json::json!([codes[0].1, codes[1].1]),
        "{line}"
    );
    // the ticket admitted names its own seat
    let door = of("code.redeemed")["data"].clone();
    assert_eq!(door["code"], codes[0].0.as_str());
    assert_eq!(door["seat"], codes[0].1.as_str(), "{door}");
}
