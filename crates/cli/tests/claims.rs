//! `tierkit claims` end to end: every paper's claims run at smoke scale and are judged
//! (none left without data), and bad input is one line.

use std::process::Command;

fn tierkit() -> Command {
    Command::new(env!("CARGO_BIN_EXE_tierkit"))
}

#[test]
fn every_claim_runs_and_is_judged_at_smoke_scale() {
    let out_dir = std::env::temp_dir().join(format!("tierkit-claims-smoke-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&out_dir);
    let out = tierkit()
        .args(["claims", "--smoke", "--jobs", "2", "--out"])
        .arg(&out_dir)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let judged: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out_dir.join("claims.json")).unwrap())
            .unwrap();
    let judged = judged.as_array().unwrap();
    let files = tierkit::claims::builtin().unwrap();
    let total: usize = files.iter().map(|f| f.claims.len()).sum();
    assert_eq!(judged.len(), total, "every claim judged");
    for j in judged {
        // Smoke runs are too short to reproduce anything, but every testable claim
        // must find its pair of runs: "no data" means a broken claim or matrix.
        assert_ne!(j["verdict"], "no-data", "{j}");
    }
    let summary = std::fs::read_to_string(out_dir.join("claims.md")).unwrap();
    assert!(summary.contains("**Smoke run**"), "{summary}");
    for f in &files {
        assert!(summary.contains(&format!("## {}", f.title)), "{}", f.title);
    }
    std::fs::remove_dir_all(&out_dir).unwrap();
}

#[test]
fn bad_claims_input_is_one_line() {
    let out = tierkit()
        .args(["claims", "--paper", "nope", "--out", "/nonexistent/x"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(
        err.contains("unknown paper `nope`; valid: chrono, memtis, freqtier, multiclock, pet"),
        "{err}"
    );
    let out = tierkit()
        .args([
            "claims",
            "--smoke",
            "--write-docs",
            "docs",
            "--out",
            "/nonexistent/x",
        ])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("drop --write-docs"));
    // Docs written from one paper would drop the others' rows from claims.md.
    let out = tierkit()
        .args([
            "claims",
            "--paper",
            "chrono",
            "--write-docs",
            "docs",
            "--out",
            "/nonexistent/x",
        ])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(
        err.contains("--write-docs rewrites docs/claims.md for every paper; drop --paper"),
        "{err}"
    );
    // A directory with someone else's files is refused, and they stay.
    let dir = std::env::temp_dir().join(format!("tierkit-claims-occupied-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("claims.md"), "mine").unwrap();
    let out = tierkit()
        .args(["claims", "--smoke", "--paper", "chrono", "--out"])
        .arg(&dir)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("did not write"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(
        std::fs::read_to_string(dir.join("claims.md")).unwrap(),
        "mine"
    );
    std::fs::remove_dir_all(&dir).unwrap();
}
