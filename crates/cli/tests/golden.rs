//! Byte-identity across refactors (issue 20): a small matrix of every registered
//! policy on four workloads (one sampled) must reproduce the outputs recorded in
//! `tests/golden/`. A change that alters results on purpose regenerates the record
//! with `TIERKIT_BLESS_GOLDEN=1 cargo test -p tierkit --test golden` and says in its
//! commit which results changed and why; any other change must leave it untouched.
//!
//! The record is `results.csv` in full (so a diff shows which metric moved) and one
//! FNV-1a digest per run over every file the run wrote (summary, time series, epochs,
//! heat map), so policy statistics and time series are covered without storing them.

use std::path::{Path, PathBuf};
use std::process::Command;

const GOLDEN_DIR: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/golden");

/// 64-bit FNV-1a: enough to tell two outputs apart, and needs no dependency.
fn fnv1a(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |h, &b| {
        (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
    })
}

/// `id digest` for every run directory, sorted by id.
fn run_digests(runs: &Path) -> String {
    let mut ids: Vec<PathBuf> = std::fs::read_dir(runs)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.is_dir())
        .collect();
    ids.sort();
    let mut out = String::new();
    for dir in ids {
        let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
            .unwrap()
            .map(|e| e.unwrap().path())
            .collect();
        files.sort();
        let mut all = Vec::new();
        for f in files {
            all.extend_from_slice(f.file_name().unwrap().to_string_lossy().as_bytes());
            all.extend_from_slice(&std::fs::read(&f).unwrap());
        }
        let id = dir.file_name().unwrap().to_string_lossy().into_owned();
        out.push_str(&format!("{id} {:016x}\n", fnv1a(&all)));
    }
    out
}

#[test]
fn every_policy_reproduces_its_recorded_outputs() {
    let out = std::env::temp_dir().join(format!("tierkit-golden-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&out);
    let status = Command::new(env!("CARGO_BIN_EXE_tierkit"))
        .args(["compare", "--jobs", "2", "--config"])
        .arg(Path::new(GOLDEN_DIR).join("matrix.toml"))
        .arg("--out")
        .arg(&out)
        .output()
        .unwrap();
    assert!(
        status.status.success(),
        "compare failed: {}",
        String::from_utf8_lossy(&status.stderr)
    );
    let csv = std::fs::read_to_string(out.join("results.csv")).unwrap();
    let digests = run_digests(&out.join("runs"));
    let (csv_path, digest_path) = (
        Path::new(GOLDEN_DIR).join("results.csv"),
        Path::new(GOLDEN_DIR).join("runs.txt"),
    );
    if std::env::var_os("TIERKIT_BLESS_GOLDEN").is_some() {
        std::fs::write(&csv_path, &csv).unwrap();
        std::fs::write(&digest_path, &digests).unwrap();
    }
    let want_csv = std::fs::read_to_string(&csv_path).unwrap();
    let want_digests = std::fs::read_to_string(&digest_path).unwrap();
    let changed: Vec<String> = want_csv
        .lines()
        .zip(csv.lines())
        .filter(|(a, b)| a != b)
        .map(|(a, b)| format!("  was {a}\n  now {b}"))
        .collect();
    assert!(
        changed.is_empty() && want_csv.lines().count() == csv.lines().count(),
        "results.csv differs from tests/golden/results.csv in {} rows (regenerate with \
         TIERKIT_BLESS_GOLDEN=1 only if the change is meant to alter results):\n{}",
        changed.len(),
        changed.join("\n")
    );
    let runs_changed: Vec<&str> = want_digests
        .lines()
        .zip(digests.lines())
        .filter(|(a, b)| a != b)
        .map(|(a, _)| a)
        .collect();
    assert!(
        runs_changed.is_empty() && want_digests.lines().count() == digests.lines().count(),
        "the files of {} runs differ from tests/golden/runs.txt although results.csv \
         matches (a statistic, time series or heat map changed): {:?}",
        runs_changed.len(),
        runs_changed
    );
    let _ = std::fs::remove_dir_all(&out);
}
