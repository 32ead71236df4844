//! Seated sections in memory: each section's head and its seats' states,
//! so the seat map and the API's seats answer a crowd without reading the
//! database. They follow the section's resource: a seat's state changes
//! only in a transaction that writes its section's resource row (see
//! [`SectionSeats`]), which notifies `hf_stock` and makes a new version.
//! So with every read of levels, full or notified, the seats of the
//! sections whose version moved are read again (one statement for all of
//! them), and nothing else is: a quiet section costs no read of its seats.
//! The heads (names, categories, colours, prices) are read with every full
//! read, as the catalogue is.

use std::collections::HashMap;
use std::sync::Arc;

use sqlx::PgPool;

use super::snapshot::{LevelRow, Snapshot};
use crate::catalogue::seats::{self, SectionHead, SectionSeats};

/// Seats read with one read of levels: the heads (a full read), and the
/// seats of the sections whose version moved.
#[derive(Default)]
pub(super) struct SeatRead {
    pub(super) heads: Option<Vec<SectionHead>>,
    pub(super) seats: Vec<(String, String, Vec<seats::SeatShown>)>,
}

/// Reads what memory needs of the seats with these levels: `full` reads
/// the heads too. `old`: memory before this read.
pub(super) async fn read_seats(
    pool: &PgPool,
    old: Option<&Snapshot>,
    full: bool,
    rows: &[LevelRow],
) -> sqlx::Result<SeatRead> {
    let heads = if full {
        Some(seats::map::heads(pool, None).await?)
    } else {
        None
    };
    // the sections known, by resource, and the version their seats are of
    let mut known: HashMap<&str, (&str, Option<&str>)> = HashMap::new();
    match (&heads, old) {
        (Some(heads), _) => {
            for head in heads {
                let kept = old
                    .and_then(|o| o.sections.get(&head.product_id))
                    .map(|s| s.version.as_str());
                known.insert(&head.resource_id, (&head.product_id, kept));
            }
        }
        (None, Some(old)) => {
            for section in old.sections.values() {
                known.insert(
                    &section.head.resource_id,
                    (&section.head.product_id, Some(section.version.as_str())),
                );
            }
        }
        (None, None) => {}
    }
    let mut stale: Vec<&str> = rows
        .iter()
        .filter_map(|row| {
            let (section, kept) = known.get(row.resource_id.as_str())?;
            (*kept != Some(row.version.as_str())).then_some(*section)
        })
        .collect();
    // a section whose level was not read (none in a notified read) keeps
    // its seats; a new one is read whatever its level says
    if let Some(heads) = &heads {
        for head in heads {
            if old.is_none_or(|o| !o.sections.contains_key(&head.product_id))
                && !stale.contains(&head.product_id.as_str())
            {
                stale.push(&head.product_id);
            }
        }
    }
    let seats = if stale.is_empty() {
        Vec::new()
    } else {
        seats::map::seats(pool, &stale).await?
    };
    Ok(SeatRead { heads, seats })
}

/// The sections after a read merged into `old`'s, and the product ids
/// whose seats changed.
pub(super) fn merged_sections(
    old: Option<&Snapshot>,
    read: SeatRead,
) -> (HashMap<String, Arc<SectionSeats>>, Vec<String>) {
    let old_sections = old.map(|o| &o.sections);
    let mut changed = Vec::new();
    let mut sections: HashMap<String, Arc<SectionSeats>> = match (&read.heads, old_sections) {
        // a full read: the sections on sale now, with the seats memory had
        (Some(heads), _) => heads
            .iter()
            .filter_map(|head| {
                let kept = old_sections?.get(&head.product_id)?;
                let section = if kept.head == *head {
                    kept.clone()
                } else {
                    changed.push(head.product_id.clone());
                    Arc::new(SectionSeats {
                        head: head.clone(),
                        ..(**kept).clone()
                    })
                };
                Some((head.product_id.clone(), section))
            })
            .collect(),
        (None, Some(old)) => old.clone(),
        (None, None) => HashMap::new(),
    };
    let head_of = |id: &str| -> Option<SectionHead> {
        read.heads
            .as_ref()
            .and_then(|heads| heads.iter().find(|h| h.product_id == id))
            .or_else(|| old_sections.and_then(|o| o.get(id)).map(|s| &s.head))
            .cloned()
    };
    for (id, version, seats) in read.seats {
        let Some(head) = head_of(&id) else { continue };
        let before = old_sections.and_then(|o| o.get(&id));
        if before.is_none_or(|b| b.seats != seats) && !changed.contains(&id) {
            changed.push(id.clone());
        }
        sections.insert(
            id,
            Arc::new(SectionSeats {
                head,
                seats,
                version,
            }),
        );
    }
    (sections, changed)
}
