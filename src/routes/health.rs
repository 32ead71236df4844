use actix_web::http::header::ContentType;
use actix_web::{HttpResponse, web};
use sqlx::PgPool;

/// `GET /metrics`: Prometheus' text format (see [`crate::metrics`]).
pub async fn metrics(pool: web::Data<PgPool>) -> HttpResponse {
    let body = crate::metrics::render(pool.get_ref()).await;
    HttpResponse::Ok()
        .content_type(ContentType(
            "text/plain; version=0.0.4; charset=utf-8"
                .parse()
                .expect("a valid media type"),
        ))
        .insert_header(("Cache-Control", "no-store"))
        .body(body)
}

/// `GET /healthz`: 200 when the database answers, 503 when it does not.
pub async fn healthz(pool: web::Data<PgPool>) -> HttpResponse {
    let answered = tokio::time::timeout(
        std::time::Duration::from_secs(2),
        sqlx::query_scalar::<_, i32>("select 1").fetch_one(pool.get_ref()),
    )
    .await;
    match answered {
        Ok(Ok(_)) => {
            HttpResponse::Ok().json(serde_json::json!({ "status": "ok", "database": "ok" }))
        }
        Ok(Err(error)) => {
            tracing::warn!(%error, "health check: database unavailable");
            HttpResponse::ServiceUnavailable()
                .json(serde_json::json!({ "status": "unavailable", "database": "error" }))
        }
        Err(_) => HttpResponse::ServiceUnavailable()
            .json(serde_json::json!({ "status": "unavailable", "database": "timeout" })),
    }
}
