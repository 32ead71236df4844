//! HMAC-SHA256, as the providers sign what they send us: computed and
//! compared in constant time, checked before a byte of a body is parsed.
//! Each provider's own scheme (Stripe's timestamped header, say) is in its
//! folder, built from these.

use hmac::{Hmac, Mac};
use sha2::Sha256;

use crate::configuration::Secret;

type HmacSha256 = Hmac<Sha256>;

/// Hex HMAC-SHA256 of `message` with `key`.
pub fn hmac_sha256_hex(key: &[u8], message: &[u8]) -> String {
    hex::encode(hmac_sha256(key, message))
}

pub(crate) fn hmac_sha256(key: &[u8], message: &[u8]) -> [u8; 32] {
    let mut mac = HmacSha256::new_from_slice(key).expect("HMAC takes a key of any length");
    mac.update(message);
    mac.finalize().into_bytes().into()
}

/// A hex SHA-256 MAC as sent in a header: exactly 64 hex digits, else `None`.
pub(crate) fn mac_from_hex(text: &str) -> Option<[u8; 32]> {
    let text = text.trim();
    if text.len() != 64 {
        return None;
    }
    let mut out = [0u8; 32];
    hex::decode_to_slice(text, &mut out).ok()?;
    Some(out)
}

/// Equality of two MACs in constant time.
pub(crate) fn same_mac(a: &[u8; 32], b: &[u8; 32]) -> bool {
    a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

/// Constant-time check of a hex HMAC-SHA256 of `message` with `key`.
pub fn hmac_sha256_matches(key: &[u8], message: &[u8], expected_hex: &str) -> bool {
    match mac_from_hex(expected_hex) {
        Some(given) => same_mac(&hmac_sha256(key, message), &given),
        None => false,
    }
}

/// Whether `signature_hex` is the hex HMAC-SHA256 of `message` under any of
/// `secrets` (the current one and, during a rotation, the previous one).
/// Every secret is tried, so timing does not tell which one matched.
pub fn signed_by_any(secrets: &[Secret], message: &[u8], signature_hex: &str) -> bool {
    let Some(given) = mac_from_hex(signature_hex) else {
        return false;
    };
    secrets
        .iter()
        .filter(|secret| !secret.expose().is_empty())
        .fold(false, |any, secret| {
            same_mac(&hmac_sha256(secret.expose().as_bytes(), message), &given) | any
        })
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

#[cfg(test)]
mod tests {
    use super::*;

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
