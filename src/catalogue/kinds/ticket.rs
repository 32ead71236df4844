//! A ticket: a place at an event, sold by tier. Each unit gets a code of
//! its own that admits one person once, and the mail carries a calendar
//! file from the event's start to its end.

use super::{
    CheckedBy, ChoiceKind, CodeShape, CodeWords, CollectionKind, ItemWords, Sharing, Sheet, Timing,
};

pub(super) const SHEET: Sheet = Sheet {
    name: "ticket",
    noun: "tier",
    collection: CollectionKind::Event,
    code: Some(CodeWords {
        sharing: Sharing::EachUnit,
        shape: CodeShape::Scanned,
        checked_by: CheckedBy::Event,
        label: "Ticket",
        hint: "Show it at the door.",
        heading: "Your tickets",
        redeemed: "admitted",
        noun: "ticket",
    }),
    timing: Timing {
        shows_time: true,
        calendar: true,
        // an event without an end is a moment in the calendar: nothing is
        // made up
        default_minutes: None,
    },
    scheduled_name: None,
    choice: ChoiceKind::Quantity,
    named_with_collection: true,
    item: ItemWords::Line,
    asks_phone: false,
    written_as_tier: true,
    chosen_at: None,
};
