//! Stripe's settings, from the environment: `STRIPE_SECRET_KEY`,
//! `STRIPE_WEBHOOK_SECRET` (and `STRIPE_WEBHOOK_SECRET_PREVIOUS`),
//! `STRIPE_API_BASE`, `HOLDFAST_STRIPE_PAYMENT_METHODS`
//! (docs/configuration.md).

use crate::configuration::{Env, Secret};

/// Where Stripe is, how to sign in, and what to accept.
#[derive(Debug, Clone)]
pub struct StripeSettings {
    pub secret_key: Secret,
    /// `https://api.stripe.com/`, or the sandbox's `http://…/stripe/`.
    pub api_base: String,
    /// The endpoint's signing secrets: the current one, and during a
    /// rotation the previous one. None: every webhook is refused.
    pub webhook_secrets: Vec<Secret>,
    /// `allowed_payment_method_types` for every session. Empty (the
    /// default, as Stripe's own): the methods the Stripe dashboard enables,
    /// delayed ones included (a bank debit holds its units for days:
    /// docs/design.md, "Money that takes days").
    pub payment_methods: Vec<String>,
}

impl StripeSettings {
    /// The dashboard's methods: no `allowed_payment_method_types`.
    pub const DYNAMIC: Vec<String> = Vec::new();
}

impl StripeSettings {
    /// Stripe's settings, when `STRIPE_SECRET_KEY` is set.
    pub fn read(env: Env) -> anyhow::Result<Option<Self>> {
        let Some(key) = env.get("STRIPE_SECRET_KEY") else {
            return Ok(None);
        };
        let mut api_base = env
            .get("STRIPE_API_BASE")
            .unwrap_or_else(|| "https://api.stripe.com/".to_owned());
        if !api_base.ends_with('/') {
            api_base.push('/');
        }
        Ok(Some(Self {
            secret_key: Secret::new(key),
            webhook_secrets: env.secrets("STRIPE_WEBHOOK_SECRET"),
            api_base,
            payment_methods: payment_methods(env)?,
        }))
    }
}

/// `HOLDFAST_STRIPE_PAYMENT_METHODS`, for sessions opened with no way
/// chosen (a chosen way is its session's only method): `dynamic` (the
/// default) for whatever the dashboard enables, or a comma-separated list
/// of Stripe payment method types (`card` for instant methods only).
fn payment_methods(env: Env) -> anyhow::Result<Vec<String>> {
    let listed = env
        .get("HOLDFAST_STRIPE_PAYMENT_METHODS")
        .unwrap_or_else(|| "dynamic".into());
    if listed.trim() == "dynamic" {
        return Ok(Vec::new());
    }
    let methods: Vec<String> = listed
        .split(',')
        .map(|m| m.trim().to_owned())
        .filter(|m| !m.is_empty())
        .collect();
    if methods.is_empty()
        || methods
            .iter()
            .any(|m| !m.bytes().all(|b| b.is_ascii_lowercase() || b == b'_'))
    {
        anyhow::bail!(
            "HOLDFAST_STRIPE_PAYMENT_METHODS must be `dynamic` or payment method types like `card,link`"
        );
    }
    Ok(methods)
}
