//! `cotal fmt`: `cotal.toml` in one canonical layout that keeps every comment and every value
//! (toml_edit), like `terraform fmt`. Pure: text in, text out.
//!
//! The layout: `key = value` with one space around `=`; a trailing comment where its author put
//! it (at least one space after its value: comments aligned in a column stay aligned); comment
//! lines kept (a blank line setting a comment block apart kept too), without trailing whitespace or indentation; at most one blank line
//! in a row, exactly one before each table header (none at the top); inline tables and arrays
//! spaced by toml_edit; one newline at the end. Keys and tables keep their order.
//!
//! Invariant: what the file says never changes ([`crate::trust::digest::desired_digest`] of the
//! result equals that of the input, which [`format`] checks), so a saved plan stays valid.

use toml_edit::{DocumentMut, Item, RawString, Table, Value};

/// The canonical layout of `text`; an error when it is not TOML.
pub fn format(text: &str) -> Result<String, String> {
    let mut doc = text
        .parse::<DocumentMut>()
        .map_err(|e| format!("cotal.toml: {e}"))?;
    table(doc.as_table_mut());
    let trailing = doc.trailing().as_str().map(comments).unwrap_or_default();
    doc.set_trailing(trailing);
    let out = lines(&doc.to_string());
    if crate::trust::digest::desired_digest(&out) != crate::trust::digest::desired_digest(text) {
        return Err("formatting would change what cotal.toml says; it was left as it is".into());
    }
    // Formatting moves no `#` into or out of a string: the same count means no comment lost.
    if out.matches('#').count() != text.matches('#').count() {
        return Err("formatting would lose a comment; it was left as it is".into());
    }
    Ok(out)
}

/// The comment lines of a decor's text (each trimmed, blank lines collapsed to one; a blank
/// line before the first comment is kept, so a comment block stays set apart from what is
/// above it).
fn comments(raw: &str) -> String {
    let mut out = String::new();
    let mut blank = false;
    let mut first = true;
    for line in raw.split('\n') {
        let line = line.trim();
        if line.is_empty() {
            // A decor starts at the beginning of its line: an empty piece first is a blank line.
            blank = !out.is_empty() || first;
            continue;
        }
        first = false;
        if blank {
            out.push('\n');
            blank = false;
        }
        out.push_str(line);
        out.push('\n');
    }
    if blank && raw.ends_with("\n\n") {
        out.push('\n');
    }
    out
}

fn raw(r: Option<&RawString>) -> &str {
    r.and_then(RawString::as_str).unwrap_or("")
}

fn table(t: &mut Table) {
    let prefix = comments(raw(t.decor().prefix()));
    t.decor_mut().set_prefix(prefix);
    let suffix = raw(t.decor().suffix()).to_string();
    t.decor_mut().set_suffix(trailing_comment(&suffix));
    for (mut key, item) in t.iter_mut() {
        if item.is_value() {
            // `key = value`: comment lines above it kept, one space before `=`.
            let prefix = comments(raw(key.leaf_decor().prefix()));
            key.leaf_decor_mut().set_prefix(prefix);
            key.leaf_decor_mut().set_suffix(" ");
        } else {
            // A header's key: `[name]`, its comments are the table's.
            key.leaf_decor_mut().set_prefix("");
            key.leaf_decor_mut().set_suffix("");
        }
        match item {
            Item::Value(v) => value(v),
            Item::Table(sub) => table(sub),
            Item::ArrayOfTables(array) => {
                for sub in array.iter_mut() {
                    table(sub);
                }
            }
            Item::None => {}
        }
    }
}

fn value(v: &mut Value) {
    let suffix = trailing_comment(raw(v.decor().suffix()));
    // toml_edit's own layout of an array or inline table drops the comments inside it: one
    // that holds a comment is left as written.
    let has_comment = v.to_string().contains('#');
    match v {
        Value::InlineTable(t) if !has_comment => t.fmt(),
        Value::Array(a) if !has_comment => a.fmt(),
        _ => {}
    }
    v.decor_mut().set_prefix(" ");
    v.decor_mut().set_suffix(suffix);
}

/// A line's trailing comment as written after a value or a header: the space before it is the
/// author's (comments aligned in a column stay aligned), at least one; nothing when there is
/// no comment.
fn trailing_comment(written: &str) -> String {
    let comment = written.trim();
    if comment.is_empty() {
        return String::new();
    }
    let lead = &written[..written.len() - written.trim_start().len()];
    if lead.is_empty() || lead.contains('\n') {
        format!(" {comment}")
    } else {
        format!("{lead}{comment}")
    }
}

/// Trailing whitespace off every line, at most one blank line in a row, one before each table
/// header, none at the top, one newline at the end.
fn lines(text: &str) -> String {
    let mut out: Vec<&str> = Vec::new();
    for line in text.lines().map(str::trim_end) {
        let header = line.starts_with('[');
        if line.is_empty() {
            if out.last().is_some_and(|l| !l.is_empty()) {
                out.push("");
            }
            continue;
        }
        if header && out.last().is_some_and(|l| !l.is_empty()) {
            // A header's own comment lines stay with it: the blank line goes above them.
            let mut at = out.len();
            while at > 0 && out[at - 1].starts_with('#') {
                at -= 1;
            }
            if at > 0 && !out[at - 1].is_empty() {
                out.insert(at, "");
            }
        }
        out.push(line);
    }
    while out.last().is_some_and(|l| l.is_empty()) {
        out.pop();
    }
    let mut s = out.join("\n");
    s.push('\n');
    s
}

#[cfg(test)]
mod tests {
    use super::format;

    #[test]
    fn the_layout_is_canonical_keeps_every_comment_and_is_stable() {
        let messy = "\n\n# my broker\nversion=1   \n[broker]   # the one server\nport    =  4222 #   keep\nhost=\"127.0.0.1\"\n\n\n\n# the design team\n[spaces.design]\nprotect=true\n[spaces.design.limits]\nmax_connections   = 200\n[spaces.release] # shipping\nchannels.general = {delivery_class=\"live\",description=\"x\"}\n";
        let out = format(messy).unwrap();
        assert_eq!(
            out,
            "# my broker\nversion = 1\n\n[broker]   # the one server\nport = 4222 #   keep\nhost = \"127.0.0.1\"\n\n# the design team\n[spaces.design]\nprotect = true\n\n[spaces.design.limits]\nmax_connections = 200\n\n[spaces.release] # shipping\nchannels.general = { delivery_class = \"live\", description = \"x\" }\n"
        );
        assert_eq!(format(&out).unwrap(), out, "formatting is stable");
        assert_eq!(
            crate::trust::digest::desired_digest(&out),
            crate::trust::digest::desired_digest(messy)
        );
        assert!(format("not = [toml").is_err());
    }

    #[test]
    fn the_starter_keeps_its_meaning_and_every_comment() {
        let starter = crate::desired::STARTER;
        let out = format(starter).unwrap();
        assert_eq!(
            crate::trust::digest::desired_digest(&out),
            crate::trust::digest::desired_digest(starter)
        );
        assert_eq!(out.matches('#').count(), starter.matches('#').count());
        assert!(out.contains("# One table per space"), "comments kept");
        assert_eq!(format(&out).unwrap(), out, "stable");
        // What `init` writes is already canonical: the pre-commit hook passes on day one.
        assert_eq!(out, starter, "the starter is fmt-clean");
    }

    #[test]
    fn aligned_trailing_comments_and_a_blank_line_before_a_comment_block_are_kept() {
        let text = "[broker]\nhost = \"127.0.0.1\"        # listener\nstore_dir = \".cotal/nats\" # store\n\n# a block of its own\n# [spaces.example]\n";
        assert_eq!(format(text).unwrap(), text);
    }

    #[test]
    fn every_example_is_fmt_clean() {
        let examples = concat!(env!("CARGO_MANIFEST_DIR"), "/../../examples");
        let mut seen = 0;
        for entry in std::fs::read_dir(examples).unwrap().flatten() {
            let path = entry.path();
            if path.extension().and_then(|e| e.to_str()) != Some("toml") {
                continue;
            }
            seen += 1;
            let text = std::fs::read_to_string(&path).unwrap();
            assert_eq!(
                format(&text).unwrap(),
                text,
                "{} is not fmt-clean",
                path.display()
            );
        }
        assert!(seen > 0, "the examples were found in {examples}");
    }

    #[test]
    fn a_comment_inside_an_array_is_kept_and_the_array_left_as_written() {
        let text = "[broker.tls]\nnames = [\n  \"a.example\", # public\n  \"b.example\",\n]\nplain = [1,2]\n";
        let out = format(text).unwrap();
        assert!(out.contains("\"a.example\", # public"), "{out}");
        assert!(out.contains("plain = [1, 2]"), "{out}");
    }
}
