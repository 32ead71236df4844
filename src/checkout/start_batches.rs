//! Checkouts of one product, combined per resource. A flash sale is many
//! shoppers checking out the same ticket tier at once: each checkout needs
//! the tier's row lock twice (to hold and write the order; to start the
//! payment phase after the provider answered), and the lock is held until
//! the commit reaches disk. [`Checkouts`] sends the checkouts waiting for the
//! same resource together, one call for each step (`hf_start_checkouts`,
//! `hf_attach_payments`), as the engine's [`crate::inventory::HoldBatches`]
//! does for holds. Each shopper still gets their own answer, and an order is
//! still written in the same transaction as its hold.

use chrono::{DateTime, SubsecRound, Utc};
use sqlx::PgPool;
use uuid::Uuid;

use super::attach::payment_window_seconds;
use super::one_answer::{StartRow, classify, each, lost, one_outcome};
use super::seat_batches::{OneSeatStart, SeatCombiner, SeatStarts, start_seats};
use super::start::{OneStart, Plan, plan, start_basket};
use super::{
    AttachOutcome, CheckoutError, CheckoutRead, CheckoutStart, Order, OrderState, Result,
    StartOutcome, attach_payment, basket, order_by_id,
};
use crate::batching::{Batch, Combiner};
use crate::payments::PaymentPage;

/// Most checkouts one call carries.
pub const MAX_BATCH: usize = 256;

/// The shop's way into checkout: combined where it can be. Cheap to clone.
#[derive(Debug, Clone)]
pub struct Checkouts {
    pool: PgPool,
    starts: Combiner<Starts>,
    /// A seated section's checkouts, their seats chosen in the call.
    seats: SeatCombiner,
    attaches: Combiner<Attaches>,
}

impl Checkouts {
    pub fn new(pool: PgPool) -> Self {
        Self {
            starts: Combiner::new(Starts { pool: pool.clone() }),
            seats: Combiner::new(SeatStarts { pool: pool.clone() }),
            attaches: Combiner::new(Attaches { pool: pool.clone() }),
            pool,
        }
    }

    /// [`super::start_checkout`], combined with the other one-product
    /// checkouts of the same resource waiting at the same moment.
    pub async fn start(&self, start: &CheckoutStart) -> Result<StartOutcome> {
        start_checkout_via(&self.pool, Some(self), start, None).await
    }

    /// [`Checkouts::start`] with the prices and counters already read with
    /// the basket ([`super::read_checkout`]): a refusal needs no other query.
    pub async fn start_read(
        &self,
        start: &CheckoutStart,
        read: &CheckoutRead,
    ) -> Result<StartOutcome> {
        start_checkout_via(&self.pool, Some(self), start, Some(read)).await
    }

    /// [`super::attach_payment`] for a started order, then the shopper's
    /// basket is emptied if the order is on its way to pay. For a
    /// one-product checkout (`resource` from [`StartOutcome::Started`]) it
    /// is one combined call with the other orders of that resource.
    pub async fn attach(
        &self,
        order: Order,
        resource: Option<&str>,
        session: &PaymentPage,
        basket_id: Option<&str>,
    ) -> Result<AttachOutcome> {
        let Some(resource) = resource else {
            let attached = attach_payment(&self.pool, order.id, session).await?;
            if let (AttachOutcome::Paying { .. }, Some(basket_id)) = (&attached, basket_id) {
                basket::clear(&self.pool, basket_id).await?;
            }
            return Ok(attached);
        };
        let one = OneAttach {
            order_id: order.id,
            window_seconds: payment_window_seconds(session.expires_at),
            session_id: session.id.clone(),
            url: session.url.clone(),
            expires_at: session.expires_at,
            basket_id: basket_id.map(str::to_owned),
        };
        let (status, state) = self.attaches.call(resource, one).await?;
        let alive = matches!(
            status.as_str(),
            "awaiting_payment" | "replayed" | "confirmed"
        );
        match status.as_str() {
            "not_found" | "not_one_product" => {
                return Err(CheckoutError::InvalidInput(format!(
                    "no started one-product order {} of {resource}",
                    order.id
                )));
            }
            // the money got there first: the order as it is now, paid
            "confirmed" => {
                let order = order_by_id(&self.pool, order.id)
                    .await?
                    .ok_or_else(|| CheckoutError::Database(sqlx::Error::RowNotFound))?;
                return Ok(AttachOutcome::Paying { order });
            }
            _ => {}
        }
        let order = Order {
            provider_session_id: Some(session.id.clone()),
            provider_url: Some(session.url.clone()),
            // as stored: PostgreSQL keeps microseconds
            provider_expires_at: Some(session.expires_at.trunc_subsecs(6)),
            state: state.unwrap_or(order.state),
            ..order
        };
        Ok(if alive {
            AttachOutcome::Paying { order }
        } else {
            AttachOutcome::Ended { order }
        })
    }

    /// Calls made so far: (checkout starts, payment starts).
    pub fn calls(&self) -> (u64, u64) {
        (self.starts.calls(), self.attaches.calls())
    }

    /// Calls of `hf_start_seat_checkouts` made so far (seated sections'
    /// checkouts, combined).
    pub fn seat_calls(&self) -> u64 {
        self.seats.calls()
    }
}

/// Step one of checkout: in one transaction, the pending order and a hold on
/// every line. Nothing is held when anything is short. (The shop goes
/// through [`Checkouts::start`], which combines concurrent checkouts of one
/// product; this is the same with nobody to combine with.)
pub async fn start_checkout(pool: &PgPool, start: &CheckoutStart) -> Result<StartOutcome> {
    start_checkout_via(pool, None, start, None).await
}

async fn start_checkout_via(
    pool: &PgPool,
    combined: Option<&Checkouts>,
    start: &CheckoutStart,
    read: Option<&CheckoutRead>,
) -> Result<StartOutcome> {
    let mut outcome = match plan(pool, start, read).await? {
        Plan::Decided(outcome) => outcome,
        Plan::OneProduct {
            one,
            lines,
            resource,
        } => {
            let row = match combined {
                Some(combined) => combined.starts.call(&resource, one.clone()).await?,
                None => start_batch(pool, &resource, std::slice::from_ref(&one))
                    .await?
                    .pop()
                    .ok_or_else(|| CheckoutError::Database(sqlx::Error::RowNotFound))?,
            };
            one_outcome(pool, one, row, lines, resource).await?
        }
        Plan::OneSection {
            one,
            pick,
            lines,
            resource,
        } => {
            let seats = combined.map(|c| &c.seats);
            start_seats(pool, seats, OneSeatStart { one, pick }, lines, resource).await?
        }
        Plan::Basket(priced) => start_basket(pool, start, priced).await?,
    };
    // a start run again after its commit's answer was lost: the order it
    // finds is its own (the token is this submit's), written and held with
    // its lines in that commit, so it goes on from there
    if let StartOutcome::AlreadyStarted { order } = &outcome
        && order.token == start.order_token
    {
        outcome = StartOutcome::Started {
            lines: super::order_lines(pool, order.id).await?,
            order: order.clone(),
            resource: None,
        };
    }
    crate::metrics::checkout(match &outcome {
        StartOutcome::Started { .. } => "started",
        StartOutcome::AlreadyStarted { .. } => "already_started",
        StartOutcome::Unavailable { .. } => "unavailable",
        StartOutcome::OverLimit { .. } => "over_limit",
        StartOutcome::UnknownProducts { .. } => "unknown_products",
        StartOutcome::NotOnSale { .. } => "not_on_sale",
        StartOutcome::Locked { .. } => "locked",
        StartOutcome::VoucherRefused { .. } => "voucher_refused",
        StartOutcome::SeatsRefused { .. } => "seats_refused",
    });
    Ok(outcome)
}

struct Starts {
    pool: PgPool,
}

impl Batch for Starts {
    type Request = OneStart;
    type Reply = Result<StartRow>;
    const MAX: usize = MAX_BATCH;

    async fn run(&self, resource: &str, requests: Vec<OneStart>) -> Vec<Result<StartRow>> {
        each(
            requests.len(),
            start_batch(&self.pool, resource, &requests).await,
        )
    }

    fn lost() -> Result<StartRow> {
        Err(lost())
    }
}

/// One call of `hf_start_checkouts`: the checkouts of one resource, answered
/// in the order given.
async fn start_batch(
    pool: &PgPool,
    resource: &str,
    requests: &[OneStart],
) -> Result<Vec<StartRow>> {
    let column = |f: fn(&OneStart) -> &str| -> Vec<&str> { requests.iter().map(f).collect() };
    let mut rows: Vec<StartRow> = sqlx::query_as(
        "select status, order_id, hold_id, available, created_at \
           from hf_start_checkouts($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, \
                                   $13, $14, $15, $16)",
    )
    .bind(resource)
    .bind(column(|r| &r.key))
    .bind(column(|r| &r.account))
    .bind(requests.iter().map(|r| r.qty).collect::<Vec<_>>())
    .bind(column(|r| &r.product))
    .bind(column(|r| &r.product_name))
    .bind(requests.iter().map(|r| r.unit_price).collect::<Vec<_>>())
    .bind(column(|r| &r.currency))
    .bind(column(|r| &r.token))
    .bind(column(|r| &r.name))
    .bind(column(|r| &r.email))
    .bind(column(|r| r.provider.as_str()))
    .bind(
        requests
            .iter()
            .map(|r| r.email_key.as_deref())
            .collect::<Vec<_>>(),
    )
    .bind(
        requests
            .iter()
            .map(|r| r.address.as_ref().map(|(a, _)| a.as_str()))
            .collect::<Vec<_>>(),
    )
    .bind(requests.iter().map(|r| r.email_cap).collect::<Vec<_>>())
    .bind(
        requests
            .iter()
            .map(|r| r.address.as_ref().map(|(_, cap)| *cap))
            .collect::<Vec<_>>(),
    )
    .fetch_all(pool)
    .await?;
    // the numbers the database drew for the orders it started: one read
    // for the whole batch
    let started: Vec<Uuid> = rows
        .iter()
        .filter(|row| row.status == "started")
        .filter_map(|row| row.order_id)
        .collect();
    if !started.is_empty() {
        #[derive(sqlx::FromRow)]
        struct Numbered {
            id: Uuid,
            number: String,
        }
        let numbers: Vec<Numbered> =
            sqlx::query_as("select id, number from orders where id = any($1)")
                .bind(&started)
                .fetch_all(pool)
                .await?;
        for row in &mut rows {
            if let Some(found) = numbers.iter().find(|n| Some(n.id) == row.order_id) {
                row.number = found.number.clone();
            }
        }
    }
    Ok(rows).map_err(classify)
}

/// One started order's payment phase, as `hf_attach_payments` takes it.
#[derive(Debug, Clone)]
struct OneAttach {
    order_id: Uuid,
    window_seconds: i64,
    session_id: String,
    url: String,
    expires_at: DateTime<Utc>,
    basket_id: Option<String>,
}

struct Attaches {
    pool: PgPool,
}

impl Batch for Attaches {
    type Request = OneAttach;
    /// The engine's answer and the order's state after.
    type Reply = Result<(String, Option<OrderState>)>;
    const MAX: usize = MAX_BATCH;

    async fn run(
        &self,
        resource: &str,
        requests: Vec<OneAttach>,
    ) -> Vec<Result<(String, Option<OrderState>)>> {
        each(
            requests.len(),
            attach_batch(&self.pool, resource, &requests).await,
        )
    }

    fn lost() -> Result<(String, Option<OrderState>)> {
        Err(lost())
    }
}

async fn attach_batch(
    pool: &PgPool,
    resource: &str,
    requests: &[OneAttach],
) -> Result<Vec<(String, Option<OrderState>)>> {
    let windows: Vec<i32> = requests
        .iter()
        .map(|r| i32::try_from(r.window_seconds).unwrap_or(i32::MAX))
        .collect();
    sqlx::query_as("select status, order_state from hf_attach_payments($1, $2, $3, $4, $5, $6, $7)")
        .bind(resource)
        .bind(requests.iter().map(|r| r.order_id).collect::<Vec<_>>())
        .bind(windows)
        .bind(
            requests
                .iter()
                .map(|r| r.session_id.as_str())
                .collect::<Vec<_>>(),
        )
        .bind(requests.iter().map(|r| r.url.as_str()).collect::<Vec<_>>())
        .bind(requests.iter().map(|r| r.expires_at).collect::<Vec<_>>())
        .bind(
            requests
                .iter()
                .map(|r| r.basket_id.as_deref())
                .collect::<Vec<_>>(),
        )
        .fetch_all(pool)
        .await
        .map_err(classify)
}
