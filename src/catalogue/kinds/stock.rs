//! A stock item: goods on a shelf, so many units and then none. An
//! order's jars share a collection code, shown at the counter any day; no
//! time of its own, no calendar.

use super::{
    CheckedBy, ChoiceKind, CodeShape, CodeWords, CollectionKind, ItemWords, Sharing, Sheet, Timing,
};

pub(super) const SHEET: Sheet = Sheet {
    name: "stock",
    noun: "stock item",
    collection: CollectionKind::Shelf,
    code: Some(CodeWords {
        sharing: Sharing::OneTimeAndPlace,
        shape: CodeShape::Said,
        checked_by: CheckedBy::Counter,
        label: "Collection code",
        hint: "Show it at the counter to collect.",
        heading: "To collect",
        redeemed: "collected",
        noun: "collection",
    }),
    timing: Timing {
        shows_time: true,
        calendar: false,
        default_minutes: None,
    },
    scheduled_name: None,
    choice: ChoiceKind::Quantity,
    named_with_collection: false,
    item: ItemWords::Line,
    asks_phone: false,
    written_as_tier: false,
    chosen_at: None,
};
