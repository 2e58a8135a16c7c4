//! Everything cotal keeps on disk (docs/design/architecture.md, "The .cotal folder"), one module per artifact.
//!
//! Invariants: every write goes through [`atomic`] (temp file, fsync, rename, fsync the
//! directory); secret files are created 0600 and never pass through a wider mode; no module
//! here follows a symlink where a record is expected.

pub mod account_record;
pub mod atomic;
pub mod audit;
pub mod broker_record;
pub mod caches;
pub mod cut;
pub mod desired_file;
pub mod generation;
pub mod inventory;
pub mod jetstream_dir;
pub mod journal;
pub mod lock;
pub mod partial_copy;
pub mod paths;
pub mod record;
pub mod relocation;
pub mod route_rotation;
pub mod server_conf;
pub mod space_dir;
pub mod state_key;
pub mod store_home;
pub mod users;

pub use paths::{NodeFiles, Root};

/// Whether a pid names a live process (signal 0).
pub fn process_alive(pid: u32) -> bool {
    let Ok(raw) = i32::try_from(pid) else {
        return false;
    };
    if raw <= 0 {
        return false;
    }
    let exists = match nix::sys::signal::kill(nix::unistd::Pid::from_raw(raw), None) {
        Ok(()) => true,
        Err(nix::errno::Errno::EPERM) => true,
        Err(_) => false,
    };
    // A zombie (exited, not yet reaped) is not alive.
    exists
        && !std::fs::read_to_string(format!("/proc/{pid}/stat"))
            .ok()
            .and_then(|s| s.rsplit_once(") ").map(|(_, rest)| rest.starts_with('Z')))
            .unwrap_or(false)
}
