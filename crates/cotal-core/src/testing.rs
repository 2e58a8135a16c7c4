//! Fixtures shared by the unit tests (`crate::testing`) and the integration tests
//! (`cotal::testing`): observations as plain data, and deterministic keys, trust and spaces for
//! byte-stable snapshots. Not an API: hidden from the documentation, used by tests only.
//!
//! Its fixtures draw fresh keys (`minted`), which clippy.toml disallows in the core's code:
//! allowed here alone, since only tests call them.

#![allow(clippy::disallowed_methods)]

use crate::model::{Listener, SpaceName, SpaceSpec};
use crate::observed::*;
use crate::trust::jwt::AccountLimits;

pub fn name(s: &str) -> SpaceName {
    SpaceName::parse(s).unwrap()
}

/// An observed space with account key `A<name>` and the limits of `spec`.
pub fn space(account: &str, spec: &SpaceSpec) -> ObservedSpace {
    let mut space = ObservedSpace::recorded(
        account.into(),
        format!("{account}-signing"),
        format!("eyJ.{account}.jwt"),
        AccountLimits::for_space(spec),
        Default::default(),
    );
    space.archived =
        (spec.state == crate::model::SpaceState::Archived).then(|| crate::model::Archival {
            at: "2026-12-01T00:00:00Z".into(),
            by: "ops@broker".into(),
        });
    space.protect_recorded = spec.protect;
    space.sys_creds_present = true;
    space
}

/// A stopped broker's root holding `spaces`.
pub fn observed(spaces: &[(&str, ObservedSpace)]) -> Observed {
    Observed {
        broker: BrokerRecordState::Absent,
        tenant_material: Vec::new(),
        unattributed_material: Vec::new(),
        system: crate::observed::SystemObserved {
            // A root of today keeps a monitor key (one without is planned to get it).
            keys: crate::observed::SysKeysState::Scoped(std::collections::BTreeMap::from([(
                crate::space::permissions::SysRole::Monitor,
                "AMONITOR".to_string(),
            )])),
            revocations: Default::default(),
            templates_current: true,
            previous_control: false,
            handed_out_revoked: Default::default(),
            handed_out_expires: Default::default(),
            // And its monitoring account, current (this root's broker record is absent: no
            // system account names it).
            monitor: Some((
                "AMONITORACCOUNT".into(),
                crate::space::side_accounts::monitor_claims("", "AMONITOR", &Default::default()),
            )),
            legacy_monitor_users: 0,
        },
        now: 1_800_000_000,
        nodes: vec![lone_node("/srv/s")],
        layout_conflict: None,
        tls: None,
        route_tls: None,
        route_rotation: 0,
        include: None,
        inventory: Inventory {
            // Each space's account exports what its side accounts import, as one applied by
            // this cotal does.
            spaces: spaces
                .iter()
                .map(|(n, s)| {
                    let mut s = s.clone();
                    if s.exports.is_empty() {
                        s.exports = crate::space::side_accounts::space_exports(&name(n).token());
                    }
                    (name(n), s)
                })
                .collect(),
            corrupt: Vec::new(),
        },
        generation: GenerationState::Absent,
        journal: JournalState::Absent,
        desired_digest: String::new(),
        live_error: None,
        server: None,
        journal_protected: Default::default(),
        capacity: Capacity {
            file: Store {
                size: 1 << 40,
                source: CapacitySource::Configured,
                used: None,
            },
            memory: Store {
                size: 1 << 36,
                source: CapacitySource::Configured,
                used: None,
            },
            open_files: None,
        },
    }
}

/// The node of a stopped single server at 127.0.0.1:4222 with its store at `store_dir`, no config
/// promoted yet.
pub fn lone_node(store_dir: &str) -> ObservedNode {
    node(
        crate::desired::Desired::default().topology.nodes.remove(0),
        store_dir,
    )
}

/// The stopped node `spec`, its files in `/srv/.cotal/node.NAME/`, no config promoted yet.
pub fn node(spec: crate::desired::topology::NodeSpec, store_dir: &str) -> ObservedNode {
    let dir = std::path::PathBuf::from(format!("/srv/.cotal/node.{}", spec.name));
    ObservedNode {
        files: crate::desired::topology::NodeFiles {
            name: spec.name.clone(),
            conf: dir.join("server.conf"),
            conf_next: dir.join("server.conf.next"),
            conf_prev: dir.join("server.conf.prev"),
            pid: dir.join("nats.pid"),
            log: dir.join("nats.log"),
            dir,
        },
        listener: Listener {
            host: spec.host.clone(),
            port: spec.port,
        },
        spec,
        server_conf: None,
        process: BrokerProcess::Stopped,
        store_dir: store_dir.into(),
        store_home: None,
        store_id: None,
        store_holds_data: false,
    }
}

/// A journal removing `space` (account `account`).
pub fn journal(space: &str, account: &str, committed: bool) -> JournalState {
    JournalState::Valid(Journal {
        op: "apply".into(),
        plan_digest: "sha256:x".into(),
        started_at: "2026-11-30T10:00:00Z".into(),
        pid: 1,
        host: "h".into(),
        removals: vec![JournaledRemoval {
            space: name(space),
            account: account.into(),
            committed,
            receipt: None,
        }],
        purges: Vec::new(),
        added: Vec::new(),
        adding: Vec::new(),
        steps: Vec::new(),
        owed: Vec::new(),
    })
}

/// A broker trust and spaces whose account JWTs are really signed by its operator (the renderer
/// checks issuers), keyed by name.
pub fn minted(names: &[&str]) -> (BrokerTrust, Vec<(String, ObservedSpace)>) {
    use crate::trust::jwt;
    use nkeys::KeyPair;
    let operator = KeyPair::new_operator();
    let trust = trust_of(
        &operator,
        &KeyPair::new_account(),
        &KeyPair::new_account(),
        &KeyPair::new_account(),
        1,
    );
    let spaces = names
        .iter()
        .map(|n| {
            let account = KeyPair::new_account();
            let signing = KeyPair::new_account();
            let limits = AccountLimits::for_space(&SpaceSpec::default());
            let mut claims =
                jwt::account_claims(n, &account.public_key(), &signing.public_key(), limits, 1);
            claims.nats.exports = crate::space::side_accounts::space_exports(n);
            let token = jwt::encode(&mut claims, &operator).unwrap();
            let mut s = space(&account.public_key(), &SpaceSpec::default());
            s.signing_pub = signing.public_key();
            s.jwt = token;
            s.exports = claims.nats.exports;
            (n.to_string(), s)
        })
        .collect();
    (trust, spaces)
}

/// A key of `kind` made from the byte `n` repeated: the same on every run.
pub fn fixed_key(kind: nkeys::KeyPairType, n: u8) -> nkeys::KeyPair {
    nkeys::KeyPair::new_from_raw(kind, [n; 32]).expect("a raw key")
}

/// The operator of [`fixed_trust`].
pub fn fixed_operator() -> nkeys::KeyPair {
    fixed_key(nkeys::KeyPairType::Operator, 1)
}

/// A broker trust made of fixed keys, its JWTs issued at `iat`.
pub fn fixed_trust(iat: i64) -> BrokerTrust {
    use nkeys::KeyPairType;
    trust_of(
        &fixed_operator(),
        &fixed_key(KeyPairType::Account, 2),
        &fixed_key(KeyPairType::Account, 3),
        &fixed_key(KeyPairType::Account, 4),
        iat,
    )
}

/// The trust of `operator` with system account `sys` (signing key `sys_signing`), its JWTs
/// issued at `iat`.
fn trust_of(
    operator: &nkeys::KeyPair,
    sys: &nkeys::KeyPair,
    sys_signing: &nkeys::KeyPair,
    monitor: &nkeys::KeyPair,
    iat: i64,
) -> BrokerTrust {
    use crate::trust::jwt;
    BrokerTrust {
        operator_pub: operator.public_key(),
        operator_signing: Vec::new(),
        operator_jwt: jwt::encode(
            &mut jwt::operator_claims(&operator.public_key(), &sys.public_key(), iat),
            operator,
        )
        .expect("signing"),
        sys_pub: sys.public_key(),
        sys_jwt: jwt::encode(
            &mut jwt::account_claims(
                "SYS",
                &sys.public_key(),
                &sys_signing.public_key(),
                AccountLimits::system(),
                iat,
            ),
            operator,
        )
        .expect("signing"),
        monitor: Some((monitor.public_key(), {
            let mut claims = jwt::Claims {
                jti: String::new(),
                iat,
                iss: String::new(),
                name: "monitor".into(),
                sub: monitor.public_key(),
                exp: None,
                nats: crate::space::side_accounts::monitor_claims(
                    &sys.public_key(),
                    "AMONITOR",
                    &Default::default(),
                ),
            };
            jwt::encode(&mut claims, operator).expect("signing")
        })),
    }
}

/// Space `name` with fixed keys (number `n`), its account JWT signed by [`fixed_operator`] at
/// `iat` as `spec` asks.
pub fn fixed_space(n: u8, name: &str, spec: &SpaceSpec, iat: i64) -> (SpaceName, ObservedSpace) {
    use crate::trust::jwt;
    use nkeys::KeyPairType;
    let account = fixed_key(KeyPairType::Account, 10 + n);
    let signing = fixed_key(KeyPairType::Account, 40 + n);
    // As a record holds it: a name an older cotal accepted (a newline in it) still renders safely.
    let name = SpaceName::from_record(name).expect("a space name");
    let mut claims = jwt::account_claims(
        &name.token(),
        &account.public_key(),
        &signing.public_key(),
        AccountLimits::for_space(spec),
        iat,
    );
    claims.nats.exports = crate::space::side_accounts::space_exports(&name.token());
    let token = jwt::encode(&mut claims, &fixed_operator()).expect("signing");
    let mut s = space(&account.public_key(), spec);
    s.signing_pub = signing.public_key();
    s.jwt = token;
    s.exports = claims.nats.exports;
    (name, s)
}

/// The monitoring account `trust` names, as an observation of its broker record holds it
/// (with the testing root's monitor key, `AMONITOR`), current.
pub fn monitor_observed(trust: &BrokerTrust) -> Option<(String, crate::trust::jwt::AccountNats)> {
    trust.monitor.as_ref().map(|(public, _)| {
        (
            public.clone(),
            crate::space::side_accounts::monitor_claims(
                &trust.sys_pub,
                "AMONITOR",
                &Default::default(),
            ),
        )
    })
}
