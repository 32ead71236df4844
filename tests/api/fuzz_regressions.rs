//! The fuzz targets' checks on stable, without a database: every seed under
//! `fuzz/seeds/<target>/`, every crash kept under `fuzz/regressions/<target>/`
//! and a few hand-made hostile inputs go through the very code the targets
//! run (`crates/fuzz-checks`), so a fixed crash stays fixed.

use std::fs;
use std::panic::{self, AssertUnwindSafe};
use std::path::Path;

use holdfast_fuzz_checks as checks;

type Check = fn(&[u8]);

const TARGETS: [(&str, Check); 4] = [
    ("stripe_signature", checks::stripe_signature),
    ("stripe_event", checks::stripe_event),
    ("razorpay_webhook", checks::razorpay_webhook),
    ("razorpay_callback", checks::razorpay_callback),
];

/// Run `check` on `input`, naming the input if it panics.
fn replay(name: &str, check: Check, input: &[u8]) {
    if let Err(panic) = panic::catch_unwind(AssertUnwindSafe(|| check(input))) {
        let why = panic
            .downcast_ref::<String>()
            .map(String::as_str)
            .or_else(|| panic.downcast_ref::<&str>().copied())
            .unwrap_or("(no message)");
        panic!("{name} failed: {why}");
    }
}

/// Replay every file under `fuzz/<kind>/<target>/`; how many there were.
fn replay_dir(kind: &str, target: &str, check: Check) -> usize {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("fuzz")
        .join(kind)
        .join(target);
    let Ok(entries) = fs::read_dir(&dir) else {
        return 0;
    };
    let mut count = 0;
    for entry in entries {
        let path = entry.expect("a readable directory entry").path();
        if path.is_file() {
            let input = fs::read(&path).expect("a readable input");
            replay(&path.display().to_string(), check, &input);
            count += 1;
        }
    }
    count
}

#[test]
fn every_seed_and_regression_passes_its_targets_checks() {
    for (target, check) in TARGETS {
        let seeds = replay_dir("seeds", target, check);
        assert!(seeds > 0, "no seeds for {target}");
        replay_dir("regressions", target, check);
    }
}

/// `secret \n now \n timestamp \n header \n payload`, as the target reads it.
fn stripe_signature_input(now: &str, timestamp: &str, header: &[u8], payload: &[u8]) -> Vec<u8> {
    let mut input = format!("whsec_test_secret\n{now}\n{timestamp}\n").into_bytes();
    input.extend_from_slice(header);
    input.push(b'\n');
    input.extend_from_slice(payload);
    input
}

#[test]
fn hostile_stripe_signature_headers_are_refused_without_a_panic() {
    let body = br#"{"id":"evt_1","type":"checkout.session.completed"}"#;
    let many = format!("t=1700000000{}", ",v1=".repeat(10_000));
    let just_fits = format!("t=1700000000{}", ",v1=00".repeat(580));
    let max = i64::MAX.to_string();
    let min = i64::MIN.to_string();
    let cases: Vec<(&str, Vec<u8>)> = vec![
        (
            "10,000 v1 entries",
            stripe_signature_input("1700000000", "1700000000", many.as_bytes(), body),
        ),
        (
            "580 empty v1 entries under the size limit",
            stripe_signature_input("1700000000", "1700000000", just_fits.as_bytes(), body),
        ),
        (
            "a timestamp of i64::MAX",
            stripe_signature_input(&min, &max, format!("t={max},v1=00").as_bytes(), body),
        ),
        (
            "a timestamp of i64::MIN",
            stripe_signature_input(&max, &min, format!("t={min},v1=00").as_bytes(), body),
        ),
        (
            "now is i64::MAX, signed at 0",
            stripe_signature_input(&max, "0", b"t=0", body),
        ),
        (
            "non-UTF-8 header and payload",
            stripe_signature_input(
                "1700000000",
                "-1",
                b"t=\xff\xfe,v1=\xc3\x28",
                b"\xff\x00\xfe",
            ),
        ),
        (
            "a timestamp past i64",
            stripe_signature_input("1", "2", b"t=99999999999999999999,v1=00", b""),
        ),
        ("empty", Vec::new()),
    ];
    for (name, input) in cases {
        replay(name, checks::stripe_signature, &input);
    }
}

#[test]
fn hostile_stripe_events_are_refused_without_a_panic() {
    let deep = format!("{}{}", "[".repeat(100_000), "]".repeat(100_000));
    let deep_object = format!(
        r#"{{"id":"evt_1","type":"checkout.session.completed","data":{{"object":{}1{}}}}}"#,
        r#"{"a":"#.repeat(10_000),
        "}".repeat(10_000)
    );
    let long_id = format!(
        r#"{{"id":"{}","type":"x","data":{{"object":{{}}}}}}"#,
        "e".repeat(256)
    );
    let long_intent = format!(
        r#"{{"id":"evt_1","type":"checkout.session.completed","data":{{"object":{{"client_reference_id":"5f0c8e0e-6a3b-4c1d-9e2f-7a8b9c0d1e2f","payment_status":"paid","payment_intent":"{}"}}}}}}"#,
        "p".repeat(10_000)
    );
    let cases: Vec<(&str, Vec<u8>)> = vec![
        ("deeply nested arrays", deep.into_bytes()),
        ("a deeply nested event object", deep_object.into_bytes()),
        ("an id too long", long_id.into_bytes()),
        ("a payment intent too long", long_intent.into_bytes()),
        (
            "non-UTF-8",
            b"{\"id\":\"\xff\xfe\",\"type\":\"x\"}".to_vec(),
        ),
        (
            "an unpaired surrogate",
            br#"{"id":"\ud800","type":"x","data":{"object":{}}}"#.to_vec(),
        ),
        (
            "a huge number",
            format!(r#"{{"id":1{}}}"#, "0".repeat(5_000)).into_bytes(),
        ),
        (
            "duplicate keys",
            br#"{"id":"a","id":"b","type":"x","data":{"object":{}}}"#.to_vec(),
        ),
        ("empty", Vec::new()),
    ];
    for (name, input) in cases {
        replay(name, checks::stripe_event, &input);
    }
}

#[test]
fn hostile_razorpay_webhooks_are_refused_without_a_panic() {
    let deep = format!("{}{}", "{\"a\":".repeat(10_000), "}".repeat(10_000));
    let long_kind = format!(r#"{{"event":"{}"}}"#, "e".repeat(101));
    let cases: Vec<(&str, Vec<u8>)> = vec![
        (
            "deeply nested JSON",
            format!("s\nevt_1\n00\n{deep}").into_bytes(),
        ),
        (
            "a type too long",
            format!("s\nevt_1\n00\n{long_kind}").into_bytes(),
        ),
        (
            "an event id too long",
            format!("s\n{}\n00\n{{}}", "e".repeat(256)).into_bytes(),
        ),
        (
            "a signature of 10,000 hex digits",
            format!("s\nevt_1\n{}\n{{}}", "ab".repeat(5_000)).into_bytes(),
        ),
        (
            "a signature of odd length and non-hex",
            b"s\nevt_1\n0\xff\xfez\n{}".to_vec(),
        ),
        (
            "non-UTF-8 everywhere",
            b"\xff\n\xfe\n\xfd\n\xfc{\"event\":\"\xfb\"}".to_vec(),
        ),
        ("no secret", b"\nevt_1\n00\n{}".to_vec()),
        ("empty", Vec::new()),
    ];
    for (name, input) in cases {
        replay(name, checks::razorpay_webhook, &input);
    }
}

#[test]
fn hostile_razorpay_callbacks_are_refused_without_a_panic() {
    let cases: Vec<(&str, Vec<u8>)> = vec![
        (
            "ids that run into each other around the bar",
            b"key_secret\n\nrazorpay_order_id=a%7Cb&razorpay_payment_id=c&razorpay_signature=00"
                .to_vec(),
        ),
        (
            "repeated fields",
            format!(
                "key_secret\n\n{}",
                "razorpay_signature=00&".repeat(5_000)
            )
            .into_bytes(),
        ),
        (
            "broken percent escapes and non-UTF-8",
            b"key_secret\n\nrazorpay_payment_id=%ff%fe%&razorpay_order_id=%\xff&razorpay_signature=%zz"
                .to_vec(),
        ),
        (
            "a signature with spaces and capitals",
            b"\nrazorpay_signature=+ABCDEF+\n".to_vec(),
        ),
        ("an empty key secret, query and form", b"\n\n".to_vec()),
        ("empty", Vec::new()),
    ];
    for (name, input) in cases {
        replay(name, checks::razorpay_callback, &input);
    }
}
