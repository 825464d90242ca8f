//! `tierkit bench`: simulated accesses per wall-clock second on one core, against the
//! host's own limit measured in the same run.
//!
//! The simulator's hot path is a few dependent random memory accesses per simulated
//! access (the page state and the LLC set), so its speed is bounded by how fast this
//! host does random read-modify-writes over the same working set. `bench` measures that
//! limit first (a loop of random 8-byte read-modify-writes over an array as large as
//! the cases' page state plus LLC tags), then each case, and prints every case as
//! accesses per second and as a fraction of the limit: a ratio survives a noisy or
//! different machine where a bare rate does not. A second host row does, per
//! operation, just the memory traffic of a simulated access with the LLC on (the page
//! state and both lines of a 16-way set): the most a `-llc-on` case's fraction could
//! be. Each figure is the median of `reps` runs.

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

/// Pages of GUPS's default 4 GiB table, each with 16 bytes of page state.
const CASE_PAGES: u64 = (4 << 30) / 4096;
/// Lines of the default 32 MiB LLC, each with 8 bytes of tag, 16 to a set.
const CASE_LLC_LINES: u64 = (32 << 20) / 64;

/// Bytes of simulator state the cases touch at random: 16 bytes of page state per
/// 4 KiB page of GUPS's default 4 GiB table, plus 8 bytes of tag per line of the
/// default 32 MiB LLC; rounded up to a power of two.
pub fn working_set_bytes() -> u64 {
    (CASE_PAGES * 16 + CASE_LLC_LINES * 8).next_power_of_two()
}

/// The host's random read-modify-write rate over `bytes` of memory (rounded up to a
/// power of two), on base pages or (`huge`) on transparent huge pages where the host
/// grants them: median over `reps` runs of `ops` dependent-free random 8-byte
/// increments, in operations per second.
pub fn host_random_rmw_per_s(bytes: u64, ops: u64, reps: usize, huge: bool) -> f64 {
    let n = ((bytes / 8).max(1) as usize).next_power_of_two();
    let mut a = if huge {
        tierkit_core::host::vec_on_huge_pages(0u64, n)
    } else {
        vec![0u64; n]
    };
    let mask = n as u64 - 1;
    let rate = random_ops_per_s(ops, reps, |x| {
        let i = (x & mask) as usize;
        a[i] = a[i].wrapping_add(1);
    });
    std::hint::black_box(&a);
    rate
}

/// Median over `reps` runs of `ops` calls of `op`, each handed the next draw of one
/// xorshift64 stream, in operations per second. The draw is cheap, and no index
/// depends on a loaded value, as the simulator's next access does not depend on the
/// previous one's data.
fn random_ops_per_s(ops: u64, reps: usize, mut op: impl FnMut(u64)) -> f64 {
    let mut rates = Vec::with_capacity(reps.max(1));
    let mut x = 0x9E37_79B9_7F4A_7C15u64;
    for _ in 0..reps.max(1) {
        let start = Instant::now();
        for _ in 0..ops {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            op(x);
        }
        rates.push(ops as f64 / start.elapsed().as_secs_f64().max(1e-9));
    }
    median(rates)
}

/// The host's rate for the host memory traffic of one simulated access with the LLC
/// on, and nothing else: per operation, a random 8-byte read-modify-write in an array
/// as large as the bench's page state and one in each of the two host lines of a
/// random 128-byte block (a 16-way set of 8-byte tags) of an array as large as its LLC
/// tags, all on transparent huge pages. What a `-llc-on` case's fraction of the limit
/// can at most be is this row's. Median over `reps` runs of `ops` operations.
pub fn host_page_and_set_rmw_per_s(ops: u64, reps: usize) -> f64 {
    let (pages, sets) = (CASE_PAGES, CASE_LLC_LINES / 16);
    let mut state = tierkit_core::host::vec_on_huge_pages(0u64, 2 * pages as usize);
    let mut tags = tierkit_core::host::vec_on_huge_pages(0u64, 16 * sets as usize);
    let rate = random_ops_per_s(ops, reps, |x| {
        let page = (x % pages) as usize * 2;
        state[page] = state[page].wrapping_add(1);
        // The set from other bits of the same draw; its block's two lines.
        let set = ((x >> 32) % sets) as usize * 16;
        tags[set] = tags[set].wrapping_add(1);
        tags[set + 8] = tags[set + 8].wrapping_add(1);
    });
    std::hint::black_box((&state, &tags));
    rate
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(|a, b| a.total_cmp(b));
    v[v.len() / 2]
}

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
    Ok(median(rates) as u64)
}

/// Run the host measurement and every case, printing a line each to stdout (progress
/// to stderr), and return the table text.
pub fn run(reps: usize, accesses: u64) -> Result<String> {
    let bytes = working_set_bytes();
    eprintln!(
        "bench: host random read-modify-write over {} MiB ({} runs)...",
        bytes >> 20,
        reps
    );
    let ops = accesses.clamp(1_000_000, 50_000_000);
    // The simulator's large arrays ask for huge pages; the limit is measured on both
    // kinds of memory and the cases are held to the higher of the two.
    let base_pages = host_random_rmw_per_s(bytes, ops, reps, false);
    let huge_pages = host_random_rmw_per_s(bytes, ops, reps, true);
    let limit = base_pages.max(huge_pages);
    let mut out = format!("{:<28} {:>14} {:>10}\n", "case", "accesses/s", "of limit");
    for (kind, rate) in [("4 KiB pages", base_pages), ("huge pages", huge_pages)] {
        out.push_str(&format!(
            "{:<28} {:>12.1} M {:>10.2}\n",
            format!("host RMW {} MiB, {kind}", bytes >> 20),
            rate / 1e6,
            rate / limit
        ));
    }
    let page_and_set = host_page_and_set_rmw_per_s(ops, reps);
    out.push_str(&format!(
        "{:<28} {:>12.1} M {:>10.2}\n",
        "host RMW, page + LLC set",
        page_and_set / 1e6,
        page_and_set / limit
    ));
    print!("{out}");
    for case in CASES {
        eprintln!(
            "bench: {} ({} runs of {} accesses)...",
            case.name, reps, accesses
        );
        let rate = run_case(case, reps, accesses)? as f64;
        let line = format!(
            "{:<28} {:>12.1} M {:>10.2}\n",
            case.name,
            rate / 1e6,
            rate / limit
        );
        print!("{line}");
        out.push_str(&line);
    }
    Ok(out)
}
