//! Stripe's objects and errors as the sandbox shows them: every field of
//! Stripe's published `checkout.session`, `refund` and `event` objects
//! (`openapi/fixtures3.json` of github.com/stripe/openapi), and Stripe's
//! error shape `{"error":{"type","code","message","param","doc_url"}}`
//! with its statuses (docs.stripe.com/api/errors: 400 a request that was
//! unacceptable, 401 no valid API key, 404 a resource or URL that does not
//! exist, 409 a conflict with another request).

use std::collections::HashMap;

use actix_web::http::StatusCode;
use actix_web::{HttpRequest, HttpResponse};
use serde_json::{Value, json};

use crate::delivery::Pacing;
use crate::dialect::Dialect;

/// One line of a Checkout Session.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct LineItem {
    pub(crate) name: String,
    pub(crate) quantity: i64,
    pub(crate) unit_amount: i64,
}

#[derive(Debug, Clone)]
pub(crate) struct Session {
    pub(crate) id: String,
    pub(crate) created: i64,
    pub(crate) expires_at: i64,
    pub(crate) amount_total: i64,
    pub(crate) currency: String,
    pub(crate) client_reference_id: Option<String>,
    pub(crate) metadata: HashMap<String, String>,
    /// `payment_intent_data[metadata]`, carried to the payment
    pub(crate) intent_metadata: HashMap<String, String>,
    pub(crate) success_url: Option<String>,
    pub(crate) cancel_url: Option<String>,
    pub(crate) customer_email: Option<String>,
    pub(crate) line_items: Vec<LineItem>,
    pub(crate) payment_method_types: Vec<String>,
    /// what the request named (`allowed_payment_method_types`); `None`:
    /// the dashboard's dynamic methods
    pub(crate) allowed_payment_method_types: Option<Vec<String>>,
    /// shown in the shopper's currency (the account's default: on)
    pub(crate) adaptive_pricing: bool,
    /// open, complete or expired
    pub(crate) status: &'static str,
    /// paid, unpaid
    pub(crate) payment_status: &'static str,
    pub(crate) payment_intent: Option<String>,
    /// how its webhooks go out (test controls)
    pub(crate) pacing: Pacing,
}

impl Session {
    /// The session as Stripe shows it: every field of Stripe's published
    /// `checkout.session` object.
    pub(crate) fn to_json(&self, public_base: &str) -> Value {
        let mut session = json!({
            "id": self.id,
            "object": "checkout.session",
            "adaptive_pricing": { "enabled": self.adaptive_pricing },
            "after_expiration": null,
            "allow_promotion_codes": null,
            "allowed_payment_method_types": self.allowed_payment_method_types,
            "amount_subtotal": self.amount_total,
            "amount_total": self.amount_total,
            "automatic_tax": { "enabled": false, "liability": null, "provider": null, "status": null },
            "billing_address_collection": null,
            "cancel_url": self.cancel_url,
            "client_reference_id": self.client_reference_id,
            "client_secret": null,
            "collected_information": null,
            "consent": null,
            "consent_collection": null,
            "created": self.created,
            "currency": self.currency,
            "currency_conversion": null,
            "custom_fields": [],
            "custom_text": { "after_submit": null, "shipping_address": null, "submit": null, "terms_of_service_acceptance": null },
            "customer": null,
            "customer_account": null,
            "customer_creation": "if_required",
            "customer_details": self.customer_email.as_ref().map(|email| json!({
                "address": null, "business_name": null, "email": email, "individual_name": null,
                "name": null, "phone": null, "tax_exempt": "none", "tax_ids": [],
            })),
            "customer_email": self.customer_email,
            "discounts": [],
            "expires_at": self.expires_at,
        });
        let rest = json!({
            "integration_identifier": null,
            "invoice": null,
            "invoice_creation": { "enabled": false, "invoice_data": {
                "account_tax_ids": null, "custom_fields": null, "description": null, "footer": null,
                "issuer": null, "metadata": {}, "rendering_options": null,
            } },
            "livemode": false,
            "locale": null,
            "managed_payments": null,
            "metadata": self.metadata,
            "mode": "payment",
            "origin_context": null,
            "payment_intent": self.payment_intent,
            "payment_link": null,
            "payment_method_collection": "if_required",
            "payment_method_configuration_details": null,
            "payment_method_options": {},
            "payment_method_types": self.payment_method_types,
            "payment_status": self.payment_status,
            "permissions": null,
            "phone_number_collection": { "enabled": false },
            "recovered_from": null,
            "saved_payment_method_options": null,
            "setup_intent": null,
            "shipping_address_collection": null,
            "shipping_cost": null,
            "shipping_options": [],
            "status": self.status,
            "submit_type": null,
            "subscription": null,
            "success_url": self.success_url,
            "total_details": { "amount_discount": 0, "amount_shipping": 0, "amount_tax": 0 },
            "ui_mode": "hosted_page",
            "url": (self.status == "open").then(|| format!("{public_base}/stripe/pay/{}", self.id)),
            "wallet_options": null,
        });
        if let (Some(object), Value::Object(rest)) = (session.as_object_mut(), rest) {
            object.extend(rest);
        }
        session
    }

    pub(crate) fn allows(&self, method: &str) -> bool {
        self.payment_method_types.iter().any(|m| m == method)
    }
}

/// A session's PaymentIntent, made when the shopper pays on the page.
#[derive(Debug, Clone)]
pub(crate) struct Intent {
    pub(crate) session_id: String,
    pub(crate) created: i64,
    /// processing (a delayed method settling), succeeded, or
    /// requires_payment_method (a debit that failed)
    pub(crate) status: &'static str,
    /// the method it was paid with
    pub(crate) method: &'static str,
}

impl Intent {
    /// The PaymentIntent as Stripe shows it: every field of Stripe's
    /// published `payment_intent` object (`openapi/fixtures3.json` of
    /// github.com/stripe/openapi), with the session's amount, currency,
    /// methods and metadata.
    pub(crate) fn to_json(&self, id: &str, session: &Session) -> Value {
        let received = if self.status == "succeeded" {
            session.amount_total
        } else {
            0
        };
        let failed = (self.status == "requires_payment_method").then(|| {
            json!({
                "type": "invalid_request_error",
                "code": "payment_method_provider_decline",
                "message": "The customer's bank refused the debit.",
                "param": null,
                "doc_url": null,
            })
        });
        let mut intent = json!({
            "id": id,
            "object": "payment_intent",
            "allowed_payment_method_types": session.allowed_payment_method_types,
            "amount": session.amount_total,
            "amount_capturable": 0,
            "amount_details": { "tip": {} },
            "amount_received": received,
            "application": null,
            "application_fee_amount": null,
            "automatic_payment_methods": null,
            "canceled_at": null,
            "cancellation_reason": null,
            "capture_method": "automatic",
            "client_secret": format!("{id}_secret_sandbox"),
            "confirmation_method": "automatic",
            "created": self.created,
            "currency": session.currency,
            "customer": null,
            "customer_account": null,
            "description": null,
            "excluded_payment_method_types": null,
            "last_payment_error": failed,
        });
        let rest = json!({
            "latest_charge": null,
            "livemode": false,
            "managed_payments": null,
            "metadata": session.intent_metadata,
            "next_action": null,
            "on_behalf_of": null,
            "payment_method": format!("pm_{}", id.trim_start_matches("pi_")),
            "payment_method_configuration_details": null,
            "payment_method_options": {},
            "payment_method_types": [self.method],
            "processing": null,
            "receipt_email": null,
            "review": null,
            "setup_future_usage": null,
            "shipping": null,
            "source": null,
            "statement_descriptor": null,
            "statement_descriptor_suffix": null,
            "status": self.status,
            "transfer_data": null,
            "transfer_group": null,
        });
        if let (Some(object), Value::Object(rest)) = (intent.as_object_mut(), rest) {
            object.extend(rest);
        }
        intent
    }
}

#[derive(Debug, Clone)]
pub(crate) struct Refund {
    pub(crate) id: String,
    pub(crate) payment_intent: String,
    pub(crate) session_id: String,
    pub(crate) amount: i64,
    pub(crate) currency: String,
    pub(crate) created: i64,
    pub(crate) metadata: HashMap<String, String>,
    /// pending, succeeded or failed
    pub(crate) status: &'static str,
}

impl Refund {
    /// The refund as Stripe shows it: every field of Stripe's published
    /// `refund` object.
    pub(crate) fn to_json(&self) -> Value {
        json!({
            "id": self.id,
            "object": "refund",
            "amount": self.amount,
            "balance_transaction": null,
            "charge": format!("ch_{}", self.payment_intent.trim_start_matches("pi_")),
            "created": self.created,
            "currency": self.currency,
            "customer": null,
            "customer_account": null,
            "destination_details": { "card": { "type": "refund" }, "type": "card" },
            "failure_reason": (self.status == "failed").then_some("unknown"),
            "metadata": self.metadata,
            "payment_intent": self.payment_intent,
            "payment_method": null,
            "reason": null,
            "receipt_number": null,
            "source_transfer_reversal": null,
            "status": self.status,
            "transfer_reversal": null,
        })
    }
}

/// A refusal in Stripe's words.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct StripeError {
    pub(crate) status: u16,
    /// `invalid_request_error` or `idempotency_error`
    pub(crate) kind: &'static str,
    pub(crate) code: Option<&'static str>,
    pub(crate) message: String,
    pub(crate) param: Option<String>,
}

impl StripeError {
    pub(crate) fn new(
        status: StatusCode,
        kind: &'static str,
        code: Option<&'static str>,
        message: impl Into<String>,
        param: Option<&str>,
    ) -> Self {
        Self {
            status: status.as_u16(),
            kind,
            code,
            message: message.into(),
            param: param.map(str::to_owned),
        }
    }

    /// 400 `invalid_request_error`: a request Stripe does not take.
    pub(crate) fn invalid(message: impl Into<String>, param: Option<&str>) -> Self {
        Self::new(
            StatusCode::BAD_REQUEST,
            "invalid_request_error",
            None,
            message,
            param,
        )
    }

    /// 400 with one of Stripe's error codes.
    pub(crate) fn coded(
        code: &'static str,
        message: impl Into<String>,
        param: Option<&str>,
    ) -> Self {
        Self::new(
            StatusCode::BAD_REQUEST,
            "invalid_request_error",
            Some(code),
            message,
            param,
        )
    }

    /// A parameter Stripe requires is missing.
    pub(crate) fn required(param: &str) -> Self {
        Self::invalid(format!("Missing required param: {param}."), Some(param))
    }

    /// 404 `resource_missing`: no such object.
    pub(crate) fn missing(kind: &str, id: &str, param: &str) -> Self {
        Self::new(
            StatusCode::NOT_FOUND,
            "invalid_request_error",
            Some("resource_missing"),
            format!("No such {kind}: '{id}'"),
            Some(param),
        )
    }

    /// 401: no API key, or not this account's
    /// (docs.stripe.com/api/authentication).
    pub(crate) fn unauthorised(given: bool) -> Self {
        let message = if given {
            "Invalid API Key provided."
        } else {
            "You did not provide an API key. You need to provide your API key in the \
             Authorization header, using Bearer auth (e.g. 'Authorization: Bearer \
             YOUR_SECRET_KEY')."
        };
        Self::new(
            StatusCode::UNAUTHORIZED,
            "invalid_request_error",
            None,
            message,
            None,
        )
    }

    pub(crate) fn status(&self) -> StatusCode {
        StatusCode::from_u16(self.status).unwrap_or(StatusCode::BAD_REQUEST)
    }

    /// The body Stripe answers with.
    pub(crate) fn body(&self) -> Value {
        json!({
            "error": {
                "type": self.kind, "code": self.code, "message": self.message, "param": self.param,
                "doc_url": self.code.map(|c| format!("https://stripe.com/docs/error-codes/{}", c.replace('_', "-"))),
            }
        })
    }

    pub(crate) fn response(&self) -> HttpResponse {
        HttpResponse::build(self.status()).json(self.body())
    }
}

/// Stripe's words for requests the sandbox cannot read.
pub(crate) struct StripeDialect;

impl Dialect for StripeDialect {
    fn refuse(status: StatusCode, message: &str, field: Option<&str>) -> HttpResponse {
        StripeError::new(status, "invalid_request_error", None, message, field).response()
    }

    /// Stripe answers 404 to a URL it does not serve, and to a method a URL
    /// does not take, naming both.
    fn unknown_route(request: &HttpRequest) -> HttpResponse {
        // the path as Stripe would see it, without the sandbox's /stripe
        let path = request.path();
        let path = path
            .strip_prefix("/stripe")
            .filter(|p| p.starts_with('/'))
            .unwrap_or(path);
        StripeError::new(
            StatusCode::NOT_FOUND,
            "invalid_request_error",
            None,
            format!("Unrecognized request URL ({}: {path}).", request.method()),
            None,
        )
        .response()
    }
}
