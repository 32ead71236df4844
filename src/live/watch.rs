//! Pages watching products' stock (`GET /availability/stream`): each told
//! at once what is left, then whenever it changes, at most every
//! [`WATCH_GAP`], and a keep-alive when nothing does; at most
//! [`MAX_WATCHERS`] per process.

use std::collections::HashSet;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use tokio::sync::broadcast;

use super::LiveStock;
use crate::catalogue::Stock;

/// Most pages one process lets watch at once; past it a page polls.
pub const MAX_WATCHERS: usize = 20_000;

/// Least time between two events to one watching page: a hot tier changes
/// with every batch, and thousands of pages need not hear each one.
pub const WATCH_GAP: Duration = Duration::from_millis(250);

/// A quiet watch says it is still there this often (and so learns whether
/// the page is).
pub const WATCH_KEEPALIVE: Duration = Duration::from_secs(15);

/// One page watching some products (`GET /availability/stream`).
#[derive(Debug)]
pub struct Watch {
    ids: Vec<String>,
    wanted: HashSet<String>,
    changes: broadcast::Receiver<Arc<Vec<Stock>>>,
    live: LiveStock,
    /// What the page was last told, and when.
    sent: Option<(Instant, Vec<Stock>)>,
}

/// What a watch has for its page next.
#[derive(Debug)]
pub enum Watched {
    /// What is left of the watched products now.
    Changed(Vec<Stock>),
    /// Nothing changed for [`WATCH_KEEPALIVE`].
    Quiet,
}

impl Watch {
    /// The watched product ids.
    pub fn ids(&self) -> &[String] {
        &self.ids
    }

    /// The next thing to tell the page: at once what is left now, then
    /// whenever one of its products changes (at most every
    /// [`WATCH_GAP`]); `None` when the shop is going away or cannot read.
    pub async fn next(&mut self) -> Option<Watched> {
        use broadcast::error::{RecvError, TryRecvError};
        loop {
            if let Some((at, _)) = &self.sent {
                let at = *at;
                match tokio::time::timeout(WATCH_KEEPALIVE, self.changes.recv()).await {
                    Err(_) => return Some(Watched::Quiet),
                    Ok(Err(RecvError::Closed)) => return None,
                    // too far behind: what memory says now covers it
                    Ok(Err(RecvError::Lagged(_))) => {}
                    Ok(Ok(changed)) => {
                        if !changed.iter().any(|s| self.wanted.contains(&s.id)) {
                            continue;
                        }
                    }
                }
                tokio::time::sleep_until((at + WATCH_GAP).into()).await;
                // whatever came meanwhile is in what memory says now
                while matches!(
                    self.changes.try_recv(),
                    Ok(_) | Err(TryRecvError::Lagged(_))
                ) {}
            }
            let stock = self.live.stock(&self.ids).await.ok()?;
            if self.sent.as_ref().is_some_and(|(_, sent)| *sent == stock) {
                continue;
            }
            self.sent = Some((Instant::now(), stock.clone()));
            return Some(Watched::Changed(stock));
        }
    }
}

impl Drop for Watch {
    fn drop(&mut self) {
        self.live.inner.watchers.fetch_sub(1, Ordering::SeqCst);
    }
}

impl LiveStock {
    /// A page watching these products, or `None` when [`MAX_WATCHERS`]
    /// already are.
    pub fn watch(&self, ids: Vec<String>) -> Option<Watch> {
        let watchers = self.inner.watchers.fetch_add(1, Ordering::SeqCst);
        if watchers >= MAX_WATCHERS {
            self.inner.watchers.fetch_sub(1, Ordering::SeqCst);
            return None;
        }
        Some(Watch {
            wanted: ids.iter().cloned().collect(),
            ids,
            changes: self.changes(),
            live: self.clone(),
            sent: None,
        })
    }

    /// Pages watching now.
    pub fn watchers(&self) -> usize {
        self.inner.watchers.load(Ordering::SeqCst)
    }
}
