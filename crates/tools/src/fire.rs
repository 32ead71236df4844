//! `fire`: a crowd of prepared API requests sent at one moment, each
//! answer timed from that moment (bench/table-drop's opening). The
//! requests come one a line as JSON, `{"key": …, "body": {…}}`, and go
//! to `POST {shop}/api/v1/checkouts` with the key as `Idempotency-Key`,
//! `connections` at a time; the answers go out one a line, in the order
//! of the requests: `{"status", "ms", "body"}`, `ms` counted from the
//! moment (negative: answered before it).

use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use tokio::sync::Semaphore;

/// One prepared request.
#[derive(Debug, Deserialize)]
pub struct Shot {
    pub key: String,
    pub body: serde_json::Value,
}

/// Its answer.
#[derive(Debug, Serialize)]
pub struct Answer {
    pub status: u16,
    /// From the moment to the answer's last byte.
    pub ms: f64,
    pub body: serde_json::Value,
}

/// Sends every shot at `at` (at once if it has passed), `connections` at
/// a time, and answers in the shots' order.
pub async fn fire(
    shop: &str,
    token: &str,
    shots: Vec<Shot>,
    at: DateTime<Utc>,
    connections: usize,
) -> anyhow::Result<Vec<Answer>> {
    anyhow::ensure!(connections > 0, "--connections must be at least 1");
    let roots = holdfast::payments::http::TrustedRoots::mozilla();
    let client = holdfast::payments::http::client_builder(&roots)
        .pool_max_idle_per_host(connections)
        .timeout(Duration::from_secs(60))
        .build()?;
    let url = format!("{}/api/v1/checkouts", shop.trim_end_matches('/'));
    let gate = Arc::new(Semaphore::new(connections));
    let wait = (at - Utc::now()).to_std().unwrap_or_default();
    tokio::time::sleep(wait).await;
    let mut tasks = Vec::with_capacity(shots.len());
    for shot in shots {
        let permit = gate.clone().acquire_owned().await?;
        let request = client
            .post(&url)
            .bearer_auth(token)
            .header("idempotency-key", &shot.key)
            .json(&shot.body);
        tasks.push(tokio::spawn(async move {
            let response = request.send().await;
            let answer = match response {
                Ok(response) => {
                    let status = response.status().as_u16();
                    let body = response.json().await.unwrap_or(serde_json::Value::Null);
                    Answer {
                        status,
                        ms: 0.0,
                        body,
                    }
                }
                Err(error) => Answer {
                    status: 0,
                    ms: 0.0,
                    body: serde_json::Value::String(error.to_string()),
                },
            };
            drop(permit);
            Answer {
                ms: (Utc::now() - at).num_microseconds().unwrap_or(i64::MAX) as f64 / 1000.0,
                ..answer
            }
        }));
    }
    let mut answers = Vec::with_capacity(tasks.len());
    for task in tasks {
        answers.push(task.await.context("a request's task ended")?);
    }
    Ok(answers)
}
