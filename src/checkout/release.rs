//! Units going back before an order was paid.

use sqlx::{PgPool, Postgres, Transaction};
use uuid::Uuid;

use crate::inventory::{self, HoldId, ReleaseOutcome};
use crate::payments::{PageEnd, ProviderKind};

use super::{Order, OrderState, Result, order_by_id, outbox};

/// Why an order's units go back before it was paid. Each cause says what
/// the history records (reason, actor), the state the order ends in, and
/// whether the provider's page may still be open (then it is closed too, so
/// nobody pays for units that are gone).
#[derive(Debug, Clone, Copy)]
pub enum Release<'a> {
    /// The provider refused to open a page at checkout start: there is none
    /// to close.
    ProviderError,
    /// The payment phase could not start after the page was opened.
    PaymentPhaseFailed,
    /// The shopper left the payment page.
    ShopperLeft,
    /// The provider said the page ended, in an event of this kind: the page
    /// is closed already.
    PageEnded {
        provider: ProviderKind,
        event: &'a str,
        end: PageEnd,
    },
    /// Reconciliation read the page as expired at the provider.
    PageExpiredAtProvider,
    /// Reconciliation read the settling payment as failed at the provider
    /// (its failure event was lost).
    PaymentFailedAtProvider,
    /// A staff member let the order go, for their reason.
    Staff { actor: &'a str, reason: &'a str },
}

impl Release<'_> {
    /// Why, as `holds.end_reason` and the history record it.
    pub fn reason(&self) -> &str {
        match self {
            Release::ProviderError => "provider_error",
            Release::PaymentPhaseFailed => "payment_phase_failed",
            Release::ShopperLeft => "shopper left the payment page",
            Release::PageEnded { event, .. } => event,
            Release::PageExpiredAtProvider => "session_expired",
            Release::PaymentFailedAtProvider => "payment_failed",
            Release::Staff { reason, .. } => reason,
        }
    }

    /// Who let go.
    pub fn actor(&self) -> &str {
        match self {
            Release::ProviderError | Release::PaymentPhaseFailed => "checkout",
            Release::ShopperLeft => "shopper",
            Release::PageEnded { provider, .. } => provider.as_str(),
            Release::PageExpiredAtProvider | Release::PaymentFailedAtProvider => "reconciler",
            Release::Staff { actor, .. } => actor,
        }
    }

    /// The state the order ends in.
    pub fn final_state(&self) -> OrderState {
        match self {
            Release::PageEnded {
                end: PageEnd::PaymentFailed,
                ..
            } => OrderState::Cancelled,
            Release::PageEnded {
                end: PageEnd::Expired,
                ..
            }
            | Release::PageExpiredAtProvider => OrderState::Expired,
            Release::ProviderError
            | Release::PaymentPhaseFailed
            | Release::PaymentFailedAtProvider
            | Release::ShopperLeft
            | Release::Staff { .. } => OrderState::Cancelled,
        }
    }

    /// Whether the provider may still take money on the page: then its
    /// closing is queued.
    pub fn closes_page(&self) -> bool {
        match self {
            Release::PaymentPhaseFailed | Release::ShopperLeft | Release::Staff { .. } => true,
            // no page was opened, or the provider itself said it ended
            Release::ProviderError
            | Release::PageEnded { .. }
            | Release::PageExpiredAtProvider
            | Release::PaymentFailedAtProvider => false,
        }
    }
}

/// Give an order's units back before it was paid: the provider failed at
/// checkout start, the page expired, or the shopper cancelled. A paid
/// order is left alone. Returns the order as it is now.
pub async fn release_order(
    pool: &PgPool,
    order_id: Uuid,
    release: Release<'_>,
) -> Result<Option<Order>> {
    let mut tx = pool.begin().await?;
    let found = release_order_in(&mut tx, order_id, release).await?;
    tx.commit().await?;
    if found.is_none() {
        return Ok(None);
    }
    Ok(order_by_id(pool, order_id).await?)
}

/// [`release_order`] inside the caller's transaction (a webhook's, with its
/// dedupe row), saying what the engine did with the order's hold
/// (`NotFound` for an order without one); `None` if there is no such order.
pub async fn release_order_in(
    tx: &mut Transaction<'_, Postgres>,
    order_id: Uuid,
    release: Release<'_>,
) -> Result<Option<ReleaseOutcome>> {
    // lock: the order first, then (inside the engine) its resources
    let hold_id: Option<Option<Uuid>> =
        sqlx::query_scalar("select hold_id from orders where id = $1 for update")
            .bind(order_id)
            .fetch_optional(&mut **tx)
            .await?;
    let Some(hold_id) = hold_id else {
        return Ok(None);
    };
    let outcome = match hold_id {
        Some(hold_id) => {
            inventory::release(
                &mut **tx,
                HoldId(hold_id),
                release.reason(),
                release.actor(),
            )
            .await?
        }
        None => ReleaseOutcome::NotFound,
    };
    match outcome {
        ReleaseOutcome::Released { .. }
        | ReleaseOutcome::AlreadyReleased { .. }
        | ReleaseOutcome::Expired { .. }
        | ReleaseOutcome::NotFound => {}
        // the money won the race: the order is paid, not released
        ReleaseOutcome::Confirmed { .. } => return Ok(Some(outcome)),
    }
    let page: Option<(Option<String>, ProviderKind)> = sqlx::query_as(
        "update orders set state = $2, updated_at = now() \
          where id = $1 and state in ('pending', 'settling') \
         returning provider_session_id, provider",
    )
    .bind(order_id)
    .bind(release.final_state())
    .fetch_optional(&mut **tx)
    .await?;
    // Released on our side while the provider's page may still be open:
    // close it too. (A provider whose pages cannot close answers the job at
    // once; money that still lands there is refunded.)
    if let Some((Some(page_id), provider)) = page
        && release.closes_page()
    {
        outbox::queue(
            &mut **tx,
            &outbox::OutboxJob::ClosePage {
                order_id,
                provider,
                page_id,
            },
        )
        .await?;
    }
    Ok(Some(outcome))
}

/// Orders still `pending` or `settling` whose holds have all ended (the
/// sweeper expired them at the payment deadline, or at a settling
/// payment's deadline plus grace, or they lapsed before payment started)
/// are marked expired, so their pages stop waiting. Returns how many
/// changed. Takes only order row locks.
pub async fn expire_abandoned_orders(pool: &PgPool) -> sqlx::Result<u64> {
    let changed = sqlx::query(
        "update orders o set state = 'expired', updated_at = now() \
          where o.state in ('pending', 'settling') and o.hold_id is not null \
            and not exists (select 1 from holds h \
                             where h.purchase_id = o.hold_id \
                               and h.state in ('held', 'awaiting_payment', 'confirmed'))",
    )
    .execute(pool)
    .await?;
    Ok(changed.rows_affected())
}
