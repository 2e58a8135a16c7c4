//! What the operator reads, as snapshots: the main verbs' output and their refusals through the
//! built binary on a temp root (broker stopped), with what changes from run to run redacted
//! (the root's path, keys, JWTs, digests, times, durations, pids). A change of wording shows up
//! as a snapshot diff to review, not as a substring that silently still matches. The
//! redactions and the runner are `support::redact` and `support::run`, for every test that
//! snapshots what cotal prints.

use crate::support::{TestRoot, run};

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
    insta::assert_snapshot!(
        "status_prometheus",
        run(&root, &["status", "--format", "prometheus"])
    );
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
