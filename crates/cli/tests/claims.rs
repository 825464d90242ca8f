//! `tierkit claims` end to end: every paper's claims run at smoke scale and are judged
//! (none left without data), and bad input is one line.

use std::process::Command;

fn tierkit() -> Command {
    Command::new(env!("CARGO_BIN_EXE_tierkit"))
}

/// Fail with the command's output unless it succeeded.
fn assert_succeeded(out: &std::process::Output) {
    assert!(
        out.status.success(),
        "{}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
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
    assert_succeeded(&out);
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
fn claims_over_seeds_judge_each_seed_and_run_only_the_claims_cells() {
    let out_dir = std::env::temp_dir().join(format!("tierkit-claims-seeds-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&out_dir);
    let out = tierkit()
        .args([
            "claims",
            "--smoke",
            "--paper",
            "chrono",
            "--claim",
            "pmbench-vs-tpp,pmbench-vs-multiclock",
            "--seeds",
            "42,43",
            "--jobs",
            "2",
            "--out",
        ])
        .arg(&out_dir)
        .output()
        .unwrap();
    assert_succeeded(&out);
    let md = std::fs::read_to_string(out_dir.join("claims-seeds.md")).unwrap();
    assert!(md.contains("| Chrono (EuroSys'25) | 2 |"), "{md}");
    assert!(md.contains("| **pmbench-vs-tpp** (headline) |"), "{md}");
    let over: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out_dir.join("claims-seeds.json")).unwrap())
            .unwrap();
    let over = over.as_array().unwrap();
    assert_eq!(over.len(), 2, "the two claims asked for");
    for c in over {
        let seeds: Vec<u64> = c["by_seed"]
            .as_array()
            .unwrap()
            .iter()
            .map(|s| s["seed"].as_u64().unwrap())
            .collect();
        assert_eq!(seeds, [42, 43], "{c}");
        assert_ne!(c["by_seed"][0]["verdict"], "no-data", "{c}");
    }
    for seed in [42, 43] {
        let dir = out_dir.join(format!("seed-{seed}"));
        let judged: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(dir.join("claims.json")).unwrap())
                .unwrap();
        assert_eq!(judged.as_array().unwrap().len(), 2);
        let csv = std::fs::read_to_string(dir.join("chrono/suite/results.csv")).unwrap();
        let head: Vec<&str> = csv.lines().next().unwrap().split(',').collect();
        let col = |name: &str| head.iter().position(|h| *h == name).unwrap();
        for line in csv.lines().skip(1) {
            let f: Vec<&str> = line.split(',').collect();
            assert_eq!(
                f[col("workload")],
                "pmbench",
                "only the claims' cell: {line}"
            );
            assert_eq!(
                f[col("seed")],
                seed.to_string(),
                "the seed reaches the runs"
            );
            assert!(
                [
                    "chrono",
                    "tpp",
                    "multiclock",
                    "all-fast",
                    "first-touch",
                    "oracle",
                    "oracle-static"
                ]
                .contains(&f[col("policy")]),
                "only the claims' policies and the references: {line}"
            );
        }
    }
    std::fs::remove_dir_all(&out_dir).unwrap();
}

/// Run `tierkit` with `args`, expect it refused (exit 2) with a one-line error, and
/// return that error.
fn refused(args: &[&str]) -> String {
    let out = tierkit().args(args).output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr).into_owned();
    assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
    assert_eq!(err.lines().count(), 1, "{args:?}: {err}");
    err
}

#[test]
fn bad_claims_input_is_one_line() {
    let err = refused(&["claims", "--paper", "nope", "--out", "/nonexistent/x"]);
    assert!(
        err.contains("unknown paper `nope`; valid: chrono, memtis, freqtier, multiclock, pet"),
        "{err}"
    );
    let err = refused(&[
        "claims",
        "--smoke",
        "--write-docs",
        "docs",
        "--out",
        "/nonexistent/x",
    ]);
    assert!(err.contains("drop --write-docs"), "{err}");
    let err = refused(&["claims", "--claim", "nope", "--out", "/nonexistent/x"]);
    assert!(
        err.contains("unknown claim `nope`; valid (paper:claim): chrono:pmbench-vs-linux-nb, "),
        "{err}"
    );
    let err = refused(&[
        "claims",
        "--claim",
        "pmbench-vs-tpp",
        "--write-docs",
        "docs",
        "--out",
        "/nonexistent/x",
    ]);
    assert!(err.contains("drop --claim or --write-docs"), "{err}");
    let err = refused(&["claims", "--seeds", "42", "--out", "/nonexistent/x"]);
    assert!(err.contains("at least two seeds"), "{err}");
    let err = refused(&[
        "claims",
        "--seeds",
        "42,43",
        "--write-docs",
        "docs",
        "--out",
        "/nonexistent/x",
    ]);
    assert!(
        err.contains("the docs' tables are one seed's: drop --write-docs"),
        "{err}"
    );
    // Docs of one paper are spliced into an existing claims.md: without one (or
    // without the paper's rows in it) the command stops before running anything.
    let docs = std::env::temp_dir().join(format!("tierkit-claims-docs-{}", std::process::id()));
    std::fs::create_dir_all(&docs).unwrap();
    let out = std::env::temp_dir().join(format!("tierkit-claims-unused-{}", std::process::id()));
    let args = |docs: &std::path::Path| {
        [
            "claims".to_string(),
            "--paper".into(),
            "chrono".into(),
            "--write-docs".into(),
            docs.display().to_string(),
            "--out".into(),
            out.display().to_string(),
        ]
    };
    let a = args(&docs);
    let err = refused(&a.iter().map(String::as_str).collect::<Vec<_>>());
    assert!(
        err.contains("--write-docs with --paper replaces those papers' parts of")
            && err.contains("drop --paper to write it whole"),
        "{err}"
    );
    std::fs::write(
        docs.join("claims.md"),
        "# Paper claims\n\n| MEMTIS (SOSP'23) | 1 |\n",
    )
    .unwrap();
    let err = refused(&a.iter().map(String::as_str).collect::<Vec<_>>());
    assert!(err.contains("no summary row for Chrono"), "{err}");
    assert!(!out.exists(), "nothing ran");
    std::fs::remove_dir_all(&docs).unwrap();
    // A directory with someone else's files is refused, and they stay.
    let dir = std::env::temp_dir().join(format!("tierkit-claims-occupied-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("claims.md"), "mine").unwrap();
    let err = refused(&[
        "claims",
        "--smoke",
        "--paper",
        "chrono",
        "--out",
        dir.to_str().unwrap(),
    ]);
    assert!(err.contains("did not write"), "{err}");
    assert_eq!(
        std::fs::read_to_string(dir.join("claims.md")).unwrap(),
        "mine"
    );
    std::fs::remove_dir_all(&dir).unwrap();
}
