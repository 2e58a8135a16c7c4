//! An operator managed with nsc, adopted as a cotal root: what its store holds and what adopting
//! it keeps, as values. Pure: [`import`] is a function of the store as read by
//! `ops::adopt_nsc` ([`Store`]: the operator's and accounts' JWTs and the seeds of its key
//! store) and of what the operator asked for ([`Request`]).
//!
//! nsc keeps `stores/<operator>/<operator>.jwt`, `stores/<operator>/accounts/<name>/<name>.jwt`,
//! and every seed in `keys/keys/<first character>/<second and third characters>/<public
//! key>.nk` (nsc's `cmd/store/keys.go`, `GetKeyPath`).
//!
//! Invariants: every key is kept (the operator's identity and signing keys, each account's
//! identity key and signing key, the system account's identity key), so every client's creds keep
//! connecting; a JWT is used only when its signature verifies and, for an account, when the
//! operator signed it; an account carrying what cotal does not model (its JWT would lose it at
//! cotal's first re-issue) is refused, naming what it uses, unless the operator keeps its claims
//! ([`Request::keep_claims`]), and then the claims are recorded so that every re-issue patches
//! only what cotal models; the only JWT adoption itself changes is an account's without a
//! signing key whose seed the store holds: a new signing key is added to it (every other claim
//! kept) and the first apply serves it.

use crate::diagnostic::Diagnostic;
use crate::model::SpaceName;
use crate::trust::jwt::{self, AccountLimits, OperatorNats};
use crate::trust::secret::Seed;
use serde_json::Value;
use std::collections::BTreeMap;
use std::path::PathBuf;

/// The store as read: the operator's JWT, its accounts' JWTs by nsc name, and the seeds found
/// for the keys those JWTs name.
#[derive(Debug, Clone)]
pub struct Store {
    /// nsc's data folder (holding `stores/` and `keys/`), for messages.
    pub dir: PathBuf,
    /// The operator's name (its folder under `stores/`).
    pub operator: String,
    pub operator_jwt: String,
    pub accounts: BTreeMap<String, String>,
    /// Seeds by public key (each one checked to be that key's by the reader).
    pub seeds: BTreeMap<String, Seed>,
    /// Public keys whose seed file holds the seed of another key.
    pub wrong_seeds: std::collections::BTreeSet<String>,
}

impl Store {
    /// Where nsc keeps the seed of `public`.
    pub fn key_path(&self, public: &str) -> PathBuf {
        key_path(&self.dir, public)
    }
}

/// Where nsc keeps the seed of `public` under its data folder `dir`.
pub fn key_path(dir: &std::path::Path, public: &str) -> PathBuf {
    let kind = public.get(0..1).unwrap_or("_");
    let shard = public.get(1..3).unwrap_or("__");
    dir.join("keys")
        .join("keys")
        .join(kind)
        .join(shard)
        .join(format!("{public}.nk"))
}

/// What the operator asked for.
#[derive(Debug, Clone, Default)]
pub struct Request {
    /// The accounts to adopt (`--account NAME[=SPACE]`), with the space each becomes (its nsc
    /// name when not given); empty: every account but the system account.
    pub accounts: Vec<(String, Option<String>)>,
    /// Keep the claims cotal does not model as they are (`--keep-claims`).
    pub keep_claims: bool,
}

/// One account adopted as a space.
#[derive(Debug, Clone)]
pub struct Imported {
    pub nsc_name: String,
    pub account_pub: String,
    pub account_seed: Seed,
    /// Its JWT as adopted: nsc's, or nsc's with a new signing key added.
    pub jwt: String,
    pub signing_seed: Seed,
    pub signing_pub: String,
    /// The signing key is new (the store held none cotal can sign with).
    pub added_signing_key: bool,
    pub limits: AccountLimits,
    /// The claims cotal does not model, kept as they are (`--keep-claims`).
    pub kept_claims: Vec<String>,
}

/// The adoption of the store.
#[derive(Debug, Clone)]
pub struct Import {
    pub operator: String,
    pub operator_pub: String,
    pub operator_seed: Seed,
    pub operator_jwt: String,
    /// The operator signing key cotal signs accounts with (the first the JWT lists whose seed
    /// the store holds); `None`: the identity key signs.
    pub operator_signing: Option<Seed>,
    pub sys_name: String,
    pub sys_pub: String,
    pub sys_jwt: String,
    /// The system account's identity seed: cotal's first apply reaches the broker with it
    /// (as a root's legacy `sys.seed`) and replaces it by scoped keys.
    pub sys_seed: Seed,
    pub spaces: BTreeMap<SpaceName, Imported>,
    /// Accounts of the store not adopted (not named by `--account`).
    pub not_adopted: Vec<String>,
    /// What is not carried, for people.
    pub notes: Vec<String>,
}

const NOTHING_CHANGED: &str = "none, nothing was written.";

/// A refusal of the adoption: nothing was written.
fn refuse(what: String, next: &str) -> Diagnostic {
    Diagnostic::refusal(what, NOTHING_CHANGED, next)
}

/// The seed of key `public` (`what` names it) from nsc's key store.
fn seed_of(store: &Store, public: &str, what: &str) -> Result<Seed, Diagnostic> {
    if store.wrong_seeds.contains(public) {
        return Err(refuse(
            format!(
                "the seed file of {what} ({public}), {}, holds the seed of another key",
                store.key_path(public).display()
            ),
            "restore nsc's key store from a backup",
        ));
    }
    store.seeds.get(public).cloned().ok_or_else(|| {
        refuse(
            format!(
                "the seed of {what} ({public}) is not in nsc's key store: {} is missing",
                store.key_path(public).display()
            ),
            "adopt on the machine that holds the store's keys (nsc's `keys/` folder, or NKEYS_PATH), or import the key into it (`nsc import keys`)",
        )
    })
}

/// The store's operator, verified: its claims, key and seed, the signing key cotal signs
/// accounts with (when the store holds one's seed) and its system account's key.
struct Operator {
    claims: jwt::Claims<OperatorNats>,
    public: String,
    seed: Seed,
    signing: Option<Seed>,
    sys_pub: String,
}

impl Operator {
    /// Whether `iss` may sign this operator's accounts: the operator or one of its signing keys.
    fn signs_accounts(&self, iss: &str) -> bool {
        iss == self.public || self.claims.nats.signing_keys.iter().any(|k| k == iss)
    }
}

/// The operator of `store`: its JWT verified and self-signed, its seed held, a signing key's
/// seed held when it requires one, a system account named.
fn operator(store: &Store) -> Result<Operator, Diagnostic> {
    let op: jwt::Claims<OperatorNats> = jwt::decode_verified(&store.operator_jwt).map_err(|e| {
        refuse(
            format!(
                "the operator JWT of {:?} does not verify: {e}",
                store.operator
            ),
            "check the store with `nsc describe operator`",
        )
    })?;
    if op.iss != op.sub || !op.sub.starts_with('O') {
        return Err(refuse(
            format!(
                "the operator JWT of {:?} is not self-signed by an operator key",
                store.operator
            ),
            "check the store with `nsc describe operator`",
        ));
    }
    let public = op.sub.clone();
    let seed = seed_of(store, &public, &format!("operator {:?}", store.operator))?;
    let signing = op
        .nats
        .signing_keys
        .iter()
        .find_map(|k| store.seeds.get(k).cloned());
    if op.nats.strict_signing_key_usage && signing.is_none() {
        return Err(refuse(
            format!(
                "operator {:?} requires its signing keys to sign accounts (strict signing key usage), and the store holds the seed of none",
                store.operator
            ),
            "import an operator signing key into nsc's key store (`nsc import keys`), then adopt",
        ));
    }
    let sys_pub = op.nats.system_account.clone().ok_or_else(|| {
        refuse(
            format!("operator {:?} names no system account", store.operator),
            "give it one (`nsc edit operator --system-account SYS`), then adopt",
        )
    })?;
    Ok(Operator {
        claims: op,
        public,
        seed,
        signing,
        sys_pub,
    })
}

/// Each account's JWT, its signature checked and its signer this operator's; what is wrong
/// with one refuses only an adoption that uses it.
fn decoded_accounts<'s>(
    store: &'s Store,
    op: &Operator,
) -> BTreeMap<&'s str, Result<jwt::Claims<Value>, String>> {
    store
        .accounts
        .iter()
        .map(|(name, token)| {
            let claims = jwt::decode_verified::<Value>(token)
                .map_err(|e| format!("the JWT of account {name:?} does not verify: {e}"))
                .and_then(|c| {
                    if op.signs_accounts(&c.iss) {
                        Ok(c)
                    } else {
                        Err(format!(
                            "account {name:?} is signed by {}, which is neither operator {:?} nor one of its signing keys",
                            c.iss, store.operator
                        ))
                    }
                });
            (name.as_str(), claims)
        })
        .collect()
}

/// The accounts `req` asks for among `names` (every one when it names none), each with its
/// space name.
fn wanted_accounts(
    store: &Store,
    req: &Request,
    names: &[&str],
    sys_name: &str,
) -> Result<Vec<(String, String)>, Diagnostic> {
    let mut wanted: Vec<(String, String)> = Vec::new();
    if req.accounts.is_empty() {
        wanted.extend(names.iter().map(|n| (n.to_string(), n.to_string())));
        return Ok(wanted);
    }
    for (name, space) in &req.accounts {
        if *name == sys_name {
            return Err(refuse(
                format!("{name:?} is the system account; it is the broker's, never a space"),
                "name the accounts to adopt as spaces",
            ));
        }
        if !names.contains(&name.as_str()) {
            return Err(refuse(
                format!(
                    "operator {:?} has no account {name:?} (it has: {})",
                    store.operator,
                    names
                        .iter()
                        .map(|n| format!("{n:?}"))
                        .collect::<Vec<_>>()
                        .join(", ")
                ),
                "name an account of the store (`nsc list accounts`)",
            ));
        }
        if wanted.iter().any(|(w, _)| w == name) {
            return Err(refuse(
                format!("account {name:?} is named twice by --account"),
                "name each account once: an account is one space",
            ));
        }
        wanted.push((name.clone(), space.clone().unwrap_or_else(|| name.clone())));
    }
    Ok(wanted)
}

/// Account `name` (its verified `claims`) adopted: `Ok(Err(why))` when it uses claims cotal does not
/// model and `keep_claims` is off (refused with the others, all named at once).
fn import_account(
    store: &Store,
    op: &Operator,
    name: String,
    claims: jwt::Claims<Value>,
    keep_claims: bool,
    new_signing_seed: &mut impl FnMut() -> Seed,
    now: i64,
) -> Result<Result<Imported, String>, Diagnostic> {
    let account_pub = claims.sub.clone();
    let account_seed = seed_of(store, &account_pub, &format!("account {name:?}"))?;
    let mut uses = unmodeled(&claims.nats);
    // Its signing key: the first plain one whose seed the store holds.
    let keys = signing_keys(&claims.nats);
    let usable = keys.iter().find_map(|(k, scoped)| {
        (!scoped)
            .then(|| store.seeds.get(k).map(|s| (k.clone(), s.clone())))
            .flatten()
    });
    let others = keys
        .iter()
        .filter(|(k, _)| usable.as_ref().is_none_or(|(u, _)| u != k))
        .count();
    if others > 0 {
        uses.push(format!(
            "{others} signing key(s) besides the one cotal signs with (their users would be refused once cotal re-issues the account)"
        ));
    }
    if imports_from(&claims.nats, &op.sys_pub) {
        return Err(refuse(
            format!(
                "account {name:?} imports from the system account, whose exports cotal does not carry (it re-issues the system account with its scoped keys)"
            ),
            "remove the import (`nsc delete import`), or adopt without this account (--account)",
        ));
    }
    if let Some(why) = never_kept(&claims.nats) {
        return Err(refuse(
            format!("account {name:?} has {why}"),
            "change it in nsc (`nsc edit account`), or adopt without this account (--account)",
        ));
    }
    if !uses.is_empty() && !keep_claims {
        return Ok(Err(format!("account {name:?} uses {}", uses.join("; "))));
    }
    let limits: AccountLimits = serde_json::from_value(
        claims.nats.get("limits").cloned().unwrap_or(Value::Null),
    )
    .map_err(|e| {
        refuse(
            format!("the limits of account {name:?} do not read as limits: {e}"),
            "check them with `nsc describe account`",
        )
    })?;
    let (signing_pub, signing_seed, jwt, added) = match usable {
        Some((k, s)) => (k, s, store.accounts[&name].clone(), false),
        None => {
            let seed = new_signing_seed();
            let public = seed
                .key_pair()
                .map_err(|e| refuse(format!("a new signing key: {e}"), "adopt again"))?
                .public_key();
            let signer = op.signing.as_ref().unwrap_or(&op.seed);
            let token = add_signing_key(&claims, &public, signer, now).map_err(|e| {
                refuse(
                    format!("account {name:?}: its JWT with a new signing key: {e}"),
                    "adopt again",
                )
            })?;
            (public, seed, token, true)
        }
    };
    Ok(Ok(Imported {
        nsc_name: name,
        account_pub,
        account_seed,
        jwt,
        signing_seed,
        signing_pub,
        added_signing_key: added,
        limits,
        kept_claims: uses,
    }))
}

/// Adopt `store` as `req` asks; `new_signing_seed` mints the signing key of an account that has
/// none cotal can sign with, `now` dates the JWT that adds it.
pub fn import(
    store: &Store,
    req: &Request,
    mut new_signing_seed: impl FnMut() -> Seed,
    now: i64,
) -> Result<Import, Diagnostic> {
    let op = operator(store)?;
    let decoded = decoded_accounts(store, &op);
    let Some((sys_name, sys_claims)) = decoded.iter().find_map(|(name, c)| {
        c.as_ref()
            .ok()
            .filter(|c| c.sub == op.sys_pub)
            .map(|c| (name.to_string(), c))
    }) else {
        return Err(refuse(
            format!(
                "operator {:?} names system account {}, which is not among the store's accounts whose JWT verifies",
                store.operator, op.sys_pub
            ),
            "add the system account to the store (or repair its JWT), then adopt",
        ));
    };
    let sys_seed = seed_of(store, &op.sys_pub, &format!("system account {sys_name:?}"))?;
    let mut notes = Vec::new();
    let sys_exports = array_len(&sys_claims.nats, "exports");
    if sys_exports > 0 {
        notes.push(format!(
            "the system account's {sys_exports} export(s) are not carried: cotal's first apply re-issues it with its scoped keys"
        ));
    }

    // The accounts asked for, each with its space name.
    let names: Vec<&str> = decoded.keys().copied().filter(|n| *n != sys_name).collect();
    let wanted = wanted_accounts(store, req, &names, &sys_name)?;
    let not_adopted = names
        .iter()
        .filter(|n| !wanted.iter().any(|(w, _)| w == *n))
        .map(|n| n.to_string())
        .collect();

    let mut spaces = BTreeMap::new();
    let mut refused = Vec::new();
    for (name, space) in wanted {
        let space_name = SpaceName::parse(&space).map_err(|e| {
            refuse(
                format!("account {name:?} cannot be space {space:?}: {e}"),
                "give it a space name: --account NAME=SPACE",
            )
        })?;
        let claims = decoded[name.as_str()].clone().map_err(|e| {
            refuse(
                e,
                "repair it in nsc (`nsc describe account`), or adopt without it (--account for each one to adopt)",
            )
        })?;
        if spaces.contains_key(&space_name) {
            return Err(refuse(
                format!("two accounts would both be space {}", space_name.quoted()),
                "give each its own space name: --account NAME=SPACE",
            ));
        }
        match import_account(
            store,
            &op,
            name,
            claims,
            req.keep_claims,
            &mut new_signing_seed,
            now,
        )? {
            Ok(imported) => {
                spaces.insert(space_name, imported);
            }
            Err(why) => refused.push(why),
        }
    }
    if !refused.is_empty() {
        return Err(Diagnostic::refusal(
            format!(
                "{} account(s) use what cotal does not model; cotal re-issues an account's JWT from what it models (its limits, one signing key, its revocations of cotal's users), so a change of theirs would drop it:\n  {}",
                refused.len(),
                refused.join("\n  ")
            ),
            NOTHING_CHANGED,
            "pass --keep-claims to keep those claims as they are (cotal then changes only what you declare, and every plan says so), or leave those accounts out (--account NAME for each one to adopt)",
        ));
    }
    if spaces.is_empty() {
        return Err(refuse(
            format!(
                "operator {:?} has no account to adopt as a space",
                store.operator
            ),
            "add an account (`nsc add account`), or name one (--account)",
        ));
    }
    Ok(Import {
        operator: store.operator.clone(),
        operator_pub: op.public,
        operator_seed: op.seed,
        operator_jwt: store.operator_jwt.clone(),
        operator_signing: op.signing,
        sys_jwt: store.accounts[&sys_name].clone(),
        sys_name,
        sys_pub: op.sys_pub,
        sys_seed,
        spaces,
        not_adopted,
        notes,
    })
}

/// The claims of an account's `nats` object cotal does not model, in words (empty: none).
/// Tags, a description and an info URL are not counted: they only describe, and losing them at
/// a re-issue changes nothing a client sees.
pub fn unmodeled(nats: &Value) -> Vec<String> {
    let mut out = Vec::new();
    for field in ["exports", "imports"] {
        let n = array_len(nats, field);
        if n > 0 {
            out.push(format!("{field} ({n})"));
        }
    }
    if nats
        .get("mappings")
        .and_then(Value::as_object)
        .is_some_and(|m| !m.is_empty())
    {
        out.push("subject mappings".into());
    }
    if nats
        .get("authorization")
        .and_then(Value::as_object)
        .is_some_and(|a| a.values().any(|v| !is_empty(v)))
    {
        out.push("an authorization callout".into());
    }
    if nats
        .get("default_permissions")
        .is_some_and(|p| !is_empty(p))
    {
        out.push("default permissions".into());
    }
    if nats
        .get("revocations")
        .and_then(Value::as_object)
        .is_some_and(|r| !r.is_empty())
    {
        out.push("revocations of its users".into());
    }
    if nats.get("trace").is_some_and(|t| !is_empty(t)) {
        out.push("message tracing".into());
    }
    let limits = nats.get("limits").cloned().unwrap_or(Value::Null);
    let unlimited =
        |field: &str, zero_is_unlimited: bool| match limits.get(field).and_then(Value::as_i64) {
            None | Some(-1) => true,
            Some(0) => zero_is_unlimited,
            Some(_) => false,
        };
    let fixed: Vec<&str> = [
        ("subs", false),
        ("data", false),
        ("imports", false),
        ("exports", false),
        ("max_ack_pending", true),
        ("mem_max_stream_bytes", true),
        ("disk_max_stream_bytes", true),
    ]
    .into_iter()
    .filter(|(f, zero)| !unlimited(f, *zero))
    .map(|(f, _)| f)
    .chain((limits.get("wildcards").and_then(Value::as_bool) == Some(false)).then_some("wildcards"))
    .chain(
        (limits.get("max_bytes_required").and_then(Value::as_bool) == Some(true))
            .then_some("max_bytes_required"),
    )
    .collect();
    if !fixed.is_empty() {
        out.push(format!(
            "limits cotal does not declare ({})",
            fixed.join(", ")
        ));
    }
    if signing_keys(nats).iter().any(|(_, scoped)| *scoped) {
        out.push("scoped signing keys (their templates)".into());
    }
    out
}

/// What an account may not carry even with `--keep-claims`, in words: a leaf connection limit
/// (cotal sets leaf connections with the space's state) and tiered JetStream limits (cotal's
/// quota is an untiered limit, and a JWT holding both is refused by nats-server).
fn never_kept(nats: &Value) -> Option<String> {
    let limits = nats.get("limits")?;
    if limits.get("tiered_limits").is_some_and(|t| !is_empty(t)) {
        return Some("tiered JetStream limits: cotal's quotas are untiered, and nats-server refuses a JWT holding both".into());
    }
    match (
        limits.get("leaf").and_then(Value::as_i64),
        limits.get("conn").and_then(Value::as_i64),
    ) {
        (None | Some(-1), _) | (Some(0), Some(0)) => None,
        (Some(n), _) => Some(format!(
            "a leaf connection limit of {n}: cotal sets leaf connections with the space's state (unlimited, or none while suspended)"
        )),
    }
}

/// Whether an account imports from `account`.
fn imports_from(nats: &Value, account: &str) -> bool {
    nats.get("imports")
        .and_then(Value::as_array)
        .is_some_and(|i| {
            i.iter()
                .any(|imp| imp.get("account").and_then(Value::as_str) == Some(account))
        })
}

/// The signing keys an account JWT lists: each key and whether it is scoped.
fn signing_keys(nats: &Value) -> Vec<(String, bool)> {
    nats.get("signing_keys")
        .and_then(Value::as_array)
        .map(|keys| {
            keys.iter()
                .filter_map(|k| match k {
                    Value::String(s) => Some((s.clone(), false)),
                    Value::Object(o) => o
                        .get("key")
                        .and_then(Value::as_str)
                        .map(|s| (s.to_string(), true)),
                    _ => None,
                })
                .collect()
        })
        .unwrap_or_default()
}

fn array_len(v: &Value, field: &str) -> usize {
    v.get(field).and_then(Value::as_array).map_or(0, Vec::len)
}

fn is_empty(v: &Value) -> bool {
    match v {
        Value::Null => true,
        Value::Bool(b) => !b,
        Value::String(s) => s.is_empty(),
        Value::Array(a) => a.is_empty(),
        Value::Object(o) => o.values().all(is_empty),
        Value::Number(_) => false,
    }
}

/// The account's JWT with `signing_pub` added to its signing keys, every other claim kept,
/// signed by `signer` (an operator key).
fn add_signing_key(
    claims: &jwt::Claims<Value>,
    signing_pub: &str,
    signer: &Seed,
    now: i64,
) -> Result<String, String> {
    let mut next = claims.clone();
    next.iat = now;
    let nats = next
        .nats
        .as_object_mut()
        .ok_or("its claims hold no `nats` object")?;
    let keys = nats
        .entry("signing_keys")
        .or_insert_with(|| Value::Array(Vec::new()));
    keys.as_array_mut()
        .ok_or("its signing_keys are not a list")?
        .push(Value::String(signing_pub.into()));
    jwt::encode(&mut next, &signer.key_pair()?)
}

/// What adopting the store does, in words.
pub fn describe(i: &Import) -> String {
    use std::fmt::Write as _;
    let mut out = String::from("Found (nsc):\n");
    let _ = writeln!(
        out,
        "  operator {:?} ({}), {}",
        i.operator,
        i.operator_pub,
        if i.operator_signing.is_some() {
            "accounts signed with its signing key"
        } else {
            "no signing key with a seed in the store: its identity key signs accounts"
        }
    );
    let _ = writeln!(out, "  system account {:?} ({})", i.sys_name, i.sys_pub);
    for (space, s) in &i.spaces {
        let _ = writeln!(
            out,
            "  account {:?} ({}) -> space {}{}",
            s.nsc_name,
            s.account_pub,
            space.quoted(),
            if s.limits.jetstream_enabled() {
                ""
            } else {
                " (JetStream off: cotal's first apply turns it on)"
            }
        );
        if s.added_signing_key {
            let _ = writeln!(
                out,
                "    no signing key with a seed in the store: a new one is added to its JWT ({})",
                s.signing_pub
            );
        } else {
            let _ = writeln!(out, "    signing key {} kept", s.signing_pub);
        }
        if !s.kept_claims.is_empty() {
            let _ = writeln!(
                out,
                "    keeps claims cotal does not model (--keep-claims): {}",
                s.kept_claims.join("; ")
            );
        }
    }
    for n in &i.not_adopted {
        let _ = writeln!(out, "  account {n:?}: not adopted (not named by --account)");
    }
    for n in &i.notes {
        let _ = writeln!(out, "  {n}");
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn nsc_keeps_a_seed_under_its_kind_and_two_characters_of_its_key() {
        assert_eq!(
            key_path(std::path::Path::new("/nsc"), "OABCDEF"),
            PathBuf::from("/nsc/keys/keys/O/AB/OABCDEF.nk")
        );
    }

    #[test]
    fn what_cotal_does_not_model_is_named_and_defaults_are_not() {
        let plain = json!({"limits": {"subs": -1, "data": -1, "payload": -1, "imports": -1,
            "exports": -1, "wildcards": true, "conn": -1, "leaf": -1}, "signing_keys": ["AK"],
            "type": "account", "version": 2, "tags": ["team"], "description": "d"});
        assert!(unmodeled(&plain).is_empty(), "{:?}", unmodeled(&plain));
        let busy = json!({"limits": {"subs": 100, "tiered_limits": {"R1": {"disk_storage": 1}}},
            "exports": [{"subject": "a"}], "imports": [{"subject": "b", "account": "AX"}],
            "mappings": {"a": [{"subject": "b"}]}, "revocations": {"U": 1},
            "signing_keys": [{"kind": "user_scope", "key": "AS", "role": "r", "template": {}}],
            "default_permissions": {"pub": {"allow": ["x"]}, "sub": {}}});
        let uses = unmodeled(&busy).join("; ");
        for want in [
            "exports (1)",
            "imports (1)",
            "subject mappings",
            "default permissions",
            "revocations",
            "limits cotal does not declare (subs)",
            "scoped signing keys",
        ] {
            assert!(uses.contains(want), "{want}: {uses}");
        }
        assert!(imports_from(&busy, "AX") && !imports_from(&busy, "ASYS"));
        // Never kept, even with --keep-claims: tiered limits and a leaf limit.
        assert!(
            never_kept(&busy)
                .unwrap()
                .contains("tiered JetStream limits")
        );
        assert!(never_kept(&plain).is_none());
        let leaf = json!({"limits": {"conn": -1, "leaf": 5}});
        assert!(
            never_kept(&leaf)
                .unwrap()
                .contains("leaf connection limit of 5")
        );
        let suspended = json!({"limits": {"conn": 0, "leaf": 0}});
        assert!(never_kept(&suspended).is_none());
    }
}
