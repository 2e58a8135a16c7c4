//! `cotal space backup` and `cotal space restore`: one space's data out of, and into, a
//! preserved store (after `cotal down --preserve-state`).

use super::Global;
use crate::backup::{self, Target};
use crate::error::{Error, Result};
use crate::model::SpaceName;
use crate::observed::BrokerProcess;
use crate::store::{account_record, cut, lock};
use crate::{apply, observe, plan};
use std::collections::BTreeMap;
use std::path::Path;

/// Shared preconditions; runs `work` with the target.
fn with_target<T>(
    global: &Global,
    name: &str,
    verb: &str,
    work: impl FnOnce(&crate::store::Root, &Target, &BTreeMap<String, SpaceName>) -> Result<T>,
) -> Result<T> {
    let root = global.root()?;
    let space = SpaceName::parse(name).map_err(Error::Input)?;
    let (desired, digest) = observe::desired(&root)?;
    let _lock = lock::acquire(&root, &crate::operator::holder(), std::time::Duration::ZERO)?;
    if let Some(cluster) = &desired.topology.cluster {
        return Err(Error::Refused(format!(
            "`{verb}` does not work on a cluster yet: a per-space artifact is taken from one stopped store, and on the {} nodes of cluster {:?} cotal cannot yet prove every replica of each stream was current at the cut.\n\
             blast radius: none, nothing was read or written.\n\
             next: `cotal root backup` saves the whole root (records and keys); to move one space's data, copy its streams with a NATS client (`nats stream backup`) while the cluster runs",
            desired.topology.nodes.len(),
            cluster
        )));
    }
    let observed = observe::observe(&root, &desired, digest)?;
    apply::refuse_if_journal_open(&observed.journal, verb)?;
    let trust = plan::guard_trust(&observed)?;
    let Some(the_cut) = cut::load(&root)? else {
        return Err(Error::Refused(format!(
            "`{verb}` needs a cut: a per-space artifact is consistent only against a stopped store.\n\
             next: `cotal down --preserve-state` (this stops the broker for every space), then `{verb}`, then `cotal up`"
        )));
    };
    match observed.process() {
        BrokerProcess::Stopped => {}
        BrokerProcess::Unknown { .. } => plan::guard_liveness(&observed)?,
        running => {
            return Err(Error::Refused(format!(
                "the broker runs again{} since the cut of {}; the store is live.\nnext: `cotal down --preserve-state` again",
                running
                    .pid()
                    .map(|pid| format!(" (pid {pid})"))
                    .unwrap_or_default(),
                the_cut.at
            )));
        }
    }
    let Some(observed_space) = observed.inventory.spaces.get(&space) else {
        return Err(Error::Refused(format!(
            "this root has no space {}: its trust comes from `cotal space add` under this broker.\n\
             next: `cotal space add {name}` while the broker is stopped, then `{verb}` again",
            space.quoted()
        )));
    };
    let record = account_record::load(&root, &space)?;
    // The isolated broker reads the streams as a user of the space: a suspended space (fenced
    // before a move) is loaded there with an active JWT, minted in memory and never written.
    let isolated_jwt = if observed_space.limits.is_suspended() {
        let broker = match crate::store::broker_record::load(&root)? {
            crate::store::broker_record::Loaded::Valid(b, _) => b,
            _ => {
                return Err(Error::Refused(
                    "the broker record changed while cotal read it.\nnext: run the command again"
                        .into(),
                ));
            }
        };
        let mut active = plan::applied_spec(observed_space);
        active.state = crate::model::SpaceState::Active;
        crate::mint::reissue(
            &broker,
            &record,
            &space,
            &active,
            &observed_space.revocations,
            false,
        )
        .map_err(Error::Other)?
        .account
        .jwt
    } else {
        observed_space.jwt.clone()
    };
    let tenants: BTreeMap<String, SpaceName> = observed
        .inventory
        .spaces
        .iter()
        .map(|(n, s)| (s.account_pub.clone(), n.clone()))
        .collect();
    let target = Target {
        trust: &trust,
        space: &space,
        account: &observed_space.account_pub,
        jwt: &isolated_jwt,
        signing_seed: &record.account.signing_seed,
        store_dir: &observed.first().store_dir,
    };
    work(&root, &target, &tenants)
}

pub fn backup(global: &Global, name: &str, dir: &Path) -> Result<i32> {
    let manifest = with_target(
        global,
        name,
        "cotal space backup",
        |root, target, tenants| backup::backup(root, target, tenants, dir),
    )?;
    println!(
        "Backed up {} (account {}) to {}:",
        manifest.space.quoted(),
        manifest.account,
        dir.display()
    );
    for s in &manifest.streams {
        println!(
            "  {:<28} {:>8} messages  sequences {}..{}",
            s.name, s.messages, s.first_seq, s.last_seq
        );
    }
    Ok(0)
}

pub fn restore(global: &Global, name: &str, dir: &Path, relocate: bool) -> Result<i32> {
    let report = with_target(global, name, "cotal space restore", |root, target, _| {
        backup::restore(root, target, dir, relocate)
    })?;
    println!(
        "Restored {name:?} from {} and verified against its manifest:",
        dir.display()
    );
    for v in &report {
        println!(
            "  {:<28} {:>8} messages  sequences {}..{}  ok",
            v.stream, v.messages, v.first_seq, v.last_seq
        );
    }
    println!("Next: `cotal up` serves it (provisioning adds the buckets a backup does not carry).");
    Ok(0)
}
