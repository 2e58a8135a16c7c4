//! The TLS cotal's own connections use (control, observation, provisioning, registries, the
//! data-plane checks): when `[broker.tls]` is declared, every connection requires TLS, trusts
//! the declared CA (else the host's roots) and, under `verify`, presents cotal's client
//! certificate. Set once per process from the root's `cotal.toml` by observation, which every
//! command that connects runs first; one process serves one root.

use crate::desired::TlsSettings;
use crate::store::Root;
use std::path::PathBuf;
use std::sync::{Arc, RwLock};

/// What a connection of cotal's needs.
#[derive(Debug, Clone, PartialEq, Eq)]
struct ClientTls {
    ca: Option<PathBuf>,
    client: Option<(PathBuf, PathBuf)>,
    /// The name the broker's certificate is checked against: the first of `names`, which the
    /// plan checked the certificate covers (cotal dials a listener by its address, which may be
    /// a bind-all one). `None`: the address dialed.
    server_name: Option<String>,
}

static CLIENT_TLS: RwLock<Option<ClientTls>> = RwLock::new(None);

/// Use `tls` (paths relative to `root`) for every connection from now on; `None`: plaintext.
pub fn configure(root: &Root, tls: Option<&TlsSettings>) {
    let value = tls.map(|t| ClientTls {
        ca: t.ca.as_ref().map(|ca| root.dir().join(&ca.path)),
        client: t
            .client_cert
            .as_ref()
            .zip(t.client_key.as_ref())
            .map(|(c, k)| (root.dir().join(&c.path), root.dir().join(&k.path))),
        server_name: t.names.first().cloned(),
    });
    if let Ok(mut slot) = CLIENT_TLS.write() {
        *slot = value;
    }
}

/// `options` with the TLS the root declares.
pub fn apply(options: async_nats::ConnectOptions) -> async_nats::ConnectOptions {
    let tls = CLIENT_TLS.read().ok().and_then(|t| t.clone());
    let Some(tls) = tls else {
        return options;
    };
    match client_config(&tls) {
        Ok(config) => options.require_tls(true).tls_client_config(config),
        // Unreadable material was refused by the plan; a connection made anyway fails closed
        // (TLS required, nothing trusted beyond the declared CA).
        Err(e) => {
            tracing::warn!(%e, "cannot build cotal's TLS client configuration");
            let mut options = options.require_tls(true);
            if let Some(ca) = tls.ca {
                options = options.add_root_certificates(ca);
            }
            options
        }
    }
}

/// The rustls configuration of cotal's connections: the declared CA (else the host's roots),
/// the certificate checked against the declared name, and cotal's client pair under `verify`.
fn client_config(tls: &ClientTls) -> Result<rustls::ClientConfig, String> {
    use rustls_pki_types::pem::PemObject;
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut roots = rustls::RootCertStore::empty();
    match &tls.ca {
        Some(ca) => {
            for cert in rustls_pki_types::CertificateDer::pem_file_iter(ca)
                .map_err(|e| format!("{}: {e}", ca.display()))?
            {
                roots
                    .add(cert.map_err(|e| format!("{}: {e}", ca.display()))?)
                    .map_err(|e| e.to_string())?;
            }
        }
        None => {
            for cert in rustls_native_certs::load_native_certs().certs {
                let _ = roots.add(cert);
            }
        }
    }
    let webpki = rustls::client::WebPkiServerVerifier::builder_with_provider(
        Arc::new(roots),
        provider.clone(),
    )
    .build()
    .map_err(|e| e.to_string())?;
    let name = match &tls.server_name {
        Some(n) => {
            Some(rustls_pki_types::ServerName::try_from(n.clone()).map_err(|e| e.to_string())?)
        }
        None => None,
    };
    config(
        Verifier {
            chain: Some((webpki, name)),
            provider: provider.clone(),
        },
        tls.client.as_ref(),
    )
}

/// A client configuration with `verifier`, presenting `client` (certificate and key files)
/// when given.
fn config(
    verifier: Verifier,
    client: Option<&(PathBuf, PathBuf)>,
) -> Result<rustls::ClientConfig, String> {
    use rustls_pki_types::pem::PemObject;
    let builder = rustls::ClientConfig::builder_with_provider(verifier.provider.clone())
        .with_safe_default_protocol_versions()
        .map_err(|e| e.to_string())?
        .dangerous()
        .with_custom_certificate_verifier(Arc::new(verifier));
    match client {
        Some((cert, key)) => {
            let certs = rustls_pki_types::CertificateDer::pem_file_iter(cert)
                .and_then(|i| i.collect::<Result<Vec<_>, _>>())
                .map_err(|e| format!("{}: {e}", cert.display()))?;
            let key = rustls_pki_types::PrivateKeyDer::from_pem_file(key)
                .map_err(|e| format!("cotal's client key: {e}"))?;
            builder
                .with_client_auth_cert(certs, key)
                .map_err(|e| e.to_string())
        }
        None => Ok(builder.with_no_client_auth()),
    }
}

/// cotal's check of the broker's certificate. With `chain`, the WebPKI check against the
/// trusted roots, with the name the plan checked in place of the address dialed (when `names`
/// declares one). Without, any certificate is accepted: only [`served_fingerprint`]'s probe,
/// which asks which certificate is served and sends nothing, goes without. Either way the
/// handshake's signatures must be the certificate's.
#[derive(Debug)]
struct Verifier {
    chain: Option<(
        Arc<rustls::client::WebPkiServerVerifier>,
        Option<rustls_pki_types::ServerName<'static>>,
    )>,
    provider: Arc<rustls::crypto::CryptoProvider>,
}

impl rustls::client::danger::ServerCertVerifier for Verifier {
    fn verify_server_cert(
        &self,
        end_entity: &rustls_pki_types::CertificateDer<'_>,
        intermediates: &[rustls_pki_types::CertificateDer<'_>],
        server_name: &rustls_pki_types::ServerName<'_>,
        ocsp_response: &[u8],
        now: rustls_pki_types::UnixTime,
    ) -> Result<rustls::client::danger::ServerCertVerified, rustls::Error> {
        match &self.chain {
            Some((webpki, name)) => webpki.verify_server_cert(
                end_entity,
                intermediates,
                name.as_ref().unwrap_or(server_name),
                ocsp_response,
                now,
            ),
            None => Ok(rustls::client::danger::ServerCertVerified::assertion()),
        }
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &rustls_pki_types::CertificateDer<'_>,
        dss: &rustls::DigitallySignedStruct,
    ) -> Result<rustls::client::danger::HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(
            message,
            cert,
            dss,
            &self.provider.signature_verification_algorithms,
        )
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &rustls_pki_types::CertificateDer<'_>,
        dss: &rustls::DigitallySignedStruct,
    ) -> Result<rustls::client::danger::HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(
            message,
            cert,
            dss,
            &self.provider.signature_verification_algorithms,
        )
    }

    fn supported_verify_schemes(&self) -> Vec<rustls::SignatureScheme> {
        self.provider
            .signature_verification_algorithms
            .supported_schemes()
    }
}

/// The TLS of cotal's own connections is the root's broker's: a broker cotal starts for itself
/// (the isolated, loopback-only server of a backup or restore) is plaintext, so its
/// connections go without it.
pub fn plaintext() {
    if let Ok(mut slot) = CLIENT_TLS.write() {
        *slot = None;
    }
}

/// The fingerprint (`sha256:…` of the leaf's DER) of the certificate the listener at `url`
/// (`nats://host:port`) serves now: NATS's plaintext INFO, then a TLS handshake of cotal's own,
/// presenting cotal's client certificate when the root declares one. The chain is not judged
/// here (the plan checked the files; clients judge the chain): only which certificate is
/// served, so a reload that kept serving the old one is caught. Bounded by `deadline`.
pub fn served_fingerprint(url: &str, deadline: std::time::Duration) -> Result<String, String> {
    let tls = CLIENT_TLS.read().ok().and_then(|t| t.clone());
    probe(
        url.trim_start_matches("nats://"),
        true,
        tls.as_ref().and_then(|t| t.client.as_ref()),
        None,
        deadline,
    )
}

/// The same for a route listener (`host:port`) under `[cluster.tls]`, as another node would
/// open a route: the TLS handshake first (no plaintext INFO), the listener's certificate
/// checked against `ca` and the dialed host, presenting `identity` (the routes' own
/// certificate and key); then the listener's INFO is read through TLS, which it sends only
/// once it accepted the certificate presented. So a certificate one side would refuse fails
/// the probe.
pub fn route_fingerprint(
    address: &str,
    identity: &(PathBuf, PathBuf),
    ca: &std::path::Path,
    deadline: std::time::Duration,
) -> Result<String, String> {
    probe(address, false, Some(identity), Some(ca), deadline)
}

/// A handshake with the listener at `address` (after its INFO line when `info_first`),
/// presenting `identity`; the served leaf's fingerprint. With `ca`, the served chain is checked
/// against it and the INFO the listener sends through TLS must follow.
fn probe(
    address: &str,
    info_first: bool,
    identity: Option<&(PathBuf, PathBuf)>,
    ca: Option<&std::path::Path>,
    deadline: std::time::Duration,
) -> Result<String, String> {
    use std::io::BufRead;
    let (host, _) = address.rsplit_once(':').ok_or("no port in the listener")?;
    let host = host.trim_start_matches('[').trim_end_matches(']');
    let socket = std::net::ToSocketAddrs::to_socket_addrs(address)
        .map_err(|e| e.to_string())?
        .next()
        .ok_or("the listener's host resolves to nothing")?;
    let mut tcp =
        std::net::TcpStream::connect_timeout(&socket, deadline).map_err(|e| e.to_string())?;
    tcp.set_read_timeout(Some(deadline))
        .and_then(|_| tcp.set_write_timeout(Some(deadline)))
        .map_err(|e| e.to_string())?;
    if info_first {
        let mut info = String::new();
        std::io::BufReader::new(tcp.try_clone().map_err(|e| e.to_string())?)
            .read_line(&mut info)
            .map_err(|e| e.to_string())?;
        if !info.contains("\"tls_required\":true") {
            return Err("the listener does not require TLS".into());
        }
    }
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let chain = match ca {
        None => None,
        Some(ca) => {
            use rustls_pki_types::pem::PemObject;
            let mut roots = rustls::RootCertStore::empty();
            for cert in rustls_pki_types::CertificateDer::pem_file_iter(ca)
                .map_err(|e| format!("{}: {e}", ca.display()))?
            {
                roots
                    .add(cert.map_err(|e| format!("{}: {e}", ca.display()))?)
                    .map_err(|e| e.to_string())?;
            }
            let webpki = rustls::client::WebPkiServerVerifier::builder_with_provider(
                Arc::new(roots),
                provider.clone(),
            )
            .build()
            .map_err(|e| e.to_string())?;
            Some((webpki, None))
        }
    };
    let config = config(Verifier { chain, provider }, identity)?;
    let name =
        rustls_pki_types::ServerName::try_from(host.to_string()).map_err(|e| e.to_string())?;
    let mut conn =
        rustls::ClientConnection::new(Arc::new(config), name).map_err(|e| e.to_string())?;
    while conn.is_handshaking() {
        conn.complete_io(&mut tcp).map_err(|e| e.to_string())?;
    }
    let leaf = conn
        .peer_certificates()
        .and_then(|c| c.first())
        .ok_or("the listener presented no certificate")?;
    let fingerprint = crate::trust::digest::sha256(leaf.as_ref());
    if ca.is_some() {
        let mut info = String::new();
        std::io::BufReader::new(rustls::Stream::new(&mut conn, &mut tcp))
            .read_line(&mut info)
            .map_err(|e| format!("the listener refused the handshake: {e}"))?;
        if !info.starts_with("INFO ") {
            return Err(format!(
                "the listener sent no INFO after the handshake ({:?})",
                info.chars().take(40).collect::<String>()
            ));
        }
    }
    Ok(fingerprint)
}
