//! What the operator reads, as snapshots: the main verbs' output and their refusals through the
//! built binary on a temp root (broker stopped), with what changes from run to run redacted
//! (the root's path, keys, JWTs, digests, times, durations, pids). A change of wording shows up
//! as a snapshot diff to review, not as a substring that silently still matches.

use crate::support::{TestRoot, stderr, stdout};

/// The output with everything that differs between runs replaced by a placeholder.
fn redact(root: &TestRoot, text: &str) -> String {
    let root_path = root.path().display().to_string();
    let mut out = text.replace(&root_path, "[ROOT]");
    let rules: [(&str, &str); 10] = [
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
fn run(root: &TestRoot, args: &[&str]) -> String {
    let out = root.cotal(args).assert();
    let code = out.get_output().status.code().unwrap_or(-1);
    format!(
        "$ cotal {}\nexit {code}\n--- stdout\n{}--- stderr\n{}",
        args.join(" "),
        redact(root, &stdout(&out)),
        redact(root, &stderr(&out))
    )
}

const TWO_SPACES: &str = "[spaces.design]\n[spaces.design.limits]\nmax_connections = 200\nmax_storage = \"10GiB\"\n\n[spaces.release]\n";

#[test]
fn a_new_operators_first_plan_apply_and_status_read_as_they_should() {
    let root = TestRoot::new();
    insta::assert_snapshot!("init", run(&root, &["init"]));
    root.desire(TWO_SPACES);
    insta::assert_snapshot!("plan_two_spaces", run(&root, &["plan"]));
    insta::assert_snapshot!("apply_two_spaces", run(&root, &["apply", "--auto-approve"]));
    insta::assert_snapshot!(
        "apply_again_no_changes",
        run(&root, &["apply", "--auto-approve"])
    );
    insta::assert_snapshot!("status_stopped", run(&root, &["status"]));
    insta::assert_snapshot!("space_list", run(&root, &["space", "list"]));
}

#[test]
fn refusals_say_what_who_the_blast_radius_and_what_next() {
    let root = TestRoot::init();
    root.desire("[spaces.design]\nprotect = true\n[spaces.release]\n");
    root.apply().success();
    root.desire("[spaces.release]\n");
    insta::assert_snapshot!(
        "refused_protected_removal",
        run(&root, &["apply", "--auto-approve", "--allow-destroy"])
    );
    root.desire("[spaces.design]\nprotect = true\n");
    insta::assert_snapshot!(
        "refused_destroy_without_allow",
        run(&root, &["apply", "--auto-approve"])
    );
    std::fs::write(
        root.file("cotal.toml"),
        "version = 1\n[spaces.design]\nprotect = \"yes\"\n",
    )
    .unwrap();
    insta::assert_snapshot!("malformed_cotal_toml", run(&root, &["plan"]));
}
