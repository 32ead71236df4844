//! The codes a paid order carries, each with the words its kind says
//! around it ([`crate::catalogue::CodeWords`]): what the order page and the
//! confirmation mail show, read once here so that neither template names a
//! kind. One code for the order (a pickup code) comes first; then the
//! codes of single units (tickets), grouped under their kind's heading.

use sqlx::PgPool;
use uuid::Uuid;

use crate::catalogue::{CodeWords, ProductKind};

/// When and where each line of an order happens, by product id: "Sunday
/// 20 December, 19:30 CET · Doors 19:00 CET · The Pier" for a tier (its
/// kind shows its time), the doors and venue its event gives; lines whose
/// kind shows no time (a slot's name says it, a jar has none) are left
/// out. The order page and the mail show it under the line's name.
pub async fn line_occasions(
    pool: &PgPool,
    order_id: Uuid,
    zone: crate::clock::ShopZone,
) -> sqlx::Result<std::collections::HashMap<String, String>> {
    #[derive(sqlx::FromRow)]
    struct Row {
        product_id: String,
        kind: ProductKind,
        starts_at: Option<chrono::DateTime<chrono::Utc>>,
        doors_at: Option<chrono::DateTime<chrono::Utc>>,
        venue: String,
        /// A table's booking: its party and when it ends.
        party: Option<i32>,
        ends_at: Option<chrono::DateTime<chrono::Utc>>,
    }
    let rows: Vec<Row> = sqlx::query_as(
        "select l.product_id, p.kind, coalesce(p.starts_at, c.starts_at) as starts_at, \
                c.doors_at, c.venue, b.party, b.ends_at \
           from order_lines l join products p on p.id = l.product_id \
           join collections c on c.id = p.collection \
           left join bookings b on b.order_id = l.order_id and b.product_id = l.product_id \
          where l.order_id = $1",
    )
    .bind(order_id)
    .fetch_all(pool)
    .await?;
    Ok(rows
        .into_iter()
        .filter_map(|row| {
            // a booking says it in its own words: "Table for 4, Fri 18 Dec
            // 19:30, 2 h"
            if let (Some(party), Some(starts), Some(ends)) = (row.party, row.starts_at, row.ends_at)
            {
                return Some((row.product_id, booking_words(party, starts, ends, zone)));
            }
            if !row.kind.shows_time() {
                return None;
            }
            let when = row.starts_at.map(|at| zone.long(at));
            let doors = row.doors_at.map(|at| format!("Doors {}", zone.time(at)));
            let venue = Some(row.venue.trim().to_owned()).filter(|v| !v.is_empty());
            let words: Vec<String> = [when, doors, venue].into_iter().flatten().collect();
            (!words.is_empty()).then(|| (row.product_id, words.join(" · ")))
        })
        .collect())
}

/// When each dated line of an order happens, short ("Mon 20 Dec 19:30
/// CET"), by product id: for the provider's line, which has only a name.
/// A kind whose name says when (a slot) has none.
pub async fn line_days(
    pool: &PgPool,
    order_id: Uuid,
    zone: crate::clock::ShopZone,
) -> sqlx::Result<std::collections::HashMap<String, String>> {
    #[derive(sqlx::FromRow)]
    struct Row {
        product_id: String,
        kind: ProductKind,
        starts_at: Option<chrono::DateTime<chrono::Utc>>,
    }
    let rows: Vec<Row> = sqlx::query_as(
        "select l.product_id, p.kind, coalesce(p.starts_at, c.starts_at) as starts_at \
           from order_lines l join products p on p.id = l.product_id \
           join collections c on c.id = p.collection \
          where l.order_id = $1",
    )
    .bind(order_id)
    .fetch_all(pool)
    .await?;
    Ok(rows
        .into_iter()
        .filter(|row| row.kind.shows_time())
        .filter_map(|row| Some((row.product_id, zone.short(row.starts_at?))))
        .collect())
}

/// "Table for 4, Fri 18 Dec 19:30, 2 h" (or "2 h 30"), in the shop's zone.
fn booking_words(
    party: i32,
    starts: chrono::DateTime<chrono::Utc>,
    ends: chrono::DateTime<chrono::Utc>,
    zone: crate::clock::ShopZone,
) -> String {
    let minutes = (ends - starts).num_minutes();
    let stay = match (minutes / 60, minutes % 60) {
        (0, m) => format!("{m} min"),
        (h, 0) => format!("{h} h"),
        (h, m) => format!("{h} h {m}"),
    };
    format!(
        "Table for {party}, {}, {stay}",
        zone.local(starts).format("%a %-d %b %H:%M")
    )
}

/// One code as a shopper is shown it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CodeCard {
    pub code: String,
    /// For a unit's code, the line it admits to ("Harbour Lights — VIP");
    /// for the order's code, what the code is called ("Pickup code").
    pub label: String,
    /// The product a unit's code admits to (none for the order's code).
    pub product_id: Option<String>,
    pub words: &'static CodeWords,
    /// Its unit was refunded: it admits nobody.
    pub refunded: bool,
}

impl CodeCard {
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

/// The codes of units of one kind, under its heading ("Your tickets").
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CodeGroup {
    pub heading: &'static str,
    pub cards: Vec<CodeCard>,
}

/// Every code an order carries.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct IssuedCodes {
    /// The one code of the whole order, if its kinds give one.
    pub order: Option<CodeCard>,
    /// The codes of single units, a group per kind.
    pub units: Vec<CodeGroup>,
}

impl IssuedCodes {
    /// Every card, the order's first.
    pub fn cards(&self) -> impl Iterator<Item = &CodeCard> {
        self.order
            .iter()
            .chain(self.units.iter().flat_map(|group| group.cards.iter()))
    }

    /// The same, without the codes of refunded units.
    pub fn valid(&self) -> Self {
        Self {
            order: self.order.clone(),
            units: self
                .units
                .iter()
                .map(|group| CodeGroup {
                    heading: group.heading,
                    cards: group
                        .cards
                        .iter()
                        .filter(|card| !card.refunded)
                        .cloned()
                        .collect(),
                })
                .filter(|group| !group.cards.is_empty())
                .collect(),
        }
    }
}

/// The codes of the order `order_id`, whose order code (if any) is
/// `order_code`.
pub async fn issued_codes(
    pool: &PgPool,
    order_id: Uuid,
    order_code: Option<&str>,
) -> sqlx::Result<IssuedCodes> {
    #[derive(sqlx::FromRow)]
    struct Row {
        kind: ProductKind,
        product_id: String,
        label: String,
        code: String,
        refunded: bool,
    }
    // the units' codes, named as their order line was (a seat's code with
    // its own seat: "… — Stalls, seat C-12"); and the kind of the lines
    // the order's code covers
    let units: Vec<Row> = sqlx::query_as(
        "select p.kind, c.product_id, \
                case when st.label is null then coalesce(l.name, p.name) \
                     else regexp_replace(coalesce(l.name, p.name), ' — [^—]*$', '') \
                          || ', seat ' || st.label end as label, \
                c.code, c.refunded_at is not null as refunded \
           from order_codes c join products p on p.id = c.product_id \
           left join order_lines l on l.order_id = c.order_id and l.product_id = c.product_id \
           left join seats st on st.id = c.seat_id \
          where c.order_id = $1 \
          order by p.kind, c.product_id, st.row_rank, st.run, st.pos, c.code",
    )
    .bind(order_id)
    .fetch_all(pool)
    .await?;
    let order_kind: Option<ProductKind> = match order_code {
        None => None,
        Some(_) => {
            sqlx::query_scalar(
                "select min(p.kind) from order_lines l join products p on p.id = l.product_id \
                  join product_kinds k on k.kind = p.kind \
                  where l.order_id = $1 and k.code = $2",
            )
            .bind(order_id)
            .bind(crate::catalogue::Code::PerOrder.as_str())
            .fetch_one(pool)
            .await?
        }
    };
    let order = order_code
        .zip(order_kind.and_then(ProductKind::code_words))
        .map(|(code, words)| CodeCard {
            code: code.to_owned(),
            label: words.label.to_owned(),
            product_id: None,
            words,
            refunded: false,
        });
    let mut groups: Vec<CodeGroup> = Vec::new();
    for row in units {
        let Some(words) = row.kind.code_words() else {
            continue;
        };
        let card = CodeCard {
            code: row.code,
            label: row.label,
            product_id: Some(row.product_id),
            words,
            refunded: row.refunded,
        };
        match groups.iter_mut().find(|g| g.heading == words.heading) {
            Some(group) => group.cards.push(card),
            None => groups.push(CodeGroup {
                heading: words.heading,
                cards: vec![card],
            }),
        }
    }
    Ok(IssuedCodes {
        order,
        units: groups,
    })
}
