//! `holdfast-tools watch`: pages of a running shop watching one product
//! over server-sent events (`GET /availability/stream`), and how fast a
//! change of its capacity reaches every one of them.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use anyhow::Context;
use serde::Serialize;
use sqlx::PgPool;

/// Open pages watching one product, and how fast a change reaches them.
#[derive(Debug, Serialize)]
pub struct WatchReport {
    pub streams: usize,
    /// Seconds to open them all and receive their first event.
    pub open_s: f64,
    /// Changes made, each timed until every stream told of it.
    pub changes: usize,
    pub p50_ms: f64,
    pub p99_ms: f64,
    pub worst_ms: f64,
    /// Streams that missed a change within 5 s.
    pub missed: usize,
}

impl WatchReport {
    pub fn lines(&self) -> String {
        format!(
            "{} open streams (opened in {:.1} s); {} changes, change to page: p50 {:.0} ms, p99 {:.0} ms, worst {:.0} ms; missed {}",
            self.streams,
            self.open_s,
            self.changes,
            self.p50_ms,
            self.p99_ms,
            self.worst_ms,
            self.missed
        )
    }
}

/// `streams` pages watch `product` over `GET /availability/stream` (plain
/// TCP, one connection each); then its capacity changes `changes` times,
/// a second apart, and each change is timed until every page has an event
/// that came after it.
pub async fn watch(
    pool: PgPool,
    shop: &str,
    product: &str,
    streams: usize,
    changes: usize,
) -> anyhow::Result<WatchReport> {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let address = shop
        .strip_prefix("http://")
        .context("the shop must be http://host:port")?
        .trim_end_matches('/')
        .to_owned();
    let resource: String = sqlx::query_scalar("select resource_id from products where id = $1")
        .bind(product)
        .fetch_optional(&pool)
        .await?
        .with_context(|| format!("no product {product:?}"))?;
    // each page counts the events it has seen
    let seen: Arc<Vec<AtomicU64>> = Arc::new((0..streams).map(|_| AtomicU64::new(0)).collect());
    let started = Instant::now();
    let gate = Arc::new(tokio::sync::Semaphore::new(256));
    let mut pages = Vec::with_capacity(streams);
    for i in 0..streams {
        let (seen, address, gate) = (seen.clone(), address.clone(), gate.clone());
        let request = format!(
            "GET /availability/stream?ids={product} HTTP/1.1\r\nHost: {address}\r\nAccept: text/event-stream\r\n\r\n"
        );
        pages.push(tokio::spawn(async move {
            let turn = gate.acquire_owned().await.expect("never closed");
            let mut socket = tokio::net::TcpStream::connect(&address).await?;
            socket.write_all(request.as_bytes()).await?;
            drop(turn);
            let mut buffer = vec![0u8; 4096];
            let mut tail = Vec::new();
            loop {
                let n = socket.read(&mut buffer).await?;
                if n == 0 {
                    return anyhow::Ok(());
                }
                tail.extend_from_slice(&buffer[..n]);
                let events = tail.windows(6).filter(|w| w == b"data: ").count();
                if events > 0 {
                    seen[i].fetch_add(events as u64, Ordering::SeqCst);
                    let keep = tail.len().saturating_sub(5);
                    tail.drain(..keep);
                }
            }
        }));
    }
    let all_at = |n: u64| seen.iter().all(|s| s.load(Ordering::SeqCst) >= n);
    while !all_at(1) {
        anyhow::ensure!(
            started.elapsed() < Duration::from_secs(120),
            "the streams did not all open"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let open_s = started.elapsed().as_secs_f64();
    let mut lags = Vec::new();
    let mut missed = 0;
    for change in 0..changes {
        tokio::time::sleep(Duration::from_secs(1)).await;
        let before: Vec<u64> = seen.iter().map(|s| s.load(Ordering::SeqCst)).collect();
        let at = Instant::now();
        // one more unit, then (next time) one fewer: the page sees a change
        let delta = if change % 2 == 0 { 1 } else { -1 };
        sqlx::query("update resources set total = total + $2 where id = $1")
            .bind(&resource)
            .bind(delta)
            .execute(&pool)
            .await?;
        let mut told = vec![false; streams];
        let mut left = streams;
        while left > 0 && at.elapsed() < Duration::from_secs(5) {
            for (i, s) in seen.iter().enumerate() {
                if !told[i] && s.load(Ordering::SeqCst) > before[i] {
                    told[i] = true;
                    left -= 1;
                    lags.push(at.elapsed());
                }
            }
            tokio::time::sleep(Duration::from_millis(2)).await;
        }
        missed += left;
    }
    for page in pages {
        page.abort();
    }
    lags.sort();
    let at = |q: f64| {
        lags.get(((lags.len() as f64 * q) as usize).min(lags.len().saturating_sub(1)))
            .map(|d| d.as_secs_f64() * 1000.0)
            .unwrap_or(f64::NAN)
    };
    Ok(WatchReport {
        streams,
        open_s,
        changes,
        p50_ms: at(0.5),
        p99_ms: at(0.99),
        worst_ms: lags
            .last()
            .map(|d| d.as_secs_f64() * 1000.0)
            .unwrap_or(f64::NAN),
        missed,
    })
}
