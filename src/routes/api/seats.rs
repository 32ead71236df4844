//! A seated section's seats over the API (issue 35):
//! `GET /api/v1/products/{id}/seats`, every seat of the section with its
//! label, row, number, category, price, access and state (free, taken or
//! blocked), as the database holds them now: what a storefront draws its
//! own seat map from, and names seats from in a checkout's line.

use actix_web::{HttpResponse, web};
use serde::Serialize;

use super::{ApiError, ErrorCode};
use crate::retry::{Bound, retry};
use crate::state::Shop;

/// One seat as the API says it.
#[derive(Serialize, sqlx::FromRow)]
struct Seat {
    id: i64,
    label: String,
    section: String,
    row: String,
    number: i32,
    category: String,
    price_minor: i64,
    /// `none`, `wheelchair` or `companion`.
    accessible: String,
    /// `free`, `taken` (held or sold) or `blocked` (off sale).
    state: String,
}

/// `GET /api/v1/products/{id}/seats`
#[utoipa::path(get, path = "/api/v1/products/{id}/seats", tag = "catalogue",
    security(("api_key" = [])),
    params(("id" = String, Path, description = "A seated section's product id")),
    responses((status = 200, description = "Every seat of the section, from the stage back: its \
                                             id, label, section, row, number, category, price_minor, \
                                             accessible and state (free, taken or blocked)"),
              (status = 404, description = "No such seated section", body = super::ErrorBody),
              (status = 401, description = "No live key", body = super::ErrorBody),
              (status = 403, description = "The key lacks read_catalogue", body = super::ErrorBody)))]
pub async fn seats(
    shop: web::Data<Shop>,
    product: web::Path<String>,
) -> Result<HttpResponse, ApiError> {
    let seats: Vec<Seat> = retry("seats_read", Bound::Shopper, || {
        sqlx::query_as::<_, Seat>(
            "select s.id, s.label, x.name as section, s.row_label as row, s.number, \
                    x.category, p.price_minor, s.access as accessible, \
                    case when exists (select 1 from seat_pins q where q.seat_id = s.id and q.live) \
                         then 'taken' when s.state = 'open' then 'free' else 'blocked' end as state \
               from seat_sections x join products p on p.id = x.product_id \
               join seats s on s.section = x.product_id \
              where x.product_id = $1 and p.active and not p.hidden \
                and s.note <> 'off the plan' \
              order by s.row_rank, s.run, s.pos",
        )
        .bind(product.as_str())
        .fetch_all(&shop.pool)
    })
    .await?;
    if seats.is_empty() {
        return Err(ApiError::new(ErrorCode::NotFound, "no such seated section"));
    }
    Ok(HttpResponse::Ok().json(serde_json::json!({
        "product_id": product.as_str(),
        "seats": seats,
    })))
}
