//! Holdfast: a checkout backend for shops that sell things that run out.
//!
//! The hold engine lives in PostgreSQL (`migrations/`) and is driven from
//! [`inventory`]. README.md has the two commands and a map of docs/;
//! docs/contract.md is what Holdfast promises.

pub mod audit;
pub mod batching;
pub mod catalogue;
pub mod checkout;
pub mod cli;
pub mod clock;
pub mod configuration;
pub mod database;
pub mod faults;
pub mod images;
pub mod inventory;
pub mod items;
pub mod keys;
pub mod limits;
pub mod live;
pub mod metrics;
pub mod money;
pub mod outgoing;
pub mod payments;
pub mod qr;
pub mod queue;
pub mod redemption;
pub mod retry;
pub mod routes;
pub mod staff;
pub mod startup;
pub mod state;
pub mod storefront;
pub mod telemetry;
pub mod vouchers;
pub mod waitlist;
pub mod webhooks;
pub mod worker;
