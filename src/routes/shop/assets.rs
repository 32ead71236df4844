//! The shop's stylesheet and scripts, served from the binary.

use actix_web::HttpResponse;
use actix_web::http::header;

/// `GET /static/shop.css`
pub async fn stylesheet() -> HttpResponse {
    HttpResponse::Ok()
        .content_type("text/css; charset=utf-8")
        .insert_header((header::CACHE_CONTROL, "public, max-age=3600"))
        .body(include_str!("../../../static/shop.css"))
}

/// `GET /static/live.js`: the pages' live availability.
pub async fn live_script() -> HttpResponse {
    HttpResponse::Ok()
        .content_type("text/javascript; charset=utf-8")
        .insert_header((header::CACHE_CONTROL, "public, max-age=3600"))
        .body(include_str!("../../../static/live.js"))
}

pub async fn razorpay_script() -> HttpResponse {
    HttpResponse::Ok()
        .content_type("text/javascript; charset=utf-8")
        .insert_header((header::CACHE_CONTROL, "public, max-age=3600"))
        .body(include_str!("../../../static/razorpay.js"))
}
