//! `cotal init`: mint the broker trust of a new root and write a starter `cotal.toml`.

use super::Global;
use crate::desired;
use crate::diagnostic::Diagnostic;
use crate::error::{Error, Result};
use crate::store::{atomic, broker_record, desired_file, journal, lock};

/// Every root keeps scoped system signing keys: without them cotal could not confirm a reload
/// of its broker, observe it, nor give a space its $SYS creds, so the single-space mode of the
/// design (no system key at rest) could not hold even its first space. It was removed; its flag
/// is refused with that reason.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// The default (and only) mode; accepted for old scripts.
    #[arg(long, hide = true, conflicts_with = "single_space")]
    pub multi_space: bool,
    /// Removed: refused with the reason.
    #[arg(long, hide = true)]
    pub single_space: bool,
}

/// Why `init` makes no root without system keys.
fn no_single_space() -> Diagnostic {
    Diagnostic::new("a root without system signing keys (single-space) could not confirm a reload of its broker, observe it, or give even its first space its $SYS creds, so cotal no longer makes one. Every root keeps scoped system keys, each able to mint only the users of its role (docs/guide/credentials.md, \"The credential model\").")
        .next("run `cotal init` without --single-space (and without `multi_space = false` in cotal.toml)")
}

pub fn run(global: &Global, args: Args) -> Result<i32> {
    if args.single_space {
        return Err(Error::input(no_single_space()));
    }
    let root = global.new_root()?;
    refuse_ancestor(global, &root)?;
    // Bad input changes nothing: read cotal.toml before creating anything.
    let desired_path = root.desired_file();
    let existing = match desired_file::read(&root)? {
        Some(text) => {
            Some(desired::parse(&text, &desired_path.display().to_string()).map_err(Error::input)?)
        }
        None => None,
    };
    atomic::ensure_dir(&root.state_dir(), atomic::PRIVATE_DIR)?;
    let _lock = lock::acquire(&root, &crate::operator::holder(), std::time::Duration::ZERO)?;
    crate::apply::refuse_if_journal_open(&journal::load(&root)?, "init")?;
    match broker_record::load(&root)? {
        broker_record::Loaded::Absent => {
            let material = broker_record::tenant_material(&root)?;
            if !material.is_empty() {
                return Err(Error::refused(
                    Diagnostic::new(format!(
                        "{} holds tenant material ({}) but no broker record: the operator that signed those tenants is missing, and a new operator would orphan them.",
                        root.dir().display(),
                        material.join(", ")
                    ))
                    .blast("none, nothing was changed.")
                    .next("restore .cotal/auth/broker.json from a backup"),
                ));
            }
        }
        broker_record::Loaded::Valid((_, trust)) => {
            return Err(Error::refused(
                Diagnostic::new(format!(
                    "{} already holds the broker trust (operator {}); a second operator would orphan every space signed by the first.",
                    root.broker_record().display(),
                    trust.operator_pub
                ))
                .blast("none, nothing was changed.")
                .next("edit cotal.toml and run `cotal plan`"),
            ));
        }
        broker_record::Loaded::Corrupt { reason: why, .. } => {
            return Err(Error::refused(
                Diagnostic::new(format!(
                    "{} exists but is corrupt ({why}); it may hold the trust of real tenants, so init does not replace it.",
                    root.broker_record().display()
                ))
                .next("restore it from a backup"),
            ));
        }
    }
    if existing.as_ref().is_some_and(|d| !d.broker.multi_space) {
        return Err(Error::input(no_single_space()));
    }

    let evictor = existing.as_ref().is_some_and(|d| d.broker.evictor_creds);
    // One atomic write: the operator, the system account and the keys its JWT lists.
    let record = crate::mint::broker(true, evictor).map_err(Error::other)?;
    broker_record::save(&root, &record)?;
    if existing.is_none() {
        desired_file::write(&root, desired::STARTER)?;
    }
    let trust = record.validate().map_err(Error::other)?;
    println!("Initialised a cotal root at {}", root.dir().display());
    println!("  operator        {}", trust.operator_pub);
    println!("  system account  {}", trust.sys_pub);
    println!(
        "  system keys     scoped (control, observer{}), kept in .cotal/auth/broker.json (0600)",
        if evictor { ", evictor" } else { "" }
    );
    if existing.is_none() {
        println!("  wrote           cotal.toml (starter)");
    }
    let ignored = std::fs::read_to_string(root.dir().join(".gitignore")).is_ok_and(|t| {
        t.lines()
            .any(|l| l.trim().trim_end_matches('/') == ".cotal")
    });
    if !ignored {
        println!(
            "  git             add `.cotal/` to .gitignore: it holds every seed of this broker (commit cotal.toml, and .cotal/state.json's export, never .cotal/)"
        );
    }
    println!("\nNext: add a [spaces.NAME] table to cotal.toml, then run `cotal plan`.");
    Ok(0)
}

/// Without `--root` or `COTAL_ROOT`, the root is found by walking up from the working folder:
/// `init` refuses one found in an ancestor (it would write the seeds there, not here).
fn refuse_ancestor(global: &Global, root: &crate::store::Root) -> Result<()> {
    if global.root.is_some() || std::env::var_os("COTAL_ROOT").is_some_and(|v| !v.is_empty()) {
        return Ok(());
    }
    let here = crate::store::Root::at(std::env::current_dir().map_err(|e| Error::io(".", e))?)?;
    if here.dir() == root.dir() {
        return Ok(());
    }
    Err(Error::refused(
        Diagnostic::new(format!(
            "{} is inside the cotal root {} (it holds a cotal.toml or .cotal/): `cotal init` here would initialise that root, not this folder.",
            here.dir().display(),
            root.dir().display()
        ))
        .blast("none, nothing was changed.")
        .next(format!(
            "`cotal init --root .` makes a new root here; `cotal --root {} init` the enclosing one",
            root.dir().display()
        )),
    ))
}
