//! What a shopper chooses for one line, and the capacity that line
//! claims (docs/design.md, "What a line claims").
//!
//! A kind says what a shopper may choose for one line of it
//! ([`ChoiceKind`]): today a number of units of every kind. A choice is
//! parsed once, at the edge (the basket form, the basket's rows, the JSON
//! API), into a [`Choice`], and the kind turns it into the [`Claim`] the
//! checkout's one transaction makes in the engine. A particular seat or a
//! party at a time are further variants of both, each claiming units of a
//! resource (what the shop and the crowd count) and pinning what the
//! database guards beside them.

use serde::Serialize;

use crate::inventory::{BasketLine, Quantity, ResourceId};

/// Most units one line may ask for, at any edge.
pub const MAX_LINE_UNITS: i64 = 100;

/// What a kind lets a shopper choose for one line.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ChoiceKind {
    /// A number of units, 1 to the product's most per order.
    Quantity,
}

/// What a shopper chose for one line.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(tag = "choice", rename_all = "snake_case")]
pub enum Choice {
    /// So many units of the product.
    Units { qty: Quantity },
}

/// Why a line's fields are not a choice the product's kind takes.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ChoiceError {
    #[error("a quantity is 1 to {MAX_LINE_UNITS}")]
    Quantity,
}

/// A line's fields, as the basket form, the basket's row and the JSON
/// API give them: today a number of units.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ChoiceFields {
    pub qty: Option<i64>,
}

impl Choice {
    /// The choice a line's fields make, at any edge; the product's kind
    /// then says whether it takes it ([`ChoiceKind::accepts`]).
    pub fn from_fields(fields: ChoiceFields) -> Result<Choice, ChoiceError> {
        ChoiceKind::Quantity.parse(fields.qty)
    }
}

impl ChoiceKind {
    /// A line's fields as a choice of this kind: `qty` for a number of
    /// units.
    pub fn parse(self, qty: Option<i64>) -> Result<Choice, ChoiceError> {
        match self {
            ChoiceKind::Quantity => {
                let qty = qty
                    .filter(|q| (1..=MAX_LINE_UNITS).contains(q))
                    .ok_or(ChoiceError::Quantity)?;
                let qty = Quantity::parse(qty).map_err(|_| ChoiceError::Quantity)?;
                Ok(Choice::Units { qty })
            }
        }
    }
}

impl ChoiceKind {
    /// Whether a choice is one a kind of this choice takes.
    pub fn accepts(self, choice: &Choice) -> bool {
        match (self, choice) {
            (ChoiceKind::Quantity, Choice::Units { .. }) => true,
        }
    }
}

impl Choice {
    /// Two lines of one product as one: their units added. `None` when
    /// they do not combine (more units than a quantity holds).
    pub fn merge(&self, other: &Choice) -> Option<Choice> {
        match (self, other) {
            (Choice::Units { qty: a }, Choice::Units { qty: b }) => {
                let sum = i64::from(a.get()) + i64::from(b.get());
                Quantity::parse(sum).ok().map(Choice::units)
            }
        }
    }

    /// So many units.
    pub fn units(qty: Quantity) -> Self {
        Choice::Units { qty }
    }

    /// How many units of its product the line takes: what the limits per
    /// order, per e-mail and per address count.
    pub fn qty(&self) -> Quantity {
        match self {
            Choice::Units { qty } => *qty,
        }
    }

    /// The capacity the line claims of its product's resource.
    pub fn claim(&self, resource: ResourceId) -> Claim {
        match self {
            Choice::Units { qty } => Claim::Units {
                resource,
                qty: *qty,
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
}

impl Claim {
    /// The resource whose counters the claim moves (what the shop, the
    /// crowd and the drift check count).
    pub fn resource(&self) -> &ResourceId {
        match self {
            Claim::Units { resource, .. } => resource,
        }
    }

    /// The claim as a line of the engine's basket hold.
    pub fn basket_line(&self) -> BasketLine {
        match self {
            Claim::Units { resource, qty } => BasketLine {
                resource: resource.clone(),
                qty: *qty,
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_quantity_is_one_to_a_hundred() {
        let kind = ChoiceKind::Quantity;
        assert_eq!(kind.parse(Some(2)).unwrap().qty().get(), 2);
        for bad in [None, Some(0), Some(-1), Some(101)] {
            assert_eq!(kind.parse(bad), Err(ChoiceError::Quantity), "{bad:?}");
        }
    }

    #[test]
    fn lines_of_one_product_add_up() {
        let two = ChoiceKind::Quantity.parse(Some(2)).unwrap();
        let three = ChoiceKind::Quantity.parse(Some(3)).unwrap();
        assert_eq!(two.merge(&three).unwrap().qty().get(), 5);
        assert!(ChoiceKind::Quantity.accepts(&two));
    }

    #[test]
    fn units_claim_their_resource() {
        let choice = ChoiceKind::Quantity.parse(Some(3)).unwrap();
        let claim = choice.claim(ResourceId::parse("harbour-lights-vip").unwrap());
        assert_eq!(claim.resource().as_str(), "harbour-lights-vip");
        assert_eq!(claim.basket_line().qty.get(), 3);
    }
}
