//! The per-space diff of desired against observed: spaces to add, JWTs to re-issue (with the
//! fields that change and the state transition), protection to record, $SYS creds to heal and
//! streams to provision. Types only; the words are [`super::describe`]'s.

use super::removals::Removals;
use super::system::SystemReissue;
use super::{FieldChange, Transition};
use crate::desired::Desired;
use crate::model::{SpaceName, SpaceSpec, SpaceState, human_bytes};
use crate::observed::{Observed, ObservedSpace, RegistryState, UsageSource};
use crate::trust::jwt::AccountLimits;
use std::collections::{BTreeMap, BTreeSet};

/// A re-issue of a space's account JWT.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Reissue {
    /// A new signing key (`cotal rotate account`).
    pub rotate_signing: bool,
    /// Users of declared members the re-issue revokes (their grant changed, or the member is
    /// no longer declared), each at its issue time: added to the account's revocations and to
    /// its ledger.
    pub member_revocations: Vec<(String, i64)>,
    pub fields: Vec<FieldChange>,
    pub transition: Transition,
}

/// What changes, space by space.
#[derive(Debug, Clone, Default)]
pub struct Diff {
    pub adds: BTreeMap<SpaceName, SpaceSpec>,
    pub reissues: BTreeMap<SpaceName, Reissue>,
    pub protections: BTreeMap<SpaceName, bool>,
    /// Existing spaces whose lifecycle record's suspension is written (suspended, with the
    /// declared reason) or cleared (resumed).
    pub suspensions: BTreeMap<SpaceName, SuspensionChange>,
    /// Existing spaces archived (`true`: their accounts leave the config) or brought back
    /// (`false`: loaded again) by this plan.
    pub archivals: BTreeMap<SpaceName, bool>,
    /// Existing spaces whose $SYS creds are (re)minted, and why.
    pub sys_creds: BTreeMap<SpaceName, String>,
    /// Existing spaces' provisioning work (missing or drifted streams), broker running.
    pub provisions: BTreeMap<SpaceName, Vec<String>>,
    /// Channel registry writes per space (existing spaces whose registry was read, and spaces
    /// this plan adds while the broker runs); empty diffs are left out.
    pub channels: BTreeMap<SpaceName, crate::space::channels::Diff>,
    /// Members' changes per space (acl writes after the reload, revocations in the re-issue);
    /// empty plans are left out.
    pub members: BTreeMap<SpaceName, crate::space::members::Plan>,
    /// Existing spaces emptied by this plan (requested, or an interrupted purge finished): their
    /// default delivery class and declared channels are written again after it.
    pub purges: super::purges::Purges,
    /// Side accounts minted, re-issued or dropped per space (added spaces included); empty
    /// changes are left out.
    pub sides: BTreeMap<SpaceName, super::sides::SideChanges>,
}

impl Diff {
    /// Existing spaces with any change, in name order.
    pub fn changed(&self) -> BTreeSet<&SpaceName> {
        self.reissues
            .keys()
            .chain(self.protections.keys())
            .chain(self.suspensions.keys())
            .chain(self.archivals.keys())
            .chain(self.sys_creds.keys())
            .chain(self.provisions.keys())
            .chain(self.purges.keys())
            .chain(
                self.channels
                    .iter()
                    .filter(|(n, d)| !d.writes.is_empty() && !self.adds.contains_key(*n))
                    .map(|(n, _)| n),
            )
            .chain(self.members.keys().filter(|n| !self.adds.contains_key(*n)))
            .chain(self.sides.keys().filter(|n| !self.adds.contains_key(*n)))
            .collect()
    }
}

/// A change of the suspension a space's lifecycle record holds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SuspensionChange {
    /// Record it suspended (with `reason`), or clear the record (resumed).
    pub suspended: bool,
    pub reason: Option<String>,
    /// Suspended before cotal recorded suspensions: the time and operator are unknown.
    pub backfill: bool,
    /// Brought back from its archive suspended: a new suspension, recorded now.
    pub renew: bool,
}

/// What the lifecycle record of an existing space must say of its suspension, when it does
/// not say it yet: suspended with the declared reason, or nothing (resumed).
fn suspension_change(
    desired: &Desired,
    name: &SpaceName,
    spec: &crate::model::SpaceSpec,
    space: &crate::observed::ObservedSpace,
) -> Option<SuspensionChange> {
    let reason = desired.suspend_reason(name).cloned();
    let suspended = |backfill| {
        Some(SuspensionChange {
            suspended: true,
            reason: reason.clone(),
            backfill,
            renew: false,
        })
    };
    // Back from its archive: what was recorded before the archive is not this suspension.
    if space.archived.is_some() {
        return (spec.state == SpaceState::Suspended || space.suspension_recorded.is_some()).then(
            || SuspensionChange {
                suspended: spec.state == SpaceState::Suspended,
                reason: reason
                    .clone()
                    .filter(|_| spec.state == SpaceState::Suspended),
                backfill: false,
                renew: spec.state == SpaceState::Suspended,
            },
        );
    }
    match (
        &space.suspension_recorded,
        spec.state == SpaceState::Suspended,
    ) {
        // Already suspended by its JWT, never recorded: an apply of an older cotal did it.
        (None, true) => suspended(space.limits.is_suspended()),
        (Some(r), true) if r.reason != reason => suspended(false),
        (Some(_), false) => Some(SuspensionChange {
            suspended: false,
            reason: None,
            backfill: false,
            renew: false,
        }),
        _ => None,
    }
}

/// What every space's comparison shares.
struct Compare<'a> {
    desired: &'a Desired,
    observed: &'a Observed,
    intent: &'a super::Intent,
    system: Option<&'a SystemReissue>,
    keys: super::sides::Keys<'a>,
    running: bool,
    no_members: crate::desired::Members,
}

impl Compare<'_> {
    /// The members `name` declares (none: an empty set).
    fn members_of(&self, name: &SpaceName) -> &crate::desired::Members {
        self.desired.members_of(name).unwrap_or(&self.no_members)
    }
}

/// Compare every desired space with what is observed of it.
pub fn diff(
    desired: &Desired,
    observed: &Observed,
    intent: &super::Intent,
    removals: &Removals,
    system: Option<&SystemReissue>,
    purges: super::purges::Purges,
) -> Diff {
    let inv = &observed.inventory;
    let mut out = Diff {
        purges,
        ..Diff::default()
    };
    let system_pub = match &observed.broker {
        crate::observed::BrokerRecordState::Valid(t) => t.sys_pub.as_str(),
        _ => "",
    };
    let cmp = Compare {
        desired,
        observed,
        intent,
        system,
        keys: super::sides::keys(observed, system_pub, system),
        running: observed.is_running(),
        no_members: BTreeMap::new(),
    };
    for (name, spec) in desired.specs() {
        match inv.spaces.get(name) {
            Some(space) if !removals.leaving(inv, name) => {
                applied_space(&cmp, &mut out, name, spec, space)
            }
            _ => added_space(&cmp, &mut out, name, spec),
        }
    }
    out
}

/// A space to add: its record, its registry's and acl bucket's first writes (the broker
/// running, the space active), its side accounts.
fn added_space(cmp: &Compare, out: &mut Diff, name: &SpaceName, spec: &SpaceSpec) {
    out.adds.insert(name.clone(), *spec);
    let serving = cmp.running && spec.state == SpaceState::Active;
    // Its registry is created by provisioning, just before the writes.
    if serving && let Some(declared) = cmp.desired.channels_of(name) {
        let d = crate::space::channels::diff(declared, None);
        if !d.writes.is_empty() {
            out.channels.insert(name.clone(), d);
        }
    }
    let sides = super::sides::added(cmp.members_of(name), &cmp.keys);
    if spec.state != SpaceState::Archived && !sides.is_empty() {
        out.sides.insert(name.clone(), sides);
    }
    // Its acl bucket too: every declared member's record is a create.
    if serving && let Some(declared) = cmp.desired.members_of(name) {
        let p = crate::space::members::plan(declared, Some(&Default::default()), &[]);
        if !p.is_empty() {
            out.members.insert(name.clone(), p);
        }
    }
}

/// A space that is applied and stays: what of it changes.
fn applied_space(
    cmp: &Compare,
    out: &mut Diff,
    name: &SpaceName,
    spec: &SpaceSpec,
    space: &ObservedSpace,
) {
    let archive = spec.state == SpaceState::Archived;
    let archived = space.archived.is_some();
    if archive != archived {
        out.archivals.insert(name.clone(), archive);
    }
    if archive {
        // Archived: its JWT, suspension record, $SYS creds, streams and channels stay as
        // they are until it is brought back; only its protection is recorded.
        if spec.protect != space.protect_recorded {
            out.protections.insert(name.clone(), spec.protect);
        }
        return;
    }
    let members = members_plan(cmp, out, name, spec, space);
    // Users of each member's account this plan revokes (their grant changed, or the member
    // is no longer declared and its account is dropped).
    let mut side_revoking: BTreeMap<String, Vec<(String, i64)>> = BTreeMap::new();
    for (p, _, keys) in &members.changes {
        if !keys.is_empty() {
            side_revoking.insert(p.clone(), keys.clone());
        }
    }
    if !members.is_empty() {
        out.members.insert(name.clone(), members);
    }
    let expected = AccountLimits::for_space(spec);
    let rotating = cmp.intent.rotate.accounts.contains(name);
    if let Some(reissue) = reissue(name, space, &expected, rotating) {
        out.reissues.insert(name.clone(), reissue);
    }
    let sides = super::sides::changes(
        &super::sides::Need {
            token: &name.token(),
            space,
            suspended: spec.state == SpaceState::Suspended,
            limits: &expected,
            members: cmp.members_of(name),
            rotating,
            revoking: &side_revoking,
        },
        &cmp.keys,
    );
    if !sides.is_empty() {
        out.sides.insert(name.clone(), sides);
    }
    if spec.protect != space.protect_recorded {
        out.protections.insert(name.clone(), spec.protect);
    }
    if let Some(change) = suspension_change(cmp.desired, name, spec, space) {
        out.suspensions.insert(name.clone(), change);
    }
    // Healing: $SYS creds to (re)mint, and (broker running) missing or drifted streams.
    // Provisioning runs after the reload, so a space resumed by this plan is loaded.
    if let Some(why) =
        super::system::creds_reason(cmp.desired, cmp.observed, name, space, cmp.system)
    {
        out.sys_creds.insert(name.clone(), why);
    }
    provisions(cmp, out, name, spec, space);
    channels(cmp, out, name, spec, space);
}

/// Members: their acl records (only of a space that stays active, against the bucket as read;
/// a purge empties it) and the users a changed grant revokes.
fn members_plan(
    cmp: &Compare,
    out: &Diff,
    name: &SpaceName,
    spec: &SpaceSpec,
    space: &ObservedSpace,
) -> crate::space::members::Plan {
    let declared = cmp.desired.members_of(name).cloned().unwrap_or_default();
    let serving = spec.state == SpaceState::Active && !space.limits.is_suspended();
    let empty = crate::space::channels::Registry::new();
    let acl = match &space.acl {
        _ if !serving => None,
        _ if cmp.running && out.purges.contains_key(name) => Some(&empty),
        RegistryState::Read(r) => Some(r),
        RegistryState::Missing if cmp.running => Some(&empty),
        _ => None,
    };
    // A member's users live in its own account; one minted in the space's account
    // (before members had accounts of their own) is revoked there, whatever its grant.
    let in_sides: Vec<crate::space::members::MemberUser> = space
        .member_users
        .iter()
        .filter(|u| u.account.is_some())
        .cloned()
        .collect();
    crate::space::members::plan(&declared, acl, &in_sides)
}

/// The re-issue of an applied space's JWT, when its limits, exports or revocations are not
/// what the plan leaves (`expected`), or its signing key rotates.
fn reissue(
    name: &SpaceName,
    space: &ObservedSpace,
    expected: &AccountLimits,
    rotating: bool,
) -> Option<Reissue> {
    // Members' users minted in the space's account, before members had accounts of their own.
    let legacy: Vec<crate::observed::LedgerUser> = space
        .member_users
        .iter()
        .filter(|u| u.account.is_none())
        .map(|u| crate::observed::LedgerUser {
            name: u.principal.clone(),
            key: u.key.clone(),
            issued_at: u.issued_at,
        })
        .collect();
    let member_revocations: Vec<(String, i64)> = legacy
        .iter()
        .chain(&space.retired_users)
        .map(|u| (u.key.clone(), u.issued_at))
        .collect();
    let exports = crate::space::side_accounts::space_exports(&name.token());
    let exporting = if space.kept_claims.is_empty() {
        space.exports != exports
    } else {
        !exports.iter().all(|e| space.exports.contains(e))
    };
    let revoking = space.revoked != space.revocations || !member_revocations.is_empty();
    if !(*expected != space.limits || revoking || rotating || exporting) {
        return None;
    }
    let mut fields = if *expected != space.limits {
        field_changes(&space.limits, expected)
    } else {
        Vec::new()
    };
    if exporting {
        fields.push(FieldChange {
            field: "exports".into(),
            from: if space.exports.is_empty() {
                "none".into()
            } else {
                format!("{} subject(s)", space.exports.len())
            },
            to: "what its side accounts import (its members' posts, DMs, presence and reads, the live copy of its chat and DMs, its own connections)".into(),
        });
    }
    if space.revoked != space.revocations {
        fields.push(revocation_change(space));
    }
    if !legacy.is_empty() {
        fields.push(FieldChange {
            field: "revocations".into(),
            from: String::new(),
            to: format!(
                "+{} user(s) of declared members minted in the space's account ({}): their creds stop working at this apply; each member's users now live in an account of its own: mint new creds with `cotal creds {} --member OWNER.ACTOR` and connect with the inbox prefix it prints",
                legacy.len(),
                user_names(&legacy),
                name.as_str()
            ),
        });
    }
    if !space.retired_users.is_empty() {
        fields.push(FieldChange {
            field: "revocations".into(),
            from: String::new(),
            to: format!(
                "+{} user(s) of the retired `member` profile ({}): their creds stop working at this apply; declare each as a member in cotal.toml and mint it new creds with `cotal creds {} --member OWNER.ACTOR`, or `--profile admin` for the space's owner",
                space.retired_users.len(),
                user_names(&space.retired_users),
                name.as_str()
            ),
        });
    }
    if rotating {
        fields.push(FieldChange {
            field: "signing key".into(),
            from: short_key(&space.signing_pub),
            to: "a new key (users signed by the old one are refused)".into(),
        });
    }
    Some(Reissue {
        rotate_signing: rotating,
        member_revocations,
        fields,
        transition: match (space.limits.is_suspended(), expected.is_suspended()) {
            (false, true) => Transition::Suspend,
            (true, false) => Transition::Resume,
            _ if *expected == space.limits => Transition::Revoke,
            _ => Transition::Limits,
        },
    })
}

/// The provisioning an applied active space needs with the broker running: its streams back
/// from disk (not loaded, or loaded suspended and unused since), or what is missing or drifted.
fn provisions(
    cmp: &Compare,
    out: &mut Diff,
    name: &SpaceName,
    spec: &SpaceSpec,
    space: &ObservedSpace,
) {
    if !cmp.running || spec.state != SpaceState::Active {
        return;
    }
    // Not loaded, or loaded suspended and not in use since: its streams are on disk, and
    // come back when the provisioning uses the account.
    let unused = space.limits.is_suspended() && space.usage.source == UsageSource::Store;
    if space.archived.is_some() || unused {
        // Not loaded, so not observed: its streams come back with the reload that loads
        // it, and the provisioning after it creates whatever is missing.
        out.provisions.insert(
            name.clone(),
            vec!["its streams and buckets come back from disk with the reload; any missing is created".into()],
        );
        return;
    }
    let quota = crate::space::streams::per_replica(
        spec.limits.max_storage.map(|b| b.0),
        cmp.desired.topology.replicas,
    );
    let mut work = provisioning_work(name, space, quota);
    if out.purges.contains_key(name) && work.is_empty() {
        work.push("seed the default delivery class again".into());
    }
    if !work.is_empty() {
        out.provisions.insert(name.clone(), work);
    }
}

/// Channels: only of a space that stays active, against the registry as read.
fn channels(
    cmp: &Compare,
    out: &mut Diff,
    name: &SpaceName,
    spec: &SpaceSpec,
    space: &ObservedSpace,
) {
    if spec.state != SpaceState::Active || space.limits.is_suspended() {
        return;
    }
    let purged = out.purges.contains_key(name);
    let declared = cmp.desired.channels_of(name).cloned().unwrap_or_default();
    let d = match &space.registry {
        // The purge empties the registry: every declared channel is written again.
        _ if purged && cmp.running => Some(crate::space::channels::diff(&declared, None)),
        RegistryState::Read(registry) => {
            Some(crate::space::channels::diff(&declared, Some(registry)))
        }
        RegistryState::Missing => Some(crate::space::channels::diff(&declared, None)),
        RegistryState::Unknown | RegistryState::Failed(_) => None,
    };
    if let Some(d) = d
        && (!d.writes.is_empty() || !d.kept.is_empty())
    {
        out.channels.insert(name.clone(), d);
    }
}

/// Whether an archived space's streams still run in the broker although its account is out
/// of the config: a return from the archive that a client of the space reached (nats-server
/// recovers an account's streams when it first uses it) and that was then rolled back.
/// nats-server keeps such streams half-alive until it restarts: loaded again, the account's
/// streams answer their API but not a direct get (a KV read). Measured on 2.15.1: a reload
/// that loads it again with JetStream off does not stop them (the account is not in use
/// then); a restart does.
pub fn still_running(observed: &Observed, space: &ObservedSpace) -> bool {
    space.archived.is_some()
        && !observed.loads(&space.account_pub)
        && space.usage.source == UsageSource::Live
        && !space.usage.streams.is_empty()
}

/// What provisioning must do for an existing space, from live figures: missing streams and
/// drifted configs nats-server can update in place, and the artifact store's cap when the
/// desired storage quota moves it (`quota`: its share per replica, [`crate::space::streams::per_replica`];
/// the provisioning after the reload reads the new quota from the record). Empty when nothing
/// is known (usage not live).
pub fn provisioning_work(
    name: &SpaceName,
    space: &ObservedSpace,
    quota: Option<u64>,
) -> Vec<String> {
    if space.usage.source != UsageSource::Live {
        return Vec::new();
    }
    let missing = crate::space::streams::missing(
        &name.token(),
        space.usage.streams.iter().map(|s| s.name.as_str()),
    );
    let mut work = Vec::new();
    if missing.len() == crate::space::streams::count() {
        work.push(format!(
            "create all {} streams and buckets, seed the default delivery class",
            missing.len()
        ));
    } else if !missing.is_empty() {
        work.push(format!("create missing {}", missing.join(", ")));
    }
    for (stream, fields) in &space.stream_drift {
        // Drift that cannot be updated in place is a warning of the plan, not a step.
        if fields.iter().all(|f| crate::space::streams::updatable(f)) {
            work.push(format!("update {stream} (drifted: {})", fields.join(", ")));
        }
    }
    let artifacts = crate::space::streams::artifact_stream(&name.token());
    let cap = crate::space::streams::artifact_cap(quota) as i64;
    if let Some(have) = space.artifact_max_bytes
        && have != cap
        && !space.stream_drift.iter().any(|(s, _)| *s == artifacts)
    {
        work.push(format!(
            "update {artifacts} (max_bytes {} for the storage quota)",
            crate::model::human_bytes(cap as u64)
        ));
    }
    work
}

/// The change of a space's revocations, counted (keys are not for people; `cotal creds list`
/// names them).
/// A public key shortened for people: its first 12 characters.
fn short_key(key: &str) -> String {
    format!("{}…", &key[..key.len().min(12)])
}

fn revocation_change(space: &ObservedSpace) -> FieldChange {
    let new = space
        .revoked
        .iter()
        .filter(|(k, ts)| space.revocations.get(*k) != Some(ts))
        .count();
    FieldChange {
        field: "revoked users".into(),
        from: space.revocations.len().to_string(),
        to: if new > 0 {
            format!("{} ({new} newly revoked)", space.revoked.len())
        } else {
            space.revoked.len().to_string()
        },
    }
}

fn count(v: i64) -> String {
    if v < 0 {
        "unlimited".into()
    } else {
        v.to_string()
    }
}

fn bytes(v: i64) -> String {
    if v < 0 {
        "unlimited".into()
    } else {
        human_bytes(v as u64)
    }
}

/// The fields that differ between the observed account limits and the expected ones.
pub fn field_changes(observed: &AccountLimits, expected: &AccountLimits) -> Vec<FieldChange> {
    let state = |l: &AccountLimits| {
        if l.is_suspended() {
            SpaceState::Suspended
        } else {
            SpaceState::Active
        }
        .to_string()
    };
    let mut out = Vec::new();
    let mut push = |field: &str, from: String, to: String| {
        if from != to {
            out.push(FieldChange {
                field: field.into(),
                from,
                to,
            });
        }
    };
    push("state", state(observed), state(expected));
    if !observed.is_suspended() && !expected.is_suspended() {
        push(
            "max_connections",
            count(observed.conn),
            count(expected.conn),
        );
    }
    push(
        "max_storage",
        bytes(observed.disk_storage),
        bytes(expected.disk_storage),
    );
    push(
        "max_memory",
        bytes(observed.mem_storage),
        bytes(expected.mem_storage),
    );
    push(
        "max_streams",
        count(observed.streams),
        count(expected.streams),
    );
    push(
        "max_consumers",
        count(observed.consumer),
        count(expected.consumer),
    );
    push(
        "max_payload",
        bytes(observed.payload),
        bytes(expected.payload),
    );
    if out.is_empty() {
        // Something cotal.toml does not expose differs (a hand-made JWT): re-issue as the file says.
        out.push(FieldChange {
            field: "account limits".into(),
            from: "differ from what cotal issues".into(),
            to: "as cotal.toml says".into(),
        });
    }
    out
}

/// The names of `users`, sorted and deduplicated, comma-separated (a user minted twice under
/// one name is named once).
fn user_names(users: &[crate::observed::LedgerUser]) -> String {
    let names: std::collections::BTreeSet<&str> = users.iter().map(|u| u.name.as_str()).collect();
    names.into_iter().collect::<Vec<_>>().join(", ")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::Limits;

    fn limits(state: SpaceState, max_connections: Option<u64>) -> AccountLimits {
        AccountLimits::for_space(&SpaceSpec {
            state,
            protect: false,
            limits: Limits {
                max_connections,
                ..Limits::default()
            },
        })
    }

    #[test]
    fn a_reissue_carries_its_state_transition() {
        use crate::testing::{name, observed, space};
        let active = SpaceSpec::default();
        let suspended = SpaceSpec {
            state: SpaceState::Suspended,
            ..active
        };
        let o = observed(&[
            ("a", space("AA", &active)),
            ("s", space("AS", &suspended)),
            ("l", space("AL", &active)),
        ]);
        let desired = crate::desired::parse(
            "version = 1\n[spaces.a]\nstate = \"suspended\"\n[spaces.s]\n[spaces.l.limits]\nmax_connections = 9\n",
            "f",
        )
        .unwrap();
        let d = diff(
            &desired,
            &o,
            &Default::default(),
            &Removals::default(),
            None,
            Default::default(),
        );
        assert_eq!(d.reissues[&name("a")].transition, Transition::Suspend);
        assert_eq!(d.reissues[&name("s")].transition, Transition::Resume);
        assert_eq!(d.reissues[&name("l")].transition, Transition::Limits);
        assert!(d.adds.is_empty());
    }

    #[test]
    fn a_new_storage_quota_moves_the_artifact_store_cap() {
        use crate::testing::{name, space};
        let mut s = space("AQ", &SpaceSpec::default());
        s.usage.source = UsageSource::Live;
        s.usage.streams = crate::space::streams::expected(&name("q").token(), Some(32 << 20))
            .iter()
            .map(|e| crate::observed::StreamUsage {
                name: e.stream_name(),
                messages: Some(0),
                bytes: 0,
            })
            .collect();
        s.artifact_max_bytes = Some(crate::space::streams::artifact_cap(Some(32 << 20)) as i64);
        assert!(provisioning_work(&name("q"), &s, Some(32 << 20)).is_empty());
        let work = provisioning_work(&name("q"), &s, Some(64 << 20));
        assert_eq!(
            work,
            vec!["update OBJ_cotal_artifacts_q (max_bytes 31.5 MiB for the storage quota)"]
        );
        // Already drifted against the recorded quota: one update, not two.
        s.stream_drift = vec![("OBJ_cotal_artifacts_q".into(), vec!["max_bytes".into()])];
        assert_eq!(provisioning_work(&name("q"), &s, Some(64 << 20)).len(), 1);
        // Not live: nothing is known, nothing is planned.
        s.usage.source = UsageSource::Store;
        assert!(provisioning_work(&name("q"), &s, Some(64 << 20)).is_empty());
    }

    #[test]
    fn a_state_change_names_the_state_and_not_the_connection_limit() {
        let fields = field_changes(
            &limits(SpaceState::Active, Some(5)),
            &limits(SpaceState::Suspended, Some(5)),
        );
        assert_eq!(
            fields,
            vec![FieldChange {
                field: "state".into(),
                from: "active".into(),
                to: "suspended".into()
            }]
        );
        let fields = field_changes(
            &limits(SpaceState::Active, None),
            &limits(SpaceState::Active, Some(7)),
        );
        assert_eq!(fields[0].field, "max_connections");
        assert_eq!(
            (fields[0].from.as_str(), fields[0].to.as_str()),
            ("unlimited", "7")
        );
    }

    #[test]
    fn a_recorded_revocation_the_jwt_lacks_is_a_revoke() {
        use crate::testing::{name, observed, space};
        let active = SpaceSpec::default();
        let mut revoking = space("AR", &active);
        revoking.revoked.insert("UOLD".into(), 10);
        revoking.revoked.insert("UNEW".into(), 20);
        revoking.revocations.insert("UOLD".into(), 10);
        let mut loaded = space("AL", &active);
        loaded.revoked.insert("UOLD".into(), 10);
        loaded.revocations.insert("UOLD".into(), 10);
        let o = observed(&[("r", revoking), ("l", loaded)]);
        let desired = crate::desired::parse("version = 1\n[spaces.r]\n[spaces.l]\n", "f").unwrap();
        let d = diff(
            &desired,
            &o,
            &Default::default(),
            &Removals::default(),
            None,
            Default::default(),
        );
        assert!(
            !d.reissues.contains_key(&name("l")),
            "loaded revocations are no change"
        );
        let r = &d.reissues[&name("r")];
        assert_eq!(r.transition, Transition::Revoke);
        assert_eq!(
            r.fields,
            vec![FieldChange {
                field: "revoked users".into(),
                from: "1".into(),
                to: "2 (1 newly revoked)".into()
            }]
        );
    }
}
