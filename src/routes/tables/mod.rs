//! Tables' pages, beside each other (docs/design.md, "Tables: a party at a
//! time"): the shopper's booking page of a room ([`book`],
//! `/dining/{room}`), the guest's cancel ([`cancel`],
//! `/orders/{token}/cancel`), and the admin's host stand with the room's
//! set-up ([`host_stand`], [`setup`] read by [`room_fields`], its floor and search [`floor`], its walk-ins
//! [`walk_in`], registered from the admin's route table, which says the
//! permission each needs), and the API's: a room's times ([`api`],
//! registered from the API's route table, which says the scope it needs)
//! and a booking as a checkout's line ([`api_lines`], read by the API's
//! checkout); and the times around a refused party's ([`around`]), what
//! a refusal offers instead, kept in memory. What a table is and the room's times are the kind's folder,
//! [`crate::catalogue::tables`]. This file registers the shop's table
//! routes.

pub(crate) mod api;
pub(crate) mod api_lines;
pub(crate) mod around;
pub(crate) mod book;
pub(crate) mod cancel;
pub(crate) mod floor;
pub(crate) mod host_stand;
pub(crate) mod room_fields;
pub(crate) mod setup;
pub(crate) mod walk_in;

use actix_web::web;

/// The shopper's booking page and a guest's cancel.
pub fn routes(config: &mut web::ServiceConfig) {
    config
        .route("/dining/{room}", web::get().to(book::times))
        .route("/orders/{token}/cancel", web::get().to(cancel::ask))
        .route("/orders/{token}/cancel", web::post().to(cancel::cancel));
}
