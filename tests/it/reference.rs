//! The generated references are current: `docs/reference/cli.md` and `docs/reference/cotal.1`
//! match the clap definitions, and `docs/reference/cotal-toml.md` matches the schema. A change
//! of a flag, a help text or a key that is not regenerated fails here, as uv and jj check
//! theirs.

use crate::generate_docs as generate;

#[test]
fn the_generated_references_are_current() {
    let repo = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut stale = Vec::new();
    for (path, bytes) in generate::files(repo) {
        let on_disk = std::fs::read(repo.join(&path)).unwrap_or_default();
        if on_disk != bytes {
            stale.push(path.display().to_string());
        }
    }
    assert!(
        stale.is_empty(),
        "stale generated references: {}\nrun `cargo run --example gen_docs` and commit the result",
        stale.join(", ")
    );
}

#[test]
fn the_references_name_every_verb_and_every_table() {
    let repo = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let files = generate::files(repo);
    let text = |name: &str| {
        String::from_utf8(
            files
                .iter()
                .find(|(p, _)| p.ends_with(name))
                .expect(name)
                .1
                .clone(),
        )
        .unwrap()
    };
    let cli = text("cli.md");
    for verb in [
        "cotal plan",
        "cotal apply",
        "cotal up",
        "cotal space rm",
        "cotal root backup",
    ] {
        assert!(
            cli.contains(&format!("## `{verb}`")),
            "{verb} in the CLI reference"
        );
    }
    assert!(cli.contains("--detailed-exitcode"));
    assert!(text("cotal.1").contains(".TH cotal 1"));
    let toml = text("cotal-toml.md");
    for table in [
        "[broker]",
        "[[cluster.nodes]]",
        "[spaces.NAME]",
        "[spaces.NAME.limits]",
    ] {
        assert!(
            toml.contains(&format!("## `{table}`")),
            "{table} in:\n{toml}"
        );
    }
    assert!(
        toml.contains("| `version` **(required)** | `1` |"),
        "{toml}"
    );
}

/// The module map is written twice (each crate's `//!` header, for rustdoc, and CONTRIBUTING.md,
/// for a new maintainer): the rows must be the same (the core's table, then the edge's), and every
/// module of either crate must have one.
#[test]
fn the_module_map_of_contributing_is_the_crates_and_names_every_module() {
    let repo = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let core = std::fs::read_to_string(repo.join("crates/cotal-core/src/lib.rs")).unwrap();
    let edge = std::fs::read_to_string(repo.join("src/lib.rs")).unwrap();
    let contributing = std::fs::read_to_string(repo.join("CONTRIBUTING.md")).unwrap();
    let unlink = |row: &str| {
        let mut out = String::new();
        let mut rest = row;
        while let Some(start) = rest.find("[`") {
            out.push_str(&rest[..start]);
            let after = &rest[start + 1..];
            let end = after.find("`]").expect("a closed link");
            out.push_str(&after[..end + 1]);
            rest = &after[end + 2..];
        }
        out.push_str(rest);
        out
    };
    let crate_rows: Vec<String> = [&core, &edge]
        .into_iter()
        .flat_map(|lib| lib.lines())
        .filter_map(|l| l.strip_prefix("//! "))
        .filter(|l| l.starts_with("| [`") || l.starts_with("| `"))
        .map(unlink)
        .collect();
    let doc_rows: Vec<&str> = contributing
        .lines()
        .filter(|l| l.starts_with("| `"))
        .collect();
    assert_eq!(crate_rows, doc_rows, "CONTRIBUTING.md's module map");
    let modules: Vec<&str> = [&core, &edge]
        .into_iter()
        .flat_map(|lib| lib.lines())
        .filter_map(|l| l.strip_prefix("pub mod "))
        .map(|m| m.trim_end_matches(';'))
        .collect();
    assert!(
        modules.len() > 25,
        "both crates' modules were found: {modules:?}"
    );
    // The core's rooms: each module a room holds has a row of its own (`desired::topology`).
    let mut modules: Vec<String> = modules.into_iter().map(String::from).collect();
    for room in ["desired", "observed", "adopt", "space", "trust"] {
        let text =
            std::fs::read_to_string(repo.join(format!("crates/cotal-core/src/{room}/mod.rs")))
                .unwrap();
        modules.extend(
            text.lines()
                .filter_map(|l| l.strip_prefix("pub mod "))
                .map(|m| format!("{room}::{}", m.trim_end_matches(';'))),
        );
    }
    for module in modules {
        assert!(
            doc_rows
                .iter()
                .any(|r| r.starts_with(&format!("| `{module}` |"))),
            "module {module} has no row in the module map"
        );
    }
}

/// Every verb's `--help` has a one-line description, every argument is described, every verb
/// that does something ends with examples, and the global flags are listed apart from the
/// verb's own ("Global options").
#[test]
fn every_verb_is_described_with_its_arguments_and_examples() {
    use clap::CommandFactory;
    fn walk(cmd: &clap::Command, path: &str, missing: &mut Vec<String>) {
        let name = format!("{path} {}", cmd.get_name()).trim().to_string();
        if cmd.get_about().is_none() && name != "cotal" {
            missing.push(format!("{name}: no description"));
        }
        for arg in cmd.get_arguments() {
            let id = arg.get_id().as_str();
            if id == "help" || id == "version" {
                continue;
            }
            if arg.get_help().is_none() && arg.get_long_help().is_none() {
                missing.push(format!("{name} {id}: not described"));
            }
            if arg.is_global_set() && arg.get_help_heading() != Some("Global options") {
                missing.push(format!(
                    "{name} {id}: a global flag outside \"Global options\""
                ));
            }
        }
        let leaf = cmd.get_subcommands().next().is_none();
        let after = cmd
            .get_after_help()
            .or(cmd.get_after_long_help())
            .map(|s| s.to_string())
            .unwrap_or_default();
        if leaf && !after.contains("Examples:") {
            missing.push(format!("{name}: no examples"));
        }
        // clap's own `help` verb (and its tree) describes the others.
        for sub in cmd.get_subcommands().filter(|s| s.get_name() != "help") {
            walk(sub, &name, missing);
        }
    }
    let mut missing = Vec::new();
    let mut cli = cotal::cli::Cli::command();
    cli.build();
    walk(&cli, "", &mut missing);
    assert!(missing.is_empty(), "{}", missing.join("\n"));
}
