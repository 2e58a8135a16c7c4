//! `.cotal/auth/state.seed`: the seed of the root's state key, which signs every state cotal
//! writes ([`crate::trust::state_signature`]). Made the first time a state is signed or the key is
//! asked for (`cotal state key`), so roots made before it get one without a step.
//!
//! Invariants: the file is 0600 and holds one nkey seed of [`crate::trust::state_signature::KEY_TYPE`];
//! it is created whole or not at all and never replaced (two cotals racing to make it keep
//! the first one's); a file that is not such a seed is an error naming it, never replaced.

use crate::error::{Error, Result};
use crate::store::{Root, atomic};
use crate::trust::secret::Seed;
use crate::trust::state_signature::KEY_TYPE;

/// The root's state key, made now when the root has none.
pub fn load_or_create(root: &Root) -> Result<nkeys::KeyPair> {
    let path = root.state_key();
    if atomic::read_optional(&path)?.is_none() {
        let fresh = nkeys::KeyPair::new(KEY_TYPE);
        let seed = Seed::new(fresh.seed().expect("a fresh key pair has a seed"));
        atomic::create_new(
            &path,
            format!("{}\n", seed.expose()).as_bytes(),
            atomic::SECRET,
        )?;
    }
    load(root)?.ok_or_else(|| {
        Error::other(format!(
            "{}: the state key vanished while it was made",
            path.display()
        ))
    })
}

/// The root's state key, if it has one.
pub fn load(root: &Root) -> Result<Option<nkeys::KeyPair>> {
    let path = root.state_key();
    let Some(bytes) = atomic::read_optional(&path)? else {
        return Ok(None);
    };
    let seed = Seed::new(String::from_utf8_lossy(&bytes).trim().to_string());
    match seed.key_pair() {
        Ok(key) if key.key_pair_type() == KEY_TYPE => Ok(Some(key)),
        _ => Err(Error::other(
            crate::diagnostic::Diagnostic::new(format!(
                "{}: not the seed of a state key (an nkey seed starting with SM)",
                path.display()
            ))
            .next("restore it from a root backup (`cotal root restore`), or remove it: cotal makes a new key, and CI must then be given its public key (`cotal state key`)"),
        )),
    }
}
