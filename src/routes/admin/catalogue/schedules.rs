//! A schedule's pages: what its units sell, the weekdays and hours, a
//! unit's length, how far ahead units are published, closed days, and
//! which kind of unit it makes (of the kinds a schedule can make).

use actix_web::http::StatusCode;
use actix_web::{HttpResponse, web};
use askama::Template;
use chrono::Utc;

use super::{Answer, Fields, after_save, new_id, price, segment};
use crate::catalogue::ProductKind;
use crate::catalogue::edit::DEFAULT_MAX_PER_ORDER;
use crate::catalogue::schedules::Schedule;
use crate::routes::ShopError;
use crate::routes::admin::NoticeQuery;
use crate::routes::admin::form::Form;
use crate::routes::admin::pages::{Nav, nav, render, see_other};
use crate::staff::Session;
use crate::staff::catalogue::{self, ProductRow};
use crate::state::Shop;

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

#[derive(Template)]
#[template(path = "admin/schedule.html")]
pub(super) struct SchedulePage {
    nav: Nav,
    form: Form,
    /// `None` for a new schedule.
    id: Option<String>,
    /// Its slots on sale, a day at a time, in the shop's time.
    days: Vec<SlotDay>,
    weekdays: [(i32, &'static str); 7],
    /// The kinds a schedule can make: (stored name, what staff call them).
    kinds: Vec<(&'static str, String)>,
    currency: String,
    /// Draft or published, for a schedule that exists.
    publishing: Option<super::publishing::PublishBox>,
}

/// One day of a schedule's slots, as the admin's page shows it: the day,
/// what is left of it, and each slot with its time.
pub(super) struct SlotDay {
    /// "Saturday 5 December".
    label: String,
    /// "16 slots, 120 left".
    summary: String,
    /// (its time, the slot).
    slots: Vec<(String, ProductRow)>,
}

/// Slots grouped by their day in the shop's zone, in order; a slot without
/// a time goes under "Any day".
fn by_day(slots: Vec<ProductRow>, zone: crate::clock::ShopZone) -> Vec<SlotDay> {
    let mut days: Vec<SlotDay> = Vec::new();
    for slot in slots {
        let (label, time) = match slot.starts_at {
            Some(at) => (
                zone.local(at).format("%A %-d %B").to_string(),
                zone.time(at),
            ),
            None => ("Any day".to_owned(), String::new()),
        };
        match days.last_mut() {
            Some(day) if day.label == label => day.slots.push((time, slot)),
            _ => days.push(SlotDay {
                label,
                summary: String::new(),
                slots: vec![(time, slot)],
            }),
        }
    }
    for day in &mut days {
        let left: i32 = day.slots.iter().map(|(_, s)| s.available().max(0)).sum();
        let count = day.slots.len();
        day.summary = format!(
            "{count} {}, {left} left",
            if count == 1 { "slot" } else { "slots" }
        );
    }
    days
}

/// The kinds a schedule can make, as the form offers them.
fn kinds() -> Vec<(&'static str, String)> {
    ProductKind::made_by_schedules()
        .map(|kind| (kind.as_str(), format!("{}s", kind.sheet().noun)))
        .collect()
}

fn schedule_form(schedule: &Schedule) -> Form {
    let mut form = Form::default();
    form.set("id", &schedule.collection);
    form.set("kind", schedule.kind.as_str());
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
    let lede = form.text("lede", "The introduction", 1000, false);
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
    let slot_minutes = form.whole("slot_minutes", "A slot's length", 5, 1440);
    let kind = match form.value("kind").trim() {
        "" => Some(ProductKind::PickupSlot),
        typed => ProductKind::parse(typed).filter(|kind| kind.scheduled()),
    };
    if kind.is_none() {
        form.fail("kind", "Choose what the schedule makes from the list");
    }
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
        kind: kind?,
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
    form.set("kind", ProductKind::PickupSlot.as_str());
    let page = SchedulePage {
        nav: nav(&shop, &session, &NoticeQuery::default()).await?,
        form,
        id: None,
        days: Vec::new(),
        weekdays: WEEKDAYS,
        kinds: kinds(),
        currency: catalogue::shop_currency(&shop.pool).await?,
        publishing: None,
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
        days: by_day(
            catalogue::products_of(&shop.pool, &schedule.collection).await?,
            shop.zone(),
        ),
        currency: schedule.currency.clone(),
        publishing: super::publishing::publish_box(
            &shop,
            Some(crate::staff::publishing::Thing::Collection(
                &schedule.collection,
            )),
            "",
        )
        .await?,
        id: Some(schedule.collection),
        weekdays: WEEKDAYS,
        kinds: kinds(),
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
                shop.zone(),
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
    let thing = id
        .as_deref()
        .map(crate::staff::publishing::Thing::Collection);
    let page = SchedulePage {
        nav: nav(shop, session, &NoticeQuery::default()).await?,
        publishing: super::publishing::publish_box(shop, thing, "").await?,
        form,
        id,
        days: by_day(slots, shop.zone()),
        weekdays: WEEKDAYS,
        kinds: kinds(),
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
