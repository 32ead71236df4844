//! Refund bookkeeping: one refund job per payment, the provider's
//! idempotency key derived from the job, the provider's refund id kept on
//! the job once known, and the job closed (or opened again) by whatever
//! tells us first how the refund ended: the worker reading it by id, or the
//! provider's refund event.

use sha2::{Digest, Sha256};
use sqlx::{Postgres, Transaction};
use uuid::Uuid;

use super::outbox::{self, OutboxJob, RefundJob, refund_key};
use crate::payments::{ProviderKind, ProviderPayment, RefundStatus, RefundView};

/// Queue the refund of one payment (of the whole of it). One payment is
/// refunded once, however many paths report it.
pub async fn queue(
    conn: &mut sqlx::PgConnection,
    order_id: Uuid,
    payment: &ProviderPayment,
    reason: &str,
) -> sqlx::Result<bool> {
    let queued = outbox::queue(
        &mut *conn,
        &OutboxJob::Refund(RefundJob {
            order_id: Some(order_id),
            provider: payment.provider,
            payment_ref: payment.payment_ref.clone(),
            reason: reason.to_owned(),
            staff_refund: None,
            amount_minor: None,
            paid_minor: Some(payment.amount_minor),
        }),
    )
    .await?;
    // the shopper is told their money goes back, and why
    if queued {
        outbox::queue(
            &mut *conn,
            &OutboxJob::PaymentReturned {
                order_id,
                payment: payment.clone(),
                reason: reason.to_owned(),
            },
        )
        .await?;
    }
    Ok(queued)
}

/// The provider idempotency key of a refund job's `generation`-th try:
/// hex SHA-256 of the job's dedupe key and the generation. 64 letters and
/// digits, so it passes every provider's rules (Razorpay takes letters,
/// digits, `-` and `_`, at least 10; Stripe up to 255 characters), and the
/// same on every retry of a generation, never random. A generation ends
/// only when the provider failed the refund.
pub fn idempotency_key(dedupe_key: &str, generation: i64) -> String {
    let mut digest = Sha256::new();
    digest.update(dedupe_key.as_bytes());
    digest.update(b"#");
    digest.update(generation.to_string().as_bytes());
    hex::encode(digest.finalize())
}

/// What a refund's news did to its job.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RefundMove {
    /// It finished: the job is done and a waiting order is refunded.
    Closed,
    /// It failed: the job will try again under a new key.
    Reopened,
    /// Still on its way (its id is now on the job), or news of an older
    /// try that no longer counts.
    Noted,
    /// Holdfast never asked for a refund of that payment.
    NotOurs,
}

/// Apply a refund's state, as the provider reports it, to its job.
/// `own_job` names the job when the refund is that job's own current try
/// (the worker just asked for it or read it by the id the job keeps).
/// Otherwise (a provider's event) the job is the one that keeps this
/// refund's id, failing that the payment's one refund job; an event is
/// believed about the refund the job knows by id, and a success event with
/// no id kept yet only if it gives back all the job asked for.
///
/// Lock order, as everywhere: the order row before its outbox jobs (the
/// confirm routine holds the order while it queues a refund).
pub async fn refund_moved_in(
    tx: &mut Transaction<'_, Postgres>,
    provider: ProviderKind,
    refund: &RefundView,
    own_job: Option<&str>,
) -> sqlx::Result<RefundMove> {
    let ours = own_job.is_some();
    let key = match own_job {
        Some(key) => key.to_owned(),
        None => sqlx::query_scalar(
            "select dedupe_key from outbox_jobs \
              where kind = 'refund' and payload->>'refund_id' = $1 \
                and (dedupe_key = $2 or starts_with(dedupe_key, $2 || ':')) \
              limit 1",
        )
        .bind(&refund.id)
        .bind(refund_key(provider, &refund.payment_ref))
        .fetch_optional(&mut **tx)
        .await?
        .unwrap_or_else(|| refund_key(provider, &refund.payment_ref)),
    };
    // unlocked read: which order a job belongs to never changes
    let order: Option<Option<String>> =
        sqlx::query_scalar("select payload->>'order_id' from outbox_jobs where dedupe_key = $1")
            .bind(&key)
            .fetch_optional(&mut **tx)
            .await?;
    let Some(order) = order else {
        return Ok(RefundMove::NotOurs);
    };
    let order_id = order.and_then(|id| Uuid::parse_str(&id).ok());
    if let Some(order_id) = order_id {
        // lock: the order first
        sqlx::query("select 1 from orders where id = $1 for update")
            .bind(order_id)
            .execute(&mut **tx)
            .await?;
    }
    // then its job
    let (current, asked): (Option<String>, Option<i64>) = sqlx::query_as(
        "select payload->>'refund_id', \
                coalesce(payload->>'amount_minor', payload->>'paid_minor')::int8 \
           from outbox_jobs where dedupe_key = $1 for update",
    )
    .bind(&key)
    .fetch_one(&mut **tx)
    .await?;
    let known = ours || current.as_deref() == Some(refund.id.as_str());
    let moved = match refund.status {
        RefundStatus::Succeeded
            if known || (current.is_none() && asked.is_none_or(|a| refund.amount_minor >= a)) =>
        {
            sqlx::query(
                "update outbox_jobs \
                    set state = 'done', done_at = coalesce(done_at, now()), last_error = null, \
                        payload = payload || jsonb_build_object('refund_id', $2::text) \
                  where dedupe_key = $1",
            )
            .bind(&key)
            .bind(&refund.id)
            .execute(&mut **tx)
            .await?;
            if let Some(order_id) = order_id {
                // refunded once no other refund of the order is on its way
                sqlx::query(
                    "update orders set state = 'refunded', updated_at = now() \
                      where id = $1 and state = 'refund_pending' \
                        and not exists (select 1 from outbox_jobs j \
                                         where j.kind = 'refund' and j.state = 'pending' \
                                           and j.payload->>'order_id' = $1::text \
                                           and j.dedupe_key <> $2)",
                )
                .bind(order_id)
                .bind(&key)
                .execute(&mut **tx)
                .await?;
            }
            RefundMove::Closed
        }
        // only the job's own try's failure counts (a refund can fail even
        // after it succeeded): another refund's, or an older try's, must not
        // open a job whose money is on its way
        RefundStatus::Failed if known => {
            sqlx::query(
                "update outbox_jobs \
                    set state = 'pending', done_at = null, run_after = now(), \
                        last_error = 'the provider failed refund ' || $2, \
                        -- a new try needs a new provider key: still the job's, never random
                        payload = (payload - 'refund_id') || jsonb_build_object('reopened', \
                                  coalesce((payload->>'reopened')::int, 0) + 1) \
                  where dedupe_key = $1",
            )
            .bind(&key)
            .bind(&refund.id)
            .execute(&mut **tx)
            .await?;
            if let Some(order_id) = order_id {
                // the money did not go back after all
                sqlx::query(
                    "update orders set state = 'refund_pending', updated_at = now() \
                      where id = $1 and state = 'refunded'",
                )
                .bind(order_id)
                .execute(&mut **tx)
                .await?;
            }
            RefundMove::Reopened
        }
        RefundStatus::Succeeded | RefundStatus::Failed => RefundMove::Noted,
        // the worker keeps the id of the refund it asked for; an event
        // about some refund of the payment proves nothing about the job
        RefundStatus::Pending if ours => {
            sqlx::query(
                "update outbox_jobs \
                    set payload = payload || jsonb_build_object('refund_id', $2::text) \
                  where dedupe_key = $1 and state = 'pending' and payload->>'refund_id' is null",
            )
            .bind(&key)
            .bind(&refund.id)
            .execute(&mut **tx)
            .await?;
            RefundMove::Noted
        }
        RefundStatus::Pending => RefundMove::Noted,
    };
    Ok(moved)
}
#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_are_what_every_provider_accepts_and_never_random() {
        let key = idempotency_key("refund:razorpay:pay_ABC123", 0);
        assert_eq!(key.len(), 64);
        assert!(key.bytes().all(|b| b.is_ascii_alphanumeric()));
        assert_eq!(key, idempotency_key("refund:razorpay:pay_ABC123", 0));
        assert_ne!(key, idempotency_key("refund:razorpay:pay_ABC123", 1));
        assert_ne!(key, idempotency_key("refund:razorpay:pay_ABC124", 0));
    }
}
