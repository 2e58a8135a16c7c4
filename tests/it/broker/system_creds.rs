//! The $SYS creds cotal writes for each space, tried as a hostile tenant would: what they reach
//! (their own space's connections, through their own inbox only), when they stop working
//! (suspension, removal, `cotal rotate sys`), and the operator's `cotal space evict`, which
//! never touches another space. Every refusal is the broker's own (a permissions violation, a
//! closed connection, a refused connect).

use super::{Broker, Client, TWO, wait_for};
use crate::support::stdout;

/// A $SYS creds file cotal wrote for `space`.
fn sys_creds(b: &Broker, space: &str, file: &str) -> String {
    std::fs::read_to_string(sys_creds_path(b, space, file)).unwrap()
}

fn sys_creds_path(b: &Broker, space: &str, file: &str) -> std::path::PathBuf {
    b.root
        .file(&format!(".cotal/space.{}/{file}", hex::encode(space)))
}

/// The inbox prefix a space's $SYS users may subscribe under.
fn own_inbox(b: &Broker, space: &str) -> String {
    format!("_INBOX_{}", b.root.account_pub(space))
}

/// The live connection count of `account` as the $SYS user `client` reads it.
fn connz(b: &Broker, client: &Client, account: &str) -> serde_json::Value {
    b.rt.block_on(async {
        let reply = client
            .client
            .request(format!("$SYS.REQ.ACCOUNT.{account}.CONNZ"), "{}".into())
            .await
            .unwrap();
        serde_json::from_slice(&reply.payload).unwrap()
    })
}

/// Whether the broker reported a permissions violation naming `what` to `client`.
fn violation(b: &Broker, client: &mut Client, what: &str) -> bool {
    let seen = |events: &[String]| {
        events
            .iter()
            .any(|e| e.contains("Permissions Violation") && e.contains(what))
    };
    seen(&client.events.lock().unwrap()) || wait_for(b, client, what)
}

#[test]
fn a_spaces_sys_users_read_its_own_connections_only_through_any_inbox() {
    let b = Broker::start(&format!("evictor_creds = true\n\n{TWO}"));
    let _design = b.client("design").unwrap();
    let _release = b.client("release").unwrap();
    let design = b.root.account_pub("design");
    let release = b.root.account_pub("release");
    for file in ["membership-observer.creds", "connection-evictor.creds"] {
        let creds = sys_creds(&b, "design", file);
        // Through its own inbox, its own space's CONNZ answers.
        let mut own = b
            .connect_with_inbox(&creds, Some(own_inbox(&b, "design")))
            .unwrap();
        let v = connz(&b, &own, &design);
        assert_eq!(v["data"]["num_connections"], 1, "{file}: {v}");
        // Another space's CONNZ is refused by the broker.
        let subject = format!("$SYS.REQ.ACCOUNT.{release}.CONNZ");
        b.rt.block_on(async {
            own.client
                .publish(subject.clone(), "{}".into())
                .await
                .unwrap();
            own.client.flush().await.unwrap();
        });
        assert!(
            violation(&b, &mut own, &format!("Publish to \"{subject}\"")),
            "{file}: {:?}",
            own.events.lock().unwrap()
        );
        // No other inbox can even be subscribed: not the shared one cotal's own requests use,
        // not the sibling's.
        for inbox in [
            "_INBOX.>".to_string(),
            format!("{}.>", own_inbox(&b, "release")),
        ] {
            let mut other = b.connect(&creds).unwrap();
            b.rt.block_on(async {
                let _sub = other.client.subscribe(inbox.clone()).await.unwrap();
                other.client.flush().await.unwrap();
            });
            assert!(
                violation(&b, &mut other, &format!("Subscription to \"{inbox}\"")),
                "{file} subscribing {inbox}: {:?}",
                other.events.lock().unwrap()
            );
        }
    }
    // status says the evictor is opted in, and that its KICK is broker-wide.
    let status = stdout(&b.root.cotal(&["status"]).assert().success());
    assert!(status.contains("broker-wide"), "{status}");
}

#[test]
fn a_suspended_or_removed_spaces_sys_creds_are_closed_and_refused() {
    let b = Broker::start(TWO);
    assert!(
        !sys_creds_path(&b, "design", "connection-evictor.creds").exists(),
        "no evictor unless the root opts in"
    );
    let design_old = sys_creds(&b, "design", "membership-observer.creds");
    let release_old = sys_creds(&b, "release", "membership-observer.creds");
    let inbox = Some(own_inbox(&b, "design"));
    let mut live = b.connect_with_inbox(&design_old, inbox.clone()).unwrap();

    b.desire("[spaces.design]\nstate = \"suspended\"\n\n[spaces.release]\n");
    insta::assert_snapshot!("suspension_closes_the_observer", b.run(&["plan"]));
    b.root.apply().success();
    assert!(
        wait_for(&b, &mut live, "disconnected"),
        "the suspended space's $SYS user was closed: {:?}",
        live.events.lock().unwrap()
    );
    assert!(b.connect_with_inbox(&design_old, inbox.clone()).is_err());
    b.root
        .cotal(&["plan", "--detailed-exitcode"])
        .assert()
        .code(0);

    b.desire("[spaces.design]\nstate = \"suspended\"\n");
    b.root.apply().success();
    assert!(
        b.connect_with_inbox(&release_old, Some(format!("_INBOX_{}", "x")))
            .is_err(),
        "the removed space's $SYS creds are refused"
    );

    // Resumed: the observer's creds work again, like every other user of the space (the
    // suspension closed its account's connections, it revoked nobody), and read the space.
    b.desire("[spaces.design]\n");
    b.root.apply().success();
    assert_eq!(
        sys_creds(&b, "design", "membership-observer.creds"),
        design_old,
        "the resume mints nothing"
    );
    let back = b.connect_with_inbox(&design_old, inbox).unwrap();
    let design = b.root.account_pub("design");
    assert_eq!(connz(&b, &back, &design)["data"]["num_connections"], 0);
    b.root
        .cotal(&["plan", "--detailed-exitcode"])
        .assert()
        .code(0);
}

#[test]
fn space_evict_closes_one_spaces_connections_and_never_another_spaces() {
    // design's owner twice and its member (in the member's own account), beside release.
    let b = Broker::start(
        "[spaces.design]\n[spaces.design.members.\"acme.alice\"]\nread = [\"general\"]\npost = [\"general\"]\n\n[spaces.release]\n",
    );
    let mut first = b.client("design").unwrap();
    let mut second = b.client("design").unwrap();
    let mut member = b
        .connect_with_inbox(
            &b.mint("design", &["--member", "acme.alice"]),
            Some("_INBOX_acme_alice".into()),
        )
        .unwrap();
    let release = b.client("release").unwrap();
    let status = b.space_status("design").unwrap();
    assert_eq!(
        status["connections"], 3,
        "the member's connection is the space's: {status}"
    );
    let out = stdout(
        &b.root
            .cotal(&["space", "evict", "design"])
            .assert()
            .success(),
    );
    assert!(out.contains("Closed 3 connections"), "{out}");
    for client in [&mut first, &mut second, &mut member] {
        assert!(wait_for(&b, client, "disconnected"));
    }
    // The sibling's client still round-trips, and was never disconnected.
    b.rt.block_on(async { release.client.flush().await.unwrap() });
    assert_eq!(release.disconnects(), 0);
    let audit = stdout(
        &b.root
            .cotal(&["audit", "--space", "design"])
            .assert()
            .success(),
    );
    assert!(audit.contains("space.evicted"), "{audit}");
}

#[test]
fn rotate_sys_re_mints_every_spaces_sys_creds_and_refuses_the_old_ones() {
    let b = Broker::start(TWO);
    let broker_before = std::fs::read_to_string(b.root.file(".cotal/auth/broker.json")).unwrap();
    let old: Vec<(String, String)> = ["design", "release"]
        .iter()
        .map(|s| (s.to_string(), sys_creds(&b, s, "membership-observer.creds")))
        .collect();
    let mut live = b
        .connect_with_inbox(&old[0].1, Some(own_inbox(&b, "design")))
        .unwrap();
    let _tenant = b.client("design").unwrap();

    let rotated = b
        .root
        .cotal(&["-v", "rotate", "sys", "--auto-approve"])
        .assert()
        .success();
    let out = stdout(&rotated);
    assert!(
        out.contains("rotate the system account's signing keys"),
        "{out}"
    );
    assert!(
        crate::support::stderr(&rotated).contains("the reload closed the control connection"),
        "cotal's own control connection was closed by the reload and the verdict asked again"
    );
    assert!(out.contains("Reload confirmed"), "{out}");
    let broker_after = std::fs::read_to_string(b.root.file(".cotal/auth/broker.json")).unwrap();
    let control = |text: &str| {
        serde_json::from_str::<serde_json::Value>(text).unwrap()["sys"]["keys"]["control"].clone()
    };
    assert_ne!(control(&broker_before), control(&broker_after));
    assert!(
        wait_for(&b, &mut live, "disconnected"),
        "the old key's live user was closed"
    );
    for (space, creds) in &old {
        let inbox = Some(own_inbox(&b, space));
        assert!(
            b.connect_with_inbox(creds, inbox.clone()).is_err(),
            "{space}'s old creds refused"
        );
        let new = sys_creds(&b, space, "membership-observer.creds");
        assert_ne!(&new, creds);
        let fresh = b.connect_with_inbox(&new, inbox).unwrap();
        let account = b.root.account_pub(space);
        let expected = if space == "design" { 1 } else { 0 };
        assert_eq!(
            connz(&b, &fresh, &account)["data"]["num_connections"],
            expected,
            "{space}"
        );
    }
    // cotal itself works with the new keys, and a second run is a no-op.
    b.root.cotal(&["status"]).assert().success();
    b.root
        .cotal(&["plan", "--detailed-exitcode"])
        .assert()
        .code(0);
}

#[test]
fn rotate_account_refuses_the_users_of_the_old_signing_key() {
    let b = Broker::start(TWO);
    let creds = b.mint("design", &["--user", "alice", "--profile", "admin"]);
    let mut alice = b.connect(&creds).unwrap();
    let release = b.client("release").unwrap();
    b.root
        .cotal(&["rotate", "account", "design", "--auto-approve"])
        .assert()
        .success();
    assert!(wait_for(&b, &mut alice, "disconnected"));
    assert!(b.connect(&creds).is_err(), "the old key's user is refused");
    let again = b.mint("design", &["--user", "alice", "--profile", "admin"]);
    b.connect(&again).unwrap();
    let listed = stdout(
        &b.root
            .cotal(&["creds", "list", "design"])
            .assert()
            .success(),
    );
    let states: Vec<&str> = listed
        .lines()
        .filter(|l| l.starts_with("alice"))
        .map(|l| {
            if l.contains("refused (old signing key)") {
                "refused"
            } else if l.contains("valid") {
                "valid"
            } else {
                "other"
            }
        })
        .collect();
    assert_eq!(states, ["refused", "valid"], "{listed}");
    assert_eq!(release.disconnects(), 0, "the sibling was not touched");
    b.root
        .cotal(&["plan", "--detailed-exitcode"])
        .assert()
        .code(0);
}

/// Turn a root into one made before the scoped system keys: the system JWT lists one plain
/// signing key, whose seed is `.cotal/auth/sys.seed`, and broker.json keeps no system key.
fn make_legacy(root: &crate::support::TestRoot) {
    use cotal::trust::jwt;
    let path = root.file(".cotal/auth/broker.json");
    let mut broker: serde_json::Value =
        serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
    let signer =
        nkeys::KeyPair::from_seed(broker["operator"]["signingSeed"].as_str().unwrap()).unwrap();
    let legacy = nkeys::KeyPair::new_account();
    let sys_pub = broker["sys"]["pub"].as_str().unwrap().to_string();
    let token = jwt::encode(
        &mut jwt::account_claims(
            "SYS",
            &sys_pub,
            &legacy.public_key(),
            jwt::AccountLimits::system(),
            1_700_000_000,
        ),
        &signer,
    )
    .unwrap();
    broker["sys"]["jwt"] = token.into();
    broker["sys"].as_object_mut().unwrap().remove("keys");
    std::fs::write(&path, serde_json::to_vec_pretty(&broker).unwrap()).unwrap();
    let seed = root.file(".cotal/auth/sys.seed");
    std::fs::write(&seed, format!("{}\n", legacy.seed().unwrap())).unwrap();
    std::fs::set_permissions(&seed, std::os::unix::fs::PermissionsExt::from_mode(0o600)).unwrap();
}

#[test]
fn a_root_with_the_legacy_sys_seed_is_migrated_by_the_next_apply_while_the_broker_runs() {
    let root = crate::support::TestRoot::init();
    let port = super::free_port();
    root.desire_on(port, TWO);
    root.apply().success();
    make_legacy(&root);
    root.cotal(&["up"]).assert().success();
    let b = Broker::running(root, port);
    let status = stdout(&b.root.cotal(&["status"]).assert().success());
    assert!(status.contains("system      legacy keys"), "{status}");
    let before = sys_creds(&b, "design", "membership-observer.creds");
    insta::assert_snapshot!("legacy_sys_seed_replaced", b.run(&["plan"]));
    // The reload drops the key cotal's own control user was signed by: the broker closes that
    // connection before it replies, and cotal confirms the reload with the new control key.
    let applied = b
        .root
        .cotal(&["-v", "apply", "--auto-approve"])
        .assert()
        .success();
    let out = stdout(&applied);
    assert!(out.contains("Reload confirmed"), "{out}");
    let log = crate::support::stderr(&applied);
    assert!(
        log.contains("the reload closed the control connection"),
        "the path under test was taken: {log}"
    );
    assert!(!b.root.file(".cotal/auth/sys.seed").exists());
    let status = stdout(&b.root.cotal(&["status"]).assert().success());
    assert!(status.contains("system      scoped keys"), "{status}");
    let after = sys_creds(&b, "design", "membership-observer.creds");
    assert_ne!(before, after);
    let fresh = b
        .connect_with_inbox(&after, Some(own_inbox(&b, "design")))
        .unwrap();
    let design = b.root.account_pub("design");
    assert_eq!(connz(&b, &fresh, &design)["data"]["num_connections"], 0);
    b.root
        .cotal(&["plan", "--detailed-exitcode"])
        .assert()
        .code(0);
}

/// The observer creds of every space, by space.
#[cfg(feature = "fault-injection")]
fn all_observers(b: &Broker) -> Vec<(String, String)> {
    ["design", "release"]
        .iter()
        .map(|s| (s.to_string(), sys_creds(b, s, "membership-observer.creds")))
        .collect()
}

#[cfg(feature = "fault-injection")]
#[test]
fn a_rotation_the_broker_ran_but_did_not_verify_is_rolled_back_whole() {
    let b = Broker::start(TWO);
    let broker_json = std::fs::read(b.root.file(".cotal/auth/broker.json")).unwrap();
    let before = all_observers(&b);
    let out = b
        .root
        .cotal(&["-v", "rotate", "sys", "--auto-approve"])
        .env("COTAL_FAULT", "refuse-verify")
        .assert()
        .code(7);
    let err = crate::support::stderr(&out);
    assert!(
        err.contains("the reload closed the control connection"),
        "the new config was in force (it closed cotal's old-key connection): {err}"
    );
    assert!(
        err.contains("restored and the broker confirmed it"),
        "{err}"
    );
    assert_eq!(
        std::fs::read(b.root.file(".cotal/auth/broker.json")).unwrap(),
        broker_json,
        "the broker record (keys and JWT) was put back"
    );
    assert_eq!(all_observers(&b), before, "the $SYS creds were put back");
    for (space, creds) in &before {
        b.connect_with_inbox(creds, Some(own_inbox(&b, space)))
            .unwrap();
    }
    b.root.cotal(&["status"]).assert().success();
    b.root
        .cotal(&["plan", "--detailed-exitcode"])
        .assert()
        .code(0);
}

#[cfg(feature = "fault-injection")]
#[test]
fn a_rotation_interrupted_before_its_reload_is_finished_by_the_next_apply() {
    let b = Broker::start(TWO);
    let before = all_observers(&b);
    let crashed = b
        .root
        .cotal(&["rotate", "sys", "--auto-approve"])
        .env("COTAL_CRASH_AT", "before-reload")
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&crashed.stderr);
    assert!(
        stderr.contains("crash injected at before-reload") && !crashed.status.success(),
        "the crash point was reached: {stderr}"
    );
    // The broker still runs the old system JWT; the new keys are on disk. cotal reaches it
    // with the previous control key it kept, and the next apply finishes the change.
    let plan = stdout(&b.root.cotal(&["plan"]).assert().success());
    assert!(
        plan.contains("finish an interrupted change of the control key"),
        "{plan}"
    );
    assert!(
        !plan.contains("live figures could not be read"),
        "observation reached the broker with the previous control key: {plan}"
    );
    b.root.apply().success();
    let broker: serde_json::Value =
        serde_json::from_slice(&std::fs::read(b.root.file(".cotal/auth/broker.json")).unwrap())
            .unwrap();
    assert!(broker["sys"]["keys"].get("previousControl").is_none());
    for (space, old) in &before {
        let inbox = Some(own_inbox(&b, space));
        assert!(b.connect_with_inbox(old, inbox.clone()).is_err(), "{space}");
        let new = sys_creds(&b, space, "membership-observer.creds");
        b.connect_with_inbox(&new, inbox).unwrap();
    }
    b.root
        .cotal(&["plan", "--detailed-exitcode"])
        .assert()
        .code(0);
}

#[test]
fn a_monitor_user_reads_every_monitoring_endpoint_and_nothing_else_until_revoked() {
    let b = Broker::start(TWO);
    let _design = b.client("design").unwrap();
    let design = b.root.account_pub("design");
    let out = b.root.file("monitor.creds");
    let minted = b
        .root
        .cotal(&["creds", "--system", "monitor", "--out"])
        .arg(&out)
        .assert()
        .success();
    let said = crate::support::stderr(&minted);
    assert!(said.contains("monitor user \"monitor\""), "{said}");
    assert_eq!(super::mode(&out), 0o600);
    let creds = std::fs::read_to_string(&out).unwrap();
    let mut monitor = b.connect(&creds).unwrap();

    // Every read-only request answers, for every server (PING) and for one by its id, and every
    // account request about any account: the template lists each, and the broker applies it.
    let ask_with = |subject: String, body: String| -> serde_json::Value {
        b.rt.block_on(async {
            let reply = tokio::time::timeout(
                std::time::Duration::from_secs(10),
                monitor.client.request(subject.clone(), body.into()),
            )
            .await
            .unwrap_or_else(|_| panic!("{subject}: no answer"))
            .unwrap_or_else(|e| panic!("{subject}: {e}"));
            serde_json::from_slice(&reply.payload).unwrap()
        })
    };
    let ask = |subject: String| ask_with(subject, "{}".into());
    let varz = ask("$SYS.REQ.SERVER.PING.VARZ".into());
    let server_id = varz["data"]["server_id"].as_str().unwrap().to_string();
    assert!(ask("$SYS.REQ.SERVER.PING".into())["statsz"].is_object());
    for z in cotal::space::permissions::MONITOR_SERVER_REQUESTS {
        for subject in [
            format!("$SYS.REQ.SERVER.PING.{z}"),
            format!("$SYS.REQ.SERVER.{server_id}.{z}"),
        ] {
            let v = ask(subject.clone());
            assert!(v.is_object() && v["error"].is_null(), "{subject}: {v}");
        }
    }
    for z in cotal::space::permissions::MONITOR_ACCOUNT_REQUESTS {
        let subject = format!("$SYS.REQ.ACCOUNT.{design}.{z}");
        let v = ask(subject.clone());
        assert!(v.is_object() && v["error"].is_null(), "{subject}: {v}");
    }
    // One account's connections, asked of every server with the account as the filter, and
    // its statistics (`CONNS`): nats-server lets only an account itself ask its own CONNZ and
    // STATZ.
    let design_connz = ask_with(
        "$SYS.REQ.SERVER.PING.CONNZ".into(),
        format!(r#"{{"acc":"{design}"}}"#),
    );
    assert_eq!(design_connz["data"]["num_connections"], 1, "{design_connz}");
    let conns = ask(format!("$SYS.REQ.ACCOUNT.{design}.CONNS"));
    assert_eq!(conns["acc"].as_str(), Some(design.as_str()), "{conns}");
    assert_eq!(conns["conns"], 1, "{conns}");

    // Everything that changes the broker (or profiles it) is refused by the broker itself.
    for subject in [
        format!("$SYS.REQ.SERVER.{server_id}.RELOAD"),
        format!("$SYS.REQ.SERVER.{server_id}.KICK"),
        format!("$SYS.REQ.SERVER.{server_id}.LDM"),
        format!("$SYS.REQ.SERVER.{server_id}.PROFILEZ"),
        "$SYS.REQ.SERVER.PING.PROFILEZ".to_string(),
        format!("$JS.API.ACCOUNT.PURGE.{design}"),
        format!("$SYS.REQ.ACCOUNT.{design}.CLAIMS.UPDATE"),
        "$SYS.REQ.CLAIMS.UPDATE".to_string(),
    ] {
        b.rt.block_on(async {
            monitor
                .client
                .publish(subject.clone(), "{}".into())
                .await
                .unwrap();
            monitor.client.flush().await.unwrap();
        });
        assert!(
            violation(&b, &mut monitor, &format!("Publish to \"{subject}\"")),
            "{subject}: {:?}",
            monitor.events.lock().unwrap()
        );
    }

    // Nothing but replies may be subscribed: not the system account's events.
    let mut listener = b.connect(&creds).unwrap();
    b.rt.block_on(async {
        let _sub = listener
            .client
            .subscribe("$SYS.ACCOUNT.>".to_string())
            .await
            .unwrap();
        listener.client.flush().await.unwrap();
    });
    assert!(
        violation(&b, &mut listener, "Subscription to \"$SYS.ACCOUNT.>\""),
        "{:?}",
        listener.events.lock().unwrap()
    );
    // Minted into the audit (never its secret), and never for longer than 90 days.
    let audit = stdout(&b.root.cotal(&["audit"]).assert().success());
    assert!(
        audit.contains("creds.minted") && audit.contains("system user \"monitor\""),
        "{audit}"
    );
    assert!(
        !audit.contains(creds.lines().nth(1).unwrap()),
        "no JWT in the audit"
    );
    let e = crate::support::stderr(
        &b.root
            .cotal(&["creds", "--system", "monitor", "--expires", "never"])
            .assert()
            .failure(),
    );
    assert!(e.contains("at most 90 days"), "{e}");

    // Listed, then revoked: recorded now, in force at the next apply, which closes it.
    let listed = stdout(
        &b.root
            .cotal(&["creds", "list", "--system"])
            .assert()
            .success(),
    );
    assert!(
        listed.lines().any(|l| l.starts_with("monitor ")
            && l.contains("broker-monitor")
            && l.contains("valid")),
        "{listed}"
    );
    b.root
        .cotal(&["creds", "revoke", "--system", "--user", "monitor"])
        .assert()
        .success();
    let listed = stdout(
        &b.root
            .cotal(&["creds", "list", "--system"])
            .assert()
            .success(),
    );
    assert!(listed.contains("revoking"), "{listed}");
    let plan = stdout(&b.root.cotal(&["plan"]).assert().success());
    assert!(
        plan.contains("revoke 1 monitoring user key(s) handed out by `cotal creds --system`"),
        "{plan}"
    );
    b.root.apply().success();
    assert!(
        wait_for(&b, &mut monitor, "disconnected"),
        "the revoked monitor was closed: {:?}",
        monitor.events.lock().unwrap()
    );
    assert!(b.connect(&creds).is_err(), "and refused from then on");
    let listed = stdout(
        &b.root
            .cotal(&["creds", "list", "--system"])
            .assert()
            .success(),
    );
    assert!(listed.contains("revoked"), "{listed}");
    b.root
        .cotal(&["plan", "--detailed-exitcode"])
        .assert()
        .code(0);
    // Only what `cotal creds --system` handed out can be revoked this way: never `*`.
    let e = crate::support::stderr(
        &b.root
            .cotal(&["creds", "revoke", "--system", "--user", "nobody"])
            .assert()
            .failure(),
    );
    assert!(e.contains("handed out: monitor"), "{e}");
    // The space's own $SYS users still work: a fresh one reads its space.
    let observer = sys_creds(&b, "design", "membership-observer.creds");
    let own = b
        .connect_with_inbox(&observer, Some(own_inbox(&b, "design")))
        .unwrap();
    assert_eq!(connz(&b, &own, &design)["data"]["num_connections"], 1);
}
