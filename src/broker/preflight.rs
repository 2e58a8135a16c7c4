//! `nats-server -t -c FILE`: the broker's own syntax check of a candidate config.
//!
//! It catches syntax errors and malformed preloads, not a JWT signed by another operator (the
//! renderer refuses those).

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

/// Check a config with `nats-server -t` when a binary is available. `Ok(false)` when none is.
pub fn check(config: &Path) -> Result<bool> {
    let Some(bin) = binary() else {
        return Ok(false);
    };
    let out = std::process::Command::new(&bin)
        .arg("-t")
        .arg("-c")
        .arg(config)
        .output()
        .map_err(|e| Error::Other(format!("cannot run {} -t: {e}", bin.display())))?;
    if out.status.success() {
        Ok(true)
    } else {
        let text = String::from_utf8_lossy(&out.stderr).trim().to_string();
        let text = if text.is_empty() {
            String::from_utf8_lossy(&out.stdout).trim().to_string()
        } else {
            text
        };
        Err(Error::Other(format!(
            "nats-server rejected the rendered config {}: {}",
            config.display(),
            crate::render::shorten_tokens(&text)
        )))
    }
}
