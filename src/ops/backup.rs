//! Backups: one space's data out of, and into, a preserved store (after `cotal down
//! --preserve-state`, see [`crate::backup`]), and the root's trust and records (see
//! [`crate::root_backup`]). Each runs under the root's lock after the checks its artifact
//! depends on.

use crate::backup::{self, Manifest, Target, Verified};
use crate::diagnostic::Diagnostic;
use crate::error::{Error, Result};
use crate::model::SpaceName;
use crate::observed::{BrokerProcess, BrokerRecordState};
use crate::ops::relocation;
use crate::store::{Root, account_record, cut, lock};
use crate::{apply, observe, plan, root_backup};
use std::collections::BTreeMap;
use std::path::Path;
use std::time::Duration;

/// Back up space `name` of a preserved store into `dir`. A fenced space (suspended or
/// archived) is being moved: its relocation is recorded around the export (returned), and its
/// removal then needs the destination's receipt.
pub fn space_backup(
    root: &Root,
    name: &str,
    dir: &Path,
) -> Result<(Manifest, Option<crate::adopt::relocation::Relocation>)> {
    with_target(
        root,
        name,
        "cotal space backup",
        |root, target, tenants, space| {
            // Audited before the export, fail-closed: no artifact leaves unrecorded.
            crate::credentials::audit(
                root,
                crate::audit::Event::SpaceBackedUp,
                target.space,
                format!("export of its streams to {} begun", dir.display()),
            )?;
            if !relocation::fenced(space) {
                return Ok((backup::backup(root, target, tenants, dir)?, None));
            }
            let moving = relocation::begin(root, target.space, space)?;
            match backup::backup(root, target, tenants, dir) {
                Ok(manifest) => {
                    let moving = relocation::exported(root, target.space, moving, dir, &manifest)?;
                    Ok((manifest, Some(moving)))
                }
                Err(e) => {
                    relocation::failed(root, target.space, &e)?;
                    Err(e)
                }
            }
        },
    )
}

/// Restore space `name` from `dir` into a preserved store, verified against its manifest, and
/// write the receipt of what was verified (to `receipt`, or the space's folder): the source of
/// a move removes the space with it. Returns what was verified and where the receipt is.
pub fn space_restore(
    root: &Root,
    name: &str,
    dir: &Path,
    relocate: bool,
    receipt: Option<&Path>,
) -> Result<(Vec<Verified>, std::path::PathBuf)> {
    relocation::refuse_existing_receipt(receipt)?;
    with_target(root, name, "cotal space restore", |root, target, _, _| {
        crate::credentials::audit(
            root,
            crate::audit::Event::SpaceRestored,
            target.space,
            format!(
                "restore of its streams from {} begun{}",
                dir.display(),
                if relocate {
                    " (relocated from another account)"
                } else {
                    ""
                }
            ),
        )?;
        let verified = backup::restore(root, target, dir, relocate)?;
        let written = relocation::write_receipt(root, target.space, dir, &verified, receipt)?;
        Ok((verified, written))
    })
}

/// Copy the root's trust and records into `dir`, refused while an apply is interrupted (the
/// records are between two states) or the trust is unsound.
pub fn root_backup(
    root: &Root,
    dir: &Path,
    lock_timeout: Duration,
) -> Result<root_backup::Manifest> {
    let _lock = lock::acquire(root, &crate::operator::holder(), lock_timeout)?;
    let (desired, digest, _) = observe::desired_for_reading(root)?;
    let observed = observe::observe(root, &desired, digest)?;
    // The records are between two states while an apply is open: the one refusal every verb
    // gives names what finishing it completes.
    apply::refuse_if_journal_open(&observed.journal, "root backup")?;
    plan::guard_trust(&observed)?;
    let BrokerRecordState::Valid(trust) = &observed.broker else {
        unreachable!("guard_trust passed");
    };
    // Audited before the copy, fail-closed: every seed of the broker leaves in it.
    crate::credentials::audit_root(
        root,
        crate::audit::Event::RootBackedUp,
        format!("export of every seed and record to {} begun", dir.display()),
    )?;
    root_backup::backup(
        root,
        dir,
        &trust.operator_pub,
        observed.generation.generation(),
    )
}

/// The space `raw` names: the name as the root records it when it holds a record of exactly
/// that name (a space an older cotal recorded under a name `cotal.toml` can no longer declare,
/// another Unicode form or a control character, can be backed up before it is removed), else
/// the name as an operator writes it (in NFC, checked).
fn recorded_name(root: &Root, raw: &str) -> Result<SpaceName> {
    if let Ok(name) = SpaceName::from_record(raw)
        && std::fs::symlink_metadata(root.account_record(&name)).is_ok()
    {
        return Ok(name);
    }
    SpaceName::parse(raw).map_err(Error::input)
}

/// Shared preconditions; runs `work` with the target.
fn with_target<T>(
    root: &Root,
    name: &str,
    verb: &str,
    work: impl FnOnce(
        &Root,
        &Target,
        &BTreeMap<String, SpaceName>,
        &crate::observed::ObservedSpace,
    ) -> Result<T>,
) -> Result<T> {
    let space = recorded_name(root, name)?;
    let (desired, digest) = observe::desired(root)?;
    let _lock = lock::acquire(root, &crate::operator::holder(), std::time::Duration::ZERO)?;
    if let Some(cluster) = &desired.topology.cluster {
        return Err(Error::refused(
            Diagnostic::new(format!(
                "`{verb}` does not work on a cluster yet: a per-space artifact is taken from one stopped store, and on the {} nodes of cluster {:?} cotal cannot yet prove every replica of each stream was current at the cut.",
                desired.topology.nodes.len(),
                cluster
            ))
            .blast("none, nothing was read or written.")
            .next("`cotal root backup` saves the whole root (records and keys); to move one space's data, copy its streams with a NATS client (`nats stream backup`) while the cluster runs"),
        ));
    }
    let observed = observe::observe(root, &desired, digest)?;
    apply::refuse_if_journal_open(&observed.journal, verb)?;
    let trust = plan::guard_trust(&observed)?;
    let Some(the_cut) = cut::load(root)? else {
        return Err(Error::refused(
            Diagnostic::new(format!(
                "`{verb}` needs a cut: a per-space artifact is consistent only against a stopped store."
            ))
            .next(format!(
                "`cotal down --preserve-state` (this stops the broker for every space), then `{verb}`, then `cotal up`"
            )),
        ));
    };
    match observed.process() {
        BrokerProcess::Stopped => {}
        BrokerProcess::Unknown { .. } => plan::guard_liveness(&observed)?,
        running => {
            return Err(Error::refused(
                Diagnostic::new(format!(
                    "the broker runs again{} since the cut of {}; the store is live.",
                    running
                        .pid()
                        .map(|pid| format!(" (pid {pid})"))
                        .unwrap_or_default(),
                    the_cut.at
                ))
                .next("`cotal down --preserve-state` again"),
            ));
        }
    }
    let Some(observed_space) = observed.inventory.spaces.get(&space) else {
        return Err(Error::refused(
            Diagnostic::new(format!(
                "this root has no space {}: its trust comes from `cotal space add` under this broker.",
                space.quoted()
            ))
            .next(format!(
                "`cotal space add {name}` while the broker is stopped, then `{verb}` again"
            )),
        ));
    };
    let record = account_record::load(root, &space)?;
    // The isolated broker reads the streams as a user of the space: a suspended space (fenced
    // before a move), or an archived one (its JetStream off too), is loaded there with an
    // active JWT, minted in memory and never written.
    let isolated_jwt = if observed_space.limits.is_suspended() {
        let broker = match crate::store::broker_record::load(root)? {
            crate::store::broker_record::Loaded::Valid((b, _)) => b,
            _ => {
                return Err(Error::refused(
                    Diagnostic::new("the broker record changed while cotal read it.")
                        .next("run the command again"),
                ));
            }
        };
        let mut active = plan::applied_spec(observed_space);
        active.state = crate::model::SpaceState::Active;
        // JetStream off (an archive's fence) is no storage limit to read it under.
        let limits = &mut active.limits;
        for size in [&mut limits.max_storage, &mut limits.max_memory] {
            if *size == Some(crate::model::ByteSize(0)) {
                *size = None;
            }
        }
        crate::mint::reissue(
            &broker,
            &record,
            &space,
            &active,
            &observed_space.revocations,
            false,
        )
        .map_err(Error::other)?
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
        account_seed: &record.account.seed,
        store_dir: &observed.first().store_dir,
    };
    work(root, &target, &tenants, observed_space)
}
