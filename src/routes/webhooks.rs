use actix_web::{HttpRequest, HttpResponse, web};
use futures::StreamExt;

use crate::startup::Shop;
use crate::webhooks::stripe::{self, Verdict};

/// Largest webhook body we read; Stripe's events are far smaller.
pub const MAX_WEBHOOK_BYTES: usize = 256 * 1024;

/// `POST /webhooks/stripe`. Bad input is 400 and changes nothing; anything
/// verified is answered 2xx once its effect (if any) is committed.
pub async fn stripe_webhook(
    shop: web::Data<Shop>,
    request: HttpRequest,
    mut payload: web::Payload,
) -> HttpResponse {
    let mut body = web::BytesMut::new();
    while let Some(chunk) = payload.next().await {
        let Ok(chunk) = chunk else {
            return HttpResponse::BadRequest().body("unreadable body");
        };
        if body.len() + chunk.len() > MAX_WEBHOOK_BYTES {
            tracing::warn!(verdict = "rejected", reason = "oversized", "stripe webhook");
            return HttpResponse::BadRequest().body("body too large");
        }
        body.extend_from_slice(&chunk);
    }
    let signature = request
        .headers()
        .get("Stripe-Signature")
        .and_then(|value| value.to_str().ok());
    let now = chrono::Utc::now().timestamp();
    match stripe::receive(
        &shop.pool,
        shop.stripe_webhook_secret.as_ref(),
        signature,
        &body,
        now,
    )
    .await
    {
        Ok(Verdict::Rejected(reason)) => {
            tracing::warn!(verdict = "rejected", %reason, "stripe webhook");
            HttpResponse::BadRequest().body(reason)
        }
        Ok(verdict) => {
            tracing::info!(verdict = verdict.label(), ?verdict, "stripe webhook");
            HttpResponse::Ok()
                .json(serde_json::json!({ "received": true, "verdict": verdict.label() }))
        }
        Err(error) => {
            // Stripe retries non-2xx: nothing was committed, so a retry is safe
            tracing::error!(error = format!("{error:#}"), "stripe webhook failed");
            HttpResponse::ServiceUnavailable().body("try again")
        }
    }
}
