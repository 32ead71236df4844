//! Stripe's requests as the sandbox reads them: a form-encoded body
//! (docs.stripe.com/api: "accepts form-encoded request bodies"; another
//! content type is refused as Stripe refuses it, "Invalid request:
//! unsupported Content-Type …") with nested keys
//! (`line_items[0][price_data][currency]=eur`), parsed into the sandbox's
//! own request types, or refused in Stripe's words. These functions do no
//! I/O and read no clock (the caller passes `now`), so the fuzz target in
//! `fuzz/` and `crates/sandbox/tests/` run them on any bytes.

use std::collections::HashMap;

use serde::Deserialize;

use super::methods::methods;
use super::objects::{LineItem, StripeError};
use crate::dialect::media_type;

/// The first API version without `payment_method_types` on Checkout
/// Sessions (`allowed_payment_method_types` instead; changelog, endive
/// 2026-09-30).
pub(crate) const ALLOWED_METHODS_SINCE: &str = "2026-09-30";

/// The most one amount may be: eight digits in the currency's minor unit
/// (docs.stripe.com/currencies#minimum-and-maximum-charge-amounts: "The
/// amount value supports up to eight digits (e.g., a value of 99999999
/// for a USD charge of $999,999.99)").
pub(crate) const MAX_AMOUNT: i64 = 99_999_999;

/// Refuse a body that is not form-encoded. An empty body is no parameters,
/// whatever its type.
pub(crate) fn form_body(content_type: Option<&str>, body: &[u8]) -> Result<(), StripeError> {
    if body.is_empty() {
        return Ok(());
    }
    match media_type(content_type).as_deref() {
        Some("application/x-www-form-urlencoded") => Ok(()),
        _ => Err(StripeError::invalid(
            format!(
                "Invalid request: unsupported Content-Type {}. If error persists and you need \
                 assistance, please contact support@stripe.com.",
                content_type
                    .unwrap_or_default()
                    .chars()
                    .take(100)
                    .collect::<String>()
            ),
            None,
        )),
    }
}

/// Read Stripe's form encoding. A parameter Stripe does not take is
/// refused in Stripe's words ("Received unknown parameter"), with its name
/// as `param` (docs.stripe.com/api/errors).
pub(crate) fn parse_form<T: for<'de> Deserialize<'de>>(
    content_type: Option<&str>,
    body: &[u8],
) -> Result<T, StripeError> {
    form_body(content_type, body)?;
    serde_qs::Config::new()
        .max_depth(6)
        .use_form_encoding(true)
        .deserialize_bytes(body)
        .map_err(|error| {
            let text = error.to_string();
            match text
                .split_once("unknown field `")
                .and_then(|(_, rest)| rest.split_once('`'))
            {
                Some((field, _)) => {
                    let field: String = field.chars().take(200).collect();
                    StripeError::invalid(
                        format!("Received unknown parameter: {field}"),
                        Some(&field),
                    )
                }
                None => StripeError::invalid(
                    format!(
                        "Invalid request: the parameters could not be read ({}).",
                        text.chars().take(200).collect::<String>()
                    ),
                    None,
                ),
            }
        })
}

/// `POST /v1/checkout/sessions`, as the sandbox takes it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct CreateSession {
    pub(crate) expires_at: i64,
    pub(crate) success_url: String,
    pub(crate) cancel_url: Option<String>,
    pub(crate) client_reference_id: Option<String>,
    pub(crate) customer_email: Option<String>,
    pub(crate) metadata: HashMap<String, String>,
    /// `payment_intent_data[metadata]`, carried to the payment
    pub(crate) intent_metadata: HashMap<String, String>,
    pub(crate) line_items: Vec<LineItem>,
    pub(crate) currency: String,
    /// What it offers: named, or the account's choice for the currency
    pub(crate) payment_method_types: Vec<String>,
    /// Whether the request named its methods itself.
    pub(crate) methods_named: bool,
    /// shown in the shopper's currency (the account's default: on)
    pub(crate) adaptive_pricing: bool,
    /// the request's `Stripe-Version` is before
    /// [`ALLOWED_METHODS_SINCE`]
    pub(crate) legacy: bool,
}

impl CreateSession {
    pub(crate) fn amount_total(&self) -> i64 {
        // bounded by parse: every product and sum is at most MAX_AMOUNT
        self.line_items
            .iter()
            .map(|item| item.quantity.saturating_mul(item.unit_amount))
            .fold(0i64, i64::saturating_add)
    }
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct CreateSessionForm {
    mode: Option<String>,
    success_url: Option<String>,
    cancel_url: Option<String>,
    client_reference_id: Option<String>,
    customer_email: Option<String>,
    expires_at: Option<i64>,
    #[serde(default)]
    metadata: HashMap<String, String>,
    #[serde(default)]
    payment_intent_data: Option<IntentDataForm>,
    #[serde(default)]
    line_items: Vec<LineItemForm>,
    /// what API versions from 2026-09-30 take
    #[serde(default)]
    allowed_payment_method_types: Vec<String>,
    /// what versions before 2026-09-30 take
    #[serde(default)]
    payment_method_types: Vec<String>,
    #[serde(default)]
    adaptive_pricing: Option<AdaptivePricingForm>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct AdaptivePricingForm {
    enabled: Option<bool>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct IntentDataForm {
    #[serde(default)]
    metadata: HashMap<String, String>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct LineItemForm {
    quantity: Option<i64>,
    price_data: Option<PriceDataForm>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct PriceDataForm {
    currency: Option<String>,
    unit_amount: Option<i64>,
    product_data: Option<ProductDataForm>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct ProductDataForm {
    name: Option<String>,
}

/// Stripe's metadata limits (docs.stripe.com/metadata): 50 keys, keys up
/// to 40 characters without square brackets, values up to 500.
pub(crate) fn metadata_problem(
    metadata: &HashMap<String, String>,
    param: &str,
) -> Option<StripeError> {
    if metadata.len() > 50 {
        return Some(StripeError::invalid(
            "Metadata can have up to 50 keys.",
            Some(param),
        ));
    }
    for (key, value) in metadata {
        if key.is_empty() || key.chars().count() > 40 || key.contains(['[', ']']) {
            return Some(StripeError::invalid(
                "Metadata keys must be 1 to 40 characters, without square brackets.",
                Some(param),
            ));
        }
        if value.chars().count() > 500 {
            return Some(StripeError::invalid(
                "Metadata values can have up to 500 characters.",
                Some(param),
            ));
        }
    }
    None
}

impl CreateSession {
    /// Read a Checkout Session request as Stripe checks it when it
    /// arrives at `now`: `expires_at` 30 minutes to 24 hours after `now`
    /// (docs.stripe.com/api/checkout/sessions/create#create_checkout_session-expires_at),
    /// a line item or more in one lower-case currency
    /// (docs.stripe.com/currencies: "You must use all lowercase letters"),
    /// amounts of at most eight digits, metadata within Stripe's limits,
    /// and the payment-method parameter the request's `Stripe-Version`
    /// has.
    pub(crate) fn parse(
        content_type: Option<&str>,
        body: &[u8],
        stripe_version: Option<&str>,
        now: i64,
    ) -> Result<Self, StripeError> {
        let form: CreateSessionForm = parse_form(content_type, body)?;
        match form.mode.as_deref() {
            Some("payment") => {}
            None => return Err(StripeError::required("mode")),
            Some(_) => {
                return Err(StripeError::invalid(
                    "The sandbox only supports mode=payment.",
                    Some("mode"),
                ));
            }
        }
        let expires_at = form.expires_at.unwrap_or(now.saturating_add(24 * 3600));
        if !(now.saturating_add(30 * 60)..=now.saturating_add(24 * 3600)).contains(&expires_at) {
            return Err(StripeError::invalid(
                "The `expires_at` timestamp must be between 30 minutes and 24 hours from Checkout Session creation.",
                Some("expires_at"),
            ));
        }
        if form
            .client_reference_id
            .as_ref()
            .is_some_and(|id| id.is_empty() || id.chars().count() > 200)
        {
            return Err(StripeError::invalid(
                "client_reference_id must be 1 to 200 characters.",
                Some("client_reference_id"),
            ));
        }
        let Some(success_url) = form.success_url else {
            return Err(StripeError::required("success_url"));
        };
        let intent_metadata = form
            .payment_intent_data
            .map(|data| data.metadata)
            .unwrap_or_default();
        if let Some(problem) = metadata_problem(&form.metadata, "metadata")
            .or_else(|| metadata_problem(&intent_metadata, "payment_intent_data[metadata]"))
        {
            return Err(problem);
        }
        let mut line_items = Vec::new();
        let mut currency: Option<String> = None;
        let mut total: i64 = 0;
        for (index, item) in form.line_items.into_iter().enumerate() {
            let (Some(quantity), Some(price)) = (item.quantity, item.price_data) else {
                return Err(StripeError::invalid(
                    "Each line item needs a quantity and price_data.",
                    Some(&format!("line_items[{index}]")),
                ));
            };
            let (Some(amount), Some(name), Some(item_currency)) = (
                price.unit_amount,
                price.product_data.and_then(|p| p.name),
                price.currency,
            ) else {
                return Err(StripeError::invalid(
                    "price_data needs currency, unit_amount and product_data[name].",
                    Some(&format!("line_items[{index}][price_data]")),
                ));
            };
            if quantity <= 0 || amount < 0 {
                return Err(StripeError::invalid(
                    "Invalid quantity or amount.",
                    Some(&format!("line_items[{index}]")),
                ));
            }
            if item_currency.len() != 3 || !item_currency.bytes().all(|b| b.is_ascii_lowercase()) {
                return Err(StripeError::invalid(
                    format!(
                        "Invalid currency: {}. Currencies are three lower-case letters.",
                        item_currency.chars().take(20).collect::<String>()
                    ),
                    Some(&format!("line_items[{index}][price_data][currency]")),
                ));
            }
            if currency.get_or_insert_with(|| item_currency.clone()) != &item_currency {
                return Err(StripeError::invalid(
                    "All line items must share one currency.",
                    Some("line_items"),
                ));
            }
            total = match quantity
                .checked_mul(amount)
                .and_then(|line| line.checked_add(total))
            {
                Some(total) if amount <= MAX_AMOUNT && total <= MAX_AMOUNT => total,
                _ => {
                    return Err(StripeError::invalid(
                        "Amount must be no more than 99999999 in the currency's smallest unit.",
                        Some(&format!("line_items[{index}]")),
                    ));
                }
            };
            line_items.push(LineItem {
                name,
                quantity,
                unit_amount: amount,
            });
        }
        let Some(currency) = currency else {
            return Err(StripeError::required("line_items"));
        };
        let legacy = stripe_version.is_some_and(|v| v < ALLOWED_METHODS_SINCE);
        let (payment_method_types, methods_named) = methods(
            legacy,
            form.allowed_payment_method_types,
            form.payment_method_types,
            &currency,
        )?;
        Ok(Self {
            expires_at,
            success_url,
            cancel_url: form.cancel_url,
            client_reference_id: form.client_reference_id,
            customer_email: form.customer_email,
            metadata: form.metadata,
            intent_metadata,
            line_items,
            currency,
            payment_method_types,
            methods_named,
            adaptive_pricing: form
                .adaptive_pricing
                .and_then(|a| a.enabled)
                .unwrap_or(true),
            legacy,
        })
    }

    /// The request as a client would send it (what parses back to this).
    pub(crate) fn to_form(&self) -> String {
        let mut form = FormWriter::default();
        form.pair("mode", "payment");
        form.pair("success_url", &self.success_url);
        form.optional("cancel_url", self.cancel_url.as_deref());
        form.optional("client_reference_id", self.client_reference_id.as_deref());
        form.optional("customer_email", self.customer_email.as_deref());
        form.pair("expires_at", &self.expires_at.to_string());
        for (key, value) in &self.metadata {
            form.pair(&format!("metadata[{}]", encode(key)), value);
        }
        for (key, value) in &self.intent_metadata {
            form.pair(
                &format!("payment_intent_data[metadata][{}]", encode(key)),
                value,
            );
        }
        for (index, item) in self.line_items.iter().enumerate() {
            let line = format!("line_items[{index}]");
            form.pair(&format!("{line}[quantity]"), &item.quantity.to_string());
            form.pair(&format!("{line}[price_data][currency]"), &self.currency);
            form.pair(
                &format!("{line}[price_data][unit_amount]"),
                &item.unit_amount.to_string(),
            );
            form.pair(
                &format!("{line}[price_data][product_data][name]"),
                &item.name,
            );
        }
        if self.methods_named {
            let name = if self.legacy {
                "payment_method_types"
            } else {
                "allowed_payment_method_types"
            };
            for (index, method) in self.payment_method_types.iter().enumerate() {
                form.pair(&format!("{name}[{index}]"), method);
            }
        }
        form.pair(
            "adaptive_pricing[enabled]",
            if self.adaptive_pricing {
                "true"
            } else {
                "false"
            },
        );
        form.0
    }
}

/// `POST /v1/refunds`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct CreateRefund {
    pub(crate) payment_intent: String,
    /// `None`: whatever is left of the payment
    pub(crate) amount: Option<i64>,
    pub(crate) metadata: HashMap<String, String>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RefundForm {
    payment_intent: Option<String>,
    amount: Option<i64>,
    #[serde(default)]
    metadata: HashMap<String, String>,
}

impl CreateRefund {
    /// A refund of a payment intent (docs.stripe.com/api/refunds/create):
    /// `payment_intent` required, `amount` a positive integer.
    pub(crate) fn parse(content_type: Option<&str>, body: &[u8]) -> Result<Self, StripeError> {
        let form: RefundForm = parse_form(content_type, body)?;
        let Some(payment_intent) = form.payment_intent else {
            return Err(StripeError::required("payment_intent"));
        };
        if form.amount.is_some_and(|amount| amount < 1) {
            return Err(StripeError::invalid(
                "This value must be greater than or equal to 1.",
                Some("amount"),
            ));
        }
        if let Some(problem) = metadata_problem(&form.metadata, "metadata") {
            return Err(problem);
        }
        Ok(Self {
            payment_intent,
            amount: form.amount,
            metadata: form.metadata,
        })
    }

    pub(crate) fn to_form(&self) -> String {
        let mut form = FormWriter::default();
        form.pair("payment_intent", &self.payment_intent);
        if let Some(amount) = self.amount {
            form.pair("amount", &amount.to_string());
        }
        for (key, value) in &self.metadata {
            form.pair(&format!("metadata[{}]", encode(key)), value);
        }
        form.0
    }
}

/// `GET /v1/refunds?payment_intent=…&limit=…`.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub(crate) struct ListRefunds {
    pub(crate) payment_intent: Option<String>,
    pub(crate) limit: Option<i64>,
}

impl ListRefunds {
    /// A list's `limit` is 1 to 100, 10 unless given
    /// (docs.stripe.com/api/pagination).
    pub(crate) fn parse(query: &[u8]) -> Result<(Option<String>, usize), StripeError> {
        let list: ListRefunds = serde_qs::Config::new()
            .max_depth(2)
            .use_form_encoding(true)
            .deserialize_bytes(query)
            .map_err(|error| {
                StripeError::invalid(
                    format!(
                        "Invalid request: the parameters could not be read ({}).",
                        error.to_string().chars().take(200).collect::<String>()
                    ),
                    None,
                )
            })?;
        match list.limit.unwrap_or(10) {
            limit @ 1..=100 => Ok((list.payment_intent, limit as usize)),
            _ => Err(StripeError::invalid(
                "limit must be between 1 and 100.",
                Some("limit"),
            )),
        }
    }
}

/// Where `POST /v1/events/{id}/retry` sends an event again.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum RetryTo {
    /// Every `stripe listen` session (`for_stripecli=true`, what
    /// `stripe events resend` sends).
    StripeCli,
    /// One webhook endpoint, by id (`--webhook-endpoint`).
    Endpoint(String),
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RetryForm {
    for_stripecli: Option<bool>,
    webhook_endpoint: Option<String>,
    account: Option<String>,
}

/// `POST /v1/events/{id}/retry`, the Stripe CLI's `events resend`
/// (github.com/stripe/stripe-cli, pkg/cmd/resource/events_resend.go):
/// `for_stripecli=true` unless `--webhook-endpoint` names an endpoint.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct RetryEvent {
    pub(crate) to: RetryTo,
    /// A connected account (Connect), which the sandbox has none of.
    pub(crate) account: Option<String>,
}

impl RetryEvent {
    pub(crate) fn parse(content_type: Option<&str>, body: &[u8]) -> Result<Self, StripeError> {
        let form: RetryForm = parse_form(content_type, body)?;
        let to = match (form.webhook_endpoint, form.for_stripecli) {
            (Some(endpoint), _) => RetryTo::Endpoint(endpoint),
            (None, Some(true)) => RetryTo::StripeCli,
            (None, _) => return Err(StripeError::required("webhook_endpoint")),
        };
        Ok(Self {
            to,
            account: form.account,
        })
    }
}

/// `POST /v1/stripecli/sessions`: a `stripe listen` asks for a session
/// (github.com/stripe/stripe-cli, pkg/stripeauth/client.go).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct CliSessionRequest {
    pub(crate) device_name: String,
    /// `webhooks` (snapshot events) and/or `v2_events` (thin events)
    pub(crate) websocket_features: Vec<String>,
    pub(crate) forward_to_url: Option<String>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct CliSessionForm {
    device_name: Option<String>,
    #[serde(default)]
    websocket_features: Vec<String>,
    filters: Option<String>,
    forward_to_url: Option<String>,
    forward_connect_to_url: Option<String>,
    forward_thin_to_url: Option<String>,
    forward_thin_connect_to_url: Option<String>,
}

impl CliSessionRequest {
    pub(crate) fn parse(content_type: Option<&str>, body: &[u8]) -> Result<Self, StripeError> {
        let form: CliSessionForm = parse_form(content_type, body)?;
        let Some(device_name) = form.device_name.filter(|name| !name.is_empty()) else {
            return Err(StripeError::required("device_name"));
        };
        let _ = (
            form.filters,
            form.forward_connect_to_url,
            form.forward_thin_to_url,
            form.forward_thin_connect_to_url,
        );
        Ok(Self {
            device_name,
            websocket_features: form.websocket_features,
            forward_to_url: form.forward_to_url,
        })
    }
}

/// An `application/x-www-form-urlencoded` body, written pair by pair.
#[derive(Debug, Default)]
struct FormWriter(String);

impl FormWriter {
    /// `key` is written as given (its brackets are structure); the value is
    /// percent-encoded.
    fn pair(&mut self, key: &str, value: &str) {
        if !self.0.is_empty() {
            self.0.push('&');
        }
        self.0.push_str(key);
        self.0.push('=');
        self.0.push_str(&encode(value));
    }

    fn optional(&mut self, key: &str, value: Option<&str>) {
        if let Some(value) = value {
            self.pair(key, value);
        }
    }
}

/// Percent-encode everything but the unreserved characters.
fn encode(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for byte in text.bytes() {
        if byte.is_ascii_alphanumeric() || matches!(byte, b'-' | b'.' | b'_' | b'~') {
            out.push(byte as char);
        } else {
            out.push_str(&format!("%{byte:02X}"));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    const FORM: Option<&str> = Some("application/x-www-form-urlencoded");

    fn session(extra: &str) -> Result<CreateSession, StripeError> {
        let body = format!(
            "mode=payment&success_url=https%3A%2F%2Fshop.test%2F\
             &line_items[0][quantity]=2&line_items[0][price_data][currency]=eur\
             &line_items[0][price_data][unit_amount]=1400\
             &line_items[0][price_data][product_data][name]=Honey{extra}"
        );
        CreateSession::parse(FORM, body.as_bytes(), None, 1_000_000)
    }

    #[test]
    fn a_session_request_parses_and_writes_back_the_same() {
        let parsed = session("&metadata[order_id]=a%26b").unwrap();
        assert_eq!(parsed.amount_total(), 2800);
        assert_eq!(parsed.payment_method_types, ["card", "sepa_debit"]);
        let again =
            CreateSession::parse(FORM, parsed.to_form().as_bytes(), None, 1_000_000).unwrap();
        assert_eq!(again, parsed);
    }

    #[test]
    fn stripe_refuses_what_it_does_not_take() {
        let param = |extra: &str| session(extra).unwrap_err().param;
        assert_eq!(param("&colour=blue").as_deref(), Some("colour"));
        assert_eq!(param("&expires_at=1000060").as_deref(), Some("expires_at"));
        assert_eq!(
            param("&line_items[1][quantity]=9223372036854775807&line_items[1][price_data][currency]=eur&line_items[1][price_data][unit_amount]=2&line_items[1][price_data][product_data][name]=x")
                .as_deref(),
            Some("line_items[1]")
        );
        let json = CreateSession::parse(Some("application/json"), b"{}", None, 0).unwrap_err();
        assert!(
            json.message
                .contains("unsupported Content-Type application/json")
        );
        assert_eq!(
            CreateRefund::parse(FORM, b"amount=0&payment_intent=pi_1")
                .unwrap_err()
                .param
                .as_deref(),
            Some("amount")
        );
    }

    #[test]
    fn the_cli_asks_for_a_session_with_its_features() {
        let asked = CliSessionRequest::parse(
            FORM,
            b"device_name=dev&websocket_features%5B%5D=webhooks&forward_to_url=http%3A%2F%2Flocalhost%3A8080",
        )
        .unwrap();
        assert_eq!(asked.websocket_features, ["webhooks"]);
        assert_eq!(
            RetryEvent::parse(FORM, b"for_stripecli=true").unwrap().to,
            RetryTo::StripeCli
        );
        assert!(RetryEvent::parse(FORM, b"").is_err());
    }
}
