//! What every handler shares, built from settings in one place.

use std::sync::Arc;
use std::sync::atomic::AtomicU64;

use sqlx::PgPool;

use crate::configuration::ServerSettings;
use crate::keys::SessionKey;
use crate::payments::Providers;

/// What every handler shares.
#[derive(Debug, Clone)]
pub struct Shop {
    pub pool: PgPool,
    /// Checkout, combined per resource where it can be.
    pub checkouts: crate::checkout::Checkouts,
    /// Limits per buyer and per client address.
    pub fairness: crate::limits::client::Fairness,
    /// Payments (from returns and the worker), those for one resource
    /// confirmed together.
    pub confirmations: crate::checkout::Confirmations,
    /// Webhooks, their payments through `confirmations`.
    pub webhooks: crate::webhooks::Webhooks,
    /// Who may scrape `/metrics`, and its cached database gauges.
    pub metrics: crate::metrics::Exporter,
    /// The catalogue and its stock in memory, kept fresh by PostgreSQL:
    /// what the pages show and the sold-out refusals read.
    pub live: crate::live::LiveStock,
    /// The zone pages show times in when the owner chose none on
    /// Settings (`HOLDFAST_TIME_ZONE`); [`Shop::zone`] is the one in use.
    pub default_zone: crate::clock::ShopZone,
    /// The payment providers offered, the default first.
    pub payments: Providers,
    /// How browsers and providers reach us, without a trailing slash.
    pub base_url: String,
    /// Life of a provider payment page.
    pub session_minutes: i64,
    /// Signs staff session cookies.
    pub session_key: SessionKey,
    /// Content Security Policy violations browsers reported.
    pub csp_reports: Arc<AtomicU64>,
    /// The CSV exports this process is streaming.
    pub exports: crate::staff::exports::Exports,
    /// Webhook endpoints staff add may be on private addresses.
    pub webhooks_allow_private: bool,
    /// Waiting-list and queue joins, combined per product.
    pub joins: crate::waitlist::Joins,
    /// The waiting lines in memory, for the places their pages show.
    pub lines: crate::waitlist::Lines,
    /// The shop's name and colours in memory, for every page.
    pub storefronts: crate::storefront::Storefronts,
}

impl Shop {
    /// The shop `serve` runs, from its settings: the one place the state
    /// every handler shares is put together.
    pub fn from_settings(
        settings: &ServerSettings,
        pool: PgPool,
        payments: Providers,
        session_key: SessionKey,
    ) -> Self {
        let confirmations = crate::checkout::Confirmations::new(pool.clone());
        let live = crate::live::LiveStock::start(pool.clone());
        Self {
            checkouts: crate::checkout::Checkouts::remembering(pool.clone(), live.clone()),
            fairness: crate::limits::client::Fairness::new(
                pool.clone(),
                settings.limits.clone(),
                settings.trusted_proxies.clone(),
            ),
            webhooks: crate::webhooks::Webhooks::new(confirmations.clone()),
            confirmations,
            metrics: crate::metrics::Exporter::new(settings.metrics_token.clone()),
            live,
            joins: crate::waitlist::Joins::new(pool.clone()),
            lines: crate::waitlist::Lines::default(),
            storefronts: crate::storefront::Storefronts::default(),
            default_zone: settings.time_zone,
            pool,
            payments,
            base_url: settings.base_url.clone(),
            session_minutes: settings.session_minutes,
            session_key,
            csp_reports: Arc::default(),
            exports: crate::staff::exports::Exports::default(),
            webhooks_allow_private: settings.webhooks_allow_private,
        }
    }

    /// A shop for one machine (tests, `simulate`): [`Shop::from_settings`]
    /// with the defaults, no fairness limits and a random session key.
    pub fn local(pool: PgPool, payments: Providers, base_url: String) -> Self {
        let settings = ServerSettings::local(base_url);
        Self::from_settings(&settings, pool, payments, SessionKey::generate())
    }

    /// What checking out needs of the shop ([`crate::checkout::begin`]).
    pub fn desk(&self) -> crate::checkout::Desk<'_> {
        crate::checkout::Desk {
            pool: &self.pool,
            live: &self.live,
            fairness: &self.fairness,
            checkouts: &self.checkouts,
            payments: &self.payments,
            base_url: &self.base_url,
            session_minutes: self.session_minutes,
            zone: self.zone(),
        }
    }

    /// The zone the shop's pages show times in and read typed times in:
    /// the one the owner chose on Settings (from memory, as the request's
    /// pages see the shop), else [`Shop::default_zone`].
    pub fn zone(&self) -> crate::clock::ShopZone {
        crate::storefront::shown().zone_or(self.default_zone)
    }

    /// Cookies are marked `Secure` when the shop is served over HTTPS.
    pub fn secure_cookies(&self) -> bool {
        self.base_url.starts_with("https://")
    }
}
