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

/// An nsc store of three accounts: `team` with a signing key, `billing` without one
/// (JetStream on), `partner` exporting a service.
fn nsc_store() -> (tempfile::TempDir, crate::support::nsc::Nsc) {
    use crate::support::nsc::Nsc;
    let mut team = Nsc::account("team");
    team.signing = Some(nkeys::KeyPair::new_account());
    let mut billing = Nsc::account("billing");
    billing.jetstream = true;
    let mut partner = Nsc::account("partner");
    partner.extra = serde_json::json!({"exports": [
        {"name": "quotes", "subject": "quotes.>", "type": "service"}]});
    let store = Nsc::new(vec![team, billing, partner]);
    let dir = tempfile::tempdir().unwrap();
    store.write(dir.path());
    (dir, store)
}

fn record(root: &TestRoot, space: &str) -> serde_json::Value {
    serde_json::from_str(&read(
        root.file(&format!(".cotal/auth/account.{}.json", hex::encode(space))),
    ))
    .unwrap()
}

fn claims(token: &serde_json::Value) -> serde_json::Value {
    use base64::Engine as _;
    let body = token.as_str().unwrap().split('.').nth(1).unwrap();
    serde_json::from_slice(
        &base64::engine::general_purpose::URL_SAFE_NO_PAD
            .decode(body)
            .unwrap(),
    )
    .unwrap()
}

#[test]
fn an_nsc_store_is_adopted_keeping_every_key_and_a_second_adopt_is_a_noop() {
    let (dir, nsc) = nsc_store();
    let root = TestRoot::new();
    let nsc_dir = dir.path().to_str().unwrap();
    let out = root
        .cotal(&[
            "adopt",
            "--nsc",
            nsc_dir,
            "--account",
            "team",
            "--account",
            "billing=payments",
            "--auto-approve",
        ])
        .assert()
        .success();
    let text = stdout(&out);
    for expected in [
        &format!("operator \"acme\" ({})", nsc.operator.public_key()) as &str,
        "accounts signed with its signing key",
        "account \"team\"",
        "-> space \"team\" (JetStream off: cotal's first apply turns it on)",
        "account \"billing\"",
        "-> space \"payments\"",
        "no signing key with a seed in the store: a new one is added to its JWT",
        "account \"partner\": not adopted (not named by --account)",
        "the system account's 2 export(s) are not carried",
        "Adopted: operator \"acme\" and 2 space(s)",
    ] {
        assert!(text.contains(expected), "{expected}: {text}");
    }
    // Every key kept: the operator's identity and signing seeds, each account's key, team's
    // signing key; billing's JWT gained a signing key and kept everything else.
    let broker: serde_json::Value =
        serde_json::from_str(&read(root.file(".cotal/auth/broker.json"))).unwrap();
    assert_eq!(broker["operator"]["seed"], nsc.operator.seed().unwrap());
    assert_eq!(
        broker["operator"]["signingSeed"],
        nsc.operator_signing.seed().unwrap()
    );
    assert_eq!(broker["sys"]["pub"], nsc.sys.public_key());
    assert_eq!(
        read(root.file(".cotal/auth/sys.seed")).trim(),
        nsc.sys.seed().unwrap()
    );
    let team = record(&root, "team");
    assert_eq!(team["account"]["seed"], nsc.get("team").key.seed().unwrap());
    assert_eq!(
        team["account"]["signingSeed"],
        nsc.get("team").signing.as_ref().unwrap().seed().unwrap()
    );
    assert_eq!(team["account"]["jwt"], nsc.account_jwt(nsc.get("team")));
    let payments = record(&root, "payments");
    assert_eq!(
        payments["account"]["pub"],
        nsc.get("billing").key.public_key()
    );
    let billing_claims = claims(&payments["account"]["jwt"]);
    assert_eq!(
        billing_claims["nats"]["signing_keys"],
        serde_json::json!([payments["account"]["signingPub"]])
    );
    assert_eq!(billing_claims["nats"]["limits"]["disk_storage"], -1);
    assert_eq!(billing_claims["iss"], nsc.operator_signing.public_key());
    assert!(
        !root
            .file(".cotal/auth/account.7061727472656e.json")
            .exists()
    );
    for (file, mode) in [
        (".cotal/auth/broker.json", 0o600),
        (".cotal/auth/sys.seed", 0o600),
    ] {
        use std::os::unix::fs::PermissionsExt;
        let m = std::fs::metadata(root.file(file))
            .unwrap()
            .permissions()
            .mode();
        assert_eq!(m & 0o777, mode, "{file}");
    }
    let desired = read(root.file("cotal.toml"));
    assert!(
        desired.contains("[spaces.team]") && desired.contains("[spaces.payments]"),
        "{desired}"
    );

    // A second adopt writes nothing.
    let tree = root.snapshot();
    let again = root
        .cotal(&[
            "adopt",
            "--nsc",
            nsc_dir,
            "--account",
            "team",
            "--account",
            "billing=payments",
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
        root.snapshot().without(".cotal/maintenance"),
        tree.without(".cotal/maintenance")
    );
    // Adopting one more account while cotal.toml does not declare it is refused (the first
    // apply would remove it), naming the table to add.
    let more = root
        .cotal(&[
            "adopt",
            "--nsc",
            nsc_dir,
            "--account",
            "partner",
            "--keep-claims",
            "--auto-approve",
        ])
        .assert()
        .failure();
    assert!(
        stderr(&more).contains("does not declare \"partner\"")
            && stderr(&more).contains("add [spaces.partner]"),
        "{}",
        stderr(&more)
    );
    assert!(
        !root
            .file(".cotal/auth/account.7061727472656e.json")
            .exists()
    );
    // An adoption interrupted after the broker record is finished by adopting again.
    std::fs::remove_file(root.file(".cotal/auth/sys.seed")).unwrap();
    std::fs::remove_file(root.file(&format!(
        ".cotal/auth/account.{}.json",
        hex::encode("payments")
    )))
    .unwrap();
    let resumed = stdout(
        &root
            .cotal(&[
                "adopt",
                "--nsc",
                nsc_dir,
                "--account",
                "team",
                "--account",
                "billing=payments",
                "--auto-approve",
            ])
            .assert()
            .success(),
    );
    assert!(
        resumed.contains(".cotal/auth/sys.seed:")
            && resumed.contains("space \"payments\", its account")
            && !resumed.contains("broker.json:")
            && resumed.contains("(cotal.toml exists and is kept)"),
        "{resumed}"
    );
    assert_eq!(
        read(root.file(".cotal/auth/sys.seed")).trim(),
        nsc.sys.seed().unwrap()
    );
    assert_eq!(
        record(&root, "payments")["account"]["pub"],
        nsc.get("billing").key.public_key()
    );

    // The first apply (broker stopped) turns JetStream on for team, replaces the system
    // account's identity seed by cotal's scoped keys, and a second apply is a no-op.
    let plan = root.cotal(&["plan"]).assert().code(0);
    let plan = stdout(&plan);
    assert!(
        plan.contains("the unscoped .cotal/auth/sys.seed is replaced by scoped keys"),
        "{plan}"
    );
    root.apply().success();
    assert!(!root.file(".cotal/auth/sys.seed").exists());
    let team_now = claims(&record(&root, "team")["account"]["jwt"]);
    assert_eq!(team_now["nats"]["limits"]["disk_storage"], -1, "{team_now}");
    assert_eq!(
        record(&root, "team")["account"]["signingPub"],
        team["account"]["signingPub"]
    );
    root.cotal(&["plan", "--detailed-exitcode"])
        .assert()
        .code(0);
}

#[test]
fn an_nsc_account_using_what_cotal_does_not_model_is_refused_unless_its_claims_are_kept() {
    let (dir, nsc) = nsc_store();
    let root = TestRoot::new();
    let nsc_dir = dir.path().to_str().unwrap();
    // Every account by default: partner's export is named, and nothing is written.
    let out = root
        .cotal(&["adopt", "--nsc", nsc_dir, "--auto-approve"])
        .assert()
        .failure();
    let err = stderr(&out);
    assert!(
        err.contains("account \"partner\" uses exports (1)") && err.contains("--keep-claims"),
        "{err}"
    );
    assert!(
        !root.file(".cotal").exists(),
        "a refusal leaves the folder empty"
    );
    assert!(!root.file("cotal.toml").exists());
    // A missing seed is named with the file nsc keeps it in.
    let team_key = crate::support::nsc::key_file(dir.path(), &nsc.get("team").key.public_key());
    let kept = std::fs::read(&team_key).unwrap();
    std::fs::remove_file(&team_key).unwrap();
    let out = root
        .cotal(&[
            "adopt",
            "--nsc",
            nsc_dir,
            "--account",
            "team",
            "--auto-approve",
        ])
        .assert()
        .failure();
    assert!(
        stderr(&out).contains(&team_key.display().to_string()),
        "{}",
        stderr(&out)
    );
    std::fs::write(&team_key, kept).unwrap();

    // Kept: the export survives a change of the limits cotal declares, and every plan says so.
    root.cotal(&["adopt", "--nsc", nsc_dir, "--keep-claims", "--auto-approve"])
        .assert()
        .success();
    assert_eq!(
        record(&root, "partner")["keepClaims"],
        serde_json::json!(["exports (1)"])
    );
    let desired = read(root.file("cotal.toml"));
    std::fs::write(
        root.file("cotal.toml"),
        desired.replace(
            "[spaces.partner]\n",
            "[spaces.partner]\n[spaces.partner.limits]\nmax_connections = 7\n",
        ),
    )
    .unwrap();
    let plan = stdout(&root.cotal(&["plan"]).assert().code(0));
    assert!(
        plan.contains("\"partner\" keeps claims cotal does not model (exports (1))")
            && plan.contains("max_connections"),
        "{plan}"
    );
    root.apply().success();
    let partner = claims(&record(&root, "partner")["account"]["jwt"]);
    assert_eq!(partner["nats"]["limits"]["conn"], 7);
    assert_eq!(partner["nats"]["exports"][0]["subject"], "quotes.>");
    let plan = stdout(
        &root
            .cotal(&["plan", "--detailed-exitcode"])
            .assert()
            .code(0),
    );
    assert!(plan.contains("keeps claims cotal does not model"), "{plan}");
}

#[test]
fn a_jwt_naming_a_signing_key_that_is_not_a_key_is_refused_before_any_path_is_made_of_it() {
    use crate::support::nsc::Nsc;
    let dir = tempfile::tempdir().unwrap();
    // What a hostile JWT would make cotal probe: a folder beside the store, three levels up
    // from the key store's shard folder.
    let probe = dir.path().join("probe");
    std::fs::create_dir(&probe).unwrap();
    let mut team = Nsc::account("team");
    team.extra = serde_json::json!({"signing_keys": ["../../../../../probe"]});
    let store = Nsc::new(vec![team]);
    let nsc_dir = dir.path().join("nsc");
    store.write(&nsc_dir);
    let root = TestRoot::new();
    let out = root
        .cotal(&[
            "adopt",
            "--nsc",
            nsc_dir.to_str().unwrap(),
            "--auto-approve",
        ])
        .assert()
        .failure();
    let err = stderr(&out);
    assert!(
        err.contains("account \"team\"'s JWT names a key (its signing key #1) that is not an operator's or an account's public key"),
        "{err}"
    );
    // No oracle: nothing of what lies at the path it names is said.
    assert!(
        !err.contains("probe") && !err.contains("directory"),
        "{err}"
    );
    assert!(!root.file(".cotal").exists(), "nothing was written");
}
