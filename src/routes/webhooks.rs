use actix_web::{HttpRequest, HttpResponse, web};
use futures::StreamExt;

use crate::startup::Shop;
use crate::webhooks::razorpay;
use crate::webhooks::stripe::{self, Verdict};

/// Largest webhook body we read; Stripe's events are far smaller.
pub const MAX_WEBHOOK_BYTES: usize = 256 * 1024;

/// `POST /webhooks/stripe`. Bad input is 400 and changes nothing; anything
/// verified is answered 2xx once its effect (if any) is committed.
pub async fn stripe_webhook(
    shop: web::Data<Shop>,
    request: HttpRequest,
    payload: web::Payload,
) -> HttpResponse {
    let Some(body) = read_limited(payload).await else {
        tracing::warn!(
            verdict = "rejected",
            reason = "unreadable or oversized",
            "stripe webhook"
        );
        return HttpResponse::BadRequest().body("body unreadable or too large");
    };
    let signature = header(&request, "Stripe-Signature");
    let now = chrono::Utc::now().timestamp();
    let verdict = stripe::receive(
        &shop.pool,
        shop.stripe_webhook_secret.as_ref(),
        signature,
        &body,
        now,
    )
    .await;
    answer("stripe", verdict)
}

/// `POST /webhooks/razorpay`, under the same rules.
pub async fn razorpay_webhook(
    shop: web::Data<Shop>,
    request: HttpRequest,
    payload: web::Payload,
) -> HttpResponse {
    let Some(body) = read_limited(payload).await else {
        tracing::warn!(
            verdict = "rejected",
            reason = "unreadable or oversized",
            "razorpay webhook"
        );
        return HttpResponse::BadRequest().body("body unreadable or too large");
    };
    let secret = shop
        .razorpay
        .as_ref()
        .and_then(|r| r.webhook_secret.as_ref());
    let verdict = razorpay::receive(
        &shop.pool,
        secret,
        header(&request, "X-Razorpay-Signature"),
        header(&request, "X-Razorpay-Event-Id"),
        &body,
    )
    .await;
    answer("razorpay", verdict)
}

fn header<'a>(request: &'a HttpRequest, name: &str) -> Option<&'a str> {
    request
        .headers()
        .get(name)
        .and_then(|value| value.to_str().ok())
}

/// The raw body, at most [`MAX_WEBHOOK_BYTES`]; `None` past that.
async fn read_limited(mut payload: web::Payload) -> Option<web::BytesMut> {
    let mut body = web::BytesMut::new();
    while let Some(chunk) = payload.next().await {
        let chunk = chunk.ok()?;
        if body.len() + chunk.len() > MAX_WEBHOOK_BYTES {
            return None;
        }
        body.extend_from_slice(&chunk);
    }
    Some(body)
}

fn answer(
    provider: &str,
    verdict: Result<Verdict, crate::checkout::CheckoutError>,
) -> HttpResponse {
    match verdict {
        Ok(Verdict::Rejected(reason)) => {
            crate::metrics::webhook(provider, "rejected");
            tracing::warn!(provider, verdict = "rejected", %reason, "webhook");
            HttpResponse::BadRequest().body(reason)
        }
        Ok(verdict) => {
            crate::metrics::webhook(provider, verdict.label());
            if let Verdict::Confirmed(fulfilment) = &verdict {
                crate::metrics::confirmation(fulfilment.label(), &format!("{provider}-webhook"));
            }
            tracing::info!(provider, verdict = verdict.label(), ?verdict, "webhook");
            HttpResponse::Ok()
                .json(serde_json::json!({ "received": true, "verdict": verdict.label() }))
        }
        Err(error) => {
            // providers retry non-2xx: nothing was committed, so a retry is safe
            crate::metrics::webhook(provider, "failed");
            tracing::error!(provider, error = format!("{error:#}"), "webhook failed");
            HttpResponse::ServiceUnavailable().body("try again")
        }
    }
}
