//! A seated section's seat map (`/seats/{section}`, docs/design.md,
//! "Reserved seating"): an SVG drawn by the shop from the plan, each free
//! seat a link that picks it (or puts it back) and says its label, row,
//! section, price and state; the best available first, as a quantity, and
//! picking seats second. Nothing is held here: the seats go into the
//! basket as the line's choice (`POST /seats/{section}`), and the
//! checkout's one transaction pins them or refuses naming those taken.

use actix_web::http::{StatusCode, header};
use actix_web::{HttpRequest, HttpResponse, web};
use askama::Template;
use serde::Deserialize;

use crate::catalogue::seats::{MapFrame, SeatState, SectionSeats};
use crate::catalogue::{Choice, ChoiceFields};
use crate::checkout::{self, basket};
use crate::live::SeatsWatched;
use crate::money;
use crate::retry::{Bound, retry};
use crate::routes::ShopError;
use crate::routes::render::{render, see_other};
use crate::routes::shop::basket_count;
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

/// One seat on the map.
struct Seat {
    label: String,
    x: i32,
    y: i32,
    free: bool,
    picked: bool,
    /// Where a press goes: the map with this seat picked or put back.
    href: String,
    /// What a screen reader says: "C-12, row C, Stalls, €45.00, free";
    /// and the same without its state, for the page's script to say a
    /// change.
    words: String,
    place: String,
    /// A wheelchair place or companion seat: its mark.
    mark: &'static str,
}

/// A row's label at the left of the map.
struct RowLabel {
    label: String,
    y: i32,
}

#[derive(Template)]
#[template(path = "seats/map.html")]
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
    frame: MapFrame,
    seats: Vec<Seat>,
    rows: Vec<RowLabel>,
    /// The seats picked, "C-12, C-13", and as the form sends them.
    picked_words: String,
    picked: String,
    picked_count: usize,
    picked_price: String,
    /// The price of 1, 2, … seats, "€45.00|€90.00|…", for the page's
    /// script when a seat picked is taken meanwhile.
    totals: String,
}

/// `GET /seats/{section}`
pub async fn map(
    shop: web::Data<Shop>,
    request: HttpRequest,
    path: web::Path<String>,
    query: web::Query<MapQuery>,
) -> Result<HttpResponse, ShopError> {
    let id = path.into_inner();
    // from memory: a crowd at the map costs no read of the seats
    let Some(section) = retry("seats_read", Bound::Shopper, || {
        shop.live.section_seats(&id)
    })
    .await?
    else {
        return Err(ShopError::not_found("there is no such section"));
    };
    let head = &section.head;
    let rows = &section.seats;
    // the seats picked so far that are still free, each once
    let mut picked: Vec<String> = Vec::new();
    for label in query.pick.as_deref().unwrap_or("").split(',') {
        let label = label.trim();
        let free = rows
            .iter()
            .any(|r| r.state == SeatState::Free && r.label == label);
        if free && !picked.iter().any(|p| p == label) {
            picked.push(label.to_owned());
        }
    }
    let most = head.max_per_order.max(1) as usize;
    picked.truncate(most);
    let price = money::format(head.price_minor, &head.currency);
    let seats = draw(&section, &picked, &price);
    let mut labels: Vec<RowLabel> = Vec::new();
    for r in rows {
        if labels.last().is_none_or(|l| l.label != r.row_label) {
            labels.push(RowLabel {
                label: r.row_label.clone(),
                y: r.y,
            });
        }
    }
    let free = section.free();
    let total = |n: usize| money::format(head.price_minor * n as i64, &head.currency);
    let page = SeatsPage {
        basket_count: basket_count(&shop, &request).await?,
        section_id: id.clone(),
        event: head.event.clone(),
        name: head.name.clone(),
        event_title: head.event_title.clone(),
        category: head.category.clone(),
        colour: head.colour.clone(),
        price,
        free,
        max_qty: i64::from(head.max_per_order).min(free as i64).max(1),
        frame: MapFrame::around(rows.iter().map(|r| (r.x, r.y))),
        seats,
        rows: labels,
        picked_words: picked.join(", "),
        picked_count: picked.len(),
        picked_price: total(picked.len()),
        picked: picked.join(","),
        totals: (0..=most).map(total).collect::<Vec<_>>().join("|"),
    };
    render(StatusCode::OK, &page)
}

/// The section's seats as the map draws them, with `picked` picked.
fn draw(section: &SectionSeats, picked: &[String], price: &str) -> Vec<Seat> {
    let id = &section.head.product_id;
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
    section
        .seats
        .iter()
        .map(|r| {
            let free = r.state == SeatState::Free;
            let is_picked = picked.contains(&r.label);
            let state = match (free, is_picked) {
                (_, true) => "picked: press to put it back",
                (true, false) => "free",
                (false, false) => "taken",
            };
            let access = match r.access.as_str() {
                "wheelchair" => ", wheelchair place",
                "companion" => ", companion seat",
                _ => "",
            };
            let place = format!(
                "{}, row {}, {}, {price}{access}",
                r.label, r.row_label, section.head.name
            );
            Seat {
                label: r.label.clone(),
                x: r.x,
                y: r.y,
                free,
                picked: is_picked,
                href: toggled(&r.label),
                words: format!("{place}, {state}"),
                place,
                mark: match r.access.as_str() {
                    "wheelchair" => "W",
                    "companion" => "C",
                    _ => "",
                },
            }
        })
        .collect()
}

/// `GET /seats/{section}/stream`: the map's seats as server-sent events,
/// from memory: at once the seats not free, then what was taken and given
/// back whenever that changes (at most one event per
/// [`crate::live::WATCH_GAP`]), and a comment every
/// [`crate::live::WATCH_KEEPALIVE`]. The page greys a seat taken and
/// frees a seat given back where it is, keeping the seats picked.
pub async fn stream(
    shop: web::Data<Shop>,
    path: web::Path<String>,
) -> Result<HttpResponse, ShopError> {
    let id = path.into_inner();
    if retry("seats_read", Bound::Shopper, || {
        shop.live.section_seats(&id)
    })
    .await?
    .is_none()
    {
        return Err(ShopError::not_found("there is no such section"));
    }
    let Some(watch) = shop.live.watch_seats(id) else {
        return Ok(HttpResponse::ServiceUnavailable()
            .insert_header((header::RETRY_AFTER, "10"))
            .insert_header((header::CACHE_CONTROL, "no-store"))
            .body(
                "too many pages are watching; the map shows the seats as they are when it is read",
            ));
    };
    let events = futures::stream::unfold((true, watch), |(first, mut watch)| async move {
        let bytes: bytes::Bytes = match watch.next().await? {
            SeatsWatched::Quiet => bytes::Bytes::from_static(b": still here\n\n"),
            SeatsWatched::Changed(change) => {
                let retry = if first { "retry: 5000\n" } else { "" };
                let body = serde_json::to_string(&change).unwrap_or_default();
                format!("{retry}data: {body}\n\n").into()
            }
        };
        Some((Ok::<_, std::convert::Infallible>(bytes), (false, watch)))
    });
    Ok(HttpResponse::Ok()
        .content_type("text/event-stream")
        .insert_header((header::CACHE_CONTROL, "no-store"))
        // a proxy in front must pass each event on as it comes
        .insert_header(("x-accel-buffering", "no"))
        .streaming(events))
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
    let (basket_id, fresh) = match crate::routes::shop::basket_id(&request) {
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
        basket::Added::Unknown | basket::Added::NotChosenThatWay { .. } => {
            return Err(ShopError::not_found("there is no such section"));
        }
        basket::Added::TooMany { .. } => {
            return Err(ShopError::bad_request(
                "one order takes fewer seats of this section",
            ));
        }
    }
    let mut response = see_other("/basket");
    if fresh {
        response
            .add_cookie(&crate::routes::shop::basket::basket_cookie(
                &shop, basket_id,
            ))
            .map_err(|e| ShopError::internal(e.into()))?;
    }
    Ok(response)
}

/// `GET /static/seats.css`: the seat map's.
pub async fn stylesheet() -> HttpResponse {
    HttpResponse::Ok()
        .content_type("text/css; charset=utf-8")
        .insert_header((header::CACHE_CONTROL, "public, max-age=3600"))
        .body(include_str!("../../../static/seats/map.css"))
}

/// `GET /static/seats.js`: the seat map follows the shop's stream.
pub async fn script() -> HttpResponse {
    HttpResponse::Ok()
        .content_type("text/javascript; charset=utf-8")
        .insert_header((header::CACHE_CONTROL, "public, max-age=3600"))
        .body(include_str!("../../../static/seats/map.js"))
}
