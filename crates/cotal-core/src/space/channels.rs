//! Channels declared per space: the settings every Cotal client reads from the space's channel
//! registry (the KV bucket `cotal_channels_<t>`: a key per concrete channel name, `=defaults`
//! for the space's defaults, each value a JSON object), their validation, their wire form, and
//! the diff of what is declared against what the registry holds.
//!
//! Invariants: pure. cotal manages the fields a declaration sets (`deliveryClass`,
//! `replayWindow`, `description`, `instructions`); every other key of a registry value (a
//! client's `replay`, say) is kept as it is, and so is a field the declaration leaves unset.
//! Every write carries the revision it was planned against (or says the key must be absent),
//! so a concurrent writer makes the apply stale instead of being overwritten.

use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// The registry key of the space's defaults.
pub const DEFAULTS_KEY: &str = "=defaults";
/// What provisioning seeds under [`DEFAULTS_KEY`] when it is unset (docs/design/lifecycle-model.md, "Adding a space").
pub const SEEDED_DEFAULTS: &str = r#"{"deliveryClass":"durable"}"#;
/// The key an older cotal wrote the default delivery class under; no client reads it.
pub const LEGACY_DELIVERY_KEY: &str = "delivery";
/// The longest `description`, in characters.
pub const DESCRIPTION_MAX: usize = 200;
/// The longest `instructions`, in characters.
pub const INSTRUCTIONS_MAX: usize = 2000;
/// The most keys cotal reads of one registry: a registry a tenant filled beyond it is not
/// planned (said in a warning), so one tenant cannot make every plan slow.
pub const REGISTRY_MAX_KEYS: usize = 10_000;
/// The largest registry value cotal copies (4 KiB; a channel's metadata is a few hundred
/// bytes). A larger one, which only a tenant writes, is summarised (its size and sha256) and
/// never copied into a plan, the state, the cache or the output; a declared channel holding
/// one is restored like any value that is not an object.
pub const REGISTRY_VALUE_MAX: usize = 4 << 10;
/// The most bytes of values cotal copies from one registry (1 MiB): a registry a tenant filled
/// beyond it is not planned (said in a warning), like one with too many keys.
pub const REGISTRY_MAX_BYTES: usize = 1 << 20;

/// What stands in for a value over [`REGISTRY_VALUE_MAX`]: a string naming its size and
/// fingerprint, never its bytes.
pub fn oversized(payload: &[u8]) -> serde_json::Value {
    serde_json::Value::String(format!(
        "<a value of {} bytes, over cotal's {REGISTRY_VALUE_MAX}-byte bound: not copied ({})>",
        payload.len(),
        crate::trust::digest::sha256(payload)
    ))
}
/// The longest number of a replay window, in digits.
const WINDOW_DIGITS_MAX: usize = 9;

/// How a channel's messages reach members.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum DeliveryClass {
    /// Only to members connected at the time.
    Live,
    /// Also a durable backstop copy for members busy or offline, within retention.
    Durable,
}

impl DeliveryClass {
    /// `live` or `durable`.
    pub fn parse(s: &str) -> Option<Self> {
        match s {
            "live" => Some(DeliveryClass::Live),
            "durable" => Some(DeliveryClass::Durable),
            _ => None,
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            DeliveryClass::Live => "live",
            DeliveryClass::Durable => "durable",
        }
    }
}

/// The settings of one channel (or of the defaults, which carry only the first two).
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct Settings {
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub delivery_class: Option<DeliveryClass>,
    /// `<n>s`, `<n>m`, `<n>h` or `<n>d`.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub replay_window: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub description: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub instructions: Option<String>,
}

impl Settings {
    /// The declared fields, as the wire names them.
    pub fn wire(&self) -> BTreeMap<&'static str, serde_json::Value> {
        let mut out = BTreeMap::new();
        if let Some(c) = self.delivery_class {
            out.insert("deliveryClass", c.as_str().into());
        }
        if let Some(w) = &self.replay_window {
            out.insert("replayWindow", w.clone().into());
        }
        if let Some(d) = &self.description {
            out.insert("description", d.clone().into());
        }
        if let Some(i) = &self.instructions {
            out.insert("instructions", i.clone().into());
        }
        out
    }
}

/// A space's channel declarations.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct SpaceChannels {
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub defaults: Option<Settings>,
    #[serde(skip_serializing_if = "BTreeMap::is_empty", default)]
    pub channels: BTreeMap<String, Settings>,
    /// Delete registry entries the file does not declare.
    #[serde(skip_serializing_if = "std::ops::Not::not", default)]
    pub prune: bool,
}

/// Whether `name` can name a channel: a concrete NATS subject suffix that is also a valid
/// registry key (tokens of ASCII letters, digits, `-` and `_` separated by dots, none empty: no
/// wildcard, no whitespace), not starting with `=` (reserved for the registry's own keys).
pub fn valid_channel_name(name: &str) -> Result<(), String> {
    if name.is_empty() {
        return Err("a channel name cannot be empty".into());
    }
    if name.starts_with('=') {
        return Err(format!(
            "channel {name:?}: names starting with `=` are reserved for the registry (`=defaults` is the space's defaults)"
        ));
    }
    if name.len() > 255 {
        return Err(format!("channel {name:?} is longer than 255 bytes"));
    }
    for token in name.split('.') {
        if token.is_empty() {
            return Err(format!(
                "channel {name:?}: an empty token (a leading, trailing or doubled dot)"
            ));
        }
        if let Some(c) = token
            .chars()
            .find(|c| !(c.is_ascii_alphanumeric() || *c == '-' || *c == '_'))
        {
            return Err(format!(
                "channel {name:?}: {c:?} is not allowed (a channel is a concrete subject and a registry key: tokens of letters, digits, '-' and '_' separated by dots; no wildcard)"
            ));
        }
    }
    Ok(())
}

/// Whether `w` is a replay window: a positive whole number and a unit, `s`, `m`, `h` or `d`.
pub fn valid_replay_window(w: &str) -> Result<(), String> {
    let ok = w.len() >= 2
        && w.len() - 1 <= WINDOW_DIGITS_MAX
        && w[..w.len() - 1].chars().all(|c| c.is_ascii_digit())
        && !w.starts_with('0')
        && matches!(w.as_bytes()[w.len() - 1], b's' | b'm' | b'h' | b'd');
    if ok {
        Ok(())
    } else {
        Err(format!(
            "replay_window {w:?} is not a window: write a positive whole number of at most {WINDOW_DIGITS_MAX} digits and s, m, h or d (for example \"24h\")"
        ))
    }
}

/// One registry entry as read: its value (parsed JSON, or the raw text when it is not JSON)
/// and its revision.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Entry {
    pub value: serde_json::Value,
    pub revision: u64,
}

/// A space's channel registry as read, key by key (deleted keys are absent).
pub type Registry = BTreeMap<String, Entry>;

/// The registry provisioning leaves when it seeds the defaults at `revision` into an empty one.
pub fn seeded(revision: u64) -> Registry {
    let value = serde_json::from_str(SEEDED_DEFAULTS).expect("the seed is JSON");
    [(DEFAULTS_KEY.to_string(), Entry { value, revision })].into()
}

/// What a write expects of the key it writes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Expect {
    /// The key must not exist (a create).
    Absent,
    /// The key must still be at this revision (compare-and-set).
    Revision(u64),
    /// Nothing was observed (a space added by this plan): written as is.
    Any,
}

/// One write of the registry: a value (`Some`, compact JSON) or a deletion (`None`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Write {
    pub key: String,
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub value: Option<String>,
    pub expect: Expect,
    /// The managed fields the declaration sets (wire names): what the write still means when
    /// a tenant wrote the key after the plan ([`rebase`]). Empty for a deletion, and in plans
    /// saved before it existed (such a write is not rebased).
    #[serde(skip_serializing_if = "BTreeMap::is_empty", default)]
    pub sets: BTreeMap<String, serde_json::Value>,
}

/// A key's value and revision as written, after an apply (`None` value: deleted).
pub type Written = (String, Option<String>, Option<u64>);

/// How many times a write whose key a tenant moved after the plan is rebased on what the key
/// holds then and tried again, before the space's write is reported as a conflict.
pub const CONFLICT_RETRIES: usize = 4;

/// What a write becomes once its key moved since the plan.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Rebased {
    /// The key already holds what the write meant (at this revision; `None`: absent).
    Holds(Option<u64>),
    /// Write this instead: the fresh value with the declared fields set, at its revision.
    Retry(Write),
    /// The write cannot be rebased (a plan saved without `sets`): a conflict.
    Conflict,
}

/// Rebase `w` on what its key holds now (`fresh`: the value's bytes and revision; `None`:
/// absent or deleted). A tenant's other fields are kept, as at plan time; only the fields the
/// declaration sets are written over, so the result is what the next plan would write.
pub fn rebase(w: &Write, fresh: Option<(&[u8], u64)>) -> Rebased {
    let parsed = fresh.map(|(bytes, revision)| {
        (
            serde_json::from_slice::<serde_json::Value>(bytes).ok(),
            revision,
        )
    });
    // The default cotal seeds (none declared): a client's readable default is theirs, so the
    // seed holds; a default deleted meanwhile is seeded again.
    if w.key == DEFAULTS_KEY && w.sets.is_empty() && w.value.is_some() {
        return match parsed {
            None => Rebased::Retry(Write {
                expect: Expect::Absent,
                ..w.clone()
            }),
            Some((Some(v), revision))
                if v.get("deliveryClass")
                    .and_then(|c| c.as_str())
                    .and_then(DeliveryClass::parse)
                    .is_some() =>
            {
                Rebased::Holds(Some(revision))
            }
            Some(_) => Rebased::Conflict,
        };
    }
    match (&w.value, parsed) {
        (None, None) => Rebased::Holds(None),
        (None, Some((_, revision))) => Rebased::Retry(Write {
            expect: Expect::Revision(revision),
            ..w.clone()
        }),
        (Some(value), parsed) => {
            let current = parsed.as_ref().and_then(|(v, _)| v.as_ref());
            let revision = parsed.as_ref().map(|(_, r)| *r);
            let wanted: Option<serde_json::Value> = if w.sets.is_empty() {
                serde_json::from_str(value).ok()
            } else {
                let mut object = match current {
                    Some(serde_json::Value::Object(o)) => o.clone(),
                    _ => serde_json::Map::new(),
                };
                object.remove(LEGACY_DELIVERY_KEY);
                for (k, v) in &w.sets {
                    object.insert(k.clone(), v.clone());
                }
                Some(serde_json::Value::Object(object))
            };
            if current.is_some() && current == wanted.as_ref() {
                return Rebased::Holds(revision);
            }
            match wanted {
                Some(wanted) if !w.sets.is_empty() => Rebased::Retry(Write {
                    value: Some(wanted.to_string()),
                    expect: revision.map_or(Expect::Absent, Expect::Revision),
                    ..w.clone()
                }),
                _ => Rebased::Conflict,
            }
        }
    }
}

/// What the plan does to a space's registry, and what it says of it.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Diff {
    pub writes: Vec<Write>,
    /// `+`/`~`/`-` lines for people, one per key written.
    pub lines: Vec<String>,
    /// Keys the registry holds that the file does not declare, kept (no `prune_channels`).
    pub kept: Vec<String>,
}

/// The value to write for a declared key: the observed object with its managed fields as
/// declared (and the legacy key dropped), or only the declared fields when nothing usable is
/// observed. `None` when the observed value already says what is declared.
fn desired_value(declared: &Settings, observed: Option<&serde_json::Value>) -> Option<String> {
    let mut object = match observed {
        Some(serde_json::Value::Object(o)) => o.clone(),
        _ => serde_json::Map::new(),
    };
    let before = object.clone();
    object.remove(LEGACY_DELIVERY_KEY);
    for (k, v) in declared.wire() {
        object.insert(k.to_string(), v);
    }
    let unchanged = matches!(observed, Some(serde_json::Value::Object(_))) && object == before;
    (!unchanged).then(|| serde_json::Value::Object(object).to_string())
}

/// `text` with every character that could hide or reorder what a terminal shows (controls,
/// line and paragraph separators, zero-width and bidirectional formatting characters) escaped:
/// registry keys and values are a tenant's text.
pub fn displayable(text: &str) -> String {
    text.chars()
        .map(|c| {
            if crate::model::hides_or_reorders(c) {
                c.escape_unicode().to_string()
            } else {
                c.to_string()
            }
        })
        .collect()
}

/// `field: old -> new` for each managed field that differs.
fn field_changes(declared: &Settings, observed: Option<&serde_json::Value>) -> Vec<String> {
    let get = |k: &str| observed.and_then(|v| v.get(k)).cloned();
    let mut out = Vec::new();
    for (k, v) in declared.wire() {
        let old = get(k);
        if old.as_ref() != Some(&v) {
            out.push(format!(
                "{k}: {} -> {}",
                old.map(|o| displayable(&o.to_string()))
                    .unwrap_or_else(|| "(unset)".into()),
                displayable(&v.to_string())
            ));
        }
    }
    if observed.is_some_and(|v| v.get(LEGACY_DELIVERY_KEY).is_some()) {
        out.push(format!(
            "{LEGACY_DELIVERY_KEY}: the legacy key no client reads is removed"
        ));
    }
    if observed.is_some_and(|v| !v.is_object()) {
        out.push("the value was not a JSON object: replaced".into());
    }
    out
}

/// The expectation of a write to `key`, given what was observed.
fn expect(observed: Option<&Registry>, key: &str) -> Expect {
    match observed {
        None => Expect::Any,
        Some(r) => match r.get(key) {
            Some(e) => Expect::Revision(e.revision),
            None => Expect::Absent,
        },
    }
}

/// The diff of a space's declarations against its registry. `observed` is `None` for a space
/// this plan adds (its registry is created by provisioning, just before the writes).
pub fn diff(declared: &SpaceChannels, observed: Option<&Registry>) -> Diff {
    let mut out = Diff::default();
    let value_of = |key: &str| observed.and_then(|r| r.get(key)).map(|e| &e.value);
    // The defaults: as declared, or the seeded default when unset, or the legacy key repaired.
    let defaults = match &declared.defaults {
        Some(d) => Some(d.clone()),
        None => match value_of(DEFAULTS_KEY) {
            // Unset: provisioning seeds it; a plan over a running space writes the seed itself.
            None if observed.is_some() => Some(Settings {
                delivery_class: Some(DeliveryClass::Durable),
                ..Settings::default()
            }),
            // A default clients cannot read (the legacy key, no class, an unknown class, not
            // an object) is as good as unset: the seed is written, keeping any other key.
            Some(v)
                if v.get("deliveryClass")
                    .and_then(|c| c.as_str())
                    .and_then(DeliveryClass::parse)
                    .is_none() =>
            {
                let class = v
                    .get(LEGACY_DELIVERY_KEY)
                    .and_then(|c| c.as_str())
                    .and_then(DeliveryClass::parse)
                    .unwrap_or(DeliveryClass::Durable);
                Some(Settings {
                    delivery_class: Some(class),
                    ..Settings::default()
                })
            }
            _ => None,
        },
    };
    let mut wanted: Vec<(String, Settings)> = Vec::new();
    if let Some(mut d) = defaults {
        // A declaration without a delivery class keeps the seeded one (or the client's): the
        // seed is what every client falls back to, and it is written only when unset.
        if d.delivery_class.is_none() {
            let observed_class = value_of(DEFAULTS_KEY)
                .and_then(|v| v.get("deliveryClass"))
                .and_then(|c| c.as_str())
                .and_then(DeliveryClass::parse);
            if observed_class.is_none() {
                d.delivery_class = Some(DeliveryClass::Durable);
            }
        }
        wanted.push((DEFAULTS_KEY.to_string(), d));
    }
    wanted.extend(
        declared
            .channels
            .iter()
            .map(|(k, s)| (k.clone(), s.clone())),
    );
    for (key, settings) in &wanted {
        let old = value_of(key);
        let Some(value) = desired_value(settings, old) else {
            continue;
        };
        let label = if key == DEFAULTS_KEY {
            "channel defaults".to_string()
        } else {
            format!("channel {key:?}")
        };
        out.lines.push(match old {
            None => format!(
                "+ {label}: {}",
                settings
                    .wire()
                    .iter()
                    .map(|(k, v)| format!("{k} = {v}"))
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
            Some(o) => format!("~ {label}: {}", field_changes(settings, Some(o)).join("; ")),
        });
        out.writes.push(Write {
            key: key.clone(),
            value: Some(value),
            expect: expect(observed, key),
            // What `cotal.toml` itself declares: a default cotal seeds is not rebased over
            // a client's (it is theirs once set).
            sets: if key == DEFAULTS_KEY {
                declared.defaults.as_ref()
            } else {
                declared.channels.get(key)
            }
            .map(|s| {
                s.wire()
                    .into_iter()
                    .map(|(k, v)| (k.to_string(), v))
                    .collect()
            })
            .unwrap_or_default(),
        });
    }
    if let Some(registry) = observed {
        for (key, entry) in registry {
            if key == DEFAULTS_KEY || declared.channels.contains_key(key) {
                continue;
            }
            if declared.prune {
                out.lines.push(format!(
                    "- channel {} (not in cotal.toml; prune_channels = true)",
                    displayable(&format!("{key:?}"))
                ));
                out.writes.push(Write {
                    key: key.clone(),
                    value: None,
                    expect: Expect::Revision(entry.revision),
                    sets: BTreeMap::new(),
                });
            } else {
                out.kept.push(displayable(&format!("{key:?}")));
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The writes without their `sets` (what [`rebase`] uses, tested there).
    fn bare(writes: &[Write]) -> Vec<Write> {
        writes
            .iter()
            .map(|w| Write {
                sets: BTreeMap::new(),
                ..w.clone()
            })
            .collect()
    }

    fn entry(v: &str, revision: u64) -> Entry {
        Entry {
            value: serde_json::from_str(v).unwrap(),
            revision,
        }
    }

    fn live(description: &str) -> Settings {
        Settings {
            delivery_class: Some(DeliveryClass::Live),
            description: Some(description.into()),
            ..Settings::default()
        }
    }

    #[test]
    fn names_and_windows_are_validated() {
        for ok in ["general", "team.backend", "team.backend.api", "x-1_y"] {
            valid_channel_name(ok).unwrap();
        }
        for bad in [
            "",
            "=defaults",
            "team.*",
            "team.>",
            "a..b",
            ".a",
            "a.",
            "a b",
        ] {
            assert!(valid_channel_name(bad).is_err(), "{bad:?}");
        }
        for ok in ["1s", "24h", "7d", "90m"] {
            valid_replay_window(ok).unwrap();
        }
        for bad in ["", "h", "0h", "24", "24w", "1.5h", "-1h", "24H"] {
            assert!(valid_replay_window(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn a_declared_channel_is_created_changed_or_left_alone_keeping_other_keys() {
        let declared = SpaceChannels {
            defaults: Some(Settings {
                delivery_class: Some(DeliveryClass::Durable),
                replay_window: Some("24h".into()),
                ..Settings::default()
            }),
            channels: BTreeMap::from([("general".to_string(), live("Everyone"))]),
            prune: false,
        };
        // Nothing observed yet (a running space with an empty registry): creates.
        let d = diff(&declared, Some(&Registry::new()));
        assert_eq!(
            bare(&d.writes),
            [
                Write {
                    key: "=defaults".into(),
                    value: Some(r#"{"deliveryClass":"durable","replayWindow":"24h"}"#.into()),
                    expect: Expect::Absent,
                    sets: BTreeMap::new(),
                },
                Write {
                    key: "general".into(),
                    value: Some(r#"{"deliveryClass":"live","description":"Everyone"}"#.into()),
                    expect: Expect::Absent,
                    sets: BTreeMap::new(),
                },
            ]
        );
        // A client changed a field and added its own key: the field is restored, the key kept.
        let registry = Registry::from([
            (
                "=defaults".to_string(),
                entry(r#"{"deliveryClass":"durable","replayWindow":"24h"}"#, 3),
            ),
            (
                "general".to_string(),
                entry(
                    r#"{"deliveryClass":"durable","description":"Everyone","replay":"x"}"#,
                    7,
                ),
            ),
            (
                "random".to_string(),
                entry(r#"{"deliveryClass":"live"}"#, 9),
            ),
        ]);
        let d = diff(&declared, Some(&registry));
        assert_eq!(
            bare(&d.writes),
            [Write {
                key: "general".into(),
                value: Some(
                    r#"{"deliveryClass":"live","description":"Everyone","replay":"x"}"#.into()
                ),
                expect: Expect::Revision(7),
                sets: BTreeMap::new(),
            }]
        );
        assert_eq!(
            d.lines,
            [r#"~ channel "general": deliveryClass: "durable" -> "live""#]
        );
        assert_eq!(d.kept, ["\"random\""]);
        // prune_channels deletes what the file does not declare, at its revision.
        let pruned = diff(
            &SpaceChannels {
                prune: true,
                ..declared.clone()
            },
            Some(&registry),
        );
        assert!(bare(&pruned.writes).contains(&Write {
            key: "random".into(),
            value: None,
            expect: Expect::Revision(9),
            sets: BTreeMap::new(),
        }));
    }

    #[test]
    fn the_legacy_default_is_repaired_and_an_unset_default_seeded() {
        let none = SpaceChannels::default();
        let legacy = Registry::from([(
            "=defaults".to_string(),
            entry(r#"{"delivery":"durable"}"#, 1),
        )]);
        let d = diff(&none, Some(&legacy));
        assert_eq!(
            bare(&d.writes),
            [Write {
                key: "=defaults".into(),
                value: Some(SEEDED_DEFAULTS.into()),
                expect: Expect::Revision(1),
                sets: BTreeMap::new(),
            }]
        );
        assert!(d.lines[0].contains("legacy key"), "{:?}", d.lines);
        let d = diff(&none, Some(&Registry::new()));
        assert_eq!(d.writes[0].value.as_deref(), Some(SEEDED_DEFAULTS));
        // A default a client set is theirs while the file declares none.
        let set = Registry::from([(
            "=defaults".to_string(),
            entry(r#"{"deliveryClass":"live"}"#, 2),
        )]);
        assert!(diff(&none, Some(&set)).writes.is_empty());
        // A space this plan adds: provisioning seeds; only declarations are written.
        assert!(diff(&none, None).writes.is_empty());
        // Defaults declared without a class keep the seeded one, new space or not.
        let window_only = SpaceChannels {
            defaults: Some(Settings {
                replay_window: Some("3h".into()),
                ..Settings::default()
            }),
            ..SpaceChannels::default()
        };
        assert_eq!(
            diff(&window_only, None).writes[0].value.as_deref(),
            Some(r#"{"deliveryClass":"durable","replayWindow":"3h"}"#)
        );
        // A default no client can read (an unknown class, not an object) is seeded again.
        for broken in [r#"{"deliveryClass":"bogus","x":1}"#, r#""garbage""#, "{}"] {
            let r = Registry::from([("=defaults".to_string(), entry(broken, 4))]);
            let d = diff(&none, Some(&r));
            assert_eq!(d.writes.len(), 1, "{broken}");
            assert!(
                d.writes[0]
                    .value
                    .as_deref()
                    .unwrap()
                    .contains(r#""deliveryClass":"durable""#),
                "{broken}"
            );
        }
    }

    #[test]
    fn a_tenants_text_cannot_hide_or_reorder_what_the_operator_reads() {
        assert_eq!(displayable("evil\u{202E}gpj.exe"), "evil\\u{202e}gpj.exe");
        assert_eq!(displayable("a\u{200B}b\nc"), "a\\u{200b}b\\u{a}c");
        assert_eq!(displayable("plain 'text'"), "plain 'text'");
        assert!(valid_replay_window("999999999d").is_ok());
        assert!(valid_replay_window("9999999999d").is_err());
    }

    #[test]
    fn a_write_a_tenant_raced_is_rebased_on_the_fresh_value_keeping_its_fields() {
        let declared = SpaceChannels {
            channels: BTreeMap::from([("general".to_string(), live("Everyone"))]),
            ..SpaceChannels::default()
        };
        let registry = Registry::from([(
            "general".to_string(),
            entry(r#"{"deliveryClass":"durable","description":"Everyone"}"#, 7),
        )]);
        let writes = diff(&declared, Some(&registry)).writes;
        // The seeded default (none declared) is not rebased over a client's: a readable
        // default a client wrote holds, a deleted one is seeded again.
        let seeded = writes.iter().find(|w| w.key == DEFAULTS_KEY).unwrap();
        assert!(seeded.sets.is_empty(), "{seeded:?}");
        assert_eq!(
            rebase(seeded, Some((br#"{"deliveryClass":"live"}"#, 4))),
            Rebased::Holds(Some(4))
        );
        assert!(matches!(
            rebase(seeded, None),
            Rebased::Retry(Write {
                expect: Expect::Absent,
                ..
            })
        ));
        assert_eq!(rebase(seeded, Some((b"{}", 5))), Rebased::Conflict);
        let planned = writes.iter().find(|w| w.key == "general").unwrap().clone();
        assert_eq!(planned.expect, Expect::Revision(7));
        // A tenant wrote the key again (its own field, and the managed one back): the write
        // keeps its field and sets the declared ones, at the fresh revision.
        let fresh = br#"{"deliveryClass":"durable","description":"Everyone","replay":"y"}"#;
        let Rebased::Retry(again) = rebase(&planned, Some((fresh, 9))) else {
            panic!("rebased");
        };
        assert_eq!(again.expect, Expect::Revision(9));
        assert_eq!(
            serde_json::from_str::<serde_json::Value>(again.value.as_deref().unwrap()).unwrap(),
            serde_json::json!({"deliveryClass":"live","description":"Everyone","replay":"y"})
        );
        // The key already says what is declared: nothing to write.
        let done = br#"{"deliveryClass":"live","description":"Everyone","replay":"y"}"#;
        assert_eq!(rebase(&planned, Some((done, 11))), Rebased::Holds(Some(11)));
        // Deleted meanwhile: created again with the declared fields only.
        let Rebased::Retry(created) = rebase(&planned, None) else {
            panic!("rebased");
        };
        assert_eq!(created.expect, Expect::Absent);
        // A deletion: at the fresh revision, or done when the key is gone.
        let deletion = Write {
            key: "old".into(),
            value: None,
            expect: Expect::Revision(3),
            sets: BTreeMap::new(),
        };
        assert_eq!(rebase(&deletion, None), Rebased::Holds(None));
        assert!(matches!(
            rebase(&deletion, Some((b"{}", 5))),
            Rebased::Retry(Write {
                expect: Expect::Revision(5),
                ..
            })
        ));
        // A write saved without `sets` is not rebased, unless the key already holds its value.
        let saved = Write {
            sets: BTreeMap::new(),
            ..planned.clone()
        };
        assert_eq!(rebase(&saved, Some((fresh, 9))), Rebased::Conflict);
        let exact = planned.value.clone().unwrap();
        assert_eq!(
            rebase(&saved, Some((exact.as_bytes(), 12))),
            Rebased::Holds(Some(12))
        );
    }
}
