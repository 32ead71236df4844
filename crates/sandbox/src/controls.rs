//! The test controls both halves share (under each provider's `/_sandbox`):
//! a payment's delivery mode, settling what is pending, how soon refunds
//! finish by themselves.

use std::time::Duration;

use actix_web::HttpResponse;

use crate::delivery::DeliveryMode;

/// `?mode=…` of the delivery test control.
#[derive(Debug, serde::Deserialize)]
pub(crate) struct DeliveryQuery {
    pub(crate) mode: DeliveryMode,
}

/// `?outcome=…` of the settle test controls.
#[derive(Debug, serde::Deserialize)]
pub(crate) struct OutcomeQuery {
    outcome: String,
}

impl OutcomeQuery {
    /// Settle something pending as the outcome says: the provider's word
    /// for success (`succeeded` at Stripe, `processed` at Razorpay) or
    /// `failed`. 204 when done, 409 when there was nothing to settle.
    pub(crate) fn settle(
        &self,
        success: &str,
        settle: impl FnOnce(bool) -> Result<(), String>,
    ) -> HttpResponse {
        let succeeded = match self.outcome.as_str() {
            "failed" => false,
            word if word == success => true,
            _ => {
                return HttpResponse::BadRequest().body(format!("outcome is {success} or failed"));
            }
        };
        match settle(succeeded) {
            Ok(()) => HttpResponse::NoContent().finish(),
            Err(message) => HttpResponse::Conflict().body(message),
        }
    }
}

/// `?after_ms=N` of the refunds test control (none: never by itself).
#[derive(Debug, serde::Deserialize)]
pub(crate) struct AutoQuery {
    after_ms: Option<u64>,
}

impl AutoQuery {
    pub(crate) fn after(&self) -> Option<Duration> {
        self.after_ms.map(Duration::from_millis)
    }
}

/// Run `then` once `after` has passed, as a bank answers a moment later
/// (nothing when `after` is `None`: a test settles it by hand).
pub(crate) fn later(after: Option<Duration>, then: impl FnOnce() + Send + 'static) {
    if let Some(after) = after {
        tokio::spawn(async move {
            tokio::time::sleep(after).await;
            then();
        });
    }
}
