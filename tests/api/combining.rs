//! Combined holds: `hf_hold_many` on its own, and the combiner under real
//! concurrency, in one process and in two. (A process killed while its
//! batch is in flight: the tools' `throughput.rs`, which drives the load.)

use futures::future::join_all;
use holdfast::inventory::HoldBatches;
use holdfast::inventory::{
    CapScope, HoldOutcome, HoldRequest, IdempotencyKey, InventoryError, InventorySettings,
};

use holdfast_testkit::*;

fn held(outcome: &HoldOutcome) -> Option<(uuid::Uuid, i32)> {
    match outcome {
        HoldOutcome::Held { hold, available } => Some((hold.id.0, *available)),
        _ => None,
    }
}

fn keyed(mut request: HoldRequest, key: &str) -> HoldRequest {
    request.idempotency_key = Some(IdempotencyKey::parse(key).unwrap());
    request
}

async fn events_per_hold(db: &TestDb) -> Vec<i64> {
    sqlx::query_scalar(
        "select count(e.id) from holds h left join hold_events e on e.hold_id = h.id and e.kind = 'held' \
          group by h.id",
    )
    .fetch_all(&db.pool)
    .await
    .unwrap()
}

#[tokio::test]
async fn a_batch_is_decided_in_arrival_order_with_mixed_quantities() {
    let db = TestDb::new().await;
    let inventory = db.inventory();
    let r = resource(&inventory, "mixed", 10).await;
    let batch: Vec<HoldRequest> = [3, 5, 1, 4, 2, 1]
        .iter()
        .enumerate()
        .map(|(i, n)| request(&r, *n, &format!("buyer-{i}")))
        .collect();
    let outcomes = inventory.hold_many(&batch).await.unwrap();
    let summary: Vec<String> = outcomes
        .iter()
        .map(|o| match o {
            HoldOutcome::Held { available, .. } => format!("held:{available}"),
            HoldOutcome::Insufficient { available } => format!("short:{available}"),
            other => format!("{other:?}"),
        })
        .collect();
    // 3 → 7 left, 5 → 2, 1 → 1, 4 is short of 1, 2 is short of 1, 1 → 0
    assert_eq!(
        summary,
        ["held:7", "held:2", "held:1", "short:1", "short:1", "held:0"]
    );
    let status = inventory.status(&r).await.unwrap().unwrap();
    assert_eq!((status.held, status.available), (10, 0));
    assert_eq!(events_per_hold(&db).await, vec![1; 4]);
    assert_no_drift(&inventory).await;
}

#[tokio::test]
async fn a_batch_that_runs_out_halfway_grants_the_first_and_refuses_the_rest() {
    let db = TestDb::new().await;
    let inventory = db.inventory();
    let r = resource(&inventory, "halfway", 10).await;
    let batch: Vec<HoldRequest> = (0..20).map(|i| request(&r, 1, &format!("b{i}"))).collect();
    let outcomes = inventory.hold_many(&batch).await.unwrap();
    for (i, outcome) in outcomes.iter().enumerate() {
        if i < 10 {
            assert_eq!(
                held(outcome).map(|h| h.1),
                Some(9 - i as i32),
                "request {i}"
            );
        } else {
            assert_eq!(
                outcome,
                &HoldOutcome::Insufficient { available: 0 },
                "request {i}"
            );
        }
    }
    // a whole batch refused without the lock once nothing is left
    let outcomes = inventory.hold_many(&batch[..5]).await.unwrap();
    assert!(
        outcomes
            .iter()
            .all(|o| *o == HoldOutcome::Insufficient { available: 0 })
    );
    assert_no_drift(&inventory).await;
}

#[tokio::test]
async fn a_key_repeated_inside_a_batch_is_a_replay_of_the_first() {
    let db = TestDb::new().await;
    let inventory = db.inventory();
    let r = resource(&inventory, "keys", 10).await;
    let batch = vec![
        keyed(request(&r, 2, "ann"), "k1"),
        keyed(request(&r, 2, "ann"), "k1"),
        // the same key from someone else is their own hold
        keyed(request(&r, 2, "bob"), "k1"),
        request(&r, 1, "ann"),
    ];
    let outcomes = inventory.hold_many(&batch).await.unwrap();
    let first = held(&outcomes[0]).expect("first held").0;
    match &outcomes[1] {
        HoldOutcome::Replayed { hold } => assert_eq!(hold.id.0, first),
        other => panic!("expected a replay, got {other:?}"),
    }
    assert_ne!(held(&outcomes[2]).expect("bob held").0, first);
    assert!(held(&outcomes[3]).is_some());
    // and again in a later batch, and through the one-at-a-time path
    let again = inventory.hold_many(&batch[..1]).await.unwrap();
    assert!(matches!(&again[0], HoldOutcome::Replayed { hold } if hold.id.0 == first));
    let direct = inventory.hold(&batch[0]).await.unwrap();
    assert!(matches!(direct, HoldOutcome::Replayed { hold } if hold.id.0 == first));
    let status = inventory.status(&r).await.unwrap().unwrap();
    assert_eq!(status.held, 5);
    assert_no_drift(&inventory).await;
}

#[tokio::test]
async fn account_caps_count_what_the_batch_already_granted() {
    let db = TestDb::new().await;
    let inventory = db.inventory();
    let settings = inventory.settings().await.unwrap();
    inventory
        .configure(&InventorySettings {
            account_cap: Some(2),
            cap_scope: CapScope::Resource,
            ..settings
        })
        .await
        .unwrap();
    let r = resource(&inventory, "capped", 100).await;
    let batch = vec![
        request(&r, 1, "greedy"),
        request(&r, 1, "other"),
        request(&r, 1, "greedy"),
        request(&r, 1, "greedy"),
    ];
    let outcomes = inventory.hold_many(&batch).await.unwrap();
    assert!(held(&outcomes[0]).is_some() && held(&outcomes[1]).is_some());
    assert!(held(&outcomes[2]).is_some());
    assert_eq!(outcomes[3], HoldOutcome::AccountCap { remaining: 0 });
}

#[tokio::test]
async fn a_batch_frees_expired_holds_when_it_needs_them() {
    let db = TestDb::new().await;
    let inventory = db.inventory();
    let r = resource(&inventory, "lazy", 2).await;
    for who in ["gone-1", "gone-2"] {
        let mut short = request(&r, 1, who);
        short.ttl = Some(ttl(0.2));
        hold_ok(&inventory, &short).await;
    }
    tokio::time::sleep(std::time::Duration::from_millis(400)).await;
    let outcomes = inventory
        .hold_many(&[
            request(&r, 1, "new-1"),
            request(&r, 1, "new-2"),
            request(&r, 1, "new-3"),
        ])
        .await
        .unwrap();
    assert!(held(&outcomes[0]).is_some() && held(&outcomes[1]).is_some());
    assert_eq!(outcomes[2], HoldOutcome::Insufficient { available: 0 });
    let lazily: i64 = sqlx::query_scalar(
        "select count(*) from hold_events where kind = 'expired' and actor = 'lazy-expiry'",
    )
    .fetch_one(&db.pool)
    .await
    .unwrap();
    assert_eq!(lazily, 2);
    assert_no_drift(&inventory).await;
}

#[tokio::test]
async fn a_batch_is_for_one_resource_and_unknown_resources_say_so() {
    let db = TestDb::new().await;
    let inventory = db.inventory();
    let a = resource(&inventory, "a", 5).await;
    let b = resource(&inventory, "b", 5).await;
    let mixed = inventory
        .hold_many(&[request(&a, 1, "x"), request(&b, 1, "x")])
        .await;
    assert!(matches!(mixed, Err(InventoryError::InvalidInput(_))));
    let ghost = rid("ghost");
    let outcomes = inventory
        .hold_many(&[request(&ghost, 1, "x"), request(&ghost, 2, "y")])
        .await
        .unwrap();
    assert_eq!(outcomes, vec![HoldOutcome::UnknownResource; 2]);
    assert!(inventory.hold_many(&[]).await.unwrap().is_empty());
    let status = inventory.status(&a).await.unwrap().unwrap();
    assert_eq!(status.held, 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn five_hundred_combined_buyers_get_exactly_ten_units() {
    let db = TestDb::with_connections(20).await;
    let inventory = db.inventory();
    let r = resource(&inventory, "hot", 10).await;
    let combiner = HoldBatches::new(db.pool.clone());
    let barrier = std::sync::Arc::new(tokio::sync::Barrier::new(500));
    let outcomes = join_all((0..500).map(|i| {
        let (combiner, barrier) = (combiner.clone(), barrier.clone());
        let request = request(&r, 1, &format!("buyer-{i}"));
        tokio::spawn(async move {
            barrier.wait().await;
            combiner.hold(request).await.unwrap()
        })
    }))
    .await;
    let outcomes: Vec<HoldOutcome> = outcomes.into_iter().map(Result::unwrap).collect();
    let winners = outcomes.iter().filter(|o| held(o).is_some()).count();
    let losers = outcomes
        .iter()
        .filter(|o| matches!(o, HoldOutcome::Insufficient { .. }))
        .count();
    assert_eq!((winners, losers), (10, 490));
    let status = inventory.status(&r).await.unwrap().unwrap();
    assert_eq!((status.held, status.available), (10, 0));
    assert_eq!(events_per_hold(&db).await, vec![1; 10]);
    // they were combined: far fewer calls than buyers
    assert!(combiner.calls() < 100, "{} calls", combiner.calls());
    assert_no_drift(&inventory).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn combined_holds_with_keys_replay_under_concurrency() {
    let db = TestDb::with_connections(20).await;
    let inventory = db.inventory();
    let r = resource(&inventory, "retries", 1000).await;
    let combiner = HoldBatches::new(db.pool.clone());
    // 40 shoppers each retry their request 5 times at once
    let outcomes = join_all((0..200).map(|i| {
        let combiner = combiner.clone();
        let request = keyed(request(&r, 2, &format!("shopper-{}", i % 40)), "checkout-1");
        tokio::spawn(async move { combiner.hold(request).await.unwrap() })
    }))
    .await;
    let mut ids = std::collections::HashSet::new();
    for outcome in outcomes {
        match outcome.unwrap() {
            HoldOutcome::Held { hold, .. } | HoldOutcome::Replayed { hold } => {
                ids.insert(hold.id.0);
            }
            other => panic!("unexpected {other:?}"),
        }
    }
    assert_eq!(ids.len(), 40);
    let status = inventory.status(&r).await.unwrap().unwrap();
    assert_eq!(status.held, 80);
    assert_no_drift(&inventory).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn two_processes_combining_on_one_resource_sell_it_exactly_once() {
    let db = TestDb::with_connections(10).await;
    let inventory = db.inventory();
    let r = resource(&inventory, "shared", 100).await;
    // two pools, two combiners: what two processes would have
    let other_pool = sqlx::postgres::PgPoolOptions::new()
        .max_connections(10)
        .connect(&db.url)
        .await
        .unwrap();
    let combiners = [
        HoldBatches::new(db.pool.clone()),
        HoldBatches::new(other_pool),
    ];
    let outcomes = join_all((0..600).map(|i| {
        let combiner = combiners[i % 2].clone();
        let request = request(&r, 1, &format!("buyer-{i}"));
        tokio::spawn(async move { combiner.hold(request).await.unwrap() })
    }))
    .await;
    let winners = outcomes
        .iter()
        .filter(|o| held(o.as_ref().unwrap()).is_some())
        .count();
    assert_eq!(winners, 100);
    let status = inventory.status(&r).await.unwrap().unwrap();
    assert_eq!((status.held, status.available), (100, 0));
    let rows: i64 = sqlx::query_scalar("select count(*) from holds where resource_id = 'shared'")
        .fetch_one(&db.pool)
        .await
        .unwrap();
    assert_eq!(rows, 100);
    assert_no_drift(&inventory).await;
}

#[tokio::test]
async fn lazy_expiry_after_an_earlier_grant_in_the_batch_counts_that_grant() {
    let db = TestDb::new().await;
    let inventory = db.inventory();
    let r = resource(&inventory, "late-lazy", 3).await;
    for who in ["gone-1", "gone-2"] {
        let mut short = request(&r, 1, who);
        short.ttl = Some(ttl(0.2));
        hold_ok(&inventory, &short).await;
    }
    tokio::time::sleep(std::time::Duration::from_millis(400)).await;
    let batch: Vec<HoldRequest> = (0..4).map(|i| request(&r, 1, &format!("n{i}"))).collect();
    let outcomes = inventory.hold_many(&batch).await.unwrap();
    // the first fits without expiring anything; the second needs the two
    // expired units, and what is left must still count the first grant
    let lefts: Vec<Option<i32>> = outcomes.iter().map(|o| held(o).map(|h| h.1)).collect();
    assert_eq!(lefts, [Some(0), Some(1), Some(0), None]);
    assert_eq!(outcomes[3], HoldOutcome::Insufficient { available: 0 });
    let status = inventory.status(&r).await.unwrap().unwrap();
    assert_eq!((status.held, status.available), (3, 0));
    assert_no_drift(&inventory).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn batches_with_a_global_cap_never_deadlock_and_share_the_cap() {
    let db = TestDb::with_connections(20).await;
    let inventory = db.inventory();
    let settings = inventory.settings().await.unwrap();
    inventory
        .configure(&InventorySettings {
            account_cap: Some(1000),
            cap_scope: CapScope::Global,
            ..settings.clone()
        })
        .await
        .unwrap();
    let one = resource(&inventory, "east", 100_000).await;
    let two = resource(&inventory, "west", 100_000).await;
    let accounts: Vec<String> = (0..12).map(|i| format!("acct-{i}")).collect();
    // the same accounts in opposite orders on two resources, many at once
    let runs = join_all((0..40).map(|i| {
        let inventory = inventory.clone();
        let (target, order): (&holdfast::inventory::ResourceId, Vec<&String>) = if i % 2 == 0 {
            (&one, accounts.iter().collect())
        } else {
            (&two, accounts.iter().rev().collect())
        };
        let batch: Vec<HoldRequest> = order.iter().map(|a| request(target, 1, a)).collect();
        tokio::spawn(async move { inventory.hold_many(&batch).await })
    }))
    .await;
    for run in runs {
        let outcomes = run.unwrap().expect("no batch fails (a deadlock would)");
        assert!(outcomes.iter().all(|o| held(o).is_some()));
    }
    // and the cap is one cap across both resources and both batches
    inventory
        .configure(&InventorySettings {
            account_cap: Some(3),
            cap_scope: CapScope::Global,
            ..settings
        })
        .await
        .unwrap();
    let three = resource(&inventory, "north", 100).await;
    let four = resource(&inventory, "south", 100).await;
    let batches = join_all([&three, &four].map(|target| {
        let inventory = inventory.clone();
        let batch = vec![
            request(target, 1, "collector"),
            request(target, 1, "collector"),
        ];
        tokio::spawn(async move { inventory.hold_many(&batch).await.unwrap() })
    }))
    .await;
    let granted = batches
        .into_iter()
        .flat_map(|b| b.unwrap())
        .filter(|o| held(o).is_some())
        .count();
    assert_eq!(granted, 3);
    assert_no_drift(&inventory).await;
}

#[tokio::test]
async fn hold_ids_are_version_7_and_ordered_by_time() {
    let db = TestDb::new().await;
    let mut ids: Vec<uuid::Uuid> = Vec::new();
    for _ in 0..3 {
        let batch: Vec<uuid::Uuid> =
            sqlx::query_scalar("select hf_uuid_v7() from generate_series(1, 200)")
                .fetch_all(&db.pool)
                .await
                .unwrap();
        ids.extend(batch);
        tokio::time::sleep(std::time::Duration::from_millis(3)).await;
    }
    for id in &ids {
        assert_eq!(id.get_version_num(), 7, "{id}");
        assert_eq!(id.get_variant(), uuid::Variant::RFC4122, "{id}");
    }
    let unique: std::collections::HashSet<_> = ids.iter().collect();
    assert_eq!(unique.len(), ids.len());
    // across milliseconds, later ids sort later
    let (first, last) = (&ids[..200], &ids[400..]);
    assert!(first.iter().max().unwrap() < last.iter().min().unwrap());
}

/// The combined path answers exactly as one hold after another would, on
/// random batches with keys, repeats and a cap.
#[tokio::test]
async fn a_batch_answers_as_the_same_holds_one_after_another_would() {
    use rand::{Rng, SeedableRng};

    let db = TestDb::new().await;
    let inventory = db.inventory();
    let settings = inventory.settings().await.unwrap();
    inventory
        .configure(&InventorySettings {
            account_cap: Some(5),
            cap_scope: CapScope::Resource,
            ..settings
        })
        .await
        .unwrap();
    for seed in 0..8u64 {
        let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
        let batched = resource(&inventory, &format!("batched-{seed}"), 20).await;
        let single = resource(&inventory, &format!("single-{seed}"), 20).await;
        let shape: Vec<(i64, String, Option<String>)> = (0..30)
            .map(|_| {
                let account = format!("a{}", rng.gen_range(0..5));
                let key = match rng.gen_range(0..4) {
                    0 => Some("k1".to_owned()),
                    1 => Some("k2".to_owned()),
                    _ => None,
                };
                (rng.gen_range(1..=4), account, key)
            })
            .collect();
        let make = |r: &holdfast::inventory::ResourceId| -> Vec<HoldRequest> {
            shape
                .iter()
                .map(|(n, who, key)| {
                    let plain = request(r, *n, who);
                    match key {
                        Some(key) => keyed(plain, key),
                        None => plain,
                    }
                })
                .collect()
        };
        let together = inventory.hold_many(&make(&batched)).await.unwrap();
        let mut apart = Vec::new();
        for request in make(&single) {
            apart.push(inventory.hold(&request).await.unwrap());
        }
        let summary = |o: &HoldOutcome| match o {
            HoldOutcome::Held { hold, available } => format!("held {} left {available}", hold.qty),
            HoldOutcome::Replayed { hold } => format!("replayed {}", hold.qty),
            HoldOutcome::Insufficient { available } => format!("short left {available}"),
            HoldOutcome::AccountCap { remaining } => format!("cap {remaining}"),
            HoldOutcome::UnknownResource => "unknown".into(),
        };
        let together: Vec<String> = together.iter().map(summary).collect();
        let apart: Vec<String> = apart.iter().map(summary).collect();
        assert_eq!(together, apart, "seed {seed}: {shape:?}");
    }
    assert_no_drift(&inventory).await;
}
