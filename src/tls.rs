//! The TLS material of `[broker.tls]` and `[cluster.tls]`: each file read (a link is followed to a regular file,
//! as certificate managers keep them), parsed as PEM and checked: the key readable by its owner
//! alone, the key matching the certificate, the CA and cotal's own client pair the same. What
//! observation keeps is secret-free: paths, the certificate's fingerprint, its expiry and the
//! names it covers (the state exports them, so a pull request's plan renders the same config).
//! Expiry and names are judged by the planner against the listeners (pure, at `observed.now`);
//! every other problem is reported here, at its key's place in `cotal.toml`.

use crate::desired::{LocatedPath, TlsSettings};
use crate::observed::{ObservedTls, TlsFacts};
use crate::store::Root;
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, PrivateKeyDer};
use std::os::unix::fs::PermissionsExt;
use std::path::PathBuf;

/// What a certificate is for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Use {
    /// A listener's (`[broker.tls]`): it serves.
    Listener,
    /// The routes' (`[cluster.tls]`): every node serves it and presents it on the routes it
    /// opens, so its extended key usage (where it has one) must allow both.
    Routes,
}

/// Read and check the files `tls` names, for `purpose`.
pub fn observe(root: &Root, tls: &TlsSettings, purpose: Use) -> ObservedTls {
    let mut problems = Vec::new();
    let certs = read(root, &tls.cert, &mut problems).and_then(|(path, bytes)| {
        certificates(&tls.cert, &bytes, &mut problems).map(|c| (path, c))
    });
    let key = read(root, &tls.key, &mut problems).and_then(|(path, bytes)| {
        private(root, &tls.key, &mut problems);
        private_key(&tls.key, &bytes, &mut problems).map(|k| (path, k))
    });
    let ca = tls.ca.as_ref().and_then(|ca| {
        read(root, ca, &mut problems).and_then(|(path, bytes)| {
            certificates(ca, &bytes, &mut problems)
                .map(|certs| (path, crate::trust::digest::sha256(&bytes), certs))
        })
    });
    if let (Some(c), Some(k)) = (&tls.client_cert, &tls.client_key) {
        let cert = read(root, c, &mut problems)
            .and_then(|(_, bytes)| certificates(c, &bytes, &mut problems));
        let key = read(root, k, &mut problems).and_then(|(_, bytes)| {
            private(root, k, &mut problems);
            private_key(k, &bytes, &mut problems)
        });
        if let (Some(cert), Some(key)) = (cert, key) {
            matches(c, &cert[0], &key, &mut problems);
        }
    }
    let facts = match (certs, key) {
        (Some((cert_file, chain)), Some((key_file, key))) => {
            matches(&tls.cert, &chain[0], &key, &mut problems);
            if let (Use::Routes, Some((_, _, authorities))) = (purpose, &ca) {
                chains_to(tls, &chain, authorities, &mut problems);
            }
            leaf(&tls.cert, &chain[0], purpose, &mut problems).map(|(not_after, names)| TlsFacts {
                cert_file,
                key_file,
                ca_file: ca.as_ref().map(|(p, _, _)| p.clone()),
                fingerprint: crate::trust::digest::sha256(chain[0].as_ref()),
                not_after,
                names,
                ca_fingerprint: ca.map(|(_, f, _)| f),
            })
        }
        _ => None,
    };
    ObservedTls { facts, problems }
}

fn read(root: &Root, file: &LocatedPath, problems: &mut Vec<String>) -> Option<(PathBuf, Vec<u8>)> {
    let path = root.dir().join(&file.path);
    match std::fs::metadata(&path) {
        Ok(meta) if meta.is_file() => {}
        Ok(_) => {
            problems.push(format!(
                "{}: {} is not a regular file",
                file.at,
                path.display()
            ));
            return None;
        }
        Err(e) => {
            problems.push(format!("{}: cannot read {}: {e}", file.at, path.display()));
            return None;
        }
    }
    // A certificate or key is kilobytes: a FIFO or a file of gigabytes is refused by name.
    match crate::store::atomic::read_following_within(&path, 1 << 20) {
        Ok(bytes) => Some((path, bytes)),
        Err(e) => {
            problems.push(format!("{}: cannot read {}: {e}", file.at, path.display()));
            None
        }
    }
}

/// A private key anyone but its owner may read (or anyone but its owner and group may write)
/// is refused: whoever reads it can pose as the broker.
fn private(root: &Root, file: &LocatedPath, problems: &mut Vec<String>) {
    let path = root.dir().join(&file.path);
    if let Ok(meta) = std::fs::metadata(&path) {
        let mode = meta.permissions().mode() & 0o777;
        if mode & 0o027 != 0 {
            problems.push(format!(
                "{}: the private key {} is {} (mode {mode:04o}): whoever reads it can pose as the broker; `chmod 600` it",
                file.at,
                path.display(),
                if mode & 0o004 != 0 {
                    "readable by every user"
                } else {
                    "open to others than its owner"
                }
            ));
        }
    }
}

fn certificates(
    file: &LocatedPath,
    bytes: &[u8],
    problems: &mut Vec<String>,
) -> Option<Vec<CertificateDer<'static>>> {
    let certs: Result<Vec<_>, _> = CertificateDer::pem_slice_iter(bytes).collect();
    match certs {
        Ok(c) if !c.is_empty() => Some(c),
        Ok(_) => {
            problems.push(format!(
                "{}: {} holds no PEM certificate",
                file.at, file.path
            ));
            None
        }
        Err(e) => {
            problems.push(format!(
                "{}: {} does not parse as PEM: {e}",
                file.at, file.path
            ));
            None
        }
    }
}

fn private_key(
    file: &LocatedPath,
    bytes: &[u8],
    problems: &mut Vec<String>,
) -> Option<PrivateKeyDer<'static>> {
    match PrivateKeyDer::from_pem_slice(bytes) {
        Ok(k) => Some(k),
        Err(e) => {
            // Never the key's bytes: only what is wrong with it.
            problems.push(format!(
                "{}: {} holds no PEM private key ({e})",
                file.at, file.path
            ));
            None
        }
    }
}

/// The key must be the certificate's.
fn matches(
    file: &LocatedPath,
    cert: &CertificateDer,
    key: &PrivateKeyDer,
    problems: &mut Vec<String>,
) {
    let public = rustls::crypto::ring::sign::any_supported_type(key)
        .ok()
        .and_then(|k| k.public_key().map(|p| p.as_ref().to_vec()));
    let certified = x509_parser::parse_x509_certificate(cert.as_ref())
        .ok()
        .map(|(_, c)| c.public_key().raw.to_vec());
    match (public, certified) {
        (Some(p), Some(c)) if p == c => {}
        (None, _) => problems.push(format!(
            "{}: the key beside {} is of a kind cotal cannot check (RSA, ECDSA P-256/P-384 and Ed25519 are)",
            file.at, file.path
        )),
        _ => problems.push(format!(
            "{}: the private key does not match the certificate {}: a listener would fail every handshake",
            file.at, file.path
        )),
    }
}

/// A route certificate must chain to the CA every node checks the other end of a route by, as
/// a server and as a client (its extended key usage included). Expiry is the planner's to judge
/// (at `observed.now`), so an expired certificate is not reported twice.
fn chains_to(
    tls: &TlsSettings,
    chain: &[CertificateDer<'static>],
    authorities: &[CertificateDer<'static>],
    problems: &mut Vec<String>,
) {
    use rustls::client::danger::ServerCertVerifier;
    let provider = std::sync::Arc::new(rustls::crypto::ring::default_provider());
    let mut roots = rustls::RootCertStore::empty();
    for a in authorities {
        if roots.add(a.clone()).is_err() {
            problems.push(format!(
                "{}: the CA {} holds a certificate that is not a CA's",
                tls.cert.at,
                tls.ca.as_ref().map_or("", |c| c.path.as_str())
            ));
            return;
        }
    }
    let roots = std::sync::Arc::new(roots);
    let now = rustls_pki_types::UnixTime::now();
    let judged = |r: Result<(), rustls::Error>, side: &str, problems: &mut Vec<String>| match r {
        Ok(()) => {}
        // Expiry is the planner's; the key usage is reported by `leaf`, in its own words.
        Err(rustls::Error::InvalidCertificate(
            rustls::CertificateError::Expired
            | rustls::CertificateError::ExpiredContext { .. }
            | rustls::CertificateError::InvalidPurpose
            | rustls::CertificateError::InvalidPurposeContext { .. },
        )) => {}
        Err(e) => problems.push(format!(
            "{}: the certificate {} is not accepted as a route's {side} by the CA {}: {e}",
            tls.cert.at,
            tls.cert.path,
            tls.ca.as_ref().map_or("", |c| c.path.as_str())
        )),
    };
    let client = rustls::server::WebPkiClientVerifier::builder_with_provider(
        roots.clone(),
        provider.clone(),
    )
    .build()
    .map_err(|e| rustls::Error::General(e.to_string()))
    .and_then(|v| {
        v.verify_client_cert(&chain[0], &chain[1..], now)
            .map(|_| ())
    });
    judged(client, "client", problems);
    // The name is the planner's to check against the nodes' hosts; any name the leaf covers
    // proves the chain and the server usage here.
    let name = x509_parser::parse_x509_certificate(chain[0].as_ref())
        .ok()
        .and_then(|(_, c)| leaf_names(&c).into_iter().next())
        .and_then(|n| rustls_pki_types::ServerName::try_from(n).ok());
    if let Some(name) = name {
        let server = rustls::client::WebPkiServerVerifier::builder_with_provider(roots, provider)
            .build()
            .map_err(|e| rustls::Error::General(e.to_string()))
            .and_then(|v| {
                v.verify_server_cert(&chain[0], &chain[1..], &name, &[], now)
                    .map(|_| ())
            });
        judged(server, "server", problems);
    }
}

/// The DNS names and IP addresses a certificate covers (its subject alternative names).
fn leaf_names(c: &x509_parser::certificate::X509Certificate) -> Vec<String> {
    let mut names = Vec::new();
    if let Ok(Some(san)) = c.subject_alternative_name() {
        for n in &san.value.general_names {
            match n {
                x509_parser::extensions::GeneralName::DNSName(d) => names.push(d.to_string()),
                x509_parser::extensions::GeneralName::IPAddress(ip) => match ip.len() {
                    4 => names.push(
                        std::net::Ipv4Addr::from(<[u8; 4]>::try_from(*ip).expect("4 bytes"))
                            .to_string(),
                    ),
                    16 => names.push(
                        std::net::Ipv6Addr::from(<[u8; 16]>::try_from(*ip).expect("16 bytes"))
                            .to_string(),
                    ),
                    _ => {}
                },
                _ => {}
            }
        }
    }
    names
}

/// The leaf's expiry and the names it covers.
fn leaf(
    file: &LocatedPath,
    cert: &CertificateDer,
    purpose: Use,
    problems: &mut Vec<String>,
) -> Option<(i64, Vec<String>)> {
    let (_, c) = match x509_parser::parse_x509_certificate(cert.as_ref()) {
        Ok(parsed) => parsed,
        Err(e) => {
            problems.push(format!(
                "{}: {} is not an X.509 certificate: {e}",
                file.at, file.path
            ));
            return None;
        }
    };
    let names = leaf_names(&c);
    if purpose == Use::Routes
        && let Ok(Some(eku)) = c.extended_key_usage()
        && !eku.value.any
        && !(eku.value.server_auth && eku.value.client_auth)
    {
        problems.push(format!(
            "{}: the certificate {} is not usable both as a server and as a client (its extended key usage lacks {}): every node presents it on the routes it opens too",
            file.at,
            file.path,
            match (eku.value.server_auth, eku.value.client_auth) {
                (false, false) => "serverAuth and clientAuth",
                (true, _) => "clientAuth",
                _ => "serverAuth",
            }
        ));
    }
    Some((c.validity().not_after.timestamp(), names))
}
