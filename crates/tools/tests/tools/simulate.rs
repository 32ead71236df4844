//! `holdfast-tools simulate`, run as the real binary: seeded shoppers over HTTP
//! through the sandbox, then the ledger.

use std::process::Output;

use serde_json::Value;

use holdfast_testkit::*;

/// Run `simulate` into a database of its own next to `db`'s.
fn simulate(db: &TestDb, args: &[&str]) -> (Output, String) {
    let name = format!("{}_sim_{}", db.name, uuid::Uuid::new_v4().simple());
    let output = std::process::Command::new(env!("CARGO_BIN_EXE_holdfast-tools"))
        .arg("--db")
        .arg(&db.url)
        .arg("--json")
        .arg("simulate")
        .args(["--database", &name])
        .args(args)
        .env_remove("DATABASE_URL")
        .env("RUST_LOG", "error")
        .output()
        .expect("run holdfast-tools simulate");
    (output, name)
}

async fn drop_database(db: &TestDb, name: &str) {
    sqlx::query(&format!("drop database if exists \"{name}\" with (force)"))
        .execute(&db.pool)
        .await
        .unwrap();
}

fn ledger(output: &Output) -> Value {
    serde_json::from_slice(&output.stdout).unwrap_or_else(|e| {
        panic!(
            "no ledger ({e}); exit {:?}: {}",
            output.status.code(),
            String::from_utf8_lossy(&output.stderr)
        )
    })
}

fn n(ledger: &Value, key: &str) -> u64 {
    ledger[key]
        .as_u64()
        .unwrap_or_else(|| panic!("{key} in {ledger}"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_thousand_shoppers_per_provider_leave_a_clean_ledger() {
    let db = TestDb::new().await;
    for provider in ["stripe", "razorpay"] {
        let (output, name) = simulate(
            &db,
            &[
                "--shoppers",
                "2000",
                "--seed",
                "2026",
                "--provider",
                provider,
            ],
        );
        drop_database(&db, &name).await;
        let ledger = ledger(&output);
        assert_eq!(output.status.code(), Some(0), "{provider}: {ledger:#}");
        assert_eq!(ledger["violations"], serde_json::json!([]), "{provider}");
        // every charge ended one way: kept for a fulfilled order, or refunded
        assert_eq!(
            n(&ledger, "charges"),
            n(&ledger, "fulfilled_orders") + n(&ledger, "refunds"),
            "{provider}: {ledger:#}"
        );
        assert_eq!(
            ledger["charged_minor"].as_i64(),
            Some(
                ledger["fulfilled_minor"].as_i64().unwrap()
                    + ledger["refunded_minor"].as_i64().unwrap()
            ),
            "{provider}"
        );
        // the run exercised what it claims: collisions, refunds, and
        // payments only reconciliation could find
        assert!(
            n(&ledger, "checkouts_refused") > 1000,
            "{provider}: {ledger:#}"
        );
        assert!(n(&ledger, "refunds") > 0, "{provider}: {ledger:#}");
        // staff refunded sales, racing their late webhooks: exactly what
        // each order records went back, no more
        assert!(
            n(&ledger, "staff_refunded_orders") > 0 && n(&ledger, "staff_refunds") > 0,
            "{provider}: {ledger:#}"
        );
        assert!(
            ledger["reconciliation"]["fulfilled"].as_u64().unwrap() > 0,
            "{provider}: {ledger:#}"
        );
        assert_eq!(n(&ledger, "leaked_holds"), 0);
        assert_eq!(n(&ledger, "drifted_resources"), 0);
        for line in ledger["resources"].as_array().unwrap() {
            assert_eq!(
                line["sold"].as_i64(),
                line["sold_on_orders"].as_i64(),
                "{line}"
            );
            assert!(line["sold"].as_i64() <= line["total"].as_i64(), "{line}");
            assert_eq!(line["held"].as_i64(), Some(0), "{line}");
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_same_seed_gives_the_same_ledger_and_another_seed_another() {
    let db = TestDb::new().await;
    let mut ledgers = Vec::new();
    for seed in ["5", "5", "6"] {
        let (output, name) = simulate(&db, &["--shoppers", "300", "--seed", seed]);
        drop_database(&db, &name).await;
        assert_eq!(output.status.code(), Some(0));
        ledgers.push(ledger(&output));
    }
    assert_eq!(ledgers[0], ledgers[1]);
    assert_ne!(ledgers[0]["behaviours"], ledgers[2]["behaviours"]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_reconciliation_the_ledger_shows_money_kept_for_nothing_and_exits_4() {
    let db = TestDb::new().await;
    let (output, name) = simulate(
        &db,
        &[
            "--shoppers",
            "300",
            "--seed",
            "9",
            "--provider",
            "stripe",
            "--without-reconciliation",
        ],
    );
    drop_database(&db, &name).await;
    let ledger = ledger(&output);
    assert_eq!(output.status.code(), Some(4), "{ledger:#}");
    let violations = ledger["violations"].as_array().unwrap();
    assert!(!violations.is_empty());
    assert!(
        violations.iter().all(|v| v
            .as_str()
            .unwrap()
            .contains("neither a fulfilment nor a refund")),
        "{violations:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shoppers_racing_in_sixteen_lanes_still_leave_a_clean_ledger() {
    let db = TestDb::new().await;
    let (output, name) = simulate(
        &db,
        &["--shoppers", "1000", "--seed", "77", "--lanes", "16"],
    );
    drop_database(&db, &name).await;
    let ledger = ledger(&output);
    assert_eq!(output.status.code(), Some(0), "{ledger:#}");
    assert_eq!(
        n(&ledger, "charges"),
        n(&ledger, "fulfilled_orders") + n(&ledger, "refunds")
    );
}
