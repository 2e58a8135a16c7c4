//! An nsc store as nsc leaves it, built from its documented layout (nsc's `cmd/store`):
//! `stores/<operator>/<operator>.jwt`, `stores/<operator>/accounts/<name>/<name>.jwt`, and every
//! seed in `keys/keys/<first character>/<second and third characters>/<public key>.nk`; the
//! JWTs as nsc signs them (the operator self-signed with a signing key, the accounts signed by
//! that signing key, the system account with nsc's monitoring exports), and the config
//! `nsc generate config --mem-resolver` writes for a nats-server running on them.
#![allow(dead_code)]

use cotal::trust::jwt::{self, Claims};
use nkeys::KeyPair;
use serde_json::{Value, json};
use std::path::{Path, PathBuf};

/// One account of the store.
pub struct Account {
    pub name: String,
    pub key: KeyPair,
    /// Its signing key, when it has one (`nsc edit account --sk generate`).
    pub signing: Option<KeyPair>,
    /// JetStream enabled (`nsc edit account --js-disk-storage -1 ...`).
    pub jetstream: bool,
    /// Extra claims of its `nats` object (exports, imports, ...).
    pub extra: Value,
}

/// The store's keys.
pub struct Nsc {
    pub operator: KeyPair,
    pub operator_signing: KeyPair,
    pub sys: KeyPair,
    pub accounts: Vec<Account>,
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

fn write(path: &Path, text: &str) {
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, text).unwrap();
}

impl Nsc {
    /// An operator `acme` with a system account `SYS` and `accounts`.
    pub fn new(accounts: Vec<Account>) -> Nsc {
        Nsc {
            operator: KeyPair::new_operator(),
            operator_signing: KeyPair::new_operator(),
            sys: KeyPair::new_account(),
            accounts,
        }
    }

    /// An account as `nsc add account NAME` makes it: no signing key, JetStream off.
    pub fn account(name: &str) -> Account {
        Account {
            name: name.into(),
            key: KeyPair::new_account(),
            signing: None,
            jetstream: false,
            extra: json!({}),
        }
    }

    pub fn get(&self, name: &str) -> &Account {
        self.accounts.iter().find(|a| a.name == name).unwrap()
    }

    pub fn operator_jwt(&self) -> String {
        sign(
            &self.operator.public_key(),
            "acme",
            json!({"system_account": self.sys.public_key(),
                   "signing_keys": [self.operator_signing.public_key()],
                   "type": "operator", "version": 2}),
            &self.operator,
        )
    }

    pub fn sys_jwt(&self) -> String {
        sign(
            &self.sys.public_key(),
            "SYS",
            json!({"limits": {"subs": -1, "data": -1, "payload": -1, "imports": -1, "exports": -1,
                              "wildcards": true, "conn": -1, "leaf": -1},
                   "exports": [
                       {"name": "account-monitoring-services", "subject": "$SYS.REQ.ACCOUNT.*.*",
                        "type": "service", "response_type": "Stream", "account_token_position": 4},
                       {"name": "account-monitoring-streams", "subject": "$SYS.ACCOUNT.*.>",
                        "type": "stream", "account_token_position": 3}],
                   "signing_keys": [], "type": "account", "version": 2}),
            &self.operator_signing,
        )
    }

    pub fn account_jwt(&self, a: &Account) -> String {
        let mut limits = json!({"subs": -1, "data": -1, "payload": -1, "imports": -1,
                                "exports": -1, "wildcards": true, "conn": -1, "leaf": -1});
        if a.jetstream {
            for field in ["mem_storage", "disk_storage", "streams", "consumer"] {
                limits[field] = json!(-1);
            }
        }
        let mut nats = json!({"limits": limits, "default_permissions": {"pub": {}, "sub": {}},
                              "type": "account", "version": 2});
        if let Some(s) = &a.signing {
            nats["signing_keys"] = json!([s.public_key()]);
        }
        for (k, v) in a.extra.as_object().unwrap() {
            nats[k] = v.clone();
        }
        sign(&a.key.public_key(), &a.name, nats, &self.operator_signing)
    }

    /// Creds of a user of `a` as `nsc add user` makes them: signed by its signing key when it
    /// has one, else by the account's identity key.
    pub fn user_creds(&self, a: &Account, name: &str) -> String {
        let user = KeyPair::new_user();
        let mut nats = json!({"pub": {}, "sub": {}, "subs": -1, "data": -1, "payload": -1,
                              "type": "user", "version": 2});
        let signer = match &a.signing {
            Some(s) => {
                nats["issuer_account"] = json!(a.key.public_key());
                s
            }
            None => &a.key,
        };
        let token = sign(&user.public_key(), name, nats, signer);
        jwt::creds_file(&token, &user.seed().unwrap())
    }

    /// Write the store into `dir` (nsc's data folder).
    pub fn write(&self, dir: &Path) {
        let op = dir.join("stores/acme");
        write(&op.join("acme.jwt"), &self.operator_jwt());
        write(&op.join(".nsc"), "{\"name\":\"acme\"}");
        write(&op.join("accounts/SYS/SYS.jwt"), &self.sys_jwt());
        for a in &self.accounts {
            write(
                &op.join(format!("accounts/{0}/{0}.jwt", a.name)),
                &self.account_jwt(a),
            );
        }
        let mut keys = vec![&self.operator, &self.operator_signing, &self.sys];
        for a in &self.accounts {
            keys.push(&a.key);
            keys.extend(a.signing.as_ref());
        }
        for k in keys {
            let public = k.public_key();
            write(
                &dir.join(format!(
                    "keys/keys/{}/{}/{public}.nk",
                    &public[0..1],
                    &public[1..3]
                )),
                &k.seed().unwrap(),
            );
        }
    }

    /// The config `nsc generate config --mem-resolver` writes, with the listener (and a
    /// JetStream store) the operator adds.
    pub fn server_conf(&self, port: u16, store: &Path) -> String {
        let mut out = format!(
            "// Operator \"acme\"\noperator: {}\n\nsystem_account: {}\n\nresolver: MEMORY\n\nresolver_preload: {{\n",
            self.operator_jwt(),
            self.sys.public_key()
        );
        out.push_str(&format!(
            "\t// Account \"SYS\"\n\t{}: {}\n\n",
            self.sys.public_key(),
            self.sys_jwt()
        ));
        for a in &self.accounts {
            out.push_str(&format!(
                "\t// Account \"{}\"\n\t{}: {}\n\n",
                a.name,
                a.key.public_key(),
                self.account_jwt(a)
            ));
        }
        out.push_str(&format!(
            "}}\n\nhost: 127.0.0.1\nport: {port}\njetstream {{\n  store_dir: \"{}\"\n}}\n",
            store.display()
        ));
        out
    }

    /// A nats-server config on the `full` resolver, as a production broker runs: the operator,
    /// the system account preloaded, every other account's claims pushed over `$SYS` and kept
    /// in `resolver_dir` (deletes allowed).
    pub fn server_conf_full(&self, port: u16, store: &Path, resolver_dir: &Path) -> String {
        format!(
            "operator: {}\nsystem_account: {}\nresolver: {{\n  type: full\n  dir: \"{}\"\n  allow_delete: true\n}}\nresolver_preload: {{\n  {}: {}\n}}\nhost: 127.0.0.1\nport: {port}\njetstream {{\n  store_dir: \"{}\"\n}}\n",
            self.operator_jwt(),
            self.sys.public_key(),
            resolver_dir.display(),
            self.sys.public_key(),
            self.sys_jwt(),
            store.display()
        )
    }

    /// Creds of a user of the system account.
    pub fn sys_creds(&self) -> String {
        let sys = Account {
            name: "SYS".into(),
            key: KeyPair::from_seed(&self.sys.seed().unwrap()).unwrap(),
            signing: None,
            jetstream: false,
            extra: json!({}),
        };
        self.user_creds(&sys, "cotal")
    }

    /// Start nats-server on `conf`, as the operator runs it (no pidfile of cotal's).
    pub fn start(conf: &Path) -> Running {
        let server = std::env::var("COTAL_NATS_SERVER").unwrap_or_else(|_| "nats-server".into());
        let child = std::process::Command::new(server)
            .arg("-c")
            .arg(conf)
            .arg("-l")
            .arg(conf.with_extension("log"))
            .stdin(std::process::Stdio::null())
            .spawn()
            .unwrap();
        Running(child)
    }
}

/// A nats-server the test started; killed on drop unless it exited.
pub struct Running(pub std::process::Child);

impl Drop for Running {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// The seed file nsc keeps for `public` under `dir`.
pub fn key_file(dir: &Path, public: &str) -> PathBuf {
    dir.join(format!(
        "keys/keys/{}/{}/{public}.nk",
        &public[0..1],
        &public[1..3]
    ))
}
