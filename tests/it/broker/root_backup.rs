//! `cotal root backup` and `cotal root restore` against a real broker: the host is lost, the
//! backup is brought up on a new one, and the creds handed out before work there.

use super::{Broker, TWO};
use crate::support::stdout;

#[test]
fn a_root_backup_brought_up_on_a_new_host_serves_the_creds_handed_out_before() {
    let a = Broker::start(TWO);
    let alice = a.mint("design", &["--user", "alice"]);
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
