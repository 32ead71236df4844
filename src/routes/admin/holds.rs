//! Holds, filtered by resource, state and age, each with its history; releasing one.

use actix_web::http::StatusCode;
use actix_web::{HttpResponse, web};
use askama::Template;
use serde::Deserialize;

use super::notices::NoticeQuery;
use super::pages::{
    HOLD_STATES, LIST_LIMIT, Nav, age, given, nav, parse_id, render, same, see_other, short,
};
use crate::inventory::{HoldEvent, HoldId, Inventory};
use crate::routes::ShopError;
use crate::staff::Session;
use crate::staff::actions::{self, HoldReleased};
use crate::staff::views::{self, HoldQuery};
use crate::state::Shop;

#[derive(Deserialize)]
pub struct HoldsFilter {
    resource: Option<String>,
    state: Option<String>,
    older_than: Option<String>,
}

#[derive(Template)]
#[template(path = "admin/holds.html")]
pub(super) struct HoldsPage {
    nav: Nav,
    holds: Vec<views::HoldRow>,
    resource_ids: Vec<String>,
    states: Vec<&'static str>,
    filter_resource: String,
    filter_state: String,
    filter_age: String,
    limit: i64,
}

/// `GET /admin/holds?resource=&state=&older_than=` (minutes).
pub async fn holds(
    shop: web::Data<Shop>,
    session: web::ReqData<Session>,
    filter: web::Query<HoldsFilter>,
) -> Result<HttpResponse, ShopError> {
    let resource = given(&filter.resource).map(str::to_owned);
    let state = given(&filter.state).map(str::to_owned);
    if let Some(state) = &state
        && !HOLD_STATES.contains(&state.as_str())
    {
        return Err(ShopError::bad_request("unknown hold state"));
    }
    let older_than = match given(&filter.older_than) {
        Some(minutes) => Some(
            minutes
                .parse::<i64>()
                .ok()
                .filter(|m| (0..=100_000).contains(m))
                .ok_or_else(|| ShopError::bad_request("age must be 0 to 100000 minutes"))?,
        ),
        None => None,
    };
    let query = HoldQuery {
        resource: resource.clone(),
        state: state.clone(),
        older_than_minutes: older_than,
        limit: LIST_LIMIT,
    };
    let page = HoldsPage {
        nav: nav(&shop, &session, &NoticeQuery::default()).await?,
        holds: views::holds(&shop.pool, &query).await?,
        resource_ids: views::resources(&shop.pool, None)
            .await?
            .into_iter()
            .map(|r| r.check.resource_id)
            .collect(),
        states: HOLD_STATES.to_vec(),
        filter_resource: resource.unwrap_or_default(),
        filter_state: state.unwrap_or_default(),
        filter_age: older_than.map(|m| m.to_string()).unwrap_or_default(),
        limit: LIST_LIMIT,
    };
    render(StatusCode::OK, &page)
}

#[derive(Template)]
#[template(path = "admin/hold.html")]
pub(super) struct HoldPage {
    nav: Nav,
    h: views::HoldRow,
    lines: Vec<views::HoldRow>,
    events: Vec<HoldEvent>,
}

/// `GET /admin/holds/{id}`: the hold, its purchase and its history.
pub async fn hold(
    shop: web::Data<Shop>,
    session: web::ReqData<Session>,
    id: web::Path<String>,
    notice: web::Query<NoticeQuery>,
) -> Result<HttpResponse, ShopError> {
    let id = parse_id(&id, "hold")?;
    let h = views::hold(&shop.pool, id)
        .await?
        .ok_or_else(|| ShopError::not_found("no such hold"))?;
    let lines = views::purchase_lines(&shop.pool, h.purchase_id).await?;
    let events = Inventory::new(shop.pool.clone())
        .events(HoldId(id))
        .await
        .map_err(|e| ShopError::internal(e.into()))?;
    let page = HoldPage {
        nav: nav(&shop, &session, &notice).await?,
        h,
        lines,
        events,
    };
    render(StatusCode::OK, &page)
}

/// `POST /admin/holds/{id}/release`.
pub async fn release_hold(
    shop: web::Data<Shop>,
    session: web::ReqData<Session>,
    id: web::Path<String>,
) -> Result<HttpResponse, ShopError> {
    let id = parse_id(&id, "hold")?;
    let back = format!("/admin/holds/{id}");
    match actions::release_hold(&shop.pool, &session.staff, id).await? {
        HoldReleased::Released { lines } => {
            Ok(see_other(&format!("{back}?notice=released&lines={lines}")))
        }
        HoldReleased::AlreadyEnded { .. } => Ok(see_other(&format!("{back}?notice=already_ended"))),
        HoldReleased::Paid => Ok(see_other(&format!("{back}?notice=paid"))),
        HoldReleased::NotFound => Err(ShopError::not_found("no such hold")),
    }
}
