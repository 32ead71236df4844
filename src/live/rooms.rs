//! Dining rooms in memory: each room's set-up (its tables and joined
//! sets, turns and times, read with every full read) and the stays on its
//! tables, so a table drop's crowd is refused and told the nearest times
//! that seat it without reading the database
//! ([`crate::catalogue::tables::fit`]). A stay begins or ends only in a
//! transaction that writes its time's counters (a booking, a release, a
//! move: `hf_move_booking` touches the row for this), which notifies
//! `hf_stock` and makes a new version; so with every read of levels the
//! stays of the rooms one of whose times' versions moved are read again,
//! after the levels (never older than them), one statement for them all.

use std::collections::{BTreeSet, HashMap};
use std::sync::Arc;

use sqlx::PgPool;

use super::snapshot::{LevelRow, Snapshot};
use crate::catalogue::tables::fit::{self, RoomMemory, RoomPlan, Stays};

/// Rooms read with one read of levels: the plans (a full read), and the
/// stays of the rooms whose times' versions moved.
#[derive(Default)]
pub(super) struct RoomRead {
    plans: Option<Vec<RoomPlan>>,
    stays: HashMap<String, Stays>,
}

/// Reads what memory needs of the rooms with these levels: `full` reads
/// the plans too. `old`: memory before this read.
pub(super) async fn read_rooms(
    pool: &PgPool,
    old: Option<&Snapshot>,
    full: bool,
    rows: &[LevelRow],
) -> sqlx::Result<RoomRead> {
    let plans = if full {
        Some(fit::plans(pool).await?)
    } else {
        None
    };
    let old_rooms = old.map(|o| &o.rooms);
    // the room of each time's resource, as the plans say
    let mut room_of: HashMap<&str, &str> = HashMap::new();
    let known: Vec<&RoomPlan> = match (&plans, old_rooms) {
        (Some(plans), _) => plans.iter().collect(),
        (None, Some(rooms)) => rooms.values().map(|r| r.plan.as_ref()).collect(),
        (None, None) => Vec::new(),
    };
    for plan in &known {
        for time in &plan.times {
            room_of.insert(&time.resource_id, &plan.room);
        }
    }
    let mut stale: BTreeSet<&str> = rows
        .iter()
        .filter(|row| {
            old.and_then(|o| o.level(&row.resource_id))
                .is_none_or(|level| !level.is_version(&row.version))
        })
        .filter_map(|row| room_of.get(row.resource_id.as_str()).copied())
        .collect();
    // a room memory has no stays of is read whatever its levels say, and
    // so is one whose plan changed (a time published meanwhile may have
    // been booked in a notified read that did not know it was the room's)
    for plan in &known {
        let old_plan = old_rooms.and_then(|rooms| rooms.get(&plan.room));
        if old_plan.is_none_or(|old| plans.is_some() && *old.plan != **plan) {
            stale.insert(&plan.room);
        }
    }
    let stale: Vec<&str> = stale.into_iter().collect();
    let stays = if stale.is_empty() {
        HashMap::new()
    } else {
        fit::stays(pool, &stale).await?
    };
    Ok(RoomRead { plans, stays })
}

/// The rooms after a read merged into `old`'s.
pub(super) fn merged_rooms(old: Option<&Snapshot>, read: RoomRead) -> HashMap<String, RoomMemory> {
    let old_rooms = old.map(|o| &o.rooms);
    let mut rooms: HashMap<String, RoomMemory> = match (read.plans, old_rooms) {
        (Some(plans), _) => plans
            .into_iter()
            .filter_map(|plan| {
                let kept = old_rooms.and_then(|o| o.get(&plan.room));
                let stays = match kept {
                    Some(kept) => kept.stays.clone(),
                    None => Arc::new(read.stays.get(&plan.room)?.clone()),
                };
                let plan = match kept {
                    Some(kept) if *kept.plan == plan => kept.plan.clone(),
                    _ => Arc::new(plan),
                };
                Some((plan.room.clone(), RoomMemory { plan, stays }))
            })
            .collect(),
        (None, Some(old)) => old.clone(),
        (None, None) => HashMap::new(),
    };
    for (room, stays) in read.stays {
        if let Some(memory) = rooms.get_mut(&room) {
            memory.stays = Arc::new(stays);
        }
    }
    rooms
}
