//! `cotal creds list` rendered: each user handed out as a row (its name, key, profile or role,
//! issue, expiry and where it stands), the versioned JSON document and the text table. The edge
//! (`cotal::ops::creds`) reads the ledger and judges each user; the minted and revoked
//! documents are in [`super::documents`].

use crate::model::stamp;
use crate::trust::jwt::Revocations;

/// Where a user handed out stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub enum UserState {
    #[serde(rename = "valid")]
    Valid,
    /// Revoked in the account's JWT the broker loads.
    #[serde(rename = "revoked")]
    Revoked,
    /// Recorded, not yet in the account's JWT (the next apply puts it there).
    #[serde(rename = "revoking")]
    Revoking,
    #[serde(rename = "expired")]
    Expired,
    /// Its account no longer lists the key that signed it (`cotal rotate account` replaced
    /// it, or a monitoring user handed out before the monitoring account).
    #[serde(rename = "refused (old signing key)")]
    OldSigningKey,
}

/// One user of a listing.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UserRow {
    pub name: String,
    /// Its public key (U…).
    pub key: String,
    /// A space user's profile (`member`, `admin`) or a system user's role (`monitor`).
    pub kind: String,
    /// Unix seconds.
    pub issued: i64,
    /// Unix seconds; `None`: never expires.
    pub expires: Option<i64>,
    pub state: UserState,
}

/// What a listing's rows are of: a space's users (each with its `profile`) or the system
/// account's (each with its `role`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Of {
    Space,
    System,
}

impl Of {
    /// The column's header, the row's JSON key and the column's width.
    fn column(self) -> (&'static str, &'static str, usize) {
        match self {
            Of::Space => ("PROFILE", "profile", 8),
            Of::System => ("ROLE", "role", 14),
        }
    }
}

fn row_json(r: &UserRow, of: Of) -> serde_json::Value {
    let mut v = serde_json::json!({
        "name": r.name,
        "key": r.key,
        "issued": stamp(r.issued),
        "expires": r.expires.map(stamp),
        "state": r.state,
    });
    v[of.column().1] = serde_json::Value::String(r.kind.clone());
    v
}

/// The versioned JSON document of a listing (`schemas/creds-list.schema.json`), pretty, with a
/// trailing newline: a space's (`space` given, with the ledger's `revoked`) or the system
/// account's (`space` null, no `revoked`).
pub fn list_json(
    space: Option<&str>,
    account: &str,
    rows: &[UserRow],
    revoked: Option<&Revocations>,
) -> String {
    let of = if space.is_some() {
        Of::Space
    } else {
        Of::System
    };
    let users: Vec<serde_json::Value> = rows.iter().map(|r| row_json(r, of)).collect();
    let mut doc = serde_json::json!({
        "format_version": super::documents::FORMAT_VERSION,
        "space": space,
        "account": account,
        "users": users,
    });
    if let Some(revoked) = revoked {
        doc["revoked"] = serde_json::json!(revoked);
    }
    let mut s = serde_json::to_string_pretty(&doc).expect("json");
    s.push('\n');
    s
}

/// The users table: name, profile or role, state, issue, expiry and key; for a space, the
/// line that says every user up to a time is revoked, when the ledger says so.
pub fn table(rows: &[UserRow], of: Of, revoked: Option<&Revocations>) -> String {
    use std::fmt::Write as _;
    let (header, _, width) = of.column();
    let mut out = String::new();
    let _ = writeln!(
        out,
        "{:<20} {header:<width$} {:<8} {:<21} {:<21} KEY",
        "USER", "STATE", "ISSUED", "EXPIRES"
    );
    for r in rows {
        let state = serde_json::to_value(r.state).expect("a state serializes");
        let _ = writeln!(
            out,
            "{:<20} {:<width$} {:<8} {:<21} {:<21} {}",
            r.name,
            r.kind,
            state.as_str().unwrap_or("never"),
            stamp(r.issued),
            r.expires.map(stamp).unwrap_or_else(|| "never".into()),
            r.key
        );
    }
    if let Some(all) = revoked.and_then(|r| r.get("*")) {
        let _ = writeln!(out, "every user issued up to {} is revoked", stamp(*all));
    }
    out
}
