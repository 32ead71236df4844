//! A test certificate authority, and an HTTPS server of its signing in
//! front of a plain HTTP one: what a provider's TLS looks like to an
//! adapter told to trust that authority. rustls with aws-lc-rs, as the
//! product builds it.

/// A test certificate authority, and an HTTPS server of its signing in
/// front of a plain HTTP one (the sandbox): what a provider's TLS looks
/// like to an adapter told to trust that authority.
pub struct TlsFront {
    /// `https://127.0.0.1:<port>`
    pub base: String,
    /// The authority's certificate, PEM.
    pub authority_pem: String,
}

/// An HTTPS front on port 0 to `plain_base` (`http://host:port`), with a
/// certificate for 127.0.0.1 and localhost signed by a new authority.
pub async fn tls_front(plain_base: &str) -> TlsFront {
    use rcgen::{
        BasicConstraints, CertificateParams, CertifiedIssuer, DnType, IsCa, KeyPair,
        KeyUsagePurpose,
    };
    use std::sync::Arc;

    let mut authority = CertificateParams::new(Vec::<String>::new()).unwrap();
    authority.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    authority
        .distinguished_name
        .push(DnType::CommonName, "Holdfast test authority");
    authority.key_usages = vec![
        KeyUsagePurpose::KeyCertSign,
        KeyUsagePurpose::CrlSign,
        KeyUsagePurpose::DigitalSignature,
    ];
    let authority = CertifiedIssuer::self_signed(authority, KeyPair::generate().unwrap()).unwrap();
    let server_key = KeyPair::generate().unwrap();
    let server = CertificateParams::new(vec!["127.0.0.1".to_owned(), "localhost".to_owned()])
        .unwrap()
        .signed_by(&server_key, &authority)
        .unwrap();
    let config = rustls::ServerConfig::builder_with_provider(Arc::new(
        rustls::crypto::aws_lc_rs::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .unwrap()
    .with_no_client_auth()
    .with_single_cert(
        vec![server.der().clone()],
        rustls_pki_types::PrivateKeyDer::Pkcs8(server_key.serialize_der().into()),
    )
    .unwrap();
    let acceptor = tokio_rustls::TlsAcceptor::from(Arc::new(config));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let upstream = plain_base.trim_start_matches("http://").to_owned();
    tokio::spawn(async move {
        loop {
            let Ok((stream, _)) = listener.accept().await else {
                return;
            };
            let acceptor = acceptor.clone();
            let upstream = upstream.clone();
            tokio::spawn(async move {
                let Ok(mut tls) = acceptor.accept(stream).await else {
                    return;
                };
                let Ok(mut plain) = tokio::net::TcpStream::connect(&upstream).await else {
                    return;
                };
                let _ = tokio::io::copy_bidirectional(&mut tls, &mut plain).await;
            });
        }
    });
    TlsFront {
        base: format!("https://127.0.0.1:{port}"),
        authority_pem: authority.pem(),
    }
}
