//! Verify, dedupe, dispatch into checkout.

pub mod signature;
pub mod stripe;
