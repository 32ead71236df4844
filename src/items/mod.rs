//! What an order gives a person: its items (docs/contract.md §15). A
//! ticket, a seat, a pickup, a table booking, a jar to collect: each is an
//! item of the order (`order_items`, migration 0200) with its own code
//! (shared only where its kind says items of one time and place may:
//! [`crate::catalogue::Sharing`]), its own state ([`ItemState`]) and its
//! own words. Redemption, the doors, the host stand, refunds, the order
//! page, the mail and its calendar file, exports, webhooks and the API all
//! read items, so one order may mix every kind and each item keeps its
//! own life: collecting Monday's bread leaves Tuesday's table admissible.
//!
//! Items are issued by the transaction that marks an order paid
//! ([`issue`]); their state moves one way (valid, then used, refunded or
//! cancelled), which the database holds (`hf_item_state_guard`).

pub mod issue;

use chrono::{DateTime, Utc};
use serde::Serialize;
use sqlx::PgPool;
use uuid::Uuid;

use crate::catalogue::{CodeWords, ProductKind, Sharing};
use crate::clock::ShopZone;

/// Where an item is in its life.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, sqlx::Type)]
#[serde(rename_all = "snake_case")]
#[sqlx(type_name = "text", rename_all = "snake_case")]
pub enum ItemState {
    /// Its code admits: not used, refunded or cancelled.
    Valid,
    /// Redeemed at its door, counter or host stand.
    Used,
    /// Refunded by the shop (or with its whole order).
    Refunded,
    /// Cancelled by its guest (a booking, before its cut-off).
    Cancelled,
}

impl ItemState {
    /// As `order_items.state` stores it.
    pub fn as_str(self) -> &'static str {
        match self {
            ItemState::Valid => "valid",
            ItemState::Used => "used",
            ItemState::Refunded => "refunded",
            ItemState::Cancelled => "cancelled",
        }
    }

    /// Its code still admits.
    pub fn is_live(self) -> bool {
        self == ItemState::Valid
    }

    /// Gone for good: nothing more happens to it.
    pub fn is_void(self) -> bool {
        matches!(self, ItemState::Refunded | ItemState::Cancelled)
    }
}

/// One item, as every page reads it.
#[derive(Debug, Clone, PartialEq, Eq, sqlx::FromRow)]
pub struct Item {
    pub id: i64,
    pub code: String,
    pub order_id: Uuid,
    pub product_id: String,
    pub kind: ProductKind,
    pub state: ItemState,
    /// When it became used, refunded or cancelled.
    pub state_at: Option<DateTime<Utc>>,
    /// Its line's name ("Winter Gala — Stalls" for a seat, its seats left
    /// out).
    pub line_name: String,
    /// The seat it is ("C-12").
    pub seat: Option<String>,
    /// Its line's units, and how many of them were refunded.
    pub line_qty: i32,
    pub line_refunded: i32,
    /// Its event's, schedule's, shelf's or room's title and venue.
    pub collection_title: String,
    pub venue: String,
    /// When it happens (a booking's own stay, else its product's or its
    /// event's), and when its doors open.
    pub starts_at: Option<DateTime<Utc>>,
    pub ends_at: Option<DateTime<Utc>>,
    pub doors_at: Option<DateTime<Utc>>,
    /// The booking it is (its hold), for a table.
    pub booking: Option<Uuid>,
}

impl Item {
    /// The words its kind says around its code.
    pub fn words(&self) -> Option<&'static CodeWords> {
        self.kind.code_words()
    }

    /// The units it stands for: one for a unit's own code; for a line's,
    /// what is left of it (all of it once it is refunded or cancelled, to
    /// say what it was).
    pub fn units(&self) -> i32 {
        match self.words().map(|words| words.sharing) {
            Some(Sharing::EachUnit) => 1,
            _ if self.state.is_void() || self.line_refunded >= self.line_qty => self.line_qty,
            _ => self.line_qty - self.line_refunded,
        }
    }

    /// What it is, as its kind names one: "Winter Gala — Stalls, seat
    /// C-12", "Sourdough box, pickup Mon 7 Dec 12:30 CET × 2", "A table at
    /// the Harbour Bistro, Wed 9 Dec 19:30 CET, party of 4".
    pub fn what(&self) -> String {
        self.kind
            .item_name(&self.line_name, self.seat.as_deref(), self.units())
    }

    /// When and where, where its name does not say it: "Sunday 20
    /// December, 19:30 CET · Doors 19:00 CET · The Pier".
    pub fn occasion(&self, zone: ShopZone) -> String {
        let when = self
            .starts_at
            .filter(|_| self.kind.shows_time())
            .map(|at| zone.long(at));
        let doors = self
            .doors_at
            .filter(|_| self.kind.shows_time())
            .map(|at| format!("Doors {}", zone.time(at)));
        let venue = Some(self.venue.trim().to_owned()).filter(|v| !v.is_empty());
        [when, doors, venue]
            .into_iter()
            .flatten()
            .collect::<Vec<_>>()
            .join(" · ")
    }

    /// Its state in words, beside it; empty while it admits: "Collected
    /// Mon 7 Dec 12:34 CET", "Refunded", "Cancelled".
    pub fn state_words(&self, zone: ShopZone) -> String {
        let at = self
            .state_at
            .map(|at| format!(" {}", zone.short(at)))
            .unwrap_or_default();
        match self.state {
            ItemState::Valid => String::new(),
            ItemState::Used => {
                let word = self
                    .words()
                    .map_or("used".to_owned(), |w| w.redeemed_title());
                format!("{word}{at}")
            }
            ItemState::Refunded => "Refunded".to_owned(),
            ItemState::Cancelled => "Cancelled".to_owned(),
        }
    }
}

/// The items of these orders, each order's in the order a person reads
/// them: soonest first, then by what they are and their seats.
pub async fn of_orders(pool: &PgPool, orders: &[Uuid]) -> sqlx::Result<Vec<Item>> {
    sqlx::query_as(
        "select i.id, i.code, i.order_id, i.product_id, p.kind, i.state, i.state_at, \
                case when s.label is null then coalesce(l.name, p.name) \
                     else regexp_replace(coalesce(l.name, p.name), ' — [^—]*$', '') end \
                  as line_name, \
                s.label as seat, coalesce(l.qty, 1) as line_qty, \
                coalesce(l.refunded_qty, 0) as line_refunded, c.title as collection_title, \
                c.venue, coalesce(b.starts_at, p.starts_at, c.starts_at) as starts_at, \
                coalesce(b.ends_at, p.ends_at, c.ends_at) as ends_at, c.doors_at, i.booking \
           from order_items i \
           join products p on p.id = i.product_id \
           join collections c on c.id = p.collection \
           left join order_lines l on l.order_id = i.order_id and l.product_id = i.product_id \
           left join seats s on s.id = i.seat_id \
           left join bookings b on b.hold_id = i.booking \
          where i.order_id = any ($1) \
          order by i.order_id, coalesce(b.starts_at, p.starts_at, c.starts_at) nulls last, \
                   p.kind, i.product_id, s.row_rank, s.run, s.pos, i.code",
    )
    .bind(orders)
    .fetch_all(pool)
    .await
}

/// The items of one order.
pub async fn of_order(pool: &PgPool, order: Uuid) -> sqlx::Result<Vec<Item>> {
    of_orders(pool, &[order]).await
}

/// One code, with the items it stands for: what a shopper shows.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Card {
    pub code: String,
    pub words: &'static CodeWords,
    pub items: Vec<Item>,
}

impl Card {
    /// The card's state: it admits while one of its items does; else used
    /// if one was; else cancelled or refunded.
    pub fn state(&self) -> ItemState {
        let any = |state| self.items.iter().any(|item| item.state == state);
        [ItemState::Valid, ItemState::Used, ItemState::Cancelled]
            .into_iter()
            .find(|state| any(*state))
            .unwrap_or(ItemState::Refunded)
    }

    /// Its code still admits someone.
    pub fn is_live(&self) -> bool {
        self.state().is_live()
    }

    /// Every item's name, joined: "Sourdough box … × 2, Croissants … × 4".
    pub fn what(&self) -> String {
        self.items
            .iter()
            .map(Item::what)
            .collect::<Vec<_>>()
            .join(", ")
    }

    /// The kind's hint as an aside in running text: "say it at the
    /// counter".
    pub fn aside(&self) -> String {
        let hint = self.words.hint.trim_end_matches('.');
        let mut chars = hint.chars();
        match chars.next() {
            Some(first) => first.to_lowercase().chain(chars).collect(),
            None => String::new(),
        }
    }
}

/// An order's cards under one heading ("Your tickets", "Your table").
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Section {
    pub heading: &'static str,
    /// One code per unit: a list of small cards rather than one large one.
    pub per_unit: bool,
    pub cards: Vec<Card>,
}

/// Items grouped as a shopper is shown them: a card per code, a section
/// per heading, in the order the items came.
pub fn sections(items: &[Item]) -> Vec<Section> {
    let mut sections: Vec<Section> = Vec::new();
    for item in items {
        let Some(words) = item.words() else {
            continue;
        };
        let section = match sections.iter_mut().position(|s| s.heading == words.heading) {
            Some(at) => &mut sections[at],
            None => {
                sections.push(Section {
                    heading: words.heading,
                    per_unit: words.sharing == Sharing::EachUnit,
                    cards: Vec::new(),
                });
                sections.last_mut().expect("just pushed")
            }
        };
        match section.cards.iter_mut().find(|card| card.code == item.code) {
            Some(card) => card.items.push(item.clone()),
            None => section.cards.push(Card {
                code: item.code.clone(),
                words,
                items: vec![item.clone()],
            }),
        }
    }
    sections
}

#[cfg(test)]
impl Item {
    /// A valid item of `kind` under `code`, of a line of one unit with no
    /// event, venue or times: what a test changes the rest of.
    pub(crate) fn example(code: &str, kind: ProductKind) -> Self {
        Item {
            id: 1,
            code: code.into(),
            order_id: Uuid::nil(),
            product_id: "p1".into(),
            kind,
            state: ItemState::Valid,
            state_at: None,
            line_name: "Line 1".into(),
            seat: None,
            line_qty: 1,
            line_refunded: 0,
            collection_title: String::new(),
            venue: String::new(),
            starts_at: None,
            ends_at: None,
            doors_at: None,
            booking: None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn item(id: i64, code: &str, kind: ProductKind, state: ItemState) -> Item {
        Item {
            id,
            product_id: format!("p{id}"),
            state,
            line_name: format!("Line {id}"),
            line_qty: 2,
            ..Item::example(code, kind)
        }
    }

    #[test]
    fn a_code_shared_by_two_lines_is_one_card_and_each_kind_its_own_section() {
        let items = [
            item(1, "K7P2QX", ProductKind::PickupSlot, ItemState::Used),
            item(2, "K7P2QX", ProductKind::PickupSlot, ItemState::Valid),
            item(3, "ABCDEF", ProductKind::Table, ItemState::Cancelled),
            item(4, "TKT-AAAA-BBBB", ProductKind::Ticket, ItemState::Valid),
            item(5, "TKT-CCCC-DDDD", ProductKind::Ticket, ItemState::Refunded),
        ];
        let sections = sections(&items);
        assert_eq!(sections.len(), 3);
        assert_eq!(sections[0].cards.len(), 1);
        assert_eq!(sections[0].cards[0].items.len(), 2);
        // one of its items still admits: the code does
        assert_eq!(sections[0].cards[0].state(), ItemState::Valid);
        assert_eq!(sections[1].cards[0].state(), ItemState::Cancelled);
        assert!(!sections[1].cards[0].is_live());
        assert!(sections[2].per_unit && !sections[0].per_unit);
        assert_eq!(sections[2].cards.len(), 2);
        assert_eq!(sections[2].cards[1].state(), ItemState::Refunded);
    }

    #[test]
    fn a_lines_item_stands_for_what_is_left_of_it_and_a_units_for_one() {
        let mut jar = item(1, "K7P2QX", ProductKind::Stock, ItemState::Valid);
        jar.line_qty = 3;
        jar.line_refunded = 1;
        assert_eq!(jar.units(), 2);
        assert_eq!(jar.what(), "Line 1 × 2");
        jar.line_refunded = 3;
        jar.state = ItemState::Refunded;
        assert_eq!(jar.units(), 3);
        let ticket = item(2, "TKT-AAAA-BBBB", ProductKind::Ticket, ItemState::Valid);
        assert_eq!(ticket.units(), 1);
        assert_eq!(ticket.what(), "Line 2");
    }
}
