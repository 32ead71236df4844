//! The best seats of a batch, chosen in memory (issue 45). A seated
//! on-sale is many shoppers asking one section for "the best n together"
//! at once; asking the database's chooser (`hf_seat_best`) for each of
//! them in turn, under the section's lock, costs a scan of the section
//! per line. Here a batch of checkouts takes its locks first and reads
//! every free seat of its sections once ([`FreeSeats::read`], the same
//! transaction); each best-available line is then chosen against that
//! read, around the seats the batch chose before it, by the same rule as
//! `hf_seat_best`; and the call that starts the checkouts pins them in
//! that transaction, so nothing can take them between (and the pins'
//! unique index and guard would refuse a seat taken or off sale).
//!
//! The rule (docs/design.md, "Reserved seating"): rows are looked at in
//! windows from the stage (ranks 1–4, then 5–12, 13–28, each twice as
//! deep), and in a window the way of `n` seats next to each other that
//! leaves the fewest single seats stranded at its ends wins, then the
//! nearest row, then the nearest the middle, then the plan's order; a
//! later window wins only by stranding fewer. A section whose chooser is
//! `first_fit` takes the first stretch long enough, in the plan's order.
//! A line no stretch holds is left to the database, whose chooser splits
//! it or says why not with its own words; `chooser_agrees_with_the_database`
//! (tests/api/seats_best.rs) holds the two to the same choices.

use std::collections::{HashMap, HashSet};

use sqlx::{Postgres, Transaction};

use super::map::{SeatState, SectionSeats};

/// One free seat as the chooser reads it.
#[derive(Debug, Clone, sqlx::FromRow)]
struct Free {
    resource_id: String,
    splits: bool,
    first_fit: bool,
    middle: f64,
    id: i64,
    label: String,
    row_rank: i32,
    run: i32,
    pos: i32,
    x: i32,
}

/// One section's free seats, in the plan's order (row, run, position),
/// with those chosen in this batch marked.
#[derive(Debug, Default)]
struct Section {
    first_fit: bool,
    /// The middle of the section's width (every seat's, free or not).
    middle: f64,
    seats: Vec<Free>,
    chosen: Vec<bool>,
}

/// Seats chosen for one line: their ids and labels, in the plan's order.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Chosen {
    pub ids: Vec<i64>,
    pub labels: Vec<String>,
}

/// What a batch decided for one best-available line.
#[derive(Debug, PartialEq, Eq)]
pub enum Pick {
    /// These seats: next to each other, or apart where that was allowed.
    Seats(Chosen),
    /// No stretch holds them: the best split, offered (`split_allowed`:
    /// the shop sells splits, to a line that does not ask for together).
    Apart {
        offer: Vec<String>,
        split_allowed: bool,
    },
}

/// The free seats of a batch's sections, read under the batch's locks.
#[derive(Debug, Default)]
pub struct FreeSeats {
    sections: HashMap<String, Section>,
    /// The shop sells a group its seats apart (`seating_settings.splits`).
    splits: bool,
}

/// A way of `qty` seats: where it starts in the section's seats, and what
/// orders it (fewest orphans, nearest row, nearest the middle, then the
/// plan's order: `run` and `first` follow from the start).
#[derive(Debug, Clone, Copy)]
struct Way {
    start: usize,
    orphans: u8,
    row_rank: i32,
    off_middle: f64,
}

impl Way {
    fn better_than(&self, other: &Way) -> bool {
        (self.orphans, self.row_rank)
            .cmp(&(other.orphans, other.row_rank))
            .then(self.off_middle.total_cmp(&other.off_middle))
            .then(self.start.cmp(&other.start))
            .is_lt()
    }
}

impl FreeSeats {
    /// Takes the batch's locks in the order `hf_start_checkouts` takes
    /// them (the e-mails' and addresses' keys, then every resource,
    /// ascending), ends the due holds of its seated sections, and reads
    /// their free seats: `hf_seats_free`.
    pub async fn read(
        tx: &mut Transaction<'_, Postgres>,
        limit_keys: &[&str],
        resources: &[&str],
    ) -> sqlx::Result<Self> {
        let rows: Vec<Free> = sqlx::query_as(
            "select resource_id, splits, first_fit, middle, id, label, row_rank, run, pos, x \
               from hf_seats_free($1, $2)",
        )
        .bind(limit_keys)
        .bind(resources)
        .fetch_all(&mut **tx)
        .await?;
        let mut sections: HashMap<String, Section> = HashMap::new();
        let splits = rows.first().is_some_and(|r| r.splits);
        for row in rows {
            let section = sections.entry(row.resource_id.clone()).or_default();
            section.first_fit = row.first_fit;
            section.middle = row.middle;
            section.seats.push(row);
            section.chosen.push(false);
        }
        Ok(FreeSeats { sections, splits })
    }

    /// The free seats of these sections as memory last read them
    /// ([`SectionSeats`]), less the seats in `taken` (chosen lately and not
    /// in memory yet): a choice made ahead of the locks, which the call
    /// checks under them (`hf_start_checkouts_chosen`). It never sells a
    /// split: a line no stretch holds is left to the database.
    pub fn remembered<'s>(
        sections: impl IntoIterator<Item = &'s SectionSeats>,
        taken: &HashSet<i64>,
    ) -> Self {
        let mut free = FreeSeats::default();
        for section in sections {
            let head = &section.head;
            let seats: Vec<Free> = section
                .seats
                .iter()
                .filter(|s| s.state == SeatState::Free && s.access == "none")
                .filter(|s| !taken.contains(&s.id))
                .map(|s| Free {
                    resource_id: head.resource_id.clone(),
                    splits: false,
                    first_fit: head.first_fit,
                    middle: head.middle,
                    id: s.id,
                    label: s.label.clone(),
                    row_rank: s.row_rank,
                    run: s.run,
                    pos: s.pos,
                    x: s.x,
                })
                .collect();
            free.sections.insert(
                head.resource_id.clone(),
                Section {
                    first_fit: head.first_fit,
                    middle: head.middle,
                    chosen: vec![false; seats.len()],
                    seats,
                },
            );
        }
        free
    }

    /// What the batch decides for a line asking for the best `qty` seats
    /// of the section on `resource`, as `hf_seat_choose` would: the best
    /// stretch; else the best split, sold when the shop sells splits and
    /// the line need not be together, else offered. Seats chosen are the
    /// batch's from now on. `None`: fewer seats are free than it asks for
    /// (the database says sold out), or the section was not read.
    pub fn choose(&mut self, resource: &str, qty: usize, together: bool) -> Option<Pick> {
        let splits = self.splits;
        let section = self.sections.get_mut(resource)?;
        if qty == 0 || section.chosen.iter().filter(|c| !**c).count() < qty {
            return None;
        }
        if let Some(way) = section.best(qty) {
            return Some(Pick::Seats(
                section.take((way.start..way.start + qty).collect()),
            ));
        }
        // no stretch holds them: as few pieces as can be, each the longest
        // stretch left (its best way, when the stretch is longer)
        let mut pieces: Vec<usize> = Vec::new();
        let mut need = qty;
        while need > 0 {
            let Some(size) = section.stretches(None).iter().map(|(_, len)| *len).max() else {
                break;
            };
            let Some(way) = section.best(size.min(need)) else {
                break;
            };
            for i in way.start..way.start + size.min(need) {
                section.chosen[i] = true;
                pieces.push(i);
            }
            need -= size.min(need);
        }
        pieces.sort_unstable();
        if need == 0 && splits && !together {
            return Some(Pick::Seats(section.take(pieces)));
        }
        let offer = pieces
            .iter()
            .map(|&i| section.seats[i].label.clone())
            .collect();
        for i in pieces {
            section.chosen[i] = false;
        }
        (need == 0).then_some(Pick::Apart {
            offer,
            split_allowed: splits,
        })
    }
}

impl Section {
    /// These seats (indices, in the plan's order), now the batch's.
    fn take(&mut self, seats: Vec<usize>) -> Chosen {
        let mut chosen = Chosen::default();
        for i in seats {
            self.chosen[i] = true;
            chosen.ids.push(self.seats[i].id);
            chosen.labels.push(self.seats[i].label.clone());
        }
        chosen
    }

    /// Every stretch of free seats not chosen yet: seats next to each other
    /// in one run, as (first index, length).
    fn stretches(&self, rows: Option<(i32, i32)>) -> Vec<(usize, usize)> {
        let mut out: Vec<(usize, usize)> = Vec::new();
        let mut open: Option<(usize, usize)> = None;
        for (i, seat) in self.seats.iter().enumerate() {
            let inside = rows.is_none_or(|(from, to)| (from..=to).contains(&seat.row_rank));
            if self.chosen[i] || !inside {
                out.extend(open.take());
                continue;
            }
            open = match open {
                Some((start, len))
                    if self.seats[start + len - 1].run == seat.run
                        && self.seats[start + len - 1].pos + 1 == seat.pos =>
                {
                    Some((start, len + 1))
                }
                other => {
                    out.extend(other);
                    Some((i, 1))
                }
            };
        }
        out.extend(open);
        out
    }

    fn best(&self, qty: usize) -> Option<Way> {
        if qty == 0 {
            return None;
        }
        if self.first_fit {
            let (start, _) = self
                .stretches(None)
                .into_iter()
                .find(|(_, len)| *len >= qty)?;
            return Some(self.way(start, qty, start, qty));
        }
        let last = self.seats.iter().map(|s| s.row_rank).max()?;
        let (mut from, mut depth) = (1, 4);
        let mut best: Option<Way> = None;
        while from <= last {
            let found = self
                .stretches(Some((from, from + depth - 1)))
                .into_iter()
                .filter(|(_, len)| *len >= qty)
                .flat_map(|(start, len)| {
                    (start..=start + len - qty).map(move |first| (first, start, len))
                })
                .map(|(first, start, len)| self.way(first, qty, start, len))
                .reduce(|a, b| if b.better_than(&a) { b } else { a });
            if let Some(way) = found
                && best.is_none_or(|b| way.orphans < b.orphans)
            {
                best = Some(way);
            }
            if best.is_some_and(|b| b.orphans == 0) {
                break;
            }
            from += depth;
            depth *= 2;
        }
        best
    }

    /// The way of `qty` seats from `first`, in the stretch of `len` seats
    /// from `start`: a single free seat left at either end is an orphan.
    fn way(&self, first: usize, qty: usize, start: usize, len: usize) -> Way {
        let last = first + qty - 1;
        let orphans = u8::from(first - start == 1) + u8::from(start + len - 1 - last == 1);
        let mid = (f64::from(self.seats[first].x) + f64::from(self.seats[last].x)) / 2.0;
        Way {
            start: first,
            orphans,
            row_rank: self.seats[first].row_rank,
            off_middle: (mid - self.middle).abs(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn section(rows: &[(i32, &[i32])], first_fit: bool) -> Section {
        let mut seats = Vec::new();
        for (rank, positions) in rows {
            for &pos in *positions {
                seats.push(Free {
                    resource_id: "r".into(),
                    splits: false,
                    first_fit,
                    middle: 5.0,
                    id: i64::from(rank * 1000 + pos),
                    label: format!("{rank}-{pos}"),
                    row_rank: *rank,
                    run: rank * 1000,
                    pos,
                    x: pos,
                });
            }
        }
        let chosen = vec![false; seats.len()];
        Section {
            first_fit,
            middle: 5.0,
            seats,
            chosen,
        }
    }

    fn labels(s: &mut Section, qty: usize) -> Option<Vec<String>> {
        let mut free = FreeSeats::default();
        free.sections.insert("r".into(), std::mem::take(s));
        let pick = free.choose("r", qty, true);
        *s = free.sections.remove("r").unwrap();
        match pick {
            Some(Pick::Seats(chosen)) => Some(chosen.labels),
            _ => None,
        }
    }

    #[test]
    fn the_middle_of_the_front_row_first_then_no_orphan() {
        let mut s = section(&[(1, &[1, 2, 3, 4, 5, 6, 7, 8, 9]), (2, &[1, 2, 3])], false);
        assert_eq!(labels(&mut s, 3).unwrap(), ["1-4", "1-5", "1-6"]);
        // 1-1..1-3 and 1-7..1-9 are left: 2 from either stretch strands one
        assert_eq!(labels(&mut s, 3).unwrap(), ["1-1", "1-2", "1-3"]);
        // the next row's 2 would strand 2-3 (one orphan) as would row 1's
        // (1-9): the nearer row wins
        assert_eq!(labels(&mut s, 2).unwrap(), ["1-7", "1-8"]);
    }

    #[test]
    fn a_later_window_wins_only_by_stranding_fewer() {
        // rows 1-4 have 3 free: 2 of them strand one; row 5 has exactly 2
        let mut s = section(&[(1, &[1, 2, 3]), (5, &[4, 5])], false);
        assert_eq!(labels(&mut s, 2).unwrap(), ["5-4", "5-5"]);
    }

    #[test]
    fn first_fit_takes_the_first_stretch_long_enough() {
        let mut s = section(&[(1, &[1, 3, 4, 5]), (2, &[1, 2])], true);
        assert_eq!(labels(&mut s, 2).unwrap(), ["1-3", "1-4"]);
        assert_eq!(labels(&mut s, 2).unwrap(), ["2-1", "2-2"]);
        assert_eq!(labels(&mut s, 2), None);
    }

    #[test]
    fn no_stretch_holds_them_the_split_is_offered_or_sold_and_nothing_else_is_chosen() {
        let mut free = FreeSeats::default();
        free.sections
            .insert("r".into(), section(&[(1, &[1, 3, 4, 6])], false));
        assert_eq!(
            free.choose("r", 3, true),
            Some(Pick::Apart {
                offer: vec!["1-3".into(), "1-4".into(), "1-6".into()],
                split_allowed: false
            })
        );
        assert_eq!(free.choose("r", 5, true), None, "more than are free");
        free.splits = true;
        let Some(Pick::Seats(apart)) = free.choose("r", 3, false) else {
            panic!("a split is sold to a line that need not be together");
        };
        assert_eq!(apart.labels, ["1-3", "1-4", "1-6"]);
        assert_eq!(
            free.choose("r", 1, true)
                .map(|p| matches!(p, Pick::Seats(_))),
            Some(true)
        );
        assert_eq!(free.choose("r", 1, true), None, "every seat is the batch's");
    }
}
