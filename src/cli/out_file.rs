//! `--out FILE`: where cotal writes a file the operator named (`creds`, `plan`, `state export`).
//!
//! Invariants: `-` is standard output. Any other path is written only when it is absent, or an
//! existing regular file and `--force` says so; a link, a FIFO, a device or a folder is refused,
//! so cotal never writes through a link nor over a special file (as root, `--out /dev/null`
//! would otherwise replace the device by a file holding a seed). A path that is this root's
//! `cotal.toml` or lies inside its state folder is refused whatever `--force` says. Every check
//! runs before any work, so a refusal changes nothing; the write itself is atomic (a temp file
//! renamed over the path, which replaces a link that appeared meanwhile instead of following it).

use crate::diagnostic::Diagnostic;
use crate::error::{Error, Result};
use crate::store::{Root, atomic};
use std::io::Write;
use std::path::{Path, PathBuf};

/// A checked `--out`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Target {
    Stdout,
    File(PathBuf),
}

impl Target {
    /// Check `raw` before any work. `root`: the root whose files are never overwritten.
    pub fn check(raw: &Path, force: bool, root: Option<&Root>) -> Result<Target> {
        if raw == Path::new("-") {
            return Ok(Target::Stdout);
        }
        if let Some(root) = root {
            root.refuse_own_file(raw)?;
        }
        let refuse = |what: &str, next: &str| {
            Err(Error::input(
                Diagnostic::new(format!("--out {} is {what}.", raw.display()))
                    .blast("none, nothing was written.")
                    .next(next),
            ))
        };
        match std::fs::symlink_metadata(raw) {
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(Target::File(raw.into())),
            Err(e) => Err(Error::io(raw, e)),
            Ok(m) if m.file_type().is_symlink() => refuse(
                "a symbolic link: cotal never writes through a link",
                "name the file itself, or `-` for standard output",
            ),
            Ok(m) if !m.file_type().is_file() => refuse(
                &format!(
                    "not a regular file ({}): cotal never writes over one",
                    atomic::kind_of(&m.file_type())
                ),
                "name a regular file, or `-` for standard output",
            ),
            Ok(_) if !force => refuse(
                "an existing file: cotal does not replace it unless asked",
                "add --force to replace it, or choose another path",
            ),
            Ok(_) => Ok(Target::File(raw.into())),
        }
    }

    /// Write `bytes` (file mode `mode`).
    pub fn write(&self, bytes: &[u8], mode: u32) -> Result<()> {
        match self {
            Target::Stdout => {
                let mut out = std::io::stdout().lock();
                out.write_all(bytes)
                    .and_then(|_| out.flush())
                    .map_err(|e| Error::io("standard output", e))
            }
            Target::File(path) => atomic::write(path, bytes, mode),
        }
    }

    pub fn is_stdout(&self) -> bool {
        *self == Target::Stdout
    }
}

impl std::fmt::Display for Target {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Target::Stdout => f.write_str("standard output"),
            Target::File(p) => write!(f, "{}", p.display()),
        }
    }
}
