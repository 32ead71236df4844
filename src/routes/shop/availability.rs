//! What is left, for the pages' live updates: polled as JSON, or watched
//! as a stream of server-sent events. From memory.

use actix_web::http::header;
use actix_web::{HttpResponse, web};
use serde::Deserialize;

use crate::catalogue;
use crate::retry::{Bound, retry};
use crate::routes::ShopError;
use crate::state::Shop;

#[derive(Deserialize)]
pub struct StockQuery {
    ids: String,
}

/// The most products one availability request may ask about.
pub const MAX_STOCK_IDS: usize = 100;

/// The products an availability question names: 1 to [`MAX_STOCK_IDS`]
/// ids of at most 200 bytes, separated by commas.
fn stock_ids(query: &StockQuery) -> Result<Vec<String>, ShopError> {
    let ids: Vec<String> = query
        .ids
        .split(',')
        .filter(|id| !id.is_empty())
        .map(str::to_owned)
        .collect();
    if ids.is_empty() || ids.len() > MAX_STOCK_IDS || ids.iter().any(|id| id.len() > 200) {
        return Err(ShopError::bad_request(
            "ask about 1 to 100 products, by their ids separated by commas",
        ));
    }
    Ok(ids)
}

/// What is left, as the pages read it: `{"products": [...]}` with, beside
/// each product's stock, when its first pending hold ends in the shop's
/// zone (`first_back`), as the server says it.
fn stock_body(zone: crate::clock::ShopZone, stock: Vec<catalogue::Stock>) -> serde_json::Value {
    let products: Vec<serde_json::Value> = stock
        .into_iter()
        .map(|stock| {
            let back = stock.first_back_at.map(|at| zone.time(at));
            let mut value = serde_json::json!(stock);
            value["first_back"] = serde_json::json!(back);
            value
        })
        .collect();
    serde_json::json!({ "products": products })
}

/// `GET /availability?ids=a,b`: what is left of each product, what is
/// pending and when the first pending hold ends (JSON, unknown ids left
/// out), from memory. Pages without `EventSource` poll it.
pub async fn availability(
    shop: web::Data<Shop>,
    query: web::Query<StockQuery>,
) -> Result<HttpResponse, ShopError> {
    let ids = stock_ids(&query)?;
    let stock = retry("stock_read", Bound::Shopper, || shop.live.stock(&ids)).await?;
    Ok(HttpResponse::Ok()
        .insert_header((header::CACHE_CONTROL, "public, max-age=2"))
        .json(stock_body(shop.zone(), stock)))
}

/// `GET /availability/stream?ids=a,b`: the same answer as a stream of
/// server-sent events, the first at once, then one whenever memory sees
/// those products change (at most one per [`crate::live::WATCH_GAP`]),
/// and a comment every [`crate::live::WATCH_KEEPALIVE`] so a dead
/// connection is found. A sold-out page holds one open; one process
/// serves thousands (`live::MAX_WATCHERS`, then 503: the page polls).
pub async fn availability_stream(
    shop: web::Data<Shop>,
    query: web::Query<StockQuery>,
) -> Result<HttpResponse, ShopError> {
    let ids = stock_ids(&query)?;
    let Some(watch) = shop.live.watch(ids) else {
        return Ok(HttpResponse::ServiceUnavailable()
            .insert_header((header::RETRY_AFTER, "10"))
            .insert_header((header::CACHE_CONTROL, "no-store"))
            .body("too many pages are watching; poll /availability instead"));
    };
    // the zone as the request sees the shop: the stream is polled after
    // the request's storefront is gone
    let zone = shop.zone();
    let events = futures::stream::unfold((true, watch), move |(first, mut watch)| async move {
        let bytes = match watch.next().await? {
            crate::live::Watched::Quiet => bytes::Bytes::from_static(b": still here\n\n"),
            crate::live::Watched::Changed(stock) => event(zone, stock, first),
        };
        Some((Ok::<_, std::convert::Infallible>(bytes), (false, watch)))
    });
    Ok(HttpResponse::Ok()
        .content_type("text/event-stream")
        .insert_header((header::CACHE_CONTROL, "no-store"))
        // a proxy in front must pass each event on as it comes
        .insert_header(("x-accel-buffering", "no"))
        .streaming(events))
}

/// One server-sent event; the first also says how long a browser waits
/// before it connects again.
fn event(zone: crate::clock::ShopZone, stock: Vec<catalogue::Stock>, first: bool) -> bytes::Bytes {
    let retry = if first { "retry: 5000\n" } else { "" };
    format!("{retry}data: {}\n\n", stock_body(zone, stock)).into()
}
