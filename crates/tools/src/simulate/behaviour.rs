//! Who the shoppers are: the behaviours a seed draws from (paying, leaving,
//! losing a webhook or the way back, money that takes days, a staff
//! refund …), their mix out of 100, and what each asks of the sandbox's
//! webhooks and of the way back to the shop.

use rand::Rng;
use rand::rngs::StdRng;
use serde::Serialize;

use holdfast_sandbox::DeliveryMode;

/// What a shopper does, drawn from the seed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Behaviour {
    Pay,
    DeclineThenLeave,
    DeclineThenPay,
    Abandon,
    WalkAway,
    PayTwice,
    PayAfterExpiry,
    WebhookLost,
    ReturnLost,
    BothLost,
    WebhookDuplicated,
    WebhookReordered,
    WebhookLate,
    /// The bank authorises the payment after the provider's capture
    /// window (Razorpay): it stays authorised until the shop captures it.
    /// (Stripe's Checkout captures at once: a plain payment there.)
    AuthorizeOnly,
    /// Pays twice; the refund of the second payment stays pending at the
    /// provider until closing time.
    PendingRefund,
    /// Someone pays 1.00 on another payment page that names this order
    /// (a payment link opened with its id); then the shopper pays.
    AnotherPage,
    /// A payment of 1.00 lands on the order's own Razorpay order (on
    /// Stripe, on another page); then the shopper pays in full.
    UnderPayment,
    /// Pays (its webhook late); then staff refund one unit, then the rest,
    /// while the webhook may still be on its way.
    StaffRefund,
    /// Money that takes days, and comes in time: Stripe, a SEPA Direct
    /// Debit that settles while its units are held; Razorpay, a bank that
    /// did not answer and authorises later.
    DebitSettles,
    /// The bank says no (Stripe: the debit fails; Razorpay: the bank never
    /// answers).
    DebitFails,
    /// The money comes after the order's settling deadline and grace:
    /// claimed again if its units are free, else refunded (or, an
    /// authorisation nobody captures, returned by Razorpay).
    DebitLate,
}

/// Out of 100.
const MIX: [(Behaviour, u32); 21] = [
    (Behaviour::Pay, 9),
    (Behaviour::DeclineThenLeave, 5),
    (Behaviour::DeclineThenPay, 5),
    (Behaviour::Abandon, 5),
    (Behaviour::WalkAway, 6),
    (Behaviour::PayTwice, 5),
    (Behaviour::PayAfterExpiry, 5),
    (Behaviour::WebhookLost, 5),
    (Behaviour::ReturnLost, 5),
    (Behaviour::BothLost, 7),
    (Behaviour::WebhookDuplicated, 5),
    (Behaviour::WebhookReordered, 5),
    (Behaviour::WebhookLate, 3),
    (Behaviour::AuthorizeOnly, 5),
    (Behaviour::PendingRefund, 3),
    (Behaviour::AnotherPage, 4),
    (Behaviour::UnderPayment, 4),
    (Behaviour::StaffRefund, 4),
    (Behaviour::DebitSettles, 4),
    (Behaviour::DebitFails, 3),
    (Behaviour::DebitLate, 3),
];

impl Behaviour {
    pub(super) fn draw(rng: &mut StdRng) -> Self {
        let mut n = rng.gen_range(0..100);
        for (behaviour, weight) in MIX {
            if n < weight {
                return behaviour;
            }
            n -= weight;
        }
        Behaviour::Pay
    }

    pub(super) fn delivery(self) -> DeliveryMode {
        match self {
            // a late debit's shop hears of it only from reconciliation
            Behaviour::WebhookLost | Behaviour::BothLost | Behaviour::DebitLate => {
                DeliveryMode::Never
            }
            Behaviour::WebhookDuplicated => DeliveryMode::Twice,
            Behaviour::WebhookReordered => DeliveryMode::Reorder,
            Behaviour::WebhookLate | Behaviour::StaffRefund => DeliveryMode::Late,
            _ => DeliveryMode::Normal,
        }
    }

    pub(super) fn follows_return(self) -> bool {
        !matches!(
            self,
            Behaviour::ReturnLost | Behaviour::BothLost | Behaviour::DebitLate
        )
    }
}
