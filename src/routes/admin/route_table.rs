//! The admin's route table: every route with its method, its path under
//! `/admin`, the permission it needs and its handler ([`ROUTES`]). Routes
//! are registered from it (`super::routes`) and the guard authorises from
//! it ([`route_for`]), so a route cannot exist without a permission.

use actix_web::http::Method;
use actix_web::web;

use super::home::home;
use super::{
    activity, api_keys, catalogue, exports, holds, images, orders, records, redeem, refunds,
    resources, session, staff_accounts, storefront, two_factor, vouchers, waitlist, webhooks,
};
use crate::routes::{seats, tables};
use crate::staff::roles::Permission;

/// How an admin route is asked for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verb {
    Get,
    Post,
}

/// One route of the admin: its method, its path under `/admin`, the
/// permission it needs, and its handler. [`ROUTES`] is the whole admin:
/// routes are registered from it and the guard authorises from it, so a
/// route cannot exist without a permission.
pub struct AdminRoute {
    pub verb: Verb,
    /// Under `/admin`; `{name}` is one path segment.
    pub path: &'static str,
    pub permission: Permission,
    pub(super) handler: fn() -> actix_web::Route,
}

impl AdminRoute {
    /// Whether a request's method and path (under `/admin`) are this route.
    pub fn matches(&self, method: &Method, path: &str) -> bool {
        let verb = match *method {
            Method::GET | Method::HEAD => Verb::Get,
            Method::POST => Verb::Post,
            _ => return false,
        };
        if verb != self.verb {
            return false;
        }
        let mut want = self.path.split('/');
        let mut got = path.split('/');
        loop {
            match (want.next(), got.next()) {
                (None, None) => return true,
                (Some(w), Some(g)) if w.starts_with('{') && !g.is_empty() => {}
                (Some(w), Some(g)) if w == g => {}
                _ => return false,
            }
        }
    }
}

macro_rules! route {
    ($verb:ident $path:literal, $permission:ident => $handler:path) => {
        AdminRoute {
            verb: Verb::$verb,
            path: $path,
            permission: Permission::$permission,
            handler: || match Verb::$verb {
                Verb::Get => web::get().to($handler),
                Verb::Post => web::post().to($handler),
            },
        }
    };
}

/// Every route of the admin, with what it needs.
pub static ROUTES: &[AdminRoute] = &[
    route!(Get "", SignedIn => home),
    route!(Get "/", SignedIn => home),
    route!(Post "/logout", SignedIn => session::logout),
    route!(Get "/resources", Engine => resources::resources),
    route!(Get "/resources/{id}", Engine => resources::resource),
    route!(Post "/resources/{id}/capacity", Engine => resources::set_capacity),
    route!(Post "/resources/{id}/repair", Engine => resources::repair),
    route!(Get "/holds", Engine => holds::holds),
    route!(Get "/holds/{id}", Engine => holds::hold),
    route!(Post "/holds/{id}/release", Engine => holds::release_hold),
    route!(Get "/orders", Orders => orders::orders),
    route!(Get "/orders/{id}", LookUp => orders::order),
    route!(Post "/orders/{id}/refund", Refunds => refunds::refund_order),
    route!(Post "/orders/{order}/jobs/{job}/retry", Refunds => orders::retry_refund),
    route!(Get "/redeem", Redeem => redeem::redeem_page),
    route!(Post "/redeem", Redeem => redeem::redeem),
    route!(Get "/exports", Exports => exports::exports_page),
    route!(Get "/exports/orders.csv", Exports => exports::orders_csv),
    route!(Get "/exports/attendees.csv", Exports => exports::attendees_csv),
    route!(Get "/door-list", DoorList => exports::door_list),
    route!(Get "/activity", Activity => activity::activity),
    route!(Get "/payments/orphans", Engine => records::orphans),
    route!(Get "/staff", Staff => staff_accounts::staff_page),
    route!(Post "/staff", Staff => staff_accounts::invite),
    route!(Post "/staff/invites/{id}/resend", Staff => staff_accounts::resend_invite),
    route!(Post "/staff/invites/{id}/cancel", Staff => staff_accounts::cancel_invite),
    route!(Post "/staff/{id}/role", Staff => staff_accounts::change_role),
    route!(Post "/staff/{id}/disable", Staff => staff_accounts::disable),
    route!(Post "/staff/{id}/enable", Staff => staff_accounts::enable),
    route!(Post "/staff/{id}/two-factor/reset", Staff => staff_accounts::reset_two_factor),
    route!(Get "/settings", Settings => staff_accounts::settings_page),
    route!(Post "/settings", Settings => staff_accounts::save_settings),
    route!(Post "/settings/shop", Settings => storefront::save),
    route!(Post "/settings/logo", Settings => images::logo),
    route!(Post "/settings/pay", Settings => storefront::save_pay_ways),
    route!(Get "/catalogue", Catalogue => catalogue::catalogue_page),
    route!(Get "/catalogue/events/new", Catalogue => catalogue::new_event),
    route!(Post "/catalogue/events", Catalogue => catalogue::create_event),
    route!(Get "/catalogue/events/{id}", Catalogue => catalogue::event_page),
    route!(Post "/catalogue/events/{id}", Catalogue => catalogue::save_event),
    route!(Get "/catalogue/events/{id}/tiers/new", Catalogue => catalogue::new_tier),
    route!(Post "/catalogue/events/{id}/tiers", Catalogue => catalogue::create_tier),
    route!(Get "/catalogue/events/{id}/tiers/{tier}", Catalogue => catalogue::tier_page),
    route!(Post "/catalogue/events/{id}/tiers/{tier}", Catalogue => catalogue::save_tier),
    route!(Get "/catalogue/events/{id}/sections/new", Catalogue => seats::sections::new_section),
    route!(Post "/catalogue/events/{id}/sections", Catalogue => seats::sections::create_section),
    route!(Post "/catalogue/events/{id}/categories", Catalogue => seats::sections::add_category),
    route!(Get "/catalogue/events/{id}/sections/{section}", Catalogue => seats::plan::section_page),
    route!(Post "/catalogue/events/{id}/sections/{section}/seats", Catalogue => seats::plan::change_seats),
    route!(Post "/catalogue/events/{id}/sections/{section}/category", Catalogue => seats::plan::change_category),
    route!(Post "/catalogue/events/{id}/sections/{section}/plan", Catalogue => seats::plan::replace_plan),
    route!(Post "/catalogue/events/{id}/sections/{section}/categories/{category}", Catalogue => seats::plan::save_category),
    route!(Post "/catalogue/events/{id}/sections/{section}/splits", Catalogue => seats::plan::set_splits),
    route!(Get "/catalogue/schedules/new", Catalogue => catalogue::new_schedule),
    route!(Post "/catalogue/schedules", Catalogue => catalogue::create_schedule),
    route!(Get "/catalogue/schedules/{id}", Catalogue => catalogue::schedule_page),
    route!(Post "/catalogue/schedules/{id}", Catalogue => catalogue::save_schedule),
    route!(Get "/catalogue/stock/new", Catalogue => catalogue::new_stock),
    route!(Post "/catalogue/stock", Catalogue => catalogue::create_stock),
    route!(Get "/catalogue/stock/{id}", Catalogue => catalogue::stock_page),
    route!(Post "/catalogue/stock/{id}", Catalogue => catalogue::save_stock),
    route!(Post "/catalogue/products/{id}/archive", Catalogue => catalogue::archive_product),
    route!(Post "/catalogue/collections/{id}/archive", Catalogue => catalogue::archive_collection),
    route!(Post "/catalogue/collections/{id}/move", Catalogue => catalogue::move_collection),
    route!(Get "/catalogue/archived", Catalogue => catalogue::archived_page),
    route!(Get "/catalogue/preview/{id}", Catalogue => catalogue::preview),
    route!(Post "/catalogue/collections/{id}/publish", Catalogue => catalogue::publish_collection),
    route!(Post "/catalogue/collections/{id}/unpublish", Catalogue => catalogue::unpublish_collection),
    route!(Post "/catalogue/products/{id}/publish", Catalogue => catalogue::publish_product),
    route!(Post "/catalogue/products/{id}/unpublish", Catalogue => catalogue::unpublish_product),
    route!(Post "/catalogue/collections/{id}/image", Catalogue => images::collection_image),
    route!(Post "/catalogue/products/{id}/image", Catalogue => images::product_image),
    route!(Post "/catalogue/products/{id}/restore", Catalogue => catalogue::restore_product),
    route!(Post "/catalogue/collections/{id}/restore", Catalogue => catalogue::restore_collection),
    route!(Get "/dining", Redeem => tables::host_stand::rooms),
    route!(Get "/dining/new", Catalogue => tables::setup::new_room),
    route!(Post "/dining", Catalogue => tables::setup::create_room),
    route!(Get "/dining/{room}", Redeem => tables::host_stand::day_page),
    route!(Post "/dining/{room}/seat", Redeem => tables::host_stand::seat),
    route!(Post "/dining/{room}/no-show", Redeem => tables::host_stand::no_show),
    route!(Post "/dining/{room}/move", Redeem => tables::host_stand::move_booking),
    route!(Post "/dining/{room}/walk-in", Redeem => tables::walk_in::walk_in),
    route!(Post "/dining/{room}/walk-in/left", Redeem => tables::walk_in::left),
    route!(Get "/dining/{room}/setup", Catalogue => tables::setup::setup_page),
    route!(Post "/dining/{room}/setup", Catalogue => tables::setup::save_setup),
    route!(Get "/vouchers", Vouchers => vouchers::vouchers_page),
    route!(Get "/vouchers/new", Vouchers => vouchers::new_voucher),
    route!(Post "/vouchers", Vouchers => vouchers::create_voucher),
    route!(Post "/vouchers/{code}/archive", Vouchers => vouchers::archive_voucher),
    route!(Post "/vouchers/{code}/restore", Vouchers => vouchers::restore_voucher),
    route!(Get "/waitlist", Orders => waitlist::waitlist_page),
    route!(Post "/waitlist/{id}/remove", Orders => waitlist::remove_entry),
    route!(Post "/waitlist/{product}/rules", Catalogue => waitlist::set_rules),
    route!(Post "/waitlist/{product}/queue", Catalogue => waitlist::turn_queue_on),
    route!(Get "/two-factor", SignedIn => two_factor::two_factor_page),
    route!(Post "/two-factor/start", SignedIn => two_factor::start),
    route!(Post "/two-factor/confirm", SignedIn => two_factor::confirm),
    route!(Post "/two-factor/recovery-codes", SignedIn => two_factor::new_recovery_codes),
    route!(Post "/two-factor/off", SignedIn => two_factor::turn_off),
    route!(Get "/api-keys", Integrations => api_keys::api_keys_page),
    route!(Post "/api-keys", Integrations => api_keys::create),
    route!(Post "/api-keys/{id}/revoke", Integrations => api_keys::revoke),
    route!(Get "/webhooks", Integrations => webhooks::webhooks_page),
    route!(Post "/webhooks", Integrations => webhooks::add_endpoint),
    route!(Get "/webhooks/{id}", Integrations => webhooks::endpoint_page),
    route!(Post "/webhooks/{id}/enable", Integrations => webhooks::enable),
    route!(Post "/webhooks/{id}/disable", Integrations => webhooks::disable),
    route!(Post "/webhooks/{id}/replay", Integrations => webhooks::replay_since),
    route!(Post "/webhooks/{id}/deliveries/{job}/replay", Integrations => webhooks::replay_one),
];

/// The admin route a request is for, if any.
pub fn route_for(method: &Method, path: &str) -> Option<&'static AdminRoute> {
    let under = path.strip_prefix("/admin")?;
    ROUTES.iter().find(|route| route.matches(method, under))
}
