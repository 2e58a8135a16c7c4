//! `adopt`: read a root the original Cotal made ([`survey`], no write) and carry out the
//! adoption [`crate::adopt::plan`] made of it ([`execute`]), under the root's lock. Every write
//! is atomic and every step finds its own work done on a re-run, so an interrupted adoption is
//! finished by adopting again.

use crate::adopt::{
    Adoption, FoundBroker, FoundMonolith, FoundSpace, MATERIAL, MaterialFile, Step, Survey,
    Unusable,
};
use crate::store::account_record::{AccountKeys, AccountRecord};
use crate::store::broker_record::{BrokerRecord, OperatorKeys, SysAccount};
use crate::store::caches::signature_memo::SignatureMemo;
use serde::Deserialize;

/// The legacy monolith: the broker's trust and its one space in one document (the original's
/// `SpaceAuth`).
#[derive(Debug, Clone, Deserialize)]
struct Monolith {
    space: String,
    operator: OperatorKeys,
    account: AccountKeys,
    sys: SysAccount,
    #[serde(default, rename = "gen")]
    trust_gen: Option<u64>,
}

impl Monolith {
    /// Its broker record (the generation the monolith carries, else 1).
    fn broker(&self) -> BrokerRecord {
        BrokerRecord {
            operator: self.operator.clone(),
            sys: self.sys.clone(),
            trust_gen: self.trust_gen.unwrap_or(1),
        }
    }

    /// Its account record.
    fn account(&self) -> AccountRecord {
        AccountRecord {
            space: self.space.clone(),
            account: self.account.clone(),
            archived: None,
            keep_claims: Vec::new(),
            side_accounts: Default::default(),
        }
    }
}
use crate::error::{Error, Result};
use crate::store::atomic::{self, Found};
use crate::store::broker_record::{self, Loaded};
use crate::store::record::Record;
use crate::store::{Root, account_record, desired_file, inventory, lock, space_dir};
use std::collections::BTreeMap;

/// The legacy monolith's path.
fn monolith_path(root: &Root) -> std::path::PathBuf {
    root.auth_dir().join("auth.json")
}

/// Where a split monolith is kept.
fn adopted_path(root: &Root) -> std::path::PathBuf {
    root.auth_dir().join("auth.json.adopted")
}

fn material_in(dir: &std::path::Path) -> Result<Vec<MaterialFile>> {
    let mut out = Vec::new();
    for name in MATERIAL {
        let path = dir.join(name);
        match atomic::read_no_follow(&path)? {
            Found::Absent => {}
            Found::File(bytes) => out.push(MaterialFile {
                name: name.to_string(),
                bytes,
            }),
            Found::NotRegular(what) => return Err(atomic::not_regular(&path, what)),
        }
    }
    Ok(out)
}

/// Read everything adoption decides on. Writes nothing.
pub fn survey(root: &Root) -> Result<Survey> {
    Ok(read(root)?.0)
}

/// The survey, and the monolith's records to write when its steps say so.
fn read(root: &Root) -> Result<(Survey, Option<Monolith>)> {
    // The broker record is read once: its operator, and whether it keeps system keys.
    let (broker, trust, recorded_sys_keys) = match broker_record::load(root)? {
        Loaded::Absent => (FoundBroker::Absent, None, false),
        Loaded::Corrupt { file, reason } => {
            (FoundBroker::Corrupt(Unusable { file, reason }), None, false)
        }
        Loaded::Valid((record, trust)) => (
            FoundBroker::Valid {
                operator: trust.operator_pub.clone(),
            },
            Some(trust),
            record.sys.keys.is_some(),
        ),
    };
    let monolith_file = monolith_path(root);
    let mut parsed: Option<Monolith> = None;
    let monolith = match crate::store::record::read_with(&monolith_file, |bytes| {
        let m: Monolith = crate::store::record::parse(bytes)?;
        let trust = m.broker().validate()?;
        // Its account, checked as a record of its operator is.
        let name = crate::model::SpaceName::from_record(&m.space)
            .map_err(|e| format!("its space name: {e}"))?;
        let bytes = serde_json::to_vec(&m.account()).map_err(|e| e.to_string())?;
        let valid = inventory::validate(
            &monolith_file,
            &format!("account.{}.json", name.hex()),
            true,
            Some(&bytes),
            &trust,
            &SignatureMemo::none(),
        )
        .map_err(|c| format!("its account: {}", c.reason))?;
        Ok((m, trust, valid))
    })? {
        Record::Absent => None,
        Record::Corrupt { file, reason } => Some(FoundMonolith::Corrupt(Unusable { file, reason })),
        Record::Valid((m, t, valid)) => {
            let found = FoundMonolith::Valid {
                file: monolith_file.clone(),
                space: m.space.clone(),
                account: valid.account_pub,
                limits: valid.limits,
                operator: t.operator_pub.clone(),
            };
            parsed = Some(m);
            Some(found)
        }
    };
    let trust = trust.or_else(|| parsed.as_ref().and_then(|m| m.broker().validate().ok()));
    let mut spaces = BTreeMap::new();
    let mut corrupt = Vec::new();
    let root_material = material_in(&root.state_dir())?;
    let mut space_material = BTreeMap::new();
    if let Some(trust) = &trust {
        let inv = inventory::read(root, trust, &SignatureMemo::none())?;
        for (name, s) in inv.spaces {
            let protect = space_dir::load_lifecycle(root, &name)
                .ok()
                .flatten()
                .is_some_and(|l| l.account == s.account_pub && l.protect);
            space_material.insert(name.clone(), material_in(&root.space_dir(&name))?);
            spaces.insert(
                name,
                FoundSpace {
                    account: s.account_pub,
                    limits: s.limits,
                    protect,
                },
            );
        }
        corrupt = inv
            .corrupt
            .into_iter()
            .map(|c| Unusable {
                file: c.file,
                reason: c.reason,
            })
            .collect();
    }
    if let Some(FoundMonolith::Valid { space, .. }) = &monolith
        && let Ok(name) = crate::model::SpaceName::from_record(space)
    {
        space_material.insert(name.clone(), material_in(&root.space_dir(&name))?);
    }
    let server_conf = match atomic::read_no_follow(&root.server_conf())? {
        Found::Absent => None,
        Found::File(bytes) => Some(String::from_utf8(bytes).map_err(|_| {
            Error::other(format!("{}: not UTF-8 text", root.server_conf().display()))
        })?),
        Found::NotRegular(what) => return Err(atomic::not_regular(&root.server_conf(), what)),
    };
    let sys_keys = recorded_sys_keys || root.sys_seed().exists();
    let running = !crate::broker::identity::root_brokers(&root.lone_node_files()).is_empty();
    let survey = Survey {
        root_dir: root.dir().to_path_buf(),
        desired_exists: desired_file::read(root)?.is_some(),
        broker,
        monolith,
        spaces,
        corrupt,
        root_material,
        space_material,
        server_conf,
        sys_keys,
        running,
    };
    Ok((survey, parsed))
}

/// What `adopt` did.
pub struct Outcome {
    pub adoption: Adoption,
    /// Its steps were carried out (false: none, or not approved).
    pub carried_out: bool,
}

/// Survey and plan under the lock, ask `approve` (when there is anything to write), then carry
/// out the steps (audited first, fail-closed). The rotation is not run here: the command runs it as the apply it is, after the
/// lock is released.
pub fn adopt(
    root: &Root,
    lock_timeout: std::time::Duration,
    approve: impl FnOnce(&Adoption) -> Result<bool>,
) -> Result<Outcome> {
    let _lock = lock::acquire(root, &crate::operator::holder(), lock_timeout)?;
    crate::apply::refuse_if_journal_open(&crate::store::journal::load(root)?, "adopt")?;
    let (survey, monolith) = read(root)?;
    let adoption = crate::adopt::plan(&survey)?;
    if adoption.steps.is_empty() || !approve(&adoption)? {
        return Ok(Outcome {
            adoption,
            carried_out: false,
        });
    }
    crate::credentials::audit_root(
        root,
        crate::audit::Event::RootAdopted,
        format!("adopting: {} step(s)", adoption.steps.len()),
    )?;
    for step in &adoption.steps {
        execute(root, step, monolith.as_ref())?;
    }
    Ok(Outcome {
        adoption,
        carried_out: true,
    })
}

/// One step; each finds its work done on a re-run.
fn execute(root: &Root, step: &Step, monolith: Option<&Monolith>) -> Result<()> {
    match step {
        Step::SplitMonolith {
            file,
            write_broker,
            write_account,
        } => {
            let m = monolith.ok_or_else(|| Error::other("the monolith was read, then vanished"))?;
            if *write_broker {
                broker_record::save(root, &m.broker())?;
            }
            if write_account.is_some() {
                account_record::save(root, &m.account())?;
            }
            atomic::rename(file, &adopted_path(root))?;
        }
        Step::MoveMaterial { space, files } => {
            let dir = root.space_dir(space);
            atomic::ensure_dir(&dir, atomic::PRIVATE_DIR)?;
            for name in files {
                let from = root.state_dir().join(name);
                let Some(bytes) = atomic::read_optional(&from)? else {
                    continue;
                };
                let to = dir.join(name);
                if atomic::read_optional(&to)?.as_deref() != Some(bytes.as_slice()) {
                    atomic::write(&to, &bytes, atomic::SECRET)?;
                }
                atomic::remove_file(&from)?;
            }
        }
        Step::WriteDesired { text } => desired_file::write(root, text)?,
    }
    Ok(())
}
