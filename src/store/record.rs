//! The one reader and the one writer of cotal's JSON records: every record is absent, corrupt
//! (with its file and the reason) or valid, and is written atomically with a trailing newline.
//!
//! Invariants: a link or any other non-regular file is corrupt, never followed (reads go through
//! [`atomic::read_no_follow`]); a record is written whole or not at all ([`atomic::write`]).

use crate::error::Result;
use crate::store::atomic::{self, Found};
use serde::Serialize;
use serde::de::DeserializeOwned;
use std::path::Path;

pub use crate::observed::Record;

/// Read the record at `path`, parsing and checking it with `parse` (whose error is the reason
/// it is corrupt).
pub fn read_with<T>(
    path: &Path,
    parse: impl FnOnce(&[u8]) -> Result<T, String>,
) -> Result<Record<T>> {
    Ok(match atomic::read_no_follow(path)? {
        Found::Absent => Record::Absent,
        Found::NotRegular(what) => Record::Corrupt {
            file: path.to_path_buf(),
            reason: format!("{what}, not a regular file (links are not followed)"),
        },
        Found::File(bytes) => match parse(&bytes) {
            Ok(value) => Record::Valid(value),
            Err(reason) => Record::Corrupt {
                file: path.to_path_buf(),
                reason,
            },
        },
    })
}

/// Read a JSON record.
pub fn read<T: DeserializeOwned>(path: &Path) -> Result<Record<T>> {
    read_with(path, parse)
}

/// Read a JSON record that may be absent, as an error when it is not: a link or another
/// non-regular file is refused ([`atomic::not_regular`], exit 3), bytes that do not parse are
/// an error naming the file.
pub fn read_optional<T: DeserializeOwned>(path: &Path) -> Result<Option<T>> {
    match atomic::read_optional(path)? {
        None => Ok(None),
        Some(bytes) => parse(&bytes)
            .map(Some)
            .map_err(|reason| crate::error::Error::other(format!("{}: {reason}", path.display()))),
    }
}

/// Parse a JSON record's bytes.
pub fn parse<T: DeserializeOwned>(bytes: &[u8]) -> Result<T, String> {
    serde_json::from_slice(bytes).map_err(|e| format!("does not parse: {e}"))
}

/// How a record is laid out on disk (each format keeps the layout it always had).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Layout {
    Compact,
    Pretty,
}

/// Atomically write `value` as JSON (and a newline) with `mode`.
pub fn write<T: Serialize>(path: &Path, value: &T, layout: Layout, mode: u32) -> Result<()> {
    let mut json = match layout {
        Layout::Compact => serde_json::to_vec(value),
        Layout::Pretty => serde_json::to_vec_pretty(value),
    }
    .expect("records serialize");
    json.push(b'\n');
    atomic::write(path, &json, mode)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_record_is_absent_corrupt_or_valid() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("r.json");
        assert_eq!(read::<u32>(&path).unwrap(), Record::Absent);
        write(&path, &7u32, Layout::Compact, atomic::SECRET).unwrap();
        assert_eq!(std::fs::read(&path).unwrap(), b"7\n");
        assert_eq!(read::<u32>(&path).unwrap(), Record::Valid(7));
        std::fs::write(&path, b"nope").unwrap();
        assert!(matches!(
            read::<u32>(&path).unwrap(),
            Record::Corrupt { reason, .. } if reason.starts_with("does not parse")
        ));
        let link = dir.path().join("link.json");
        std::os::unix::fs::symlink(&path, &link).unwrap();
        assert!(matches!(
            read::<u32>(&link).unwrap(),
            Record::Corrupt { reason, .. } if reason.contains("links are not followed")
        ));
    }
}
