//! Step one: the pending order and a hold on every line, in one
//! transaction. Nothing is held when anything is short.
//!
//! [`plan`] decides what can be decided from the read (unknown products,
//! limits per order, lines short of what is left) and shapes the rest: a
//! one-product checkout goes to `hf_start_checkouts`, combined with the
//! others of its resource ([`super::start_batches`]); a basket of several
//! products is held in one transaction here ([`start_basket`]).

use serde::Serialize;
use sqlx::{PgPool, Postgres, Transaction};
use uuid::Uuid;

use chrono::{DateTime, Utc};

use crate::catalogue::Sale;
use crate::inventory::{
    self, AccountId, Basket, BasketLine, BasketOutcome, BasketRequest, IdempotencyKey,
    InvalidInput, Quantity, ResourceId,
};
use crate::payments::ProviderKind;
use crate::vouchers::Voucher;

use super::short::{ShortLine, Supply, Wanted, short_lines};
use super::{CheckoutError, Customer, Order, OrderLine, Result, basket, order_by_checkout_key};

/// One line the shopper asked for.
#[derive(Debug, Clone)]
pub struct WantedLine {
    pub product_id: String,
    pub qty: Quantity,
}

/// A checkout as the form submits it.
#[derive(Debug, Clone)]
pub struct CheckoutStart {
    /// The form's one-time key: a second submit finds the same order.
    pub checkout_key: IdempotencyKey,
    /// The order's unguessable token ([`codes::order_token`]), made once per
    /// submit: a start run again after its commit's outcome was lost finds
    /// its own order by it, and goes on as if the first run had answered.
    pub order_token: String,
    /// The basket's owner (its cookie), for account caps.
    pub account: AccountId,
    pub lines: Vec<WantedLine>,
    pub customer: Customer,
    pub provider: ProviderKind,
    /// Who the checkout counts against (see [`crate::limits`]).
    pub limits: StartLimits,
    /// The voucher the shopper gave, found and judged valid now; its use
    /// is held with the order's units.
    pub voucher: Option<VoucherUse>,
}

/// A voucher going into a checkout: what it is, and the resources whose
/// units are its uses (the voucher's, and one buyer's when it is one use
/// per buyer).
#[derive(Debug, Clone)]
pub struct VoucherUse {
    pub voucher: Voucher,
    pub buyer: Option<ResourceId>,
}

/// A line whose sale is not open now, by the database's clock.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct OffSaleLine {
    pub product_id: String,
    pub name: String,
    pub sale: Sale,
}

/// What a checkout counts against. `Default`: nothing.
#[derive(Debug, Clone, Default)]
pub struct StartLimits {
    /// The normalised e-mail: it may hold at most a product's
    /// `max_per_order` units at once.
    pub email_key: Option<String>,
    /// The client address, and the most units of one resource it may hold
    /// at once.
    pub address: Option<(String, i32)>,
}

impl StartLimits {
    /// The limits the shop's settings put on a customer from an address.
    pub fn for_customer(
        limits: &crate::limits::Limits,
        customer: &Customer,
        address: &str,
    ) -> Self {
        Self {
            email_key: limits
                .per_email
                .then(|| crate::limits::email_key(customer.email())),
            address: limits.address_units.map(|cap| (address.to_owned(), cap)),
        }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "status", rename_all = "snake_case")]
pub enum StartOutcome {
    /// The order is pending and every line is held: call the provider.
    Started {
        order: Order,
        lines: Vec<OrderLine>,
        /// For a one-product checkout, the resource it holds: its payment
        /// phase can start in a combined call ([`Checkouts::attach`]).
        resource: Option<String>,
    },
    /// The form was submitted before: this is its order.
    AlreadyStarted { order: Order },
    /// Nothing was held; these lines are short.
    Unavailable { lines: Vec<ShortLine> },
    /// The basket would take more than one shopper may hold.
    OverLimit { lines: Vec<ShortLine> },
    /// Products that do not exist (or are no longer sold).
    UnknownProducts { ids: Vec<String> },
    /// Lines whose sale is not open (not yet, or no longer): nothing held.
    NotOnSale { lines: Vec<OffSaleLine> },
    /// Hidden products, sold only with a voucher that unlocks them.
    Locked { ids: Vec<String> },
    /// The voucher's last use is taken, or this buyer used it: nothing held.
    VoucherRefused { refusal: crate::vouchers::Refusal },
}

/// What checking out a basket needs, read in one snapshot: whether the
/// form was submitted before, and the basket's lines with each product's
/// price and what its resource's committed counters leave.
#[derive(Debug, Clone)]
pub struct CheckoutRead {
    /// The order this checkout key already started.
    pub existing: Option<Uuid>,
    pub lines: Vec<ReadLine>,
}

/// A basket line as [`read_checkout`] sees it.
#[derive(Debug, Clone)]
pub struct ReadLine {
    pub product_id: String,
    pub name: String,
    pub qty: i32,
    pub price_minor: i64,
    pub currency: String,
    pub resource_id: String,
    /// Still for sale.
    pub active: bool,
    /// Most units of it one order may take.
    pub max_per_order: i32,
    /// Sold only with a voucher that unlocks it.
    pub hidden: bool,
    /// When its sale opens, if that is later than the read (by the
    /// database's clock), and when it closed, if it has.
    pub opens_later: Option<DateTime<Utc>>,
    pub closed_at: Option<DateTime<Utc>>,
    /// The voucher that let a hidden product into the basket.
    pub unlocked_by: Option<String>,
    left: i32,
    settled: bool,
}

impl ReadLine {
    /// The line as the basket page shows it.
    pub fn basket_line(&self) -> basket::BasketLine {
        basket::BasketLine {
            product_id: self.product_id.clone(),
            name: self.name.clone(),
            qty: self.qty,
            price_minor: self.price_minor,
            currency: self.currency.clone(),
            unlocked_by: self.unlocked_by.clone(),
        }
    }
}

/// One query for a submitted checkout form: its order if the key was used
/// before, else the basket with prices and counters. The crowd at a sold-out
/// product is answered from this read alone.
pub async fn read_checkout(
    pool: &PgPool,
    checkout_key: &str,
    basket_id: &str,
) -> sqlx::Result<CheckoutRead> {
    // one row when the basket is empty or the key was used: the lines are
    // optional
    #[derive(sqlx::FromRow)]
    struct Row {
        existing: Option<Uuid>,
        product_id: Option<String>,
        name: Option<String>,
        qty: Option<i32>,
        price_minor: Option<i64>,
        currency: Option<String>,
        resource_id: Option<String>,
        active: Option<bool>,
        max_per_order: Option<i32>,
        hidden: Option<bool>,
        opens_later: Option<DateTime<Utc>>,
        closed_at: Option<DateTime<Utc>>,
        unlocked_by: Option<String>,
        left: Option<i32>,
        settled: Option<bool>,
    }
    let rows: Vec<Row> = sqlx::query_as(
        "select k.existing, l.product_id, l.name, l.qty, l.price_minor, l.currency, \
                l.resource_id, l.active, l.max_per_order, l.hidden, l.opens_later, l.closed_at, \
                l.unlocked_by, l.left, l.settled \
           from (select (select id from orders where checkout_key = $1) as existing) k \
           left join lateral ( \
                select b.product_id, p.name, b.qty, p.price_minor, p.currency, p.resource_id, \
                       p.active, p.max_per_order, p.hidden, \
                       case when p.sale_opens_at > now() then p.sale_opens_at end as opens_later, \
                       case when p.sale_closes_at <= now() then p.sale_closes_at end as closed_at, \
                       b.unlocked_by, r.total - r.held - r.sold as left, \
                       coalesce(r.next_expiry > now(), true) as settled, b.added_at \
                  from basket_lines b \
                  join products p on p.id = b.product_id \
                  join resources r on r.id = p.resource_id \
                 where b.basket_id = $2 and k.existing is null) l on true \
          order by l.added_at, l.product_id",
    )
    .bind(checkout_key)
    .bind(basket_id)
    .fetch_all(pool)
    .await?;
    let existing = rows.first().and_then(|r| r.existing);
    let lines = rows
        .into_iter()
        .filter_map(|r| {
            Some(ReadLine {
                product_id: r.product_id?,
                name: r.name?,
                qty: r.qty?,
                price_minor: r.price_minor?,
                currency: r.currency?,
                resource_id: r.resource_id?,
                active: r.active?,
                max_per_order: r.max_per_order?,
                hidden: r.hidden?,
                opens_later: r.opens_later,
                closed_at: r.closed_at,
                unlocked_by: r.unlocked_by,
                left: r.left?,
                settled: r.settled?,
            })
        })
        .collect();
    Ok(CheckoutRead { existing, lines })
}

/// A product of the checkout with its price and what its resource has
/// left, as read without a lock.
#[derive(Debug, Clone, sqlx::FromRow)]
pub(super) struct PricedProduct {
    id: String,
    resource_id: String,
    name: String,
    price_minor: i64,
    currency: String,
    max_per_order: i32,
    /// What the resource's committed counters leave, read without a lock.
    left: i32,
    /// Nothing on the resource is due to expire, so `left` is the answer
    /// the locked path would give.
    settled: bool,
    hidden: bool,
    /// As [`ReadLine`]'s: by the database's clock at the read.
    opens_later: Option<DateTime<Utc>>,
    closed_at: Option<DateTime<Utc>>,
}

/// One checkout of one product, as `hf_start_checkouts` takes it.
#[derive(Debug, Clone)]
pub(super) struct OneStart {
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
pub(super) enum Plan {
    /// Decided without the lock: nothing is written.
    Decided(StartOutcome),
    /// One product: order, line and hold in one call of
    /// `hf_start_checkouts` on its resource.
    OneProduct {
        one: OneStart,
        lines: Vec<OrderLine>,
        resource: String,
    },
    /// Several products: one transaction holds them all ([`start_basket`]).
    Basket {
        lines: Vec<OrderLine>,
        products: Vec<PricedProduct>,
        currency: String,
        amount: i64,
    },
}

/// Judge a checkout from the products it names (read with the basket, in
/// one snapshot, or here): what can be decided without the lock is, and
/// the rest is shaped for the path that holds.
pub(super) async fn plan(
    pool: &PgPool,
    start: &CheckoutStart,
    read: Option<&CheckoutRead>,
) -> Result<Plan> {
    // the same product twice is one line
    let mut wanted: Vec<(String, i64)> = Vec::new();
    for line in &start.lines {
        match wanted.iter_mut().find(|(id, _)| *id == line.product_id) {
            Some((_, qty)) => *qty += i64::from(line.qty.get()),
            None => wanted.push((line.product_id.clone(), i64::from(line.qty.get()))),
        }
    }
    if wanted.is_empty() {
        return Err(CheckoutError::InvalidInput("the basket is empty".into()));
    }
    let ids: Vec<&str> = wanted.iter().map(|(id, _)| id.as_str()).collect();
    let products: Vec<PricedProduct> =
        match read {
            // read with the basket, in the same snapshot
            Some(read) => read
                .lines
                .iter()
                .filter(|l| l.active && ids.contains(&l.product_id.as_str()))
                .map(|l| PricedProduct {
                    id: l.product_id.clone(),
                    resource_id: l.resource_id.clone(),
                    name: l.name.clone(),
                    price_minor: l.price_minor,
                    currency: l.currency.clone(),
                    max_per_order: l.max_per_order,
                    left: l.left,
                    settled: l.settled,
                    hidden: l.hidden,
                    opens_later: l.opens_later,
                    closed_at: l.closed_at,
                })
                .collect(),
            None => sqlx::query_as(
                "select p.id, p.resource_id, p.name, p.price_minor, p.currency, p.max_per_order, \
                        r.total - r.held - r.sold as left, \
                        coalesce(r.next_expiry > now(), true) as settled, p.hidden, \
                        case when p.sale_opens_at > now() then p.sale_opens_at end as opens_later, \
                        case when p.sale_closes_at <= now() then p.sale_closes_at end as closed_at \
                   from products p join resources r on r.id = p.resource_id \
                  where p.active and p.id = any($1)",
            )
            .bind(&ids)
            .fetch_all(pool)
            .await?,
        };
    let unknown: Vec<String> = ids
        .iter()
        .filter(|id| !products.iter().any(|p| p.id == **id))
        .map(|id| (*id).to_owned())
        .collect();
    if !unknown.is_empty() {
        return Ok(Plan::Decided(StartOutcome::UnknownProducts {
            ids: unknown,
        }));
    }
    // a hidden product is sold only with a voucher that unlocks it
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
        return Ok(Plan::Decided(StartOutcome::Locked { ids: locked }));
    }
    // a sale opens and closes by the database's clock (read with the
    // products); the locked path asks it again
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
    if !off_sale.is_empty() {
        return Ok(Plan::Decided(StartOutcome::NotOnSale { lines: off_sale }));
    }
    let currency = &products[0].currency;
    if products.iter().any(|p| &p.currency != currency) {
        return Err(CheckoutError::InvalidInput(
            "one order is paid in one currency".into(),
        ));
    }
    let product = |id: &str| products.iter().find(|p| p.id == id).expect("checked above");
    let mut lines = Vec::with_capacity(wanted.len());
    let mut amount: i64 = 0;
    for (id, qty) in &wanted {
        let qty = Quantity::parse(*qty)?;
        let p = product(id);
        amount = p
            .price_minor
            .checked_mul(i64::from(qty.get()))
            .and_then(|line| amount.checked_add(line))
            .ok_or_else(|| CheckoutError::InvalidInput("the order total is too large".into()))?;
        lines.push(OrderLine {
            product_id: p.id.clone(),
            name: p.name.clone(),
            qty: qty.get(),
            unit_price_minor: p.price_minor,
            paid_minor: p.price_minor * i64::from(qty.get()),
        });
    }
    // what the voucher takes off, line by line (the order is paid the
    // rest); whether it may be used now was judged before, by the
    // database's clock ([`super::begin`])
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

    // No order takes more of a product than its limit per order.
    let too_many: Vec<ShortLine> = lines
        .iter()
        .filter_map(|line| {
            let max = product(&line.product_id).max_per_order;
            (line.qty > max).then(|| ShortLine {
                product_id: line.product_id.clone(),
                name: line.name.clone(),
                requested: line.qty,
                available: max,
            })
        })
        .collect();
    if !too_many.is_empty() {
        return Ok(Plan::Decided(StartOutcome::OverLimit { lines: too_many }));
    }

    // A refusal may be decided without the lock, as the engine decides
    // one: when a line does not fit in what the committed counters leave
    // and nothing is due to expire, the crowd at a sold-out product is
    // answered from one read and writes nothing. A grant always goes
    // through the locked path below.
    let wanted: Vec<Wanted<'_>> = lines
        .iter()
        .map(|line| Wanted {
            product_id: &line.product_id,
            name: &line.name,
            qty: line.qty,
            resource: &product(&line.product_id).resource_id,
        })
        .collect();
    let short = short_lines(&wanted, |resource| {
        products
            .iter()
            .find(|p| p.resource_id == resource)
            .map(|p| Supply {
                left: p.left,
                settled: p.settled,
            })
    });
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

    // One product: order, line and hold in one call, combined with the
    // other checkouts of its resource waiting at the same moment. (A
    // voucher's use is held with the units, as a basket's line.)
    if let ([line], None) = (lines.as_slice(), &start.voucher) {
        let product = product(&line.product_id);
        let one = OneStart {
            key: start.checkout_key.as_str().to_owned(),
            account: start.account.as_str().to_owned(),
            qty: line.qty,
            product: line.product_id.clone(),
            product_name: line.name.clone(),
            unit_price: line.unit_price_minor,
            currency: currency.clone(),
            token: start.order_token.clone(),
            name: start.customer.name().to_owned(),
            email: start.customer.email().to_owned(),
            provider: start.provider,
            email_key: start.limits.email_key.clone(),
            email_cap: start
                .limits
                .email_key
                .as_ref()
                .map(|_| product.max_per_order),
            address: start.limits.address.clone(),
            opens_at: product.opens_later,
        };
        let resource = product.resource_id.clone();
        return Ok(Plan::OneProduct {
            one,
            lines,
            resource,
        });
    }
    let currency = currency.clone();
    Ok(Plan::Basket {
        lines,
        products,
        currency,
        amount,
    })
}

/// Several products in one transaction: the limits under their locks, the
/// pending order, its lines and one all-or-nothing hold of the basket.
pub(super) async fn start_basket(
    pool: &PgPool,
    start: &CheckoutStart,
    lines: Vec<OrderLine>,
    products: Vec<PricedProduct>,
    currency: &str,
    amount: i64,
) -> Result<StartOutcome> {
    let product = |id: &str| products.iter().find(|p| p.id == id).expect("a priced line");
    let mut tx = pool.begin().await?;
    // the limits, decided under their locks before any order or resource
    let over = over_limits(&mut tx, start, &lines, &products).await?;
    if !over.is_empty() {
        tx.rollback().await?;
        if let Some(order) = order_by_checkout_key(pool, start.checkout_key.as_str()).await? {
            return Ok(StartOutcome::AlreadyStarted { order });
        }
        return Ok(StartOutcome::OverLimit { lines: over });
    }
    // the sale, by this transaction's clock: a window that closed (or has
    // not opened) since the read refuses here
    type Window = (String, String, Option<DateTime<Utc>>, Option<DateTime<Utc>>);
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
    .fetch_all(&mut *tx)
    .await?;
    if !off_sale.is_empty() {
        tx.rollback().await?;
        let now = Utc::now();
        return Ok(StartOutcome::NotOnSale {
            lines: off_sale
                .into_iter()
                .map(|(product_id, name, opens, closes)| OffSaleLine {
                    product_id,
                    name,
                    sale: match Sale::at(opens, closes, now) {
                        Sale::Open => match (opens, closes) {
                            (_, Some(at)) => Sale::Closed { at },
                            (Some(at), None) => Sale::Opens { at },
                            (None, None) => Sale::Closed { at: now },
                        },
                        other => other,
                    },
                })
                .collect(),
        });
    }
    let token = &start.order_token;
    let discount: i64 = lines
        .iter()
        .map(|l| l.unit_price_minor * i64::from(l.qty) - l.paid_minor)
        .sum();
    let inserted: Option<Uuid> = sqlx::query_scalar(
        "insert into orders (token, checkout_key, customer_name, customer_email, currency, \
                             amount_minor, provider, email_key, client_address, voucher_code, \
                             discount_minor) \
         values ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11) \
         on conflict (checkout_key) do nothing \
         returning id",
    )
    .bind(token)
    .bind(start.checkout_key.as_str())
    .bind(start.customer.name())
    .bind(start.customer.email())
    .bind(currency)
    .bind(amount)
    .bind(start.provider)
    .bind(start.limits.email_key.as_deref())
    .bind(start.limits.address.as_ref().map(|(a, _)| a.as_str()))
    .bind(start.voucher.as_ref().map(|v| v.voucher.code.as_str()))
    .bind(discount)
    .fetch_optional(&mut *tx)
    .await?;
    let Some(order_id) = inserted else {
        // a double submit: the first submit's order, whatever became of it
        tx.rollback().await?;
        let existing: Order = sqlx::query_as("select * from orders where checkout_key = $1")
            .bind(start.checkout_key.as_str())
            .fetch_one(pool)
            .await?;
        return Ok(StartOutcome::AlreadyStarted { order: existing });
    };
    for line in &lines {
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
        .execute(&mut *tx)
        .await?;
    }

    // the order's units, and a use of its voucher (and this buyer's one
    // use) beside them: all or nothing, under the same locks
    let mut held: Vec<BasketLine> = lines
        .iter()
        .map(|line| {
            Ok(BasketLine {
                resource: ResourceId::parse(&product(&line.product_id).resource_id)?,
                qty: Quantity::parse(i64::from(line.qty))?,
            })
        })
        .collect::<std::result::Result<Vec<_>, InvalidInput>>()?;
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
    let basket = Basket::parse(held)?;
    let request = BasketRequest {
        basket,
        account: start.account.clone(),
        idempotency_key: Some(start.checkout_key.clone()),
        ttl: None,
    };
    let short_lines = |outcome_lines: &[inventory::LineAvailability]| -> Vec<ShortLine> {
        outcome_lines
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
    };
    let hold_id = match inventory::hold_basket(&mut *tx, &request).await? {
        BasketOutcome::Held { basket_id, .. } | BasketOutcome::Replayed { basket_id, .. } => {
            basket_id
        }
        BasketOutcome::Insufficient { lines } => {
            tx.rollback().await?;
            // the voucher's line short: its last use is taken, or this
            // buyer's one use is
            if let Some(voucher) = &start.voucher {
                let short = |resource: &ResourceId| {
                    lines
                        .iter()
                        .any(|l| l.short && l.resource_id == resource.as_str())
                };
                if voucher.buyer.as_ref().is_some_and(short) {
                    return Ok(StartOutcome::VoucherRefused {
                        refusal: crate::vouchers::Refusal::UsedByYou,
                    });
                }
                if short(&voucher.voucher.code.resource()) {
                    return Ok(StartOutcome::VoucherRefused {
                        refusal: crate::vouchers::Refusal::UsedUp,
                    });
                }
            }
            return Ok(StartOutcome::Unavailable {
                lines: short_lines(&lines),
            });
        }
        BasketOutcome::AccountCap { lines } => {
            tx.rollback().await?;
            return Ok(StartOutcome::OverLimit {
                lines: short_lines(&lines),
            });
        }
        BasketOutcome::UnknownResource { unknown } => {
            tx.rollback().await?;
            return Ok(StartOutcome::UnknownProducts { ids: unknown });
        }
    };
    let order: Order = sqlx::query_as(
        "update orders set hold_id = $2, updated_at = now() where id = $1 returning *",
    )
    .bind(order_id)
    .bind(hold_id.0)
    .fetch_one(&mut *tx)
    .await?;
    tx.commit().await?;
    Ok(StartOutcome::Started {
        order,
        lines,
        resource: None,
    })
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
