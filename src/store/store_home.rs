//! Where each node's data lives: the store the root's spaces were provisioned in, recorded in
//! `.cotal/store.json` (per node: the store folder, and the identity the store holds in its
//! `.cotal-store-id`, the file the original Cotal keeps there too), so a change of where the
//! data lives is planned as what it is, and `up` never starts a broker on a store that is not
//! the one its tenants' data is in.
//!
//! Invariants: the record names a store only after `up` or an apply found it serving (its id
//! written into the store first, then recorded); an apply that moves a node's store (approved:
//! it takes every space's data out of service) records the new folder with no id, so the next
//! `up` adopts the store it starts on; a record that does not parse is an error naming the file.

use super::{Root, atomic, record};
use crate::error::{Error, Result};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// The file each store holds its identity in (a UUIDv4, as the original writes it).
pub const ID_FILE: &str = ".cotal-store-id";

pub use crate::observed::StoreHome;

/// Every node's recorded store, by node name.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct StoreHomes {
    pub nodes: BTreeMap<String, StoreHome>,
}

/// The record's name in a state folder.
const FILE: &str = "store.json";

fn path(root: &Root) -> PathBuf {
    root.state_dir().join(FILE)
}

/// Write the record into `state_dir` (a `.cotal/` being staged, not yet a root's).
pub fn save_in(state_dir: &Path, homes: &StoreHomes) -> Result<()> {
    record::write(
        &state_dir.join(FILE),
        homes,
        record::Layout::Pretty,
        atomic::SECRET,
    )
}

/// The record, `None` when the root has none (made before it, or never started): then where
/// a node's data lives is taken from its promoted config. A record, even empty, is the whole
/// truth (a restored root's is empty: its data was not carried).
pub fn load(root: &Root) -> Result<Option<StoreHomes>> {
    record::read_optional::<StoreHomes>(&path(root))
}

/// Whether the store at `dir` holds JetStream data (its `jetstream/` folder has an entry).
pub fn holds_data(dir: &Path) -> bool {
    std::fs::read_dir(dir.join("jetstream")).is_ok_and(|mut e| e.next().is_some())
}

/// Write the record (0600).
pub fn save(root: &Root, homes: &StoreHomes) -> Result<()> {
    record::write(&path(root), homes, record::Layout::Pretty, atomic::SECRET)
}

/// Record `node`'s store as `home` (a no-op when it already is).
pub fn set(root: &Root, node: &str, home: StoreHome) -> Result<()> {
    let mut homes = load(root)?.unwrap_or_default();
    if homes.nodes.get(node) == Some(&home) {
        return Ok(());
    }
    homes.nodes.insert(node.to_string(), home);
    save(root, &homes)
}

/// The identity the store at `dir` holds, if any (a link or an unreadable file is none).
pub fn read_id(dir: &Path) -> Option<String> {
    match atomic::read_no_follow_within(&dir.join(ID_FILE), 256) {
        Ok(atomic::Found::File(bytes)) => String::from_utf8(bytes)
            .ok()
            .map(|s| s.trim().to_string())
            .filter(|s| !s.is_empty()),
        _ => None,
    }
}

/// The store's identity, written first when it has none.
pub fn ensure_id(dir: &Path) -> Result<String> {
    if let Some(id) = read_id(dir) {
        return Ok(id);
    }
    atomic::ensure_dir(dir, atomic::PRIVATE_DIR)?;
    let id = new_id()?;
    atomic::write(
        &dir.join(ID_FILE),
        format!("{id}\n").as_bytes(),
        atomic::PUBLIC,
    )?;
    Ok(id)
}

/// A random UUIDv4.
fn new_id() -> Result<String> {
    use ring::rand::SecureRandom;
    let mut b = [0u8; 16];
    ring::rand::SystemRandom::new()
        .fill(&mut b)
        .map_err(|_| Error::other("the system's random source failed"))?;
    b[6] = (b[6] & 0x0f) | 0x40;
    b[8] = (b[8] & 0x3f) | 0x80;
    let h = hex::encode(b);
    Ok(format!(
        "{}-{}-{}-{}-{}",
        &h[0..8],
        &h[8..12],
        &h[12..16],
        &h[16..20],
        &h[20..32]
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_store_gets_one_identity_and_keeps_it() {
        let tmp = tempfile::tempdir().unwrap();
        let store = tmp.path().join("nats");
        assert_eq!(read_id(&store), None);
        let id = ensure_id(&store).unwrap();
        assert_eq!(id.len(), 36);
        assert_eq!(&id[14..15], "4", "a UUIDv4");
        assert_eq!(ensure_id(&store).unwrap(), id);
        assert_eq!(read_id(&store), Some(id));
    }
}
