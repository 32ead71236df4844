//! Staff sessions: a signed cookie naming a row of `staff_sessions` (only
//! the SHA-256 of its id is kept) with the session's CSRF token, for
//! [`SESSION_HOURS`] after signing in; ending one deletes its row, so a
//! kept cookie opens nothing. Whether a session must enrol in two-factor
//! sign-in before anything else is decided here too ([`must_enrol`]).

use std::fmt;

use sha2::{Digest, Sha256};
use sqlx::PgPool;

use super::roles;
use super::{Result, StaffMember};
use crate::audit;
use crate::keys::random_token;

/// How long a staff session lasts after login.
pub const SESSION_HOURS: i64 = 12;
pub(super) fn session_hash(id: &str) -> Vec<u8> {
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
    /// A live session's row, with its account.
    #[derive(sqlx::FromRow)]
    struct Row {
        staff_id: i64,
        email: String,
        role: roles::Role,
        csrf_token: String,
        two_factor: bool,
        required: bool,
    }
    let row: Option<Row> = sqlx::query_as(
        "select s.id as staff_id, s.email, s.role, ss.csrf_token, \
                exists (select 1 from staff_two_factor tf \
                         where tf.staff_id = s.id and tf.confirmed_at is not null) as two_factor, \
                coalesce((select two_factor_for_refunds from staff_settings), false) as required \
           from staff_sessions ss join staff s on s.id = ss.staff_id \
          where ss.id_hash = $1 and ss.expires_at > now() and s.disabled_at is null",
    )
    .bind(session_hash(id))
    .fetch_optional(pool)
    .await?;
    Ok(row.map(|row| Session {
        staff: StaffMember {
            id: row.staff_id,
            email: row.email,
            role: row.role,
        },
        csrf_token: row.csrf_token,
        id: id.to_owned(),
        two_factor: row.two_factor,
        must_enrol: must_enrol(row.role, row.two_factor, row.required),
    }))
}

/// Logs out: the session row goes, so the cookie opens nothing even if kept.
pub async fn end_session(pool: &PgPool, session: &Session) -> Result<()> {
    let mut tx = pool.begin().await?;
    sqlx::query("delete from staff_sessions where id_hash = $1")
        .bind(session_hash(&session.id))
        .execute(&mut *tx)
        .await?;
    audit::commit(
        tx,
        &session.staff,
        "logout",
        &session.staff.email,
        "ok",
        serde_json::json!({}),
    )
    .await?;
    Ok(())
}

/// A member signed in, with a second factor (`two_factor`) or a password
/// alone: a session starts and the login is recorded with `detail`, in the
/// sign-in's transaction, which commits here.
pub(super) async fn open_session(
    mut tx: sqlx::Transaction<'_, sqlx::Postgres>,
    staff: StaffMember,
    two_factor: bool,
    required_for_refunds: bool,
    detail: serde_json::Value,
) -> sqlx::Result<Session> {
    let id = random_token();
    let csrf_token = random_token();
    sqlx::query(
        "insert into staff_sessions (id_hash, staff_id, csrf_token, expires_at) \
         values ($1, $2, $3, now() + $4 * interval '1 hour')",
    )
    .bind(session_hash(&id))
    .bind(staff.id)
    .bind(&csrf_token)
    .bind(SESSION_HOURS as f64)
    .execute(&mut *tx)
    .await?;
    audit::commit(tx, &staff, "login", &staff.email, "ok", detail).await?;
    Ok(Session {
        must_enrol: must_enrol(staff.role, two_factor, required_for_refunds),
        staff,
        csrf_token,
        id,
        two_factor,
    })
}
