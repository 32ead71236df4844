//! Basket → order + holds → payment → the one confirm routine.
//!
//! SPEC §3 in code: checkout start writes the pending order and holds every
//! line in one transaction; the provider is called after the commit, outside
//! any lock; `attach_payment` then moves the holds into the payment phase
//! with a deadline that covers the provider's own expiry. Every confirmation
//! path (the browser's return, the webhook, reconciliation) goes through
//! [`confirm_payment`], the only place that turns a payment into a sale.

pub mod basket;
pub mod catalogue;
pub mod codes;
mod combined;
pub mod outbox;
pub mod refund;
pub mod settle;

pub use combined::Checkouts;
use combined::{OneStart, Starts, one_outcome, start_batch};

use chrono::{DateTime, Utc};
use serde::Serialize;
use sqlx::{PgPool, Postgres, Transaction};
use uuid::Uuid;

use crate::combine::Combiner;
use crate::inventory::{
    self, AccountId, Basket, BasketLine, BasketOutcome, BasketRequest, BeginPaymentOutcome,
    ConfirmOutcome, HoldId, IdempotencyKey, InvalidInput, InventoryError, PaymentRef, Quantity,
    ReleaseOutcome, ResourceId, Span,
};
use crate::payments::{PaymentPage, PaymentStatus, ProviderKind, ProviderPayment};

#[derive(Debug, thiserror::Error)]
pub enum CheckoutError {
    #[error("invalid input: {0}")]
    InvalidInput(String),
    #[error(transparent)]
    Inventory(#[from] InventoryError),
    #[error(transparent)]
    Database(#[from] sqlx::Error),
}

impl From<InvalidInput> for CheckoutError {
    fn from(error: InvalidInput) -> Self {
        CheckoutError::InvalidInput(error.0)
    }
}

pub type Result<T> = std::result::Result<T, CheckoutError>;

/// Where an order stands. Stored in `orders.state` as text.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, sqlx::Type)]
#[serde(rename_all = "snake_case")]
#[sqlx(type_name = "text", rename_all = "snake_case")]
pub enum OrderState {
    /// Held, waiting for its payment.
    Pending,
    /// Paid and fulfilled: it has its codes.
    Paid,
    /// Its holds ran out before a payment came.
    Expired,
    /// Given up (by the shopper, staff, or a failed payment page).
    Cancelled,
    /// Money came after the holds ended: it is on its way back.
    RefundPending,
    /// That money went back.
    Refunded,
}

impl OrderState {
    pub const ALL: [OrderState; 6] = [
        OrderState::Pending,
        OrderState::Paid,
        OrderState::Expired,
        OrderState::Cancelled,
        OrderState::RefundPending,
        OrderState::Refunded,
    ];

    /// The state a filter or a stored value names.
    pub fn parse(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|state| state.as_str() == name)
    }

    pub fn as_str(self) -> &'static str {
        match self {
            OrderState::Pending => "pending",
            OrderState::Paid => "paid",
            OrderState::Expired => "expired",
            OrderState::Cancelled => "cancelled",
            OrderState::RefundPending => "refund_pending",
            OrderState::Refunded => "refunded",
        }
    }
}

impl std::fmt::Display for OrderState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Who is paying.
#[derive(Debug, Clone)]
pub struct Customer {
    name: String,
    email: String,
}

impl Customer {
    pub fn parse(name: &str, email: &str) -> std::result::Result<Self, InvalidInput> {
        let name = name.trim();
        let email = email.trim();
        if name.is_empty() || name.chars().count() > 200 || name.chars().any(char::is_control) {
            return Err(InvalidInput(
                "please give a name of up to 200 characters".into(),
            ));
        }
        let plausible = email.len() <= 254
            && !email.chars().any(|c| c.is_whitespace() || c.is_control())
            && email
                .split_once('@')
                .is_some_and(|(local, domain)| !local.is_empty() && domain.contains('.'));
        if !plausible {
            return Err(InvalidInput(
                "please give an e-mail address like you@example.com".into(),
            ));
        }
        Ok(Self {
            name: name.to_owned(),
            email: email.to_owned(),
        })
    }

    pub fn name(&self) -> &str {
        &self.name
    }

    pub fn email(&self) -> &str {
        &self.email
    }
}

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
    /// The basket's owner (its cookie), for account caps.
    pub account: AccountId,
    pub lines: Vec<WantedLine>,
    pub customer: Customer,
    pub provider: ProviderKind,
    /// Who the checkout counts against (see [`crate::limits`]).
    pub limits: StartLimits,
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

/// A line that cannot be had, in the shopper's words.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ShortLine {
    pub product_id: String,
    pub name: String,
    pub requested: i32,
    pub available: i32,
}

/// An order as checkout and the pages need it.
#[derive(Debug, Clone, PartialEq, Serialize, sqlx::FromRow)]
pub struct Order {
    pub id: Uuid,
    pub token: String,
    pub state: OrderState,
    pub customer_name: String,
    pub customer_email: String,
    pub currency: String,
    pub amount_minor: i64,
    pub hold_id: Option<Uuid>,
    pub provider: ProviderKind,
    /// The provider's payment page (Checkout Session, Razorpay order).
    pub provider_session_id: Option<String>,
    pub provider_url: Option<String>,
    pub provider_expires_at: Option<DateTime<Utc>>,
    pub payment_ref: Option<String>,
    pub flag: Option<String>,
    pub pickup_code: Option<String>,
    pub created_at: DateTime<Utc>,
    pub paid_at: Option<DateTime<Utc>>,
}

/// An order's line, with what the provider's line items need.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, sqlx::FromRow)]
pub struct OrderLine {
    pub product_id: String,
    pub name: String,
    pub qty: i32,
    pub unit_price_minor: i64,
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
}

pub async fn order_by_id(pool: &PgPool, id: Uuid) -> sqlx::Result<Option<Order>> {
    order_by_id_in(pool, id).await
}

/// [`order_by_id`] on any executor (a webhook's transaction).
pub async fn order_by_id_in<'e>(
    executor: impl sqlx::PgExecutor<'e>,
    id: Uuid,
) -> sqlx::Result<Option<Order>> {
    sqlx::query_as("select * from orders where id = $1")
        .bind(id)
        .fetch_optional(executor)
        .await
}

pub async fn order_by_token(pool: &PgPool, token: &str) -> sqlx::Result<Option<Order>> {
    sqlx::query_as("select * from orders where token = $1")
        .bind(token)
        .fetch_optional(pool)
        .await
}

pub async fn order_by_checkout_key(pool: &PgPool, key: &str) -> sqlx::Result<Option<Order>> {
    sqlx::query_as("select * from orders where checkout_key = $1")
        .bind(key)
        .fetch_optional(pool)
        .await
}

/// The order a provider's session or order id belongs to, on any executor
/// (the Razorpay webhook asks inside its transaction).
pub async fn order_by_provider_session<'e>(
    executor: impl sqlx::PgExecutor<'e>,
    provider: ProviderKind,
    session_id: &str,
) -> sqlx::Result<Option<Order>> {
    sqlx::query_as("select * from orders where provider = $1 and provider_session_id = $2")
        .bind(provider)
        .bind(session_id)
        .fetch_optional(executor)
        .await
}

pub async fn order_lines(pool: &PgPool, order_id: Uuid) -> sqlx::Result<Vec<OrderLine>> {
    sqlx::query_as(
        "select product_id, name, qty, unit_price_minor from order_lines \
          where order_id = $1 order by product_id",
    )
    .bind(order_id)
    .fetch_all(pool)
    .await
}

/// The ticket codes of an order, by product.
/// An order's ticket codes: product, code, and whether its unit was
/// refunded.
pub async fn order_codes(
    pool: &PgPool,
    order_id: Uuid,
) -> sqlx::Result<Vec<(String, String, bool)>> {
    sqlx::query_as(
        "select product_id, code, refunded_at is not null from order_codes where order_id = $1 \
          order by product_id, code",
    )
    .bind(order_id)
    .fetch_all(pool)
    .await
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
        left: Option<i32>,
        settled: Option<bool>,
    }
    let rows: Vec<Row> = sqlx::query_as(
        "select k.existing, l.product_id, l.name, l.qty, l.price_minor, l.currency, \
                l.resource_id, l.active, l.max_per_order, l.left, l.settled \
           from (select (select id from orders where checkout_key = $1) as existing) k \
           left join lateral ( \
                select b.product_id, p.name, b.qty, p.price_minor, p.currency, p.resource_id, \
                       p.active, p.max_per_order, r.total - r.held - r.sold as left, \
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
                left: r.left?,
                settled: r.settled?,
            })
        })
        .collect();
    Ok(CheckoutRead { existing, lines })
}

#[derive(sqlx::FromRow)]
struct PricedProduct {
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
}

/// The lines that cannot fit, judged from the committed counters read with
/// the products, for resources with nothing due to expire (where the locked
/// path could free units, it decides).
fn short_without_lock(lines: &[OrderLine], products: &[PricedProduct]) -> Vec<ShortLine> {
    let product = |line: &OrderLine| products.iter().find(|p| p.id == line.product_id);
    // a resource named by several lines needs their sum
    let wanted = |resource: &str| -> i32 {
        lines
            .iter()
            .filter(|l| product(l).is_some_and(|p| p.resource_id == resource))
            .map(|l| l.qty)
            .sum()
    };
    lines
        .iter()
        .filter_map(|line| {
            let p = product(line).filter(|p| p.settled)?;
            (wanted(&p.resource_id) > p.left).then(|| ShortLine {
                product_id: line.product_id.clone(),
                name: line.name.clone(),
                requested: line.qty,
                available: p.left.max(0),
            })
        })
        .collect()
}

/// Step one of checkout: in one transaction, the pending order and a hold on
/// every line. Nothing is held when anything is short. (The shop goes
/// through [`Checkouts::start`], which combines concurrent checkouts of one
/// product; this is the same with nobody to combine with.)
pub async fn start_checkout(pool: &PgPool, start: &CheckoutStart) -> Result<StartOutcome> {
    start_checkout_via(pool, None, start, None).await
}

async fn start_checkout_via(
    pool: &PgPool,
    starts: Option<&Combiner<Starts>>,
    start: &CheckoutStart,
    read: Option<&CheckoutRead>,
) -> Result<StartOutcome> {
    let outcome = start_checkout_once(pool, starts, start, read).await?;
    crate::metrics::checkout(match &outcome {
        StartOutcome::Started { .. } => "started",
        StartOutcome::AlreadyStarted { .. } => "already_started",
        StartOutcome::Unavailable { .. } => "unavailable",
        StartOutcome::OverLimit { .. } => "over_limit",
        StartOutcome::UnknownProducts { .. } => "unknown_products",
    });
    Ok(outcome)
}

async fn start_checkout_once(
    pool: &PgPool,
    starts: Option<&Combiner<Starts>>,
    start: &CheckoutStart,
    read: Option<&CheckoutRead>,
) -> Result<StartOutcome> {
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
                })
                .collect(),
            None => sqlx::query_as(
                "select p.id, p.resource_id, p.name, p.price_minor, p.currency, p.max_per_order, \
                        r.total - r.held - r.sold as left, \
                        coalesce(r.next_expiry > now(), true) as settled \
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
        return Ok(StartOutcome::UnknownProducts { ids: unknown });
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
        });
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
        return Ok(StartOutcome::OverLimit { lines: too_many });
    }

    // A refusal may be decided without the lock, as the engine decides
    // one: when a line does not fit in what the committed counters leave
    // and nothing is due to expire, the crowd at a sold-out product is
    // answered from one read and writes nothing. A grant always goes
    // through the locked path below.
    let short = short_without_lock(&lines, &products);
    if !short.is_empty() {
        // A double submit that raced the first one's hold is still that
        // order. (Read in one snapshot with the counters, the form's order
        // is there exactly when its hold is counted.)
        if read.is_none()
            && let Some(order) = order_by_checkout_key(pool, start.checkout_key.as_str()).await?
        {
            return Ok(StartOutcome::AlreadyStarted { order });
        }
        return Ok(StartOutcome::Unavailable { lines: short });
    }

    // One product: order, line and hold in one call, combined with the
    // other checkouts of its resource waiting at the same moment.
    if let [line] = lines.as_slice() {
        let resource = product(&line.product_id).resource_id.clone();
        let one = OneStart {
            key: start.checkout_key.as_str().to_owned(),
            account: start.account.as_str().to_owned(),
            qty: line.qty,
            product: line.product_id.clone(),
            product_name: line.name.clone(),
            unit_price: line.unit_price_minor,
            currency: currency.clone(),
            token: codes::order_token(),
            name: start.customer.name().to_owned(),
            email: start.customer.email().to_owned(),
            provider: start.provider,
            email_key: start.limits.email_key.clone(),
            email_cap: start
                .limits
                .email_key
                .as_ref()
                .map(|_| product(&line.product_id).max_per_order),
            address: start.limits.address.clone(),
        };
        let row = match starts {
            Some(starts) => starts.call(&resource, one.clone()).await?,
            None => start_batch(pool, &resource, std::slice::from_ref(&one))
                .await?
                .pop()
                .ok_or_else(|| CheckoutError::Database(sqlx::Error::RowNotFound))?,
        };
        return one_outcome(pool, one, row, lines, resource).await;
    }

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
    let token = codes::order_token();
    let inserted: Option<Uuid> = sqlx::query_scalar(
        "insert into orders (token, checkout_key, customer_name, customer_email, currency, \
                             amount_minor, provider, email_key, client_address) \
         values ($1, $2, $3, $4, $5, $6, $7, $8, $9) \
         on conflict (checkout_key) do nothing \
         returning id",
    )
    .bind(&token)
    .bind(start.checkout_key.as_str())
    .bind(start.customer.name())
    .bind(start.customer.email())
    .bind(currency)
    .bind(amount)
    .bind(start.provider)
    .bind(start.limits.email_key.as_deref())
    .bind(start.limits.address.as_ref().map(|(a, _)| a.as_str()))
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
            "insert into order_lines (order_id, product_id, name, qty, unit_price_minor) \
             values ($1, $2, $3, $4, $5)",
        )
        .bind(order_id)
        .bind(&line.product_id)
        .bind(&line.name)
        .bind(line.qty)
        .bind(line.unit_price_minor)
        .execute(&mut *tx)
        .await?;
    }

    let basket = Basket::parse(
        lines
            .iter()
            .map(|line| {
                Ok(BasketLine {
                    resource: ResourceId::parse(&product(&line.product_id).resource_id)?,
                    qty: Quantity::parse(i64::from(line.qty))?,
                })
            })
            .collect::<std::result::Result<Vec<_>, InvalidInput>>()?,
    )?;
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

#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "status", rename_all = "snake_case")]
pub enum AttachOutcome {
    /// The holds live until after the provider's session expires: redirect.
    Paying { order: Order },
    /// The holds ended before payment could start (the sweeper, a release):
    /// the shopper must start again.
    Ended { order: Order },
}

/// Step two, after the provider answered: remember its session and move the
/// holds into the payment phase, with a deadline a margin past the
/// session's own expiry so a payment the provider accepts finds them alive.
pub async fn attach_payment(
    pool: &PgPool,
    order_id: Uuid,
    session: &PaymentPage,
) -> Result<AttachOutcome> {
    let mut tx = pool.begin().await?;
    let hold_id: Option<Uuid> =
        sqlx::query_scalar("select hold_id from orders where id = $1 for update")
            .bind(order_id)
            .fetch_optional(&mut *tx)
            .await?
            .flatten();
    let Some(hold_id) = hold_id else {
        return Err(CheckoutError::InvalidInput(format!(
            "no started order {order_id}"
        )));
    };
    let window = combined::payment_window_seconds(session.expires_at);
    let window = Span::parse(
        "payment window",
        std::time::Duration::from_secs(window as u64),
    )?;
    let outcome = inventory::begin_payment(&mut *tx, HoldId(hold_id), Some(window)).await?;
    // a purchase already confirmed (the money beat us here) is alive too
    let alive = matches!(
        outcome,
        BeginPaymentOutcome::AwaitingPayment { .. }
            | BeginPaymentOutcome::Replayed { .. }
            | BeginPaymentOutcome::Confirmed { .. }
    );
    let order: Order = sqlx::query_as(
        "update orders \
            set provider_session_id = $2, provider_url = $3, provider_expires_at = $4, \
                state = case when $5 or state <> 'pending' then state else 'expired' end, \
                updated_at = now() \
          where id = $1 returning *",
    )
    .bind(order_id)
    .bind(&session.id)
    .bind(&session.url)
    .bind(session.expires_at)
    .bind(alive)
    .fetch_one(&mut *tx)
    .await?;
    tx.commit().await?;
    Ok(if alive {
        AttachOutcome::Paying { order }
    } else {
        AttachOutcome::Ended { order }
    })
}

/// Why an order's units go back, and whether its payment page may still
/// be open (then it is closed too, so nobody pays for units that are gone).
#[derive(Debug, Clone, Copy)]
pub struct Release<'a> {
    pub reason: &'a str,
    /// Who let go: `shopper`, `checkout`, `reconciler`, a staff member, or
    /// the provider's name for its own events.
    pub actor: &'a str,
    /// `Expired` or `Cancelled`.
    pub final_state: OrderState,
    /// The provider may still take money on the page: queue its closing.
    /// False when the provider itself said the page ended.
    pub close_page: bool,
}

/// Give an order's units back before it was paid: the provider failed at
/// checkout start, the page expired, or the shopper cancelled. A paid
/// order is left alone. Returns the order as it is now.
pub async fn release_order(
    pool: &PgPool,
    order_id: Uuid,
    release: Release<'_>,
) -> Result<Option<Order>> {
    let mut tx = pool.begin().await?;
    let found = release_order_in(&mut tx, order_id, release).await?;
    tx.commit().await?;
    if found.is_none() {
        return Ok(None);
    }
    Ok(order_by_id(pool, order_id).await?)
}

/// [`release_order`] inside the caller's transaction (a webhook's, with its
/// dedupe row), saying what the engine did with the order's hold
/// (`NotFound` for an order without one); `None` if there is no such order.
pub async fn release_order_in(
    tx: &mut Transaction<'_, Postgres>,
    order_id: Uuid,
    release: Release<'_>,
) -> Result<Option<ReleaseOutcome>> {
    // lock: the order first, then (inside the engine) its resources
    let hold_id: Option<Option<Uuid>> =
        sqlx::query_scalar("select hold_id from orders where id = $1 for update")
            .bind(order_id)
            .fetch_optional(&mut **tx)
            .await?;
    let Some(hold_id) = hold_id else {
        return Ok(None);
    };
    let outcome = match hold_id {
        Some(hold_id) => {
            inventory::release(&mut **tx, HoldId(hold_id), release.reason, release.actor).await?
        }
        None => ReleaseOutcome::NotFound,
    };
    match outcome {
        ReleaseOutcome::Released { .. }
        | ReleaseOutcome::AlreadyReleased { .. }
        | ReleaseOutcome::Expired { .. }
        | ReleaseOutcome::NotFound => {}
        // the money won the race: the order is paid, not released
        ReleaseOutcome::Confirmed { .. } => return Ok(Some(outcome)),
    }
    let page: Option<(Option<String>, ProviderKind)> = sqlx::query_as(
        "update orders set state = $2, updated_at = now() where id = $1 and state = 'pending' \
         returning provider_session_id, provider",
    )
    .bind(order_id)
    .bind(release.final_state)
    .fetch_optional(&mut **tx)
    .await?;
    // Released on our side while the provider's page may still be open:
    // close it too. (A provider whose pages cannot close answers the job at
    // once; money that still lands there is refunded.)
    if let Some((Some(page_id), provider)) = page
        && release.close_page
    {
        outbox::queue(
            &mut **tx,
            &outbox::OutboxJob::ClosePage {
                order_id,
                provider,
                page_id,
            },
        )
        .await?;
    }
    Ok(Some(outcome))
}

/// Orders still `pending` whose holds have all ended (the sweeper expired
/// them at the payment deadline, or they lapsed before payment started) are
/// marked expired, so their pages stop waiting. Returns how many changed.
/// Takes only order row locks.
pub async fn expire_abandoned_orders(pool: &PgPool) -> sqlx::Result<u64> {
    let changed = sqlx::query(
        "update orders o set state = 'expired', updated_at = now() \
          where o.state = 'pending' and o.hold_id is not null \
            and not exists (select 1 from holds h \
                             where h.purchase_id = o.hold_id \
                               and h.state in ('held', 'awaiting_payment', 'confirmed'))",
    )
    .execute(pool)
    .await?;
    Ok(changed.rows_affected())
}

/// Which path reported a payment, for the history and metrics.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Source {
    /// The shopper's browser came back from the provider.
    Return,
    Webhook,
    Reconciliation,
    /// The worker captured an authorised payment.
    Capture,
}

impl Source {
    pub fn as_str(self) -> &'static str {
        match self {
            Source::Return => "return",
            Source::Webhook => "webhook",
            Source::Reconciliation => "reconciliation",
            Source::Capture => "capture",
        }
    }
}

/// A payment reported by a provider, from any path, for one of our orders.
#[derive(Debug, Clone)]
pub struct PaymentReport {
    pub order_id: Uuid,
    pub payment: ProviderPayment,
    pub source: Source,
}

/// What the one confirm routine did with a payment.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "action", rename_all = "snake_case")]
pub enum Fulfilment {
    /// First confirmation: the order is paid and its codes issued.
    Fulfilled { order_id: Uuid },
    /// Another path got there first.
    AlreadyFulfilled { order_id: Uuid },
    /// The money goes back: a second payment, or money for a hold that ended.
    RefundQueued { order_id: Uuid, reason: String },
    /// The payment already bought another order: staff must look.
    Flagged { order_id: Uuid, other_hold_id: Uuid },
    /// The payment is not what the order asks for (another page, another
    /// amount or currency): the order is flagged for staff, and a captured
    /// payment is refunded.
    Mismatch {
        order_id: Uuid,
        reason: String,
        refund_queued: bool,
    },
    /// Not money yet (authorised, settling, failed, refunded): nothing
    /// changes until it is captured.
    NotCaptured {
        order_id: Uuid,
        status: PaymentStatus,
    },
    /// No such order or hold: logged, nothing to do.
    Unknown,
}

impl Fulfilment {
    /// The outcome's name, for logs and metrics.
    pub fn label(&self) -> &'static str {
        match self {
            Fulfilment::Fulfilled { .. } => "fulfilled",
            Fulfilment::AlreadyFulfilled { .. } => "already_fulfilled",
            Fulfilment::RefundQueued { .. } => "refund_queued",
            Fulfilment::Flagged { .. } => "flagged",
            Fulfilment::Mismatch { .. } => "mismatch",
            Fulfilment::NotCaptured { .. } => "not_captured",
            Fulfilment::Unknown => "unknown",
        }
    }
}

/// What an order asks a payment to be: its provider, its page, its amount
/// and currency. `Err` says what differs, in words for staff.
pub fn payment_matches(
    order: (ProviderKind, Option<&str>, i64, &str),
    payment: &ProviderPayment,
) -> std::result::Result<(), String> {
    let (provider, page, amount, currency) = order;
    let mut differences = Vec::new();
    if payment.provider != provider {
        differences.push(format!(
            "paid at {} for an order at {provider}",
            payment.provider
        ));
    }
    if page.is_none() || payment.page_id.as_deref() != page {
        differences.push(format!(
            "paid on page {} instead of {}",
            payment.page_id.as_deref().unwrap_or("(none)"),
            page.unwrap_or("(none)")
        ));
    }
    if payment.amount_minor != amount || !payment.currency.eq_ignore_ascii_case(currency) {
        differences.push(format!(
            "paid {} {} instead of {amount} {currency}",
            payment.amount_minor, payment.currency
        ));
    }
    if differences.is_empty() {
        Ok(())
    } else {
        Err(differences.join("; "))
    }
}

/// The one confirm routine. Safe to run any number of times, concurrently,
/// in any order, from the return handler, the webhook and reconciliation:
/// the order row lock serialises the paths, the engine decides, and the
/// effect (order paid and codes, a refund job, a flag) commits together
/// with the engine's change.
pub async fn confirm_payment(pool: &PgPool, report: &PaymentReport) -> Result<Fulfilment> {
    let mut tx = pool.begin().await?;
    let fulfilment = confirm_payment_in(&mut tx, report).await?;
    tx.commit().await?;
    crate::metrics::confirmation(fulfilment.label(), report.source.as_str());
    tracing::info!(order = %report.order_id, source = report.source.as_str(), ?fulfilment, "payment confirmed");
    Ok(fulfilment)
}

/// [`confirm_payment`] inside the caller's transaction, so a webhook's
/// dedupe row commits together with the effect.
///
/// What was paid is checked before anything is sold: only a captured
/// payment on the order's own page, at its provider, for its amount and
/// currency, can pay for it. Anything else is a mismatch (flagged, and
/// refunded when it is money) or not money yet.
pub async fn confirm_payment_in(
    tx: &mut Transaction<'_, Postgres>,
    report: &PaymentReport,
) -> Result<Fulfilment> {
    #[derive(sqlx::FromRow)]
    struct Locked {
        hold_id: Option<Uuid>,
        provider: ProviderKind,
        provider_session_id: Option<String>,
        amount_minor: i64,
        currency: String,
        payment_ref: Option<String>,
        /// Why this payment is being refunded, if it is.
        refunding: Option<String>,
    }
    // lock: the order first, then (inside the engine) its resources
    let order: Option<Locked> = sqlx::query_as(
        "select hold_id, provider, provider_session_id, amount_minor, currency, payment_ref, \
                (select payload->>'reason' from outbox_jobs where dedupe_key = $2) as refunding \
           from orders where id = $1 for update",
    )
    .bind(report.order_id)
    .bind(outbox::refund_key(
        report.payment.provider,
        &report.payment.payment_ref,
    ))
    .fetch_optional(&mut **tx)
    .await?;
    let Some(order) = order else {
        tracing::warn!(order = %report.order_id, source = report.source.as_str(), "payment for an unknown order");
        return Ok(Fulfilment::Unknown);
    };
    let order_id = report.order_id;
    let payment = &report.payment;
    let captured = payment.status == PaymentStatus::Captured;
    // One payment has one fate, whichever path reports it and however the
    // reports differ (a webhook on an older API version may word the same
    // payment differently): the payment that paid the order paid it...
    if order.payment_ref.as_deref() == Some(payment.payment_ref.as_str()) {
        return Ok(Fulfilment::AlreadyFulfilled { order_id });
    }
    // ... and a payment on its way back is never sold.
    if let Some(reason) = order.refunding {
        return Ok(Fulfilment::RefundQueued { order_id, reason });
    }
    if let Err(reason) = payment_matches(
        (
            order.provider,
            order.provider_session_id.as_deref(),
            order.amount_minor,
            &order.currency,
        ),
        payment,
    ) {
        let note = format!("payment_mismatch: {} {reason}", payment.payment_ref);
        tracing::warn!(order = %order_id, payment = %payment.payment_ref, %reason, "a payment that does not match its order");
        flag(tx, order_id, &note).await?;
        // an uncaptured payment cannot be refunded: its provider gives it
        // back by itself when nobody captures it
        if captured {
            refund::queue(tx, order_id, payment, "payment_mismatch").await?;
        }
        return Ok(Fulfilment::Mismatch {
            order_id,
            reason,
            refund_queued: captured,
        });
    }
    if !captured {
        return Ok(Fulfilment::NotCaptured {
            order_id,
            status: payment.status,
        });
    }
    let Some(hold_id) = order.hold_id else {
        tracing::warn!(order = %order_id, "an order without a hold");
        return Ok(Fulfilment::Unknown);
    };
    let payment_ref = PaymentRef::parse(&payment.payment_ref)?;
    let outcome = inventory::confirm(&mut **tx, HoldId(hold_id), &payment_ref).await?;
    let fulfilment = match outcome {
        ConfirmOutcome::Confirmed { .. } => {
            fulfil(tx, order_id, &payment_ref).await?;
            Fulfilment::Fulfilled { order_id }
        }
        ConfirmOutcome::AlreadyConfirmed { .. } => Fulfilment::AlreadyFulfilled { order_id },
        ConfirmOutcome::DuplicatePayment { .. } => {
            refund::queue(tx, order_id, payment, "duplicate_payment").await?;
            Fulfilment::RefundQueued {
                order_id,
                reason: "duplicate_payment".into(),
            }
        }
        ConfirmOutcome::Expired { .. } | ConfirmOutcome::Released { .. } => {
            let reason = if matches!(outcome, ConfirmOutcome::Expired { .. }) {
                "hold_expired"
            } else {
                "hold_released"
            };
            refund::queue(tx, order_id, payment, reason).await?;
            sqlx::query(
                "update orders set state = 'refund_pending', updated_at = now() \
                  where id = $1 and state in ('pending', 'expired', 'cancelled')",
            )
            .bind(order_id)
            .execute(&mut **tx)
            .await?;
            Fulfilment::RefundQueued {
                order_id,
                reason: reason.into(),
            }
        }
        ConfirmOutcome::PaymentRefInUse { other_hold_id, .. } => {
            let note = format!(
                "payment_ref_in_use: {} already paid hold {}",
                payment.payment_ref, other_hold_id
            );
            flag(tx, order_id, &note).await?;
            Fulfilment::Flagged {
                order_id,
                other_hold_id: other_hold_id.0,
            }
        }
        ConfirmOutcome::NotFound => {
            tracing::warn!(order = %order_id, "the order's hold is gone");
            Fulfilment::Unknown
        }
    };
    Ok(fulfilment)
}

/// Flag an order for staff. A note is added once; earlier ones stay.
async fn flag(tx: &mut Transaction<'_, Postgres>, order_id: Uuid, note: &str) -> Result<()> {
    let note: String = note.chars().take(500).collect();
    sqlx::query(
        "update orders \
            set flag = case when flag is null then $2 \
                            when position($2 in flag) > 0 then flag \
                            else left(flag || '; ' || $2, 2000) end, \
                updated_at = now() \
          where id = $1",
    )
    .bind(order_id)
    .bind(note)
    .execute(&mut **tx)
    .await?;
    Ok(())
}

/// Mark the order paid, issue its codes and queue its confirmation message.
async fn fulfil(
    tx: &mut Transaction<'_, Postgres>,
    order_id: Uuid,
    payment_ref: &PaymentRef,
) -> Result<()> {
    let pickup: bool = sqlx::query_scalar(
        "select exists (select 1 from order_lines l join products p on p.id = l.product_id \
                         where l.order_id = $1 and p.kind = 'pickup_slot')",
    )
    .bind(order_id)
    .fetch_one(&mut **tx)
    .await?;
    // a pickup code names one order: of a few drawn, the first no order
    // has (two checkouts drawing the same one at the same moment would
    // meet at the unique index, and the confirmation be tried again)
    let candidates: Option<Vec<String>> =
        pickup.then(|| (0..4).map(|_| codes::pickup_code()).collect());
    sqlx::query(
        "update orders set state = 'paid', payment_ref = $2, paid_at = now(), \
                pickup_code = (select c from unnest($3::text[]) with ordinality as x(c, n) \
                                where not exists (select 1 from orders o where o.pickup_code = x.c) \
                                order by n limit 1), \
                updated_at = now() \
          where id = $1",
    )
    .bind(order_id)
    .bind(payment_ref.as_str())
    .bind(candidates)
    .execute(&mut **tx)
    .await?;
    let tickets: Vec<(String, i32)> = sqlx::query_as(
        "select l.product_id, l.qty from order_lines l join products p on p.id = l.product_id \
          where l.order_id = $1 and p.kind = 'ticket' order by l.product_id",
    )
    .bind(order_id)
    .fetch_all(&mut **tx)
    .await?;
    for (product_id, qty) in tickets {
        for _ in 0..qty {
            sqlx::query("insert into order_codes (code, order_id, product_id) values ($1, $2, $3)")
                .bind(codes::ticket_code())
                .bind(order_id)
                .bind(&product_id)
                .execute(&mut **tx)
                .await?;
        }
    }
    outbox::queue(
        &mut **tx,
        &outbox::OutboxJob::OrderConfirmation { order_id },
    )
    .await?;
    Ok(())
}
