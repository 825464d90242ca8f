//! `tierkit compare --validate-sampling`: how far sampled simulation moves the results.
//!
//! The matrix runs once exactly (`sim.sample_rate = 1`) and once at each sampled rate,
//! each in its own directory under `OUT` (so each resumes on its own). For every run
//! of the matrix the sampled result is set against the exact one: the relative error
//! in slowdown (against `all-fast` at the same rate), the absolute error in fast-access
//! ratio and F1, and the relative error in promoted pages (the sampled run reports
//! full-machine counts, so the two are directly comparable). Per policy and rate the
//! table gives the median and the largest error over the matrix's cells; the same
//! numbers go to `OUT/sampling.csv` and, as Markdown, to `OUT/sampling.md`.

use super::{run_matrix, CompareArgs, ResultRow};
use anyhow::{bail, Result};
use std::collections::BTreeMap;
use tierkit_sim::SampleRate;

/// The sampled rates validated when none are given.
pub const DEFAULT_RATES: &[&str] = &["1/8", "1/64", "1/256"];

/// One policy at one rate, over every cell of the matrix.
#[derive(Debug, Clone, PartialEq)]
pub struct PolicyError {
    /// Policy.
    pub policy: String,
    /// Sample rate (`1/64`).
    pub rate: String,
    /// Cells compared.
    pub cells: usize,
    /// Median |sampled slowdown / exact slowdown − 1|.
    pub median_slowdown_error: f64,
    /// Largest |sampled slowdown / exact slowdown − 1|.
    pub max_slowdown_error: f64,
    /// Largest |Δ fast-access ratio| (absolute).
    pub max_far_error: f64,
    /// Largest |Δ F1| (absolute).
    pub max_f1_error: f64,
    /// Largest relative error in promoted pages, over cells where the exact run
    /// promoted at least 1 000 pages (smaller counts are dominated by a few pages).
    pub max_promoted_error: f64,
}

fn rel(a: f64, b: f64) -> f64 {
    if b.is_finite() && b != 0.0 && a.is_finite() {
        (a / b - 1.0).abs()
    } else {
        f64::NAN
    }
}

/// Median of the finite values of `v` (NaN if none).
pub(super) fn median(mut v: Vec<f64>) -> f64 {
    v.retain(|x| x.is_finite());
    if v.is_empty() {
        return f64::NAN;
    }
    v.sort_by(|a, b| a.total_cmp(b));
    let n = v.len();
    if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    }
}

fn max(v: impl Iterator<Item = f64>) -> f64 {
    v.filter(|x| x.is_finite()).fold(f64::NAN, f64::max)
}

/// Errors of `sampled` rows against `exact` rows, per policy (in policy order).
pub fn errors(rate: &str, exact: &[ResultRow], sampled: &[ResultRow]) -> Vec<PolicyError> {
    let key = |r: &ResultRow| {
        (
            r.workload.clone(),
            r.machine.clone(),
            r.ratio.clone(),
            r.policy.clone(),
        )
    };
    let exact: BTreeMap<_, &ResultRow> = exact.iter().map(|r| (key(r), r)).collect();
    let mut by_policy: BTreeMap<String, Vec<(&ResultRow, &ResultRow)>> = BTreeMap::new();
    for s in sampled {
        if let Some(e) = exact.get(&key(s)) {
            by_policy.entry(s.policy.clone()).or_default().push((e, s));
        }
    }
    by_policy
        .into_iter()
        .filter(|(p, _)| p != "all-fast")
        .map(|(policy, pairs)| {
            let slow: Vec<f64> = pairs
                .iter()
                .map(|(e, s)| rel(s.slowdown, e.slowdown))
                .collect();
            PolicyError {
                rate: rate.to_string(),
                cells: pairs.len(),
                median_slowdown_error: median(slow.clone()),
                max_slowdown_error: max(slow.into_iter()),
                max_far_error: max(pairs
                    .iter()
                    .map(|(e, s)| (s.fast_access_ratio - e.fast_access_ratio).abs())),
                max_f1_error: max(pairs.iter().map(|(e, s)| (s.f1 - e.f1).abs())),
                max_promoted_error: max(pairs
                    .iter()
                    .filter(|(e, _)| e.promoted_pages >= 1000)
                    .map(|(e, s)| rel(s.promoted_pages as f64, e.promoted_pages as f64))),
                policy,
            }
        })
        .collect()
}

/// A share as a percentage for a Markdown table (`—` if not finite).
pub(super) fn pct(x: f64) -> String {
    if x.is_finite() {
        format!("{:.2}%", x * 100.0)
    } else {
        "—".into()
    }
}

fn abs3(x: f64) -> String {
    if x.is_finite() {
        format!("{x:.3}")
    } else {
        "—".into()
    }
}

/// The table as Markdown (one row per policy and rate).
pub fn markdown(errs: &[PolicyError]) -> String {
    let mut s = String::from(
        "| policy | rate | cells | median \\|Δ slowdown\\| | max \\|Δ slowdown\\| | max \\|Δ fast-access\\| | max \\|Δ F1\\| | max \\|Δ promoted\\| |\n|---|---|---:|---:|---:|---:|---:|---:|\n",
    );
    for e in errs {
        s.push_str(&format!(
            "| {} | {} | {} | {} | {} | {} | {} | {} |\n",
            e.policy,
            e.rate,
            e.cells,
            pct(e.median_slowdown_error),
            pct(e.max_slowdown_error),
            abs3(e.max_far_error),
            abs3(e.max_f1_error),
            pct(e.max_promoted_error)
        ));
    }
    s
}

/// A number for a CSV cell (`NA` if not finite, as results.csv writes NaN).
pub(super) fn csv_num(x: f64) -> String {
    if x.is_finite() {
        format!("{x:.6}")
    } else {
        "NA".into()
    }
}

fn csv(errs: &[PolicyError]) -> String {
    let mut s = String::from(
        "policy,rate,cells,median_slowdown_error,max_slowdown_error,max_far_error,max_f1_error,max_promoted_error\n",
    );
    let f = csv_num;
    for e in errs {
        s.push_str(&format!(
            "{},{},{},{},{},{},{},{}\n",
            e.policy,
            e.rate,
            e.cells,
            f(e.median_slowdown_error),
            f(e.max_slowdown_error),
            f(e.max_far_error),
            f(e.max_f1_error),
            f(e.max_promoted_error)
        ));
    }
    s
}

/// Run the matrix of `args` exactly and at each of `rates`; write `sampling.csv` and
/// `sampling.md` in `args.out` and return the errors and the Markdown table.
pub fn validate_sampling(
    args: &CompareArgs,
    rates: &[String],
) -> Result<(Vec<PolicyError>, String)> {
    if rates.is_empty() {
        bail!("--validate-sampling needs at least one rate (e.g. --rates 1/8,1/64)");
    }
    for r in rates {
        let parsed = SampleRate::parse(r).map_err(|e| anyhow::anyhow!("--rates {e}"))?;
        if parsed == SampleRate::EXACT {
            bail!("--rates {r}: the exact run is always made; give sampled rates such as 1/64");
        }
    }
    if args
        .sets
        .iter()
        .any(|s| s.trim_start().starts_with("sim.sample_rate"))
    {
        bail!("--validate-sampling sets sim.sample_rate itself; remove it from --set");
    }
    super::prepare_out_dir(&args.out, args.force)?;
    let run_at = |rate: &str| -> Result<Vec<ResultRow>> {
        let mut a = args.clone();
        a.sets.push(format!("sim.sample_rate=\"{rate}\""));
        a.out = args.out.join(format!("rate-{}", rate.replace('/', "-")));
        eprintln!("validate-sampling: running the matrix at sample rate {rate}");
        Ok(run_matrix(&a)?.0)
    };
    let exact = run_at("1")?;
    let mut all = Vec::new();
    for r in rates {
        let rows = run_at(r)?;
        all.extend(errors(r, &exact, &rows));
    }
    let md = markdown(&all);
    std::fs::write(args.out.join("sampling.csv"), csv(&all))?;
    std::fs::write(args.out.join("sampling.md"), &md)?;
    Ok((all, md))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(policy: &str, slowdown: f64, far: f64, promoted: u64) -> ResultRow {
        ResultRow {
            workload: "gups".into(),
            machine: "cxl".into(),
            ratio: "1:8".into(),
            policy: policy.into(),
            slowdown,
            fast_access_ratio: far,
            promoted_pages: promoted,
            ..Default::default()
        }
    }

    #[test]
    fn errors_are_relative_for_slowdown_and_absolute_for_ratios() {
        let exact = vec![row("tpp", 2.0, 0.5, 10_000), row("all-fast", 1.0, 1.0, 0)];
        let sampled = vec![row("tpp", 2.1, 0.45, 12_000), row("all-fast", 1.0, 1.0, 0)];
        let e = errors("1/64", &exact, &sampled);
        assert_eq!(e.len(), 1, "all-fast is the reference, not a result");
        assert!((e[0].max_slowdown_error - 0.05).abs() < 1e-12);
        assert!((e[0].median_slowdown_error - 0.05).abs() < 1e-12);
        assert!((e[0].max_far_error - 0.05).abs() < 1e-12);
        assert!((e[0].max_promoted_error - 0.2).abs() < 1e-12);
        assert!(markdown(&e).contains("| tpp | 1/64 | 1 | 5.00% |"));
    }
}
