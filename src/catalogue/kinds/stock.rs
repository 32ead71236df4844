//! A stock item: goods on a shelf, so many units and then none. No code,
//! no time of its own, no calendar.

use super::{ChoiceKind, CollectionKind, Sheet, Timing};

pub(super) const SHEET: Sheet = Sheet {
    name: "stock",
    noun: "stock item",
    collection: CollectionKind::Shelf,
    code: None,
    timing: Timing {
        shows_time: true,
        calendar: false,
        default_minutes: None,
    },
    scheduled_name: None,
    choice: ChoiceKind::Quantity,
    named_with_collection: false,
};
