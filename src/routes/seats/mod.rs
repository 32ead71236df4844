//! Seats' pages, beside each other (docs/design.md, "Reserved seating"):
//! the shopper's seat map of a section ([`map`], `/seats/{section}`) and
//! the admin's plan editor ([`plan`], registered from the admin's route
//! table, which says the permission each needs), and the API's read of a
//! section's seats ([`api`], registered from the API's route table, which
//! says the scope it needs). What a seat is and what the database is asked
//! about it is the kind's folder, [`crate::catalogue::seats`]. This file
//! registers the shop's seat routes and the seat pages' styles and script
//! (`static/seats/`).

pub(crate) mod api;
pub(crate) mod map;
pub(crate) mod plan;
pub(crate) mod sections;

use actix_web::web;

/// The shopper's seat map: drawn, followed live, and chosen from, with
/// its style and script; and the plan editor's stylesheet.
pub fn routes(config: &mut web::ServiceConfig) {
    config
        .route("/static/seats.css", web::get().to(map::stylesheet))
        .route("/static/seats.js", web::get().to(map::script))
        .route(
            "/static/seat-plan.css",
            web::get().to(plan::seat_plan_stylesheet),
        )
        .route("/seats/{section}", web::get().to(map::map))
        .route("/seats/{section}/stream", web::get().to(map::stream))
        .route("/seats/{section}", web::post().to(map::choose));
}
