//! Minting trust material: the broker's operator and system account, space accounts, and users.
//!
//! This is an edge, not the pure core: it draws fresh keys (randomness) and reads the clock for
//! `iat`. Everything it signs is built by the pure [`crate::jwt`] module.
//!
//! Invariants: seeds leave this module only inside records that are written 0600 or creds that
//! are handed to the caller; the system account never has JetStream.

use crate::clock::now;
use crate::jwt::{self, AccountLimits, Permissions};
use crate::model::{SpaceName, SpaceSpec};
use crate::secret::Seed;
use crate::store::account_record::{AccountKeys, AccountRecord};
use crate::store::broker_record::{BrokerRecord, OperatorKeys, SysAccount};
use nkeys::KeyPair;

/// A new broker: operator, system account with one signing key. Returns the record and the
/// system signing seed (retained only on multi-space roots).
pub fn broker() -> Result<(BrokerRecord, Seed), String> {
    let iat = now();
    let operator = KeyPair::new_operator();
    let sys = KeyPair::new_account();
    let sys_signing = KeyPair::new_account();
    let operator_jwt = jwt::encode(
        &mut jwt::operator_claims(&operator.public_key(), &sys.public_key(), iat),
        &operator,
    )?;
    let sys_jwt = jwt::encode(
        &mut jwt::account_claims(
            "SYS",
            &sys.public_key(),
            &sys_signing.public_key(),
            AccountLimits::system(),
            iat,
        ),
        &operator,
    )?;
    Ok((
        BrokerRecord {
            operator: OperatorKeys {
                seed: Seed::from(&operator),
                jwt: operator_jwt,
            },
            sys: SysAccount {
                public: sys.public_key(),
                jwt: sys_jwt,
            },
            trust_gen: 0,
        },
        Seed::from(&sys_signing),
    ))
}

/// A new account for a space, signed by the operator.
pub fn account(
    broker: &BrokerRecord,
    space: &SpaceName,
    spec: &SpaceSpec,
) -> Result<AccountRecord, String> {
    let operator = broker.operator.seed.key_pair()?;
    let account = KeyPair::new_account();
    let signing = KeyPair::new_account();
    let token = jwt::encode(
        &mut jwt::account_claims(
            &space.token(),
            &account.public_key(),
            &signing.public_key(),
            AccountLimits::for_space(spec),
            now(),
        ),
        &operator,
    )?;
    Ok(AccountRecord {
        space: space.to_string(),
        account: AccountKeys {
            public: account.public_key(),
            seed: Seed::from(&account),
            jwt: token,
            signing_seed: Seed::from(&signing),
            signing_pub: signing.public_key(),
        },
    })
}

/// Re-issue a space's account JWT with the spec's limits and the given revocations: same
/// account and signing keys.
pub fn reissue(
    broker: &BrokerRecord,
    record: &AccountRecord,
    space: &SpaceName,
    spec: &SpaceSpec,
    revocations: &jwt::Revocations,
) -> Result<AccountRecord, String> {
    let operator = broker.operator.seed.key_pair()?;
    let mut claims = jwt::account_claims(
        &space.token(),
        &record.account.public,
        &record.account.signing_pub,
        AccountLimits::for_space(spec),
        now(),
    );
    claims.nats.revocations = revocations.clone();
    let token = jwt::encode(&mut claims, &operator)?;
    let mut out = record.clone();
    out.account.jwt = token;
    Ok(out)
}

/// An ephemeral user of the system account (in memory, short expiry), signed by the retained
/// system signing seed. Reads the broker record and the seed; the creds returned are secret.
pub fn system_user(
    root: &crate::store::Root,
    name: &str,
    permissions: Permissions,
) -> crate::error::Result<String> {
    use crate::error::Error;
    use crate::store::broker_record;
    let sys_pub = match broker_record::load(root)? {
        broker_record::Loaded::Valid(record, _) => record.sys.public,
        _ => {
            return Err(Error::Refused(format!(
                "{} is missing or corrupt, so no system user can be minted.\nnext: restore it from a backup",
                root.broker_record().display()
            )));
        }
    };
    let seed = broker_record::load_sys_seed(root)?.ok_or_else(|| {
        Error::Refused(format!(
            "this root keeps no system signing seed ({}), so cotal cannot mint the system user it reloads and checks the running broker with.\n\
             next: restore the seed from a backup, or stop the broker (`cotal down`) and apply with it stopped",
            root.sys_seed().display()
        ))
    })?;
    Ok(user(
        &sys_pub,
        &seed,
        name,
        permissions,
        Some(crate::permissions::EPHEMERAL),
    )
    .map_err(Error::Other)?
    .creds)
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

/// A user of an account, signed by the account's signing key.
pub fn user(
    account_pub: &str,
    signing_seed: &Seed,
    name: &str,
    permissions: Permissions,
    expires_in: Option<std::time::Duration>,
) -> Result<UserCreds, String> {
    let signer = signing_seed.key_pair()?;
    let user = KeyPair::new_user();
    let iat = now();
    let exp = expires_in.map(|d| iat + d.as_secs().max(1) as i64);
    let token = jwt::encode(
        &mut jwt::user_claims(name, &user.public_key(), account_pub, permissions, iat, exp),
        &signer,
    )?;
    let seed = Seed::from(&user);
    Ok(UserCreds {
        creds: jwt::creds_file(&token, seed.expose()),
        key: user.public_key(),
        issued_at: iat,
        expires_at: exp,
    })
}
