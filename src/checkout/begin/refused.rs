//! A checkout the engine did not start, said to the shopper: lines short
//! or over the limit, a party with no table, products withdrawn or not on
//! sale, locked, seats taken meanwhile, a voucher refused; each with the
//! basket as it was read, so the page shows it again. Nothing was held.

use super::{BeginRequest, Begun, Desk, replay};
use crate::checkout::basket::{self, BasketLine};
use crate::checkout::{CheckoutRead, CheckoutStart, Result, StartOutcome};
use crate::retry::{Bound, retry};

/// The basket as it was read, for a page that shows it again.
pub(super) fn as_read(read: &CheckoutRead) -> Vec<BasketLine> {
    read.lines.iter().map(|l| l.basket_line()).collect()
}

/// A checkout the engine did not start, said to the shopper.
pub(super) async fn not_started(
    desk: Desk<'_>,
    request: &BeginRequest,
    read_at: chrono::DateTime<chrono::Utc>,
    read: &CheckoutRead,
    start: &CheckoutStart,
    outcome: StartOutcome,
) -> Result<Begun> {
    let basket = as_read(read);
    Ok(match outcome {
        StartOutcome::Started { .. } => unreachable!("a started checkout goes to pay"),
        StartOutcome::AlreadyStarted { order } => replay::found(desk.pool, order).await?,
        StartOutcome::SoldOut { lines } => {
            // a replay of this form is refused from memory while nothing
            // it wants changes
            desk.live
                .remember_refused_form(request.checkout_key.as_str(), read_at);
            let sold_out: Vec<String> = lines
                .iter()
                .filter(|line| line.available == 0)
                .map(|line| line.product_id.clone())
                .collect();
            Begun::SoldOut {
                sold_out: retry("stock_read", Bound::Shopper, || desk.live.stock(&sold_out))
                    .await?,
                lines,
                basket,
            }
        }
        StartOutcome::OverLimit { lines } => Begun::OverLimit { lines, basket },
        StartOutcome::NoTable { lines } => Begun::NoTable { lines, basket },
        StartOutcome::UnknownProducts { ids } => {
            let basket_id = request.basket_id.as_deref().unwrap_or_default();
            retry("basket_remove", Bound::Shopper, || {
                basket::remove(desk.pool, basket_id, &ids)
            })
            .await?;
            Begun::Withdrawn
        }
        StartOutcome::NotOnSale { lines } => Begun::NotOnSale { lines, basket },
        StartOutcome::Locked { ids } => Begun::Locked { ids, basket },
        StartOutcome::SeatsRefused { refusal } => Begun::SeatsRefused { refusal, basket },
        StartOutcome::BadVoucher { refusal } => Begun::BadVoucher {
            code: start
                .voucher
                .as_ref()
                .map(|v| v.voucher.code.to_string())
                .unwrap_or_default(),
            refusal,
            basket,
        },
    })
}
