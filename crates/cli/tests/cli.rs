//! End-to-end checks of the `tierkit` binary: determinism of its outputs, and clear
//! one-line errors (never a panic) on bad input.

use std::path::PathBuf;
use std::process::Command;

fn tierkit() -> Command {
    Command::new(env!("CARGO_BIN_EXE_tierkit"))
}

fn scratch(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("tierkit-cli-test-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    d
}

/// A small, quick run.
const SMALL: &[&str] = &[
    "--set",
    "workload.footprint_mib=64",
    "--set",
    "workload.nr_updates=1000000",
];

#[test]
fn same_config_and_seed_give_byte_identical_outputs() {
    let mut outs = Vec::new();
    for i in 0..2 {
        let dir = scratch(&format!("det{i}"));
        let st = tierkit()
            .args([
                "sim",
                "--workload",
                "gups",
                "--policy",
                "autonuma",
                "--seed",
                "7",
                "--out",
            ])
            .arg(&dir)
            .args(SMALL)
            .args([
                "--set",
                "policy.scan.scan_delay_ms=1",
                "--set",
                "policy.scan.scan_period_min_ms=5",
            ])
            .output()
            .unwrap();
        assert!(
            st.status.success(),
            "{}",
            String::from_utf8_lossy(&st.stderr)
        );
        let summary = std::fs::read(dir.join("summary.json")).unwrap();
        let series = std::fs::read(dir.join("timeseries.csv")).unwrap();
        outs.push((summary, series));
        let _ = std::fs::remove_dir_all(&dir);
    }
    assert_eq!(outs[0].0, outs[1].0, "summary.json differs");
    assert_eq!(outs[0].1, outs[1].1, "timeseries.csv differs");
    let s: serde_json::Value = serde_json::from_slice(&outs[0].0).unwrap();
    for key in [
        "policy",
        "workload",
        "machine",
        "seed",
        "sim_seconds",
        "accesses",
        "fast_access_ratio",
        "promoted_pages",
        "demoted_pages",
        "hint_faults",
        "samples",
        "tiering_cpu_seconds",
    ] {
        assert!(s.get(key).is_some(), "summary.json lacks {key}");
    }
    assert!(s["hint_faults"].as_u64().unwrap() > 0);
    // A different seed changes the run.
    let dir = scratch("det-other");
    let st = tierkit()
        .args([
            "sim",
            "--workload",
            "gups",
            "--policy",
            "autonuma",
            "--seed",
            "8",
            "--out",
        ])
        .arg(&dir)
        .args(SMALL)
        .args([
            "--set",
            "policy.scan.scan_delay_ms=1",
            "--set",
            "policy.scan.scan_period_min_ms=5",
        ])
        .output()
        .unwrap();
    assert!(st.status.success());
    assert_ne!(
        std::fs::read(dir.join("timeseries.csv")).unwrap(),
        outs[0].1
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn existing_results_are_not_overwritten_without_force() {
    let dir = scratch("noclobber");
    let run = |extra: &[&str]| {
        tierkit()
            .args(["sim", "--policy", "first-touch", "--out"])
            .arg(&dir)
            .args(SMALL)
            .args(extra)
            .output()
            .unwrap()
    };
    assert!(run(&[]).status.success());
    let second = run(&[]);
    assert!(!second.status.success());
    assert!(String::from_utf8_lossy(&second.stderr).contains("--force"));
    assert!(run(&["--force"]).status.success());
    let _ = std::fs::remove_dir_all(&dir);
}

fn assert_clean_error(args: &[&str], must_contain: &[&str]) {
    let out = tierkit().args(args).output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{args:?} should fail");
    assert!(!err.contains("panicked"), "{args:?} panicked: {err}");
    assert_eq!(
        err.trim_end().lines().count(),
        1,
        "{args:?}: not one line: {err}"
    );
    for m in must_contain {
        assert!(err.contains(m), "{args:?}: `{err}` lacks `{m}`");
    }
}

#[test]
fn bad_input_gets_one_clear_line_and_nonzero_exit() {
    assert_clean_error(
        &["sim", "--policy", "magic"],
        &["unknown policy `magic`", "autonuma"],
    );
    assert_clean_error(
        &["sim", "--workload", "magic"],
        &["unknown workload `magic`", "gups"],
    );
    assert_clean_error(
        &["sim", "--machine", "magic"],
        &["unknown machine `magic`", "cxl-lowbw"],
    );
    assert_clean_error(&["sim", "--set", "policy.nope=1"], &["nope"]);
    assert_clean_error(
        &["sim", "--set", "machine.llc_enabld=false"],
        &["llc_enabld", "llc_enabled"],
    );
    assert_clean_error(&["sim", "--set", "novalue"], &["key=value"]);
    for r in ["1:", "x:8", "0:8", "1:-2", "-3MiB", "0"] {
        assert_clean_error(&["sim", "--ratio", r], &["fast-tier size"]);
    }
    assert_clean_error(
        &["sim", "--set", "workload.footprint_mib=0"],
        &["footprint_mib"],
    );
    assert_clean_error(
        &["sim", "--set", "workload.hot_fraction=-0.5"],
        &["hot_fraction"],
    );
    assert_clean_error(&["sim", "--set", "machine.llc_size_mib=0"], &["llc"]);
    let dir = scratch("badcfg");
    std::fs::create_dir_all(&dir).unwrap();
    let cfg = dir.join("bad.toml");
    std::fs::write(&cfg, "seed = 1\n[policy]\nname = \"autonuma\"\nscan = {\n").unwrap();
    assert_clean_error(
        &["sim", "--config", cfg.to_str().unwrap()],
        &["bad.toml", "line 4"],
    );
    assert_clean_error(
        &["sim", "--config", "/nonexistent/x.toml"],
        &["cannot read config file"],
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn list_shows_policies_workloads_and_machines() {
    let out = tierkit().arg("list").output().unwrap();
    assert!(out.status.success());
    let text = String::from_utf8_lossy(&out.stdout);
    for name in [
        "all-fast",
        "first-touch",
        "autonuma",
        "gups",
        "zipf-kv",
        "pmbench",
        "cxl",
        "cxl-lowbw",
        "optane",
    ] {
        assert!(text.contains(name), "list lacks {name}");
    }
}
