//! The ways a shopper may pay (a card, UPI, net banking, SEPA Direct
//! Debit): what the shopper chooses at checkout, rather than a company.
//! Each way is served by a provider that can take it; the owner decides
//! which (the admin's Settings page, `pay_methods`), and a way the owner
//! never set is served by the first provider with keys that can. A way is
//! offered only in the currencies its scheme takes, the rule each provider
//! enforces (and the sandbox with it): Stripe's SEPA Direct Debit takes
//! euros only, Razorpay's UPI and net banking rupees only.

use serde::{Deserialize, Serialize};
use sqlx::PgPool;

use super::{ProviderKind, Providers};
use crate::audit::{self, Actor};

/// A way of paying, as the shopper picks it.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize, sqlx::Type,
)]
#[serde(rename_all = "snake_case")]
#[sqlx(type_name = "text", rename_all = "snake_case")]
pub enum PayMethod {
    Card,
    Upi,
    Netbanking,
    SepaDebit,
}

impl PayMethod {
    /// Every way, in the order the checkout lists them.
    pub const ALL: [PayMethod; 4] = [
        PayMethod::Card,
        PayMethod::Upi,
        PayMethod::Netbanking,
        PayMethod::SepaDebit,
    ];

    /// As forms, `pay_methods.method` and the providers' own words name it
    /// (Stripe's `sepa_debit`, Razorpay's `upi`, `netbanking`).
    pub fn as_str(self) -> &'static str {
        match self {
            PayMethod::Card => "card",
            PayMethod::Upi => "upi",
            PayMethod::Netbanking => "netbanking",
            PayMethod::SepaDebit => "sepa_debit",
        }
    }

    pub fn parse(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|method| method.as_str() == name)
    }

    /// How the checkout names it.
    pub fn label(self) -> &'static str {
        match self {
            PayMethod::Card => "Card",
            PayMethod::Upi => "UPI",
            PayMethod::Netbanking => "Net banking",
            PayMethod::SepaDebit => "SEPA Direct Debit",
        }
    }

    /// A few words beside it.
    pub fn hint(self) -> &'static str {
        match self {
            PayMethod::Card => "Visa, Mastercard and other cards",
            PayMethod::Upi => "From any UPI app",
            PayMethod::Netbanking => "On your bank's own pages",
            PayMethod::SepaDebit => {
                "From a euro bank account; the bank takes a few days, your order is held meanwhile"
            }
        }
    }

    /// The currencies its scheme takes (lower case); empty: any. Stripe:
    /// "To support SEPA Direct Debit payments in Checkout, Prices for all
    /// line items must be expressed in Euro"; Razorpay takes
    /// international payments "made using cards" (and "netbanking
    /// payments made from foreign banks are currently not supported"):
    /// UPI and net banking are rupees only.
    pub fn currencies(self) -> &'static [&'static str] {
        match self {
            PayMethod::Card => &[],
            PayMethod::Upi | PayMethod::Netbanking => &["inr"],
            PayMethod::SepaDebit => &["eur"],
        }
    }

    /// Whether it takes payments in `currency`.
    pub fn takes(self, currency: &str) -> bool {
        let currencies = self.currencies();
        currencies.is_empty() || currencies.contains(&currency)
    }
}

/// Whether a provider takes a way of paying at all (in some currency):
/// Stripe Checkout's `payment_method_types` `card` and `sepa_debit`;
/// Razorpay's Checkout `card`, `upi` and `netbanking`.
pub fn provider_takes(kind: ProviderKind, method: PayMethod) -> bool {
    match kind {
        ProviderKind::Stripe => matches!(method, PayMethod::Card | PayMethod::SepaDebit),
        ProviderKind::Razorpay => matches!(
            method,
            PayMethod::Card | PayMethod::Upi | PayMethod::Netbanking
        ),
    }
}

/// A provider as the owner's Settings page names it.
pub fn company(kind: ProviderKind) -> &'static str {
    match kind {
        ProviderKind::Stripe => "Stripe",
        ProviderKind::Razorpay => "Razorpay",
    }
}

impl std::fmt::Display for PayMethod {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// What the owner chose for one way: a provider, or not offered.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Choice {
    pub method: PayMethod,
    pub provider: Option<ProviderKind>,
}

/// Which provider serves each way, as the shop offers them now.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Ways {
    /// The owner's choices (a way not listed was never set).
    chosen: Vec<Choice>,
}

impl Ways {
    pub fn new(chosen: Vec<Choice>) -> Self {
        Self { chosen }
    }

    /// The provider that serves `method`, among those with keys: the
    /// owner's choice if it can, else (never set) the first that can;
    /// `None`: not offered.
    pub fn provider(&self, providers: &Providers, method: PayMethod) -> Option<ProviderKind> {
        let serves =
            |kind: ProviderKind| providers.get(kind).is_some() && provider_takes(kind, method);
        match self.chosen.iter().find(|c| c.method == method) {
            Some(choice) => choice.provider.filter(|kind| serves(*kind)),
            None => providers.kinds().into_iter().find(|kind| serves(*kind)),
        }
    }

    /// The ways a shopper may choose for a basket in `currency`, each with
    /// the provider that serves it, in the checkout's order.
    pub fn offered(&self, providers: &Providers, currency: &str) -> Vec<(PayMethod, ProviderKind)> {
        PayMethod::ALL
            .into_iter()
            .filter(|method| method.takes(currency))
            .filter_map(|method| Some((method, self.provider(providers, method)?)))
            .collect()
    }

    /// The way named `name` and the provider that serves it in this shop,
    /// for a basket in `currency`, as its owner chose; `None`: no such way,
    /// or not offered here (the checkout form's and the API's one rule).
    pub fn serving(
        &self,
        providers: &Providers,
        currency: &str,
        name: &str,
    ) -> Option<(ProviderKind, PayMethod)> {
        let method = PayMethod::parse(name)?;
        self.offered(providers, currency)
            .into_iter()
            .find(|(offered, _)| *offered == method)
            .map(|(method, kind)| (kind, method))
    }

    /// What the owner chose for `method`: `Some(None)` not offered,
    /// `None` never set.
    pub fn chosen(&self, method: PayMethod) -> Option<Option<ProviderKind>> {
        self.chosen
            .iter()
            .find(|c| c.method == method)
            .map(|c| c.provider)
    }
}

/// The owner's choices as stored.
#[derive(Debug, sqlx::FromRow)]
struct ChoiceRow {
    method: String,
    provider: Option<String>,
}

/// The owner's choices now.
pub async fn read(pool: &PgPool) -> sqlx::Result<Ways> {
    let rows: Vec<ChoiceRow> = sqlx::query_as("select method, provider from pay_methods")
        .fetch_all(pool)
        .await?;
    Ok(Ways::new(
        rows.into_iter()
            .filter_map(|row| {
                Some(Choice {
                    method: PayMethod::parse(&row.method)?,
                    provider: row.provider.as_deref().and_then(ProviderKind::parse),
                })
            })
            .collect(),
    ))
}

/// Why a choice was not saved: the provider does not take that way.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refused {
    pub method: PayMethod,
    pub reason: String,
}

/// Save the owner's choices (each way: a provider, or not offered),
/// recorded in Activity, in one transaction; a provider that does not take
/// a way, or not in the shop's currency, is refused and nothing is saved.
pub async fn save(
    pool: &PgPool,
    by: Actor<'_>,
    currency: &str,
    choices: &[Choice],
) -> sqlx::Result<Result<(), Vec<Refused>>> {
    let refused: Vec<Refused> = choices
        .iter()
        .filter_map(|choice| {
            let kind = choice.provider?;
            if !provider_takes(kind, choice.method) {
                Some(Refused {
                    method: choice.method,
                    reason: format!("{} does not take {}.", company(kind), choice.method.label()),
                })
            } else if !choice.method.takes(currency) {
                Some(Refused {
                    method: choice.method,
                    reason: format!(
                        "{} takes only {}, and the shop sells in {}.",
                        choice.method.label(),
                        choice.method.currencies().join(", ").to_uppercase(),
                        currency.to_uppercase()
                    ),
                })
            } else {
                None
            }
        })
        .collect();
    if !refused.is_empty() {
        return Ok(Err(refused));
    }
    let mut tx = pool.begin().await?;
    for choice in choices {
        sqlx::query(
            "insert into pay_methods (method, provider) values ($1, $2) \
             on conflict (method) do update set provider = excluded.provider, updated_at = now()",
        )
        .bind(choice.method.as_str())
        .bind(choice.provider.map(ProviderKind::as_str))
        .execute(&mut *tx)
        .await?;
    }
    let chosen: serde_json::Map<String, serde_json::Value> = choices
        .iter()
        .map(|c| {
            (
                c.method.as_str().to_owned(),
                serde_json::json!(c.provider.map(ProviderKind::as_str)),
            )
        })
        .collect();
    audit::commit(
        tx,
        by,
        "change_setting",
        "pay_methods",
        "saved",
        chosen.into(),
    )
    .await?;
    Ok(Ok(()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ways_read_back_and_keep_to_their_currencies() {
        for method in PayMethod::ALL {
            assert_eq!(PayMethod::parse(method.as_str()), Some(method));
            assert_eq!(
                serde_json::to_value(method).unwrap(),
                serde_json::json!(method.as_str())
            );
        }
        assert!(PayMethod::Card.takes("eur") && PayMethod::Card.takes("inr"));
        assert!(PayMethod::SepaDebit.takes("eur") && !PayMethod::SepaDebit.takes("inr"));
        assert!(PayMethod::Upi.takes("inr") && !PayMethod::Upi.takes("eur"));
        assert!(!PayMethod::Netbanking.takes("usd"));
        assert_eq!(PayMethod::parse("Card"), None);
        assert!(provider_takes(ProviderKind::Stripe, PayMethod::SepaDebit));
        assert!(!provider_takes(ProviderKind::Stripe, PayMethod::Upi));
        assert!(!provider_takes(
            ProviderKind::Razorpay,
            PayMethod::SepaDebit
        ));
    }
}
