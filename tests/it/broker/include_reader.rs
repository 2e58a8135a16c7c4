//! `[broker] include` read as nats-server reads it: generated includes (settings, comments of
//! both forms, every line end, control characters, and a key cotal refuses hidden among them)
//! are read by cotal and by `nats-server -t`; whatever cotal accepts, nats-server must accept
//! with the digest of exactly the values cotal read. A setting nats-server sees and cotal does
//! not (the `\r` that ends a comment for nats-server alone) fails the comparison.

use proptest::prelude::*;
use std::process::Command;

/// Pieces an include is made of: settings cotal allows, a key it refuses, comments, every
/// separator and line end nats-server knows, and control characters.
fn piece() -> impl Strategy<Value = &'static str> {
    prop::sample::select(vec![
        "max_connections: 1000",
        "debug: true",
        "trace = false",
        "write_deadline \"3s\"",
        "server_tags: [\"a\", 'b']",
        "server_tags: [",
        "\"x\"",
        "]",
        "cotal_sentinel: 1",
        "# a comment",
        "// a comment",
        " ",
        "\t",
        "\n",
        "\r",
        "\r\n",
        ";",
        ",",
        "\u{0b}",
        "\u{0c}",
        "\u{1b}[2J",
    ])
}

/// nats-server's verdict on `text` as a whole config: its digest, or its error.
fn nats_server_reads(text: &str) -> Result<String, String> {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("include.conf");
    std::fs::write(&file, text).unwrap();
    let server = std::env::var("COTAL_NATS_SERVER").unwrap_or_else(|_| "nats-server".into());
    let out = Command::new(server)
        .arg("-t")
        .arg("-c")
        .arg(&file)
        .output()
        .expect("nats-server runs");
    let said = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    match said.split("(sha256:").nth(1) {
        Some(rest) if out.status.success() => {
            Ok(format!("sha256:{}", rest.split(')').next().unwrap()))
        }
        _ => Err(said),
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, failure_persistence: None, ..ProptestConfig::default() })]

    #[test]
    fn what_cotal_accepts_in_an_include_nats_server_reads_to_the_same_values(
        pieces in prop::collection::vec(piece(), 1..14)
    ) {
        // Settings separated as a file would be: generated pieces may run settings into one
        // another, which both readers must then agree on too.
        // A first setting: nats-server refuses a config of no values, which an include inlined
        // among cotal's settings never is.
        let text = format!("ping_max: 3\n{}", pieces.concat());
        let (values, problems) = cotal::include::parse(&text, "include.conf");
        if problems.is_empty() {
            let expected = cotal::render::parsed_digest(&serde_json::Value::Object(
                values.into_iter().collect(),
            ));
            let read = nats_server_reads(&text);
            prop_assert_eq!(read, Ok(expected), "cotal accepted {:?}", text);
        }
    }
}

#[test]
fn a_setting_behind_a_carriage_return_is_refused_by_cotal_where_nats_server_would_read_it() {
    let hidden = "max_connections: 1000\n# ok\rcotal_sentinel: 1\n";
    let (_, problems) = cotal::include::parse(hidden, "include.conf");
    assert!(!problems.is_empty(), "cotal accepted {hidden:?}");
    // The control: nats-server reads the hidden line as a setting.
    let read = nats_server_reads(hidden).unwrap_err();
    assert!(read.contains("unknown field \"cotal_sentinel\""), "{read}");
    // And the legitimate include reads alike in both.
    let plain = "max_connections: 1000\r\n# ok\r\ndebug: true\n";
    let (values, problems) = cotal::include::parse(plain, "include.conf");
    assert!(problems.is_empty(), "{problems:?}");
    assert_eq!(
        nats_server_reads(plain),
        Ok(cotal::render::parsed_digest(&serde_json::Value::Object(
            values.into_iter().collect()
        )))
    );
}
