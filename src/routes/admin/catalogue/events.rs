//! An event's pages and its tiers' pages: the event's words, moment,
//! end, doors and venue (its tiers take its moment), and each tier's price,
//! capacity, most per order and sale window.

use actix_web::http::StatusCode;
use actix_web::{HttpResponse, web};
use askama::Template;
use chrono::NaiveTime;

use super::{Answer, Fields, after_save, checked, new_id, price, product_form, read_sold, segment};
use crate::catalogue::edit::{CollectionEdit, DEFAULT_MAX_PER_ORDER, ProductEdit};
use crate::catalogue::seats::admin::{self as seating, SectionLine};
use crate::catalogue::{CollectionKind, ProductKind};
use crate::clock::ShopZone;
use crate::routes::ShopError;
use crate::routes::admin::NoticeQuery;
use crate::routes::admin::form::Form;
use crate::routes::admin::images::ImageField;
use crate::routes::admin::pages::{Nav, nav, render, see_other};
use crate::staff::Session;
use crate::staff::catalogue::{self, ProductRow};
use crate::state::Shop;

#[derive(Template)]
#[template(path = "admin/event.html")]
pub(super) struct EventPage {
    nav: Nav,
    form: Form,
    /// `None` for a new event.
    id: Option<String>,
    tiers: Vec<ProductRow>,
    /// A seated event's sections, each linking to its plan page.
    sections: Vec<SectionLine>,
    /// Draft or published, for an event that exists.
    publishing: Option<super::publishing::PublishBox>,
    /// Its image's upload field (a saved event's).
    image: Option<ImageField>,
}

fn event_form(event: &CollectionEdit, zone: ShopZone) -> Form {
    let mut form = Form::default();
    form.set("id", &event.id);
    form.set("title", &event.title);
    form.set("lede", &event.lede);
    form.set(
        "starts_at",
        event
            .starts_at
            .map(|at| zone.picker(at))
            .unwrap_or_default(),
    );
    form.set(
        "doors_at",
        event
            .doors_at
            .map(|at| zone.clock_time(at))
            .unwrap_or_default(),
    );
    form.set(
        "ends_at",
        event.ends_at.map(|at| zone.picker(at)).unwrap_or_default(),
    );
    form.set("venue", &event.venue);
    form
}

/// The event a form describes; its errors on the form.
fn read_event(form: &mut Form, zone: ShopZone, id: Option<&str>) -> Option<CollectionEdit> {
    let title = form.text("title", "The title", 200, true);
    let lede = form.text("lede", "The introduction", 1000, false);
    let venue = form.text("venue", "The venue", 200, false);
    let starts_at = form.moment("starts_at", "The date and time", zone, true);
    let doors_at = near_start(form, "doors_at", "The doors", starts_at, zone, false);
    if let (Some(doors), Some(starts)) = (doors_at, starts_at)
        && doors > starts
    {
        form.fail(
            "doors_at",
            "The doors open before the event starts, or at its start",
        );
    }
    // an end at 01:00 after a start at 19:30 is the next night's
    let ends_at = near_start(form, "ends_at", "The end", starts_at, zone, true);
    if let (Some(ends), Some(starts)) = (ends_at, starts_at)
        && ends <= starts
    {
        form.fail("ends_at", "The event ends after it starts");
    }
    let id = match id {
        Some(id) => id.to_owned(),
        None => new_id(form, &title, ""),
    };
    if !form.ok() {
        return None;
    }
    let event = CollectionEdit {
        id,
        kind: CollectionKind::Event,
        title,
        lede,
        starts_at,
        ends_at,
        doors_at,
        venue,
        position: 0,
    };
    if let Err(error) = event.check() {
        form.fail("", error.0);
        return None;
    }
    Some(event)
}

/// A moment typed as a time on the event's day (`19:00`), or in full;
/// `None` when the field is empty or wrong (its error on the form). A
/// time before the start is the next day's when `after` says the moment
/// comes after the start (an end past midnight).
fn near_start(
    form: &mut Form,
    field: &str,
    label: &str,
    starts_at: Option<chrono::DateTime<chrono::Utc>>,
    zone: ShopZone,
    after: bool,
) -> Option<chrono::DateTime<chrono::Utc>> {
    let typed = form.value(field).trim().to_owned();
    match (NaiveTime::parse_from_str(&typed, "%H:%M"), starts_at) {
        (Ok(time), Some(starts)) => {
            let mut day = zone.local(starts).date_naive();
            if after && zone.at(day, time).is_ok_and(|at| at <= starts) {
                day = day.succ_opt()?;
            }
            match zone.at(day, time) {
                Ok(at) => Some(at),
                Err(message) => {
                    form.fail(field, format!("{label}: {message}"));
                    None
                }
            }
        }
        (Ok(_), None) => None,
        (Err(_), _) => form.moment(field, label, zone, false),
    }
}

/// `GET /admin/catalogue/events/new`.
pub async fn new_event(
    shop: web::Data<Shop>,
    session: web::ReqData<Session>,
) -> Result<HttpResponse, ShopError> {
    let page = EventPage {
        image: None,
        nav: nav(&shop, &session, &NoticeQuery::default()).await?,
        form: Form::default(),
        id: None,
        tiers: Vec::new(),
        sections: Vec::new(),
        publishing: None,
    };
    render(StatusCode::OK, &page)
}

/// `GET /admin/catalogue/events/{id}`.
pub async fn event_page(
    shop: web::Data<Shop>,
    session: web::ReqData<Session>,
    id: web::Path<String>,
    notice: web::Query<NoticeQuery>,
) -> Result<HttpResponse, ShopError> {
    let event = catalogue::collection(&shop.pool, &id, CollectionKind::Event)
        .await?
        .ok_or_else(|| ShopError::not_found("no such event"))?;
    let (tiers, sections) = tiers_and_sections(&shop, &event.id).await?;
    let page = EventPage {
        nav: nav(&shop, &session, &notice).await?,
        form: event_form(&event, shop.zone()),
        tiers,
        sections,
        publishing: super::publishing::publish_box(
            &shop,
            Some(crate::staff::publishing::Thing::Collection(&event.id)),
            "",
        )
        .await?,
        image: Some(
            ImageField::of(
                &shop,
                crate::images::Target::Collection(&event.id),
                &format!("/admin/catalogue/events/{}", event.id),
            )
            .await?,
        ),
        id: Some(event.id),
    };
    render(StatusCode::OK, &page)
}

/// The event's tiers, and its seated sections (each on a plan page of its
/// own, not a tier's page).
async fn tiers_and_sections(
    shop: &Shop,
    event: &str,
) -> Result<(Vec<ProductRow>, Vec<SectionLine>), ShopError> {
    let sections = seating::sections_of(&shop.pool, event).await?;
    let mut tiers = catalogue::products_of(&shop.pool, event).await?;
    tiers.retain(|t| !sections.iter().any(|s| s.id == t.id));
    Ok((tiers, sections))
}

async fn save_event_form(
    shop: &Shop,
    session: &Session,
    fields: Vec<(String, String)>,
    id: Option<String>,
) -> Result<HttpResponse, ShopError> {
    let mut form = Form::typed(fields);
    if let Some(id) = &id
        && catalogue::collection(&shop.pool, id, CollectionKind::Event)
            .await?
            .is_none()
    {
        return Err(ShopError::not_found("no such event"));
    }
    let status = match read_event(&mut form, shop.zone(), id.as_deref()) {
        None => StatusCode::BAD_REQUEST,
        Some(event) => {
            let saved =
                catalogue::save_event(&shop.pool, &session.staff, &event, id.is_none()).await;
            match after_save(&mut form, saved, "id", |created| {
                format!(
                    "/admin/catalogue/events/{}?notice={}",
                    segment(&event.id),
                    if created {
                        "event_created"
                    } else {
                        "event_saved"
                    }
                )
            })? {
                Answer::Done(to) => return Ok(see_other(&to)),
                Answer::Again(status) => status,
            }
        }
    };
    let (tiers, sections) = match &id {
        Some(id) => tiers_and_sections(shop, id).await?,
        None => (Vec::new(), Vec::new()),
    };
    let thing = id
        .as_deref()
        .map(crate::staff::publishing::Thing::Collection);
    let page = EventPage {
        image: None,
        nav: nav(shop, session, &NoticeQuery::default()).await?,
        publishing: super::publishing::publish_box(shop, thing, "").await?,
        form,
        id,
        tiers,
        sections,
    };
    render(status, &page)
}

/// `POST /admin/catalogue/events`: a new event.
pub async fn create_event(
    shop: web::Data<Shop>,
    session: web::ReqData<Session>,
    fields: Fields,
) -> Result<HttpResponse, ShopError> {
    save_event_form(&shop, &session, fields.into_inner(), None).await
}

/// `POST /admin/catalogue/events/{id}`: the event's words and moment (its
/// tiers' moment follows).
pub async fn save_event(
    shop: web::Data<Shop>,
    session: web::ReqData<Session>,
    id: web::Path<String>,
    fields: Fields,
) -> Result<HttpResponse, ShopError> {
    save_event_form(&shop, &session, fields.into_inner(), Some(id.into_inner())).await
}

#[derive(Template)]
#[template(path = "admin/tier.html")]
pub(super) struct TierPage {
    nav: Nav,
    form: Form,
    event: CollectionEdit,
    /// `None` for a new tier.
    tier: Option<ProductRow>,
    currency: String,
    /// Its image's upload field (a saved tier's).
    image: Option<ImageField>,
}

async fn event_of(shop: &Shop, id: &str) -> Result<CollectionEdit, ShopError> {
    catalogue::collection(&shop.pool, id, CollectionKind::Event)
        .await?
        .ok_or_else(|| ShopError::not_found("no such event"))
}

async fn tier_of(shop: &Shop, event: &CollectionEdit, tier: &str) -> Result<ProductRow, ShopError> {
    catalogue::product(&shop.pool, tier, ProductKind::Ticket)
        .await?
        .filter(|t| t.collection == event.id)
        .ok_or_else(|| ShopError::not_found("no such tier of this event"))
}

/// `GET /admin/catalogue/events/{id}/tiers/new`.
pub async fn new_tier(
    shop: web::Data<Shop>,
    session: web::ReqData<Session>,
    id: web::Path<String>,
) -> Result<HttpResponse, ShopError> {
    let event = event_of(&shop, &id).await?;
    let mut form = Form::default();
    form.set("max_per_order", DEFAULT_MAX_PER_ORDER.to_string());
    let page = TierPage {
        image: None,
        nav: nav(&shop, &session, &NoticeQuery::default()).await?,
        form,
        event,
        tier: None,
        currency: catalogue::shop_currency(&shop.pool).await?,
    };
    render(StatusCode::OK, &page)
}

/// `GET /admin/catalogue/events/{id}/tiers/{tier}`.
pub async fn tier_page(
    shop: web::Data<Shop>,
    session: web::ReqData<Session>,
    path: web::Path<(String, String)>,
    notice: web::Query<NoticeQuery>,
) -> Result<HttpResponse, ShopError> {
    let (id, tier) = path.into_inner();
    let event = event_of(&shop, &id).await?;
    // a seated section is listed with the tiers in the catalogue: its page
    // is its plan
    if seating::section(&shop.pool, &event.id, &tier)
        .await?
        .is_some()
    {
        return Ok(see_other(&format!(
            "/admin/catalogue/events/{}/sections/{}",
            segment(&event.id),
            segment(&tier)
        )));
    }
    let tier = tier_of(&shop, &event, &tier).await?;
    let page = TierPage {
        nav: nav(&shop, &session, &notice).await?,
        form: product_form(&tier, shop.zone()),
        currency: tier.currency.clone(),
        image: Some(
            ImageField::of(
                &shop,
                crate::images::Target::Product(&tier.id),
                &format!("/admin/catalogue/events/{}/tiers/{}", event.id, tier.id),
            )
            .await?,
        ),
        event,
        tier: Some(tier),
    };
    render(StatusCode::OK, &page)
}

async fn save_tier_form(
    shop: &Shop,
    session: &Session,
    event: CollectionEdit,
    tier: Option<ProductRow>,
    fields: Vec<(String, String)>,
) -> Result<HttpResponse, ShopError> {
    let mut form = Form::typed(fields);
    let currency = match &tier {
        Some(tier) => tier.currency.clone(),
        None => catalogue::shop_currency(&shop.pool).await?,
    };
    let sold = read_sold(&mut form, shop.zone(), "The capacity");
    let id = match &tier {
        Some(tier) => tier.id.clone(),
        None => {
            let name = form.value("name").to_owned();
            new_id(&mut form, &name, &event.id)
        }
    };
    let edit = sold.filter(|_| form.ok()).and_then(|sold| {
        checked(
            &mut form,
            ProductEdit {
                id: id.clone(),
                collection: event.id.clone(),
                kind: ProductKind::Ticket,
                name: sold.name,
                description: sold.description,
                price_minor: sold.price_minor,
                currency: currency.clone(),
                capacity: sold.capacity,
                starts_at: event.starts_at,
                ends_at: event.ends_at,
                max_per_order: sold.max_per_order,
                sale_opens_at: sold.sale_opens_at,
                sale_closes_at: sold.sale_closes_at,
                hidden: sold.hidden,
                position: None,
            },
        )
    });
    let status = match edit {
        None => StatusCode::BAD_REQUEST,
        Some(edit) => {
            let saved =
                catalogue::save_tier(&shop.pool, &session.staff, &edit, tier.is_none()).await;
            let back = format!("/admin/catalogue/events/{}", segment(&event.id));
            match after_save(&mut form, saved, "id", |created| {
                if created {
                    format!("{back}?notice=tier_created")
                } else {
                    format!("{back}?notice=tier_saved")
                }
            })? {
                Answer::Done(to) => return Ok(see_other(&to)),
                Answer::Again(status) => status,
            }
        }
    };
    let page = TierPage {
        image: None,
        nav: nav(shop, session, &NoticeQuery::default()).await?,
        form,
        event,
        tier,
        currency,
    };
    render(status, &page)
}

/// `POST /admin/catalogue/events/{id}/tiers`: a new tier.
pub async fn create_tier(
    shop: web::Data<Shop>,
    session: web::ReqData<Session>,
    id: web::Path<String>,
    fields: Fields,
) -> Result<HttpResponse, ShopError> {
    let event = event_of(&shop, &id).await?;
    save_tier_form(&shop, &session, event, None, fields.into_inner()).await
}

/// `POST /admin/catalogue/events/{id}/tiers/{tier}`.
pub async fn save_tier(
    shop: web::Data<Shop>,
    session: web::ReqData<Session>,
    path: web::Path<(String, String)>,
    fields: Fields,
) -> Result<HttpResponse, ShopError> {
    let (id, tier) = path.into_inner();
    let event = event_of(&shop, &id).await?;
    let tier = tier_of(&shop, &event, &tier).await?;
    save_tier_form(&shop, &session, event, Some(tier), fields.into_inner()).await
}
