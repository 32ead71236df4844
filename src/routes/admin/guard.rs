//! The guard in front of every `/admin` route but the login form and its
//! code step ([`require_staff`]): a signed cookie naming a live session of
//! an account not disabled; on every POST, that session's CSRF token in the
//! form; the route's permission for the member's role (a refusal is
//! recorded); and, where the owner requires a second factor the member
//! lacks, nothing but enrolling.

use actix_web::body::{BoxBody, MessageBody};
use actix_web::dev::{ServiceRequest, ServiceResponse};
use actix_web::http::{Method, StatusCode, header};
use actix_web::middleware::Next;
use actix_web::{HttpMessage, HttpRequest, HttpResponse, ResponseError, web};

use super::pages::{admin_message, see_other};
use super::route_table::route_for;
use super::session::STAFF_COOKIE;
use crate::audit;
use crate::payments::signature::same_text;
use crate::routes::ShopError;
use crate::staff::{self, Session};
use crate::state::Shop;

/// What a session that must enrol in two-factor sign-in may still ask for.
const WHILE_ENROLLING: [&str; 4] = [
    "/logout",
    "/two-factor",
    "/two-factor/start",
    "/two-factor/confirm",
];
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
    let session = match signed_in(&shop, &request).await {
        Ok(session) => session,
        Err(refused) => return Ok(request.into_response(refused)),
    };
    if let Err(refused) = form_checked(&mut request, &session).await {
        return Ok(request.into_response(refused));
    }
    if let Err(refused) = authorised(&shop, &request, &session).await {
        return Ok(request.into_response(refused));
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

/// The session the request's signed cookie names, if it is live.
async fn signed_in(shop: &Shop, request: &ServiceRequest) -> Result<Session, HttpResponse> {
    let session = match request
        .cookie(STAFF_COOKIE)
        .and_then(|c| shop.session_key.verify(c.value()).map(str::to_owned))
    {
        Some(id) => staff::session(&shop.pool, &id)
            .await
            .map_err(|error| ShopError::from(error).error_response())?,
        None => None,
    };
    session.ok_or_else(|| unauthenticated(request.request()))
}

/// A request that changes something carries the session's CSRF token in
/// its form. The body is read here (within the app's size limit) and
/// handed on.
async fn form_checked(request: &mut ServiceRequest, session: &Session) -> Result<(), HttpResponse> {
    let reads_only = matches!(
        *request.method(),
        Method::GET | Method::HEAD | Method::OPTIONS
    );
    if reads_only {
        return Ok(());
    }
    // an image upload (`super::images`) is the one larger form
    let upload = request
        .headers()
        .get(header::CONTENT_TYPE)
        .and_then(|value| value.to_str().ok())
        .and_then(super::images::boundary);
    let read = match &upload {
        Some(_) => upload_body(request).await,
        None => request.extract::<web::Bytes>().await,
    };
    let body = match read {
        Ok(body) => body,
        Err(error) => {
            let status = error.as_response_error().status_code();
            return Err(admin_message(
                status,
                "That form could not be read",
                "It was too large or cut short. Nothing was changed.",
            ));
        }
    };
    let token = match &upload {
        Some(boundary) => super::images::multipart_parts(&body, boundary)
            .into_iter()
            .find(|part| part.name == "csrf")
            .and_then(|part| String::from_utf8(part.body.to_vec()).ok()),
        None => form_urlencoded::parse(&body)
            .find(|(name, _)| name == "csrf")
            .map(|(_, value)| value.into_owned()),
    };
    if !token.is_some_and(|t| same_text(&t, &session.csrf_token)) {
        tracing::warn!(
            staff = %session.staff.email,
            path = %request.path(),
            "admin form refused: CSRF token missing or wrong"
        );
        return Err(admin_message(
            StatusCode::FORBIDDEN,
            "This form has expired",
            "Nothing was changed. Reload the page and try again.",
        ));
    }
    request.set_payload(actix_web::dev::Payload::from(body));
    Ok(())
}

/// An upload form's body, up to [`super::images::MAX_UPLOAD_BODY`].
async fn upload_body(request: &mut ServiceRequest) -> Result<web::Bytes, actix_web::Error> {
    use futures::StreamExt;
    let mut payload = request.take_payload();
    let mut body = web::BytesMut::new();
    while let Some(chunk) = payload.next().await {
        let chunk = chunk?;
        if body.len() + chunk.len() > super::images::MAX_UPLOAD_BODY {
            return Err(actix_web::error::PayloadError::Overflow.into());
        }
        body.extend_from_slice(&chunk);
    }
    Ok(body.freeze())
}

/// What the route needs, from the one table the routes are made from: no
/// route without a permission, no permission without a check. A role that
/// may not is refused and the refusal recorded; a session that must enrol
/// may only enrol.
async fn authorised(
    shop: &Shop,
    request: &ServiceRequest,
    session: &Session,
) -> Result<(), HttpResponse> {
    let Some(route) = route_for(request.method(), request.path()) else {
        return Err(admin_message(
            StatusCode::NOT_FOUND,
            "No such page",
            "There is no admin page at this address.",
        ));
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
        return Err(admin_message(
            StatusCode::FORBIDDEN,
            "Not for your role",
            &format!(
                "A {} account cannot do this. Nothing was changed; ask an owner if you need it.",
                session.staff.role.label().to_lowercase()
            ),
        ));
    }
    if session.must_enrol && !WHILE_ENROLLING.contains(&route.path) {
        // the owner requires a second factor of this role: nothing else
        // until it has one
        return Err(if *request.method() == Method::GET {
            see_other("/admin/two-factor")
        } else {
            admin_message(
                StatusCode::FORBIDDEN,
                "Two-factor sign-in first",
                "The shop requires two-factor sign-in of accounts that can refund. Nothing was \
                 changed; set it up at /admin/two-factor first.",
            )
        });
    }
    Ok(())
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
