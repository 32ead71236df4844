//! What a collection is: the group a product is sold under, and how staff
//! make and edit it. An event holds its tiers, a schedule the units it
//! publishes (of any kind a schedule can make), a shelf its stock items, a
//! dining room its bookable times.
//! The admin's pages ask the sheet here for their links and words, so
//! no template branches on a kind.

use serde::{Deserialize, Serialize};

use super::ProductKind;

/// What a collection groups; stored in `collections.kind`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, sqlx::Type)]
#[serde(rename_all = "snake_case")]
#[sqlx(type_name = "text", rename_all = "snake_case")]
pub enum CollectionKind {
    /// An event and its tiers.
    Event,
    /// A schedule and the units it publishes.
    Schedule,
    /// Stock on a shelf.
    Shelf,
    /// A restaurant's room: its tables, service periods and the times it
    /// publishes.
    DiningRoom,
}

/// How the shop's pages show a collection.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OnShop {
    /// Its products, each with what is left and its add form.
    Products,
    /// One link to a page of its own, `{collection}` filled in, with its
    /// words (a dining room's times are chosen by party and day there).
    Page(&'static str, &'static str),
}

/// How the admin's catalogue lists a collection's products.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Listing {
    /// A row per product, each with its counters and its editor.
    Table,
    /// One line summing the units a schedule made (they are edited through
    /// the schedule, not one by one).
    Summary,
}

/// Where the catalogue file writes a collection of a kind
/// ([`crate::catalogue::CatalogueFile::export`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum InFile {
    /// Under `events`, with its tiers.
    Events,
    /// Under `collections`, its products under `products` (or, when a
    /// schedule makes them, under `schedules`).
    Products,
    /// Under `dining_rooms`, whole (its times are published from it).
    DiningRooms,
}

/// Everything a collection kind answers.
#[derive(Debug)]
pub struct CollectionSheet {
    /// As `collections.kind` stores it.
    pub name: &'static str,
    /// What staff call one.
    pub noun: &'static str,
    /// Its admin page, `{collection}` filled in; `None`: none of its own.
    pub editor: Option<&'static str>,
    /// A product's admin page, `{collection}` and `{product}` filled in.
    pub product_editor: Option<&'static str>,
    /// Where and in what words a product is added to it from its card.
    pub add_product: Option<(&'static str, &'static str)>,
    /// Where and in what words staff make a new one (or a product of one);
    /// `None`: not from the admin yet (a dining room comes from the
    /// catalogue file until its admin pages are built).
    pub create: Option<(&'static str, &'static str)>,
    pub listing: Listing,
    /// Its products are published by a schedule of its own (without one,
    /// the catalogue file made them and nothing edits them here); a
    /// dining room publishes its own times.
    pub published_by_schedule: bool,
    pub in_file: InFile,
    /// How the shop's pages show it.
    pub on_shop: OnShop,
    /// Its products happen when it does (an event's tiers take its start
    /// and end).
    pub lends_its_time: bool,
    /// The shop offers its products a day at a time (a schedule's units):
    /// the home page lists its days with what is left, its own page one
    /// day's times; otherwise every product is a card.
    pub by_day: bool,
    /// A product added to it alone starts as a draft, put on sale when
    /// staff publish it (a stock item); otherwise it goes on sale with its
    /// collection.
    pub products_start_as_drafts: bool,
}

const EVENT: CollectionSheet = CollectionSheet {
    name: "event",
    noun: "event",
    editor: Some("/admin/catalogue/events/{collection}"),
    product_editor: Some("/admin/catalogue/events/{collection}/tiers/{product}"),
    add_product: Some((
        "/admin/catalogue/events/{collection}/tiers/new",
        "Add a tier",
    )),
    create: Some(("/admin/catalogue/events/new", "New event")),
    listing: Listing::Table,
    published_by_schedule: false,
    in_file: InFile::Events,
    on_shop: OnShop::Products,
    lends_its_time: true,
    by_day: false,
    products_start_as_drafts: false,
};

const SCHEDULE: CollectionSheet = CollectionSheet {
    name: "schedule",
    noun: "schedule",
    editor: Some("/admin/catalogue/schedules/{collection}"),
    product_editor: None,
    add_product: None,
    create: Some(("/admin/catalogue/schedules/new", "New schedule")),
    listing: Listing::Summary,
    published_by_schedule: true,
    in_file: InFile::Products,
    on_shop: OnShop::Products,
    lends_its_time: false,
    by_day: true,
    products_start_as_drafts: false,
};

const SHELF: CollectionSheet = CollectionSheet {
    name: "shelf",
    noun: "shelf",
    editor: None,
    product_editor: Some("/admin/catalogue/stock/{product}"),
    add_product: None,
    create: Some(("/admin/catalogue/stock/new", "New stock item")),
    listing: Listing::Table,
    published_by_schedule: false,
    in_file: InFile::Products,
    on_shop: OnShop::Products,
    lends_its_time: false,
    by_day: false,
    products_start_as_drafts: true,
};

const DINING_ROOM: CollectionSheet = CollectionSheet {
    name: "dining_room",
    noun: "dining room",
    // the host stand's day; its set-up is linked from there
    editor: Some("/admin/dining/{collection}"),
    product_editor: None,
    add_product: None,
    create: Some(("/admin/dining/new", "New dining room")),
    listing: Listing::Summary,
    published_by_schedule: false,
    in_file: InFile::DiningRooms,
    on_shop: OnShop::Page("/dining/{collection}", "Book a table"),
    lends_its_time: false,
    by_day: false,
    products_start_as_drafts: false,
};

impl CollectionKind {
    /// Every kind, as `collection_kinds` is written from.
    pub const ALL: [CollectionKind; 4] = [
        CollectionKind::Event,
        CollectionKind::Schedule,
        CollectionKind::Shelf,
        CollectionKind::DiningRoom,
    ];

    /// The kind's answers: the one place a collection kind is matched.
    pub fn sheet(self) -> &'static CollectionSheet {
        match self {
            CollectionKind::Event => &EVENT,
            CollectionKind::Schedule => &SCHEDULE,
            CollectionKind::Shelf => &SHELF,
            CollectionKind::DiningRoom => &DINING_ROOM,
        }
    }

    /// As `collections.kind` stores it.
    pub fn as_str(self) -> &'static str {
        self.sheet().name
    }

    /// The kind a stored value or a catalogue file names.
    pub fn parse(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|kind| kind.as_str() == name)
    }

    /// The product kinds a collection of this kind may hold.
    pub fn holds(self) -> impl Iterator<Item = ProductKind> {
        ProductKind::ALL
            .into_iter()
            .filter(move |kind| kind.collection() == self)
    }

    /// Whether it may hold products of `kind`.
    pub fn may_hold(self, kind: ProductKind) -> bool {
        kind.collection() == self
    }

    /// It holds tiers of an event (the event editor's collections).
    pub fn holds_tiers(self) -> bool {
        self.holds().any(ProductKind::written_as_tier)
    }

    /// A schedule makes its products (the schedule editor's collections).
    pub fn made_by_schedules(self) -> bool {
        self.holds().any(ProductKind::scheduled)
    }

    /// A product added to it alone starts as a draft.
    pub fn products_start_as_drafts(self) -> bool {
        self.sheet().products_start_as_drafts
    }

    /// Whether the shop offers its products a day at a time.
    pub fn by_day(self) -> bool {
        self.sheet().by_day
    }

    /// The admin page of the collection `id`, if its kind has one.
    pub fn editor(self, id: &str) -> Option<String> {
        self.sheet().editor.map(|path| fill(path, id, ""))
    }

    /// The admin page of its product `product`, if products of its kind
    /// have one (a schedule's units are edited through the schedule).
    pub fn product_editor(self, id: &str, product: &str) -> Option<String> {
        self.sheet()
            .product_editor
            .map(|path| fill(path, id, product))
    }

    /// The shop's page of the collection `id` and its words, when the
    /// shop shows it as a link rather than its products.
    pub fn shop_page(self, id: &str) -> Option<(String, &'static str)> {
        match self.sheet().on_shop {
            OnShop::Products => None,
            OnShop::Page(path, words) => Some((fill(path, id, ""), words)),
        }
    }

    /// Where a product is added to the collection `id`, and in what words.
    pub fn add_product(self, id: &str) -> Option<(String, &'static str)> {
        self.sheet()
            .add_product
            .map(|(path, words)| (fill(path, id, ""), words))
    }
}

/// What a path segment keeps as it is: letters, digits and `-_.~` (as
/// the templates' `urlencode_strict`).
const SEGMENT: &percent_encoding::AsciiSet = &percent_encoding::NON_ALPHANUMERIC
    .remove(b'-')
    .remove(b'_')
    .remove(b'.')
    .remove(b'~');

/// A path with its collection and product filled in, each encoded as one
/// path segment.
fn fill(path: &str, collection: &str, product: &str) -> String {
    let segment = |s: &str| percent_encoding::utf8_percent_encode(s, SEGMENT).to_string();
    path.replace("{collection}", &segment(collection))
        .replace("{product}", &segment(product))
}

impl std::fmt::Display for CollectionKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_collection_kind_reads_back_and_holds_some_kind() {
        for kind in CollectionKind::ALL {
            assert_eq!(CollectionKind::parse(kind.as_str()), Some(kind));
            assert_eq!(
                serde_json::to_value(kind).unwrap(),
                serde_json::json!(kind.as_str())
            );
            assert!(kind.holds().next().is_some(), "{kind} holds nothing");
        }
        for kind in ProductKind::ALL {
            assert!(kind.collection().may_hold(kind));
        }
    }

    #[test]
    fn links_are_filled_with_encoded_segments() {
        assert_eq!(
            CollectionKind::Event
                .product_editor("harbour lights", "vip/1")
                .unwrap(),
            "/admin/catalogue/events/harbour%20lights/tiers/vip%2F1"
        );
        assert_eq!(CollectionKind::Shelf.editor("pantry"), None);
        assert_eq!(CollectionKind::Schedule.product_editor("bakery", "x"), None);
    }
}
