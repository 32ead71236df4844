//! The HTTP clients tests use, with Holdfast's TLS setup (rustls with
//! aws-lc-rs, the only crypto backend built) and redirects left to the
//! test: a plain one for the sandbox and the shop's API, and browsers with
//! their own cookie jars (and, where a test needs it, their own client
//! address) for shoppers and staff. The lowest room of the kit: it names
//! no other.

/// A new shopper: own cookie jar, redirects left to the test.
pub fn browser() -> reqwest::Client {
    http_builder().cookie_store(true).build().expect("client")
}

/// A new shopper whose connections come from `ip` (another 127.x.y.z
/// address is another client to the shop's limits).
pub fn browser_from(ip: std::net::IpAddr) -> reqwest::Client {
    http_builder()
        .cookie_store(true)
        .local_address(ip)
        .build()
        .expect("client")
}

/// An HTTP client with Holdfast's TLS setup, redirects left to the test.
pub fn http_builder() -> reqwest::ClientBuilder {
    holdfast::payments::http::client_builder(&holdfast::payments::http::TrustedRoots::mozilla())
}

/// [`http_builder`], built.
pub fn http_client() -> reqwest::Client {
    http_builder().build().expect("client")
}
