//! A 3-node loopback cluster driven by one cotal.toml (issue 14): replicated streams served
//! across nodes, a hot add confirmed by every node before anything is handed out, a node whose
//! change fails rolls every node back, removal and re-adding a name without a restart, and
//! suspension closing a tenant's clients on every node; siblings on every node never notice.

use super::{Broker, Client, Immutable, eventually, wait_for};
use crate::support::{stderr, stdout};
use std::time::Duration;

const TWO: &str = "[spaces.design]\n\n[spaces.release]\n";
/// A space with the starter's storage quota.
const OPS_QUOTA: &str = "[spaces.ops]\n[spaces.ops.limits]\nmax_storage = \"32MiB\"\n";

/// Each node's loaded config digest (VARZ, through `cotal status`), in node order.
fn digests(b: &Broker) -> Vec<String> {
    let status = b.status();
    let nodes = status["nodes"]
        .as_array()
        .expect("a cluster's status lists its nodes");
    assert_eq!(nodes.len(), 3, "{status}");
    nodes
        .iter()
        .map(|n| {
            assert_eq!(n["state"], "running", "{n}");
            n["config_digest"].as_str().expect("asked").to_string()
        })
        .collect()
}

/// A client of `space` on node `i`.
fn client_on(b: &Broker, i: usize, space: &str) -> Client {
    b.connect_to(&b.url_of(i), &b.creds(space), None)
        .unwrap_or_else(|e| panic!("a client of {space} on node {}: {e}", i + 1))
}

/// Publish one message into the space's chat stream through `c`, acknowledged by JetStream.
fn publish_acked(b: &Broker, c: &Client, space: &str, body: &str) {
    b.rt.block_on(async {
        let js = async_nats::jetstream::new(c.client.clone());
        tokio::time::timeout(Duration::from_secs(10), async {
            js.publish(
                format!("cotal.{space}.chat.general"),
                body.to_string().into(),
            )
            .await
            .unwrap()
            .await
            .unwrap()
        })
        .await
        .unwrap_or_else(|_| panic!("{space}: no JetStream ack within 10 s"));
    });
}

/// [`publish_acked`], returning the error instead of failing.
fn try_publish_acked(b: &Broker, c: &Client, space: &str, body: &str) -> Result<(), String> {
    b.rt.block_on(async {
        let js = async_nats::jetstream::new(c.client.clone());
        let ack = js
            .publish(
                format!("cotal.{space}.chat.general"),
                body.to_string().into(),
            )
            .await
            .map_err(|e| e.to_string())?;
        tokio::time::timeout(Duration::from_secs(5), ack)
            .await
            .map_err(|_| "no ack within 5 s".to_string())?
            .map(|_| ())
            .map_err(|e| e.to_string())
    })
}

/// The last message of the space's general chat, read through `c`.
fn last_chat(b: &Broker, c: &Client, space: &str) -> String {
    try_last_chat(b, c, space).unwrap()
}

fn try_last_chat(b: &Broker, c: &Client, space: &str) -> Result<String, String> {
    b.rt.block_on(async {
        let js = async_nats::jetstream::new(c.client.clone());
        let stream = js
            .get_stream(format!("CHAT_{space}"))
            .await
            .map_err(|e| e.to_string())?;
        let m = stream
            .get_last_raw_message_by_subject(&format!("cotal.{space}.chat.general"))
            .await
            .map_err(|e| e.to_string())?;
        Ok(String::from_utf8(m.payload.to_vec()).unwrap())
    })
}

#[test]
fn a_cluster_serves_replicated_spaces_and_every_node_confirms_each_change() {
    let b = Broker::start_cluster(TWO);
    let status = b.status();
    assert_eq!(
        status["nodes"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|n| n["meta_leader"] == true)
            .count(),
        1,
        "one JetStream meta leader: {status}"
    );
    let design = b.space_status("design").unwrap();
    assert_eq!(design["servable"], true, "{design}");
    assert_eq!(design["replicas"], 3, "{design}");
    for n in status["nodes"].as_array().unwrap() {
        assert_eq!(n["config_current"], true, "{n}");
    }

    // A client on node 3 publishes into the R3 stream; a client on node 1 reads it back.
    let on3 = client_on(&b, 2, "design");
    publish_acked(&b, &on3, "design", "from node 3");
    let on1 = client_on(&b, 0, "design");
    assert_eq!(last_chat(&b, &on1, "design"), "from node 3");
    // Followers apply a write just after the leader acks it: status converges to every replica
    // current (a bounded wait for that state, asked of the broker each time).
    eventually("every replica current", Duration::from_secs(20), || {
        let design = b.space_status("design").unwrap();
        match design["replicas_current"] == true {
            true => Ok(()),
            false => Err(design.to_string()),
        }
    });

    // A sibling on every node, through every change below.
    let siblings: Vec<Client> = (0..3).map(|i| client_on(&b, i, "release")).collect();

    // A hot add: once apply returns, a client of the new space on any node is served at once.
    b.desire(&format!("{TWO}\n[spaces.ops]\n"));
    let out = b.root.apply().success();
    assert!(
        stdout(&out).contains("Reload confirmed"),
        "{}",
        stdout(&out)
    );
    let before_remove = digests(&b);
    for i in 0..3 {
        let ops = client_on(&b, i, "ops");
        publish_acked(&b, &ops, "ops", &format!("hello from node {}", i + 1));
    }

    // Removed and added again under the same name, with no restart: served on every node.
    b.desire(TWO);
    b.root.apply().success();
    assert_ne!(
        digests(&b),
        before_remove,
        "every node reloaded the removal"
    );
    // With the starter's quota: at replicas = 3 every reservation counts three times
    // against it, and the artifact store is capped by a third of it.
    b.desire(&format!("{TWO}\n{OPS_QUOTA}"));
    b.root.apply().success();
    let ops = client_on(&b, 1, "ops");
    publish_acked(&b, &ops, "ops", "the name again");
    assert_eq!(last_chat(&b, &ops, "ops"), "the name again");
    assert_eq!(
        b.space_status("ops").unwrap()["streams"],
        15,
        "a fresh set of streams"
    );

    // Suspension closes the tenant's clients on every node.
    let mut suspended: Vec<Client> = (0..3).map(|i| client_on(&b, i, "design")).collect();
    b.desire(&format!(
        "[spaces.design]\nstate = \"suspended\"\n\n[spaces.release]\n\n{OPS_QUOTA}"
    ));
    b.root.apply().success();
    for (i, c) in suspended.iter_mut().enumerate() {
        assert!(
            wait_for(&b, c, "disconnected"),
            "the suspended space's client on node {} was closed",
            i + 1
        );
    }

    // The siblings never noticed, and still publish with acks.
    for (i, s) in siblings.iter().enumerate() {
        publish_acked(&b, s, "release", "still here");
        assert_eq!(
            s.disconnects(),
            0,
            "the sibling on node {}: {:?}",
            i + 1,
            s.events.lock().unwrap()
        );
    }
    b.root
        .cotal(&["plan", "--detailed-exitcode"])
        .assert()
        .code(0);
}

#[test]
fn a_node_whose_change_fails_rolls_every_node_back() {
    let b = Broker::start_cluster("[spaces.design]\n");
    let sibling = client_on(&b, 2, "design");
    let generation = b.root.generation();
    let before = digests(&b);

    // Node 3 refuses its reload (its promoted file is broken after the preflight): nodes 1
    // and 2 had loaded the change and are reloaded back.
    b.desire(TWO);
    let out = b
        .root
        .cotal(&["apply", "--auto-approve"])
        .env("COTAL_FAULT", "break-config")
        .assert()
        .code(7);
    let err = stderr(&out);
    assert!(
        err.contains("node n3: nats-server refused the reload"),
        "{err}"
    );
    assert!(
        err.contains("every node's previous config was restored"),
        "{err}"
    );
    assert_eq!(digests(&b), before, "every node runs its previous config");
    assert_eq!(b.root.generation(), generation);
    assert!(!b.root.account_record("release").exists(), "{err}");

    // Node 2's file cannot be replaced: nothing is reloaded, every file is put back.
    let obstacle = Immutable::set(&b.root.file(".cotal/node.n2/server.conf"));
    let n1_before = std::fs::read_to_string(b.root.file(".cotal/node.n1/server.conf")).unwrap();
    let out = b.root.cotal(&["apply", "--auto-approve"]).assert().code(7);
    drop(obstacle);
    let err = stderr(&out);
    assert!(err.contains("of node n2 could not be promoted"), "{err}");
    assert_eq!(digests(&b), before);
    assert_eq!(
        std::fs::read_to_string(b.root.file(".cotal/node.n1/server.conf")).unwrap(),
        n1_before,
        "node 1's file was put back"
    );
    assert_eq!(b.root.generation(), generation);

    // With the obstacle gone, the same change goes through on every node.
    b.root.apply().success();
    assert_ne!(digests(&b), before);
    assert_eq!(b.root.generation(), generation + 1);
    let release = client_on(&b, 1, "release");
    publish_acked(&b, &release, "release", "added at last");
    assert_eq!(sibling.disconnects(), 0);
}

#[test]
fn a_node_down_stops_apply_unless_degraded_and_up_brings_it_back() {
    let b = Broker::start_cluster("[spaces.design]\n");
    kill_node_3(&b);
    let status = b
        .root
        .cotal(&["status", "--format", "json"])
        .output()
        .unwrap();
    let status: serde_json::Value = serde_json::from_slice(&status.stdout).unwrap();
    assert_eq!(status["nodes"][2]["state"], "stopped", "{status}");

    b.desire(TWO);
    insta::assert_snapshot!(
        "a_node_down_refuses_the_apply",
        b.run(&["apply", "--auto-approve"])
    );
    assert!(!b.root.account_record("release").exists());

    // Degraded: a new space's three replicas cannot be placed on two nodes, so adds wait...
    insta::assert_snapshot!(
        "a_node_down_refuses_an_add_even_degraded",
        b.run(&["apply", "--auto-approve", "--allow-degraded"])
    );
    // ...but a change that adds no space goes through on the two nodes that run.
    b.desire("[spaces.design.limits]\nmax_connections = 50\n");
    insta::assert_snapshot!("a_degraded_plan", b.run(&["plan", "--allow-degraded"]));
    b.root
        .cotal(&["apply", "--auto-approve", "--allow-degraded"])
        .assert()
        .success();
    // A stream whose leader was on node 3 elects a new one among the two left; until then a
    // publish has no responder (NATS's own failover, not the apply's doing): a bounded wait.
    let design = client_on(&b, 0, "design");
    eventually(
        "no stream leader on the two nodes left",
        Duration::from_secs(30),
        || try_publish_acked(&b, &design, "design", "two of three"),
    );

    // `up` starts the node that is down, on the file written for it; then the add goes through.
    let up = b.root.cotal(&["up"]).assert().success();
    assert!(stdout(&up).contains("node n3 started"), "{}", stdout(&up));
    let status = b.status();
    for n in status["nodes"].as_array().unwrap() {
        assert_eq!(n["config_current"], true, "{n}");
    }
    // A node that just rejoined answers for a stream once it caught up with the meta layer: a
    // bounded wait for that, then the message written while it was down is there.
    let on3 = client_on(&b, 2, "design");
    let read = eventually(
        "node 3 never served the stream",
        Duration::from_secs(20),
        || try_last_chat(&b, &on3, "design"),
    );
    assert_eq!(read, "two of three");
    b.desire("[spaces.design.limits]\nmax_connections = 50\n\n[spaces.release]\n");
    b.root.apply().success();
    let release = client_on(&b, 2, "release");
    publish_acked(&b, &release, "release", "three of three");

    // A node dies while an apply removes a space (its journal open, the removal committed):
    // apply refuses with the node down, and `up` starts the node without touching the
    // journal, after which apply finishes. The root is never locked.
    kill_node_3(&b);
    b.root.crashed_removal("release");
    b.desire("[spaces.design.limits]\nmax_connections = 50\n");
    b.root
        .cotal(&["apply", "--auto-approve", "--allow-destroy"])
        .assert()
        .failure();
    let up = stdout(&b.root.cotal(&["up"]).assert().success());
    assert!(
        up.contains("node n3 started")
            && up.contains(
                "An interrupted apply's journal is open, so nothing was promoted or provisioned"
            )
            && up.contains("(it completes the removal of \"release\")"),
        "{up}"
    );
    assert!(b.root.file(".cotal/maintenance/journal.json").exists());
    b.root.apply().success();
    assert!(!b.root.file(".cotal/maintenance/journal.json").exists());
    assert!(!b.root.account_record("release").exists());
    b.root
        .cotal(&["plan", "--detailed-exitcode"])
        .assert()
        .code(0);
}

/// The crash matrix on a cluster, with a node dying too: a removal interrupted at each of its
/// points (cotal SIGKILLed there) while node 3 is SIGKILLed at the same moment leaves a root
/// the commands the messages name recover, never a deadlock: `up` starts node 3 without
/// touching the journal (a promotion under way included), `apply` finishes the removal, and
/// the next plan is empty.
#[test]
fn a_node_killed_during_a_removal_at_any_point_is_recovered_by_up_then_apply() {
    let points = [
        "after-removal-committed",
        "after-streams-deleted",
        "after-config-promoted",
        "after-reload",
        "mid-reap",
    ];
    let removed: Vec<String> = (0..points.len()).map(|i| format!("r{i}")).collect();
    let declared = |from: usize| {
        let mut text = "[spaces.design]\n".to_string();
        for name in &removed[from..] {
            text.push_str(&format!("[spaces.{name}]\n"));
        }
        text
    };
    let b = Broker::start_cluster(&declared(0));
    for (i, point) in points.iter().enumerate() {
        b.desire(&declared(i + 1));
        let paused = crate::support::Paused::at(
            &b.root,
            &["apply", "--auto-approve", "--allow-destroy"],
            point,
        );
        kill_node_3(&b);
        nix::sys::signal::kill(
            nix::unistd::Pid::from_raw(paused.pid() as i32),
            nix::sys::signal::Signal::SIGKILL,
        )
        .unwrap();
        let (code, err) = paused.resume();
        assert_eq!(code, None, "cotal was killed at {point}: {err}");
        assert!(
            b.root.file(".cotal/maintenance/journal.json").exists(),
            "{point}: the journal is open"
        );
        let up = b.root.cotal(&["up"]).assert().success();
        let said = stdout(&up);
        assert!(
            said.contains("node n3 started")
                && said.contains("An interrupted apply's journal is open"),
            "{point}: {said}{}",
            stderr(&up)
        );
        let out = b.root.apply().success();
        assert!(
            !b.root.file(".cotal/maintenance/journal.json").exists(),
            "{point}: the journal is closed: {}",
            stdout(&out)
        );
        assert!(
            !b.root.account_record(&removed[i]).exists(),
            "{point}: {} is removed",
            removed[i]
        );
        b.root
            .cotal(&["plan", "--detailed-exitcode"])
            .assert()
            .code(0);
        let status = b.status();
        for n in status["nodes"].as_array().unwrap() {
            assert_eq!(
                n["config_current"], true,
                "{point}: every node runs the promoted config: {n}"
            );
        }
    }
}

/// A node that stalls (SIGSTOP) while an apply reloads it makes the apply roll back on every
/// node (exit 7); once it resumes, `status` shows it on the promoted config (`config_current`,
/// through VARZ) with no manual step, and the next `apply` applies the change on every node.
#[test]
fn a_node_that_stalled_during_a_rolled_back_apply_is_brought_to_the_promoted_config() {
    let b = Broker::start_cluster("[spaces.design]\n");
    b.desire(TWO);
    let paused = crate::support::Paused::at(&b.root, &["apply", "--auto-approve"], "before-reload");
    let pid = node_3_pid(b.root.file(".cotal/node.n3/nats.pid"));
    nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGSTOP).unwrap();
    let (code, err) = paused.resume();
    nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGCONT).unwrap();
    assert_eq!(code, Some(7), "rolled back: {err}");
    // Resumed, the node runs the promoted config, as `status` shows: the reloads it received
    // while stalled (the apply's, then the rollback's) read the config file the rollback
    // restored. A bounded wait for it to answer, not a sleep.
    eventually(
        "node 3 answers on the promoted config",
        Duration::from_secs(30),
        || {
            let status = b.status();
            let n3 = &status["nodes"][2];
            if n3["state"] == "running" && n3["config_current"] == true {
                Ok(())
            } else {
                Err(n3.to_string())
            }
        },
    );
    b.root.apply().success();
    let status = b.status();
    for n in status["nodes"].as_array().unwrap() {
        assert_eq!(n["config_current"], true, "{n}");
    }
    b.root
        .cotal(&["plan", "--detailed-exitcode"])
        .assert()
        .code(0);
}

/// A node that runs a config other than the promoted one (here it was reloaded by hand onto an
/// edited file, which was then put back) is seen by the next plan, which asks every node's
/// VARZ: it promotes again, the apply reloads every node and confirms each, and the plan after
/// is empty. Without this, `status` would report the node and `plan` say "No changes".
#[test]
fn a_node_running_another_config_is_brought_back_by_the_next_apply() {
    let b = Broker::start_cluster("[spaces.design]\n");
    let conf = b.root.file(".cotal/node.n3/server.conf");
    let promoted = std::fs::read(&conf).unwrap();
    let mut edited = promoted.clone();
    edited.extend_from_slice(b"\nping_interval: \"3m\"\n");
    std::fs::write(&conf, &edited).unwrap();
    let pid = node_3_pid(b.root.file(".cotal/node.n3/nats.pid"));
    nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGHUP).unwrap();
    eventually(
        "node 3 runs the edited config",
        Duration::from_secs(30),
        || {
            let status = b.status();
            match status["nodes"][2]["config_current"].as_bool() {
                Some(false) => Ok(()),
                _ => Err(status["nodes"][2].to_string()),
            }
        },
    );
    std::fs::write(&conf, &promoted).unwrap();
    let plan = stdout(
        &b.root
            .cotal(&["plan", "--detailed-exitcode"])
            .assert()
            .code(2),
    );
    assert!(
        plan.contains("node n3 does not run the config on disk"),
        "{plan}"
    );
    b.root.apply().success();
    for n in b.status()["nodes"].as_array().unwrap() {
        assert_eq!(n["config_current"], true, "{n}");
    }
    b.root
        .cotal(&["plan", "--detailed-exitcode"])
        .assert()
        .code(0);
}

/// Node 3's pid, from cotal's own pidfile of it (`path`).
fn node_3_pid(path: std::path::PathBuf) -> nix::unistd::Pid {
    nix::unistd::Pid::from_raw(
        std::fs::read_to_string(path)
            .unwrap()
            .trim()
            .parse()
            .unwrap(),
    )
}

/// Stop node 3 by its pid (cotal's own records say which process it is), as a machine that
/// died would: SIGKILL, then a bounded wait until the process is gone.
fn kill_node_3(b: &Broker) {
    let pid: i32 = std::fs::read_to_string(b.root.file(".cotal/node.n3/nats.pid"))
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(pid),
        nix::sys::signal::Signal::SIGKILL,
    )
    .unwrap();
    // SIGKILL is delivered asynchronously: wait (bounded) until the process is gone or a zombie.
    let gone = |pid: i32| {
        std::fs::read_to_string(format!("/proc/{pid}/stat"))
            .map(|s| {
                s.rsplit(')')
                    .next()
                    .unwrap_or("")
                    .trim_start()
                    .starts_with('Z')
            })
            .unwrap_or(true)
    };
    eventually("node 3 survived SIGKILL", Duration::from_secs(10), || {
        std::thread::yield_now();
        if gone(pid) {
            Ok(())
        } else {
            Err(format!("pid {pid}"))
        }
    });
}

#[test]
fn a_node_cotal_does_not_run_reads_its_config_where_it_says_and_confirms_through_the_cluster() {
    // Node 3 is "on another machine": cotal writes its config to remote/n3.conf (a mounted or
    // synced folder in real life), never starts or stops it, and reaches it by its server name.
    let b = Broker::start_cluster_with("[spaces.design]\n", true);
    let status = b.status();
    let n3 = &status["nodes"][2];
    assert_eq!(n3["remote"], true, "{status}");
    assert_eq!(n3["state"], "running", "{status}");
    assert!(n3.get("pid").is_none(), "cotal knows no pid of it: {n3}");
    assert_eq!(n3["config_current"], true, "{n3}");
    let before = digests(&b);

    b.desire(TWO);
    let out = b.root.apply().success();
    assert!(
        stdout(&out).contains("Reload confirmed by all 3 running nodes"),
        "{}",
        stdout(&out)
    );
    let after = digests(&b);
    for i in 0..3 {
        assert_ne!(after[i], before[i], "node {} loaded the change", i + 1);
    }
    let written = std::fs::read_to_string(b.root.file("remote/n3.conf")).unwrap();
    assert!(
        written.contains(&b.root.account_pub("release")),
        "the remote node's file holds the new account"
    );
    let release = client_on(&b, 2, "release");
    publish_acked(&b, &release, "release", "served by the remote node too");

    // `down` stops the nodes it runs and leaves the remote one alone.
    let down = b.root.cotal(&["down"]).assert().success();
    assert!(
        stdout(&down).contains("node n3: runs on another machine"),
        "{}",
        stdout(&down)
    );
    assert!(
        b.remote.as_ref().is_some_and(|_| {
            std::fs::metadata(format!("/proc/{}", b.remote.as_ref().unwrap().id())).is_ok()
        }),
        "the remote node still runs"
    );
}

#[test]
fn over_client_tls_the_node_cotal_does_not_run_is_reached_through_the_cluster() {
    // Looking for a node on another machine connects through a local node: over
    // `[broker.tls]`, that first connection of the process must already speak TLS, or the
    // remote node reads as not answering.
    use super::tls::{ca, leaf, write};
    let authority = ca();
    let server = leaf(&authority, &["127.0.0.1"], false);
    let ca_pem = authority.pem();
    let tls = "[broker.tls]\ncert = \"tls/server.pem\"\nkey = \"tls/server.key\"\nca = \"tls/ca.pem\"\n\n[spaces.design]\n";
    let b = Broker::start_cluster_prepared(tls, true, &|root| {
        write(root, "tls/ca.pem", &ca_pem, 0o644);
        write(root, "tls/server.pem", &server.cert, 0o644);
        write(root, "tls/server.key", &server.key, 0o600);
    });
    let status = b.status();
    let n3 = &status["nodes"][2];
    assert_eq!(n3["remote"], true, "{status}");
    assert_eq!(n3["state"], "running", "{status}");
    b.root
        .cotal(&["plan", "--detailed-exitcode"])
        .assert()
        .code(0);
}

#[test]
fn changing_replicas_rescales_every_stream_in_place_and_keeps_the_data() {
    let b = Broker::start_cluster("[spaces.design]\n");
    let c = client_on(&b, 0, "design");
    publish_acked(&b, &c, "design", "kept through the rescale");
    assert_eq!(b.space_status("design").unwrap()["replicas"], 3);

    // Fewer replicas: a drift the plan names, updated in place (no reload, no new account).
    b.desire_replicas(1, "[spaces.design]\n");
    let plan = b.root.cotal(&["plan"]).assert().success();
    assert!(
        stdout(&plan).contains("drifted: replicas"),
        "{}",
        stdout(&plan)
    );
    let generation = b.root.generation();
    b.root.apply().success();
    assert_eq!(
        b.root.generation(),
        generation,
        "a rescale promotes nothing"
    );
    let design = b.space_status("design").unwrap();
    assert_eq!(design["replicas"], 1, "{design}");
    assert_eq!(design["servable"], true, "{design}");
    b.root
        .cotal(&["plan", "--detailed-exitcode"])
        .assert()
        .code(0);

    // And back to three: every stream replicated again, the message still there.
    b.desire_replicas(3, "[spaces.design]\n");
    b.root.apply().success();
    assert_eq!(b.space_status("design").unwrap()["replicas"], 3);
    let on2 = client_on(&b, 1, "design");
    let read = eventually(
        "node 2 never served the stream",
        Duration::from_secs(20),
        || try_last_chat(&b, &on2, "design"),
    );
    assert_eq!(read, "kept through the rescale");
    assert_eq!(c.disconnects(), 0);
}

/// A nats-server the test runs beside the cluster: a copy of node 1's config with its own
/// ports, name and no JetStream, whose `cluster {}` reaches every node's route port with
/// `routes` (the include of node 1 replaced by them), and with node 1's route TLS only when
/// `route_tls`. Killed on drop.
struct Stranger {
    child: std::process::Child,
    http: u16,
    log: std::path::PathBuf,
    _dir: tempfile::TempDir,
}

impl Stranger {
    fn start(b: &Broker, routes: &str, route_tls: bool) -> Stranger {
        Stranger::start_as(b, routes, route_tls, None)
    }

    /// [`Stranger::start`], presenting `identity` (certificate and key files) on its routes
    /// instead of node 1's.
    fn start_as(
        b: &Broker,
        routes: &str,
        route_tls: bool,
        identity: Option<(&std::path::Path, &std::path::Path)>,
    ) -> Stranger {
        // A port chosen free may be taken by a parallel test before nats-server binds it: the
        // stranger is started again on other ports until it is ready.
        for _ in 0..5 {
            let stranger = Stranger::spawn(b, routes, route_tls, identity);
            // Ready once its route listener is up, which nats-server opens after it says
            // "Server is ready" (and may then fail to bind, as a fatal error).
            let ready = eventually("the stranger started", Duration::from_secs(20), || {
                let log = stranger.log();
                if log.contains("[FTL]") {
                    Ok(false)
                } else if log.contains("Listening for route connections") {
                    Ok(true)
                } else {
                    Err(log)
                }
            });
            if ready {
                return stranger;
            }
        }
        panic!("the stranger never found free ports");
    }

    fn spawn(
        b: &Broker,
        routes: &str,
        route_tls: bool,
        identity: Option<(&std::path::Path, &std::path::Path)>,
    ) -> Stranger {
        let dir = tempfile::tempdir().unwrap();
        let conf = std::fs::read_to_string(b.root.file(".cotal/node.n1/server.conf")).unwrap();
        // Three different ports (each was free when asked; the same one can be handed out
        // twice).
        let mut ports = std::collections::BTreeSet::new();
        while ports.len() < 3 {
            ports.insert(super::free_port());
        }
        let [port, http, listen] =
            <[u16; 3]>::try_from(ports.into_iter().collect::<Vec<_>>()).expect("three ports");
        let mut text = String::new();
        let mut in_jetstream = false;
        let mut in_route_tls = false;
        for line in conf.lines() {
            if line.starts_with("jetstream {") {
                in_jetstream = true;
            } else if in_jetstream {
                in_jetstream = line != "}";
            } else if !route_tls && (line == "  tls {" || in_route_tls) {
                in_route_tls = line != "  }";
            } else if let (Some((cert, key)), true) = (
                identity,
                line.starts_with("    cert_file: ") || line.starts_with("    key_file: "),
            ) {
                if line.starts_with("    cert_file: ") {
                    text.push_str(&format!(
                        "    cert_file: {:?}\n",
                        cert.display().to_string()
                    ));
                } else {
                    text.push_str(&format!("    key_file: {:?}\n", key.display().to_string()));
                }
            } else if !route_tls && line.starts_with("  # route tls certificate") {
            } else if line.starts_with("port: ") {
                text.push_str(&format!("port: {port}\nhttp: \"127.0.0.1:{http}\"\n"));
            } else if line.starts_with("server_name: ") {
                text.push_str("server_name: \"stranger\"\n");
            } else if line.trim_start().starts_with("listen: ") {
                text.push_str(&format!("  listen: \"127.0.0.1:{listen}\"\n"));
            } else if line.trim_start().starts_with("include ") {
                text.push_str(routes);
            } else {
                text.push_str(line);
                text.push('\n');
            }
        }
        let path = dir.path().join("stranger.conf");
        std::fs::write(&path, text).unwrap();
        let log = dir.path().join("stranger.log");
        let child = std::process::Command::new(cotal::broker::preflight::binary().unwrap())
            .arg("-c")
            .arg(&path)
            .arg("-l")
            .arg(&log)
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap();
        Stranger {
            child,
            http,
            log,
            _dir: dir,
        }
    }

    /// The server names of the routes the stranger holds (its own `/routez`).
    fn routed_to(&self) -> Result<Vec<String>, String> {
        use std::io::{Read, Write};
        let mut s =
            std::net::TcpStream::connect(("127.0.0.1", self.http)).map_err(|e| e.to_string())?;
        s.write_all(b"GET /routez HTTP/1.0\r\n\r\n")
            .map_err(|e| e.to_string())?;
        let mut reply = String::new();
        s.read_to_string(&mut reply).map_err(|e| e.to_string())?;
        let body = reply.split_once("\r\n\r\n").ok_or("no body")?.1;
        let v: serde_json::Value = serde_json::from_str(body).map_err(|e| e.to_string())?;
        let mut names: Vec<String> = v["routes"]
            .as_array()
            .ok_or("no routes")?
            .iter()
            .filter_map(|r| r["remote_name"].as_str().map(str::to_string))
            .collect();
        names.sort();
        names.dedup();
        Ok(names)
    }

    fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }
}

impl Drop for Stranger {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The route TLS of the stranger test: `[cluster.tls]` with a certificate for 127.0.0.1.
const ROUTE_TLS: &str = "[cluster.tls]\ncert = \"tls/route.pem\"\nkey = \"tls/route.key\"\nca = \"tls/ca.pem\"\n\n[spaces.design]\n";

#[test]
fn a_stranger_on_the_route_ports_joins_nothing_without_the_credential_and_the_certificate() {
    use super::tls::{ca, leaf, write};
    let authority = ca();
    let first = leaf(&authority, &["127.0.0.1"], false);
    let ca_pem = authority.pem();
    let b = Broker::start_cluster_prepared(ROUTE_TLS, false, &|root| {
        write(root, "tls/ca.pem", &ca_pem, 0o644);
        write(root, "tls/route.pem", &first.cert, 0o644);
        write(root, "tls/route.key", &first.key, 0o600);
    });
    // Each node's config names its include; the credential is only in the include (0600).
    let include =
        std::fs::read_to_string(b.root.file(".cotal/node.n1/server.routes.conf")).unwrap();
    for i in 1..=3 {
        let conf =
            std::fs::read_to_string(b.root.file(&format!(".cotal/node.n{i}/server.conf"))).unwrap();
        assert!(conf.contains("include \"server.routes.conf\""), "{conf}");
        assert!(
            !conf.contains("cotal-route"),
            "no credential in the config: {conf}"
        );
        assert!(
            conf.contains("  tls {\n") && conf.contains("    verify: true\n"),
            "mutual TLS on the routes: {conf}"
        );
        assert_eq!(
            super::mode(&b.root.file(&format!(".cotal/node.n{i}/server.routes.conf"))),
            0o600
        );
    }
    let state = stdout(&b.root.cotal(&["state", "export"]).assert().success());
    let password = include
        .lines()
        .find_map(|l| l.trim().strip_prefix("password: "))
        .map(|p| p.trim_matches('"').to_string())
        .expect("the include holds the password");
    assert!(
        !state.contains(&password),
        "the state never holds the credential"
    );
    let plan = stdout(
        &b.root
            .cotal(&["plan", "--format", "json"])
            .assert()
            .success(),
    );
    assert!(
        !plan.contains(&password),
        "a plan never holds the credential"
    );

    let every_node: String = b
        .nodes
        .iter()
        .map(|(_, r)| format!("    \"nats-route://127.0.0.1:{r}\"\n"))
        .collect();
    // A server with everything of node 1's config, its route certificate included, but the
    // credential: every node refuses it.
    let stranger = Stranger::start(&b, &format!("  routes: [\n{every_node}  ]\n"), true);
    eventually(
        "every node refused the stranger's routes",
        Duration::from_secs(30),
        || {
            let refused = stranger.log().matches("Authorization Violation").count();
            (refused >= 3)
                .then_some(())
                .ok_or(format!("{refused} refusals so far"))
        },
    );
    // Asked through the cluster's system account, which the stranger's copied config shares:
    // had it joined, it would answer by its name. Every node answers; it does not.
    let answering = servers_answering(&b);
    assert_eq!(answering, ["n1", "n2", "n3"], "{}", stranger.log());
    drop(stranger);

    let authorization: String = include
        .lines()
        .skip_while(|l| !l.starts_with("authorization {"))
        .take_while(|l| !l.starts_with("routes:"))
        .map(|l| format!("  {l}\n"))
        .collect();
    let routes_with_credential: String = b
        .nodes
        .iter()
        .map(|(_, r)| format!("    \"nats-route://cotal-route:{password}@127.0.0.1:{r}\"\n"))
        .collect();
    let with_credential = format!("{authorization}  routes: [\n{routes_with_credential}  ]\n");
    // The credential without the certificate: every node's route listener wants a TLS
    // handshake first, so the stranger's routes fail and it joins nothing.
    let plaintext = Stranger::start(&b, &with_credential, false);
    eventually(
        "every node refused the plaintext stranger's routes",
        Duration::from_secs(30),
        || {
            let failed = plaintext
                .log()
                .matches("Error trying to connect to route")
                .count()
                + plaintext.log().matches("Router connection closed").count();
            (failed >= 3).then_some(()).ok_or(format!(
                "{failed} failed routes so far: {}",
                plaintext.log()
            ))
        },
    );
    assert_eq!(plaintext.routed_to().unwrap(), Vec::<String>::new());
    let answering = servers_answering(&b);
    assert_eq!(answering, ["n1", "n2", "n3"], "{}", plaintext.log());
    drop(plaintext);

    // The credential and TLS, with a certificate another CA signed (for the same address):
    // every node checks the other end's certificate (verify), so none accepts its routes.
    let elsewhere = ca();
    let foreign = leaf(&elsewhere, &["127.0.0.1"], false);
    let dir = tempfile::tempdir().unwrap();
    let (cert, key) = (
        dir.path().join("foreign.pem"),
        dir.path().join("foreign.key"),
    );
    std::fs::write(&cert, &foreign.cert).unwrap();
    std::fs::write(&key, &foreign.key).unwrap();
    let impostor = Stranger::start_as(&b, &with_credential, true, Some((&cert, &key)));
    eventually(
        "every node refused the impostor's certificate",
        Duration::from_secs(30),
        || {
            // Each node logs the certificate it refused (Go's "x509: certificate signed by
            // unknown authority").
            let refusing: Vec<String> = (1..=3)
                .filter(|i| {
                    std::fs::read_to_string(b.root.file(&format!(".cotal/node.n{i}/nats.log")))
                        .unwrap_or_default()
                        .lines()
                        .any(|l| {
                            l.contains("TLS route handshake error") && l.contains("certificate")
                        })
                })
                .map(|i| format!("n{i}"))
                .collect();
            (refusing.len() == 3).then_some(()).ok_or(format!(
                "refused by {refusing:?} so far: {}",
                impostor.log()
            ))
        },
    );
    assert_eq!(impostor.routed_to().unwrap(), Vec::<String>::new());
    assert_eq!(
        servers_answering(&b),
        ["n1", "n2", "n3"],
        "{}",
        impostor.log()
    );
    drop(impostor);

    // A new route certificate at the same paths is a planned change, applied hot and confirmed
    // by a handshake with every node's route listener.
    let second = leaf(&authority, &["127.0.0.1"], false);
    write(&b.root, "tls/route.pem", &second.cert, 0o644);
    write(&b.root, "tls/route.key", &second.key, 0o600);
    let plan = stdout(&b.root.cotal(&["plan"]).assert().success());
    assert!(
        plan.contains("the routes' TLS certificate changes"),
        "{plan}"
    );
    b.root.apply().success();
    for (_, route) in &b.nodes {
        let served = cotal::broker::client_tls::route_fingerprint(
            &format!("127.0.0.1:{route}"),
            &(b.root.file("tls/route.pem"), b.root.file("tls/route.key")),
            &b.root.file("tls/ca.pem"),
            Duration::from_secs(5),
        )
        .unwrap();
        assert_eq!(served, cotal::trust::digest::sha256(&second.der));
    }

    // The same server given the credential and the certificate joins: the refusals above were
    // the credential's and the certificate's.
    let member = Stranger::start(&b, &with_credential, true);
    let joined = eventually(
        "the server with the credential joined",
        Duration::from_secs(30),
        || {
            let names = member.routed_to()?;
            (names.len() == 3)
                .then_some(names.clone())
                .ok_or(format!("routes to {names:?}"))
        },
    );
    assert_eq!(joined, ["n1", "n2", "n3"]);
    eventually(
        "the member answers through the system account",
        Duration::from_secs(30),
        || {
            let answering = servers_answering(&b);
            (answering.len() == 4)
                .then_some(())
                .ok_or(format!("{answering:?}"))
        },
    );
    drop(member);

    // The credential rotates only with the cluster stopped; the nodes form the cluster again
    // with the new one, and the old one opens nothing.
    let e = stderr(&b.root.cotal(&["rotate", "routes"]).assert().code(3));
    assert!(
        e.contains("n1, n2, n3 run") && e.contains("`cotal down`"),
        "{e}"
    );
    b.root.cotal(&["down"]).assert().success();
    let rotated: serde_json::Value = serde_json::from_str(&stdout(
        &b.root
            .cotal(&["rotate", "routes", "--format", "json"])
            .assert()
            .success(),
    ))
    .unwrap();
    crate::support::assert_valid_for("schemas/rotate-routes.schema.json", &rotated);
    assert_eq!(rotated["rotation"], 1);
    let plan = stdout(&b.root.cotal(&["plan"]).assert().success());
    assert!(
        plan.contains("the route credential was rotated (rotation 1)"),
        "{plan}"
    );
    b.root.cotal(&["up"]).assert().success();
    let rotated =
        std::fs::read_to_string(b.root.file(".cotal/node.n2/server.routes.conf")).unwrap();
    assert!(
        !rotated.contains(&password),
        "a new credential in every include"
    );
    assert_eq!(servers_answering(&b), ["n1", "n2", "n3"]);
    let old = Stranger::start(&b, &with_credential, true);
    eventually(
        "every node refused the old credential",
        Duration::from_secs(30),
        || {
            let refused = old.log().matches("Authorization Violation").count();
            (refused >= 3)
                .then_some(())
                .ok_or(format!("{refused} refusals so far"))
        },
    );
    assert_eq!(servers_answering(&b), ["n1", "n2", "n3"], "{}", old.log());
    b.root
        .cotal(&["plan", "--detailed-exitcode"])
        .assert()
        .code(0);
}

/// The servers that answer `$SYS.REQ.SERVER.PING.IDZ` through the cluster (within the request
/// deadline), by name.
fn servers_answering(b: &Broker) -> Vec<String> {
    let root = cotal::store::Root::at(b.root.path()).unwrap();
    let creds =
        cotal::mint::system_users(&root, "test-control", cotal::space::permissions::control())
            .unwrap();
    let control = cotal::broker::control::Control::connect(&b.url(), &creds[0]).unwrap();
    let wanted = ["n1", "n2", "n3", "stranger"].map(String::from);
    control.servers(&wanted).unwrap().into_keys().collect()
}

/// Issue 25, "removal denies traffic first": a client of the departing space reconnects (to
/// any node) and creates a new stream every few milliseconds throughout the apply that removes
/// the space. The apply fences the space (its account loaded with no connection and every
/// user revoked, confirmed by every node) before it deletes its data, so afterwards no stream
/// of that account exists in any node's JSZ or on any node's disk, and the sibling never saw a
/// disconnect.
#[test]
fn a_departing_tenant_recreating_streams_throughout_its_removal_leaves_no_stream_on_any_node() {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
    let b = Broker::start_cluster(TWO);
    let account = b.root.account_pub("release");
    let design = client_on(&b, 0, "design");
    let creds = b.creds("release");
    let urls: Vec<String> = (0..3).map(|i| b.url_of(i)).collect();
    let stop = Arc::new(AtomicBool::new(false));
    let created = Arc::new(AtomicUsize::new(0));
    let tries = Arc::new(AtomicUsize::new(0));
    let hostile = {
        let (stop, created, tries) = (stop.clone(), created.clone(), tries.clone());
        std::thread::spawn(move || {
            let rt = super::runtime();
            rt.block_on(async {
                let client = async_nats::ConnectOptions::with_credentials(&creds)
                    .unwrap()
                    .connection_timeout(Duration::from_secs(2))
                    .connect(urls)
                    .await
                    .unwrap();
                let js = async_nats::jetstream::new(client);
                let mut i = 0usize;
                while !stop.load(Ordering::SeqCst) {
                    i += 1;
                    tries.fetch_add(1, Ordering::SeqCst);
                    let made = tokio::time::timeout(
                        Duration::from_millis(500),
                        js.create_stream(async_nats::jetstream::stream::Config {
                            name: format!("EVIL_{i}"),
                            subjects: vec![format!("cotal.release.evil.{i}")],
                            ..Default::default()
                        }),
                    )
                    .await;
                    if matches!(made, Ok(Ok(_))) {
                        created.fetch_add(1, Ordering::SeqCst);
                    }
                    tokio::time::sleep(Duration::from_millis(5)).await;
                }
            });
        })
    };
    // The tenant is really at it before the removal starts.
    eventually(
        "the departing tenant creates streams",
        Duration::from_secs(20),
        || match created.load(Ordering::SeqCst) {
            0 => Err("none yet".to_string()),
            _ => Ok(()),
        },
    );
    b.desire("[spaces.design]\n");
    let plan = stdout(&b.root.cotal(&["plan"]).assert().success());
    assert!(
        plan.contains("fence \"release\"")
            && plan.contains("(fenced: no client can recreate them)"),
        "the plan fences the space before deleting its data: {plan}"
    );
    let tries_before = tries.load(Ordering::SeqCst);
    let out = b.root.apply().success();
    let tried_during = tries.load(Ordering::SeqCst) - tries_before;
    stop.store(true, Ordering::SeqCst);
    hostile.join().unwrap();
    assert!(tried_during > 0, "the tenant kept trying during the apply");
    let root = cotal::store::Root::at(b.root.path()).unwrap();
    let sys =
        cotal::mint::system_users(&root, "test-monitor", cotal::space::permissions::monitor())
            .unwrap();
    let control = cotal::broker::control::Control::connect(&b.url(), &sys[0]).unwrap();
    let left = control.account_streams(&account, 3).unwrap();
    assert!(
        left.is_empty(),
        "no node's JSZ lists a stream of the removed account: {left:?}\n{}",
        stdout(&out)
    );
    for store in b.stores() {
        let dir = store.join(format!("jetstream/{account}"));
        assert!(!dir.exists(), "{} is gone", dir.display());
    }
    assert_eq!(
        design.disconnects(),
        0,
        "the sibling never saw a disconnect"
    );
    let audit = std::fs::read_to_string(b.root.file(".cotal/audit.jsonl")).unwrap_or_default();
    assert!(
        audit.contains("\"space.fenced\""),
        "the fence is audited: {audit}"
    );
}
