//! Exports: the filter form, orders and attendees as streamed CSV, and the
//! door's printable list. The queries and the CSV are `staff::exports`'.

use actix_web::http::{StatusCode, header};
use actix_web::{HttpResponse, web};
use askama::Template;

use super::{Nav, NoticeQuery, nav, no_store, render};
use crate::checkout::OrderState;
use crate::routes::ShopError;
use crate::staff::Session;
use crate::staff::exports::{
    self, AttendeeLine, CsvExport, DOOR_LIST_LIMIT, DoorList, ExportError, ExportFilter,
    FilterForm, ProductChoice,
};
use crate::state::Shop;

impl From<ExportError> for ShopError {
    fn from(error: ExportError) -> Self {
        match error {
            ExportError::InvalidInput(message) => ShopError::bad_request(&message),
            ExportError::NotFound(message) => ShopError::not_found(&message),
            ExportError::Busy => ShopError::busy(
                "other exports are being downloaded right now; try again when one has finished",
            ),
            ExportError::Database(error) => error.into(),
        }
    }
}

#[derive(Template)]
#[template(path = "admin/exports.html")]
pub(super) struct ExportsPage {
    nav: Nav,
    products: Vec<ProductChoice>,
    /// Every collection, in the products' order.
    collections: Vec<String>,
    states: Vec<&'static str>,
}

impl ExportsPage {
    /// "Sourdough box — Tue 1 Dec 12:30 CET (archived)"
    fn label(&self, product: &ProductChoice) -> String {
        let mut label = product.name.clone();
        if let Some(at) = product.starts_at {
            label.push_str(&format!(" — {}", self.nav.zone.short(at)));
        }
        if !product.active {
            label.push_str(" (archived)");
        }
        label
    }

    /// The collections whose products carry codes: the door lists to offer.
    fn door_collections(&self) -> Vec<&String> {
        self.collections
            .iter()
            .filter(|c| {
                self.products
                    .iter()
                    .any(|p| &p.collection == *c && p.has_codes)
            })
            .collect()
    }
}

/// `GET /admin/exports`: the filter form.
pub async fn exports_page(
    shop: web::Data<Shop>,
    session: web::ReqData<Session>,
) -> Result<HttpResponse, ShopError> {
    let products = exports::choices(&shop.pool).await?;
    let mut collections: Vec<String> = Vec::new();
    for product in &products {
        if !collections.contains(&product.collection) {
            collections.push(product.collection.clone());
        }
    }
    let page = ExportsPage {
        nav: nav(&shop, &session, &NoticeQuery::default()).await?,
        products,
        collections,
        states: OrderState::ALL.iter().map(|s| s.as_str()).collect(),
    };
    render(StatusCode::OK, &page)
}

/// A CSV on its way: an attachment named for its filter, streamed.
fn download(export: CsvExport) -> HttpResponse {
    let mut response = HttpResponse::Ok()
        .content_type("text/csv; charset=utf-8")
        .insert_header((
            header::CONTENT_DISPOSITION,
            format!("attachment; filename=\"{}\"", export.filename),
        ))
        .streaming(export.body);
    no_store(&mut response);
    response
}

/// `GET /admin/exports/orders.csv?…`: one line per order.
pub async fn orders_csv(
    shop: web::Data<Shop>,
    session: web::ReqData<Session>,
    form: web::Query<FilterForm>,
) -> Result<HttpResponse, ShopError> {
    let filter = ExportFilter::parse(&form)?;
    let export = exports::orders_csv(&shop.pool, &session.staff, &filter, shop.zone).await?;
    Ok(download(export))
}

/// `GET /admin/exports/attendees.csv?…`: one line per ticket or pickup code.
pub async fn attendees_csv(
    shop: web::Data<Shop>,
    session: web::ReqData<Session>,
    form: web::Query<FilterForm>,
) -> Result<HttpResponse, ShopError> {
    let filter = ExportFilter::parse(&form)?;
    let export = exports::attendees_csv(&shop.pool, &session.staff, &filter, shop.zone).await?;
    Ok(download(export))
}

#[derive(Template)]
#[template(path = "admin/door.html")]
pub(super) struct DoorPage {
    nav: Nav,
    /// What the list is of: "Harbour Lights — VIP", "collection bakery".
    title: String,
    filter: String,
    /// `None`: more codes than a list shows.
    codes: Option<Vec<AttendeeLine>>,
    redeemed: usize,
    refunded: usize,
    limit: usize,
    printed_at: String,
}

/// `GET /admin/exports/door?product=…` (or `collection=…`): the door's
/// list, by name, to print and tick off.
pub async fn door_list(
    shop: web::Data<Shop>,
    session: web::ReqData<Session>,
    form: web::Query<FilterForm>,
) -> Result<HttpResponse, ShopError> {
    let filter = ExportFilter::parse(&form)?;
    let list = exports::door_list(&shop.pool, &session.staff, &filter, shop.zone).await?;
    let title = match (&filter.product, &filter.collection) {
        (Some(product), _) => exports::choices(&shop.pool)
            .await?
            .into_iter()
            .find(|p| &p.id == product)
            .map(|p| match p.starts_at {
                Some(at) => format!("{} — {}", p.name, shop.zone.long(at)),
                None => p.name,
            })
            .unwrap_or_else(|| product.clone()),
        (None, Some(collection)) => collection.clone(),
        (None, None) => String::new(),
    };
    let (codes, redeemed, refunded) = match list {
        DoorList::Listed {
            codes,
            redeemed,
            refunded,
        } => (Some(codes), redeemed, refunded),
        DoorList::TooMany => (None, 0, 0),
    };
    let page = DoorPage {
        nav: nav(&shop, &session, &NoticeQuery::default()).await?,
        title,
        filter: filter.words(),
        codes,
        redeemed,
        refunded,
        limit: DOOR_LIST_LIMIT,
        printed_at: shop.zone.minute(chrono::Utc::now()),
    };
    render(StatusCode::OK, &page)
}

impl DoorPage {
    /// "19:02 CET at North door by grace@…"
    fn redeemed_words(&self, code: &AttendeeLine) -> String {
        let Some(at) = code.redeemed_at else {
            return String::new();
        };
        let mut words = self.nav.zone.time(at);
        if let Some(place) = code.place.as_deref().filter(|p| !p.is_empty()) {
            words.push_str(&format!(" at {place}"));
        }
        if let Some(by) = &code.redeemed_by {
            words.push_str(&format!(" by {by}"));
        }
        words
    }
}
