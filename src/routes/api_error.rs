//! The API's one error: its code in the one table ([`ErrorCode`]) and its
//! JSON body (`{"error": {"code", "message", "doc"}}`), for every handler
//! of the API wherever it lives (`routes/api/`, and the API pages of a
//! feature's folder, `routes/seats/api.rs`, `routes/tables/api.rs`).

use actix_web::http::StatusCode;
use actix_web::{HttpResponse, ResponseError};
use serde::Serialize;

use crate::routes::errors::ErrorCode;

/// An API error: its code in the one table ([`ErrorCode`]: the HTTP
/// status, the stable name, its section of docs/errors.md) and words for a
/// person.
#[derive(Debug)]
pub struct ApiError {
    pub status: StatusCode,
    pub code: ErrorCode,
    pub message: String,
    /// A seat line refused: the seats taken and the seats offered instead.
    pub seats: Option<serde_json::Value>,
}

#[derive(Serialize, utoipa::ToSchema)]
pub struct ErrorBody {
    error: ErrorDetail,
}

#[derive(Serialize, utoipa::ToSchema)]
pub struct ErrorDetail {
    /// Stable: a client may match on it.
    code: String,
    message: String,
    /// Where docs/errors.md explains the code (`docs/errors.md#sold_out`).
    doc: String,
    /// `seats_taken`, `unknown_seats`, `not_together`: the line's section,
    /// the seats taken or unknown, and others offered instead.
    #[serde(skip_serializing_if = "Option::is_none")]
    seats: Option<SeatsRefused>,
}

/// A seat line refused (`error.seats`).
#[derive(Serialize, utoipa::ToSchema)]
pub struct SeatsRefused {
    product_id: String,
    /// The seats taken or unknown, as the plan labels them.
    seats: Vec<String>,
    /// Other seats to ask for instead, each set as many as were asked
    /// for, the nearest first (not together: the best split).
    offers: Vec<Vec<String>>,
    /// Whether the split offered may be sold (`"together": false`).
    split_allowed: bool,
}

impl ApiError {
    /// `code`, said in particular words.
    pub fn new(code: ErrorCode, message: impl Into<String>) -> Self {
        Self {
            status: code.status(),
            code,
            message: message.into(),
            seats: None,
        }
    }

    /// `code`, in the table's words.
    pub fn of(code: ErrorCode) -> Self {
        Self::new(code, code.message())
    }

    pub fn body(&self) -> serde_json::Value {
        let mut body = serde_json::json!({ "error": {
            "code": self.code.name(),
            "message": self.message,
            "doc": self.code.doc(),
        } });
        if let Some(seats) = &self.seats {
            body["error"]["seats"] = seats.clone();
        }
        body
    }
}

impl std::fmt::Display for ApiError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {}", self.code.name(), self.message)
    }
}

impl ResponseError for ApiError {
    fn status_code(&self) -> StatusCode {
        self.status
    }

    fn error_response(&self) -> HttpResponse {
        HttpResponse::build(self.status).json(self.body())
    }
}

impl From<sqlx::Error> for ApiError {
    fn from(error: sqlx::Error) -> Self {
        tracing::error!(cause = %error, "api request failed");
        if crate::routes::database_away(&error) {
            return ApiError::of(ErrorCode::Unavailable);
        }
        ApiError::of(ErrorCode::Internal)
    }
}

impl From<crate::checkout::CheckoutError> for ApiError {
    fn from(error: crate::checkout::CheckoutError) -> Self {
        match error {
            crate::checkout::CheckoutError::InvalidInput(message) => {
                ApiError::new(ErrorCode::InvalidInput, message)
            }
            crate::checkout::CheckoutError::Database(error)
            | crate::checkout::CheckoutError::Inventory(
                crate::inventory::InventoryError::Database(error),
            ) => error.into(),
            other => {
                tracing::error!(cause = %other, "api checkout failed");
                ApiError::of(ErrorCode::Internal)
            }
        }
    }
}
