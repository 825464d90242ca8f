//! `tierkit bench`: simulated accesses per wall-clock second on one core.
//!
//! Each case runs the same run `reps` times and reports the median, one line per case:
//! the case name, a space, and accesses per second as an integer. Floors for this
//! project's 2-core machine (issue #2): 40 M, 20 M and 15 M accesses/s.

use crate::run::simulate;
use crate::run_config::{build, RunArgs};
use anyhow::Result;
use std::time::Instant;

/// One benchmark case: a name and the run it times.
pub struct Case {
    /// Printed name.
    pub name: &'static str,
    /// Policy.
    pub policy: &'static str,
    /// Extra `--set` overrides.
    pub sets: &'static [&'static str],
}

/// The cases, in output order.
pub const CASES: &[Case] = &[
    Case {
        name: "gups-first-touch-llc-off",
        policy: "first-touch",
        sets: &["machine.llc_enabled=false"],
    },
    Case {
        name: "gups-first-touch-llc-on",
        policy: "first-touch",
        sets: &[],
    },
    Case {
        name: "gups-autonuma-llc-on",
        policy: "autonuma",
        sets: &[],
    },
];

/// Median accesses per second of a case over `reps` runs of at most `accesses` each.
pub fn run_case(case: &Case, reps: usize, accesses: u64) -> Result<u64> {
    let mut sets: Vec<String> = case.sets.iter().map(|s| s.to_string()).collect();
    sets.push(format!("sim.max_accesses={accesses}"));
    let cfg = build(&RunArgs {
        workload: Some("gups".into()),
        policy: Some(case.policy.into()),
        sets,
        ..Default::default()
    })?;
    let mut rates = Vec::with_capacity(reps);
    for _ in 0..reps.max(1) {
        let start = Instant::now();
        let out = simulate(&cfg, false)?;
        let secs = start.elapsed().as_secs_f64().max(1e-9);
        rates.push(out.summary.accesses as f64 / secs);
    }
    rates.sort_by(|a, b| a.total_cmp(b));
    Ok(rates[rates.len() / 2] as u64)
}
