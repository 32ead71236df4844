//! A fair flash sale: what one buyer and one client address may take.
//!
//! - A product's **most units per order** (`products.max_per_order`, 10 by
//!   default): the pages offer no more, the basket and checkout refuse more.
//! - **Per e-mail**: at most that many units of a product held or awaiting
//!   payment at once by one (normalised) e-mail address, whatever the
//!   basket or cookie. Decided inside the transaction that holds, under an
//!   advisory lock per e-mail, from the orders themselves.
//! - **Per client address**: at most [`Limits::address_units`] units of one
//!   resource held at once from one address (decided the same way), and a
//!   token bucket on basket adds and checkout starts
//!   ([`Limits::address_rate`]), answered 429 with `Retry-After`.
//!
//! Everything lives in PostgreSQL, so any number of web processes enforce
//! one limit. A token bucket is a row (`rate_buckets`); the takes a process
//! has waiting at one moment go as one statement that writes each bucket
//! once, without waiting for the disk (a rate limit's state need not
//! survive a crash).

pub mod client;

use std::collections::HashMap;
use std::net::IpAddr;
use std::time::{Duration, Instant};

use sqlx::PgPool;

use crate::batching::{Batch, Combiner};

/// Networks whose `X-Forwarded-For` is believed.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TrustedProxies(Vec<(IpAddr, u8)>);

impl TrustedProxies {
    /// A comma-separated list of addresses and networks (`10.0.0.0/8`,
    /// `127.0.0.1`, `fd00::/8`); empty trusts nobody.
    pub fn parse(list: &str) -> Result<Self, String> {
        let mut networks = Vec::new();
        for item in list.split(',').map(str::trim).filter(|i| !i.is_empty()) {
            let (address, bits) = match item.split_once('/') {
                Some((address, bits)) => (address, Some(bits)),
                None => (item, None),
            };
            let address: IpAddr = address
                .parse()
                .map_err(|_| format!("{item:?} is not an address or a network"))?;
            let most = if address.is_ipv4() { 32 } else { 128 };
            let bits = match bits {
                Some(bits) => bits
                    .parse::<u8>()
                    .ok()
                    .filter(|b| *b <= most)
                    .ok_or_else(|| format!("{item:?} has no valid prefix length"))?,
                None => most,
            };
            networks.push((address, bits));
        }
        Ok(Self(networks))
    }

    pub fn trusts(&self, ip: IpAddr) -> bool {
        let ip = canonical(ip);
        self.0
            .iter()
            .any(|(network, bits)| match (canonical(*network), ip) {
                (IpAddr::V4(n), IpAddr::V4(a)) => prefix_eq(&n.octets(), &a.octets(), *bits),
                (IpAddr::V6(n), IpAddr::V6(a)) => prefix_eq(&n.octets(), &a.octets(), *bits),
                _ => false,
            })
    }
}

/// An IPv4 address written as IPv6 (`::ffff:1.2.3.4`) is the IPv4 one.
pub fn canonical(ip: IpAddr) -> IpAddr {
    match ip {
        IpAddr::V6(v6) => v6
            .to_ipv4_mapped()
            .map(IpAddr::V4)
            .unwrap_or(IpAddr::V6(v6)),
        v4 => v4,
    }
}

fn prefix_eq(a: &[u8], b: &[u8], bits: u8) -> bool {
    let whole = usize::from(bits / 8);
    if a[..whole] != b[..whole] {
        return false;
    }
    let rest = bits % 8;
    rest == 0 || (a[whole] ^ b[whole]) >> (8 - rest) == 0
}

/// A token bucket: `capacity` requests at once, refilled at `per_second`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Rate {
    pub capacity: f64,
    pub per_second: f64,
}

impl Rate {
    /// `N/PERIOD` (`30/60s`, `120/1m`): N requests at once, N per period.
    pub fn parse(text: &str) -> Result<Self, String> {
        let (count, period) = text
            .split_once('/')
            .ok_or_else(|| format!("{text:?} is not a rate like 30/60s"))?;
        let count: f64 = count
            .trim()
            .parse()
            .ok()
            .filter(|c: &f64| *c >= 1.0 && c.is_finite())
            .ok_or_else(|| format!("{text:?}: the count must be a number of at least 1"))?;
        let period = humantime::parse_duration(period.trim())
            .ok()
            .filter(|p| !p.is_zero())
            .ok_or_else(|| format!("{text:?}: the period must be a duration like 60s"))?;
        Ok(Self {
            capacity: count,
            per_second: count / period.as_secs_f64(),
        })
    }
}

/// The shop's limits. `Default` is the production default.
#[derive(Debug, Clone, PartialEq)]
pub struct Limits {
    /// Basket adds and checkout starts per client address; `None`: off.
    pub address_rate: Option<Rate>,
    /// Most units of one resource held at once from one client address;
    /// `None`: off.
    pub address_units: Option<i32>,
    /// At most a product's `max_per_order` held at once per e-mail.
    pub per_email: bool,
}

impl Default for Limits {
    fn default() -> Self {
        Self {
            // a person adds a few things and checks out; a family or an
            // office behind one address does that several times over
            address_rate: Some(Rate {
                capacity: 30.0,
                per_second: 0.5,
            }),
            // two orders' worth of one product, for a shared address
            address_units: Some(20),
            per_email: true,
        }
    }
}

impl Limits {
    /// No limits at all (benchmarks that want the bare engine, tests of
    /// other things).
    pub fn off() -> Self {
        Self {
            address_rate: None,
            address_units: None,
            per_email: false,
        }
    }
}

/// An e-mail address as limits count it: lower case, without a `+tag`, and
/// for Gmail without dots, so one inbox is one buyer.
pub fn email_key(email: &str) -> String {
    let email = email.trim().to_lowercase();
    let Some((local, domain)) = email.rsplit_once('@') else {
        return email;
    };
    let local = local.split('+').next().unwrap_or(local);
    let domain = if domain == "googlemail.com" {
        "gmail.com"
    } else {
        domain
    };
    if domain == "gmail.com" {
        format!("{}@{domain}", local.replace('.', ""))
    } else {
        format!("{local}@{domain}")
    }
}

/// Requests over the rate: come back after this long.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct TooFast {
    pub retry_after: Duration,
    /// When the bucket has a token again, exactly (`retry_after` is
    /// rounded up to whole seconds for the header).
    pub token_in: Duration,
}

/// Token buckets per client address. Every take of a process waiting at
/// the same moment goes in one statement, whatever its address.
#[derive(Debug, Clone)]
pub struct RateLimiter {
    rate: Option<Rate>,
    buckets: Combiner<Buckets>,
    /// Addresses the database refused, and until when their bucket has no
    /// token: asked again before then, memory refuses (the bucket only
    /// fills with time, so the database would too) and the database is
    /// not asked.
    refused: std::sync::Arc<std::sync::Mutex<HashMap<String, Instant>>>,
    /// Takes refused from memory so far.
    refused_from_memory: std::sync::Arc<std::sync::atomic::AtomicU64>,
}

impl RateLimiter {
    pub fn new(pool: PgPool, rate: Option<Rate>) -> Self {
        Self {
            rate,
            buckets: Combiner::new(Buckets {
                pool,
                rate: rate.unwrap_or(Rate {
                    capacity: 1.0,
                    per_second: 1.0,
                }),
            }),
            refused: Default::default(),
            refused_from_memory: Default::default(),
        }
    }

    /// Takes memory refused without asking the database, so far.
    pub fn refused_from_memory(&self) -> u64 {
        self.refused_from_memory
            .load(std::sync::atomic::Ordering::Relaxed)
    }

    /// Take one token from `address`'s bucket.
    pub async fn take(&self, address: &str) -> Result<Result<(), TooFast>, sqlx::Error> {
        if self.rate.is_none() {
            return Ok(Ok(()));
        }
        let asked = Instant::now();
        let until = self
            .refused
            .lock()
            .expect("never poisoned")
            .get(address)
            .copied();
        if let Some(until) = until.filter(|until| asked < *until) {
            let token_in = until - asked;
            self.refused_from_memory
                .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            return Ok(Err(TooFast {
                retry_after: Duration::from_secs_f64(token_in.as_secs_f64().max(1.0).ceil()),
                token_in,
            }));
        }
        let taken = self.buckets.call("buckets", address.to_owned()).await;
        if let Ok(Err(too_fast)) = &taken {
            // from before the question: never later than the database's
            // own answer
            let mut refused = self.refused.lock().expect("never poisoned");
            if refused.len() >= 100_000 {
                refused.retain(|_, until| *until > asked);
            }
            refused.insert(address.to_owned(), asked + too_fast.token_in);
        }
        taken
    }
}

#[derive(Debug)]
struct Buckets {
    pool: PgPool,
    rate: Rate,
}

impl Batch for Buckets {
    /// The address.
    type Request = String;
    type Reply = Result<Result<(), TooFast>, sqlx::Error>;
    const MAX: usize = 1000;

    async fn run(&self, _: &str, addresses: Vec<String>) -> Vec<Self::Reply> {
        let taken: Result<Vec<(String, i32, i32, f64)>, sqlx::Error> = sqlx::query_as(
            "select key, wanted, granted, retry_after_seconds from hf_take_tokens($1, $2, $3)",
        )
        .bind(&addresses)
        .bind(self.rate.capacity)
        .bind(self.rate.per_second)
        .fetch_all(&self.pool)
        .await;
        match taken {
            Ok(rows) => {
                // each address's grants go to its first requests
                let mut left: std::collections::HashMap<String, (i32, f64)> = rows
                    .into_iter()
                    .map(|(key, _, granted, retry_after)| (key, (granted, retry_after)))
                    .collect();
                addresses
                    .iter()
                    .map(|address| match left.get_mut(address) {
                        Some((granted, _)) if *granted > 0 => {
                            *granted -= 1;
                            Ok(Ok(()))
                        }
                        Some((_, retry_after)) => Ok(Err(TooFast {
                            retry_after: Duration::from_secs_f64(retry_after.max(1.0).ceil()),
                            token_in: Duration::from_secs_f64(retry_after.max(0.0)),
                        })),
                        None => Self::lost(),
                    })
                    .collect()
            }
            Err(error) => {
                let shared = crate::batching::share_error(&error);
                addresses
                    .iter()
                    .map(|_| Err(crate::batching::share_error(&shared)))
                    .collect()
            }
        }
    }

    fn lost() -> Self::Reply {
        Err(sqlx::Error::Protocol(
            "the rate limit's call ended without an answer".into(),
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_inbox_is_one_buyer() {
        for (given, key) in [
            ("Ada@Example.com", "ada@example.com"),
            (" ada+sale1@example.com ", "ada@example.com"),
            ("a.d.a+x@googlemail.com", "ada@gmail.com"),
            ("A.Da@gmail.com", "ada@gmail.com"),
            ("first.last@example.com", "first.last@example.com"),
        ] {
            assert_eq!(email_key(given), key, "{given}");
        }
    }

    #[test]
    fn rates_read_as_people_write_them() {
        assert_eq!(
            Rate::parse("30/60s"),
            Ok(Rate {
                capacity: 30.0,
                per_second: 0.5
            })
        );
        assert_eq!(Rate::parse("120/1m").unwrap().per_second, 2.0);
        for bad in ["30", "0/60s", "30/0s", "x/60s", "30/soon"] {
            assert!(Rate::parse(bad).is_err(), "{bad}");
        }
    }
}
