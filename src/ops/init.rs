//! `init`: mint the broker trust of a new root (the operator, the system account and its scoped
//! keys, in one atomic write) and write a starter `cotal.toml` when there is none. Refuses a
//! root that already has a broker record, one whose record is lost while tenants remain, an
//! open journal, and a `cotal.toml` that does not parse, before anything is created.

use crate::desired;
use crate::diagnostic::Diagnostic;
use crate::error::{Error, Result};
use crate::store::{Root, atomic, broker_record, desired_file, journal, lock};

/// What `init` made.
pub struct Initialised {
    pub operator_pub: String,
    pub sys_pub: String,
    /// The root opted in to an evictor key (`evictor_creds` in `cotal.toml`).
    pub evictor: bool,
    /// No `cotal.toml` was there, so the starter was written.
    pub wrote_starter: bool,
    /// The root's `.gitignore` already leaves `.cotal/` out.
    pub gitignored: bool,
}

/// Why `init` makes no root without system keys.
pub fn no_single_space() -> Diagnostic {
    Diagnostic::new("a root without system signing keys (single-space) could not confirm a reload of its broker, observe it, or give even its first space its $SYS creds, so cotal no longer makes one. Every root keeps scoped system keys, each able to mint only the users of its role (docs/guide/credentials.md, \"The credential model\").")
        .next("run `cotal init` without --single-space (and without `multi_space = false` in cotal.toml)")
}

/// Initialise `root`. Bad input changes nothing: `cotal.toml` is read before anything is made.
pub fn init(root: &Root) -> Result<Initialised> {
    let desired_path = root.desired_file();
    let existing = match desired_file::read(root)? {
        Some(text) => {
            Some(desired::parse(&text, &desired_path.display().to_string()).map_err(Error::input)?)
        }
        None => None,
    };
    atomic::ensure_dir(&root.state_dir(), atomic::PRIVATE_DIR)?;
    let _lock = lock::acquire(root, &crate::operator::holder(), std::time::Duration::ZERO)?;
    crate::apply::refuse_if_journal_open(&journal::load(root)?, "init")?;
    refuse_existing_trust(root)?;
    if existing.as_ref().is_some_and(|d| !d.broker.multi_space) {
        return Err(Error::input(no_single_space()));
    }
    let evictor = existing.as_ref().is_some_and(|d| d.broker.evictor_creds);
    let record = crate::mint::broker(true, evictor).map_err(Error::other)?;
    let trust = record.validate().map_err(Error::other)?;
    // Audited before the trust is written, fail-closed.
    crate::credentials::audit_root(
        root,
        crate::audit::Event::RootInitialised,
        format!(
            "operator {} and system account {} minted",
            trust.operator_pub, trust.sys_pub
        ),
    )?;
    broker_record::save(root, &record)?;
    if existing.is_none() {
        desired_file::write(root, desired::STARTER)?;
    }
    let gitignored = std::fs::read_to_string(root.dir().join(".gitignore")).is_ok_and(|t| {
        t.lines()
            .any(|l| l.trim().trim_end_matches('/') == ".cotal")
    });
    Ok(Initialised {
        operator_pub: trust.operator_pub,
        sys_pub: trust.sys_pub,
        evictor,
        wrote_starter: existing.is_none(),
        gitignored,
    })
}

/// A broker record already there (valid or corrupt), or tenants without one: a second operator
/// would orphan every space signed by the first.
fn refuse_existing_trust(root: &Root) -> Result<()> {
    match broker_record::load(root)? {
        broker_record::Loaded::Absent => {
            let material = broker_record::tenant_material(root)?;
            if material.is_empty() {
                return Ok(());
            }
            Err(Error::refused(
                Diagnostic::new(format!(
                    "{} holds tenant material ({}) but no broker record: the operator that signed those tenants is missing, and a new operator would orphan them.",
                    root.dir().display(),
                    material.join(", ")
                ))
                .blast("none, nothing was changed.")
                .next("restore .cotal/auth/broker.json from a backup"),
            ))
        }
        broker_record::Loaded::Valid((_, trust)) => Err(Error::refused(
            Diagnostic::new(format!(
                "{} already holds the broker trust (operator {}); a second operator would orphan every space signed by the first.",
                root.broker_record().display(),
                trust.operator_pub
            ))
            .blast("none, nothing was changed.")
            .next("edit cotal.toml and run `cotal plan`"),
        )),
        broker_record::Loaded::Corrupt { reason: why, .. } => Err(Error::refused(
            Diagnostic::new(format!(
                "{} exists but is corrupt ({why}); it may hold the trust of real tenants, so init does not replace it.",
                root.broker_record().display()
            ))
            .next("restore it from a backup"),
        )),
    }
}
