//! `.cotal/space.<hex>/users.json`: the users `cotal creds` minted for a space (names, public
//! keys, profiles, expiry; never a seed) and the revocations `cotal creds revoke` recorded; and
//! `.cotal/auth/system-users.json`, the same for the system account's users `cotal creds
//! --system` hands out (their profile is their role).
//!
//! Invariants: the ledger is bound to the account it was written for, so a ledger left behind
//! by a removed incarnation of the space is read as empty; revocations are only ever added
//! (a revoked key stays revoked); the file is written under the root's lock.

use crate::error::Result;
use crate::model::SpaceName;
use crate::space::permissions::{Profile, SysRole};
use crate::store::paths::SpaceFile;
use crate::store::record::{self, Layout};
use crate::store::{Root, atomic};
use crate::trust::jwt::Revocations;
use serde::{Deserialize, Serialize};

/// One user minted by `cotal creds`; `P` is what it may do (a space user's [`Profile`], a
/// system user's [`SysRole`]).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Minted<P = Profile> {
    pub name: String,
    #[serde(rename = "pub")]
    pub key: String,
    pub profile: P,
    #[serde(rename = "issuedAt")]
    pub issued_at: i64,
    /// Unix seconds; `None`: never expires.
    #[serde(rename = "expiresAt", skip_serializing_if = "Option::is_none", default)]
    pub expires_at: Option<i64>,
    /// The account signing key that signed it (absent in ledgers written before it was
    /// recorded): after `cotal rotate account` a user of an older key is refused.
    #[serde(rename = "signedBy", skip_serializing_if = "Option::is_none", default)]
    pub signed_by: Option<String>,
    /// A declared member's user (`cotal creds --member`): its principal and grant, so a
    /// changed grant revokes it.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub member: Option<crate::space::members::MemberMark>,
    /// The side account it is a user of (a member's: [`crate::space::side_accounts`]); absent for a
    /// user of the space's own account (every user minted before side accounts).
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub account: Option<String>,
    /// An owner (`--profile admin`) minted with the API's delete and purge of what cotal
    /// provisions denied ([`crate::space::permissions::admin`]); absent for one minted before, which
    /// may still delete and purge them (a plan names it).
    #[serde(
        rename = "ownerGuard",
        skip_serializing_if = "std::ops::Not::not",
        default
    )]
    pub owner_guard: bool,
}

/// An account's users and revocations.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Ledger<P = Profile> {
    pub account: String,
    #[serde(default = "Vec::new")]
    pub minted: Vec<Minted<P>>,
    /// User key (or `*`) to the time up to which its JWTs are refused.
    #[serde(default)]
    pub revoked: Revocations,
}

impl<P> Ledger<P> {
    pub fn empty(account: &str) -> Self {
        Ledger {
            account: account.into(),
            minted: Vec::new(),
            revoked: Revocations::new(),
        }
    }

    /// The keys minted under `name`, oldest first.
    pub fn keys_of(&self, name: &str) -> Vec<&str> {
        self.minted
            .iter()
            .filter(|m| m.name == name)
            .map(|m| m.key.as_str())
            .collect()
    }

    /// The names minted, sorted and each once, for a message (`none` when there are none).
    pub fn names(&self) -> String {
        let mut names: Vec<&str> = self.minted.iter().map(|m| m.name.as_str()).collect();
        names.sort_unstable();
        names.dedup();
        if names.is_empty() {
            "none".into()
        } else {
            names.join(", ")
        }
    }

    /// Record the revocation of `keys` at `at` (a later time never moves back: revocations are
    /// only ever added). A revocation covers every user the ledger records under it by the
    /// ledger, not by the clock: its time is at least the latest recorded issue time of what it
    /// names (every user for `*`), so creds minted while the host's clock ran ahead are revoked
    /// too. Returns the latest time now recorded for any of `keys`.
    pub fn record_revocation(&mut self, keys: &[String], at: i64) -> i64 {
        for key in keys {
            let issued = self
                .minted
                .iter()
                .filter(|m| key == "*" || m.key == *key)
                .map(|m| m.issued_at)
                .max();
            let at = issued.map_or(at, |i| i.max(at));
            let ts = self.revoked.entry(key.clone()).or_insert(at);
            *ts = (*ts).max(at);
        }
        keys.iter()
            .filter_map(|k| self.revoked.get(k))
            .copied()
            .max()
            .unwrap_or(at)
    }

    /// The earliest issue time a JWT minted now may carry to be accepted: after the `*`
    /// revocation, if any (nats-server refuses a JWT issued at or before it; it never checks
    /// an issue time against its own clock).
    pub fn issue_floor(&self) -> Option<i64> {
        self.revoked.get("*").map(|t| t + 1)
    }

    /// Whether `key` is revoked for a JWT issued at `issued_at`.
    pub fn is_revoked(&self, key: &str, issued_at: i64) -> bool {
        [key, "*"]
            .iter()
            .any(|k| self.revoked.get(*k).is_some_and(|ts| issued_at <= *ts))
    }
}

/// The ledger of `space` for `account` (empty when absent or written for another account).
/// A ledger that does not parse, or a link, is an error naming the file.
pub fn load(root: &Root, space: &SpaceName, account: &str) -> Result<Ledger> {
    Ok(
        match record::read_optional::<Ledger>(&root.space_file(space, SpaceFile::Users))? {
            Some(l) if l.account == account => l,
            _ => Ledger::empty(account),
        },
    )
}

/// The ledger of the system users handed out for the system account `account` (empty when
/// absent or written for another system account). One that does not parse is an error naming
/// the file.
pub fn load_system(root: &Root, account: &str) -> Result<Ledger<SysRole>> {
    Ok(
        match record::read_optional::<Ledger<SysRole>>(&root.system_users())? {
            Some(l) if l.account == account => l,
            _ => Ledger::empty(account),
        },
    )
}

/// Write the system users' ledger (0600).
pub fn save_system(root: &Root, ledger: &Ledger<SysRole>) -> Result<()> {
    record::write(&root.system_users(), ledger, Layout::Pretty, atomic::SECRET)
}

/// Write the ledger (0600) into the space's folder.
pub fn save(root: &Root, space: &SpaceName, ledger: &Ledger) -> Result<()> {
    atomic::ensure_dir(&root.space_dir(space), atomic::PRIVATE_DIR)?;
    record::write(
        &root.space_file(space, SpaceFile::Users),
        ledger,
        Layout::Pretty,
        atomic::SECRET,
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_revocation_covers_jwts_issued_up_to_its_time_and_star_covers_every_key() {
        let mut l: Ledger = Ledger::empty("A");
        l.revoked.insert("UKEY".into(), 100);
        assert!(l.is_revoked("UKEY", 100));
        assert!(l.is_revoked("UKEY", 99));
        assert!(!l.is_revoked("UKEY", 101));
        assert!(!l.is_revoked("OTHER", 50));
        l.revoked.insert("*".into(), 200);
        assert!(l.is_revoked("OTHER", 150));
    }

    #[test]
    fn a_revocation_covers_what_the_ledger_minted_under_a_clock_ahead_and_sets_the_next_floor() {
        let minted = |key: &str, issued_at: i64| Minted {
            name: key.to_lowercase(),
            key: key.into(),
            profile: Profile::Admin,
            issued_at,
            expires_at: None,
            signed_by: None,
            member: None,
            account: None,
            owner_guard: true,
        };
        let mut l: Ledger = Ledger::empty("A");
        // Minted while the host's clock ran a day ahead; revoked with the clock right.
        l.minted.push(minted("UAHEAD", 1_000 + 86_400));
        l.minted.push(minted("UNOW", 990));
        assert_eq!(l.issue_floor(), None);
        l.record_revocation(&["*".into()], 1_000);
        assert!(
            l.is_revoked("UAHEAD", 1_000 + 86_400),
            "the ledger's, not the clock's"
        );
        assert!(l.is_revoked("UNOW", 990));
        assert_eq!(l.issue_floor(), Some(1_000 + 86_400 + 1));
        // One key: at least its own recorded issue time.
        let mut l: Ledger = Ledger::empty("A");
        l.minted.push(minted("UAHEAD", 5_000));
        l.record_revocation(&["UAHEAD".into()], 1_000);
        assert!(l.is_revoked("UAHEAD", 5_000));
        // Never moves back.
        assert_eq!(l.record_revocation(&["UAHEAD".into()], 10), 5_000);
        assert_eq!(l.revoked["UAHEAD"], 5_000);
    }
}
