//! The state's signature: what lets `cotal plan --state` in a pull request's CI trust a
//! `state.json` it did not make. The root holds a state key (`.cotal/auth/state.seed`, an
//! ed25519 nkey of the module type, public key `M…`; see `cotal::store::state_key`), used for
//! nothing else: not the operator's identity, so a leaked state key signs no account. Every
//! state cotal writes carries `signature = {key, sig}`; `plan --state` checks it against a
//! public key given outside the pull request (`--state-key`, `COTAL_STATE_KEY`).
//!
//! What is signed: the state's compact JSON with `signature` absent, as this cotal serializes
//! [`StateFile`] (fields in declaration order, maps sorted), so a state that was parsed and
//! serialized again signs the same bytes, and any edit of a field (a space dropped, a JWT
//! swapped) breaks the signature.
//!
//! Invariants: pure (no IO); [`verify`] accepts only a signature by exactly the trusted key over
//! exactly the state's content; a seed never enters a [`Signature`].

use crate::observed::state::StateFile;
use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use serde::{Deserialize, Serialize};

/// The kind of nkey a state key is (public keys start with `M`).
pub const KEY_TYPE: nkeys::KeyPairType = nkeys::KeyPairType::Module;

/// A state's signature: the signing key's public key and the base64url signature.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Signature {
    pub key: String,
    pub sig: String,
}

/// Why a state is not trusted. The messages name keys (public) and never a value of the state.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Unverified {
    #[error(
        "the state is not signed (a state exported before states were signed, or with its signature removed)"
    )]
    Unsigned,
    #[error("the state is signed by the state key {signed_by}, not by {trusted}, the key given")]
    OtherKey { signed_by: String, trusted: String },
    #[error(
        "the state's signature does not match its content: it was changed after cotal signed it"
    )]
    Tampered,
}

/// The bytes a signature covers: `state` without its signature, compact.
fn signed_bytes(state: &StateFile) -> Vec<u8> {
    let unsigned = StateFile {
        signature: None,
        ..state.clone()
    };
    serde_json::to_vec(&unsigned).expect("the state serializes")
}

/// Sign `state` with `key` (replacing any signature it had).
pub fn sign(state: &mut StateFile, key: &nkeys::KeyPair) {
    state.signature = None;
    state.signature = Some(signature_of(state, key));
}

/// `key`'s signature of `unsigned` (a state without its signature, which serializes without
/// the field: no copy of a few MB as `signed_bytes` makes).
fn signature_of(unsigned: &StateFile, key: &nkeys::KeyPair) -> Signature {
    debug_assert!(unsigned.signature.is_none());
    let bytes = serde_json::to_vec(unsigned).expect("the state serializes");
    let sig = key.sign(&bytes).expect("a key pair made from a seed signs");
    Signature {
        key: key.public_key(),
        sig: URL_SAFE_NO_PAD.encode(sig),
    }
}

/// Sign `state` with `key` and return it as `state.json` holds it: pretty JSON and a newline,
/// exactly what `serde_json::to_vec_pretty` writes of the signed state.
///
/// The compact bytes the signature covers and the pretty text are made at once, on two cores
/// (at a thousand spaces each is a pass over a few MB, and signing hashes the compact bytes
/// twice); the signature, a state's last field, is then appended to the text as serde_json
/// writes it (a test compares the two).
pub fn sign_pretty(state: &mut StateFile, key: &nkeys::KeyPair) -> Vec<u8> {
    state.signature = None;
    let unsigned: &StateFile = state;
    let (signature, mut text) = rayon::join(
        || signature_of(unsigned, key),
        || serde_json::to_vec_pretty(unsigned).expect("the state serializes"),
    );
    /// The signature as the last field of an object, written pretty: `{\n  "signature": …\n}`.
    #[derive(Serialize)]
    struct Last<'a> {
        signature: &'a Signature,
    }
    let last = serde_json::to_vec_pretty(&Last {
        signature: &signature,
    })
    .expect("a signature serializes");
    // `…\n}` without the signature, `{\n  "signature": {…}\n}` alone: joined with `,\n`.
    assert!(
        text.ends_with(b"\n}") && last.starts_with(b"{\n"),
        "serde_json writes an object pretty as {{\\n…\\n}}"
    );
    text.truncate(text.len() - 2);
    text.extend_from_slice(b",\n");
    text.extend_from_slice(&last[2..]);
    text.push(b'\n');
    state.signature = Some(signature);
    text
}

/// Check that `state` was signed by `trusted` (a public state key) and not changed since.
pub fn verify(state: &StateFile, trusted: &str) -> Result<(), Unverified> {
    let Some(signature) = &state.signature else {
        return Err(Unverified::Unsigned);
    };
    if signature.key != trusted {
        // The file's text is shown only when it is a public state key (no file value is
        // echoed into output a workflow posts).
        return Err(Unverified::OtherKey {
            signed_by: if is_public_key(&signature.key) {
                signature.key.clone()
            } else {
                "(not a public state key)".to_string()
            },
            trusted: trusted.to_string(),
        });
    }
    let key = nkeys::KeyPair::from_public_key(trusted).map_err(|_| Unverified::Tampered)?;
    let sig = URL_SAFE_NO_PAD
        .decode(&signature.sig)
        .map_err(|_| Unverified::Tampered)?;
    key.verify(&signed_bytes(state), &sig)
        .map_err(|_| Unverified::Tampered)
}

/// Whether `text` is a public state key (an nkey of [`KEY_TYPE`] with a valid checksum).
pub fn is_public_key(text: &str) -> bool {
    nkeys::KeyPair::from_public_key(text).is_ok_and(|k| k.key_pair_type() == KEY_TYPE)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn state() -> StateFile {
        serde_json::from_value(serde_json::json!({
            "format_version": 1,
            "exported_at": "2026-12-02T00:00:00Z",
            "broker": {
                "operator": "O", "operator_jwt": "j", "system_account": "A", "system_jwt": "j",
                "system_keys": "none", "listener": {"host": "127.0.0.1", "port": 4222},
                "store_dir": "/s", "running": false,
                "capacity": {
                    "file": {"size": 1, "source": "configured"},
                    "memory": {"size": 1, "source": "configured"}
                }
            },
            "spaces": {}
        }))
        .expect("a minimal state parses")
    }

    #[test]
    fn a_signed_state_verifies_against_its_key_only_and_survives_a_round_trip() {
        let key = nkeys::KeyPair::new(KEY_TYPE);
        let mut s = state();
        sign(&mut s, &key);
        assert!(is_public_key(&key.public_key()));
        verify(&s, &key.public_key()).expect("verifies against its own key");
        // Parsed again from its pretty JSON (what a file holds), it still verifies.
        let again: StateFile =
            serde_json::from_slice(&serde_json::to_vec_pretty(&s).unwrap()).unwrap();
        verify(&again, &key.public_key()).expect("a round trip keeps the signature valid");
        let other = nkeys::KeyPair::new(KEY_TYPE).public_key();
        assert!(matches!(
            verify(&s, &other),
            Err(Unverified::OtherKey { .. })
        ));
    }

    #[test]
    fn the_signed_pretty_text_is_the_signed_state_written_pretty() {
        let key = nkeys::KeyPair::new(KEY_TYPE);
        let mut with_config = state();
        with_config.server_conf = Some("listen: \"127.0.0.1:4222\"\n# ünïcode\n".into());
        for mut s in [state(), with_config] {
            // Whatever signature it had is replaced.
            sign(&mut s, &nkeys::KeyPair::new(KEY_TYPE));
            let text = sign_pretty(&mut s, &key);
            let mut whole = serde_json::to_vec_pretty(&s).unwrap();
            whole.push(b'\n');
            assert_eq!(String::from_utf8(text.clone()), String::from_utf8(whole));
            verify(&s, &key.public_key()).expect("the state it leaves verifies");
            let read: StateFile = serde_json::from_slice(&text).unwrap();
            verify(&read, &key.public_key()).expect("the text it returns verifies");
        }
    }

    #[test]
    fn an_edited_or_unsigned_state_is_refused() {
        let key = nkeys::KeyPair::new(KEY_TYPE);
        let mut s = state();
        sign(&mut s, &key);
        let mut edited = s.clone();
        edited.broker.running = true;
        assert_eq!(
            verify(&edited, &key.public_key()),
            Err(Unverified::Tampered)
        );
        // A signature copied onto another state by the same key does not carry over either.
        let mut resigned = state();
        resigned.exported_at = "2026-12-03T00:00:00Z".into();
        resigned.signature = s.signature.clone();
        assert_eq!(
            verify(&resigned, &key.public_key()),
            Err(Unverified::Tampered)
        );
        // A key field that is not a public state key is never echoed.
        let mut forged = s.clone();
        forged.signature.as_mut().unwrap().key = "<script>do-not-print</script>".into();
        let e = verify(&forged, &key.public_key()).unwrap_err().to_string();
        assert!(
            !e.contains("do-not-print") && e.contains("not a public state key"),
            "{e}"
        );
        s.signature = None;
        assert_eq!(verify(&s, &key.public_key()), Err(Unverified::Unsigned));
        assert!(!is_public_key("OABC"));
        assert!(!is_public_key(&nkeys::KeyPair::new_account().public_key()));
    }
}
