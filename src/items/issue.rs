//! Issuing an order's items, in the transaction that marks it paid: every
//! line whose kind carries a code becomes items, as its kind's sheet says
//! ([`Sharing`]): an item per unit with a code each (tickets, seats), an
//! item per line with a code of its own (a booking), or an item per line
//! whose code the order's other lines of the same time and place share (a
//! pickup's boxes at one slot, the jars). Codes are drawn from the
//! operating system's randomness in the kind's shape ([`CodeShape`]); a
//! code another order holds is refused by the database
//! (`item_code_one_order`) and drawn again.

use std::collections::HashSet;

use chrono::{DateTime, Utc};
use rand::Rng;
use sqlx::{Postgres, Transaction};
use uuid::Uuid;

use crate::catalogue::{CodeShape, ProductKind, Sharing};

/// Letters and digits that cannot be mistaken for each other when read out
/// at a counter (no 0/O, 1/I/L).
const READABLE: &[u8] = b"ABCDEFGHJKMNPQRSTUVWXYZ23456789";

/// Draws before a code that keeps meeting other orders' is an error.
const MAX_DRAWS: usize = 8;

fn readable(len: usize) -> String {
    let mut rng = rand::thread_rng();
    (0..len)
        .map(|_| READABLE[rng.gen_range(0..READABLE.len())] as char)
        .collect()
}

/// A code in its kind's shape: said at a counter or a host stand
/// ("K7P2QX"), or scanned at a door ("TKT-ABCD-EFGH").
pub fn item_code(shape: CodeShape) -> String {
    match shape {
        CodeShape::Said => readable(6),
        CodeShape::Scanned => format!("TKT-{}-{}", readable(4), readable(4)),
    }
}

/// A line still to be issued, as the plan reads it.
#[derive(sqlx::FromRow)]
struct Line {
    order_id: Uuid,
    product_id: String,
    kind: ProductKind,
    qty: i32,
    collection: String,
    starts_at: Option<DateTime<Utc>>,
    booking: Option<Uuid>,
}

/// The items that share one code: one unit, one line, or the lines of one
/// time and place.
struct Group {
    shape: CodeShape,
    /// (order, product, booking) per item.
    items: Vec<(Uuid, String, Option<Uuid>)>,
}

/// Issue the items of `orders`, paid in this transaction. Lines issued
/// before are left as they are, so running it twice issues nothing twice.
pub async fn issue(tx: &mut Transaction<'_, Postgres>, orders: &[Uuid]) -> sqlx::Result<()> {
    let lines: Vec<Line> = sqlx::query_as(
        "select l.order_id, l.product_id, p.kind, l.qty, p.collection, \
                coalesce(b.starts_at, p.starts_at, c.starts_at) as starts_at, \
                b.hold_id as booking \
           from order_lines l \
           join products p on p.id = l.product_id \
           join collections c on c.id = p.collection \
           left join bookings b on b.order_id = l.order_id and b.product_id = l.product_id \
          where l.order_id = any ($1) \
            and not exists (select 1 from order_items i \
                             where i.order_id = l.order_id and i.product_id = l.product_id) \
          order by l.order_id, l.product_id",
    )
    .bind(orders)
    .fetch_all(&mut **tx)
    .await?;
    let mut groups = plan(&lines);
    let mut drawn = HashSet::new();
    for _ in 0..MAX_DRAWS {
        if groups.is_empty() {
            return Ok(());
        }
        groups = insert(tx, groups, &mut drawn).await?;
    }
    Err(sqlx::Error::Protocol(format!(
        "{} item codes met other orders' {MAX_DRAWS} times",
        groups.len()
    )))
}

/// What items share a code by: their order, their code's noun, their
/// place (collection) and their time.
type Occasion<'a> = (Uuid, &'a str, &'a str, Option<DateTime<Utc>>);

/// The groups of items, each to get one code.
fn plan(lines: &[Line]) -> Vec<Group> {
    // an occasion's group, for shared codes
    let mut shared: Vec<(Occasion<'_>, usize)> = Vec::new();
    let mut groups: Vec<Group> = Vec::new();
    for line in lines {
        let Some(words) = line.kind.code_words() else {
            continue;
        };
        let item = (line.order_id, line.product_id.clone(), line.booking);
        match words.sharing {
            Sharing::EachUnit => groups.extend((0..line.qty).map(|_| Group {
                shape: words.shape,
                items: vec![item.clone()],
            })),
            Sharing::EachLine => groups.push(Group {
                shape: words.shape,
                items: vec![item],
            }),
            Sharing::OneTimeAndPlace => {
                let key = (
                    line.order_id,
                    words.noun,
                    line.collection.as_str(),
                    line.starts_at,
                );
                match shared.iter().find(|(k, _)| *k == key) {
                    Some((_, at)) => groups[*at].items.push(item),
                    None => {
                        shared.push((key, groups.len()));
                        groups.push(Group {
                            shape: words.shape,
                            items: vec![item],
                        });
                    }
                }
            }
        }
    }
    groups
}

/// Insert every group's items under a code drawn for it; the groups whose
/// code another order holds come back, to be drawn again.
async fn insert(
    tx: &mut Transaction<'_, Postgres>,
    groups: Vec<Group>,
    drawn: &mut HashSet<String>,
) -> sqlx::Result<Vec<Group>> {
    let mut codes: Vec<String> = Vec::new();
    let (mut orders, mut products, mut bookings) = (Vec::new(), Vec::new(), Vec::new());
    let mut group_codes = Vec::with_capacity(groups.len());
    for group in &groups {
        // no two groups of a batch draw one code: the statement cannot see
        // the rows it gives its other groups
        let code = loop {
            let code = item_code(group.shape);
            if drawn.insert(code.clone()) {
                break code;
            }
        };
        for (order, product, booking) in &group.items {
            codes.push(code.clone());
            orders.push(*order);
            products.push(product.as_str());
            bookings.push(*booking);
        }
        group_codes.push(code);
    }
    // a code another order holds meets item_code_one_order: that row is
    // left out, and its group drawn again
    let issued: Vec<String> = sqlx::query_scalar(
        "insert into order_items (code, order_id, product_id, booking) \
         select * from unnest($1::text[], $2::uuid[], $3::text[], $4::uuid[]) \
         on conflict do nothing \
         returning code",
    )
    .bind(&codes)
    .bind(&orders)
    .bind(&products)
    .bind(&bookings)
    .fetch_all(&mut **tx)
    .await?;
    let issued: HashSet<String> = issued.into_iter().collect();
    Ok(groups
        .into_iter()
        .zip(group_codes)
        .filter(|(_, code)| !issued.contains(code))
        .map(|(group, _)| group)
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn line(order: u128, product: &str, kind: ProductKind, qty: i32, at: Option<i64>) -> Line {
        Line {
            order_id: Uuid::from_u128(order),
            product_id: product.into(),
            kind,
            qty,
            collection: "c".into(),
            starts_at: at.and_then(|s| DateTime::from_timestamp(s, 0)),
            booking: None,
        }
    }

    #[test]
    fn codes_are_shared_only_where_the_kind_says_one_time_and_place_may() {
        let lines = [
            // two pickup lines at one slot: one code
            line(1, "bread-mon", ProductKind::PickupSlot, 2, Some(100)),
            line(1, "rolls-mon", ProductKind::PickupSlot, 1, Some(100)),
            // the next day's: its own
            line(1, "bread-tue", ProductKind::PickupSlot, 1, Some(86_500)),
            // a booking: its own
            line(1, "table-tue", ProductKind::Table, 4, Some(86_500)),
            // three tickets: three codes
            line(1, "gala-general", ProductKind::Ticket, 3, Some(100)),
            // another order's bread at the same slot: not shared across orders
            line(2, "bread-mon", ProductKind::PickupSlot, 1, Some(100)),
        ];
        let groups = plan(&lines);
        let sizes: Vec<usize> = groups.iter().map(|g| g.items.len()).collect();
        assert_eq!(sizes, [2, 1, 1, 1, 1, 1, 1]);
        assert_eq!(groups[0].items[1].1, "rolls-mon");
        assert_eq!(groups[2].shape, CodeShape::Said);
        assert_eq!(groups[3].shape, CodeShape::Scanned);
    }

    #[test]
    fn codes_have_their_shape_and_differ() {
        let said = item_code(CodeShape::Said);
        assert_eq!(said.len(), 6);
        assert!(said.bytes().all(|b| READABLE.contains(&b)));
        let scanned = item_code(CodeShape::Scanned);
        assert!(
            scanned.starts_with("TKT-") && scanned.len() == 13,
            "{scanned}"
        );
        assert_ne!(item_code(CodeShape::Scanned), scanned);
    }
}
