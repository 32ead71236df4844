//! What the hosted payment pages of both providers are made of: one page
//! frame, escaping, money as text, redirects.

use actix_web::HttpResponse;
use actix_web::http::header::{self, ContentType};

/// Money as the hosted pages show it.
pub(crate) fn amount_text(minor: i64, currency: &str) -> String {
    format!(
        "{}.{:02} {}",
        minor / 100,
        (minor % 100).unsigned_abs(),
        escape(&currency.to_uppercase())
    )
}

pub(crate) fn page(title: &str, body: &str) -> HttpResponse {
    HttpResponse::Ok().content_type(ContentType::html()).body(format!(
        "<!doctype html><html lang=\"en\"><head><meta charset=\"utf-8\">\
         <meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\
         <title>{title}</title><style>body{{font-family:system-ui,sans-serif;max-width:30rem;margin:2rem auto;padding:0 1rem}}\
         button{{font-size:1rem;padding:.6rem 1rem;margin:.25rem 0;width:100%}}.note{{color:#555}}</style></head>\
         <body><p class=\"note\">Holdfast payment sandbox — no real money moves.</p>{body}</body></html>"
    ))
}

/// A page that says why nothing happened (an unknown page or action): 404.
pub(crate) fn not_found(message: &str) -> HttpResponse {
    HttpResponse::NotFound()
        .content_type(ContentType::plaintext())
        .body(message.to_owned())
}

pub(crate) fn escape(text: &str) -> String {
    text.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
        .replace('\'', "&#39;")
}

pub(crate) fn redirect(url: &str) -> HttpResponse {
    HttpResponse::SeeOther()
        .insert_header((header::LOCATION, url.to_owned()))
        .finish()
}
