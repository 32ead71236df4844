//! Basket → order + holds → payment → the one confirm routine.
//!
//! docs/contract.md §3 in code, one file per step:
//!
//! - [`order`]: where an order stands, who pays, reading orders back;
//! - [`begin`]: the checkout as the shop runs it, from the form to the
//!   provider's page: the one use case the form and the API call;
//! - [`start`]: the pending order and a hold on every line, whatever it
//!   claims, in one transaction (the provider is called after the commit,
//!   outside any lock);
//! - [`short`]: when a checkout is short, the one rule memory and the read
//!   both ask;
//! - [`attach`]: the provider's page remembered and the holds moved into the
//!   payment phase, with a deadline that covers the provider's own expiry;
//! - [`start_batches`]: both steps for the checkouts of the same
//!   resources, sent together ([`Checkouts`], the shop's way in);
//! - [`release`]: units going back before payment;
//! - [`confirm`]: [`confirm_payments_in`], the only place that turns a
//!   payment into a sale, whichever path (return, webhook, reconciliation)
//!   reported it; [`free`]: its way for an order that owes nothing, which
//!   no provider sees;
//! - [`confirmations`]: the payments for one resource confirmed together
//!   ([`Confirmations`], the shop's way in);
//! - [`settling`]: a payment committed but not yet money (a bank debit)
//!   holding its units for days; `late`: the one rule for money that comes
//!   after the holds ended;
//! - [`refund`], [`settle`], [`outbox`]: what follows a payment that cannot
//!   be sold, and the typed jobs that carry it out.

pub mod attach;
pub mod basket;
mod begin;
pub mod codes;
pub mod confirm;
mod confirmations;
pub mod free;
mod issued;
mod late;
pub mod order;
pub mod outbox;
pub mod refund;
pub mod release;
mod seats_ahead;
pub mod settle;
pub mod settling;
mod short;
pub mod start;
mod start_batches;

pub use attach::{AttachOutcome, attach_payment};
pub use begin::{BeginRequest, Begun, Desk, api_lines_refused, begin, open_page};
pub use confirm::{
    Fulfilment, PaymentReport, Source, confirm_payment, confirm_payment_in, confirm_payments_in,
    payment_matches,
};
pub use confirmations::{Confirmations, Seen};
pub use free::confirm_free;
pub use issued::LineTimes;
pub use order::{
    Customer, Order, OrderLine, OrderState, order_by_checkout_key, order_by_id, order_by_id_in,
    order_by_provider_session, order_by_token, order_lines,
};
pub use release::{Release, expire_abandoned_orders, release_order, release_order_in};
pub use short::{ShortLine, Supply, Wanted, short_lines};
pub use start::{
    CheckoutRead, CheckoutStart, OffSaleLine, ReadLine, StartLimits, StartOutcome, VoucherUse,
    WantedLine, read_checkout,
};
pub use start_batches::{Checkouts, start_checkout};

use crate::inventory::{InvalidInput, InventoryError};

#[derive(Debug, thiserror::Error)]
pub enum CheckoutError {
    #[error("invalid input: {0}")]
    InvalidInput(String),
    #[error(transparent)]
    Inventory(#[from] InventoryError),
    #[error(transparent)]
    Database(#[from] sqlx::Error),
}

impl From<InvalidInput> for CheckoutError {
    fn from(error: InvalidInput) -> Self {
        CheckoutError::InvalidInput(error.0)
    }
}

pub type Result<T> = std::result::Result<T, CheckoutError>;

impl crate::retry::Retryable for CheckoutError {
    fn failure(&self) -> crate::retry::Failure {
        match self {
            CheckoutError::Database(error)
            | CheckoutError::Inventory(InventoryError::Database(error)) => error.failure(),
            _ => crate::retry::Failure::Final,
        }
    }
}
