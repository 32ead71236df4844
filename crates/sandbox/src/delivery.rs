//! Webhook delivery, once for both providers: how one object's events are
//! paced (the test controls' delivery modes), and the POST that is retried
//! with backoff until the shop answers 2xx, each attempt recorded in the
//! provider's ledger. What is signed, and how, is the provider's
//! ([`Endpoint`]).

use std::time::Duration;

use serde_json::Value;

use crate::ledger::{Carrier, Delivery};

/// What the sandbox does with the webhooks of one payment (test controls).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum DeliveryMode {
    /// Each event once, retried until it is accepted.
    #[default]
    Normal,
    /// Each event twice.
    Twice,
    /// Nothing is delivered: a lost webhook.
    Never,
    /// Each event a few seconds late.
    Late,
    /// Events are held back and delivered newest first once a second one
    /// exists.
    Reorder,
}

/// One object's delivery mode, and the events reordering holds back.
#[derive(Debug, Clone, Default)]
pub(crate) struct Pacing {
    pub(crate) mode: DeliveryMode,
    held_back: Vec<Value>,
}

/// Events to send now: in this order, each this many times, after a delay.
#[derive(Debug, Default)]
pub(crate) struct Batch {
    events: Vec<Value>,
    copies: usize,
    delay: Duration,
}

impl Batch {
    /// One event, once, now (a resend).
    pub(crate) fn one(event: Value) -> Self {
        Self {
            events: vec![event],
            copies: 1,
            delay: Duration::ZERO,
        }
    }
}

impl Pacing {
    /// How to send one new event under the mode.
    pub(crate) fn plan(&mut self, event: Value) -> Batch {
        let (events, copies, delay) = match self.mode {
            DeliveryMode::Never => (Vec::new(), 0, Duration::ZERO),
            DeliveryMode::Twice => (vec![event], 2, Duration::ZERO),
            DeliveryMode::Late => (vec![event], 1, Duration::from_secs(3)),
            DeliveryMode::Normal => (vec![event], 1, Duration::ZERO),
            DeliveryMode::Reorder => {
                self.held_back.push(event);
                if self.held_back.len() >= 2 {
                    let mut events = std::mem::take(&mut self.held_back);
                    events.reverse();
                    (events, 1, Duration::ZERO)
                } else {
                    (Vec::new(), 1, Duration::ZERO)
                }
            }
        };
        Batch {
            events,
            copies,
            delay,
        }
    }
}

/// One event as it goes over the wire.
#[derive(Debug, Clone)]
pub(crate) struct Outgoing {
    pub(crate) event_id: String,
    pub(crate) event_type: String,
    pub(crate) body: String,
}

/// The HTTP client deliveries go through, and how they are retried.
#[derive(Clone)]
pub(crate) struct Courier {
    http: reqwest::Client,
    /// First retry delay; doubles each attempt, at most a minute.
    retry_base: Duration,
    max_attempts: u32,
}

impl Courier {
    pub(crate) fn new(retry_base: Duration, max_attempts: u32) -> Self {
        Self {
            http: crate::signature::http_client(Duration::from_secs(10)),
            retry_base,
            max_attempts,
        }
    }
}

/// A provider's webhook endpoint at the shop: where it is, what goes in the
/// body, how each attempt is signed, and where attempts are recorded.
pub(crate) trait Endpoint: Clone + Send + Sync + 'static {
    fn courier(&self) -> &Courier;
    /// Where deliveries go now; `None`: the sandbox's own deliveries are
    /// off (no URL configured).
    fn url(&self) -> Option<String>;
    /// The body and names of one event.
    fn outgoing(&self, event: Value) -> Outgoing;
    /// The headers of one attempt, asked anew each time (Stripe signs with
    /// the time of sending).
    fn headers(&self, outgoing: &Outgoing) -> Vec<(&'static str, String)>;
    /// Keep an attempt in the provider's ledger.
    fn record(&self, delivery: Delivery);
}

/// Send a batch in one task, in order: "newest first" and "twice" mean
/// what they say at the receiving end.
pub(crate) fn send<E: Endpoint>(endpoint: &E, batch: Batch) {
    if batch.events.is_empty() || batch.copies == 0 {
        return;
    }
    let endpoint = endpoint.clone();
    tokio::spawn(async move {
        tokio::time::sleep(batch.delay).await;
        for event in batch.events {
            for _ in 0..batch.copies {
                deliver(&endpoint, event.clone()).await;
            }
        }
    });
}

/// POST one event until the shop answers 2xx or the attempts run out,
/// doubling the wait each time.
pub(crate) async fn deliver<E: Endpoint>(endpoint: &E, event: Value) {
    let Some(url) = endpoint.url() else {
        return;
    };
    let outgoing = endpoint.outgoing(event);
    let courier = endpoint.courier().clone();
    let mut wait = courier.retry_base;
    for attempt in 1..=courier.max_attempts {
        let mut request = courier
            .http
            .post(&url)
            .header("Content-Type", "application/json")
            .body(outgoing.body.clone());
        for (name, value) in endpoint.headers(&outgoing) {
            request = request.header(name, value);
        }
        let status = request.send().await.ok().map(|r| r.status().as_u16());
        endpoint.record(Delivery {
            event_id: outgoing.event_id.clone(),
            event_type: outgoing.event_type.clone(),
            status,
            attempt,
            via: Carrier::WebhookEndpoint,
        });
        if status.is_some_and(|s| (200..300).contains(&s)) {
            return;
        }
        tokio::time::sleep(wait).await;
        wait = (wait * 2).min(Duration::from_secs(60));
    }
}
