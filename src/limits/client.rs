//! Who is asking: the client's address, as limits key it. It is the peer
//! address of the connection, unless that peer is a proxy the operator
//! trusts (`HOLDFAST_TRUSTED_PROXIES`); then `X-Forwarded-For` is read from
//! the right, past every trusted proxy. The header is never believed from
//! anyone else: a client cannot name itself someone new per request.

use std::net::{IpAddr, Ipv6Addr};

use actix_web::HttpRequest;
use sqlx::PgPool;

use crate::limits::{Limits, RateLimiter, TooFast, TrustedProxies, canonical};

/// The shop's fairness: its limits, who may say who the client is, and the
/// token buckets per address. Cheap to clone.
#[derive(Debug, Clone)]
pub struct Fairness {
    pub limits: Limits,
    pub proxies: TrustedProxies,
    rate: RateLimiter,
}

impl Fairness {
    pub fn new(pool: PgPool, limits: Limits, proxies: TrustedProxies) -> Self {
        Self {
            rate: RateLimiter::new(pool, limits.address_rate),
            limits,
            proxies,
        }
    }

    /// No limits (tests of other things, benchmarks of the bare path).
    pub fn off(pool: PgPool) -> Self {
        Self::new(pool, Limits::off(), TrustedProxies::default())
    }

    /// The client's limits key.
    pub fn address(&self, request: &HttpRequest) -> String {
        client_address(request, &self.proxies)
    }

    /// Takes refused from memory (an address asking again before its
    /// bucket has a token), so far.
    pub fn refused_from_memory(&self) -> u64 {
        self.rate.refused_from_memory()
    }

    /// One basket add or checkout start from `address`.
    pub async fn take(&self, address: &str) -> Result<Result<(), TooFast>, sqlx::Error> {
        self.rate.take(address).await
    }
}

/// The client's address: the connection's peer, or (behind a trusted
/// proxy) the nearest address in `X-Forwarded-For` that is not one.
pub fn client_ip(request: &HttpRequest, proxies: &TrustedProxies) -> Option<IpAddr> {
    let peer = canonical(request.peer_addr()?.ip());
    if !proxies.trusts(peer) {
        return Some(peer);
    }
    let forwarded: Vec<IpAddr> = request
        .headers()
        .get_all("X-Forwarded-For")
        .filter_map(|value| value.to_str().ok())
        .flat_map(|value| value.split(','))
        .map(str::trim)
        .map(|entry| entry.parse::<IpAddr>().ok().map(canonical))
        .collect::<Option<Vec<_>>>()
        .unwrap_or_default();
    // right to left: each trusted proxy says who called it
    Some(
        forwarded
            .iter()
            .rev()
            .find(|ip| !proxies.trusts(**ip))
            .or(forwarded.first())
            .copied()
            .unwrap_or(peer),
    )
}

/// The key limits count by: an IPv4 address whole, an IPv6 address by its
/// /64 (one household or one machine is given a /64, and a client could
/// otherwise take a new address for every request).
pub fn address_key(ip: IpAddr) -> String {
    match canonical(ip) {
        IpAddr::V4(v4) => v4.to_string(),
        IpAddr::V6(v6) => {
            let s = v6.segments();
            format!("{}/64", Ipv6Addr::new(s[0], s[1], s[2], s[3], 0, 0, 0, 0))
        }
    }
}

/// The client's limits key, from the request.
pub fn client_address(request: &HttpRequest, proxies: &TrustedProxies) -> String {
    client_ip(request, proxies)
        .map(address_key)
        .unwrap_or_else(|| "unknown".to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;
    use actix_web::test::TestRequest;

    fn request(peer: &str, forwarded: &[&str]) -> HttpRequest {
        let mut request = TestRequest::default().peer_addr(peer.parse().unwrap());
        for value in forwarded {
            request = request.append_header(("X-Forwarded-For", *value));
        }
        request.to_http_request()
    }

    #[test]
    fn the_header_counts_only_from_a_trusted_proxy() {
        let none = TrustedProxies::default();
        let proxy = TrustedProxies::parse("10.0.0.0/8, 127.0.0.1").unwrap();
        // nobody trusted: the peer, whatever the header says
        assert_eq!(
            client_address(&request("203.0.113.9:5000", &["198.51.100.1"]), &none),
            "203.0.113.9"
        );
        // an untrusted peer behind a trusted list: still the peer
        assert_eq!(
            client_address(&request("203.0.113.9:5000", &["198.51.100.1"]), &proxy),
            "203.0.113.9"
        );
        // behind our proxies: the nearest address that is not one of them
        assert_eq!(
            client_address(
                &request("127.0.0.1:5000", &["6.6.6.6, 198.51.100.1", "10.1.2.3"]),
                &proxy
            ),
            "198.51.100.1"
        );
        // a forged or broken header from behind the proxy: the peer
        assert_eq!(
            client_address(&request("10.0.0.5:5000", &["not an address"]), &proxy),
            "10.0.0.5"
        );
        assert_eq!(
            client_address(&request("10.0.0.5:5000", &[]), &proxy),
            "10.0.0.5"
        );
    }

    #[test]
    fn addresses_are_keyed_as_limits_count_them() {
        assert_eq!(
            address_key("::ffff:192.0.2.7".parse().unwrap()),
            "192.0.2.7"
        );
        assert_eq!(
            address_key("2001:db8:1:2:aaaa:bbbb:cccc:dddd".parse().unwrap()),
            "2001:db8:1:2::/64"
        );
        assert!(TrustedProxies::parse("10.0.0.0/33").is_err());
        assert!(TrustedProxies::parse("proxy.internal").is_err());
        assert!(
            TrustedProxies::parse("fd00::/8")
                .unwrap()
                .trusts("fd12::1".parse().unwrap())
        );
        assert!(
            !TrustedProxies::parse("10.0.0.0/8")
                .unwrap()
                .trusts("11.0.0.1".parse().unwrap())
        );
    }
}
