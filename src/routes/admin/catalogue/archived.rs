//! The Archived page: every event, schedule, shelf and product taken off
//! the shop, with when and how much of it was sold, and the step that
//! brings each back as it was (`staff::archived`). Restoring asks first,
//! as archiving does, and works without a script.

use actix_web::http::StatusCode;
use actix_web::{HttpResponse, web};
use askama::Template;

use crate::routes::ShopError;
use crate::routes::admin::NoticeQuery;
use crate::routes::admin::pages::{Nav, nav, render, see_other};
use crate::staff::Session;
use crate::staff::archived::{self, ArchivedCollection, ArchivedProduct, Restored};
use crate::state::Shop;

/// A collection as the page lists it, its kind's word worked out here so
/// that the template branches on no kind.
pub(super) struct CollectionLine {
    c: ArchivedCollection,
    noun: &'static str,
}

/// A product as the page lists it.
pub(super) struct ProductLine {
    p: ArchivedProduct,
    noun: &'static str,
}

#[derive(Template)]
#[template(path = "admin/archived.html")]
pub(super) struct ArchivedPage {
    nav: Nav,
    collections: Vec<CollectionLine>,
    products: Vec<ProductLine>,
}

/// `GET /admin/catalogue/archived`.
pub async fn archived_page(
    shop: web::Data<Shop>,
    session: web::ReqData<Session>,
    notice: web::Query<NoticeQuery>,
) -> Result<HttpResponse, ShopError> {
    let found = archived::archived(&shop.pool).await?;
    let page = ArchivedPage {
        nav: nav(&shop, &session, &notice).await?,
        collections: found
            .collections
            .into_iter()
            .map(|c| CollectionLine {
                noun: c.kind.sheet().noun,
                c,
            })
            .collect(),
        products: found
            .products
            .into_iter()
            .map(|p| ProductLine {
                noun: p.kind.sheet().noun,
                p,
            })
            .collect(),
    };
    render(StatusCode::OK, &page)
}

/// Where a restore's answer leads: the catalogue, where it is back.
fn answer(restored: Restored) -> Result<HttpResponse, ShopError> {
    match restored {
        Restored::Done { products } => Ok(see_other(&format!(
            "/admin/catalogue?notice=restored&lines={products}"
        ))),
        Restored::CollectionArchived { .. } => Ok(see_other(
            "/admin/catalogue/archived?notice=restore_collection_first",
        )),
        Restored::NotArchived => Err(ShopError::not_found("no such thing archived")),
    }
}

/// `POST /admin/catalogue/collections/{id}/restore`: an event, a schedule
/// or a shelf back in the shop, with what was archived with it.
pub async fn restore_collection(
    shop: web::Data<Shop>,
    session: web::ReqData<Session>,
    id: web::Path<String>,
) -> Result<HttpResponse, ShopError> {
    answer(archived::restore_collection(&shop.pool, &session.staff, &id).await?)
}

/// `POST /admin/catalogue/products/{id}/restore`: a tier, a slot or a
/// stock item back in the shop.
pub async fn restore_product(
    shop: web::Data<Shop>,
    session: web::ReqData<Session>,
    id: web::Path<String>,
) -> Result<HttpResponse, ShopError> {
    answer(archived::restore_product(&shop.pool, &session.staff, &id).await?)
}
