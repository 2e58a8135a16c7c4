//! The shape docs/design/architecture.md ("The shape of the code") describes, checked: the pure
//! core, the `cotal-core` crate (planning, rendering, the desired state, the vocabulary, reports,
//! JWTs, digests), depends on no crate that does IO and imports no filesystem, process,
//! environment, clock, network, randomness, async runtime or broker. A core module that grows an
//! import of one of them fails here, naming the file and the line; clippy.toml in the crate
//! fails the same call at compile time.

use std::path::Path;

/// The pure core: every source of the `cotal-core` crate but its test fixtures (`testing.rs`,
/// which draws keys for tests).
const CORE: &str = "crates/cotal-core/src";

/// What the core may not depend on: an async runtime, a NATS client, a file lock, the kernel's
/// interfaces, TLS, temporary files, signals, randomness.
const FORBIDDEN_CRATES: &[&str] = &[
    "tokio",
    "async-nats",
    "futures",
    "fs2",
    "nix",
    "netlink-sys",
    "netlink-packet-core",
    "netlink-packet-sock-diag",
    "rustls",
    "rustls-native-certs",
    "ring",
    "tempfile",
    "signal-hook",
    "rand",
    "cotal",
];

/// What a pure module may not name.
const FORBIDDEN: &[&str] = &[
    "std::fs",
    "std::process",
    "std::env",
    "std::thread",
    "std::io::stdin",
    "TcpStream",
    "TcpListener",
    "UdpSocket",
    "ToSocketAddrs",
    "SystemTime",
    "Instant",
    "tokio",
    "async_nats",
    "nix::",
    "rand::",
    "KeyPair::new",
    "crate::store",
    "crate::broker",
    "crate::observe::",
    "crate::observe;",
    "crate::apply",
    "crate::cli",
    "crate::mint",
    "crate::backup",
    "crate::clock",
    "crate::operator",
    "crate::fault",
    "crate::ops",
    "crate::interrupt",
    "crate::credentials",
    "crate::root_backup",
    "crate::tls::",
    "cotal::",
];

/// The `.rs` files under `path`, without the test-only modules a folder's `mod.rs` declares
/// under `#[cfg(test)]`.
fn sources(path: &Path, out: &mut Vec<std::path::PathBuf>) {
    if path.is_dir() {
        let test_only: Vec<String> = std::fs::read_to_string(path.join("mod.rs"))
            .unwrap_or_default()
            .split("#[cfg(test)]\nmod ")
            .skip(1)
            .filter_map(|rest| {
                rest.split_once(';')
                    .map(|(m, _)| format!("{}.rs", m.trim()))
            })
            .collect();
        for entry in std::fs::read_dir(path).unwrap() {
            let entry = entry.unwrap().path();
            let name = entry.file_name().unwrap().to_string_lossy().into_owned();
            if !test_only.contains(&name) {
                sources(&entry, out);
            }
        }
    } else if path.extension().is_some_and(|e| e == "rs") {
        out.push(path.to_path_buf());
    }
}

/// A module's own code: without comments and without its unit-test module (`#[cfg(test)]`
/// followed by `mod tests`), which may use what it likes.
fn own_code(text: &str) -> String {
    let cut = text.find("#[cfg(test)]\nmod tests").unwrap_or(text.len());
    text[..cut]
        .lines()
        .map(|l| {
            if l.trim_start().starts_with("//") {
                ""
            } else {
                l
            }
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// Every path a `use` declaration names, its braces expanded: `use std::{env, fs::File};`
/// names `std::env` and `std::fs::File`.
fn used_paths(code: &str) -> Vec<String> {
    fn expand(prefix: &str, tree: &str, out: &mut Vec<String>) {
        let tree = tree.trim();
        match tree.find('{') {
            None => out.push(format!("{prefix}{tree}")),
            Some(open) => {
                let head = &tree[..open];
                let inner = &tree[open + 1..tree.rfind('}').unwrap_or(tree.len())];
                let mut depth = 0;
                let mut start = 0;
                for (i, c) in inner.char_indices() {
                    match c {
                        '{' => depth += 1,
                        '}' => depth -= 1,
                        ',' if depth == 0 => {
                            expand(&format!("{prefix}{head}"), &inner[start..i], out);
                            start = i + 1;
                        }
                        _ => {}
                    }
                }
                if !inner[start..].trim().is_empty() {
                    expand(&format!("{prefix}{head}"), &inner[start..], out);
                }
            }
        }
    }
    let mut out = Vec::new();
    for stmt in code.split(';') {
        let stmt: String = stmt.split_whitespace().collect::<Vec<_>>().join(" ");
        if let Some(tree) = stmt
            .rsplit_once("use ")
            .filter(|(before, _)| before.trim().is_empty() || before.ends_with("pub "))
            .map(|(_, t)| t.replace(' ', ""))
        {
            expand("", &tree, &mut out);
        }
    }
    out
}

/// The forbidden names one module's text uses, with where.
fn violations(file: &str, text: &str) -> Vec<String> {
    let code = own_code(text);
    let mut out = Vec::new();
    for (i, line) in code.lines().enumerate() {
        for f in FORBIDDEN {
            if line.contains(f) {
                out.push(format!("{file}:{}: `{f}` in {}", i + 1, line.trim()));
            }
        }
    }
    for path in used_paths(&code) {
        for f in FORBIDDEN {
            let f = f.trim_end_matches([';', ':']);
            if path == f || path.starts_with(&format!("{f}::")) {
                out.push(format!("{file}: `use {path}` names `{f}`"));
            }
        }
    }
    out
}

#[test]
fn the_pure_core_imports_no_io_clock_randomness_or_broker() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut files = Vec::new();
    sources(&root.join(CORE), &mut files);
    files.retain(|f| !f.ends_with("testing.rs"));
    assert!(
        files.len() > 50,
        "every source of the core was found: {}",
        files.len()
    );
    let mut found = Vec::new();
    for file in &files {
        let text = std::fs::read_to_string(file).unwrap();
        let name = file.strip_prefix(root).unwrap().display().to_string();
        found.extend(violations(&name, &text));
    }
    assert!(
        found.is_empty(),
        "the pure core must not do IO, read the clock or the environment, draw randomness or reach the broker:\n{}",
        found.join("\n")
    );
}

/// The core's manifest names none of the crates that do IO, and its clippy.toml disallows what
/// its sources may not call (clippy fails the build on each call; CI runs it).
#[test]
fn the_core_crate_depends_on_no_io_and_clippy_disallows_it() {
    let core = Path::new(env!("CARGO_MANIFEST_DIR")).join("crates/cotal-core");
    let manifest: toml::Table = std::fs::read_to_string(core.join("Cargo.toml"))
        .unwrap()
        .parse()
        .unwrap();
    let deps = manifest["dependencies"].as_table().unwrap();
    assert!(
        deps.contains_key("serde"),
        "the dependencies were read: {deps:?}"
    );
    let found: Vec<&&str> = FORBIDDEN_CRATES
        .iter()
        .filter(|c| deps.contains_key(**c))
        .collect();
    assert!(found.is_empty(), "the core depends on {found:?}");
    let clippy = std::fs::read_to_string(core.join("clippy.toml")).unwrap();
    for name in [
        "std::fs::read_to_string",
        "std::fs::write",
        "std::env::var",
        "std::thread::spawn",
        "std::time::SystemTime::now",
        "std::time::Instant::now",
        "nkeys::KeyPair::new_account",
        "std::process::Command",
    ] {
        assert!(
            clippy.contains(&format!("\"{name}\"")),
            "clippy.toml disallows {name}"
        );
    }
}

#[test]
fn the_check_itself_catches_every_way_of_naming_a_forbidden_module() {
    let module = "//! a pure module, it says\n\
        use crate::observed::Observed;\n\
        use std::{collections::BTreeMap, env};\n\
        use crate::{\n    model::SpaceName,\n    store::Root,\n};\n\
        fn f() -> u64 { std::process::id() as u64 }\n\
        #[cfg(test)]\nmod tests {\n    use std::fs;\n}\n";
    let found = violations("m.rs", module).join("\n");
    assert!(found.contains("`use std::env` names `std::env`"), "{found}");
    assert!(
        found.contains("`use crate::store::Root` names `crate::store`"),
        "{found}"
    );
    assert!(found.contains("`std::process`"), "{found}");
    assert!(
        !found.contains("crate::observed"),
        "plain observation data is allowed: {found}"
    );
    assert!(
        !found.contains("std::fs"),
        "unit tests may use what they like: {found}"
    );
}
