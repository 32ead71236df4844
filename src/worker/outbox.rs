//! Work that must happen after a commit: refunds, confirmation messages,
//! closing a provider's payment page. A job is leased (its `run_after`
//! pushed ahead and its attempt counted, in a short transaction taken with
//! FOR UPDATE SKIP LOCKED), then executed with no lock held, then marked
//! done or given its error and a later `run_after`. A worker that dies mid
//! job leaves the lease to run out and another worker repeats the job with
//! the same provider idempotency key, so a refund happens once. Nothing is
//! ever dropped.

use serde::Serialize;
use sqlx::PgPool;

use crate::checkout::outbox::{OutboxJob, RefundJob};
use crate::checkout::refund::{self, RefundMove};
use crate::checkout::{Source, settle};
use crate::payments::{ProviderError, Providers, RefundRequest, RefundStatus, RefundView};

/// Which jobs a worker loop takes. Outgoing webhooks go to receivers the
/// shop does not run, which may take 15 seconds to fail each; they have a
/// lane of their own, so a dead receiver never delays a refund, a
/// capture or a shopper's mail.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Lane {
    /// Every kind (tests, `holdfast worker --once`).
    All,
    /// Every kind but outgoing webhooks.
    Shop,
    /// Outgoing webhooks only.
    Webhooks,
}

/// What one pass did.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "outcome", rename_all = "snake_case")]
pub enum JobOutcome {
    /// Nothing was due.
    Idle,
    Done {
        id: i64,
        kind: String,
    },
    /// It failed; it will be tried again at its next `run_after`.
    Failed {
        id: i64,
        kind: String,
        error: String,
    },
}

#[derive(Debug, sqlx::FromRow)]
struct Job {
    id: i64,
    kind: String,
    dedupe_key: String,
    payload: serde_json::Value,
    attempts: i32,
}

/// What a job did, when it worked.
enum Done {
    /// Finished.
    Plain,
    /// A refund the provider reports finished: closed through its order.
    Refund(crate::payments::ProviderKind, RefundView),
}

/// The outbox worker.
#[derive(Debug, Clone)]
pub struct Outbox {
    pool: PgPool,
    /// The payments it settles, combined per resource like the shop's.
    confirmations: crate::checkout::Confirmations,
    payments: Providers,
    lease: std::time::Duration,
    /// Where shoppers' mail goes; without one, messages are only logged.
    mailer: Option<crate::worker::mail::Mailer>,
    /// Outgoing webhooks; without it, their jobs wait for a worker that
    /// has it.
    webhooks: Option<crate::outgoing::Deliveries>,
}

impl Outbox {
    pub fn new(pool: PgPool, payments: Providers) -> Self {
        Self {
            confirmations: crate::checkout::Confirmations::new(pool.clone()),
            pool,
            payments,
            lease: std::time::Duration::from_secs(120),
            mailer: None,
            webhooks: None,
        }
    }

    /// Deliver outgoing webhooks through `deliveries`.
    pub fn with_webhooks(mut self, deliveries: crate::outgoing::Deliveries) -> Self {
        self.webhooks = Some(deliveries);
        self
    }

    /// Send the shoppers' mail through `mailer`.
    pub fn with_mailer(mut self, mailer: Option<crate::worker::mail::Mailer>) -> Self {
        self.mailer = mailer;
        self
    }

    /// How long a taken job is left to its worker before another may take
    /// it (default two minutes). Keep it above the providers' timeout
    /// (20 s), so a slow call never runs alongside its own retry.
    pub fn with_lease(mut self, lease: std::time::Duration) -> Self {
        self.lease = lease;
        self
    }

    /// Take one due job, of any kind, and run it.
    pub async fn run_once(&self) -> Result<JobOutcome, sqlx::Error> {
        self.run_once_in(Lane::All).await
    }

    /// Take one due job of `lane` and run it.
    pub async fn run_once_in(&self, lane: Lane) -> Result<JobOutcome, sqlx::Error> {
        let webhooks = match lane {
            Lane::All => None,
            Lane::Shop => Some(false),
            Lane::Webhooks => Some(true),
        };
        // lease: long enough for a slow provider, short enough to recover
        let job: Option<Job> = sqlx::query_as(
            "update outbox_jobs \
                set run_after = now() + $1 * interval '1 second', attempts = attempts + 1 \
              where id = (select id from outbox_jobs \
                           where state = 'pending' and run_after <= now() \
                             and ($2::boolean is null or (kind = 'webhook') = $2) \
                           order by run_after, id \
                           for update skip locked \
                           limit 1) \
             returning id, kind, dedupe_key, payload, attempts",
        )
        .bind(self.lease.as_secs_f64())
        .bind(webhooks)
        .fetch_optional(&self.pool)
        .await?;
        let Some(job) = job else {
            return Ok(JobOutcome::Idle);
        };
        let result = self.execute(&job).await;
        match result {
            Ok(done) => {
                let mut tx = self.pool.begin().await?;
                // a refund closes through its order (order lock, then job);
                // other jobs touch only themselves; a sent invite's link
                // token leaves the database with it (only its hash stays)
                if let Done::Refund(provider, refund) = &done {
                    refund::refund_moved_in(&mut tx, *provider, refund, Some(&job.dedupe_key))
                        .await?;
                }
                sqlx::query(
                    "update outbox_jobs set state = 'done', done_at = coalesce(done_at, now()), \
                            last_error = null, \
                            payload = case when kind = 'staff_invite' \
                                           then payload - 'token' else payload end \
                      where id = $1 and state = 'pending'",
                )
                .bind(job.id)
                .execute(&mut *tx)
                .await?;
                tx.commit().await?;
                tracing::info!(job = job.id, kind = %job.kind, "outbox job done");
                Ok(JobOutcome::Done {
                    id: job.id,
                    kind: job.kind,
                })
            }
            Err(error) => {
                let message = error.to_string();
                // 2, 4, 8 … seconds, at most an hour between tries
                let backoff = 2f64.powi(job.attempts.clamp(1, 12)).min(3600.0);
                sqlx::query(
                    "update outbox_jobs \
                        set last_error = $2, run_after = now() + $3 * interval '1 second' \
                      where id = $1 and state = 'pending'",
                )
                .bind(job.id)
                .bind(&message)
                .bind(backoff)
                .execute(&self.pool)
                .await?;
                tracing::warn!(job = job.id, kind = %job.kind, attempts = job.attempts, error = %message, "outbox job failed; will retry");
                Ok(JobOutcome::Failed {
                    id: job.id,
                    kind: job.kind,
                    error: message,
                })
            }
        }
    }

    /// Run every due job until none is left.
    pub async fn drain(&self) -> Result<Vec<JobOutcome>, sqlx::Error> {
        self.drain_lane(Lane::All).await
    }

    /// Run every due job of `lane` until none is left.
    pub async fn drain_lane(&self, lane: Lane) -> Result<Vec<JobOutcome>, sqlx::Error> {
        let mut outcomes = Vec::new();
        loop {
            match self.run_once_in(lane).await? {
                JobOutcome::Idle => return Ok(outcomes),
                outcome => outcomes.push(outcome),
            }
        }
    }

    async fn execute(&self, job: &Job) -> Result<Done, ProviderError> {
        let typed = OutboxJob::parse(&job.kind, &job.payload).map_err(ProviderError::Unexpected)?;
        match typed {
            OutboxJob::Refund(refund) => self.refund(job, &refund).await,
            OutboxJob::Webhook {
                endpoint_id,
                message_id,
            } => match &self.webhooks {
                Some(deliveries) => deliveries
                    .deliver(job.id, &endpoint_id, &message_id)
                    .await
                    .map(|_| Done::Plain)
                    .map_err(ProviderError::Unavailable),
                None => Err(ProviderError::Unavailable(
                    "this worker does not deliver webhooks".into(),
                )),
            },
            OutboxJob::ClosePage {
                provider, page_id, ..
            } => {
                self.payments
                    .for_order(provider)?
                    .close_page(&page_id)
                    .await?;
                Ok(Done::Plain)
            }
            OutboxJob::CapturePayment { order_id, payment } => {
                let provider = self.payments.for_order(payment.provider)?;
                match settle::settle_payment(
                    &self.confirmations,
                    provider.as_ref(),
                    order_id,
                    payment,
                    Source::Capture,
                )
                .await
                {
                    Ok(fulfilment) => {
                        tracing::info!(order = %order_id, ?fulfilment, "authorised payment settled");
                        Ok(Done::Plain)
                    }
                    Err(settle::SettleError::Provider(error)) => Err(error),
                    Err(settle::SettleError::Checkout(error)) => {
                        Err(ProviderError::Unavailable(format!("the database: {error}")))
                    }
                }
            }
            OutboxJob::OrderConfirmation { order_id } => match &self.mailer {
                Some(mailer) => {
                    mailer
                        .order_confirmation(&self.pool, order_id)
                        .await
                        .map_err(|e| ProviderError::Unavailable(e.to_string()))?;
                    tracing::info!(order = %order_id, "order confirmation sent");
                    Ok(Done::Plain)
                }
                None => {
                    // no mail server: the order page carries the codes
                    tracing::info!(order = %order_id, "order confirmation not mailed: no mail server");
                    Ok(Done::Plain)
                }
            },
            OutboxJob::OrderSettling { order_id } => match &self.mailer {
                Some(mailer) => {
                    mailer
                        .order_settling(&self.pool, order_id)
                        .await
                        .map_err(|e| ProviderError::Unavailable(e.to_string()))?;
                    tracing::info!(order = %order_id, "payment settling notice sent");
                    Ok(Done::Plain)
                }
                None => {
                    // no mail server: the order page says it
                    tracing::info!(order = %order_id, "payment settling notice not mailed: no mail server");
                    Ok(Done::Plain)
                }
            },
            OutboxJob::PaymentReturned {
                order_id,
                payment,
                reason,
            } => match &self.mailer {
                Some(mailer) => {
                    mailer
                        .payment_returned(&self.pool, order_id, &payment, &reason)
                        .await
                        .map_err(|e| ProviderError::Unavailable(e.to_string()))?;
                    tracing::info!(order = %order_id, payment = %payment.payment_ref, "payment returned notice sent");
                    Ok(Done::Plain)
                }
                None => {
                    tracing::info!(order = %order_id, payment = %payment.payment_ref, "payment returned notice not mailed: no mail server");
                    Ok(Done::Plain)
                }
            },
            OutboxJob::WaitlistMail { entry_id, offer } => match &self.mailer {
                Some(mailer) => {
                    mailer
                        .waitlist_mail(&self.pool, entry_id, offer)
                        .await
                        .map_err(|e| ProviderError::Unavailable(e.to_string()))?;
                    tracing::info!(entry = %entry_id, offer, "waiting-list mail sent");
                    Ok(Done::Plain)
                }
                None => {
                    tracing::info!(entry = %entry_id, offer, "waiting-list mail not sent: no mail server");
                    Ok(Done::Plain)
                }
            },
            OutboxJob::StaffInvite { invite_id, token } => match &self.mailer {
                Some(mailer) => {
                    mailer
                        .staff_invite(&self.pool, invite_id, &token)
                        .await
                        .map_err(|e| ProviderError::Unavailable(e.to_string()))?;
                    tracing::info!(invite = invite_id, "staff invite sent");
                    Ok(Done::Plain)
                }
                None => {
                    tracing::info!(invite = invite_id, "staff invite not sent: no mail server");
                    Ok(Done::Plain)
                }
            },
            OutboxJob::RefundNotice {
                order_id,
                refund_id,
            } => match &self.mailer {
                Some(mailer) => {
                    mailer
                        .refund_notice(&self.pool, order_id, refund_id)
                        .await
                        .map_err(|e| ProviderError::Unavailable(e.to_string()))?;
                    tracing::info!(order = %order_id, refund = refund_id, "refund notice sent");
                    Ok(Done::Plain)
                }
                None => {
                    tracing::info!(order = %order_id, refund = refund_id, "refund notice not mailed: no mail server");
                    Ok(Done::Plain)
                }
            },
        }
    }

    /// One step of a refund: ask for it (the key is the job's and its
    /// generation's, never random), or, once its id is known, read how it
    /// is doing. Pending is a failure to retry later; a refund the provider
    /// failed opens a new generation.
    async fn refund(&self, job: &Job, refund: &RefundJob) -> Result<Done, ProviderError> {
        let provider = self.payments.for_order(refund.provider)?;
        let generation = job.payload["reopened"].as_i64().unwrap_or(0);
        let view = match job.payload["refund_id"].as_str() {
            Some(refund_id) => provider.refund(refund_id).await?,
            None => {
                let view = provider
                    .create_refund(&RefundRequest {
                        payment_ref: refund.payment_ref.clone(),
                        amount_minor: refund.amount_minor,
                        idempotency_key: refund::idempotency_key(&job.dedupe_key, generation),
                        order_id: refund.order_id,
                    })
                    .await?;
                // a worker killed here leaves the job to another, which asks
                // with the same key and gets the same refund
                crate::faults::crash_point("after_refund_call");
                if view.payment_ref != refund.payment_ref {
                    return Err(ProviderError::Unexpected(format!(
                        "asked to refund {}, the provider refunded {}",
                        refund.payment_ref, view.payment_ref
                    )));
                }
                view
            }
        };
        match view.status {
            RefundStatus::Succeeded => Ok(Done::Refund(refund.provider, view)),
            RefundStatus::Pending | RefundStatus::Failed => {
                // keep its id (pending), or open a new generation (failed)
                let mut tx = self
                    .pool
                    .begin()
                    .await
                    .map_err(|e| ProviderError::Unavailable(format!("the database: {e}")))?;
                let moved =
                    refund::refund_moved_in(&mut tx, refund.provider, &view, Some(&job.dedupe_key))
                        .await
                        .map_err(|e| ProviderError::Unavailable(format!("the database: {e}")))?;
                tx.commit()
                    .await
                    .map_err(|e| ProviderError::Unavailable(format!("the database: {e}")))?;
                Err(match moved {
                    RefundMove::Reopened => ProviderError::refused(
                        402,
                        format!(
                            "the provider failed refund {}; it will be tried again",
                            view.id
                        ),
                    ),
                    _ => ProviderError::Unavailable(format!(
                        "refund {} is not finished at the provider yet",
                        view.id
                    )),
                })
            }
        }
    }
}
