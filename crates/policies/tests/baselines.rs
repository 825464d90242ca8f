//! The first baselines on small crafted streams: `first-touch` never migrates;
//! `autonuma` promotes a slow page on its first fault after arming and never overfills
//! the fast tier; `all-fast` keeps everything fast.

use tierkit_core::*;
use tierkit_policies::numa_scan::NumaScanConfig;
use tierkit_policies::{AllFast, Autonuma, AutonumaConfig, FirstTouch};
use tierkit_sim::testing::{read, run, small_machine, write, Script};
use tierkit_sim::SimConfig;
use tierkit_workloads::{GupsConfig, WorkloadConfig};

const BASE: u64 = 1 << 30;

fn page(i: u64) -> u64 {
    BASE + i * PAGE_SIZE
}

fn gups(footprint_mib: u64, nr_updates: u64) -> Box<dyn Workload> {
    WorkloadConfig::Gups(GupsConfig {
        footprint_mib,
        nr_updates,
        ..Default::default()
    })
    .build(3)
}

fn fast_scan() -> AutonumaConfig {
    AutonumaConfig {
        scan: NumaScanConfig {
            scan_delay_ms: 1,
            scan_period_min_ms: 10,
            scan_period_max_ms: 100,
            ..Default::default()
        },
    }
}

#[test]
fn first_touch_never_migrates() {
    let (out, m) = run(
        &small_machine(16, 256),
        &SimConfig::default(),
        Box::new(FirstTouch),
        gups(128, 2_000_000),
    );
    assert_eq!(out.summary.promoted_pages, 0);
    assert_eq!(out.summary.demoted_pages, 0);
    assert_eq!(out.summary.migrated_bytes, 0);
    assert!(
        m.used_pages(TierId(1)) > 0,
        "some pages fell back to the slow tier"
    );
}

#[test]
fn all_fast_serves_everything_from_the_fast_tier() {
    let (out, m) = run(
        &small_machine(16, 256),
        &SimConfig::default(),
        Box::new(AllFast),
        gups(128, 500_000),
    );
    assert_eq!(out.summary.fast_access_ratio, 1.0);
    assert_eq!(m.used_pages(TierId(1)), 0);
}

#[test]
fn autonuma_promotes_a_slow_page_on_its_first_fault_after_arming() {
    // 1 MiB fast tier (256 pages): touch 1024 pages so most land in the slow tier, wait
    // for the scanner (first scan at 1 ms) to arm them, then touch one slow page once.
    let mut ops: Vec<Op> = (0..1024).map(|i| write(page(i), 0)).collect();
    // Free fast pages: unmap the first 512 pages (the fast ones and then some).
    ops.push(Op::Munmap {
        addr: page(0),
        len: 512 * PAGE_SIZE,
    });
    ops.push(read(page(900), 5_000_000));
    let w = Script::new(4 * MIB).process(&[(BASE, 4 * MIB)], ops);
    let before = |m: &tierkit_sim::machine::Machine| m.used_pages(TierId(0));
    let (out, m) = run(
        &small_machine(1, 64),
        &SimConfig::default(),
        Box::new(Autonuma::new(fast_scan())),
        Box::new(w),
    );
    assert_eq!(
        out.summary.hint_faults, 1,
        "one access after arming, one fault"
    );
    assert_eq!(out.summary.promoted_pages, 1);
    let info = tierkit_core::Mechanisms::page(&m, Pid(0), page(900) >> PAGE_SHIFT).unwrap();
    assert_eq!(info.tier, TierId::FAST);
    assert_eq!(before(&m), 1);
}

#[test]
fn autonuma_never_overfills_the_fast_tier_and_fails_promotions_when_full() {
    let (out, m) = run(
        &small_machine(16, 256),
        &SimConfig::default(),
        Box::new(Autonuma::new(fast_scan())),
        gups(128, 3_000_000),
    );
    let wm = tierkit_core::Mechanisms::watermarks(&m, TierId::FAST);
    assert!(m.used_pages(TierId(0)) <= m.capacity_pages(TierId(0)) - wm.min as u64);
    assert!(out.summary.hint_faults > 0);
    // First-touch filled the fast tier to its min watermark: with no demotion in mode
    // 1, promotions above the high watermark are impossible and must fail.
    assert_eq!(out.summary.promoted_pages, 0);
    let failed = out
        .summary
        .policy_stats
        .iter()
        .find(|(k, _)| k == "failed_promotion_pages")
        .unwrap()
        .1;
    assert!(failed > 0.0);
}

/// A sampled machine's process has 1/N of the full RSS, but the NUMA scanner's step
/// interval (`task_scan_min` = scan_period_min / (RSS / scan_size)) is the full
/// process's: each step walks the full address space, so a pass must take as long as
/// on the full machine. Before the scanner took its RSS from the full machine, the
/// sampled run stepped N times more slowly (autonuma's hint faults on 4 GiB GUPS fell
/// from 4.7 M exact to 1.6 M at 1/64).
#[test]
fn sampled_numa_scanner_steps_at_the_full_machines_pace() {
    let cfg = AutonumaConfig {
        scan: NumaScanConfig {
            scan_delay_ms: 50,
            scan_size_mb: 16,
            ..Default::default()
        },
    };
    let period = |rate: &str| {
        let sim = SimConfig {
            sample_rate: tierkit_sim::SampleRate::parse(rate).unwrap(),
            ..SimConfig::default()
        };
        let (out, _) = run(
            &small_machine(64, 2048),
            &sim,
            Box::new(Autonuma::new(cfg.clone())),
            gups(1024, 1_000_000),
        );
        out.summary
            .policy_stats
            .iter()
            .find(|(k, _)| k == "scan_step_period_ms_pid0")
            .map(|(_, v)| *v)
            .unwrap()
    };
    let (exact, sampled) = (period("1"), period("1/8"));
    // 1 GiB touched in 16 MB windows: 64 windows, 1000 ms / 64 per step.
    assert!((exact - 15.625).abs() < 2.0, "exact step period {exact} ms");
    assert!(
        (sampled - exact).abs() <= 0.15 * exact,
        "sampled step period {sampled} ms vs exact {exact} ms"
    );
}
