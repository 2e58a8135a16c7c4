//! A root as the original (TypeScript) Cotal leaves it, built from its documented formats
//! (`../shared/reference/original-layout.md`, seed 000 §2.2, §5, §7): `broker.json` without
//! the system signing seed, `account.<hex>.json` per space (or the legacy monolith
//! `auth.json`), the P7 material per space or at root scope, and its rendered `server.conf`.
//! The JWTs are signed as the original signs them: accounts by the operator's identity key,
//! with the original's limits (everything unlimited, JetStream on), the system account with a
//! signing key whose seed is gone.
#![allow(dead_code)]

use cotal::trust::jwt::{self, Claims};
use nkeys::KeyPair;
use serde_json::{Value, json};
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

/// How the fixture is laid out.
#[derive(Clone, Copy, Default)]
pub struct Layout {
    /// The one space's trust in the legacy `auth/auth.json` instead of its two records.
    pub monolith: bool,
    /// The P7 material at the root of `.cotal/` instead of `.cotal/space.<hex>/`.
    pub root_scoped: bool,
}

/// One space of the fixture: its name and keys (the seeds kept, to mint users as the
/// original's clients hold them).
pub struct Space {
    pub name: String,
    pub account: KeyPair,
    pub signing: KeyPair,
}

/// The fixture's keys.
pub struct Original {
    pub operator: KeyPair,
    pub sys: KeyPair,
    /// The system account's signing key: the original strips its seed before writing, so only
    /// the creds it minted at first boot carry its signature.
    pub sys_signing: KeyPair,
    pub spaces: Vec<Space>,
    pub port: u16,
}

fn sign(sub: &str, name: &str, nats: Value, signer: &KeyPair) -> String {
    let mut claims = Claims {
        jti: String::new(),
        iat: 1_780_000_000,
        iss: String::new(),
        name: name.to_string(),
        sub: sub.to_string(),
        exp: None,
        nats,
    };
    jwt::encode(&mut claims, signer).unwrap()
}

/// The original's account limits (`DATA_LIMITS`): unlimited, JetStream on.
fn data_limits() -> Value {
    json!({"subs": -1, "data": -1, "payload": -1, "imports": -1, "exports": -1,
           "wildcards": true, "conn": -1, "leaf": -1, "mem_storage": -1, "disk_storage": -1})
}

fn write(path: &Path, text: &str, mode: u32) {
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, text).unwrap();
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).unwrap();
}

fn private_dir(path: &Path) {
    std::fs::create_dir_all(path).unwrap();
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o700)).unwrap();
}

impl Original {
    pub fn new(names: &[&str], port: u16) -> Original {
        Original {
            operator: KeyPair::new_operator(),
            sys: KeyPair::new_account(),
            sys_signing: KeyPair::new_account(),
            spaces: names
                .iter()
                .map(|n| Space {
                    name: n.to_string(),
                    account: KeyPair::new_account(),
                    signing: KeyPair::new_account(),
                })
                .collect(),
            port,
        }
    }

    pub fn operator_jwt(&self) -> String {
        let op = self.operator.public_key();
        sign(
            &op,
            "cotal",
            json!({"system_account": self.sys.public_key(), "type": "operator", "version": 2}),
            &self.operator,
        )
    }

    pub fn sys_jwt(&self) -> String {
        let mut limits = data_limits();
        limits["mem_storage"] = json!(0);
        limits["disk_storage"] = json!(0);
        sign(
            &self.sys.public_key(),
            "SYS",
            json!({"limits": limits, "signing_keys": [self.sys_signing.public_key()],
                   "type": "account", "version": 2}),
            &self.operator,
        )
    }

    pub fn account_jwt(&self, space: &Space) -> String {
        sign(
            &space.account.public_key(),
            &cotal::model::token(&space.name),
            json!({"limits": data_limits(), "signing_keys": [space.signing.public_key()],
                   "type": "account", "version": 2}),
            &self.operator,
        )
    }

    /// Creds of a user of `space`, signed by its account signing key, as the original's
    /// `cotal mint` writes them (every right of the space: an admin).
    pub fn user_creds(&self, space: &Space, name: &str) -> String {
        let user = KeyPair::new_user();
        let token = sign(
            &user.public_key(),
            name,
            json!({"pub": {}, "sub": {}, "subs": -1, "data": -1, "payload": -1,
                   "issuer_account": space.account.public_key(), "type": "user", "version": 2}),
            &space.signing,
        );
        jwt::creds_file(&token, &user.seed().unwrap())
    }

    /// Creds of a system user signed by the system signing key (the P7 $SYS pair).
    fn sys_creds(&self, name: &str) -> String {
        let user = KeyPair::new_user();
        let token = sign(
            &user.public_key(),
            name,
            json!({"pub": {}, "sub": {}, "subs": -1, "data": -1, "payload": -1,
                   "issuer_account": self.sys.public_key(), "type": "user", "version": 2}),
            &self.sys_signing,
        );
        jwt::creds_file(&token, &user.seed().unwrap())
    }

    fn broker_json(&self) -> String {
        serde_json::to_string_pretty(&json!({
            "operator": {"seed": self.operator.seed().unwrap(), "jwt": self.operator_jwt()},
            "sys": {"pub": self.sys.public_key(), "jwt": self.sys_jwt()},
            "gen": 1
        }))
        .unwrap()
    }

    fn account_keys(&self, space: &Space) -> Value {
        json!({
            "pub": space.account.public_key(),
            "seed": space.account.seed().unwrap(),
            "jwt": self.account_jwt(space),
            "signingSeed": space.signing.seed().unwrap(),
            "signingPub": space.signing.public_key(),
        })
    }

    /// The original's `server.conf` (`serverConfig` in `provision.ts`).
    pub fn server_conf(&self, root: &Path, websocket: Option<u16>) -> String {
        let store = root.join(".cotal/nats");
        let mut out = format!(
            "# Generated by `cotal up` - do not edit by hand.\nhost: 127.0.0.1\nport: {}\nmax_control_line: 65536\njetstream {{ store_dir: {} }}\n",
            self.port,
            serde_json::to_string(&store.display().to_string()).unwrap()
        );
        if let Some(ws) = websocket {
            out.push_str(&format!(
                "websocket {{\n  host: 127.0.0.1\n  port: {ws}\n  no_tls: true\n}}\n"
            ));
        }
        out.push_str(&format!(
            "operator: {}\nsystem_account: {}\nresolver: MEMORY\nresolver_preload: {{\n",
            self.operator_jwt(),
            self.sys.public_key()
        ));
        for s in &self.spaces {
            out.push_str(&format!(
                "  {}: {}\n",
                s.account.public_key(),
                self.account_jwt(s)
            ));
        }
        out.push_str(&format!(
            "  {}: {}\n}}\n",
            self.sys.public_key(),
            self.sys_jwt()
        ));
        out
    }

    /// Write the root at `root`.
    pub fn write(&self, root: &Path, layout: Layout, websocket: Option<u16>) {
        let state = root.join(".cotal");
        private_dir(&state);
        private_dir(&state.join("auth"));
        private_dir(&state.join("nats"));
        if layout.monolith {
            assert_eq!(self.spaces.len(), 1, "the monolith holds one space");
            let s = &self.spaces[0];
            let doc = json!({
                "space": s.name,
                "operator": {"seed": self.operator.seed().unwrap(), "jwt": self.operator_jwt()},
                "account": self.account_keys(s),
                "sys": {"pub": self.sys.public_key(), "jwt": self.sys_jwt()},
            });
            write(
                &state.join("auth/auth.json"),
                &serde_json::to_string_pretty(&doc).unwrap(),
                0o600,
            );
        } else {
            write(&state.join("auth/broker.json"), &self.broker_json(), 0o600);
            for s in &self.spaces {
                let doc = json!({"space": s.name, "account": self.account_keys(s)});
                write(
                    &state.join(format!("auth/account.{}.json", hex::encode(&s.name))),
                    &serde_json::to_string_pretty(&doc).unwrap(),
                    0o600,
                );
            }
        }
        write(
            &state.join("auth/server.conf"),
            &self.server_conf(root, websocket),
            0o600,
        );
        for s in &self.spaces {
            let dir = if layout.root_scoped {
                state.clone()
            } else {
                state.join(format!("space.{}", hex::encode(&s.name)))
            };
            private_dir(&dir);
            for (file, creds) in [
                (
                    "membership-observer.creds",
                    self.sys_creds("membership-observer"),
                ),
                (
                    "connection-evictor.creds",
                    self.sys_creds("connection-evictor"),
                ),
                ("membership-rw.creds", self.user_creds(s, "membership-rw")),
                ("delivery.creds", self.user_creds(s, "delivery")),
            ] {
                write(&dir.join(file), &creds, 0o600);
            }
            write(
                &dir.join("membership.json"),
                &json!({"accountId": s.account.public_key()}).to_string(),
                0o600,
            );
        }
    }

    /// Start nats-server as the original does: `-c <root>/.cotal/auth/server.conf`, its pid in
    /// `.cotal/nats.pid`, its log in `.cotal/nats.log`.
    pub fn start(root: &Path) -> std::process::Child {
        let server = std::env::var("COTAL_NATS_SERVER").unwrap_or_else(|_| "nats-server".into());
        let state = root.join(".cotal");
        std::process::Command::new(server)
            .arg("-c")
            .arg(state.join("auth/server.conf"))
            .arg("-P")
            .arg(state.join("nats.pid"))
            .arg("-l")
            .arg(state.join("nats.log"))
            .stdin(std::process::Stdio::null())
            .spawn()
            .unwrap()
    }
}

/// The files of the P7 material, as the original names them.
pub const MATERIAL: [&str; 5] = [
    "membership-observer.creds",
    "connection-evictor.creds",
    "membership-rw.creds",
    "delivery.creds",
    "membership.json",
];

/// `.cotal/space.<hex>/` of `name` under `root`.
pub fn space_dir(root: &Path, name: &str) -> PathBuf {
    root.join(".cotal")
        .join(format!("space.{}", hex::encode(name)))
}
