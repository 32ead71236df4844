//! What a shopper chooses for one line, and the capacity that line
//! claims (docs/design.md, "What a line claims").
//!
//! A kind says what a shopper may choose for one line of it
//! ([`ChoiceKind`]): a number of units, a party at a time (a table), or
//! seats of a section ([`super::seats::choice`]). A choice is parsed once,
//! at the edge (the basket form, the basket's rows, the JSON API), into a
//! [`Choice`], and the kind turns it into the [`Claim`] the checkout's one
//! transaction makes in the engine. Every claim is units of one resource
//! (what the shop and the crowd count); a party's claim also pins a table
//! beside them, and a seat line a pin per seat, in the database.

use chrono::{DateTime, Utc};
use serde::Serialize;

use super::seats::choice::{SeatPick, SeatsError};
use crate::inventory::{BasketLine, Quantity, ResourceId};

/// Most units one line may ask for, at any edge.
pub const MAX_LINE_UNITS: i64 = 100;

/// The largest party one line may ask a table for, at any edge (a room
/// says its own, as its times' most per order).
pub const MAX_PARTY: i64 = 100;

/// What a kind lets a shopper choose for one line.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ChoiceKind {
    /// A number of units, 1 to the product's most per order.
    Quantity,
    /// A party of 1 to the product's most per order, at the product's
    /// time: a table for them.
    Party,
    /// Seats of a section: the best so many, or seats by label.
    Seats,
}

/// What a shopper chose for one line.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "choice", rename_all = "snake_case")]
pub enum Choice {
    /// So many units of the product.
    Units { qty: Quantity },
    /// A table for a party at a time.
    Party { party: Quantity, at: DateTime<Utc> },
    /// Seats of a section.
    Seats { pick: SeatPick },
}

/// Why a line's fields are not a choice the product's kind takes.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ChoiceError {
    #[error("a quantity is 1 to {MAX_LINE_UNITS}")]
    Quantity,
    #[error("a party is 1 to {MAX_PARTY} guests")]
    Party,
    #[error("a table is booked for a party at a time: give both")]
    PartyAndTime,
    #[error("give a quantity or a party at a time, not both")]
    Both,
    #[error(
        "seats are 1 to {MAX_LINE_UNITS} labels as the plan names them (\"C-12\"), each once, \
         as many as the quantity beside them"
    )]
    Seats,
}

/// A line's fields, as the basket form, the basket's row and the JSON
/// API give them: a number of units, a party at a time, or for seats the
/// labels asked for or whether the best must be together.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ChoiceFields {
    pub qty: Option<i64>,
    pub party: Option<i64>,
    pub at: Option<DateTime<Utc>>,
    pub seats: Option<Vec<String>>,
    pub together: Option<bool>,
}

impl From<SeatsError> for ChoiceError {
    fn from(error: SeatsError) -> Self {
        match error {
            SeatsError::Quantity => ChoiceError::Quantity,
            SeatsError::Seats => ChoiceError::Seats,
        }
    }
}

impl Choice {
    /// The choice a line's fields make, at any edge; the product's kind
    /// then says whether it takes it ([`ChoiceKind::accepts`]).
    pub fn from_fields(fields: ChoiceFields) -> Result<Choice, ChoiceError> {
        let party = fields.party.is_some() || fields.at.is_some();
        let seats = fields.seats.is_some() || fields.together.is_some();
        match (fields.qty, party, seats) {
            (_, true, true) | (Some(_), true, false) => Err(ChoiceError::Both),
            (_, true, false) => ChoiceKind::Party.parse(fields),
            (_, false, true) => {
                let pick = SeatPick::parse(fields.qty, fields.seats.as_deref(), fields.together)?;
                Ok(Choice::Seats { pick })
            }
            (_, false, false) => ChoiceKind::Quantity.parse(fields),
        }
    }
}

/// How full a product or a day of them is, as [`ChoiceKind::fill_words`]
/// says it.
#[derive(Debug, Clone, Copy)]
pub struct FillCounts {
    pub capacity: i64,
    pub sold: i64,
    pub reserved: i64,
    /// The sales that stand: for tables, the parties booked.
    pub parties: i64,
    /// Sold of capacity, whole percent.
    pub percent: i64,
}

impl ChoiceKind {
    /// A line's fields as a choice of this kind: `qty` for a number of
    /// units; `party` (or, as a basket's row keeps it, `qty`) and `at`
    /// for a party at a time; for seats, `seats` by label, else the best
    /// `qty` (together unless `together` is false).
    pub fn parse(self, fields: ChoiceFields) -> Result<Choice, ChoiceError> {
        match self {
            ChoiceKind::Quantity => {
                let qty = fields
                    .qty
                    .filter(|q| (1..=MAX_LINE_UNITS).contains(q))
                    .ok_or(ChoiceError::Quantity)?;
                let qty = Quantity::parse(qty).map_err(|_| ChoiceError::Quantity)?;
                Ok(Choice::Units { qty })
            }
            ChoiceKind::Party => {
                let (Some(party), Some(at)) = (fields.party.or(fields.qty), fields.at) else {
                    return Err(ChoiceError::PartyAndTime);
                };
                if !(1..=MAX_PARTY).contains(&party) {
                    return Err(ChoiceError::Party);
                }
                let party = Quantity::parse(party).map_err(|_| ChoiceError::Party)?;
                Ok(Choice::Party { party, at })
            }
            ChoiceKind::Seats => Ok(Choice::Seats {
                pick: SeatPick::parse(fields.qty, fields.seats.as_deref(), fields.together)?,
            }),
        }
    }

    /// The fields a line of this choice takes, in words for a refusal:
    /// "takes qty, not seats or a party".
    pub fn fields_words(self) -> &'static str {
        match self {
            ChoiceKind::Quantity => "takes qty alone, not seats, together or a party",
            ChoiceKind::Party => "takes party and at, not qty, seats or together",
            ChoiceKind::Seats => "takes seats by label or qty (with together), not a party",
        }
    }

    /// Whether a product of this choice's capacity is places that fill up:
    /// a room's times count the covers the kitchen takes each quarter hour,
    /// not its tables, so "0 of 208" would say nothing.
    pub fn capacity_is_places(self) -> bool {
        !matches!(self, ChoiceKind::Party)
    }

    /// How full, in this choice's words: "3 tables booked, 10 covers", "12
    /// of 40 seats sold (30 %)", "5 of 100 sold (5 %)", with what is being
    /// bought.
    pub fn fill_words(self, counts: &FillCounts) -> String {
        let plural =
            |n: i64, one: &str, many: &str| format!("{n} {}", if n == 1 { one } else { many });
        let FillCounts {
            capacity,
            sold,
            reserved,
            parties,
            percent,
        } = *counts;
        let mut words = match self {
            ChoiceKind::Party if parties == 0 => "No tables booked yet".to_owned(),
            ChoiceKind::Party => format!(
                "{} booked, {}",
                plural(parties, "table", "tables"),
                plural(sold, "cover", "covers")
            ),
            ChoiceKind::Seats => format!("{sold} of {capacity} seats sold ({percent} %)"),
            ChoiceKind::Quantity => format!("{sold} of {capacity} sold ({percent} %)"),
        };
        if reserved > 0 {
            words.push_str(&match self {
                ChoiceKind::Party => {
                    format!(", {} being booked", plural(reserved, "cover", "covers"))
                }
                ChoiceKind::Quantity | ChoiceKind::Seats => format!(", {reserved} being bought"),
            });
        }
        words
    }

    /// How a line of this choice's count is said: "Party of 4", or "4".
    pub fn count_words(self, qty: i32) -> String {
        match self {
            ChoiceKind::Party => format!("Party of {qty}"),
            ChoiceKind::Quantity | ChoiceKind::Seats => qty.to_string(),
        }
    }

    /// Whether a choice is one a kind of this choice takes.
    pub fn accepts(self, choice: &Choice) -> bool {
        matches!(
            (self, choice),
            (ChoiceKind::Quantity, Choice::Units { .. })
                | (ChoiceKind::Party, Choice::Party { .. })
                | (ChoiceKind::Seats, Choice::Seats { .. })
        )
    }

    /// Whether a basket may keep this choice for a product of this kind: so
    /// many units for any (a party's size, the best seats), seats only for
    /// seats, a party at a time only for a party. A line carrying a field
    /// its kind does not take is refused, never quietly dropped.
    pub fn takes_in_basket(self, choice: &Choice) -> bool {
        matches!(choice, Choice::Units { .. }) || self.accepts(choice)
    }

    /// A choice as a kind of this choice takes it: a number of units of a
    /// seated section is its best seats together. `None`: not chosen that
    /// way.
    pub fn adopt(self, choice: Choice) -> Option<Choice> {
        match (self, choice) {
            (ChoiceKind::Seats, Choice::Units { qty }) => Some(Choice::Seats {
                pick: SeatPick::Best {
                    qty,
                    together: true,
                },
            }),
            (kind, choice) => kind.accepts(&choice).then_some(choice),
        }
    }
}

impl Choice {
    /// Two lines of one product as one: their units added. `None` when
    /// they do not combine (more units than a quantity holds; two parties
    /// at one time are two bookings, not one).
    pub fn merge(&self, other: &Choice) -> Option<Choice> {
        match (self, other) {
            (Choice::Units { qty: a }, Choice::Units { qty: b }) => {
                let sum = i64::from(a.get()) + i64::from(b.get());
                Quantity::parse(sum).ok().map(Choice::units)
            }
            (Choice::Seats { pick: a }, Choice::Seats { pick: b }) => {
                a.merge(b).map(|pick| Choice::Seats { pick })
            }
            _ => None,
        }
    }

    /// So many units.
    pub fn units(qty: Quantity) -> Self {
        Choice::Units { qty }
    }

    /// How many units of its product the line takes (a party's covers):
    /// what the limits per order, per e-mail and per address count.
    pub fn qty(&self) -> Quantity {
        match self {
            Choice::Units { qty } => *qty,
            Choice::Party { party, .. } => *party,
            Choice::Seats { pick } => pick.qty(),
        }
    }

    /// The time the line is for, when it names one: it must be its
    /// product's.
    pub fn at(&self) -> Option<DateTime<Utc>> {
        match self {
            Choice::Units { .. } | Choice::Seats { .. } => None,
            Choice::Party { at, .. } => Some(*at),
        }
    }

    /// The capacity the line claims of its product (`product`, whose
    /// resource is `resource`).
    pub fn claim(&self, product: &str, resource: ResourceId) -> Claim {
        match self {
            Choice::Units { qty } => Claim::Units {
                resource,
                qty: *qty,
            },
            Choice::Party { party, .. } => Claim::Table {
                resource,
                covers: *party,
                product: product.to_owned(),
            },
            Choice::Seats { pick } => Claim::Seats {
                resource,
                pick: pick.clone(),
            },
        }
    }
}

/// The capacity one line claims in the engine, in the checkout's one
/// all-or-nothing transaction.
#[derive(Debug, Clone)]
pub enum Claim {
    /// `qty` units of one resource (a tier, a slot, a shelf).
    Units { resource: ResourceId, qty: Quantity },
    /// `covers` units of a table time's pacing resource, and, in the same
    /// transaction, the smallest free table (or joined set) that seats
    /// the party pinned for its stay (`hf_start_checkouts`).
    Table {
        resource: ResourceId,
        covers: Quantity,
        product: String,
    },
    /// A unit of a section's resource per seat, and the seats pinned to
    /// the hold beside them (`hf_start_checkouts`).
    Seats {
        resource: ResourceId,
        pick: SeatPick,
    },
}

impl Claim {
    /// The resource whose counters the claim moves (what the shop, the
    /// crowd and the drift check count).
    pub fn resource(&self) -> &ResourceId {
        match self {
            Claim::Units { resource, .. }
            | Claim::Table { resource, .. }
            | Claim::Seats { resource, .. } => resource,
        }
    }

    /// The claim as a line of the engine's basket hold.
    pub fn basket_line(&self) -> BasketLine {
        match self {
            Claim::Units { resource, qty } => BasketLine {
                resource: resource.clone(),
                qty: *qty,
            },
            Claim::Table {
                resource, covers, ..
            } => BasketLine {
                resource: resource.clone(),
                qty: *covers,
            },
            Claim::Seats { resource, pick } => BasketLine {
                resource: resource.clone(),
                qty: pick.qty(),
            },
        }
    }

    /// Whether the claim pins something beside its units (a table, seats),
    /// which the checkout's start writes with its hold.
    pub fn pins(&self) -> bool {
        match self {
            Claim::Units { .. } => false,
            Claim::Table { .. } | Claim::Seats { .. } => true,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn units(qty: i64) -> ChoiceFields {
        ChoiceFields {
            qty: Some(qty),
            ..ChoiceFields::default()
        }
    }

    fn at() -> DateTime<Utc> {
        DateTime::parse_from_rfc3339("2026-12-05T19:30:00+01:00")
            .unwrap()
            .with_timezone(&Utc)
    }

    #[test]
    fn a_quantity_is_one_to_a_hundred() {
        let kind = ChoiceKind::Quantity;
        assert_eq!(kind.parse(units(2)).unwrap().qty().get(), 2);
        for bad in [None, Some(0), Some(-1), Some(101)] {
            let fields = ChoiceFields {
                qty: bad,
                ..ChoiceFields::default()
            };
            assert_eq!(kind.parse(fields), Err(ChoiceError::Quantity), "{bad:?}");
        }
    }

    #[test]
    fn lines_of_one_product_add_up() {
        let two = ChoiceKind::Quantity.parse(units(2)).unwrap();
        let three = ChoiceKind::Quantity.parse(units(3)).unwrap();
        assert_eq!(two.merge(&three).unwrap().qty().get(), 5);
        assert!(ChoiceKind::Quantity.accepts(&two));
        assert!(!ChoiceKind::Party.accepts(&two));
    }

    #[test]
    fn seats_are_chosen_by_their_fields_and_a_seated_kind_takes_units_as_its_best() {
        let fields = ChoiceFields {
            qty: Some(2),
            together: Some(true),
            ..ChoiceFields::default()
        };
        let best = Choice::from_fields(fields).unwrap();
        assert!(ChoiceKind::Seats.accepts(&best));
        assert!(!ChoiceKind::Quantity.accepts(&best));
        let units = Choice::from_fields(units(2)).unwrap();
        assert_eq!(ChoiceKind::Seats.adopt(units.clone()), Some(best.clone()));
        assert_eq!(ChoiceKind::Quantity.adopt(best), None);
        let named = Choice::from_fields(ChoiceFields {
            seats: Some(vec!["C-12".into(), "C-13".into()]),
            ..ChoiceFields::default()
        })
        .unwrap();
        assert_eq!(named.qty().get(), 2);
        let claim = named.claim("hall-stalls", ResourceId::parse("hall-stalls").unwrap());
        assert_eq!(claim.basket_line().qty.get(), 2);
        assert!(claim.pins());
        assert_eq!(named.merge(&units), None);
        let both = ChoiceFields {
            seats: Some(vec!["C-12".into()]),
            party: Some(2),
            at: Some(at()),
            ..ChoiceFields::default()
        };
        assert_eq!(Choice::from_fields(both), Err(ChoiceError::Both));
    }

    #[test]
    fn units_claim_their_resource() {
        let choice = ChoiceKind::Quantity.parse(units(3)).unwrap();
        let claim = choice.claim(
            "harbour-lights-vip",
            ResourceId::parse("harbour-lights-vip").unwrap(),
        );
        assert_eq!(claim.resource().as_str(), "harbour-lights-vip");
        assert_eq!(claim.basket_line().qty.get(), 3);
        assert!(!claim.pins());
    }

    #[test]
    fn a_party_is_a_size_and_a_time_and_claims_covers_and_a_table() {
        let fields = ChoiceFields {
            party: Some(4),
            at: Some(at()),
            ..ChoiceFields::default()
        };
        let choice = Choice::from_fields(fields).unwrap();
        assert_eq!(choice.qty().get(), 4);
        assert_eq!(choice.at(), Some(at()));
        assert!(ChoiceKind::Party.accepts(&choice));
        assert!(!ChoiceKind::Quantity.accepts(&choice));
        // a basket's row keeps the party as its quantity
        let row = ChoiceFields {
            qty: Some(4),
            at: Some(at()),
            ..ChoiceFields::default()
        };
        assert_eq!(ChoiceKind::Party.parse(row), Ok(choice.clone()));
        // two parties at one time are two bookings
        assert_eq!(choice.merge(&choice), None);
        let claim = choice.claim("bistro-2026-12-05-1830", ResourceId::parse("r").unwrap());
        assert!(claim.pins());
        assert_eq!(claim.basket_line().qty.get(), 4);
        for (party, at, error) in [
            (Some(0), Some(at()), ChoiceError::Party),
            (Some(101), Some(at()), ChoiceError::Party),
            (Some(4), None, ChoiceError::PartyAndTime),
            (None, Some(at()), ChoiceError::PartyAndTime),
        ] {
            let fields = ChoiceFields {
                party,
                at,
                ..ChoiceFields::default()
            };
            assert_eq!(Choice::from_fields(fields), Err(error), "{party:?} {at:?}");
        }
        let both = ChoiceFields {
            qty: Some(2),
            party: Some(2),
            at: Some(at()),
            ..ChoiceFields::default()
        };
        assert_eq!(Choice::from_fields(both), Err(ChoiceError::Both));
    }
}
