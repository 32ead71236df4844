//! The edge: text that PostgreSQL cannot store (a NUL byte, bytes that are
//! not UTF-8) is refused before any handler sees it, with 400 and the
//! usual error page, on every route: in the path, the query string and a
//! form body. Handlers can then trust that every string they were given
//! can be stored or compared in the database.

use actix_web::body::{EitherBody, MessageBody};
use actix_web::dev::{ServiceRequest, ServiceResponse};
use actix_web::middleware::Next;
use actix_web::{HttpMessage, ResponseError, web};
use futures::StreamExt;
use percent_encoding::percent_decode;

use super::ShopError;

/// Largest body read at the edge; the same as the app's `PayloadConfig`.
pub const MAX_FORM_BYTES: usize = 64 * 1024;

/// Whether percent-encoded text decodes to storable text.
fn storable(encoded: &[u8]) -> bool {
    let decoded: Vec<u8> = percent_decode(encoded).collect();
    !decoded.contains(&0) && std::str::from_utf8(&decoded).is_ok()
}

/// Whether every name and value of an `application/x-www-form-urlencoded`
/// text (a query string or a form body) decodes to storable text.
pub fn storable_form(form: &[u8]) -> bool {
    form.split(|b| *b == b'&')
        .flat_map(|pair| pair.splitn(2, |b| *b == b'='))
        .all(storable)
}

/// A refusal from the edge: the error page (for the JSON API, its one
/// error shape), never cached (it answers one request, whatever route it
/// was sent to).
fn refuse<B>(request: ServiceRequest, error: ShopError) -> ServiceResponse<EitherBody<B>> {
    let mut response = if request.path().starts_with("/api/") {
        let code = match error.status_code() {
            actix_web::http::StatusCode::PAYLOAD_TOO_LARGE => super::errors::ErrorCode::TooLarge,
            _ => super::errors::ErrorCode::BadRequest,
        };
        super::api::ApiError::new(code, error.message()).error_response()
    } else {
        error.error_response()
    };
    response.headers_mut().insert(
        actix_web::http::header::CACHE_CONTROL,
        actix_web::http::header::HeaderValue::from_static("no-store"),
    );
    request.into_response(response).map_into_right_body()
}

/// The middleware (`from_fn`), wrapped inside the security headers so its
/// answers wear them too.
pub async fn refuse_unstorable_text<B: MessageBody + 'static>(
    mut request: ServiceRequest,
    next: Next<B>,
) -> Result<ServiceResponse<EitherBody<B>>, actix_web::Error> {
    let unstorable = || {
        ShopError::bad_request(
            "the request carries text that cannot be stored (a NUL byte or bytes that are not \
             UTF-8); nothing was changed",
        )
    };
    let uri = request.uri().clone();
    if !storable(uri.path().as_bytes()) || !storable_form(uri.query().unwrap_or("").as_bytes()) {
        return Ok(refuse(request, unstorable()));
    }
    let is_form = request
        .content_type()
        .eq_ignore_ascii_case("application/x-www-form-urlencoded");
    if is_form {
        let mut payload = request.take_payload();
        let mut body = web::BytesMut::new();
        while let Some(chunk) = payload.next().await {
            let Ok(chunk) = chunk else {
                return Ok(refuse(request, super::bad_form()));
            };
            if body.len() + chunk.len() > MAX_FORM_BYTES {
                return Ok(refuse(
                    request,
                    ShopError::too_large(
                        "that form is far larger than any of ours; nothing was changed",
                    ),
                ));
            }
            body.extend_from_slice(&chunk);
        }
        if !storable_form(&body) {
            return Ok(refuse(request, unstorable()));
        }
        request.set_payload(actix_web::dev::Payload::from(body.freeze()));
    }
    Ok(next.call(request).await?.map_into_left_body())
}

/// The header a [`ShopError`] for an absent database marks its answer with,
/// for [`one_moment`] to replace.
pub const ONE_MOMENT_MARK: &str = "x-holdfast-one-moment";

/// The middleware (`from_fn`) that turns an answer marked
/// [`ONE_MOMENT_MARK`] (the database was away for longer than the request
/// waited) into the "one moment" page: a page read with GET comes back to
/// itself, anything else to the page it was sent from (the basket, the
/// admin).
pub async fn one_moment<B: MessageBody + 'static>(
    request: ServiceRequest,
    next: Next<B>,
) -> Result<ServiceResponse<EitherBody<B>>, actix_web::Error> {
    let then = match *request.method() {
        actix_web::http::Method::GET | actix_web::http::Method::HEAD => request
            .uri()
            .path_and_query()
            .map(|p| p.as_str().to_owned())
            .unwrap_or_else(|| "/".to_owned()),
        _ if request.path().starts_with("/admin") => "/admin".to_owned(),
        _ => "/basket".to_owned(),
    };
    let response = next.call(request).await?;
    if !response.headers().contains_key(ONE_MOMENT_MARK) {
        return Ok(response.map_into_left_body());
    }
    let (request, _) = response.into_parts();
    Ok(ServiceResponse::new(request, super::shop::one_moment(&then)).map_into_right_body())
}

/// Every page is shown in the shop's name and colours: the shop as stored
/// ([`crate::storefront::Storefronts`], from memory) is put in place for
/// the request, where `templates/base.html` reads it
/// ([`crate::storefront::shown`]).
pub async fn storefront<B: MessageBody + 'static>(
    request: ServiceRequest,
    next: Next<B>,
) -> Result<ServiceResponse<B>, actix_web::Error> {
    let front = match request.app_data::<actix_web::web::Data<crate::state::Shop>>() {
        // memory's copy while it may be believed (read with the stock,
        // at once after a save), else the copy read every few seconds
        Some(shop) => match shop.live.now() {
            Some(snapshot) => std::sync::Arc::clone(&snapshot.settings().storefront),
            None => shop.storefronts.current(&shop.pool).await,
        },
        None => std::sync::Arc::default(),
    };
    crate::storefront::SHOWN
        .scope(front, next.call(request))
        .await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn storable_text_is_utf8_without_nul() {
        assert!(storable_form(b"name=Ada+Lovelace&email=ada%40example.com"));
        assert!(storable_form(b"name=%C3%A9l%C3%A8ve&empty=&flag"));
        assert!(storable_form(b""));
        assert!(!storable_form(b"name=%00"));
        assert!(!storable_form(b"na%00me=x"));
        assert!(!storable_form(b"name=%C3"));
        assert!(!storable_form(b"name=%FF%FE"));
        assert!(!storable_form(b"a=1&b=\xff"));
        assert!(storable(b"/c/bakery"));
        assert!(!storable(b"/c/%00"));
        assert!(!storable(b"/orders/%E9"));
    }
}
