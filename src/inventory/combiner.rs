//! Combining concurrent holds. Every hold on one resource queues on that
//! resource's row lock, and the lock is held until the commit reaches disk,
//! so one hot resource is limited to one commit's worth of holds at a time.
//! The combiner keeps one call per resource in flight: holds that arrive
//! meanwhile wait in that resource's queue, and when the call returns the
//! whole queue goes as the next call (`hf_hold_many`), decided under one
//! lock and committed once. A lone hold goes at once; no timer ever waits.
//!
//! Each request still gets its own outcome. Several processes each combine
//! their own holds; the database still serialises them on the row lock, and
//! the CHECK on `resources` is still the last word.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use sqlx::PgPool;
use tokio::sync::oneshot;

use super::{HoldOutcome, HoldRequest, InventoryError, Result, hold_many};

/// Most requests one call carries.
pub const MAX_BATCH: usize = 512;

/// Combines holds per resource for one process. Cheap to clone.
#[derive(Debug, Clone)]
pub struct Combiner {
    pool: PgPool,
    queues: Queues,
    /// Calls made to the database so far (for the curious and the tests).
    calls: Arc<AtomicU64>,
}

type Queues = Arc<Mutex<HashMap<String, Arc<Queue>>>>;

#[derive(Debug, Default)]
struct Queue {
    state: Mutex<QueueState>,
}

#[derive(Debug, Default)]
struct QueueState {
    waiting: Vec<Waiting>,
    /// A call for this resource is in flight (its task drains the queue).
    flying: bool,
}

#[derive(Debug)]
struct Waiting {
    request: HoldRequest,
    reply: oneshot::Sender<Result<HoldOutcome>>,
}

impl Combiner {
    pub fn new(pool: PgPool) -> Self {
        Self {
            pool,
            queues: Arc::default(),
            calls: Arc::default(),
        }
    }

    /// How many database calls the holds so far took.
    pub fn calls(&self) -> u64 {
        self.calls.load(Ordering::Relaxed)
    }

    /// Hold units of one resource, as [`super::Inventory::hold`] does,
    /// together with whatever else is waiting for the same resource.
    pub async fn hold(&self, request: HoldRequest) -> Result<HoldOutcome> {
        let request_resource = request.resource.as_str().to_owned();
        let queue = self.queue(&request_resource);
        let (reply, answer) = oneshot::channel();
        let lead = {
            let mut state = queue.state.lock().expect("queue lock");
            state.waiting.push(Waiting { request, reply });
            !std::mem::replace(&mut state.flying, true)
        };
        if lead {
            // its own task: a caller that goes away (a closed connection)
            // must not strand the others waiting behind it
            let flight = Flight {
                pool: self.pool.clone(),
                queues: self.queues.clone(),
                resource: request_resource,
                queue,
                calls: self.calls.clone(),
                landed: false,
            };
            tokio::spawn(flight.drain());
        }
        answer.await.unwrap_or_else(|_| {
            Err(InventoryError::Unexpected(
                "the combined call ended without an answer".into(),
            ))
        })
    }

    fn queue(&self, resource: &str) -> Arc<Queue> {
        let mut queues = self.queues.lock().expect("queues lock");
        queues.entry(resource.to_owned()).or_default().clone()
    }
}

/// The task that sends one resource's queue, call after call, until it is
/// empty. If it ends any other way (a panic, a runtime shutting down), its
/// drop lets the queue fly again and tells those waiting.
struct Flight {
    pool: PgPool,
    queues: Queues,
    resource: String,
    queue: Arc<Queue>,
    calls: Arc<AtomicU64>,
    landed: bool,
}

impl Flight {
    async fn drain(mut self) {
        loop {
            // Callers just answered are runnable now and about to ask
            // again: one turn of the scheduler lets them join this call
            // instead of each leading a call of one. A yield, not a timer.
            tokio::task::yield_now().await;
            let batch: Vec<Waiting> = {
                let mut state = self.queue.state.lock().expect("queue lock");
                // a caller that stopped waiting before its call went out
                // gets no hold, as a direct call never sent would not
                state.waiting.retain(|w| !w.reply.is_closed());
                if state.waiting.is_empty() {
                    state.flying = false;
                    drop(state);
                    self.landed = true;
                    self.forget_if_idle();
                    return;
                }
                let take = state.waiting.len().min(MAX_BATCH);
                state.waiting.drain(..take).collect()
            };
            // one call per run of equal TTLs, in arrival order
            let mut rest = batch;
            while !rest.is_empty() {
                let ttl = rest[0].request.ttl;
                let split = rest
                    .iter()
                    .position(|w| w.request.ttl != ttl)
                    .unwrap_or(rest.len());
                let tail = rest.split_off(split);
                self.calls.fetch_add(1, Ordering::Relaxed);
                send(&self.pool, rest).await;
                rest = tail;
            }
        }
    }

    /// An idle queue leaves the map, so made-up resource ids cannot grow it.
    fn forget_if_idle(&self) {
        let mut queues = self.queues.lock().expect("queues lock");
        let idle = {
            let state = self.queue.state.lock().expect("queue lock");
            !state.flying && state.waiting.is_empty()
        };
        if idle
            && queues
                .get(&self.resource)
                .is_some_and(|q| Arc::ptr_eq(q, &self.queue))
        {
            queues.remove(&self.resource);
        }
    }
}

impl Drop for Flight {
    fn drop(&mut self) {
        if self.landed {
            return;
        }
        // dropping the waiting senders answers their callers with an error
        if let Ok(mut state) = self.queue.state.lock() {
            state.waiting.clear();
            state.flying = false;
        }
    }
}

async fn send(pool: &PgPool, batch: Vec<Waiting>) {
    let requests: Vec<HoldRequest> = batch.iter().map(|w| w.request.clone()).collect();
    match hold_many(pool, &requests).await {
        Ok(outcomes) => {
            for (waiting, outcome) in batch.into_iter().zip(outcomes) {
                // a caller that stopped waiting has its hold all the same,
                // as it would with a direct call
                let _ = waiting.reply.send(Ok(outcome));
            }
        }
        Err(error) => {
            for waiting in batch {
                let _ = waiting.reply.send(Err(share(&error)));
            }
        }
    }
}

/// One failure, told to every request of the batch (errors do not clone).
fn share(error: &InventoryError) -> InventoryError {
    match error {
        InventoryError::InvalidInput(message) => InventoryError::InvalidInput(message.clone()),
        InventoryError::Unexpected(message) => InventoryError::Unexpected(message.clone()),
        InventoryError::Database(sqlx::Error::PoolTimedOut) => {
            InventoryError::Database(sqlx::Error::PoolTimedOut)
        }
        InventoryError::Database(sqlx::Error::PoolClosed) => {
            InventoryError::Database(sqlx::Error::PoolClosed)
        }
        InventoryError::Database(sqlx::Error::Io(io)) => InventoryError::Database(sqlx::Error::Io(
            std::io::Error::new(io.kind(), io.to_string()),
        )),
        InventoryError::Database(other) => InventoryError::Unexpected(other.to_string()),
    }
}
