//! The planner: `(desired, observed) -> Plan`, pure, as a pipeline of named stages: guards,
//! removals, the per-space diff, descriptions, the promotion, the order of steps.

use super::guards::{self, Refusal};
use super::{Action, Pins, Plan, Summary, describe, diff, order, promotion, removals, system};
use crate::desired::Desired;
use crate::digest;
use crate::observed::Observed;
use crate::render::{self, Node};

/// The broker's nodes, each rendered from the same inventory: one server, or every node of
/// the cluster in `cotal.toml`'s order (each routing to all the others).
pub fn nodes(desired: &Desired, observed: &Observed) -> Vec<Node> {
    let max_file_store = desired.broker.max_file_store.map(|b| b.0);
    let max_memory_store = desired.broker.max_memory_store.map(|b| b.0);
    let Some(cluster) = &desired.cluster else {
        return vec![Node {
            name: crate::cluster::SINGLE_NODE.into(),
            host: desired.broker.host.clone(),
            port: desired.broker.port,
            cluster: None,
            store_dir: observed.store_dir.clone(),
            max_file_store,
            max_memory_store,
        }];
    };
    cluster
        .nodes
        .iter()
        .enumerate()
        .map(|(i, n)| Node {
            name: n.name.clone(),
            host: n.host.clone(),
            port: n.port,
            cluster: Some(render::ClusterBlock {
                name: cluster.name.clone(),
                listen: crate::model::Listener {
                    host: n.host.clone(),
                    port: n.cluster_port,
                }
                .to_string(),
                routes: cluster
                    .nodes
                    .iter()
                    .filter(|o| o.name != n.name)
                    .map(|o| o.route())
                    .collect(),
            }),
            store_dir: observed
                .nodes
                .get(i)
                .map(|o| o.store_dir.clone())
                .unwrap_or_else(|| observed.store_dir.clone()),
            max_file_store,
            max_memory_store,
        })
        .collect()
}

/// Compute the plan, or refuse.
pub fn compute(desired: &Desired, observed: &Observed) -> Result<Plan, Refusal> {
    let trust = guards::guard_trust(observed)?;
    guards::guard_liveness(observed)?;
    guards::guard_journal(observed)?;
    guards::guard_nodes(desired, observed)?;
    let nodes = nodes(desired, observed);

    let removals = removals::collect(desired, observed);
    guards::guard_removals(desired, &observed.inventory, &removals)?;
    guards::guard_cluster_removals(desired, observed, &removals)?;
    for node in &nodes {
        guards::guard_listener(observed, node)?;
    }
    let system = system::reissue(desired, observed, &removals);
    let diff = diff::diff(desired, observed, &removals, system.as_ref());
    guards::guard_sys_keys(observed, system.as_ref(), diff.adds.keys())?;
    guards::guard_degraded_adds(desired, observed, diff.adds.keys())?;
    super::capacity::guard_capacity(desired, observed)?;

    let described = describe::describe(desired, observed, &removals, &diff);
    let promotion =
        promotion::promotion(&trust, observed, &removals, &diff, system.as_ref(), &nodes)?;
    let steps = order::steps(
        desired,
        observed,
        &removals,
        &diff,
        &described,
        system.as_ref(),
        order::promotion_step(&promotion),
    );

    let count = |a: Action| described.changes.iter().filter(|c| c.action == a).count();
    Ok(Plan {
        format_version: super::FORMAT_VERSION,
        pins: Pins {
            generation: observed.generation.generation(),
            desired_digest: observed.desired_digest.clone(),
            inventory_digest: digest::preloads(&render::inventory_preloads(
                &observed.inventory.spaces,
            )),
            config_digest: observed.config_pin(),
        },
        broker_running: observed.process.is_running(),
        summary: Summary {
            add: count(Action::Add),
            change: count(Action::Change),
            remove: count(Action::Remove),
        },
        warnings: describe::warnings(desired, observed, &nodes)
            .into_iter()
            .chain(describe::channel_warnings(desired, observed, &diff))
            .collect(),
        changes: described.changes,
        steps,
        config: promotion.map(|p| p.config),
    })
}
