//! Every registered policy keeps the simulator's `Mechanisms` contract (issue 20
//! point 1; the live side is `crates/live/tests/policies_live.rs`): two processes with
//! a hot and a cold mapping each, one of which is partly unmapped mid-run, on a fast
//! tier of half the footprint, at a shortened policy time so that every migrating
//! policy acts within the run. (With a quarter, 256 pages, the NUMA-balancing family,
//! DAMON, MEMTIS and PET moved nothing: 11 of 22 policies were exercised.)
//!
//! Checked for each policy: the run completes; a debug build's own checks hold (a
//! policy that arms a hinting fault, tests an accessed bit or sets a sample period
//! without declaring it in `requirements()` panics, and the machine's invariants are
//! checked at the end); no interval ends with the fast tier over capacity; the
//! machine's pages are all accounted for (resident = used, every tier within
//! capacity); and the migration counters agree with each other (bytes moved = pages
//! moved × 4 KiB, the series sums to the totals).

use tierkit_core::*;
use tierkit_policies::PolicyConfig;
use tierkit_sim::testing::{read, run, small_machine, write, Script};
use tierkit_sim::SimConfig;

const HOT: u64 = 0x10_0000_0000;
const COLD: u64 = 0x20_0000_0000;
/// Pages per mapping (1 MiB each way: four mappings, 4 MiB in all).
const PAGES: u64 = 256;

/// The workload: per process, write every page of both mappings (first touch fills
/// the fast tier with whatever comes first: the *cold* mapping), then rounds of reads
/// with the hot mapping read 8× as often; process 0 unmaps half its cold mapping
/// halfway through.
fn workload() -> Box<dyn Workload> {
    let len = PAGES * PAGE_SIZE;
    let mut script = Script::new(4 * len);
    for p in 0..2u64 {
        let mut ops = Vec::new();
        for base in [COLD, HOT] {
            for i in 0..PAGES {
                ops.push(write(base + i * PAGE_SIZE, 100));
            }
        }
        let mut x = 0x9e37_79b9_7f4a_7c15u64 ^ p;
        let rounds = 300_000u64;
        for r in 0..rounds {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let page = x % PAGES;
            let cold_pages = if p == 0 && r >= rounds / 2 {
                PAGES / 2
            } else {
                PAGES
            };
            if p == 0 && r == rounds / 2 {
                ops.push(Op::Munmap {
                    addr: COLD + (PAGES / 2) * PAGE_SIZE,
                    len: (PAGES / 2) * PAGE_SIZE,
                });
            }
            if r % 9 == 0 {
                ops.push(read(COLD + (page % cold_pages) * PAGE_SIZE, 2_000));
            } else {
                ops.push(read(HOT + page * PAGE_SIZE, 2_000));
            }
        }
        script = script.process(&[(COLD, len), (HOT, len)], ops);
    }
    Box::new(script)
}

#[test]
fn every_registered_policy_keeps_the_simulators_mechanisms_contract() {
    let machine = small_machine(2, 64);
    let sim = SimConfig {
        // Shortened policy time (an expert option): every period passes many times
        // within the run, so each policy's migration paths run.
        policy_time_scale: 200.0,
        interval_ms: 10,
        ..SimConfig::default()
    };
    let mut moved_by = Vec::new();
    for name in PolicyConfig::names() {
        let ctx = BuildContext {
            space_scale: SpaceScale::EXACT,
            fresh_workload: Some(Box::new(workload)),
            shared_future: None,
        };
        let policy = PolicyConfig::default_for(name)
            .unwrap()
            .try_build(&ctx)
            .unwrap_or_else(|e| panic!("{name}: {e}"));
        let (out, m) = run(&machine, &sim, policy, workload());
        let s = &out.summary;
        let fast_capacity = m.capacity_pages(TierId::FAST);
        for row in &out.series.rows {
            assert!(
                row.fast_used_pages <= fast_capacity,
                "{name}: {} fast pages at {} s, capacity {fast_capacity}",
                row.fast_used_pages,
                row.time_s
            );
        }
        assert_eq!(m.used_pages_total(), m.resident_pages_total(), "{name}");
        for t in 0..2 {
            assert!(
                m.used_pages(TierId(t)) <= m.capacity_pages(TierId(t)),
                "{name}"
            );
        }
        assert_eq!(
            s.migrated_bytes,
            (s.promoted_pages + s.demoted_pages) * PAGE_SIZE,
            "{name}: bytes moved vs pages moved"
        );
        let series_promoted: u64 = out.series.rows.iter().map(|r| r.promoted_pages).sum();
        assert_eq!(series_promoted, s.promoted_pages, "{name}: series vs total");
        if s.promoted_pages + s.demoted_pages > 0 {
            moved_by.push(name);
        }
    }
    eprintln!("moved pages: {moved_by:?}");
    // The harness must exercise migration: every policy that migrates moves pages here.
    let migrating: Vec<&str> = PolicyConfig::names()
        .into_iter()
        .filter(|n| !["first-touch", "all-fast"].contains(n))
        .collect();
    assert_eq!(moved_by, migrating, "only these moved pages");
}
