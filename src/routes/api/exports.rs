//! The exports for a staff key: orders and attendees as CSV, through the
//! same routine as the admin's Exports page ([`exports::export_csv`]): streamed from a database cursor, at most
//! four at once per process, each recorded in Activity with the key as
//! the actor before its first row is read.

use actix_web::http::header;
use actix_web::{HttpRequest, HttpResponse, web};

use super::{ApiError, ErrorCode, key_of};
use crate::audit::Actor;
use crate::staff::exports::{self, Csv, CsvExport, ExportError, ExportFilter, FilterForm};
use crate::state::Shop;

/// The query's fields: the admin's filter, each optional.
const FIELDS: [&str; 7] = [
    "product",
    "collection",
    "state",
    "paid_from",
    "paid_to",
    "starts_from",
    "starts_to",
];

impl From<ExportError> for ApiError {
    fn from(error: ExportError) -> Self {
        match error {
            ExportError::InvalidInput(message) => ApiError::new(ErrorCode::InvalidInput, message),
            ExportError::NotFound(message) => ApiError::new(ErrorCode::NotFound, message),
            ExportError::Busy => ApiError::new(
                ErrorCode::Busy,
                "other exports are streaming; try again in a minute",
            ),
            ExportError::Database(error) => error.into(),
        }
    }
}

/// The filter of a request; a field the filter does not have is refused
/// (a typo must not export everything).
fn filter_of(request: &HttpRequest) -> Result<ExportFilter, ApiError> {
    let query = request.query_string();
    if let Some((unknown, _)) =
        form_urlencoded::parse(query.as_bytes()).find(|(name, _)| !FIELDS.contains(&name.as_ref()))
    {
        let unknown: String = unknown.chars().take(40).collect();
        return Err(ApiError::new(
            ErrorCode::InvalidInput,
            format!(
                "{unknown:?} is not a field of the filter (it takes {}); nothing was exported",
                FIELDS.join(", ")
            ),
        ));
    }
    Ok(ExportFilter::parse(&FilterForm::from_query(query))?)
}

/// The export a key asks for, with the filter of its query.
async fn csv(shop: &Shop, request: &HttpRequest, what: Csv) -> Result<HttpResponse, ApiError> {
    let key = key_of(request).expect("the guard let a key through");
    let filter = filter_of(request)?;
    let by = Actor::from(&key);
    let export =
        exports::export_csv(&shop.pool, &shop.exports, by, &filter, shop.zone(), what).await?;
    Ok(download(export))
}

fn download(export: CsvExport) -> HttpResponse {
    HttpResponse::Ok()
        .content_type("text/csv; charset=utf-8")
        .insert_header((
            header::CONTENT_DISPOSITION,
            format!("attachment; filename=\"{}\"", export.filename),
        ))
        .streaming(export.body)
}

/// `GET /api/v1/exports/orders.csv`: one line per order.
#[utoipa::path(get, path = "/api/v1/exports/orders.csv", tag = "staff",
    security(("api_key" = [])),
    params(
        ("product" = Option<String>, Query, description = "Orders with a line of this product"),
        ("collection" = Option<String>, Query, description = "Orders with a line of this collection"),
        ("state" = Option<String>, Query, description = "The order's state: paid, refunded, …"),
        ("paid_from" = Option<String>, Query, description = "Paid on or after this day (YYYY-MM-DD, the shop's time zone)"),
        ("paid_to" = Option<String>, Query, description = "Paid on or before this day"),
        ("starts_from" = Option<String>, Query, description = "A line starting on or after this day"),
        ("starts_to" = Option<String>, Query, description = "A line starting on or before this day")),
    responses((status = 200, description = "RFC 4180 CSV in UTF-8 with a byte order mark, streamed", content_type = "text/csv"),
              (status = 401, description = "No live key", body = super::ErrorBody),
              (status = 403, description = "The key lacks export", body = super::ErrorBody),
              (status = 404, description = "The filter names a product or collection the shop lacks (`not_found`)", body = super::ErrorBody),
              (status = 422, description = "A filter that cannot be read, or a field it does not have (`invalid_input`)", body = super::ErrorBody),
              (status = 503, description = "Four exports are streaming already (`busy`)", body = super::ErrorBody)))]
pub async fn orders_csv(
    shop: web::Data<Shop>,
    request: HttpRequest,
) -> Result<HttpResponse, ApiError> {
    csv(&shop, &request, Csv::Orders).await
}

/// `GET /api/v1/exports/attendees.csv`: one line per ticket or pickup code.
#[utoipa::path(get, path = "/api/v1/exports/attendees.csv", tag = "staff",
    security(("api_key" = [])),
    params(
        ("product" = Option<String>, Query, description = "Codes of this product"),
        ("collection" = Option<String>, Query, description = "Codes of this collection"),
        ("state" = Option<String>, Query, description = "The order's state"),
        ("paid_from" = Option<String>, Query, description = "Paid on or after this day (YYYY-MM-DD)"),
        ("paid_to" = Option<String>, Query, description = "Paid on or before this day"),
        ("starts_from" = Option<String>, Query, description = "Starting on or after this day"),
        ("starts_to" = Option<String>, Query, description = "Starting on or before this day")),
    responses((status = 200, description = "RFC 4180 CSV in UTF-8 with a byte order mark, streamed", content_type = "text/csv"),
              (status = 401, description = "No live key", body = super::ErrorBody),
              (status = 403, description = "The key lacks export", body = super::ErrorBody),
              (status = 404, description = "The filter names a product or collection the shop lacks (`not_found`)", body = super::ErrorBody),
              (status = 422, description = "A filter that cannot be read, or a field it does not have (`invalid_input`)", body = super::ErrorBody),
              (status = 503, description = "Four exports are streaming already (`busy`)", body = super::ErrorBody)))]
pub async fn attendees_csv(
    shop: web::Data<Shop>,
    request: HttpRequest,
) -> Result<HttpResponse, ApiError> {
    csv(&shop, &request, Csv::Attendees).await
}
