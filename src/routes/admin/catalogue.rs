//! The Catalogue pages: what the shop sells, and forms to create, change
//! and archive events with their tiers, pickup schedules and stock items.
//! Thin handlers: each reads its form into the domain's types (each field's
//! error beside its field), calls `staff::catalogue`, and answers with the
//! page again (400 for bad input, 409 when the engine or an existing id
//! refuses, nothing saved) or a redirect to the saved page.

use actix_web::http::StatusCode;
use actix_web::{HttpResponse, web};
use askama::Template;
use chrono::{NaiveTime, Utc};

use super::form::Form;
use super::{Nav, NoticeQuery, money, nav, render, see_other};
use crate::catalogue::ProductKind;
use crate::catalogue::edit::{
    CollectionEdit, CollectionKind, DEFAULT_MAX_PER_ORDER, ProductEdit, check_slug, slug,
};
use crate::catalogue::schedules::Schedule;
use crate::clock::ShopZone;
use crate::routes::ShopError;
use crate::staff::catalogue::{self, CollectionRow, ProductRow, Saved};
use crate::staff::{Session, StaffError};
use crate::state::Shop;

/// A path segment of an id, as the pages' links write it.
pub(super) fn segment(id: &str) -> String {
    let encoded: String = form_urlencoded::byte_serialize(id.as_bytes()).collect();
    encoded.replace('+', "%20")
}

/// The form's fields, as a browser sends them.
type Fields = web::Form<Vec<(String, String)>>;

/// The ISO weekdays, as the schedule form names them.
const WEEKDAYS: [(i32, &str); 7] = [
    (1, "Monday"),
    (2, "Tuesday"),
    (3, "Wednesday"),
    (4, "Thursday"),
    (5, "Friday"),
    (6, "Saturday"),
    (7, "Sunday"),
];

// ---- the list ----

#[derive(Template)]
#[template(path = "admin/catalogue.html")]
pub(super) struct CataloguePage {
    nav: Nav,
    collections: Vec<CollectionRow>,
}

impl CataloguePage {
    fn slots_summary(&self, products: &[ProductRow]) -> String {
        let first = products.iter().filter_map(|p| p.starts_at).min();
        let last = products.iter().filter_map(|p| p.starts_at).max();
        let held: i32 = products.iter().map(|p| p.held).sum();
        let sold: i32 = products.iter().map(|p| p.sold).sum();
        match (first, last) {
            (Some(first), Some(last)) => format!(
                "{} slots on sale, {} to {}; {held} held, {sold} sold",
                products.len(),
                self.nav.zone.short(first),
                self.nav.zone.short(last)
            ),
            _ => "No slots on sale yet.".to_owned(),
        }
    }
}

/// `GET /admin/catalogue`.
pub async fn catalogue_page(
    shop: web::Data<Shop>,
    session: web::ReqData<Session>,
    notice: web::Query<NoticeQuery>,
) -> Result<HttpResponse, ShopError> {
    let page = CataloguePage {
        nav: nav(&shop, &session, &notice).await?,
        collections: catalogue::collections(&shop.pool).await?,
    };
    render(StatusCode::OK, &page)
}

/// What a save came to, as the page answers it: a redirect when it was
/// done, the form again with what refused it otherwise.
enum Answer {
    Done(String),
    Again(StatusCode),
}

/// Bad input from the domain is shown on the form; anything else fails.
fn refused_by_domain(form: &mut Form, error: StaffError) -> Result<StatusCode, ShopError> {
    match error {
        StaffError::InvalidInput(message) => {
            form.fail("", message);
            Ok(StatusCode::BAD_REQUEST)
        }
        other => Err(other.into()),
    }
}

/// A save's outcome, said on the form (`id_field` is where a taken id is
/// shown) or as the page to go to.
fn after_save(
    form: &mut Form,
    saved: Result<Saved, StaffError>,
    id_field: &str,
    done: impl FnOnce(bool) -> String,
) -> Result<Answer, ShopError> {
    match saved {
        Ok(Saved::Done { created }) => Ok(Answer::Done(done(created))),
        Ok(Saved::CapacityRefused {
            requested,
            held,
            sold,
        }) => {
            form.fail(
                "capacity",
                format!(
                    "Refused: {held} are held and {sold} sold, so the capacity cannot go below {} \
                     (you asked for {requested}). Nothing was changed.",
                    held + sold
                ),
            );
            Ok(Answer::Again(StatusCode::CONFLICT))
        }
        Ok(Saved::Taken { id }) => {
            form.fail(
                id_field,
                format!(
                    "The id {id:?} belongs to something the shop has (or had: archived things \
                     keep their ids). Give another id or name. Nothing was changed."
                ),
            );
            Ok(Answer::Again(StatusCode::CONFLICT))
        }
        Ok(Saved::NotFound) => Err(ShopError::not_found("no such item in the catalogue")),
        Err(error) => Ok(Answer::Again(refused_by_domain(form, error)?)),
    }
}

/// The id a new thing gets: the one typed, or one made from its words.
fn new_id(form: &mut Form, words: &str, prefix: &str) -> String {
    let typed = form.value("id").trim().to_owned();
    let id = if typed.is_empty() {
        let made = slug(words, 90);
        if made.is_empty() {
            String::new()
        } else if prefix.is_empty() {
            made
        } else {
            format!("{prefix}-{made}")
        }
    } else {
        typed
    };
    if id.is_empty() {
        if form.ok() {
            form.fail(
                "id",
                "Give an id: the words have no letter or digit to make one from",
            );
        }
    } else if let Err(error) = check_slug("The id", &id, 100) {
        form.fail("id", error.0);
    }
    id
}

// ---- events ----

#[derive(Template)]
#[template(path = "admin/event.html")]
pub(super) struct EventPage {
    nav: Nav,
    form: Form,
    /// `None` for a new event.
    id: Option<String>,
    tiers: Vec<ProductRow>,
}

fn event_form(event: &CollectionEdit, zone: ShopZone) -> Form {
    let mut form = Form::default();
    form.set("id", &event.id);
    form.set("title", &event.title);
    form.set("lede", &event.lede);
    form.set(
        "starts_at",
        event.starts_at.map(|at| zone.typed(at)).unwrap_or_default(),
    );
    form.set(
        "doors_at",
        event.doors_at.map(|at| zone.typed(at)).unwrap_or_default(),
    );
    form.set("venue", &event.venue);
    form
}

/// The event a form describes; its errors on the form.
fn read_event(form: &mut Form, zone: ShopZone, id: Option<&str>) -> Option<CollectionEdit> {
    let title = form.text("title", "The title", 200, true);
    let lede = form.text("lede", "The lede", 1000, false);
    let venue = form.text("venue", "The venue", 200, false);
    let starts_at = form.moment("starts_at", "The date and time", zone, true);
    // the doors: a time on the event's day, or a moment of their own
    let doors_typed = form.value("doors_at").trim().to_owned();
    let doors_at = match (NaiveTime::parse_from_str(&doors_typed, "%H:%M"), starts_at) {
        (Ok(time), Some(starts)) => match zone.at(zone.local(starts).date_naive(), time) {
            Ok(at) => Some(at),
            Err(message) => {
                form.fail("doors_at", format!("The doors: {message}"));
                None
            }
        },
        (Ok(_), None) => None,
        (Err(_), _) => form.moment("doors_at", "The doors", zone, false),
    };
    if let (Some(doors), Some(starts)) = (doors_at, starts_at)
        && doors > starts
    {
        form.fail(
            "doors_at",
            "The doors open before the event starts, or at its start",
        );
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

/// `GET /admin/catalogue/events/new`.
pub async fn new_event(
    shop: web::Data<Shop>,
    session: web::ReqData<Session>,
) -> Result<HttpResponse, ShopError> {
    let page = EventPage {
        nav: nav(&shop, &session, &NoticeQuery::default()).await?,
        form: Form::default(),
        id: None,
        tiers: Vec::new(),
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
    let page = EventPage {
        nav: nav(&shop, &session, &notice).await?,
        form: event_form(&event, shop.zone),
        tiers: catalogue::products_of(&shop.pool, &event.id).await?,
        id: Some(event.id),
    };
    render(StatusCode::OK, &page)
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
    let status = match read_event(&mut form, shop.zone, id.as_deref()) {
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
    let tiers = match &id {
        Some(id) => catalogue::products_of(&shop.pool, id).await?,
        None => Vec::new(),
    };
    let page = EventPage {
        nav: nav(shop, session, &NoticeQuery::default()).await?,
        form,
        id,
        tiers,
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

// ---- tiers ----

#[derive(Template)]
#[template(path = "admin/tier.html")]
pub(super) struct TierPage {
    nav: Nav,
    form: Form,
    event: CollectionEdit,
    /// `None` for a new tier.
    tier: Option<ProductRow>,
    currency: String,
}

fn product_form(product: &ProductRow, zone: ShopZone) -> Form {
    let mut form = Form::default();
    form.set("id", &product.id);
    form.set("name", &product.name);
    form.set("description", &product.description);
    form.set("price", crate::money::typed(product.price_minor));
    form.set("capacity", product.total.to_string());
    form.set("max_per_order", product.max_per_order.to_string());
    form.set(
        "sale_opens_at",
        product
            .sale_opens_at
            .map(|at| zone.typed(at))
            .unwrap_or_default(),
    );
    form.set(
        "sale_closes_at",
        product
            .sale_closes_at
            .map(|at| zone.typed(at))
            .unwrap_or_default(),
    );
    if product.hidden {
        form.set("hidden", "on");
    }
    form
}

/// What a tier's or a stock item's form says of it (its id, collection and
/// moment are the caller's).
struct Sold {
    name: String,
    description: String,
    price_minor: i64,
    capacity: i64,
    max_per_order: i32,
    sale_opens_at: Option<chrono::DateTime<Utc>>,
    sale_closes_at: Option<chrono::DateTime<Utc>>,
    hidden: bool,
}

fn read_sold(form: &mut Form, zone: ShopZone, capacity_label: &str) -> Option<Sold> {
    let name = form.text("name", "The name", 200, true);
    let description = form.text("description", "The description", 5000, false);
    let price_minor = form.money("price", "The price");
    let capacity = form.whole("capacity", capacity_label, 0, 1_000_000);
    let max_per_order = form.whole("max_per_order", "The most per order", 1, 100);
    let sale_opens_at = form.moment("sale_opens_at", "The sale's opening", zone, false);
    let sale_closes_at = form.moment("sale_closes_at", "The sale's closing", zone, false);
    if let (Some(opens), Some(closes)) = (sale_opens_at, sale_closes_at)
        && opens >= closes
    {
        form.fail("sale_closes_at", "The sale closes after it opens");
    }
    let hidden = form.ticked("hidden");
    Some(Sold {
        name,
        description,
        price_minor: price_minor?,
        capacity: capacity?,
        max_per_order: i32::try_from(max_per_order?).ok()?,
        sale_opens_at,
        sale_closes_at,
        hidden,
    })
    .filter(|_| form.ok())
}

fn checked(form: &mut Form, product: ProductEdit) -> Option<ProductEdit> {
    match product.check() {
        Ok(_) => Some(product),
        Err(error) => {
            form.fail("", error.0);
            None
        }
    }
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
    let tier = tier_of(&shop, &event, &tier).await?;
    let page = TierPage {
        nav: nav(&shop, &session, &notice).await?,
        form: product_form(&tier, shop.zone),
        currency: tier.currency.clone(),
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
    let sold = read_sold(&mut form, shop.zone, "The capacity");
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

// ---- schedules ----

#[derive(Template)]
#[template(path = "admin/schedule.html")]
pub(super) struct SchedulePage {
    nav: Nav,
    form: Form,
    /// `None` for a new schedule.
    id: Option<String>,
    slots: Vec<ProductRow>,
    weekdays: [(i32, &'static str); 7],
    currency: String,
}

fn schedule_form(schedule: &Schedule) -> Form {
    let mut form = Form::default();
    form.set("id", &schedule.collection);
    form.set("title", &schedule.title);
    form.set("lede", &schedule.lede);
    form.set("name", &schedule.name);
    form.set("description", &schedule.description);
    form.set("price", crate::money::typed(schedule.price_minor));
    form.set("capacity", schedule.capacity.to_string());
    form.set("max_per_order", schedule.max_per_order.to_string());
    for day in &schedule.weekdays {
        form.add("weekday", day.to_string());
    }
    form.set("opens", schedule.opens.format("%H:%M").to_string());
    form.set("closes", schedule.closes.format("%H:%M").to_string());
    form.set("slot_minutes", schedule.slot_minutes.to_string());
    form.set("days_ahead", schedule.days_ahead.to_string());
    form.set(
        "closed_days",
        schedule
            .closed_days
            .iter()
            .map(|d| d.to_string())
            .collect::<Vec<_>>()
            .join(", "),
    );
    form
}

fn read_schedule(form: &mut Form, id: Option<&str>, currency: &str) -> Option<Schedule> {
    let title = form.text("title", "The title", 200, true);
    let lede = form.text("lede", "The lede", 1000, false);
    let name = form.text("name", "What a slot sells", 200, true);
    let description = form.text("description", "The description", 5000, false);
    let price_minor = form.money("price", "The price");
    let capacity = form.whole("capacity", "The capacity of a slot", 0, 1_000_000);
    let max_per_order = form.whole("max_per_order", "The most per order", 1, 100);
    let mut weekdays = Vec::new();
    for typed in form.all("weekday") {
        match typed.parse::<i32>() {
            Ok(day) if (1..=7).contains(&day) => {
                if !weekdays.contains(&day) {
                    weekdays.push(day);
                }
            }
            _ => weekdays.push(0),
        }
    }
    weekdays.sort();
    if weekdays.is_empty() {
        form.fail("weekdays", "Tick at least one weekday the counter is open");
    } else if weekdays.contains(&0) {
        form.fail("weekdays", "The weekdays are Monday to Sunday");
    }
    let opens = form.time("opens", "The opening time");
    let closes = form.time("closes", "The closing time");
    if let (Some(opens), Some(closes)) = (opens, closes)
        && opens >= closes
    {
        form.fail("closes", "The counter closes after it opens");
    }
    let slot_minutes = form.whole("slot_minutes", "A slot's length", 5, 720);
    let days_ahead = form.whole("days_ahead", "The days ahead", 0, 366);
    let closed_days = form.dates("closed_days", "The closed days");
    let collection = match id {
        Some(id) => id.to_owned(),
        None => new_id(form, &title, ""),
    };
    if !form.ok() {
        return None;
    }
    let schedule = Schedule {
        collection,
        title,
        lede,
        name,
        description,
        price_minor: price_minor?,
        currency: currency.to_owned(),
        capacity: i32::try_from(capacity?).ok()?,
        max_per_order: i32::try_from(max_per_order?).ok()?,
        weekdays,
        opens: opens?,
        closes: closes?,
        slot_minutes: i32::try_from(slot_minutes?).ok()?,
        days_ahead: i32::try_from(days_ahead?).ok()?,
        closed_days,
    };
    if let Err(error) = schedule.check() {
        form.fail("", error.0);
        return None;
    }
    Some(schedule)
}

/// `GET /admin/catalogue/schedules/new`.
pub async fn new_schedule(
    shop: web::Data<Shop>,
    session: web::ReqData<Session>,
) -> Result<HttpResponse, ShopError> {
    let mut form = Form::default();
    form.set("max_per_order", DEFAULT_MAX_PER_ORDER.to_string());
    form.set("opens", "08:00");
    form.set("closes", "12:00");
    form.set("slot_minutes", "30");
    form.set("days_ahead", "6");
    let page = SchedulePage {
        nav: nav(&shop, &session, &NoticeQuery::default()).await?,
        form,
        id: None,
        slots: Vec::new(),
        weekdays: WEEKDAYS,
        currency: catalogue::shop_currency(&shop.pool).await?,
    };
    render(StatusCode::OK, &page)
}

/// `GET /admin/catalogue/schedules/{id}`.
pub async fn schedule_page(
    shop: web::Data<Shop>,
    session: web::ReqData<Session>,
    id: web::Path<String>,
    notice: web::Query<NoticeQuery>,
) -> Result<HttpResponse, ShopError> {
    let schedule = catalogue::schedule(&shop.pool, &id)
        .await?
        .ok_or_else(|| ShopError::not_found("no such pickup schedule"))?;
    let page = SchedulePage {
        nav: nav(&shop, &session, &notice).await?,
        form: schedule_form(&schedule),
        slots: catalogue::products_of(&shop.pool, &schedule.collection).await?,
        currency: schedule.currency.clone(),
        id: Some(schedule.collection),
        weekdays: WEEKDAYS,
    };
    render(StatusCode::OK, &page)
}

async fn save_schedule_form(
    shop: &Shop,
    session: &Session,
    fields: Vec<(String, String)>,
    id: Option<String>,
) -> Result<HttpResponse, ShopError> {
    let currency = match &id {
        Some(id) => {
            catalogue::schedule(&shop.pool, id)
                .await?
                .ok_or_else(|| ShopError::not_found("no such pickup schedule"))?
                .currency
        }
        None => catalogue::shop_currency(&shop.pool).await?,
    };
    let mut form = Form::typed(fields);
    let status = match read_schedule(&mut form, id.as_deref(), &currency) {
        None => StatusCode::BAD_REQUEST,
        Some(schedule) => {
            let saved = catalogue::save_schedule(
                &shop.pool,
                &session.staff,
                &schedule,
                id.is_none(),
                shop.zone,
                Utc::now(),
            )
            .await;
            let (saved, published) = match saved {
                Ok((saved, published)) => (Ok(saved), published),
                Err(error) => (Err(error), Default::default()),
            };
            match after_save(&mut form, saved, "id", |_| {
                format!(
                    "/admin/catalogue/schedules/{}?notice=schedule_saved&created={}&updated={}\
                     &withdrawn={}&kept={}",
                    segment(&schedule.collection),
                    published.created,
                    published.updated,
                    published.withdrawn,
                    published.kept
                )
            })? {
                Answer::Done(to) => return Ok(see_other(&to)),
                Answer::Again(status) => status,
            }
        }
    };
    let slots = match &id {
        Some(id) => catalogue::products_of(&shop.pool, id).await?,
        None => Vec::new(),
    };
    let page = SchedulePage {
        nav: nav(shop, session, &NoticeQuery::default()).await?,
        form,
        id,
        slots,
        weekdays: WEEKDAYS,
        currency,
    };
    render(status, &page)
}

/// `POST /admin/catalogue/schedules`: a new pickup schedule, published.
pub async fn create_schedule(
    shop: web::Data<Shop>,
    session: web::ReqData<Session>,
    fields: Fields,
) -> Result<HttpResponse, ShopError> {
    save_schedule_form(&shop, &session, fields.into_inner(), None).await
}

/// `POST /admin/catalogue/schedules/{id}`: the schedule, published again.
pub async fn save_schedule(
    shop: web::Data<Shop>,
    session: web::ReqData<Session>,
    id: web::Path<String>,
    fields: Fields,
) -> Result<HttpResponse, ShopError> {
    save_schedule_form(&shop, &session, fields.into_inner(), Some(id.into_inner())).await
}

// ---- stock ----

#[derive(Template)]
#[template(path = "admin/stock.html")]
pub(super) struct StockPage {
    nav: Nav,
    form: Form,
    /// `None` for a new item.
    item: Option<ProductRow>,
    shelves: Vec<(String, String)>,
    currency: String,
}

/// `GET /admin/catalogue/stock/new`.
pub async fn new_stock(
    shop: web::Data<Shop>,
    session: web::ReqData<Session>,
) -> Result<HttpResponse, ShopError> {
    let shelves = catalogue::shelves(&shop.pool).await?;
    let mut form = Form::default();
    form.set("max_per_order", DEFAULT_MAX_PER_ORDER.to_string());
    if let Some((_, title)) = shelves.first() {
        form.set("shelf", title);
    }
    let page = StockPage {
        nav: nav(&shop, &session, &NoticeQuery::default()).await?,
        form,
        item: None,
        shelves,
        currency: catalogue::shop_currency(&shop.pool).await?,
    };
    render(StatusCode::OK, &page)
}

async fn stock_of(shop: &Shop, id: &str) -> Result<ProductRow, ShopError> {
    catalogue::product(&shop.pool, id, ProductKind::Stock)
        .await?
        .ok_or_else(|| ShopError::not_found("no such stock item"))
}

/// `GET /admin/catalogue/stock/{id}`.
pub async fn stock_page(
    shop: web::Data<Shop>,
    session: web::ReqData<Session>,
    id: web::Path<String>,
    notice: web::Query<NoticeQuery>,
) -> Result<HttpResponse, ShopError> {
    let item = stock_of(&shop, &id).await?;
    let shelves = catalogue::shelves(&shop.pool).await?;
    let mut form = product_form(&item, shop.zone);
    if let Some((_, title)) = shelves.iter().find(|(id, _)| *id == item.collection) {
        form.set("shelf", title);
    }
    let page = StockPage {
        nav: nav(&shop, &session, &notice).await?,
        form,
        currency: item.currency.clone(),
        item: Some(item),
        shelves,
    };
    render(StatusCode::OK, &page)
}

async fn save_stock_form(
    shop: &Shop,
    session: &Session,
    item: Option<ProductRow>,
    fields: Vec<(String, String)>,
) -> Result<HttpResponse, ShopError> {
    let mut form = Form::typed(fields);
    let currency = match &item {
        Some(item) => item.currency.clone(),
        None => catalogue::shop_currency(&shop.pool).await?,
    };
    let sold = read_sold(&mut form, shop.zone, "The quantity");
    let shelf_typed = form.text("shelf", "The shelf", 200, true);
    let shelf = if shelf_typed.is_empty() || shelf_typed.chars().count() > 200 {
        None
    } else {
        match catalogue::shelf_for(&shop.pool, &shelf_typed).await {
            Ok(shelf) => Some(shelf),
            Err(StaffError::InvalidInput(message)) => {
                form.fail("shelf", message);
                None
            }
            Err(other) => return Err(other.into()),
        }
    };
    let id = match &item {
        Some(item) => item.id.clone(),
        None => {
            let name = form.value("name").to_owned();
            new_id(&mut form, &name, "")
        }
    };
    let edit = match (sold, &shelf) {
        (Some(sold), Some(shelf)) if form.ok() => checked(
            &mut form,
            ProductEdit {
                id: id.clone(),
                collection: shelf.id.clone(),
                kind: ProductKind::Stock,
                name: sold.name,
                description: sold.description,
                price_minor: sold.price_minor,
                currency: currency.clone(),
                capacity: sold.capacity,
                starts_at: None,
                max_per_order: sold.max_per_order,
                sale_opens_at: sold.sale_opens_at,
                sale_closes_at: sold.sale_closes_at,
                hidden: sold.hidden,
                position: None,
            },
        ),
        _ => None,
    };
    let status = match (edit, shelf) {
        (Some(edit), Some(shelf)) => {
            let saved =
                catalogue::save_stock(&shop.pool, &session.staff, &edit, &shelf, item.is_none())
                    .await;
            match after_save(&mut form, saved, "id", |created| {
                format!(
                    "/admin/catalogue/stock/{}?notice={}",
                    segment(&edit.id),
                    if created {
                        "stock_created"
                    } else {
                        "stock_saved"
                    }
                )
            })? {
                Answer::Done(to) => return Ok(see_other(&to)),
                Answer::Again(status) => status,
            }
        }
        _ => StatusCode::BAD_REQUEST,
    };
    let page = StockPage {
        nav: nav(shop, session, &NoticeQuery::default()).await?,
        form,
        item,
        shelves: catalogue::shelves(&shop.pool).await?,
        currency,
    };
    render(status, &page)
}

/// `POST /admin/catalogue/stock`: a new stock item.
pub async fn create_stock(
    shop: web::Data<Shop>,
    session: web::ReqData<Session>,
    fields: Fields,
) -> Result<HttpResponse, ShopError> {
    save_stock_form(&shop, &session, None, fields.into_inner()).await
}

/// `POST /admin/catalogue/stock/{id}`.
pub async fn save_stock(
    shop: web::Data<Shop>,
    session: web::ReqData<Session>,
    id: web::Path<String>,
    fields: Fields,
) -> Result<HttpResponse, ShopError> {
    let item = stock_of(&shop, &id).await?;
    save_stock_form(&shop, &session, Some(item), fields.into_inner()).await
}

// ---- archiving ----

/// `POST /admin/catalogue/products/{id}/archive`: a tier or a stock item
/// off the shop; its orders and codes stay.
pub async fn archive_product(
    shop: web::Data<Shop>,
    session: web::ReqData<Session>,
    id: web::Path<String>,
) -> Result<HttpResponse, ShopError> {
    if catalogue::archive_product(&shop.pool, &session.staff, &id).await? {
        Ok(see_other("/admin/catalogue?notice=product_archived"))
    } else {
        Err(ShopError::not_found("no such product on sale"))
    }
}

/// `POST /admin/catalogue/collections/{id}/archive`: an event, a schedule
/// or a shelf, and everything on sale in it, off the shop.
pub async fn archive_collection(
    shop: web::Data<Shop>,
    session: web::ReqData<Session>,
    id: web::Path<String>,
) -> Result<HttpResponse, ShopError> {
    if catalogue::archive_collection(&shop.pool, &session.staff, &id).await? {
        Ok(see_other("/admin/catalogue?notice=collection_archived"))
    } else {
        Err(ShopError::not_found("no such collection in the shop"))
    }
}

/// What the pages call to show a price.
pub(super) fn price(product: &ProductRow) -> String {
    money(product.price_minor, &product.currency)
}
