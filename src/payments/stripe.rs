//! Stripe, through async-stripe (1.0 line). Create, retrieve and expire
//! Checkout Sessions; create refunds with an idempotency key. The API base
//! comes from configuration, so the same code talks to Stripe and to the
//! sandbox.

use std::collections::HashMap;
use std::str::FromStr;

use chrono::{DateTime, TimeZone, Utc};
use stripe::{Client, ClientBuilder, RequestStrategy, StripeError, StripeRequest};
use stripe_checkout::checkout_session::{
    CreateCheckoutSession, CreateCheckoutSessionLineItems, CreateCheckoutSessionLineItemsPriceData,
    ExpireCheckoutSession, ProductData, RetrieveCheckoutSession,
};
use stripe_checkout::{CheckoutSession, CheckoutSessionMode, CheckoutSessionPaymentStatus};
use stripe_core::refund::CreateRefund;
use stripe_types::{Currency, Expandable};

use super::ProviderError;
use crate::configuration::Secret;

/// Where Stripe is and how to sign in.
#[derive(Debug, Clone)]
pub struct StripeSettings {
    pub secret_key: Secret,
    /// `https://api.stripe.com/`, or the sandbox's `http://…/stripe/`.
    pub api_base: String,
}

/// A line of a Checkout Session.
#[derive(Debug, Clone)]
pub struct SessionLine {
    pub name: String,
    pub qty: u64,
    pub unit_amount_minor: i64,
}

/// What Holdfast asks Stripe for at checkout start.
#[derive(Debug, Clone)]
pub struct SessionRequest {
    pub order_id: String,
    pub currency: String,
    pub lines: Vec<SessionLine>,
    pub customer_email: String,
    pub success_url: String,
    pub cancel_url: String,
    pub expires_at: DateTime<Utc>,
    /// Derived from the order, so a retried create returns the same session.
    pub idempotency_key: String,
}

/// A Checkout Session as Holdfast needs it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SessionView {
    pub id: String,
    pub url: Option<String>,
    pub client_reference_id: Option<String>,
    pub paid: bool,
    pub payment_intent: Option<String>,
    pub expires_at: DateTime<Utc>,
    /// open, complete or expired
    pub status: Option<String>,
}

#[derive(Clone)]
pub struct StripeAdapter {
    client: Client,
}

impl std::fmt::Debug for StripeAdapter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("StripeAdapter { .. }")
    }
}

fn classify(error: StripeError) -> ProviderError {
    match error {
        StripeError::Stripe(errors, status) if (400..500).contains(&status) => {
            ProviderError::Refused {
                status,
                message: errors.message.unwrap_or_else(|| "no message".into()),
            }
        }
        StripeError::Stripe(_, status) => ProviderError::Unavailable(format!("status {status}")),
        StripeError::JSONDeserialize(message) => ProviderError::Unexpected(message),
        StripeError::ClientError(message) => ProviderError::Unavailable(message),
        StripeError::Timeout => ProviderError::Unavailable("timed out".into()),
        other => ProviderError::Unexpected(other.to_string()),
    }
}

fn view(session: CheckoutSession) -> SessionView {
    SessionView {
        id: session.id.to_string(),
        url: session.url,
        client_reference_id: session.client_reference_id,
        paid: matches!(
            session.payment_status,
            CheckoutSessionPaymentStatus::Paid | CheckoutSessionPaymentStatus::NoPaymentRequired
        ),
        payment_intent: session.payment_intent.map(|intent| match intent {
            Expandable::Id(id) => id.to_string(),
            Expandable::Object(object) => object.id.to_string(),
        }),
        expires_at: Utc
            .timestamp_opt(session.expires_at, 0)
            .single()
            .unwrap_or_else(Utc::now),
        status: session.status.map(|status| status.to_string()),
    }
}

fn idempotency(key: &str) -> Result<RequestStrategy, ProviderError> {
    stripe::IdempotencyKey::new(key)
        .map(RequestStrategy::Idempotent)
        .map_err(|e| ProviderError::Unexpected(format!("bad idempotency key: {e}")))
}

impl StripeAdapter {
    pub fn new(settings: &StripeSettings) -> Result<Self, ProviderError> {
        let client = ClientBuilder::new(settings.secret_key.expose())
            .url(settings.api_base.clone())
            // well under the outbox's two-minute lease, so a hung call can
            // never run concurrently with its own retry
            .timeout(std::time::Duration::from_secs(20))
            .build()
            .map_err(|e| {
                ProviderError::Unexpected(format!("cannot build the Stripe client: {e}"))
            })?;
        Ok(Self { client })
    }

    pub async fn create_session(
        &self,
        request: &SessionRequest,
    ) -> Result<SessionView, ProviderError> {
        let currency = Currency::from_str(&request.currency).unwrap_or_else(|never| match never {});
        let line_items: Vec<CreateCheckoutSessionLineItems> = request
            .lines
            .iter()
            .map(|line| {
                let mut price = CreateCheckoutSessionLineItemsPriceData::new(currency.clone());
                price.unit_amount = Some(line.unit_amount_minor);
                price.product_data = Some(ProductData::new(line.name.clone()));
                let mut item = CreateCheckoutSessionLineItems::new();
                item.price_data = Some(price);
                item.quantity = Some(line.qty);
                item
            })
            .collect();
        let metadata = HashMap::from([("order_id".to_owned(), request.order_id.clone())]);
        let session = CreateCheckoutSession::new()
            .mode(CheckoutSessionMode::Payment)
            .client_reference_id(request.order_id.clone())
            .customer_email(request.customer_email.clone())
            .success_url(request.success_url.clone())
            .cancel_url(request.cancel_url.clone())
            .expires_at(request.expires_at.timestamp())
            .line_items(line_items)
            .metadata(metadata)
            .customize()
            .request_strategy(idempotency(&request.idempotency_key)?)
            .send(&self.client)
            .await
            .map_err(classify)?;
        Ok(view(session))
    }

    pub async fn retrieve_session(&self, id: &str) -> Result<SessionView, ProviderError> {
        RetrieveCheckoutSession::new(id)
            .send(&self.client)
            .await
            .map(view)
            .map_err(classify)
    }

    pub async fn expire_session(&self, id: &str) -> Result<SessionView, ProviderError> {
        ExpireCheckoutSession::new(id)
            .send(&self.client)
            .await
            .map(view)
            .map_err(classify)
    }

    /// Refund a payment in full. The key comes from our refund job, so a
    /// retried refund is executed once; asking again with the same key also
    /// tells how the refund is doing.
    pub async fn refund(
        &self,
        payment_intent: &str,
        idempotency_key: &str,
    ) -> Result<(String, super::RefundState), ProviderError> {
        let refund = CreateRefund::new()
            .payment_intent(payment_intent.to_owned())
            .customize()
            .request_strategy(idempotency(idempotency_key)?)
            .send(&self.client)
            .await
            .map_err(classify)?;
        let state = match refund.status.as_deref() {
            Some("succeeded") => super::RefundState::Settled,
            Some("failed") | Some("canceled") => super::RefundState::Failed,
            _ => super::RefundState::Pending,
        };
        Ok((refund.id.to_string(), state))
    }
}
