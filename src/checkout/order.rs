//! Orders: where one stands, who pays, and reading them back.

use chrono::{DateTime, Utc};
use serde::Serialize;
use sqlx::PgPool;
use uuid::Uuid;

use crate::inventory::InvalidInput;
use crate::payments::ProviderKind;
use crate::payments::methods::PayMethod;

/// Where an order stands. Stored in `orders.state` as text.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, sqlx::Type)]
#[serde(rename_all = "snake_case")]
#[sqlx(type_name = "text", rename_all = "snake_case")]
pub enum OrderState {
    /// Held, waiting for its payment.
    Pending,
    /// The shopper committed to a method that settles later (a bank
    /// debit): held until the method's deadline, waiting for the money.
    Settling,
    /// Paid and fulfilled: it has its codes.
    Paid,
    /// Its holds ran out before a payment came.
    Expired,
    /// Given up (by the shopper, staff, or a failed payment page).
    Cancelled,
    /// Money came after the holds ended: it is on its way back.
    RefundPending,
    /// That money went back.
    Refunded,
}

impl OrderState {
    pub const ALL: [OrderState; 7] = [
        OrderState::Pending,
        OrderState::Settling,
        OrderState::Paid,
        OrderState::Expired,
        OrderState::Cancelled,
        OrderState::RefundPending,
        OrderState::Refunded,
    ];

    /// The state a filter or a stored value names.
    pub fn parse(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|state| state.as_str() == name)
    }

    pub fn as_str(self) -> &'static str {
        match self {
            OrderState::Pending => "pending",
            OrderState::Settling => "settling",
            OrderState::Paid => "paid",
            OrderState::Expired => "expired",
            OrderState::Cancelled => "cancelled",
            OrderState::RefundPending => "refund_pending",
            OrderState::Refunded => "refunded",
        }
    }
}

impl OrderState {
    /// The state as the owner reads it, never the engine's name for it.
    pub fn words(self) -> &'static str {
        match self {
            OrderState::Pending => "Awaiting payment",
            OrderState::Settling => "Payment on its way",
            OrderState::Paid => "Paid",
            OrderState::Expired => "Not paid in time",
            OrderState::Cancelled => "Cancelled",
            OrderState::RefundPending => "Refund on its way",
            OrderState::Refunded => "Refunded",
        }
    }
}

impl std::fmt::Display for OrderState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Who is paying.
#[derive(Debug, Clone)]
pub struct Customer {
    name: String,
    email: String,
    /// A phone to call about a booking, as typed; `None`: not given.
    phone: Option<String>,
}

impl Customer {
    pub fn parse(name: &str, email: &str) -> std::result::Result<Self, InvalidInput> {
        let name = name.trim();
        let email = email.trim();
        if name.is_empty() || name.chars().count() > 200 || name.chars().any(char::is_control) {
            return Err(InvalidInput(
                "please give a name of up to 200 characters".into(),
            ));
        }
        let plausible = email.len() <= 254
            && !email.chars().any(|c| c.is_whitespace() || c.is_control())
            && email
                .split_once('@')
                .is_some_and(|(local, domain)| !local.is_empty() && domain.contains('.'));
        if !plausible {
            return Err(InvalidInput(
                "please give an e-mail address like you@example.com".into(),
            ));
        }
        Ok(Self {
            name: name.to_owned(),
            email: email.to_owned(),
            phone: None,
        })
    }

    /// The customer with a phone, if one was typed: digits with spaces and
    /// `( ) . / -` as people write them, a `+` first, 6 to 15 digits
    /// (E.164's most), at most 30 characters; blank is none. `required`: a booking's guest must give one.
    pub fn with_phone(
        self,
        phone: Option<&str>,
        required: bool,
    ) -> std::result::Result<Self, InvalidInput> {
        let typed = phone.map(str::trim).filter(|p| !p.is_empty());
        let Some(typed) = typed else {
            if required {
                return Err(InvalidInput(
                    "please give a phone number, so the restaurant can call you about your table"
                        .into(),
                ));
            }
            return Ok(self);
        };
        // as `orders.customer_phone`'s check (0160) takes it, and a number
        let digits = typed.chars().filter(char::is_ascii_digit).count();
        let rest = typed.strip_prefix('+').unwrap_or(typed);
        let plausible = typed.len() <= 30
            && (6..=15).contains(&digits)
            && rest.starts_with(|c: char| c.is_ascii_digit())
            && rest
                .chars()
                .all(|c| c.is_ascii_digit() || " ()./-".contains(c));
        if !plausible {
            return Err(InvalidInput(
                "please give a phone number like +44 20 7946 0000".into(),
            ));
        }
        Ok(Self {
            phone: Some(typed.to_owned()),
            ..self
        })
    }

    pub fn phone(&self) -> Option<&str> {
        self.phone.as_deref()
    }

    pub fn name(&self) -> &str {
        &self.name
    }

    pub fn email(&self) -> &str {
        &self.email
    }
}

/// An order as checkout and the pages need it.
#[derive(Debug, Clone, PartialEq, Serialize, sqlx::FromRow)]
pub struct Order {
    pub id: Uuid,
    pub token: String,
    /// What a person reads out: "7F3A-91C2-E4B0" (migration 0102).
    pub number: String,
    pub state: OrderState,
    pub customer_name: String,
    pub customer_email: String,
    pub currency: String,
    pub amount_minor: i64,
    pub hold_id: Option<Uuid>,
    pub provider: ProviderKind,
    /// The provider's payment page (Checkout Session, Razorpay order).
    pub provider_session_id: Option<String>,
    pub provider_url: Option<String>,
    pub provider_expires_at: Option<DateTime<Utc>>,
    pub payment_ref: Option<String>,
    pub flag: Option<String>,
    pub created_at: DateTime<Utc>,
    pub paid_at: Option<DateTime<Utc>>,
    /// The voucher the order was started with, and what it took off.
    pub voucher_code: Option<String>,
    pub discount_minor: i64,
    /// The guest's phone, for a booking (migration 0160).
    #[sqlx(default)]
    pub customer_phone: Option<String>,
}

/// An order's line, with what the provider's line items need.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, sqlx::FromRow)]
pub struct OrderLine {
    pub product_id: String,
    pub name: String,
    pub qty: i32,
    pub unit_price_minor: i64,
    /// What was paid for the line: its price times its quantity, less its
    /// share of a voucher's discount.
    pub paid_minor: i64,
}

pub async fn order_by_id(pool: &PgPool, id: Uuid) -> sqlx::Result<Option<Order>> {
    order_by_id_in(pool, id).await
}

/// [`order_by_id`] on any executor (a webhook's transaction).
pub async fn order_by_id_in<'e>(
    executor: impl sqlx::PgExecutor<'e>,
    id: Uuid,
) -> sqlx::Result<Option<Order>> {
    sqlx::query_as("select * from orders where id = $1")
        .bind(id)
        .fetch_optional(executor)
        .await
}

pub async fn order_by_token(pool: &PgPool, token: &str) -> sqlx::Result<Option<Order>> {
    sqlx::query_as("select * from orders where token = $1")
        .bind(token)
        .fetch_optional(pool)
        .await
}

pub async fn order_by_checkout_key(pool: &PgPool, key: &str) -> sqlx::Result<Option<Order>> {
    sqlx::query_as("select * from orders where checkout_key = $1")
        .bind(key)
        .fetch_optional(pool)
        .await
}

/// The order a provider's session or order id belongs to, on any executor
/// (the Razorpay webhook asks inside its transaction).
pub async fn order_by_provider_session<'e>(
    executor: impl sqlx::PgExecutor<'e>,
    provider: ProviderKind,
    session_id: &str,
) -> sqlx::Result<Option<Order>> {
    sqlx::query_as("select * from orders where provider = $1 and provider_session_id = $2")
        .bind(provider)
        .bind(session_id)
        .fetch_optional(executor)
        .await
}

pub async fn order_lines(pool: &PgPool, order_id: Uuid) -> sqlx::Result<Vec<OrderLine>> {
    sqlx::query_as(
        "select product_id, name, qty, unit_price_minor, \
                coalesce(paid_minor, unit_price_minor * qty) as paid_minor from order_lines \
          where order_id = $1 order by product_id",
    )
    .bind(order_id)
    .fetch_all(pool)
    .await
}

/// Until when an order's units are held for its shopper (the earliest
/// moment one of its holds ends unpaid: its TTL while held, its payment
/// deadline while paying); `None` when nothing is held any more.
pub async fn held_until(pool: &PgPool, order: &Order) -> sqlx::Result<Option<DateTime<Utc>>> {
    let Some(purchase) = order.hold_id else {
        return Ok(None);
    };
    sqlx::query_scalar(
        "select min(case state when 'held' then expires_at \
                               when 'awaiting_payment' then payment_deadline end) \
           from holds \
          where purchase_id = $1 and state in ('held', 'awaiting_payment')",
    )
    .bind(purchase)
    .fetch_one(pool)
    .await
}

/// Keep the way the shopper chose to pay on the order, for the pay page
/// (migration 0105).
pub async fn keep_pay_method(pool: &PgPool, order_id: Uuid, method: PayMethod) -> sqlx::Result<()> {
    sqlx::query("update orders set pay_method = $2 where id = $1")
        .bind(order_id)
        .bind(method.as_str())
        .execute(pool)
        .await?;
    Ok(())
}

/// The way the shopper chose to pay for an order; `None`: none was chosen,
/// or one this build does not know.
pub async fn pay_method(pool: &PgPool, order_id: Uuid) -> sqlx::Result<Option<PayMethod>> {
    let kept: Option<String> = sqlx::query_scalar("select pay_method from orders where id = $1")
        .bind(order_id)
        .fetch_optional(pool)
        .await?
        .flatten();
    Ok(kept.as_deref().and_then(PayMethod::parse))
}
