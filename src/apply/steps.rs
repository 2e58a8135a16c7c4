//! One function per kind of step: what the executor's `match` calls for each [`Step`] arm.
//!
//! Invariant: every step is idempotent (a re-run after a crash finds its work done and goes
//! on), and every record a step writes is remembered so a rollback can put it back.

use super::undo::{Undo, remember};
use super::users::{space_user, write_sys_creds};
use super::{Context, Outcome, ReapFailure, RunState};
use crate::broker::Broker;
use crate::diagnostic::Diagnostic;
use crate::error::{Error, Result};
use crate::fault::{self, Point};
use crate::mint;
use crate::model::{SpaceName, SpaceSpec};
use crate::observed::{JournaledAdd, UsageSource};
use crate::space::permissions;
use crate::store::broker_record::BrokerRecord;
use crate::store::paths::SpaceFile;
use crate::store::{account_record, jetstream_dir, journal, space_dir};

/// The fence's records: each removal journaled committed (the commit point passes here when
/// the broker runs), then each space's record re-issued fenced ([`mint::fence`], or
/// [`mint::quiesce`] for an archive), remembered for the rollback. The promotion that follows
/// loads them.
pub fn fence_records(
    ctx: &Context,
    record: &BrokerRecord,
    state: &mut RunState,
    spaces: &[crate::plan::Fenced],
) -> Result<()> {
    let mut journal = state.journal.clone();
    let mut changed = false;
    for r in journal.removals.iter_mut() {
        if !r.committed
            && spaces
                .iter()
                .any(|f| f.space == r.space && f.account == r.account)
        {
            r.committed = true;
            changed = true;
        }
    }
    if changed {
        journal::save(ctx.root, &journal)?;
        state.journal = journal;
    }
    fault::point(Point::AfterRemovalCommitted);
    for f in spaces {
        let current = planned_record(ctx, &f.space, &f.account)?;
        let fenced = if f.archive {
            mint::quiesce(record, &current)
        } else {
            mint::fence(record, &current)
        }
        .map_err(Error::other)?;
        write_record(ctx, state, &f.space, &fenced)?;
    }
    fault::point(Point::AfterFenceWritten);
    Ok(())
}

/// End the recorded move of `space` (account `account`), which this apply serves again: what
/// it holds from now on is not in the artifact. Remembered for the rollback (a promotion that
/// does not take puts the record back). `true` when there was one.
pub fn end_relocation(
    ctx: &Context,
    state: &mut RunState,
    space: &SpaceName,
    account: &str,
) -> Result<bool> {
    let path = ctx.root.space_file(space, SpaceFile::Relocation);
    let recorded = crate::store::relocation::load(ctx.root, space, account)
        .map(|r| r.is_some())
        .unwrap_or(true);
    if !recorded || std::fs::symlink_metadata(&path).is_err() {
        return Ok(false);
    }
    remember(&mut state.undo, &path)?;
    crate::store::relocation::remove(ctx.root, space)?;
    Ok(true)
}

/// Record that the move of `space` is verified by the receipt with `digest`, before its
/// removal's commit point: a re-run finishing the removal knows it ended the move.
pub fn record_relocation_verified(
    ctx: &Context,
    space: &SpaceName,
    account: &str,
    digest: &str,
) -> Result<()> {
    let Some(mut moving) = crate::store::relocation::load(ctx.root, space, account)? else {
        return Ok(());
    };
    if moving.phase == crate::adopt::relocation::Phase::Verified
        && moving.receipt.as_deref() == Some(digest)
    {
        return Ok(());
    }
    moving.phase = crate::adopt::relocation::Phase::Verified;
    moving.receipt = Some(digest.to_string());
    crate::store::relocation::save(ctx.root, space, &moving)
}

/// A removal's commit point, then its teardown: the journal says the removal is committed (on
/// disk) before anything is deleted, so a failure from here on leaves it to be finished.
pub fn delete_streams(
    ctx: &Context,
    broker: &mut dyn Broker,
    state: &mut RunState,
    space: &SpaceName,
    account: &str,
) -> Result<()> {
    let mut journal = state.journal.clone();
    if let Some(r) = journal
        .removals
        .iter_mut()
        .find(|r| &r.space == space && r.account == account)
        && !r.committed
    {
        r.committed = true;
        journal::save(ctx.root, &journal)?;
        state.journal = journal;
    }
    fault::point(Point::AfterRemovalCommitted);
    broker.delete_streams(space, account, &ctx.observed.store_dirs())?;
    fault::point(Point::AfterStreamsDeleted);
    Ok(())
}

/// Empty every stream and bucket of `space` (its account `account`) through the running broker,
/// keeping their configs. Before the commit point it surveys the streams as a user of the
/// account and refuses, emptying nothing, when one is locked against purges (or the user cannot
/// connect); then the journal records the purge committed with each stream's last sequence, and
/// the streams are emptied up to those. A re-run finishing it empties the same bounds: what
/// clients wrote after the commit point is never purged.
pub fn purge_streams(
    ctx: &Context,
    broker: &mut dyn Broker,
    state: &mut RunState,
    outcome: &mut Outcome,
    space: &SpaceName,
    account: &str,
) -> Result<()> {
    let purger = space_user(
        ctx.root,
        space,
        account,
        "cotal-purger",
        permissions::purger(),
    )?
    .ok_or_else(|| {
        Error::other(format!(
            "the record of {} no longer holds account {account}",
            space.quoted()
        ))
    })?;
    let Some(entry) = state
        .journal
        .purges
        .iter_mut()
        .find(|p| &p.space == space && p.account == account)
    else {
        return Err(Error::other(format!(
            "the journal does not name the purge of {}",
            space.quoted()
        )));
    };
    let mut bytes = None;
    if !entry.committed {
        let survey = broker.survey_streams(space, &purger)?;
        let locked: Vec<String> = survey
            .iter()
            .filter_map(|s| s.locked.map(|why| format!("{} ({why})", s.name)))
            .collect();
        if !locked.is_empty() {
            return Err(Error::refused(
                Diagnostic::new(format!(
                    "{} of {} {} locked against purges by a user of the space: nats-server lets no one empty {}.",
                    locked.join(", "),
                    space.quoted(),
                    if locked.len() == 1 { "is" } else { "are" },
                    if locked.len() == 1 { "it" } else { "them" },
                ))
                .tenants([space.clone()])
                .blast("none, nothing was emptied.")
                .next("delete it with an admin of the space (its messages go with it), then purge again"),
            ));
        }
        entry.upto = survey
            .iter()
            .map(|s| (s.name.clone(), s.last_seq))
            .collect();
        entry.committed = true;
        bytes = Some(survey.iter().map(|s| s.bytes).sum());
        journal::save(ctx.root, &state.journal)?;
    }
    fault::point(Point::AfterPurgeCommitted);
    let upto = state
        .journal
        .purges
        .iter()
        .find(|p| &p.space == space && p.account == account)
        .map(|p| p.upto.clone())
        .unwrap_or_default();
    let emptied = broker.purge_streams(space, &purger, &upto)?;
    tracing::info!(space = %space, streams = emptied.len(), "purged");
    outcome.purged.push(super::Purged {
        space: space.clone(),
        streams: emptied.len(),
        messages: emptied.iter().map(|(_, m)| m).sum(),
        bytes,
    });
    Ok(())
}

/// Mint a new account for the space and write its record, protection and $SYS creds.
pub fn add_account(
    ctx: &Context,
    record: &BrokerRecord,
    state: &mut RunState,
    space: &SpaceName,
    spec: &SpaceSpec,
    sides: &[crate::plan::sides::SideWrite],
) -> Result<()> {
    let root = ctx.root;
    let account = mint::account(record, space, spec).map_err(Error::other)?;
    let account = mint::side_accounts(
        record,
        &account,
        spec.state == crate::model::SpaceState::Suspended,
        sides,
        &[],
    )
    .map_err(Error::other)?;
    // A name this apply also removes (under its old account) is re-added: the journal says
    // which new account its record may hold before the record is written.
    if state.journal.removals.iter().any(|r| &r.space == space) {
        state.journal.added.push(JournaledAdd {
            space: space.clone(),
            account: account.account.public.clone(),
        });
        journal::save(root, &state.journal)?;
    }
    let mut account = account;
    if spec.state == crate::model::SpaceState::Archived {
        account.archived = Some(archival_now());
    }
    remember(&mut state.undo, &root.account_record(space))?;
    if std::fs::symlink_metadata(root.space_dir(space)).is_err() {
        state.undo.push(Undo::Remove(root.space_dir(space)));
    }
    account_record::save(root, &account)?;
    state
        .expected
        .insert(space.clone(), super::Expected::of(&account));
    fault::point(Point::AfterRecordWritten);
    space_dir::save_lifecycle(
        root,
        space,
        &space_dir::Lifecycle {
            account: account.account.public.clone(),
            protect: spec.protect,
            // A space added suspended gets its suspension recorded by the next step.
            suspension: None,
        },
    )?;
    // A space added suspended gets its $SYS creds when it is resumed.
    if spec.state != crate::model::SpaceState::Active {
        return Ok(());
    }
    for file in space_dir::sys_creds_files(root, space) {
        remember(&mut state.undo, &file)?;
    }
    write_sys_creds(root, record, space, &account.account.public)
}

/// What a re-issue step decided (its plan step's decision fields).
pub struct AccountReissue<'a> {
    pub space: &'a SpaceName,
    pub account: &'a str,
    pub spec: &'a SpaceSpec,
    pub revocations: &'a crate::trust::jwt::Revocations,
    pub rotate_signing: bool,
}

/// Re-sign the space's account JWT (same key) with the spec's limits and state, its
/// revocations, and a new signing key when the step rotates it.
pub fn reissue_account(
    ctx: &Context,
    record: &BrokerRecord,
    state: &mut RunState,
    reissue: AccountReissue,
) -> Result<()> {
    let AccountReissue {
        space,
        account,
        spec,
        revocations,
        rotate_signing,
    } = reissue;
    let current = planned_record(ctx, space, account)?;
    let updated = mint::reissue(record, &current, space, spec, revocations, rotate_signing)
        .map_err(Error::other)?;
    write_record(ctx, state, space, &updated)?;
    // Revocations the plan added (users of members whose grant changed) join the ledger, the
    // record every later plan compares the JWT with. Only ever added.
    // Remembered like the record: a reload that does not confirm puts both back.
    let mut ledger = crate::store::users::load(ctx.root, space, account)?;
    let before = ledger.revoked.len();
    for (key, at) in revocations {
        ledger.revoked.entry(key.clone()).or_insert(*at);
    }
    if ledger.revoked.len() != before {
        super::undo::remember(
            &mut state.undo,
            &ctx.root
                .space_file(space, crate::store::paths::SpaceFile::Users),
        )?;
        crate::store::users::save(ctx.root, space, &ledger)?;
    }
    fault::point(Point::AfterRecordWritten);
    Ok(())
}

/// What a [`Step::WriteSideAccounts`](crate::plan::Step::WriteSideAccounts) asks.
pub struct SideAccountsWrite<'a> {
    pub space: &'a SpaceName,
    /// The account the plan saw.
    pub account: &'a str,
    pub suspended: bool,
    pub write: &'a [crate::plan::sides::SideWrite],
    pub drop: &'a [crate::space::side_accounts::SideRole],
    pub retired: &'a [(String, i64)],
}

/// Write the space's side accounts into its record ([`mint::side_accounts`]), and record the
/// revocations the step adds in its ledger (remembered like the record: a reload that does not
/// confirm puts both back). The ledger is written first: after a crash between the two, the
/// re-plan sees the users revoked and the record without them, and writes the record again;
/// the other order would leave a record that already refuses them and a ledger that does not
/// say so, which no plan would finish.
pub fn write_side_accounts(
    ctx: &Context,
    record: &BrokerRecord,
    state: &mut RunState,
    w: SideAccountsWrite,
) -> Result<()> {
    let current = planned_record(ctx, w.space, w.account)?;
    let updated = mint::side_accounts(record, &current, w.suspended, w.write, w.drop)
        .map_err(Error::other)?;
    let added: Vec<&(String, i64)> = w
        .write
        .iter()
        .flat_map(|s| &s.revoking)
        .chain(w.retired)
        .collect();
    if !added.is_empty() {
        let account = &updated.account.public;
        let mut ledger = crate::store::users::load(ctx.root, w.space, account)?;
        let before = ledger.revoked.clone();
        for (key, at) in added {
            ledger.revoked.entry(key.clone()).or_insert(*at);
        }
        if ledger.revoked != before {
            super::undo::remember(
                &mut state.undo,
                &ctx.root.space_file(w.space, SpaceFile::Users),
            )?;
            crate::store::users::save(ctx.root, w.space, &ledger)?;
        }
    }
    write_record(ctx, state, w.space, &updated)?;
    fault::point(Point::AfterRecordWritten);
    Ok(())
}

/// Mark the space's record archived (when and by whom), or clear the mark: the promotion
/// that follows renders the inventory, which leaves an archived account out.
pub fn record_archive(
    ctx: &Context,
    state: &mut RunState,
    space: &SpaceName,
    account: &str,
    archived: bool,
) -> Result<()> {
    let mut updated = planned_record(ctx, space, account)?;
    updated.archived = match (archived, updated.archived.take()) {
        (false, _) => None,
        (true, Some(was)) => Some(was),
        (true, None) => Some(archival_now()),
    };
    write_record(ctx, state, space, &updated)?;
    fault::point(Point::AfterRecordWritten);
    Ok(())
}

/// An archive made now by this operator.
fn archival_now() -> crate::model::Archival {
    let actor = crate::operator::actor();
    crate::model::Archival {
        at: crate::model::stamp(crate::clock::now()),
        by: format!("{}@{}", actor.user, actor.host),
    }
}

/// The space's record as the plan saw it: refused when it holds another account now.
fn planned_record(
    ctx: &Context,
    space: &SpaceName,
    account: &str,
) -> Result<account_record::AccountRecord> {
    let current = account_record::load(ctx.root, space)?;
    if current.account.public != account {
        return Err(Error::refused(
            Diagnostic::new(format!(
                "the record of {} changed under the lock (now account {}, the plan saw {account}).",
                space.quoted(),
                current.account.public
            ))
            .next("find who changed .cotal/auth/ during the apply, then run `cotal plan`"),
        ));
    }
    Ok(current)
}

/// Write a record this apply changed, remembered for the rollback and expected by the
/// promotion's inventory check.
fn write_record(
    ctx: &Context,
    state: &mut RunState,
    space: &SpaceName,
    updated: &account_record::AccountRecord,
) -> Result<()> {
    remember(&mut state.undo, &ctx.root.account_record(space))?;
    account_record::save(ctx.root, updated)?;
    state
        .expected
        .insert(space.clone(), super::Expected::of(updated));
    Ok(())
}

/// Write the space's missing $SYS creds.
pub fn heal_sys_creds(
    ctx: &Context,
    record: &BrokerRecord,
    state: &mut RunState,
    space: &SpaceName,
) -> Result<()> {
    let current = account_record::load(ctx.root, space)?;
    for file in space_dir::sys_creds_files(ctx.root, space) {
        remember(&mut state.undo, &file)?;
    }
    write_sys_creds(ctx.root, record, space, &current.account.public)
}

/// Record the space's protection beside its material.
pub fn record_protection(
    ctx: &Context,
    state: &mut RunState,
    space: &SpaceName,
    protect: bool,
) -> Result<()> {
    let mut lifecycle = lifecycle_of(ctx, state, space)?;
    lifecycle.protect = protect;
    space_dir::save_lifecycle(ctx.root, space, &lifecycle)
}

/// The space's lifecycle record as it stands for its current account (a fresh one when there
/// is none, or it names another account), remembered for the undo of the step about to
/// change it.
fn lifecycle_of(
    ctx: &Context,
    state: &mut RunState,
    space: &SpaceName,
) -> Result<space_dir::Lifecycle> {
    let root = ctx.root;
    let current = account_record::load(root, space)?;
    remember(
        &mut state.undo,
        &root.space_file(space, SpaceFile::Lifecycle),
    )?;
    // An unreadable record is written whole again, as the plan planned from it (protected,
    // its suspension unrecorded).
    Ok(match space_dir::load_lifecycle(root, space) {
        Ok(Some(l)) if l.account == current.account.public => l,
        Ok(_) => space_dir::Lifecycle {
            account: current.account.public,
            protect: false,
            suspension: None,
        },
        Err(_) => space_dir::Lifecycle {
            account: current.account.public,
            protect: true,
            suspension: None,
        },
    })
}

/// Record a suspension (why, now, by whom) in the space's lifecycle record, or clear it. A
/// suspension already recorded keeps its time and operator when only its reason changes; one
/// made before cotal recorded suspensions (`backfill`) is recorded with both `unknown`.
pub fn record_suspension(
    ctx: &Context,
    state: &mut RunState,
    space: &SpaceName,
    (suspended, backfill): (bool, bool),
    reason: Option<&str>,
    renew: bool,
) -> Result<()> {
    let mut lifecycle = lifecycle_of(ctx, state, space)?;
    let earlier = lifecycle.suspension.take().filter(|_| !renew);
    lifecycle.suspension = match (suspended, earlier) {
        (false, _) => None,
        (true, Some(was)) => Some(space_dir::Suspension {
            reason: reason.map(str::to_string),
            ..was
        }),
        (true, None) if backfill => Some(space_dir::Suspension {
            reason: reason.map(str::to_string),
            at: "unknown".into(),
            by: "unknown".into(),
        }),
        (true, None) => {
            let actor = crate::operator::actor();
            Some(space_dir::Suspension {
                reason: reason.map(str::to_string),
                at: crate::model::stamp(crate::clock::now()),
                by: format!("{}@{}", actor.user, actor.host),
            })
        }
    };
    space_dir::save_lifecycle(ctx.root, space, &lifecycle)
}

/// Create the space's missing streams and buckets under an ephemeral provisioner. Returns the
/// revision at which it seeded the channel registry's defaults, if it did.
pub fn provision(ctx: &Context, broker: &mut dyn Broker, space: &SpaceName) -> Result<Option<u64>> {
    provision_many(ctx, broker, std::slice::from_ref(space))
        .pop()
        .expect("one result per space")
}

/// Provision `spaces` concurrently (a boot or a bulk add provisions thousands); each result in
/// the order given. Provisioning is idempotent, so work done for a space after another failed
/// is simply found done by the next apply.
pub fn provision_many(
    ctx: &Context,
    broker: &mut dyn Broker,
    spaces: &[SpaceName],
) -> Vec<Result<Option<u64>>> {
    let creds: Vec<Result<(String, Option<u64>)>> = spaces
        .iter()
        .map(|space| {
            let current = account_record::load(ctx.root, space)?;
            let quota = crate::trust::jwt::decode_verified::<crate::trust::jwt::AccountNats>(
                &current.account.jwt,
            )
            .map_err(|e| Error::other(format!("the account JWT of {}: {e}", space.quoted())))?
            .nats
            .limits
            .storage_quota();
            let creds = space_user(
                ctx.root,
                space,
                &current.account.public,
                "cotal-provisioner",
                permissions::provisioner(),
            )?
            .ok_or_else(|| Error::other(format!("the record of {} disappeared", space.quoted())))?;
            let unserved = unserved_streams(ctx, space, &current.account.public)?;
            if !unserved.is_empty() {
                broker.await_streams(space, &creds, &current.account.public, &unserved)?;
            }
            Ok((creds, quota))
        })
        .collect();
    let work: Vec<crate::broker::Provisioning> = spaces
        .iter()
        .zip(&creds)
        .filter_map(|(space, c)| {
            c.as_ref()
                .ok()
                .map(|(creds, quota)| crate::broker::Provisioning {
                    space: space.clone(),
                    quota: *quota,
                    creds: creds.clone(),
                })
        })
        .collect();
    let mut done = broker.provision_many(&work).into_iter();
    spaces
        .iter()
        .zip(creds)
        .map(|(space, c)| {
            c?;
            let done = done.next().expect("one result per space provisioned")?;
            tracing::info!(space = %space, work = ?done.work, "provisioned");
            Ok(done.registry_seed)
        })
        .collect()
}

/// The streams the store folders hold for `account` when the observation saw none of them
/// served: an account loaded by a reload (brought back from its archive) has them recovered
/// only once nats-server first uses it, and nothing is provisioned before they are served
/// again (a stream created first would be an empty one in the place of the data). Empty for a
/// space whose folders hold nothing (a new one) or whose streams were seen served.
fn unserved_streams(ctx: &Context, space: &SpaceName, account: &str) -> Result<Vec<String>> {
    let seen_served = ctx.observed.inventory.spaces.get(space).is_some_and(|s| {
        s.account_pub == account
            && s.usage.source == UsageSource::Live
            && !s.usage.streams.is_empty()
    });
    if seen_served {
        return Ok(Vec::new());
    }
    let mut unserved = std::collections::BTreeSet::new();
    for dir in ctx.observed.store_dirs() {
        unserved.extend(
            jetstream_dir::streams(&dir, account)?
                .into_iter()
                .map(|s| s.name),
        );
    }
    Ok(unserved.into_iter().collect())
}

/// Delete a removed space's local material; failures are reported, never thrown (they come
/// after the removal's commit point).
pub fn reap(ctx: &Context, running: bool, outcome: &mut Outcome, space: &SpaceName, account: &str) {
    let root = ctx.root;
    let mut removed = Vec::new();
    let mut failures = Vec::new();
    let mut failed = |part: &'static str, e: Error| {
        failures.push(ReapFailure {
            space: space.clone(),
            part,
            error: e.to_string(),
        })
    };
    // The account's (now empty) folder in the store: its streams were deleted through the
    // broker (running) or with the folder itself (stopped).
    if running {
        for dir in ctx.observed.store_dirs() {
            match jetstream_dir::remove(&dir, account) {
                Ok(true) => removed.push(format!(
                    "store folder {}",
                    dir.join("jetstream").join(account).display()
                )),
                Ok(false) => {}
                Err(e) => failed("store folder", e),
            }
        }
    }
    match account_record::remove_if_account(root, space, account) {
        Ok(true) => removed.push("account record".to_string()),
        Ok(false) => {}
        Err(e) => failed("account record", e),
    }
    fault::point(Point::MidReap);
    match space_dir::reap(root, space, account) {
        Ok(true) => removed.push("space folder".to_string()),
        Ok(false) => {}
        Err(e) => failed("space folder", e),
    }
    // The original's per-agent secrets of this space (seed 000 §2.2 step 7): its segment
    // only, never another's.
    match crate::store::atomic::remove_tree(&root.space_agent_creds(space)) {
        Ok(true) => removed.push("agent secrets".to_string()),
        Ok(false) => {}
        Err(e) => failed("agent secrets", e),
    }
    outcome.reap_failures.extend(failures);
    outcome.reaped.push((space.clone(), removed));
    fault::point(Point::AfterReap);
}

/// An ephemeral user of `space` named `name` with `permissions` (one bucket's writer), once its
/// record still holds the account the plan saw (`account` empty: a space this apply added, whose
/// record names the account).
fn bucket_writer(
    ctx: &Context,
    space: &SpaceName,
    account: &str,
    name: &str,
    permissions: crate::trust::jwt::Permissions,
) -> Result<String> {
    let current = account_record::load(ctx.root, space)?;
    if !account.is_empty() && current.account.public != account {
        return Err(Error::refused(
            Diagnostic::new(format!(
                "the record of {} changed under the lock (now account {}, the plan saw {account}).",
                space.quoted(),
                current.account.public
            ))
            .next("run `cotal plan`"),
        ));
    }
    space_user(ctx.root, space, &current.account.public, name, permissions)?
        .ok_or_else(|| Error::other(format!("the record of {} disappeared", space.quoted())))
}

/// Write a space's members' acl records (and their consumers) as an ephemeral user that may
/// touch only those.
pub fn write_acl(
    ctx: &Context,
    broker: &mut dyn Broker,
    space: &SpaceName,
    account: &str,
    writes: &[crate::space::channels::Write],
) -> Result<()> {
    let writer = bucket_writer(
        ctx,
        space,
        account,
        "cotal-acl",
        permissions::acl_keeper(&space.token()),
    )?;
    broker.write_acl(space, &writer, writes)?;
    tracing::info!(space = %space, records = writes.len(), "member acl records written");
    Ok(())
}

/// Write the space's channel registry, as an ephemeral user that may touch only its registry.
pub fn write_channels(
    ctx: &Context,
    broker: &mut dyn Broker,
    space: &SpaceName,
    account: &str,
    writes: &[crate::space::channels::Write],
) -> Result<Vec<crate::space::channels::Written>> {
    let writer = bucket_writer(
        ctx,
        space,
        account,
        "cotal-registry",
        permissions::registry(&space.token()),
    )?;
    let revisions = broker.write_channels(space, &writer, writes)?;
    tracing::info!(space = %space, keys = writes.len(), "channels written");
    Ok(revisions)
}
