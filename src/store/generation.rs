//! `.cotal/auth/broker-config.json`: the generation counter and the inventory digest of the
//! promoted config (non-secret, 0644).
//!
//! Invariant: the record is written only after a promoted config was confirmed (or, with no
//! broker running, after the rename), and always as exactly `gen + 1` of the one it replaced.

use crate::error::Result;
use crate::observed::{GenerationRecord, GenerationState};
use crate::store::record::{self, Layout};
use crate::store::{Root, atomic};

pub fn load(root: &Root) -> Result<GenerationState> {
    record::read_with(&root.generation_record(), parse)
}

/// Parse and validate a generation record.
pub fn parse(bytes: &[u8]) -> Result<GenerationRecord, String> {
    let r: GenerationRecord = record::parse(bytes)?;
    let hex = r.inventory_digest.strip_prefix("sha256:").unwrap_or("");
    if hex.len() != 64 || !hex.bytes().all(|b| b.is_ascii_hexdigit()) {
        return Err("inventoryDigest is not a sha256 digest".into());
    }
    Ok(r)
}

pub fn save(root: &Root, generation: &GenerationRecord) -> Result<()> {
    record::write(
        &root.generation_record(),
        generation,
        Layout::Compact,
        atomic::PUBLIC,
    )
}
