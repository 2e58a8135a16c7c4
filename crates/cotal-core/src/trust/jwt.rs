//! NATS JWTs (operator, account, user) and creds files: typed claims, signing and verification.
//!
//! Pure: the caller passes the signing key pair and the issue time, so the same inputs give the
//! same token (ed25519 signatures are deterministic).
//!
//! Why not a crate: `nats-jwt` 0.3 cannot mint operator JWTs or enable JetStream on an account,
//! and `nats-jwt-rs` 0.1 stamps `iat` from the wall clock inside `encode` (no injectable clock, so
//! no reproducible tokens), and models account limits as optional flattened structs, which makes
//! the invariant below unenforceable by type.
//!
//! Invariant: [`AccountLimits`] has no optional field. nats-server decodes an omitted limit as 0,
//! and `conn: 0` refuses every connection, so every limit is always written.

use crate::model::{SpaceSpec, SpaceState};
use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use nkeys::KeyPair;
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use sha2::Digest as _;

/// -1: no limit.
pub const UNLIMITED: i64 = -1;

const HEADER: &str = r#"{"typ":"JWT","alg":"ed25519-nkey"}"#;
/// [`HEADER`] in base64url, as it opens every token cotal signs.
const HEADER_B64: &str = "eyJ0eXAiOiJKV1QiLCJhbGciOiJlZDI1NTE5LW5rZXkifQ";

/// The registered claims plus the NATS-specific payload `nats`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Claims<T> {
    #[serde(default)]
    pub jti: String,
    pub iat: i64,
    pub iss: String,
    #[serde(default)]
    pub name: String,
    pub sub: String,
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub exp: Option<i64>,
    pub nats: T,
}

/// Operator payload.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct OperatorNats {
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub system_account: Option<String>,
    /// Keys that may sign accounts on the operator's behalf (so the identity key signs only
    /// this JWT).
    #[serde(skip_serializing_if = "Vec::is_empty", default)]
    pub signing_keys: Vec<String>,
    /// Only the signing keys may sign accounts (nsc's `--require-signing-keys`).
    #[serde(skip_serializing_if = "std::ops::Not::not", default)]
    pub strict_signing_key_usage: bool,
    #[serde(rename = "type")]
    pub kind: String,
    pub version: u32,
}

/// Every account limit nats-server reads, all explicit.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct AccountLimits {
    #[serde(default)]
    pub subs: i64,
    #[serde(default)]
    pub data: i64,
    #[serde(default)]
    pub payload: i64,
    #[serde(default)]
    pub imports: i64,
    #[serde(default)]
    pub exports: i64,
    #[serde(default)]
    pub wildcards: bool,
    #[serde(default)]
    pub conn: i64,
    #[serde(default)]
    pub leaf: i64,
    #[serde(default)]
    pub mem_storage: i64,
    #[serde(default)]
    pub disk_storage: i64,
    #[serde(default)]
    pub streams: i64,
    #[serde(default)]
    pub consumer: i64,
    #[serde(default)]
    pub max_ack_pending: i64,
    #[serde(default)]
    pub mem_max_stream_bytes: i64,
    #[serde(default)]
    pub disk_max_stream_bytes: i64,
    #[serde(default)]
    pub max_bytes_required: bool,
}

fn or_unlimited(v: Option<u64>) -> i64 {
    v.map(|n| i64::try_from(n).unwrap_or(i64::MAX))
        .unwrap_or(UNLIMITED)
}

impl AccountLimits {
    /// The account's JetStream storage quota in bytes; `None` when unlimited (or off).
    pub fn storage_quota(&self) -> Option<u64> {
        u64::try_from(self.disk_storage).ok().filter(|q| *q > 0)
    }

    /// The limits of a space's account: its `[limits]`, JetStream on, and `conn`/`leaf` 0 when
    /// suspended (the account key and everything else unchanged).
    pub fn for_space(spec: &SpaceSpec) -> Self {
        let l = &spec.limits;
        let suspended = spec.state == SpaceState::Suspended;
        AccountLimits {
            subs: UNLIMITED,
            data: UNLIMITED,
            payload: or_unlimited(l.max_payload.map(|b| b.0)),
            imports: UNLIMITED,
            exports: UNLIMITED,
            wildcards: true,
            conn: if suspended {
                0
            } else {
                or_unlimited(l.max_connections)
            },
            leaf: if suspended { 0 } else { UNLIMITED },
            mem_storage: or_unlimited(l.max_memory.map(|b| b.0)),
            disk_storage: or_unlimited(l.max_storage.map(|b| b.0)),
            streams: or_unlimited(l.max_streams),
            consumer: or_unlimited(l.max_consumers),
            max_ack_pending: UNLIMITED,
            mem_max_stream_bytes: 0,
            disk_max_stream_bytes: 0,
            max_bytes_required: false,
        }
    }

    /// What cotal models of these limits (`[spaces.NAME.limits]` and the state): every other
    /// limit as [`AccountLimits::for_space`] sets it. An adopted account that keeps its claims
    /// is compared with its declaration through this, so what cotal does not model never
    /// reads as a change.
    pub fn modeled(self) -> Self {
        let cotal = Self::for_space(&SpaceSpec::default());
        AccountLimits {
            conn: self.conn,
            leaf: self.leaf,
            payload: self.payload,
            mem_storage: self.mem_storage,
            disk_storage: self.disk_storage,
            streams: self.streams,
            consumer: self.consumer,
            ..cotal
        }
    }

    /// The system account: no JetStream, nothing else limited.
    pub fn system() -> Self {
        AccountLimits {
            mem_storage: 0,
            disk_storage: 0,
            streams: 0,
            consumer: 0,
            max_ack_pending: 0,
            ..Self::for_space(&SpaceSpec::default())
        }
    }

    /// Whether these limits suspend the account: no client and no leaf connection (the one
    /// definition of a suspended space).
    pub fn is_suspended(&self) -> bool {
        self.conn == 0 && self.leaf == 0
    }

    pub fn jetstream_enabled(&self) -> bool {
        self.mem_storage != 0 || self.disk_storage != 0
    }
}

/// Publish or subscribe permission lists.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct Permission {
    #[serde(skip_serializing_if = "Vec::is_empty", default)]
    pub allow: Vec<String>,
    #[serde(skip_serializing_if = "Vec::is_empty", default)]
    pub deny: Vec<String>,
}

#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct Permissions {
    #[serde(rename = "pub", default)]
    pub publish: Permission,
    #[serde(rename = "sub", default)]
    pub subscribe: Permission,
    /// May publish once to the reply subject of a request it received (`None`: not granted
    /// beyond `pub`).
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub resp: Option<ResponsePermission>,
}

/// Account payload.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AccountNats {
    pub limits: AccountLimits,
    #[serde(skip_serializing_if = "Vec::is_empty", default)]
    pub signing_keys: Vec<SigningKey>,
    #[serde(default)]
    pub default_permissions: Permissions,
    /// Revoked users: a user key (or `*`, every user) and the time up to which JWTs issued to
    /// it are refused (nats-server refuses a user whose `iat` is at or before it).
    #[serde(skip_serializing_if = "Revocations::is_empty", default)]
    pub revocations: Revocations,
    /// What other accounts may import from this one (a space's account: what its side
    /// accounts import, [`crate::space::side_accounts`]).
    #[serde(skip_serializing_if = "Vec::is_empty", default)]
    pub exports: Vec<Export>,
    /// What this account imports from others (a side account: exactly what its principal may
    /// do in the space).
    #[serde(skip_serializing_if = "Vec::is_empty", default)]
    pub imports: Vec<Import>,
    /// Subjects the account's publishes are moved to before anything matches them (a member
    /// account: its posts, [`crate::space::side_accounts::POST_PREFIX`]).
    #[serde(skip_serializing_if = "std::collections::BTreeMap::is_empty", default)]
    pub mappings: std::collections::BTreeMap<String, Vec<Mapping>>,
    #[serde(rename = "type")]
    pub kind: String,
    pub version: u32,
}

/// One destination of an account's subject mapping.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Mapping {
    pub subject: String,
    /// Out of 100: the share of messages moved there (cotal maps all of them).
    #[serde(default)]
    pub weight: u8,
}

impl Mapping {
    /// All of a subject's messages, to `subject`.
    pub fn to(subject: &str) -> Self {
        Mapping {
            subject: subject.into(),
            weight: 100,
        }
    }
}

/// Whether an export or import carries messages (`stream`) or requests and their answers
/// (`service`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Exchange {
    Stream,
    Service,
}

/// How many answers a service export gives one request: one (nats-server's default), or any
/// number (a pull's batch, a direct get's batch, a `PING` every server answers).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub enum ResponseType {
    Singleton,
    Stream,
}

/// A subject an account offers other accounts. Public (no token, no account position): only
/// the accounts whose JWT imports it, which cotal alone signs, use it.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub struct Export {
    #[serde(default)]
    pub name: String,
    pub subject: String,
    #[serde(rename = "type")]
    pub kind: Exchange,
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub response_type: Option<ResponseType>,
}

impl Export {
    /// A service export answered once per request.
    pub fn service(name: &str, subject: &str) -> Self {
        Export {
            name: name.into(),
            subject: subject.into(),
            kind: Exchange::Service,
            response_type: None,
        }
    }

    /// A service export whose requests may get any number of answers.
    pub fn streamed_service(name: &str, subject: &str) -> Self {
        Export {
            response_type: Some(ResponseType::Stream),
            ..Self::service(name, subject)
        }
    }

    /// A stream export.
    pub fn stream(name: &str, subject: &str) -> Self {
        Export {
            name: name.into(),
            subject: subject.into(),
            kind: Exchange::Stream,
            response_type: None,
        }
    }
}

/// A subject an account takes from another's export: `subject` as the exporter names it,
/// `local_subject` what the importer's clients use when it differs.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub struct Import {
    #[serde(default)]
    pub name: String,
    pub subject: String,
    pub account: String,
    #[serde(rename = "type")]
    pub kind: Exchange,
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub local_subject: Option<String>,
}

impl Import {
    /// A service import of `subject` from `account`: a request sent on it is answered into
    /// the importing account (nats-server rewrites its reply subject).
    pub fn service(name: &str, account: &str, subject: &str) -> Self {
        Import {
            name: name.into(),
            subject: subject.into(),
            account: account.into(),
            kind: Exchange::Service,
            local_subject: None,
        }
    }

    /// A stream import of `subject` from `account`: the messages published on it there.
    pub fn stream(name: &str, account: &str, subject: &str) -> Self {
        Import {
            kind: Exchange::Stream,
            ..Self::service(name, account, subject)
        }
    }

    /// The same import, under another subject in the importing account.
    pub fn as_local(mut self, local: &str) -> Self {
        self.local_subject = Some(local.into());
        self
    }
}

/// A signing key of an account: plain (its users carry their own permissions) or scoped (its
/// users carry none; the template applies to each, `{{name()}}` standing for the user's name).
/// Written untagged (a string or a scope's object); read by the kind of value found, without
/// the buffering an untagged enum's derived reader does (every record read reads these). What
/// that reader accepted is accepted: a scope may also be written as an array of its fields.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(untagged)]
pub enum SigningKey {
    Plain(String),
    Scoped(UserScope),
}

impl<'de> Deserialize<'de> for SigningKey {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct Either;
        impl<'de> serde::de::Visitor<'de> for Either {
            type Value = SigningKey;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("a signing key: a public key, or a user scope")
            }
            fn visit_str<E: serde::de::Error>(self, key: &str) -> Result<SigningKey, E> {
                Ok(SigningKey::Plain(key.to_string()))
            }
            fn visit_string<E: serde::de::Error>(self, key: String) -> Result<SigningKey, E> {
                Ok(SigningKey::Plain(key))
            }
            fn visit_map<A: serde::de::MapAccess<'de>>(
                self,
                map: A,
            ) -> Result<SigningKey, A::Error> {
                UserScope::deserialize(serde::de::value::MapAccessDeserializer::new(map))
                    .map(SigningKey::Scoped)
            }
            fn visit_seq<A: serde::de::SeqAccess<'de>>(
                self,
                seq: A,
            ) -> Result<SigningKey, A::Error> {
                UserScope::deserialize(serde::de::value::SeqAccessDeserializer::new(seq))
                    .map(SigningKey::Scoped)
            }
        }
        deserializer.deserialize_any(Either)
    }
}

impl SigningKey {
    pub fn key(&self) -> &str {
        match self {
            SigningKey::Plain(k) => k,
            SigningKey::Scoped(s) => &s.key,
        }
    }
}

/// A scoped signing key: `{"kind":"user_scope","key":…,"role":…,"template":{…}}`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct UserScope {
    pub kind: String,
    pub key: String,
    pub role: String,
    pub template: UserTemplate,
}

impl UserScope {
    pub fn new(key: &str, role: &str, permissions: Permissions) -> Self {
        UserScope {
            kind: "user_scope".into(),
            key: key.into(),
            role: role.into(),
            template: UserTemplate {
                publish: permissions.publish,
                subscribe: permissions.subscribe,
                resp: permissions.resp,
                subs: UNLIMITED,
                data: UNLIMITED,
                payload: UNLIMITED,
            },
        }
    }
}

/// What every user of a scoped key may do.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct UserTemplate {
    #[serde(rename = "pub", default)]
    pub publish: Permission,
    #[serde(rename = "sub", default)]
    pub subscribe: Permission,
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub resp: Option<ResponsePermission>,
    pub subs: i64,
    pub data: i64,
    pub payload: i64,
}

/// Revoked user keys and the time (unix seconds) up to which their JWTs are refused.
pub type Revocations = std::collections::BTreeMap<String, i64>;

/// Request-reply permission of a user: may publish to the reply subject of requests it got.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ResponsePermission {
    pub max: i64,
    pub ttl: i64,
}

/// User payload. A user of a scoped key carries no permission and no limit of its own (the
/// limits are `None` and not written).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct UserNats {
    #[serde(rename = "pub", default)]
    pub publish: Permission,
    #[serde(rename = "sub", default)]
    pub subscribe: Permission,
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub resp: Option<ResponsePermission>,
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub subs: Option<i64>,
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub data: Option<i64>,
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub payload: Option<i64>,
    /// The account a signing key signed for; empty (not written) when the account's own
    /// identity key signs, which nats-server accepts only without it.
    #[serde(skip_serializing_if = "String::is_empty", default)]
    pub issuer_account: String,
    #[serde(rename = "type")]
    pub kind: String,
    pub version: u32,
}

/// Sign claims with `signer`: sets `iss` and `jti`, returns the compact token.
pub fn encode<T: Serialize>(claims: &mut Claims<T>, signer: &KeyPair) -> Result<String, String> {
    claims.iss = signer.public_key();
    claims.jti = String::new();
    let unsigned = serde_json::to_vec(claims).map_err(|e| e.to_string())?;
    let digest = sha2::Sha512_256::digest(&unsigned);
    claims.jti = data_encoding::BASE32_NOPAD.encode(&digest);
    let body = serde_json::to_vec(claims).map_err(|e| e.to_string())?;
    let signing_input = format!(
        "{}.{}",
        URL_SAFE_NO_PAD.encode(HEADER),
        URL_SAFE_NO_PAD.encode(body)
    );
    let signature = signer
        .sign(signing_input.as_bytes())
        .map_err(|e| format!("signing failed: {e}"))?;
    Ok(format!(
        "{signing_input}.{}",
        URL_SAFE_NO_PAD.encode(signature)
    ))
}

/// Decode a token and verify its signature against its own `iss`. The caller checks that
/// `iss` is the key it trusts.
pub fn decode_verified<T: DeserializeOwned>(token: &str) -> Result<Claims<T>, String> {
    decode_checked(token, false)
}

/// [`decode_verified`], with the ed25519 arithmetic skipped when `signature_vouched`: the
/// caller knows these exact bytes verified before (see `cotal::store::caches::signature_memo`).
/// Everything else is checked either way: the three parts, the algorithm, the claims and the
/// signature being base64url. The issuer being a public nkey is checked with the signature:
/// a vouched token verified under its issuer before, so its issuer was one.
pub fn decode_checked<T: DeserializeOwned>(
    token: &str,
    signature_vouched: bool,
) -> Result<Claims<T>, String> {
    let mut parts = token.split('.');
    let (Some(header), Some(body), Some(signature), None) =
        (parts.next(), parts.next(), parts.next(), parts.next())
    else {
        return Err("not a JWT (expected three dot-separated parts)".into());
    };
    // The header every token cotal mints carries is known without decoding it.
    if header != HEADER_B64 {
        let header_json = URL_SAFE_NO_PAD
            .decode(header)
            .map_err(|_| "JWT header is not base64url".to_string())?;
        let header_value: serde_json::Value = serde_json::from_slice(&header_json)
            .map_err(|_| "JWT header is not JSON".to_string())?;
        if header_value.get("alg").and_then(|v| v.as_str()) != Some("ed25519-nkey") {
            return Err("JWT algorithm is not ed25519-nkey".into());
        }
    }
    let body_json = URL_SAFE_NO_PAD
        .decode(body)
        .map_err(|_| "JWT claims are not base64url".to_string())?;
    let claims: Claims<T> =
        // Never the claims' values: a token may come from a file a pull request brings.
        serde_json::from_slice(&body_json).map_err(|e| {
            format!(
                "JWT claims do not parse (at column {}: a field of the wrong type, or missing)",
                e.column()
            )
        })?;
    let sig = URL_SAFE_NO_PAD
        .decode(signature)
        .map_err(|_| "JWT signature is not base64url".to_string())?;
    // A vouched token is byte for byte one whose signature verified under its issuer, so its
    // issuer is a public nkey: the point decompression of `from_public_key` (a square root in
    // the field, most of what is left of a vouched decode) is skipped with the signature.
    if !signature_vouched {
        let issuer = KeyPair::from_public_key(&claims.iss)
            .map_err(|_| "JWT issuer is not a public nkey".to_string())?;
        let signed_len = header.len() + 1 + body.len();
        issuer
            .verify(&token.as_bytes()[..signed_len], &sig)
            .map_err(|_| "JWT signature does not verify".to_string())?;
    }
    Ok(claims)
}

/// Unsigned operator claims naming its system account.
pub fn operator_claims(operator_pub: &str, system_account: &str, iat: i64) -> Claims<OperatorNats> {
    Claims {
        jti: String::new(),
        iat,
        iss: String::new(),
        name: "cotal".into(),
        sub: operator_pub.into(),
        exp: None,
        nats: OperatorNats {
            system_account: Some(system_account.into()),
            signing_keys: Vec::new(),
            strict_signing_key_usage: false,
            kind: "operator".into(),
            version: 2,
        },
    }
}

/// Unsigned account claims.
pub fn account_claims(
    name: &str,
    account_pub: &str,
    signing_pub: &str,
    limits: AccountLimits,
    iat: i64,
) -> Claims<AccountNats> {
    Claims {
        jti: String::new(),
        iat,
        iss: String::new(),
        name: name.into(),
        sub: account_pub.into(),
        exp: None,
        nats: AccountNats {
            limits,
            signing_keys: vec![SigningKey::Plain(signing_pub.into())],
            default_permissions: Permissions::default(),
            revocations: Revocations::new(),
            exports: Vec::new(),
            imports: Vec::new(),
            mappings: Default::default(),
            kind: "account".into(),
            version: 2,
        },
    }
}

/// Unsigned user claims with the given permissions.
pub fn user_claims(
    name: &str,
    user_pub: &str,
    issuer_account: &str,
    permissions: Permissions,
    iat: i64,
    exp: Option<i64>,
) -> Claims<UserNats> {
    Claims {
        jti: String::new(),
        iat,
        iss: String::new(),
        name: name.into(),
        sub: user_pub.into(),
        exp,
        nats: UserNats {
            publish: permissions.publish,
            subscribe: permissions.subscribe,
            resp: permissions.resp,
            subs: Some(UNLIMITED),
            data: Some(UNLIMITED),
            payload: Some(UNLIMITED),
            issuer_account: issuer_account.into(),
            kind: "user".into(),
            version: 2,
        },
    }
}

/// Unsigned claims of a user of a scoped signing key: no permission and no limit of its own.
pub fn scoped_user_claims(
    name: &str,
    user_pub: &str,
    issuer_account: &str,
    iat: i64,
    exp: Option<i64>,
) -> Claims<UserNats> {
    let mut claims = user_claims(
        name,
        user_pub,
        issuer_account,
        Permissions::default(),
        iat,
        exp,
    );
    claims.nats.subs = None;
    claims.nats.data = None;
    claims.nats.payload = None;
    claims
}

/// The user JWT of a creds file (the first armoured block).
pub fn creds_jwt(creds: &str) -> Option<&str> {
    let start =
        creds.find("-----BEGIN NATS USER JWT-----")? + "-----BEGIN NATS USER JWT-----".len();
    let end = start + creds[start..].find("------END NATS USER JWT------")?;
    Some(creds[start..end].trim())
}

/// The standard NATS creds file holding a user JWT and its seed. The result is secret.
pub fn creds_file(user_jwt: &str, user_seed: &str) -> String {
    format!(
        "-----BEGIN NATS USER JWT-----\n{user_jwt}\n------END NATS USER JWT------\n\n\
************************* IMPORTANT *************************\n\
NKEY Seed printed below can be used to sign and prove identity.\n\
NKEYs are sensitive and should be treated as secrets.\n\n\
-----BEGIN USER NKEY SEED-----\n{user_seed}\n------END USER NKEY SEED------\n\n\
*************************************************************\n"
    )
}

/// A token shortened for display: the start of its claims segment (which begins with the unique
/// `jti`), never the whole token.
pub fn shorten(token: &str) -> String {
    match token.split('.').nth(1) {
        Some(body) if body.len() > 20 => format!("{}…", &body[..20]),
        _ => "…".into(),
    }
}

/// The public half of the broker record.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct BrokerTrust {
    pub operator_pub: String,
    /// The operator's signing keys, as its JWT lists them.
    pub operator_signing: Vec<String>,
    pub operator_jwt: String,
    pub sys_pub: String,
    pub sys_jwt: String,
    /// The monitoring account (`cotal creds --system monitor` mints its users), when the root
    /// has one: its key and JWT, preloaded beside the system account.
    pub monitor: Option<(String, String)>,
}

impl BrokerTrust {
    /// Whether `key` may sign accounts of this broker: the operator or one of its signing keys.
    pub fn signs_accounts(&self, key: &str) -> bool {
        key == self.operator_pub || self.operator_signing.iter().any(|k| k == key)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{ByteSize, Limits};

    #[test]
    fn account_tokens_round_trip_and_verify() {
        let operator = KeyPair::new_operator();
        let account = KeyPair::new_account();
        let signing = KeyPair::new_account();
        let limits = AccountLimits::for_space(&SpaceSpec::default());
        let mut claims = account_claims(
            "design",
            &account.public_key(),
            &signing.public_key(),
            limits,
            1_700_000_000,
        );
        let token = encode(&mut claims, &operator).unwrap();
        let back: Claims<AccountNats> = decode_verified(&token).unwrap();
        assert_eq!(back.iss, operator.public_key());
        assert_eq!(back.sub, account.public_key());
        assert_eq!(back.nats.limits, limits);
        assert_eq!(
            back.nats.signing_keys,
            vec![SigningKey::Plain(signing.public_key())]
        );
        assert_eq!(back, claims);
        // Same inputs, same token.
        let again = encode(
            &mut account_claims(
                "design",
                &account.public_key(),
                &signing.public_key(),
                limits,
                1_700_000_000,
            ),
            &operator,
        )
        .unwrap();
        assert_eq!(again, token);
    }

    #[test]
    fn tampered_tokens_do_not_verify() {
        let operator = KeyPair::new_operator();
        let mut claims = operator_claims(&operator.public_key(), "ASYS", 1);
        let token = encode(&mut claims, &operator).unwrap();
        let mut parts: Vec<&str> = token.split('.').collect();
        let other = encode(
            &mut operator_claims(&operator.public_key(), "AOTHER", 1),
            &operator,
        )
        .unwrap();
        let other_body = other.split('.').nth(1).unwrap().to_string();
        parts[1] = &other_body;
        let forged = parts.join(".");
        assert!(
            decode_verified::<OperatorNats>(&forged)
                .unwrap_err()
                .contains("does not verify")
        );
        assert!(decode_verified::<OperatorNats>("a.b").is_err());
        assert!(decode_verified::<OperatorNats>("not a token").is_err());
    }

    #[test]
    fn the_known_header_is_taken_as_read_and_any_other_is_still_checked() {
        assert_eq!(URL_SAFE_NO_PAD.encode(HEADER), HEADER_B64);
        let operator = KeyPair::new_operator();
        let token = encode(
            &mut operator_claims(&operator.public_key(), "ASYS", 1),
            &operator,
        )
        .unwrap();
        assert!(token.starts_with(&format!("{HEADER_B64}.")));
        let rest = &token[HEADER_B64.len()..];
        // The same header written another way is decoded and accepted (and the signature,
        // which covers the header as written, no longer verifies)...
        let spaced = URL_SAFE_NO_PAD.encode(r#"{"alg":"ed25519-nkey","typ":"JWT"}"#);
        let reordered = format!("{spaced}{rest}");
        assert!(decode_checked::<OperatorNats>(&reordered, true).is_ok());
        assert!(
            decode_checked::<OperatorNats>(&reordered, false)
                .unwrap_err()
                .contains("does not verify")
        );
        // ...and another algorithm, or a header that is not base64url or JSON, is refused.
        for (header, why) in [
            (
                URL_SAFE_NO_PAD.encode(r#"{"typ":"JWT","alg":"HS256"}"#),
                "algorithm",
            ),
            ("e30!".to_string(), "not base64url"),
            (URL_SAFE_NO_PAD.encode("{"), "not JSON"),
        ] {
            let err = decode_checked::<OperatorNats>(&format!("{header}{rest}"), true).unwrap_err();
            assert!(err.contains(why), "{err}");
        }
    }

    #[test]
    fn signing_keys_are_read_as_a_key_or_a_scope_and_nothing_else() {
        let scope = UserScope::new("AKEY", "member", Permissions::default());
        let keys = vec![
            SigningKey::Plain("APLAIN".into()),
            SigningKey::Scoped(scope),
        ];
        let text = serde_json::to_string(&keys).unwrap();
        assert!(
            text.starts_with(r#"["APLAIN",{"kind":"user_scope","key":"AKEY""#),
            "{text}"
        );
        let back: Vec<SigningKey> = serde_json::from_str(&text).unwrap();
        assert_eq!(back, keys);
        // A scope written as an array of its fields, as the untagged reader accepted.
        let scope = serde_json::to_value(&keys[1]).unwrap();
        let fields: Vec<&serde_json::Value> = ["kind", "key", "role", "template"]
            .iter()
            .map(|f| &scope[f])
            .collect();
        let as_array = serde_json::to_string(&[fields]).unwrap();
        let back: Vec<SigningKey> = serde_json::from_str(&as_array).unwrap();
        assert_eq!(back[0], keys[1]);
        for wrong in [
            "[1]",
            "[true]",
            "[null]",
            "[[\"AKEY\"]]",
            r#"[{"key":"AKEY"}]"#,
        ] {
            assert!(
                serde_json::from_str::<Vec<SigningKey>>(wrong).is_err(),
                "{wrong}"
            );
        }
    }

    #[test]
    fn every_limit_is_written_and_suspension_zeroes_connections() {
        let spec = SpaceSpec {
            state: SpaceState::Suspended,
            protect: false,
            limits: Limits {
                max_connections: Some(5),
                max_storage: Some(ByteSize(1024)),
                ..Limits::default()
            },
        };
        let limits = AccountLimits::for_space(&spec);
        assert_eq!(
            (limits.conn, limits.leaf, limits.disk_storage),
            (0, 0, 1024)
        );
        assert!(limits.jetstream_enabled());
        let json = serde_json::to_value(limits).unwrap();
        for field in [
            "subs",
            "data",
            "payload",
            "imports",
            "exports",
            "conn",
            "leaf",
            "mem_storage",
            "disk_storage",
            "streams",
            "consumer",
        ] {
            assert!(json.get(field).is_some(), "{field} must be explicit");
        }
        let active = AccountLimits::for_space(&SpaceSpec {
            state: SpaceState::Active,
            ..spec
        });
        assert_eq!((active.conn, active.leaf), (5, UNLIMITED));
        assert!(!AccountLimits::system().jetstream_enabled());
    }

    #[test]
    fn shortened_tokens_hide_the_signature() {
        let operator = KeyPair::new_operator();
        let token = encode(
            &mut operator_claims(&operator.public_key(), "A", 1),
            &operator,
        )
        .unwrap();
        let short = shorten(&token);
        assert!(short.ends_with('…'));
        assert!(short.len() < 30);
        assert!(!short.contains(token.rsplit('.').next().unwrap()));
    }
}
