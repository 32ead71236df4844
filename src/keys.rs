//! The process's secret key, `HOLDFAST_SESSION_KEY` ([`SessionKey`]): staff
//! cookies are signed with it, and each secret the shop keeps sealed (a
//! two-factor secret, a webhook endpoint's signing secret) is sealed with a
//! key derived from it for that purpose alone. And [`random_token`], the
//! 256 random bits that session ids, CSRF tokens and secrets are made of.
//! Depends on nothing of the shop's but its configuration.

use std::fmt;

use rand::RngCore;

use crate::configuration::Secret;
use crate::payments::signature::{hmac_sha256_hex, hmac_sha256_matches};

/// Why a key cannot be used.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct KeyError(String);

/// Signs cookie values (HMAC-SHA256) with the configured session key.
#[derive(Clone)]
pub struct SessionKey {
    key: Secret,
    /// Made up by this process (no `HOLDFAST_SESSION_KEY`): gone when it ends.
    ephemeral: bool,
}

impl fmt::Debug for SessionKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("SessionKey([redacted])")
    }
}

impl SessionKey {
    /// At least 32 bytes of key material.
    pub fn new(key: Secret) -> Result<Self, KeyError> {
        if key.expose().len() < 32 {
            return Err(KeyError(
                "HOLDFAST_SESSION_KEY must have at least 32 characters".into(),
            ));
        }
        Ok(Self {
            key,
            ephemeral: false,
        })
    }

    /// A random key for development; sessions signed with it end when the
    /// process does.
    pub fn generate() -> Self {
        Self {
            key: Secret::new(random_token()),
            ephemeral: true,
        }
    }

    /// Whether this process made the key up (nothing it signs or seals
    /// outlives the process).
    pub fn is_ephemeral(&self) -> bool {
        self.ephemeral
    }

    /// `value.signature`.
    pub fn sign(&self, value: &str) -> String {
        let signature = hmac_sha256_hex(self.key.expose().as_bytes(), value.as_bytes());
        format!("{value}.{signature}")
    }

    /// The value, if the signature is ours (compared in constant time).
    pub fn verify<'a>(&self, signed: &'a str) -> Option<&'a str> {
        let (value, signature) = signed.rsplit_once('.')?;
        hmac_sha256_matches(self.key.expose().as_bytes(), value.as_bytes(), signature)
            .then_some(value)
    }

    /// A key of its own for one purpose, HMAC-SHA256(session key, label):
    /// knowing one derived key tells nothing of the session key or another.
    pub(crate) fn derive(&self, label: &str) -> [u8; 32] {
        let hex = hmac_sha256_hex(self.key.expose().as_bytes(), label.as_bytes());
        let mut key = [0u8; 32];
        hex::decode_to_slice(hex, &mut key).expect("HMAC-SHA256 is 32 bytes of hex");
        key
    }
}

/// 256 random bits, hex.
pub fn random_token() -> String {
    let mut bytes = [0u8; 32];
    rand::rngs::OsRng.fill_bytes(&mut bytes);
    hex::encode(bytes)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn signatures_check_out_and_forgeries_do_not() {
        let key = SessionKey::new(Secret::new("k".repeat(32))).unwrap();
        let signed = key.sign("abc");
        assert_eq!(key.verify(&signed), Some("abc"));
        assert_eq!(key.verify("abc.00"), None);
        let forged = format!("abd.{}", signed.split_once('.').unwrap().1);
        assert_eq!(key.verify(&forged), None);
        let other = SessionKey::new(Secret::new("j".repeat(32))).unwrap();
        assert_eq!(other.verify(&signed), None);
        assert!(SessionKey::new(Secret::new("short")).is_err());
        assert!(!format!("{key:?}").contains("kkkk"));
    }
}
