#![no_main]

use libfuzzer_sys::fuzz_target;

// The sandbox's request parsing and its properties live in the sandbox
// crate (holdfast_sandbox::fuzzing), which its stable test
// (crates/sandbox/tests/fuzz_seeds.rs) replays as well.
fuzz_target!(|data: &[u8]| holdfast_sandbox::fuzzing::razorpay_requests(data));
