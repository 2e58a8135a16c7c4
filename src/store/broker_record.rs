//! `.cotal/auth/broker.json`: the broker's trust root (operator and system account), and
//! `.cotal/auth/sys.seed`, the retained system signing seed.
//!
//! Invariants: a record is accepted only when its operator JWT is self-signed by the operator
//! key its seed encodes and names the recorded system account; [`save`] refuses to replace a
//! record whose operator differs (a second operator over existing tenants orphans them all).

use crate::error::{Error, Result};
use crate::jwt::{self, AccountNats, OperatorNats};
use crate::observed::BrokerTrust;
use crate::secret::Seed;
use crate::store::record::{self, Layout, Record};
use crate::store::{Root, atomic};
use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct OperatorKeys {
    pub seed: Seed,
    pub jwt: String,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SysAccount {
    #[serde(rename = "pub")]
    pub public: String,
    pub jwt: String,
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
        let sys: jwt::Claims<AccountNats> =
            jwt::decode_verified(&self.sys.jwt).map_err(|e| format!("SYS JWT: {e}"))?;
        if sys.iss != operator_pub || sys.sub != self.sys.public {
            return Err("SYS account JWT is not signed by the recorded operator".into());
        }
        Ok(BrokerTrust {
            operator_pub,
            operator_jwt: self.operator.jwt.clone(),
            sys_pub: self.sys.public.clone(),
            sys_jwt: self.sys.jwt.clone(),
        })
    }
}

/// What is at the broker record's path.
#[derive(Debug)]
pub enum Loaded {
    Absent,
    Valid(Box<BrokerRecord>, BrokerTrust),
    Corrupt(String),
}

/// Read and validate the broker record. Corruption is a value, not an error: guards decide.
pub fn load(root: &Root) -> Result<Loaded> {
    let parsed = record::read_with(&root.broker_record(), |bytes| {
        let r: BrokerRecord = record::parse(bytes)?;
        let trust = r.validate()?;
        Ok((r, trust))
    })?;
    Ok(match parsed {
        Record::Absent => Loaded::Absent,
        Record::Corrupt { reason, .. } => Loaded::Corrupt(reason),
        Record::Valid((r, trust)) => Loaded::Valid(Box::new(r), trust),
    })
}

/// Write the broker record, refusing to replace one with a different operator.
pub fn save(root: &Root, broker: &BrokerRecord) -> Result<()> {
    let new_trust = broker.validate().map_err(Error::Other)?;
    match load(root)? {
        Loaded::Absent => {}
        Loaded::Valid(_, existing) if existing.operator_pub == new_trust.operator_pub => {}
        Loaded::Valid(_, existing) => {
            return Err(Error::Refused(format!(
                "{} holds operator {}; replacing it with operator {} would orphan every space signed by it.\nnext: keep the existing broker record; a new broker belongs in a new root",
                root.broker_record().display(),
                existing.operator_pub,
                new_trust.operator_pub
            )));
        }
        Loaded::Corrupt(why) => {
            return Err(Error::Refused(format!(
                "{} is corrupt ({why}); it may hold the trust of real tenants, so it is not overwritten.\nnext: restore it from a backup",
                root.broker_record().display()
            )));
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

/// Write the retained system signing seed (0600).
pub fn save_sys_seed(root: &Root, seed: &Seed) -> Result<()> {
    atomic::ensure_dir(&root.auth_dir(), atomic::PRIVATE_DIR)?;
    atomic::write(
        &root.sys_seed(),
        format!("{}\n", seed.expose()).as_bytes(),
        atomic::SECRET,
    )
}
