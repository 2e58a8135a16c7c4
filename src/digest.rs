//! sha256 fingerprints: of files (saved-plan pins) and of the tenant set (the generation
//! record's `inventoryDigest`).
//!
//! Pure. The inventory digest covers every space's name, account key and exact account JWT, in
//! name order, so any change a render would pick up changes the digest.

use crate::model::SpaceName;
use sha2::{Digest, Sha256};

/// `sha256:<hex>` of some bytes.
pub fn sha256(bytes: &[u8]) -> String {
    format!("sha256:{}", hex::encode(Sha256::digest(bytes)))
}

/// The fingerprint of a tenant set: `(name, account public key, account JWT)` in name order.
pub fn inventory<'a>(
    spaces: impl IntoIterator<Item = (&'a SpaceName, &'a str, &'a str)>,
) -> String {
    let mut h = Sha256::new();
    for (name, account, jwt) in spaces {
        h.update(name.hex().as_bytes());
        h.update(b" ");
        h.update(account.as_bytes());
        h.update(b" ");
        h.update(Sha256::digest(jwt.as_bytes()));
        h.update(b"\n");
    }
    format!("sha256:{}", hex::encode(h.finalize()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn inventory_digest_sees_every_field() {
        let a = SpaceName::parse("a").unwrap();
        let b = SpaceName::parse("b").unwrap();
        let base = inventory([(&a, "A1", "j1"), (&b, "A2", "j2")]);
        assert_ne!(base, inventory([(&a, "A1", "j1")]));
        assert_ne!(base, inventory([(&a, "A1", "j1"), (&b, "A2", "j3")]));
        assert_ne!(base, inventory([(&a, "A9", "j1"), (&b, "A2", "j2")]));
        assert_eq!(base, inventory([(&a, "A1", "j1"), (&b, "A2", "j2")]));
        assert!(sha256(b"").starts_with("sha256:e3b0c442"));
    }
}
