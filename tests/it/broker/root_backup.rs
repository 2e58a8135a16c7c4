//! `cotal root backup` and `cotal root restore` against a real broker: the host is lost, the
//! backup is brought up on a new one, and the creds handed out before work there.

use super::{Broker, TWO};
use crate::support::stdout;

#[test]
fn a_root_backup_brought_up_on_a_new_host_serves_the_creds_handed_out_before() {
    let a = Broker::start(TWO);
    let alice = a.mint("design", &["--user", "alice", "--profile", "admin"]);
    let vault = tempfile::tempdir().unwrap();
    let dir = vault.path().join("root-backup");
    let out = stdout(
        &a.root
            .cotal(&["root", "backup", dir.to_str().unwrap()])
            .assert()
            .success(),
    );
    assert!(out.contains("It holds every seed"), "{out}");
    let mode = |p: &std::path::Path| {
        std::os::unix::fs::PermissionsExt::mode(&std::fs::metadata(p).unwrap().permissions())
            & 0o777
    };
    assert_eq!(mode(&dir), 0o700);
    assert_eq!(mode(&dir.join("files/.cotal/auth/broker.json")), 0o600);
    // The host is lost: the broker stops, its root is gone.
    a.root.cotal(&["down"]).assert().success();
    let port = a.port;
    // A new host: an empty folder, the backup restored, the broker up on it.
    let new_host = crate::support::TestRoot::new();
    new_host
        .cotal(&["root", "restore", dir.to_str().unwrap()])
        .assert()
        .success();
    assert_eq!(mode(&new_host.file(".cotal/auth/broker.json")), 0o600);
    let audit = std::fs::read_to_string(new_host.file(".cotal/audit.jsonl")).unwrap();
    assert!(
        audit.contains("\"root.backed_up\"") && audit.contains("\"root.restored\""),
        "the restored audit records the backup it came from and the restore itself"
    );
    let b = Broker::up(new_host, port);
    b.connect(&alice)
        .expect("creds minted on the lost host work on the new one");
    b.root
        .cotal(&["plan", "--detailed-exitcode"])
        .assert()
        .code(0);
    // A root that already holds a .cotal/ is never overwritten.
    let out = b
        .root
        .cotal(&["root", "restore", dir.to_str().unwrap()])
        .assert()
        .code(3);
    assert!(crate::support::stderr(&out).contains("already exists"));
}

/// A root restored on a host where its old port is held by another program: the plan says the
/// holder is not this root's broker (never to kill it), and moving `[broker] port` is planned
/// against the listener the next start binds, applied and served; creds minted before connect.
#[test]
fn a_root_restored_where_its_old_port_is_taken_moves_to_a_free_port() {
    let a = Broker::start(TWO);
    let alice = a.mint("design", &["--user", "alice", "--profile", "admin"]);
    let vault = tempfile::tempdir().unwrap();
    let dir = vault.path().join("root-backup");
    a.root
        .cotal(&["root", "backup", dir.to_str().unwrap()])
        .assert()
        .success();
    a.root.cotal(&["down"]).assert().success();
    let old = a.port;
    // On the new host something else already listens on the old port.
    let squatter = std::net::TcpListener::bind(("127.0.0.1", old)).unwrap();
    let new_host = crate::support::TestRoot::new();
    new_host
        .cotal(&["root", "restore", dir.to_str().unwrap()])
        .assert()
        .success();
    let refused = crate::support::stderr(&new_host.cotal(&["plan"]).assert().code(3));
    assert!(
        refused.contains("it is not this root's broker") && !refused.contains("kill"),
        "{refused}"
    );
    let new = super::free_port();
    new_host.desire_on(new, TWO);
    let plan = stdout(
        &new_host
            .cotal(&["plan", "--detailed-exitcode"])
            .assert()
            .code(2),
    );
    assert!(plan.contains(&format!("port: {new}")), "{plan}");
    new_host.apply().success();
    let b = Broker::up(new_host, new);
    b.connect(&alice)
        .expect("creds minted on the lost host work on the new port");
    b.root
        .cotal(&["plan", "--detailed-exitcode"])
        .assert()
        .code(0);
    drop(squatter);
}

/// `down`, `up`, `creds` (mint, list, revoke), `audit`, `root backup` and `root restore` each
/// print one versioned document with `--format json`, valid for its schema in `schemas/`; a
/// creds document names the file holding the creds and never holds them.
#[test]
fn every_verb_prints_a_versioned_json_document_its_schema_describes() {
    use crate::support::assert_valid_for;
    let a = Broker::start(TWO);
    let json = |args: &[&str]| -> serde_json::Value {
        let out = stdout(&a.root.cotal(args).assert().success());
        serde_json::from_str(&out).unwrap_or_else(|e| panic!("{args:?}: {e}\n{out}"))
    };
    let down = json(&["down", "--format", "json"]);
    assert_valid_for("schemas/down.schema.json", &down);
    assert_eq!(down["status"], "stopped");
    assert_eq!(down["nodes"][0]["outcome"], "stopped");
    let again = json(&["down", "--format", "json"]);
    assert_valid_for("schemas/down.schema.json", &again);
    assert_eq!(again["nodes"][0]["outcome"], "not-running");
    let up = json(&["up", "--format", "json"]);
    assert_valid_for("schemas/up.schema.json", &up);
    assert_eq!(up["status"], "started");
    assert_eq!(up["spaces"], 2);
    assert_eq!(up["started"].as_array().unwrap().len(), 1);
    let running = json(&["up", "--format", "json"]);
    assert_valid_for("schemas/up.schema.json", &running);
    assert_eq!(running["status"], "already-running");

    let creds = a.root.file("alice.creds");
    let minted = json(&[
        "creds",
        "design",
        "--user",
        "alice",
        "--profile",
        "admin",
        "--out",
        creds.to_str().unwrap(),
        "--format",
        "json",
    ]);
    assert_valid_for("schemas/creds-mint.schema.json", &minted);
    assert!(!minted.to_string().contains("SEED"), "{minted}");
    assert!(
        std::fs::read_to_string(&creds)
            .unwrap()
            .contains("USER NKEY SEED")
    );
    // Without --out the creds would share standard output with the document: refused.
    let refused = a
        .root
        .cotal(&[
            "creds",
            "design",
            "--user",
            "bob",
            "--profile",
            "admin",
            "--format",
            "json",
        ])
        .assert()
        .code(1);
    assert!(crate::support::stderr(&refused).contains("--out FILE"));
    let monitor = a.root.file("monitor.creds");
    let system = json(&[
        "creds",
        "--system",
        "monitor",
        "--out",
        monitor.to_str().unwrap(),
        "--format",
        "json",
    ]);
    assert_valid_for("schemas/creds-mint.schema.json", &system);
    assert_eq!(system["space"], serde_json::Value::Null);
    let listed = json(&["creds", "list", "design", "--format", "json"]);
    assert_valid_for("schemas/creds-list.schema.json", &listed);
    assert_eq!(listed["users"][0]["key"], minted["key"]);
    let listed = json(&["creds", "list", "--system", "--format", "json"]);
    assert_valid_for("schemas/creds-list.schema.json", &listed);
    let revoked = json(&[
        "creds", "revoke", "design", "--user", "alice", "--format", "json",
    ]);
    assert_valid_for("schemas/creds-revoke.schema.json", &revoked);
    assert_eq!(revoked["keys"][0], minted["key"]);

    // A client of design, closed by the eviction.
    let _held = a.client("design").unwrap();
    let evicted = json(&["space", "evict", "design", "--format", "json"]);
    assert_valid_for("schemas/space-evict.schema.json", &evicted);
    assert_eq!(evicted["broker_running"], true);
    assert_eq!(evicted["closed"], 1, "{evicted}");

    let audit = stdout(
        &a.root
            .cotal(&["audit", "--format", "json"])
            .assert()
            .success(),
    );
    let lines: Vec<serde_json::Value> = audit
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert!(lines.len() > 3, "{audit}");
    for line in &lines {
        assert_valid_for("schemas/audit-record.schema.json", line);
    }

    let vault = tempfile::tempdir().unwrap();
    let dir = vault.path().join("root-backup");
    let backup = json(&["root", "backup", dir.to_str().unwrap(), "--format", "json"]);
    assert_valid_for("schemas/root-backup.schema.json", &backup);
    let new_host = crate::support::TestRoot::new();
    let restored = stdout(
        &new_host
            .cotal(&["root", "restore", dir.to_str().unwrap(), "--format", "json"])
            .assert()
            .success(),
    );
    let restored: serde_json::Value = serde_json::from_str(&restored).unwrap();
    assert_valid_for("schemas/root-restore.schema.json", &restored);
    assert_eq!(restored["operator"], backup["operator"]);

    // A space's streams, backed up from the cut and restored on another root as a move.
    a.root
        .cotal(&["down", "--preserve-state"])
        .assert()
        .success();
    let artifact = vault.path().join("design.backup");
    let artifact = artifact.to_str().unwrap();
    let backed = json(&["space", "backup", "design", artifact, "--format", "json"]);
    assert_valid_for("schemas/space-backup.schema.json", &backed);
    assert_eq!(backed["space"], "design");
    assert_eq!(backed["account"], a.root.account_pub("design"));
    let streams = backed["streams"].as_array().unwrap().len();
    assert!(streams >= 5, "{backed}");
    // The original's classes: the artifact store and its index are not carried, and said so.
    let left_out: Vec<&str> = backed["not_carried"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s.as_str().unwrap())
        .collect();
    for kept_out in [
        "OBJ_cotal_artifacts_design",
        "KV_cotal_artpossess_design",
        "KV_cotal_artattach_design",
    ] {
        assert!(left_out.contains(&kept_out), "{backed}");
        assert!(
            !backed["streams"]
                .as_array()
                .unwrap()
                .iter()
                .any(|s| s["name"] == kept_out),
            "{backed}"
        );
    }
    let b_root = crate::support::TestRoot::init();
    b_root.desire_on(super::free_port(), "[spaces.design]\n");
    b_root.apply().success();
    b_root
        .cotal(&["down", "--preserve-state"])
        .assert()
        .success();
    let moved = stdout(
        &b_root
            .cotal(&[
                "space",
                "restore",
                "design",
                artifact,
                "--relocate",
                "--format",
                "json",
            ])
            .assert()
            .success(),
    );
    let moved: serde_json::Value = serde_json::from_str(&moved).unwrap();
    assert_valid_for("schemas/space-restore.schema.json", &moved);
    assert_eq!(moved["relocated"], true);
    assert_eq!(moved["verified"].as_array().unwrap().len(), streams);
}

/// A root restored into a new folder on the same host while the root it was backed up from
/// still runs its broker on the old port: that broker is the other root's (its `-c` names the
/// other root's config), so the restored root's plan, `up` and `down` judge the port it moves
/// to and leave the other broker alone.
#[test]
fn a_root_restored_beside_its_running_source_moves_its_port_and_leaves_the_source_alone() {
    let a = Broker::start(TWO);
    let vault = tempfile::tempdir().unwrap();
    let dir = vault.path().join("root-backup");
    a.root
        .cotal(&["root", "backup", dir.to_str().unwrap()])
        .assert()
        .success();
    let copy = crate::support::TestRoot::new();
    copy.cotal(&["root", "restore", dir.to_str().unwrap()])
        .assert()
        .success();
    let new = super::free_port();
    copy.desire_on(new, TWO);
    let plan = stdout(
        &copy
            .cotal(&["plan", "--detailed-exitcode"])
            .assert()
            .code(2),
    );
    assert!(plan.contains(&format!("port: {new}")), "{plan}");
    copy.apply().success();
    copy.cotal(&["up"]).assert().success();
    copy.cotal(&["down"]).assert().success();
    // The source's broker never noticed: still running, still answering.
    assert_eq!(a.status()["broker"]["state"], "running");
    a.client("design")
        .expect("the source still serves its spaces");
}
