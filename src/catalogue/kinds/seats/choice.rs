//! What a shopper chooses of a seated section (docs/design.md, "Reserved
//! seating"): the best seats, together (or apart, when the shop sells a
//! split), or particular seats by their labels, all or none. This is only
//! the shape of the ask, parsed once at the edge; the seats are chosen and
//! pinned under the section's lock: the best by the checkouts' batch
//! ([`super::best`]), seats named by `hf_start_checkouts`, which asks
//! `hf_seat_choose`.

use serde::Serialize;

use crate::inventory::Quantity;

/// Most seats one line may ask for (as many as a line's units).
pub const MAX_SEATS: i64 = 100;

/// Why a line's fields are not seats.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SeatsError {
    /// The best 1 to [`MAX_SEATS`] seats, or none.
    Quantity,
    /// Labels as the plan names them, each once, as many as the quantity.
    Seats,
}

/// A seat as its plan labels it ("C-12"), in the shape the database keeps
/// (`seats.label`): a letter or digit, then letters, digits, spaces and
/// `._-`, at most 24 in all. No comma: a combined start joins labels with
/// commas.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize)]
#[serde(transparent)]
pub struct SeatLabel(String);

impl SeatLabel {
    pub fn parse(text: &str) -> Result<Self, SeatsError> {
        let text = text.trim();
        let mut chars = text.chars();
        let first = chars.next().is_some_and(|c| c.is_ascii_alphanumeric());
        let rest = chars.all(|c| c.is_ascii_alphanumeric() || " ._-".contains(c));
        if first && rest && text.len() <= 24 {
            Ok(SeatLabel(text.to_owned()))
        } else {
            Err(SeatsError::Seats)
        }
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

/// The seats one line asks for.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "pick", rename_all = "snake_case")]
pub enum SeatPick {
    /// The best `qty` seats: next to each other in one row when
    /// `together`; otherwise apart too, when no row has them together and
    /// the shop sells a split.
    Best { qty: Quantity, together: bool },
    /// These seats, all or none.
    Named { seats: Vec<SeatLabel> },
}

impl SeatPick {
    /// A line's fields as seats: `seats` names them (a `qty` beside them
    /// must count them), else the best `qty`, together unless `together`
    /// is false.
    pub fn parse(
        qty: Option<i64>,
        seats: Option<&[String]>,
        together: Option<bool>,
    ) -> Result<Self, SeatsError> {
        let Some(seats) = seats else {
            let qty = qty
                .filter(|q| (1..=MAX_SEATS).contains(q))
                .ok_or(SeatsError::Quantity)?;
            let qty = Quantity::parse(qty).map_err(|_| SeatsError::Quantity)?;
            return Ok(SeatPick::Best {
                qty,
                together: together.unwrap_or(true),
            });
        };
        let count = i64::try_from(seats.len()).map_err(|_| SeatsError::Seats)?;
        if !(1..=MAX_SEATS).contains(&count) || qty.is_some_and(|q| q != count) {
            return Err(SeatsError::Seats);
        }
        let mut labels: Vec<SeatLabel> = Vec::with_capacity(seats.len());
        for seat in seats {
            let label = SeatLabel::parse(seat)?;
            if labels.contains(&label) {
                return Err(SeatsError::Seats);
            }
            labels.push(label);
        }
        Ok(SeatPick::Named { seats: labels })
    }

    /// How many seats: the units the line claims of its section.
    pub fn qty(&self) -> Quantity {
        match self {
            SeatPick::Best { qty, .. } => *qty,
            SeatPick::Named { seats } => {
                Quantity::parse(seats.len() as i64).expect("a pick names 1 to 100 seats")
            }
        }
    }

    /// The labels, as the database takes them (`None`: the best).
    pub fn labels(&self) -> Option<Vec<&str>> {
        match self {
            SeatPick::Best { .. } => None,
            SeatPick::Named { seats } => Some(seats.iter().map(SeatLabel::as_str).collect()),
        }
    }

    /// Whether the seats must be next to each other (named seats are what
    /// they are).
    pub fn together(&self) -> bool {
        match self {
            SeatPick::Best { together, .. } => *together,
            SeatPick::Named { .. } => false,
        }
    }

    /// Two lines of one section as one: the best of both, if they ask
    /// alike; the seats of both, if each is named once. `None` otherwise.
    pub fn merge(&self, other: &SeatPick) -> Option<SeatPick> {
        match (self, other) {
            (
                SeatPick::Best {
                    qty: a,
                    together: x,
                },
                SeatPick::Best {
                    qty: b,
                    together: y,
                },
            ) if x == y => {
                let sum = i64::from(a.get()) + i64::from(b.get());
                if sum > MAX_SEATS {
                    return None;
                }
                let qty = Quantity::parse(sum).ok()?;
                Some(SeatPick::Best { qty, together: *x })
            }
            (SeatPick::Named { seats: a }, SeatPick::Named { seats: b }) => {
                let seats: Vec<SeatLabel> = a.iter().chain(b).cloned().collect();
                let distinct = b.iter().all(|s| !a.contains(s));
                (distinct && seats.len() as i64 <= MAX_SEATS).then_some(SeatPick::Named { seats })
            }
            _ => None,
        }
    }
}

/// Why a seat line could not have its seats, in the database's word,
/// which is also its error code's.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum SeatReason {
    /// Seats named were taken meanwhile (or are off sale).
    SeatsTaken,
    /// Seats named that the section does not have.
    UnknownSeats,
    /// No stretch of a row has the best so many together (and a split was
    /// not asked for, or the shop does not sell one).
    NotTogether,
}

impl SeatReason {
    const ALL: [SeatReason; 3] = [
        SeatReason::SeatsTaken,
        SeatReason::UnknownSeats,
        SeatReason::NotTogether,
    ];

    /// The reason in its one word (`seats_taken`).
    pub fn word(self) -> &'static str {
        match self {
            SeatReason::SeatsTaken => "seats_taken",
            SeatReason::UnknownSeats => "unknown_seats",
            SeatReason::NotTogether => "not_together",
        }
    }

    /// The reason a word says, if it says one.
    pub fn from_word(word: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|reason| reason.word() == word)
    }
}

/// A seat line refused, with what the database offers instead: the seats
/// nearest those asked for, as many together (taken), or the best split
/// (not together). Nothing was held.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct SeatRefusal {
    pub product_id: String,
    /// The line's name ("Winter Gala — Stalls").
    pub name: String,
    pub reason: SeatReason,
    /// The seats taken or unknown, as the plan labels them.
    pub seats: Vec<String>,
    /// Other seats to take instead, each a set, best first.
    pub offers: Vec<Vec<String>>,
    /// Whether the split offered may be sold (not together).
    pub split_allowed: bool,
}

impl SeatRefusal {
    /// The refusal in a shopper's words: "C-12 was just taken."
    pub fn words(&self) -> String {
        let seats = join_and(&self.seats);
        match self.reason {
            SeatReason::SeatsTaken if self.seats.len() == 1 => format!("{seats} was just taken."),
            SeatReason::SeatsTaken => format!("{seats} were just taken."),
            SeatReason::UnknownSeats => format!("{} has no seat {seats}.", self.name),
            SeatReason::NotTogether => format!("{} has no seats together for you now.", self.name),
        }
    }

    /// What is offered instead, in a shopper's words ("" when nothing is).
    pub fn offer_words(&self) -> String {
        let sets: Vec<String> = self.offers.iter().map(|set| set.join(", ")).collect();
        match (self.reason, sets.as_slice()) {
            (_, []) => String::new(),
            (SeatReason::NotTogether, [split, ..]) => format!("Seats apart instead: {split}."),
            (_, [one]) => format!("Nearest seats together: {one}."),
            (_, sets) => format!("Nearest seats together: {}.", sets.join("; or ")),
        }
    }
}

/// "C-12", "C-12 and C-13", "C-12, C-13 and C-14".
fn join_and(labels: &[String]) -> String {
    match labels {
        [] => String::new(),
        [one] => one.clone(),
        [rest @ .., last] => format!("{} and {last}", rest.join(", ")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn named(labels: &[&str]) -> Result<SeatPick, SeatsError> {
        let seats: Vec<String> = labels.iter().map(|s| (*s).to_owned()).collect();
        SeatPick::parse(None, Some(&seats), None)
    }

    #[test]
    fn the_best_seats_are_together_unless_asked_otherwise() {
        let pick = SeatPick::parse(Some(4), None, None).unwrap();
        assert_eq!(pick.qty().get(), 4);
        assert!(pick.together());
        assert_eq!(pick.labels(), None);
        assert!(
            !SeatPick::parse(Some(4), None, Some(false))
                .unwrap()
                .together()
        );
        for bad in [None, Some(0), Some(101)] {
            assert_eq!(SeatPick::parse(bad, None, None), Err(SeatsError::Quantity));
        }
    }

    #[test]
    fn named_seats_are_labels_each_once() {
        let pick = named(&["C-12", " C-13 "]).unwrap();
        assert_eq!(pick.qty().get(), 2);
        assert_eq!(pick.labels(), Some(vec!["C-12", "C-13"]));
        for bad in [
            &[][..],
            &["C-12", "C-12"],
            &["C,12"],
            &["-C"],
            &["C-12345678901234567890123"],
        ] {
            assert_eq!(named(bad), Err(SeatsError::Seats), "{bad:?}");
        }
        let seats = vec!["C-12".to_owned()];
        assert_eq!(
            SeatPick::parse(Some(2), Some(&seats), None),
            Err(SeatsError::Seats),
            "a qty beside named seats counts them"
        );
    }

    #[test]
    fn lines_of_one_section_add_up_when_they_ask_alike() {
        let two = SeatPick::parse(Some(2), None, None).unwrap();
        assert_eq!(two.merge(&two).unwrap().qty().get(), 4);
        let apart = SeatPick::parse(Some(2), None, Some(false)).unwrap();
        assert_eq!(two.merge(&apart), None);
        let c12 = named(&["C-12"]).unwrap();
        assert_eq!(
            c12.merge(&named(&["C-13"]).unwrap()),
            Some(named(&["C-12", "C-13"]).unwrap())
        );
        assert_eq!(c12.merge(&c12), None, "a seat named twice");
        assert_eq!(c12.merge(&two), None);
    }

    #[test]
    fn a_reason_is_its_word_and_its_words_serialised() {
        for reason in SeatReason::ALL {
            assert_eq!(SeatReason::from_word(reason.word()), Some(reason));
            assert_eq!(
                serde_json::to_value(reason).unwrap(),
                serde_json::json!(reason.word())
            );
        }
        assert_eq!(SeatReason::from_word("taken"), None);
    }

    #[test]
    fn a_refusal_names_the_seats_taken_and_the_seats_offered() {
        let refusal = SeatRefusal {
            product_id: "hall-stalls".into(),
            name: "The Hall — Stalls".into(),
            reason: SeatReason::SeatsTaken,
            seats: vec!["C-12".into()],
            offers: vec![
                vec!["C-14".into(), "C-15".into()],
                vec!["D-3".into(), "D-4".into()],
            ],
            split_allowed: false,
        };
        assert_eq!(refusal.words(), "C-12 was just taken.");
        assert_eq!(
            refusal.offer_words(),
            "Nearest seats together: C-14, C-15; or D-3, D-4."
        );
        let two = SeatRefusal {
            seats: vec!["C-12".into(), "C-13".into(), "C-14".into()],
            offers: vec![],
            ..refusal.clone()
        };
        assert_eq!(two.words(), "C-12, C-13 and C-14 were just taken.");
        assert_eq!(two.offer_words(), "");
        let apart = SeatRefusal {
            reason: SeatReason::NotTogether,
            seats: vec![],
            offers: vec![vec!["A-1".into(), "B-7".into()]],
            ..refusal
        };
        assert_eq!(
            apart.words(),
            "The Hall — Stalls has no seats together for you now."
        );
        assert_eq!(apart.offer_words(), "Seats apart instead: A-1, B-7.");
    }
}
