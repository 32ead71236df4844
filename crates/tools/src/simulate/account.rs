//! The accounting at the end: what the providers hold (charges, standing
//! refunds) against what the shop did (fulfilled orders, refunds, staff
//! refunds), the units on the counters against the units on orders, and
//! what must be over after closing time. Every broken promise becomes a
//! violation in the ledger.

use std::collections::BTreeMap;

use holdfast::inventory::Inventory;
use holdfast_sandbox::Ledger;

use super::{ResourceLine, SimLedger, World};

/// Compare what the providers hold with what the shop did.
pub(super) async fn account(world: &World, ledger: &mut SimLedger) -> anyhow::Result<()> {
    money(world, ledger).await?;
    units(world, ledger).await?;
    leftovers(world, ledger).await
}

/// Each charge ends in a fulfilment or a refund, never both and never
/// neither; money staff gave back is exactly what the order records.
async fn money(world: &World, ledger: &mut SimLedger) -> anyhow::Result<()> {
    let mut charges: Vec<(String, String, i64)> = Vec::new();
    let mut refunds: Vec<(String, String, i64)> = Vec::new();
    let sandboxes: [(&str, Ledger); 2] = [
        ("stripe", world.stripe_sandbox.ledger()),
        ("razorpay", world.razorpay_sandbox.ledger()),
    ];
    for (provider, sandbox) in &sandboxes {
        for charge in &sandbox.charges {
            charges.push((
                provider.to_string(),
                charge.payment_intent.clone(),
                charge.amount,
            ));
        }
        for refund in sandbox.refunds_standing() {
            refunds.push((
                provider.to_string(),
                refund.payment_intent.clone(),
                refund.amount,
            ));
        }
    }
    ledger.charges = charges.len() as u64;
    ledger.charged_minor = charges.iter().map(|c| c.2).sum();

    // fulfilled: paid, or paid and then refunded (some or all) by staff
    let paid: Vec<(String, String, i64, i64)> = sqlx::query_as(
        "select provider, payment_ref, amount_minor, refunded_minor from orders o \
          where payment_ref is not null \
            and (state = 'paid' or exists (select 1 from order_refunds r where r.order_id = o.id))",
    )
    .fetch_all(&world.pool)
    .await?;
    ledger.fulfilled_orders = paid.len() as u64;
    ledger.fulfilled_minor = paid.iter().map(|p| p.2).sum();
    ledger.staff_refunded_orders = paid.iter().filter(|p| p.3 > 0).count() as u64;
    let fulfilled: BTreeMap<(String, String), i64> = paid
        .iter()
        .map(|(provider, payment, amount, _)| ((provider.clone(), payment.clone()), *amount))
        .collect();
    let by_staff: BTreeMap<(String, String), i64> = paid
        .iter()
        .filter(|p| p.3 > 0)
        .map(|(provider, payment, _, refunded)| ((provider.clone(), payment.clone()), *refunded))
        .collect();
    let mut refunded: BTreeMap<(String, String), u64> = BTreeMap::new();
    let mut refunded_sum: BTreeMap<(String, String), i64> = BTreeMap::new();
    for (provider, payment, amount) in &refunds {
        let key = (provider.clone(), payment.clone());
        // money staff gave back of a sale is counted apart from payments
        // that were never sold
        if by_staff.contains_key(&key) {
            ledger.staff_refunds += 1;
            ledger.staff_refunded_minor += amount;
        } else {
            ledger.refunds += 1;
            ledger.refunded_minor += amount;
        }
        *refunded.entry(key.clone()).or_insert(0) += 1;
        *refunded_sum.entry(key).or_insert(0) += amount;
    }
    for (provider, payment, amount) in &charges {
        let key = (provider.clone(), payment.clone());
        let kept = fulfilled.get(&key);
        let back = refunded.get(&key).copied().unwrap_or(0);
        // staff gave some of a sold payment back: exactly what the order
        // records, never more than it took
        if let Some(staff) = by_staff.get(&key) {
            let back_minor = refunded_sum.get(&key).copied().unwrap_or(0);
            if back_minor != *staff || back_minor > *amount {
                ledger.violations.push(format!(
                    "{provider} charge {payment} ({amount}): staff refunded {staff}, \
                     the provider gave back {back_minor}"
                ));
            }
            continue;
        }
        match (kept, back) {
            (None, 0) => ledger.violations.push(format!(
                "{provider} charge {payment} ({amount}) has neither a fulfilment nor a refund"
            )),
            (Some(_), n) if n > 0 => ledger.violations.push(format!(
                "{provider} charge {payment} was fulfilled and refunded"
            )),
            (_, n) if n > 1 => ledger.violations.push(format!(
                "{provider} charge {payment} was refunded {n} times"
            )),
            (Some(order_amount), _) if order_amount != amount => ledger.violations.push(format!(
                "{provider} charge {payment} took {amount} for an order of {order_amount}"
            )),
            _ => {}
        }
    }
    for key in fulfilled.keys() {
        if !charges.iter().any(|(p, id, _)| (p, id) == (&key.0, &key.1)) {
            ledger.violations.push(format!(
                "order paid by {} {} that no provider charged",
                key.0, key.1
            ));
        }
    }
    for key in refunded.keys() {
        if !charges.iter().any(|(p, id, _)| (p, id) == (&key.0, &key.1)) {
            ledger.violations.push(format!(
                "refund of {} {} that was never charged",
                key.0, key.1
            ));
        }
    }

    Ok(())
}

/// Orders by state, and per resource: the counters against the units on
/// fulfilled orders, never more than there are.
async fn units(world: &World, ledger: &mut SimLedger) -> anyhow::Result<()> {
    let states: Vec<(String, i64)> =
        sqlx::query_as("select state, count(*) from orders group by state order by state")
            .fetch_all(&world.pool)
            .await?;
    ledger.orders_by_state = states
        .into_iter()
        .map(|(state, n)| (state, n as u64))
        .collect();

    let resources: Vec<(String, i32, i32, i32, i64)> = sqlx::query_as(
        "select r.id, r.total, r.sold, r.held, \
                coalesce((select sum(l.qty - l.refunded_qty) from order_lines l \
                            join orders o on o.id = l.order_id \
                            join products p on p.id = l.product_id \
                           where p.resource_id = r.id \
                             and (o.state = 'paid' \
                                  or exists (select 1 from order_refunds x \
                                              where x.order_id = o.id))), 0)::int8 \
           from resources r order by r.id",
    )
    .fetch_all(&world.pool)
    .await?;
    for (resource, total, sold, held, on_orders) in resources {
        if i64::from(sold) != on_orders {
            ledger.violations.push(format!(
                "{resource}: {sold} sold by the counters, {on_orders} on fulfilled orders"
            ));
        }
        if on_orders > i64::from(total) || sold + held > total {
            ledger.violations.push(format!(
                "{resource}: oversold ({on_orders} on orders, {held} held, {total} in all)"
            ));
        }
        ledger.resources.push(ResourceLine {
            resource,
            total,
            sold,
            sold_on_orders: on_orders,
            held,
        });
    }

    Ok(())
}

/// What must be over after closing time (active holds, drift, refund jobs,
/// orders pending or settling), and what the one rule did with late money.
async fn leftovers(world: &World, ledger: &mut SimLedger) -> anyhow::Result<()> {
    ledger.leaked_holds = sqlx::query_scalar::<_, i64>(
        "select count(*) from holds where state in ('held', 'awaiting_payment')",
    )
    .fetch_one(&world.pool)
    .await? as u64;
    if ledger.leaked_holds > 0 {
        ledger.violations.push(format!(
            "{} holds still active after their deadline and a sweep",
            ledger.leaked_holds
        ));
    }
    ledger.drifted_resources = Inventory::new(world.pool.clone())
        .check(None)
        .await?
        .iter()
        .filter(|row| row.drift)
        .count() as u64;
    if ledger.drifted_resources > 0 {
        ledger.violations.push(format!(
            "{} resources whose counters disagree with their rows",
            ledger.drifted_resources
        ));
    }
    ledger.pending_refund_jobs = sqlx::query_scalar::<_, i64>(
        "select count(*) from outbox_jobs where kind = 'refund' and state = 'pending'",
    )
    .fetch_one(&world.pool)
    .await? as u64;
    if ledger.pending_refund_jobs > 0 {
        ledger.violations.push(format!(
            "{} refund jobs not finished",
            ledger.pending_refund_jobs
        ));
    }
    let stuck: i64 =
        sqlx::query_scalar("select count(*) from orders where state in ('pending', 'settling')")
            .fetch_one(&world.pool)
            .await?;
    if stuck > 0 {
        ledger.violations.push(format!(
            "{stuck} orders still pending or settling after closing time"
        ));
    }
    let late: Vec<(String, i64)> = sqlx::query_as(
        "select late_money, count(*) from orders where late_money is not null \
          group by late_money order by late_money",
    )
    .fetch_all(&world.pool)
    .await?;
    ledger.late_money = late.into_iter().map(|(v, n)| (v, n as u64)).collect();
    ledger.settled_orders =
        sqlx::query_scalar::<_, i64>("select count(*) from orders where settle_method is not null")
            .fetch_one(&world.pool)
            .await? as u64;
    Ok(())
}
