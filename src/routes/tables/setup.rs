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
use chrono::{NaiveTime, Utc};

use crate::catalogue::tables::times::{close_days, publish_window};
use crate::catalogue::tables::{
    JoinSpec, PeriodSpec, RoomSpec, TableSpec, TurnSpec, read_room, save_room,
};
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

const TABLE: [&str; 6] = [
    "table_id",
    "table_min",
    "table_max",
    "table_area",
    "table_offered",
    "table_out",
];
const JOIN: [&str; 5] = [
    "join_tables",
    "join_min",
    "join_max",
    "join_offered",
    "join_out",
];
const PERIOD: [&str; 8] = [
    "period_name",
    "period_day",
    "period_opens",
    "period_last",
    "period_deposit",
    "period_deposit_from",
    "period_cancel_hours",
    "period_out",
];
const TURN: [&str; 3] = ["turn_up_to", "turn_minutes", "turn_out"];

/// A line of a list as the page shows it: its fields by name.
pub(super) struct Line {
    form: Form,
}

impl Line {
    fn value(&self, name: &str) -> &str {
        self.form.value(name)
    }

    fn has(&self, name: &str, value: &i32) -> bool {
        self.form.has(name, &value.to_string())
    }

    fn out(&self, name: &str) -> bool {
        self.form.ticked(name)
    }

    /// Nothing typed: a spare line (its choices and boxes aside, which
    /// always send something or nothing).
    fn blank(&self, names: &[&str]) -> bool {
        names
            .iter()
            .filter(|n| !n.ends_with("_out") && !n.ends_with("_offered") && !n.ends_with("_day"))
            .all(|n| self.form.value(n).trim().is_empty())
    }

    fn of(pairs: Vec<(&str, String)>) -> Self {
        let mut form = Form::default();
        for (name, value) in pairs {
            form.add(name, value);
        }
        Line { form }
    }
}

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

/// The lines of a list as sent, blank ones and those ticked out too.
fn typed_lines(form: &Form, names: &[&str]) -> Vec<Line> {
    form.lines(names[0], names)
        .into_iter()
        .map(|form| Line { form })
        .collect()
}

/// A whole number of a line, or what is wrong, naming the line.
fn whole(line: &Line, name: &str, what: &str, min: i64, max: i64) -> Result<i32, String> {
    let typed = line.value(name).trim();
    typed
        .parse::<i64>()
        .ok()
        .filter(|n| (min..=max).contains(n))
        .map(|n| n as i32)
        .ok_or_else(|| format!("{what} is a whole number from {min} to {max}"))
}

/// A list's lines read, blank ones and those ticked out left aside; the
/// first that is wrong said beside the list (`key`), naming its line.
fn each<T>(
    form: &mut Form,
    key: &str,
    what: &str,
    names: &[&str],
    read: impl Fn(&Line) -> Result<T, String>,
) -> Vec<T> {
    let out = names[names.len() - 1];
    let lines = typed_lines(form, names);
    let mut read_lines = Vec::new();
    for (n, line) in lines
        .iter()
        .filter(|l| !l.blank(names) && !l.out(out))
        .enumerate()
    {
        match read(line) {
            Ok(thing) => read_lines.push(thing),
            Err(e) => {
                form.fail(key, format!("{what} line {}: {e}", n + 1));
                break;
            }
        }
    }
    read_lines
}

fn table_of(line: &Line) -> Result<TableSpec, String> {
    let id = line.value("table_id").trim().to_owned();
    if id.is_empty() || id.chars().count() > 20 || id.contains('+') {
        return Err("a table's name is 1 to 20 characters, without +".to_owned());
    }
    Ok(TableSpec {
        min_party: whole(line, "table_min", "the fewest guests", 1, 100)?,
        max_party: whole(line, "table_max", "the most guests", 1, 100)?,
        area: line.value("table_area").trim().chars().take(60).collect(),
        priority: whole(line, "table_offered", "the order offered", 0, 1000)?,
        id,
    })
}

fn join_of(line: &Line) -> Result<JoinSpec, String> {
    let joined: Vec<String> = line
        .value("join_tables")
        .split(|c: char| c == '+' || c == ',' || c.is_whitespace())
        .filter(|t| !t.is_empty())
        .map(str::to_owned)
        .collect();
    if joined.len() < 2 {
        return Err("name two tables or more, like W1 + W2".to_owned());
    }
    Ok(JoinSpec {
        id: joined.join("+"),
        tables: joined,
        min_party: whole(line, "join_min", "the fewest guests", 1, 100)?,
        max_party: whole(line, "join_max", "the most guests", 1, 100)?,
        priority: whole(line, "join_offered", "the order offered", 0, 1000)?,
    })
}

fn period_of(line: &Line) -> Result<PeriodSpec, String> {
    let name = line.value("period_name").trim().to_owned();
    if name.is_empty() || name.chars().count() > 60 {
        return Err("a service's name is 1 to 60 characters, like dinner".to_owned());
    }
    let weekdays: Vec<i32> = line
        .form
        .all("period_day")
        .iter()
        .filter_map(|d| d.parse::<i32>().ok())
        .filter(|d| (1..=7).contains(d))
        .collect();
    if weekdays.is_empty() {
        return Err(format!("{name}: tick the days it is served"));
    }
    let time = |field: &str, what: &str| {
        NaiveTime::parse_from_str(line.value(field).trim(), "%H:%M")
            .map_err(|_| format!("{name}: {what} is a time like 18:00"))
    };
    let deposit = match line.value("period_deposit").trim() {
        "" => 0,
        typed => crate::money::parse(typed)
            .ok()
            .filter(|m| *m <= 100_000_000)
            .ok_or_else(|| format!("{name}: the deposit is an amount like 10.00"))?,
    };
    Ok(PeriodSpec {
        weekdays,
        opens: time("period_opens", "its first time")?,
        last_seating: time("period_last", "its last seating")?,
        deposit_minor: deposit,
        deposit_from_party: whole_or(line, "period_deposit_from", "a deposit's party", 1, 100, 1)
            .map_err(|e| format!("{name}: {e}"))?,
        cancel_hours: whole_or(
            line,
            "period_cancel_hours",
            "the hours to cancel",
            0,
            720,
            24,
        )
        .map_err(|e| format!("{name}: {e}"))?,
        name,
    })
}

/// [`whole`], or `default` when left empty.
fn whole_or(
    line: &Line,
    name: &str,
    what: &str,
    min: i64,
    max: i64,
    default: i32,
) -> Result<i32, String> {
    if line.value(name).trim().is_empty() {
        return Ok(default);
    }
    whole(line, name, what, min, max)
}

/// The room the fields describe, or each list's error set on the form.
fn read(
    form: &mut Form,
    id: String,
    currency: String,
    zone: crate::clock::ShopZone,
) -> Option<RoomSpec> {
    let name = form.text("name", "The room's name", 200, true);
    let description = form.text("description", "The description", 1000, false);
    let interval = form.whole("interval", "The interval", 15, 60);
    let pacing = form.whole("pacing", "Guests starting in a quarter hour", 1, 1000);
    let days_ahead = form.whole("days_ahead", "Days ahead", 0, 365);
    let book_until = form.whole("book_until", "Minutes before", 0, 10_080);
    let largest = form.whole("largest_party", "The largest party", 1, 100);
    let least_fill = form.whole("least_fill", "The share a party fills", 0, 100);
    let opens_at = form.moment("opens_at", "Bookings open", zone, false);
    let tables = each(form, "tables", "Table", &TABLE, table_of);
    let joins = each(form, "joins", "Joined tables", &JOIN, join_of);
    let periods = each(form, "periods", "Service", &PERIOD, period_of);
    let mut turns = each(form, "turns", "Turn", &TURN, |line| {
        Ok(TurnSpec {
            up_to_party: whole(line, "turn_up_to", "the party's size", 1, 100)?,
            minutes: whole(line, "turn_minutes", "the minutes", 15, 600)?,
        })
    });
    turns.sort_by_key(|t| t.up_to_party);
    let mut closed_days = Vec::new();
    for typed in form.all("closed_day").into_iter().map(str::trim) {
        match chrono::NaiveDate::parse_from_str(typed, "%Y-%m-%d") {
            _ if typed.is_empty() => {}
            Ok(day) if !closed_days.contains(&day) => closed_days.push(day),
            Ok(_) => {}
            Err(_) => {
                let said = format!(
                    "A closed day is a date like 2026-12-25, not {:?}",
                    typed.chars().take(20).collect::<String>()
                );
                form.fail("closed", said);
                break;
            }
        }
    }
    closed_days.sort();
    if closed_days.len() > 400 {
        form.fail("closed", "At most 400 closed days");
    }
    if !form.ok() {
        return None;
    }
    let room = RoomSpec {
        id,
        name,
        description,
        currency,
        interval_minutes: interval? as i32,
        pacing: pacing? as i32,
        days_ahead: days_ahead? as i32,
        book_until_minutes: book_until? as i32,
        largest_party: largest? as i32,
        least_fill: least_fill? as i32,
        tables,
        joins,
        periods,
        turns,
        closed_days,
        bookings_open_at: opens_at,
    };
    match room.check() {
        Ok(()) => Some(room),
        Err(e) => {
            form.fail("", crate::routes::admin::form::refusal(&e));
            None
        }
    }
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
    let mut status = StatusCode::BAD_REQUEST;
    if let Some(spec) = read(&mut form, id.clone(), currency.clone(), shop.zone()) {
        let taken = room.is_none()
            && sqlx::query_scalar::<_, bool>(
                "select exists (select 1 from collections where id = $1)",
            )
            .bind(&id)
            .fetch_one(&shop.pool)
            .await?;
        if taken {
            form.fail(
                "id",
                format!(
                    "The id {id:?} belongs to something the shop has (or had: archived things \
                     keep their ids). Give another id or name. Nothing was changed."
                ),
            );
            status = StatusCode::CONFLICT;
        } else {
            match save_room(&shop.pool, &spec).await {
                Ok(()) => {
                    close_days(&shop.pool, shop.zone(), &spec.id).await?;
                    if room.is_none() {
                        // a new room's times at once; a set-up changed,
                        // with the worker's next pass
                        publish_window(&shop.pool, shop.zone(), Utc::now()).await?;
                    }
                    return Ok(see_other(&format!(
                        "/admin/dining/{}/setup?notice=room_saved",
                        spec.id
                    )));
                }
                Err(sqlx::Error::Database(refused)) => {
                    form.fail(
                        "",
                        format!(
                            "The set-up does not hold together: {}. Nothing was changed.",
                            refused.message()
                        ),
                    );
                }
                Err(other) => return Err(other.into()),
            }
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
