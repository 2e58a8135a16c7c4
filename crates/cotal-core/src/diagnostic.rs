//! What cotal tells a person when it refuses or fails, as data: what happened, the tenants it
//! concerns and the blast radius where there are some, and what to do next. Every refusal and
//! error is one [`Diagnostic`], rendered by its one `Display` (the `what` line, then
//! `blast radius: ...` (or, when it is none, what was not done: `Nothing was changed.`) and
//! each `next: ...` on lines of their own); [`crate::error::Error`] says
//! which kind it is, and so which exit code.
//!
//! Pure. Invariant: a diagnostic is built from names, paths, public keys and figures only; never
//! a seed.

use crate::model::SpaceName;
use serde::Serialize;

/// One refusal or error.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize)]
pub struct Diagnostic {
    /// What happened (one or more sentences; may span lines).
    pub what: String,
    /// The tenants it concerns, when it concerns some.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub tenants: Vec<SpaceName>,
    /// What was (or would have been) touched: evictions, data destroyed, or "none".
    #[serde(skip_serializing_if = "Option::is_none")]
    pub blast: Option<String>,
    /// What to do next, each a way out that works.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub next: Vec<String>,
    /// What happened around it, said last: an apply that failed says what it put back or what
    /// was already in force.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub notes: Vec<String>,
}

impl Diagnostic {
    pub fn new(what: impl Into<String>) -> Self {
        Diagnostic {
            what: what.into(),
            ..Diagnostic::default()
        }
    }

    /// A refusal: what was seen, the blast radius of refusing (usually none: nothing was
    /// changed), and the way out.
    pub fn refusal(
        what: impl Into<String>,
        blast: impl Into<String>,
        next: impl Into<String>,
    ) -> Self {
        Diagnostic::new(what).blast(blast).next(next)
    }

    /// The blast radius.
    pub fn blast(mut self, blast: impl Into<String>) -> Self {
        self.blast = Some(blast.into());
        self
    }

    /// One more thing to do next.
    pub fn next(mut self, next: impl Into<String>) -> Self {
        self.next.push(next.into());
        self
    }

    /// The tenants it concerns.
    pub fn tenants(mut self, tenants: impl IntoIterator<Item = SpaceName>) -> Self {
        self.tenants.extend(tenants);
        self
    }

    /// One more note, said last in parentheses.
    pub fn note(mut self, note: impl Into<String>) -> Self {
        self.notes.push(note.into());
        self
    }

    /// The same, with `context` said before what happened (`context: what`).
    pub fn context(mut self, context: impl std::fmt::Display) -> Self {
        self.what = format!("{context}: {}", self.what);
        self
    }
}

impl std::fmt::Display for Diagnostic {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.what)?;
        match self.blast.as_deref().map(nothing_touched) {
            // A refusal that could not have touched anything says so in plain words; a blast
            // radius is named only where there is one.
            Some(Some(plain)) => write!(f, "\n{plain}")?,
            Some(None) => write!(
                f,
                "\nblast radius: {}",
                self.blast.as_deref().unwrap_or_default()
            )?,
            None => {}
        }
        for next in &self.next {
            write!(f, "\nnext: {next}")?;
        }
        for note in &self.notes {
            write!(f, "\n({note})")?;
        }
        Ok(())
    }
}

/// `none, nothing was changed.` as `Nothing was changed.`: a blast radius of none said as what
/// it is. `None` for a blast radius that names something.
fn nothing_touched(blast: &str) -> Option<String> {
    let rest = blast
        .strip_prefix("none, ")
        .or_else(|| blast.strip_prefix("none: "))?;
    let mut chars = rest.chars();
    let first = chars.next()?;
    Some(first.to_uppercase().chain(chars).collect())
}

/// A message with nothing more to say than what happened.
impl From<String> for Diagnostic {
    fn from(what: String) -> Self {
        Diagnostic::new(what)
    }
}

impl From<&str> for Diagnostic {
    fn from(what: &str) -> Self {
        Diagnostic::new(what)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_diagnostic_renders_what_then_its_blast_radius_then_each_way_out() {
        let d = Diagnostic::new("cannot remove \"a\": it is protected.")
            .tenants([SpaceName::parse("a").unwrap()])
            .blast("none, nothing was changed.")
            .next("set protect = false and apply")
            .next("then remove it");
        assert_eq!(
            d.to_string(),
            "cannot remove \"a\": it is protected.\nNothing was changed.\nnext: set protect = false and apply\nnext: then remove it"
        );
        let evicting = Diagnostic::new("x").blast("evicts 3 connections of \"a\"");
        assert_eq!(
            evicting.to_string(),
            "x\nblast radius: evicts 3 connections of \"a\""
        );
        assert_eq!(Diagnostic::from("plain").to_string(), "plain");
        let json = serde_json::to_value(&d).unwrap();
        assert_eq!(json["tenants"][0], "a");
        assert_eq!(json["next"][1], "then remove it");
    }
}
