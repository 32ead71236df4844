//! The journeys whose behaviour is the same for every provider, written
//! once and run for Stripe and for Razorpay: the shopper's path differs only
//! in how they pay and come back.

use std::time::Duration;

use holdfast::payments::{PaymentProvider, ProviderKind};
use holdfast_sandbox::{DeliveryMode, Ledger};

use holdfast_testkit::*;

const BOTH: [ProviderKind; 2] = ProviderKind::ALL;

fn ledger(app: &TestApp, via: ProviderKind) -> Ledger {
    match via {
        ProviderKind::Stripe => app.sandbox.stripe.ledger(),
        ProviderKind::Razorpay => app.sandbox.razorpay.ledger(),
    }
}

/// Wait until `n` webhook deliveries were accepted by the shop.
async fn accepted(app: &TestApp, via: ProviderKind, n: usize) {
    wait_for_accepted(|| ledger(app, via), n).await;
}

async fn outbox(app: &TestApp) {
    drain_outbox(&app.db.pool, app.sandbox.providers()).await;
}

/// Webhooks each successful payment sends: Stripe one, Razorpay three
/// (payment.authorized, payment.captured and order.paid).
fn events_per_payment(via: ProviderKind) -> usize {
    match via {
        ProviderKind::Stripe => 1,
        ProviderKind::Razorpay => 3,
    }
}

/// Webhooks `payments` payments on one page send. A second Stripe payment
/// on a session is a second completed session event; Razorpay refunds a
/// payment on an order that is paid already by itself (refund.processed).
fn events_for(via: ProviderKind, payments: usize) -> usize {
    match via {
        ProviderKind::Stripe => payments,
        ProviderKind::Razorpay => 3 + (payments - 1),
    }
}

/// Money arriving on a page whose order we released: Stripe's closed page
/// takes it only "late"; a Razorpay order never closes, so paying is enough.
fn late_payment(via: ProviderKind) -> &'static str {
    match via {
        ProviderKind::Stripe => "pay-late",
        ProviderKind::Razorpay => "pay",
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_full_journey_ends_on_an_order_page_with_codes_for_each_provider() {
    for via in BOTH {
        let app = spawn_app().await;
        app.db.load_demo().await;
        let shopper = browser();
        let paid = app
            .buy(&shopper, &Purchase::of("harbour-lights-vip", 2).with(via))
            .await;
        let started = &paid.started;
        assert_eq!(
            paid.order_url(),
            format!("/orders/{}", started.token),
            "{via:?}"
        );
        let page = shopper
            .get(format!("{}/orders/{}", app.address, started.token))
            .send()
            .await
            .unwrap()
            .text()
            .await
            .unwrap();
        assert!(page.contains("Thank you, Ada Shopper"), "{via:?}: {page}");
        assert_eq!(page.matches("class=\"ticket-code\"").count(), 2, "{via:?}");
        accepted(&app, via, events_per_payment(via)).await;
        assert_eq!(
            held_and_sold(&app.db, "harbour-lights-vip").await,
            (0, 2),
            "{via:?}: sold moved once"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn the_return_and_the_webhooks_race_twenty_times_with_one_fulfilment_each_for_each_provider()
{
    for via in BOTH {
        let app = spawn_app().await;
        app.db.load_demo().await;
        for _ in 0..20 {
            // paying fires the webhooks; the way back follows at once
            let paid = app
                .buy(
                    &browser(),
                    &Purchase::of("harbour-lights-general", 1).with(via),
                )
                .await;
            assert_eq!(paid.returned().status, 303, "{via:?}");
            app.wait_for_state(&paid.started.token, "paid").await;
        }
        accepted(&app, via, 20 * events_per_payment(via)).await;
        let (fulfilments, confirmations, codes, sold): (i64, i64, i64, i32) = sqlx::query_as(
            "select (select count(*) from outbox_jobs where kind = 'order_confirmation'), \
                    (select count(*) from hold_events where kind = 'confirmed'), \
                    (select count(*) from order_items), \
                    (select sold from resources where id = 'harbour-lights-general')",
        )
        .fetch_one(&app.db.pool)
        .await
        .unwrap();
        assert_eq!(
            (fulfilments, confirmations, codes, sold),
            (20, 20, 20, 20),
            "{via:?}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn paying_twice_is_one_sale_and_one_refund_for_each_provider() {
    for via in BOTH {
        let app = spawn_app().await;
        app.db.load_demo().await;
        let purchase = Purchase::of("wild-honey", 2)
            .with(via)
            .paying(Payment::press("pay-twice"));
        let Paid { started, .. } = app.buy(&browser(), &purchase).await;
        accepted(&app, via, events_for(via, 2)).await;
        assert_eq!(app.order_state(&started.token).await, "paid", "{via:?}");
        outbox(&app).await;
        let money = ledger(&app, via);
        assert_eq!(
            (money.charges.len(), money.refunds_standing().count()),
            (2, 1),
            "{via:?}"
        );
        let kept: String = sqlx::query_scalar("select payment_ref from orders")
            .fetch_one(&app.db.pool)
            .await
            .unwrap();
        assert_ne!(
            money.refunds[0].payment_intent, kept,
            "{via:?}: the kept payment is not refunded"
        );
        match via {
            // Holdfast refunds the second payment, with a key from its job
            // that Stripe takes and a retry repeats
            ProviderKind::Stripe => {
                let job_key = format!("refund:stripe:{}", money.refunds[0].payment_intent);
                assert_eq!(
                    money.refunds[0].idempotency_key.as_deref(),
                    Some(holdfast::checkout::refund::idempotency_key(&job_key, 0).as_str()),
                );
                assert!(!money.refunds[0].by_provider);
            }
            // Razorpay refunds a payment on a paid order by itself
            ProviderKind::Razorpay => {
                assert!(money.refunds[0].by_provider);
                let jobs: i64 =
                    sqlx::query_scalar("select count(*) from outbox_jobs where kind = 'refund'")
                        .fetch_one(&app.db.pool)
                        .await
                        .unwrap();
                assert_eq!(jobs, 0, "nothing for Holdfast to refund");
            }
        }
        // the worker again, and the provider's refund event: nothing more
        outbox(&app).await;
        tokio::time::sleep(Duration::from_millis(200)).await;
        assert_eq!(ledger(&app, via).refunds.len(), 1, "{via:?}");
        assert_eq!(
            app.db
                .inventory()
                .status(&rid("wild-honey"))
                .await
                .unwrap()
                .unwrap()
                .sold,
            2
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn money_after_an_abandoned_checkout_is_refunded_for_each_provider() {
    for via in BOTH {
        let app = spawn_app().await;
        app.db.load_demo().await;
        let shopper = browser();
        let started = app
            .start(&shopper, &Purchase::of("harbour-lights-vip", 3).with(via))
            .await;
        // the shopper gives up and goes back to the shop
        let cancelled = app.leave(&shopper, &started.cancel_url).await;
        assert_eq!(cancelled.status(), 200, "{via:?}");
        assert_eq!(
            app.db
                .inventory()
                .status(&rid("harbour-lights-vip"))
                .await
                .unwrap()
                .unwrap()
                .held,
            0
        );
        // the worker closes the provider's page where there is one to close
        outbox(&app).await;
        // then money arrives anyway
        app.pay(&shopper, &started, &Payment::press(late_payment(via)))
            .await;
        app.wait_for_state(&started.token, "refund_pending").await;
        outbox(&app).await;
        app.wait_for_state(&started.token, "refunded").await;
        assert_eq!(ledger(&app, via).refunds.len(), 1, "{via:?}");
        assert_eq!(
            held_and_sold(&app.db, "harbour-lights-vip").await,
            (0, 0),
            "{via:?}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn webhooks_delivered_twice_or_newest_first_have_one_effect_for_each_provider() {
    // twice: one payment, every event delivered twice;
    // reorder: two payments, their events delivered newest first
    for via in BOTH {
        for (mode, action, payments) in [
            (DeliveryMode::Twice, "pay", 1),
            (DeliveryMode::Reorder, "pay-twice", 2),
        ] {
            let app = spawn_app().await;
            app.db.load_demo().await;
            // only the webhooks: nobody comes back through the browser
            let purchase = Purchase::of("harbour-lights-general", 1).with(via).paying(
                Payment::press(action)
                    .reported(Report::Webhook)
                    .delivered(mode),
            );
            let Paid { started, .. } = app.buy(&browser(), &purchase).await;
            let copies = if mode == DeliveryMode::Twice { 2 } else { 1 };
            accepted(&app, via, copies * events_for(via, payments)).await;
            app.wait_for_state(&started.token, "paid").await;
            let (fulfilments, refunds, sold): (i64, i64, i32) = sqlx::query_as(
                "select (select count(*) from outbox_jobs where kind = 'order_confirmation'), \
                        (select count(*) from outbox_jobs where kind = 'refund'), \
                        (select sold from resources where id = 'harbour-lights-general')",
            )
            .fetch_one(&app.db.pool)
            .await
            .unwrap();
            // a second Razorpay payment on a paid order is refunded by
            // Razorpay itself
            let ours = match via {
                ProviderKind::Stripe => payments as i64 - 1,
                ProviderKind::Razorpay => 0,
            };
            assert_eq!(
                (fulfilments, refunds, sold),
                (1, ours, 1),
                "{via:?} {mode:?}"
            );
        }
    }
}

// ---- reconciliation: when neither the webhook nor the return arrives ----

use holdfast::configuration::ReconcileTimes;
use holdfast::worker::reconcile::{ReconcileReport, Reconciler};

fn reconciler(app: &TestApp, times: ReconcileTimes) -> Reconciler {
    Reconciler::new(app.db.pool.clone(), app.sandbox.providers()).with_times(times)
}

/// Press "pay" (or `action`) and close the tab, every webhook lost: only
/// reconciliation can find the money.
fn unreported(action: &str) -> Payment {
    Payment::press(action).reported(Report::Neither)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_payment_whose_webhook_and_return_are_both_lost_is_fulfilled_by_reconciliation() {
    for via in BOTH {
        let app = spawn_app().await;
        app.db.load_demo().await;
        let purchase = Purchase::of("harbour-lights-vip", 3)
            .with(via)
            .paying(unreported("pay"));
        let Paid { started, .. } = app.buy(&browser(), &purchase).await;
        tokio::time::sleep(Duration::from_millis(300)).await;
        assert_eq!(app.order_state(&started.token).await, "pending", "{via:?}");
        assert_eq!(ledger(&app, via).charges.len(), 1, "{via:?}");

        // not yet: the page has not been quiet for the first-check time
        let patient = reconciler(&app, ReconcileTimes::default())
            .drain()
            .await
            .unwrap();
        assert_eq!(patient, ReconcileReport::default(), "{via:?}");

        let report = reconciler(&app, ReconcileTimes::immediately())
            .drain()
            .await
            .unwrap();
        assert_eq!(
            (
                report.checked,
                report.fulfilled,
                report.refunds_queued,
                report.failed
            ),
            (1, 1, 0, 0),
            "{via:?}: {report:?}"
        );
        assert_eq!(app.order_state(&started.token).await, "paid", "{via:?}");
        let charge = ledger(&app, via).charges[0].payment_intent.clone();
        let (payment_ref, codes): (String, i64) = sqlx::query_as(
            "select o.payment_ref, (select count(*) from order_items c where c.order_id = o.id) \
               from orders o where o.token = $1",
        )
        .bind(&started.token)
        .fetch_one(&app.db.pool)
        .await
        .unwrap();
        assert_eq!((payment_ref, codes), (charge, 3), "{via:?}");
        assert_eq!(
            held_and_sold(&app.db, "harbour-lights-vip").await,
            (0, 3),
            "{via:?}"
        );

        // asking again changes nothing
        let again = reconciler(&app, ReconcileTimes::immediately())
            .drain()
            .await
            .unwrap();
        assert_eq!(
            again.fulfilled + again.refunds_queued,
            0,
            "{via:?}: {again:?}"
        );
        outbox(&app).await;
        assert!(ledger(&app, via).refunds.is_empty(), "{via:?}");
        assert_no_drift(&app.db.inventory()).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn an_expired_stripe_page_whose_webhook_was_lost_gives_its_units_back() {
    let app = spawn_app().await;
    app.db.load_demo().await;
    let started = app
        .start(&browser(), &Purchase::of("harbour-lights-vip", 3))
        .await;
    app.set_delivery(&started, DeliveryMode::Never).await;
    let session = started.page_id.clone();
    app.sandbox
        .stripe_provider()
        .close_page(&session)
        .await
        .unwrap();
    assert_eq!(app.order_state(&started.token).await, "pending");

    let report = reconciler(&app, ReconcileTimes::immediately())
        .drain()
        .await
        .unwrap();
    assert_eq!(
        (
            report.checked,
            report.released,
            report.finished,
            report.fulfilled
        ),
        (1, 1, 1, 0),
        "{report:?}"
    );
    assert_eq!(app.order_state(&started.token).await, "expired");
    assert_eq!(held_and_sold(&app.db, "harbour-lights-vip").await, (0, 0));
    let reconciled: Option<chrono::DateTime<chrono::Utc>> =
        sqlx::query_scalar("select reconciled_at from orders where token = $1")
            .bind(&started.token)
            .fetch_one(&app.db.pool)
            .await
            .unwrap();
    assert!(reconciled.is_some(), "the check was final");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn late_money_on_a_closed_order_with_every_message_lost_is_refunded_once() {
    for via in BOTH {
        let app = spawn_app().await;
        app.db.load_demo().await;
        let shopper = browser();
        let started = app
            .start(&shopper, &Purchase::of("harbour-lights-vip", 2).with(via))
            .await;
        let cancelled = app.leave(&shopper, &started.cancel_url).await;
        assert_eq!(cancelled.status(), 200, "{via:?}");
        outbox(&app).await;
        // Stripe's page is closed; a Razorpay order cannot be, and its job
        // is done at once: none is left failing over it
        let (pending, closings): (i64, i64) = sqlx::query_as(
            "select count(*) filter (where state = 'pending'), \
                    count(*) filter (where kind = 'expire_session') from outbox_jobs",
        )
        .fetch_one(&app.db.pool)
        .await
        .unwrap();
        assert_eq!((pending, closings), (0, 1), "{via:?}");
        // closing Stripe's page sends checkout.session.expired; let it land
        // (a reconciler skips an order another path has locked)
        let expiry_events = match via {
            ProviderKind::Stripe => 1,
            ProviderKind::Razorpay => 0,
        };
        accepted(&app, via, expiry_events).await;
        app.pay(&shopper, &started, &unreported(late_payment(via)))
            .await;
        assert_eq!(
            app.order_state(&started.token).await,
            "cancelled",
            "{via:?}"
        );

        let report = reconciler(&app, ReconcileTimes::immediately())
            .drain()
            .await
            .unwrap();
        assert_eq!(
            (
                report.checked,
                report.refunds_queued,
                report.fulfilled,
                report.finished
            ),
            (1, 1, 0, 1),
            "{via:?}: {report:?}"
        );
        outbox(&app).await;
        app.wait_for_state(&started.token, "refunded").await;
        let ledger = ledger(&app, via);
        assert_eq!(ledger.charges.len(), 1, "{via:?}");
        assert_eq!(ledger.refunds_standing().count(), 1, "{via:?}");
        assert_eq!(
            ledger.refunds[0].payment_intent, ledger.charges[0].payment_intent,
            "{via:?}"
        );
        assert_eq!(
            held_and_sold(&app.db, "harbour-lights-vip").await,
            (0, 0),
            "{via:?}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn four_reconcilers_racing_over_forty_lost_payments_fulfil_each_exactly_once() {
    let app = spawn_app().await;
    app.db.load_demo().await;
    let mut tokens = Vec::new();
    for i in 0..40 {
        let via = BOTH[i % 2];
        let purchase = Purchase::of("harbour-lights-general", 1)
            .with(via)
            .paying(unreported("pay"));
        tokens.push(app.buy(&browser(), &purchase).await.started.token);
    }
    let racers: Vec<_> = (0..4)
        .map(|_| {
            let reconciler = reconciler(&app, ReconcileTimes::immediately());
            tokio::spawn(async move { reconciler.drain().await.unwrap() })
        })
        .collect();
    let mut fulfilled = 0;
    let mut checked = 0;
    for racer in racers {
        let report = racer.await.unwrap();
        fulfilled += report.fulfilled;
        checked += report.checked;
        assert_eq!(report.failed + report.refunds_queued, 0, "{report:?}");
    }
    assert_eq!((checked, fulfilled), (40, 40));
    let (paid, confirmed, sold): (i64, i64, i32) = sqlx::query_as(
        "select (select count(*) from orders where state = 'paid'), \
                (select count(*) from hold_events where kind = 'confirmed'), \
                (select sold from resources where id = 'harbour-lights-general')",
    )
    .fetch_one(&app.db.pool)
    .await
    .unwrap();
    assert_eq!((paid, confirmed, sold), (40, 40, 40));
    let charges =
        app.sandbox.stripe.ledger().charges.len() + app.sandbox.razorpay.ledger().charges.len();
    assert_eq!(charges, 40);
    assert_no_drift(&app.db.inventory()).await;
}
