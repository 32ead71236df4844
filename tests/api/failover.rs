//! The database fails over in the middle of a flash sale, for real: three
//! PostgreSQL nodes under Patroni with etcd and HAProxy (`deploy/ha/cluster`),
//! two `holdfast serve` processes and a worker that reach them only through
//! HAProxy, a crowd buying one ticket tier through the shop and the sandbox,
//! and four seconds in one fault per run: the leader's machine lost
//! (`kill -9` of its Patroni and PostgreSQL), an orphaned primary (its
//! Patroni alone killed), a planned switchover. In each: no shopper request
//! is answered 5xx, every checkout a shopper was sent to pay for is on the
//! new primary, every charge ends in exactly one sale or one refund,
//! nothing is oversold, `holdfast check` is clean, and the first checkout
//! granted after the fault comes within `ttl` + 5 s.
//!
//! Then the backups are restored for real: a pgBackRest base backup, a sale,
//! a moment marked, more sales, and a point-in-time restore into a fresh
//! cluster (`deploy/backup/drill`), where `holdfast check` is clean and
//! exactly the orders paid before the moment are.

use std::collections::BTreeMap;
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use holdfast::configuration::Secret;
use holdfast_sandbox::{Sandbox, SandboxSettings, StripeSandbox};

use holdfast_testkit::{browser, location, workspace_root};

/// Shoppers per run, one arriving every [`ARRIVAL`], for [`UNITS`] places.
const SHOPPERS: usize = 150;
const ARRIVAL: Duration = Duration::from_millis(60);
const UNITS: i64 = 110;
/// When the fault comes, after the first shopper.
const FAULT_AT: Duration = Duration::from_secs(4);
/// Patroni's `ttl` in deploy/ha/cluster: the longest a leader key outlives
/// its holder.
const TTL: Duration = Duration::from_secs(10);
const TIER: &str = "harbour-lights-general";
/// The probe's tier, with room for every probe.
const PROBE: &str = "harbour-lights-vip";

/// The cluster, started once for the three runs and stopped at the end.
struct Cluster {
    dir: PathBuf,
    url: String,
}

impl Cluster {
    fn script() -> PathBuf {
        workspace_root().join("deploy/ha/cluster")
    }

    fn command(dir: &Path, args: &[&str]) -> Command {
        let mut command = Command::new(Self::script());
        command.arg("--dir").arg(dir).args(args);
        command
    }

    async fn start() -> Self {
        let dir = workspace_root().join(".holdfast/ha-failover");
        let port = std::env::var("HOLDFAST_HA_PORT").unwrap_or_else(|_| "55400".into());
        let mut command = Self::command(&dir, &["--base-port", &port, "start"]);
        let output = tokio::task::spawn_blocking(move || command.output())
            .await
            .unwrap()
            .expect("run deploy/ha/cluster start");
        assert!(
            output.status.success(),
            "the cluster did not start: {}",
            String::from_utf8_lossy(&output.stderr)
        );
        let url = String::from_utf8(output.stdout).unwrap().trim().to_owned();
        assert!(url.starts_with("postgres://"), "{url}");
        Self { dir, url }
    }

    /// A subcommand's one line of output.
    async fn run(&self, args: &[&str]) -> String {
        self.run_telling(args).await.0
    }

    /// A subcommand's one line of output, and what it said on stderr.
    async fn run_telling(&self, args: &[&str]) -> (String, String) {
        let mut command = Self::command(&self.dir, args);
        let what = args.join(" ");
        let output = tokio::task::spawn_blocking(move || command.output())
            .await
            .unwrap()
            .unwrap_or_else(|e| panic!("run cluster {what}: {e}"));
        assert!(
            output.status.success(),
            "cluster {}: {}",
            args.join(" "),
            String::from_utf8_lossy(&output.stderr)
        );
        (
            String::from_utf8(output.stdout).unwrap().trim().to_owned(),
            String::from_utf8_lossy(&output.stderr).into_owned(),
        )
    }

    /// The URL of database `name` through HAProxy.
    fn database(&self, name: &str) -> String {
        let (server, _) = self.url.rsplit_once('/').unwrap();
        format!("{server}/{name}")
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        let _ = Self::command(&self.dir, &["stop"])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status();
    }
}

/// A `holdfast` process of the run, its log kept beside the cluster's.
struct Process(Child);

impl Drop for Process {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn holdfast(url: &str, sandbox: &StripeSandbox, log: &Path, args: &[&str]) -> Command {
    let settings = SandboxSettings::development();
    let mut command = Command::new(env!("CARGO_BIN_EXE_holdfast"));
    command
        .args(args)
        .env("DATABASE_URL", url)
        .env(
            "HOLDFAST_SESSION_KEY",
            "failover-test-session-key-0123456789abcdef",
        )
        .env("STRIPE_SECRET_KEY", settings.stripe_secret_key.expose())
        .env(
            "STRIPE_WEBHOOK_SECRET",
            settings.stripe_webhook_secret.expose(),
        )
        .env("STRIPE_API_BASE", sandbox.api_base())
        .env("HOLDFAST_SWEEP_SECONDS", "1")
        .env("HOLDFAST_OUTBOX_LEASE_SECONDS", "5")
        .env("HOLDFAST_DB_WAIT_SECONDS", "25")
        .env("HOLDFAST_ADDRESS_RATE", "off")
        .env("HOLDFAST_ADDRESS_UNITS", "off")
        .env("HOLDFAST_EMAIL_LIMIT", "off")
        .env("RUST_LOG", "warn")
        .env_remove("HOLDFAST_CRASH_AT")
        .env_remove("HOLDFAST_LOSE_ANSWER_AT")
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(log).expect("a log file"));
    command
}

async fn serving(address: &str) {
    let client = holdfast_testkit::http_client();
    for _ in 0..600 {
        if let Ok(answer) = client.get(format!("{address}/healthz")).send().await
            && answer.status() == 200
        {
            return;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("{address} did not come up");
}

/// What one shopper went through.
#[derive(Debug, Default)]
struct Trip {
    /// (step, status, how long it took) of every answer of the shop.
    answers: Vec<(&'static str, u16, Duration)>,
    /// The payment page the shop sent them to: when the checkout was sent,
    /// and when it was answered.
    sent_to_pay: Option<(String, Instant, Instant)>,
}

/// One shopper: a ticket in the basket, the checkout, the payment at the
/// sandbox, the way back and the order page.
async fn shopper(shop: String) -> Trip {
    let client = browser();
    let mut trip = Trip::default();
    let mut sent = Instant::now();
    let mut answer =
        |step: &'static str, response: &reqwest::Result<reqwest::Response>, sent: Instant| {
            trip.answers.push((
                step,
                response.as_ref().map_or(0, |r| r.status().as_u16()),
                sent.elapsed(),
            ));
        };
    let added = client
        .post(format!("{shop}/basket/add"))
        .form(&[("product_id", TIER), ("qty", "1")])
        .send()
        .await;
    answer("basket_add", &added, sent);
    sent = Instant::now();
    let page = client.get(format!("{shop}/basket")).send().await;
    answer("basket", &page, sent);
    let Ok(page) = page else { return trip };
    let Ok(page) = page.text().await else {
        return trip;
    };
    let Some(key) = holdfast_testkit::try_field(&page, "checkout_key") else {
        return trip;
    };
    let checkout_sent = Instant::now();
    let started = client
        .post(format!("{shop}/checkout"))
        .form(&[
            ("checkout_key", key.as_str()),
            ("name", "Ada Shopper"),
            ("email", "ada@example.com"),
            ("provider", "stripe"),
        ])
        .send()
        .await;
    answer("checkout", &started, checkout_sent);
    let Ok(started) = started else { return trip };
    if started.status() != 303 || !location(&started).contains("/stripe/pay/") {
        return trip;
    }
    let pay_at = location(&started);
    let session = pay_at.rsplit('/').next().unwrap().to_owned();
    trip.sent_to_pay = Some((session, checkout_sent, Instant::now()));
    let paid = client.post(format!("{pay_at}/pay")).send().await;
    let Ok(paid) = paid else {
        trip.answers.push(("sandbox_pay", 0, Duration::ZERO));
        return trip;
    };
    if paid.status() != 303 {
        trip.answers
            .push(("sandbox_pay", paid.status().as_u16(), Duration::ZERO));
        return trip;
    }
    sent = Instant::now();
    let back = client.get(location(&paid)).send().await;
    answer("return", &back, sent);
    let Ok(back) = back else { return trip };
    if back.status() == 303 {
        sent = Instant::now();
        let order = client
            .get(format!("{shop}{}", location(&back)))
            .send()
            .await;
        answer("order_page", &order, sent);
    }
    trip
}

/// A checkout every 100 ms of another tier, through the second server,
/// until told to stop: when checkouts are granted, from before the fault
/// to after it, whatever the crowd's tier is doing. Each answer: (status,
/// when the checkout was sent, when it was answered).
async fn probe(
    shop: String,
    stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
) -> Vec<(u16, Instant, Instant)> {
    let mut answers = Vec::new();
    while !stop.load(std::sync::atomic::Ordering::Relaxed) {
        let client = browser();
        let sent = Instant::now();
        let status = async {
            let added = client
                .post(format!("{shop}/basket/add"))
                .form(&[("product_id", PROBE), ("qty", "1")])
                .send()
                .await
                .ok()?;
            if added.status() != 303 {
                return Some(added.status().as_u16());
            }
            let page = client.get(format!("{shop}/basket")).send().await.ok()?;
            if page.status() != 200 {
                return Some(page.status().as_u16());
            }
            let key = holdfast_testkit::try_field(&page.text().await.ok()?, "checkout_key")?;
            let started = client
                .post(format!("{shop}/checkout"))
                .form(&[
                    ("checkout_key", key.as_str()),
                    ("name", "Probe"),
                    ("email", "probe@example.com"),
                    ("provider", "stripe"),
                ])
                .send()
                .await
                .ok()?;
            Some(started.status().as_u16())
        }
        .await
        .unwrap_or(0);
        answers.push((status, sent, Instant::now()));
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    answers
}

/// One run: a fresh database on the cluster, the shop's processes, the
/// crowd, the fault four seconds in; then everything is checked.
async fn sale_through(cluster: &Cluster, fault: &str) {
    let name = format!("failover_{}", fault.replace('-', "_"));
    let admin = sqlx::PgPool::connect(&cluster.url).await.unwrap();
    sqlx::query(&format!("drop database if exists {name} with (force)"))
        .execute(&admin)
        .await
        .unwrap();
    sqlx::query(&format!("create database {name}"))
        .execute(&admin)
        .await
        .unwrap();
    admin.close().await;
    let url = cluster.database(&name);
    let pool = holdfast::database::connect(&Secret::new(&url), 4)
        .await
        .unwrap();
    holdfast::database::migrate(&mut pool.acquire().await.unwrap())
        .await
        .unwrap();
    holdfast::catalogue::CatalogueFile::read(&workspace_root().join("fixtures/catalogue.json"))
        .unwrap()
        .load(&pool)
        .await
        .unwrap();
    holdfast::inventory::Inventory::new(pool.clone())
        .upsert_resource(
            &holdfast::inventory::ResourceId::parse(TIER).unwrap(),
            holdfast::inventory::Capacity::parse(UNITS).unwrap(),
        )
        .await
        .unwrap();
    holdfast::inventory::Inventory::new(pool.clone())
        .upsert_resource(
            &holdfast::inventory::ResourceId::parse(PROBE).unwrap(),
            holdfast::inventory::Capacity::parse(100_000).unwrap(),
        )
        .await
        .unwrap();
    sqlx::query("update products set max_per_order = 100 where id = $1")
        .bind(PROBE)
        .execute(&pool)
        .await
        .unwrap();

    // the sandbox, retrying webhooks for a minute and more
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let sandbox_base = format!("http://127.0.0.1:{}", listener.local_addr().unwrap().port());
    let mut settings = SandboxSettings::development();
    settings.retry_base = Duration::from_millis(500);
    settings.max_attempts = 12;
    settings.refunds_settle_after = Some(Duration::from_millis(200));
    let sandbox = Sandbox::build(listener, settings, sandbox_base).unwrap();
    let stripe = sandbox.stripe.clone();
    tokio::spawn(sandbox.run_until_stopped());

    let logs = cluster.dir.join("log");
    std::fs::create_dir_all(&logs).unwrap();
    let ports = [free_port(), free_port()];
    let shops: Vec<String> = ports
        .iter()
        .map(|port| format!("http://127.0.0.1:{port}"))
        .collect();
    stripe.set_webhook_url(format!("{}/webhooks/stripe", shops[0]));
    let mut processes = Vec::new();
    for (i, port) in ports.iter().enumerate() {
        let mut command = holdfast(
            &url,
            &stripe,
            &logs.join(format!("{fault}-serve-{i}.log")),
            &["serve", "--no-worker"],
        );
        command.env("HOLDFAST_ADDR", format!("127.0.0.1:{port}"));
        processes.push(Process(command.spawn().expect("holdfast serve")));
    }
    processes.push(Process(
        holdfast(
            &url,
            &stripe,
            &logs.join(format!("{fault}-worker.log")),
            &["worker"],
        )
        .spawn()
        .expect("holdfast worker"),
    ));
    for shop in &shops {
        serving(shop).await;
    }

    // the crowd, and the fault in the middle of it
    let leader = cluster.run(&["leader"]).await;
    let began = Instant::now();
    let stop_probing = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let probing = tokio::spawn(probe(shops[1].clone(), stop_probing.clone()));
    let crowd: Vec<_> = (0..SHOPPERS)
        .map(|i| {
            let shop = shops[i % shops.len()].clone();
            tokio::spawn(async move {
                tokio::time::sleep(ARRIVAL * i as u32).await;
                shopper(shop).await
            })
        })
        .collect();
    tokio::time::sleep(FAULT_AT).await;
    let asked_at = (Instant::now(), std::time::SystemTime::now());
    let (_, told) = cluster.run_telling(&[fault]).await;
    // the moment of the kill, as the script says it ("… at <unix time>");
    // a switchover's is the moment it was asked for
    let faulted_at = told
        .lines()
        .find_map(|line| {
            line.rsplit(" at ")
                .next()
                .and_then(|t| t.split_whitespace().next())
                .and_then(|t| t.trim_end_matches(';').parse::<f64>().ok())
        })
        .map(|unix| {
            let asked_unix = asked_at
                .1
                .duration_since(std::time::UNIX_EPOCH)
                .unwrap()
                .as_secs_f64();
            asked_at.0 + Duration::from_secs_f64((unix - asked_unix).max(0.0))
        })
        .unwrap_or(asked_at.0);
    let new_leader = cluster
        .run(&["wait-leader", "--timeout", "60", "--not", &leader])
        .await;
    let mut trips = Vec::new();
    for shopper in crowd {
        trips.push(shopper.await.unwrap());
    }
    // a few probes past the end of the spell
    tokio::time::sleep(Duration::from_secs(1)).await;
    stop_probing.store(true, std::sync::atomic::Ordering::Relaxed);
    let probes = probing.await.unwrap();
    if fault != "switchover" {
        // the old node rejoins, through pg_rewind where it must
        cluster
            .run(&["restart-member", &leader, "--timeout", "120"])
            .await;
    }

    // what the shoppers were told
    let mut statuses: BTreeMap<u16, usize> = BTreeMap::new();
    for (_, status, _) in trips.iter().flat_map(|t| &t.answers) {
        *statuses.entry(*status).or_default() += 1;
    }
    let failed: Vec<_> = trips
        .iter()
        .flat_map(|t| &t.answers)
        .filter(|(_, status, _)| *status == 0 || *status >= 500)
        .collect();
    let waited = trips
        .iter()
        .flat_map(|t| &t.answers)
        .filter(|(_, _, took)| *took > Duration::from_secs(1))
        .count();
    let slowest = trips
        .iter()
        .flat_map(|t| &t.answers)
        .map(|(_, _, took)| *took)
        .max()
        .unwrap_or_default();
    let sessions: Vec<String> = trips
        .iter()
        .filter_map(|t| t.sent_to_pay.as_ref().map(|(s, _, _)| s.clone()))
        .collect();
    // recovery: from the fault to the first probe granted after the
    // longest spell without a grant that ends after it (an orphaned
    // primary may grant for a moment before it is cut off)
    let grants: Vec<Instant> = probes
        .iter()
        .filter(|(status, _, _)| *status == 303)
        .map(|(_, _, answered)| *answered)
        .collect();
    let recovery = grants
        .windows(2)
        .filter(|pair| pair[1] > faulted_at)
        .max_by_key(|pair| pair[1] - pair[0].max(faulted_at))
        .map(|pair| pair[1] - faulted_at);
    let probe_failures: Vec<_> = probes
        .iter()
        .filter(|(status, _, _)| *status != 303)
        .map(|(status, sent, _)| (*status, *sent - began))
        .collect();

    // the money settles: each charge sold once or refunded once
    let settled = wait_for_ledger(&pool, &stripe).await;
    let (total, held, sold): (i32, i32, i32) =
        sqlx::query_as("select total, held, sold from resources where id = $1")
            .bind(TIER)
            .fetch_one(&pool)
            .await
            .unwrap();
    let known: i64 =
        sqlx::query_scalar("select count(*) from orders where provider_session_id = any($1)")
            .bind(&sessions)
            .fetch_one(&pool)
            .await
            .unwrap();
    let check = Command::new(env!("CARGO_BIN_EXE_holdfast"))
        .args(["--db", &url, "check"])
        .env_remove("DATABASE_URL")
        .output()
        .unwrap();
    let ledger = stripe.ledger();
    eprintln!(
        "failover {fault}: leader {leader} -> {new_leader}; first checkout granted {:?} after \
         the fault ({} probes); shop answers by status {statuses:?}, {waited} waited over 1 s, the slowest \
         {slowest:?}; {} sent to pay; charges {}, refunds {}; {total} units: {sold} sold, \
         {held} held; {} s in all",
        recovery,
        probes.len(),
        sessions.len(),
        ledger.charges.len(),
        ledger.refunds_standing().count(),
        began.elapsed().as_secs()
    );
    drop(processes);
    pool.close().await;

    assert!(
        failed.is_empty(),
        "{fault}: no shopper request answered 5xx or dropped: {failed:?}"
    );
    assert!(
        probe_failures.is_empty(),
        "{fault}: every probe's checkout was granted in the end: {probe_failures:?}"
    );
    assert_eq!(
        known as usize,
        sessions.len(),
        "{fault}: every checkout a shopper was sent to pay for is on the new primary"
    );
    assert!(settled.is_ok(), "{fault}: {}", settled.unwrap_err());
    assert!(
        sold + held <= total && sold <= UNITS as i32,
        "{fault}: oversold"
    );
    assert_eq!(
        ledger.charges.len() - ledger.refunds_standing().count(),
        sold as usize,
        "{fault}: every unit sold was paid for once"
    );
    assert!(
        check.status.success(),
        "{fault}: holdfast check: {}",
        String::from_utf8_lossy(&check.stdout)
    );
    let recovery = recovery.unwrap_or_else(|| panic!("{fault}: no probe granted after the fault"));
    assert!(
        recovery <= TTL + Duration::from_secs(5),
        "{fault}: recovered in {recovery:?}"
    );
}

/// Wait (two minutes at most) until every charge at the sandbox ended in
/// exactly one sale or exactly one refund, and say which did not.
async fn wait_for_ledger(pool: &sqlx::PgPool, stripe: &StripeSandbox) -> Result<(), String> {
    let mut last = String::new();
    for _ in 0..240 {
        let ledger = stripe.ledger();
        let sold: Vec<String> =
            sqlx::query_scalar("select payment_ref from orders where state = 'paid'")
                .fetch_all(pool)
                .await
                .unwrap_or_default();
        let wrong: Vec<String> = ledger
            .charges
            .iter()
            .filter_map(|charge| {
                let sales = sold.iter().filter(|p| **p == charge.payment_intent).count();
                let refunds = ledger
                    .refunds_standing()
                    .filter(|r| r.payment_intent == charge.payment_intent)
                    .count();
                (sales + refunds != 1).then(|| {
                    format!(
                        "{}: {sales} sales, {refunds} refunds",
                        charge.payment_intent
                    )
                })
            })
            .collect();
        if wrong.is_empty() && !ledger.charges.is_empty() {
            return Ok(());
        }
        last = wrong.join("; ");
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    Err(format!("charges not settled: {last}"))
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// `deploy/backup/drill` with these arguments, on the cluster: its one
/// JSON value or line.
async fn drill(cluster: &Cluster, args: &[&str]) -> String {
    let mut command = Command::new(workspace_root().join("deploy/backup/drill"));
    command
        .arg(args[0])
        .arg("--ha-dir")
        .arg(&cluster.dir)
        .args(&args[1..]);
    let what = args.join(" ");
    let output = tokio::task::spawn_blocking(move || command.output())
        .await
        .unwrap()
        .unwrap_or_else(|e| panic!("run drill {what}: {e}"));
    assert!(
        output.status.success(),
        "drill {}: {}",
        args.join(" "),
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8(output.stdout).unwrap().trim().to_owned()
}

/// A base backup; paid orders; a moment; more paid orders; a restore to
/// the moment into a fresh cluster, which has exactly the first ones.
async fn backup_restores_to_a_point_in_time(cluster: &Cluster) {
    let backup: serde_json::Value =
        serde_json::from_str(&drill(cluster, &["backup", "--type", "full"]).await).unwrap();
    let name = "backup_drill";
    let admin = sqlx::PgPool::connect(&cluster.url).await.unwrap();
    sqlx::query(&format!("drop database if exists {name} with (force)"))
        .execute(&admin)
        .await
        .unwrap();
    sqlx::query(&format!("create database {name}"))
        .execute(&admin)
        .await
        .unwrap();
    admin.close().await;
    let url = cluster.database(name);
    let pool = holdfast::database::connect(&Secret::new(&url), 4)
        .await
        .unwrap();
    holdfast::database::migrate(&mut pool.acquire().await.unwrap())
        .await
        .unwrap();
    holdfast::catalogue::CatalogueFile::read(&workspace_root().join("fixtures/catalogue.json"))
        .unwrap()
        .load(&pool)
        .await
        .unwrap();
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let sandbox_base = format!("http://127.0.0.1:{}", listener.local_addr().unwrap().port());
    let sandbox = Sandbox::build(listener, SandboxSettings::development(), sandbox_base).unwrap();
    let stripe = sandbox.stripe.clone();
    tokio::spawn(sandbox.run_until_stopped());
    let port = free_port();
    let shop = format!("http://127.0.0.1:{port}");
    stripe.set_webhook_url(format!("{shop}/webhooks/stripe"));
    let log = cluster.dir.join("log/backup-serve.log");
    let mut command = holdfast(&url, &stripe, &log, &["serve"]);
    command.env("HOLDFAST_ADDR", format!("127.0.0.1:{port}"));
    let server = Process(command.spawn().expect("holdfast serve"));
    serving(&shop).await;

    let paid = || async {
        sqlx::query_scalar::<_, uuid::Uuid>(
            "select id from orders where state = 'paid' order by id",
        )
        .fetch_all(&pool)
        .await
        .unwrap()
    };
    for _ in 0..5 {
        let trip = shopper(shop.clone()).await;
        assert!(trip.sent_to_pay.is_some(), "{trip:?}");
    }
    let before = paid().await;
    assert_eq!(before.len(), 5);
    let moment = drill(cluster, &["mark"]).await;
    for _ in 0..3 {
        shopper(shop.clone()).await;
    }
    assert_eq!(paid().await.len(), 8);
    drop(server);
    pool.close().await;

    let into = cluster.dir.join("restore/drill");
    let restored: serde_json::Value = serde_json::from_str(
        &drill(
            cluster,
            &[
                "restore",
                "--target-time",
                &moment,
                "--into",
                into.to_str().unwrap(),
                "--force",
            ],
        )
        .await,
    )
    .unwrap();
    let restored_url = restored["url"].as_str().unwrap();
    let (server_url, _) = restored_url.rsplit_once('/').unwrap();
    let restored_db = format!("{server_url}/{name}");
    let again = sqlx::PgPool::connect(&restored_db).await.unwrap();
    let after: Vec<uuid::Uuid> =
        sqlx::query_scalar("select id from orders where state = 'paid' order by id")
            .fetch_all(&again)
            .await
            .unwrap();
    again.close().await;
    let check = Command::new(env!("CARGO_BIN_EXE_holdfast"))
        .args(["--db", &restored_db, "check"])
        .env_remove("DATABASE_URL")
        .output()
        .unwrap();
    eprintln!(
        "backup: {} backup in {} s; restored to {moment} in {} s: {} orders paid before the \
         moment, {} on the restored cluster",
        backup["type"],
        backup["seconds"],
        restored["seconds"],
        before.len(),
        after.len()
    );
    drill(
        cluster,
        &[
            "stop-restored",
            "--into",
            into.to_str().unwrap(),
            "--remove",
        ],
    )
    .await;
    assert_eq!(after, before, "exactly the orders paid before the moment");
    assert!(
        check.status.success(),
        "holdfast check on the restored cluster: {}",
        String::from_utf8_lossy(&check.stdout)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_sale_rides_through_three_failovers_and_the_backup_restores_to_a_point_in_time() {
    let cluster = Cluster::start().await;
    for fault in ["kill-leader", "kill-leader-patroni", "switchover"] {
        sale_through(&cluster, fault).await;
    }
    backup_restores_to_a_point_in_time(&cluster).await;
}
