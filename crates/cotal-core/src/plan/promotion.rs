//! The one promotion of a plan: why the config is rendered and promoted (typed [`Reason`]s),
//! the config it will show, and the boot plan `cotal up` runs when the config on disk is not the
//! rendering of the inventory.

use super::blast::Blast;
use super::diff::Diff;
use super::guards::{Refusal, guard_trust};
use super::removals::Removals;
use super::system::SystemReissue;
use super::{ConfigChange, NodeConfigChange, Pins, Plan, Reason, Step};
use crate::desired::Desired;
use crate::model::{SpaceName, SpaceState};
use crate::observed::{BrokerTrust, GenerationState, Inventory, Observed};
use crate::render::{self, Node, Preload, Token};
use std::collections::BTreeMap;

/// The promotion step and the config change it shows, when the plan needs one.
pub struct Promotion {
    pub step: Step,
    pub config: ConfigChange,
}

/// Why the plan promotes the config, in the order people read them. Empty when it need not.
/// With them, the digest of the base it compared with the generation record's when that base
/// is every preload of the inventory (nothing leaves): then it is also the plan's inventory
/// pin, [`render::preloads_digest`] of [`crate::observed::preloads`], made once.
fn reasons_and_base(
    trust: &BrokerTrust,
    observed: &Observed,
    removals: &Removals,
    diff: &Diff,
    system: Option<&SystemReissue>,
    nodes: &[Node],
    replicas: u8,
) -> Result<(Vec<Reason>, Option<String>), Refusal> {
    let inv = &observed.inventory;
    let mut reasons = change_reasons(observed, removals, diff, system, nodes, replicas);
    // `base` is the inventory without the spaces this plan removes: what the promoted config
    // must hold when nothing is added or re-issued.
    let base: Vec<Preload> = inv
        .spaces
        .iter()
        .filter(|(n, s)| !removals.leaving(inv, n) && s.archived.is_none())
        .flat_map(|(n, s)| crate::observed::space_preloads(n, s))
        .collect();
    if base.is_empty() {
        return Ok((reasons, None));
    }
    // Both filter the same spaces in the same order; the base leaves out those leaving too.
    let whole = base.len()
        == inv
            .spaces
            .values()
            .filter(|s| s.archived.is_none())
            .map(|s| 1 + s.sides.len())
            .sum::<usize>();
    let mut drift = Drift {
        explained: !reasons.is_empty(),
        ..Drift::default()
    };
    // The base rendered for every node while its digest (compared with the generation
    // record's below) is made on another core.
    let (renders, base_digest) = rayon::join(
        || {
            nodes
                .iter()
                .map(|node| render::server_conf(trust, &base, node))
                .collect::<Result<Vec<_>, _>>()
        },
        || render::preloads_digest(&base),
    );
    let renders = renders.map_err(super::guards::render_refusal)?;
    for (node, base_render) in nodes.iter().zip(renders) {
        match observed.node_conf_text(&node.name) {
            None => drift.missing = true,
            Some(conf) if conf != base_render => {
                let label = if nodes.len() > 1 {
                    format!("node {}: ", node.name)
                } else {
                    String::new()
                };
                drifted_node(conf, &base_render, &label, &mut reasons, &mut drift);
            }
            _ => {}
        }
    }
    let Drift {
        explained,
        missing,
        drifted,
        settings,
        unexplained,
    } = drift;
    if !settings.is_empty() {
        reasons.push(Reason::Settings { changes: settings });
    }
    if missing {
        reasons.push(Reason::NoConfig);
    } else if drifted
        && !explained
        && (unexplained || !reasons.iter().any(|r| matches!(r, Reason::Settings { .. })))
    {
        reasons.push(Reason::ConfigDrift);
    } else if !drifted
        && let Some(server) = &observed.server
        && !server.behind.is_empty()
    {
        // The config on disk is the rendering, but a running node has loaded another.
        reasons.push(Reason::NodesBehind {
            nodes: server.behind.clone(),
        });
    }
    match &observed.generation {
        GenerationState::Valid(g) if g.inventory_digest == base_digest => {}
        _ if !reasons.is_empty() => {}
        GenerationState::Valid(_) => reasons.push(Reason::GenerationBehind),
        _ => reasons.push(Reason::NoGeneration),
    }
    Ok((reasons, whole.then_some(base_digest)))
}

/// The changes a plan makes that promote the config, in the order people read them: the
/// system account, served adds, removals still loaded, re-issues, side accounts, archives and
/// returns, store moves.
fn change_reasons(
    observed: &Observed,
    removals: &Removals,
    diff: &Diff,
    system: Option<&SystemReissue>,
    nodes: &[Node],
    replicas: u8,
) -> Vec<Reason> {
    let mut reasons = Vec::new();
    if system.is_some() {
        reasons.push(Reason::SystemAccount);
    }
    // A space added archived is never loaded: its record is all it gets.
    let served_adds: Vec<SpaceName> = diff
        .adds
        .iter()
        .filter(|(_, spec)| spec.state != SpaceState::Archived)
        .map(|(n, _)| n.clone())
        .collect();
    if !served_adds.is_empty() {
        reasons.push(Reason::Adds {
            spaces: served_adds,
        });
    }
    // Removed spaces the promoted config loads, or that the fence loads first.
    let still_loaded: Vec<SpaceName> = removals
        .iter()
        .filter(|(n, r)| observed.loads(&r.account) || super::fence::loads_archived(observed, n, r))
        .map(|(n, _)| n.clone())
        .collect();
    if !still_loaded.is_empty() {
        reasons.push(Reason::Removes {
            spaces: still_loaded,
        });
    }
    if !diff.reissues.is_empty() {
        reasons.push(Reason::Reissues {
            spaces: diff.reissues.keys().cloned().collect(),
        });
    }
    let sided: Vec<SpaceName> = diff
        .sides
        .keys()
        .filter(|n| !diff.adds.contains_key(*n))
        .cloned()
        .collect();
    if !sided.is_empty() {
        reasons.push(Reason::SideAccounts { spaces: sided });
    }
    let archivals = |archive: bool| -> Vec<SpaceName> {
        diff.archivals
            .iter()
            .filter(|(_, a)| **a == archive)
            .map(|(n, _)| n.clone())
            .collect()
    };
    let (archives, unarchives) = (archivals(true), archivals(false));
    if !archives.is_empty() {
        reasons.push(Reason::Archives { spaces: archives });
    }
    if !unarchives.is_empty() {
        reasons.push(Reason::Unarchives { spaces: unarchives });
    }
    let moves = super::settings::store_moves(observed, nodes, replicas);
    if !moves.is_empty() {
        reasons.push(Reason::StoreMove { moves });
    }
    reasons
}

/// What comparing each node's config on disk with the rendering of the base found.
#[derive(Default)]
struct Drift {
    /// A reason so far explains a difference.
    explained: bool,
    /// A node has no config on disk.
    missing: bool,
    /// A node's config differs from the rendering.
    drifted: bool,
    /// Settings cotal.toml changes (a node's name first in a cluster).
    settings: Vec<String>,
    /// Something else differs (the preload, the trust, a line cotal does not write): only that
    /// is drift.
    unexplained: bool,
}

/// A node's config `conf` differs from the rendering of the base: name the settings, the TLS
/// and route credential changes that explain it (each reason once), and note what does not.
fn drifted_node(
    conf: &str,
    base_render: &str,
    label: &str,
    reasons: &mut Vec<Reason>,
    drift: &mut Drift,
) {
    drift.drifted = true;
    match super::settings::changes(conf, base_render) {
        Some(changed) => {
            drift
                .settings
                .extend(changed.into_iter().map(|c| format!("{label}{c}")));
            if !super::settings::same_preload(conf, base_render) {
                drift.unexplained = true;
            }
        }
        None => drift.unexplained = true,
    }
    if let Some((before, after)) = tls_change(
        conf,
        base_render,
        render::tls_certificate_line,
        render::serves_tls,
    ) && !reasons.iter().any(|r| matches!(r, Reason::Tls { .. }))
    {
        reasons.push(Reason::Tls { before, after });
        drift.explained = true;
    }
    let rotation = crate::trust::route_auth::rotation_of(base_render);
    if crate::trust::route_auth::rotation_of(conf) != rotation
        && !reasons
            .iter()
            .any(|r| matches!(r, Reason::RouteCredential { .. }))
    {
        reasons.push(Reason::RouteCredential { rotation });
        drift.explained = true;
    }
    if let Some((before, after)) = tls_change(
        conf,
        base_render,
        render::route_tls_certificate_line,
        render::routes_tls,
    ) && !reasons.iter().any(|r| matches!(r, Reason::RouteTls { .. }))
    {
        reasons.push(Reason::RouteTls { before, after });
        drift.explained = true;
    }
}

/// A TLS block of `conf` that is not the rendering's (`certificate`: its certificate line;
/// `on`: whether it is there at all): the certificate line before and after.
fn tls_change(
    conf: &str,
    base_render: &str,
    certificate: fn(&str) -> Option<&str>,
    on: fn(&str) -> bool,
) -> Option<(Option<String>, Option<String>)> {
    let (before, after) = (certificate(conf), certificate(base_render));
    (before != after || on(conf) != on(base_render))
        .then(|| (before.map(str::to_string), after.map(str::to_string)))
}

/// What a store moved away from the data takes out of service: every space's streams (their
/// figures when the broker counted them), left unserved in the old store.
fn store_move_blast(observed: &Observed) -> Blast {
    let spaces = &observed.inventory.spaces;
    let streams: Vec<_> = spaces
        .values()
        .flat_map(|s| s.usage.streams.iter().cloned())
        .collect();
    let counted = spaces
        .values()
        .all(|s| s.usage.source != crate::observed::UsageSource::Unknown);
    Blast {
        touched: spaces.keys().cloned().collect(),
        messages_destroyed: if counted {
            streams.iter().map(|s| s.messages).sum()
        } else {
            None
        },
        bytes_destroyed: streams.iter().map(|s| s.bytes).sum(),
        streams_destroyed: streams,
        data_uncounted: !counted,
        out_of_service: true,
        siblings: Some(format!(
            "takes the data of all {} space(s) out of service: the broker starts on a store without it (kept unserved where it is; not deleted)",
            spaces.len()
        )),
        ..Blast::default()
    }
}

/// The promotion of the plan, with the config it will show, when there are reasons for one;
/// beside it, the inventory's digest when the check of the base made it (see
/// [`reasons_and_base`]).
pub fn promotion(
    trust: &BrokerTrust,
    observed: &Observed,
    removals: &Removals,
    diff: &Diff,
    system: Option<&SystemReissue>,
    nodes: &[Node],
    replicas: u8,
) -> Result<(Option<Promotion>, Option<String>), Refusal> {
    let (reasons, inventory_digest) =
        reasons_and_base(trust, observed, removals, diff, system, nodes, replicas)?;
    let inv = &observed.inventory;
    let projected = projected_preloads(inv, diff, removals);
    if reasons.is_empty() || projected.is_empty() {
        return Ok((None, inventory_digest));
    }
    let mut projected_trust = trust.clone();
    if system.is_some() {
        projected_trust.sys_jwt = "(re-issued at apply)".into();
    }
    let mut changes = Vec::new();
    for node in nodes {
        let after = render::server_conf(&projected_trust, &projected, node)
            .map_err(super::guards::render_refusal)?;
        changes.push(NodeConfigChange {
            name: node.name.clone(),
            before: observed
                .node_conf_text(&node.name)
                .map(render::shorten_tokens),
            after: render::shorten_tokens(&after),
        });
    }
    // The spaces this plan adds or re-issues have their own blast radius.
    let completing = |space: &SpaceName| matches!(&observed.journal, crate::observed::JournalState::Valid(j) if j.adds(space));
    let kept = projected
        .iter()
        .map(|p| p.space)
        .collect::<std::collections::BTreeSet<_>>()
        .into_iter()
        .filter(|space| {
            !diff.adds.contains_key(*space)
                && !diff.reissues.contains_key(*space)
                && !diff.sides.contains_key(*space)
                && !diff.archivals.contains_key(*space)
                && !completing(space)
        })
        .count();
    let siblings = if observed.is_running() {
        let nodes = if observed.is_cluster() {
            format!(" on all {} nodes, reloaded at once", observed.nodes.len())
        } else {
            String::new()
        };
        match kept {
            0 => format!("rewrites the config every space shares{nodes}; hot reload, no restart"),
            _ => format!(
                "rewrites the config every space shares{nodes}; hot reload: the {kept} untouched space{} see{} no dropped connection and no data change",
                if kept == 1 { "" } else { "s" },
                if kept == 1 { "s" } else { "" }
            ),
        }
    } else {
        "the broker is stopped: the new config takes effect at the next `cotal up`".into()
    };
    let from = observed.generation.generation();
    let moved_away = reasons.iter().any(
        |r| matches!(r, Reason::StoreMove { moves } if moves.iter().any(|m| m.out_of_service)),
    );
    let blast = if moved_away {
        store_move_blast(observed)
    } else {
        Blast {
            siblings: Some(siblings),
            ..Blast::default()
        }
    };
    Ok((
        Some(Promotion {
            step: Step::PromoteConfig {
                from_generation: from,
                to_generation: from + 1,
                reasons,
                blast,
            },
            config: config_change(changes, !observed.is_cluster()),
        }),
        inventory_digest,
    ))
}

/// The change shown for every node: the first changed node's diff, the nodes whose change is
/// the same but for their own lines (listener, name, routes, store; on a first promotion,
/// every node's own lines are new), the others whole, and the nodes whose file stays as it is.
fn config_change(changes: Vec<NodeConfigChange>, single: bool) -> ConfigChange {
    let (mut changed, unchanged): (Vec<NodeConfigChange>, Vec<NodeConfigChange>) = changes
        .into_iter()
        .partition(|c| c.before.as_deref() != Some(c.after.as_str()));
    let mut unchanged: Vec<String> = unchanged.into_iter().map(|c| c.name).collect();
    if changed.is_empty() {
        // Promoted again with the same bytes (the generation record behind): show the first.
        changed.push(NodeConfigChange {
            name: unchanged.remove(0),
            before: None,
            after: String::new(),
        });
    }
    let first = changed.remove(0);
    let shared = |t: &Option<String>| t.as_deref().map(render::shared_part);
    let own_kept = |c: &NodeConfigChange| match c.before.as_deref() {
        None => true,
        Some(before) => render::node_part(before) == render::node_part(&c.after),
    };
    let (mut same_on, mut own) = (Vec::new(), Vec::new());
    for c in changed {
        let same = own_kept(&first)
            && own_kept(&c)
            && c.before.is_some() == first.before.is_some()
            && shared(&c.before) == shared(&first.before)
            && render::shared_part(&c.after) == render::shared_part(&first.after);
        if same {
            same_on.push(c.name);
        } else {
            own.push(c);
        }
    }
    ConfigChange {
        node: (!single).then_some(first.name),
        before: first.before,
        after: first.after,
        same_on,
        nodes: own,
        unchanged,
    }
}

/// The inventory as it will be after the plan, with placeholders for tokens minted at apply.
fn projected_preloads<'a>(
    inv: &'a Inventory,
    diff: &'a Diff,
    removals: &Removals,
) -> Vec<Preload<'a>> {
    const NEW_ACCOUNT: &str = "<new account>";
    const NEW_SIDE: &str = "<new side account>";
    let mut out: BTreeMap<&SpaceName, Vec<Preload<'a>>> = BTreeMap::new();
    for (name, space) in &inv.spaces {
        let archived = match diff.archivals.get(name) {
            Some(&archive) => archive,
            None => space.archived.is_some(),
        };
        if removals.leaving(inv, name) || archived {
            continue;
        }
        let token = if diff.reissues.contains_key(name) {
            Token::Pending("(re-issued at apply)")
        } else {
            Token::Verified(&space.jwt)
        };
        let mut preloads = vec![Preload {
            space: name,
            account: &space.account_pub,
            token,
            side: None,
        }];
        let sides = diff.sides.get(name);
        for (role, side) in &space.sides {
            if sides.is_some_and(|c| c.drop.contains(role)) {
                continue;
            }
            let rewritten = sides.is_some_and(|c| c.write.iter().any(|w| &w.role == role));
            preloads.push(Preload {
                space: name,
                account: &side.account_pub,
                token: if rewritten {
                    Token::Pending("(re-issued at apply)")
                } else {
                    Token::Verified(&side.jwt)
                },
                side: Some(role),
            });
        }
        for w in sides.into_iter().flat_map(|c| &c.write) {
            if !space.sides.contains_key(&w.role) {
                preloads.push(Preload {
                    space: name,
                    account: NEW_SIDE,
                    token: Token::Pending("(minted at apply)"),
                    side: Some(&w.role),
                });
            }
        }
        out.insert(name, preloads);
    }
    for (name, spec) in &diff.adds {
        if spec.state == SpaceState::Archived {
            continue;
        }
        let mut preloads = vec![Preload {
            space: name,
            account: NEW_ACCOUNT,
            token: Token::Pending("(minted at apply)"),
            side: None,
        }];
        preloads.extend(
            diff.sides
                .get(name)
                .into_iter()
                .flat_map(|c| &c.write)
                .map(|w| Preload {
                    space: name,
                    account: NEW_SIDE,
                    token: Token::Pending("(minted at apply)"),
                    side: Some(&w.role),
                }),
        );
        out.insert(name, preloads);
    }
    // Every new account shows the same placeholder key; the render's duplicate check is for
    // signed tokens only.
    out.into_values().flatten().collect()
}

/// Why `cotal up` must promote before it starts the broker: the config on disk is not the
/// rendering of the inventory, or the generation record does not match it. Empty when it is.
pub fn boot_reasons(desired: &Desired, observed: &Observed) -> Result<Vec<Reason>, Refusal> {
    let trust = guard_trust(observed)?;
    let preloads = crate::observed::preloads(&observed.inventory.spaces);
    let mut reasons = Vec::new();
    let nodes = super::nodes(desired, observed);
    // A boot that would start on another store than the data's says so (`up` refuses it
    // unless told to start empty), and records the move when it goes ahead.
    let moves = super::settings::store_moves(observed, &nodes, desired.topology.replicas);
    if !moves.is_empty() {
        reasons.push(Reason::StoreMove { moves });
    }
    for node in nodes {
        let rendered =
            render::server_conf(&trust, &preloads, &node).map_err(super::guards::render_refusal)?;
        if observed.node_conf_text(&node.name) != Some(rendered.as_str()) {
            reasons.push(Reason::BootConfigDrift);
            break;
        }
    }
    if !matches!(&observed.generation,
        GenerationState::Valid(g) if g.inventory_digest == render::preloads_digest(&preloads))
    {
        reasons.push(Reason::BootGenerationDrift);
    }
    Ok(reasons)
}

/// The plan `cotal up` runs before it starts the broker: only the promotion, when the promoted
/// config is not the inventory's rendering (empty otherwise).
pub fn boot_plan(desired: &Desired, observed: &Observed) -> Result<Plan, Refusal> {
    let reasons = boot_reasons(desired, observed)?;
    let g = observed.generation.generation();
    Ok(Plan {
        notice: None,
        target: None,
        format_version: super::FORMAT_VERSION,
        pins: Pins {
            generation: g,
            desired_digest: observed.desired_digest.clone(),
            inventory_digest: String::new(),
            config_digest: String::new(),
        },
        broker_running: false,
        summary: Default::default(),
        changes: Vec::new(),
        steps: if reasons.is_empty() {
            Vec::new()
        } else {
            vec![Step::PromoteConfig {
                from_generation: g,
                to_generation: g + 1,
                reasons,
                blast: Blast::default(),
            }]
        },
        warnings: Vec::new(),
        config: None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reasons_read_as_they_always_did() {
        let a = SpaceName::parse("a").unwrap();
        let b = SpaceName::parse("b").unwrap();
        assert_eq!(
            Reason::Adds {
                spaces: vec![a.clone(), b.clone()]
            }
            .to_string(),
            "adds \"a\" and \"b\""
        );
        assert_eq!(
            Reason::Changes { spaces: vec![a, b] }.to_string(),
            "changes \"a\", \"b\""
        );
        assert!(Reason::Reissues { spaces: vec![] }.is_space_change());
        assert!(!Reason::ConfigDrift.is_space_change());
    }

    #[test]
    fn the_inventory_pin_is_every_preload_s_digest_whether_or_not_a_space_leaves() {
        let (trust, mut o, desired) = root_of(&["a", "b", "c"]);
        let preloads = crate::observed::preloads(&o.inventory.spaces);
        let whole = render::preloads_digest(&preloads);
        let pin = |desired: &Desired, o: &Observed| {
            let intent = crate::plan::Intent::default();
            crate::plan::compute(desired, o, &intent)
                .unwrap()
                .pins
                .inventory_digest
        };
        // Unconverged (no config, no generation): the promotion's check makes it.
        assert_eq!(pin(&desired, &o), whole);
        // Converged: no promotion, the check still made it.
        let nodes = crate::plan::nodes(&desired, &o);
        let conf = render::server_conf(&trust, &preloads, &nodes[0]).unwrap();
        o.nodes[0].server_conf = Some(crate::observed::PromotedConfig::new(conf));
        o.generation = GenerationState::Valid(crate::observed::GenerationRecord {
            generation: 3,
            inventory_digest: whole.clone(),
        });
        let (_, made) = reasons_and_base(
            &trust,
            &o,
            &Removals::default(),
            &Diff::default(),
            None,
            &nodes,
            1,
        )
        .unwrap();
        assert_eq!(made.as_deref(), Some(whole.as_str()));
        assert_eq!(pin(&desired, &o), whole);
        // "c" leaves: the base is not every preload, and the pin is still the inventory's.
        let fewer = crate::desired::parse("version = 1\n[spaces.a]\n[spaces.b]\n", "f").unwrap();
        let removals = crate::plan::removals::collect(&fewer, &o);
        assert_eq!(removals.iter().count(), 1);
        let (_, made) =
            reasons_and_base(&trust, &o, &removals, &Diff::default(), None, &nodes, 1).unwrap();
        assert_eq!(made, None);
        assert_eq!(pin(&fewer, &o), whole);
    }

    fn root_of(names: &[&str]) -> (BrokerTrust, Observed, Desired) {
        let (trust, spaces) = crate::testing::minted(names);
        let refs: Vec<(&str, _)> = spaces
            .iter()
            .map(|(n, s)| (n.as_str(), s.clone()))
            .collect();
        let mut o = crate::testing::observed(&refs);
        o.broker = crate::observed::BrokerRecordState::Valid(trust.clone());
        o.system.monitor = crate::testing::monitor_observed(&trust);
        let text: String = names.iter().map(|n| format!("[spaces.{n}]\n")).collect();
        let desired = crate::desired::parse(&format!("version = 1\n{text}"), "f").unwrap();
        (trust, o, desired)
    }

    #[test]
    fn a_converged_root_needs_no_promotion_and_drift_says_why() {
        let (trust, mut o, desired) = root_of(&["design"]);
        let nodes = crate::plan::nodes(&desired, &o);
        let node = &nodes[0];
        let none = Removals::default();
        let diff = Diff::default();
        assert_eq!(
            reasons_and_base(&trust, &o, &none, &diff, None, &nodes, 1)
                .map(|(r, _)| r)
                .unwrap(),
            vec![Reason::NoConfig]
        );
        let preloads = crate::observed::preloads(&o.inventory.spaces);
        let conf = render::server_conf(&trust, &preloads, node).unwrap();
        o.nodes[0].server_conf = Some(crate::observed::PromotedConfig::new(conf.clone()));
        assert_eq!(
            reasons_and_base(&trust, &o, &none, &diff, None, &nodes, 1)
                .map(|(r, _)| r)
                .unwrap(),
            vec![Reason::NoGeneration]
        );
        o.generation = GenerationState::Valid(crate::observed::GenerationRecord {
            generation: 3,
            inventory_digest: render::preloads_digest(&preloads),
        });
        assert!(
            reasons_and_base(&trust, &o, &none, &diff, None, &nodes, 1)
                .map(|(r, _)| r)
                .unwrap()
                .is_empty()
        );
        assert!(boot_plan(&desired, &o).unwrap().is_empty());
        o.nodes[0].server_conf = Some(crate::observed::PromotedConfig::new(format!(
            "{conf}# edited\n"
        )));
        assert_eq!(
            reasons_and_base(&trust, &o, &none, &diff, None, &nodes, 1)
                .map(|(r, _)| r)
                .unwrap(),
            vec![Reason::ConfigDrift]
        );
        let boot = boot_plan(&desired, &o).unwrap();
        assert!(
            matches!(&boot.steps[..], [Step::PromoteConfig { reasons, from_generation: 3, .. }]
            if reasons == &vec![Reason::BootConfigDrift])
        );
    }

    const CLUSTER: &str = "version = 1\n[cluster]\nname = \"c\"\n[[cluster.nodes]]\nname = \"n1\"\nport = 4222\ncluster_port = 6222\n[[cluster.nodes]]\nname = \"n2\"\nport = 4223\ncluster_port = 6223\n[[cluster.nodes]]\nname = \"n3\"\nport = 4224\ncluster_port = 6224\n";

    #[test]
    fn a_cluster_plan_shows_the_shared_change_once_and_a_node_with_its_own_whole() {
        let (trust, mut o, _) = root_of(&["design"]);
        let parse = |extra: &str| crate::desired::parse(&format!("{CLUSTER}{extra}"), "f").unwrap();
        let converged = parse("[spaces.design]\n");
        let preloads = crate::observed::preloads(&o.inventory.spaces);
        let rendered = crate::plan::nodes(&converged, &o);
        o.nodes = converged
            .topology
            .nodes
            .iter()
            .zip(&rendered)
            .map(|(spec, n)| {
                let mut node = crate::testing::node(spec.clone(), &n.store_dir.to_string_lossy());
                node.server_conf = Some(crate::observed::PromotedConfig::new(
                    render::server_conf(&trust, &preloads, n).unwrap(),
                ));
                node
            })
            .collect();
        o.generation = GenerationState::Valid(crate::observed::GenerationRecord {
            generation: 4,
            inventory_digest: render::preloads_digest(&preloads),
        });
        let p = crate::plan::compute(&converged, &o, &Default::default()).unwrap();
        assert!(p.is_empty(), "{:#?}", p.steps);

        // An add changes every node the same way: shown once.
        let plan = crate::plan::compute(
            &parse("[spaces.design]\n[spaces.ops]\n"),
            &o,
            &Default::default(),
        )
        .unwrap();
        let config = plan.config.unwrap();
        assert_eq!(config.node.as_deref(), Some("n1"));
        assert_eq!(config.same_on, ["n2", "n3"]);
        assert!(config.nodes.is_empty());
        assert!(config.after.contains("server_name: \"n1\""));

        // A hand edit of node 2 alone: its diff is the one shown, the others named unchanged.
        let mut edited = o.clone();
        let conf = edited.nodes[1].server_conf.as_ref().unwrap().text.clone();
        edited.nodes[1].server_conf = Some(crate::observed::PromotedConfig::new(format!(
            "{conf}# edited\n"
        )));
        let config = crate::plan::compute(&converged, &edited, &Default::default())
            .unwrap()
            .config
            .unwrap();
        assert_eq!(config.node.as_deref(), Some("n2"));
        assert_eq!(config.unchanged, ["n1", "n3"]);
        assert!(config.same_on.is_empty() && config.nodes.is_empty());

        // A first promotion: one diff, the other nodes named (their own lines are all new).
        let mut fresh = o.clone();
        for n in fresh.nodes.iter_mut() {
            n.server_conf = None;
        }
        let config = crate::plan::compute(&converged, &fresh, &Default::default())
            .unwrap()
            .config
            .unwrap();
        assert_eq!(config.same_on, ["n2", "n3"]);
        assert!(config.nodes.is_empty());

        // Node 2 moving its route port changes its own lines and the others' routes: each
        // node's diff is its own, every one shown whole.
        let moved = format!("{CLUSTER}[spaces.design]\n")
            .replace("cluster_port = 6223", "cluster_port = 6299");
        let plan = crate::plan::compute(
            &crate::desired::parse(&moved, "f").unwrap(),
            &o,
            &Default::default(),
        )
        .unwrap();
        let config = plan.config.unwrap();
        assert_eq!(config.node.as_deref(), Some("n1"));
        assert!(config.after.contains("nats-route://127.0.0.1:6299"));
        assert!(config.same_on.is_empty());
        assert_eq!(config.nodes.len(), 2);
        assert!(config.nodes[0].after.contains("listen: \"127.0.0.1:6299\""));
        assert!(
            config.nodes[1]
                .after
                .contains("nats-route://127.0.0.1:6299")
        );
    }
}
