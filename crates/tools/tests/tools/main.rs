//! The tools, run as the real binary (and as a library) against a real
//! PostgreSQL, with the product's test helpers.

#[allow(dead_code)]
#[path = "../../../../tests/api/helpers.rs"]
mod helpers;

mod bench;
mod simulate;
mod throughput;
