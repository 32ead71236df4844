//! Redeeming codes at the door or the counter, each exactly once.

use actix_web::http::{StatusCode, header};
use actix_web::{HttpResponse, web};
use askama::Template;
use serde::Deserialize;

use super::notices::NoticeQuery;
use super::pages::{Nav, nav, render};
use crate::audit;
use crate::retry::{Bound, retry};
use crate::routes::ShopError;
use crate::staff::Session;
use crate::state::Shop;

#[derive(Template)]
#[template(path = "admin/redeem.html")]
pub(super) struct RedeemPage {
    nav: Nav,
    place: String,
    result: Option<RedeemResult>,
}

/// A redemption, as the page at the door shows it.
pub(super) struct RedeemResult {
    code: String,
    outcome: &'static str,
    /// `ok` when the holder may go through.
    class: &'static str,
    headline: String,
    detail: String,
}

/// The redeem page may use the camera (every other page may not).
pub(super) fn with_camera(mut response: HttpResponse) -> HttpResponse {
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
        attempt: uuid::Uuid::new_v4(),
    };
    // the scan and its record together, run again whole while the
    // database is away (the same attempt is told what it did)
    let redeemed = retry("redeem", Bound::Shopper, || async {
        let mut tx = shop.pool.begin().await?;
        let redeemed = redemption::redeem(&mut *tx, &form.code, &door).await?;
        audit::record(
            &mut tx,
            &session.staff,
            "redeem",
            &redeemed.code.chars().take(64).collect::<String>(),
            redeemed.outcome.as_str(),
            serde_json::json!({ "place": place, "order": redeemed.order_id }),
        )
        .await?;
        tx.commit().await?;
        Ok::<_, sqlx::Error>(redeemed)
    })
    .await?;
    audit::log_action(
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
        Outcome::Redeemed { .. } => (StatusCode::OK, redeemed.outcome.headline(), for_whom),
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
        .body(include_str!("../../../static/redeem.js"))
}
