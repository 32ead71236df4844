//! What staff can do from the admin. Each action runs in one transaction
//! with the row that records it, so an action is never done unrecorded or
//! recorded undone. Refusals are recorded too.

use serde_json::json;
use sqlx::PgPool;
use uuid::Uuid;

use super::{StaffError, StaffMember};
use crate::audit;
use crate::checkout;
use crate::inventory::{
    self, Capacity, Counters, HoldId, ReleaseOutcome, Repair, ResourceId, UpsertOutcome,
};

fn invalid(error: impl std::fmt::Display) -> StaffError {
    StaffError::InvalidInput(error.to_string())
}

/// Bad input stays bad input (400); a database failure stays one (503 or
/// 500, its text only in the log); anything else is ours (500).
fn engine(error: inventory::InventoryError) -> StaffError {
    match error {
        inventory::InventoryError::InvalidInput(message) => StaffError::InvalidInput(message),
        inventory::InventoryError::Database(error) => StaffError::Database(error),
        other => StaffError::Internal(other.to_string()),
    }
}

fn order_error(error: checkout::CheckoutError) -> StaffError {
    match error {
        checkout::CheckoutError::InvalidInput(message) => StaffError::InvalidInput(message),
        checkout::CheckoutError::Database(error) => StaffError::Database(error),
        checkout::CheckoutError::Inventory(error) => engine(error),
    }
}

/// What releasing a hold came to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum HoldReleased {
    /// Its units are free again (with the rest of its basket, and its
    /// order cancelled if it had one).
    Released {
        lines: i64,
    },
    /// It had already ended this way; nothing changed.
    AlreadyEnded {
        state: String,
    },
    /// It is paid for: a sale is not undone from here.
    Paid,
    NotFound,
}

/// Release a hold and the purchase it belongs to. A hold that is part of an
/// order goes through the order, so the order is cancelled and the
/// provider's page closed too.
pub async fn release_hold(
    pool: &PgPool,
    staff: &StaffMember,
    hold: Uuid,
) -> super::Result<HoldReleased> {
    let mut tx = pool.begin().await?;
    let found: Option<(Uuid, String)> =
        sqlx::query_as("select purchase_id, state from holds where id = $1")
            .bind(hold)
            .fetch_optional(&mut *tx)
            .await?;
    let Some((purchase, _)) = found else {
        return Ok(HoldReleased::NotFound);
    };
    let order: Option<Uuid> = sqlx::query_scalar("select id from orders where hold_id = $1")
        .bind(purchase)
        .fetch_optional(&mut *tx)
        .await?;
    let actor = staff.actor();
    let reason = "released by staff";
    let lines: i64 = sqlx::query_scalar("select count(*) from holds where purchase_id = $1")
        .bind(purchase)
        .fetch_one(&mut *tx)
        .await?;
    // the engine's own answer, under its locks: only a release this action
    // made counts as ours, not one the shopper or the sweeper just made
    let released = match order {
        Some(order_id) => {
            let release = checkout::Release::Staff {
                actor: &actor,
                reason,
            };
            checkout::release_order_in(&mut tx, order_id, release)
                .await
                .map_err(order_error)?
        }
        None => Some(
            inventory::release(&mut *tx, HoldId(purchase), reason, &actor)
                .await
                .map_err(engine)?,
        ),
    };
    let after: String = sqlx::query_scalar("select state from holds where id = $1")
        .bind(hold)
        .fetch_one(&mut *tx)
        .await?;
    let outcome = match released {
        Some(ReleaseOutcome::Released { .. }) => HoldReleased::Released { lines },
        Some(ReleaseOutcome::Confirmed { .. }) => HoldReleased::Paid,
        Some(
            ReleaseOutcome::AlreadyReleased { .. }
            | ReleaseOutcome::Expired { .. }
            | ReleaseOutcome::NotFound,
        )
        | None => HoldReleased::AlreadyEnded {
            state: after.clone(),
        },
    };
    let word = match &outcome {
        HoldReleased::Released { .. } => "released",
        HoldReleased::AlreadyEnded { .. } => "already_ended",
        HoldReleased::Paid => "refused_paid",
        HoldReleased::NotFound => "not_found",
    };
    audit::commit(
        tx,
        staff,
        "release_hold",
        &hold.to_string(),
        word,
        json!({ "purchase_id": purchase, "order_id": order, "state_after": after }),
    )
    .await?;
    Ok(outcome)
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CapacityChanged {
    Updated {
        counters: Counters,
    },
    /// Refused: more is held and sold than the total asked for.
    BelowCommitted {
        counters: Counters,
        requested: i32,
    },
    NotFound,
}

/// Change a resource's total. Never creates one; never goes below what is
/// held and sold (the engine refuses under the resource's lock).
pub async fn set_capacity(
    pool: &PgPool,
    staff: &StaffMember,
    resource: &str,
    total: i64,
) -> super::Result<CapacityChanged> {
    let id = ResourceId::parse(resource).map_err(invalid)?;
    let total = Capacity::parse(total).map_err(invalid)?;
    let mut tx = pool.begin().await?;
    // the engine's lock mode, taken first so the recorded "from" is exact
    let before: Option<i32> =
        sqlx::query_scalar("select total from resources where id = $1 for no key update")
            .bind(id.as_str())
            .fetch_optional(&mut *tx)
            .await?;
    let Some(before) = before else {
        return Ok(CapacityChanged::NotFound);
    };
    let outcome = match inventory::upsert_resource(&mut *tx, &id, total)
        .await
        .map_err(engine)?
    {
        UpsertOutcome::Created { counters } | UpsertOutcome::Updated { counters } => {
            CapacityChanged::Updated { counters }
        }
        UpsertOutcome::CapacityBelowCommitted {
            counters,
            requested,
        } => CapacityChanged::BelowCommitted {
            counters,
            requested,
        },
    };
    let (word, detail) = match &outcome {
        CapacityChanged::Updated { counters } => (
            "updated",
            json!({ "from": before, "to": counters.total, "held": counters.held, "sold": counters.sold }),
        ),
        CapacityChanged::BelowCommitted {
            counters,
            requested,
        } => (
            "refused_below_committed",
            json!({ "requested": requested, "held": counters.held, "sold": counters.sold }),
        ),
        CapacityChanged::NotFound => ("not_found", json!({})),
    };
    audit::commit(tx, staff, "set_capacity", id.as_str(), word, detail).await?;
    Ok(outcome)
}

/// Recompute a resource's counters from its holds. `None` if unknown.
pub async fn repair_resource(
    pool: &PgPool,
    staff: &StaffMember,
    resource: &str,
) -> super::Result<Option<Repair>> {
    let id = ResourceId::parse(resource).map_err(invalid)?;
    let mut tx = pool.begin().await?;
    let repair = inventory::repair(&mut *tx, &id).await.map_err(engine)?;
    let mut done = None;
    if let Some(repair) = &repair {
        let word = if repair.repaired {
            "repaired"
        } else {
            "no_drift"
        };
        done = Some(word);
        audit::record(
            &mut tx,
            staff,
            "repair_resource",
            id.as_str(),
            word,
            json!({
                "held_before": repair.held_before, "sold_before": repair.sold_before,
                "held_after": repair.held_after, "sold_after": repair.sold_after,
            }),
        )
        .await?;
    }
    tx.commit().await?;
    if let Some(word) = done {
        audit::log_action(staff, "repair_resource", id.as_str(), word);
    }
    Ok(repair)
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RefundRetry {
    /// Due now: the next worker pass runs it.
    Queued,
    /// Already done; nothing to retry.
    AlreadyDone,
    NotFound,
}

/// Run a waiting refund job now instead of after its backoff. A job that a
/// worker is running at this moment may then be taken by a second worker
/// too; both send the same idempotency key (it comes from the job), so the
/// provider refunds once.
pub async fn retry_refund(
    pool: &PgPool,
    staff: &StaffMember,
    order: Uuid,
    job: i64,
) -> super::Result<RefundRetry> {
    let mut tx = pool.begin().await?;
    let state: Option<String> = sqlx::query_scalar(
        "select state from outbox_jobs \
          where id = $1 and kind = 'refund' and payload->>'order_id' = $2::text for update",
    )
    .bind(job)
    .bind(order)
    .fetch_optional(&mut *tx)
    .await?;
    let outcome = match state.as_deref() {
        None => return Ok(RefundRetry::NotFound),
        Some("pending") => {
            sqlx::query("update outbox_jobs set run_after = now() where id = $1")
                .bind(job)
                .execute(&mut *tx)
                .await?;
            RefundRetry::Queued
        }
        Some(_) => RefundRetry::AlreadyDone,
    };
    let word = match outcome {
        RefundRetry::Queued => "queued",
        RefundRetry::AlreadyDone => "already_done",
        RefundRetry::NotFound => "not_found",
    };
    audit::commit(
        tx,
        staff,
        "retry_refund",
        &job.to_string(),
        word,
        json!({ "order_id": order }),
    )
    .await?;
    Ok(outcome)
}
