//! Checkout start and the one confirm routine, against a real PostgreSQL
//! with the demo catalogue loaded.

use futures::future::join_all;
use holdfast::catalogue::CatalogueFile;
use holdfast::checkout::{self, AttachOutcome, Fulfilment, PaymentReport, Source, StartOutcome};
use holdfast::payments::{PaymentPage, ProviderKind};
use uuid::Uuid;

use holdfast_testkit::engine::{report, start, started};
use holdfast_testkit::*;

async fn demo(db: &TestDb) {
    let file = CatalogueFile::read(
        concat!(env!("CARGO_MANIFEST_DIR"), "/fixtures/catalogue.json").as_ref(),
    )
    .expect("the demo catalogue parses");
    let report = file.load(&db.pool).await.expect("load");
    assert_eq!(
        report.products,
        8 + 3 + 3,
        "eight pickup slots, two ticket tiers, one jar, and the gala's standing and two sections"
    );
    // loading again changes nothing
    let again = file.load(&db.pool).await.unwrap();
    assert_eq!((again.products, again.resources_created), (14, 0));
}

async fn jobs(db: &TestDb, kind: &str) -> Vec<serde_json::Value> {
    sqlx::query_scalar("select payload from outbox_jobs where kind = $1 order by id")
        .bind(kind)
        .fetch_all(&db.pool)
        .await
        .unwrap()
}

#[tokio::test]
async fn checkout_start_writes_the_order_and_holds_every_line_in_one_go() {
    let db = TestDb::new().await;
    demo(&db).await;
    let slot = db.first_slot().await;
    let order = started(&db, "form-1", &[(&slot, 1), ("harbour-lights-general", 2)]).await;
    assert_eq!(
        (
            order.state.as_str(),
            order.amount_minor,
            order.currency.as_str()
        ),
        ("pending", 1800 + 2 * 3500, "eur")
    );
    assert_eq!(order.token.len(), 64);
    let inventory = db.inventory();
    assert_eq!(
        inventory.status(&rid(&slot)).await.unwrap().unwrap().held,
        1
    );
    assert_eq!(
        inventory
            .status(&rid("harbour-lights-general"))
            .await
            .unwrap()
            .unwrap()
            .held,
        2
    );

    // a double submit is the same order, and holds nothing more
    match checkout::start_checkout(
        &db.pool,
        &start("form-1", &[(&slot, 1), ("harbour-lights-general", 2)]),
    )
    .await
    .unwrap()
    {
        StartOutcome::AlreadyStarted { order: again } => assert_eq!(again.id, order.id),
        other => panic!("expected the same order, got {other:?}"),
    }
    assert_eq!(
        inventory.status(&rid(&slot)).await.unwrap().unwrap().held,
        1
    );
    let orders: i64 = sqlx::query_scalar("select count(*) from orders")
        .fetch_one(&db.pool)
        .await
        .unwrap();
    assert_eq!(orders, 1);
}

#[tokio::test]
async fn a_short_line_is_named_and_nothing_is_held_or_ordered() {
    let db = TestDb::new().await;
    demo(&db).await;
    resource(&db.inventory(), "harbour-lights-vip", 9).await;
    let outcome = checkout::start_checkout(
        &db.pool,
        &start("greedy", &[("wild-honey", 2), ("harbour-lights-vip", 10)]),
    )
    .await
    .unwrap();
    let StartOutcome::SoldOut { lines } = outcome else {
        panic!("expected unavailable, got {outcome:?}");
    };
    assert_eq!(lines.len(), 1);
    assert_eq!(
        (
            lines[0].name.as_str(),
            lines[0].requested,
            lines[0].available
        ),
        ("Harbour Lights — VIP", 10, 9)
    );
    let (orders, holds): (i64, i64) =
        sqlx::query_as("select (select count(*) from orders), (select count(*) from holds)")
            .fetch_one(&db.pool)
            .await
            .unwrap();
    assert_eq!((orders, holds), (0, 0));

    let unknown = checkout::start_checkout(&db.pool, &start("odd", &[("no-such-thing", 1)]))
        .await
        .unwrap();
    assert_eq!(
        unknown,
        StartOutcome::UnknownProducts {
            ids: vec!["no-such-thing".into()]
        }
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn two_hundred_checkouts_for_ten_units_start_exactly_ten_orders() {
    let db = TestDb::with_connections(40).await;
    demo(&db).await;
    db.inventory()
        .upsert_resource(
            &rid("harbour-lights-vip"),
            holdfast::inventory::Capacity::parse(10).unwrap(),
        )
        .await
        .unwrap();
    let outcomes = join_all((0..200).map(|i| {
        let pool = db.pool.clone();
        let form = start(&format!("storm-{i}"), &[("harbour-lights-vip", 1)]);
        tokio::spawn(async move { checkout::start_checkout(&pool, &form).await.unwrap() })
    }))
    .await;
    let mut started = 0;
    let mut refused = 0;
    for outcome in outcomes {
        match outcome.unwrap() {
            StartOutcome::Started { .. } => started += 1,
            StartOutcome::SoldOut { lines } => {
                assert_eq!(
                    (lines[0].name.as_str(), lines[0].available),
                    ("Harbour Lights — VIP", 0)
                );
                refused += 1;
            }
            other => panic!("unexpected {other:?}"),
        }
    }
    assert_eq!((started, refused), (10, 190));
    let orders: i64 = sqlx::query_scalar("select count(*) from orders")
        .fetch_one(&db.pool)
        .await
        .unwrap();
    assert_eq!(orders, 10, "a refused checkout leaves no order behind");
    assert_no_drift(&db.inventory()).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn the_return_and_the_webhook_racing_fulfil_exactly_once_twenty_times() {
    let db = TestDb::with_connections(30).await;
    demo(&db).await;
    for round in 0..20 {
        let order = started(
            &db,
            &format!("race-{round}"),
            &[("harbour-lights-general", 2), ("wild-honey", 1)],
        )
        .await;
        let payment = format!("pi_race_{round}");
        let reported = report(&db, order.id, &payment, Source::Webhook).await;
        let results = join_all((0..6).map(|i| {
            let pool = db.pool.clone();
            let report = PaymentReport {
                source: if i % 2 == 0 {
                    Source::Return
                } else {
                    Source::Webhook
                },
                ..reported.clone()
            };
            tokio::spawn(async move { checkout::confirm_payment(&pool, &report).await.unwrap() })
        }))
        .await;
        let fulfilled = results
            .iter()
            .filter(|r| matches!(r.as_ref().unwrap(), Fulfilment::Fulfilled { .. }))
            .count();
        let already = results
            .iter()
            .filter(|r| matches!(r.as_ref().unwrap(), Fulfilment::AlreadyFulfilled { .. }))
            .count();
        assert_eq!((fulfilled, already), (1, 5), "round {round}");
        let items = holdfast::items::of_order(&db.pool, order.id).await.unwrap();
        // a code per ticket, and one for the jar to collect
        assert_eq!(
            items.len(),
            3,
            "two tickets and a jar, three items, issued once"
        );
    }
    let status = db
        .inventory()
        .status(&rid("harbour-lights-general"))
        .await
        .unwrap()
        .unwrap();
    assert_eq!((status.held, status.sold), (0, 40));
    assert_eq!(jobs(&db, "order_confirmation").await.len(), 20);
    assert!(jobs(&db, "refund").await.is_empty());
    assert_no_drift(&db.inventory()).await;
}

#[tokio::test]
async fn a_paid_order_has_its_codes_and_a_second_payment_is_refunded_once() {
    let db = TestDb::new().await;
    demo(&db).await;
    let slot = db.first_slot().await;
    let order = started(&db, "pay-twice", &[(&slot, 1), ("harbour-lights-vip", 2)]).await;
    let session = PaymentPage {
        id: "cs_test_1".into(),
        url: "http://sandbox/pay/cs_test_1".into(),
        expires_at: chrono::Utc::now() + chrono::Duration::minutes(30),
    };
    let AttachOutcome::Paying { order: paying } =
        checkout::attach_payment(&db.pool, order.id, &session)
            .await
            .unwrap()
    else {
        panic!("expected paying");
    };
    assert_eq!(paying.provider_session_id.as_deref(), Some("cs_test_1"));
    let deadline: chrono::DateTime<chrono::Utc> =
        sqlx::query_scalar("select min(payment_deadline) from holds")
            .fetch_one(&db.pool)
            .await
            .unwrap();
    assert!(
        deadline > session.expires_at,
        "the holds outlive the provider's session"
    );

    assert_eq!(
        checkout::confirm_payment(
            &db.pool,
            &report(&db, order.id, "pi_first", Source::Webhook).await
        )
        .await
        .unwrap(),
        Fulfilment::Fulfilled { order_id: order.id }
    );
    let paid = checkout::order_by_id(&db.pool, order.id)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(
        (paid.state.as_str(), paid.payment_ref.as_deref()),
        ("paid", Some("pi_first"))
    );
    // a pickup's code and a code per ticket, each its own item
    let items = holdfast::items::of_order(&db.pool, order.id).await.unwrap();
    let lengths: Vec<(&str, usize)> = items
        .iter()
        .map(|item| (item.product_id.as_str(), item.code.len()))
        .collect();
    assert_eq!(lengths.len(), 3, "{lengths:?}");
    assert!(lengths.contains(&(slot.as_str(), 6)), "{lengths:?}");
    assert_eq!(
        lengths
            .iter()
            .filter(|(product, len)| *product == "harbour-lights-vip" && *len == 13)
            .count(),
        2
    );

    // the second payment, reported by both paths, is refunded once
    for source in [Source::Webhook, Source::Return, Source::Webhook] {
        let outcome =
            checkout::confirm_payment(&db.pool, &report(&db, order.id, "pi_second", source).await)
                .await
                .unwrap();
        assert!(
            matches!(outcome, Fulfilment::RefundQueued { ref reason, .. } if reason == "duplicate_payment"),
            "{outcome:?}"
        );
    }
    let refunds = jobs(&db, "refund").await;
    assert_eq!(refunds.len(), 1);
    assert_eq!(refunds[0]["payment_ref"], "pi_second");
    let still = checkout::order_by_id(&db.pool, order.id)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(
        (still.state.as_str(), still.payment_ref.as_deref()),
        ("paid", Some("pi_first"))
    );
}

#[tokio::test]
async fn money_after_a_release_or_expiry_is_refunded_and_never_revives_the_order() {
    let db = TestDb::new().await;
    demo(&db).await;
    let released = started(&db, "released", &[("wild-honey", 3)]).await;
    checkout::release_order(&db.pool, released.id, expired_by_provider())
        .await
        .unwrap();
    assert_eq!(
        db.inventory()
            .status(&rid("wild-honey"))
            .await
            .unwrap()
            .unwrap()
            .held,
        0
    );
    let outcome = checkout::confirm_payment(
        &db.pool,
        &report(&db, released.id, "pi_late", Source::Webhook).await,
    )
    .await
    .unwrap();
    assert_eq!(
        outcome,
        Fulfilment::RefundQueued {
            order_id: released.id,
            reason: "hold_released".into()
        }
    );
    let order = checkout::order_by_id(&db.pool, released.id)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(order.state.as_str(), "refund_pending");
    assert_eq!(
        db.inventory()
            .status(&rid("wild-honey"))
            .await
            .unwrap()
            .unwrap()
            .sold,
        0
    );

    // a payment that already bought one order cannot buy another: flagged
    let first = started(&db, "first", &[("wild-honey", 1)]).await;
    let second = started(&db, "second", &[("wild-honey", 1)]).await;
    checkout::confirm_payment(
        &db.pool,
        &report(&db, first.id, "pi_shared", Source::Webhook).await,
    )
    .await
    .unwrap();
    let outcome = checkout::confirm_payment(
        &db.pool,
        &report(&db, second.id, "pi_shared", Source::Webhook).await,
    )
    .await
    .unwrap();
    assert!(
        matches!(outcome, Fulfilment::Flagged { order_id, .. } if order_id == second.id),
        "{outcome:?}"
    );
    let flagged = checkout::order_by_id(&db.pool, second.id)
        .await
        .unwrap()
        .unwrap();
    assert!(flagged.flag.unwrap().starts_with("payment_ref_in_use"));
    assert_eq!(flagged.state.as_str(), "pending");

    // an unknown order is logged and nothing happens
    let unknown = checkout::confirm_payment(
        &db.pool,
        &report(&db, Uuid::new_v4(), "pi_nobody", Source::Webhook).await,
    )
    .await
    .unwrap();
    assert_eq!(unknown, Fulfilment::Unknown);
    assert_no_drift(&db.inventory()).await;
}

#[tokio::test]
async fn a_release_that_loses_to_the_payment_leaves_the_order_paid() {
    let db = TestDb::new().await;
    demo(&db).await;
    let order = started(&db, "close-call", &[("wild-honey", 1)]).await;
    checkout::confirm_payment(
        &db.pool,
        &report(&db, order.id, "pi_close", Source::Return).await,
    )
    .await
    .unwrap();
    let after = checkout::release_order(&db.pool, order.id, expired_by_provider())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(after.state.as_str(), "paid");
    assert_eq!(
        db.inventory()
            .status(&rid("wild-honey"))
            .await
            .unwrap()
            .unwrap()
            .sold,
        1
    );
}

#[tokio::test]
async fn an_order_whose_holds_ran_out_stops_waiting() {
    let db = TestDb::new().await;
    demo(&db).await;
    fast_clock(&db.inventory(), 0.3, 0.9).await;
    let order = started(&db, "lapsed", &[("wild-honey", 1)]).await;
    let paid = started(&db, "kept", &[("wild-honey", 1)]).await;
    checkout::confirm_payment(
        &db.pool,
        &report(&db, paid.id, "pi_kept", Source::Webhook).await,
    )
    .await
    .unwrap();
    tokio::time::sleep(std::time::Duration::from_millis(400)).await;
    holdfast::worker::Sweeper::new(db.inventory(), "sweeper:test")
        .run_once()
        .await
        .unwrap();
    assert_eq!(
        checkout::expire_abandoned_orders(&db.pool).await.unwrap(),
        1
    );
    let lapsed = checkout::order_by_id(&db.pool, order.id)
        .await
        .unwrap()
        .unwrap();
    let kept = checkout::order_by_id(&db.pool, paid.id)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(
        (lapsed.state.as_str(), kept.state.as_str()),
        ("expired", "paid")
    );
    // late money for it is judged by the one rule: its honey is still
    // free, so the same units are claimed again and the order is paid
    let late = checkout::confirm_payment(
        &db.pool,
        &report(&db, order.id, "pi_lapsed", Source::Webhook).await,
    )
    .await
    .unwrap();
    assert!(matches!(late, Fulfilment::Fulfilled { .. }), "{late:?}");
    let lapsed = checkout::order_by_id(&db.pool, order.id)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(lapsed.state.as_str(), "paid");
    assert_no_drift(&db.inventory()).await;
}

#[tokio::test]
async fn one_payment_has_one_fate_however_differently_it_is_reported() {
    let db = TestDb::new().await;
    demo(&db).await;
    let jobs_now = || async { jobs(&db, "refund").await.len() };
    // sold first: a later, different report of the same payment changes
    // nothing (no refund of the money that paid)
    let order = started(&db, "one-fate", &[("wild-honey", 1)]).await;
    let right = report(&db, order.id, "pi_one_fate", Source::Return).await;
    let mut wrong = right.clone();
    wrong.payment.amount_minor += 150;
    wrong.payment.currency = "usd".into();
    wrong.source = Source::Webhook;
    assert_eq!(
        checkout::confirm_payment(&db.pool, &right).await.unwrap(),
        Fulfilment::Fulfilled { order_id: order.id }
    );
    assert_eq!(
        checkout::confirm_payment(&db.pool, &wrong).await.unwrap(),
        Fulfilment::AlreadyFulfilled { order_id: order.id }
    );
    assert_eq!(jobs_now().await, 0);
    // refunded first: a later, matching report does not sell it
    let order = started(&db, "other-fate", &[("wild-honey", 1)]).await;
    let right = report(&db, order.id, "pi_other_fate", Source::Return).await;
    let mut wrong = right.clone();
    wrong.payment.amount_minor = 100;
    assert!(matches!(
        checkout::confirm_payment(&db.pool, &wrong).await.unwrap(),
        Fulfilment::Mismatch {
            refund_queued: true,
            ..
        }
    ));
    assert_eq!(
        checkout::confirm_payment(&db.pool, &right).await.unwrap(),
        Fulfilment::RefundQueued {
            order_id: order.id,
            reason: "payment_mismatch".into()
        }
    );
    let still = checkout::order_by_id(&db.pool, order.id)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(still.state.as_str(), "pending");
    assert_eq!(jobs_now().await, 1);
    assert_no_drift(&db.inventory()).await;
}

#[tokio::test]
async fn a_refund_job_believes_news_only_of_its_own_refund() {
    use holdfast::checkout::refund::{RefundMove, refund_moved_in};
    use holdfast::payments::{RefundStatus, RefundView};

    let db = TestDb::new().await;
    demo(&db).await;
    let order = started(&db, "refund-news", &[("wild-honey", 1)]).await;
    let paid = report(&db, order.id, "pi_news", Source::Webhook).await;
    checkout::release_order(&db.pool, order.id, expired_by_provider())
        .await
        .unwrap();
    assert!(matches!(
        checkout::confirm_payment(&db.pool, &paid).await.unwrap(),
        Fulfilment::RefundQueued { .. }
    ));
    let news = |id: &str, amount: i64, status: RefundStatus, ours: bool| {
        let pool = db.pool.clone();
        let view = RefundView {
            id: id.into(),
            payment_ref: "pi_news".into(),
            amount_minor: amount,
            status,
        };
        async move {
            let mut tx = pool.begin().await.unwrap();
            // the worker names its own job; an event names none
            let own_job = ours.then_some("refund:stripe:pi_news");
            let moved = refund_moved_in(&mut tx, ProviderKind::Stripe, &view, own_job)
                .await
                .unwrap();
            tx.commit().await.unwrap();
            moved
        }
    };
    let job = || async {
        let (state, payload): (String, serde_json::Value) =
            sqlx::query_as("select state, payload from outbox_jobs where kind = 'refund'")
                .fetch_one(&db.pool)
                .await
                .unwrap();
        (
            state,
            payload["refund_id"].clone(),
            payload["reopened"].clone(),
        )
    };
    // someone's partial refund in the dashboard, and some refund's failure
    assert_eq!(
        news("re_hand", 500, RefundStatus::Succeeded, false).await,
        RefundMove::Noted
    );
    assert_eq!(
        news("re_else", 1400, RefundStatus::Failed, false).await,
        RefundMove::Noted
    );
    assert_eq!(
        news("re_else", 1400, RefundStatus::Pending, false).await,
        RefundMove::Noted
    );
    assert_eq!(
        job().await,
        (
            "pending".into(),
            serde_json::Value::Null,
            serde_json::Value::Null
        )
    );
    // the worker's own refund: its id is kept; its success closes the job
    assert_eq!(
        news("re_ours", 1400, RefundStatus::Pending, true).await,
        RefundMove::Noted
    );
    assert_eq!(
        news("re_other", 1400, RefundStatus::Succeeded, false).await,
        RefundMove::Noted
    );
    assert_eq!(
        news("re_ours", 1400, RefundStatus::Succeeded, false).await,
        RefundMove::Closed
    );
    assert_eq!(job().await.0, "done");
    let state = |pool: sqlx::PgPool| async move {
        checkout::order_by_id(&pool, order.id)
            .await
            .unwrap()
            .unwrap()
            .state
            .as_str()
    };
    assert_eq!(state(db.pool.clone()).await, "refunded");
    // it failed after all: asked for again, and the order waits again
    assert_eq!(
        news("re_ours", 1400, RefundStatus::Failed, false).await,
        RefundMove::Reopened
    );
    assert_eq!(
        job().await,
        (
            "pending".into(),
            serde_json::Value::Null,
            serde_json::json!(1)
        )
    );
    assert_eq!(state(db.pool.clone()).await, "refund_pending");
    // a replay of that failure opens nothing more
    assert_eq!(
        news("re_ours", 1400, RefundStatus::Failed, false).await,
        RefundMove::Noted
    );
    assert_eq!(job().await.2, serde_json::json!(1));
}

/// Thirteen payments reported together, through every outcome of the
/// confirm routine (an order named three times, a payment twice, three
/// sales and an unswept expiry on one resource), in one transaction:
/// each is answered, and leaves the orders, codes and jobs, exactly as the
/// same payments confirmed one after another do on a twin set of orders.
#[tokio::test]
async fn a_batch_of_payments_is_answered_as_the_same_payments_one_after_another() {
    let db = TestDb::new().await;
    demo(&db).await;
    let slot = db.first_slot().await;
    let roles: [(&str, &str, i64); 9] = [
        ("a", slot.as_str(), 1),
        ("b", "harbour-lights-general", 2),
        ("c", "wild-honey", 1),
        ("d", "wild-honey", 1),
        ("e", "wild-honey", 1),
        ("f", "wild-honey", 1),
        ("g", "wild-honey", 2),
        ("h", "harbour-lights-general", 1),
        ("i", "wild-honey", 3),
    ];
    let mut worlds = Vec::new();
    for world in ["together", "alone"] {
        let mut orders = std::collections::BTreeMap::new();
        for (role, product, n) in roles {
            let order = started(&db, &format!("{world}-{role}"), &[(product, n)]).await;
            orders.insert(role, order.id);
        }
        // d's units were given back before its money came; i's hold ran
        // out and nothing swept it yet (the engine ends it on the way, in
        // the batch that sells g's and c's honey, and the late-money rule
        // claims its units again: they are free)
        checkout::release_order(&db.pool, orders["d"], expired_by_provider())
            .await
            .unwrap();
        sqlx::query(
            "update holds set expires_at = now() - interval '1 second' \
              where purchase_id = (select hold_id from orders where id = $1)",
        )
        .bind(orders["i"])
        .execute(&db.pool)
        .await
        .unwrap();
        let pay = |role: &str, reference: &str| {
            let order = orders[role];
            let reference = format!("pi_{world}_{reference}");
            let db = &db;
            async move { report(db, order, &reference, Source::Webhook).await }
        };
        let mut authorised = pay("e", "e").await;
        authorised.payment.status = holdfast::payments::PaymentStatus::Authorized;
        let mut short = pay("f", "f").await;
        short.payment.amount_minor -= 1;
        let reports = vec![
            pay("a", "a").await,
            pay("b", "b").await,
            pay("a", "a").await,
            pay("a", "a2").await,
            pay("c", "b").await,
            pay("d", "d").await,
            authorised,
            short,
            report(&db, Uuid::new_v4(), "pi_nobody", Source::Webhook).await,
            pay("c", "c").await,
            pay("g", "g").await,
            pay("h", "h").await,
            pay("i", "i").await,
        ];
        worlds.push((world, orders, reports));
    }

    let mut seen = Vec::new();
    for (world, orders, reports) in &worlds {
        let answers = if *world == "together" {
            let mut tx = db.pool.begin().await.unwrap();
            let answers = checkout::confirm_payments_in(&mut tx, reports)
                .await
                .unwrap();
            tx.commit().await.unwrap();
            answers
        } else {
            let mut answers = Vec::new();
            for report in reports {
                answers.push(checkout::confirm_payment(&db.pool, report).await.unwrap());
            }
            answers
        };
        // the same words in both worlds, with each order (and its hold)
        // named by its role
        let mut names = Vec::new();
        for (role, id) in orders {
            let hold: Uuid = sqlx::query_scalar("select hold_id from orders where id = $1")
                .bind(id)
                .fetch_one(&db.pool)
                .await
                .unwrap();
            names.push((id.to_string(), role.to_string()));
            names.push((hold.to_string(), format!("{role}'s hold")));
        }
        let name = |text: String| {
            names
                .iter()
                .fold(text.replace(world, "W"), |text, (id, role)| {
                    text.replace(id, role)
                })
        };
        let answers: Vec<String> = answers
            .iter()
            .map(|a| name(serde_json::to_string(a).unwrap()))
            .collect();
        let mut left = Vec::new();
        for (role, id) in orders {
            let (state, flag, payment): (String, Option<String>, Option<String>) =
                sqlx::query_as("select state, flag, payment_ref from orders where id = $1")
                    .bind(id)
                    .fetch_one(&db.pool)
                    .await
                    .unwrap();
            let items = holdfast::items::of_order(&db.pool, *id).await.unwrap();
            let pickup = items.iter().find(|item| item.code.len() == 6);
            let codes = items.len();
            let jobs: Vec<(String, Option<String>)> = sqlx::query_as(
                "select kind, payload->>'reason' from outbox_jobs \
                  where payload->>'order_id' = $1::text order by kind, id",
            )
            .bind(id)
            .fetch_all(&db.pool)
            .await
            .unwrap();
            left.push(name(format!(
                "{role}: {state} flag={flag:?} paid_by={payment:?} pickup={} codes={codes} jobs={jobs:?}",
                pickup.is_some()
            )));
        }
        seen.push((answers, left));
    }
    let labels: Vec<&str> = seen[0]
        .0
        .iter()
        .map(|a| {
            let value: serde_json::Value = serde_json::from_str(a).unwrap();
            match value["action"].as_str().unwrap() {
                "fulfilled" => "fulfilled",
                "already_fulfilled" => "already_fulfilled",
                "refund_queued" => "refund_queued",
                "flagged" => "flagged",
                "mismatch" => "mismatch",
                "not_captured" => "not_captured",
                "unknown" => "unknown",
                other => panic!("{other}"),
            }
        })
        .collect();
    assert_eq!(
        labels,
        [
            "fulfilled",
            "fulfilled",
            "already_fulfilled",
            "refund_queued",
            "flagged",
            "refund_queued",
            "not_captured",
            "mismatch",
            "unknown",
            "fulfilled",
            "fulfilled",
            "fulfilled",
            "fulfilled"
        ]
    );
    assert_eq!(seen[0].0, seen[1].0, "the answers");
    assert_eq!(seen[0].1, seen[1].1, "what is left");
    println!("{:#?}", seen[0]);
    assert_no_drift(&db.inventory()).await;
}
