//! Razorpay's settings, from the environment: `RAZORPAY_KEY_ID`,
//! `RAZORPAY_KEY_SECRET`, `RAZORPAY_WEBHOOK_SECRET` (and
//! `RAZORPAY_WEBHOOK_SECRET_PREVIOUS`), `RAZORPAY_API_BASE`,
//! `RAZORPAY_CHECKOUT_SCRIPT` (docs/configuration.md).

use crate::configuration::{Env, Secret};

/// Where Razorpay is and how to sign in.
#[derive(Debug, Clone)]
pub struct RazorpaySettings {
    pub key_id: String,
    pub key_secret: Secret,
    /// The webhook's secrets: the current one and, while a rotation's old
    /// events are still being retried, the previous one.
    pub webhook_secrets: Vec<Secret>,
    /// `https://api.razorpay.com/`, or the sandbox's `http://…/razorpay/`.
    pub api_base: String,
    /// Razorpay's checkout script (or the sandbox's stand-in).
    pub checkout_script: String,
}

impl RazorpaySettings {
    /// Razorpay's settings, when its key id and secret are both set.
    pub fn read(env: Env) -> anyhow::Result<Option<Self>> {
        match (env.get("RAZORPAY_KEY_ID"), env.get("RAZORPAY_KEY_SECRET")) {
            (Some(key_id), Some(secret)) => Ok(Some(Self {
                key_id,
                key_secret: Secret::new(secret),
                webhook_secrets: env.secrets("RAZORPAY_WEBHOOK_SECRET"),
                api_base: env
                    .get("RAZORPAY_API_BASE")
                    .unwrap_or_else(|| "https://api.razorpay.com/".to_owned()),
                checkout_script: env
                    .get("RAZORPAY_CHECKOUT_SCRIPT")
                    .unwrap_or_else(|| "https://checkout.razorpay.com/v1/checkout.js".to_owned()),
            })),
            (None, None) => Ok(None),
            _ => anyhow::bail!("set both RAZORPAY_KEY_ID and RAZORPAY_KEY_SECRET, or neither"),
        }
    }
}
