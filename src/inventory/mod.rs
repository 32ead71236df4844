//! The hold engine: every SQL touch of capacity, nothing else.
//!
//! Each operation is one call of a PL/pgSQL function (see
//! `migrations/0002_inventory_functions.sql`): one round trip, one
//! transaction, one row lock per resource in a single global order. Business
//! results come back as enums to match exhaustively; `InventoryError` is
//! only for bad input and infrastructure failures.

pub mod domain;
mod hold_batches;
mod outcomes;
mod records;
mod rows;
mod settling;

use sqlx::PgPool;
use uuid::Uuid;

pub use domain::*;
pub use hold_batches::HoldBatches;
pub use outcomes::*;
pub use records::*;
use rows::{BasketRow, ResultRow, basket_outcome};
pub use settling::{
    ClaimOutcome, SettleOutcome, SettlingPhase, begin_settling, claim_again, claimable,
};

/// Failures of the engine. Business results are never errors.
#[derive(Debug, thiserror::Error)]
pub enum InventoryError {
    /// The input was refused; nothing changed.
    #[error("invalid input: {0}")]
    InvalidInput(String),
    /// The database said something the engine does not know how to read.
    #[error("unexpected answer from the database: {0}")]
    Unexpected(String),
    #[error(transparent)]
    Database(#[from] sqlx::Error),
}

impl From<InvalidInput> for InventoryError {
    fn from(error: InvalidInput) -> Self {
        InventoryError::InvalidInput(error.0)
    }
}

/// Turn refusals by the database (bad input raised by a function, a check
/// constraint) into `InvalidInput`; keep everything else as it is.
fn classify(error: sqlx::Error) -> InventoryError {
    if let Some(db) = error.as_database_error() {
        match db.code().as_deref() {
            // invalid_parameter_value, raised by hf_bad_input
            Some("22023") => return InventoryError::InvalidInput(db.message().to_owned()),
            Some("23514") => {
                let constraint = db.constraint().unwrap_or("a check constraint");
                return InventoryError::InvalidInput(format!("refused by {constraint}"));
            }
            _ => {}
        }
    }
    InventoryError::Database(error)
}

pub type Result<T> = std::result::Result<T, InventoryError>;

/// The hold engine over a connection pool.
#[derive(Debug, Clone)]
pub struct Inventory {
    pool: PgPool,
}

impl Inventory {
    pub fn new(pool: PgPool) -> Self {
        Self { pool }
    }

    pub fn pool(&self) -> &PgPool {
        &self.pool
    }

    /// Create a resource or change its total. A total below what is held and
    /// sold is refused and changes nothing.
    pub async fn upsert_resource(&self, id: &ResourceId, total: Capacity) -> Result<UpsertOutcome> {
        upsert_resource(&self.pool, id, total).await
    }

    /// Hold units of one resource.
    pub async fn hold(&self, request: &HoldRequest) -> Result<HoldOutcome> {
        let row: ResultRow = sqlx::query_as(
            "select * from hf_hold($1, $2, $3, $4, $5::float8 * interval '1 second')",
        )
        .bind(request.resource.as_str())
        .bind(request.qty.get())
        .bind(request.account.as_str())
        .bind(request.idempotency_key.as_ref().map(IdempotencyKey::as_str))
        .bind(request.ttl.map(Span::seconds))
        .fetch_one(&self.pool)
        .await
        .map_err(classify)?;
        row.hold_outcome()
    }

    /// Several holds on one resource in one call; see [`hold_many`].
    pub async fn hold_many(&self, requests: &[HoldRequest]) -> Result<Vec<HoldOutcome>> {
        hold_many(&self.pool, requests).await
    }

    /// Hold every line of a basket, or none of them.
    pub async fn hold_basket(&self, request: &BasketRequest) -> Result<BasketOutcome> {
        hold_basket(&self.pool, request).await
    }

    /// Move a hold (or basket) into the payment phase, where it lives until
    /// its payment deadline: `window` from now, or the configured window.
    pub async fn begin_payment(
        &self,
        id: HoldId,
        window: Option<Span>,
    ) -> Result<BeginPaymentOutcome> {
        begin_payment(&self.pool, id, window).await
    }

    /// Turn a hold (or basket) into a sale paid by `payment_ref`. Safe to
    /// call any number of times, concurrently, in any order.
    pub async fn confirm(&self, id: HoldId, payment_ref: &PaymentRef) -> Result<ConfirmOutcome> {
        confirm(&self.pool, id, payment_ref).await
    }

    /// Give a hold (or basket) back before it is paid. `actor` and `reason`
    /// are recorded.
    pub async fn release(&self, id: HoldId, reason: &str, actor: &str) -> Result<ReleaseOutcome> {
        release(&self.pool, id, reason, actor).await
    }

    /// Give a plain hold more time, a bounded number of times.
    pub async fn extend(&self, id: HoldId, by: Option<Span>) -> Result<ExtendOutcome> {
        let row: ResultRow =
            sqlx::query_as("select * from hf_extend($1, $2::float8 * interval '1 second')")
                .bind(id.0)
                .bind(by.map(Span::seconds))
                .fetch_one(&self.pool)
                .await
                .map_err(classify)?;
        Ok(match row.status.as_str() {
            "extended" => ExtendOutcome::Extended {
                purchase: row.purchase()?,
            },
            "not_extendable" => ExtendOutcome::NotExtendable {
                purchase: row.purchase()?,
            },
            "not_found" => ExtendOutcome::NotFound,
            _ => return Err(row.unexpected()),
        })
    }

    /// Expire what is due, at most `limit` holds, one resource (and one short
    /// transaction) at a time. `actor` names the sweeper in the history.
    pub async fn sweep(&self, limit: u32, actor: &str) -> Result<Vec<SweepCount>> {
        if limit == 0 {
            return Err(InventoryError::InvalidInput(
                "sweep limit must be positive".into(),
            ));
        }
        let due: Vec<String> = sqlx::query_scalar("select * from hf_due_resources()")
            .fetch_all(&self.pool)
            .await?;
        let mut left = i64::from(limit);
        let mut counts = Vec::new();
        for resource in due {
            if left <= 0 {
                break;
            }
            let count: Option<SweepCount> = sqlx::query_as(
                "select resource_id, expired_holds, expired_qty from hf_sweep_resource($1, $2, $3)",
            )
            .bind(&resource)
            .bind(left as i32)
            .bind(actor)
            .fetch_optional(&self.pool)
            .await
            .map_err(classify)?;
            if let Some(count) = count.filter(|c| c.expired_holds > 0) {
                left -= i64::from(count.expired_holds);
                counts.push(count);
            }
        }
        Ok(counts)
    }

    /// Counters versus rows, for one resource or all.
    pub async fn check(&self, resource: Option<&ResourceId>) -> Result<Vec<CheckRow>> {
        Ok(sqlx::query_as(
            "select resource_id, total, held, sold, rows_held, rows_sold, drift from hf_check($1)",
        )
        .bind(resource.map(ResourceId::as_str))
        .fetch_all(&self.pool)
        .await?)
    }

    /// Recompute one resource's counters from its rows. `None` if unknown.
    pub async fn repair(&self, resource: &ResourceId) -> Result<Option<Repair>> {
        repair(&self.pool, resource).await
    }

    /// Counters and availability of one resource. `None` if unknown.
    pub async fn status(&self, resource: &ResourceId) -> Result<Option<ResourceStatus>> {
        Ok(sqlx::query_as(
            "select resource_id, total, held, sold, available, held_plain, held_paying, due, \
                    available_now from hf_status($1)",
        )
        .bind(resource.as_str())
        .fetch_optional(&self.pool)
        .await?)
    }

    /// Holds, oldest first, filtered by resource, state and age.
    pub async fn holds(&self, filter: &HoldFilter) -> Result<Vec<HoldRecord>> {
        Ok(sqlx::query_as(
            "select id, basket_id, resource_id, account_id, qty, state, idempotency_key, payment_ref, \
                    created_at, expires_at, payment_deadline, extensions, ended_at, ended_by, end_reason \
               from holds \
              where ($1::text is null or resource_id = $1) \
                and ($2::text is null or state = $2) \
                and ($3::float8 is null or created_at <= now() - $3 * interval '1 second') \
              order by created_at, id \
              limit $4",
        )
        .bind(filter.resource.as_ref().map(ResourceId::as_str))
        .bind(filter.state.map(HoldState::as_str))
        .bind(filter.older_than.map(Span::seconds))
        .bind(filter.limit.unwrap_or(1000).clamp(1, 100_000))
        .fetch_all(&self.pool)
        .await?)
    }

    /// The append-only history of one hold, oldest first.
    pub async fn events(&self, id: HoldId) -> Result<Vec<HoldEvent>> {
        Ok(sqlx::query_as(
            "select id, hold_id, at, kind, from_state, to_state, actor, detail \
               from hold_events where hold_id = $1 order by id",
        )
        .bind(id.0)
        .fetch_all(&self.pool)
        .await?)
    }

    pub async fn settings(&self) -> Result<InventorySettings> {
        #[derive(sqlx::FromRow)]
        struct Row {
            hold_ttl: f64,
            payment_window: f64,
            account_cap: Option<i32>,
            cap_scope: String,
            max_extensions: i32,
            extension: f64,
            settle_grace: f64,
        }
        let row: Row = sqlx::query_as(
            "select extract(epoch from hold_ttl)::float8 as hold_ttl, \
                    extract(epoch from payment_window)::float8 as payment_window, \
                    account_cap, cap_scope, max_extensions, \
                    extract(epoch from extension)::float8 as extension, \
                    extract(epoch from settle_grace)::float8 as settle_grace \
               from inventory_settings",
        )
        .fetch_one(&self.pool)
        .await?;
        Ok(InventorySettings {
            hold_ttl_seconds: row.hold_ttl,
            payment_window_seconds: row.payment_window,
            account_cap: row.account_cap,
            cap_scope: if row.cap_scope == "global" {
                CapScope::Global
            } else {
                CapScope::Resource
            },
            max_extensions: row.max_extensions,
            extension_seconds: row.extension,
            settle_grace_seconds: row.settle_grace,
        })
    }

    /// Store new settings. The database refuses a payment window that does
    /// not exceed the TTL, or that a settling window does not exceed, a
    /// non-positive TTL and the like; then nothing changes.
    pub async fn configure(&self, settings: &InventorySettings) -> Result<InventorySettings> {
        self.configure_with_windows(settings, &[]).await
    }

    /// Store new settings and set delayed methods' windows (added where the
    /// provider had none for the method), in one transaction: the database
    /// refuses a window not longer than the payment window, and then
    /// nothing changes.
    pub async fn configure_with_windows(
        &self,
        settings: &InventorySettings,
        windows: &[SettleWindow],
    ) -> Result<InventorySettings> {
        let mut tx = self.pool.begin().await?;
        sqlx::query(
            "update inventory_settings \
                set hold_ttl = $1 * interval '1 second', payment_window = $2 * interval '1 second', \
                    account_cap = $3, cap_scope = $4, max_extensions = $5, \
                    extension = $6 * interval '1 second', settle_grace = $7 * interval '1 second', \
                    updated_at = now()",
        )
        .bind(settings.hold_ttl_seconds)
        .bind(settings.payment_window_seconds)
        .bind(settings.account_cap)
        .bind(settings.cap_scope.as_str())
        .bind(settings.max_extensions)
        .bind(settings.extension_seconds)
        .bind(settings.settle_grace_seconds)
        .execute(&mut *tx)
        .await
        .map_err(classify)?;
        for window in windows {
            sqlx::query(
                "insert into settle_windows (provider, method, days, business_days, source) \
                 values ($1, $2, $3, $4, $5) \
                 on conflict (provider, method) do update \
                    set days = excluded.days, business_days = excluded.business_days, \
                        source = excluded.source, updated_at = now()",
            )
            .bind(&window.provider)
            .bind(&window.method)
            .bind(window.days)
            .bind(window.business_days)
            .bind(&window.source)
            .execute(&mut *tx)
            .await
            .map_err(classify)?;
        }
        tx.commit().await?;
        self.settings().await
    }

    /// How long each provider's delayed methods may take, by provider and
    /// method.
    pub async fn settle_windows(&self) -> Result<Vec<SettleWindow>> {
        Ok(sqlx::query_as(
            "select provider, method, days, business_days, source from settle_windows \
              order by provider, method = '*', method",
        )
        .fetch_all(&self.pool)
        .await?)
    }
}

/// Hold every line of a basket, or none of them, on any executor (a pool
/// or the caller's transaction).
pub async fn hold_basket<'e>(
    executor: impl sqlx::PgExecutor<'e>,
    request: &BasketRequest,
) -> Result<BasketOutcome> {
    let (resources, qtys): (Vec<&str>, Vec<i32>) = request
        .basket
        .lines()
        .iter()
        .map(|line| (line.resource.as_str(), line.qty.get()))
        .unzip();
    let rows: Vec<BasketRow> = sqlx::query_as(
        "select status, basket_id, resource_id, qty, line_status, hold_id, available, expires_at \
               from hf_hold_basket($1, $2, $3, $4, $5::float8 * interval '1 second')",
    )
    .bind(resources)
    .bind(qtys)
    .bind(request.account.as_str())
    .bind(request.idempotency_key.as_ref().map(IdempotencyKey::as_str))
    .bind(request.ttl.map(Span::seconds))
    .fetch_all(executor)
    .await
    .map_err(classify)?;
    basket_outcome(rows)
}

/// Move a hold (or basket) into the payment phase, where it lives until
/// its payment deadline: `window` from now, or the configured window.
pub async fn begin_payment<'e>(
    executor: impl sqlx::PgExecutor<'e>,
    id: HoldId,
    window: Option<Span>,
) -> Result<BeginPaymentOutcome> {
    let row: ResultRow =
        sqlx::query_as("select * from hf_begin_payment($1, $2::float8 * interval '1 second')")
            .bind(id.0)
            .bind(window.map(Span::seconds))
            .fetch_one(executor)
            .await
            .map_err(classify)?;
    Ok(match row.status.as_str() {
        "awaiting_payment" => BeginPaymentOutcome::AwaitingPayment {
            purchase: row.purchase()?,
        },
        "replayed" => BeginPaymentOutcome::Replayed {
            purchase: row.purchase()?,
        },
        "expired" => BeginPaymentOutcome::Expired {
            purchase: row.purchase()?,
        },
        "confirmed" => BeginPaymentOutcome::Confirmed {
            purchase: row.purchase()?,
        },
        "released" => BeginPaymentOutcome::Released {
            purchase: row.purchase()?,
        },
        "not_found" => BeginPaymentOutcome::NotFound,
        _ => return Err(row.unexpected()),
    })
}

/// Turn a hold (or basket) into a sale paid by `payment_ref`. Safe to
/// call any number of times, concurrently, in any order. A batch of one
/// for [`confirm_many`].
pub async fn confirm<'e>(
    executor: impl sqlx::PgExecutor<'e>,
    id: HoldId,
    payment_ref: &PaymentRef,
) -> Result<ConfirmOutcome> {
    let mut outcomes = confirm_many(executor, &[(id, payment_ref)]).await?;
    outcomes
        .pop()
        .ok_or_else(|| InventoryError::Unexpected("no answer for a confirmation".into()))
}

/// Several confirmations in one statement (`hf_confirm_many`), each decided
/// exactly as it would be alone, one after another in the order given (each
/// sees what the ones before it did), and answered in that order; the
/// counters of the resources sold move once for the lot.
pub async fn confirm_many<'e>(
    executor: impl sqlx::PgExecutor<'e>,
    confirmations: &[(HoldId, &PaymentRef)],
) -> Result<Vec<ConfirmOutcome>> {
    if confirmations.is_empty() {
        return Ok(Vec::new());
    }
    let ids: Vec<Uuid> = confirmations.iter().map(|(id, _)| id.0).collect();
    let refs: Vec<&str> = confirmations.iter().map(|(_, r)| r.as_str()).collect();
    let rows: Vec<ResultRow> = sqlx::query_as("select * from hf_confirm_many($1, $2)")
        .bind(&ids)
        .bind(&refs)
        .fetch_all(executor)
        .await
        .map_err(classify)?;
    if rows.len() != confirmations.len() {
        return Err(InventoryError::Unexpected(format!(
            "{} answers for {} confirmations",
            rows.len(),
            confirmations.len()
        )));
    }
    rows.iter().map(ResultRow::confirm_outcome).collect()
}

/// Several holds on one resource, decided together under one lock and
/// committed together, each answered as [`Inventory::hold`] would answer
/// it, in the order given. All requests must name the same resource and
/// carry the same TTL.
pub async fn hold_many<'e>(
    executor: impl sqlx::PgExecutor<'e>,
    requests: &[HoldRequest],
) -> Result<Vec<HoldOutcome>> {
    let Some(first) = requests.first() else {
        return Ok(Vec::new());
    };
    if requests
        .iter()
        .any(|r| r.resource != first.resource || r.ttl != first.ttl)
    {
        return Err(InventoryError::InvalidInput(
            "a batch is for one resource and one TTL".into(),
        ));
    }
    let qtys: Vec<i32> = requests.iter().map(|r| r.qty.get()).collect();
    let accounts: Vec<&str> = requests.iter().map(|r| r.account.as_str()).collect();
    let keys: Vec<Option<&str>> = requests
        .iter()
        .map(|r| r.idempotency_key.as_ref().map(IdempotencyKey::as_str))
        .collect();
    let rows: Vec<ResultRow> = sqlx::query_as(
        "select * from hf_hold_many($1, $2, $3, $4, $5::float8 * interval '1 second')",
    )
    .bind(first.resource.as_str())
    .bind(&qtys)
    .bind(&accounts)
    .bind(&keys)
    .bind(first.ttl.map(Span::seconds))
    .fetch_all(executor)
    .await
    .map_err(classify)?;
    if rows.len() != requests.len() {
        return Err(InventoryError::Unexpected(format!(
            "{} answers for {} requests",
            rows.len(),
            requests.len()
        )));
    }
    rows.iter().map(ResultRow::hold_outcome).collect()
}

/// Create a resource or change its total; see [`Inventory::upsert_resource`].
pub async fn upsert_resource<'e>(
    executor: impl sqlx::PgExecutor<'e>,
    id: &ResourceId,
    total: Capacity,
) -> Result<UpsertOutcome> {
    #[derive(sqlx::FromRow)]
    struct Row {
        status: String,
        #[sqlx(flatten)]
        counters: Counters,
    }
    let row: Row = sqlx::query_as(
        "select status, resource_id, total, held, sold, available from hf_upsert_resource($1, $2)",
    )
    .bind(id.as_str())
    .bind(total.get())
    .fetch_one(executor)
    .await
    .map_err(classify)?;
    Ok(match row.status.as_str() {
        "created" => UpsertOutcome::Created {
            counters: row.counters,
        },
        "updated" => UpsertOutcome::Updated {
            counters: row.counters,
        },
        "capacity_below_committed" => UpsertOutcome::CapacityBelowCommitted {
            counters: row.counters,
            requested: total.get(),
        },
        other => {
            return Err(InventoryError::Unexpected(format!(
                "upsert status {other:?}"
            )));
        }
    })
}

/// Recompute one resource's counters from its rows; see [`Inventory::repair`].
pub async fn repair<'e>(
    executor: impl sqlx::PgExecutor<'e>,
    resource: &ResourceId,
) -> Result<Option<Repair>> {
    sqlx::query_as(
        "select resource_id, held_before, sold_before, held_after, sold_after, repaired \
           from hf_repair($1)",
    )
    .bind(resource.as_str())
    .fetch_optional(executor)
    .await
    .map_err(classify)
}

/// Give a hold (or basket) back before it is paid. `actor` and `reason`
/// are recorded.
pub async fn release<'e>(
    executor: impl sqlx::PgExecutor<'e>,
    id: HoldId,
    reason: &str,
    actor: &str,
) -> Result<ReleaseOutcome> {
    let row: ResultRow = sqlx::query_as("select * from hf_release($1, $2, $3)")
        .bind(id.0)
        .bind(reason)
        .bind(actor)
        .fetch_one(executor)
        .await
        .map_err(classify)?;
    Ok(match row.status.as_str() {
        "released" => ReleaseOutcome::Released {
            purchase: row.purchase()?,
        },
        "already_released" => ReleaseOutcome::AlreadyReleased {
            purchase: row.purchase()?,
        },
        "confirmed" => ReleaseOutcome::Confirmed {
            purchase: row.purchase()?,
        },
        "expired" => ReleaseOutcome::Expired {
            purchase: row.purchase()?,
        },
        "not_found" => ReleaseOutcome::NotFound,
        _ => return Err(row.unexpected()),
    })
}
