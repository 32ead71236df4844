//! A started order on its way to pay: outside any transaction or lock,
//! the provider's page, then the payment phase; an order that owes
//! nothing is confirmed at once with no provider. A failure on the way
//! gives the units back at once rather than when the hold runs out.

use sqlx::PgPool;

use super::page::open_page;
use super::{Begun, Desk};
use crate::checkout::basket;
use crate::checkout::{
    AttachOutcome, Fulfilment, Order, OrderLine, Release, Result, order_by_id, release_order,
};
use crate::payments::methods::PayMethod;
use crate::retry::{Bound, retry};

/// A started order on its way to pay: outside any transaction or lock,
/// the provider's page; then the payment phase. A failure gives the units
/// back at once.
pub(super) async fn pay(
    desk: Desk<'_>,
    order: Order,
    lines: &[OrderLine],
    resource: Option<String>,
    basket_id: &str,
    method: Option<PayMethod>,
) -> Result<Begun> {
    crate::faults::crash_point("after_checkout_commit");
    if order.amount_minor == 0 {
        return confirm_free(desk, order, basket_id).await;
    }
    if let Some(method) = method {
        retry("order_pay_method", Bound::Shopper, || {
            crate::checkout::order::keep_pay_method(desk.pool, order.id, method)
        })
        .await?;
    }
    let page = match open_page(desk, &order, lines, method).await {
        Ok(page) => page,
        Err(error) => {
            tracing::warn!(order = %order.id, %error, "the payment provider failed at checkout start");
            release(desk.pool, order.id, Release::ProviderError).await?;
            return Ok(Begun::ProviderFailed);
        }
    };
    crate::faults::crash_point("after_provider_call");
    let order_id = order.id;
    let attached = retry("checkout_attach", Bound::Shopper, || {
        desk.checkouts
            .attach(order.clone(), resource.as_deref(), &page, Some(basket_id))
    })
    .await;
    let attached = match attached {
        Ok(attached) => attached,
        Err(error) => {
            // the provider's page exists but our holds could not move into
            // the payment phase: give them back now rather than at the TTL
            tracing::error!(order = %order_id, error = %error, "could not start the payment phase");
            release(desk.pool, order_id, Release::PaymentPhaseFailed).await?;
            return Ok(Begun::PaymentPhaseFailed);
        }
    };
    Ok(match attached {
        // the basket was emptied with the payment phase
        AttachOutcome::Paying { .. } => Begun::Pay { url: page.url },
        AttachOutcome::Ended { .. } => Begun::RanOut,
    })
}

/// An order of nothing, confirmed at once by the one confirm routine
/// without a provider (docs/design.md, "An order of nothing"); its basket
/// is emptied as a paying one's is. Holds that ended meanwhile leave it
/// unsold, as [`Begun::RanOut`].
async fn confirm_free(desk: Desk<'_>, order: Order, basket_id: &str) -> Result<Begun> {
    let order_id = order.id;
    let confirmed = retry("checkout_free", Bound::Shopper, || {
        crate::checkout::confirm_free(desk.pool, order_id)
    })
    .await?;
    if !matches!(
        confirmed,
        Fulfilment::Fulfilled { .. } | Fulfilment::AlreadyFulfilled { .. }
    ) {
        release(desk.pool, order_id, Release::PaymentPhaseFailed).await?;
        return Ok(Begun::RanOut);
    }
    if !basket_id.is_empty() {
        retry("basket_clear", Bound::Shopper, || {
            basket::clear(desk.pool, basket_id)
        })
        .await?;
    }
    let order = retry("order_read", Bound::Shopper, || {
        order_by_id(desk.pool, order_id)
    })
    .await?
    .unwrap_or(order);
    Ok(Begun::Confirmed {
        order: Box::new(order),
    })
}

/// An order's units back, tried again while the database is away (a
/// release run twice finds the order released and changes nothing).
async fn release(pool: &PgPool, order_id: uuid::Uuid, why: Release<'_>) -> Result<()> {
    retry("checkout_release", Bound::Shopper, || {
        release_order(pool, order_id, why)
    })
    .await?;
    Ok(())
}
