//! What Holdfast's tests share: the product's (`tests/api`) and the tools'
//! (`crates/tools/tests/tools`). Tests spawn the real thing: a fresh
//! database cloned from a migrated template, the shop on port 0 against it,
//! the provider sandbox over HTTP, shoppers with their own cookie jars, and
//! real `holdfast` processes where a test kills or runs two of them.
//!
//! The modules, by what they are for:
//!
//! - [`database`]: a migrated database per test, the demo catalogue, and a
//!   fingerprint of everything a request could change;
//! - [`engine`]: the hold engine's inputs and checks, payments reported
//!   straight to the confirm routine, orders made without the shop, the
//!   worker's outbox;
//! - [`sandbox`]: the provider sandbox on port 0, its webhooks, and the
//!   adapters pointed at it;
//! - [`shop`]: the shop on port 0 ([`spawn_app`]) and what a test asks it;
//! - [`shopper`]: the basket and checkout form, redirects, what a shopper
//!   does in the shop;
//! - [`purchase`]: the one way a test buys ([`TestApp::buy`]), or starts
//!   a checkout and pays later;
//! - [`staff`]: a staff account and a signed-in staff browser;
//! - [`process`]: `holdfast` as a process (`serve`, `worker`, commands);
//! - [`tls`]: a test certificate authority and an HTTPS front;
//! - [`clock`]: the shop's time zone and the nights its clocks change;
//! - [`client`]: HTTP clients with Holdfast's TLS setup, and browsers with
//!   their own cookie jars (the kit's lowest room).
//!
//! Everything a test usually needs is also at the crate's root:
//! `use holdfast_testkit::*;`, or by name (`use holdfast_testkit::{spawn_app,
//! TestApp};`). Logs stay quiet unless `TEST_LOG` is set.

pub mod client;
pub mod clock;
pub mod database;
pub mod engine;
pub mod process;
pub mod purchase;
pub mod sandbox;
pub mod shop;
pub mod shopper;
pub mod staff;
pub mod tls;

pub use client::{browser, browser_from, http_builder, http_client};
pub use database::{TestDb, load_demo, snapshot, workspace_root};
pub use engine::{
    account, assert_no_drift, drain_outbox, expired_by_provider, fast_clock, held_and_sold,
    hold_ok, payment_for, qty, request, resource, rid, ttl,
};
pub use process::{Server, free_port, holdfast_process, json_output, ready, run_command};
pub use purchase::{Answer, Attempt, Paid, Payment, Purchase, Report, ShopFront, Started};
pub use sandbox::{
    TestSandbox, page_request, pay_on_page, spawn_sandbox, wait_for_accepted, wait_for_event,
};
pub use shop::{TestApp, spawn_app, spawn_app_shaped, spawn_app_with};
pub use shopper::{
    checkout_key, field, form_lines, hidden, location, read_page, text_of, token_of, try_field,
};
pub use staff::{PASSWORD, STAFF_EMAIL, STAFF_PASSWORD};
pub use tls::{TlsFront, tls_front};
