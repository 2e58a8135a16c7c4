//! The floor `scripts/bench.sh` compares `cotal plan` with: read every account record of a root
//! and parse it with the very parser cotal uses, on every core, and nothing else (no signature
//! checked, no other file read, nothing planned).
//!
//! `cargo run --release --example read_records -- ROOT` prints how many records parsed.

use rayon::prelude::*;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let [root] = args.as_slice() else {
        eprintln!("usage: read_records ROOT");
        std::process::exit(2);
    };
    let auth = std::path::Path::new(root).join(".cotal/auth");
    let paths: Vec<std::path::PathBuf> = std::fs::read_dir(&auth)?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| {
            p.file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| n.starts_with("account.") && n.ends_with(".json"))
        })
        .collect();
    let parsed = paths
        .par_iter()
        .filter(|p| {
            std::fs::read(p)
                .ok()
                .is_some_and(|bytes| cotal::store::account_record::parse(&bytes).is_ok())
        })
        .count();
    println!("{parsed}");
    Ok(())
}
