use actix_web::http::header::ContentType;
use actix_web::{HttpRequest, HttpResponse, web};
use sqlx::PgPool;

use crate::metrics::Access;
use crate::state::Shop;

/// `GET /metrics`: Prometheus' text format (see [`crate::metrics`]), for
/// monitoring only: the bearer token when one is set, else loopback only.
pub async fn metrics(request: HttpRequest, shop: web::Data<Shop>) -> HttpResponse {
    let headers = request.headers();
    let loopback = crate::limits::client::client_ip(&request, &shop.fairness.proxies)
        .is_some_and(|ip| ip.is_loopback());
    let forwarded = headers.contains_key("X-Forwarded-For") || headers.contains_key("Forwarded");
    let authorization = headers.get("Authorization").map(|value| value.as_bytes());
    match shop.metrics.access(loopback, authorization, forwarded) {
        Access::Allowed => {}
        Access::NeedsToken => {
            return HttpResponse::Unauthorized()
                .insert_header(("WWW-Authenticate", "Bearer realm=\"metrics\""))
                .insert_header(("Cache-Control", "no-store"))
                .body("metrics need the bearer token (HOLDFAST_METRICS_TOKEN)\n");
        }
        Access::LoopbackOnly => {
            return HttpResponse::Forbidden()
                .insert_header(("Cache-Control", "no-store"))
                .body(
                    "metrics answer only this machine; set HOLDFAST_METRICS_TOKEN to scrape \
                     from elsewhere\n",
                );
        }
    }
    let body = shop.metrics.render(&shop.pool).await;
    HttpResponse::Ok()
        .content_type(ContentType(
            "text/plain; version=0.0.4; charset=utf-8"
                .parse()
                .expect("a valid media type"),
        ))
        .insert_header(("Cache-Control", "no-store"))
        .body(body)
}

/// `GET /healthz`: 200 when the database answers as a primary; 503 when
/// it does not answer, or answers as a standby (in a failover, before the
/// endpoint leads to the new primary).
pub async fn healthz(pool: web::Data<PgPool>) -> HttpResponse {
    let answered = tokio::time::timeout(
        std::time::Duration::from_secs(2),
        sqlx::query_scalar::<_, bool>("select pg_is_in_recovery()").fetch_one(pool.get_ref()),
    )
    .await;
    match answered {
        Ok(Ok(false)) => {
            HttpResponse::Ok().json(serde_json::json!({ "status": "ok", "database": "ok" }))
        }
        Ok(Ok(true)) => HttpResponse::ServiceUnavailable()
            .json(serde_json::json!({ "status": "unavailable", "database": "standby" })),
        Ok(Err(error)) => {
            tracing::warn!(%error, "health check: database unavailable");
            HttpResponse::ServiceUnavailable()
                .json(serde_json::json!({ "status": "unavailable", "database": "error" }))
        }
        Err(_) => HttpResponse::ServiceUnavailable()
            .json(serde_json::json!({ "status": "unavailable", "database": "timeout" })),
    }
}

/// `/healthz` and `/metrics`.
pub fn routes(config: &mut web::ServiceConfig) {
    config
        .route("/healthz", web::get().to(healthz))
        .route("/metrics", web::get().to(metrics));
}
