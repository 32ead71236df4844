//! Staff accounts as an owner runs them (the admin's Staff page) and an
//! operator sets them up (`holdfast staff add`, `holdfast staff list`):
//! who has an account, with which role, whether it signs in with a second
//! factor. Nothing here deletes an account Activity refers to: an account
//! is disabled, its sessions end, its row stays.
//!
//! **There is always an owner.** A change that would leave no active owner
//! (demoting or disabling the last one) is refused. Every change to an
//! owner first locks the rows of all active owners, in id order, so two
//! owners demoting each other at once run one after the other and the
//! second is refused.

use chrono::{DateTime, Utc};
use serde::Serialize;
use sqlx::PgPool;

use super::roles::Role;
use crate::audit::{self, Actor};

use super::passwords::{check_new_password, hash_password};
use super::{Result, StaffEmail, StaffError};
use crate::configuration::Secret;

/// One account, as the Staff page and `holdfast staff list` show it.
#[derive(Debug, Clone, Serialize, sqlx::FromRow)]
pub struct AccountRow {
    pub id: i64,
    pub email: String,
    pub role: Role,
    pub two_factor: bool,
    pub disabled: bool,
    pub created_at: DateTime<Utc>,
    pub last_login: Option<DateTime<Utc>>,
}

/// Every account, active ones first, then by e-mail.
pub async fn list(pool: &PgPool) -> Result<Vec<AccountRow>> {
    Ok(sqlx::query_as(
        "select s.id, s.email, s.role, \
                exists (select 1 from staff_two_factor tf \
                         where tf.staff_id = s.id and tf.confirmed_at is not null) as two_factor, \
                s.disabled_at is not null as disabled, s.created_at, \
                (select max(a.at) from staff_actions a \
                  where a.staff_id = s.id and a.action = 'login' and a.outcome = 'ok') as last_login \
           from staff s \
          order by s.disabled_at is not null, s.email",
    )
    .fetch_all(pool)
    .await?)
}

/// Ends an account's sessions and its sign-ins under way, in the caller's
/// transaction.
pub(super) async fn end_sessions(
    tx: &mut sqlx::Transaction<'_, sqlx::Postgres>,
    staff_id: i64,
) -> sqlx::Result<()> {
    sqlx::query("delete from staff_sessions where staff_id = $1")
        .bind(staff_id)
        .execute(&mut **tx)
        .await?;
    sqlx::query("delete from staff_login_challenges where staff_id = $1")
        .bind(staff_id)
        .execute(&mut **tx)
        .await?;
    Ok(())
}

/// The active owners' ids, their rows locked for the rest of the
/// transaction (see the module's note).
async fn lock_active_owners(
    tx: &mut sqlx::Transaction<'_, sqlx::Postgres>,
) -> sqlx::Result<Vec<i64>> {
    sqlx::query_scalar(
        "select id from staff where role = 'owner' and disabled_at is null order by id for update",
    )
    .fetch_all(&mut **tx)
    .await
}

/// Whether taking `staff_id` out of the active owners would leave none.
fn is_last_owner(owners: &[i64], staff_id: i64) -> bool {
    owners == [staff_id]
}

/// What a change to an account came to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Change {
    Done,
    /// It was so already; nothing changed.
    Unchanged,
    /// Refused: it would leave the shop without an active owner.
    LastOwner,
    NoSuchAccount,
}

impl Change {
    fn as_str(self) -> &'static str {
        match self {
            Change::Done => "changed",
            Change::Unchanged => "unchanged",
            Change::LastOwner => "refused_last_owner",
            Change::NoSuchAccount => "no_such_account",
        }
    }
}

/// An account's email, role and whether it is disabled, its row locked.
async fn lock_account(
    tx: &mut sqlx::Transaction<'_, sqlx::Postgres>,
    staff_id: i64,
) -> sqlx::Result<Option<(String, Role, bool)>> {
    sqlx::query_as(
        "select email, role, disabled_at is not null from staff where id = $1 for update",
    )
    .bind(staff_id)
    .fetch_optional(&mut **tx)
    .await
}

/// Gives an account another role; refused for the last active owner. The
/// account's sessions go on with the new role's permissions at their next
/// request (the guard reads the role every time).
pub async fn change_role(
    pool: &PgPool,
    by: Actor<'_>,
    staff_id: i64,
    role: Role,
) -> Result<Change> {
    let mut tx = pool.begin().await?;
    let owners = lock_active_owners(&mut tx).await?;
    let Some((email, was, _)) = lock_account(&mut tx, staff_id).await? else {
        return Ok(Change::NoSuchAccount);
    };
    let change = if was == role {
        Change::Unchanged
    } else if role != Role::Owner && is_last_owner(&owners, staff_id) {
        Change::LastOwner
    } else {
        sqlx::query("update staff set role = $2, updated_at = now() where id = $1")
            .bind(staff_id)
            .bind(role)
            .execute(&mut *tx)
            .await?;
        Change::Done
    };
    if change != Change::Unchanged {
        audit::record(
            &mut tx,
            by,
            "change_role",
            &email,
            change.as_str(),
            serde_json::json!({ "from": was, "to": role }),
        )
        .await?;
    }
    tx.commit().await?;
    audit::log_action(by, "change_role", &email, change.as_str());
    Ok(change)
}

/// Disables an account and ends its sessions; refused for the last active
/// owner. Its row, and everything Activity says it did, stay.
pub async fn disable(pool: &PgPool, by: Actor<'_>, staff_id: i64) -> Result<Change> {
    let mut tx = pool.begin().await?;
    let owners = lock_active_owners(&mut tx).await?;
    let Some((email, _, disabled)) = lock_account(&mut tx, staff_id).await? else {
        return Ok(Change::NoSuchAccount);
    };
    let change = if disabled {
        Change::Unchanged
    } else if is_last_owner(&owners, staff_id) {
        Change::LastOwner
    } else {
        sqlx::query("update staff set disabled_at = now(), updated_at = now() where id = $1")
            .bind(staff_id)
            .execute(&mut *tx)
            .await?;
        end_sessions(&mut tx, staff_id).await?;
        Change::Done
    };
    if change != Change::Unchanged {
        audit::record(
            &mut tx,
            by,
            "disable_staff",
            &email,
            change.as_str(),
            serde_json::json!({}),
        )
        .await?;
    }
    tx.commit().await?;
    audit::log_action(by, "disable_staff", &email, change.as_str());
    Ok(change)
}

/// Lets a disabled account sign in again (with its old password and
/// second factor).
pub async fn enable(pool: &PgPool, by: Actor<'_>, staff_id: i64) -> Result<Change> {
    let mut tx = pool.begin().await?;
    let Some((email, _, disabled)) = lock_account(&mut tx, staff_id).await? else {
        return Ok(Change::NoSuchAccount);
    };
    if !disabled {
        return Ok(Change::Unchanged);
    }
    sqlx::query("update staff set disabled_at = null, updated_at = now() where id = $1")
        .bind(staff_id)
        .execute(&mut *tx)
        .await?;
    audit::commit(
        tx,
        by,
        "enable_staff",
        &email,
        "changed",
        serde_json::json!({}),
    )
    .await?;
    Ok(Change::Done)
}

/// What `holdfast staff add` did.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum SetUp {
    Created {
        role: Role,
    },
    /// A new password (every session of the old one ended), and the role
    /// it has now (changed only when one was given).
    PasswordChanged {
        role: Role,
        role_changed: bool,
    },
}

/// `holdfast staff add EMAIL [--role ROLE]`: a new account, or a new
/// password for one (ending its sessions), recorded as the operator's.
/// A new account needs a role, but for the shop's very first account,
/// which is an owner; an existing account's role changes only when one is
/// given, and never away from the last active owner.
pub async fn set_up(
    pool: &PgPool,
    operator: &str,
    email: &StaffEmail,
    password: &Secret,
    role: Option<Role>,
) -> Result<SetUp> {
    check_new_password(password)?;
    let hash = hash_password(password).await?;
    let by = Actor::Operator(operator);
    let mut tx = pool.begin().await?;
    let owners = lock_active_owners(&mut tx).await?;
    let existing: Option<(i64, Role)> =
        sqlx::query_as("select id, role from staff where email = $1 for update")
            .bind(email.as_str())
            .fetch_optional(&mut *tx)
            .await?;
    let outcome = match existing {
        None => {
            let anyone: bool = sqlx::query_scalar("select exists (select 1 from staff)")
                .fetch_one(&mut *tx)
                .await?;
            let role = match (role, anyone) {
                (Some(role), _) => role,
                (None, false) => Role::Owner,
                (None, true) => {
                    return Err(StaffError::InvalidInput(
                        "a new account needs a role: --role owner, box-office or door".into(),
                    ));
                }
            };
            sqlx::query("insert into staff (email, password_hash, role) values ($1, $2, $3)")
                .bind(email.as_str())
                .bind(&hash)
                .bind(role)
                .execute(&mut *tx)
                .await?;
            audit::record(
                &mut tx,
                by,
                "add_staff",
                email.as_str(),
                "created",
                serde_json::json!({ "role": role }),
            )
            .await?;
            SetUp::Created { role }
        }
        Some((id, was)) => {
            let now = role.unwrap_or(was);
            if now != was && now != Role::Owner && is_last_owner(&owners, id) {
                return Err(StaffError::InvalidInput(format!(
                    "{} is the last owner: make another account an owner first; nothing was changed",
                    email.as_str()
                )));
            }
            sqlx::query(
                "update staff set password_hash = $2, role = $3, updated_at = now() where id = $1",
            )
            .bind(id)
            .bind(&hash)
            .bind(now)
            .execute(&mut *tx)
            .await?;
            // a new password ends every session of the old one
            end_sessions(&mut tx, id).await?;
            audit::record(
                &mut tx,
                by,
                "set_password",
                email.as_str(),
                "changed",
                serde_json::json!({}),
            )
            .await?;
            if now != was {
                audit::record(
                    &mut tx,
                    by,
                    "change_role",
                    email.as_str(),
                    "changed",
                    serde_json::json!({ "from": was, "to": now }),
                )
                .await?;
            }
            SetUp::PasswordChanged {
                role: now,
                role_changed: now != was,
            }
        }
    };
    tx.commit().await?;
    audit::log_action(by, "add_staff", email.as_str(), "ok");
    Ok(outcome)
}

/// The account with this e-mail, for the command line.
pub async fn find(pool: &PgPool, email: &StaffEmail) -> Result<Option<i64>> {
    Ok(sqlx::query_scalar("select id from staff where email = $1")
        .bind(email.as_str())
        .fetch_optional(pool)
        .await?)
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AddOutcome {
    Created,
    PasswordChanged,
}

/// A new staff member (an owner), or a new password for one: for tests and
/// scripts. The command line's `holdfast staff add` is
/// [`set_up`], which asks for a role and records who did it.
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_one_remaining_owner_is_the_last() {
        assert!(is_last_owner(&[3], 3));
        assert!(!is_last_owner(&[3, 4], 3));
        assert!(!is_last_owner(&[4], 3), "not an owner at all");
        assert!(!is_last_owner(&[], 3));
    }
}
