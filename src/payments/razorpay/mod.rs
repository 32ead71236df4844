//! Razorpay, over its REST API: orders as payment pages (captured
//! automatically, set on each order), payments fetched and captured,
//! refunds with `X-Refund-Idempotency` and read back by id, signed
//! webhooks (current and previous secret), and Razorpay Checkout in
//! redirect mode, whose callback is verified and then checked with the API.
//! HTTP basic auth with the key id and key secret; the base URL comes from
//! configuration, so the same code talks to Razorpay and to the sandbox.

use std::time::Duration;

use async_trait::async_trait;
use chrono::Utc;
use serde::Deserialize;
use serde_json::json;

mod settings;
mod wire;

pub use settings::RazorpaySettings;
pub use wire::parse_event;

use wire::{Collection, ErrorBody, Payment, Refund, checked_id};

use super::signature::{hmac_sha256_matches, signed_by_any};
use super::{
    EmbedRequest, EmbeddedCheckout, PageRequest, PageState, PageStatus, PaymentPage,
    PaymentProvider, ProviderError, ProviderKind, ProviderPayment, RefundRequest, RefundView,
    ReturnError, ReturnParams, ReturnReport, WebhookDelivery, WebhookRequest,
};
use crate::configuration::Secret;

/// Razorpay's shortest automatic capture window, in minutes.
const SHORTEST_CAPTURE_WINDOW_MINUTES: u64 = 12;

/// Razorpay behind [`PaymentProvider`].
#[derive(Clone)]
pub struct RazorpayProvider {
    http: reqwest::Client,
    settings: RazorpaySettings,
}

impl std::fmt::Debug for RazorpayProvider {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RazorpayProvider")
            .field("key_id", &self.settings.key_id)
            .field("api_base", &self.settings.api_base)
            .finish_non_exhaustive()
    }
}

/// Everything a delivery is judged on before the database: a secret, the
/// signature (current or previous secret), the event id, then the body.
pub fn accept(
    secrets: &[Secret],
    signature: Option<&str>,
    event_id: Option<&str>,
    body: &[u8],
) -> Result<WebhookDelivery, &'static str> {
    if secrets.iter().all(|s| s.expose().is_empty()) {
        return Err("no webhook secret configured");
    }
    let Some(signature) = signature else {
        return Err("no signature header");
    };
    if !signed_by_any(secrets, body, signature) {
        return Err("no signature matches");
    }
    let Some(event_id) = event_id.filter(|id| !id.is_empty() && id.len() <= 255) else {
        return Err("no event id header");
    };
    let (kind, event) = parse_event(body)?;
    Ok(WebhookDelivery {
        event_id: event_id.to_owned(),
        kind,
        event,
    })
}

/// What Razorpay Checkout posted back, judged without the network: a
/// failure (its `error[…]` fields), or the payment id whose signature,
/// HMAC-SHA256 of `order_id|payment_id` with the key secret, matches for
/// `page_id`, the Razorpay order we stored. Pure: the fuzz target runs it.
pub fn verify_callback(
    key_secret: &Secret,
    page_id: &str,
    params: &ReturnParams,
) -> Result<CallbackVerdict, &'static str> {
    let error = params
        .get("error[description]")
        .or_else(|| params.get("error[code]"));
    if let Some(error) = error {
        let reason: String = error
            .chars()
            .filter(|c| !c.is_control())
            .take(200)
            .collect();
        return Ok(CallbackVerdict::Failed(reason));
    }
    let field = |name: &str| params.get(name).filter(|v| !v.is_empty() && v.len() <= 100);
    let (Some(payment_id), Some(order_id), Some(signature)) = (
        field("razorpay_payment_id"),
        field("razorpay_order_id"),
        field("razorpay_signature"),
    ) else {
        return Err("the callback is missing its fields");
    };
    if order_id != page_id {
        return Err("not this order's payment page");
    }
    let signed = format!("{page_id}|{payment_id}");
    if !hmac_sha256_matches(key_secret.expose().as_bytes(), signed.as_bytes(), signature) {
        return Err("the signature does not match");
    }
    checked_id(payment_id, "payment").map_err(|_| "not a payment id")?;
    Ok(CallbackVerdict::Paid(payment_id.to_owned()))
}

/// The payment a failure callback names when its bank did not answer in
/// time (`error[reason]` `payment_timed_out`, its id in `error[metadata]`):
/// one Razorpay may still authorise late. A claim to be checked with the
/// API, never believed as it stands.
fn timed_out_payment(params: &ReturnParams) -> Option<String> {
    if params.get("error[reason]") != Some("payment_timed_out") {
        return None;
    }
    let metadata: serde_json::Value = serde_json::from_str(params.get("error[metadata]")?).ok()?;
    let id = metadata["payment_id"].as_str()?;
    checked_id(id, "payment").ok().map(str::to_owned)
}

/// A verified Razorpay Checkout callback.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CallbackVerdict {
    /// The shopper paid with this payment (its state is asked of the API).
    Paid(String),
    /// The attempt failed, for this reason (as Razorpay put it).
    Failed(String),
}

impl RazorpayProvider {
    pub fn new(settings: &RazorpaySettings, http: reqwest::Client) -> Result<Self, ProviderError> {
        let mut settings = settings.clone();
        if !settings.api_base.ends_with('/') {
            settings.api_base.push('/');
        }
        Ok(Self { http, settings })
    }

    pub fn key_id(&self) -> &str {
        &self.settings.key_id
    }

    fn url(&self, path: &str) -> String {
        format!("{}v1/{path}", self.settings.api_base)
    }

    async fn send<T: for<'de> Deserialize<'de>>(
        &self,
        request: reqwest::RequestBuilder,
    ) -> Result<T, ProviderError> {
        let (status, body) = super::http::exchange(request.basic_auth(
            &self.settings.key_id,
            Some(self.settings.key_secret.expose()),
        ))
        .await?;
        if (200..300).contains(&status) {
            return serde_json::from_slice(&body)
                .map_err(|e| ProviderError::Unexpected(format!("unreadable answer: {e}")));
        }
        let detail = serde_json::from_slice::<ErrorBody>(&body)
            .ok()
            .map(|b| b.error);
        let message = detail
            .as_ref()
            .and_then(|d| d.description.clone())
            .unwrap_or_else(|| "no description".into());
        // 409: a refund with this key is still in flight; come back later
        if status == 409 || status == 429 || status >= 500 {
            return Err(ProviderError::Unavailable(format!(
                "status {status}: {message}"
            )));
        }
        Err(ProviderError::Refused {
            status,
            code: detail.and_then(|d| d.code),
            message,
        })
    }

    async fn fetch_payment(&self, payment_id: &str) -> Result<Payment, ProviderError> {
        let id = checked_id(payment_id, "payment")?;
        self.send(self.http.get(self.url(&format!("payments/{id}"))))
            .await
    }
}

#[async_trait]
impl PaymentProvider for RazorpayProvider {
    fn kind(&self) -> ProviderKind {
        ProviderKind::Razorpay
    }

    /// `POST /v1/orders`: amount in the currency's minor unit, our order id
    /// as the receipt and in the notes, and automatic capture set on the
    /// order itself (it overrides the account's setting), so a payment
    /// authorised while the page is open is captured by Razorpay.
    async fn open_page(&self, request: &PageRequest) -> Result<PaymentPage, ProviderError> {
        #[derive(Deserialize)]
        struct Order {
            id: String,
        }
        let minutes = (request.lifetime.as_secs() / 60).max(SHORTEST_CAPTURE_WINDOW_MINUTES);
        let body = json!({
            "amount": request.amount_minor,
            "currency": request.currency.to_ascii_uppercase(),
            "receipt": request.order_id.to_string(),
            "notes": { "holdfast_order_id": request.order_id.to_string() },
            "payment": {
                "capture": "automatic",
                "capture_options": {
                    "automatic_expiry_period": minutes,
                    "refund_speed": "normal",
                },
            },
        });
        let order: Order = self
            .send(self.http.post(self.url("orders")).json(&body))
            .await?;
        Ok(PaymentPage {
            id: order.id,
            url: request.pay_url.clone(),
            // Razorpay orders never expire; our hold's window decides
            expires_at: Utc::now()
                + chrono::Duration::from_std(request.lifetime).unwrap_or_default(),
        })
    }

    /// `GET /v1/orders/{id}/payments`: every attempt on the order.
    async fn page(&self, page_id: &str) -> Result<PageState, ProviderError> {
        let id = checked_id(page_id, "order")?;
        let payments: Collection<Payment> = self
            .send(self.http.get(self.url(&format!("orders/{id}/payments"))))
            .await?;
        Ok(PageState {
            status: PageStatus::Endless,
            payments: payments.items.iter().map(|p| p.view(None)).collect(),
        })
    }

    /// `POST /v1/payments/{id}/capture` for the authorised amount.
    async fn capture(&self, payment: &ProviderPayment) -> Result<ProviderPayment, ProviderError> {
        let id = checked_id(&payment.payment_ref, "payment")?;
        let body = json!({
            "amount": payment.amount_minor,
            "currency": payment.currency.to_ascii_uppercase(),
        });
        let captured: Result<Payment, _> = self
            .send(
                self.http
                    .post(self.url(&format!("payments/{id}/capture")))
                    .json(&body),
            )
            .await;
        match captured {
            Ok(captured) => Ok(captured.view(payment.order_hint)),
            // captured meanwhile (by Razorpay's automatic capture, or
            // another of our paths): report it as it is
            Err(ProviderError::Refused { status: 400, .. }) => {
                Ok(self.fetch_payment(id).await?.view(payment.order_hint))
            }
            Err(error) => Err(error),
        }
    }

    /// `POST /v1/payments/{id}/refund` with `X-Refund-Idempotency`: the same
    /// key and the same body on every retry (Razorpay refuses a key reused
    /// with another body, and answers 409 while the first is in flight).
    async fn create_refund(&self, request: &RefundRequest) -> Result<RefundView, ProviderError> {
        let id = checked_id(&request.payment_ref, "payment")?;
        let mut body = json!({ "speed": "normal" });
        if let Some(amount) = request.amount_minor {
            body["amount"] = json!(amount);
        }
        if let Some(order_id) = request.order_id {
            body["notes"] = json!({ "holdfast_order_id": order_id.to_string() });
        }
        let refund: Refund = self
            .send(
                self.http
                    .post(self.url(&format!("payments/{id}/refund")))
                    .header("X-Refund-Idempotency", &request.idempotency_key)
                    .json(&body),
            )
            .await?;
        Ok(refund.view())
    }

    /// `GET /v1/refunds/{id}`.
    async fn refund(&self, refund_id: &str) -> Result<RefundView, ProviderError> {
        let id = checked_id(refund_id, "refund")?;
        let refund: Refund = self
            .send(self.http.get(self.url(&format!("refunds/{id}"))))
            .await?;
        Ok(refund.view())
    }

    /// `GET /v1/payments/{id}/refunds`.
    async fn refunds_of(&self, payment_ref: &str) -> Result<Vec<RefundView>, ProviderError> {
        let id = checked_id(payment_ref, "payment")?;
        let refunds: Collection<Refund> = self
            .send(self.http.get(self.url(&format!("payments/{id}/refunds"))))
            .await?;
        Ok(refunds.items.iter().map(Refund::view).collect())
    }

    /// A Razorpay order cannot be closed: money that still lands on it is
    /// judged by the confirm routine (and refunded if the hold ended).
    async fn close_page(&self, _page_id: &str) -> Result<(), ProviderError> {
        Ok(())
    }

    async fn verify_webhook(
        &self,
        request: &WebhookRequest<'_>,
    ) -> Result<Vec<WebhookDelivery>, String> {
        let delivery = accept(
            &self.settings.webhook_secrets,
            request.header("X-Razorpay-Signature"),
            request.header("X-Razorpay-Event-Id"),
            request.body,
        )
        .map_err(str::to_owned)?;
        Ok(vec![delivery])
    }

    /// The redirect-mode callback: its signature is checked against the
    /// order we stored, then the payment is fetched, because the signature
    /// proves an authorisation, not a capture.
    async fn read_return(
        &self,
        page_id: &str,
        params: &ReturnParams,
    ) -> Result<ReturnReport, ReturnError> {
        match verify_callback(&self.settings.key_secret, page_id, params)
            .map_err(ReturnError::Rejected)?
        {
            CallbackVerdict::Failed(reason) => match timed_out_payment(params) {
                // the bank did not answer: the payment, asked of the API
                // (the failure callback is not signed), may be authorised
                // late, and then it settles
                Some(payment_id) => {
                    let payment = self.fetch_payment(&payment_id).await?;
                    let view = payment.view(None);
                    if payment.order_id.as_deref() == Some(page_id)
                        && view.status == crate::payments::PaymentStatus::Pending
                    {
                        Ok(ReturnReport::Payment(view))
                    } else {
                        Ok(ReturnReport::Failed { reason })
                    }
                }
                None => Ok(ReturnReport::Failed { reason }),
            },
            CallbackVerdict::Paid(payment_id) => {
                let payment = self.fetch_payment(&payment_id).await?;
                if payment.order_id.as_deref() != Some(page_id) {
                    return Err(ReturnError::Rejected("the payment is for another order"));
                }
                Ok(ReturnReport::Payment(payment.view(None)))
            }
        }
    }

    fn embedded_opener(&self) -> Option<&'static str> {
        Some(include_str!("checkout.js"))
    }

    fn embedded_checkout(&self, order: &EmbedRequest) -> Option<EmbeddedCheckout> {
        let origin = reqwest::Url::parse(&self.settings.checkout_script)
            .map(|url| url.origin().ascii_serialization())
            .unwrap_or_default();
        let mut options = json!({
                "key": self.settings.key_id,
                "order_id": order.page_id,
                "amount": order.amount_minor,
                "currency": order.currency.to_ascii_uppercase(),
                "name": order.shop_name,
                "callback_url": order.return_url,
                "redirect": true,
                "prefill": { "name": order.customer_name, "email": order.customer_email },
                "modal": { "cancel_url": order.cancel_url },
        });
        if let Some(method) = order.method {
            options["config"] = display_only(method.as_str(), method.label());
        }
        Some(EmbeddedCheckout {
            script_url: self.settings.checkout_script.clone(),
            options,
            origins: vec![
                origin,
                "https://api.razorpay.com".into(),
                "https://checkout.razorpay.com".into(),
                "https://*.razorpay.com".into(),
            ],
        })
    }
}

/// Checkout's `config` that shows one way of paying alone: a block of
/// that method's instruments, shown in `sequence`, with Checkout's own
/// blocks (every other method) hidden by `preferences.show_default_blocks:
/// false` — Razorpay's "Configure Payment Methods" for Standard Checkout.
fn display_only(method: &str, label: &str) -> serde_json::Value {
    json!({
        "display": {
            "blocks": {
                "chosen": {
                    "name": label,
                    "instruments": [{ "method": method }],
                },
            },
            "sequence": ["block.chosen"],
            "preferences": { "show_default_blocks": false },
        },
    })
}

/// How long a Razorpay call may take before it is given up on (well under
/// the outbox's lease, so a hung call never runs beside its own retry).
pub const TIMEOUT: Duration = Duration::from_secs(15);
