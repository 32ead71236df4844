//! Staff invited by e-mail: an owner names an address and a role, the
//! invitee follows the mailed link and sets their own password, so no one
//! ever types a password for someone else (the command line still makes
//! the first owner). The link's token is random (32 bytes); only its
//! SHA-256 is stored. A link works once, for [`INVITE_HOURS`]; sending an
//! invite again makes a new token (the old link dies) and cancelling kills
//! it. The mail goes through the outbox (`staff_invite` jobs), whose
//! payload carries the token for the mail alone and loses it as soon as
//! the invite is used, cancelled or sent again.

use chrono::{DateTime, Utc};
use sha2::{Digest, Sha256};
use sqlx::{PgPool, Postgres, Transaction};

use super::passwords::hash_password;
use super::roles::Role;
use super::{Result, StaffEmail, check_new_password};
use crate::audit::{self, Actor};
use crate::configuration::Secret;

/// How long a link works.
pub const INVITE_HOURS: i64 = 72;

/// An invite not used nor cancelled, as the Staff page lists it.
#[derive(Debug, Clone, sqlx::FromRow)]
pub struct InviteRow {
    pub id: i64,
    pub email: String,
    pub role: Role,
    pub invited_by: String,
    pub sent_at: DateTime<Utc>,
    pub expires_at: DateTime<Utc>,
}

impl InviteRow {
    /// Whether its link no longer works (it may be sent again).
    pub fn expired(&self) -> bool {
        self.expires_at <= Utc::now()
    }
}

/// What inviting an address did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Invited {
    /// A mail with a new link is on its way.
    Sent,
    /// The address already has an account: nothing was sent.
    HasAccount,
}

/// What a link is, as its page says.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Link {
    /// It works: the address and role it makes an account for.
    Open {
        email: String,
        role: Role,
    },
    Expired,
    /// Used, cancelled or replaced by a newer link.
    Spent,
    /// No link of ours.
    Unknown,
}

/// What following a link with a password did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Accepted {
    /// The account exists now, with the password chosen.
    Created { email: String },
    /// The link is not (or no longer) one that works: nothing changed.
    Refused(Link),
}

fn sha256(token: &str) -> Vec<u8> {
    Sha256::digest(token.as_bytes()).to_vec()
}

/// A new invite with a new token, stored as its hash, and its mail queued
/// (the token in the job's payload, for the mail alone).
async fn issue(
    tx: &mut Transaction<'_, Postgres>,
    email: &str,
    role: Role,
    by: &str,
) -> Result<i64> {
    let token = crate::keys::random_token();
    let hash = sha256(&token);
    let id: i64 = sqlx::query_scalar(
        "insert into staff_invites (email, role, token_sha256, invited_by, expires_at) \
         values ($1, $2, $3, $4, now() + make_interval(hours => $5)) returning id",
    )
    .bind(email)
    .bind(role)
    .bind(&hash)
    .bind(by)
    .bind(INVITE_HOURS as i32)
    .fetch_one(&mut **tx)
    .await?;
    sqlx::query(
        "insert into outbox_jobs (kind, dedupe_key, payload) \
         values ('staff_invite', 'staff_invite:' || encode($2, 'hex'), \
                 jsonb_build_object('invite_id', $1::bigint, 'token', $3::text))",
    )
    .bind(id)
    .bind(&hash)
    .bind(&token)
    .execute(&mut **tx)
    .await?;
    Ok(id)
}

/// An invite closes (cancelled, or replaced by a new one): its link
/// stops working and the outbox forgets its token.
async fn close(tx: &mut Transaction<'_, Postgres>, id: i64) -> Result<()> {
    sqlx::query("update staff_invites set cancelled_at = now() where id = $1")
        .bind(id)
        .execute(&mut **tx)
        .await?;
    forget_tokens(tx, id).await
}

/// The outbox forgets an invite's tokens: a mail not sent yet is not sent,
/// and a mail sent keeps no link.
async fn forget_tokens(tx: &mut Transaction<'_, Postgres>, invite: i64) -> Result<()> {
    sqlx::query(
        "delete from outbox_jobs where kind = 'staff_invite' and state = 'pending' \
            and (payload ->> 'invite_id')::bigint = $1",
    )
    .bind(invite)
    .execute(&mut **tx)
    .await?;
    sqlx::query(
        "update outbox_jobs set payload = payload - 'token' \
          where kind = 'staff_invite' and payload ? 'token' \
            and (payload ->> 'invite_id')::bigint = $1",
    )
    .bind(invite)
    .execute(&mut **tx)
    .await?;
    Ok(())
}

/// Invite an address with a role: a mail with a link to set a password.
/// An address with an open invite gets a new one (the old link dies), in
/// the role asked for now.
pub async fn invite(
    pool: &PgPool,
    by: Actor<'_>,
    email: &StaffEmail,
    role: Role,
) -> Result<Invited> {
    let mut tx = pool.begin().await?;
    // one invite of an address at a time
    sqlx::query("select pg_advisory_xact_lock(hashtext('staff_invite:' || $1))")
        .bind(email.as_str())
        .execute(&mut *tx)
        .await?;
    let has_account: bool =
        sqlx::query_scalar("select exists (select 1 from staff where email = $1)")
            .bind(email.as_str())
            .fetch_one(&mut *tx)
            .await?;
    if has_account {
        return Ok(Invited::HasAccount);
    }
    let open: Option<i64> = sqlx::query_scalar(
        "select id from staff_invites \
          where email = $1 and used_at is null and cancelled_at is null for update",
    )
    .bind(email.as_str())
    .fetch_optional(&mut *tx)
    .await?;
    if let Some(old) = open {
        close(&mut tx, old).await?;
    }
    issue(&mut tx, email.as_str(), role, &by.name()).await?;
    let detail = serde_json::json!({ "role": role, "hours": INVITE_HOURS });
    audit::commit(tx, by, "invite_staff", email.as_str(), "sent", detail).await?;
    Ok(Invited::Sent)
}

#[derive(sqlx::FromRow)]
struct OpenInvite {
    email: String,
    role: Role,
}

/// An open invite, locked, by id.
async fn open_invite(tx: &mut Transaction<'_, Postgres>, id: i64) -> Result<Option<OpenInvite>> {
    Ok(sqlx::query_as(
        "select email, role from staff_invites \
          where id = $1 and used_at is null and cancelled_at is null for update",
    )
    .bind(id)
    .fetch_optional(&mut **tx)
    .await?)
}

/// Send an open invite again: a new link for another 72 hours, the old
/// one dead; false when there is no such open invite.
pub async fn resend(pool: &PgPool, by: Actor<'_>, id: i64) -> Result<bool> {
    let mut tx = pool.begin().await?;
    let Some(open) = open_invite(&mut tx, id).await? else {
        return Ok(false);
    };
    close(&mut tx, id).await?;
    issue(&mut tx, &open.email, open.role, &by.name()).await?;
    let detail = serde_json::json!({});
    audit::commit(tx, by, "resend_invite", &open.email, "sent", detail).await?;
    Ok(true)
}

/// Cancel an open invite: its link stops working; false when there is no
/// such open invite.
pub async fn cancel(pool: &PgPool, by: Actor<'_>, id: i64) -> Result<bool> {
    let mut tx = pool.begin().await?;
    let Some(open) = open_invite(&mut tx, id).await? else {
        return Ok(false);
    };
    close(&mut tx, id).await?;
    let detail = serde_json::json!({});
    audit::commit(tx, by, "cancel_invite", &open.email, "cancelled", detail).await?;
    Ok(true)
}

/// The invites not used nor cancelled, newest first.
pub async fn open(pool: &PgPool) -> Result<Vec<InviteRow>> {
    Ok(sqlx::query_as(
        "select id, email, role, invited_by, sent_at, expires_at from staff_invites \
          where used_at is null and cancelled_at is null order by sent_at desc, id desc",
    )
    .fetch_all(pool)
    .await?)
}

#[derive(sqlx::FromRow)]
struct Found {
    id: i64,
    email: String,
    role: Role,
    expired: bool,
    spent: bool,
}

/// What a link's token is. A token of the wrong shape is unknown without
/// asking the database.
async fn find(tx: &mut Transaction<'_, Postgres>, token: &str) -> Result<Option<Found>> {
    if token.len() != 64 || !token.bytes().all(|b| b.is_ascii_hexdigit()) {
        return Ok(None);
    }
    Ok(sqlx::query_as(
        "select id, email, role, expires_at <= now() as expired, \
                (used_at is not null or cancelled_at is not null) as spent \
           from staff_invites where token_sha256 = $1 for update",
    )
    .bind(sha256(token))
    .fetch_optional(&mut **tx)
    .await?)
}

fn link_of(found: Option<&Found>) -> Link {
    match found {
        None => Link::Unknown,
        Some(f) if f.spent => Link::Spent,
        Some(f) if f.expired => Link::Expired,
        Some(f) => Link::Open {
            email: f.email.clone(),
            role: f.role,
        },
    }
}

/// What a link is, for its page.
pub async fn look(pool: &PgPool, token: &Secret) -> Result<Link> {
    let mut tx = pool.begin().await?;
    let found = find(&mut tx, token.expose()).await?;
    tx.rollback().await?;
    Ok(link_of(found.as_ref()))
}

/// Follow a link with the password chosen: the account is made and the
/// link spent, in one transaction; a link that does not work changes
/// nothing. A password too short or too long is refused before anything.
pub async fn accept(pool: &PgPool, token: &Secret, password: &Secret) -> Result<Accepted> {
    check_new_password(password)?;
    let hash = hash_password(password).await?;
    let mut tx = pool.begin().await?;
    let found = find(&mut tx, token.expose()).await?;
    let link = link_of(found.as_ref());
    let (Link::Open { email, role }, Some(found)) = (link.clone(), found) else {
        return Ok(Accepted::Refused(link));
    };
    let created: Option<i64> = sqlx::query_scalar(
        "insert into staff (email, password_hash, role) values ($1, $2, $3) \
         on conflict (email) do nothing returning id",
    )
    .bind(&email)
    .bind(&hash)
    .bind(role)
    .fetch_optional(&mut *tx)
    .await?;
    sqlx::query("update staff_invites set used_at = now() where id = $1")
        .bind(found.id)
        .execute(&mut *tx)
        .await?;
    forget_tokens(&mut tx, found.id).await?;
    if created.is_none() {
        // an account was made for the address meanwhile: the link is spent
        tx.commit().await?;
        return Ok(Accepted::Refused(Link::Spent));
    }
    let by = format!("{email} (invited)");
    let by = Actor::Operator(&by);
    let detail = serde_json::json!({ "role": role });
    audit::commit(tx, by, "accept_invite", &email, "created", detail).await?;
    Ok(Accepted::Created { email })
}
