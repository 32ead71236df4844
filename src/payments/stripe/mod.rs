//! Stripe: Checkout Sessions as payment pages, refunds by id, signed
//! webhooks. Requests are built and answers read by async-stripe's 1.0
//! request crates; they travel over Holdfast's own HTTPS client
//! ([`StripeHttp`], one TLS setup for every provider), which pins the API
//! version async-stripe was generated for and reads Stripe's error codes.
//! The API base comes from configuration, so the same code talks to Stripe
//! and to the sandbox.

use std::collections::HashMap;
use std::str::FromStr;

use async_trait::async_trait;
use chrono::{TimeZone, Utc};
use stripe_checkout::checkout_session::{
    CreateCheckoutSession, CreateCheckoutSessionAdaptivePricing,
    CreateCheckoutSessionAllowedPaymentMethodTypes, CreateCheckoutSessionLineItems,
    CreateCheckoutSessionLineItemsPriceData, CreateCheckoutSessionPaymentIntentData,
    ExpireCheckoutSession, ProductData, RetrieveCheckoutSession,
};
use stripe_checkout::{CheckoutSession, CheckoutSessionMode};
use stripe_client_core::{
    IdempotencyKey, RequestBuilder, RequestStrategy, StripeMethod, StripeRequest as _,
};
use stripe_core::refund::{CreateRefund, ListRefund, RetrieveRefund};
use stripe_types::Currency;

mod settings;
pub mod signature;
mod wire;

pub use settings::StripeSettings;
pub use wire::{StripeHttp, api_version, parse_event, session_expiry};

use signature::{SignatureError, verify_stripe};
use wire::{SessionFacts, refund_view};

use super::{
    PageRequest, PageState, PaymentPage, PaymentProvider, PaymentStatus, ProviderError,
    ProviderKind, ProviderPayment, RefundRequest, RefundStatus, RefundView, ReturnError,
    ReturnParams, ReturnReport, WebhookDelivery, WebhookRequest,
};
use crate::configuration::Secret;

/// Stripe behind [`PaymentProvider`].
#[derive(Clone)]
pub struct StripeProvider {
    client: StripeHttp,
    webhook_secrets: Vec<Secret>,
    payment_methods: Vec<CreateCheckoutSessionAllowedPaymentMethodTypes>,
}

impl std::fmt::Debug for StripeProvider {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StripeProvider")
            .field("api_base", &self.client.api_base)
            .finish_non_exhaustive()
    }
}

fn idempotency(key: &str) -> Result<RequestStrategy, ProviderError> {
    IdempotencyKey::new(key)
        .map(RequestStrategy::Idempotent)
        .map_err(|e| ProviderError::Unexpected(format!("bad idempotency key: {e}")))
}

/// Everything a delivery is judged on before the database: the signature
/// (against the current and previous secrets), then the body.
pub fn accept(
    secrets: &[Secret],
    signature: Option<&str>,
    body: &[u8],
    now: i64,
) -> Result<WebhookDelivery, String> {
    verify_stripe(body, signature, secrets, now).map_err(|error| match error {
        SignatureError::NoSecret => "no webhook secret configured".to_owned(),
        other => other.to_string(),
    })?;
    parse_event(body).map_err(str::to_owned)
}

impl StripeProvider {
    pub fn new(settings: &StripeSettings, http: reqwest::Client) -> Result<Self, ProviderError> {
        let mut api_base = settings.api_base.clone();
        if !api_base.ends_with('/') {
            api_base.push('/');
        }
        let payment_methods = settings
            .payment_methods
            .iter()
            .map(|m| {
                CreateCheckoutSessionAllowedPaymentMethodTypes::from_str(m)
                    .unwrap_or_else(|never| match never {})
            })
            .collect();
        Ok(Self {
            client: StripeHttp {
                http,
                api_base,
                secret_key: settings.secret_key.clone(),
            },
            webhook_secrets: settings.webhook_secrets.clone(),
            payment_methods,
        })
    }

    /// The client async-stripe requests go through (tests and tools).
    pub fn client(&self) -> &StripeHttp {
        &self.client
    }

    pub async fn retrieve_session(&self, id: &str) -> Result<CheckoutSession, ProviderError> {
        RetrieveCheckoutSession::new(id).send(&self.client).await
    }

    /// `GET /v1/payment_intents/{id}`: a payment as Stripe has it now.
    pub async fn retrieve_intent(
        &self,
        id: &str,
    ) -> Result<stripe_shared::PaymentIntent, ProviderError> {
        if !id.starts_with("pi_") || !super::well_formed_id(id) || id.contains(['/', '?', '#']) {
            return Err(ProviderError::Unexpected("not a payment intent id".into()));
        }
        RequestBuilder::new(StripeMethod::Get, format!("/payment_intents/{id}"))
            .customize::<stripe_shared::PaymentIntent>()
            .send(&self.client)
            .await
    }
}

#[async_trait]
impl PaymentProvider for StripeProvider {
    fn kind(&self) -> ProviderKind {
        ProviderKind::Stripe
    }

    async fn open_page(&self, request: &PageRequest) -> Result<PaymentPage, ProviderError> {
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
                item.quantity = Some(u64::from(line.qty));
                item
            })
            .collect();
        let order_id = request.order_id.to_string();
        let metadata = HashMap::from([("order_id".to_owned(), order_id.clone())]);
        // the dashboard ties the payment (and its refunds) to the order
        let mut intent = CreateCheckoutSessionPaymentIntentData::new();
        intent.metadata = Some(metadata.clone());
        let mut create = CreateCheckoutSession::new()
            .mode(CheckoutSessionMode::Payment)
            .client_reference_id(order_id.clone())
            .customer_email(request.customer_email.clone())
            .success_url(format!(
                "{}?session_id={{CHECKOUT_SESSION_ID}}",
                request.return_url
            ))
            .cancel_url(request.cancel_url.clone())
            .line_items(line_items)
            .metadata(metadata)
            .payment_intent_data(intent)
            // one currency, the order's: the shopper pays what the order
            // says, and every report of the payment says the same
            .adaptive_pricing(CreateCheckoutSessionAdaptivePricing {
                enabled: Some(false),
            });
        // the way the shopper chose, alone; else the shop's list, if any
        if let Some(method) = request.method {
            let only = CreateCheckoutSessionAllowedPaymentMethodTypes::from_str(method.as_str())
                .unwrap_or_else(|never| match never {});
            create = create.allowed_payment_method_types(vec![only]);
        } else if !self.payment_methods.is_empty() {
            create = create.allowed_payment_method_types(self.payment_methods.clone());
        }
        // computed last, just before the request leaves
        let expires_at = session_expiry(Utc::now(), request.lifetime);
        let session = create
            .expires_at(expires_at.timestamp())
            .customize()
            .request_strategy(idempotency(&format!("checkout-{order_id}"))?)
            .send(&self.client)
            .await?;
        let url = session.url.clone().ok_or_else(|| {
            ProviderError::Unexpected("a Checkout Session without a payment page".into())
        })?;
        Ok(PaymentPage {
            id: session.id.to_string(),
            url,
            expires_at: Utc
                .timestamp_opt(session.expires_at, 0)
                .single()
                .unwrap_or(expires_at),
        })
    }

    async fn page(&self, page_id: &str) -> Result<PageState, ProviderError> {
        let session = self.retrieve_session(page_id).await?;
        let facts = SessionFacts::typed(&session);
        let mut payments: Vec<ProviderPayment> = facts.payment().into_iter().collect();
        // a session settling by a delayed method reads the same whatever
        // the bank said: its PaymentIntent tells a failed debit apart
        for payment in &mut payments {
            if payment.status == PaymentStatus::Pending {
                let intent = self.retrieve_intent(&payment.payment_ref).await?;
                payment.status = wire::settling_status(&intent.status);
            }
        }
        Ok(PageState {
            status: facts.page_status(),
            payments,
        })
    }

    async fn capture(&self, payment: &ProviderPayment) -> Result<ProviderPayment, ProviderError> {
        // Checkout captures at once; nothing is ever left authorised
        Ok(payment.clone())
    }

    async fn create_refund(&self, request: &RefundRequest) -> Result<RefundView, ProviderError> {
        let mut create = CreateRefund::new().payment_intent(request.payment_ref.clone());
        if let Some(amount) = request.amount_minor {
            create = create.amount(amount);
        }
        if let Some(order_id) = request.order_id {
            create = create.metadata(HashMap::from([(
                "order_id".to_owned(),
                order_id.to_string(),
            )]));
        }
        let created = create
            .customize()
            .request_strategy(idempotency(&request.idempotency_key)?)
            .send(&self.client)
            .await;
        match created {
            Ok(refund) => refund_view(&refund),
            // the key's first answer is gone (kept 24 hours) and the money
            // went back already: that refund is ours, find it (for a part
            // of the payment, one of that amount)
            Err(error) if error.code() == Some("charge_already_refunded") => self
                .refunds_of(&request.payment_ref)
                .await?
                .into_iter()
                .find(|r| {
                    r.status != RefundStatus::Failed
                        && request.amount_minor.is_none_or(|a| r.amount_minor == a)
                })
                .ok_or(error),
            Err(error) => Err(error),
        }
    }

    async fn refund(&self, refund_id: &str) -> Result<RefundView, ProviderError> {
        let refund = RetrieveRefund::new(refund_id).send(&self.client).await?;
        refund_view(&refund)
    }

    async fn refunds_of(&self, payment_ref: &str) -> Result<Vec<RefundView>, ProviderError> {
        let list = ListRefund::new()
            .payment_intent(payment_ref.to_owned())
            .limit(100)
            .send(&self.client)
            .await?;
        list.data.iter().map(refund_view).collect()
    }

    async fn close_page(&self, page_id: &str) -> Result<(), ProviderError> {
        match ExpireCheckoutSession::new(page_id).send(&self.client).await {
            Ok(_) => Ok(()),
            // already complete or expired: nothing left to close; any other
            // refusal (keys, rate limit) is retried
            Err(ProviderError::Refused { status: 400, .. }) => Ok(()),
            Err(error) => Err(error),
        }
    }

    async fn verify_webhook(
        &self,
        request: &WebhookRequest<'_>,
    ) -> Result<Vec<WebhookDelivery>, String> {
        let delivery = accept(
            &self.webhook_secrets,
            request.header("Stripe-Signature"),
            request.body,
            request.now,
        )?;
        Ok(vec![delivery])
    }

    async fn read_return(
        &self,
        page_id: &str,
        params: &ReturnParams,
    ) -> Result<ReturnReport, ReturnError> {
        // the query only names the session; what happened is asked of Stripe
        let session_id = params
            .get("session_id")
            .filter(|id| id.starts_with("cs_") && id.len() <= 255)
            .ok_or(ReturnError::Rejected("no session id"))?;
        if session_id != page_id {
            return Err(ReturnError::Rejected("not this order's payment page"));
        }
        let session = self.retrieve_session(page_id).await?;
        Ok(match SessionFacts::typed(&session).payment() {
            Some(payment) => ReturnReport::Payment(payment),
            None => ReturnReport::NotPaid,
        })
    }
}
