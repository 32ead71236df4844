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

use sqlx::PgPool;

use super::{HoldOutcome, HoldRequest, InventoryError, Result, hold_many};
use crate::batching::{self, Batch};

/// Most requests one call carries.
pub const MAX_BATCH: usize = 512;

/// Combines holds per resource for one process. Cheap to clone.
#[derive(Debug, Clone)]
pub struct HoldBatches {
    inner: batching::Combiner<Holds>,
}

impl HoldBatches {
    pub fn new(pool: PgPool) -> Self {
        Self {
            inner: batching::Combiner::new(Holds { pool }),
        }
    }

    /// How many database calls the holds so far took.
    pub fn calls(&self) -> u64 {
        self.inner.calls()
    }

    /// Hold units of one resource, as [`super::Inventory::hold`] does,
    /// together with whatever else is waiting for the same resource.
    pub async fn hold(&self, request: HoldRequest) -> Result<HoldOutcome> {
        let resource = request.resource.as_str().to_owned();
        self.inner.call(&resource, request).await
    }
}

/// Holds on one resource, as `hf_hold_many` takes them.
struct Holds {
    pool: PgPool,
}

impl Batch for Holds {
    type Request = HoldRequest;
    type Reply = Result<HoldOutcome>;
    const MAX: usize = MAX_BATCH;

    async fn run(&self, _resource: &str, requests: Vec<HoldRequest>) -> Vec<Result<HoldOutcome>> {
        let mut replies = Vec::with_capacity(requests.len());
        // one call per run of equal TTLs, in arrival order
        let mut rest = requests;
        while !rest.is_empty() {
            let ttl = rest[0].ttl;
            let split = rest.iter().position(|r| r.ttl != ttl).unwrap_or(rest.len());
            let tail = rest.split_off(split);
            match hold_many(&self.pool, &rest).await {
                Ok(outcomes) => replies.extend(outcomes.into_iter().map(Ok)),
                Err(error) => replies.extend(rest.iter().map(|_| Err(share(&error)))),
            }
            rest = tail;
        }
        replies
    }

    fn lost() -> Result<HoldOutcome> {
        Err(InventoryError::Unexpected(
            "the combined call ended without an answer".into(),
        ))
    }
}

/// One failure, told to every request of the batch (errors do not clone).
fn share(error: &InventoryError) -> InventoryError {
    match error {
        InventoryError::InvalidInput(message) => InventoryError::InvalidInput(message.clone()),
        InventoryError::Unexpected(message) => InventoryError::Unexpected(message.clone()),
        InventoryError::Database(error) => {
            InventoryError::Database(crate::batching::share_error(error))
        }
    }
}
