//! A basket's seat lines, pinned in its one transaction after every claim's
//! units are held (docs/design.md, "Reserved seating"): for each
//! [`Claim::Seats`], `hf_seat_claim` chooses the seats under the section's
//! lock (hf_hold_basket holds it already), pins them to the basket's hold
//! of the section and names them on the order's line. A line whose seats
//! are taken, unknown or not together refuses the whole basket with the
//! database's offer instead ([`SeatRefusal`]): the caller rolls it back,
//! and nothing is held.

use sqlx::{Postgres, Transaction};
use uuid::Uuid;

use super::StartOutcome;
use super::plan::Priced;
use crate::catalogue::kinds::line::Claim;
use crate::catalogue::kinds::seat_choice::{SeatReason, SeatRefusal};
use crate::checkout::{Result, ShortLine};

/// What `hf_seat_claim` answered for one line.
#[derive(Debug, sqlx::FromRow)]
struct SeatAnswer {
    status: String,
    taken: Option<Vec<String>>,
    offers: Option<serde_json::Value>,
    split_allowed: Option<bool>,
    free: Option<i32>,
}

/// Pins every seat line's seats to the basket's hold `basket`; `Some`
/// refusal when a line's seats cannot be had (the caller rolls back).
pub(super) async fn pin(
    tx: &mut Transaction<'_, Postgres>,
    priced: &Priced,
    basket: Uuid,
    order: Uuid,
) -> Result<Option<StartOutcome>> {
    // the plan pushes a line and its claim together, in order
    for (line, claim) in priced.lines.iter().zip(&priced.claims) {
        let Claim::Seats { resource, pick } = claim else {
            continue;
        };
        let answer: SeatAnswer = sqlx::query_as(
            "select status, taken, offers, split_allowed, free \
                   from hf_seat_claim($1, $2, $3, $4, $5, $6, $7)",
        )
        .bind(basket)
        .bind(resource.as_str())
        .bind(pick.labels())
        .bind(pick.qty().get())
        .bind(pick.together())
        .bind(order)
        .bind(&line.product_id)
        .fetch_one(&mut **tx)
        .await?;
        let reason = match answer.status.as_str() {
            "chosen" => continue,
            "taken" => SeatReason::Taken,
            "unknown" => SeatReason::Unknown,
            "not_together" => SeatReason::NotTogether,
            // sold_out: too few seats left, as any line short
            _ => {
                return Ok(Some(StartOutcome::Unavailable {
                    lines: vec![ShortLine {
                        product_id: line.product_id.clone(),
                        name: line.name.clone(),
                        requested: line.qty,
                        available: answer.free.unwrap_or(0).max(0),
                    }],
                }));
            }
        };
        let offers: Vec<Vec<String>> = answer
            .offers
            .and_then(|o| serde_json::from_value(o).ok())
            .unwrap_or_default();
        return Ok(Some(StartOutcome::SeatsRefused {
            refusal: SeatRefusal {
                product_id: line.product_id.clone(),
                name: line.name.clone(),
                reason,
                seats: answer.taken.unwrap_or_default(),
                offers,
                split_allowed: answer.split_allowed.unwrap_or(false),
            },
        }));
    }
    Ok(None)
}
