//! `[broker] include` read from the root: the file, bounded and checked, as an
//! [`ObservedInclude`]. What it may hold and how it is parsed is the core's
//! ([`cotal_core::desired::include`], re-exported here).

use crate::observed::ObservedInclude;
pub use cotal_core::desired::include::*;

/// Read the include `path` (relative to `dir`, the root) and check it.
pub fn observe(dir: &std::path::Path, path: &str, at: &str) -> ObservedInclude {
    let file = dir.join(path);
    let text = match std::fs::metadata(&file) {
        Ok(m) if !m.is_file() => Err(format!("{} is not a regular file", file.display())),
        Ok(m) if m.len() > LIMIT => Err(format!(
            "{} is {} bytes; an include of more than 64 KiB is refused",
            file.display(),
            m.len()
        )),
        Ok(_) => read_bounded(&file),
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

/// The include's text, at most [`LIMIT`] bytes of it whatever it grows to while read.
fn read_bounded(file: &std::path::Path) -> Result<String, String> {
    let bytes = crate::store::atomic::read_following_within(file, LIMIT)
        .map_err(|e| format!("cannot read {}: {e}", file.display()))?;
    String::from_utf8(bytes).map_err(|_| format!("{} is not UTF-8 text", file.display()))
}
