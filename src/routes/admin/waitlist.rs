//! The Waiting list page: every product's entries in line, with where
//! each is (unconfirmed, waiting, offered until, claimed, lapsed,
//! removed), and removing one. Thin handlers over `crate::waitlist`.

use actix_web::http::StatusCode;
use actix_web::{HttpResponse, web};
use askama::Template;
use serde::Deserialize;

use super::{Nav, NoticeQuery, nav, render, see_other};
use crate::routes::ShopError;
use crate::staff::{Actor, Session};
use crate::state::Shop;
use crate::waitlist::{self, Entry};

/// A product with a waiting list.
struct Listed {
    id: String,
    name: String,
    in_order: bool,
    claim_minutes: i32,
    entries: Vec<Entry>,
}

#[derive(Template)]
#[template(path = "admin/waitlist.html")]
pub(super) struct WaitlistPage {
    nav: Nav,
    products: Vec<Listed>,
}

#[derive(Deserialize)]
pub struct WaitlistQuery {
    product: Option<String>,
}

/// `GET /admin/waitlist[?product=…]`.
pub async fn waitlist_page(
    shop: web::Data<Shop>,
    session: web::ReqData<Session>,
    notice: web::Query<NoticeQuery>,
    query: web::Query<WaitlistQuery>,
) -> Result<HttpResponse, ShopError> {
    let ids: Vec<(String, String, bool, i32)> = sqlx::query_as(
        "select p.id, p.name, p.waitlist_in_order, p.waitlist_claim_minutes from products p \
          where exists (select 1 from waitlist_entries w where w.product_id = p.id) \
            and ($1::text is null or p.id = $1) \
          order by p.collection, p.position, p.id",
    )
    .bind(query.product.as_deref())
    .fetch_all(&shop.pool)
    .await?;
    let mut products = Vec::with_capacity(ids.len());
    for (id, name, in_order, claim_minutes) in ids {
        products.push(Listed {
            entries: waitlist::entries(&shop.pool, &id).await?,
            id,
            name,
            in_order,
            claim_minutes,
        });
    }
    let page = WaitlistPage {
        nav: nav(&shop, &session, &notice).await?,
        products,
    };
    render(StatusCode::OK, &page)
}

/// `POST /admin/waitlist/{id}/remove`: take an entry off its list.
pub async fn remove_entry(
    shop: web::Data<Shop>,
    session: web::ReqData<Session>,
    id: web::Path<String>,
) -> Result<HttpResponse, ShopError> {
    let gone = || ShopError::not_found("no such entry in line");
    let id = uuid::Uuid::parse_str(&id).map_err(|_| gone())?;
    if waitlist::remove(&shop.pool, Actor::Staff(&session.staff), id).await? {
        Ok(see_other("/admin/waitlist?notice=waitlist_removed"))
    } else {
        Err(gone())
    }
}
