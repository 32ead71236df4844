//! The one confirm routine: the only place that turns a payment into a
//! sale, whichever path reported it.

use std::collections::{HashMap, HashSet};

use serde::Serialize;
use sqlx::{PgPool, Postgres, Transaction};
use uuid::Uuid;

use crate::inventory::{self, ConfirmOutcome, HoldId, PaymentRef};
use crate::payments::{PaymentStatus, ProviderKind, ProviderPayment};

use super::late::{self, LateMoney};
use super::settling::{self, Settled};
use super::{Result, outbox, refund};

/// Which path reported a payment, for the history and metrics.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Source {
    /// The shopper's browser came back from the provider.
    Return,
    Webhook,
    Reconciliation,
    /// The worker captured an authorised payment.
    Capture,
}

impl Source {
    pub fn as_str(self) -> &'static str {
        match self {
            Source::Return => "return",
            Source::Webhook => "webhook",
            Source::Reconciliation => "reconciliation",
            Source::Capture => "capture",
        }
    }
}

/// A payment reported by a provider, from any path, for one of our orders.
#[derive(Debug, Clone)]
pub struct PaymentReport {
    pub order_id: Uuid,
    pub payment: ProviderPayment,
    pub source: Source,
}

/// What the one confirm routine did with a payment.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "action", rename_all = "snake_case")]
pub enum Fulfilment {
    /// First confirmation: the order is paid and its codes issued.
    Fulfilled { order_id: Uuid },
    /// Another path got there first.
    AlreadyFulfilled { order_id: Uuid },
    /// The money goes back: a second payment, or money for a hold that ended.
    RefundQueued { order_id: Uuid, reason: String },
    /// The payment already bought another order: staff must look.
    Flagged { order_id: Uuid, other_hold_id: Uuid },
    /// The payment is not what the order asks for (another page, another
    /// amount or currency): the order is flagged for staff, and a captured
    /// payment is refunded.
    Mismatch {
        order_id: Uuid,
        reason: String,
        refund_queued: bool,
    },
    /// Committed to a method that settles later: the order's units are
    /// held until `until` (and a grace delay after it).
    Settling {
        order_id: Uuid,
        method: String,
        until: chrono::DateTime<chrono::Utc>,
    },
    /// Not money yet (authorised, failed, refunded, or settling for an
    /// order that no longer waits): nothing changes until it is captured.
    NotCaptured {
        order_id: Uuid,
        status: PaymentStatus,
    },
    /// No such order or hold: logged, nothing to do.
    Unknown,
}

impl Fulfilment {
    /// The outcome's name, for logs and metrics.
    pub fn label(&self) -> &'static str {
        match self {
            Fulfilment::Fulfilled { .. } => "fulfilled",
            Fulfilment::AlreadyFulfilled { .. } => "already_fulfilled",
            Fulfilment::RefundQueued { .. } => "refund_queued",
            Fulfilment::Flagged { .. } => "flagged",
            Fulfilment::Mismatch { .. } => "mismatch",
            Fulfilment::Settling { .. } => "settling",
            Fulfilment::NotCaptured { .. } => "not_captured",
            Fulfilment::Unknown => "unknown",
        }
    }
}

/// What an order asks a payment to be: its provider, its page, its amount
/// and currency. `Err` says what differs, in words for staff.
pub fn payment_matches(
    order: (ProviderKind, Option<&str>, i64, &str),
    payment: &ProviderPayment,
) -> std::result::Result<(), String> {
    let (provider, page, amount, currency) = order;
    let mut differences = Vec::new();
    if payment.provider != provider {
        differences.push(format!(
            "paid at {} for an order at {provider}",
            payment.provider
        ));
    }
    if page.is_none() || payment.page_id.as_deref() != page {
        differences.push(format!(
            "paid on page {} instead of {}",
            payment.page_id.as_deref().unwrap_or("(none)"),
            page.unwrap_or("(none)")
        ));
    }
    if payment.amount_minor != amount || !payment.currency.eq_ignore_ascii_case(currency) {
        differences.push(format!(
            "paid {} {} instead of {amount} {currency}",
            payment.amount_minor, payment.currency
        ));
    }
    if differences.is_empty() {
        Ok(())
    } else {
        Err(differences.join("; "))
    }
}

/// One payment through the confirm routine in a transaction of its own,
/// not combined (the shop, the worker and reconciliation confirm through
/// [`super::Confirmations`]). Safe to run any number of times, concurrently,
/// in any order, beside them: the order row lock serialises the paths, the
/// engine decides, and the effect (order paid and codes, a refund job, a
/// flag) commits together with the engine's change.
pub async fn confirm_payment(pool: &PgPool, report: &PaymentReport) -> Result<Fulfilment> {
    let mut tx = pool.begin().await?;
    let fulfilment = confirm_payment_in(&mut tx, report).await?;
    tx.commit().await?;
    crate::metrics::confirmation(fulfilment.label(), report.source.as_str());
    tracing::info!(order = %report.order_id, source = report.source.as_str(), ?fulfilment, "payment confirmed");
    Ok(fulfilment)
}

/// [`confirm_payment`] inside the caller's transaction, so a webhook's
/// dedupe row commits together with the effect. A batch of one for
/// [`confirm_payments_in`].
pub async fn confirm_payment_in(
    tx: &mut Transaction<'_, Postgres>,
    report: &PaymentReport,
) -> Result<Fulfilment> {
    let mut fulfilments = confirm_payments_in(tx, std::slice::from_ref(report)).await?;
    Ok(fulfilments.pop().unwrap_or(Fulfilment::Unknown))
}

/// Several payments in the caller's transaction, each answered as it would
/// be alone, one after another in the order given, in a few statements for
/// the lot: a payment burst on one tier confirms in one transaction
/// ([`super::Confirmations`]) without a round trip per step of each payment.
///
/// What was paid is checked before anything is sold: only a captured
/// payment on the order's own page, at its provider, for its amount and
/// currency, can pay for it. Anything else is a mismatch (flagged, and
/// refunded when it is money) or not money yet.
///
/// An order or a payment named twice waits for a later round (and so does
/// every later report of that order or payment), so the second report sees
/// what the first one did, exactly as one after another. The combined path
/// sends payments of one resource; payments over several resources take
/// their resources in id order all the same (`hf_confirm_many`).
pub async fn confirm_payments_in(
    tx: &mut Transaction<'_, Postgres>,
    reports: &[PaymentReport],
) -> Result<Vec<Fulfilment>> {
    let mut answers: Vec<Option<Fulfilment>> = vec![None; reports.len()];
    let mut waiting: Vec<usize> = (0..reports.len()).collect();
    while !waiting.is_empty() {
        let mut orders = HashSet::new();
        let mut payments = HashSet::new();
        let (round, later): (Vec<usize>, Vec<usize>) = waiting.into_iter().partition(|&i| {
            let report = &reports[i];
            let payment = (report.payment.provider, report.payment.payment_ref.as_str());
            let free = !orders.contains(&report.order_id) && !payments.contains(&payment);
            orders.insert(report.order_id);
            payments.insert(payment);
            free
        });
        let batch: Vec<&PaymentReport> = round.iter().map(|&i| &reports[i]).collect();
        for (i, answer) in round.into_iter().zip(confirm_round(tx, &batch).await?) {
            answers[i] = Some(answer);
        }
        waiting = later;
    }
    Ok(answers
        .into_iter()
        .map(|answer| answer.unwrap_or(Fulfilment::Unknown))
        .collect())
}

/// The order as the confirm routine reads it, locked.
#[derive(sqlx::FromRow)]
struct Locked {
    id: Uuid,
    hold_id: Option<Uuid>,
    provider: ProviderKind,
    provider_session_id: Option<String>,
    amount_minor: i64,
    currency: String,
    payment_ref: Option<String>,
    /// Why this payment is being refunded, if it is.
    refunding: Option<String>,
}

/// Payments for distinct orders, confirmed together.
async fn confirm_round(
    tx: &mut Transaction<'_, Postgres>,
    reports: &[&PaymentReport],
) -> Result<Vec<Fulfilment>> {
    let mut orders = lock_orders(tx, reports).await?;
    let mut answers: Vec<Option<Fulfilment>> = vec![None; reports.len()];
    // the payments that go to the engine: (their place, hold, reference)
    let mut selling: Vec<(usize, HoldId, PaymentRef)> = Vec::new();
    for (i, report) in reports.iter().enumerate() {
        let Some(order) = orders.remove(&report.order_id) else {
            tracing::warn!(order = %report.order_id, source = report.source.as_str(), "payment for an unknown order");
            answers[i] = Some(Fulfilment::Unknown);
            continue;
        };
        match first_look(tx, &order, report).await? {
            Look::Answer(fulfilment) => answers[i] = Some(fulfilment),
            Look::Settle(hold) => {
                let settled = settling::begin(
                    tx,
                    report.order_id,
                    &report.payment,
                    hold,
                    report.source.as_str(),
                )
                .await?;
                answers[i] = Some(match settled {
                    Settled::Settling { method, until } => Fulfilment::Settling {
                        order_id: report.order_id,
                        method,
                        until,
                    },
                    Settled::NotWaiting => Fulfilment::NotCaptured {
                        order_id: report.order_id,
                        status: report.payment.status,
                    },
                    Settled::Unknown => Fulfilment::Unknown,
                });
            }
            Look::Sell(hold, payment_ref) => selling.push((i, hold, payment_ref)),
        }
    }

    let confirmations: Vec<(HoldId, &PaymentRef)> =
        selling.iter().map(|(_, hold, r)| (*hold, r)).collect();
    let outcomes = inventory::confirm_many(&mut **tx, &confirmations).await?;
    let mut sold: Vec<(Uuid, &PaymentRef)> = Vec::new();
    for ((i, hold, payment_ref), outcome) in selling.iter().zip(outcomes) {
        let report = reports[*i];
        if matches!(outcome, ConfirmOutcome::Confirmed { .. }) {
            sold.push((report.order_id, payment_ref));
            answers[*i] = Some(Fulfilment::Fulfilled {
                order_id: report.order_id,
            });
            continue;
        }
        let decided = decided(tx, report, *hold, payment_ref, outcome).await?;
        if matches!(decided, Fulfilment::Fulfilled { .. }) {
            // claimed again by the late-money rule: fulfilled like any sale
            sold.push((report.order_id, payment_ref));
        }
        answers[*i] = Some(decided);
    }
    fulfil(tx, &sold).await?;
    Ok(answers
        .into_iter()
        .map(|answer| answer.unwrap_or(Fulfilment::Unknown))
        .collect())
}

/// Lock the orders of a round, in id order (then, inside the engine,
/// their resources), with what the confirm routine checks.
async fn lock_orders(
    tx: &mut Transaction<'_, Postgres>,
    reports: &[&PaymentReport],
) -> Result<HashMap<Uuid, Locked>> {
    let ids: Vec<Uuid> = reports.iter().map(|r| r.order_id).collect();
    let refund_keys: Vec<String> = reports
        .iter()
        .map(|r| outbox::refund_key(r.payment.provider, &r.payment.payment_ref))
        .collect();
    let locked: Vec<Locked> = sqlx::query_as(
        "select o.id, o.hold_id, o.provider, o.provider_session_id, o.amount_minor, o.currency, \
                o.payment_ref, \
                (select payload->>'reason' from outbox_jobs where dedupe_key = x.refund_key) as refunding \
           from unnest($1::uuid[], $2::text[]) as x(id, refund_key) \
           join orders o on o.id = x.id \
          order by o.id for update of o",
    )
    .bind(&ids)
    .bind(&refund_keys)
    .fetch_all(&mut **tx)
    .await?;
    Ok(locked.into_iter().map(|order| (order.id, order)).collect())
}

/// What the confirm routine does with a payment before the engine sees it.
enum Look {
    /// Decided without the engine.
    Answer(Fulfilment),
    /// Committed, not money yet: the settling phase.
    Settle(HoldId),
    /// Money for the order: the engine decides.
    Sell(HoldId, PaymentRef),
}

/// What was paid, checked against the locked order: only a captured
/// payment on its page, at its provider, for its amount and currency goes
/// to the engine to be sold; a pending one that matches settles.
async fn first_look(
    tx: &mut Transaction<'_, Postgres>,
    order: &Locked,
    report: &PaymentReport,
) -> Result<Look> {
    let order_id = report.order_id;
    let payment = &report.payment;
    let captured = payment.status == PaymentStatus::Captured;
    // One payment has one fate, whichever path reports it and however the
    // reports differ (a webhook on an older API version may word the same
    // payment differently): the payment that paid the order paid it...
    if order.payment_ref.as_deref() == Some(payment.payment_ref.as_str()) {
        return Ok(Look::Answer(Fulfilment::AlreadyFulfilled { order_id }));
    }
    // ... and a payment on its way back is never sold.
    if let Some(reason) = &order.refunding {
        return Ok(Look::Answer(Fulfilment::RefundQueued {
            order_id,
            reason: reason.clone(),
        }));
    }
    if let Err(reason) = payment_matches(
        (
            order.provider,
            order.provider_session_id.as_deref(),
            order.amount_minor,
            &order.currency,
        ),
        payment,
    ) {
        let note = format!("payment_mismatch: {} {reason}", payment.payment_ref);
        tracing::warn!(order = %order_id, payment = %payment.payment_ref, %reason, "a payment that does not match its order");
        flag(tx, order_id, &note).await?;
        // an uncaptured payment cannot be refunded: its provider gives it
        // back by itself when nobody captures it
        if captured {
            refund::queue(tx, order_id, payment, "payment_mismatch").await?;
        }
        return Ok(Look::Answer(Fulfilment::Mismatch {
            order_id,
            reason,
            refund_queued: captured,
        }));
    }
    let Some(hold_id) = order.hold_id.map(HoldId) else {
        tracing::warn!(order = %order_id, "an order without a hold");
        return Ok(Look::Answer(Fulfilment::Unknown));
    };
    Ok(match payment.status {
        PaymentStatus::Captured => Look::Sell(hold_id, PaymentRef::parse(&payment.payment_ref)?),
        PaymentStatus::Pending => Look::Settle(hold_id),
        PaymentStatus::Authorized | PaymentStatus::Failed | PaymentStatus::Refunded => {
            Look::Answer(Fulfilment::NotCaptured {
                order_id,
                status: payment.status,
            })
        }
    })
}

/// What a payment the engine did not confirm comes to: nothing, a refund,
/// a flag, or (money after the holds ended) the one rule for late money.
async fn decided(
    tx: &mut Transaction<'_, Postgres>,
    report: &PaymentReport,
    hold: HoldId,
    payment_ref: &PaymentRef,
    outcome: ConfirmOutcome,
) -> Result<Fulfilment> {
    let order_id = report.order_id;
    let payment = &report.payment;
    Ok(match outcome {
        ConfirmOutcome::Confirmed { .. } => Fulfilment::Fulfilled { order_id },
        ConfirmOutcome::AlreadyConfirmed { .. } => Fulfilment::AlreadyFulfilled { order_id },
        ConfirmOutcome::DuplicatePayment { .. } => {
            refund::queue(tx, order_id, payment, "duplicate_payment").await?;
            Fulfilment::RefundQueued {
                order_id,
                reason: "duplicate_payment".into(),
            }
        }
        ConfirmOutcome::Expired { .. } | ConfirmOutcome::Released { .. } => {
            let released = matches!(outcome, ConfirmOutcome::Released { .. });
            match late::judge(
                tx,
                order_id,
                hold,
                payment_ref,
                released,
                report.source.as_str(),
            )
            .await?
            {
                LateMoney::ClaimedAgain => Fulfilment::Fulfilled { order_id },
                LateMoney::Refunded(reason) => {
                    refund::queue(tx, order_id, payment, reason).await?;
                    sqlx::query(
                        "update orders set state = 'refund_pending', updated_at = now() \
                          where id = $1 and state in ('pending', 'settling', 'expired', 'cancelled')",
                    )
                    .bind(order_id)
                    .execute(&mut **tx)
                    .await?;
                    Fulfilment::RefundQueued {
                        order_id,
                        reason: reason.into(),
                    }
                }
            }
        }
        ConfirmOutcome::PaymentRefInUse { other_hold_id, .. } => {
            let note = format!(
                "payment_ref_in_use: {} already paid hold {}",
                payment.payment_ref, other_hold_id
            );
            flag(tx, order_id, &note).await?;
            Fulfilment::Flagged {
                order_id,
                other_hold_id: other_hold_id.0,
            }
        }
        ConfirmOutcome::NotFound => {
            tracing::warn!(order = %order_id, "the order's hold is gone");
            Fulfilment::Unknown
        }
    })
}

/// Flag an order for staff. A note is added once; earlier ones stay.
async fn flag(tx: &mut Transaction<'_, Postgres>, order_id: Uuid, note: &str) -> Result<()> {
    let note: String = note.chars().take(500).collect();
    sqlx::query(
        "update orders \
            set flag = case when flag is null then $2 \
                            when position($2 in flag) > 0 then flag \
                            else left(flag || '; ' || $2, 2000) end, \
                updated_at = now() \
          where id = $1",
    )
    .bind(order_id)
    .bind(note)
    .execute(&mut **tx)
    .await?;
    Ok(())
}

/// Mark the orders paid (each by its payment), issue their codes and queue
/// their confirmation messages: a few statements for all of them.
pub(super) async fn fulfil(
    tx: &mut Transaction<'_, Postgres>,
    sold: &[(Uuid, &PaymentRef)],
) -> Result<()> {
    if sold.is_empty() {
        return Ok(());
    }
    let order_ids: Vec<Uuid> = sold.iter().map(|(id, _)| *id).collect();
    let refs: Vec<&str> = sold.iter().map(|(_, r)| r.as_str()).collect();
    sqlx::query(
        "update orders o set state = 'paid', payment_ref = x.payment_ref, paid_at = now(), \
                updated_at = now() \
           from unnest($1::uuid[], $2::text[]) as x(id, payment_ref) \
          where o.id = x.id",
    )
    .bind(&order_ids)
    .bind(&refs)
    .execute(&mut **tx)
    .await?;
    // each order's items, with their codes (crate::items)
    crate::items::issue::issue(tx, &order_ids).await?;
    let messages: Vec<outbox::OutboxJob> = order_ids
        .iter()
        .map(|&order_id| outbox::OutboxJob::OrderConfirmation { order_id })
        .collect();
    outbox::queue_all(&mut **tx, &messages).await?;
    Ok(())
}
