//! Claiming an offer: the order the handover wrote gets its payment page,
//! opened once, with the units already the shopper's.

use sqlx::PgPool;

use super::{Entry, EntryState};
use crate::checkout::{self, AttachOutcome, Desk, Order, OrderState};
use crate::retry::{Bound, retry};

/// Where claiming an offer ended.
#[derive(Debug)]
pub enum Claim {
    /// The payment page is open, the units still the shopper's: go there.
    Pay { url: String },
    /// Paid already: the order's page.
    Paid { order_token: String },
    /// The offer is not (or no longer) open: its entry says why.
    NotOpen,
    /// The provider could not open a page; the units stay held until the
    /// offer ends, so the shopper can try again.
    ProviderFailed,
}

/// Claim an entry's offer: its order's payment page, opened once (a
/// second claim finds the page the first opened).
pub async fn claim(desk: Desk<'_>, entry: &Entry) -> checkout::Result<Claim> {
    if entry.state() != EntryState::Offered && entry.state() != EntryState::Claimed {
        return Ok(Claim::NotOpen);
    }
    let Some(order_id) = entry.order_id else {
        return Ok(Claim::NotOpen);
    };
    let Some(order) = retry("order_read", Bound::Shopper, || {
        checkout::order_by_id(desk.pool, order_id)
    })
    .await?
    else {
        return Ok(Claim::NotOpen);
    };
    match order.state {
        // paid, or paying by a method that settles later: the order page
        OrderState::Paid
        | OrderState::Settling
        | OrderState::RefundPending
        | OrderState::Refunded => {
            return Ok(Claim::Paid {
                order_token: order.token,
            });
        }
        OrderState::Pending => {}
        OrderState::Expired | OrderState::Cancelled => return Ok(Claim::NotOpen),
    }
    if let Some(url) = order.provider_url.clone() {
        return Ok(Claim::Pay { url });
    }
    let lines = retry("order_read", Bound::Shopper, || {
        checkout::order_lines(desk.pool, order_id)
    })
    .await?;
    let page = match checkout::open_page(desk, &order, &lines, None).await {
        Ok(page) => page,
        Err(error) => {
            tracing::warn!(order = %order_id, %error, "the payment provider failed at a waiting-list claim");
            return Ok(Claim::ProviderFailed);
        }
    };
    let attached = retry("claim_attach", Bound::Shopper, || {
        checkout::attach_payment(desk.pool, order_id, &page)
    })
    .await?;
    Ok(match attached {
        AttachOutcome::Paying { order } => Claim::Pay {
            url: order.provider_url.unwrap_or(page.url),
        },
        AttachOutcome::Ended { .. } => Claim::NotOpen,
    })
}

/// The order an offer made, if any.
pub async fn offer_order(pool: &PgPool, entry: &Entry) -> sqlx::Result<Option<Order>> {
    match entry.order_id {
        Some(id) => checkout::order_by_id(pool, id).await,
        None => Ok(None),
    }
}
