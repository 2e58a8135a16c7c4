//! The error type every verb returns, and the exit code each kind maps to (docs/design/architecture.md, "Exit codes").
//!
//! Invariant: no variant ever carries secret material. Messages are built from names, paths and
//! public keys only; a seed that reached an error string would reach the terminal and the logs.

pub use crate::diagnostic::Diagnostic;
use std::path::PathBuf;

/// Process exit codes of every verb (docs/design/architecture.md, "Exit codes").
pub mod exit {
    pub const OK: i32 = 0;
    pub const ERROR: i32 = 1;
    pub const CHANGES: i32 = 2;
    pub const REFUSED: i32 = 3;
    pub const LOCK_HELD: i32 = 4;
    pub const STALE_PLAN: i32 = 5;
    pub const INTERRUPTED: i32 = 6;
    pub const ROLLED_BACK: i32 = 7;
    /// Some spaces' steps failed after the promotion, every other step was done: the next
    /// apply plans what is left.
    pub const PARTLY_APPLIED: i32 = 8;
    /// The command line itself is wrong (an unknown flag, a missing argument): nothing ran.
    /// `sysexits.h`'s EX_USAGE, never 2, which `plan --detailed-exitcode` means "changes".
    pub const USAGE: i32 = 64;
    /// An apply stopped by SIGINT or SIGTERM at a step boundary (128 + SIGINT, the shell's
    /// code for Ctrl-C): what was done is said, and the next `cotal apply` finishes it.
    pub const STOPPED: i32 = 130;
}

/// Everything a cotal verb can fail with: its kind (which decides the exit code, in
/// [`Error::exit_code`] alone) and, but for I/O on a path, a [`Diagnostic`] of what happened and
/// what to do next.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// Bad input: a malformed file, an invalid argument. Nothing was changed.
    #[error("{0}")]
    Input(Box<Diagnostic>),

    /// An I/O failure on a named path.
    #[error("{path}: {source}")]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },

    /// A guard refused: the diagnostic names the tenants, the blast radius and what to do next.
    #[error("refused: {0}")]
    Refused(Box<Diagnostic>),

    /// The lock file was replaced while this process held it: another cotal may hold the root
    /// now, so nothing more is touched (not even the journal).
    #[error("refused: {0}")]
    LockLost(Box<Diagnostic>),

    /// The root's maintenance lock is held by another process.
    #[error("the root is locked by another cotal: {0}")]
    LockHeld(Box<Diagnostic>),

    /// A saved plan no longer matches what is on disk.
    #[error(
        "the saved plan is stale: {0}\nnext: run `cotal plan --out FILE` again, review the new plan, and apply it"
    )]
    StalePlan(Box<Diagnostic>),

    /// Something the plan relied on moved while it was being applied (a channel a client
    /// wrote meanwhile): nothing more was written.
    #[error("{0}")]
    Conflict(Box<Diagnostic>),

    /// A journal is open: an apply was interrupted and must be finished first.
    #[error("{0}")]
    Interrupted(Box<Diagnostic>),

    /// The broker did not confirm a reload; the previous config was restored.
    #[error("reload not confirmed, rolled back: {0}")]
    RolledBack(Box<Diagnostic>),

    /// SIGINT or SIGTERM stopped an apply at a step boundary.
    #[error("{0}")]
    Stopped(Box<Diagnostic>),

    /// A failure at the broker edge, by kind (reaching it, a request, an API error, a reply,
    /// its process, the edge's own machinery).
    #[error("{0}")]
    Broker(#[from] BrokerError),

    /// Anything else (external tools, the filesystem beyond a path), with context.
    #[error("{0}")]
    Other(Box<Diagnostic>),
}

/// One constructor per kind, taking a [`Diagnostic`] or a plain message.
impl Error {
    pub fn input(d: impl Into<Diagnostic>) -> Self {
        Error::Input(Box::new(d.into()))
    }
    pub fn refused(d: impl Into<Diagnostic>) -> Self {
        Error::Refused(Box::new(d.into()))
    }
    pub fn lock_lost(d: impl Into<Diagnostic>) -> Self {
        Error::LockLost(Box::new(d.into()))
    }
    pub fn lock_held(d: impl Into<Diagnostic>) -> Self {
        Error::LockHeld(Box::new(d.into()))
    }
    pub fn stale_plan(d: impl Into<Diagnostic>) -> Self {
        Error::StalePlan(Box::new(d.into()))
    }
    pub fn conflict(d: impl Into<Diagnostic>) -> Self {
        Error::Conflict(Box::new(d.into()))
    }
    pub fn interrupted(d: impl Into<Diagnostic>) -> Self {
        Error::Interrupted(Box::new(d.into()))
    }
    pub fn rolled_back(d: impl Into<Diagnostic>) -> Self {
        Error::RolledBack(Box::new(d.into()))
    }
    pub fn stopped(d: impl Into<Diagnostic>) -> Self {
        Error::Stopped(Box::new(d.into()))
    }
    pub fn other(d: impl Into<Diagnostic>) -> Self {
        Error::Other(Box::new(d.into()))
    }

    /// A failure of the nats-server process (or the broker a step needs is not running).
    pub fn process(d: impl Into<Diagnostic>) -> Self {
        Error::Broker(BrokerError::Process(Box::new(d.into())))
    }

    /// The diagnostic, when the error has one (all but I/O on a path and most failures at the
    /// broker edge, which say `what: why`).
    pub fn diagnostic(&self) -> Option<&Diagnostic> {
        match self {
            Error::Io { .. } => None,
            Error::Broker(BrokerError::Process(d) | BrokerError::Unconfirmed(d)) => {
                Some(d.as_ref())
            }
            Error::Broker(_) => None,
            Error::Input(d)
            | Error::Refused(d)
            | Error::LockLost(d)
            | Error::LockHeld(d)
            | Error::StalePlan(d)
            | Error::Conflict(d)
            | Error::Interrupted(d)
            | Error::RolledBack(d)
            | Error::Stopped(d)
            | Error::Other(d) => Some(d.as_ref()),
        }
    }
}

impl Error {
    pub fn exit_code(&self) -> i32 {
        match self {
            Error::Input(_) | Error::Io { .. } | Error::Broker(_) | Error::Other(_) => exit::ERROR,
            Error::Refused(_) | Error::LockLost(_) => exit::REFUSED,
            Error::LockHeld(_) => exit::LOCK_HELD,
            Error::StalePlan(_) | Error::Conflict(_) => exit::STALE_PLAN,
            Error::Interrupted(_) => exit::INTERRUPTED,
            Error::RolledBack(_) => exit::ROLLED_BACK,
            Error::Stopped(_) => exit::STOPPED,
        }
    }

    pub fn io(path: impl Into<PathBuf>, source: std::io::Error) -> Self {
        Error::Io {
            path: path.into(),
            source,
        }
    }
}

pub type Result<T, E = Error> = std::result::Result<T, E>;

// What can go wrong at the broker edge (`crate::broker`), by kind: reaching the broker, a
// request it did not answer, an error it answered with (a JetStream API error and its code), a
// reply cotal could not read, the nats-server process, and cotal's own machinery there. The kind
// is what a caller acts on (a retry of a transient error, a refusal naming the process); the
// text is what people read, `what: why`.

/// One failure at the broker edge.
#[derive(Debug, thiserror::Error)]
pub enum BrokerError {
    /// No connection: nothing listens, the creds are refused, the account is at its limit.
    #[error("{what}: {why}")]
    Connect { what: String, why: String },
    /// A request that got no answer (a deadline passed, the connection dropped).
    #[error("{what}: {why}")]
    Request { what: String, why: String },
    /// The broker answered with an error: a JetStream API error (`code` is its `err_code`
    /// when it gave one), a key that moved, a stream it would not create.
    #[error("{what}: {why}")]
    Api {
        what: String,
        code: Option<u64>,
        why: String,
    },
    /// A reply cotal could not read, or none where one was due.
    #[error("{what}: {why}")]
    Reply { what: String, why: String },
    /// The nats-server process: started, signalled, waited for; and the broker a step needs
    /// not running.
    #[error("{0}")]
    Process(Box<Diagnostic>),
    /// A change the broker did not confirm: a reload a node refused or that did not take on
    /// the data plane, a node that did not answer by its name, a rollback not confirmed. Each
    /// node's failure is a line of the message, in the server's own words.
    #[error("{0}")]
    Unconfirmed(Box<Diagnostic>),
    /// cotal's own machinery at the edge: the async runtime, a user minted for a connection.
    #[error("{what}: {why}")]
    Local { what: String, why: String },
}

impl BrokerError {
    pub fn connect(what: impl Into<String>, why: impl std::fmt::Display) -> Self {
        BrokerError::Connect {
            what: what.into(),
            why: why.to_string(),
        }
    }
    pub fn request(what: impl Into<String>, why: impl std::fmt::Display) -> Self {
        BrokerError::Request {
            what: what.into(),
            why: why.to_string(),
        }
    }
    pub fn api(what: impl Into<String>, why: impl std::fmt::Display) -> Self {
        BrokerError::Api {
            what: what.into(),
            code: None,
            why: why.to_string(),
        }
    }
    /// An API error with the JetStream `err_code` the broker gave.
    pub fn api_code(what: impl Into<String>, code: u64, why: impl std::fmt::Display) -> Self {
        BrokerError::Api {
            what: what.into(),
            code: Some(code),
            why: why.to_string(),
        }
    }
    pub fn reply(what: impl Into<String>, why: impl std::fmt::Display) -> Self {
        BrokerError::Reply {
            what: what.into(),
            why: why.to_string(),
        }
    }
    pub fn process(d: impl Into<Diagnostic>) -> Self {
        BrokerError::Process(Box::new(d.into()))
    }
    pub fn unconfirmed(d: impl Into<Diagnostic>) -> Self {
        BrokerError::Unconfirmed(Box::new(d.into()))
    }
    pub fn local(what: impl Into<String>, why: impl std::fmt::Display) -> Self {
        BrokerError::Local {
            what: what.into(),
            why: why.to_string(),
        }
    }
}

/// Terminal I/O (prompts) without a path to name.
impl From<std::io::Error> for Error {
    fn from(e: std::io::Error) -> Self {
        Error::other(e.to_string())
    }
}

/// Attach a path to an `io::Result`.
pub trait IoContext<T> {
    fn at(self, path: impl Into<PathBuf>) -> Result<T>;
}

impl<T> IoContext<T> for std::io::Result<T> {
    fn at(self, path: impl Into<PathBuf>) -> Result<T> {
        self.map_err(|e| Error::io(path, e))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_broker_failure_keeps_its_kind_reads_what_why_and_exits_1() {
        let e: Error =
            BrokerError::api_code("creating DM_x", 10058, "stream name already in use").into();
        assert_eq!(e.to_string(), "creating DM_x: stream name already in use");
        assert_eq!(e.exit_code(), exit::ERROR);
        assert!(matches!(
            e,
            Error::Broker(BrokerError::Api {
                code: Some(10058),
                ..
            })
        ));
        let stopped = Error::process(Diagnostic::new("the broker is not running").next("cotal up"));
        assert_eq!(stopped.diagnostic().unwrap().next, ["cotal up"]);
        assert_eq!(
            stopped.to_string(),
            "the broker is not running\nnext: cotal up"
        );
    }

    #[test]
    fn every_kind_maps_to_its_documented_exit_code() {
        let d = || Diagnostic::new("x");
        for (e, code) in [
            (Error::input(d()), exit::ERROR),
            (Error::refused(d()), exit::REFUSED),
            (Error::lock_lost(d()), exit::REFUSED),
            (Error::lock_held(d()), exit::LOCK_HELD),
            (Error::stale_plan(d()), exit::STALE_PLAN),
            (Error::conflict(d()), exit::STALE_PLAN),
            (Error::interrupted(d()), exit::INTERRUPTED),
            (Error::rolled_back(d()), exit::ROLLED_BACK),
            (Error::stopped(d()), exit::STOPPED),
            (Error::other(d()), exit::ERROR),
            (BrokerError::connect("c", "refused").into(), exit::ERROR),
        ] {
            assert_eq!(e.exit_code(), code, "{e:?}");
        }
    }
}
