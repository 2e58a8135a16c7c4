//! The planner: `(desired, observed) -> Plan`, pure, as a pipeline of named stages: guards,
//! removals, the per-space diff, descriptions, the promotion, the order of steps.

use super::guards::{self, Refusal};
use super::{
    Action, Intent, Pins, Plan, Step, Summary, describe, diff, order, promotion, purges, removals,
    system,
};
use crate::desired::Desired;
use crate::observed::Observed;
use crate::render::{self, Node};

/// The broker's nodes, each rendered from the same inventory, in `cotal.toml`'s order: a
/// single server's one node, or every node of a cluster (each routing to all the others).
/// Each node's absolute store is the one observed of it.
pub fn nodes(desired: &Desired, observed: &Observed) -> Vec<Node> {
    let topology = &desired.topology;
    let max_file_store = desired.broker.max_file_store.map(|b| b.0);
    let max_memory_store = desired.broker.max_memory_store.map(|b| b.0);
    topology
        .nodes
        .iter()
        .map(|n| Node {
            name: n.name.clone(),
            host: n.host.clone(),
            port: n.port,
            cluster: topology.cluster.as_ref().map(|name| render::ClusterBlock {
                name: name.clone(),
                listen: n.route_listen().map(|l| l.to_string()).unwrap_or_default(),
                routes: topology
                    .nodes
                    .iter()
                    .filter(|o| o.name != n.name)
                    .filter_map(|o| o.route())
                    .collect(),
                routes_include: crate::trust::route_auth::include_name(
                    &observed
                        .node(&n.name)
                        .map(|o| o.files.conf_file_name())
                        .unwrap_or_else(|| "server.conf".into()),
                ),
                credential: None,
                rotation: observed.route_rotation,
                tls: topology.route_tls.as_ref().map(|t| {
                    listener_tls(
                        t,
                        observed.route_tls.as_ref().and_then(|o| o.facts.as_ref()),
                    )
                }),
            }),
            store_dir: observed
                .node(&n.name)
                .unwrap_or(observed.first())
                .store_dir
                .clone(),
            max_file_store,
            max_memory_store,
            tls: desired
                .broker
                .tls
                .as_ref()
                .map(|t| listener_tls(t, observed.tls.as_ref().and_then(|o| o.facts.as_ref()))),
            monitoring: desired.broker.monitoring.clone(),
            websocket: desired.broker.websocket.clone(),
            include: observed
                .include
                .as_ref()
                .filter(|i| i.problems.is_empty())
                .map(|i| render::Include {
                    path: i.path.clone(),
                    text: i.text.clone(),
                    values: i.values.clone(),
                }),
            log_rotation: desired.broker.log_rotation,
        })
        .collect()
}

/// A listener's TLS as `[broker.tls]` or `[cluster.tls]` declares it, with the certificate
/// observation read (its absolute paths, fingerprint and expiry).
fn listener_tls(
    t: &crate::desired::tls_config::TlsSettings,
    facts: Option<&crate::observed::TlsFacts>,
) -> render::ListenerTls {
    let path = |p: &str| p.to_string();
    render::ListenerTls {
        cert_file: facts.map_or_else(|| path(&t.cert.path), |f| f.cert_file.display().to_string()),
        key_file: facts.map_or_else(|| path(&t.key.path), |f| f.key_file.display().to_string()),
        ca_file: match (facts.and_then(|f| f.ca_file.as_ref()), &t.ca) {
            (Some(ca), _) => Some(ca.display().to_string()),
            (None, Some(ca)) => Some(path(&ca.path)),
            (None, None) => None,
        },
        verify: t.verify,
        timeout_ms: t.timeout_ms,
        certificate: facts.map(|f| (f.fingerprint.clone(), f.not_after)),
        ca_fingerprint: facts.and_then(|f| f.ca_fingerprint.clone()),
    }
}

/// Revocations an expiry made needless, kept until asked: the plan says so, and how.
fn prune_warning(observed: &Observed, intent: &Intent) -> Option<String> {
    if intent.prune_revocations || intent.rotate.sys {
        return None;
    }
    let prunable = super::system::prunable(observed);
    (!prunable.is_empty()).then(|| format!(
        "{} revocation(s) of monitoring users whose recorded expiry has passed stay in the monitoring account's JWT ({}); `cotal apply --prune-revocations` drops them: check the host's clock first (a clock ahead would let creds whose expiry has not really passed connect again)",
        prunable.len(),
        prunable.join(", ")
    ))
}

/// Compute the plan, or refuse: a pure function of what `cotal.toml` says, what was observed,
/// and what this run asks on top ([`Intent`]).
pub fn compute(desired: &Desired, observed: &Observed, intent: &Intent) -> Result<Plan, Refusal> {
    // A space an older cotal recorded under another Unicode form of its declared name is that
    // space (see `Desired::with_recorded_names`).
    let rekeyed = desired.with_recorded_names(observed.inventory.spaces.keys());
    let desired = rekeyed.as_ref().unwrap_or(desired);
    let trust = guards::guard_trust(observed)?;
    guards::guard_kept_imports(observed, &trust)?;
    guards::guard_liveness(observed)?;
    guards::guard_journal(observed)?;
    guards::guard_nodes(desired, observed, intent)?;
    let nodes = nodes(desired, observed);

    let mut removals = removals::collect(desired, observed);
    guards::guard_removals(desired, observed, &removals)?;
    let receipt_warnings = super::relocations::prove(observed, &mut removals, &intent.relocated)?;
    guards::guard_returns(desired, observed)?;
    guards::guard_cluster_removals(desired, observed, &removals)?;
    for node in &nodes {
        guards::guard_listener(observed, node)?;
        guards::guard_monitoring(observed, node)?;
    }
    super::tls::guard_tls(desired, observed, &nodes)?;
    guards::guard_include(observed)?;
    guards::guard_artifact_shrink(desired, observed)?;
    let purges = purges::collect(desired, observed, &intent.purge, &removals)?;
    let not_started = purges::not_started(observed, &purges);
    let system = system::reissue(desired, observed, intent);
    let diff = diff::diff(
        desired,
        observed,
        intent,
        &removals,
        system.as_ref(),
        purges,
    );
    guards::guard_sys_keys(observed, system.as_ref(), diff.adds.keys())?;
    guards::guard_degraded_adds(desired, observed, diff.adds.keys())?;
    super::capacity::guard_capacity(desired, observed)?;
    super::capacity::guard_open_files(desired, observed, diff.adds.keys())?;

    let described = describe::describe(desired, observed, &removals, &diff);
    // The config's pin (a digest of a few MB at thousands of spaces) is made beside the
    // promotion, whose check makes the inventory's (unless spaces leave).
    let (promoted, config_digest) = rayon::join(
        || {
            promotion::promotion(
                &trust,
                observed,
                &removals,
                &diff,
                system.as_ref(),
                &nodes,
                desired.topology.replicas,
            )
        },
        || observed.config_pin(),
    );
    let (mut promotion, inventory_digest) = promoted?;
    let pins = Pins {
        generation: observed.generation.generation(),
        desired_digest: observed.desired_digest.clone(),
        inventory_digest: inventory_digest.unwrap_or_else(|| {
            render::preloads_digest(&crate::observed::preloads(&observed.inventory.spaces))
        }),
        config_digest,
    };
    let fence = super::fence::fence(observed, &removals, &diff, &described);
    // The fence is a promotion of its own: the final one starts from the generation it made.
    if fence.is_some()
        && let Some(Step::PromoteConfig {
            from_generation,
            to_generation,
            ..
        }) = promotion.as_mut().map(|p| &mut p.step)
    {
        *from_generation += 1;
        *to_generation += 1;
    }
    let steps = order::steps(
        desired,
        observed,
        &removals,
        &diff,
        &described,
        system.as_ref(),
        order::Promotions {
            fence,
            config: order::promotion_step(&promotion),
        },
    );

    let count = |a: Action| described.changes.iter().filter(|c| c.action == a).count();
    Ok(Plan {
        notice: None,
        target: None,
        format_version: super::FORMAT_VERSION,
        pins,
        broker_running: observed.is_running(),
        summary: Summary {
            add: count(Action::Add),
            change: count(Action::Change),
            remove: count(Action::Remove),
            settings: super::settings_changed(&steps),
        },
        warnings: describe::warnings(desired, observed, &nodes)
            .into_iter()
            .chain(describe::channel_warnings(desired, observed, &diff))
            .chain(super::tls::warnings(desired, observed))
            .chain(not_started)
            .chain(receipt_warnings)
            .chain(prune_warning(observed, intent))
            .collect(),
        changes: described.changes,
        steps,
        config: promotion.map(|p| p.config),
    })
}
