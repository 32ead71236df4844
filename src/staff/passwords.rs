//! Staff passwords: what a new one must be ([`check_new_password`]), and
//! argon2id hashing and checking, off the async threads, a few at a time
//! so that a flood of logins cannot exhaust the machine.

use std::sync::OnceLock;
use std::time::Duration;

use argon2::password_hash::rand_core::OsRng;
use argon2::password_hash::{PasswordHash, PasswordHasher, PasswordVerifier, SaltString};
use argon2::{Algorithm, Argon2, Params, Version};

use super::{Result, StaffError};
use crate::configuration::Secret;

/// Passwords staff choose: long enough to resist guessing, short enough
/// that hashing one cannot be used to tie up the server.
pub fn check_new_password(password: &Secret) -> Result<()> {
    let length = password.expose().chars().count();
    if length < 12 {
        return Err(StaffError::InvalidInput(
            "the password must have at least 12 characters".into(),
        ));
    }
    if password.expose().len() > MAX_PASSWORD_BYTES {
        return Err(StaffError::InvalidInput(format!(
            "the password must have at most {MAX_PASSWORD_BYTES} bytes"
        )));
    }
    Ok(())
}

/// Longer passwords are refused before hashing.
pub const MAX_PASSWORD_BYTES: usize = 1024;

fn hasher() -> Argon2<'static> {
    // OWASP's argon2id baseline: 19 MiB, 2 passes, 1 lane
    Argon2::new(Algorithm::Argon2id, Version::V0x13, Params::default())
}

pub(super) async fn hash_password(password: &Secret) -> Result<String> {
    let password = password.clone();
    tokio::task::spawn_blocking(move || {
        let salt = SaltString::generate(&mut OsRng);
        hasher()
            .hash_password(password.expose().as_bytes(), &salt)
            .map(|hash| hash.to_string())
            .map_err(|e| StaffError::Hashing(e.to_string()))
    })
    .await
    .map_err(|e| StaffError::Hashing(e.to_string()))?
}

/// Checks a password against a stored hash, off the async threads. An
/// unknown address is checked against a fixed hash, so its answer takes as
/// long as a known one's.
pub(super) async fn verify_password(stored: Option<String>, password: &Secret) -> Result<bool> {
    static DUMMY: OnceLock<String> = OnceLock::new();
    // each check takes 19 MiB and a core for a while: a flood of logins
    // waits its turn briefly, then is turned away, rather than exhausting
    // the machine
    static CHECKING: tokio::sync::Semaphore = tokio::sync::Semaphore::const_new(4);
    let _permit = tokio::time::timeout(Duration::from_secs(5), CHECKING.acquire())
        .await
        .map_err(|_| StaffError::Busy)?
        .map_err(|_| StaffError::Busy)?;
    let password = password.clone();
    let matches = tokio::task::spawn_blocking(move || {
        let known = stored.is_some();
        let stored = stored.unwrap_or_else(|| {
            DUMMY
                .get_or_init(|| {
                    let salt = SaltString::generate(&mut OsRng);
                    hasher()
                        .hash_password(b"no such staff member", &salt)
                        .map(|h| h.to_string())
                        .unwrap_or_default()
                })
                .clone()
        });
        let Ok(parsed) = PasswordHash::new(&stored) else {
            return false;
        };
        let matches = hasher()
            .verify_password(password.expose().as_bytes(), &parsed)
            .is_ok();
        known && matches
    })
    .await
    .unwrap_or(false);
    Ok(matches)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn short_passwords_are_refused() {
        assert!(check_new_password(&Secret::new("short")).is_err());
        assert!(check_new_password(&Secret::new("x".repeat(2000))).is_err());
        assert!(check_new_password(&Secret::new("correct horse battery")).is_ok());
    }
}
