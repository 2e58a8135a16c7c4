//! The vocabulary types of the pure core: space names, their wire tokens and on-disk hex keys,
//! lifecycle state, account limits and byte sizes.
//!
//! Invariants: a [`SpaceName`] is never `""`, `"."` or `".."`; [`SpaceName::hex`] and
//! [`SpaceName::from_hex`] round-trip exactly; [`SpaceName::token`] is lossy and only ever used for
//! wire and stream names, never as an identity.

use serde::{Deserialize, Serialize};
use std::fmt;

/// The longest name whose hex still fits a file name: (255 - len("account..json")) / 2.
pub const MAX_NAME_BYTES: usize = 121;

/// A space (tenant) name. Case-sensitive, any UTF-8 except `""`, `.` and `..`.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(transparent)]
pub struct SpaceName(String);

impl SpaceName {
    /// Validate a name an operator wrote (in `cotal.toml` or on the command line). The error
    /// says why, in words an operator understands.
    ///
    /// The name is any UTF-8, put in Unicode normal form C (NFC), so a name typed composed
    /// (`é`) and one typed decomposed (`e` + U+0301) are the same space. Refused: an empty
    /// name or one only of whitespace, `.` and `..`, and a name holding a control character
    /// (a tab, a newline) or a bidirectional control (U+202E and its kin), which would make
    /// it display as another name. The only length limit is the filesystem's: the name's hex
    /// is a file name (`account.<hex>.json`), which must fit in 255 bytes: at most
    /// [`MAX_NAME_BYTES`] bytes of UTF-8, after normalisation.
    pub fn parse(raw: &str) -> Result<Self, String> {
        use unicode_normalization::UnicodeNormalization;
        let name: String = raw.nfc().collect();
        if let Some(c) = name.chars().find(|c| hides_or_reorders(*c)) {
            return Err(format!(
                "a space name cannot hold a control character or an invisible or bidirectional formatting character: {raw:?} holds U+{:04X}",
                c as u32
            ));
        }
        if !name.is_empty() && name.trim().is_empty() {
            return Err(format!("a space name cannot be only whitespace ({raw:?})"));
        }
        SpaceName::checked(name)
    }

    /// A name as a record on disk (or a saved plan, a state) holds it: kept byte for byte, and
    /// checked only as names were before [`SpaceName::parse`] normalised them (not empty, not
    /// `.` or `..`, at most [`MAX_NAME_BYTES`]), so a root made by an older cotal stays
    /// readable. Such a name that is not in NFC (or holds a control character) can no longer be
    /// written in `cotal.toml`: the plan shows it as a space to remove, never as the same one.
    pub fn from_record(raw: &str) -> Result<Self, String> {
        SpaceName::checked(raw.to_string())
    }

    fn checked(name: String) -> Result<Self, String> {
        match name.as_str() {
            "" => Err("a space name cannot be empty".into()),
            "." | ".." => Err(format!("{name:?} is not a valid space name")),
            _ if name.len() > MAX_NAME_BYTES => Err(format!(
                "a space name is at most {MAX_NAME_BYTES} bytes of UTF-8 (its on-disk key is the name in hex); this one is {}",
                name.len()
            )),
            _ => Ok(SpaceName(name)),
        }
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// The wire token: every character outside `[A-Za-z0-9_-]` becomes `_`. Lossy.
    pub fn token(&self) -> String {
        token(&self.0)
    }

    /// The one way a name is shown to people, in every message, plan and table: a JSON string
    /// (quoted, with control characters and quotes escaped), so a name can never forge a line
    /// or blend into the sentence around it.
    pub fn quoted(&self) -> String {
        serde_json::to_string(&self.0).expect("a string serializes")
    }

    /// Lowercase hex of the UTF-8 bytes: the on-disk key of the space's files.
    pub fn hex(&self) -> String {
        hex::encode(self.0.as_bytes())
    }

    /// Decode an on-disk key. `None` unless it is lowercase hex of a valid UTF-8 name that
    /// re-encodes to exactly the same key.
    pub fn from_hex(key: &str) -> Option<Self> {
        if key.is_empty() || key.bytes().any(|b| b.is_ascii_uppercase()) {
            return None;
        }
        let bytes = hex::decode(key).ok()?;
        let name = String::from_utf8(bytes).ok()?;
        let parsed = SpaceName::from_record(&name).ok()?;
        (parsed.hex() == key).then_some(parsed)
    }
}

/// A character that could hide or reorder what a terminal shows: a control character (a tab,
/// a newline), a line or paragraph separator, a zero-width or bidirectional formatting
/// character (U+202E and its kin), a byte-order mark. A space name may hold none of them, and a
/// tenant's text shows them escaped ([`crate::space::channels::displayable`]).
pub fn hides_or_reorders(c: char) -> bool {
    c.is_control()
        || matches!(
            c,
            '\u{061C}'
                | '\u{200B}'..='\u{200F}'
                | '\u{202A}'..='\u{202E}'
                | '\u{2060}'..='\u{206F}'
                | '\u{2028}'
                | '\u{2029}'
                | '\u{FEFF}'
        )
}

impl fmt::Display for SpaceName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl<'de> Deserialize<'de> for SpaceName {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let raw = String::deserialize(d)?;
        SpaceName::from_record(&raw).map_err(serde::de::Error::custom)
    }
}

/// Replace every character outside `[A-Za-z0-9_-]` with `_`.
pub fn token(raw: &str) -> String {
    raw.chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '_' || c == '-' {
                c
            } else {
                '_'
            }
        })
        .collect()
}

/// The lifecycle state an operator can ask for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize, Default)]
#[serde(rename_all = "lowercase")]
pub enum SpaceState {
    #[default]
    Active,
    Suspended,
    /// Retained, not served: the account left out of the broker's config (no connection,
    /// subscription or stream of it is served), its record, keys, protection and JetStream
    /// data kept on disk.
    Archived,
}

impl fmt::Display for SpaceState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            SpaceState::Active => "active",
            SpaceState::Suspended => "suspended",
            SpaceState::Archived => "archived",
        })
    }
}

/// A byte count, written in `cotal.toml` as an integer or a string with a unit
/// (`B`, `KiB`, `MiB`, `GiB`, `TiB`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(transparent)]
pub struct ByteSize(pub u64);

impl ByteSize {
    /// Parse `"10GiB"`, `"512 MiB"`, `"42B"` or `"42"`. Overflow and unknown units are errors.
    pub fn parse(raw: &str) -> Result<Self, String> {
        let s = raw.trim();
        let split = s.find(|c: char| !c.is_ascii_digit()).unwrap_or(s.len());
        let (digits, unit) = s.split_at(split);
        if digits.is_empty() {
            return Err(format!(
                "{raw:?} is not a size: write a whole number with an optional unit B, KiB, MiB, GiB or TiB"
            ));
        }
        let n: u64 = digits
            .parse()
            .map_err(|_| format!("{raw:?} is too large"))?;
        let mult: u64 = match unit.trim() {
            "" | "B" => 1,
            "KiB" => 1 << 10,
            "MiB" => 1 << 20,
            "GiB" => 1 << 30,
            "TiB" => 1 << 40,
            other => {
                return Err(format!(
                    "unknown unit {other:?} in {raw:?}: use B, KiB, MiB, GiB or TiB"
                ));
            }
        };
        n.checked_mul(mult)
            .map(ByteSize)
            .ok_or_else(|| format!("{raw:?} is too large"))
    }
}

impl fmt::Display for ByteSize {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&human_bytes(self.0))
    }
}

/// A unix time for people (RFC 3339, seconds). Pure: it formats the time it is given.
pub fn stamp(t: i64) -> String {
    humantime::format_rfc3339_seconds(
        std::time::UNIX_EPOCH + std::time::Duration::from_secs(t.max(0) as u64),
    )
    .to_string()
}

/// `4.2 MiB`, `512 B`: binary units, one decimal when not whole.
pub fn human_bytes(n: u64) -> String {
    const UNITS: [&str; 5] = ["B", "KiB", "MiB", "GiB", "TiB"];
    let mut unit = 0;
    let mut value = n as f64;
    while value >= 1024.0 && unit < UNITS.len() - 1 {
        value /= 1024.0;
        unit += 1;
    }
    if unit == 0 {
        format!("{n} B")
    } else if (value - value.round()).abs() < 0.05 {
        format!("{} {}", value.round() as u64, UNITS[unit])
    } else {
        format!("{value:.1} {}", UNITS[unit])
    }
}

/// `12,408`: thousands separated for the blast radius.
pub fn human_count(n: u64) -> String {
    let digits = n.to_string();
    let mut out = String::with_capacity(digits.len() + digits.len() / 3);
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

/// Account limits an operator may set. `None` means unlimited.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct Limits {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_connections: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_storage: Option<ByteSize>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_memory: Option<ByteSize>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_streams: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_consumers: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_payload: Option<ByteSize>,
}

impl Limits {
    /// These limits, each one unset here taken from `defaults`.
    pub fn or(self, defaults: &Limits) -> Limits {
        Limits {
            max_connections: self.max_connections.or(defaults.max_connections),
            max_storage: self.max_storage.or(defaults.max_storage),
            max_memory: self.max_memory.or(defaults.max_memory),
            max_streams: self.max_streams.or(defaults.max_streams),
            max_consumers: self.max_consumers.or(defaults.max_consumers),
            max_payload: self.max_payload.or(defaults.max_payload),
        }
    }

    /// Each limit as `(name, value)` for display and comparison, in a fixed order.
    pub fn entries(&self) -> Vec<(&'static str, Option<String>)> {
        vec![
            (
                "max_connections",
                self.max_connections.map(|v| v.to_string()),
            ),
            ("max_storage", self.max_storage.map(|v| v.to_string())),
            ("max_memory", self.max_memory.map(|v| v.to_string())),
            ("max_streams", self.max_streams.map(|v| v.to_string())),
            ("max_consumers", self.max_consumers.map(|v| v.to_string())),
            ("max_payload", self.max_payload.map(|v| v.to_string())),
        ]
    }
}

/// What an operator asks for one space.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct SpaceSpec {
    pub state: SpaceState,
    pub protect: bool,
    pub limits: Limits,
}

/// An archive as the apply that made it recorded it in the account record: when, and by whom
/// (`user@host`). While a record holds one, no config cotal renders preloads the account.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Archival {
    /// RFC 3339.
    pub at: String,
    pub by: String,
}

/// A suspension as the apply that made it recorded it: why (`suspend_reason` in cotal.toml),
/// when, and by whom (the operator's `user@host`, as the audit names it).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Suspension {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// RFC 3339.
    pub at: String,
    pub by: String,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_any_utf8_in_nfc_without_controls() {
        for bad in [
            "",
            ".",
            "..",
            " ",
            "\t",
            "  \n ",
            "line\nbreak",
            "tab\there",
            "evil\u{202E}txt",
            "\u{2066}iso",
            "mark\u{200F}",
        ] {
            assert!(SpaceName::parse(bad).is_err(), "{bad:?}");
        }
        for good in [
            "design",
            "a.b",
            "...",
            "ünï/cødé",
            "UPPER",
            "two words",
            " padded ",
        ] {
            assert_eq!(SpaceName::parse(good).unwrap().as_str(), good);
        }
        // Typed decomposed, stored composed: one space.
        let decomposed = SpaceName::parse("cafe\u{0301}").unwrap();
        assert_eq!(decomposed.as_str(), "caf\u{00E9}");
        assert_eq!(decomposed, SpaceName::parse("caf\u{00E9}").unwrap());
        // A record an older cotal wrote is read as it is.
        assert_eq!(SpaceName::from_record(" ").unwrap().as_str(), " ");
        assert_eq!(
            SpaceName::from_record("cafe\u{0301}").unwrap().as_str(),
            "cafe\u{0301}"
        );
        let longest = "x".repeat(MAX_NAME_BYTES);
        let key = format!("account.{}.json", SpaceName::parse(&longest).unwrap().hex());
        assert_eq!(key.len(), 255);
        assert!(
            SpaceName::parse(&format!("{longest}x"))
                .unwrap_err()
                .contains("at most 121 bytes")
        );
    }

    #[test]
    fn hex_round_trips_and_rejects_non_canonical_keys() {
        let name = SpaceName::parse("Design Ω").unwrap();
        assert_eq!(SpaceName::from_hex(&name.hex()), Some(name.clone()));
        assert_eq!(SpaceName::from_hex(&name.hex().to_uppercase()), None);
        assert_eq!(SpaceName::from_hex("2e"), None, "'.' is not a name");
        assert_eq!(SpaceName::from_hex(""), None);
        assert_eq!(SpaceName::from_hex("zz"), None);
        assert_eq!(SpaceName::from_hex("ff"), None, "not UTF-8");
        assert_eq!(SpaceName::from_hex("6"), None, "odd length");
    }

    #[test]
    fn token_replaces_everything_outside_the_safe_set() {
        assert_eq!(token("design"), "design");
        assert_eq!(token("a.b c/é-_9"), "a_b_c__-_9");
    }

    #[test]
    fn byte_sizes_parse_with_binary_units() {
        assert_eq!(ByteSize::parse("10GiB").unwrap().0, 10 << 30);
        assert_eq!(ByteSize::parse("512 MiB").unwrap().0, 512 << 20);
        assert_eq!(ByteSize::parse("42").unwrap().0, 42);
        assert_eq!(ByteSize::parse("42B").unwrap().0, 42);
        assert!(
            ByteSize::parse("10GB")
                .unwrap_err()
                .contains("unknown unit")
        );
        assert!(ByteSize::parse("GiB").is_err());
        assert!(ByteSize::parse("-1").is_err());
        assert!(
            ByteSize::parse("99999999999TiB")
                .unwrap_err()
                .contains("too large")
        );
    }

    #[test]
    fn humans_read_sizes_and_counts() {
        assert_eq!(human_bytes(512), "512 B");
        assert_eq!(human_bytes(4_404_019), "4.2 MiB");
        assert_eq!(human_bytes(10 << 30), "10 GiB");
        assert_eq!(human_count(12_408), "12,408");
        assert_eq!(human_count(7), "7");
        assert_eq!(human_count(1_000_000), "1,000,000");
    }
}

/// Where a broker listens (host and port of its client listener).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Listener {
    pub host: String,
    pub port: u16,
}

impl fmt::Display for Listener {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}", self.host, self.port)
    }
}
