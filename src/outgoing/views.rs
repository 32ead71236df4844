//! An order as the shop's other systems see it, in webhook events and the
//! JSON API alike: the database's `hf_order_view` (migration 0090:
//! `hf_webhook_order` of 0060 with what settling and the late-money rule
//! say of it), so both show one shape.

use chrono::{DateTime, Utc};
use sqlx::PgPool;
use uuid::Uuid;

/// One order, by its token.
pub async fn order_by_token(pool: &PgPool, token: &str) -> sqlx::Result<Option<serde_json::Value>> {
    sqlx::query_scalar("select hf_order_view(id) from orders where token = $1")
        .bind(token)
        .fetch_optional(pool)
        .await
}

/// Where a page of orders ends: the next page starts after it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Cursor {
    pub created_at: DateTime<Utc>,
    pub id: Uuid,
}

impl Cursor {
    /// Opaque to clients: `<microseconds>.<id>`, base64url.
    pub fn encode(&self) -> String {
        use base64::Engine;
        base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(format!(
            "{}.{}",
            self.created_at.timestamp_micros(),
            self.id
        ))
    }

    pub fn decode(text: &str) -> Option<Self> {
        use base64::Engine;
        let plain = base64::engine::general_purpose::URL_SAFE_NO_PAD
            .decode(text.trim())
            .ok()?;
        let plain = String::from_utf8(plain).ok()?;
        let (micros, id) = plain.split_once('.')?;
        Some(Self {
            created_at: DateTime::from_timestamp_micros(micros.parse().ok()?)?,
            id: Uuid::parse_str(id).ok()?,
        })
    }
}

/// Orders oldest first, `limit` after `after`; and the cursor of the
/// last one when there may be more.
pub async fn orders_after(
    pool: &PgPool,
    after: Option<Cursor>,
    limit: i64,
) -> sqlx::Result<(Vec<serde_json::Value>, Option<Cursor>)> {
    let rows: Vec<(Uuid, DateTime<Utc>, serde_json::Value)> = sqlx::query_as(
        "select id, created_at, hf_order_view(id) from orders \
          where $1::timestamptz is null or (created_at, id) > ($1, $2) \
          order by created_at, id limit $3",
    )
    .bind(after.map(|c| c.created_at))
    .bind(after.map(|c| c.id))
    .bind(limit)
    .fetch_all(pool)
    .await?;
    let next = (rows.len() as i64 == limit)
        .then(|| {
            rows.last().map(|(id, at, _)| Cursor {
                created_at: *at,
                id: *id,
            })
        })
        .flatten();
    Ok((rows.into_iter().map(|(_, _, order)| order).collect(), next))
}
