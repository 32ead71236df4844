//! What a checkout reads before it holds anything, in one snapshot:
//! whether its form was submitted before, and each product it names with
//! its kind, price, limits, sale window and what its resource's committed
//! counters leave. The crowd at a sold-out product is refused from this
//! read alone; only the locked path grants.

use chrono::{DateTime, Utc};
use sqlx::PgPool;
use uuid::Uuid;

use crate::catalogue::ProductKind;
use crate::checkout::basket;

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
    pub kind: ProductKind,
    /// Its collection's id (the event of a ticket or a section).
    pub collection: String,
    /// When it happens (a table's time), if it has a time.
    pub starts_at: Option<DateTime<Utc>>,
    /// A line of fewer units pays nothing for them (a party smaller than
    /// its table time's deposit asks for); `None`: every line pays.
    pub priced_from: Option<i32>,
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
    /// A seat line's seats by label, or whether its best must be together
    /// (`together` / `split`); neither: units (a seat line's best together).
    pub seat_labels: Option<Vec<String>>,
    pub seat_best: Option<String>,
    pub(super) left: i32,
    pub(super) settled: bool,
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
            starts_at: None,
            seats: self.seat_labels.clone(),
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
        collection_title: Option<String>,
        collection: Option<String>,
        qty: Option<i32>,
        price_minor: Option<i64>,
        currency: Option<String>,
        resource_id: Option<String>,
        kind: Option<ProductKind>,
        starts_at: Option<DateTime<Utc>>,
        priced_from: Option<i32>,
        active: Option<bool>,
        max_per_order: Option<i32>,
        hidden: Option<bool>,
        opens_later: Option<DateTime<Utc>>,
        closed_at: Option<DateTime<Utc>>,
        unlocked_by: Option<String>,
        seat_labels: Option<Vec<String>>,
        seat_best: Option<String>,
        left: Option<i32>,
        settled: Option<bool>,
    }
    let rows: Vec<Row> = sqlx::query_as(&format!(
        "select k.existing, l.product_id, l.name, l.collection_title, l.collection, l.qty, l.price_minor, l.currency, \
                l.resource_id, l.kind, l.starts_at, l.priced_from, l.active, l.max_per_order, l.hidden, \
                l.opens_later, l.closed_at, l.unlocked_by, l.seat_labels, l.seat_best, l.left, l.settled \
           from (select (select id from orders where checkout_key = $1) as existing) k \
           left join lateral ( \
                select b.product_id, p.name, c.title as collection_title, p.collection, b.qty, p.price_minor, p.currency, p.resource_id, p.kind, \
                       p.starts_at, {PRICED_FROM}, p.active, p.max_per_order, p.hidden, \
                       case when p.sale_opens_at > now() then p.sale_opens_at end as opens_later, \
                       case when p.sale_closes_at <= now() then p.sale_closes_at end as closed_at, \
                       b.unlocked_by, b.seat_labels, b.seat_best, r.total - r.held - r.sold as left, \
                       coalesce(r.next_expiry > now(), true) as settled, b.added_at \
                  from basket_lines b \
                  join products p on p.id = b.product_id \
                  join collections c on c.id = p.collection \
                  join resources r on r.id = p.resource_id \
                 where b.basket_id = $2 and k.existing is null) l on true \
          order by l.added_at, l.product_id"
    ))
    .bind(checkout_key)
    .bind(basket_id)
    .fetch_all(pool)
    .await?;
    let existing = rows.first().and_then(|r| r.existing);
    let lines = rows
        .into_iter()
        .filter_map(|r| {
            let kind = r.kind?;
            Some(ReadLine {
                product_id: r.product_id?,
                // what it is for: "Winter Jazz — General"
                name: kind.line_name(&r.name?, r.collection_title.as_deref().unwrap_or("")),
                qty: r.qty?,
                price_minor: r.price_minor?,
                currency: r.currency?,
                resource_id: r.resource_id?,
                kind,
                collection: r.collection?,
                starts_at: r.starts_at,
                priced_from: r.priced_from,
                active: r.active?,
                max_per_order: r.max_per_order?,
                hidden: r.hidden?,
                opens_later: r.opens_later,
                closed_at: r.closed_at,
                unlocked_by: r.unlocked_by,
                seat_labels: r.seat_labels,
                seat_best: r.seat_best,
                left: r.left?,
                settled: r.settled?,
            })
        })
        .collect();
    Ok(CheckoutRead { existing, lines })
}

/// From how many units a product's price is paid: a table time's deposit
/// is asked of parties from its period's size on (docs/design.md,
/// "Tables: a party at a time"); `null` for everything else.
const PRICED_FROM: &str = "(select pe.deposit_from_party from dining_times t \
       join dining_periods pe on pe.room = t.room and pe.name = t.period \
      where t.product_id = p.id) as priced_from";

/// A product of the checkout with its price and what its resource has
/// left, as read without a lock.
#[derive(Debug, Clone, sqlx::FromRow)]
pub(crate) struct PricedProduct {
    pub(super) id: String,
    pub(super) resource_id: String,
    pub(super) kind: ProductKind,
    pub(super) collection: String,
    pub(super) starts_at: Option<DateTime<Utc>>,
    /// As [`ReadLine`]'s.
    pub(super) priced_from: Option<i32>,
    /// As its lines are named ([`ProductKind::line_name`]).
    pub(super) name: String,
    /// Its collection's title, which a line's name may begin with (read
    /// here, then in `name`).
    #[sqlx(default)]
    pub(super) collection_title: String,
    pub(super) price_minor: i64,
    pub(super) currency: String,
    pub(super) max_per_order: i32,
    /// What the resource's committed counters leave, read without a lock.
    pub(super) left: i32,
    /// Nothing on the resource is due to expire, so `left` is the answer
    /// the locked path would give.
    pub(super) settled: bool,
    pub(super) hidden: bool,
    /// As [`ReadLine`]'s: by the database's clock at the read.
    pub(super) opens_later: Option<DateTime<Utc>>,
    pub(super) closed_at: Option<DateTime<Utc>>,
}

/// The active products among `ids` with their prices and what is left:
/// from the basket's read when there is one (the same snapshot), else read
/// now.
pub(super) async fn priced_products(
    pool: &PgPool,
    read: Option<&CheckoutRead>,
    ids: &[&str],
) -> sqlx::Result<Vec<PricedProduct>> {
    let Some(read) = read else {
        let products: Vec<PricedProduct> = sqlx::query_as(&format!(
            "select p.id, p.resource_id, p.kind, p.collection, p.starts_at, {PRICED_FROM}, p.name, \
                    c.title as collection_title, p.price_minor, p.currency, \
                    p.max_per_order, r.total - r.held - r.sold as left, \
                    coalesce(r.next_expiry > now(), true) as settled, p.hidden, \
                    case when p.sale_opens_at > now() then p.sale_opens_at end as opens_later, \
                    case when p.sale_closes_at <= now() then p.sale_closes_at end as closed_at \
               from products p join resources r on r.id = p.resource_id \
               join collections c on c.id = p.collection \
              where p.active and p.id = any($1)"
        ))
        .bind(ids)
        .fetch_all(pool)
        .await?;
        return Ok(products
            .into_iter()
            .map(|mut p| {
                p.name = p.kind.line_name(&p.name, &p.collection_title);
                p
            })
            .collect());
    };
    Ok(read
        .lines
        .iter()
        .filter(|l| l.active && ids.contains(&l.product_id.as_str()))
        .map(|l| PricedProduct {
            id: l.product_id.clone(),
            resource_id: l.resource_id.clone(),
            kind: l.kind,
            collection: l.collection.clone(),
            starts_at: l.starts_at,
            priced_from: l.priced_from,
            name: l.name.clone(),
            collection_title: String::new(),
            price_minor: l.price_minor,
            currency: l.currency.clone(),
            max_per_order: l.max_per_order,
            left: l.left,
            settled: l.settled,
            hidden: l.hidden,
            opens_later: l.opens_later,
            closed_at: l.closed_at,
        })
        .collect())
}
