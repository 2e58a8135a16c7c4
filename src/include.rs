//! `[broker] include`: an operator-owned file of nats-server settings cotal does not model
//! (`max_connections`, `write_deadline`, `lame_duck_duration`, `ping_interval`, ...), read and
//! inlined into every node's rendered config between two marker comments, so its content is
//! part of the plan's diff, of the pins, and of the digest the reload must confirm.
//!
//! Invariants: a key cotal owns (listeners, TLS, cluster, JetStream, trust, accounts,
//! authorization, logging, monitoring, websocket, includes) is refused at its line; so is a
//! value cotal cannot read exactly as nats-server does (only quoted strings, integers without
//! a unit, decimals, `true`/`false`, and lists and blocks of those are accepted: a unit or an
//! unquoted word is refused with the advice to quote it), since the digest of the config must
//! be the one nats-server computes. Nothing here prints the file's values in an error.

use crate::observed::ObservedInclude;
use serde_json::Value;

/// Keys cotal renders itself, or that would change whose broker this is.
pub const OWNED: &[&str] = &[
    "host",
    "net",
    "listen",
    "port",
    "client_advertise",
    "server_name",
    "cluster",
    "gateway",
    "leafnodes",
    "leaf",
    "websocket",
    "mqtt",
    "jetstream",
    "operator",
    "operators",
    "system_account",
    "system",
    "resolver",
    "resolver_preload",
    "accounts",
    "authorization",
    "users",
    "no_auth_user",
    "trusted",
    "trusted_keys",
    "tls",
    "http",
    "https",
    "http_port",
    "https_port",
    "monitor_port",
    "http_base_path",
    "include",
    "logfile",
    "log_file",
    "logfile_size_limit",
    "log_size_limit",
    "logfile_max_num",
    "log_max_num",
    "pid_file",
    "ports_file_dir",
    "max_control_line",
    "store_dir",
];

/// Read the include `path` (relative to `dir`, the root) and check it.
pub fn observe(dir: &std::path::Path, path: &str, at: &str) -> ObservedInclude {
    let file = dir.join(path);
    let text = match std::fs::metadata(&file) {
        Ok(m) if !m.is_file() => Err(format!("{} is not a regular file", file.display())),
        Ok(m) if m.len() > 64 << 10 => Err(format!(
            "{} is {} bytes; an include of more than 64 KiB is refused",
            file.display(),
            m.len()
        )),
        Ok(_) => std::fs::read_to_string(&file)
            .map_err(|e| format!("cannot read {}: {e}", file.display())),
        Err(e) => Err(format!("cannot read {}: {e}", file.display())),
    };
    match text {
        Ok(text) => {
            let (values, problems) = parse(&text, &file.display().to_string());
            ObservedInclude {
                path: path.to_string(),
                text,
                values,
                problems,
            }
        }
        Err(e) => ObservedInclude {
            path: path.to_string(),
            text: String::new(),
            values: Vec::new(),
            problems: vec![format!("{at}: {e}")],
        },
    }
}

/// The top-level settings of `text`, in order, as nats-server's parser reads them; every
/// problem as `FILE:LINE: ...`.
pub fn parse(text: &str, file: &str) -> (Vec<(String, Value)>, Vec<String>) {
    let mut p = Parser {
        chars: text.chars().collect(),
        i: 0,
        line: 1,
        file,
        problems: Vec::new(),
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

    /// Whitespace, commas, semicolons and comments.
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
        loop {
            self.skip(true);
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
            if top && OWNED.contains(&key.to_ascii_lowercase().as_str()) {
                self.problem(line, format!("`{key}` is cotal's to render (set it in cotal.toml, or leave it out); an include sets only what cotal does not model"));
                continue;
            }
            if let Some(v) = value {
                if out.iter().any(|(k, _)| k == &key) {
                    self.problem(line, format!("`{key}` is set twice"));
                    continue;
                }
                out.push((key, v));
            }
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
                self.bump();
                Some(Value::Object(self.map_body(false).into_iter().collect()))
            }
            Some('[') => {
                self.bump();
                let mut items = Vec::new();
                loop {
                    self.skip(true);
                    match self.peek() {
                        Some(']') => {
                            self.bump();
                            return Some(Value::Array(items));
                        }
                        None => {
                            self.problem(line, "a list is not closed with `]`");
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
                    if c.is_whitespace() || matches!(c, ',' | ';' | ']' | '}' | '#') {
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
                if let Ok(n) = word.parse::<i64>() {
                    return Some(Value::from(n));
                }
                if word.contains('.')
                    && word
                        .chars()
                        .all(|c| c.is_ascii_digit() || c == '.' || c == '-')
                    && let Ok(f) = word.parse::<f64>()
                {
                    return serde_json::Number::from_f64(f).map(Value::Number);
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
    fn settings_are_read_as_nats_server_reads_them_and_owned_keys_are_refused_at_their_line() {
        let (values, problems) = parse(
            "# tuning\nmax_connections: 1000\nwrite_deadline = \"3s\"\nlame_duck_duration \"45s\"\ndebug: false\nping_interval: 2.5\nlimits { a: [1, 2] }\n",
            "extra.conf",
        );
        assert!(problems.is_empty(), "{problems:?}");
        assert_eq!(
            serde_json::Value::Object(values.into_iter().collect()),
            serde_json::json!({
                "max_connections": 1000, "write_deadline": "3s", "lame_duck_duration": "45s",
                "debug": false, "ping_interval": 2.5, "limits": {"a": [1, 2]}
            })
        );
        let (_, problems) = parse(
            "max_connections: 10\nport: 4222\naccounts {\n  A: {}\n}\nmax_payload: 1MB\n",
            "extra.conf",
        );
        assert_eq!(problems.len(), 3, "{problems:?}");
        assert!(
            problems[0].starts_with("extra.conf:2: `port` is cotal's"),
            "{problems:?}"
        );
        assert!(
            problems[1].starts_with("extra.conf:3: `accounts` is cotal's"),
            "{problems:?}"
        );
        assert!(
            problems[2].starts_with("extra.conf:6: this value is read"),
            "{problems:?}"
        );
    }
}
