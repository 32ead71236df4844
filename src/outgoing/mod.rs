//! Outgoing webhooks: the shop telling the shop's other systems what
//! happened, signed as the Standard Webhooks specification says
//! ([`signing`]), to endpoints staff register (here), delivered by the
//! worker with retries ([`delivery`]), never into the shop's own network
//! unless the operator allows it ([`address`]).
//!
//! Events are written by the database, in the transaction that decided
//! them (migration 0060's triggers call `hf_webhook_event`): an order
//! leaving `pending` as paid, expired or cancelled, a staff refund, a
//! redemption, a product's last unit taken or one given back. Each is one
//! message (its id the `webhook-id` of every delivery of it) and one outbox
//! job per endpoint that asked for its type.

pub mod address;
pub mod delivery;
pub mod signing;
pub mod views;

use chrono::{DateTime, Utc};
use serde::Serialize;
use sqlx::PgPool;

use self::address::{Destination, Refused};
use self::signing::WebhookSecret;
use crate::audit::Actor;
use crate::keys::SessionKey;

pub use delivery::Deliveries;

/// What an endpoint can ask to hear about.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
pub enum EventType {
    /// An order was paid (its codes exist).
    OrderPaid,
    /// Staff refunded some units of an order, or all of it (`refund.whole`).
    OrderRefunded,
    /// An order's shopper committed to a method that settles later (a
    /// bank debit): its units are held until `settling.until`.
    OrderSettling,
    /// An order's reservation ran out before it was paid.
    OrderExpired,
    /// An order was let go before it was paid (the shopper left, the
    /// payment failed, staff released it).
    OrderCancelled,
    /// A ticket admitted or a pickup collected.
    CodeRedeemed,
    /// A product's last unit was taken (held or sold).
    ProductSoldOut,
    /// A sold-out product has a unit again (a hold ran out, a refund put
    /// units back, capacity was raised).
    ProductAvailable,
    /// Units were held for a waiting-list entry (`hf_hand_over`).
    WaitlistOffered,
}

impl EventType {
    pub const ALL: [EventType; 9] = [
        EventType::OrderPaid,
        EventType::OrderRefunded,
        EventType::OrderSettling,
        EventType::OrderExpired,
        EventType::OrderCancelled,
        EventType::CodeRedeemed,
        EventType::ProductSoldOut,
        EventType::ProductAvailable,
        EventType::WaitlistOffered,
    ];

    /// The `type` a receiver sees.
    pub fn as_str(self) -> &'static str {
        match self {
            EventType::OrderPaid => "order.paid",
            EventType::OrderRefunded => "order.refunded",
            EventType::OrderSettling => "order.settling",
            EventType::OrderExpired => "order.expired",
            EventType::OrderCancelled => "order.cancelled",
            EventType::CodeRedeemed => "code.redeemed",
            EventType::ProductSoldOut => "product.sold_out",
            EventType::ProductAvailable => "product.available",
            EventType::WaitlistOffered => "waitlist.offered",
        }
    }

    pub fn parse(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|e| e.as_str() == name.trim())
    }

    /// A list as typed (`order.paid,code.redeemed`): every name known, at
    /// least one, none twice.
    pub fn parse_list(text: &str) -> Result<Vec<EventType>, String> {
        let mut events = Vec::new();
        for name in text.split(',').map(str::trim).filter(|n| !n.is_empty()) {
            let event = Self::parse(name).ok_or_else(|| {
                format!(
                    "{:?} is not an event; the events are {}",
                    name.chars().take(60).collect::<String>(),
                    Self::ALL.map(Self::as_str).join(", ")
                )
            })?;
            if !events.contains(&event) {
                events.push(event);
            }
        }
        if events.is_empty() {
            return Err(format!(
                "name at least one event: {}",
                Self::ALL.map(Self::as_str).join(", ")
            ));
        }
        Ok(events)
    }
}

impl std::fmt::Display for EventType {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

#[derive(Debug, thiserror::Error)]
pub enum WebhookError {
    #[error("{0}")]
    InvalidInput(String),
    #[error(transparent)]
    Refused(#[from] Refused),
    #[error(transparent)]
    Database(#[from] sqlx::Error),
}

/// An endpoint as made: its id and its secret, shown this once. Its
/// `Debug` leaves the secret out, so no log line or panic can print it.
#[derive(Serialize)]
pub struct Added {
    pub id: String,
    pub url: String,
    pub events: Vec<EventType>,
    /// `whsec_…`: shown once, never again.
    pub secret: String,
}

impl std::fmt::Debug for Added {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Added")
            .field("id", &self.id)
            .field("url", &self.url)
            .field("events", &self.events)
            .field("secret", &"[kept secret]")
            .finish()
    }
}

/// What to register.
#[derive(Debug, Clone)]
pub struct NewEndpoint {
    pub url: String,
    pub events: Vec<EventType>,
    /// The operator lets this endpoint reach a private address.
    pub allow_private: bool,
}

/// Register an endpoint: the URL must be http(s) and, unless private
/// addresses are allowed, resolve only to public ones. Its secret is made
/// here, sealed for storage and returned once.
pub async fn add_endpoint(
    pool: &PgPool,
    key: &SessionKey,
    by: Actor<'_>,
    new: &NewEndpoint,
) -> Result<Added, WebhookError> {
    if new.events.is_empty() {
        return Err(WebhookError::InvalidInput(
            "name at least one event".to_owned(),
        ));
    }
    let destination = Destination::parse(&new.url)?;
    destination.check(new.allow_private).await?;
    let id = format!("ep_{}", &crate::keys::random_token()[..24]);
    let secret = WebhookSecret::generate();
    let events: Vec<&str> = new.events.iter().map(|e| e.as_str()).collect();
    let url = destination.url().to_string();
    let mut tx = pool.begin().await?;
    sqlx::query(
        "insert into webhook_endpoints (id, url, events, secret_sealed, allow_private, created_by) \
         values ($1, $2, $3, $4, $5, $6)",
    )
    .bind(&id)
    .bind(&url)
    .bind(&events)
    .bind(secret.seal(key, &id))
    .bind(new.allow_private)
    .bind(by.name())
    .execute(&mut *tx)
    .await?;
    crate::audit::commit(
        tx,
        by,
        "add_webhook",
        &id,
        "ok",
        serde_json::json!({ "url": url, "events": events, "allow_private": new.allow_private }),
    )
    .await?;
    Ok(Added {
        id,
        url,
        events: new.events.clone(),
        secret: secret.reveal(),
    })
}

/// An endpoint as the admin and `holdfast webhooks list` show it.
#[derive(Debug, Clone, Serialize, sqlx::FromRow)]
pub struct EndpointRow {
    pub id: String,
    pub url: String,
    pub events: Vec<String>,
    pub allow_private: bool,
    pub created_by: String,
    pub created_at: DateTime<Utc>,
    pub disabled_at: Option<DateTime<Utc>>,
    pub disabled_reason: Option<String>,
    /// Deliveries not finished yet.
    pub pending: i64,
    /// The last attempt's moment and answer.
    pub last_attempt_at: Option<DateTime<Utc>>,
    pub last_status: Option<i32>,
    pub last_error: Option<String>,
}

const ENDPOINT_COLUMNS: &str = "e.id, e.url, e.events, e.allow_private, e.created_by, \
    e.created_at, e.disabled_at, e.disabled_reason, \
    (select count(*) from outbox_jobs j where j.kind = 'webhook' \
        and j.payload ->> 'endpoint_id' = e.id and j.state = 'pending') as pending, \
    a.at as last_attempt_at, a.status as last_status, a.error as last_error";

pub async fn endpoints(pool: &PgPool) -> sqlx::Result<Vec<EndpointRow>> {
    sqlx::query_as(&format!(
        "select {ENDPOINT_COLUMNS} from webhook_endpoints e \
           left join lateral (select at, status, error from webhook_attempts \
                               where endpoint_id = e.id order by id desc limit 1) a on true \
          order by e.created_at, e.id"
    ))
    .fetch_all(pool)
    .await
}

pub async fn endpoint(pool: &PgPool, id: &str) -> sqlx::Result<Option<EndpointRow>> {
    sqlx::query_as(&format!(
        "select {ENDPOINT_COLUMNS} from webhook_endpoints e \
           left join lateral (select at, status, error from webhook_attempts \
                               where endpoint_id = e.id order by id desc limit 1) a on true \
          where e.id = $1"
    ))
    .bind(id)
    .fetch_optional(pool)
    .await
}

/// One delivery (a message to an endpoint) and its attempts.
#[derive(Debug, Clone, Serialize, sqlx::FromRow)]
pub struct DeliveryRow {
    pub job_id: i64,
    pub message_id: String,
    pub event_type: String,
    pub created_at: DateTime<Utc>,
    /// pending, delivered, failed (given up), or kept (disabled): made
    /// while the endpoint was disabled, sent only by a replay
    pub state: String,
    pub attempts: i64,
    pub last_status: Option<i32>,
    pub last_error: Option<String>,
    pub last_attempt_at: Option<DateTime<Utc>>,
    pub next_try_at: Option<DateTime<Utc>>,
}

/// An endpoint's latest deliveries, newest first.
pub async fn deliveries(
    pool: &PgPool,
    endpoint_id: &str,
    limit: i64,
) -> sqlx::Result<Vec<DeliveryRow>> {
    sqlx::query_as(
        "select j.id as job_id, m.id as message_id, m.event_type, m.created_at, \
                case when j.state = 'pending' then 'pending' \
                     when a.status between 200 and 299 then 'delivered' \
                     when a.at is null and j.payload ? 'while_disabled' then 'kept (disabled)' \
                     else 'failed' end as state, \
                (select count(*) from webhook_attempts x where x.job_id = j.id) as attempts, \
                a.status as last_status, a.error as last_error, a.at as last_attempt_at, \
                case when j.state = 'pending' then j.run_after end as next_try_at \
           from outbox_jobs j \
           join webhook_messages m on m.id = j.payload ->> 'message_id' \
           left join lateral (select status, error, at from webhook_attempts \
                               where job_id = j.id order by id desc limit 1) a on true \
          where j.kind = 'webhook' and j.payload ->> 'endpoint_id' = $1 \
          order by j.id desc limit $2",
    )
    .bind(endpoint_id)
    .bind(limit.clamp(1, 1000))
    .fetch_all(pool)
    .await
}

/// One attempt, as the admin shows it.
#[derive(Debug, Clone, Serialize, sqlx::FromRow)]
pub struct AttemptRow {
    pub job_id: i64,
    pub at: DateTime<Utc>,
    pub status: Option<i32>,
    pub error: Option<String>,
    pub duration_ms: i32,
}

/// Every attempt of an endpoint's latest deliveries, newest first.
pub async fn attempts(
    pool: &PgPool,
    endpoint_id: &str,
    limit: i64,
) -> sqlx::Result<Vec<AttemptRow>> {
    sqlx::query_as(
        "select job_id, at, status, error, duration_ms from webhook_attempts \
          where endpoint_id = $1 order by id desc limit $2",
    )
    .bind(endpoint_id)
    .bind(limit.clamp(1, 5000))
    .fetch_all(pool)
    .await
}

/// What a replay asks for.
#[derive(Debug, Clone, Copy)]
pub enum Replay {
    /// One delivery (its outbox job).
    One(i64),
    /// Every delivery to the endpoint of a message made at or after this.
    Since(DateTime<Utc>),
}

/// Send deliveries again, with the same `webhook-id` (a receiver that has
/// it already can tell). A delivery still pending is tried at once. Its
/// retry window starts again from now. Returns how many were queued.
pub async fn replay(
    pool: &PgPool,
    by: Actor<'_>,
    endpoint_id: &str,
    which: Replay,
) -> Result<u64, WebhookError> {
    let mut tx = pool.begin().await?;
    let (job, since) = match which {
        Replay::One(job) => (Some(job), None),
        Replay::Since(at) => (None, Some(at)),
    };
    // each job's own row lock (a delivery in flight may be sent twice:
    // receivers tell by its `webhook-id`); deliveries kept while the
    // endpoint was disabled are among those replayed
    let replayed = sqlx::query(
        "update outbox_jobs j \
            set state = 'pending', done_at = null, attempts = 0, run_after = now(), \
                payload = j.payload || jsonb_build_object('since', now()) \
           from webhook_messages m \
          where j.kind = 'webhook' and j.payload ->> 'endpoint_id' = $1 \
            and m.id = j.payload ->> 'message_id' \
            and ($2::bigint is null or j.id = $2) \
            and ($3::timestamptz is null or m.created_at >= $3)",
    )
    .bind(endpoint_id)
    .bind(job)
    .bind(since)
    .execute(&mut *tx)
    .await?
    .rows_affected();
    crate::audit::commit(
        tx,
        by,
        "replay_webhook",
        endpoint_id,
        "ok",
        serde_json::json!({ "job": job, "since": since, "replayed": replayed }),
    )
    .await?;
    Ok(replayed)
}

/// Turn an endpoint on again (after it was disabled for failing) or off.
/// Returns whether it changed.
pub async fn set_enabled(
    pool: &PgPool,
    by: Actor<'_>,
    endpoint_id: &str,
    enabled: bool,
) -> Result<bool, WebhookError> {
    let mut tx = pool.begin().await?;
    let changed = if enabled {
        sqlx::query(
            "update webhook_endpoints set disabled_at = null, disabled_reason = null \
              where id = $1 and disabled_at is not null",
        )
    } else {
        sqlx::query(
            "update webhook_endpoints set disabled_at = now(), \
                    disabled_reason = 'disabled by ' || $2 \
              where id = $1 and disabled_at is null",
        )
    }
    .bind(endpoint_id)
    .bind(by.name())
    .execute(&mut *tx)
    .await?
    .rows_affected()
        > 0;
    let action = if enabled {
        "enable_webhook"
    } else {
        "disable_webhook"
    };
    crate::audit::record(
        &mut tx,
        by,
        action,
        endpoint_id,
        if changed { "ok" } else { "unchanged" },
        serde_json::json!({}),
    )
    .await?;
    tx.commit().await?;
    crate::audit::log_action(by, action, endpoint_id, "ok");
    Ok(changed)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_added_endpoint_never_prints_its_secret() {
        let added = Added {
            id: "ep_0123456789abcdefghij".into(),
            url: "https://example.com/hook".into(),
            events: vec![EventType::OrderPaid],
            secret: "whsec_c2VjcmV0LXNlY3JldC1zZWNyZXQ=".into(),
        };
        let printed = format!("{added:?} {added:#?}");
        assert!(!printed.contains("c2VjcmV0"), "{printed}");
        assert!(printed.contains("ep_0123456789abcdefghij"));
    }

    #[test]
    fn event_lists_read_as_typed() {
        assert_eq!(
            EventType::parse_list("order.paid, code.redeemed,order.paid"),
            Ok(vec![EventType::OrderPaid, EventType::CodeRedeemed])
        );
        for event in EventType::ALL {
            assert_eq!(EventType::parse(event.as_str()), Some(event));
        }
        assert!(EventType::parse_list("").is_err());
        assert!(
            EventType::parse_list("order.paid,waitlist.joined")
                .unwrap_err()
                .contains("waitlist.joined")
        );
    }
}
