//! First answers kept under idempotency keys, for both providers: Stripe's
//! `Idempotency-Key` on every POST (docs.stripe.com/api/idempotent_requests)
//! and Razorpay's `X-Refund-Idempotency` on refunds
//! (razorpay.com/docs/api/refunds/normal-refunds-idempotent). Both replay
//! the first answer to a repeat, refuse the key with other parameters, and
//! answer 409 while the first request is still running; each provider
//! words those refusals its own way.

use std::collections::HashMap;

use serde_json::Value;
use sha2::{Digest, Sha256};

/// What the request is, for comparing a repeat with the first use.
pub(crate) type Fingerprint = [u8; 32];

/// SHA-256 over the parts that make a request what it is.
pub(crate) fn fingerprint(parts: &[&[u8]]) -> Fingerprint {
    let mut hash = Sha256::new();
    for part in parts {
        hash.update((part.len() as u64).to_le_bytes());
        hash.update(part);
    }
    hash.finalize().into()
}

#[derive(Debug, Clone)]
struct Entry {
    fingerprint: Fingerprint,
    /// `None` while the first request is still running.
    answer: Option<(u16, Value)>,
}

/// What a key says about a request.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Claim {
    /// The key is new: it is now claimed by this request, which must
    /// [`Replays::answer`] it.
    First,
    /// The same request again: its first answer.
    Replay(u16, Value),
    /// The same request while the first is still running.
    InFlight,
    /// The key was first used for another request.
    Mismatch,
}

/// Keys and their first answers.
#[derive(Debug, Default)]
pub(crate) struct Replays {
    entries: HashMap<String, Entry>,
}

impl Replays {
    /// Look at the key and claim it in one go: a concurrent twin sees the
    /// claim.
    pub(crate) fn claim(&mut self, key: &str, fingerprint: Fingerprint) -> Claim {
        match self.entries.get(key) {
            Some(entry) if entry.fingerprint != fingerprint => Claim::Mismatch,
            Some(Entry {
                answer: Some((status, body)),
                ..
            }) => Claim::Replay(*status, body.clone()),
            Some(_) => Claim::InFlight,
            None => {
                self.entries.insert(
                    key.to_owned(),
                    Entry {
                        fingerprint,
                        answer: None,
                    },
                );
                Claim::First
            }
        }
    }

    /// The first request's answer, replayed from now on.
    pub(crate) fn answer(&mut self, key: &str, status: u16, body: Value) {
        if let Some(entry) = self.entries.get_mut(key) {
            entry.answer = Some((status, body));
        }
    }

    /// Every key is forgotten (Stripe forgets them after 24 hours).
    pub(crate) fn forget_all(&mut self) {
        self.entries.clear();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_key_replays_its_first_answer_and_refuses_another_request() {
        let mut replays = Replays::default();
        let first = fingerprint(&[b"POST /v1/refunds", b"amount=1"]);
        let other = fingerprint(&[b"POST /v1/refunds", b"amount=2"]);
        assert_eq!(replays.claim("k", first), Claim::First);
        assert_eq!(replays.claim("k", first), Claim::InFlight);
        assert_eq!(replays.claim("k", other), Claim::Mismatch);
        replays.answer("k", 200, serde_json::json!({"id": "re_1"}));
        assert_eq!(
            replays.claim("k", first),
            Claim::Replay(200, serde_json::json!({"id": "re_1"}))
        );
        replays.forget_all();
        assert_eq!(replays.claim("k", other), Claim::First);
        // parts are delimited: moving a byte across them is another request
        assert_ne!(fingerprint(&[b"ab", b"c"]), fingerprint(&[b"a", b"bc"]));
    }
}
