//! Bad input gets a clear outcome or error and changes nothing.

use std::time::Duration;

use holdfast::inventory::{
    BeginPaymentOutcome, Capacity, ConfirmOutcome, ExtendOutcome, HoldId, HoldOutcome,
    InventoryError, InventorySettings, PaymentRef, ReleaseOutcome, Span, UpsertOutcome,
};

use crate::helpers::*;

/// Everything that could have changed, in one comparable value.
async fn snapshot(db: &TestDb) -> (String, String, String, i64, i64) {
    sqlx::query_as(
        "select (select coalesce(string_agg(row(r.*)::text, ',' order by id), '') from resources r), \
                (select row(hold_ttl, payment_window, account_cap, cap_scope, max_extensions, extension)::text from inventory_settings), \
                (select coalesce(string_agg(row(h.*)::text, ',' order by id), '') from holds h), \
                (select count(*) from hold_events), \
                (select count(*) from payment_refs)",
    )
    .fetch_one(&db.pool)
    .await
    .unwrap()
}

fn sqlstate(error: &sqlx::Error) -> Option<String> {
    error
        .as_database_error()
        .and_then(|e| e.code())
        .map(|c| c.to_string())
}

#[tokio::test]
async fn the_sql_functions_refuse_bad_input_with_a_clear_error_and_change_nothing() {
    let db = TestDb::new().await;
    let inventory = db.inventory();
    let slot = resource(&inventory, "slot", 5).await;
    let hold = hold_ok(&inventory, &request(&slot, 2, "rosa")).await;
    let before = snapshot(&db).await;

    let refusals = [
        (
            "select hf_hold('slot', 0, 'a')",
            "qty must be a positive number",
        ),
        (
            "select hf_hold('slot', -2, 'a')",
            "qty must be a positive number",
        ),
        ("select hf_hold('slot', 1, '')", "account id"),
        (
            "select hf_hold('slot', 1, 'a', null, interval '0')",
            "hold TTL must be positive",
        ),
        (
            "select hf_hold('slot', 1, 'a', null, interval '-5 seconds')",
            "hold TTL must be positive",
        ),
        ("select hf_upsert_resource('', 3)", "resource id"),
        (
            "select hf_upsert_resource('slot', -1)",
            "total must be zero or more",
        ),
        (
            "select hf_hold_basket('{}'::text[], '{}'::int[], 'a')",
            "at least one line",
        ),
        (
            "select hf_hold_basket(array['slot'], array[1, 2], 'a')",
            "one quantity per resource",
        ),
        (
            "select hf_hold_basket(array['slot'], array[0], 'a')",
            "positive qty",
        ),
        (
            "select hf_confirm(gen_random_uuid(), '')",
            "payment reference",
        ),
        ("select hf_release(gen_random_uuid(), '')", "release reason"),
        (
            "select hf_extend(gen_random_uuid(), interval '-1 minute')",
            "extension must be positive",
        ),
        (
            "select hf_begin_payment(gen_random_uuid(), interval '1 minute')",
            "must be longer than the hold TTL",
        ),
        ("select hf_sweep_resource('slot', 0)", "sweep limit"),
    ];
    for (statement, message) in refusals {
        let error = sqlx::query(statement)
            .execute(&db.pool)
            .await
            .expect_err(statement);
        assert_eq!(
            sqlstate(&error).as_deref(),
            Some("22023"),
            "{statement}: {error}"
        );
        assert!(error.to_string().contains(message), "{statement}: {error}");
    }
    assert_eq!(snapshot(&db).await, before);

    // the typed API says the same, and the hold is untouched
    let window = Span::parse("window", Duration::from_secs(60)).unwrap();
    let error = inventory
        .begin_payment(hold.id, Some(window))
        .await
        .unwrap_err();
    assert!(
        matches!(error, InventoryError::InvalidInput(ref m) if m.contains("longer than the hold TTL")),
        "{error}"
    );
    assert_eq!(snapshot(&db).await, before);
}

#[tokio::test]
async fn unknown_ids_get_their_own_outcome_and_change_nothing() {
    let db = TestDb::new().await;
    let inventory = db.inventory();
    resource(&inventory, "slot", 5).await;
    let before = snapshot(&db).await;
    let nobody = HoldId(uuid::Uuid::new_v4());
    let payment = PaymentRef::parse("pi_x").unwrap();

    assert_eq!(
        inventory
            .hold(&request(&rid("missing"), 1, "sam"))
            .await
            .unwrap(),
        HoldOutcome::UnknownResource
    );
    assert_eq!(
        inventory.begin_payment(nobody, None).await.unwrap(),
        BeginPaymentOutcome::NotFound
    );
    assert_eq!(
        inventory.confirm(nobody, &payment).await.unwrap(),
        ConfirmOutcome::NotFound
    );
    assert_eq!(
        inventory.release(nobody, "x", "staff").await.unwrap(),
        ReleaseOutcome::NotFound
    );
    assert_eq!(
        inventory.extend(nobody, None).await.unwrap(),
        ExtendOutcome::NotFound
    );
    assert_eq!(inventory.status(&rid("missing")).await.unwrap(), None);
    assert_eq!(inventory.repair(&rid("missing")).await.unwrap(), None);
    assert_eq!(snapshot(&db).await, before);
}

#[tokio::test]
async fn capacity_below_what_is_committed_is_refused_and_changes_nothing() {
    let db = TestDb::new().await;
    let inventory = db.inventory();
    let slot = resource(&inventory, "slot", 8).await;
    let sold = hold_ok(&inventory, &request(&slot, 3, "tom")).await;
    inventory
        .confirm(sold.id, &PaymentRef::parse("pi_tom").unwrap())
        .await
        .unwrap();
    hold_ok(&inventory, &request(&slot, 2, "uma")).await;
    let before = snapshot(&db).await;

    match inventory
        .upsert_resource(&slot, Capacity::parse(4).unwrap())
        .await
        .unwrap()
    {
        UpsertOutcome::CapacityBelowCommitted {
            counters,
            requested,
        } => {
            assert_eq!(
                (counters.total, counters.held, counters.sold, requested),
                (8, 2, 3, 4)
            );
        }
        other => panic!("expected a refusal, got {other:?}"),
    }
    assert_eq!(snapshot(&db).await, before);
    // exactly what is committed is allowed
    assert!(matches!(
        inventory
            .upsert_resource(&slot, Capacity::parse(5).unwrap())
            .await
            .unwrap(),
        UpsertOutcome::Updated { .. }
    ));
}

#[tokio::test]
async fn settings_that_break_the_rules_are_refused_and_change_nothing() {
    let db = TestDb::new().await;
    let inventory = db.inventory();
    let current = inventory.settings().await.unwrap();
    let before = snapshot(&db).await;
    let bad = [
        InventorySettings {
            hold_ttl_seconds: 0.0,
            ..current.clone()
        },
        InventorySettings {
            hold_ttl_seconds: -60.0,
            ..current.clone()
        },
        InventorySettings {
            payment_window_seconds: current.hold_ttl_seconds,
            ..current.clone()
        },
        InventorySettings {
            payment_window_seconds: 60.0,
            ..current.clone()
        },
        InventorySettings {
            account_cap: Some(0),
            ..current.clone()
        },
        InventorySettings {
            max_extensions: -1,
            ..current.clone()
        },
        InventorySettings {
            extension_seconds: 0.0,
            ..current.clone()
        },
    ];
    for settings in bad {
        let error = inventory.configure(&settings).await.unwrap_err();
        assert!(
            matches!(error, InventoryError::InvalidInput(_)),
            "{settings:?}: {error}"
        );
    }
    assert_eq!(snapshot(&db).await, before);
    assert_eq!(inventory.settings().await.unwrap(), current);
}
