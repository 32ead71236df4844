//! A checkout of several products (or of one with a voucher's use beside
//! it, or of seats), in one transaction: the fair-sale limits under their locks, the
//! sale window by the transaction's clock, the pending order and its
//! lines, and one all-or-nothing hold of every claim, in the engine's lock
//! order, then each seat line's seats pinned beside its units
//! ([`super::seats`]). Nothing is written when anything is refused.

use chrono::{DateTime, Utc};
use sqlx::{PgPool, Postgres, Transaction};
use uuid::Uuid;

use super::plan::Priced;
use super::read::PricedProduct;
use super::{CheckoutStart, OffSaleLine, StartOutcome};
use crate::catalogue::Sale;
use crate::catalogue::kinds::line::Claim;
use crate::checkout::short::ShortLine;
use crate::checkout::{Order, OrderLine, Result, order_by_checkout_key};
use crate::inventory::{
    self, Basket, BasketLine, BasketOutcome, BasketRequest, LineAvailability, Quantity, ResourceId,
};

/// Several products in one transaction: the limits under their locks, the
/// pending order, its lines and one all-or-nothing hold of the basket.
pub(in crate::checkout) async fn start_basket(
    pool: &PgPool,
    start: &CheckoutStart,
    priced: Priced,
) -> Result<StartOutcome> {
    let mut tx = pool.begin().await?;
    // the limits, decided under their locks before any order or resource
    let over = over_limits(&mut tx, start, &priced.lines, &priced.products).await?;
    if !over.is_empty() {
        tx.rollback().await?;
        if let Some(order) = order_by_checkout_key(pool, start.checkout_key.as_str()).await? {
            return Ok(StartOutcome::AlreadyStarted { order });
        }
        return Ok(StartOutcome::OverLimit { lines: over });
    }
    let off_sale = off_sale_now(&mut tx, &priced.lines).await?;
    if !off_sale.is_empty() {
        tx.rollback().await?;
        return Ok(StartOutcome::NotOnSale { lines: off_sale });
    }
    let Some(order_id) = write_order(&mut tx, start, &priced).await? else {
        // a double submit: the first submit's order, whatever became of it
        tx.rollback().await?;
        let existing: Order = sqlx::query_as("select * from orders where checkout_key = $1")
            .bind(start.checkout_key.as_str())
            .fetch_one(pool)
            .await?;
        return Ok(StartOutcome::AlreadyStarted { order: existing });
    };
    let hold_id = match hold_claims(&mut tx, start, &priced).await? {
        Ok(hold_id) => hold_id,
        Err(refused) => {
            tx.rollback().await?;
            return Ok(refused);
        }
    };
    // what pins beside its units, in this transaction, after every
    // resource lock: nothing is held when a party has no table or a
    // seat line its seats
    let unseated = seat_parties(&mut tx, order_id, hold_id, &priced).await?;
    if !unseated.is_empty() {
        tx.rollback().await?;
        return Ok(StartOutcome::Unavailable { lines: unseated });
    }
    if let Some(refused) = super::seats::pin(&mut tx, &priced, hold_id, order_id).await? {
        tx.rollback().await?;
        return Ok(refused);
    }
    let order: Order = sqlx::query_as(
        "update orders set hold_id = $2, updated_at = now() where id = $1 returning *",
    )
    .bind(order_id)
    .bind(hold_id)
    .fetch_one(&mut *tx)
    .await?;
    tx.commit().await?;
    Ok(StartOutcome::Started {
        order,
        lines: priced.lines,
        resource: None,
    })
}

/// The lines whose sale is not open by this transaction's clock: a window
/// that closed (or has not opened) since the read refuses here.
async fn off_sale_now(
    tx: &mut Transaction<'_, Postgres>,
    lines: &[OrderLine],
) -> Result<Vec<OffSaleLine>> {
    #[derive(sqlx::FromRow)]
    struct Window {
        id: String,
        name: String,
        sale_opens_at: Option<DateTime<Utc>>,
        sale_closes_at: Option<DateTime<Utc>>,
    }
    let off_sale: Vec<Window> = sqlx::query_as(
        "select id, name, sale_opens_at, sale_closes_at from products \
              where id = any($1) \
                and ((sale_opens_at is not null and sale_opens_at > now()) \
                     or (sale_closes_at is not null and sale_closes_at <= now()))",
    )
    .bind(
        lines
            .iter()
            .map(|l| l.product_id.as_str())
            .collect::<Vec<_>>(),
    )
    .fetch_all(&mut **tx)
    .await?;
    let now = Utc::now();
    Ok(off_sale
        .into_iter()
        .map(|w| OffSaleLine {
            product_id: w.id,
            name: w.name,
            sale: match Sale::at(w.sale_opens_at, w.sale_closes_at, now) {
                Sale::Open => match (w.sale_opens_at, w.sale_closes_at) {
                    (_, Some(at)) => Sale::Closed { at },
                    (Some(at), None) => Sale::Opens { at },
                    (None, None) => Sale::Closed { at: now },
                },
                other => other,
            },
        })
        .collect())
}

/// The pending order and its lines; `None` when the form's key has an
/// order already (a double submit).
async fn write_order(
    tx: &mut Transaction<'_, Postgres>,
    start: &CheckoutStart,
    priced: &Priced,
) -> Result<Option<Uuid>> {
    let discount: i64 = priced
        .lines
        .iter()
        .map(|l| l.unit_price_minor * i64::from(l.qty) - l.paid_minor)
        .sum();
    let inserted: Option<Uuid> = sqlx::query_scalar(
        "insert into orders (token, checkout_key, customer_name, customer_email, currency, \
                             amount_minor, provider, email_key, client_address, voucher_code, \
                             discount_minor, customer_phone) \
         values ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12) \
         on conflict (checkout_key) do nothing \
         returning id",
    )
    .bind(&start.order_token)
    .bind(start.checkout_key.as_str())
    .bind(start.customer.name())
    .bind(start.customer.email())
    .bind(&priced.currency)
    .bind(priced.amount)
    .bind(start.provider)
    .bind(start.limits.email_key.as_deref())
    .bind(start.limits.address.as_ref().map(|(a, _)| a.as_str()))
    .bind(start.voucher.as_ref().map(|v| v.voucher.code.as_str()))
    .bind(discount)
    .bind(start.customer.phone())
    .fetch_optional(&mut **tx)
    .await?;
    let Some(order_id) = inserted else {
        return Ok(None);
    };
    for line in &priced.lines {
        sqlx::query(
            "insert into order_lines (order_id, product_id, name, qty, unit_price_minor, \
                                      paid_minor) \
             values ($1, $2, $3, $4, $5, $6)",
        )
        .bind(order_id)
        .bind(&line.product_id)
        .bind(&line.name)
        .bind(line.qty)
        .bind(line.unit_price_minor)
        .bind(line.paid_minor)
        .execute(&mut **tx)
        .await?;
    }
    Ok(Some(order_id))
}

/// Every line's claim, and a use of the voucher (and this buyer's one use)
/// beside them: all or nothing, under the same locks. The basket's hold
/// id, or why nothing was held.
async fn hold_claims(
    tx: &mut Transaction<'_, Postgres>,
    start: &CheckoutStart,
    priced: &Priced,
) -> Result<std::result::Result<Uuid, StartOutcome>> {
    let mut held: Vec<BasketLine> = priced.claims.iter().map(|c| c.basket_line()).collect();
    if let Some(voucher) = &start.voucher {
        held.push(BasketLine {
            resource: voucher.voucher.code.resource(),
            qty: Quantity::parse(1)?,
        });
        if let Some(buyer) = &voucher.buyer {
            held.push(BasketLine {
                resource: buyer.clone(),
                qty: Quantity::parse(1)?,
            });
        }
    }
    let request = BasketRequest {
        basket: Basket::parse(held)?,
        account: start.account.clone(),
        idempotency_key: Some(start.checkout_key.clone()),
        ttl: None,
    };
    Ok(match inventory::hold_basket(&mut **tx, &request).await? {
        BasketOutcome::Held { basket_id, .. } | BasketOutcome::Replayed { basket_id, .. } => {
            Ok(basket_id.0)
        }
        BasketOutcome::Insufficient { lines } => Err(voucher_refusal(start, &lines)
            .unwrap_or_else(|| StartOutcome::Unavailable {
                lines: named(&priced.products, &lines),
            })),
        BasketOutcome::AccountCap { lines } => Err(StartOutcome::OverLimit {
            lines: named(&priced.products, &lines),
        }),
        BasketOutcome::UnknownResource { unknown } => {
            Err(StartOutcome::UnknownProducts { ids: unknown })
        }
    })
}

/// Seat every party the basket books: for each table claim, the smallest
/// free table (or joined set) that fits, pinned beside its hold with its
/// booking (`hf_seat_party`, which locks the room after the resources the
/// hold locked). The lines no table fits, as short lines (the party
/// wanted, none left).
async fn seat_parties(
    tx: &mut Transaction<'_, Postgres>,
    order_id: Uuid,
    purchase: Uuid,
    priced: &Priced,
) -> Result<Vec<ShortLine>> {
    let mut unseated = Vec::new();
    // rooms in id order, as every path that pins takes them
    let mut parties: Vec<(&OrderLine, &Claim)> = priced
        .lines
        .iter()
        .zip(&priced.claims)
        .filter(|(_, claim)| claim.pins())
        .collect();
    parties.sort_by(|a, b| a.1.resource().as_str().cmp(b.1.resource().as_str()));
    for (line, claim) in parties {
        let Claim::Table {
            resource,
            covers,
            product,
        } = claim
        else {
            continue;
        };
        let seated: Option<Vec<String>> =
            sqlx::query_scalar("select tables from hf_seat_party($1, $2, $3, $4, $5)")
                .bind(order_id)
                .bind(purchase)
                .bind(resource.as_str())
                .bind(product)
                .bind(covers.get())
                .fetch_optional(&mut **tx)
                .await?;
        if seated.is_none() {
            unseated.push(ShortLine {
                product_id: line.product_id.clone(),
                name: line.name.clone(),
                requested: line.qty,
                available: 0,
            });
        }
    }
    Ok(unseated)
}

/// The voucher's line short: its last use is taken, or this buyer's one
/// use is.
fn voucher_refusal(start: &CheckoutStart, lines: &[LineAvailability]) -> Option<StartOutcome> {
    let voucher = start.voucher.as_ref()?;
    let short = |resource: &ResourceId| {
        lines
            .iter()
            .any(|l| l.short && l.resource_id == resource.as_str())
    };
    let refusal = if voucher.buyer.as_ref().is_some_and(short) {
        crate::vouchers::Refusal::UsedByYou
    } else if short(&voucher.voucher.code.resource()) {
        crate::vouchers::Refusal::UsedUp
    } else {
        return None;
    };
    Some(StartOutcome::VoucherRefused { refusal })
}

/// The engine's short lines, named as the shopper's products.
fn named(products: &[PricedProduct], lines: &[LineAvailability]) -> Vec<ShortLine> {
    lines
        .iter()
        .filter(|l| l.short)
        .filter_map(|l| {
            products
                .iter()
                .find(|p| p.resource_id == l.resource_id)
                .map(|p| ShortLine {
                    product_id: p.id.clone(),
                    name: p.name.clone(),
                    requested: l.requested,
                    available: l.available,
                })
        })
        .collect()
}

/// The lines of a basket checkout that its e-mail or its address may not
/// take now, decided in `tx` under the limits' locks (taken in key order,
/// before any order row or resource, as `hf_start_checkouts` takes them),
/// from what the pending orders of that e-mail and address still hold. A
/// form submitted before is not limited: it is its own order.
async fn over_limits(
    tx: &mut Transaction<'_, Postgres>,
    start: &CheckoutStart,
    lines: &[OrderLine],
    products: &[PricedProduct],
) -> Result<Vec<ShortLine>> {
    let limits = &start.limits;
    let mut keys: Vec<&str> = limits
        .email_key
        .iter()
        .map(String::as_str)
        .chain(limits.address.iter().map(|(a, _)| a.as_str()))
        .collect();
    if keys.is_empty() {
        return Ok(Vec::new());
    }
    keys.sort_unstable();
    keys.dedup();
    for key in keys {
        sqlx::query("select hf_limit_lock($1)")
            .bind(key)
            .execute(&mut **tx)
            .await?;
    }
    let used_before: bool =
        sqlx::query_scalar("select exists (select 1 from orders where checkout_key = $1)")
            .bind(start.checkout_key.as_str())
            .fetch_one(&mut **tx)
            .await?;
    if used_before {
        return Ok(Vec::new());
    }
    let product = |id: &str| products.iter().find(|p| p.id == id).expect("a priced line");
    let mut over = Vec::new();
    for line in lines {
        let p = product(&line.product_id);
        let mut room: Option<i32> = None;
        if let Some(email_key) = &limits.email_key {
            let held: i32 = sqlx::query_scalar("select hf_units_held_by_email($1, $2)")
                .bind(email_key)
                .bind(&line.product_id)
                .fetch_one(&mut **tx)
                .await?;
            room = Some(p.max_per_order - held);
        }
        if let Some((address, cap)) = &limits.address {
            let held: i32 = sqlx::query_scalar("select hf_units_held_from_address($1, $2)")
                .bind(address)
                .bind(&p.resource_id)
                .fetch_one(&mut **tx)
                .await?;
            // the basket's own lines on the same resource count together
            let wanted: i32 = lines
                .iter()
                .filter(|l| product(&l.product_id).resource_id == p.resource_id)
                .map(|l| l.qty)
                .sum();
            let left = cap - held - (wanted - line.qty);
            room = Some(room.map_or(left, |r| r.min(left)));
        }
        if let Some(room) = room
            && line.qty > room
        {
            over.push(ShortLine {
                product_id: line.product_id.clone(),
                name: line.name.clone(),
                requested: line.qty,
                available: room.max(0),
            });
        }
    }
    Ok(over)
}
