//! The payment methods a Checkout Session may offer, as Stripe decides
//! them: the ones a request names (the parameter its API version has), each
//! a method Stripe has, in a currency its scheme takes; or, named none, the
//! dashboard's (for EUR, SEPA Direct Debit beside the card, a delayed
//! method: docs/design.md, "Money that takes days").

use super::objects::StripeError;

/// The payment method types the sandbox knows for Checkout, and the
/// currencies each takes (none listed: any). A bank debit takes its
/// scheme's currency only: "To support SEPA Direct Debit payments in
/// Checkout, Prices for all line items must be expressed in Euro"
/// (docs.stripe.com/payments/sepa-debit/accept-a-payment; likewise ACH
/// in USD, Bacs in GBP, BECS in AUD, pre-authorised debits in CAD or USD).
const METHODS: [(&str, &[&str]); 12] = [
    ("card", &[]),
    ("link", &[]),
    ("paypal", &[]),
    ("klarna", &[]),
    ("sepa_debit", &["eur"]),
    ("ideal", &["eur"]),
    ("bancontact", &["eur"]),
    ("eps", &["eur"]),
    ("us_bank_account", &["usd"]),
    ("bacs_debit", &["gbp"]),
    ("au_becs_debit", &["aud"]),
    ("acss_debit", &["cad", "usd"]),
];

/// A named payment method type: one Stripe has, for a currency it takes
/// (Stripe's words: "The currency provided (usd) is invalid for one or
/// more payment method types … The payment method type sepa_debit only
/// supports the following currencies: eur.").
fn check_method(method: &str, currency: &str, param: &str) -> Result<(), StripeError> {
    let Some((_, currencies)) = METHODS.iter().find(|(name, _)| *name == method) else {
        return Err(StripeError::invalid(
            format!(
                "Invalid {param}: must be one of {}",
                METHODS.map(|(name, _)| name).join(", ")
            ),
            Some(param),
        ));
    };
    if !currencies.is_empty() && !currencies.contains(&currency) {
        return Err(StripeError::invalid(
            format!(
                "The currency provided ({currency}) is invalid for one or more payment method \
                 types on this Checkout Session. The payment method type {method} only supports \
                 the following currencies: {}.",
                currencies.join(", ")
            ),
            Some(param),
        ));
    }
    Ok(())
}

/// The methods a session offers when it names none: the account's
/// dashboard choice, which for EUR includes a bank debit that settles
/// later.
pub(crate) fn dynamic_methods(currency: &str) -> Vec<String> {
    match currency {
        "eur" => vec!["card".into(), "sepa_debit".into()],
        _ => vec!["card".into()],
    }
}

/// The methods a session offers, and whether the request named them: the
/// parameter its API version has (`Stripe-Version` before 2026-09-30
/// names `payment_method_types`, after it `allowed_payment_method_types`;
/// the other is unknown), each a method Stripe has in a currency it takes;
/// none named, the dashboard's.
pub(crate) fn methods(
    legacy: bool,
    allowed: Vec<String>,
    old_name: Vec<String>,
    currency: &str,
) -> Result<(Vec<String>, bool), StripeError> {
    let (named, unknown, param, other) = if legacy {
        (
            old_name,
            allowed,
            "payment_method_types",
            "allowed_payment_method_types",
        )
    } else {
        (
            allowed,
            old_name,
            "allowed_payment_method_types",
            "payment_method_types",
        )
    };
    if !unknown.is_empty() {
        return Err(StripeError::invalid(
            format!("Received unknown parameter: {other}"),
            Some(other),
        ));
    }
    for (index, method) in named.iter().enumerate() {
        check_method(method, currency, &format!("{param}[{index}]"))?;
    }
    Ok(if named.is_empty() {
        (dynamic_methods(currency), false)
    } else {
        (named, true)
    })
}
