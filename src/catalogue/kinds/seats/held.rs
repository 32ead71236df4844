//! The seats an order holds or bought, section by section, as the JSON
//! API's checkout answers them (docs/design.md, "Reserved seating").

use sqlx::PgPool;
use uuid::Uuid;

/// One section's seats of an order, as the plan labels them, in the
/// plan's order (row from the stage back, then along the row).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, sqlx::FromRow)]
pub struct OrderSeats {
    pub product_id: String,
    pub seats: Vec<String>,
}

/// The live seats of an order's holds (its purchase), each section once.
pub async fn order_seats(pool: &PgPool, order: Uuid) -> sqlx::Result<Vec<OrderSeats>> {
    sqlx::query_as(
        "select s.section as product_id, \
                array_agg(s.label order by s.row_rank, s.run, s.pos) as seats \
           from orders o \
           join holds h on h.purchase_id = o.hold_id \
           join seat_pins p on p.hold_id = h.id and p.live \
           join seats s on s.id = p.seat_id \
          where o.id = $1 \
          group by s.section order by s.section",
    )
    .bind(order)
    .fetch_all(pool)
    .await
}
