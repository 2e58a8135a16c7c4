//! Atomic, durable file writes and removals.
//!
//! A write creates a temp file in the target's directory with the final mode, writes, fsyncs,
//! renames it over the target and fsyncs the directory: a reader sees the old file or the new
//! one, never a torn one, and a power cut after return keeps the new one.
//!
//! Bulk writes may defer their syncs ([`set_deferred`]): a new file is still written whole and
//! renamed into place, but its fsync and its folder's wait until [`set_deferred`]`(false)`,
//! which syncs every deferred file at once and then each folder once. Whoever defers decides
//! what must not happen before that flush (for apply: the promotion, which is the commit). A
//! write that replaces an existing file is never deferred (its old content must survive a
//! crash), so a power cut before the flush can only leave a new file empty.
//!
//! Invariants: a temp file is created with `O_CREAT|O_EXCL|O_NOFOLLOW` (a planted link or file at
//! its name fails the create instead of being written through) and its mode is set on the open
//! file, never by path. Every read of cotal's own state goes through [`read_no_follow`]: a link
//! is never followed, a FIFO never blocks, and anything but a regular file is reported as what
//! it is.

use crate::diagnostic::Diagnostic;
use crate::error::{Error, IoContext, Result};
use std::fs;
use std::io::{Read as _, Write};
use std::os::unix::fs::{DirBuilderExt, FileTypeExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

/// Mode of secret files.
pub const SECRET: u32 = 0o600;
/// Mode of public files.
pub const PUBLIC: u32 = 0o644;
/// Mode of private directories.
pub const PRIVATE_DIR: u32 = 0o700;

/// The directory holding `path` (`.` for a bare file name).
fn parent_of(path: &Path) -> &Path {
    match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => Path::new("."),
    }
}

/// A temp file in `dir` for an atomic write, created `O_EXCL|O_NOFOLLOW` with exactly `mode`
/// (set on the open file: the umask may have narrowed it at creation, and a chmod by path could
/// be redirected by a link swapped in after the create).
fn temp_in(dir: &Path, mode: u32) -> Result<tempfile::NamedTempFile> {
    let tmp = tempfile::Builder::new()
        .prefix(".cotal-tmp.")
        .make_in(dir, |candidate| {
            fs::OpenOptions::new()
                .write(true)
                .create_new(true)
                .mode(mode)
                .custom_flags(nix::fcntl::OFlag::O_NOFOLLOW.bits())
                .open(candidate)
        })
        .at(dir)?;
    tmp.as_file()
        .set_permissions(fs::Permissions::from_mode(mode))
        .at(tmp.path())?;
    Ok(tmp)
}

/// Make a written temp file durable and rename it over `path`, then sync the folder. While syncs
/// are deferred, a file that does not exist yet is renamed into place at once and both syncs
/// are left to the flush; a file that replaces another is always synced before its rename, so a
/// crash leaves the old content or the new, never an empty file where a record was.
fn persist(tmp: tempfile::NamedTempFile, path: &Path) -> Result<()> {
    if fs::symlink_metadata(path).is_err() && defer(Some(path), Some(parent_of(path))) {
        return tmp.persist(path).map(|_| ()).map_err(|e| e.error).at(path);
    }
    tmp.as_file().sync_all().at(path)?;
    tmp.persist(path).map_err(|e| e.error).at(path)?;
    sync_dir(parent_of(path))
}

/// The files and folders whose fsync is deferred on this thread (`None`: syncs are not
/// deferred).
#[derive(Default)]
struct Deferred {
    files: std::collections::BTreeSet<std::path::PathBuf>,
    dirs: std::collections::BTreeSet<std::path::PathBuf>,
}

thread_local! {
    static DEFERRED: std::cell::RefCell<Option<Deferred>> = const { std::cell::RefCell::new(None) };
}

/// While syncs are deferred, remember `file` and `dir` for the next flush and say so (`false`:
/// not deferring, the caller syncs now).
fn defer(file: Option<&Path>, dir: Option<&Path>) -> bool {
    DEFERRED.with(|d| match d.borrow_mut().as_mut() {
        Some(d) => {
            d.files.extend(file.map(Path::to_path_buf));
            d.dirs.extend(dir.map(Path::to_path_buf));
            true
        }
        None => false,
    })
}

/// Sync a file appended to in place (the audit log): now, or at the next flush while syncs are
/// deferred.
pub fn sync_appended(file: &fs::File, path: &Path) -> std::io::Result<()> {
    if defer(Some(path), None) {
        return Ok(());
    }
    file.sync_all()
}

/// Defer this thread's syncs (`true`), or stop deferring them (`false`): every deferred file
/// is synced (all at once), then every folder once, before this returns `Ok`. Turning deferral
/// on while it is on keeps what is pending.
pub fn set_deferred(on: bool) -> Result<()> {
    if on {
        DEFERRED.with(|d| {
            d.borrow_mut().get_or_insert_with(Deferred::default);
        });
        return Ok(());
    }
    let Some(pending) = DEFERRED.with(|d| d.borrow_mut().take()) else {
        return Ok(());
    };
    use rayon::prelude::*;
    // Concurrent fsyncs share the file system's journal commits: together they cost about
    // one. A file removed since it was written has nothing left to sync.
    pending
        .files
        .par_iter()
        .try_for_each(|f| match open_regular(f) {
            Ok(file) => file.sync_all().at(f),
            Err(_) if fs::symlink_metadata(f).is_err() => Ok(()),
            Err(e) => Err(e),
        })?;
    pending.dirs.par_iter().try_for_each(|d| sync_dir(d))
}

/// How many files wait for a deferred sync on this thread.
pub fn deferred_pending() -> usize {
    DEFERRED.with(|d| {
        d.borrow()
            .as_ref()
            .map_or(0, |d| d.files.len() + d.dirs.len())
    })
}

/// Remove the temp files of atomic writes (`.cotal-tmp.*`, regular files) in `dirs` that were
/// last modified more than `older_than` before `now`: what a writer killed between its temp
/// file and its rename left behind. Best effort; returns how many were removed. Never follows
/// a link, never descends.
pub fn sweep_orphaned_temps(
    dirs: &[PathBuf],
    now: std::time::SystemTime,
    older_than: std::time::Duration,
) -> usize {
    let mut removed = 0;
    for dir in dirs {
        let Ok(entries) = fs::read_dir(dir) else {
            continue;
        };
        for entry in entries.flatten() {
            if !entry
                .file_name()
                .to_string_lossy()
                .starts_with(".cotal-tmp.")
            {
                continue;
            }
            let Ok(meta) = entry.metadata() else { continue };
            let old = meta
                .modified()
                .ok()
                .and_then(|m| now.duration_since(m).ok())
                .is_some_and(|age| age > older_than);
            if meta.is_file() && old && fs::remove_file(entry.path()).is_ok() {
                removed += 1;
            }
        }
    }
    removed
}

/// Atomically replace `path` with `bytes`, created with `mode`.
pub fn write(path: &Path, bytes: &[u8], mode: u32) -> Result<()> {
    let mut tmp = temp_in(parent_of(path), mode)?;
    tmp.write_all(bytes).at(path)?;
    persist(tmp, path)
}

/// Create `path` holding `bytes` (mode `mode`) unless something is already there: whole or
/// not at all, and never replacing (two writers racing leave the first one's). Returns whether
/// this call created it.
pub fn create_new(path: &Path, bytes: &[u8], mode: u32) -> Result<bool> {
    let mut tmp = temp_in(parent_of(path), mode)?;
    tmp.write_all(bytes).at(path)?;
    tmp.as_file().sync_all().at(path)?;
    match tmp.persist_noclobber(path) {
        Ok(_) => {
            sync_dir(parent_of(path))?;
            Ok(true)
        }
        Err(e) if e.error.kind() == std::io::ErrorKind::AlreadyExists => Ok(false),
        Err(e) => Err(e.error).at(path),
    }
}

/// Open the regular file `path` for reading; a link is not followed, a FIFO never blocks.
fn open_regular(path: &Path) -> Result<fs::File> {
    let f = fs::OpenOptions::new()
        .read(true)
        .custom_flags((nix::fcntl::OFlag::O_NOFOLLOW | nix::fcntl::OFlag::O_NONBLOCK).bits())
        .open(path)
        .at(path)?;
    let meta = f.metadata().at(path)?;
    if !meta.is_file() {
        return Err(not_regular(path, kind_of(&meta.file_type())));
    }
    Ok(f)
}

/// Read `src` to its end in bounded memory, feeding each chunk to `sink`; the sha256 (hex) and
/// length of what was read.
fn stream(
    src: &mut fs::File,
    from: &Path,
    mut sink: impl FnMut(&[u8]) -> Result<()>,
) -> Result<(String, u64)> {
    use sha2::Digest as _;
    let mut hasher = sha2::Sha256::new();
    let mut buf = vec![0u8; 1 << 16];
    let mut len = 0u64;
    loop {
        let n = src.read(&mut buf).at(from)?;
        if n == 0 {
            return Ok((hex::encode(hasher.finalize()), len));
        }
        hasher.update(&buf[..n]);
        sink(&buf[..n])?;
        len += n as u64;
    }
}

/// Atomically copy the regular file `from` to `to` (created with `mode`), streaming: memory
/// stays bounded whatever the size, and the sha256 (hex) and length returned are of the bytes
/// written, so what was placed is what was checked. `from` must be a regular file (a link is
/// not followed).
pub fn copy_file(from: &Path, to: &Path, mode: u32) -> Result<(String, u64)> {
    let mut src = open_regular(from)?;
    let mut tmp = temp_in(parent_of(to), mode)?;
    let digest = stream(&mut src, from, |chunk| tmp.write_all(chunk).at(to))?;
    persist(tmp, to)?;
    Ok(digest)
}

/// The sha256 (hex) and length of the regular file `path`, streaming (bounded memory). A link
/// is not followed.
pub fn hash_file(path: &Path) -> Result<(String, u64)> {
    stream(&mut open_regular(path)?, path, |_| Ok(()))
}

/// fsync a directory so a rename or unlink in it is durable.
pub fn sync_dir(dir: &Path) -> Result<()> {
    fs::File::open(dir).and_then(|f| f.sync_all()).at(dir)
}

/// Create `dir` (and parents) with `mode` on every directory it creates.
pub fn ensure_dir(dir: &Path, mode: u32) -> Result<()> {
    if dir.is_dir() {
        return Ok(());
    }
    fs::DirBuilder::new()
        .recursive(true)
        .mode(mode)
        .create(dir)
        .at(dir)?;
    fs::set_permissions(dir, fs::Permissions::from_mode(mode)).at(dir)?;
    let Some(parent) = dir.parent() else {
        return Ok(());
    };
    // A folder made while syncs are deferred has its entry synced at the flush.
    if defer(None, Some(parent)) {
        Ok(())
    } else {
        sync_dir(parent)
    }
}

/// Rename durably (both names in one directory, or the target's directory fsynced).
pub fn rename(from: &Path, to: &Path) -> Result<()> {
    fs::rename(from, to).at(from)?;
    sync_dir(parent_of(to))
}

/// Remove a file if it exists; true when something was removed.
pub fn remove_file(path: &Path) -> Result<bool> {
    match fs::remove_file(path) {
        Ok(()) => {
            sync_dir(parent_of(path))?;
            Ok(true)
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(false),
        Err(e) => Err(crate::error::Error::io(path, e)),
    }
}

/// Remove a directory tree if it exists; true when something was removed. Never follows a
/// symlink at `path` itself (a link is unlinked, not traversed).
pub fn remove_tree(path: &Path) -> Result<bool> {
    match fs::symlink_metadata(path) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(false),
        Err(e) => Err(crate::error::Error::io(path, e)),
        Ok(meta) => {
            if meta.is_dir() {
                // Another remover may be emptying the same tree (nats-server deleting a purged
                // account's folder on another node of the cluster): an entry that vanished
                // under the walk is not an error, and the walk is tried again.
                let mut tries = 0;
                loop {
                    match fs::remove_dir_all(path) {
                        Ok(()) => break,
                        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                            if fs::symlink_metadata(path).is_err() {
                                break;
                            }
                            tries += 1;
                            if tries >= 5 {
                                return Err(crate::error::Error::io(path, e));
                            }
                        }
                        Err(e) => return Err(crate::error::Error::io(path, e)),
                    }
                }
            } else {
                match fs::remove_file(path) {
                    Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                    other => other.at(path)?,
                }
            }
            // The parent may be going too (the same concurrent remover): nothing to sync then.
            match fs::File::open(parent_of(path)) {
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                opened => opened.and_then(|f| f.sync_all()).at(parent_of(path))?,
            }
            Ok(true)
        }
    }
}

/// What is at a path of cotal's state, read without following a link.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Found {
    Absent,
    File(Vec<u8>),
    /// Something other than a regular file: what it is ("a symbolic link", "a directory", ...).
    NotRegular(&'static str),
}

/// The most cotal reads of any one file of its state: far above the largest it writes (a
/// `server.conf` preloading tens of thousands of accounts), far below what would exhaust a
/// broker host's memory, so a planted multi-gigabyte record or a link's worth of `/dev/zero`
/// is refused by name and never read.
pub const MAX_STATE_FILE_BYTES: u64 = 256 << 20;

/// The most cotal reads of a token file another tool wrote (a JWT, a seed, a creds file):
/// every real one is a few kilobytes.
pub const MAX_TOKEN_BYTES: u64 = 1 << 20;

/// Open `path` read-only without following a link at its last component and without blocking
/// on a FIFO; report what is there. A file over [`MAX_STATE_FILE_BYTES`] is refused by name.
pub fn read_no_follow(path: &Path) -> Result<Found> {
    read_no_follow_within(path, MAX_STATE_FILE_BYTES)
}

/// [`read_no_follow`], refusing a file over `limit` bytes (whatever it grows to while read:
/// at most `limit + 1` bytes are ever held).
pub fn read_no_follow_within(path: &Path, limit: u64) -> Result<Found> {
    use nix::fcntl::OFlag;
    let file = match fs::OpenOptions::new()
        .read(true)
        .custom_flags((OFlag::O_NOFOLLOW | OFlag::O_NONBLOCK).bits())
        .open(path)
    {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Found::Absent),
        Err(e) if e.raw_os_error() == Some(nix::errno::Errno::ELOOP as i32) => {
            return Ok(Found::NotRegular("a symbolic link"));
        }
        // What cannot even be opened (a socket, a device node without its driver, one that
        // refuses its reader) is said to be what it is: only a regular file's failure to open
        // is an error of reading it.
        Err(e) => {
            return match fs::symlink_metadata(path) {
                Ok(meta) if !meta.is_file() => Ok(Found::NotRegular(kind_of(&meta.file_type()))),
                _ => Err(Error::io(path, e)),
            };
        }
    };
    let meta = file.metadata().at(path)?;
    if !meta.is_file() {
        return Ok(Found::NotRegular(kind_of(&meta.file_type())));
    }
    let too_large = || {
        Error::input(format!(
            "{} is larger than {limit} bytes, more than cotal reads of it; nothing was read.",
            path.display()
        ))
    };
    if meta.len() > limit {
        return Err(too_large());
    }
    // Read the size the file has and a byte more. When a read returns exactly that size, the
    // file is whole: one system call where `read_to_end` makes two, which at thousands of small
    // records counted (had it grown since, the read would have returned the byte more). A
    // shorter read (a filesystem that returns less at a time, or a file over 2 GiB) is read on;
    // a file that grew since its size was taken is read on to its end, within the limit.
    let asked = meta.len() + 1;
    let mut bytes = vec![0; asked as usize];
    let mut got = 0;
    loop {
        match (&file).read(&mut bytes[got..]) {
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(Error::io(path, e)),
            Ok(0) => break,
            Ok(n) => {
                got += n;
                if got as u64 >= meta.len() {
                    break;
                }
            }
        }
    }
    bytes.truncate(got);
    if got as u64 == asked {
        (&file)
            .take(limit.saturating_add(1) - asked)
            .read_to_end(&mut bytes)
            .at(path)?;
    }
    if bytes.len() as u64 > limit {
        return Err(too_large());
    }
    Ok(Found::File(bytes))
}

/// Read a file the operator may keep behind a link (`cotal.toml`, a certificate, a saved
/// plan, an include): the link is followed, but a FIFO never blocks the open, anything but a
/// regular file is refused, and at most `limit + 1` bytes are ever held (a file over `limit`,
/// or grown past it while read, is refused by name). `NotFound` is returned as it is.
pub fn read_following_within(path: &Path, limit: u64) -> std::io::Result<Vec<u8>> {
    use nix::fcntl::OFlag;
    let file = fs::OpenOptions::new()
        .read(true)
        .custom_flags(OFlag::O_NONBLOCK.bits())
        .open(path)?;
    let meta = file.metadata()?;
    if !meta.is_file() {
        return Err(std::io::Error::other(format!(
            "it is {}, not a regular file",
            kind_of(&meta.file_type())
        )));
    }
    let too_large = || {
        std::io::Error::other(format!(
            "it is larger than {limit} bytes, more than cotal reads of it; nothing was read"
        ))
    };
    if meta.len() > limit {
        return Err(too_large());
    }
    let mut bytes = Vec::with_capacity(meta.len() as usize);
    file.take(limit.saturating_add(1)).read_to_end(&mut bytes)?;
    if bytes.len() as u64 > limit {
        return Err(too_large());
    }
    Ok(bytes)
}

/// What a non-regular file is, in words.
pub fn kind_of(t: &fs::FileType) -> &'static str {
    if t.is_symlink() {
        "a symbolic link"
    } else if t.is_dir() {
        "a directory"
    } else if t.is_fifo() {
        "a FIFO"
    } else if t.is_socket() {
        "a socket"
    } else if t.is_char_device() || t.is_block_device() {
        "a device node"
    } else if t.is_file() {
        "a regular file"
    } else {
        "not a regular file"
    }
}

/// The refusal for a state file that is not a regular file.
pub fn not_regular(path: &Path, what: &str) -> Error {
    Error::refused(Diagnostic::new(format!(
"{} is {what}, not a regular file; cotal never follows links or reads special files in its state folder.", path.display())).blast("none, nothing was changed.").next("find out who put it there, move it aside, and restore the real file (or delete it if it is not needed)"))
}

/// Read a state file that may be absent; a link or any other non-regular file is refused.
pub fn read_optional(path: &Path) -> Result<Option<Vec<u8>>> {
    match read_no_follow(path)? {
        Found::Absent => Ok(None),
        Found::File(bytes) => Ok(Some(bytes)),
        Found::NotRegular(what) => Err(not_regular(path, what)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::MetadataExt;

    #[test]
    fn what_cannot_be_opened_is_named_for_what_it_is() {
        let dir = tempfile::tempdir().unwrap();
        let socket = dir.path().join("record.json");
        let _listener = std::os::unix::net::UnixListener::bind(&socket).unwrap();
        // Opening a socket fails (ENXIO): the open's failure is not taken for a read error.
        assert!(fs::File::open(&socket).is_err());
        assert_eq!(
            read_no_follow(&socket).unwrap(),
            Found::NotRegular("a socket")
        );
        let refusal = read_optional(&socket).unwrap_err().to_string();
        assert!(
            refusal.contains("is a socket, not a regular file"),
            "{refusal}"
        );
    }

    #[test]
    fn the_sweep_removes_only_temp_files_older_than_its_reference_time() {
        let dir = tempfile::tempdir().unwrap();
        let at = std::time::SystemTime::now();
        let minute = std::time::Duration::from_secs(60);
        let file = |name: &str, modified: std::time::SystemTime| {
            let path = dir.path().join(name);
            fs::File::create(&path)
                .unwrap()
                .set_modified(modified)
                .unwrap();
            path
        };
        let orphan = file(".cotal-tmp.orphan", at - 11 * minute);
        // Written after the reference time by the clock of the file system (a wall clock that
        // stepped back, a shared root's server): never taken for an orphan.
        let younger = file(".cotal-tmp.younger", at + minute);
        let recent = file(".cotal-tmp.recent", at - 9 * minute);
        let record = file("record.json", at - 60 * minute);
        assert_eq!(
            sweep_orphaned_temps(&[dir.path().to_path_buf()], at, 10 * minute),
            1
        );
        assert!(!orphan.exists());
        assert!(younger.exists() && recent.exists() && record.exists());
    }

    #[test]
    fn deferred_writes_are_in_place_at_once_and_pending_until_the_flush() {
        let dir = tempfile::tempdir().unwrap();
        let sub = dir.path().join("space");
        set_deferred(true).unwrap();
        ensure_dir(&sub, PRIVATE_DIR).unwrap();
        write(&sub.join("a"), b"one", SECRET).unwrap();
        write(&dir.path().join("b"), b"two", SECRET).unwrap();
        assert_eq!(
            fs::read(sub.join("a")).unwrap(),
            b"one",
            "renamed into place"
        );
        // Two files, and their two folders (the new folder's parent is the other one).
        assert_eq!(deferred_pending(), 4);
        set_deferred(false).unwrap();
        assert_eq!(deferred_pending(), 0, "the flush synced everything");
        write(&dir.path().join("c"), b"three", SECRET).unwrap();
        assert_eq!(deferred_pending(), 0, "not deferring: synced at once");
        // A file that replaces another is synced before its rename, deferring or not.
        set_deferred(true).unwrap();
        write(&dir.path().join("c"), b"three again", SECRET).unwrap();
        assert_eq!(deferred_pending(), 0, "a replacement is never deferred");
        // A file written and removed again before the flush has nothing left to sync.
        write(&dir.path().join("d"), b"four", SECRET).unwrap();
        fs::remove_file(dir.path().join("d")).unwrap();
        set_deferred(false).unwrap();
    }

    #[test]
    fn writes_replace_whole_files_with_the_exact_mode() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("secret.json");
        write(&path, b"one", SECRET).unwrap();
        write(&path, b"two", SECRET).unwrap();
        assert_eq!(fs::read(&path).unwrap(), b"two");
        assert_eq!(fs::metadata(&path).unwrap().mode() & 0o777, 0o600);
        write(&path, b"three", PUBLIC).unwrap();
        assert_eq!(fs::metadata(&path).unwrap().mode() & 0o777, 0o644);
        let leftovers: Vec<_> = fs::read_dir(dir.path()).unwrap().collect();
        assert_eq!(leftovers.len(), 1, "no temp file is left behind");
    }

    #[test]
    fn writes_never_chmod_through_a_planted_link() {
        let dir = tempfile::tempdir().unwrap();
        let victim = dir.path().join("victim");
        fs::write(&victim, b"root only").unwrap();
        fs::set_permissions(&victim, fs::Permissions::from_mode(0o600)).unwrap();
        let path = dir.path().join("record.json");
        std::os::unix::fs::symlink(&victim, &path).unwrap();
        write(&path, b"new", PUBLIC).unwrap();
        // The link itself was replaced; its target kept its bytes and its mode.
        assert_eq!(fs::read(&victim).unwrap(), b"root only");
        assert_eq!(fs::metadata(&victim).unwrap().mode() & 0o777, 0o600);
        assert!(fs::symlink_metadata(&path).unwrap().is_file());
    }

    #[test]
    fn reads_refuse_links_and_special_files_and_never_block() {
        let dir = tempfile::tempdir().unwrap();
        let target = dir.path().join("target");
        fs::write(&target, b"secret").unwrap();
        let link = dir.path().join("link");
        std::os::unix::fs::symlink(&target, &link).unwrap();
        assert_eq!(
            read_no_follow(&link).unwrap(),
            Found::NotRegular("a symbolic link")
        );
        let err = read_optional(&link).unwrap_err();
        assert_eq!(err.exit_code(), crate::error::exit::REFUSED);
        assert!(err.to_string().contains("a symbolic link"), "{err}");
        let fifo = dir.path().join("fifo");
        nix::unistd::mkfifo(&fifo, nix::sys::stat::Mode::S_IRWXU).unwrap();
        assert_eq!(read_no_follow(&fifo).unwrap(), Found::NotRegular("a FIFO"));
        assert_eq!(
            read_no_follow(dir.path()).unwrap(),
            Found::NotRegular("a directory")
        );
        assert_eq!(
            read_no_follow(&dir.path().join("none")).unwrap(),
            Found::Absent
        );
        assert_eq!(
            read_no_follow(&target).unwrap(),
            Found::File(b"secret".to_vec())
        );
    }

    #[test]
    fn reads_return_the_whole_file_and_refuse_one_over_the_limit() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("f");
        for len in [0usize, 1, 1370, 70_000] {
            let bytes: Vec<u8> = (0..len).map(|i| (i % 251) as u8).collect();
            fs::write(&path, &bytes).unwrap();
            assert_eq!(read_no_follow(&path).unwrap(), Found::File(bytes.clone()));
            assert_eq!(
                read_no_follow_within(&path, len as u64).unwrap(),
                Found::File(bytes)
            );
            if len > 0 {
                let err = read_no_follow_within(&path, len as u64 - 1).unwrap_err();
                assert!(err.to_string().contains("larger than"), "{err}");
            }
        }
        // A file longer than the size it reports (a `/proc` file reports 0, as a file grown
        // since its size was taken would) is read on to its end, and within the limit.
        let status = std::path::Path::new("/proc/self/status");
        let Found::File(bytes) = read_no_follow(status).unwrap() else {
            panic!("a regular file");
        };
        assert_eq!(fs::metadata(status).unwrap().len(), 0, "reports no size");
        let text = String::from_utf8(bytes).unwrap();
        assert!(
            text.starts_with("Name:") && text.contains("\nPid:"),
            "{text}"
        );
        let err = read_no_follow_within(status, 16).unwrap_err();
        assert!(err.to_string().contains("larger than 16 bytes"), "{err}");
    }

    #[test]
    fn removals_are_idempotent() {
        let dir = tempfile::tempdir().unwrap();
        let tree = dir.path().join("t");
        ensure_dir(&tree.join("a/b"), PRIVATE_DIR).unwrap();
        assert!(remove_tree(&tree).unwrap());
        assert!(!remove_tree(&tree).unwrap());
        assert!(!remove_file(&dir.path().join("nope")).unwrap());
    }
}
