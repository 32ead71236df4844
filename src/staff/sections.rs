//! The order of the shop's sections (its events, schedules and shelves on
//! the page), as the owner sets it: one moves up or down past its
//! neighbour. The whole order is renumbered in one transaction, the
//! collections locked, so two moves at once never leave two sections on
//! one place; the move is recorded in Activity.

use serde_json::json;
use sqlx::PgPool;

use super::StaffMember;
use crate::audit;

/// Which way a section moves on the page.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Move {
    Up,
    Down,
}

impl Move {
    pub fn parse(word: &str) -> Option<Self> {
        match word {
            "up" => Some(Move::Up),
            "down" => Some(Move::Down),
            _ => None,
        }
    }
}

/// Move a section one place up or down. False when there is no such
/// section in the shop; at the top (or bottom) already it stays, and
/// nothing is recorded.
pub async fn move_section(
    pool: &PgPool,
    staff: &StaffMember,
    id: &str,
    to: Move,
) -> super::Result<bool> {
    let mut tx = pool.begin().await?;
    let mut order: Vec<String> = sqlx::query_scalar(
        "select id from collections where archived_at is null \
          order by position, id for update",
    )
    .fetch_all(&mut *tx)
    .await?;
    let Some(at) = order.iter().position(|c| c == id) else {
        return Ok(false);
    };
    let other = match to {
        Move::Up if at > 0 => at - 1,
        Move::Down if at + 1 < order.len() => at + 1,
        _ => return Ok(true),
    };
    order.swap(at, other);
    sqlx::query(
        "update collections c set position = o.place - 1, updated_at = now() \
           from unnest($1::text[]) with ordinality as o(id, place) where c.id = o.id",
    )
    .bind(&order)
    .execute(&mut *tx)
    .await?;
    let word = if to == Move::Up { "up" } else { "down" };
    audit::commit(
        tx,
        staff,
        "move_collection",
        id,
        word,
        json!({ "place": other + 1, "of": order.len() }),
    )
    .await?;
    Ok(true)
}
