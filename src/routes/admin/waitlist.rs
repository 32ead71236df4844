//! The Waiting list page: every product's entries in line, with where
//! each is (unconfirmed, waiting, offered until, claimed, lapsed,
//! removed), and removing one. Thin handlers over `crate::waitlist`.

use actix_web::http::StatusCode;
use actix_web::{HttpResponse, web};
use askama::Template;
use serde::Deserialize;

use super::form::Form;
use super::notices::NoticeQuery;
use super::pages::{Nav, nav, render, see_other};
use crate::audit::Actor;
use crate::routes::ShopError;
use crate::staff::Session;
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

/// A product's rules for its line, and its queue.
#[derive(sqlx::FromRow)]
struct Rules {
    id: String,
    name: String,
    claim_minutes: i32,
    in_order: bool,
    commitment: Option<String>,
    drawn: bool,
    /// Its sale opens later and it has no queue: one may be turned on.
    may_queue: bool,
}

#[derive(Template)]
#[template(path = "admin/waitlist.html")]
pub(super) struct WaitlistPage {
    nav: Nav,
    products: Vec<Listed>,
    rules: Vec<Rules>,
    /// A product's rules or queue as typed when they were refused, with
    /// why: the page shows them again in that product's row.
    refused: Option<(String, Form)>,
}

impl WaitlistPage {
    /// The row's form when it was the one refused.
    fn refused_for(&self, product: &str) -> Option<&Form> {
        self.refused
            .as_ref()
            .filter(|(id, _)| id == product)
            .map(|(_, form)| form)
    }

    /// The claim window shown in a row: as typed when refused, else stored.
    fn minutes(&self, r: &Rules) -> String {
        match self.refused_for(&r.id) {
            Some(form) => form.value("claim_minutes").to_owned(),
            None => r.claim_minutes.to_string(),
        }
    }

    /// Whether a row's "strictly in order" is ticked.
    fn in_order(&self, r: &Rules) -> bool {
        match self.refused_for(&r.id) {
            Some(form) => form.ticked("in_order"),
            None => r.in_order,
        }
    }

    /// Why a row's field was refused, if it was.
    fn error(&self, product: &str, field: &str) -> Option<&str> {
        self.refused_for(product).and_then(|form| form.error(field))
    }
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
    let page = page(&shop, &session, &notice, query.product.as_deref(), None).await?;
    render(StatusCode::OK, &page)
}

/// The page: every product's line (or one product's), the rules, and a
/// row refused with what was typed.
async fn page(
    shop: &Shop,
    session: &Session,
    notice: &NoticeQuery,
    product: Option<&str>,
    refused: Option<(String, Form)>,
) -> Result<WaitlistPage, ShopError> {
    let ids: Vec<(String, String, bool, i32)> = sqlx::query_as(
        "select p.id, p.name, p.waitlist_in_order, p.waitlist_claim_minutes from products p \
          where exists (select 1 from waitlist_entries w where w.product_id = p.id) \
            and ($1::text is null or p.id = $1) \
          order by p.collection, p.position, p.id",
    )
    .bind(product)
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
    let rules: Vec<Rules> = sqlx::query_as(
        "select id, name, waitlist_claim_minutes as claim_minutes, waitlist_in_order as in_order, \
                queue_commitment as commitment, queue_drawn_at is not null as drawn, \
                coalesce(queue_commitment is null and sale_opens_at > now(), false) as may_queue \
           from products where active and archived_at is null and not hidden \
          order by collection, position, id",
    )
    .fetch_all(&shop.pool)
    .await?;
    Ok(WaitlistPage {
        nav: nav(shop, session, notice).await?,
        products,
        rules,
        refused,
    })
}

/// The page again with a product's row as typed and why (400, or 409 for
/// a queue the product's state refuses).
async fn refused(
    shop: &Shop,
    session: &Session,
    product: &str,
    form: Form,
    status: StatusCode,
) -> Result<HttpResponse, ShopError> {
    let refused = Some((product.to_owned(), form));
    let page = page(shop, session, &NoticeQuery::default(), None, refused).await?;
    render(status, &page)
}

/// `POST /admin/waitlist/{product}/rules`: fields `claim_minutes` (1 to
/// 1440) and `in_order` (a checkbox: a group that does not fit holds up
/// those behind it).
pub async fn set_rules(
    shop: web::Data<Shop>,
    session: web::ReqData<Session>,
    product: web::Path<String>,
    form: web::Form<Vec<(String, String)>>,
) -> Result<HttpResponse, ShopError> {
    let mut form = Form::typed(form.into_inner());
    let Some(minutes) = form.whole("claim_minutes", "Minutes to pay", 1, 1440) else {
        return refused(&shop, &session, &product, form, StatusCode::BAD_REQUEST).await;
    };
    let minutes = minutes as i32;
    let in_order = form.ticked("in_order");
    let mut tx = shop.pool.begin().await?;
    let changed = sqlx::query(
        "update products set waitlist_claim_minutes = $2, waitlist_in_order = $3 \
          where id = $1 and active and archived_at is null",
    )
    .bind(product.as_str())
    .bind(minutes)
    .bind(in_order)
    .execute(&mut *tx)
    .await?
    .rows_affected();
    if changed == 0 {
        return Err(ShopError::not_found("no such product on sale"));
    }
    crate::audit::commit(
        tx,
        &session.staff,
        "waitlist_rules",
        &product,
        "changed",
        serde_json::json!({ "claim_minutes": minutes, "in_order": in_order }),
    )
    .await?;
    Ok(see_other("/admin/waitlist?notice=waitlist_rules"))
}

/// `POST /admin/waitlist/{product}/queue`: turn its drop queue on.
pub async fn turn_queue_on(
    shop: web::Data<Shop>,
    session: web::ReqData<Session>,
    product: web::Path<String>,
) -> Result<HttpResponse, ShopError> {
    match crate::queue::turn_on(&shop.pool, Actor::from(&session.staff), &product).await {
        Ok(_) => Ok(see_other("/admin/waitlist?notice=queue_on")),
        Err(crate::queue::QueueError::Refused(why)) => {
            let mut form = Form::default();
            form.fail("queue", super::form::refusal(&why));
            refused(&shop, &session, &product, form, StatusCode::CONFLICT).await
        }
        Err(crate::queue::QueueError::Database(error)) => Err(error.into()),
    }
}

/// `POST /admin/waitlist/{id}/remove`: take an entry off its list.
pub async fn remove_entry(
    shop: web::Data<Shop>,
    session: web::ReqData<Session>,
    id: web::Path<String>,
) -> Result<HttpResponse, ShopError> {
    let gone = || ShopError::not_found("no such entry in line");
    let id = uuid::Uuid::parse_str(&id).map_err(|_| gone())?;
    if waitlist::remove(&shop.pool, Actor::from(&session.staff), id).await? {
        Ok(see_other("/admin/waitlist?notice=waitlist_removed"))
    } else {
        Err(gone())
    }
}
