//! Issue 25, "archived: retained, not served": a space archived on a running broker is left
//! out of its config (its clients closed and refused, nothing of it served) while its record,
//! key, protection and data stay on disk; brought back, the same account serves the same data
//! to the creds handed out before. Removing an archived space deletes its data, broker running
//! (fenced first) or stopped; a backup of an archived space works; creds refuse it.

use super::{Broker, Client, publish, wait_for};

use crate::support::{stderr, stdout};
use std::sync::{Arc, Mutex};
use std::time::Duration;

const THREE: &str = "[spaces.design]\n\n[spaces.release]\n\n[spaces.ops]\n";

/// Messages in `stream` of `space`, read by a client of it.
fn messages_in(b: &Broker, client: &Client, stream: &str) -> u64 {
    b.rt.block_on(async {
        let js = async_nats::jetstream::new(client.client.clone());
        let mut s = js.get_stream(stream).await.unwrap();
        s.info().await.unwrap().state.messages
    })
}

/// Whether the space's registry answers a read (a KV get, which nats-server serves through
/// the stream's direct-get subscription: the part a stream recovered half-alive lacks).
fn registry_reads(b: &Broker, client: &Client, space: &str) -> bool {
    b.rt.block_on(async {
        let js = async_nats::jetstream::new(client.client.clone());
        let kv = js
            .get_key_value(format!("cotal_channels_{space}"))
            .await
            .unwrap();
        matches!(kv.get("=defaults").await, Ok(Some(_)))
    })
}

/// A client of `creds` that reconnects by itself, with its events recorded.
fn reconnecting(b: &Broker, creds: &str) -> Client {
    let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
    let events = Arc::new(Mutex::new(Vec::new()));
    let log = events.clone();
    let client =
        b.rt.block_on(
            async_nats::ConnectOptions::with_credentials(creds)
                .unwrap()
                .reconnect_delay_callback(|_| Duration::from_millis(100))
                .event_callback(move |e| {
                    let (tx, log) = (tx.clone(), log.clone());
                    async move {
                        log.lock().unwrap().push(e.to_string());
                        let _ = tx.send(e.to_string());
                    }
                })
                .connect(b.url()),
        )
        .unwrap();
    Client { client, events, rx }
}

#[test]
fn an_archived_space_is_not_served_keeps_its_data_and_comes_back_whole() {
    let b = Broker::start(THREE);
    let design = b.client("design").unwrap();
    let release_creds = b.creds("release");
    let mut release = reconnecting(&b, &release_creds);
    publish(&b, &release, "release", 5);
    let ops = b.client("ops").unwrap();
    publish(&b, &ops, "ops", 2);
    drop(ops);
    let account = b.root.account_pub("release");
    let store = b.root.file(&format!(".cotal/nats/jetstream/{account}"));

    // Archived: its client is closed and refused, its data stays on disk.
    let out = b
        .root
        .cotal(&["space", "archive", "release", "--auto-approve"])
        .assert()
        .success();
    let text = stdout(&out);
    assert!(text.contains("state: active -> archived"), "{text}");
    assert!(
        text.contains("evicts 1 live connection; data kept on disk ("),
        "{text}"
    );
    assert!(
        wait_for(&b, &mut release, "disconnected"),
        "the archived space's client was closed"
    );
    let refused = b.connect(&release_creds);
    assert!(refused.is_err(), "an archived space refuses its users");
    assert!(store.is_dir(), "its store folder stays");
    let status = b.space_status("release").unwrap();
    assert_eq!(status["state"], "archived", "{status}");
    assert_eq!(status["servable"], false);
    assert!(status["archived"]["by"].as_str().unwrap().contains('@'));
    assert!(
        status["bytes"].as_u64().unwrap() > 0,
        "its data on disk: {status}"
    );
    let config = std::fs::read_to_string(b.root.file(".cotal/auth/server.conf")).unwrap();
    assert!(
        !config.contains(&account),
        "the broker's config leaves it out"
    );
    let creds = b
        .root
        .cotal(&["creds", "release", "--user", "late", "--profile", "admin"])
        .assert()
        .code(3);
    assert!(stderr(&creds).contains("is archived"), "{}", stderr(&creds));
    b.root
        .cotal(&["plan", "--detailed-exitcode"])
        .assert()
        .code(0);

    // Brought back: the same account, its data, its clients' creds.
    let out = b
        .root
        .cotal(&["space", "resume", "release", "--auto-approve"])
        .assert()
        .success();
    assert!(
        stdout(&out).contains("state: archived -> active"),
        "{}",
        stdout(&out)
    );
    assert_eq!(b.root.account_pub("release"), account, "the same account");
    assert!(
        wait_for(&b, &mut release, "connected"),
        "the client handed out before reconnected by itself: {:?}",
        release.events.lock().unwrap()
    );
    assert_eq!(
        messages_in(&b, &release, "CHAT_release"),
        5,
        "every message written before the archive"
    );
    assert!(registry_reads(&b, &release, "release"), "served whole");
    assert_eq!(b.space_status("release").unwrap()["servable"], true);
    b.root
        .cotal(&["plan", "--detailed-exitcode"])
        .assert()
        .code(0);
    assert_eq!(
        design.disconnects(),
        0,
        "the sibling never saw a disconnect"
    );
    let audit = std::fs::read_to_string(b.root.file(".cotal/audit.jsonl")).unwrap();
    assert!(audit.contains("\"space.archived\"") && audit.contains("\"space.unarchived\""));
    let archived: serde_json::Value = audit
        .lines()
        .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap())
        .find(|e| e["event"] == "space.archived")
        .unwrap();
    assert_eq!(
        archived["counts"]["connections"], 1,
        "the archive's audit counts what its fence evicted: {archived}"
    );
    assert!(
        archived["counts"]["messages"].as_u64() > Some(0)
            && archived["counts"]["streams"].as_u64() > Some(0),
        "the archive's audit counts the streams holding the messages it keeps: {archived}"
    );
    drop(release);

    // Back suspended: loaded, refusing its users, its data on disk (nats-server recovers it
    // when the account is first used: at its resume), its suspension recorded anew.
    b.root
        .cotal(&["space", "archive", "release", "--auto-approve"])
        .assert()
        .success();
    let back = stdout(
        &b.root
            .cotal(&[
                "space",
                "suspend",
                "release",
                "--reason",
                "audit",
                "--auto-approve",
            ])
            .assert()
            .success(),
    );
    assert!(back.contains("its users stay refused"), "{back}");
    let status = b.space_status("release").unwrap();
    assert_eq!(status["state"], "suspended", "{status}");
    assert_eq!(status["streams"], 15, "its streams, on disk: {status}");
    assert_ne!(status["suspension"]["at"], "unknown", "{status}");
    assert_eq!(status["suspension"]["reason"], "audit");
    assert!(b.connect(&release_creds).is_err(), "still refused");
    b.root
        .cotal(&["space", "resume", "release", "--auto-approve"])
        .assert()
        .success();
    let release = b.connect(&release_creds).unwrap();
    assert!(
        registry_reads(&b, &release, "release"),
        "served whole once resumed"
    );
    assert_eq!(messages_in(&b, &release, "CHAT_release"), 5);
    drop(release);

    // A return the broker loaded and that was then rolled back leaves nothing of the space
    // running (its streams are recovered only when it is first used, by the provisioning after
    // a confirmed promotion): the plan shows the return again, and it comes back whole.
    b.root
        .cotal(&["space", "archive", "release", "--auto-approve"])
        .assert()
        .success();
    b.root
        .cotal(&["space", "resume", "release", "--auto-approve"])
        .env("COTAL_FAULT", "refuse-verify")
        .assert()
        .code(7);
    b.desire("[spaces.design]\n\n[spaces.release]\n\n[spaces.ops]\n");
    let plan = stdout(&b.root.cotal(&["plan"]).assert().success());
    assert!(
        plan.contains("state: archived -> active") && !plan.contains("still runs the streams"),
        "{plan}"
    );
    b.root
        .cotal(&["space", "resume", "release", "--auto-approve"])
        .assert()
        .success();
    let release = b.connect(&release_creds).unwrap();
    assert!(
        registry_reads(&b, &release, "release"),
        "served whole again"
    );
    assert_eq!(messages_in(&b, &release, "CHAT_release"), 5);
    drop(release);

    // Both archived; a backup of an archived space works; removing one with the broker stopped
    // deletes its store folder.
    b.desire("[spaces.design]\n\n[spaces.release]\nstate = \"archived\"\n\n[spaces.ops]\nstate = \"archived\"\n");
    b.root.apply().success();
    let ops_store = b.root.file(&format!(
        ".cotal/nats/jetstream/{}",
        b.root.account_pub("ops")
    ));
    b.root
        .cotal(&["down", "--preserve-state"])
        .assert()
        .success();
    let artifact = tempfile::tempdir().unwrap();
    let dir = artifact.path().join("ops.backup");
    b.root
        .cotal(&["space", "backup", "ops", dir.to_str().unwrap()])
        .assert()
        .success();
    let manifest: serde_json::Value =
        serde_json::from_slice(&std::fs::read(dir.join("manifest.json")).unwrap()).unwrap();
    let chat = manifest["streams"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["name"] == "CHAT_ops")
        .unwrap();
    assert_eq!(
        chat["messages"], 2,
        "the archived space's messages: {manifest}"
    );
    // An archived space is fenced: its export is a move, whose removal needs the receipt.
    // Served again, its move ends (what it holds from then on is not in the artifact).
    b.desire("[spaces.design]\n\n[spaces.release]\nstate = \"archived\"\n\n[spaces.ops]\n");
    let back = stdout(&b.root.apply().success());
    assert!(
        back.contains("serving it again ends its recorded move"),
        "{back}"
    );
    let listed = stdout(
        &b.root
            .cotal(&["space", "relocation", "ops"])
            .assert()
            .success(),
    );
    assert!(listed.contains("not moving"), "{listed}");
    let audit = std::fs::read_to_string(b.root.file(".cotal/audit.jsonl")).unwrap();
    assert!(
        audit.contains("the space is served again"),
        "the move's end is audited"
    );
    // Archived and exported again: a move once more. Not moving after all: cancelled
    // (audited), then removed.
    b.desire(
        "[spaces.design]\n\n[spaces.release]\nstate = \"archived\"\n\n[spaces.ops]\nstate = \"archived\"\n",
    );
    b.root.apply().success();
    let again = artifact.path().join("ops.again");
    b.root
        .cotal(&["space", "backup", "ops", again.to_str().unwrap()])
        .assert()
        .success();
    b.desire("[spaces.design]\n\n[spaces.release]\nstate = \"archived\"\n");
    let refused = b
        .root
        .cotal(&["apply", "--auto-approve", "--allow-destroy"])
        .assert()
        .code(3);
    assert!(
        stderr(&refused).contains("is being moved"),
        "{}",
        stderr(&refused)
    );
    let cancelled = b
        .root
        .cotal(&["space", "relocation", "ops", "--cancel"])
        .assert()
        .success();
    assert!(
        stdout(&cancelled).contains("Cancelled the move"),
        "{}",
        stdout(&cancelled)
    );
    let audit = std::fs::read_to_string(b.root.file(".cotal/audit.jsonl")).unwrap();
    assert!(audit.contains("\"relocation.failed\"") && audit.contains("cancelled by the operator"));
    b.root
        .cotal(&["apply", "--auto-approve", "--allow-destroy"])
        .assert()
        .success();
    assert!(
        !ops_store.exists(),
        "removed, broker stopped: its data is gone"
    );

    // `up` serves the others and leaves the archived one out, provisioning nothing of it.
    b.root.cotal(&["up"]).assert().success();
    assert_eq!(b.space_status("release").unwrap()["state"], "archived");
    assert!(b.connect(&release_creds).is_err());
    assert!(store.is_dir());

    // Removed while archived and the broker runs: fenced first (loaded, refusing everyone),
    // so the broker deletes what it kept; then dropped.
    b.desire("[spaces.design]\n");
    let plan = stdout(&b.root.cotal(&["plan"]).assert().success());
    assert!(plan.contains("fence \"release\""), "{plan}");
    b.root
        .cotal(&["apply", "--auto-approve", "--allow-destroy"])
        .assert()
        .success();
    assert!(!store.exists(), "removed, broker running: its data is gone");
    let root = cotal::store::Root::at(b.root.path()).unwrap();
    let sys =
        cotal::mint::system_users(&root, "test-monitor", cotal::space::permissions::monitor())
            .unwrap();
    let control = cotal::broker::control::Control::connect(&b.url(), &sys[0]).unwrap();
    assert!(control.account_streams(&account, 1).unwrap().is_empty());
    b.root
        .cotal(&["plan", "--detailed-exitcode"])
        .assert()
        .code(0);
}
