//! Reconciliation: when neither the webhook nor the shopper's return told us
//! what became of a payment page, ask the provider, and feed what it says
//! into the same confirm routine the other paths use. A lost webhook and a
//! lost return still end in a fulfilled order or a refund.
//!
//! Which orders: those with a provider session and no final check yet,
//! once they have been quiet for a while. A pending order is checked
//! `first_check` after its payment page opened, then again with a growing
//! wait while the page stays open. An order that left `pending` (paid,
//! expired, cancelled, refunded) gets one last check `settle_window` after
//! that, because money can still land on a page we closed (Razorpay orders
//! never close; a Stripe expiry can race a payment).
//!
//! A check is final when the provider can no longer take money for the
//! order and everything it took went through the confirm routine. Checks
//! are leased like outbox jobs (`reconcile_after` pushed ahead with FOR
//! UPDATE SKIP LOCKED), so any number of workers can run them; a check
//! repeated by a second worker only confirms what is confirmed already.

use std::time::Duration;

use serde::Serialize;
use sqlx::PgPool;
use uuid::Uuid;

use crate::checkout::{self, Fulfilment, PaymentReport, Provider};
use crate::inventory::PaymentRef;
use crate::payments::ProviderError;
use crate::payments::razorpay::RazorpayAdapter;
use crate::payments::stripe::StripeAdapter;

/// When orders are checked.
#[derive(Debug, Clone, Copy)]
pub struct ReconcileTimes {
    /// How long a pending order's payment page may be quiet before we ask.
    pub first_check: Duration,
    /// How long after an order left `pending` its last check waits.
    pub settle_window: Duration,
}

impl Default for ReconcileTimes {
    fn default() -> Self {
        Self {
            first_check: Duration::from_secs(10 * 60),
            settle_window: Duration::from_secs(60 * 60),
        }
    }
}

impl ReconcileTimes {
    /// Check everything now: for `simulate`, tests and the command line.
    pub fn immediately() -> Self {
        Self {
            first_check: Duration::ZERO,
            settle_window: Duration::ZERO,
        }
    }
}

/// What one pass found, in counts.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct ReconcileReport {
    /// Orders asked about.
    pub checked: u64,
    /// Payments the provider had that we had not confirmed: now fulfilled.
    pub fulfilled: u64,
    /// Payments that go back (late, duplicate): refund jobs queued.
    pub refunds_queued: u64,
    /// Payments already known (the usual answer).
    pub already_known: u64,
    /// Pending orders whose page the provider had closed unpaid: released.
    pub released: u64,
    /// Orders checked for the last time.
    pub finished: u64,
    /// Checks that failed (provider unreachable, unreadable answer); retried.
    pub failed: u64,
}

impl ReconcileReport {
    /// Sum another pass into this one.
    pub fn add(&mut self, other: &ReconcileReport) {
        self.checked += other.checked;
        self.fulfilled += other.fulfilled;
        self.refunds_queued += other.refunds_queued;
        self.already_known += other.already_known;
        self.released += other.released;
        self.finished += other.finished;
        self.failed += other.failed;
    }
}

#[derive(Debug, sqlx::FromRow)]
struct Due {
    id: Uuid,
    provider: String,
    provider_session_id: String,
    state: String,
    reconcile_attempts: i32,
}

/// The reconciler.
#[derive(Debug, Clone)]
pub struct Reconciler {
    pool: PgPool,
    stripe: StripeAdapter,
    razorpay: Option<RazorpayAdapter>,
    times: ReconcileTimes,
}

/// Checks given up on: the order is marked for staff after this many.
const MAX_ATTEMPTS: i32 = 30;

impl Reconciler {
    pub fn new(pool: PgPool, stripe: StripeAdapter, razorpay: Option<RazorpayAdapter>) -> Self {
        Self {
            pool,
            stripe,
            razorpay,
            times: ReconcileTimes::default(),
        }
    }

    pub fn with_times(mut self, times: ReconcileTimes) -> Self {
        self.times = times;
        self
    }

    /// Lease up to `limit` due orders and check each one.
    pub async fn run_once(&self, limit: i64) -> Result<ReconcileReport, sqlx::Error> {
        let due: Vec<Due> = sqlx::query_as(
            "update orders set reconcile_after = now() + interval '2 minutes', \
                    reconcile_attempts = reconcile_attempts + 1 \
              where id in ( \
                    select id from orders \
                     where reconciled_at is null and provider_session_id is not null \
                       and (reconcile_after is null or reconcile_after <= now()) \
                       and updated_at <= now() - case when state = 'pending' \
                                                      then $1 else $2 end * interval '1 second' \
                     order by updated_at \
                     limit $3 \
                     for update skip locked) \
             returning id, provider, provider_session_id, state, reconcile_attempts",
        )
        .bind(self.times.first_check.as_secs_f64())
        .bind(self.times.settle_window.as_secs_f64())
        .bind(limit)
        .fetch_all(&self.pool)
        .await?;
        let mut report = ReconcileReport::default();
        for order in due {
            report.checked += 1;
            let result = match order.provider.as_str() {
                "stripe" => self.check_stripe(&order).await,
                "razorpay" => self.check_razorpay(&order).await,
                other => Err(CheckError::Provider(ProviderError::Unexpected(format!(
                    "no adapter for {other}"
                )))),
            };
            let (finished, note) = match result {
                Ok(check) => {
                    report.add(&check.counts);
                    (check.finished, check.note)
                }
                Err(CheckError::Database(error)) => return Err(error),
                Err(CheckError::Provider(error)) => {
                    report.failed += 1;
                    tracing::warn!(order = %order.id, %error, "reconciliation check failed; will retry");
                    let give_up = order.reconcile_attempts >= MAX_ATTEMPTS && !error.is_transient();
                    (give_up, format!("check failed: {error}"))
                }
            };
            if finished {
                report.finished += 1;
            }
            self.record(&order, finished, &note).await?;
        }
        crate::metrics::reconciled(&report);
        Ok(report)
    }

    /// Check until nothing is due.
    pub async fn drain(&self) -> Result<ReconcileReport, sqlx::Error> {
        let mut total = ReconcileReport::default();
        loop {
            let pass = self.run_once(200).await?;
            total.add(&pass);
            if pass.checked == 0 {
                return Ok(total);
            }
        }
    }

    /// Remember the check: final, or the next one after a growing wait.
    async fn record(&self, order: &Due, finished: bool, note: &str) -> Result<(), sqlx::Error> {
        // 1, 2, 4 … minutes, at most an hour between checks
        let backoff = 60.0 * 2f64.powi((order.reconcile_attempts - 1).clamp(0, 6));
        let note: String = note.chars().take(500).collect();
        sqlx::query(
            "update orders \
                set reconciled_at = case when $2 then now() end, \
                    reconcile_after = now() + $3 * interval '1 second', \
                    reconcile_note = $4 \
              where id = $1",
        )
        .bind(order.id)
        .bind(finished)
        .bind(backoff.min(3600.0))
        .bind(note)
        .execute(&self.pool)
        .await?;
        Ok(())
    }

    async fn check_stripe(&self, order: &Due) -> Result<Check, CheckError> {
        // one session takes one payment: a settled order has nothing more
        // to learn from it
        if matches!(order.state.as_str(), "paid" | "refund_pending" | "refunded") {
            return Ok(Check::finished("settled through the usual paths"));
        }
        let session = self
            .stripe
            .retrieve_session(&order.provider_session_id)
            .await?;
        let mut check = Check::default();
        if session.paid
            && let Some(intent) = &session.payment_intent
        {
            self.confirm(order, Provider::Stripe, intent, &mut check.counts)
                .await?;
        }
        match session.status.as_deref() {
            Some("open") => {
                check.note = "the payment page is still open".into();
            }
            Some("expired") if !session.paid && order.state == "pending" => {
                // the expiry webhook was lost: give the units back now
                // rather than at the payment deadline
                let released = checkout::release_order(
                    &self.pool,
                    order.id,
                    "session_expired",
                    "reconciler",
                    "expired",
                )
                .await
                .map_err(CheckError::from_checkout)?;
                if released.is_some_and(|o| o.state == "expired") {
                    check.counts.released += 1;
                }
                check.finished = true;
                check.note = "the payment page expired unpaid".into();
            }
            status => {
                check.finished = true;
                check.note = format!(
                    "the payment page is {}{}",
                    status.unwrap_or("closed"),
                    if session.paid { ", paid" } else { "" }
                );
            }
        }
        Ok(check)
    }

    async fn check_razorpay(&self, order: &Due) -> Result<Check, CheckError> {
        let Some(razorpay) = &self.razorpay else {
            return Err(CheckError::Provider(ProviderError::Unexpected(
                "no Razorpay keys are configured".into(),
            )));
        };
        let payments = razorpay.order_payments(&order.provider_session_id).await?;
        let mut check = Check::default();
        let mut authorised = 0;
        for payment in &payments {
            match payment.status.as_str() {
                // money we hold (or held and gave back): it must have gone
                // through the confirm routine
                "captured" | "refunded" => {
                    self.confirm(order, Provider::Razorpay, &payment.id, &mut check.counts)
                        .await?;
                }
                // not ours yet: captured later or refunded by Razorpay
                "authorized" | "created" => authorised += 1,
                _ => {}
            }
        }
        // a Razorpay order never closes; once ours has left `pending`, this
        // (later) check is the last, unless a payment is still in the air
        let closed = order.state != "pending";
        check.finished = closed && authorised == 0;
        check.note = format!(
            "{} payment(s) on the order, {authorised} not captured yet",
            payments.len()
        );
        Ok(check)
    }

    async fn confirm(
        &self,
        order: &Due,
        provider: Provider,
        payment_id: &str,
        counts: &mut ReconcileReport,
    ) -> Result<(), CheckError> {
        let Ok(payment_ref) = PaymentRef::parse(payment_id) else {
            return Err(CheckError::Provider(ProviderError::Unexpected(
                "the provider gave a malformed payment id".into(),
            )));
        };
        // the usual answer: a path already brought this payment in
        let known: bool = sqlx::query_scalar(
            "select exists (select 1 from orders where id = $1 and payment_ref = $2) \
                 or exists (select 1 from outbox_jobs where dedupe_key = $3)",
        )
        .bind(order.id)
        .bind(payment_id)
        .bind(format!("refund:{}:{payment_id}", provider.as_str()))
        .fetch_one(&self.pool)
        .await
        .map_err(CheckError::Database)?;
        if known {
            counts.already_known += 1;
            return Ok(());
        }
        let report = PaymentReport {
            order_id: order.id,
            provider,
            payment_ref,
            source: "reconciliation",
        };
        let fulfilment = checkout::confirm_payment(&self.pool, &report)
            .await
            .map_err(CheckError::from_checkout)?;
        match fulfilment {
            Fulfilment::Fulfilled { .. } => {
                tracing::warn!(order = %order.id, "reconciliation found a payment no other path reported");
                counts.fulfilled += 1;
            }
            Fulfilment::RefundQueued { .. } => counts.refunds_queued += 1,
            Fulfilment::AlreadyFulfilled { .. }
            | Fulfilment::Flagged { .. }
            | Fulfilment::Unknown => counts.already_known += 1,
        }
        Ok(())
    }
}

#[derive(Debug, Default)]
struct Check {
    finished: bool,
    note: String,
    counts: ReconcileReport,
}

impl Check {
    fn finished(note: &str) -> Self {
        Self {
            finished: true,
            note: note.into(),
            counts: ReconcileReport::default(),
        }
    }
}

#[derive(Debug)]
enum CheckError {
    Provider(ProviderError),
    Database(sqlx::Error),
}

impl From<ProviderError> for CheckError {
    fn from(error: ProviderError) -> Self {
        Self::Provider(error)
    }
}

impl CheckError {
    fn from_checkout(error: checkout::CheckoutError) -> Self {
        match error {
            checkout::CheckoutError::Database(error) => Self::Database(error),
            other => Self::Provider(ProviderError::Unexpected(other.to_string())),
        }
    }
}
