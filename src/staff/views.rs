//! What the admin pages read. Every query is fixed text with bound
//! parameters; filters are optional parameters, never spliced in.

use chrono::{DateTime, Utc};
use sqlx::PgPool;
use uuid::Uuid;

use crate::checkout::settling::SettlingView;
use crate::inventory::CheckRow;

/// One row of the resources page.
#[derive(Debug, Clone, sqlx::FromRow)]
pub struct ResourceRow {
    /// Its counters beside what its rows say.
    #[sqlx(flatten)]
    pub check: CheckRow,
    /// The products selling it, for people who think in products.
    pub products: String,
}

pub async fn resources(pool: &PgPool, only: Option<&str>) -> sqlx::Result<Vec<ResourceRow>> {
    sqlx::query_as(
        "select c.resource_id, c.total, c.held, c.sold, c.rows_held, c.rows_sold, c.drift, \
                coalesce(string_agg(p.name, ', ' order by p.position, p.id), '') as products \
           from hf_check($1) c left join products p on p.resource_id = c.resource_id \
          group by c.resource_id, c.total, c.held, c.sold, c.rows_held, c.rows_sold, c.drift \
          order by c.resource_id",
    )
    .bind(only)
    .fetch_all(pool)
    .await
}

/// A hold as the holds page lists it, with its order when it has one.
#[derive(Debug, Clone, sqlx::FromRow)]
pub struct HoldRow {
    pub id: Uuid,
    pub purchase_id: Uuid,
    pub resource_id: String,
    pub account_id: String,
    pub qty: i32,
    /// Units refunded out of it (given back to the engine).
    pub returned: i32,
    pub state: String,
    pub payment_ref: Option<String>,
    pub created_at: DateTime<Utc>,
    pub expires_at: DateTime<Utc>,
    pub payment_deadline: Option<DateTime<Utc>>,
    pub ended_at: Option<DateTime<Utc>>,
    pub ended_by: Option<String>,
    pub end_reason: Option<String>,
    pub extensions: i32,
    pub idempotency_key: Option<String>,
    pub order_id: Option<Uuid>,
    pub customer_name: Option<String>,
    pub age_seconds: f64,
}

impl HoldRow {
    pub fn is_active(&self) -> bool {
        matches!(
            crate::inventory::HoldState::from_db(&self.state),
            Some(crate::inventory::HoldState::Held | crate::inventory::HoldState::AwaitingPayment)
        )
    }
}

#[derive(Debug, Clone, Default)]
pub struct HoldQuery {
    pub resource: Option<String>,
    pub state: Option<String>,
    /// Only holds at least this old.
    pub older_than_minutes: Option<i64>,
    pub limit: i64,
}

/// The hold columns every hold query selects; a macro so each query stays
/// one literal, fixed at compile time.
macro_rules! hold_columns {
    () => {
        "h.id, h.purchase_id, h.resource_id, h.account_id, h.qty, h.returned, h.state, \
     h.payment_ref, h.created_at, h.expires_at, h.payment_deadline, h.ended_at, h.ended_by, \
     h.end_reason, h.extensions, h.idempotency_key, o.id as order_id, o.customer_name, \
     extract(epoch from now() - h.created_at)::float8 as age_seconds"
    };
}

/// Newest first: staff usually look for what just happened.
pub async fn holds(pool: &PgPool, query: &HoldQuery) -> sqlx::Result<Vec<HoldRow>> {
    sqlx::query_as(concat!(
        "select ",
        hold_columns!(),
        " \
           from holds h left join orders o on o.hold_id = h.purchase_id \
          where ($1::text is null or h.resource_id = $1) \
            and ($2::text is null or h.state = $2) \
            and ($3::float8 is null or h.created_at <= now() - $3 * interval '1 minute') \
          order by h.created_at desc, h.id \
          limit $4"
    ))
    .bind(query.resource.as_deref())
    .bind(query.state.as_deref())
    .bind(query.older_than_minutes.map(|m| m as f64))
    .bind(query.limit.clamp(1, 1000))
    .fetch_all(pool)
    .await
}

pub async fn hold(pool: &PgPool, id: Uuid) -> sqlx::Result<Option<HoldRow>> {
    sqlx::query_as(concat!(
        "select ",
        hold_columns!(),
        " \
           from holds h left join orders o on o.hold_id = h.purchase_id \
          where h.id = $1"
    ))
    .bind(id)
    .fetch_optional(pool)
    .await
}

/// The other lines of the same purchase (a basket).
pub async fn purchase_lines(pool: &PgPool, purchase: Uuid) -> sqlx::Result<Vec<HoldRow>> {
    sqlx::query_as(concat!(
        "select ",
        hold_columns!(),
        " \
           from holds h left join orders o on o.hold_id = h.purchase_id \
          where h.purchase_id = $1 order by h.resource_id"
    ))
    .bind(purchase)
    .fetch_all(pool)
    .await
}

/// An order as the orders page lists it.
#[derive(Debug, Clone, sqlx::FromRow)]
pub struct OrderRow {
    pub id: Uuid,
    pub state: crate::checkout::OrderState,
    pub customer_name: String,
    pub customer_email: String,
    pub currency: String,
    pub amount_minor: i64,
    pub provider: crate::payments::ProviderKind,
    pub provider_session_id: Option<String>,
    pub payment_ref: Option<String>,
    pub flag: Option<String>,
    pub created_at: DateTime<Utc>,
    pub paid_at: Option<DateTime<Utc>>,
    pub hold_id: Option<Uuid>,
    /// What was given back so far: staff refunds, and late money
    /// refunded in full.
    pub refunded_minor: i64,
    /// The voucher the order was started with, and what it took off.
    pub voucher_code: Option<String>,
    pub discount_minor: i64,
    /// Refund jobs not yet done.
    pub refunds_pending: i64,
    pub refunds_done: i64,
    /// A payment that settles in days, and money that came after the
    /// holds ended.
    #[sqlx(flatten)]
    pub settling: SettlingView,
}

macro_rules! order_columns {
    () => {
        "o.id, o.state, o.customer_name, o.customer_email, o.currency, \
     o.amount_minor, o.provider, o.provider_session_id, o.payment_ref, o.flag, o.created_at, \
     o.paid_at, o.hold_id, o.refunded_minor, o.voucher_code, o.discount_minor, \
     (select count(*) from outbox_jobs j where j.kind = 'refund' and j.state = 'pending' \
        and j.payload->>'order_id' = o.id::text) as refunds_pending, \
     (select count(*) from outbox_jobs j where j.kind = 'refund' and j.state = 'done' \
        and j.payload->>'order_id' = o.id::text) as refunds_done, \
     o.settle_method, o.settling_until, o.late_money, o.late_money_at"
    };
}

pub async fn order(pool: &PgPool, id: Uuid) -> sqlx::Result<Option<OrderRow>> {
    sqlx::query_as(concat!(
        "select ",
        order_columns!(),
        " from orders o where o.id = $1"
    ))
    .bind(id)
    .fetch_optional(pool)
    .await
}

/// A line of an order, as a refund sees it.
#[derive(Debug, Clone, sqlx::FromRow)]
pub struct RefundableLine {
    pub product_id: String,
    pub name: String,
    pub qty: i32,
    pub refunded_qty: i32,
    pub unit_price_minor: i64,
    /// What the line's units were paid in all (after a voucher).
    pub paid_minor: i64,
}

impl RefundableLine {
    pub fn left(&self) -> i32 {
        self.qty - self.refunded_qty
    }

    /// What refunding every unit left gives back.
    pub fn left_minor(&self) -> i64 {
        crate::vouchers::refund_share(self.paid_minor, self.qty, self.refunded_qty, self.left())
    }
}

/// An item a refund may name by itself: a unit's own code with its seat,
/// not refunded or cancelled yet.
#[derive(Debug, Clone, sqlx::FromRow)]
pub struct RefundableSeat {
    pub id: i64,
    pub product_id: String,
    pub seat: String,
    pub code: String,
    /// Its code was used at the door.
    pub used: bool,
}

/// The order's seats a refund may name, in the plan's order.
pub async fn refundable_seats(pool: &PgPool, order: Uuid) -> sqlx::Result<Vec<RefundableSeat>> {
    sqlx::query_as(
        "select i.id, i.product_id, s.label as seat, i.code, i.state = 'used' as used \
           from order_items i join seats s on s.id = i.seat_id \
          where i.order_id = $1 and i.state in ('valid', 'used') \
          order by i.product_id, s.row_rank, s.run, s.pos",
    )
    .bind(order)
    .fetch_all(pool)
    .await
}

pub async fn refundable_lines(pool: &PgPool, order: Uuid) -> sqlx::Result<Vec<RefundableLine>> {
    sqlx::query_as(
        "select product_id, name, qty, refunded_qty, unit_price_minor, \
                coalesce(paid_minor, unit_price_minor * qty) as paid_minor from order_lines \
          where order_id = $1 order by product_id",
    )
    .bind(order)
    .fetch_all(pool)
    .await
}

/// An item of an order, with what became of it.
#[derive(Debug, Clone, sqlx::FromRow)]
pub struct ItemRow {
    pub id: i64,
    pub code: String,
    pub product_id: String,
    /// What it is: its line's name, and its seat.
    pub what: String,
    pub state: crate::items::ItemState,
    pub state_at: Option<DateTime<Utc>>,
    /// Who redeemed it, and where.
    pub redeemed_by: Option<String>,
    pub place: Option<String>,
}

pub async fn order_items(pool: &PgPool, order: Uuid) -> sqlx::Result<Vec<ItemRow>> {
    sqlx::query_as(
        "select i.id, i.code, i.product_id, \
                case when s.label is null then coalesce(l.name, p.name) \
                     else regexp_replace(coalesce(l.name, p.name), ' — [^—]*$', '') \
                          || ', seat ' || s.label end as what, \
                i.state, i.state_at, r.redeemed_by, r.place \
           from order_items i join products p on p.id = i.product_id \
           left join order_lines l on l.order_id = i.order_id and l.product_id = i.product_id \
           left join seats s on s.id = i.seat_id \
           left join redemptions r on r.item_id = i.id \
          where i.order_id = $1 \
          order by i.product_id, s.row_rank, s.run, s.pos, i.code",
    )
    .bind(order)
    .fetch_all(pool)
    .await
}

/// A staff refund of an order.
#[derive(Debug, Clone, sqlx::FromRow)]
pub struct StaffRefundRow {
    pub id: i64,
    pub amount_minor: i64,
    pub units: serde_json::Value,
    pub reason: String,
    pub restocked: bool,
    pub override_redeemed: bool,
    pub refunded_by: String,
    pub created_at: DateTime<Utc>,
}

impl StaffRefundRow {
    /// "2 × harbour-lights-general, 1 × wild-honey"
    pub fn units_text(&self) -> String {
        self.units
            .as_array()
            .map(|units| {
                units
                    .iter()
                    .map(|u| {
                        format!(
                            "{} × {}",
                            u["qty"].as_i64().unwrap_or(0),
                            u["product_id"].as_str().unwrap_or("?")
                        )
                    })
                    .collect::<Vec<_>>()
                    .join(", ")
            })
            .unwrap_or_default()
    }
}

pub async fn staff_refunds(pool: &PgPool, order: Uuid) -> sqlx::Result<Vec<StaffRefundRow>> {
    sqlx::query_as(
        "select id, amount_minor, units, reason, restocked, override_redeemed, refunded_by, \
                created_at \
           from order_refunds where order_id = $1 order by id",
    )
    .bind(order)
    .fetch_all(pool)
    .await
}

/// How many orders are flagged for staff (shown in the navigation).
pub async fn flagged_count(pool: &PgPool) -> sqlx::Result<i64> {
    sqlx::query_scalar("select count(*) from orders where flag is not null")
        .fetch_one(pool)
        .await
}

/// A payment claimed for a purchase (the engine's `payment_refs`).
#[derive(Debug, Clone, sqlx::FromRow)]
pub struct PaymentRefRow {
    pub payment_ref: String,
    pub created_at: DateTime<Utc>,
}

pub async fn payment_refs(pool: &PgPool, purchase: Uuid) -> sqlx::Result<Vec<PaymentRefRow>> {
    sqlx::query_as(
        "select payment_ref, created_at from payment_refs where purchase_id = $1 order by created_at",
    )
    .bind(purchase)
    .fetch_all(pool)
    .await
}

/// An outbox job of an order: refunds, page expiries, confirmations.
#[derive(Debug, Clone, sqlx::FromRow)]
pub struct JobRow {
    pub id: i64,
    pub kind: String,
    pub dedupe_key: String,
    pub state: String,
    pub attempts: i32,
    pub last_error: Option<String>,
    pub run_after: DateTime<Utc>,
    pub created_at: DateTime<Utc>,
    pub done_at: Option<DateTime<Utc>>,
    pub payment_ref: Option<String>,
    pub reason: Option<String>,
}

pub async fn order_jobs(pool: &PgPool, order: Uuid) -> sqlx::Result<Vec<JobRow>> {
    sqlx::query_as(
        "select id, kind, dedupe_key, state, attempts, last_error, run_after, created_at, done_at, \
                payload->>'payment_ref' as payment_ref, payload->>'reason' as reason \
           from outbox_jobs where payload->>'order_id' = $1::text order by id",
    )
    .bind(order)
    .fetch_all(pool)
    .await
}

/// A signed payment for a page Holdfast does not know.
#[derive(Debug, Clone, sqlx::FromRow)]
pub struct OrphanRow {
    pub provider: String,
    pub payment_ref: String,
    pub page_id: Option<String>,
    pub amount_minor: i64,
    pub currency: String,
    pub status: String,
    pub order_hint: Option<Uuid>,
    pub seen_in: String,
    pub first_seen_at: DateTime<Utc>,
    pub last_seen_at: DateTime<Utc>,
}

pub async fn orphan_payments(pool: &PgPool, limit: i64) -> sqlx::Result<Vec<OrphanRow>> {
    sqlx::query_as(
        "select provider, payment_ref, page_id, amount_minor, currency, status, order_hint, \
                seen_in, first_seen_at, last_seen_at \
           from orphan_payments order by last_seen_at desc limit $1",
    )
    .bind(limit.clamp(1, 1000))
    .fetch_all(pool)
    .await
}

/// How many payments nobody's order claims (shown in the navigation).
pub async fn orphan_count(pool: &PgPool) -> sqlx::Result<i64> {
    sqlx::query_scalar("select count(*) from orphan_payments")
        .fetch_one(pool)
        .await
}
