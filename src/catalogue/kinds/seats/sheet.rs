//! A seat at a seated event, sold by section (docs/design.md, "Reserved
//! seating"): each section is a product of this kind with a resource of
//! its own, whose units are its seats on sale. A line chooses the best
//! seats or names them ([`super::choice`]); each unit gets a ticket
//! code that admits one person once and carries its seat, and the mail
//! carries a calendar file as a ticket's does.

use crate::catalogue::kinds::{
    CheckedBy, ChoiceKind, CodeShape, CodeWords, CollectionKind, ItemWords, Sharing, Sheet, Timing,
};

pub(in crate::catalogue::kinds) const SHEET: Sheet = Sheet {
    name: "seat",
    noun: "section",
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
        default_minutes: None,
    },
    scheduled_name: None,
    choice: ChoiceKind::Seats,
    named_with_collection: true,
    item: ItemWords::Seat,
    asks_phone: false,
    written_as_tier: false,
    chosen_at: Some("/seats/{product}"),
};
