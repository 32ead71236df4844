//! A table: a party's place in a dining room at a time. Each bookable
//! time is a product (its room publishes them, as a schedule publishes
//! slots), whose resource is the quarter hour's pacing counter: a party
//! of 4 claims 4 covers of it, and a table (or a joined set) is pinned
//! for its stay beside the hold (docs/design.md, "Tables: a party at a
//! time"). Each booking has a code of its own, given at the host stand
//! once.

use crate::catalogue::kinds::{
    CheckedBy, ChoiceKind, CodeShape, CodeWords, CollectionKind, ItemWords, Sharing, Sheet, Timing,
};

pub(in crate::catalogue::kinds) const SHEET: Sheet = Sheet {
    name: "table",
    noun: "bookable time",
    collection: CollectionKind::DiningRoom,
    code: Some(CodeWords {
        sharing: Sharing::EachLine,
        shape: CodeShape::Said,
        checked_by: CheckedBy::HostStand,
        label: "Booking code",
        hint: "Give it at the host stand when you arrive.",
        heading: "Your table",
        redeemed: "seated",
        noun: "booking",
    }),
    timing: Timing {
        // the time's name says when
        shows_time: false,
        calendar: true,
        // a booking's stay is its party's turn (the booking's end); a
        // time without one is a two-hour dinner
        default_minutes: Some(120),
    },
    scheduled_name: Some("{name}, {when}"),
    choice: ChoiceKind::Party,
    // the time's name says which room
    named_with_collection: false,
    item: ItemWords::Party,
    asks_phone: true,
    written_as_tier: false,
    chosen_at: None,
};
