//! The planner: `(desired, observed) -> Plan`, pure, as a pipeline of named stages: guards,
//! removals, the per-space diff, descriptions, the promotion, the order of steps.

use super::guards::{self, Refusal};
use super::{Action, Pins, Plan, Summary, describe, diff, order, promotion, removals, system};
use crate::desired::Desired;
use crate::digest;
use crate::observed::Observed;
use crate::render::{self, Node};

/// The broker's nodes, rendered from the same inventory. Today: one.
pub fn nodes(desired: &Desired, observed: &Observed) -> Vec<Node> {
    vec![Node {
        name: "local".into(),
        host: desired.broker.host.clone(),
        port: desired.broker.port,
        store_dir: observed.store_dir.clone(),
        max_file_store: desired.broker.max_file_store.map(|b| b.0),
        max_memory_store: desired.broker.max_memory_store.map(|b| b.0),
    }]
}

/// Compute the plan, or refuse.
pub fn compute(desired: &Desired, observed: &Observed) -> Result<Plan, Refusal> {
    let trust = guards::guard_trust(observed)?;
    guards::guard_liveness(observed)?;
    guards::guard_journal(observed)?;
    let node = nodes(desired, observed).remove(0);

    let removals = removals::collect(desired, observed);
    guards::guard_removals(desired, &observed.inventory, &removals)?;
    guards::guard_listener(observed, &node)?;
    let system = system::reissue(desired, observed, &removals);
    let diff = diff::diff(desired, observed, &removals, system.as_ref());
    guards::guard_sys_keys(observed, system.as_ref(), diff.adds.keys())?;
    super::capacity::guard_capacity(desired, observed)?;

    let described = describe::describe(desired, observed, &removals, &diff);
    let promotion =
        promotion::promotion(&trust, observed, &removals, &diff, system.as_ref(), &node)?;
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
            config_digest: observed
                .server_conf_text()
                .map(|c| digest::sha256(c.as_bytes()))
                .unwrap_or_else(|| "absent".into()),
        },
        broker_running: observed.process.is_running(),
        summary: Summary {
            add: count(Action::Add),
            change: count(Action::Change),
            remove: count(Action::Remove),
        },
        warnings: describe::warnings(desired, observed, &node)
            .into_iter()
            .chain(describe::channel_warnings(desired, observed, &diff))
            .collect(),
        changes: described.changes,
        steps,
        config: promotion.map(|p| p.config),
    })
}
