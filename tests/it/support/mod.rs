//! Helpers shared by the CLI tests: temp roots, running the built binary, and snapshots of a
//! root's files so a test can assert that nothing on disk changed.
#![allow(dead_code)]

pub mod nsc;
pub mod original;

use assert_cmd::Command;
use sha2::{Digest, Sha256};
use std::collections::BTreeMap;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

/// A temp root that is removed at the end of the test.
pub struct TestRoot {
    pub dir: tempfile::TempDir,
}

impl TestRoot {
    pub fn new() -> Self {
        TestRoot {
            dir: tempfile::tempdir().expect("tempdir"),
        }
    }

    /// A root after `cotal init` (multi-space).
    pub fn init() -> Self {
        let root = TestRoot::new();
        root.cotal(&["init"]).assert().success();
        root
    }

    pub fn path(&self) -> &Path {
        self.dir.path()
    }

    pub fn file(&self, rel: &str) -> PathBuf {
        self.dir.path().join(rel)
    }

    /// `cotal --root <root> ARGS` with no colour and no stdin.
    pub fn cotal(&self, args: &[&str]) -> Command {
        let mut cmd = Command::cargo_bin("cotal").expect("binary");
        cmd.arg("--root").arg(self.path()).args(args);
        cmd.env_remove("COTAL_ROOT")
            .env_remove("COTAL_STATE_KEY")
            .env("NO_COLOR", "1")
            .write_stdin("");
        cmd
    }

    /// Write cotal.toml with the broker defaults and the given space tables.
    pub fn desire(&self, spaces: &str) {
        let text = format!("version = 1\n\n[broker]\nport = 4222\n\n{spaces}");
        std::fs::write(self.file("cotal.toml"), text).unwrap();
    }

    /// Write cotal.toml with the broker on `port` and the given space tables.
    pub fn desire_on(&self, port: u16, spaces: &str) {
        let text = format!("version = 1\n\n[broker]\nport = {port}\n\n{spaces}");
        std::fs::write(self.file("cotal.toml"), text).unwrap();
    }

    /// Apply without questions.
    pub fn apply(&self) -> assert_cmd::assert::Assert {
        self.cotal(&["apply", "--auto-approve", "--allow-destroy"])
            .assert()
    }

    pub fn snapshot(&self) -> Tree {
        Tree::of(self.path())
    }

    pub fn generation(&self) -> u64 {
        let text = std::fs::read_to_string(self.file(".cotal/auth/broker-config.json")).unwrap();
        let v: serde_json::Value = serde_json::from_str(&text).unwrap();
        v["gen"].as_u64().unwrap()
    }

    pub fn account_record(&self, space: &str) -> PathBuf {
        self.file(&format!(".cotal/auth/account.{}.json", hex::encode(space)))
    }

    /// Leave the journal of an apply that crashed after the commit point of `space`'s removal.
    pub fn crashed_removal(&self, space: &str) {
        let journal = serde_json::json!({
            "op": "apply", "planDigest": "sha256:x", "startedAt": "2026-01-01T00:00:00Z",
            "pid": 999999, "host": "elsewhere",
            "removals": [{"space": space, "account": self.account_pub(space), "committed": true}],
            "steps": []
        });
        std::fs::write(
            self.file(".cotal/maintenance/journal.json"),
            serde_json::to_vec(&journal).unwrap(),
        )
        .unwrap();
    }

    pub fn account_pub(&self, space: &str) -> String {
        let v: serde_json::Value =
            serde_json::from_slice(&std::fs::read(self.account_record(space)).unwrap()).unwrap();
        v["account"]["pub"].as_str().unwrap().to_string()
    }
}

/// Names that stress every layer: newlines, quotes, non-ASCII, the longest name, a leading
/// `--`, TOML syntax and a comment sign.
pub fn odd_names() -> Vec<&'static str> {
    vec![
        // Decomposed: the space is "café" (Unicode normal form C).
        "cafe\u{301}",
        "quote\"d",
        "ü ñ",
        "x".repeat(121).leak() as &str,
        "--flag",
        "[spaces.x]",
        "#",
    ]
}

/// A `cotal.toml` declaring `names`.
pub fn declaring(names: &[&str]) -> String {
    let mut text = String::from("version = 1\n");
    for n in names {
        text.push_str(&format!("[spaces.{}]\n", serde_json::to_string(n).unwrap()));
    }
    text
}

/// Every file under a root: path -> (kind, mode, content digest). The lock file itself is
/// infrastructure (taking the lock creates it) and is left out.
#[derive(Debug, PartialEq, Eq)]
pub struct Tree(pub BTreeMap<String, (char, u32, String)>);

impl Tree {
    pub fn of(dir: &Path) -> Tree {
        let mut out = BTreeMap::new();
        walk(dir, dir, &mut out);
        out.remove(".cotal/maintenance/lock");
        Tree(out)
    }

    /// The tree without one path (a file the test itself edited).
    pub fn without(mut self, rel: &str) -> Tree {
        self.0.remove(rel);
        self
    }
}

fn walk(base: &Path, dir: &Path, out: &mut BTreeMap<String, (char, u32, String)>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        let rel = path
            .strip_prefix(base)
            .unwrap()
            .to_string_lossy()
            .into_owned();
        let meta = std::fs::symlink_metadata(&path).unwrap();
        let mode = meta.mode() & 0o7777;
        if meta.file_type().is_symlink() {
            out.insert(
                rel,
                (
                    'l',
                    mode,
                    std::fs::read_link(&path)
                        .unwrap()
                        .to_string_lossy()
                        .into_owned(),
                ),
            );
        } else if meta.is_dir() {
            out.insert(rel, ('d', mode, String::new()));
            walk(base, &path, out);
        } else if !meta.is_file() {
            // A FIFO, socket or device: never opened (a FIFO would block the read).
            out.insert(rel, ('s', mode, String::new()));
        } else {
            let digest = hex::encode(Sha256::digest(std::fs::read(&path).unwrap()));
            out.insert(rel, ('f', mode, digest));
        }
    }
}

/// The space names of a `[spaces.X]` snippet, each with whether it says suspended.
pub fn spaces_of(snippet: &str) -> BTreeMap<&str, bool> {
    let mut out = BTreeMap::new();
    let mut current = None;
    for line in snippet.lines() {
        if let Some(rest) = line.strip_prefix("[spaces.") {
            let name = rest.trim_end_matches(']').split('.').next().unwrap();
            out.entry(name).or_insert(false);
            current = Some(name);
        } else if (line.contains("suspended") || line.contains("archived"))
            && let Some(name) = current
        {
            out.insert(name, true);
        }
    }
    out
}

/// stdout of a finished command as text.
pub fn stdout(a: &assert_cmd::assert::Assert) -> String {
    String::from_utf8_lossy(&a.get_output().stdout).into_owned()
}

/// Assert `doc` is valid for the JSON Schema at `schema` (a path under the repository).
pub fn assert_valid_for(schema: &str, doc: &serde_json::Value) {
    let schema: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(schema).unwrap()).unwrap();
    let validator = jsonschema::validator_for(&schema).unwrap();
    let errors: Vec<String> = validator.iter_errors(doc).map(|e| e.to_string()).collect();
    assert!(errors.is_empty(), "{errors:?}\n{doc}");
}

pub fn stderr(a: &assert_cmd::assert::Assert) -> String {
    String::from_utf8_lossy(&a.get_output().stderr).into_owned()
}

/// A `cotal` process stopped at a named fault point (fault-injection builds): a rendezvous
/// through a FIFO, no sleeps. The FIFO is held open read-write here, so the child's open never
/// blocks; its read returns once [`Paused::resume`] closes our end.
pub struct Paused {
    child: std::process::Child,
    gate: Option<std::fs::File>,
    stderr: std::io::BufReader<std::process::ChildStderr>,
    seen: String,
    _dir: tempfile::TempDir,
}

impl Paused {
    /// Start `cotal --root ROOT ARGS` and return once it reports it paused at `point`. Fails
    /// the test if it exits first.
    pub fn at(root: &TestRoot, args: &[&str], point: &str) -> Paused {
        use std::io::BufRead;
        let dir = tempfile::tempdir().unwrap();
        let fifo = dir.path().join("gate");
        nix::unistd::mkfifo(&fifo, nix::sys::stat::Mode::S_IRWXU).unwrap();
        let gate = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .open(&fifo)
            .unwrap();
        let mut child = std::process::Command::new(assert_cmd::cargo::cargo_bin("cotal"))
            .arg("--root")
            .arg(root.path())
            .args(args)
            .env_remove("COTAL_ROOT")
            .env("NO_COLOR", "1")
            .env("COTAL_PAUSE_AT", point)
            .env("COTAL_PAUSE_FIFO", &fifo)
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        let mut stderr = std::io::BufReader::new(child.stderr.take().unwrap());
        let mut seen = String::new();
        loop {
            let mut line = String::new();
            // A blocking read of the child's own report: returns at the point, or at its exit.
            if stderr.read_line(&mut line).unwrap() == 0 {
                panic!("cotal exited before reaching {point}: {seen}");
            }
            seen.push_str(&line);
            if line.contains(&format!("paused at {point}")) {
                break;
            }
        }
        Paused {
            child,
            gate: Some(gate),
            stderr,
            seen,
            _dir: dir,
        }
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Let it go on; returns its exit code and everything it printed on stderr.
    pub fn resume(mut self) -> (Option<i32>, String) {
        use std::io::Read;
        drop(self.gate.take());
        let mut rest = String::new();
        self.stderr.read_to_string(&mut rest).unwrap();
        let status = self.child.wait().unwrap();
        (status.code(), format!("{}{rest}", self.seen))
    }
}

/// Every path under `dir` (the folder itself included, links not followed) with its
/// modification and status-change times in nanoseconds: a write, a rename into a folder, a
/// chmod or a file created and removed again all move one of them.
pub fn times(dir: &Path) -> BTreeMap<PathBuf, (i64, i64)> {
    fn stamp(meta: &std::fs::Metadata) -> (i64, i64) {
        (
            meta.mtime() * 1_000_000_000 + meta.mtime_nsec(),
            meta.ctime() * 1_000_000_000 + meta.ctime_nsec(),
        )
    }
    fn visit(dir: &Path, out: &mut BTreeMap<PathBuf, (i64, i64)>) {
        for entry in std::fs::read_dir(dir).unwrap().flatten() {
            let meta = std::fs::symlink_metadata(entry.path()).unwrap();
            out.insert(entry.path(), stamp(&meta));
            if meta.is_dir() {
                visit(&entry.path(), out);
            }
        }
    }
    let mut out = BTreeMap::new();
    out.insert(
        dir.to_path_buf(),
        stamp(&std::fs::symlink_metadata(dir).unwrap()),
    );
    visit(dir, &mut out);
    out
}

/// The output with everything that differs between runs replaced by a placeholder.
pub fn redact(root: &TestRoot, text: &str) -> String {
    let root_path = root.path().display().to_string();
    let mut out = text.replace(&root_path, "[ROOT]");
    let rules: [(&str, &str); 13] = [
        (r"eyJ[A-Za-z0-9_\-.]+…?", "[JWT]"),
        (r"\b[OAUN][A-Z2-7]{55}\b", "[KEY]"),
        // A key shortened for people (the plan shows 12 characters).
        (r"\baccount [A-Z2-7]{12}\b", "account [KEY]"),
        // What the host's free disk and memory allow.
        (r"of [\d.]+ [KMGT]?i?B \(", "of [SIZE] ("),
        (r", [\d.]+ [KMGT]?i?B available", ", [SIZE] available"),
        (r"sha256:[0-9a-f]{64}", "[SHA256]"),
        (
            r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?(Z|[+-]\d\d:\d\d)",
            "[TIME]",
        ),
        (r"\b\d+(\.\d+)? ?(ms|µs|s)\b", "[DURATION]"),
        (r"pid \d+", "pid [PID]"),
        // The host's open-file limit, and the spaces it holds.
        (r"open files  limit \d+ ", "open files  limit [N] "),
        (r"holds \d+ spaces", "holds [N] spaces"),
        // Whoever runs the tests.
        (r"not by you \(uid \d+\)", "not by you (uid [UID])"),
        (r"\.cotal-tmp\.[A-Za-z0-9]+", ".cotal-tmp.[TMP]"),
    ];
    for (pattern, with) in rules {
        out = regex::Regex::new(pattern)
            .unwrap()
            .replace_all(&out, with)
            .into_owned();
    }
    out
}

/// `cotal ARGS` on `root`: its exit code, stdout and stderr, redacted, as one text.
pub fn run(root: &TestRoot, args: &[&str]) -> String {
    shown(root, &args.join(" "), &root.cotal(args).assert())
}

/// A command that already ran (one that needed its own environment or folder), shown the way
/// [`run`] shows one: `label` stands for its arguments (redacted like the output).
pub fn shown(root: &TestRoot, label: &str, out: &assert_cmd::assert::Assert) -> String {
    let code = out.get_output().status.code().unwrap_or(-1);
    format!(
        "$ cotal {}\nexit {code}\n--- stdout\n{}--- stderr\n{}",
        redact(root, label),
        redact(root, &stdout(out)),
        redact(root, &stderr(out))
    )
}

/// `cotal --root ROOT ARGS` under `ulimit LIMIT` (`-n 150`: soft and hard open files lowered;
/// `-Sn 256`: the soft one only).
pub fn limited(root: &TestRoot, limit: &str, args: &[&str]) -> std::process::Output {
    std::process::Command::new("sh")
        .arg("-c")
        .arg(format!(r#"ulimit {limit} && exec "$0" "$@""#))
        .arg(assert_cmd::cargo::cargo_bin("cotal"))
        .arg("--root")
        .arg(root.path())
        .args(args)
        .env("NO_COLOR", "1")
        .output()
        .unwrap()
}
