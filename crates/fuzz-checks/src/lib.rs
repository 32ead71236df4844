//! What each fuzz target does with its bytes: split them into the inputs of
//! the code under test, run it, and check the properties that must hold for
//! any input. The fuzz targets (`fuzz/fuzz_targets/`, nightly only) are
//! one-line wrappers around these, and the stable test
//! `tests/api/fuzz_regressions.rs` calls them to replay the seeds and every
//! crash found, so both run exactly the same checks. A crate of the main
//! workspace, so fmt, clippy and the tests see it on stable.
//!
//! Inputs are text-friendly so seeds and regressions stay readable: the
//! leading fields are single lines, the last field is the rest of the bytes.
//! Numbers are decimal text, or (when the fuzzer mangles them) the field's
//! first eight bytes read as a little-endian integer.

use holdfast::configuration::Secret;
use holdfast::inventory::PaymentRef;
use holdfast::payments::razorpay::{self, CallbackVerdict};
use holdfast::payments::signature::{hmac_sha256_hex, hmac_sha256_matches};
use holdfast::payments::stripe;
use holdfast::payments::stripe::signature::{
    SignatureError, TOLERANCE_SECONDS, stripe_signature_header, verify_stripe,
};
use holdfast::payments::{
    PageEnd, PaymentStatus, ProviderEvent, ProviderKind, ReturnParams, WebhookDelivery,
};

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
    let secrets = std::slice::from_ref(&secret);
    let (now, timestamp, header) = (number(now), number(timestamp), text(header));

    let outcome = verify_stripe(payload, Some(&header), secrets, now);
    assert_eq!(
        verify_stripe(payload, Some(&header), &[], now),
        Err(SignatureError::NoSecret)
    );
    if secret.expose().is_empty() {
        assert_eq!(outcome, Err(SignatureError::NoSecret));
        return;
    }
    assert_eq!(
        verify_stripe(payload, None, secrets, now),
        Err(SignatureError::Missing)
    );
    if outcome.is_ok() {
        // only a real signature over exactly this payload is accepted, from
        // a header of at most a handful of candidates
        assert!(header.len() <= 4096 && header.contains("v1="));
        assert!(header.matches("v1=").count() <= 8);
        if let Some(other) = flipped(payload, data) {
            assert_eq!(
                verify_stripe(&other, Some(&header), secrets, now),
                Err(SignatureError::Mismatch)
            );
        }
    }

    // Our own header verifies exactly when it is within the tolerance.
    let own = stripe_signature_header(&secret, timestamp, payload);
    let fresh = now.abs_diff(timestamp) <= TOLERANCE_SECONDS.unsigned_abs();
    assert_eq!(
        verify_stripe(payload, Some(&own), secrets, now),
        if fresh {
            Ok(())
        } else {
            Err(SignatureError::Stale)
        }
    );
    assert_eq!(
        verify_stripe(payload, Some(&own), secrets, timestamp),
        Ok(())
    );
    // ... also among other schemes and stale v1s, as while a secret rolls
    let rolled = format!("v0=abc, {own} ,v1={}", "00".repeat(32));
    assert_eq!(
        verify_stripe(payload, Some(&rolled), secrets, timestamp),
        Ok(())
    );
    // ... and with the secret as the previous one of a rotation
    let rotated = [Secret::new(format!("{}x", secret.expose())), secret.clone()];
    assert_eq!(
        verify_stripe(payload, Some(&own), &rotated, timestamp),
        Ok(())
    );
    // ... and never once anything in it changes
    if let Some(other) = flipped(payload, data) {
        assert_eq!(
            verify_stripe(&other, Some(&own), secrets, timestamp),
            Err(SignatureError::Mismatch)
        );
    }
    assert_eq!(
        verify_stripe(
            payload,
            Some(&with_wrong_digit(&own, data)),
            secrets,
            timestamp
        ),
        Err(SignatureError::Mismatch)
    );
    let other_secret = Secret::new(format!("{}x", secret.expose()));
    assert_eq!(
        verify_stripe(
            payload,
            Some(&own),
            std::slice::from_ref(&other_secret),
            timestamp
        ),
        Err(SignatureError::Mismatch)
    );
    // a second timestamp is ambiguous, so malformed
    assert_eq!(
        verify_stripe(
            payload,
            Some(&format!("{own},t={timestamp}")),
            secrets,
            timestamp
        ),
        Err(SignatureError::Malformed)
    );
}

/// What every parsed event must be, whichever provider sent it.
fn check_delivery(delivery: &WebhookDelivery, provider: ProviderKind) {
    let kind = delivery.kind.as_str();
    match &delivery.event {
        ProviderEvent::Payment(payment) => {
            assert_eq!(payment.provider, provider);
            assert!(!payment.payment_ref.is_empty());
            match provider {
                ProviderKind::Stripe => {
                    assert!(matches!(
                        kind,
                        "checkout.session.completed" | "checkout.session.async_payment_succeeded"
                    ));
                    assert!(payment.page_id.is_some());
                    assert!(matches!(
                        payment.status,
                        PaymentStatus::Captured | PaymentStatus::Pending
                    ));
                }
                ProviderKind::Razorpay => assert!(matches!(
                    kind,
                    "payment.captured" | "order.paid" | "payment.authorized"
                )),
            }
            assert_eq!(payment.currency, payment.currency.to_ascii_lowercase());
        }
        ProviderEvent::PageEnded { end, .. } => match (kind, end) {
            ("checkout.session.expired", PageEnd::Expired)
            | ("checkout.session.async_payment_failed", PageEnd::PaymentFailed) => {}
            _ => panic!("{kind} ended a page as {end:?}"),
        },
        ProviderEvent::Refund(refund) => {
            assert!(
                kind.starts_with("refund.") || kind == "charge.refund.updated",
                "{kind} moved a refund"
            );
            assert!(!refund.payment_ref.is_empty());
        }
        ProviderEvent::Ignore(reason) => assert!(!reason.is_empty()),
    }
    if let ProviderEvent::Payment(payment) = &delivery.event
        && payment.status == PaymentStatus::Captured
    {
        // what the confirm routine will claim parses as a payment reference
        let _ = PaymentRef::parse(&payment.payment_ref);
    }
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
        assert!(!event.event_id.is_empty() && event.event_id.len() <= 255);
        check_delivery(event, ProviderKind::Stripe);
    }

    // Signed and fresh, the body gets exactly what parsing says; otherwise
    // it is refused before parsing.
    let secret = Secret::new("whsec_fuzz");
    let secrets = std::slice::from_ref(&secret);
    let now = 1_700_000_000;
    let header = stripe_signature_header(&secret, now, body);
    assert_eq!(
        stripe::accept(secrets, Some(&header), body, now),
        parsed.map_err(str::to_owned)
    );
    assert_eq!(
        stripe::accept(secrets, None, body, now),
        Err("no signature header".to_owned())
    );
    assert_eq!(
        stripe::accept(&[], Some(&header), body, now),
        Err("no webhook secret configured".to_owned())
    );
    if let Some(other) = flipped(body, body) {
        assert_eq!(
            stripe::accept(secrets, Some(&header), &other, now),
            Err("no signature matches".to_owned())
        );
    }
}

/// `secret \n event id \n X-Razorpay-Signature \n body`.
pub fn razorpay_webhook(data: &[u8]) {
    let [secret, event_id, signature, body] = fields::<4>(data);
    let secret = Secret::new(text(secret));
    let secrets = std::slice::from_ref(&secret);
    let (event_id, signature) = (text(event_id), text(signature));

    let outcome = razorpay::accept(secrets, Some(&signature), Some(&event_id), body);
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
        check_delivery(event, ProviderKind::Razorpay);
    }
    let parsed = razorpay::parse_event(body);
    assert_eq!(
        parsed,
        razorpay::parse_event(body),
        "parsing is deterministic"
    );

    // With our own signature the event id and body decide; without a
    // correct one nothing is parsed.
    let own = hmac_sha256_hex(secret.expose().as_bytes(), body);
    let expected = if event_id.is_empty() || event_id.len() > 255 {
        Err("no event id header")
    } else {
        parsed.map(|(kind, event)| WebhookDelivery {
            event_id: event_id.clone(),
            kind,
            event,
        })
    };
    let accept = |signature: Option<&str>, body: &[u8]| {
        razorpay::accept(secrets, signature, Some(&event_id), body)
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
    // the previous secret of a rotation still verifies; neither does not
    let rotated = [Secret::new(format!("{}x", secret.expose())), secret.clone()];
    assert_eq!(
        razorpay::accept(&rotated, Some(&own), Some(&event_id), body),
        expected
    );
    assert_eq!(
        razorpay::accept(&rotated[..1], Some(&own), Some(&event_id), body),
        Err("no signature matches")
    );
    assert_eq!(
        razorpay::accept(&[], Some(&own), Some(&event_id), body),
        Err("no webhook secret configured")
    );
}

/// `key secret \n query \n callback form`: Razorpay Checkout's redirect,
/// decoded as the return route's extractors decode it, assembled by the
/// function the route calls (`ReturnParams::from_return`) and verified by
/// the one its Razorpay adapter calls (`verify_callback`), for the order id
/// the form names as if we had stored it, and for another.
pub fn razorpay_callback(data: &[u8]) {
    let [key_secret, query, form] = fields::<3>(data);
    let secret = Secret::new(text(key_secret));
    // decoded as the route's extractors decode them (actix-web's Query and
    // Form are serde_urlencoded into pairs), assembled by the function the
    // route calls; a body they refuse is answered 400 before any of this
    let decode = |bytes: &[u8]| serde_urlencoded::from_bytes::<Vec<(String, String)>>(bytes);
    let (Ok(query), Ok(form)) = (decode(query), decode(form)) else {
        return;
    };
    let params = ReturnParams::from_return(query, form);
    let field = |name: &str| params.get(name).unwrap_or_default().to_owned();
    let (payment_id, order_id, signature) = (
        field("razorpay_payment_id"),
        field("razorpay_order_id"),
        field("razorpay_signature"),
    );
    let failed = params.get("error[description]").is_some() || params.get("error[code]").is_some();
    let signed = format!("{order_id}|{payment_id}");
    let own = hmac_sha256_hex(secret.expose().as_bytes(), signed.as_bytes());
    let verdict = razorpay::verify_callback(&secret, &order_id, &params);
    assert_eq!(
        verdict,
        razorpay::verify_callback(&secret, &order_id, &params)
    );
    match &verdict {
        // a failure is only ever reported, never a payment
        Ok(CallbackVerdict::Failed(reason)) => {
            assert!(failed);
            assert!(reason.chars().count() <= 200 && !reason.chars().any(char::is_control));
        }
        // only the HMAC itself (as hex, spaces around it allowed) pays
        Ok(CallbackVerdict::Paid(paid)) => {
            assert!(!failed);
            assert_eq!(paid, &payment_id);
            assert_eq!(signature.trim().to_ascii_lowercase(), own);
        }
        Err(reason) => assert!(!reason.is_empty()),
    }
    if failed {
        return;
    }
    // for another order than the one stored, never
    let elsewhere = format!("{order_id}x");
    assert!(!matches!(
        razorpay::verify_callback(&secret, &elsewhere, &params),
        Ok(CallbackVerdict::Paid(_))
    ));
    // with its own signature, a well-formed callback pays; a changed digit
    // or another key does not
    let with_signature = |signature: &str| {
        let mut params = params.clone();
        params.0.retain(|(k, _)| k != "razorpay_signature");
        params
            .0
            .push(("razorpay_signature".into(), signature.to_owned()));
        params
    };
    let well_formed = [&payment_id, &order_id]
        .iter()
        .all(|v| !v.is_empty() && v.len() <= 100)
        && payment_id.len() <= 64
        && payment_id
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_');
    assert_eq!(
        razorpay::verify_callback(&secret, &order_id, &with_signature(&own)).is_ok(),
        well_formed
    );
    assert!(
        razorpay::verify_callback(
            &secret,
            &order_id,
            &with_signature(&with_wrong_digit(&own, data))
        )
        .is_err()
    );
    let other = Secret::new(format!("{}x", secret.expose()));
    assert!(razorpay::verify_callback(&other, &order_id, &with_signature(&own)).is_err());
}
