//! Inputs of the hold engine, parsed at the edge so deeper code never sees
//! junk: an empty id, a zero quantity, a negative TTL.

use std::fmt;
use std::time::Duration;

use serde::Serialize;
use uuid::Uuid;

/// Why an input was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct InvalidInput(pub String);

fn bounded_text(what: &str, value: &str, max: usize) -> Result<String, InvalidInput> {
    if value.is_empty() {
        return Err(InvalidInput(format!("{what} must not be empty")));
    }
    if value.chars().count() > max {
        return Err(InvalidInput(format!(
            "{what} must be at most {max} characters"
        )));
    }
    if value.chars().any(char::is_control) {
        return Err(InvalidInput(format!(
            "{what} must not contain control characters"
        )));
    }
    Ok(value.to_owned())
}

macro_rules! text_id {
    ($(#[$doc:meta])* $name:ident, $what:literal, $max:literal) => {
        $(#[$doc])*
        #[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
        #[serde(transparent)]
        pub struct $name(String);

        impl $name {
            pub fn parse(value: &str) -> Result<Self, InvalidInput> {
                bounded_text($what, value, $max).map(Self)
            }

            pub fn as_str(&self) -> &str {
                &self.0
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(&self.0)
            }
        }
    };
}

text_id!(
    /// A resource: a pickup slot, a ticket tier, a product's stock.
    ResourceId,
    "resource id",
    200
);
text_id!(
    /// Who holds: a shopper, a basket cookie, a user id.
    AccountId,
    "account id",
    200
);
text_id!(
    /// Makes a retried hold return the original.
    IdempotencyKey,
    "idempotency key",
    255
);
text_id!(
    /// The provider's id for a payment (a payment intent, a Razorpay payment).
    PaymentRef,
    "payment reference",
    255
);

/// A number of units to hold: at least one.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(transparent)]
pub struct Quantity(i32);

impl Quantity {
    pub const MAX: i64 = 1_000_000;

    pub fn parse(value: i64) -> Result<Self, InvalidInput> {
        if value <= 0 {
            return Err(InvalidInput(format!(
                "quantity must be at least 1, got {value}"
            )));
        }
        if value > Self::MAX {
            return Err(InvalidInput(format!(
                "quantity must be at most {}, got {value}",
                Self::MAX
            )));
        }
        Ok(Self(value as i32))
    }

    pub fn get(self) -> i32 {
        self.0
    }
}

/// A resource's capacity: zero or more units.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(transparent)]
pub struct Capacity(i32);

impl Capacity {
    pub fn parse(value: i64) -> Result<Self, InvalidInput> {
        if value < 0 {
            return Err(InvalidInput(format!(
                "total must be zero or more, got {value}"
            )));
        }
        i32::try_from(value)
            .map(Self)
            .map_err(|_| InvalidInput(format!("total must be at most {}", i32::MAX)))
    }

    pub fn get(self) -> i32 {
        self.0
    }
}

/// A positive length of time: a TTL, a payment window, an extension.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Span(Duration);

impl Span {
    pub fn parse(what: &str, value: Duration) -> Result<Self, InvalidInput> {
        if value.is_zero() {
            return Err(InvalidInput(format!("{what} must be positive")));
        }
        if value > Duration::from_secs(366 * 24 * 3600) {
            return Err(InvalidInput(format!("{what} must be at most a year")));
        }
        Ok(Self(value))
    }

    /// Parse text such as `15m`, `90s` or `1h 30m`.
    pub fn parse_text(what: &str, value: &str) -> Result<Self, InvalidInput> {
        let duration = humantime::parse_duration(value)
            .map_err(|e| InvalidInput(format!("{what} {value:?} is not a duration: {e}")))?;
        Self::parse(what, duration)
    }

    pub fn seconds(self) -> f64 {
        self.0.as_secs_f64()
    }

    pub fn get(self) -> Duration {
        self.0
    }
}

/// A hold's id (or a basket's: the operations accept either).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(transparent)]
pub struct HoldId(pub Uuid);

impl HoldId {
    pub fn parse(value: &str) -> Result<Self, InvalidInput> {
        Uuid::parse_str(value.trim())
            .map(Self)
            .map_err(|_| InvalidInput(format!("{value:?} is not a hold id")))
    }
}

impl fmt::Display for HoldId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.fmt(f)
    }
}

/// Where a hold is in its life.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, clap::ValueEnum)]
#[serde(rename_all = "snake_case")]
pub enum HoldState {
    Held,
    AwaitingPayment,
    Confirmed,
    Released,
    Expired,
}

impl HoldState {
    pub fn as_str(self) -> &'static str {
        match self {
            HoldState::Held => "held",
            HoldState::AwaitingPayment => "awaiting_payment",
            HoldState::Confirmed => "confirmed",
            HoldState::Released => "released",
            HoldState::Expired => "expired",
        }
    }

    pub fn from_db(value: &str) -> Option<Self> {
        Some(match value {
            "held" => HoldState::Held,
            "awaiting_payment" => HoldState::AwaitingPayment,
            "confirmed" => HoldState::Confirmed,
            "released" => HoldState::Released,
            "expired" => HoldState::Expired,
            _ => return None,
        })
    }

    /// Whether the hold still takes capacity.
    pub fn is_live(self) -> bool {
        matches!(self, HoldState::Held | HoldState::AwaitingPayment)
    }
}

impl fmt::Display for HoldState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A request to hold units of one resource.
#[derive(Debug, Clone)]
pub struct HoldRequest {
    pub resource: ResourceId,
    pub qty: Quantity,
    pub account: AccountId,
    pub idempotency_key: Option<IdempotencyKey>,
    /// Overrides the configured hold TTL for this hold.
    pub ttl: Option<Span>,
}

/// One line of a basket.
#[derive(Debug, Clone)]
pub struct BasketLine {
    pub resource: ResourceId,
    pub qty: Quantity,
}

/// A basket: at least one line, at most [`Basket::MAX_LINES`].
#[derive(Debug, Clone)]
pub struct Basket(Vec<BasketLine>);

impl Basket {
    pub const MAX_LINES: usize = 100;

    pub fn parse(lines: Vec<BasketLine>) -> Result<Self, InvalidInput> {
        if lines.is_empty() {
            return Err(InvalidInput("a basket needs at least one line".into()));
        }
        if lines.len() > Self::MAX_LINES {
            return Err(InvalidInput(format!(
                "a basket holds at most {} lines",
                Self::MAX_LINES
            )));
        }
        Ok(Self(lines))
    }

    pub fn lines(&self) -> &[BasketLine] {
        &self.0
    }
}

/// A request to hold a whole basket, all or nothing.
#[derive(Debug, Clone)]
pub struct BasketRequest {
    pub basket: Basket,
    pub account: AccountId,
    pub idempotency_key: Option<IdempotencyKey>,
    pub ttl: Option<Span>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_refuse_empty_long_and_control_text() {
        assert!(ResourceId::parse("slot-12:30").is_ok());
        assert!(ResourceId::parse("").is_err());
        assert!(ResourceId::parse(&"x".repeat(201)).is_err());
        assert!(ResourceId::parse("a\nb").is_err());
        assert!(PaymentRef::parse(&"p".repeat(255)).is_ok());
        assert!(PaymentRef::parse(&"p".repeat(256)).is_err());
    }

    #[test]
    fn quantities_are_positive_and_bounded() {
        assert!(Quantity::parse(0).is_err());
        assert!(Quantity::parse(-3).is_err());
        assert_eq!(Quantity::parse(2).unwrap().get(), 2);
        assert!(Quantity::parse(Quantity::MAX + 1).is_err());
        assert!(Capacity::parse(-1).is_err());
        assert!(Capacity::parse(0).is_ok());
        assert!(Capacity::parse(i64::from(i32::MAX) + 1).is_err());
    }

    #[test]
    fn spans_are_positive() {
        assert!(Span::parse_text("ttl", "0s").is_err());
        assert!(Span::parse_text("ttl", "soon").is_err());
        assert_eq!(Span::parse_text("ttl", "15m").unwrap().seconds(), 900.0);
    }

    #[test]
    fn baskets_are_never_empty() {
        assert!(Basket::parse(vec![]).is_err());
        let line = BasketLine {
            resource: ResourceId::parse("a").unwrap(),
            qty: Quantity::parse(1).unwrap(),
        };
        assert!(Basket::parse(vec![line.clone(); 101]).is_err());
        assert_eq!(Basket::parse(vec![line]).unwrap().lines().len(), 1);
    }

    #[test]
    fn hold_ids_parse_uuids_only() {
        assert!(HoldId::parse("not-a-uuid").is_err());
        assert!(HoldId::parse("6f1c2b8e-2f3a-4c55-9d0e-1b2c3d4e5f60").is_ok());
    }
}
