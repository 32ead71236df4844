//! Razorpay's side of the wire: its payment, refund and error entities as
//! Holdfast reads them, and the events a webhook carries.

use serde::Deserialize;
use serde_json::Value;
use uuid::Uuid;

use crate::payments::{
    PaymentStatus, ProviderError, ProviderEvent, ProviderKind, ProviderPayment, RefundStatus,
    RefundView, well_formed_id,
};

/// How long Razorpay keeps asking a bank that did not answer about a
/// payment, which it may then authorise late: "Razorpay polls the APIs
/// intermittently for 5 days" (razorpay.com/docs/payments/payments/
/// capture-settings/api; the late-authorisation page says 3, the longer is
/// taken). Until then a payment that timed out is not over.
pub const LATE_AUTHORISATION_SECONDS: i64 = 5 * 24 * 3600;

/// A payment entity as Razorpay sends it.
#[derive(Debug, Clone, Deserialize)]
pub(super) struct Payment {
    pub id: String,
    pub order_id: Option<String>,
    amount: i64,
    currency: String,
    /// created, authorized, captured, refunded or failed
    status: String,
    /// card, netbanking, wallet, emi, upi
    #[serde(default)]
    method: Option<String>,
    /// why it failed (`payment_timed_out`: the bank did not answer)
    #[serde(default)]
    error_reason: Option<String>,
    /// unix seconds
    #[serde(default)]
    created_at: Option<i64>,
}

impl Payment {
    pub(super) fn view(&self, order_hint: Option<Uuid>) -> ProviderPayment {
        ProviderPayment {
            provider: ProviderKind::Razorpay,
            payment_ref: self.id.clone(),
            page_id: self.order_id.clone(),
            amount_minor: self.amount,
            currency: self.currency.to_ascii_lowercase(),
            status: self.status(chrono::Utc::now().timestamp()),
            order_hint,
            method: self
                .method
                .clone()
                .filter(|m| crate::payments::well_formed_method(m)),
        }
    }

    /// Where the payment stands at `now` (unix seconds). A payment still
    /// `created` waits for its bank; one that `failed` because the bank did
    /// not answer in time may be authorised late while Razorpay keeps
    /// asking (razorpay.com/docs/payments/payments/late-authorisation: after
    /// 10 minutes without an answer it is marked failed, then the bank is
    /// polled): both are settling, not over.
    fn status(&self, now: i64) -> PaymentStatus {
        match self.status.as_str() {
            "captured" => PaymentStatus::Captured,
            "authorized" => PaymentStatus::Authorized,
            "refunded" => PaymentStatus::Refunded,
            "failed" if self.may_authorise_late(now) => PaymentStatus::Pending,
            "failed" => PaymentStatus::Failed,
            _ => PaymentStatus::Pending,
        }
    }

    fn may_authorise_late(&self, now: i64) -> bool {
        self.error_reason.as_deref() == Some("payment_timed_out")
            && self
                .created_at
                .is_some_and(|at| now.saturating_sub(at) < LATE_AUTHORISATION_SECONDS)
    }
}

/// A refund entity as Razorpay sends it.
#[derive(Debug, Clone, Deserialize)]
pub(super) struct Refund {
    id: String,
    payment_id: String,
    amount: i64,
    /// pending, processed or failed
    status: Option<String>,
}

impl Refund {
    pub(super) fn view(&self) -> RefundView {
        RefundView {
            id: self.id.clone(),
            payment_ref: self.payment_id.clone(),
            amount_minor: self.amount,
            status: match self.status.as_deref() {
                Some("processed") => RefundStatus::Succeeded,
                Some("failed") => RefundStatus::Failed,
                _ => RefundStatus::Pending,
            },
        }
    }
}

#[derive(Debug, Deserialize)]
pub(super) struct Collection<T> {
    pub items: Vec<T>,
}

#[derive(Debug, Deserialize)]
pub(super) struct ErrorBody {
    pub error: ErrorDetail,
}

#[derive(Debug, Deserialize)]
pub(super) struct ErrorDetail {
    pub code: Option<String>,
    pub description: Option<String>,
}

/// Razorpay ids are letters, digits and `_` (`order_…`, `pay_…`, `rfnd_…`):
/// anything else never reaches a URL.
pub(super) fn checked_id<'a>(id: &'a str, what: &str) -> Result<&'a str, ProviderError> {
    if !id.is_empty()
        && id.len() <= 64
        && id.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_')
    {
        Ok(id)
    } else {
        Err(ProviderError::Unexpected(format!("not a {what} id")))
    }
}

/// What a verified Razorpay event asks for. Pure: no I/O.
pub fn parse_event(body: &[u8]) -> Result<(String, ProviderEvent), &'static str> {
    let Ok(event) = serde_json::from_slice::<Value>(body) else {
        return Err("the body is not a Razorpay event");
    };
    let Some(kind) = event["event"].as_str().filter(|k| k.len() <= 100) else {
        return Err("the event has no type");
    };
    let payload = &event["payload"];
    let payment = || -> Option<ProviderPayment> {
        let payment: Payment = serde_json::from_value(payload["payment"]["entity"].clone()).ok()?;
        let hint = payload["order"]["entity"]["notes"]["holdfast_order_id"]
            .as_str()
            .and_then(|id| Uuid::parse_str(id).ok());
        Some(payment.view(hint))
    };
    let action = match kind {
        "payment.captured" | "order.paid" | "payment.authorized" => match payment() {
            Some(payment) if payment.well_formed() => ProviderEvent::Payment(payment),
            Some(_) => ProviderEvent::Ignore("malformed payment ids"),
            None => ProviderEvent::Ignore("no payment in the event"),
        },
        // One failed attempt does not end a Razorpay order: the shopper may
        // try another card until the payment window closes, and then the
        // sweeper gives the units back. One whose bank did not answer may
        // still be authorised late: it settles.
        "payment.failed" => match payment() {
            Some(payment) if payment.status == PaymentStatus::Pending && payment.well_formed() => {
                ProviderEvent::Payment(payment)
            }
            _ => ProviderEvent::Ignore("another attempt can still succeed"),
        },
        "refund.created" | "refund.processed" | "refund.failed" => {
            match serde_json::from_value::<Refund>(payload["refund"]["entity"].clone()) {
                Ok(refund) if well_formed_id(&refund.id) && well_formed_id(&refund.payment_id) => {
                    ProviderEvent::Refund(refund.view())
                }
                _ => ProviderEvent::Ignore("no well-formed refund in the event"),
            }
        }
        _ => ProviderEvent::Ignore("event type not used"),
    };
    Ok((kind.to_owned(), action))
}
