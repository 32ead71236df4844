//! Reserved seating's side of the code (docs/design.md, "Reserved
//! seating"): a seated event's plan from the catalogue file ([`plan`]) or
//! typed by staff in the admin ([`typed`]), what the admin's seat plan
//! pages read and change ([`admin`]), and what the application asks of a
//! plan. The
//! database decides every seat (migrations/0180_seating.sql); this module
//! names the calls other rooms make of it, so none of them writes a seat's
//! SQL of its own.

pub mod admin;
mod plan;
mod typed;

use sqlx::{Postgres, Transaction};
use uuid::Uuid;

pub use plan::{CategorySpec, RowSpec, SeatingSpec, SectionSpec, read};
pub use typed::{MAX_TYPED_SEATS, PlacedSeat, compact, typed_rows};

/// A staff refund's stopped tickets give their seats back (or, not
/// restocked, take them off sale with their units), in the refund's
/// transaction and before its units move: a section's live pins are its
/// held and sold units (`hf_seat_return`).
pub async fn give_back(
    tx: &mut Transaction<'_, Postgres>,
    purchase: Uuid,
    codes: &[&str],
    restock: bool,
) -> sqlx::Result<()> {
    sqlx::query("select hf_seat_return($1, $2, $3)")
        .bind(purchase)
        .bind(codes)
        .bind(restock)
        .execute(&mut **tx)
        .await?;
    Ok(())
}
