//! Observation: read everything the planner may depend on from disk (and, when the broker
//! runs, from the broker) into an [`Observed`] value. The only IO before planning.
//!
//! Invariant: observation never writes.

use crate::desired::{self, Desired};
use crate::digest;
use crate::error::{Error, Result};
use crate::observed::{BrokerProcess, BrokerRecordState, Inventory, Observed, UsageSource};
use crate::store::{
    self, Root, broker_record, generation, inventory, jetstream_dir, journal, server_conf,
    space_dir,
};

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
    let text = String::from_utf8(bytes.clone())
        .map_err(|_| Error::Input(format!("{}: not UTF-8", path.display())))?;
    let desired = desired::parse(&text, &path.display().to_string()).map_err(Error::Input)?;
    Ok((desired, digest::sha256(&bytes)))
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
    for (name, space) in inventory.spaces.iter_mut() {
        if let Ok(Some(l)) = space_dir::load_lifecycle(root, name)
            && l.account == space.account_pub
        {
            space.protect_recorded = l.protect;
        }
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
    })
}

/// The broker process from its pidfile: running only when the pid is alive and is a
/// nats-server (a stale or foreign pid is never reported as the broker).
pub fn broker_process(root: &Root) -> BrokerProcess {
    let Ok(text) = std::fs::read_to_string(root.pid_file()) else {
        return BrokerProcess::Stopped;
    };
    match text.trim().parse::<u32>() {
        Ok(pid) if store::process_alive(pid) && is_nats_server(pid) => {
            BrokerProcess::Running { pid }
        }
        _ => BrokerProcess::Stopped,
    }
}

/// Whether `pid` runs a nats-server binary (from /proc).
pub fn is_nats_server(pid: u32) -> bool {
    std::fs::read(format!("/proc/{pid}/cmdline"))
        .ok()
        .and_then(|c| {
            c.split(|b| *b == 0)
                .next()
                .map(|argv0| String::from_utf8_lossy(argv0).contains("nats-server"))
        })
        .unwrap_or(false)
}
