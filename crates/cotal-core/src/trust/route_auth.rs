//! The cluster's route credential: the user and password every node of a cluster requires of
//! a route, and presents on the routes it opens. A process that reaches a node's route port
//! without it is refused ("Authorization Violation") and joins nothing.
//!
//! The credential is derived, not stored: the password is the sha256 of a fixed label, the
//! operator's identity seed (`.cotal/auth/broker.json`, 0600, in every root backup) and the
//! rotation count (`.cotal/auth/routes.json`, absent until `cotal rotate routes`), so every root
//! has exactly one, the same on every run and every host that holds the root. The seed cannot
//! be recovered from it (sha256 is one-way). A rotation (only while no node runs: a reload
//! would close the routes open with the old credential) makes another one, and each node's
//! config names the rotation in a comment, so the change is planned and promoted.
//!
//! Invariant: the credential never reaches `server.conf`, a plan, the state or any output. A
//! node's `server.conf` names an include file beside it (`<config stem>.routes.conf`, 0600)
//! that holds the `authorization {}` block and the route URLs with their user info; only that
//! file, and the digest nats-server computes over the parsed whole, carry it.

use crate::trust::secret::{Secret, Seed};
use base64::Engine as _;
use sha2::{Digest, Sha256};

/// The user every route presents.
pub const ROUTE_USER: &str = "cotal-route";

/// What separates this derivation from any other use of the seed.
const LABEL: &[u8] = b"cotal route credential v1\0";

/// The user and password of a cluster's routes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RouteCredential {
    pub user: String,
    pub password: Secret,
}

impl RouteCredential {
    /// The root's credential after `rotation` rotations, from its operator identity seed
    /// (rotation 0 is the credential of roots made before rotations, unchanged).
    pub fn derive(operator_seed: &Seed, rotation: u64) -> RouteCredential {
        let mut h = Sha256::new();
        h.update(LABEL);
        h.update(operator_seed.expose().as_bytes());
        if rotation > 0 {
            h.update(b"\0rotation ");
            h.update(rotation.to_be_bytes());
        }
        RouteCredential {
            user: ROUTE_USER.into(),
            // URL-safe: it sits in the user info of the route URLs.
            password: Secret::new(
                base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(h.finalize()),
            ),
        }
    }

    /// `url` (`nats-route://host:port`) with this credential as its user info.
    pub fn route_url(&self, url: &str) -> String {
        match url.split_once("://") {
            Some((scheme, rest)) => {
                format!("{scheme}://{}:{}@{rest}", self.user, self.password.expose())
            }
            None => url.to_string(),
        }
    }
}

/// The comment line of a node's `cluster {}` that names the rotation of the credential its
/// include holds (none before the first rotation).
pub const ROTATION_LINE: &str = "  # route credential rotation ";

/// The rotation a rendered config names (0 when it names none).
pub fn rotation_of(config_text: &str) -> u64 {
    config_text
        .lines()
        .find_map(|l| l.strip_prefix(ROTATION_LINE))
        .and_then(|rest| rest.split_whitespace().next())
        .and_then(|n| n.parse().ok())
        .unwrap_or(0)
}

/// The include file of a node whose config is the file named `config_file_name`: beside it,
/// `<stem>.routes.conf` (`server.conf` gives `server.routes.conf`).
pub fn include_name(config_file_name: &str) -> String {
    let stem = config_file_name
        .strip_suffix(".conf")
        .unwrap_or(config_file_name);
    format!("{stem}.routes.conf")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_credential_is_the_roots_alone_and_never_its_seed() {
        let seed = Seed::new(crate::testing::fixed_operator().seed().expect("a seed"));
        let a = RouteCredential::derive(&seed, 0);
        assert_eq!(
            a,
            RouteCredential::derive(&seed, 0),
            "the same on every run"
        );
        let rotated = RouteCredential::derive(&seed, 1);
        assert_ne!(a.password, rotated.password, "a rotation makes another");
        assert_ne!(rotated.password, RouteCredential::derive(&seed, 2).password);
        let other = Seed::new(
            nkeys::KeyPair::new_operator()
                .seed()
                .expect("a fresh operator seed"),
        );
        assert_ne!(a.password, RouteCredential::derive(&other, 0).password);
        assert!(!a.password.expose().contains(seed.expose()));
        assert_eq!(a.password.expose().len(), 43, "256 bits, URL-safe");
        assert_eq!(
            a.route_url("nats-route://10.0.0.2:6222"),
            format!(
                "nats-route://cotal-route:{}@10.0.0.2:6222",
                a.password.expose()
            )
        );
        assert!(!format!("{a:?}").contains(a.password.expose()));
    }

    #[test]
    fn the_include_sits_beside_its_config() {
        assert_eq!(include_name("server.conf"), "server.routes.conf");
        assert_eq!(include_name("n3.conf"), "n3.routes.conf");
        assert_eq!(include_name("nats"), "nats.routes.conf");
    }
}
