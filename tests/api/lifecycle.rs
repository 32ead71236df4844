//! A hold's life: expiry (lazy and swept), the payment phase, release,
//! extension, and that nothing ever revives.

use std::time::Duration;

use futures::future::join_all;
use holdfast::inventory::{
    BeginPaymentOutcome, ConfirmOutcome, ExtendOutcome, HoldOutcome, HoldState, PaymentRef,
    ReleaseOutcome, Span,
};
use holdfast::worker::Sweeper;

use holdfast_testkit::*;

async fn state_of(
    db: &TestDb,
    id: holdfast::inventory::HoldId,
) -> (String, Option<String>, Option<String>) {
    sqlx::query_as("select state, ended_by, end_reason from holds where id = $1")
        .bind(id.0)
        .fetch_one(&db.pool)
        .await
        .unwrap()
}

#[tokio::test]
async fn a_confirmation_after_the_sweeper_expired_the_hold_never_revives_it() {
    let db = TestDb::new().await;
    let inventory = db.inventory();
    let slot = resource(&inventory, "slot", 1).await;
    let mut short = request(&slot, 1, "erin");
    short.ttl = Some(ttl(0.3));
    let hold = hold_ok(&inventory, &short).await;
    tokio::time::sleep(Duration::from_millis(400)).await;
    let swept = Sweeper::new(inventory.clone(), "sweeper:test")
        .run_once()
        .await
        .unwrap();
    assert_eq!(swept.len(), 1);
    assert_eq!(swept[0].expired_holds, 1);

    let payment = PaymentRef::parse("pi_late").unwrap();
    match inventory.confirm(hold.id, &payment).await.unwrap() {
        ConfirmOutcome::Expired { purchase } => {
            assert_eq!(
                purchase.payment_ref.as_deref(),
                Some("pi_late"),
                "returned for the refund"
            );
        }
        other => panic!("expected expired, got {other:?}"),
    }
    let (state, by, why) = state_of(&db, hold.id).await;
    assert_eq!(
        (state.as_str(), by.as_deref(), why.as_deref()),
        ("expired", Some("sweeper:test"), Some("ttl"))
    );
    // nothing was sold, and the refused payment keeps its claim: money on
    // its way back can never buy another hold
    let status = inventory.status(&slot).await.unwrap().unwrap();
    assert_eq!((status.held, status.sold, status.available), (0, 0, 1));
    let other = hold_ok(&inventory, &request(&slot, 1, "erin-again")).await;
    assert!(matches!(
        inventory.confirm(other.id, &payment).await.unwrap(),
        ConfirmOutcome::PaymentRefInUse { other_hold_id, .. } if other_hold_id == hold.id
    ));
    assert_eq!(inventory.status(&slot).await.unwrap().unwrap().sold, 0);
}

#[tokio::test]
async fn a_confirmation_after_the_ttl_passed_expires_the_hold_instead_of_selling_it() {
    let db = TestDb::new().await;
    let inventory = db.inventory();
    let slot = resource(&inventory, "slot", 1).await;
    let mut short = request(&slot, 1, "frank");
    short.ttl = Some(ttl(0.3));
    let hold = hold_ok(&inventory, &short).await;
    tokio::time::sleep(Duration::from_millis(400)).await;

    let payment = PaymentRef::parse("pi_after_ttl").unwrap();
    assert!(matches!(
        inventory.confirm(hold.id, &payment).await.unwrap(),
        ConfirmOutcome::Expired { .. }
    ));
    assert_eq!(state_of(&db, hold.id).await.0, "expired");
    let status = inventory.status(&slot).await.unwrap().unwrap();
    assert_eq!((status.held, status.sold), (0, 0));
    assert_no_drift(&inventory).await;
}

#[tokio::test]
async fn a_confirmation_after_a_release_is_refused_with_the_reference_for_a_refund() {
    let db = TestDb::new().await;
    let inventory = db.inventory();
    let slot = resource(&inventory, "slot", 2).await;
    let hold = hold_ok(&inventory, &request(&slot, 2, "gina")).await;
    assert!(matches!(
        inventory
            .release(hold.id, "removed from basket", "shopper")
            .await
            .unwrap(),
        ReleaseOutcome::Released { .. }
    ));
    assert!(matches!(
        inventory
            .release(hold.id, "again", "shopper")
            .await
            .unwrap(),
        ReleaseOutcome::AlreadyReleased { .. }
    ));
    match inventory
        .confirm(hold.id, &PaymentRef::parse("pi_released").unwrap())
        .await
        .unwrap()
    {
        ConfirmOutcome::Released { purchase } => {
            assert_eq!(purchase.payment_ref.as_deref(), Some("pi_released"));
        }
        other => panic!("expected released, got {other:?}"),
    }
    let (state, by, why) = state_of(&db, hold.id).await;
    assert_eq!(
        (state.as_str(), by.as_deref(), why.as_deref()),
        ("released", Some("shopper"), Some("removed from basket"))
    );
    assert_eq!(inventory.status(&slot).await.unwrap().unwrap().available, 2);
    assert!(matches!(
        inventory.begin_payment(hold.id, None).await.unwrap(),
        BeginPaymentOutcome::Released { .. }
    ));
}

#[tokio::test]
async fn a_paying_hold_outlives_the_ttl_and_only_the_sweeper_expires_it_after_its_deadline() {
    let db = TestDb::new().await;
    let inventory = db.inventory();
    fast_clock(&inventory, 0.5, 1.5).await;
    let slot = resource(&inventory, "slot", 1).await;
    let hold = hold_ok(&inventory, &request(&slot, 1, "hank")).await;
    assert!(matches!(
        inventory.begin_payment(hold.id, None).await.unwrap(),
        BeginPaymentOutcome::AwaitingPayment { .. }
    ));
    assert!(matches!(
        inventory.begin_payment(hold.id, None).await.unwrap(),
        BeginPaymentOutcome::Replayed { .. }
    ));

    // past the TTL, before the deadline: another shopper cannot take it,
    // and a sweep leaves it alone
    tokio::time::sleep(Duration::from_millis(700)).await;
    assert!(matches!(
        inventory.hold(&request(&slot, 1, "ivy")).await.unwrap(),
        HoldOutcome::Insufficient { available: 0 }
    ));
    let sweeper = Sweeper::new(inventory.clone(), "sweeper:deadline");
    assert!(sweeper.run_once().await.unwrap().is_empty());
    assert_eq!(state_of(&db, hold.id).await.0, "awaiting_payment");

    // past the deadline: another shopper's request still does not expire
    // it; only the sweeper (or its own purchase's next call) does. A due
    // plain hold on the same resource makes that request take the locked
    // path and run the lazy expiry, which must leave the paying hold alone.
    inventory
        .upsert_resource(&slot, holdfast::inventory::Capacity::parse(2).unwrap())
        .await
        .unwrap();
    let plain = hold_ok(&inventory, &request(&slot, 1, "jude")).await;
    tokio::time::sleep(Duration::from_millis(1000)).await;
    assert!(matches!(
        inventory.hold(&request(&slot, 2, "ivy")).await.unwrap(),
        HoldOutcome::Insufficient { available: 1 }
    ));
    assert_eq!(
        state_of(&db, plain.id).await.0,
        "expired",
        "the lazy path ran"
    );
    assert_eq!(state_of(&db, hold.id).await.0, "awaiting_payment");
    let swept = sweeper.run_once().await.unwrap();
    assert_eq!(swept[0].expired_holds, 1);
    let (state, by, why) = state_of(&db, hold.id).await;
    assert_eq!(
        (state.as_str(), by.as_deref(), why.as_deref()),
        (
            "expired",
            Some("sweeper:deadline"),
            Some("payment_deadline")
        )
    );
    assert!(matches!(
        inventory.hold(&request(&slot, 2, "ivy")).await.unwrap(),
        HoldOutcome::Held { .. }
    ));
    assert_no_drift(&inventory).await;
}

#[tokio::test]
async fn money_after_the_payment_deadline_is_refused_whether_or_not_the_sweeper_ran() {
    let db = TestDb::new().await;
    let inventory = db.inventory();
    fast_clock(&inventory, 0.3, 0.6).await;
    let slot = resource(&inventory, "slot", 1).await;
    let hold = hold_ok(&inventory, &request(&slot, 1, "kit")).await;
    inventory.begin_payment(hold.id, None).await.unwrap();
    tokio::time::sleep(Duration::from_millis(700)).await;
    // no sweep has run: the purchase's own call ends it
    assert!(matches!(
        inventory.begin_payment(hold.id, None).await.unwrap(),
        BeginPaymentOutcome::Expired { .. }
    ));
    assert!(matches!(
        inventory
            .confirm(hold.id, &PaymentRef::parse("pi_too_late").unwrap())
            .await
            .unwrap(),
        ConfirmOutcome::Expired { .. }
    ));
    let (state, by, why) = state_of(&db, hold.id).await;
    assert_eq!(
        (state.as_str(), by.as_deref(), why.as_deref()),
        ("expired", Some("deadline"), Some("payment_deadline"))
    );
    assert_eq!(inventory.status(&slot).await.unwrap().unwrap().available, 1);
    assert_no_drift(&inventory).await;
}

#[tokio::test]
async fn a_payment_that_bought_one_hold_is_never_refunded_on_behalf_of_another() {
    let db = TestDb::new().await;
    let inventory = db.inventory();
    let slot = resource(&inventory, "slot", 5).await;
    let bought = hold_ok(&inventory, &request(&slot, 1, "lou")).await;
    let payment = PaymentRef::parse("pi_lou").unwrap();
    inventory.confirm(bought.id, &payment).await.unwrap();

    // the same money reported for a released hold and for a confirmed one:
    // both are flagged, neither is answered with a refund outcome
    let released = hold_ok(&inventory, &request(&slot, 1, "max")).await;
    inventory
        .release(released.id, "gone", "shopper")
        .await
        .unwrap();
    let paid_other = hold_ok(&inventory, &request(&slot, 1, "ned")).await;
    inventory
        .confirm(paid_other.id, &PaymentRef::parse("pi_ned").unwrap())
        .await
        .unwrap();
    for id in [released.id, paid_other.id] {
        match inventory.confirm(id, &payment).await.unwrap() {
            ConfirmOutcome::PaymentRefInUse { other_hold_id, .. } => {
                assert_eq!(other_hold_id, bought.id)
            }
            other => panic!("expected payment_ref_in_use, got {other:?}"),
        }
    }
    assert_eq!(inventory.status(&slot).await.unwrap().unwrap().sold, 2);
}

#[tokio::test]
async fn an_expired_plain_hold_counts_as_free_for_the_next_shopper() {
    let db = TestDb::new().await;
    let inventory = db.inventory();
    let slot = resource(&inventory, "slot", 1).await;
    let mut short = request(&slot, 1, "jack");
    short.ttl = Some(ttl(0.3));
    let first = hold_ok(&inventory, &short).await;
    assert!(matches!(
        inventory.hold(&request(&slot, 1, "kate")).await.unwrap(),
        HoldOutcome::Insufficient { available: 0 }
    ));
    tokio::time::sleep(Duration::from_millis(400)).await;
    let status = inventory.status(&slot).await.unwrap().unwrap();
    assert_eq!(
        (status.available, status.due, status.available_now),
        (0, 1, 1)
    );

    hold_ok(&inventory, &request(&slot, 1, "kate")).await;
    let (state, by, why) = state_of(&db, first.id).await;
    assert_eq!(
        (state.as_str(), by.as_deref(), why.as_deref()),
        ("expired", Some("lazy-expiry"), Some("ttl"))
    );
    assert_no_drift(&inventory).await;
}

#[tokio::test]
async fn the_expiry_hint_follows_the_earliest_plain_hold() {
    let db = TestDb::new().await;
    let inventory = db.inventory();
    let slot = resource(&inventory, "slot", 10).await;
    let hint = |pool: sqlx::PgPool| async move {
        sqlx::query_scalar::<_, Option<chrono::DateTime<chrono::Utc>>>(
            "select next_expiry from resources where id = 'slot'",
        )
        .fetch_one(&pool)
        .await
        .unwrap()
    };
    assert_eq!(hint(db.pool.clone()).await, None);
    let mut soon = request(&slot, 1, "a");
    soon.ttl = Some(ttl(0.3));
    let first = hold_ok(&inventory, &soon).await;
    let mut later = request(&slot, 1, "b");
    later.ttl = Some(ttl(600.0));
    let second = hold_ok(&inventory, &later).await;
    assert_eq!(hint(db.pool.clone()).await, Some(first.expires_at));

    tokio::time::sleep(Duration::from_millis(400)).await;
    Sweeper::new(inventory.clone(), "sweeper:hint")
        .run_once()
        .await
        .unwrap();
    assert_eq!(
        hint(db.pool.clone()).await,
        Some(second.expires_at),
        "recomputed exactly"
    );
    // and a resource whose hint is in the future is not even visited
    assert!(
        Sweeper::new(inventory.clone(), "sweeper:hint")
            .run_once()
            .await
            .unwrap()
            .is_empty()
    );
}

#[tokio::test]
async fn extensions_are_bounded_and_only_for_live_plain_holds() {
    let db = TestDb::new().await;
    let inventory = db.inventory();
    let slot = resource(&inventory, "slot", 3).await;
    let hold = hold_ok(&inventory, &request(&slot, 1, "lena")).await;
    let by = Span::parse("extension", Duration::from_secs(120)).unwrap();
    match inventory.extend(hold.id, Some(by)).await.unwrap() {
        ExtendOutcome::Extended { purchase } => {
            assert_eq!(
                purchase.expires_at,
                hold.expires_at + chrono::Duration::seconds(120)
            );
            assert_eq!(purchase.extensions, 1);
        }
        other => panic!("expected extended, got {other:?}"),
    }
    // the default allows one extension
    assert!(matches!(
        inventory.extend(hold.id, None).await.unwrap(),
        ExtendOutcome::NotExtendable { .. }
    ));
    let paying = hold_ok(&inventory, &request(&slot, 1, "mia")).await;
    inventory.begin_payment(paying.id, None).await.unwrap();
    assert!(matches!(
        inventory.extend(paying.id, None).await.unwrap(),
        ExtendOutcome::NotExtendable { .. }
    ));
    let unknown = holdfast::inventory::HoldId(uuid::Uuid::new_v4());
    assert!(matches!(
        inventory.extend(unknown, None).await.unwrap(),
        ExtendOutcome::NotFound
    ));
    let kinds: Vec<String> = inventory
        .events(hold.id)
        .await
        .unwrap()
        .into_iter()
        .map(|e| e.kind)
        .collect();
    assert_eq!(kinds, ["held", "extended"]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn two_sweepers_at_once_expire_three_hundred_holds_exactly_once() {
    let db = TestDb::with_connections(30).await;
    let inventory = db.inventory();
    let mut resources = Vec::new();
    for i in 0..6 {
        resources.push(resource(&inventory, &format!("r{i}"), 100).await);
    }
    let holds = join_all((0..300).map(|i| {
        let inventory = inventory.clone();
        let mut short = request(&resources[i % 6], 1, &format!("shopper-{i}"));
        short.ttl = Some(ttl(0.5));
        async move { hold_ok(&inventory, &short).await }
    }))
    .await;
    assert_eq!(holds.len(), 300);
    tokio::time::sleep(Duration::from_millis(600)).await;

    // small batches so that the two really interleave
    let a = Sweeper::new(inventory.clone(), "sweeper:a").with_batch(7);
    let b = Sweeper::new(inventory.clone(), "sweeper:b").with_batch(7);
    let (from_a, from_b) = tokio::join!(
        tokio::spawn(async move { a.run_once().await.unwrap() }),
        tokio::spawn(async move { b.run_once().await.unwrap() })
    );
    let count = |counts: Vec<holdfast::inventory::SweepCount>| -> i32 {
        counts.iter().map(|c| c.expired_holds).sum()
    };
    let (from_a, from_b) = (count(from_a.unwrap()), count(from_b.unwrap()));
    assert_eq!(
        from_a + from_b,
        300,
        "a expired {from_a}, b expired {from_b}"
    );

    let (events, holds_expired, distinct): (i64, i64, i64) = sqlx::query_as(
        "select (select count(*) from hold_events where kind = 'expired'), \
                (select count(*) from holds where state = 'expired' and end_reason = 'ttl' \
                    and ended_by in ('sweeper:a', 'sweeper:b')), \
                (select count(distinct hold_id) from hold_events where kind = 'expired')",
    )
    .fetch_one(&db.pool)
    .await
    .unwrap();
    assert_eq!((events, holds_expired, distinct), (300, 300, 300));
    for id in &resources {
        assert_eq!(inventory.status(id).await.unwrap().unwrap().held, 0);
    }
    assert_no_drift(&inventory).await;
}

#[tokio::test]
async fn the_history_of_a_hold_is_append_only() {
    let db = TestDb::new().await;
    let inventory = db.inventory();
    let slot = resource(&inventory, "slot", 3).await;
    let hold = hold_ok(&inventory, &request(&slot, 1, "nina")).await;
    inventory.begin_payment(hold.id, None).await.unwrap();
    inventory
        .confirm(hold.id, &PaymentRef::parse("pi_hist").unwrap())
        .await
        .unwrap();
    let events = inventory.events(hold.id).await.unwrap();
    let path: Vec<(Option<&str>, &str)> = events
        .iter()
        .map(|e| (e.from_state.as_deref(), e.to_state.as_str()))
        .collect();
    assert_eq!(
        path,
        [
            (None, "held"),
            (Some("held"), "awaiting_payment"),
            (Some("awaiting_payment"), "confirmed")
        ]
    );
    for statement in [
        "update hold_events set actor = 'someone else'",
        "delete from hold_events",
        "truncate hold_events",
    ] {
        assert!(
            sqlx::query(statement).execute(&db.pool).await.is_err(),
            "{statement}"
        );
    }
    assert_eq!(inventory.events(hold.id).await.unwrap().len(), 3);
    let record = &inventory
        .holds(&holdfast::inventory::HoldFilter {
            state: Some(HoldState::Confirmed),
            ..Default::default()
        })
        .await
        .unwrap()[0];
    assert_eq!(record.payment_ref.as_deref(), Some("pi_hist"));
}

#[tokio::test]
async fn a_sweep_in_small_chunks_expires_every_due_hold_once_even_with_equal_expiries() {
    let db = TestDb::new().await;
    let inventory = db.inventory();
    let r = resource(&inventory, "ties", 100).await;
    // twenty holds from one batch share their expiry to the microsecond;
    // five more are not due for a long while
    let due: Vec<_> = (0..20)
        .map(|i| {
            let mut short = request(&r, 1, &format!("tie-{i}"));
            short.ttl = Some(ttl(0.3));
            short
        })
        .collect();
    inventory.hold_many(&due).await.unwrap();
    for i in 0..5 {
        hold_ok(&inventory, &request(&r, 1, &format!("later-{i}"))).await;
    }
    let distinct: i64 = sqlx::query_scalar(
        "select count(distinct expires_at) from holds where account_id like 'tie-%'",
    )
    .fetch_one(&db.pool)
    .await
    .unwrap();
    assert_eq!(distinct, 1, "the batch's holds expire at the same instant");
    tokio::time::sleep(Duration::from_millis(400)).await;

    // chunks of 7 split the tie: each chunk starts where the last one ended
    let counts = Sweeper::new(inventory.clone(), "sweeper:ties")
        .with_batch(7)
        .run_once()
        .await
        .unwrap();
    let chunks: Vec<i32> = counts.iter().map(|c| c.expired_holds).collect();
    assert_eq!(chunks, [7, 7, 6]);
    let (expired, held, hint_exact): (i64, i32, bool) = sqlx::query_as(
        "select (select count(*) from holds where state = 'expired' and account_id like 'tie-%'), \
                held, \
                next_expiry = (select min(expires_at) from holds \
                                where resource_id = 'ties' and state = 'held') \
           from resources where id = 'ties'",
    )
    .fetch_one(&db.pool)
    .await
    .unwrap();
    assert_eq!((expired, held, hint_exact), (20, 5, true));
    assert_no_drift(&inventory).await;
}

#[tokio::test]
async fn a_hint_made_late_by_hand_heals_within_one_more_sweep() {
    let db = TestDb::new().await;
    let inventory = db.inventory();
    let r = resource(&inventory, "late-hint", 10).await;
    for i in 0..3 {
        hold_ok(&inventory, &request(&r, 1, &format!("early-{i}"))).await;
    }
    // a hand-written update moves the holds' time back but leaves the hint
    // after them (the scans start at the hint)
    sqlx::query(
        "with moved as (update holds set expires_at = now() - interval '2 seconds' \
                         where resource_id = 'late-hint' returning 1) \
         update resources set next_expiry = now() - interval '1 second' where id = 'late-hint'",
    )
    .execute(&db.pool)
    .await
    .unwrap();
    let sweeper = Sweeper::new(inventory.clone(), "sweeper:heal");
    let swept = |counts: Vec<holdfast::inventory::SweepCount>| -> i32 {
        counts.iter().map(|c| c.expired_holds).sum()
    };
    // the first pass finds nothing past the hint, and puts the hint right
    assert_eq!(swept(sweeper.run_once().await.unwrap()), 0);
    assert_eq!(swept(sweeper.run_once().await.unwrap()), 3);
    assert_eq!(held_and_sold(&db, "late-hint").await, (0, 0));
    assert_no_drift(&inventory).await;
}
