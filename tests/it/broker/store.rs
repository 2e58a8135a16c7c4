//! Where the data lives, against a real broker: `up` never starts on a store that is not the
//! one the spaces were provisioned in (moved, wiped, replaced), names them, and starts them
//! empty only when told; a store put back is served with its data.

use super::Broker;
use crate::support::{stderr, stdout};

#[test]
fn up_refuses_a_store_that_is_not_the_spaces_and_starts_them_empty_only_when_told() {
    let b = Broker::start("[spaces.design]\n\n[spaces.release]\n");
    let store = b.root.file(".cotal/nats");
    let id = std::fs::read_to_string(store.join(".cotal-store-id")).unwrap();
    assert_eq!(
        id.trim().len(),
        36,
        "the store got its identity at the start"
    );
    b.root.cotal(&["down"]).assert().success();
    let aside = b.root.file(".cotal/nats-aside");
    std::fs::rename(&store, &aside).unwrap();

    let out = b.root.cotal(&["up"]).assert().code(3);
    let err = stderr(&out);
    assert!(
        err.contains(&format!(
            "{} holds no .cotal-store-id where the spaces' store held .cotal-store-id {}",
            store.display(),
            id.trim()
        )) && err.contains("would serve 2 space(s) empty (\"design\" and \"release\")"),
        "{err}"
    );
    assert!(
        err.contains("`cotal up --allow-destroy` starts them empty"),
        "{err}"
    );
    assert!(!store.exists(), "nothing was started: no store was made");

    // Put back, it is served with its data.
    std::fs::rename(&aside, &store).unwrap();
    b.root.cotal(&["up"]).assert().success();
    b.root
        .cotal(&["plan", "--detailed-exitcode"])
        .assert()
        .code(0);

    // Gone for good: told to, `up` starts the spaces empty and records the new store.
    b.root.cotal(&["down"]).assert().success();
    std::fs::rename(&store, &aside).unwrap();
    let out = b.root.cotal(&["up", "--allow-destroy"]).assert().success();
    assert!(stdout(&out).contains("2 spaces served"), "{}", stdout(&out));
    let new_id = std::fs::read_to_string(store.join(".cotal-store-id")).unwrap();
    assert_ne!(new_id, id);
    b.root
        .cotal(&["plan", "--detailed-exitcode"])
        .assert()
        .code(0);
    b.root.cotal(&["down"]).assert().success();
    b.root.cotal(&["up"]).assert().success();
}

#[test]
fn up_refuses_a_store_dir_cotal_toml_moved_unapplied_and_a_store_moved_with_its_data_is_served() {
    let b = Broker::start("[spaces.design]\n");
    b.root.cotal(&["down"]).assert().success();
    let text = std::fs::read_to_string(b.root.file("cotal.toml")).unwrap();
    let moved = text.replace("[broker]\n", "[broker]\nstore_dir = \".cotal/nats-new\"\n");
    assert_ne!(moved, text);
    std::fs::write(b.root.file("cotal.toml"), &moved).unwrap();
    let out = b.root.cotal(&["up"]).assert().code(3);
    let err = stderr(&out);
    assert!(
        err.contains("cotal.toml puts the broker's store where the spaces' data is not")
            && err.contains("the store moves from"),
        "{err}"
    );
    // The operator moves the data with it: recognised by its identity, served, no data lost.
    std::fs::rename(b.root.file(".cotal/nats"), b.root.file(".cotal/nats-new")).unwrap();
    let plan = stdout(&b.root.cotal(&["plan"]).assert().success());
    assert!(
        plan.contains("with its data (its .cotal-store-id is the recorded one)")
            && !plan.contains("This plan destroys data"),
        "{plan}"
    );
    b.root
        .cotal(&["apply", "--auto-approve"])
        .assert()
        .success();
    b.root.cotal(&["up"]).assert().success();
    b.root
        .cotal(&["plan", "--detailed-exitcode"])
        .assert()
        .code(0);
}
