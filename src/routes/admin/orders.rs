//! Orders: the list with its search, and an order with its payments,
//! codes, refunds and the refund form (`refunds` reviews and sends it);
//! retrying a refund job.

use actix_web::http::StatusCode;
use actix_web::{HttpResponse, web};
use askama::Template;
use serde::Deserialize;

use super::notices::NoticeQuery;
use super::pages::{Nav, given, money, nav, parse_id, render, same, see_other, short};
use super::refunds::RefundForm;
use crate::checkout::OrderState;
use crate::routes::ShopError;
use crate::staff::Session;
use crate::staff::actions::{self, RefundRetry};
use crate::staff::order_search::{self, Found, OrderSearch, Stage};
use crate::staff::views;
use crate::state::Shop;

#[derive(Deserialize)]
pub struct OrdersFilter {
    q: Option<String>,
    state: Option<String>,
    stage: Option<String>,
    flagged: Option<String>,
    product: Option<String>,
    /// Days in the shop's zone (`2026-12-01`), both included.
    from: Option<String>,
    to: Option<String>,
    /// Where this page starts: the last order of the page before.
    after: Option<String>,
}

#[derive(Template)]
#[template(path = "admin/orders.html")]
pub(super) struct OrdersPage {
    nav: Nav,
    found: Found,
    /// Each state's value and words, for the filter.
    states: Vec<(&'static str, &'static str)>,
    stages: [Stage; 3],
    products: Vec<ProductGroup>,
    filter_text: String,
    filter_state: String,
    filter_stage: String,
    filter_product: String,
    filter_from: String,
    filter_to: String,
    flagged_only: bool,
    /// This page is not the first.
    paged: bool,
    /// The query string of the next page, when there is one.
    next_page: Option<String>,
}

/// A product to filter by.
#[derive(sqlx::FromRow)]
pub(super) struct ProductChoice {
    id: String,
    name: String,
    collection: String,
    collection_title: String,
    kind: crate::catalogue::ProductKind,
    /// A time's or a slot's start: named by it within its collection.
    starts_at: Option<chrono::DateTime<chrono::Utc>>,
}

/// The product filter's choices, a group per collection: all of it first,
/// then its products (a time or a slot by its moment, from yesterday to
/// the day after tomorrow: a restaurant's month of times is not a list to
/// scroll; its other days are found through all of it and the dates).
pub(super) struct ProductGroup {
    value: String,
    title: String,
    products: Vec<(String, String)>,
}

fn product_groups(
    choices: Vec<ProductChoice>,
    zone: crate::clock::ShopZone,
    now: chrono::DateTime<chrono::Utc>,
) -> Vec<ProductGroup> {
    let mut groups: Vec<ProductGroup> = Vec::new();
    for p in choices {
        let value = format!("collection:{}", p.collection);
        if groups.last().is_none_or(|g| g.value != value) {
            groups.push(ProductGroup {
                value,
                title: p.collection_title.clone(),
                products: Vec::new(),
            });
        }
        let group = groups.last_mut().expect("just pushed");
        let words = match p.starts_at {
            // a slot or a table's time: its name is its collection's and
            // its moment
            Some(at) if p.kind.sheet().scheduled_name.is_some() => {
                if at < now - chrono::Duration::days(1) || at > now + chrono::Duration::days(2) {
                    continue;
                }
                zone.local(at).format("%a %-d %b, %H:%M").to_string()
            }
            _ => p.name,
        };
        group.products.push((p.id, words));
    }
    groups
}

/// A cursor as the page's link carries it: `<microseconds>.<order id>`.
fn cursor(at: chrono::DateTime<chrono::Utc>, id: uuid::Uuid) -> String {
    format!("{}.{id}", at.timestamp_micros())
}

fn read_cursor(text: &str) -> Result<(chrono::DateTime<chrono::Utc>, uuid::Uuid), ShopError> {
    let refused = || ShopError::bad_request("that page of orders is not one this list gave");
    let (micros, id) = text.split_once('.').ok_or_else(refused)?;
    let at = micros
        .parse()
        .ok()
        .and_then(chrono::DateTime::from_timestamp_micros)
        .ok_or_else(refused)?;
    Ok((at, uuid::Uuid::parse_str(id).map_err(|_| refused())?))
}

/// A day typed in the filter, as the moment it starts in the shop's zone;
/// `next` gives the start of the day after (for "to", which includes its
/// day).
fn day(
    shop: &Shop,
    typed: Option<&str>,
    next: bool,
) -> Result<Option<chrono::DateTime<chrono::Utc>>, ShopError> {
    let Some(typed) = given(&typed.map(str::to_owned)).map(str::to_owned) else {
        return Ok(None);
    };
    let date = chrono::NaiveDate::parse_from_str(&typed, "%Y-%m-%d")
        .map_err(|_| ShopError::bad_request("a day is written like 2026-12-01"))?;
    let date = if next {
        date.succ_opt().unwrap_or(date)
    } else {
        date
    };
    shop.zone()
        .at(date, chrono::NaiveTime::MIN)
        .map(Some)
        .map_err(|e| ShopError::bad_request(&e))
}

/// `GET /admin/orders?q=&stage=&state=&product=&from=&to=&flagged=1&after=`.
pub async fn orders(
    shop: web::Data<Shop>,
    session: web::ReqData<Session>,
    filter: web::Query<OrdersFilter>,
) -> Result<HttpResponse, ShopError> {
    let state = match given(&filter.state) {
        None => None,
        Some(name) => Some(
            OrderState::parse(name).ok_or_else(|| ShopError::bad_request("unknown order state"))?,
        ),
    };
    let stage = match given(&filter.stage) {
        None => None,
        Some(name) => {
            Some(Stage::parse(name).ok_or_else(|| ShopError::bad_request("unknown order stage"))?)
        }
    };
    let flagged_only = filter
        .flagged
        .as_deref()
        .is_some_and(|f| !f.is_empty() && f != "0");
    let text = given(&filter.q).map(str::to_owned);
    if text.as_ref().is_some_and(|t| t.chars().count() > 200) {
        return Err(ShopError::bad_request("search for at most 200 characters"));
    }
    let product = given(&filter.product).map(str::to_owned);
    let asked = OrderSearch {
        text: text.clone(),
        state,
        stage,
        flagged_only,
        product: product.clone(),
        from: day(&shop, filter.from.as_deref(), false)?,
        until: day(&shop, filter.to.as_deref(), true)?,
        after: given(&filter.after).map(read_cursor).transpose()?,
    };
    let found = order_search::search(&shop.pool, &asked).await?;
    let next_page = found.next.map(|(at, id)| {
        let mut query = url::form_urlencoded::Serializer::new(String::new());
        for (key, value) in [
            ("q", &filter.q),
            ("stage", &filter.stage),
            ("state", &filter.state),
            ("product", &filter.product),
            ("from", &filter.from),
            ("to", &filter.to),
            ("flagged", &filter.flagged),
        ] {
            if let Some(value) = given(value) {
                query.append_pair(key, value);
            }
        }
        query.append_pair("after", &cursor(at, id));
        query.finish()
    });
    let choices: Vec<ProductChoice> = sqlx::query_as(
        "select p.id, p.name, p.collection, c.title as collection_title, p.kind, p.starts_at \
           from products p join collections c on c.id = p.collection \
          where p.archived_at is null \
          order by c.position, c.title, c.id, p.starts_at nulls first, p.position, p.id",
    )
    .fetch_all(&shop.pool)
    .await?;
    let products = product_groups(choices, shop.zone(), chrono::Utc::now());
    let page = OrdersPage {
        nav: nav(&shop, &session, &NoticeQuery::default()).await?,
        found,
        states: OrderState::ALL
            .iter()
            .map(|s| (s.as_str(), s.words()))
            .collect(),
        stages: Stage::ALL,
        products,
        filter_text: text.unwrap_or_default(),
        filter_state: state.map(|s| s.as_str()).unwrap_or_default().to_owned(),
        filter_stage: stage.map(|s| s.as_str()).unwrap_or_default().to_owned(),
        filter_product: product.unwrap_or_default(),
        filter_from: given(&filter.from).unwrap_or_default().to_owned(),
        filter_to: given(&filter.to).unwrap_or_default().to_owned(),
        flagged_only,
        paged: asked.after.is_some(),
        next_page,
    };
    render(StatusCode::OK, &page)
}

#[derive(Template)]
#[template(path = "admin/order.html")]
pub(super) struct OrderPage {
    nav: Nav,
    o: views::OrderRow,
    /// name, quantity, units refunded, line total
    lines: Vec<(String, i32, i32, String)>,
    /// The refund form, every unit left chosen.
    refund: RefundForm,
    items: Vec<views::ItemRow>,
    refunds: Vec<views::StaffRefundRow>,
    holds: Vec<views::HoldRow>,
    payments: Vec<views::PaymentRefRow>,
    jobs: Vec<views::JobRow>,
}

impl OrderPage {
    /// The technical details open themselves when they hold something to
    /// do: a refund the provider has not taken yet, to retry.
    fn technical_open(&self) -> bool {
        self.jobs
            .iter()
            .any(|j| j.kind == "refund" && j.state == "pending")
    }
}

/// `GET /admin/orders/{id}`.
pub async fn order(
    shop: web::Data<Shop>,
    session: web::ReqData<Session>,
    id: web::Path<String>,
    notice: web::Query<NoticeQuery>,
) -> Result<HttpResponse, ShopError> {
    let id = parse_id(&id, "order")?;
    let o = views::order(&shop.pool, id)
        .await?
        .ok_or_else(|| ShopError::not_found("no such order"))?;
    let refundable = views::refundable_lines(&shop.pool, id).await?;
    let lines = refundable
        .iter()
        .map(|l| {
            // what was paid for the line, after the voucher's share
            let total = crate::money::format(l.paid_minor, &o.currency);
            (l.name.clone(), l.qty, l.refunded_qty, total)
        })
        .collect();
    let (holds, payments) = match o.hold_id {
        Some(purchase) => (
            views::purchase_lines(&shop.pool, purchase).await?,
            views::payment_refs(&shop.pool, purchase).await?,
        ),
        None => (Vec::new(), Vec::new()),
    };
    let page = OrderPage {
        nav: nav(&shop, &session, &notice).await?,
        jobs: views::order_jobs(&shop.pool, id).await?,
        refund: RefundForm::whole(
            refundable,
            views::refundable_seats(&shop.pool, id).await?,
            &o,
        ),
        items: views::order_items(&shop.pool, id).await?,
        refunds: views::staff_refunds(&shop.pool, id).await?,
        o,
        lines,
        holds,
        payments,
    };
    render(StatusCode::OK, &page)
}

/// `POST /admin/orders/{order}/jobs/{job}/retry`: a waiting refund, now.
pub async fn retry_refund(
    shop: web::Data<Shop>,
    session: web::ReqData<Session>,
    path: web::Path<(String, i64)>,
) -> Result<HttpResponse, ShopError> {
    let (order, job) = path.into_inner();
    let order = parse_id(&order, "order")?;
    let back = format!("/admin/orders/{order}");
    match actions::retry_refund(&shop.pool, &session.staff, order, job).await? {
        RefundRetry::Queued => Ok(see_other(&format!("{back}?notice=refund_queued"))),
        RefundRetry::AlreadyDone => Ok(see_other(&format!("{back}?notice=refund_done"))),
        RefundRetry::NotFound => Err(ShopError::not_found("no such refund job")),
    }
}
