//! A seated section's seat map (`/seats/{section}`, docs/design.md,
//! "Reserved seating"): an SVG drawn by the shop from the plan, each free
//! seat a link that picks it (or puts it back) and says its label, row,
//! section, price and state; the best available first, as a quantity, and
//! picking seats second. Nothing is held here: the seats go into the
//! basket as the line's choice (`POST /seats/{section}`), and the
//! checkout's one transaction pins them or refuses naming those taken.

use actix_web::http::StatusCode;
use actix_web::{HttpRequest, HttpResponse, web};
use askama::Template;
use serde::Deserialize;

use super::basket_count;
use crate::catalogue::{Choice, ChoiceFields};
use crate::checkout::{self, basket};
use crate::money;
use crate::retry::{Bound, retry};
use crate::routes::ShopError;
use crate::routes::render::{render, see_other};
use crate::state::Shop;

#[derive(Deserialize)]
pub struct MapQuery {
    /// The seats picked so far, by label, joined by commas.
    pick: Option<String>,
}

#[derive(Deserialize)]
pub struct SeatsForm {
    /// `best`: the best `qty`; `pick`: the seats `seats` (commas).
    how: String,
    qty: Option<i64>,
    together: Option<String>,
    seats: Option<String>,
}

/// A section as its map heads it.
#[derive(sqlx::FromRow)]
struct SectionRow {
    name: String,
    event: String,
    event_title: String,
    category: String,
    colour: String,
    price_minor: i64,
    currency: String,
    max_per_order: i32,
}

/// A seat as the map draws it.
#[derive(sqlx::FromRow)]
struct SeatRow {
    label: String,
    row_label: String,
    x: i32,
    y: i32,
    access: String,
    free: bool,
}

/// One seat on the map.
struct Seat {
    label: String,
    x: i32,
    y: i32,
    free: bool,
    picked: bool,
    /// Where a press goes: the map with this seat picked or put back.
    href: String,
    /// What a screen reader says: "C-12, row C, Stalls, €45.00, free".
    words: String,
    /// A wheelchair place or companion seat: its mark.
    mark: &'static str,
}

/// A row's label at the left of the map.
struct RowLabel {
    label: String,
    y: i32,
}

#[derive(Template)]
#[template(path = "seats.html")]
struct SeatsPage {
    basket_count: i64,
    section_id: String,
    event: String,
    name: String,
    event_title: String,
    category: String,
    colour: String,
    price: String,
    free: usize,
    max_qty: i64,
    /// The SVG's viewBox, where its row labels and the stage go.
    view: String,
    label_x: i32,
    stage_x: i32,
    stage_y: i32,
    seats: Vec<Seat>,
    rows: Vec<RowLabel>,
    /// The seats picked, "C-12, C-13", and as the form sends them.
    picked_words: String,
    picked: String,
    picked_count: usize,
    picked_price: String,
}

/// `GET /seats/{section}`
pub async fn map(
    shop: web::Data<Shop>,
    request: HttpRequest,
    path: web::Path<String>,
    query: web::Query<MapQuery>,
) -> Result<HttpResponse, ShopError> {
    let id = path.into_inner();
    let Some(section) = retry("seats_read", Bound::Shopper, || section(&shop, &id)).await? else {
        return Err(ShopError::not_found("there is no such section"));
    };
    let rows: Vec<SeatRow> = retry("seats_read", Bound::Shopper, || {
        sqlx::query_as(
            "select s.label, s.row_label, s.x, s.y, s.access, \
                    s.state = 'open' and not exists (select 1 from seat_pins p \
                                                      where p.seat_id = s.id and p.live) as free \
               from seats s where s.section = $1 and s.note <> 'off the plan' \
              order by s.row_rank, s.run, s.pos",
        )
        .bind(&id)
        .fetch_all(&shop.pool)
    })
    .await?;
    // the seats picked so far that are still free, each once
    let mut picked: Vec<String> = Vec::new();
    for label in query.pick.as_deref().unwrap_or("").split(',') {
        let label = label.trim();
        if rows.iter().any(|r| r.free && r.label == label) && !picked.iter().any(|p| p == label) {
            picked.push(label.to_owned());
        }
    }
    picked.truncate(section.max_per_order.max(1) as usize);
    let price = money::format(section.price_minor, &section.currency);
    let toggled = |label: &str| -> String {
        let mut next: Vec<&str> = picked
            .iter()
            .map(String::as_str)
            .filter(|p| *p != label)
            .collect();
        if next.len() == picked.len() {
            next.push(label);
        }
        if next.is_empty() {
            format!("/seats/{id}#map")
        } else {
            format!("/seats/{id}?pick={}#map", next.join(","))
        }
    };
    let seats: Vec<Seat> = rows
        .iter()
        .map(|r| {
            let is_picked = picked.contains(&r.label);
            let state = match (r.free, is_picked) {
                (_, true) => "picked: press to put it back",
                (true, false) => "free",
                (false, false) => "taken",
            };
            let access = match r.access.as_str() {
                "wheelchair" => ", wheelchair place",
                "companion" => ", companion seat",
                _ => "",
            };
            Seat {
                label: r.label.clone(),
                x: r.x,
                y: r.y,
                free: r.free,
                picked: is_picked,
                href: toggled(&r.label),
                words: format!(
                    "{}, row {}, {}, {price}{access}, {state}",
                    r.label, r.row_label, section.name
                ),
                mark: match r.access.as_str() {
                    "wheelchair" => "W",
                    "companion" => "C",
                    _ => "",
                },
            }
        })
        .collect();
    let mut labels: Vec<RowLabel> = Vec::new();
    for r in &rows {
        if labels.last().is_none_or(|l| l.label != r.row_label) {
            labels.push(RowLabel {
                label: r.row_label.clone(),
                y: r.y,
            });
        }
    }
    let (min_x, max_x) = rows
        .iter()
        .fold((0, 0), |(lo, hi), r| (lo.min(r.x), hi.max(r.x)));
    let (min_y, max_y) = rows
        .iter()
        .fold((i32::MAX, 0), |(lo, hi), r| (lo.min(r.y), hi.max(r.y)));
    let min_y = if rows.is_empty() { 0 } else { min_y };
    let free = rows.iter().filter(|r| r.free).count();
    let page = SeatsPage {
        basket_count: basket_count(&shop, &request).await?,
        section_id: id.clone(),
        event: section.event,
        name: section.name,
        event_title: section.event_title,
        category: section.category,
        colour: section.colour,
        price: price.clone(),
        free,
        max_qty: i64::from(section.max_per_order).min(free as i64).max(1),
        // room for the stage above, and the row labels at the left
        view: format!(
            "{} {} {} {}",
            min_x - 24,
            min_y - 30,
            max_x - min_x + 36,
            max_y - min_y + 40
        ),
        label_x: min_x - 20,
        stage_x: (min_x + max_x) / 2,
        stage_y: min_y - 16,
        seats,
        rows: labels,
        picked_words: picked.join(", "),
        picked_count: picked.len(),
        picked_price: money::format(section.price_minor * picked.len() as i64, &section.currency),
        picked: picked.join(","),
    };
    render(StatusCode::OK, &page)
}

async fn section(shop: &Shop, id: &str) -> sqlx::Result<Option<SectionRow>> {
    sqlx::query_as(
        "select x.name, c.id as event, c.title as event_title, k.name as category, k.colour, \
                p.price_minor, p.currency, p.max_per_order \
           from seat_sections x join products p on p.id = x.product_id \
           join collections c on c.id = x.collection \
           join seat_categories k on k.collection = x.collection and k.id = x.category \
          where x.product_id = $1 and p.active and not p.hidden and c.archived_at is null",
    )
    .bind(id)
    .fetch_optional(&shop.pool)
    .await
}

/// `POST /seats/{section}`: the best seats, or the seats picked, into the
/// basket as the section's line (replacing what it had); nothing is held.
pub async fn choose(
    shop: web::Data<Shop>,
    request: HttpRequest,
    path: web::Path<String>,
    form: web::Form<SeatsForm>,
) -> Result<HttpResponse, ShopError> {
    let id = path.into_inner();
    let fields = match form.how.as_str() {
        "best" => ChoiceFields {
            qty: Some(form.qty.unwrap_or(1)),
            together: Some(form.together.is_some()),
            ..ChoiceFields::default()
        },
        "pick" => ChoiceFields {
            seats: Some(
                form.seats
                    .as_deref()
                    .unwrap_or("")
                    .split(',')
                    .map(str::to_owned)
                    .collect(),
            ),
            ..ChoiceFields::default()
        },
        _ => {
            return Err(ShopError::bad_request(
                "choose the best seats or pick seats",
            ));
        }
    };
    let Ok(choice @ Choice::Seats { .. }) = Choice::from_fields(fields) else {
        return Err(ShopError::bad_request(
            "choose 1 to 100 seats, or pick seats on the map",
        ));
    };
    let (basket_id, fresh) = match super::basket_id(&request) {
        Some(id) => (id, false),
        None => (checkout::codes::order_token(), true),
    };
    let add = uuid::Uuid::new_v4();
    let added = retry("basket_add", Bound::Shopper, || {
        basket::add(&shop.pool, &basket_id, &id, &choice, add, None)
    })
    .await?;
    match added {
        basket::Added::Added { .. } => {}
        basket::Added::Unknown => return Err(ShopError::not_found("there is no such section")),
        basket::Added::TooMany { .. } => {
            return Err(ShopError::bad_request(
                "one order takes fewer seats of this section",
            ));
        }
    }
    let mut response = see_other("/basket");
    if fresh {
        response
            .add_cookie(&super::basket::basket_cookie(&shop, basket_id))
            .map_err(|e| ShopError::internal(e.into()))?;
    }
    Ok(response)
}
