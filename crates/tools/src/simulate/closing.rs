//! Time running out: for one order as if days had passed for it alone (a
//! debit that comes late), and for the whole sale at closing time, when
//! every page closes, every payment window and hold runs out, the late
//! banks answer, and the worker's passes run until nothing changes.

use std::time::Duration;

use anyhow::Context;

use holdfast::configuration::ReconcileTimes;
use holdfast::inventory::Inventory;
use holdfast::payments::ProviderKind as Provider;
use holdfast::worker::Sweeper;
use holdfast::worker::outbox::Outbox;
use holdfast::worker::reconcile::Reconciler;

use super::parties::finish_refunds;
use super::{SimLedger, World};

/// One order's time runs out as if days had passed for it alone (its
/// payment deadline, and a settling phase's deadline and grace), and the
/// sweeper gives its units back to the sale. One transaction, the hints
/// with the rows.
pub(super) async fn run_out(world: &World, page: &str) -> anyhow::Result<()> {
    let mut tx = world.pool.begin().await?;
    let resources: Vec<String> = sqlx::query_scalar(
        "update holds h set expires_at = least(h.expires_at, now()), \
                payment_deadline = case when h.payment_deadline is not null \
                                        then least(h.payment_deadline, now()) end, \
                settle_deadline = case when h.settle_deadline is not null \
                                       then least(h.settle_deadline, now() - h.settle_grace) end, \
                settling_at = case when h.settling_at is not null \
                                   then least(h.settling_at, now() - h.settle_grace - interval '1 second') end \
          where h.purchase_id = (select hold_id from orders where provider_session_id = $1) \
            and h.state in ('held', 'awaiting_payment') \
         returning h.resource_id",
    )
    .bind(page)
    .fetch_all(&mut *tx)
    .await?;
    sqlx::query(
        "update resources set next_expiry = least(next_expiry, now()), \
                next_deadline = least(next_deadline, now()) \
          where id = any($1)",
    )
    .bind(&resources)
    .execute(&mut *tx)
    .await?;
    tx.commit().await?;
    Sweeper::new(Inventory::new(world.pool.clone()), "simulate")
        .run_once()
        .await?;
    holdfast::checkout::expire_abandoned_orders(&world.pool).await?;
    Ok(())
}

/// The end of the sale: every provider page closes, every payment window
/// runs out, and the worker's passes run until nothing changes.
pub(super) async fn closing_time(
    world: &World,
    ledger: &mut SimLedger,
    reconcile: bool,
) -> anyhow::Result<()> {
    let outbox = Outbox::new(world.pool.clone(), world.payments.clone());
    let reconciler = Reconciler::new(world.pool.clone(), world.payments.clone())
        .with_times(ReconcileTimes::immediately());
    outbox.drain().await?;
    finish_refunds(world, false);
    settle(world).await;
    // during the payment window, the worker asks about quiet pages
    if reconcile {
        let found = reconciler.drain().await?;
        ledger.reconciliation.add(&found);
    }

    // the providers' clock: every page still open expires
    let open: Vec<String> = sqlx::query_scalar(
        "select provider_session_id from orders \
          where provider = 'stripe' and state = 'pending' and provider_session_id is not null \
          order by created_at",
    )
    .fetch_all(&world.pool)
    .await?;
    let stripe = world
        .payments
        .get(Provider::Stripe)
        .context("the simulation has every provider")?;
    for session in open {
        stripe.close_page(&session).await?;
    }
    settle(world).await;

    // Our clock: every payment window and hold has run out, settling ones
    // too (their deadline and grace behind us: days pass). One
    // transaction, so the hints move to the very instant the rows do (a
    // hint later than a hold's time would hide it from the sweeper).
    let mut tx = world.pool.begin().await?;
    sqlx::query(
        "update holds set expires_at = least(expires_at, now()), \
                payment_deadline = case when payment_deadline is not null \
                                        then least(payment_deadline, now()) end, \
                settle_deadline = case when settle_deadline is not null \
                                       then least(settle_deadline, now() - settle_grace) end, \
                settling_at = case when settling_at is not null \
                                   then least(settling_at, now() - settle_grace - interval '1 second') end \
          where state in ('held', 'awaiting_payment')",
    )
    .execute(&mut *tx)
    .await?;
    sqlx::query(
        "update resources set next_expiry = least(next_expiry, now()), \
                next_deadline = least(next_deadline, now())",
    )
    .execute(&mut *tx)
    .await?;
    tx.commit().await?;
    // and the reconciler's waits between checks are over
    sqlx::query("update orders set reconcile_after = null where reconciled_at is null")
        .execute(&world.pool)
        .await?;
    tokio::time::sleep(Duration::from_millis(20)).await;
    Sweeper::new(Inventory::new(world.pool.clone()), "simulate")
        .run_once()
        .await?;
    holdfast::checkout::expire_abandoned_orders(&world.pool).await?;
    // the late debits' banks answer now, after the deadline and grace:
    // the one rule for late money judges what comes
    let late = std::mem::take(
        &mut *world
            .late_debits
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner()),
    );
    for (provider, page) in late {
        let _ = match provider {
            Provider::Stripe => world.stripe_sandbox.settle_delayed(&page, true),
            Provider::Razorpay => {
                for payment in world.razorpay_sandbox.order_payments(&page) {
                    let _ = world.razorpay_sandbox.authorize_late(&payment);
                }
                Ok(())
            }
        };
    }
    settle(world).await;
    if reconcile {
        let found = reconciler.drain().await?;
        ledger.reconciliation.add(&found);
    }
    sqlx::query("update outbox_jobs set run_after = now() where state = 'pending'")
        .execute(&world.pool)
        .await?;
    outbox.drain().await?;
    // days pass at the providers: authorisations nobody captured go back
    // (Razorpay: 5 days after their creation), banks stop answering, and
    // every refund the banks were slow with is finished
    world.razorpay_sandbox.days_pass(6);

    // the worker until quiet: reconciliation finds what nothing reported
    for _ in 0..8 {
        if reconcile {
            let found = reconciler.drain().await?;
            ledger.reconciliation.add(&found);
        }
        // the outbox's waits between tries are over too
        sqlx::query("update outbox_jobs set run_after = now() where state = 'pending'")
            .execute(&world.pool)
            .await?;
        outbox.drain().await?;
        finish_refunds(world, true);
        settle(world).await;
        let unfinished: i64 =
            sqlx::query_scalar("select count(*) from outbox_jobs where state = 'pending'")
                .fetch_one(&world.pool)
                .await?;
        let waiting: i64 = sqlx::query_scalar(
            "select count(*) from orders where reconciled_at is null and provider_session_id is not null",
        )
        .fetch_one(&world.pool)
        .await?;
        if unfinished == 0 && (!reconcile || waiting == 0) {
            break;
        }
        sqlx::query("update orders set reconcile_after = null where reconciled_at is null")
            .execute(&world.pool)
            .await?;
    }
    Ok(())
}

/// Wait until the sandbox has stopped delivering webhooks (late ones come
/// after three seconds).
async fn settle(world: &World) {
    let deliveries = || {
        world.stripe_sandbox.ledger().deliveries.len()
            + world.razorpay_sandbox.ledger().deliveries.len()
    };
    let mut seen = deliveries();
    let mut quiet = Duration::ZERO;
    while quiet < Duration::from_millis(3500) {
        tokio::time::sleep(Duration::from_millis(250)).await;
        let now = deliveries();
        if now == seen {
            quiet += Duration::from_millis(250);
        } else {
            seen = now;
            quiet = Duration::ZERO;
        }
    }
}
