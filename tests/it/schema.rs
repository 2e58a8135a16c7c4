//! Keeps `schemas/cotal.schema.json` in step with the parser: every example under `examples/`
//! is valid for both, and a corpus of bad files is refused by both.

fn validator() -> jsonschema::Validator {
    let schema: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string("schemas/cotal.schema.json").unwrap())
            .unwrap();
    jsonschema::validator_for(&schema).expect("the schema compiles")
}

fn as_json(text: &str) -> Option<serde_json::Value> {
    let value: toml::Value = toml::from_str(text).ok()?;
    Some(serde_json::to_value(value).unwrap())
}

#[test]
fn every_example_is_valid_for_the_schema_and_the_parser() {
    let v = validator();
    let mut seen = 0;
    for entry in std::fs::read_dir("examples").unwrap().flatten() {
        let path = entry.path();
        if path.extension().and_then(|e| e.to_str()) != Some("toml") {
            continue;
        }
        seen += 1;
        let text = std::fs::read_to_string(&path).unwrap();
        let json = as_json(&text).expect("example is TOML");
        let errors: Vec<String> = v.iter_errors(&json).map(|e| e.to_string()).collect();
        assert!(errors.is_empty(), "{}: {errors:?}", path.display());
        cotal::desired::parse(&text, &path.display().to_string()).unwrap_or_else(|e| panic!("{e}"));
    }
    assert!(seen >= 3);
    let starter = cotal::desired::STARTER;
    assert!(v.is_valid(&as_json(starter).unwrap()));
    cotal::desired::parse(starter, "starter").unwrap();
}

#[test]
fn bad_files_are_refused_by_both() {
    let v = validator();
    let bad: [&str; 32] = [
        "[spaces.a]\n",
        "version = 2\n",
        "version = 1\nextra = true\n",
        "version = 1\n[broker]\nport = 0\n",
        "version = 1\n[broker]\nport = 70000\n",
        "version = 1\n[broker]\nhost = \"\"\n",
        "version = 1\n[broker]\nstore_dir = \"a\\\"b\"\n",
        "version = 1\n[broker]\nlisten = \"x\"\n",
        "version = 1\n[spaces.\"\"]\n",
        "version = 1\n[spaces.\".\"]\n",
        "version = 1\n[spaces.\"..\"]\n",
        "version = 1\n[spaces.a]\nstate = \"retired\"\n",
        "version = 1\n[spaces.a]\nprotect = \"yes\"\n",
        "version = 1\n[spaces.a]\nlimit = {}\n",
        "version = 1\n[spaces.a.limits]\nmax_connections = 0\n",
        "version = 1\n[spaces.a.limits]\nmax_connections = -5\n",
        "version = 1\n[spaces.a.limits]\nmax_storage = \"10GB\"\n",
        "version = 1\n[spaces.a.limits]\nmax_storage = 0\n",
        "version = 1\n[spaces.a.limits]\nmax_storage = \"0MiB\"\n",
        "version = 1\n[spaces.a.limits]\nmax_storage = 1.5\n",
        "version = 1\n[spaces.a.limits]\nmax_streams = 11\n",
        "version = 1\n[spaces.a.limits]\nmax_subs = 10\n",
        "version = 1\n[spaces.a.channels.general]\ndelivery_class = \"sometimes\"\n",
        "version = 1\n[spaces.a.channels.general]\nreplay_window = \"24 hours\"\n",
        "version = 1\n[spaces.a.channels.\"team.*\"]\n",
        "version = 1\n[spaces.a.channels.\"=defaults\"]\n",
        "version = 1\n[spaces.a.channels.general]\ncolour = \"red\"\n",
        "version = 1\n[spaces.a.channel_defaults]\ndescription = \"x\"\n",
        // A space's keys are not defaults, and the schema's own definitions are not keys.
        "version = 1\n[defaults]\nprune_channels = true\n",
        "version = 1\n[defaults.channel_defaults]\ndelivery_class = \"live\"\n",
        "version = 1\n[channel]\n",
        &format!(
            "version = 1\n[spaces.a.channels.general]\ndescription = \"{}\"\n",
            "x".repeat(201)
        ),
    ];
    for text in bad {
        assert!(
            cotal::desired::parse(text, "t").is_err(),
            "parser accepted {text:?}"
        );
        let json = as_json(text).expect("still TOML");
        assert!(!v.is_valid(&json), "schema accepted {text:?}");
    }
}

#[test]
fn bad_clusters_are_refused_by_both() {
    let v = validator();
    let node = |name: &str, port: u16| {
        format!(
            "[[cluster.nodes]]\nname = \"{name}\"\nport = {port}\ncluster_port = {}\n",
            port + 2000
        )
    };
    let two = format!("{}{}", node("n1", 4222), node("n2", 4223));
    let bad = [
        // Replicas other than 1 or 3.
        format!("version = 1\n[cluster]\nreplicas = 2\n{two}"),
        // One node is not a cluster.
        format!("version = 1\n[cluster]\n{}", node("n1", 4222)),
        // A node without its route port.
        format!(
            "version = 1\n[cluster]\n{}[[cluster.nodes]]\nname = \"n2\"\nport = 4223\n",
            node("n1", 4222)
        ),
        // A node name that cannot be a server name.
        format!(
            "version = 1\n[cluster]\n{}{}",
            node("n1", 4222),
            node("n 2", 4223)
        ),
        // An unknown key in a node.
        format!("version = 1\n[cluster]\n{two}weight = 2\n"),
        // A remote node must say where it reads its config (the schema: local is a boolean).
        format!("version = 1\n[cluster]\n{two}local = \"no\"\n"),
    ];
    for text in &bad {
        assert!(
            cotal::desired::parse(text, "t").is_err(),
            "parser accepted {text:?}"
        );
        let json = as_json(text).expect("still TOML");
        assert!(!v.is_valid(&json), "schema accepted {text:?}");
    }
    let good = format!("version = 1\n[cluster]\nreplicas = 1\n{two}[spaces.a]\n");
    cotal::desired::parse(&good, "t").unwrap();
    assert!(v.is_valid(&as_json(&good).unwrap()));
}
