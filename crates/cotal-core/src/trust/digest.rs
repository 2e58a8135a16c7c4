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

/// The digest a plan pins `cotal.toml` by: the sha256 of its values in a canonical form (keys
/// sorted, comments, whitespace, quoting and table layout left out), so an edit of a comment or
/// of the layout leaves a saved plan valid and any change of a value makes it stale.
pub fn desired_digest(text: &str) -> String {
    match toml::de::DeTable::parse(text) {
        Ok(document) => desired_digest_of(document, text),
        // Text that does not parse is never planned from; its bytes stand for it.
        Err(_) => sha256(text.as_bytes()),
    }
}

/// [`desired_digest`] of `text`, parsed as `document`.
pub fn desired_digest_of(document: crate::desired::Document<'_>, text: &str) -> String {
    use serde::Deserialize;
    use std::io::Write;
    fn canonical(v: &toml::Value, out: &mut Vec<u8>) {
        let json = |out: &mut Vec<u8>, s: &String| {
            serde_json::to_writer(out, s).expect("a string serializes")
        };
        // Writes to a vector do not fail.
        let _ = match v {
            toml::Value::Table(t) => {
                let mut keys: Vec<&String> = t.keys().collect();
                keys.sort();
                out.push(b'{');
                for k in keys {
                    json(out, k);
                    out.push(b':');
                    canonical(&t[k.as_str()], out);
                    out.push(b',');
                }
                out.push(b'}');
                Ok(())
            }
            toml::Value::Array(a) => {
                out.push(b'[');
                for item in a {
                    canonical(item, out);
                    out.push(b',');
                }
                out.push(b']');
                Ok(())
            }
            toml::Value::String(s) => {
                json(out, s);
                Ok(())
            }
            toml::Value::Integer(i) => write!(out, "i{i}"),
            toml::Value::Float(f) => write!(out, "f{f:?}"),
            toml::Value::Boolean(b) => write!(out, "b{b}"),
            toml::Value::Datetime(d) => write!(out, "d{d}"),
        };
    }
    match toml::Value::deserialize(toml::de::Deserializer::from(document)) {
        Ok(value) => {
            let mut out = Vec::new();
            canonical(&value, &mut out);
            sha256(&out)
        }
        Err(_) => sha256(text.as_bytes()),
    }
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
