//! Razorpay's requests as the sandbox reads them: a JSON object body (every
//! request in Razorpay's API reference is `content-type: application/json`,
//! razorpay.com/docs/api/orders/create), parsed into the sandbox's own
//! request types, or refused in Razorpay's words. No I/O and no clock, so
//! the fuzz target in `fuzz/` and `crates/sandbox/tests/` run them on any
//! bytes.

use serde_json::{Map, Value, json};

use super::objects::{Capture, RazorpayError};
use crate::dialect::media_type;
use crate::idempotency::{Fingerprint, fingerprint};

/// A JSON object body; an empty body is an empty object.
pub(crate) fn json_object(
    content_type: Option<&str>,
    body: &[u8],
) -> Result<Map<String, Value>, RazorpayError> {
    if body.is_empty() {
        return Ok(Map::new());
    }
    if media_type(content_type).as_deref() != Some("application/json") {
        return Err(RazorpayError::invalid(
            "The request body must be JSON, sent with Content-Type: application/json",
            None,
        ));
    }
    match serde_json::from_slice::<Value>(body) {
        Ok(Value::Object(map)) => Ok(map),
        _ => Err(RazorpayError::invalid(
            "The request body is not valid JSON",
            None,
        )),
    }
}

/// Refuse fields Razorpay does not take, as it does.
fn extra_field(body: &Map<String, Value>, allowed: &[&str]) -> Result<(), RazorpayError> {
    match body.keys().find(|key| !allowed.contains(&key.as_str())) {
        Some(key) => Err(RazorpayError::invalid(
            format!(
                "{} is/are not required and should not be sent",
                key.chars().take(100).collect::<String>()
            ),
            Some(key),
        )),
        None => Ok(()),
    }
}

/// Notes (razorpay.com/docs/api/orders/create, `notes`): at most 15, each
/// value at most 256 characters.
fn notes(body: &Map<String, Value>) -> Result<Value, RazorpayError> {
    match body.get("notes") {
        None | Some(Value::Null) => Ok(json!({})),
        Some(Value::Object(map)) if map.len() <= 15 => {
            if map
                .values()
                .any(|v| v.as_str().is_none_or(|s| s.chars().count() > 256))
            {
                Err(RazorpayError::invalid(
                    "The notes may have up to 15 keys of up to 256 characters each",
                    Some("notes"),
                ))
            } else {
                Ok(Value::Object(map.clone()))
            }
        }
        Some(Value::Object(_)) => Err(RazorpayError::invalid(
            "The notes may have up to 15 keys",
            Some("notes"),
        )),
        Some(_) => Err(RazorpayError::invalid(
            "The notes must be an object",
            Some("notes"),
        )),
    }
}

/// A whole number of minor units, or the field's refusal.
fn integer(body: &Map<String, Value>, field: &str) -> Result<Option<i64>, RazorpayError> {
    match body.get(field) {
        None | Some(Value::Null) => Ok(None),
        Some(value) => value.as_i64().map(Some).ok_or_else(|| {
            RazorpayError::invalid(format!("The {field} must be an integer."), Some(field))
        }),
    }
}

/// `POST /v1/orders`.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct CreateOrder {
    pub(crate) amount: i64,
    pub(crate) currency: String,
    pub(crate) receipt: Option<String>,
    /// an object (empty if none were given)
    pub(crate) notes: Value,
    pub(crate) capture: Capture,
}

/// Capture windows of Razorpay's legacy `payment_capture`: automatic,
/// however late.
const ALWAYS: i64 = i64::MAX / 120;

impl CreateOrder {
    /// An order as Razorpay checks it (razorpay.com/docs/api/orders/create):
    /// only the fields it takes; `amount` an integer of at least 100 (its
    /// documented "The amount must be at least INR 1.00"); `currency`
    /// three capital letters; `receipt` at most 40 characters; at most 15
    /// notes; and the order's capture settings.
    pub(crate) fn parse(content_type: Option<&str>, body: &[u8]) -> Result<Self, RazorpayError> {
        let body = json_object(content_type, body)?;
        extra_field(
            &body,
            &[
                "amount",
                "currency",
                "receipt",
                "notes",
                "partial_payment",
                "first_payment_min_amount",
                "payment",
                "payment_capture",
            ],
        )?;
        let Some(amount) = integer(&body, "amount")? else {
            return Err(RazorpayError::invalid(
                "The amount field is required.",
                Some("amount"),
            ));
        };
        let currency = match body.get("currency") {
            None | Some(Value::Null) => {
                return Err(RazorpayError::invalid(
                    "The currency field is required.",
                    Some("currency"),
                ));
            }
            Some(Value::String(c)) if c.len() == 3 && c.bytes().all(|b| b.is_ascii_uppercase()) => {
                c.clone()
            }
            Some(_) => {
                return Err(RazorpayError::invalid(
                    "The currency is invalid.",
                    Some("currency"),
                ));
            }
        };
        if amount < 100 {
            return Err(RazorpayError::invalid(
                format!("The amount must be at least {currency} 1.00"),
                Some("amount"),
            ));
        }
        let receipt = match body.get("receipt") {
            None | Some(Value::Null) => None,
            Some(Value::String(r)) if r.chars().count() <= 40 => Some(r.clone()),
            Some(_) => {
                return Err(RazorpayError::invalid(
                    "The receipt may not be greater than 40 characters.",
                    Some("receipt"),
                ));
            }
        };
        let notes = notes(&body)?;
        let capture = capture_settings(&body)?;
        Ok(Self {
            amount,
            currency,
            receipt,
            notes,
            capture,
        })
    }

    /// The order as a client would send it (what parses back to this).
    pub(crate) fn to_json(&self) -> Value {
        let mut body = json!({
            "amount": self.amount, "currency": self.currency, "notes": self.notes,
        });
        if let Some(object) = body.as_object_mut() {
            if let Some(receipt) = &self.receipt {
                object.insert("receipt".into(), json!(receipt));
            }
            let capture = match self.capture {
                Capture::Manual => json!({ "payment": { "capture": "manual" } }),
                Capture::Automatic {
                    window_minutes: ALWAYS,
                } => json!({ "payment_capture": true }),
                Capture::Automatic { window_minutes } => json!({ "payment": {
                    "capture": "automatic",
                    "capture_options": { "automatic_expiry_period": window_minutes },
                } }),
            };
            if let Value::Object(capture) = capture {
                object.extend(capture);
            }
        }
        body
    }
}

/// The order's `payment` settings (razorpay.com/docs/payments/payments/
/// capture-settings/api): `capture` automatic or manual; for automatic,
/// `capture_options.automatic_expiry_period` (minutes, at least 12);
/// `manual_expiry_period` not below it and at most 7200; `refund_speed`
/// normal or optimum. Without them, the account's setting, which in the
/// sandbox is manual.
fn capture_settings(body: &Map<String, Value>) -> Result<Capture, RazorpayError> {
    if let Some(legacy) = body.get("payment_capture") {
        return match legacy {
            Value::Bool(true) => Ok(Capture::Automatic {
                window_minutes: ALWAYS,
            }),
            Value::Number(n) if n.as_i64() == Some(1) => Ok(Capture::Automatic {
                window_minutes: ALWAYS,
            }),
            Value::Bool(false) => Ok(Capture::Manual),
            Value::Number(n) if n.as_i64() == Some(0) => Ok(Capture::Manual),
            _ => Err(RazorpayError::invalid(
                "The payment capture field must be true or false.",
                Some("payment_capture"),
            )),
        };
    }
    let Some(payment) = body.get("payment") else {
        // the account's setting
        return Ok(Capture::Manual);
    };
    let Some(payment) = payment.as_object() else {
        return Err(RazorpayError::invalid(
            "payment must be an object",
            Some("payment"),
        ));
    };
    extra_field(payment, &["capture", "capture_options"])?;
    let options = match payment.get("capture_options") {
        Some(Value::Object(map)) => {
            extra_field(
                map,
                &[
                    "automatic_expiry_period",
                    "manual_expiry_period",
                    "refund_speed",
                ],
            )?;
            Some(map)
        }
        None | Some(Value::Null) => None,
        Some(_) => {
            return Err(RazorpayError::invalid(
                "capture_options must be an object",
                Some("capture_options"),
            ));
        }
    };
    let minutes = |name: &str| options.and_then(|o| o.get(name)).map(Value::as_i64);
    if let Some(speed) = options.and_then(|o| o.get("refund_speed"))
        && !matches!(speed.as_str(), Some("normal" | "optimum"))
    {
        return Err(RazorpayError::invalid(
            "refund_speed must be normal or optimum",
            Some("refund_speed"),
        ));
    }
    match payment.get("capture").and_then(Value::as_str) {
        Some("automatic") => {
            let Some(Some(automatic)) = minutes("automatic_expiry_period") else {
                return Err(RazorpayError::invalid(
                    "The automatic_expiry_period field is required when capture is automatic.",
                    Some("automatic_expiry_period"),
                ));
            };
            if automatic < 12 {
                return Err(RazorpayError::invalid(
                    "automatic_expiry_period must be at least 12 minutes",
                    Some("automatic_expiry_period"),
                ));
            }
            if let Some(manual) = minutes("manual_expiry_period") {
                match manual {
                    Some(manual) if manual >= automatic && manual <= 7200 => {}
                    _ => {
                        return Err(RazorpayError::invalid(
                            "manual_expiry_period must be at least automatic_expiry_period and at most 7200 minutes",
                            Some("manual_expiry_period"),
                        ));
                    }
                }
            }
            Ok(Capture::Automatic {
                window_minutes: automatic,
            })
        }
        Some("manual") => Ok(Capture::Manual),
        _ => Err(RazorpayError::invalid(
            "The capture field must be automatic or manual.",
            Some("capture"),
        )),
    }
}

/// `POST /v1/payments/{id}/capture` (razorpay.com/docs/api/payments/
/// capture): `amount` and `currency`, both required.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct CapturePayment {
    pub(crate) amount: i64,
    pub(crate) currency: String,
}

impl CapturePayment {
    pub(crate) fn parse(content_type: Option<&str>, body: &[u8]) -> Result<Self, RazorpayError> {
        let body = json_object(content_type, body)?;
        extra_field(&body, &["amount", "currency"])?;
        let Some(amount) = integer(&body, "amount")? else {
            return Err(RazorpayError::invalid(
                "The amount must be an integer.",
                Some("amount"),
            ));
        };
        let Some(currency) = body.get("currency").and_then(Value::as_str) else {
            return Err(RazorpayError::invalid(
                "The currency field is required.",
                Some("currency"),
            ));
        };
        Ok(Self {
            amount,
            currency: currency.to_owned(),
        })
    }
}

/// `X-Refund-Idempotency` (razorpay.com/docs/api/refunds/
/// normal-refunds-idempotent): at least 10 letters, digits, `-` and `_`.
fn refund_key_ok(key: &str) -> bool {
    (10..=255).contains(&key.len())
        && key
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
}

/// `POST /v1/payments/{id}/refund` (razorpay.com/docs/api/refunds/
/// create-normal): `amount` (none: the rest), `speed` normal or optimum,
/// `notes`, `receipt`; with its `X-Refund-Idempotency` key, if any.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct CreateRefund {
    pub(crate) key: Option<String>,
    /// The body as sent, for comparing a repeat under the key.
    pub(crate) fingerprint: Fingerprint,
    pub(crate) amount: Option<i64>,
    pub(crate) speed: String,
    pub(crate) notes: Value,
    pub(crate) receipt: Option<String>,
}

impl CreateRefund {
    pub(crate) fn parse(
        content_type: Option<&str>,
        body: &[u8],
        key: Option<&[u8]>,
    ) -> Result<Self, RazorpayError> {
        let key = match key.map(std::str::from_utf8) {
            None => None,
            Some(Ok(key)) if refund_key_ok(key) => Some(key.to_owned()),
            Some(_) => {
                return Err(RazorpayError::invalid(
                    "X-Refund-Idempotency must be at least 10 characters of letters, digits, hyphens and underscores",
                    None,
                ));
            }
        };
        let fields = json_object(content_type, body)?;
        extra_field(&fields, &["amount", "speed", "notes", "receipt"])?;
        let notes = notes(&fields)?;
        let speed = match fields.get("speed") {
            None => "normal".to_owned(),
            Some(Value::String(s)) if s == "normal" || s == "optimum" => s.clone(),
            Some(_) => {
                return Err(RazorpayError::invalid(
                    "speed must be normal or optimum",
                    Some("speed"),
                ));
            }
        };
        let amount = match fields.get("amount") {
            None => None,
            Some(value) => match value.as_i64().filter(|a| *a > 0) {
                Some(amount) => Some(amount),
                None => {
                    return Err(RazorpayError::invalid(
                        "The amount must be an integer.",
                        Some("amount"),
                    ));
                }
            },
        };
        let receipt = fields
            .get("receipt")
            .and_then(Value::as_str)
            .map(str::to_owned);
        Ok(Self {
            key,
            fingerprint: fingerprint(&[body]),
            amount,
            speed,
            notes,
            receipt,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const JSON: Option<&str> = Some("application/json");

    #[test]
    fn an_order_without_an_amount_is_refused_not_a_panic() {
        let refused = CreateOrder::parse(JSON, br#"{"currency":"INR"}"#).unwrap_err();
        assert_eq!(refused.status, 400);
        assert_eq!(refused.field.as_deref(), Some("amount"));
        let refused =
            CreateOrder::parse(JSON, br#"{"amount":"100","currency":"INR"}"#).unwrap_err();
        assert_eq!(refused.field.as_deref(), Some("amount"));
        let refused = CreateOrder::parse(Some("text/plain"), br#"{"amount":100}"#).unwrap_err();
        assert!(refused.description.contains("JSON"));
    }

    #[test]
    fn an_order_writes_back_the_same() {
        for body in [
            br#"{"amount":5000,"currency":"INR","receipt":"r-1","notes":{"a":"b"}}"#.as_slice(),
            br#"{"amount":5000,"currency":"INR","payment_capture":1}"#,
            br#"{"amount":5000,"currency":"INR","payment":{"capture":"automatic","capture_options":{"automatic_expiry_period":12}}}"#,
        ] {
            let order = CreateOrder::parse(JSON, body).unwrap();
            let again = CreateOrder::parse(JSON, order.to_json().to_string().as_bytes()).unwrap();
            assert_eq!(again, order);
        }
    }
}
