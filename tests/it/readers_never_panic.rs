//! The fuzz targets' properties, run in CI with proptest (cargo-fuzz needs a nightly-capable
//! toolchain and minutes of ASan builds; see docs/design/reliability.md): every reader of untrusted
//! input returns a value or an error, never panics.

use proptest::prelude::*;
use std::path::Path;

const OPERATOR: &str = "ODSQ6XOMVKAXSQR5B5V6G5SYPAT6ZMRE4UTCMHHTEQOSEAN3QHM7P5V4";

fn trust() -> cotal::observed::BrokerTrust {
    cotal::observed::BrokerTrust {
        operator_pub: OPERATOR.into(),
        operator_signing: Vec::new(),
        operator_jwt: String::new(),
        sys_pub: String::new(),
        sys_jwt: String::new(),
        monitor: None,
    }
}

fn toml_like() -> impl Strategy<Value = String> {
    let atoms = prop::sample::select(vec![
        "version = 1\n",
        "[spaces.a]\n",
        "[spaces.\"",
        "\"]\n",
        "[broker]\n",
        "port = ",
        "70000",
        "state = \"suspended\"\n",
        "[spaces.a.limits]\n",
        "max_storage = \"",
        "GiB\"\n",
        "max_connections = ",
        "-1",
        "\n",
        "=",
        "\"",
        "'",
        "[",
        "]",
        "\u{0}",
        "é",
        "protect = true\n",
        "host = ",
        "store_dir = \"x\"\n",
        "max_streams = 11\n",
        "#c\n",
        "{",
        "}",
    ]);
    prop::collection::vec(atoms, 0..24).prop_map(|v| v.concat())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 2000, failure_persistence: None, ..ProptestConfig::default() })]

    #[test]
    fn the_cotal_toml_parser_errors_with_a_location_or_parses(text in toml_like()) {
        match cotal::desired::parse(&text, "cotal.toml") {
            Ok(d) => {
                for name in d.spaces.keys() {
                    let back = cotal::model::SpaceName::from_hex(&name.hex());
                    prop_assert_eq!(back.as_ref(), Some(name));
                }
            }
            Err(e) => prop_assert!(e.starts_with("cotal.toml:"), "{}", e),
        }
    }

    #[test]
    fn arbitrary_text_never_panics_the_parser(text in ".{0,200}") {
        let _ = cotal::desired::parse(&text, "cotal.toml");
    }

    #[test]
    fn record_journal_generation_and_plan_readers_never_panic(key in "[0-9a-fA-Z.]{0,12}", bytes in prop::collection::vec(any::<u8>(), 0..300)) {
        let _ = cotal::store::account_record::parse(&bytes);
        let name = format!("account.{key}.json");
        if let Ok(valid) = cotal::store::inventory::validate(Path::new(&name), &name, true, Some(&bytes), &trust(), &cotal::store::caches::signature_memo::SignatureMemo::none()) {
            prop_assert_eq!(valid.space.hex(), key);
        }
        let _ = cotal::store::journal::parse(&bytes);
        let _ = cotal::store::generation::parse(&bytes);
        let _ = serde_json::from_slice::<cotal::plan::Plan>(&bytes);
        let _ = cotal::trust::jwt::decode_verified::<serde_json::Value>(&String::from_utf8_lossy(&bytes));
    }
}
