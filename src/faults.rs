//! Deliberate faults, for the recovery and failover tests.
//!
//! Crash points: with
//! `HOLDFAST_CRASH_AT=<point>` in its environment, the process aborts the
//! first time it reaches that point: a real death at an exact place (no
//! destructors, no unwinding, connections dropped mid-flight), so a test can
//! restart it and check that nothing was left half done. Unset, each point
//! costs one comparison. Never set it in production.

use std::sync::OnceLock;

/// The points the recovery tests hit.
pub const POINTS: [&str; 3] = [
    // checkout: the order and its holds are committed; no provider call yet
    "after_checkout_commit",
    // checkout: the provider's page exists; our holds are not paying yet
    "after_provider_call",
    // outbox: the provider accepted the refund; the job is not marked done
    "after_refund_call",
];

static CRASH_AT: OnceLock<Option<String>> = OnceLock::new();

/// Abort the process here if `HOLDFAST_CRASH_AT` names this point.
pub fn crash_point(point: &'static str) {
    debug_assert!(POINTS.contains(&point), "unknown crash point {point}");
    let armed = CRASH_AT.get_or_init(|| std::env::var("HOLDFAST_CRASH_AT").ok());
    if armed.as_deref() == Some(point) {
        eprintln!("holdfast: HOLDFAST_CRASH_AT={point}: aborting here, as asked");
        std::process::abort();
    }
}

/// The points where an answer can be lost, for the failover tests.
pub const LOST_ANSWERS: [&str; 3] = [
    // checkout: the order and its holds committed; the answer is lost
    "checkout_start",
    // a payment's confirmation committed; the answer is lost
    "confirmation",
    // a redemption committed; the answer is lost
    "redemption",
];

static LOSE_AT: OnceLock<Option<String>> = OnceLock::new();
static LOST: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// Lost answers: with `HOLDFAST_LOSE_ANSWER_AT=<point>`, the first time the
/// process reaches that point (just after a commit) it fails as if the
/// connection broke before the commit's answer arrived: the unknown
/// outcome a failover leaves, at an exact place, for a test to see it
/// resolved. Unset, each point costs one comparison. Never set it in
/// production.
pub fn lost_answer(point: &'static str) -> Result<(), sqlx::Error> {
    debug_assert!(LOST_ANSWERS.contains(&point), "unknown lost answer {point}");
    let armed = LOSE_AT.get_or_init(|| std::env::var("HOLDFAST_LOSE_ANSWER_AT").ok());
    if armed.as_deref() == Some(point) && !LOST.swap(true, std::sync::atomic::Ordering::Relaxed) {
        eprintln!("holdfast: HOLDFAST_LOSE_ANSWER_AT={point}: losing this answer, as asked");
        return Err(sqlx::Error::Io(std::io::Error::new(
            std::io::ErrorKind::ConnectionReset,
            "the answer was lost (HOLDFAST_LOSE_ANSWER_AT)",
        )));
    }
    Ok(())
}
