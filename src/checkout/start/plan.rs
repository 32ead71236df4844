//! Judging a checkout from its one read, before any lock: the lines merged
//! (the same product twice is one line), each choice taken by its
//! product's kind and turned into what it claims, and what can be refused
//! without the lock refused (unknown, locked, off sale, over the limit per
//! order, short of what the committed counters leave). What is left is
//! shaped for the path that holds.

use chrono::{DateTime, Utc};
use sqlx::PgPool;

use super::read::{CheckoutRead, PricedProduct, priced_products};
use super::{CheckoutStart, OffSaleLine, StartOutcome, WantedLine};
use crate::catalogue::Sale;
use crate::catalogue::kinds::line::Claim;
use crate::catalogue::kinds::seat_choice::SeatPick;
use crate::checkout::short::{ShortLine, Supply, Wanted, short_lines};
use crate::checkout::{CheckoutError, OrderLine, Result, order_by_checkout_key};
use crate::inventory::ResourceId;
use crate::payments::ProviderKind;

/// One checkout of one product, as `hf_start_checkouts` takes it.
#[derive(Debug, Clone)]
pub(in crate::checkout) struct OneStart {
    pub key: String,
    pub account: String,
    pub qty: i32,
    pub product: String,
    pub product_name: String,
    pub unit_price: i64,
    pub currency: String,
    pub token: String,
    pub name: String,
    pub email: String,
    pub provider: ProviderKind,
    /// The limits it counts against (see `hf_start_checkouts`).
    pub email_key: Option<String>,
    pub email_cap: Option<i32>,
    pub address: Option<(String, i32)>,
    /// The product's sale window, to say which way it is closed when the
    /// database refuses it.
    pub opens_at: Option<DateTime<Utc>>,
}

/// What is left to do for a checkout once the read has been judged.
pub(in crate::checkout) enum Plan {
    /// Decided without the lock: nothing is written.
    Decided(StartOutcome),
    /// One product: order, line and hold in one call of
    /// `hf_start_checkouts` on its resource.
    OneProduct {
        one: OneStart,
        lines: Vec<OrderLine>,
        resource: String,
    },
    /// One seated section: its seats chosen and pinned, its order, line
    /// and hold in one call of `hf_start_seat_checkouts` on its resource
    /// (combined by the seats' combiner, `seat_batches`).
    OneSection {
        one: OneStart,
        pick: SeatPick,
        lines: Vec<OrderLine>,
        resource: String,
    },
    /// Several products (or a voucher's use beside one): one transaction
    /// holds every claim ([`super::start_basket`]).
    Basket(Priced),
}

/// A checkout's lines priced, with what each claims.
pub(in crate::checkout) struct Priced {
    pub lines: Vec<OrderLine>,
    /// What each line claims in the engine, in the lines' order.
    pub claims: Vec<Claim>,
    pub products: Vec<PricedProduct>,
    pub currency: String,
    pub amount: i64,
}

/// Judge a checkout from the products it names (read with the basket, in
/// one snapshot, or here): what can be decided without the lock is, and
/// the rest is shaped for the path that holds.
pub(in crate::checkout) async fn plan(
    pool: &PgPool,
    start: &CheckoutStart,
    read: Option<&CheckoutRead>,
) -> Result<Plan> {
    let wanted = merged(&start.lines)?;
    let ids: Vec<&str> = wanted.iter().map(|w| w.product_id.as_str()).collect();
    let products = priced_products(pool, read, &ids).await?;
    if let Some(refused) = refused_as_sold(start, &ids, &products) {
        return Ok(Plan::Decided(refused));
    }
    let priced = price(start, &wanted, products)?;
    let too_many = over_per_order(&priced);
    if !too_many.is_empty() {
        return Ok(Plan::Decided(StartOutcome::OverLimit { lines: too_many }));
    }
    // A refusal may be decided without the lock, as the engine decides
    // one: when a line does not fit in what the committed counters leave
    // and nothing is due to expire, the crowd at a sold-out product is
    // answered from one read and writes nothing. A grant always goes
    // through the locked path.
    let short = short_of_read(&priced);
    if !short.is_empty() {
        // A double submit that raced the first one's hold is still that
        // order. (Read in one snapshot with the counters, the form's order
        // is there exactly when its hold is counted.)
        if read.is_none()
            && let Some(order) = order_by_checkout_key(pool, start.checkout_key.as_str()).await?
        {
            return Ok(Plan::Decided(StartOutcome::AlreadyStarted { order }));
        }
        return Ok(Plan::Decided(StartOutcome::Unavailable { lines: short }));
    }
    Ok(shape(start, priced))
}

/// The lines with the same product twice made one (their choices
/// combined); refused when empty or when two choices do not combine.
fn merged(lines: &[WantedLine]) -> Result<Vec<WantedLine>> {
    let mut wanted: Vec<WantedLine> = Vec::new();
    for line in lines {
        match wanted.iter_mut().find(|w| w.product_id == line.product_id) {
            Some(w) => {
                w.choice = w.choice.merge(&line.choice).ok_or_else(|| {
                    CheckoutError::InvalidInput(format!(
                        "{}: its lines together ask for more than one order can take",
                        line.product_id
                    ))
                })?;
            }
            None => wanted.push(line.clone()),
        }
    }
    if wanted.is_empty() {
        return Err(CheckoutError::InvalidInput("the basket is empty".into()));
    }
    Ok(wanted)
}

/// What refuses a checkout whatever it asks for: a product that is not
/// sold (or no longer), a hidden one without the voucher that unlocks it,
/// a sale that is not open by the database's clock at the read (the
/// locked path asks it again).
fn refused_as_sold(
    start: &CheckoutStart,
    ids: &[&str],
    products: &[PricedProduct],
) -> Option<StartOutcome> {
    let unknown: Vec<String> = ids
        .iter()
        .filter(|id| !products.iter().any(|p| p.id == **id))
        .map(|id| (*id).to_owned())
        .collect();
    if !unknown.is_empty() {
        return Some(StartOutcome::UnknownProducts { ids: unknown });
    }
    let locked: Vec<String> = products
        .iter()
        .filter(|p| {
            p.hidden
                && !start
                    .voucher
                    .as_ref()
                    .is_some_and(|v| v.voucher.unlocks.contains(&p.id))
        })
        .map(|p| p.id.clone())
        .collect();
    if !locked.is_empty() {
        return Some(StartOutcome::Locked { ids: locked });
    }
    let off_sale: Vec<OffSaleLine> = products
        .iter()
        .filter_map(|p| {
            let sale = match (p.opens_later, p.closed_at) {
                (Some(at), _) => Sale::Opens { at },
                (None, Some(at)) => Sale::Closed { at },
                (None, None) => return None,
            };
            Some(OffSaleLine {
                product_id: p.id.clone(),
                name: p.name.clone(),
                sale,
            })
        })
        .collect();
    (!off_sale.is_empty()).then_some(StartOutcome::NotOnSale { lines: off_sale })
}

/// Each line priced, its choice taken by its product's kind and turned
/// into what it claims, and what the voucher takes off, line by line
/// (whether it may be used now was judged before, by the database's clock:
/// [`crate::checkout::begin`]).
fn price(
    start: &CheckoutStart,
    wanted: &[WantedLine],
    products: Vec<PricedProduct>,
) -> Result<Priced> {
    let currency = products[0].currency.clone();
    if products.iter().any(|p| p.currency != currency) {
        return Err(CheckoutError::InvalidInput(
            "one order is paid in one currency".into(),
        ));
    }
    let mut lines = Vec::with_capacity(wanted.len());
    let mut claims = Vec::with_capacity(wanted.len());
    let mut amount: i64 = 0;
    for line in wanted {
        let p = product(&products, &line.product_id);
        let Some(choice) = p.kind.choice().adopt(line.choice.clone()) else {
            return Err(CheckoutError::InvalidInput(format!(
                "{} is not chosen that way",
                p.name
            )));
        };
        let qty = choice.qty().get();
        // a party below its deposit's size pays nothing
        let unit_price = match p.priced_from {
            Some(from) if qty < from => 0,
            _ => p.price_minor,
        };
        let paid = unit_price
            .checked_mul(i64::from(qty))
            .ok_or_else(|| CheckoutError::InvalidInput("the order total is too large".into()))?;
        amount = amount
            .checked_add(paid)
            .ok_or_else(|| CheckoutError::InvalidInput("the order total is too large".into()))?;
        // a time the line names is its product's: a form or a call for a
        // time that is not this product's is refused
        if choice.at().is_some() && choice.at() != p.starts_at {
            return Err(CheckoutError::InvalidInput(format!(
                "{} is not at the time asked for",
                p.name
            )));
        }
        claims.push(choice.claim(&p.id, ResourceId::parse(&p.resource_id)?));
        lines.push(OrderLine {
            product_id: p.id.clone(),
            name: p.name.clone(),
            qty,
            unit_price_minor: unit_price,
            paid_minor: paid,
        });
    }
    if let Some(voucher) = &start.voucher {
        let priced: Vec<crate::vouchers::PricedLine> = lines
            .iter()
            .map(|l| crate::vouchers::PricedLine {
                product_id: l.product_id.clone(),
                unit_price_minor: l.unit_price_minor,
                qty: l.qty,
            })
            .collect();
        for (line, off) in lines.iter_mut().zip(voucher.voucher.take_off(&priced)) {
            line.paid_minor -= off;
        }
        amount = lines.iter().map(|l| l.paid_minor).sum();
    }
    Ok(Priced {
        lines,
        claims,
        products,
        currency,
        amount,
    })
}

/// The product a line names (the lines were checked against them).
fn product<'p>(products: &'p [PricedProduct], id: &str) -> &'p PricedProduct {
    products
        .iter()
        .find(|p| p.id == id)
        .expect("a line's product was read")
}

/// No order takes more of a product than its limit per order.
fn over_per_order(priced: &Priced) -> Vec<ShortLine> {
    priced
        .lines
        .iter()
        .filter_map(|line| {
            let max = product(&priced.products, &line.product_id).max_per_order;
            (line.qty > max).then(|| ShortLine {
                product_id: line.product_id.clone(),
                name: line.name.clone(),
                requested: line.qty,
                available: max,
            })
        })
        .collect()
}

/// The lines that do not fit in what the read's committed counters leave,
/// where nothing is due to come back.
fn short_of_read(priced: &Priced) -> Vec<ShortLine> {
    let wanted: Vec<Wanted<'_>> = priced
        .lines
        .iter()
        .map(|line| Wanted {
            product_id: &line.product_id,
            name: &line.name,
            qty: line.qty,
            resource: &product(&priced.products, &line.product_id).resource_id,
        })
        .collect();
    short_lines(&wanted, |resource| {
        priced
            .products
            .iter()
            .find(|p| p.resource_id == resource)
            .map(|p| Supply {
                left: p.left,
                settled: p.settled,
            })
    })
}

/// One product without a voucher or phone: order, line and hold in one call,
/// combined with the other checkouts of its resource waiting at the same
/// moment; a seated section's seats are chosen and pinned in that call.
/// Anything else: the one-transaction path, where a voucher's use is held
/// with the units as a basket's line, and a table is pinned beside its
/// units.
fn shape(start: &CheckoutStart, priced: Priced) -> Plan {
    let ([line], [claim], None) = (
        priced.lines.as_slice(),
        priced.claims.as_slice(),
        &start.voucher,
    ) else {
        return Plan::Basket(priced);
    };
    // an order that keeps a phone is written by the one transaction, and
    // so is a table (pinned beside its units)
    if start.customer.phone().is_some() {
        return Plan::Basket(priced);
    }
    let pick = match claim {
        Claim::Seats { pick, .. } => Some(pick.clone()),
        claim if claim.pins() => return Plan::Basket(priced),
        _ => None,
    };
    let p = product(&priced.products, &line.product_id);
    let one = OneStart {
        key: start.checkout_key.as_str().to_owned(),
        account: start.account.as_str().to_owned(),
        qty: line.qty,
        product: line.product_id.clone(),
        product_name: line.name.clone(),
        unit_price: line.unit_price_minor,
        currency: priced.currency.clone(),
        token: start.order_token.clone(),
        name: start.customer.name().to_owned(),
        email: start.customer.email().to_owned(),
        provider: start.provider,
        email_key: start.limits.email_key.clone(),
        email_cap: start.limits.email_key.as_ref().map(|_| p.max_per_order),
        address: start.limits.address.clone(),
        opens_at: p.opens_later,
    };
    let resource = p.resource_id.clone();
    match pick {
        Some(pick) => Plan::OneSection {
            one,
            pick,
            lines: priced.lines,
            resource,
        },
        None => Plan::OneProduct {
            one,
            lines: priced.lines,
            resource,
        },
    }
}
