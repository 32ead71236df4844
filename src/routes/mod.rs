//! Thin handlers: parse into domain types, call, render. A folder per
//! audience (`shop`, `admin`, `api`), and one per feature that only one
//! kind has (`seats`, `tables`), holding its shop and admin pages.

pub mod admin;
pub mod api;
pub(crate) mod api_error;
pub mod edge;
pub mod errors;
pub mod health;
mod render;
pub mod seats;
pub mod security;
pub mod shop;
pub mod tables;
pub mod webhooks;

use actix_web::http::StatusCode;
use actix_web::{HttpResponse, ResponseError};

pub use health::{healthz, metrics};
pub use security::{CONTENT_SECURITY_POLICY, bad_form, csp_report, not_found, security_headers};
pub use webhooks::webhook;

/// What a handler can fail with. Shoppers see a plain page; the cause of a
/// 500 goes to the log, never to the page.
#[derive(Debug)]
pub struct ShopError {
    status: StatusCode,
    message: String,
    cause: Option<anyhow::Error>,
    /// The database was away for longer than the request waited: the
    /// shopper gets the "one moment" page ([`edge::one_moment`]).
    away: bool,
}

impl ShopError {
    /// The words the shopper is shown.
    pub fn message(&self) -> &str {
        &self.message
    }

    pub fn bad_request(message: &str) -> Self {
        Self {
            status: StatusCode::BAD_REQUEST,
            message: message.to_owned(),
            cause: None,
            away: false,
        }
    }

    /// The request clashes with what is there (a limit, a sold-out line).
    pub fn conflict(message: &str) -> Self {
        Self {
            status: StatusCode::CONFLICT,
            message: message.to_owned(),
            cause: None,
            away: false,
        }
    }

    /// Something this member's role may not do.
    pub fn forbidden(message: &str) -> Self {
        Self {
            status: StatusCode::FORBIDDEN,
            message: message.to_owned(),
            cause: None,
            away: false,
        }
    }

    pub fn not_found(message: &str) -> Self {
        Self {
            status: StatusCode::NOT_FOUND,
            message: message.to_owned(),
            cause: None,
            away: false,
        }
    }

    /// A body larger than anything the shop accepts.
    pub fn too_large(message: &str) -> Self {
        Self {
            status: StatusCode::PAYLOAD_TOO_LARGE,
            message: message.to_owned(),
            cause: None,
            away: false,
        }
    }

    /// Too much at once: a 503 whose message is safe to show.
    pub fn busy(message: &str) -> Self {
        Self {
            status: StatusCode::SERVICE_UNAVAILABLE,
            message: message.to_owned(),
            cause: None,
            away: false,
        }
    }

    pub fn unavailable(cause: String) -> Self {
        Self {
            status: StatusCode::SERVICE_UNAVAILABLE,
            message: "the payment provider did not answer; please refresh in a moment".into(),
            cause: Some(anyhow::anyhow!(cause)),
            away: false,
        }
    }

    pub fn internal(cause: anyhow::Error) -> Self {
        Self {
            status: StatusCode::INTERNAL_SERVER_ERROR,
            message: "something went wrong on our side; nothing was charged twice".into(),
            cause: Some(cause),
            away: false,
        }
    }
}

impl std::fmt::Display for ShopError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.message)
    }
}

/// Whether the database is away (down, restarting, failing over, out of
/// connections) rather than refusing this request: the shopper should try
/// again. The same judgement the retries make ([`crate::retry`]).
pub fn database_away(error: &sqlx::Error) -> bool {
    matches!(
        crate::retry::classify(error),
        crate::retry::Failure::Transient(_)
    ) || matches!(error, sqlx::Error::PoolClosed)
}

impl From<sqlx::Error> for ShopError {
    fn from(error: sqlx::Error) -> Self {
        let unavailable = database_away(&error);
        let mut shop = Self::internal(error.into());
        if unavailable {
            shop.status = StatusCode::SERVICE_UNAVAILABLE;
            shop.message = "the shop is busy or restarting; please try again in a moment".into();
            shop.away = true;
        }
        shop
    }
}

impl From<crate::checkout::CheckoutError> for ShopError {
    fn from(error: crate::checkout::CheckoutError) -> Self {
        match error {
            crate::checkout::CheckoutError::InvalidInput(message) => Self::bad_request(&message),
            crate::checkout::CheckoutError::Database(error)
            | crate::checkout::CheckoutError::Inventory(
                crate::inventory::InventoryError::Database(error),
            ) => error.into(),
            other => Self::internal(other.into()),
        }
    }
}

/// A message as a shopper reads it: a sentence, its first letter a
/// capital and its end a full stop (the messages are written to be read
/// in logs and the API too, some starting in lower case).
pub fn sentence(message: &str) -> String {
    let message = message.trim();
    let mut chars = message.chars();
    let mut said: String = match chars.next() {
        Some(first) => first.to_uppercase().chain(chars).collect(),
        None => return String::new(),
    };
    if !said.ends_with(['.', '!', '?', ':']) {
        said.push('.');
    }
    said
}

impl ResponseError for ShopError {
    fn status_code(&self) -> StatusCode {
        self.status
    }

    fn error_response(&self) -> HttpResponse {
        if self.away {
            // said once per spell by the retries, not once per request
            let mut response = HttpResponse::ServiceUnavailable().finish();
            response.headers_mut().insert(
                actix_web::http::header::HeaderName::from_static(edge::ONE_MOMENT_MARK),
                actix_web::http::header::HeaderValue::from_static("1"),
            );
            return response;
        }
        if let Some(cause) = &self.cause {
            tracing::error!(
                status = self.status.as_u16(),
                cause = format!("{cause:#}"),
                "request failed"
            );
        }
        let headline = match self.status.as_u16() {
            400 => "That did not work",
            404 => "Not found",
            409 => "That cannot be done now",
            503 => "Please try again in a moment",
            _ => "Sorry",
        };
        shop::message(
            self.status,
            headline,
            &sentence(&self.message),
            "/",
            "Back to the shop",
        )
        .unwrap_or_else(|_| HttpResponse::build(self.status).body(self.message.clone()))
    }
}
