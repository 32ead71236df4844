//! Staff: who runs the shop and what they may do. An account signs in with
//! an argon2id password ([`passwords`], [`login`], counted by the login
//! throttle) and, if it has one, a second factor ([`two_factor`]), and gets
//! a session ([`sessions`]). [`accounts`] is the owner's running of
//! accounts and [`roles`] what each may do; [`actions`], [`refunds`],
//! [`catalogue`] (and [`archived`], bringing back what it took off the
//! shop; [`sections`], their order on the page; [`seats`], a seated
//! event's plan), [`vouchers`], [`exports`]
//! and [`api_keys`] are the work
//! staff do, each recorded in the audit log (`crate::audit`) with who did
//! it; [`views`] is what the admin's pages read.

pub mod accounts;
pub mod actions;
pub mod api_keys;
pub mod archived;
pub mod cancellations;
pub mod catalogue;
pub mod exports;
pub mod home;
pub mod invites;
pub mod login;
pub mod order_search;
pub mod passwords;
pub mod publishing;
pub mod refunds;
pub mod roles;
pub mod seats;
pub mod sections;
pub mod sessions;
pub mod two_factor;
pub mod views;
pub mod vouchers;

pub use accounts::{AddOutcome, add_staff};
pub use login::{
    CHALLENGE_MINUTES, CHALLENGE_WRONG_CODES, LOCK_MINUTES, LoginOutcome, PER_ADDRESS, PER_EMAIL,
    PER_EMAIL_FROM_ADDRESS, Throttle, WINDOW_MINUTES, log_in, prune,
};
pub use passwords::{MAX_PASSWORD_BYTES, check_new_password};
pub use sessions::{SESSION_HOURS, Session, end_session, must_enrol, session};

use crate::audit::{Actor, Member};

#[derive(Debug, thiserror::Error)]
pub enum StaffError {
    #[error("{0}")]
    InvalidInput(String),
    #[error(transparent)]
    Database(#[from] sqlx::Error),
    #[error("password hashing failed: {0}")]
    Hashing(String),
    /// Too many logins are being checked at once; try again shortly.
    #[error("too many logins at once")]
    Busy,
    #[error("{0}")]
    Internal(String),
}

pub type Result<T, E = StaffError> = std::result::Result<T, E>;

/// A staff member's address: trimmed, lower-cased, plausible.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StaffEmail(String);

impl StaffEmail {
    pub fn parse(value: &str) -> Result<Self> {
        let email = value.trim().to_lowercase();
        let plausible = (3..=254).contains(&email.len())
            && !email.chars().any(|c| c.is_whitespace() || c.is_control())
            && email
                .split_once('@')
                .is_some_and(|(user, host)| !user.is_empty() && !host.is_empty());
        if !plausible {
            return Err(StaffError::InvalidInput(
                "an e-mail address like name@example.com is needed".into(),
            ));
        }
        Ok(Self(email))
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

/// A signed-in staff member.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StaffMember {
    pub id: i64,
    pub email: String,
    pub role: roles::Role,
}

impl StaffMember {
    /// How hold history and logs name this person.
    pub fn actor(&self) -> String {
        format!("staff:{}", self.email)
    }
}

/// A member acts as themselves, in their role: how the audit log records
/// what they did.
impl<'a> From<&'a StaffMember> for Actor<'a> {
    fn from(staff: &'a StaffMember) -> Self {
        Actor::Staff(Member {
            id: staff.id,
            email: &staff.email,
            role: staff.role.as_str(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn emails_are_normalised_and_checked() {
        assert_eq!(
            StaffEmail::parse(" Ada@Example.COM ").unwrap().as_str(),
            "ada@example.com"
        );
        for bad in ["", "ada", "@example.com", "ada@", "a da@example.com"] {
            assert!(StaffEmail::parse(bad).is_err(), "{bad:?}");
        }
    }
}
