//! What a product is, and everything that differs between kinds
//! (docs/contract.md §15). This folder is the room: each kind's answers are
//! one [`Sheet`] in a file of its own ([`pickup`], [`ticket`], [`stock`],
//! and, each in its folder with the rest of what is only theirs, tables
//! ([`tables`]) and seats ([`seats`])),
//! and [`ProductKind::sheet`] is the one `match` that maps a stored kind to
//! its sheet. A new kind is a variant below, a file with its sheet, and an
//! arm in that match: the compiler names every answer it still owes
//! (a sheet is a struct literal: no answer can be left out), and nothing
//! outside the room compares kinds.
//!
//! What a kind answers: the collection it is sold under ([`CollectionKind`],
//! [`collections`]); the code each item of a paid order carries for it,
//! which items share one, what checks it, and the words around it
//! ([`CodeWords`]); its time, and whether and for how long
//! a calendar file goes out ([`Timing`]); whether a schedule makes its
//! units and how such a unit is named; what a shopper chooses for one line
//! of it and the capacity that line claims ([`line`]).
//!
//! The database asks the same questions of `product_kinds` (the code's
//! noun, what checks it) and `collection_kinds`, whose rows migrations
//! write (migration 0200); `products.kind` and `collections.kind` refer to
//! them, and `tests/api/kinds_in_the_database.rs` holds the rows equal to
//! the sheets, so a new kind is also a row in a new migration.

mod collections;
pub mod line;
mod pickup;
pub mod seats;
mod stock;
pub mod tables;
mod ticket;

use chrono::{DateTime, Duration, Utc};
use serde::{Deserialize, Serialize};

use crate::clock::ShopZone;

pub use collections::{CollectionKind, CollectionSheet, InFile, Listing, OnShop};
pub use line::{Choice, ChoiceError, ChoiceFields, ChoiceKind, FillCounts};

/// What a product is; stored in `products.kind`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, sqlx::Type)]
#[serde(rename_all = "snake_case")]
#[sqlx(type_name = "text", rename_all = "snake_case")]
pub enum ProductKind {
    /// A time to collect an order: the order's boxes at one slot share a
    /// pickup code.
    PickupSlot,
    /// A place at an event: one code per unit, each redeemed once.
    Ticket,
    /// Goods on a shelf.
    Stock,
    /// A party's table in a dining room at a time: each booking has its
    /// own code, given at the host stand once.
    Table,
    /// A seat at a seated event, sold by section: one code per seat.
    Seat,
}

/// Everything one kind answers. Each kind's file holds one, as a constant.
#[derive(Debug)]
pub struct Sheet {
    /// As `products.kind` stores it and the catalogue file names it.
    pub name: &'static str,
    /// What staff call one ("pickup slot", "tier").
    pub noun: &'static str,
    /// The collection its products are sold under.
    pub collection: CollectionKind,
    /// The code each item of it carries, if any, and its words.
    pub code: Option<CodeWords>,
    /// Its time on pages and in mail, and its calendar file.
    pub timing: Timing,
    /// How a unit made for a time (by a schedule, or a dining room's
    /// times) is named, `{name}`, `{when}` ("Sun 28 Mar 03:30 CEST") and
    /// `{day}` ("Sun 28 Mar") filled in ("{name}, pickup {when}"); `None`:
    /// nothing makes its units by time.
    pub scheduled_name: Option<&'static str>,
    /// What a shopper chooses for one line of it.
    pub choice: ChoiceKind,
    /// Its name alone does not say what it is for ("General", "VIP"): a
    /// line of it is named with its collection's title first ("Winter
    /// Jazz — General") in the basket, at the provider, on the order page,
    /// in the mail and its calendar file.
    pub named_with_collection: bool,
    /// How one item of it is named.
    pub item: ItemWords,
    /// An order of it keeps the shopper's phone (a restaurant calls a
    /// party that is late).
    pub asks_phone: bool,
    /// The catalogue file writes a product of it as a tier of its event
    /// (a seated section is written with its event's seating instead).
    pub written_as_tier: bool,
    /// Where a shopper chooses a line of it when a number is not enough,
    /// `{product}` filled in (a seated section's map); `None`: the add
    /// form says it all.
    pub chosen_at: Option<&'static str>,
}

/// How one item of a kind is named, from its line's name.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ItemWords {
    /// The line's name, with its units when more than one ("Sourdough
    /// box, pickup Mon 7 Dec 12:30 CET × 2").
    Line,
    /// The section's name and the seat ("Winter Gala — Stalls, seat C-12").
    Seat,
    /// The time's name and the party ("A table at the Harbour Bistro, Wed
    /// 9 Dec 19:30 CET, party of 4").
    Party,
}

/// Which of an order's items of a kind share one code.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Sharing {
    /// Every unit is an item with a code of its own, admitting one person
    /// once (a ticket, a seat).
    EachUnit,
    /// Every line is one item with a code of its own (a table booking: its
    /// party arrives together).
    EachLine,
    /// Every line is an item, and the lines of one order at one time and
    /// place share a code, handed over at once (a pickup's boxes at one
    /// slot, an order's jars).
    OneTimeAndPlace,
}

/// What a code looks like.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CodeShape {
    /// Six letters and digits none of which reads as another, said at a
    /// counter or a host stand ("K7P2QX").
    Said,
    /// "TKT-ABCD-EFGH", scanned or read at a door.
    Scanned,
}

/// What checks a kind's codes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum CheckedBy {
    /// A door set to one event (or some of its tiers).
    Event,
    /// A counter set to one day's pickups.
    Day,
    /// The dining room's host stand.
    HostStand,
    /// Any counter, any day (goods kept for the shopper).
    Counter,
}

impl CheckedBy {
    /// As `product_kinds.checked_by` stores it.
    pub fn as_str(self) -> &'static str {
        match self {
            CheckedBy::Event => "event",
            CheckedBy::Day => "day",
            CheckedBy::HostStand => "host_stand",
            CheckedBy::Counter => "counter",
        }
    }
}

/// A kind's code, and the words the order page, the mail, the calendar
/// file and the door say around it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CodeWords {
    /// Which items share a code.
    pub sharing: Sharing,
    /// What the code looks like.
    pub shape: CodeShape,
    /// What checks it.
    pub checked_by: CheckedBy,
    /// What the code is called where it is shown ("Pickup code").
    pub label: &'static str,
    /// What the shopper does with it ("Say it at the counter.").
    pub hint: &'static str,
    /// A heading over the codes of several units ("Your tickets").
    pub heading: &'static str,
    /// What the door says when it is used ("collected", "admitted").
    pub redeemed: &'static str,
    /// The code's name in the API's answers, the webhooks and the page's
    /// markup ("pickup": `pickup-code`), as `product_kinds.code` stores it.
    pub noun: &'static str,
}

impl CodeWords {
    /// The door's word as a note begins: "Collected".
    pub fn redeemed_title(&self) -> String {
        let mut chars = self.redeemed.chars();
        match chars.next() {
            Some(first) => first.to_uppercase().chain(chars).collect(),
            None => String::new(),
        }
    }
}

/// When a kind's unit happens, as the pages and the mail show it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Timing {
    /// Pages and mail show its time beside its name. A slot's name already
    /// says when ("pickup 12:30"); an event's does not.
    pub shows_time: bool,
    /// The confirmation mail carries a calendar file for it (the shopper
    /// must be somewhere at its time).
    pub calendar: bool,
    /// How long it lasts when its product gives no end.
    pub default_minutes: Option<i64>,
}

/// One entry of a calendar file: from when to when (an end unknown and no
/// default: the moment only), what it is, and its code.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CalendarEntry {
    pub starts: DateTime<Utc>,
    pub ends: Option<DateTime<Utc>>,
    pub summary: String,
    /// "Pickup code K7P2QX", "Ticket TKT-ABCD-EFGH, TKT-…": empty without
    /// one.
    pub code: String,
    /// Where it happens (an event's venue); empty: not said.
    pub location: String,
}

impl ProductKind {
    /// Every kind, as `product_kinds` is written from.
    pub const ALL: [ProductKind; 5] = [
        ProductKind::PickupSlot,
        ProductKind::Ticket,
        ProductKind::Stock,
        ProductKind::Table,
        ProductKind::Seat,
    ];

    /// The kind's answers: the one place a kind is matched.
    pub fn sheet(self) -> &'static Sheet {
        match self {
            ProductKind::PickupSlot => &pickup::SHEET,
            ProductKind::Ticket => &ticket::SHEET,
            ProductKind::Stock => &stock::SHEET,
            ProductKind::Table => &tables::sheet::SHEET,
            ProductKind::Seat => &seats::sheet::SHEET,
        }
    }

    /// As `products.kind` stores it.
    pub fn as_str(self) -> &'static str {
        self.sheet().name
    }

    /// The kind a stored value or a catalogue file names.
    pub fn parse(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|kind| kind.as_str() == name)
    }

    /// The code and its words, if it has one.
    pub fn code_words(self) -> Option<&'static CodeWords> {
        self.sheet().code.as_ref()
    }

    /// The collection its products are sold under.
    pub fn collection(self) -> CollectionKind {
        self.sheet().collection
    }

    /// Whether pages and mail show its time beside its name.
    pub fn shows_time(self) -> bool {
        self.sheet().timing.shows_time
    }

    /// Whether the confirmation mail carries a calendar file for it.
    pub fn has_calendar(self) -> bool {
        self.sheet().timing.calendar
    }

    /// Whether a schedule can make its units: a kind named by time and
    /// sold under a schedule (a dining room publishes its own times).
    pub fn scheduled(self) -> bool {
        self.sheet().scheduled_name.is_some() && self.collection() == CollectionKind::Schedule
    }

    /// The kinds a schedule can make.
    pub fn made_by_schedules() -> impl Iterator<Item = ProductKind> {
        Self::ALL.into_iter().filter(|kind| kind.scheduled())
    }

    /// A unit made for `at`, named: "Sourdough box, pickup Tue 22 Dec 12:30
    /// CET". A kind whose units are not made by time keeps the name as it
    /// is.
    pub fn unit_name(self, name: &str, at: DateTime<Utc>, zone: ShopZone) -> String {
        match self.sheet().scheduled_name {
            Some(pattern) => pattern
                .replace("{name}", name)
                .replace("{when}", &zone.short(at))
                .replace("{day}", &zone.local(at).format("%a %-d %b").to_string()),
            None => name.to_owned(),
        }
    }

    /// The calendar entry of a line of this kind, with its codes: `None`
    /// when the kind sends no calendar file or the product has no time.
    pub fn calendar_entry(
        self,
        name: &str,
        starts: Option<DateTime<Utc>>,
        ends: Option<DateTime<Utc>>,
        codes: &[&str],
    ) -> Option<CalendarEntry> {
        let timing = self.sheet().timing;
        let starts = starts.filter(|_| timing.calendar)?;
        let ends = ends.filter(|ends| *ends > starts).or_else(|| {
            timing
                .default_minutes
                .map(|m| starts + Duration::minutes(m))
        });
        let code = match self.code_words() {
            Some(words) if !codes.is_empty() => format!("{} {}", words.label, codes.join(", ")),
            _ => String::new(),
        };
        Some(CalendarEntry {
            starts,
            ends,
            summary: name.to_owned(),
            code,
            location: String::new(),
        })
    }

    /// One item of it, named from its line's name (its seats left out),
    /// its seat and the units it stands for.
    pub fn item_name(self, line_name: &str, seat: Option<&str>, units: i32) -> String {
        match (self.sheet().item, seat) {
            (ItemWords::Seat, Some(seat)) => format!("{line_name}, seat {seat}"),
            (ItemWords::Party, _) => format!("{line_name}, party of {units}"),
            _ if units > 1 => format!("{line_name} × {units}"),
            _ => line_name.to_owned(),
        }
    }

    /// An order of it keeps the shopper's phone.
    pub fn asks_phone(self) -> bool {
        self.sheet().asks_phone
    }

    /// The catalogue file writes it as a tier of its event.
    pub fn written_as_tier(self) -> bool {
        self.sheet().written_as_tier
    }

    /// The page where a shopper chooses a line of product `id`; `None`:
    /// its add form is enough.
    pub fn chosen_at(self, id: &str) -> Option<String> {
        self.sheet()
            .chosen_at
            .map(|path| path.replace("{product}", id))
    }

    /// What a schedule makes when its file or form names no kind.
    pub fn made_by_default() -> ProductKind {
        ProductKind::PickupSlot
    }

    /// It is what a schedule makes by default (the file leaves it out).
    pub fn is_made_by_default(&self) -> bool {
        *self == Self::made_by_default()
    }

    /// How a line's count is said: "Party of 4" for a party, else the
    /// number.
    pub fn count_words(self, qty: i32) -> String {
        self.choice().count_words(qty)
    }

    /// A line of it is a party at a time (said "Party of 4", booked
    /// rather than counted).
    pub fn is_party(self) -> bool {
        self.choice() == ChoiceKind::Party
    }

    /// What a shopper chooses for one line of it.
    pub fn choice(self) -> ChoiceKind {
        self.sheet().choice
    }

    /// A line of it as the basket, the provider, the order page and the
    /// mail name it: "Winter Jazz — General" for a tier (its name kept as
    /// it is when it says its event already), the name alone otherwise.
    pub fn line_name(self, name: &str, collection_title: &str) -> String {
        let title = collection_title.trim();
        // "Harbour Lights — VIP" under "Harbour Lights — live at the pier"
        // says its event already
        // (and a collection made from a file without words, titled by its
        // id, "harbour-lights", is not said twice either)
        let plain = |text: &str| text.to_lowercase().replace('-', " ");
        let head = plain(title.split(" — ").next().unwrap_or(title).trim());
        if !self.sheet().named_with_collection
            || head.trim().is_empty()
            || plain(name).contains(&head)
        {
            return name.to_owned();
        }
        format!("{title} — {name}")
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
    fn a_tier_is_named_with_its_event_once() {
        let tier = ProductKind::Ticket;
        assert_eq!(
            tier.line_name("General", "Winter Jazz"),
            "Winter Jazz — General"
        );
        assert_eq!(
            tier.line_name("Harbour Lights — VIP", "Harbour Lights — live at the pier"),
            "Harbour Lights — VIP"
        );
        assert_eq!(tier.line_name("General", " "), "General");
        assert_eq!(
            tier.line_name("Harbour Lights — VIP", "harbour-lights"),
            "Harbour Lights — VIP"
        );
        assert_eq!(
            ProductKind::Stock.line_name("Wild heather honey", "Pantry"),
            "Wild heather honey"
        );
    }

    #[test]
    fn every_kind_reads_back_from_its_name_and_serialises_the_same() {
        for kind in ProductKind::ALL {
            assert_eq!(ProductKind::parse(kind.as_str()), Some(kind));
            assert_eq!(
                serde_json::to_value(kind).unwrap(),
                serde_json::json!(kind.as_str())
            );
            // a sheet is its kind's: the names agree
            assert_eq!(
                kind.sheet().name,
                serde_json::to_value(kind).unwrap().as_str().unwrap()
            );
        }
        assert_eq!(ProductKind::parse("Ticket"), None);
    }

    #[test]
    fn codes_have_words_and_a_noun_the_database_takes() {
        for kind in ProductKind::ALL {
            if let Some(words) = kind.code_words() {
                assert!(words.hint.ends_with('.'), "{kind}: a sentence");
                assert!(!words.label.is_empty() && !words.redeemed.is_empty());
                // product_kinds.code: ^[a-z]{1,20}$
                assert!(
                    (1..=20).contains(&words.noun.len())
                        && words.noun.bytes().all(|b| b.is_ascii_lowercase()),
                    "{kind}"
                );
            }
        }
    }

    #[test]
    fn a_calendar_entry_runs_from_its_start_to_its_end_or_the_default() {
        let at = DateTime::parse_from_rfc3339("2026-12-20T19:30:00+01:00")
            .unwrap()
            .with_timezone(&Utc);
        let later = at + Duration::hours(3);
        let ticket = ProductKind::Ticket
            .calendar_entry("Winter Jazz", Some(at), Some(later), &[])
            .expect("a ticket gets a calendar file");
        assert_eq!((ticket.starts, ticket.ends), (at, Some(later)));
        let slot = ProductKind::PickupSlot
            .calendar_entry("Box, pickup 12:30", Some(at), None, &["K7P2QX"])
            .expect("a slot gets one");
        assert_eq!(slot.ends, Some(at + Duration::minutes(30)));
        assert_eq!(slot.code, "Pickup code K7P2QX");
        assert_eq!(
            ProductKind::Stock.calendar_entry("Honey", Some(at), None, &[]),
            None
        );
        assert_eq!(
            ProductKind::Ticket.calendar_entry("No time", None, None, &[]),
            None
        );
    }

    #[test]
    fn only_scheduled_kinds_name_their_units_by_time() {
        let at = DateTime::parse_from_rfc3339("2026-12-22T12:30:00+01:00")
            .unwrap()
            .with_timezone(&Utc);
        let berlin = ShopZone::parse("Europe/Berlin").unwrap();
        assert_eq!(
            ProductKind::PickupSlot.unit_name("Sourdough box", at, berlin),
            "Sourdough box, pickup Tue 22 Dec 12:30 CET"
        );
        assert_eq!(ProductKind::Stock.unit_name("Honey", at, berlin), "Honey");
        assert!(ProductKind::made_by_schedules().all(|k| k.has_calendar()));
    }
}
