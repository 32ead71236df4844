//! Integration tests: one binary, real PostgreSQL, real HTTP.

mod admin;
mod bad_input;
mod baskets;
mod browser;
mod checkout;
mod cli;
mod combined_checkout;
mod combining;
mod fuzz_regressions;
mod health;
mod helpers;
mod housekeeping;
mod journey;
mod lifecycle;
mod live_keys;
mod official_sdks;
mod outage;
mod providers;
mod razorpay;
mod razorpay_adapter;
mod recovery;
mod scale_out;
mod simulate;
mod soak;
mod storms;
mod stripe_adapter;
