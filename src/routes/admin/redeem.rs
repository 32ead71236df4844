//! Redeeming codes at the door or the counter, each exactly once, each at
//! its own door: the page first chooses what the door checks (an event, a
//! day's pickup slots, some tiers: [`crate::redemption::door`]), then
//! scans, showing what it admitted of what it expects.

use actix_web::http::{StatusCode, header};
use actix_web::{HttpRequest, HttpResponse, web};
use askama::Template;

use super::notices::NoticeQuery;
use super::pages::{Nav, nav, render};
use super::picks::{self, PickGroup};
use crate::audit;
use crate::redemption::door::{self, Checked, Checks, Choices, Count};
use crate::retry::{Bound, retry};
use crate::routes::ShopError;
use crate::staff::Session;
use crate::state::Shop;

#[derive(Template)]
#[template(path = "admin/redeem.html")]
pub(super) struct RedeemPage {
    nav: Nav,
    place: String,
    /// What this door checks, once chosen.
    door: Option<DoorView>,
    /// What it may choose, until it has.
    choices: Choices,
    /// Its tiers, slots and items, grouped by event, day and shelf.
    tiers: Vec<PickGroup>,
    /// A choice that could not be used.
    refused: Option<String>,
    result: Option<RedeemResult>,
}

impl RedeemPage {
    /// The fields that carry what the door checks (none before it chose).
    fn door_fields(&self) -> &[(&'static str, String)] {
        self.door
            .as_ref()
            .map_or(&[], |door| door.fields.as_slice())
    }
}

/// The door, as its page shows it: what it checks, its fields and count.
pub(super) struct DoorView {
    title: String,
    fields: Vec<(&'static str, String)>,
    /// The same fields as a query string, for links back to this door.
    query: String,
    count: Count,
}

/// A redemption, as the page at the door shows it.
pub(super) struct RedeemResult {
    code: String,
    outcome: &'static str,
    /// `ok` when the holder may go through.
    class: &'static str,
    headline: String,
    detail: String,
    /// Another event's or day's code, and this member may admit it anyway.
    may_override: bool,
}

/// The redeem page may use the camera (every other page may not).
pub(super) fn with_camera(mut response: HttpResponse) -> HttpResponse {
    response.headers_mut().insert(
        header::HeaderName::from_static("permissions-policy"),
        header::HeaderValue::from_static("camera=(self), microphone=(), geolocation=()"),
    );
    response
}

/// What the door checks, read from its fields: the door, or words saying
/// why the choice cannot be used.
async fn door_of(
    shop: &Shop,
    fields: &[(String, String)],
) -> Result<Option<(Checks, Checked)>, String> {
    let pairs = fields.iter().map(|(n, v)| (n.as_str(), v.as_str()));
    let Some(checks) = Checks::from_fields(pairs).map_err(str::to_owned)? else {
        return Ok(None);
    };
    match checks.resolve(&shop.pool, shop.zone()).await {
        Ok(Some(checked)) => Ok(Some((checks, checked))),
        Ok(None) => Err("Nothing with codes is on that choice: choose again.".to_owned()),
        Err(error) => {
            tracing::error!(%error, "reading what a door checks");
            Err("That choice could not be read just now: choose again.".to_owned())
        }
    }
}

/// The page, for a door that has chosen (or not) what it checks.
async fn page(
    shop: &Shop,
    session: &Session,
    place: String,
    door: Option<(Checks, Checked)>,
    refused: Option<String>,
    result: Option<RedeemResult>,
) -> Result<RedeemPage, ShopError> {
    let door = match door {
        Some((checks, checked)) => {
            let fields = checks.fields();
            let query = form_urlencoded::Serializer::new(String::new())
                .extend_pairs(fields.iter().map(|(n, v)| (*n, v.as_str())))
                .finish();
            Some(DoorView {
                title: checked.title,
                fields,
                query,
                count: door::count(&shop.pool, &checked.products).await?,
            })
        }
        None => None,
    };
    let choices = if door.is_none() {
        door::choices(&shop.pool, shop.zone(), chrono::Utc::now()).await?
    } else {
        Choices::default()
    };
    let tiers = picks::grouped(
        choices
            .tiers
            .iter()
            .map(|(group, id, name)| (group.clone(), id.clone(), name.clone(), false)),
    );
    Ok(RedeemPage {
        nav: nav(shop, session, &NoticeQuery::default()).await?,
        place,
        door,
        choices,
        tiers,
        refused,
        result,
    })
}

/// `GET /admin/redeem`: choose what this door checks; with `?event=`,
/// `?day=` or `?tier=…` chosen, the door itself.
pub async fn redeem_page(
    shop: web::Data<Shop>,
    session: web::ReqData<Session>,
    request: HttpRequest,
) -> Result<HttpResponse, ShopError> {
    let fields: Vec<(String, String)> = form_urlencoded::parse(request.query_string().as_bytes())
        .into_owned()
        .collect();
    let place = field(&fields, "place");
    let (door, refused) = match door_of(&shop, &fields).await {
        Ok(door) => (door, None),
        Err(words) => (None, Some(words)),
    };
    let status = if refused.is_some() {
        StatusCode::BAD_REQUEST
    } else {
        StatusCode::OK
    };
    let page = page(&shop, &session, place, door, refused, None).await?;
    Ok(with_camera(render(status, &page)?))
}

/// A form's field, trimmed (empty when absent).
fn field(fields: &[(String, String)], name: &str) -> String {
    fields
        .iter()
        .find(|(n, _)| n == name)
        .map(|(_, v)| v.trim().to_owned())
        .unwrap_or_default()
}

/// `POST /admin/redeem`: one redemption at the door the form names (no
/// door: any code, as the command line), recorded with who and where (and
/// the attempt in the activity record, whatever came of it). `override`
/// admits another event's or day's code: box office and owners may, and
/// the record says so.
pub async fn redeem(
    shop: web::Data<Shop>,
    session: web::ReqData<Session>,
    body: web::Bytes,
) -> Result<HttpResponse, ShopError> {
    use crate::redemption::{self, Door};
    let fields: Vec<(String, String)> = form_urlencoded::parse(&body).into_owned().collect();
    let place = field(&fields, "place");
    if place.chars().count() > 100 {
        return Err(ShopError::bad_request(
            "the door or counter's name is at most 100 characters; nothing was redeemed",
        ));
    }
    let door_checks = match door_of(&shop, &fields).await {
        Ok(door) => door,
        Err(words) => {
            let page = page(&shop, &session, place, None, Some(words), None).await?;
            return Ok(with_camera(render(StatusCode::BAD_REQUEST, &page)?));
        }
    };
    let overrule = field(&fields, "override") == "1";
    let may_override = session.staff.role.overrides_door();
    if overrule && !may_override {
        return Err(ShopError::forbidden(
            "only the box office and owners may admit a code this door does not check; \
             nothing was redeemed",
        ));
    }
    let code = field(&fields, "code");
    let checks = door_checks
        .as_ref()
        .map(|(_, checked)| checked.products.as_slice());
    let door = Door {
        by: &session.staff.email,
        place: &place,
        checks,
        overrule,
        attempt: uuid::Uuid::new_v4(),
    };
    let door_title = door_checks
        .as_ref()
        .map(|(_, checked)| checked.title.clone());
    // the scan and its record together, run again whole while the
    // database is away (the same attempt is told what it did)
    let redeemed = retry("redeem", Bound::Shopper, || async {
        let mut tx = shop.pool.begin().await?;
        let redeemed = redemption::redeem(&mut *tx, &code, &door).await?;
        let made_for = redeemed
            .made_for
            .as_ref()
            .map(|made_for| made_for.describe(shop.zone()));
        audit::record(
            &mut tx,
            &session.staff,
            "redeem",
            &redeemed.code.chars().take(64).collect::<String>(),
            redeemed.outcome.as_str(),
            serde_json::json!({
                "place": place,
                "order": redeemed.order_id,
                "door": door_title,
                "for": made_for,
                "override": redeemed.overridden,
            }),
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
    let (status, verdict) = verdict(&shop, &redeemed, may_override);
    let page = page(&shop, &session, place, door_checks, None, Some(verdict)).await?;
    Ok(with_camera(render(status, &page)?))
}

/// What the door is told of a redemption.
fn verdict(
    shop: &Shop,
    redeemed: &crate::redemption::Redemption,
    may_override: bool,
) -> (StatusCode, RedeemResult) {
    use crate::redemption::Outcome;
    let who = redeemed.customer_name.clone().unwrap_or_default();
    let made_for = redeemed
        .made_for
        .as_ref()
        .map(|made_for| made_for.describe(shop.zone()))
        .unwrap_or_default();
    let what = redeemed.what.clone().unwrap_or_default();
    let for_whom = match (what.is_empty(), who.is_empty()) {
        (false, false) => format!("{what} for {who}"),
        (false, true) => what.clone(),
        _ => who.clone(),
    };
    let whose = if who.is_empty() {
        String::new()
    } else {
        format!(" — {who}")
    };
    let (status, headline, detail) = match &redeemed.outcome {
        Outcome::Redeemed { .. } if redeemed.overridden => (
            StatusCode::OK,
            format!("{} (override)", redeemed.outcome.headline()),
            format!("{for_whom}. For {made_for}, not this door: your override is recorded"),
        ),
        Outcome::Redeemed { .. } => (StatusCode::OK, redeemed.outcome.headline(), for_whom),
        Outcome::AlreadyUsed { at, by, place } => (
            StatusCode::CONFLICT,
            format!("Already used at {}", shop.zone().time(*at)),
            format!(
                "Redeemed {} by {by}{}; {for_whom}",
                shop.zone().stamp(*at),
                if place.is_empty() {
                    String::new()
                } else {
                    format!(" at {place}")
                }
            ),
        ),
        Outcome::NotThisDoor => (
            StatusCode::CONFLICT,
            "Not this door".to_owned(),
            format!("For {made_for}{whose}"),
        ),
        Outcome::Refunded => (
            StatusCode::CONFLICT,
            "Refunded".to_owned(),
            format!(
                "This code's unit was refunded and no longer admits anyone. It was for \
                 {made_for}{whose}"
            ),
        ),
        Outcome::Cancelled => (
            StatusCode::CONFLICT,
            "Cancelled".to_owned(),
            format!("Its guest cancelled it; it admits nobody. It was for {made_for}{whose}"),
        ),
        Outcome::NotPaid => (
            StatusCode::CONFLICT,
            "Not paid".to_owned(),
            format!("This code's order is not paid. It is for {made_for}{whose}"),
        ),
        Outcome::NotValid => (
            StatusCode::NOT_FOUND,
            "Not valid".to_owned(),
            "No paid order has this code".to_owned(),
        ),
    };
    let result = RedeemResult {
        code: redeemed.code.chars().take(64).collect(),
        outcome: redeemed.outcome.as_str(),
        class: if redeemed.outcome.lets_through() {
            "ok"
        } else {
            "refused"
        },
        headline,
        detail,
        may_override: may_override && redeemed.outcome == Outcome::NotThisDoor,
    };
    (status, result)
}

/// `GET /static/redeem.js`: the redeem page's camera scanning.
pub async fn redeem_script() -> HttpResponse {
    HttpResponse::Ok()
        .content_type("text/javascript; charset=utf-8")
        .insert_header((header::CACHE_CONTROL, "public, max-age=3600"))
        .body(include_str!("../../../static/redeem.js"))
}
