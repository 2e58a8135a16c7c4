//! The TLS tables of `cotal.toml` as declared: `[broker.tls]` (the client listener of every
//! node) and `[cluster.tls]` (mutual TLS on a cluster's routes), parsed and validated. Pure:
//! the files they name are read and checked by observation (`cotal::tls`), and each problem
//! is reported at its key's place in `cotal.toml`.

use crate::desired::topology::{check_host, check_path};
use serde::Deserialize;
use toml::Spanned;

/// Locates a message at a byte offset of `cotal.toml` (`cotal.toml:LINE:COLUMN: message`).
pub type At<'a> = &'a dyn Fn(usize, String) -> String;

/// `[broker.tls]` as declared. Paths are as written (relative ones are relative to the root);
/// the files are read and checked by observation (`cotal::tls`), and each problem is
/// reported at the key's place in `cotal.toml`.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct TlsSettings {
    /// The certificate chain the listener presents (PEM).
    pub cert: LocatedPath,
    /// Its private key (PEM; readable by its owner only).
    pub key: LocatedPath,
    /// The CA clients' certificates must chain to (and cotal trusts the broker by).
    pub ca: Option<LocatedPath>,
    /// Mutual TLS: every client must present a certificate the CA signed.
    pub verify: bool,
    /// The handshake's deadline, in milliseconds (`timeout`, in seconds, in the file).
    pub timeout_ms: Option<u64>,
    /// The names clients reach the broker by, which the certificate must cover; unset: every
    /// node's listener host.
    pub names: Vec<String>,
    /// The certificate and key cotal presents itself under `verify` (its control, observation
    /// and provisioning connections).
    pub client_cert: Option<LocatedPath>,
    pub client_key: Option<LocatedPath>,
}

/// A file `cotal.toml` names: the path as written and where (`cotal.toml:LINE:COLUMN`).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct LocatedPath {
    pub path: String,
    pub at: String,
}

/// `[broker.tls]` as written.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawTls {
    cert: Option<Spanned<String>>,
    key: Option<Spanned<String>>,
    ca: Option<Spanned<String>>,
    verify: Option<bool>,
    timeout: Option<Spanned<toml::Value>>,
    names: Option<Vec<Spanned<String>>>,
    client_cert: Option<Spanned<String>>,
    client_key: Option<Spanned<String>>,
}

/// `[cluster.tls]` as written: mutual TLS on routes, so the CA is required and `verify` is
/// always on; the certificate is every node's, as a server and as a client of its routes.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawRouteTls {
    cert: Option<Spanned<String>>,
    key: Option<Spanned<String>>,
    ca: Option<Spanned<String>>,
    timeout: Option<Spanned<toml::Value>>,
}

/// `[cluster.tls]`: every node presents `cert` on its routes (accepted and opened) and
/// requires the other end's certificate to chain to `ca`. The certificate must cover every
/// node's `host` (the address its routes are opened to) and be usable by clients and servers.
pub fn routes(raw: Spanned<RawRouteTls>, at: At) -> Result<TlsSettings, String> {
    let start = raw.span().start;
    let t = raw.into_inner();
    let listener_form = RawTls {
        cert: t.cert,
        key: t.key,
        ca: t.ca,
        verify: Some(true),
        timeout: t.timeout,
        names: None,
        client_cert: None,
        client_key: None,
    };
    let table = "[cluster.tls]";
    if listener_form.ca.is_none() {
        return Err(at(
            start,
            format!(
                "{table} needs `ca`: every node requires the certificate of the other end of a route to chain to it (mutual TLS)"
            ),
        ));
    }
    settings(table, start, listener_form, at, false)
}

/// `[broker.tls]`: TLS on the client listener of every node. `at(offset, message)` locates an
/// error in the file.
pub fn listener(raw: Spanned<RawTls>, at: At) -> Result<TlsSettings, String> {
    let start = raw.span().start;
    settings("[broker.tls]", start, raw.into_inner(), at, true)
}

/// The settings of the table `table` (written at `start`); `client_pair`: whether cotal's own
/// client certificate is required under `verify` (the client listener's, not the routes').
fn settings(
    table: &str,
    start: usize,
    t: RawTls,
    at: At,
    client_pair: bool,
) -> Result<TlsSettings, String> {
    let path = |field: &str, v: Spanned<String>| -> Result<LocatedPath, String> {
        let place = at(v.span().start, String::new());
        let place = place.trim_end_matches(": ").to_string();
        check_path(field, v.get_ref())
            .map(|path| LocatedPath { path, at: place })
            .map_err(|e| at(v.span().start, e))
    };
    let required = |field: &str, v: Option<Spanned<String>>| -> Result<LocatedPath, String> {
        match v {
            Some(v) => path(field, v),
            None => Err(at(
                start,
                format!("{table} needs `{field}` (a PEM file, relative to the root)"),
            )),
        }
    };
    let optional = |field: &str, v: Option<Spanned<String>>| v.map(|v| path(field, v)).transpose();
    let verify = t.verify.unwrap_or(false);
    let ca = optional("ca", t.ca)?;
    if verify && ca.is_none() {
        return Err(at(
            start,
            format!("{table} verify = true needs `ca`: the CA clients' certificates must chain to"),
        ));
    }
    let client_cert = optional("client_cert", t.client_cert)?;
    let client_key = optional("client_key", t.client_key)?;
    if client_cert.is_some() != client_key.is_some() {
        return Err(at(
            start,
            "[broker.tls] client_cert and client_key go together: the certificate cotal presents and its key".into(),
        ));
    }
    if verify && client_pair && client_cert.is_none() {
        return Err(at(
            start,
            "[broker.tls] verify = true needs client_cert and client_key: cotal's own connections must present a certificate the CA signed too".into(),
        ));
    }
    let timeout_ms = match t.timeout {
        None => None,
        Some(v) => {
            let seconds = match v.get_ref() {
                toml::Value::Integer(i) => Some(*i as f64),
                toml::Value::Float(f) => Some(*f),
                _ => None,
            };
            match seconds {
                Some(s) if s > 0.0 && s <= 60.0 => Some((s * 1000.0).round() as u64),
                _ => {
                    return Err(at(
                        v.span().start,
                        "timeout must be a number of seconds above 0 and at most 60 (the TLS handshake's deadline)".into(),
                    ));
                }
            }
        }
    };
    let mut names = Vec::new();
    for n in t.names.unwrap_or_default() {
        names.push(check_host(n.get_ref()).map_err(|e| at(n.span().start, e))?);
    }
    Ok(TlsSettings {
        cert: required("cert", t.cert)?,
        key: required("key", t.key)?,
        ca,
        verify,
        timeout_ms,
        names,
        client_cert,
        client_key,
    })
}
