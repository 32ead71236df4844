//! What each fuzz target does with its bytes: split them into the inputs of
//! the code under test, run it, and check the properties that must hold for
//! any input. The fuzz targets are one-line wrappers around these, and the
//! stable test `tests/api/fuzz_regressions.rs` includes this file to replay
//! the seeds and every crash found, so both run exactly the same checks.
//!
//! Inputs are text-friendly so seeds and regressions stay readable: the
//! leading fields are single lines, the last field is the rest of the bytes.
//! Numbers are decimal text, or (when the fuzzer mangles them) the field's
//! first eight bytes read as a little-endian integer.

use holdfast::configuration::Secret;
use holdfast::inventory::PaymentRef;
use holdfast::webhooks::razorpay;
use holdfast::webhooks::signature::{
    STRIPE_TOLERANCE_SECONDS, SignatureError, hmac_sha256_hex, hmac_sha256_matches,
    stripe_signature_header, verify_stripe,
};
use holdfast::webhooks::stripe;

/// The first `N - 1` lines of `data`, then the rest; missing fields are empty.
fn fields<const N: usize>(data: &[u8]) -> [&[u8]; N] {
    let mut out: [&[u8]; N] = [&[]; N];
    for (slot, field) in out.iter_mut().zip(data.splitn(N, |b| *b == b'\n')) {
        *slot = field;
    }
    out
}

/// A field as text, the way a lossy HTTP layer would hand it over.
fn text(field: &[u8]) -> String {
    String::from_utf8_lossy(field).into_owned()
}

/// A field as an `i64`: decimal text if it is, raw bytes otherwise, so the
/// fuzzer reaches the extremes without having to spell them.
fn number(field: &[u8]) -> i64 {
    if let Some(n) = std::str::from_utf8(field)
        .ok()
        .and_then(|s| s.trim().parse().ok())
    {
        return n;
    }
    let mut bytes = [0u8; 8];
    for (slot, byte) in bytes.iter_mut().zip(field) {
        *slot = *byte;
    }
    i64::from_le_bytes(bytes)
}

/// A stable pseudo-random choice derived from the input (FNV-1a), for
/// which byte to flip.
fn pick(data: &[u8], len: usize) -> usize {
    let hash = data.iter().fold(0xcbf2_9ce4_8422_2325u64, |h, b| {
        (h ^ u64::from(*b)).wrapping_mul(0x0100_0000_01b3)
    });
    usize::try_from(hash % len.max(1) as u64).unwrap_or(0)
}

/// `bytes` with one bit flipped, chosen from `data`; `None` if empty.
fn flipped(bytes: &[u8], data: &[u8]) -> Option<Vec<u8>> {
    if bytes.is_empty() {
        return None;
    }
    let mut out = bytes.to_vec();
    let at = pick(data, out.len());
    out[at] ^= 1 << (at % 8);
    Some(out)
}

/// A hex signature with one digit changed to a different value (not just
/// its case, which hex decoding ignores).
fn with_wrong_digit(signature: &str, data: &[u8]) -> String {
    let mut digits = signature.as_bytes().to_vec();
    let at = signature.len() - 1 - pick(data, 64.min(signature.len()));
    digits[at] = if digits[at] == b'0' { b'1' } else { b'0' };
    String::from_utf8_lossy(&digits).into_owned()
}

/// `secret \n now \n timestamp \n header \n payload`: an arbitrary
/// `Stripe-Signature` header, and our own header for `timestamp`.
pub fn stripe_signature(data: &[u8]) {
    let [secret, now, timestamp, header, payload] = fields::<5>(data);
    let secret = Secret::new(text(secret));
    let (now, timestamp, header) = (number(now), number(timestamp), text(header));

    let outcome = verify_stripe(payload, Some(&header), Some(&secret), now);
    assert_eq!(
        verify_stripe(payload, Some(&header), None, now),
        Err(SignatureError::NoSecret)
    );
    if secret.expose().is_empty() {
        assert_eq!(outcome, Err(SignatureError::NoSecret));
        return;
    }
    assert_eq!(
        verify_stripe(payload, None, Some(&secret), now),
        Err(SignatureError::Missing)
    );
    if outcome.is_ok() {
        // only a real signature over exactly this payload is accepted
        assert!(header.len() <= 4096 && header.contains("v1="));
        if let Some(other) = flipped(payload, data) {
            assert_eq!(
                verify_stripe(&other, Some(&header), Some(&secret), now),
                Err(SignatureError::Mismatch)
            );
        }
    }

    // Our own header verifies exactly when it is within the tolerance.
    let own = stripe_signature_header(&secret, timestamp, payload);
    let fresh = now.abs_diff(timestamp) <= STRIPE_TOLERANCE_SECONDS.unsigned_abs();
    assert_eq!(
        verify_stripe(payload, Some(&own), Some(&secret), now),
        if fresh {
            Ok(())
        } else {
            Err(SignatureError::Stale)
        }
    );
    assert_eq!(
        verify_stripe(payload, Some(&own), Some(&secret), timestamp),
        Ok(())
    );
    // ... also among other schemes and stale v1s, as while a secret rolls
    let rolled = format!("v0=abc, {own} ,v1={}", "00".repeat(32));
    assert_eq!(
        verify_stripe(payload, Some(&rolled), Some(&secret), timestamp),
        Ok(())
    );
    // ... and never once anything in it changes
    if let Some(other) = flipped(payload, data) {
        assert_eq!(
            verify_stripe(&other, Some(&own), Some(&secret), timestamp),
            Err(SignatureError::Mismatch)
        );
    }
    assert_eq!(
        verify_stripe(
            payload,
            Some(&with_wrong_digit(&own, data)),
            Some(&secret),
            timestamp
        ),
        Err(SignatureError::Mismatch)
    );
    let other_secret = Secret::new(format!("{}x", secret.expose()));
    assert_eq!(
        verify_stripe(payload, Some(&own), Some(&other_secret), timestamp),
        Err(SignatureError::Mismatch)
    );
    // a second timestamp is ambiguous, so malformed
    assert_eq!(
        verify_stripe(
            payload,
            Some(&format!("{own},t={timestamp}")),
            Some(&secret),
            timestamp
        ),
        Err(SignatureError::Malformed)
    );
}

/// The whole input is a Stripe event body.
pub fn stripe_event(body: &[u8]) {
    let parsed = stripe::parse_event(body);
    assert_eq!(
        parsed,
        stripe::parse_event(body),
        "parsing is deterministic"
    );
    if let Ok(event) = &parsed {
        assert!(!event.id.is_empty() && event.id.len() <= 255);
        let kind = event.kind.as_str();
        match &event.action {
            stripe::Action::Confirm { payment_ref, .. } => {
                assert!(matches!(
                    kind,
                    "checkout.session.completed" | "checkout.session.async_payment_succeeded"
                ));
                assert_eq!(
                    PaymentRef::parse(payment_ref.as_str()).as_ref(),
                    Ok(payment_ref)
                );
            }
            stripe::Action::Release { final_state, .. } => match kind {
                "checkout.session.expired" => assert_eq!(*final_state, "expired"),
                "checkout.session.async_payment_failed" => assert_eq!(*final_state, "cancelled"),
                _ => panic!("{kind} released an order"),
            },
            stripe::Action::CloseRefund { payment_intent }
            | stripe::Action::ReopenRefund { payment_intent } => {
                assert!(kind.starts_with("refund.") && !payment_intent.is_empty());
            }
            stripe::Action::Ignore(reason) => assert!(!reason.is_empty()),
        }
    }

    // Signed and fresh, the body gets exactly what parsing says; otherwise
    // it is refused before parsing.
    let secret = Secret::new("whsec_fuzz");
    let now = 1_700_000_000;
    let header = stripe_signature_header(&secret, now, body);
    assert_eq!(
        stripe::accept(Some(&secret), Some(&header), body, now),
        parsed.map_err(str::to_owned)
    );
    assert_eq!(
        stripe::accept(Some(&secret), None, body, now),
        Err("no signature header".to_owned())
    );
    assert_eq!(
        stripe::accept(None, Some(&header), body, now),
        Err("no webhook secret configured".to_owned())
    );
    if let Some(other) = flipped(body, body) {
        assert_eq!(
            stripe::accept(Some(&secret), Some(&header), &other, now),
            Err("no signature matches".to_owned())
        );
    }
}

/// `secret \n event id \n X-Razorpay-Signature \n body`.
pub fn razorpay_webhook(data: &[u8]) {
    let [secret, event_id, signature, body] = fields::<4>(data);
    let secret = Secret::new(text(secret));
    let (event_id, signature) = (text(event_id), text(signature));

    let outcome = razorpay::accept(Some(&secret), Some(&signature), Some(&event_id), body);
    if secret.expose().is_empty() {
        assert_eq!(outcome, Err("no webhook secret configured"));
        return;
    }
    if let Ok(event) = &outcome {
        assert!(hmac_sha256_matches(
            secret.expose().as_bytes(),
            body,
            &signature
        ));
        assert!(!event.event_id.is_empty() && event.event_id.len() <= 255);
        assert!(event.kind.len() <= 100);
    }
    let parsed = razorpay::parse_event(body);
    assert_eq!(
        parsed,
        razorpay::parse_event(body),
        "parsing is deterministic"
    );
    if let Ok((kind, action)) = &parsed {
        match action {
            razorpay::Action::Confirm { payment_ref, .. } => {
                assert!(matches!(kind.as_str(), "payment.captured" | "order.paid"));
                if let Some(payment_ref) = payment_ref {
                    assert_eq!(
                        PaymentRef::parse(payment_ref.as_str()).as_ref(),
                        Ok(payment_ref)
                    );
                }
            }
            razorpay::Action::CloseRefund { .. } => assert_eq!(kind, "refund.processed"),
            razorpay::Action::ReopenRefund { .. } => assert_eq!(kind, "refund.failed"),
            razorpay::Action::Ignore(reason) => assert!(!reason.is_empty()),
        }
    }

    // With our own signature the event id and body decide; without a
    // correct one nothing is parsed.
    let own = hmac_sha256_hex(secret.expose().as_bytes(), body);
    let expected = if event_id.is_empty() || event_id.len() > 255 {
        Err("no event id header")
    } else {
        parsed.map(|(kind, action)| razorpay::ParsedEvent {
            event_id: event_id.clone(),
            kind,
            action,
        })
    };
    let accept = |signature: Option<&str>, body: &[u8]| {
        razorpay::accept(Some(&secret), signature, Some(&event_id), body)
    };
    assert_eq!(accept(Some(&own), body), expected);
    assert_eq!(accept(None, body), Err("no signature header"));
    assert_eq!(
        accept(Some(&with_wrong_digit(&own, data)), body),
        Err("no signature matches")
    );
    if let Some(other) = flipped(body, data) {
        assert_eq!(accept(Some(&own), &other), Err("no signature matches"));
    }
    assert_eq!(
        razorpay::accept(None, Some(&own), Some(&event_id), body),
        Err("no webhook secret configured")
    );
}

/// `key secret \n callback form`: Razorpay Checkout's redirect, checked as
/// `razorpay_callback` does, with `hmac_sha256_matches` over
/// `order_id|payment_id`. Other fields (an `error[...]` form) are ignored.
pub fn razorpay_callback(data: &[u8]) {
    let [key_secret, form] = fields::<2>(data);
    let mut payment_id = String::new();
    let mut order_id = String::new();
    let mut signature = String::new();
    for (name, value) in form_urlencoded::parse(form) {
        let slot = match name.as_ref() {
            "razorpay_payment_id" => &mut payment_id,
            "razorpay_order_id" => &mut order_id,
            "razorpay_signature" => &mut signature,
            _ => continue,
        };
        if slot.is_empty() {
            *slot = value.into_owned();
        }
    }
    let signed = format!("{order_id}|{payment_id}");
    let own = hmac_sha256_hex(key_secret, signed.as_bytes());

    // Whatever the form says, only the HMAC itself (as hex, spaces around
    // it allowed) is accepted.
    if hmac_sha256_matches(key_secret, signed.as_bytes(), &signature) {
        assert_eq!(signature.trim().to_ascii_lowercase(), own);
    }
    assert!(hmac_sha256_matches(key_secret, signed.as_bytes(), &own));
    assert!(!hmac_sha256_matches(
        key_secret,
        signed.as_bytes(),
        &with_wrong_digit(&own, data)
    ));
    assert!(!hmac_sha256_matches(
        key_secret,
        format!("{order_id}|{payment_id}x").as_bytes(),
        &own
    ));
    let swapped = format!("{payment_id}|{order_id}");
    if swapped != signed {
        assert!(!hmac_sha256_matches(key_secret, swapped.as_bytes(), &own));
    }
    let mut other_key = key_secret.to_vec();
    other_key.push(b'x');
    assert!(!hmac_sha256_matches(&other_key, signed.as_bytes(), &own));
}
