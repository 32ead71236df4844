//! The official Stripe CLI against the sandbox, offline (SPEC §14): `stripe
//! listen` forwards the events of a purchase to the shop, whose order is
//! paid through them alone (the sandbox's own deliveries are off and the
//! shopper never comes back from the payment page), and `stripe events
//! resend` replays one without changing anything. The CLI (`@stripe/cli`
//! from npm, pinned) is installed once into `.holdfast/stripe-cli`; it runs
//! with a HOME of its own, no telemetry and no update check, and talks to
//! nothing but the sandbox and the shop on this machine.

use std::io::{BufRead, BufReader};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use holdfast_testkit::*;

/// The CLI's npm release, and the package with its Linux binary.
const CLI: &str = "@stripe/cli@1.52.0";
const BINARY_PACKAGE: &str = "@stripe/cli-linux-x64";

/// The `stripe` binary, installed from npm when it is missing.
fn stripe_binary() -> PathBuf {
    let dir = workspace_root().join(".holdfast/stripe-cli");
    let binary = dir
        .join("node_modules")
        .join(BINARY_PACKAGE)
        .join("bin/stripe");
    let marker = dir.join(format!("installed-{}", CLI.replace(['@', '/'], "_")));
    if marker.exists() && binary.exists() {
        return binary;
    }
    std::fs::create_dir_all(&dir).expect("the CLI's folder");
    // --ignore-scripts: the binary comes in its platform package; the
    // wrapper's postinstall would only fetch it from GitHub without it
    let installed = Command::new("npm")
        .args(["install", "--prefix"])
        .arg(&dir)
        .args([
            "--ignore-scripts",
            "--no-audit",
            "--no-fund",
            "--no-save",
            "--loglevel=error",
            CLI,
        ])
        .status()
        .expect("npm runs (Node.js is needed for this test)");
    assert!(installed.success(), "npm could not install {CLI}");
    assert!(
        binary.exists(),
        "{CLI} brought no {BINARY_PACKAGE} binary (this test runs on Linux x86-64)"
    );
    std::fs::write(&marker, b"").expect("marker");
    binary
}

/// The CLI pointed at one sandbox, with a home of its own.
struct Cli {
    binary: PathBuf,
    home: PathBuf,
    /// The sandbox's root: the CLI resolves API paths against the host
    /// of `--api-base`.
    api_base: String,
    key: String,
}

impl Cli {
    fn new(binary: PathBuf, sandbox: &TestSandbox) -> Self {
        let home = workspace_root()
            .join(".holdfast")
            .join(format!("stripe-cli-home-{}", uuid::Uuid::new_v4().simple()));
        std::fs::create_dir_all(&home).expect("the CLI's home");
        Self {
            binary,
            home,
            api_base: sandbox.base.clone(),
            key: sandbox.settings.stripe_secret_key.expose().to_owned(),
        }
    }

    /// `stripe <args> --api-base … --api-key …`, offline and quiet.
    fn command(&self, args: &[&str]) -> Command {
        let mut command = Command::new(&self.binary);
        command
            .args(args)
            .args(["--api-base", &self.api_base, "--api-key", &self.key])
            .env("HOME", &self.home)
            .env("XDG_CONFIG_HOME", &self.home)
            .env("STRIPE_CLI_TELEMETRY_OPTOUT", "1")
            .env("DO_NOT_TRACK", "1")
            .env("STRIPE_DEVICE_NAME", "holdfast-test")
            .env_remove("STRIPE_API_KEY")
            .env_remove("HTTPS_PROXY")
            .env_remove("https_proxy")
            .env_remove("HTTP_PROXY")
            .env_remove("http_proxy")
            .env_remove("ALL_PROXY")
            .stdin(Stdio::null());
        command
    }

    /// `stripe listen`, running until dropped, its lines collected.
    fn listen(&self, args: &[&str]) -> Listening {
        let mut child = self
            .command(&[&["listen", "--skip-update"][..], args].concat())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("stripe listen starts");
        let lines = Arc::new(Mutex::new(Vec::new()));
        let readers = [
            child
                .stdout
                .take()
                .map(|out| Box::new(out) as Box<dyn std::io::Read + Send>),
            child
                .stderr
                .take()
                .map(|err| Box::new(err) as Box<dyn std::io::Read + Send>),
        ];
        for reader in readers.into_iter().flatten() {
            let lines = lines.clone();
            std::thread::spawn(move || {
                for line in BufReader::new(reader).lines().map_while(Result::ok) {
                    lines.lock().unwrap().push(line);
                }
            });
        }
        Listening { child, lines }
    }
}

impl Drop for Cli {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.home);
    }
}

/// A running `stripe listen`; stopped (by its own pid) when dropped.
struct Listening {
    child: Child,
    lines: Arc<Mutex<Vec<String>>>,
}

impl Listening {
    fn lines(&self) -> Vec<String> {
        self.lines.lock().unwrap().clone()
    }

    /// The lines as a failure may show them: the signing secret the CLI
    /// prints is left out.
    fn shown(&self) -> Vec<String> {
        self.lines()
            .into_iter()
            .map(|line| match line.find("whsec_") {
                Some(at) => {
                    let end = line[at..]
                        .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
                        .map_or(line.len(), |n| at + n);
                    format!("{}whsec_[redacted]{}", &line[..at], &line[end..])
                }
                None => line,
            })
            .collect()
    }

    /// Wait until `count` lines satisfy `wanted`; those lines.
    async fn wait_for(
        &mut self,
        what: &str,
        count: usize,
        wanted: impl Fn(&str) -> bool,
    ) -> Vec<String> {
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            let found: Vec<String> = self.lines().into_iter().filter(|l| wanted(l)).collect();
            if found.len() >= count {
                return found;
            }
            if let Ok(Some(status)) = self.child.try_wait() {
                panic!(
                    "stripe listen ended ({status}) before {what}: {:#?}",
                    self.shown()
                );
            }
            assert!(
                Instant::now() < deadline,
                "stripe listen never printed {what}: {:#?}",
                self.shown()
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }
}

impl Drop for Listening {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Run a CLI command to its end, off the runtime's threads.
async fn finished(mut command: Command) -> std::process::Output {
    tokio::task::spawn_blocking(move || command.output().expect("the CLI runs"))
        .await
        .unwrap()
}

/// What the purchase did: the order's state, units sold, events taken in,
/// jobs queued.
async fn effects(app: &TestApp) -> (String, i64, i64, i64) {
    sqlx::query_as(
        "select (select state::text from orders), \
                (select coalesce(sum(sold), 0)::bigint from resources), \
                (select count(*) from webhook_events), \
                (select count(*) from outbox_jobs)",
    )
    .fetch_one(&app.db.pool)
    .await
    .unwrap()
}

/// The event id between the brackets that end a line of the CLI's.
fn event_id(line: &str) -> String {
    line.rsplit('[')
        .next()
        .and_then(|tail| tail.strip_suffix(']'))
        .unwrap_or_else(|| panic!("no event id in {line:?}"))
        .to_owned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stripe_listen_forwards_a_purchase_and_a_resend_changes_nothing() {
    let app = spawn_app().await;
    app.load_demo().await;
    // only the CLI can tell the shop: the sandbox's own deliveries are off
    app.sandbox.stripe.remove_webhook_url();
    let binary = tokio::task::spawn_blocking(stripe_binary).await.unwrap();
    let cli = Cli::new(binary, &app.sandbox);

    // the secret to configure is the one the shop verifies with
    let printed = finished(cli.command(&["listen", "--print-secret"])).await;
    assert!(
        printed.status.success(),
        "stripe listen --print-secret failed"
    );
    assert!(
        String::from_utf8_lossy(&printed.stdout).trim()
            == app.sandbox.settings.stripe_webhook_secret.expose(),
        "--print-secret did not print the sandbox's webhook secret"
    );

    let forward_to = format!("{}/webhooks/stripe", app.address);
    let mut listening = cli.listen(&[
        "--events",
        "checkout.session.completed,checkout.session.expired",
        "--forward-to",
        &forward_to,
    ]);
    listening
        .wait_for("Ready!", 1, |line| line.contains("Ready!"))
        .await;

    // a shopper buys and pays, and never comes back from the payment page
    let shopper = browser();
    app.add(&shopper, "harbour-lights-general", 1).await;
    let session_url = location(&app.checkout(&shopper).await);
    assert!(session_url.starts_with(&format!("{}/stripe/pay/", app.sandbox.base)));
    let paid = shopper
        .post(format!("{session_url}/pay"))
        .send()
        .await
        .unwrap();
    assert_eq!(paid.status(), 303, "paid (the return is not followed)");
    let token: String = sqlx::query_scalar("select token from orders")
        .fetch_one(&app.db.pool)
        .await
        .unwrap();

    // the CLI forwards the event, the shop answers 200, the order is paid
    let forwarded = listening
        .wait_for("the forwarded event", 1, |line| {
            line.contains("--> checkout.session.completed [evt_")
        })
        .await;
    let event = event_id(&forwarded[0]);
    let answered = format!("<--  [200] POST {forward_to} [{event}]");
    listening
        .wait_for("the shop's 200", 1, |line| line.contains(&answered))
        .await;
    app.wait_for_state(&token, "paid").await;
    let ledger = app.sandbox.stripe.ledger();
    assert!(
        ledger
            .deliveries
            .iter()
            .all(|d| d.via == holdfast_sandbox::Carrier::StripeCli),
        "nothing came from the sandbox itself: {:?}",
        ledger.deliveries
    );
    assert!(
        ledger
            .deliveries
            .iter()
            .any(|d| d.event_id == event && d.status == Some(200)),
        "the CLI reported the shop's 200 back: {:?}",
        ledger.deliveries
    );
    let before = effects(&app).await;
    assert_eq!(before.0, "paid");

    // stripe events resend: the same event again, answered 200, no change
    let resent = finished(cli.command(&["events", "resend", &event])).await;
    assert!(
        resent.status.success() && String::from_utf8_lossy(&resent.stdout).contains(&event),
        "stripe events resend failed: {}",
        String::from_utf8_lossy(&resent.stderr)
    );
    listening
        .wait_for("the resend's 200", 2, |line| line.contains(&answered))
        .await;
    for _ in 0..100 {
        let replies = app
            .sandbox
            .stripe
            .ledger()
            .deliveries
            .iter()
            .filter(|d| d.event_id == event && d.status == Some(200))
            .count();
        if replies >= 2 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(effects(&app).await, before, "the replay changed something");
    assert!(
        app.sandbox.stripe.ledger().refunds.is_empty(),
        "nothing refunded"
    );
    // every line the CLI printed for an event shows the shop's 200
    assert!(
        listening
            .lines()
            .iter()
            .filter(|line| line.contains("<--"))
            .all(|line| line.contains("[200]")),
        "{:#?}",
        listening.shown()
    );
}
