//! Where a webhook may go. A URL typed in the admin must not become a way
//! to call into the shop's own network: an endpoint whose host is, or
//! resolves to, a loopback, private, link-local, shared (CGNAT), unique
//! local or otherwise non-public address is refused unless the operator
//! allowed private addresses (`HOLDFAST_WEBHOOKS_ALLOW_PRIVATE`, or
//! `holdfast webhooks add --allow-private` for one endpoint). The check is
//! made when the endpoint is added and again at every delivery, by the
//! resolver the delivering client connects through ([`PublicOnly`]), so a
//! name that resolved to a public address yesterday and to 127.0.0.1 now
//! (DNS rebinding) is refused at the moment it would be called.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};

/// Whether an address is one the public internet can reach (and so one an
/// endpoint may use without the operator's leave).
pub fn is_public(ip: IpAddr) -> bool {
    match ip {
        IpAddr::V4(v4) => public_v4(v4),
        IpAddr::V6(v6) => match v6.to_ipv4_mapped() {
            Some(v4) => public_v4(v4),
            None => public_v6(v6),
        },
    }
}

fn public_v4(ip: Ipv4Addr) -> bool {
    let [a, b, ..] = ip.octets();
    !(ip.is_loopback()
        || ip.is_private()
        || ip.is_link_local()
        || ip.is_unspecified()
        || ip.is_broadcast()
        || ip.is_multicast()
        || ip.is_documentation()
        || a == 0
        // shared address space (carrier-grade NAT), 100.64.0.0/10
        || (a == 100 && (64..128).contains(&b))
        // IETF protocol assignments and benchmarking, 192.0.0.0/24, 198.18.0.0/15
        || (a == 192 && b == 0 && ip.octets()[2] == 0)
        || (a == 198 && (18..20).contains(&b))
        // reserved, 240.0.0.0/4
        || a >= 240)
}

fn public_v6(ip: Ipv6Addr) -> bool {
    let first = ip.segments()[0];
    !(ip.is_loopback()
        || ip.is_unspecified()
        || ip.is_multicast()
        // unique local, fc00::/7
        || (first & 0xfe00) == 0xfc00
        // link-local, fe80::/10
        || (first & 0xffc0) == 0xfe80
        // site-local, fec0::/10 (deprecated, still routed privately)
        || (first & 0xffc0) == 0xfec0
        // documentation, 2001:db8::/32
        || (first == 0x2001 && ip.segments()[1] == 0x0db8)
        // IPv4-compatible and NAT64 forms name an IPv4 address we did not check
        || (first == 0 && ip.segments()[1..6].iter().all(|s| *s == 0))
        || (first == 0x64 && ip.segments()[1] == 0xff9b))
}

/// Why a destination was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Refused {
    #[error("the URL must start with https:// (or http://) and name a host")]
    NotAUrl,
    #[error(
        "{host} is a private, loopback or link-local address; webhooks go only to public \
         addresses unless the operator allows private ones"
    )]
    Private { host: String },
    #[error("{host} could not be resolved")]
    Unresolved { host: String },
    #[error(
        "webhooks carry shoppers' names and e-mails: the URL must start with https:// \
         (plain http:// only where the operator allows private addresses)"
    )]
    NotHttps,
}

/// A webhook URL that parsed: http or https, a host, no user name or
/// password in it.
#[derive(Debug, Clone)]
pub struct Destination {
    url: reqwest::Url,
}

impl Destination {
    pub fn parse(text: &str) -> Result<Self, Refused> {
        let text = text.trim();
        if text.len() > 2000 {
            return Err(Refused::NotAUrl);
        }
        let url = reqwest::Url::parse(text).map_err(|_| Refused::NotAUrl)?;
        let fits = matches!(url.scheme(), "https" | "http")
            && url.host_str().is_some_and(|h| !h.is_empty())
            && url.username().is_empty()
            && url.password().is_none();
        if !fits {
            return Err(Refused::NotAUrl);
        }
        Ok(Self { url })
    }

    pub fn url(&self) -> &reqwest::Url {
        &self.url
    }

    /// Refused if it is not HTTPS, or its host is (or now resolves to) an
    /// address that is not public, unless `allow_private` (the operator's
    /// own network, where plain HTTP is the operator's choice).
    pub async fn check(&self, allow_private: bool) -> Result<(), Refused> {
        if allow_private {
            return Ok(());
        }
        let host = self.url.host_str().unwrap_or_default().to_owned();
        let port = self.url.port_or_known_default().unwrap_or(443);
        let addresses: Vec<SocketAddr> = match self.url.host() {
            Some(url::Host::Ipv4(ip)) => vec![SocketAddr::new(IpAddr::V4(ip), port)],
            Some(url::Host::Ipv6(ip)) => vec![SocketAddr::new(IpAddr::V6(ip), port)],
            _ => tokio::net::lookup_host((host.as_str(), port))
                .await
                .map_err(|_| Refused::Unresolved { host: host.clone() })?
                .collect(),
        };
        if addresses.is_empty() {
            return Err(Refused::Unresolved { host });
        }
        if addresses.iter().any(|a| !is_public(a.ip())) {
            return Err(Refused::Private { host });
        }
        if self.url.scheme() != "https" {
            return Err(Refused::NotHttps);
        }
        Ok(())
    }
}

/// The resolver the delivering client connects through: a name that
/// resolves to any address that is not public is refused, at the moment of
/// the call.
#[derive(Debug, Clone, Copy)]
pub struct PublicOnly;

impl reqwest::dns::Resolve for PublicOnly {
    fn resolve(&self, name: reqwest::dns::Name) -> reqwest::dns::Resolving {
        Box::pin(async move {
            let host = name.as_str().to_owned();
            let addresses: Vec<SocketAddr> =
                tokio::net::lookup_host((host.as_str(), 0)).await?.collect();
            if addresses.iter().any(|a| !is_public(a.ip())) {
                return Err(Box::new(Refused::Private { host }) as _);
            }
            Ok(Box::new(addresses.into_iter()) as reqwest::dns::Addrs)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_public_addresses_are_public() {
        for private in [
            "127.0.0.1",
            "10.1.2.3",
            "172.16.0.1",
            "192.168.1.1",
            "169.254.169.254",
            "100.64.0.1",
            "0.0.0.0",
            "255.255.255.255",
            "::1",
            "::",
            "fe80::1",
            "fd00::1",
            "::ffff:127.0.0.1",
            "::ffff:10.0.0.1",
            "64:ff9b::a00:1",
            "fec0::1",
        ] {
            assert!(!is_public(private.parse().unwrap()), "{private}");
        }
        for public in [
            "93.184.216.34",
            "1.1.1.1",
            "2606:4700::1111",
            "::ffff:8.8.8.8",
        ] {
            assert!(is_public(public.parse().unwrap()), "{public}");
        }
    }

    #[tokio::test]
    async fn loopback_is_refused_unless_allowed() {
        for url in [
            "http://127.0.0.1:9/hook",
            "https://[::1]/hook",
            "http://localhost:8080/",
            "http://169.254.169.254/latest/meta-data",
        ] {
            let destination = Destination::parse(url).unwrap();
            assert!(
                matches!(destination.check(false).await, Err(Refused::Private { .. })),
                "{url}"
            );
            assert_eq!(destination.check(true).await, Ok(()));
        }
        // a public address, but in plain text
        let plain = Destination::parse("http://93.184.216.34/hook").unwrap();
        assert_eq!(plain.check(false).await, Err(Refused::NotHttps));
        assert_eq!(plain.check(true).await, Ok(()));
        for bad in [
            "ftp://example.com/",
            "https://",
            "https://user:pw@example.com/",
            "x",
        ] {
            assert_eq!(
                Destination::parse(bad).unwrap_err(),
                Refused::NotAUrl,
                "{bad}"
            );
        }
    }
}
