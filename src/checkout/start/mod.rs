//! Step one: the pending order and a hold on every line, in one
//! transaction. Nothing is held when anything is short.
//!
//! A checkout takes its lines as the shopper chose them ([`WantedLine`]:
//! a product and a [`Choice`]); each product's kind says whether it takes
//! that choice and what the line claims in the engine
//! ([`crate::catalogue::kinds::line`]). [`read`] is the one snapshot the
//! checkout judges; [`plan`] decides what can be decided from it (unknown
//! products, locked, off sale, limits per order, lines short of what is
//! left) and shapes the rest, whatever its lines claim (units, seats, a
//! party's table), as the one checkout `hf_start_checkouts` takes: the
//! checkouts waiting for the same resources (a seated event's sections
//! together) go in one call ([`super::start_batches`]); [`answer`] reads
//! what it said of each.

mod answer;
mod plan;
mod read;

use serde::Serialize;

use crate::catalogue::{Choice, Sale};
use crate::inventory::{AccountId, IdempotencyKey, ResourceId};
use crate::payments::ProviderKind;
use crate::vouchers::Voucher;

use super::short::ShortLine;
use super::{Customer, Order, OrderLine};

pub(super) use answer::{StartRow, outcome};
pub(super) use plan::{Checkout, Plan, Planned, plan};
pub use read::{CheckoutRead, ReadLine, read_checkout};

/// One line the shopper asked for: a product, and what they chose of it.
#[derive(Debug, Clone)]
pub struct WantedLine {
    pub product_id: String,
    pub choice: Choice,
}

impl WantedLine {
    /// So many units of a product.
    pub fn units(product_id: impl Into<String>, qty: crate::inventory::Quantity) -> Self {
        Self {
            product_id: product_id.into(),
            choice: Choice::units(qty),
        }
    }
}

/// A checkout as the form submits it.
#[derive(Debug, Clone)]
pub struct CheckoutStart {
    /// The form's one-time key: a second submit finds the same order.
    pub checkout_key: IdempotencyKey,
    /// The order's unguessable token ([`codes::order_token`]), made once per
    /// submit: a start run again after its commit's outcome was lost finds
    /// its own order by it, and goes on as if the first run had answered.
    pub order_token: String,
    /// The basket's owner (its cookie), for account caps.
    pub account: AccountId,
    pub lines: Vec<WantedLine>,
    pub customer: Customer,
    pub provider: ProviderKind,
    /// Who the checkout counts against (see [`crate::limits`]).
    pub limits: StartLimits,
    /// The voucher the shopper gave, found and judged valid now; its use
    /// is held with the order's units.
    pub voucher: Option<VoucherUse>,
}

/// A voucher going into a checkout: what it is, and the resources whose
/// units are its uses (the voucher's, and one buyer's when it is one use
/// per buyer).
#[derive(Debug, Clone)]
pub struct VoucherUse {
    pub voucher: Voucher,
    pub buyer: Option<ResourceId>,
}

/// A line whose sale is not open now, by the database's clock.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct OffSaleLine {
    pub product_id: String,
    pub name: String,
    pub sale: Sale,
}

/// What a checkout counts against. `Default`: nothing.
#[derive(Debug, Clone, Default)]
pub struct StartLimits {
    /// The normalised e-mail: it may hold at most a product's
    /// `max_per_order` units at once.
    pub email_key: Option<String>,
    /// The client address, and the most units of one resource it may hold
    /// at once.
    pub address: Option<(String, i32)>,
}

impl StartLimits {
    /// The limits the shop's settings put on a customer from an address.
    pub fn for_customer(
        limits: &crate::limits::Limits,
        customer: &Customer,
        address: &str,
    ) -> Self {
        Self {
            email_key: limits
                .per_email
                .then(|| crate::limits::email_key(customer.email())),
            address: limits.address_units.map(|cap| (address.to_owned(), cap)),
        }
    }
}

/// Where a checkout start ended. A refusal is said in one word
/// ([`StartOutcome::word`]): the word `hf_start_checkouts` answers, the
/// metric's label, and the code of the error table the shop and the API
/// answer with.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "status", rename_all = "snake_case")]
pub enum StartOutcome {
    /// The order is pending and every line is held: call the provider.
    Started {
        order: Order,
        lines: Vec<OrderLine>,
        /// The one resource it holds, when it holds one: its payment
        /// phase can start in a combined call ([`Checkouts::attach`]).
        resource: Option<String>,
    },
    /// The form was submitted before: this is its order.
    AlreadyStarted { order: Order },
    /// Nothing was held; these lines are short.
    SoldOut { lines: Vec<ShortLine> },
    /// The basket would take more than one shopper may hold.
    OverLimit { lines: Vec<ShortLine> },
    /// No free table (or joined set) seats a booking line's party at its
    /// time: nothing was held.
    NoTable { lines: Vec<ShortLine> },
    /// Products that do not exist (or are no longer sold).
    UnknownProducts { ids: Vec<String> },
    /// Lines whose sale is not open (not yet, or no longer): nothing held.
    NotOnSale { lines: Vec<OffSaleLine> },
    /// Hidden products, sold only with a voucher that unlocks them.
    Locked { ids: Vec<String> },
    /// The voucher's last use is taken, or this buyer used it: nothing held.
    BadVoucher { refusal: crate::vouchers::Refusal },
    /// A seat line's seats were taken meanwhile (or are unknown, or not
    /// together), with other seats offered: nothing held. Its word is its
    /// reason's.
    SeatsRefused {
        refusal: crate::catalogue::kinds::seats::choice::SeatRefusal,
    },
}

impl StartOutcome {
    /// Every word a refusal is said in, as [`StartOutcome::word`] gives
    /// them.
    pub const REFUSALS: &'static [&'static str] = &[
        "sold_out",
        "over_limit",
        "no_table",
        "unknown_products",
        "not_on_sale",
        "locked",
        "bad_voucher",
        "seats_taken",
        "unknown_seats",
        "not_together",
    ];

    /// The outcome in one word: `started`, `already_started`, or the
    /// refusal's (one of [`StartOutcome::REFUSALS`]).
    pub fn word(&self) -> &'static str {
        match self {
            StartOutcome::Started { .. } => "started",
            StartOutcome::AlreadyStarted { .. } => "already_started",
            StartOutcome::SoldOut { .. } => "sold_out",
            StartOutcome::OverLimit { .. } => "over_limit",
            StartOutcome::NoTable { .. } => "no_table",
            StartOutcome::UnknownProducts { .. } => "unknown_products",
            StartOutcome::NotOnSale { .. } => "not_on_sale",
            StartOutcome::Locked { .. } => "locked",
            StartOutcome::BadVoucher { .. } => "bad_voucher",
            StartOutcome::SeatsRefused { refusal } => refusal.reason.word(),
        }
    }
}
