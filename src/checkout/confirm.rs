//! The one confirm routine: the only place that turns a payment into a
//! sale, whichever path reported it.

use serde::Serialize;
use sqlx::{PgPool, Postgres, Transaction};
use uuid::Uuid;

use crate::inventory::{self, ConfirmOutcome, HoldId, PaymentRef};
use crate::payments::{PaymentStatus, ProviderKind, ProviderPayment};

use super::catalogue::ProductKind;
use super::{Result, codes, outbox, refund};

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
    /// Not money yet (authorised, settling, failed, refunded): nothing
    /// changes until it is captured.
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

/// The one confirm routine. Safe to run any number of times, concurrently,
/// in any order, from the return handler, the webhook and reconciliation:
/// the order row lock serialises the paths, the engine decides, and the
/// effect (order paid and codes, a refund job, a flag) commits together
/// with the engine's change.
pub async fn confirm_payment(pool: &PgPool, report: &PaymentReport) -> Result<Fulfilment> {
    let mut tx = pool.begin().await?;
    let fulfilment = confirm_payment_in(&mut tx, report).await?;
    tx.commit().await?;
    crate::metrics::confirmation(fulfilment.label(), report.source.as_str());
    tracing::info!(order = %report.order_id, source = report.source.as_str(), ?fulfilment, "payment confirmed");
    Ok(fulfilment)
}

/// [`confirm_payment`] inside the caller's transaction, so a webhook's
/// dedupe row commits together with the effect.
///
/// What was paid is checked before anything is sold: only a captured
/// payment on the order's own page, at its provider, for its amount and
/// currency, can pay for it. Anything else is a mismatch (flagged, and
/// refunded when it is money) or not money yet.
pub async fn confirm_payment_in(
    tx: &mut Transaction<'_, Postgres>,
    report: &PaymentReport,
) -> Result<Fulfilment> {
    #[derive(sqlx::FromRow)]
    struct Locked {
        hold_id: Option<Uuid>,
        provider: ProviderKind,
        provider_session_id: Option<String>,
        amount_minor: i64,
        currency: String,
        payment_ref: Option<String>,
        /// Why this payment is being refunded, if it is.
        refunding: Option<String>,
    }
    // lock: the order first, then (inside the engine) its resources
    let order: Option<Locked> = sqlx::query_as(
        "select hold_id, provider, provider_session_id, amount_minor, currency, payment_ref, \
                (select payload->>'reason' from outbox_jobs where dedupe_key = $2) as refunding \
           from orders where id = $1 for update",
    )
    .bind(report.order_id)
    .bind(outbox::refund_key(
        report.payment.provider,
        &report.payment.payment_ref,
    ))
    .fetch_optional(&mut **tx)
    .await?;
    let Some(order) = order else {
        tracing::warn!(order = %report.order_id, source = report.source.as_str(), "payment for an unknown order");
        return Ok(Fulfilment::Unknown);
    };
    let order_id = report.order_id;
    let payment = &report.payment;
    let captured = payment.status == PaymentStatus::Captured;
    // One payment has one fate, whichever path reports it and however the
    // reports differ (a webhook on an older API version may word the same
    // payment differently): the payment that paid the order paid it...
    if order.payment_ref.as_deref() == Some(payment.payment_ref.as_str()) {
        return Ok(Fulfilment::AlreadyFulfilled { order_id });
    }
    // ... and a payment on its way back is never sold.
    if let Some(reason) = order.refunding {
        return Ok(Fulfilment::RefundQueued { order_id, reason });
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
        return Ok(Fulfilment::Mismatch {
            order_id,
            reason,
            refund_queued: captured,
        });
    }
    if !captured {
        return Ok(Fulfilment::NotCaptured {
            order_id,
            status: payment.status,
        });
    }
    let Some(hold_id) = order.hold_id else {
        tracing::warn!(order = %order_id, "an order without a hold");
        return Ok(Fulfilment::Unknown);
    };
    let payment_ref = PaymentRef::parse(&payment.payment_ref)?;
    let outcome = inventory::confirm(&mut **tx, HoldId(hold_id), &payment_ref).await?;
    let fulfilment = match outcome {
        ConfirmOutcome::Confirmed { .. } => {
            fulfil(tx, order_id, &payment_ref).await?;
            Fulfilment::Fulfilled { order_id }
        }
        ConfirmOutcome::AlreadyConfirmed { .. } => Fulfilment::AlreadyFulfilled { order_id },
        ConfirmOutcome::DuplicatePayment { .. } => {
            refund::queue(tx, order_id, payment, "duplicate_payment").await?;
            Fulfilment::RefundQueued {
                order_id,
                reason: "duplicate_payment".into(),
            }
        }
        ConfirmOutcome::Expired { .. } | ConfirmOutcome::Released { .. } => {
            let reason = if matches!(outcome, ConfirmOutcome::Expired { .. }) {
                "hold_expired"
            } else {
                "hold_released"
            };
            refund::queue(tx, order_id, payment, reason).await?;
            sqlx::query(
                "update orders set state = 'refund_pending', updated_at = now() \
                  where id = $1 and state in ('pending', 'expired', 'cancelled')",
            )
            .bind(order_id)
            .execute(&mut **tx)
            .await?;
            Fulfilment::RefundQueued {
                order_id,
                reason: reason.into(),
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
    };
    Ok(fulfilment)
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

/// Mark the order paid, issue its codes and queue its confirmation message.
async fn fulfil(
    tx: &mut Transaction<'_, Postgres>,
    order_id: Uuid,
    payment_ref: &PaymentRef,
) -> Result<()> {
    // what the order holds, read once: whether it has a pickup slot, and
    // its tickets (one code per unit)
    let lines: Vec<(ProductKind, String, i32)> = sqlx::query_as(
        "select p.kind, l.product_id, l.qty from order_lines l join products p on p.id = l.product_id \
          where l.order_id = $1 order by l.product_id",
    )
    .bind(order_id)
    .fetch_all(&mut **tx)
    .await?;
    let pickup = lines
        .iter()
        .any(|(kind, ..)| *kind == ProductKind::PickupSlot);
    // a pickup code names one order: of a few drawn, the first no order
    // has (two checkouts drawing the same one at the same moment would
    // meet at the unique index, and the confirmation be tried again)
    let candidates: Option<Vec<String>> =
        pickup.then(|| (0..4).map(|_| codes::pickup_code()).collect());
    sqlx::query(
        "update orders set state = 'paid', payment_ref = $2, paid_at = now(), \
                pickup_code = (select c from unnest($3::text[]) with ordinality as x(c, n) \
                                where not exists (select 1 from orders o where o.pickup_code = x.c) \
                                order by n limit 1), \
                updated_at = now() \
          where id = $1",
    )
    .bind(order_id)
    .bind(payment_ref.as_str())
    .bind(candidates)
    .execute(&mut **tx)
    .await?;
    let tickets: Vec<&str> = lines
        .iter()
        .filter(|(kind, ..)| *kind == ProductKind::Ticket)
        .flat_map(|(_, product_id, qty)| (0..*qty).map(move |_| product_id.as_str()))
        .collect();
    if !tickets.is_empty() {
        let codes: Vec<String> = tickets.iter().map(|_| codes::ticket_code()).collect();
        sqlx::query(
            "insert into order_codes (code, order_id, product_id) \
             select c, $2, p from unnest($1::text[], $3::text[]) as x(c, p)",
        )
        .bind(&codes)
        .bind(order_id)
        .bind(&tickets)
        .execute(&mut **tx)
        .await?;
    }
    outbox::queue(
        &mut **tx,
        &outbox::OutboxJob::OrderConfirmation { order_id },
    )
    .await?;
    Ok(())
}
