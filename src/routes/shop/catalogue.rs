//! The catalogue: every product with what is left now, and one
//! collection's page (the bakery's slot picker, an event's tiers).

use actix_web::http::StatusCode;
use actix_web::{HttpRequest, HttpResponse, web};
use askama::Template;
use serde::Deserialize;

use super::{basket_count, pending_note};
use crate::catalogue::Sale;
use crate::money;
use crate::retry::{Bound, retry};
use crate::routes::ShopError;
use crate::routes::render::{html as html_page, render};
use crate::state::Shop;
use crate::vouchers::VoucherCode;

pub struct CatalogueItem {
    pub id: String,
    /// Its picture's address (empty: none).
    pub image: String,
    pub name: String,
    /// What staff wrote about it.
    pub description: String,
    pub when: String,
    pub price: String,
    pub available: i32,
    pub max_qty: i32,
    /// While sold out with holds pending: what may come back, and when.
    pub note: String,
    /// Whether it can be put in a basket now (its sale is open).
    pub on_sale: bool,
    /// When its sale opens, or that it closed; empty while it is open.
    pub sale_note: String,
    /// The code that unlocked a hidden product, for its add form.
    pub code: String,
    /// Its drop queue takes entries now.
    pub queue_open: bool,
    /// Its drop queue's commitment, published on the card from the moment
    /// the queue is turned on; empty without a queue.
    pub commitment: String,
    /// The shopper has just put it in their basket.
    pub added: bool,
    /// When it happens, to group it by day.
    pub starts_at: Option<chrono::DateTime<chrono::Utc>>,
    /// On a day's page, its time alone ("09:30 CET"): the day says the rest.
    pub time: String,
    /// Its seat map, where seats are picked (a seated section); the add
    /// form's quantity is then the best seats together.
    pub map_href: String,
}

/// A day of a collection offered a day at a time, as its link says it.
pub struct Day {
    /// "Tuesday 22 December".
    pub label: String,
    /// "Tue 22 Dec", where the days sit above one day's times.
    pub short: String,
    /// `/c/bakery?day=2026-12-22`.
    pub href: String,
    /// "16 times, 120 left" (or "sold out").
    pub summary: String,
    /// The day shown below.
    pub current: bool,
}

pub struct Section {
    pub id: String,
    /// Its picture's address (empty: none).
    pub image: String,
    pub title: String,
    pub lede: String,
    /// What every product of it says alike (a schedule's description),
    /// said once above them; each product then says only its own.
    pub description: String,
    /// Its days, when it is offered a day at a time (empty otherwise).
    pub days: Vec<Day>,
    /// Whether it is offered a day at a time.
    pub by_day: bool,
    /// Its days sit above one day's times: short, side by side.
    pub days_compact: bool,
    /// "Doors 19:00 CET · The Pier": empty when the event says neither.
    pub doors_and_venue: String,
    /// A page of its own the section links to instead of listing its
    /// products (a dining room's times are chosen by day and party
    /// there), and the link's words; empty for the rest.
    pub page_href: String,
    pub page_words: &'static str,
    pub items: Vec<CatalogueItem>,
}

#[derive(Template)]
#[template(path = "catalogue.html")]
struct CataloguePage {
    basket_count: i64,
    sections: Vec<Section>,
    /// This page, for an add to come back to.
    here: String,
}

/// `?code=…`: an access code, which shows the hidden products it unlocks.
#[derive(Deserialize, Default)]
pub struct CodeQuery {
    code: Option<String>,
    /// The product just added (the add came back here).
    added: Option<String>,
    /// The day whose times a collection's page shows (`2026-12-22`).
    day: Option<String>,
}

/// `GET /`: every product with what is left now (holds past their TTL
/// already count as free).
pub async fn catalogue(
    shop: web::Data<Shop>,
    request: HttpRequest,
    query: web::Query<CodeQuery>,
) -> Result<HttpResponse, ShopError> {
    catalogue_page(&shop, &request, None, &query, false).await
}

/// `GET /c/{collection}`: one collection's page (the bakery's slot picker,
/// an event's tiers).
pub async fn collection(
    shop: web::Data<Shop>,
    request: HttpRequest,
    collection: web::Path<String>,
    query: web::Query<CodeQuery>,
) -> Result<HttpResponse, ShopError> {
    catalogue_page(&shop, &request, Some(collection.as_str()), &query, false).await
}

/// A collection's page as the shop will show it once published, drafts
/// included: for staff only (the admin's preview route, behind its guard).
pub(crate) async fn preview(
    shop: &Shop,
    request: &HttpRequest,
    collection: &str,
) -> Result<HttpResponse, ShopError> {
    let query = CodeQuery::default();
    catalogue_page(shop, request, Some(collection), &query, true).await
}

/// What a page lists: the shop's products on sale, or for staff's
/// preview of a collection, its drafts too.
async fn rows_of(
    shop: &Shop,
    only: Option<&str>,
    preview: bool,
) -> Result<Vec<crate::catalogue::Availability>, ShopError> {
    Ok(match (preview, only) {
        (true, Some(collection)) => crate::catalogue::preview(&shop.pool, collection).await?,
        _ => {
            retry("catalogue_read", Bound::Shopper, || {
                shop.live.availability(only)
            })
            .await?
        }
    })
}

/// Where a card finds its picture (empty: it has none).
fn picture(image: Option<&str>) -> String {
    image
        .map(|id| crate::images::src(id, crate::images::CARD_WIDTH))
        .unwrap_or_default()
}

async fn catalogue_page(
    shop: &Shop,
    request: &HttpRequest,
    only: Option<&str>,
    query: &CodeQuery,
    preview: bool,
) -> Result<HttpResponse, ShopError> {
    // a shopper with no basket and no code is given the copy memory
    // rendered last, while memory is unchanged: the crowd refreshing the
    // catalogue costs no rendering each
    let copy = copy_key(request, query).filter(|_| !preview);
    if let Some(html) = copy.as_deref().and_then(|key| shop.live.rendered(key)) {
        return Ok(html_page(StatusCode::OK, html));
    }
    let snapshot = shop.live.now();
    let code = query.code.as_deref();
    let mut rows = rows_of(shop, only, preview).await?;
    // the hidden products a valid access code unlocks, in their place
    let unlocked_by = unlock(shop, code, only, &mut rows).await?;
    let now = shop
        .live
        .now()
        .map(|snapshot| snapshot.database_now())
        .unwrap_or_else(chrono::Utc::now);
    // what the page says changes by the clock alone when a sale opens or
    // closes: a copy is given until then at most
    let until = rows
        .iter()
        .flat_map(|row| [row.sale_opens_at, row.sale_closes_at])
        .flatten()
        .filter(|at| *at > now)
        .min()
        .unwrap_or(now + chrono::Duration::days(1));
    let mut sections: Vec<Section> = Vec::new();
    for row in rows {
        if sections.last().is_none_or(|s| s.id != row.collection) {
            let (page_href, page_words) = row
                .kind
                .collection()
                .shop_page(&row.collection)
                .unwrap_or_default();
            sections.push(Section {
                page_href,
                page_words,
                id: row.collection.clone(),
                image: picture(row.collection_image_id.as_deref()),
                title: row.collection_title.clone(),
                lede: row.collection_lede.clone(),
                doors_and_venue: doors_and_venue(
                    row.collection_doors_at,
                    &row.collection_venue,
                    shop.zone(),
                ),
                description: String::new(),
                days: Vec::new(),
                by_day: row.kind.collection().by_day(),
                days_compact: false,
                items: Vec::new(),
            });
        }
        let (on_sale, sale_note) = match row.sale(now) {
            Sale::Open => (true, String::new()),
            Sale::Opens { at } => (false, format!("On sale from {}", shop.zone().long(at))),
            Sale::Closed { .. } => (false, "Sales have closed".to_owned()),
        };
        let available = row.available_now.max(0);
        let section = sections.last_mut().expect("pushed above");
        if !section.page_href.is_empty() {
            continue;
        }
        section.items.push(CatalogueItem {
            image: picture(row.image_id.as_deref()),
            name: row.name,
            description: row.description,
            // a slot's name already says when; an event's does not
            when: row
                .starts_at
                .filter(|_| row.kind.shows_time())
                .map(|at| shop.zone().long(at))
                .unwrap_or_default(),
            price: money::format(row.price_minor, &row.currency),
            available,
            max_qty: available.min(row.max_per_order),
            note: if available == 0 {
                pending_note(row.pending_units, row.first_back_at, now, shop.zone())
            } else {
                String::new()
            },
            on_sale,
            sale_note,
            code: if row.hidden {
                unlocked_by.clone()
            } else {
                String::new()
            },
            queue_open: row.queue_open,
            commitment: row.queue_commitment.clone().unwrap_or_default(),
            added: query.added.as_deref() == Some(row.id.as_str()),
            starts_at: row.starts_at,
            time: String::new(),
            map_href: row.kind.chosen_at(&row.id).unwrap_or_default(),
            id: row.id,
        });
    }
    if sections.is_empty() && only.is_some() {
        return Err(ShopError::not_found("there is no such page in the shop"));
    }
    let day = query
        .day
        .as_deref()
        .and_then(|d| chrono::NaiveDate::parse_from_str(d, "%Y-%m-%d").ok());
    for section in &mut sections {
        said_once(section);
        if section.by_day {
            // the home page lists the days; the collection's page one day
            let home = only.is_none();
            offer_by_day(section, day.filter(|_| !home), home, shop.zone());
        }
    }
    // this page as an add comes back to it: its code and its day kept
    let kept: Vec<String> = [
        code.and_then(|c| VoucherCode::parse(c).ok())
            .map(|code| format!("code={code}")),
        day.filter(|_| only.is_some())
            .map(|day| format!("day={day}")),
    ]
    .into_iter()
    .flatten()
    .collect();
    let here = match kept.is_empty() {
        true => request.path().to_owned(),
        false => format!("{}?{}", request.path(), kept.join("&")),
    };
    let page = CataloguePage {
        basket_count: basket_count(shop, request).await?,
        sections,
        here,
    };
    let (Some(key), Some(snapshot)) = (copy, snapshot) else {
        return render(StatusCode::OK, &page);
    };
    let html = bytes::Bytes::from(page.render().map_err(|e| ShopError::internal(e.into()))?);
    shop.live.keep_rendered(&key, snapshot, until, html.clone());
    Ok(html_page(StatusCode::OK, html))
}

/// The hidden products a valid access code unlocks, put among `rows` in
/// their place; the code that unlocked them (empty: none).
async fn unlock(
    shop: &Shop,
    code: Option<&str>,
    only: Option<&str>,
    rows: &mut Vec<crate::catalogue::Availability>,
) -> Result<String, ShopError> {
    let mut unlocked_by = String::new();
    if let Some(code) = code.and_then(|c| VoucherCode::parse(c).ok()) {
        let (voucher, db_now) = retry("voucher_read", Bound::Shopper, || {
            crate::vouchers::find_now(&shop.pool, &code)
        })
        .await?;
        if let Some(voucher) = voucher.filter(|v| {
            !v.archived
                && v.valid_from.is_none_or(|from| from <= db_now)
                && v.valid_until.is_none_or(|until| db_now < until)
        }) {
            let hidden = retry("catalogue_read", Bound::Shopper, || {
                crate::catalogue::unlocked(&shop.pool, &voucher.unlocks, only)
            })
            .await?;
            if !hidden.is_empty() {
                unlocked_by = voucher.code.to_string();
                rows.extend(hidden);
                rows.sort_by(|a, b| {
                    (a.collection_position, &a.collection)
                        .cmp(&(b.collection_position, &b.collection))
                });
            }
        }
    }
    Ok(unlocked_by)
}

/// The key a page's copy is kept under, for a shopper with no basket and
/// no code, nothing just added, and a day (if any) that is one: the page
/// and the day it shows. `None`: rendered for this request alone.
fn copy_key(request: &HttpRequest, query: &CodeQuery) -> Option<String> {
    let anonymous = query.code.is_none() && super::basket_id(request).is_none();
    let day = match query.day.as_deref() {
        None => String::new(),
        Some(text) => chrono::NaiveDate::parse_from_str(text, "%Y-%m-%d")
            .ok()?
            .to_string(),
    };
    (anonymous && query.added.is_none()).then(|| format!("catalogue:{}?day={day}", request.path()))
}

/// A description every product of a section shares (a schedule's units
/// all carry its description) is said once, above them.
fn said_once(section: &mut Section) {
    let Some(first) = section.items.first().map(|i| i.description.clone()) else {
        return;
    };
    if section.items.len() < 2
        || first.trim().is_empty()
        || section.items.iter().any(|i| i.description != first)
    {
        return;
    }
    section.description = first;
    for item in &mut section.items {
        item.description.clear();
    }
}

/// A section offered a day at a time: its days, each with how many times
/// and units it has left; on its own page, the chosen day's times (the
/// first day's when none is chosen, or the chosen one has none); on the
/// home page, the days alone.
fn offer_by_day(
    section: &mut Section,
    chosen: Option<chrono::NaiveDate>,
    home: bool,
    zone: crate::clock::ShopZone,
) {
    use std::collections::BTreeMap;
    let date_of = |item: &CatalogueItem| item.starts_at.map(|at| zone.local(at).date_naive());
    let mut days: BTreeMap<chrono::NaiveDate, (String, i32, i32)> = BTreeMap::new();
    section.days_compact = !home;
    for item in &section.items {
        let (Some(date), Some(at)) = (date_of(item), item.starts_at) else {
            continue;
        };
        let label = zone.local(at).format("%A %-d %B").to_string();
        let day = days.entry(date).or_insert((label, 0, 0));
        day.1 += 1;
        if item.on_sale {
            day.2 += item.available;
        }
    }
    if days.is_empty() {
        return;
    }
    let shown = chosen
        .filter(|d| days.contains_key(d))
        .or_else(|| days.keys().next().copied());
    let plural = |n: i32, one: &str, many: &str| {
        if n == 1 {
            format!("1 {one}")
        } else {
            format!("{n} {many}")
        }
    };
    section.days = days
        .iter()
        .map(|(date, (label, times, left))| Day {
            label: label.clone(),
            short: date.format("%a %-d %b").to_string(),
            href: format!("/c/{}?day={date}", section.id),
            summary: match left {
                0 => format!("{}, sold out", plural(*times, "time", "times")),
                left => format!("{}, {} left", plural(*times, "time", "times"), left),
            },
            current: !home && Some(*date) == shown,
        })
        .collect();
    if home {
        section.items.clear();
    } else {
        section.items.retain(|item| date_of(item) == shown);
        for item in &mut section.items {
            item.time = item.starts_at.map(|at| zone.time(at)).unwrap_or_default();
        }
    }
}

/// "Doors 19:00 CET · The Pier", either alone, or empty.
pub fn doors_and_venue(
    doors_at: Option<chrono::DateTime<chrono::Utc>>,
    venue: &str,
    zone: crate::clock::ShopZone,
) -> String {
    let doors = doors_at.map(|at| format!("Doors {}", zone.time(at)));
    let venue = Some(venue.trim())
        .filter(|v| !v.is_empty())
        .map(str::to_owned);
    [doors, venue]
        .into_iter()
        .flatten()
        .collect::<Vec<_>>()
        .join(" · ")
}
