//! Stripe's webhook signature: `Stripe-Signature: t=<unix>,v1=<hex>` (one
//! `v1` per active endpoint secret), the hex HMAC-SHA256 of `"<t>.<raw
//! body>"` with the endpoint's `whsec_…` secret, within 300 seconds of now
//! (docs/providers.md). Rejects by default; no error says anything about a
//! secret.

use crate::configuration::Secret;
use crate::payments::signature::{hmac_sha256, hmac_sha256_hex, mac_from_hex, same_mac};

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

/// Stripe's tolerance for the signed timestamp, as its SDKs use.
pub const TOLERANCE_SECONDS: i64 = 300;

/// Most `v1` signatures a `Stripe-Signature` header may carry. Stripe sends
/// one per active endpoint secret: one, or two while a secret is rolled.
pub const MAX_SIGNATURES: usize = 8;

/// The `Stripe-Signature` header for `payload` signed at `timestamp`:
/// `t=<unix>,v1=<hex HMAC-SHA256 of "t.payload">`.
pub fn stripe_signature_header(secret: &Secret, timestamp: i64, payload: &[u8]) -> String {
    format!(
        "t={timestamp},v1={}",
        hmac_sha256_hex(
            secret.expose().as_bytes(),
            &stripe_signed(timestamp, payload)
        )
    )
}

fn stripe_signed(timestamp: i64, payload: &[u8]) -> Vec<u8> {
    let mut signed = timestamp.to_string().into_bytes();
    signed.push(b'.');
    signed.extend_from_slice(payload);
    signed
}

/// Verify a `Stripe-Signature` header against the raw body, cheapest test
/// first: the header's shape (one `t`, at most [`MAX_SIGNATURES`]
/// `v1` values of exactly 64 hex digits; other schemes are ignored), then
/// the timestamp against the tolerance, and only then one MAC of the body
/// per configured secret, compared with every candidate in constant time.
/// A hostile header therefore costs at most two passes over the body.
pub fn verify_stripe(
    payload: &[u8],
    header: Option<&str>,
    secrets: &[Secret],
    now: i64,
) -> Result<(), SignatureError> {
    let secrets: Vec<&Secret> = secrets
        .iter()
        .filter(|secret| !secret.expose().is_empty())
        .collect();
    if secrets.is_empty() {
        return Err(SignatureError::NoSecret);
    }
    let header = header.ok_or(SignatureError::Missing)?;
    if header.len() > 4096 {
        return Err(SignatureError::Malformed);
    }
    let mut timestamp = None;
    let mut candidates: Vec<[u8; 32]> = Vec::new();
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
            "v1" => {
                if candidates.len() == MAX_SIGNATURES {
                    return Err(SignatureError::Malformed);
                }
                candidates.push(mac_from_hex(value).ok_or(SignatureError::Malformed)?);
            }
            _ => {}
        }
    }
    let timestamp = timestamp.ok_or(SignatureError::Malformed)?;
    if candidates.is_empty() {
        return Err(SignatureError::Malformed);
    }
    // abs_diff, not (now - timestamp).abs(): the subtraction overflows for
    // timestamps near i64's ends, which panics in debug builds and in
    // release wraps to i64::MIN, whose abs() is negative, so "fresh".
    if now.abs_diff(timestamp) > TOLERANCE_SECONDS.unsigned_abs() {
        return Err(SignatureError::Stale);
    }
    let signed = stripe_signed(timestamp, payload);
    // every secret against every candidate, so timing tells nothing
    let matched = secrets.iter().fold(false, |any, secret| {
        let expected = hmac_sha256(secret.expose().as_bytes(), &signed);
        candidates
            .iter()
            .fold(false, |hit, candidate| same_mac(&expected, candidate) | hit)
            | any
    });
    if matched {
        Ok(())
    } else {
        Err(SignatureError::Mismatch)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::payments::signature::signed_by_any;

    const BODY: &[u8] = br#"{"id":"evt_1","type":"checkout.session.completed"}"#;
    // printf '%s' '1700000000.{"id":"evt_1","type":"checkout.session.completed"}' \
    //   | openssl dgst -sha256 -hmac 'whsec_test_secret'
    const OPENSSL_V1: &str = "a13d4b1f9003bc2fb6c06224e878b6056185eaa50d40e1e7dc05517f8af41d7b";

    /// `body` under `header`, checked against the test's one secret at `now`.
    fn checked(body: &[u8], header: &str, now: i64) -> Result<(), SignatureError> {
        verify_stripe(body, Some(header), std::slice::from_ref(&secret()), now)
    }

    fn secret() -> Secret {
        Secret::new("whsec_test_secret")
    }

    #[test]
    fn matches_a_signature_computed_by_openssl() {
        let header = stripe_signature_header(&secret(), 1_700_000_000, BODY);
        assert_eq!(header, format!("t=1700000000,v1={OPENSSL_V1}"));
        assert_eq!(checked(BODY, &header, 1_700_000_100), Ok(()));
    }

    #[test]
    fn any_v1_may_match_and_other_schemes_are_ignored() {
        let header = format!("t=1700000000,v0=abc,v1={},v1={OPENSSL_V1}", "00".repeat(32));
        assert_eq!(checked(BODY, &header, 1_700_000_000), Ok(()));
    }

    #[test]
    fn refuses_everything_else() {
        let good = format!("t=1700000000,v1={OPENSSL_V1}");
        let now = 1_700_000_000;
        type Case<'a> = (Option<&'a str>, Vec<Secret>, &'a [u8], i64, SignatureError);
        let cases: Vec<Case> = vec![
            (None, vec![secret()], BODY, now, SignatureError::Missing),
            (
                Some("nonsense"),
                vec![secret()],
                BODY,
                now,
                SignatureError::Malformed,
            ),
            (
                Some("t=abc,v1=00"),
                vec![secret()],
                BODY,
                now,
                SignatureError::Malformed,
            ),
            (
                Some("t=1700000000"),
                vec![secret()],
                BODY,
                now,
                SignatureError::Malformed,
            ),
            (
                Some(&good),
                vec![secret()],
                b"{\"id\":\"evt_2\"}",
                now,
                SignatureError::Mismatch,
            ),
            (
                Some(&good),
                vec![Secret::new("whsec_other")],
                BODY,
                now,
                SignatureError::Mismatch,
            ),
            (
                Some(&good),
                vec![secret()],
                BODY,
                now + 301,
                SignatureError::Stale,
            ),
            (
                Some(&good),
                vec![secret()],
                BODY,
                now - 301,
                SignatureError::Stale,
            ),
            (Some(&good), vec![], BODY, now, SignatureError::NoSecret),
            (
                Some(&good),
                vec![Secret::new("")],
                BODY,
                now,
                SignatureError::NoSecret,
            ),
        ];
        for (header, secret, body, now, expected) in cases {
            assert_eq!(
                verify_stripe(body, header, secret.as_slice(), now),
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
                checked(BODY, &header, now),
                Err(SignatureError::Stale),
                "t={t} now={now}"
            );
        }
        let header = stripe_signature_header(&secret(), i64::MAX, BODY);
        assert_eq!(checked(BODY, &header, i64::MAX - 300), Ok(()));
    }

    #[test]
    fn a_header_of_many_or_odd_candidates_is_refused_before_any_mac() {
        let now = 1_700_000_000;
        // the header that used to cost ~170 MB of SHA-256 over a 256 KiB body
        let hostile = format!("t={now}{}", ",v1=00".repeat(680));
        let body = vec![b'x'; 256 * 1024];
        assert_eq!(
            checked(&body, &hostile, now),
            Err(SignatureError::Malformed)
        );
        let nine = format!("t={now}{}", format!(",v1={}", "ab".repeat(32)).repeat(9));
        assert_eq!(checked(BODY, &nine, now), Err(SignatureError::Malformed));
        for odd in ["ab", &"ab".repeat(33), &"zz".repeat(32)] {
            let header = format!("t={now},v1={odd}");
            assert_eq!(
                checked(BODY, &header, now),
                Err(SignatureError::Malformed),
                "{odd}"
            );
        }
        // eight candidates, the real one last, still pass
        let eight = format!(
            "t=1700000000{},v1={OPENSSL_V1}",
            format!(",v1={}", "00".repeat(32)).repeat(7)
        );
        assert_eq!(checked(BODY, &eight, now), Ok(()));
    }

    #[test]
    fn the_timestamp_is_judged_before_the_signature() {
        // a stale header with a wrong signature is stale, not a mismatch:
        // the body's MAC was never computed
        let header = format!("t=1000,v1={}", "00".repeat(32));
        assert_eq!(
            checked(BODY, &header, 1_700_000_000),
            Err(SignatureError::Stale)
        );
    }

    #[test]
    fn a_previous_secret_still_verifies_during_a_rotation() {
        let header = stripe_signature_header(&secret(), 1_700_000_000, BODY);
        let rotated = [Secret::new("whsec_new"), secret()];
        assert_eq!(
            verify_stripe(BODY, Some(&header), &rotated, 1_700_000_000),
            Ok(())
        );
        let signature = hmac_sha256_hex(b"old", BODY);
        assert!(signed_by_any(
            &[Secret::new("new"), Secret::new("old")],
            BODY,
            &signature
        ));
        assert!(!signed_by_any(&[Secret::new("new")], BODY, &signature));
        assert!(!signed_by_any(
            &[Secret::new("")],
            BODY,
            &hmac_sha256_hex(b"", BODY)
        ));
    }
}
