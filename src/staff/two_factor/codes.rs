//! The second factor itself: the app's codes (TOTP, RFC 6238), one-time
//! recovery codes, the secret sealed under a key derived from the session
//! key, and spending a code once ([`spend_code`]).

use aws_lc_rs::aead::{AES_256_GCM, Aad, LessSafeKey, NONCE_LEN, Nonce, UnboundKey};
use rand::{Rng, RngCore};
use sha2::{Digest, Sha256};

use crate::configuration::Secret;
use crate::keys::SessionKey;
use crate::staff::{Result, StaffError};

/// How the app and the shop agree on codes (RFC 6238's defaults, which
/// every authenticator app follows).
pub const DIGITS: usize = 6;
pub const STEP_SECONDS: u64 = 30;
/// Steps either side of now that are accepted (a phone's clock drifts).
pub const SKEW_STEPS: u16 = 1;
/// Recovery codes made at a time.
pub const RECOVERY_CODES: usize = 10;
/// The secret's length: 160 bits, as RFC 4226 recommends.
pub(super) const SECRET_BYTES: usize = 20;
/// How the shop names itself in the app.
pub const ISSUER: &str = "Holdfast";
/// Recovery codes are written in these: no 0/o, 1/l/i to misread.
pub(super) const RECOVERY_ALPHABET: &[u8] = b"23456789abcdefghjkmnpqrstuvwxyz";
/// Characters of a recovery code (31^16: 79 bits).
pub(super) const RECOVERY_LENGTH: usize = 16;
/// What the sealing key is derived for.
const SEALING_LABEL: &str = "holdfast two-factor secrets v1";

/// What a member typed as a second factor.
#[derive(Debug, PartialEq, Eq)]
pub(super) enum Code {
    /// Six digits from the app.
    App(String),
    /// A recovery code, lower-cased, without its dashes.
    Recovery(String),
    /// Neither shape: wrong, whatever it was.
    Neither,
}

impl Code {
    pub(super) fn parse(typed: &Secret) -> Self {
        let plain: String = typed
            .expose()
            .chars()
            .filter(|c| !c.is_whitespace() && *c != '-')
            .take(64)
            .collect::<String>()
            .to_ascii_lowercase();
        if plain.len() == DIGITS && plain.bytes().all(|b| b.is_ascii_digit()) {
            Code::App(plain)
        } else if plain.len() == RECOVERY_LENGTH
            && plain.bytes().all(|b| RECOVERY_ALPHABET.contains(&b))
        {
            Code::Recovery(plain)
        } else {
            Code::Neither
        }
    }
}

/// The key secrets are sealed with, derived from the session key.
pub(super) struct Sealing(LessSafeKey);

impl Sealing {
    pub(super) fn new(key: &SessionKey) -> Self {
        let bytes = key.derive(SEALING_LABEL);
        Self(LessSafeKey::new(
            UnboundKey::new(&AES_256_GCM, &bytes).expect("a 32-byte AES-256 key"),
        ))
    }

    fn aad(staff_id: i64) -> Aad<String> {
        Aad::from(format!("staff_two_factor:{staff_id}"))
    }

    /// nonce ‖ ciphertext ‖ tag.
    pub(super) fn seal(&self, staff_id: i64, secret: &[u8; SECRET_BYTES]) -> Result<Vec<u8>> {
        let mut nonce = [0u8; NONCE_LEN];
        rand::rngs::OsRng.fill_bytes(&mut nonce);
        let mut sealed = secret.to_vec();
        self.0
            .seal_in_place_append_tag(
                Nonce::assume_unique_for_key(nonce),
                Self::aad(staff_id),
                &mut sealed,
            )
            .map_err(|_| StaffError::Internal("sealing a two-factor secret failed".into()))?;
        let mut out = nonce.to_vec();
        out.extend_from_slice(&sealed);
        Ok(out)
    }

    /// The secret, if it was sealed for this account under this key.
    pub(super) fn open(&self, staff_id: i64, sealed: &[u8]) -> Option<[u8; SECRET_BYTES]> {
        if sealed.len() != NONCE_LEN + SECRET_BYTES + AES_256_GCM.tag_len() {
            return None;
        }
        let (nonce, rest) = sealed.split_at(NONCE_LEN);
        let nonce = Nonce::try_assume_unique_for_key(nonce).ok()?;
        let mut buffer = rest.to_vec();
        let plain = self
            .0
            .open_in_place(nonce, Self::aad(staff_id), &mut buffer)
            .ok()?;
        plain.try_into().ok()
    }
}

pub(super) fn totp(secret: &[u8; SECRET_BYTES]) -> totp_rs::Totp {
    totp_rs::Builder::new()
        .with_algorithm(totp_rs::Algorithm::SHA1)
        .with_digits(DIGITS as u8)
        .with_skew(SKEW_STEPS)
        .with_step_duration(STEP_SECONDS)
        .with_secret(secret.to_vec())
        .build()
        .expect("RFC 6238 parameters and a 160-bit secret")
}

fn now_seconds() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

/// The step an app code is right for (now, or one step either way).
pub(super) fn app_code_step(secret: &[u8; SECRET_BYTES], code: &str) -> Option<i64> {
    totp(secret)
        .check(code, now_seconds())
        .and_then(|step| i64::try_from(step).ok())
}

pub(super) fn recovery_hash(staff_id: i64, code: &str) -> Vec<u8> {
    Sha256::digest(format!("holdfast recovery code:{staff_id}:{code}")).to_vec()
}

fn new_recovery_code() -> String {
    let mut rng = rand::rngs::OsRng;
    (0..RECOVERY_LENGTH)
        .map(|_| RECOVERY_ALPHABET[rng.gen_range(0..RECOVERY_ALPHABET.len())] as char)
        .collect()
}

/// Recovery codes as the member is shown them, once: `abcd-efgh-jkmn-pqrs`.
#[derive(Debug)]
pub struct RecoveryCodes(pub Vec<Secret>);

impl RecoveryCodes {
    fn make() -> (Self, Vec<String>) {
        let plain: Vec<String> = (0..RECOVERY_CODES).map(|_| new_recovery_code()).collect();
        let shown = plain
            .iter()
            .map(|code| {
                let groups: Vec<&str> = (0..RECOVERY_LENGTH)
                    .step_by(4)
                    .map(|i| &code[i..i + 4])
                    .collect();
                Secret::new(groups.join("-"))
            })
            .collect();
        (Self(shown), plain)
    }
}

/// Replaces an account's recovery codes with new ones, in the caller's
/// transaction.
pub(super) async fn replace_recovery_codes(
    tx: &mut sqlx::Transaction<'_, sqlx::Postgres>,
    staff_id: i64,
) -> Result<RecoveryCodes> {
    let (codes, plain) = RecoveryCodes::make();
    sqlx::query("delete from staff_recovery_codes where staff_id = $1")
        .bind(staff_id)
        .execute(&mut **tx)
        .await?;
    let hashes: Vec<Vec<u8>> = plain
        .iter()
        .map(|code| recovery_hash(staff_id, code))
        .collect();
    sqlx::query(
        "insert into staff_recovery_codes (staff_id, code_hash) \
         select $1, h from unnest($2::bytea[]) as u(h)",
    )
    .bind(staff_id)
    .bind(&hashes)
    .execute(&mut **tx)
    .await?;
    Ok(codes)
}

/// What a second factor came to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Verified {
    App,
    Recovery,
    /// Right, but already used (an app code of a step already accepted,
    /// or a spent recovery code).
    Spent,
    Wrong,
}

impl Verified {
    pub(super) fn as_str(self) -> &'static str {
        match self {
            Verified::App => "app",
            Verified::Recovery => "recovery_code",
            Verified::Spent => "code_already_used",
            Verified::Wrong => "wrong_code",
        }
    }
}

/// Checks and spends a member's second factor in the caller's transaction:
/// an app code moves `last_step` forward (only forward), a recovery code
/// is marked used; each by one conditional write, so a code passes once.
pub(super) async fn spend_code(
    tx: &mut sqlx::Transaction<'_, sqlx::Postgres>,
    key: &SessionKey,
    staff_id: i64,
    typed: &Secret,
) -> Result<Verified> {
    match Code::parse(typed) {
        Code::Neither => Ok(Verified::Wrong),
        Code::App(code) => {
            let sealed: Option<Vec<u8>> = sqlx::query_scalar(
                "select secret_sealed from staff_two_factor \
                  where staff_id = $1 and confirmed_at is not null",
            )
            .bind(staff_id)
            .fetch_optional(&mut **tx)
            .await?;
            let Some(sealed) = sealed else {
                return Ok(Verified::Wrong);
            };
            let Some(secret) = Sealing::new(key).open(staff_id, &sealed) else {
                tracing::error!(
                    staff_id,
                    "a two-factor secret cannot be opened: HOLDFAST_SESSION_KEY is not the one \
                     it was sealed with; sign in with a recovery code, or reset two-factor"
                );
                return Ok(Verified::Wrong);
            };
            let Some(step) = app_code_step(&secret, &code) else {
                return Ok(Verified::Wrong);
            };
            // the lock on the row is this update's: a racing sign-in with
            // the same code waits, then finds the step taken
            let moved = sqlx::query(
                "update staff_two_factor set last_step = $2 \
                  where staff_id = $1 and confirmed_at is not null and last_step < $2",
            )
            .bind(staff_id)
            .bind(step)
            .execute(&mut **tx)
            .await?
            .rows_affected();
            Ok(if moved == 1 {
                Verified::App
            } else {
                Verified::Spent
            })
        }
        Code::Recovery(code) => {
            let spent: Option<bool> = sqlx::query_scalar(
                "update staff_recovery_codes set used_at = coalesce(used_at, now()) \
                  where staff_id = $1 and code_hash = $2 \
                 returning used_at = now()",
            )
            .bind(staff_id)
            .bind(recovery_hash(staff_id, &code))
            .fetch_optional(&mut **tx)
            .await?;
            Ok(match spent {
                Some(true) => Verified::Recovery,
                Some(false) => Verified::Spent,
                None => Verified::Wrong,
            })
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codes_are_read_as_typed() {
        assert_eq!(
            Code::parse(&Secret::new(" 123 456 ")),
            Code::App("123456".into())
        );
        assert_eq!(
            Code::parse(&Secret::new("ABCD-EFGH-JKMN-PQRS")),
            Code::Recovery("abcdefghjkmnpqrs".into())
        );
        for wrong in [
            "",
            "12345",
            "1234567",
            "abcd",
            "0000-0000-0000-0000",
            "12345a",
        ] {
            assert_eq!(Code::parse(&Secret::new(wrong)), Code::Neither, "{wrong:?}");
        }
    }

    #[test]
    fn a_sealed_secret_opens_only_for_its_account_under_its_key() {
        let key = SessionKey::new(Secret::new("k".repeat(32))).unwrap();
        let secret = [7u8; SECRET_BYTES];
        let sealed = Sealing::new(&key).seal(1, &secret).unwrap();
        assert_eq!(sealed.len(), 12 + 20 + 16);
        assert!(
            !sealed.windows(4).any(|w| w == [7u8; 4]),
            "not in the clear"
        );
        assert_eq!(Sealing::new(&key).open(1, &sealed), Some(secret));
        assert_eq!(Sealing::new(&key).open(2, &sealed), None, "another account");
        let other = SessionKey::new(Secret::new("j".repeat(32))).unwrap();
        assert_eq!(Sealing::new(&other).open(1, &sealed), None, "another key");
        let mut tampered = sealed.clone();
        tampered[20] ^= 1;
        assert_eq!(Sealing::new(&key).open(1, &tampered), None);
        // two seals of one secret differ (a fresh nonce each)
        assert_ne!(Sealing::new(&key).seal(1, &secret).unwrap(), sealed);
    }

    #[test]
    fn codes_follow_rfc_6238() {
        // RFC 6238 appendix B, SHA-1: the secret "12345678901234567890",
        // 59 s and 1111111109 s (the test vectors' last six digits)
        let secret: [u8; 20] = *b"12345678901234567890";
        let totp = totp(&secret);
        assert_eq!(totp.generate(59).to_string(), "287082");
        assert_eq!(totp.generate(1111111109).to_string(), "081804");
        // one step either way is accepted, two are not
        assert_eq!(totp.check("287082", 59 + 30), Some(1));
        assert_eq!(totp.check("287082", 59 + 60), None);
    }

    #[test]
    fn recovery_codes_are_random_grouped_and_distinct() {
        let (codes, plain) = RecoveryCodes::make();
        assert_eq!(codes.0.len(), RECOVERY_CODES);
        let shown = codes.0[0].expose();
        assert_eq!(shown.len(), 19);
        assert_eq!(shown.replace('-', ""), plain[0]);
        let mut unique = plain.clone();
        unique.sort();
        unique.dedup();
        assert_eq!(unique.len(), RECOVERY_CODES);
        assert_ne!(recovery_hash(1, &plain[0]), recovery_hash(2, &plain[0]));
        assert!(!format!("{codes:?}").contains(&plain[0]));
    }
}
