//! Two-factor sign-in with an authenticator app (TOTP, RFC 6238: HMAC-SHA-1,
//! six digits, 30-second steps, one step either way), and one-time recovery
//! codes for a lost phone.
//!
//! - **The secret is sealed.** `staff_two_factor.secret_sealed` is the
//!   secret under AES-256-GCM with a key derived from
//!   `HOLDFAST_SESSION_KEY` ([`SessionKey`]), the account's id as associated
//!   data: a copy of the database alone does not give it away, nor can a
//!   sealed secret be moved to another account. It is shown once, while
//!   enrolling, and never logged ([`Secret`]).
//! - **A code is used once.** The last step a code was accepted for is
//!   kept; a code of that step or an earlier one is refused, in the same
//!   conditional write that accepts it, so two racing sign-ins with one
//!   code cannot both pass.
//! - **Recovery codes** are ten random codes of 79 bits each, shown once;
//!   only their SHA-256 is kept, and each is spent by one conditional write.
//!   They do not depend on the session key: when it changes, the app's codes
//!   stop working and a recovery code still signs in.
//! - **The throttle counts codes too.** The second step of signing in
//!   ([`log_in_with_code`]) counts each code in the login throttle before it
//!   is checked, as a password is; a challenge takes
//!   [`CHALLENGE_WRONG_CODES`] wrong codes, then the password is asked
//!   again; and an account's counts are forgotten only when the code is
//!   right.

use aws_lc_rs::aead::{AES_256_GCM, Aad, LessSafeKey, NONCE_LEN, Nonce, UnboundKey};
use chrono::{DateTime, Utc};
use rand::{Rng, RngCore};
use sha2::{Digest, Sha256};
use sqlx::PgPool;

use crate::audit::{self, Actor};

use super::{
    Attempt, CHALLENGE_WRONG_CODES, LoginOutcome, Result, Session, SessionKey, StaffError,
    StaffMember, must_enrol, session_hash, start_session,
};
use crate::configuration::Secret;
use crate::payments::signature::same_text;

/// How the app and the shop agree on codes (RFC 6238's defaults, which
/// every authenticator app follows).
pub const DIGITS: usize = 6;
pub const STEP_SECONDS: u64 = 30;
/// Steps either side of now that are accepted (a phone's clock drifts).
pub const SKEW_STEPS: u16 = 1;
/// Recovery codes made at a time.
pub const RECOVERY_CODES: usize = 10;
/// The secret's length: 160 bits, as RFC 4226 recommends.
const SECRET_BYTES: usize = 20;
/// How the shop names itself in the app.
pub const ISSUER: &str = "Holdfast";
/// Recovery codes are written in these: no 0/o, 1/l/i to misread.
const RECOVERY_ALPHABET: &[u8] = b"23456789abcdefghjkmnpqrstuvwxyz";
/// Characters of a recovery code (31^16: 79 bits).
const RECOVERY_LENGTH: usize = 16;
/// What the sealing key is derived for.
const SEALING_LABEL: &str = "holdfast two-factor secrets v1";

/// What a member typed as a second factor.
#[derive(Debug, PartialEq, Eq)]
enum Code {
    /// Six digits from the app.
    App(String),
    /// A recovery code, lower-cased, without its dashes.
    Recovery(String),
    /// Neither shape: wrong, whatever it was.
    Neither,
}

impl Code {
    fn parse(typed: &Secret) -> Self {
        let plain: String = typed
            .expose()
            .chars()
            .filter(|c| !c.is_whitespace() && *c != '-')
            .take(64)
            .collect::<String>()
            .to_ascii_lowercase();
        if plain.len() == DIGITS && plain.bytes().all(|b| b.is_ascii_digit()) {
            Code::App(plain)
        } else if plain.len() == RECOVERY_LENGTH
            && plain.bytes().all(|b| RECOVERY_ALPHABET.contains(&b))
        {
            Code::Recovery(plain)
        } else {
            Code::Neither
        }
    }
}

/// The key secrets are sealed with, derived from the session key.
struct Sealing(LessSafeKey);

impl Sealing {
    fn new(key: &SessionKey) -> Self {
        let bytes = key.derive(SEALING_LABEL);
        Self(LessSafeKey::new(
            UnboundKey::new(&AES_256_GCM, &bytes).expect("a 32-byte AES-256 key"),
        ))
    }

    fn aad(staff_id: i64) -> Aad<String> {
        Aad::from(format!("staff_two_factor:{staff_id}"))
    }

    /// nonce ‖ ciphertext ‖ tag.
    fn seal(&self, staff_id: i64, secret: &[u8; SECRET_BYTES]) -> Result<Vec<u8>> {
        let mut nonce = [0u8; NONCE_LEN];
        rand::rngs::OsRng.fill_bytes(&mut nonce);
        let mut sealed = secret.to_vec();
        self.0
            .seal_in_place_append_tag(
                Nonce::assume_unique_for_key(nonce),
                Self::aad(staff_id),
                &mut sealed,
            )
            .map_err(|_| StaffError::Internal("sealing a two-factor secret failed".into()))?;
        let mut out = nonce.to_vec();
        out.extend_from_slice(&sealed);
        Ok(out)
    }

    /// The secret, if it was sealed for this account under this key.
    fn open(&self, staff_id: i64, sealed: &[u8]) -> Option<[u8; SECRET_BYTES]> {
        if sealed.len() != NONCE_LEN + SECRET_BYTES + AES_256_GCM.tag_len() {
            return None;
        }
        let (nonce, rest) = sealed.split_at(NONCE_LEN);
        let nonce = Nonce::try_assume_unique_for_key(nonce).ok()?;
        let mut buffer = rest.to_vec();
        let plain = self
            .0
            .open_in_place(nonce, Self::aad(staff_id), &mut buffer)
            .ok()?;
        plain.try_into().ok()
    }
}

fn totp(secret: &[u8; SECRET_BYTES]) -> totp_rs::Totp {
    totp_rs::Builder::new()
        .with_algorithm(totp_rs::Algorithm::SHA1)
        .with_digits(DIGITS as u8)
        .with_skew(SKEW_STEPS)
        .with_step_duration(STEP_SECONDS)
        .with_secret(secret.to_vec())
        .build()
        .expect("RFC 6238 parameters and a 160-bit secret")
}

fn now_seconds() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

/// The step an app code is right for (now, or one step either way).
fn app_code_step(secret: &[u8; SECRET_BYTES], code: &str) -> Option<i64> {
    totp(secret)
        .check(code, now_seconds())
        .and_then(|step| i64::try_from(step).ok())
}

fn recovery_hash(staff_id: i64, code: &str) -> Vec<u8> {
    Sha256::digest(format!("holdfast recovery code:{staff_id}:{code}")).to_vec()
}

fn new_recovery_code() -> String {
    let mut rng = rand::rngs::OsRng;
    (0..RECOVERY_LENGTH)
        .map(|_| RECOVERY_ALPHABET[rng.gen_range(0..RECOVERY_ALPHABET.len())] as char)
        .collect()
}

/// Recovery codes as the member is shown them, once: `abcd-efgh-jkmn-pqrs`.
#[derive(Debug)]
pub struct RecoveryCodes(pub Vec<Secret>);

impl RecoveryCodes {
    fn make() -> (Self, Vec<String>) {
        let plain: Vec<String> = (0..RECOVERY_CODES).map(|_| new_recovery_code()).collect();
        let shown = plain
            .iter()
            .map(|code| {
                let groups: Vec<&str> = (0..RECOVERY_LENGTH)
                    .step_by(4)
                    .map(|i| &code[i..i + 4])
                    .collect();
                Secret::new(groups.join("-"))
            })
            .collect();
        (Self(shown), plain)
    }
}

/// Replaces an account's recovery codes with new ones, in the caller's
/// transaction.
async fn replace_recovery_codes(
    tx: &mut sqlx::Transaction<'_, sqlx::Postgres>,
    staff_id: i64,
) -> Result<RecoveryCodes> {
    let (codes, plain) = RecoveryCodes::make();
    sqlx::query("delete from staff_recovery_codes where staff_id = $1")
        .bind(staff_id)
        .execute(&mut **tx)
        .await?;
    let hashes: Vec<Vec<u8>> = plain
        .iter()
        .map(|code| recovery_hash(staff_id, code))
        .collect();
    sqlx::query(
        "insert into staff_recovery_codes (staff_id, code_hash) \
         select $1, h from unnest($2::bytea[]) as u(h)",
    )
    .bind(staff_id)
    .bind(&hashes)
    .execute(&mut **tx)
    .await?;
    Ok(codes)
}

/// What a second factor came to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Verified {
    App,
    Recovery,
    /// Right, but already used (an app code of a step already accepted,
    /// or a spent recovery code).
    Spent,
    Wrong,
}

impl Verified {
    fn as_str(self) -> &'static str {
        match self {
            Verified::App => "app",
            Verified::Recovery => "recovery_code",
            Verified::Spent => "code_already_used",
            Verified::Wrong => "wrong_code",
        }
    }
}

/// Checks and spends a member's second factor in the caller's transaction:
/// an app code moves `last_step` forward (only forward), a recovery code
/// is marked used; each by one conditional write, so a code passes once.
async fn spend_code(
    tx: &mut sqlx::Transaction<'_, sqlx::Postgres>,
    key: &SessionKey,
    staff_id: i64,
    typed: &Secret,
) -> Result<Verified> {
    match Code::parse(typed) {
        Code::Neither => Ok(Verified::Wrong),
        Code::App(code) => {
            let sealed: Option<Vec<u8>> = sqlx::query_scalar(
                "select secret_sealed from staff_two_factor \
                  where staff_id = $1 and confirmed_at is not null",
            )
            .bind(staff_id)
            .fetch_optional(&mut **tx)
            .await?;
            let Some(sealed) = sealed else {
                return Ok(Verified::Wrong);
            };
            let Some(secret) = Sealing::new(key).open(staff_id, &sealed) else {
                tracing::error!(
                    staff_id,
                    "a two-factor secret cannot be opened: HOLDFAST_SESSION_KEY is not the one \
                     it was sealed with; sign in with a recovery code, or reset two-factor"
                );
                return Ok(Verified::Wrong);
            };
            let Some(step) = app_code_step(&secret, &code) else {
                return Ok(Verified::Wrong);
            };
            // the lock on the row is this update's: a racing sign-in with
            // the same code waits, then finds the step taken
            let moved = sqlx::query(
                "update staff_two_factor set last_step = $2 \
                  where staff_id = $1 and confirmed_at is not null and last_step < $2",
            )
            .bind(staff_id)
            .bind(step)
            .execute(&mut **tx)
            .await?
            .rows_affected();
            Ok(if moved == 1 {
                Verified::App
            } else {
                Verified::Spent
            })
        }
        Code::Recovery(code) => {
            let spent: Option<bool> = sqlx::query_scalar(
                "update staff_recovery_codes set used_at = coalesce(used_at, now()) \
                  where staff_id = $1 and code_hash = $2 \
                 returning used_at = now()",
            )
            .bind(staff_id)
            .bind(recovery_hash(staff_id, &code))
            .fetch_optional(&mut **tx)
            .await?;
            Ok(match spent {
                Some(true) => Verified::Recovery,
                Some(false) => Verified::Spent,
                None => Verified::Wrong,
            })
        }
    }
}

// ---- enrolling ----

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
    let row: Option<(Vec<u8>, Option<DateTime<Utc>>)> = sqlx::query_as(
        "select secret_sealed, confirmed_at from staff_two_factor where staff_id = $1",
    )
    .bind(staff.id)
    .fetch_optional(pool)
    .await?;
    match row {
        None => Ok(Status::Off),
        Some((_, Some(since))) => {
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
        Some((sealed, None)) => match Sealing::new(key).open(staff.id, &sealed) {
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
    audit::record(
        &mut tx,
        staff,
        "two_factor_on",
        &staff.email,
        "on",
        serde_json::json!({ "recovery_codes": RECOVERY_CODES }),
    )
    .await?;
    tx.commit().await?;
    audit::log_action(staff, "two_factor_on", &staff.email, "on");
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
    audit::record(
        &mut tx,
        staff,
        "new_recovery_codes",
        &staff.email,
        "made",
        serde_json::json!({ "recovery_codes": RECOVERY_CODES, "confirmed_with": verified.as_str() }),
    )
    .await?;
    tx.commit().await?;
    audit::log_action(staff, "new_recovery_codes", &staff.email, "made");
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
    audit::record(
        &mut tx,
        staff,
        "two_factor_off",
        &staff.email,
        "off",
        serde_json::json!({ "confirmed_with": verified.as_str() }),
    )
    .await?;
    tx.commit().await?;
    audit::log_action(staff, "two_factor_off", &staff.email, "off");
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
    super::accounts::end_sessions(&mut tx, staff_id).await?;
    let outcome = if was_on { "reset" } else { "was_off" };
    audit::record(
        &mut tx,
        by,
        "reset_two_factor",
        &email,
        outcome,
        serde_json::json!({}),
    )
    .await?;
    tx.commit().await?;
    audit::log_action(by, "reset_two_factor", &email, outcome);
    Ok(was_on)
}

// ---- signing in ----

/// A sign-in waiting for its code, as its page needs it.
#[derive(Debug)]
pub struct Challenge {
    pub email: String,
    pub csrf_token: Secret,
}

/// The challenge a cookie's id names, if it is still open.
pub async fn challenge(pool: &PgPool, id: &str) -> Result<Option<Challenge>> {
    let row: Option<(String, String)> = sqlx::query_as(
        "select s.email, c.csrf_token from staff_login_challenges c join staff s on s.id = c.staff_id \
          where c.id_hash = $1 and c.expires_at > now() and s.disabled_at is null",
    )
    .bind(session_hash(id))
    .fetch_optional(pool)
    .await?;
    Ok(row.map(|(email, csrf_token)| Challenge {
        email,
        csrf_token: Secret::new(csrf_token),
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
    let row: Option<(i64, String, String, String, super::roles::Role)> = sqlx::query_as(
        "select c.staff_id, c.typed_email, c.csrf_token, s.email, s.role \
           from staff_login_challenges c join staff s on s.id = c.staff_id \
          where c.id_hash = $1 and c.expires_at > now() and s.disabled_at is null",
    )
    .bind(&id_hash)
    .fetch_optional(pool)
    .await?;
    let Some((staff_id, typed_email, csrf_token, email, role)) = row else {
        return Ok(CodeOutcome::StartOver);
    };
    if csrf.is_empty() || !same_text(csrf, &csrf_token) {
        return Ok(CodeOutcome::Forged);
    }
    let attempt = match Attempt::count(pool, &typed_email, address).await? {
        Ok(attempt) => attempt,
        Err(LoginOutcome::Locked { retry_after }) => {
            return Ok(CodeOutcome::Locked { retry_after });
        }
        Err(_) => return Ok(CodeOutcome::Refused),
    };
    let staff = StaffMember {
        id: staff_id,
        email,
        role,
    };
    let mut tx = pool.begin().await?;
    let verified = spend_code(&mut tx, key, staff.id, typed).await?;
    if let Verified::App | Verified::Recovery = verified {
        let gone = sqlx::query("delete from staff_login_challenges where id_hash = $1")
            .bind(&id_hash)
            .execute(&mut *tx)
            .await?
            .rows_affected();
        if gone != 1 {
            // another request finished this challenge first
            return Ok(CodeOutcome::StartOver);
        }
        attempt.forget(&mut tx).await?;
        let (session_id, csrf_token) = start_session(&mut tx, &staff).await?;
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
        audit::record(
            &mut tx,
            &staff,
            "login",
            &staff.email,
            "ok",
            serde_json::json!({
                "second_factor": verified.as_str(),
                "recovery_codes_left": recovery_codes_left,
            }),
        )
        .await?;
        tx.commit().await?;
        audit::log_action(&staff, "login", &staff.email, "ok");
        return Ok(CodeOutcome::SignedIn {
            session: Session {
                must_enrol: must_enrol(staff.role, true, required),
                staff,
                csrf_token,
                id: session_id,
                two_factor: true,
            },
            recovery_codes_left,
        });
    }
    // wrong: counted on the challenge too, and recorded (someone who
    // knows the password is trying codes)
    let wrong: Option<i32> = sqlx::query_scalar(
        "update staff_login_challenges set wrong_codes = wrong_codes + 1 \
          where id_hash = $1 returning wrong_codes",
    )
    .bind(&id_hash)
    .fetch_optional(&mut *tx)
    .await?;
    let spent_challenge = wrong.is_none_or(|n| n >= CHALLENGE_WRONG_CODES);
    if spent_challenge {
        sqlx::query("delete from staff_login_challenges where id_hash = $1")
            .bind(&id_hash)
            .execute(&mut *tx)
            .await?;
    }
    audit::record(
        &mut tx,
        &staff,
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

// ---- the owner's setting ----

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
    audit::record(
        &mut tx,
        &by.staff,
        "change_setting",
        "two_factor_for_refunds",
        word,
        serde_json::json!({}),
    )
    .await?;
    tx.commit().await?;
    audit::log_action(&by.staff, "change_setting", "two_factor_for_refunds", word);
    Ok(SettingOutcome::Changed)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codes_are_read_as_typed() {
        assert_eq!(
            Code::parse(&Secret::new(" 123 456 ")),
            Code::App("123456".into())
        );
        assert_eq!(
            Code::parse(&Secret::new("ABCD-EFGH-JKMN-PQRS")),
            Code::Recovery("abcdefghjkmnpqrs".into())
        );
        for wrong in [
            "",
            "12345",
            "1234567",
            "abcd",
            "0000-0000-0000-0000",
            "12345a",
        ] {
            assert_eq!(Code::parse(&Secret::new(wrong)), Code::Neither, "{wrong:?}");
        }
    }

    #[test]
    fn a_sealed_secret_opens_only_for_its_account_under_its_key() {
        let key = SessionKey::new(Secret::new("k".repeat(32))).unwrap();
        let secret = [7u8; SECRET_BYTES];
        let sealed = Sealing::new(&key).seal(1, &secret).unwrap();
        assert_eq!(sealed.len(), 12 + 20 + 16);
        assert!(
            !sealed.windows(4).any(|w| w == [7u8; 4]),
            "not in the clear"
        );
        assert_eq!(Sealing::new(&key).open(1, &sealed), Some(secret));
        assert_eq!(Sealing::new(&key).open(2, &sealed), None, "another account");
        let other = SessionKey::new(Secret::new("j".repeat(32))).unwrap();
        assert_eq!(Sealing::new(&other).open(1, &sealed), None, "another key");
        let mut tampered = sealed.clone();
        tampered[20] ^= 1;
        assert_eq!(Sealing::new(&key).open(1, &tampered), None);
        // two seals of one secret differ (a fresh nonce each)
        assert_ne!(Sealing::new(&key).seal(1, &secret).unwrap(), sealed);
    }

    #[test]
    fn codes_follow_rfc_6238() {
        // RFC 6238 appendix B, SHA-1: the secret "12345678901234567890",
        // 59 s and 1111111109 s (the test vectors' last six digits)
        let secret: [u8; 20] = *b"12345678901234567890";
        let totp = totp(&secret);
        assert_eq!(totp.generate(59).to_string(), "287082");
        assert_eq!(totp.generate(1111111109).to_string(), "081804");
        // one step either way is accepted, two are not
        assert_eq!(totp.check("287082", 59 + 30), Some(1));
        assert_eq!(totp.check("287082", 59 + 60), None);
    }

    #[test]
    fn recovery_codes_are_random_grouped_and_distinct() {
        let (codes, plain) = RecoveryCodes::make();
        assert_eq!(codes.0.len(), RECOVERY_CODES);
        let shown = codes.0[0].expose();
        assert_eq!(shown.len(), 19);
        assert_eq!(shown.replace('-', ""), plain[0]);
        let mut unique = plain.clone();
        unique.sort();
        unique.dedup();
        assert_eq!(unique.len(), RECOVERY_CODES);
        assert_ne!(recovery_hash(1, &plain[0]), recovery_hash(2, &plain[0]));
        assert!(!format!("{codes:?}").contains(&plain[0]));
    }

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
