//! Concurrency proven with concurrency: hundreds of real parallel calls
//! against a real PostgreSQL, with exact counts.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use futures::future::join_all;
use holdfast::inventory::{
    ConfirmOutcome, HoldOutcome, IdempotencyKey, InventorySettings, PaymentRef,
};

use holdfast_testkit::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn five_hundred_buyers_get_exactly_ten_units_and_no_reader_sees_an_oversell() {
    let db = TestDb::with_connections(64).await;
    let inventory = db.inventory();
    let slot = resource(&inventory, "slot-12:30", 10).await;

    // A reader polls the counters for the whole storm.
    let done = Arc::new(AtomicBool::new(false));
    let observations = Arc::new(AtomicU64::new(0));
    let reader = {
        let (pool, done, observations) = (db.pool.clone(), done.clone(), observations.clone());
        tokio::spawn(async move {
            let mut worst = 0;
            while !done.load(Ordering::Relaxed) {
                // counters and the rows they count, in one snapshot
                let (total, held, sold, rows_held): (i32, i32, i32, i32) = sqlx::query_as(
                    "select total, held, sold, rows_held from hf_check('slot-12:30')",
                )
                .fetch_one(&pool)
                .await
                .expect("read counters");
                assert!(
                    held + sold <= total,
                    "reader saw held {held} + sold {sold} > {total}"
                );
                assert_eq!(
                    held, rows_held,
                    "the counter and the hold rows disagree mid-storm"
                );
                worst = worst.max(held + sold);
                observations.fetch_add(1, Ordering::Relaxed);
            }
            worst
        })
    };

    let outcomes = join_all((0..500).map(|i| {
        let (inventory, request) = (inventory.clone(), request(&slot, 1, &format!("buyer-{i}")));
        tokio::spawn(async move { inventory.hold(&request).await.expect("hold") })
    }))
    .await;
    done.store(true, Ordering::Relaxed);
    let worst = reader.await.expect("reader");

    let held = outcomes
        .iter()
        .filter(|o| matches!(o.as_ref().unwrap(), HoldOutcome::Held { .. }))
        .count();
    let refused = outcomes
        .iter()
        .filter(|o| {
            matches!(
                o.as_ref().unwrap(),
                HoldOutcome::Insufficient { available: 0 }
            )
        })
        .count();
    assert_eq!((held, refused), (10, 490));
    assert!(
        observations.load(Ordering::Relaxed) > 1,
        "the reader never ran"
    );
    assert!(worst <= 10);
    let status = inventory.status(&slot).await.unwrap().unwrap();
    assert_eq!((status.held, status.sold, status.available), (10, 0, 0));
    assert_no_drift(&inventory).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn one_payment_confirmed_from_twelve_tasks_is_confirmed_once() {
    let db = TestDb::new().await;
    let inventory = db.inventory();
    let tier = resource(&inventory, "vip", 20).await;
    let hold = hold_ok(&inventory, &request(&tier, 3, "alice")).await;
    let payment = PaymentRef::parse("pi_once").unwrap();

    let outcomes = join_all((0..12).map(|_| {
        let (inventory, payment) = (inventory.clone(), payment.clone());
        tokio::spawn(async move { inventory.confirm(hold.id, &payment).await.unwrap() })
    }))
    .await;
    let confirmed = outcomes
        .iter()
        .filter(|o| matches!(o.as_ref().unwrap(), ConfirmOutcome::Confirmed { .. }))
        .count();
    let already = outcomes
        .iter()
        .filter(|o| matches!(o.as_ref().unwrap(), ConfirmOutcome::AlreadyConfirmed { .. }))
        .count();
    assert_eq!((confirmed, already), (1, 11));
    let status = inventory.status(&tier).await.unwrap().unwrap();
    assert_eq!(
        (status.held, status.sold),
        (0, 3),
        "counters moved exactly once"
    );
    let confirmations = inventory
        .events(hold.id)
        .await
        .unwrap()
        .into_iter()
        .filter(|e| e.kind == "confirmed")
        .count();
    assert_eq!(confirmations, 1);
    assert_no_drift(&inventory).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn twelve_different_payments_for_one_hold_are_one_sale_and_eleven_duplicates() {
    let db = TestDb::new().await;
    let inventory = db.inventory();
    let tier = resource(&inventory, "general", 200).await;
    let hold = hold_ok(&inventory, &request(&tier, 2, "bob")).await;

    let outcomes = join_all((0..12).map(|i| {
        let inventory = inventory.clone();
        let payment = PaymentRef::parse(&format!("pi_{i}")).unwrap();
        tokio::spawn(async move { inventory.confirm(hold.id, &payment).await.unwrap() })
    }))
    .await;
    let mut winner = None;
    let mut duplicates = 0;
    for outcome in outcomes {
        match outcome.unwrap() {
            ConfirmOutcome::Confirmed { purchase } => {
                assert!(winner.is_none(), "two payments confirmed one hold");
                winner = purchase.payment_ref;
            }
            ConfirmOutcome::DuplicatePayment {
                existing_payment_ref,
                purchase,
            } => {
                duplicates += 1;
                // the refund target is the new payment, the kept one is named
                assert_ne!(
                    purchase.payment_ref.as_deref(),
                    Some(existing_payment_ref.as_str())
                );
            }
            other => panic!("unexpected {other:?}"),
        }
    }
    assert!(winner.is_some());
    assert_eq!(duplicates, 11);
    let status = inventory.status(&tier).await.unwrap().unwrap();
    assert_eq!((status.held, status.sold), (0, 2));
    assert_no_drift(&inventory).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn one_payment_for_twelve_holds_buys_one_even_against_a_direct_update() {
    let db = TestDb::new().await;
    let inventory = db.inventory();
    // six holds on one resource (they queue on its lock) and six on six
    // others (they race on the payment reference itself)
    let shared = resource(&inventory, "shared", 10).await;
    let mut holds = Vec::new();
    for i in 0..6 {
        holds.push(hold_ok(&inventory, &request(&shared, 1, &format!("s{i}"))).await);
        let own = resource(&inventory, &format!("own-{i}"), 1).await;
        holds.push(hold_ok(&inventory, &request(&own, 1, &format!("o{i}"))).await);
    }
    let payment = PaymentRef::parse("pi_shared").unwrap();

    let outcomes = join_all(holds.iter().map(|hold| {
        let (inventory, payment, id) = (inventory.clone(), payment.clone(), hold.id);
        tokio::spawn(async move { inventory.confirm(id, &payment).await.unwrap() })
    }))
    .await;
    let mut winner = None;
    let mut pointed_at = Vec::new();
    for outcome in outcomes {
        match outcome.unwrap() {
            ConfirmOutcome::Confirmed { purchase } => {
                assert!(winner.is_none());
                winner = Some(purchase.id);
            }
            ConfirmOutcome::PaymentRefInUse { other_hold_id, .. } => pointed_at.push(other_hold_id),
            other => panic!("unexpected {other:?}"),
        }
    }
    let winner = winner.expect("one confirmation");
    assert_eq!(pointed_at.len(), 11);
    assert!(
        pointed_at.iter().all(|id| *id == winner),
        "every loser is pointed at the hold the payment bought"
    );
    let sold: i64 =
        sqlx::query_scalar("select count(*) from holds where payment_ref = 'pi_shared'")
            .fetch_one(&db.pool)
            .await
            .unwrap();
    assert_eq!(sold, 1);

    // The database itself refuses to give the payment to another hold, on
    // the same resource and on another.
    for loser in holds.iter().filter(|h| h.id != winner).take(2) {
        let direct = sqlx::query(
            "update holds set state = 'confirmed', payment_ref = 'pi_shared' where id = $1",
        )
        .bind(loser.id.0)
        .execute(&db.pool)
        .await;
        let error = direct.expect_err("a direct update must be refused");
        let code = error
            .as_database_error()
            .and_then(|e| e.code())
            .map(|c| c.to_string());
        assert!(
            matches!(code.as_deref(), Some("23503") | Some("23505")),
            "expected a foreign-key or unique violation, got {error}"
        );
    }
    assert_no_drift(&inventory).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn twenty_retries_with_one_idempotency_key_create_one_hold() {
    let db = TestDb::new().await;
    let inventory = db.inventory();
    let jars = resource(&inventory, "jars", 40).await;
    let mut retry = request(&jars, 2, "carol");
    retry.idempotency_key = Some(IdempotencyKey::parse("basket-7").unwrap());

    let outcomes = join_all((0..20).map(|_| {
        let (inventory, retry) = (inventory.clone(), retry.clone());
        tokio::spawn(async move { inventory.hold(&retry).await.unwrap() })
    }))
    .await;
    let mut ids = std::collections::HashSet::new();
    let (mut held, mut replayed) = (0, 0);
    for outcome in outcomes {
        match outcome.unwrap() {
            HoldOutcome::Held { hold, .. } => {
                held += 1;
                ids.insert(hold.id);
            }
            HoldOutcome::Replayed { hold } => {
                replayed += 1;
                ids.insert(hold.id);
            }
            other => panic!("unexpected {other:?}"),
        }
    }
    assert_eq!((held, replayed, ids.len()), (1, 19, 1));
    let rows: i64 = sqlx::query_scalar("select count(*) from holds")
        .fetch_one(&db.pool)
        .await
        .unwrap();
    assert_eq!(rows, 1);
    assert_eq!(inventory.status(&jars).await.unwrap().unwrap().held, 2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn account_caps_hold_under_concurrency_per_resource_and_across_resources() {
    let db = TestDb::new().await;
    let inventory = db.inventory();
    let settings = inventory.settings().await.unwrap();
    inventory
        .configure(&InventorySettings {
            account_cap: Some(2),
            ..settings.clone()
        })
        .await
        .unwrap();
    let tickets = resource(&inventory, "tickets", 1000).await;
    let other = resource(&inventory, "other", 1000).await;

    // per resource: 20 concurrent single-unit holds by one account, on each
    // of two resources: two granted on each
    let outcomes = join_all((0..40).map(|i| {
        let inventory = inventory.clone();
        let target = if i % 2 == 0 { &tickets } else { &other };
        let request = request(target, 1, "greedy");
        tokio::spawn(async move { inventory.hold(&request).await.unwrap() })
    }))
    .await;
    let held = outcomes
        .iter()
        .filter(|o| matches!(o.as_ref().unwrap(), HoldOutcome::Held { .. }))
        .count();
    let capped = outcomes
        .iter()
        .filter(|o| matches!(o.as_ref().unwrap(), HoldOutcome::AccountCap { .. }))
        .count();
    assert_eq!((held, capped), (4, 36));

    // across resources: a cap of 3 counted over five resources
    inventory
        .configure(&InventorySettings {
            account_cap: Some(3),
            cap_scope: holdfast::inventory::CapScope::Global,
            ..settings
        })
        .await
        .unwrap();
    let mut spread = Vec::new();
    for i in 0..5 {
        spread.push(resource(&inventory, &format!("spread-{i}"), 100).await);
    }
    let outcomes = join_all((0..50).map(|i| {
        let inventory = inventory.clone();
        let request = request(&spread[i % 5], 1, "collector");
        tokio::spawn(async move { inventory.hold(&request).await.unwrap() })
    }))
    .await;
    let held = outcomes
        .iter()
        .filter(|o| matches!(o.as_ref().unwrap(), HoldOutcome::Held { .. }))
        .count();
    assert_eq!(held, 3, "a global cap of 3 across five resources");
    let live: i64 = sqlx::query_scalar(
        "select coalesce(sum(qty), 0)::int8 from holds where account_id = 'collector'",
    )
    .fetch_one(&db.pool)
    .await
    .unwrap();
    assert_eq!(live, 3);
    assert_no_drift(&inventory).await;
}

#[tokio::test]
async fn a_direct_update_that_would_oversell_is_rejected_by_the_database() {
    let db = TestDb::new().await;
    let inventory = db.inventory();
    let slot = resource(&inventory, "slot", 8).await;
    hold_ok(&inventory, &request(&slot, 5, "dave")).await;

    for statement in [
        "update resources set held = held + 4 where id = 'slot'",
        "update resources set sold = 9 where id = 'slot'",
        "update resources set total = 4 where id = 'slot'",
        "update resources set held = -1 where id = 'slot'",
    ] {
        let error = sqlx::query(statement)
            .execute(&db.pool)
            .await
            .expect_err(statement);
        let code = error
            .as_database_error()
            .and_then(|e| e.code())
            .map(|c| c.to_string());
        assert_eq!(code.as_deref(), Some("23514"), "{statement}: {error}");
    }
    let status = inventory.status(&slot).await.unwrap().unwrap();
    assert_eq!((status.total, status.held, status.sold), (8, 5, 0));
}

#[tokio::test]
async fn a_sold_out_resource_refuses_without_the_lock_but_still_replays_a_retry() {
    let db = TestDb::new().await;
    let inventory = db.inventory();
    let vip = resource(&inventory, "vip", 2).await;
    let mut first = request(&vip, 2, "yara");
    first.idempotency_key = Some(IdempotencyKey::parse("cart-9").unwrap());
    let hold = hold_ok(&inventory, &first).await;

    // sold out now: the retry is still recognised, a stranger is refused
    match inventory.hold(&first).await.unwrap() {
        HoldOutcome::Replayed { hold: again } => assert_eq!(again.id, hold.id),
        other => panic!("expected replayed, got {other:?}"),
    }
    assert_eq!(
        inventory.hold(&request(&vip, 1, "zane")).await.unwrap(),
        HoldOutcome::Insufficient { available: 0 }
    );

    // With the row locked by another transaction, the refusal still
    // answers at once: it never queued on the lock. A grant would wait.
    let mut blocker = db.pool.begin().await.unwrap();
    sqlx::query("select 1 from resources where id = 'vip' for no key update")
        .execute(&mut *blocker)
        .await
        .unwrap();
    let refusal = tokio::time::timeout(
        std::time::Duration::from_secs(3),
        inventory.hold(&request(&vip, 1, "zane")),
    )
    .await
    .expect("a sold-out refusal must not wait for the row lock")
    .unwrap();
    assert_eq!(refusal, HoldOutcome::Insufficient { available: 0 });
    blocker.rollback().await.unwrap();
    assert_no_drift(&inventory).await;
}
