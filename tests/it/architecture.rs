//! The shape DESIGN.md section 9 asks for, checked: the pure core (planning, rendering, the
//! desired state, the vocabulary, reports, JWTs, digests) imports no filesystem, process,
//! environment, clock, network, randomness, async runtime or broker. A pure module that grows
//! an import of one of them fails here, naming the file and the line.

use std::path::Path;

/// Modules that must stay pure: plain functions of their inputs.
const PURE: &[&str] = &[
    "src/model.rs",
    "src/desired.rs",
    "src/jwt.rs",
    "src/render.rs",
    "src/digest.rs",
    "src/observed.rs",
    "src/lifecycle.rs",
    "src/permissions.rs",
    "src/streams.rs",
    "src/edit.rs",
    "src/secret.rs",
    "src/audit.rs",
    "src/error.rs",
    "src/plan",
    "src/report",
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
];

fn sources(path: &Path, out: &mut Vec<std::path::PathBuf>) {
    if path.is_dir() {
        for entry in std::fs::read_dir(path).unwrap() {
            sources(&entry.unwrap().path(), out);
        }
    } else if path.extension().is_some_and(|e| e == "rs") {
        out.push(path.to_path_buf());
    }
}

#[test]
fn the_pure_core_imports_no_io_clock_randomness_or_broker() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut files = Vec::new();
    for p in PURE {
        sources(&root.join(p), &mut files);
    }
    assert!(files.len() >= PURE.len(), "every pure module was found");
    let mut violations = Vec::new();
    for file in &files {
        let text = std::fs::read_to_string(file).unwrap();
        // Unit tests may use what they like; only the module's own code is checked.
        let code = text.split("#[cfg(test)]").next().unwrap();
        for (i, line) in code.lines().enumerate() {
            let trimmed = line.trim_start();
            if trimmed.starts_with("//") {
                continue;
            }
            for f in FORBIDDEN {
                if line.contains(f) {
                    violations.push(format!(
                        "{}:{}: `{f}` in {}",
                        file.strip_prefix(root).unwrap().display(),
                        i + 1,
                        line.trim()
                    ));
                }
            }
        }
    }
    assert!(
        violations.is_empty(),
        "the pure core must not do IO, read the clock or the environment, draw randomness or reach the broker:\n{}",
        violations.join("\n")
    );
}

#[test]
fn the_check_itself_catches_a_forbidden_import() {
    let line = "use std::fs::File;";
    assert!(FORBIDDEN.iter().any(|f| line.contains(f)));
    let observed = "use crate::observed::Observed;";
    assert!(
        !FORBIDDEN.iter().any(|f| observed.contains(f)),
        "the plain data of an observation is allowed"
    );
}
