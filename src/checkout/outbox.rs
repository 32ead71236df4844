//! The work checkout leaves for after its commit, as typed jobs: each is
//! written in the transaction that decided it (so it exists exactly when
//! its cause does), once per effect (its dedupe key), and run by the
//! worker (`worker::outbox`), which retries it until it is done.

use serde::{Deserialize, Serialize};
use sqlx::PgExecutor;
use uuid::Uuid;

use crate::payments::{ProviderKind, ProviderPayment};

/// Give one payment's money back.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RefundJob {
    /// The order it was paid for (a payment on a page of ours whose order
    /// we know; `None` only for jobs staff create by hand).
    pub order_id: Option<Uuid>,
    pub provider: ProviderKind,
    pub payment_ref: String,
    /// Why: duplicate_payment, hold_expired, hold_released,
    /// payment_mismatch, staff.
    pub reason: String,
    /// A refund staff asked for (`order_refunds.id`): one payment may be
    /// refunded by staff several times, in parts.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub staff_refund: Option<i64>,
    /// `None`: whatever of the payment has not been refunded.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub amount_minor: Option<i64>,
    /// What the payment took, as it was reported: a refund event for less
    /// than the job asked for (a partial refund made by hand at the
    /// provider) does not close the job.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub paid_minor: Option<i64>,
}

/// One job of the outbox.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum OutboxJob {
    Refund(RefundJob),
    /// Tell the shopper their order is paid (with its codes).
    OrderConfirmation {
        order_id: Uuid,
    },
    /// Tell the shopper their payment is being processed, and until when
    /// the units are theirs (a bank debit settling).
    OrderSettling {
        order_id: Uuid,
    },
    /// Stop a payment page from taking money: its order was released.
    ClosePage {
        order_id: Uuid,
        provider: ProviderKind,
        page_id: String,
    },
    /// Capture an authorised payment (if its order still wants it), then
    /// confirm it.
    CapturePayment {
        order_id: Uuid,
        payment: ProviderPayment,
    },
    /// Tell the shopper staff refunded (some of) their order.
    RefundNotice {
        order_id: Uuid,
        refund_id: i64,
    },
    /// Tell the shopper a payment of theirs goes back (it came after the
    /// reservation ended, twice, or did not match the order).
    PaymentReturned {
        order_id: Uuid,
        payment: ProviderPayment,
        reason: String,
    },
    /// Mail a waiting-list entry its confirmation link (`offer` false) or
    /// the link that pays for the units held for it. Queued by the
    /// database (`hf_hand_over`) and by `crate::waitlist::join`.
    WaitlistMail {
        entry_id: Uuid,
        offer: bool,
    },
    /// Deliver one event to one endpoint (`crate::outgoing`). Queued by the
    /// database (migration 0060's triggers), never from here.
    Webhook {
        endpoint_id: String,
        message_id: String,
    },
    /// Invite a member of staff: the mail with the link to set their own
    /// password (the token is the mail's alone: never printed).
    StaffInvite {
        invite_id: i64,
        token: crate::configuration::Secret,
    },
}

#[derive(Serialize, Deserialize)]
struct InvitePayload {
    invite_id: i64,
    token: String,
}

#[derive(Serialize, Deserialize)]
struct WebhookPayload {
    endpoint_id: String,
    message_id: String,
}

#[derive(Serialize, Deserialize)]
struct WaitlistPayload {
    entry_id: Uuid,
    /// `confirm` or `offer`
    what: String,
}

#[derive(Serialize, Deserialize)]
struct ReturnedPayload {
    order_id: Uuid,
    payment: ProviderPayment,
    reason: String,
}

#[derive(Serialize, Deserialize)]
struct NoticePayload {
    order_id: Uuid,
    refund_id: i64,
}

#[derive(Serialize, Deserialize)]
struct OrderPayload {
    order_id: Uuid,
}

#[derive(Serialize, Deserialize)]
struct ClosePayload {
    order_id: Uuid,
    provider: ProviderKind,
    /// named for the first kind of page it closed, a Checkout Session
    session_id: String,
}

#[derive(Serialize, Deserialize)]
struct CapturePayload {
    order_id: Uuid,
    payment: ProviderPayment,
}

/// The dedupe key of the refund of one payment: one payment is refunded
/// once, however many paths report it.
pub fn refund_key(provider: ProviderKind, payment_ref: &str) -> String {
    format!("refund:{provider}:{payment_ref}")
}

/// The dedupe key of one staff refund of a payment.
pub fn staff_refund_key(provider: ProviderKind, payment_ref: &str, refund_id: i64) -> String {
    format!("refund:{provider}:{payment_ref}:staff:{refund_id}")
}

impl OutboxJob {
    /// The `kind` column.
    pub fn kind(&self) -> &'static str {
        match self {
            OutboxJob::Refund(_) => "refund",
            OutboxJob::OrderConfirmation { .. } => "order_confirmation",
            OutboxJob::OrderSettling { .. } => "order_settling",
            OutboxJob::ClosePage { .. } => "expire_session",
            OutboxJob::CapturePayment { .. } => "capture_payment",
            OutboxJob::RefundNotice { .. } => "refund_notice",
            OutboxJob::PaymentReturned { .. } => "payment_returned",
            OutboxJob::Webhook { .. } => "webhook",
            OutboxJob::WaitlistMail { .. } => "waitlist_mail",
            OutboxJob::StaffInvite { .. } => "staff_invite",
        }
    }

    /// One job per effect.
    pub fn dedupe_key(&self) -> String {
        match self {
            OutboxJob::Refund(job) => match job.staff_refund {
                Some(id) => staff_refund_key(job.provider, &job.payment_ref, id),
                None => refund_key(job.provider, &job.payment_ref),
            },
            OutboxJob::OrderConfirmation { order_id } => format!("order_confirmation:{order_id}"),
            OutboxJob::OrderSettling { order_id } => format!("order_settling:{order_id}"),
            OutboxJob::ClosePage { page_id, .. } => format!("expire_session:{page_id}"),
            OutboxJob::CapturePayment { payment, .. } => {
                format!("capture:{}:{}", payment.provider, payment.payment_ref)
            }
            OutboxJob::RefundNotice { refund_id, .. } => format!("refund_notice:{refund_id}"),
            OutboxJob::PaymentReturned { payment, .. } => format!(
                "payment_returned:{}",
                refund_key(payment.provider, &payment.payment_ref)
            ),
            OutboxJob::Webhook {
                endpoint_id,
                message_id,
            } => format!("webhook:{endpoint_id}:{message_id}"),
            OutboxJob::WaitlistMail { entry_id, offer } => format!(
                "waitlist_{}:{entry_id}",
                if *offer { "offer" } else { "confirm" }
            ),
            // the token's hash, as crate::staff::invites writes it
            OutboxJob::StaffInvite { token, .. } => {
                use sha2::Digest;
                let hash = sha2::Sha256::digest(token.expose().as_bytes());
                format!("staff_invite:{}", hex::encode(hash))
            }
        }
    }

    /// The `payload` column.
    pub fn payload(&self) -> serde_json::Value {
        let value = match self {
            OutboxJob::Refund(job) => serde_json::to_value(job),
            OutboxJob::OrderConfirmation { order_id } | OutboxJob::OrderSettling { order_id } => {
                serde_json::to_value(OrderPayload {
                    order_id: *order_id,
                })
            }
            OutboxJob::ClosePage {
                order_id,
                provider,
                page_id,
            } => serde_json::to_value(ClosePayload {
                order_id: *order_id,
                provider: *provider,
                session_id: page_id.clone(),
            }),
            OutboxJob::CapturePayment { order_id, payment } => {
                serde_json::to_value(CapturePayload {
                    order_id: *order_id,
                    payment: payment.clone(),
                })
            }
            OutboxJob::RefundNotice {
                order_id,
                refund_id,
            } => serde_json::to_value(NoticePayload {
                order_id: *order_id,
                refund_id: *refund_id,
            }),
            OutboxJob::PaymentReturned {
                order_id,
                payment,
                reason,
            } => serde_json::to_value(ReturnedPayload {
                order_id: *order_id,
                payment: payment.clone(),
                reason: reason.clone(),
            }),
            OutboxJob::Webhook {
                endpoint_id,
                message_id,
            } => serde_json::to_value(WebhookPayload {
                endpoint_id: endpoint_id.clone(),
                message_id: message_id.clone(),
            }),
            OutboxJob::WaitlistMail { entry_id, offer } => serde_json::to_value(WaitlistPayload {
                entry_id: *entry_id,
                what: if *offer { "offer" } else { "confirm" }.to_owned(),
            }),
            OutboxJob::StaffInvite { invite_id, token } => serde_json::to_value(InvitePayload {
                invite_id: *invite_id,
                token: token.expose().to_owned(),
            }),
        };
        value.expect("job payloads are plain data")
    }

    /// A stored job, read back.
    pub fn parse(kind: &str, payload: &serde_json::Value) -> Result<Self, String> {
        let read =
            |error: serde_json::Error| format!("a {kind} job's payload is unreadable: {error}");
        Ok(match kind {
            "refund" => OutboxJob::Refund(serde_json::from_value(payload.clone()).map_err(read)?),
            "order_confirmation" => {
                let p: OrderPayload = serde_json::from_value(payload.clone()).map_err(read)?;
                OutboxJob::OrderConfirmation {
                    order_id: p.order_id,
                }
            }
            "order_settling" => {
                let p: OrderPayload = serde_json::from_value(payload.clone()).map_err(read)?;
                OutboxJob::OrderSettling {
                    order_id: p.order_id,
                }
            }
            "expire_session" => {
                let p: ClosePayload = serde_json::from_value(payload.clone()).map_err(read)?;
                OutboxJob::ClosePage {
                    order_id: p.order_id,
                    provider: p.provider,
                    page_id: p.session_id,
                }
            }
            "capture_payment" => {
                let p: CapturePayload = serde_json::from_value(payload.clone()).map_err(read)?;
                OutboxJob::CapturePayment {
                    order_id: p.order_id,
                    payment: p.payment,
                }
            }
            "waitlist_mail" => {
                let p: WaitlistPayload = serde_json::from_value(payload.clone()).map_err(read)?;
                OutboxJob::WaitlistMail {
                    entry_id: p.entry_id,
                    offer: match p.what.as_str() {
                        "offer" => true,
                        "confirm" => false,
                        other => return Err(format!("a waitlist_mail job for {other:?}")),
                    },
                }
            }
            "staff_invite" => {
                let p: InvitePayload = serde_json::from_value(payload.clone())
                    .map_err(|_| "a staff_invite job's payload is unreadable".to_owned())?;
                OutboxJob::StaffInvite {
                    invite_id: p.invite_id,
                    token: crate::configuration::Secret::new(p.token),
                }
            }
            "refund_notice" => {
                let p: NoticePayload = serde_json::from_value(payload.clone()).map_err(read)?;
                OutboxJob::RefundNotice {
                    order_id: p.order_id,
                    refund_id: p.refund_id,
                }
            }
            "payment_returned" => {
                let p: ReturnedPayload = serde_json::from_value(payload.clone()).map_err(read)?;
                OutboxJob::PaymentReturned {
                    order_id: p.order_id,
                    payment: p.payment,
                    reason: p.reason,
                }
            }
            "webhook" => {
                let p: WebhookPayload = serde_json::from_value(payload.clone()).map_err(read)?;
                OutboxJob::Webhook {
                    endpoint_id: p.endpoint_id,
                    message_id: p.message_id,
                }
            }
            other => return Err(format!("unknown job kind {other}")),
        })
    }
}

/// Queue a job unless the same effect is queued already. Returns whether
/// this call queued it.
pub async fn queue<'e>(executor: impl PgExecutor<'e>, job: &OutboxJob) -> sqlx::Result<bool> {
    Ok(queue_all(executor, std::slice::from_ref(job)).await? > 0)
}

/// Queue several jobs in one statement, each unless the same effect is
/// queued already. Returns how many this call queued.
pub async fn queue_all<'e>(executor: impl PgExecutor<'e>, jobs: &[OutboxJob]) -> sqlx::Result<u64> {
    if jobs.is_empty() {
        return Ok(0);
    }
    let kinds: Vec<&str> = jobs.iter().map(OutboxJob::kind).collect();
    let keys: Vec<String> = jobs.iter().map(OutboxJob::dedupe_key).collect();
    let payloads: Vec<serde_json::Value> = jobs.iter().map(OutboxJob::payload).collect();
    let inserted = sqlx::query(
        "insert into outbox_jobs (kind, dedupe_key, payload) \
         select * from unnest($1::text[], $2::text[], $3::jsonb[]) \
         on conflict (dedupe_key) do nothing",
    )
    .bind(&kinds)
    .bind(&keys)
    .bind(&payloads)
    .execute(executor)
    .await?;
    Ok(inserted.rows_affected())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::payments::PaymentStatus;

    #[test]
    fn every_job_reads_back_as_it_was_written() {
        let order_id = Uuid::new_v4();
        let payment = ProviderPayment {
            provider: ProviderKind::ALL[1],
            payment_ref: "pay_1".into(),
            page_id: Some("order_1".into()),
            amount_minor: 1400,
            currency: "inr".into(),
            status: PaymentStatus::Authorized,
            order_hint: None,
            method: Some("upi".into()),
        };
        for job in [
            OutboxJob::Refund(RefundJob {
                order_id: Some(order_id),
                provider: ProviderKind::ALL[0],
                payment_ref: "pi_1".into(),
                reason: "duplicate_payment".into(),
                staff_refund: None,
                amount_minor: None,
                paid_minor: Some(1400),
            }),
            OutboxJob::Refund(RefundJob {
                order_id: Some(order_id),
                provider: ProviderKind::ALL[0],
                payment_ref: "pi_1".into(),
                reason: "staff".into(),
                staff_refund: Some(7),
                amount_minor: Some(700),
                paid_minor: Some(1400),
            }),
            OutboxJob::OrderConfirmation { order_id },
            OutboxJob::OrderSettling { order_id },
            OutboxJob::ClosePage {
                order_id,
                provider: ProviderKind::ALL[0],
                page_id: "cs_1".into(),
            },
            OutboxJob::CapturePayment { order_id, payment },
            OutboxJob::RefundNotice {
                order_id,
                refund_id: 3,
            },
            OutboxJob::PaymentReturned {
                order_id,
                payment: ProviderPayment {
                    provider: ProviderKind::ALL[0],
                    payment_ref: "pi_2".into(),
                    page_id: None,
                    amount_minor: 100,
                    currency: "eur".into(),
                    status: PaymentStatus::Captured,
                    order_hint: None,
                    method: None,
                },
                reason: "hold_expired".into(),
            },
            OutboxJob::Webhook {
                endpoint_id: "ep_1".into(),
                message_id: "msg_1".into(),
            },
        ] {
            assert_eq!(OutboxJob::parse(job.kind(), &job.payload()), Ok(job));
        }
        for provider in ProviderKind::ALL {
            assert_eq!(
                refund_key(provider, "pay_1"),
                format!("refund:{provider}:pay_1")
            );
        }
        assert!(OutboxJob::parse("refund", &serde_json::json!({})).is_err());
        assert!(OutboxJob::parse("nonsense", &serde_json::json!({})).is_err());
    }
}
