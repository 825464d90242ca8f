//! Embed the policy documentation pages (`docs/policies/*.md`) so `tierkit compare`
//! can put each paper's claims table in its report wherever the binary runs.

use std::fmt::Write;
use std::path::Path;

fn main() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs/policies");
    println!("cargo:rerun-if-changed={}", dir.display());
    let mut pages: Vec<(String, String)> = Vec::new();
    if let Ok(entries) = std::fs::read_dir(&dir) {
        for e in entries.flatten() {
            let p = e.path();
            if p.extension().is_some_and(|x| x == "md") {
                println!("cargo:rerun-if-changed={}", p.display());
                let name = p.file_stem().unwrap().to_string_lossy().to_string();
                pages.push((name, p.canonicalize().unwrap().display().to_string()));
            }
        }
    }
    pages.sort();
    let mut out = String::from("/// (page name, markdown) of every policy page, sorted by name.\npub static POLICY_PAGES: &[(&str, &str)] = &[\n");
    for (name, path) in pages {
        let _ = writeln!(out, "    ({name:?}, include_str!({path:?})),");
    }
    out.push_str("];\n");
    let dest = Path::new(&std::env::var("OUT_DIR").unwrap()).join("policy_pages.rs");
    std::fs::write(dest, out).unwrap();
}
