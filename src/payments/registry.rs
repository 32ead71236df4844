//! The providers a shop offers, built from their settings: the one place
//! that knows which providers exist. A new provider is a folder beside
//! `stripe/` and `razorpay/`, a variant of [`ProviderKind`], a field here
//! and a line in [`Providers::build`] (docs/providers.md, "Adding a
//! provider").

use std::sync::Arc;
use std::time::Duration;

use super::http::{TrustedRoots, client_builder};
use super::razorpay::{RazorpayProvider, RazorpaySettings};
use super::stripe::{StripeProvider, StripeSettings};
use super::{PaymentProvider, ProviderError, ProviderKind};
use crate::configuration::Env;

/// Every provider's settings, each `None` when its keys are not set, and
/// the certificate authorities their HTTPS clients trust.
#[derive(Debug, Clone, Default)]
pub struct ProviderSettings {
    pub stripe: Option<StripeSettings>,
    pub razorpay: Option<RazorpaySettings>,
    /// `HOLDFAST_PROVIDER_CA_FILE`: authorities (PEM) trusted besides
    /// Mozilla's, for a TLS-inspecting proxy (or a test).
    pub roots: TrustedRoots,
}

impl ProviderSettings {
    /// The providers' settings from the process's environment.
    pub fn from_env() -> anyhow::Result<Self> {
        Self::read(Env::Process)
    }

    pub fn read(env: Env) -> anyhow::Result<Self> {
        let roots = match env.get("HOLDFAST_PROVIDER_CA_FILE") {
            Some(path) => TrustedRoots::with_pem_file(std::path::Path::new(&path))
                .map_err(|e| anyhow::anyhow!("HOLDFAST_PROVIDER_CA_FILE: {e:#}"))?,
            None => TrustedRoots::mozilla(),
        };
        Ok(Self {
            stripe: StripeSettings::read(env)?,
            razorpay: RazorpaySettings::read(env)?,
            roots,
        })
    }

    /// No provider has keys: the built-in sandbox stands in (where it may).
    pub fn is_empty(&self) -> bool {
        let Self {
            stripe,
            razorpay,
            roots: _,
        } = self;
        stripe.is_none() && razorpay.is_none()
    }

    /// What an operator should hear at start: a provider whose webhooks
    /// will all be refused.
    pub fn warnings(&self) -> Vec<&'static str> {
        let mut warnings = Vec::new();
        if self
            .stripe
            .as_ref()
            .is_some_and(|s| s.webhook_secrets.is_empty())
        {
            warnings.push("no STRIPE_WEBHOOK_SECRET: every Stripe webhook will be refused");
        }
        if self
            .razorpay
            .as_ref()
            .is_some_and(|s| s.webhook_secrets.is_empty())
        {
            warnings.push("no RAZORPAY_WEBHOOK_SECRET: every Razorpay webhook will be refused");
        }
        warnings
    }

    /// What to set to take real money, for an error that refuses test money.
    pub const KEYS_TO_SET: &'static str = "STRIPE_SECRET_KEY and STRIPE_WEBHOOK_SECRET, or \
        RAZORPAY_KEY_ID, RAZORPAY_KEY_SECRET and RAZORPAY_WEBHOOK_SECRET";
}

/// Point a sandbox's webhooks at the shop at `shop_base`: each provider's
/// deliveries to its `/webhooks/<provider>`.
#[cfg(feature = "sandbox")]
pub fn point_sandbox_at(sandbox: &mut holdfast_sandbox::SandboxSettings, shop_base: &str) {
    sandbox.stripe_webhook_url = Some(format!("{shop_base}/webhooks/stripe"));
    sandbox.razorpay_webhook_url = Some(format!("{shop_base}/webhooks/razorpay"));
}

/// What a developer may run beside a shop on the sandbox, one line each:
/// the official Stripe CLI's `stripe listen`, forwarding the sandbox's
/// events to the shop as it does Stripe's (docs/local-development.md).
#[cfg(feature = "sandbox")]
pub fn sandbox_hints(sandbox: &holdfast_sandbox::Sandbox, shop_base: &str) -> Vec<String> {
    vec![format!(
        "Forward Stripe's events with the official CLI, as against Stripe: {}",
        sandbox.stripe.cli_listen_command(shop_base)
    )]
}

/// The settings that point every provider at a sandbox at `base` (its
/// `/stripe/` and `/razorpay/` halves), with the sandbox's keys.
#[cfg(feature = "sandbox")]
pub fn sandbox_settings(
    sandbox: &holdfast_sandbox::SandboxSettings,
    base: &str,
    stripe_payment_methods: Vec<String>,
) -> ProviderSettings {
    use crate::configuration::Secret;
    ProviderSettings {
        stripe: Some(StripeSettings {
            secret_key: Secret::new(sandbox.stripe_secret_key.expose()),
            api_base: format!("{base}/stripe/"),
            webhook_secrets: vec![Secret::new(sandbox.stripe_webhook_secret.expose())],
            payment_methods: stripe_payment_methods,
        }),
        razorpay: Some(RazorpaySettings {
            key_id: sandbox.razorpay_key_id.clone(),
            key_secret: Secret::new(sandbox.razorpay_key_secret.expose()),
            webhook_secrets: vec![Secret::new(sandbox.razorpay_webhook_secret.expose())],
            api_base: format!("{base}/razorpay/"),
            checkout_script: format!("{base}/razorpay/checkout.js"),
        }),
        roots: TrustedRoots::mozilla(),
    }
}

/// The settings a shop on the sandbox runs with: [`sandbox_settings`], each
/// provider offering what it offers by default (Stripe the dashboard's
/// methods, so a EUR session offers SEPA Direct Debit, which settles in
/// days).
#[cfg(feature = "sandbox")]
pub fn default_sandbox_settings(
    sandbox: &holdfast_sandbox::SandboxSettings,
    base: &str,
) -> ProviderSettings {
    sandbox_settings(sandbox, base, StripeSettings::DYNAMIC)
}

/// The providers a shop offers, the default first. Cheap to clone.
#[derive(Debug, Clone, Default)]
pub struct Providers {
    offered: Vec<Arc<dyn PaymentProvider>>,
}

impl Providers {
    pub fn new(offered: Vec<Arc<dyn PaymentProvider>>) -> Self {
        Self { offered }
    }

    /// The adapter for a provider, if the shop has keys for it.
    pub fn get(&self, kind: ProviderKind) -> Option<&Arc<dyn PaymentProvider>> {
        self.offered.iter().find(|p| p.kind() == kind)
    }

    /// The providers a shopper may choose, the default first.
    pub fn kinds(&self) -> Vec<ProviderKind> {
        self.offered.iter().map(|p| p.kind()).collect()
    }

    pub fn default_kind(&self) -> Option<ProviderKind> {
        self.offered.first().map(|p| p.kind())
    }

    /// The provider that serves a checkout naming `name` (the default when
    /// it names none); `None`: the shop has no keys for the one named (or
    /// offers none). The form's, the API's and memory's one rule.
    pub fn chosen(&self, name: Option<&str>) -> Option<ProviderKind> {
        match name {
            None => self.default_kind(),
            Some(name) => ProviderKind::parse(name),
        }
        .filter(|kind| self.get(*kind).is_some())
    }

    /// The adapter for an order's provider, or an error naming it.
    pub fn for_order(
        &self,
        kind: ProviderKind,
    ) -> Result<&Arc<dyn PaymentProvider>, ProviderError> {
        self.get(kind).ok_or_else(|| {
            ProviderError::Unexpected(format!("no {kind} keys are configured on this process"))
        })
    }
}

impl Providers {
    /// The adapters for whichever providers have settings, Stripe first,
    /// each with its own HTTPS client (Holdfast's TLS setup, the settings'
    /// roots trusted).
    pub fn build(settings: &ProviderSettings) -> anyhow::Result<Self> {
        let http = |timeout: Duration| -> anyhow::Result<reqwest::Client> {
            Ok(client_builder(&settings.roots).timeout(timeout).build()?)
        };
        let mut offered: Vec<Arc<dyn PaymentProvider>> = Vec::new();
        if let Some(stripe) = &settings.stripe {
            // well under the outbox's two-minute lease, so a hung call can
            // never run concurrently with its own retry
            offered.push(Arc::new(StripeProvider::new(
                stripe,
                http(Duration::from_secs(20))?,
            )?));
        }
        if let Some(razorpay) = &settings.razorpay {
            offered.push(Arc::new(RazorpayProvider::new(
                razorpay,
                http(super::razorpay::TIMEOUT)?,
            )?));
        }
        Ok(Self::new(offered))
    }

    /// No provider is offered.
    pub fn is_empty(&self) -> bool {
        self.offered.is_empty()
    }
}
