//! The planner: `(desired, observed) -> Plan`, pure.
//!
//! Order of steps (DESIGN.md section 6): finish an open journal; delete the streams of removed
//! spaces (each its commit point); write the records of added and changed spaces; one render,
//! promotion and reload for the whole plan; reap removed spaces. Guards run first and refuse
//! with the tenants and blast radius named and the next step said.

use super::blast::{self, Blast};
use super::{Action, ConfigChange, FieldChange, Pins, Plan, SpaceChange, Step, Summary, q};
use crate::desired::Desired;
use crate::digest;
use crate::error::Error;
use crate::jwt::AccountLimits;
use crate::model::{SpaceName, SpaceSpec, SpaceState, human_bytes};
use crate::observed::{
    BrokerProcess, BrokerRecordState, BrokerTrust, GenerationState, Inventory, JournalState,
    Observed,
};
use crate::render::{self, Node, Preload, Token};
use std::collections::{BTreeMap, BTreeSet};

/// The broker's nodes, rendered from the same inventory. Today: one.
pub fn nodes(desired: &Desired, observed: &Observed) -> Vec<Node> {
    vec![Node {
        name: "local".into(),
        host: desired.broker.host.clone(),
        port: desired.broker.port,
        store_dir: observed.store_dir.clone(),
    }]
}

/// A removal the plan performs.
struct Removal {
    account: String,
    committed: bool,
    journaled: bool,
}

/// Compute the plan, or refuse.
pub fn compute(desired: &Desired, observed: &Observed) -> Result<Plan, Error> {
    let broker = guard_trust(observed)?;
    guard_liveness(observed)?;
    guard_journal(observed)?;
    let inv = &observed.inventory;
    let running = matches!(observed.process, BrokerProcess::Running { .. });
    let node = nodes(desired, observed).remove(0);

    // Removals: journaled ones first (always finished), then spaces gone from the file.
    let mut removals: BTreeMap<SpaceName, Removal> = BTreeMap::new();
    let mut steps = Vec::new();
    if let JournalState::Open(j) = &observed.journal {
        for r in &j.removals {
            removals.insert(
                r.space.clone(),
                Removal {
                    account: r.account.clone(),
                    committed: r.committed,
                    journaled: true,
                },
            );
        }
        steps.push(Step::FinishJournal {
            started_at: j.started_at.clone(),
            plan_digest: j.plan_digest.clone(),
            removals: j.removals.iter().map(|r| r.space.clone()).collect(),
        });
    }
    for (name, space) in &inv.spaces {
        if !desired.spaces.contains_key(name) && !removals.contains_key(name) {
            removals.insert(
                name.clone(),
                Removal {
                    account: space.account_pub.clone(),
                    committed: false,
                    journaled: false,
                },
            );
        }
    }
    // A space leaves the projected inventory when its record holds the removed account.
    let leaving = |name: &SpaceName| {
        removals.get(name).is_some_and(|r| {
            inv.spaces
                .get(name)
                .is_some_and(|s| s.account_pub == r.account)
        })
    };

    guard_removals(desired, inv, &removals)?;
    if running && let Some((h, p)) = listener_change(observed, &node) {
        return Err(Error::Refused(format!(
            "the listener changes from {h}:{p} to {}:{} while the broker runs; nats-server cannot move its listener on reload, so the reload would be refused.\n\
             blast radius: none, nothing was changed.\n\
             next: `cotal down`, `cotal apply`, then `cotal up` (a restart drops every tenant's connections briefly)",
            node.host, node.port
        )));
    }

    // Adds and changes.
    let mut adds: BTreeMap<&SpaceName, &SpaceSpec> = BTreeMap::new();
    let mut reissues: BTreeMap<&SpaceName, Vec<FieldChange>> = BTreeMap::new();
    let mut protections: BTreeMap<&SpaceName, bool> = BTreeMap::new();
    for (name, spec) in &desired.spaces {
        match inv.spaces.get(name) {
            Some(space) if !leaving(name) => {
                let expected = AccountLimits::for_space(spec);
                if expected != space.limits {
                    reissues.insert(name, field_changes(&space.limits, &expected));
                }
                if spec.protect != space.protect_recorded {
                    protections.insert(name, spec.protect);
                }
            }
            _ => {
                adds.insert(name, spec);
            }
        }
    }
    if !adds.is_empty() && !observed.sys_seed_retained {
        return Err(Error::Refused(format!(
            "cannot add {}: this root keeps no system signing seed (.cotal/auth/sys.seed), so a new space could not get its $SYS credentials.\n\
             blast radius: none, nothing was changed.\n\
             next: on a root with no spaces yet, move .cotal/auth/broker.json aside and run `cotal init --multi-space`; \
             on a root with spaces, the system account must be rotated offline (not supported by this version)",
            list(adds.keys().copied())
        )));
    }

    let mut changes = Vec::new();
    for (name, r) in &removals {
        let usage = inv.spaces.get(name).map(|s| &s.usage);
        let mut blast = blast::removal(
            name,
            usage.map(|u| u.streams.as_slice()).unwrap_or(&[]),
            usage.and_then(|u| u.connections),
        );
        // Without figures the removal still destroys whatever the space stores: say so.
        blast.data_uncounted =
            !r.committed && usage.is_none_or(|u| u.source == crate::observed::UsageSource::Unknown);
        let mut details = Vec::new();
        if r.journaled {
            details.push(if r.committed {
                "finishing a removal interrupted after its commit point".into()
            } else {
                "finishing a removal journaled by an interrupted apply".into()
            });
        }
        changes.push(SpaceChange {
            action: Action::Remove,
            space: name.clone(),
            account: Some(r.account.clone()),
            details,
            blast: blast.clone(),
        });
        steps.push(Step::DeleteStreams {
            space: name.clone(),
            account: r.account.clone(),
            committed: r.committed,
            blast,
        });
    }
    for (name, spec) in &adds {
        changes.push(SpaceChange {
            action: Action::Add,
            space: (*name).clone(),
            account: None,
            details: spec_details(spec),
            blast: Blast {
                touched: vec![(*name).clone()],
                ..Blast::default()
            },
        });
        steps.push(Step::AddAccount {
            space: (*name).clone(),
            spec: **spec,
        });
    }
    // Healing of existing spaces: missing $SYS creds, and (broker running) missing or drifted
    // streams. Provisioning runs after the reload, so a space resumed by this plan is loaded.
    let mut sys_heal: BTreeSet<&SpaceName> = BTreeSet::new();
    let mut provisions: BTreeMap<&SpaceName, Vec<String>> = BTreeMap::new();
    for (name, spec) in &desired.spaces {
        let Some(space) = inv.spaces.get(name).filter(|_| !leaving(name)) else {
            continue;
        };
        if observed.sys_seed_retained && !space.sys_creds_present {
            sys_heal.insert(name);
        }
        if running && spec.state == SpaceState::Active {
            let work = provisioning_work(name, space);
            if !work.is_empty() {
                provisions.insert(name, work);
            }
        }
    }
    let mut late_steps = Vec::new();
    for (name, spec) in &adds {
        if running && spec.state == SpaceState::Active {
            late_steps.push(Step::Provision {
                space: (*name).clone(),
                work: vec![format!(
                    "create its {} streams and buckets, seed the default delivery class",
                    crate::streams::expected(&name.token()).len()
                )],
            });
        }
    }
    let changed: BTreeSet<&SpaceName> = reissues
        .keys()
        .chain(protections.keys())
        .chain(sys_heal.iter())
        .chain(provisions.keys())
        .copied()
        .collect();
    for name in changed {
        let space = &inv.spaces[name];
        let spec = &desired.spaces[name];
        let mut details = Vec::new();
        let mut blast = Blast {
            touched: vec![name.clone()],
            ..Blast::default()
        };
        if let Some(fields) = reissues.get(name) {
            details.extend(
                fields
                    .iter()
                    .map(|f| format!("{}: {} -> {}", f.field, f.from, f.to)),
            );
            let live = space.usage.connections;
            if spec.state == SpaceState::Suspended && !space.limits.is_suspended() {
                blast.connections_dropped = Some(live.unwrap_or(0));
                blast.data_kept = true;
                if live.is_none() {
                    blast.connections_dropped = None;
                }
                details.push("suspension closes every live connection of the space and refuses new ones; streams and buckets are kept".into());
            } else if let (Some(max), Some(live)) = (spec.limits.max_connections, live)
                && spec.state == SpaceState::Active
                && live > max
            {
                blast.connections_dropped = Some(live - max);
                details.push(format!(
                    "{live} live connections > new max {max}: the newest {} are closed",
                    live - max
                ));
            }
            let used = space.usage.total_bytes();
            if let Some(max) = spec.limits.max_storage
                && used > max.0
            {
                details.push(format!(
                    "{} stored > new max_storage {max}: nothing is deleted, but JetStream refuses new writes until the space is under it",
                    human_bytes(used)
                ));
            }
            steps.push(Step::ReissueAccount {
                space: name.clone(),
                account: space.account_pub.clone(),
                spec: *spec,
                changes: fields.clone(),
                blast: blast.clone(),
            });
        }
        if let Some(protect) = protections.get(name) {
            details.push(format!("protect: {} -> {protect}", space.protect_recorded));
            steps.push(Step::RecordProtection {
                space: name.clone(),
                protect: *protect,
            });
        }
        if sys_heal.contains(name) {
            details.push("$SYS credentials: missing -> written".into());
            steps.push(Step::WriteSysCreds {
                space: name.clone(),
            });
        }
        if let Some(work) = provisions.get(name) {
            details.push(format!("streams: {}", work.join(", ")));
            late_steps.push(Step::Provision {
                space: name.clone(),
                work: work.clone(),
            });
        }
        changes.push(SpaceChange {
            action: Action::Change,
            space: name.clone(),
            account: Some(space.account_pub.clone()),
            details,
            blast,
        });
    }
    changes.sort_by(|a, b| (a.space.cmp(&b.space)).then((a.action as u8).cmp(&(b.action as u8))));

    // One render and promotion for the whole plan. `base` is the inventory without the spaces
    // this plan removes: what the promoted config must hold when nothing is added or re-issued.
    let base: Vec<Preload> = inv
        .spaces
        .iter()
        .filter(|(n, _)| !leaving(n))
        .map(|(n, s)| Preload {
            space: n,
            account: &s.account_pub,
            token: Token::Signed(&s.jwt),
        })
        .collect();
    let inventory_digest = digest::preloads(&render::inventory_preloads(&inv.spaces));
    let base_digest = digest::preloads(&base);
    let base_render = if base.is_empty() {
        None
    } else {
        Some(render::server_conf(&broker, &base, &node).map_err(Error::Refused)?)
    };
    let mut reasons = Vec::new();
    if !adds.is_empty() {
        reasons.push(format!("adds {}", list(adds.keys().copied())));
    }
    let still_loaded: Vec<&SpaceName> = removals
        .iter()
        .filter(|(_, r)| observed.loads(&r.account))
        .map(|(n, _)| n)
        .collect();
    if !still_loaded.is_empty() {
        reasons.push(format!("removes {}", list(still_loaded.iter().copied())));
    }
    if !reissues.is_empty() {
        reasons.push(format!("re-issues {}", list(reissues.keys().copied())));
    }
    if let Some(base_render) = &base_render {
        let explained = !reasons.is_empty();
        match observed.server_conf_text() {
            None => reasons.push("server.conf does not exist yet".into()),
            Some(conf) if conf != base_render && !explained => reasons.push(
                "server.conf differs from the rendering of the inventory (edited by hand, or left by an interrupted apply)".into(),
            ),
            _ => {}
        }
        match &observed.generation {
            GenerationState::Valid(g) if g.inventory_digest == base_digest => {}
            _ if !reasons.is_empty() => {}
            GenerationState::Valid(_) => reasons.push(
                "the generation record does not match the promoted inventory (an apply was interrupted before it advanced the generation)".into(),
            ),
            _ => reasons.push("no generation record yet".into()),
        }
    }

    let projected = projected_preloads(inv, &adds, &reissues, &leaving);
    let from_generation = observed.generation.generation();
    let mut config = None;
    if !reasons.is_empty() && !projected.is_empty() {
        let after = render::server_conf(&broker, &projected, &node).map_err(Error::Refused)?;
        config = Some(ConfigChange {
            before: observed.server_conf_text().map(render::shorten_tokens),
            after: render::shorten_tokens(&after),
        });
        let kept = projected.len() - adds.len().min(projected.len());
        let siblings = if running {
            format!(
                "rewrites the config every space shares; hot reload: the {kept} space{} kept see{} no dropped connection and no data change",
                if kept == 1 { "" } else { "s" },
                if kept == 1 { "s" } else { "" }
            )
        } else {
            "the broker is stopped: the new config takes effect at the next `cotal up`".into()
        };
        steps.push(Step::PromoteConfig {
            from_generation,
            to_generation: from_generation + 1,
            reasons,
            blast: Blast {
                siblings: Some(siblings),
                ..Blast::default()
            },
        });
    }
    steps.extend(late_steps);
    for (name, r) in &removals {
        steps.push(Step::Reap {
            space: name.clone(),
            account: r.account.clone(),
        });
    }

    let warnings = warnings(desired, observed, &node);
    let summary = Summary {
        add: changes.iter().filter(|c| c.action == Action::Add).count(),
        change: changes
            .iter()
            .filter(|c| c.action == Action::Change)
            .count(),
        remove: changes
            .iter()
            .filter(|c| c.action == Action::Remove)
            .count(),
    };
    Ok(Plan {
        format_version: super::FORMAT_VERSION,
        pins: Pins {
            generation: from_generation,
            desired_digest: observed.desired_digest.clone(),
            inventory_digest,
            config_digest: observed
                .server_conf_text()
                .map(|c| digest::sha256(c.as_bytes()))
                .unwrap_or_else(|| "absent".into()),
        },
        broker_running: running,
        summary,
        changes,
        steps,
        warnings,
        config,
    })
}

/// Why `cotal up` must promote before it starts the broker: the config on disk is not the
/// rendering of the inventory, or the generation record does not match it. Empty when it is.
pub fn boot_drift(desired: &Desired, observed: &Observed) -> Result<Vec<String>, Error> {
    let broker = guard_trust(observed)?;
    let node = nodes(desired, observed).remove(0);
    let inv = &observed.inventory;
    let preloads = render::inventory_preloads(&inv.spaces);
    let rendered = render::server_conf(&broker, &preloads, &node).map_err(Error::Refused)?;
    let digest = digest::preloads(&preloads);
    let mut reasons = Vec::new();
    if observed.server_conf_text() != Some(rendered.as_str()) {
        reasons.push("server.conf is not the rendering of the inventory".to_string());
    }
    if !matches!(&observed.generation, GenerationState::Valid(g) if g.inventory_digest == digest) {
        reasons.push("the generation record does not match the inventory".to_string());
    }
    Ok(reasons)
}

/// What provisioning must do for an existing space, from live figures: missing streams and
/// drifted configs. Empty when nothing is known (usage not live).
fn provisioning_work(name: &SpaceName, space: &crate::observed::ObservedSpace) -> Vec<String> {
    if space.usage.source != crate::observed::UsageSource::Live {
        return Vec::new();
    }
    let present: BTreeSet<&str> = space
        .usage
        .streams
        .iter()
        .map(|s| s.name.as_str())
        .collect();
    let missing: Vec<String> = crate::streams::expected(&name.token())
        .iter()
        .map(|e| e.stream_name())
        .filter(|n| !present.contains(n.as_str()))
        .collect();
    let mut work = Vec::new();
    if missing.len() == crate::streams::expected(&name.token()).len() {
        work.push(format!(
            "create all {} streams and buckets, seed the default delivery class",
            missing.len()
        ));
    } else if !missing.is_empty() {
        work.push(format!("create missing {}", missing.join(", ")));
    }
    for (stream, fields) in &space.stream_drift {
        // Drift that cannot be updated in place is a warning of the plan, not a step.
        if fields.iter().all(|f| crate::streams::updatable(f)) {
            work.push(format!("update {stream} (drifted: {})", fields.join(", ")));
        }
    }
    work
}

/// The inventory as it will be after the plan, with placeholders for tokens minted at apply.
fn projected_preloads<'a>(
    inv: &'a Inventory,
    adds: &BTreeMap<&'a SpaceName, &SpaceSpec>,
    reissues: &BTreeMap<&'a SpaceName, Vec<FieldChange>>,
    leaving: &dyn Fn(&SpaceName) -> bool,
) -> Vec<Preload<'a>> {
    const NEW_ACCOUNT: &str = "<new account>";
    let mut out: BTreeMap<&SpaceName, Preload<'a>> = BTreeMap::new();
    for (name, space) in &inv.spaces {
        if leaving(name) {
            continue;
        }
        let token = if reissues.contains_key(name) {
            Token::Pending("(re-issued at apply)")
        } else {
            Token::Signed(&space.jwt)
        };
        out.insert(
            name,
            Preload {
                space: name,
                account: &space.account_pub,
                token,
            },
        );
    }
    for name in adds.keys() {
        out.insert(
            name,
            Preload {
                space: name,
                account: NEW_ACCOUNT,
                token: Token::Pending("(minted at apply)"),
            },
        );
    }
    // Every new account shows the same placeholder key; the render's duplicate check is for
    // signed tokens only.
    out.into_values().collect()
}

/// Refuse on anything that makes the tenant set or the trust uncertain.
pub fn guard_trust(observed: &Observed) -> Result<BrokerTrust, Error> {
    let broker = match &observed.broker {
        BrokerRecordState::Absent => {
            return Err(Error::Refused(
                "this root has no broker record (.cotal/auth/broker.json): a space is signed by an existing broker, never by a fresh operator.\n\
                 blast radius: none, nothing was changed.\n\
                 next: run `cotal init` to create the broker trust"
                    .into(),
            ));
        }
        BrokerRecordState::Corrupt { file, reason } => {
            return Err(Error::Refused(format!(
                "the broker record {} is corrupt: {reason}.\n\
                 blast radius: every space of this broker; nothing was changed.\n\
                 next: restore the file from a backup; do not run `cotal init` over it (that would orphan every space)",
                file.display()
            )));
        }
        BrokerRecordState::Valid(b) => b.clone(),
    };
    let inv = &observed.inventory;
    if !inv.corrupt.is_empty() {
        let mut msg = String::from(
            "the account inventory holds records that are not valid records of this broker; an unreadable record may be a real tenant, so the blast radius is unknown:\n",
        );
        for c in &inv.corrupt {
            msg.push_str(&format!("  {}: {}\n", c.file.display(), c.reason));
        }
        let foreign = inv.corrupt.iter().any(|c| c.foreign_issuer.is_some());
        msg.push_str("blast radius: unknown; nothing was changed.\n");
        msg.push_str(if foreign {
            "next: a record signed by another operator belongs to another broker: move it out of .cotal/auth/ (and re-add that space here if it belongs here), or restore the right broker.json"
        } else {
            "next: restore each file from a backup, or move it out of .cotal/auth/ if it is not a tenant of this broker"
        });
        return Err(Error::Refused(msg));
    }
    if let GenerationState::Corrupt { file, reason } = &observed.generation {
        return Err(Error::Refused(format!(
            "the generation record {} is corrupt: {reason}.\n\
             blast radius: none yet; nothing was changed (promotion compares against it).\n\
             next: restore it, or delete it to let the next apply start the generation again from 0",
            file.display()
        )));
    }
    if let JournalState::Corrupt { file, reason } = &observed.journal {
        return Err(Error::Refused(format!(
            "the apply journal {} is corrupt: {reason}; an interrupted apply cannot be identified.\n\
             blast radius: unknown; nothing was changed.\n\
             next: inspect it; when the spaces it names are known, remove it and run `cotal plan`",
            file.display()
        )));
    }
    Ok(broker)
}

/// Refuse an open journal that local state contradicts: a journaled removal is finished only
/// when its pinned account is not another space's, the record of its name holds the pinned
/// account (or is gone, or holds the new account the journaled apply minted for that name),
/// and its folder does not record it as protected.
pub fn guard_journal(observed: &Observed) -> Result<(), Error> {
    let JournalState::Open(j) = &observed.journal else {
        return Ok(());
    };
    let inv = &observed.inventory;
    let mut refusals = Vec::new();
    for r in &j.removals {
        for (name, s) in &inv.spaces {
            if name != &r.space && s.account_pub == r.account {
                refusals.push(format!(
                    "it would remove account {} under the name {}, but that account is the one of {}",
                    r.account,
                    q(&r.space),
                    q(name)
                ));
            }
        }
        if let Some(s) = inv.spaces.get(&r.space)
            && s.account_pub != r.account
            && !j
                .added
                .iter()
                .any(|a| a.space == r.space && a.account == s.account_pub)
        {
            refusals.push(format!(
                "it pins account {} for {}, but the record of {} holds account {}",
                r.account,
                q(&r.space),
                q(&r.space),
                s.account_pub
            ));
        }
        if observed.journal_protected.contains(&r.space) {
            refusals.push(format!(
                "it would remove {}, which .cotal/space.{}/lifecycle.json records as protected",
                q(&r.space),
                r.space.hex()
            ));
        }
    }
    if refusals.is_empty() {
        return Ok(());
    }
    Err(Error::Refused(format!(
        "the open journal .cotal/maintenance/journal.json (started {} by pid {} on {}) contradicts what is on disk, so it is not finished:\n  {}\n\
         blast radius: none; nothing was changed.\n\
         next: find out where this journal came from; if no interrupted apply of this root wrote it, move it out of .cotal/maintenance/ and run `cotal plan`",
        j.started_at,
        j.pid,
        j.host,
        refusals.join("\n  ")
    )))
}

/// Refuse when it is unknown whether this root's broker runs: a plan could neither say how a
/// removal deletes data (through the broker, or its folder) nor be sure a reload reaches it.
pub fn guard_liveness(observed: &Observed) -> Result<(), Error> {
    match &observed.process {
        BrokerProcess::Unknown { seen } => Err(Error::Refused(format!(
            "cannot tell whether this root's broker is running: {seen}.\n\
             blast radius: unknown; nothing was changed.\n\
             next: if that process is this root's broker whose pidfile was lost, stop it (`kill PID`) and run `cotal up`; \
             if another program holds the port, stop it or change [broker] port in cotal.toml; then run `cotal plan`"
        ))),
        _ => Ok(()),
    }
}

/// Removal guards for removals the operator asks for now (journaled ones are finished).
fn guard_removals(
    desired: &Desired,
    inv: &Inventory,
    removals: &BTreeMap<SpaceName, Removal>,
) -> Result<(), Error> {
    let fresh: Vec<&SpaceName> = removals
        .iter()
        .filter(|(_, r)| !r.journaled)
        .map(|(n, _)| n)
        .collect();
    if fresh.is_empty() {
        return Ok(());
    }
    let mut refusals = Vec::new();
    if desired.spaces.is_empty() {
        refusals.push(format!(
            "removing {} would leave the broker with no space: that is the broker-wide teardown, not a space removal.\n\
             next: keep at least one space in cotal.toml, or stop the broker (`cotal down`) and delete the root",
            list(fresh.iter().copied())
        ));
    }
    for name in &fresh {
        let Some(space) = inv.spaces.get(*name) else {
            continue;
        };
        if space.protect_recorded {
            refusals.push(format!(
                "{} is protected (protect = true was applied and is recorded in .cotal/space.{}/lifecycle.json); its removal would have this blast radius: {}.\n\
                 next: first set `protect = false` in its [spaces.{}] table and run `cotal apply`, then delete the table and apply again",
                q(name),
                name.hex(),
                blast::removal(name, &space.usage.streams, space.usage.connections).describe(),
                toml_key(name)
            ));
        }
        if !space.live_processes.is_empty() {
            refusals.push(format!(
                "{} has live local processes (pids {}); removing it would pull the account from under them.\n\
                 next: stop them, then apply again",
                q(name),
                space
                    .live_processes
                    .iter()
                    .map(|p| p.to_string())
                    .collect::<Vec<_>>()
                    .join(", ")
            ));
        }
    }
    if refusals.is_empty() {
        Ok(())
    } else {
        Err(Error::Refused(format!(
            "{}\nblast radius of this refusal: none, nothing was changed.",
            refusals.join("\n")
        )))
    }
}

fn toml_key(name: &SpaceName) -> String {
    let bare = name
        .as_str()
        .chars()
        .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-');
    if bare { name.to_string() } else { q(name) }
}

/// `"a", "b" and "c"`.
fn list<'a>(names: impl IntoIterator<Item = &'a SpaceName>) -> String {
    let v: Vec<String> = names.into_iter().map(q).collect();
    match v.len() {
        0 => String::new(),
        1 => v[0].clone(),
        n => format!("{} and {}", v[..n - 1].join(", "), v[n - 1]),
    }
}

fn spec_details(spec: &SpaceSpec) -> Vec<String> {
    let mut out = Vec::new();
    if spec.state != SpaceState::Active {
        out.push(format!("state: {}", spec.state));
    }
    if spec.protect {
        out.push("protect: true".into());
    }
    let limits: Vec<String> = spec
        .limits
        .entries()
        .into_iter()
        .filter_map(|(k, v)| v.map(|v| format!("{k} = {v}")))
        .collect();
    out.push(if limits.is_empty() {
        "limits: unlimited".into()
    } else {
        format!("limits: {}", limits.join(", "))
    });
    out
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
fn field_changes(observed: &AccountLimits, expected: &AccountLimits) -> Vec<FieldChange> {
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

/// The listener of the promoted config, when it differs from the node's.
fn listener_change(observed: &Observed, node: &Node) -> Option<(String, u16)> {
    let view = &observed.server_conf.as_ref()?.view;
    let (h, p) = (view.host.clone()?, view.port?);
    (h != node.host || p != node.port).then_some((h, p))
}

fn warnings(desired: &Desired, observed: &Observed, node: &Node) -> Vec<String> {
    let mut out = Vec::new();
    if let Some(e) = &observed.live_error {
        out.push(format!(
            "the broker runs but its live figures could not be read ({e}); blast radii show no message or connection counts"
        ));
    }
    let mut by_token: BTreeMap<String, Vec<&SpaceName>> = BTreeMap::new();
    for name in desired.spaces.keys() {
        by_token.entry(name.token()).or_default().push(name);
    }
    for (token, names) in by_token {
        if names.len() > 1 {
            out.push(format!(
                "{} share the wire token {token:?}: they are different accounts and stay isolated, but their stream names look alike",
                list(names)
            ));
        }
    }
    for (name, space) in &observed.inventory.spaces {
        for (stream, fields) in &space.stream_drift {
            let fixed: Vec<&String> = fields
                .iter()
                .filter(|f| !crate::streams::updatable(f))
                .collect();
            if !fixed.is_empty() {
                out.push(format!(
                    "{stream} of {} was recreated with another {} than cotal provisions, which nats-server cannot change in place: the space is not servable until it is put right. \
                     To do so, delete that stream with a user of the space (its messages go with it); the next `cotal apply` creates it again",
                    q(name),
                    fixed.iter().map(|f| f.as_str()).collect::<Vec<_>>().join(" and ")
                ));
            }
        }
    }
    if let Some((h, p)) = listener_change(observed, node) {
        out.push(format!(
            "the listener changes from {h}:{p} to {}:{}: nats-server cannot move its listener on reload; restart the broker (`cotal down` then `cotal up`) for it to take effect",
            node.host, node.port
        ));
    }
    out
}
