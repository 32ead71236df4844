//! Stripe's side of the wire: the HTTPS client async-stripe's requests go
//! through (bearer key, pinned API version, idempotency key, Stripe's error
//! body read into a [`ProviderError`]), the facts of a Checkout Session and
//! a refund as Holdfast reads them from the typed API objects and from
//! webhook JSON, and the events a webhook carries.

use std::time::Duration;

use bytes::Bytes;
use chrono::{DateTime, Utc};
use serde::Deserialize;
use serde_json::Value;
use stripe_checkout::CheckoutSession;
use stripe_client_core::{CustomizedStripeRequest, StripeClient, StripeClientErr, StripeMethod};
use stripe_shared::Refund;
use stripe_types::Expandable;
use uuid::Uuid;

use crate::configuration::Secret;
use crate::payments::{
    PageEnd, PageStatus, PaymentStatus, ProviderError, ProviderEvent, ProviderKind,
    ProviderPayment, RefundStatus, RefundView, WebhookDelivery, well_formed_id,
};

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

/// Holdfast's HTTPS client speaking Stripe's API for async-stripe's
/// requests: bearer key, pinned version, idempotency key, and Stripe's
/// error body read into a [`ProviderError`] with its code. One attempt per
/// call: retries belong to the outbox and reconciliation, which keep the
/// same idempotency key.
#[derive(Clone)]
pub struct StripeHttp {
    pub(super) http: reqwest::Client,
    pub(super) api_base: String,
    pub(super) secret_key: Secret,
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
            let (status, body) = crate::payments::http::exchange(builder).await?;
            if (200..300).contains(&status) {
                Ok(body)
            } else {
                Err(stripe_failure(status, &body))
            }
        }
    }
}

pub(super) fn expandable_id<T: stripe_types::Object>(value: &Expandable<T>) -> String
where
    T::Id: ToString,
{
    value.id().to_string()
}

/// The facts of a Checkout Session Holdfast acts on, from the API's typed
/// object or a webhook's JSON alike.
pub(super) struct SessionFacts {
    id: String,
    status: Option<String>,
    payment_status: String,
    payment_intent: Option<String>,
    amount_total: Option<i64>,
    currency: Option<String>,
    client_reference_id: Option<String>,
    /// The methods the session could take (not the one chosen: Stripe's
    /// session does not say).
    methods: Vec<String>,
}

/// Stripe's methods with delayed notification (docs.stripe.com/payments/
/// payment-methods, "payment notification"): a session paid with one
/// completes `unpaid` and settles days later. Bank debits first, the
/// longest first, so a session that offers several names the longest.
const DELAYED_METHODS: [&str; 8] = [
    "sepa_debit",
    "bacs_debit",
    "acss_debit",
    "us_bank_account",
    "au_becs_debit",
    "nz_bank_account",
    "customer_balance",
    "boleto",
];

impl SessionFacts {
    pub(super) fn typed(session: &CheckoutSession) -> Self {
        Self {
            id: session.id.to_string(),
            status: session.status.as_ref().map(|s| s.as_str().to_owned()),
            payment_status: session.payment_status.as_str().to_owned(),
            payment_intent: session.payment_intent.as_ref().map(expandable_id),
            amount_total: session.amount_total,
            currency: session.currency.as_ref().map(|c| c.to_string()),
            client_reference_id: session.client_reference_id.clone(),
            methods: session.payment_method_types.clone(),
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
            methods: object["payment_method_types"]
                .as_array()
                .map(|methods| {
                    methods
                        .iter()
                        .filter_map(Value::as_str)
                        .map(str::to_owned)
                        .collect()
                })
                .unwrap_or_default(),
        })
    }

    pub(super) fn page_status(&self) -> PageStatus {
        match self.status.as_deref() {
            Some("complete") => PageStatus::Complete,
            Some("expired") => PageStatus::Expired,
            _ => PageStatus::Open,
        }
    }

    /// The session's payment, once there is one: paid is captured (Checkout
    /// captures at once); complete and unpaid is a delayed method settling,
    /// and the method is the session's delayed one (the longest, if it
    /// offered several).
    pub(super) fn payment(&self) -> Option<ProviderPayment> {
        let status = match (self.payment_status.as_str(), self.status.as_deref()) {
            ("paid", _) => PaymentStatus::Captured,
            ("unpaid", Some("complete")) => PaymentStatus::Pending,
            _ => return None,
        };
        let method = match status {
            PaymentStatus::Pending => DELAYED_METHODS
                .iter()
                .find(|delayed| self.methods.iter().any(|m| m == *delayed))
                .map(|m| (*m).to_owned()),
            _ => None,
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
            method,
        })
    }
}

/// A delayed method's session stays `complete` and `unpaid` whatever its
/// bank says; its PaymentIntent says whether the debit is still
/// `processing` or failed (`requires_payment_method` again, or
/// `canceled`): docs.stripe.com/payments/paymentintents/lifecycle.
pub(super) fn settling_status(intent: &stripe_shared::PaymentIntentStatus) -> PaymentStatus {
    use stripe_shared::PaymentIntentStatus as Intent;
    match intent {
        Intent::RequiresPaymentMethod | Intent::Canceled => PaymentStatus::Failed,
        // processing, or anything on its way: not money yet (a succeeded
        // intent's session says `paid` once Stripe has updated it)
        _ => PaymentStatus::Pending,
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

pub(super) fn refund_view(refund: &Refund) -> Result<RefundView, ProviderError> {
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
            Some(session) if well_formed_id(&session.id) => ProviderEvent::PageEnded {
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
                    if well_formed_id(&refund.id) && well_formed_id(&refund.payment_ref) =>
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
