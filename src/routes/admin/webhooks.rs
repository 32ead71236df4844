//! The owner's Webhooks pages: endpoints (add one, its secret shown once),
//! each endpoint's deliveries with every attempt, enabling one that was
//! disabled for failing, and replaying one delivery or all since a moment.
//! Thin handlers over `crate::outgoing`.

use actix_web::http::StatusCode;
use actix_web::{HttpResponse, web};
use askama::Template;
use chrono::{DateTime, Utc};
use serde::Deserialize;

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
    };
    render(StatusCode::OK, &page)
}

/// `POST /admin/webhooks`: a new endpoint. The answer is the page itself,
/// with the secret (never stored in the clear, never shown again).
pub async fn add_endpoint(
    shop: web::Data<Shop>,
    session: web::ReqData<Session>,
    form: web::Form<Vec<(String, String)>>,
) -> Result<HttpResponse, ShopError> {
    let url = form
        .iter()
        .find(|(name, _)| name == "url")
        .map(|(_, v)| v.clone())
        .unwrap_or_default();
    let events: Vec<&str> = form
        .iter()
        .filter(|(name, _)| name == "event")
        .map(|(_, v)| v.as_str())
        .collect();
    let events = EventType::parse_list(&events.join(","))
        .map_err(|e| ShopError::bad_request(&format!("{e}; nothing was changed")))?;
    let added = outgoing::add_endpoint(
        &shop.pool,
        &shop.session_key,
        Actor::from(&session.staff),
        &outgoing::NewEndpoint {
            url,
            events,
            // from the admin, only the operator's setting allows it
            allow_private: shop.webhooks_allow_private,
        },
    )
    .await?;
    let page = WebhooksPage {
        nav: nav(&shop, &session, &NoticeQuery::default()).await?,
        endpoints: outgoing::endpoints(&shop.pool).await?,
        events: EventType::ALL,
        added: Some(added),
    };
    render(StatusCode::OK, &page)
}

#[derive(Template)]
#[template(path = "admin/webhook.html")]
pub(super) struct EndpointPage {
    nav: Nav,
    endpoint: EndpointRow,
    deliveries: Vec<DeliveryRow>,
    attempts: Vec<AttemptRow>,
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
    let page = EndpointPage {
        nav: nav(&shop, &session, &notice).await?,
        deliveries: outgoing::deliveries(&shop.pool, &endpoint.id, super::pages::LIST_LIMIT)
            .await?,
        attempts: outgoing::attempts(&shop.pool, &endpoint.id, 2000).await?,
        endpoint,
    };
    render(StatusCode::OK, &page)
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

#[derive(Deserialize)]
pub struct SinceForm {
    /// `2026-12-01T18:00` in the shop's zone (a `datetime-local` field), or
    /// a moment with its offset.
    since: String,
}

fn since(shop: &Shop, typed: &str) -> Result<DateTime<Utc>, ShopError> {
    let typed = typed.trim();
    if let Ok(at) = DateTime::parse_from_rfc3339(typed) {
        return Ok(at.with_timezone(&Utc));
    }
    let local = chrono::NaiveDateTime::parse_from_str(typed, "%Y-%m-%dT%H:%M")
        .or_else(|_| chrono::NaiveDateTime::parse_from_str(typed, "%Y-%m-%dT%H:%M:%S"))
        .map_err(|_| {
            ShopError::bad_request("give the moment as 2026-12-01T18:00; nothing was changed")
        })?;
    shop.zone
        .at(local.date(), local.time())
        .map_err(|e| ShopError::bad_request(&format!("{e}; nothing was changed")))
}

/// `POST /admin/webhooks/{id}/replay`: every delivery of a message made
/// since a moment, again.
pub async fn replay_since(
    shop: web::Data<Shop>,
    session: web::ReqData<Session>,
    id: web::Path<String>,
    form: web::Form<SinceForm>,
) -> Result<HttpResponse, ShopError> {
    let endpoint = endpoint_or_404(&shop, &id).await?;
    let at = since(&shop, &form.since)?;
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
