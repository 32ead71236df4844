//! The Catalogue pages: what the shop sells, and forms to create, change
//! and archive events with their tiers ([`events`]), schedules ([`schedules`])
//! and stock items ([`stock`]), what was archived ([`archived`]), and
//! publishing drafts
//! ([`publishing`]). Thin handlers: each reads its form into the
//! domain's types (each field's error beside its field), calls
//! `staff::catalogue`, and answers with the page again (400 for bad input,
//! 409 when the engine or an existing id refuses, nothing saved) or a
//! redirect to the saved page. This file holds the list, what the forms
//! share, and archiving.

mod archived;
mod events;
mod publishing;
mod schedules;
mod stock;

pub use archived::{archived_page, restore_collection, restore_product};
pub use publishing::{
    preview, publish_collection, publish_product, unpublish_collection, unpublish_product,
};

pub use events::{
    create_event, create_tier, event_page, new_event, new_tier, save_event, save_tier, tier_page,
};
pub use schedules::{create_schedule, new_schedule, save_schedule, schedule_page};
pub use stock::{create_stock, new_stock, save_stock, stock_page};

use actix_web::http::StatusCode;
use actix_web::{HttpResponse, web};
use askama::Template;
use chrono::Utc;

use super::NoticeQuery;
use super::form::Form;
use super::pages::{Nav, money, nav, render, see_other};
use crate::catalogue::edit::{ProductEdit, check_slug, slug};
use crate::catalogue::kinds::{CollectionKind, Listing};
use crate::clock::ShopZone;
use crate::routes::ShopError;
use crate::staff::catalogue::{self, CollectionRow, ProductRow, Saved};
use crate::staff::sections::{self, Move};
use crate::staff::{Session, StaffError};
use crate::state::Shop;

/// A path segment of an id, as the pages' links write it.
pub(in crate::routes) fn segment(id: &str) -> String {
    let encoded: String = form_urlencoded::byte_serialize(id.as_bytes()).collect();
    encoded.replace('+', "%20")
}

/// The form's fields, as a browser sends them.
pub(in crate::routes) type Fields = web::Form<Vec<(String, String)>>;

// ---- the list ----

#[derive(Template)]
#[template(path = "admin/catalogue.html")]
pub(super) struct CataloguePage {
    nav: Nav,
    collections: Vec<CollectionView>,
    /// What staff can make: (link, words), one per collection kind.
    create: Vec<(&'static str, &'static str)>,
    /// How many things are archived (collections and products on their
    /// own), for the link to them.
    archived: i64,
}

/// A collection as its card shows it: what its kind answers, worked out
/// here so that the template branches on no kind.
pub(super) struct CollectionView {
    row: CollectionRow,
    /// Its admin page, when it has one.
    link: Option<String>,
    /// What it is, in staff's words.
    badge: &'static str,
    /// One line in place of the products' table (a schedule's units).
    summary: Option<String>,
    /// Each product with its admin page, when it has one.
    products: Vec<(ProductRow, Option<String>)>,
    /// Where a product is added to it, and in what words.
    add: Option<(String, &'static str)>,
}

impl CollectionView {
    fn of(row: CollectionRow, zone: ShopZone) -> Self {
        let c = &row.collection;
        let sheet = c.kind.sheet();
        let (link, summary) = match sheet.listing {
            Listing::Table => (c.kind.editor(&c.id), None),
            Listing::Summary => {
                let published = !sheet.published_by_schedule || row.schedule.is_some();
                let mut summary = units_summary(&row.products, zone);
                if !published {
                    summary.push_str(" (from the catalogue file; no schedule publishes them)");
                }
                (c.kind.editor(&c.id).filter(|_| published), Some(summary))
            }
        };
        Self {
            link,
            badge: sheet.noun,
            summary,
            products: row
                .products
                .iter()
                .map(|p| (p.clone(), c.kind.product_editor(&c.id, &p.id)))
                .collect(),
            add: c.kind.add_product(&c.id),
            row,
        }
    }
}

/// What a schedule's units on sale come to, in one line.
fn units_summary(products: &[ProductRow], zone: ShopZone) -> String {
    let first = products.iter().filter_map(|p| p.starts_at).min();
    let last = products.iter().filter_map(|p| p.starts_at).max();
    let held: i32 = products.iter().map(|p| p.held).sum();
    let sold: i32 = products.iter().map(|p| p.sold).sum();
    match (first, last) {
        (Some(first), Some(last)) => format!(
            "{} slots on sale, {} to {}; {held} held, {sold} sold",
            products.len(),
            zone.short(first),
            zone.short(last)
        ),
        _ => "No slots on sale yet.".to_owned(),
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
        collections: catalogue::collections(&shop.pool)
            .await?
            .into_iter()
            .map(|row| CollectionView::of(row, shop.zone()))
            .collect(),
        create: CollectionKind::ALL
            .iter()
            .filter_map(|kind| kind.sheet().create)
            .collect(),
        archived: crate::staff::archived::count(&shop.pool).await?,
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
    new_id_in(form, "id", words, prefix)
}

/// A new thing's id: typed in `field`, or made from `words` after
/// `prefix`; checked, the error beside `field` otherwise.
pub(crate) fn new_id_in(form: &mut Form, field: &str, words: &str, prefix: &str) -> String {
    let typed = form.value(field).trim().to_owned();
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
                field,
                "Give an id: the words have no letter or digit to make one from",
            );
        }
    } else if let Err(error) = check_slug("The id", &id, 100) {
        form.fail(field, error.0);
    }
    id
}

// ---- what tiers and stock items share ----

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
            .map(|at| zone.picker(at))
            .unwrap_or_default(),
    );
    form.set(
        "sale_closes_at",
        product
            .sale_closes_at
            .map(|at| zone.picker(at))
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

/// `POST /admin/catalogue/collections/{id}/move` (field `to`: `up` or
/// `down`): a section one place up or down the shop's page.
pub async fn move_collection(
    shop: web::Data<Shop>,
    session: web::ReqData<Session>,
    id: web::Path<String>,
    form: Fields,
) -> Result<HttpResponse, ShopError> {
    let Some(to) = form
        .iter()
        .find(|(name, _)| name == "to")
        .and_then(|(_, word)| Move::parse(word))
    else {
        return Ok(see_other(&format!(
            "/admin/catalogue?notice=section_not_moved#c-{}",
            segment(&id)
        )));
    };
    if sections::move_section(&shop.pool, &session.staff, &id, to).await? {
        Ok(see_other(&format!(
            "/admin/catalogue?notice=section_moved#c-{}",
            segment(&id)
        )))
    } else {
        Err(ShopError::not_found("no such collection in the shop"))
    }
}

/// What the pages call to show a price.
pub(super) fn price(product: &ProductRow) -> String {
    money(product.price_minor, &product.currency)
}
