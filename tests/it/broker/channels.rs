//! Channels declared in cotal.toml against a real broker, read back by a foreign client
//! through the space's registry bucket: the exact wire JSON, changes without a reload, drift
//! restored, a concurrent edit rebased (a tenant that keeps racing fails only its space), undeclared channels kept or pruned, the legacy
//! default key repaired.

use super::{Broker, Client};
use crate::support::{stderr, stdout};
use async_nats::jetstream;

const DECLARED: &str = r#"[spaces.design]

[spaces.design.channel_defaults]
delivery_class = "durable"
replay_window = "24h"

[spaces.design.channels.general]
delivery_class = "live"
description = "Everyone in the design space"

[spaces.design.channels."team.backend"]
delivery_class = "durable"
instructions = "Post build failures here."

[spaces.release]
"#;

/// The registry value of `key` as a client of the space reads it (`None`: absent or deleted).
fn read(b: &Broker, client: &Client, key: &str) -> Option<String> {
    b.rt.block_on(async {
        let kv = jetstream::new(client.client.clone())
            .get_key_value("cotal_channels_design")
            .await
            .unwrap();
        kv.get(key)
            .await
            .unwrap()
            .map(|v| String::from_utf8(v.to_vec()).unwrap())
    })
}

fn write(b: &Broker, client: &Client, key: &str, value: &str) {
    b.rt.block_on(async {
        let kv = jetstream::new(client.client.clone())
            .get_key_value("cotal_channels_design")
            .await
            .unwrap();
        kv.put(key, value.to_string().into()).await.unwrap();
    });
}

/// A plan of only channel changes: exit 2, no promotion, no other space. Returned as shown,
/// for a snapshot.
fn channel_only_plan(b: &Broker) -> String {
    let out = b
        .root
        .cotal(&["plan", "--detailed-exitcode"])
        .assert()
        .code(2);
    let text = stdout(&out);
    assert!(!text.contains("promote"), "no promotion: {text}");
    assert!(!text.contains("\"release\""), "no other space: {text}");
    b.shown("plan --detailed-exitcode", &out)
}

#[test]
fn declared_channels_reach_the_registry_exactly_and_are_kept_there_without_a_reload() {
    let b = Broker::start(DECLARED);
    let client = b.client("design").unwrap();
    // `up` seeded the default; the declarations are written by the next apply.
    insta::assert_snapshot!("channels_declared", channel_only_plan(&b));
    let generation = b.root.generation();
    let applied = stdout(&b.root.apply().success());
    assert!(
        !applied.contains("Reload confirmed"),
        "no reload: {applied}"
    );
    assert_eq!(b.root.generation(), generation, "no promotion");
    assert_eq!(
        read(&b, &client, "general").as_deref(),
        Some(r#"{"deliveryClass":"live","description":"Everyone in the design space"}"#)
    );
    assert_eq!(
        read(&b, &client, "team.backend").as_deref(),
        Some(r#"{"deliveryClass":"durable","instructions":"Post build failures here."}"#)
    );
    assert_eq!(
        read(&b, &client, "=defaults").as_deref(),
        Some(r#"{"deliveryClass":"durable","replayWindow":"24h"}"#)
    );
    b.root
        .cotal(&["plan", "--detailed-exitcode"])
        .assert()
        .code(0);
    // The state the apply left holds the registry it wrote (values and revisions), without
    // reading it again: exactly what a fresh export reads.
    let left: serde_json::Value =
        serde_json::from_slice(&std::fs::read(b.root.file(".cotal/state.json")).unwrap()).unwrap();
    let fresh: serde_json::Value = serde_json::from_str(&stdout(
        &b.root.cotal(&["state", "export"]).assert().success(),
    ))
    .unwrap();
    assert_eq!(
        left["spaces"]["design"]["channels"],
        fresh["spaces"]["design"]["channels"]
    );
    assert_eq!(
        left["spaces"]["design"]["channels"]["general"]["value"]["deliveryClass"],
        "live"
    );
    let status: serde_json::Value = serde_json::from_str(&stdout(
        &b.root
            .cotal(&["status", "--format", "json"])
            .assert()
            .success(),
    ))
    .unwrap();
    let design = status["spaces"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["name"] == "design")
        .unwrap();
    assert_eq!(design["channels"]["general"]["deliveryClass"], "live");
    insta::assert_snapshot!("channels_listed", b.run(&["space", "list"]));

    // A changed field is a `~` with its diff, written with no reload.
    b.desire(&DECLARED.replace("delivery_class = \"live\"", "delivery_class = \"durable\""));
    insta::assert_snapshot!("channel_changed", channel_only_plan(&b));
    let applied = stdout(&b.root.apply().success());
    assert!(!applied.contains("Reload confirmed"), "{applied}");
    assert!(
        read(&b, &client, "general")
            .unwrap()
            .contains(r#""deliveryClass":"durable""#)
    );

    // A client's edit of a declared field is drift, restored; its own keys are kept.
    write(
        &b,
        &client,
        "general",
        r#"{"deliveryClass":"durable","description":"hijacked","replay":"all"}"#,
    );
    insta::assert_snapshot!("channel_drift", channel_only_plan(&b));
    b.root.apply().success();
    assert_eq!(
        read(&b, &client, "general").as_deref(),
        Some(
            r#"{"deliveryClass":"durable","description":"Everyone in the design space","replay":"all"}"#
        )
    );

    // An undeclared channel is kept (and named) unless the space prunes; so is a key the KV
    // client itself would call invalid, written by a tenant straight on the bucket's subject.
    write(&b, &client, "random", r#"{"deliveryClass":"live"}"#);
    b.rt.block_on(async {
        jetstream::new(client.client.clone())
            .publish("$KV.cotal_channels_design.m$m", "{}".into())
            .await
            .unwrap()
            .await
            .unwrap();
    });
    insta::assert_snapshot!(
        "channels_undeclared_kept",
        b.run(&["plan", "--detailed-exitcode"])
    );
    b.desire(
        &DECLARED
            .replace("delivery_class = \"live\"", "delivery_class = \"durable\"")
            .replace(
                "[spaces.design]\n",
                "[spaces.design]\nprune_channels = true\n",
            ),
    );
    insta::assert_snapshot!("channels_pruned", channel_only_plan(&b));
    b.root.apply().success();
    assert_eq!(read(&b, &client, "random"), None);
    b.root
        .cotal(&["plan", "--detailed-exitcode"])
        .assert()
        .code(0);
    let audit = stdout(
        &b.root
            .cotal(&["audit", "--space", "design"])
            .assert()
            .success(),
    );
    assert!(audit.contains("space.channels_written"), "{audit}");
}

/// A client writes a channel between the plan and the write: the write is rebased on what the
/// client wrote (its own fields kept, the declared ones set) and the apply succeeds. A tenant
/// that keeps racing every write (injected: a write of the key before each compare-and-set,
/// through the real broker) fails its own space after a bounded number of tries, and only it.
#[test]
fn a_concurrent_edit_is_rebased_and_a_tenant_that_keeps_racing_fails_only_its_space() {
    let b = Broker::start(DECLARED);
    let client = b.client("design").unwrap();
    b.root.apply().success();
    b.desire(&DECLARED.replace(
        "description = \"Everyone in the design space\"",
        "description = \"Everyone\"",
    ));
    // The apply has planned (its journal is open) when a client writes the same channel.
    let paused =
        crate::support::Paused::at(&b.root, &["apply", "--auto-approve"], "after-journal-open");
    write(
        &b,
        &client,
        "general",
        r#"{"deliveryClass":"live","description":"mine","replay":"x"}"#,
    );
    let (code, err) = paused.resume();
    assert_eq!(code, Some(0), "rebased, not a conflict: {err}");
    let value: serde_json::Value =
        serde_json::from_str(&read(&b, &client, "general").unwrap()).unwrap();
    assert_eq!(
        value,
        serde_json::json!({"deliveryClass":"live","description":"Everyone","replay":"x"}),
        "the declared fields set, the client's own kept"
    );
    b.root
        .cotal(&["plan", "--detailed-exitcode"])
        .assert()
        .code(0);

    // A tenant that races every write of `general`: design is reported, release is written.
    let racing = DECLARED
        .replace(
            "description = \"Everyone in the design space\"",
            "description = \"Everyone, again\"",
        )
        .replace(
            "[spaces.release]\n",
            "[spaces.release]\n[spaces.release.channels.ops]\ndelivery_class = \"live\"\n",
        );
    b.desire(&racing);
    let out = b
        .root
        .cotal(&["apply", "--auto-approve"])
        .env("COTAL_FAULT", "race-registry:design")
        .assert()
        .code(8);
    let said = format!("{}{}", stdout(&out), stderr(&out));
    assert!(
        said.contains("channel \"general\" of space \"design\" kept changing")
            && said.contains(&format!(
                "tried {} times",
                cotal::space::channels::CONFLICT_RETRIES + 1
            )),
        "{said}"
    );
    let left = stdout(&b.root.cotal(&["plan"]).assert().success());
    assert!(
        left.contains("design") && !left.contains("release"),
        "only design is left: {left}"
    );
    b.root.apply().success();
    let value: serde_json::Value =
        serde_json::from_str(&read(&b, &client, "general").unwrap()).unwrap();
    assert_eq!(value["description"], "Everyone, again");
}

#[test]
fn the_legacy_default_key_is_repaired_and_bad_declarations_change_nothing() {
    let b = Broker::start("[spaces.design]\n");
    let client = b.client("design").unwrap();
    // What an older cotal seeded: a key no Cotal client reads.
    write(&b, &client, "=defaults", r#"{"delivery":"durable"}"#);
    insta::assert_snapshot!("channels_legacy_default_key", channel_only_plan(&b));
    b.root.apply().success();
    assert_eq!(
        read(&b, &client, "=defaults").as_deref(),
        Some(r#"{"deliveryClass":"durable"}"#)
    );
    b.root
        .cotal(&["plan", "--detailed-exitcode"])
        .assert()
        .code(0);
    // A bad declaration: refused at its line and column, nothing written.
    let before = b.root.snapshot();
    b.desire("[spaces.design]\n[spaces.design.channels.\"team.*\"]\n");
    insta::assert_snapshot!(
        "channels_bad_declaration",
        b.run(&["apply", "--auto-approve", "--allow-destroy"])
    );
    let mut after = b.root.snapshot();
    after.0.retain(|k, _| k != "cotal.toml");
    let mut before = before;
    before.0.retain(|k, _| k != "cotal.toml");
    assert_eq!(after, before);
}

/// How many channel registries a plan read from the broker (its debug log says).
fn registries_read(b: &Broker) -> (usize, String) {
    let out = b
        .root
        .cotal(&["plan"])
        .env("RUST_LOG", "cotal=debug")
        .assert()
        .success();
    let log = stderr(&out);
    let read = log
        .lines()
        .find(|l| l.contains("channel registries known from the live figures"))
        .and_then(|l| l.split("read=").nth(1))
        .and_then(|r| r.split(|c: char| !c.is_ascii_digit()).next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("the plan read the registries: {log}"));
    (read, stdout(&out))
}

/// `up`'s state refresh knows the registries `up`'s own provisioning seeded (their streams hold
/// the seed alone): it reads none, caches them, and so does the first plan after it.
#[test]
fn ups_refresh_knows_the_registries_its_provisioning_seeded_and_reads_none() {
    let root = crate::support::TestRoot::init();
    root.desire_on(super::free_port(), DECLARED);
    root.apply().success();
    let up = root
        .cotal(&["up"])
        .env("RUST_LOG", "cotal=debug")
        .assert()
        .success();
    let log = stderr(&up);
    let line = log
        .lines()
        .rfind(|l| l.contains("channel registries known from the live figures"))
        .unwrap_or_else(|| panic!("up's refresh looked at the registries: {log}"));
    assert!(
        line.contains("seeded=2") && line.contains("read=0"),
        "both registries known from their seed, none read: {line}"
    );
    let state: serde_json::Value =
        serde_json::from_slice(&std::fs::read(root.file(".cotal/state.json")).unwrap()).unwrap();
    assert_eq!(
        state["spaces"]["design"]["channels"]["=defaults"]["value"],
        serde_json::json!({"deliveryClass": "durable"}),
        "{}",
        state["spaces"]["design"]
    );
    let plan = root
        .cotal(&["plan"])
        .env("RUST_LOG", "cotal=debug")
        .assert()
        .success();
    let log = stderr(&plan);
    assert!(
        log.lines().any(
            |l| l.contains("channel registries known from the live figures")
                && l.contains("read=0")
        ),
        "the first plan after up reads none: {log}"
    );
    root.cotal(&["down"]).assert().success();
}

/// A space added to a running broker has its registry seeded by provisioning: the state after
/// the apply knows it (its stream, asked after the seed, holds that seed alone) and caches it,
/// so the next plan reads no registry; a tenant's write since is read.
#[test]
fn a_space_added_hot_has_its_seeded_registry_known_and_a_write_since_is_read() {
    let b = Broker::start(DECLARED);
    b.root.apply().success();
    b.desire(&format!("{DECLARED}[spaces.fresh]\n"));
    b.root.apply().success();
    let state: serde_json::Value =
        serde_json::from_slice(&std::fs::read(b.root.file(".cotal/state.json")).unwrap()).unwrap();
    let seeded = &state["spaces"]["fresh"]["channels"]["=defaults"];
    assert_eq!(
        seeded["value"],
        serde_json::json!({"deliveryClass": "durable"}),
        "the state after the apply knows the seeded registry: {}",
        state["spaces"]["fresh"]
    );
    let (read, _) = registries_read(&b);
    assert_eq!(read, 0, "the added space's registry is known, not read");
    let client = b.client("fresh").unwrap();
    b.rt.block_on(async {
        let kv = jetstream::new(client.client.clone())
            .get_key_value("cotal_channels_fresh")
            .await
            .unwrap();
        kv.put("rogue", r#"{"deliveryClass":"live"}"#.to_string().into())
            .await
            .unwrap();
    });
    let (read, plan) = registries_read(&b);
    assert_eq!(read, 1, "the registry that moved since is read");
    assert!(
        plan.contains("rogue"),
        "the tenant's channel is seen: {plan}"
    );
}

#[test]
fn a_registry_is_read_again_exactly_when_its_stream_moved_since_the_last_apply() {
    let b = Broker::start(DECLARED);
    b.root.apply().success();
    // An apply that changes something caches the registries it read before it.
    b.desire(&DECLARED.replace(
        "[spaces.release]\n",
        "[spaces.release]\n[spaces.release.limits]\nmax_connections = 50\n",
    ));
    b.root.apply().success();
    assert!(b.root.file(".cotal/maintenance/registries.json").exists());
    let (read, _) = registries_read(&b);
    assert_eq!(read, 0, "nothing moved: every registry is known");
    a_tenants_write_is_read_again(&b);
}

/// A client writes a channel cotal.toml does not declare: its registry's stream moved, so the
/// next plan reads that registry again (and no other), and names the channel.
fn a_tenants_write_is_read_again(b: &Broker) {
    let client = b.client("design").unwrap();
    write(b, &client, "rogue", r#"{"deliveryClass":"live"}"#);
    let (read, plan) = registries_read(b);
    assert_eq!(read, 1, "only the registry that moved is read");
    assert!(
        plan.contains("rogue"),
        "the client's channel is seen: {plan}"
    );
}

#[test]
fn the_first_plan_after_up_reads_no_registry_up_read_and_one_that_moved_since() {
    // `up` reads every registry when it observes the broker it started (its state refresh);
    // it caches them, so the first plan after it reads none again.
    let b = Broker::start(DECLARED);
    assert!(b.root.file(".cotal/maintenance/registries.json").exists());
    let (read, _) = registries_read(&b);
    assert_eq!(read, 0, "every registry is known from up's read");
    // The cache is bypassed for a registry whose stream moved since.
    a_tenants_write_is_read_again(&b);
}

/// A tenant's 900 KB registry values are bounded before anything copies them: the plan, the
/// state and the output name their size and fingerprint, never their bytes; a declared channel
/// holding one is restored, an undeclared key is kept as the tenant wrote it.
#[test]
fn a_tenants_huge_registry_values_are_summarised_never_copied() {
    let b = Broker::start(DECLARED);
    let client = b.client("design").unwrap();
    b.root.apply().success();
    let huge = format!("\"{}\"", "x".repeat(900 << 10));
    write(&b, &client, "general", &huge);
    write(&b, &client, "junk", &huge);
    let plan = stdout(&b.root.cotal(&["plan"]).assert().success());
    assert!(
        plan.len() < 64 << 10,
        "a plan a pull request comment holds: {} bytes",
        plan.len()
    );
    assert!(
        plan.contains("~ channel \"general\"")
            && plan.contains("the value was not a JSON object: replaced"),
        "the declared channel is restored: {plan}"
    );
    b.root.apply().success();
    let state = std::fs::read(b.root.file(".cotal/state.json")).unwrap();
    assert!(
        state.len() < 256 << 10,
        "state.json stays small: {} bytes",
        state.len()
    );
    assert!(
        String::from_utf8_lossy(&state).contains("over cotal's 4096-byte bound: not copied"),
        "the state names the value it did not copy"
    );
    assert!(
        read(&b, &client, "general").unwrap().len() < 4096,
        "restored"
    );
    assert_eq!(
        read(&b, &client, "junk").map(|v| v.len()),
        Some(huge.len()),
        "an undeclared key is the tenant's and stays"
    );
    let status = stdout(
        &b.root
            .cotal(&["status", "--format", "json"])
            .assert()
            .success(),
    );
    assert!(
        status.len() < 256 << 10,
        "status stays small: {} bytes",
        status.len()
    );
}
