//! Embed the policy documentation pages (`docs/policies/*.md`) so `tierkit compare`
//! can put each paper's claims table in its report wherever the binary runs; and say
//! which outside tools and machine shape this host offers the integration tests, so a
//! test that cannot run here is *ignored* with its reason (and shows in the test
//! runner's "ignored" count) rather than passing without checking anything.

use std::fmt::Write;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;

/// Whether `tool` is an executable file in one of `PATH`'s directories.
fn on_path(tool: &str) -> bool {
    std::env::var_os("PATH").is_some_and(|path| {
        std::env::split_paths(&path).any(|d| {
            std::fs::metadata(d.join(tool))
                .is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
        })
    })
}

/// NUMA nodes with memory (`/sys/devices/system/node/node*/meminfo`, MemTotal > 0).
fn nodes_with_memory() -> usize {
    let Ok(dir) = std::fs::read_dir("/sys/devices/system/node") else {
        return 0;
    };
    dir.flatten()
        .filter(|e| e.file_name().to_string_lossy().starts_with("node"))
        .filter(|e| {
            std::fs::read_to_string(e.path().join("meminfo")).is_ok_and(|m| {
                m.lines()
                    .find(|l| l.contains("MemTotal:"))
                    .and_then(|l| l.split_whitespace().rev().nth(1)?.parse::<u64>().ok())
                    .is_some_and(|kb| kb > 0)
            })
        })
        .count()
}

/// Emit one `cfg` per missing test prerequisite (declared for `check-cfg`). Probed
/// when this script runs: after installing a tool, `cargo clean -p tierkit`.
fn probe_test_prerequisites() {
    println!("cargo:rerun-if-env-changed=PATH");
    let root = std::fs::read_to_string("/proc/self/status").is_ok_and(|s| {
        s.lines()
            .find(|l| l.starts_with("Uid:"))
            .is_some_and(|l| l.split_whitespace().nth(2) == Some("0"))
    });
    let missing = [
        (
            "tierkit_no_chromium",
            !["chromium", "chromium-browser", "google-chrome"]
                .iter()
                .any(|t| on_path(t)),
        ),
        (
            "tierkit_no_valgrind",
            !on_path("valgrind") || !on_path("cc"),
        ),
        ("tierkit_no_setpriv_root", !on_path("setpriv") || !root),
        ("tierkit_numa", nodes_with_memory() >= 2),
    ];
    for (cfg, set) in missing {
        println!("cargo::rustc-check-cfg=cfg({cfg})");
        if set {
            println!("cargo:rustc-cfg={cfg}");
        }
    }
}

fn main() {
    probe_test_prerequisites();
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
