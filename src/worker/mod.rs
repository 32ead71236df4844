//! Background work: the sweeper, the outbox, reconciliation,
//! housekeeping and the pickup schedules' rolling window.

pub mod housekeeping;
pub mod mail;
pub mod outbox;
pub mod reconcile;
pub mod schedules;

use std::time::Duration;

use crate::inventory::{Inventory, InventoryError, SweepCount};

/// Expires due holds on a schedule. Any number of sweepers may run at once.
#[derive(Debug, Clone)]
pub struct Sweeper {
    inventory: Inventory,
    name: String,
    batch: u32,
}

impl Sweeper {
    pub fn new(inventory: Inventory, name: impl Into<String>) -> Self {
        Self {
            inventory,
            name: name.into(),
            batch: 1000,
        }
    }

    /// How many holds one sweep call may expire (at least 1).
    pub fn with_batch(mut self, batch: u32) -> Self {
        self.batch = batch.max(1);
        self
    }

    /// One pass: expire what is due, in batches, until nothing is left.
    pub async fn run_once(&self) -> Result<Vec<SweepCount>, InventoryError> {
        let mut all = Vec::new();
        loop {
            let counts = self.inventory.sweep(self.batch, &self.name).await?;
            let expired: i64 = counts.iter().map(|c| i64::from(c.expired_holds)).sum();
            all.extend(counts);
            if expired < i64::from(self.batch) {
                let swept: i64 = all.iter().map(|c| i64::from(c.expired_holds)).sum();
                crate::metrics::swept(swept.max(0) as u64);
                return Ok(all);
            }
        }
    }

    /// Sweep every `every` until the task is dropped, and draw the drop
    /// queues whose sale opened (`crate::queue::draw_due`). Failures are
    /// logged and the next pass tries again.
    pub async fn run_forever(self, every: Duration) {
        let mut ticker = tokio::time::interval(every);
        ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            ticker.tick().await;
            if let Err(error) = crate::queue::draw_due(self.inventory.pool()).await {
                tracing::warn!(sweeper = %self.name, %error, "drawing the due queues failed");
            }
            match self.run_once().await {
                Ok(counts) if !counts.is_empty() => {
                    let holds: i32 = counts.iter().map(|c| c.expired_holds).sum();
                    tracing::info!(sweeper = %self.name, holds, resources = counts.len(), "expired due holds");
                }
                Ok(_) => {}
                Err(error) => tracing::warn!(sweeper = %self.name, %error, "sweep failed"),
            }
        }
    }
}
