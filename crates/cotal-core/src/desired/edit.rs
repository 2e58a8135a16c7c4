//! Edits of `cotal.toml` that keep its comments and formatting (toml_edit), for the imperative
//! `cotal space` verbs. Pure: text in, text out.
//!
//! Invariant: an edit touches only the one `[spaces.NAME]` table it is about; everything else in
//! the file comes back byte for byte.

use crate::model::{SpaceName, SpaceState};
use toml_edit::{DocumentMut, Item, Table, value};

/// Limits given on the command line as `key=value`.
pub const LIMIT_KEYS: [&str; 6] = [
    "max_connections",
    "max_storage",
    "max_memory",
    "max_streams",
    "max_consumers",
    "max_payload",
];

fn parse(text: &str) -> Result<DocumentMut, String> {
    text.parse::<DocumentMut>()
        .map_err(|e| format!("cotal.toml: {e}"))
}

fn spaces(doc: &mut DocumentMut) -> Result<&mut Table, String> {
    let item = doc.entry("spaces").or_insert_with(|| {
        let mut t = Table::new();
        t.set_implicit(true);
        Item::Table(t)
    });
    item.as_table_mut()
        .ok_or_else(|| "cotal.toml: `spaces` is not a table".to_string())
}

/// The key of the space's table as the file writes it: the name in any Unicode form that
/// normalises to it (a file may write `cafe\u{301}` for the space `café`).
fn key_of(spaces: &dyn toml_edit::TableLike, space: &SpaceName) -> Option<String> {
    spaces
        .iter()
        .map(|(key, _)| key)
        .find(|key| SpaceName::parse(key).is_ok_and(|n| &n == space))
        .map(str::to_string)
}

/// Whether the file has a table for the space.
pub fn has_space(text: &str, space: &SpaceName) -> Result<bool, String> {
    let doc = parse(text)?;
    Ok(doc
        .get("spaces")
        .and_then(|s| s.as_table_like())
        .is_some_and(|t| key_of(t, space).is_some()))
}

/// Add `[spaces.NAME]` with the given settings. Refuses a space the file already has.
pub fn add_space(
    text: &str,
    space: &SpaceName,
    state: SpaceState,
    protect: bool,
    limits: &[(String, String)],
) -> Result<String, String> {
    let mut doc = parse(text)?;
    let spaces = spaces(&mut doc)?;
    if key_of(spaces, space).is_some() {
        return Err(format!(
            "cotal.toml already has a table for {}",
            space.quoted()
        ));
    }
    let mut table = Table::new();
    if state != SpaceState::Active {
        table.insert("state", value(state.to_string()));
    }
    if protect {
        table.insert("protect", value(true));
    }
    if !limits.is_empty() {
        let mut l = Table::new();
        for (key, raw) in limits {
            if !LIMIT_KEYS.contains(&key.as_str()) {
                return Err(format!(
                    "unknown limit {key:?}: use one of {}",
                    LIMIT_KEYS.join(", ")
                ));
            }
            let v = match raw.parse::<i64>() {
                Ok(n) => value(n),
                Err(_) => value(raw.clone()),
            };
            l.insert(key, v);
        }
        table.insert("limits", Item::Table(l));
    }
    spaces.insert(space.as_str(), Item::Table(table));
    Ok(doc.to_string())
}

/// Remove the space's table (and its sub-tables). Returns the text and whether it was there.
pub fn remove_space(text: &str, space: &SpaceName) -> Result<(String, bool), String> {
    let mut doc = parse(text)?;
    let removed = match doc.get_mut("spaces").and_then(|s| s.as_table_like_mut()) {
        Some(t) => match key_of(t, space) {
            Some(key) => t.remove(&key).is_some(),
            None => false,
        },
        None => false,
    };
    Ok((doc.to_string(), removed))
}

/// Set `state` of an existing space's table; `reason` is its `suspend_reason` when suspended
/// (`None` leaves the one written as it is). Resuming removes `suspend_reason`.
pub fn set_state(
    text: &str,
    space: &SpaceName,
    state: SpaceState,
    reason: Option<&str>,
) -> Result<String, String> {
    let mut doc = parse(text)?;
    let table = doc
        .get_mut("spaces")
        .and_then(|s| s.as_table_like_mut())
        .and_then(|t| {
            let key = key_of(t, space)?;
            t.get_mut(&key)
        })
        .and_then(|t| t.as_table_like_mut())
        .ok_or_else(|| format!("cotal.toml has no table for {}", space.quoted()))?;
    match state {
        SpaceState::Active => {
            table.remove("state");
            table.remove("suspend_reason");
        }
        SpaceState::Suspended => {
            table.insert("state", value("suspended"));
            if let Some(reason) = reason {
                table.insert("suspend_reason", value(reason));
            }
        }
        SpaceState::Archived => {
            table.insert("state", value("archived"));
            table.remove("suspend_reason");
        }
    }
    Ok(doc.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    const FILE: &str = "# my broker\nversion = 1\n\n[broker]\nport = 4222 # keep\n\n# the design team\n[spaces.design]\nprotect = true\n\n[spaces.release] # shipping\n";

    fn name(s: &str) -> SpaceName {
        SpaceName::parse(s).unwrap()
    }

    #[test]
    fn adding_keeps_every_comment_and_parses() {
        let out = add_space(
            FILE,
            &name("ops team"),
            SpaceState::Suspended,
            true,
            &[
                ("max_storage".into(), "10GiB".into()),
                ("max_connections".into(), "5".into()),
            ],
        )
        .unwrap();
        assert!(out.starts_with(FILE), "{out}");
        let d = crate::desired::parse(&out, "t").unwrap();
        let ops = &d.spaces[&name("ops team")].spec;
        assert_eq!(ops.state, SpaceState::Suspended);
        assert!(ops.protect);
        assert_eq!(ops.limits.max_connections, Some(5));
        assert!(
            add_space(FILE, &name("design"), SpaceState::Active, false, &[])
                .unwrap_err()
                .contains("already")
        );
        assert!(
            add_space(
                FILE,
                &name("x"),
                SpaceState::Active,
                false,
                &[("max_subs".into(), "1".into())]
            )
            .unwrap_err()
            .contains("unknown limit")
        );
    }

    #[test]
    fn removing_and_suspending_touch_one_table() {
        let (out, removed) = remove_space(FILE, &name("design")).unwrap();
        assert!(removed);
        assert!(out.contains("port = 4222 # keep"));
        assert!(out.contains("[spaces.release] # shipping"));
        assert!(!out.contains("protect"));
        assert!(!remove_space(FILE, &name("nope")).unwrap().1);

        let out = set_state(FILE, &name("release"), SpaceState::Suspended, None).unwrap();
        assert!(
            out.contains("[spaces.release] # shipping\nstate = \"suspended\""),
            "{out}"
        );
        let back = set_state(&out, &name("release"), SpaceState::Active, None).unwrap();
        assert_eq!(back, FILE);
        assert!(set_state(FILE, &name("nope"), SpaceState::Active, None).is_err());
        // A reason is written with the suspension and goes with the resumption.
        let out = set_state(
            FILE,
            &name("release"),
            SpaceState::Suspended,
            Some("unpaid"),
        )
        .unwrap();
        assert!(out.contains("suspend_reason = \"unpaid\""), "{out}");
        let back = set_state(&out, &name("release"), SpaceState::Active, None).unwrap();
        assert_eq!(back, FILE);
    }
}
