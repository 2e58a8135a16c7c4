//! Writes the generated references (`docs/reference/cli.md`, `docs/reference/cotal.1`,
//! `docs/reference/cotal-toml.md`); `tests/it/reference.rs` fails when they are stale.
//! Run from anywhere: `cargo run --example gen_docs`.

#[path = "../tests/it/docs/generate.rs"]
mod generate;

fn main() {
    let repo = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    for (path, bytes) in generate::files(repo) {
        let full = repo.join(&path);
        std::fs::create_dir_all(full.parent().expect("a folder")).expect("docs/reference/");
        std::fs::write(&full, bytes).expect("writing a reference");
        println!("wrote {}", path.display());
    }
}
