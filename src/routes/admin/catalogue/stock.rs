//! A stock item's pages: its price, its units (how many a new item starts
//! with; then units added or removed, with the engine's count shown), most
//! per order, sale window and the shelf it goes on (a new shelf made with
//! it when staff name one).

use actix_web::http::StatusCode;
use actix_web::{HttpResponse, web};
use askama::Template;

use super::{Answer, Fields, after_save, checked, new_id, product_form, read_sold, segment};
use crate::catalogue::ProductKind;
use crate::catalogue::edit::{DEFAULT_MAX_PER_ORDER, ProductEdit};
use crate::routes::ShopError;
use crate::routes::admin::NoticeQuery;
use crate::routes::admin::form::Form;
use crate::routes::admin::images::ImageField;
use crate::routes::admin::pages::{Nav, nav, render, see_other};
use crate::staff::catalogue::Saved;
use crate::staff::catalogue::{self, ProductRow};
use crate::staff::{Session, StaffError};
use crate::state::Shop;

#[derive(Template)]
#[template(path = "admin/stock.html")]
pub(super) struct StockPage {
    nav: Nav,
    form: Form,
    /// `None` for a new item.
    item: Option<ProductRow>,
    shelves: Vec<(String, String)>,
    currency: String,
    /// Draft or published, for an item that exists.
    publishing: Option<super::publishing::PublishBox>,
    /// Its image's upload field (a saved item's).
    image: Option<ImageField>,
}

/// `GET /admin/catalogue/stock/new`.
pub async fn new_stock(
    shop: web::Data<Shop>,
    session: web::ReqData<Session>,
) -> Result<HttpResponse, ShopError> {
    let shelves = catalogue::shelves(&shop.pool).await?;
    let mut form = Form::default();
    form.set("max_per_order", DEFAULT_MAX_PER_ORDER.to_string());
    if let Some((_, title)) = shelves.first() {
        form.set("shelf", title);
    }
    let page = StockPage {
        image: None,
        nav: nav(&shop, &session, &NoticeQuery::default()).await?,
        form,
        item: None,
        shelves,
        currency: catalogue::shop_currency(&shop.pool).await?,
        publishing: None,
    };
    render(StatusCode::OK, &page)
}

async fn stock_of(shop: &Shop, id: &str) -> Result<ProductRow, ShopError> {
    catalogue::product(&shop.pool, id, ProductKind::Stock)
        .await?
        .ok_or_else(|| ShopError::not_found("no such stock item"))
}

/// `GET /admin/catalogue/stock/{id}`.
pub async fn stock_page(
    shop: web::Data<Shop>,
    session: web::ReqData<Session>,
    id: web::Path<String>,
    notice: web::Query<NoticeQuery>,
) -> Result<HttpResponse, ShopError> {
    let item = stock_of(&shop, &id).await?;
    let shelves = catalogue::shelves(&shop.pool).await?;
    let mut form = product_form(&item, shop.zone());
    if let Some((_, title)) = shelves.iter().find(|(id, _)| *id == item.collection) {
        form.set("shelf", title);
    }
    let page = StockPage {
        nav: nav(&shop, &session, &notice).await?,
        form,
        currency: item.currency.clone(),
        publishing: super::publishing::publish_box(
            &shop,
            Some(crate::staff::publishing::Thing::Product(&item.id)),
            &item.collection,
        )
        .await?,
        image: Some(
            ImageField::of(
                &shop,
                crate::images::Target::Product(&item.id),
                &format!("/admin/catalogue/stock/{}", item.id),
            )
            .await?,
        ),
        item: Some(item),
        shelves,
    };
    render(StatusCode::OK, &page)
}

async fn save_stock_form(
    shop: &Shop,
    session: &Session,
    item: Option<ProductRow>,
    fields: Vec<(String, String)>,
) -> Result<HttpResponse, ShopError> {
    let mut form = Form::typed(fields);
    let currency = match &item {
        Some(item) => item.currency.clone(),
        None => catalogue::shop_currency(&shop.pool).await?,
    };
    // an item that exists: units added or removed, never its total typed
    let add_units = match &item {
        Some(item) => {
            form.set("capacity", item.total.to_string());
            read_units(&mut form)
        }
        None => Some(0),
    };
    let sold = read_sold(&mut form, shop.zone(), "The quantity");
    let shelf_typed = form.text("shelf", "The shelf", 200, true);
    let shelf = if shelf_typed.is_empty() || shelf_typed.chars().count() > 200 {
        None
    } else {
        match catalogue::shelf_for(&shop.pool, &shelf_typed).await {
            Ok(shelf) => Some(shelf),
            Err(StaffError::InvalidInput(message)) => {
                form.fail("shelf", message);
                None
            }
            Err(other) => return Err(other.into()),
        }
    };
    let id = match &item {
        Some(item) => item.id.clone(),
        None => {
            let name = form.value("name").to_owned();
            new_id(&mut form, &name, "")
        }
    };
    let edit = match (sold, &shelf) {
        (Some(sold), Some(shelf)) if form.ok() => checked(
            &mut form,
            ProductEdit {
                id: id.clone(),
                collection: shelf.id.clone(),
                kind: ProductKind::Stock,
                name: sold.name,
                description: sold.description,
                price_minor: sold.price_minor,
                currency: currency.clone(),
                capacity: sold.capacity,
                starts_at: None,
                ends_at: None,
                max_per_order: sold.max_per_order,
                sale_opens_at: sold.sale_opens_at,
                sale_closes_at: sold.sale_closes_at,
                hidden: sold.hidden,
                position: None,
            },
        ),
        _ => None,
    };
    let status = match (edit, shelf, add_units) {
        (Some(edit), Some(shelf), Some(add_units)) => {
            let new = item.is_none();
            let saved =
                catalogue::save_stock(&shop.pool, &session.staff, &edit, &shelf, new, add_units)
                    .await;
            if let (Ok(Saved::CapacityRefused { held, sold, .. }), Some(item)) = (&saved, &item) {
                form.fail(
                    "add_units",
                    format!(
                        "Refused: {held} are reserved and {sold} sold, so at most {} units can \
                         be removed now (you asked to remove {}). Nothing was changed.",
                        (item.total - held - sold).max(0),
                        -add_units
                    ),
                );
                form.set("add_units", add_units.to_string());
                StatusCode::CONFLICT
            } else {
                match after_save(&mut form, saved, "id", |created| {
                    format!(
                        "/admin/catalogue/stock/{}?notice={}",
                        segment(&edit.id),
                        if created {
                            "stock_created"
                        } else {
                            "stock_saved"
                        }
                    )
                })? {
                    Answer::Done(to) => return Ok(see_other(&to)),
                    Answer::Again(status) => status,
                }
            }
        }
        _ => StatusCode::BAD_REQUEST,
    };
    let publishing = match &item {
        Some(item) => {
            super::publishing::publish_box(
                shop,
                Some(crate::staff::publishing::Thing::Product(&item.id)),
                &item.collection,
            )
            .await?
        }
        None => None,
    };
    let page = StockPage {
        image: None,
        nav: nav(shop, session, &NoticeQuery::default()).await?,
        publishing,
        form,
        item,
        shelves: catalogue::shelves(&shop.pool).await?,
        currency,
    };
    render(status, &page)
}

/// The units typed to add (`20`, `+20`) or remove (`-5`); empty adds none.
fn read_units(form: &mut Form) -> Option<i64> {
    let typed = form.value("add_units").trim().to_owned();
    let digits = typed.strip_prefix('+').unwrap_or(&typed);
    if digits.is_empty() {
        return Some(0);
    }
    match digits.parse::<i64>() {
        Ok(n) if (-1_000_000..=1_000_000).contains(&n) => Some(n),
        _ => {
            form.fail(
                "add_units",
                "Type the units to add, like 20, or to remove, like -5 (at most 1,000,000).",
            );
            None
        }
    }
}

/// `POST /admin/catalogue/stock`: a new stock item.
pub async fn create_stock(
    shop: web::Data<Shop>,
    session: web::ReqData<Session>,
    fields: Fields,
) -> Result<HttpResponse, ShopError> {
    save_stock_form(&shop, &session, None, fields.into_inner()).await
}

/// `POST /admin/catalogue/stock/{id}`.
pub async fn save_stock(
    shop: web::Data<Shop>,
    session: web::ReqData<Session>,
    id: web::Path<String>,
    fields: Fields,
) -> Result<HttpResponse, ShopError> {
    let item = stock_of(&shop, &id).await?;
    save_stock_form(&shop, &session, Some(item), fields.into_inner()).await
}
