//! Answers memory may give again while what they show is unchanged: a
//! checkout form the database refused as short, and a page (or a dining
//! room's day) the database answered, each kept until its resources
//! change (or, for a page, a while); and a page rendered from memory,
//! kept while memory's snapshot is the one it was rendered from. A full
//! memory of them starts again.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use chrono::{DateTime, Utc};

use super::{LiveStock, Snapshot};

/// A page rendered from one snapshot of memory.
#[derive(Debug, Clone)]
pub(super) struct Rendered {
    html: bytes::Bytes,
    /// The snapshot it shows: any change to memory makes another.
    snapshot: Arc<Snapshot>,
    /// When what it says would change by the clock alone (a sale opens or
    /// closes), by the database's clock.
    until: DateTime<Utc>,
    rendered_at: Instant,
}

/// Rendered pages kept at most: each holds a page and its snapshot, and
/// their addresses are the shopper's to choose.
const RENDERED_AT_MOST: usize = 64;

/// How long a rendered page is given again at most, whatever changes:
/// what it says of the time ("back in a few minutes") stays true.
const RENDERED_FOR: Duration = Duration::from_secs(1);

/// A page as the database last answered it (or an answer as a value).
#[derive(Clone)]
pub(super) struct KeptPage {
    html: bytes::Bytes,
    /// The answer as a value, for one read every request would parse.
    value: Option<Arc<dyn std::any::Any + Send + Sync>>,
    /// The resources whose changes make it stale.
    resources: Vec<String>,
    /// When the reads behind it began.
    read_at: DateTime<Utc>,
    kept_at: Instant,
}

impl std::fmt::Debug for KeptPage {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("KeptPage")
            .field("bytes", &self.html.len())
            .field("value", &self.value.is_some())
            .field("resources", &self.resources)
            .field("read_at", &self.read_at)
            .finish()
    }
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
            value: None,
            resources,
            read_at,
            kept_at: Instant::now(),
        };
        keep(&self.inner.pages, key, kept);
    }

    /// [`LiveStock::keep_answer`] for an answer kept as a value.
    pub fn keep_value<T: std::any::Any + Send + Sync>(
        &self,
        key: &str,
        resources: Vec<String>,
        read_at: DateTime<Utc>,
        value: Arc<T>,
    ) {
        let kept = KeptPage {
            html: bytes::Bytes::new(),
            value: Some(value),
            resources,
            read_at,
            kept_at: Instant::now(),
        };
        keep(&self.inner.pages, key, kept);
    }

    /// [`LiveStock::kept_page`] for an answer kept as a value.
    pub fn kept_value<T: std::any::Any + Send + Sync>(
        &self,
        key: &str,
        fresh_for: Duration,
    ) -> Option<Arc<T>> {
        self.fresh_kept(key, fresh_for)?.value?.downcast().ok()
    }

    /// A kept page, if memory may be believed, it is younger than
    /// `fresh_for`, and its resource has not changed since its reads.
    pub fn kept_page(&self, key: &str, fresh_for: Duration) -> Option<bytes::Bytes> {
        Some(self.fresh_kept(key, fresh_for)?.html)
    }

    fn fresh_kept(&self, key: &str, fresh_for: Duration) -> Option<KeptPage> {
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
        Some(kept)
    }

    /// A page rendered from the snapshot memory answers from now, while
    /// it is that one, before its `until` and younger than a second: the
    /// crowd on the catalogue is given a copy, not a rendering each.
    pub fn rendered(&self, key: &str) -> Option<bytes::Bytes> {
        let snapshot = self.now()?;
        let rendered = self
            .inner
            .rendered
            .lock()
            .expect("never poisoned")
            .get(key)
            .cloned()?;
        let fresh = Arc::ptr_eq(&rendered.snapshot, &snapshot)
            && snapshot.database_now() < rendered.until
            && rendered.rendered_at.elapsed() < RENDERED_FOR;
        fresh.then_some(rendered.html)
    }

    /// Keep a page rendered from `snapshot`, to give again while memory
    /// answers from it and before `until` (the database's clock).
    pub fn keep_rendered(
        &self,
        key: &str,
        snapshot: Arc<Snapshot>,
        until: DateTime<Utc>,
        html: bytes::Bytes,
    ) {
        let rendered = Rendered {
            html,
            snapshot,
            until,
            rendered_at: Instant::now(),
        };
        let mut kept = self.inner.rendered.lock().expect("never poisoned");
        if kept.len() >= RENDERED_AT_MOST {
            // copies of snapshots gone first, all if that is not enough
            kept.retain(|_, r| Arc::ptr_eq(&r.snapshot, &rendered.snapshot));
            if kept.len() >= RENDERED_AT_MOST {
                kept.clear();
            }
        }
        kept.insert(key.to_owned(), rendered);
    }

    /// Forget a kept page (its shopper changed something).
    pub fn forget_page(&self, key: &str) {
        self.inner.pages.lock().expect("never poisoned").remove(key);
    }
}
