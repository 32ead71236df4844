//! What `hf_start_checkouts` said of one checkout, read as its
//! [`StartOutcome`]: its word (`started`, `already_started`, or the
//! refusal's: the one vocabulary of `StartOutcome::word`), and the detail
//! that word carries (the lines refused, the seats taken and offered, the
//! voucher's use).

use chrono::{DateTime, Utc};
use serde::Deserialize;
use sqlx::PgPool;
use uuid::Uuid;

use super::plan::Planned;
use super::{OffSaleLine, StartOutcome};
use crate::catalogue::Sale;
use crate::catalogue::kinds::seats::choice::{SeatReason, SeatRefusal};
use crate::checkout::{
    CheckoutError, Order, OrderLine, OrderState, Result, ShortLine, order_by_id,
};
use crate::vouchers::Refusal;

/// One row of `hf_start_checkouts`.
#[derive(Debug, sqlx::FromRow)]
pub(in crate::checkout) struct StartRow {
    pub status: String,
    pub order_id: Option<Uuid>,
    /// The started order's purchase: its hold, or its basket of holds.
    pub hold_id: Option<Uuid>,
    pub number: Option<String>,
    /// The call's moment (the database's clock).
    pub created_at: DateTime<Utc>,
    pub detail: Option<sqlx::types::Json<Detail>>,
}

/// What a word carries, as the call writes it.
#[derive(Debug, Default, Deserialize)]
pub(in crate::checkout) struct Detail {
    /// Lines refused (with what is left) or named by their seats.
    #[serde(default)]
    lines: Vec<LineDetail>,
    /// `unknown_products`: the products.
    #[serde(default)]
    products: Vec<String>,
    /// A seat refusal's line, its seats and the seats offered instead.
    product: Option<String>,
    #[serde(default)]
    seats: Vec<String>,
    #[serde(default)]
    offers: Vec<Vec<String>>,
    #[serde(default)]
    split_allowed: bool,
    /// `bad_voucher`: `used_up` or `used_by_you`.
    refusal: Option<String>,
    /// Seats the call chose itself for a started checkout, by section
    /// resource (`hf_start_checkouts_chosen`).
    #[serde(default)]
    pinned: std::collections::HashMap<String, Vec<i64>>,
}

impl StartRow {
    /// Seats the call chose itself for this started checkout, by section
    /// resource (said by `hf_start_checkouts_chosen` only).
    pub fn pinned(&self) -> impl Iterator<Item = (&str, &[i64])> {
        self.detail
            .iter()
            .flat_map(|d| d.0.pinned.iter())
            .map(|(resource, ids)| (resource.as_str(), ids.as_slice()))
    }
}

#[derive(Debug, Deserialize)]
struct LineDetail {
    product: String,
    name: Option<String>,
    #[serde(default)]
    requested: i32,
    #[serde(default)]
    available: i32,
    opens_at: Option<DateTime<Utc>>,
    closes_at: Option<DateTime<Utc>>,
}

/// What one checkout's answer means for the shopper.
pub(in crate::checkout) async fn outcome(
    pool: &PgPool,
    planned: &Planned,
    row: StartRow,
) -> Result<StartOutcome> {
    let detail = row.detail.map(|d| d.0).unwrap_or_default();
    let name = |product: &str| -> String {
        planned
            .lines
            .iter()
            .find(|l| l.product_id == product)
            .map_or_else(|| product.to_owned(), |l| l.name.clone())
    };
    let short = || -> Vec<ShortLine> {
        detail
            .lines
            .iter()
            .map(|l| ShortLine {
                product_id: l.product.clone(),
                name: name(&l.product),
                requested: l.requested,
                available: l.available.max(0),
            })
            .collect()
    };
    Ok(match row.status.as_str() {
        "started" => started(
            planned,
            row.order_id,
            row.hold_id,
            row.number,
            row.created_at,
            &detail,
        )?,
        "already_started" => {
            let order_id = row.order_id.ok_or_else(missing)?;
            let order = order_by_id(pool, order_id).await?.ok_or_else(missing)?;
            StartOutcome::AlreadyStarted { order }
        }
        "sold_out" => StartOutcome::SoldOut { lines: short() },
        "over_limit" => StartOutcome::OverLimit { lines: short() },
        "no_table" => StartOutcome::NoTable { lines: short() },
        "unknown_products" => StartOutcome::UnknownProducts {
            ids: detail.products,
        },
        // the database's clock says the sale is not open
        "not_on_sale" => StartOutcome::NotOnSale {
            lines: detail
                .lines
                .iter()
                .map(|l| OffSaleLine {
                    product_id: l.product.clone(),
                    name: name(&l.product),
                    sale: match Sale::at(l.opens_at, l.closes_at, row.created_at) {
                        Sale::Open => match (l.opens_at, l.closes_at) {
                            (_, Some(at)) => Sale::Closed { at },
                            (Some(at), None) => Sale::Opens { at },
                            (None, None) => Sale::Closed { at: row.created_at },
                        },
                        sale => sale,
                    },
                })
                .collect(),
        },
        "bad_voucher" => StartOutcome::BadVoucher {
            refusal: match detail.refusal.as_deref() {
                Some("used_by_you") => Refusal::UsedByYou,
                _ => Refusal::UsedUp,
            },
        },
        "key_in_use" => {
            return Err(CheckoutError::InvalidInput(
                "this checkout form was used before; please reload your basket".into(),
            ));
        }
        word => match SeatReason::from_word(word) {
            Some(reason) => {
                let product = detail.product.unwrap_or_default();
                StartOutcome::SeatsRefused {
                    refusal: SeatRefusal {
                        name: name(&product),
                        product_id: product,
                        reason,
                        seats: detail.seats,
                        offers: detail.offers,
                        split_allowed: detail.split_allowed,
                    },
                }
            }
            None => {
                return Err(CheckoutError::Database(sqlx::Error::Protocol(format!(
                    "a checkout answered {word:?}"
                ))));
            }
        },
    })
}

/// A started checkout: its order as the call wrote it, and its lines as
/// named (a seat line by its seats: "Stalls — C-11, C-12").
fn started(
    planned: &Planned,
    order_id: Option<Uuid>,
    hold_id: Option<Uuid>,
    number: Option<String>,
    created_at: DateTime<Utc>,
    detail: &Detail,
) -> Result<StartOutcome> {
    let checkout = &planned.checkout;
    let lines: Vec<OrderLine> = planned
        .lines
        .iter()
        .map(|line| OrderLine {
            name: detail
                .lines
                .iter()
                .find(|l| l.product == line.product_id)
                .and_then(|l| l.name.clone())
                .unwrap_or_else(|| line.name.clone()),
            ..line.clone()
        })
        .collect();
    let amount_minor = lines.iter().map(|l| l.paid_minor).sum();
    let discount_minor = lines
        .iter()
        .map(|l| l.unit_price_minor * i64::from(l.qty) - l.paid_minor)
        .sum();
    let order = Order {
        id: order_id.ok_or_else(missing)?,
        token: checkout.token.clone(),
        number: number.ok_or_else(missing)?,
        state: OrderState::Pending,
        customer_name: checkout.name.clone(),
        customer_email: checkout.email.clone(),
        customer_phone: checkout.phone.clone(),
        amount_minor,
        currency: checkout.currency.clone(),
        hold_id,
        provider: checkout.provider,
        provider_session_id: None,
        provider_url: None,
        provider_expires_at: None,
        payment_ref: None,
        flag: None,
        created_at,
        paid_at: None,
        voucher_code: checkout.voucher.clone(),
        discount_minor,
    };
    Ok(StartOutcome::Started {
        order,
        lines,
        resource: planned.resource.clone(),
    })
}

fn missing() -> CheckoutError {
    CheckoutError::Database(sqlx::Error::RowNotFound)
}
