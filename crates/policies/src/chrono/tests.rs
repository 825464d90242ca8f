//! Simulator experiments for Chrono (spec §7 behavioural oracles). Each runs a small
//! workload with `sim.policy_time_scale` chosen so that pages are accessed about as
//! often per (policy) second as in the paper's runs (≈ 1 access/s per page, §5.1.1),
//! so the paper's 60 s scan period and 1 s DCSC rounds play out over a few hundred
//! policy seconds. Scaled parameters: [`scaled`]. Numbers: `docs/policies/chrono.md`.

use super::*;
use tierkit_sim::config::ThpMode;
use tierkit_sim::testing::{run, small_machine};
use tierkit_sim::{MachineConfig, RunOutput, SimConfig};
use tierkit_workloads::{Pmbench, PmbenchConfig, PmbenchLadder, PmbenchLadderConfig};

/// The `optane` machine at 1:3 (Chrono's 25% fast share, §5) with a 1 MiB LLC so
/// the small footprints are not cache resident.
fn optane_1_3() -> MachineConfig {
    MachineConfig {
        preset: "optane".into(),
        fast: "1:3".into(),
        llc_size_mib: 1,
        ..MachineConfig::default()
    }
}

/// Chrono's parameters scaled to a small footprint of `footprint_mib` in `nr_procs`
/// processes: the scan step keeps the paper's 20 steps per pass over a process
/// (256 MB of 5 GB). The paper's DCSC sample (0.003% of memory per round, 2000
/// pages on its 256 GB) is less than a page here: DCSC probes 1/512 of the footprint
/// per round, at least 64 pages, and aggregates 30 rounds, so the heat maps hold
/// about a thousand samples or more while the probes' faults stay a fraction of the
/// Ticking-scan's.
pub(super) fn scaled(footprint_mib: f64, nr_procs: u32) -> ChronoConfig {
    let per_proc = footprint_mib / nr_procs as f64;
    ChronoConfig {
        scan_step_mb: ((per_proc / 20.0).round() as u64).max(1),
        min_victim_mb: (footprint_mib / 512.0).max(0.25),
        dcsc_window_rounds: 30,
        dcsc_min_samples: 500,
        ..ChronoConfig::default()
    }
}

use crate::lru::test_scripts::stat;

/// Fast-tier share of memory accesses over the last `frac` of the run.
fn late_fast_ratio(out: &RunOutput, frac: f64) -> f64 {
    let rows = &out.series.rows;
    let skip = ((1.0 - frac) * rows.len() as f64) as usize;
    let (mut fast, mut mem) = (0.0, 0u64);
    for r in &rows[skip..] {
        fast += r.fast_access_ratio * r.mem_accesses as f64;
        mem += r.mem_accesses;
    }
    fast / mem.max(1) as f64
}

/// Pages promoted per slow-tier memory access. The paper's PPR is per slow page
/// accessed; pmbench touches every page of its region, so the two differ by a
/// factor common to all policies.
fn promotions_per_slow_access(out: &RunOutput) -> f64 {
    let slow = out.summary.mem_accesses as f64 * (1.0 - out.summary.fast_access_ratio);
    out.summary.promoted_pages as f64 / slow.max(1.0)
}

/// Linux v5.18 NUMA balancing in tiering mode, the paper's Linux-NB: every slow-tier
/// hinting fault promotes (no threshold, no rate limit), kswapd demotes.
fn linux_nb_5_18() -> Box<dyn Policy> {
    Box::new(crate::LinuxTiering::new(crate::LinuxTieringConfig {
        hot_threshold_ms: 1 << 40,
        ..Default::default()
    }))
}

/// Table 2 defaults in the paper's units, and `validate` names the field and range.
#[test]
fn config_defaults_are_the_papers_and_validate_names_the_field() {
    let c = ChronoConfig::default();
    assert_eq!(c.validate(), Ok(()));
    assert_eq!(
        (
            c.scan_step_mb,
            c.scan_period_ms,
            c.filter_rounds,
            c.nr_buckets
        ),
        (256, 60_000, 2, 28)
    );
    assert_eq!(
        (c.cit_threshold_ms, c.rate_limit_mbps, c.delta_step),
        (1000.0, 100.0, 0.5)
    );
    assert_eq!(
        (c.victim_percent, c.thrash_ratio_percent, c.max_threshold_ms),
        (0.003, 20.0, 2f64.powi(27))
    );
    let bad = |f: fn(&mut ChronoConfig)| {
        let mut c = ChronoConfig::default();
        f(&mut c);
        c.validate().unwrap_err()
    };
    assert!(bad(|c| c.filter_rounds = 0)
        .to_string()
        .contains("policy.filter_rounds must be in [1, 8]"));
    assert!(bad(|c| c.delta_step = 0.0)
        .to_string()
        .contains("policy.delta_step"));
    assert!(bad(|c| c.cit_threshold_ms = 0.5)
        .to_string()
        .contains("policy.cit_threshold_ms"));
    assert!(bad(|c| c.victim_percent = 0.0)
        .to_string()
        .contains("policy.victim_percent"));
    assert!(bad(|c| c.scan_period_min_ms = 70_000)
        .to_string()
        .contains("policy.scan_period_min_ms"));
    assert!(bad(|c| c.thrash_ratio_percent = 120.0)
        .to_string()
        .contains("policy.thrash_ratio_percent"));
}

// ----- Gaussian pmbench (§5.1.2, §5.1.4, §5.4) ---------------------------------------

/// Gaussian pmbench (σ = 1/8 of the region, 50% reads) of 32 MiB, 5 M accesses; at
/// policy time ×600 its pages see ≈ 1.2 accesses per policy second over ≈ 470 s,
/// eight scan periods.
const PM_MIB: u64 = 32;
const PM_ACCESSES: u64 = 5_000_000;
const PM_SCALE: f64 = 600.0;

fn pmbench_sim() -> SimConfig {
    SimConfig {
        policy_time_scale: PM_SCALE,
        interval_ms: 10,
        ..SimConfig::default()
    }
}

fn pmbench() -> Box<dyn Workload> {
    Box::new(Pmbench::new(
        &PmbenchConfig {
            footprint_mib: PM_MIB,
            nr_accesses: PM_ACCESSES,
            ..PmbenchConfig::default()
        },
        1,
    ))
}

/// The rate limit semi-auto runs use: Chrono-basic's "stable state in adaptive
/// tuning" (§5.4) — DCSC settles near 0.03 MB/s on this workload (the trajectory in
/// `oracle_08_09_11_pmbench_chrono_beats_autonuma_and_linux_nb`).
const PM_STABLE_RL_MBPS: f64 = 0.03;

/// Spec §7 oracles 8, 9, 11 (FMAR 49% → 77%, fewer promotions per slow page; TH
/// converges near the access interval of the hottest quarter; RL high, then lower
/// and stable).
#[test]
fn oracle_08_09_11_pmbench_chrono_beats_autonuma_and_linux_nb() {
    let (c, trace) = Chrono::traced(scaled(PM_MIB as f64, 1), Tuning::Dcsc, false);
    let (chrono, _) = run(&optane_1_3(), &pmbench_sim(), Box::new(c), pmbench());
    let (nb, _) = run(&optane_1_3(), &pmbench_sim(), linux_nb_5_18(), pmbench());
    let (an, _) = run(
        &optane_1_3(),
        &pmbench_sim(),
        Box::new(crate::Autonuma::new(Default::default())),
        pmbench(),
    );
    let far = |o: &RunOutput| (o.summary.fast_access_ratio, late_fast_ratio(o, 0.3));
    let (c_all, c_late) = far(&chrono);
    let (nb_all, nb_late) = far(&nb);
    let (an_all, _) = far(&an);
    let (c_ppr, nb_ppr) = (
        promotions_per_slow_access(&chrono),
        promotions_per_slow_access(&nb),
    );
    eprintln!(
        "FMAR (run / last 30%): chrono {c_all:.3} / {c_late:.3}, linux-nb-5.18 {nb_all:.3} / \
         {nb_late:.3}, autonuma {an_all:.3}; promotions per slow access: chrono {c_ppr:.5}, \
         linux-nb {nb_ppr:.5}; runtime chrono {:.3} s, linux-nb {:.3} s, autonuma {:.3} s",
        chrono.summary.sim_seconds, nb.summary.sim_seconds, an.summary.sim_seconds
    );
    // autonuma cannot promote into a full fast tier: first touch put the region's
    // cold first quarter there.
    assert!(an_all < 0.05 && an.summary.promoted_pages == 0);
    assert!(c_all > an_all + 0.35, "chrono {c_all} vs autonuma {an_all}");
    assert!(
        c_late > nb_late + 0.05,
        "chrono {c_late} vs linux-nb {nb_late}"
    );
    assert!(
        c_ppr < 0.2 * nb_ppr,
        "PPR chrono {c_ppr} vs linux-nb {nb_ppr}"
    );
    assert!(chrono.summary.sim_seconds < nb.summary.sim_seconds);

    // Trajectories (Fig. 10b, 10c).
    let t = trace.lock().unwrap();
    let dcsc: Vec<&TracePoint> = t.points.iter().filter(|p| p.kind == "dcsc").collect();
    assert!(dcsc.len() > 300, "{} DCSC retunes", dcsc.len());
    let mean = |v: &[&TracePoint], f: fn(&TracePoint) -> f64| {
        v.iter().map(|p| f(p)).sum::<f64>() / v.len() as f64
    };
    let n = dcsc.len();
    let (early, late) = (&dcsc[..n / 10], &dcsc[n * 7 / 10..]);
    let rl = |p: &TracePoint| p.rate_limit_mbps;
    let th = |p: &TracePoint| p.th_ms;
    eprintln!(
        "RL early {:.4} late {:.4} MB/s; TH early {:.0} late {:.0} ms",
        mean(early, rl),
        mean(late, rl),
        mean(early, th),
        mean(late, th)
    );
    assert!(
        mean(early, rl) > 2.0 * mean(late, rl),
        "RL high first, then lower"
    );
    let late_th = mean(late, th);
    assert!(
        late.iter().all(|p| (p.th_ms / late_th - 1.0).abs() < 0.3),
        "TH settled"
    );
    // The hottest quarter of a Gaussian with σ = 1/8 of the region is its central
    // ±1σ; the page at its edge is accessed at R · φ(1)/σ per second (R: accesses per
    // policy second), i.e. once every N / (1.936 R) s.
    let r = PM_ACCESSES as f64 / (chrono.summary.sim_seconds * PM_SCALE);
    let pages = (PM_MIB * MIB / PAGE_SIZE) as f64;
    let edge_interval_ms = pages / (1.936 * r) * 1000.0;
    eprintln!("edge-of-hot-quarter access interval {edge_interval_ms:.0} ms, TH {late_th:.0} ms");
    assert!(
        (0.7..2.0).contains(&(late_th / edge_interval_ms)),
        "TH {late_th} ms vs interval {edge_interval_ms} ms"
    );
}

/// Spec §7 oracles 6, 7 and §5.4's ablation: semi-auto at a fixed rate limit with
/// 1, 2 and 3 filter rounds (Chrono-basic / -twice / -thrice). More rounds promote
/// fewer pages for a better placement, with diminishing returns; the threshold rises
/// with the rounds; the enqueue rate settles at the rate limit.
#[test]
fn oracle_06_07_ablation_basic_twice_thrice() {
    let mut res = Vec::new();
    for rounds in [1, 2, 3] {
        let cfg = ChronoConfig {
            rate_limit_mbps: PM_STABLE_RL_MBPS,
            filter_rounds: rounds,
            ..scaled(PM_MIB as f64, 1)
        };
        let (c, trace) = Chrono::traced(cfg, Tuning::SemiAuto, false);
        let (out, _) = run(&optane_1_3(), &pmbench_sim(), Box::new(c), pmbench());
        let late = late_fast_ratio(&out, 0.3);
        let periods: Vec<TracePoint> = trace
            .lock()
            .unwrap()
            .points
            .iter()
            .filter(|p| p.kind == "period")
            .copied()
            .collect();
        // Enqueue rate over the last three full periods vs the rate limit in force.
        let w = &periods[periods.len() - 4..];
        let enq_mb =
            (w[3].enqueued_pages - w[0].enqueued_pages) as f64 * PAGE_SIZE as f64 / MIB as f64;
        let er = enq_mb / (w[3].time_s - w[0].time_s);
        eprintln!(
            "rounds {rounds}: FMAR {:.3} late {late:.3} promoted {} TH {:.0} ms, enqueue rate \
             {er:.4} MB/s vs RL {PM_STABLE_RL_MBPS}, halvings {}",
            out.summary.fast_access_ratio,
            out.summary.promoted_pages,
            stat(&out, "cit_threshold_ms"),
            stat(&out, "rate_limit_halvings"),
        );
        assert!(
            (0.5..2.0).contains(&(er / PM_STABLE_RL_MBPS)),
            "enqueue rate {er} vs rate limit"
        );
        res.push((
            late,
            out.summary.promoted_pages,
            stat(&out, "cit_threshold_ms"),
        ));
    }
    let [(l1, p1, t1), (l2, p2, t2), (l3, p3, t3)] = res[..] else {
        unreachable!()
    };
    assert!(l2 > l1 + 0.01, "twice {l2} vs basic {l1}");
    assert!((l3 - l2).abs() < 0.03, "thrice {l3} ≈ twice {l2}");
    assert!(p1 > p2 && p2 > p3, "promotions {p1} > {p2} > {p3}");
    assert!(t1 < t2 && t2 < t3, "thresholds {t1} < {t2} < {t3}");
}

/// Spec §2.15 item 1, the `round2_timing` switch: measuring round 2 one scan period
/// later (`next-pass`) instead of at the next scan step delays every promotion by a
/// period, so over the same run fewer pages are promoted and less of the Gaussian's
/// traffic reaches the fast tier.
#[test]
fn round_two_at_the_next_pass_promotes_later() {
    let mut res = Vec::new();
    for timing in [Round2Timing::NextStep, Round2Timing::NextPass] {
        let cfg = ChronoConfig {
            rate_limit_mbps: PM_STABLE_RL_MBPS,
            round2_timing: timing,
            ..scaled(PM_MIB as f64, 1)
        };
        let (out, _) = run(
            &optane_1_3(),
            &pmbench_sim(),
            Box::new(Chrono::new(cfg, Tuning::SemiAuto)),
            pmbench(),
        );
        eprintln!(
            "{timing:?}: FMAR {:.3} promoted {} TH {:.0} ms",
            out.summary.fast_access_ratio,
            out.summary.promoted_pages,
            stat(&out, "cit_threshold_ms")
        );
        res.push((out.summary.fast_access_ratio, out.summary.promoted_pages));
    }
    let [(f_step, p_step), (f_pass, p_pass)] = res[..] else {
        unreachable!()
    };
    assert!(p_pass > 0, "next-pass still promotes");
    assert!(p_pass < p_step, "promoted {p_pass} vs {p_step}");
    assert!(f_pass < f_step, "FMAR {f_pass} vs {f_step}");
}

// ----- The 50-process delay ladder (§5.1.3, Fig. 9; spec §7 oracle 10) -------------

/// 50 pmbench processes of 2 MiB, uniform pattern, process i waiting i × 50 cycles
/// per access; `nr_accesses` generated, the run stopped at half of them, while every
/// process still runs.
fn ladder(nr_accesses: u64) -> Box<dyn Workload> {
    Box::new(PmbenchLadder::new(
        &PmbenchLadderConfig {
            process_footprint_mib: 2,
            nr_accesses,
            ..PmbenchLadderConfig::default()
        },
        1,
    ))
}

fn ladder_sim(nr_accesses: u64) -> SimConfig {
    SimConfig {
        policy_time_scale: 2000.0,
        interval_ms: 10,
        max_accesses: nr_accesses / 2,
        ..SimConfig::default()
    }
}

/// Share of each process's resident pages in the fast tier.
fn fast_share_per_process(m: &tierkit_sim::machine::Machine) -> Vec<f64> {
    m.processes()
        .into_iter()
        .map(|pid| {
            let (mut fast, mut all) = (0u64, 0u64);
            for v in m.vmas(pid) {
                for vpn in v.start_vpn..v.end_vpn() {
                    if let Some(p) = m.page(pid, vpn) {
                        all += 1;
                        fast += p.tier.is_fast() as u64;
                    }
                }
            }
            fast as f64 / all.max(1) as f64
        })
        .collect()
}

/// Mean fast share of each group of five consecutive delay classes.
fn by_fives(share: &[f64]) -> Vec<f64> {
    share
        .chunks(5)
        .map(|c| c.iter().sum::<f64>() / c.len() as f64)
        .collect()
}

#[test]
fn oracle_10_ladder_chrono_gives_the_fast_tier_to_the_hot_processes() {
    let n = 15_000_000;
    let (out, m) = run(
        &optane_1_3(),
        &ladder_sim(n),
        Box::new(Chrono::new(scaled(100.0, 50), Tuning::Dcsc)),
        ladder(n),
    );
    let g = by_fives(&fast_share_per_process(&m));
    eprintln!(
        "chrono ladder, fast share per 5 classes: {:?} (promoted {}, {:.0} policy s)",
        g.iter()
            .map(|x| (x * 100.0).round() / 100.0)
            .collect::<Vec<_>>(),
        out.summary.promoted_pages,
        out.summary.sim_seconds * 2000.0
    );
    for w in g.windows(2) {
        assert!(
            w[1] <= w[0] + 0.02,
            "not falling with the delay class: {g:?}"
        );
    }
    assert!(g[0] - g[9] > 0.12, "{g:?}");
}

#[test]
fn oracle_10_ladder_baselines_spread_the_fast_tier_evenly() {
    let n = 8_000_000;
    let baselines: [(&str, Box<dyn Policy>); 2] = [
        (
            "autonuma",
            Box::new(crate::Autonuma::new(Default::default())),
        ),
        (
            "linux-tiering",
            Box::new(crate::LinuxTiering::new(Default::default())),
        ),
    ];
    for (name, p) in baselines {
        let (_, m) = run(&optane_1_3(), &ladder_sim(n), p, ladder(n));
        let g = by_fives(&fast_share_per_process(&m));
        eprintln!(
            "{name} ladder, fast share per 5 classes: {:?}",
            g.iter()
                .map(|x| (x * 100.0).round() / 100.0)
                .collect::<Vec<_>>()
        );
        let hot: f64 = g[..5].iter().sum::<f64>() / 5.0;
        let cold: f64 = g[5..].iter().sum::<f64>() / 5.0;
        assert!(
            (hot - cold).abs() < 0.06,
            "{name}: hot half {hot} vs cold half {cold}"
        );
        assert!(g.iter().all(|&x| (0.12..0.4).contains(&x)), "{name}: {g:?}");
    }
}

// ----- CIT measurement (spec §7 oracles 1–3) ----------------------------------------

/// A process whose `nr_filler` filler pages fill the fast tier first, then page
/// groups with given access processes: `(nr_pages, Periodic(period_ns) | Poisson(mean_ns))`,
/// all on the slow tier, run until `until_ns` of machine time.
mod timeline {
    use super::*;
    use crate::chrono::test_rng::Rng;
    use tierkit_sim::testing::{read, write, Script};

    pub const FILLER: u64 = 0x1000_0000;
    pub const GROUPS: u64 = 0x4000_0000;

    /// How a group of pages is accessed (machine time).
    #[derive(Clone, Copy)]
    pub enum Pattern {
        /// Every `period_ns`, from a random phase.
        Periodic(u64),
        /// Poisson arrivals with mean gap `mean_ns`.
        Poisson(u64),
    }

    /// The workload and the first vpn of each group.
    pub fn build(
        nr_filler: u64,
        groups: &[(u64, Pattern)],
        until_ns: u64,
        seed: u64,
    ) -> (Box<dyn Workload>, Vec<Vpn>) {
        let mut rng = Rng::new(seed);
        let mut events: Vec<(u64, u64)> = Vec::new();
        let mut first = Vec::new();
        let mut page = 0u64;
        for &(n, pat) in groups {
            first.push((GROUPS >> PAGE_SHIFT) + page);
            for _ in 0..n {
                let addr = GROUPS + page * PAGE_SIZE;
                let mut t = match pat {
                    Pattern::Periodic(p) => (rng.unit() * p as f64) as u64,
                    Pattern::Poisson(m) => (-(1.0 - rng.unit()).ln() * m as f64) as u64,
                };
                while t < until_ns {
                    events.push((t, addr));
                    t += match pat {
                        Pattern::Periodic(p) => p,
                        Pattern::Poisson(m) => {
                            ((-(1.0 - rng.unit()).ln() * m as f64) as u64).max(1)
                        }
                    };
                }
                page += 1;
            }
        }
        events.sort_unstable();
        let mut ops = Vec::with_capacity(events.len() + nr_filler as usize + page as usize);
        for i in 0..nr_filler {
            ops.push(write(FILLER + i * PAGE_SIZE, 0));
        }
        for i in 0..page {
            ops.push(write(GROUPS + i * PAGE_SIZE, 0));
        }
        // Accesses at their times (compute gaps; memory latency adds a few hundred
        // ns per access, small next to the gaps).
        let mut now = 0u64;
        for (t, addr) in events {
            let gap = t.saturating_sub(now);
            let mut left = gap;
            while left > u32::MAX as u64 {
                ops.push(read(FILLER, u32::MAX));
                left -= u32::MAX as u64;
            }
            ops.push(read(addr, left as u32));
            now = now.max(t);
        }
        let len_f = nr_filler * PAGE_SIZE;
        let len_g = page * PAGE_SIZE;
        let w = Script::new(len_f + len_g).process(&[(FILLER, len_f), (GROUPS, len_g)], ops);
        (Box::new(w), first)
    }
}

/// A Chrono that only observes: a 1 µs threshold makes no page a candidate (so none
/// leaves the regular path for the queue) and a zero rate limit never promotes.
fn observer(scan_period_ms: u64) -> (Box<dyn Policy>, TraceHandle) {
    let cfg = ChronoConfig {
        scan_period_ms,
        scan_period_min_ms: 1000.min(scan_period_ms),
        cit_threshold_ms: 0.001,
        min_threshold_ms: 0.001,
        rate_limit_mbps: 0.0,
        ..ChronoConfig::default()
    };
    let (c, t) = Chrono::traced(cfg, Tuning::SemiAuto, true);
    (Box::new(c), t)
}

/// CITs of the pages `[first, first + n)`, ms of policy time.
fn cits_of(trace: &TraceHandle, first: Vpn, n: u64) -> Vec<f64> {
    trace
        .lock()
        .unwrap()
        .cits
        .iter()
        .filter(|c| c.vpn >= first && c.vpn < first + n)
        .map(|c| c.cit_ns as f64 / NS_PER_MS as f64)
        .collect()
}

/// Spec §7 oracles 1–3: under Poisson access of rate λ the CIT is Exp(λ) (mean 1/λ,
/// P(CIT > 1/λ) = e⁻¹); under periodic access of period T0 it is U[0, T0] over random
/// scan phases; populations at 2 and 4 accesses/s land in different log2 buckets
/// though the scan period is 10 s; and each armed page gives at most one fault per
/// arming, whatever its rate.
#[test]
fn oracle_01_02_03_cit_is_exponential_under_poisson_and_uniform_under_periodic_access() {
    use timeline::Pattern::*;
    // Policy time runs 10× faster. Each hinting fault costs the thread 1 µs of
    // machine time, which stretches the access intervals right after an arming by
    // (faults × 1 µs) / interval: small at this scale.
    const K: f64 = 10.0;
    let ms = |x: f64| (x * NS_PER_MS as f64 / K) as u64; // policy ms → machine ns
    let n = 64;
    let groups = [
        (n, Periodic(ms(370.0))),
        (n, Poisson(ms(370.0))),
        (n, Poisson(ms(500.0))), // 2 accesses/s
        (n, Poisson(ms(250.0))), // 4 accesses/s
    ];
    let until = ms(400_000.0);
    let (w, first) = timeline::build(300, &groups, until, 3);
    let sim = SimConfig {
        policy_time_scale: K,
        ..SimConfig::default()
    };
    let (policy, trace) = observer(10_000);
    let (out, m) = run(&small_machine_1_64(), &sim, policy, w);
    for (g, &v) in first.iter().enumerate() {
        assert_eq!(
            m.page(Pid(0), v).unwrap().tier,
            TierId(1),
            "group {g} stays on the slow tier"
        );
    }
    let mean = |v: &[f64]| v.iter().sum::<f64>() / v.len() as f64;
    let frac = |v: &[f64], x: f64| v.iter().filter(|&&c| c < x).count() as f64 / v.len() as f64;
    // Periodic, T0 = 370 ms: U[0, 370]: mean 185, quartiles at 92.5 and 277.5.
    let per = cits_of(&trace, first[0], n);
    assert!(per.len() > 2000, "{} samples", per.len());
    assert!(
        (mean(&per) - 185.0).abs() < 10.0,
        "periodic mean {}",
        mean(&per)
    );
    assert!((frac(&per, 92.5) - 0.25).abs() < 0.04);
    assert!((frac(&per, 277.5) - 0.75).abs() < 0.04);
    assert!(per.iter().all(|&c| c < 370.0 * 1.05), "no CIT beyond T0");
    // Poisson, mean 370 ms: Exp: mean 370, P(CIT < 370) = 1 − e⁻¹ = 0.632.
    let poi = cits_of(&trace, first[1], n);
    assert!(
        (mean(&poi) / 370.0 - 1.0).abs() < 0.08,
        "poisson mean {}",
        mean(&poi)
    );
    assert!((frac(&poi, 370.0) - 0.632).abs() < 0.04);
    // 2/s and 4/s: medians 347 and 173 ms (ln 2 / λ), one log2 bucket apart.
    let median = |mut v: Vec<f64>| {
        v.sort_by(|a, b| a.partial_cmp(b).unwrap());
        v[v.len() / 2]
    };
    let (m2, m4) = (
        median(cits_of(&trace, first[2], n)),
        median(cits_of(&trace, first[3], n)),
    );
    let b = |x: f64| dcsc::bucket_of((x * NS_PER_MS as f64) as u64, 28);
    assert!(
        (m2 / 347.0 - 1.0).abs() < 0.12 && (m4 / 173.0 - 1.0).abs() < 0.12,
        "{m2} {m4}"
    );
    assert_eq!(b(m2), b(m4) + 1, "2/s and 4/s sit in adjacent buckets");
    // One fault per arming: faults ≤ armed PTEs, and the hot groups (4/s) fault no
    // more often than the cold ones (2/s).
    assert!(out.summary.hint_faults <= out.summary.counters.armed_ptes);
    let (c2, c4) = (
        cits_of(&trace, first[2], n).len(),
        cits_of(&trace, first[3], n).len(),
    );
    assert!(
        (c4 as f64 / c2 as f64 - 1.0).abs() < 0.05,
        "{c2} vs {c4} samples"
    );
    eprintln!(
        "periodic mean {:.1} ms, poisson mean {:.1} ms, medians 2/s {m2:.0} 4/s {m4:.0}, samples {} {} {c2} {c4}",
        mean(&per),
        mean(&poi),
        per.len(),
        poi.len()
    );
}

fn small_machine_1_64() -> MachineConfig {
    small_machine(1, 64)
}

// ----- Demotion, thrashing and huge pages (spec §7 oracles 13, 15, 16) ------------

/// A demoted page is armed at its demotion, so its first access measures the time
/// since then; hot within a scan period, it is a thrashing event.
#[test]
fn demoted_pages_are_armed_at_demotion_and_watched_for_thrashing() {
    use crate::lru::test_scripts::DemotedTargets;
    // Targets are demoted in the start-up phase (kswapd takes the LRU tail). Target 1
    // is read at 2.5 s; target 0 at 0.3 s, or never.
    let scenario = |read_target_0: bool| {
        let cfg = ChronoConfig {
            wake_demotion_on_low_watermark: true,
            ..ChronoConfig::default()
        };
        let (c, trace) = Chrono::traced(cfg, Tuning::SemiAuto, true);
        let mut s = DemotedTargets::new(16, 3);
        s.idle_until(300 * NS_PER_MS);
        if read_target_0 {
            s.read_target(0);
        }
        s.idle_until(2_500 * NS_PER_MS);
        s.read_target(1);
        s.idle_until(2_600 * NS_PER_MS);
        let (out, m) = run(&s.machine(), &SimConfig::default(), Box::new(c), s.script());
        for i in 0..3 {
            assert_eq!(s.tier_of(&m, i), TierId(1), "target {i} demoted");
        }
        let target = |i: u64| (0x1000_0000u64 >> PAGE_SHIFT) + i;
        let cit_ms = |i: u64| -> Vec<f64> {
            trace
                .lock()
                .unwrap()
                .cits
                .iter()
                .filter(|c| c.vpn == target(i))
                .map(|c| c.cit_ns as f64 / NS_PER_MS as f64)
                .collect()
        };
        (stat(&out, "thrash_event_pages"), cit_ms(0), cit_ms(1))
    };
    let (events, c0, c1) = scenario(true);
    let (events_without_0, _, _) = scenario(false);
    eprintln!(
        "target 0 CIT {c0:?} ms, target 1 CIT {c1:?} ms; thrashing events {events} \
         ({events_without_0} without target 0's read)"
    );
    // Target 0's CIT runs from its demotion, a few ms into the run.
    assert_eq!(c0.len(), 1);
    assert!(c0[0] > 250.0 && c0[0] < 300.0, "{c0:?}");
    // Had target 1 not been armed at demotion, the scan at 1 s would have armed it
    // and its CIT would be 1.5 s.
    assert_eq!(c1.len(), 1);
    assert!(c1[0] > 2_400.0, "{c1:?}");
    // Target 0 came back hot (0.3 s < TH = 1 s) within a scan period: one event;
    // target 1 (2.5 s) did not.
    assert_eq!(events - events_without_0, 1.0);
}

/// Huge pages: CIT against TH/512, DCSC weighting; the policy runs, promotes whole
/// huge pages, and places more of the Gaussian's accesses in the fast tier than the
/// first-touch placement.
#[test]
fn huge_pages_are_promoted_as_units() {
    let machine = MachineConfig {
        thp: ThpMode::Always,
        ..optane_1_3()
    };
    let w = || -> Box<dyn Workload> {
        Box::new(Pmbench::new(
            &PmbenchConfig {
                footprint_mib: 64,
                nr_accesses: 3_000_000,
                ..PmbenchConfig::default()
            },
            1,
        ))
    };
    let sim = SimConfig {
        policy_time_scale: 300.0,
        ..SimConfig::default()
    };
    let (out, _) = run(
        &machine,
        &sim,
        Box::new(Chrono::new(
            ChronoConfig {
                // §3.4: a probed huge page uses 512 pages of the victim share; keep
                // the paper's absolute 8 MB per round (4 huge pages) so the heat
                // maps hold more than a handful of probes.
                min_victim_mb: 8.0,
                ..scaled(64.0, 1)
            },
            Tuning::Dcsc,
        )),
        w(),
    );
    let (ft, _) = run(&machine, &sim, Box::new(crate::FirstTouch), w());
    eprintln!(
        "THP: chrono FMAR {:.3} promoted {} (TH {:.0} ms → {:.3} ms per 2 MiB page), \
         first-touch {:.3}",
        out.summary.fast_access_ratio,
        out.summary.promoted_pages,
        stat(&out, "cit_threshold_ms"),
        stat(&out, "cit_threshold_ms") / 512.0,
        ft.summary.fast_access_ratio
    );
    eprintln!("{:?}", out.summary.policy_stats);
    assert!(out.summary.promoted_pages > 0);
    assert_eq!(
        out.summary.promoted_pages % SUBPAGES_PER_HUGE,
        0,
        "whole huge pages"
    );
    assert!(out.summary.fast_access_ratio > ft.summary.fast_access_ratio + 0.1);
}

/// DCSC's victims are drawn over virtual memory, which a sampled run keeps whole
/// while simulating 1/N of its pages, so a run at 1/16 starts 1/16 of the exact run's
/// probes (each standing for 16). When the minimum victim sample was scaled by the
/// rate as well, the sampled run started 1/256 of them (about 6% of this bound), its
/// heat maps never filled and DCSC never updated the threshold.
#[test]
fn sampled_dcsc_probes_one_page_in_n_as_the_full_machine_does() {
    let machine = optane_1_3();
    let w = || -> Box<dyn Workload> {
        Box::new(Pmbench::new(
            &PmbenchConfig {
                footprint_mib: 256,
                nr_accesses: 30_000_000,
                ..PmbenchConfig::default()
            },
            1,
        ))
    };
    let exact = crate::faithful::run_registered("chrono", &machine, 1, w());
    let sampled = crate::faithful::run_registered("chrono", &machine, 16, w());
    let (e, s) = (
        stat(&exact, "dcsc_probes_started"),
        stat(&sampled, "dcsc_probes_started"),
    );
    assert!(e > 10_000.0, "exact probes {e}");
    let ratio = s * 16.0 / e;
    assert!(
        (0.8..1.25).contains(&ratio),
        "sampled {s} x 16 against exact {e}"
    );
}

// ----- Full scale (release build, minutes): `docs/policies/chrono.md` "Measured" ----
// cargo test --release -p tierkit-policies full_scale -- --ignored --nocapture --test-threads 1

/// The chrono suite's pmbench (2 GiB, optane 1:3, policy time ×10: ≈ 1 access per
/// page per policy second, as in §5.1.1) run 4× longer, 240 M accesses (≈ 8 scan
/// periods), with the paper's default parameters. Generates the page's DCSC
/// trajectory table (`chrono-full-trajectory`) and asserts what the page concludes
/// from it: TH settles (±10% over the last 150 policy s), RL rises while the
/// misplacement ratio is high and then settles below a third of its peak, and the
/// fast-memory access ratio climbs for ≈ 4 scan periods.
#[test]
#[ignore = "full scale: ~1 min in release; cargo test --release -p tierkit-policies --lib full_scale -- --ignored"]
fn full_scale_pmbench_trajectory() {
    let machine = MachineConfig {
        preset: "optane".into(),
        fast: "1:3".into(),
        ..MachineConfig::default()
    };
    let sim = SimConfig {
        policy_time_scale: 10.0,
        ..SimConfig::default()
    };
    let w = Box::new(Pmbench::new(
        &PmbenchConfig {
            scale: 0.5,
            nr_accesses: 480_000_000,
            ..PmbenchConfig::default()
        },
        42,
    ));
    let (c, trace) = Chrono::traced(ChronoConfig::default(), Tuning::Dcsc, false);
    let (out, _) = run(&machine, &sim, Box::new(c), w);
    let mut table = format!(
        "`chrono` (DCSC): FMAR {:.3} over the run, {:.3} over its last 30%; {} pages promoted; {:.5} promotions per slow access; {:.2} s.\n\n\
         | policy time (s) | TH (ms) | RL (MB/s) | misplacement ratio | promoted pages |\n|---|---|---|---|---|\n",
        out.summary.fast_access_ratio,
        late_fast_ratio(&out, 0.3),
        out.summary.promoted_pages,
        promotions_per_slow_access(&out),
        out.summary.sim_seconds
    );
    let t = trace.lock().unwrap();
    let dcsc: Vec<_> = t.points.iter().filter(|p| p.kind == "dcsc").collect();
    let mut next = 0.0;
    for p in &dcsc {
        if p.time_s >= next {
            table.push_str(&format!(
                "| {:.0} | {:.0} | {:.2} | {:.3} | {} |\n",
                p.time_s, p.th_ms, p.rate_limit_mbps, p.misplacement_ratio, p.promoted_pages
            ));
            next += 30.0;
        }
    }
    // FMAR per 30 policy seconds (3 s of machine time).
    let mut fmar = Vec::new();
    for chunk in out.series.rows.chunks(30) {
        let mem: u64 = chunk.iter().map(|r| r.mem_accesses).sum();
        let fast: f64 = chunk
            .iter()
            .map(|r| r.fast_access_ratio * r.mem_accesses as f64)
            .sum();
        fmar.push(fast / mem.max(1) as f64);
    }
    table.push_str(&format!(
        "\nFMAR per 30 policy seconds: {}.\n",
        fmar.iter()
            .map(|f| format!("{f:.3}"))
            .collect::<Vec<_>>()
            .join(", ")
    ));
    let end = dcsc.last().unwrap().time_s;
    let late: Vec<f64> = dcsc
        .iter()
        .filter(|p| p.time_s >= end - 150.0)
        .map(|p| p.th_ms)
        .collect();
    let mean = late.iter().sum::<f64>() / late.len() as f64;
    assert!(
        late.iter().all(|th| (th / mean - 1.0).abs() <= 0.15),
        "TH has not settled: {late:?}"
    );
    let peak = dcsc.iter().map(|p| p.rate_limit_mbps).fold(0.0, f64::max);
    let settled = dcsc.last().unwrap().rate_limit_mbps;
    assert!(settled * 3.0 < peak, "RL peak {peak} settled {settled}");
    assert!(
        fmar[4] > 3.0 * fmar[0] && *fmar.last().unwrap() > 0.5,
        "{fmar:?}"
    );
    tierkit_core::doc_tables::check_generated(
        "policies/chrono.md",
        "chrono-full-trajectory",
        &table,
        "--release -p tierkit-policies --lib full_scale_pmbench_trajectory -- --ignored",
    );
}

/// The chrono suite's ladder (50 × 41 MiB, optane 1:3) with policy time ×64 (process
/// 0's pages ≈ 2 accesses per policy second) over ≈ 300 policy seconds, scan step
/// 2 MB (the paper's 20 steps per process, 256 MB of 5 GB); fast share per process.
#[test]
#[ignore = "full scale: ~2 min in release; cargo test --release -p tierkit-policies --lib full_scale -- --ignored"]
fn full_scale_ladder() {
    let machine = MachineConfig {
        preset: "optane".into(),
        fast: "1:3".into(),
        ..MachineConfig::default()
    };
    let n = 320_000_000;
    let sim = SimConfig {
        policy_time_scale: 64.0,
        max_accesses: n / 2,
        ..SimConfig::default()
    };
    let w = || -> Box<dyn Workload> {
        Box::new(PmbenchLadder::new(
            &PmbenchLadderConfig {
                scale: 0.5,
                nr_accesses: 2 * n,
                ..PmbenchLadderConfig::default()
            },
            42,
        ))
    };
    let chrono = ChronoConfig {
        scan_step_mb: 2,
        ..ChronoConfig::default()
    };
    let runs: Vec<(&str, Box<dyn Policy>)> = vec![
        ("chrono", Box::new(Chrono::new(chrono, Tuning::Dcsc))),
        (
            "autonuma",
            Box::new(crate::Autonuma::new(Default::default())),
        ),
        (
            "linux-tiering",
            Box::new(crate::LinuxTiering::new(Default::default())),
        ),
        ("linux-nb-5.18", linux_nb_5_18()),
    ];
    let mut table = String::from(
        "| policy | classes 0–4 | 5–9 | 10–14 | 15–19 | 20–24 | 25–29 | 30–34 | 35–39 | 40–44 | 45–49 | FMAR | runtime (s) |\n|---|---|---|---|---|---|---|---|---|---|---|---|---|\n",
    );
    let mut chrono_groups = Vec::new();
    for (name, p) in runs {
        let (out, m) = run(&machine, &sim, p, w());
        let groups = by_fives(&fast_share_per_process(&m));
        table.push_str(&format!(
            "| {name} | {} | {:.3} | {:.2} |\n",
            groups
                .iter()
                .map(|x| format!("{x:.2}"))
                .collect::<Vec<_>>()
                .join(" | "),
            out.summary.fast_access_ratio,
            out.summary.sim_seconds
        ));
        if name == "chrono" {
            chrono_groups = groups;
        } else {
            // Recency-based placement does not rank the ladder's classes.
            let spread = groups.iter().cloned().fold(0.0, f64::max)
                - groups.iter().cloned().fold(1.0, f64::min);
            assert!(spread < 0.2, "{name}: {groups:?}");
        }
    }
    // Chrono ranks the classes: the hottest group holds the most fast memory, the
    // coldest groups the least (oracle 10's shape at full scale).
    assert!(
        chrono_groups[0] > 2.0 * chrono_groups[9] && chrono_groups[0] > chrono_groups[1],
        "{chrono_groups:?}"
    );
    tierkit_core::doc_tables::check_generated(
        "policies/chrono.md",
        "chrono-full-ladder",
        &table,
        "--release -p tierkit-policies --lib full_scale_ladder -- --ignored",
    );
}

/// DCSC's settled rate limit on the full-scale pmbench (mean over the last 30% of
/// `full_scale_pmbench_trajectory`'s retunes), MB/s: Chrono-basic's fixed rate limit
/// is "the stable state in adaptive tuning" (§5.4).
const FULL_STABLE_RL_MBPS: f64 = 1.75;

/// The full-scale pmbench of `full_scale_pmbench_trajectory` under the baselines
/// (`autonuma`; `linux-tiering`; Linux v5.18's MRU tiering mode, the paper's
/// Linux-NB) and the ablation (§5.4): semi-auto at DCSC's settled rate limit with 1,
/// 2 and 3 filter rounds (Chrono-basic / -twice / -thrice).
#[test]
#[ignore = "full scale: ~2.5 min in release; cargo test --release -p tierkit-policies --lib full_scale -- --ignored"]
fn full_scale_pmbench_baselines_and_ablation() {
    let machine = MachineConfig {
        preset: "optane".into(),
        fast: "1:3".into(),
        ..MachineConfig::default()
    };
    let sim = SimConfig {
        policy_time_scale: 10.0,
        ..SimConfig::default()
    };
    let w = || -> Box<dyn Workload> {
        Box::new(Pmbench::new(
            &PmbenchConfig {
                scale: 0.5,
                nr_accesses: 480_000_000,
                ..PmbenchConfig::default()
            },
            42,
        ))
    };
    let semi = |rounds: u32| -> Box<dyn Policy> {
        Box::new(Chrono::new(
            ChronoConfig {
                rate_limit_mbps: FULL_STABLE_RL_MBPS,
                filter_rounds: rounds,
                ..ChronoConfig::default()
            },
            Tuning::SemiAuto,
        ))
    };
    let runs: Vec<(&str, Box<dyn Policy>)> = vec![
        (
            "autonuma",
            Box::new(crate::Autonuma::new(Default::default())),
        ),
        (
            "linux-tiering",
            Box::new(crate::LinuxTiering::new(Default::default())),
        ),
        ("linux-nb-5.18", linux_nb_5_18()),
        ("chrono-basic", semi(1)),
        ("chrono-twice", semi(2)),
        ("chrono-thrice", semi(3)),
    ];
    let mut table = String::from(
        "| policy | FMAR (run) | FMAR (last 30%) | promoted pages | promotions per slow access | runtime (s) | F1 |\n|---|---|---|---|---|---|---|\n",
    );
    let mut got = Vec::new();
    for (name, p) in runs {
        let (out, _) = run(&machine, &sim, p, w());
        table.push_str(&format!(
            "| {name} | {:.3} | {:.3} | {} | {:.5} | {:.2} | {:.3} |\n",
            out.summary.fast_access_ratio,
            late_fast_ratio(&out, 0.3),
            out.summary.promoted_pages,
            promotions_per_slow_access(&out),
            out.summary.sim_seconds,
            out.summary.placement_f1,
        ));
        got.push((name, out.summary.promoted_pages, late_fast_ratio(&out, 0.3)));
    }
    let promoted = |n: &str| got.iter().find(|g| g.0 == n).unwrap().1;
    let late = |n: &str| got.iter().find(|g| g.0 == n).unwrap().2;
    // autonuma (mode 1) cannot promote once first touch filled the fast tier.
    assert_eq!(promoted("autonuma"), 0);
    // MRU promotes on every slow fault: far more than anyone else.
    assert!(promoted("linux-nb-5.18") > 3 * promoted("linux-tiering"));
    // §5.4: each filter round promotes fewer pages, each better aimed.
    assert!(promoted("chrono-basic") > promoted("chrono-twice"));
    assert!(promoted("chrono-twice") > promoted("chrono-thrice"));
    assert!(late("chrono-basic") < late("chrono-twice"));
    assert!(late("chrono-twice") <= late("chrono-thrice"));
    tierkit_core::doc_tables::check_generated(
        "policies/chrono.md",
        "chrono-full-baselines",
        &table,
        "--release -p tierkit-policies --lib full_scale_pmbench_baselines_and_ablation -- --ignored",
    );
}

/// Spec §7 oracle 13 (§3.3.1), the lower edge of the band and the failures, at the
/// paper's time constants: Chrono (defaults) on pmbench over 4 GiB at 1:3 on
/// `optane`, ~6 min of machine time sampled at 1/64. Once the fast tier has filled,
/// its free memory stays at or above the high watermark in most intervals (demotion
/// runs ahead of promotion) and promotions almost never fail for lack of room. The
/// band's upper edge, `pro`, is the formula `pro_watermark` checks.
#[test]
fn oracle_13_free_fast_memory_stays_above_the_high_watermark_and_promotions_do_not_fail() {
    let footprint_mib = 4096;
    let w = Box::new(Pmbench::new(
        &PmbenchConfig {
            footprint_mib,
            nr_accesses: 3_000_000_000,
            ..PmbenchConfig::default()
        },
        1,
    ));
    let machine = MachineConfig {
        preset: "optane".into(),
        fast: "1:3".into(),
        ..MachineConfig::default()
    };
    let out = crate::faithful::run_registered("chrono", &machine, 64, w);
    let s = &out.summary;
    assert!(
        s.sim_seconds > 300.0,
        "five 60 s scan periods: {} s",
        s.sim_seconds
    );
    assert!(
        s.promoted_pages > 10_000,
        "promotion pressure: {}",
        s.promoted_pages
    );
    assert!(
        s.failed_migrations * 100 <= s.promoted_pages,
        "{} failed of {} promoted",
        s.failed_migrations,
        s.promoted_pages
    );
    let total = footprint_mib * MIB / PAGE_SIZE;
    let fast = total / 4;
    let wm = tierkit_sim::machine::linux_watermarks(fast, total);
    // From the first interval the fast tier is full to the end.
    let rows = &out.series.rows;
    let first_full = rows
        .iter()
        .position(|r| (fast - r.fast_used_pages.min(fast)) as f64 <= wm.high)
        .expect("the fast tier fills");
    let after = &rows[first_full..];
    let in_band = after
        .iter()
        .filter(|r| (fast - r.fast_used_pages.min(fast) + 64) as f64 >= wm.high)
        .count();
    eprintln!(
        "free >= high (within one sampled page) in {in_band} of {} intervals after the fast tier filled",
        after.len()
    );
    assert!(
        in_band * 10 >= after.len() * 8,
        "{in_band} of {}",
        after.len()
    );
}

/// Spec §7.12 (§5.1.1): with stride 2 — every other 4 KiB page of a region touched —
/// a 2 MiB-granularity hotness scheme wastes about half of the fast memory it
/// promotes; Chrono at 4 KiB must not. 48 MiB of filler written first fills the
/// 16 MiB fast tier, then a 16 MiB region is written and its even pages read at
/// random (~1 access per page per policy second, as the other experiments here) for
/// about 1 300 policy seconds (22 of Chrono's 60 s scans). The same Chrono runs on
/// base pages (THP never) and with THP always, where it can promote only whole huge
/// pages: the 2 MiB-granularity case. Counted: of the hot region's pages that end in
/// the fast tier, the share never touched after its first write.
#[test]
fn oracle_12_stride_2_wastes_half_of_what_huge_pages_promote_and_nothing_at_4k() {
    const MIB: u64 = 1 << 20;
    const FILLER: u64 = 0x4000_0000;
    const HOT: u64 = 0x8000_0000;
    const HOT_PAGES: u64 = 16 * MIB / PAGE_SIZE;
    let workload = || -> Box<dyn Workload> {
        let mut ops: Vec<Op> = (0..48 * MIB / PAGE_SIZE)
            .map(|p| tierkit_sim::testing::write(FILLER + p * PAGE_SIZE, 0))
            .collect();
        ops.extend((0..HOT_PAGES).map(|p| tierkit_sim::testing::write(HOT + p * PAGE_SIZE, 0)));
        let mut rng = crate::chrono::test_rng::Rng::new(12);
        for _ in 0..3_000_000 {
            let r = rng.next_u64();
            let page = 2 * ((r >> 8) % (HOT_PAGES / 2));
            let line = (r >> 40) % 64;
            ops.push(tierkit_sim::testing::read(
                HOT + page * PAGE_SIZE + line * tierkit_core::CACHE_LINE,
                1_200,
            ));
        }
        Box::new(
            tierkit_sim::testing::Script::new(64 * MIB)
                .process(&[(FILLER, 48 * MIB), (HOT, 16 * MIB)], ops),
        )
    };
    let sim = SimConfig {
        policy_time_scale: 300.0,
        ..SimConfig::default()
    };
    // (promoted pages, hot-region pages in the fast tier, of them never read)
    let run_with = |thp: ThpMode| {
        let machine = MachineConfig {
            thp,
            ..optane_1_3()
        };
        let chrono = Chrono::new(
            ChronoConfig {
                min_victim_mb: 8.0,
                ..scaled(64.0, 1)
            },
            Tuning::Dcsc,
        );
        let (out, m) = run(&machine, &sim, Box::new(chrono), workload());
        let (mut fast, mut wasted) = (0u64, 0u64);
        for p in 0..HOT_PAGES {
            let info = m.page(Pid(0), (HOT / PAGE_SIZE) + p).expect("written");
            if info.tier.is_fast() {
                fast += 1;
                wasted += p % 2;
            }
        }
        eprintln!(
            "{thp:?}: {:.2} s, promoted {}, {fast} hot-region pages fast, {wasted} never read",
            out.summary.sim_seconds, out.summary.promoted_pages
        );
        (out.summary.promoted_pages, fast, wasted)
    };
    let (base_promoted, base_fast, base_wasted) = run_with(ThpMode::Never);
    let (huge_promoted, huge_fast, huge_wasted) = run_with(ThpMode::Always);
    assert!(base_promoted > 0 && huge_promoted > 0, "both promote");
    assert!(
        base_fast >= 512 && huge_fast >= 512,
        "both bring a share of the region in"
    );
    let (base_share, huge_share) = (
        base_wasted as f64 / base_fast as f64,
        huge_wasted as f64 / huge_fast as f64,
    );
    assert!(
        base_share <= 0.05,
        "4 KiB: {base_wasted} of {base_fast} fast pages never read"
    );
    assert!(
        (0.4..=0.6).contains(&huge_share),
        "2 MiB: {huge_wasted} of {huge_fast} fast pages never read"
    );
}
