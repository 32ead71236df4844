//! Staff refunds of paid orders: the whole order, some of its units, or the
//! items staff name (these seats, that booking), with a reason. In one
//! transaction, under the order's lock: the units are given back to the
//! engine (on sale again, or off sale when staff say so), the items they
//! stop are refunded (or cancelled, when their guest cancels) and admit
//! nobody ([`items`]), the amount is
//! added to what the order has had refunded (which the database keeps at
//! or under what was paid), the refund is recorded and its outbox job
//! queued. The worker then asks the provider for that amount.
//!
//! A unit whose code was redeemed is refunded only with an override, and
//! the override is recorded.

mod checks;
mod items;

use serde::Serialize;
use serde_json::json;
use sqlx::{PgPool, Postgres, Transaction};
use uuid::Uuid;

use super::StaffMember;
use crate::audit::{self, Actor};

use crate::catalogue::ProductKind;
use crate::items::ItemState;

use crate::checkout::OrderState;
use crate::checkout::outbox::{self, OutboxJob, RefundJob};
use crate::payments::ProviderKind;
pub use checks::{check, check_picked};
pub use items::MAX_ITEMS;

/// Longest reason kept.
pub const MAX_REASON_CHARS: usize = 500;

/// What staff ask for.
#[derive(Debug, Clone)]
pub struct RefundRequest {
    pub order_id: Uuid,
    /// Units per product; empty: everything not refunded yet.
    pub units: Vec<(String, i32)>,
    pub reason: String,
    /// Put the units back on sale (otherwise they leave the resource's
    /// total: a cancelled slot).
    pub restock: bool,
    /// Refund units whose codes were already redeemed.
    pub override_redeemed: bool,
    /// Who: a staff member's e-mail, or the command line's user.
    pub by: String,
    /// The staff member, when it came from the admin: the attempt goes in
    /// the activity record, whatever outcome it had.
    pub staff: Option<StaffMember>,
    /// The form's (or command's) one-time key: the same key again is the
    /// same refund, answered again, never a second one.
    pub key: Option<String>,
}

/// Which items a refund names (none: as its units say), and whether their
/// guest cancels them (a booking before its cut-off: the items are
/// cancelled, not refunded).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Picked {
    pub items: Vec<i64>,
    pub cancels: bool,
}

/// What a refund came to.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "outcome", rename_all = "snake_case")]
pub enum RefundOutcome {
    /// Recorded and queued; the provider is asked on the worker's next pass.
    Queued {
        refund_id: i64,
        amount_minor: i64,
        currency: String,
        units: i32,
        /// Nothing of the order is left unrefunded.
        whole: bool,
    },
    /// Only a paid order can be refunded by staff.
    NotPaid {
        state: OrderState,
    },
    /// Every unit was refunded before.
    NothingLeft,
    /// A product the order does not have.
    NotInOrder {
        product_id: String,
    },
    /// More units than are left unrefunded.
    TooMany {
        product_id: String,
        asked: i32,
        left: i32,
    },
    /// These codes were redeemed: refunding them needs the override.
    Redeemed {
        codes: Vec<String>,
    },
    NotFound,
}

/// What staff have refunded of an order: the latest reason, and the sum.
pub async fn latest(pool: &PgPool, order_id: Uuid) -> sqlx::Result<Option<(String, i64)>> {
    sqlx::query_as(
        "select reason, (select sum(amount_minor) from order_refunds where order_id = $1)::int8 \
           from order_refunds where order_id = $1 order by id desc limit 1",
    )
    .bind(order_id)
    .fetch_optional(pool)
    .await
}

#[derive(sqlx::FromRow)]
struct Line {
    product_id: String,
    kind: ProductKind,
    resource_id: String,
    qty: i32,
    refunded_qty: i32,
    unit_price_minor: i64,
    /// What the line's units were paid after the order's voucher (older
    /// orders: none, the unit price throughout).
    paid_minor: Option<i64>,
}

impl Line {
    /// What `n` more of its units give back: their share of what the line
    /// was paid, never more.
    fn refund_of(&self, n: i32) -> i64 {
        let paid = self
            .paid_minor
            .unwrap_or(self.unit_price_minor * i64::from(self.qty));
        crate::vouchers::refund_share(paid, self.qty, self.refunded_qty, n)
    }
}

impl RefundOutcome {
    /// The word the activity record keeps.
    pub fn as_str(&self) -> &'static str {
        match self {
            RefundOutcome::Queued { .. } => "queued",
            RefundOutcome::NotPaid { .. } => "not_paid",
            RefundOutcome::NothingLeft => "nothing_left",
            RefundOutcome::NotInOrder { .. } => "not_in_order",
            RefundOutcome::TooMany { .. } => "too_many",
            RefundOutcome::Redeemed { .. } => "redeemed",
            RefundOutcome::NotFound => "not_found",
        }
    }
}

/// Refund (some of) a paid order. Bad input is `Err(InvalidInput)`; a
/// refusal that depends on the order is an outcome, and changes nothing
/// but the activity record (an error, which rolls everything back, leaves
/// only its log line).
pub async fn refund_order(pool: &PgPool, request: &RefundRequest) -> super::Result<RefundOutcome> {
    refund_order_as(pool, request, None).await
}

/// [`refund_order`], with the attempt recorded in Activity (in the
/// refund's own transaction, whatever outcome it had) as made by
/// `operator` when no staff member made it: an API key's refunds.
pub async fn refund_order_as(
    pool: &PgPool,
    request: &RefundRequest,
    operator: Option<&str>,
) -> super::Result<RefundOutcome> {
    refund_picked(pool, request, operator, &Picked::default()).await
}

/// [`refund_order_as`], of the items staff named (`picked.items`): each
/// item's units, and its code stopped whatever else its line holds.
pub async fn refund_picked(
    pool: &PgPool,
    request: &RefundRequest,
    operator: Option<&str>,
    picked: &Picked,
) -> super::Result<RefundOutcome> {
    check(request).map_err(super::StaffError::InvalidInput)?;
    check_picked(picked).map_err(super::StaffError::InvalidInput)?;
    let actor = match (&request.staff, operator) {
        (Some(staff), _) => Some(Actor::from(staff)),
        (None, Some(operator)) => Some(Actor::Operator(operator)),
        (None, None) => None,
    };
    let mut tx = pool.begin().await?;
    let outcome = refund_in(&mut tx, request, picked).await?;
    if let Some(actor) = actor {
        audit::record(
            &mut tx,
            actor,
            "refund_order",
            &request.order_id.to_string(),
            outcome.as_str(),
            refund_detail(request, picked, &outcome),
        )
        .await?;
    }
    tx.commit().await?;
    if let Some(actor) = actor {
        audit::log_action(
            actor,
            "refund_order",
            &request.order_id.to_string(),
            outcome.as_str(),
        );
    }
    Ok(outcome)
}

/// What Activity keeps of a refund: what was asked, and what was given
/// back when it was done.
fn refund_detail(
    request: &RefundRequest,
    picked: &Picked,
    outcome: &RefundOutcome,
) -> serde_json::Value {
    let mut detail = json!({
        "reason": request.reason.trim(),
        "units": request.units,
        "items": picked.items,
        "restock": request.restock,
        "override_redeemed": request.override_redeemed,
    });
    if let RefundOutcome::Queued {
        amount_minor,
        currency,
        ..
    } = outcome
    {
        detail["amount_minor"] = json!(amount_minor);
        detail["currency"] = json!(currency);
    }
    detail
}

pub(super) async fn refund_in(
    tx: &mut Transaction<'_, Postgres>,
    request: &RefundRequest,
    picked: &Picked,
) -> super::Result<RefundOutcome> {
    // lock: the order (a redemption holds it shared; the confirm routine
    // and refund news hold it too)
    let order: Option<Order> = sqlx::query_as(
        "select state, provider, payment_ref, amount_minor, refunded_minor, currency, hold_id \
           from orders where id = $1 for no key update",
    )
    .bind(request.order_id)
    .fetch_optional(&mut **tx)
    .await?;
    let Some(order) = order else {
        return Ok(RefundOutcome::NotFound);
    };
    let (Some(payment_ref), Some(purchase)) = (&order.payment_ref, order.hold_id) else {
        return Ok(RefundOutcome::NotPaid { state: order.state });
    };
    if let Some(earlier) = made_before(tx, request, &order).await? {
        return Ok(earlier);
    }
    if order.state != OrderState::Paid {
        return Ok(RefundOutcome::NotPaid { state: order.state });
    }
    let lines: Vec<Line> = sqlx::query_as(
        "select l.product_id, p.kind, p.resource_id, l.qty, l.refunded_qty, l.unit_price_minor, \
                l.paid_minor \
           from order_lines l join products p on p.id = l.product_id \
          where l.order_id = $1 order by p.resource_id, l.product_id",
    )
    .bind(request.order_id)
    .fetch_all(&mut **tx)
    .await?;
    let standing = items::standing(tx, request.order_id).await?;
    let mut units = request.units.clone();
    if !picked.items.is_empty() {
        let chosen = match items::units_of_chosen(&picked.items, &standing, &lines) {
            Ok(units) => units,
            Err(refused) => return Ok(refused),
        };
        // a product is named by its units or by its items, not both
        if let Some((product, _)) = chosen
            .iter()
            .find(|(p, _)| units.iter().any(|(q, _)| q == p))
        {
            return Err(super::StaffError::InvalidInput(format!(
                "{product} is named by its units and by its items: name it one way"
            )));
        }
        units.extend(chosen);
    }
    let wanted = match units_wanted(&units, &lines) {
        Ok(wanted) => wanted,
        Err(refused) => return Ok(refused),
    };
    let (stopped, redeemed) = items::to_stop(&wanted, &standing, &picked.items);
    if !redeemed.is_empty() && !request.override_redeemed {
        return Ok(RefundOutcome::Redeemed { codes: redeemed });
    }
    let units: i32 = wanted.iter().map(|(_, n)| n).sum();
    let whole = lines.iter().map(|l| l.qty - l.refunded_qty).sum::<i32>() == units;
    // the last refund gives back all that is left of the payment
    let amount_minor: i64 = if whole {
        order.amount_minor - order.refunded_minor
    } else {
        wanted.iter().map(|(l, n)| l.refund_of(*n)).sum()
    };
    if amount_minor < 0 {
        return Err(super::StaffError::Internal(format!(
            "order {} has had more refunded than it took",
            request.order_id
        )));
    }
    let refund = Refund {
        request,
        wanted,
        stopped,
        cancels: picked.cancels,
        overridden: !redeemed.is_empty(),
        whole,
        amount_minor,
    };
    refund.mark_lines_and_items(tx).await?;
    refund.give_back_units(tx, purchase).await?;
    let refund_id = refund.record(tx, &order, payment_ref).await?;
    tracing::info!(
        order = %request.order_id,
        refund = refund_id,
        amount_minor,
        units,
        restocked = request.restock,
        "staff refund queued"
    );
    Ok(RefundOutcome::Queued {
        refund_id,
        amount_minor,
        currency: order.currency,
        units,
        whole,
    })
}

/// The order a refund is for, as its lock reads it.
#[derive(sqlx::FromRow)]
struct Order {
    state: OrderState,
    provider: ProviderKind,
    payment_ref: Option<String>,
    /// What was paid.
    amount_minor: i64,
    refunded_minor: i64,
    currency: String,
    /// The purchase its holds belong to.
    hold_id: Option<Uuid>,
}

/// The same form again: the refund it made, answered again (a key sent
/// for another order is bad input).
async fn made_before(
    tx: &mut Transaction<'_, Postgres>,
    request: &RefundRequest,
    order: &Order,
) -> super::Result<Option<RefundOutcome>> {
    #[derive(sqlx::FromRow)]
    struct Earlier {
        id: i64,
        order_id: Uuid,
        amount_minor: i64,
        units: serde_json::Value,
    }
    let Some(key) = &request.key else {
        return Ok(None);
    };
    let earlier: Option<Earlier> = sqlx::query_as(
        "select id, order_id, amount_minor, units from order_refunds where request_key = $1",
    )
    .bind(key)
    .fetch_optional(&mut **tx)
    .await?;
    let Some(earlier) = earlier else {
        return Ok(None);
    };
    if earlier.order_id != request.order_id {
        return Err(super::StaffError::InvalidInput(
            "that refund form belongs to another order".into(),
        ));
    }
    let units = earlier
        .units
        .as_array()
        .map(|u| u.iter().filter_map(|u| u["qty"].as_i64()).sum::<i64>())
        .unwrap_or(0);
    Ok(Some(RefundOutcome::Queued {
        refund_id: earlier.id,
        amount_minor: earlier.amount_minor,
        currency: order.currency.clone(),
        units: units as i32,
        whole: order.state != OrderState::Paid,
    }))
}

/// How many units of each line the request refunds (every unit left, when
/// it names none), or why it cannot.
fn units_wanted<'a>(
    units: &[(String, i32)],
    lines: &'a [Line],
) -> Result<Vec<(&'a Line, i32)>, RefundOutcome> {
    for (product, _) in units {
        if !lines.iter().any(|l| &l.product_id == product) {
            return Err(RefundOutcome::NotInOrder {
                product_id: product.clone(),
            });
        }
    }
    let mut wanted: Vec<(&Line, i32)> = Vec::new();
    for line in lines {
        let left = line.qty - line.refunded_qty;
        let asked = if units.is_empty() {
            left
        } else {
            units
                .iter()
                .find(|(p, _)| p == &line.product_id)
                .map_or(0, |(_, n)| *n)
        };
        if asked > left {
            return Err(RefundOutcome::TooMany {
                product_id: line.product_id.clone(),
                asked,
                left,
            });
        }
        if asked > 0 {
            wanted.push((line, asked));
        }
    }
    if wanted.is_empty() {
        return Err(RefundOutcome::NothingLeft);
    }
    Ok(wanted)
}

/// A refund decided: what it gives back, written in the order's
/// transaction.
struct Refund<'a> {
    request: &'a RefundRequest,
    /// Units per line.
    wanted: Vec<(&'a Line, i32)>,
    /// Per line, the items that stop admitting.
    stopped: Vec<(&'a str, Vec<items::Standing>)>,
    /// Their guest cancels them: cancelled, not refunded.
    cancels: bool,
    /// Used codes are refunded, with the override.
    overridden: bool,
    /// Nothing of the order is left unrefunded.
    whole: bool,
    amount_minor: i64,
}

impl Refund<'_> {
    /// Every item stopped, by id.
    fn stopped_ids(&self) -> Vec<i64> {
        self.stopped
            .iter()
            .flat_map(|(_, items)| items.iter().map(|item| item.id))
            .collect()
    }

    /// The lines count the units refunded; the stopped items leave.
    async fn mark_lines_and_items(&self, tx: &mut Transaction<'_, Postgres>) -> sqlx::Result<()> {
        for (line, n) in &self.wanted {
            sqlx::query(
                "update order_lines set refunded_qty = refunded_qty + $3 \
                  where order_id = $1 and product_id = $2",
            )
            .bind(self.request.order_id)
            .bind(&line.product_id)
            .bind(*n)
            .execute(&mut **tx)
            .await?;
        }
        let to = if self.cancels {
            ItemState::Cancelled
        } else {
            ItemState::Refunded
        };
        items::mark(tx, &self.stopped_ids(), to).await
    }

    /// The engine, resource by resource: the units leave `sold` (back on
    /// sale, or off it with the total); a whole refund also gives back the
    /// voucher's use (and the buyer's), whatever happens to the stock.
    async fn give_back_units(
        &self,
        tx: &mut Transaction<'_, Postgres>,
        purchase: Uuid,
    ) -> super::Result<()> {
        /// A hold of the purchase, with what it still has sold.
        #[derive(sqlx::FromRow)]
        struct Sold {
            id: Uuid,
            sold: i32,
        }
        /// The uses of a voucher (or of its buyer's limit) the purchase took.
        #[derive(sqlx::FromRow)]
        struct Uses {
            resource_id: String,
            uses: i32,
        }
        let request = self.request;
        let mut walk: Vec<(&str, i32, bool)> = self
            .wanted
            .iter()
            .map(|(line, n)| (line.resource_id.as_str(), *n, request.restock))
            .collect();
        let voucher_uses: Vec<Uses> = if self.whole {
            sqlx::query_as(
                "select resource_id, sum(qty - returned)::int4 as uses from holds \
                  where purchase_id = $1 and resource_id like 'voucher:%' \
                    and state = 'confirmed' and returned < qty \
                  group by resource_id",
            )
            .bind(purchase)
            .fetch_all(&mut **tx)
            .await?
        } else {
            Vec::new()
        };
        walk.extend(
            voucher_uses
                .iter()
                .map(|u| (u.resource_id.as_str(), u.uses, true)),
        );
        // the locks first, all at once in the database's id order (its
        // collation's, as the engine takes them; Rust's byte order may differ)
        let resources: Vec<&str> = walk.iter().map(|(r, _, _)| *r).collect();
        sqlx::query("select 1 from resources where id = any($1) order by id for no key update")
            .bind(&resources)
            .execute(&mut **tx)
            .await?;
        // the stopped items' seats come back before their units do
        crate::catalogue::seats::give_back(tx, purchase, &self.stopped_ids(), request.restock)
            .await?;
        walk.sort_by(|a, b| a.0.cmp(b.0));
        let actor = format!("refund:{}", request.by);
        for (resource, n, restock) in walk {
            let mut left = n;
            let holds: Vec<Sold> = sqlx::query_as(
                "select id, qty - returned as sold from holds \
                  where purchase_id = $1 and resource_id = $2 and state = 'confirmed' \
                    and returned < qty order by id",
            )
            .bind(purchase)
            .bind(resource)
            .fetch_all(&mut **tx)
            .await?;
            for hold in holds {
                if left == 0 {
                    break;
                }
                let take = hold.sold.min(left);
                sqlx::query("select hf_return($1, $2, $3, $4, $5)")
                    .bind(hold.id)
                    .bind(take)
                    .bind(restock)
                    .bind(&actor)
                    .bind(request.reason.trim())
                    .execute(&mut **tx)
                    .await?;
                left -= take;
            }
            if left > 0 {
                return Err(super::StaffError::Internal(format!(
                    "order {} has {left} more units of {resource} than its holds sold",
                    request.order_id
                )));
            }
        }
        Ok(())
    }

    /// The order's refunded sum and state, the refund's record, and its
    /// jobs: the shopper's notice, and the provider's refund when there is
    /// money to give back. Returns the refund's id.
    async fn record(
        &self,
        tx: &mut Transaction<'_, Postgres>,
        order: &Order,
        payment_ref: &str,
    ) -> sqlx::Result<i64> {
        let request = self.request;
        // the database refuses a sum over what was paid; with nothing left,
        // the order waits for its refunds (none, when the rest was free)
        sqlx::query(
            "update orders set refunded_minor = refunded_minor + $2, \
                    state = case when not $3 then state \
                                 when $2 > 0 or exists (select 1 from outbox_jobs j \
                                                         where j.kind = 'refund' and j.state = 'pending' \
                                                           and j.payload->>'order_id' = $1::text) \
                                   then 'refund_pending' \
                                 else 'refunded' end, \
                    updated_at = now() \
              where id = $1",
        )
        .bind(request.order_id)
        .bind(self.amount_minor)
        .bind(self.whole)
        .execute(&mut **tx)
        .await?;
        let recorded_units: Vec<serde_json::Value> = self
            .wanted
            .iter()
            .zip(&self.stopped)
            .map(|((line, n), (_, items))| {
                let codes: Vec<&str> = items.iter().map(|i| i.code.as_str()).collect();
                let ids: Vec<i64> = items.iter().map(|i| i.id).collect();
                let seats: Vec<&str> = items.iter().filter_map(|i| i.seat.as_deref()).collect();
                json!({
                    "product_id": line.product_id, "qty": n, "codes": codes, "items": ids,
                    "seats": seats,
                })
            })
            .collect();
        let refund_id: i64 = sqlx::query_scalar(
            "insert into order_refunds \
                (order_id, amount_minor, units, reason, restocked, override_redeemed, refunded_by, \
                 request_key) \
             values ($1, $2, $3, $4, $5, $6, $7, $8) returning id",
        )
        .bind(request.order_id)
        .bind(self.amount_minor)
        .bind(serde_json::Value::Array(recorded_units))
        .bind(request.reason.trim())
        .bind(request.restock)
        .bind(self.overridden)
        .bind(&request.by)
        .bind(&request.key)
        .fetch_one(&mut **tx)
        .await?;
        // the shopper is told, whatever the amount
        outbox::queue(
            &mut **tx,
            &OutboxJob::RefundNotice {
                order_id: request.order_id,
                refund_id,
            },
        )
        .await?;
        // free units need no money back
        if self.amount_minor > 0 {
            outbox::queue(
                &mut **tx,
                &OutboxJob::Refund(RefundJob {
                    order_id: Some(request.order_id),
                    provider: order.provider,
                    payment_ref: payment_ref.to_owned(),
                    reason: "staff".to_owned(),
                    staff_refund: Some(refund_id),
                    amount_minor: Some(self.amount_minor),
                    paid_minor: Some(order.amount_minor),
                }),
            )
            .await?;
        }
        Ok(refund_id)
    }
}
