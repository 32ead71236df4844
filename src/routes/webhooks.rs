//! `POST /webhooks/{provider}`: a provider's notification, read up to a
//! size limit, handed to [`crate::webhooks`] to verify and act on, and
//! answered as the provider expects (2xx once its effect is committed).

use actix_web::{HttpRequest, HttpResponse, web};
use futures::StreamExt;

use crate::checkout::CheckoutError;
use crate::payments::{PaymentProvider, ProviderKind, WebhookRequest};
use crate::state::Shop;
use crate::webhooks::{Receipt, Verdict};

/// Largest webhook body we read; the providers' events are far smaller.
pub const MAX_WEBHOOK_BYTES: usize = 256 * 1024;

/// `POST /webhooks/{provider}` (a provider's name). Bad input is 400 and
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
        return refused(
            name,
            "unreadable or oversized",
            "body unreadable or too large",
        );
    };
    if !storable_json(&body) {
        crate::metrics::webhook(name, "rejected");
        return refused(
            name,
            "text that cannot be stored",
            "body carries a NUL character or is not UTF-8",
        );
    }
    let headers = request
        .headers()
        .iter()
        .filter_map(|(name, value)| {
            Some((name.as_str().to_owned(), value.to_str().ok()?.to_owned()))
        })
        .collect();
    let delivery = WebhookRequest::new(headers, &body, chrono::Utc::now().timestamp());
    // run again whole while the database is away, for less than providers
    // wait for an answer (each notification is written with its event id,
    // so one taken in before is recognised); past that, 503 and the
    // provider sends it again
    let receipt = crate::retry::retry("webhook", crate::retry::Bound::Webhook, || {
        shop.webhooks.receive(provider.as_ref(), &delivery)
    })
    .await;
    answer(provider.as_ref(), receipt)
}

/// A body turned away before it is read as an event: logged with why,
/// answered 400 in `words`.
fn refused(provider: &str, reason: &str, words: &'static str) -> HttpResponse {
    tracing::warn!(provider, verdict = "rejected", reason, "webhook");
    HttpResponse::BadRequest().body(words)
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

fn answer(provider: &dyn PaymentProvider, receipt: Result<Receipt, CheckoutError>) -> HttpResponse {
    let name = provider.kind().as_str();
    match receipt {
        Ok(Receipt::Rejected { reason }) => {
            crate::metrics::webhook(name, "rejected");
            tracing::warn!(provider = name, verdict = "rejected", %reason, "webhook");
            HttpResponse::BadRequest().body(reason)
        }
        Ok(Receipt::Taken { verdicts }) => {
            for verdict in &verdicts {
                crate::metrics::webhook(name, verdict.label());
                if let Verdict::Confirmed { fulfilment } = verdict {
                    crate::metrics::confirmation(fulfilment.label(), "webhook");
                }
                tracing::info!(
                    provider = name,
                    verdict = verdict.label(),
                    ?verdict,
                    "webhook"
                );
            }
            if let Some(ack) = provider.acknowledgement(verdicts.len()) {
                return HttpResponse::Ok()
                    .content_type(ack.content_type)
                    .body(ack.body);
            }
            match verdicts.as_slice() {
                [one] => HttpResponse::Ok()
                    .json(serde_json::json!({ "received": true, "verdict": one.label() })),
                many => HttpResponse::Ok().json(serde_json::json!({
                    "received": true,
                    "verdicts": many.iter().map(Verdict::label).collect::<Vec<_>>(),
                })),
            }
        }
        Err(error) => {
            // providers retry non-2xx: nothing of this notification was
            // committed, so a retry is safe
            crate::metrics::webhook(name, "failed");
            tracing::error!(
                provider = name,
                error = format!("{error:#}"),
                "webhook failed"
            );
            HttpResponse::ServiceUnavailable().body("try again")
        }
    }
}

/// One route for every provider's webhooks.
pub fn routes(config: &mut web::ServiceConfig) {
    config.route("/webhooks/{provider}", web::post().to(webhook));
}
