//! `.cotal/space.<hex>/relocation.json` (0600): the source's record of a space being moved
//! ([`crate::adopt::relocation::Relocation`]), bound to its account; and the receipt files the
//! destination writes and the source reads ([`crate::adopt::relocation::Receipt`], 0644, no secret).
//!
//! Invariant: a record is read only when it names the space's current account (one of an
//! earlier account of the name reads as none); a receipt is read without following a link,
//! at most [`MAX_RECEIPT_BYTES`], and identified by the sha256 of its bytes.

use crate::adopt::relocation::{Receipt, Relocation};
use crate::error::{Error, Result};
use crate::model::SpaceName;
use crate::store::paths::SpaceFile;
use crate::store::record::{self, Layout};
use crate::store::{Root, atomic};
use std::path::Path;

/// The largest receipt read: one names a space's streams and their counts.
pub const MAX_RECEIPT_BYTES: u64 = 1 << 20;

/// The space's relocation record, if one is recorded for `account`.
pub fn load(root: &Root, space: &SpaceName, account: &str) -> Result<Option<Relocation>> {
    Ok(
        record::read_optional::<Relocation>(&root.space_file(space, SpaceFile::Relocation))?
            .filter(|r| r.account == account),
    )
}

/// Write the space's relocation record (atomic, 0600).
pub fn save(root: &Root, space: &SpaceName, relocation: &Relocation) -> Result<()> {
    atomic::ensure_dir(&root.space_dir(space), atomic::PRIVATE_DIR)?;
    record::write(
        &root.space_file(space, SpaceFile::Relocation),
        relocation,
        Layout::Pretty,
        atomic::SECRET,
    )
}

/// Delete the space's relocation record (`true` when there was one).
pub fn remove(root: &Root, space: &SpaceName) -> Result<bool> {
    atomic::remove_file(&root.space_file(space, SpaceFile::Relocation))
}

/// Write a receipt to `path` (atomic, 0644: it holds no secret, and travels to the source).
pub fn write_receipt(path: &Path, receipt: &Receipt) -> Result<()> {
    record::write(path, receipt, Layout::Pretty, atomic::PUBLIC)
}

/// Read the receipt at `path` and its digest (`sha256:` of its bytes). Refuses a link, a
/// file that is not regular, one over [`MAX_RECEIPT_BYTES`], or one that does not parse,
/// naming the file and never echoing its content.
pub fn read_receipt(path: &Path) -> Result<(String, Receipt)> {
    let refuse = |why: &str| {
        Error::input(format!(
            "--relocated {}: {why}; pass the receipt `cotal space restore` wrote on the destination",
            path.display()
        ))
    };
    let bytes = match atomic::read_no_follow_within(path, MAX_RECEIPT_BYTES)? {
        atomic::Found::File(bytes) => bytes,
        atomic::Found::Absent => return Err(refuse("no such file")),
        atomic::Found::NotRegular(what) => {
            return Err(refuse(&format!("{what}, not a regular file")));
        }
    };
    let receipt: Receipt = serde_json::from_slice(&bytes)
        .map_err(|e| refuse(&format!("not a relocation receipt ({})", e.classify_word())))?;
    Ok((crate::trust::digest::sha256(&bytes), receipt))
}

/// A serde_json error's category, in a word (its message may quote the file).
trait Classify {
    fn classify_word(&self) -> &'static str;
}

impl Classify for serde_json::Error {
    fn classify_word(&self) -> &'static str {
        match self.classify() {
            serde_json::error::Category::Io => "unreadable",
            serde_json::error::Category::Syntax => "not JSON",
            serde_json::error::Category::Data => "not its fields",
            serde_json::error::Category::Eof => "cut short",
        }
    }
}
