//! A shopper's basket, identified by a random cookie. A basket line
//! reserves nothing: holding happens at checkout start.

use sqlx::PgPool;

/// A basket line with what the basket page shows.
#[derive(Debug, Clone, sqlx::FromRow)]
pub struct BasketLine {
    pub product_id: String,
    pub name: String,
    pub qty: i32,
    pub price_minor: i64,
    pub currency: String,
}

/// Units in the basket.
pub async fn count(pool: &PgPool, basket: &str) -> sqlx::Result<i64> {
    sqlx::query_scalar("select coalesce(sum(qty), 0)::int8 from basket_lines where basket_id = $1")
        .bind(basket)
        .fetch_one(pool)
        .await
}

/// Add `qty` of an active product (at most 100 of one product). Returns
/// false when no such product is for sale.
pub async fn add(pool: &PgPool, basket: &str, product: &str, qty: i32) -> sqlx::Result<bool> {
    let added = sqlx::query(
        "insert into basket_lines (basket_id, product_id, qty) \
         select $1, id, $3 from products where id = $2 and active \
         on conflict (basket_id, product_id) \
         do update set qty = least(basket_lines.qty + excluded.qty, 100)",
    )
    .bind(basket)
    .bind(product)
    .bind(qty)
    .execute(pool)
    .await?;
    Ok(added.rows_affected() > 0)
}

/// Take products out of the basket.
pub async fn remove(pool: &PgPool, basket: &str, products: &[String]) -> sqlx::Result<()> {
    sqlx::query("delete from basket_lines where basket_id = $1 and product_id = any($2)")
        .bind(basket)
        .bind(products)
        .execute(pool)
        .await?;
    Ok(())
}

/// Empty the basket (its checkout reached the provider).
pub async fn clear(pool: &PgPool, basket: &str) -> sqlx::Result<()> {
    sqlx::query("delete from basket_lines where basket_id = $1")
        .bind(basket)
        .execute(pool)
        .await?;
    Ok(())
}

/// The basket's lines, in the order they were added.
pub async fn lines(pool: &PgPool, basket: &str) -> sqlx::Result<Vec<BasketLine>> {
    sqlx::query_as(
        "select b.product_id, p.name, b.qty, p.price_minor, p.currency \
           from basket_lines b join products p on p.id = b.product_id \
          where b.basket_id = $1 order by b.added_at, b.product_id",
    )
    .bind(basket)
    .fetch_all(pool)
    .await
}
