//! Adoption of a root the original (TypeScript) Cotal made: what was found and what adopting it
//! does, as values. Pure: [`plan`] is a function of a [`Survey`] (read by `ops::adopt`), and
//! [`desired_text`] of the records and the original's `server.conf`.
//!
//! The original's records are cotal's formats (`broker.json` without system keys,
//! `account.<hex>.json`), so adoption keeps every key and migrates only what the original left
//! in older places: the legacy monolith `auth/auth.json` (split into its two records, then kept
//! as `auth.json.adopted`), the P7 material at the root of `.cotal/` (moved into the one space's
//! `.cotal/space.<hex>/`, refused when the root holds more than one space: its owner cannot be
//! established, seed 000 §5 and P7), and a `cotal.toml` declaring what is there.
//!
//! Invariants: a refusal changes nothing; the `cotal.toml` adoption writes parses (it is checked
//! with the parser cotal plans with) and declares every recorded space with the limits its
//! account JWT carries, so the first plan removes nothing; an existing `cotal.toml` is never
//! overwritten; a second adoption of an adopted root has no step.
//!
//! The room of what other tools and brokers hand over: the original Cotal's root (this module), an
//! nsc store (`nsc`), a space moved from another broker (`relocation`).

pub mod nsc;
pub mod relocation;

use crate::diagnostic::Diagnostic;
use crate::model::SpaceName;
use crate::trust::jwt::AccountLimits;
use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

/// The P7 material the original keeps per space (at the root of `.cotal/` on older roots).
pub const MATERIAL: [&str; 5] = [
    "membership-observer.creds",
    "connection-evictor.creds",
    "membership-rw.creds",
    "delivery.creds",
    "membership.json",
];

/// Of [`MATERIAL`], the $SYS pair: signed by the system signing key, so a system rotation
/// replaces them (cotal re-mints both).
pub const SYS_PAIR: [&str; 2] = ["membership-observer.creds", "connection-evictor.creds"];

/// A file as found: its path and why it cannot be used.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Unusable {
    pub file: PathBuf,
    pub reason: String,
}

/// The broker record as found.
#[derive(Debug, Clone)]
pub enum FoundBroker {
    Absent,
    Corrupt(Unusable),
    /// Valid: its operator's public key.
    Valid {
        operator: String,
    },
}

/// The monolith as found (`None` in [`Survey::monolith`]: absent).
#[derive(Debug, Clone)]
pub enum FoundMonolith {
    Corrupt(Unusable),
    /// Parsed and consistent (its operator signed its account and system account).
    Valid {
        file: PathBuf,
        /// Its space's name, as written.
        space: String,
        /// Its account's public key and the limits its JWT carries.
        account: String,
        limits: AccountLimits,
        operator: String,
    },
}

/// One valid account record as found.
#[derive(Debug, Clone)]
pub struct FoundSpace {
    pub account: String,
    pub limits: AccountLimits,
    /// Protection recorded by cotal's `lifecycle.json` for this account.
    pub protect: bool,
}

/// A file of the P7 material as found: its name and bytes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MaterialFile {
    pub name: String,
    pub bytes: Vec<u8>,
}

/// Everything adoption reads, read once under the lock.
#[derive(Debug, Clone)]
pub struct Survey {
    /// The root's folder (for relative paths in the `cotal.toml` written).
    pub root_dir: PathBuf,
    /// `cotal.toml` exists.
    pub desired_exists: bool,
    pub broker: FoundBroker,
    pub monolith: Option<FoundMonolith>,
    /// The valid account records (of the broker record's operator, else the monolith's).
    pub spaces: BTreeMap<SpaceName, FoundSpace>,
    /// Account records that are not valid records of that operator.
    pub corrupt: Vec<Unusable>,
    /// The P7 material at the root of `.cotal/`.
    pub root_material: Vec<MaterialFile>,
    /// The P7 material already in each space's folder: what a move would meet, and whether
    /// the original minted connection evictors.
    pub space_material: BTreeMap<SpaceName, Vec<MaterialFile>>,
    /// The rendered `server.conf`, when there is one.
    pub server_conf: Option<String>,
    /// The root keeps system signing keys (cotal's scoped keys, or the legacy `sys.seed`).
    pub sys_keys: bool,
    /// A nats-server started on this root's `server.conf` runs.
    pub running: bool,
}

/// One step of an adoption, in the order they run.
#[derive(Debug, Clone)]
pub enum Step {
    /// Write the monolith's records that are missing (its broker record, its space's account
    /// record), then keep the monolith as `auth.json.adopted` (read by nothing).
    SplitMonolith {
        file: PathBuf,
        write_broker: bool,
        /// The space whose account record is written (`None`: it exists already).
        write_account: Option<SpaceName>,
    },
    /// Move root-scoped material into `space`'s folder (a file already there with the same
    /// bytes: only the root's copy is removed).
    MoveMaterial {
        space: SpaceName,
        files: Vec<String>,
    },
    /// Write `cotal.toml`.
    WriteDesired { text: String },
}

/// The system rotation the root needs (its signing seed was stripped by the original).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Rotation {
    /// The root keeps system keys.
    NotNeeded,
    /// The broker is stopped: adoption runs `cotal rotate sys`.
    Run,
    /// The broker runs: the operator stops it, rotates, and starts it (a rotation needs the
    /// broker stopped when no system key is left to reach it with).
    Tell,
}

/// What adopting the root does.
#[derive(Debug, Clone)]
pub struct Adoption {
    /// What was found, for people.
    pub found: Vec<String>,
    pub steps: Vec<Step>,
    pub rotation: Rotation,
    /// What is kept as it is or not carried, for people.
    pub notes: Vec<String>,
}

impl Adoption {
    /// Nothing to write and nothing to rotate.
    pub fn is_noop(&self) -> bool {
        self.steps.is_empty() && self.rotation == Rotation::NotNeeded
    }
}

const NOTHING_CHANGED: &str = "none, nothing was changed.";

/// What adopting the surveyed root does, or why it is refused.
pub fn plan(s: &Survey) -> Result<Adoption, Diagnostic> {
    let mut found = Vec::new();
    let mut steps = Vec::new();
    let mut notes = Vec::new();

    // The trust: the broker record, the monolith, or both of one operator.
    let operator = trusted_operator(s)?;
    found.push(format!("operator {operator}"));
    refuse_corrupt_records(s, &operator)?;

    // The spaces: the records, and the monolith's space when its record is missing.
    let mut spaces = s.spaces.clone();
    steps.extend(monolith_step(s, &mut spaces, &mut found)?);
    for (name, space) in &spaces {
        found.push(format!(
            "space {} (account {})",
            name.quoted(),
            space.account
        ));
    }
    if spaces.is_empty() {
        notes.push("no space is recorded: the cotal.toml written declares none".into());
    }
    steps.extend(root_material_step(s, &spaces, &mut found)?);
    steps.extend(desired_step(s, &spaces, &mut notes)?);

    let rotation = match (s.sys_keys, s.running) {
        (true, _) => Rotation::NotNeeded,
        (false, false) => Rotation::Run,
        (false, true) => Rotation::Tell,
    };
    if rotation != Rotation::NotNeeded {
        found.push("no system signing key (the original strips it before writing)".into());
    }
    Ok(Adoption {
        found,
        steps,
        rotation,
        notes,
    })
}

/// The operator whose trust the root holds: the broker record's, the monolith's, or both when
/// they agree.
fn trusted_operator(s: &Survey) -> Result<String, Diagnostic> {
    let operator = match (&s.broker, &s.monolith) {
        (FoundBroker::Corrupt(u), _) => return Err(corrupt(u, "the broker record")),
        (_, Some(FoundMonolith::Corrupt(u))) => {
            return Err(corrupt(u, "the legacy monolith"));
        }
        (FoundBroker::Absent, None) => {
            return Err(Diagnostic::refusal(
                "this root holds neither a broker record (.cotal/auth/broker.json) nor the original's legacy monolith (.cotal/auth/auth.json): there is nothing of the original Cotal to adopt.",
                NOTHING_CHANGED,
                "run `cotal adopt` in the root the original Cotal made (--root DIR), or `cotal init` to start a new broker",
            ));
        }
        (FoundBroker::Valid { operator }, None) => operator.clone(),
        (FoundBroker::Absent, Some(FoundMonolith::Valid { operator, .. })) => operator.clone(),
        (
            FoundBroker::Valid { operator },
            Some(FoundMonolith::Valid {
                operator: other,
                file,
                ..
            }),
        ) if operator != other => {
            return Err(Diagnostic::refusal(
                format!(
                    "{} holds operator {other}, but .cotal/auth/broker.json holds operator {operator}: two brokers' trust in one root, and which one its clients use cannot be told from here.",
                    file.display()
                ),
                NOTHING_CHANGED,
                "keep the trust of the broker this root serves (its server.conf names the operator) and move the other file out of .cotal/auth/, then adopt again",
            ));
        }
        (FoundBroker::Valid { operator }, Some(_)) => operator.clone(),
    };
    Ok(operator)
}

/// Refused when an account record is not a valid record of `operator`: each may be a real
/// tenant.
fn refuse_corrupt_records(s: &Survey, operator: &str) -> Result<(), Diagnostic> {
    if !s.corrupt.is_empty() {
        let files: Vec<String> = s
            .corrupt
            .iter()
            .map(|u| format!("{} ({})", u.file.display(), u.reason))
            .collect();
        return Err(Diagnostic::refusal(
            format!(
                "{} account record(s) of this root are not valid records of operator {operator}: {}. Each may be a real tenant, so adoption does not guess.",
                files.len(),
                files.join("; ")
            ),
            NOTHING_CHANGED,
            "restore each named record from a backup, or move it out of .cotal/auth/ if it is no tenant of this broker, then adopt again",
        ));
    }
    Ok(())
}

/// The legacy monolith's space, added to `spaces` when its record is missing, and the step
/// that splits the monolith.
fn monolith_step(
    s: &Survey,
    spaces: &mut BTreeMap<SpaceName, FoundSpace>,
    found: &mut Vec<String>,
) -> Result<Option<Step>, Diagnostic> {
    if let Some(FoundMonolith::Valid {
        file,
        space,
        account,
        limits,
        ..
    }) = &s.monolith
    {
        let name = SpaceName::from_record(space).map_err(|e| {
            corrupt(
                &Unusable {
                    file: file.clone(),
                    reason: format!("its space name: {e}"),
                },
                "the legacy monolith",
            )
        })?;
        let write_account = match spaces.get(&name) {
            Some(existing) if existing.account != *account => {
                return Err(Diagnostic::refusal(
                    format!(
                        "{} gives space {} account {account}, but its record .cotal/auth/account.{}.json holds account {}: which one its clients use cannot be told from here.",
                        file.display(),
                        name.quoted(),
                        name.hex(),
                        existing.account
                    ),
                    NOTHING_CHANGED,
                    "keep the record of the account the broker serves (its server.conf preloads it) and move the other file aside, then adopt again",
                ));
            }
            Some(_) => None,
            None => {
                spaces.insert(
                    name.clone(),
                    FoundSpace {
                        account: account.clone(),
                        limits: *limits,
                        protect: false,
                    },
                );
                Some(name.clone())
            }
        };
        found.push(format!(
            "the legacy monolith {} (space {})",
            file.display(),
            name.quoted()
        ));
        return Ok(Some(Step::SplitMonolith {
            file: file.clone(),
            write_broker: matches!(s.broker, FoundBroker::Absent),
            write_account,
        }));
    }
    Ok(None)
}

/// Root-scoped material: moved to the one space it can belong to.
fn root_material_step(
    s: &Survey,
    spaces: &BTreeMap<SpaceName, FoundSpace>,
    found: &mut Vec<String>,
) -> Result<Option<Step>, Diagnostic> {
    if !s.root_material.is_empty() {
        let names: Vec<&str> = s.root_material.iter().map(|f| f.name.as_str()).collect();
        found.push(format!(
            "root-scoped P7 material in .cotal/: {}",
            names.join(", ")
        ));
        let owner = match spaces.keys().collect::<Vec<_>>().as_slice() {
            [one] => (*one).clone(),
            others => {
                return Err(Diagnostic::refusal(
                    format!(
                        "the root of .cotal/ holds P7 material ({}) on a root of {} spaces: whose it is cannot be established (the original's own rule, seed 000 P7).",
                        names.join(", "),
                        others.len()
                    ),
                    NOTHING_CHANGED,
                    "move each file into the .cotal/space.<hex>/ folder of the space it belongs to (membership.json names its account), or delete the $SYS pair (cotal re-mints it), then adopt again",
                ));
            }
        };
        let account = &spaces[&owner].account;
        if let Some(m) = s.root_material.iter().find(|f| f.name == "membership.json") {
            let named = serde_json::from_slice::<serde_json::Value>(&m.bytes)
                .ok()
                .and_then(|v| v.get("accountId")?.as_str().map(str::to_string));
            if named.as_deref() != Some(account.as_str()) {
                return Err(Diagnostic::refusal(
                    format!(
                        ".cotal/membership.json names account {}, not {}'s {account}: the root-scoped material is not the one space's.",
                        named.as_deref().unwrap_or("(none: unreadable)"),
                        owner.quoted()
                    ),
                    NOTHING_CHANGED,
                    "move the root-scoped material aside (cotal re-mints the $SYS pair), then adopt again",
                ));
            }
        }
        let present = s.space_material.get(&owner).cloned().unwrap_or_default();
        for f in &s.root_material {
            if let Some(there) = present.iter().find(|p| p.name == f.name)
                && there.bytes != f.bytes
            {
                return Err(Diagnostic::refusal(
                    format!(
                        ".cotal/{} and .cotal/space.{}/{} both exist and differ: which one the space's processes use cannot be told from here.",
                        f.name,
                        owner.hex(),
                        f.name
                    ),
                    NOTHING_CHANGED,
                    "keep the one the space's processes use and delete the other, then adopt again",
                ));
            }
        }
        return Ok(Some(Step::MoveMaterial {
            space: owner,
            files: names.iter().map(|n| n.to_string()).collect(),
        }));
    }
    Ok(None)
}

/// cotal.toml: written when absent, from the records and the original's server.conf.
fn desired_step(
    s: &Survey,
    spaces: &BTreeMap<SpaceName, FoundSpace>,
    notes: &mut Vec<String>,
) -> Result<Option<Step>, Diagnostic> {
    let conf = match &s.server_conf {
        Some(text) => Some(parse_server_conf(text).map_err(|e| {
            Diagnostic::refusal(
                format!(".cotal/auth/server.conf cannot be read as the original renders it: {e}."),
                NOTHING_CHANGED,
                "restore the original's server.conf (or write cotal.toml by hand and adopt again: an existing cotal.toml is kept)",
            )
        })?),
        None => None,
    };
    if s.desired_exists {
        notes.push("cotal.toml exists: kept as it is (review that it declares every space above: `cotal plan` removes a space it does not declare)".into());
    } else {
        let conf = conf.unwrap_or_else(|| {
            notes.push(
                "no server.conf: the listener and store are cotal's defaults (127.0.0.1:4222, .cotal/nats)".into(),
            );
            OriginalConf::default()
        });
        notes.extend(conf.ignored.iter().map(|k| {
            format!("server.conf sets `{k}`, which cotal does not model: not carried (an include file can set client tuning, `[broker] include`)")
        }));
        // The original minted each space a connection evictor: an adopted root keeps minting
        // one (cotal mints it only when asked, its KICK being broker-wide).
        let evictor = s
            .root_material
            .iter()
            .chain(s.space_material.values().flatten())
            .any(|f| f.name == "connection-evictor.creds");
        if evictor {
            notes.push("the original minted each space a connection evictor: `evictor_creds = true` keeps one (its KICK is broker-wide)".into());
        }
        let text = desired_text(
            spaces,
            &conf,
            &Origin {
                source: "the original Cotal's records and server.conf",
                root: &s.root_dir,
                evictor,
                config: None,
                default_host: "127.0.0.1",
            },
        );
        crate::desired::parse(&text, "cotal.toml (as adoption would write it)").map_err(|e| {
            Diagnostic::refusal(
                format!("the cotal.toml adoption would write is refused by cotal's own checks: {e}"),
                NOTHING_CHANGED,
                "write cotal.toml by hand with what the error names changed (adoption keeps an existing cotal.toml), then adopt again",
            )
        })?;
        return Ok(Some(Step::WriteDesired { text }));
    }
    Ok(None)
}

fn corrupt(u: &Unusable, what: &str) -> Diagnostic {
    Diagnostic::refusal(
        format!(
            "{what} {} cannot be adopted: {}.",
            u.file.display(),
            u.reason
        ),
        NOTHING_CHANGED,
        "restore the file from a backup (it holds the keys every client's creds chain to), then adopt again",
    )
}

/// What the original's `server.conf` says about where clients find the broker.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct OriginalConf {
    pub host: Option<String>,
    pub port: Option<u16>,
    pub store_dir: Option<String>,
    /// `tls { cert_file, key_file }`.
    pub tls: Option<(String, String)>,
    pub websocket: Option<OriginalWebsocket>,
    /// Top-level settings cotal does not model (names only).
    pub ignored: Vec<String>,
    /// It rotates its log (`logfile_size_limit`, `logfile_max_num`).
    pub rotates_logs: bool,
    /// Its account resolver: `MEMORY`, or the `type` of a `resolver {}` block (`full`,
    /// `cache`), as written.
    pub resolver: Option<String>,
    /// The `dir` of a `resolver {}` block: where a `full` resolver keeps the account JWTs.
    pub resolver_dir: Option<String>,
    /// `operator`: the operator's JWT, or the path of a file holding it, as written.
    pub operator: Option<String>,
    /// `system_account`: the system account's public key, as written.
    pub system_account: Option<String>,
}

/// The original's `websocket {}` block.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct OriginalWebsocket {
    pub host: Option<String>,
    pub port: u16,
    pub no_tls: bool,
}

/// The settings cotal renders itself or carries (`max_control_line` is rendered as the
/// original renders it).
const RENDERED: [&str; 5] = [
    "operator",
    "system_account",
    "resolver",
    "max_control_line",
    "resolver_preload",
];

/// Read the original's `server.conf` (`serverConfig` in its `provision.ts`): `key: value`
/// lines and `name { ... }` blocks, on one line or several. Errors name the line, never a
/// value.
pub fn parse_server_conf(text: &str) -> Result<OriginalConf, String> {
    let mut conf = OriginalConf::default();
    let mut block: Option<String> = None;
    let mut tls: (Option<String>, Option<String>) = (None, None);
    let mut ws: Option<OriginalWebsocket> = None;
    for (index, raw) in text.lines().enumerate() {
        let at = index + 1;
        let line = raw.trim();
        if line.is_empty() || line.starts_with('#') || line.starts_with("//") {
            continue;
        }
        if line == "}" {
            block = None;
            continue;
        }
        // A block opens: `name {`, `name: {`, or a whole block on one line.
        if let Some(open) = line.find('{') {
            let name = line[..open].trim().trim_end_matches([':', '=']).trim();
            if name.is_empty() || !name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_') {
                return Err(format!("line {at}: a block without a name"));
            }
            if name == "websocket" {
                ws.get_or_insert_with(OriginalWebsocket::default);
            }
            if !is_known_block(name) {
                conf.ignored.push(name.to_string());
            }
            let inner = line[open + 1..].trim();
            let (body, closed) = match inner.strip_suffix('}') {
                Some(body) => (body.trim(), true),
                None => (inner, false),
            };
            block = (!closed).then(|| name.to_string());
            for part in split_settings(body) {
                setting(&mut conf, Some(name), part, at, &mut tls, &mut ws)?;
            }
            continue;
        }
        setting(&mut conf, block.as_deref(), line, at, &mut tls, &mut ws)?;
    }
    conf.tls = match tls {
        (Some(cert), Some(key)) => Some((cert, key)),
        (None, None) => None,
        _ => return Err("its tls block needs both cert_file and key_file".into()),
    };
    if let Some(w) = &ws
        && w.port == 0
    {
        return Err("its websocket block has no port".into());
    }
    conf.websocket = ws;
    Ok(conf)
}

fn is_known_block(name: &str) -> bool {
    matches!(
        name,
        "tls" | "jetstream" | "websocket" | "resolver_preload" | "resolver"
    )
}

/// The settings of a block written on one line (`{type: full, dir: "./jwt"}`): split at the
/// commas outside quotes; empty parts dropped.
fn split_settings(body: &str) -> Vec<&str> {
    let mut parts = Vec::new();
    let (mut start, mut quoted) = (0, false);
    for (i, c) in body.char_indices() {
        match c {
            '"' => quoted = !quoted,
            ',' if !quoted => {
                parts.push(body[start..i].trim());
                start = i + 1;
            }
            _ => {}
        }
    }
    parts.push(body[start..].trim());
    parts.retain(|p| !p.is_empty());
    parts
}

fn setting(
    conf: &mut OriginalConf,
    block: Option<&str>,
    line: &str,
    at: usize,
    tls: &mut (Option<String>, Option<String>),
    ws: &mut Option<OriginalWebsocket>,
) -> Result<(), String> {
    let split = line
        .find([':', '=', ' '])
        .ok_or_else(|| format!("line {at}: not a `key: value` setting"))?;
    let key = line[..split].trim();
    let value = line[split + 1..]
        .trim()
        .trim_start_matches([':', '='])
        .trim()
        .trim_end_matches([',', ';'])
        .trim();
    let string = || -> Result<String, String> {
        if value.starts_with('"') {
            serde_json::from_str::<String>(value)
                .map_err(|_| format!("line {at}: the value of `{key}` is not a quoted string"))
        } else {
            Ok(value.to_string())
        }
    };
    let port = || -> Result<u16, String> {
        value
            .parse::<u16>()
            .map_err(|_| format!("line {at}: `{key}` is not a port number"))
    };
    match (block, key) {
        (None, "host" | "listen_host" | "net") => conf.host = Some(string()?),
        (None, "port") => conf.port = Some(port()?),
        (Some("jetstream"), "store_dir" | "store") => conf.store_dir = Some(string()?),
        (Some("tls"), "cert_file") => tls.0 = Some(string()?),
        (Some("tls"), "key_file") => tls.1 = Some(string()?),
        (Some("websocket"), "host") => {
            ws.get_or_insert_with(Default::default).host = Some(string()?)
        }
        (Some("websocket"), "port") => ws.get_or_insert_with(Default::default).port = port()?,
        (Some("websocket"), "no_tls") => {
            ws.get_or_insert_with(Default::default).no_tls = value == "true"
        }
        (None, "resolver") => conf.resolver = Some(string()?),
        (None, "operator") => conf.operator = Some(string()?),
        (None, "system_account") => conf.system_account = Some(string()?),
        (None, "logfile_size_limit" | "logfile_max_num") => conf.rotates_logs = true,
        (Some("resolver"), "type") => conf.resolver = Some(string()?),
        (Some("resolver"), "dir") => conf.resolver_dir = Some(string()?),
        (None, k) if RENDERED.contains(&k) => {}
        (Some("resolver_preload"), _) => {}
        (None, k) => conf.ignored.push(k.to_string()),
        // A block cotal does not model is named once, by its name.
        (Some(b), _) if !is_known_block(b) => {}
        (Some(b), k) => conf.ignored.push(format!("{b}.{k}")),
    }
    Ok(())
}

/// A TOML key: bare when it can be.
pub fn toml_key(name: &str) -> String {
    if !name.is_empty()
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
    {
        name.to_string()
    } else {
        toml::Value::String(name.to_string()).to_string()
    }
}

fn toml_string(s: &str) -> String {
    toml::Value::String(s.to_string()).to_string()
}

/// A size as `cotal.toml` writes it: the largest binary unit that divides it.
fn size(n: u64) -> String {
    for (unit, shift) in [("TiB", 40), ("GiB", 30), ("MiB", 20), ("KiB", 10)] {
        if n >= 1 << shift && n.is_multiple_of(1u64 << shift) {
            return format!("\"{}{unit}\"", n >> shift);
        }
    }
    format!("\"{n}B\"")
}

/// A path as `cotal.toml` writes it: relative to the root when under it.
fn relative(path: &str, root: &Path) -> String {
    Path::new(path)
        .strip_prefix(root)
        .map(|p| p.display().to_string())
        .unwrap_or_else(|_| path.to_string())
}

/// What the adopted broker's `cotal.toml` says beyond its config's settings.
#[derive(Debug, Clone)]
pub struct Origin<'a> {
    /// What was adopted, for the file's first line ("the original Cotal's records").
    pub source: &'a str,
    /// The root's folder: paths under it are written relative to it.
    pub root: &'a Path,
    /// Mint each space a connection evictor (`evictor_creds = true`).
    pub evictor: bool,
    /// The running broker's config file, which cotal replaces (`[broker] config`); `None`:
    /// cotal's own place.
    pub config: Option<&'a str>,
    /// The host when the config names none: nats-server's own default for a config cotal
    /// reloads (a listener cannot move on reload), the original's loopback otherwise.
    pub default_host: &'a str,
}

/// The `cotal.toml` declaring `spaces` with the limits their JWTs carry, and the adopted
/// broker's listener, store, TLS and websocket (so clients find the broker where they did).
pub fn desired_text(
    spaces: &BTreeMap<SpaceName, FoundSpace>,
    conf: &OriginalConf,
    origin: &Origin,
) -> String {
    let root = origin.root;
    let mut out = format!(
        "# cotal.toml: written by `cotal adopt` from {}.\n\
         # Edit, then `cotal plan` and `cotal apply`.\nversion = 1\n\n[broker]\n",
        origin.source
    );
    if let Some(config) = origin.config {
        let _ = writeln!(
            out,
            "config = {}  # the adopted broker's config: cotal replaces it, and reloads",
            toml_string(&relative(config, root))
        );
        if !conf.rotates_logs {
            out.push_str("log_rotation = false  # it runs without; nats-server turns rotation on only at a restart\n");
        }
    }
    let _ = writeln!(
        out,
        "host = {}",
        toml_string(conf.host.as_deref().unwrap_or(origin.default_host))
    );
    let _ = writeln!(out, "port = {}", conf.port.unwrap_or(4222));
    if let Some(store) = &conf.store_dir {
        let _ = writeln!(out, "store_dir = {}", toml_string(&relative(store, root)));
    }
    if origin.evictor {
        out.push_str("evictor_creds = true\n");
    }
    if let Some((cert, key)) = &conf.tls {
        let _ = write!(
            out,
            "\n[broker.tls]\ncert = {}\nkey = {}\n",
            toml_string(&relative(cert, root)),
            toml_string(&relative(key, root))
        );
    }
    if let Some(ws) = &conf.websocket {
        out.push_str("\n[broker.websocket]\n");
        if let Some(host) = ws.host.as_ref().filter(|h| Some(*h) != conf.host.as_ref()) {
            let _ = writeln!(out, "host = {}", toml_string(host));
        }
        let _ = writeln!(out, "port = {}", ws.port);
        if ws.no_tls {
            out.push_str("no_tls = true\n");
        }
    }
    for (name, space) in spaces {
        let key = toml_key(name.as_str());
        let _ = write!(out, "\n[spaces.{key}]\n");
        if space.limits.is_suspended() {
            out.push_str("state = \"suspended\"\n");
        }
        if space.protect {
            out.push_str("protect = true\n");
        }
        let l = &space.limits;
        let limits: Vec<String> = [
            ("max_connections", l.conn, false),
            ("max_storage", l.disk_storage, true),
            ("max_memory", l.mem_storage, true),
            ("max_streams", l.streams, false),
            ("max_consumers", l.consumer, false),
            ("max_payload", l.payload, true),
        ]
        .into_iter()
        // Zero and negative are unlimited in the original's JWTs (a limit it does not set
        // is absent, read as 0); a suspended space's zero connections are its state.
        .filter(|(_, v, _)| *v > 0)
        .map(|(field, v, bytes)| {
            if bytes {
                format!("{field} = {}", size(v as u64))
            } else {
                format!("{field} = {v}")
            }
        })
        .collect();
        if !limits.is_empty() {
            let _ = writeln!(out, "\n[spaces.{key}.limits]\n{}", limits.join("\n"));
        }
    }
    out
}

/// The adoption in words: what was found, each step, the rotation, and what is kept.
pub fn describe(a: &Adoption) -> String {
    let mut out = String::from("Found:\n");
    for f in &a.found {
        let _ = writeln!(out, "  {f}");
    }
    if a.is_noop() {
        out.push_str("\nNothing to adopt: this root is cotal's already (`cotal plan` shows what it would change).\n");
        return out;
    }
    out.push_str(if a.steps.is_empty() {
        "\nNothing left to migrate: this root's records are cotal's. What is left:\n"
    } else {
        "\nAdoption will:\n"
    });
    let mut n = 0;
    for step in &a.steps {
        n += 1;
        match step {
            Step::SplitMonolith {
                file,
                write_broker,
                write_account,
            } => {
                let mut parts = Vec::new();
                if *write_broker {
                    parts.push(".cotal/auth/broker.json".to_string());
                }
                if let Some(name) = write_account {
                    parts.push(format!(".cotal/auth/account.{}.json", name.hex()));
                }
                let _ = writeln!(
                    out,
                    "  {n}. split the legacy monolith {}{}, and keep it as auth.json.adopted (read by nothing)",
                    file.display(),
                    if parts.is_empty() {
                        " (its records exist already)".to_string()
                    } else {
                        format!(" into {}", parts.join(" and "))
                    }
                );
            }
            Step::MoveMaterial { space, files } => {
                let _ = writeln!(
                    out,
                    "  {n}. move {} from .cotal/ into .cotal/space.{}/ ({}'s own, as the original's P7 keys it)",
                    files.join(", "),
                    space.hex(),
                    space.quoted()
                );
            }
            Step::WriteDesired { text } => {
                let _ = writeln!(out, "  {n}. write cotal.toml:");
                for line in text.lines() {
                    let _ = writeln!(out, "       {line}");
                }
            }
        }
    }
    match a.rotation {
        Rotation::NotNeeded => {}
        Rotation::Run => {
            n += 1;
            let _ = writeln!(
                out,
                "  {n}. run `cotal rotate sys` (the broker is stopped): new scoped system keys, the system account re-issued listing only them, every space's $SYS pair ({}) re-minted (the evictor with `evictor_creds = true`), the config rendered and promoted; invalidates every $SYS creds signed by the original's stripped key. Every account key and account signing key is kept: the spaces' clients keep their creds.",
                SYS_PAIR.join(", ")
            );
        }
        Rotation::Tell => {
            out.push_str("\nThe broker runs, and this root keeps no system signing key to reload it with: the system rotation needs it stopped. Afterwards run\n  cotal down && cotal rotate sys && cotal up\n(clients reconnect once; every space's $SYS pair is re-minted and the original's stripped key's creds are refused; account keys and creds are kept).\n");
        }
    }
    if !a.notes.is_empty() {
        out.push_str("\nNotes:\n");
        for note in &a.notes {
            let _ = writeln!(out, "  {note}");
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    const ORIGINAL: &str = "# Generated by `cotal up` - do not edit by hand.\nhost: 0.0.0.0\nport: 4333\nmax_control_line: 65536\ntls {\n  cert_file: \"/r/tls/cert.pem\"\n  key_file: \"/r/tls/key.pem\"\n}\njetstream { store_dir: \"/r/.cotal/nats\" }\nwebsocket {\n  host: 127.0.0.1\n  port: 8443\n  no_tls: true\n}\noperator: eyJ.x.y\nsystem_account: ASYS\nresolver: MEMORY\nresolver_preload: {\n  AAAA: eyJ.a.b\n  ASYS: eyJ.c.d\n}\n";

    #[test]
    fn a_config_of_nsc_gives_its_resolver_and_log_rotation() {
        let memory = parse_server_conf(
            "// Operator \"acme\"\noperator: eyJ.x.y\nsystem_account: ASYS\nresolver: MEMORY\nresolver_preload: {\n\tASYS: eyJ.a.b\n}\nlogfile_size_limit: 1024\n",
        )
        .unwrap();
        assert_eq!(memory.resolver.as_deref(), Some("MEMORY"));
        assert!(
            memory.rotates_logs && memory.ignored.is_empty(),
            "{memory:?}"
        );
        let full = parse_server_conf(
            "resolver: {type: full, dir: \"./jwt, old\", allow_delete: false}\nport: 4333\n",
        )
        .unwrap();
        assert_eq!(full.resolver.as_deref(), Some("full"));
        assert_eq!(full.resolver_dir.as_deref(), Some("./jwt, old"));
        assert_eq!(full.ignored, ["resolver.allow_delete"]);
        assert!(!full.rotates_logs);
        assert_eq!(full.port, Some(4333));
    }

    #[test]
    fn the_originals_server_conf_gives_its_listener_store_tls_and_websocket() {
        let c = parse_server_conf(ORIGINAL).unwrap();
        assert_eq!(c.host.as_deref(), Some("0.0.0.0"));
        assert_eq!(c.port, Some(4333));
        assert_eq!(c.store_dir.as_deref(), Some("/r/.cotal/nats"));
        assert_eq!(
            c.tls,
            Some(("/r/tls/cert.pem".into(), "/r/tls/key.pem".into()))
        );
        assert_eq!(
            c.websocket,
            Some(OriginalWebsocket {
                host: Some("127.0.0.1".into()),
                port: 8443,
                no_tls: true
            })
        );
        assert!(c.ignored.is_empty(), "{:?}", c.ignored);
        let odd = parse_server_conf("port: 4222\nlame_duck_duration: \"30s\"\n").unwrap();
        assert_eq!(odd.ignored, vec!["lame_duck_duration"]);
        let block = parse_server_conf("port: 4222\ncluster {\n  port: 6222\n}\n").unwrap();
        assert_eq!(block.ignored, vec!["cluster"], "a block is named once");
        let bad = parse_server_conf("port: secret-value\n").unwrap_err();
        assert_eq!(bad, "line 1: `port` is not a port number");
        assert!(parse_server_conf("tls {\n cert_file: \"/c\"\n}\n").is_err());
    }

    fn limits(conn: i64, disk: i64) -> AccountLimits {
        AccountLimits {
            conn,
            leaf: conn,
            disk_storage: disk,
            mem_storage: -1,
            ..AccountLimits::for_space(&Default::default())
        }
    }

    #[test]
    fn the_desired_file_declares_every_space_with_its_jwts_limits_and_parses() {
        let mut spaces = BTreeMap::new();
        let space = |conn, disk| FoundSpace {
            account: "A".into(),
            limits: limits(conn, disk),
            protect: false,
        };
        spaces.insert(SpaceName::parse("design").unwrap(), space(-1, -1));
        spaces.insert(SpaceName::parse("ops team").unwrap(), space(0, 64 << 20));
        spaces
            .get_mut(&SpaceName::parse("design").unwrap())
            .unwrap()
            .protect = true;
        let conf = parse_server_conf(ORIGINAL).unwrap();
        let text = desired_text(
            &spaces,
            &conf,
            &Origin {
                source: "a test",
                root: Path::new("/r"),
                evictor: false,
                config: None,
                default_host: "127.0.0.1",
            },
        );
        let d = crate::desired::parse(&text, "t").unwrap_or_else(|e| panic!("{e}\n{text}"));
        assert_eq!(d.topology.first().port, 4333);
        assert_eq!(d.topology.first().store_dir, ".cotal/nats");
        assert!(text.contains("cert = \"tls/cert.pem\""), "{text}");
        assert!(
            text.contains("[broker.websocket]\nhost = \"127.0.0.1\"\nport = 8443\nno_tls = true"),
            "{text}"
        );
        let design = &d.spaces[&SpaceName::parse("design").unwrap()].spec;
        assert_eq!(design.limits, crate::model::Limits::default());
        assert!(design.protect, "protection where cotal recorded it");
        assert!(
            !d.spaces[&SpaceName::parse("ops team").unwrap()]
                .spec
                .protect
        );
        let ops = &d.spaces[&SpaceName::parse("ops team").unwrap()].spec;
        assert_eq!(ops.state, crate::model::SpaceState::Suspended);
        assert_eq!(ops.limits.max_storage.map(|b| b.0), Some(64 << 20));
        assert!(text.contains("[spaces.\"ops team\"]"), "{text}");
    }

    fn survey() -> Survey {
        Survey {
            root_dir: "/r".into(),
            desired_exists: false,
            broker: FoundBroker::Valid {
                operator: "OP".into(),
            },
            monolith: None,
            spaces: BTreeMap::new(),
            corrupt: Vec::new(),
            root_material: Vec::new(),
            space_material: BTreeMap::new(),
            server_conf: Some("port: 4222\n".into()),
            sys_keys: false,
            running: false,
        }
    }

    fn found(account: &str) -> FoundSpace {
        FoundSpace {
            account: account.into(),
            limits: limits(-1, -1),
            protect: false,
        }
    }

    fn material(name: &str, bytes: &str) -> MaterialFile {
        MaterialFile {
            name: name.into(),
            bytes: bytes.as_bytes().to_vec(),
        }
    }

    #[test]
    fn root_scoped_material_moves_to_the_one_space_and_is_refused_beside_two() {
        let mut s = survey();
        s.spaces
            .insert(SpaceName::parse("design").unwrap(), found("AD"));
        s.root_material = vec![
            material("delivery.creds", "x"),
            material("membership.json", "{\"accountId\":\"AD\"}"),
        ];
        let a = plan(&s).unwrap();
        assert!(
            matches!(&a.steps[0], Step::MoveMaterial { space, files } if space.as_str() == "design" && files.len() == 2)
        );
        assert_eq!(a.rotation, Rotation::Run);
        // The same file already there with other bytes: refused.
        s.space_material.insert(
            SpaceName::parse("design").unwrap(),
            vec![material("delivery.creds", "y")],
        );
        let refusal = plan(&s).unwrap_err().to_string();
        assert!(refusal.contains("both exist and differ"), "{refusal}");
        s.space_material.clear();
        // Another account named: refused.
        s.root_material[1] = material("membership.json", "{\"accountId\":\"AX\"}");
        assert!(
            plan(&s)
                .unwrap_err()
                .to_string()
                .contains("names account AX")
        );
        // Two spaces: its owner cannot be established.
        s.root_material.truncate(1);
        s.spaces
            .insert(SpaceName::parse("ops").unwrap(), found("AO"));
        let refusal = plan(&s).unwrap_err().to_string();
        assert!(
            refusal.contains("on a root of 2 spaces: whose it is cannot be established"),
            "{refusal}"
        );
    }

    #[test]
    fn corrupt_records_are_refused_by_name_and_an_adopted_root_is_a_noop() {
        let mut s = survey();
        s.corrupt.push(Unusable {
            file: "/r/.cotal/auth/account.78.json".into(),
            reason: "account JWT: bad signature".into(),
        });
        let refusal = plan(&s).unwrap_err().to_string();
        assert!(
            refusal.contains("account.78.json (account JWT: bad signature)"),
            "{refusal}"
        );
        let mut s = survey();
        s.desired_exists = true;
        s.sys_keys = true;
        let a = plan(&s).unwrap();
        assert!(a.is_noop());
        assert!(describe(&a).contains("Nothing to adopt"));
        s.sys_keys = false;
        s.running = true;
        let a = plan(&s).unwrap();
        assert!(a.steps.is_empty());
        assert_eq!(a.rotation, Rotation::Tell);
        assert!(describe(&a).contains("cotal down && cotal rotate sys && cotal up"));
        s.broker = FoundBroker::Absent;
        assert!(
            plan(&s)
                .unwrap_err()
                .to_string()
                .contains("nothing of the original Cotal")
        );
        // What cotal refuses of the original's config is refused before anything is written:
        // a websocket in the clear on every interface.
        let mut s = survey();
        s.server_conf = Some(
            "host: 0.0.0.0\nport: 4222\nwebsocket {\n  port: 8080\n  no_tls: true\n}\n".into(),
        );
        let refusal = plan(&s).unwrap_err().to_string();
        assert!(
            refusal.contains("refused by cotal's own checks")
                && refusal.contains("no_tls = true is for a loopback bind only"),
            "{refusal}"
        );
    }
}
