//! What every answer carries to keep browsers safe, and the answers for
//! requests that match nothing or cannot be read.

use std::sync::atomic::Ordering;

use actix_web::middleware::DefaultHeaders;
use actix_web::{HttpResponse, web};

use super::ShopError;
use crate::state::Shop;

/// Every page's policy: our own scripts, styles and images only; no
/// plugins, no `<base>`, no framing; violations reported to us. Pages carry
/// no inline script or style, so nothing needs `'unsafe-inline'`.
///
/// `form-action` is left out on purpose: the checkout form's answer is a
/// redirect to the payment provider, which Chrome would check against it.
pub const CONTENT_SECURITY_POLICY: &str = "default-src 'self'; script-src 'self'; \
     style-src 'self'; img-src 'self' data:; connect-src 'self'; object-src 'none'; \
     base-uri 'none'; frame-ancestors 'none'; report-uri /csp-report";

/// Headers added to every answer that does not set its own.
pub fn security_headers(https: bool) -> DefaultHeaders {
    let headers = DefaultHeaders::new()
        .add(("Content-Security-Policy", CONTENT_SECURITY_POLICY))
        .add(("X-Frame-Options", "DENY"))
        .add(("X-Content-Type-Options", "nosniff"))
        // order pages are reached by a secret link: never leak it onward
        .add(("Referrer-Policy", "no-referrer"))
        .add((
            "Permissions-Policy",
            "camera=(), microphone=(), geolocation=()",
        ));
    if https {
        headers.add(("Strict-Transport-Security", "max-age=31536000"))
    } else {
        headers
    }
}

/// A form, query or path that could not be read.
pub fn bad_form() -> ShopError {
    ShopError::bad_request("that request was not filled in as expected; nothing was changed")
}

/// Anything no route matches.
pub async fn not_found() -> Result<HttpResponse, ShopError> {
    Err(ShopError::not_found("there is nothing at this address"))
}

/// `POST /csp-report`: a browser refused something a page asked for. Logged
/// (directive and blocked address only, shortened; never the page, whose
/// address may be an order's secret link) and counted.
pub async fn csp_report(shop: web::Data<Shop>, body: web::Bytes) -> HttpResponse {
    if body.len() > 16 * 1024 {
        return HttpResponse::PayloadTooLarge().finish();
    }
    let report: serde_json::Value = serde_json::from_slice(&body).unwrap_or_default();
    let field = |name: &str| -> String {
        report["csp-report"][name]
            .as_str()
            .unwrap_or("")
            .chars()
            .take(200)
            .collect()
    };
    shop.csp_reports.fetch_add(1, Ordering::Relaxed);
    tracing::warn!(
        directive = %field("violated-directive"),
        blocked = %field("blocked-uri"),
        "browser reported a Content Security Policy violation"
    );
    HttpResponse::NoContent().finish()
}

/// Where browsers report Content Security Policy violations.
pub fn routes(config: &mut web::ServiceConfig) {
    config.route("/csp-report", web::post().to(csp_report));
}
