//! Signing in with a password, counted by the login throttle: every answer
//! (a password, or a second factor's code) is counted per e-mail from the
//! client's address, per address and per e-mail before it is checked
//! ([`Attempt`]); wrong answers are slowed, then locked. An account with
//! two-factor sign-in gets a challenge instead of a session
//! ([`super::two_factor`] takes it from there). And [`prune`], which forgets
//! what signing in leaves behind.

use std::time::Duration;

use sqlx::PgPool;

use super::passwords::verify_password;
use super::roles;
use super::sessions::{Session, open_session, session_hash};
use super::{MAX_PASSWORD_BYTES, Result, StaffEmail, StaffMember};
use crate::configuration::Secret;
use crate::keys::random_token;

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
    counted: Vec<Counted>,
}

/// A count as the throttle's row holds it after this answer.
#[derive(sqlx::FromRow)]
struct Counted {
    key: String,
    attempts: i32,
    /// Seconds until the count's lock ends; `None` when not locked.
    locked_for: Option<f64>,
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
        let counted: Vec<Counted> = sqlx::query_as(
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
             returning key, attempts, \
                       extract(epoch from (locked_until - now()))::float8 as locked_for",
        )
        .bind(&keys)
        .bind(WINDOW_MINUTES as f64)
        .fetch_all(pool)
        .await?;
        let attempt = Self { counts, counted };
        let locked_for = attempt
            .counted
            .iter()
            .filter_map(|counted| counted.locked_for)
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
            .find(|counted| counted.key == key)
            .map_or(0, |counted| counted.attempts)
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

/// An account as signing in reads it.
#[derive(sqlx::FromRow)]
struct Stored {
    id: i64,
    email: String,
    password_hash: String,
    role: roles::Role,
    disabled: bool,
    /// Whether it signs in with a second factor.
    two_factor: bool,
    /// Whether the owner requires a second factor of roles that refund.
    required: bool,
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
    let stored: Option<Stored> = match &email {
        Some(email) => sqlx::query_as(
            "select s.id, s.email, s.password_hash, s.role, s.disabled_at is not null as disabled, \
                        exists (select 1 from staff_two_factor tf \
                                 where tf.staff_id = s.id and tf.confirmed_at is not null) \
                          as two_factor, \
                        coalesce((select two_factor_for_refunds from staff_settings), false) \
                          as required \
                   from staff s where s.email = $1",
        )
        .bind(email.as_str())
        .fetch_optional(pool)
        .await?,
        None => None,
    };
    let matches =
        verify_password(stored.as_ref().map(|s| s.password_hash.clone()), password).await?;
    let Some(Stored {
        id,
        email,
        role,
        disabled,
        two_factor,
        required,
        ..
    }) = stored.filter(|_| matches)
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
    let session = open_session(tx, staff, false, required, serde_json::json!({})).await?;
    Ok(LoginOutcome::SignedIn(session))
}

async fn lock(pool: &PgPool, keys: &[&str]) -> sqlx::Result<LoginOutcome> {
    // the rows locked in key order, as the count takes them: a burst's
    // locks and counts cannot deadlock
    sqlx::query(
        "update login_throttle t \
            set locked_until = greatest(t.locked_until, now() + $2 * interval '1 minute') \
           from (select key from login_throttle where key = any($1) order by key for update) k \
          where t.key = k.key",
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
