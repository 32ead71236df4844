//! What a checkout starts from: what it needs of the shop (the [`Desk`])
//! and the form as the shopper sent it (the [`BeginRequest`]), its fields
//! as typed; the steps beside this file read them into what the engine
//! takes.

use sqlx::PgPool;

use crate::checkout::Checkouts;
use crate::checkout::basket::FormLines;
use crate::inventory::IdempotencyKey;
use crate::limits::client::Fairness;
use crate::live::LiveStock;
use crate::payments::Providers;
use crate::payments::methods::PayMethod;

/// What checking out needs of the shop: its database, its memory, its
/// limits, its combined calls and its providers, and how shoppers reach it.
#[derive(Debug, Clone, Copy)]
pub struct Desk<'a> {
    pub pool: &'a PgPool,
    pub live: &'a LiveStock,
    pub fairness: &'a Fairness,
    pub checkouts: &'a Checkouts,
    pub payments: &'a Providers,
    /// How browsers and providers reach the shop, without a trailing slash.
    pub base_url: &'a str,
    /// Life of a provider payment page.
    pub session_minutes: i64,
    /// The shop's time zone, for the dates the provider's lines say.
    pub zone: crate::clock::ShopZone,
}

/// A submitted checkout, its fields as the shopper sent them.
#[derive(Debug, Clone)]
pub struct BeginRequest {
    /// The form's one-time key: a second submit finds the same order.
    pub checkout_key: IdempotencyKey,
    /// The basket (its cookie), if the shopper has one.
    pub basket_id: Option<String>,
    pub name: String,
    pub email: String,
    /// The guest's phone, as typed: kept (and required) only when the
    /// basket holds a booking.
    pub phone: Option<String>,
    /// The way of paying the shopper chose; the shop's default when `None`.
    pub provider: Option<String>,
    /// The basket as its page showed it: lets a sold-out answer come from
    /// memory. `None`: the database answers.
    pub form_lines: Option<FormLines>,
    /// The client's address, as the limits key it.
    pub address: String,
    /// The voucher code the shopper typed (the form's `voucher` field).
    pub voucher: Option<String>,
    /// The way of paying the shopper chose (its provider is `provider`);
    /// the provider's page offers it alone.
    pub pay_method: Option<PayMethod>,
}
