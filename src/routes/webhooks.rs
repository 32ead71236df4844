use actix_web::{HttpRequest, HttpResponse, web};
use futures::StreamExt;

use crate::payments::ProviderKind;
use crate::state::Shop;
use crate::webhooks::Verdict;

/// Largest webhook body we read; the providers' events are far smaller.
pub const MAX_WEBHOOK_BYTES: usize = 256 * 1024;

/// `POST /webhooks/{provider}` (`stripe`, `razorpay`). Bad input is 400 and
/// changes nothing; anything verified is answered 2xx once its effect (if
/// any) is committed.
pub async fn webhook(
    shop: web::Data<Shop>,
    request: HttpRequest,
    provider: web::Path<String>,
    payload: web::Payload,
) -> HttpResponse {
    let Some(provider) = ProviderKind::parse(&provider).and_then(|k| shop.payments.get(k)) else {
        return HttpResponse::NotFound().body("no such webhook here");
    };
    let name = provider.kind().as_str();
    let Some(body) = read_limited(payload).await else {
        tracing::warn!(
            provider = name,
            verdict = "rejected",
            reason = "unreadable or oversized",
            "webhook"
        );
        return HttpResponse::BadRequest().body("body unreadable or too large");
    };
    if !storable_json(&body) {
        crate::metrics::webhook(name, "rejected");
        tracing::warn!(
            provider = name,
            verdict = "rejected",
            reason = "text that cannot be stored",
            "webhook"
        );
        return HttpResponse::BadRequest().body("body carries a NUL character or is not UTF-8");
    }
    let header = |name: &str| {
        request
            .headers()
            .get(name)
            .and_then(|value| value.to_str().ok())
            .map(str::to_owned)
    };
    let now = chrono::Utc::now().timestamp();
    let verdict = shop
        .webhooks
        .receive(provider.as_ref(), &header, &body, now)
        .await;
    answer(name, verdict)
}

/// Whether a JSON body's strings could all be stored: UTF-8, with no NUL
/// raw or escaped (`\u0000`). No provider sends one; anything that does is
/// not an event of theirs.
fn storable_json(body: &[u8]) -> bool {
    std::str::from_utf8(body)
        .is_ok_and(|text| !text.contains('\0') && !text.to_ascii_lowercase().contains("\\u0000"))
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
        Ok(Verdict::Rejected { reason }) => {
            crate::metrics::webhook(provider, "rejected");
            tracing::warn!(provider, verdict = "rejected", %reason, "webhook");
            HttpResponse::BadRequest().body(reason)
        }
        Ok(verdict) => {
            crate::metrics::webhook(provider, verdict.label());
            if let Verdict::Confirmed { fulfilment } = &verdict {
                crate::metrics::confirmation(fulfilment.label(), "webhook");
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

/// One route for every provider's webhooks.
pub fn routes(config: &mut web::ServiceConfig) {
    config.route("/webhooks/{provider}", web::post().to(webhook));
}
