//! Who is acting: the login user and the host (for the journal and the audit), and this
//! process as a holder of the root's lock. Read from the environment and the system in this one
//! place.

/// The actor for journals and the lock: host name.
pub fn host() -> String {
    nix::unistd::gethostname()
        .ok()
        .and_then(|h| h.into_string().ok())
        .unwrap_or_else(|| "unknown-host".into())
}

/// Who is acting: the login user and the host.
pub fn actor() -> crate::audit::Actor {
    let user = std::env::var("USER")
        .ok()
        .filter(|u| !u.is_empty())
        .or_else(|| {
            nix::unistd::User::from_uid(nix::unistd::getuid())
                .ok()
                .flatten()
                .map(|u| u.name)
        })
        .unwrap_or_else(|| format!("uid {}", nix::unistd::getuid()));
    crate::audit::Actor { user, host: host() }
}

/// The lock holder record for this process.
pub fn holder() -> crate::store::lock::Holder {
    crate::store::lock::Holder {
        pid: std::process::id(),
        host: host(),
        command: std::env::args()
            .map(|a| if a.contains(' ') { format!("{a:?}") } else { a })
            .collect::<Vec<_>>()
            .join(" "),
        since: crate::clock::timestamp(),
    }
}
