//! The owner's setting: whether two-factor sign-in is required of every
//! role that can refund. Accounts without it are sent to enrol at their
//! next request.

use sqlx::PgPool;

use crate::audit;
use crate::staff::{Result, Session};

/// Whether the owner requires two-factor sign-in of every role that can
/// refund ([`super::roles::Role::refunds`]).
pub async fn required_for_refunds(pool: &PgPool) -> Result<bool> {
    Ok(sqlx::query_scalar(
        "select coalesce((select two_factor_for_refunds from staff_settings), false)",
    )
    .fetch_one(pool)
    .await?)
}

/// What changing the setting came to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SettingOutcome {
    Changed,
    Unchanged,
    /// Turning it on needs the owner's own two-factor first (the owner
    /// would otherwise be the first one shut out).
    EnrolFirst,
}

/// Sets whether two-factor is required of every role that can refund,
/// recorded. Accounts without it are sent to enrol at their next request.
pub async fn set_required_for_refunds(
    pool: &PgPool,
    by: &Session,
    on: bool,
) -> Result<SettingOutcome> {
    if on && !by.two_factor {
        return Ok(SettingOutcome::EnrolFirst);
    }
    let mut tx = pool.begin().await?;
    let changed = sqlx::query(
        "update staff_settings set two_factor_for_refunds = $1, updated_at = now() \
          where two_factor_for_refunds <> $1",
    )
    .bind(on)
    .execute(&mut *tx)
    .await?
    .rows_affected();
    if changed == 0 {
        return Ok(SettingOutcome::Unchanged);
    }
    let word = if on { "on" } else { "off" };
    audit::commit(
        tx,
        &by.staff,
        "change_setting",
        "two_factor_for_refunds",
        word,
        serde_json::json!({}),
    )
    .await?;
    Ok(SettingOutcome::Changed)
}
