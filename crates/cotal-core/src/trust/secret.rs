//! A wrapper for nkey seeds that cannot be printed by accident.
//!
//! Invariant: `Debug` and `Display` never show the seed; the only way to the text is
//! [`Seed::expose`], whose callers are signing and writing the 0600 record it came from.

use serde::{Deserialize, Serialize};
use std::fmt;

#[derive(Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(transparent)]
pub struct Seed(String);

impl Seed {
    pub fn new(seed: String) -> Self {
        Seed(seed)
    }

    pub fn expose(&self) -> &str {
        &self.0
    }

    /// The key pair this seed encodes.
    pub fn key_pair(&self) -> Result<nkeys::KeyPair, String> {
        nkeys::KeyPair::from_seed(&self.0)
            .map_err(|_| "the seed is not a valid nkey seed".to_string())
    }
}

/// Secret text that is not a seed (a creds file): the same guarantees as [`Seed`].
#[derive(Clone, PartialEq, Eq)]
pub struct Secret(String);

impl Secret {
    pub fn new(text: String) -> Self {
        Secret(text)
    }

    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl fmt::Debug for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Secret(<redacted>)")
    }
}

impl fmt::Debug for Seed {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Seed(<redacted>)")
    }
}

impl From<&nkeys::KeyPair> for Seed {
    fn from(kp: &nkeys::KeyPair) -> Self {
        Seed(kp.seed().expect("a generated key pair has a seed"))
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn debug_never_shows_the_seed() {
        let kp = nkeys::KeyPair::new_account();
        let seed = super::Seed::from(&kp);
        assert!(!format!("{seed:?}").contains(seed.expose()));
        assert_eq!(seed.key_pair().unwrap().public_key(), kp.public_key());
    }
}
