//! The catalogue: every product with what is left now, and one
//! collection's page (the bakery's slot picker, an event's tiers).

use actix_web::http::StatusCode;
use actix_web::{HttpRequest, HttpResponse, web};
use askama::Template;

use super::{basket_count, pending_note};
use crate::money;
use crate::retry::{Bound, retry};
use crate::routes::ShopError;
use crate::routes::render::render;
use crate::state::Shop;

pub struct CatalogueItem {
    pub id: String,
    pub name: String,
    pub when: String,
    pub price: String,
    pub available: i32,
    pub max_qty: i32,
    /// While sold out with holds pending: what may come back, and when.
    pub note: String,
}

pub struct Section {
    pub id: String,
    pub title: String,
    pub lede: String,
    pub items: Vec<CatalogueItem>,
}

#[derive(Template)]
#[template(path = "catalogue.html")]
struct CataloguePage {
    basket_count: i64,
    sections: Vec<Section>,
}

fn section_words(collection: &str) -> (String, String) {
    match collection {
        "bakery" => (
            "Bakery pickup".into(),
            "Pick a slot; each one takes eight boxes.".into(),
        ),
        "harbour-lights" => (
            "Harbour Lights — live at the pier".into(),
            "Two tiers, a fixed number of places each.".into(),
        ),
        "pantry" => (
            "Pantry".into(),
            "Small batches, gone when they are gone.".into(),
        ),
        other => (other.to_owned(), String::new()),
    }
}

/// `GET /`: every product with what is left now (holds past their TTL
/// already count as free).
pub async fn catalogue(
    shop: web::Data<Shop>,
    request: HttpRequest,
) -> Result<HttpResponse, ShopError> {
    catalogue_page(&shop, &request, None).await
}

/// `GET /c/{collection}`: one collection's page (the bakery's slot picker,
/// an event's tiers).
pub async fn collection(
    shop: web::Data<Shop>,
    request: HttpRequest,
    collection: web::Path<String>,
) -> Result<HttpResponse, ShopError> {
    catalogue_page(&shop, &request, Some(collection.as_str())).await
}

async fn catalogue_page(
    shop: &Shop,
    request: &HttpRequest,
    only: Option<&str>,
) -> Result<HttpResponse, ShopError> {
    let rows = retry("catalogue_read", Bound::Shopper, || {
        shop.live.availability(only)
    })
    .await?;
    let now = chrono::Utc::now();
    let mut sections: Vec<Section> = Vec::new();
    for row in rows {
        if sections.last().is_none_or(|s| s.id != row.collection) {
            let (title, lede) = section_words(&row.collection);
            sections.push(Section {
                id: row.collection.clone(),
                title,
                lede,
                items: Vec::new(),
            });
        }
        let available = row.available_now.max(0);
        sections
            .last_mut()
            .expect("pushed above")
            .items
            .push(CatalogueItem {
                id: row.id,
                name: row.name,
                // a slot's name already says when; an event's does not
                when: row
                    .starts_at
                    .filter(|_| row.kind.shows_time())
                    .map(|at| shop.zone.long(at))
                    .unwrap_or_default(),
                price: money::format(row.price_minor, &row.currency),
                available,
                max_qty: available.min(row.max_per_order),
                note: if available == 0 {
                    pending_note(row.pending_units, row.first_back_at, now, shop.zone)
                } else {
                    String::new()
                },
            });
    }
    if sections.is_empty() && only.is_some() {
        return Err(ShopError::not_found("there is no such page in the shop"));
    }
    let page = CataloguePage {
        basket_count: basket_count(shop, request).await?,
        sections,
    };
    render(StatusCode::OK, &page)
}
