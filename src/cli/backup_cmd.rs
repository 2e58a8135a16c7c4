//! `cotal space backup` and `cotal space restore`: run [`crate::ops::backup`] and show what
//! was copied or verified (`--format json`: [`documents::SpaceBackup`],
//! [`documents::SpaceRestore`]).

use super::Global;
use super::status_cmd::Format;
use crate::error::Result;
use crate::report::documents;
use std::path::Path;

pub fn backup(global: &Global, name: &str, dir: &Path, format: Format) -> Result<i32> {
    let root = global.root()?;
    let (manifest, moving) = crate::ops::backup::space_backup(&root, name, dir)?;
    if format == Format::Json {
        print!(
            "{}",
            documents::pretty(&documents::SpaceBackup {
                format_version: documents::FORMAT_VERSION,
                space: manifest.space.to_string(),
                account: manifest.account.clone(),
                dir: dir.display().to_string(),
                streams: manifest
                    .streams
                    .iter()
                    .map(|s| documents::StreamFigures {
                        name: s.name.clone(),
                        messages: s.messages,
                        first_seq: s.first_seq,
                        last_seq: s.last_seq,
                    })
                    .collect(),
                not_carried: crate::backup::not_carried(&manifest.space.token()),
                relocation: moving.as_ref().map(documents::RelocationFigures::of),
            })
        );
        return Ok(0);
    }
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
    println!(
        "Not carried (as in the original's backup classes; a restore's provisioning creates them empty): {}",
        crate::backup::not_carried(&manifest.space.token()).join(", ")
    );
    if let Some(moving) = &moving {
        let digest = moving
            .artifact
            .as_ref()
            .map(|a| a.digest.as_str())
            .unwrap_or_default();
        println!(
            "The space is fenced, so this export is a move (recorded, phase {}; artifact {digest}).\nNext: restore it on the destination (`cotal space restore {name} DIR --relocate`), then here `cotal space rm {name} --relocated RECEIPT` with the receipt it writes. Not moving? `cotal space relocation {name} --cancel`.",
            moving.phase
        );
    }
    Ok(0)
}

pub fn restore(
    global: &Global,
    name: &str,
    dir: &Path,
    (relocate, receipt): (bool, Option<&Path>),
    format: Format,
) -> Result<i32> {
    let root = global.root()?;
    let (report, receipt) = crate::ops::backup::space_restore(&root, name, dir, relocate, receipt)?;
    if format == Format::Json {
        print!(
            "{}",
            documents::pretty(&documents::SpaceRestore {
                format_version: documents::FORMAT_VERSION,
                space: crate::model::SpaceName::parse(name)
                    .map(|n| n.to_string())
                    .unwrap_or_else(|_| name.to_string()),
                dir: dir.display().to_string(),
                relocated: relocate,
                verified: report
                    .iter()
                    .map(|v| documents::StreamFigures {
                        name: v.stream.clone(),
                        messages: v.messages,
                        first_seq: v.first_seq,
                        last_seq: v.last_seq,
                    })
                    .collect(),
                receipt: receipt.display().to_string(),
            })
        );
        return Ok(0);
    }
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
    println!(
        "Receipt of what was verified: {} (on the source of a move: `cotal space rm {name} --relocated {}`).",
        receipt.display(),
        receipt.display()
    );
    println!("Next: `cotal up` serves it (provisioning adds the buckets a backup does not carry).");
    Ok(0)
}
