//! Where every artifact of a root lives (docs/design/architecture.md, "The .cotal folder"), and how a root is found.
//!
//! Invariants: this module is the only place that spells a path under `.cotal/`; a [`Root`] is
//! canonical (absolute, every symlink resolved), so the same root reached through an alias is
//! the same path everywhere, including in the `-c` argument of the broker it starts; a root
//! whose `.cotal/` is a link, is owned by another user, or is writable by group or others is
//! refused (like git's `safe.directory`): its records, journal and config could be planted.

use crate::diagnostic::Diagnostic;
use crate::error::{Error, Result};
use crate::model::SpaceName;
use std::path::{Path, PathBuf};

/// The desired-state file at the top of a root.
pub const DESIRED_FILE: &str = "cotal.toml";

/// A root directory: `cotal.toml` plus the `.cotal/` state folder.
#[derive(Debug, Clone)]
pub struct Root {
    dir: PathBuf,
}

impl Root {
    /// A root at `dir`, canonical: absolute with every symlink resolved (a part that does not
    /// exist yet, for `init`, is appended to its deepest existing ancestor's canonical path).
    pub fn at(dir: impl AsRef<Path>) -> Result<Self> {
        let dir = dir.as_ref();
        let abs = if dir.is_absolute() {
            dir.to_path_buf()
        } else {
            std::env::current_dir()
                .map_err(|e| Error::io(".", e))?
                .join(dir)
        };
        Ok(Root {
            dir: normalize(&canonical(&abs)?),
        })
    }

    /// `--root`, else `COTAL_ROOT`, else the nearest ancestor of the working directory holding
    /// `cotal.toml` or `.cotal/`, else the working directory itself (for `init`). The root found
    /// is refused when its `.cotal/` is not safe to trust (see [`check_safe`]); discovery never
    /// walks past such a folder to a farther ancestor.
    pub fn discover(explicit: Option<&Path>) -> Result<Self> {
        let root = Self::locate(explicit)?;
        check_safe(&root.state_dir())?;
        check_desired(&root.dir, &root.desired_file())?;
        Ok(root)
    }

    fn locate(explicit: Option<&Path>) -> Result<Self> {
        if let Some(dir) = explicit {
            return Root::at(dir);
        }
        let cwd = Root::at(std::env::current_dir().map_err(|e| Error::io(".", e))?)?.dir;
        let around = cwd
            .ancestors()
            .find(|dir| {
                dir.join(DESIRED_FILE).is_file()
                    || std::fs::symlink_metadata(dir.join(".cotal")).is_ok()
            })
            .map(Root::at)
            .transpose()?;
        if let Some(dir) = std::env::var_os("COTAL_ROOT").filter(|v| !v.is_empty()) {
            let named = Root::at(PathBuf::from(dir))?;
            // A `COTAL_ROOT` exported for another root, run in this one: which is meant is
            // not clear, and acting on the wrong one is worse than asking.
            if let Some(here) = around.filter(|here| here.dir != named.dir) {
                return Err(Error::input(
                    Diagnostic::new(format!(
                        "COTAL_ROOT names the root {}, but the working folder is in the root {} (its {}): cotal does not guess which one is meant; nothing was read.",
                        named.dir.display(),
                        here.dir.display(),
                        if here.desired_file().is_file() { DESIRED_FILE } else { ".cotal/" }
                    ))
                    .next(format!("pass --root {} (or --root {}): --root wins over both", here.dir.display(), named.dir.display()))
                    .next("or unset COTAL_ROOT in this shell"),
                ));
            }
            return Ok(named);
        }
        Ok(around.unwrap_or(Root { dir: cwd }))
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Refuse an output path (`--out`) that is `cotal.toml` or lies in `.cotal/`: output never
    /// overwrites the state it was made from.
    pub fn refuse_own_file(&self, out: &Path) -> Result<()> {
        let abs = if out.is_absolute() {
            out.to_path_buf()
        } else {
            std::env::current_dir()
                .map_err(|e| Error::io(".", e))?
                .join(out)
        };
        let target = normalize(&canonical(&abs)?);
        if target == self.desired_file() || target.starts_with(self.state_dir()) {
            return Err(Error::refused(
                Diagnostic::new(format!(
                    "--out {} is {}: cotal never writes its output over the state it was made from.",
                    out.display(),
                    if target == self.desired_file() {
                    "this root's cotal.toml".to_string()
                } else {
                    format!(
                        "inside this root's state folder {}",
                        self.state_dir().display()
                    )
                }
                ))
                .blast("none, nothing was written.")
                .next("choose a path outside .cotal/ (for example ./plan.json)"),
            ));
        }
        Ok(())
    }
    pub fn desired_file(&self) -> PathBuf {
        self.dir.join(DESIRED_FILE)
    }
    pub fn state_dir(&self) -> PathBuf {
        self.dir.join(".cotal")
    }
    pub fn auth_dir(&self) -> PathBuf {
        self.state_dir().join("auth")
    }
    pub fn broker_record(&self) -> PathBuf {
        self.auth_dir().join("broker.json")
    }
    /// How many times the cluster's route credential was rotated ([`crate::store::route_rotation`]).
    pub fn route_rotation(&self) -> PathBuf {
        self.auth_dir().join("routes.json")
    }
    /// The system users `cotal creds --system` handed out ([`crate::store::users`]).
    pub fn system_users(&self) -> PathBuf {
        self.auth_dir().join("system-users.json")
    }
    /// The seed of the key that signs the state ([`crate::store::state_key`]).
    pub fn state_key(&self) -> PathBuf {
        self.auth_dir().join("state.seed")
    }
    pub fn sys_seed(&self) -> PathBuf {
        self.auth_dir().join("sys.seed")
    }
    pub fn account_record(&self, space: &SpaceName) -> PathBuf {
        self.auth_dir()
            .join(format!("{ACCOUNT_PREFIX}{}{ACCOUNT_SUFFIX}", space.hex()))
    }
    pub fn server_conf(&self) -> PathBuf {
        self.auth_dir().join("server.conf")
    }
    /// The candidate config of a promotion.
    pub fn server_conf_next(&self) -> PathBuf {
        self.auth_dir().join("server.conf.next")
    }
    /// The config a promotion replaced (what a rollback puts back).
    pub fn server_conf_prev(&self) -> PathBuf {
        self.auth_dir().join("server.conf.prev")
    }
    /// The secret-free state every successful apply writes (`cotal state export`).
    pub fn state_file(&self) -> PathBuf {
        self.state_dir().join("state.json")
    }

    pub fn generation_record(&self) -> PathBuf {
        self.auth_dir().join("broker-config.json")
    }
    pub fn maintenance_dir(&self) -> PathBuf {
        self.state_dir().join("maintenance")
    }
    /// Every folder of `.cotal/` cotal writes records into: itself, `auth/`, `maintenance/`,
    /// each `space.*/` and each `node.*/` (what is there now; links are not followed).
    pub fn state_dirs(&self) -> Vec<PathBuf> {
        let mut dirs = vec![self.state_dir(), self.auth_dir(), self.maintenance_dir()];
        if let Ok(entries) = std::fs::read_dir(self.state_dir()) {
            for entry in entries.flatten() {
                let name = entry.file_name().to_string_lossy().into_owned();
                let is_dir = entry.file_type().is_ok_and(|t| t.is_dir());
                if is_dir && (name.starts_with("space.") || name.starts_with("node.")) {
                    dirs.push(entry.path());
                }
            }
        }
        dirs
    }
    pub fn lock_file(&self) -> PathBuf {
        self.maintenance_dir().join("lock")
    }
    pub fn lock_info(&self) -> PathBuf {
        self.maintenance_dir().join("lock.json")
    }
    pub fn journal(&self) -> PathBuf {
        self.maintenance_dir().join("journal.json")
    }
    /// The cut `cotal down --preserve-state` records.
    pub fn cut(&self) -> PathBuf {
        self.maintenance_dir().join("cut.json")
    }
    /// The config and the log of an isolated broker (backup and restore checks).
    pub fn isolated_conf(&self) -> PathBuf {
        self.maintenance_dir().join("isolated.conf")
    }
    pub fn isolated_log(&self) -> PathBuf {
        self.maintenance_dir().join("isolated.log")
    }
    pub fn space_dir(&self, space: &SpaceName) -> PathBuf {
        self.state_dir().join(format!("space.{}", space.hex()))
    }
    /// The original Cotal's per-agent secrets: `auth/creds/space.<hex>/` per space (older
    /// roots keep them flat in `auth/creds/`).
    pub fn agent_creds_dir(&self) -> PathBuf {
        self.auth_dir().join("creds")
    }
    /// One space's per-agent secrets (the original's P1 segment).
    pub fn space_agent_creds(&self, space: &SpaceName) -> PathBuf {
        self.agent_creds_dir()
            .join(format!("space.{}", space.hex()))
    }
    /// A file of a space's folder (`lifecycle.json`, its $SYS creds, `membership.json`).
    pub fn space_file(&self, space: &SpaceName, file: SpaceFile) -> PathBuf {
        self.space_dir(space).join(file.name())
    }
    pub fn pid_file(&self) -> PathBuf {
        self.state_dir().join("nats.pid")
    }
    pub fn log_file(&self) -> PathBuf {
        self.state_dir().join("nats.log")
    }
    /// The files of every node of `topology`, in its order: a single server's are where they
    /// always were (`.cotal/auth/server.conf`, `.cotal/nats.pid`, `.cotal/nats.log`).
    pub fn nodes(&self, topology: &crate::desired::topology::Topology) -> Vec<NodeFiles> {
        topology
            .nodes
            .iter()
            .map(|n| self.files_of(topology, n))
            .collect()
    }

    /// The files of `node` of `topology`.
    pub fn files_of(
        &self,
        topology: &crate::desired::topology::Topology,
        node: &crate::desired::topology::NodeSpec,
    ) -> NodeFiles {
        if topology.is_cluster() {
            return self.node_files(&node.name, node.config.as_deref());
        }
        let lone = self.lone_node_files();
        match node.config.as_deref() {
            // `[broker] config` (an adopted broker's config file): the config and its
            // promotion's siblings there, the pidfile and log where a single server's are.
            Some(path) => {
                let at = self.node_files(&node.name, Some(path));
                NodeFiles {
                    dir: at.dir,
                    conf: at.conf,
                    conf_next: at.conf_next,
                    conf_prev: at.conf_prev,
                    ..lone
                }
            }
            None => lone,
        }
    }

    /// The files of a single server (the node `local`).
    pub fn lone_node_files(&self) -> NodeFiles {
        NodeFiles {
            name: crate::desired::topology::LONE_NODE.into(),
            dir: self.auth_dir(),
            conf: self.server_conf(),
            conf_next: self.server_conf_next(),
            conf_prev: self.server_conf_prev(),
            pid: self.pid_file(),
            log: self.log_file(),
        }
    }

    /// A cluster node's files: `.cotal/node.<name>/`, its config where `config` says (relative
    /// to the root) when it does.
    pub fn node_files(&self, name: &str, config: Option<&str>) -> NodeFiles {
        let folder = self.state_dir().join(format!("node.{name}"));
        let conf = match config {
            Some(path) => normalize(&self.dir.join(path)),
            None => folder.join("server.conf"),
        };
        let sibling = |suffix: &str| {
            let mut file = conf.file_name().unwrap_or_default().to_os_string();
            file.push(suffix);
            conf.with_file_name(file)
        };
        NodeFiles {
            name: name.to_string(),
            dir: conf
                .parent()
                .map(Path::to_path_buf)
                .unwrap_or(folder.clone()),
            conf_next: sibling(".next"),
            conf_prev: sibling(".prev"),
            conf,
            pid: folder.join("nats.pid"),
            log: folder.join("nats.log"),
        }
    }

    /// Refuse a cluster node's config path that is `cotal.toml` or lies in `.cotal/` outside the
    /// node's own folder (after resolving the links of its folder): cotal replaces that file.
    pub fn check_node_config(&self, node: &NodeFiles) -> Result<()> {
        let resolved = match node.conf.parent().map(canonical) {
            Some(Ok(dir)) => normalize(&dir).join(node.conf.file_name().unwrap_or_default()),
            _ => node.conf.clone(),
        };
        let own = self.state_dir().join(format!("node.{}", node.name));
        let forbidden = resolved == self.desired_file()
            || (resolved.starts_with(self.state_dir()) && !resolved.starts_with(&own));
        if forbidden {
            return Err(Error::input(
                Diagnostic::new(format!(
                    "node {}'s config {} is {}: cotal replaces a node's config file, so it must be a file of its own.",
                    node.name,
                    node.conf.display(),
                    if resolved == self.desired_file() {
                    "this root's cotal.toml".to_string()
                } else {
                    format!(
                        "in {}, which holds the root's records and seeds",
                        self.state_dir().display()
                    )
                }
                ))
                .next(format!(
                    "set `config` of node {} to another path (for example nodes/{}/server.conf)",
                    node.name,
                    node.name
                )),
            ));
        }
        Ok(())
    }

    /// The names of the node folders `.cotal/node.<name>/` on disk (a cluster's, whatever
    /// `cotal.toml` says now).
    pub fn node_folders(&self) -> Vec<String> {
        let Ok(entries) = std::fs::read_dir(self.state_dir()) else {
            return Vec::new();
        };
        let mut out: Vec<String> = entries
            .flatten()
            .filter(|e| e.file_type().is_ok_and(|t| t.is_dir()))
            .filter_map(|e| {
                e.file_name()
                    .to_str()?
                    .strip_prefix("node.")
                    .map(str::to_string)
            })
            .collect();
        out.sort();
        out
    }
    pub fn audit_log(&self) -> PathBuf {
        self.state_dir().join("audit.jsonl")
    }
    /// The JetStream store: `store_dir` from `cotal.toml`, relative to the root.
    pub fn store_dir(&self, configured: &str) -> PathBuf {
        normalize(&self.dir.join(configured))
    }
}

pub use crate::desired::topology::NodeFiles;

/// The files of a space's folder `.cotal/space.<hex>/`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SpaceFile {
    /// The protection last applied, bound to its account.
    Lifecycle,
    /// The space's $SYS membership-observer creds.
    ObserverCreds,
    /// The space's $SYS connection-evictor creds.
    EvictorCreds,
    /// `{"accountId": ...}`: the account the $SYS creds observe; written last.
    Membership,
    /// The users `cotal creds` minted and the revocations recorded (no secrets).
    Users,
    /// Every $SYS user minted for the space and not expired yet (public keys only), so a
    /// suspension or removal revokes the replaced ones too.
    SysUsers,
    /// The space's move to another broker, recorded on the source (no secret).
    Relocation,
}

impl SpaceFile {
    pub fn name(self) -> &'static str {
        match self {
            SpaceFile::Lifecycle => "lifecycle.json",
            SpaceFile::ObserverCreds => "membership-observer.creds",
            SpaceFile::EvictorCreds => "connection-evictor.creds",
            SpaceFile::Membership => "membership.json",
            SpaceFile::Users => "users.json",
            SpaceFile::SysUsers => "sys-users.json",
            SpaceFile::Relocation => "relocation.json",
        }
    }
}

/// File-name prefix and suffix of the account-record namespace.
pub const ACCOUNT_PREFIX: &str = "account.";
pub const ACCOUNT_SUFFIX: &str = ".json";

/// The canonical form of an absolute path: its deepest existing ancestor resolved by the
/// kernel (`realpath`), the parts that do not exist yet appended as written.
fn canonical(abs: &Path) -> Result<PathBuf> {
    let mut missing = Vec::new();
    let mut existing = abs;
    loop {
        match std::fs::canonicalize(existing) {
            Ok(resolved) => {
                let mut out = resolved;
                for part in missing.iter().rev() {
                    out.push(part);
                }
                return Ok(out);
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                let (Some(parent), Some(name)) = (existing.parent(), existing.file_name()) else {
                    return Err(Error::io(abs, e));
                };
                missing.push(name.to_os_string());
                existing = parent;
            }
            Err(e) => return Err(Error::io(existing, e)),
        }
    }
}

/// Refuse a state folder that another user could have written: `.cotal/` (and its `auth/` and
/// `maintenance/`) must be real directories owned by the user running cotal and not writable
/// by group or others. Absent folders are fine (`init` creates them 0700).
pub fn check_safe(state_dir: &Path) -> Result<()> {
    use std::os::unix::fs::MetadataExt;
    let me = nix::unistd::geteuid().as_raw();
    for dir in [
        state_dir.to_path_buf(),
        state_dir.join("auth"),
        state_dir.join("maintenance"),
    ] {
        let meta = match std::fs::symlink_metadata(&dir) {
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => continue,
            Err(e) => return Err(Error::io(&dir, e)),
            Ok(m) => m,
        };
        let shown = dir.display();
        let why = if !meta.file_type().is_dir() {
            Some((
                format!(
                    "{shown} is {}, not a directory",
                    crate::store::atomic::kind_of(&meta.file_type())
                ),
                "replace it with the real folder (cotal never follows links in its state), or pass --root to the folder that holds it".to_string(),
            ))
        } else if meta.uid() != me {
            Some((
                format!(
                    "{shown} is owned by uid {}, not by you (uid {me}): another user's root could feed cotal planted records, a journal and a config",
                    meta.uid()
                ),
                format!(
                    "run cotal as the user who owns this root; if this root is yours, `chown -R {me} {shown}`"
                ),
            ))
        } else if meta.mode() & 0o022 != 0 {
            Some((
                format!(
                    "{shown} is writable by {} (mode {:04o}): anyone who can write it could plant records, links or a journal",
                    if meta.mode() & 0o002 != 0 {
                        "everyone"
                    } else {
                        "its group"
                    },
                    meta.mode() & 0o7777
                ),
                format!("`chmod -R go-w {shown}` (cotal creates its folders 0700)"),
            ))
        } else {
            None
        };
        if let Some((what, next)) = why {
            return Err(Error::refused(
                Diagnostic::new(format!(
                    "this root's state folder is not safe to trust: {what}.",
                ))
                .blast("none, nothing was read or changed.")
                .next(next),
            ));
        }
    }
    Ok(())
}

/// Refuse desired state another user could have written: a `cotal.toml` owned by another user
/// (discovery would otherwise adopt it from an ancestor folder, git's CVE-2022-24765 class) or
/// writable by everyone, and a root folder writable by everyone without the sticky bit (anyone
/// could replace `cotal.toml` or `.cotal/`). Group write is left to the operator.
fn check_desired(root: &Path, desired: &Path) -> Result<()> {
    use std::os::unix::fs::MetadataExt;
    let me = nix::unistd::geteuid().as_raw();
    let refuse = |what: String, next: String| {
        Err(Error::refused(
            Diagnostic::new(format!("{what}."))
                .blast("none, nothing was read or changed.")
                .next(next),
        ))
    };
    if let Ok(meta) = std::fs::metadata(desired) {
        if meta.uid() != me {
            return refuse(
                format!(
                    "{} is owned by uid {}, not by you (uid {me}): cotal does not act on another user's desired state",
                    desired.display(),
                    meta.uid()
                ),
                "run cotal as the user who owns this root, or pass --root to your own root".into(),
            );
        }
        if meta.mode() & 0o002 != 0 {
            return refuse(
                format!(
                    "{} is writable by everyone (mode {:04o}): anyone could rewrite the tenants it declares",
                    desired.display(),
                    meta.mode() & 0o7777
                ),
                format!("`chmod o-w {}`", desired.display()),
            );
        }
    }
    if let Ok(meta) = std::fs::metadata(root)
        && meta.mode() & 0o002 != 0
        && meta.mode() & 0o1000 == 0
    {
        return refuse(
            format!(
                "the root folder {} is writable by everyone (mode {:04o}): anyone could replace its cotal.toml or .cotal/",
                root.display(),
                meta.mode() & 0o7777
            ),
            format!("`chmod o-w {}`", root.display()),
        );
    }
    Ok(())
}

/// Lexical normalization (no symlink resolution): drops `.` and folds `..`.
fn normalize(path: &Path) -> PathBuf {
    crate::desired::topology::normalize(path)
}
