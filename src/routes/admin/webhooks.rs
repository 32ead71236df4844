//! The owner's Webhooks pages: endpoints (add one, its secret shown once),
//! each endpoint's deliveries with every attempt, enabling one that was
//! disabled for failing, and replaying one delivery or all since a moment.
//! Thin handlers over `crate::outgoing`. A form refused (an address not
//! allowed, no event, a moment not understood) comes back on its own page
//! with what was typed and the reason beside its field.

use actix_web::http::StatusCode;
use actix_web::{HttpResponse, web};
use askama::Template;
use chrono::{DateTime, Utc};

use super::form::{Form, refusal};
use super::notices::NoticeQuery;
use super::pages::{Nav, nav, render, see_other};
use crate::audit::Actor;
use crate::outgoing::{self, AttemptRow, DeliveryRow, EndpointRow, EventType, Replay};
use crate::routes::ShopError;
use crate::staff::Session;
use crate::state::Shop;

impl From<outgoing::WebhookError> for ShopError {
    fn from(error: outgoing::WebhookError) -> Self {
        match error {
            outgoing::WebhookError::Database(error) => error.into(),
            other => ShopError::bad_request(&format!("{other}; nothing was changed")),
        }
    }
}

#[derive(Template)]
#[template(path = "admin/webhooks.html")]
pub(super) struct WebhooksPage {
    nav: Nav,
    endpoints: Vec<EndpointRow>,
    events: [EventType; EventType::ALL.len()],
    /// The endpoint just made and its secret, shown this once.
    added: Option<outgoing::Added>,
    /// The form to add one: empty, or as typed when it was refused.
    form: Form,
}

/// `GET /admin/webhooks`.
pub async fn webhooks_page(
    shop: web::Data<Shop>,
    session: web::ReqData<Session>,
    notice: web::Query<NoticeQuery>,
) -> Result<HttpResponse, ShopError> {
    let page = WebhooksPage {
        nav: nav(&shop, &session, &notice).await?,
        endpoints: outgoing::endpoints(&shop.pool).await?,
        events: EventType::ALL,
        added: None,
        form: Form::default(),
    };
    render(StatusCode::OK, &page)
}

/// `POST /admin/webhooks`: a new endpoint. The answer is the page itself,
/// with the secret (never stored in the clear, never shown again); a
/// refused one is the page with the form as typed and why (400).
pub async fn add_endpoint(
    shop: web::Data<Shop>,
    session: web::ReqData<Session>,
    form: web::Form<Vec<(String, String)>>,
) -> Result<HttpResponse, ShopError> {
    let mut form = Form::typed(form.into_inner());
    let url = form.value("url").to_owned();
    let events = EventType::parse_list(&form.all("event").join(","));
    let added = match events {
        Err(error) => {
            form.fail("event", refusal(&error.to_string()));
            None
        }
        Ok(events) => {
            let new = outgoing::NewEndpoint {
                url,
                events,
                // from the admin, only the operator's setting allows it
                allow_private: shop.webhooks_allow_private,
            };
            let actor = Actor::from(&session.staff);
            match outgoing::add_endpoint(&shop.pool, &shop.session_key, actor, &new).await {
                Ok(added) => Some(added),
                Err(outgoing::WebhookError::Database(error)) => return Err(error.into()),
                Err(other) => {
                    let said = other.to_string();
                    let field = if said.contains("event") {
                        "event"
                    } else {
                        "url"
                    };
                    form.fail(field, refusal(&said));
                    None
                }
            }
        }
    };
    let status = if added.is_some() {
        form = Form::default();
        StatusCode::OK
    } else {
        StatusCode::BAD_REQUEST
    };
    let page = WebhooksPage {
        nav: nav(&shop, &session, &NoticeQuery::default()).await?,
        endpoints: outgoing::endpoints(&shop.pool).await?,
        events: EventType::ALL,
        added,
        form,
    };
    render(status, &page)
}

#[derive(Template)]
#[template(path = "admin/webhook.html")]
pub(super) struct EndpointPage {
    nav: Nav,
    endpoint: EndpointRow,
    deliveries: Vec<DeliveryRow>,
    attempts: Vec<AttemptRow>,
    /// The replay form: empty, or as typed when it was refused.
    form: Form,
}

impl EndpointPage {
    fn attempts_of(&self, job: &i64) -> Vec<&AttemptRow> {
        self.attempts.iter().filter(|a| a.job_id == *job).collect()
    }
}

async fn endpoint_or_404(shop: &Shop, id: &str) -> Result<EndpointRow, ShopError> {
    outgoing::endpoint(&shop.pool, id)
        .await?
        .ok_or_else(|| ShopError::not_found("no such webhook endpoint"))
}

/// `GET /admin/webhooks/{id}`: the endpoint's deliveries, newest first,
/// each with its attempts.
pub async fn endpoint_page(
    shop: web::Data<Shop>,
    session: web::ReqData<Session>,
    id: web::Path<String>,
    notice: web::Query<NoticeQuery>,
) -> Result<HttpResponse, ShopError> {
    let endpoint = endpoint_or_404(&shop, &id).await?;
    let nav = nav(&shop, &session, &notice).await?;
    endpoint_answer(&shop, nav, endpoint, Form::default(), StatusCode::OK).await
}

/// An endpoint's page, with its replay form as given.
async fn endpoint_answer(
    shop: &Shop,
    nav: Nav,
    endpoint: EndpointRow,
    form: Form,
    status: StatusCode,
) -> Result<HttpResponse, ShopError> {
    let page = EndpointPage {
        nav,
        deliveries: outgoing::deliveries(&shop.pool, &endpoint.id, super::pages::LIST_LIMIT)
            .await?,
        attempts: outgoing::attempts(&shop.pool, &endpoint.id, 2000).await?,
        endpoint,
        form,
    };
    render(status, &page)
}

/// `POST /admin/webhooks/{id}/enable`.
pub async fn enable(
    shop: web::Data<Shop>,
    session: web::ReqData<Session>,
    id: web::Path<String>,
) -> Result<HttpResponse, ShopError> {
    let endpoint = endpoint_or_404(&shop, &id).await?;
    outgoing::set_enabled(&shop.pool, Actor::from(&session.staff), &endpoint.id, true).await?;
    Ok(see_other(&format!(
        "/admin/webhooks/{}?notice=webhook_enabled",
        endpoint.id
    )))
}

/// `POST /admin/webhooks/{id}/disable`.
pub async fn disable(
    shop: web::Data<Shop>,
    session: web::ReqData<Session>,
    id: web::Path<String>,
) -> Result<HttpResponse, ShopError> {
    let endpoint = endpoint_or_404(&shop, &id).await?;
    outgoing::set_enabled(&shop.pool, Actor::from(&session.staff), &endpoint.id, false).await?;
    Ok(see_other(&format!(
        "/admin/webhooks/{}?notice=webhook_disabled",
        endpoint.id
    )))
}

/// `POST /admin/webhooks/{id}/deliveries/{job}/replay`: one delivery again.
pub async fn replay_one(
    shop: web::Data<Shop>,
    session: web::ReqData<Session>,
    path: web::Path<(String, String)>,
) -> Result<HttpResponse, ShopError> {
    let (id, job) = path.into_inner();
    let endpoint = endpoint_or_404(&shop, &id).await?;
    let job: i64 = job
        .parse()
        .map_err(|_| ShopError::not_found("no such delivery"))?;
    let replayed = outgoing::replay(
        &shop.pool,
        Actor::from(&session.staff),
        &endpoint.id,
        Replay::One(job),
    )
    .await?;
    if replayed == 0 {
        return Err(ShopError::not_found("no such delivery to this endpoint"));
    }
    Ok(see_other(&format!(
        "/admin/webhooks/{}?notice=webhook_replayed&committed=1",
        endpoint.id
    )))
}

/// A moment typed in the replay form: `2026-12-01T18:00` in the shop's
/// zone (a `datetime-local` field), or a moment with its offset.
fn since(shop: &Shop, typed: &str) -> Result<DateTime<Utc>, String> {
    let typed = typed.trim();
    if let Ok(at) = DateTime::parse_from_rfc3339(typed) {
        return Ok(at.with_timezone(&Utc));
    }
    let local = chrono::NaiveDateTime::parse_from_str(typed, "%Y-%m-%dT%H:%M")
        .or_else(|_| chrono::NaiveDateTime::parse_from_str(typed, "%Y-%m-%dT%H:%M:%S"))
        .map_err(|_| {
            "Give the moment as a day and a time, like 2026-12-01 18:00. Nothing was changed."
                .to_owned()
        })?;
    shop.zone()
        .at(local.date(), local.time())
        .map_err(|e| refusal(&e))
}

/// `POST /admin/webhooks/{id}/replay`: every delivery of a message made
/// since a moment, again. A moment not understood is said on the page,
/// with what was typed.
pub async fn replay_since(
    shop: web::Data<Shop>,
    session: web::ReqData<Session>,
    id: web::Path<String>,
    form: web::Form<Vec<(String, String)>>,
) -> Result<HttpResponse, ShopError> {
    let endpoint = endpoint_or_404(&shop, &id).await?;
    let mut form = Form::typed(form.into_inner());
    let at = match since(&shop, form.value("since")) {
        Ok(at) => at,
        Err(message) => {
            form.fail("since", message);
            let nav = nav(&shop, &session, &NoticeQuery::default()).await?;
            return endpoint_answer(&shop, nav, endpoint, form, StatusCode::BAD_REQUEST).await;
        }
    };
    let replayed = outgoing::replay(
        &shop.pool,
        Actor::from(&session.staff),
        &endpoint.id,
        Replay::Since(at),
    )
    .await?;
    Ok(see_other(&format!(
        "/admin/webhooks/{}?notice=webhook_replayed&committed={replayed}",
        endpoint.id
    )))
}
