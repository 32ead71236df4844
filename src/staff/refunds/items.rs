//! Which of an order's items a refund stops ([`crate::items`]). Staff may
//! name the items (these seats, that booking); otherwise a line's units
//! stop the items of its kind: a unit's own code per unit, unused ones
//! first; a line's code (a booking, a pickup's boxes) when the line goes
//! back whole. An item already used stops only with the override, and so
//! does a refund of units its line's used code handed over.

use sqlx::{Postgres, Transaction};
use uuid::Uuid;

use super::{Line, RefundOutcome};
use crate::catalogue::Sharing;
use crate::items::ItemState;

/// Most items one refund names.
pub const MAX_ITEMS: usize = 500;

/// An item of the order a refund may stop: not refunded or cancelled yet.
#[derive(Debug, Clone, sqlx::FromRow)]
pub(super) struct Standing {
    pub id: i64,
    pub code: String,
    pub product_id: String,
    pub state: ItemState,
    /// Its seat, for the record ("C-12").
    pub seat: Option<String>,
}

/// The order's items not refunded or cancelled yet, a line's unused ones
/// first.
pub(super) async fn standing(
    tx: &mut Transaction<'_, Postgres>,
    order_id: Uuid,
) -> sqlx::Result<Vec<Standing>> {
    sqlx::query_as(
        "select i.id, i.code, i.product_id, i.state, s.label as seat \
           from order_items i left join seats s on s.id = i.seat_id \
          where i.order_id = $1 and i.state in ('valid', 'used') \
          order by i.product_id, i.state = 'used', s.row_rank, s.run, s.pos, i.code",
    )
    .bind(order_id)
    .fetch_all(&mut **tx)
    .await
}

/// The units per product that the items staff named come to: a unit's
/// item is one unit of its line, a line's item what is left of the line.
/// An item that is not the order's, or is refunded or cancelled already,
/// is refused by its id.
pub(super) fn units_of_chosen(
    chosen: &[i64],
    items: &[Standing],
    lines: &[Line],
) -> Result<Vec<(String, i32)>, RefundOutcome> {
    let mut units: Vec<(String, i32)> = Vec::new();
    for id in chosen {
        let Some(item) = items.iter().find(|item| item.id == *id) else {
            return Err(RefundOutcome::NotInOrder {
                product_id: format!("item {id}"),
            });
        };
        let Some(line) = lines.iter().find(|l| l.product_id == item.product_id) else {
            return Err(RefundOutcome::NotInOrder {
                product_id: item.product_id.clone(),
            });
        };
        let n = match sharing(line) {
            Some(Sharing::EachUnit) => 1,
            _ => line.qty - line.refunded_qty,
        };
        match units.iter_mut().find(|(p, _)| *p == item.product_id) {
            // a line's item stands for the whole line once
            Some((_, sum)) if sharing(line) != Some(Sharing::EachUnit) => *sum = n,
            Some((_, sum)) => *sum += n,
            None => units.push((item.product_id.clone(), n)),
        }
    }
    Ok(units)
}

fn sharing(line: &Line) -> Option<Sharing> {
    line.kind.code_words().map(|words| words.sharing)
}

/// Per line refunded, the items that stop; and the codes among them (or
/// handing over the units refunded) that were used.
pub(super) fn to_stop<'a>(
    wanted: &[(&'a Line, i32)],
    items: &[Standing],
    chosen: &[i64],
) -> (Vec<(&'a str, Vec<Standing>)>, Vec<String>) {
    let mut stopped: Vec<(&str, Vec<Standing>)> = Vec::new();
    let mut redeemed: Vec<String> = Vec::new();
    for (line, n) in wanted {
        let of_line = items
            .iter()
            .filter(|item| item.product_id == line.product_id);
        let named = of_line.clone().any(|item| chosen.contains(&item.id));
        let stop: Vec<Standing> = match sharing(line) {
            Some(Sharing::EachUnit) if named => of_line
                .filter(|item| chosen.contains(&item.id))
                .cloned()
                .collect(),
            // unused first, as `standing` reads them
            Some(Sharing::EachUnit) => of_line.take(*n as usize).cloned().collect(),
            // a line's item: its units were handed over when it was used;
            // it stops when nothing of its line is left
            Some(_) => {
                let of_line: Vec<&Standing> = of_line.collect();
                redeemed.extend(
                    of_line
                        .iter()
                        .filter(|item| item.state == ItemState::Used)
                        .map(|item| item.code.clone()),
                );
                if line.refunded_qty + n >= line.qty {
                    of_line.into_iter().cloned().collect()
                } else {
                    Vec::new()
                }
            }
            None => Vec::new(),
        };
        redeemed.extend(
            stop.iter()
                .filter(|item| item.state == ItemState::Used)
                .map(|item| item.code.clone()),
        );
        stopped.push((line.product_id.as_str(), stop));
    }
    redeemed.sort();
    redeemed.dedup();
    (stopped, redeemed)
}

/// The stopped items leave: refunded, or cancelled when their guest
/// cancelled them.
pub(super) async fn mark(
    tx: &mut Transaction<'_, Postgres>,
    ids: &[i64],
    to: ItemState,
) -> sqlx::Result<()> {
    sqlx::query(
        "update order_items set state = $2, state_at = now() \
          where id = any ($1) and state in ('valid', 'used')",
    )
    .bind(ids)
    .bind(to)
    .execute(&mut **tx)
    .await?;
    Ok(())
}
