//! What a config's broker settings are, and how two of them differ, so a plan names the
//! setting `cotal.toml` changes (`jetstream.store_dir: "/a" -> "/b"`) instead of calling the
//! difference drift, and a change of where a node's data lives is planned as what it is: every
//! space's data taken out of service.
//!
//! Invariants: pure; a config's settings are its `key: value` lines outside `resolver_preload`,
//! by their block path (`jetstream.store_dir`), comments left out; the trust lines (`operator`,
//! `system_account`, `resolver`) and the preload are not settings: a difference there is not
//! one `cotal.toml` asks for.

use crate::observed::Observed;
use crate::render::Node;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::path::PathBuf;

/// Keys whose difference is not a setting of `cotal.toml`.
const TRUST: [&str; 3] = ["operator", "system_account", "resolver"];

/// The settings of `conf` by their block path, or `None` when a line outside the preload is
/// not one this reader knows (a hand edit in a form cotal does not write).
fn settings(conf: &str) -> Option<BTreeMap<String, String>> {
    let mut out = BTreeMap::new();
    let mut path: Vec<String> = Vec::new();
    let mut in_preload = false;
    // The inlined `[broker] include`, between its marker comments: read as nats-server reads
    // it (a list over lines, trailing comments), each setting `include.KEY`.
    let mut include: Option<Vec<&str>> = None;
    for line in conf.lines() {
        let t = line.trim();
        if let Some(lines) = &mut include {
            if t.starts_with("# end of include ") {
                let text = lines.join("\n");
                let (values, problems) = crate::desired::include::parse(&text, "include");
                if problems.is_empty() {
                    for (key, value) in values {
                        out.insert(format!("include.{key}"), value.to_string());
                    }
                } else {
                    out.insert(
                        "include".into(),
                        crate::trust::digest::sha256(text.as_bytes()),
                    );
                }
                include = None;
            } else {
                lines.push(line);
            }
            continue;
        }
        if in_preload {
            if t == "}" {
                in_preload = false;
            }
            continue;
        }
        if t.starts_with("# include ") && path.is_empty() {
            include = Some(Vec::new());
            continue;
        }
        if t.is_empty() || t.starts_with('#') {
            continue;
        }
        if t.starts_with("resolver_preload") && t.ends_with('{') {
            in_preload = true;
        } else if let Some(block) = t.strip_suffix('{') {
            path.push(block.trim().trim_end_matches(':').trim().to_string());
        } else if t == "}" {
            path.pop()?;
        } else if let Some((key, value)) = t.split_once(':').or_else(|| t.split_once(' ')) {
            let mut full = path.clone();
            full.push(key.trim().to_string());
            out.insert(full.join("."), value.trim().to_string());
        } else {
            return None;
        }
    }
    Some(out)
}

/// `key: old -> new` for each setting that differs between the promoted config `before` and
/// the rendering `after`, in key order; `None` when they differ elsewhere (the preload, the
/// trust lines, or a line cotal does not write): that is drift, not a setting.
pub fn changes(before: &str, after: &str) -> Option<Vec<String>> {
    let (b, a) = (settings(before)?, settings(after)?);
    let mut out = Vec::new();
    for key in b.keys().chain(a.keys().filter(|k| !b.contains_key(*k))) {
        let (old, new) = (b.get(key), a.get(key));
        if old == new {
            continue;
        }
        if TRUST.contains(&key.as_str()) {
            return None;
        }
        // A hand-edited line may hold anything: shown escaped, as tenant text is.
        let shown = |v: Option<&String>| {
            v.map_or("(unset)".to_string(), |v| {
                crate::space::channels::displayable(v)
            })
        };
        out.push(format!(
            "{}: {} -> {}",
            crate::space::channels::displayable(key),
            shown(old),
            shown(new)
        ));
    }
    Some(out)
}

/// Whether the preloads of two configs (the `resolver_preload {}` blocks) are the same.
pub fn same_preload(before: &str, after: &str) -> bool {
    fn preload(conf: &str) -> Option<&str> {
        let start = conf.find("\nresolver_preload {")?;
        Some(&conf[start..])
    }
    preload(before) == preload(after)
}

/// A node whose store is not where the root's data lives.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct StoreMove {
    pub node: String,
    /// Where its data lives (the recorded store, else the promoted config's).
    pub from: PathBuf,
    /// Where the rendering puts its store.
    pub to: PathBuf,
    /// The store at `to` is the one at `from`, moved with its data (its `.cotal-store-id` is
    /// the recorded one): nothing is taken out of service.
    pub carried: bool,
    /// The store at `from` holds data (JetStream's folder has an entry).
    pub holds_data: bool,
    /// The spaces' data is taken out of service: the store it leaves holds data, and the
    /// broker would start on a store without it (and in a cluster, too few nodes keep one).
    pub out_of_service: bool,
    /// A cluster node leaving its data: it catches up from the replicas on the others.
    #[serde(default)]
    pub caught_up: bool,
}

/// Every rendered node whose store is not where its data lives; `replicas` is how many nodes
/// hold each stream.
pub fn store_moves(observed: &Observed, nodes: &[Node], replicas: u8) -> Vec<StoreMove> {
    let has_data = !observed.inventory.spaces.is_empty();
    let mut out = Vec::new();
    for n in nodes {
        let Some(o) = observed.node(&n.name) else {
            continue;
        };
        let Some(home) = &o.store_home else { continue };
        let (from, id) = (home.dir.clone(), home.id.clone());
        if from == n.store_dir {
            continue;
        }
        let carried = id.is_some() && id == o.store_id;
        out.push(StoreMove {
            node: n.name.clone(),
            from,
            to: n.store_dir.clone(),
            carried,
            holds_data: o.store_holds_data,
            out_of_service: has_data && !carried && o.store_holds_data,
            caught_up: false,
        });
    }
    // In a cluster whose streams have replicas, a node that moves catches up from the
    // replicas on the others: the data leaves service only when as many stores as there are
    // replicas move away from it (which ones hold a stream is the cluster's choice).
    let lost = out.iter().filter(|m| m.out_of_service).count();
    if observed.is_cluster() && replicas > 1 && lost < usize::from(replicas) {
        for m in out.iter_mut().filter(|m| m.out_of_service) {
            m.out_of_service = false;
            m.caught_up = true;
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    const CONF: &str = "# Generated by cotal\nhost: \"127.0.0.1\"\nport: 4222\njetstream {\n  store_dir: \"/srv/.cotal/nats\"\n}\n# include extra.conf\nmax_connections: 100\n# end of include extra.conf\noperator: OJWT\nsystem_account: ASYS\nresolver: MEMORY\nresolver_preload {\n  # space \"a\"\n  AAA: JWT\n}\n";

    #[test]
    fn a_changed_setting_is_named_old_to_new_and_anything_else_is_drift() {
        let after = CONF
            .replace("/srv/.cotal/nats\"", "/srv/.cotal/nats-new\"")
            .replace("max_connections: 100", "max_connections: 200");
        assert_eq!(
            changes(CONF, &after),
            Some(vec![
                "include.max_connections: 100 -> 200".into(),
                "jetstream.store_dir: \"/srv/.cotal/nats\" -> \"/srv/.cotal/nats-new\"".into(),
            ])
        );
        // An include's list over lines, with comments: read as nats-server reads it.
        let listed = CONF.replace(
            "max_connections: 100\n",
            "max_connections: 100 # tuned\nserver_tags: [\n  \"a\", # first\n  \"b\"\n]\n",
        );
        assert_eq!(
            changes(CONF, &listed),
            Some(vec!["include.server_tags: (unset) -> [\"a\",\"b\"]".into()])
        );
        let hidden = CONF.replace("port: 4222", "port: 4222\u{1b}[2J");
        assert_eq!(
            changes(CONF, &hidden),
            Some(vec!["port: 4222 -> 4222\\u{1b}[2J".into()])
        );
        let added = CONF.replace("port: 4222\n", "port: 4222\nmax_payload: 1024\n");
        assert_eq!(
            changes(CONF, &added),
            Some(vec!["max_payload: (unset) -> 1024".into()])
        );
        assert_eq!(changes(CONF, CONF), Some(vec![]));
        // The preload, the trust, or a line cotal never writes: drift.
        assert_eq!(
            changes(CONF, &CONF.replace("AAA: JWT", "AAA: OTHER")),
            Some(vec![])
        );
        assert_eq!(changes(CONF, &CONF.replace("OJWT", "OTHER")), None);
        assert_eq!(
            changes(CONF, &CONF.replace("}\n# include", "}\n}\n# include")),
            None
        );
    }
}
