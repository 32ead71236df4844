//! The tools, run as the real binary (and as a library) against a real
//! PostgreSQL, with the test kit the product's tests use
//! (`crates/testkit`).

mod bench;
mod simulate;
mod throughput;
