//! The shop on port 0 against its own database and its own sandbox, with
//! the sandbox's webhooks pointed at it: [`spawn_app`] and what a test asks
//! the shop (its stock in memory, an order's state, its outbox).

use std::net::TcpListener;

use holdfast::startup::Application;

use crate::client::browser;
use crate::database::TestDb;
use crate::engine::drain_outbox;
use crate::sandbox::{TestSandbox, spawn_sandbox};

/// The shop on a random port against its own database and its own sandbox,
/// with the sandbox's webhooks pointed at the shop.
pub struct TestApp {
    pub address: String,
    pub db: TestDb,
    pub sandbox: TestSandbox,
    /// A shopper's browser: keeps cookies, does not follow redirects.
    pub client: reqwest::Client,
    /// Content Security Policy violations browsers reported to the shop.
    pub csp_reports: std::sync::Arc<std::sync::atomic::AtomicU64>,
    /// The shop's stock in memory.
    pub live: holdfast::live::LiveStock,
    /// The shop's webhooks (their combined confirmations).
    pub webhooks: holdfast::webhooks::Webhooks,
    /// The shop's waiting-list joins (combined per product).
    pub joins: holdfast::waitlist::Joins,
}

/// The shop against a fresh database ([`TestDb::new`]).
pub async fn spawn_app() -> TestApp {
    spawn_app_with(TestDb::new().await).await
}

/// The shop against `db`.
pub async fn spawn_app_with(db: TestDb) -> TestApp {
    spawn_app_shaped(db, |_, _| {}).await
}

/// [`spawn_app_with`], with the shop changed before it opens (other keys,
/// other settings).
pub async fn spawn_app_shaped(
    db: TestDb,
    shape: impl FnOnce(&TestSandbox, &mut holdfast::state::Shop),
) -> TestApp {
    let sandbox = spawn_sandbox();
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind port 0");
    let address = format!("http://127.0.0.1:{}", listener.local_addr().unwrap().port());
    sandbox
        .stripe
        .set_webhook_url(format!("{address}/webhooks/stripe"));
    sandbox
        .razorpay
        .set_webhook_url(format!("{address}/webhooks/razorpay"));
    let mut shop =
        holdfast::state::Shop::local(db.pool.clone(), sandbox.providers(), address.clone());
    // the tests count gauges exactly, before and after what they do
    shop.metrics = holdfast::metrics::Exporter::new(None).fresh_for(std::time::Duration::ZERO);
    let csp_reports = shop.csp_reports.clone();
    shape(&sandbox, &mut shop);
    let live = shop.live.clone();
    let webhooks = shop.webhooks.clone();
    let joins = shop.joins.clone();
    let app = Application::build(listener, shop).expect("build app");
    tokio::spawn(app.run_until_stopped());
    TestApp {
        address,
        db,
        sandbox,
        client: browser(),
        csp_reports,
        live,
        webhooks,
        joins,
    }
}

impl TestApp {
    /// Load the demo catalogue and wait until the shop's memory has read it.
    pub async fn load_demo(&self) {
        self.db.load_demo().await;
        self.settled().await;
    }

    /// Waits until the shop's memory has read the database as it is now
    /// (the pages may lag it by up to a second otherwise).
    pub async fn settled(&self) {
        assert!(
            self.live.refresh().await,
            "the shop could not read its stock"
        );
    }

    /// An order's id, by its token.
    pub async fn order_id(&self, token: &str) -> uuid::Uuid {
        sqlx::query_scalar("select id from orders where token = $1")
            .bind(token)
            .fetch_one(&self.db.pool)
            .await
            .unwrap()
    }

    /// An order's state, by its token.
    pub async fn order_state(&self, token: &str) -> String {
        sqlx::query_scalar("select state::text from orders where token = $1")
            .bind(token)
            .fetch_one(&self.db.pool)
            .await
            .unwrap()
    }

    /// Wait (five seconds at most) for an order to reach `state`.
    pub async fn wait_for_state(&self, token: &str, state: &str) {
        for _ in 0..100 {
            if self.order_state(token).await == state {
                return;
            }
            tokio::time::sleep(std::time::Duration::from_millis(50)).await;
        }
        panic!(
            "order never reached {state}: it is {}",
            self.order_state(token).await
        );
    }

    /// The worker's outbox, drained ([`drain_outbox`]).
    pub async fn outbox(&self) -> Vec<holdfast::worker::outbox::JobOutcome> {
        drain_outbox(&self.db.pool, self.sandbox.providers()).await
    }

    /// Run the outbox; the order must then be refunded (if not, what the
    /// outbox did and every job are printed).
    pub async fn refunded_by_the_outbox(&self, token: &str) {
        let outcomes = self.outbox().await;
        let state = self.order_state(token).await;
        if state != "refunded" {
            let jobs: Vec<(String, String, serde_json::Value, Option<String>)> = sqlx::query_as(
                "select dedupe_key, state, payload, last_error from outbox_jobs order by id",
            )
            .fetch_all(&self.db.pool)
            .await
            .unwrap();
            panic!(
                "the order is {state} after the outbox: {outcomes:?}; jobs {jobs:?}; refunds {:?}",
                self.sandbox.stripe.ledger().refunds
            );
        }
    }
}
