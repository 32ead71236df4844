//! One module per provider, and the sandbox that stands in for them. No
//! database access here: adapters turn our requests into the provider's wire
//! types and back.

pub mod razorpay;
pub mod sandbox;
pub mod stripe;

/// Why a provider call failed, without anything secret in it.
#[derive(Debug, thiserror::Error)]
pub enum ProviderError {
    /// The provider refused the request (4xx): retrying will not help.
    #[error("the provider refused the request ({status}): {message}")]
    Refused { status: u16, message: String },
    /// The provider could not be reached or failed (5xx, network): retry.
    #[error("the provider is unavailable: {0}")]
    Unavailable(String),
    /// The provider answered with something we cannot read.
    #[error("unexpected answer from the provider: {0}")]
    Unexpected(String),
}

impl ProviderError {
    /// Whether trying again later may succeed.
    pub fn is_transient(&self) -> bool {
        matches!(self, ProviderError::Unavailable(_))
    }
}

/// Where a refund stands at the provider.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RefundState {
    /// The money is on its way back: close the job.
    Settled,
    /// Accepted, not finished: ask again later (same key, same refund).
    Pending,
    /// The provider gave up: try again with a new key generation.
    Failed,
}
