//! `.cotal/audit.jsonl`: append-only, one JSON object per line, each append fsynced (0600; while
//! an apply defers its syncs, at its next flush, which comes before the promotion).
//!
//! Invariant: a record is either wholly appended and durable when [`append`] returns `Ok` (or
//! the deferred flush after it does), or
//! `append` fails; a link at the path is refused, not followed. A torn final line (a crash in
//! the middle of an append) is recoverable: [`read`] skips it, and the next [`append`] sets it
//! aside in `audit.jsonl.torn` (or completes it, when it is a whole record missing only its
//! newline) before writing; a line that does not parse anywhere else still fails closed.

use crate::audit::Record;
use crate::diagnostic::Diagnostic;
use crate::error::{Error, Result};
use crate::store::{Root, atomic};
use std::io::Write;
use std::os::unix::fs::OpenOptionsExt;

/// Append one record durably.
pub fn append(root: &Root, record: &Record) -> Result<()> {
    let path = root.audit_log();
    atomic::ensure_dir(&root.state_dir(), atomic::PRIVATE_DIR)?;
    let mut line = serde_json::to_vec(record).expect("audit record serializes");
    line.push(b'\n');
    let mut file = std::fs::OpenOptions::new()
        .append(true)
        .create(true)
        .mode(atomic::SECRET)
        .custom_flags((nix::fcntl::OFlag::O_NOFOLLOW | nix::fcntl::OFlag::O_NONBLOCK).bits())
        .open(&path)
        .map_err(|e| {
            Error::other(format!(
                "cannot write the audit log {}: {e}",
                path.display()
            ))
        })?;
    let meta = file.metadata().map_err(|e| Error::io(&path, e))?;
    if !meta.is_file() {
        return Err(atomic::not_regular(
            &path,
            atomic::kind_of(&meta.file_type()),
        ));
    }
    repair_torn_tail(root, &file, meta.len())?;
    file.write_all(&line)
        .and_then(|_| atomic::sync_appended(&file, &path))
        .map_err(|e| {
            Error::other(format!(
                "cannot write the audit log {}: {e}",
                path.display()
            ))
        })
}

/// Every record, oldest first. A line that does not parse is an error naming its number.
pub fn read(root: &Root) -> Result<Vec<Record>> {
    let path = root.audit_log();
    let Some(bytes) = atomic::read_optional(&path)? else {
        return Ok(Vec::new());
    };
    let text = String::from_utf8_lossy(&bytes);
    // A final line without its newline that does not parse is a torn append: skipped.
    let complete = match text.rfind('\n') {
        Some(end) if end + 1 < text.len() => {
            let tail = &text[end + 1..];
            if serde_json::from_str::<Record>(tail).is_err() {
                tracing::warn!(file = %path.display(), "the audit log ends with a torn line; it is set aside at the next append");
                &text[..end + 1]
            } else {
                &text[..]
            }
        }
        None if serde_json::from_str::<Record>(&text).is_err() && !text.trim().is_empty() => {
            tracing::warn!(file = %path.display(), "the audit log holds only a torn line");
            ""
        }
        _ => &text[..],
    };
    complete
        .lines()
        .enumerate()
        .filter(|(_, l)| !l.trim().is_empty())
        .map(|(i, l)| {
            serde_json::from_str(l).map_err(|e| {
                Error::other(format!(
                    "{}:{}: not an audit record: {e}",
                    path.display(),
                    i + 1
                ))
            })
        })
        .collect()
}

/// Before an append: when the log does not end with a newline, its last line was torn by a
/// crash. A whole record is completed with its newline; anything else is moved to
/// `audit.jsonl.torn` (appended, 0600) and cut from the log, so the log stays one record per
/// line. Said on stderr through the log.
fn repair_torn_tail(root: &Root, file: &std::fs::File, len: u64) -> Result<()> {
    use std::io::{Read, Seek, SeekFrom};
    if len == 0 {
        return Ok(());
    }
    let path = root.audit_log();
    let mut reader = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags((nix::fcntl::OFlag::O_NOFOLLOW | nix::fcntl::OFlag::O_NONBLOCK).bits())
        .open(&path)
        .map_err(|e| Error::io(&path, e))?;
    let mut last = [0u8; 1];
    reader
        .seek(SeekFrom::Start(len - 1))
        .and_then(|_| reader.read_exact(&mut last))
        .map_err(|e| Error::io(&path, e))?;
    if last[0] == b'\n' {
        // Its last whole line must be a record: cotal does not append after damage it did not
        // make (a torn line has no newline; this one was written whole).
        let window = len.min(1 << 16);
        let mut tail = vec![0u8; window as usize];
        reader
            .seek(SeekFrom::Start(len - window))
            .and_then(|_| reader.read_exact(&mut tail))
            .map_err(|e| Error::io(&path, e))?;
        let body = &tail[..tail.len() - 1];
        let line = match body.iter().rposition(|b| *b == b'\n') {
            Some(i) => &body[i + 1..],
            None if window == len => body,
            None => return Ok(()),
        };
        if !line.iter().all(|b| b.is_ascii_whitespace())
            && serde_json::from_slice::<Record>(line).is_err()
        {
            return Err(Error::other(
                Diagnostic::new(format!(
                    "the audit log {} ends with a line that is not an audit record (not a crash's torn append: it has its newline); cotal does not append after damage it did not make.",
                    path.display()
                ))
                .next("inspect the file, move the damaged lines aside, then run the command again"),
            ));
        }
        return Ok(());
    }
    let mut bytes = Vec::new();
    reader
        .seek(SeekFrom::Start(0))
        .and_then(|_| reader.read_to_end(&mut bytes))
        .map_err(|e| Error::io(&path, e))?;
    let start = bytes.iter().rposition(|b| *b == b'\n').map_or(0, |i| i + 1);
    let tail = &bytes[start..];
    let mut writer = file;
    if serde_json::from_slice::<Record>(tail).is_ok() {
        writer.write_all(b"\n").map_err(|e| Error::io(&path, e))?;
        return Ok(());
    }
    let torn = path.with_extension("jsonl.torn");
    let mut aside = std::fs::OpenOptions::new()
        .append(true)
        .create(true)
        .mode(atomic::SECRET)
        .custom_flags(nix::fcntl::OFlag::O_NOFOLLOW.bits())
        .open(&torn)
        .map_err(|e| Error::io(&torn, e))?;
    aside
        .write_all(tail)
        .and_then(|_| aside.write_all(b"\n"))
        .and_then(|_| aside.sync_all())
        .map_err(|e| Error::io(&torn, e))?;
    file.set_len(start as u64)
        .and_then(|_| file.sync_all())
        .map_err(|e| Error::io(&path, e))?;
    eprintln!(
        "warning: the audit log {} ended with a torn line (a crash in the middle of an append); it was moved to {}",
        path.display(),
        torn.display()
    );
    Ok(())
}
