//! Fuzz the account-record reader and validator: any file name and bytes either validate or are
//! corrupt with a reason; never a panic, never a valid record for a name that does not round-trip.
#![no_main]

use libfuzzer_sys::fuzz_target;
use std::path::Path;

fuzz_target!(|input: (&str, &[u8])| {
    let (key, bytes) = input;
    let _ = cotal::store::account_record::parse(bytes);
    let file_name = format!("account.{key}.json");
    let trust = cotal::trust::jwt::BrokerTrust {
        operator_pub: "ODSQ6XOMVKAXSQR5B5V6G5SYPAT6ZMRE4UTCMHHTEQOSEAN3QHM7P5V4".into(),
        operator_signing: Vec::new(),
        operator_jwt: String::new(),
        sys_pub: String::new(),
        sys_jwt: String::new(),
        monitor: None,
    };
    let memo = cotal::store::caches::signature_memo::SignatureMemo::none();
    match cotal::store::inventory::validate(Path::new(&file_name), &file_name, true, Some(bytes), &trust, &memo) {
        Ok(valid) => assert_eq!(valid.space.hex(), key),
        Err(corrupt) => assert!(!corrupt.reason.is_empty()),
    }
    let _ = cotal::store::generation::parse(bytes);
});
