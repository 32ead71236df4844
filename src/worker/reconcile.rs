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

use chrono::{DateTime, Utc};
use serde::Serialize;
use sqlx::PgPool;
use uuid::Uuid;

use crate::checkout::outbox::refund_key;
use crate::checkout::settle::{self, SettleError};
use crate::checkout::{self, Fulfilment, OrderState, Release, Source};
use crate::configuration::ReconcileTimes;
use crate::payments::{
    PageStatus, PaymentProvider, PaymentStatus, ProviderError, ProviderKind, ProviderPayment,
    Providers,
};

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
    /// Pending orders whose page the provider had closed unpaid, and
    /// settling ones whose debit failed: released.
    pub released: u64,
    /// Payments committed but not money yet, found settling (their orders
    /// moved into the settling phase, or were there already).
    pub settling: u64,
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
        self.settling += other.settling;
        self.finished += other.finished;
        self.failed += other.failed;
    }
}

#[derive(Debug, sqlx::FromRow)]
struct Due {
    id: Uuid,
    provider: ProviderKind,
    provider_session_id: String,
    state: OrderState,
    reconcile_attempts: i32,
    created_at: DateTime<Utc>,
    /// For an order that settled (or settles): when its holds' settling
    /// deadline plus grace is, after which money is late.
    settle_end: Option<DateTime<Utc>>,
}

/// The reconciler.
#[derive(Debug, Clone)]
pub struct Reconciler {
    pool: PgPool,
    /// The payments it settles, combined per resource like the shop's.
    confirmations: crate::checkout::Confirmations,
    payments: Providers,
    times: ReconcileTimes,
}

/// Checks given up on: the order is marked for staff after this many.
const MAX_ATTEMPTS: i32 = 30;

impl Reconciler {
    pub fn new(pool: PgPool, payments: Providers) -> Self {
        Self {
            confirmations: crate::checkout::Confirmations::new(pool.clone()),
            pool,
            payments,
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
                       and updated_at <= now() - case when state in ('pending', 'settling') \
                                                      then $1 else $2 end * interval '1 second' \
                     order by updated_at \
                     limit $3 \
                     for update skip locked) \
             returning id, provider, provider_session_id, state, reconcile_attempts, created_at, \
                       (select max(h.payment_deadline) from holds h \
                         where h.purchase_id = orders.hold_id \
                           and h.settle_deadline is not null) as settle_end",
        )
        .bind(self.times.first_check.as_secs_f64())
        .bind(self.times.settle_window.as_secs_f64())
        .bind(limit)
        .fetch_all(&self.pool)
        .await?;
        let mut report = ReconcileReport::default();
        for mut order in due {
            report.checked += 1;
            let result = match self.payments.for_order(order.provider) {
                Ok(provider) => self.check(provider.as_ref(), &order).await,
                Err(error) => Err(CheckError::Provider(error)),
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
                    // never before a settling payment's deadline plus grace
                    let give_up = order.reconcile_attempts >= MAX_ATTEMPTS
                        && !error.is_transient()
                        && !order.settling_now();
                    (give_up, format!("check failed: {error}"))
                }
            };
            if finished {
                report.finished += 1;
            }
            // the check may have moved the order into the settling phase:
            // its next check waits as a settling payment's does
            order.settle_end = settle_end(&self.pool, order.id).await?;
            self.record(&order, finished, &note).await?;
        }
        crate::metrics::reconciled(&[
            ("checked", report.checked),
            ("fulfilled", report.fulfilled),
            ("refund_queued", report.refunds_queued),
            ("already_known", report.already_known),
            ("released", report.released),
            ("settling", report.settling),
            ("finished", report.finished),
            ("failed", report.failed),
        ]);
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
        let backoff = order.backoff(Utc::now());
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
        .bind(backoff)
        .bind(note)
        .execute(&self.pool)
        .await?;
        Ok(())
    }

    /// Ask the provider about the order's page and bring every payment on
    /// it in: captured ones through the confirm routine, authorised ones
    /// captured first if the order still wants them, settling ones into
    /// the settling phase. The check is final when the page can take no
    /// more money and nothing on it is still in the air.
    async fn check(
        &self,
        provider: &dyn PaymentProvider,
        order: &Due,
    ) -> Result<Check, CheckError> {
        let page = provider.page(&order.provider_session_id).await?;
        let mut check = Check::default();
        let mut tally = Tally::default();
        for payment in page.payments {
            self.bring_in(provider, order, payment, &mut tally, &mut check.counts)
                .await?;
        }
        let (captured, in_flight) = (tally.captured, tally.in_flight);
        let settling = if in_flight > 0 {
            format!(", {in_flight} payment(s) not captured yet")
        } else {
            String::new()
        };
        match page.status {
            PageStatus::Open => {
                check.note = format!("the payment page is still open{settling}");
            }
            PageStatus::Expired if captured == 0 && order.state == OrderState::Pending => {
                // the expiry webhook was lost: give the units back now
                // rather than at the payment deadline
                check.counts.released +=
                    self.release(order, Release::PageExpiredAtProvider).await?;
                check.finished = in_flight == 0;
                check.note = format!("the payment page expired unpaid{settling}");
            }
            PageStatus::Complete
                if captured == 0
                    && in_flight == 0
                    && tally.failed > 0
                    && order.state == OrderState::Settling =>
            {
                // the debit failed and its webhook was lost: the units go
                // back now (and to the waiting list first), not at the
                // deadline
                check.counts.released += self
                    .release(order, Release::PaymentFailedAtProvider)
                    .await?;
                check.finished = true;
                check.note = "the settling payment failed at the provider".to_owned();
            }
            PageStatus::Expired | PageStatus::Complete => {
                check.finished = in_flight == 0;
                check.note =
                    format!("the payment page is closed, {captured} payment(s) captured{settling}");
            }
            // a page that never closes: once the order no longer waits,
            // this (later) check is the last, unless money is still in the air
            PageStatus::Endless => {
                check.finished = !matches!(order.state, OrderState::Pending | OrderState::Settling)
                    && in_flight == 0;
                check.note = format!("{captured} payment(s) captured on the order{settling}");
            }
        }
        Ok(check)
    }

    /// One payment on the page, brought in the way the other paths bring
    /// it in, and counted.
    async fn bring_in(
        &self,
        provider: &dyn PaymentProvider,
        order: &Due,
        payment: ProviderPayment,
        tally: &mut Tally,
        counts: &mut ReconcileReport,
    ) -> Result<(), CheckError> {
        match payment.status {
            PaymentStatus::Captured => {
                tally.captured += 1;
                self.confirm(provider, order, payment, counts).await?;
            }
            PaymentStatus::Authorized => {
                // captured if the order still wants it; otherwise left
                // to its provider, which gives it back by itself
                let fulfilment = self.settle(provider, order, payment).await?;
                if matches!(
                    fulfilment,
                    Fulfilment::NotCaptured { .. }
                        | Fulfilment::Mismatch {
                            refund_queued: false,
                            ..
                        }
                ) {
                    tally.in_flight += 1;
                } else {
                    tally.captured += 1;
                    count(&fulfilment, counts);
                }
            }
            // committed, not money yet: into the settling phase (the other
            // paths' reports may all have been lost), and in the air until
            // its money can no longer come
            PaymentStatus::Pending if order.money_may_come(Utc::now()) => {
                let fulfilment = self.settle(provider, order, payment).await?;
                count(&fulfilment, counts);
                tally.in_flight += 1;
            }
            // past the settling deadline plus grace (and Razorpay's polling
            // days): it never came
            PaymentStatus::Pending => {}
            PaymentStatus::Failed => tally.failed += 1,
            // money already given back: nothing to sell
            PaymentStatus::Refunded => {}
        }
        Ok(())
    }

    /// Release an order the provider says will not be paid; 1 if this
    /// released it.
    async fn release(&self, order: &Due, release: Release<'_>) -> Result<u64, CheckError> {
        let released = checkout::release_order(&self.pool, order.id, release)
            .await
            .map_err(CheckError::from_checkout)?;
        Ok(u64::from(released.is_some_and(|o| {
            matches!(o.state, OrderState::Expired | OrderState::Cancelled)
        })))
    }

    async fn settle(
        &self,
        provider: &dyn PaymentProvider,
        order: &Due,
        payment: ProviderPayment,
    ) -> Result<Fulfilment, CheckError> {
        settle::settle_payment(
            &self.confirmations,
            provider,
            order.id,
            payment,
            Source::Reconciliation,
        )
        .await
        .map_err(|error| match error {
            SettleError::Provider(error) => CheckError::Provider(error),
            SettleError::Checkout(error) => CheckError::from_checkout(error),
        })
    }

    async fn confirm(
        &self,
        provider: &dyn PaymentProvider,
        order: &Due,
        payment: ProviderPayment,
        counts: &mut ReconcileReport,
    ) -> Result<(), CheckError> {
        // the usual answer: a path already brought this payment in
        let known: bool = sqlx::query_scalar(
            "select exists (select 1 from orders where id = $1 and payment_ref = $2) \
                 or exists (select 1 from outbox_jobs where dedupe_key = $3)",
        )
        .bind(order.id)
        .bind(&payment.payment_ref)
        .bind(refund_key(payment.provider, &payment.payment_ref))
        .fetch_one(&self.pool)
        .await
        .map_err(CheckError::Database)?;
        if known {
            counts.already_known += 1;
            return Ok(());
        }
        let fulfilment = self.settle(provider, order, payment).await?;
        if matches!(fulfilment, Fulfilment::Fulfilled { .. }) {
            tracing::warn!(order = %order.id, "reconciliation found a payment no other path reported");
        }
        count(&fulfilment, counts);
        Ok(())
    }
}

/// When an order's settling deadline plus grace is, if its holds settled.
async fn settle_end(pool: &PgPool, order_id: Uuid) -> Result<Option<DateTime<Utc>>, sqlx::Error> {
    sqlx::query_scalar(
        "select max(h.payment_deadline) from orders o join holds h on h.purchase_id = o.hold_id \
          where o.id = $1 and h.settle_deadline is not null",
    )
    .bind(order_id)
    .fetch_one(pool)
    .await
}

/// The payments of one page, by what they are.
#[derive(Debug, Default)]
struct Tally {
    captured: u64,
    /// Not money yet, but may become money.
    in_flight: u64,
    failed: u64,
}

impl Due {
    /// Whether a settling payment's deadline plus grace is still ahead:
    /// its order's checks are never given up before it.
    fn settling_now(&self) -> bool {
        self.settle_end.is_some_and(|end| Utc::now() <= end)
    }

    /// Whether money still pending at the provider may still come: until
    /// the settling deadline plus grace (and a day after, for a bank's
    /// last word), or for a month when the order never settled.
    fn money_may_come(&self, now: DateTime<Utc>) -> bool {
        let until = match self.settle_end {
            Some(end) => end + chrono::Duration::days(1),
            None => self.created_at + chrono::Duration::days(30),
        };
        now <= until
    }

    /// Seconds to the next check. A page being paid for now: 1, 2, 4 …
    /// minutes, at most an hour. A payment settling over days: 1, 2, 4 …
    /// hours, at most twelve, and one check just after its deadline plus
    /// grace.
    fn backoff(&self, now: DateTime<Utc>) -> f64 {
        let tries = (self.reconcile_attempts - 1).clamp(0, 10);
        match self.settle_end {
            Some(end) if now < end => {
                let wait = (3600.0 * 2f64.powi(tries.min(4))).min(12.0 * 3600.0);
                let to_end = (end - now).num_seconds() as f64 + 60.0;
                wait.min(to_end).max(60.0)
            }
            _ => (60.0 * 2f64.powi(tries.min(6))).min(3600.0),
        }
    }
}

/// A payment reconciliation brought in, in the pass's counts.
fn count(fulfilment: &Fulfilment, counts: &mut ReconcileReport) {
    match fulfilment {
        Fulfilment::Fulfilled { .. } => counts.fulfilled += 1,
        Fulfilment::Settling { .. } => counts.settling += 1,
        Fulfilment::RefundQueued { .. }
        | Fulfilment::Mismatch {
            refund_queued: true,
            ..
        } => counts.refunds_queued += 1,
        Fulfilment::AlreadyFulfilled { .. }
        | Fulfilment::Flagged { .. }
        | Fulfilment::Mismatch { .. }
        | Fulfilment::NotCaptured { .. }
        | Fulfilment::Unknown => counts.already_known += 1,
    }
}

#[derive(Debug, Default)]
struct Check {
    finished: bool,
    note: String,
    counts: ReconcileReport,
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
