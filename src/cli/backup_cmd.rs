//! `cotal space backup` and `cotal space restore`: run [`crate::ops::backup`] and show what
//! was copied or verified.

use super::Global;
use crate::error::Result;
use std::path::Path;

pub fn backup(global: &Global, name: &str, dir: &Path) -> Result<i32> {
    let root = global.root()?;
    let manifest = crate::ops::backup::space_backup(&root, name, dir)?;
    println!(
        "Backed up {} (account {}) to {}:",
        manifest.space.quoted(),
        manifest.account,
        dir.display()
    );
    for s in &manifest.streams {
        println!(
            "  {:<28} {:>8} messages  sequences {}..{}",
            s.name, s.messages, s.first_seq, s.last_seq
        );
    }
    Ok(0)
}

pub fn restore(global: &Global, name: &str, dir: &Path, relocate: bool) -> Result<i32> {
    let root = global.root()?;
    let report = crate::ops::backup::space_restore(&root, name, dir, relocate)?;
    println!(
        "Restored {name:?} from {} and verified against its manifest:",
        dir.display()
    );
    for v in &report {
        println!(
            "  {:<28} {:>8} messages  sequences {}..{}  ok",
            v.stream, v.messages, v.first_seq, v.last_seq
        );
    }
    println!("Next: `cotal up` serves it (provisioning adds the buckets a backup does not carry).");
    Ok(0)
}
