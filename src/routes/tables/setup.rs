//! A dining room's set-up in the admin, made of fields (docs/admin.md,
//! "Dining rooms"): the room (its name, times' interval, pacing, how far
//! ahead and until when it takes bookings), its tables (seats, area,
//! the order they are offered in), the tables that may be joined, the
//! service periods on named weekdays with their deposit and cancel-by,
//! turns by party size and closed days with a date picker. A new room
//! (`/admin/dining/new`) and a room's set-up are the one page; a list's
//! lines come in the order sent ([`Form::lines`]), spare lines under them
//! and *Add a line* (`static/admin.js`) for more. Saved whole, checked
//! before anything is stored (`RoomSpec::check`, then the database); the
//! catalogue file stays the import and export of the same `RoomSpec`.

use actix_web::http::StatusCode;
use actix_web::{HttpResponse, web};
use askama::Template;
use chrono::Utc;

use super::room_fields::{JOIN, Line, PERIOD, TABLE, TURN, read, typed_lines};
use crate::audit;
use crate::catalogue::tables::times::{close_days, publish_window};
use crate::catalogue::tables::{self, RoomSpec, periods_in_use, read_room, save_room};
use crate::routes::ShopError;
use crate::routes::admin::NoticeQuery;
use crate::routes::admin::catalogue::{Fields, new_id_in};
use crate::routes::admin::form::Form;
use crate::routes::admin::pages::{Nav, nav, render, see_other};
use crate::staff::Session;
use crate::state::Shop;

/// The weekdays as the page names them, Monday (1) first.
pub(super) const WEEKDAYS: [(i32, &str); 7] = [
    (1, "Mon"),
    (2, "Tue"),
    (3, "Wed"),
    (4, "Thu"),
    (5, "Fri"),
    (6, "Sat"),
    (7, "Sun"),
];

/// The order tables are offered in, as the page names it (a room's
/// priority: the lower first).
const OFFERED: [(i32, &str); 5] = [
    (90, "Before the others"),
    (100, "As usual"),
    (110, "After the usual"),
    (120, "Late"),
    (150, "Last"),
];

/// The set-up's lists, a line each.
#[derive(Default)]
struct Lists {
    tables: Vec<Line>,
    joins: Vec<Line>,
    periods: Vec<Line>,
    turns: Vec<Line>,
    closed: Vec<String>,
}

#[derive(Template)]
#[template(path = "tables/setup.html")]
struct SetupPage {
    nav: Nav,
    /// `None`: a new room.
    room: Option<String>,
    form: Form,
    tables: Vec<Line>,
    joins: Vec<Line>,
    periods: Vec<Line>,
    turns: Vec<Line>,
    closed: Vec<String>,
    currency: String,
}

impl SetupPage {
    fn action(&self) -> String {
        match &self.room {
            Some(room) => format!("/admin/dining/{room}/setup"),
            None => "/admin/dining".into(),
        }
    }

    fn weekdays(&self) -> &'static [(i32, &'static str)] {
        &WEEKDAYS
    }

    /// The orders a table may be offered in, with a stored one the page
    /// has no words for kept as its number.
    fn offered(&self, line: &Line, name: &str) -> Vec<(String, String, bool)> {
        let chosen = line.value(name).trim().to_owned();
        let mut options: Vec<(String, String, bool)> = OFFERED
            .iter()
            .map(|(n, words)| (n.to_string(), (*words).to_owned(), chosen == n.to_string()))
            .collect();
        if !chosen.is_empty() && !options.iter().any(|(n, _, _)| *n == chosen) {
            options.push((chosen.clone(), format!("In order {chosen}"), true));
        }
        if chosen.is_empty()
            && let Some(usual) = options.iter_mut().find(|(n, _, _)| n == "100")
        {
            usual.2 = true;
        }
        options
    }
}

/// The page's fields from a room as it stands (or a new room's first
/// guesses).
fn stored(spec: &RoomSpec, zone: crate::clock::ShopZone) -> (Form, Lists) {
    let mut form = Form::default();
    form.set("name", &spec.name);
    form.set("description", &spec.description);
    form.set("interval", spec.interval_minutes.to_string());
    form.set("pacing", spec.pacing.to_string());
    form.set("days_ahead", spec.days_ahead.to_string());
    form.set("book_until", spec.book_until_minutes.to_string());
    form.set("largest_party", spec.largest_party.to_string());
    form.set("least_fill", spec.least_fill.to_string());
    if let Some(at) = spec.bookings_open_at {
        form.set("opens_at", zone.picker(at));
    }
    let tables = spec
        .tables
        .iter()
        .map(|t| {
            Line::of(vec![
                ("table_id", t.id.clone()),
                ("table_min", t.min_party.to_string()),
                ("table_max", t.max_party.to_string()),
                ("table_area", t.area.clone()),
                ("table_offered", t.priority.to_string()),
            ])
        })
        .collect();
    let joins = spec
        .joins
        .iter()
        .map(|j| {
            Line::of(vec![
                ("join_tables", j.tables.join(" + ")),
                ("join_min", j.min_party.to_string()),
                ("join_max", j.max_party.to_string()),
                ("join_offered", j.priority.to_string()),
            ])
        })
        .collect();
    let periods = spec
        .periods
        .iter()
        .map(|p| {
            let mut pairs = vec![("period_name", p.name.clone())];
            pairs.extend(p.weekdays.iter().map(|d| ("period_day", d.to_string())));
            pairs.extend([
                ("period_opens", p.opens.format("%H:%M").to_string()),
                ("period_last", p.last_seating.format("%H:%M").to_string()),
                (
                    "period_deposit",
                    if p.deposit_minor > 0 {
                        crate::money::typed(p.deposit_minor)
                    } else {
                        String::new()
                    },
                ),
                ("period_deposit_from", p.deposit_from_party.to_string()),
                ("period_cancel_hours", p.cancel_hours.to_string()),
            ]);
            Line::of(pairs)
        })
        .collect();
    let turns = spec
        .turns
        .iter()
        .map(|t| {
            Line::of(vec![
                ("turn_up_to", t.up_to_party.to_string()),
                ("turn_minutes", t.minutes.to_string()),
            ])
        })
        .collect();
    let closed = spec.closed_days.iter().map(|d| d.to_string()).collect();
    let lists = Lists {
        tables,
        joins,
        periods,
        turns,
        closed,
    };
    (form, lists)
}

/// The page, its lists' lines given, with spare lines under each.
#[allow(clippy::too_many_arguments)]
async fn page(
    shop: &Shop,
    session: &Session,
    notice: &NoticeQuery,
    room: Option<String>,
    form: Form,
    lists: Lists,
    currency: String,
) -> Result<SetupPage, ShopError> {
    let Lists {
        mut tables,
        mut joins,
        mut periods,
        mut turns,
        mut closed,
    } = lists;
    let spare = |lines: &mut Vec<Line>, names: &[&str], count: usize| {
        let blank = lines.iter().filter(|l| l.blank(names)).count();
        for _ in blank..count {
            lines.push(Line::of(Vec::new()));
        }
    };
    spare(&mut tables, &TABLE, 3);
    spare(&mut joins, &JOIN, 1);
    spare(&mut periods, &PERIOD, 1);
    spare(&mut turns, &TURN, 1);
    if !closed.iter().any(|d| d.is_empty()) {
        closed.push(String::new());
    }
    Ok(SetupPage {
        nav: nav(shop, session, notice).await?,
        room,
        form,
        tables,
        joins,
        periods,
        turns,
        closed,
        currency,
    })
}

/// `GET /admin/dining/{room}/setup`.
pub async fn setup_page(
    shop: web::Data<Shop>,
    session: web::ReqData<Session>,
    room: web::Path<String>,
    notice: web::Query<NoticeQuery>,
) -> Result<HttpResponse, ShopError> {
    let spec = read_room(&shop.pool, &room)
        .await?
        .ok_or_else(|| ShopError::not_found("no such dining room"))?;
    let (form, lists) = stored(&spec, shop.zone());
    let page = page(
        &shop,
        &session,
        &notice,
        Some(room.into_inner()),
        form,
        lists,
        spec.currency,
    )
    .await?;
    render(StatusCode::OK, &page)
}

/// `GET /admin/dining/new`: a room's set-up, empty but for the usual
/// first guesses.
pub async fn new_room(
    shop: web::Data<Shop>,
    session: web::ReqData<Session>,
    notice: web::Query<NoticeQuery>,
) -> Result<HttpResponse, ShopError> {
    let mut form = Form::default();
    for (name, value) in [
        ("interval", "15"),
        ("days_ahead", "30"),
        ("book_until", "60"),
        ("largest_party", "10"),
        ("least_fill", "0"),
    ] {
        form.set(name, value);
    }
    let currency = crate::catalogue::shop_currency(&shop.pool).await?;
    let lists = Lists::default();
    let page = page(&shop, &session, &notice, None, form, lists, currency).await?;
    render(StatusCode::OK, &page)
}

/// What a save of a room's set-up came to.
enum Stored {
    Saved,
    /// A new room's id is another collection's.
    Taken,
    /// Services left out that have times published.
    InUse(Vec<String>),
    /// The database refused it (its constraints are the last word).
    Refused,
}

/// The room written whole, or why not (nothing written). Its closed days'
/// times withdrawn and a new room's published after the commit; a failure
/// there is the worker's to finish on its next pass, and is logged.
async fn write_room(shop: &Shop, new: bool, spec: &RoomSpec) -> Result<Stored, ShopError> {
    if !new {
        let in_use = periods_in_use(&shop.pool, spec).await?;
        if !in_use.is_empty() {
            return Ok(Stored::InUse(in_use));
        }
    }
    let saved = if new {
        tables::create_room(&shop.pool, spec).await
    } else {
        save_room(&shop.pool, spec).await.map(|()| true)
    };
    match saved {
        Ok(true) => {}
        Ok(false) => return Ok(Stored::Taken),
        Err(sqlx::Error::Database(refused)) => {
            tracing::warn!(room = %spec.id, refused = %refused.message(), "set-up refused");
            return Ok(Stored::Refused);
        }
        Err(other) => return Err(other.into()),
    }
    if let Err(error) = close_days(&shop.pool, shop.zone(), &spec.id).await {
        tracing::warn!(room = %spec.id, %error, "closed days not withdrawn yet");
    }
    if new && let Err(error) = publish_window(&shop.pool, shop.zone(), Utc::now()).await {
        tracing::warn!(room = %spec.id, %error, "a new room's times not published yet");
    }
    Ok(Stored::Saved)
}

/// Save what the fields describe, or the page again with what is wrong.
async fn save(
    shop: &Shop,
    session: &Session,
    room: Option<String>,
    mut form: Form,
) -> Result<HttpResponse, ShopError> {
    let (id, currency) = match &room {
        Some(room) => {
            let current = read_room(&shop.pool, room)
                .await?
                .ok_or_else(|| ShopError::not_found("no such dining room"))?;
            (current.id, current.currency)
        }
        None => {
            let name = form.value("name").to_owned();
            let id = new_id_in(&mut form, "id", &name, "");
            (id, crate::catalogue::shop_currency(&shop.pool).await?)
        }
    };
    if room.is_none() && id == "new" {
        form.fail(
            "id",
            "\"new\" is the address of this page: give another id or name",
        );
    }
    let mut status = StatusCode::BAD_REQUEST;
    if let Some(spec) = read(&mut form, id.clone(), currency.clone(), shop.zone()) {
        match write_room(shop, room.is_none(), &spec).await? {
            Stored::Saved => {
                audit::commit(
                    shop.pool.begin().await?,
                    &session.staff,
                    "save_dining_room",
                    &spec.id,
                    if room.is_none() { "created" } else { "updated" },
                    serde_json::json!({ "tables": spec.tables.len(), "joins": spec.joins.len(),
                                        "services": spec.periods.len(),
                                        "closed_days": spec.closed_days.len() }),
                )
                .await?;
                return Ok(see_other(&format!(
                    "/admin/dining/{}/setup?notice=room_saved",
                    spec.id
                )));
            }
            Stored::Taken => {
                form.fail(
                    "id",
                    format!(
                        "The id {id:?} belongs to something the shop has (or had: archived \
                         things keep their ids). Give another id or name. Nothing was changed."
                    ),
                );
                status = StatusCode::CONFLICT;
            }
            Stored::InUse(names) => {
                form.fail(
                    "periods",
                    format!(
                        "{} {} times published, so {} stays: close its days to stop \
                         bookings. Nothing was changed.",
                        names.join(" and "),
                        if names.len() == 1 { "has" } else { "have" },
                        if names.len() == 1 { "it" } else { "each" },
                    ),
                );
                status = StatusCode::CONFLICT;
            }
            Stored::Refused => form.fail(
                "",
                "The set-up does not hold together (a name or number the room cannot keep). \
                 Nothing was changed.",
            ),
        }
    }
    let lists = Lists {
        tables: typed_lines(&form, &TABLE),
        joins: typed_lines(&form, &JOIN),
        periods: typed_lines(&form, &PERIOD),
        turns: typed_lines(&form, &TURN),
        closed: form
            .all("closed_day")
            .iter()
            .map(|d| (*d).to_owned())
            .collect(),
    };
    let page = page(
        shop,
        session,
        &NoticeQuery::default(),
        room,
        form,
        lists,
        currency,
    )
    .await?;
    render(status, &page)
}

/// `POST /admin/dining`: a new room, from its set-up's fields.
pub async fn create_room(
    shop: web::Data<Shop>,
    session: web::ReqData<Session>,
    fields: Fields,
) -> Result<HttpResponse, ShopError> {
    save(&shop, &session, None, Form::typed(fields.into_inner())).await
}

/// `POST /admin/dining/{room}/setup`: the room's whole set-up, from its
/// fields; refused beside the list that is wrong (what was typed kept),
/// and then nothing is stored.
pub async fn save_setup(
    shop: web::Data<Shop>,
    session: web::ReqData<Session>,
    room: web::Path<String>,
    fields: Fields,
) -> Result<HttpResponse, ShopError> {
    save(
        &shop,
        &session,
        Some(room.into_inner()),
        Form::typed(fields.into_inner()),
    )
    .await
}
