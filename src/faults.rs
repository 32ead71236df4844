//! Deliberate crash points, for the recovery tests. With
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
