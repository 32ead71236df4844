//! Money that takes days (docs/design.md, "Money that takes days"), over
//! HTTP against the sandbox playing Stripe's SEPA Direct Debit and
//! Razorpay's late authorisations, with the database's clock moved
//! (`holdfast_testkit::clock::pass`) rather than slept: a debit settled in
//! time, in the grace delay, late with its units free (sold), late after a
//! sell-out (refunded in full), and failed (its units handed to the waiting
//! list in the transaction that released them); settling holds counted as
//! held and never offered to the line; Razorpay's bank answering late; and
//! what the shopper and staff see, the webhook and the API.

use chrono::{DateTime, Utc};
use holdfast::checkout::{self, Fulfilment, Source};
use holdfast::limits::client::Fairness;
use holdfast::limits::{Limits, TrustedProxies};
use holdfast::payments::http::TrustedRoots;
use holdfast::payments::stripe::StripeSettings;
use holdfast::payments::{ProviderKind, ProviderSettings, Providers};
use holdfast::worker::Sweeper;
use holdfast_testkit::clock::pass;
use holdfast_testkit::engine::{assert_no_drift, held_and_sold};
use holdfast_testkit::*;
use std::time::Duration;
use uuid::Uuid;

use super::waitlist::{line_up, states};

const HONEY: &str = "wild-honey";
const HOUR: Duration = Duration::from_secs(3600);
const DAY: Duration = Duration::from_secs(24 * 3600);

/// The shop as Stripe's default has it: the dashboard's methods, so a EUR
/// session offers SEPA Direct Debit (and Razorpay beside it).
pub(crate) async fn debit_shop() -> TestApp {
    debit_shop_limited(None).await
}

/// The debit shop, with these fair-sale limits if any (else the test
/// shop's).
async fn debit_shop_limited(limits: Option<Limits>) -> TestApp {
    let app = spawn_app_shaped(TestDb::new().await, |sandbox, shop| {
        if let Some(limits) = limits {
            shop.fairness = Fairness::new(shop.pool.clone(), limits, TrustedProxies::default());
        }
        shop.payments = Providers::build(&ProviderSettings {
            stripe: Some(StripeSettings {
                payment_methods: StripeSettings::DYNAMIC,
                ..sandbox.stripe_settings()
            }),
            razorpay: Some(sandbox.razorpay_settings()),
            roots: TrustedRoots::mozilla(),
        })
        .unwrap();
    })
    .await;
    app.load_demo().await;
    app
}

/// The honey's resource, with `total` jars.
async fn honey_total(app: &TestApp, total: i32) -> String {
    let resource: String = sqlx::query_scalar("select resource_id from products where id = $1")
        .bind(HONEY)
        .fetch_one(&app.db.pool)
        .await
        .unwrap();
    sqlx::query("select hf_upsert_resource($1, $2)")
        .bind(&resource)
        .bind(total)
        .execute(&app.db.pool)
        .await
        .unwrap();
    app.settled().await;
    resource
}

/// A shopper pays for a jar by SEPA Direct Debit on Stripe's page and comes
/// back; the shop hears it (webhook and return) and the order settles.
pub(crate) async fn pay_by_debit(app: &TestApp, email: &str) -> Started {
    let purchase = Purchase::of(HONEY, 1)
        .with(ProviderKind::Stripe)
        .by("Debbie Debit", email)
        .paying(Payment::press("pay-delayed"));
    let paid = app.buy(&browser(), &purchase).await;
    app.wait_for_state(&paid.started.token, "settling").await;
    // the completed event too, so nothing is under way when time passes
    wait_for_event(|| app.sandbox.stripe.ledger(), "checkout.session.completed").await;
    paid.started
}

/// The worker's passes once time has passed: the sweeper, then the orders
/// whose holds all ended. How many holds the sweeper expired.
async fn worker_passes(app: &TestApp) -> i64 {
    let swept = Sweeper::new(app.db.inventory(), "sweeper:settling")
        .run_once()
        .await
        .unwrap();
    checkout::expire_abandoned_orders(&app.db.pool)
        .await
        .unwrap();
    swept.iter().map(|c| i64::from(c.expired_holds)).sum()
}

#[derive(Debug, sqlx::FromRow)]
struct Settling {
    settle_method: Option<String>,
    settling_until: Option<DateTime<Utc>>,
    late_money: Option<String>,
    hold_id: Uuid,
}

async fn settling(app: &TestApp, token: &str) -> Settling {
    sqlx::query_as(
        "select settle_method, settling_until, late_money, hold_id from orders \
          where token = $1",
    )
    .bind(token)
    .fetch_one(&app.db.pool)
    .await
    .unwrap()
}

/// Time passes until `after` past the order's settling deadline (negative
/// spans are not needed: the tests only move forward).
async fn pass_deadline_by(app: &TestApp, token: &str, after: Duration) {
    let until = settling(app, token).await.settling_until.expect("settling");
    let to_deadline = (until - Utc::now()).to_std().unwrap_or_default();
    pass(&app.db.pool, to_deadline + after).await;
}

/// The bank answers a debit; the shop takes the event in.
async fn bank_answers(app: &TestApp, started: &Started, paid: bool) {
    app.sandbox
        .stripe
        .settle_delayed(&started.page_id, paid)
        .unwrap();
    let event = if paid {
        "checkout.session.async_payment_succeeded"
    } else {
        "checkout.session.async_payment_failed"
    };
    wait_for_event(|| app.sandbox.stripe.ledger(), event).await;
}

/// Branch 1, and what settling looks like: the units are held for the
/// shopper until the method's deadline (SEPA: 14 business days), counted as
/// held, shown on the order page and in a mail, sent to the shop's
/// webhooks and the API; three days later the bank pays and the order is
/// paid.
#[tokio::test]
async fn a_debit_settled_in_time_is_paid() {
    let app = debit_shop().await;
    webhook_endpoint(&app, &["order.settling", "order.paid"]).await;
    let resource = honey_total(&app, 10).await;
    let started = pay_by_debit(&app, "in-time@example.com").await;

    let order = settling(&app, &started.token).await;
    assert_eq!(order.settle_method.as_deref(), Some("stripe:sepa_debit"));
    let until = order.settling_until.unwrap();
    // 14 business days: 18 to 20 calendar days, by the weekday it started
    let days = (until - Utc::now()).num_hours() as f64 / 24.0;
    assert!((17.9..=20.1).contains(&days), "{days} days");
    // the engine's holds: paying, their deadline the method's plus a day
    let (deadline, settle_deadline, method): (DateTime<Utc>, DateTime<Utc>, String) =
        sqlx::query_as(
            "select payment_deadline, settle_deadline, settle_method from holds \
              where purchase_id = $1",
        )
        .bind(order.hold_id)
        .fetch_one(&app.db.pool)
        .await
        .unwrap();
    assert_eq!(settle_deadline, until);
    assert_eq!(deadline - settle_deadline, chrono::Duration::days(1));
    assert_eq!(method, "stripe:sepa_debit");
    // counted as held everywhere: the counters, the drift check, metrics
    assert_eq!(held_and_sold(&app.db, &resource).await, (1, 0));
    assert_no_drift(&app.db.inventory()).await;
    let metrics = app
        .client
        .get(format!("{}/metrics", app.address))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(
        metrics.contains(&format!(
            "holdfast_holds_settling{{resource=\"{resource}\",measure=\"units\"}} 1"
        )),
        "{metrics}"
    );
    assert!(metrics.contains("holdfast_orders{state=\"settling\"} 1"));

    // the shopper reads it, on the page and in a mail
    let page = read_page(
        &browser(),
        &format!("{}/orders/{}", app.address, started.token),
    )
    .await;
    assert!(page.contains("Your payment is being processed"), "{page}");
    assert!(page.contains("SEPA Direct Debit"), "{page}");
    assert!(page.contains("reserved for you until"), "{page}");
    let mailer = holdfast::worker::mail::Mailer::new(
        &app.sandbox.smtp(),
        "Holdfast shop <shop@holdfast.test>",
        holdfast::clock::ShopZone::UTC,
        &app.address,
    )
    .unwrap();
    holdfast::worker::outbox::Outbox::new(app.db.pool.clone(), app.sandbox.providers())
        .with_mailer(Some(mailer))
        .drain()
        .await
        .unwrap();
    let mail = app
        .sandbox
        .mail
        .messages()
        .into_iter()
        .find(|m| m.subject().contains("is being processed"))
        .expect("the settling mail");
    let text = String::from_utf8_lossy(&mail.raw).to_string();
    assert!(text.contains("reserved for you until"), "{text}");
    assert!(text.contains("SEPA Direct Debit"), "{text}");
    // the shop's other systems: the webhook and the API say settling
    let sent: serde_json::Value = sqlx::query_scalar(
        "select payload from webhook_messages where event_type = 'order.settling'",
    )
    .fetch_one(&app.db.pool)
    .await
    .unwrap();
    assert_eq!(sent["data"]["order"]["state"], "settling");
    assert_eq!(
        sent["data"]["order"]["settling"]["method"],
        "stripe:sepa_debit"
    );
    let api = holdfast::outgoing::views::order_by_token(&app.db.pool, &started.token)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(api["state"], "settling");
    assert!(api["settling"]["until"].is_string(), "{api}");

    // three days later the bank pays
    pass(&app.db.pool, 3 * DAY).await;
    assert_eq!(worker_passes(&app).await, 0);
    bank_answers(&app, &started, true).await;
    app.wait_for_state(&started.token, "paid").await;
    assert_eq!(held_and_sold(&app.db, &resource).await, (0, 1));
    assert_eq!(settling(&app, &started.token).await.late_money, None);
    let paid: i64 =
        sqlx::query_scalar("select count(*) from webhook_messages where event_type = 'order.paid'")
            .fetch_one(&app.db.pool)
            .await
            .unwrap();
    assert_eq!(paid, 1);
    assert_no_drift(&app.db.inventory()).await;
}

/// Branch 2: past the deadline, inside the grace delay, the sweeper leaves
/// the units alone, and money that comes then is in time.
#[tokio::test]
async fn a_debit_settled_in_the_grace_delay_is_paid() {
    let app = debit_shop().await;
    let resource = honey_total(&app, 10).await;
    let started = pay_by_debit(&app, "grace@example.com").await;
    pass_deadline_by(&app, &started.token, 12 * HOUR).await;
    assert_eq!(
        worker_passes(&app).await,
        0,
        "nothing expires in the grace delay"
    );
    assert_eq!(app.order_state(&started.token).await, "settling");
    assert_eq!(held_and_sold(&app.db, &resource).await, (1, 0));
    // the sweeper cannot have been wrong: a settling row whose payment
    // deadline comes before its deadline plus grace does not exist
    let refused = sqlx::query(
        "update holds set payment_deadline = settle_deadline where settle_deadline is not null",
    )
    .execute(&app.db.pool)
    .await
    .unwrap_err();
    assert!(
        refused.to_string().contains("settling_covers_grace"),
        "{refused}"
    );
    bank_answers(&app, &started, true).await;
    app.wait_for_state(&started.token, "paid").await;
    assert_eq!(held_and_sold(&app.db, &resource).await, (0, 1));
    assert_eq!(settling(&app, &started.token).await.late_money, None);
    assert_no_drift(&app.db.inventory()).await;
}

/// Branch 3: past the deadline and the grace delay the sweeper expires the
/// holds and the units go back on sale; money that comes later still, with
/// the same units free, claims them again in one step: paid, not refunded.
#[tokio::test]
async fn a_debit_settled_late_with_its_units_free_is_sold() {
    let app = debit_shop().await;
    webhook_endpoint(&app, &["order.paid", "order.expired"]).await;
    let resource = honey_total(&app, 10).await;
    let started = pay_by_debit(&app, "late-free@example.com").await;
    let ended = settling(&app, &started.token).await.hold_id;
    pass_deadline_by(&app, &started.token, DAY + HOUR).await;
    assert_eq!(worker_passes(&app).await, 1);
    assert_eq!(app.order_state(&started.token).await, "expired");
    assert_eq!(held_and_sold(&app.db, &resource).await, (0, 0));

    bank_answers(&app, &started, true).await;
    app.wait_for_state(&started.token, "paid").await;
    let order = settling(&app, &started.token).await;
    assert_eq!(order.late_money.as_deref(), Some("claimed_again"));
    assert_ne!(
        order.hold_id, ended,
        "a new purchase, the ended one left ended"
    );
    let states: Vec<(String, Option<Uuid>)> = sqlx::query_as(
        "select state, reclaims from holds where purchase_id in ($1, $2) order by created_at",
    )
    .bind(ended)
    .bind(order.hold_id)
    .fetch_all(&app.db.pool)
    .await
    .unwrap();
    assert_eq!(states.len(), 2, "{states:?}");
    assert_eq!(states[0], ("expired".to_owned(), None));
    assert_eq!(states[1], ("confirmed".to_owned(), Some(ended)));
    assert_eq!(held_and_sold(&app.db, &resource).await, (0, 1));
    // no refund: the payment bought the jar
    let refunds: i64 = sqlx::query_scalar("select count(*) from outbox_jobs where kind = 'refund'")
        .fetch_one(&app.db.pool)
        .await
        .unwrap();
    assert_eq!(refunds, 0);
    let events: Vec<String> =
        sqlx::query_scalar("select event_type from webhook_messages order by created_at")
            .fetch_all(&app.db.pool)
            .await
            .unwrap();
    assert_eq!(events, ["order.expired", "order.paid"]);
    assert_no_drift(&app.db.inventory()).await;
}

/// Branch 4: the units went back on sale and were sold to someone else;
/// money that comes later cannot claim them and goes back in full.
#[tokio::test]
async fn a_debit_settled_late_after_a_sell_out_is_refunded_in_full() {
    let app = debit_shop().await;
    let resource = honey_total(&app, 1).await;
    let started = pay_by_debit(&app, "late-sold@example.com").await;
    pass_deadline_by(&app, &started.token, DAY + HOUR).await;
    assert_eq!(worker_passes(&app).await, 1);
    app.settled().await;
    // the jar is back on sale, and a card buys it
    let other = app
        .buy(
            &browser(),
            &Purchase::of(HONEY, 1)
                .with(ProviderKind::Stripe)
                .by("Carla Card", "card@example.com"),
        )
        .await;
    app.wait_for_state(&other.started.token, "paid").await;
    assert_eq!(held_and_sold(&app.db, &resource).await, (0, 1));

    bank_answers(&app, &started, true).await;
    app.wait_for_state(&started.token, "refund_pending").await;
    assert_eq!(
        settling(&app, &started.token).await.late_money.as_deref(),
        Some("refunded")
    );
    let reason: String = sqlx::query_scalar(
        "select payload->>'reason' from outbox_jobs where kind = 'refund' \
          and payload->>'order_id' = $1::text",
    )
    .bind(started.order_id)
    .fetch_one(&app.db.pool)
    .await
    .unwrap();
    assert_eq!(reason, "sold_out_after_expiry");
    app.refunded_by_the_outbox(&started.token).await;
    // in full: the debit's whole amount, once
    let ledger = app.sandbox.stripe.ledger();
    let charge = ledger
        .charges
        .iter()
        .find(|c| c.session_id == started.page_id)
        .unwrap();
    let back: Vec<i64> = ledger
        .refunds_standing()
        .filter(|r| r.payment_intent == charge.payment_intent)
        .map(|r| r.amount)
        .collect();
    assert_eq!(back, [charge.amount]);
    assert_eq!(held_and_sold(&app.db, &resource).await, (0, 1), "sold once");
    assert_no_drift(&app.db.inventory()).await;
}

/// Branch 5: the bank refuses the debit. Its units are released at once,
/// and the waiting list (which was not offered them while the bank was
/// paying) gets them in the transaction that released them.
#[tokio::test]
async fn a_failed_debit_releases_its_units_to_the_waiting_list_at_once() {
    let app = debit_shop().await;
    let resource = honey_total(&app, 1).await;
    let started = pay_by_debit(&app, "refused@example.com").await;
    let debit = settling(&app, &started.token).await.hold_id;
    let entries = line_up(&app.db, &[1]).await;
    // units being paid for are not offered, however long the bank takes
    pass(&app.db.pool, 5 * DAY).await;
    assert_eq!(worker_passes(&app).await, 0);
    assert_eq!(states(&app.db, &entries).await, ["waiting"]);
    assert_eq!(held_and_sold(&app.db, &resource).await, (1, 0));

    bank_answers(&app, &started, false).await;
    app.wait_for_state(&started.token, "cancelled").await;
    assert_eq!(states(&app.db, &entries).await, ["offered"]);
    // one transaction: the release and the offer share its moment
    let (ended_at, reason): (DateTime<Utc>, String) =
        sqlx::query_as("select ended_at, end_reason from holds where purchase_id = $1")
            .bind(debit)
            .fetch_one(&app.db.pool)
            .await
            .unwrap();
    let offered_at: DateTime<Utc> =
        sqlx::query_scalar("select offered_at from waitlist_entries where id = $1")
            .bind(entries[0])
            .fetch_one(&app.db.pool)
            .await
            .unwrap();
    assert_eq!(reason, "checkout.session.async_payment_failed");
    assert_eq!(offered_at, ended_at);
    assert_eq!(
        held_and_sold(&app.db, &resource).await,
        (1, 0),
        "held for the entry"
    );
    assert_no_drift(&app.db.inventory()).await;
}

/// An outgoing webhook endpoint for `events` (its secret is never used:
/// these tests read what was queued, not deliveries).
async fn webhook_endpoint(app: &TestApp, events: &[&str]) {
    sqlx::query(
        "insert into webhook_endpoints (id, url, events, secret_sealed, created_by) \
         values ('ep_settlingsettlingsettling', 'https://receiver.test/hooks', $1, \
                 decode(repeat('00', 60), 'hex'), 'test')",
    )
    .bind(events)
    .execute(&app.db.pool)
    .await
    .unwrap();
}

/// Razorpay: the bank does not answer in time; the failure callback names
/// the payment, the shop asks Razorpay, which says it may still be
/// authorised late, and the order settles for Razorpay's polling days. Two
/// days later the bank authorises it: the shop captures it and sells.
#[tokio::test]
async fn a_razorpay_payment_its_bank_authorises_late_settles_then_sells() {
    let app = debit_shop().await;
    let resource = honey_total(&app, 10).await;
    let shopper = browser();
    let started = app
        .start(
            &shopper,
            &Purchase::of(HONEY, 1).with(ProviderKind::Razorpay),
        )
        .await;
    let page = read_page(&shopper, &started.pay_url).await;
    let (base, _) = started.pay_url.split_once('?').unwrap();
    let answer = shopper
        .post(format!("{base}/bank-silent"))
        .form(&[
            ("callback_url", field(&page, "callback_url")),
            ("cancel_url", field(&page, "cancel_url")),
        ])
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    let errors: Vec<(&str, String)> = [
        "error[code]",
        "error[description]",
        "error[source]",
        "error[step]",
        "error[reason]",
        "error[metadata]",
    ]
    .into_iter()
    .map(|name| (name, field(&answer, name).replace("&quot;", "\"")))
    .collect();
    assert_eq!(errors[4].1, "payment_timed_out");
    let back = shopper
        .post(format!("{}/checkout/return/{}", app.address, started.token))
        .form(&errors)
        .send()
        .await
        .unwrap();
    assert!(back.status().is_redirection(), "{}", back.status());
    app.wait_for_state(&started.token, "settling").await;
    let order = settling(&app, &started.token).await;
    assert_eq!(order.settle_method.as_deref(), Some("razorpay:netbanking"));
    let days = (order.settling_until.unwrap() - Utc::now()).num_hours() as f64 / 24.0;
    assert!((4.9..=5.1).contains(&days), "{days} days");
    assert_eq!(held_and_sold(&app.db, &resource).await, (1, 0));

    // two days later (at Razorpay too) the bank answers
    pass(&app.db.pool, 2 * DAY).await;
    app.sandbox.razorpay.days_pass(2);
    assert_eq!(worker_passes(&app).await, 0);
    let metadata: serde_json::Value = serde_json::from_str(&errors[5].1).unwrap();
    app.sandbox
        .razorpay
        .authorize_late(metadata["payment_id"].as_str().unwrap())
        .unwrap();
    wait_for_event(|| app.sandbox.razorpay.ledger(), "payment.authorized").await;
    // the webhook queued the capture; the worker captures and sells
    app.outbox().await;
    app.wait_for_state(&started.token, "paid").await;
    assert_eq!(held_and_sold(&app.db, &resource).await, (0, 1));
    assert_no_drift(&app.db.inventory()).await;
}

/// The database refuses a settling window not longer than the payment
/// phase, from either side, and grace below zero; what it refuses changes
/// nothing.
#[tokio::test]
async fn a_settling_window_shorter_than_the_payment_phase_is_refused() {
    let db = TestDb::new().await;
    let inventory = db.inventory();
    let current = inventory.settings().await.unwrap();
    assert_eq!(current.settle_grace_seconds, 86_400.0);
    let windows = inventory.settle_windows().await.unwrap();
    assert!(
        windows.iter().any(|w| (
            w.provider.as_str(),
            w.method.as_str(),
            w.days,
            w.business_days
        ) == ("stripe", "sepa_debit", 14, true)),
        "{windows:?}"
    );
    let before = snapshot(&db.pool).await;
    // a payment window as long as the shortest settling window (3 days)
    let long = holdfast::inventory::InventorySettings {
        payment_window_seconds: 3.0 * 86_400.0,
        ..current.clone()
    };
    let refused = inventory.configure(&long).await.unwrap_err();
    assert!(
        refused
            .to_string()
            .contains("settle_window_exceeds_payment_window"),
        "{refused}"
    );
    let negative = holdfast::inventory::InventorySettings {
        settle_grace_seconds: -1.0,
        ..current.clone()
    };
    assert!(inventory.configure(&negative).await.is_err());
    // a window of a day, with a payment window of a day and a half
    let day_and_a_half = holdfast::inventory::InventorySettings {
        payment_window_seconds: 1.5 * 86_400.0,
        ..current.clone()
    };
    let window = holdfast::inventory::SettleWindow {
        provider: "stripe".into(),
        method: "sepa_debit".into(),
        days: 1,
        business_days: false,
        source: "a test".into(),
    };
    let refused = inventory
        .configure_with_windows(&day_and_a_half, std::slice::from_ref(&window))
        .await
        .unwrap_err();
    assert!(
        refused
            .to_string()
            .contains("settle_window_exceeds_payment_window"),
        "{refused}"
    );
    assert_eq!(snapshot(&db.pool).await, before, "nothing changed");
    assert_eq!(inventory.settings().await.unwrap(), current);
    // a longer one is taken
    let fifteen = holdfast::inventory::SettleWindow {
        days: 15,
        business_days: true,
        ..window
    };
    inventory
        .configure_with_windows(&current, std::slice::from_ref(&fifteen))
        .await
        .unwrap();
    assert!(inventory.settle_windows().await.unwrap().contains(&fifteen));
}

/// Sixty debits ran out; the jars went back on sale and forty-five were
/// sold by card. The sixty banks then pay at once, from the webhook, the
/// return and reconciliation: exactly fifteen claim a jar again, the other
/// forty-five are refunded, nothing is sold twice and the counters agree.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn sixty_late_payments_for_fifteen_free_jars_claim_exactly_fifteen() {
    use holdfast_testkit::engine::{paid, report, started};
    let db = TestDb::with_connections(40).await;
    db.load_demo().await;
    let resource: String = sqlx::query_scalar("select resource_id from products where id = $1")
        .bind(HONEY)
        .fetch_one(&db.pool)
        .await
        .unwrap();
    sqlx::query("select hf_upsert_resource($1, 60)")
        .bind(&resource)
        .execute(&db.pool)
        .await
        .unwrap();
    let mut late = Vec::new();
    for i in 0..60 {
        late.push(started(&db, &format!("late-{i}"), &[(HONEY, 1)]).await);
    }
    // their time runs out
    pass(&db.pool, DAY).await;
    Sweeper::new(db.inventory(), "sweeper:test")
        .run_once()
        .await
        .unwrap();
    for i in 0..45 {
        paid(&db, &format!("card-{i}"), &[(HONEY, 1)]).await;
    }
    let sources = [Source::Webhook, Source::Return, Source::Reconciliation];
    let mut reports = Vec::new();
    for (i, order) in late.iter().enumerate() {
        reports.push(report(&db, order.id, &format!("pi_late_{i}"), sources[i % 3]).await);
    }
    let outcomes = futures::future::join_all(reports.iter().map(|report| {
        let pool = db.pool.clone();
        async move { checkout::confirm_payment(&pool, report).await.unwrap() }
    }))
    .await;
    let sold = outcomes
        .iter()
        .filter(|f| matches!(f, Fulfilment::Fulfilled { .. }))
        .count();
    let refunded = outcomes
        .iter()
        .filter(|f| matches!(f, Fulfilment::RefundQueued { reason, .. } if reason == "sold_out_after_expiry"))
        .count();
    assert_eq!((sold, refunded), (15, 45), "{outcomes:?}");
    assert_eq!(held_and_sold(&db, &resource).await, (0, 60));
    let verdicts: Vec<(String, i64)> = sqlx::query_as(
        "select late_money, count(*) from orders where late_money is not null \
          group by late_money order by late_money",
    )
    .fetch_all(&db.pool)
    .await
    .unwrap();
    assert_eq!(
        verdicts,
        [
            ("claimed_again".to_owned(), 15),
            ("refunded".to_owned(), 45)
        ]
    );
    // the same payments again, from every path at once: nothing changes
    let again = futures::future::join_all(reports.iter().map(|report| {
        let pool = db.pool.clone();
        async move { checkout::confirm_payment(&pool, report).await.unwrap() }
    }))
    .await;
    assert!(
        again.iter().all(|f| matches!(
            f,
            Fulfilment::AlreadyFulfilled { .. } | Fulfilment::RefundQueued { .. }
        )),
        "{again:?}"
    );
    assert_eq!(held_and_sold(&db, &resource).await, (0, 60));
    assert_no_drift(&db.inventory()).await;
}

/// Late money never jumps the waiting list: with people in line for the
/// jars, a late payment is refunded even though jars are free.
#[tokio::test]
async fn late_money_never_takes_units_the_waiting_list_waits_for() {
    use holdfast_testkit::engine::{report, started};
    let db = TestDb::new().await;
    db.load_demo().await;
    let resource: String = sqlx::query_scalar("select resource_id from products where id = $1")
        .bind(HONEY)
        .fetch_one(&db.pool)
        .await
        .unwrap();
    sqlx::query("select hf_upsert_resource($1, 1)")
        .bind(&resource)
        .execute(&db.pool)
        .await
        .unwrap();
    let lapsed = started(&db, "lapsed", &[(HONEY, 1)]).await;
    // two people wait for a jar (one would be served by the one jar)
    let entries = line_up(&db, &[1, 1]).await;
    pass(&db.pool, DAY).await;
    Sweeper::new(db.inventory(), "sweeper:test")
        .run_once()
        .await
        .unwrap();
    assert_eq!(states(&db, &entries).await, ["offered", "waiting"]);
    let late = checkout::confirm_payment(
        &db.pool,
        &report(&db, lapsed.id, "pi_late", Source::Webhook).await,
    )
    .await
    .unwrap();
    assert!(
        matches!(&late, Fulfilment::RefundQueued { reason, .. } if reason == "line_waiting"),
        "{late:?}"
    );
    assert_eq!(states(&db, &entries).await, ["offered", "waiting"]);
    assert_no_drift(&db.inventory()).await;
}

/// Staff see a settling order with its method and deadline, and release it
/// by hand from its page: the units go back (the order is cancelled), and
/// the money, when the bank pays after all, is refunded, never sold.
#[tokio::test]
async fn staff_release_a_settling_order_by_hand_and_its_money_is_refunded() {
    let app = debit_shop().await;
    app.add_staff().await;
    let resource = honey_total(&app, 10).await;
    let started = pay_by_debit(&app, "released@example.com").await;
    let (staff, csrf) = app.staff_browser().await;
    let list = app.admin_page(&staff, "/admin/orders?state=settling").await;
    assert!(list.contains("SEPA Direct Debit, held until"), "{list}");
    let page = app
        .admin_page(&staff, &format!("/admin/orders/{}", started.order_id))
        .await;
    assert!(page.contains("id=\"settling\""), "{page}");
    let hold = settling(&app, &started.token).await.hold_id;
    let released = app
        .admin_post(
            &staff,
            &format!("/admin/holds/{hold}/release"),
            &[("csrf", csrf.as_str())],
        )
        .await;
    assert_eq!(released.status(), 303);
    assert_eq!(app.order_state(&started.token).await, "cancelled");
    assert_eq!(held_and_sold(&app.db, &resource).await, (0, 0));

    bank_answers(&app, &started, true).await;
    app.wait_for_state(&started.token, "refund_pending").await;
    let reason: String = sqlx::query_scalar(
        "select payload->>'reason' from outbox_jobs where kind = 'refund' \
          and payload->>'order_id' = $1::text",
    )
    .bind(started.order_id)
    .fetch_one(&app.db.pool)
    .await
    .unwrap();
    assert_eq!(reason, "hold_released");
    assert_eq!(
        held_and_sold(&app.db, &resource).await,
        (0, 0),
        "nothing sold"
    );
    let page = app
        .admin_page(&staff, &format!("/admin/orders/{}", started.order_id))
        .await;
    assert!(page.contains("late money: refunded"), "{page}");
    app.refunded_by_the_outbox(&started.token).await;
    assert_no_drift(&app.db.inventory()).await;
}

/// Nobody tells the shop of the debit (webhooks lost, the tab closed):
/// reconciliation finds it and moves the order into the settling phase,
/// then asks again on a backoff of hours, not minutes. A check that keeps
/// failing is not given up before the deadline plus grace; a debit whose
/// failure event was lost is found failed through its PaymentIntent and its
/// units are freed then.
#[tokio::test]
async fn reconciliation_follows_a_debit_over_days() {
    use holdfast::configuration::ReconcileTimes;
    use holdfast::worker::reconcile::Reconciler;
    let app = debit_shop().await;
    let resource = honey_total(&app, 10).await;
    let shopper = browser();
    let started = app
        .start(&shopper, &Purchase::of(HONEY, 1).with(ProviderKind::Stripe))
        .await;
    app.pay(
        &shopper,
        &started,
        &Payment::press("pay-delayed").reported(Report::Neither),
    )
    .await;
    assert_eq!(app.order_state(&started.token).await, "pending");
    let reconciler = Reconciler::new(app.db.pool.clone(), app.sandbox.providers())
        .with_times(ReconcileTimes::immediately());
    let report = reconciler.run_once(10).await.unwrap();
    assert_eq!((report.settling, report.finished), (1, 0), "{report:?}");
    assert_eq!(app.order_state(&started.token).await, "settling");
    let next = || async {
        sqlx::query_scalar::<_, f64>(
            "select extract(epoch from reconcile_after - now())::float8 from orders where id = $1",
        )
        .bind(started.order_id)
        .fetch_one(&app.db.pool)
        .await
        .unwrap()
    };
    let wait = next().await;
    assert!(
        (3500.0..=3700.0).contains(&wait),
        "an hour, not minutes: {wait}"
    );
    // checks that fail, over and over: never given up while it settles
    let dead = Reconciler::new(
        app.db.pool.clone(),
        Providers::build(&ProviderSettings {
            stripe: Some(StripeSettings {
                api_base: "http://127.0.0.1:9/stripe/".into(),
                ..app.sandbox.stripe_settings()
            }),
            razorpay: None,
            roots: TrustedRoots::mozilla(),
        })
        .unwrap(),
    )
    .with_times(ReconcileTimes::immediately());
    sqlx::query("update orders set reconcile_attempts = 100, reconcile_after = null where id = $1")
        .bind(started.order_id)
        .execute(&app.db.pool)
        .await
        .unwrap();
    let failed = dead.run_once(10).await.unwrap();
    assert_eq!((failed.failed, failed.finished), (1, 0), "{failed:?}");
    let wait = next().await;
    assert!((3500.0..=12.0 * 3600.0 + 100.0).contains(&wait), "{wait}");
    // the bank refuses; its event is lost, the PaymentIntent says so
    app.set_delivery(&started, holdfast_sandbox::DeliveryMode::Never)
        .await;
    app.sandbox
        .stripe
        .settle_delayed(&started.page_id, false)
        .unwrap();
    pass(&app.db.pool, 13 * HOUR).await;
    assert_eq!(app.order_state(&started.token).await, "settling");
    let found = reconciler.run_once(10).await.unwrap();
    assert_eq!((found.released, found.finished), (1, 1), "{found:?}");
    assert_eq!(app.order_state(&started.token).await, "cancelled");
    assert_eq!(held_and_sold(&app.db, &resource).await, (0, 0));
    assert_no_drift(&app.db.inventory()).await;
}

/// A settling order's units count toward the fair-sale limits as any
/// paying order's do: while one jar's debit settles, the same e-mail may
/// take 9 more (its product's most per order is 10), not 10, by the
/// combined one-product path and by a basket of several products; another
/// e-mail may take 10.
#[tokio::test]
async fn a_settling_order_counts_toward_the_limit_per_buyer() {
    let app = debit_shop_limited(Some(Limits {
        address_rate: None,
        address_units: None,
        per_email: true,
    }))
    .await;
    let debbie = "debbie@example.com";
    pay_by_debit(&app, debbie).await;
    let over = |purchase: Purchase| {
        let app = &app;
        async move {
            match app
                .try_start(&browser(), &purchase.by("Debbie Debit", debbie))
                .await
            {
                Attempt::Refused(answer) => answer,
                other => panic!("expected a refusal, got {other:?}"),
            }
        }
    };
    let alone = over(Purchase::of(HONEY, 10)).await;
    assert_eq!(alone.status, 409, "{}", alone.body);
    assert!(alone.body.contains("at most 9 for you"), "{}", alone.body);
    let basket = over(Purchase::of(HONEY, 10).and("harbour-lights-general", 1)).await;
    assert_eq!(basket.status, 409, "{}", basket.body);
    // what is left for her, and all of it for someone else
    app.start(
        &browser(),
        &Purchase::of(HONEY, 9).by("Debbie Debit", debbie),
    )
    .await;
    app.start(
        &browser(),
        &Purchase::of(HONEY, 10).by("Ann Other", "ann@example.com"),
    )
    .await;
}
