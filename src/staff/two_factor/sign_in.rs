//! The second step of signing in: the code from the app, or a recovery
//! code, for the challenge a right password opened ([`log_in_with_code`]).
//! Counted in the login throttle before it is checked, like a password;
//! a challenge takes [`CHALLENGE_WRONG_CODES`] wrong codes, then the
//! password is asked again.

use sqlx::{PgPool, Postgres, Transaction};

use super::codes::{Verified, spend_code};
use crate::audit;
use crate::configuration::Secret;
use crate::keys::SessionKey;
use crate::payments::signature::same_text;
use crate::staff::login::{Attempt, CHALLENGE_WRONG_CODES, LoginOutcome};
use crate::staff::sessions::{Session, open_session, session_hash};
use crate::staff::{Result, StaffMember, roles};

/// A sign-in waiting for its code, as its page needs it.
#[derive(Debug)]
pub struct Challenge {
    pub email: String,
    pub csrf_token: Secret,
}

/// The challenge a cookie's id names, if it is still open.
pub async fn challenge(pool: &PgPool, id: &str) -> Result<Option<Challenge>> {
    #[derive(sqlx::FromRow)]
    struct Row {
        email: String,
        csrf_token: String,
    }
    let row: Option<Row> = sqlx::query_as(
        "select s.email, c.csrf_token from staff_login_challenges c join staff s on s.id = c.staff_id \
          where c.id_hash = $1 and c.expires_at > now() and s.disabled_at is null",
    )
    .bind(session_hash(id))
    .fetch_optional(pool)
    .await?;
    Ok(row.map(|row| Challenge {
        email: row.email,
        csrf_token: Secret::new(row.csrf_token),
    }))
}

/// What the second step of signing in came to.
#[derive(Debug)]
pub enum CodeOutcome {
    /// Signed in; `recovery_codes_left` when a recovery code was used.
    SignedIn {
        session: Session,
        recovery_codes_left: Option<i64>,
    },
    /// Wrong (or already used); the challenge takes more.
    Refused,
    /// The challenge has expired, was not ours, or took too many wrong
    /// codes: log in with the password again.
    StartOver,
    /// The form's token was not the challenge's.
    Forged,
    Locked {
        retry_after: std::time::Duration,
    },
}

/// An open challenge, with the account it signs in.
#[derive(sqlx::FromRow)]
struct Open {
    staff_id: i64,
    /// The e-mail as typed with the password: what the throttle counts.
    typed_email: String,
    csrf_token: String,
    email: String,
    role: roles::Role,
}

/// The second step: the code from the app, or a recovery code, for the
/// challenge the password opened. Counted in the login throttle before it
/// is checked, like a password; the account's counts are forgotten only
/// when the code is right.
pub async fn log_in_with_code(
    pool: &PgPool,
    key: &SessionKey,
    challenge_id: &str,
    csrf: &str,
    address: &str,
    typed: &Secret,
) -> Result<CodeOutcome> {
    let id_hash = session_hash(challenge_id);
    let open: Option<Open> = sqlx::query_as(
        "select c.staff_id, c.typed_email, c.csrf_token, s.email, s.role \
           from staff_login_challenges c join staff s on s.id = c.staff_id \
          where c.id_hash = $1 and c.expires_at > now() and s.disabled_at is null",
    )
    .bind(&id_hash)
    .fetch_optional(pool)
    .await?;
    let Some(open) = open else {
        return Ok(CodeOutcome::StartOver);
    };
    if csrf.is_empty() || !same_text(csrf, &open.csrf_token) {
        return Ok(CodeOutcome::Forged);
    }
    let attempt = match Attempt::count(pool, &open.typed_email, address).await? {
        Ok(attempt) => attempt,
        Err(LoginOutcome::Locked { retry_after }) => {
            return Ok(CodeOutcome::Locked { retry_after });
        }
        Err(_) => return Ok(CodeOutcome::Refused),
    };
    let staff = StaffMember {
        id: open.staff_id,
        email: open.email,
        role: open.role,
    };
    let mut tx = pool.begin().await?;
    let verified = spend_code(&mut tx, key, staff.id, typed).await?;
    if let Verified::App | Verified::Recovery = verified {
        return sign_in(tx, staff, &id_hash, &attempt, verified).await;
    }
    refuse(tx, pool, &staff, &id_hash, &attempt, verified).await
}

/// A right code: the challenge is finished, the account's counts are
/// forgotten and a session starts, recorded.
async fn sign_in(
    mut tx: Transaction<'_, Postgres>,
    staff: StaffMember,
    id_hash: &[u8],
    attempt: &Attempt,
    verified: Verified,
) -> Result<CodeOutcome> {
    let gone = sqlx::query("delete from staff_login_challenges where id_hash = $1")
        .bind(id_hash)
        .execute(&mut *tx)
        .await?
        .rows_affected();
    if gone != 1 {
        // another request finished this challenge first
        return Ok(CodeOutcome::StartOver);
    }
    attempt.forget(&mut tx).await?;
    let recovery_codes_left = match verified {
        Verified::Recovery => Some(
            sqlx::query_scalar(
                "select count(*) from staff_recovery_codes \
                  where staff_id = $1 and used_at is null",
            )
            .bind(staff.id)
            .fetch_one(&mut *tx)
            .await?,
        ),
        _ => None,
    };
    let required: bool = sqlx::query_scalar(
        "select coalesce((select two_factor_for_refunds from staff_settings), false)",
    )
    .fetch_one(&mut *tx)
    .await?;
    let detail = serde_json::json!({
        "second_factor": verified.as_str(),
        "recovery_codes_left": recovery_codes_left,
    });
    Ok(CodeOutcome::SignedIn {
        session: open_session(tx, staff, true, required, detail).await?,
        recovery_codes_left,
    })
}

/// A wrong (or spent) code: counted on the challenge too, which ends after
/// [`CHALLENGE_WRONG_CODES`], and recorded (someone who knows the password
/// is trying codes); then counted in the throttle as a wrong answer.
async fn refuse(
    mut tx: Transaction<'_, Postgres>,
    pool: &PgPool,
    staff: &StaffMember,
    id_hash: &[u8],
    attempt: &Attempt,
    verified: Verified,
) -> Result<CodeOutcome> {
    let wrong: Option<i32> = sqlx::query_scalar(
        "update staff_login_challenges set wrong_codes = wrong_codes + 1 \
          where id_hash = $1 returning wrong_codes",
    )
    .bind(id_hash)
    .fetch_optional(&mut *tx)
    .await?;
    let spent_challenge = wrong.is_none_or(|n| n >= CHALLENGE_WRONG_CODES);
    if spent_challenge {
        sqlx::query("delete from staff_login_challenges where id_hash = $1")
            .bind(id_hash)
            .execute(&mut *tx)
            .await?;
    }
    audit::record(
        &mut tx,
        staff,
        "login",
        &staff.email,
        verified.as_str(),
        serde_json::json!({ "wrong_codes": wrong }),
    )
    .await?;
    tx.commit().await?;
    tracing::warn!(staff = %staff.email, outcome = verified.as_str(), "staff sign-in code refused");
    Ok(match attempt.wrong(pool).await? {
        LoginOutcome::Locked { retry_after } => CodeOutcome::Locked { retry_after },
        _ if spent_challenge => CodeOutcome::StartOver,
        _ => CodeOutcome::Refused,
    })
}
