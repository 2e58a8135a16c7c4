//! `.cotal/auth/broker.json`: the broker's trust root: the operator (its identity seed, its
//! signing seed, its JWT) and the system account (its JWT and the scoped signing seeds cotal
//! keeps for it); and `.cotal/auth/sys.seed`, the unscoped system signing seed of roots made
//! before the scoped keys (read until the next apply replaces it).
//!
//! Invariants: a record is accepted only when its operator JWT is self-signed by the operator
//! key its seed encodes, names the recorded system account and lists the operator signing key;
//! when the record keeps system keys, the system JWT lists each of them, scoped to its role. The
//! system JWT and the keys it lists are written in one atomic write, so a rotation can never
//! leave a key on disk that the JWT does not list, or the reverse. [`save`] refuses to replace
//! a record whose operator differs (a second operator over existing tenants orphans them all).

use crate::diagnostic::Diagnostic;
use crate::error::{Error, Result};
use crate::observed::BrokerTrust;
use crate::store::record::{self, Layout, Record};
use crate::store::{Root, atomic};
use crate::trust::jwt::{self, AccountNats, OperatorNats};
use crate::trust::secret::Seed;
use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct OperatorKeys {
    /// The identity seed: signs the operator JWT only.
    pub seed: Seed,
    pub jwt: String,
    /// The operator signing seed, listed in the operator JWT: signs the system and space
    /// accounts. Absent on roots made before it (their accounts are signed by the identity).
    #[serde(
        rename = "signingSeed",
        skip_serializing_if = "Option::is_none",
        default
    )]
    pub signing_seed: Option<Seed>,
}

impl OperatorKeys {
    /// The key that signs accounts: the signing key when the root has one.
    pub fn account_signer(&self) -> &Seed {
        self.signing_seed.as_ref().unwrap_or(&self.seed)
    }
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SysAccount {
    #[serde(rename = "pub")]
    pub public: String,
    pub jwt: String,
    /// The scoped signing seeds of the system account (multi-space roots).
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub keys: Option<SysKeys>,
    /// The monitoring account: the users `cotal creds --system monitor` hands out live there,
    /// importing the read-only `$SYS` requests ([`crate::space::side_accounts::monitor_claims`]), so no
    /// answer to them lands in the system account. Its key and JWT (its users are signed by the
    /// monitor key, which it lists scoped); absent on roots that keep no monitor key yet.
    #[serde(
        rename = "monitorAccount",
        skip_serializing_if = "Option::is_none",
        default
    )]
    pub monitor_account: Option<crate::store::account_record::SideAccount>,
}

/// The system account's signing seeds, one per role (see [`crate::space::permissions::SysRole`]).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SysKeys {
    /// Signs cotal's own ephemeral system users (reload, confirm, observe, purge, evict).
    pub control: Seed,
    /// Signs each space's membership observer.
    pub observer: Seed,
    /// Signs each space's connection evictor; only when the root opts in.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub evictor: Option<Seed>,
    /// Signs the read-only monitoring users `cotal creds --system monitor` hands out (absent
    /// on roots made before it; the next re-issue of the system account adds it).
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub monitor: Option<Seed>,
    /// The control key of the system JWT the broker may still run: kept from a change of the
    /// control key (a rotation, the legacy seed's replacement) until the promotion that loads
    /// the new JWT is confirmed, so an apply interrupted in between can still reach the broker.
    /// Never listed in the new JWT.
    #[serde(
        rename = "previousControl",
        skip_serializing_if = "Option::is_none",
        default
    )]
    pub previous_control: Option<PreviousControl>,
}

/// A control key being replaced.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PreviousControl {
    pub seed: Seed,
    /// A scoped key (its users carry no permissions), else the legacy unscoped `sys.seed`.
    pub scoped: bool,
}

impl SysKeys {
    /// The seed of `role`, when kept.
    pub fn get(&self, role: crate::space::permissions::SysRole) -> Option<&Seed> {
        use crate::space::permissions::SysRole;
        match role {
            SysRole::Control => Some(&self.control),
            SysRole::Observer => Some(&self.observer),
            SysRole::Evictor => self.evictor.as_ref(),
            SysRole::Monitor => self.monitor.as_ref(),
        }
    }
}

/// The broker record as stored.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BrokerRecord {
    pub operator: OperatorKeys,
    pub sys: SysAccount,
    #[serde(rename = "gen")]
    pub trust_gen: u64,
}

impl BrokerRecord {
    /// Check internal consistency and return the public half.
    pub fn validate(&self) -> Result<BrokerTrust, String> {
        let kp = self.operator.seed.key_pair()?;
        let operator_pub = kp.public_key();
        if !operator_pub.starts_with('O') {
            return Err("operator seed is not an operator key".into());
        }
        let claims: jwt::Claims<OperatorNats> =
            jwt::decode_verified(&self.operator.jwt).map_err(|e| format!("operator JWT: {e}"))?;
        if claims.iss != operator_pub || claims.sub != operator_pub {
            return Err("operator JWT is not self-signed by the recorded operator".into());
        }
        if claims.nats.system_account.as_deref() != Some(self.sys.public.as_str()) {
            return Err("operator JWT names a different system account".into());
        }
        if let Some(signing) = &self.operator.signing_seed {
            let key = signing.key_pair()?.public_key();
            if !claims.nats.signing_keys.contains(&key) {
                return Err("operator JWT does not list the recorded operator signing key".into());
            }
        }
        let trust = BrokerTrust {
            operator_pub,
            operator_signing: claims.nats.signing_keys.clone(),
            operator_jwt: self.operator.jwt.clone(),
            sys_pub: self.sys.public.clone(),
            sys_jwt: self.sys.jwt.clone(),
            monitor: self
                .sys
                .monitor_account
                .as_ref()
                .map(|m| (m.public.clone(), m.jwt.clone())),
        };
        let sys: jwt::Claims<AccountNats> =
            jwt::decode_verified(&self.sys.jwt).map_err(|e| format!("SYS JWT: {e}"))?;
        if !trust.signs_accounts(&sys.iss) || sys.sub != self.sys.public {
            return Err("SYS account JWT is not signed by the recorded operator".into());
        }
        if let Some(keys) = &self.sys.keys {
            use crate::space::permissions::SysRole;
            // The keys of roles whose users live in the system account; the others are listed
            // by the spaces' side accounts of their role.
            for role in SysRole::ALL.into_iter().filter(|r| r.in_system_account()) {
                let Some(seed) = keys.get(role) else { continue };
                let key = seed.key_pair()?.public_key();
                let listed = sys.nats.signing_keys.iter().any(|k| {
                    matches!(k, jwt::SigningKey::Scoped(s) if s.key == key && s.role == role.name())
                });
                if !listed {
                    return Err(format!(
                        "SYS account JWT does not list the recorded {} key as scoped",
                        role.name()
                    ));
                }
            }
        }
        if let Some(m) = &self.sys.monitor_account {
            let claims: jwt::Claims<AccountNats> =
                jwt::decode_verified(&m.jwt).map_err(|e| format!("monitoring account JWT: {e}"))?;
            if !trust.signs_accounts(&claims.iss) || claims.sub != m.public {
                return Err(
                    "the monitoring account's JWT is not signed by the recorded operator".into(),
                );
            }
        }
        Ok(trust)
    }
}

/// What is at the broker record's path: the whole record (with its seeds) and its public half.
pub type Loaded = Record<(Box<BrokerRecord>, BrokerTrust)>;

/// Read and validate the broker record. Corruption is a value, not an error: guards decide.
pub fn load(root: &Root) -> Result<Loaded> {
    let parsed = record::read_with(&root.broker_record(), |bytes| {
        let r: BrokerRecord = record::parse(bytes)?;
        let trust = r.validate()?;
        Ok((r, trust))
    })?;
    Ok(match parsed {
        Record::Absent => Loaded::Absent,
        Record::Corrupt { file, reason } => Loaded::Corrupt { file, reason },
        Record::Valid((r, trust)) => Loaded::Valid((Box::new(r), trust)),
    })
}

/// Write the broker record, refusing to replace one with a different operator.
pub fn save(root: &Root, broker: &BrokerRecord) -> Result<()> {
    let new_trust = broker.validate().map_err(Error::other)?;
    match load(root)? {
        Loaded::Absent => {}
        Loaded::Valid((_, existing)) if existing.operator_pub == new_trust.operator_pub => {}
        Loaded::Valid((_, existing)) => {
            return Err(Error::refused(
                Diagnostic::new(format!(
                    "{} holds operator {}; replacing it with operator {} would orphan every space signed by it.",
                    root.broker_record().display(),
                    existing.operator_pub,
                    new_trust.operator_pub
                ))
                .next("keep the existing broker record; a new broker belongs in a new root"),
            ));
        }
        Loaded::Corrupt { reason: why, .. } => {
            return Err(Error::refused(
                Diagnostic::new(format!(
                    "{} is corrupt ({why}); it may hold the trust of real tenants, so it is not overwritten.",
                    root.broker_record().display()
                ))
                .next("restore it from a backup"),
            ));
        }
    }
    atomic::ensure_dir(&root.auth_dir(), atomic::PRIVATE_DIR)?;
    record::write(
        &root.broker_record(),
        broker,
        Layout::Pretty,
        atomic::SECRET,
    )
}

/// What of a broker's tenants is on disk, named for people: account records, the promoted
/// config, the generation record, an open journal, space folders. Asked when the broker record
/// is absent: a new operator minted over any of it would orphan those tenants.
pub fn tenant_material(root: &Root) -> Result<Vec<String>> {
    use crate::store::paths::{ACCOUNT_PREFIX, ACCOUNT_SUFFIX};
    let count = |dir: std::path::PathBuf, keep: &dyn Fn(&str) -> bool| -> Result<usize> {
        match std::fs::read_dir(&dir) {
            Ok(entries) => Ok(entries
                .flatten()
                .filter(|e| keep(&e.file_name().to_string_lossy()))
                .count()),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(0),
            Err(e) => Err(Error::io(dir, e)),
        }
    };
    let mut out = Vec::new();
    let accounts = count(root.auth_dir(), &|n| {
        n.starts_with(ACCOUNT_PREFIX) && n.ends_with(ACCOUNT_SUFFIX)
    })?;
    if accounts > 0 {
        out.push(format!("{accounts} account record(s)"));
    }
    let spaces = count(root.state_dir(), &|n| n.starts_with("space."))?;
    if spaces > 0 {
        out.push(format!("{spaces} space folder(s)"));
    }
    for (path, what) in [
        (root.server_conf(), "the promoted server.conf"),
        (root.generation_record(), "the generation record"),
        (root.journal(), "an apply journal"),
        (root.sys_seed(), "the system signing seed"),
    ] {
        if std::fs::symlink_metadata(&path).is_ok() {
            out.push(what.to_string());
        }
    }
    Ok(out)
}

/// Whether the retained system signing seed exists.
pub fn sys_seed_retained(root: &Root) -> bool {
    std::fs::symlink_metadata(root.sys_seed())
        .map(|m| m.is_file())
        .unwrap_or(false)
}

/// Read the retained system signing seed.
pub fn load_sys_seed(root: &Root) -> Result<Option<Seed>> {
    let path = root.sys_seed();
    Ok(atomic::read_optional(&path)?
        .map(|b| Seed::new(String::from_utf8_lossy(&b).trim().to_string())))
}
