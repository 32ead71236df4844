//! The ledger a simulation ends with: what the providers hold against what
//! the shop did, unit counts per resource, what reconciliation found, and
//! every broken promise as a violation; and the ledger as text for people.
//! `account.rs` fills it.

use std::collections::BTreeMap;

use serde::Serialize;

use holdfast::worker::reconcile::ReconcileReport;

/// The ledger: what the providers hold against what the shop did.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct SimLedger {
    pub seed: u64,
    pub shoppers: usize,
    pub providers: Vec<String>,
    pub behaviours: BTreeMap<String, u64>,
    /// Checkouts that got a payment page, and ones refused (sold out).
    pub checkouts_started: u64,
    pub checkouts_refused: u64,
    /// Money taken at the providers.
    pub charges: u64,
    pub charged_minor: i64,
    /// Orders paid and fulfilled (codes issued).
    pub fulfilled_orders: u64,
    pub fulfilled_minor: i64,
    pub refunds: u64,
    pub refunded_minor: i64,
    /// Fulfilled orders staff then refunded (some units or all), and the
    /// provider refunds that gave that money back (not in `refunds`).
    pub staff_refunded_orders: u64,
    pub staff_refunds: u64,
    pub staff_refunded_minor: i64,
    pub orders_by_state: BTreeMap<String, u64>,
    pub resources: Vec<ResourceLine>,
    /// Holds still active after closing time and a sweep (must be none).
    pub leaked_holds: u64,
    pub drifted_resources: u64,
    /// Refund jobs the outbox has not finished.
    pub pending_refund_jobs: u64,
    /// What reconciliation found that no webhook or return had brought.
    pub reconciliation: ReconcileReport,
    /// Orders whose payment settled over days (held in the settling phase).
    pub settled_orders: u64,
    /// Money after the holds ended, by what the one rule decided.
    pub late_money: BTreeMap<String, u64>,
    pub violations: Vec<String>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ResourceLine {
    pub resource: String,
    pub total: i32,
    pub sold: i32,
    /// Units on fulfilled orders' lines.
    pub sold_on_orders: i64,
    pub held: i32,
}

impl SimLedger {
    /// The ledger for people.
    pub fn text(&self) -> String {
        let mut out = format!(
            "simulation: {} shoppers, seed {}, providers {}\n",
            self.shoppers,
            self.seed,
            self.providers.join("+")
        );
        out.push_str(&format!(
            "checkouts: {} reached a payment page, {} refused (sold out)\n",
            self.checkouts_started, self.checkouts_refused
        ));
        out.push_str(&format!(
            "money: {} charges ({} minor units); {} orders fulfilled ({}); {} refunds ({})\n",
            self.charges,
            self.charged_minor,
            self.fulfilled_orders,
            self.fulfilled_minor,
            self.refunds,
            self.refunded_minor
        ));
        out.push_str(&format!(
            "staff refunds: {} orders, {} refunds ({})\n",
            self.staff_refunded_orders, self.staff_refunds, self.staff_refunded_minor
        ));
        out.push_str("units:\n");
        for r in &self.resources {
            out.push_str(&format!(
                "  {:<18} total {:>6}  sold {:>6}  on fulfilled orders {:>6}  held {}\n",
                r.resource, r.total, r.sold, r.sold_on_orders, r.held
            ));
        }
        out.push_str(&format!(
            "orders: {}\n",
            self.orders_by_state
                .iter()
                .map(|(state, n)| format!("{state} {n}"))
                .collect::<Vec<_>>()
                .join(", ")
        ));
        out.push_str(&format!(
            "behaviours: {}\n",
            self.behaviours
                .iter()
                .map(|(b, n)| format!("{b} {n}"))
                .collect::<Vec<_>>()
                .join(", ")
        ));
        out.push_str(&format!(
            "reconciliation: {} checks, {} fulfilled, {} refunds queued, {} released\n",
            self.reconciliation.checked,
            self.reconciliation.fulfilled,
            self.reconciliation.refunds_queued,
            self.reconciliation.released
        ));
        out.push_str(&format!(
            "money that takes days: {} orders settled over days ({} found by reconciliation); late money: {}\n",
            self.settled_orders,
            self.reconciliation.settling,
            if self.late_money.is_empty() {
                "none".to_owned()
            } else {
                self.late_money
                    .iter()
                    .map(|(verdict, n)| format!("{verdict} {n}"))
                    .collect::<Vec<_>>()
                    .join(", ")
            }
        ));
        out.push_str(&format!(
            "leaked holds: {}; drifted resources: {}; refund jobs pending: {}\n",
            self.leaked_holds, self.drifted_resources, self.pending_refund_jobs
        ));
        if self.violations.is_empty() {
            out.push_str("violations: none\n");
        } else {
            out.push_str(&format!("violations: {}\n", self.violations.len()));
            for v in self.violations.iter().take(50) {
                out.push_str(&format!("  - {v}\n"));
            }
        }
        out
    }
}
