//! Basket holds: several resources, all or nothing, one lock order.

use futures::future::join_all;
use holdfast::inventory::{
    Basket, BasketLine, BasketOutcome, BasketRequest, ConfirmOutcome, HoldState, IdempotencyKey,
    InventoryError, PaymentRef, ReleaseOutcome,
};

use holdfast_testkit::*;

fn basket(lines: &[(&str, i64)], who: &str) -> BasketRequest {
    BasketRequest {
        basket: Basket::parse(
            lines
                .iter()
                .map(|(id, n)| BasketLine {
                    resource: rid(id),
                    qty: qty(*n),
                })
                .collect(),
        )
        .unwrap(),
        account: account(who),
        idempotency_key: None,
        ttl: None,
    }
}

#[tokio::test]
async fn a_basket_with_one_short_line_holds_nothing_and_names_the_line() {
    let db = TestDb::new().await;
    let inventory = db.inventory();
    resource(&inventory, "slot-12:30", 8).await;
    resource(&inventory, "vip", 2).await;
    resource(&inventory, "jars", 40).await;

    let outcome = inventory
        .hold_basket(&basket(
            &[("slot-12:30", 1), ("vip", 3), ("jars", 2)],
            "olga",
        ))
        .await
        .unwrap();
    let BasketOutcome::Insufficient { lines } = outcome else {
        panic!("expected insufficient, got {outcome:?}");
    };
    let short: Vec<_> = lines.iter().filter(|l| l.short).collect();
    assert_eq!(short.len(), 1);
    assert_eq!(
        (
            short[0].resource_id.as_str(),
            short[0].requested,
            short[0].available
        ),
        ("vip", 3, 2)
    );
    let rows: i64 = sqlx::query_scalar("select count(*) from holds")
        .fetch_one(&db.pool)
        .await
        .unwrap();
    assert_eq!(rows, 0, "nothing was held");
    for id in ["slot-12:30", "vip", "jars"] {
        assert_eq!(inventory.status(&rid(id)).await.unwrap().unwrap().held, 0);
    }

    // unknown resources are named too, and nothing is held
    let outcome = inventory
        .hold_basket(&basket(&[("jars", 1), ("nope", 1)], "olga"))
        .await
        .unwrap();
    assert_eq!(
        outcome,
        BasketOutcome::UnknownResource {
            unknown: vec!["nope".into()]
        }
    );
}

#[tokio::test]
async fn a_basket_lives_and_dies_as_one_purchase() {
    let db = TestDb::new().await;
    let inventory = db.inventory();
    resource(&inventory, "slot", 8).await;
    resource(&inventory, "general", 200).await;

    // the same resource twice is one line with the quantities summed
    let mut request = basket(&[("general", 1), ("slot", 1), ("general", 1)], "pia");
    request.idempotency_key = Some(IdempotencyKey::parse("cart-1").unwrap());
    let BasketOutcome::Held {
        basket_id, lines, ..
    } = inventory.hold_basket(&request).await.unwrap()
    else {
        panic!("expected held");
    };
    assert_eq!(lines.len(), 2);
    assert_eq!(
        (lines[0].resource_id.as_str(), lines[0].qty),
        ("general", 2)
    );
    let BasketOutcome::Replayed {
        basket_id: again, ..
    } = inventory.hold_basket(&request).await.unwrap()
    else {
        panic!("expected replayed");
    };
    assert_eq!(again, basket_id);

    inventory.begin_payment(basket_id, None).await.unwrap();
    let payment = PaymentRef::parse("pi_basket").unwrap();
    let ConfirmOutcome::Confirmed { purchase } =
        inventory.confirm(basket_id, &payment).await.unwrap()
    else {
        panic!("expected confirmed");
    };
    assert_eq!((purchase.qty, purchase.resource_id), (3, None));
    // a line's own id reaches the same purchase
    assert!(matches!(
        inventory.confirm(lines[1].hold_id, &payment).await.unwrap(),
        ConfirmOutcome::AlreadyConfirmed { .. }
    ));
    assert_eq!(
        inventory
            .status(&rid("general"))
            .await
            .unwrap()
            .unwrap()
            .sold,
        2
    );
    assert_eq!(
        inventory.status(&rid("slot")).await.unwrap().unwrap().sold,
        1
    );

    // releasing a basket gives back every line
    let BasketOutcome::Held {
        basket_id: second, ..
    } = inventory
        .hold_basket(&basket(&[("slot", 2), ("general", 5)], "quinn"))
        .await
        .unwrap()
    else {
        panic!("expected held");
    };
    assert!(matches!(
        inventory
            .release(second, "changed mind", "shopper")
            .await
            .unwrap(),
        ReleaseOutcome::Released { .. }
    ));
    assert_eq!(
        inventory.status(&rid("slot")).await.unwrap().unwrap().held,
        0
    );
    assert_eq!(
        inventory
            .status(&rid("general"))
            .await
            .unwrap()
            .unwrap()
            .held,
        0
    );
    assert_no_drift(&inventory).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn fifty_baskets_over_overlapping_resources_in_opposite_orders_never_deadlock() {
    let db = TestDb::with_connections(50).await;
    let inventory = db.inventory();
    for id in ["a", "b", "c", "d"] {
        resource(&inventory, id, 20).await;
    }
    let outcomes = join_all((0..50).map(|i| {
        let inventory = inventory.clone();
        // half list the resources forwards, half backwards; all overlap on b, c
        let lines: Vec<(&str, i64)> = if i % 2 == 0 {
            vec![("a", 1), ("b", 1), ("c", 1)]
        } else {
            vec![("d", 1), ("c", 1), ("b", 1)]
        };
        let request = basket(&lines, &format!("shopper-{i}"));
        tokio::spawn(async move { inventory.hold_basket(&request).await })
    }))
    .await;
    let mut held = 0;
    let mut short = 0;
    for outcome in outcomes {
        // a deadlock (40P01) would surface here as an error
        match outcome.unwrap().expect("no basket may fail with an error") {
            BasketOutcome::Held { .. } => held += 1,
            BasketOutcome::Insufficient { lines } => {
                assert!(lines.iter().any(|l| l.short && l.available == 0));
                short += 1;
            }
            other => panic!("unexpected {other:?}"),
        }
    }
    // b and c have 20 units each and every basket needs one of each
    assert_eq!((held, short), (20, 30));
    let held_on = |id: &'static str| {
        let inventory = inventory.clone();
        async move { inventory.status(&rid(id)).await.unwrap().unwrap().held }
    };
    assert_eq!(held_on("b").await, 20);
    assert_eq!(held_on("c").await, 20);
    assert_eq!(held_on("a").await + held_on("d").await, 20);
    assert_no_drift(&inventory).await;
}

#[tokio::test]
async fn a_basket_line_expired_by_another_shopper_ends_the_whole_basket() {
    let db = TestDb::new().await;
    let inventory = db.inventory();
    resource(&inventory, "a", 1).await;
    resource(&inventory, "b", 5).await;
    let mut request = basket(&[("a", 1), ("b", 2)], "rita");
    request.ttl = Some(ttl(0.3));
    request.idempotency_key = Some(IdempotencyKey::parse("cart-r").unwrap());
    let BasketOutcome::Held { basket_id, .. } = inventory.hold_basket(&request).await.unwrap()
    else {
        panic!("expected held");
    };
    tokio::time::sleep(std::time::Duration::from_millis(400)).await;
    // another shopper needs "a": the lazy path expires that line alone
    hold_ok(&inventory, &holdfast_testkit::request(&rid("a"), 1, "sol")).await;
    assert_eq!(inventory.status(&rid("b")).await.unwrap().unwrap().held, 2);

    // the basket's own next call ends the rest of it: money would be refunded
    match inventory
        .confirm(basket_id, &PaymentRef::parse("pi_rita").unwrap())
        .await
        .unwrap()
    {
        ConfirmOutcome::Expired { purchase } => {
            assert_eq!(purchase.state, Some(HoldState::Expired))
        }
        other => panic!("expected expired, got {other:?}"),
    }
    let reasons: Vec<(String, String)> = sqlx::query_as(
        "select resource_id, end_reason from holds where basket_id = $1 order by resource_id",
    )
    .bind(basket_id.0)
    .fetch_all(&db.pool)
    .await
    .unwrap();
    assert_eq!(
        reasons,
        [
            ("a".to_owned(), "ttl".to_owned()),
            ("b".to_owned(), "basket_line_expired".to_owned())
        ]
    );
    assert_eq!(inventory.status(&rid("b")).await.unwrap().unwrap().held, 0);

    // a replay after the end says what became of each line
    let BasketOutcome::Replayed { lines, .. } = inventory.hold_basket(&request).await.unwrap()
    else {
        panic!("expected replayed");
    };
    assert_eq!(lines.len(), 2);
    // the same key for a different basket is refused and changes nothing
    let mut other = basket(&[("b", 1)], "rita");
    other.idempotency_key = Some(IdempotencyKey::parse("cart-r").unwrap());
    assert!(matches!(
        inventory.hold_basket(&other).await,
        Err(InventoryError::InvalidInput(message)) if message.contains("different basket")
    ));
    assert_eq!(inventory.status(&rid("b")).await.unwrap().unwrap().held, 0);
    assert_no_drift(&inventory).await;
}
