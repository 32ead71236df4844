//! What the admin's home page reads: the sale at a glance. Money taken
//! today, this week and so far; how full each event, tier, slot day and
//! product is; the sales by day for the chart; the latest orders; what
//! needs someone; what comes next.
//!
//! The figures are the ledger's own, read the way the ledger's readers
//! read them, so they agree to the cent: an order counts once it was paid
//! (`orders.paid_at`, as the orders export's "paid from" filter), for what
//! its lines were paid (the export's `amount_minor`), less what was given
//! back (`refunded_minor`); units reserved and sold are the counters
//! `holdfast check` reads (`hf_check`).

use chrono::{DateTime, Datelike, Duration, NaiveDate, NaiveTime, Utc};
use sqlx::PgPool;
use uuid::Uuid;

use crate::catalogue::kinds::ProductKind;
use crate::clock::ShopZone;

/// Days the sales chart covers, today included.
pub const CHART_DAYS: i64 = 14;

/// Money and units in one stretch of time, in one currency.
#[derive(Debug, Clone, Default, sqlx::FromRow)]
pub struct Takings {
    pub currency: String,
    /// Orders paid.
    pub orders: i64,
    /// What they were paid, vouchers taken off.
    pub paid_minor: i64,
    /// What was given back of them.
    pub refunded_minor: i64,
    /// Units bought and not refunded.
    pub units: i64,
}

impl Takings {
    /// What the shop keeps: paid less refunded.
    pub fn net_minor(&self) -> i64 {
        self.paid_minor - self.refunded_minor
    }
}

/// Today, this week (from Monday) and the sale so far, each per currency
/// (most shops have one).
#[derive(Debug, Clone, Default)]
pub struct Windows {
    pub today: Vec<Takings>,
    pub week: Vec<Takings>,
    pub so_far: Vec<Takings>,
}

#[derive(sqlx::FromRow)]
struct WindowRow {
    window: String,
    #[sqlx(flatten)]
    takings: Takings,
}

/// The start of a day in the shop's zone (its first minute that exists).
fn day_start(zone: ShopZone, day: NaiveDate) -> DateTime<Utc> {
    (0..4)
        .find_map(|hour| zone.at(day, NaiveTime::from_hms_opt(hour, 0, 0)?).ok())
        .unwrap_or_else(|| day.and_time(NaiveTime::MIN).and_utc())
}

/// The orders whose money came, with what they paid and gave back: one
/// definition for the windows and the chart.
const PAID_ORDERS: &str = "paid as (
    select o.id, o.currency, o.paid_at, o.refunded_minor,
           l.paid_minor, l.units
      from orders o
     cross join lateral (
            select coalesce(sum(coalesce(ol.paid_minor, ol.unit_price_minor * ol.qty)), 0)::int8
                       as paid_minor,
                   coalesce(sum(ol.qty - ol.refunded_qty), 0)::int8 as units
              from order_lines ol where ol.order_id = o.id) l
     where o.paid_at is not null)";

pub async fn windows(pool: &PgPool, zone: ShopZone, now: DateTime<Utc>) -> sqlx::Result<Windows> {
    let today = zone.today(now);
    let monday = today - Duration::days(i64::from(today.weekday().num_days_from_monday()));
    let rows: Vec<WindowRow> = sqlx::query_as(&format!(
        "with {PAID_ORDERS}
         select w.name as window, p.currency, count(*)::int8 as orders,
                sum(p.paid_minor)::int8 as paid_minor,
                sum(p.refunded_minor)::int8 as refunded_minor, sum(p.units)::int8 as units
           from (values ('today', $1::timestamptz), ('week', $2::timestamptz),
                        ('so_far', '-infinity'::timestamptz)) w(name, since)
           join paid p on p.paid_at >= w.since
          group by w.name, p.currency
          order by w.name, count(*) desc, p.currency"
    ))
    .bind(day_start(zone, today))
    .bind(day_start(zone, monday))
    .fetch_all(pool)
    .await?;
    let mut windows = Windows::default();
    for row in rows {
        match row.window.as_str() {
            "today" => windows.today.push(row.takings),
            "week" => windows.week.push(row.takings),
            _ => windows.so_far.push(row.takings),
        }
    }
    Ok(windows)
}

/// One day of the sales chart.
#[derive(Debug, Clone, sqlx::FromRow)]
pub struct Day {
    pub day: NaiveDate,
    pub orders: i64,
    pub paid_minor: i64,
    pub refunded_minor: i64,
}

impl Day {
    pub fn net_minor(&self) -> i64 {
        self.paid_minor - self.refunded_minor
    }
}

/// The last [`CHART_DAYS`] days in the shop's zone, oldest first, every
/// day present (a day without a sale is zeros), in one currency.
pub async fn days(
    pool: &PgPool,
    zone: ShopZone,
    now: DateTime<Utc>,
    currency: &str,
) -> sqlx::Result<Vec<Day>> {
    let today = zone.today(now);
    let first = today - Duration::days(CHART_DAYS - 1);
    let rows: Vec<Day> = sqlx::query_as(&format!(
        "with {PAID_ORDERS}
         select (p.paid_at at time zone $1)::date as day, count(*)::int8 as orders,
                sum(p.paid_minor)::int8 as paid_minor,
                sum(p.refunded_minor)::int8 as refunded_minor
           from paid p
          where p.paid_at >= $2 and p.currency = $3
          group by 1"
    ))
    .bind(zone.name())
    .bind(day_start(zone, first))
    .bind(currency)
    .fetch_all(pool)
    .await?;
    Ok((0..CHART_DAYS)
        .map(|n| first + Duration::days(n))
        .map(|day| {
            rows.iter().find(|r| r.day == day).cloned().unwrap_or(Day {
                day,
                orders: 0,
                paid_minor: 0,
                refunded_minor: 0,
            })
        })
        .collect())
}

/// One product with how full it is and what it took.
#[derive(Debug, Clone, sqlx::FromRow)]
pub struct ProductFill {
    pub id: String,
    pub name: String,
    pub kind: ProductKind,
    pub collection: String,
    pub collection_title: String,
    pub collection_starts_at: Option<DateTime<Utc>>,
    pub starts_at: Option<DateTime<Utc>>,
    pub currency: String,
    /// The counters `holdfast check` reads: capacity, reserved, sold.
    pub total: i32,
    pub held: i32,
    pub sold: i32,
    /// Paid for its lines, less nothing: refunds are per order.
    pub paid_minor: i64,
    /// Its sales that still stand (a table's bookings: one a party).
    pub parties: i64,
}

/// Every product on sale (not archived), by collection and position, with
/// its counters and what its lines were paid.
pub async fn fills(pool: &PgPool) -> sqlx::Result<Vec<ProductFill>> {
    sqlx::query_as(
        "select p.id, p.name, p.kind, p.collection, c.title as collection_title,
                c.starts_at as collection_starts_at, p.starts_at, p.currency,
                k.total, k.held, k.sold,
                coalesce((select sum(coalesce(ol.paid_minor, ol.unit_price_minor * ol.qty))
                            from order_lines ol join orders o on o.id = ol.order_id
                           where ol.product_id = p.id and o.paid_at is not null), 0)::int8
                    as paid_minor,
                (select count(*) from holds h
                  where h.resource_id = p.resource_id and h.state = 'confirmed'
                    and h.returned < h.qty) as parties
           from products p
           join collections c on c.id = p.collection
           join hf_check(null) k on k.resource_id = p.resource_id
          where p.archived_at is null and c.archived_at is null
          order by c.position, c.starts_at nulls last, c.id, p.starts_at nulls first,
                   p.position, p.id",
    )
    .fetch_all(pool)
    .await
}

/// An order among the latest.
#[derive(Debug, Clone, sqlx::FromRow)]
pub struct RecentOrder {
    pub id: Uuid,
    pub created_at: DateTime<Utc>,
    pub customer_name: String,
    pub state: crate::checkout::OrderState,
    pub currency: String,
    pub amount_minor: i64,
    pub refunded_minor: i64,
    pub units: i64,
}

pub async fn recent_orders(pool: &PgPool, limit: i64) -> sqlx::Result<Vec<RecentOrder>> {
    sqlx::query_as(
        "select o.id, o.created_at, o.customer_name, o.state, o.currency, o.amount_minor,
                o.refunded_minor,
                (select coalesce(sum(qty), 0) from order_lines where order_id = o.id)::int8
                    as units
           from orders o order by o.created_at desc, o.id limit $1",
    )
    .bind(limit.clamp(1, 100))
    .fetch_all(pool)
    .await
}

/// What waits for someone, each a count (0: nothing).
#[derive(Debug, Clone, Default, sqlx::FromRow)]
pub struct Attention {
    /// Orders whose payment staff must look at.
    pub flagged: i64,
    /// Refunds the worker has not got through yet, and those of them the
    /// provider has refused or not answered at least once.
    pub refunds_waiting: i64,
    pub refunds_failing: i64,
    /// Webhook endpoints turned off, and deliveries that failed and wait
    /// to be tried again.
    pub webhooks_disabled: i64,
    pub webhooks_failing: i64,
    /// Counted things whose counts differ from their reservations.
    pub drift: i64,
    /// Payments that came without an order.
    pub orphans: i64,
}

impl Attention {
    pub fn nothing(&self) -> bool {
        self.flagged
            + self.refunds_waiting
            + self.webhooks_disabled
            + self.webhooks_failing
            + self.drift
            + self.orphans
            == 0
    }
}

pub async fn attention(pool: &PgPool) -> sqlx::Result<Attention> {
    sqlx::query_as(
        "select (select count(*) from orders where flag is not null) as flagged,
                (select count(*) from outbox_jobs where kind = 'refund' and state = 'pending')
                    as refunds_waiting,
                (select count(*) from outbox_jobs
                  where kind = 'refund' and state = 'pending' and last_error is not null)
                    as refunds_failing,
                (select count(*) from webhook_endpoints where disabled_at is not null)
                    as webhooks_disabled,
                (select count(*) from outbox_jobs
                  where kind = 'webhook' and state = 'pending' and last_error is not null)
                    as webhooks_failing,
                (select count(*) from hf_check(null) where drift) as drift,
                (select count(*) from orphan_payments) as orphans",
    )
    .fetch_one(pool)
    .await
}
