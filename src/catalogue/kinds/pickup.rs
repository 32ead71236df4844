//! A pickup slot: a time to collect an order at the counter. A schedule
//! makes the slots (one product and resource each); one pickup code covers
//! every slot of an order and is said at the counter once.

use super::{ChoiceKind, Code, CodeWords, CollectionKind, Sheet, Timing};

pub(super) const SHEET: Sheet = Sheet {
    name: "pickup_slot",
    noun: "pickup slot",
    collection: CollectionKind::Schedule,
    code: Some(CodeWords {
        code: Code::PerOrder,
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
};
