//! Checkouts combined per resource. A flash sale is many shoppers checking
//! out the same thing at once (a ticket tier, a seated section, a table
//! time): each checkout needs the resource's row lock twice (to hold and
//! write the order; to start the payment phase after the provider
//! answered), and the lock is held until the commit reaches disk.
//! [`Checkouts`] sends the checkouts waiting for the same resources
//! together, one call for each step (`hf_start_checkouts`, whatever the
//! lines claim; `hf_attach_payments`), as the engine's
//! [`crate::inventory::HoldBatches`] does for holds. The sections of one
//! seated event queue together: a call reads their free seats once under
//! its locks and chooses every best-available line of it in memory
//! ([`FreeSeats`]), so a seated on-sale goes in calls as large as a
//! ticket tier's. Each shopper still gets their own answer, and an order
//! is still written in the same transaction as its holds and their pins.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use chrono::{DateTime, SubsecRound, Utc};
use sqlx::PgPool;
use uuid::Uuid;

use super::attach::payment_window_seconds;
use super::seats_ahead::SeatsAhead;
use super::start::{Checkout, Plan, Planned, StartRow, outcome, plan};
use super::{
    AttachOutcome, CheckoutError, CheckoutRead, CheckoutStart, Order, OrderState, Result,
    StartOutcome, attach_payment, basket, order_by_id,
};
use crate::batching::{Batch, Combiner, share_error};
use crate::catalogue::seats::{FreeSeats, Pick};
use crate::live::LiveStock;
use crate::payments::PaymentPage;

/// Most checkouts one call carries.
pub const MAX_BATCH: usize = 256;

/// The shop's way into checkout: combined where it can be. Cheap to clone.
#[derive(Debug, Clone)]
pub struct Checkouts {
    pool: PgPool,
    starts: Combiner<Starts>,
    attaches: Combiner<Attaches>,
    /// Best seats chosen from memory, when they are.
    ahead: Option<SeatsAhead>,
    /// What each one-resource checkout queued with (its resource, or its
    /// seated event's sections), so that its payment starts with theirs.
    queues: Arc<Mutex<HashMap<String, String>>>,
}

impl Checkouts {
    /// Checkouts that read every free seat under their locks.
    pub fn new(pool: PgPool) -> Self {
        Self::started(pool, None)
    }

    /// Checkouts whose best seats are chosen from memory's seats ahead of
    /// the locks ([`super::seats_ahead`]): the shop's.
    pub fn remembering(pool: PgPool, live: LiveStock) -> Self {
        Self::started(pool, Some(SeatsAhead::new(live)))
    }

    fn started(pool: PgPool, ahead: Option<SeatsAhead>) -> Self {
        Self {
            starts: Combiner::new(Starts {
                pool: pool.clone(),
                ahead: ahead.clone(),
            }),
            ahead,
            attaches: Combiner::new(Attaches { pool: pool.clone() }),
            queues: Arc::default(),
            pool,
        }
    }

    /// [`super::start_checkout`], combined with the other checkouts of the
    /// same resources (a seated event's sections: the same event) waiting
    /// at the same moment.
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
    /// basket is emptied if the order is on its way to pay. For an order
    /// that holds one resource (`resource` from [`StartOutcome::Started`])
    /// it is one combined call with the other orders of what its checkout
    /// queued with: that resource, or its seated event's sections.
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
            resource: resource.to_owned(),
            order_id: order.id,
            window_seconds: payment_window_seconds(session.expires_at),
            session_id: session.id.clone(),
            url: session.url.clone(),
            expires_at: session.expires_at,
            basket_id: basket_id.map(str::to_owned),
        };
        // combined with the payments of the checkouts it queued with
        let queue = self
            .queues
            .lock()
            .ok()
            .and_then(|q| q.get(resource).cloned())
            .unwrap_or_else(|| resource.to_owned());
        let (status, state) = self.attaches.call(&queue, one).await?;
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

    /// Remembers what a one-resource checkout queues with, when that is
    /// more than its resource (a seated event's sections): one entry a
    /// resource.
    fn queued(&self, planned: &Planned) {
        if let Some(resource) = &planned.resource
            && *resource != planned.key
            && let Ok(mut queues) = self.queues.lock()
        {
            queues
                .entry(resource.clone())
                .or_insert_with(|| planned.key.clone());
        }
    }

    /// Calls made so far: (checkout starts, payment starts).
    pub fn calls(&self) -> (u64, u64) {
        (self.starts.calls(), self.attaches.calls())
    }

    /// Checkout starts whose best seats were chosen from memory so far.
    pub fn seats_chosen_ahead(&self) -> u64 {
        self.ahead.as_ref().map_or(0, SeatsAhead::calls)
    }
}

/// Step one of checkout: in one transaction, the pending order and a hold on
/// every line. Nothing is held when anything is short. (The shop goes
/// through [`Checkouts::start`], which combines concurrent checkouts of the
/// same resources; this is the same call with nobody to combine with.)
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
        Plan::Decided(outcome) => *outcome,
        Plan::Start(planned) => {
            let row = match combined {
                Some(combined) => {
                    combined.queued(&planned);
                    combined.starts.call(&planned.key, planned.clone()).await?
                }
                None => start_batch(pool, None, std::slice::from_ref(&planned))
                    .await?
                    .pop()
                    .ok_or_else(|| CheckoutError::Database(sqlx::Error::RowNotFound))?,
            };
            outcome(pool, &planned, row).await?
        }
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
    crate::metrics::checkout(outcome.word());
    Ok(outcome)
}

struct Starts {
    pool: PgPool,
    ahead: Option<SeatsAhead>,
}

impl Batch for Starts {
    type Request = Arc<Planned>;
    type Reply = Result<StartRow>;
    const MAX: usize = MAX_BATCH;

    async fn run(&self, _key: &str, requests: Vec<Arc<Planned>>) -> Vec<Result<StartRow>> {
        let ahead = self.ahead.as_ref();
        match start_batch(&self.pool, ahead, &requests).await {
            // the database refused the call for what one checkout carried
            // (a constraint, bad input): the call wrote nothing, and each
            // runs again alone, so that checkout's error is its own
            Err(error) if requests.len() > 1 && refused_by_the_database(&error) => {
                let mut alone = Vec::with_capacity(requests.len());
                for request in &requests {
                    let answer =
                        start_batch(&self.pool, ahead, std::slice::from_ref(request)).await;
                    alone.extend(each(1, answer));
                }
                alone
            }
            answers => each(requests.len(), answers),
        }
    }

    fn lost() -> Result<StartRow> {
        Err(lost())
    }
}

/// The database answered the call with an error that running it again
/// whole would meet again (not a lost connection, a deadlock or a
/// serialization failure: those are run again whole, by the caller).
fn refused_by_the_database(error: &CheckoutError) -> bool {
    match error {
        CheckoutError::InvalidInput(_) => true,
        CheckoutError::Database(error) => {
            error.as_database_error().is_some()
                && matches!(crate::retry::classify(error), crate::retry::Failure::Final)
        }
        CheckoutError::Inventory(_) => false,
    }
}

/// One call of `hf_start_checkouts`: the checkouts given, each decided in
/// turn under the locks of all their resources, answered in the order
/// given. When a line asks for the best seats of a section, the batch
/// chooses every such line first, in the checkouts' order ([`FreeSeats`]):
/// from memory's seats when it may ([`SeatsAhead`]; one statement, which
/// checks the seats under its locks), else from a read of its sections'
/// free seats under its locks, in the transaction that pins them.
async fn start_batch(
    pool: &PgPool,
    ahead: Option<&SeatsAhead>,
    requests: &[Arc<Planned>],
) -> Result<Vec<StartRow>> {
    let checkouts: Vec<_> = requests.iter().map(|r| &r.checkout).collect();
    let mut sections: Vec<&str> = checkouts
        .iter()
        .flat_map(|c| c.lines.iter())
        .filter(|l| l.best_seats().is_some())
        .map(|l| l.resource.as_str())
        .collect();
    if sections.is_empty() {
        return call_start(pool, "hf_start_checkouts", sqlx::types::Json(checkouts)).await;
    }
    sections.sort_unstable();
    sections.dedup();
    if let Some(ahead) = ahead
        && let Some(mut free) = ahead.free(&sections)
    {
        let chosen = choose(&checkouts, &mut free, true)?;
        let rows = call_start(pool, "hf_start_checkouts_chosen", sqlx::types::Json(chosen)).await?;
        // the seats given, as the call says them (whoever chose them), are
        // left by the next choice
        for (resource, ids) in rows.iter().flat_map(StartRow::pinned) {
            ahead.pinned(resource, ids);
        }
        return Ok(rows);
    }
    let mut limit_keys: Vec<&str> = checkouts.iter().flat_map(|c| c.limit_keys()).collect();
    let mut resources: Vec<&str> = checkouts.iter().flat_map(|c| c.resources()).collect();
    for keys in [&mut limit_keys, &mut resources] {
        keys.sort_unstable();
        keys.dedup();
    }
    let mut tx = pool.begin().await.map_err(classify)?;
    let mut free = FreeSeats::read(&mut tx, &limit_keys, &resources)
        .await
        .map_err(classify)?;
    let chosen = choose(&checkouts, &mut free, false)?;
    let rows = call_start(&mut *tx, "hf_start_checkouts", sqlx::types::Json(chosen)).await?;
    tx.commit().await.map_err(classify)?;
    Ok(rows)
}

/// The checkouts as `hf_start_checkouts` takes them, each best-available
/// line with the seats the batch chose for it (`chosen`, labels as
/// `seats`) or, read under the locks, the split offered when no stretch
/// holds them (`apart`: memory's seats of holds past their time are swept
/// only under the locks, so memory never says that). A line given neither
/// is chosen by the call.
fn choose(
    checkouts: &[&Checkout],
    free: &mut FreeSeats,
    from_memory: bool,
) -> Result<Vec<serde_json::Value>> {
    let mut chosen = Vec::with_capacity(checkouts.len());
    let mut keys = std::collections::HashSet::new();
    for checkout in checkouts {
        let mut value = serde_json::to_value(checkout)
            .map_err(|e| CheckoutError::Database(sqlx::Error::Protocol(e.to_string())))?;
        // a form sent twice in one call is answered as its first: it takes
        // no seats of its own
        let first = keys.insert(checkout.key.as_str());
        for (k, line) in checkout.lines.iter().enumerate().filter(|_| first) {
            let Some((qty, together)) = line.best_seats() else {
                continue;
            };
            match free.choose(&line.resource, qty, together) {
                Some(Pick::Seats(seats)) => {
                    value["lines"][k]["seats"] = serde_json::json!(seats.labels);
                    value["lines"][k]["chosen"] = serde_json::json!(seats.ids);
                }
                Some(Pick::Apart {
                    offer,
                    split_allowed,
                }) if !from_memory => {
                    value["lines"][k]["apart"] = serde_json::json!({
                        "offers": [offer],
                        "split_allowed": split_allowed,
                    });
                }
                // fewer seats free than it asks, or no stretch in memory:
                // the call says
                _ => {}
            }
        }
        chosen.push(value);
    }
    Ok(chosen)
}

/// `function` (`hf_start_checkouts`, or `hf_start_checkouts_chosen` for
/// seats chosen ahead of its locks) on these checkouts.
async fn call_start<'e, T>(
    db: impl sqlx::PgExecutor<'e>,
    function: &'static str,
    checkouts: sqlx::types::Json<T>,
) -> Result<Vec<StartRow>>
where
    T: serde::Serialize + Send + Sync + 'e,
{
    sqlx::query_as(&format!(
        "select status, order_id, hold_id, number, created_at, detail from {function}($1)"
    ))
    .bind(checkouts)
    .fetch_all(db)
    .await
    .map_err(classify)
}

/// One started order's payment phase, as `hf_attach_payments` takes it.
#[derive(Debug, Clone)]
struct OneAttach {
    resource: String,
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
        _queue: &str,
        requests: Vec<OneAttach>,
    ) -> Vec<Result<(String, Option<OrderState>)>> {
        each(requests.len(), attach_batch(&self.pool, &requests).await)
    }

    fn lost() -> Result<(String, Option<OrderState>)> {
        Err(lost())
    }
}

async fn attach_batch(
    pool: &PgPool,
    requests: &[OneAttach],
) -> Result<Vec<(String, Option<OrderState>)>> {
    let windows: Vec<i32> = requests
        .iter()
        .map(|r| i32::try_from(r.window_seconds).unwrap_or(i32::MAX))
        .collect();
    sqlx::query_as("select status, order_state from hf_attach_payments($1, $2, $3, $4, $5, $6, $7)")
        .bind(
            requests
                .iter()
                .map(|r| r.resource.as_str())
                .collect::<Vec<_>>(),
        )
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

/// A refusal raised by the functions (`hf_bad_input`) is bad input; any
/// other failure stays a database error.
fn classify(error: sqlx::Error) -> CheckoutError {
    match error.as_database_error() {
        Some(db) if db.code().as_deref() == Some("22023") => {
            CheckoutError::InvalidInput(db.message().to_owned())
        }
        _ => CheckoutError::Database(error),
    }
}

/// One answer for each of the `n` requests of a call: its own row, or the
/// call's failure.
fn each<T>(n: usize, answers: Result<Vec<T>>) -> Vec<Result<T>> {
    match answers {
        Ok(rows) if rows.len() == n => rows.into_iter().map(Ok).collect(),
        Ok(rows) => {
            let error = sqlx::Error::Protocol(format!("{} answers for {n} requests", rows.len()));
            (0..n)
                .map(|_| Err(CheckoutError::Database(share_error(&error))))
                .collect()
        }
        Err(error) => (0..n).map(|_| Err(share(&error))).collect(),
    }
}

/// One failure, told to every checkout of the call.
fn share(error: &CheckoutError) -> CheckoutError {
    match error {
        CheckoutError::InvalidInput(message) => CheckoutError::InvalidInput(message.clone()),
        CheckoutError::Database(error) => CheckoutError::Database(share_error(error)),
        CheckoutError::Inventory(error) => {
            CheckoutError::Database(sqlx::Error::Protocol(error.to_string()))
        }
    }
}

fn lost() -> CheckoutError {
    CheckoutError::Database(sqlx::Error::Protocol(
        "the combined checkout call ended without an answer".into(),
    ))
}
