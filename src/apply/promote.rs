//! The one promotion of an apply, as named stages: read the inventory and check it is what the
//! plan saw ([`checked_inventory`]), render and pre-flight every node's config
//! ([`render_and_preflight`]), compare-and-set the generation ([`compare_and_set`]), promote,
//! reload and confirm or roll back ([`reload_or_roll_back`]), advance the generation.
//!
//! Invariants: nothing is promoted unless the inventory on disk is exactly what the plan saw
//! plus this apply's writes and the generation is still the plan's; a reload the broker does not
//! confirm puts back the previous config and every record this apply wrote (exit 7).

use super::undo::undo_writes;
use super::users::space_user;
use super::{Context, ExpectedInventory, RunState, lock_lost};
use crate::broker::{Broker, Expectation, preflight};
use crate::diagnostic::Diagnostic;
use crate::error::{Error, Result};
use crate::fault::{self, Point};
use crate::model::SpaceName;
use crate::observed::{
    BrokerTrust, GenerationRecord, GenerationState, Inventory, JournaledRemoval,
};
use crate::plan::{Plan, Step};
use crate::render;
use crate::space::permissions;
use crate::store::broker_record::BrokerRecord;
use crate::store::caches::signature_memo::SignatureMemo;
use crate::store::{NodeFiles, Root, account_record, generation, inventory, server_conf};

/// Which promotion of the apply this is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stage {
    /// [`Step::Fence`]: the journaled removals stay loaded with their fenced records,
    /// and the reload is confirmed by each loading its fenced JWT and refusing a fresh user.
    Fence,
    /// [`Step::PromoteConfig`]: the journaled removals are dropped, the plan's other changes
    /// take effect.
    Final,
}

/// Render from the inventory as it is on disk now (minus the journaled removals, unless this
/// is the fence), promote by
/// compare-and-set, reload and confirm a running broker (rolling back the config and every
/// record this apply wrote when it does not confirm), then advance the generation. Returns
/// (from, to).
pub fn promote(
    ctx: &Context,
    record: &BrokerRecord,
    expected: u64,
    state: &mut RunState,
    plan: &Plan,
    broker: &mut dyn Broker,
    stage: Stage,
) -> Result<(u64, u64)> {
    let root = ctx.root;
    // The promotion is the commit: every record it refers to must be on disk before it.
    if crate::store::atomic::deferred_pending() > 0 {
        return Err(Error::other(
            Diagnostic::new("internal error: records written by this apply were not synced before the promotion; nothing was promoted.")
            .next("run `cotal apply` again (it syncs and adopts them), and report this"),
        ));
    }
    let files: Vec<NodeFiles> = ctx.observed.nodes.iter().map(|n| n.files.clone()).collect();
    let trust = record.validate().map_err(Error::other)?;
    let dropped: &[JournaledRemoval] = match stage {
        Stage::Fence => &[],
        Stage::Final => &state.journal.removals,
    };
    let memo = SignatureMemo::load(root, record.operator.seed.expose());
    let inv = checked_inventory(root, &trust, &memo, &state.expected, dropped)?;
    let credential = crate::trust::route_auth::RouteCredential::derive(
        &record.operator.seed,
        ctx.observed.route_rotation,
    );
    let candidate = render_and_preflight(ctx, &files, &trust, &inv, &credential)?;
    let current = compare_and_set(root, &files, expected)?;
    // Everything the reload check needs is ready before the config changes.
    let expectations = if broker.running() {
        let mut e = match stage {
            Stage::Fence => fence_expectations(root, plan)?,
            Stage::Final => expectations(ctx, record, plan, &state.journal.removals)?,
        };
        // A TLS listener serves the certificate this config was rendered for.
        if let Some((fingerprint, _)) = ctx
            .nodes
            .iter()
            .find_map(|n| n.tls.as_ref().and_then(|t| t.certificate.clone()))
        {
            e.push(Expectation::Serves { fingerprint });
        }
        // So do the routes, under `[cluster.tls]`.
        let routes = ctx
            .nodes
            .iter()
            .find_map(|n| n.cluster.as_ref()?.tls.as_ref());
        if let Some((t, (fingerprint, _))) =
            routes.and_then(|t| t.certificate.clone().map(|c| (t, c)))
        {
            e.push(Expectation::RoutesServe {
                fingerprint,
                listeners: ctx
                    .nodes
                    .iter()
                    .filter_map(|n| Some((n.name.clone(), n.cluster.as_ref()?.listen.clone())))
                    .collect(),
                identity: (t.cert_file.clone().into(), t.key_file.clone().into()),
                ca: t.ca_file.clone().unwrap_or_default().into(),
            });
        }
        e
    } else {
        Vec::new()
    };
    ctx.lock.verify().map_err(lock_lost)?;
    let clustered = ctx.observed.is_cluster();
    promote_every_node(&files, clustered, state)?;
    tracing::info!(
        generation = current,
        spaces = inv.spaces.len(),
        nodes = files.len(),
        "config promoted"
    );
    let last = files.last().expect("a node");
    match stage {
        Stage::Fence => fault::point(Point::AfterFencePromoted),
        Stage::Final => {
            fault::point(Point::AfterConfigPromoted);
            fault::break_config(&last.conf);
        }
    }
    if broker.running() {
        if stage == Stage::Final {
            fault::point(Point::BeforeReload);
        }
        reload_or_roll_back(
            &files,
            clustered,
            broker,
            &candidate.digests,
            &expectations,
            state,
            stage,
        )?;
    }
    fault::point(match stage {
        Stage::Fence => Point::AfterFenceReload,
        Stage::Final => Point::AfterReload,
    });
    generation::save(
        root,
        &GenerationRecord {
            generation: current + 1,
            inventory_digest: candidate.inventory_digest,
        },
    )?;
    Ok((current, current + 1))
}

/// The inventory on disk, refused unless it is certain and exactly what this apply expects;
/// the spaces being removed (which keep their records until the reap) left out.
fn checked_inventory(
    root: &Root,
    trust: &BrokerTrust,
    memo: &SignatureMemo,
    expected: &ExpectedInventory,
    removals: &[JournaledRemoval],
) -> Result<Inventory> {
    let mut inv = inventory::read(root, trust, memo)?;
    if let Some(c) = inv.corrupt.first() {
        return Err(Error::refused(
            Diagnostic::new(format!(
                "the inventory became uncertain during apply ({}: {}); an uncertain tenant list is not rendered.",
                c.file.display(),
                c.reason
            ))
            .next("find who changed .cotal/auth/ during the apply, then run `cotal plan`"),
        ));
    }
    check_inventory(root, &inv, expected)?;
    inv.spaces.retain(|name, space| {
        !removals
            .iter()
            .any(|r| &r.space == name && r.account == space.account_pub)
    });
    Ok(inv)
}

/// The rendered candidate: each node's name and config digest, and the inventory digest it
/// renders.
struct Candidate {
    digests: Vec<(String, String)>,
    inventory_digest: String,
}

/// Render every node's config to its `server.conf.next` and have nats-server check each node
/// that is not running; every node is rendered and pre-flighted before any is promoted.
fn render_and_preflight(
    ctx: &Context,
    files: &[NodeFiles],
    trust: &BrokerTrust,
    inv: &Inventory,
    credential: &crate::trust::route_auth::RouteCredential,
) -> Result<Candidate> {
    let preloads = crate::observed::preloads(&inv.spaces);
    let mut digests = Vec::new();
    let mut nexts = Vec::new();
    for f in files {
        let written = ctx
            .nodes
            .iter()
            .find(|n| n.name == f.name)
            .ok_or_else(|| Error::other(format!("internal error: node {} is not rendered", f.name)))
            .map(|node| node.with_route_credential(credential))
            .and_then(|node| {
                if let Some(text) = node.cluster.as_ref().and_then(|c| c.routes_include_text()) {
                    server_conf::write_routes_include(f, &text)?;
                }
                render::render(trust, &preloads, &node).map_err(Error::refused)
            })
            .and_then(|rendered| {
                let next = server_conf::write_next(f, &rendered.text)?;
                digests.push((f.name.clone(), rendered.digest));
                Ok(next)
            });
        match written {
            Ok(next) => nexts.push(next),
            Err(e) => {
                discard_every_next(files)?;
                return Err(e);
            }
        }
    }
    // A node that is not running has its candidate checked by `nats-server -t` (its next start
    // would otherwise fail); a running node's reload is the check, and a reload the broker
    // refuses keeps its old config and is rolled back like any unconfirmed one. Every check
    // runs at once (one nats-server process each).
    let checked: Vec<Result<()>> = std::thread::scope(|s| {
        let running: Vec<_> = nexts
            .iter()
            .zip(files)
            .map(|(next, f)| {
                let check = !ctx.observed.node_running(&f.name);
                s.spawn(move || {
                    if check {
                        preflight::check(next).map(|_| ())
                    } else {
                        Ok(())
                    }
                })
            })
            .collect();
        running
            .into_iter()
            .map(|h| {
                h.join()
                    .unwrap_or_else(|_| Err(Error::other("the preflight thread panicked")))
            })
            .collect()
    });
    if let Some((f, e)) = files
        .iter()
        .zip(checked)
        .find_map(|(f, r)| r.err().map(|e| (f, e)))
    {
        discard_every_next(files)?;
        return Err(if ctx.observed.is_cluster() {
            Error::refused(format!(
                "{}{e}",
                crate::desired::topology::node_prefix(true, &f.name)
            ))
        } else {
            e
        });
    }
    Ok(Candidate {
        digests,
        inventory_digest: render::preloads_digest(&preloads),
    })
}

fn discard_every_next(files: &[NodeFiles]) -> Result<()> {
    for f in files {
        server_conf::discard_next(f)?;
    }
    Ok(())
}

/// Promote every node's candidate; when one cannot be promoted, put back the nodes already
/// promoted (nothing was reloaded yet) and every record this apply wrote, and say so (exit 7).
fn promote_every_node(files: &[NodeFiles], clustered: bool, state: &mut RunState) -> Result<()> {
    for (k, f) in files.iter().enumerate() {
        let Err(e) = server_conf::promote_next(f) else {
            continue;
        };
        let not_restored = restore_every(&files[..k]);
        let _ = discard_every_next(&files[k..]);
        let records = put_back_records(state);
        let of = if clustered {
            format!(" of node {}", f.name)
        } else {
            String::new()
        };
        return Err(Error::rolled_back(Diagnostic::new(format!(
"the config{of} could not be promoted: {e}
{}; {}; no node was reloaded, so the broker still runs the config it had.", if not_restored.is_empty() {
                "every node's previous config was put back".to_string()
            } else {
                format!(
                    "some nodes' previous config could not be put back ({})",
                    not_restored.join("; ")
                )
            }, records)).next(format!(
"make {} writable by cotal (a file marked immutable, a read-only mount?), then apply again", f.conf.display()))));
    }
    Ok(())
}

/// Put back each node's previous config, whatever another's does; returns the files that could
/// not be put back, each with why.
fn restore_every(files: &[NodeFiles]) -> Vec<String> {
    files
        .iter()
        .filter_map(|f| {
            server_conf::restore_prev(f)
                .err()
                .map(|e| format!("{}: {e}", f.conf.display()))
        })
        .collect()
}

/// Put back every record this apply wrote; says how that went, for the rollback's message.
fn put_back_records(state: &mut RunState) -> String {
    let not_undone = undo_writes(state.undo.entries());
    state.undo.clear();
    if not_undone.is_empty() {
        "every record this apply wrote was put back; the generation is unchanged".to_string()
    } else {
        format!(
            "some records this apply wrote could not be put back ({}); the generation is unchanged",
            not_undone.join("; ")
        )
    }
}

/// Who moved the generation to `current` behind the lock: the audit's record of the apply that
/// promoted it (its operator, time and plan), or, when no cotal recorded it, the record file's
/// change time (a hand edit, a copy of another root's record, or a writer that bypassed both
/// the lock and the audit).
fn who_moved(root: &Root, expected: u64, current: u64) -> String {
    let file = root.generation_record();
    if current < expected {
        return format!(
            "it went back: {} was replaced by an older record (a restore or a copy of it), which no apply does",
            file.display()
        );
    }
    let promoted = crate::store::audit::read(root).ok().and_then(|records| {
        records.into_iter().rev().find(|r| {
            r.generation.after == Some(current) && r.event == crate::audit::Event::ApplyCompleted
        })
    });
    if let Some(r) = promoted {
        return format!(
            "generation {current} was promoted by {}@{} at {} (plan {}), a cotal that did not hold this root's lock",
            r.actor.user,
            r.actor.host,
            r.time,
            if r.plan_digest.is_empty() {
                "unknown"
            } else {
                &r.plan_digest
            }
        );
    }
    let changed = std::fs::metadata(&file)
        .and_then(|m| m.modified())
        .map(|t| humantime::format_rfc3339_seconds(t).to_string())
        .unwrap_or_else(|_| "an unknown time".into());
    format!(
        "no cotal recorded completing generation {current}: {} was changed at {changed} (a cotal applying without the lock and not finished yet, a hand edit, or a copy of another root's record)",
        file.display()
    )
}

/// The generation must still be the one this plan was made against. Returns it.
fn compare_and_set(root: &Root, files: &[NodeFiles], expected: u64) -> Result<u64> {
    let current = match generation::load(root)? {
        GenerationState::Corrupt { file, reason } => {
            discard_every_next(files)?;
            return Err(Error::refused(
                Diagnostic::new(format!(
                    "{} became corrupt during apply: {reason}.",
                    file.display()
                ))
                .next("find who changed it during the apply; restore or delete it, then run `cotal plan`"),
            ));
        }
        other => other.generation(),
    };
    if current != expected {
        discard_every_next(files)?;
        return Err(Error::refused(
            Diagnostic::new(format!(
                "the generation moved from {expected} to {current} while this apply held the lock: {}.",
                who_moved(root, expected, current)
            ))
            .blast("none from this apply; its config was not promoted.")
            .next("run `cotal plan` to see the state now, then apply again"),
        ));
    }
    Ok(current)
}

/// Reload every node and confirm it on the broker and its data plane; when that fails, put
/// back the previous config (confirmed the same way) and every record this apply wrote, and
/// say so (exit 7).
fn reload_or_roll_back(
    files: &[NodeFiles],
    clustered: bool,
    broker: &mut dyn Broker,
    digests: &[(String, String)],
    expectations: &[Expectation],
    state: &mut RunState,
    stage: Stage,
) -> Result<()> {
    let confirmed = broker
        .reload(digests)
        .and_then(|_| broker.verify(expectations))
        .and_then(|_| match stage {
            Stage::Final => fault::refuse_verify().map_err(Error::other),
            Stage::Fence => Ok(()),
        });
    let Err(e) = confirmed else {
        return Ok(());
    };
    // Every node's file goes back whatever another's does, and the records with them: the
    // broker record put back holds the system keys of the config being restored, so cotal can
    // mint a control user the broker accepts once it runs it again. The broker is then asked to
    // reload every node it reloaded, even when one file could not be put back (named below).
    let unrestored = restore_every(files);
    let records = put_back_records(state);
    let restored = broker.restore();
    let reloaded = match restored {
        _ if !unrestored.is_empty() => format!(
            "the previous config could not be put back in {}; the broker was asked to reload the others ({})",
            unrestored.join("; "),
            match restored {
                Ok(_) => "done".to_string(),
                Err(again) => again.to_string(),
            }
        ),
        Ok(true) if clustered => "every node's previous config was restored, and every node a reload was sent to confirmed it runs its previous config again".to_string(),
        Ok(true) => "the previous config was restored and the broker confirmed it".to_string(),
        Ok(false) => "the previous config was restored; no reload had reached the broker, so it still runs that config".to_string(),
        Err(again) => format!("the previous config was restored but could not be confirmed: {again}"),
    };
    Err(Error::rolled_back(
        Diagnostic::new(format!("{e}\n{reloaded}; {records}."))
            .next("`cotal plan` shows the refused change again; fix its cause and apply again"),
    ))
}

/// What the broker must show after the fence's reload: each fenced space loaded with exactly
/// its fenced JWT, and refusing a fresh user; one fenced for its archive running no stream.
fn fence_expectations(root: &Root, plan: &Plan) -> Result<Vec<Expectation>> {
    let mut out = Vec::new();
    for step in &plan.steps {
        let Step::Fence { spaces, .. } = step else {
            continue;
        };
        for f in spaces {
            let record = account_record::load(root, &f.space)?;
            out.push(Expectation::Loaded {
                space: f.space.clone(),
                account: f.account.clone(),
                jwt: record.account.jwt.clone(),
            });
            if let Some(creds) = space_user(
                root,
                &f.space,
                &f.account,
                "cotal-verifier",
                permissions::verifier(),
            )? {
                out.push(Expectation::Refuses {
                    space: f.space.clone(),
                    creds,
                });
            }
            if f.archive {
                out.push(Expectation::NoStreams {
                    space: f.space.clone(),
                    account: f.account.clone(),
                });
            }
        }
    }
    Ok(out)
}

/// What the broker must show after the reload: added and re-issued spaces loaded with exactly
/// their new JWT (asked through the system account, so a space at its connection limit is
/// checked without a free slot); added active spaces accept a fresh user (all their slots are
/// free); suspended ones refuse it; removed ones are unloaded and refuse it.
fn expectations(
    ctx: &Context,
    record: &BrokerRecord,
    plan: &Plan,
    removals: &[JournaledRemoval],
) -> Result<Vec<Expectation>> {
    let root = ctx.root;
    let mut out = Vec::new();
    if plan
        .steps
        .iter()
        .any(|s| matches!(s, Step::ReissueSystemAccount { .. }))
    {
        out.push(Expectation::SystemLoaded {
            account: record.sys.public.clone(),
            jwt: record.sys.jwt.clone(),
        });
        if let Some(m) = &record.sys.monitor_account {
            out.push(Expectation::MonitorLoaded {
                account: m.public.clone(),
                jwt: m.jwt.clone(),
            });
        }
    }
    // Side accounts the plan writes or drops: loaded with their new JWT, or unloaded.
    for step in &plan.steps {
        let (space, dropped) = match step {
            Step::AddAccount { space, spec, .. }
                if spec.state != crate::model::SpaceState::Archived =>
            {
                (space, &[][..])
            }
            Step::WriteSideAccounts { space, drop, .. } => (space, &drop[..]),
            _ => continue,
        };
        let record = account_record::load(root, space)?;
        for (role, side) in &record.side_accounts {
            out.push(Expectation::SideLoaded {
                space: space.clone(),
                role: role.clone(),
                account: side.public.clone(),
                jwt: Some(side.jwt.clone()),
            });
        }
        let before = ctx.observed.inventory.spaces.get(space);
        for role in dropped {
            if let Some(side) = before.and_then(|s| s.sides.get(role)) {
                out.push(Expectation::SideLoaded {
                    space: space.clone(),
                    role: role.clone(),
                    account: side.account_pub.clone(),
                    jwt: None,
                });
            }
        }
    }
    for step in &plan.steps {
        let (space, spec, added) = match step {
            Step::AddAccount { space, spec, .. } => (space, spec, true),
            Step::ReissueAccount { space, spec, .. } => (space, spec, false),
            Step::RecordArchive {
                space,
                account,
                archived,
                ..
            } => {
                out.extend(archive_expectations(root, space, account, *archived)?);
                continue;
            }
            _ => continue,
        };
        // An archived space is not loaded; its own step says what the broker must show.
        if spec.state == crate::model::SpaceState::Archived
            || plan
                .steps
                .iter()
                .any(|s| matches!(s, Step::RecordArchive { space: s, .. } if s == space))
        {
            continue;
        }
        let record = account_record::load(root, space)?;
        let account = record.account.public.clone();
        out.push(Expectation::Loaded {
            space: space.clone(),
            account: account.clone(),
            jwt: record.account.jwt.clone(),
        });
        let active = spec.state == crate::model::SpaceState::Active;
        if active && !added {
            continue;
        }
        if let Some(creds) = space_user(
            root,
            space,
            &account,
            "cotal-verifier",
            permissions::verifier(),
        )? {
            out.push(if active {
                Expectation::Accepts {
                    space: space.clone(),
                    creds,
                }
            } else {
                Expectation::Refuses {
                    space: space.clone(),
                    creds,
                }
            });
        }
    }
    for r in removals {
        out.push(Expectation::Unloaded {
            space: r.space.clone(),
            account: r.account.clone(),
        });
        if let Some(creds) = space_user(
            root,
            &r.space,
            &r.account,
            "cotal-verifier",
            permissions::verifier(),
        )? {
            out.push(Expectation::Refuses {
                space: r.space.clone(),
                creds,
            });
        }
    }
    Ok(out)
}

/// What the broker must show of a space archived (unloaded, refusing a fresh user) or brought
/// back (loaded with its record's JWT, asked through the system account). A return is not
/// checked with a client of the space: nats-server recovers an account's streams when the
/// account is first used, and streams recovered and then rolled back would stay half-alive
/// in the server until it restarts; the provisioning after the promotion uses it first and
/// waits for them.
fn archive_expectations(
    root: &Root,
    space: &SpaceName,
    account: &str,
    archived: bool,
) -> Result<Vec<Expectation>> {
    let record = account_record::load(root, space)?;
    if !archived {
        return Ok(vec![Expectation::Loaded {
            space: space.clone(),
            account: account.to_string(),
            jwt: record.account.jwt.clone(),
        }]);
    }
    let mut out = vec![Expectation::Unloaded {
        space: space.clone(),
        account: account.to_string(),
    }];
    if let Some(creds) = space_user(
        root,
        space,
        account,
        "cotal-verifier",
        permissions::verifier(),
    )? {
        out.push(Expectation::Refuses {
            space: space.clone(),
            creds,
        });
    }
    Ok(out)
}

/// Refuse when the inventory on disk is not what this apply expects (what the plan saw plus
/// its own writes): a record that vanished, changed or appeared under the lock would otherwise
/// be rendered (or silently dropped, evicting its tenant).
fn check_inventory(
    root: &Root,
    inv: &crate::observed::Inventory,
    expected: &ExpectedInventory,
) -> Result<()> {
    let mut moved = Vec::new();
    for (name, e) in expected {
        match inv.spaces.get(name) {
            None => moved.push(format!("{} vanished", name.quoted())),
            Some(s) if s.account_pub != e.account => moved.push(format!(
                "{} now holds account {} (the plan saw {})",
                name.quoted(),
                s.account_pub,
                e.account
            )),
            Some(s) if s.jwt != e.jwt => {
                moved.push(format!("{} holds another account JWT", name.quoted()))
            }
            Some(s)
                if !s
                    .sides
                    .values()
                    .map(|side| (&side.account_pub, &side.jwt))
                    .eq(e.sides.iter().map(|(a, j)| (a, j))) =>
            {
                moved.push(format!("{} holds other side accounts", name.quoted()))
            }
            Some(s) if s.archived.is_some() != e.archived => moved.push(format!(
                "{} was {} outside this apply",
                name.quoted(),
                if e.archived {
                    "brought back"
                } else {
                    "archived"
                }
            )),
            Some(_) => {}
        }
    }
    for name in inv.spaces.keys().filter(|n| !expected.contains_key(*n)) {
        moved.push(format!("{} appeared", name.quoted()));
    }
    if moved.is_empty() {
        return Ok(());
    }
    Err(Error::refused(
        Diagnostic::new(format!(
            "the account inventory in {} changed under the lock since the plan was made: {}.",
            root.auth_dir().display(),
            moved.join("; ")
        ))
        .blast("none from the promotion; it was not done, so the broker still serves the config it had.")
        .next("find who changed .cotal/auth/ during the apply, then run `cotal plan`"),
    ))
}
