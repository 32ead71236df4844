//! Every member's own two-factor sign-in: setting it up (the secret as
//! text, as an `otpauth://` address and as its QR code, confirmed by a
//! code from the app), the recovery codes shown once, new ones, turning
//! it off. Thin handlers over `staff::two_factor`.

use actix_web::http::StatusCode;
use actix_web::{HttpRequest, HttpResponse, web};
use askama::Template;
use chrono::{DateTime, Utc};
use serde::Deserialize;

use super::notices::NoticeQuery;
use super::pages::{Nav, nav, render, see_other};
use crate::configuration::Secret;
use crate::routes::ShopError;
use crate::staff::Session;
use crate::staff::two_factor::{self, Changed, Confirmed, Enrolment, RecoveryCodes, Status};
use crate::state::Shop;

#[derive(Template)]
#[template(path = "admin/two_factor.html")]
pub(super) struct TwoFactorPage {
    nav: Nav,
    /// Off, and nothing started.
    off: bool,
    enrolling: Option<Enrolment>,
    /// The enrolment's QR code as a `data:image/png;base64,…` address (the
    /// policy allows `data:` images; no other address ever serves it).
    qr_data_uri: Secret,
    on_since: Option<DateTime<Utc>>,
    recovery_codes_left: i64,
    /// Shown once, right after they were made.
    new_codes: Option<RecoveryCodes>,
    /// Whether the owner requires it of this member's role.
    required: bool,
    /// The session key is this process's own: the app's codes stop
    /// working when it restarts (recovery codes do not).
    ephemeral_key: bool,
}

async fn page(
    shop: &Shop,
    session: &Session,
    notice: &NoticeQuery,
    new_codes: Option<RecoveryCodes>,
) -> Result<TwoFactorPage, ShopError> {
    let status = two_factor::status(&shop.pool, &shop.session_key, &session.staff).await?;
    let required =
        two_factor::required_for_refunds(&shop.pool).await? && session.staff.role.refunds();
    let (off, enrolling, on_since, recovery_codes_left) = match status {
        Status::Off => (true, None, None, 0),
        Status::Enrolling(enrolment) => (false, Some(enrolment), None, 0),
        Status::On {
            since,
            recovery_codes_left,
        } => (false, None, Some(since), recovery_codes_left),
    };
    let qr_data_uri = match &enrolling {
        Some(enrolment) => qr_data_uri(&enrolment.uri)?,
        None => Secret::new(String::new()),
    };
    let must_enrol = NoticeQuery {
        notice: Some("must_enrol".to_owned()),
        ..NoticeQuery::default()
    };
    let notice = if session.must_enrol && notice.notice.is_none() {
        &must_enrol
    } else {
        notice
    };
    Ok(TwoFactorPage {
        nav: nav(shop, session, notice).await?,
        off,
        enrolling,
        qr_data_uri,
        on_since,
        recovery_codes_left,
        new_codes,
        required,
        ephemeral_key: shop.session_key.is_ephemeral(),
    })
}

/// The `otpauth://` address as a QR code, in a `data:` address.
fn qr_data_uri(uri: &Secret) -> Result<Secret, ShopError> {
    use base64::Engine;
    // the drawing's errors would repeat the address: say only that it failed
    let png = crate::qr::png(uri.expose()).map_err(|_| {
        ShopError::internal(anyhow::anyhow!("the enrolment QR code could not be drawn"))
    })?;
    Ok(Secret::new(format!(
        "data:image/png;base64,{}",
        base64::engine::general_purpose::STANDARD.encode(png)
    )))
}

/// `GET /admin/two-factor`: where the member's two-factor sign-in stands.
/// While enrolling it shows the secret; once on, never again.
pub async fn two_factor_page(
    shop: web::Data<Shop>,
    session: web::ReqData<Session>,
    notice: web::Query<NoticeQuery>,
) -> Result<HttpResponse, ShopError> {
    let page = page(&shop, &session, &notice, None).await?;
    render(StatusCode::OK, &page)
}

/// `POST /admin/two-factor/start`: a new secret to enrol with (a GET
/// never makes one: a link prefetcher changes nothing).
pub async fn start(
    shop: web::Data<Shop>,
    session: web::ReqData<Session>,
) -> Result<HttpResponse, ShopError> {
    two_factor::start_enrolment(&shop.pool, &shop.session_key, &session.staff).await?;
    Ok(see_other("/admin/two-factor"))
}

#[derive(Deserialize)]
pub struct CodeForm {
    #[serde(default)]
    code: String,
}

/// `POST /admin/two-factor/confirm`: a code from the app turns it on; the
/// answer shows the recovery codes, once.
pub async fn confirm(
    shop: web::Data<Shop>,
    session: web::ReqData<Session>,
    form: web::Form<CodeForm>,
) -> Result<HttpResponse, ShopError> {
    let code = Secret::new(form.into_inner().code);
    match two_factor::confirm(&shop.pool, &shop.session_key, &session.staff, &code).await? {
        Confirmed::On(codes) => {
            // from now on this session is one with a second factor
            let mut session = session.into_inner();
            session.two_factor = true;
            session.must_enrol = false;
            let page = page(&shop, &session, &NoticeQuery::default(), Some(codes)).await?;
            render(StatusCode::OK, &page)
        }
        Confirmed::WrongCode => Ok(see_other("/admin/two-factor?notice=two_factor_wrong_code")),
        Confirmed::NotEnrolling => Ok(see_other("/admin/two-factor")),
    }
}

/// `POST /admin/two-factor/recovery-codes`: ten new codes (the old ones
/// stop working), given a current code; shown once.
pub async fn new_recovery_codes(
    shop: web::Data<Shop>,
    session: web::ReqData<Session>,
    request: HttpRequest,
    form: web::Form<CodeForm>,
) -> Result<HttpResponse, ShopError> {
    let code = Secret::new(form.into_inner().code);
    let address = shop.fairness.address(&request);
    match two_factor::new_recovery_codes(
        &shop.pool,
        &shop.session_key,
        &session.staff,
        &address,
        &code,
    )
    .await?
    {
        Changed::Done(codes) => {
            let page = page(&shop, &session, &NoticeQuery::default(), Some(codes)).await?;
            render(StatusCode::OK, &page)
        }
        Changed::WrongCode => Ok(see_other("/admin/two-factor?notice=two_factor_wrong_code")),
        Changed::Required => Ok(see_other("/admin/two-factor?notice=two_factor_required")),
        Changed::Locked => Ok(see_other("/admin/two-factor?notice=two_factor_locked")),
    }
}

/// `POST /admin/two-factor/off`: given a current code, unless the owner
/// requires it of this member's role.
pub async fn turn_off(
    shop: web::Data<Shop>,
    session: web::ReqData<Session>,
    request: HttpRequest,
    form: web::Form<CodeForm>,
) -> Result<HttpResponse, ShopError> {
    let code = Secret::new(form.into_inner().code);
    let address = shop.fairness.address(&request);
    let outcome = two_factor::turn_off(
        &shop.pool,
        &shop.session_key,
        &session.staff,
        &address,
        &code,
    )
    .await?;
    Ok(see_other(match outcome {
        Changed::Done(()) => "/admin/two-factor?notice=two_factor_off",
        Changed::WrongCode => "/admin/two-factor?notice=two_factor_wrong_code",
        Changed::Required => "/admin/two-factor?notice=two_factor_required",
        Changed::Locked => "/admin/two-factor?notice=two_factor_locked",
    }))
}
