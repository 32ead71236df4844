//! The tools around Holdfast that production does not link: `simulate`
//! (seeded shoppers through the sandbox, then the ledger), the benchmarks
//! (`bench`, `throughput` and their baselines: the naive read-then-write
//! path and neveroversell), the flash-sale crowd (`flash-sale`), pages
//! watching availability over server-sent events (`watch`), a crowd of
//! API checkouts sent at one moment (`fire`, bench/table-drop) and the
//! provider sandbox on its own. Run them with
//! `cargo run -p holdfast-tools -- <command>`.

pub mod bench;
mod browser;
pub mod fire;
pub mod flash;
pub mod naive;
pub mod simulate;
pub mod watch;
