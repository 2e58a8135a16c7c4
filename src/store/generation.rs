//! `.cotal/auth/broker-config.json`: the generation counter and the inventory digest of the
//! promoted config (non-secret, 0644).
//!
//! Invariant: the record is written only after a promoted config was confirmed (or, with no
//! broker running, after the rename), and always as exactly `gen + 1` of the one it replaced.

use crate::error::Result;
use crate::observed::{GenerationRecord, GenerationState};
use crate::store::Root;
use crate::store::atomic::{self, Found};

pub fn load(root: &Root) -> Result<GenerationState> {
    let path = root.generation_record();
    let bytes = match atomic::read_no_follow(&path)? {
        Found::Absent => return Ok(GenerationState::Absent),
        Found::NotRegular(what) => {
            return Ok(GenerationState::Corrupt {
                file: path,
                reason: format!("{what}, not a regular file (links are not followed)"),
            });
        }
        Found::File(bytes) => bytes,
    };
    Ok(match parse(&bytes) {
        Ok(r) => GenerationState::Valid(r),
        Err(reason) => GenerationState::Corrupt { file: path, reason },
    })
}

/// Parse and validate a generation record.
pub fn parse(bytes: &[u8]) -> Result<GenerationRecord, String> {
    let r: GenerationRecord =
        serde_json::from_slice(bytes).map_err(|e| format!("does not parse: {e}"))?;
    let hex = r.inventory_digest.strip_prefix("sha256:").unwrap_or("");
    if hex.len() != 64 || !hex.bytes().all(|b| b.is_ascii_hexdigit()) {
        return Err("inventoryDigest is not a sha256 digest".into());
    }
    Ok(r)
}

pub fn save(root: &Root, record: &GenerationRecord) -> Result<()> {
    let mut json = serde_json::to_vec(record).expect("generation record serializes");
    json.push(b'\n');
    atomic::write(&root.generation_record(), &json, atomic::PUBLIC)
}
