//! The one HTTP client setup for calls to the providers (and the sandbox's
//! own webhook deliveries): reqwest over rustls with the aws-lc-rs crypto
//! backend, trusting Mozilla's roots (webpki-roots) plus, when configured,
//! the certificate authorities in `HOLDFAST_PROVIDER_CA_FILE` (a corporate
//! proxy's, or a test's). One backend everywhere: a second one (ring) would
//! compile and then panic at the first HTTPS request.

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use rustls_pki_types::CertificateDer;
use rustls_pki_types::pem::PemObject;

/// Extra certificate authorities the provider clients trust, on top of
/// Mozilla's. Empty in production unless a proxy needs it.
#[derive(Clone, Default)]
pub struct TrustedRoots(Arc<Vec<CertificateDer<'static>>>);

impl std::fmt::Debug for TrustedRoots {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "TrustedRoots({} extra)", self.0.len())
    }
}

impl TrustedRoots {
    /// Mozilla's roots only.
    pub fn mozilla() -> Self {
        Self::default()
    }

    /// Mozilla's roots and every certificate in a PEM file.
    pub fn with_pem_file(path: &Path) -> anyhow::Result<Self> {
        let certificates = CertificateDer::pem_file_iter(path)
            .with_context(|| format!("cannot read certificates from {}", path.display()))?
            .collect::<Result<Vec<_>, _>>()
            .with_context(|| format!("{} holds a malformed certificate", path.display()))?;
        anyhow::ensure!(
            !certificates.is_empty(),
            "{} holds no PEM certificate",
            path.display()
        );
        Ok(Self(Arc::new(certificates)))
    }

    /// Mozilla's roots and these certificates (PEM text).
    pub fn with_pem(pem: &str) -> anyhow::Result<Self> {
        let certificates = CertificateDer::pem_slice_iter(pem.as_bytes())
            .collect::<Result<Vec<_>, _>>()
            .context("a malformed certificate")?;
        Ok(Self(Arc::new(certificates)))
    }

    fn tls_config(&self) -> rustls::ClientConfig {
        let mut roots = rustls::RootCertStore::empty();
        roots.extend(webpki_roots::TLS_SERVER_ROOTS.iter().cloned());
        for certificate in self.0.iter() {
            // a certificate rustls cannot use is left out, as a browser would
            let _ = roots.add(certificate.clone());
        }
        let provider = Arc::new(rustls::crypto::aws_lc_rs::default_provider());
        rustls::ClientConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .expect("aws-lc-rs supports the default TLS versions")
            .with_root_certificates(roots)
            .with_no_client_auth()
    }
}

/// A client builder with Holdfast's TLS configuration, a connect timeout and
/// no redirects (an API that redirects is not one we meant to call).
pub fn client_builder(roots: &TrustedRoots) -> reqwest::ClientBuilder {
    reqwest::Client::builder()
        .use_preconfigured_tls(roots.tls_config())
        .connect_timeout(Duration::from_secs(10))
        .redirect(reqwest::redirect::Policy::none())
}

/// [`client_builder`] with Mozilla's roots, built, with an overall timeout.
pub fn client(timeout: Duration) -> reqwest::Client {
    client_builder(&TrustedRoots::mozilla())
        .timeout(timeout)
        .build()
        .expect("a TLS configuration built in code is valid")
}

/// Send a request to a provider and read its whole answer: (status, body).
/// Not reaching the provider, or losing its answer halfway, is
/// [`ProviderError::Unavailable`] (worth another try); the message leaves
/// the URL out, as it may carry ids.
pub async fn exchange(
    request: reqwest::RequestBuilder,
) -> Result<(u16, bytes::Bytes), super::ProviderError> {
    let unavailable =
        |e: reqwest::Error| super::ProviderError::Unavailable(e.without_url().to_string());
    let response = request.send().await.map_err(unavailable)?;
    let status = response.status().as_u16();
    let body = response.bytes().await.map_err(unavailable)?;
    Ok((status, body))
}
