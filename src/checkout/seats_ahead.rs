//! Best seats chosen ahead of the locks, from memory (issue 45). A batch
//! of a seated event's checkouts used to open a transaction, take its
//! locks, read its sections' free seats (`hf_seats_free`), choose, and
//! only then start the checkouts: four round trips with the event's
//! sections locked. Here the batch chooses from memory's seats first,
//! outside any lock, and starts them in one statement
//! (`hf_start_checkouts_chosen`), which takes the same locks and checks
//! every seat chosen: still open, on sale to best available, of that
//! section and pinned by nobody. A line whose seats fail the check is
//! chosen by the database under the locks, as before; nothing a stale
//! memory chose can be sold twice.
//!
//! Memory hears of a batch's pins a few milliseconds after its commit,
//! and the next batch of the same event starts at once: the seats this
//! process pinned lately (as the call says, whoever chose them) are kept
//! from its choices until memory shows them taken ([`KEEP_CHOSEN`] at
//! most), so consecutive batches do not choose the same seats and fall
//! back to the database. Memory never decides that no stretch holds a
//! line (a hold past its time still shows its seats taken until the
//! call sweeps it): that line is chosen by the call.

use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crate::catalogue::seats::{FreeSeats, SeatState};
use crate::live::LiveStock;

/// The longest a seat this process pinned is kept from its choices while
/// memory still shows it free (a memory running that late is behind, or
/// the seat was let go again).
pub const KEEP_CHOSEN: Duration = Duration::from_secs(5);

/// By section resource: the seats this process pinned lately, and when.
type Lately = HashMap<String, Vec<(i64, Instant)>>;

/// Memory's seats, and the seats this process pinned lately. Cheap to
/// clone.
#[derive(Debug, Clone)]
pub(super) struct SeatsAhead {
    live: LiveStock,
    lately: Arc<Mutex<Lately>>,
    /// Calls whose seats were chosen from memory.
    calls: Arc<AtomicU64>,
}

impl SeatsAhead {
    pub(super) fn new(live: LiveStock) -> Self {
        Self {
            live,
            lately: Arc::default(),
            calls: Arc::default(),
        }
    }

    /// The free seats of the sections on `resources` as memory shows them,
    /// less those pinned lately; `None` when memory may not be believed
    /// now or does not know one of them (the batch reads them under its
    /// locks).
    pub(super) fn free(&self, resources: &[&str]) -> Option<FreeSeats> {
        let snapshot = self.live.now()?;
        let sections = resources
            .iter()
            .map(|r| snapshot.section_on(r))
            .collect::<Option<Vec<_>>>()?;
        let mut lately = self.lately.lock().ok()?;
        let mut taken = HashSet::new();
        for section in &sections {
            let Some(pinned) = lately.get_mut(&section.head.resource_id) else {
                continue;
            };
            let free: HashSet<i64> = section
                .seats
                .iter()
                .filter(|s| s.state == SeatState::Free)
                .map(|s| s.id)
                .collect();
            pinned.retain(|(id, at)| at.elapsed() < KEEP_CHOSEN && free.contains(id));
            taken.extend(pinned.iter().map(|(id, _)| *id));
        }
        self.calls.fetch_add(1, Ordering::Relaxed);
        Some(FreeSeats::remembered(
            sections.iter().map(|s| s.as_ref()),
            &taken,
        ))
    }

    /// Calls whose seats were chosen from memory so far.
    pub(super) fn calls(&self) -> u64 {
        self.calls.load(Ordering::Relaxed)
    }

    /// Seats a started checkout was given. What is older than
    /// [`KEEP_CHOSEN`] goes, in every section (a quiet one too).
    pub(super) fn pinned(&self, resource: &str, ids: &[i64]) {
        if let Ok(mut lately) = self.lately.lock() {
            let now = Instant::now();
            lately.retain(|_, pinned| {
                pinned.retain(|(_, at)| now.duration_since(*at) < KEEP_CHOSEN);
                !pinned.is_empty()
            });
            lately
                .entry(resource.to_owned())
                .or_default()
                .extend(ids.iter().map(|id| (*id, now)));
        }
    }
}
