//! Every setting, from the environment. Documented in
//! docs/configuration.md and `.env.example`. Each provider reads its own
//! (`crate::payments::ProviderSettings`).

use std::fmt;
use std::net::SocketAddr;
use std::path::PathBuf;

use anyhow::Context;

/// A value that must never print: not in logs, errors, pages or panics.
#[derive(Clone, PartialEq, Eq)]
pub struct Secret(String);

impl Secret {
    pub fn new(value: impl Into<String>) -> Self {
        Self(value.into())
    }

    /// The only way to read the value; grep for it to audit every use.
    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl fmt::Debug for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Secret([redacted])")
    }
}

impl fmt::Display for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("[redacted]")
    }
}

/// Where the data lives.
#[derive(Debug, Clone)]
pub struct DatabaseSettings {
    /// `DATABASE_URL`: used as is when set.
    pub url: Option<Secret>,
    /// `HOLDFAST_HOME` (default `.holdfast`): the private cluster's folder
    /// when `DATABASE_URL` is unset.
    pub home: PathBuf,
    /// `HOLDFAST_PG_PORT` (default 54329): the private cluster's port.
    pub local_port: u16,
    /// `HOLDFAST_PG_DATABASE` (default `holdfast`): the database the
    /// application uses in the private cluster.
    pub local_database: String,
}

impl DatabaseSettings {
    pub fn from_env() -> anyhow::Result<Self> {
        Ok(Self {
            url: Env::Process.get("DATABASE_URL").map(Secret::new),
            home: Env::Process
                .get("HOLDFAST_HOME")
                .map(PathBuf::from)
                .unwrap_or_else(|| PathBuf::from(".holdfast")),
            local_port: parse_or(Env::Process, "HOLDFAST_PG_PORT", 54329)?,
            local_database: Env::Process
                .get("HOLDFAST_PG_DATABASE")
                .unwrap_or_else(|| "holdfast".to_owned()),
        })
    }

    /// Override the URL (the command line's `--db`).
    pub fn with_url(mut self, url: Option<String>) -> Self {
        if let Some(url) = url.filter(|u| !u.is_empty()) {
            self.url = Some(Secret::new(url));
        }
        self
    }
}

/// The web server and the shop around it.
#[derive(Debug, Clone)]
pub struct ServerSettings {
    /// `HOLDFAST_ADDR`, else `0.0.0.0:$PORT` (the Procfile convention), else
    /// `127.0.0.1:8080`.
    pub addr: SocketAddr,
    /// `HOLDFAST_BASE_URL`: how shoppers' browsers and providers reach us
    /// (default `http://<addr>`). Success, cancel and webhook URLs use it.
    pub base_url: String,
    /// `HOLDFAST_SWEEP_SECONDS` (default 5): how often the worker sweeps and
    /// runs outbox jobs.
    pub sweep_every_seconds: u64,
    /// `HOLDFAST_SESSION_MINUTES` (default 31, 30 to 1440): how long a
    /// Stripe Checkout Session stays open. Holds in the payment phase live
    /// five minutes longer.
    pub session_minutes: i64,
    /// `HOLDFAST_RECONCILE_AFTER_SECONDS` (default 600) and
    /// `HOLDFAST_RECONCILE_SETTLE_SECONDS` (default 3600): when the worker
    /// asks a provider about a quiet payment page, and when it makes the
    /// last check of an order that has left `pending`.
    pub reconcile: ReconcileTimes,
    /// `HOLDFAST_OUTBOX_LEASE_SECONDS` (default 120, at least 2): how long
    /// a worker that took a job (a refund, say) has before another worker
    /// may take it over, if the first one died.
    pub outbox_lease_seconds: u64,
    /// `HOLDFAST_SANDBOX_ADDR` (default `127.0.0.1:8081`): where the built-in
    /// sandbox listens when no Stripe key is configured.
    pub sandbox_addr: SocketAddr,
    /// `HOLDFAST_SESSION_KEY` (at least 32 characters): signs staff session
    /// cookies. Unset, a random key is made at start (and the server says
    /// so): sessions then end on restart and do not cross servers.
    pub session_key: Option<Secret>,
    /// `HOLDFAST_ADDRESS_RATE` (`30/60s`, or `off`), `HOLDFAST_ADDRESS_UNITS`
    /// (20, or `off`), `HOLDFAST_EMAIL_LIMIT` (`on` or `off`).
    pub limits: crate::limits::Limits,
    /// `HOLDFAST_TRUSTED_PROXIES`: whose `X-Forwarded-For` is believed.
    pub trusted_proxies: crate::limits::TrustedProxies,
    /// `HOLDFAST_METRICS_TOKEN`: the bearer token `/metrics` asks for; unset,
    /// only loopback clients are answered.
    pub metrics_token: Option<Secret>,
    /// `HOLDFAST_SANDBOX=1`: run the sandbox without keys even where the
    /// public could reach the shop (a demo on purpose).
    pub sandbox_anywhere: bool,
    /// `HOLDFAST_RETENTION_DAYS` (default 30): how long baskets and orders
    /// that were never paid are kept. Paid orders are kept.
    pub retention_days: u32,
    /// `HOLDFAST_TIME_ZONE` (an IANA name, default `UTC`): the zone every
    /// time on a page is shown in, and the catalogue's times are read in.
    pub time_zone: crate::clock::ShopZone,
    /// `HOLDFAST_SMTP_URL`: the mail server (`smtps://user:password@host`);
    /// unset, the sandbox's when the sandbox stands in, else no mail.
    pub smtp_url: Option<Secret>,
    /// `HOLDFAST_MAIL_FROM` (default `Holdfast shop <shop@holdfast.localhost>`).
    pub mail_from: String,
    /// `HOLDFAST_DB_WAIT_SECONDS` (default 20, 1 to 300): how long a
    /// shopper's request waits for the database to come back (a failover)
    /// before the "one moment" page.
    pub db_wait: std::time::Duration,
    /// `HOLDFAST_SANDBOX_SMTP_ADDR` (default `127.0.0.1:2525`): where the
    /// sandbox's mail server listens.
    pub sandbox_smtp_addr: std::net::SocketAddr,
    /// `HOLDFAST_WEBHOOKS_ALLOW_PRIVATE=1`: outgoing webhooks may go to
    /// private, loopback and link-local addresses (a receiver inside the
    /// shop's own network, on purpose). Default 0: refused.
    pub webhooks_allow_private: bool,
}

impl ServerSettings {
    /// The settings from the process's environment.
    pub fn from_env() -> anyhow::Result<Self> {
        Self::read(Env::Process)
    }

    /// The defaults, for a shop on one machine (tests, `simulate`) at
    /// `base_url`, with the fairness limits off.
    pub fn local(base_url: String) -> Self {
        let mut settings = Self::read(Env::Empty).expect("the defaults are valid settings");
        settings.base_url = base_url;
        settings.limits = crate::limits::Limits::off();
        settings
    }

    fn read(env: Env) -> anyhow::Result<Self> {
        let addr = match (env.get("HOLDFAST_ADDR"), env.get("PORT")) {
            (Some(addr), _) => addr
                .parse()
                .with_context(|| format!("HOLDFAST_ADDR is not an address: {addr:?}"))?,
            (None, Some(port)) => SocketAddr::from((
                [0, 0, 0, 0],
                port.parse::<u16>()
                    .with_context(|| format!("PORT is not a port: {port:?}"))?,
            )),
            (None, None) => SocketAddr::from(([127, 0, 0, 1], 8080)),
        };
        let base_url = env
            .get("HOLDFAST_BASE_URL")
            .unwrap_or_else(|| format!("http://{addr}"))
            .trim_end_matches('/')
            .to_owned();
        let session_minutes: i64 = parse_or(env, "HOLDFAST_SESSION_MINUTES", 31)?;
        if !(30..=1440).contains(&session_minutes) {
            anyhow::bail!("HOLDFAST_SESSION_MINUTES must be 30 to 1440 (Stripe's limits)");
        }
        Ok(Self {
            addr,
            base_url,
            sweep_every_seconds: parse_or(env, "HOLDFAST_SWEEP_SECONDS", 5)?,
            session_minutes,
            outbox_lease_seconds: parse_or::<u64>(env, "HOLDFAST_OUTBOX_LEASE_SECONDS", 120)?
                .max(2),
            reconcile: ReconcileTimes {
                first_check: std::time::Duration::from_secs(parse_or(
                    env,
                    "HOLDFAST_RECONCILE_AFTER_SECONDS",
                    600,
                )?),
                settle_window: std::time::Duration::from_secs(parse_or(
                    env,
                    "HOLDFAST_RECONCILE_SETTLE_SECONDS",
                    3600,
                )?),
            },
            sandbox_addr: parse_or(
                env,
                "HOLDFAST_SANDBOX_ADDR",
                SocketAddr::from(([127, 0, 0, 1], 8081)),
            )?,
            session_key: match env.get("HOLDFAST_SESSION_KEY") {
                Some(key) if key.len() < 32 => {
                    anyhow::bail!("HOLDFAST_SESSION_KEY must have at least 32 characters")
                }
                key => key.map(Secret::new),
            },
            limits: limits(env)?,
            trusted_proxies: crate::limits::TrustedProxies::parse(
                &env.get("HOLDFAST_TRUSTED_PROXIES").unwrap_or_default(),
            )
            .map_err(|e| anyhow::anyhow!("HOLDFAST_TRUSTED_PROXIES: {e}"))?,
            metrics_token: match env.get("HOLDFAST_METRICS_TOKEN") {
                Some(token) if token.len() < 16 => {
                    anyhow::bail!("HOLDFAST_METRICS_TOKEN must have at least 16 characters")
                }
                token => token.map(Secret::new),
            },
            sandbox_anywhere: match env.get("HOLDFAST_SANDBOX").as_deref() {
                None | Some("0") => false,
                Some("1") => true,
                Some(other) => anyhow::bail!("HOLDFAST_SANDBOX is 1 or 0, not {other:?}"),
            },
            retention_days: parse_or::<u32>(env, "HOLDFAST_RETENTION_DAYS", 30)?.max(1),
            time_zone: read_time_zone(env)?,
            smtp_url: env.get("HOLDFAST_SMTP_URL").map(Secret::new),
            mail_from: env
                .get("HOLDFAST_MAIL_FROM")
                .unwrap_or_else(|| "Holdfast shop <shop@holdfast.localhost>".to_owned()),
            db_wait: match parse_or::<u64>(env, "HOLDFAST_DB_WAIT_SECONDS", 20)? {
                seconds @ 1..=300 => std::time::Duration::from_secs(seconds),
                _ => anyhow::bail!("HOLDFAST_DB_WAIT_SECONDS must be 1 to 300"),
            },
            sandbox_smtp_addr: parse_or(
                env,
                "HOLDFAST_SANDBOX_SMTP_ADDR",
                "127.0.0.1:2525".parse()?,
            )?,
            webhooks_allow_private: match env.get("HOLDFAST_WEBHOOKS_ALLOW_PRIVATE").as_deref() {
                None | Some("0") => false,
                Some("1") => true,
                Some(other) => {
                    anyhow::bail!("HOLDFAST_WEBHOOKS_ALLOW_PRIVATE is 1 or 0, not {other:?}")
                }
            },
        })
    }
}

/// The limits of a fair sale, the defaults unless the environment says
/// otherwise.
fn limits(env: Env) -> anyhow::Result<crate::limits::Limits> {
    let mut limits = crate::limits::Limits::default();
    if let Some(rate) = env.get("HOLDFAST_ADDRESS_RATE") {
        limits.address_rate = match rate.trim() {
            "off" => None,
            rate => Some(
                crate::limits::Rate::parse(rate)
                    .map_err(|e| anyhow::anyhow!("HOLDFAST_ADDRESS_RATE: {e}"))?,
            ),
        };
    }
    if let Some(units) = env.get("HOLDFAST_ADDRESS_UNITS") {
        limits.address_units = match units.trim() {
            "off" => None,
            units => Some(
                units
                    .parse::<i32>()
                    .ok()
                    .filter(|u| *u >= 1)
                    .ok_or_else(|| {
                        anyhow::anyhow!("HOLDFAST_ADDRESS_UNITS is a number of at least 1, or off")
                    })?,
            ),
        };
    }
    if let Some(on) = env.get("HOLDFAST_EMAIL_LIMIT") {
        limits.per_email = match on.trim() {
            "on" => true,
            "off" => false,
            other => anyhow::bail!("HOLDFAST_EMAIL_LIMIT is on or off, not {other:?}"),
        };
    }
    Ok(limits)
}

/// `HOLDFAST_TIME_ZONE`: the zone times are shown and read in when the
/// owner chose none on Settings ([`shop_zone`]).
pub fn time_zone() -> anyhow::Result<crate::clock::ShopZone> {
    read_time_zone(Env::Process)
}

/// The shop's zone as the commands use it (`holdfast catalogue load`,
/// `export`, `redeem`): the owner's choice on Settings, else
/// `HOLDFAST_TIME_ZONE`.
pub async fn shop_zone(pool: &sqlx::PgPool) -> anyhow::Result<crate::clock::ShopZone> {
    let default = time_zone()?;
    Ok(crate::storefront::Storefront::read(pool)
        .await?
        .zone_or(default))
}

fn read_time_zone(env: Env) -> anyhow::Result<crate::clock::ShopZone> {
    match env.get("HOLDFAST_TIME_ZONE") {
        None => Ok(crate::clock::ShopZone::UTC),
        Some(name) => crate::clock::ShopZone::parse(&name)
            .map_err(|e| anyhow::anyhow!("HOLDFAST_TIME_ZONE: {e}")),
    }
}

/// Where settings are read from: the process's environment, or nowhere
/// (every setting at its default).
#[derive(Debug, Clone, Copy)]
pub enum Env {
    Process,
    Empty,
}

impl Env {
    /// A variable that is set and not empty.
    pub fn get(self, name: &str) -> Option<String> {
        match self {
            Env::Process => std::env::var(name).ok().filter(|value| !value.is_empty()),
            Env::Empty => None,
        }
    }

    /// `NAME` and `NAME_PREVIOUS`, the secrets of a webhook during a
    /// rotation, the current one first.
    pub fn secrets(self, name: &str) -> Vec<Secret> {
        [self.get(name), self.get(&format!("{name}_PREVIOUS"))]
            .into_iter()
            .flatten()
            .map(Secret::new)
            .collect()
    }
}

fn parse_or<T>(env: Env, name: &str, default: T) -> anyhow::Result<T>
where
    T: std::str::FromStr,
    T::Err: std::error::Error + Send + Sync + 'static,
{
    match env.get(name) {
        Some(value) => value
            .parse()
            .with_context(|| format!("{name} is not valid: {value:?}")),
        None => Ok(default),
    }
}

/// When orders are checked.
#[derive(Debug, Clone, Copy)]
pub struct ReconcileTimes {
    /// How long a pending order's payment page may be quiet before we ask.
    pub first_check: std::time::Duration,
    /// How long after an order left `pending` its last check waits.
    pub settle_window: std::time::Duration,
}

impl Default for ReconcileTimes {
    fn default() -> Self {
        Self {
            first_check: std::time::Duration::from_secs(10 * 60),
            settle_window: std::time::Duration::from_secs(60 * 60),
        }
    }
}

impl ReconcileTimes {
    /// Check everything now: for `simulate`, tests and the command line.
    pub fn immediately() -> Self {
        Self {
            first_check: std::time::Duration::ZERO,
            settle_window: std::time::Duration::ZERO,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn secrets_never_print() {
        let secret = Secret::new("postgres://user:hunter2@host/db");
        assert!(!format!("{secret:?}").contains("hunter2"));
        assert!(!format!("{secret}").contains("hunter2"));
        assert_eq!(secret.expose(), "postgres://user:hunter2@host/db");
    }
}
