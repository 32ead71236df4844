//! Receive a provider's webhook: the provider's adapter verifies the
//! signature before a byte is parsed and turns the event into a
//! provider-neutral [`ProviderEvent`]; here the event id is recorded and
//! the effect written in one transaction, so each event changes things at
//! most once whatever the retries, duplicates and order of delivery.

use serde::Serialize;
use sqlx::{PgPool, Postgres, Transaction};

use crate::checkout::outbox::{self, OutboxJob};
use crate::checkout::refund::{self, RefundMove};
use crate::checkout::{
    self, CheckoutError, Confirmations, Fulfilment, PaymentReport, Release, Seen, Source, settle,
};
use crate::payments::{
    PaymentProvider, PaymentStatus, ProviderEvent, ProviderKind, ProviderPayment, WebhookDelivery,
    WebhookRequest,
};

/// What became of a delivery: refused whole (400), or taken in, one
/// verdict for each notification it carried (2xx).
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "receipt", rename_all = "snake_case")]
pub enum Receipt {
    /// Bad or missing signature, stale timestamp, malformed body: nothing
    /// was read, nothing changed.
    Rejected {
        reason: String,
    },
    Taken {
        verdicts: Vec<Verdict>,
    },
}

/// What became of one notification.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "verdict", rename_all = "snake_case")]
pub enum Verdict {
    /// Seen before: nothing changed.
    Duplicate,
    /// Verified but nothing to do (unknown type, not money yet).
    Ignored { reason: &'static str },
    /// The payment went through the confirm routine.
    Confirmed { fulfilment: Fulfilment },
    /// An authorised payment: the worker captures it (outside any lock).
    CaptureQueued,
    /// A payment for a page Holdfast does not know: kept for staff.
    Orphan,
    /// The order's holds were given back.
    Released,
    /// A refund the provider reports finished.
    RefundClosed,
    /// A refund the provider reports failed: it will be tried again.
    RefundReopened,
    /// A refund still on its way.
    RefundNoted,
}

impl Verdict {
    pub fn label(&self) -> &'static str {
        match self {
            Verdict::Duplicate => "duplicate",
            Verdict::Ignored { .. } => "ignored",
            Verdict::Confirmed { .. } => "confirmed",
            Verdict::CaptureQueued => "capture_queued",
            Verdict::Orphan => "orphan",
            Verdict::Released => "released",
            Verdict::RefundClosed => "refund_closed",
            Verdict::RefundReopened => "refund_reopened",
            Verdict::RefundNoted => "refund_noted",
        }
    }
}

/// The shop's way in for webhooks. A captured payment on a page of ours
/// goes through [`Confirmations`] (combined with the other payments for
/// its resource, its event recorded with its effect); anything else in a
/// transaction of its own. Cheap to clone.
#[derive(Debug, Clone)]
pub struct Webhooks {
    confirmations: Confirmations,
}

impl Webhooks {
    pub fn new(confirmations: Confirmations) -> Self {
        Self { confirmations }
    }

    /// Receive one delivery: its provider verifies it and reads the
    /// notifications it carries, then each goes in turn. A failure stops
    /// the delivery (the provider sends it again; what was taken in before
    /// is recognised by its event id and changes nothing twice).
    pub async fn receive(
        &self,
        provider: &dyn PaymentProvider,
        request: &WebhookRequest<'_>,
    ) -> Result<Receipt, CheckoutError> {
        let deliveries = match provider.verify_webhook(request).await {
            Ok(deliveries) => deliveries,
            Err(reason) => return Ok(Receipt::Rejected { reason }),
        };
        let mut verdicts = Vec::with_capacity(deliveries.len());
        for delivery in deliveries {
            verdicts.push(self.notification(provider.kind(), delivery).await?);
        }
        Ok(Receipt::Taken { verdicts })
    }

    /// One verified notification.
    async fn notification(
        &self,
        provider: ProviderKind,
        delivery: WebhookDelivery,
    ) -> Result<Verdict, CheckoutError> {
        let pool = self.confirmations.pool();
        if let ProviderEvent::Payment(payment) = &delivery.event
            && payment.status == PaymentStatus::Captured
            && let Some(page_id) = &payment.page_id
            && let Some(order) =
                checkout::order_by_provider_session(pool, provider, page_id).await?
        {
            let seen = Seen {
                provider,
                event_id: delivery.event_id.clone(),
                kind: delivery.kind.clone(),
            };
            let report = PaymentReport {
                order_id: order.id,
                payment: payment.clone(),
                source: Source::Webhook,
            };
            return Ok(match self.confirmations.confirm_seen(seen, report).await? {
                Some(fulfilment) => Verdict::Confirmed { fulfilment },
                None => Verdict::Duplicate,
            });
        }
        receive_alone(pool, provider, delivery).await
    }

    /// Combined transactions so far (for the curious and the tests).
    pub fn calls(&self) -> u64 {
        self.confirmations.calls()
    }
}

/// Record a provider's event id. Returns false when it was seen before:
/// then the caller changes nothing. A concurrent delivery of the same id
/// waits here for the first transaction and then finds it.
pub async fn first_delivery(
    tx: &mut Transaction<'_, Postgres>,
    provider: ProviderKind,
    event_id: &str,
    event_type: &str,
) -> sqlx::Result<bool> {
    let fresh: Option<String> = sqlx::query_scalar(
        "insert into webhook_events (provider, event_id, event_type) values ($1, $2, $3) \
         on conflict do nothing returning event_id",
    )
    .bind(provider.as_str())
    .bind(event_id)
    .bind(event_type)
    .fetch_optional(&mut **tx)
    .await?;
    Ok(fresh.is_some())
}

/// A verified delivery in a transaction of its own.
async fn receive_alone(
    pool: &PgPool,
    kind: ProviderKind,
    delivery: WebhookDelivery,
) -> Result<Verdict, CheckoutError> {
    let mut tx = pool.begin().await?;
    if !first_delivery(&mut tx, kind, &delivery.event_id, &delivery.kind).await? {
        tx.rollback().await?;
        return Ok(Verdict::Duplicate);
    }
    let verdict = match delivery.event {
        ProviderEvent::Payment(payment) => {
            let seen_in = format!("webhook {}", delivery.event_id);
            payment_event(&mut tx, payment, &seen_in).await?
        }
        ProviderEvent::PageEnded { page_id, end } => {
            match checkout::order_by_provider_session(&mut *tx, kind, &page_id).await? {
                Some(order) => {
                    let release = Release::PageEnded {
                        provider: kind,
                        event: &delivery.kind,
                        end,
                    };
                    checkout::release_order_in(&mut tx, order.id, release).await?;
                    Verdict::Released
                }
                // only the order's own page can end it: another page's
                // expiry (one made with our order id by someone else)
                // releases nothing
                None => Verdict::Ignored {
                    reason: "not a page of ours",
                },
            }
        }
        ProviderEvent::Refund(view) => {
            match refund::refund_moved_in(&mut tx, kind, &view, None).await? {
                RefundMove::Closed => Verdict::RefundClosed,
                RefundMove::Reopened => Verdict::RefundReopened,
                RefundMove::Noted => Verdict::RefundNoted,
                RefundMove::NotOurs => Verdict::Ignored {
                    reason: "no refund of ours for that payment",
                },
            }
        }
        ProviderEvent::Ignore(reason) => Verdict::Ignored { reason },
    };
    tx.commit().await?;
    Ok(verdict)
}

/// A payment event: the order is the one whose page it was made on; failing
/// that, the one it claims (then the confirm routine finds the page wrong,
/// flags the order and refunds the money); failing that, an orphan.
async fn payment_event(
    tx: &mut Transaction<'_, Postgres>,
    payment: ProviderPayment,
    seen_in: &str,
) -> Result<Verdict, CheckoutError> {
    let mut order = None;
    if let Some(page_id) = &payment.page_id {
        order = checkout::order_by_provider_session(&mut **tx, payment.provider, page_id)
            .await?
            .map(|o| o.id);
    }
    if order.is_none()
        && let Some(hint) = payment.order_hint
    {
        order = checkout::order_by_id_in(&mut **tx, hint)
            .await?
            .map(|o| o.id);
    }
    let Some(order_id) = order else {
        settle::record_orphan(&mut **tx, &payment, seen_in).await?;
        return Ok(Verdict::Orphan);
    };
    Ok(match payment.status {
        // captured, or committed and settling: the confirm routine decides
        PaymentStatus::Captured | PaymentStatus::Pending => {
            let report = PaymentReport {
                order_id,
                payment,
                source: Source::Webhook,
            };
            Verdict::Confirmed {
                fulfilment: checkout::confirm_payment_in(tx, &report).await?,
            }
        }
        // capturing is a provider call: never inside this transaction
        PaymentStatus::Authorized => {
            outbox::queue(&mut **tx, &OutboxJob::CapturePayment { order_id, payment }).await?;
            Verdict::CaptureQueued
        }
        PaymentStatus::Failed | PaymentStatus::Refunded => Verdict::Ignored {
            reason: "not money, and never will be",
        },
    })
}
