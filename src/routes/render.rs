//! Pages and redirects as every route module answers them.

use actix_web::HttpResponse;
use actix_web::http::StatusCode;
use actix_web::http::header;
use askama::Template;

use super::ShopError;

/// A redirect the browser follows with a GET.
pub(crate) fn see_other(location: &str) -> HttpResponse {
    HttpResponse::SeeOther()
        .insert_header((header::LOCATION, location.to_owned()))
        .finish()
}

pub(crate) fn render<T: Template>(status: StatusCode, page: &T) -> Result<HttpResponse, ShopError> {
    let body = page.render().map_err(|e| ShopError::internal(e.into()))?;
    Ok(html(status, body))
}

/// A page already rendered.
pub(crate) fn html(
    status: StatusCode,
    body: impl actix_web::body::MessageBody + 'static,
) -> HttpResponse {
    HttpResponse::build(status)
        .content_type("text/html; charset=utf-8")
        .body(body)
}
