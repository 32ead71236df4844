//! What the sandbox's fuzz targets check: any bytes, split into a request's
//! parts, go through the functions that turn a body (or a query) into the
//! sandbox's requests, for both providers; whatever comes out must be a
//! request within the provider's documented limits, or a refusal in the
//! provider's documented error shape, and never a panic. The fuzz targets
//! (`fuzz/fuzz_targets/stripe_requests.rs`, `razorpay_requests.rs`) are
//! one-line wrappers around these, and `crates/sandbox/tests/fuzz_seeds.rs`
//! replays the seeds (`fuzz/seeds/<target>/`) and every crash kept
//! (`fuzz/regressions/<target>/`) on stable.
//!
//! Inputs are text-friendly: the leading fields are single lines, the last
//! is the rest of the bytes. Property checks panic with a message naming
//! what failed (and never a secret: none is involved).

use serde_json::Value;

use crate::dialect::media_type;
use crate::razorpay::requests as razorpay;
use crate::razorpay::{RazorpayError, objects::Capture};
use crate::stripe::StripeError;
use crate::stripe::requests as stripe;

/// The first `N - 1` lines of `data`, then the rest; missing fields are empty.
fn fields<const N: usize>(data: &[u8]) -> [&[u8]; N] {
    let mut out: [&[u8]; N] = [&[]; N];
    for (slot, field) in out.iter_mut().zip(data.splitn(N, |b| *b == b'\n')) {
        *slot = field;
    }
    out
}

/// A header's value as a client would send it: absent when empty.
fn header(field: &[u8]) -> Option<String> {
    (!field.is_empty()).then(|| String::from_utf8_lossy(field).into_owned())
}

/// When the Stripe checks say the request arrived.
const NOW: i64 = 1_700_000_000;

/// A refusal is Stripe's shape (docs.stripe.com/api/errors): a 4xx, a
/// `type`, a message, a `param` that is null or a name.
fn check_stripe_error(error: &StripeError) {
    assert!(
        (400..500).contains(&error.status),
        "status {}",
        error.status
    );
    let body = error.body();
    let inner = &body["error"];
    assert!(
        matches!(
            inner["type"].as_str(),
            Some("invalid_request_error" | "idempotency_error")
        ),
        "type {}",
        inner["type"]
    );
    let message = inner["message"].as_str().unwrap_or_default();
    assert!(
        !message.is_empty() && message.chars().count() <= 1000,
        "a message of {} characters",
        message.chars().count()
    );
    assert!(inner["param"].is_null() || inner["param"].is_string());
    assert!(inner["code"].is_null() || inner["code"].is_string());
    // the body survives the wire
    let wire: Value = serde_json::from_str(&body.to_string()).expect("the error body is JSON");
    assert_eq!(wire, body);
}

/// A refusal is Razorpay's shape (razorpay.com/docs/errors): a 4xx and
/// every key of the error object.
fn check_razorpay_error(error: &RazorpayError) {
    assert!(
        (400..500).contains(&error.status),
        "status {}",
        error.status
    );
    let body = error.body();
    let inner = body["error"].as_object().expect("an error object");
    assert_eq!(inner["code"], "BAD_REQUEST_ERROR");
    let description = inner["description"].as_str().unwrap_or_default();
    assert!(!description.is_empty() && description.chars().count() <= 1000);
    for key in ["source", "step", "reason"] {
        assert!(inner[key].is_string(), "{key}");
    }
    assert!(inner["metadata"].is_object());
    assert!(inner.contains_key("field"));
    assert!(inner["field"].is_null() || inner["field"].is_string());
    let wire: Value = serde_json::from_str(&body.to_string()).expect("the error body is JSON");
    assert_eq!(wire, body);
}

/// `content type \n Stripe-Version \n body`: the body as each Stripe
/// request the sandbox takes (a session, a refund, an event resend, a
/// `stripe listen` session), and as the refunds list's query.
pub fn stripe_requests(data: &[u8]) {
    let [content_type, version, body] = fields::<3>(data);
    let content_type = header(content_type);
    let content_type = content_type.as_deref();
    let version = header(version);
    let form = Some("application/x-www-form-urlencoded");
    let not_form = !body.is_empty()
        && media_type(content_type).as_deref() != Some("application/x-www-form-urlencoded");

    let session = stripe::CreateSession::parse(content_type, body, version.as_deref(), NOW);
    assert_eq!(
        session,
        stripe::CreateSession::parse(content_type, body, version.as_deref(), NOW),
        "parsing is deterministic"
    );
    match &session {
        Err(error) => check_stripe_error(error),
        Ok(session) => {
            assert!(!not_form, "a session from a body that is not a form");
            assert!((NOW + 30 * 60..=NOW + 24 * 3600).contains(&session.expires_at));
            assert!(!session.line_items.is_empty());
            for item in &session.line_items {
                assert!(item.quantity >= 1);
                assert!((0..=stripe::MAX_AMOUNT).contains(&item.unit_amount));
            }
            assert!((0..=stripe::MAX_AMOUNT).contains(&session.amount_total()));
            assert!(session.currency.len() == 3);
            assert!(session.currency.bytes().all(|b| b.is_ascii_lowercase()));
            assert!(!session.payment_method_types.is_empty());
            for metadata in [&session.metadata, &session.intent_metadata] {
                assert!(stripe::metadata_problem(metadata, "metadata").is_none());
            }
            assert!(
                session
                    .client_reference_id
                    .as_ref()
                    .is_none_or(|id| (1..=200).contains(&id.chars().count()))
            );
            // what a client would send for it reads back the same
            let again = stripe::CreateSession::parse(
                form,
                session.to_form().as_bytes(),
                version.as_deref(),
                NOW,
            );
            assert_eq!(again.as_ref(), Ok(session), "a session written back");
        }
    }

    match stripe::CreateRefund::parse(content_type, body) {
        Err(error) => check_stripe_error(&error),
        Ok(refund) => {
            assert!(!not_form, "a refund from a body that is not a form");
            assert!(refund.amount.is_none_or(|amount| amount >= 1));
            let again = stripe::CreateRefund::parse(form, refund.to_form().as_bytes());
            assert_eq!(again, Ok(refund), "a refund written back");
        }
    }

    match stripe::RetryEvent::parse(content_type, body) {
        Err(error) => check_stripe_error(&error),
        Ok(_) => assert!(!not_form, "a resend from a body that is not a form"),
    }

    match stripe::CliSessionRequest::parse(content_type, body) {
        Err(error) => check_stripe_error(&error),
        Ok(asked) => {
            assert!(!not_form, "a CLI session from a body that is not a form");
            assert!(!asked.device_name.is_empty());
        }
    }

    match stripe::ListRefunds::parse(body) {
        Err(error) => check_stripe_error(&error),
        Ok((_, limit)) => assert!((1..=100).contains(&limit)),
    }
}

/// `content type \n X-Refund-Idempotency \n body`: the body as each
/// Razorpay request the sandbox takes (an order, a capture, a refund with
/// that key).
pub fn razorpay_requests(data: &[u8]) {
    let [content_type, key, body] = fields::<3>(data);
    let content_type = header(content_type);
    let content_type = content_type.as_deref();
    let json = Some("application/json");
    let not_json =
        !body.is_empty() && media_type(content_type).as_deref() != Some("application/json");

    let order = razorpay::CreateOrder::parse(content_type, body);
    assert_eq!(
        order,
        razorpay::CreateOrder::parse(content_type, body),
        "parsing is deterministic"
    );
    match &order {
        Err(error) => check_razorpay_error(error),
        Ok(order) => {
            assert!(!not_json, "an order from a body that is not JSON");
            assert!(order.amount >= 100);
            assert!(order.currency.len() == 3);
            assert!(order.currency.bytes().all(|b| b.is_ascii_uppercase()));
            assert!(
                order
                    .receipt
                    .as_ref()
                    .is_none_or(|r| r.chars().count() <= 40)
            );
            let notes = order.notes.as_object().expect("notes are an object");
            assert!(notes.len() <= 15);
            if let Capture::Automatic { window_minutes } = order.capture {
                assert!(window_minutes >= 12);
            }
            let again = razorpay::CreateOrder::parse(json, order.to_json().to_string().as_bytes());
            assert_eq!(again.as_ref(), Ok(order), "an order written back");
        }
    }

    match razorpay::CapturePayment::parse(content_type, body) {
        Err(error) => check_razorpay_error(&error),
        Ok(_) => assert!(!not_json, "a capture from a body that is not JSON"),
    }

    let key = (!key.is_empty()).then_some(key);
    match razorpay::CreateRefund::parse(content_type, body, key) {
        Err(error) => check_razorpay_error(&error),
        Ok(refund) => {
            assert!(!not_json, "a refund from a body that is not JSON");
            assert!(refund.amount.is_none_or(|amount| amount > 0));
            assert!(matches!(refund.speed.as_str(), "normal" | "optimum"));
            if let Some(key) = &refund.key {
                assert!(key.len() >= 10);
                assert!(
                    key.bytes()
                        .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
                );
            }
            assert_eq!(refund.key.is_some(), key.is_some());
        }
    }
}
