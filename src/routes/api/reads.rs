//! What the API reads: the catalogue and availability (from memory, as the
//! pages read them), an order by its token, and the orders by cursor.

use actix_web::{HttpResponse, web};
use serde::Deserialize;

use super::{ApiError, ErrorCode};
use crate::outgoing::views::{self, Cursor};
use crate::retry::{Bound, retry};
use crate::state::Shop;

/// `GET /api/v1/catalogue`: every product on sale with what is left of it.
#[utoipa::path(get, path = "/api/v1/catalogue", tag = "catalogue",
    security(("api_key" = [])),
    responses((status = 200, description = "Products on sale: id, name, price, what is left now"),
              (status = 401, description = "No live key", body = super::ErrorBody),
              (status = 403, description = "The key lacks read_catalogue", body = super::ErrorBody)))]
pub async fn catalogue(shop: web::Data<Shop>) -> Result<HttpResponse, ApiError> {
    let rows = retry("catalogue_read", Bound::Shopper, || {
        shop.live.availability(None)
    })
    .await?;
    let products: Vec<serde_json::Value> = rows
        .iter()
        .filter(|p| !p.hidden)
        .map(|p| {
            serde_json::json!({
                "id": p.id,
                "name": p.name,
                "kind": p.kind,
                "collection": p.collection,
                "price_minor": p.price_minor,
                "currency": p.currency,
                "starts_at": p.starts_at,
                "available": p.available_now.max(0),
                "max_per_order": p.max_per_order,
            })
        })
        .collect();
    Ok(HttpResponse::Ok().json(serde_json::json!({ "products": products })))
}

#[derive(Deserialize)]
pub struct StockQuery {
    ids: Option<String>,
}

/// `GET /api/v1/availability?ids=a,b`: what is left of each, from memory.
#[utoipa::path(get, path = "/api/v1/availability", tag = "catalogue",
    security(("api_key" = [])),
    params(("ids" = String, Query, description = "1 to 100 product ids, comma-separated")),
    responses((status = 200, description = "Each product's available and pending units"),
              (status = 400, description = "No ids, or too many", body = super::ErrorBody),
              (status = 401, description = "No live key", body = super::ErrorBody),
              (status = 403, description = "The key lacks read_catalogue", body = super::ErrorBody)))]
pub async fn availability(
    shop: web::Data<Shop>,
    query: web::Query<StockQuery>,
) -> Result<HttpResponse, ApiError> {
    let ids: Vec<String> = query
        .ids
        .as_deref()
        .unwrap_or("")
        .split(',')
        .filter(|id| !id.is_empty())
        .map(str::to_owned)
        .collect();
    if ids.is_empty() || ids.len() > 100 || ids.iter().any(|id| id.len() > 200) {
        return Err(ApiError::new(
            ErrorCode::BadIds,
            "ask about 1 to 100 products: ?ids=a,b",
        ));
    }
    let stock = retry("stock_read", Bound::Shopper, || shop.live.stock(&ids)).await?;
    Ok(HttpResponse::Ok().json(serde_json::json!({ "products": stock })))
}

/// `GET /api/v1/orders/by-token/{token}`: an order, by the token its
/// checkout returned.
#[utoipa::path(get, path = "/api/v1/orders/by-token/{token}", tag = "orders",
    security(("api_key" = [])),
    params(("token" = String, Path, description = "The order's token")),
    responses((status = 200, description = "The order: state, amounts, lines"),
              (status = 404, description = "No such order", body = super::ErrorBody),
              (status = 401, description = "No live key", body = super::ErrorBody),
              (status = 403, description = "The key lacks start_checkouts", body = super::ErrorBody)))]
pub async fn order_by_token(
    shop: web::Data<Shop>,
    token: web::Path<String>,
) -> Result<HttpResponse, ApiError> {
    if token.len() > 100 {
        return Err(ApiError::new(ErrorCode::NotFound, "no such order"));
    }
    match views::order_by_token(&shop.pool, &token).await? {
        Some(order) => Ok(HttpResponse::Ok().json(serde_json::json!({ "order": order }))),
        None => Err(ApiError::new(ErrorCode::NotFound, "no such order")),
    }
}

#[derive(Deserialize)]
pub struct PageQuery {
    after: Option<String>,
    limit: Option<i64>,
}

/// `GET /api/v1/orders?after=<cursor>&limit=N`: orders oldest first.
#[utoipa::path(get, path = "/api/v1/orders", tag = "orders",
    security(("api_key" = [])),
    params(("after" = Option<String>, Query, description = "The `next` cursor of the page before"),
           ("limit" = Option<i64>, Query, description = "1 to 200 (default 50)")),
    responses((status = 200, description = "A page of orders, and `next` when there may be more"),
              (status = 400, description = "A cursor or limit that cannot be read", body = super::ErrorBody),
              (status = 401, description = "No live key", body = super::ErrorBody),
              (status = 403, description = "The key lacks read_orders", body = super::ErrorBody)))]
pub async fn orders(
    shop: web::Data<Shop>,
    query: web::Query<PageQuery>,
) -> Result<HttpResponse, ApiError> {
    let limit = query.limit.unwrap_or(50);
    if !(1..=200).contains(&limit) {
        return Err(ApiError::new(ErrorCode::BadLimit, "limit is 1 to 200"));
    }
    let after = match query.after.as_deref() {
        None => None,
        Some(text) => Some(Cursor::decode(text).ok_or_else(|| {
            ApiError::new(ErrorCode::BadCursor, "that cursor is not one we gave")
        })?),
    };
    let (orders, next) = views::orders_after(&shop.pool, after, limit).await?;
    Ok(HttpResponse::Ok().json(serde_json::json!({
        "orders": orders,
        "next": next.map(|c| c.encode()),
    })))
}
