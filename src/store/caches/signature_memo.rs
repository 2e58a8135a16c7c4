//! `.cotal/maintenance/signatures`: the memo of the JWTs whose ed25519 signature cotal has
//! verified, so a plan checks the signature of only the tokens that changed since the last
//! write (verifying thousands of account and `$SYS` credential JWTs was half of a plan's time).
//!
//! The file is a sorted run of 16-byte tags, one per token: the HMAC-SHA256 of the token's
//! exact bytes, keyed from the operator's identity seed (a key derived for this use alone). A tag
//! says "these bytes verified under this operator's root"; nothing else is cached.
//!
//! Invariants:
//! - only the signature arithmetic is skipped on a hit (the verification, and the decoding of
//!   the issuer's key it needs: these exact bytes verified under that issuer before): the token
//!   is still decoded and parsed whole, and every caller still checks who issued it (a record
//!   signed by another operator is refused with or without the memo), what it names and what
//!   it grants;
//! - a tag cannot be made without the operator seed, so a memo written by someone else, or
//!   copied from another root, vouches for nothing (it just misses);
//! - any change of a token's bytes (its claims, its issuer, its signature) changes its tag;
//! - the file is an optimisation, never a source of truth: anything wrong with it (absent,
//!   unreadable, a length that is not a whole number of tags, unsorted) counts as an empty memo;
//! - observation never writes it: it is saved after a write (an apply, `up`, `down`), with the
//!   tokens the observation that followed verified or found, so it never grows past the root's
//!   current tokens.

use crate::error::Result;
use crate::store::{Root, atomic};
use crate::trust::jwt;
use serde::de::DeserializeOwned;
use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};

/// One token's tag.
type Tag = [u8; TAG_LEN];
const TAG_LEN: usize = 16;
/// What the memo key is derived for (a key used for nothing else).
const KEY_LABEL: &[u8] = b"cotal verified-signature memo v1";

/// The memo loaded for one observation, and the tokens it saw.
pub struct SignatureMemo {
    key: Option<ring::hmac::Key>,
    /// Sorted tags of the tokens verified before.
    known: Vec<Tag>,
    /// The tags of the tokens this observation verified or found known.
    seen: Mutex<Vec<Tag>>,
    /// How many signature checks the memo spared (for the tests that prove it was used).
    hits: AtomicUsize,
}

impl SignatureMemo {
    /// A memo that vouches for nothing and records nothing (no operator: nothing to key it).
    pub fn none() -> Self {
        SignatureMemo {
            key: None,
            known: Vec::new(),
            seen: Mutex::new(Vec::new()),
            hits: AtomicUsize::new(0),
        }
    }

    /// The memo keyed from `operator_seed`, vouching for the `known` tags (pure).
    fn keyed(operator_seed: &str, known: Vec<Tag>) -> Self {
        let root_key = ring::hmac::Key::new(ring::hmac::HMAC_SHA256, operator_seed.as_bytes());
        let derived = ring::hmac::sign(&root_key, KEY_LABEL);
        SignatureMemo {
            key: Some(ring::hmac::Key::new(
                ring::hmac::HMAC_SHA256,
                derived.as_ref(),
            )),
            known,
            seen: Mutex::new(Vec::new()),
            hits: AtomicUsize::new(0),
        }
    }

    /// The root's memo for the operator of `operator_seed`; empty when its file is absent or
    /// not a memo.
    pub fn load(root: &Root, operator_seed: &str) -> Self {
        let known = match atomic::read_optional(&path(root)) {
            Ok(Some(bytes)) => parse(&bytes).unwrap_or_default(),
            _ => Vec::new(),
        };
        Self::keyed(operator_seed, known)
    }

    /// [`jwt::decode_verified`], skipping the signature arithmetic for a token verified before
    /// (the caller checks the issuer, as it would without the memo).
    pub fn decode_verified<T: DeserializeOwned>(
        &self,
        token: &str,
    ) -> Result<jwt::Claims<T>, String> {
        let Some(key) = &self.key else {
            return jwt::decode_verified(token);
        };
        let tag = tag_of(key, token);
        let vouched = self.known.binary_search(&tag).is_ok();
        let claims = jwt::decode_checked(token, vouched)?;
        if vouched {
            self.hits.fetch_add(1, Ordering::Relaxed);
        }
        self.seen.lock().expect("the memo's lock").push(tag);
        Ok(claims)
    }

    /// How many signature checks this memo spared.
    pub fn hits(&self) -> usize {
        self.hits.load(Ordering::Relaxed)
    }

    /// Replace the root's memo with the tokens this observation verified or found known
    /// (0600, atomic); nothing when it has no key, or when the file already says exactly that.
    pub fn save(&self, root: &Root) -> Result<()> {
        if self.key.is_none() {
            return Ok(());
        }
        let mut seen = self.seen.lock().expect("the memo's lock").clone();
        seen.sort_unstable();
        seen.dedup();
        if seen == self.known {
            return Ok(());
        }
        atomic::ensure_dir(&root.maintenance_dir(), atomic::PRIVATE_DIR)?;
        atomic::write(&path(root), &seen.concat(), atomic::SECRET)
    }
}

/// A token's tag: the first 16 bytes of its HMAC under the memo key (pure).
fn tag_of(key: &ring::hmac::Key, token: &str) -> Tag {
    let full = ring::hmac::sign(key, token.as_bytes());
    let mut tag = [0u8; TAG_LEN];
    tag.copy_from_slice(&full.as_ref()[..TAG_LEN]);
    tag
}

pub fn path(root: &Root) -> std::path::PathBuf {
    root.maintenance_dir().join("signatures")
}

/// The tags of a memo file: `None` unless it is a whole number of tags in strictly ascending
/// order (pure).
fn parse(bytes: &[u8]) -> Option<Vec<Tag>> {
    if !bytes.len().is_multiple_of(TAG_LEN) {
        return None;
    }
    let tags: Vec<Tag> = bytes
        .chunks_exact(TAG_LEN)
        .map(|c| c.try_into().expect("a whole tag"))
        .collect();
    tags.windows(2).all(|w| w[0] < w[1]).then_some(tags)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn token(signer: &nkeys::KeyPair, name: &str) -> String {
        let account = nkeys::KeyPair::new_account();
        let mut claims = jwt::account_claims(
            name,
            &account.public_key(),
            &account.public_key(),
            jwt::AccountLimits::for_space(&crate::model::SpaceSpec::default()),
            1,
        );
        jwt::encode(&mut claims, signer).unwrap()
    }

    fn seed() -> String {
        nkeys::KeyPair::new_operator().seed().unwrap()
    }

    /// A memo that has seen `tokens` once, saved, then loaded again (as the next plan would).
    fn remembered(root: &Root, seed: &str, tokens: &[&str]) -> SignatureMemo {
        let first = SignatureMemo::load(root, seed);
        for t in tokens {
            first.decode_verified::<jwt::AccountNats>(t).unwrap();
        }
        assert_eq!(first.hits(), 0, "nothing is known the first time");
        first.save(root).unwrap();
        SignatureMemo::load(root, seed)
    }

    #[test]
    fn a_token_verified_before_is_vouched_for_and_any_other_byte_string_is_checked() {
        let dir = tempfile::tempdir().unwrap();
        let root = Root::at(dir.path()).unwrap();
        let operator = nkeys::KeyPair::new_operator();
        let seed = seed();
        let good = token(&operator, "a");
        let memo = remembered(&root, &seed, &[&good]);
        memo.decode_verified::<jwt::AccountNats>(&good).unwrap();
        assert_eq!(memo.hits(), 1, "the memo was used");
        // The same claims with the first signature character changed: another tag, so the
        // signature is checked, and refused.
        let (head, sig) = good.rsplit_once('.').unwrap();
        let flipped = if sig.starts_with('A') { "B" } else { "A" };
        let tampered = format!("{head}.{flipped}{}", &sig[1..]);
        let err = memo
            .decode_verified::<jwt::AccountNats>(&tampered)
            .unwrap_err();
        assert!(err.contains("does not verify"), "{err}");
        assert_eq!(memo.hits(), 1, "the tampered token was not vouched for");
    }

    #[test]
    fn a_memo_keyed_by_another_operator_or_not_a_memo_vouches_for_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let root = Root::at(dir.path()).unwrap();
        let operator = nkeys::KeyPair::new_operator();
        let good = token(&operator, "a");
        remembered(&root, &seed(), &[&good]);
        // Another root's operator: its tags are not this one's.
        let other = SignatureMemo::load(&root, &seed());
        other.decode_verified::<jwt::AccountNats>(&good).unwrap();
        assert_eq!(other.hits(), 0);
        for bytes in [
            &b"short"[..],
            &[0xffu8; 16].repeat(2)[..],
            &[1u8; 16].repeat(2)[..],
        ] {
            assert!(parse(bytes).is_none(), "{bytes:?} is not a memo");
        }
        std::fs::write(path(&root), b"not a whole tag").unwrap();
        let memo = SignatureMemo::load(&root, &seed());
        assert!(memo.known.is_empty());
    }

    #[test]
    fn saving_keeps_only_what_was_seen_and_writes_nothing_when_that_is_unchanged() {
        let dir = tempfile::tempdir().unwrap();
        let root = Root::at(dir.path()).unwrap();
        let operator = nkeys::KeyPair::new_operator();
        let seed = seed();
        let (a, b) = (token(&operator, "a"), token(&operator, "b"));
        let memo = remembered(&root, &seed, &[&a, &b]);
        assert_eq!(memo.known.len(), 2);
        // Seeing both again: the same memo, not written.
        for t in [&a, &b] {
            memo.decode_verified::<jwt::AccountNats>(t).unwrap();
        }
        let stamp = std::fs::metadata(path(&root)).unwrap().modified().unwrap();
        memo.save(&root).unwrap();
        assert_eq!(
            std::fs::metadata(path(&root)).unwrap().modified().unwrap(),
            stamp
        );
        // Only `a` seen (b's record removed): the memo forgets b.
        let next = SignatureMemo::load(&root, &seed);
        next.decode_verified::<jwt::AccountNats>(&a).unwrap();
        next.save(&root).unwrap();
        assert_eq!(SignatureMemo::load(&root, &seed).known.len(), 1);
        let mode = std::os::unix::fs::PermissionsExt::mode(
            &std::fs::metadata(path(&root)).unwrap().permissions(),
        );
        assert_eq!(mode & 0o777, 0o600);
    }
}
