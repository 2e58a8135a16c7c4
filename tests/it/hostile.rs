//! A corpus of hostile inputs (issue 6): malformed and adversarial `cotal.toml`, huge and odd
//! names, records with bad JSON, wrong names, links, foreign signatures, tampered generation
//! records, truncated journals, a hand-edited `server.conf`. Each case names its expected exit
//! code; what each prints is one snapshot (`hostile_corpus`), and nothing on disk changes.

use crate::support::{TestRoot, stderr, stdout};

const BASE: &str = "[spaces.design]\n\n[spaces.release]\n";

/// A converged root with two spaces, and another root's record to play the foreigner.
fn converged() -> TestRoot {
    let root = TestRoot::init();
    root.desire(BASE);
    root.apply().success();
    root
}

fn foreign_record() -> Vec<u8> {
    let other = TestRoot::init();
    other.desire("[spaces.x]\n");
    other.apply().success();
    std::fs::read(other.account_record("x")).unwrap()
}

type Mutate = Box<dyn Fn(&TestRoot)>;

struct Case {
    name: &'static str,
    mutate: Mutate,
    /// Expected exit code of `plan` and of `apply --auto-approve --allow-destroy`.
    code: i32,
}

fn toml(name: &'static str, text: &'static str) -> Case {
    Case {
        name,
        mutate: Box::new(move |r: &TestRoot| std::fs::write(r.file("cotal.toml"), text).unwrap()),
        code: 1,
    }
}

fn file(name: &'static str, path: &'static str, bytes: &'static [u8], code: i32) -> Case {
    Case {
        name,
        mutate: Box::new(move |r: &TestRoot| {
            let p = match path.strip_prefix("account:") {
                Some(space) => r.account_record(space),
                None => r.file(path),
            };
            std::fs::write(p, bytes).unwrap()
        }),
        code,
    }
}

fn corpus() -> Vec<Case> {
    let foreign = foreign_record();
    let long_name: &'static str =
        Box::leak(format!("version = 1\n[spaces.\"{}\"]\n", "n".repeat(200)).into_boxed_str());
    vec![
        toml("unterminated table", "version = 1\n[spaces.a\n"),
        toml("unknown top-level key", "version = 1\nmode = \"fast\"\n"),
        toml("unknown space key", "version = 1\n[spaces.a]\nowner = \"x\"\n"),
        toml("unknown limit", "version = 1\n[spaces.a.limits]\nmax_subs = 1\n"),
        toml("bad state", "version = 1\n[spaces.a]\nstate = \"retired\"\n"),
        toml("no version", "[spaces.a]\n"),
        toml("future version", "version = 2\n"),
        toml("version as a string", "version = \"1\"\n"),
        toml("empty name", "version = 1\n[spaces.\"\"]\n"),
        toml("dot name", "version = 1\n[spaces.\".\"]\n"),
        toml("dot-dot name", "version = 1\n[spaces.\"..\"]\n"),
        toml("huge name", long_name),
        toml("duplicate table", "version = 1\n[spaces.a]\n[spaces.a]\n"),
        toml("port zero", "version = 1\n[broker]\nport = 0\n"),
        toml("port too large", "version = 1\n[broker]\nport = 99999\n"),
        toml("host with a quote", "version = 1\n[broker]\nhost = 'a\"b'\n"),
        toml("host in brackets", "version = 1\n[broker]\nhost = \"[::1]\"\n"),
        toml("monitoring on a public address", "version = 1\n[broker.monitoring]\nhttp = \"0.0.0.0:8222\"\n"),
        toml("monitoring https without tls", "version = 1\n[broker.monitoring]\nhttps = \"127.0.0.1:8222\"\n"),
        toml("tls without a key", "version = 1\n[broker.tls]\ncert = \"c.pem\"\n"),
        toml("tls verify without a client pair", "version = 1\n[broker.tls]\ncert = \"c.pem\"\nkey = \"k.pem\"\nca = \"ca.pem\"\nverify = true\n"),
        toml("websocket without tls", "version = 1\n[broker.websocket]\nport = 8080\n"),
        toml("websocket in the clear on a public bind", "version = 1\n[broker.websocket]\nport = 8080\nhost = \"0.0.0.0\"\nno_tls = true\n"),
        toml("host with a port", "version = 1\n[broker]\nhost = \"localhost:1\"\n"),
        toml("store_dir with a newline", "version = 1\n[broker]\nstore_dir = \"a\\nb\"\n"),
        toml("zero connections", "version = 1\n[spaces.a.limits]\nmax_connections = 0\n"),
        toml("negative connections", "version = 1\n[spaces.a.limits]\nmax_connections = -3\n"),
        toml("unknown size unit", "version = 1\n[spaces.a.limits]\nmax_storage = \"10GB\"\n"),
        toml("zero storage", "version = 1\n[spaces.a.limits]\nmax_storage = 0\n"),
        toml("too few streams", "version = 1\n[spaces.a.limits]\nmax_streams = 5\n"),
        toml("payload below the JetStream API", "version = 1\n[spaces.a.limits]\nmax_payload = \"16B\"\n"),
        toml("storage below the reservations", "version = 1\n[spaces.a.limits]\nmax_storage = \"512KiB\"\n"),
        toml("not UTF-8", "version = 1\n[spaces.\u{0}]\n"),
        file("record: bad JSON", "account:design", b"{\"space\": \"design\", ", 3),
        file("record: empty", "account:design", b"", 3),
        file("record: wrong file name", ".cotal/auth/account.XYZ.json", b"{}", 3),
        file("record: uppercase hex", ".cotal/auth/account.6465.json", b"{}", 3),
        Case {
            name: "record: name does not match",
            mutate: Box::new(|r: &TestRoot| {
                std::fs::copy(r.account_record("design"), r.account_record("evil")).unwrap();
            }),
            code: 3,
        },
        Case {
            name: "record: a symlink",
            mutate: Box::new(|r: &TestRoot| {
                let target = r.file("outside.json");
                std::fs::rename(r.account_record("release"), &target).unwrap();
                std::os::unix::fs::symlink(&target, r.account_record("release")).unwrap();
            }),
            code: 3,
        },
        Case {
            name: "record: a directory",
            mutate: Box::new(|r: &TestRoot| std::fs::create_dir(r.account_record("ghost")).unwrap()),
            code: 3,
        },
        Case {
            name: "record: foreign signature",
            mutate: Box::new(move |r: &TestRoot| std::fs::write(r.account_record("x"), &foreign).unwrap()),
            code: 3,
        },
        Case {
            name: "record: tampered JWT",
            mutate: Box::new(|r: &TestRoot| {
                let p = r.account_record("design");
                let mut v: serde_json::Value = serde_json::from_slice(&std::fs::read(&p).unwrap()).unwrap();
                let jwt = v["account"]["jwt"].as_str().unwrap().to_string();
                let mut parts: Vec<String> = jwt.split('.').map(String::from).collect();
                let mut sig: Vec<char> = parts[2].chars().collect();
                sig[5] = if sig[5] == 'A' { 'B' } else { 'A' };
                parts[2] = sig.into_iter().collect();
                v["account"]["jwt"] = parts.join(".").into();
                std::fs::write(&p, serde_json::to_vec(&v).unwrap()).unwrap();
            }),
            code: 3,
        },
        file("broker record: bad JSON", ".cotal/auth/broker.json", b"{\"operator\":", 3),
        Case {
            name: "broker record: seed of another operator",
            mutate: Box::new(|r: &TestRoot| {
                let p = r.file(".cotal/auth/broker.json");
                let mut v: serde_json::Value = serde_json::from_slice(&std::fs::read(&p).unwrap()).unwrap();
                v["operator"]["seed"] = nkeys::KeyPair::new_operator().seed().unwrap().into();
                std::fs::write(&p, serde_json::to_vec(&v).unwrap()).unwrap();
            }),
            code: 3,
        },
        file("generation record: garbage", ".cotal/auth/broker-config.json", b"\x00\x01garbage", 3),
        file("generation record: bad digest", ".cotal/auth/broker-config.json", b"{\"gen\":1,\"inventoryDigest\":\"md5:abc\"}", 3),
        file("generation record: unknown field", ".cotal/auth/broker-config.json", b"{\"gen\":1,\"inventoryDigest\":\"sha256:00\",\"by\":\"me\"}", 3),
        file("journal: truncated", ".cotal/maintenance/journal.json", b"{\"op\":\"apply\",\"planDig", 3),
        file("journal: unknown field", ".cotal/maintenance/journal.json", b"{\"op\":\"apply\",\"planDigest\":\"x\",\"startedAt\":\"t\",\"pid\":1,\"host\":\"h\",\"evil\":1}", 3),
        Case {
            name: "journal: names another space's account",
            mutate: Box::new(|r: &TestRoot| {
                // A journal "removing" design with the account of release (protected or not,
                // release must never be touched by it).
                let journal = serde_json::json!({
                    "op": "apply", "planDigest": "sha256:x", "startedAt": "2026-01-01T00:00:00Z",
                    "pid": 999999, "host": "elsewhere",
                    "removals": [{"space": "design", "account": r.account_pub("release"), "committed": true}],
                    "steps": []
                });
                std::fs::write(r.file(".cotal/maintenance/journal.json"), journal.to_string()).unwrap();
            }),
            code: 3,
        },
        Case {
            name: "server.conf: a symlink",
            mutate: Box::new(|r: &TestRoot| {
                let target = r.file("elsewhere.conf");
                std::fs::write(&target, "TARGET-CONTENT must never be printed\n").unwrap();
                std::fs::remove_file(r.file(".cotal/auth/server.conf")).unwrap();
                std::os::unix::fs::symlink(&target, r.file(".cotal/auth/server.conf")).unwrap();
            }),
            code: 3,
        },
        Case {
            name: "state folder: group-writable",
            mutate: Box::new(|r: &TestRoot| chmod(&r.file(".cotal"), 0o770)),
            code: 3,
        },
        Case {
            name: "state folder: world-writable auth",
            mutate: Box::new(|r: &TestRoot| chmod(&r.file(".cotal/auth"), 0o777)),
            code: 3,
        },
        Case {
            name: "cotal.toml: owned by another user",
            mutate: Box::new(|r: &TestRoot| {
                std::os::unix::fs::chown(r.file("cotal.toml"), Some(4243), None).unwrap()
            }),
            code: 3,
        },
        Case {
            name: "cotal.toml: writable by everyone",
            mutate: Box::new(|r: &TestRoot| chmod(&r.file("cotal.toml"), 0o666)),
            code: 3,
        },
        Case {
            name: "root folder: writable by everyone",
            mutate: Box::new(|r: &TestRoot| chmod(r.path(), 0o777)),
            code: 3,
        },
        Case {
            name: "state folder: owned by another user",
            mutate: Box::new(|r: &TestRoot| {
                std::os::unix::fs::chown(r.file(".cotal"), Some(4242), None).unwrap()
            }),
            code: 3,
        },
        Case {
            name: "protection record: garbage",
            mutate: Box::new(|r: &TestRoot| {
                std::fs::write(r.file(".cotal/space.72656c65617365/lifecycle.json"), b"not json").unwrap();
                // The protection guard only speaks when the space is being removed.
                r.desire("[spaces.design]\n");
            }),
            code: 3,
        },
    ]
}

fn chmod(path: &std::path::Path, mode: u32) {
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).unwrap();
}

#[test]
fn every_hostile_input_is_refused_with_its_code_and_message_and_changes_nothing() {
    let cases = corpus();
    assert!(cases.len() >= 30, "the corpus holds {} cases", cases.len());
    // What each case prints, one catalogue: a reviewer reads every refusal in one file.
    let mut catalogue = String::new();
    for case in cases {
        let root = converged();
        (case.mutate)(&root);
        let before = root.snapshot();
        for args in [
            &["plan"][..],
            &["apply", "--auto-approve", "--allow-destroy"][..],
        ] {
            let out = root.cotal(args).assert();
            let out = out.code(case.code);
            let err = stderr(&out);
            catalogue.push_str(&format!(
                "## {}\n{}\n",
                case.name,
                crate::support::shown(&root, &args.join(" "), &out)
            ));
            assert!(!err.contains("panicked"), "{}", case.name);
            assert!(
                !stdout(&out).contains("TARGET-CONTENT") && !err.contains("TARGET-CONTENT"),
                "{}: a link's target was read",
                case.name
            );
        }
        assert_eq!(
            root.snapshot(),
            before,
            "{}: nothing on disk changed",
            case.name
        );
    }
    insta::assert_snapshot!("hostile_corpus", catalogue);
}

#[test]
fn odd_names_work_end_to_end_and_never_forge_output() {
    let root = TestRoot::init();
    let names = crate::support::odd_names();
    std::fs::write(root.file("cotal.toml"), crate::support::declaring(&names)).unwrap();
    let plan = root.cotal(&["plan"]).assert().success();
    let out = stdout(&plan);
    assert!(out.contains("\"caf\u{e9}\""), "stored composed: {out}");
    insta::assert_snapshot!(
        "odd_names_plan",
        crate::support::shown(&root, "plan", &plan)
    );
    root.apply().success();
    root.cotal(&["plan", "--detailed-exitcode"])
        .assert()
        .code(0);
    let conf = std::fs::read_to_string(root.file(".cotal/auth/server.conf")).unwrap();
    // Each space's account and its observer's: two comment lines a space, whatever its name.
    assert_eq!(
        conf.lines().filter(|l| l.starts_with("  # space ")).count(),
        2 * names.len()
    );
    // nats-server's own check of this config is in the real-broker tier
    // (`broker::rendered_configs_pass_nats_servers_own_check`).
}

/// A name holding a control character or a bidirectional control, or only whitespace, is
/// refused at its line and column; two keys naming one space once in NFC are declared twice;
/// `space add` refuses such a name too. Nothing is written.
#[test]
fn names_that_could_forge_or_hide_output_are_refused_where_they_are_written() {
    let root = TestRoot::init();
    for (name, why) in [
        ("a\nb", "control character"),
        ("tab\there", "control character"),
        ("evil\u{202E}txt", "U+202E"),
        (" ", "only whitespace"),
    ] {
        std::fs::write(root.file("cotal.toml"), crate::support::declaring(&[name])).unwrap();
        let before = root.snapshot();
        let out = root.cotal(&["plan"]).assert().code(1);
        let err = crate::support::stderr(&out);
        assert!(err.contains(why) && err.contains(":2:"), "{name:?}: {err}");
        assert_eq!(root.snapshot(), before);
    }
    std::fs::write(
        root.file("cotal.toml"),
        crate::support::declaring(&["caf\u{e9}", "cafe\u{301}"]),
    )
    .unwrap();
    let err = crate::support::stderr(&root.cotal(&["validate"]).assert().code(1));
    assert!(err.contains("declared twice"), "{err}");
    std::fs::write(root.file("cotal.toml"), "version = 1\n").unwrap();
    let err = crate::support::stderr(
        &root
            .cotal(&["space", "add", "a\u{202E}b", "--auto-approve"])
            .assert()
            .code(1),
    );
    assert!(err.contains("U+202E"), "{err}");
    assert_eq!(
        std::fs::read_to_string(root.file("cotal.toml")).unwrap(),
        "version = 1\n"
    );
}

#[test]
fn a_hand_edited_server_conf_is_a_plan_not_an_error() {
    let root = converged();
    let conf = root.file(".cotal/auth/server.conf");
    let text = std::fs::read_to_string(&conf).unwrap();
    std::fs::write(
        &conf,
        text.replace("resolver: MEMORY", "resolver: MEMORY\nmax_payload: 1"),
    )
    .unwrap();
    let before = root.snapshot();
    insta::assert_snapshot!(
        "a_hand_edited_server_conf",
        crate::support::run(&root, &["plan", "--detailed-exitcode"])
    );
    assert_eq!(root.snapshot(), before);
    root.apply().success();
    assert_eq!(std::fs::read_to_string(&conf).unwrap(), text);
}

#[test]
fn a_garbage_saved_plan_is_bad_input() {
    let root = converged();
    std::fs::write(root.file("plan.json"), b"{\"format_version\": 1}").unwrap();
    let before = root.snapshot();
    let out = root
        .cotal(&[
            "apply",
            "--auto-approve",
            root.file("plan.json").to_str().unwrap(),
        ])
        .assert();
    insta::assert_snapshot!(
        "a_garbage_saved_plan",
        crate::support::shown(&root, "apply --auto-approve [ROOT]/plan.json", &out)
    );
    assert_eq!(root.snapshot(), before);
}

#[cfg(feature = "fault-injection")]
#[test]
fn a_lock_file_replaced_under_its_holder_stops_the_holder_and_it_changes_nothing() {
    let root = converged();
    root.desire(&format!("{BASE}\n[spaces.third]\n"));
    let generation = root.generation();
    // The first apply holds the lock and waits right after taking it.
    let first = crate::support::Paused::at(&root, &["apply", "--auto-approve"], "after-lock");
    let before = root.snapshot();
    // Someone deletes the lock file. A second apply can lock a new file, but the holder note
    // names a live cotal: it refuses, naming it.
    std::fs::remove_file(root.file(".cotal/maintenance/lock")).unwrap();
    let second = root.apply().code(4);
    let second_err = stderr(&second);
    assert!(
        second_err.contains(&format!("pid {}", first.pid()))
            && second_err.contains("was deleted or replaced"),
        "{second_err}"
    );
    // The first one finds its lock file replaced and stops before changing anything.
    let (code, err) = first.resume();
    assert_eq!(code, Some(3), "{err}");
    assert!(
        err.contains("was deleted or replaced while this cotal held it"),
        "{err}"
    );
    assert_eq!(root.snapshot(), before, "neither apply changed anything");
    assert_eq!(root.generation(), generation);
}

#[test]
fn up_never_lets_nats_server_follow_a_link_at_its_log() {
    let root = converged();
    let victim = root.file("victim.txt");
    std::fs::write(&victim, "a file the broker must never append to\n").unwrap();
    std::os::unix::fs::symlink(&victim, root.file(".cotal/nats.log")).unwrap();
    let before = root.snapshot();
    insta::assert_snapshot!(
        "up_with_a_link_at_the_log",
        crate::support::run(&root, &["up"])
    );
    assert_eq!(root.snapshot(), before, "nothing started, nothing written");
    assert!(!root.file(".cotal/nats.pid").exists());
}

#[test]
fn a_space_verb_whose_apply_fails_leaves_cotal_toml_as_it_was() {
    let root = converged();
    // The audit fails closed: the apply stops before changing anything.
    let audit = root.file(".cotal/audit.jsonl");
    std::fs::remove_file(&audit).unwrap();
    nix::unistd::mkfifo(&audit, nix::sys::stat::Mode::S_IRWXU).unwrap();
    let before = root.snapshot();
    insta::assert_snapshot!(
        "a_space_verb_with_an_audit_that_cannot_be_written",
        crate::support::run(&root, &["space", "suspend", "design", "--auto-approve"])
    );
    assert_eq!(
        root.snapshot(),
        before,
        "cotal.toml keeps no edit of a failed verb"
    );
}

/// `plan --state` reads a file a pull request brings, and its stderr is posted publicly: a link
/// (to `/dev/zero`), a FIFO, a file over the bound and a state whose value has the wrong type
/// are each refused quickly, naming the file, never echoing a value.
#[test]
fn a_hostile_state_file_is_refused_unread_and_never_echoed() {
    let root = converged();
    let dir = tempfile::tempdir().unwrap();
    let plan = |path: &std::path::Path| {
        let out = root
            .cotal(&["plan", "--unverified-state", "--state"])
            .arg(path)
            .timeout(std::time::Duration::from_secs(20))
            .assert()
            .code(1);
        stderr(&out)
    };
    let link = dir.path().join("state.json");
    std::os::unix::fs::symlink("/dev/zero", &link).unwrap();
    let e = plan(&link);
    assert!(e.contains("is a symbolic link, not a regular file"), "{e}");
    let fifo = dir.path().join("fifo.json");
    nix::unistd::mkfifo(&fifo, nix::sys::stat::Mode::from_bits_truncate(0o600)).unwrap();
    let e = plan(&fifo);
    assert!(e.contains("not a regular file"), "{e}");
    let big = dir.path().join("big.json");
    std::fs::File::create(&big)
        .unwrap()
        .set_len(cotal::observed::state::MAX_STATE_BYTES + 1)
        .unwrap();
    let e = plan(&big);
    assert!(e.contains("is larger than 67108864 bytes"), "{e}");
    let typed = dir.path().join("typed.json");
    std::fs::write(&typed, r#"{"format_version": "do-not-print-me"}"#).unwrap();
    let e = plan(&typed);
    assert!(
        e.contains("typed.json:1:") && e.contains("not a cotal state"),
        "{e}"
    );
    assert!(!e.contains("do-not-print-me"), "no value echoed: {e}");
}

/// The temp files of atomic writes a SIGKILL left (in `.cotal/maintenance/`, a space's folder)
/// are removed by the next writer that holds the root; a fresh one (a write in flight) is not.
#[test]
fn temp_files_a_killed_writer_left_are_removed_by_the_next_writer() {
    let root = converged();
    let space_dir = std::fs::read_dir(root.file(".cotal"))
        .unwrap()
        .flatten()
        .find(|e| e.file_name().to_string_lossy().starts_with("space."))
        .unwrap()
        .path();
    let orphans = [
        root.file(".cotal/maintenance/.cotal-tmp.killed1"),
        space_dir.join(".cotal-tmp.killed2"),
    ];
    let day_ago = std::time::SystemTime::now() - std::time::Duration::from_secs(86_400);
    for orphan in &orphans {
        std::fs::write(orphan, "half a record").unwrap();
        std::fs::File::options()
            .write(true)
            .open(orphan)
            .unwrap()
            .set_modified(day_ago)
            .unwrap();
    }
    let fresh = root.file(".cotal/maintenance/.cotal-tmp.inflight");
    std::fs::write(&fresh, "being written").unwrap();
    // A reader leaves them; a writer that holds the lock sweeps the old ones.
    root.desire(&format!("{BASE}\n[spaces.ops]\n"));
    root.cotal(&["plan"]).assert().success();
    assert!(orphans.iter().all(|o| o.exists()), "plan holds no lock");
    root.apply().success();
    for orphan in &orphans {
        assert!(!orphan.exists(), "{} was removed", orphan.display());
    }
    assert!(
        fresh.exists(),
        "a temp file younger than a write's lifetime is kept"
    );
}

/// The state key of `root` (`cotal state key`).
fn state_key(root: &TestRoot) -> String {
    stdout(&root.cotal(&["state", "key"]).assert().success())
        .trim()
        .to_string()
}

/// A pull request that drops a space from both `cotal.toml` and `state.json` hides its removal
/// from a plan that trusts the state: a state not signed by the broker's state key (edited,
/// unsigned, another root's) is refused, a plan with no key given is refused, and one made with
/// `--unverified-state` says so on its first line in every format.
#[test]
fn a_pull_request_cannot_hide_a_removal_by_editing_the_state() {
    use std::os::unix::fs::PermissionsExt as _;
    let root = converged();
    let key = state_key(&root);
    assert!(key.starts_with('M') && key.len() == 56, "{key}");
    assert_eq!(key, state_key(&root), "the key is made once and kept");
    let seed = root.file(".cotal/auth/state.seed");
    assert_eq!(
        std::fs::metadata(&seed).unwrap().permissions().mode() & 0o777,
        0o600
    );
    let signed = std::fs::read_to_string(root.file(".cotal/state.json")).unwrap();
    let ci = TestRoot::new();
    // The pull request: `release` dropped from both files.
    std::fs::write(
        ci.file("cotal.toml"),
        "version = 1\n\n[broker]\nport = 4222\n\n[spaces.design]\n",
    )
    .unwrap();
    let mut state: serde_json::Value = serde_json::from_str(&signed).unwrap();
    state["spaces"].as_object_mut().unwrap().remove("release");
    let edited = ci.file("edited.json");
    std::fs::write(&edited, serde_json::to_vec_pretty(&state).unwrap()).unwrap();
    let genuine = ci.file("state.json");
    std::fs::write(&genuine, &signed).unwrap();
    let plan = |file: &std::path::Path, extra: &[&str]| {
        let mut cmd = ci.cotal(&["plan", "--state"]);
        cmd.arg(file).args(extra);
        cmd.assert()
    };

    // The genuine state, checked: the removal is planned, as on the root.
    let out = plan(&genuine, &["--state-key", &key, "--detailed-exitcode"]).code(2);
    assert!(
        stdout(&out).contains("- \"release\" remove"),
        "{}",
        stdout(&out)
    );
    // The same key from the environment, as the workflow gives it.
    ci.cotal(&["plan", "--state"])
        .arg(&genuine)
        .env("COTAL_STATE_KEY", &key)
        .assert()
        .success();

    // A shell that exports the key still plans on a root, and --unverified-state wins over it.
    root.cotal(&["plan"])
        .env("COTAL_STATE_KEY", &key)
        .assert()
        .success();
    ci.cotal(&["plan", "--unverified-state", "--state"])
        .arg(&genuine)
        .env("COTAL_STATE_KEY", &key)
        .assert()
        .success();

    // The edited state: refused, naming why, planning nothing.
    let out = plan(&edited, &["--state-key", &key]).code(3);
    let e = stderr(&out);
    assert!(e.contains("changed after cotal signed it"), "{e}");
    assert!(e.contains("nothing was planned"), "{e}");
    assert!(stdout(&out).is_empty(), "no plan printed");

    // Unsigned, and signed by another root's key.
    state = serde_json::from_str(&signed).unwrap();
    state.as_object_mut().unwrap().remove("signature");
    std::fs::write(&edited, serde_json::to_vec(&state).unwrap()).unwrap();
    let e = stderr(&plan(&edited, &["--state-key", &key]).code(3));
    assert!(e.contains("is not signed"), "{e}");
    let other = TestRoot::init();
    let other_key = state_key(&other);
    let e = stderr(&plan(&genuine, &["--state-key", &other_key]).code(3));
    assert!(
        e.contains(&format!(
            "signed by the state key {key}, not by {other_key}"
        )),
        "{e}"
    );
    // A key that is not a state key, and no key at all.
    let operator = cotal::testing::fixed_operator().public_key();
    let e = stderr(&plan(&genuine, &["--state-key", &operator]).code(1));
    assert!(e.contains("is not a public state key"), "{e}");
    let e = stderr(&plan(&genuine, &[]).code(1));
    assert!(e.contains("no state key was given"), "{e}");
    assert!(e.contains("--unverified-state"), "{e}");

    // Unverified on request: the first line of every format says so.
    for format in ["text", "markdown", "json"] {
        let out = plan(&edited, &["--unverified-state", "--format", format]).success();
        let text = stdout(&out);
        let first = text
            .lines()
            .find(|l| !l.trim().is_empty() && l.trim() != "{")
            .unwrap();
        assert!(
            first.contains("signature was not checked"),
            "{format}: {text}"
        );
    }
}

/// The example workflow's script plans a pull request against the state the base branch holds,
/// never the one the pull request brings, and puts a loud note on a pull request that changes
/// it: the removal the pull request tried to hide is in the comment.
#[test]
fn the_workflow_plans_against_the_base_branchs_state_and_flags_a_changed_one() {
    let root = converged();
    let key = state_key(&root);
    let repo = tempfile::tempdir().unwrap();
    let git = |args: &[&str]| {
        let out = std::process::Command::new("git")
            .args([
                "-c",
                "user.name=t",
                "-c",
                "user.email=t@t",
                "-c",
                "init.defaultBranch=main",
            ])
            .args(args)
            .current_dir(repo.path())
            .output()
            .unwrap();
        assert!(out.status.success(), "git {args:?}: {out:?}");
    };
    let write = |rel: &str, bytes: &[u8]| std::fs::write(repo.path().join(rel), bytes).unwrap();
    git(&["init", "-q"]);
    write(
        "cotal.toml",
        &std::fs::read(root.file("cotal.toml")).unwrap(),
    );
    let signed = std::fs::read(root.file(".cotal/state.json")).unwrap();
    write("state.json", &signed);
    git(&["add", "."]);
    git(&["commit", "-q", "-m", "base"]);
    git(&["checkout", "-q", "-b", "pr"]);
    write(
        "cotal.toml",
        b"version = 1\n\n[broker]\nport = 4222\n\n[spaces.design]\n",
    );
    let mut state: serde_json::Value = serde_json::from_slice(&signed).unwrap();
    state["spaces"].as_object_mut().unwrap().remove("release");
    write("state.json", &serde_json::to_vec_pretty(&state).unwrap());
    git(&["commit", "-q", "-am", "drop release quietly"]);

    let script = std::fs::canonicalize("examples/ci/plan-pull-request.sh").unwrap();
    let bin = assert_cmd::cargo::cargo_bin("cotal");
    let path = format!(
        "{}:{}",
        bin.parent().unwrap().display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let run = || {
        std::process::Command::new("sh")
            .arg(&script)
            .arg("main")
            .arg("HEAD")
            .current_dir(repo.path())
            .env("PATH", &path)
            .env("COTAL_STATE_KEY", &key)
            .env_remove("COTAL_ROOT")
            .env("NO_COLOR", "1")
            .output()
            .unwrap()
    };
    // Called wrong, the script never says "no changes" or "changes".
    let wrong = std::process::Command::new("sh")
        .arg(&script)
        .current_dir(repo.path())
        .output()
        .unwrap();
    assert_eq!(wrong.status.code(), Some(3), "{wrong:?}");
    let out = run();
    assert_eq!(out.status.code(), Some(2), "{out:?}");
    let comment = std::fs::read_to_string(repo.path().join("plan.md")).unwrap();
    assert!(
        comment.starts_with("> [!CAUTION]") && comment.contains("changes `state.json`"),
        "{comment}"
    );
    assert!(
        comment.contains("release") && comment.contains("1 to remove"),
        "the hidden removal is shown: {comment}"
    );
    assert!(repo.path().join("plan.json").exists(), "the saved plan");

    // A pull request that leaves the state alone gets no note.
    git(&["checkout", "-q", "main", "--", "state.json"]);
    git(&["commit", "-q", "-m", "keep the state"]);
    let out = run();
    assert_eq!(out.status.code(), Some(2), "{out:?}");
    let comment = std::fs::read_to_string(repo.path().join("plan.md")).unwrap();
    assert!(!comment.contains("CAUTION"), "{comment}");
    assert!(comment.contains("1 to remove"), "{comment}");
}

/// Modes of every file under `dir`, relative to it.
fn modes(dir: &std::path::Path) -> Vec<(String, u32)> {
    use std::os::unix::fs::PermissionsExt;
    let mut out = Vec::new();
    for entry in walkdir(dir) {
        let mode = std::fs::symlink_metadata(&entry)
            .unwrap()
            .permissions()
            .mode()
            & 0o7777;
        out.push((entry.strip_prefix(dir).unwrap().display().to_string(), mode));
    }
    out
}

fn walkdir(dir: &std::path::Path) -> Vec<std::path::PathBuf> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir(dir).unwrap().flatten() {
        if entry.file_type().unwrap().is_dir() {
            out.extend(walkdir(&entry.path()));
        } else {
            out.push(entry.path());
        }
    }
    out
}

#[test]
fn a_root_restore_gives_files_cotals_modes_never_the_manifests_and_never_reads_a_linked_manifest() {
    let root = converged();
    let vault = TestRoot::new();
    let good = vault.file("good");
    root.cotal(&["root", "backup", good.to_str().unwrap()])
        .assert()
        .success();
    // The manifest is not signed: a hostile one asks for a setuid, world-writable seed.
    let manifest_path = good.join("manifest.json");
    let mut manifest: serde_json::Value =
        serde_json::from_slice(&std::fs::read(&manifest_path).unwrap()).unwrap();
    for f in manifest["files"].as_array_mut().unwrap() {
        f["mode"] = serde_json::json!(0o4777);
    }
    std::fs::write(&manifest_path, serde_json::to_vec(&manifest).unwrap()).unwrap();
    let target = TestRoot::new();
    target
        .cotal(&["root", "restore", good.to_str().unwrap()])
        .assert()
        .success();
    let restored = modes(&target.file(".cotal"));
    assert!(
        restored.iter().any(|(p, _)| p == "auth/broker.json"),
        "{restored:?}"
    );
    for (path, mode) in &restored {
        assert!(
            *mode == 0o600 || (*mode == 0o644 && path.ends_with("state.json")),
            "{path} restored with mode {mode:o}"
        );
    }
    // A manifest that is a link to an endless file is refused by what it is, never read.
    let linked = vault.file("linked");
    std::fs::create_dir(&linked).unwrap();
    std::fs::rename(good.join("files"), linked.join("files")).unwrap();
    std::os::unix::fs::symlink("/dev/zero", linked.join("manifest.json")).unwrap();
    let elsewhere = TestRoot::new();
    let out = elsewhere
        .cotal(&["root", "restore", linked.to_str().unwrap()])
        .assert()
        .code(3);
    assert!(
        stderr(&out).contains("manifest.json is a symbolic link, not a regular file"),
        "{}",
        stderr(&out)
    );
    assert_eq!(std::fs::read_dir(elsewhere.path()).unwrap().count(), 0);
}

#[test]
fn a_record_of_gigabytes_is_refused_by_name_and_never_read() {
    let root = converged();
    let record = root.account_record("design");
    let before = std::fs::read(&record).unwrap();
    std::fs::OpenOptions::new()
        .write(true)
        .open(&record)
        .unwrap()
        .set_len(3 << 30)
        .unwrap();
    for args in [vec!["plan"], vec!["adopt", "--auto-approve"]] {
        let out = root.cotal(&args).assert().failure();
        let err = stderr(&out);
        assert!(
            err.contains(&format!(
                "{} is larger than 268435456 bytes, more than cotal reads of it",
                record.display()
            )),
            "{args:?}: {err}"
        );
    }
    // Nothing changed: the record is as it was left, and restoring it converges.
    assert_eq!(std::fs::metadata(&record).unwrap().len(), 3 << 30);
    std::fs::write(&record, before).unwrap();
    assert!(stdout(&root.cotal(&["plan"]).assert().success()).contains("No changes"));
}

#[cfg(feature = "fault-injection")]
#[test]
fn a_killed_backup_leaves_a_private_copy_named_by_status_and_swept() {
    use std::os::unix::fs::PermissionsExt;
    let root = converged();
    let vault = TestRoot::new();
    let dest = vault.file("b");
    let crashed = root
        .cotal(&["root", "backup", dest.to_str().unwrap()])
        .env("COTAL_CRASH_AT", "mid-backup-copy")
        .output()
        .unwrap();
    assert!(
        String::from_utf8_lossy(&crashed.stderr).contains("crash injected at mid-backup-copy"),
        "the crash point was never reached"
    );
    let partial = vault.file(".b.cotal-partial");
    let mode = std::fs::metadata(&partial).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o700, "the partial copy is private");
    assert!(!dest.exists());
    let status = root.cotal(&["status"]).output().unwrap();
    let said = String::from_utf8_lossy(&status.stdout).into_owned()
        + &String::from_utf8_lossy(&status.stderr);
    assert!(
        said.contains(&format!("a killed backup left {}", partial.display())),
        "{said}"
    );
    // The next backup, to anywhere, removes it.
    root.cotal(&["root", "backup", vault.file("c").to_str().unwrap()])
        .assert()
        .success();
    assert!(!partial.exists(), "swept by the next backup");
    assert!(vault.file("c/manifest.json").exists());
    let status = stdout(&root.cotal(&["status"]).assert());
    assert!(!status.contains("a killed backup left"), "{status}");
}

#[cfg(feature = "fault-injection")]
#[test]
fn a_member_is_minted_with_the_grant_declared_when_it_holds_the_lock() {
    let members = |read: &str| {
        format!(
            "[spaces.design]\n\n[spaces.design.members.\"acme.alice\"]\nread = [{read}]\npost = [\"team.backend\"]\n"
        )
    };
    let root = TestRoot::init();
    root.desire(&members("\"team.backend\", \"team.ops\""));
    root.apply().success();
    let creds = root.file("alice.creds");
    let paused = crate::support::Paused::at(
        &root,
        &[
            "creds",
            "design",
            "--member",
            "acme.alice",
            "--out",
            creds.to_str().unwrap(),
        ],
        "after-lock",
    );
    // The grant is narrowed while the mint waits for (here: holds) the lock.
    root.desire(&members("\"team.backend\""));
    let (code, said) = paused.resume();
    assert_eq!(code, Some(0), "{said}");
    let ledger: serde_json::Value = serde_json::from_slice(
        &std::fs::read(root.file(&format!(
            ".cotal/space.{}/users.json",
            hex::encode("design")
        )))
        .unwrap(),
    )
    .unwrap();
    let minted = &ledger["minted"][0];
    assert_eq!(minted["member"]["principal"], "acme.alice", "{ledger}");
    assert_eq!(
        minted["member"]["read"],
        serde_json::json!(["team.backend"]),
        "the grant read under the lock, not the one read before it: {ledger}"
    );
}

#[test]
fn a_removal_is_refused_beside_the_originals_unattributed_material_and_reaps_the_spaces_agent_secrets()
 {
    let root = converged();
    std::fs::write(root.file(".cotal/delivery.creds"), "root-scoped P7").unwrap();
    std::fs::create_dir_all(root.file(".cotal/auth/creds")).unwrap();
    std::fs::write(root.file(".cotal/auth/creds/alice.creds"), "flat P1").unwrap();
    std::fs::write(
        root.file("cotal.toml"),
        "version = 1\n\n[broker]\nport = 4222\n\n[spaces.design]\n",
    )
    .unwrap();
    let before = root.snapshot();
    for args in [
        vec!["plan"],
        vec!["apply", "--auto-approve", "--allow-destroy"],
    ] {
        let out = root.cotal(&args).assert().code(3);
        let err = stderr(&out);
        assert!(
            err.contains("material the original Cotal kept for no named tenant (.cotal/delivery.creds, .cotal/auth/creds/alice.creds): removing \"release\""),
            "{args:?}: {err}"
        );
        assert!(
            err.contains("next: give each file its tenant first"),
            "{err}"
        );
        assert_eq!(root.snapshot(), before, "{args:?}: nothing changed");
    }
    // Each file given its tenant: the removal goes ahead and reaps the departing space's agent
    // secrets, never the survivor's.
    std::fs::rename(
        root.file(".cotal/delivery.creds"),
        root.file(&format!(
            ".cotal/space.{}/delivery.creds",
            hex::encode("design")
        )),
    )
    .unwrap();
    let segment =
        |space: &str| root.file(&format!(".cotal/auth/creds/space.{}", hex::encode(space)));
    std::fs::create_dir_all(segment("release")).unwrap();
    std::fs::create_dir_all(segment("design")).unwrap();
    std::fs::rename(
        root.file(".cotal/auth/creds/alice.creds"),
        segment("release").join("alice.creds"),
    )
    .unwrap();
    std::fs::write(segment("design").join("bob.creds"), "design's").unwrap();
    root.apply().success();
    assert!(
        !segment("release").exists(),
        "the removed space's agent secrets are reaped"
    );
    assert!(
        segment("design").join("bob.creds").exists(),
        "the survivor's are kept"
    );
}

#[test]
fn multi_space_false_on_an_existing_root_is_refused_at_its_line_and_changes_nothing() {
    let root = converged();
    std::fs::write(
        root.file("cotal.toml"),
        "version = 1\n\n[broker]\nport = 4222\nmulti_space = false\n\n[spaces.design]\n\n[spaces.release]\n",
    )
    .unwrap();
    let before = root.snapshot();
    for args in [
        vec!["validate"],
        vec!["plan"],
        vec!["apply", "--auto-approve"],
    ] {
        let out = root.cotal(&args).assert().code(1);
        let err = stderr(&out);
        assert!(
            err.contains("cotal.toml:5:15: multi_space = false is refused")
                && err.contains("remove the key or set it to true"),
            "{args:?}: {err}"
        );
        assert_eq!(root.snapshot(), before, "{args:?}");
    }
}

/// A pull request moving `[broker] store_dir` is planned as what it is, from the signed state
/// as on the host: every space's data taken out of service, needing `--allow-destroy`; and
/// one setting `max_file_store` below what the spaces commit is refused in CI as on the host.
#[test]
fn a_pull_request_moving_the_store_is_planned_as_data_out_of_service_in_ci_and_on_the_host() {
    let root = converged();
    let key = state_key(&root);
    let ci = TestRoot::new();
    let genuine = ci.file("state.json");
    let moved = "version = 1\n\n[broker]\nport = 4222\nstore_dir = \".cotal/nats-new\"\n\n[spaces.design]\n\n[spaces.release]\n";
    let old_store = root.file(".cotal/nats");
    let new_store = root.file(".cotal/nats-new");
    std::fs::write(ci.file("cotal.toml"), moved).unwrap();
    let ci_plan = |code: i32| {
        root.cotal(&[
            "state",
            "export",
            "--out",
            genuine.to_str().unwrap(),
            "--force",
        ])
        .assert()
        .success();
        let out = ci
            .cotal(&[
                "plan",
                "--detailed-exitcode",
                "--state-key",
                &key,
                "--state",
            ])
            .arg(&genuine)
            .assert()
            .code(code);
        stdout(&out)
    };
    // A store that never held data (the broker never started): a plain setting.
    let text = ci_plan(2);
    assert!(
        text.contains(&format!(
            "the store moves from {} to {}: {} holds no space's data, so nothing is taken out of service",
            old_store.display(),
            new_store.display(),
            old_store.display()
        )) && !text.contains("This plan destroys data"),
        "{text}"
    );
    // Once it holds the spaces' data (an account's folder in its JetStream store):
    let said = format!(
        "the store moves from {} to {}: the broker starts on a store without the spaces' data",
        old_store.display(),
        new_store.display()
    );
    std::fs::create_dir_all(old_store.join("jetstream/ADATA")).unwrap();
    // In CI, from the base branch's signed state.
    let text = ci_plan(2);
    assert!(text.contains(&said), "{text}");
    assert!(
        text.contains("takes every stream, message and byte of every space out of service"),
        "{text}"
    );
    assert!(text.contains("This plan destroys data"), "{text}");
    assert!(!text.contains("edited by hand"), "{text}");
    // On the host: the same plan, and an apply without --allow-destroy changes nothing.
    std::fs::write(root.file("cotal.toml"), moved).unwrap();
    let text = stdout(&root.cotal(&["plan"]).assert().success());
    assert!(text.contains(&said), "{text}");
    let before = root.snapshot();
    let out = root.cotal(&["apply", "--auto-approve"]).assert().failure();
    assert!(stderr(&out).contains("--allow-destroy"), "{}", stderr(&out));
    assert_eq!(root.snapshot(), before, "refused: nothing changed");
    // Approved: the move is recorded, and a second plan has nothing to do.
    root.cotal(&["apply", "--auto-approve", "--allow-destroy"])
        .assert()
        .success();
    let homes: serde_json::Value =
        serde_json::from_slice(&std::fs::read(root.file(".cotal/store.json")).unwrap()).unwrap();
    assert_eq!(
        homes["nodes"]["local"]["dir"],
        new_store.display().to_string(),
        "{homes}"
    );
    root.cotal(&["plan", "--detailed-exitcode"])
        .assert()
        .code(0);

    // A store capacity below what the spaces commit: refused in CI as on the host.
    let small = "version = 1\n\n[broker]\nport = 4222\nmax_file_store = \"1MiB\"\n\n[spaces.design]\n\n[spaces.release]\n";
    std::fs::write(ci.file("cotal.toml"), small).unwrap();
    let out = ci
        .cotal(&["plan", "--state-key", &key, "--state"])
        .arg(&genuine)
        .assert()
        .code(3);
    assert!(
        stderr(&out).contains("nats-server enables JetStream for a space only while every space's quota fits in its store"),
        "{}",
        stderr(&out)
    );
}

/// An open removal journal blocks the root (seed 000 §2.2 step 4, §3): every verb that would
/// change trust, hand out or revoke users, or record a cut refuses, naming the apply that
/// finishes it; that apply does, and the verbs work again.
#[cfg(feature = "fault-injection")]
#[test]
fn an_open_removal_journal_blocks_every_verb_but_the_apply_that_finishes_it() {
    let root = converged();
    root.desire("[spaces.design]\n");
    let crashed = root
        .cotal(&["apply", "--auto-approve", "--allow-destroy"])
        .env("COTAL_CRASH_AT", "after-removal-committed")
        .output()
        .unwrap();
    assert!(
        String::from_utf8_lossy(&crashed.stderr)
            .contains("crash injected at after-removal-committed"),
        "the crash point was never reached"
    );
    // The killed apply's holder note is housekeeping the next lock holder replaces, not state.
    let _ = std::fs::remove_file(root.file(".cotal/maintenance/lock.json"));
    let before = root.snapshot();
    for args in [
        vec!["rotate", "account", "design", "--auto-approve"],
        vec!["rotate", "sys", "--auto-approve"],
        vec!["creds", "design", "--user", "ops", "--profile", "admin"],
        vec!["creds", "revoke", "design", "--all"],
        vec!["creds", "--system", "monitor", "--expires", "1d"],
        vec!["down", "--preserve-state"],
        vec!["space", "add", "ops", "--auto-approve"],
        vec!["space", "suspend", "design", "--auto-approve"],
        vec!["space", "evict", "design"],
        vec!["space", "relocation", "design", "--cancel"],
        vec!["space", "backup", "design", "/nonexistent/backup"],
        vec!["root", "backup", "/nonexistent/root-backup"],
        vec!["up"],
    ] {
        let out = root.cotal(&args).assert().code(6);
        let err = stderr(&out);
        assert!(
            err.contains("was interrupted")
                && err.contains("refuses until it is finished")
                && err.contains(
                    "run `cotal apply` to finish it (it completes the removal of \"release\")"
                ),
            "{args:?}: {err}"
        );
        assert_eq!(root.snapshot(), before, "{args:?} changed nothing");
    }
    root.apply().success();
    root.cotal(&["creds", "design", "--user", "ops", "--profile", "admin"])
        .assert()
        .success();
}
