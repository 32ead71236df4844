//! Structured logs. Quiet by default in tests; `RUST_LOG` picks the level
//! and `HOLDFAST_LOG_FORMAT=json` gives one JSON object per line.

use tracing_subscriber::EnvFilter;

pub fn init(default_level: &str) {
    let filter =
        EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new(default_level));
    let json = std::env::var("HOLDFAST_LOG_FORMAT").is_ok_and(|format| format == "json");
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr);
    // a second init (tests) is harmless
    let _ = if json {
        builder.json().try_init()
    } else {
        builder.try_init()
    };
}
