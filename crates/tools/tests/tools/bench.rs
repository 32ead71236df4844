//! `bench` and `throughput`: the figures' commands print what they document,
//! refuse bad input in one line, and the naive baseline they compare with
//! really does oversell where the engine does not.

use std::process::Output;

use holdfast::inventory::Capacity;
use holdfast_tools::bench;

use holdfast_testkit::*;

fn tools(db: &TestDb, args: &[&str]) -> Output {
    run_command(env!("CARGO_BIN_EXE_holdfast-tools"), db, args)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bench_prints_exactly_the_documented_keys() {
    let db = TestDb::new().await;
    for naive in [false, true] {
        let mut args = vec!["--json", "bench", "--units", "10", "--buyers", "200"];
        if naive {
            args.push("--naive");
        }
        let report = json_output(&tools(&db, &args));
        assert_eq!(
            sorted_keys(&report),
            ["buyers", "drift", "elapsed_ms", "held", "oversold", "units"]
        );
        assert_eq!(
            (report["buyers"].as_i64(), report["units"].as_i64()),
            (Some(200), Some(10))
        );
        if !naive {
            assert_eq!(
                (
                    report["held"].as_i64(),
                    report["oversold"].as_i64(),
                    report["drift"].as_i64()
                ),
                (Some(10), Some(0), Some(0))
            );
        }
    }
    let line = tools(&db, &["bench", "--units", "3", "--buyers", "20"]);
    let text = String::from_utf8_lossy(&line.stdout);
    assert!(
        text.contains("20 buyers · 3 units · held 3 · oversold 0 · drift 0"),
        "{text}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn throughput_speaks_json() {
    let db = TestDb::new().await;
    let throughput = json_output(&tools(
        &db,
        &[
            "--json",
            "throughput",
            "--seconds",
            "0.5",
            "--concurrency",
            "2",
        ],
    ));
    assert_eq!(
        sorted_keys(&throughput),
        ["holds", "holds_per_second", "p50_ms", "p99_ms", "seconds"]
    );
    assert!(throughput["holds"].as_u64().unwrap() > 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_bad_bench_gets_one_clear_line() {
    let db = TestDb::new().await;
    let output = tools(&db, &["bench", "--units", "-5"]);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(1), "{stderr}");
    assert!(stderr.contains("total must be zero or more"), "{stderr}");
    assert_eq!(stderr.trim().lines().count(), 1, "{stderr}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn the_naive_read_then_write_oversells_under_the_same_load_and_the_engine_does_not() {
    let db = TestDb::with_connections(64).await;
    let units = Capacity::parse(10).unwrap();

    let naive = bench::race(db.pool.clone(), units, 500, true)
        .await
        .unwrap();
    assert!(
        naive.oversold > 0,
        "the naive path should oversell under 500 concurrent buyers: {naive:?}"
    );
    assert!(naive.held > 10);

    let engine = bench::race(db.pool.clone(), units, 500, false)
        .await
        .unwrap();
    assert_eq!(
        (engine.held, engine.oversold, engine.drift),
        (10, 0, 0),
        "{engine:?}"
    );
}

/// The keys of a JSON object, sorted.
fn sorted_keys(value: &serde_json::Value) -> Vec<&str> {
    let mut keys: Vec<&str> = value
        .as_object()
        .expect("a JSON object")
        .keys()
        .map(String::as_str)
        .collect();
    keys.sort();
    keys
}
