//! Where every artifact of a root lives (DESIGN.md section 3), and how a root is found.
//!
//! Invariant: this module is the only place that spells a path under `.cotal/`.

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
    /// A root at `dir` (made absolute so rendered paths and messages are unambiguous).
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
            dir: normalize(&abs),
        })
    }

    /// `--root`, else `COTAL_ROOT`, else the nearest ancestor of the working directory holding
    /// `cotal.toml` or `.cotal/`, else the working directory itself (for `init`).
    pub fn discover(explicit: Option<&Path>) -> Result<Self> {
        if let Some(dir) = explicit {
            return Root::at(dir);
        }
        if let Some(dir) = std::env::var_os("COTAL_ROOT").filter(|v| !v.is_empty()) {
            return Root::at(PathBuf::from(dir));
        }
        let cwd = std::env::current_dir().map_err(|e| Error::io(".", e))?;
        for dir in cwd.ancestors() {
            if dir.join(DESIRED_FILE).is_file() || dir.join(".cotal").is_dir() {
                return Root::at(dir);
            }
        }
        Root::at(cwd)
    }

    pub fn dir(&self) -> &Path {
        &self.dir
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
    pub fn generation_record(&self) -> PathBuf {
        self.auth_dir().join("broker-config.json")
    }
    pub fn maintenance_dir(&self) -> PathBuf {
        self.state_dir().join("maintenance")
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
    pub fn space_dir(&self, space: &SpaceName) -> PathBuf {
        self.state_dir().join(format!("space.{}", space.hex()))
    }
    pub fn pid_file(&self) -> PathBuf {
        self.state_dir().join("nats.pid")
    }
    pub fn log_file(&self) -> PathBuf {
        self.state_dir().join("nats.log")
    }
    pub fn audit_log(&self) -> PathBuf {
        self.state_dir().join("audit.jsonl")
    }
    /// The JetStream store: `store_dir` from `cotal.toml`, relative to the root.
    pub fn store_dir(&self, configured: &str) -> PathBuf {
        normalize(&self.dir.join(configured))
    }
}

/// File-name prefix and suffix of the account-record namespace.
pub const ACCOUNT_PREFIX: &str = "account.";
pub const ACCOUNT_SUFFIX: &str = ".json";

/// Lexical normalization (no symlink resolution): drops `.` and folds `..`.
fn normalize(path: &Path) -> PathBuf {
    use std::path::Component;
    let mut out = PathBuf::new();
    for c in path.components() {
        match c {
            Component::CurDir => {}
            Component::ParentDir => {
                out.pop();
            }
            other => out.push(other.as_os_str()),
        }
    }
    out
}
