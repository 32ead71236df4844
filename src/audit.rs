//! The audit log: who did what, to what, and how it came out. Every change
//! staff make in the admin, an operator makes at the command line or an API
//! key makes through the JSON API is a row of `staff_actions` (append-only:
//! a trigger refuses updates and deletes), written in the transaction of the
//! change it records, so a change and its record commit together or not at
//! all; a log line follows once that transaction has committed. The admin's
//! Activity page reads it back ([`recent`]).
//!
//! The waiting list, the queue, webhooks, refunds and the staff's own
//! actions all record here; this module knows nothing of them, nor of staff
//! accounts: an actor is named by what the log keeps of them.

use chrono::{DateTime, Utc};
use sqlx::{PgPool, Postgres, Transaction};

/// Who took an action.
#[derive(Debug, Clone, Copy)]
pub enum Actor<'a> {
    /// A staff member signed in to the admin.
    Staff(Member<'a>),
    /// An API key, by its id and name.
    ApiKey { id: &'a str, name: &'a str },
    /// Anyone else, named as the caller names them: the command line
    /// (`command line (USER)`), a shopper.
    Operator(&'a str),
}

/// A staff member as the log keeps them: their account, and the role they
/// acted in (a role may change later).
#[derive(Debug, Clone, Copy)]
pub struct Member<'a> {
    pub id: i64,
    pub email: &'a str,
    pub role: &'a str,
}

impl Actor<'_> {
    /// How logs and Activity name them.
    pub fn name(&self) -> String {
        match self {
            Actor::Staff(member) => member.email.to_owned(),
            Actor::ApiKey { id, name } => format!("api key {id} ({name})"),
            Actor::Operator(operator) => (*operator).to_owned(),
        }
    }
}

/// Appends an action to the log, in the caller's transaction: it commits
/// with the change it records.
pub async fn record<'a>(
    tx: &mut Transaction<'_, Postgres>,
    by: impl Into<Actor<'a>>,
    action: &str,
    target: &str,
    outcome: &str,
    detail: serde_json::Value,
) -> sqlx::Result<()> {
    let by = by.into();
    let (staff_id, operator) = match by {
        Actor::Staff(member) => (Some(member.id), None),
        Actor::ApiKey { .. } | Actor::Operator(_) => (None, Some(by.name())),
    };
    sqlx::query(
        "insert into staff_actions (staff_id, operator, action, target, outcome, detail) \
         values ($1, $2, $3, $4, $5, $6)",
    )
    .bind(staff_id)
    .bind(operator)
    .bind(action)
    .bind(target)
    .bind(outcome)
    .bind(detail)
    .execute(&mut **tx)
    .await?;
    Ok(())
}

/// The end of a change the log records: the action appended in the
/// change's transaction, the two committed together, then the log line.
pub async fn commit<'a>(
    mut tx: Transaction<'_, Postgres>,
    by: impl Into<Actor<'a>>,
    action: &str,
    target: &str,
    outcome: &str,
    detail: serde_json::Value,
) -> sqlx::Result<()> {
    let by = by.into();
    record(&mut tx, by, action, target, outcome, detail).await?;
    tx.commit().await?;
    log_action(by, action, target, outcome);
    Ok(())
}

/// Logs an action once its transaction has committed.
pub fn log_action<'a>(by: impl Into<Actor<'a>>, action: &str, target: &str, outcome: &str) {
    let by = by.into();
    tracing::info!(by = %by.name(), action, target, outcome, "staff action");
}

/// An action, as Activity lists it.
#[derive(Debug, Clone, sqlx::FromRow)]
pub struct ActionRow {
    pub id: i64,
    /// The staff member's e-mail, or the operator's name.
    pub email: String,
    pub action: String,
    pub target: String,
    pub outcome: String,
    pub detail: serde_json::Value,
    pub at: DateTime<Utc>,
    /// The number of the order it was done to, when it names one.
    pub order_number: Option<String>,
}

/// Up to `limit` actions (1 to 1,000) older than the action `before` (or
/// the latest), newest first.
pub async fn page(pool: &PgPool, before: Option<i64>, limit: i64) -> sqlx::Result<Vec<ActionRow>> {
    sqlx::query_as(
        "select a.id, coalesce(s.email, a.operator) as email, a.action, a.target, a.outcome, \
                a.detail, a.at, o.number as order_number \
           from staff_actions a left join staff s on s.id = a.staff_id \
           left join orders o on a.action in ('refund_order', 'retry_refund') \
                             and o.id::text = a.target \
          where $1::bigint is null or a.id < $1 \
          order by a.id desc limit $2",
    )
    .bind(before)
    .bind(limit.clamp(1, 1000))
    .fetch_all(pool)
    .await
}

/// How many actions there are in all.
pub async fn count(pool: &PgPool) -> sqlx::Result<i64> {
    sqlx::query_scalar("select count(*) from staff_actions")
        .fetch_one(pool)
        .await
}

/// The names of the products `ids` names, for Activity's sentences.
pub async fn product_names(pool: &PgPool, ids: &[String]) -> sqlx::Result<Vec<(String, String)>> {
    #[derive(sqlx::FromRow)]
    struct Named {
        id: String,
        name: String,
    }
    let named: Vec<Named> = sqlx::query_as("select id, name from products where id = any($1)")
        .bind(ids)
        .fetch_all(pool)
        .await?;
    Ok(named.into_iter().map(|n| (n.id, n.name)).collect())
}
