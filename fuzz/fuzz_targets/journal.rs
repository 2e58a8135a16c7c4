//! Fuzz the journal and saved-plan readers: any bytes parse or fail cleanly.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let _ = cotal::store::journal::parse(data);
    let _ = serde_json::from_slice::<cotal::plan::Plan>(data);
});
