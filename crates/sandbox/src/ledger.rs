//! Money that moved at the sandbox, and the webhooks it sent, for ledgers
//! and tests. Each provider keeps its own [`Ledger`] in its state, so a
//! change and its record are made under one lock.

use serde::Serialize;

/// Money that moved at one provider, and the webhooks it sent.
#[derive(Debug, Clone, Default, Serialize)]
pub struct Ledger {
    pub charges: Vec<Charge>,
    pub refunds: Vec<RefundRecord>,
    pub deliveries: Vec<Delivery>,
}

/// Money the provider took: a captured payment (an authorisation is not
/// money until it is captured).
#[derive(Debug, Clone, Serialize)]
pub struct Charge {
    pub payment_intent: String,
    pub session_id: String,
    pub amount: i64,
    pub currency: String,
    /// What the payment carries for the merchant's dashboard (Stripe's
    /// PaymentIntent metadata, Razorpay's order notes).
    pub metadata: serde_json::Value,
}

/// Money given back, or on its way.
#[derive(Debug, Clone, Serialize)]
pub struct RefundRecord {
    pub id: String,
    pub payment_intent: String,
    pub amount: i64,
    pub idempotency_key: Option<String>,
    /// pending, then succeeded or failed (Stripe's words; Razorpay's
    /// processed is succeeded here)
    pub status: &'static str,
    /// Made by the provider itself (Razorpay returning an authorisation
    /// nobody captured, or a second payment on a paid order), not asked for.
    pub by_provider: bool,
}

impl Ledger {
    /// Refunds that gave (or are giving) money back: not the failed ones.
    pub fn refunds_standing(&self) -> impl Iterator<Item = &RefundRecord> {
        self.refunds.iter().filter(|r| r.status != "failed")
    }
}

/// One attempt to hand an event to the shop.
#[derive(Debug, Clone, Serialize)]
pub struct Delivery {
    pub event_id: String,
    pub event_type: String,
    /// The shop's answer (`None`: no answer, e.g. the connection failed).
    pub status: Option<u16>,
    pub attempt: u32,
    /// Who carried it.
    pub via: Carrier,
}

/// How an event reached the shop.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Carrier {
    /// The sandbox posted it to the configured webhook URL.
    WebhookEndpoint,
    /// A `stripe listen` session forwarded it, and reported the shop's
    /// status back over its websocket.
    StripeCli,
}
