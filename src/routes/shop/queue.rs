//! A drop queue's public pages: what it publishes, as JSON at a stable URL
//! (`/queue/{product}/order.json`), and a page that shows the commitment
//! before the draw and, after it, recomputes every position in the
//! shopper's browser from the seed and the list (`static/verify.js`, with
//! the browser's own SHA-256 and HMAC), so nobody needs to trust the shop's
//! word for the order. `holdfast queue verify` runs the same check.

use actix_web::http::StatusCode;
use actix_web::{HttpRequest, HttpResponse, web};
use askama::Template;

use super::basket_count;
use crate::queue;
use crate::retry::{Bound, retry};
use crate::routes::ShopError;
use crate::routes::render::render;
use crate::state::Shop;

async fn published(shop: &Shop, product: &str) -> Result<queue::Published, ShopError> {
    let unknown = || ShopError::not_found("that product has no queue");
    if product.is_empty() || product.len() > 200 {
        return Err(unknown());
    }
    // a queue whose sale opened is drawn before it is shown
    let found = retry("queue_read", Bound::Shopper, || async {
        let found = queue::published(&shop.pool, product).await?;
        if let Some(p) = &found
            && p.drawn_at.is_none()
            && p.sale_opens_at <= chrono::Utc::now()
            && queue::draw(&shop.pool, product).await?
        {
            return queue::published(&shop.pool, product).await;
        }
        Ok::<_, sqlx::Error>(found)
    })
    .await?;
    found.ok_or_else(unknown)
}

/// `GET /queue/{product}/order.json`: the commitment, and once drawn the
/// seed, the list and the order.
pub async fn order_json(
    shop: web::Data<Shop>,
    product: web::Path<String>,
) -> Result<HttpResponse, ShopError> {
    let published = published(&shop, &product).await?;
    Ok(HttpResponse::Ok()
        .insert_header(("cache-control", "no-store"))
        .json(published))
}

#[derive(Template)]
#[template(path = "queue.html")]
struct QueuePage {
    basket_count: i64,
    product_id: String,
    product: String,
    commitment: String,
    opens: String,
    drawn: bool,
    seed: String,
    /// The order, with each entry's rank in hex.
    order: Vec<(usize, String, String)>,
    rule: &'static str,
}

/// `GET /queue/{product}`: the queue's commitment, and after the draw its
/// order, checked again in the browser.
pub async fn queue_page(
    shop: web::Data<Shop>,
    request: HttpRequest,
    product: web::Path<String>,
) -> Result<HttpResponse, ShopError> {
    let published = published(&shop, &product).await?;
    let name: String = retry("product_read", Bound::Shopper, || {
        sqlx::query_scalar("select name from products where id = $1")
            .bind(product.as_str())
            .fetch_one(&shop.pool)
    })
    .await
    .unwrap_or_else(|_| product.to_string());
    let seed = published
        .seed
        .as_deref()
        .and_then(|s| hex::decode(s).ok())
        .unwrap_or_default();
    let page = QueuePage {
        basket_count: basket_count(&shop, &request).await?,
        product_id: product.to_string(),
        product: name,
        commitment: published.commitment.clone(),
        opens: shop.zone().minute(published.sale_opens_at),
        drawn: published.seed.is_some(),
        seed: published.seed.clone().unwrap_or_default(),
        order: published
            .order
            .iter()
            .enumerate()
            .map(|(i, id)| (i + 1, id.to_string(), hex::encode(queue::rank(&seed, id))))
            .collect(),
        rule: queue::RULE,
    };
    render(StatusCode::OK, &page)
}
