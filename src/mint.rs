//! Minting trust material: the broker's operator and system account, space accounts, and users.
//!
//! This is an edge, not the pure core: it draws fresh keys (randomness) and reads the clock for
//! `iat`. Everything it signs is built by the pure [`crate::trust::jwt`] module.
//!
//! Invariants: seeds leave this module only inside records that are written 0600 or creds that
//! are handed to the caller; the system account never has JetStream; accounts are signed by the
//! operator's signing key where the root has one, never by its identity key.

use crate::clock::now;
use crate::diagnostic::Diagnostic;
use crate::model::{SpaceName, SpaceSpec};
use crate::space::permissions::SysRole;
use crate::store::account_record::{AccountKeys, AccountRecord};
use crate::store::broker_record::{BrokerRecord, OperatorKeys, SysAccount, SysKeys};
use crate::trust::jwt::{self, AccountLimits, Permissions};
use crate::trust::secret::Seed;
use nkeys::KeyPair;

/// A new broker: an operator with a signing key, and a system account whose JWT lists scoped
/// signing keys (control, observer, monitor, and evictor when `evictor`) when `multi_space`; a
/// single-space root keeps no system key at rest.
pub fn broker(multi_space: bool, evictor: bool) -> Result<BrokerRecord, String> {
    let iat = now();
    let operator = KeyPair::new_operator();
    let signing = KeyPair::new_operator();
    let sys = KeyPair::new_account();
    let mut operator_claims = jwt::operator_claims(&operator.public_key(), &sys.public_key(), iat);
    operator_claims.nats.signing_keys = vec![signing.public_key()];
    let operator_keys = OperatorKeys {
        seed: Seed::from(&operator),
        jwt: jwt::encode(&mut operator_claims, &operator)?,
        signing_seed: Some(Seed::from(&signing)),
    };
    let keys = multi_space.then(|| new_sys_keys(evictor));
    let sys_jwt = sys_account_jwt(
        &operator_keys,
        &sys.public_key(),
        keys.as_ref(),
        &jwt::Revocations::new(),
    )?;
    let monitor_account = keys
        .as_ref()
        .and_then(|k| k.monitor.as_ref())
        .map(|seed| {
            monitor_account(
                &operator_keys,
                &sys.public_key(),
                seed,
                &jwt::Revocations::new(),
                None,
            )
        })
        .transpose()?;
    Ok(BrokerRecord {
        operator: operator_keys,
        sys: SysAccount {
            public: sys.public_key(),
            jwt: sys_jwt,
            keys,
            monitor_account,
        },
        trust_gen: 0,
    })
}

/// The root's monitoring account ([`crate::space::side_accounts::monitor_claims`]): `existing`'s key
/// re-issued, or a fresh key (whose seed is never kept: its users are signed by the monitor
/// key), signed by the operator's account signer.
pub fn monitor_account(
    operator: &OperatorKeys,
    sys_pub: &str,
    monitor_seed: &Seed,
    revocations: &jwt::Revocations,
    existing: Option<&crate::store::account_record::SideAccount>,
) -> Result<crate::store::account_record::SideAccount, String> {
    let signer = operator.account_signer().key_pair()?;
    let public = match existing {
        Some(m) => m.public.clone(),
        None => KeyPair::new_account().public_key(),
    };
    let monitor_key = monitor_seed.key_pair()?.public_key();
    let mut claims = jwt::Claims {
        jti: String::new(),
        iat: now(),
        iss: String::new(),
        name: "monitor".into(),
        sub: public.clone(),
        exp: None,
        nats: crate::space::side_accounts::monitor_claims(sys_pub, &monitor_key, revocations),
    };
    let jwt = jwt::encode(&mut claims, &signer)?;
    Ok(crate::store::account_record::SideAccount { public, jwt })
}

/// Fresh system signing seeds.
pub fn new_sys_keys(evictor: bool) -> SysKeys {
    SysKeys {
        control: new_account_seed(),
        observer: new_account_seed(),
        evictor: evictor.then(new_account_seed),
        monitor: Some(new_account_seed()),
        previous_control: None,
    }
}

/// A fresh account-type seed (account identities and signing keys).
pub fn new_account_seed() -> Seed {
    Seed::from(&KeyPair::new_account())
}

/// The system account's JWT: no JetStream, each kept key scoped to its role's template, the
/// given revocations; signed by the operator's account signer.
pub fn sys_account_jwt(
    operator: &OperatorKeys,
    sys_pub: &str,
    keys: Option<&SysKeys>,
    revocations: &jwt::Revocations,
) -> Result<String, String> {
    let signer = operator.account_signer().key_pair()?;
    let mut claims = jwt::account_claims("SYS", sys_pub, "", AccountLimits::system(), now());
    claims.nats.signing_keys = Vec::new();
    claims.nats.exports = crate::space::side_accounts::system_exports();
    if let Some(keys) = keys {
        for role in SysRole::ALL.into_iter().filter(|r| r.in_system_account()) {
            if let Some(seed) = keys.get(role) {
                claims
                    .nats
                    .signing_keys
                    .push(jwt::SigningKey::Scoped(jwt::UserScope::new(
                        &seed.key_pair()?.public_key(),
                        role.name(),
                        role.template(),
                    )));
            }
        }
    }
    claims.nats.revocations = revocations.clone();
    jwt::encode(&mut claims, &signer)
}

/// A new account for a space, signed by the operator's account signer.
pub fn account(
    broker: &BrokerRecord,
    space: &SpaceName,
    spec: &SpaceSpec,
) -> Result<AccountRecord, String> {
    let operator = broker.operator.account_signer().key_pair()?;
    let account = KeyPair::new_account();
    let signing = KeyPair::new_account();
    let mut claims = jwt::account_claims(
        &space.token(),
        &account.public_key(),
        &signing.public_key(),
        AccountLimits::for_space(spec),
        now(),
    );
    claims.nats.exports = crate::space::side_accounts::space_exports(&space.token());
    let token = jwt::encode(&mut claims, &operator)?;
    Ok(AccountRecord {
        space: space.to_string(),
        account: AccountKeys {
            public: account.public_key(),
            seed: Seed::from(&account),
            jwt: token,
            signing_seed: Seed::from(&signing),
            signing_pub: signing.public_key(),
        },
        archived: None,
        keep_claims: Vec::new(),
        side_accounts: Default::default(),
    })
}

/// Re-issue a space's account JWT with the spec's limits and the given revocations: the same
/// account key, and the same signing key unless `rotate_signing` (then a new one, and the old
/// one's users are refused).
pub fn reissue(
    broker: &BrokerRecord,
    record: &AccountRecord,
    space: &SpaceName,
    spec: &SpaceSpec,
    revocations: &jwt::Revocations,
    rotate_signing: bool,
) -> Result<AccountRecord, String> {
    let operator = broker.operator.account_signer().key_pair()?;
    let mut out = record.clone();
    if rotate_signing {
        let signing = KeyPair::new_account();
        out.account.signing_pub = signing.public_key();
        out.account.signing_seed = Seed::from(&signing);
    }
    if !record.keep_claims.is_empty() {
        // An adopted account whose claims cotal does not model: only what cotal models changes.
        let want =
            serde_json::to_value(AccountLimits::for_space(spec)).map_err(|e| e.to_string())?;
        let (old_key, new_key) = (&record.account.signing_pub, &out.account.signing_pub);
        out.account.jwt = patched(broker, &record.account.jwt, |nats| {
            let limits = object(nats, "limits")?;
            for field in MODELED_LIMITS {
                limits.insert(field.into(), want[field].clone());
            }
            let kept = object(nats, "revocations")?;
            for (key, at) in revocations {
                let t = kept
                    .get(key)
                    .and_then(serde_json::Value::as_i64)
                    .unwrap_or(0)
                    .max(*at);
                kept.insert(key.clone(), t.into());
            }
            let keys = nats
                .entry("signing_keys")
                .or_insert_with(|| serde_json::Value::Array(Vec::new()))
                .as_array_mut()
                .ok_or("its signing_keys are not a list")?;
            if old_key != new_key {
                keys.retain(|k| k.as_str() != Some(old_key.as_str()));
            }
            if !keys.iter().any(|k| k.as_str() == Some(new_key.as_str())) {
                keys.push(new_key.as_str().into());
            }
            // The exports its side accounts import, beside the ones it kept.
            let exports = nats
                .entry("exports")
                .or_insert_with(|| serde_json::Value::Array(Vec::new()))
                .as_array_mut()
                .ok_or("its exports are not a list")?;
            for e in crate::space::side_accounts::space_exports(&space.token()) {
                let e = serde_json::to_value(e).map_err(|e| e.to_string())?;
                if !exports.contains(&e) {
                    exports.push(e);
                }
            }
            Ok(())
        })?;
        return Ok(out);
    }
    let mut claims = jwt::account_claims(
        &space.token(),
        &out.account.public,
        &out.account.signing_pub,
        AccountLimits::for_space(spec),
        now(),
    );
    claims.nats.revocations = revocations.clone();
    claims.nats.exports = crate::space::side_accounts::space_exports(&space.token());
    out.account.jwt = jwt::encode(&mut claims, &operator)?;
    Ok(out)
}

/// The record with its side accounts written: each of `write` minted (a fresh key, whose seed
/// is never kept: the operator signs the account, and its users are signed by the space's
/// signing key or the root's scoped system keys) or re-issued under its key with the claims
/// its role calls for ([`crate::space::side_accounts::claims`]), each of `drop` removed.
pub fn side_accounts(
    broker: &BrokerRecord,
    record: &AccountRecord,
    suspended: bool,
    write: &[crate::plan::sides::SideWrite],
    drop: &[crate::space::side_accounts::SideRole],
) -> Result<AccountRecord, String> {
    use crate::store::account_record::SideAccount;
    let operator = broker.operator.account_signer().key_pair()?;
    let space = SpaceName::parse(&record.space)?;
    let token = space.token();
    let key_of = |role: SysRole| -> Result<Option<String>, String> {
        broker
            .sys
            .keys
            .as_ref()
            .and_then(|k| k.get(role))
            .map(|seed| seed.key_pair().map(|k| k.public_key()))
            .transpose()
    };
    let (observer, evictor) = (key_of(SysRole::Observer)?, key_of(SysRole::Evictor)?);
    // The space's connection and payload limits, as its account JWT holds them (re-issued
    // before its side accounts are written).
    let space_claims: jwt::Claims<serde_json::Value> = jwt::decode_verified(&record.account.jwt)?;
    let limit = |field: &str| {
        space_claims.nats["limits"][field]
            .as_i64()
            .unwrap_or(jwt::UNLIMITED)
    };
    let ctx = crate::space::side_accounts::Space {
        token: &token,
        account: &record.account.public,
        signing_key: &record.account.signing_pub,
        system: &broker.sys.public,
        observer_key: observer.as_deref(),
        evictor_key: evictor.as_deref(),
        suspended,
        conn: limit("conn"),
        payload: limit("payload"),
    };
    let mut out = record.clone();
    for role in drop {
        out.side_accounts.remove(role);
    }
    for w in write {
        let public = match out.side_accounts.get(&w.role) {
            Some(side) => side.public.clone(),
            None => KeyPair::new_account().public_key(),
        };
        let mut claims = jwt::Claims {
            jti: String::new(),
            iat: now(),
            iss: String::new(),
            name: w.role.account_name(&token),
            sub: public.clone(),
            exp: None,
            nats: crate::space::side_accounts::claims(
                &w.role,
                &ctx,
                w.grant.as_ref(),
                &w.revocations,
            ),
        };
        let jwt = jwt::encode(&mut claims, &operator)?;
        out.side_accounts
            .insert(w.role.clone(), SideAccount { public, jwt });
    }
    Ok(out)
}

/// The limits cotal declares for a space (`[spaces.NAME.limits]` and its state); an adopted
/// account that keeps its claims keeps every other limit as it is.
const MODELED_LIMITS: [&str; 7] = [
    "conn",
    "leaf",
    "payload",
    "mem_storage",
    "disk_storage",
    "streams",
    "consumer",
];

/// `token` (an account JWT of `broker`'s operator) with `change` made to its `nats` object,
/// every other claim kept as it is, dated now and re-signed by the operator's account signer.
fn patched(
    broker: &BrokerRecord,
    token: &str,
    change: impl FnOnce(&mut serde_json::Map<String, serde_json::Value>) -> Result<(), String>,
) -> Result<String, String> {
    let operator = broker.operator.account_signer().key_pair()?;
    let mut claims: jwt::Claims<serde_json::Value> = jwt::decode_verified(token)?;
    claims.iat = now();
    change(
        claims
            .nats
            .as_object_mut()
            .ok_or("the account JWT holds no `nats` object")?,
    )?;
    jwt::encode(&mut claims, &operator)
}

/// The object at `field` of `map`, made when absent.
fn object<'a>(
    map: &'a mut serde_json::Map<String, serde_json::Value>,
    field: &str,
) -> Result<&'a mut serde_json::Map<String, serde_json::Value>, String> {
    map.entry(field)
        .or_insert_with(|| serde_json::Value::Object(Default::default()))
        .as_object_mut()
        .ok_or_else(|| format!("its {field} are not an object"))
}

/// The record of a space being removed, its account fenced: the same claims (signing keys,
/// limits, revocations) but no client and no leaf connection, and every user issued up to now
/// revoked (`*`), re-signed by the operator. JetStream stays enabled, so the broker can still
/// delete the account's streams through the system account. An archived space's mark is
/// cleared: the fence loads it so that the broker deletes its data (its account purge
/// removes the account's store folder, the streams an archive stopped included).
pub fn fence(broker: &BrokerRecord, record: &AccountRecord) -> Result<AccountRecord, String> {
    let t = now();
    // No connection, and every user issued up to now refused: the space's and each side's.
    let fenced = |token: &str| {
        patched(broker, token, |nats| {
            let limits = object(nats, "limits")?;
            limits.insert("conn".into(), 0.into());
            limits.insert("leaf".into(), 0.into());
            object(nats, "revocations")?.insert("*".into(), t.into());
            Ok(())
        })
    };
    let mut out = record.clone();
    out.account.jwt = fenced(&record.account.jwt)?;
    for side in out.side_accounts.values_mut() {
        side.jwt = fenced(&side.jwt)?;
    }
    out.archived = None;
    Ok(out)
}

/// The record of a space about to be archived, its account quiesced: the same claims and
/// revocations (its users stay valid for its return) but no client and no leaf connection and
/// JetStream off, so the broker stops its streams (their data stays on disk) before the
/// account leaves the config; re-signed by the operator. Its return re-issues the declared
/// limits.
pub fn quiesce(broker: &BrokerRecord, record: &AccountRecord) -> Result<AccountRecord, String> {
    let mut out = record.clone();
    out.account.jwt = patched(broker, &record.account.jwt, |nats| {
        let limits = object(nats, "limits")?;
        for field in ["conn", "leaf", "mem_storage", "disk_storage"] {
            limits.insert(field.into(), 0.into());
        }
        Ok(())
    })?;
    // Its side accounts refuse connections too, until its return re-issues them.
    for side in out.side_accounts.values_mut() {
        side.jwt = patched(broker, &side.jwt, |nats| {
            let limits = object(nats, "limits")?;
            limits.insert("conn".into(), 0.into());
            limits.insert("leaf".into(), 0.into());
            Ok(())
        })?;
    }
    // Loaded by the fence, whatever its record said (the archive step marks it again).
    out.archived = None;
    Ok(out)
}

/// An ephemeral user of the system account (in memory, short expiry): signed by the control
/// key (scoped: `permissions` are the template's), or on a root made before the scoped keys by
/// its unscoped `sys.seed` with `permissions`. Reads the broker record and the seed; the creds
/// returned are secret.
pub fn system_user(
    root: &crate::store::Root,
    name: &str,
    permissions: Permissions,
) -> crate::error::Result<String> {
    Ok(system_users(root, name, permissions)?.remove(0))
}

/// [`system_user`], then one of the previous control key when a change of the control key
/// has not been confirmed by a promotion yet (the broker may still run the JWT listing it).
/// Never empty.
pub fn system_users(
    root: &crate::store::Root,
    name: &str,
    permissions: Permissions,
) -> crate::error::Result<Vec<String>> {
    use crate::error::Error;
    use crate::store::broker_record;
    let record = record_for_system_users(root)?;
    let sys = &record.sys.public;
    let ephemeral = Some(crate::space::permissions::EPHEMERAL);
    let mint = |seed: &Seed, scoped: bool| -> crate::error::Result<String> {
        let creds = if scoped {
            scoped_user(sys, seed, name, ephemeral, None)
        } else {
            user(sys, seed, name, permissions.clone(), ephemeral, None)
        };
        creds.map(|c| c.creds).map_err(Error::other)
    };
    if let Some(keys) = &record.sys.keys {
        let mut out = vec![mint(&keys.control, true)?];
        if let Some(previous) = &keys.previous_control {
            out.push(mint(&previous.seed, previous.scoped)?);
        }
        return Ok(out);
    }
    let seed = broker_record::load_sys_seed(root)?.ok_or_else(|| {
        Error::refused(
            Diagnostic::new(format!(
                "this root keeps no system signing key (neither in {} nor in {}), so cotal cannot mint the system user it reloads and checks the running broker with.",
                root.broker_record().display(),
                root.sys_seed().display()
            ))
            .next("stop the broker (`cotal down`) and apply with it stopped; `cotal rotate sys` (broker stopped) gives a multi-space root new system keys"),
        )
    })?;
    Ok(vec![mint(&seed, false)?])
}

/// The broker record a system user is minted from; refused, naming the file, when it is
/// missing or corrupt.
pub fn record_for_system_users(
    root: &crate::store::Root,
) -> crate::error::Result<crate::store::broker_record::BrokerRecord> {
    use crate::store::broker_record;
    match broker_record::load(root)? {
        broker_record::Loaded::Valid((record, _)) => Ok(*record),
        _ => Err(crate::error::Error::refused(
            Diagnostic::new(format!(
                "{} is missing or corrupt, so no system user can be minted.",
                root.broker_record().display()
            ))
            .next("restore it from a backup"),
        )),
    }
}

/// A user of a scoped signing key of `account_pub` (no permission of its own), named `name`,
/// issued no earlier than `floor` ([`signed_user`]).
pub fn scoped_user(
    account_pub: &str,
    signing_seed: &Seed,
    name: &str,
    expires_in: Option<std::time::Duration>,
    floor: Option<i64>,
) -> Result<UserCreds, String> {
    signed_user(signing_seed, expires_in, floor, |user, iat, exp| {
        jwt::scoped_user_claims(name, user, account_pub, iat, exp)
    })
}

/// A fresh user key, its claims (from `claims(user_pub, iat, exp)`) signed by `signing_seed`,
/// and the creds file holding both. Its issue time is the clock's, or `floor` when the clock
/// is behind it (the account's `*` revocation, which refuses any JWT issued at or before it:
/// nats-server never compares an issue time with its own clock, so nothing waits for the
/// clock); its expiry counts from the clock.
fn signed_user(
    signing_seed: &Seed,
    expires_in: Option<std::time::Duration>,
    floor: Option<i64>,
    claims: impl FnOnce(&str, i64, Option<i64>) -> jwt::Claims<jwt::UserNats>,
) -> Result<UserCreds, String> {
    let signer = signing_seed.key_pair()?;
    let user = KeyPair::new_user();
    let clock = now();
    let iat = floor.map_or(clock, |f| f.max(clock));
    let exp = expires_in.map(|d| clock + d.as_secs().max(1) as i64);
    let mut claims = claims(&user.public_key(), iat, exp);
    // Signed by the account's own identity key (an adopted system account's seed): nats-server
    // looks `issuer_account` up among the account's signing keys, where its identity is not.
    if claims.nats.issuer_account == signer.public_key() {
        claims.nats.issuer_account.clear();
    }
    let token = jwt::encode(&mut claims, &signer)?;
    let seed = Seed::from(&user);
    Ok(UserCreds {
        creds: jwt::creds_file(&token, seed.expose()),
        key: user.public_key(),
        issued_at: iat,
        expires_at: exp,
    })
}

/// A minted user.
pub struct UserCreds {
    /// The creds file text (secret).
    pub creds: String,
    /// The user's public key.
    pub key: String,
    pub issued_at: i64,
    pub expires_at: Option<i64>,
}

/// The earliest issue time a user of the account whose JWT is `account_jwt` may carry: after
/// its `*` revocation, if it has one (see [`signed_user`]).
pub fn issue_floor(account_jwt: &str) -> Option<i64> {
    jwt::decode_verified::<jwt::AccountNats>(account_jwt)
        .ok()
        .and_then(|c| c.nats.revocations.get("*").map(|t| t + 1))
}

/// A user of an account, signed by the account's signing key, issued no earlier than `floor`
/// ([`signed_user`]).
pub fn user(
    account_pub: &str,
    signing_seed: &Seed,
    name: &str,
    permissions: Permissions,
    expires_in: Option<std::time::Duration>,
    floor: Option<i64>,
) -> Result<UserCreds, String> {
    signed_user(signing_seed, expires_in, floor, |user, iat, exp| {
        jwt::user_claims(name, user, account_pub, permissions, iat, exp)
    })
}
