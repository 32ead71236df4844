//! Shopper pages: catalogue, basket, checkout start, the return from the
//! provider, the order page. Thin: parse, call checkout, render. One file
//! per page group; this one holds what they share and the routes.

mod assets;
mod availability;
pub(super) mod basket;
pub(crate) mod catalogue;
mod checkout;
mod orders;
mod queue;
mod returns;
mod waitlist;

use actix_web::http::StatusCode;
use actix_web::http::header;
use actix_web::{HttpRequest, HttpResponse, web};
use askama::Template;

use crate::routes::ShopError;
use crate::routes::render::render;
use crate::state::Shop;

pub use availability::MAX_STOCK_IDS;
pub use catalogue::{CatalogueItem, Section};
pub use checkout::CheckoutForm;

pub(super) const BASKET_COOKIE: &str = "hf_basket";

/// The basket cookie's id, if it is one of ours.
pub(super) fn basket_id(request: &HttpRequest) -> Option<String> {
    request
        .cookie(BASKET_COOKIE)
        .map(|c| c.value().to_owned())
        .filter(|id| id.len() == 64 && id.bytes().all(|b| b.is_ascii_hexdigit()))
}

pub(super) async fn basket_count(shop: &Shop, request: &HttpRequest) -> Result<i64, ShopError> {
    let Some(id) = basket_id(request) else {
        return Ok(0);
    };
    let count = crate::retry::retry("basket_read", crate::retry::Bound::Shopper, || {
        crate::checkout::basket::count(&shop.pool, &id)
    });
    Ok(count.await?)
}

/// What a sold-out product's page says while shoppers hold its units: it
/// is not final. Empty when nothing is pending (sold out for good).
pub fn pending_note(
    pending: i32,
    first_back_at: Option<chrono::DateTime<chrono::Utc>>,
    now: chrono::DateTime<chrono::Utc>,
    zone: crate::clock::ShopZone,
) -> String {
    if pending <= 0 {
        return String::new();
    }
    let when = match first_back_at.filter(|at| *at > now) {
        Some(at) => format!("by {}", zone.time(at)),
        None => "any moment now".to_owned(),
    };
    format!(
        "Sold out for now: {pending} reserved by shoppers who are paying. If they do not finish, \
         the first come back {when}."
    )
}

/// The order an unguessable link names (64 hex digits), or 404.
pub(super) async fn order_of_link(
    shop: &Shop,
    token: &str,
) -> Result<crate::checkout::Order, ShopError> {
    let unknown = || ShopError::not_found("no such order");
    if token.len() != 64 || !token.bytes().all(|b| b.is_ascii_hexdigit()) {
        return Err(unknown());
    }
    crate::retry::retry("order_read", crate::retry::Bound::Shopper, || {
        crate::checkout::order_by_token(&shop.pool, token)
    })
    .await?
    .ok_or_else(unknown)
}

/// The 429 for a take from an address's bucket that was refused.
pub(super) fn too_fast(
    address: &str,
    refused: crate::limits::TooFast,
) -> Result<HttpResponse, ShopError> {
    let seconds = refused.retry_after.as_secs().max(1);
    tracing::info!(%address, seconds, "an address over its rate");
    let mut page = message(
        StatusCode::TOO_MANY_REQUESTS,
        "Too many requests from your address",
        &format!(
            "So that everyone gets a fair chance, one address can add to baskets and start \
             checkouts only so often. Please try again in {seconds} seconds; nothing was changed."
        ),
        "/basket",
        "Back to your basket",
    )?;
    page.headers_mut().insert(
        header::RETRY_AFTER,
        header::HeaderValue::from_str(&seconds.to_string())
            .map_err(|e| ShopError::internal(e.into()))?,
    );
    Ok(page)
}

#[derive(Template)]
#[template(path = "message.html")]
struct MessagePage<'a> {
    basket_count: i64,
    /// `<meta http-equiv="refresh">`'s content, or empty.
    refresh: &'a str,
    headline: &'a str,
    explanation: &'a str,
    next_href: &'a str,
    next_label: &'a str,
}

pub fn message(
    status: StatusCode,
    headline: &str,
    explanation: &str,
    next_href: &str,
    next_label: &str,
) -> Result<HttpResponse, ShopError> {
    render(
        status,
        &MessagePage {
            basket_count: 0,
            refresh: "",
            headline,
            explanation,
            next_href,
            next_label,
        },
    )
}

/// How long the "one moment" page waits before it tries again.
pub const ONE_MOMENT_SECONDS: u64 = 5;

/// The "one moment" page: the database was away for longer than a request
/// waits for it (a failover that takes its time). It says so, and goes to
/// `then` by itself after [`ONE_MOMENT_SECONDS`] (`Retry-After` says the
/// same to anything that is not a browser).
pub fn one_moment(then: &str) -> HttpResponse {
    let refresh = format!("{ONE_MOMENT_SECONDS}; url={then}");
    let page = render(
        StatusCode::SERVICE_UNAVAILABLE,
        &MessagePage {
            basket_count: 0,
            refresh: &refresh,
            headline: "One moment",
            explanation: "The shop is switching to its standby database. This page tries again by \
                          itself in a few seconds; nothing was charged, and nothing you did is \
                          lost or done twice.",
            next_href: then,
            next_label: "Try again now",
        },
    );
    let mut response = page.unwrap_or_else(|_| {
        HttpResponse::ServiceUnavailable().body("One moment: the shop is switching databases.")
    });
    let headers = response.headers_mut();
    headers.insert(
        header::RETRY_AFTER,
        header::HeaderValue::from(ONE_MOMENT_SECONDS),
    );
    headers.insert(
        header::CACHE_CONTROL,
        header::HeaderValue::from_static("no-store"),
    );
    response
}

/// The shopper's pages, their scripts and styles, and the way back from the
/// providers.
pub fn routes(config: &mut web::ServiceConfig) {
    config
        .route(
            "/static/pay/{provider}.js",
            web::get().to(assets::pay_script),
        )
        .route("/static/live.js", web::get().to(assets::live_script))
        .route("/static/verify.js", web::get().to(assets::verify_script))
        .route(
            "/static/countdown.js",
            web::get().to(assets::countdown_script),
        )
        .route("/queue/{product}", web::get().to(queue::queue_page))
        .route(
            "/queue/{product}/order.json",
            web::get().to(queue::order_json),
        )
        .route("/static/shop.css", web::get().to(assets::stylesheet))
        .route("/static/theme/{digits}", web::get().to(assets::theme))
        .route("/images/{id}/{width}", web::get().to(assets::image))
        .route("/availability", web::get().to(availability::availability))
        .route(
            "/availability/stream",
            web::get().to(availability::availability_stream),
        )
        .route("/", web::get().to(catalogue::catalogue))
        .route("/c/{collection}", web::get().to(catalogue::collection))
        .route("/basket", web::get().to(basket::basket))
        .route("/basket/add", web::post().to(basket::add_to_basket))
        .route("/basket/remove", web::post().to(basket::remove_from_basket))
        .route("/basket/update", web::post().to(basket::update_basket))
        .route("/basket/voucher", web::post().to(basket::apply_voucher))
        .route("/checkout", web::post().to(checkout::start_checkout))
        .route(
            "/checkout/return/{token}",
            web::get().to(returns::checkout_return),
        )
        // a provider's embedded checkout may post its callback
        .route(
            "/checkout/return/{token}",
            web::post().to(returns::checkout_return_post),
        )
        .route(
            "/checkout/cancel/{token}",
            web::get().to(returns::checkout_cancel),
        )
        .route(
            "/checkout/cancel/{token}",
            web::post().to(returns::checkout_leave),
        )
        .route("/waitlist/{product}", web::get().to(waitlist::join_form))
        .route("/waitlist/{product}", web::post().to(waitlist::join))
        .route("/waitlist/entry/{token}", web::get().to(waitlist::entry))
        .route(
            "/waitlist/entry/{token}/confirm",
            web::post().to(waitlist::confirm),
        )
        .route(
            "/waitlist/entry/{token}/leave",
            web::post().to(waitlist::leave),
        )
        .route(
            "/waitlist/entry/{token}/claim",
            web::post().to(waitlist::claim),
        )
        .route("/pay/{token}", web::get().to(orders::pay_page))
        .route("/orders/{token}", web::get().to(orders::order_page))
        .route(
            "/orders/{token}/calendar.ics",
            web::get().to(orders::calendar),
        );
}
