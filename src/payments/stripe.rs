//! Stripe: Checkout Sessions as payment pages, refunds by id, signed
//! webhooks. Requests are built and answers read by async-stripe's 1.0
//! request crates; they travel over Holdfast's own HTTPS client
//! ([`StripeHttp`], one TLS setup for every provider), which pins the API
//! version async-stripe was generated for and reads Stripe's error codes.
//! The API base comes from configuration, so the same code talks to Stripe
//! and to the sandbox.

use std::collections::HashMap;
use std::str::FromStr;
use std::time::Duration;

use async_trait::async_trait;
use bytes::Bytes;
use chrono::{DateTime, TimeZone, Utc};
use serde::Deserialize;
use serde_json::Value;
use stripe_checkout::checkout_session::{
    CreateCheckoutSession, CreateCheckoutSessionAdaptivePricing,
    CreateCheckoutSessionAllowedPaymentMethodTypes, CreateCheckoutSessionLineItems,
    CreateCheckoutSessionLineItemsPriceData, CreateCheckoutSessionPaymentIntentData,
    ExpireCheckoutSession, ProductData, RetrieveCheckoutSession,
};
use stripe_checkout::{CheckoutSession, CheckoutSessionMode};
use stripe_client_core::{
    CustomizedStripeRequest, IdempotencyKey, RequestStrategy, StripeClient, StripeClientErr,
    StripeMethod, StripeRequest as _,
};
use stripe_core::refund::{CreateRefund, ListRefund, RetrieveRefund};
use stripe_shared::Refund;
use stripe_types::{Currency, Expandable};
use uuid::Uuid;

use super::signature::{SignatureError, verify_stripe};
use super::{
    HeaderLookup, PageEnd, PageRequest, PageState, PageStatus, PaymentPage, PaymentProvider,
    PaymentStatus, ProviderError, ProviderEvent, ProviderKind, ProviderPayment, RefundRequest,
    RefundStatus, RefundView, ReturnError, ReturnParams, ReturnReport, WebhookDelivery,
};
use crate::configuration::Secret;

/// The API version every request pins (`Stripe-Version`): the one
/// async-stripe's types were generated from, so answers match them.
pub fn api_version() -> &'static str {
    stripe_shared::version::VERSION.as_str()
}

/// Stripe's bounds for a Checkout Session's `expires_at`, measured at
/// Stripe from when the create request arrives.
const SHORTEST_SESSION: Duration = Duration::from_secs(30 * 60);
const LONGEST_SESSION: Duration = Duration::from_secs(24 * 3600);
/// How far inside those bounds we stay, for the request's trip and clocks
/// that disagree by a little.
const EXPIRY_MARGIN: Duration = Duration::from_secs(2 * 60);

/// Where Stripe is, how to sign in, and what to accept.
#[derive(Debug, Clone)]
pub struct StripeSettings {
    pub secret_key: Secret,
    /// `https://api.stripe.com/`, or the sandbox's `http://…/stripe/`.
    pub api_base: String,
    /// The endpoint's signing secrets: the current one, and during a
    /// rotation the previous one. None: every webhook is refused.
    pub webhook_secrets: Vec<Secret>,
    /// `allowed_payment_method_types` for every session (`card` by
    /// default: instant methods only, so a payment is final before its
    /// hold ends). Empty: the methods the Stripe dashboard enables,
    /// delayed ones included.
    pub payment_methods: Vec<String>,
}

/// Holdfast's HTTPS client speaking Stripe's API for async-stripe's
/// requests: bearer key, pinned version, idempotency key, and Stripe's
/// error body read into a [`ProviderError`] with its code. One attempt per
/// call: retries belong to the outbox and reconciliation, which keep the
/// same idempotency key.
#[derive(Clone)]
pub struct StripeHttp {
    http: reqwest::Client,
    api_base: String,
    secret_key: Secret,
}

impl StripeClientErr for ProviderError {
    fn deserialize_err(message: impl std::fmt::Display) -> Self {
        ProviderError::Unexpected(format!("unreadable answer: {message}"))
    }
}

#[derive(Deserialize)]
struct ErrorBody {
    error: ErrorDetail,
}

#[derive(Deserialize)]
struct ErrorDetail {
    #[serde(rename = "type")]
    kind: Option<String>,
    code: Option<String>,
    message: Option<String>,
}

/// A non-2xx answer from Stripe, as our error.
fn stripe_failure(status: u16, body: &[u8]) -> ProviderError {
    let detail = serde_json::from_slice::<ErrorBody>(body)
        .ok()
        .map(|b| b.error);
    let message = detail
        .as_ref()
        .and_then(|d| d.message.clone())
        .unwrap_or_else(|| "no message".into());
    // 409: the same idempotency key is in flight; 429: slow down
    if status == 409 || status == 429 || status >= 500 {
        return ProviderError::Unavailable(format!("status {status}: {message}"));
    }
    let code = detail.and_then(|d| d.code.or(d.kind));
    ProviderError::Refused {
        status,
        code,
        message,
    }
}

impl StripeClient for StripeHttp {
    type Err = ProviderError;

    fn execute(
        &self,
        request: CustomizedStripeRequest,
    ) -> impl std::future::Future<Output = Result<Bytes, ProviderError>> + Send {
        let (request, config) = request.into_pieces();
        let mut url = format!("{}v1{}", self.api_base, request.path);
        if let Some(query) = &request.query {
            url.push('?');
            url.push_str(query);
        }
        let mut builder = match request.method {
            StripeMethod::Get => self.http.get(url),
            StripeMethod::Post => self.http.post(url),
            StripeMethod::Delete => self.http.delete(url),
        }
        .bearer_auth(self.secret_key.expose())
        .header("Stripe-Version", api_version());
        if let Some(key) = config.request_strategy.as_ref().and_then(|s| s.get_key()) {
            builder = builder.header("Idempotency-Key", key.as_str());
        }
        if let Some(body) = request.body {
            builder = builder
                .header("Content-Type", "application/x-www-form-urlencoded")
                .body(body);
        }
        async move {
            let response = builder
                .send()
                .await
                .map_err(|e| ProviderError::Unavailable(e.without_url().to_string()))?;
            let status = response.status().as_u16();
            let body = response
                .bytes()
                .await
                .map_err(|e| ProviderError::Unavailable(e.without_url().to_string()))?;
            if (200..300).contains(&status) {
                Ok(body)
            } else {
                Err(stripe_failure(status, &body))
            }
        }
    }
}

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

fn expandable_id<T: stripe_types::Object>(value: &Expandable<T>) -> String
where
    T::Id: ToString,
{
    value.id().to_string()
}

/// The facts of a Checkout Session Holdfast acts on, from the API's typed
/// object or a webhook's JSON alike.
struct SessionFacts {
    id: String,
    status: Option<String>,
    payment_status: String,
    payment_intent: Option<String>,
    amount_total: Option<i64>,
    currency: Option<String>,
    client_reference_id: Option<String>,
}

impl SessionFacts {
    fn typed(session: &CheckoutSession) -> Self {
        Self {
            id: session.id.to_string(),
            status: session.status.as_ref().map(|s| s.as_str().to_owned()),
            payment_status: session.payment_status.as_str().to_owned(),
            payment_intent: session.payment_intent.as_ref().map(expandable_id),
            amount_total: session.amount_total,
            currency: session.currency.as_ref().map(|c| c.to_string()),
            client_reference_id: session.client_reference_id.clone(),
        }
    }

    fn json(object: &Value) -> Option<Self> {
        let text = |field: &str| object[field].as_str().map(str::to_owned);
        Some(Self {
            id: text("id")?,
            status: text("status"),
            payment_status: text("payment_status").unwrap_or_default(),
            payment_intent: match &object["payment_intent"] {
                Value::String(id) => Some(id.clone()),
                Value::Object(intent) => intent.get("id").and_then(Value::as_str).map(Into::into),
                _ => None,
            },
            amount_total: object["amount_total"].as_i64(),
            currency: text("currency"),
            client_reference_id: text("client_reference_id"),
        })
    }

    fn page_status(&self) -> PageStatus {
        match self.status.as_deref() {
            Some("complete") => PageStatus::Complete,
            Some("expired") => PageStatus::Expired,
            _ => PageStatus::Open,
        }
    }

    /// The session's payment, once there is one: paid is captured (Checkout
    /// captures at once); complete and unpaid is a delayed method settling.
    fn payment(&self) -> Option<ProviderPayment> {
        let status = match (self.payment_status.as_str(), self.status.as_deref()) {
            ("paid", _) => PaymentStatus::Captured,
            ("unpaid", Some("complete")) => PaymentStatus::Pending,
            _ => return None,
        };
        Some(ProviderPayment {
            provider: ProviderKind::Stripe,
            payment_ref: self.payment_intent.clone()?,
            page_id: Some(self.id.clone()),
            amount_minor: self.amount_total?,
            currency: self.currency.clone()?.to_ascii_lowercase(),
            status,
            order_hint: self
                .client_reference_id
                .as_deref()
                .and_then(|id| Uuid::parse_str(id).ok()),
        })
    }
}

fn refund_status(status: Option<&str>) -> RefundStatus {
    match status {
        Some("succeeded") => RefundStatus::Succeeded,
        Some("failed") | Some("canceled") => RefundStatus::Failed,
        // pending, requires_action, or a status we do not know: ask again
        _ => RefundStatus::Pending,
    }
}

fn refund_view(refund: &Refund) -> Result<RefundView, ProviderError> {
    Ok(RefundView {
        id: refund.id.to_string(),
        payment_ref: refund
            .payment_intent
            .as_ref()
            .map(expandable_id)
            .ok_or_else(|| ProviderError::Unexpected("a refund without a payment".into()))?,
        amount_minor: refund.amount,
        status: refund_status(refund.status.as_deref()),
    })
}

fn refund_view_json(object: &Value) -> Option<RefundView> {
    let payment_ref = match &object["payment_intent"] {
        Value::String(id) => id.clone(),
        Value::Object(intent) => intent.get("id")?.as_str()?.to_owned(),
        _ => return None,
    };
    Some(RefundView {
        id: object["id"].as_str()?.to_owned(),
        payment_ref,
        amount_minor: object["amount"].as_i64().unwrap_or_default(),
        status: refund_status(object["status"].as_str()),
    })
}

/// When a session opened now should expire: the wanted lifetime, kept
/// [`EXPIRY_MARGIN`] inside Stripe's 30 minutes to 24 hours, since Stripe
/// measures from when our request arrives, not from when we computed it.
pub fn session_expiry(now: DateTime<Utc>, lifetime: Duration) -> DateTime<Utc> {
    let lifetime = lifetime.clamp(
        SHORTEST_SESSION + EXPIRY_MARGIN,
        LONGEST_SESSION - EXPIRY_MARGIN,
    );
    now + chrono::Duration::from_std(lifetime).expect("at most a day")
}

/// What a verified Stripe event asks for. Pure: no I/O, no clock.
pub fn parse_event(body: &[u8]) -> Result<WebhookDelivery, &'static str> {
    #[derive(Deserialize)]
    struct Event {
        id: String,
        #[serde(rename = "type")]
        kind: String,
        data: EventData,
    }
    #[derive(Deserialize)]
    struct EventData {
        object: Value,
    }
    let event: Event =
        serde_json::from_slice(body).map_err(|_| "the body is not a Stripe event")?;
    if event.id.is_empty() || event.id.len() > 255 || event.kind.len() > 100 {
        return Err("the event id or type is malformed");
    }
    let object = &event.data.object;
    let session = || SessionFacts::json(object);
    let action = match event.kind.as_str() {
        "checkout.session.completed" | "checkout.session.async_payment_succeeded" => {
            match session().map(|s| s.payment()) {
                Some(Some(payment)) if payment.well_formed() => ProviderEvent::Payment(payment),
                Some(Some(_)) => ProviderEvent::Ignore("malformed payment ids"),
                Some(None) => ProviderEvent::Ignore("no payment on the session yet"),
                None => ProviderEvent::Ignore("not a Checkout Session"),
            }
        }
        "checkout.session.expired" | "checkout.session.async_payment_failed" => match session() {
            Some(session) if super::well_formed_id(&session.id) => ProviderEvent::PageEnded {
                page_id: session.id,
                end: if event.kind.ends_with("expired") {
                    PageEnd::Expired
                } else {
                    PageEnd::PaymentFailed
                },
            },
            _ => ProviderEvent::Ignore("not a Checkout Session"),
        },
        // refund.* for endpoints on API versions from 2024-10-28;
        // charge.refund.updated for older ones. (charge.refunded does not
        // say which refund, so it decides nothing.)
        "refund.created" | "refund.updated" | "refund.failed" | "charge.refund.updated" => {
            match refund_view_json(object) {
                Some(refund)
                    if super::well_formed_id(&refund.id)
                        && super::well_formed_id(&refund.payment_ref) =>
                {
                    ProviderEvent::Refund(refund)
                }
                _ => ProviderEvent::Ignore("a refund without a well-formed payment intent"),
            }
        }
        _ => ProviderEvent::Ignore("event type not used"),
    };
    Ok(WebhookDelivery {
        event_id: event.id,
        kind: event.kind,
        event: action,
    })
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
        if !self.payment_methods.is_empty() {
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
        Ok(PageState {
            status: facts.page_status(),
            payments: facts.payment().into_iter().collect(),
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

    fn verify_webhook(
        &self,
        header: HeaderLookup<'_>,
        body: &[u8],
        now: i64,
    ) -> Result<WebhookDelivery, String> {
        accept(
            &self.webhook_secrets,
            header("Stripe-Signature").as_deref(),
            body,
            now,
        )
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
