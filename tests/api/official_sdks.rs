//! The providers' official SDKs (stripe-python, razorpay-python, from PyPI,
//! pinned) against the sandbox: `tests/sdk/official_clients.py` creates,
//! fetches, captures and refunds through them, and expects the sandbox's
//! refusals as the SDKs' own errors. The SDKs are installed once into
//! `.holdfast/sdk-venv`.

use std::path::{Path, PathBuf};
use std::process::Command;

use holdfast_testkit::spawn_sandbox;

const SDKS: [&str; 2] = ["stripe==16.1.0", "razorpay==2.0.1"];

/// A virtual environment with the pinned SDKs; its python.
fn sdk_python() -> PathBuf {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let venv = root.join(".holdfast/sdk-venv");
    let python = venv.join("bin/python");
    let marker = venv.join(format!("installed-{}", SDKS.join("-")));
    if marker.exists() {
        return python;
    }
    let made = Command::new("python3")
        .args(["-m", "venv"])
        .arg(&venv)
        .status()
        .expect("python3 runs");
    assert!(made.success(), "python3 -m venv failed");
    let installed = Command::new(&python)
        .args([
            "-m",
            "pip",
            "install",
            "--quiet",
            "--disable-pip-version-check",
        ])
        .args(SDKS)
        .status()
        .expect("pip runs");
    assert!(installed.success(), "pip could not install {SDKS:?}");
    std::fs::write(&marker, b"").expect("marker");
    python
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stripe_python_and_razorpay_python_work_against_the_sandbox() {
    let sandbox = spawn_sandbox();
    let python = tokio::task::spawn_blocking(sdk_python).await.unwrap();
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/sdk/official_clients.py");
    let base = sandbox.base.clone();
    let settings = sandbox.settings.clone();
    let output = tokio::task::spawn_blocking(move || {
        Command::new(python)
            .arg(script)
            .env("SANDBOX", base)
            .env("STRIPE_KEY", settings.stripe_secret_key.expose())
            .env("RZP_KEY", &settings.razorpay_key_id)
            .env("RZP_SECRET", settings.razorpay_key_secret.expose())
            .output()
            .expect("the script runs")
    })
    .await
    .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        output.status.success() && stdout.contains("all ok"),
        "{stdout}\n{stderr}"
    );
    // every step ran
    assert_eq!(
        stdout.lines().filter(|l| l.starts_with("ok ")).count(),
        15,
        "{stdout}"
    );
}
