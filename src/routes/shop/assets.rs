//! The shop's stylesheet and scripts, served from the binary.

use actix_web::{HttpResponse, web};

use crate::state::Shop;
use actix_web::http::header;

/// `GET /static/shop.css`
pub async fn stylesheet() -> HttpResponse {
    HttpResponse::Ok()
        .content_type("text/css; charset=utf-8")
        .insert_header((header::CACHE_CONTROL, "public, max-age=3600"))
        .body(include_str!("../../../static/shop.css"))
}

/// `GET /static/theme/{rrggbb}.css`: the shop's accent colour. The address
/// names the colour, so browsers keep it for good.
pub async fn theme(digits: web::Path<String>) -> HttpResponse {
    let digits = digits.trim_end_matches(".css");
    match crate::storefront::theme_css(digits) {
        Some(css) => HttpResponse::Ok()
            .content_type("text/css; charset=utf-8")
            .insert_header((header::CACHE_CONTROL, "public, max-age=31536000, immutable"))
            .body(css),
        None => HttpResponse::NotFound().finish(),
    }
}

/// `GET /images/{id}/{width}`: an image staff uploaded, at the stored
/// width that best fits ([`crate::images`]). The address names the
/// image's content, so browsers keep it for good.
pub async fn image(
    shop: web::Data<Shop>,
    path: web::Path<(String, String)>,
) -> Result<HttpResponse, crate::routes::ShopError> {
    let (id, width) = path.into_inner();
    let width = width.parse::<i32>().ok().filter(|w| (1..=6000).contains(w));
    let named = id.len() == 32 && id.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'));
    let found = match width.filter(|_| named) {
        Some(width) => crate::images::variant(&shop.pool, &id, width).await?,
        None => None,
    };
    let Some(variant) = found else {
        return Err(crate::routes::ShopError::not_found(
            "There is no such image.",
        ));
    };
    Ok(HttpResponse::Ok()
        .content_type(variant.content_type)
        .insert_header((header::CACHE_CONTROL, "public, max-age=31536000, immutable"))
        .insert_header((header::ETAG, format!("\"{id}-{}\"", variant.width)))
        .body(variant.bytes))
}

/// `GET /static/live.js`: the pages' live availability.
pub async fn live_script() -> HttpResponse {
    HttpResponse::Ok()
        .content_type("text/javascript; charset=utf-8")
        .insert_header((header::CACHE_CONTROL, "public, max-age=3600"))
        .body(include_str!("../../../static/live.js"))
}

/// `GET /static/countdown.js`: the pay page counts down its hold.
pub async fn countdown_script() -> HttpResponse {
    HttpResponse::Ok()
        .content_type("text/javascript; charset=utf-8")
        .insert_header((header::CACHE_CONTROL, "public, max-age=3600"))
        .body(include_str!("../../../static/countdown.js"))
}

/// `GET /static/verify.js`: a drop queue's page checks its order.
pub async fn verify_script() -> HttpResponse {
    HttpResponse::Ok()
        .content_type("text/javascript; charset=utf-8")
        .insert_header((header::CACHE_CONTROL, "public, max-age=3600"))
        .body(include_str!("../../../static/verify.js"))
}

/// `GET /static/pay/{provider}.js`: the script that opens a provider's
/// embedded checkout on our pay page, for providers that have one.
pub async fn pay_script(shop: web::Data<Shop>, provider: web::Path<String>) -> HttpResponse {
    let opener = crate::payments::ProviderKind::parse(&provider)
        .and_then(|kind| shop.payments.get(kind))
        .and_then(|provider| provider.embedded_opener());
    match opener {
        Some(script) => HttpResponse::Ok()
            .content_type("text/javascript; charset=utf-8")
            .insert_header((header::CACHE_CONTROL, "public, max-age=3600"))
            .body(script),
        None => HttpResponse::NotFound().finish(),
    }
}
