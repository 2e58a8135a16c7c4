//! Observation: read everything the planner may depend on from disk (and, when the broker
//! runs, from the broker) into an [`Observed`] value. The only IO before planning.
//!
//! Invariant: observation never writes.

use crate::broker::live;
use crate::desired::{self, Desired};
use crate::digest;
use crate::error::{Error, Result};
use crate::observed::{
    BrokerProcess, BrokerRecordState, BrokerTrust, Inventory, Observed, ServerInfo, StreamUsage,
    Usage, UsageSource,
};
use crate::store::{
    Root, broker_record, generation, inventory, jetstream_dir, journal, server_conf, space_dir,
};
use crate::{mint, permissions, streams};

/// Read and parse `cotal.toml`; returns the desired state and the sha256 of its bytes.
pub fn desired(root: &Root) -> Result<(Desired, String)> {
    let path = root.desired_file();
    let bytes = match std::fs::read(&path) {
        Ok(b) => b,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            return Err(Error::Input(format!(
                "{} does not exist: run `cotal init` to create a root, or pass --root DIR",
                path.display()
            )));
        }
        Err(e) => return Err(Error::io(&path, e)),
    };
    let text = String::from_utf8(bytes)
        .map_err(|_| Error::Input(format!("{}: not UTF-8", path.display())))?;
    desired_from_text(root, &text)
}

/// Parse a `cotal.toml` text (the file's, or an edit of it); returns the desired state and the
/// sha256 of the text.
pub fn desired_from_text(root: &Root, text: &str) -> Result<(Desired, String)> {
    let path = root.desired_file();
    let desired = desired::parse(text, &path.display().to_string()).map_err(Error::Input)?;
    Ok((desired, digest::sha256(text.as_bytes())))
}

/// The text of `cotal.toml`.
pub fn desired_text(root: &Root) -> Result<String> {
    let path = root.desired_file();
    match std::fs::read(&path) {
        Ok(b) => {
            String::from_utf8(b).map_err(|_| Error::Input(format!("{}: not UTF-8", path.display())))
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Err(Error::Input(format!(
            "{} does not exist: run `cotal init` to create a root, or pass --root DIR",
            path.display()
        ))),
        Err(e) => Err(Error::io(&path, e)),
    }
}

/// Observe the root.
pub fn observe(root: &Root, desired: &Desired, desired_digest: String) -> Result<Observed> {
    let broker = match broker_record::load(root)? {
        broker_record::Loaded::Absent => BrokerRecordState::Absent,
        broker_record::Loaded::Corrupt(reason) => BrokerRecordState::Corrupt {
            file: root.broker_record(),
            reason,
        },
        broker_record::Loaded::Valid(_, trust) => BrokerRecordState::Valid(trust),
    };
    let store_dir = root.store_dir(&desired.broker.store_dir);
    let mut inventory = match &broker {
        BrokerRecordState::Valid(trust) => inventory::read(root, &trust.operator_pub)?,
        _ => Inventory::default(),
    };
    let process = broker_process(root);
    let (mut live_error, mut server) = (None, None);
    if let (BrokerProcess::Running { .. }, BrokerRecordState::Valid(trust)) = (&process, &broker) {
        match live_figures(root, desired, trust) {
            Ok(figures) => {
                apply_figures(&mut inventory, &figures);
                server = Some(ServerInfo {
                    version: figures.version,
                    started: figures.start,
                });
            }
            Err(e) => live_error = Some(e.to_string()),
        }
    }
    for (name, space) in inventory.spaces.iter_mut() {
        space.sys_creds_present = space_dir::sys_creds_present(root, name, &space.account_pub);
        // Fail closed: an unreadable protection record counts as protected.
        space.protect_recorded = match space_dir::load_lifecycle(root, name) {
            Ok(Some(l)) => l.account == space.account_pub && l.protect,
            Ok(None) => false,
            Err(_) => true,
        };
        space.live_processes = space_dir::live_pids(root, name)?;
        if process == BrokerProcess::Stopped {
            space.usage.source = UsageSource::Store;
            space.usage.streams = jetstream_dir::streams(&store_dir, &space.account_pub)?;
        }
    }
    tracing::debug!(
        spaces = inventory.spaces.len(),
        corrupt = inventory.corrupt.len(),
        running = ?process,
        "observed"
    );
    Ok(Observed {
        broker,
        sys_seed_retained: broker_record::sys_seed_retained(root),
        inventory,
        server_conf: server_conf::read(root)?,
        generation: generation::load(root)?,
        journal: journal::load(root)?,
        process,
        store_dir,
        desired_digest,
        live_error,
        server,
    })
}

/// Ask the running broker for every account's streams and connections, through an ephemeral
/// system-account user (one connection, three requests, whatever the number of spaces).
pub fn live_figures(root: &Root, desired: &Desired, trust: &BrokerTrust) -> Result<live::Figures> {
    let seed = broker_record::load_sys_seed(root)?.ok_or_else(|| {
        Error::Other(
            "no retained system signing seed, so no system user can be minted to read live figures"
                .into(),
        )
    })?;
    let (creds, _) = mint::user(
        &trust.sys_pub,
        &seed,
        "cotal-monitor",
        permissions::monitor(),
        Some(permissions::EPHEMERAL),
    )
    .map_err(Error::Other)?;
    live::Nats::new(&desired.broker.host, desired.broker.port)?.figures(&creds)
}

/// Fill each space's usage and stream drift from live figures.
fn apply_figures(inventory: &mut Inventory, figures: &live::Figures) {
    for (name, space) in inventory.spaces.iter_mut() {
        let account = figures.accounts.get(&space.account_pub);
        space.usage = Usage {
            source: UsageSource::Live,
            streams: account
                .map(|a| {
                    a.streams
                        .iter()
                        .map(|s| StreamUsage {
                            name: s.name.clone(),
                            messages: Some(s.messages),
                            bytes: s.bytes,
                        })
                        .collect()
                })
                .unwrap_or_default(),
            connections: Some(account.map(|a| a.connections).unwrap_or(0)),
        };
        let Some(account) = account else { continue };
        for want in streams::expected(&name.token()) {
            let stream_name = want.stream_name();
            if let Some(shape) = account
                .streams
                .iter()
                .find(|s| s.name == stream_name)
                .and_then(|s| s.shape.as_ref())
            {
                let fields = streams::drift(&want.shape(), shape);
                if !fields.is_empty() {
                    space
                        .stream_drift
                        .push((stream_name, fields.iter().map(|f| f.to_string()).collect()));
                }
            }
        }
    }
}

/// The broker process from its pidfile: running only when the pid is alive and is a
/// nats-server (a stale or foreign pid is never reported as the broker).
pub fn broker_process(root: &Root) -> BrokerProcess {
    match crate::broker::process::pidfile(root) {
        crate::broker::process::Pidfile::Running(pid) => BrokerProcess::Running { pid },
        _ => BrokerProcess::Stopped,
    }
}
