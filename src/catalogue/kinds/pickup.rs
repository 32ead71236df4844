//! A pickup slot: a time to collect an order at the counter. A schedule
//! makes the slots (one product and resource each); an order's boxes at
//! one slot share a pickup code, said at that day's counter once.

use super::{
    CheckedBy, ChoiceKind, CodeShape, CodeWords, CollectionKind, ItemWords, Sharing, Sheet, Timing,
};

pub(super) const SHEET: Sheet = Sheet {
    name: "pickup_slot",
    noun: "pickup slot",
    collection: CollectionKind::Schedule,
    code: Some(CodeWords {
        sharing: Sharing::OneTimeAndPlace,
        shape: CodeShape::Said,
        checked_by: CheckedBy::Day,
        label: "Pickup code",
        hint: "Say it at the counter.",
        heading: "Your pickup",
        redeemed: "collected",
        noun: "pickup",
    }),
    timing: Timing {
        // the slot's name says when
        shows_time: false,
        calendar: true,
        // a slot published before slots carried their end
        default_minutes: Some(30),
    },
    scheduled_name: Some("{name}, pickup {when}"),
    choice: ChoiceKind::Quantity,
    named_with_collection: false,
    item: ItemWords::Line,
    asks_phone: false,
    written_as_tier: false,
    chosen_at: None,
};
