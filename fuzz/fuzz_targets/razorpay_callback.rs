#![no_main]

use libfuzzer_sys::fuzz_target;

// The decoding and the properties live in crates/fuzz-checks, which the
// stable regression test (tests/api/fuzz_regressions.rs) replays as well.
fuzz_target!(|data: &[u8]| holdfast_fuzz_checks::razorpay_callback(data));
