//! `cotal adopt` on roots of the original Cotal, broker stopped (the running broker's tests are
//! in `broker::adopt`): fixtures built from the original's documented formats
//! ([`crate::support::original`]).

use crate::support::original::{Layout, MATERIAL, Original, space_dir};
use crate::support::{TestRoot, stderr, stdout};

fn adopt(root: &TestRoot) -> assert_cmd::assert::Assert {
    root.cotal(&["adopt", "--auto-approve"]).assert()
}

fn read(path: std::path::PathBuf) -> String {
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

#[test]
fn a_root_of_one_space_is_adopted_keeping_every_key_and_a_second_adopt_is_a_noop() {
    let root = TestRoot::new();
    let o = Original::new(&["design"], 14555);
    o.write(root.path(), Layout::default(), None);
    let record = read(root.file(&format!(
        ".cotal/auth/account.{}.json",
        hex::encode("design")
    )));
    let dir = space_dir(root.path(), "design");
    let delivery = read(dir.join("delivery.creds"));
    let observer = read(dir.join("membership-observer.creds"));

    let out = adopt(&root).success();
    let text = stdout(&out);
    for expected in [
        &format!("operator {}", o.operator.public_key()) as &str,
        &format!(
            "space \"design\" (account {})",
            o.spaces[0].account.public_key()
        ),
        "no system signing key (the original strips it before writing)",
        "write cotal.toml:",
        "port = 14555",
        "store_dir = \".cotal/nats\"",
        "[spaces.design]",
        "run `cotal rotate sys` (the broker is stopped)",
        "Apply complete",
    ] {
        assert!(text.contains(expected), "{expected}: {text}");
    }
    // Every key kept: the record's account and signing key, the broker's operator.
    let after: serde_json::Value = serde_json::from_str(&read(root.file(&format!(
        ".cotal/auth/account.{}.json",
        hex::encode("design")
    ))))
    .unwrap();
    let before: serde_json::Value = serde_json::from_str(&record).unwrap();
    for key in ["pub", "seed", "signingSeed", "signingPub"] {
        assert_eq!(after["account"][key], before["account"][key], "{key}");
    }
    let broker: serde_json::Value =
        serde_json::from_str(&read(root.file(".cotal/auth/broker.json"))).unwrap();
    assert_eq!(
        broker["operator"]["seed"],
        o.operator.seed().unwrap().as_str()
    );
    assert_eq!(broker["sys"]["pub"], o.sys.public_key().as_str());
    assert!(broker["sys"]["keys"]["control"].is_string(), "scoped keys");
    // The account users' creds are kept; the $SYS pair signed by the stripped key is re-minted.
    assert_eq!(read(dir.join("delivery.creds")), delivery);
    assert_ne!(read(dir.join("membership-observer.creds")), observer);
    // Audited before its first write.
    let audit = stdout(
        &root
            .cotal(&["audit", "--format", "json"])
            .assert()
            .success(),
    );
    assert!(audit.contains("\"root.adopted\""), "{audit}");
    // The plan after it is empty; a second adopt changes nothing.
    root.cotal(&["plan", "--detailed-exitcode"])
        .assert()
        .code(0);
    let tree = root.snapshot();
    let again = adopt(&root).success();
    assert!(
        stdout(&again).contains("Nothing to adopt: this root is cotal's already"),
        "{}",
        stdout(&again)
    );
    assert_eq!(root.snapshot(), tree, "a second adopt wrote nothing");
}

#[test]
fn the_legacy_monolith_is_split_into_its_two_records() {
    let root = TestRoot::new();
    let o = Original::new(&["solo"], 14556);
    o.write(
        root.path(),
        Layout {
            monolith: true,
            root_scoped: true,
        },
        None,
    );
    let monolith = read(root.file(".cotal/auth/auth.json"));
    let delivery = read(root.file(".cotal/delivery.creds"));
    let out = adopt(&root).success();
    let text = stdout(&out);
    assert!(text.contains("split the legacy monolith"), "{text}");
    assert!(
        text.contains("into .cotal/auth/broker.json and .cotal/auth/account.736f6c6f.json"),
        "{text}"
    );
    assert!(text.contains("move membership-observer.creds, connection-evictor.creds, membership-rw.creds, delivery.creds, membership.json from .cotal/ into .cotal/space.736f6c6f/"), "{text}");
    assert!(!root.file(".cotal/auth/auth.json").exists());
    assert_eq!(read(root.file(".cotal/auth/auth.json.adopted")), monolith);
    let record: serde_json::Value =
        serde_json::from_str(&read(root.file(".cotal/auth/account.736f6c6f.json"))).unwrap();
    assert_eq!(record["space"], "solo");
    assert_eq!(
        record["account"]["pub"],
        o.spaces[0].account.public_key().as_str()
    );
    for file in MATERIAL {
        assert!(
            !root.file(&format!(".cotal/{file}")).exists(),
            "{file} moved"
        );
        assert!(space_dir(root.path(), "solo").join(file).exists(), "{file}");
    }
    // The original minted a connection evictor: the adopted root keeps minting one.
    assert!(
        read(root.file("cotal.toml")).contains("evictor_creds = true"),
        "{text}"
    );
    assert_eq!(
        read(space_dir(root.path(), "solo").join("delivery.creds")),
        delivery
    );
    root.cotal(&["plan", "--detailed-exitcode"])
        .assert()
        .code(0);
    assert!(stdout(&adopt(&root).success()).contains("Nothing to adopt"));
}

#[test]
fn two_spaces_are_declared_and_root_scoped_material_beside_them_is_refused() {
    // Two spaces, their material in their own folders: both declared, both kept.
    let root = TestRoot::new();
    let o = Original::new(&["design", "ops team"], 14557);
    o.write(root.path(), Layout::default(), None);
    let out = adopt(&root).success();
    let desired = read(root.file("cotal.toml"));
    assert!(
        desired.contains("[spaces.design]") && desired.contains("[spaces.\"ops team\"]"),
        "{desired}\n{}",
        stdout(&out)
    );
    root.cotal(&["plan", "--detailed-exitcode"])
        .assert()
        .code(0);

    // The same with the material at root scope: whose it is cannot be established.
    let root = TestRoot::new();
    let o = Original::new(&["design", "ops"], 14558);
    o.write(
        root.path(),
        Layout {
            monolith: false,
            root_scoped: true,
        },
        None,
    );
    let tree = root.snapshot();
    let refused = adopt(&root).code(3);
    let text = stderr(&refused);
    assert!(
        text.contains("on a root of 2 spaces: whose it is cannot be established"),
        "{text}"
    );
    assert!(text.contains("Nothing was changed"), "{text}");
    assert_eq!(
        root.snapshot().without(".cotal/maintenance"),
        tree,
        "only the lock's folder"
    );
}

#[test]
fn a_corrupt_record_is_refused_by_name_and_nothing_is_written() {
    let root = TestRoot::new();
    let o = Original::new(&["design", "ops"], 14559);
    o.write(root.path(), Layout::default(), None);
    let ops = root.file(&format!(".cotal/auth/account.{}.json", hex::encode("ops")));
    let mut record: serde_json::Value = serde_json::from_str(&read(ops.clone())).unwrap();
    record["account"]["jwt"] = serde_json::json!("not.a.jwt");
    std::fs::write(&ops, record.to_string()).unwrap();
    let tree = root.snapshot();
    let refused = adopt(&root).code(3);
    let text = stderr(&refused);
    assert!(
        text.contains(&format!("account.{}.json", hex::encode("ops")))
            && text.contains("not valid records of operator"),
        "{text}"
    );
    assert_eq!(root.snapshot().without(".cotal/maintenance"), tree);
    // Without a terminal and without --auto-approve: refused before anything is written.
    std::fs::write(&ops, {
        record["account"]["jwt"] = serde_json::json!(o.account_jwt(&o.spaces[1]));
        record.to_string()
    })
    .unwrap();
    let tree = root.snapshot();
    let refused = root.cotal(&["adopt"]).assert().failure();
    assert!(
        stderr(&refused).contains("not a terminal"),
        "{}",
        stderr(&refused)
    );
    assert_eq!(
        root.snapshot().without(".cotal/maintenance"),
        tree.without(".cotal/maintenance")
    );
}
