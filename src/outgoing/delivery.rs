//! Delivering one message to one endpoint: the worker's side of an
//! outbox job of kind `webhook`. Runs after the commit that queued it,
//! with no lock held; signs at the moment of the attempt (the timestamp is
//! the attempt's, the `webhook-id` the message's, the same on every retry
//! and replay); keeps every attempt; and, when a delivery has failed for
//! the whole retry window (three days), gives it up and disables its
//! endpoint if nothing reached it in that time.

use std::time::{Duration, Instant};

use chrono::{DateTime, Utc};
use sqlx::PgPool;

use super::address::{Destination, PublicOnly};
use super::signing::WebhookSecret;
use crate::keys::SessionKey;
use crate::payments::http::{TrustedRoots, client_builder};

/// How long a failing delivery is retried (the outbox's backoff: 2, 4, 8 …
/// seconds, then hourly) before it is given up.
pub const RETRY_WINDOW: chrono::Duration = chrono::Duration::days(3);
/// How long one attempt may take.
const ATTEMPT_TIMEOUT: Duration = Duration::from_secs(15);

/// What one delivery attempt came to, when the job is finished.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Delivered {
    /// The endpoint answered 2xx.
    Delivered { status: u16 },
    /// It failed for the whole retry window: given up (and the endpoint
    /// disabled if nothing reached it in that time).
    GaveUp,
    /// The endpoint is disabled; replay once it is enabled again.
    EndpointDisabled,
}

/// The worker's deliverer: the database, the key secrets are sealed
/// under, and the one HTTP client setup (rustls, aws-lc-rs), connecting
/// only to public addresses unless the operator allowed private ones.
#[derive(Debug, Clone)]
pub struct Deliveries {
    pool: PgPool,
    key: SessionKey,
    public_only: reqwest::Client,
    anywhere: reqwest::Client,
    /// `HOLDFAST_WEBHOOKS_ALLOW_PRIVATE`: every endpoint may be private.
    allow_private: bool,
}

#[derive(sqlx::FromRow)]
struct Work {
    url: String,
    secret_sealed: Vec<u8>,
    allow_private: bool,
    disabled: bool,
    payload: serde_json::Value,
    since: DateTime<Utc>,
    now: DateTime<Utc>,
}

impl Deliveries {
    pub fn new(pool: PgPool, key: SessionKey, allow_private: bool) -> Self {
        let build = |builder: reqwest::ClientBuilder| {
            builder
                .timeout(ATTEMPT_TIMEOUT)
                .no_proxy()
                .user_agent("Holdfast-Webhooks/1")
                .build()
                .expect("a TLS configuration built in code is valid")
        };
        Self {
            public_only: build(
                client_builder(&TrustedRoots::mozilla())
                    .dns_resolver(std::sync::Arc::new(PublicOnly)),
            ),
            anywhere: build(client_builder(&TrustedRoots::mozilla())),
            pool,
            key,
            allow_private,
        }
    }

    /// One attempt of outbox job `job_id`: `Ok` finishes the job, `Err`
    /// (what went wrong, safe to show staff) leaves it to the outbox's
    /// backoff.
    pub async fn deliver(
        &self,
        job_id: i64,
        endpoint_id: &str,
        message_id: &str,
    ) -> Result<Delivered, String> {
        let db = |e: sqlx::Error| format!("the database: {e}");
        let work: Option<Work> = sqlx::query_as(
            "select e.url, e.secret_sealed, e.allow_private, e.disabled_at is not null as disabled, \
                    m.payload, \
                    coalesce((j.payload ->> 'since')::timestamptz, j.created_at) as since, \
                    now() as now \
               from outbox_jobs j \
               join webhook_endpoints e on e.id = $2 \
               join webhook_messages m on m.id = $3 \
              where j.id = $1",
        )
        .bind(job_id)
        .bind(endpoint_id)
        .bind(message_id)
        .fetch_optional(&self.pool)
        .await
        .map_err(db)?;
        let Some(work) = work else {
            return Err(format!(
                "delivery {job_id}: its endpoint or message is gone"
            ));
        };
        if work.disabled {
            self.record(
                job_id,
                endpoint_id,
                message_id,
                None,
                Some("the endpoint is disabled"),
                0,
            )
            .await
            .map_err(db)?;
            return Ok(Delivered::EndpointDisabled);
        }
        let started = Instant::now();
        let answer = self.attempt(&work, message_id, endpoint_id).await;
        let took = started.elapsed().as_millis().min(i32::MAX as u128) as i32;
        let (status, error) = match &answer {
            Ok(status) => (Some(i32::from(*status)), None),
            Err(error) => (None, Some(error.as_str())),
        };
        self.record(job_id, endpoint_id, message_id, status, error, took)
            .await
            .map_err(db)?;
        let failure = match answer {
            Ok(status) if (200..300).contains(&status) => {
                return Ok(Delivered::Delivered { status });
            }
            Ok(status) => format!("the endpoint answered HTTP {status}"),
            Err(error) => error,
        };
        if work.now - work.since < RETRY_WINDOW {
            return Err(failure);
        }
        // failed for the whole window: give it up, and disable an endpoint
        // nothing reached in that time (staff see why in the admin)
        let reason = format!(
            "Disabled automatically: nothing was delivered for {} days (the last attempt: {failure}). \
             Fix the receiver, enable the endpoint, then replay what it missed.",
            RETRY_WINDOW.num_days()
        );
        let disabled = sqlx::query(
            "update webhook_endpoints set disabled_at = now(), disabled_reason = $2 \
              where id = $1 and disabled_at is null \
                and not exists (select 1 from webhook_attempts \
                                 where endpoint_id = $1 and status between 200 and 299 \
                                   and at > now() - $3 * interval '1 second')",
        )
        .bind(endpoint_id)
        .bind(&reason)
        .bind(RETRY_WINDOW.num_seconds() as f64)
        .execute(&self.pool)
        .await
        .map_err(db)?
        .rows_affected();
        tracing::warn!(
            job = job_id,
            endpoint = endpoint_id,
            disabled = disabled > 0,
            "webhook delivery given up after its retry window"
        );
        Ok(Delivered::GaveUp)
    }

    /// Sign and send: the endpoint's HTTP status, or why there was none.
    async fn attempt(
        &self,
        work: &Work,
        message_id: &str,
        endpoint_id: &str,
    ) -> Result<u16, String> {
        let allow_private = self.allow_private || work.allow_private;
        let destination = Destination::parse(&work.url).map_err(|e| e.to_string())?;
        destination
            .check(allow_private)
            .await
            .map_err(|e| e.to_string())?;
        let Some(secret) = WebhookSecret::open(&self.key, endpoint_id, &work.secret_sealed) else {
            return Err(
                "the endpoint's secret cannot be opened: HOLDFAST_SESSION_KEY is not the \
                        one it was sealed with (set the same key on every process)"
                    .to_owned(),
            );
        };
        let body = serde_json::to_vec(&work.payload).expect("JSON values serialise");
        let timestamp = Utc::now().timestamp();
        let client = if allow_private {
            &self.anywhere
        } else {
            &self.public_only
        };
        let response = client
            .post(destination.url().clone())
            .header("content-type", "application/json")
            .header("webhook-id", message_id)
            .header("webhook-timestamp", timestamp.to_string())
            .header(
                "webhook-signature",
                secret.sign(message_id, timestamp, &body),
            )
            .body(body)
            .send()
            .await
            .map_err(|e| format!("no answer: {}", causes(&e.without_url())))?;
        Ok(response.status().as_u16())
    }

    async fn record(
        &self,
        job_id: i64,
        endpoint_id: &str,
        message_id: &str,
        status: Option<i32>,
        error: Option<&str>,
        duration_ms: i32,
    ) -> sqlx::Result<()> {
        sqlx::query(
            "insert into webhook_attempts (job_id, endpoint_id, message_id, status, error, duration_ms) \
             values ($1, $2, $3, $4, $5, $6)",
        )
        .bind(job_id)
        .bind(endpoint_id)
        .bind(message_id)
        .bind(status)
        .bind(error.map(|e| e.chars().take(500).collect::<String>()))
        .bind(duration_ms)
        .execute(&self.pool)
        .await?;
        Ok(())
    }
}

/// An error and its causes, one after another (the URL left out).
fn causes(error: &(dyn std::error::Error + 'static)) -> String {
    let mut text = error.to_string();
    let mut source = error.source();
    while let Some(cause) = source {
        let words = cause.to_string();
        if !text.contains(&words) {
            text.push_str(": ");
            text.push_str(&words);
        }
        source = cause.source();
    }
    text
}
