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

use crate::checkout::{self, Provider};
use crate::payments::razorpay::RazorpayAdapter;
use crate::payments::stripe::StripeAdapter;
use crate::payments::{ProviderError, RefundState};

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

/// The outbox worker.
#[derive(Debug, Clone)]
pub struct Outbox {
    pool: PgPool,
    stripe: StripeAdapter,
    razorpay: Option<RazorpayAdapter>,
    lease: std::time::Duration,
}

impl Outbox {
    pub fn new(pool: PgPool, stripe: StripeAdapter) -> Self {
        Self {
            pool,
            stripe,
            razorpay: None,
            lease: std::time::Duration::from_secs(120),
        }
    }

    /// How long a taken job is left to its worker before another may take
    /// it (default two minutes). Keep it above the providers' timeout
    /// (20 s), so a slow call never runs alongside its own retry.
    pub fn with_lease(mut self, lease: std::time::Duration) -> Self {
        self.lease = lease;
        self
    }

    /// Refunds of Razorpay payments go through this adapter.
    pub fn with_razorpay(mut self, razorpay: Option<RazorpayAdapter>) -> Self {
        self.razorpay = razorpay;
        self
    }

    /// Take one due job and run it.
    pub async fn run_once(&self) -> Result<JobOutcome, sqlx::Error> {
        // lease: long enough for a slow provider, short enough to recover
        let job: Option<Job> = sqlx::query_as(
            "update outbox_jobs \
                set run_after = now() + $1 * interval '1 second', attempts = attempts + 1 \
              where id = (select id from outbox_jobs \
                           where state = 'pending' and run_after <= now() \
                           order by run_after, id \
                           for update skip locked \
                           limit 1) \
             returning id, kind, dedupe_key, payload, attempts",
        )
        .bind(self.lease.as_secs_f64())
        .fetch_optional(&self.pool)
        .await?;
        let Some(job) = job else {
            return Ok(JobOutcome::Idle);
        };
        let result = self.execute(&job).await;
        match result {
            Ok(()) => {
                if job.kind == "refund" {
                    crate::faults::crash_point("after_refund_call");
                }
                let mut tx = self.pool.begin().await?;
                // a refund closes through its order (order lock, then job);
                // other jobs touch only themselves
                if job.kind == "refund"
                    && let Some(payment_ref) = job.payload["payment_ref"].as_str()
                {
                    let provider = match job.payload["provider"].as_str() {
                        Some("razorpay") => Provider::Razorpay,
                        _ => Provider::Stripe,
                    };
                    checkout::close_refund_in(&mut tx, provider, payment_ref)
                        .await
                        .map_err(|e| sqlx::Error::Protocol(e.to_string()))?;
                }
                sqlx::query(
                    "update outbox_jobs set state = 'done', done_at = coalesce(done_at, now()), \
                            last_error = null \
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
        let mut outcomes = Vec::new();
        loop {
            match self.run_once().await? {
                JobOutcome::Idle => return Ok(outcomes),
                outcome => outcomes.push(outcome),
            }
        }
    }

    async fn execute(&self, job: &Job) -> Result<(), ProviderError> {
        let text = |field: &str| {
            job.payload[field]
                .as_str()
                .map(str::to_owned)
                .ok_or_else(|| ProviderError::Unexpected(format!("job {} has no {field}", job.id)))
        };
        match job.kind.as_str() {
            "refund" => {
                // the key is the job's, never random: a repeat is the same
                // refund; a refund the provider failed gets a new generation
                let key = match job.payload["reopened"].as_i64() {
                    Some(n) if n > 0 => format!("{}:r{n}", job.dedupe_key),
                    _ => job.dedupe_key.clone(),
                };
                let payment_ref = text("payment_ref")?;
                let (_, state) = match text("provider")?.as_str() {
                    "stripe" => self.stripe.refund(&payment_ref, &key).await?,
                    "razorpay" => match &self.razorpay {
                        Some(razorpay) => razorpay.refund(&payment_ref, &key).await?,
                        None => {
                            return Err(ProviderError::Unexpected(
                                "no Razorpay keys are configured for this refund".into(),
                            ));
                        }
                    },
                    other => {
                        return Err(ProviderError::Unexpected(format!("no adapter for {other}")));
                    }
                };
                match state {
                    RefundState::Settled => Ok(()),
                    // asked again later with the same key: the same refund
                    RefundState::Pending => Err(ProviderError::Unavailable(
                        "the refund is not finished at the provider yet".into(),
                    )),
                    RefundState::Failed => {
                        // the same key would only repeat the failure
                        sqlx::query(
                            "update outbox_jobs set payload = jsonb_set(payload, '{reopened}', \
                                    to_jsonb(coalesce((payload->>'reopened')::int, 0) + 1)) \
                              where id = $1",
                        )
                        .bind(job.id)
                        .execute(&self.pool)
                        .await
                        .map_err(|e| ProviderError::Unexpected(e.to_string()))?;
                        Err(ProviderError::Refused {
                            status: 402,
                            message: "the provider failed the refund; it will be tried again"
                                .into(),
                        })
                    }
                }
            }
            "expire_session" => match self.stripe.expire_session(&text("session_id")?).await {
                Ok(_) => Ok(()),
                // already complete or expired: nothing left to close; any
                // other refusal (auth, rate limit) is retried
                Err(ProviderError::Refused { status: 400, .. }) => Ok(()),
                Err(error) => Err(error),
            },
            "order_confirmation" => {
                // No mailer is configured; the order page carries the codes.
                tracing::info!(order = %job.payload["order_id"], "order confirmation recorded");
                Ok(())
            }
            other => Err(ProviderError::Unexpected(format!(
                "unknown job kind {other}"
            ))),
        }
    }
}
