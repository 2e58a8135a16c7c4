//! `cotal adopt` of a running broker of the original Cotal: its clients never notice the
//! adoption, and the creds it handed out keep connecting after the rotation the adoption names.

use super::{Broker, eventually, free_port};
use crate::support::original::{Layout, Original, space_dir};
use crate::support::{TestRoot, stderr, stdout};
use std::time::Duration;

#[test]
fn a_running_original_broker_is_adopted_and_every_creds_it_handed_out_keeps_connecting() {
    let port = free_port();
    let root = TestRoot::new();
    let o = Original::new(&["design", "ops"], port);
    o.write(root.path(), Layout::default(), None);
    let mut original = Original::start(root.path());
    let b = Broker::running(root, port);
    // Creds the original's tooling handed out before adoption: a user of each space, and a
    // daemon's creds kept in the space's P7 material.
    let alice_creds = o.user_creds(&o.spaces[0], "alice");
    let bob_creds = o.user_creds(&o.spaces[1], "bob");
    let delivery_creds =
        std::fs::read_to_string(space_dir(b.root.path(), "design").join("delivery.creds")).unwrap();
    let alice = eventually(
        "the original's broker accepts its clients",
        Duration::from_secs(10),
        || b.connect(&alice_creds),
    );
    // The original's client makes its artifact store through the object store layer.
    b.rt.block_on(async {
        let js = async_nats::jetstream::new(alice.client.clone());
        js.create_object_store(async_nats::jetstream::object_store::Config {
            bucket: "cotal_artifacts_design".into(),
            max_bytes: cotal::space::streams::ARTIFACT_STORE_CAP as i64,
            ..Default::default()
        })
        .await
        .unwrap();
    });

    // Adopted while it runs: nothing is reloaded, and the rotation is named, not run.
    let out = b
        .root
        .cotal(&["adopt", "--auto-approve"])
        .assert()
        .success();
    let text = stdout(&out);
    assert!(
        text.contains("The broker runs, and this root keeps no system signing key")
            && text.contains("cotal down && cotal rotate sys && cotal up"),
        "{text}"
    );
    assert!(b.root.file("cotal.toml").exists());
    b.rt.block_on(async {
        alice
            .client
            .publish("cotal.design.chat.general", "during adoption".into())
            .await
            .unwrap();
        alice.client.flush().await.unwrap();
    });
    assert_eq!(alice.disconnects(), 0, "{:?}", alice.events.lock().unwrap());
    // A second adopt writes nothing and says what is left.
    let tree = b.root.snapshot();
    let again = b
        .root
        .cotal(&["adopt", "--auto-approve"])
        .assert()
        .success();
    assert!(
        stdout(&again).contains("cotal down && cotal rotate sys && cotal up"),
        "{}",
        stdout(&again)
    );
    assert_eq!(
        b.root.snapshot().without(".cotal/maintenance"),
        tree.without(".cotal/maintenance")
    );

    // The rotation the report names, then the broker under cotal.
    b.root.cotal(&["down"]).assert().success();
    // `cotal down` knew the original's process for this root's broker, and stopped it.
    original.wait().unwrap();
    b.root
        .cotal(&["rotate", "sys", "--auto-approve"])
        .assert()
        .success();
    let up = b.root.cotal(&["up"]).assert().success();
    assert!(
        !stdout(&up).contains("update OBJ_cotal_artifacts_design"),
        "the original's artifact store is cotal's as it is: {}",
        stdout(&up)
    );
    for (who, creds) in [
        ("alice", &alice_creds),
        ("bob", &bob_creds),
        ("the delivery daemon", &delivery_creds),
    ] {
        b.connect(creds)
            .unwrap_or_else(|e| panic!("{who}'s creds from before adoption: {e}"));
    }
    // Every stream known: nothing foreign, nothing drifted, nothing to apply.
    for space in ["design", "ops"] {
        let s = b.space_status(space).unwrap();
        assert_eq!(s["state"], "active", "{s}");
        assert_eq!(s["streams"], 15, "{s}");
    }
    b.root
        .cotal(&["plan", "--detailed-exitcode"])
        .assert()
        .code(0);
}

#[test]
fn a_running_nsc_broker_is_switched_to_cotal_by_a_reload_and_its_clients_never_notice() {
    use crate::support::nsc::Nsc;
    let port = free_port();
    let root = TestRoot::new();
    let mut team = Nsc::account("team");
    team.signing = Some(nkeys::KeyPair::new_account());
    let billing = Nsc::account("billing");
    let nsc = Nsc::new(vec![team, billing]);
    let store = tempfile::tempdir().unwrap();
    nsc.write(store.path());
    let conf = root.file("nats/nats.conf");
    std::fs::create_dir_all(conf.parent().unwrap()).unwrap();
    std::fs::write(&conf, nsc.server_conf(port, &root.file("nats/store"))).unwrap();
    let server = Nsc::start(&conf);
    let b = Broker::running(root, port);
    // Clients of the nsc broker: one signed by team's signing key, one by billing's identity.
    let alice = eventually(
        "the nsc broker accepts its clients",
        Duration::from_secs(10),
        || b.connect(&nsc.user_creds(nsc.get("team"), "alice")),
    );
    let bob = b
        .connect(&nsc.user_creds(nsc.get("billing"), "bob"))
        .unwrap();

    let nsc_dir = store.path().to_str().unwrap();
    let conf_arg = conf.to_str().unwrap();
    // Leaving out an account the broker serves is refused: cotal's config would drop it.
    let partial = b
        .root
        .cotal(&[
            "adopt",
            "--nsc",
            nsc_dir,
            "--server-config",
            conf_arg,
            "--account",
            "team",
            "--auto-approve",
        ])
        .assert()
        .failure();
    assert!(
        stderr(&partial).contains(&format!(
            "serves 1 account(s) adoption leaves out ({})",
            nsc.get("billing").key.public_key()
        )),
        "{}",
        stderr(&partial)
    );
    assert!(!b.root.file(".cotal").exists());
    let out = b
        .root
        .cotal(&[
            "adopt",
            "--nsc",
            nsc_dir,
            "--server-config",
            conf_arg,
            "--auto-approve",
        ])
        .assert()
        .success();
    let text = stdout(&out);
    for expected in [
        "serves 3 account(s) (MEMORY resolver)",
        "(the system account)",
        "(space \"team\")",
        "runs on it",
        "config = \"nats/nats.conf\"",
        "log_rotation = false",
        &format!("port = {port}"),
    ] {
        assert!(text.contains(expected), "{expected}: {text}");
    }
    // The plan shows the switch: the broker's own config replaced by cotal's, by a reload.
    let plan = b
        .root
        .cotal(&["plan", "--detailed-exitcode"])
        .assert()
        .code(2);
    let plan = stdout(&plan);
    assert!(plan.contains("hot reload, no restart"), "{plan}");
    b.root
        .cotal(&["apply", "--auto-approve"])
        .assert()
        .success();
    assert!(
        std::fs::read_to_string(&conf)
            .unwrap()
            .starts_with(cotal::render::HEADER),
        "the adopted config file is cotal's now"
    );
    assert_eq!(
        b.pid(),
        server.0.id(),
        "the same process: a reload, not a restart"
    );
    // Nobody noticed: both clients still publish on their first connection.
    b.rt.block_on(async {
        for c in [&alice, &bob] {
            c.client
                .publish("after.adoption", "x".into())
                .await
                .unwrap();
            c.client.flush().await.unwrap();
        }
    });
    assert_eq!(alice.disconnects(), 0, "{:?}", alice.events.lock().unwrap());
    assert_eq!(bob.disconnects(), 0, "{:?}", bob.events.lock().unwrap());
    // Creds made by the store's account signing key after adoption connect, and so do cotal's.
    b.connect(&nsc.user_creds(nsc.get("team"), "carol"))
        .expect("creds of team's nsc signing key");
    b.connect(&b.creds("billing"))
        .expect("cotal's creds of an adopted account");
    for space in ["team", "billing"] {
        let s = b.space_status(space).unwrap();
        assert_eq!(s["streams"], 15, "{s}");
    }
    b.root
        .cotal(&["plan", "--detailed-exitcode"])
        .assert()
        .code(0);
    // A second adopt writes nothing.
    let tree = b.root.snapshot();
    let again = b
        .root
        .cotal(&[
            "adopt",
            "--nsc",
            nsc_dir,
            "--server-config",
            conf_arg,
            "--auto-approve",
        ])
        .assert()
        .success();
    assert!(
        stdout(&again).contains("Nothing to adopt"),
        "{}",
        stdout(&again)
    );
    assert_eq!(
        b.root.snapshot().without(".cotal/maintenance"),
        tree.without(".cotal/maintenance")
    );
}
