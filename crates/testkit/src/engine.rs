//! The engine's side of a test: the hold engine's inputs (parsed as the
//! edge parses them) and its checks, payments reported straight to the
//! confirm routine, orders started and paid without the shop, and the
//! worker's outbox run to the end.

use holdfast::checkout::{
    self, AttachOutcome, CheckoutStart, Customer, Fulfilment, PaymentReport, Source, StartOutcome,
    WantedLine,
};
use holdfast::inventory::{
    AccountId, Capacity, HoldOutcome, HoldRequest, IdempotencyKey, Inventory, InventorySettings,
    Quantity, ResourceId, Span,
};
use holdfast::payments::{PaymentPage, ProviderKind};
use sqlx::PgPool;
use uuid::Uuid;

use crate::database::TestDb;

/// A resource id, as the edge parses it.
pub fn rid(id: &str) -> ResourceId {
    ResourceId::parse(id).expect("resource id")
}

/// An account id, as the edge parses it.
pub fn account(id: &str) -> AccountId {
    AccountId::parse(id).expect("account id")
}

/// A quantity, as the edge parses it.
pub fn qty(n: i64) -> Quantity {
    Quantity::parse(n).expect("qty")
}

/// A resource of `total` units (made, or its total set).
pub async fn resource(inventory: &Inventory, id: &str, total: i64) -> ResourceId {
    let id = rid(id);
    inventory
        .upsert_resource(&id, Capacity::parse(total).expect("total"))
        .await
        .expect("upsert resource");
    id
}

/// A plain hold of `n` units for account `who`: no key, the default TTL.
pub fn request(resource: &ResourceId, n: i64, who: &str) -> HoldRequest {
    HoldRequest {
        resource: resource.clone(),
        qty: qty(n),
        account: account(who),
        idempotency_key: None,
        ttl: None,
    }
}

/// Hold and insist it was granted.
pub async fn hold_ok(inventory: &Inventory, request: &HoldRequest) -> holdfast::inventory::Hold {
    match inventory.hold(request).await.expect("hold") {
        HoldOutcome::Held { hold, .. } => hold,
        other => panic!("expected a hold, got {other:?}"),
    }
}

/// A hold TTL of `seconds`.
pub fn ttl(seconds: f64) -> Span {
    Span::parse("ttl", std::time::Duration::from_secs_f64(seconds)).expect("ttl")
}

/// Short TTL and payment window, for tests that wait for expiry.
pub async fn fast_clock(inventory: &Inventory, ttl_seconds: f64, window_seconds: f64) {
    let current = inventory.settings().await.expect("settings");
    inventory
        .configure(&InventorySettings {
            hold_ttl_seconds: ttl_seconds,
            payment_window_seconds: window_seconds,
            ..current
        })
        .await
        .expect("configure");
}

/// Every resource's counters agree with its rows.
pub async fn assert_no_drift(inventory: &Inventory) {
    let rows = inventory.check(None).await.expect("check");
    let drifted: Vec<_> = rows.iter().filter(|r| r.drift).collect();
    assert!(drifted.is_empty(), "drift: {drifted:?}");
}

/// A resource's (held, sold) counters.
pub async fn held_and_sold(db: &TestDb, resource: &str) -> (i32, i32) {
    let status = db
        .inventory()
        .status(&rid(resource))
        .await
        .unwrap()
        .unwrap_or_else(|| panic!("no resource {resource}"));
    (status.held, status.sold)
}

/// A captured payment that is exactly what the order asks for: its
/// provider, its page, its amount and currency.
pub async fn payment_for(
    pool: &PgPool,
    order_id: Uuid,
    payment_ref: &str,
) -> holdfast::payments::ProviderPayment {
    let order = holdfast::checkout::order_by_id(pool, order_id)
        .await
        .unwrap()
        .unwrap_or_else(|| panic!("no order {order_id}"));
    holdfast::payments::ProviderPayment {
        provider: order.provider,
        payment_ref: payment_ref.to_owned(),
        page_id: order.provider_session_id.clone(),
        amount_minor: order.amount_minor,
        currency: order.currency.clone(),
        status: holdfast::payments::PaymentStatus::Captured,
        order_hint: Some(order.id),
        method: None,
    }
}

/// A release of an order's units, as a provider's expiry event asks for.
pub fn expired_by_provider() -> holdfast::checkout::Release<'static> {
    holdfast::checkout::Release::PageEnded {
        provider: holdfast::payments::ProviderKind::Stripe,
        event: "checkout.session.expired",
        end: holdfast::payments::PageEnd::Expired,
    }
}

/// The worker's outbox until nothing is due and no refund is still
/// pending at the provider (the sandbox finishes refunds a moment after
/// it accepts them, as banks do): each pass asks a pending refund again by
/// its id, and a refund that failed for any other reason (a connection the
/// sandbox closed as it was reused) is tried again at once rather than
/// after its backoff. Five seconds at most.
pub async fn drain_outbox(
    pool: &PgPool,
    payments: holdfast::payments::Providers,
) -> Vec<holdfast::worker::outbox::JobOutcome> {
    use holdfast::worker::outbox::{JobOutcome, Outbox};
    let outbox = Outbox::new(pool.clone(), payments);
    let mut all = Vec::new();
    for _ in 0..100 {
        let outcomes = outbox.drain().await.expect("outbox");
        let failed = outcomes
            .iter()
            .any(|o| matches!(o, JobOutcome::Failed { kind, .. } if kind == "refund"));
        all.extend(outcomes);
        // a pass that ran nothing is not the end: a refund event being
        // applied holds its job's row, and the worker skips locked jobs
        let pending: i64 = sqlx::query_scalar(
            "select count(*) from outbox_jobs where state = 'pending' and kind = 'refund'",
        )
        .fetch_one(pool)
        .await
        .unwrap();
        if !failed && pending == 0 {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
        // the backoff is over: ask again now
        sqlx::query(
            "update outbox_jobs set run_after = now() where state = 'pending' and kind = 'refund'",
        )
        .execute(pool)
        .await
        .unwrap();
    }
    all
}

// ---- orders without the shop: the checkout engine called directly ----

/// The checkout form `key` for `lines` (product, quantity), as the shop
/// hands it to the engine: Ada Shopper, paying with Stripe.
pub fn start(key: &str, lines: &[(&str, i64)]) -> CheckoutStart {
    CheckoutStart {
        checkout_key: IdempotencyKey::parse(key).unwrap(),
        // a new submit: its own token
        order_token: holdfast::checkout::codes::order_token(),
        voucher: None,
        account: account(&format!("basket-{key}")),
        lines: lines
            .iter()
            .map(|(id, n)| WantedLine::units((*id).to_owned(), qty(*n)))
            .collect(),
        customer: Customer::parse("Ada Shopper", "ada@example.com").unwrap(),
        provider: ProviderKind::Stripe,
        limits: Default::default(),
    }
}

/// A started order with a payment page of its own (its holds stay plain:
/// the page is only named, as if the provider had answered).
pub async fn started(db: &TestDb, key: &str, lines: &[(&str, i64)]) -> checkout::Order {
    let order = match checkout::start_checkout(&db.pool, &start(key, lines))
        .await
        .unwrap()
    {
        StartOutcome::Started { order, .. } => order,
        other => panic!("expected a started checkout, got {other:?}"),
    };
    sqlx::query("update orders set provider_session_id = $2 where id = $1")
        .bind(order.id)
        .bind(format!("cs_test_{key}"))
        .execute(&db.pool)
        .await
        .unwrap();
    checkout::order_by_id(&db.pool, order.id)
        .await
        .unwrap()
        .unwrap()
}

/// A captured payment for exactly what the order asks (for an order that
/// does not exist, a payment for nothing in particular).
pub async fn report(db: &TestDb, order_id: Uuid, payment: &str, source: Source) -> PaymentReport {
    let exists = checkout::order_by_id(&db.pool, order_id)
        .await
        .unwrap()
        .is_some();
    let payment = if exists {
        payment_for(&db.pool, order_id, payment).await
    } else {
        holdfast::payments::ProviderPayment {
            provider: ProviderKind::Stripe,
            payment_ref: payment.to_owned(),
            page_id: Some("cs_test_nobody".into()),
            amount_minor: 100,
            currency: "eur".into(),
            status: holdfast::payments::PaymentStatus::Captured,
            order_hint: None,
            method: None,
        }
    };
    PaymentReport {
        order_id,
        payment,
        source,
    }
}

/// A paid order for `lines`: started, on its payment page, paid by a
/// captured payment `pi_<key>` reported by the webhook.
pub async fn paid(db: &TestDb, key: &str, lines: &[(&str, i64)]) -> checkout::Order {
    let order = started(db, key, lines).await;
    let page = PaymentPage {
        id: format!("cs_test_{key}"),
        url: format!("http://sandbox/pay/cs_test_{key}"),
        expires_at: chrono::Utc::now() + chrono::Duration::minutes(30),
    };
    let AttachOutcome::Paying { .. } = checkout::attach_payment(&db.pool, order.id, &page)
        .await
        .unwrap()
    else {
        panic!("expected paying");
    };
    let fulfilled = checkout::confirm_payment(
        &db.pool,
        &report(db, order.id, &format!("pi_{key}"), Source::Webhook).await,
    )
    .await
    .unwrap();
    assert_eq!(fulfilled, Fulfilment::Fulfilled { order_id: order.id });
    checkout::order_by_id(&db.pool, order.id)
        .await
        .unwrap()
        .unwrap()
}
