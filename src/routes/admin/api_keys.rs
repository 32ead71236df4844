//! The owner's API keys page: make a key with scopes (its token shown
//! once), see each key's last use, revoke one. Thin handlers over
//! `staff::api_keys`.

use actix_web::http::StatusCode;
use actix_web::{HttpResponse, web};
use askama::Template;

use super::form::{Form, refusal};
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
    /// The form to make one: empty, or as typed when it was refused.
    form: Form,
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
        form: Form::default(),
    };
    render(StatusCode::OK, &page)
}

/// `POST /admin/api-keys`: fields `name` and `scope` (once per scope). The
/// answer is the page itself, with the token; a refused key is the page
/// with the form as typed and why (400).
pub async fn create(
    shop: web::Data<Shop>,
    session: web::ReqData<Session>,
    form: web::Form<Vec<(String, String)>>,
) -> Result<HttpResponse, ShopError> {
    let mut form = Form::typed(form.into_inner());
    let mut scopes = Vec::new();
    let mut unknown = false;
    for value in form.all("scope") {
        match Scope::parse(value) {
            Some(scope) if !scopes.contains(&scope) => scopes.push(scope),
            Some(_) => {}
            None => unknown = true,
        }
    }
    if unknown {
        form.fail(
            "scope",
            "That is not a scope of API keys. Nothing was changed.",
        );
    }
    let mut made = None;
    if form.ok() {
        let name = form.value("name").to_owned();
        match api_keys::create(&shop.pool, Actor::from(&session.staff), &name, &scopes).await {
            Ok(key) => made = Some(key),
            Err(crate::staff::StaffError::InvalidInput(message)) => {
                let field = if message.contains("scope") {
                    "scope"
                } else {
                    "name"
                };
                form.fail(field, refusal(&message));
            }
            Err(other) => return Err(other.into()),
        }
    }
    let status = if made.is_some() {
        form = Form::default();
        StatusCode::OK
    } else {
        StatusCode::BAD_REQUEST
    };
    let page = ApiKeysPage {
        nav: nav(&shop, &session, &NoticeQuery::default()).await?,
        keys: api_keys::list(&shop.pool).await?,
        scopes: Scope::ALL,
        made,
        form,
    };
    render(status, &page)
}

/// `POST /admin/api-keys/{id}/revoke`.
pub async fn revoke(
    shop: web::Data<Shop>,
    session: web::ReqData<Session>,
    id: web::Path<String>,
) -> Result<HttpResponse, ShopError> {
    let revoked = api_keys::revoke(&shop.pool, Actor::from(&session.staff), &id).await?;
    // keys sign from memory: this process forgets the key before the
    // owner is told (every other hears of it within milliseconds)
    shop.live.refresh().await;
    Ok(see_other(if revoked {
        "/admin/api-keys?notice=api_key_revoked"
    } else {
        "/admin/api-keys?notice=staff_unchanged"
    }))
}
