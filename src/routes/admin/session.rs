//! Signing in and out: the login form (throttled per e-mail and per address), the session cookie, logout.

use actix_web::cookie::{Cookie, SameSite, time::Duration as CookieAge};
use actix_web::http::{StatusCode, header};
use actix_web::{HttpRequest, HttpResponse, web};
use askama::Template;
use serde::Deserialize;

use super::{LOGIN_COOKIE, STAFF_COOKIE, render, see_other};
use crate::configuration::Secret;
use crate::payments::signature::same_text;
use crate::routes::ShopError;
use crate::staff::{self, LoginOutcome, Session};
use crate::state::Shop;

#[derive(Template)]
#[template(path = "admin/login.html")]
pub(super) struct LoginPage<'a> {
    csrf: &'a str,
    error: &'a str,
    email: &'a str,
}

pub(super) fn cookie<'c>(shop: &Shop, name: &'c str, value: String, path: &'c str) -> Cookie<'c> {
    Cookie::build(name, value)
        .path(path)
        .http_only(true)
        .same_site(SameSite::Strict)
        .secure(shop.secure_cookies())
        .finish()
}

/// The login form, with a fresh CSRF token in a signed cookie and the form.
pub(super) fn login_form(
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
        && let Some(session) = staff::session(&shop.pool, &id).await?
    {
        return Ok(see_other(super::start_page(session.staff.role)));
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
                .insert_header((header::LOCATION, super::start_page(session.staff.role)))
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
