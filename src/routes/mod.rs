//! Thin handlers: parse into domain types, call, render.

mod health;

pub use health::healthz;
