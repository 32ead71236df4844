//! Standard Webhooks signatures (<https://www.standardwebhooks.com>): a
//! secret `whsec_<base64 of 32 random bytes>`; each delivery carries
//! `webhook-id`, `webhook-timestamp` (seconds) and `webhook-signature:
//! v1,<base64 HMAC-SHA256 of "id.timestamp.body">`, so a receiver can
//! verify with the specification's library in any language. The secret is
//! kept sealed (AES-256-GCM under a key derived from the session key, bound
//! to its endpoint), as two-factor secrets are.

use aws_lc_rs::aead::{AES_256_GCM, Aad, LessSafeKey, NONCE_LEN, Nonce, UnboundKey};
use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use hmac::{Hmac, Mac};
use rand::RngCore;
use sha2::Sha256;

use crate::keys::SessionKey;

/// Bytes of a secret's key.
pub const SECRET_BYTES: usize = 32;
/// What the sealing key is derived for.
const SEALING_LABEL: &str = "holdfast webhook secrets v1";
/// The prefix the specification gives secrets.
const PREFIX: &str = "whsec_";

/// An endpoint's signing secret. Never printed: `Debug` hides it, and it
/// is shown once, when the endpoint is made ([`WebhookSecret::reveal`]).
#[derive(Clone, PartialEq, Eq)]
pub struct WebhookSecret([u8; SECRET_BYTES]);

impl std::fmt::Debug for WebhookSecret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("WebhookSecret([redacted])")
    }
}

impl WebhookSecret {
    pub fn generate() -> Self {
        let mut key = [0u8; SECRET_BYTES];
        rand::rngs::OsRng.fill_bytes(&mut key);
        Self(key)
    }

    /// `whsec_…`, as the receiver configures it.
    pub fn reveal(&self) -> String {
        format!("{PREFIX}{}", STANDARD.encode(self.0))
    }

    /// The `webhook-signature` header's value for one delivery.
    pub fn sign(&self, id: &str, timestamp: i64, body: &[u8]) -> String {
        let mut mac = Hmac::<Sha256>::new_from_slice(&self.0).expect("HMAC takes any key");
        mac.update(id.as_bytes());
        mac.update(b".");
        mac.update(timestamp.to_string().as_bytes());
        mac.update(b".");
        mac.update(body);
        format!("v1,{}", STANDARD.encode(mac.finalize().into_bytes()))
    }

    /// Sealed for one endpoint: nonce ‖ ciphertext ‖ tag.
    pub fn seal(&self, key: &SessionKey, endpoint_id: &str) -> Vec<u8> {
        let mut nonce = [0u8; NONCE_LEN];
        rand::rngs::OsRng.fill_bytes(&mut nonce);
        let mut sealed = self.0.to_vec();
        sealing(key)
            .seal_in_place_append_tag(
                Nonce::assume_unique_for_key(nonce),
                aad(endpoint_id),
                &mut sealed,
            )
            .expect("AES-256-GCM seals 32 bytes");
        let mut out = nonce.to_vec();
        out.extend_from_slice(&sealed);
        out
    }

    /// The secret, if it was sealed for this endpoint under this key.
    pub fn open(key: &SessionKey, endpoint_id: &str, sealed: &[u8]) -> Option<Self> {
        if sealed.len() != NONCE_LEN + SECRET_BYTES + AES_256_GCM.tag_len() {
            return None;
        }
        let (nonce, rest) = sealed.split_at(NONCE_LEN);
        let nonce = Nonce::try_assume_unique_for_key(nonce).ok()?;
        let mut buffer = rest.to_vec();
        let plain = sealing(key)
            .open_in_place(nonce, aad(endpoint_id), &mut buffer)
            .ok()?;
        Some(Self(plain.try_into().ok()?))
    }

    #[cfg(test)]
    fn parse(text: &str) -> Option<Self> {
        let bytes = STANDARD.decode(text.strip_prefix(PREFIX)?).ok()?;
        Some(Self(bytes.try_into().ok()?))
    }
}

fn sealing(key: &SessionKey) -> LessSafeKey {
    LessSafeKey::new(
        UnboundKey::new(&AES_256_GCM, &key.derive(SEALING_LABEL)).expect("a 32-byte AES-256 key"),
    )
}

fn aad(endpoint_id: &str) -> Aad<String> {
    Aad::from(format!("webhook_endpoint:{endpoint_id}"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::configuration::Secret;

    #[test]
    fn signs_as_the_specification_example_does() {
        // the specification's own example (its libraries' tests use it)
        let secret = WebhookSecret::parse("whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw");
        // that example's key is 24 bytes; ours are 32, so sign with its bytes
        assert!(secret.is_none());
        let key = STANDARD.decode("MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw").unwrap();
        let mut mac = Hmac::<Sha256>::new_from_slice(&key).unwrap();
        mac.update(b"msg_p5jXN8AQM9LWM0D4loKWxJek.1614265330.{\"test\": 2432232314}");
        assert_eq!(
            STANDARD.encode(mac.finalize().into_bytes()),
            "g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE="
        );
        // and ours is the same construction
        let ours = WebhookSecret([7; SECRET_BYTES]);
        let mut mac = Hmac::<Sha256>::new_from_slice(&[7; SECRET_BYTES]).unwrap();
        mac.update(b"msg_1.1700000000.{}");
        assert_eq!(
            ours.sign("msg_1", 1_700_000_000, b"{}"),
            format!("v1,{}", STANDARD.encode(mac.finalize().into_bytes()))
        );
        assert_eq!(WebhookSecret::parse(&ours.reveal()), Some(ours));
    }

    #[test]
    fn a_sealed_secret_opens_only_for_its_endpoint_under_its_key() {
        let key = SessionKey::new(Secret::new("k".repeat(40))).unwrap();
        let other = SessionKey::new(Secret::new("o".repeat(40))).unwrap();
        let secret = WebhookSecret::generate();
        let sealed = secret.seal(&key, "ep_a");
        assert_eq!(sealed.len(), 12 + 32 + 16);
        assert_eq!(
            WebhookSecret::open(&key, "ep_a", &sealed),
            Some(secret.clone())
        );
        assert_eq!(WebhookSecret::open(&key, "ep_b", &sealed), None);
        assert_eq!(WebhookSecret::open(&other, "ep_a", &sealed), None);
        assert!(!format!("{secret:?}").contains(&secret.reveal()[6..]));
    }
}
