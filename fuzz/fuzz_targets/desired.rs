//! Fuzz the `cotal.toml` parser: any bytes either parse to a desired state or give an error
//! naming `file:line:column`; never a panic.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(text) = std::str::from_utf8(data) {
        match cotal::desired::parse(text, "cotal.toml") {
            Ok(desired) => {
                for name in desired.spaces.keys() {
                    assert_eq!(cotal::model::SpaceName::from_hex(&name.hex()).as_ref(), Some(name));
                }
            }
            Err(e) => assert!(e.starts_with("cotal.toml:"), "{e}"),
        }
    }
});
