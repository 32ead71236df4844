//! The combiner's load from `holdfast-tools throughput`, killed mid-stream:
//! every committed batch is whole.

use holdfast_testkit::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_process_killed_with_batches_in_flight_leaves_nothing_half_written() {
    let db = TestDb::new().await;
    let inventory = db.inventory();
    resource(&inventory, "crash", 1_000_000).await;
    let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_holdfast-tools"))
        .args([
            "--db",
            &db.url,
            "throughput",
            "--combine",
            "--resource",
            "crash",
        ])
        .args(["--seconds", "60", "--concurrency", "32"])
        .env_remove("DATABASE_URL")
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    // wait until holds are flowing, then kill it mid-stream
    let mut seen = 0;
    for _ in 0..200 {
        seen = inventory.status(&rid("crash")).await.unwrap().unwrap().held;
        if seen > 500 {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    assert!(seen > 500, "the combined load never got going");
    child.kill().unwrap();
    child.wait().unwrap();
    // every committed batch is whole: counters match rows, rows have events
    assert_no_drift(&inventory).await;
    let (rows, held, without_event): (i64, i64, i64) = sqlx::query_as(
        "select (select count(*) from holds where resource_id = 'crash'), \
                (select held::bigint from resources where id = 'crash'), \
                (select count(*) from holds h where resource_id = 'crash' \
                    and not exists (select 1 from hold_events e where e.hold_id = h.id))",
    )
    .fetch_one(&db.pool)
    .await
    .unwrap();
    assert_eq!(rows, held);
    assert_eq!(without_event, 0);
    assert!(rows >= 500);
}
