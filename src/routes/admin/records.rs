//! What staff look back on: payments for pages nobody knows (the
//! activity of staff is `activity`).

use actix_web::http::StatusCode;
use actix_web::{HttpResponse, web};
use askama::Template;

use super::notices::NoticeQuery;
use super::pages::{LIST_LIMIT, Nav, money, nav, render};
use crate::routes::ShopError;
use crate::staff::Session;
use crate::staff::views::{self};
use crate::state::Shop;

#[derive(Template)]
#[template(path = "admin/orphans.html")]
pub(super) struct OrphansPage {
    nav: Nav,
    payments: Vec<views::OrphanRow>,
}

/// `GET /admin/payments/orphans`: signed payments for pages Holdfast does
/// not know, kept so that no money is silently forgotten.
pub async fn orphans(
    shop: web::Data<Shop>,
    session: web::ReqData<Session>,
) -> Result<HttpResponse, ShopError> {
    let page = OrphansPage {
        nav: nav(&shop, &session, &NoticeQuery::default()).await?,
        payments: views::orphan_payments(&shop.pool, LIST_LIMIT).await?,
    };
    render(StatusCode::OK, &page)
}
