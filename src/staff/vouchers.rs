//! Vouchers from the admin: creating one (a discount, an access code that
//! unlocks hidden products, or both) and archiving one, each in one
//! transaction with the row that records it in Activity. What a voucher is
//! and how its uses are held is `crate::vouchers`.

use serde_json::json;
use sqlx::PgPool;

use super::{StaffError, StaffMember};
use crate::audit::{self, Actor};
use crate::vouchers::{self, Created, NewVoucher, VoucherCode};

/// What creating a voucher from the admin came to: what
/// [`vouchers::create_in`] says, or refused before it is asked.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum VoucherCreated {
    Made(Created),
    /// Products it would unlock that are not hidden: everyone can buy
    /// them already.
    NotHidden {
        ids: Vec<String>,
    },
}

fn invalid(error: anyhow::Error) -> StaffError {
    if let Some(bad) = error.downcast_ref::<crate::inventory::InvalidInput>() {
        return StaffError::InvalidInput(bad.0.clone());
    }
    match error.downcast::<sqlx::Error>() {
        Ok(error) => StaffError::Database(error),
        Err(error) => StaffError::Internal(format!("{error:#}")),
    }
}

/// Create a voucher, its uses a resource of the engine, recorded as made
/// by `staff`.
pub async fn create(
    pool: &PgPool,
    staff: &StaffMember,
    voucher: &NewVoucher,
    shop_currency: &str,
) -> super::Result<VoucherCreated> {
    create_by(pool, Actor::from(staff), voucher, shop_currency).await
}

/// [`create`], recorded as made by `by`: a staff member, or an operator
/// (an API key, as Activity names it).
pub async fn create_by(
    pool: &PgPool,
    by: Actor<'_>,
    voucher: &NewVoucher,
    shop_currency: &str,
) -> super::Result<VoucherCreated> {
    voucher.check().map_err(|e| StaffError::InvalidInput(e.0))?;
    let mut tx = pool.begin().await?;
    if !voucher.unlocks.is_empty() {
        let open: Vec<String> = sqlx::query_scalar(
            "select id from products where id = any($1) and not hidden order by id",
        )
        .bind(&voucher.unlocks)
        .fetch_all(&mut *tx)
        .await?;
        if !open.is_empty() {
            return Ok(VoucherCreated::NotHidden { ids: open });
        }
    }
    let created = vouchers::create_in(&mut tx, voucher, shop_currency, &by.name())
        .await
        .map_err(invalid)?;
    let code = match created {
        Created::Created { code } => code,
        refused => return Ok(VoucherCreated::Made(refused)),
    };
    audit::commit(tx, by, "create_voucher", &code, "created", json!(voucher)).await?;
    Ok(VoucherCreated::Made(Created::Created { code }))
}

/// Stop a voucher: no checkout may start with it again; uses held run
/// their course. False when there is no such voucher in use.
pub async fn archive(
    pool: &PgPool,
    staff: &StaffMember,
    code: &VoucherCode,
) -> super::Result<bool> {
    archive_by(pool, Actor::from(staff), code).await
}

/// [`archive`], recorded as done by `by` (an API key, as Activity names it).
pub async fn archive_by(pool: &PgPool, by: Actor<'_>, code: &VoucherCode) -> super::Result<bool> {
    let mut tx = pool.begin().await?;
    if !vouchers::archive_in(&mut *tx, code).await? {
        return Ok(false);
    }
    let voucher = vouchers::find(&mut *tx, code).await?;
    audit::commit(tx, by, "archive_voucher", code.as_str(), "archived", json!({ "held": voucher.as_ref().map(|v| v.held), "used": voucher.as_ref().map(|v| v.used) })).await?;
    Ok(true)
}

/// Bring an archived voucher back (recorded in Activity); its uses are
/// what they were. False when there is no such archived voucher.
pub async fn restore(
    pool: &PgPool,
    staff: &StaffMember,
    code: &VoucherCode,
) -> super::Result<bool> {
    let mut tx = pool.begin().await?;
    if !vouchers::restore_in(&mut *tx, code).await? {
        return Ok(false);
    }
    let voucher = vouchers::find(&mut *tx, code).await?;
    audit::commit(tx, staff, "restore_voucher", code.as_str(), "restored", json!({ "held": voucher.as_ref().map(|v| v.held), "used": voucher.as_ref().map(|v| v.used) })).await?;
    Ok(true)
}
