//! A member's own two-factor sign-in: where it stands, enrolling with an
//! app and confirming with its first code, new recovery codes, turning it
//! off (each change given a current code, counted in the login throttle),
//! and an owner's or operator's reset of another account's.

use chrono::{DateTime, Utc};
use rand::RngCore;
use sqlx::PgPool;

use super::codes::{
    Code, DIGITS, ISSUER, RECOVERY_CODES, RecoveryCodes, SECRET_BYTES, STEP_SECONDS, Sealing,
    Verified, app_code_step, replace_recovery_codes, spend_code,
};
use super::setting::required_for_refunds;
use crate::audit::{self, Actor};
use crate::configuration::Secret;
use crate::keys::SessionKey;
use crate::staff::login::{Attempt, LoginOutcome};
use crate::staff::{Result, StaffError, StaffMember};

/// Where a member's two-factor sign-in stands.
#[derive(Debug)]
pub enum Status {
    Off,
    /// Set up, waiting for a code from the app to confirm it.
    Enrolling(Enrolment),
    On {
        since: DateTime<Utc>,
        recovery_codes_left: i64,
    },
}

/// What the enrolment page shows: the secret as text, and as the
/// `otpauth://` address an app reads from a QR code.
#[derive(Debug)]
pub struct Enrolment {
    /// Base32, in groups of four, as an app's "enter a key" asks for it.
    pub secret: Secret,
    pub uri: Secret,
}

/// `otpauth://totp/Holdfast:grace@example.com?secret=…&issuer=Holdfast&…`,
/// the address authenticator apps read from a QR code.
fn otpauth_uri(secret_base32: &str, email: &str) -> String {
    use percent_encoding::{NON_ALPHANUMERIC, utf8_percent_encode};
    let label = format!("{ISSUER}:{email}");
    format!(
        "otpauth://totp/{}?secret={secret_base32}&issuer={}&algorithm=SHA1&digits={DIGITS}&period={STEP_SECONDS}",
        utf8_percent_encode(&label, NON_ALPHANUMERIC),
        utf8_percent_encode(ISSUER, NON_ALPHANUMERIC),
    )
}

fn enrolment(secret: &[u8; SECRET_BYTES], email: &str) -> Enrolment {
    let base32 = totp_rs::Secret::from(secret.to_vec()).to_base32();
    let uri = otpauth_uri(&base32, email);
    let grouped: Vec<String> = base32
        .as_bytes()
        .chunks(4)
        .map(|chunk| String::from_utf8_lossy(chunk).into_owned())
        .collect();
    Enrolment {
        secret: Secret::new(grouped.join(" ")),
        uri: Secret::new(uri),
    }
}

/// A member's two-factor state, with the secret to enrol with while
/// enrolling (and only then).
pub async fn status(pool: &PgPool, key: &SessionKey, staff: &StaffMember) -> Result<Status> {
    #[derive(sqlx::FromRow)]
    struct Row {
        secret_sealed: Vec<u8>,
        confirmed_at: Option<DateTime<Utc>>,
    }
    let row: Option<Row> = sqlx::query_as(
        "select secret_sealed, confirmed_at from staff_two_factor where staff_id = $1",
    )
    .bind(staff.id)
    .fetch_optional(pool)
    .await?;
    match row {
        None => Ok(Status::Off),
        Some(Row {
            confirmed_at: Some(since),
            ..
        }) => {
            let recovery_codes_left: i64 = sqlx::query_scalar(
                "select count(*) from staff_recovery_codes where staff_id = $1 and used_at is null",
            )
            .bind(staff.id)
            .fetch_one(pool)
            .await?;
            Ok(Status::On {
                since,
                recovery_codes_left,
            })
        }
        Some(Row {
            secret_sealed,
            confirmed_at: None,
        }) => match Sealing::new(key).open(staff.id, &secret_sealed) {
            Some(secret) => Ok(Status::Enrolling(enrolment(&secret, &staff.email))),
            // sealed under another key: start again
            None => Ok(Status::Off),
        },
    }
}

/// Starts (or starts again) enrolling: a new secret, waiting for a code
/// from the app. `false` when two-factor is on already.
pub async fn start_enrolment(pool: &PgPool, key: &SessionKey, staff: &StaffMember) -> Result<bool> {
    let mut secret = [0u8; SECRET_BYTES];
    rand::rngs::OsRng.fill_bytes(&mut secret);
    let sealed = Sealing::new(key).seal(staff.id, &secret)?;
    let started = sqlx::query(
        "insert into staff_two_factor (staff_id, secret_sealed) values ($1, $2) \
         on conflict (staff_id) do update \
            set secret_sealed = excluded.secret_sealed, created_at = now() \
          where staff_two_factor.confirmed_at is null",
    )
    .bind(staff.id)
    .bind(sealed)
    .execute(pool)
    .await?
    .rows_affected();
    Ok(started == 1)
}

/// What confirming an enrolment came to.
#[derive(Debug)]
pub enum Confirmed {
    /// Two-factor is on; these recovery codes are shown once.
    On(RecoveryCodes),
    WrongCode,
    /// Nothing is being enrolled (on already, or never started).
    NotEnrolling,
}

/// Confirms an enrolment with a code from the app: two-factor is on from
/// now, with ten new recovery codes, recorded.
pub async fn confirm(
    pool: &PgPool,
    key: &SessionKey,
    staff: &StaffMember,
    typed: &Secret,
) -> Result<Confirmed> {
    let mut tx = pool.begin().await?;
    // the enrolment's row, locked: one confirmation at a time
    let sealed: Option<Vec<u8>> = sqlx::query_scalar(
        "select secret_sealed from staff_two_factor \
          where staff_id = $1 and confirmed_at is null for update",
    )
    .bind(staff.id)
    .fetch_optional(&mut *tx)
    .await?;
    let Some(secret) = sealed.and_then(|sealed| Sealing::new(key).open(staff.id, &sealed)) else {
        return Ok(Confirmed::NotEnrolling);
    };
    let Code::App(code) = Code::parse(typed) else {
        return Ok(Confirmed::WrongCode);
    };
    let Some(step) = app_code_step(&secret, &code) else {
        return Ok(Confirmed::WrongCode);
    };
    // the confirming code is spent: it cannot sign in afterwards
    sqlx::query(
        "update staff_two_factor set confirmed_at = now(), last_step = $2 where staff_id = $1",
    )
    .bind(staff.id)
    .bind(step)
    .execute(&mut *tx)
    .await?;
    let codes = replace_recovery_codes(&mut tx, staff.id).await?;
    audit::commit(
        tx,
        staff,
        "two_factor_on",
        &staff.email,
        "on",
        serde_json::json!({ "recovery_codes": RECOVERY_CODES }),
    )
    .await?;
    Ok(Confirmed::On(codes))
}

/// What a change that needs a current code came to.
#[derive(Debug)]
pub enum Changed<T> {
    Done(T),
    WrongCode,
    /// The owner requires two-factor of this member's role.
    Required,
    /// Too many wrong answers from here: the login throttle's lock.
    Locked,
}

/// Checks and spends a signed-in member's code for a change, counted in
/// the login throttle like a sign-in (a stolen session cookie must not
/// buy unlimited guesses at the code that turns two-factor off).
async fn spend_counted(
    tx: &mut sqlx::Transaction<'_, sqlx::Postgres>,
    pool: &PgPool,
    key: &SessionKey,
    staff: &StaffMember,
    address: &str,
    typed: &Secret,
) -> Result<std::result::Result<(Verified, Attempt), Changed<()>>> {
    let on: bool = sqlx::query_scalar(
        "select exists (select 1 from staff_two_factor where staff_id = $1 and confirmed_at is not null)",
    )
    .bind(staff.id)
    .fetch_one(&mut **tx)
    .await?;
    if !on {
        // nothing to guess: nothing counted
        return Ok(Err(Changed::WrongCode));
    }
    let attempt = match Attempt::count(pool, &staff.email, address).await? {
        Ok(attempt) => attempt,
        Err(_) => return Ok(Err(Changed::Locked)),
    };
    let verified = spend_code(tx, key, staff.id, typed).await?;
    if let Verified::App | Verified::Recovery = verified {
        return Ok(Ok((verified, attempt)));
    }
    tracing::warn!(staff = %staff.email, outcome = verified.as_str(), "a code for a two-factor change refused");
    Ok(Err(match attempt.wrong(pool).await? {
        LoginOutcome::Locked { .. } => Changed::Locked,
        _ => Changed::WrongCode,
    }))
}

/// New recovery codes for a member whose two-factor is on (the old ones
/// stop working), given a current code.
pub async fn new_recovery_codes(
    pool: &PgPool,
    key: &SessionKey,
    staff: &StaffMember,
    address: &str,
    typed: &Secret,
) -> Result<Changed<RecoveryCodes>> {
    let mut tx = pool.begin().await?;
    let (verified, attempt) = match spend_counted(&mut tx, pool, key, staff, address, typed).await?
    {
        Ok(spent) => spent,
        Err(Changed::Locked) => return Ok(Changed::Locked),
        Err(_) => return Ok(Changed::WrongCode),
    };
    attempt.forget(&mut tx).await?;
    let codes = replace_recovery_codes(&mut tx, staff.id).await?;
    audit::commit(tx, staff, "new_recovery_codes", &staff.email, "made", serde_json::json!({ "recovery_codes": RECOVERY_CODES, "confirmed_with": verified.as_str() })).await?;
    Ok(Changed::Done(codes))
}

/// Turns a member's own two-factor off, given a current code, unless the
/// owner requires it of their role.
pub async fn turn_off(
    pool: &PgPool,
    key: &SessionKey,
    staff: &StaffMember,
    address: &str,
    typed: &Secret,
) -> Result<Changed<()>> {
    if required_for_refunds(pool).await? && staff.role.refunds() {
        return Ok(Changed::Required);
    }
    let mut tx = pool.begin().await?;
    let (verified, attempt) = match spend_counted(&mut tx, pool, key, staff, address, typed).await?
    {
        Ok(spent) => spent,
        Err(refused) => return Ok(refused),
    };
    attempt.forget(&mut tx).await?;
    forget(&mut tx, staff.id).await?;
    audit::commit(
        tx,
        staff,
        "two_factor_off",
        &staff.email,
        "off",
        serde_json::json!({ "confirmed_with": verified.as_str() }),
    )
    .await?;
    Ok(Changed::Done(()))
}

async fn forget(tx: &mut sqlx::Transaction<'_, sqlx::Postgres>, staff_id: i64) -> Result<()> {
    sqlx::query("delete from staff_recovery_codes where staff_id = $1")
        .bind(staff_id)
        .execute(&mut **tx)
        .await?;
    sqlx::query("delete from staff_two_factor where staff_id = $1")
        .bind(staff_id)
        .execute(&mut **tx)
        .await?;
    Ok(())
}

/// Turns another account's two-factor off (a lost phone and lost recovery
/// codes), ending its sessions and sign-ins under way: it signs in with its
/// password and enrols again. An owner on the staff page, or an operator
/// (`holdfast staff reset-two-factor`). `false` when it was off already.
pub async fn reset(pool: &PgPool, by: Actor<'_>, staff_id: i64) -> Result<bool> {
    let mut tx = pool.begin().await?;
    let email: Option<String> =
        sqlx::query_scalar("select email from staff where id = $1 for update")
            .bind(staff_id)
            .fetch_optional(&mut *tx)
            .await?;
    let Some(email) = email else {
        return Err(StaffError::InvalidInput("no such staff account".into()));
    };
    let was_on: bool = sqlx::query_scalar(
        "select exists (select 1 from staff_two_factor where staff_id = $1 and confirmed_at is not null)",
    )
    .bind(staff_id)
    .fetch_one(&mut *tx)
    .await?;
    forget(&mut tx, staff_id).await?;
    crate::staff::accounts::end_sessions(&mut tx, staff_id).await?;
    let outcome = if was_on { "reset" } else { "was_off" };
    audit::commit(
        tx,
        by,
        "reset_two_factor",
        &email,
        outcome,
        serde_json::json!({}),
    )
    .await?;
    Ok(was_on)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_otpauth_address_names_the_shop_and_the_account() {
        let uri = otpauth_uri("JBSWY3DPEHPK3PXP", "grace@example.com");
        assert_eq!(
            uri,
            "otpauth://totp/Holdfast%3Agrace%40example%2Ecom?secret=JBSWY3DPEHPK3PXP\
             &issuer=Holdfast&algorithm=SHA1&digits=6&period=30"
        );
    }
}
