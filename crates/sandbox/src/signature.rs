//! The sandbox's own signing and checking, as the providers do it: HMAC-SHA256
//! in hex (Razorpay's signatures, Stripe's `v1`), compared in constant time.

use std::fmt;
use std::time::Duration;

use hmac::{Hmac, Mac};
use sha2::Sha256;

/// A key or secret of the sandbox's accounts: readable with
/// [`Secret::expose`], never printed.
#[derive(Clone, PartialEq, Eq)]
pub struct Secret(String);

impl Secret {
    pub fn new(value: impl Into<String>) -> Self {
        Self(value.into())
    }

    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl fmt::Debug for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Secret([redacted])")
    }
}

/// HMAC-SHA256 of `message` under `key`, in lower-case hex.
pub fn hmac_sha256_hex(key: &[u8], message: &[u8]) -> String {
    let mut mac = Hmac::<Sha256>::new_from_slice(key).expect("HMAC takes a key of any length");
    mac.update(message);
    hex::encode(mac.finalize().into_bytes())
}

/// Whether two texts are equal, in time that depends only on their length.
pub fn same_text(given: &str, expected: &str) -> bool {
    use subtle::ConstantTimeEq;
    given.len() == expected.len() && bool::from(given.as_bytes().ct_eq(expected.as_bytes()))
}

/// Stripe's `Stripe-Signature` header for `payload` sent at `timestamp`:
/// `t=<timestamp>,v1=<HMAC of "<timestamp>.<payload>">`.
pub fn stripe_signature_header(secret: &Secret, timestamp: i64, payload: &[u8]) -> String {
    let mut signed = timestamp.to_string().into_bytes();
    signed.push(b'.');
    signed.extend_from_slice(payload);
    format!(
        "t={timestamp},v1={}",
        hmac_sha256_hex(secret.expose().as_bytes(), &signed)
    )
}

/// The client the sandbox delivers webhooks with (rustls on aws-lc-rs, as
/// everywhere in Holdfast).
pub fn http_client(timeout: Duration) -> reqwest::Client {
    let tls = rustls::ClientConfig::builder_with_provider(
        rustls::crypto::aws_lc_rs::default_provider().into(),
    )
    .with_safe_default_protocol_versions()
    .expect("aws-lc-rs supports the default protocol versions")
    .with_root_certificates(rustls::RootCertStore {
        roots: webpki_roots::TLS_SERVER_ROOTS.to_vec(),
    })
    .with_no_client_auth();
    reqwest::Client::builder()
        .use_preconfigured_tls(tls)
        .timeout(timeout)
        .build()
        .expect("a TLS configuration built in code is valid")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn signs_as_stripe_documents() {
        // the shape Stripe documents: t=..., v1=64 hex digits
        let header = stripe_signature_header(&Secret::new("whsec_x"), 1, b"{}");
        let (t, v1) = header.split_once(',').unwrap();
        assert_eq!(t, "t=1");
        assert_eq!(v1.len(), 3 + 64);
        assert!(same_text("abc", "abc"));
        assert!(!same_text("abc", "abd"));
        assert!(!same_text("abc", "abcd"));
    }
}
