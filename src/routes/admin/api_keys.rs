//! The owner's API keys page: make a key with scopes (its token shown
//! once), see each key's last use, revoke one. Thin handlers over
//! `staff::api_keys`.

use actix_web::http::StatusCode;
use actix_web::{HttpResponse, web};
use askama::Template;

use super::notices::NoticeQuery;
use super::pages::{Nav, nav, render, see_other};
use crate::audit::Actor;
use crate::routes::ShopError;
use crate::staff::Session;
use crate::staff::api_keys::{self, ApiKeyRow, Scope};
use crate::state::Shop;

#[derive(Template)]
#[template(path = "admin/api_keys.html")]
pub(super) struct ApiKeysPage {
    nav: Nav,
    keys: Vec<ApiKeyRow>,
    scopes: [Scope; Scope::ALL.len()],
    /// The key just made and its token, shown this once.
    made: Option<(ApiKeyRow, String)>,
}

/// `GET /admin/api-keys`.
pub async fn api_keys_page(
    shop: web::Data<Shop>,
    session: web::ReqData<Session>,
    notice: web::Query<NoticeQuery>,
) -> Result<HttpResponse, ShopError> {
    let page = ApiKeysPage {
        nav: nav(&shop, &session, &notice).await?,
        keys: api_keys::list(&shop.pool).await?,
        scopes: Scope::ALL,
        made: None,
    };
    render(StatusCode::OK, &page)
}

/// `POST /admin/api-keys`: fields `name` and `scope` (once per scope). The
/// answer is the page itself, with the token.
pub async fn create(
    shop: web::Data<Shop>,
    session: web::ReqData<Session>,
    form: web::Form<Vec<(String, String)>>,
) -> Result<HttpResponse, ShopError> {
    let name = form
        .iter()
        .find(|(n, _)| n == "name")
        .map(|(_, v)| v.as_str())
        .unwrap_or("");
    let mut scopes = Vec::new();
    for (_, value) in form.iter().filter(|(n, _)| n == "scope") {
        let scope = Scope::parse(value).ok_or_else(|| {
            ShopError::bad_request("that is not a scope of API keys; nothing was changed")
        })?;
        if !scopes.contains(&scope) {
            scopes.push(scope);
        }
    }
    let made = api_keys::create(&shop.pool, Actor::from(&session.staff), name, &scopes).await?;
    let page = ApiKeysPage {
        nav: nav(&shop, &session, &NoticeQuery::default()).await?,
        keys: api_keys::list(&shop.pool).await?,
        scopes: Scope::ALL,
        made: Some(made),
    };
    render(StatusCode::OK, &page)
}

/// `POST /admin/api-keys/{id}/revoke`.
pub async fn revoke(
    shop: web::Data<Shop>,
    session: web::ReqData<Session>,
    id: web::Path<String>,
) -> Result<HttpResponse, ShopError> {
    Ok(see_other(
        if api_keys::revoke(&shop.pool, Actor::from(&session.staff), &id).await? {
            "/admin/api-keys?notice=api_key_revoked"
        } else {
            "/admin/api-keys?notice=staff_unchanged"
        },
    ))
}
