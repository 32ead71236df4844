//! The staff admin (SPEC §6). One guard, [`require_staff`], stands in front
//! of every `/admin` route but the login form: a signed cookie naming a live
//! session, and on every POST that session's CSRF token in the form. Thin
//! handlers: parse, call `staff`, render.

use actix_web::body::{BoxBody, MessageBody};
use actix_web::cookie::{Cookie, SameSite, time::Duration as CookieAge};
use actix_web::dev::{ServiceRequest, ServiceResponse};
use actix_web::http::{Method, StatusCode, header};
use actix_web::middleware::Next;
use actix_web::{HttpMessage, HttpRequest, HttpResponse, ResponseError, web};
use askama::Template;
use chrono::{DateTime, Utc};
use serde::Deserialize;
use uuid::Uuid;

use super::ShopError;
use crate::checkout;
use crate::checkout::OrderState;
use crate::configuration::Secret;
use crate::inventory::{HoldEvent, HoldId, Inventory};
use crate::payments::signature::same_text;
use crate::staff::actions::{self, CapacityChanged, HoldReleased, RefundRetry};
use crate::staff::views::{self, HoldQuery, OrderQuery};
use crate::staff::{self, LoginOutcome, Session, StaffError};
use crate::state::Shop;

pub const STAFF_COOKIE: &str = "hf_staff";
const LOGIN_COOKIE: &str = "hf_login";
/// Rows a list page shows at most.
const LIST_LIMIT: i64 = 200;
const HOLD_STATES: [&str; 5] = [
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
    request.extensions_mut().insert(session);
    // handlers answer their own errors; this fails only if actix itself does
    let mut response = next.call(request).await?.map_into_boxed_body();
    response.headers_mut().insert(
        header::CACHE_CONTROL,
        header::HeaderValue::from_static("no-store"),
    );
    Ok(response)
}

fn unauthenticated(request: &HttpRequest) -> HttpResponse {
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
fn see_other(location: &str) -> HttpResponse {
    let mut response = super::render::see_other(location);
    no_store(&mut response);
    response
}

/// The shop's rendering, never cached.
fn render<T: Template>(status: StatusCode, page: &T) -> Result<HttpResponse, ShopError> {
    let mut response = super::render::render(status, page)?;
    no_store(&mut response);
    Ok(response)
}

fn no_store(response: &mut HttpResponse) {
    response.headers_mut().insert(
        header::CACHE_CONTROL,
        header::HeaderValue::from_static("no-store"),
    );
}

#[derive(Template)]
#[template(path = "admin/message.html")]
struct MessagePage<'a> {
    headline: &'a str,
    explanation: &'a str,
    next_href: &'a str,
    next_label: &'a str,
}

fn admin_message(status: StatusCode, headline: &str, explanation: &str) -> HttpResponse {
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
trait Plain<T> {
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

fn age(seconds: impl Plain<f64>) -> String {
    let seconds = seconds.plain().max(0.0) as i64;
    match seconds {
        0..60 => format!("{seconds} s"),
        60..3600 => format!("{} min", seconds / 60),
        3600..86400 => format!("{} h {} min", seconds / 3600, seconds % 3600 / 60),
        _ => format!("{} d", seconds / 86400),
    }
}

fn short(id: impl Plain<Uuid>) -> String {
    id.plain().to_string()[..8].to_owned()
}

fn same(a: &str, b: &str) -> bool {
    a == b
}

fn money(minor: impl Plain<i64>, currency: &str) -> String {
    crate::money::format(minor.plain(), currency)
}

// ---- login and logout ----

#[derive(Template)]
#[template(path = "admin/login.html")]
struct LoginPage<'a> {
    csrf: &'a str,
    error: &'a str,
    email: &'a str,
}

fn cookie<'c>(shop: &Shop, name: &'c str, value: String, path: &'c str) -> Cookie<'c> {
    Cookie::build(name, value)
        .path(path)
        .http_only(true)
        .same_site(SameSite::Strict)
        .secure(shop.secure_cookies())
        .finish()
}

/// The login form, with a fresh CSRF token in a signed cookie and the form.
fn login_form(
    shop: &Shop,
    status: StatusCode,
    error: &str,
    email: &str,
) -> Result<HttpResponse, ShopError> {
    let token = staff::random_token();
    let mut response = render(
        status,
        &LoginPage {
            csrf: &token,
            error,
            email,
        },
    )?;
    let mut login = cookie(
        shop,
        LOGIN_COOKIE,
        shop.session_key.sign(&token),
        "/admin/login",
    );
    login.set_max_age(CookieAge::hours(1));
    response
        .add_cookie(&login)
        .map_err(|e| ShopError::internal(e.into()))?;
    Ok(response)
}

/// `GET /admin/login`.
pub async fn login_page(
    shop: web::Data<Shop>,
    request: HttpRequest,
) -> Result<HttpResponse, ShopError> {
    if let Some(id) = request
        .cookie(STAFF_COOKIE)
        .and_then(|c| shop.session_key.verify(c.value()).map(str::to_owned))
        && staff::session(&shop.pool, &id).await?.is_some()
    {
        return Ok(see_other("/admin/resources"));
    }
    login_form(&shop, StatusCode::OK, "", "")
}

#[derive(Deserialize)]
pub struct LoginForm {
    #[serde(default)]
    email: String,
    #[serde(default)]
    password: String,
    #[serde(default)]
    csrf: String,
}

/// `POST /admin/login`: CSRF (signed cookie against the form), then the
/// throttled password check.
pub async fn login(
    shop: web::Data<Shop>,
    request: HttpRequest,
    form: web::Form<LoginForm>,
) -> Result<HttpResponse, ShopError> {
    let LoginForm {
        email,
        password,
        csrf,
    } = form.into_inner();
    let password = Secret::new(password);
    let expected = request
        .cookie(LOGIN_COOKIE)
        .and_then(|c| shop.session_key.verify(c.value()).map(str::to_owned));
    if !expected.is_some_and(|token| !csrf.is_empty() && same_text(&token, &csrf)) {
        return login_form(
            &shop,
            StatusCode::FORBIDDEN,
            "This login form had expired. Nothing was sent; please try again.",
            "",
        );
    }
    let typed: String = email.chars().take(254).collect();
    let address = shop.fairness.address(&request);
    match staff::log_in(&shop.pool, &typed, &address, &password).await? {
        LoginOutcome::SignedIn(session) => {
            tracing::info!(staff = %session.staff.email, "staff logged in");
            let mut signed_in = cookie(
                &shop,
                STAFF_COOKIE,
                shop.session_key.sign(&session.id),
                "/admin",
            );
            signed_in.set_max_age(CookieAge::hours(staff::SESSION_HOURS));
            let mut spent = cookie(&shop, LOGIN_COOKIE, String::new(), "/admin/login");
            spent.make_removal();
            Ok(HttpResponse::SeeOther()
                .insert_header((header::LOCATION, "/admin/resources"))
                .insert_header((header::CACHE_CONTROL, "no-store"))
                .cookie(signed_in)
                .cookie(spent)
                .finish())
        }
        LoginOutcome::Refused => login_form(
            &shop,
            StatusCode::UNAUTHORIZED,
            "That e-mail address and password do not match a staff account.",
            &typed,
        ),
        LoginOutcome::Locked { retry_after } => {
            let minutes = retry_after.as_secs().div_ceil(60).max(1);
            let mut response = login_form(
                &shop,
                StatusCode::TOO_MANY_REQUESTS,
                &format!("Too many failed logins. Try again in {minutes} minutes."),
                &typed,
            )?;
            response.headers_mut().insert(
                header::RETRY_AFTER,
                header::HeaderValue::from(retry_after.as_secs()),
            );
            Ok(response)
        }
    }
}

/// `POST /admin/logout`: ends the session row, so a copied cookie is
/// worthless too.
pub async fn logout(
    shop: web::Data<Shop>,
    session: web::ReqData<Session>,
) -> Result<HttpResponse, ShopError> {
    staff::end_session(&shop.pool, &session).await?;
    let mut gone = cookie(&shop, STAFF_COOKIE, String::new(), "/admin");
    gone.make_removal();
    Ok(HttpResponse::SeeOther()
        .insert_header((header::LOCATION, "/admin/login"))
        .cookie(gone)
        .finish())
}

// ---- the pages ----

/// What every admin page's frame shows.
struct Nav {
    email: String,
    csrf: String,
    flagged: i64,
    orphans: i64,
    notice: String,
    notice_kind: &'static str,
    /// The shop's zone, which every time on the admin is shown in.
    zone: crate::clock::ShopZone,
}

impl Nav {
    /// A moment, in the shop's zone ("2026-12-01 19:02:03 CET").
    fn clock(&self, at: impl Plain<DateTime<Utc>>) -> String {
        self.zone.stamp(at.plain())
    }
}

async fn nav(shop: &Shop, session: &Session, notice: &NoticeQuery) -> Result<Nav, ShopError> {
    let (notice, notice_kind) = notice.text();
    Ok(Nav {
        email: session.staff.email.clone(),
        csrf: session.csrf_token.clone(),
        flagged: views::flagged_count(&shop.pool).await?,
        orphans: views::orphan_count(&shop.pool).await?,
        notice,
        notice_kind,
        zone: shop.zone,
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
            _ => String::new(),
        };
        let kind = match self.notice.as_deref() {
            Some(
                "capacity_refused"
                | "paid"
                | "refund_not_paid"
                | "refund_nothing_left"
                | "refund_too_many"
                | "refund_redeemed",
            ) => "refused",
            _ => "ok",
        };
        (text, kind)
    }
}

/// `GET /admin`.
pub async fn home() -> HttpResponse {
    see_other("/admin/resources")
}

#[derive(Template)]
#[template(path = "admin/resources.html")]
struct ResourcesPage {
    nav: Nav,
    resources: Vec<views::ResourceRow>,
}

/// `GET /admin/resources`.
pub async fn resources(
    shop: web::Data<Shop>,
    session: web::ReqData<Session>,
    notice: web::Query<NoticeQuery>,
) -> Result<HttpResponse, ShopError> {
    let page = ResourcesPage {
        nav: nav(&shop, &session, &notice).await?,
        resources: views::resources(&shop.pool, None).await?,
    };
    render(StatusCode::OK, &page)
}

#[derive(Template)]
#[template(path = "admin/resource.html")]
struct ResourcePage {
    nav: Nav,
    r: views::ResourceRow,
}

/// `GET /admin/resources/{id}`.
pub async fn resource(
    shop: web::Data<Shop>,
    session: web::ReqData<Session>,
    id: web::Path<String>,
    notice: web::Query<NoticeQuery>,
) -> Result<HttpResponse, ShopError> {
    let r = views::resources(&shop.pool, Some(&id))
        .await?
        .into_iter()
        .next()
        .ok_or_else(|| ShopError::not_found("no such resource"))?;
    let page = ResourcePage {
        nav: nav(&shop, &session, &notice).await?,
        r,
    };
    render(StatusCode::OK, &page)
}

#[derive(Deserialize)]
pub struct CapacityForm {
    total: String,
}

fn resource_url(id: &str) -> String {
    let encoded: String = form_urlencoded::byte_serialize(id.as_bytes()).collect();
    format!("/admin/resources/{}", encoded.replace('+', "%20"))
}

/// `POST /admin/resources/{id}/capacity`.
pub async fn set_capacity(
    shop: web::Data<Shop>,
    session: web::ReqData<Session>,
    id: web::Path<String>,
    form: web::Form<CapacityForm>,
) -> Result<HttpResponse, ShopError> {
    let total: i64 = form
        .total
        .trim()
        .parse()
        .map_err(|_| ShopError::bad_request("the new total must be a whole number"))?;
    let back = resource_url(&id);
    match actions::set_capacity(&shop.pool, &session.staff, &id, total).await? {
        CapacityChanged::Updated { .. } => {
            Ok(see_other(&format!("{back}?notice=capacity_updated")))
        }
        CapacityChanged::BelowCommitted {
            counters,
            requested,
        } => Ok(see_other(&format!(
            "{back}?notice=capacity_refused&requested={requested}&committed={}",
            counters.held + counters.sold
        ))),
        CapacityChanged::NotFound => Err(ShopError::not_found("no such resource")),
    }
}

/// `POST /admin/resources/{id}/repair`.
pub async fn repair(
    shop: web::Data<Shop>,
    session: web::ReqData<Session>,
    id: web::Path<String>,
) -> Result<HttpResponse, ShopError> {
    let back = resource_url(&id);
    match actions::repair_resource(&shop.pool, &session.staff, &id).await? {
        Some(repair) if repair.repaired => Ok(see_other(&format!("{back}?notice=repaired"))),
        Some(_) => Ok(see_other(&format!("{back}?notice=no_drift"))),
        None => Err(ShopError::not_found("no such resource")),
    }
}

#[derive(Deserialize)]
pub struct HoldsFilter {
    resource: Option<String>,
    state: Option<String>,
    older_than: Option<String>,
}

#[derive(Template)]
#[template(path = "admin/holds.html")]
struct HoldsPage {
    nav: Nav,
    holds: Vec<views::HoldRow>,
    resource_ids: Vec<String>,
    states: Vec<&'static str>,
    filter_resource: String,
    filter_state: String,
    filter_age: String,
    limit: i64,
}

/// `GET /admin/holds?resource=&state=&older_than=` (minutes).
pub async fn holds(
    shop: web::Data<Shop>,
    session: web::ReqData<Session>,
    filter: web::Query<HoldsFilter>,
) -> Result<HttpResponse, ShopError> {
    let resource = given(&filter.resource).map(str::to_owned);
    let state = given(&filter.state).map(str::to_owned);
    if let Some(state) = &state
        && !HOLD_STATES.contains(&state.as_str())
    {
        return Err(ShopError::bad_request("unknown hold state"));
    }
    let older_than = match given(&filter.older_than) {
        Some(minutes) => Some(
            minutes
                .parse::<i64>()
                .ok()
                .filter(|m| (0..=100_000).contains(m))
                .ok_or_else(|| ShopError::bad_request("age must be 0 to 100000 minutes"))?,
        ),
        None => None,
    };
    let query = HoldQuery {
        resource: resource.clone(),
        state: state.clone(),
        older_than_minutes: older_than,
        limit: LIST_LIMIT,
    };
    let page = HoldsPage {
        nav: nav(&shop, &session, &NoticeQuery::default()).await?,
        holds: views::holds(&shop.pool, &query).await?,
        resource_ids: views::resources(&shop.pool, None)
            .await?
            .into_iter()
            .map(|r| r.resource_id)
            .collect(),
        states: HOLD_STATES.to_vec(),
        filter_resource: resource.unwrap_or_default(),
        filter_state: state.unwrap_or_default(),
        filter_age: older_than.map(|m| m.to_string()).unwrap_or_default(),
        limit: LIST_LIMIT,
    };
    render(StatusCode::OK, &page)
}

/// A filter's value, if one was given.
fn given(value: &Option<String>) -> Option<&str> {
    value.as_deref().map(str::trim).filter(|v| !v.is_empty())
}

fn parse_id(value: &str, what: &str) -> Result<Uuid, ShopError> {
    Uuid::parse_str(value).map_err(|_| ShopError::not_found(&format!("no such {what}")))
}

#[derive(Template)]
#[template(path = "admin/hold.html")]
struct HoldPage {
    nav: Nav,
    h: views::HoldRow,
    lines: Vec<views::HoldRow>,
    events: Vec<HoldEvent>,
}

/// `GET /admin/holds/{id}`: the hold, its purchase and its history.
pub async fn hold(
    shop: web::Data<Shop>,
    session: web::ReqData<Session>,
    id: web::Path<String>,
    notice: web::Query<NoticeQuery>,
) -> Result<HttpResponse, ShopError> {
    let id = parse_id(&id, "hold")?;
    let h = views::hold(&shop.pool, id)
        .await?
        .ok_or_else(|| ShopError::not_found("no such hold"))?;
    let lines = views::purchase_lines(&shop.pool, h.purchase_id).await?;
    let events = Inventory::new(shop.pool.clone())
        .events(HoldId(id))
        .await
        .map_err(|e| ShopError::internal(e.into()))?;
    let page = HoldPage {
        nav: nav(&shop, &session, &notice).await?,
        h,
        lines,
        events,
    };
    render(StatusCode::OK, &page)
}

/// `POST /admin/holds/{id}/release`.
pub async fn release_hold(
    shop: web::Data<Shop>,
    session: web::ReqData<Session>,
    id: web::Path<String>,
) -> Result<HttpResponse, ShopError> {
    let id = parse_id(&id, "hold")?;
    let back = format!("/admin/holds/{id}");
    match actions::release_hold(&shop.pool, &session.staff, id).await? {
        HoldReleased::Released { lines } => {
            Ok(see_other(&format!("{back}?notice=released&lines={lines}")))
        }
        HoldReleased::AlreadyEnded { .. } => Ok(see_other(&format!("{back}?notice=already_ended"))),
        HoldReleased::Paid => Ok(see_other(&format!("{back}?notice=paid"))),
        HoldReleased::NotFound => Err(ShopError::not_found("no such hold")),
    }
}

#[derive(Deserialize)]
pub struct OrdersFilter {
    state: Option<String>,
    flagged: Option<String>,
}

#[derive(Template)]
#[template(path = "admin/orders.html")]
struct OrdersPage {
    nav: Nav,
    orders: Vec<views::OrderRow>,
    states: Vec<&'static str>,
    filter_state: String,
    flagged_only: bool,
}

/// `GET /admin/orders?state=&flagged=1`.
pub async fn orders(
    shop: web::Data<Shop>,
    session: web::ReqData<Session>,
    filter: web::Query<OrdersFilter>,
) -> Result<HttpResponse, ShopError> {
    let state = match filter.state.as_deref().map(str::trim) {
        None | Some("") => None,
        Some(name) => Some(
            OrderState::parse(name).ok_or_else(|| ShopError::bad_request("unknown order state"))?,
        ),
    };
    let flagged_only = filter
        .flagged
        .as_deref()
        .is_some_and(|f| !f.is_empty() && f != "0");
    let query = OrderQuery {
        state,
        flagged_only,
        limit: LIST_LIMIT,
    };
    let page = OrdersPage {
        nav: nav(&shop, &session, &NoticeQuery::default()).await?,
        orders: views::orders(&shop.pool, &query).await?,
        states: OrderState::ALL.iter().map(|s| s.as_str()).collect(),
        filter_state: state.map(|s| s.as_str()).unwrap_or_default().to_owned(),
        flagged_only,
    };
    render(StatusCode::OK, &page)
}

#[derive(Template)]
#[template(path = "admin/order.html")]
struct OrderPage {
    nav: Nav,
    o: views::OrderRow,
    /// name, quantity, line total
    lines: Vec<(String, i32, String)>,
    refundable: Vec<views::RefundableLine>,
    /// The refund form's one-time key: a double submit is one refund.
    refund_key: String,
    codes: Vec<views::CodeRow>,
    refunds: Vec<views::StaffRefundRow>,
    holds: Vec<views::HoldRow>,
    payments: Vec<views::PaymentRefRow>,
    jobs: Vec<views::JobRow>,
}

/// `GET /admin/orders/{id}`.
pub async fn order(
    shop: web::Data<Shop>,
    session: web::ReqData<Session>,
    id: web::Path<String>,
    notice: web::Query<NoticeQuery>,
) -> Result<HttpResponse, ShopError> {
    let id = parse_id(&id, "order")?;
    let o = views::order(&shop.pool, id)
        .await?
        .ok_or_else(|| ShopError::not_found("no such order"))?;
    let lines = checkout::order_lines(&shop.pool, id)
        .await?
        .into_iter()
        .map(|l| {
            let total = crate::money::format(l.unit_price_minor * i64::from(l.qty), &o.currency);
            (l.name, l.qty, total)
        })
        .collect();
    let (holds, payments) = match o.hold_id {
        Some(purchase) => (
            views::purchase_lines(&shop.pool, purchase).await?,
            views::payment_refs(&shop.pool, purchase).await?,
        ),
        None => (Vec::new(), Vec::new()),
    };
    let page = OrderPage {
        nav: nav(&shop, &session, &notice).await?,
        jobs: views::order_jobs(&shop.pool, id).await?,
        refundable: views::refundable_lines(&shop.pool, id).await?,
        refund_key: checkout::codes::order_token(),
        codes: views::order_codes(&shop.pool, id).await?,
        refunds: views::staff_refunds(&shop.pool, id).await?,
        o,
        lines,
        holds,
        payments,
    };
    render(StatusCode::OK, &page)
}

/// `POST /admin/orders/{id}/refund`: fields `reason`, `restock`,
/// `override_redeemed` (checkboxes) and `units:<product id>` per line.
pub async fn refund_order(
    shop: web::Data<Shop>,
    session: web::ReqData<Session>,
    id: web::Path<String>,
    form: web::Form<Vec<(String, String)>>,
) -> Result<HttpResponse, ShopError> {
    use crate::staff::refunds::{self, RefundOutcome, RefundRequest};
    let id = parse_id(&id, "order")?;
    let field = |name: &str| {
        form.iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.as_str())
    };
    let mut units = Vec::new();
    for (name, value) in form.iter() {
        if let Some(product) = name.strip_prefix("units:") {
            let value = value.trim();
            let n: i32 = if value.is_empty() {
                0
            } else {
                value.parse().map_err(|_| {
                    ShopError::bad_request(
                        "units to refund are whole numbers; nothing was refunded",
                    )
                })?
            };
            units.push((product.to_owned(), n));
        }
    }
    if units.is_empty() {
        return Err(ShopError::bad_request(
            "say how many units of each line to refund; nothing was refunded",
        ));
    }
    let request = RefundRequest {
        order_id: id,
        units,
        reason: field("reason").unwrap_or("").to_owned(),
        restock: field("restock").is_some(),
        override_redeemed: field("override_redeemed").is_some(),
        by: session.staff.email.clone(),
        staff: Some(session.staff.clone()),
        key: field("refund_key").map(str::to_owned),
    };
    let back = format!("/admin/orders/{id}");
    let notice = match refunds::refund_order(&shop.pool, &request).await? {
        RefundOutcome::Queued { whole: true, .. } => "staff_refund_whole",
        RefundOutcome::Queued { .. } => "staff_refund_queued",
        RefundOutcome::NotPaid { .. } => "refund_not_paid",
        RefundOutcome::NothingLeft => "refund_nothing_left",
        RefundOutcome::TooMany { .. } => "refund_too_many",
        RefundOutcome::NotInOrder { .. } => "refund_not_in_order",
        RefundOutcome::Redeemed { .. } => "refund_redeemed",
        RefundOutcome::NotFound => return Err(ShopError::not_found("no such order")),
    };
    Ok(see_other(&format!("{back}?notice={notice}")))
}

/// `POST /admin/orders/{order}/jobs/{job}/retry`: a waiting refund, now.
pub async fn retry_refund(
    shop: web::Data<Shop>,
    session: web::ReqData<Session>,
    path: web::Path<(String, i64)>,
) -> Result<HttpResponse, ShopError> {
    let (order, job) = path.into_inner();
    let order = parse_id(&order, "order")?;
    let back = format!("/admin/orders/{order}");
    match actions::retry_refund(&shop.pool, &session.staff, order, job).await? {
        RefundRetry::Queued => Ok(see_other(&format!("{back}?notice=refund_queued"))),
        RefundRetry::AlreadyDone => Ok(see_other(&format!("{back}?notice=refund_done"))),
        RefundRetry::NotFound => Err(ShopError::not_found("no such refund job")),
    }
}

#[derive(Template)]
#[template(path = "admin/redeem.html")]
struct RedeemPage {
    nav: Nav,
    place: String,
    result: Option<RedeemResult>,
}

/// A redemption, as the page at the door shows it.
struct RedeemResult {
    code: String,
    outcome: &'static str,
    /// `ok` when the holder may go through.
    class: &'static str,
    headline: String,
    detail: String,
}

/// The redeem page may use the camera (every other page may not).
fn with_camera(mut response: HttpResponse) -> HttpResponse {
    response.headers_mut().insert(
        header::HeaderName::from_static("permissions-policy"),
        header::HeaderValue::from_static("camera=(self), microphone=(), geolocation=()"),
    );
    response
}

/// `GET /admin/redeem`.
pub async fn redeem_page(
    shop: web::Data<Shop>,
    session: web::ReqData<Session>,
) -> Result<HttpResponse, ShopError> {
    let page = RedeemPage {
        nav: nav(&shop, &session, &NoticeQuery::default()).await?,
        place: String::new(),
        result: None,
    };
    Ok(with_camera(render(StatusCode::OK, &page)?))
}

#[derive(Deserialize)]
pub struct RedeemForm {
    code: String,
    #[serde(default)]
    place: String,
}

/// `POST /admin/redeem`: one redemption, recorded with who and where (and
/// the attempt in the activity record, whatever came of it).
pub async fn redeem(
    shop: web::Data<Shop>,
    session: web::ReqData<Session>,
    form: web::Form<RedeemForm>,
) -> Result<HttpResponse, ShopError> {
    use crate::redemption::{self, Door, Outcome};
    let place = form.place.trim();
    if place.chars().count() > 100 {
        return Err(ShopError::bad_request(
            "the door or counter's name is at most 100 characters; nothing was redeemed",
        ));
    }
    let door = Door {
        by: &session.staff.email,
        place,
    };
    let mut tx = shop.pool.begin().await?;
    let redeemed = redemption::redeem(&mut *tx, &form.code, &door).await?;
    staff::record(
        &mut tx,
        &session.staff,
        "redeem",
        &redeemed.code.chars().take(64).collect::<String>(),
        redeemed.outcome.as_str(),
        serde_json::json!({ "place": place, "order": redeemed.order_id }),
    )
    .await?;
    tx.commit().await?;
    staff::log_action(
        &session.staff,
        "redeem",
        &redeemed.code,
        redeemed.outcome.as_str(),
    );
    let who = redeemed.customer_name.clone().unwrap_or_default();
    let what = redeemed.what.clone().unwrap_or_default();
    let for_whom = if who.is_empty() {
        what.clone()
    } else {
        format!("{what} for {who}")
    };
    let (status, headline, detail) = match &redeemed.outcome {
        Outcome::Admitted => (StatusCode::OK, "Admitted".to_owned(), for_whom),
        Outcome::Collected => (StatusCode::OK, "Collected".to_owned(), for_whom),
        Outcome::AlreadyUsed { at, by, place } => (
            StatusCode::CONFLICT,
            format!("Already used at {}", shop.zone.time(*at)),
            format!(
                "redeemed {} by {by}{}; {for_whom}",
                shop.zone.stamp(*at),
                if place.is_empty() {
                    String::new()
                } else {
                    format!(" at {place}")
                }
            ),
        ),
        Outcome::Refunded => (
            StatusCode::CONFLICT,
            "Refunded".to_owned(),
            format!("this code's unit was refunded and no longer admits anyone; {for_whom}"),
        ),
        Outcome::NotValid => (
            StatusCode::NOT_FOUND,
            "Not valid".to_owned(),
            "no paid order has this code".to_owned(),
        ),
    };
    let page = RedeemPage {
        nav: nav(&shop, &session, &NoticeQuery::default()).await?,
        place: place.to_owned(),
        result: Some(RedeemResult {
            code: redeemed.code.chars().take(64).collect(),
            outcome: redeemed.outcome.as_str(),
            class: if redeemed.outcome.lets_through() {
                "ok"
            } else {
                "refused"
            },
            headline,
            detail,
        }),
    };
    Ok(with_camera(render(status, &page)?))
}

/// `GET /static/redeem.js`: the redeem page's camera scanning.
pub async fn redeem_script() -> HttpResponse {
    HttpResponse::Ok()
        .content_type("text/javascript; charset=utf-8")
        .insert_header((header::CACHE_CONTROL, "public, max-age=3600"))
        .body(include_str!("../../static/redeem.js"))
}

#[derive(Template)]
#[template(path = "admin/orphans.html")]
struct OrphansPage {
    nav: Nav,
    payments: Vec<views::OrphanRow>,
}

/// `GET /admin/payments/orphans`: signed payments for pages Holdfast does
/// not know, kept so that no money is silently forgotten.
pub async fn orphans(
    shop: web::Data<Shop>,
    session: web::ReqData<Session>,
) -> Result<HttpResponse, ShopError> {
    let page = OrphansPage {
        nav: nav(&shop, &session, &NoticeQuery::default()).await?,
        payments: views::orphan_payments(&shop.pool, LIST_LIMIT).await?,
    };
    render(StatusCode::OK, &page)
}

#[derive(Template)]
#[template(path = "admin/activity.html")]
struct ActivityPage {
    nav: Nav,
    actions: Vec<views::ActionRow>,
}

/// `GET /admin/activity`: the record of staff actions.
pub async fn activity(
    shop: web::Data<Shop>,
    session: web::ReqData<Session>,
) -> Result<HttpResponse, ShopError> {
    let page = ActivityPage {
        nav: nav(&shop, &session, &NoticeQuery::default()).await?,
        actions: views::actions(&shop.pool, LIST_LIMIT).await?,
    };
    render(StatusCode::OK, &page)
}

/// The staff pages: the login outside the staff-only scope, everything else
/// behind [`require_staff`].
pub fn routes(config: &mut web::ServiceConfig) {
    config
        .route("/static/redeem.js", web::get().to(redeem_script))
        .route("/admin/login", web::get().to(login_page))
        .route("/admin/login", web::post().to(login))
        .service(
            web::scope("/admin")
                .wrap(actix_web::middleware::from_fn(require_staff))
                .route("", web::get().to(home))
                .route("/", web::get().to(home))
                .route("/logout", web::post().to(logout))
                .route("/resources", web::get().to(resources))
                .route("/resources/{id}", web::get().to(resource))
                .route("/resources/{id}/capacity", web::post().to(set_capacity))
                .route("/resources/{id}/repair", web::post().to(repair))
                .route("/holds", web::get().to(holds))
                .route("/holds/{id}", web::get().to(hold))
                .route("/holds/{id}/release", web::post().to(release_hold))
                .route("/orders", web::get().to(orders))
                .route("/orders/{id}", web::get().to(order))
                .route("/orders/{id}/refund", web::post().to(refund_order))
                .route(
                    "/orders/{order}/jobs/{job}/retry",
                    web::post().to(retry_refund),
                )
                .route("/redeem", web::get().to(redeem_page))
                .route("/redeem", web::post().to(redeem))
                .route("/activity", web::get().to(activity))
                .route("/payments/orphans", web::get().to(orphans)),
        );
}
