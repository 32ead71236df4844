//! Signing in and out: the login form (throttled per e-mail and per
//! address), the second step's code when the account has two-factor
//! sign-in (throttled the same way), the session cookie, logout.

use actix_web::cookie::{Cookie, SameSite, time::Duration as CookieAge};
use actix_web::http::{StatusCode, header};
use actix_web::{HttpRequest, HttpResponse, web};
use askama::Template;
use serde::Deserialize;

use super::pages::{render, see_other};
use crate::configuration::Secret;
use crate::payments::signature::same_text;
use crate::routes::ShopError;
use crate::staff::two_factor::{self, CodeOutcome};
use crate::staff::{self, LoginOutcome, Session};
use crate::state::Shop;

/// The staff session's cookie: its id, signed.
pub const STAFF_COOKIE: &str = "hf_staff";
/// The login form's cookie (its CSRF token, before there is a session).
const LOGIN_COOKIE: &str = "hf_login";
/// A sign-in between its password and its second factor (signed; scoped
/// to the login pages).
const CODE_COOKIE: &str = "hf_login_code";

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
    let token = crate::keys::random_token();
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
        return Ok(see_other(after_sign_in(&session)));
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
            signed_in(&shop, &session, after_sign_in(&session))
        }
        LoginOutcome::NeedsCode { challenge } => {
            let mut waiting = cookie(
                &shop,
                CODE_COOKIE,
                shop.session_key.sign(challenge.expose()),
                "/admin/login",
            );
            waiting.set_max_age(CookieAge::minutes(staff::CHALLENGE_MINUTES));
            let mut spent = cookie(&shop, LOGIN_COOKIE, String::new(), "/admin/login");
            spent.make_removal();
            Ok(HttpResponse::SeeOther()
                .insert_header((header::LOCATION, "/admin/login/code"))
                .insert_header((header::CACHE_CONTROL, "no-store"))
                .cookie(waiting)
                .cookie(spent)
                .finish())
        }
        LoginOutcome::Refused => login_form(
            &shop,
            StatusCode::UNAUTHORIZED,
            "That e-mail address and password do not match a staff account.",
            &typed,
        ),
        LoginOutcome::Disabled => login_form(
            &shop,
            StatusCode::FORBIDDEN,
            "This account is disabled. Ask an owner if you need it again.",
            "",
        ),
        LoginOutcome::Locked { retry_after } => locked(&shop, retry_after, &typed),
    }
}

/// Where a new session starts: its role's first page, or enrolling when
/// the owner requires a second factor it does not have yet.
fn after_sign_in(session: &Session) -> &'static str {
    if session.must_enrol {
        "/admin/two-factor"
    } else {
        super::pages::start_page(session.staff.role)
    }
}

/// The answer that signs a browser in: the session cookie, the login's
/// and the code step's cookies spent.
fn signed_in(shop: &Shop, session: &Session, location: &str) -> Result<HttpResponse, ShopError> {
    let mut signed_in = cookie(
        shop,
        STAFF_COOKIE,
        shop.session_key.sign(&session.id),
        "/admin",
    );
    signed_in.set_max_age(CookieAge::hours(staff::SESSION_HOURS));
    let mut spent = cookie(shop, LOGIN_COOKIE, String::new(), "/admin/login");
    spent.make_removal();
    let mut spent_code = cookie(shop, CODE_COOKIE, String::new(), "/admin/login");
    spent_code.make_removal();
    Ok(HttpResponse::SeeOther()
        .insert_header((header::LOCATION, location))
        .insert_header((header::CACHE_CONTROL, "no-store"))
        .cookie(signed_in)
        .cookie(spent)
        .cookie(spent_code)
        .finish())
}

fn locked(
    shop: &Shop,
    retry_after: std::time::Duration,
    typed: &str,
) -> Result<HttpResponse, ShopError> {
    let minutes = retry_after.as_secs().div_ceil(60).max(1);
    let mut response = login_form(
        shop,
        StatusCode::TOO_MANY_REQUESTS,
        &format!("Too many failed logins. Try again in {minutes} minutes."),
        typed,
    )?;
    response.headers_mut().insert(
        header::RETRY_AFTER,
        header::HeaderValue::from(retry_after.as_secs()),
    );
    Ok(response)
}

#[derive(Template)]
#[template(path = "admin/login_code.html")]
pub(super) struct CodePage<'a> {
    csrf: &'a str,
    email: &'a str,
    error: &'a str,
}

/// The challenge id the browser's code cookie names, if its signature is ours.
fn challenge_id(shop: &Shop, request: &HttpRequest) -> Option<String> {
    request
        .cookie(CODE_COOKIE)
        .and_then(|c| shop.session_key.verify(c.value()).map(str::to_owned))
}

/// Back to the password, the code step's cookie spent.
fn start_over(shop: &Shop, error: &str) -> Result<HttpResponse, ShopError> {
    let mut response = login_form(shop, StatusCode::UNAUTHORIZED, error, "")?;
    let mut spent = cookie(shop, CODE_COOKIE, String::new(), "/admin/login");
    spent.make_removal();
    response
        .add_cookie(&spent)
        .map_err(|e| ShopError::internal(e.into()))?;
    Ok(response)
}

/// `GET /admin/login/code`: the second step's form, for a browser whose
/// password opened a challenge.
pub async fn code_page(
    shop: web::Data<Shop>,
    request: HttpRequest,
) -> Result<HttpResponse, ShopError> {
    let challenge = match challenge_id(&shop, &request) {
        Some(id) => two_factor::challenge(&shop.pool, &id).await?,
        None => None,
    };
    let Some(challenge) = challenge else {
        return Ok(see_other("/admin/login"));
    };
    render(
        StatusCode::OK,
        &CodePage {
            csrf: challenge.csrf_token.expose(),
            email: &challenge.email,
            error: "",
        },
    )
}

#[derive(Deserialize)]
pub struct CodeForm {
    #[serde(default)]
    code: String,
    #[serde(default)]
    csrf: String,
}

/// `POST /admin/login/code`: the code from the app or a recovery code,
/// counted in the login throttle before it is checked.
pub async fn code(
    shop: web::Data<Shop>,
    request: HttpRequest,
    form: web::Form<CodeForm>,
) -> Result<HttpResponse, ShopError> {
    let CodeForm { code, csrf } = form.into_inner();
    let code = Secret::new(code);
    let Some(id) = challenge_id(&shop, &request) else {
        return start_over(&shop, "That sign-in has ended. Please log in again.");
    };
    let address = shop.fairness.address(&request);
    let again =
        |status: StatusCode, error: &str, challenge: Option<two_factor::Challenge>| match challenge
        {
            Some(challenge) => render(
                status,
                &CodePage {
                    csrf: challenge.csrf_token.expose(),
                    email: &challenge.email,
                    error,
                },
            ),
            None => start_over(&shop, "That sign-in has ended. Please log in again."),
        };
    match two_factor::log_in_with_code(&shop.pool, &shop.session_key, &id, &csrf, &address, &code)
        .await?
    {
        CodeOutcome::SignedIn {
            session,
            recovery_codes_left,
        } => {
            tracing::info!(staff = %session.staff.email, "staff logged in with a second factor");
            let location = match recovery_codes_left {
                Some(left) => format!("/admin/two-factor?notice=recovery_code_used&left={left}"),
                None => after_sign_in(&session).to_owned(),
            };
            signed_in(&shop, &session, &location)
        }
        CodeOutcome::Refused => again(
            StatusCode::UNAUTHORIZED,
            "That code is not right, or was used already. Type the code your app shows now,              or one of your recovery codes.",
            two_factor::challenge(&shop.pool, &id).await?,
        ),
        CodeOutcome::Forged => again(
            StatusCode::FORBIDDEN,
            "This form had expired. Nothing was sent; please type the code again.",
            two_factor::challenge(&shop.pool, &id).await?,
        ),
        CodeOutcome::StartOver => start_over(
            &shop,
            "That sign-in has ended (too long, or too many wrong codes). Please log in again.",
        ),
        CodeOutcome::Locked { retry_after } => {
            let mut response = locked(&shop, retry_after, "")?;
            let mut spent = cookie(&shop, CODE_COOKIE, String::new(), "/admin/login");
            spent.make_removal();
            response
                .add_cookie(&spent)
                .map_err(|e| ShopError::internal(e.into()))?;
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
