//! `cotal space purge` against a real broker, with a foreign client of the purged space
//! connected throughout: every stream and bucket is emptied, their configs, the account, its
//! creds and its connections stay, the registry's default class and the declared channels are
//! written again, a sibling is untouched, and the purge is audited with its counts. Refused
//! for a protected space; an interrupted purge is finished by `cotal apply`.

use super::{Broker, Client, publish, seed_data};
use crate::support::{stderr, stdout};

const SPACES: &str = "[spaces.design]\n\n[spaces.release]\n[spaces.release.channels.ops]\ndelivery_class = \"live\"\n";

/// Messages in `stream`, read through `client`.
fn messages(b: &Broker, client: &Client, stream: &str) -> u64 {
    b.rt.block_on(async {
        let js = async_nats::jetstream::new(client.client.clone());
        let mut s = js.get_stream(stream).await.unwrap();
        s.info().await.unwrap().state.messages
    })
}

/// The value of registry key `key` of `space`, through `client`.
fn registry_key(b: &Broker, client: &Client, space: &str, key: &str) -> Option<String> {
    b.rt.block_on(async {
        let js = async_nats::jetstream::new(client.client.clone());
        let kv = js
            .get_key_value(format!("cotal_channels_{space}"))
            .await
            .unwrap();
        kv.get(key)
            .await
            .unwrap()
            .map(|v| String::from_utf8_lossy(&v).into_owned())
    })
}

/// The subjects of `stream`'s config, through `client`.
fn subjects(b: &Broker, client: &Client, stream: &str) -> Vec<String> {
    b.rt.block_on(async {
        let js = async_nats::jetstream::new(client.client.clone());
        let mut s = js.get_stream(stream).await.unwrap();
        s.info().await.unwrap().config.subjects.clone()
    })
}

#[test]
fn a_purge_empties_every_stream_keeps_the_tenant_and_its_clients_and_touches_no_sibling() {
    let b = Broker::start(SPACES);
    // The declared channel is written by an apply with the broker running.
    b.root.apply().success();
    let release = b.client("release").unwrap();
    let design = b.client("design").unwrap();
    seed_data(&b, &release, "release");
    publish(&b, &design, "design", 2);
    let chat_subjects = subjects(&b, &release, "CHAT_release");
    assert!(registry_key(&b, &release, "release", "ops").is_some());
    let creds_before = b.creds("release");
    let held = b.space_status("release").unwrap()["messages"]
        .as_u64()
        .unwrap();
    assert!(
        held >= 4,
        "3 messages and the tenant's registry key: {held}"
    );

    // Destroying data is never approved by --auto-approve alone.
    let refused = b
        .root
        .cotal(&["space", "purge", "release", "--auto-approve"])
        .assert()
        .failure();
    assert!(
        stderr(&refused).contains("--allow-destroy"),
        "{}",
        stderr(&refused)
    );
    assert_eq!(messages(&b, &release, "CHAT_release"), 3, "nothing emptied");

    let out = b
        .root
        .cotal(&[
            "space",
            "purge",
            "release",
            "--auto-approve",
            "--allow-destroy",
        ])
        .assert()
        .success();
    let text = stdout(&out);
    assert!(
        text.contains("empty the streams and buckets of \"release\", keeping their configs"),
        "{text}"
    );
    assert!(
        text.contains(&format!("empties 15 streams, {held} messages")),
        "{text}"
    );
    assert!(
        text.contains("Purged \"release\": 15 stream(s) and bucket(s) emptied"),
        "{text}"
    );
    assert!(
        !text.contains("\"design\""),
        "no sibling in the plan: {text}"
    );

    // Emptied, configs kept, the tenant's own key gone, the declared channel and the default
    // class written again.
    assert_eq!(messages(&b, &release, "CHAT_release"), 0);
    assert_eq!(subjects(&b, &release, "CHAT_release"), chat_subjects);
    assert_eq!(registry_key(&b, &release, "release", "general"), None);
    assert!(registry_key(&b, &release, "release", "ops").is_some());
    assert!(registry_key(&b, &release, "release", "=defaults").is_some());
    // Its client never left and still publishes; creds minted before still connect.
    assert_eq!(release.disconnects(), 0);
    publish(&b, &release, "release", 1);
    assert_eq!(messages(&b, &release, "CHAT_release"), 1);
    b.connect(&creds_before)
        .expect("creds minted before the purge connect");
    // The sibling kept everything and never noticed.
    assert_eq!(messages(&b, &design, "CHAT_design"), 2);
    assert_eq!(design.disconnects(), 0);

    let audit = stdout(
        &b.root
            .cotal(&["audit", "--space", "release", "--format", "json"])
            .assert()
            .success(),
    );
    let events: Vec<serde_json::Value> = audit
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let started = events
        .iter()
        .find(|e| e["event"] == "space.purge_started")
        .expect("the purge is announced before it acts");
    assert_eq!(started["counts"]["messages"], held, "{started}");
    let purged = events
        .iter()
        .find(|e| e["event"] == "space.purged")
        .expect("the purge is audited");
    assert_eq!(purged["counts"]["streams"], 15, "{purged}");
    assert_eq!(purged["counts"]["messages"], held, "{purged}");
    // A second run is a no-op: nothing is pending.
    b.root
        .cotal(&["plan", "--detailed-exitcode"])
        .assert()
        .code(0);
}

#[test]
fn a_purge_is_refused_for_a_protected_a_suspended_a_locked_or_an_unknown_space_and_changes_nothing()
{
    let b = Broker::start(
        "[spaces.design]\nprotect = true\n\n[spaces.release]\nstate = \"suspended\"\n\n[spaces.own]\n",
    );
    let design = b.client("design").unwrap();
    publish(&b, &design, "design", 2);
    for (space, says) in [
        ("design", "\"design\" is protected"),
        ("release", "\"release\" is suspended"),
        ("nope", "\"nope\" is not an applied space"),
    ] {
        let out = b
            .root
            .cotal(&["space", "purge", space, "--auto-approve", "--allow-destroy"])
            .assert()
            .code(3);
        let said = stderr(&out);
        assert!(said.contains(says), "{space}: {said}");
        assert!(
            said.to_lowercase().contains("nothing was emptied"),
            "{space}: {said}"
        );
    }
    assert_eq!(messages(&b, &design, "CHAT_design"), 2);
    // A stream the tenant made and locked against purges: seen before the commit point, so
    // nothing of the space is emptied and no journal is left.
    let own = b.client("own").unwrap();
    publish(&b, &own, "own", 2);
    b.rt.block_on(async {
        let js = async_nats::jetstream::new(own.client.clone());
        js.create_stream(async_nats::jetstream::stream::Config {
            name: "MINE".into(),
            subjects: vec!["mine.>".into()],
            deny_purge: true,
            ..Default::default()
        })
        .await
        .unwrap();
    });
    let out = b
        .root
        .cotal(&["space", "purge", "own", "--auto-approve", "--allow-destroy"])
        .assert()
        .code(3);
    let said = stderr(&out);
    assert!(
        said.contains("MINE (deny_purge) of \"own\" is locked against purges"),
        "{said}"
    );
    assert_eq!(messages(&b, &own, "CHAT_own"), 2, "nothing emptied");
    assert!(!b.root.file(".cotal/maintenance/journal.json").exists());
    let audit = stdout(&b.root.cotal(&["audit"]).assert().success());
    assert!(!audit.contains("space.purged"), "{audit}");
    // The tenant deletes its stream: the purge then runs.
    b.rt.block_on(async {
        let js = async_nats::jetstream::new(own.client.clone());
        js.delete_stream("MINE").await.unwrap();
    });
    b.root
        .cotal(&["space", "purge", "own", "--auto-approve", "--allow-destroy"])
        .assert()
        .success();
    assert_eq!(messages(&b, &own, "CHAT_own"), 0);
}

/// Run `cotal space purge release`, crashing at `point`; the point must fire.
#[cfg(feature = "fault-injection")]
fn purge_crashing_at(b: &Broker, point: &str) {
    let crashed = b
        .root
        .cotal(&[
            "space",
            "purge",
            "release",
            "--auto-approve",
            "--allow-destroy",
        ])
        .env("COTAL_CRASH_AT", point)
        .output()
        .unwrap();
    let said = String::from_utf8_lossy(&crashed.stderr);
    assert!(
        said.contains(&format!("crash injected at {point}")) && !crashed.status.success(),
        "the crash point was never reached: {said}"
    );
    assert!(b.root.file(".cotal/maintenance/journal.json").exists());
}

#[cfg(feature = "fault-injection")]
#[test]
fn an_interrupted_purge_is_finished_by_purge_or_apply_and_never_empties_what_came_after() {
    let b = Broker::start(SPACES);
    b.root.apply().success();
    let release = b.client("release").unwrap();
    seed_data(&b, &release, "release");

    // Past the commit point, nothing emptied yet: every other verb waits for the journal, the
    // plan finishes the purge unasked, and `space purge` again finishes it.
    purge_crashing_at(&b, "after-purge-committed");
    assert_eq!(messages(&b, &release, "CHAT_release"), 3);
    let waits = b
        .root
        .cotal(&["space", "suspend", "design", "--auto-approve"])
        .assert()
        .code(6);
    assert!(
        stderr(&waits).contains("it completes the purge of \"release\""),
        "{}",
        stderr(&waits)
    );
    let plan = stdout(&b.root.cotal(&["plan"]).assert().success());
    assert!(
        plan.contains("finish emptying the streams and buckets of \"release\""),
        "{plan}"
    );
    b.root
        .cotal(&["space", "purge", "release", "--auto-approve"])
        .assert()
        .success();
    assert!(!b.root.file(".cotal/maintenance/journal.json").exists());
    assert_eq!(messages(&b, &release, "CHAT_release"), 0);
    assert!(registry_key(&b, &release, "release", "ops").is_some());

    // Emptied, the journal still open: what a client writes next survives the re-run.
    publish(&b, &release, "release", 2);
    purge_crashing_at(&b, "before-journal-close");
    assert_eq!(messages(&b, &release, "CHAT_release"), 0);
    publish(&b, &release, "release", 1);
    b.root.apply().success();
    assert!(!b.root.file(".cotal/maintenance/journal.json").exists());
    assert_eq!(
        messages(&b, &release, "CHAT_release"),
        1,
        "written after the commit point: kept"
    );

    // Committed with the broker then stopped: the plan says to start it, `up` starts it for
    // the journal, `apply` finishes.
    publish(&b, &release, "release", 2);
    purge_crashing_at(&b, "after-purge-committed");
    b.root.cotal(&["down"]).assert().success();
    let refused = b.root.cotal(&["plan"]).assert().code(3);
    assert!(
        stderr(&refused).contains("`cotal up` (it starts the broker for the open journal)"),
        "{}",
        stderr(&refused)
    );
    b.root.cotal(&["up"]).assert().success();
    b.root.apply().success();
    let release = b.client("release").unwrap();
    assert_eq!(messages(&b, &release, "CHAT_release"), 0);
    b.root
        .cotal(&["plan", "--detailed-exitcode"])
        .assert()
        .code(0);
}
