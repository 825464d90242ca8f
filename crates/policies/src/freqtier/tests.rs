use super::*;
use std::collections::BTreeMap;

// ----- configuration ------------------------------------------------------------

#[test]
fn defaults_are_the_papers_and_validate() {
    let c = FreqTierConfig::default();
    c.validate().unwrap();
    assert_eq!(c.sampling_levels_hz, vec![100_000, 10_000, 1_000]);
    assert_eq!(
        (c.batch_samples, c.initial_hot_threshold, c.cbf_hashes),
        (100_000, 5, 3)
    );
    assert_eq!(c.hit_ratio_window_ms, 60_000);
    assert_eq!(c.hit_ratio_tolerance_pct, 0.5);
    assert_eq!(c.tracker, TrackerKind::BlockedCbf);
}

#[test]
fn invalid_settings_name_the_field() {
    let bad = |f: fn(&mut FreqTierConfig), field: &str| {
        let mut c = FreqTierConfig::default();
        f(&mut c);
        let e = c.validate().unwrap_err();
        assert!(e.to_string().contains(field), "{e}");
    };
    bad(|c| c.cbf_hashes = 9, "cbf_hashes");
    bad(
        |c| c.cbf_false_positive_rate = 0.0,
        "cbf_false_positive_rate",
    );
    bad(
        |c| c.sampling_levels_hz = vec![1_000, 10_000],
        "sampling_levels_hz",
    );
    bad(|c| c.sampling_levels_hz = vec![], "sampling_levels_hz");
    bad(|c| c.initial_hot_threshold = 1, "initial_hot_threshold");
    bad(|c| c.initial_hot_threshold = 16, "initial_hot_threshold");
    bad(|c| c.demoting_wmark_pct = 1.0, "promoting_wmark_pct");
    bad(|c| c.batch_samples = 0, "batch_samples");
}

#[test]
fn tracker_names_are_kebab_case() {
    use serde::de::{value::Error, IntoDeserializer};
    for (s, k) in [
        ("cbf", TrackerKind::Cbf),
        ("blocked-cbf", TrackerKind::BlockedCbf),
        ("exact", TrackerKind::Exact),
    ] {
        let d: serde::de::value::StrDeserializer<Error> = s.into_deserializer();
        assert_eq!(TrackerKind::deserialize(d).unwrap(), k);
    }
    let d: serde::de::value::StrDeserializer<Error> = "bloom".into_deserializer();
    assert!(TrackerKind::deserialize(d).is_err());
}

// ----- histogram and threshold ----------------------------------------------------

#[test]
fn histogram_follows_estimates_and_aging() {
    let mut h = HotHistogram::default();
    h.record(0, 3);
    h.record(0, 5);
    h.record(5, 9);
    h.record(0, 15);
    h.record(15, 15);
    assert_eq!(h.hot_pages(5), 2);
    assert_eq!(h.hot_pages(1), 3);
    h.age(); // 3 → 1, 9 → 4, 15 → 7
    assert_eq!((h.pages[1], h.pages[4], h.pages[7]), (1, 1, 1));
    assert_eq!(h.hot_pages(5), 1);
    h.age();
    h.age(); // 1 → 0 leaves, 4 → 1, 7 → 1
    assert_eq!(h.hot_pages(1), 2);
}

#[test]
fn threshold_steps_until_hot_pages_fit_the_fast_tier() {
    let mut h = HotHistogram::default();
    // 100 pages at each estimate 1..=15.
    for v in 1..=15u8 {
        for _ in 0..100 {
            h.record(0, v);
        }
    }
    // hot(T) = 100 × (16 − T). Capacity 550 → lowest fitting T is 11 (500).
    let mut t = 5;
    let mut seen = vec![t];
    for _ in 0..20 {
        t = step_hot_threshold(t, &h, 550, 2);
        seen.push(t);
    }
    assert_eq!(&seen[..8], &[5, 6, 7, 8, 9, 10, 11, 11]);
    assert_eq!(t, 11);
    // Room for everything: down one step at a time to the floor.
    assert_eq!(step_hot_threshold(11, &h, 10_000, 2), 10);
    let mut t = 11;
    for _ in 0..20 {
        t = step_hot_threshold(t, &h, 10_000, 2);
    }
    assert_eq!(t, 2);
    // Too many hot pages even at 15: saturates at 15.
    assert_eq!(step_hot_threshold(15, &h, 10, 2), 15);
}

// ----- rate → period ----------------------------------------------------------

#[test]
fn rate_controller_converts_a_sampling_rate_into_a_period() {
    let mut r = RateController::new(100, 0);
    // 10 ms at period 100 with 1 000 samples: 100 000 events → 10 M events/s.
    for _ in 0..1_000 {
        r.on_sample();
    }
    assert_eq!(r.tick(10 * NS_PER_MS, 200_000.0), 50);
    assert_eq!(r.events_per_s(), Some(10_000_000.0));
    // A new level applies at once from the estimate.
    assert_eq!(r.retarget(10 * NS_PER_MS, 20_000.0), 500);
    assert_eq!(r.retarget(10 * NS_PER_MS, 1e9), MIN_SAMPLE_PERIOD);
    // A quiet tick halves the period, never below the floor.
    assert_eq!(r.tick(20 * NS_PER_MS, 20_000.0), MIN_SAMPLE_PERIOD);
    let mut r = RateController::new(1_000, 0);
    assert_eq!(r.tick(10 * NS_PER_MS, 1.0), 500);
    // Rare events and a low target: bounded above.
    r.on_sample();
    assert!(r.tick(20 * NS_PER_MS, 1e-9) <= MAX_SAMPLE_PERIOD);
}

// ----- intensity state machine (spec §7.9) -----------------------------------------

fn machine3() -> Intensity {
    Intensity::new(IntensityParams {
        nr_levels: 3,
        tolerance: 0.005,
        noise_z: 0.0,
        min_samples: 10,
    })
}

fn win(hr: f64, promoted: u64) -> WindowStats {
    let fast = (hr * 1_000_000.0).round() as u64;
    WindowStats {
        fast_samples: fast,
        slow_samples: 1_000_000 - fast,
        promoted_pages: promoted,
        empty_demotion_scan: false,
    }
}

#[test]
fn oracle_09_stable_windows_step_down_to_monitoring() {
    let mut m = machine3();
    assert_eq!(m.observe(&win(0.50, 10)), Decision::Keep); // nothing to compare yet
    assert_eq!(m.observe(&win(0.70, 10)), Decision::Keep); // unstable at the top
    assert_eq!(m.observe(&win(0.703, 10)), Decision::Lower { to: 1 });
    assert_eq!(m.mode(), Mode::Sampling { level: 1 });
    assert_eq!(m.observe(&win(0.706, 10)), Decision::Lower { to: 2 });
    assert_eq!(
        m.observe(&win(0.709, 10)),
        Decision::EnterMonitoring(MonitorReason::StableAtSlowest)
    );
    assert_eq!(m.mode(), Mode::Monitoring);
}

#[test]
fn oracle_09_an_unstable_window_raises_the_rate_one_level() {
    let mut m = machine3();
    m.observe(&win(0.70, 10));
    m.observe(&win(0.70, 10)); // → 1
    m.observe(&win(0.70, 10)); // → 2
    assert_eq!(m.mode(), Mode::Sampling { level: 2 });
    assert_eq!(m.observe(&win(0.80, 10)), Decision::Raise { to: 1 });
    assert_eq!(m.observe(&win(0.90, 10)), Decision::Raise { to: 0 });
    assert_eq!(m.observe(&win(0.95, 10)), Decision::Keep);
    assert_eq!(m.mode(), Mode::Sampling { level: 0 });
}

#[test]
fn oracle_09_monitoring_restarts_at_the_top_rate_when_the_hit_ratio_moves() {
    let mut m = machine3();
    m.observe(&win(0.9, 10));
    assert_eq!(
        m.observe(&win(0.9, 0)),
        Decision::EnterMonitoring(MonitorReason::PromotionPlateau)
    );
    assert_eq!(m.observe(&win(0.90, 0)), Decision::Keep); // sets the baseline
    assert_eq!(m.observe(&win(0.902, 0)), Decision::Keep);
    assert_eq!(m.observe(&win(0.904, 0)), Decision::Keep);
    assert_eq!(m.observe(&win(0.50, 0)), Decision::LeaveMonitoring);
    assert_eq!(m.mode(), Mode::Sampling { level: 0 });
}

#[test]
fn oracle_09_plateau_and_empty_scan_enter_monitoring_from_any_level() {
    let mut m = machine3();
    assert_eq!(
        m.observe(&win(0.3, 0)),
        Decision::EnterMonitoring(MonitorReason::PromotionPlateau)
    );
    let mut m = machine3();
    let mut w = win(0.3, 5);
    w.empty_demotion_scan = true;
    assert_eq!(
        m.observe(&w),
        Decision::EnterMonitoring(MonitorReason::EmptyDemotionScan)
    );
    let mut m = machine3();
    m.observe(&win(0.3, 5));
    m.observe(&win(0.3, 5)); // level 1
    assert_eq!(
        m.observe(&win(0.1, 0)),
        Decision::EnterMonitoring(MonitorReason::PromotionPlateau)
    );
}

#[test]
fn windows_without_enough_samples_decide_nothing() {
    let mut m = machine3();
    m.observe(&win(0.7, 10));
    let quiet = WindowStats {
        fast_samples: 3,
        slow_samples: 2,
        promoted_pages: 0,
        empty_demotion_scan: true,
    };
    assert_eq!(m.observe(&quiet), Decision::Idle);
    assert_eq!(m.mode(), Mode::Sampling { level: 0 });
    // The baseline survived the quiet window.
    assert_eq!(m.observe(&win(0.701, 10)), Decision::Lower { to: 1 });
}

#[test]
fn sampling_noise_widens_the_tolerance() {
    let m = Intensity::new(IntensityParams {
        nr_levels: 3,
        tolerance: 0.005,
        noise_z: 3.0,
        min_samples: 10,
    });
    // Exact-counter sizes: the paper's 0.5 points.
    assert_eq!(m.tolerance(0.9, 10_000_000, 0.9, 10_000_000), 0.005);
    // 1 000 samples per window: 3σ of the difference ≈ 4 points.
    let t = m.tolerance(0.9, 1_000, 0.9, 1_000);
    assert!((t - 3.0 * (2.0 * 0.09 / 1_000.0f64).sqrt()).abs() < 1e-12 && t > 0.04);
}

// ----- demotion scan (spec §7.8) ---------------------------------------------------

fn vma(start: Vpn, n: u64) -> Vma {
    Vma {
        start_vpn: start,
        nr_pages: n,
        kind: VmaKind::Anon,
    }
}

/// A page table: every page of each VMA resident, fast or slow by `fast`.
fn table(space: &[(Pid, Vma)], fast: impl Fn(Vpn) -> bool) -> BTreeMap<(Pid, Vpn), PageInfo> {
    let mut t = BTreeMap::new();
    for &(pid, v) in space {
        for vpn in v.start_vpn..v.end_vpn() {
            let tier = if fast(vpn) { TierId::FAST } else { TierId(1) };
            t.insert((pid, vpn), PageInfo { tier, huge: false });
        }
    }
    t
}

fn reader(
    t: &BTreeMap<(Pid, Vpn), PageInfo>,
) -> impl FnMut(Pid, Vpn, u64) -> Vec<(Vpn, PageInfo)> + '_ {
    move |pid, start, n| {
        t.range((pid, start)..(pid, start + n))
            .map(|(&(_, v), &i)| (v, i))
            .collect()
    }
}

#[test]
fn demotion_scan_resumes_at_its_checkpoint_and_wraps_around() {
    let space = [
        (Pid(0), vma(100, 10)),
        (Pid(0), vma(200, 10)),
        (Pid(1), vma(50, 10)),
    ];
    // Fast: everything; cold: even pages.
    let t = table(&space, |_| true);
    let mut scan = DemotionScan::new(4);
    let mut cold = |_: Pid, v: Vpn| v.is_multiple_of(2);
    let r1 = scan.run(&space, 3, &mut reader(&t), &mut cold);
    assert_eq!(
        r1.cold,
        vec![(Pid(0), 100, 1), (Pid(0), 102, 1), (Pid(0), 104, 1)]
    );
    assert_eq!(
        scan.checkpoint,
        ScanPos {
            pid: Pid(0),
            vpn: 105
        }
    );
    assert!(!r1.full_pass);
    // Next round resumes at 105 and crosses into the next VMA.
    let r2 = scan.run(&space, 4, &mut reader(&t), &mut cold);
    assert_eq!(
        r2.cold.iter().map(|c| c.1).collect::<Vec<_>>(),
        vec![106, 108, 200, 202]
    );
    assert_eq!(
        scan.checkpoint,
        ScanPos {
            pid: Pid(0),
            vpn: 203
        }
    );
    // Into the next process, then wrap from the last VMA back to the first.
    let r3 = scan.run(&space, 7, &mut reader(&t), &mut cold);
    assert_eq!(
        r3.cold,
        vec![
            (Pid(0), 204, 1),
            (Pid(0), 206, 1),
            (Pid(0), 208, 1),
            (Pid(1), 50, 1),
            (Pid(1), 52, 1),
            (Pid(1), 54, 1),
            (Pid(1), 56, 1)
        ]
    );
    let r4 = scan.run(&space, 2, &mut reader(&t), &mut cold);
    assert_eq!(
        r4.cold.iter().map(|c| (c.0, c.1)).collect::<Vec<_>>(),
        vec![(Pid(1), 58), (Pid(0), 100)]
    );
    assert_eq!(
        scan.checkpoint,
        ScanPos {
            pid: Pid(0),
            vpn: 101
        }
    );
}

#[test]
fn oracle_08_demotion_scan_takes_only_cold_fast_pages_and_detects_an_empty_pass() {
    let space = [(Pid(0), vma(0, 64)), (Pid(0), vma(1000, 64))];
    // Fast: pages < 32 of each VMA; cold: multiples of 5.
    let t = table(&space, |v| v % 1000 < 32);
    let mut scan = DemotionScan::new(16);
    let mut cold = |_: Pid, v: Vpn| v.is_multiple_of(5);
    let r = scan.run(&space, 1_000, &mut reader(&t), &mut cold);
    let got: Vec<Vpn> = r.cold.iter().map(|c| c.1).collect();
    assert_eq!(
        got,
        vec![0, 5, 10, 15, 20, 25, 30, 1000, 1005, 1010, 1015, 1020, 1025, 1030]
    );
    assert!(
        r.full_pass,
        "not enough cold pages: one full pass, then stop"
    );
    assert_eq!(r.scanned_pages, 128);
    assert_eq!(r.reads, 8);
    // Nothing cold at all: a full pass with no candidate is an empty scan.
    let mut none = |_: Pid, _: Vpn| false;
    let r = scan.run(&space, 10, &mut reader(&t), &mut none);
    assert!(r.full_pass && r.cold.is_empty());
    // Demotion disabled (need 0): no work, not an empty scan.
    let r = scan.run(&space, 0, &mut reader(&t), &mut none);
    assert!(!r.full_pass && r.reads == 0);
}

#[test]
fn demotion_scan_survives_unmapped_checkpoints_and_counts_huge_pages() {
    let space = [(Pid(0), vma(0, 1024)), (Pid(0), vma(4096, 16))];
    let mut t = BTreeMap::new();
    t.insert(
        (Pid(0), 0),
        PageInfo {
            tier: TierId::FAST,
            huge: true,
        },
    );
    t.insert(
        (Pid(0), 512),
        PageInfo {
            tier: TierId::FAST,
            huge: true,
        },
    );
    for v in 4096..4112 {
        t.insert(
            (Pid(0), v),
            PageInfo {
                tier: TierId::FAST,
                huge: false,
            },
        );
    }
    let mut scan = DemotionScan::new(300);
    let mut cold = |_: Pid, _: Vpn| true;
    let r = scan.run(&space, 600, &mut reader(&t), &mut cold);
    assert_eq!(r.cold, vec![(Pid(0), 0, 512), (Pid(0), 512, 512)]);
    assert_eq!(
        scan.checkpoint,
        ScanPos {
            pid: Pid(0),
            vpn: 4096
        }
    );
    // The checkpoint's VMA disappears: resume at the next one after it.
    scan.checkpoint = ScanPos {
        pid: Pid(0),
        vpn: 2000,
    };
    let r = scan.run(&space, 2, &mut reader(&t), &mut cold);
    assert_eq!(r.cold, vec![(Pid(0), 4096, 1), (Pid(0), 4097, 1)]);
    // A checkpoint past the end wraps to the start.
    scan.checkpoint = ScanPos {
        pid: Pid(7),
        vpn: 0,
    };
    let r = scan.run(&space, 1, &mut reader(&t), &mut cold);
    assert_eq!(r.cold, vec![(Pid(0), 0, 512)]);
}

// ----- batch -----------------------------------------------------------------------

#[test]
fn batch_coalesces_samples_per_page_in_first_sample_order() {
    let mut b = Batch::default();
    for &(p, v, fast) in &[(0, 7, false), (0, 3, false), (0, 7, true), (1, 7, false)] {
        b.add(
            Pid(p),
            v,
            if fast { TierId::FAST } else { TierId(1) },
            false,
        );
    }
    assert_eq!((b.nr_samples(), b.nr_pages()), (4, 3));
    let e = b.take();
    assert_eq!(
        e.iter()
            .map(|e| (e.pid.0, e.vpn, e.count))
            .collect::<Vec<_>>(),
        vec![(0, 7, 2), (0, 3, 1), (1, 7, 1)]
    );
    assert_eq!(e[0].tier, TierId::FAST, "latest sample's tier");
    assert_eq!((b.nr_samples(), b.nr_pages()), (0, 0));
    assert_ne!(page_key(Pid(0), 7), page_key(Pid(1), 7));
}

// ----- behavioural: small simulator runs ------------------------------------------

mod sim {
    use super::super::*;
    use crate::autonuma::{Autonuma, AutonumaConfig};
    use std::collections::BTreeMap;
    use tierkit_sim::engine::RunOutput;
    use tierkit_sim::machine::Machine;
    use tierkit_sim::testing::{self, read, small_machine, write, Script};
    use tierkit_sim::{MachineConfig, SimConfig};
    use tierkit_workloads::{Gups, GupsConfig};

    use crate::lru::test_scripts::stat;

    fn run(m: &MachineConfig, p: Box<dyn Policy>, w: Box<dyn Workload>) -> (RunOutput, Machine) {
        testing::run(m, &SimConfig::default(), p, w)
    }

    /// A config for runs of a fraction of a simulated second: the paper's rates
    /// and rules, with batches shrunk and both windows (60 s, 10 s) divided by
    /// `shorten` to fit.
    fn small_cfg(batch: u64, shorten: u64) -> FreqTierConfig {
        let d = FreqTierConfig::default();
        FreqTierConfig {
            batch_samples: batch,
            hit_ratio_window_ms: (d.hit_ratio_window_ms / shorten).max(1),
            monitor_check_ms: (d.monitor_check_ms / shorten).max(1),
            ..d
        }
    }

    const FILLER: u64 = 0x10_0000_0000;
    const DATA: u64 = 0x20_0000_0000;

    /// One thread: write every page of an optional filler mapping, write every
    /// data page, unmap the filler (leaving that much fast memory free), then
    /// for each phase `(hot_start_page, reads)` read: with `hot_permille`‰ a
    /// uniform page of the hot set, else a uniform data page (or, with
    /// `cold_sweep`, the next data page of a sequential sweep).
    struct Phased {
        filler_pages: u64,
        data_pages: u64,
        hot_pages: u64,
        hot_permille: u64,
        phases: Vec<(u64, u64)>,
        gap_ns: u32,
        cold_sweep: bool,
        sweep_pos: u64,
        stage: usize,
        done: u64,
        rng: u64,
    }

    impl Phased {
        fn new(data_pages: u64, hot_pages: u64, hot_pct: u64, phases: Vec<(u64, u64)>) -> Phased {
            Phased {
                filler_pages: 0,
                data_pages,
                hot_pages,
                hot_permille: hot_pct * 10,
                phases,
                gap_ns: 0,
                cold_sweep: false,
                sweep_pos: 0,
                stage: 0,
                done: 0,
                rng: 0x9e37_79b9_7f4a_7c15,
            }
        }

        fn next(&mut self) -> u64 {
            self.rng = cbf::mix64(self.rng);
            self.rng
        }
    }

    impl Workload for Phased {
        fn shape(&self) -> WorkloadShape {
            WorkloadShape {
                processes: vec![ProcessShape {
                    name: "phased".into(),
                    nr_threads: 1,
                    mlp: 4.0,
                }],
                footprint_bytes: (self.filler_pages + self.data_pages) * PAGE_SIZE,
            }
        }

        fn prologue(&mut self, _p: usize, out: &mut Vec<Op>) {
            if self.filler_pages > 0 {
                out.push(Op::Mmap {
                    addr: FILLER,
                    len: self.filler_pages * PAGE_SIZE,
                    kind: VmaKind::Anon,
                });
            }
            out.push(Op::Mmap {
                addr: DATA,
                len: self.data_pages * PAGE_SIZE,
                kind: VmaKind::Anon,
            });
        }

        fn fill(&mut self, _p: usize, _t: usize, out: &mut Vec<Op>) {
            while out.len() < 4096 {
                match self.stage {
                    0 | 1 => {
                        let (base, n) = if self.stage == 0 {
                            (FILLER, self.filler_pages)
                        } else {
                            (DATA, self.data_pages)
                        };
                        if self.done == n {
                            self.stage += 1;
                            self.done = 0;
                            continue;
                        }
                        out.push(write(base + self.done * PAGE_SIZE, 0));
                        self.done += 1;
                    }
                    2 => {
                        if self.filler_pages > 0 {
                            out.push(Op::Munmap {
                                addr: FILLER,
                                len: self.filler_pages * PAGE_SIZE,
                            });
                        }
                        self.stage = 3;
                    }
                    s => {
                        let Some(&(hot_start, reads)) = self.phases.get(s - 3) else {
                            return;
                        };
                        if self.done == reads {
                            self.stage += 1;
                            self.done = 0;
                            continue;
                        }
                        let r = self.next();
                        let page = if r % 1000 < self.hot_permille {
                            (hot_start + (r >> 10) % self.hot_pages) % self.data_pages
                        } else if self.cold_sweep {
                            self.sweep_pos = (self.sweep_pos + 1) % self.data_pages;
                            self.sweep_pos
                        } else {
                            (r >> 10) % self.data_pages
                        };
                        let line = (r >> 40) % 64;
                        out.push(Op::Access {
                            addr: DATA + page * PAGE_SIZE + line * CACHE_LINE,
                            write: false,
                            gap_ns: self.gap_ns,
                        });
                        self.done += 1;
                    }
                }
            }
        }
    }

    fn no_llc(fast: &str) -> MachineConfig {
        MachineConfig {
            fast: fast.into(),
            llc_enabled: false,
            ..MachineConfig::default()
        }
    }

    #[test]
    fn oracle_07_a_page_sampled_once_is_never_promoted_a_hot_one_is() {
        // Spec §7.7. Fast 1 MiB (256 pages) fills by first touch; 4 000 pages are
        // read once each (some sampled once), one slow page is read 20 000 times.
        let data = 8 * 1024u64;
        let base = 0x4000_0000u64;
        let mut ops: Vec<Op> = (0..data).map(|p| write(base + p * PAGE_SIZE, 0)).collect();
        // Reads come 2 µs apart so the run spans several rate ticks and windows.
        let hot = base + 5_000 * PAGE_SIZE;
        for i in 0..4_000u64 {
            ops.push(read(base + (1_000 + i) * PAGE_SIZE, 2_000));
            for _ in 0..5 {
                ops.push(read(hot, 2_000));
            }
        }
        for _ in 0..10_000 {
            ops.push(read(hot, 2_000));
        }
        let w = Script::new(data * PAGE_SIZE).process(&[(base, data * PAGE_SIZE)], ops);
        let cfg = small_cfg(200, 6_000);
        let (out, m) = run(
            &small_machine(1, 64),
            Box::new(FreqTier::new(cfg)),
            Box::new(w),
        );
        let hot_vpn = hot >> PAGE_SHIFT;
        assert_eq!(m.page(Pid(0), hot_vpn).unwrap().tier, TierId::FAST);
        assert_eq!(stat(&out, "promoted_pages"), 1.0, "only the hot page");
        let once_fast = (1_000..5_000u64)
            .filter(|p| *p >= 256)
            .filter(|p| {
                m.page(Pid(0), (base >> PAGE_SHIFT) + p)
                    .unwrap()
                    .tier
                    .is_fast()
            })
            .count();
        assert_eq!(once_fast, 0);
        assert!(stat(&out, "samples") > 500.0);
        // One migration call per batch at most; the full tier needed demotion first.
        assert!(stat(&out, "promotion_calls") <= stat(&out, "batches"));
        assert!(stat(&out, "demoted_pages") >= 1.0);
    }

    /// autonuma with its 1 s scan delay cut to 10 ms so it acts in a short run.
    fn quick_autonuma() -> AutonumaConfig {
        let mut c = AutonumaConfig::default();
        c.scan.scan_delay_ms = 10;
        c
    }

    fn gups(footprint_mib: u64, updates: u64) -> Box<Gups> {
        Box::new(Gups::new(
            &GupsConfig {
                footprint_mib,
                nr_updates: updates,
                ..GupsConfig::default()
            },
            7,
        ))
    }

    #[test]
    fn oracle_19_cbf_tracks_nearly_as_well_as_an_exact_table_in_a_fraction_of_the_memory() {
        // §VII-E: the CBF's collisions barely change placement. Same config, the
        // intensity held at the top rate so only the tracker differs.
        let m = no_llc("1:8");
        let mut res = Vec::new();
        for tracker in [
            TrackerKind::BlockedCbf,
            TrackerKind::Cbf,
            TrackerKind::Exact,
        ] {
            let cfg = FreqTierConfig {
                tracker,
                dynamic_intensity: false,
                ..small_cfg(1_000, 600)
            };
            let (out, _) = run(&m, Box::new(FreqTier::new(cfg)), gups(64, 3_000_000));
            res.push((
                out.summary.fast_access_ratio,
                out.summary.policy_metadata_bytes as f64,
                out.summary.promoted_pages,
            ));
        }
        let (blocked, flat, exact) = (res[0], res[1], res[2]);
        // The hot set (10% of pages, 90% of accesses) starts on the slow tier; all
        // three find it.
        assert!(exact.0 > 0.6, "exact tracker fast ratio {}", exact.0);
        for (name, r) in [("blocked", blocked), ("flat", flat)] {
            assert!(
                (r.0 - exact.0).abs() < 0.03,
                "{name} {:.4} vs exact {:.4}",
                r.0,
                exact.0
            );
            assert!(
                r.1 < 0.5 * exact.1,
                "{name} {} B vs exact {} B",
                r.1,
                exact.1
            );
        }
    }

    #[test]
    fn oracle_18_larger_batches_mean_proportionally_fewer_migration_calls() {
        // §VII-E2: one migration call per batch that promotes anything, so 10×
        // larger batches make about 10× fewer calls; the batch buffer is 16 B per
        // sample. Same trace, batches of 500 and 5 000 samples.
        let calls = |batch: u64| {
            let cfg = FreqTierConfig {
                dynamic_intensity: false,
                ..small_cfg(batch, 600)
            };
            let (out, _) = run(
                &no_llc("1:8"),
                Box::new(FreqTier::new(cfg)),
                gups(64, 3_000_000),
            );
            (
                stat(&out, "promotion_calls"),
                stat(&out, "batches"),
                out.summary.promoted_pages,
            )
        };
        let (small_calls, small_batches, small_promoted) = calls(500);
        let (large_calls, large_batches, large_promoted) = calls(5_000);
        assert!(small_calls <= small_batches && large_calls <= large_batches);
        let ratio = small_calls / large_calls.max(1.0);
        assert!(
            (5.0..=20.0).contains(&ratio),
            "{small_calls} calls at 500 vs {large_calls} at 5 000: {ratio:.1}x"
        );
        // Both find the hot set: the batch size changes the calls, not the outcome.
        assert!(small_promoted > 0 && large_promoted > 0);
        assert_eq!(
            SAMPLE_RECORD_BYTES * 5_000,
            80_000,
            "16 B per buffered sample"
        );
    }

    /// GUPS over 4 GiB without skew (`hot_probability` = `hot_fraction`), at the
    /// papers' time constants (~45 s of machine time), sampled at 1/64.
    fn uniform_gups() -> Box<Gups> {
        Box::new(Gups::new(
            &GupsConfig {
                footprint_mib: 4096,
                nr_updates: 1_000_000_000,
                hot_probability: 0.1,
                ..GupsConfig::default()
            },
            7,
        ))
    }

    fn cxl(fast: &str) -> MachineConfig {
        MachineConfig {
            fast: fast.into(),
            tiering_cpus: tierkit_sim::config::TieringCpus::Shared,
            ..MachineConfig::default()
        }
    }

    #[test]
    fn oracle_12_freqtier_at_a_ratio_beats_autonuma_with_twice_the_dram() {
        // §VII-A, Abstract: FreqTier at 1:32 matches or beats the paper's AutoNUMA
        // (Linux 6.2 tiering with MGLRU) given twice the local DRAM (1:16). Skewed
        // GUPS over 4 GiB (90% of updates on a tenth) on `cxl`, tiering on the
        // application's CPUs, at the papers' time constants, sampled at 1/64.
        // Measured 2026-11-26: 40.5 s against 47.4 s.
        let skewed = || gups(4096, 1_000_000_000);
        let ft = crate::faithful::run_registered("freqtier", &cxl("1:32"), 64, skewed());
        let an = crate::faithful::run_registered("linux-tiering-mglru", &cxl("1:16"), 64, skewed());
        assert!(
            ft.summary.sim_seconds <= an.summary.sim_seconds,
            "freqtier at 1:32 {:.2} s, linux-tiering-mglru at 1:16 {:.2} s",
            ft.summary.sim_seconds,
            an.summary.sim_seconds
        );
    }

    #[test]
    fn oracle_21_on_a_uniform_trace_the_hit_ratio_is_the_capacity_fraction() {
        // §VIII-a: without skew there is nothing to find: FreqTier's fast-access
        // ratio is about the fast tier's share of memory, and it has no meaningful
        // advantage over leaving first touch alone (it may lose: its sampling and
        // the pages that reach the threshold by chance cost time). 1:8 on `cxl`:
        // the fast tier holds 1/9. (The paper also finds no advantage over its
        // AutoNUMA; here Linux tiering with MGLRU thrashes on this trace instead:
        // see docs/policies/freqtier.md, oracle 21.)
        let m = cxl("1:8");
        let ft = crate::faithful::run_registered("freqtier", &m, 64, uniform_gups());
        let first = crate::faithful::run_registered("first-touch", &m, 64, uniform_gups());
        let f = ft.summary.fast_access_ratio;
        assert!(
            (f - 1.0 / 9.0).abs() < 0.03,
            "fast-access ratio {f:.3} vs 1/9"
        );
        let gain = first.summary.sim_seconds / ft.summary.sim_seconds;
        assert!(
            gain < 1.05,
            "FreqTier {gain:.3}x first-touch's speed on a uniform trace"
        );
    }

    #[test]
    fn oracle_16_a_cbf_shrunk_well_below_its_sized_capacity_tracks_worse() {
        // §VII-E1: hit ratio and runtime degrade as the filter shrinks well below
        // the size for a 10⁻³ false-positive rate, monotonically. GUPS 256 MiB at 1:8
        // (≈ 7 300 fast pages), the intensity held at the top rate so only the
        // filter differs: 4× the sized filter, sized (0 = auto), then 4 KiB and 1 KiB.
        let go = |kib: u64| {
            let cfg = FreqTierConfig {
                cbf_size_kib: kib,
                dynamic_intensity: false,
                ..small_cfg(2_000, 600)
            };
            let (out, _) = run(
                &no_llc("1:8"),
                Box::new(FreqTier::new(cfg)),
                gups(256, 8_000_000),
            );
            (
                out.summary.fast_access_ratio,
                out.summary.sim_seconds,
                out.summary.policy_metadata_bytes,
            )
        };
        let (sized, small, tiny) = (go(0), go(4), go(1));
        let large = go(4 * sized.2 / 1024);
        eprintln!("4x {large:?}, sized {sized:?}, 4 KiB {small:?}, 1 KiB {tiny:?}");
        assert!(sized.2 > small.2 && small.2 > tiny.2, "the filter shrinks");
        // And nothing is gained beyond the sized filter.
        assert!(
            (large.0 - sized.0).abs() < 0.01,
            "4x the sized filter: {:.4} vs {:.4}",
            large.0,
            sized.0
        );
        assert!(
            sized.0 + 0.005 >= small.0 && small.0 + 0.005 >= tiny.0,
            "fast-access ratio must not rise as the filter shrinks"
        );
        assert!(
            sized.0 > tiny.0 + 0.05,
            "a 1 KiB filter tracks clearly worse"
        );
        assert!(tiny.1 > sized.1, "and the run is slower");
    }

    #[test]
    fn oracle_22_recency_promotes_touched_once_pages_freqtier_does_not() {
        // Fig. 3 misclassification, spec §7.22 and §7.13: with free fast memory,
        // autonuma promotes any page touched after its scan armed it; FreqTier only
        // pages sampled at least twice. 4 096 fast pages are free after init; 512
        // hot pages take 99.5% of reads; the other 0.5% sweep the 14 336 data
        // pages, touching each about once.
        let mk = || {
            let mut w = Phased::new(14 * 1024, 512, 0, vec![(1024, 3_000_000)]);
            w.hot_permille = 995;
            w.cold_sweep = true;
            w.filler_pages = 4 * 1024;
            w.gap_ns = 1_000;
            Box::new(w)
        };
        let m = small_machine(16, 64);
        let (ft, _) = run(&m, Box::new(FreqTier::new(small_cfg(2_000, 60))), mk());
        let (an, _) = run(&m, Box::new(Autonuma::new(quick_autonuma())), mk());
        if std::env::var("FT_DEBUG").is_ok() {
            eprintln!("{:?}", ft.summary.policy_stats);
            eprintln!(
                "freqtier promoted {} demoted {} fast {:.4}; autonuma promoted {} fast {:.4}",
                ft.summary.promoted_pages,
                ft.summary.demoted_pages,
                ft.summary.fast_access_ratio,
                an.summary.promoted_pages,
                an.summary.fast_access_ratio
            );
        }
        let ft_bytes = ft.summary.migrated_bytes as f64;
        let an_bytes = an.summary.migrated_bytes as f64;
        assert!(
            an.summary.promoted_pages > 2_000,
            "autonuma fills the free room"
        );
        assert!(
            ft_bytes * 3.0 < an_bytes,
            "freqtier {ft_bytes} B vs autonuma {an_bytes} B"
        );
        // The hot set is promoted all the same (a few samples per page take longer
        // to gather than autonuma's single fault, hence the margin).
        assert!(ft.summary.promoted_pages >= 500);
        assert!(
            ft.summary.fast_access_ratio > an.summary.fast_access_ratio - 0.05,
            "freqtier {:.3} vs autonuma {:.3}",
            ft.summary.fast_access_ratio,
            an.summary.fast_access_ratio
        );
    }

    #[test]
    fn oracle_14_15_intensity_steps_down_when_steady_and_back_up_after_a_hot_set_shift() {
        // Spec §7.14–15 (Fig. 11 analogue): phase 1's hot set is found, sampling
        // falls to monitoring; phase 2 moves the hot set to cold pages, monitoring
        // notices and sampling restarts at the top rate.
        let data = 16 * 1024;
        let mut w = Phased::new(
            data,
            1_024,
            90,
            vec![(4_096, 6_000_000), (10_240, 6_000_000)],
        );
        w.gap_ns = 100;
        let cfg = small_cfg(5_000, 1_000);
        let sim = SimConfig {
            interval_ms: 20,
            ..SimConfig::default()
        };
        let (out, _) = testing::run(
            &no_llc("1:8"),
            &sim,
            Box::new(FreqTier::new(cfg)),
            Box::new(w),
        );
        if std::env::var("FT_DEBUG").is_ok() {
            eprintln!("{:#?}", out.summary.policy_stats);
            for r in &out.series.rows {
                eprintln!(
                    "{:.3} {:.3} p{} d{} s{}",
                    r.time_s, r.fast_access_ratio, r.promoted_pages, r.demoted_pages, r.samples
                );
            }
        }
        assert!(stat(&out, "monitoring_entered") >= 2.0);
        assert!(stat(&out, "monitoring_left") >= 1.0);
        // Samples per interval: high at first, low in the steady phase, high again
        // after the shift. Find the shift from the fast ratio's collapse.
        let rows = &out.series.rows;
        let samples: Vec<u64> = rows.iter().map(|r| r.samples).collect();
        let peak1 = samples[..rows.len() / 4].iter().copied().max().unwrap();
        let ratios: Vec<f64> = rows.iter().map(|r| r.fast_access_ratio).collect();
        let first_good = ratios
            .iter()
            .position(|&r| r > 0.8)
            .expect("phase 1's hot set is found");
        let collapse = first_good
            + ratios[first_good..]
                .iter()
                .position(|&r| r < 0.5)
                .expect("the shift makes the old placement miss");
        let steady_min = samples[first_good..collapse].iter().copied().min().unwrap();
        let after_max = samples[collapse..].iter().copied().max().unwrap();
        assert!(
            steady_min * 10 <= peak1,
            "steady-phase samples {steady_min} vs initial {peak1}: {samples:?}"
        );
        assert!(
            after_max >= 10 * steady_min.max(1),
            "samples after the shift {after_max} vs steady {steady_min}: {samples:?}"
        );
        // And the new hot set is found again.
        assert!(
            ratios[collapse..].iter().any(|&r| r > 0.8),
            "no recovery: {ratios:?}"
        );
    }

    /// Oracle 20 (§VII-B): on the low-bandwidth CXL device FreqTier still beats
    /// the paper's AutoNUMA baseline (Linux 6.2 tiering with MGLRU demotion,
    /// `linux-tiering-mglru`), at the papers' time constants: GUPS over 4 GiB at
    /// 1:32 on `cxl-lowbw`, tiering threads on the application's CPUs, ~45 s of
    /// machine time sampled at 1/64: ≥ 5% shorter runtime and more than twice its
    /// fast-access ratio (the paper ≈ 1.14× on average).
    #[test]
    fn oracle_20_ahead_of_linux_tiering_at_1_to_32_on_the_low_bandwidth_machine() {
        let m = MachineConfig {
            preset: "cxl-lowbw".into(),
            fast: "1:32".into(),
            tiering_cpus: tierkit_sim::config::TieringCpus::Shared,
            ..MachineConfig::default()
        };
        let gups = || gups(4096, 1_000_000_000);
        let ft = crate::faithful::run_registered("freqtier", &m, 64, gups());
        let lt = crate::faithful::run_registered("linux-tiering-mglru", &m, 64, gups());
        assert!(
            ft.summary.sim_seconds > 30.0,
            "long enough for batches and scans"
        );
        assert!(
            ft.summary.sim_seconds * 1.05 < lt.summary.sim_seconds,
            "freqtier {:.3} s vs linux-tiering-mglru {:.3} s",
            ft.summary.sim_seconds,
            lt.summary.sim_seconds
        );
        assert!(ft.summary.fast_access_ratio > 2.0 * lt.summary.fast_access_ratio);
    }

    /// One run of the Zipf trace of oracles 10, 11, 13 and 17.
    struct ZipfRun {
        /// Fast-access ratio of the run's second half (memory accesses served by the
        /// fast tier): the steady state the paper reports.
        steady_fast_ratio: f64,
        migrated_bytes: u64,
        /// FreqTier's largest share of tracked pages at the top count (15) at any
        /// aging (0 for the other policies).
        max_share_at_15: f64,
    }

    /// The Zipf trace of oracles 10, 11, 13 and 17 at one fast:slow ratio, run once
    /// for every test that reads it: a key-value store of 8 Mi 1 KiB records (8 GiB,
    /// YCSB's θ = 0.99, scrambled, reads only) for 50-90 s of machine time on
    /// `cxl`, at the papers' time constants, sampled at 1/16, by FreqTier and the two
    /// recency baselines the paper measures (§II-C1): its AutoNUMA (Linux 6.2 tiering
    /// with MGLRU demotion) and TPP.
    fn zipf_runs(ratio: &'static str) -> &'static BTreeMap<&'static str, ZipfRun> {
        type Runs = std::sync::OnceLock<BTreeMap<&'static str, ZipfRun>>;
        static AT_1_32: Runs = Runs::new();
        static AT_1_8: Runs = Runs::new();
        let cell = match ratio {
            "1:32" => &AT_1_32,
            "1:8" => &AT_1_8,
            _ => unreachable!("the Zipf runs are at 1:32 and 1:8"),
        };
        // The three runs in parallel: the tests that read them wait for all three.
        cell.get_or_init(|| {
            std::thread::scope(|s| {
                let handles: Vec<_> = ["freqtier", "linux-tiering-mglru", "tpp"]
                    .map(|policy| s.spawn(move || (policy, zipf_run(policy, ratio))))
                    .into();
                handles
                    .into_iter()
                    .map(|h| h.join().expect("a Zipf run panicked"))
                    .collect()
            })
        })
    }

    fn zipf_run(policy: &str, ratio: &str) -> ZipfRun {
        let w = tierkit_workloads::ZipfKv::new(
            &tierkit_workloads::ZipfKvConfig {
                nr_records: 8 << 20,
                nr_ops: 300_000_000,
                ..Default::default()
            },
            7,
        );
        let out = crate::faithful::run_registered(policy, &cxl(ratio), 16, Box::new(w));
        let rows = &out.series.rows;
        let tail = &rows[rows.len() / 2..];
        let mem: u64 = tail.iter().map(|r| r.mem_accesses).sum();
        let fast: f64 = tail
            .iter()
            .map(|r| r.fast_access_ratio * r.mem_accesses as f64)
            .sum();
        let steady_fast_ratio = fast / mem.max(1) as f64;
        eprintln!(
            "{policy} {ratio}: steady fast ratio {steady_fast_ratio:.3}, migrated {} MiB, {:.1} s",
            out.summary.migrated_bytes >> 20,
            out.summary.sim_seconds
        );
        ZipfRun {
            steady_fast_ratio,
            migrated_bytes: out.summary.migrated_bytes,
            max_share_at_15: out
                .summary
                .policy_stats
                .iter()
                .find(|(k, _)| k == "max_share_of_pages_at_15")
                .map_or(0.0, |x| x.1),
        }
    }

    #[test]
    fn oracle_10_frequency_beats_recency_at_a_small_local_tier() {
        // §II-C1, §VII-A: with a small local tier FreqTier's steady local hit ratio
        // is ≈90% against 71% for the paper's AutoNUMA (Linux 6.2 tiering + MGLRU).
        // Asserted: at 1:32 ahead of it by at least 5 points. The TPP half (70%) is
        // not reproduced: TPP, promoting on a second hint fault, keeps about the same
        // hit ratio as FreqTier here, paid for with ~10x the migrated bytes (oracle
        // 13; docs/policies/freqtier.md, oracles 10 and 11).
        let runs = zipf_runs("1:32");
        let ft = runs["freqtier"].steady_fast_ratio;
        let an = runs["linux-tiering-mglru"].steady_fast_ratio;
        assert!(
            ft > an + 0.05,
            "freqtier {ft:.3} vs linux-tiering-mglru {an:.3} at 1:32"
        );
    }

    #[test]
    #[ignore = "not reproduced (docs/policies/freqtier.md, oracles 10 and 11): the lead does not shrink from 1:32 to 1:8"]
    fn oracle_11_the_advantage_shrinks_as_local_memory_grows() {
        // §VII-A: the lead over the AutoNUMA baseline is largest at 5-6% local and
        // small or near parity at 20-25% (GAP: +17-18% at 1:32, +2-4% at 1:16).
        // Checked: the lead at 1:8 is at most half the lead at 1:32. Measured
        // 2026-11-27: 0.298 at 1:32 and 0.295 at 1:8 (300 M operations), 0.309 and
        // 0.317 (500 M): the same lead at both ratios.
        let lead = |ratio| {
            let runs = zipf_runs(ratio);
            runs["freqtier"].steady_fast_ratio - runs["linux-tiering-mglru"].steady_fast_ratio
        };
        let (small, large) = (lead("1:32"), lead("1:8"));
        assert!(
            large <= 0.5 * small,
            "lead at 1:32 {small:.3}, at 1:8 {large:.3}"
        );
    }

    #[test]
    #[ignore = "not reproduced (docs/policies/freqtier.md, oracle 17): more than 2% of tracked pages reach 15"]
    fn oracle_17_few_tracked_pages_reach_the_top_count() {
        // §VII-E3: on skewed traces fewer than ~2% of tracked pages reach count 15 at
        // any time. Checked on the Zipf trace at 1:32 and 1:8 (the policy's running
        // maximum over its agings). The half that says 8-bit counters would not
        // change placement needs a counter-width option FreqTier does not have here.
        for ratio in ["1:32", "1:8"] {
            let share = zipf_runs(ratio)["freqtier"].max_share_at_15;
            assert!(
                share < 0.02,
                "{:.1}% of tracked pages at 15 at {ratio}",
                100.0 * share
            );
        }
    }

    #[test]
    fn oracle_13_frequency_migrates_fewer_bytes_than_recency() {
        // §II-C1, §III: FreqTier migrates ≈4.2x fewer bytes than the recency
        // baselines on average. Asserted at 1:32: fewer than each baseline, and at
        // least 2x fewer over both (geometric mean).
        let runs = zipf_runs("1:32");
        let ft = runs["freqtier"].migrated_bytes.max(1) as f64;
        let mut log_sum = 0.0f64;
        for base in ["linux-tiering-mglru", "tpp"] {
            let b = runs[base].migrated_bytes as f64;
            assert!(ft < b, "freqtier {ft} B vs {base} {b} B");
            log_sum += (b / ft).ln();
        }
        let geomean = (log_sum / 2.0).exp();
        assert!(
            geomean >= 2.0,
            "recency migrates {geomean:.2}x FreqTier's bytes"
        );
    }
}
