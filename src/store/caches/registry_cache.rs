//! `.cotal/maintenance/registries.json`: the channel registries the last apply (or the state
//! refresh after `up`) read, each with the fingerprint its stream had just before that read,
//! keyed by account. The next plan reads again only the registries whose stream
//! moved since: reading one costs a connection into its account, thousands of them most of a
//! plan over a running broker.
//!
//! Invariants: an entry is used only when the live fingerprint of the same account's registry
//! equals the recorded one (see [`RegistryFingerprint`]: the stream has not changed since the
//! fingerprint, so neither since the read that followed it); the file is an optimisation, never
//! a source of truth: anything wrong with it counts as an empty cache. Only a single server's
//! registries are cached (a cluster's figures may come from a replica that is behind).

use crate::error::Result;
use crate::observed::RegistryFingerprint;
use crate::space::channels::Registry;
use crate::store::record::{self, Layout, Record};
use crate::store::{Root, atomic};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// The cached registries, by account public key.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Cache {
    pub accounts: BTreeMap<String, Cached>,
}

/// One registry as read, and its stream's fingerprint just before the read.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Cached {
    pub fingerprint: RegistryFingerprint,
    pub registry: Registry,
}

impl Cache {
    /// The registry of `account` recorded with exactly `fingerprint`.
    pub fn get(&self, account: &str, fingerprint: &RegistryFingerprint) -> Option<&Registry> {
        self.accounts
            .get(account)
            .filter(|c| &c.fingerprint == fingerprint)
            .map(|c| &c.registry)
    }
}

pub fn path(root: &Root) -> std::path::PathBuf {
    root.maintenance_dir().join("registries.json")
}

/// The cache; empty when absent or unreadable.
pub fn load(root: &Root) -> Cache {
    match record::read(&path(root)) {
        Ok(Record::Valid(cache)) => cache,
        _ => Cache::default(),
    }
}

/// Replace the cache (0600, atomic).
pub fn save(root: &Root, cache: &Cache) -> Result<()> {
    atomic::ensure_dir(&root.maintenance_dir(), atomic::PRIVATE_DIR)?;
    record::write(&path(root), cache, Layout::Compact, atomic::SECRET)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fingerprint(last_seq: u64) -> RegistryFingerprint {
        RegistryFingerprint {
            created: "2026-11-30T00:00:00.000000001Z".into(),
            first_seq: 1,
            last_seq,
            messages: 1,
        }
    }

    #[test]
    fn an_entry_is_used_only_for_its_account_and_exact_fingerprint_and_a_bad_file_is_empty() {
        let dir = tempfile::tempdir().unwrap();
        let root = Root::at(dir.path()).unwrap();
        assert_eq!(load(&root), Cache::default(), "absent: empty");
        let mut cache = Cache::default();
        cache.accounts.insert(
            "AAA".into(),
            Cached {
                fingerprint: fingerprint(1),
                registry: Registry::new(),
            },
        );
        save(&root, &cache).unwrap();
        let loaded = load(&root);
        assert!(loaded.get("AAA", &fingerprint(1)).is_some());
        assert!(
            loaded.get("AAA", &fingerprint(2)).is_none(),
            "the stream moved"
        );
        assert!(
            loaded.get("BBB", &fingerprint(1)).is_none(),
            "another account"
        );
        std::fs::write(path(&root), b"{not json").unwrap();
        assert_eq!(load(&root), Cache::default(), "corrupt: empty");
    }
}
