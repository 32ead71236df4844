//! Seats: everything of reserved seating that is the seat kind's alone
//! (docs/design.md, "Reserved seating"). The kind's sheet ([`sheet`]),
//! what a shopper asks of a section ([`choice`]), a seated event's plan
//! from the catalogue file ([`plan`]) or
//! typed by staff in the admin ([`typed`]), what the admin's seat plan
//! pages read and change ([`admin`]), and what the application asks of a
//! plan. The
//! database decides every seat (migrations/0180_seating.sql); this module
//! names the calls other rooms make of it, so none of them writes a seat's
//! SQL of its own.

pub mod admin;
mod best;
pub mod choice;
mod held;
pub mod map;
mod plan;
pub(super) mod sheet;
mod typed;

use sqlx::{Postgres, Transaction};
use uuid::Uuid;

pub use best::{Chosen, FreeSeats, Pick};
pub use held::{OrderSeats, order_seats};
pub use map::{MapFrame, SeatShown, SeatState, SectionHead, SectionSeats};
pub use plan::{CategorySpec, RowSpec, SeatingSpec, SectionSpec, read};
pub use typed::{MAX_TYPED_SEATS, PlacedSeat, RowFields, fielded_rows, placed_rows, row_specs};

/// A refund's stopped items give their seats back (or, not restocked,
/// take them off sale with their units), in the refund's transaction and
/// before its units move: a section's live pins are its held and sold
/// units (`hf_seat_return`).
pub async fn give_back(
    tx: &mut Transaction<'_, Postgres>,
    purchase: Uuid,
    items: &[i64],
    restock: bool,
) -> sqlx::Result<()> {
    sqlx::query("select hf_seat_return($1, $2, $3)")
        .bind(purchase)
        .bind(items)
        .bind(restock)
        .execute(&mut **tx)
        .await?;
    Ok(())
}

/// The seats an order holds or bought, as an offer says them: "Stalls —
/// C-11, C-12, together" (together: one stretch of a row, no aisle
/// between), a section after another separated by "; ". `None` when it
/// has no seats.
pub async fn seats_words(pool: &sqlx::PgPool, order: Uuid) -> sqlx::Result<Option<String>> {
    sqlx::query_scalar(
        "select string_agg(w.words, '; ' order by w.name) \
           from (select x.name, \
                        x.name || ' — ' || string_agg(s.label, ', ' order by s.row_rank, s.run, s.pos) \
                        || case when count(*) > 1 and count(distinct s.run) = 1 \
                                     and max(s.pos) - min(s.pos) = count(*) - 1 \
                                then ', together' else '' end as words \
                   from orders o join holds h on h.purchase_id = o.hold_id \
                   join seat_pins p on p.hold_id = h.id and p.live \
                   join seats s on s.id = p.seat_id \
                   join seat_sections x on x.product_id = s.section \
                  where o.id = $1 \
                  group by x.product_id, x.name) w",
    )
    .bind(order)
    .fetch_one(pool)
    .await
}
