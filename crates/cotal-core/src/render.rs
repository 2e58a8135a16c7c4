//! `server.conf`: a pure function of (broker trust, inventory, node settings) to bytes
//! (docs/design/architecture.md, "Rendering server.conf").
//!
//! Invariants: same inputs, same bytes; spaces appear in name order, then `SYS`; zero spaces, an
//! account preloaded twice and an account not issued by the broker's operator are refused. The
//! accounts come from the validated inventory, whose signatures were verified when it was read;
//! here each token's issuer and subject are checked again against what it is preloaded as.

use crate::model::SpaceName;
use crate::trust::jwt::BrokerTrust;
use crate::trust::jwt::{self, AccountNats};
use rayon::prelude::*;
use std::collections::BTreeSet;
use std::fmt::Write as _;
use std::path::PathBuf;

/// One broker node's listener and store. A broker is a list of nodes: one server, or the
/// nodes of a cluster (each with its `server_name` and `cluster {}` block).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Node {
    pub name: String,
    pub host: String,
    pub port: u16,
    /// The node's place in a cluster; `None` for a single server (no `server_name`, no
    /// `cluster {}`: the config of a single server is what it always was).
    pub cluster: Option<ClusterBlock>,
    /// Absolute JetStream store directory.
    pub store_dir: PathBuf,
    /// JetStream's file and memory stores, when the operator bounds them.
    pub max_file_store: Option<u64>,
    pub max_memory_store: Option<u64>,
    /// TLS on the client listener (`[broker.tls]`).
    pub tls: Option<ListenerTls>,
    /// The monitoring listener (`[broker.monitoring]`): `http: "HOST:PORT"`, or `https:`.
    pub monitoring: Option<crate::desired::Monitoring>,
    /// The websocket listener (`[broker.websocket]`), with the client listener's certificate
    /// unless `no_tls`.
    pub websocket: Option<crate::desired::Websocket>,
    /// `[broker] include`: the operator's settings, inlined between two marker comments.
    pub include: Option<Include>,
    /// `[broker] log_rotation`: `logfile_size_limit` and `logfile_max_num` are rendered
    /// (nats-server cannot turn them on or off on reload).
    pub log_rotation: bool,
}

/// An operator-owned include, as read and checked ([`crate::desired::include`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Include {
    /// As `cotal.toml` names it.
    pub path: String,
    pub text: String,
    /// Its top-level settings as nats-server parses them (for the digest).
    pub values: Vec<(String, serde_json::Value)>,
}

impl Node {
    /// The monitoring line this node renders (`http: "…"` / `https: "…"`), if any.
    pub fn monitoring_line(&self) -> Option<String> {
        self.monitoring.as_ref().map(|m| {
            format!(
                "{}: {}",
                if m.https { "https" } else { "http" },
                quote(&format!("{}:{}", m.host, m.port))
            )
        })
    }
}

/// A `tls {}` block at `indent`: the certificate, its key, the CA and `verify`; the handshake's
/// `timeout` on the client listener only.
fn tls_block(out: &mut String, indent: &str, t: &ListenerTls, timeout: bool) {
    let _ = writeln!(out, "{indent}tls {{");
    let _ = writeln!(out, "{indent}  cert_file: {}", quote(&t.cert_file));
    let _ = writeln!(out, "{indent}  key_file: {}", quote(&t.key_file));
    if let Some(ca) = &t.ca_file {
        let _ = writeln!(out, "{indent}  ca_file: {}", quote(ca));
    }
    if t.verify {
        let _ = writeln!(out, "{indent}  verify: true");
    }
    if let Some(ms) = t.timeout_ms.filter(|_| timeout) {
        let _ = writeln!(out, "{indent}  timeout: {}", seconds(ms));
    }
    let _ = writeln!(out, "{indent}}}");
}

/// The `websocket {}` block: `wss://` with the client listener's certificate, or `no_tls`.
pub fn websocket_block(w: &crate::desired::Websocket, tls: Option<&ListenerTls>) -> String {
    let mut out = String::from("websocket {\n");
    let _ = writeln!(out, "  host: {}", quote(&w.host));
    let _ = writeln!(out, "  port: {}", w.port);
    match (tls, w.no_tls) {
        (Some(t), false) => {
            // The client listener's TLS, mutual TLS included: the websocket port is no way
            // around `verify`.
            tls_block(&mut out, "  ", t, false);
        }
        _ => out.push_str("  no_tls: true\n"),
    }
    out.push_str("}\n");
    out
}

/// The listeners nats-server cannot open, move or close on reload, as a rendered config
/// declares them: its monitoring line and its `websocket {}` block.
pub fn fixed_listeners(text: &str) -> String {
    let mut out = String::new();
    let mut in_websocket = false;
    for line in text.lines() {
        if line.starts_with("http: ") || line.starts_with("https: ") {
            out.push_str(line);
            out.push('\n');
        } else if line.starts_with("websocket {") {
            in_websocket = true;
        }
        if in_websocket {
            out.push_str(line);
            out.push('\n');
            in_websocket = line != "}";
        }
    }
    out
}

/// The client listener's `tls {}` block, and the certificate it serves (by fingerprint and
/// expiry, in a comment: a new certificate at the same path changes the rendered text, so it
/// is planned and promoted, and the reload re-reads the files).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ListenerTls {
    pub cert_file: String,
    pub key_file: String,
    pub ca_file: Option<String>,
    pub verify: bool,
    pub timeout_ms: Option<u64>,
    /// `sha256:…` of the leaf certificate, and its expiry (unix seconds); `None` when the files
    /// could not be read (the plan refuses then, and nothing is rendered to disk).
    pub certificate: Option<(String, i64)>,
    /// `sha256:…` of the CA file, when one is declared.
    pub ca_fingerprint: Option<String>,
}

/// The first line of the comment that names the certificate a config serves.
pub const TLS_CERTIFICATE_LINE: &str = "# tls certificate ";
/// The same for the certificate of its routes (`[cluster.tls]`), inside its `cluster {}`.
pub const ROUTE_TLS_CERTIFICATE_LINE: &str = "  # route tls certificate ";

impl ListenerTls {
    /// The comment naming the certificate (fingerprint, expiry, CA), after `prefix`.
    fn certificate_comment(&self, out: &mut String, prefix: &str) {
        if let Some((fingerprint, not_after)) = &self.certificate {
            let _ = writeln!(
                out,
                "{prefix}{fingerprint} expires {}{}",
                crate::model::stamp(*not_after),
                self.ca_fingerprint
                    .as_ref()
                    .map(|c| format!(" (ca {c})"))
                    .unwrap_or_default()
            );
        }
    }
}

/// Whether a rendered config serves TLS on its client listener (its top-level `tls {}` block;
/// a websocket's own is indented).
pub fn serves_tls(text: &str) -> bool {
    text.lines().any(|l| l == "tls {")
}

/// Whether a config turns log rotation on (`logfile_size_limit`, which nats-server cannot
/// change on reload).
pub fn rotates_logs(text: &str) -> bool {
    text.lines()
        .any(|l| l.trim_start().starts_with("logfile_size_limit"))
}

/// The account resolver a config (cotal's, or one cotal adopts) names, as written: `MEMORY`
/// for cotal's preload; `None` when it names none.
pub fn resolver_of(text: &str) -> Option<String> {
    text.lines().find_map(|l| {
        let rest = l.trim_start().strip_prefix("resolver")?;
        if !rest.starts_with([' ', '\t', ':', '=', '{']) {
            return None; // `resolver_preload`, `resolver_tls`
        }
        let value = rest.trim_start().trim_start_matches([':', '=']).trim();
        Some(value.trim_matches('"').to_string())
    })
}

/// The certificate line of a rendered config (fingerprint and expiry), if it has one.
pub fn tls_certificate_line(text: &str) -> Option<&str> {
    text.lines()
        .find_map(|l| l.strip_prefix(TLS_CERTIFICATE_LINE))
}

/// The route certificate line of a rendered config, if it has one.
pub fn route_tls_certificate_line(text: &str) -> Option<&str> {
    text.lines()
        .find_map(|l| l.strip_prefix(ROUTE_TLS_CERTIFICATE_LINE))
}

/// Whether a rendered config's routes are TLS (a `tls {}` block inside its `cluster {}`).
pub fn routes_tls(text: &str) -> bool {
    text.lines()
        .skip_while(|l| *l != "cluster {")
        .take_while(|l| *l != "}")
        .any(|l| l == "  tls {")
}

/// Seconds as nats-server reads them: a whole number when whole.
fn seconds(ms: u64) -> serde_json::Value {
    if ms.is_multiple_of(1000) {
        serde_json::json!(ms / 1000)
    } else {
        serde_json::json!(ms as f64 / 1000.0)
    }
}

impl Node {
    /// The node with the route credential its cluster block renders into its include file and
    /// digest (a single server's node is returned as it is).
    pub fn with_route_credential(
        &self,
        credential: &crate::trust::route_auth::RouteCredential,
    ) -> Node {
        let mut node = self.clone();
        if let Some(c) = &mut node.cluster {
            c.credential = Some(credential.clone());
        }
        node
    }
}

/// A cluster node's `server_name` and `cluster {}` block. The routes are authenticated: the
/// block names an include file (beside the config) that holds the `authorization {}` the node
/// requires and the route URLs with the credential it presents (see [`crate::trust::route_auth`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClusterBlock {
    /// The cluster's name.
    pub name: String,
    /// The node's route listener, `host:port`.
    pub listen: String,
    /// The other nodes' route URLs (no user info), in the file's order.
    pub routes: Vec<String>,
    /// The include file's name, relative to the config's folder.
    pub routes_include: String,
    /// The route credential, where the caller holds it (an apply, `status`): needed for the
    /// include file and for the digest nats-server computes over the included values. A plan
    /// renders the text, which never holds it, without.
    pub credential: Option<crate::trust::route_auth::RouteCredential>,
    /// Mutual TLS on the routes (`[cluster.tls]`): `verify` always on.
    pub tls: Option<ListenerTls>,
    /// The rotation of the route credential the include holds, named in a comment (from the
    /// first rotation on), so a rotation changes the text and is planned.
    pub rotation: u64,
}

impl ClusterBlock {
    /// The include file's text: the credential the node requires of a route and the routes it
    /// opens with it. `None` without the credential.
    pub fn routes_include_text(&self) -> Option<String> {
        let c = self.credential.as_ref()?;
        let mut out = String::new();
        out.push_str("# Generated by cotal: this cluster's route credential. Secret: keep it 0600, beside the config that includes it.\n");
        out.push_str("authorization {\n");
        let _ = writeln!(out, "  user: {}", quote(&c.user));
        let _ = writeln!(out, "  password: {}", quote(c.password.expose()));
        out.push_str("}\nroutes: [\n");
        for r in &self.routes {
            let _ = writeln!(out, "  {}", quote(&c.route_url(r)));
        }
        out.push_str("]\n");
        Some(out)
    }
}

/// An account's token in the preload: a signed JWT, or a placeholder for one the plan will
/// mint (used only to show a planned config, never written).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Token<'a> {
    Signed(&'a str),
    /// A signed JWT whose reader checked it against this broker's trust: issued by the
    /// operator or one of its signing keys, for the preload's account (an observed space's,
    /// see `ObservedSpace::jwt`). The render does not decode it again (at thousands of spaces
    /// that decode was most of a render's time); it is still never preloaded twice.
    Verified(&'a str),
    Pending(&'a str),
}

impl<'a> Token<'a> {
    /// The token as it is preloaded.
    pub fn text(&self) -> &'a str {
        match *self {
            Token::Signed(t) | Token::Verified(t) | Token::Pending(t) => t,
        }
    }
}

/// One account to preload.
#[derive(Debug, Clone, Copy)]
pub struct Preload<'a> {
    pub space: &'a SpaceName,
    pub account: &'a str,
    pub token: Token<'a>,
    /// A side account of the space (`None`: the space's own account).
    pub side: Option<&'a crate::space::side_accounts::SideRole>,
}

/// The fingerprint of what a render preloads (placeholders included as given): the generation
/// record's `inventoryDigest`.
pub fn preloads_digest(preloads: &[Preload]) -> String {
    crate::trust::digest::inventory(
        preloads
            .iter()
            .map(|p| (p.space, p.account, p.token.text())),
    )
}

/// The first line of every rendered config.
pub const HEADER: &str = "# Generated by cotal from the account inventory. Do not edit: `cotal plan` reports edits as drift.";

/// The log is rotated at this size (`logfile_size_limit`), so it cannot fill the disk.
pub const LOG_SIZE_LIMIT: u64 = 10 << 20;
/// At most this many log files are kept, the live one included (`logfile_max_num`).
pub const LOG_MAX_FILES: u64 = 5;

/// A rendered config and the digest nats-server computes over it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rendered {
    pub text: String,
    /// What nats-server reports as `config_digest` (VARZ) once it loaded `text`: `sha256:` and
    /// the hex of the sha256 of its parsed config encoded as Go's `encoding/json` does (keys
    /// sorted, compact, HTML-safe string escapes, a final newline). Comments and layout do not
    /// count; only the values do.
    pub digest: String,
}

/// Render a node's `server.conf` (its text alone: a plan compares and shows it, and the
/// digest would cost more than the text). `preloads` must be in space-name order (a
/// `BTreeMap`'s order).
pub fn server_conf(
    broker: &BrokerTrust,
    preloads: &[Preload],
    node: &Node,
) -> Result<String, String> {
    check(broker, preloads)?;
    Ok(text(broker, preloads, node))
}

/// Render a node's `server.conf` with its digest (see [`Rendered::digest`]).
pub fn render(broker: &BrokerTrust, preloads: &[Preload], node: &Node) -> Result<Rendered, String> {
    check(broker, preloads)?;
    // The text and the digest are built side by side.
    let (text, digest) = rayon::join(
        || text(broker, preloads, node),
        || digest(broker, preloads, node),
    );
    Ok(Rendered { text, digest })
}

/// What every render refuses: zero preloads, and the first preload (in order) repeated or of
/// another issuer or subject.
fn check(broker: &BrokerTrust, preloads: &[Preload]) -> Result<(), String> {
    if preloads.is_empty() {
        return Err(
            "refusing to render a config with zero spaces: a broker needs at least one (the last space is removed by the broker-wide teardown)".into(),
        );
    }
    // The first preload (in order) that is refused: a repeated account, or (decoded on every
    // core, where most of a render's time at thousands of spaces goes) a token of another
    // issuer or subject. The same refusal whatever the number of cores.
    let mut seen = BTreeSet::from([broker.sys_pub.as_str()]);
    if let Some((public, _)) = &broker.monitor {
        seen.insert(public.as_str());
    }
    // A pending token is a placeholder of the plan's display; only real keys must be unique.
    let repeated = preloads
        .iter()
        .position(|p| {
            matches!(p.token, Token::Signed(_) | Token::Verified(_)) && !seen.insert(p.account)
        })
        .map(|i| {
            let p = &preloads[i];
            let why = format!(
                "account {} is preloaded twice (space {:?} repeats it)",
                p.account,
                p.space.as_str()
            );
            (i, why)
        });
    let refused = preloads
        .par_iter()
        .enumerate()
        .map(|(i, p)| match p.token {
            Token::Signed(token) => check_issuer(broker, p, token).map_err(|e| (i, e)),
            Token::Verified(_) | Token::Pending(_) => Ok(()),
        })
        .find_first(Result::is_err)
        .and_then(Result::err);
    // The earlier preload's refusal; at the same preload the repeat's (`min_by_key` keeps the
    // first of equals), as when each preload was checked for both in turn.
    if let Some((_, why)) = [repeated, refused]
        .into_iter()
        .flatten()
        .min_by_key(|(i, _)| *i)
    {
        return Err(why);
    }
    Ok(())
}

/// The text of a render, of preloads [`check`] passed (it checks nothing itself).
fn text(broker: &BrokerTrust, preloads: &[Preload], node: &Node) -> String {
    // Sized for the preloads, most of the text at thousands of spaces (a buffer grown as it
    // is written copies it, and touches fresh memory, several times over).
    let preloaded: usize = preloads
        .iter()
        .map(|p| 32 + 2 * p.space.as_str().len() + p.account.len() + p.token.text().len())
        .sum();
    let included = node.include.as_ref().map_or(0, |inc| inc.text.len());
    let mut out = String::with_capacity(
        4096 + preloaded
            + included
            + broker.operator_jwt.len()
            + broker.sys_jwt.len()
            + broker
                .monitor
                .as_ref()
                .map_or(0, |(_, jwt)| jwt.len() + 128),
    );
    out.push_str(HEADER);
    out.push('\n');
    let _ = writeln!(out, "host: {}", quote(&node.host));
    let _ = writeln!(out, "port: {}", node.port);
    if let Some(line) = node.monitoring_line() {
        out.push_str(&line);
        out.push('\n');
    }
    if let Some(t) = &node.tls {
        t.certificate_comment(&mut out, TLS_CERTIFICATE_LINE);
        tls_block(&mut out, "", t, true);
    }
    if let Some(w) = &node.websocket {
        out.push_str(&websocket_block(w, node.tls.as_ref()));
    }
    if let Some(c) = &node.cluster {
        let _ = writeln!(out, "server_name: {}", quote(&node.name));
        out.push_str("cluster {\n");
        let _ = writeln!(out, "  name: {}", quote(&c.name));
        let _ = writeln!(out, "  listen: {}", quote(&c.listen));
        // The routes, for people and plans: the include opens them with the credential it
        // holds, which this file never does.
        for r in &c.routes {
            let _ = writeln!(out, "  # route: {r}");
        }
        out.push_str(
            "  # the route credential (required of every route) and the routes with it:\n",
        );
        let _ = writeln!(out, "  include {}", quote(&c.routes_include));
        if c.rotation > 0 {
            let _ = writeln!(
                out,
                "{}{} (cotal rotate routes)",
                crate::trust::route_auth::ROTATION_LINE,
                c.rotation
            );
        }
        if let Some(t) = &c.tls {
            t.certificate_comment(&mut out, ROUTE_TLS_CERTIFICATE_LINE);
            tls_block(&mut out, "  ", t, true);
        }
        out.push_str("}\n");
    }
    let _ = writeln!(out, "max_control_line: {MAX_CONTROL_LINE}");
    if node.log_rotation {
        let _ = writeln!(out, "logfile_size_limit: {LOG_SIZE_LIMIT}");
        let _ = writeln!(out, "logfile_max_num: {LOG_MAX_FILES}");
    }
    out.push_str("jetstream {\n");
    let _ = writeln!(
        out,
        "  store_dir: {}",
        quote(&node.store_dir.to_string_lossy())
    );
    if let Some(n) = node.max_file_store {
        let _ = writeln!(out, "  max_file_store: {n}");
    }
    if let Some(n) = node.max_memory_store {
        let _ = writeln!(out, "  max_memory_store: {n}");
    }
    out.push_str("}\n");
    if let Some(inc) = &node.include {
        let _ = writeln!(
            out,
            "# include {} (operator-owned: [broker] include in cotal.toml)",
            inc.path
        );
        out.push_str(&inc.text);
        if !inc.text.ends_with('\n') && !inc.text.is_empty() {
            out.push('\n');
        }
        let _ = writeln!(out, "# end of include {}", inc.path);
    }
    let _ = writeln!(out, "operator: {}", quote(&broker.operator_jwt));
    let _ = writeln!(out, "system_account: {}", broker.sys_pub);
    out.push_str("resolver: MEMORY\n");
    out.push_str("resolver_preload {\n");
    for p in preloads {
        out.push_str("  # space ");
        push_quoted(&mut out, p.space.as_str());
        if let Some(role) = p.side {
            let _ = write!(out, ": its {role} account");
        }
        out.push_str("\n  ");
        out.push_str(p.account);
        out.push_str(": ");
        push_quoted(&mut out, p.token.text());
        out.push('\n');
    }
    if let Some((public, jwt)) = &broker.monitor {
        out.push_str("  # monitoring account (`cotal creds --system monitor`)\n");
        let _ = writeln!(out, "  {public}: {}", quote(jwt));
    }
    out.push_str("  # system account\n");
    let _ = writeln!(out, "  {}: {}", broker.sys_pub, quote(&broker.sys_jwt));
    out.push_str("}\n");
    out
}

const MAX_CONTROL_LINE: u64 = 65536;

/// The digest nats-server computes over the parsed form of what [`render`] writes.
fn digest(broker: &BrokerTrust, preloads: &[Preload], node: &Node) -> String {
    use serde_json::{Value, json};
    let mut preload = serde_json::Map::new();
    for p in preloads {
        preload.insert(
            p.account.to_string(),
            Value::String(p.token.text().to_string()),
        );
    }
    preload.insert(
        broker.sys_pub.clone(),
        Value::String(broker.sys_jwt.clone()),
    );
    if let Some((public, jwt)) = &broker.monitor {
        preload.insert(public.clone(), Value::String(jwt.clone()));
    }
    let mut jetstream = serde_json::Map::new();
    jetstream.insert(
        "store_dir".into(),
        Value::String(node.store_dir.to_string_lossy().into_owned()),
    );
    if let Some(n) = node.max_file_store {
        jetstream.insert("max_file_store".into(), json!(n));
    }
    if let Some(n) = node.max_memory_store {
        jetstream.insert("max_memory_store".into(), json!(n));
    }
    // serde_json's map is ordered by key, as Go's encoder orders map keys.
    let mut parsed = json!({
        "host": node.host,
        "port": node.port,
        "max_control_line": MAX_CONTROL_LINE,
        "jetstream": jetstream,
        "operator": broker.operator_jwt,
        "system_account": broker.sys_pub,
        "resolver": "MEMORY",
        "resolver_preload": preload,
    });
    if node.log_rotation {
        parsed["logfile_size_limit"] = json!(LOG_SIZE_LIMIT);
        parsed["logfile_max_num"] = json!(LOG_MAX_FILES);
    }
    if let Some(inc) = &node.include {
        for (key, value) in &inc.values {
            parsed[key.as_str()] = value.clone();
        }
    }
    if let Some(w) = &node.websocket {
        parsed["websocket"] = match (&node.tls, w.no_tls) {
            (Some(t), false) => {
                json!({ "host": w.host, "port": w.port, "tls": parsed_tls(t, false) })
            }
            _ => json!({ "host": w.host, "port": w.port, "no_tls": true }),
        };
    }
    if let Some(m) = &node.monitoring {
        parsed[if m.https { "https" } else { "http" }] = json!(format!("{}:{}", m.host, m.port));
    }
    if let Some(t) = &node.tls {
        parsed["tls"] = parsed_tls(t, true);
    }
    if let Some(c) = &node.cluster {
        parsed["server_name"] = json!(node.name);
        // nats-server digests the parsed config with its includes inlined.
        parsed["cluster"] = match &c.credential {
            Some(cred) => json!({
                "name": c.name,
                "listen": c.listen,
                "authorization": { "user": cred.user, "password": cred.password.expose() },
                "routes": c.routes.iter().map(|r| cred.route_url(r)).collect::<Vec<_>>(),
            }),
            None => json!({ "name": c.name, "listen": c.listen }),
        };
        if let Some(t) = &c.tls {
            parsed["cluster"]["tls"] = parsed_tls(t, true);
        }
    }
    parsed_digest(&parsed)
}

/// The digest nats-server reports for a config it parsed to `parsed`: the sha256 of Go's
/// `encoding/json` form of it (keys sorted, compact, HTML-safe escapes) and a newline.
pub fn parsed_digest(parsed: &serde_json::Value) -> String {
    let mut encoded = go_html_safe(parsed.to_string());
    encoded.push('\n');
    crate::trust::digest::sha256(encoded.as_bytes())
}

/// A `tls {}` block as nats-server parses what [`tls_block`] writes.
fn parsed_tls(t: &ListenerTls, timeout: bool) -> serde_json::Value {
    let mut tls = serde_json::Map::new();
    tls.insert("cert_file".into(), serde_json::json!(t.cert_file));
    tls.insert("key_file".into(), serde_json::json!(t.key_file));
    if let Some(ca) = &t.ca_file {
        tls.insert("ca_file".into(), serde_json::json!(ca));
    }
    if t.verify {
        tls.insert("verify".into(), serde_json::json!(true));
    }
    if let Some(ms) = t.timeout_ms.filter(|_| timeout) {
        tls.insert("timeout".into(), seconds(ms));
    }
    serde_json::Value::Object(tls)
}

/// Go's `encoding/json` escapes `<`, `>`, `&`, U+2028 and U+2029 inside strings; serde_json
/// does not. Outside strings JSON never holds these characters, so a plain replace is exact.
fn go_html_safe(json: String) -> String {
    // Almost always none of them is there (a JWT is base64url): then the text is returned as
    // it is, after a scan of its bytes (`&`, `<`, `>`, and 0xE2, the first byte of U+2028 and
    // U+2029 in UTF-8), rather than copied a character at a time.
    if !json.bytes().any(|b| matches!(b, b'<' | b'>' | b'&' | 0xE2)) {
        return json;
    }
    let mut out = String::with_capacity(json.len());
    for c in json.chars() {
        match c {
            '<' => out.push_str("\\u003c"),
            '>' => out.push_str("\\u003e"),
            '&' => out.push_str("\\u0026"),
            '\u{2028}' => out.push_str("\\u2028"),
            '\u{2029}' => out.push_str("\\u2029"),
            c => out.push(c),
        }
    }
    out
}

/// What cotal reads back from a promoted config: the parts it decides on (the listener, the
/// preloaded accounts). The inverse of [`server_conf`] for those parts; a hand-edited file is
/// read as far as it follows the rendered layout.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Promoted {
    pub host: Option<String>,
    pub port: Option<u16>,
    /// The JetStream store folder its `jetstream {}` block names.
    pub store_dir: Option<String>,
    /// Account public keys in `resolver_preload`, the system account included.
    pub accounts: BTreeSet<String>,
}

impl Promoted {
    /// Whether the config preloads `account`.
    pub fn loads(&self, account: &str) -> bool {
        self.accounts.contains(account)
    }
}

/// Read a promoted config back. Pure.
pub fn read_promoted(text: &str) -> Promoted {
    let mut out = Promoted::default();
    let mut in_preload = false;
    for line in text.lines() {
        let trimmed = line.trim();
        if in_preload {
            if trimmed == "}" {
                in_preload = false;
            } else if let Some((key, _)) = trimmed.split_once(": ")
                && !key.starts_with('#')
            {
                out.accounts.insert(key.trim().to_string());
            }
            continue;
        }
        if trimmed.starts_with("resolver_preload") && trimmed.ends_with('{') {
            in_preload = true;
        } else if let Some(v) = line.strip_prefix("host: ") {
            out.host = Some(
                serde_json::from_str::<String>(v.trim()).unwrap_or_else(|_| v.trim().to_string()),
            );
        } else if let Some(v) = line.strip_prefix("port: ") {
            out.port = v.trim().parse().ok();
        } else if let Some(v) = line.strip_prefix("  store_dir: ") {
            out.store_dir = Some(
                serde_json::from_str::<String>(v.trim()).unwrap_or_else(|_| v.trim().to_string()),
            );
        }
    }
    out
}

fn check_issuer(broker: &BrokerTrust, p: &Preload, token: &str) -> Result<(), String> {
    let claims: jwt::Claims<AccountNats> = unverified_claims(token).ok_or_else(|| {
        format!(
            "the account JWT of space {:?} does not decode",
            p.space.as_str()
        )
    })?;
    if !broker.signs_accounts(&claims.iss) {
        return Err(format!(
            "the account of space {:?} is signed by another operator ({}); refusing to preload it",
            p.space.as_str(),
            claims.iss
        ));
    }
    if claims.sub != p.account {
        return Err(format!(
            "the account JWT of space {:?} is for {}, not {}",
            p.space.as_str(),
            claims.sub,
            p.account
        ));
    }
    Ok(())
}

/// Decode a token's claims without verifying it (for tokens already verified on read).
fn unverified_claims<T: serde::de::DeserializeOwned>(token: &str) -> Option<jwt::Claims<T>> {
    use base64::Engine as _;
    let body = token.split('.').nth(1)?;
    let bytes = base64::engine::general_purpose::URL_SAFE_NO_PAD
        .decode(body)
        .ok()?;
    serde_json::from_slice(&bytes).ok()
}

/// A double-quoted config string. Inputs are validated to hold no quote, backslash or control
/// character; JSON escaping is a superset of what nats-server's parser reads back.
fn quote(s: &str) -> String {
    serde_json::to_string(s).expect("string")
}

/// Append [`quote`]`(s)`, without a copy of `s` when nothing in it is escaped (a token never
/// is).
fn push_quoted(out: &mut String, s: &str) {
    if s.bytes().any(|b| b == b'"' || b == b'\\' || b < 0x20) {
        out.push_str(&quote(s));
    } else {
        out.push('"');
        out.push_str(s);
        out.push('"');
    }
}

/// Whether a rendered line is one of a node's own (its listener, server name, cluster block or
/// store), which differ between the nodes of one cluster. `in_cluster` tracks the block.
fn node_line(line: &str, in_cluster: &mut bool) -> bool {
    if *in_cluster {
        if line == "}" {
            *in_cluster = false;
        }
        return true;
    }
    if line == "cluster {" {
        *in_cluster = true;
        return true;
    }
    ["host: ", "port: ", "server_name: ", "  store_dir: "]
        .iter()
        .any(|p| line.starts_with(p))
}

/// A rendered config without the node's own lines: what every node of a cluster shares.
pub fn shared_part(conf: &str) -> String {
    let mut in_cluster = false;
    conf.lines()
        .filter(|l| !node_line(l, &mut in_cluster))
        .collect::<Vec<_>>()
        .join("\n")
}

/// Only the node's own lines of a rendered config.
pub fn node_part(conf: &str) -> String {
    let mut in_cluster = false;
    conf.lines()
        .filter(|l| node_line(l, &mut in_cluster))
        .collect::<Vec<_>>()
        .join("\n")
}

/// Replace every JWT in a rendered config with its shortened form, for display.
pub fn shorten_tokens(conf: &str) -> String {
    conf.lines()
        .map(|line| {
            let (prefix, value) = match line.rfind(": \"eyJ") {
                Some(i) => (&line[..i + 2], &line[i + 2..]),
                None => return line.to_string(),
            };
            let token = value.trim_matches('"');
            format!("{prefix}\"{}\"", jwt::shorten(token))
        })
        .collect::<Vec<_>>()
        .join("\n")
        + if conf.ends_with('\n') { "\n" } else { "" }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn trust() -> BrokerTrust {
        BrokerTrust {
            operator_pub: "OP".into(),
            operator_signing: Vec::new(),
            operator_jwt: "eyJop.x.y".into(),
            sys_pub: "ASYS".into(),
            sys_jwt: "eyJsys.x.y".into(),
            monitor: None,
        }
    }

    #[test]
    fn a_promoted_config_reads_back_its_listener_and_accounts() {
        let space = SpaceName::parse("design").unwrap();
        let node = Node {
            name: "n".into(),
            host: "0.0.0.0".into(),
            port: 4333,
            cluster: None,
            store_dir: "/srv/s".into(),
            max_file_store: None,
            max_memory_store: None,
            tls: None,
            monitoring: None,
            websocket: None,
            include: None,
            log_rotation: true,
        };
        let text = render(
            &trust(),
            &[Preload {
                space: &space,
                account: "ADESIGN",
                token: Token::Pending("(minted at apply)"),
                side: None,
            }],
            &node,
        )
        .unwrap()
        .text;
        let view = read_promoted(&text);
        assert_eq!(view.host.as_deref(), Some("0.0.0.0"));
        assert_eq!(view.port, Some(4333));
        assert!(view.loads("ADESIGN") && view.loads("ASYS"));
        assert!(!view.loads("design"), "comments are not accounts");
        assert_eq!(view.accounts.len(), 2);
        assert!(rotates_logs(&text));
        assert_eq!(resolver_of(&text).as_deref(), Some("MEMORY"));
        let quiet = render(
            &trust(),
            &[Preload {
                space: &space,
                account: "ADESIGN",
                token: Token::Pending("(minted at apply)"),
                side: None,
            }],
            &Node {
                log_rotation: false,
                ..node
            },
        )
        .unwrap()
        .text;
        assert!(!rotates_logs(&quiet), "{quiet}");
    }

    #[test]
    fn the_resolver_of_a_foreign_config_is_read_in_each_of_its_forms() {
        for (text, want) in [
            ("resolver: MEMORY\nresolver_preload: {\n}\n", Some("MEMORY")),
            ("resolver = \"MEMORY\"\n", Some("MEMORY")),
            ("resolver: {\n  type: full\n  dir: './jwt'\n}\n", Some("{")),
            ("resolver_preload {\n}\n", None),
            ("port: 4222\n", None),
        ] {
            assert_eq!(resolver_of(text).as_deref(), want, "{text}");
        }
    }

    #[test]
    fn a_string_is_quoted_alike_with_or_without_a_copy() {
        for s in [
            "",
            "plain.token-_9",
            "d\u{e9}sign",
            "a\"b",
            "back\\slash",
            "tab\there",
            "nul\u{0}",
            "\u{7f}del",
        ] {
            let mut out = String::from("x");
            push_quoted(&mut out, s);
            assert_eq!(out, format!("x{}", quote(s)), "{s:?}");
        }
    }

    #[test]
    fn the_digest_escapes_strings_as_go_does() {
        assert_eq!(
            go_html_safe("{\"a\":\"<&>\u{2028}\u{2029}\"}".into()),
            "{\"a\":\"\\u003c\\u0026\\u003e\\u2028\\u2029\"}"
        );
        // Each alone takes the escaping path, and text without any is returned unchanged
        // (other characters whose UTF-8 begins with 0xE2 included).
        for (raw, want) in [
            ("\"<\"", "\"\\u003c\""),
            ("\">\"", "\"\\u003e\""),
            ("\"&\"", "\"\\u0026\""),
            ("\"\u{2028}\"", "\"\\u2028\""),
            ("\"\u{2029}\"", "\"\\u2029\""),
            (
                "\"eyJ0eXAi.x-_\u{2013}\u{20ac}\"",
                "\"eyJ0eXAi.x-_\u{2013}\u{20ac}\"",
            ),
        ] {
            assert_eq!(go_html_safe(raw.into()), want, "{raw}");
        }
    }
}
