//! Draft and published, from the editing pages: Publish (the page asks
//! first), Back to draft (refused, and said so, once anything of it was
//! ordered), and Preview: the shop's page of a collection with its drafts,
//! for staff only (this route is behind the admin's guard). Thin handlers
//! over `staff::publishing`.

use actix_web::{HttpRequest, HttpResponse, web};

use super::super::pages::see_other;
use super::Fields;
use crate::routes::ShopError;
use crate::staff::Session;
use crate::staff::publishing::{self, Publishing, Thing};
use crate::state::Shop;

/// Where the form came from (`back`, an admin catalogue page), else the
/// catalogue; never anywhere else.
fn back(fields: &Fields) -> String {
    fields
        .iter()
        .find(|(name, _)| name == "back")
        .map(|(_, to)| to.as_str())
        .filter(|to| to.starts_with("/admin/catalogue/") && !to.contains(['?', '#', '\\']))
        .unwrap_or("/admin/catalogue")
        .to_owned()
}

fn answer(outcome: Publishing, fields: &Fields, done: &str) -> Result<HttpResponse, ShopError> {
    let to = back(fields);
    Ok(see_other(&match outcome {
        Publishing::Done => format!("{to}?notice={done}"),
        Publishing::Unchanged => format!("{to}?notice=publishing_unchanged"),
        Publishing::HasOrders(lines) => format!("{to}?notice=unpublish_refused&lines={lines}"),
        Publishing::NotFound => return Err(ShopError::not_found("no such thing in the catalogue")),
    }))
}

/// `POST /admin/catalogue/collections/{id}/publish`.
pub async fn publish_collection(
    shop: web::Data<Shop>,
    session: web::ReqData<Session>,
    id: web::Path<String>,
    fields: Fields,
) -> Result<HttpResponse, ShopError> {
    let outcome = publishing::publish(&shop.pool, &session.staff, Thing::Collection(&id)).await?;
    answer(outcome, &fields, "published")
}

/// `POST /admin/catalogue/collections/{id}/unpublish`.
pub async fn unpublish_collection(
    shop: web::Data<Shop>,
    session: web::ReqData<Session>,
    id: web::Path<String>,
    fields: Fields,
) -> Result<HttpResponse, ShopError> {
    let outcome = publishing::unpublish(&shop.pool, &session.staff, Thing::Collection(&id)).await?;
    answer(outcome, &fields, "unpublished")
}

/// `POST /admin/catalogue/products/{id}/publish`.
pub async fn publish_product(
    shop: web::Data<Shop>,
    session: web::ReqData<Session>,
    id: web::Path<String>,
    fields: Fields,
) -> Result<HttpResponse, ShopError> {
    let outcome = publishing::publish(&shop.pool, &session.staff, Thing::Product(&id)).await?;
    answer(outcome, &fields, "published")
}

/// `POST /admin/catalogue/products/{id}/unpublish`.
pub async fn unpublish_product(
    shop: web::Data<Shop>,
    session: web::ReqData<Session>,
    id: web::Path<String>,
    fields: Fields,
) -> Result<HttpResponse, ShopError> {
    let outcome = publishing::unpublish(&shop.pool, &session.staff, Thing::Product(&id)).await?;
    answer(outcome, &fields, "unpublished")
}

/// `GET /admin/catalogue/preview/{collection}`: the shop's page of a
/// collection as publishing will show it, drafts included, with a line
/// above saying it is a preview and where to go back.
pub async fn preview(
    shop: web::Data<Shop>,
    request: HttpRequest,
    id: web::Path<String>,
) -> Result<HttpResponse, ShopError> {
    let page = crate::routes::shop::catalogue::preview(&shop, &request, &id).await?;
    let (head, body) = page.into_parts();
    let html = actix_web::body::to_bytes(body)
        .await
        .map_err(|_| ShopError::internal(anyhow::anyhow!("the preview could not be read")))?;
    let html = String::from_utf8_lossy(&html);
    let back = publishing::editor_of(&shop.pool, &id).await?;
    let said = format!(
        "<main>\n    <p class=\"alert\" role=\"note\" id=\"preview-note\"><strong>Preview.</strong> \
         Only staff see this page; shoppers see it once it is published. \
         <a href=\"{back}\">Back to editing</a></p>"
    );
    let mut page = head
        .set_body(html.replacen("<main>", &said, 1))
        .map_into_boxed_body();
    super::super::pages::no_store(&mut page);
    Ok(page)
}

/// The editing page's box saying whether it is a draft, with its actions.
pub(in super::super) struct PublishBox {
    pub(in super::super) draft: bool,
    /// Where its publish and unpublish forms go (`…/publish`).
    pub(in super::super) action: String,
    /// The editing page, to come back to.
    pub(in super::super) back: String,
    pub(in super::super) preview: String,
    /// Its page in the shop.
    pub(in super::super) shop: String,
    /// "event", "schedule", "stock item".
    pub(in super::super) noun: &'static str,
}

/// The box of an event or schedule (`Thing::Collection`) or stock item
/// (`Thing::Product`, on `shelf`) that exists; `None` for a new one.
pub(super) async fn publish_box(
    shop: &Shop,
    thing: Option<Thing<'_>>,
    shelf: &str,
) -> Result<Option<PublishBox>, ShopError> {
    let Some(thing) = thing else {
        return Ok(None);
    };
    let Some(draft) = publishing::is_draft(&shop.pool, thing).await? else {
        return Ok(None);
    };
    let (action, back, collection, noun) = match thing {
        Thing::Collection(id) => {
            let kind: Option<crate::catalogue::CollectionKind> =
                sqlx::query_scalar("select kind from collections where id = $1")
                    .bind(id)
                    .fetch_optional(&shop.pool)
                    .await?;
            let (page, noun) = match kind {
                Some(crate::catalogue::CollectionKind::Schedule) => ("schedules", "schedule"),
                _ => ("events", "event"),
            };
            (
                format!("/admin/catalogue/collections/{}", super::segment(id)),
                format!("/admin/catalogue/{page}/{}", super::segment(id)),
                id,
                noun,
            )
        }
        Thing::Product(id) => (
            format!("/admin/catalogue/products/{}", super::segment(id)),
            format!("/admin/catalogue/stock/{}", super::segment(id)),
            shelf,
            "stock item",
        ),
    };
    Ok(Some(PublishBox {
        draft,
        action,
        back,
        preview: format!("/admin/catalogue/preview/{}", super::segment(collection)),
        shop: format!("/c/{}", super::segment(collection)),
        noun,
    }))
}
