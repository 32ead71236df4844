//! Razorpay's objects and errors as the sandbox shows them: orders,
//! payments and refunds with the fields of Razorpay's API reference
//! (razorpay.com/docs/api/orders, /payments, /refunds), and Razorpay's
//! error shape (razorpay.com/docs/errors): `{"error":{"code":
//! "BAD_REQUEST_ERROR","description","field","source","step","reason",
//! "metadata"}}`, every key present.

use std::collections::HashMap;

use actix_web::http::StatusCode;
use actix_web::{HttpRequest, HttpResponse};
use serde_json::{Value, json};

use crate::delivery::Pacing;
use crate::dialect::{Body, Dialect};

/// When a payment on an order is captured.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Capture {
    /// By Razorpay, if authorised within this many minutes of the order.
    Automatic { window_minutes: i64 },
    /// By the merchant's capture call (the account's setting here).
    Manual,
}

#[derive(Debug, Clone)]
pub(crate) struct Order {
    pub(crate) id: String,
    pub(crate) amount: i64,
    pub(crate) currency: String,
    pub(crate) receipt: Option<String>,
    pub(crate) notes: Value,
    pub(crate) created_at: i64,
    pub(crate) capture: Capture,
    /// created, attempted or paid
    pub(crate) status: &'static str,
    pub(crate) payments: Vec<String>,
    /// how its webhooks go out (test controls)
    pub(crate) pacing: Pacing,
}

impl Order {
    pub(crate) fn amount_paid(&self, payments: &HashMap<String, Payment>) -> i64 {
        self.payments
            .iter()
            .filter_map(|id| payments.get(id))
            .filter(|p| p.captured)
            .map(|p| p.amount)
            .fold(0, i64::saturating_add)
    }

    pub(crate) fn to_json(&self, payments: &HashMap<String, Payment>) -> Value {
        let paid = self.amount_paid(payments).min(self.amount);
        json!({
            "id": self.id, "entity": "order", "amount": self.amount, "amount_paid": paid,
            "amount_due": self.amount.saturating_sub(paid), "currency": self.currency, "receipt": self.receipt,
            "offer_id": null, "status": self.status, "attempts": self.payments.len(),
            "notes": self.notes, "created_at": self.created_at,
        })
    }
}

/// The `error_reason` of a payment whose bank did not answer in time:
/// Razorpay marks it failed after 10 minutes and keeps polling the bank,
/// which may still authorise it (razorpay.com/docs/payments/payments/
/// late-authorisation).
pub(crate) const TIMED_OUT: &str = "payment_timed_out";

#[derive(Debug, Clone)]
pub(crate) struct Payment {
    pub(crate) id: String,
    pub(crate) order_id: String,
    pub(crate) amount: i64,
    pub(crate) currency: String,
    /// authorized, captured, refunded or failed
    pub(crate) status: &'static str,
    pub(crate) captured: bool,
    pub(crate) amount_refunded: i64,
    pub(crate) created_at: i64,
    pub(crate) error: Option<(&'static str, &'static str)>,
    /// card, netbanking, upi…
    pub(crate) method: &'static str,
}

impl Payment {
    pub(crate) fn to_json(&self) -> Value {
        let refund_status = match self.amount_refunded {
            0 => Value::Null,
            n if n >= self.amount => json!("full"),
            _ => json!("partial"),
        };
        json!({
            "id": self.id, "entity": "payment", "amount": self.amount, "currency": self.currency,
            "status": self.status, "order_id": self.order_id, "invoice_id": null,
            "international": false, "method": self.method, "amount_refunded": self.amount_refunded,
            "refund_status": refund_status, "captured": self.captured, "description": null,
            "card_id": null, "bank": null, "wallet": null, "vpa": null,
            "email": "shopper@example.com", "contact": "+919999999999", "notes": [],
            "fee": null, "tax": null,
            "error_code": self.error.map(|(_, reason)| if reason == TIMED_OUT { "GATEWAY_ERROR" } else { "BAD_REQUEST_ERROR" }),
            "error_description": self.error.map(|(description, _)| description),
            "error_source": self.error.map(|(_, reason)| if reason == TIMED_OUT { "bank" } else { "customer" }),
            "error_step": self.error.map(|_| "payment_authorization"),
            "error_reason": self.error.map(|(_, reason)| reason),
            "acquirer_data": {}, "created_at": self.created_at,
        })
    }

    pub(crate) fn left(&self) -> i64 {
        self.amount.saturating_sub(self.amount_refunded)
    }
}

#[derive(Debug, Clone)]
pub(crate) struct Refund {
    pub(crate) id: String,
    pub(crate) payment_id: String,
    pub(crate) order_id: String,
    pub(crate) amount: i64,
    pub(crate) currency: String,
    pub(crate) notes: Value,
    pub(crate) receipt: Option<String>,
    pub(crate) speed: String,
    /// pending, processed or failed
    pub(crate) status: &'static str,
    pub(crate) created_at: i64,
}

impl Refund {
    pub(crate) fn to_json(&self) -> Value {
        json!({
            "id": self.id, "entity": "refund", "amount": self.amount, "currency": self.currency,
            "payment_id": self.payment_id, "notes": self.notes, "receipt": self.receipt,
            "acquirer_data": { "arn": null }, "created_at": self.created_at, "batch_id": null,
            "status": self.status, "speed_processed": self.speed, "speed_requested": self.speed,
        })
    }
}

/// A refusal in Razorpay's words.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct RazorpayError {
    pub(crate) status: u16,
    pub(crate) description: String,
    pub(crate) field: Option<String>,
    /// A request whose input Razorpay refuses (`business`,
    /// `payment_initiation`, `input_validation_failed`, as its API answers
    /// them, razorpay.com/docs/api/orders/create), or another refusal
    /// (`NA`).
    pub(crate) validation: bool,
}

impl RazorpayError {
    /// 400: input Razorpay does not take.
    pub(crate) fn invalid(description: impl Into<String>, field: Option<&str>) -> Self {
        Self {
            status: 400,
            description: description.into(),
            field: field.map(str::to_owned),
            validation: true,
        }
    }

    /// Any other refusal (401 wrong keys, 404 no such URL, 409 in flight).
    pub(crate) fn other(status: StatusCode, description: impl Into<String>) -> Self {
        Self {
            status: status.as_u16(),
            description: description.into(),
            field: None,
            validation: false,
        }
    }

    /// Razorpay's answer to an id it does not know: 400, "does not exist".
    pub(crate) fn unknown_id() -> Self {
        Self::invalid("The id provided does not exist", Some("id"))
    }

    pub(crate) fn unauthorised() -> Self {
        Self::other(StatusCode::UNAUTHORIZED, "Authentication failed")
    }

    pub(crate) fn status(&self) -> StatusCode {
        StatusCode::from_u16(self.status).unwrap_or(StatusCode::BAD_REQUEST)
    }

    pub(crate) fn body(&self) -> Value {
        let (source, step, reason) = if self.validation {
            ("business", "payment_initiation", "input_validation_failed")
        } else {
            ("NA", "NA", "NA")
        };
        json!({
            "error": {
                "code": "BAD_REQUEST_ERROR",
                "description": self.description, "source": source, "step": step,
                "reason": reason, "field": self.field, "metadata": {},
            }
        })
    }

    pub(crate) fn response(&self) -> HttpResponse {
        HttpResponse::build(self.status()).json(self.body())
    }
}

/// Razorpay's words for requests the sandbox cannot read.
pub(crate) struct RazorpayDialect;

/// A request's body as Razorpay's handlers (the API's and the hosted
/// page's) take it: refused in Razorpay's words when it cannot be read.
pub(crate) type RazorpayBody = Body<RazorpayDialect>;

impl Dialect for RazorpayDialect {
    fn refuse(status: StatusCode, message: &str, field: Option<&str>) -> HttpResponse {
        RazorpayError {
            status: status.as_u16(),
            description: message.to_owned(),
            field: field.map(str::to_owned),
            validation: status == StatusCode::BAD_REQUEST,
        }
        .response()
    }

    /// Razorpay answers a URL it does not serve with a 404 in its shape
    /// (razorpay.com/docs/errors).
    fn unknown_route(_: &HttpRequest) -> HttpResponse {
        RazorpayError::other(
            StatusCode::NOT_FOUND,
            "The requested URL was not found on the server.",
        )
        .response()
    }
}
