//! Payments for orders of one resource, confirmed together. After a flash
//! sale opens, the payments arrive in a burst, reported by the shoppers
//! coming back and by the providers' webhooks: every confirmation needs the
//! tier's row lock, held until its commit reaches the disk, so one at a
//! time they queue on that lock with a commit each. [`Confirmations`]
//! sends the payments waiting for the same resource through one
//! transaction (the same [`Combiner`] as holds and checkouts): a webhook's
//! event id is recorded with its effect (all of the batch's in one
//! statement), then the payments go through the confirm routine together
//! ([`confirm_payments_in`]: a few statements for the batch, each payment
//! decided as it would be alone), and the batch commits once. Each payment
//! still gets its own answer. If the batch fails, each payment is tried
//! again on its own, so one bad report cannot fail the others. An order of
//! several products is confirmed on its own, as a batch of one.

use std::collections::HashSet;

use sqlx::PgPool;
use uuid::Uuid;

use super::{CheckoutError, Fulfilment, PaymentReport, confirm_payments_in};
use crate::batching::{Batch, Combiner};
use crate::payments::ProviderKind;

/// Most payments one transaction carries.
pub const MAX_BATCH: usize = 64;

/// The shop's way to confirm a payment: combined where it can be. Cheap
/// to clone.
#[derive(Debug, Clone)]
pub struct Confirmations {
    pool: PgPool,
    combiner: Combiner<Together>,
}

/// A webhook's event, recorded together with the effect of its payment, so
/// each event changes things at most once.
#[derive(Debug, Clone)]
pub struct Seen {
    pub provider: ProviderKind,
    pub event_id: String,
    pub kind: String,
}

/// A payment waiting for its batch, and the event that reported it.
pub struct Waiting {
    seen: Option<Seen>,
    report: PaymentReport,
}

/// What became of one payment: `None` for an event seen before.
type Answer = Result<Option<Fulfilment>, CheckoutError>;

struct Together {
    pool: PgPool,
}

impl Confirmations {
    pub fn new(pool: PgPool) -> Self {
        Self {
            combiner: Combiner::new(Together { pool: pool.clone() }),
            pool,
        }
    }

    pub fn pool(&self) -> &PgPool {
        &self.pool
    }

    /// Confirm a payment reported for an order (the return, the worker,
    /// reconciliation).
    pub async fn confirm(&self, report: PaymentReport) -> Result<Fulfilment, CheckoutError> {
        let answer = self.send(Waiting { seen: None, report }).await?;
        Ok(answer.unwrap_or(Fulfilment::Unknown))
    }

    /// Confirm a payment a webhook reported, recording its event with the
    /// effect. `None`: the event was seen before, and nothing changed.
    pub async fn confirm_seen(
        &self,
        seen: Seen,
        report: PaymentReport,
    ) -> Result<Option<Fulfilment>, CheckoutError> {
        self.send(Waiting {
            seen: Some(seen),
            report,
        })
        .await
    }

    /// Combined transactions so far (for the curious and the tests).
    pub fn calls(&self) -> u64 {
        self.combiner.calls()
    }

    async fn send(&self, waiting: Waiting) -> Answer {
        let answer = match one_product_resource(&self.pool, waiting.report.order_id).await? {
            Some(resource) => self.combiner.call(&resource, waiting).await?,
            None => together(&self.pool, std::slice::from_ref(&waiting))
                .await
                .map(|mut answers| answers.pop().flatten())?,
        };
        crate::faults::lost_answer("confirmation")?;
        Ok(answer)
    }
}

/// The resource of an order that holds one product (one hold). Read
/// without a lock: the batch locks the order and decides again.
async fn one_product_resource(pool: &PgPool, order_id: Uuid) -> sqlx::Result<Option<String>> {
    sqlx::query_scalar(
        "select h.resource_id from orders o join holds h on h.id = o.hold_id \
          where o.id = $1 and h.basket_id is null",
    )
    .bind(order_id)
    .fetch_optional(pool)
    .await
}

impl Batch for Together {
    type Request = Waiting;
    type Reply = Answer;
    const MAX: usize = MAX_BATCH;

    async fn run(&self, _resource: &str, requests: Vec<Waiting>) -> Vec<Answer> {
        let error = match together(&self.pool, &requests).await {
            Ok(answers) => return answers.into_iter().map(Ok).collect(),
            Err(error) => error,
        };
        if requests.len() == 1 {
            return vec![Err(error)];
        }
        tracing::warn!(%error, payments = requests.len(), "a combined confirmation failed; confirming each alone");
        let mut answers = Vec::with_capacity(requests.len());
        for waiting in &requests {
            answers.push(
                together(&self.pool, std::slice::from_ref(waiting))
                    .await
                    .map(|mut answers| answers.pop().flatten()),
            );
        }
        answers
    }

    fn lost() -> Answer {
        Err(CheckoutError::Database(sqlx::Error::Protocol(
            "the combined confirmation ended without an answer".into(),
        )))
    }
}

/// The payments in one transaction: the webhooks' event ids recorded in
/// one statement (as `webhooks::first_delivery` does one at a time), then
/// the payments that are not repeats through the confirm routine together,
/// which locks their orders in id order before their resource.
async fn together(
    pool: &PgPool,
    batch: &[Waiting],
) -> Result<Vec<Option<Fulfilment>>, CheckoutError> {
    let mut tx = pool.begin().await?;
    let events: Vec<&Seen> = batch.iter().filter_map(|w| w.seen.as_ref()).collect();
    let mut fresh: HashSet<(String, String)> = if events.is_empty() {
        HashSet::new()
    } else {
        // in one order whatever the batch, so two batches sharing an event
        // id wait for each other rather than deadlock
        sqlx::query_as::<_, (String, String)>(
            "insert into webhook_events (provider, event_id, event_type) \
             select * from unnest($1::text[], $2::text[], $3::text[]) order by 1, 2 \
             on conflict do nothing returning provider, event_id",
        )
        .bind(
            events
                .iter()
                .map(|s| s.provider.as_str())
                .collect::<Vec<_>>(),
        )
        .bind(
            events
                .iter()
                .map(|s| s.event_id.as_str())
                .collect::<Vec<_>>(),
        )
        .bind(events.iter().map(|s| s.kind.as_str()).collect::<Vec<_>>())
        .fetch_all(&mut *tx)
        .await?
        .into_iter()
        .collect()
    };
    let mut places = Vec::new();
    let mut reports = Vec::new();
    for (i, waiting) in batch.iter().enumerate() {
        // an event sent twice in one batch is new only the first time
        let new = waiting.seen.as_ref().is_none_or(|seen| {
            fresh.remove(&(seen.provider.as_str().to_owned(), seen.event_id.clone()))
        });
        if new {
            places.push(i);
            reports.push(waiting.report.clone());
        }
    }
    let fulfilments = confirm_payments_in(&mut tx, &reports).await?;
    tx.commit().await?;
    let mut answers = vec![None; batch.len()];
    for ((i, report), fulfilment) in places.into_iter().zip(&reports).zip(fulfilments) {
        // a webhook's verdict is counted and logged by its route
        if batch[i].seen.is_none() {
            crate::metrics::confirmation(fulfilment.label(), report.source.as_str());
            tracing::info!(order = %report.order_id, source = report.source.as_str(), ?fulfilment, "payment confirmed");
        }
        answers[i] = Some(fulfilment);
    }
    Ok(answers)
}
