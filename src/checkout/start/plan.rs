//! Judging a checkout from its one read, before any lock: the lines merged
//! (the same product twice is one line), each choice taken by its
//! product's kind and turned into what it claims, and what can be refused
//! without the lock refused (unknown, locked, off sale, over the limit per
//! order, short of what the committed counters leave). What is left is
//! one shape for every checkout, whatever its lines claim: the checkout
//! as `hf_start_checkouts` takes it ([`Planned`]).

use std::sync::Arc;

use serde::Serialize;
use sqlx::PgPool;

use super::read::{CheckoutRead, PricedProduct, priced_products};
use super::{CheckoutStart, OffSaleLine, StartOutcome, WantedLine};
use crate::catalogue::Sale;
use crate::catalogue::kinds::line::Claim;
use crate::checkout::short::{ShortLine, Supply, Wanted, short_lines};
use crate::checkout::{CheckoutError, OrderLine, Result, order_by_checkout_key};
use crate::inventory::ResourceId;

/// What is left to do for a checkout once the read has been judged.
pub(in crate::checkout) enum Plan {
    /// Decided without the lock: nothing is written.
    Decided(Box<StartOutcome>),
    /// Its order, its holds and their pins, in one call of
    /// `hf_start_checkouts` with the checkouts waiting for the same
    /// resources.
    Start(Arc<Planned>),
}

/// A checkout ready to start: what `hf_start_checkouts` takes, and what
/// its answer is read against.
#[derive(Debug)]
pub(in crate::checkout) struct Planned {
    pub checkout: Checkout,
    /// Its order's lines, priced, in the checkout's order.
    pub lines: Vec<OrderLine>,
    /// What it queues with: the resources it holds, ascending and joined,
    /// a seated section's as its event (see [`planned`]).
    pub key: String,
    /// The one resource it holds, when it holds one (no voucher's use
    /// beside it): its hold is its purchase.
    pub resource: Option<String>,
}

/// One checkout as `hf_start_checkouts` reads it.
#[derive(Debug, Serialize)]
pub(in crate::checkout) struct Checkout {
    pub key: String,
    pub account: String,
    pub token: String,
    pub name: String,
    pub email: String,
    pub phone: Option<String>,
    pub currency: String,
    pub provider: crate::payments::ProviderKind,
    /// The limits it counts against (see `hf_start_checkouts`).
    pub email_key: Option<String>,
    pub address: Option<String>,
    pub address_cap: Option<i32>,
    pub voucher: Option<String>,
    pub lines: Vec<Line>,
    /// The voucher's units: its next use, and this buyer's one use.
    pub uses: Vec<Use>,
}

impl Checkout {
    /// The keys its limits lock (`hf_start_checkouts` locks every e-mail's
    /// and address's of a batch, capped or not).
    pub fn limit_keys(&self) -> impl Iterator<Item = &str> {
        self.email_key
            .iter()
            .chain(&self.address)
            .map(String::as_str)
    }

    /// Every resource it holds: its lines' and its voucher's.
    pub fn resources(&self) -> impl Iterator<Item = &str> {
        self.lines
            .iter()
            .map(|l| l.resource.as_str())
            .chain(self.uses.iter().map(|u| u.resource.as_str()))
    }
}

impl Line {
    /// How many seats it asks to be chosen for it, and whether together,
    /// when it asks for the best of its section rather than seats by label.
    pub fn best_seats(&self) -> Option<(usize, bool)> {
        match &self.claim {
            ClaimShape::Seats {
                seats: None,
                together,
            } => Some((usize::try_from(self.qty).ok()?, *together)),
            _ => None,
        }
    }
}

/// One line of a checkout: its order line and what it claims.
#[derive(Debug, Serialize)]
pub(in crate::checkout) struct Line {
    pub product: String,
    pub name: String,
    pub qty: i32,
    pub unit_price: i64,
    pub paid: i64,
    pub resource: String,
    /// The most its e-mail may hold of the product, when e-mails count.
    pub email_cap: Option<i32>,
    #[serde(flatten)]
    pub claim: ClaimShape,
}

/// What a line claims beside its units, as the call reads it.
#[derive(Debug, Serialize)]
#[serde(tag = "claim", rename_all = "snake_case")]
pub(in crate::checkout) enum ClaimShape {
    Units,
    /// `seats` by label, or (`None`) the best, together or not.
    Seats {
        seats: Option<Vec<String>>,
        together: bool,
    },
    /// The party (the line's qty) seated at the product's time.
    Table,
}

impl From<&Claim> for ClaimShape {
    fn from(claim: &Claim) -> Self {
        match claim {
            Claim::Units { .. } => ClaimShape::Units,
            Claim::Table { .. } => ClaimShape::Table,
            Claim::Seats { pick, .. } => ClaimShape::Seats {
                seats: pick
                    .labels()
                    .map(|labels| labels.into_iter().map(str::to_owned).collect()),
                together: pick.together(),
            },
        }
    }
}

/// A unit of a voucher's, held with the order's, and the refusal its
/// want says (`used_up`, `used_by_you`).
#[derive(Debug, Serialize)]
pub(in crate::checkout) struct Use {
    pub resource: String,
    pub refusal: &'static str,
}

/// A checkout's lines priced, with what each claims.
struct Priced {
    lines: Vec<OrderLine>,
    /// What each line claims in the engine, in the lines' order.
    claims: Vec<Claim>,
    products: Vec<PricedProduct>,
    currency: String,
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
        return Ok(Plan::Decided(Box::new(refused)));
    }
    let priced = price(start, &wanted, products)?;
    let too_many = over_per_order(&priced);
    if !too_many.is_empty() {
        return Ok(Plan::Decided(Box::new(StartOutcome::OverLimit {
            lines: too_many,
        })));
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
            return Ok(Plan::Decided(Box::new(StartOutcome::AlreadyStarted {
                order,
            })));
        }
        return Ok(Plan::Decided(Box::new(StartOutcome::SoldOut {
            lines: short,
        })));
    }
    Ok(Plan::Start(Arc::new(planned(start, priced))))
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
    }
    Ok(Priced {
        lines,
        claims,
        products,
        currency,
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

/// The checkout as `hf_start_checkouts` takes it: every line with what it
/// claims, the voucher's uses beside them, the limits it counts against.
fn planned(start: &CheckoutStart, priced: Priced) -> Planned {
    let limits = &start.limits;
    let lines: Vec<Line> = priced
        .lines
        .iter()
        .zip(&priced.claims)
        .map(|(line, claim)| {
            let p = product(&priced.products, &line.product_id);
            Line {
                product: line.product_id.clone(),
                name: line.name.clone(),
                qty: line.qty,
                unit_price: line.unit_price_minor,
                paid: line.paid_minor,
                resource: claim.resource().as_str().to_owned(),
                email_cap: limits.email_key.as_ref().map(|_| p.max_per_order),
                claim: ClaimShape::from(claim),
            }
        })
        .collect();
    let mut uses = Vec::new();
    if let Some(voucher) = &start.voucher {
        uses.push(Use {
            resource: voucher.voucher.code.resource().as_str().to_owned(),
            refusal: "used_up",
        });
        if let Some(buyer) = &voucher.buyer {
            uses.push(Use {
                resource: buyer.as_str().to_owned(),
                refusal: "used_by_you",
            });
        }
    }
    let mut resources: Vec<&str> = lines
        .iter()
        .map(|l| l.resource.as_str())
        .chain(uses.iter().map(|u| u.resource.as_str()))
        .collect();
    resources.sort_unstable();
    resources.dedup();
    let resource = match resources.as_slice() {
        [one] => Some((*one).to_owned()),
        _ => None,
    };
    // The checkouts of one key are combined. A checkout queues with those
    // of the same resources, as they wait on the same locks; a seated
    // section's line queues with its event's other sections, whose best
    // seats one read chooses together (start_batches.rs), so a seated
    // on-sale is decided in calls as large as a ticket tier's; a party
    // queues with its room's other times, as every call seating a party
    // locks the room (a table drop's grants: one call for the room, not
    // one a time, each waiting on the last). No id holds a control
    // character: a line break joins them, a tab marks an event or a room.
    let mut queues: Vec<String> = lines
        .iter()
        .map(|l| match l.claim {
            ClaimShape::Seats { .. } | ClaimShape::Table => {
                format!("\t{}", product(&priced.products, &l.product).collection)
            }
            _ => l.resource.clone(),
        })
        .chain(uses.iter().map(|u| u.resource.clone()))
        .collect();
    queues.sort_unstable();
    queues.dedup();
    let key = queues.join("\n");
    Planned {
        checkout: Checkout {
            key: start.checkout_key.as_str().to_owned(),
            account: start.account.as_str().to_owned(),
            token: start.order_token.clone(),
            name: start.customer.name().to_owned(),
            email: start.customer.email().to_owned(),
            phone: start.customer.phone().map(str::to_owned),
            currency: priced.currency,
            provider: start.provider,
            email_key: limits.email_key.clone(),
            address: limits.address.as_ref().map(|(address, _)| address.clone()),
            address_cap: limits.address.as_ref().map(|(_, cap)| *cap),
            voucher: start.voucher.as_ref().map(|v| v.voucher.code.to_string()),
            lines,
            uses,
        },
        lines: priced.lines,
        key,
        resource,
    }
}
