//! Every setting, from the environment. Documented in README.md and
//! `.env.example`.

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
            url: non_empty("DATABASE_URL").map(Secret::new),
            home: non_empty("HOLDFAST_HOME")
                .map(PathBuf::from)
                .unwrap_or_else(|| PathBuf::from(".holdfast")),
            local_port: parse_or("HOLDFAST_PG_PORT", 54329)?,
            local_database: non_empty("HOLDFAST_PG_DATABASE")
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

/// The web server.
#[derive(Debug, Clone)]
pub struct ServerSettings {
    /// `HOLDFAST_ADDR` (default `127.0.0.1:8080`).
    pub addr: SocketAddr,
    /// `HOLDFAST_SWEEP_SECONDS` (default 5): how often the worker sweeps.
    pub sweep_every_seconds: u64,
}

impl ServerSettings {
    pub fn from_env() -> anyhow::Result<Self> {
        Ok(Self {
            addr: parse_or("HOLDFAST_ADDR", SocketAddr::from(([127, 0, 0, 1], 8080)))?,
            sweep_every_seconds: parse_or("HOLDFAST_SWEEP_SECONDS", 5)?,
        })
    }
}

fn non_empty(name: &str) -> Option<String> {
    std::env::var(name).ok().filter(|value| !value.is_empty())
}

fn parse_or<T>(name: &str, default: T) -> anyhow::Result<T>
where
    T: std::str::FromStr,
    T::Err: std::error::Error + Send + Sync + 'static,
{
    match non_empty(name) {
        Some(value) => value
            .parse()
            .with_context(|| format!("{name} is not valid: {value:?}")),
        None => Ok(default),
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
