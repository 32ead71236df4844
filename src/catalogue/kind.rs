//! What a product is, and everything that follows from it. Every question
//! the rest of Holdfast asks about a kind is a method here, answered by an
//! exhaustive `match`: a new kind is a compile error at each question until
//! it has an answer, never a silent fall into another kind's branch.
//!
//! The database asks the same questions of `product_kinds`, a table that
//! `holdfast migrate` writes from [`ProductKind::ALL`] (see
//! [`crate::database::migrate`]); `products.kind` refers to it.

use serde::{Deserialize, Serialize};

/// What a product is; stored in `products.kind`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, sqlx::Type)]
#[serde(rename_all = "snake_case")]
#[sqlx(type_name = "text", rename_all = "snake_case")]
pub enum ProductKind {
    /// A time to collect an order: one pickup code covers the order's slots.
    PickupSlot,
    /// A seat or entry: one code per unit, each redeemed once.
    Ticket,
    /// Goods on a shelf.
    Stock,
}

/// The code a paid order carries for its units of a kind.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Code {
    /// One code for the whole order, handed over once at the counter (a
    /// pickup code, `orders.pickup_code`).
    PerOrder,
    /// One code per unit, each admitting one person once (a ticket,
    /// `order_codes`).
    PerUnit,
}

impl Code {
    /// As `product_kinds.code` and `redemptions.kind` store it.
    pub fn as_str(self) -> &'static str {
        match self {
            Code::PerOrder => "pickup",
            Code::PerUnit => "ticket",
        }
    }

    /// What the door says when the code is used.
    pub fn redeemed_word(self) -> &'static str {
        match self {
            Code::PerOrder => "collected",
            Code::PerUnit => "admitted",
        }
    }
}

impl ProductKind {
    /// Every kind, as `product_kinds` is written from.
    pub const ALL: [ProductKind; 3] = [
        ProductKind::PickupSlot,
        ProductKind::Ticket,
        ProductKind::Stock,
    ];

    /// As `products.kind` stores it.
    pub fn as_str(self) -> &'static str {
        match self {
            ProductKind::PickupSlot => "pickup_slot",
            ProductKind::Ticket => "ticket",
            ProductKind::Stock => "stock",
        }
    }

    /// The kind a stored value or a catalogue file names.
    pub fn parse(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|kind| kind.as_str() == name)
    }

    /// The code an order's units of this kind get, if any.
    pub fn code(self) -> Option<Code> {
        match self {
            ProductKind::PickupSlot => Some(Code::PerOrder),
            ProductKind::Ticket => Some(Code::PerUnit),
            ProductKind::Stock => None,
        }
    }

    /// Whether the confirmation mail carries a calendar file for it (the
    /// shopper must be somewhere at its time).
    pub fn has_calendar(self) -> bool {
        match self {
            ProductKind::PickupSlot => true,
            ProductKind::Ticket | ProductKind::Stock => false,
        }
    }

    /// Whether pages and mail show its time beside its name. A slot's name
    /// already says when ("pickup 12:30"); an event's does not.
    pub fn shows_time(self) -> bool {
        match self {
            ProductKind::PickupSlot => false,
            ProductKind::Ticket | ProductKind::Stock => true,
        }
    }
}

impl std::fmt::Display for ProductKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_kind_reads_back_from_its_name_and_serialises_the_same() {
        for kind in ProductKind::ALL {
            assert_eq!(ProductKind::parse(kind.as_str()), Some(kind));
            assert_eq!(
                serde_json::to_value(kind).unwrap(),
                serde_json::json!(kind.as_str())
            );
        }
        assert_eq!(ProductKind::parse("Ticket"), None);
    }
}
