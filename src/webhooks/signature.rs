//! Webhook signatures, checked before a byte of the body is parsed.
//! Everything here rejects by default and compares in constant time.

use hmac::{Hmac, Mac};
use sha2::Sha256;

use crate::configuration::Secret;

type HmacSha256 = Hmac<Sha256>;

/// Why a signature was refused. Never says anything about the secret.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SignatureError {
    #[error("no signature header")]
    Missing,
    #[error("the signature header is malformed")]
    Malformed,
    #[error("the signature is too old or from the future")]
    Stale,
    #[error("no signature matches")]
    Mismatch,
    #[error("no webhook secret is configured")]
    NoSecret,
}

/// Hex HMAC-SHA256 of `message` with `key`.
pub fn hmac_sha256_hex(key: &[u8], message: &[u8]) -> String {
    let mut mac = HmacSha256::new_from_slice(key).expect("HMAC takes a key of any length");
    mac.update(message);
    hex::encode(mac.finalize().into_bytes())
}

/// Constant-time check of a hex HMAC-SHA256 of `message` with `key`.
pub fn hmac_sha256_matches(key: &[u8], message: &[u8], expected_hex: &str) -> bool {
    let Ok(expected) = hex::decode(expected_hex.trim()) else {
        return false;
    };
    let mut mac = HmacSha256::new_from_slice(key).expect("HMAC takes a key of any length");
    mac.update(message);
    mac.verify_slice(&expected).is_ok()
}

/// Constant-time equality of two texts (a presented key against ours).
pub fn same_text(given: &str, expected: &str) -> bool {
    given.len() == expected.len()
        && given
            .bytes()
            .zip(expected.bytes())
            .fold(0u8, |acc, (a, b)| acc | (a ^ b))
            == 0
}

/// Stripe's tolerance for the signed timestamp, as its SDKs use.
pub const STRIPE_TOLERANCE_SECONDS: i64 = 300;

/// The `Stripe-Signature` header for `payload` signed at `timestamp`:
/// `t=<unix>,v1=<hex HMAC-SHA256 of "t.payload">`.
pub fn stripe_signature_header(secret: &Secret, timestamp: i64, payload: &[u8]) -> String {
    let mut signed = timestamp.to_string().into_bytes();
    signed.push(b'.');
    signed.extend_from_slice(payload);
    format!(
        "t={timestamp},v1={}",
        hmac_sha256_hex(secret.expose().as_bytes(), &signed)
    )
}

/// Verify a `Stripe-Signature` header against the raw body. Any `v1`
/// signature may match (Stripe sends several while a secret is rolled);
/// other schemes are ignored; the timestamp must be within the tolerance.
pub fn verify_stripe(
    payload: &[u8],
    header: Option<&str>,
    secret: Option<&Secret>,
    now: i64,
) -> Result<(), SignatureError> {
    let secret = secret.ok_or(SignatureError::NoSecret)?;
    if secret.expose().is_empty() {
        return Err(SignatureError::NoSecret);
    }
    let header = header.ok_or(SignatureError::Missing)?;
    if header.len() > 4096 {
        return Err(SignatureError::Malformed);
    }
    let mut timestamp = None;
    let mut signatures = Vec::new();
    for part in header.split(',') {
        let (key, value) = part
            .trim()
            .split_once('=')
            .ok_or(SignatureError::Malformed)?;
        match key {
            "t" => {
                let t: i64 = value.parse().map_err(|_| SignatureError::Malformed)?;
                if timestamp.replace(t).is_some() {
                    return Err(SignatureError::Malformed);
                }
            }
            "v1" => signatures.push(value),
            _ => {}
        }
    }
    let timestamp = timestamp.ok_or(SignatureError::Malformed)?;
    if signatures.is_empty() {
        return Err(SignatureError::Malformed);
    }
    let mut signed = timestamp.to_string().into_bytes();
    signed.push(b'.');
    signed.extend_from_slice(payload);
    // check every candidate, so timing does not tell which one matched
    let matched = signatures.iter().fold(false, |any, candidate| {
        hmac_sha256_matches(secret.expose().as_bytes(), &signed, candidate) | any
    });
    if !matched {
        return Err(SignatureError::Mismatch);
    }
    // abs_diff, not (now - timestamp).abs(): the subtraction overflows for
    // timestamps near i64's ends, which panics in debug builds and in
    // release wraps to i64::MIN, whose abs() is negative, so "fresh".
    if now.abs_diff(timestamp) > STRIPE_TOLERANCE_SECONDS.unsigned_abs() {
        return Err(SignatureError::Stale);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    const BODY: &[u8] = br#"{"id":"evt_1","type":"checkout.session.completed"}"#;
    // printf '%s' '1700000000.{"id":"evt_1","type":"checkout.session.completed"}' \
    //   | openssl dgst -sha256 -hmac 'whsec_test_secret'
    const OPENSSL_V1: &str = "a13d4b1f9003bc2fb6c06224e878b6056185eaa50d40e1e7dc05517f8af41d7b";

    fn secret() -> Secret {
        Secret::new("whsec_test_secret")
    }

    #[test]
    fn matches_a_signature_computed_by_openssl() {
        let header = stripe_signature_header(&secret(), 1_700_000_000, BODY);
        assert_eq!(header, format!("t=1700000000,v1={OPENSSL_V1}"));
        assert_eq!(
            verify_stripe(BODY, Some(&header), Some(&secret()), 1_700_000_100),
            Ok(())
        );
    }

    #[test]
    fn any_v1_may_match_and_other_schemes_are_ignored() {
        let header = format!("t=1700000000,v0=abc,v1={},v1={OPENSSL_V1}", "00".repeat(32));
        assert_eq!(
            verify_stripe(BODY, Some(&header), Some(&secret()), 1_700_000_000),
            Ok(())
        );
    }

    #[test]
    fn refuses_everything_else() {
        let good = format!("t=1700000000,v1={OPENSSL_V1}");
        let now = 1_700_000_000;
        type Case<'a> = (
            Option<&'a str>,
            Option<Secret>,
            &'a [u8],
            i64,
            SignatureError,
        );
        let cases: Vec<Case> = vec![
            (None, Some(secret()), BODY, now, SignatureError::Missing),
            (
                Some("nonsense"),
                Some(secret()),
                BODY,
                now,
                SignatureError::Malformed,
            ),
            (
                Some("t=abc,v1=00"),
                Some(secret()),
                BODY,
                now,
                SignatureError::Malformed,
            ),
            (
                Some("t=1700000000"),
                Some(secret()),
                BODY,
                now,
                SignatureError::Malformed,
            ),
            (
                Some(&good),
                Some(secret()),
                b"{\"id\":\"evt_2\"}",
                now,
                SignatureError::Mismatch,
            ),
            (
                Some(&good),
                Some(Secret::new("whsec_other")),
                BODY,
                now,
                SignatureError::Mismatch,
            ),
            (
                Some(&good),
                Some(secret()),
                BODY,
                now + 301,
                SignatureError::Stale,
            ),
            (
                Some(&good),
                Some(secret()),
                BODY,
                now - 301,
                SignatureError::Stale,
            ),
            (Some(&good), None, BODY, now, SignatureError::NoSecret),
            (
                Some(&good),
                Some(Secret::new("")),
                BODY,
                now,
                SignatureError::NoSecret,
            ),
        ];
        for (header, secret, body, now, expected) in cases {
            assert_eq!(
                verify_stripe(body, header, secret.as_ref(), now),
                Err(expected.clone()),
                "{header:?}"
            );
        }
    }

    #[test]
    fn timestamps_at_the_ends_of_i64_are_stale_not_a_panic() {
        // found by fuzz/run stripe_signature: (now - t).abs() overflowed
        for (t, now) in [
            (0, i64::MIN),
            (i64::MIN, 1_700_000_000),
            (i64::MAX, i64::MIN),
            (1_700_000_000_i64.wrapping_add(i64::MIN), 1_700_000_000),
        ] {
            let header = stripe_signature_header(&secret(), t, BODY);
            assert_eq!(
                verify_stripe(BODY, Some(&header), Some(&secret()), now),
                Err(SignatureError::Stale),
                "t={t} now={now}"
            );
        }
        let header = stripe_signature_header(&secret(), i64::MAX, BODY);
        assert_eq!(
            verify_stripe(BODY, Some(&header), Some(&secret()), i64::MAX - 300),
            Ok(())
        );
    }

    #[test]
    fn razorpay_style_hmac_matches_openssl() {
        // printf '%s' 'order_1|pay_1' | openssl dgst -sha256 -hmac 'key_secret'
        let expected = "dd0f51ec9e75790ad1f7cc8e1a83d12f0a58a9641601a3cffa5c695972543c82";
        assert_eq!(hmac_sha256_hex(b"key_secret", b"order_1|pay_1"), expected);
        assert!(hmac_sha256_matches(
            b"key_secret",
            b"order_1|pay_1",
            expected
        ));
        assert!(!hmac_sha256_matches(
            b"key_secret",
            b"order_1|pay_2",
            expected
        ));
        assert!(!hmac_sha256_matches(
            b"key_secret",
            b"order_1|pay_1",
            "not hex"
        ));
    }
}
