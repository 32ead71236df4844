//! Payment providers behind one small trait. Each adapter turns Holdfast's
//! requests into its provider's wire format and back, verifies what the
//! provider sends us (webhooks, the shopper's return), and reports payments
//! in one provider-neutral shape: which page, how much, in what currency, in
//! what state. No database access here, and nothing outside this module
//! knows a provider by name: routes, the worker and reconciliation hold a
//! [`Providers`] and call the trait.

pub mod http;
pub mod methods;
pub mod razorpay;
mod registry;
pub mod signature;
pub mod stripe;
pub mod timing;

pub use registry::{ProviderSettings, Providers};
#[cfg(feature = "sandbox")]
pub use registry::{default_sandbox_settings, point_sandbox_at, sandbox_hints, sandbox_settings};

use std::fmt;

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use uuid::Uuid;

/// The providers Holdfast speaks to. Stored in `orders.provider` as text;
/// `holdfast migrate` writes [`ProviderKind::ALL`] into the constraints
/// that name them (see `crate::database::migrate`).
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize, sqlx::Type,
)]
#[serde(rename_all = "snake_case")]
#[sqlx(type_name = "text", rename_all = "snake_case")]
pub enum ProviderKind {
    Stripe,
    Razorpay,
}

impl ProviderKind {
    pub const ALL: [ProviderKind; 2] = [ProviderKind::Stripe, ProviderKind::Razorpay];

    pub fn as_str(self) -> &'static str {
        match self {
            ProviderKind::Stripe => "stripe",
            ProviderKind::Razorpay => "razorpay",
        }
    }

    /// The provider a form field, a path or a stored value names.
    pub fn parse(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|kind| kind.as_str() == name)
    }

    /// How the shopper's choice reads on the basket page.
    pub fn label(self) -> &'static str {
        match self {
            ProviderKind::Stripe => "Card (Stripe)",
            ProviderKind::Razorpay => "Razorpay (UPI, cards, netbanking)",
        }
    }
}

impl fmt::Display for ProviderKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Why a provider call failed, without anything secret in it.
#[derive(Debug, Clone, thiserror::Error)]
pub enum ProviderError {
    /// The provider refused the request (4xx): retrying the same request
    /// will not help. `code` is the provider's machine-readable reason.
    #[error("the provider refused the request ({status}): {message}")]
    Refused {
        status: u16,
        code: Option<String>,
        message: String,
    },
    /// The provider could not be reached, failed (5xx, network), or asked
    /// us to come back later (409 while a request is in flight, 429).
    #[error("the provider is unavailable: {0}")]
    Unavailable(String),
    /// The provider answered with something we cannot read, or a request
    /// we must not send.
    #[error("unexpected answer from the provider: {0}")]
    Unexpected(String),
}

impl ProviderError {
    /// Whether trying again later may succeed.
    pub fn is_transient(&self) -> bool {
        matches!(self, ProviderError::Unavailable(_))
    }

    /// The provider's reason code, when it refused.
    pub fn code(&self) -> Option<&str> {
        match self {
            ProviderError::Refused { code, .. } => code.as_deref(),
            _ => None,
        }
    }

    pub(crate) fn refused(status: u16, message: impl Into<String>) -> Self {
        ProviderError::Refused {
            status,
            code: None,
            message: message.into(),
        }
    }
}

/// Where a payment stands at its provider.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum PaymentStatus {
    /// The money is ours: the only status that can pay for an order.
    Captured,
    /// Authorised by the bank, not captured: it must be captured, or the
    /// provider gives it back by itself after a few days.
    Authorized,
    /// Committed and settling (a bank debit; a bank that has not
    /// answered and may still authorise it late), or just started: not
    /// money yet, and maybe never.
    Pending,
    /// Declined or failed: no money.
    Failed,
    /// Captured and given back.
    Refunded,
}

impl PaymentStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            PaymentStatus::Captured => "captured",
            PaymentStatus::Authorized => "authorized",
            PaymentStatus::Pending => "pending",
            PaymentStatus::Failed => "failed",
            PaymentStatus::Refunded => "refunded",
        }
    }
}

/// A payment as its provider reports it: everything the confirm routine
/// checks against the order before it sells anything.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ProviderPayment {
    pub provider: ProviderKind,
    /// The payment's id at the provider (`pi_…`, `pay_…`): what a refund
    /// names.
    pub payment_ref: String,
    /// The payment page it was made on (Checkout Session `cs_…`, Razorpay
    /// order `order_…`); `None` for a payment made without one.
    pub page_id: Option<String>,
    /// In the currency's minor unit.
    pub amount_minor: i64,
    /// ISO code, lower case.
    pub currency: String,
    pub status: PaymentStatus,
    /// The order the payment says it is for (`client_reference_id`, the
    /// order's notes). A claim, never proof: the page decides.
    pub order_hint: Option<Uuid>,
    /// The payment method, in the provider's words (`sepa_debit`, `upi`),
    /// when the provider says: for a settling payment, what names its
    /// settling window (docs/design.md, "Money that takes days").
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub method: Option<String>,
}

impl ProviderPayment {
    /// Ids a provider could have made: 1 to 255 visible ASCII characters.
    /// A signed event with anything else is ignored, never stored.
    pub fn well_formed(&self) -> bool {
        well_formed_id(&self.payment_ref)
            && self.page_id.as_deref().is_none_or(well_formed_id)
            && self.currency.len() == 3
            && self.currency.bytes().all(|b| b.is_ascii_lowercase())
            && self.amount_minor >= 0
            && self.method.as_deref().is_none_or(well_formed_method)
    }
}

/// A payment method's name as providers write them: lower-case letters,
/// digits and `_`, starting with a letter, at most 64.
pub fn well_formed_method(method: &str) -> bool {
    (1..=64).contains(&method.len())
        && method.starts_with(|c: char| c.is_ascii_lowercase())
        && method
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_')
}

/// 1 to 255 visible ASCII characters, as every provider id is.
pub fn well_formed_id(id: &str) -> bool {
    (1..=255).contains(&id.len()) && id.bytes().all(|b| b.is_ascii_graphic())
}

/// A line of a payment page.
#[derive(Debug, Clone)]
pub struct PageLine {
    pub name: String,
    pub qty: u32,
    pub unit_amount_minor: i64,
}

/// What Holdfast asks a provider for at checkout start.
#[derive(Debug, Clone)]
pub struct PageRequest {
    pub order_id: Uuid,
    pub amount_minor: i64,
    /// ISO code, lower case.
    pub currency: String,
    pub lines: Vec<PageLine>,
    pub customer_name: String,
    pub customer_email: String,
    /// Where the shopper comes back to, paid or not (our return route).
    pub return_url: String,
    /// Where the shopper goes who gives up.
    pub cancel_url: String,
    /// Our own page that opens an embedded checkout (see
    /// [`PaymentProvider::embedded_checkout`]).
    pub pay_url: String,
    /// How long the page should take payments.
    pub lifetime: std::time::Duration,
    /// The way of paying the shopper chose; `None`: whatever the provider
    /// offers.
    pub method: Option<methods::PayMethod>,
}

/// A payment page the provider opened for an order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PaymentPage {
    pub id: String,
    /// Where to send the shopper.
    pub url: String,
    /// When the page stops taking money (or when Holdfast stops waiting
    /// for it, for a provider whose pages never close).
    pub expires_at: DateTime<Utc>,
}

/// Whether a payment page can still take money.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum PageStatus {
    /// It can take (more) money.
    Open,
    /// Closed after a payment: it takes no more.
    Complete,
    /// Closed without a payment: it never will.
    Expired,
    /// The provider never closes it (a Razorpay order): money can land at
    /// any time, and is judged when it does.
    Endless,
}

/// A payment page and every payment made on it, as the provider has them.
#[derive(Debug, Clone)]
pub struct PageState {
    pub status: PageStatus,
    pub payments: Vec<ProviderPayment>,
}

/// Where a refund stands at the provider.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RefundStatus {
    /// Accepted, not finished: ask again later by its id.
    Pending,
    /// The money is on its way back.
    Succeeded,
    /// The provider gave up (or it was cancelled): a new refund is needed.
    Failed,
}

/// A refund as its provider reports it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RefundView {
    pub id: String,
    /// The payment it gives back.
    pub payment_ref: String,
    pub amount_minor: i64,
    pub status: RefundStatus,
}

/// What Holdfast asks a provider to give back.
#[derive(Debug, Clone)]
pub struct RefundRequest {
    pub payment_ref: String,
    /// `None` refunds what is left of the payment.
    pub amount_minor: Option<i64>,
    /// Derived from our refund job and its generation: letters and digits
    /// only, so every provider takes it, and the same on every retry.
    pub idempotency_key: String,
    pub order_id: Option<Uuid>,
}

/// Why a payment page closed without money.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PageEnd {
    /// It ran out of time.
    Expired,
    /// A delayed payment on it failed.
    PaymentFailed,
}

/// What a verified provider event asks of Holdfast.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ProviderEvent {
    /// A payment in some state: captured ones go to the confirm routine,
    /// authorised ones are captured first.
    Payment(ProviderPayment),
    /// A page that will never take money: its order's units go back.
    PageEnded { page_id: String, end: PageEnd },
    /// A refund moved.
    Refund(RefundView),
    /// Nothing to do beyond recording the event id.
    Ignore(&'static str),
}

/// A verified webhook delivery: its id (for the dedupe row), its type and
/// what it asks for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WebhookDelivery {
    pub event_id: String,
    pub kind: String,
    pub event: ProviderEvent,
}

/// A webhook delivery as it arrived: its headers, its raw body (read with
/// a size limit, not yet parsed), and the unix time it arrived at.
#[derive(Debug, Clone)]
pub struct WebhookRequest<'a> {
    headers: Vec<(String, String)>,
    pub body: &'a [u8],
    pub now: i64,
}

impl<'a> WebhookRequest<'a> {
    /// `headers` as (name, value) pairs; names are matched case-insensitively.
    pub fn new(headers: Vec<(String, String)>, body: &'a [u8], now: i64) -> Self {
        Self { headers, body, now }
    }

    /// The first header of that name.
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(key, _)| key.eq_ignore_ascii_case(name))
            .map(|(_, value)| value.as_str())
    }
}

/// The answer a provider expects to a delivery Holdfast accepted, where
/// Holdfast's own JSON will not do (a provider that reads a word from the
/// body, say).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Acknowledgement {
    pub content_type: &'static str,
    pub body: String,
}

/// The fields the shopper's browser brought back (query and form).
#[derive(Debug, Clone, Default)]
pub struct ReturnParams(pub Vec<(String, String)>);

impl ReturnParams {
    /// What the return route hands the provider's adapter: the query's
    /// fields, then the posted form's (Razorpay's callback posts its
    /// signed fields; a name in both is read from the query first).
    pub fn from_return(query: Vec<(String, String)>, form: Vec<(String, String)>) -> Self {
        let mut params = query;
        params.extend(form);
        Self(params)
    }

    pub fn get(&self, name: &str) -> Option<&str> {
        self.0
            .iter()
            .find(|(key, _)| key == name)
            .map(|(_, value)| value.as_str())
    }
}

/// What the shopper's return says, once verified with the provider.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ReturnReport {
    /// A payment was made (in whatever state the provider has it).
    Payment(ProviderPayment),
    /// Back without a payment (yet).
    NotPaid,
    /// The provider says the attempt failed; the shopper may try again.
    Failed { reason: String },
}

/// Why a return was not believed.
#[derive(Debug, thiserror::Error)]
pub enum ReturnError {
    /// Forged, for another page, or malformed: change nothing.
    #[error("the return could not be verified: {0}")]
    Rejected(&'static str),
    #[error(transparent)]
    Provider(#[from] ProviderError),
}

/// A checkout that runs in the provider's script on a page of ours
/// (`templates/pay.html`), rather than on the provider's own page.
#[derive(Debug, Clone)]
pub struct EmbeddedCheckout {
    pub script_url: String,
    /// The script's options, as JSON.
    pub options: serde_json::Value,
    /// Origins the page's Content Security Policy must allow.
    pub origins: Vec<String>,
}

/// What an order needs for an embedded checkout.
#[derive(Debug, Clone)]
pub struct EmbedRequest {
    pub page_id: String,
    /// Whose checkout it is: the shop's name, as its pages say it.
    pub shop_name: String,
    pub amount_minor: i64,
    pub currency: String,
    pub customer_name: String,
    pub customer_email: String,
    pub return_url: String,
    pub cancel_url: String,
    /// The way the shopper chose to pay: the checkout shows it alone.
    pub method: Option<methods::PayMethod>,
}

/// One payment provider. Stripe and Razorpay implement it; the sandbox is
/// reached through the same implementations by base URL.
#[async_trait::async_trait]
pub trait PaymentProvider: Send + Sync + fmt::Debug {
    fn kind(&self) -> ProviderKind;

    /// Open a payment page for an order. Called once per order (a form
    /// submitted twice finds the order's page instead); where the provider
    /// takes an idempotency key, one derived from the order goes with it.
    async fn open_page(&self, request: &PageRequest) -> Result<PaymentPage, ProviderError>;

    /// A page and every payment made on it: for the return path and
    /// reconciliation alike.
    async fn page(&self, page_id: &str) -> Result<PageState, ProviderError>;

    /// Capture an authorised payment for its full amount, and report it as
    /// it is now. A payment already captured is reported as it is.
    async fn capture(&self, payment: &ProviderPayment) -> Result<ProviderPayment, ProviderError>;

    /// Ask for a refund. Asked again with the same key, the provider
    /// answers about the same refund.
    async fn create_refund(&self, request: &RefundRequest) -> Result<RefundView, ProviderError>;

    /// A refund as it is now, by its id.
    async fn refund(&self, refund_id: &str) -> Result<RefundView, ProviderError>;

    /// The refunds of a payment, newest first: how a refund whose id we
    /// never stored is found again.
    async fn refunds_of(&self, payment_ref: &str) -> Result<Vec<RefundView>, ProviderError>;

    /// Stop a page from taking money. A page already closed, or one the
    /// provider cannot close, is `Ok`.
    async fn close_page(&self, page_id: &str) -> Result<(), ProviderError>;

    /// Verify a webhook delivery before reading a byte of its body (a
    /// provider whose check needs a call of its own makes it here), then
    /// read every notification it carries: one for most providers, several
    /// for one that sends them in batches. `Err` is the reason to answer
    /// 400, and nothing is changed.
    async fn verify_webhook(
        &self,
        request: &WebhookRequest<'_>,
    ) -> Result<Vec<WebhookDelivery>, String>;

    /// The answer to a delivery whose `notifications` were all taken in,
    /// if the provider wants its own; `None`: Holdfast's JSON.
    fn acknowledgement(&self, _notifications: usize) -> Option<Acknowledgement> {
        None
    }

    /// Verify what the shopper's browser brought back for `page_id` (the
    /// page we stored for the order), asking the provider where needed.
    async fn read_return(
        &self,
        page_id: &str,
        params: &ReturnParams,
    ) -> Result<ReturnReport, ReturnError>;

    /// The embedded checkout for a page, for providers that have one.
    fn embedded_checkout(&self, _order: &EmbedRequest) -> Option<EmbeddedCheckout> {
        None
    }

    /// Our script that opens the provider's embedded checkout with the
    /// options the pay page carries, when the shopper presses "Pay now"
    /// (served at `/static/pay/<provider>.js`; the page's policy allows no
    /// inline script). For providers that have an embedded checkout.
    fn embedded_opener(&self) -> Option<&'static str> {
        None
    }
}
