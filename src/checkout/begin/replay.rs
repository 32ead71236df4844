//! A form submitted again (a double click, a retry after a lost answer)
//! goes where its first submit went: the order its key started, once that
//! order knows its payment page, so both submits send the shopper to the
//! same place and never start a second order.

use sqlx::PgPool;
use uuid::Uuid;

use super::Begun;
use crate::checkout::{Order, OrderState, Result, order_by_id};
use crate::retry::{Bound, retry};

/// The order an earlier submit of this form started (`existing`, as the
/// read found it), as it is now; `None`: this is the first submit.
pub(super) async fn again(pool: &PgPool, existing: Option<Uuid>) -> Result<Option<Begun>> {
    let Some(existing) = existing else {
        return Ok(None);
    };
    let order = retry("order_read", Bound::Shopper, || order_by_id(pool, existing)).await?;
    Ok(match order {
        Some(order) => Some(found(pool, order).await?),
        None => None,
    })
}

/// The order an earlier submit started, once it has its page.
pub(super) async fn found(pool: &PgPool, order: Order) -> Result<Begun> {
    Ok(Begun::Again {
        order: Box::new(await_provider_page(pool, order).await?),
    })
}

/// A second submit of a checkout form may arrive while the first is still
/// talking to the provider: wait (a few seconds at most) for the first to
/// record its payment page, so both submits end up in the same place.
async fn await_provider_page(pool: &PgPool, mut order: Order) -> sqlx::Result<Order> {
    for _ in 0..40 {
        if order.state != OrderState::Pending || order.provider_url.is_some() {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(250)).await;
        let id = order.id;
        match retry("order_read", Bound::Shopper, || order_by_id(pool, id)).await? {
            Some(fresh) => order = fresh,
            None => break,
        }
    }
    Ok(order)
}
