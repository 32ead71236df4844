//! A seated section's plan page (docs/design.md, "Reserved seating", "The
//! seat plan in the admin"): the seats drawn for staff with their state,
//! a box per seat to tick (no script needed), and what staff do to them
//! (block, unblock, hold back, release); the section's category, the
//! event's categories (name, colour, price), the plan in the compact form,
//! and whether "best available" may sell seats apart. Thin handlers: each
//! reads its form (errors beside their fields), calls `staff::seats`, and
//! answers with a redirect to the page, or the page again with what
//! refused it (400 bad input, 409 a shopper's seat, nothing changed).

use actix_web::http::StatusCode;
use actix_web::{HttpResponse, web};
use askama::Template;

use super::sections::{ROW_PARTS, colour_problem, kept_rows, row_parts, rows_of};
use crate::catalogue::seats::admin::{
    self, CategoryInfo, PlanOutcome, SeatInfo, SectionInfo, SetOutcome,
};
use crate::catalogue::seats::{self, MapFrame, PlacedSeat, RowFields};
use crate::routes::ShopError;
use crate::routes::admin::NoticeQuery;
use crate::routes::admin::catalogue::{Fields, segment};
use crate::routes::admin::form::Form;
use crate::routes::admin::pages::{Nav, money, nav, render, see_other};
use crate::staff::Session;
use crate::staff::seats::{self as staffed, SeatAction};
use crate::state::Shop;

/// One seat on the staff's map and in the boxes.
pub(super) struct SeatView {
    label: String,
    number: i32,
    x: i32,
    y: i32,
    /// `free`, `held`, `sold`, `blocked` or `held-back`: its look.
    class: &'static str,
    /// The letter drawn on it (the state, or the access of a free seat).
    mark: &'static str,
    /// What it is, in words: "A-1, wheelchair place, blocked (camera)".
    words: String,
    ticked: bool,
}

/// A row: its label, where it is drawn, and its runs (an aisle between).
pub(super) struct RowView {
    label: String,
    y: i32,
    runs: Vec<Vec<SeatView>>,
}

#[derive(Template)]
#[template(path = "seats/section.html")]
pub(super) struct SectionPage {
    nav: Nav,
    form: Form,
    section: SectionInfo,
    price: String,
    rows: Vec<RowView>,
    categories: Vec<(CategoryInfo, String)>,
    blocked: usize,
    held_back: usize,
    /// The SVG's viewBox, where its row labels and the stage go.
    frame: MapFrame,
    /// The plan's fields: its rows as stored (or as typed when refused),
    /// then spare lines for new rows.
    plan_rows: Vec<RowFields>,
}

/// A field of a category's form: named on the page by its category
/// (`cat-stalls-colour`), sent as its part (`colour`).
pub(super) struct CategoryField {
    key: String,
    part: &'static str,
    label: &'static str,
    hint: &'static str,
    value: String,
    error: Option<String>,
}

impl SectionPage {
    /// The colour the plan's drawing gives a seat: its category's.
    fn colour(&self) -> &str {
        &self.section.colour
    }

    /// Whether the plan's line `line` is ticked to be taken out.
    fn out(&self, line: &usize) -> bool {
        self.form.has("out", &line.to_string())
    }

    fn base(&self) -> String {
        section_path(&self.section.event, &self.section.id)
    }

    fn category_fields(&self, category: &CategoryInfo) -> Vec<CategoryField> {
        [
            ("name", "Name", "As the shop's seat map says it."),
            (
                "colour",
                "Colour",
                "Like #1f5f8b: the free seats' colour on the map.",
            ),
            ("price", "Price", "A seat's price, like 45.00."),
        ]
        .into_iter()
        .map(|(part, label, hint)| {
            let key = format!("cat-{}-{part}", category.id);
            CategoryField {
                value: self.form.value(&key).to_owned(),
                error: self.form.error(&key).map(str::to_owned),
                key,
                part,
                label,
                hint,
            }
        })
        .collect()
    }
}

fn section_path(event: &str, section: &str) -> String {
    format!(
        "/admin/catalogue/events/{}/sections/{}",
        segment(event),
        segment(section)
    )
}

/// A seat's look, mark and words.
fn seat_view(seat: &SeatInfo, ticked: bool) -> SeatView {
    let (class, state) = match (seat.taken.as_deref(), seat.state.as_str()) {
        (Some("sold"), _) => ("sold", "sold".to_owned()),
        (Some(_), _) => ("held", "in a shopper's checkout".to_owned()),
        (None, "blocked") => ("blocked", format!("blocked ({})", seat.note)),
        (None, "held_back") => ("held-back", format!("held back ({})", seat.note)),
        _ => ("free", "free".to_owned()),
    };
    let access = match seat.access.as_str() {
        "wheelchair" => ", wheelchair place",
        "companion" => ", companion seat",
        _ => "",
    };
    let mark = match (class, seat.access.as_str()) {
        ("sold", _) => "S",
        ("held", _) => "R",
        ("blocked", _) => "×",
        ("held-back", _) => "H",
        (_, "wheelchair") => "W",
        (_, "companion") => "C",
        _ => "",
    };
    SeatView {
        label: seat.label.clone(),
        number: seat.number,
        x: seat.x,
        y: seat.y,
        class,
        mark,
        words: format!("{}{access}, {state}", seat.label),
        ticked,
    }
}

/// The form as the page first shows it: what is stored.
fn stored_form(
    section: &SectionInfo,
    seats: &[SeatInfo],
    categories: &[CategoryInfo],
    splits: bool,
) -> Form {
    let mut form = Form::default();
    form.set("category", &section.category);
    form.set("splits", if splits { "yes" } else { "no" });
    let placed: Vec<PlacedSeat> = seats
        .iter()
        .map(|s| PlacedSeat {
            row_label: &s.row_label,
            number: s.number,
            row_rank: s.row_rank,
            run: s.run,
            access: &s.access,
        })
        .collect();
    for row in seats::placed_rows(&placed) {
        let row = RowFields::of(&row);
        for (name, value) in ROW_PARTS.iter().zip(row_parts(&row)) {
            form.add(name, value);
        }
    }
    for c in categories {
        form.set(&format!("cat-{}-name", c.id), &c.name);
        form.set(&format!("cat-{}-colour", c.id), &c.colour);
        form.set(
            &format!("cat-{}-price", c.id),
            crate::money::typed(c.price_minor),
        );
    }
    form
}

/// The page for `section` of `event`, what was typed (`overlay`) laid over
/// what is stored.
async fn page(
    shop: &Shop,
    session: &Session,
    notice: &NoticeQuery,
    event: &str,
    id: &str,
    overlay: impl FnOnce(&mut Form),
) -> Result<SectionPage, ShopError> {
    let section = admin::section(&shop.pool, event, id)
        .await?
        .ok_or_else(|| ShopError::not_found("no such section of this event"))?;
    let seats = admin::seats(&shop.pool, id).await?;
    let categories = admin::categories(&shop.pool, event).await?;
    let splits = admin::splits(&shop.pool).await?;
    let mut form = stored_form(&section, &seats, &categories, splits);
    overlay(&mut form);
    let mut plan_rows = rows_of(&form).unwrap_or_default();
    plan_rows.extend(std::iter::repeat_n(RowFields::default(), SPARE_ROWS));
    let mut rows: Vec<RowView> = Vec::new();
    let mut last_run = None;
    for seat in &seats {
        if rows.last().is_none_or(|r| r.label != seat.row_label) {
            rows.push(RowView {
                label: seat.row_label.clone(),
                y: seat.y,
                runs: Vec::new(),
            });
            last_run = None;
        }
        let row = rows.last_mut().expect("pushed");
        if last_run != Some(seat.run) {
            row.runs.push(Vec::new());
            last_run = Some(seat.run);
        }
        row.runs
            .last_mut()
            .expect("pushed")
            .push(seat_view(seat, form.has("seat", &seat.label)));
    }
    let untaken = |state: &str| {
        seats
            .iter()
            .filter(|s| s.state == state && s.taken.is_none())
            .count()
    };
    Ok(SectionPage {
        nav: nav(shop, session, notice).await?,
        price: money(section.price_minor, &section.currency),
        blocked: untaken("blocked"),
        held_back: untaken("held_back"),
        categories: categories
            .into_iter()
            .map(|c| {
                let price = money(c.price_minor, &section.currency);
                (c, price)
            })
            .collect(),
        frame: MapFrame::around(seats.iter().map(|s| (s.x, s.y))),
        plan_rows,
        rows,
        form,
        section,
    })
}

/// `GET /admin/catalogue/events/{id}/sections/{section}`.
pub async fn section_page(
    shop: web::Data<Shop>,
    session: web::ReqData<Session>,
    path: web::Path<(String, String)>,
    notice: web::Query<NoticeQuery>,
) -> Result<HttpResponse, ShopError> {
    let (event, id) = path.into_inner();
    render(
        StatusCode::OK,
        &page(&shop, &session, &notice, &event, &id, |_| {}).await?,
    )
}

/// The page again with the form as typed over what is stored, and its
/// errors.
async fn again(
    shop: &Shop,
    session: &Session,
    event: &str,
    id: &str,
    status: StatusCode,
    typed: impl FnOnce(&mut Form),
) -> Result<HttpResponse, ShopError> {
    let page = page(shop, session, &NoticeQuery::default(), event, id, typed).await?;
    render(status, &page)
}

/// Seats in words, the first twenty and how many more.
fn named(seats: &[String]) -> String {
    let mut words = seats
        .iter()
        .take(20)
        .cloned()
        .collect::<Vec<_>>()
        .join(", ");
    if seats.len() > 20 {
        words.push_str(&format!(" and {} more", seats.len() - 20));
    }
    words
}

/// Blank lines under the plan's rows, for rows to add.
const SPARE_ROWS: usize = 2;

/// The section exists (its page's 404 otherwise).
async fn existing(shop: &Shop, event: &str, id: &str) -> Result<SectionInfo, ShopError> {
    admin::section(&shop.pool, event, id)
        .await?
        .ok_or_else(|| ShopError::not_found("no such section of this event"))
}

/// `POST /admin/catalogue/events/{id}/sections/{section}/seats` (fields
/// `seat`, each ticked seat's label; `action`; `note`): the ticked seats
/// blocked, unblocked, held back or released, all or none.
pub async fn change_seats(
    shop: web::Data<Shop>,
    session: web::ReqData<Session>,
    path: web::Path<(String, String)>,
    fields: Fields,
) -> Result<HttpResponse, ShopError> {
    let (event, id) = path.into_inner();
    existing(&shop, &event, &id).await?;
    let mut form = Form::typed(fields.into_inner());
    let labels: Vec<String> = form.all("seat").into_iter().map(str::to_owned).collect();
    let action = SeatAction::parse(form.value("action"));
    let note = form.text("note", "The note", 200, false);
    if labels.is_empty() {
        form.fail("seats", "Tick the seats to change first");
    } else if labels.len() > 10_000 || labels.iter().any(|l| l.chars().count() > 24) {
        form.fail("seats", "Those are not seats of this section");
    }
    match action {
        None => form.fail("seats", "Choose Block, Unblock, Hold back or Release"),
        Some(action) if action.noted() && note.is_empty() && form.ok() => form.fail(
            "note",
            "Say why, for whoever reads the plan next: a camera, a sponsor, press",
        ),
        Some(action) if action.noted() && note == "off the plan" => form.fail(
            "note",
            "“off the plan” is the plan's own note: give another",
        ),
        _ => {}
    }
    let action = match action {
        Some(action) if form.ok() => action,
        _ => return again_typed(&shop, &session, &event, &id, StatusCode::BAD_REQUEST, form).await,
    };
    let outcome =
        staffed::set_seats(&shop.pool, &session.staff, &id, action, &labels, &note).await?;
    let refusal = match outcome {
        SetOutcome::Changed { changed, total } => {
            return Ok(see_other(&format!(
                "{}?notice=seats_{}&updated={changed}&left={total}#seats",
                section_path(&event, &id),
                action.as_str()
            )));
        }
        SetOutcome::Taken(seats) => format!(
            "Refused: {} {} a shopper's (sold, or in a checkout now), and a shopper's seat keeps \
             its place. Untick {} and try again. Nothing was changed.",
            named(&seats),
            if seats.len() == 1 { "is" } else { "are" },
            if seats.len() == 1 { "it" } else { "them" }
        ),
        SetOutcome::WrongState(seats) => format!(
            "Refused: {} {} not {}. Nothing was changed.",
            named(&seats),
            if seats.len() == 1 { "is" } else { "are" },
            if action == SeatAction::Unblock {
                "blocked (release a seat held back)"
            } else {
                "held back (unblock a blocked seat)"
            }
        ),
        SetOutcome::Unknown(seats) => format!(
            "Refused: {} {} not on this section's plan. Nothing was changed.",
            named(&seats),
            if seats.len() == 1 { "is" } else { "are" }
        ),
    };
    form.fail("seats", refusal);
    again_typed(&shop, &session, &event, &id, StatusCode::CONFLICT, form).await
}

/// The page again with `typed`'s values and errors over what is stored.
async fn again_typed(
    shop: &Shop,
    session: &Session,
    event: &str,
    id: &str,
    status: StatusCode,
    typed: Form,
) -> Result<HttpResponse, ShopError> {
    again(shop, session, event, id, status, |form| {
        for label in typed.all("seat") {
            form.add("seat", label);
        }
        for name in ["note", "category", "splits"] {
            if !typed.value(name).is_empty() {
                form.set(name, typed.value(name));
            }
        }
        // rows typed take the place of the stored ones
        if !typed.all("row").is_empty() {
            form.clear_all(&ROW_PARTS);
            for name in ROW_PARTS.iter().chain(["out"].iter()) {
                for value in typed.all(name) {
                    form.add(name, value);
                }
            }
        }
        for (name, message) in typed.errors() {
            form.fail(name, message.clone());
        }
    })
    .await
}

/// `POST /admin/catalogue/events/{id}/sections/{section}/category` (field
/// `category`): the section sold at another of the event's categories.
pub async fn change_category(
    shop: web::Data<Shop>,
    session: web::ReqData<Session>,
    path: web::Path<(String, String)>,
    fields: Fields,
) -> Result<HttpResponse, ShopError> {
    let (event, id) = path.into_inner();
    existing(&shop, &event, &id).await?;
    let mut form = Form::typed(fields.into_inner());
    let category = form.value("category").trim().to_owned();
    if staffed::move_section(&shop.pool, &session.staff, &id, &category).await? {
        return Ok(see_other(&format!(
            "{}?notice=section_category_changed#category",
            section_path(&event, &id)
        )));
    }
    form.fail(
        "category",
        format!(
            "{:?} is not one of this event's categories: choose one from the list",
            category.chars().take(40).collect::<String>()
        ),
    );
    again_typed(&shop, &session, &event, &id, StatusCode::BAD_REQUEST, form).await
}

/// `POST /admin/catalogue/events/{id}/sections/{section}/plan` (field
/// `rows`): the section's plan replaced, keeping every seat a shopper has.
pub async fn replace_plan(
    shop: web::Data<Shop>,
    session: web::ReqData<Session>,
    path: web::Path<(String, String)>,
    fields: Fields,
) -> Result<HttpResponse, ShopError> {
    let (event, id) = path.into_inner();
    existing(&shop, &event, &id).await?;
    let mut form = Form::typed(fields.into_inner());
    let rows = kept_rows(&form).and_then(|kept| seats::fielded_rows(&kept));
    let status = match rows {
        Err(words) => {
            form.fail("rows", format!("{words}. Nothing was changed."));
            StatusCode::BAD_REQUEST
        }
        Ok(rows) => match staffed::replace_plan(&shop.pool, &session.staff, &id, &rows).await? {
            PlanOutcome::Changed {
                added,
                placed,
                removed,
                total,
            } => {
                return Ok(see_other(&format!(
                    "{}?notice=plan_replaced&created={added}&updated={placed}&withdrawn={removed}\
                     &left={total}#plan",
                    section_path(&event, &id)
                )));
            }
            PlanOutcome::Taken(seats) => {
                form.fail(
                    "rows",
                    format!(
                        "Refused: the plan leaves out {}, {} (sold, or in a checkout now). Keep \
                         {} in the plan. Nothing was changed.",
                        named(&seats),
                        if seats.len() == 1 {
                            "a shopper's seat"
                        } else {
                            "shoppers' seats"
                        },
                        if seats.len() == 1 { "it" } else { "them" }
                    ),
                );
                StatusCode::CONFLICT
            }
        },
    };
    again_typed(&shop, &session, &event, &id, status, form).await
}

/// `POST /admin/catalogue/events/{id}/sections/{section}/categories/{category}`
/// (fields `name`, `colour`, `price`): one of the event's categories.
pub async fn save_category(
    shop: web::Data<Shop>,
    session: web::ReqData<Session>,
    path: web::Path<(String, String, String)>,
    fields: Fields,
) -> Result<HttpResponse, ShopError> {
    let (event, id, category) = path.into_inner();
    existing(&shop, &event, &id).await?;
    if !admin::categories(&shop.pool, &event)
        .await?
        .iter()
        .any(|c| c.id == category)
    {
        return Err(ShopError::not_found("no such category of this event"));
    }
    let typed = Form::typed(fields.into_inner());
    let key = |part: &str| format!("cat-{category}-{part}");
    // the fields as the page names them, so each error sits beside its own
    let mut form = Form::default();
    for part in ["name", "colour", "price"] {
        form.set(&key(part), typed.value(part));
    }
    let name = form.text(&key("name"), "The name", 100, true);
    let colour = form.value(&key("colour")).trim().to_ascii_lowercase();
    if let Some(problem) = colour_problem(&colour) {
        form.fail(&key("colour"), problem);
    }
    let price_minor = form.money(&key("price"), "The price");
    if let (Some(price_minor), true) = (price_minor, form.ok()) {
        let edit = CategoryInfo {
            id: category.clone(),
            name,
            colour,
            price_minor,
        };
        if staffed::save_category(&shop.pool, &session.staff, &event, &edit).await? {
            return Ok(see_other(&format!(
                "{}?notice=category_saved#categories",
                section_path(&event, &id)
            )));
        }
    }
    again(
        &shop,
        &session,
        &event,
        &id,
        StatusCode::BAD_REQUEST,
        |page| {
            for part in ["name", "colour", "price"] {
                page.set(&key(part), form.value(&key(part)));
            }
            for (name, message) in form.errors() {
                page.fail(name, message.clone());
            }
        },
    )
    .await
}

/// `POST /admin/catalogue/events/{id}/sections/{section}/splits` (field
/// `splits`: `yes` or `no`): whether "best available" may sell seats
/// apart when no row has them together (the shop's setting).
pub async fn set_splits(
    shop: web::Data<Shop>,
    session: web::ReqData<Session>,
    path: web::Path<(String, String)>,
    fields: Fields,
) -> Result<HttpResponse, ShopError> {
    let (event, id) = path.into_inner();
    existing(&shop, &event, &id).await?;
    let splits = match fields.iter().find(|(name, _)| name == "splits") {
        Some((_, word)) if word == "yes" => Some(true),
        Some((_, word)) if word == "no" => Some(false),
        _ => None,
    };
    let notice = match splits {
        Some(splits) => {
            staffed::set_splits(&shop.pool, &session.staff, splits).await?;
            "splits_saved"
        }
        None => "splits_not_saved",
    };
    Ok(see_other(&format!(
        "{}?notice={notice}#splits",
        section_path(&event, &id)
    )))
}

/// `GET /static/seat-plan.css`: the seat plan page's map and boxes.
pub async fn seat_plan_stylesheet() -> HttpResponse {
    HttpResponse::Ok()
        .content_type("text/css; charset=utf-8")
        .insert_header((
            actix_web::http::header::CACHE_CONTROL,
            "public, max-age=3600",
        ))
        .body(include_str!("../../../static/seats/plan.css"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_category_colour_keeps_its_contrast_on_the_map() {
        assert_eq!(colour_problem("#1f5f8b"), None);
        assert_eq!(colour_problem("#8a4b0f"), None);
        assert!(colour_problem("#ffd700").unwrap().contains("too light"));
        assert!(colour_problem("gold").unwrap().contains("like #1f5f8b"));
        assert!(colour_problem("#12345").unwrap().contains("like #1f5f8b"));
    }
}
