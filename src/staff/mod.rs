//! Staff: accounts with argon2id passwords, sessions behind a signed cookie
//! and a database row, the login throttle, and (in [`actions`]) the admin's
//! actions, each recorded with who took it. [`accounts`] is the owner's
//! running of accounts and roles; [`two_factor`] the second step of signing
//! in; [`catalogue`] and [`vouchers`] what staff change in what is sold.

pub mod accounts;
pub mod actions;
pub mod api_keys;
pub mod catalogue;
pub mod exports;
pub mod refunds;
pub mod roles;
pub mod two_factor;
pub mod views;
pub mod vouchers;

use std::fmt;
use std::sync::OnceLock;
use std::time::Duration;

use argon2::password_hash::rand_core::OsRng;
use argon2::password_hash::{PasswordHash, PasswordHasher, PasswordVerifier, SaltString};
use argon2::{Algorithm, Argon2, Params, Version};
use rand::RngCore;
use sha2::{Digest, Sha256};
use sqlx::PgPool;

pub use crate::audit::Actor;
use crate::audit::{self, Member};
use crate::configuration::Secret;
use crate::payments::signature::{hmac_sha256_hex, hmac_sha256_matches};

/// How long a staff session lasts after login.
pub const SESSION_HOURS: i64 = 12;
/// How long a lock lasts.
pub const LOCK_MINUTES: i64 = 15;
/// The window attempts are counted in.
pub const WINDOW_MINUTES: i64 = 15;

/// One way login attempts are counted: attempts in a window, slowed from
/// `slow_after` on, locked at `lock_after` (never, for `None`).
#[derive(Debug, Clone, Copy)]
pub struct Throttle {
    /// The row key's prefix.
    pub kind: &'static str,
    pub slow_after: i32,
    pub lock_after: Option<i32>,
}

/// One e-mail typed from one client address: a stranger guessing the
/// owner's password from their own address locks only themselves.
pub const PER_EMAIL_FROM_ADDRESS: Throttle = Throttle {
    kind: "pair",
    slow_after: 5,
    lock_after: Some(10),
};
/// Everything typed from one client address: guessing across many
/// e-mails is slowed, then locked, for that address only.
pub const PER_ADDRESS: Throttle = Throttle {
    kind: "address",
    slow_after: 10,
    lock_after: Some(30),
};
/// One e-mail from anywhere: guesses spread over many addresses are
/// slowed, never locked, so nobody can lock the owner out from afar.
pub const PER_EMAIL: Throttle = Throttle {
    kind: "email",
    slow_after: 10,
    lock_after: None,
};
/// The longest a wrong answer is slowed.
const SLOWEST: Duration = Duration::from_secs(3);

#[derive(Debug, thiserror::Error)]
pub enum StaffError {
    #[error("{0}")]
    InvalidInput(String),
    #[error(transparent)]
    Database(#[from] sqlx::Error),
    #[error("password hashing failed: {0}")]
    Hashing(String),
    /// Too many logins are being checked at once; try again shortly.
    #[error("too many logins at once")]
    Busy,
    #[error("{0}")]
    Internal(String),
}

pub type Result<T, E = StaffError> = std::result::Result<T, E>;

/// A staff member's address: trimmed, lower-cased, plausible.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StaffEmail(String);

impl StaffEmail {
    pub fn parse(value: &str) -> Result<Self> {
        let email = value.trim().to_lowercase();
        let plausible = (3..=254).contains(&email.len())
            && !email.chars().any(|c| c.is_whitespace() || c.is_control())
            && email
                .split_once('@')
                .is_some_and(|(user, host)| !user.is_empty() && !host.is_empty());
        if !plausible {
            return Err(StaffError::InvalidInput(
                "an e-mail address like name@example.com is needed".into(),
            ));
        }
        Ok(Self(email))
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

/// A signed-in staff member.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StaffMember {
    pub id: i64,
    pub email: String,
    pub role: roles::Role,
}

impl StaffMember {
    /// How hold history and logs name this person.
    pub fn actor(&self) -> String {
        format!("staff:{}", self.email)
    }
}

/// A member acts as themselves, in their role: how the audit log records
/// what they did.
impl<'a> From<&'a StaffMember> for Actor<'a> {
    fn from(staff: &'a StaffMember) -> Self {
        Actor::Staff(Member {
            id: staff.id,
            email: &staff.email,
            role: staff.role.as_str(),
        })
    }
}

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

async fn hash_password(password: &Secret) -> Result<String> {
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
async fn verify_password(stored: Option<String>, password: &Secret) -> Result<bool> {
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

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AddOutcome {
    Created,
    PasswordChanged,
}

/// A new staff member (an owner), or a new password for one: for tests and
/// scripts. The command line's `holdfast staff add` is
/// [`accounts::set_up`], which asks for a role and records who did it.
pub async fn add_staff(pool: &PgPool, email: &StaffEmail, password: &Secret) -> Result<AddOutcome> {
    check_new_password(password)?;
    let hash = hash_password(password).await?;
    let mut tx = pool.begin().await?;
    let created: bool = sqlx::query_scalar(
        "insert into staff (email, password_hash) values ($1, $2) \
         on conflict (email) do update set password_hash = excluded.password_hash, updated_at = now() \
         returning (xmax = 0)",
    )
    .bind(email.as_str())
    .bind(&hash)
    .fetch_one(&mut *tx)
    .await?;
    if !created {
        // a new password ends every session of the old one
        for ended in [
            "delete from staff_sessions where staff_id = (select id from staff where email = $1)",
            "delete from staff_login_challenges where staff_id = (select id from staff where email = $1)",
        ] {
            sqlx::query(ended)
                .bind(email.as_str())
                .execute(&mut *tx)
                .await?;
        }
    }
    tx.commit().await?;
    Ok(if created {
        AddOutcome::Created
    } else {
        AddOutcome::PasswordChanged
    })
}

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
    pub fn new(key: Secret) -> Result<Self> {
        if key.expose().len() < 32 {
            return Err(StaffError::InvalidInput(
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

fn session_hash(id: &str) -> Vec<u8> {
    Sha256::digest(id.as_bytes()).to_vec()
}

/// A signed-in browser.
#[derive(Clone)]
pub struct Session {
    pub staff: StaffMember,
    pub csrf_token: String,
    /// The cookie's (unsigned) session id.
    pub id: String,
    /// Whether this member signs in with a second factor.
    pub two_factor: bool,
    /// The owner requires a second factor of this member's role and it
    /// has none yet: the session may enrol (or sign out) and nothing else.
    pub must_enrol: bool,
}

/// The id and token are bearer credentials: never printed.
impl fmt::Debug for Session {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Session")
            .field("staff", &self.staff)
            .field("csrf_token", &"[redacted]")
            .field("id", &"[redacted]")
            .field("two_factor", &self.two_factor)
            .field("must_enrol", &self.must_enrol)
            .finish()
    }
}

/// Whether a member must enrol before doing anything: the owner's setting
/// asks it of every role that can refund, and the member has no second
/// factor yet.
pub fn must_enrol(role: roles::Role, two_factor: bool, required_for_refunds: bool) -> bool {
    required_for_refunds && role.refunds() && !two_factor
}

/// The session a cookie's id names, if it exists, has not expired and its
/// account is not disabled.
pub async fn session(pool: &PgPool, id: &str) -> Result<Option<Session>> {
    if id.len() != 64 || !id.bytes().all(|b| b.is_ascii_hexdigit()) {
        return Ok(None);
    }
    let row: Option<(i64, String, roles::Role, String, bool, bool)> = sqlx::query_as(
        "select s.id, s.email, s.role, ss.csrf_token, \
                exists (select 1 from staff_two_factor tf \
                         where tf.staff_id = s.id and tf.confirmed_at is not null), \
                coalesce((select two_factor_for_refunds from staff_settings), false) \
           from staff_sessions ss join staff s on s.id = ss.staff_id \
          where ss.id_hash = $1 and ss.expires_at > now() and s.disabled_at is null",
    )
    .bind(session_hash(id))
    .fetch_optional(pool)
    .await?;
    Ok(row.map(
        |(staff_id, email, role, csrf_token, two_factor, required)| Session {
            staff: StaffMember {
                id: staff_id,
                email,
                role,
            },
            csrf_token,
            id: id.to_owned(),
            two_factor,
            must_enrol: must_enrol(role, two_factor, required),
        },
    ))
}

/// Logs out: the session row goes, so the cookie opens nothing even if kept.
pub async fn end_session(pool: &PgPool, session: &Session) -> Result<()> {
    let mut tx = pool.begin().await?;
    sqlx::query("delete from staff_sessions where id_hash = $1")
        .bind(session_hash(&session.id))
        .execute(&mut *tx)
        .await?;
    audit::record(
        &mut tx,
        &session.staff,
        "logout",
        &session.staff.email,
        "ok",
        serde_json::json!({}),
    )
    .await?;
    tx.commit().await?;
    audit::log_action(&session.staff, "logout", &session.staff.email, "ok");
    Ok(())
}

/// A new session row for `staff`, in the caller's transaction: the
/// cookie's id and the session's CSRF token.
async fn start_session(
    tx: &mut sqlx::Transaction<'_, sqlx::Postgres>,
    staff: &StaffMember,
) -> sqlx::Result<(String, String)> {
    let session_id = random_token();
    let csrf_token = random_token();
    sqlx::query(
        "insert into staff_sessions (id_hash, staff_id, csrf_token, expires_at) \
         values ($1, $2, $3, now() + $4 * interval '1 hour')",
    )
    .bind(session_hash(&session_id))
    .bind(staff.id)
    .bind(&csrf_token)
    .bind(SESSION_HOURS as f64)
    .execute(&mut **tx)
    .await?;
    Ok((session_id, csrf_token))
}

/// What a login attempt came to.
#[derive(Debug)]
pub enum LoginOutcome {
    SignedIn(Session),
    /// The password was right and the account signs in with a second
    /// factor: the browser is given this challenge's id (a bearer
    /// credential until the code is typed, for a few minutes) and asked for
    /// the code.
    NeedsCode {
        challenge: Secret,
    },
    /// Wrong address or password (the answer does not say which).
    Refused,
    /// The password was right, but an owner has disabled the account.
    Disabled,
    /// Too many attempts for this address: try again after this long.
    Locked {
        retry_after: Duration,
    },
}

/// How long a sign-in waits between its password and its code.
pub const CHALLENGE_MINUTES: i64 = 5;
/// Wrong codes one challenge takes before the password is asked again.
pub const CHALLENGE_WRONG_CODES: i32 = 5;

/// One answer to the login (a password, or a sign-in code), counted in the
/// throttle *before* it is checked: per e-mail from the client's address
/// ([`PER_EMAIL_FROM_ADDRESS`]), per address ([`PER_ADDRESS`]) and per
/// e-mail ([`PER_EMAIL`]), so parallel guesses cannot slip past a limit.
pub(crate) struct Attempt {
    counts: [(Throttle, String); 3],
    counted: Vec<(String, i32, Option<f64>)>,
}

impl Attempt {
    /// Counts an answer for `typed` (lower-cased, at most 254 characters)
    /// from `address`. `Err` is the answer when a count is locked already
    /// or a burst has just raced past a limit: nothing is to be checked.
    pub(crate) async fn count(
        pool: &PgPool,
        typed: &str,
        address: &str,
    ) -> Result<std::result::Result<Self, LoginOutcome>> {
        let address: String = address.chars().take(45).collect();
        let counts = [
            (PER_EMAIL_FROM_ADDRESS, format!("pair:{address} {typed}")),
            (PER_ADDRESS, format!("address:{address}")),
            (PER_EMAIL, format!("email:{typed}")),
        ];
        let keys: Vec<&str> = counts.iter().map(|(_, key)| key.as_str()).collect();
        // one statement, keys in one order: concurrent logins cannot deadlock
        let counted: Vec<(String, i32, Option<f64>)> = sqlx::query_as(
            "insert into login_throttle as t (key, attempts) \
             select key, 1 from unnest($1::text[]) as k(key) order by key \
             on conflict (key) do update set \
                attempts = case when t.locked_until > now() then t.attempts \
                                when t.locked_until is not null \
                                  or t.window_started_at < now() - $2 * interval '1 minute' then 1 \
                                else t.attempts + 1 end, \
                window_started_at = case when t.locked_until > now() then t.window_started_at \
                                         when t.locked_until is not null \
                                           or t.window_started_at < now() - $2 * interval '1 minute' then now() \
                                         else t.window_started_at end, \
                locked_until = case when t.locked_until > now() then t.locked_until end \
             returning key, attempts, extract(epoch from (locked_until - now()))::float8",
        )
        .bind(&keys)
        .bind(WINDOW_MINUTES as f64)
        .fetch_all(pool)
        .await?;
        let attempt = Self { counts, counted };
        let locked_for = attempt
            .counted
            .iter()
            .filter_map(|(_, _, seconds)| *seconds)
            .fold(0.0_f64, f64::max);
        if locked_for > 0.0 {
            return Ok(Err(LoginOutcome::Locked {
                retry_after: Duration::from_secs_f64(locked_for.ceil()),
            }));
        }
        let raced_past = attempt.reached(true);
        if !raced_past.is_empty() {
            // a burst raced past a limit: lock without checking
            return Ok(Err(lock(pool, &raced_past).await?));
        }
        Ok(Ok(attempt))
    }

    fn attempts(&self, key: &str) -> i32 {
        self.counted
            .iter()
            .find(|(k, _, _)| k == key)
            .map_or(0, |(_, n, _)| *n)
    }

    fn reached(&self, past: bool) -> Vec<&str> {
        self.counts
            .iter()
            .filter(|(throttle, key)| {
                throttle.lock_after.is_some_and(|limit| {
                    let n = self.attempts(key);
                    if past { n > limit } else { n >= limit }
                })
            })
            .map(|(_, key)| key.as_str())
            .collect()
    }

    /// The answer was wrong: locks a count that reached its limit, or
    /// slows the answer past a count's `slow_after`.
    pub(crate) async fn wrong(&self, pool: &PgPool) -> sqlx::Result<LoginOutcome> {
        let reached = self.reached(false);
        if !reached.is_empty() {
            return lock(pool, &reached).await;
        }
        let slowest = self
            .counts
            .iter()
            .map(|(throttle, key)| self.attempts(key) - throttle.slow_after + 1)
            .filter_map(|steps| u32::try_from(steps).ok())
            .map(|steps| Duration::from_millis(200) * steps)
            .max()
            .unwrap_or_default()
            .min(SLOWEST);
        tokio::time::sleep(slowest).await;
        Ok(LoginOutcome::Refused)
    }

    /// The whole sign-in succeeded: this e-mail's counts are forgotten. The
    /// address's count stays: a right answer for one account does not buy
    /// more guesses at others.
    pub(crate) async fn forget(
        &self,
        tx: &mut sqlx::Transaction<'_, sqlx::Postgres>,
    ) -> sqlx::Result<()> {
        sqlx::query("delete from login_throttle where key = any($1)")
            .bind([self.counts[0].1.as_str(), self.counts[2].1.as_str()])
            .execute(&mut **tx)
            .await?;
        Ok(())
    }
}

/// An e-mail as typed into the login form, as the throttle counts it.
pub(crate) fn typed_email(typed: &str) -> String {
    typed.trim().to_lowercase().chars().take(254).collect()
}

/// Checks a login from client `address` (the limits key), counted first
/// ([`Attempt`]). Wrong answers past a count's `slow_after` are slowed;
/// reaching a `lock_after` locks that count's key for [`LOCK_MINUTES`],
/// even for the right password. An account with two-factor sign-in gets a
/// challenge instead of a session, and its counts are kept until the code
/// is right too ([`two_factor::log_in_with_code`]).
pub async fn log_in(
    pool: &PgPool,
    typed_email: &str,
    address: &str,
    password: &Secret,
) -> Result<LoginOutcome> {
    let typed = self::typed_email(typed_email);
    if typed.is_empty() || password.expose().is_empty() {
        return Ok(LoginOutcome::Refused);
    }
    if password.expose().len() > MAX_PASSWORD_BYTES {
        return Ok(LoginOutcome::Refused);
    }
    let attempt = match Attempt::count(pool, &typed, address).await? {
        Ok(attempt) => attempt,
        Err(answer) => return Ok(answer),
    };
    let email = StaffEmail::parse(&typed).ok();
    type Stored = (i64, String, String, roles::Role, bool, bool, bool);
    let stored: Option<Stored> = match &email {
        Some(email) => {
            sqlx::query_as(
                "select s.id, s.email, s.password_hash, s.role, s.disabled_at is not null, \
                        exists (select 1 from staff_two_factor tf \
                                 where tf.staff_id = s.id and tf.confirmed_at is not null), \
                        coalesce((select two_factor_for_refunds from staff_settings), false) \
                   from staff s where s.email = $1",
            )
            .bind(email.as_str())
            .fetch_optional(pool)
            .await?
        }
        None => None,
    };
    let matches = verify_password(stored.as_ref().map(|s| s.2.clone()), password).await?;
    let Some((id, email, _, role, disabled, two_factor, required)) = stored.filter(|_| matches)
    else {
        return Ok(attempt.wrong(pool).await?);
    };
    let staff = StaffMember { id, email, role };
    if disabled {
        // only the right password learns this; the counts stay
        tracing::warn!(staff = %staff.email, "a disabled staff account tried to log in");
        return Ok(LoginOutcome::Disabled);
    }
    if two_factor {
        let challenge = random_token();
        sqlx::query(
            "insert into staff_login_challenges (id_hash, staff_id, typed_email, csrf_token, expires_at) \
             values ($1, $2, $3, $4, now() + $5 * interval '1 minute')",
        )
        .bind(session_hash(&challenge))
        .bind(staff.id)
        .bind(&typed)
        .bind(random_token())
        .bind(CHALLENGE_MINUTES as f64)
        .execute(pool)
        .await?;
        return Ok(LoginOutcome::NeedsCode {
            challenge: Secret::new(challenge),
        });
    }
    let mut tx = pool.begin().await?;
    attempt.forget(&mut tx).await?;
    let (session_id, csrf_token) = start_session(&mut tx, &staff).await?;
    audit::record(
        &mut tx,
        &staff,
        "login",
        &staff.email,
        "ok",
        serde_json::json!({}),
    )
    .await?;
    tx.commit().await?;
    audit::log_action(&staff, "login", &staff.email, "ok");
    Ok(LoginOutcome::SignedIn(Session {
        must_enrol: must_enrol(staff.role, false, required),
        staff,
        csrf_token,
        id: session_id,
        two_factor: false,
    }))
}

async fn lock(pool: &PgPool, keys: &[&str]) -> sqlx::Result<LoginOutcome> {
    sqlx::query(
        "update login_throttle \
            set locked_until = greatest(locked_until, now() + $2 * interval '1 minute') \
          where key = any($1)",
    )
    .bind(keys)
    .bind(LOCK_MINUTES as f64)
    .execute(pool)
    .await?;
    let kinds: Vec<&str> = keys
        .iter()
        .filter_map(|key| key.split(':').next())
        .collect();
    tracing::warn!(?kinds, "staff login locked after repeated failures");
    Ok(LoginOutcome::Locked {
        retry_after: Duration::from_secs(LOCK_MINUTES as u64 * 60),
    })
}

/// Forgets throttle rows whose window and lock have passed, and staff
/// sessions and sign-in challenges that have ended. The worker's
/// housekeeping runs it.
pub async fn prune(pool: &PgPool) -> sqlx::Result<(u64, u64)> {
    let throttle = sqlx::query(
        "delete from login_throttle \
          where window_started_at < now() - $1 * interval '1 minute' \
            and (locked_until is null or locked_until < now())",
    )
    .bind(WINDOW_MINUTES as f64)
    .execute(pool)
    .await?
    .rows_affected();
    let sessions = sqlx::query("delete from staff_sessions where expires_at < now()")
        .execute(pool)
        .await?
        .rows_affected();
    let challenges = sqlx::query("delete from staff_login_challenges where expires_at < now()")
        .execute(pool)
        .await?
        .rows_affected();
    Ok((throttle, sessions + challenges))
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

    #[test]
    fn emails_are_normalised_and_checked() {
        assert_eq!(
            StaffEmail::parse(" Ada@Example.COM ").unwrap().as_str(),
            "ada@example.com"
        );
        for bad in ["", "ada", "@example.com", "ada@", "a da@example.com"] {
            assert!(StaffEmail::parse(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn short_passwords_are_refused() {
        assert!(check_new_password(&Secret::new("short")).is_err());
        assert!(check_new_password(&Secret::new("x".repeat(2000))).is_err());
        assert!(check_new_password(&Secret::new("correct horse battery")).is_ok());
    }
}
