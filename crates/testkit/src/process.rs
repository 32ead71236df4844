//! `holdfast` as a process of its own: a server (`serve`, `worker`) against
//! the test's database and sandbox, and the operator commands run as the
//! real binary. The binary is the test's to name (`env!("CARGO_BIN_EXE_…")`,
//! which cargo sets for the package's own integration tests only).

use std::process::{Child, Command, Stdio};
use std::time::Duration;

use crate::client::http_client;
use crate::database::TestDb;
use crate::sandbox::TestSandbox;

/// A port nobody listens on at the moment of asking.
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// A `holdfast serve` process against the test database and sandbox,
/// killed when dropped.
pub struct Server {
    pub child: Child,
    /// `http://127.0.0.1:<port>`
    pub address: String,
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// `binary` (the `holdfast` binary) with `args`, configured for the test
/// database and the test's sandbox (as real provider keys and API bases),
/// quiet, with the shop's per-client limits off.
pub fn holdfast_process(
    binary: &str,
    db: &TestDb,
    sandbox: &TestSandbox,
    args: &[&str],
) -> Command {
    let mut command = Command::new(binary);
    command
        .args(args)
        .env("DATABASE_URL", &db.url)
        .env(
            "HOLDFAST_SESSION_KEY",
            "recovery-test-session-key-0123456789abcdef",
        )
        .env("HOLDFAST_SWEEP_SECONDS", "1")
        .env("HOLDFAST_OUTBOX_LEASE_SECONDS", "3")
        .env(
            "STRIPE_SECRET_KEY",
            sandbox.settings.stripe_secret_key.expose(),
        )
        .env(
            "STRIPE_WEBHOOK_SECRET",
            sandbox.settings.stripe_webhook_secret.expose(),
        )
        .env("STRIPE_API_BASE", sandbox.stripe.api_base())
        .env("RAZORPAY_KEY_ID", &sandbox.settings.razorpay_key_id)
        .env(
            "RAZORPAY_KEY_SECRET",
            sandbox.settings.razorpay_key_secret.expose(),
        )
        .env("RAZORPAY_API_BASE", sandbox.razorpay.api_base())
        .env("RUST_LOG", "warn")
        // every shopper here comes from 127.0.0.1: the tests of the limits
        // turn them on themselves
        .env("HOLDFAST_ADDRESS_RATE", "off")
        .env("HOLDFAST_ADDRESS_UNITS", "off")
        .env("HOLDFAST_EMAIL_LIMIT", "off")
        .env_remove("HOLDFAST_CRASH_AT")
        .stdout(Stdio::null())
        .stderr(Stdio::null());
    command
}

impl Server {
    /// `binary serve <args>` ([`holdfast_process`]) on a port of its own,
    /// once it answers its health check.
    pub async fn serve(binary: &str, db: &TestDb, sandbox: &TestSandbox, args: &[&str]) -> Self {
        let port = free_port();
        let mut serve = vec!["serve"];
        serve.extend(args);
        let mut command = holdfast_process(binary, db, sandbox, &serve);
        command.env("HOLDFAST_ADDR", format!("127.0.0.1:{port}"));
        let server = Server {
            child: command
                .spawn()
                .unwrap_or_else(|e| panic!("run {binary}: {e}")),
            address: format!("http://127.0.0.1:{port}"),
        };
        ready(&server).await;
        server
    }
}

/// Wait for a server to answer its health check.
pub async fn ready(server: &Server) {
    let client = http_client();
    for _ in 0..300 {
        if let Ok(answer) = client
            .get(format!("{}/healthz", server.address))
            .send()
            .await
            && answer.status() == 200
        {
            return;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("holdfast serve did not come up");
}

/// Run a command-line binary (`env!("CARGO_BIN_EXE_…")`) against `db`.
pub fn run_command(binary: &str, db: &TestDb, args: &[&str]) -> std::process::Output {
    std::process::Command::new(binary)
        .arg("--db")
        .arg(&db.url)
        .args(args)
        .env_remove("DATABASE_URL")
        .output()
        .unwrap_or_else(|e| panic!("run {binary}: {e}"))
}

/// The one JSON value a successful command printed.
pub fn json_output(output: &std::process::Output) -> serde_json::Value {
    assert!(
        output.status.success(),
        "exit {:?}: {}",
        output.status.code(),
        String::from_utf8_lossy(&output.stderr)
    );
    serde_json::from_slice(&output.stdout).expect("one JSON value on stdout")
}
