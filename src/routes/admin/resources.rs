//! Resources with their counters and drift; changing capacity (through the engine, refused below what is committed); repairing counters.

use actix_web::http::StatusCode;
use actix_web::{HttpResponse, web};
use askama::Template;

use super::form::{Form, refusal};
use super::notices::NoticeQuery;
use super::pages::{Nav, nav, render, see_other};
use crate::routes::ShopError;
use crate::staff::Session;
use crate::staff::actions::{self, CapacityChanged};
use crate::staff::views::{self};
use crate::state::Shop;

#[derive(Template)]
#[template(path = "admin/resources.html")]
pub(super) struct ResourcesPage {
    nav: Nav,
    resources: Vec<views::ResourceRow>,
}

/// `GET /admin/resources`.
pub async fn resources(
    shop: web::Data<Shop>,
    session: web::ReqData<Session>,
    notice: web::Query<NoticeQuery>,
) -> Result<HttpResponse, ShopError> {
    let page = ResourcesPage {
        nav: nav(&shop, &session, &notice).await?,
        resources: views::resources(&shop.pool, None).await?,
    };
    render(StatusCode::OK, &page)
}

#[derive(Template)]
#[template(path = "admin/resource.html")]
pub(super) struct ResourcePage {
    nav: Nav,
    r: views::ResourceRow,
    /// The page where what sells it has its capacity changed, when a
    /// product with such a page sells it: capacity is changed in one place.
    editor: Option<String>,
    /// The capacity form: the stored total, or what was typed when it was
    /// refused, with why.
    form: Form,
}

/// The admin page of the product selling a resource, if it has one.
async fn editor_of(shop: &Shop, resource: &str) -> Result<Option<String>, ShopError> {
    #[derive(sqlx::FromRow)]
    struct Seller {
        id: String,
        collection: String,
        kind: crate::catalogue::CollectionKind,
    }
    let seller: Option<Seller> = sqlx::query_as(
        "select p.id, p.collection, c.kind from products p \
           join collections c on c.id = p.collection \
          where p.resource_id = $1 and p.archived_at is null order by p.id limit 1",
    )
    .bind(resource)
    .fetch_optional(&shop.pool)
    .await?;
    Ok(seller.and_then(|s| s.kind.product_editor(&s.collection, &s.id)))
}

/// `GET /admin/resources/{id}`.
pub async fn resource(
    shop: web::Data<Shop>,
    session: web::ReqData<Session>,
    id: web::Path<String>,
    notice: web::Query<NoticeQuery>,
) -> Result<HttpResponse, ShopError> {
    resource_page(&shop, &session, &id, &notice, None).await
}

/// A resource's page, its capacity form as stored or, when `refused`, as
/// typed with why (400).
async fn resource_page(
    shop: &Shop,
    session: &Session,
    id: &str,
    notice: &NoticeQuery,
    refused: Option<Form>,
) -> Result<HttpResponse, ShopError> {
    let r = views::resources(&shop.pool, Some(id))
        .await?
        .into_iter()
        .next()
        .ok_or_else(|| ShopError::not_found("no such resource"))?;
    let status = match refused {
        Some(_) => StatusCode::BAD_REQUEST,
        None => StatusCode::OK,
    };
    let form = refused.unwrap_or_else(|| {
        let mut form = Form::default();
        form.set("total", r.check.total.to_string());
        form
    });
    let page = ResourcePage {
        nav: nav(shop, session, notice).await?,
        editor: editor_of(shop, &r.check.resource_id).await?,
        r,
        form,
    };
    render(status, &page)
}

pub(super) fn resource_url(id: &str) -> String {
    let encoded: String = form_urlencoded::byte_serialize(id.as_bytes()).collect();
    format!("/admin/resources/{}", encoded.replace('+', "%20"))
}

/// `POST /admin/resources/{id}/capacity`: field `total`. A total that is
/// not a whole number, or below what is reserved and sold, is the page
/// again with what was typed and why, beside the field (400).
pub async fn set_capacity(
    shop: web::Data<Shop>,
    session: web::ReqData<Session>,
    id: web::Path<String>,
    form: web::Form<Vec<(String, String)>>,
) -> Result<HttpResponse, ShopError> {
    let mut form = Form::typed(form.into_inner());
    let back = resource_url(&id);
    if let Some(total) = form.whole("total", "The new capacity", 0, 1_000_000_000) {
        match actions::set_capacity(&shop.pool, &session.staff, &id, total).await {
            Ok(CapacityChanged::Updated { .. }) => {
                return Ok(see_other(&format!("{back}?notice=capacity_updated")));
            }
            Ok(CapacityChanged::BelowCommitted { counters, .. }) => form.fail(
                "total",
                format!(
                    "The capacity cannot go below what is reserved and sold now ({}). \
                     Nothing was changed.",
                    counters.held + counters.sold
                ),
            ),
            Ok(CapacityChanged::NotFound) => return Err(ShopError::not_found("no such resource")),
            Err(crate::staff::StaffError::InvalidInput(message)) => {
                form.fail("total", refusal(&message));
            }
            Err(other) => return Err(other.into()),
        }
    }
    resource_page(&shop, &session, &id, &NoticeQuery::default(), Some(form)).await
}

/// `POST /admin/resources/{id}/repair`.
pub async fn repair(
    shop: web::Data<Shop>,
    session: web::ReqData<Session>,
    id: web::Path<String>,
) -> Result<HttpResponse, ShopError> {
    let back = resource_url(&id);
    match actions::repair_resource(&shop.pool, &session.staff, &id).await? {
        Some(repair) if repair.repaired => Ok(see_other(&format!("{back}?notice=repaired"))),
        Some(_) => Ok(see_other(&format!("{back}?notice=no_drift"))),
        None => Err(ShopError::not_found("no such resource")),
    }
}
