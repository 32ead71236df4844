//! The sandbox's fuzz checks on stable: every seed under
//! `fuzz/seeds/<target>/`, every crash kept under `fuzz/regressions/<target>/`
//! and a few hand-made hostile inputs go through the very checks the fuzz
//! targets run (`holdfast_sandbox::fuzzing`), so a fixed crash stays fixed.

use std::fs;
use std::panic::{self, AssertUnwindSafe};
use std::path::Path;

use holdfast_sandbox::fuzzing;

type Check = fn(&[u8]);

const TARGETS: [(&str, Check); 2] = [
    ("stripe_requests", fuzzing::stripe_requests),
    ("razorpay_requests", fuzzing::razorpay_requests),
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
        .join("../../fuzz")
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

const FORM: &str = "application/x-www-form-urlencoded";

#[test]
fn hostile_stripe_requests_are_refused_without_a_panic() {
    let deep = format!("a{}=1", "[b]".repeat(10_000));
    let quantity = format!(
        "mode=payment&success_url=x&line_items[0][quantity]={}&line_items[0][price_data][currency]=eur\
         &line_items[0][price_data][unit_amount]={}&line_items[0][price_data][product_data][name]=x",
        i64::MAX,
        i64::MAX
    );
    let many_lines: String = (0..2_000)
        .map(|i| {
            format!(
                "&line_items[{i}][quantity]=1&line_items[{i}][price_data][currency]=eur\
                 &line_items[{i}][price_data][unit_amount]=99999999&line_items[{i}][price_data][product_data][name]=x"
            )
        })
        .collect();
    let expiry = |at: i64| format!("mode=payment&success_url=x&expires_at={at}");
    let long_name = format!("{}=1", "p".repeat(100_000));
    let cases: Vec<(&str, String)> = vec![
        ("deeply nested keys", format!("{FORM}\n\n{deep}")),
        ("amounts that overflow", format!("{FORM}\n\n{quantity}")),
        (
            "two thousand lines at the maximum",
            format!("{FORM}\n\nmode=payment&success_url=x{many_lines}"),
        ),
        (
            "expires_at at i64::MAX",
            format!("{FORM}\n\n{}", expiry(i64::MAX)),
        ),
        (
            "expires_at at i64::MIN",
            format!("{FORM}\n\n{}", expiry(i64::MIN)),
        ),
        (
            "a parameter name of 100,000 bytes",
            format!("{FORM}\n\n{long_name}"),
        ),
        ("broken escapes", format!("{FORM}\n\n%%%=%zz&&=&[=]")),
        (
            "a content type of control bytes",
            "\u{1}\u{7f}\n\nx=1".to_owned(),
        ),
        (
            "a version far in the future",
            format!("{FORM}\n9999-99-99\nmode=payment"),
        ),
        ("limit at i64::MIN", format!("{FORM}\n\nlimit={}", i64::MIN)),
        ("empty", String::new()),
    ];
    for (name, input) in cases {
        replay(name, fuzzing::stripe_requests, input.as_bytes());
    }
    replay(
        "not UTF-8",
        fuzzing::stripe_requests,
        b"application/x-www-form-urlencoded\n\xff\xfe\nmode=\xff&success_url=\xc3\x28",
    );
}

#[test]
fn hostile_razorpay_requests_are_refused_without_a_panic() {
    let deep = format!("{}1{}", "[".repeat(10_000), "]".repeat(10_000));
    let deep_notes = format!(
        r#"{{"amount":5000,"currency":"INR","notes":{}1{}}}"#,
        r#"{"a":"#.repeat(5_000),
        "}".repeat(5_000)
    );
    let cases: Vec<(&str, String)> = vec![
        (
            "deeply nested arrays",
            format!("application/json\n\n{deep}"),
        ),
        (
            "deeply nested notes",
            format!("application/json\n\n{deep_notes}"),
        ),
        (
            "amounts past i64",
            "application/json\n\n{\"amount\":1e400,\"currency\":\"INR\"}".to_owned(),
        ),
        (
            "an amount of i64::MAX",
            format!(
                "application/json\n\n{{\"amount\":{},\"currency\":\"INR\"}}",
                i64::MAX
            ),
        ),
        (
            "an automatic window of i64::MAX minutes",
            format!(
                "application/json\n\n{{\"amount\":5000,\"currency\":\"INR\",\"payment\":{{\"capture\":\"automatic\",\"capture_options\":{{\"automatic_expiry_period\":{}}}}}}}",
                i64::MAX
            ),
        ),
        (
            "duplicate keys",
            "application/json\n\n{\"amount\":1,\"amount\":5000,\"currency\":\"INR\"}".to_owned(),
        ),
        (
            "an unpaired surrogate",
            "application/json\n\n{\"amount\":5000,\"currency\":\"\\ud800\"}".to_owned(),
        ),
        (
            "a refund key of 10,000 characters",
            format!("application/json\n{}\n{{}}", "k".repeat(10_000)),
        ),
        (
            "a form body",
            "application/x-www-form-urlencoded\n\namount=5000".to_owned(),
        ),
        ("no content type", "\n\n{\"amount\":5000}".to_owned()),
        ("empty", String::new()),
    ];
    for (name, input) in cases {
        replay(name, fuzzing::razorpay_requests, input.as_bytes());
    }
    replay(
        "not UTF-8",
        fuzzing::razorpay_requests,
        b"application/json\n\xff\xfe\xfd\xfc\xfb\xfa\xf9\xf8\xf7\xf6\n{\"amount\":\"\xff\"}",
    );
}
