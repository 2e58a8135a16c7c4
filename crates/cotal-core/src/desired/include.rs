//! `[broker] include`: an operator-owned file of nats-server settings cotal does not model
//! (`max_connections`, `write_deadline`, `lame_duck_duration`, `ping_interval`, ...), read and
//! inlined into every node's rendered config between two marker comments, so its content is
//! part of the plan's diff, of the pins, and of the digest the reload must confirm.
//!
//! Invariants: only the settings of [`ALLOWED`] are accepted (client and logging tuning: any
//! other key is refused at its line, so an include can neither set what cotal renders nor open
//! the broker beside it), and only values cotal reads exactly as nats-server does (quoted
//! strings without control characters or `$`, integers without a unit, `true` and `false`, and
//! lists of those; a unit, a decimal, a variable, a bare word or a block is refused, with the
//! advice to quote a duration or write a size in bytes), since the digest of the config must
//! be the one nats-server computes. A file holding a control character other than a newline or a
//! tab (a carriage return but as half of CRLF) is refused whole: nats-server's lexer ends a
//! comment at `\r`, a terminal does not, so such a file could set what no reader of it sees.
//! Nothing here prints the file's values in an error. Pure: the file is read by the edge's
//! `cotal::include::observe`.

use serde_json::Value;

/// The settings an include may set: tuning of the client protocol and of logging verbosity,
/// none of which changes whose broker this is, who may connect or how (every alias nats-server
/// reads for the same setting is one group). Anything else (listeners, TLS and its bypasses,
/// trust, accounts, resolvers, profiling, the system account, JetStream, nested includes) is
/// refused: cotal renders it, or it would open the broker beside what `cotal.toml` declares.
pub const ALLOWED: &[&[&str]] = &[
    &["max_connections", "max_conn"],
    &["max_subscriptions", "max_subs"],
    &["max_payload"],
    &["max_pending"],
    &["ping_interval"],
    &["ping_max"],
    &["write_deadline"],
    &["lame_duck_duration"],
    &["lame_duck_grace_period"],
    &["max_closed_clients"],
    &["connect_error_reports"],
    &["reconnect_error_reports"],
    &["debug"],
    &["trace"],
    &["trace_verbose"],
    &["logtime"],
    &["logtime_utc"],
    &["max_traced_msg_len"],
    &["disable_sublist_cache", "no_sublist_cache"],
    &["server_tags"],
];

/// The setting group of `key` (nats-server reads keys case-insensitively), if allowed.
fn group(key: &str) -> Option<&'static str> {
    let key = key.to_ascii_lowercase();
    ALLOWED
        .iter()
        .find(|g| g.contains(&key.as_str()))
        .map(|g| g[0])
}

/// The largest include cotal reads.
pub const LIMIT: u64 = 64 << 10;

/// Every character of `text` nats-server's lexer could read otherwise than cotal's reader, as
/// `FILE:LINE: ...` problems: a control character other than a newline or a tab (a carriage
/// return ends a comment for nats-server and not for a terminal, so `# ok\rhttp: 1` hides a
/// setting behind a comment; a carriage return is kept only as the first half of a CRLF line
/// end, which both read alike).
fn control_characters(text: &str, file: &str) -> Vec<String> {
    let mut problems = Vec::new();
    for (n, line) in text.split('\n').enumerate() {
        let line = line.strip_suffix('\r').unwrap_or(line);
        if let Some(c) = line.chars().find(|&c| c != '\t' && c.is_control()) {
            problems.push(format!(
                "{file}:{}: a control character (U+{:04X}) outside a line end: nats-server's reader and a terminal would not agree on what this line sets (a carriage return ends a comment for nats-server); remove it",
                n + 1,
                c as u32
            ));
        }
    }
    problems
}

/// The top-level settings of `text`, in order, as nats-server's parser reads them; every
/// problem as `FILE:LINE: ...`. A text holding a control character nats-server could read
/// otherwise than cotal does is refused whole, nothing of it read as settings.
pub fn parse(text: &str, file: &str) -> (Vec<(String, Value)>, Vec<String>) {
    let controls = control_characters(text, file);
    if !controls.is_empty() {
        return (Vec::new(), controls);
    }
    let mut p = Parser {
        chars: text.chars().collect(),
        i: 0,
        line: 1,
        file,
        problems: Vec::new(),
        depth: 0,
    };
    let values = p.map_body(true);
    (values, p.problems)
}

struct Parser<'a> {
    chars: Vec<char>,
    i: usize,
    line: usize,
    file: &'a str,
    problems: Vec<String>,
    /// Blocks entered: only the outermost is refused (what it holds is read past).
    depth: usize,
}

impl Parser<'_> {
    fn peek(&self) -> Option<char> {
        self.chars.get(self.i).copied()
    }

    fn bump(&mut self) -> Option<char> {
        let c = self.peek()?;
        self.i += 1;
        if c == '\n' {
            self.line += 1;
        }
        Some(c)
    }

    fn problem(&mut self, line: usize, what: impl std::fmt::Display) {
        self.problems.push(format!("{}:{line}: {what}", self.file));
    }

    /// Whitespace and comments; with `newlines`, line ends, commas and semicolons too.
    fn skip(&mut self, newlines: bool) {
        while let Some(c) = self.peek() {
            if c == '#' || (c == '/' && self.chars.get(self.i + 1) == Some(&'/')) {
                while self.peek().is_some_and(|c| c != '\n') {
                    self.bump();
                }
            } else if c == ' '
                || c == '\t'
                || c == '\r'
                || (newlines && (c == '\n' || c == ',' || c == ';'))
            {
                self.bump();
            } else {
                break;
            }
        }
    }

    /// Key-value pairs until `}` (or the end, at the top level).
    fn map_body(&mut self, top: bool) -> Vec<(String, Value)> {
        let mut out: Vec<(String, Value)> = Vec::new();
        let mut seen: Vec<&'static str> = Vec::new();
        loop {
            self.skip_lines();
            match self.peek() {
                None => {
                    if !top {
                        self.problem(self.line, "a block is not closed with `}`");
                    }
                    return out;
                }
                Some('}') if !top => {
                    self.bump();
                    return out;
                }
                _ => {}
            }
            let line = self.line;
            let key = self.key();
            if key.is_empty() {
                let c = self.bump().unwrap_or(' ');
                self.problem(line, format!("unexpected {c:?}"));
                continue;
            }
            self.skip(false);
            if matches!(self.peek(), Some(':') | Some('=')) {
                self.bump();
                self.skip(false);
            }
            let value = self.value(line);
            if value.is_none() && self.depth == 0 {
                // Refused (or a block, read past): what is left of its line says nothing more.
                while self.peek().is_some_and(|c| c != '\n') {
                    self.bump();
                }
            }
            if value.is_some() && !self.value_end(top) {
                self.problem(line, "a value must end its line (a new line, a comment, `,` or `;` after it): nats-server refuses another setting on the same line");
                while self.peek().is_some_and(|c| c != '\n') {
                    self.bump();
                }
                continue;
            }
            if !top {
                // The block itself is refused; what it holds is only read past.
                continue;
            }
            let Some(group) = group(&key) else {
                self.problem(line, format!("`{key}` is not a setting an include may set: cotal renders listeners, TLS, the cluster, JetStream, trust and accounts itself (set them in cotal.toml), and refuses what would open the broker beside them; an include sets client and logging tuning ({})", ALLOWED.iter().map(|g| g[0]).collect::<Vec<_>>().join(", ")));
                continue;
            };
            if let Some(v) = value {
                if seen.contains(&group) {
                    self.problem(line, format!("`{key}` sets `{group}` a second time (nats-server would apply one of them)"));
                    continue;
                }
                seen.push(group);
                out.push((key, v));
            }
        }
    }

    /// Between settings, as nats-server's lexer skips there: whitespace, line ends and
    /// comments, never a `,` or `;` (those only end a value: a line starting with one is a key
    /// to nats-server).
    fn skip_lines(&mut self) {
        loop {
            self.skip(false);
            match self.peek() {
                Some('\n') => {
                    self.bump();
                }
                _ => return,
            }
        }
    }

    /// Whether what follows a value ends it as nats-server requires: blanks and a comment, then
    /// a line end, the end of the text, one `,` or `;` (consumed), or (in a block) its `}`.
    fn value_end(&mut self, top: bool) -> bool {
        self.skip(false);
        match self.peek() {
            None | Some('\n') => true,
            Some(',' | ';') => {
                self.bump();
                true
            }
            Some('}') => !top,
            Some(_) => false,
        }
    }

    fn key(&mut self) -> String {
        let mut key = String::new();
        while let Some(c) = self.peek() {
            if c.is_ascii_alphanumeric() || c == '_' || c == '-' || c == '.' || c == '$' {
                key.push(c);
                self.bump();
            } else {
                break;
            }
        }
        key
    }

    fn value(&mut self, line: usize) -> Option<Value> {
        match self.peek() {
            Some('{') => {
                // A block could hide an `include` of its own, out of the plan's sight.
                self.bump();
                self.depth += 1;
                let _ = self.map_body(false);
                self.depth -= 1;
                if self.depth == 0 {
                    self.problem(line, "a block `{ ... }`: an include sets plain values only");
                }
                None
            }
            Some('[') => {
                // As nats-server's array lexer reads it: blanks, line ends and comments before
                // a value; after one, a `,` or a line end (or the `]`); never `;`, an empty
                // value (`[1,,2]`) or two values side by side (`[1 2]`).
                self.bump();
                let mut items = Vec::new();
                loop {
                    self.skip_lines();
                    match self.peek() {
                        Some(']') => {
                            self.bump();
                            return Some(Value::Array(items));
                        }
                        None => {
                            self.problem(line, "a list is not closed with `]`");
                            return None;
                        }
                        Some(c @ (',' | ';')) => {
                            self.problem(
                                line,
                                format!("a list holds `{c}` where a value should be"),
                            );
                            return None;
                        }
                        _ => {
                            let l = self.line;
                            match self.value(l) {
                                Some(v) => items.push(v),
                                None => return None,
                            }
                        }
                    }
                    self.skip(false);
                    match self.peek() {
                        Some(',') => {
                            self.bump();
                        }
                        Some('\n' | ']') | None => {}
                        Some(_) => {
                            self.problem(
                                line,
                                "a list's values are separated by `,` or a new line",
                            );
                            return None;
                        }
                    }
                }
            }
            Some(q @ ('"' | '\'')) => {
                self.bump();
                let mut s = String::new();
                loop {
                    match self.bump() {
                        None | Some('\n') => {
                            self.problem(line, "a string is not closed");
                            return None;
                        }
                        Some(c) if c == q => break,
                        Some(c) if c.is_control() => {
                            self.problem(line, "a control character in a string");
                            return None;
                        }
                        Some('\\') if q == '"' => match self.bump() {
                            Some('n') => s.push('\n'),
                            Some('t') => s.push('\t'),
                            Some(c @ ('"' | '\\')) => s.push(c),
                            _ => {
                                self.problem(line, "an escape other than \\n, \\t, \\\" or \\\\");
                                return None;
                            }
                        },
                        Some(c) => s.push(c),
                    }
                }
                if s.contains('$') {
                    self.problem(line, "a `$` in a string: nats-server would read a variable there; cotal does not");
                    return None;
                }
                Some(Value::String(s))
            }
            _ => {
                let mut word = String::new();
                while let Some(c) = self.peek() {
                    if c.is_whitespace() || matches!(c, ',' | ';' | ']' | '}') {
                        break;
                    }
                    word.push(c);
                    self.bump();
                }
                match word.as_str() {
                    "true" => return Some(Value::Bool(true)),
                    "false" => return Some(Value::Bool(false)),
                    _ => {}
                }
                if !word.starts_with('+')
                    && let Ok(n) = word.parse::<i64>()
                {
                    return Some(Value::from(n));
                }
                self.problem(
                    line,
                    format!("{} is read by nats-server in a way cotal does not reproduce (a unit, a variable or a bare word): quote a duration (\"10s\"), write a size in bytes", if word.is_empty() { "an empty value".to_string() } else { "this value".to_string() }),
                );
                None
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn settings_are_read_as_nats_server_reads_them_and_others_are_refused_at_their_line() {
        let (values, problems) = parse(
            "# tuning\nmax_connections: 1000\nwrite_deadline = \"3s\"\nlame_duck_duration \"45s\"\ndebug: false\nserver_tags: [\"a\", \"b\"]\n",
            "extra.conf",
        );
        assert!(problems.is_empty(), "{problems:?}");
        assert_eq!(
            serde_json::Value::Object(values.into_iter().collect()),
            serde_json::json!({
                "max_connections": 1000, "write_deadline": "3s", "lame_duck_duration": "45s",
                "debug": false, "server_tags": ["a", "b"]
            })
        );
        let (_, problems) = parse(
            "max_connections: 10\nport: 4222\naccounts {\n  A: {}\n}\nmax_payload: 1MB\nallow_non_tls: true\nMAX_CONN: 5\nping_interval: 2.5\nmax_pending: +5\n",
            "extra.conf",
        );
        let lines: Vec<&str> = problems
            .iter()
            .map(|p| p.split(' ').next().unwrap())
            .collect();
        assert_eq!(
            lines,
            [
                "extra.conf:2:",
                "extra.conf:3:",
                "extra.conf:3:",
                "extra.conf:6:",
                "extra.conf:7:",
                "extra.conf:8:",
                "extra.conf:9:",
                "extra.conf:10:"
            ],
            "{problems:?}"
        );
        assert!(
            problems[0].contains("`port` is not a setting an include may set"),
            "{problems:?}"
        );
        assert!(
            problems[5].contains("`MAX_CONN` sets `max_connections` a second time"),
            "{problems:?}"
        );
    }

    #[test]
    fn a_carriage_return_or_other_control_character_refuses_the_include_and_crlf_line_ends_do_not()
    {
        for hidden in [
            "max_connections: 1000\n# ok\rhttp: \"0.0.0.0:17080\"\r# tuning\n",
            "trace: true # c\rhttp: 1\n",
            "debug: false\u{0b}\n",
            "logtime: true\n// \u{1b}[2Jhttp: 1\n",
        ] {
            let (values, problems) = parse(hidden, "extra.conf");
            assert!(values.is_empty(), "{hidden:?} read as {values:?}");
            assert!(
                problems
                    .iter()
                    .any(|p| p.contains("a control character (U+")),
                "{hidden:?}: {problems:?}"
            );
        }
        let (values, problems) = parse(
            "# tuning\r\nmax_connections: 10\r\ndebug: true # on\r\n",
            "extra.conf",
        );
        assert!(problems.is_empty(), "{problems:?}");
        assert_eq!(values.len(), 2);
        for list in [
            "server_tags: [1;2]\n",
            "server_tags: [1,,2]\n",
            "server_tags: [1 2]\n",
        ] {
            let (_, problems) = parse(list, "extra.conf");
            assert_eq!(problems.len(), 1, "{list:?}: {problems:?}");
        }
        let (values, problems) = parse(
            "server_tags: [\n  \"a\", # first\n  \"b\"\n  \"c\",\n]\n",
            "extra.conf",
        );
        assert!(problems.is_empty(), "{problems:?}");
        assert_eq!(values[0].1, serde_json::json!(["a", "b", "c"]));
        let (_, problems) = parse("debug: true\n\n# a\rb\n", "extra.conf");
        assert_eq!(problems.len(), 1);
        assert!(problems[0].starts_with("extra.conf:3: "), "{problems:?}");
    }
}
