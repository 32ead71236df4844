//! A seat map watching its section's seats (`GET /seats/{section}/stream`):
//! told at once which seats are not free, then, whenever memory sees the
//! section's seats change (at most every [`WATCH_GAP`]), only the seats
//! that were taken and those given back since it was last told, so a
//! thousand open maps of a two-thousand-seat section are not sent the
//! whole section with every sale. A keep-alive when nothing changes. It
//! counts among the [`MAX_WATCHERS`] of the process.

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Instant;

use serde::Serialize;
use tokio::sync::broadcast;

use super::{LiveStock, MAX_WATCHERS, WATCH_GAP, WATCH_KEEPALIVE};
use crate::catalogue::Stock;
use crate::catalogue::seats::{SeatState, SectionSeats};

/// One map watching a section's seats.
#[derive(Debug)]
pub struct SeatWatch {
    section: String,
    changes: broadcast::Receiver<Arc<Vec<Stock>>>,
    live: LiveStock,
    /// What the page was last told, and when.
    sent: Option<(Instant, Arc<SectionSeats>)>,
}

/// What changed on a section's map.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct SeatChange {
    /// Everything: `taken` is every seat not free, every other seat of
    /// the `seats` is free (the first answer, and after the plan changed).
    pub full: bool,
    /// Seats on the map, and seats free now.
    pub seats: usize,
    pub free_count: usize,
    /// Seats taken or taken off sale (all of them when `full`), by label.
    pub taken: Vec<String>,
    /// Seats free again since the page was last told (never when `full`).
    pub free: Vec<String>,
}

/// What a seat watch has for its page next.
#[derive(Debug)]
pub enum SeatsWatched {
    Changed(SeatChange),
    /// Nothing changed for [`WATCH_KEEPALIVE`].
    Quiet,
}

/// What changed from `before` (none: everything) to `now`.
pub fn change(before: Option<&SectionSeats>, now: &SectionSeats) -> SeatChange {
    let not_free = |state: SeatState| state != SeatState::Free;
    let same_plan = before.is_some_and(|b| {
        b.seats.len() == now.seats.len()
            && b.seats
                .iter()
                .zip(&now.seats)
                .all(|(x, y)| x.label == y.label)
    });
    let mut out = SeatChange {
        full: !same_plan,
        seats: now.seats.len(),
        free_count: now.free(),
        taken: Vec::new(),
        free: Vec::new(),
    };
    match before.filter(|_| same_plan) {
        None => {
            out.taken = now
                .seats
                .iter()
                .filter(|s| not_free(s.state))
                .map(|s| s.label.clone())
                .collect();
        }
        Some(before) => {
            let was: HashMap<&str, SeatState> = before
                .seats
                .iter()
                .map(|s| (s.label.as_str(), s.state))
                .collect();
            for seat in &now.seats {
                let Some(&old) = was.get(seat.label.as_str()) else {
                    continue;
                };
                match (not_free(old), not_free(seat.state)) {
                    (false, true) => out.taken.push(seat.label.clone()),
                    (true, false) => out.free.push(seat.label.clone()),
                    _ => {}
                }
            }
        }
    }
    out
}

impl SeatWatch {
    /// The section watched.
    pub fn section(&self) -> &str {
        &self.section
    }

    /// The next thing to tell the page: at once the seats not free, then
    /// what changed whenever the section's seats do (at most every
    /// [`WATCH_GAP`]); `None` when the section is gone (off sale), or the
    /// shop is going away or cannot read.
    pub async fn next(&mut self) -> Option<SeatsWatched> {
        use broadcast::error::{RecvError, TryRecvError};
        loop {
            if let Some((at, _)) = &self.sent {
                let at = *at;
                match tokio::time::timeout(WATCH_KEEPALIVE, self.changes.recv()).await {
                    Err(_) => return Some(SeatsWatched::Quiet),
                    Ok(Err(RecvError::Closed)) => return None,
                    // too far behind: what memory says now covers it
                    Ok(Err(RecvError::Lagged(_))) => {}
                    Ok(Ok(changed)) => {
                        if !changed.iter().any(|s| s.id == self.section) {
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
            let now = self.live.section_seats(&self.section).await.ok()??;
            let before = self.sent.as_ref().map(|(_, seats)| seats.as_ref());
            if before.is_some_and(|b| b.version == now.version && b.seats == now.seats) {
                continue;
            }
            let told = change(before, &now);
            self.sent = Some((Instant::now(), now));
            if !told.full && told.taken.is_empty() && told.free.is_empty() {
                continue;
            }
            return Some(SeatsWatched::Changed(told));
        }
    }
}

impl Drop for SeatWatch {
    fn drop(&mut self) {
        self.live.inner.watchers.fetch_sub(1, Ordering::SeqCst);
    }
}

impl LiveStock {
    /// A map watching a section's seats, or `None` when [`MAX_WATCHERS`]
    /// pages already watch.
    pub fn watch_seats(&self, section: String) -> Option<SeatWatch> {
        let watchers = self.inner.watchers.fetch_add(1, Ordering::SeqCst);
        if watchers >= MAX_WATCHERS {
            self.inner.watchers.fetch_sub(1, Ordering::SeqCst);
            return None;
        }
        Some(SeatWatch {
            section,
            changes: self.changes(),
            live: self.clone(),
            sent: None,
        })
    }
}
