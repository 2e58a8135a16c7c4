//! Fuzz `[broker] include` against nats-server itself: whatever text cotal's reader accepts,
//! `nats-server -t` (`COTAL_NATS_SERVER`, else `nats-server` on the PATH) must accept with the
//! digest of exactly the values cotal read; a setting nats-server reads and cotal does not is a
//! crash. The suite's `broker::include_reader` runs the same comparison on generated includes.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|text: &str| {
    let text = format!("ping_max: 3\n{text}");
    let (values, problems) = cotal::include::parse(&text, "include.conf");
    if !problems.is_empty() {
        return;
    }
    let expected =
        cotal::render::parsed_digest(&serde_json::Value::Object(values.into_iter().collect()));
    let dir = std::env::temp_dir().join(format!("cotal-fuzz-include-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("include.conf");
    std::fs::write(&file, &text).unwrap();
    let server = std::env::var("COTAL_NATS_SERVER").unwrap_or_else(|_| "nats-server".into());
    let out = std::process::Command::new(server)
        .arg("-t")
        .arg("-c")
        .arg(&file)
        .output()
        .expect("nats-server runs");
    let said = String::from_utf8_lossy(&out.stdout).into_owned()
        + &String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success() && said.contains(&format!("({expected})")),
        "cotal accepted {text:?} as {expected}; nats-server said {said}"
    );
});
