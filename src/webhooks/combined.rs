//! Payment webhooks for orders of one resource, confirmed together. After a
//! flash sale opens, the payments arrive in a burst: every confirmation
//! needs the tier's row lock, held until its commit reaches the disk, so
//! one at a time they queue on that lock with a commit each. [`Webhooks`]
//! sends the deliveries waiting for the same resource through one
//! transaction (the same [`Combiner`] as holds and checkouts): their event
//! ids are recorded in one statement, then the new ones' payments go
//! through the confirm routine together (`confirm_payments_in`: a few
//! statements for the batch, each payment decided as it would be alone),
//! and the batch commits once. Each delivery still gets its own verdict. If
//! the batch fails, each delivery is tried again on its own, so one bad
//! delivery cannot fail the others.

use sqlx::PgPool;
use uuid::Uuid;

use super::{Verdict, receive_alone};
use crate::checkout::{CheckoutError, PaymentReport, Source, confirm_payments_in};
use crate::combine::{Batch, Combiner};
use crate::payments::{
    HeaderLookup, PaymentProvider, PaymentStatus, ProviderKind, ProviderPayment,
};

/// Most deliveries one transaction carries.
pub const MAX_BATCH: usize = 64;

/// The shop's way in for webhooks: combined where it can be. Cheap to
/// clone.
#[derive(Debug, Clone)]
pub struct Webhooks {
    pool: PgPool,
    confirmations: Combiner<Confirmations>,
}

/// A verified payment delivery for an order of one resource.
pub struct Delivered {
    provider: ProviderKind,
    event_id: String,
    event_kind: String,
    payment: ProviderPayment,
    order_id: Uuid,
}

struct Confirmations {
    pool: PgPool,
}

impl Webhooks {
    pub fn new(pool: PgPool) -> Self {
        Self {
            confirmations: Combiner::new(Confirmations { pool: pool.clone() }),
            pool,
        }
    }

    /// Receive one delivery (`now` is the current unix time). A captured
    /// payment for an order of one product goes through the combined
    /// transaction of that product's resource; anything else on its own.
    pub async fn receive(
        &self,
        provider: &dyn PaymentProvider,
        header: HeaderLookup<'_>,
        body: &[u8],
        now: i64,
    ) -> Result<Verdict, CheckoutError> {
        let delivery = match provider.verify_webhook(header, body, now) {
            Ok(delivery) => delivery,
            Err(reason) => return Ok(Verdict::Rejected { reason }),
        };
        if let crate::payments::ProviderEvent::Payment(payment) = &delivery.event
            && payment.status == PaymentStatus::Captured
            && let Some(page_id) = &payment.page_id
            && let Some((order_id, resource)) =
                one_product_order(&self.pool, provider.kind(), page_id).await?
        {
            let delivered = Delivered {
                provider: provider.kind(),
                event_id: delivery.event_id.clone(),
                event_kind: delivery.kind.clone(),
                payment: payment.clone(),
                order_id,
            };
            return self.confirmations.call(&resource, delivered).await;
        }
        receive_alone(&self.pool, provider.kind(), delivery).await
    }

    /// Combined transactions so far (for the curious and the tests).
    pub fn calls(&self) -> u64 {
        self.confirmations.calls()
    }
}

/// The order made on this page, if it holds one product (one hold), and
/// that hold's resource. Read without a lock: the batch locks and reads
/// again.
async fn one_product_order(
    pool: &PgPool,
    provider: ProviderKind,
    page_id: &str,
) -> sqlx::Result<Option<(Uuid, String)>> {
    sqlx::query_as(
        "select o.id, h.resource_id from orders o join holds h on h.id = o.hold_id \
          where o.provider = $1 and o.provider_session_id = $2 and h.basket_id is null",
    )
    .bind(provider.as_str())
    .bind(page_id)
    .fetch_optional(pool)
    .await
}

impl Batch for Confirmations {
    type Request = Delivered;
    type Reply = Result<Verdict, CheckoutError>;
    const MAX: usize = MAX_BATCH;

    async fn run(&self, _resource: &str, requests: Vec<Delivered>) -> Vec<Self::Reply> {
        let error = match together(&self.pool, &requests).await {
            Ok(verdicts) => return verdicts.into_iter().map(Ok).collect(),
            Err(error) => error,
        };
        if requests.len() == 1 {
            return vec![Err(error)];
        }
        tracing::warn!(%error, deliveries = requests.len(), "a combined confirmation failed; confirming each alone");
        let mut replies = Vec::with_capacity(requests.len());
        for delivered in &requests {
            replies.push(
                together(&self.pool, std::slice::from_ref(delivered))
                    .await
                    .map(|mut verdicts| verdicts.pop().unwrap_or(Verdict::Duplicate)),
            );
        }
        replies
    }

    fn lost() -> Self::Reply {
        Err(CheckoutError::Database(sqlx::Error::Protocol(
            "the combined confirmation ended without an answer".into(),
        )))
    }
}

/// The deliveries in one transaction: every event id recorded in one
/// statement (as `first_delivery` does one at a time), then the new ones'
/// payments through the confirm routine together, which locks their
/// orders in id order before their resource.
async fn together(pool: &PgPool, requests: &[Delivered]) -> Result<Vec<Verdict>, CheckoutError> {
    let mut tx = pool.begin().await?;
    // in one order whatever the batch, so two batches sharing an event id
    // wait for each other rather than deadlock
    let fresh: Vec<(String, String)> = sqlx::query_as(
        "insert into webhook_events (provider, event_id, event_type) \
         select * from unnest($1::text[], $2::text[], $3::text[]) order by 1, 2 \
         on conflict do nothing returning provider, event_id",
    )
    .bind(
        requests
            .iter()
            .map(|d| d.provider.as_str())
            .collect::<Vec<_>>(),
    )
    .bind(
        requests
            .iter()
            .map(|d| d.event_id.as_str())
            .collect::<Vec<_>>(),
    )
    .bind(
        requests
            .iter()
            .map(|d| d.event_kind.as_str())
            .collect::<Vec<_>>(),
    )
    .fetch_all(&mut *tx)
    .await?;
    let mut fresh: std::collections::HashSet<(String, String)> = fresh.into_iter().collect();
    let mut verdicts = vec![Verdict::Duplicate; requests.len()];
    let mut places = Vec::new();
    let mut reports = Vec::new();
    for (i, delivered) in requests.iter().enumerate() {
        // an id sent twice in one batch is new only the first time
        let key = (
            delivered.provider.as_str().to_owned(),
            delivered.event_id.clone(),
        );
        if fresh.remove(&key) {
            places.push(i);
            // the order made on its page, found before the batch as
            // `payment_event` would find it: a page is an order's for good
            reports.push(PaymentReport {
                order_id: delivered.order_id,
                payment: delivered.payment.clone(),
                source: Source::Webhook,
            });
        }
    }
    let fulfilments = confirm_payments_in(&mut tx, &reports).await?;
    for (i, fulfilment) in places.into_iter().zip(fulfilments) {
        verdicts[i] = Verdict::Confirmed { fulfilment };
    }
    tx.commit().await?;
    Ok(verdicts)
}
