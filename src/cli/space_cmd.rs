//! `cotal space add|rm|suspend|resume|purge|list`: imperative verbs that keep `cotal.toml` true.
//! Each edits the file (keeping its comments; `purge` edits nothing: it asks the plan to empty
//! the space), then plans and applies only that space's change, with the same lock, journal,
//! guards, audit and output as `apply`.

use super::Global;
use super::apply_cmd::{self, VerbArgs};
use crate::desired::edit;
use crate::diagnostic::Diagnostic;
use crate::error::{Error, Result};
use crate::model::{SpaceName, SpaceState};
use crate::ops::apply::{Request, SpaceVerb};
use crate::report::space_list;
use std::collections::BTreeSet;

#[derive(Debug, clap::Subcommand)]
pub enum Command {
    /// Add a space to cotal.toml and apply it.
    #[command(
        after_help = "Examples:\n  cotal space add ops\n  cotal space add ops --limit max_connections=50 --limit max_storage=5GiB --protect --auto-approve"
    )]
    Add {
        /// The space's name: any UTF-8 of at most 121 bytes, put in Unicode normal form C; no
        /// control character, no bidirectional control, not only whitespace.
        name: String,
        /// An account limit, KEY=VALUE (max_connections, max_storage, max_memory, max_streams,
        /// max_consumers, max_payload); repeatable.
        #[arg(long = "limit", value_name = "KEY=VALUE")]
        limits: Vec<String>,
        /// Refuse its removal until protect is set back to false.
        #[arg(long)]
        protect: bool,
        /// Add it suspended (no connections, data kept).
        #[arg(long)]
        suspended: bool,
        #[command(flatten)]
        confirm: VerbArgs,
    },
    /// Remove a space from cotal.toml and apply it (destroys its data); finishes a journaled removal.
    #[command(
        after_help = "Examples:\n  cotal space rm release\n  cotal space rm release --auto-approve --allow-destroy   # CI"
    )]
    Rm {
        /// The space.
        name: String,
        #[command(flatten)]
        confirm: VerbArgs,
        /// Allow the removal (it destroys the space's data) without an interactive `yes`.
        #[arg(long)]
        allow_destroy: bool,
        /// The receipt `cotal space restore` wrote on the destination of a move: a space whose
        /// move this root recorded (`cotal space backup` of it fenced) is removed only with it.
        #[arg(long, value_name = "RECEIPT")]
        relocated: Vec<std::path::PathBuf>,
    },
    /// Suspend a space: its connections are closed and refused, its data kept.
    #[command(
        after_help = "Examples:\n  cotal space suspend design --reason \"invoice overdue\"\n  cotal space suspend design --auto-approve"
    )]
    Suspend {
        /// The space.
        name: String,
        /// Why (written as `suspend_reason` in cotal.toml; recorded with the time and the
        /// operator, shown by `cotal status` and the audit).
        #[arg(long)]
        reason: Option<String>,
        #[command(flatten)]
        confirm: VerbArgs,
    },
    /// Resume a suspended space, or bring back an archived one (active).
    #[command(after_help = "Examples:\n  cotal space resume design")]
    Resume {
        /// The space.
        name: String,
        #[command(flatten)]
        confirm: VerbArgs,
    },
    /// Archive a space: its account leaves the broker's config (no connection, subscription
    /// or stream of it is served), its record, keys, protection and data stay on disk;
    /// `cotal space resume` brings the same account back with its streams.
    #[command(
        after_help = "Examples:\n  cotal space archive design\n  cotal space archive design --auto-approve   # CI"
    )]
    Archive {
        /// The space.
        name: String,
        #[command(flatten)]
        confirm: VerbArgs,
    },
    /// Empty every stream and bucket of a space (destroys its messages): its account, creds,
    /// connections and stream configs stay, and its default delivery class and declared
    /// channels are written again. Journaled: an interrupted purge is finished by `cotal apply`.
    #[command(
        after_help = "Examples:\n  cotal space purge design\n  cotal space purge design --auto-approve --allow-destroy   # CI"
    )]
    Purge {
        /// The space (applied, active, not protected; the broker running).
        name: String,
        #[command(flatten)]
        confirm: VerbArgs,
        /// Allow the purge (it destroys the space's messages) without an interactive `yes`.
        #[arg(long)]
        allow_destroy: bool,
    },
    /// Back up a space's streams from the preserved store (after `cotal down --preserve-state`).
    #[command(
        after_help = "Examples:\n  cotal down --preserve-state && cotal space backup design /backups/design && cotal up"
    )]
    Backup {
        /// The space.
        name: String,
        /// The folder to write the backup into (it must not exist yet).
        dir: std::path::PathBuf,
        /// `json`: one versioned document of what was written (`schemas/space-backup.schema.json`).
        #[arg(long, value_enum, default_value_t = super::status_cmd::Format::Text)]
        format: super::status_cmd::Format,
    },
    /// Restore a space's streams into its empty namespace (after `cotal down --preserve-state`).
    #[command(
        after_help = "Examples:\n  cotal down --preserve-state && cotal space restore design /backups/design && cotal up\n  cotal space restore design /backups/from-old-broker --relocate"
    )]
    Restore {
        /// The space.
        name: String,
        /// A folder `cotal space backup` wrote.
        dir: std::path::PathBuf,
        /// The artifact comes from another account (another broker): move the space here.
        #[arg(long)]
        relocate: bool,
        /// Where to write the receipt of what was verified, which the source of a move needs
        /// to remove the space (default: `.cotal/space.<hex>/relocation-receipt.json`).
        #[arg(long, value_name = "FILE")]
        receipt: Option<std::path::PathBuf>,
        /// `json`: one versioned document of what was restored and verified
        /// (`schemas/space-restore.schema.json`).
        #[arg(long, value_enum, default_value_t = super::status_cmd::Format::Text)]
        format: super::status_cmd::Format,
    },
    /// Close every live connection of a space (its clients may reconnect); no other space's
    /// connection is touched.
    #[command(after_help = "Examples:\n  cotal space evict design")]
    Evict {
        /// The space.
        name: String,
        /// How long to wait for the root's lock.
        #[arg(long, value_parser = super::parse_duration, default_value = "0")]
        lock_timeout: std::time::Duration,
        /// `json`: one versioned document of what was closed (`schemas/space-evict.schema.json`).
        #[arg(long, value_enum, default_value_t = super::status_cmd::Format::Text)]
        format: super::status_cmd::Format,
    },
    /// Show a space's recorded move to another broker (`cotal space backup` of it fenced
    /// records one), or end it without a removal (`--cancel`, audited).
    #[command(
        after_help = "Examples:\n  cotal space relocation design\n  cotal space relocation design --cancel   # the space is not moving after all"
    )]
    Relocation {
        /// The space.
        name: String,
        /// End the recorded move: its removal then needs no receipt.
        #[arg(long)]
        cancel: bool,
        /// How long to wait for the root's lock (with `--cancel`).
        #[arg(long, value_parser = super::parse_duration, default_value = "0")]
        lock_timeout: std::time::Duration,
        /// `json`: one versioned document (`schemas/space-relocation.schema.json`).
        #[arg(long, value_enum, default_value_t = super::status_cmd::Format::Text)]
        format: super::status_cmd::Format,
    },
    /// List the spaces of cotal.toml and the root, with their states.
    #[command(
        after_help = "Examples:\n  cotal space list\n  cotal space list --format json | jq -r '.spaces[].name'"
    )]
    List {
        /// `json`: one versioned document (`schemas/space-list.schema.json`).
        #[arg(long, value_enum, default_value_t = super::status_cmd::Format::Text)]
        format: super::status_cmd::Format,
    },
}

fn space(raw: &str) -> Result<SpaceName> {
    SpaceName::parse(raw).map_err(Error::input)
}

fn only(name: &SpaceName) -> Option<BTreeSet<SpaceName>> {
    Some(BTreeSet::from([name.clone()]))
}

pub fn run(global: &Global, command: Command) -> Result<i32> {
    let root = global.root()?;
    match command {
        Command::Evict {
            name,
            lock_timeout,
            format,
        } => super::evict_cmd::run(global, &name, lock_timeout, format),
        Command::Add {
            name,
            limits,
            protect,
            suspended,
            confirm,
        } => add(
            global,
            &root,
            &name,
            (&limits, protect, suspended),
            &confirm,
        ),
        Command::Rm {
            name,
            confirm,
            allow_destroy,
            relocated,
        } => {
            let name = space(&name)?;
            // A name in neither cotal.toml nor the root is a mistake (a typo), never "no
            // changes"; one recorded in the root but already gone from the file is the removal
            // this verb finishes.
            // An open journal may name it (a removal whose record was already reaped): the
            // apply finishes that whatever the name.
            let recorded = std::fs::symlink_metadata(root.account_record(&name)).is_ok()
                || std::fs::symlink_metadata(root.journal()).is_ok();
            let edit_fn = |text: &str| -> Result<String> {
                let (edited, found) = edit::remove_space(text, &name).map_err(Error::input)?;
                if !found && !recorded {
                    return Err(Error::input(
                        Diagnostic::new(format!(
                            "there is no space {} in cotal.toml or in this root; nothing was changed.",
                            name.quoted()
                        ))
                        .next("`cotal space list` lists the spaces"),
                    ));
                }
                Ok(edited)
            };
            apply_cmd::flow(
                global,
                &root,
                &confirm.confirm(allow_destroy, relocated),
                Request {
                    edit: Some(&edit_fn),
                    only: only(&name),
                    verb: Some(SpaceVerb::Rm),
                    ..Request::default()
                },
            )
        }
        Command::Suspend {
            name,
            reason,
            confirm,
        } => set_state(
            global,
            &root,
            &name,
            (SpaceState::Suspended, reason.as_deref()),
            &confirm,
            SpaceVerb::Suspend,
        ),
        Command::Resume { name, confirm } => set_state(
            global,
            &root,
            &name,
            (SpaceState::Active, None),
            &confirm,
            SpaceVerb::Resume,
        ),
        Command::Archive { name, confirm } => set_state(
            global,
            &root,
            &name,
            (SpaceState::Archived, None),
            &confirm,
            SpaceVerb::Archive,
        ),
        Command::Purge {
            name,
            confirm,
            allow_destroy,
        } => {
            let name = space(&name)?;
            apply_cmd::flow(
                global,
                &root,
                &confirm.confirm(allow_destroy, Vec::new()),
                Request {
                    only: only(&name),
                    verb: Some(SpaceVerb::Purge),
                    purge: BTreeSet::from([name.clone()]),
                    ..Request::default()
                },
            )
        }
        Command::List { format } => list(&root, format),
        Command::Relocation {
            name,
            cancel,
            lock_timeout,
            format,
        } => relocation(&root, &name, cancel, lock_timeout, format),
        Command::Backup { name, dir, format } => {
            super::backup_cmd::backup(global, &name, &dir, format)
        }
        Command::Restore {
            name,
            dir,
            relocate,
            receipt,
            format,
        } => {
            super::backup_cmd::restore(global, &name, &dir, (relocate, receipt.as_deref()), format)
        }
    }
}

/// `cotal space add`: the space's table written from the flags (judged as the flags), then
/// applied alone.
fn add(
    global: &Global,
    root: &crate::store::Root,
    name: &str,
    (limits, protect, suspended): (&[String], bool, bool),
    confirm: &VerbArgs,
) -> Result<i32> {
    let name = space(name)?;
    let limits: Vec<(String, String)> = limits
        .iter()
        .map(|l| {
            l.split_once('=')
                .map(|(k, v)| (k.trim().to_string(), v.trim().to_string()))
                .ok_or_else(|| {
                    Error::input(format!(
                        "--limit {l:?}: write KEY=VALUE, e.g. max_connections=200"
                    ))
                })
        })
        .collect::<Result<_>>()?;
    let state = if suspended {
        SpaceState::Suspended
    } else {
        SpaceState::Active
    };
    let edit_fn = |text: &str| -> Result<String> {
        if edit::has_space(text, &name).map_err(Error::input)? {
            if !limits.is_empty() || protect || suspended {
                return Err(Error::input(format!(
                    "cotal.toml already has a table for {}; change its settings there and run `cotal apply`",
                    name.quoted()
                )));
            }
            return Ok(text.to_string());
        }
        let edited = edit::add_space(text, &name, state, protect, &limits).map_err(Error::input)?;
        // What the flags wrote is judged as the flags: an error names them, never a
        // line of cotal's in-memory edit of the file (a file that was already broken
        // is reported as it is, by the apply).
        if crate::desired::parse(text, "cotal.toml").is_ok()
            && let Err(e) = crate::desired::parse(&edited, "cotal.toml")
        {
            let first = e.lines().next().unwrap_or_default();
            let why = first.split_once(": ").map_or(first, |(_, why)| why);
            let flags: Vec<String> = limits
                .iter()
                .map(|(k, v)| format!("--limit {k}={v}"))
                .collect();
            return Err(Error::input(
                crate::diagnostic::Diagnostic::new(format!(
                    "cotal space add {} {}: {why}; nothing was written.",
                    name.quoted(),
                    flags.join(" ")
                ))
                .next("fix the flag and run it again"),
            ));
        }
        Ok(edited)
    };
    apply_cmd::flow(
        global,
        root,
        &confirm.confirm(false, Vec::new()),
        Request {
            edit: Some(&edit_fn),
            only: only(&name),
            verb: Some(SpaceVerb::Add),
            ..Request::default()
        },
    )
}

fn set_state(
    global: &Global,
    root: &crate::store::Root,
    name: &str,
    (state, reason): (SpaceState, Option<&str>),
    confirm: &VerbArgs,
    verb: SpaceVerb,
) -> Result<i32> {
    let name = space(name)?;
    if let Some(reason) = reason {
        crate::desired::suspend_reason(reason, Some(state))
            .map_err(|e| Error::input(format!("--reason: {e}")))?;
    }
    let edit_fn = |text: &str| -> Result<String> {
        // The verb's own refusal, named as the verb (never a line of cotal's in-memory edit):
        // a cluster does not archive.
        if state == SpaceState::Archived
            && crate::desired::parse(text, "cotal.toml").is_ok_and(|d| d.topology.is_cluster())
        {
            return Err(Error::refused(
                crate::diagnostic::Diagnostic::new(format!(
                    "cotal space archive {}: a cluster does not archive: an archived account's replicated streams did not come back when it was loaded again (nats-server 2.15.1).",
                    name.quoted()
                ))
                .blast("none, nothing was changed.")
                .next(format!(
                    "suspend the space instead (`cotal space suspend {}`): connections refused, data kept and served again on resume",
                    name.as_str()
                )),
            ));
        }
        edit::set_state(text, &name, state, reason).map_err(Error::input)
    };
    apply_cmd::flow(
        global,
        root,
        &confirm.confirm(false, Vec::new()),
        Request {
            edit: Some(&edit_fn),
            only: only(&name),
            verb: Some(verb),
            ..Request::default()
        },
    )
}

fn relocation(
    root: &crate::store::Root,
    name: &str,
    cancel: bool,
    lock_timeout: std::time::Duration,
    format: super::status_cmd::Format,
) -> Result<i32> {
    use crate::report::documents;
    let moving = crate::ops::relocation::show_or_cancel(root, name, cancel, lock_timeout)?;
    if format == super::status_cmd::Format::Json {
        print!(
            "{}",
            documents::pretty(&documents::SpaceRelocation {
                format_version: documents::FORMAT_VERSION,
                space: name.to_string(),
                relocation: moving.as_ref().map(documents::RelocationFigures::of),
                cancelled: cancel && moving.is_some(),
            })
        );
        return Ok(0);
    }
    let Some(m) = moving else {
        println!("{name:?} is not moving: no relocation is recorded.");
        return Ok(0);
    };
    let artifact = m
        .artifact
        .as_ref()
        .map(|a| {
            format!(
                "; artifact {} exported to {} at {}",
                a.digest, a.path, a.exported_at
            )
        })
        .unwrap_or_default();
    if cancel {
        println!(
            "Cancelled the move of {name:?} (it was at phase {}{artifact}); its removal needs no receipt now.",
            m.phase
        );
    } else {
        println!(
            "{name:?} is moving: phase {}, started at {} by {}{artifact}{}.",
            m.phase,
            m.started_at,
            m.by,
            m.receipt
                .as_ref()
                .map(|r| format!("; verified by receipt {r}"))
                .unwrap_or_default()
        );
    }
    Ok(0)
}

fn list(root: &crate::store::Root, format: super::status_cmd::Format) -> Result<i32> {
    let listed = crate::ops::space_list::list(root)?;
    if let Some(why) = &listed.desired_error {
        eprintln!("warning: cotal.toml cannot be read ({why}); only the applied spaces are listed");
    }
    for p in &listed.problems {
        eprintln!("problem: {p}");
    }
    match format {
        // A versioned document (`schemas/space-list.schema.json`), like `status`'s.
        super::status_cmd::Format::Json => print!("{}", space_list::json(&listed.rows)),
        super::status_cmd::Format::Text => print!(
            "{}",
            space_list::table(&listed.rows, listed.desired_error.is_some())
        ),
    }
    Ok(super::status_cmd::reader_exit(
        !listed.problems.is_empty(),
        listed.desired_error.is_some(),
    ))
}
