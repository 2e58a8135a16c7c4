//! The root's maintenance lock: an fs2 exclusive lock on `.cotal/maintenance/lock`, with
//! `lock.json` beside it naming the holder (pid, host, command, since).
//!
//! Invariants: the kernel releases the lock when its holder dies, so a lock left by a dead
//! process never blocks anyone (its `lock.json` is then only a stale note, overwritten by the next
//! holder); `lock.json` is removed before the lock is released, never after.

use crate::error::{Error, IoContext, Result};
use crate::store::{Root, atomic};
use fs2::FileExt;
use serde::{Deserialize, Serialize};
use std::fs::{File, OpenOptions};
use std::os::unix::fs::OpenOptionsExt;
use std::time::{Duration, Instant};

/// Who holds the lock.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Holder {
    pub pid: u32,
    pub host: String,
    pub command: String,
    pub since: String,
}

impl std::fmt::Display for Holder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "pid {} on {} running `{}` since {}",
            self.pid, self.host, self.command, self.since
        )
    }
}

/// The held lock; released on drop.
#[derive(Debug)]
pub struct Lock {
    file: File,
    root: Root,
}

impl Drop for Lock {
    fn drop(&mut self) {
        let _ = atomic::remove_file(&self.root.lock_info());
        let _ = FileExt::unlock(&self.file);
    }
}

/// Take the lock, waiting up to `timeout` (zero: fail at once naming the holder).
pub fn acquire(root: &Root, holder: &Holder, timeout: Duration) -> Result<Lock> {
    atomic::ensure_dir(&root.maintenance_dir(), atomic::PRIVATE_DIR)?;
    let path = root.lock_file();
    let file = OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .mode(atomic::SECRET)
        .open(&path)
        .at(&path)?;
    let deadline = Instant::now() + timeout;
    let mut pause = Duration::from_millis(20);
    loop {
        match file.try_lock_exclusive() {
            Ok(()) => break,
            Err(e) if e.raw_os_error() == fs2::lock_contended_error().raw_os_error() => {
                let now = Instant::now();
                if now >= deadline {
                    return Err(Error::LockHeld(format!(
                        "{}\nwait for it to finish, or pass --lock-timeout DURATION to wait",
                        describe_holder(root)
                    )));
                }
                std::thread::sleep(pause.min(deadline - now));
                pause = (pause * 2).min(Duration::from_millis(250));
            }
            Err(e) => return Err(Error::io(&path, e)),
        }
    }
    let mut json = serde_json::to_vec(holder).expect("holder serializes");
    json.push(b'\n');
    atomic::write(&root.lock_info(), &json, atomic::SECRET)?;
    Ok(Lock {
        file,
        root: root.clone(),
    })
}

/// Who holds the lock, from `lock.json`, for messages.
pub fn describe_holder(root: &Root) -> String {
    match std::fs::read(root.lock_info())
        .ok()
        .and_then(|b| serde_json::from_slice::<Holder>(&b).ok())
    {
        Some(h) => format!("held by {h}"),
        None => "held by a process that has not recorded itself yet".into(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn holder(cmd: &str) -> Holder {
        Holder {
            pid: std::process::id(),
            host: "test".into(),
            command: cmd.into(),
            since: "now".into(),
        }
    }

    #[test]
    fn a_second_taker_is_refused_naming_the_holder_then_succeeds_after_release() {
        let dir = tempfile::tempdir().unwrap();
        let root = Root::at(dir.path()).unwrap();
        let first = acquire(&root, &holder("cotal apply"), Duration::ZERO).unwrap();
        let err = acquire(&root, &holder("cotal plan"), Duration::ZERO).unwrap_err();
        assert_eq!(err.exit_code(), crate::error::exit::LOCK_HELD);
        assert!(err.to_string().contains("running `cotal apply`"), "{err}");
        drop(first);
        assert!(!root.lock_info().exists());
        acquire(&root, &holder("cotal apply"), Duration::ZERO).unwrap();
    }
}
