//! `adopt --nsc`: read an nsc store and the config of the broker it runs on ([`survey`], no
//! write), then write the cotal root that keeps every key of it ([`adopt`]), under the root's
//! lock. Every write is atomic and skipped when its record is there already, so an interrupted
//! adoption is finished, and a finished one left as it is, by adopting again.
//!
//! What is written: `.cotal/auth/broker.json` (the operator's seed, JWT and signing seed, the
//! system account's JWT), `.cotal/auth/sys.seed` (the system account's identity seed: cotal's
//! first apply reaches the broker with it, then replaces it by scoped keys), one
//! `account.<hex>.json` per space, `cotal.toml`, and, when the broker runs on the config given,
//! its pid in `.cotal/nats.pid` (the process cotal's identity check then knows as this root's).

use crate::adopt::nsc::{Import, Request, Store};
use crate::adopt::{FoundSpace, Origin, OriginalConf};
use crate::diagnostic::Diagnostic;
use crate::error::{Error, Result};
use crate::model::SpaceName;
use crate::store::account_record::{self, AccountKeys, AccountRecord};
use crate::store::atomic::{self, Found};
use crate::store::broker_record::{self, BrokerRecord, Loaded, OperatorKeys, SysAccount};
use crate::store::caches::signature_memo::SignatureMemo;
use crate::store::{Root, desired_file, inventory, lock};
use crate::trust::secret::Seed;
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// What `adopt --nsc` was asked.
#[derive(Debug, Clone)]
pub struct Args {
    /// nsc's data folder (holding `stores/` and `keys/`).
    pub dir: PathBuf,
    /// The operator to adopt; `None`: the store's only one.
    pub operator: Option<String>,
    pub request: Request,
    /// The config file the running broker was started with (`nats-server -c FILE`).
    pub server_config: Option<PathBuf>,
}

/// The broker's config as read.
#[derive(Debug, Clone)]
pub struct Server {
    /// Absolute.
    pub path: PathBuf,
    pub conf: OriginalConf,
    /// The accounts it serves: its `resolver_preload`, or the JWTs in a `full` resolver's
    /// folder (`None`: that folder could not be read).
    pub serves: Option<BTreeSet<String>>,
    /// The nats-server running on it, if one runs.
    pub running: Option<u32>,
}

/// Everything adoption decided, read once under the lock.
#[derive(Debug, Clone)]
pub struct Survey {
    pub import: Import,
    pub server: Option<Server>,
    /// What of it this root holds already (a re-run).
    pub done: Done,
    /// The `cotal.toml` adoption writes (`None`: one exists, kept).
    pub desired: Option<String>,
}

/// What of the adoption is on disk.
#[derive(Debug, Clone, Default)]
pub struct Done {
    pub broker: bool,
    pub sys_seed: bool,
    pub spaces: BTreeSet<SpaceName>,
    pub pid: bool,
    /// The accounts cotal made beside the adopted ones (its spaces' side accounts and the
    /// root's monitoring account): a config cotal already rendered serves them, and adoption
    /// leaves none of them out.
    pub own_accounts: BTreeSet<String>,
}

impl Survey {
    /// Nothing left to write.
    pub fn is_noop(&self) -> bool {
        self.done.broker
            && self.done.sys_seed
            && self.done.spaces.len() == self.import.spaces.len()
            && self.desired.is_none()
            && (self.done.pid || self.server.as_ref().is_none_or(|s| s.running.is_none()))
    }
}

fn refused(what: String, next: &str) -> Error {
    Error::refused(Diagnostic::refusal(
        what,
        "none, nothing was written.",
        next,
    ))
}

fn read_text(path: &Path) -> Result<String> {
    match atomic::read_no_follow_within(path, atomic::MAX_TOKEN_BYTES)? {
        Found::File(bytes) => String::from_utf8(bytes)
            .map(|t| t.trim().to_string())
            .map_err(|_| Error::other(format!("{}: not UTF-8 text", path.display()))),
        Found::Absent => Err(refused(
            format!("{} is missing", path.display()),
            "point --nsc at nsc's data folder (the one holding stores/ and keys/, by default ~/.local/share/nats/nsc)",
        )),
        Found::NotRegular(what) => Err(atomic::not_regular(path, what)),
    }
}

fn folders(dir: &Path) -> Result<Vec<String>> {
    let entries = match std::fs::read_dir(dir) {
        Ok(e) => e,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(Error::io(dir, e)),
    };
    let mut out: Vec<String> = entries
        .flatten()
        .filter(|e| e.file_type().is_ok_and(|t| t.is_dir()))
        .filter_map(|e| e.file_name().to_str().map(str::to_string))
        .filter(|n| !n.starts_with('.'))
        .collect();
    out.sort();
    Ok(out)
}

/// The public keys a JWT names that nsc may hold seeds of: its subject and its signing keys.
/// The public keys a JWT names (its subject and its signing keys): only what is an operator's
/// or an account's public key, so no name a hostile JWT writes (`../../x`) ever becomes a path
/// into the key store or beside it.
fn keys_named(token: &str) -> Vec<String> {
    let Ok(claims) = crate::trust::jwt::decode_verified::<serde_json::Value>(token) else {
        return Vec::new();
    };
    let mut out = vec![claims.sub.clone()];
    if let Some(keys) = claims.nats.get("signing_keys").and_then(|k| k.as_array()) {
        out.extend(keys.iter().filter_map(|k| {
            k.as_str()
                .or_else(|| k.get("key").and_then(|v| v.as_str()))
                .map(str::to_string)
        }));
    }
    out
}

/// Whether `key` is an operator's or an account's public key (the only keys whose seeds nsc
/// keeps for a JWT cotal adopts).
fn is_public_key(key: &str) -> bool {
    matches!(key.as_bytes().first(), Some(b'O' | b'A'))
        && nkeys::KeyPair::from_public_key(key).is_ok()
}

/// Read the store: the operator's JWT, its accounts', and the seeds its key store holds for
/// the keys they name (each checked to be that key's).
pub fn read_store(dir: &Path, operator: Option<&str>) -> Result<Store> {
    let stores = dir.join("stores");
    let operators = folders(&stores)?;
    let operator = match (operator, operators.as_slice()) {
        (Some(name), _) if operators.iter().any(|o| o == name) => name.to_string(),
        (Some(name), _) => {
            return Err(refused(
                format!(
                    "{} holds no operator {name:?} (it holds: {})",
                    stores.display(),
                    operators.join(", ")
                ),
                "name one of them with --operator",
            ));
        }
        (None, [one]) => one.clone(),
        (None, []) => {
            return Err(refused(
                format!("{} holds no operator", stores.display()),
                "point --nsc at nsc's data folder (the one holding stores/ and keys/, by default ~/.local/share/nats/nsc)",
            ));
        }
        (None, many) => {
            return Err(refused(
                format!(
                    "{} holds {} operators ({})",
                    stores.display(),
                    many.len(),
                    many.join(", ")
                ),
                "name the one to adopt with --operator",
            ));
        }
    };
    let op_dir = stores.join(&operator);
    let operator_jwt = read_text(&op_dir.join(format!("{operator}.jwt")))?;
    let mut accounts = BTreeMap::new();
    for name in folders(&op_dir.join("accounts"))? {
        let path = op_dir
            .join("accounts")
            .join(&name)
            .join(format!("{name}.jwt"));
        accounts.insert(name, read_text(&path)?);
    }
    let mut seeds = BTreeMap::new();
    let mut wrong_seeds = BTreeSet::new();
    // A key that is not a key is refused before any path is made of it: a hostile JWT naming
    // `../../x` as a signing key must not make cotal look outside nsc's key store (nor say what
    // it found there).
    let owners = std::iter::once(("the operator's JWT".to_string(), &operator_jwt)).chain(
        accounts
            .iter()
            .map(|(n, t)| (format!("account {n:?}'s JWT"), t)),
    );
    let mut named = Vec::new();
    for (owner, token) in owners {
        let keys = keys_named(token);
        if let Some(n) = keys.iter().position(|k| !is_public_key(k)) {
            return Err(refused(
                format!(
                    "{owner} names a key (its {}) that is not an operator's or an account's public key; nothing was read for it",
                    if n == 0 {
                        "subject".to_string()
                    } else {
                        format!("signing key #{n}")
                    }
                ),
                "this is not a JWT nsc wrote: re-create the account with nsc, or move its folder out of the store",
            ));
        }
        named.extend(keys);
    }
    for public in named {
        let path = crate::adopt::nsc::key_path(dir, &public);
        let bytes = match atomic::read_no_follow_within(&path, atomic::MAX_TOKEN_BYTES)? {
            Found::File(bytes) => bytes,
            Found::Absent => continue,
            Found::NotRegular(_) => {
                return Err(refused(
                    format!(
                        "{} is not a regular file: nsc keeps a key's seed in one",
                        path.display()
                    ),
                    "restore nsc's key store (keys/keys/) from nsc itself",
                ));
            }
        };
        let seed = Seed::new(String::from_utf8_lossy(&bytes).trim().to_string());
        let matches = seed.key_pair().is_ok_and(|kp| kp.public_key() == public);
        // Refused by the import only when adoption needs that key.
        if matches {
            seeds.insert(public, seed);
        } else {
            wrong_seeds.insert(public);
        }
    }
    Ok(Store {
        dir: dir.to_path_buf(),
        operator,
        operator_jwt,
        accounts,
        seeds,
        wrong_seeds,
    })
}

/// Read the running broker's config: its settings, the accounts it serves, the process on it.
fn read_server(root: &Root, path: &Path) -> Result<Server> {
    let path = std::fs::canonicalize(path).map_err(|e| Error::io(path, e))?;
    let text = read_text(&path)?;
    let conf = crate::adopt::parse_server_conf(&text)
        .map_err(|e| Error::input(format!("{}: {e}", path.display())))?;
    let serves = match conf.resolver.as_deref() {
        Some("MEMORY") => Some(crate::render::read_promoted(&text).accounts),
        _ => conf.resolver_dir.as_ref().and_then(|dir| {
            let dir = path.parent().unwrap_or(Path::new("/")).join(dir);
            let entries = std::fs::read_dir(dir).ok()?;
            Some(
                entries
                    .flatten()
                    .filter_map(|e| {
                        e.file_name()
                            .to_str()?
                            .strip_suffix(".jwt")
                            .map(str::to_string)
                    })
                    .collect(),
            )
        }),
    };
    let files = root.files_of(
        &topology_on(&conf, &path),
        &topology_on(&conf, &path).nodes[0],
    );
    let running = crate::broker::identity::root_brokers(&files)
        .first()
        .copied();
    Ok(Server {
        path,
        conf,
        serves,
        running,
    })
}

/// A single server on the adopted config (the identity check's files).
fn topology_on(conf: &OriginalConf, path: &Path) -> crate::desired::topology::Topology {
    let mut t = crate::desired::topology::Topology::lone(
        conf.host.clone().unwrap_or_else(|| "0.0.0.0".into()),
        conf.port.unwrap_or(4222),
        conf.store_dir.clone().unwrap_or_default(),
    );
    t.nodes[0].config = Some(path.display().to_string());
    t
}

/// Read everything adoption decides on. Writes nothing.
pub fn survey(root: &Root, args: &Args) -> Result<Survey> {
    let store = read_store(&args.dir, args.operator.as_deref())?;
    let import = crate::adopt::nsc::import(
        &store,
        &args.request,
        crate::mint::new_account_seed,
        crate::clock::now(),
    )
    .map_err(Error::refused)?;
    let server = args
        .server_config
        .as_ref()
        .map(|p| read_server(root, p))
        .transpose()?;
    let done = done(root, &import, server.as_ref())?;
    if let Some(s) = &server {
        check_server(s, &import, &done.own_accounts)?;
    }
    let desired = match desired_file::read(root)? {
        Some(text) => {
            check_declared(root, &text, &import, &done)?;
            None
        }
        None => Some(desired_text(root, &import, server.as_ref())?),
    };
    Ok(Survey {
        import,
        server,
        done,
        desired,
    })
}

/// The broker's config trusts the store's operator and system account, and serves no account
/// adoption leaves out (cotal's config would stop serving it at the first apply, disconnecting
/// its clients) but `own`, the accounts cotal made beside them.
fn check_server(s: &Server, import: &Import, own: &BTreeSet<String>) -> Result<()> {
    let at = s.path.display();
    if let Some(sys) = &s.conf.system_account
        && *sys != import.sys_pub
    {
        return Err(refused(
            format!(
                "{at} names system account {sys}, not the store's ({})",
                import.sys_pub
            ),
            "point --server-config at the config of the broker this operator runs",
        ));
    }
    if let Some(op) = &s.conf.operator {
        let token = if op.starts_with("eyJ") {
            op.clone()
        } else {
            let file = s.path.parent().unwrap_or(Path::new("/")).join(op);
            read_text(&file)?
        };
        let trusted = crate::trust::jwt::decode_verified::<crate::trust::jwt::OperatorNats>(&token)
            .map(|c| c.sub)
            .unwrap_or_default();
        if trusted != import.operator_pub {
            return Err(refused(
                format!(
                    "{at} trusts operator {}, not the store's {:?} ({})",
                    if trusted.is_empty() {
                        "(unreadable)"
                    } else {
                        &trusted
                    },
                    import.operator,
                    import.operator_pub
                ),
                "point --server-config at the config of the broker this operator runs",
            ));
        }
    }
    let adopted: BTreeSet<&str> = import
        .spaces
        .values()
        .map(|s| s.account_pub.as_str())
        .chain(std::iter::once(import.sys_pub.as_str()))
        .chain(own.iter().map(String::as_str))
        .collect();
    let dropped: Vec<&String> = s
        .serves
        .iter()
        .flatten()
        .filter(|a| !adopted.contains(a.as_str()))
        .collect();
    if !dropped.is_empty() {
        return Err(refused(
            format!(
                "{at} serves {} account(s) adoption leaves out ({}); cotal's config would stop serving them at the first apply, disconnecting their clients",
                dropped.len(),
                dropped
                    .iter()
                    .map(|a| a.as_str())
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
            "adopt them too (--account NAME for each, or no --account for all), or stop serving them first",
        ));
    }
    Ok(())
}

/// An existing `cotal.toml` (kept) declares every space adoption writes a record for: one it
/// does not declare would be removed by the first apply.
fn check_declared(root: &Root, text: &str, import: &Import, done: &Done) -> Result<()> {
    let desired = crate::desired::parse(text, &root.desired_file().display().to_string())
        .map_err(Error::input)?;
    let missing: Vec<&SpaceName> = import
        .spaces
        .keys()
        .filter(|n| !done.spaces.contains(*n) && !desired.spaces.contains_key(*n))
        .collect();
    if missing.is_empty() {
        return Ok(());
    }
    Err(refused(
        format!(
            "cotal.toml (kept as it is) does not declare {}: the first apply would remove {}",
            missing
                .iter()
                .map(|n| n.quoted())
                .collect::<Vec<_>>()
                .join(", "),
            if missing.len() == 1 { "it" } else { "them" }
        ),
        &format!(
            "add {} to cotal.toml, then adopt again",
            missing
                .iter()
                .map(|n| format!("[spaces.{}]", crate::adopt::toml_key(n.as_str())))
                .collect::<Vec<_>>()
                .join(" and ")
        ),
    ))
}

/// What of `import` the root holds: refused when it holds another operator's trust, or
/// another account under a space's name.
fn done(root: &Root, import: &Import, server: Option<&Server>) -> Result<Done> {
    let mut done = Done::default();
    match broker_record::load(root)? {
        Loaded::Absent => {
            let material = broker_record::tenant_material(root)?;
            if !material.is_empty() {
                return Err(refused(
                    format!(
                        "{} holds tenant material ({}) but no broker record",
                        root.dir().display(),
                        material.join(", ")
                    ),
                    "adopt into an empty folder",
                ));
            }
        }
        Loaded::Corrupt { file, reason } => {
            return Err(refused(
                format!("{} is corrupt ({reason})", file.display()),
                "restore it from a backup, or adopt into an empty folder",
            ));
        }
        Loaded::Valid((record, trust)) if trust.operator_pub == import.operator_pub => {
            done.broker = true;
            // The first apply replaced the identity seed by scoped keys: nothing to write.
            done.sys_seed = record.sys.keys.is_some();
            let inv = inventory::read(root, &trust, &SignatureMemo::none())?;
            done.own_accounts = inv
                .spaces
                .values()
                .flat_map(|s| s.sides.values().map(|side| side.account_pub.clone()))
                .chain(
                    record
                        .sys
                        .monitor_account
                        .as_ref()
                        .map(|m| m.public.clone()),
                )
                .collect();
            for (name, s) in &import.spaces {
                match inv.spaces.get(name) {
                    Some(have) if have.account_pub == s.account_pub => {
                        done.spaces.insert(name.clone());
                    }
                    Some(have) => {
                        return Err(refused(
                            format!(
                                "space {} is account {} here, not nsc's {} ({:?})",
                                name.quoted(),
                                have.account_pub,
                                s.account_pub,
                                s.nsc_name
                            ),
                            "give nsc's account another space name: --account NAME=SPACE",
                        ));
                    }
                    None => {}
                }
            }
        }
        Loaded::Valid((_, trust)) => {
            return Err(refused(
                format!(
                    "{} holds operator {}, not nsc's {} ({:?})",
                    root.broker_record().display(),
                    trust.operator_pub,
                    import.operator_pub,
                    import.operator
                ),
                "adopt into an empty folder: a root has one operator",
            ));
        }
    }
    done.sys_seed = done.sys_seed
        || broker_record::load_sys_seed(root)?
            .is_some_and(|s| s.expose() == import.sys_seed.expose());
    let recorded = crate::broker::identity::recorded_pid(&root.lone_node_files())?
        .ok()
        .flatten();
    done.pid = recorded.is_some() && recorded == server.and_then(|s| s.running);
    Ok(done)
}

/// The `cotal.toml` of the adopted spaces and broker, checked with cotal's own parser.
fn desired_text(root: &Root, import: &Import, server: Option<&Server>) -> Result<String> {
    let spaces: BTreeMap<SpaceName, FoundSpace> = import
        .spaces
        .iter()
        .map(|(name, s)| {
            (
                name.clone(),
                FoundSpace {
                    account: s.account_pub.clone(),
                    limits: s.limits,
                    protect: false,
                },
            )
        })
        .collect();
    let conf = server.map(|s| s.conf.clone()).unwrap_or_default();
    let config = server.map(|s| s.path.display().to_string());
    let text = crate::adopt::desired_text(
        &spaces,
        &conf,
        &Origin {
            source: &format!("nsc's operator {:?}", import.operator),
            root: root.dir(),
            evictor: false,
            config: config.as_deref(),
            default_host: if server.is_some() {
                "0.0.0.0"
            } else {
                "127.0.0.1"
            },
        },
    );
    crate::desired::parse(&text, "cotal.toml (as adoption would write it)").map_err(|e| {
        refused(
            format!("the cotal.toml adoption would write is refused by cotal's own checks: {e}"),
            "write cotal.toml by hand with what the error names changed (adoption keeps an existing cotal.toml), then adopt again",
        )
    })?;
    Ok(text)
}

/// What `adopt --nsc` did.
pub struct Outcome {
    pub survey: Survey,
    /// Its writes were made (false: nothing to write, or not approved).
    pub carried_out: bool,
}

/// Survey under the lock, ask `approve` (when there is anything to write), then write what is
/// missing (audited first, fail-closed).
pub fn adopt(
    root: &Root,
    args: &Args,
    lock_timeout: std::time::Duration,
    approve: impl FnOnce(&Survey) -> Result<bool>,
) -> Result<Outcome> {
    // Refused before anything is made (a fresh folder stays empty); read again under the lock.
    survey(root, args)?;
    atomic::ensure_dir(&root.state_dir(), atomic::PRIVATE_DIR)?;
    let _lock = lock::acquire(root, &crate::operator::holder(), lock_timeout)?;
    crate::apply::refuse_if_journal_open(&crate::store::journal::load(root)?, "adopt")?;
    let survey = survey(root, args)?;
    if survey.is_noop() || !approve(&survey)? {
        return Ok(Outcome {
            survey,
            carried_out: false,
        });
    }
    let i = &survey.import;
    crate::credentials::audit_root(
        root,
        crate::audit::Event::RootAdopted,
        format!(
            "adopting nsc operator {} ({}) with {} space(s)",
            i.operator,
            i.operator_pub,
            i.spaces.len()
        ),
    )?;
    if !survey.done.broker {
        broker_record::save(
            root,
            &BrokerRecord {
                operator: OperatorKeys {
                    seed: i.operator_seed.clone(),
                    jwt: i.operator_jwt.clone(),
                    signing_seed: i.operator_signing.clone(),
                },
                sys: SysAccount {
                    public: i.sys_pub.clone(),
                    jwt: i.sys_jwt.clone(),
                    keys: None,
                    monitor_account: None,
                },
                trust_gen: 1,
            },
        )?;
    }
    if !survey.done.sys_seed {
        atomic::write(
            &root.sys_seed(),
            format!("{}\n", i.sys_seed.expose()).as_bytes(),
            atomic::SECRET,
        )?;
    }
    for (name, s) in &i.spaces {
        if survey.done.spaces.contains(name) {
            continue;
        }
        account_record::save(
            root,
            &AccountRecord {
                space: name.as_str().to_string(),
                account: AccountKeys {
                    public: s.account_pub.clone(),
                    seed: s.account_seed.clone(),
                    jwt: s.jwt.clone(),
                    signing_seed: s.signing_seed.clone(),
                    signing_pub: s.signing_pub.clone(),
                },
                archived: None,
                keep_claims: s.kept_claims.clone(),
                side_accounts: Default::default(),
            },
        )?;
    }
    if let Some(text) = &survey.desired {
        desired_file::write(root, text)?;
    }
    if let Some(pid) = survey.server.as_ref().and_then(|s| s.running)
        && !survey.done.pid
    {
        // The broker running on the adopted config now: cotal's identity check knows it by it.
        atomic::write(
            &root.pid_file(),
            format!("{pid}\n").as_bytes(),
            atomic::SECRET,
        )?;
    }
    Ok(Outcome {
        survey,
        carried_out: true,
    })
}

/// The survey in words: the store, the broker's config, and what adoption writes.
pub fn describe(s: &Survey) -> String {
    use std::fmt::Write as _;
    if s.is_noop() {
        // Said from what is on disk (the import would mint keys adoption does not write).
        return format!(
            "Found (nsc): operator {:?} ({}) and {} space(s), every one adopted already ({}).\n\nNothing to adopt: this root holds the store's operator and every account named (`cotal plan` shows what it would change).\n",
            s.import.operator,
            s.import.operator_pub,
            s.import.spaces.len(),
            s.import
                .spaces
                .keys()
                .map(|n| n.quoted())
                .collect::<Vec<_>>()
                .join(", ")
        );
    }
    let mut out = crate::adopt::nsc::describe(&s.import);
    if let Some(server) = &s.server {
        let _ = writeln!(out, "  broker config {}", server.path.display());
        match &server.serves {
            Some(accounts) => {
                let names: Vec<String> = accounts
                    .iter()
                    .map(|a| {
                        let space = s
                            .import
                            .spaces
                            .iter()
                            .find(|(_, i)| &i.account_pub == a)
                            .map(|(n, _)| format!("space {}", n.quoted()));
                        match (space, a == &s.import.sys_pub) {
                            (Some(space), _) => format!("{a} ({space})"),
                            (None, true) => format!("{a} (the system account)"),
                            (None, false) => {
                                format!("{a} (not adopted: cotal's config will not serve it)")
                            }
                        }
                    })
                    .collect();
                let _ = writeln!(
                    out,
                    "    serves {} account(s) ({} resolver):\n      {}",
                    accounts.len(),
                    server.conf.resolver.as_deref().unwrap_or("no"),
                    names.join("\n      ")
                );
            }
            None => {
                let _ = writeln!(out, "    the accounts it serves could not be read");
            }
        }
        match server.running {
            Some(pid) => {
                let _ = writeln!(out, "    nats-server pid {pid} runs on it");
            }
            None => {
                let _ = writeln!(out, "    no nats-server of this user runs on it");
            }
        }
        for k in &server.conf.ignored {
            let _ = writeln!(
                out,
                "    sets `{k}`, which cotal does not model: not carried"
            );
        }
        if server
            .conf
            .resolver
            .as_deref()
            .is_some_and(|r| r != "MEMORY")
        {
            let _ = writeln!(
                out,
                "    resolves accounts with a `{}` resolver; cotal serves them from its config (MEMORY), and a resolver is set up when nats-server starts: the switch is a restart (`cotal down`, `cotal up`), which `cotal apply` says",
                server.conf.resolver.as_deref().unwrap_or_default()
            );
        }
    }
    out.push_str("\nAdoption will write:\n");
    let d = &s.done;
    if !d.broker {
        out.push_str("  .cotal/auth/broker.json: the operator (seed, JWT, signing seed) and the system account's JWT\n");
    }
    if !d.sys_seed {
        out.push_str("  .cotal/auth/sys.seed: the system account's identity seed; the first apply reaches the broker with it and replaces it by cotal's scoped keys\n");
    }
    for name in s.import.spaces.keys().filter(|n| !d.spaces.contains(*n)) {
        let _ = writeln!(
            out,
            "  .cotal/auth/account.{}.json: space {}, its account and signing key",
            name.hex(),
            name.quoted()
        );
    }
    match &s.desired {
        Some(text) => {
            out.push_str("  cotal.toml:\n");
            for line in text.lines() {
                let _ = writeln!(out, "    | {line}");
            }
        }
        None => out.push_str("  (cotal.toml exists and is kept)\n"),
    }
    if let Some(pid) = s.server.as_ref().and_then(|s| s.running)
        && !d.pid
    {
        let _ = writeln!(
            out,
            "  .cotal/nats.pid: {pid}, so cotal knows the running broker as this root's"
        );
    }
    out.push_str("\nNothing is sent to the broker: the first `cotal apply` replaces its config with cotal's and reloads it.\n");
    out
}
