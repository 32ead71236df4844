//! The staff admin (docs/contract.md §6). One guard, [`require_staff`],
//! stands in front of every `/admin` route but the login form and its code
//! step: a signed cookie naming a live session of an account not disabled,
//! on every POST that session's CSRF token in the form, the route's
//! permission for the member's role, and, where the owner requires a
//! second factor the member lacks, nothing but enrolling. Thin handlers:
//! parse, call `staff`, render. One file per page group; this one holds
//! the guard, what the pages share and the routes.

mod api_keys;
mod catalogue;
mod exports;
mod form;
mod holds;
mod orders;
mod records;
mod redeem;
mod resources;
mod session;
mod staff_accounts;
mod two_factor;
mod vouchers;
mod waitlist;
mod webhooks;

use actix_web::body::{BoxBody, MessageBody};
use actix_web::dev::{ServiceRequest, ServiceResponse};
use actix_web::http::{Method, StatusCode, header};
use actix_web::middleware::Next;
use actix_web::{HttpMessage, HttpRequest, HttpResponse, ResponseError, web};
use askama::Template;
use chrono::{DateTime, Utc};
use serde::Deserialize;
use uuid::Uuid;

use super::ShopError;
use crate::audit;
use crate::payments::signature::same_text;
use crate::staff::roles::{Permission, Role};
use crate::staff::views::{self};
use crate::staff::{self, Session, StaffError};
use crate::state::Shop;

pub const STAFF_COOKIE: &str = "hf_staff";
pub(super) const LOGIN_COOKIE: &str = "hf_login";
/// A sign-in between its password and its second factor (signed; scoped
/// to the login pages).
pub(super) const CODE_COOKIE: &str = "hf_login_code";
/// What a session that must enrol in two-factor sign-in may still ask for.
const WHILE_ENROLLING: [&str; 4] = [
    "/logout",
    "/two-factor",
    "/two-factor/start",
    "/two-factor/confirm",
];
/// Rows a list page shows at most.
pub(super) const LIST_LIMIT: i64 = 200;
pub(super) const HOLD_STATES: [&str; 5] = [
    "held",
    "awaiting_payment",
    "confirmed",
    "released",
    "expired",
];
impl From<StaffError> for ShopError {
    fn from(error: StaffError) -> Self {
        match error {
            StaffError::InvalidInput(message) => ShopError::bad_request(&message),
            StaffError::Database(error) => error.into(),
            StaffError::Busy => {
                ShopError::busy("many logins are being checked; try again in a moment")
            }
            other => ShopError::internal(other.into()),
        }
    }
}

/// The guard. Without a session: a browser asking for a page is sent to the
/// login form; anything else gets 401. A POST whose form lacks the session's
/// CSRF token gets 403 before any handler runs. Admin answers are never
/// cached.
pub async fn require_staff(
    mut request: ServiceRequest,
    next: Next<impl MessageBody + 'static>,
) -> Result<ServiceResponse<BoxBody>, actix_web::Error> {
    let shop = request
        .app_data::<web::Data<Shop>>()
        .cloned()
        .expect("the shop's state is registered");
    // every failure below is answered here, as a page, so the answer still
    // passes through the security headers
    let session = match request
        .cookie(STAFF_COOKIE)
        .and_then(|c| shop.session_key.verify(c.value()).map(str::to_owned))
    {
        Some(id) => match staff::session(&shop.pool, &id).await {
            Ok(session) => session,
            Err(error) => {
                let response = ShopError::from(error).error_response();
                return Ok(request.into_response(response));
            }
        },
        None => None,
    };
    let Some(session) = session else {
        let response = unauthenticated(request.request());
        return Ok(request.into_response(response));
    };
    let reads_only = matches!(
        *request.method(),
        Method::GET | Method::HEAD | Method::OPTIONS
    );
    if !reads_only {
        // the body is read here (within the app's size limit) and handed on
        let body = match request.extract::<web::Bytes>().await {
            Ok(body) => body,
            Err(error) => {
                let status = error.as_response_error().status_code();
                let response = admin_message(
                    status,
                    "That form could not be read",
                    "It was too large or cut short. Nothing was changed.",
                );
                return Ok(request.into_response(response));
            }
        };
        let token = form_urlencoded::parse(&body)
            .find(|(name, _)| name == "csrf")
            .map(|(_, value)| value.into_owned());
        if !token.is_some_and(|t| same_text(&t, &session.csrf_token)) {
            tracing::warn!(
                staff = %session.staff.email,
                path = %request.path(),
                "admin form refused: CSRF token missing or wrong"
            );
            let response = admin_message(
                StatusCode::FORBIDDEN,
                "This form has expired",
                "Nothing was changed. Reload the page and try again.",
            );
            return Ok(request.into_response(response));
        }
        request.set_payload(actix_web::dev::Payload::from(body));
    }
    // what the route needs, from the one table the routes are made from:
    // no route without a permission, no permission without a check
    let Some(route) = route_for(request.method(), request.path()) else {
        let response = admin_message(
            StatusCode::NOT_FOUND,
            "No such page",
            "There is no admin page at this address.",
        );
        return Ok(request.into_response(response));
    };
    if !session.staff.role.may(route.permission) {
        let path = request.path().to_owned();
        tracing::warn!(
            staff = %session.staff.email,
            role = %session.staff.role,
            %path,
            needs = route.permission.as_str(),
            "admin request refused: the role does not allow it"
        );
        let recorded = async {
            let mut tx = shop.pool.begin().await?;
            audit::record(
                &mut tx,
                &session.staff,
                "refused",
                &path.chars().take(200).collect::<String>(),
                "refused",
                serde_json::json!({
                    "method": request.method().as_str(),
                    "needs": route.permission.as_str(),
                    "role": session.staff.role.as_str(),
                }),
            )
            .await?;
            tx.commit().await
        };
        if let Err(error) = recorded.await {
            tracing::error!(%error, "could not record a refused admin request");
        }
        let response = admin_message(
            StatusCode::FORBIDDEN,
            "Not for your role",
            &format!(
                "A {} account cannot do this. Nothing was changed; ask an owner if you need it.",
                session.staff.role.label().to_lowercase()
            ),
        );
        return Ok(request.into_response(response));
    }
    if session.must_enrol && !WHILE_ENROLLING.contains(&route.path) {
        // the owner requires a second factor of this role: nothing else
        // until it has one
        let response = if *request.method() == Method::GET {
            see_other("/admin/two-factor")
        } else {
            admin_message(
                StatusCode::FORBIDDEN,
                "Two-factor sign-in first",
                "The shop requires two-factor sign-in of accounts that can refund. Nothing was \
                 changed; set it up at /admin/two-factor first.",
            )
        };
        return Ok(request.into_response(response));
    }
    request.extensions_mut().insert(session);
    // handlers answer their own errors; this fails only if actix itself does
    let mut response = next.call(request).await?.map_into_boxed_body();
    response.headers_mut().insert(
        header::CACHE_CONTROL,
        header::HeaderValue::from_static("no-store"),
    );
    Ok(response)
}

pub(super) fn unauthenticated(request: &HttpRequest) -> HttpResponse {
    let wants_page = request.method() == Method::GET
        && request
            .headers()
            .get(header::ACCEPT)
            .and_then(|v| v.to_str().ok())
            .is_some_and(|accept| accept.contains("text/html"));
    if wants_page {
        return see_other("/admin/login");
    }
    admin_message(
        StatusCode::UNAUTHORIZED,
        "Please log in",
        "This part of the shop is for staff. Nothing was changed.",
    )
}

/// The shop's redirect, never cached.
pub(super) fn see_other(location: &str) -> HttpResponse {
    let mut response = super::render::see_other(location);
    no_store(&mut response);
    response
}

/// The shop's rendering, never cached.
pub(super) fn render<T: Template>(status: StatusCode, page: &T) -> Result<HttpResponse, ShopError> {
    let mut response = super::render::render(status, page)?;
    no_store(&mut response);
    Ok(response)
}

pub(super) fn no_store(response: &mut HttpResponse) {
    response.headers_mut().insert(
        header::CACHE_CONTROL,
        header::HeaderValue::from_static("no-store"),
    );
}

#[derive(Template)]
#[template(path = "admin/message.html")]
pub(super) struct MessagePage<'a> {
    headline: &'a str,
    explanation: &'a str,
    next_href: &'a str,
    next_label: &'a str,
}

pub(super) fn admin_message(status: StatusCode, headline: &str, explanation: &str) -> HttpResponse {
    let page = MessagePage {
        headline,
        explanation,
        next_href: "/admin/login",
        next_label: "Staff login",
    };
    render(status, &page)
        .unwrap_or_else(|_| HttpResponse::build(status).body(explanation.to_owned()))
}

// ---- helpers the templates call ----

/// Templates hand helpers a value or a reference to one, depending on
/// where it came from; this takes either.
pub(super) trait Plain<T> {
    fn plain(&self) -> T;
}

macro_rules! plain {
    ($($t:ty),*) => {$(
        impl Plain<$t> for $t {
            fn plain(&self) -> $t {
                *self
            }
        }
        impl Plain<$t> for &$t {
            fn plain(&self) -> $t {
                **self
            }
        }
        impl Plain<$t> for &&$t {
            fn plain(&self) -> $t {
                ***self
            }
        }
    )*};
}
plain!(DateTime<Utc>, f64, i64, Uuid);

pub(super) fn age(seconds: impl Plain<f64>) -> String {
    let seconds = seconds.plain().max(0.0) as i64;
    match seconds {
        0..60 => format!("{seconds} s"),
        60..3600 => format!("{} min", seconds / 60),
        3600..86400 => format!("{} h {} min", seconds / 3600, seconds % 3600 / 60),
        _ => format!("{} d", seconds / 86400),
    }
}

pub(super) fn short(id: impl Plain<Uuid>) -> String {
    id.plain().to_string()[..8].to_owned()
}

pub(super) fn same(a: &str, b: &str) -> bool {
    a == b
}

pub(super) fn money(minor: impl Plain<i64>, currency: &str) -> String {
    crate::money::format(minor.plain(), currency)
}

// ---- login and logout ----

/// What every admin page's frame shows.
pub(super) struct Nav {
    email: String,
    csrf: String,
    /// The signed-in member's role: the links shown are those it may use.
    role: Role,
    flagged: i64,
    orphans: i64,
    notice: String,
    notice_kind: &'static str,
    /// The shop's zone, which every time on the admin is shown in.
    zone: crate::clock::ShopZone,
    /// Only enrolling is open to this session (the links would only lead
    /// back to it).
    enrolling: bool,
}

impl Nav {
    /// Whether the signed-in member may use pages that need `permission`
    /// (by its name in [`Permission::as_str`]), for the links the
    /// navigation shows.
    fn may(&self, permission: &str) -> bool {
        !self.enrolling
            && Permission::ALL
                .into_iter()
                .find(|p| p.as_str() == permission)
                .is_some_and(|p| self.role.may(p))
    }

    /// A moment, in the shop's zone ("2026-12-01 19:02:03 CET").
    fn clock(&self, at: impl Plain<DateTime<Utc>>) -> String {
        self.zone.stamp(at.plain())
    }

    /// When something happens, in the shop's zone ("Saturday 20 March,
    /// 19:30 CET").
    fn when(&self, at: impl Plain<DateTime<Utc>>) -> String {
        self.zone.long(at.plain())
    }

    /// The shop's zone, as the forms name it.
    fn zone_name(&self) -> &'static str {
        self.zone.name()
    }
}

pub(super) async fn nav(
    shop: &Shop,
    session: &Session,
    notice: &NoticeQuery,
) -> Result<Nav, ShopError> {
    let (notice, notice_kind) = notice.text();
    Ok(Nav {
        email: session.staff.email.clone(),
        csrf: session.csrf_token.clone(),
        role: session.staff.role,
        flagged: views::flagged_count(&shop.pool).await?,
        orphans: views::orphan_count(&shop.pool).await?,
        notice,
        notice_kind,
        zone: shop.zone,
        enrolling: session.must_enrol,
    })
}

/// After an action, the page it returns to says what happened. Only these
/// fixed words are shown; anything else in the query is ignored.
#[derive(Deserialize, Default)]
pub struct NoticeQuery {
    notice: Option<String>,
    requested: Option<i64>,
    committed: Option<i64>,
    lines: Option<i64>,
    left: Option<i64>,
    /// What publishing a schedule did.
    created: Option<i64>,
    updated: Option<i64>,
    withdrawn: Option<i64>,
    kept: Option<i64>,
}

impl NoticeQuery {
    fn text(&self) -> (String, &'static str) {
        let text = match self.notice.as_deref() {
            Some("capacity_updated") => "Capacity changed.".to_owned(),
            Some("capacity_refused") => format!(
                "Refused: {} units are held or sold, so the total cannot go below that (asked for {}). Nothing was changed.",
                self.committed.unwrap_or(0),
                self.requested.unwrap_or(0)
            ),
            Some("repaired") => "Counters recounted from the holds and corrected.".to_owned(),
            Some("no_drift") => "Counters already matched the holds; nothing to repair.".to_owned(),
            Some("released") => match self.lines {
                Some(n) if n > 1 => {
                    format!("Released, with the other {} lines of its purchase.", n - 1)
                }
                _ => "Released: the units are available again.".to_owned(),
            },
            Some("already_ended") => "This hold had already ended; nothing was changed.".to_owned(),
            Some("paid") => "Refused: this hold is paid for. Refund the order instead.".to_owned(),
            Some("refund_queued") => {
                "The refund will be tried on the worker's next pass.".to_owned()
            }
            Some("refund_done") => "That refund is already done; nothing was changed.".to_owned(),
            Some("staff_refund_queued") => "Refund queued: the units are off the order and the \
                 worker asks the provider on its next pass."
                .to_owned(),
            Some("staff_refund_whole") => "The whole order is being refunded: the worker asks \
                 the provider on its next pass."
                .to_owned(),
            Some("refund_not_paid") => {
                "Refused: only a paid order can be refunded here. Nothing was changed.".to_owned()
            }
            Some("refund_not_in_order") => {
                "Refused: the order has no such line (it may have changed). Nothing was changed."
                    .to_owned()
            }
            Some("refund_nothing_left") => {
                "Refused: everything on this order was refunded already.".to_owned()
            }
            Some("refund_too_many") => {
                "Refused: that is more units than are left to refund. Nothing was changed."
                    .to_owned()
            }
            Some("refund_redeemed") => "Refused: some of those codes were already used at the \
                 door or counter. Tick \"refund used codes\" to refund them anyway (it is \
                 recorded). Nothing was changed."
                .to_owned(),
            Some("staff_added") => {
                "Account added. Hand its first password over in person.".to_owned()
            }
            Some("staff_exists") => {
                "Refused: an account with that e-mail exists already. Nothing was changed."
                    .to_owned()
            }
            Some("role_changed") => {
                "Role changed; it applies from the account's next page.".to_owned()
            }
            Some("staff_disabled") => "Account disabled; its sessions have ended.".to_owned(),
            Some("staff_enabled") => "Account enabled; it can sign in again.".to_owned(),
            Some("staff_unchanged") => "It was so already; nothing was changed.".to_owned(),
            Some("last_owner") => "Refused: that is the shop's last owner. Make another account \
                 an owner first. Nothing was changed."
                .to_owned(),
            Some("two_factor_reset") => "Two-factor sign-in turned off for that account; its \
                 sessions have ended. It signs in with its password and sets it up again."
                .to_owned(),
            Some("settings_saved") => "Settings saved.".to_owned(),
            Some("enrol_first") => "Refused: set up two-factor sign-in for your own account \
                 first, so that requiring it does not shut you out. Nothing was changed."
                .to_owned(),
            Some("two_factor_wrong_code") => {
                "That code is not right, or was used already: type the next code your app \
                 shows. Nothing was changed."
                    .to_owned()
            }
            Some("two_factor_off") => "Two-factor sign-in is off for your account.".to_owned(),
            Some("two_factor_locked") => format!(
                "Refused: too many wrong codes. Try again in {} minutes. Nothing was changed.",
                crate::staff::LOCK_MINUTES
            ),
            Some("two_factor_required") => "Refused: the shop requires two-factor sign-in of \
                 your role. Nothing was changed."
                .to_owned(),
            Some("recovery_code_used") => format!(
                "You signed in with a recovery code; {} left. Make new ones below if you are \
                 running short.",
                self.left.unwrap_or(0)
            ),
            Some("event_created") => {
                "Event created. Add its tiers: it is on sale once it has one.".to_owned()
            }
            Some("event_saved") => "Event saved.".to_owned(),
            Some("tier_created") => "Tier added.".to_owned(),
            Some("tier_saved") => "Tier saved. A new price applies to checkouts started from \
                 now on; orders already started keep theirs."
                .to_owned(),
            Some("stock_created") => "Stock item created.".to_owned(),
            Some("stock_saved") => "Stock item saved. A new price applies to checkouts started \
                 from now on; orders already started keep theirs."
                .to_owned(),
            Some("schedule_saved") => format!(
                "Schedule saved and published: {} new slots, {} changed, {} withdrawn, {} kept as \
                 they were because they have orders.",
                self.created.unwrap_or(0),
                self.updated.unwrap_or(0),
                self.withdrawn.unwrap_or(0),
                self.kept.unwrap_or(0)
            ),
            Some("product_archived") => "Archived: it is no longer in the shop. Its orders and \
                 codes are kept."
                .to_owned(),
            Some("collection_archived") => "Archived, with everything on sale in it: no longer \
                 in the shop. Its orders and codes are kept."
                .to_owned(),
            Some("voucher_created") => "Voucher created; shoppers can use it now.".to_owned(),
            Some("voucher_archived") => "Voucher archived: no checkout can start with it again; \
                 uses already held run their course."
                .to_owned(),
            Some("waitlist_removed") => "Entry removed from the waiting list.".to_owned(),
            Some("waitlist_rules") => {
                "Saved: the line's rules apply from its next handover.".to_owned()
            }
            Some("queue_on") => "Queue on: its commitment is published, and its units wait \
                 for the draw at the opening."
                .to_owned(),
            Some("api_key_revoked") => "Key revoked: it signs nothing from now on.".to_owned(),
            Some("webhook_enabled") => "Endpoint enabled: new events go to it again. Replay \
                 what it missed below."
                .to_owned(),
            Some("webhook_disabled") => "Endpoint disabled: nothing is sent to it until it is \
                 enabled."
                .to_owned(),
            Some("webhook_replayed") => format!(
                "{} deliveries queued again, with their own webhook-id: the worker sends them on \
                 its next pass.",
                self.committed.unwrap_or(0)
            ),
            Some("must_enrol") => "The shop requires two-factor sign-in of accounts that can \
                 refund: set it up to go on."
                .to_owned(),
            _ => String::new(),
        };
        let kind = match self.notice.as_deref() {
            Some(
                "capacity_refused"
                | "paid"
                | "refund_not_paid"
                | "refund_nothing_left"
                | "refund_too_many"
                | "refund_redeemed"
                | "staff_exists"
                | "last_owner"
                | "enrol_first"
                | "two_factor_wrong_code"
                | "two_factor_locked"
                | "two_factor_required",
            ) => "refused",
            _ => "ok",
        };
        (text, kind)
    }
}

/// `GET /admin`.
pub(super) async fn home(session: web::ReqData<Session>) -> HttpResponse {
    see_other(start_page(session.staff.role))
}

/// Where a role's work starts: the page signing in leads to.
pub(super) fn start_page(role: Role) -> &'static str {
    match role {
        Role::Owner => "/admin/resources",
        Role::BoxOffice => "/admin/orders",
        Role::Door => "/admin/redeem",
    }
}

/// A filter's value, if one was given.
pub(super) fn given(value: &Option<String>) -> Option<&str> {
    value.as_deref().map(str::trim).filter(|v| !v.is_empty())
}

pub(super) fn parse_id(value: &str, what: &str) -> Result<Uuid, ShopError> {
    Uuid::parse_str(value).map_err(|_| ShopError::not_found(&format!("no such {what}")))
}

/// The staff pages: the login outside the staff-only scope, everything else
/// behind [`require_staff`].
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
    handler: fn() -> actix_web::Route,
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
    route!(Post "/orders/{id}/refund", Refunds => orders::refund_order),
    route!(Post "/orders/{order}/jobs/{job}/retry", Refunds => orders::retry_refund),
    route!(Get "/redeem", Redeem => redeem::redeem_page),
    route!(Post "/redeem", Redeem => redeem::redeem),
    route!(Get "/exports", Exports => exports::exports_page),
    route!(Get "/exports/orders.csv", Exports => exports::orders_csv),
    route!(Get "/exports/attendees.csv", Exports => exports::attendees_csv),
    route!(Get "/door-list", DoorList => exports::door_list),
    route!(Get "/activity", Activity => records::activity),
    route!(Get "/payments/orphans", Engine => records::orphans),
    route!(Get "/staff", Staff => staff_accounts::staff_page),
    route!(Post "/staff", Staff => staff_accounts::add_account),
    route!(Post "/staff/{id}/role", Staff => staff_accounts::change_role),
    route!(Post "/staff/{id}/disable", Staff => staff_accounts::disable),
    route!(Post "/staff/{id}/enable", Staff => staff_accounts::enable),
    route!(Post "/staff/{id}/two-factor/reset", Staff => staff_accounts::reset_two_factor),
    route!(Get "/settings", Settings => staff_accounts::settings_page),
    route!(Post "/settings", Settings => staff_accounts::save_settings),
    route!(Get "/catalogue", Catalogue => catalogue::catalogue_page),
    route!(Get "/catalogue/events/new", Catalogue => catalogue::new_event),
    route!(Post "/catalogue/events", Catalogue => catalogue::create_event),
    route!(Get "/catalogue/events/{id}", Catalogue => catalogue::event_page),
    route!(Post "/catalogue/events/{id}", Catalogue => catalogue::save_event),
    route!(Get "/catalogue/events/{id}/tiers/new", Catalogue => catalogue::new_tier),
    route!(Post "/catalogue/events/{id}/tiers", Catalogue => catalogue::create_tier),
    route!(Get "/catalogue/events/{id}/tiers/{tier}", Catalogue => catalogue::tier_page),
    route!(Post "/catalogue/events/{id}/tiers/{tier}", Catalogue => catalogue::save_tier),
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
    route!(Get "/vouchers", Vouchers => vouchers::vouchers_page),
    route!(Get "/vouchers/new", Vouchers => vouchers::new_voucher),
    route!(Post "/vouchers", Vouchers => vouchers::create_voucher),
    route!(Post "/vouchers/{code}/archive", Vouchers => vouchers::archive_voucher),
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

pub fn routes(config: &mut web::ServiceConfig) {
    let mut admin = web::scope("/admin").wrap(actix_web::middleware::from_fn(require_staff));
    for route in ROUTES {
        admin = admin.route(route.path, (route.handler)());
    }
    config
        .route("/static/redeem.js", web::get().to(redeem::redeem_script))
        .route("/admin/login", web::get().to(session::login_page))
        .route("/admin/login", web::post().to(session::login))
        .route("/admin/login/code", web::get().to(session::code_page))
        .route("/admin/login/code", web::post().to(session::code))
        .service(admin);
}
