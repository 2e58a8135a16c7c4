//! Fixtures shared by the unit tests (`crate::testing`) and the integration tests
//! (`cotal::testing`): the core's plain-data fixtures ([`cotal_core::testing`], re-exported)
//! and the one that touches a root's files. Not an API: hidden, used by tests only.

pub use cotal_core::testing::*;

/// Change the root's `.cotal` until the file system stamps it later than every one of `paths`
/// (their status-change times): its clock's next tick, waited for on the clock itself
/// (bounded; no sleep). What `store::caches::folder_cache` saves must be stamped before its reference.
pub fn tick_past(root: &crate::store::Root, paths: impl IntoIterator<Item = std::path::PathBuf>) {
    use std::os::unix::fs::MetadataExt;
    let changed = |p: &std::path::Path| {
        let m = std::fs::symlink_metadata(p).unwrap();
        (m.ctime(), m.ctime_nsec())
    };
    let latest = paths.into_iter().map(|p| changed(&p)).max().unwrap();
    let probe = root.state_dir().join("probe");
    for _ in 0..1_000_000 {
        std::fs::write(&probe, b"").unwrap();
        std::fs::remove_file(&probe).unwrap();
        if changed(&root.state_dir()) > latest {
            return;
        }
    }
    panic!("the file system's clock never moved");
}

/// A space's folder and every entry in it.
pub fn folder_and_files(dir: std::path::PathBuf) -> Vec<std::path::PathBuf> {
    std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .chain([dir])
        .collect()
}
