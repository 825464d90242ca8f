//! Mechanism semantics and timing sanity of the simulated machine, checked with small
//! recording policies on scripted workloads.

use std::sync::{Arc, Mutex};
use tierkit_core::*;
use tierkit_sim::testing::{read, run, small_machine, wait_then_read, write, Script};
use tierkit_sim::{MachineConfig, SimConfig};

const BASE: u64 = 1 << 30;

/// What a recording policy saw.
#[derive(Default, Debug)]
struct Log {
    faults: Vec<HintFault>,
    fault_times: Vec<Nanos>,
    samples: Vec<Sample>,
    low_watermarks: Vec<(TierId, Nanos)>,
    young: Vec<Option<bool>>,
    allocs: u64,
}

type InitFn = Box<dyn FnMut(&mut dyn Mechanisms) + Send>;
type TimerFn = Box<dyn FnMut(TimerId, &mut dyn Mechanisms, &mut Log) + Send>;

/// A policy driven by a closure on each event, logging everything.
struct Recorder {
    log: Arc<Mutex<Log>>,
    init: InitFn,
    on_timer: TimerFn,
    wants_alloc: bool,
}

impl Recorder {
    fn new(log: Arc<Mutex<Log>>) -> Recorder {
        Recorder {
            log,
            init: Box::new(|_| {}),
            on_timer: Box::new(|_, _, _| {}),
            wants_alloc: false,
        }
    }
}

impl Policy for Recorder {
    fn name(&self) -> &'static str {
        "recorder"
    }
    fn requirements(&self) -> Requirements {
        // Its closures may use any observation.
        Requirements {
            page_alloc_events: self.wants_alloc,
            hint_faults: true,
            accessed_bits: true,
            sampling: true,
            ..Default::default()
        }
    }
    fn init(&mut self, mech: &mut dyn Mechanisms) {
        (self.init)(mech);
    }
    fn on_event(&mut self, event: &Event, mech: &mut dyn Mechanisms) {
        let mut log = self.log.lock().unwrap();
        match event {
            Event::HintFault(f) => {
                log.faults.push(*f);
                log.fault_times.push(mech.now());
            }
            Event::Sample(s) => log.samples.push(*s),
            Event::LowWatermark { tier } => log.low_watermarks.push((*tier, mech.now())),
            Event::PageAlloc { .. } => log.allocs += 1,
            Event::Timer { id } => (self.on_timer)(*id, mech, &mut log),
            _ => {}
        }
    }
}

fn page(i: u64) -> u64 {
    BASE + i * PAGE_SIZE
}

#[test]
fn armed_page_faults_once_on_first_access_with_its_time() {
    let log = Arc::new(Mutex::new(Log::default()));
    let mut p = Recorder::new(log.clone());
    // Arm page 3 at t = 1 ms.
    p.init = Box::new(|m| m.schedule(NS_PER_MS, 1, Runner::Kthread));
    p.on_timer = Box::new(|_, m, _| assert!(m.arm_hint_fault(Pid(0), page(3) >> PAGE_SHIFT)));
    // Accesses at ~0 (before arming), then ~2 ms, ~3 ms and ~4 ms.
    let mut ops = vec![write(page(3), 0), read(page(3), 2 * NS_PER_MS as u32)];
    ops.push(read(page(3), NS_PER_MS as u32));
    ops.push(read(page(3), NS_PER_MS as u32));
    let w = Script::new(16 * MIB).process(&[(BASE, 16 * MIB)], ops);
    let (out, _) = run(
        &small_machine(8, 64),
        &SimConfig::default(),
        Box::new(p),
        Box::new(w),
    );
    let log = log.lock().unwrap();
    assert_eq!(log.faults.len(), 1, "exactly one fault");
    assert_eq!(out.summary.hint_faults, 1);
    let f = log.faults[0];
    assert_eq!(f.vpn, page(3) >> PAGE_SHIFT);
    assert_eq!(f.armed_at, NS_PER_MS);
    // The first access after arming: the 2 ms gap after the first write (80 ns).
    let t = log.fault_times[0];
    assert!(
        (2 * NS_PER_MS..2 * NS_PER_MS + 1_000).contains(&t),
        "fault at {t}"
    );
}

#[test]
fn arm_range_skips_filtered_tiers_and_unmapped_pages() {
    let log = Arc::new(Mutex::new(Log::default()));
    let mut p = Recorder::new(log.clone());
    p.init = Box::new(|m| m.schedule(NS_PER_MS, 1, Runner::Kthread));
    p.on_timer = Box::new(|_, m, _| {
        // Pages 0..10 are resident in the fast tier; arm only slow-tier pages: none.
        assert_eq!(
            m.arm_range(Pid(0), page(0) >> PAGE_SHIFT, 64, Some(TierId(1))),
            0
        );
        assert_eq!(m.arm_range(Pid(0), page(0) >> PAGE_SHIFT, 64, None), 10);
    });
    let mut ops: Vec<Op> = (0..10).map(|i| write(page(i), 0)).collect();
    ops.push(read(page(0), 2 * NS_PER_MS as u32));
    ops.extend((1..10).map(|i| read(page(i), 0)));
    let w = Script::new(16 * MIB).process(&[(BASE, 16 * MIB)], ops);
    let (out, _) = run(
        &small_machine(8, 64),
        &SimConfig::default(),
        Box::new(p),
        Box::new(w),
    );
    assert_eq!(out.summary.hint_faults, 10);
}

/// Fill 4096 pages of a 32 MiB mapping past an 8 MiB fast tier, then at 1 ms walk it
/// with `walk`; returns what the walk saw (vpn, tier), the entries it counted, and the
/// run's tiering CPU.
fn walk_after_fill(
    walk: impl Fn(&mut dyn Mechanisms, &mut Vec<(Vpn, TierId)>) -> u64 + Send + 'static,
) -> (Vec<(Vpn, TierId)>, u64, f64) {
    let seen = Arc::new(Mutex::new((Vec::new(), 0)));
    let log = Arc::new(Mutex::new(Log::default()));
    let mut p = Recorder::new(log);
    p.init = Box::new(|m| m.schedule(NS_PER_MS, 1, Runner::Kthread));
    let out = seen.clone();
    p.on_timer = Box::new(move |_, m, _| {
        let mut o = out.lock().unwrap();
        let mut pages = Vec::new();
        o.1 = walk(m, &mut pages);
        o.0 = pages;
    });
    let mut ops: Vec<Op> = (0..4096).map(|i| write(page(i), 0)).collect();
    ops.push(read(page(0), 2 * NS_PER_MS as u32));
    let w = Script::new(32 * MIB).process(&[(BASE, 32 * MIB)], ops);
    let (run_out, _) = run(
        &small_machine(8, 64),
        &SimConfig::default(),
        Box::new(p),
        Box::new(w),
    );
    let (pages, walked) = std::mem::take(&mut *seen.lock().unwrap());
    (pages, walked, run_out.summary.tiering_cpu_seconds)
}

#[test]
fn a_walk_of_one_tier_sees_its_pages_and_costs_the_whole_walk() {
    let nr = 32 * MIB / PAGE_SIZE;
    let (all, walked, cpu) = walk_after_fill(|m, out| {
        m.walk_pages(
            Pid(0),
            page(0) >> PAGE_SHIFT,
            32 * MIB / PAGE_SIZE,
            &mut |v, i| out.push((v, i.tier)),
        )
    });
    assert_eq!(all.len(), 4096);
    assert_eq!(walked, nr);
    assert!(cpu > 0.0, "a walk is charged");
    for tier in [TierId(0), TierId(1)] {
        let (some, w, c) = walk_after_fill(move |m, out| {
            m.walk_tier_pages(
                Pid(0),
                page(0) >> PAGE_SHIFT,
                32 * MIB / PAGE_SIZE,
                tier,
                &mut |v, i| out.push((v, i.tier)),
            )
        });
        let want: Vec<_> = all.iter().copied().filter(|&(_, t)| t == tier).collect();
        assert!(
            !want.is_empty() && want.len() < all.len(),
            "both tiers hold pages"
        );
        assert_eq!(some, want, "tier {}", tier.0);
        assert_eq!(w, walked);
        assert_eq!(c, cpu, "the same walk's cost");
    }
}

#[test]
fn sampling_period_n_gives_one_sample_per_n_events() {
    for period in [1u64, 7, 100] {
        let log = Arc::new(Mutex::new(Log::default()));
        let mut p = Recorder::new(log.clone());
        p.init = Box::new(move |m| {
            m.set_sample_period(SampleKind::LlcLoadMiss, period);
            m.set_sample_period(SampleKind::Store, period * 2);
        });
        // 1000 distinct lines read (all LLC misses with the LLC off) and 1000 stores.
        let mut ops: Vec<Op> = (0..1000).map(|i| read(BASE + i * 64, 0)).collect();
        ops.extend((0..1000).map(|i| write(BASE + i * 64, 0)));
        let w = Script::new(16 * MIB).process(&[(BASE, 16 * MIB)], ops);
        run(
            &small_machine(8, 64),
            &SimConfig::default(),
            Box::new(p),
            Box::new(w),
        );
        let log = log.lock().unwrap();
        let loads = log
            .samples
            .iter()
            .filter(|s| s.kind == SampleKind::LlcLoadMiss)
            .count() as u64;
        let stores = log
            .samples
            .iter()
            .filter(|s| s.kind == SampleKind::Store)
            .count() as u64;
        assert_eq!(loads, 1000 / period, "period {period}");
        assert_eq!(stores, 1000 / (period * 2), "period {period}");
    }
}

#[test]
fn llc_hits_are_not_load_miss_samples() {
    let log = Arc::new(Mutex::new(Log::default()));
    let mut p = Recorder::new(log.clone());
    p.init = Box::new(|m| m.set_sample_period(SampleKind::LlcLoadMiss, 1));
    // The same line read 100 times: one miss, 99 hits.
    let ops: Vec<Op> = (0..100).map(|_| read(BASE, 0)).collect();
    let w = Script::new(16 * MIB).process(&[(BASE, 16 * MIB)], ops);
    let m = MachineConfig {
        llc_enabled: true,
        ..small_machine(8, 64)
    };
    let (out, _) = run(&m, &SimConfig::default(), Box::new(p), Box::new(w));
    assert_eq!(log.lock().unwrap().samples.len(), 1);
    assert_eq!(out.summary.mem_accesses, 1);
    assert_eq!(out.summary.counters.llc_hits, 99);
}

#[test]
fn accessed_bit_is_set_by_any_access_and_cleared_by_test_and_clear() {
    let log = Arc::new(Mutex::new(Log::default()));
    let mut p = Recorder::new(log.clone());
    p.init = Box::new(|m| {
        for k in 1..=3 {
            m.schedule(k * NS_PER_MS, k as u32, Runner::Kthread);
        }
    });
    p.on_timer = Box::new(|_, m, log| {
        log.young
            .push(m.test_and_clear_young(Pid(0), page(0) >> PAGE_SHIFT));
        log.young
            .push(m.test_and_clear_young(Pid(0), page(0) >> PAGE_SHIFT));
    });
    // Write at t≈0; nothing in (1 ms, 2 ms); a read at ≈2.5 ms.
    let ops = vec![
        write(page(0), 0),
        read(page(0), 2_500_000),
        read(page(1), 1_000_000),
    ];
    let w = Script::new(16 * MIB).process(&[(BASE, 16 * MIB)], ops);
    run(
        &small_machine(8, 64),
        &SimConfig::default(),
        Box::new(p),
        Box::new(w),
    );
    let young = &log.lock().unwrap().young;
    assert_eq!(
        young,
        &[
            Some(true),
            Some(false),
            Some(false),
            Some(false),
            Some(true),
            Some(false)
        ]
    );
}

#[test]
fn allocation_falls_back_below_min_and_low_watermark_event_fires() {
    let log = Arc::new(Mutex::new(Log::default()));
    let mut p = Recorder::new(log.clone());
    p.wants_alloc = true;
    let slot = Arc::new(Mutex::new(None));
    let slot2 = slot.clone();
    p.init = Box::new(move |m| {
        *slot2.lock().unwrap() = Some((m.watermarks(TierId(0)), m.tiers()[0].capacity_pages))
    });
    // 8 MiB fast = 2048 pages; touch 4096 pages.
    let ops: Vec<Op> = (0..4096).map(|i| write(page(i), 10)).collect();
    let w = Script::new(32 * MIB).process(&[(BASE, 32 * MIB)], ops);
    let (out, m) = run(
        &small_machine(8, 64),
        &SimConfig::default(),
        Box::new(p),
        Box::new(w),
    );
    let (wm, cap) = slot.lock().unwrap().unwrap();
    assert!(
        wm.min < wm.low && wm.low < wm.high && wm.high < cap as f64,
        "{wm:?}"
    );
    // The fast tier filled exactly to its min watermark, the rest fell back.
    assert_eq!(m.used_pages(TierId(0)), cap - wm.min as u64);
    assert_eq!(m.used_pages(TierId(1)), 4096 - (cap - wm.min as u64));
    assert_eq!(out.summary.counters.allocated_pages, 4096);
    let log = log.lock().unwrap();
    assert_eq!(log.allocs, 4096);
    assert!(!log.low_watermarks.is_empty());
    assert!(log.low_watermarks.iter().all(|(t, _)| *t == TierId(0)));
    // At most one event per millisecond.
    let mut times: Vec<u64> = log
        .low_watermarks
        .iter()
        .map(|(_, t)| t / NS_PER_MS)
        .collect();
    let n = times.len();
    times.dedup();
    assert_eq!(times.len(), n);
}

/// A policy with an unbounded fast tier, to compare with an all-slow placement.
struct AllFastProbe;
impl Policy for AllFastProbe {
    fn name(&self) -> &'static str {
        "all-fast-probe"
    }
    fn requirements(&self) -> Requirements {
        Requirements {
            unbounded_fast_tier: true,
            ..Default::default()
        }
    }
    fn on_event(&mut self, _: &Event, _: &mut dyn Mechanisms) {}
}

/// A policy that moves every page to the slow tier right after it is allocated.
struct AllSlowProbe;
impl Policy for AllSlowProbe {
    fn name(&self) -> &'static str {
        "all-slow-probe"
    }
    fn requirements(&self) -> Requirements {
        Requirements {
            page_alloc_events: true,
            ..Default::default()
        }
    }
    fn on_event(&mut self, e: &Event, m: &mut dyn Mechanisms) {
        if let Event::PageAlloc { pid, vpn, .. } = e {
            m.migrate(*pid, *vpn, TierId(1), MigrateMode::Async)
                .unwrap();
        }
    }
}

fn latency_bound_stream(n: u64, pages: u64) -> Vec<Op> {
    let mut ops: Vec<Op> = (0..pages).map(|i| write(page(i), 0)).collect();
    // A dependent pointer-chase-like walk: MLP 1, no compute, every access a miss.
    ops.extend((0..n).map(|i| read(page((i * 7919) % pages) + (i % 64) * 64, 0)));
    ops
}

#[test]
fn all_slow_is_slower_than_all_fast_by_the_latency_ratio() {
    let ops = latency_bound_stream(200_000, 1024);
    let fast_w = Script::new(8 * MIB).process(&[(BASE, 8 * MIB)], ops.clone());
    let slow_w = Script::new(8 * MIB).process(&[(BASE, 8 * MIB)], ops);
    let m = small_machine(64, 64);
    let (fast, _) = run(
        &m,
        &SimConfig::default(),
        Box::new(AllFastProbe),
        Box::new(fast_w),
    );
    let (slow, _) = run(
        &m,
        &SimConfig::default(),
        Box::new(AllSlowProbe),
        Box::new(slow_w),
    );
    assert_eq!(fast.summary.fast_access_ratio, 1.0);
    assert!(slow.summary.fast_access_ratio < 0.01);
    let ratio = slow.summary.sim_seconds / fast.summary.sim_seconds;
    let expected = 170.0 / 80.0;
    assert!(
        (ratio / expected - 1.0).abs() < 0.03,
        "ratio {ratio} vs {expected}"
    );
}

#[test]
fn bandwidth_saturation_slows_a_stream_as_demand_exceeds_bandwidth() {
    // Slow tier of 1 GB/s: 64 B per 64 ns at most.
    let mut m = small_machine(64, 64);
    m.tiers[1].bandwidth_gbps = 1.0;
    let mut ns_per_access = Vec::new();
    for mlp in [1.0, 2.0, 8.0, 32.0, 128.0] {
        // Few pages, so the initial moves to the slow tier book little bandwidth.
        let ops = latency_bound_stream(200_000, 64);
        let w = Script::new(8 * MIB).process_with_mlp(&[(BASE, 8 * MIB)], ops, mlp);
        let (out, _) = run(
            &m,
            &SimConfig::default(),
            Box::new(AllSlowProbe),
            Box::new(w),
        );
        ns_per_access.push(out.summary.sim_seconds * 1e9 / out.summary.accesses as f64);
    }
    // Unsaturated (MLP 1, 2): latency / MLP. Demand 64 B / (170/MLP ns) exceeds 1 GB/s
    // from MLP ≈ 2.7 on: time per access plateaus at 64 ns instead of falling.
    assert!((ns_per_access[0] - 170.0).abs() < 10.0, "{ns_per_access:?}");
    assert!((ns_per_access[1] - 85.0).abs() < 10.0, "{ns_per_access:?}");
    for &t in &ns_per_access[2..] {
        assert!(
            (t - 64.0).abs() / 64.0 < 0.1,
            "saturated time per access {t}: {ns_per_access:?}"
        );
    }
    assert!(ns_per_access[4] > 170.0 / 128.0 * 10.0);
}

#[test]
fn migration_charges_bandwidth_and_cost_to_the_right_party() {
    // Sync migration in a fault stalls the thread; async charges only tiering CPU.
    struct Mover(MigrateMode);
    impl Policy for Mover {
        fn name(&self) -> &'static str {
            "mover"
        }
        fn requirements(&self) -> Requirements {
            Requirements {
                hint_faults: true,
                ..Default::default()
            }
        }
        fn init(&mut self, m: &mut dyn Mechanisms) {
            m.schedule(NS_PER_MS, 0, Runner::Kthread);
        }
        fn on_event(&mut self, e: &Event, m: &mut dyn Mechanisms) {
            match e {
                Event::Timer { .. } => {
                    m.arm_range(Pid(0), page(0) >> PAGE_SHIFT, 1024, None);
                }
                Event::HintFault(f) => {
                    let _ = m.migrate(f.pid, f.vpn, TierId(1), self.0);
                }
                _ => {}
            }
        }
    }
    let mut runs = Vec::new();
    for mode in [MigrateMode::Sync, MigrateMode::Async] {
        let mut ops: Vec<Op> = (0..256).map(|i| write(page(i), 0)).collect();
        ops.push(read(page(0), 2 * NS_PER_MS as u32));
        ops.extend((1..256).map(|i| read(page(i), 0)));
        let w = Script::new(8 * MIB).process(&[(BASE, 8 * MIB)], ops);
        let (out, m) = run(
            &small_machine(64, 64),
            &SimConfig::default(),
            Box::new(Mover(mode)),
            Box::new(w),
        );
        assert_eq!(out.summary.demoted_pages, 256);
        assert_eq!(m.used_pages(TierId(1)), 256);
        assert_eq!(out.summary.migrated_bytes, 256 * PAGE_SIZE);
        runs.push(out.summary);
    }
    let (sync, asyn) = (&runs[0], &runs[1]);
    let per_page = 3_000.0 + 4096.0 / 8.0; // fixed + copy at 8 GB/s
    assert!(sync.app_tiering_stall_seconds * 1e9 >= 256.0 * per_page);
    assert!(asyn.app_tiering_stall_seconds * 1e9 < 256.0 * 1_100.0); // faults only
    assert!(sync.sim_seconds > asyn.sim_seconds);
    assert!((sync.tiering_cpu_seconds - asyn.tiering_cpu_seconds).abs() < 1e-9);
}

/// Work a policy does as a kthread inside a hinting fault (`Mechanisms::as_kthread`,
/// a sampled machine's at-once reclaim) is tiering CPU and no stall of the faulting
/// thread; the same work charged directly stalls it.
#[test]
fn work_run_as_a_kthread_inside_a_fault_does_not_stall_the_thread() {
    struct Charger {
        as_kthread: bool,
    }
    impl Policy for Charger {
        fn name(&self) -> &'static str {
            "charger"
        }
        fn requirements(&self) -> Requirements {
            Requirements {
                hint_faults: true,
                ..Default::default()
            }
        }
        fn init(&mut self, m: &mut dyn Mechanisms) {
            m.schedule(NS_PER_MS, 0, Runner::Kthread);
        }
        fn on_event(&mut self, e: &Event, m: &mut dyn Mechanisms) {
            match e {
                Event::Timer { .. } => {
                    m.arm_range(Pid(0), page(0) >> PAGE_SHIFT, 64, None);
                }
                Event::HintFault(_) if self.as_kthread => {
                    m.as_kthread(&mut |k| k.charge_cpu(1_000_000))
                }
                Event::HintFault(_) => m.charge_cpu(1_000_000),
                _ => {}
            }
        }
    }
    let mut runs = Vec::new();
    for as_kthread in [false, true] {
        let mut ops: Vec<Op> = (0..64).map(|i| write(page(i), 0)).collect();
        ops.push(read(page(0), 2 * NS_PER_MS as u32));
        ops.extend((1..64).map(|i| read(page(i), 0)));
        let w = Script::new(8 * MIB).process(&[(BASE, 8 * MIB)], ops);
        let (out, _) = run(
            &small_machine(64, 64),
            &SimConfig::default(),
            Box::new(Charger { as_kthread }),
            Box::new(w),
        );
        runs.push(out.summary);
    }
    let (direct, kthread) = (&runs[0], &runs[1]);
    // 64 faults, 1 ms of work each: tiering CPU either way.
    assert!(
        (direct.tiering_cpu_seconds - 0.064).abs() < 0.001,
        "{direct:?}"
    );
    assert!(
        (kthread.tiering_cpu_seconds - 0.064).abs() < 0.001,
        "{kthread:?}"
    );
    assert!(direct.app_tiering_stall_seconds >= 0.064);
    assert!(kthread.app_tiering_stall_seconds < 0.001);
    assert!(direct.sim_seconds > kthread.sim_seconds + 0.06);
}

#[test]
fn promotion_into_a_full_fast_tier_fails() {
    struct Promoter;
    impl Policy for Promoter {
        fn name(&self) -> &'static str {
            "promoter"
        }
        fn requirements(&self) -> Requirements {
            Requirements {
                page_alloc_events: true,
                ..Default::default()
            }
        }
        fn on_event(&mut self, e: &Event, m: &mut dyn Mechanisms) {
            if let Event::PageAlloc { pid, vpn, tier, .. } = e {
                let r = m.migrate(*pid, *vpn, TierId(0), MigrateMode::Async);
                if tier.is_fast() {
                    assert_eq!(r, Err(MigrateError::AlreadyThere));
                } else {
                    assert_eq!(r, Err(MigrateError::NoSpace));
                }
            }
        }
    }
    let ops: Vec<Op> = (0..4096).map(|i| write(page(i), 0)).collect();
    let w = Script::new(32 * MIB).process(&[(BASE, 32 * MIB)], ops);
    let (out, m) = run(
        &small_machine(8, 64),
        &SimConfig::default(),
        Box::new(Promoter),
        Box::new(w),
    );
    assert!(m.used_pages(TierId(0)) <= m.capacity_pages(TierId(0)));
    assert_eq!(out.summary.promoted_pages, 0);
    assert!(out.summary.failed_migrations > 0);
}

/// `ops` over one 32 MiB mapping on an 8 MiB fast tier, under a policy that moves
/// nothing, with placement epochs of `epoch_ms` and a heat map of `bins` bins.
fn run_placement_epochs(
    ops: Vec<Op>,
    epoch_ms: u64,
    bins: usize,
) -> (tierkit_sim::RunOutput, tierkit_sim::machine::Machine) {
    let w = Script::new(32 * MIB).process(&[(BASE, 32 * MIB)], ops);
    let sim = SimConfig {
        epoch_ms,
        heatmap_bins: bins,
        ..SimConfig::default()
    };
    let log = Arc::new(Mutex::new(Log::default()));
    run(
        &small_machine(8, 64),
        &sim,
        Box::new(Recorder::new(log)),
        Box::new(w),
    )
}

#[test]
fn placement_epochs_measure_the_fast_tier_against_the_epochs_hot_set() {
    // Fill past the fast tier, then in a later epoch hammer 100 slow pages and 100
    // fast pages.
    let mut ops: Vec<Op> = (0..4096).map(|i| write(page(i), 0)).collect();
    ops.push(read(page(0), 3 * NS_PER_MS as u32));
    for _ in 0..10 {
        ops.extend((2100..2200).map(|i| read(page(i), 0)));
        ops.extend((0..100).map(|i| read(page(i), 0)));
    }
    let (out, m) = run_placement_epochs(ops, 2, 8);
    let last = out.placement.epochs.last().unwrap();
    assert_eq!(last.hot_pages, 200);
    assert_eq!(last.fast_pages, m.used_pages(TierId(0)));
    // Pages 0..100 are fast, 2100..2200 slow: recall 1/2.
    assert!((last.recall - 0.5).abs() < 1e-9, "{last:?}");
    assert!((last.precision - 100.0 / m.used_pages(TierId(0)) as f64).abs() < 1e-9);
    // The heat map puts the hammered pages in the right bins (8 bins of the 8192
    // mapped pages: 1024 each).
    let heat = out.placement.heat.last().unwrap();
    assert_eq!(heat.len(), 8);
    assert_eq!(heat[0], 1000 + 1);
    assert_eq!(heat[2], 1000);
    assert_eq!(heat.iter().sum::<u64>(), 2001);
}

#[test]
fn a_placement_epochs_hot_set_breaks_ties_in_address_order() {
    // An epoch that reads every one of 4096 pages once and the last 96 a second time,
    // on a fast tier of 2048 pages: the hot set is the 96 read twice, then the lowest
    // 1952 addresses among the pages read once. The pages are first touched from the
    // top down, so the fast tier holds high addresses and the ties it does not hold
    // come first.
    let mut ops: Vec<Op> = (0..4096).rev().map(|i| write(page(i), 0)).collect();
    ops.push(read(page(0), 15 * NS_PER_MS as u32));
    ops.extend((1..4096).map(|i| read(page(i), 0)));
    ops.extend((4000..4096).map(|i| read(page(i), 0)));
    let (out, m) = run_placement_epochs(ops, 10, 4);
    let last = out.placement.epochs.last().unwrap();
    let budget = 8 * MIB / 4096;
    let hot = |i: u64| i >= 4000 || i < budget - 96;
    let fast = |i: u64| {
        m.page(Pid(0), page(i) >> PAGE_SHIFT)
            .is_some_and(|p| p.tier.is_fast())
    };
    let hot_in_fast = (0..4096).filter(|&i| hot(i) && fast(i)).count() as u64;
    assert_eq!(last.hot_pages, budget);
    assert_eq!(last.fast_pages, m.used_pages(TierId(0)));
    assert!(
        hot_in_fast > 0 && hot_in_fast < budget,
        "the test needs a mixed hot set: {hot_in_fast}"
    );
    assert!(
        (last.recall - hot_in_fast as f64 / budget as f64).abs() < 1e-9,
        "{last:?}, {hot_in_fast} hot pages in the fast tier"
    );
    // 4 bins of the 8192 mapped pages: the reads fall in the first two.
    let heat = out.placement.heat.last().unwrap();
    assert_eq!(heat, &vec![2048, 2048 + 96, 0, 0]);
}

#[test]
fn a_split_keeps_each_subpages_epoch_count() {
    // A huge page whose head is read 10 times and one other subpage once, split by the
    // policy within the same placement epoch: the epoch saw 2 pages accessed, 11 times,
    // not 512 pages carrying the head's count.
    let log = Arc::new(Mutex::new(Log::default()));
    let mut p = Recorder::new(log);
    p.init = Box::new(|m| m.schedule(NS_PER_MS, 1, Runner::Kthread));
    p.on_timer = Box::new(|_, m, _| {
        assert!(m.split_huge(Pid(0), page(0) >> PAGE_SHIFT, false).is_some());
    });
    let mut ops: Vec<Op> = (0..10).map(|_| read(page(0), 0)).collect();
    ops.push(read(page(7), 0));
    ops.push(read(page(7), 2 * NS_PER_MS as u32));
    let w = Script::new(32 * MIB).process(&[(BASE, 32 * MIB)], ops);
    let mut m = small_machine(8, 64);
    m.thp = tierkit_sim::config::ThpMode::Always;
    let sim = SimConfig {
        epoch_ms: 10,
        heatmap_bins: 4,
        ..SimConfig::default()
    };
    let (out, _) = run(&m, &sim, Box::new(p), Box::new(w));
    assert_eq!(out.summary.counters.huge_splits, 1);
    let last = out.placement.epochs.last().unwrap();
    assert_eq!(last.hot_pages, 2, "{last:?}");
    let heat = out.placement.heat.last().unwrap();
    assert_eq!(heat.iter().sum::<u64>(), 12);
}

#[test]
fn policy_time_scale_shortens_every_policy_time_constant() {
    // A timer at policy time 10 ms fires at machine time 1 ms with scale 10, and a
    // page armed then and touched 2 ms (machine) later shows a 20 ms latency.
    let log = Arc::new(Mutex::new(Log::default()));
    let mut p = Recorder::new(log.clone());
    p.init = Box::new(|m| m.schedule(10 * NS_PER_MS, 1, Runner::Kthread));
    p.on_timer = Box::new(|_, m, log| {
        log.low_watermarks.push((TierId(9), m.now()));
        m.arm_hint_fault(Pid(0), page(0) >> PAGE_SHIFT);
    });
    let ops = vec![write(page(0), 0), read(page(0), 3 * NS_PER_MS as u32)];
    let w = Script::new(16 * MIB).process(&[(BASE, 16 * MIB)], ops);
    let sim = SimConfig {
        policy_time_scale: 10.0,
        ..SimConfig::default()
    };
    let (out, _) = run(&small_machine(8, 64), &sim, Box::new(p), Box::new(w));
    let log = log.lock().unwrap();
    assert_eq!(log.low_watermarks, vec![(TierId(9), 10 * NS_PER_MS)]);
    let f = log.faults[0];
    assert_eq!(f.armed_at, 10 * NS_PER_MS);
    let latency = log.fault_times[0] - f.armed_at;
    assert!(
        (20 * NS_PER_MS..21 * NS_PER_MS).contains(&latency),
        "{latency}"
    );
    assert_eq!(out.summary.policy_time_scale, 10.0);
    assert!(out.summary.sim_seconds < 0.004);
}

/// With THP, a huge page that fits in no tier falls back to a base page, as Linux's
/// THP fault does when the huge allocation fails (it was an out-of-memory error).
/// Traces size the machine from the pages they touch (issue 22), so a huge page may
/// not fit where its touched subpages do.
#[test]
fn a_huge_page_that_fits_nowhere_falls_back_to_base_pages() {
    let mut m = small_machine(1, 1);
    m.thp = tierkit_sim::config::ThpMode::Always;
    // A 2 MiB-aligned mapping: eligible for a huge page; 1 MiB tiers cannot hold one.
    let base = 1u64 << 30;
    let ops: Vec<Op> = (0..64).map(|i| write(base + i * PAGE_SIZE, 0)).collect();
    let w = Script::new(2 * MIB).process(&[(base, 2 * MIB)], ops);
    let (out, machine) = run(
        &m,
        &SimConfig::default(),
        Box::new(AllSlowProbe),
        Box::new(w),
    );
    assert_eq!(out.summary.accesses, 64);
    let used: u64 = machine.used_pages_total();
    assert_eq!(used, 64, "64 base pages, not one huge page");
}

/// A policy that observes and moves nothing.
struct DoesNothing;
impl Policy for DoesNothing {
    fn name(&self) -> &'static str {
        "does-nothing"
    }
    fn on_event(&mut self, _: &Event, _: &mut dyn Mechanisms) {}
}

/// A sampled run reports the mappings smaller than one sampling stratum (which it can
/// only simulate whole or not at all); an exact run reports none.
#[test]
fn sampled_runs_name_mappings_smaller_than_a_stratum() {
    use tierkit_sim::config::SampleRate;
    const MIB: u64 = 1 << 20;
    let (small, large) = (0x4000_0000u64, 0x8000_0000u64);
    let go = |rate: &str| {
        let ops = vec![write(small, 0), write(large, 0)];
        let w = Script::new(68 * MIB).process(&[(small, 4 * MIB), (large, 64 * MIB)], ops);
        let sim = SimConfig {
            sample_rate: SampleRate::parse(rate).unwrap(),
            ..SimConfig::default()
        };
        run(
            &small_machine(16, 256),
            &sim,
            Box::new(DoesNothing),
            Box::new(w),
        )
        .0
        .summary
        .coarse_sampling
    };
    assert_eq!(go("1"), None);
    let c = go("1/8").expect("the 4 MiB mapping is under the 16 MiB stratum");
    assert_eq!(
        (c.mappings, c.bytes, c.stratum_bytes),
        (1, 4 * MIB, 16 * MIB)
    );
}

/// Threads run in slices and reach a tier out of time order; a lagging thread must not
/// wait for a leading thread's later requests. Eight processes, each the latency-bound
/// stream of one, far below the slow tier's bandwidth, finish in the time one takes
/// alone (they ran 2–3× longer when each request waited for the tier's latest
/// booking). Past its bandwidth the tier still saturates: with 32 KiB of requests in
/// flight per process, eight processes take the time their bytes need at 1 GB/s.
#[test]
fn threads_do_not_queue_behind_each_others_future_requests() {
    let go = |procs: usize, mlp: f64, gbps: f64| {
        let mut m = small_machine(64, 256);
        m.tiers[1].bandwidth_gbps = gbps;
        let mut w = Script::new(8 * MIB * procs as u64);
        for _ in 0..procs {
            w = w.process_with_mlp(&[(BASE, 8 * MIB)], latency_bound_stream(100_000, 64), mlp);
        }
        let (out, _) = run(
            &m,
            &SimConfig::default(),
            Box::new(AllSlowProbe),
            Box::new(w),
        );
        out.summary
    };
    let one = go(1, 1.0, 64.0).sim_seconds;
    let eight = go(8, 1.0, 64.0).sim_seconds;
    assert!(
        (eight / one - 1.0).abs() < 0.05,
        "8 processes {eight} s, one alone {one} s"
    );
    let s = go(8, 512.0, 1.0);
    let bound = s.mem_accesses as f64 * 64.0 / 1e9;
    assert!(
        (s.sim_seconds / bound - 1.0).abs() < 0.1,
        "saturated: {} s for {bound} s of bytes",
        s.sim_seconds
    );
}

/// A small hot mapping beside a large cold one: sampled by address at 1/16, the hot
/// mapping (one region, half of all accesses) is kept whole at 16 times its weight or
/// dropped, so the run's access count and time are off by at least half the hot share
/// whatever the seed; sampled by mapping, it keeps one base page in 16 and the run
/// lands within 3% of the exact one. With THP the hot mapping, sampled page by page,
/// gets no huge page; the cold one's kept regions do.
#[test]
fn strata_by_mapping_sample_a_small_hot_mapping_page_by_page() {
    use tierkit_core::SampleStrata;
    use tierkit_sim::config::{SampleRate, ThpMode};
    const MIB: u64 = 1 << 20;
    let (hot, cold) = (0x4000_0000u64, 0x8000_0000u64);
    let (hot_len, cold_len) = (512 * 1024u64, 64 * MIB);
    let mut x = 0x2545_f491_4f6c_dd1du64;
    let mut next = move || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x
    };
    let ops: Vec<Op> = (0..400_000)
        .map(|i| {
            let r = next();
            if i % 2 == 0 {
                read(hot + (r % (hot_len / 64)) * 64, 20)
            } else {
                read(cold + (r % (cold_len / 64)) * 64, 20)
            }
        })
        .collect();
    let go = |rate: &str, strata: SampleStrata, thp: bool| {
        let w = Script::new(hot_len + cold_len)
            .process(&[(hot, hot_len), (cold, cold_len)], ops.clone());
        let sim = SimConfig {
            sample_rate: SampleRate::parse(rate).unwrap(),
            sample_strata: strata,
            ..SimConfig::default()
        };
        let mut m = small_machine(128, 256);
        if thp {
            m.thp = ThpMode::Always;
        }
        let (out, machine) = run(&m, &sim, Box::new(DoesNothing), Box::new(w));
        (out.summary, machine.used_pages_total())
    };
    let (exact, _) = go("1", SampleStrata::Address, false);
    let err = |s: &tierkit_sim::metrics::Summary| {
        (
            s.accesses as f64 / exact.accesses as f64 - 1.0,
            s.sim_seconds / exact.sim_seconds - 1.0,
        )
    };
    let (by_address, _) = go("1/16", SampleStrata::Address, false);
    let (a_acc, a_time) = err(&by_address);
    assert!(
        a_acc.abs() >= 0.25 && a_time.abs() >= 0.2,
        "by address: accesses {a_acc:+.3}, time {a_time:+.3}"
    );
    let (by_mapping, _) = go("1/16", SampleStrata::Mapping, false);
    let (m_acc, m_time) = err(&by_mapping);
    assert!(
        m_acc.abs() <= 0.03 && m_time.abs() <= 0.03,
        "by mapping: accesses {m_acc:+.3}, time {m_time:+.3}"
    );
    assert_eq!(by_mapping.coarse_sampling, None);
    assert_eq!(by_mapping.sample_strata.as_deref(), Some("mapping"));
    assert_eq!(by_address.sample_strata, None);
    assert!(by_address.coarse_sampling.is_some());
    // THP: the cold mapping's 32 aligned regions keep 2, as huge pages; the hot
    // mapping's 128 pages keep 8 base pages.
    let (_, used) = go("1/16", SampleStrata::Mapping, true);
    assert_eq!(used, 2 * 512 + 8);
}

#[test]
fn the_summary_counts_each_processs_resident_and_fast_pages() {
    // 8 MiB fast = 2048 pages. Process 0 touches 3000 pages at once and fills the fast
    // tier to its min watermark; process 1 touches 500 pages 10 ms later, all slow.
    let slot = Arc::new(Mutex::new(None));
    let slot2 = slot.clone();
    let mut p = Recorder::new(Arc::new(Mutex::new(Log::default())));
    p.init = Box::new(move |m| {
        *slot2.lock().unwrap() = Some((m.watermarks(TierId(0)), m.tiers()[0].capacity_pages))
    });
    let first: Vec<Op> = (0..3000).map(|i| write(page(i), 10)).collect();
    let mut later = Vec::new();
    wait_then_read(page(0), 10 * NS_PER_MS, &mut later);
    later.extend((1..500).map(|i| write(page(i), 10)));
    let w = Script::new(32 * MIB)
        .process(&[(BASE, 16 * MIB)], first)
        .process(&[(BASE, 16 * MIB)], later);
    let (out, _) = run(
        &small_machine(8, 64),
        &SimConfig::default(),
        Box::new(p),
        Box::new(w),
    );
    let (wm, cap) = slot.lock().unwrap().unwrap();
    let procs = &out.summary.processes;
    assert_eq!(procs.len(), 2);
    assert_eq!(
        (procs[0].name.as_str(), procs[1].name.as_str()),
        ("script0", "script1")
    );
    assert_eq!(
        (procs[0].resident_pages, procs[0].fast_pages),
        (3000, cap - wm.min as u64)
    );
    assert_eq!((procs[1].resident_pages, procs[1].fast_pages), (500, 0));
    assert_eq!(
        procs.iter().map(|p| p.fast_pages).sum::<u64>(),
        out.summary.tiers[0].used_pages
    );

    // One process: the tiers' rows say it all, and the list is left out.
    let w = Script::new(32 * MIB).process(&[(BASE, 16 * MIB)], vec![write(page(0), 0)]);
    let p = Recorder::new(Arc::new(Mutex::new(Log::default())));
    let (out, _) = run(
        &small_machine(8, 64),
        &SimConfig::default(),
        Box::new(p),
        Box::new(w),
    );
    assert!(out.summary.processes.is_empty());
    let json = serde_json::to_string(&out.summary).unwrap();
    assert!(!json.contains("\"processes\""), "{json}");
}

/// Compute does not depend on placement (`sim.sampled_compute`): a stream whose
/// compute sits on the accesses of one 2 MiB region out of 32. Sampled at 1/8 with
/// each kept access keeping only its own gap ("kept"), the run's time depends on
/// whether that region was drawn (8 times its compute, or none of it); with the
/// dropped accesses' compute carried to the kept ones ("carried") every draw lands
/// within 2% of the exact run.
#[test]
fn carried_compute_makes_a_sampled_runs_time_independent_of_the_draw() {
    use tierkit_core::SampledCompute;
    use tierkit_sim::config::SampleRate;
    const REGION: u64 = 2 * MIB;
    let go = |base: u64, rate: &str, compute: SampledCompute| {
        let ops: Vec<Op> = (0..64_000u64)
            .map(|i| {
                let region = i % 32;
                let page = (i / 32) % 512;
                read(
                    base + region * REGION + page * 4096,
                    if region == 0 { 100_000 } else { 0 },
                )
            })
            .collect();
        let w = Script::new(32 * REGION).process(&[(base, 32 * REGION)], ops);
        let sim = SimConfig {
            sample_rate: SampleRate::parse(rate).unwrap(),
            sampled_compute: Some(compute),
            ..SimConfig::default()
        };
        run(
            &small_machine(16, 256),
            &sim,
            Box::new(DoesNothing),
            Box::new(w),
        )
        .0
        .summary
        .sim_seconds
    };
    for k in 0..4 {
        let base = BASE + k * 64 * REGION;
        let exact = go(base, "1", SampledCompute::Kept);
        assert_eq!(
            exact,
            go(base, "1", SampledCompute::Carried),
            "exact runs carry nothing"
        );
        let kept = go(base, "1/8", SampledCompute::Kept);
        let carried = go(base, "1/8", SampledCompute::Carried);
        assert!(
            (kept / exact - 1.0).abs() > 0.5,
            "base {base:#x}: kept {kept} s, exact {exact} s"
        );
        assert!(
            (carried / exact - 1.0).abs() < 0.02,
            "base {base:#x}: carried {carried} s, exact {exact} s"
        );
    }
}
