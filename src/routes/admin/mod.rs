//! The staff admin (docs/contract.md §6). One guard, [`require_staff`],
//! stands in front of every `/admin` route but the login form and its code
//! step: a signed cookie naming a live session of an account not disabled,
//! on every POST that session's CSRF token in the form, the route's
//! permission for the member's role, and, where the owner requires a
//! second factor the member lacks, nothing but enrolling. Thin handlers:
//! parse, call `staff`, render. One file per page group; beside them the
//! guard ([`guard`]), what the pages share ([`pages`]), the notices an
//! action returns with ([`notices`]) and the route table ([`route_table`]). This
//! one registers the routes.

mod activity;
mod api_keys;
pub(super) mod catalogue;
mod exports;
pub(super) mod form;
mod guard;
mod holds;
mod home;
mod images;
mod invite;
mod menu;
mod notices;
mod orders;
pub(crate) mod pages;
mod pay_ways;
pub(crate) mod picks;
mod records;
mod redeem;
mod refunds;
mod resources;
mod route_table;
mod session;
mod staff_accounts;
mod storefront;
mod two_factor;
mod vouchers;
mod waitlist;
mod webhooks;

use actix_web::web;

pub use guard::require_staff;
pub use notices::NoticeQuery;
pub use route_table::{AdminRoute, ROUTES, Verb, route_for};
pub use session::STAFF_COOKIE;

/// The staff pages: the login outside the staff-only scope, everything else
/// behind [`require_staff`], from the route table.
pub fn routes(config: &mut web::ServiceConfig) {
    let mut admin = web::scope("/admin").wrap(actix_web::middleware::from_fn(require_staff));
    for route in ROUTES {
        admin = admin.route(route.path, (route.handler)());
    }
    config
        .route("/static/redeem.js", web::get().to(redeem::redeem_script))
        .route("/static/admin.css", web::get().to(pages::stylesheet))
        .route("/static/admin.js", web::get().to(pages::script))
        .route("/admin/login", web::get().to(session::login_page))
        .route("/admin/login", web::post().to(session::login))
        .route("/admin/login/code", web::get().to(session::code_page))
        .route("/admin/login/code", web::post().to(session::code))
        .route("/admin/invite/{token}", web::get().to(invite::invite_page))
        .route("/admin/invite/{token}", web::post().to(invite::accept))
        .service(admin);
}
