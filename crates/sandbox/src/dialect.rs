//! Requests the sandbox cannot read are refused in the words of the
//! provider that was asked, never with a dropped connection or a page of
//! the web framework's: a body too large or unreadable, a query or path
//! the extractors refuse, an unknown URL or a method a URL does not take.
//! Each provider says how ([`Dialect`]); [`rules`] installs it on the
//! provider's scope, for actix's own extractors too.
//!
//! API bodies are read by [`Body`], whole, so that a refusal never leaves
//! unread bytes behind and the client's connection stays usable; what a
//! body must be (form or JSON, which fields) is each provider's request
//! parsing.

use std::marker::PhantomData;

use actix_web::dev::Payload;
use actix_web::http::StatusCode;
use actix_web::http::header::CONTENT_TYPE;
use actix_web::web::{self, Bytes, BytesMut};
use actix_web::{FromRequest, HttpRequest, HttpResponse};
use futures_util::StreamExt;
use futures_util::future::LocalBoxFuture;

/// The most an API body may be. Neither provider documents a limit; this
/// one is the sandbox's, far above any request Holdfast or the SDKs send.
pub const BODY_LIMIT: usize = 256 * 1024;

/// Past this much the rest of an oversized body is not read: the
/// connection is closed after the refusal.
const DRAIN_LIMIT: usize = 8 * 1024 * 1024;

/// How a provider refuses a request it cannot take.
pub(crate) trait Dialect: 'static {
    /// A 4xx in the provider's error shape: about `field` if one is named.
    fn refuse(status: StatusCode, message: &str, field: Option<&str>) -> HttpResponse;
    /// The provider's answer to a URL, or a method of it, that it does not
    /// serve.
    fn unknown_route(request: &HttpRequest) -> HttpResponse;
}

/// A refusal as an actix error (what extractors return).
pub(crate) fn refusal<D: Dialect>(
    status: StatusCode,
    message: &str,
    field: Option<&str>,
) -> actix_web::Error {
    actix_web::error::InternalError::from_response("refused", D::refuse(status, message, field))
        .into()
}

/// Install the provider's refusals on its scope: actix's extractors answer
/// in its shape, and so does every URL it does not serve.
pub(crate) fn rules<D: Dialect>(config: &mut web::ServiceConfig) {
    config
        .app_data(web::QueryConfig::default().error_handler(|error, _| {
            refusal::<D>(
                StatusCode::BAD_REQUEST,
                &format!("Invalid query parameters: {error}"),
                None,
            )
        }))
        .app_data(web::PathConfig::default().error_handler(|error, _| {
            refusal::<D>(
                StatusCode::NOT_FOUND,
                &format!("Invalid path: {error}"),
                None,
            )
        }))
        .app_data(
            web::JsonConfig::default()
                .limit(BODY_LIMIT)
                .error_handler(|error, _| {
                    refusal::<D>(
                        StatusCode::BAD_REQUEST,
                        &format!("Invalid JSON body: {error}"),
                        None,
                    )
                }),
        )
        .app_data(
            web::FormConfig::default()
                .limit(BODY_LIMIT)
                .error_handler(|error, _| {
                    refusal::<D>(
                        StatusCode::BAD_REQUEST,
                        &format!("Invalid form body: {error}"),
                        None,
                    )
                }),
        )
        .app_data(web::PayloadConfig::new(BODY_LIMIT))
        .default_service(web::to(|request: HttpRequest| async move {
            D::unknown_route(&request)
        }));
}

/// An API request's body, read whole, and its content type.
pub(crate) struct Body<D> {
    pub(crate) bytes: Bytes,
    pub(crate) content_type: Option<String>,
    dialect: PhantomData<D>,
}

/// The media type of a `Content-Type` value, lower-cased, without its
/// parameters.
pub(crate) fn media_type(content_type: Option<&str>) -> Option<String> {
    content_type.map(|value| {
        value
            .split(';')
            .next()
            .unwrap_or_default()
            .trim()
            .to_ascii_lowercase()
    })
}

impl<D: Dialect> FromRequest for Body<D> {
    type Error = actix_web::Error;
    type Future = LocalBoxFuture<'static, Result<Self, Self::Error>>;

    fn from_request(request: &HttpRequest, payload: &mut Payload) -> Self::Future {
        let content_type = request
            .headers()
            .get(CONTENT_TYPE)
            .map(|value| String::from_utf8_lossy(value.as_bytes()).into_owned());
        let mut payload = payload.take();
        Box::pin(async move {
            let mut bytes = BytesMut::new();
            let mut seen = 0usize;
            while let Some(chunk) = payload.next().await {
                let Ok(chunk) = chunk else {
                    return Err(refusal::<D>(
                        StatusCode::BAD_REQUEST,
                        "The request body could not be read.",
                        None,
                    ));
                };
                seen = seen.saturating_add(chunk.len());
                if seen <= BODY_LIMIT {
                    bytes.extend_from_slice(&chunk);
                } else if seen > DRAIN_LIMIT {
                    break;
                }
            }
            if seen > BODY_LIMIT {
                return Err(refusal::<D>(
                    StatusCode::PAYLOAD_TOO_LARGE,
                    &format!(
                        "The request body is larger than the sandbox takes ({BODY_LIMIT} bytes)."
                    ),
                    None,
                ));
            }
            Ok(Body {
                bytes: bytes.freeze(),
                content_type,
                dialect: PhantomData,
            })
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn media_types_lose_their_parameters_and_case() {
        assert_eq!(
            media_type(Some("Application/JSON; charset=utf-8")).as_deref(),
            Some("application/json")
        );
        assert_eq!(media_type(Some("")).as_deref(), Some(""));
        assert_eq!(media_type(None), None);
    }
}
