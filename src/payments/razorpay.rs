//! Razorpay, over its REST API with reqwest: create an order, fetch a
//! payment or an order's payments, refund a payment with `X-Refund-Idempotency`. HTTP basic auth
//! with the key id and key secret; the base URL comes from configuration,
//! so the same code talks to Razorpay and to the sandbox.

use std::time::Duration;

use serde::{Deserialize, Serialize};

use super::ProviderError;
use crate::configuration::Secret;

/// Where Razorpay is and how to sign in.
#[derive(Debug, Clone)]
pub struct RazorpaySettings {
    pub key_id: String,
    pub key_secret: Secret,
    /// `https://api.razorpay.com/`, or the sandbox's `http://…/razorpay/`.
    pub api_base: String,
}

/// A Razorpay order as Holdfast needs it.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct RazorpayOrder {
    pub id: String,
    pub amount: i64,
    pub currency: String,
    pub receipt: Option<String>,
    pub status: String,
}

/// A Razorpay payment as Holdfast needs it.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct RazorpayPayment {
    pub id: String,
    pub order_id: Option<String>,
    pub amount: i64,
    pub currency: String,
    /// created, authorized, captured, refunded or failed
    pub status: String,
}

#[derive(Debug, Deserialize)]
struct ErrorBody {
    error: ErrorDetail,
}

#[derive(Debug, Deserialize)]
struct ErrorDetail {
    code: Option<String>,
    description: Option<String>,
}

#[derive(Serialize)]
struct CreateOrder<'a> {
    amount: i64,
    currency: &'a str,
    receipt: &'a str,
    notes: serde_json::Value,
}

#[derive(Clone)]
pub struct RazorpayAdapter {
    http: reqwest::Client,
    settings: RazorpaySettings,
}

impl std::fmt::Debug for RazorpayAdapter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RazorpayAdapter")
            .field("key_id", &self.settings.key_id)
            .field("api_base", &self.settings.api_base)
            .finish_non_exhaustive()
    }
}

impl RazorpayAdapter {
    pub fn new(settings: &RazorpaySettings) -> Result<Self, ProviderError> {
        let mut settings = settings.clone();
        if !settings.api_base.ends_with('/') {
            settings.api_base.push('/');
        }
        let http = reqwest::Client::builder()
            .timeout(Duration::from_secs(15))
            .build()
            .map_err(|e| ProviderError::Unexpected(format!("cannot build the HTTP client: {e}")))?;
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
        let response = request
            .basic_auth(
                &self.settings.key_id,
                Some(self.settings.key_secret.expose()),
            )
            .send()
            .await
            .map_err(|e| ProviderError::Unavailable(e.without_url().to_string()))?;
        let status = response.status().as_u16();
        let body = response
            .bytes()
            .await
            .map_err(|e| ProviderError::Unavailable(e.without_url().to_string()))?;
        if (200..300).contains(&status) {
            return serde_json::from_slice(&body)
                .map_err(|e| ProviderError::Unexpected(format!("unreadable answer: {e}")));
        }
        let message = serde_json::from_slice::<ErrorBody>(&body)
            .ok()
            .map(|b| {
                format!(
                    "{}: {}",
                    b.error.code.unwrap_or_default(),
                    b.error.description.unwrap_or_default()
                )
            })
            .unwrap_or_else(|| "no description".into());
        if status >= 500 {
            Err(ProviderError::Unavailable(format!(
                "status {status}: {message}"
            )))
        } else {
            Err(ProviderError::Refused { status, message })
        }
    }

    /// `POST /v1/orders`: amount in the currency's minor unit, our order id
    /// as the receipt.
    pub async fn create_order(
        &self,
        order_id: &str,
        amount_minor: i64,
        currency: &str,
    ) -> Result<RazorpayOrder, ProviderError> {
        let body = CreateOrder {
            amount: amount_minor,
            currency: &currency.to_uppercase(),
            receipt: order_id,
            notes: serde_json::json!({ "holdfast_order_id": order_id }),
        };
        self.send(self.http.post(self.url("orders")).json(&body))
            .await
    }

    pub async fn fetch_payment(&self, payment_id: &str) -> Result<RazorpayPayment, ProviderError> {
        if payment_id.is_empty()
            || !payment_id
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'_')
        {
            return Err(ProviderError::Refused {
                status: 400,
                message: "not a payment id".into(),
            });
        }
        self.send(self.http.get(self.url(&format!("payments/{payment_id}"))))
            .await
    }

    /// `GET /v1/orders/{id}/payments`: every payment attempt on an order,
    /// for reconciliation when neither the callback nor the webhook came.
    pub async fn order_payments(
        &self,
        order_id: &str,
    ) -> Result<Vec<RazorpayPayment>, ProviderError> {
        #[derive(Deserialize)]
        struct Collection {
            items: Vec<RazorpayPayment>,
        }
        if order_id.is_empty()
            || !order_id
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'_')
        {
            return Err(ProviderError::Refused {
                status: 400,
                message: "not an order id".into(),
            });
        }
        let collection: Collection = self
            .send(
                self.http
                    .get(self.url(&format!("orders/{order_id}/payments"))),
            )
            .await?;
        Ok(collection.items)
    }

    /// Refund a payment in full. The key comes from our refund job (at least
    /// ten characters, as Razorpay asks), so a retried refund is one refund.
    pub async fn refund(
        &self,
        payment_id: &str,
        idempotency_key: &str,
    ) -> Result<(String, super::RefundState), ProviderError> {
        #[derive(Deserialize)]
        struct Refund {
            id: String,
            status: Option<String>,
        }
        if payment_id.is_empty()
            || !payment_id
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'_')
        {
            return Err(ProviderError::Refused {
                status: 400,
                message: "not a payment id".into(),
            });
        }
        let refund: Refund = self
            .send(
                self.http
                    .post(self.url(&format!("payments/{payment_id}/refund")))
                    .header("X-Refund-Idempotency", idempotency_key)
                    .json(&serde_json::json!({ "speed": "normal" })),
            )
            .await?;
        let state = match refund.status.as_deref() {
            Some("processed") => super::RefundState::Settled,
            Some("failed") => super::RefundState::Failed,
            _ => super::RefundState::Pending,
        };
        Ok((refund.id, state))
    }
}
