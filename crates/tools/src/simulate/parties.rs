//! The other parties to a shopper's order: banks that answer a debit late
//! (or never) and finish the refunds the providers accepted, staff who
//! refund a paid order, and someone who pays on another page that names
//! the order, or pays too little on its own.

use std::time::Duration;

use anyhow::Context;

use holdfast::payments::ProviderKind as Provider;
use holdfast_sandbox::SandboxSettings;

use super::World;
use super::checkout::Started;

/// A debit's bank answers: Stripe's debit settles (or fails); Razorpay's
/// bank authorises the payment late (or never answers: nothing happens, and
/// nothing was taken).
pub(super) fn bank_answers(
    world: &World,
    provider: Provider,
    started: &Started,
    pays: bool,
) -> anyhow::Result<()> {
    match provider {
        Provider::Stripe => world
            .stripe_sandbox
            .settle_delayed(&started.reference, pays)
            .map_err(|e| anyhow::anyhow!("settle {}: {e}", started.reference)),
        Provider::Razorpay if pays => {
            for payment in world.razorpay_sandbox.order_payments(&started.reference) {
                // the one its bank did not answer for
                let _ = world.razorpay_sandbox.authorize_late(&payment);
            }
            Ok(())
        }
        Provider::Razorpay => Ok(()),
    }
}

/// The banks finish the refunds the providers accepted: all of them at
/// closing time, else all but those of pages whose refunds are slow.
pub(super) fn finish_refunds(world: &World, all: bool) {
    let slow = world
        .slow_refunds
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
        .clone();
    for (refund, page) in world.stripe_sandbox.pending_refunds() {
        if all || !slow.contains(&page) {
            let _ = world.stripe_sandbox.settle_refund(&refund, true);
        }
    }
    for (refund, page) in world.razorpay_sandbox.pending_refunds() {
        if all || !slow.contains(&page) {
            let _ = world.razorpay_sandbox.settle_refund(&refund, true);
        }
    }
}

/// Staff refund one unit of the shopper's order (or, with `rest`, all that
/// is left), through the same routine as the admin. An order not paid yet
/// (its money still on the way) is refused and left as it is.
pub(super) async fn staff_refund(
    world: &World,
    started: &Started,
    rest: bool,
) -> anyhow::Result<()> {
    use holdfast::staff::refunds::{RefundRequest, refund_order};
    let order: Option<(uuid::Uuid, String, i32)> = sqlx::query_as(
        "select o.id, l.product_id, l.qty - l.refunded_qty from orders o \
           join order_lines l on l.order_id = o.id \
          where o.provider_session_id = $1 order by l.product_id limit 1",
    )
    .bind(&started.reference)
    .fetch_optional(&world.pool)
    .await?;
    let Some((order_id, product, left)) = order else {
        return Ok(());
    };
    let units = if rest || left < 2 {
        Vec::new()
    } else {
        vec![(product, 1)]
    };
    let request = RefundRequest {
        order_id,
        units,
        reason: "simulated: the shopper cannot come".into(),
        restock: true,
        override_redeemed: false,
        by: "simulate".into(),
        staff: None,
        key: Some(format!(
            "sim-{order_id}-{}",
            if rest { "rest" } else { "one" }
        )),
    };
    refund_order(&world.pool, &request)
        .await
        .map_err(|error| anyhow::anyhow!("staff refund: {error}"))?;
    Ok(())
}

/// The order a page belongs to.
async fn order_of(world: &World, page_id: &str) -> anyhow::Result<uuid::Uuid> {
    Ok(
        sqlx::query_scalar("select id from orders where provider_session_id = $1")
            .bind(page_id)
            .fetch_one(&world.pool)
            .await?,
    )
}

/// Someone pays 1.00 on another page that names the order: a Stripe
/// session (a payment link) with the order's id as client_reference_id, or
/// a Razorpay order with it in its notes.
pub(super) async fn pay_elsewhere(
    world: &World,
    provider: Provider,
    started: &Started,
) -> anyhow::Result<()> {
    let order_id = order_of(world, &started.reference).await?;
    let http = holdfast::payments::http::client(Duration::from_secs(30));
    let keys = SandboxSettings::development();
    match provider {
        Provider::Stripe => {
            let expires_at = chrono::Utc::now().timestamp() + 3600;
            let body = format!(
                "mode=payment&success_url=https%3A%2F%2Felsewhere.test%2F&expires_at={expires_at}\
                 &client_reference_id={order_id}&line_items[0][quantity]=1\
                 &line_items[0][price_data][currency]=eur&line_items[0][price_data][unit_amount]=100\
                 &line_items[0][price_data][product_data][name]=Elsewhere"
            );
            let session: serde_json::Value = http
                .post(format!("{}/stripe/v1/checkout/sessions", world.sandbox))
                .bearer_auth(keys.stripe_secret_key.expose())
                .header("Content-Type", "application/x-www-form-urlencoded")
                .body(body)
                .send()
                .await?
                .error_for_status()?
                .json()
                .await?;
            let id = session["id"].as_str().context("a session id")?;
            http.post(format!("{}/stripe/pay/{id}/pay", world.sandbox))
                .send()
                .await?;
        }
        Provider::Razorpay => {
            let order: serde_json::Value = http
                .post(format!("{}/razorpay/v1/orders", world.sandbox))
                .basic_auth(
                    &keys.razorpay_key_id,
                    Some(keys.razorpay_key_secret.expose()),
                )
                .json(&serde_json::json!({
                    "amount": 100, "currency": "EUR",
                    "notes": { "holdfast_order_id": order_id.to_string() },
                    "payment": { "capture": "automatic",
                                 "capture_options": { "automatic_expiry_period": 12 } },
                }))
                .send()
                .await?
                .error_for_status()?
                .json()
                .await?;
            let id = order["id"].as_str().context("an order id")?;
            world
                .razorpay_sandbox
                .authorize(id, None, false)
                .map_err(|e| anyhow::anyhow!(e))?;
        }
    }
    Ok(())
}

/// A payment of 1.00 lands on the order's own Razorpay order (Stripe's
/// session takes only its own amount: there, on another page).
pub(super) async fn underpay(
    world: &World,
    provider: Provider,
    started: &Started,
) -> anyhow::Result<()> {
    match provider {
        Provider::Razorpay => {
            world
                .razorpay_sandbox
                .authorize(&started.reference, Some(100), false)
                .map_err(|e| anyhow::anyhow!(e))?;
            Ok(())
        }
        Provider::Stripe => pay_elsewhere(world, provider, started).await,
    }
}
