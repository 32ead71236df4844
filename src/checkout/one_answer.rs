//! A one-product checkout's answer, as `hf_start_checkouts` gives it (and
//! `hf_start_seat_checkouts` beside it): the row, what it means for the
//! shopper, and a combined call's failure shared by each of its requests.
//! Both combiners of checkout starts ([`super::start_batches`],
//! [`super::seat_batches`]) read their rows here.

use chrono::{DateTime, Utc};
use sqlx::PgPool;
use uuid::Uuid;

use super::start::{OffSaleLine, OneStart};
use super::{
    CheckoutError, Order, OrderLine, OrderState, Result, ShortLine, StartOutcome, order_by_id,
};
use crate::batching::share_error;
use crate::catalogue::Sale;

/// What `hf_start_checkouts` said about one checkout.
#[derive(Debug, sqlx::FromRow)]
pub(super) struct StartRow {
    pub status: String,
    pub order_id: Option<Uuid>,
    pub hold_id: Option<Uuid>,
    pub available: Option<i32>,
    pub created_at: DateTime<Utc>,
    /// The started order's number (read after the call, which does not
    /// return it).
    #[sqlx(default)]
    pub number: String,
}

/// What one checkout's answer means for the shopper.
pub(super) async fn one_outcome(
    pool: &PgPool,
    one: OneStart,
    row: StartRow,
    lines: Vec<OrderLine>,
    resource: String,
) -> Result<StartOutcome> {
    let short = |available: Option<i32>| {
        vec![ShortLine {
            product_id: one.product.clone(),
            name: one.product_name.clone(),
            requested: one.qty,
            available: available.unwrap_or(0).max(0),
        }]
    };
    Ok(match (row.status.as_str(), row.order_id) {
        ("started", Some(order_id)) => StartOutcome::Started {
            order: Order {
                id: order_id,
                token: one.token,
                number: row.number,
                state: OrderState::Pending,
                customer_name: one.name,
                customer_email: one.email,
                customer_phone: None,
                amount_minor: one.unit_price * i64::from(one.qty),
                currency: one.currency,
                hold_id: row.hold_id,
                provider: one.provider,
                provider_session_id: None,
                provider_url: None,
                provider_expires_at: None,
                payment_ref: None,
                flag: None,
                created_at: row.created_at,
                paid_at: None,
                // a batch is of checkouts without a voucher
                voucher_code: None,
                discount_minor: 0,
            },
            lines,
            resource: Some(resource),
        },
        ("already_started", Some(order_id)) => match order_by_id(pool, order_id).await? {
            Some(order) => StartOutcome::AlreadyStarted { order },
            None => return Err(CheckoutError::Database(sqlx::Error::RowNotFound)),
        },
        ("insufficient", _) => StartOutcome::Unavailable {
            lines: short(row.available),
        },
        ("account_cap" | "over_limit", _) => StartOutcome::OverLimit {
            lines: short(row.available),
        },
        ("unknown_resource", _) => StartOutcome::UnknownProducts {
            ids: vec![one.product],
        },
        // the database's clock says the sale is not open
        ("not_on_sale", _) => StartOutcome::NotOnSale {
            lines: vec![OffSaleLine {
                product_id: one.product.clone(),
                name: one.product_name.clone(),
                sale: match one.opens_at {
                    Some(at) if at > row.created_at => Sale::Opens { at },
                    Some(at) => Sale::Closed { at },
                    None => Sale::Closed { at: row.created_at },
                },
            }],
        },
        ("key_in_use", _) => {
            return Err(CheckoutError::InvalidInput(
                "this checkout form was used before; please reload your basket".into(),
            ));
        }
        (status, _) => {
            return Err(CheckoutError::Database(sqlx::Error::Protocol(format!(
                "a checkout answered {status:?}"
            ))));
        }
    })
}

/// A refusal raised by the functions (`hf_bad_input`) is bad input; any
/// other failure stays a database error.
pub(super) fn classify(error: sqlx::Error) -> CheckoutError {
    match error.as_database_error() {
        Some(db) if db.code().as_deref() == Some("22023") => {
            CheckoutError::InvalidInput(db.message().to_owned())
        }
        _ => CheckoutError::Database(error),
    }
}

/// One answer for each of the `n` requests of a call: its own row, or the
/// call's failure.
pub(super) fn each<T>(n: usize, answers: Result<Vec<T>>) -> Vec<Result<T>> {
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
pub(super) fn share(error: &CheckoutError) -> CheckoutError {
    match error {
        CheckoutError::InvalidInput(message) => CheckoutError::InvalidInput(message.clone()),
        CheckoutError::Database(error) => CheckoutError::Database(share_error(error)),
        CheckoutError::Inventory(error) => {
            CheckoutError::Database(sqlx::Error::Protocol(error.to_string()))
        }
    }
}

pub(super) fn lost() -> CheckoutError {
    CheckoutError::Database(sqlx::Error::Protocol(
        "the combined checkout call ended without an answer".into(),
    ))
}
