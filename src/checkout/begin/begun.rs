//! Where a checkout ended, as the shop's form handler and the JSON API
//! tell it: the provider's page to go to, an order (confirmed, or found
//! again by a second submit), or why nothing was held, with the basket as
//! it was read so a page can show it again.

use crate::catalogue::Stock;
use crate::catalogue::kinds::seats::choice::SeatRefusal;
use crate::checkout::basket::BasketLine;
use crate::checkout::{OffSaleLine, Order, ShortLine};
use crate::limits::TooFast;
use crate::vouchers::Refusal;

/// Where a checkout ended, for the shopper.
#[derive(Debug)]
pub enum Begun {
    /// Everything is held and the provider's page is open: send the
    /// shopper there.
    Pay { url: String },
    /// The order owed nothing and is confirmed, with no provider: send the
    /// shopper to its page.
    Confirmed { order: Box<Order> },
    /// The form was submitted before: its order, as it is now (once its
    /// first submit has its page, or a few seconds have passed).
    Again { order: Box<Order> },
    /// There is nothing to check out.
    EmptyBasket,
    /// The name or the e-mail cannot be used; the reason says why.
    BadCustomer { reason: String },
    /// That way of paying is not offered here.
    UnknownProvider,
    /// That way of paying may settle after the order starts (a bank debit
    /// for a concert on Sunday); the reason says so. Nothing was held.
    TooSlowToPay { reason: String },
    /// The client's address is over its rate.
    TooFast(TooFast),
    /// Lines that cannot be had now; nothing was held. `basket` is the
    /// basket as it was read, `sold_out` what is pending of the sold-out
    /// products.
    SoldOut {
        lines: Vec<ShortLine>,
        basket: Vec<BasketLine>,
        sold_out: Vec<Stock>,
    },
    /// No table seats a booking line's party at its time; nothing was
    /// held.
    NoTable {
        lines: Vec<ShortLine>,
        basket: Vec<BasketLine>,
    },
    /// The basket would take more than one shopper may hold.
    OverLimit {
        lines: Vec<ShortLine>,
        basket: Vec<BasketLine>,
    },
    /// Products no longer sold were taken out of the basket.
    Withdrawn,
    /// Lines whose sale is not open (not yet, or no longer); nothing was
    /// held.
    NotOnSale {
        lines: Vec<OffSaleLine>,
        basket: Vec<BasketLine>,
    },
    /// The voucher cannot be used (named, with why); nothing was held.
    BadVoucher {
        code: String,
        refusal: Refusal,
        basket: Vec<BasketLine>,
    },
    /// Hidden products in the basket, sold only with the code that
    /// unlocks them.
    Locked {
        ids: Vec<String>,
        basket: Vec<BasketLine>,
    },
    /// A seat line's seats were taken meanwhile (or are unknown, or not
    /// together), with others offered; nothing was held.
    SeatsRefused {
        refusal: SeatRefusal,
        basket: Vec<BasketLine>,
    },
    /// The provider could not open a page: the units went back.
    ProviderFailed,
    /// The page opened but the payment phase could not start: the units
    /// went back.
    PaymentPhaseFailed,
    /// The hold ran out before the payment page opened: the units went back.
    RanOut,
}
