//! A seated section's seats over the API (issue 35):
//! `GET /api/v1/products/{id}/seats`, every seat of the section with its
//! label, row, number, category, price, access and state (free, taken or
//! blocked), from the shop's memory (as the seat map: a crowd polling it
//! costs no read of the seats; the database when memory may not be
//! believed): what a storefront draws its own seat map from, and names
//! seats from in a checkout's line. The checkout's transaction decides.

use actix_web::{HttpResponse, web};
use serde::Serialize;

use crate::catalogue::seats::SeatState;
use crate::retry::{Bound, retry};
use crate::routes::api_error::{ApiError, ErrorBody};
use crate::routes::errors::ErrorCode;
use crate::state::Shop;

/// One seat as the API says it.
#[derive(Serialize)]
struct Seat<'a> {
    id: i64,
    label: &'a str,
    section: &'a str,
    row: &'a str,
    number: i32,
    category: &'a str,
    price_minor: i64,
    /// `none`, `wheelchair` or `companion`.
    accessible: &'a str,
    /// `free`, `taken` (held or sold) or `blocked` (off sale).
    state: SeatState,
}

/// `GET /api/v1/products/{id}/seats`
#[utoipa::path(get, path = "/api/v1/products/{id}/seats", tag = "catalogue",
    security(("api_key" = [])),
    params(("id" = String, Path, description = "A seated section's product id")),
    responses((status = 200, description = "Every seat of the section, from the stage back: its \
                                             id, label, section, row, number, category, price_minor, \
                                             accessible and state (free, taken or blocked)"),
              (status = 404, description = "No such seated section", body = ErrorBody),
              (status = 401, description = "No live key", body = ErrorBody),
              (status = 403, description = "The key lacks read_catalogue", body = ErrorBody)))]
pub async fn seats(
    shop: web::Data<Shop>,
    product: web::Path<String>,
) -> Result<HttpResponse, ApiError> {
    let section = retry("seats_read", Bound::Shopper, || {
        shop.live.section_seats(product.as_str())
    })
    .await?;
    let Some(section) = section.filter(|s| !s.seats.is_empty()) else {
        return Err(ApiError::new(ErrorCode::NotFound, "no such seated section"));
    };
    let head = &section.head;
    let seats: Vec<Seat> = section
        .seats
        .iter()
        .map(|s| Seat {
            id: s.id,
            label: &s.label,
            section: &head.name,
            row: &s.row_label,
            number: s.number,
            category: &head.category_id,
            price_minor: head.price_minor,
            accessible: &s.access,
            state: s.state,
        })
        .collect();
    Ok(HttpResponse::Ok().json(serde_json::json!({
        "product_id": product.as_str(),
        "seats": seats,
    })))
}
