//! Properties over many generated desired states (broker stopped; spaces with members, so with
//! side accounts):
//! `apply(plan(x)); plan(x) == empty`, a second apply writes nothing, and a refused plan
//! changes nothing.

use crate::support::TestRoot;
use cotal::apply::{self, Context};
use cotal::broker::Stopped;
use cotal::error::exit;
use cotal::{observe, plan};
use proptest::prelude::*;

const NAMES: [&str; 6] = ["a", "b", "Design", "ops.eu", "ü ñ", "x\"y"];

#[derive(Debug, Clone)]
struct SpaceGen {
    suspended: bool,
    protect: bool,
    max_connections: Option<u32>,
    max_storage_mib: Option<u32>,
    /// Declared members: each a principal of [`MEMBERS`] and a grant of [`GRANTS`].
    members: Vec<(usize, usize)>,
}

/// Members a space may declare (each gets an account of its own).
const MEMBERS: [&str; 3] = ["acme.alice", "acme.bob", "ops.carol"];
/// Grants a member may have: (read, post).
const GRANTS: [(&str, &str); 3] = [
    (r#"["general"]"#, r#"["general"]"#),
    (r#"["team.>", "general"]"#, "[]"),
    ("[]", r#"["alerts"]"#),
];

fn space() -> impl Strategy<Value = SpaceGen> {
    (
        prop::bool::weighted(0.2),
        prop::bool::weighted(0.1),
        prop::option::of(1u32..500),
        prop::option::of(64u32..4096),
        prop::collection::btree_map(0..MEMBERS.len(), 0..GRANTS.len(), 0..3),
    )
        .prop_map(
            |(suspended, protect, max_connections, max_storage_mib, members)| SpaceGen {
                suspended,
                protect,
                max_connections,
                max_storage_mib,
                members: members.into_iter().collect(),
            },
        )
}

fn state() -> impl Strategy<Value = Vec<(usize, SpaceGen)>> {
    prop::collection::btree_map(0..NAMES.len(), space(), 0..5).prop_map(|m| m.into_iter().collect())
}

fn toml(spaces: &[(usize, SpaceGen)]) -> String {
    let mut out = String::from("version = 1\n");
    for (i, s) in spaces {
        let key = serde_json::to_string(NAMES[*i]).unwrap();
        out.push_str(&format!(
            "\n[spaces.{key}]\nstate = \"{}\"\nprotect = {}\n",
            if s.suspended { "suspended" } else { "active" },
            s.protect
        ));
        out.push_str(&format!("[spaces.{key}.limits]\n"));
        if let Some(c) = s.max_connections {
            out.push_str(&format!("max_connections = {c}\n"));
        }
        if let Some(m) = s.max_storage_mib {
            out.push_str(&format!("max_storage = \"{m}MiB\"\n"));
        }
        for (m, g) in &s.members {
            let (read, post) = GRANTS[*g];
            out.push_str(&format!(
                "[spaces.{key}.members.\"{}\"]\nread = {read}\npost = {post}\n",
                MEMBERS[*m]
            ));
        }
    }
    out
}

/// One apply in-process, like `cotal apply --auto-approve --allow-destroy`.
fn apply_once(root: &TestRoot) -> Result<(), i32> {
    let r = cotal::store::Root::at(root.path()).unwrap();
    let lock = cotal::store::lock::acquire(
        &r,
        &cotal::store::lock::Holder {
            pid: std::process::id(),
            host: "test".into(),
            command: "test".into(),
            since: "now".into(),
        },
        std::time::Duration::ZERO,
    )
    .unwrap();
    let (desired, digest) = observe::desired(&r).unwrap();
    let observed = observe::observe(&r, &desired, digest).unwrap();
    let plan = plan::compute(&desired, &observed, &Default::default())
        .map_err(|e| cotal::error::Error::from(e).exit_code())?;
    if plan.is_empty() {
        return Ok(());
    }
    let nodes = plan::nodes(&desired, &observed);
    let ctx = Context {
        root: &r,
        nodes: &nodes,
        observed: &observed,
        actor: cotal::audit::Actor {
            user: "test".into(),
            host: "test".into(),
        },
        lock: &lock,
        progress: &cotal::apply::Silent,
    };
    apply::execute(&ctx, &plan, &mut Stopped)
        .map(|_| ())
        .map_err(|e| e.exit_code())
}

fn plan_is_empty(root: &TestRoot) -> bool {
    let r = cotal::store::Root::at(root.path()).unwrap();
    let (desired, digest) = observe::desired(&r).unwrap();
    let observed = observe::observe(&r, &desired, digest).unwrap();
    plan::compute(&desired, &observed, &Default::default())
        .unwrap()
        .is_empty()
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 24, failure_persistence: None, ..ProptestConfig::default() })]

    #[test]
    fn applying_a_plan_converges_and_a_second_apply_writes_nothing(states in prop::collection::vec(state(), 1..4)) {
        let root = TestRoot::init();
        for spaces in &states {
            std::fs::write(root.file("cotal.toml"), toml(spaces)).unwrap();
            let before = root.snapshot();
            match apply_once(&root) {
                Ok(()) => {
                    prop_assert!(plan_is_empty(&root), "plan not empty after apply of {}", toml(spaces));
                    // Each declared member has its account in its space's record.
                    for (i, s) in spaces {
                        let record: serde_json::Value = serde_json::from_slice(
                            &std::fs::read(root.account_record(NAMES[*i])).unwrap(),
                        )
                        .unwrap();
                        for (m, _) in &s.members {
                            let role = format!("member:{}", MEMBERS[*m]);
                            prop_assert!(record["sideAccounts"][&role]["pub"].is_string(), "{role}");
                        }
                    }
                    let converged = root.snapshot();
                    let out = root.cotal(&["apply", "--auto-approve"]).output().unwrap();
                    prop_assert_eq!(out.status.code(), Some(0));
                    prop_assert!(String::from_utf8_lossy(&out.stdout).contains("No changes."));
                    prop_assert_eq!(root.snapshot(), converged);
                }
                Err(code) => {
                    // Only guards may refuse (protected space, last space); they change nothing.
                    prop_assert_eq!(code, exit::REFUSED);
                    prop_assert_eq!(root.snapshot(), before);
                }
            }
        }
    }
}
