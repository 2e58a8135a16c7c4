//! The root's maintenance lock: an fs2 exclusive lock on `.cotal/maintenance/lock`, with
//! `lock.json` beside it naming the holder (pid, host, command, since).
//!
//! Invariants: the kernel releases the lock when its holder dies, so a lock left by a dead
//! process never blocks anyone (its `lock.json` is then only a stale note, overwritten by the next
//! holder); `lock.json` is removed before the lock is released, never after. A lock is held
//! only while the file it locked is still the one at the lock path (same device and inode):
//! deleting or replacing `lock` lets a second cotal lock a new file, so the first one checks
//! with [`Lock::verify`] before every step and refuses once its file was replaced.

use crate::diagnostic::Diagnostic;
use crate::error::{Error, IoContext, Result};
use crate::store::record::{self, Layout, Record};
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
            self.pid,
            crate::space::channels::displayable(&self.host),
            crate::space::channels::displayable(&self.command),
            crate::space::channels::displayable(&self.since)
        )
    }
}

/// The held lock; released on drop.
#[derive(Debug)]
pub struct Lock {
    file: File,
    root: Root,
    /// Who holds it, and whether `lock.json` says so yet (see [`Lock::announce`]).
    holder: Holder,
    announced: bool,
    /// The sweep of a killed writer's temp files (see [`Lock::announce`]), running beside the
    /// holder's work; joined before the lock is released.
    sweep: Option<std::thread::JoinHandle<usize>>,
}

impl Drop for Lock {
    fn drop(&mut self) {
        if let Some(removed) = self.sweep.take().and_then(|s| s.join().ok())
            && removed > 0
        {
            tracing::info!(removed, "removed temp files a killed writer left");
        }
        // Only the holder of the file at the path, who wrote the note, may remove it.
        if self.announced && self.still_at_path() {
            let _ = atomic::remove_file(&self.root.lock_info());
        }
        let _ = FileExt::unlock(&self.file);
    }
}

impl Lock {
    /// Write `lock.json`, naming this holder to whoever waits, and start the sweep of a killed
    /// writer's temp files beside the holder's work. A holder that ends up changing nothing (a
    /// no-op apply) never announces itself, so it writes nothing at all.
    pub fn announce(&mut self) -> Result<()> {
        if !self.announced {
            record::write(
                &self.root.lock_info(),
                &self.holder,
                Layout::Compact,
                atomic::SECRET,
            )?;
            self.announced = true;
            // The writer that holds the root removes what a killed writer left (best effort),
            // on a thread of its own: it lists every space's folder (a thousand at a thousand
            // spaces), which the holder's work need not wait for. It removes only temp files
            // last modified [`ORPHANED_AFTER`] before `lock.json` was, by the file system's own
            // clock: every temp file this holder writes is younger than `lock.json` whatever
            // the wall clock does meanwhile (a step back, a shared root's server clock), so it
            // is never one of them. It ends before the lock does (`Drop`), so no other writer
            // ever runs beside it. A thread that cannot be made leaves the sweep to the next
            // writer.
            let root = self.root.clone();
            let announced_at = std::fs::symlink_metadata(root.lock_info())
                .and_then(|m| m.modified())
                .unwrap_or_else(|_| std::time::SystemTime::now());
            self.sweep = std::thread::Builder::new()
                .name("cotal-sweep".into())
                .spawn(move || {
                    atomic::sweep_orphaned_temps(&root.state_dirs(), announced_at, ORPHANED_AFTER)
                })
                .ok();
        }
        Ok(())
    }

    fn still_at_path(&self) -> bool {
        same_file(&self.file, &self.root.lock_file())
    }

    /// Refuse when the locked file is no longer the one at the lock path: someone deleted or
    /// replaced it, so another cotal may now hold a lock on the new file.
    pub fn verify(&self) -> Result<()> {
        if self.still_at_path() {
            return Ok(());
        }
        Err(Error::refused(
            Diagnostic::new(format!(
                "the lock file {} was deleted or replaced while this cotal held it, so another cotal may hold the root now; this one stops here.",
                self.root.lock_file().display()
            ))
            .blast("whatever this command reported as done so far; nothing more.")
            .next("never delete the lock file by hand (the kernel frees it when its holder dies); run `cotal plan` to see the state now"),
        ))
    }
}

/// Whether the open `file` is the file at `path` (same device and inode; a link at the path
/// never matches).
fn same_file(file: &File, path: &std::path::Path) -> bool {
    use std::os::unix::fs::MetadataExt;
    match (file.metadata(), std::fs::symlink_metadata(path)) {
        (Ok(a), Ok(b)) => a.dev() == b.dev() && a.ino() == b.ino(),
        _ => false,
    }
}

/// A temp file of an atomic write older than this was left by a writer that was killed: a
/// write holds its temp file for milliseconds (and every writer of the root holds its lock).
pub const ORPHANED_AFTER: Duration = Duration::from_secs(600);

/// Take the lock, waiting up to `timeout` (zero: fail at once naming the holder), and name the
/// holder in `lock.json`.
pub fn acquire(root: &Root, holder: &Holder, timeout: Duration) -> Result<Lock> {
    let mut lock = take(root, holder, timeout)?;
    lock.announce()?;
    Ok(lock)
}

/// Take the lock like [`acquire`] without writing `lock.json` yet: the caller announces itself
/// ([`Lock::announce`]) once it knows it will change something. Until then a waiting cotal says
/// the lock is held "by a process that has not recorded itself yet".
pub fn take(root: &Root, holder: &Holder, timeout: Duration) -> Result<Lock> {
    // A root that was never initialised (a folder holding only cotal.toml: a CI checkout, a
    // config repository on a new host) gets no `.cotal/` from a verb that cannot act on it.
    if std::fs::symlink_metadata(root.state_dir()).is_err() {
        return Err(Error::refused(
            Diagnostic::new(format!(
                "{} has no .cotal/: no broker was ever initialised here, so there is nothing to act on; nothing was written.",
                root.dir().display()
            ))
            .next("`cotal init` makes the broker trust here, `cotal root restore DIR` brings a root backup here"),
        ));
    }
    atomic::ensure_dir(&root.maintenance_dir(), atomic::PRIVATE_DIR)?;
    let path = root.lock_file();
    let deadline = Instant::now() + timeout;
    let mut pause = Duration::from_millis(20);
    let file = loop {
        let file = open_lock_file(&path)?;
        match file.try_lock_exclusive() {
            // The file may have been replaced between the open and the lock: hold it only if
            // it is still the one at the path, else lock the new one.
            Ok(()) if same_file(&file, &path) => break file,
            Ok(()) => continue,
            Err(e) if e.raw_os_error() == fs2::lock_contended_error().raw_os_error() => {
                let now = Instant::now();
                if now >= deadline {
                    return Err(Error::lock_held(format!(
                        "{}\nwait for it to finish, or pass --lock-timeout DURATION to wait",
                        describe_holder(root)
                    )));
                }
                std::thread::sleep(pause.min(deadline - now));
                pause = (pause * 2).min(Duration::from_millis(250));
            }
            Err(e) => return Err(Error::io(&path, e)),
        }
    };
    // A holder note naming another live cotal on this host, or a live cotal holding open a lock
    // file that is no longer the one at the path (a holder that has not written its note yet),
    // means the lock file was deleted or replaced under that holder: it may still be working,
    // so this one does not start.
    let noted = read_holder(root)
        .filter(|h| h.pid != holder.pid && h.host == holder.host && is_live_cotal(h.pid));
    let other = match noted {
        Some(h) => Some(h.to_string()),
        None => orphaned_holder(&path, &file).map(|pid| format!("pid {pid} (a cotal)")),
    };
    if let Some(other) = other {
        let _ = FileExt::unlock(&file);
        return Err(Error::lock_held(
            Diagnostic::new(format!(
                "held by {other}, whose lock file {} was deleted or replaced; it may still be working.",
                path.display()
            ))
            .next("wait for it to finish (never delete the lock file by hand: the kernel frees it when its holder dies)"),
        ));
    }
    Ok(Lock {
        file,
        root: root.clone(),
        holder: holder.clone(),
        announced: false,
        sweep: None,
    })
}

/// Open (or create) the lock file without following a link; anything but a regular file there
/// is refused.
fn open_lock_file(path: &std::path::Path) -> Result<File> {
    let file = OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .mode(atomic::SECRET)
        .custom_flags((nix::fcntl::OFlag::O_NOFOLLOW | nix::fcntl::OFlag::O_NONBLOCK).bits())
        .open(path)
        .map_err(|e| {
            if e.raw_os_error() == Some(nix::errno::Errno::ELOOP as i32) {
                atomic::not_regular(path, "a symbolic link")
            } else {
                Error::io(path, e)
            }
        })?;
    let meta = file.metadata().at(path)?;
    if !meta.is_file() {
        return Err(atomic::not_regular(
            path,
            atomic::kind_of(&meta.file_type()),
        ));
    }
    Ok(file)
}

/// The holder note, if readable.
fn read_holder(root: &Root) -> Option<Holder> {
    match record::read(&root.lock_info()) {
        Ok(Record::Valid(holder)) => Some(holder),
        _ => None,
    }
}

/// A live cotal process of this user, other than this one, holding open a file that was the lock
/// file at `path` and no longer is (deleted, or replaced by `ours`), from the kernel's view of
/// its open files.
fn orphaned_holder(path: &std::path::Path, ours: &File) -> Option<u32> {
    use std::os::unix::fs::MetadataExt;
    let ours = ours.metadata().ok()?;
    let me = std::process::id();
    let deleted = format!("{} (deleted)", path.display());
    let pids = std::fs::read_dir("/proc").ok()?.flatten().filter_map(|e| {
        e.file_name()
            .to_str()
            .and_then(|n| n.parse::<u32>().ok())
            .filter(|pid| *pid != me && is_live_cotal(*pid))
    });
    for pid in pids {
        let Ok(fds) = std::fs::read_dir(format!("/proc/{pid}/fd")) else {
            continue;
        };
        for fd in fds.flatten() {
            let Ok(target) = std::fs::read_link(fd.path()) else {
                continue;
            };
            let stale = target.as_os_str() == deleted.as_str()
                || (target == path
                    && std::fs::metadata(fd.path())
                        .is_ok_and(|m| (m.dev(), m.ino()) != (ours.dev(), ours.ino())));
            if stale {
                return Some(pid);
            }
        }
    }
    None
}

/// Whether `pid` is a live cotal process (its executable is named cotal).
fn is_live_cotal(pid: u32) -> bool {
    crate::store::process_alive(pid)
        && std::fs::read_link(format!("/proc/{pid}/exe"))
            .ok()
            .and_then(|exe| exe.file_name().map(|n| n.to_string_lossy().into_owned()))
            .is_some_and(|n| n.starts_with("cotal"))
}

/// Who holds the lock, for messages: `lock.json` when the holder has written it, else the
/// kernel's own record of the lock (`/proc/locks`: the pid holding a lock on the lock file's
/// inode) with that process's command line, so the holder is named from the moment it took
/// the lock.
pub fn describe_holder(root: &Root) -> String {
    let kernel = kernel_holder(&root.lock_file());
    // lock.json of this host is believed only when the kernel agrees on the pid (a killed
    // holder leaves it behind, and a later one may not have written its own yet); one written
    // on another host (a shared root) cannot be checked here, and is shown as written.
    if let Some(h) = read_holder(root)
        && (h.host != crate::operator::host()
            || kernel.as_ref().is_none_or(|(pid, _)| *pid == h.pid))
    {
        return format!("held by {h}");
    }
    match kernel {
        Some((pid, command)) => format!(
            "held by pid {pid} on this host ({command}), which has not recorded itself in lock.json yet"
        ),
        None => "held by a process that has not recorded itself yet".into(),
    }
}

/// The pid holding a lock on `path`'s inode, per `/proc/locks`, and its command line.
fn kernel_holder(path: &std::path::Path) -> Option<(u32, String)> {
    use std::os::unix::fs::MetadataExt;
    let meta = std::fs::metadata(path).ok()?;
    let locks = std::fs::read_to_string("/proc/locks").ok()?;
    let pid = holder_in(&locks, meta.dev(), meta.ino())?;
    let command = crate::broker::identity::cmdline(pid)
        .map(|args| crate::broker::identity::shown_command(&args))
        .filter(|c| !c.is_empty())
        .unwrap_or_else(|| "command unknown".into());
    Some((pid, command))
}

/// The pid of the first lock `/proc/locks` lists on device `dev`, inode `ino` (lines such as
/// `1: FLOCK  ADVISORY  WRITE 1234 08:01:5678 0 EOF`; the device is `major:minor` in hex).
fn holder_in(locks: &str, dev: u64, ino: u64) -> Option<u32> {
    let major = ((dev >> 8) & 0xfff) | ((dev >> 32) & !0xfff);
    let minor = (dev & 0xff) | ((dev >> 12) & !0xff);
    locks.lines().find_map(|line| {
        let fields: Vec<&str> = line.split_whitespace().collect();
        // A blocked waiter's line is marked `->`; only a holder's is taken.
        if fields.get(1) == Some(&"->") {
            return None;
        }
        // 0: a holder in another pid namespace, which this one cannot name.
        let pid: u32 = fields.get(4)?.parse().ok().filter(|p| *p != 0)?;
        let mut id = fields.get(5)?.split(':');
        let (ma, mi, inode) = (id.next()?, id.next()?, id.next()?);
        (u64::from_str_radix(ma, 16).ok()? == major
            && u64::from_str_radix(mi, 16).ok()? == minor
            && inode.parse::<u64>().ok()? == ino)
            .then_some(pid)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_kernels_lock_table_names_the_holder_of_an_inode() {
        let locks = "1: FLOCK  ADVISORY  WRITE 4242 fd:01:1234 0 EOF\n1: -> FLOCK  ADVISORY  WRITE 77 fd:01:1234 0 EOF\n2: POSIX  ADVISORY  READ 99 08:02:555 0 EOF\n";
        let dev = (0xfd << 8) | 0x01;
        assert_eq!(holder_in(locks, dev, 1234), Some(4242));
        assert_eq!(holder_in(locks, (0x08 << 8) | 0x02, 555), Some(99));
        assert_eq!(holder_in(locks, dev, 999), None);
    }

    #[test]
    fn a_lock_taken_but_not_announced_is_named_by_the_kernel() {
        let dir = tempfile::tempdir().unwrap();
        let root = Root::at(dir.path()).unwrap();
        std::fs::create_dir_all(root.maintenance_dir()).unwrap();
        let _held = take(&root, &holder("test"), Duration::ZERO).unwrap();
        let said = describe_holder(&root);
        assert!(
            said.contains(&format!("pid {}", std::process::id()))
                && said.contains("has not recorded itself in lock.json yet"),
            "{said}"
        );
    }

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
        std::fs::create_dir(root.state_dir()).unwrap();
        let first = acquire(&root, &holder("cotal apply"), Duration::ZERO).unwrap();
        let err = acquire(&root, &holder("cotal plan"), Duration::ZERO).unwrap_err();
        assert_eq!(err.exit_code(), crate::error::exit::LOCK_HELD);
        assert!(err.to_string().contains("running `cotal apply`"), "{err}");
        drop(first);
        assert!(!root.lock_info().exists());
        acquire(&root, &holder("cotal apply"), Duration::ZERO).unwrap();
    }

    #[test]
    fn a_holder_whose_lock_file_was_replaced_stops() {
        let dir = tempfile::tempdir().unwrap();
        let root = Root::at(dir.path()).unwrap();
        std::fs::create_dir(root.state_dir()).unwrap();
        let first = acquire(&root, &holder("cotal apply"), Duration::ZERO).unwrap();
        first.verify().unwrap();
        std::fs::remove_file(root.lock_file()).unwrap();
        // A second taker locks the new file: it is the holder now.
        let second = acquire(&root, &holder("cotal apply"), Duration::ZERO).unwrap();
        second.verify().unwrap();
        let err = first.verify().unwrap_err();
        assert_eq!(err.exit_code(), crate::error::exit::REFUSED);
        assert!(err.to_string().contains("deleted or replaced"), "{err}");
        drop(first);
        assert!(
            root.lock_info().exists(),
            "the stale holder leaves the note alone"
        );
    }
}
