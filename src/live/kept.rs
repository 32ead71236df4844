//! Answers memory may give again while what they show is unchanged: a
//! checkout form the database refused as short, and a page (or a dining
//! room's day) the database answered, each kept until its resources
//! change (or, for a page, a while). A full memory of them starts again.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use chrono::{DateTime, Utc};

use super::LiveStock;

/// A page as the database last answered it.
#[derive(Debug, Clone)]
pub(super) struct KeptPage {
    html: bytes::Bytes,
    /// The resources whose changes make it stale.
    resources: Vec<String>,
    /// When the reads behind it began.
    read_at: DateTime<Utc>,
    kept_at: Instant,
}

/// Entries of a memory of answers at most; a full one starts again.
const KEPT_AT_MOST: usize = 100_000;

fn keep<V>(map: &std::sync::Mutex<HashMap<String, V>>, key: &str, value: V) {
    let mut map = map.lock().expect("never poisoned");
    if map.len() >= KEPT_AT_MOST {
        map.clear();
    }
    map.insert(key.to_owned(), value);
}

impl LiveStock {
    /// Remember that the database refused this checkout form as short, on
    /// a read that began at `read_at`.
    pub fn remember_refused_form(&self, key: &str, read_at: DateTime<Utc>) {
        keep(&self.inner.refused_forms, key, read_at);
    }

    /// When the database last refused this form as short (the read's
    /// start), if it did: memory may refuse it again while nothing it
    /// wants changed since.
    pub fn refused_form_at(&self, key: &str) -> Option<DateTime<Utc>> {
        self.inner
            .refused_forms
            .lock()
            .expect("never poisoned")
            .get(key)
            .copied()
    }

    /// Keep a page the database answered (its reads began at `read_at`),
    /// to answer again while `resource` is unchanged.
    pub fn keep_page(&self, key: &str, resource: &str, read_at: DateTime<Utc>, html: bytes::Bytes) {
        self.keep_answer(key, vec![resource.to_owned()], read_at, html);
    }

    /// Keep an answer the database gave (its reads began at `read_at`),
    /// to give again while none of `resources` changed: a dining room's
    /// day, stale when any of its times is booked or let go.
    pub fn keep_answer(
        &self,
        key: &str,
        resources: Vec<String>,
        read_at: DateTime<Utc>,
        answer: bytes::Bytes,
    ) {
        let kept = KeptPage {
            html: answer,
            resources,
            read_at,
            kept_at: Instant::now(),
        };
        keep(&self.inner.pages, key, kept);
    }

    /// A kept page, if memory may be believed, it is younger than
    /// `fresh_for`, and its resource has not changed since its reads.
    pub fn kept_page(&self, key: &str, fresh_for: Duration) -> Option<bytes::Bytes> {
        let answer = |answer: &str| crate::metrics::kept_page(answer);
        let kept = self
            .inner
            .pages
            .lock()
            .expect("never poisoned")
            .get(key)
            .cloned();
        let Some(kept) = kept else {
            answer("not_kept");
            return None;
        };
        let Some(snapshot) = self.now() else {
            answer("untrusted");
            return None;
        };
        let mut changed = false;
        for resource in &kept.resources {
            let Some(level) = snapshot.level(resource) else {
                answer("untrusted");
                return None;
            };
            changed |= level.changed_at >= kept.read_at;
        }
        if kept.kept_at.elapsed() >= fresh_for {
            answer("stale");
            return None;
        }
        if changed {
            answer("changed");
            return None;
        }
        answer("memory");
        Some(kept.html)
    }

    /// Forget a kept page (its shopper changed something).
    pub fn forget_page(&self, key: &str) {
        self.inner.pages.lock().expect("never poisoned").remove(key);
    }
}
