//! What the admin's pages share: rendering and redirecting (never cached),
//! the message page, the frame every page has ([`Nav`]: who is signed in,
//! what they may open, the shop's zone, the notice), the helpers templates
//! call, and reading ids and filters from a request.

use actix_web::HttpResponse;
use actix_web::http::StatusCode;
use actix_web::http::header;
use askama::Template;
use chrono::{DateTime, Utc};
use uuid::Uuid;

use super::notices::NoticeQuery;
use crate::routes::ShopError;
use crate::staff::roles::{Permission, Role};
use crate::staff::views::{self};
use crate::staff::{Session, StaffError};
use crate::state::Shop;

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

/// The shop's redirect, never cached.
pub(crate) fn see_other(location: &str) -> HttpResponse {
    let mut response = crate::routes::render::see_other(location);
    no_store(&mut response);
    response
}

/// The shop's rendering, never cached.
pub(crate) fn render<T: Template>(status: StatusCode, page: &T) -> Result<HttpResponse, ShopError> {
    let mut response = crate::routes::render::render(status, page)?;
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
    pub(super) headline: &'a str,
    pub(super) explanation: &'a str,
    pub(super) next_href: &'a str,
    pub(super) next_label: &'a str,
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

/// Templates hand helpers a value or a reference to one, depending on
/// where it came from; this takes either.
pub(crate) trait Plain<T> {
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

pub(crate) fn money(minor: impl Plain<i64>, currency: &str) -> String {
    crate::money::format(minor.plain(), currency)
}

/// What every admin page's frame shows.
pub(crate) struct Nav {
    pub(crate) email: String,
    pub(crate) csrf: String,
    /// The signed-in member's role: the links shown are those it may use.
    pub(crate) role: Role,
    pub(crate) flagged: i64,
    pub(crate) notice: String,
    pub(crate) notice_kind: &'static str,
    /// The shop's zone, which every time on the admin is shown in.
    pub(crate) zone: crate::clock::ShopZone,
    /// Only enrolling is open to this session (the links would only lead
    /// back to it).
    pub(crate) enrolling: bool,
    /// The menu's groups this member may open.
    pub(crate) menu: Vec<super::menu::MenuGroup>,
}

impl Nav {
    /// Whether the signed-in member may use pages that need `permission`
    /// (by its name in [`Permission::as_str`]), for the links the
    /// navigation shows.
    pub(crate) fn may(&self, permission: &str) -> bool {
        !self.enrolling
            && Permission::ALL
                .into_iter()
                .find(|p| p.as_str() == permission)
                .is_some_and(|p| self.role.may(p))
    }

    /// A moment, in the shop's zone ("2026-12-01 19:02:03 CET").
    pub(crate) fn clock(&self, at: impl Plain<DateTime<Utc>>) -> String {
        self.zone.stamp(at.plain())
    }

    /// When something happens, in the shop's zone ("Saturday 20 March,
    /// 19:30 CET").
    pub(crate) fn when(&self, at: impl Plain<DateTime<Utc>>) -> String {
        self.zone.long(at.plain())
    }

    /// The shop's zone, as the forms name it.
    pub(crate) fn zone_name(&self) -> &'static str {
        self.zone.name()
    }
}

pub(crate) async fn nav(
    shop: &Shop,
    session: &Session,
    notice: &NoticeQuery,
) -> Result<Nav, ShopError> {
    let (notice, notice_kind) = notice.text();
    let flagged = views::flagged_count(&shop.pool).await?;
    let orphans = views::orphan_count(&shop.pool).await?;
    let rooms: bool =
        sqlx::query_scalar("select exists (select 1 from dining_rooms where archived_at is null)")
            .fetch_one(&shop.pool)
            .await?;
    let role = session.staff.role;
    Ok(Nav {
        email: session.staff.email.clone(),
        csrf: session.csrf_token.clone(),
        role,
        flagged,
        notice,
        notice_kind,
        zone: shop.zone(),
        enrolling: session.must_enrol,
        menu: super::menu::menu(role, session.must_enrol, (flagged, orphans), rooms),
    })
}

/// Where a role's work starts: the page signing in leads to.
pub(super) fn start_page(role: Role) -> &'static str {
    match role {
        Role::Owner => "/admin",
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

/// `GET /static/admin.css`: the admin's own layout (the menu, tables in
/// their own box on a phone), over the shop's stylesheet.
pub(super) async fn stylesheet() -> HttpResponse {
    HttpResponse::Ok()
        .content_type("text/css; charset=utf-8")
        .insert_header((header::CACHE_CONTROL, "public, max-age=3600"))
        .body(include_str!("../../../static/admin.css"))
}

/// `GET /static/admin.js`: marks the page's own menu entry; the home page's
/// and the orders' live figures. Every page works without it.
pub(super) async fn script() -> HttpResponse {
    HttpResponse::Ok()
        .content_type("text/javascript; charset=utf-8")
        .insert_header((header::CACHE_CONTROL, "public, max-age=3600"))
        .body(include_str!("../../../static/admin.js"))
}
