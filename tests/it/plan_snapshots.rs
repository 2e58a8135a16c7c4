//! Pure table tests of planning and rendering: fixed keys and clock, so every plan, config and
//! refusal is byte-stable and kept as a snapshot under tests/it/snapshots/.

use cotal::desired::{self, Desired};
use cotal::model::{SpaceName, SpaceSpec};
use cotal::observed::*;
use cotal::plan::{self, Plan};
use cotal::render::{self, Preload, Token};
use cotal::report::{self, Palette};
use cotal::testing;

const IAT: i64 = 1_700_000_000;

fn trust() -> BrokerTrust {
    testing::fixed_trust(IAT)
}

/// An observed space with a deterministic account, signed as `spec` asks.
fn space(n: u8, name: &str, spec: &SpaceSpec) -> (SpaceName, ObservedSpace) {
    testing::fixed_space(n, name, spec, IAT)
}

fn desired(text: &str) -> Desired {
    desired::parse(&format!("version = 1\n{text}"), "cotal.toml").unwrap()
}

/// A converged root holding `spaces`: config rendered and generation recorded.
/// A converged root holding `spaces`: config rendered and generation recorded.
fn observed(spaces: Vec<(SpaceName, ObservedSpace)>) -> Observed {
    let mut o = testing::observed(&[]);
    o.broker = BrokerRecordState::Valid(trust());
    o.system.monitor = testing::monitor_observed(&trust());
    o.nodes = vec![testing::lone_node("/srv/cotal/.cotal/nats")];
    o.desired_digest = "sha256:desired".into();
    o.inventory.spaces = spaces.into_iter().collect();
    if !o.inventory.spaces.is_empty() {
        let preloads: Vec<Preload> = o
            .inventory
            .spaces
            .iter()
            .map(|(n, s)| Preload {
                space: n,
                account: &s.account_pub,
                token: Token::Signed(&s.jwt),
                side: None,
            })
            .collect();
        let node = plan::nodes(&desired(""), &o).remove(0);
        o.nodes[0].server_conf = Some(PromotedConfig::new(
            render::server_conf(&trust(), &preloads, &node).unwrap(),
        ));
        o.generation = GenerationState::Valid(GenerationRecord {
            generation: 4,
            inventory_digest: cotal::trust::digest::inventory(
                o.inventory
                    .spaces
                    .iter()
                    .map(|(n, s)| (n, s.account_pub.as_str(), s.jwt.as_str())),
            ),
        });
    }
    o
}

fn text(plan: &Plan) -> String {
    report::text(plan, &Palette::new(false))
}

fn refusal(d: &Desired, o: &Observed) -> String {
    match plan::compute(d, o, &Default::default()) {
        Err(e) => {
            let e = cotal::error::Error::from(e);
            format!("exit {}: {e}", e.exit_code())
        }
        Ok(p) => panic!("expected a refusal, got {}", text(&p)),
    }
}

#[test]
fn render_is_deterministic_and_ordered() {
    let o = observed(vec![
        space(2, "release", &SpaceSpec::default()),
        space(1, "design", &SpaceSpec::default()),
        space(3, "weird \"name\"\n# injected", &SpaceSpec::default()),
    ]);
    let conf = o.server_conf().unwrap().text.clone();
    insta::assert_snapshot!("server_conf", render::shorten_tokens(&conf));
    let again = observed(vec![
        space(1, "design", &SpaceSpec::default()),
        space(2, "release", &SpaceSpec::default()),
        space(3, "weird \"name\"\n# injected", &SpaceSpec::default()),
    ]);
    assert_eq!(
        again.server_conf().unwrap().text.clone(),
        conf,
        "same inputs, same bytes"
    );
    // Three spaces, the monitoring account and the system account.
    assert_eq!(
        conf.lines().filter(|l| l.starts_with("  # ")).count(),
        5,
        "a name cannot inject a line"
    );
}

#[test]
fn render_refuses_zero_spaces_duplicates_and_foreign_accounts() {
    let t = trust();
    let node = plan::nodes(&desired(""), &observed(vec![])).remove(0);
    assert!(
        render::server_conf(&t, &[], &node)
            .unwrap_err()
            .contains("zero spaces")
    );
    let (a, sa) = space(1, "a", &SpaceSpec::default());
    let b = SpaceName::parse("b").unwrap();
    let dup = [
        Preload {
            space: &a,
            account: &sa.account_pub,
            token: Token::Signed(&sa.jwt),
            side: None,
        },
        Preload {
            space: &b,
            account: &sa.account_pub,
            token: Token::Signed(&sa.jwt),
            side: None,
        },
    ];
    assert!(
        render::server_conf(&t, &dup, &node)
            .unwrap_err()
            .contains("preloaded twice")
    );
    let stranger = testing::fixed_key(nkeys::KeyPairType::Operator, 99);
    let foreign = cotal::trust::jwt::encode(
        &mut cotal::trust::jwt::account_claims(
            "a",
            &sa.account_pub,
            &sa.signing_pub,
            cotal::trust::jwt::AccountLimits::for_space(&SpaceSpec::default()),
            IAT,
        ),
        &stranger,
    )
    .unwrap();
    let err = render::server_conf(
        &t,
        &[Preload {
            space: &a,
            account: &sa.account_pub,
            token: Token::Signed(&foreign),
            side: None,
        }],
        &node,
    )
    .unwrap_err();
    assert!(err.contains("signed by another operator"), "{err}");

    // Many preloads (the issuers are checked on every core): the refusal is the first one in
    // order, whichever kind it is and however the work was split.
    let spaces: Vec<_> = (0..64u8)
        .map(|i| space(i + 10, &format!("s{i:02}"), &SpaceSpec::default()))
        .collect();
    let foreign_of = |i: usize| {
        let s = &spaces[i].1;
        cotal::trust::jwt::encode(
            &mut cotal::trust::jwt::account_claims(
                &format!("s{i:02}"),
                &s.account_pub,
                &s.signing_pub,
                cotal::trust::jwt::AccountLimits::for_space(&SpaceSpec::default()),
                IAT,
            ),
            &stranger,
        )
        .unwrap()
    };
    let tokens: Vec<String> = (0..64)
        .map(|i| match i {
            40 | 50 => foreign_of(i),
            _ => spaces[i].1.jwt.clone(),
        })
        .collect();
    let preloads = |repeat_at: Option<usize>| -> Vec<Preload> {
        (0..64)
            .map(|i| Preload {
                space: &spaces[i].0,
                // The repeat: space `i` preloads the account of the space before it.
                account: &spaces[if Some(i) == repeat_at { i - 1 } else { i }]
                    .1
                    .account_pub,
                token: Token::Signed(&tokens[i]),
                side: None,
            })
            .collect()
    };
    let err = render::server_conf(&t, &preloads(None), &node).unwrap_err();
    assert!(
        err.contains("signed by another operator") && err.contains("\"s40\""),
        "{err}"
    );
    let err = render::server_conf(&t, &preloads(Some(30)), &node).unwrap_err();
    assert!(
        err.contains("preloaded twice") && err.contains("\"s30\""),
        "{err}"
    );
    let err = render::server_conf(&t, &preloads(Some(60)), &node).unwrap_err();
    assert!(err.contains("\"s40\""), "{err}");
}

#[test]
fn adding_two_spaces_to_a_fresh_root() {
    let d = desired(
        "[spaces.design]\nprotect = true\n[spaces.design.limits]\nmax_connections = 200\nmax_storage = \"10GiB\"\n[spaces.release]\n",
    );
    let p = plan::compute(&d, &observed(vec![]), &Default::default()).unwrap();
    insta::assert_snapshot!("add_two_text", text(&p));
    insta::assert_snapshot!("add_two_json", report::json(&p));
    insta::assert_snapshot!("add_two_markdown", report::markdown(&p));
}

#[test]
fn a_converged_root_plans_nothing() {
    let o = observed(vec![
        space(1, "design", &SpaceSpec::default()),
        space(2, "release", &SpaceSpec::default()),
    ]);
    let p = plan::compute(
        &desired("[spaces.design]\n[spaces.release]\n"),
        &o,
        &Default::default(),
    )
    .unwrap();
    assert!(p.is_empty(), "{}", text(&p));
    assert_eq!(text(&p), "No changes. The broker matches cotal.toml.\n");
    assert_eq!(p.pins.generation, 4);
}

#[test]
fn removing_a_space_with_live_figures() {
    let mut o = observed(vec![
        space(1, "design", &SpaceSpec::default()),
        space(2, "release", &SpaceSpec::default()),
    ]);
    o.nodes[0].process = BrokerProcess::Running { pid: 42 };
    let release = o
        .inventory
        .spaces
        .get_mut(&SpaceName::parse("release").unwrap())
        .unwrap();
    release.usage = Usage {
        source: UsageSource::Live,
        streams: vec![
            StreamUsage {
                name: "CHAT_release".into(),
                messages: Some(12_000),
                bytes: 4_000_000,
            },
            StreamUsage {
                name: "DM_release".into(),
                messages: Some(400),
                bytes: 400_000,
            },
            StreamUsage {
                name: "TASK_release".into(),
                messages: Some(8),
                bytes: 4_019,
            },
        ],
        connections: Some(7),
        per_account: vec![7],
        by_member: Default::default(),
    };
    let p = plan::compute(&desired("[spaces.design]\n"), &o, &Default::default()).unwrap();
    assert!(p.destroys_data());
    insta::assert_snapshot!("remove_live_text", text(&p));
    insta::assert_snapshot!("remove_live_markdown", report::markdown(&p));
}

#[test]
fn suspending_changing_limits_and_protecting() {
    let o = observed(vec![
        space(1, "design", &SpaceSpec::default()),
        space(2, "release", &SpaceSpec::default()),
    ]);
    let mut o = o;
    o.inventory
        .spaces
        .get_mut(&SpaceName::parse("design").unwrap())
        .unwrap()
        .usage
        .connections = Some(3);
    let release = o
        .inventory
        .spaces
        .get_mut(&SpaceName::parse("release").unwrap())
        .unwrap();
    release.usage.connections = Some(7);
    release.usage.per_account = vec![7];
    let d = desired(
        "[spaces.design]\nstate = \"suspended\"\n[spaces.release]\nprotect = true\n[spaces.release.limits]\nmax_connections = 5\nmax_storage = \"1GiB\"\n",
    );
    let p = plan::compute(&d, &o, &Default::default()).unwrap();
    assert_eq!(
        (p.summary.add, p.summary.change, p.summary.remove),
        (0, 2, 0)
    );
    assert!(!p.destroys_data());
    insta::assert_snapshot!("change_text", text(&p));
}

#[test]
fn drift_in_the_config_or_the_generation_is_a_plan() {
    let mut o = observed(vec![space(1, "design", &SpaceSpec::default())]);
    let conf = o.server_conf().unwrap().text.clone();
    o.nodes[0].server_conf = Some(PromotedConfig::new(
        conf.replace("port: 4222", "port: 4999"),
    ));
    let p = plan::compute(&desired("[spaces.design]\n"), &o, &Default::default()).unwrap();
    insta::assert_snapshot!("drift_text", text(&p));

    let mut o = observed(vec![space(1, "design", &SpaceSpec::default())]);
    o.generation = GenerationState::Valid(GenerationRecord {
        generation: 4,
        inventory_digest: format!("sha256:{}", "0".repeat(64)),
    });
    let p = plan::compute(&desired("[spaces.design]\n"), &o, &Default::default()).unwrap();
    assert_eq!(p.steps.len(), 1);
    assert!(
        matches!(&p.steps[0], plan::Step::PromoteConfig { reasons, .. } if reasons[0] == plan::Reason::GenerationBehind)
    );

    // A record whose JWT no longer matches the desired limits.
    let o = observed(vec![space(1, "design", &SpaceSpec::default())]);
    let p = plan::compute(
        &desired("[spaces.design.limits]\nmax_streams = 20\n"),
        &o,
        &Default::default(),
    )
    .unwrap();
    assert!(
        text(&p).contains("max_streams: unlimited -> 20"),
        "{}",
        text(&p)
    );
}

#[test]
fn an_interrupted_removal_is_finished_first() {
    let mut o = observed(vec![
        space(1, "design", &SpaceSpec::default()),
        space(2, "release", &SpaceSpec::default()),
    ]);
    let release = o.inventory.spaces[&SpaceName::parse("release").unwrap()]
        .account_pub
        .clone();
    o.journal = JournalState::Valid(Journal {
        op: "apply".into(),
        plan_digest: "sha256:before".into(),
        started_at: "2026-11-30T10:00:00Z".into(),
        pid: 77,
        host: "ops-1".into(),
        removals: vec![JournaledRemoval {
            space: SpaceName::parse("release").unwrap(),
            account: release,
            committed: true,
            receipt: None,
        }],
        purges: Vec::new(),
        added: Vec::new(),
        adding: Vec::new(),
        steps: Vec::new(),
        owed: Vec::new(),
    });
    let p = plan::compute(&desired("[spaces.design]\n"), &o, &Default::default()).unwrap();
    assert!(!p.destroys_data(), "the data is already gone");
    insta::assert_snapshot!("journal_text", text(&p));
}

#[test]
fn guards_refuse_naming_tenants_blast_radius_and_next_step() {
    let d1 = desired("[spaces.design]\n");
    let one = observed(vec![space(1, "design", &SpaceSpec::default())]);
    insta::assert_snapshot!("refuse_last_space", refusal(&desired(""), &one));

    let protected = SpaceSpec {
        protect: true,
        ..SpaceSpec::default()
    };
    let o = observed(vec![
        space(1, "design", &SpaceSpec::default()),
        space(2, "release", &protected),
    ]);
    insta::assert_snapshot!("refuse_protected", refusal(&d1, &o));

    let mut o = observed(vec![
        space(1, "design", &SpaceSpec::default()),
        space(2, "release", &SpaceSpec::default()),
    ]);
    o.inventory
        .spaces
        .get_mut(&SpaceName::parse("release").unwrap())
        .unwrap()
        .live_processes = vec![4242];
    insta::assert_snapshot!("refuse_live_processes", refusal(&d1, &o));

    let mut o = observed(vec![space(1, "design", &SpaceSpec::default())]);
    o.system.keys = cotal::observed::SysKeysState::None;
    insta::assert_snapshot!(
        "refuse_no_sys_seed",
        refusal(&desired("[spaces.design]\n[spaces.new]\n"), &o)
    );

    let mut o = observed(vec![space(1, "design", &SpaceSpec::default())]);
    o.inventory.corrupt.push(CorruptRecord {
        file: "/r/.cotal/auth/account.zz.json".into(),
        reason: "file name does not decode".into(),
        foreign_issuer: None,
    });
    insta::assert_snapshot!("refuse_corrupt", refusal(&d1, &o));

    let mut o = observed(vec![]);
    o.broker = BrokerRecordState::Absent;
    insta::assert_snapshot!("refuse_no_broker", refusal(&d1, &o));
}

#[test]
fn names_sharing_a_token_are_warned_about() {
    let o = observed(vec![]);
    let p = plan::compute(
        &desired("[spaces.\"a.b\"]\n[spaces.a_b]\n"),
        &o,
        &Default::default(),
    )
    .unwrap();
    assert_eq!(p.warnings.len(), 1);
    assert!(
        p.warnings[0].contains("share the wire token \"a_b\""),
        "{:?}",
        p.warnings
    );
}

#[test]
fn lowering_storage_below_use_says_so() {
    let mut o = observed(vec![space(1, "design", &SpaceSpec::default())]);
    o.inventory
        .spaces
        .get_mut(&SpaceName::parse("design").unwrap())
        .unwrap()
        .usage = Usage {
        source: UsageSource::Store,
        streams: vec![StreamUsage {
            name: "CHAT_design".into(),
            messages: None,
            bytes: 3 << 30,
        }],
        connections: None,
        per_account: Vec::new(),
        by_member: Default::default(),
    };
    let p = plan::compute(
        &desired("[spaces.design.limits]\nmax_storage = \"1GiB\"\n"),
        &o,
        &Default::default(),
    )
    .unwrap();
    assert!(
        text(&p).contains("3 GiB stored > new max_storage 1 GiB"),
        "{}",
        text(&p)
    );
}

/// `o` with `name` archived by an earlier apply: its record says so, and the promoted config
/// and the generation are the rendering of the others.
fn archived_in(mut o: Observed, name: &str) -> Observed {
    let name = SpaceName::parse(name).unwrap();
    let s = o.inventory.spaces.get_mut(&name).unwrap();
    s.archived = Some(cotal::model::Archival {
        at: "2026-12-01T00:00:00Z".into(),
        by: "ops@broker".into(),
    });
    s.usage = Usage {
        source: UsageSource::Store,
        streams: vec![StreamUsage {
            name: "CHAT_release".into(),
            messages: None,
            bytes: 4_000_000,
        }],
        connections: None,
        per_account: Vec::new(),
        by_member: Default::default(),
    };
    let preloads = cotal::observed::preloads(&o.inventory.spaces);
    let node = plan::nodes(&desired(""), &o).remove(0);
    o.nodes[0].server_conf = Some(PromotedConfig::new(
        render::server_conf(&trust(), &preloads, &node).unwrap(),
    ));
    o.generation = GenerationState::Valid(GenerationRecord {
        generation: 5,
        inventory_digest: render::preloads_digest(&preloads),
    });
    o
}

/// Issue 25, "archived: retained, not served": archiving a served space is one record step
/// and the promotion that leaves its account out of the config, with the connections it
/// evicts and the data it keeps on disk; archived, nothing else of it is planned (a limit
/// change waits until it is back); bringing it back loads the same account and provisions
/// whatever is missing; a file whose every space is archived is refused; and removing an
/// archived space from a running broker fences it first, so the broker deletes the data it
/// kept on disk.
#[test]
fn archiving_and_bringing_back_a_space() {
    let mut o = observed(vec![
        space(1, "design", &SpaceSpec::default()),
        space(2, "release", &SpaceSpec::default()),
    ]);
    o.nodes[0].process = BrokerProcess::Running { pid: 42 };
    let release = SpaceName::parse("release").unwrap();
    let account = o.inventory.spaces[&release].account_pub.clone();
    o.inventory.spaces.get_mut(&release).unwrap().usage = Usage {
        source: UsageSource::Live,
        streams: vec![StreamUsage {
            name: "CHAT_release".into(),
            messages: Some(5),
            bytes: 1_024,
        }],
        connections: Some(3),
        per_account: vec![3],
        by_member: Default::default(),
    };
    let archive = desired("[spaces.design]\n[spaces.release]\nstate = \"archived\"\n");
    let p = plan::compute(&archive, &o, &Default::default()).unwrap();
    assert!(!p.destroys_data(), "an archive destroys nothing");
    let t = text(&p);
    assert!(
        t.contains("evicts 3 live connections; data kept on disk (5 messages, 1 KiB)"),
        "{t}"
    );
    assert!(t.contains("archives \"release\""), "{t}");
    let after = &p.config.as_ref().unwrap().after;
    assert!(
        !after.contains(&account),
        "the config leaves it out: {after}"
    );
    insta::assert_snapshot!("archive_text", t);

    // Archived: the same file plans nothing, and neither does a limit change.
    let o = archived_in(o, "release");
    let p = plan::compute(&archive, &o, &Default::default()).unwrap();
    assert!(p.is_empty(), "{}", text(&p));
    let limited = desired(
        "[spaces.design]\n[spaces.release]\nstate = \"archived\"\n[spaces.release.limits]\nmax_connections = 5\n",
    );
    let p = plan::compute(&limited, &o, &Default::default()).unwrap();
    assert!(p.is_empty(), "frozen while archived: {}", text(&p));

    // Brought back: the same account, loaded again, its streams checked.
    let back = desired("[spaces.design]\n[spaces.release]\n");
    let p = plan::compute(&back, &o, &Default::default()).unwrap();
    let kinds: Vec<&str> = p
        .steps
        .iter()
        .map(|s| match s {
            plan::Step::RecordArchive {
                archived: false, ..
            } => "unarchive",
            plan::Step::PromoteConfig { .. } => "promote",
            plan::Step::Provision { .. } => "provision",
            _ => "other",
        })
        .collect();
    assert_eq!(kinds, ["unarchive", "promote", "provision"], "{}", text(&p));
    assert!(p.config.as_ref().unwrap().after.contains(&account));
    insta::assert_snapshot!("unarchive_text", text(&p));

    // Nothing served is no broker: refused by the parser, at the first archived space's state.
    let none = cotal::desired::parse(
        "version = 1\n[spaces.design]\nstate = \"archived\"\n[spaces.release]\nstate = \"archived\"\n",
        "cotal.toml",
    )
    .unwrap_err();
    assert!(
        none.starts_with("cotal.toml:3:9:")
            && none.contains("every space of this file is archived"),
        "{none}"
    );

    // Removed while archived and the broker runs: fenced (loaded, refusing everyone), so the
    // broker deletes what it kept on disk, then dropped.
    let p = plan::compute(&desired("[spaces.design]\n"), &o, &Default::default()).unwrap();
    assert!(p.destroys_data());
    assert!(
        matches!(&p.steps[0], plan::Step::Fence { spaces, .. } if spaces[0].space == release),
        "{}",
        text(&p)
    );
    assert!(
        p.steps
            .iter()
            .any(|s| matches!(s, plan::Step::PromoteConfig { .. })),
        "the final promotion drops the account the fence loaded: {}",
        text(&p)
    );
    // With the broker stopped, its store folder is deleted: no fence.
    let mut stopped = o.clone();
    stopped.nodes[0].process = BrokerProcess::Stopped;
    let p = plan::compute(&desired("[spaces.design]\n"), &stopped, &Default::default()).unwrap();
    assert!(
        !p.steps
            .iter()
            .any(|s| matches!(s, plan::Step::Fence { .. })),
        "{}",
        text(&p)
    );
}
