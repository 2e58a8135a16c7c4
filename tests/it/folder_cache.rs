//! The folder cache (`.cotal/maintenance/folders.jsonl`) is proved safe: the write that saves
//! it makes the next observation believe what each space's folder said while the folder and
//! every file in it keep their stamps, and a folder whose file was written since, even in place
//! and with the same bytes, is read again. The observation with the cache is the observation
//! without it.

use crate::support::{TestRoot, stdout};
use cotal::model::SpaceName;
use cotal::observe;
use cotal::store::Root;
use cotal::store::paths::SpaceFile;

/// The clock moved past every file of the root's space folders.
fn tick_past_folders(root: &Root) {
    let folders = std::fs::read_dir(root.state_dir())
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| {
            p.file_name()
                .unwrap()
                .to_string_lossy()
                .starts_with("space.")
        })
        .flat_map(cotal::testing::folder_and_files);
    cotal::testing::tick_past(root, folders);
}

/// The spaces the cache on disk vouches for, of `names`.
fn vouched(root: &Root, names: &[&str]) -> Vec<String> {
    let cotal::store::broker_record::Loaded::Valid((_, trust)) =
        cotal::store::broker_record::load(root).unwrap()
    else {
        panic!("the broker record is valid");
    };
    let loaded =
        cotal::store::caches::folder_cache::load(root, &trust.operator_pub, i64::MAX).unwrap();
    let observed =
        observe::observe(root, &observe::desired(root).unwrap().0, String::new()).unwrap();
    names
        .iter()
        .filter(|n| {
            let space = SpaceName::parse(n).unwrap();
            let account = &observed.inventory.spaces[&space].account_pub;
            loaded
                .vouched(&root.space_dir(&space), &space, account)
                .is_some()
        })
        .map(|n| n.to_string())
        .collect()
}

#[test]
fn a_plan_believes_a_folder_only_while_its_files_keep_their_stamps() {
    let t = TestRoot::init();
    t.desire("[spaces.a]\n\n[spaces.b]\n");
    t.apply().success();
    let root = Root::at(t.path()).unwrap();
    // An apply a tick after a and b were written saves them settled (what it wrote itself may
    // share the tick of its reference, and is left out).
    tick_past_folders(&root);
    t.desire("[spaces.a]\n\n[spaces.b]\n\n[spaces.c]\n");
    t.apply().success();
    assert_eq!(vouched(&root, &["a", "b"]), ["a", "b"]);

    // What the cache says is what the folders say: the observation is the same without it.
    let (desired, digest) = observe::desired(&root).unwrap();
    let with = observe::observe(&root, &desired, digest.clone()).unwrap();
    let cache = cotal::store::caches::folder_cache::path(&root);
    let saved = std::fs::read(&cache).unwrap();
    std::fs::remove_file(&cache).unwrap();
    let without = observe::observe(&root, &desired, digest).unwrap();
    assert_eq!(with.inventory, without.inventory);
    std::fs::write(&cache, &saved).unwrap();
    let untouched = t.snapshot();
    t.cotal(&["plan", "--detailed-exitcode"]).assert().code(0);
    assert_eq!(t.snapshot(), untouched, "a plan never writes the cache");

    // Reached: an entry made to say a is protected (its stamps kept) is believed by the plan.
    let text = String::from_utf8(saved).unwrap();
    let forged: Vec<String> = text
        .lines()
        .map(|line| match line.split_once(' ') {
            Some((account, entry)) if entry.contains(r#""space":"a""#) => {
                let mut v: serde_json::Value = serde_json::from_str(entry).unwrap();
                assert_eq!(v["facts"]["protect_recorded"], false);
                v["facts"]["protect_recorded"] = true.into();
                format!("{account} {v}")
            }
            _ => line.to_string(),
        })
        .collect();
    assert_ne!(forged.join("\n"), text.trim_end());
    std::fs::write(&cache, forged.join("\n") + "\n").unwrap();
    let plan = t.cotal(&["plan", "--detailed-exitcode"]).assert().code(2);
    assert!(
        stdout(&plan).contains("protect: true -> false"),
        "{}",
        stdout(&plan)
    );

    // a's protection record written again in place, with the very bytes it held: its change
    // time moved, so the entry is bypassed and the folder read again.
    let lifecycle = root.space_file(&SpaceName::parse("a").unwrap(), SpaceFile::Lifecycle);
    let bytes = std::fs::read(&lifecycle).unwrap();
    {
        use std::io::Write;
        let mut f = std::fs::OpenOptions::new()
            .write(true)
            .open(&lifecycle)
            .unwrap();
        f.write_all(&bytes).unwrap();
    }
    assert_eq!(vouched(&root, &["a", "b"]), ["b"]);
    t.cotal(&["plan", "--detailed-exitcode"]).assert().code(0);
}
