//! The sold-out crowd answered from the shop's memory, without a database
//! round trip and without writing anything: a form whose lines memory
//! shows cannot be had (a sale not open, fewer units left than wanted, no
//! free table that seats a party at its time) is refused here, but only
//! when memory may be believed; otherwise the database answers.

use super::{BeginRequest, Begun, Desk};
use chrono::{DateTime, Utc};

use crate::catalogue::Sale;
use crate::checkout::basket::BasketLine;
use crate::checkout::{OffSaleLine, ShortLine, Supply, Wanted, codes, short_lines};
use crate::live::{LiveStock, Snapshot};

/// How near a sale's opening or closing memory leaves the answer to the
/// database (its estimate of the database's clock is off by a read's round
/// trip at most).
const NEAR_THE_MOMENT: chrono::Duration = chrono::Duration::milliseconds(250);

/// A checkout memory can refuse, without a database round trip: a line
/// wants more than memory shows of its product, nothing held is due to come
/// back, and the form was made (or the database last refused this very
/// form) after this process last saw that product change. The last
/// condition keeps a double submit honest: if this form's first submit
/// took the last unit, the product changed after the form was made, so the
/// second submit goes to the database and on to the order the first one
/// started; a form the database refused started no order, so its replays
/// cost that one read until the product changes. `None`: ask the database.
pub(super) fn refused_from_memory(desk: Desk<'_>, request: &BeginRequest) -> Option<Begun> {
    // a bank debit is judged against the order's start first
    if request.pay_method.is_some_and(|m| m.settles_later()) {
        return None;
    }
    let snapshot = desk.live.now()?;
    let key = request.checkout_key.as_str();
    let minted = codes::key_minted_at(key).max(desk.live.refused_form_at(key))?;
    let lines = request.form_lines.as_ref()?.lines();
    let refused = judged(&snapshot, lines, minted)?;
    desk.live.refused();
    Some(refused)
}

/// An API checkout's lines (product, units) memory can refuse, without a
/// database round trip, as [`refused_from_memory`] refuses a form's: the
/// caller has made sure its `Idempotency-Key` was not claimed before the
/// last full read began (`ShopSettings::claimed`), and memory believes
/// only levels it has seen unchanged since then. So a request that
/// started an order under the key, whose hold changed a level, is the
/// database's to answer again; one memory refuses is kept nowhere (as
/// Stripe keeps nothing for a request that did not start executing).
pub fn api_lines_refused(
    live: &LiveStock,
    snapshot: &Snapshot,
    lines: &[(String, i32)],
) -> Option<Begun> {
    let refused = judged(snapshot, lines, snapshot.full_read_began())?;
    live.refused();
    Some(refused)
}

/// Lines refused by memory: a sale not open yet or closed before `minted`
/// (clearly, by the database's clock as memory knows it), or fewer left
/// than wanted of a product whose level memory saw settle before `minted`.
fn judged(snapshot: &Snapshot, lines: &[(String, i32)], minted: DateTime<Utc>) -> Option<Begun> {
    let now = chrono::Utc::now();
    let mut wanted = Vec::with_capacity(lines.len());
    let mut basket = Vec::with_capacity(lines.len());
    for (id, qty) in lines {
        let (product, _) = snapshot.product(id)?;
        wanted.push(Wanted {
            product_id: id,
            name: &product.name,
            qty: *qty,
            resource: &product.resource_id,
        });
        basket.push(BasketLine {
            product_id: id.clone(),
            name: product.name.clone(),
            qty: *qty,
            price_minor: product.price_minor,
            currency: product.currency.clone(),
            unlocked_by: None,
            starts_at: None,
            seats: None,
        });
    }
    // a sale not open by the database's clock, as memory knows it (its
    // last read's offset from this process's clock): refused here only
    // when it is clearly so; near the moment, the database decides
    let db_now = snapshot.database_now();
    let minted_by_db = minted + (db_now - now) - NEAR_THE_MOMENT;
    let off_sale: Vec<OffSaleLine> = lines
        .iter()
        .filter_map(|(id, _)| {
            let (product, _) = snapshot.product(id)?;
            let sale = match (
                product.sale(db_now - NEAR_THE_MOMENT),
                product.sale(db_now + NEAR_THE_MOMENT),
            ) {
                (Sale::Opens { at }, Sale::Opens { .. }) => Sale::Opens { at },
                // closed before the form was made (before memory's last
                // full read, for the API): a first submit that started an
                // order did so before, and goes to it through the database
                (Sale::Closed { at }, Sale::Closed { .. }) if at < minted_by_db => {
                    Sale::Closed { at }
                }
                _ => return None,
            };
            Some(OffSaleLine {
                product_id: id.clone(),
                name: product.name.clone(),
                sale,
            })
        })
        .collect();
    if !off_sale.is_empty() {
        return Some(Begun::NotOnSale {
            lines: off_sale,
            basket,
        });
    }
    let short = short_lines(&wanted, |resource| {
        snapshot.level(resource).map(|level| Supply {
            left: level.available,
            settled: !level.something_due(now) && level.changed_at < minted,
        })
    });
    if short.is_empty() {
        return no_table(snapshot, lines, basket, minted, now);
    }
    let sold_out: Vec<String> = short
        .iter()
        .filter(|line| line.available == 0)
        .map(|line| line.product_id.clone())
        .collect();
    Some(Begun::SoldOut {
        sold_out: snapshot.stock(&sold_out),
        lines: short,
        basket,
    })
}

/// A party's lines memory can refuse when their covers are there: its
/// room, as memory knows it (its tables and their stays, as fresh as its
/// counters), has no free table or joined set for the party's turn, and
/// every party line's time settled before `minted` (a first submit that
/// took the table changed its time, so a double submit goes on to the
/// database and its order). `None`: ask the database.
fn no_table(
    snapshot: &Snapshot,
    lines: &[(String, i32)],
    basket: Vec<BasketLine>,
    minted: DateTime<Utc>,
    now: DateTime<Utc>,
) -> Option<Begun> {
    let mut refused = Vec::new();
    for (id, party) in lines {
        let (product, level) = snapshot.product(id)?;
        if !product.kind.is_party() {
            continue;
        }
        if level.something_due(now) || level.changed_at >= minted {
            return None;
        }
        let time = snapshot.settings().dining_of(id)?;
        let hours = chrono::Duration::hours(6);
        let around = (time.starts_at - hours, time.starts_at + hours);
        let times = snapshot.bookable(&time.room, around, *party)?;
        // a hold past its end around the time is free to the database:
        // it may seat the party where memory would not
        let due = times.iter().any(|t| {
            snapshot
                .product(&t.product_id)
                .is_none_or(|(_, level)| level.something_due(now))
        });
        let asked = times.iter().find(|t| t.product_id == *id)?;
        if due || asked.covers_left < *party {
            return None;
        }
        if !asked.seats {
            refused.push(ShortLine {
                product_id: id.clone(),
                name: product.name.clone(),
                requested: *party,
                // as the database says a party no table seats
                available: 0,
            });
        }
    }
    (!refused.is_empty()).then_some(Begun::NoTable {
        lines: refused,
        basket,
    })
}
