//! Two-factor sign-in with an authenticator app (TOTP, RFC 6238: HMAC-SHA-1,
//! six digits, 30-second steps, one step either way), and one-time recovery
//! codes for a lost phone.
//!
//! - **The secret is sealed.** `staff_two_factor.secret_sealed` is the
//!   secret under AES-256-GCM with a key derived from
//!   `HOLDFAST_SESSION_KEY` ([`SessionKey`](crate::keys::SessionKey)), the account's id as associated
//!   data: a copy of the database alone does not give it away, nor can a
//!   sealed secret be moved to another account. It is shown once, while
//!   enrolling, and never logged ([`Secret`](crate::configuration::Secret)).
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

mod codes;
mod enrolment;
mod setting;
mod sign_in;

pub use codes::{DIGITS, ISSUER, RECOVERY_CODES, RecoveryCodes, SKEW_STEPS, STEP_SECONDS};
pub use enrolment::{
    Changed, Confirmed, Enrolment, Status, confirm, new_recovery_codes, reset, start_enrolment,
    status, turn_off,
};
pub use setting::{SettingOutcome, required_for_refunds, set_required_for_refunds};
pub use sign_in::{Challenge, CodeOutcome, challenge, log_in_with_code};
