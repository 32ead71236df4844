//! Checkouts of one seated section, combined per section (docs/design.md,
//! "Reserved seating"). A crowd at a seat map is many shoppers asking the
//! same section at once, each for the best seats together or for seats by
//! label, and every choice is made under the section's row lock. The
//! [`SeatStarts`] combiner ([`crate::batching`], as
//! [`super::start_batches`] does for a ticket tier) sends the checkouts
//! waiting for one section as one call of `hf_start_seat_checkouts`: the
//! database chooses each request's seats in arrival order, starts the
//! orders of those that got seats (the limits, orders, lines and holds of
//! `hf_start_checkouts`) and pins each hold's seats; a request refused
//! there gives its seats back to the others. Each shopper still gets their
//! own answer: seats granted, seats taken (with the nearest seats offered),
//! not together (with the best split), sold out, over a limit.

use sqlx::PgPool;

use super::one_answer::{StartRow, classify, each, lost, one_outcome};
use super::start::{OneStart, StartOutcome};
use super::{OrderLine, Result, ShortLine};
use crate::batching::{Batch, Combiner};
use crate::catalogue::kinds::seat_choice::{SeatPick, SeatReason, SeatRefusal};

/// Most checkouts one call carries.
const MAX_SEAT_BATCH: usize = 256;

/// One checkout of one section: the one-product start and its seats.
#[derive(Debug, Clone)]
pub(super) struct OneSeatStart {
    pub one: OneStart,
    pub pick: SeatPick,
}

/// What `hf_start_seat_checkouts` said about one checkout.
#[derive(Debug, sqlx::FromRow)]
pub(super) struct SeatRow {
    #[sqlx(flatten)]
    start: StartRow,
    /// The seats granted, as the plan labels them (started).
    seats: Option<Vec<String>>,
    /// The seats named that were taken, or are unknown.
    taken: Option<Vec<String>>,
    /// Other seats offered instead, each a set.
    offers: Option<serde_json::Value>,
    split_allowed: Option<bool>,
}

/// The combined call, per section's resource.
pub(super) struct SeatStarts {
    pub pool: PgPool,
}

pub(super) type SeatCombiner = Combiner<SeatStarts>;

impl Batch for SeatStarts {
    type Request = OneSeatStart;
    type Reply = Result<SeatRow>;
    const MAX: usize = MAX_SEAT_BATCH;

    async fn run(&self, resource: &str, requests: Vec<OneSeatStart>) -> Vec<Result<SeatRow>> {
        each(
            requests.len(),
            seat_batch(&self.pool, resource, &requests).await,
        )
    }

    fn lost() -> Result<SeatRow> {
        Err(lost())
    }
}

/// One seated checkout, combined with the others of its section waiting at
/// the same moment (or sent alone, without a combiner).
pub(super) async fn start_seats(
    pool: &PgPool,
    seats: Option<&SeatCombiner>,
    request: OneSeatStart,
    lines: Vec<OrderLine>,
    resource: String,
) -> Result<StartOutcome> {
    let row = match seats {
        Some(seats) => seats.call(&resource, request.clone()).await?,
        None => seat_batch(pool, &resource, std::slice::from_ref(&request))
            .await?
            .pop()
            .ok_or_else(|| super::CheckoutError::Database(sqlx::Error::RowNotFound))?,
    };
    seat_outcome(pool, request, row, lines, resource).await
}

/// One call of `hf_start_seat_checkouts`: the checkouts of one section,
/// answered in the order given.
async fn seat_batch(
    pool: &PgPool,
    resource: &str,
    requests: &[OneSeatStart],
) -> Result<Vec<SeatRow>> {
    let column =
        |f: fn(&OneStart) -> &str| -> Vec<&str> { requests.iter().map(|r| f(&r.one)).collect() };
    let ones = || requests.iter().map(|r| &r.one);
    let mut rows: Vec<SeatRow> = sqlx::query_as(
        "select status, order_id, hold_id, available, created_at, seats, taken, offers, \
                split_allowed \
           from hf_start_seat_checkouts($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, \
                                        $13, $14, $15, $16, $17, $18)",
    )
    .bind(resource)
    .bind(column(|r| &r.key))
    .bind(column(|r| &r.account))
    .bind(ones().map(|r| r.qty).collect::<Vec<_>>())
    .bind(column(|r| &r.product))
    .bind(column(|r| &r.product_name))
    .bind(ones().map(|r| r.unit_price).collect::<Vec<_>>())
    .bind(column(|r| &r.currency))
    .bind(column(|r| &r.token))
    .bind(column(|r| &r.name))
    .bind(column(|r| &r.email))
    .bind(column(|r| r.provider.as_str()))
    .bind(ones().map(|r| r.email_key.as_deref()).collect::<Vec<_>>())
    .bind(
        ones()
            .map(|r| r.address.as_ref().map(|(a, _)| a.as_str()))
            .collect::<Vec<_>>(),
    )
    .bind(ones().map(|r| r.email_cap).collect::<Vec<_>>())
    .bind(
        ones()
            .map(|r| r.address.as_ref().map(|(_, cap)| *cap))
            .collect::<Vec<_>>(),
    )
    // labels hold no comma (SeatLabel), so a joined list splits back
    .bind(
        requests
            .iter()
            .map(|r| r.pick.labels().map(|labels| labels.join(",")))
            .collect::<Vec<_>>(),
    )
    .bind(
        requests
            .iter()
            .map(|r| r.pick.together())
            .collect::<Vec<_>>(),
    )
    .fetch_all(pool)
    .await
    .map_err(classify)?;
    // the numbers the database drew for the orders it started: one read
    // for the whole batch
    let started: Vec<uuid::Uuid> = rows
        .iter()
        .filter(|row| row.start.status == "started")
        .filter_map(|row| row.start.order_id)
        .collect();
    if !started.is_empty() {
        let numbers: Vec<(uuid::Uuid, String)> =
            sqlx::query_as("select id, number from orders where id = any($1)")
                .bind(&started)
                .fetch_all(pool)
                .await?;
        for row in &mut rows {
            if let Some((_, number)) = numbers
                .iter()
                .find(|(id, _)| Some(*id) == row.start.order_id)
            {
                row.start.number = number.clone();
            }
        }
    }
    Ok(rows)
}

/// What one seated checkout's answer means for the shopper: a refusal for
/// want of seats is the section's own; anything else is a one-product
/// checkout's, its line naming the seats it got.
async fn seat_outcome(
    pool: &PgPool,
    request: OneSeatStart,
    row: SeatRow,
    mut lines: Vec<OrderLine>,
    resource: String,
) -> Result<StartOutcome> {
    let one = request.one;
    let reason = match row.start.status.as_str() {
        "seats_taken" => SeatReason::Taken,
        "unknown_seats" => SeatReason::Unknown,
        "not_together" => SeatReason::NotTogether,
        // too few seats left, as any line short
        "sold_out" => {
            return Ok(StartOutcome::Unavailable {
                lines: vec![ShortLine {
                    product_id: one.product,
                    name: one.product_name,
                    requested: one.qty,
                    available: row.start.available.unwrap_or(0).max(0),
                }],
            });
        }
        _ => {
            // the order's line names its seats, as the database wrote it
            // ("Stalls — C-11, C-12")
            if let (Some(seats), [line]) = (&row.seats, lines.as_mut_slice())
                && !seats.is_empty()
            {
                line.name = format!("{} — {}", line.name, seats.join(", "));
            }
            return one_outcome(pool, one, row.start, lines, resource).await;
        }
    };
    let offers: Vec<Vec<String>> = row
        .offers
        .and_then(|o| serde_json::from_value(o).ok())
        .unwrap_or_default();
    Ok(StartOutcome::SeatsRefused {
        refusal: SeatRefusal {
            product_id: one.product,
            name: one.product_name,
            reason,
            seats: row.taken.unwrap_or_default(),
            offers,
            split_allowed: row.split_allowed.unwrap_or(false),
        },
    })
}
