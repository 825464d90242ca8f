//! Simulator experiments for `pet` (spec §7), and [`Phases`], a small workload of
//! separately mapped blocks used by the PET comparators' tests too.
//!
//! Policy time runs 20× faster than machine time in these runs
//! (`SimConfig::policy_time_scale`), so PET's 10 s scan interval is 0.5 s of machine
//! time; all times in assertions are policy seconds.

use super::*;
use crate::lru::test_scripts::stat;
use tierkit_sim::metrics::IntervalRow;
use tierkit_sim::testing::{run, small_machine};
use tierkit_sim::{RunOutput, SimConfig};

/// Policy time per machine time in these experiments.
pub(crate) const SCALE: f64 = 20.0;
/// Time-series rows of 10 ms machine time = 0.2 s policy time.
pub(crate) const ROW_MS: u64 = 10;
const BASE: u64 = 0x10_0000_0000;

/// One step of a process: first write every page of `touch` (in order), then access
/// uniformly random pages of `hot` until `policy_s` seconds of policy time of compute
/// have passed since the step began (memory latency comes on top).
#[derive(Debug, Clone)]
pub(crate) struct Step {
    pub touch: Vec<usize>,
    pub hot: Vec<usize>,
    pub policy_s: f64,
    /// Only this many pages from the start of each hot block are accessed (all when
    /// `None`): a block with a small hot part.
    pub hot_pages: Option<u64>,
    /// The `hot_pages` are spread evenly over the block instead of at its start.
    pub hot_spread: bool,
}

/// A workload of processes each owning `nr_blocks` anonymous mappings of
/// `block_mib` (each its own mmap, so each its own P-block), driven by a list of
/// [`Step`]s per process. Ops are generated lazily, one batch at a time.
pub(crate) struct Phases {
    block_pages: u64,
    nr_blocks: usize,
    gap_ns: u32,
    procs: Vec<ProcState>,
}

struct ProcState {
    steps: Vec<Step>,
    step: usize,
    /// The current step's writes are issued.
    touched: bool,
    /// Compute time left in the current step, ns of machine time.
    left_ns: u64,
    rng: u64,
}

fn block_addr(block_pages: u64, b: usize, i: u64) -> u64 {
    BASE + (b as u64 * 2 * block_pages + i) * PAGE_SIZE
}

impl Phases {
    pub fn new(block_mib: u64, nr_blocks: usize, gap_ns: u32, procs: Vec<Vec<Step>>) -> Phases {
        Phases {
            block_pages: block_mib * MIB / PAGE_SIZE,
            nr_blocks,
            gap_ns,
            procs: procs
                .into_iter()
                .enumerate()
                .map(|(i, steps)| ProcState {
                    steps,
                    step: 0,
                    touched: false,
                    left_ns: 0,
                    rng: 0x9e37_79b9_7f4a_7c15 ^ (i as u64 + 1),
                })
                .collect(),
        }
    }

    /// First page of block `b` (any process: each has its own address space).
    pub fn block_vpn(&self, b: usize) -> Vpn {
        block_addr(self.block_pages, b, 0) >> PAGE_SHIFT
    }

    pub fn footprint_bytes(&self) -> u64 {
        self.procs.len() as u64 * self.nr_blocks as u64 * self.block_pages * PAGE_SIZE
    }
}

impl Workload for Phases {
    fn shape(&self) -> WorkloadShape {
        WorkloadShape {
            processes: (0..self.procs.len())
                .map(|i| ProcessShape {
                    name: format!("phases{i}"),
                    nr_threads: 1,
                    mlp: 1.0,
                })
                .collect(),
            footprint_bytes: self.footprint_bytes(),
        }
    }

    fn prologue(&mut self, _process: usize, out: &mut Vec<Op>) {
        for b in 0..self.nr_blocks {
            out.push(Op::Mmap {
                addr: block_addr(self.block_pages, b, 0),
                len: self.block_pages * PAGE_SIZE,
                kind: VmaKind::Anon,
            });
        }
    }

    fn fill(&mut self, process: usize, _thread: usize, out: &mut Vec<Op>) {
        let (gap, bp) = (self.gap_ns as u64, self.block_pages);
        let p = &mut self.procs[process];
        while out.is_empty() {
            let Some(step) = p.steps.get(p.step) else {
                return; // finished
            };
            if !p.touched {
                p.touched = true;
                p.left_ns = (step.policy_s * 1e9 / SCALE) as u64;
                for &b in &step.touch {
                    out.extend((0..bp).map(|i| Op::Access {
                        addr: block_addr(bp, b, i),
                        write: true,
                        gap_ns: gap as u32,
                    }));
                }
                continue;
            }
            if step.hot.is_empty() {
                // Idle: one read of the step's first touched block after the whole
                // step's compute time.
                let b = step.touch.first().copied().unwrap_or(0);
                let mut ns = p.left_ns;
                while ns > u32::MAX as u64 {
                    out.push(Op::Access {
                        addr: block_addr(bp, b, 0),
                        write: false,
                        gap_ns: u32::MAX,
                    });
                    ns -= u32::MAX as u64;
                }
                out.push(Op::Access {
                    addr: block_addr(bp, b, 0),
                    write: false,
                    gap_ns: ns as u32,
                });
                p.left_ns = 0;
            }
            while p.left_ns >= gap.max(1) && out.len() < 4096 {
                p.left_ns -= gap.max(1);
                p.rng ^= p.rng << 13;
                p.rng ^= p.rng >> 7;
                p.rng ^= p.rng << 17;
                let b = step.hot[(p.rng % step.hot.len() as u64) as usize];
                let span = step.hot_pages.map_or(bp, |n| n.clamp(1, bp));
                let stride = if step.hot_spread { bp / span } else { 1 };
                out.push(Op::Access {
                    addr: block_addr(bp, b, (p.rng >> 20) % span * stride),
                    write: false,
                    gap_ns: gap as u32,
                });
            }
            if p.left_ns < gap.max(1) {
                p.step += 1;
                p.touched = false;
            }
        }
    }
}

pub(crate) fn sim() -> SimConfig {
    SimConfig {
        policy_time_scale: SCALE,
        interval_ms: ROW_MS,
        ..SimConfig::default()
    }
}

pub(crate) fn pet() -> Box<dyn Policy> {
    Box::new(Pet::new(PetConfig::default()))
}

/// Policy time at the end of a time-series row.
pub(crate) fn policy_s(r: &IntervalRow) -> f64 {
    r.time_s * SCALE
}

/// Mean fast-tier use of a run relative to another's: the `fast_saving_vs_first_touch`
/// of `tierkit compare`.
pub(crate) fn saving(out: &RunOutput, base: &RunOutput) -> f64 {
    1.0 - out.summary.fast_mean_used_pages / base.summary.fast_mean_used_pages
}

pub(crate) fn slowdown(out: &RunOutput, base: &RunOutput) -> f64 {
    out.summary.sim_seconds / base.summary.sim_seconds - 1.0
}

pub(crate) fn step(touch: &[usize], hot: &[usize], policy_s: f64) -> Step {
    Step {
        touch: touch.to_vec(),
        hot: hot.to_vec(),
        policy_s,
        hot_pages: None,
        hot_spread: false,
    }
}

// ----- capture and sampling (spec oracles 2–5, 7) ------------------------------------

#[test]
fn oracle_02_03_04_each_anonymous_mmap_is_captured_and_split_at_the_maximum_size() {
    // Eight adjacent 4 MiB mappings (the kernel would merge them into one VMA; every
    // mmap is still its own P-block, oracle 2) plus, with a 3 MiB maximum, each splits
    // into ⌈4/3⌉ = 2 (oracle 3). 128 B of metadata per P-block (oracle 4).
    let w = Phases::new(4, 8, 1_000, vec![vec![step(&[0], &[0], 1.0)]]);
    let cfg = PetConfig {
        max_pblock_mb: 3,
        temp_block_mb: 1,
        ..PetConfig::default()
    };
    let (out, _) = run(
        &small_machine(64, 64),
        &sim(),
        Box::new(Pet::new(cfg)),
        Box::new(w),
    );
    assert_eq!(stat(&out, "captured_pblocks"), 16.0);
    assert_eq!(stat(&out, "pblocks"), 16.0);
    assert_eq!(out.summary.policy_metadata_bytes, 16 * 128);
}

#[test]
fn oracle_01_only_anonymous_mmaps_become_pblocks_and_file_pages_stay() {
    // Oracle 1 (§4.1, §5.2.2): a file-backed mapping never becomes a P-block, and
    // PET's anonymous machinery never demotes its pages, idle or not; an idle
    // anonymous mapping beside it is captured and demoted. (The simulator's address
    // spaces have no brk heap or stack: every mapping is an mmap, anonymous or
    // file-backed, so that half of the oracle has nothing to check here.)
    const ANON: u64 = 0x10_0000_0000;
    const FILE: u64 = 0x20_0000_0000;
    const HOT: u64 = 0x30_0000_0000;
    let (idle_pages, hot_pages) = (1024u64, 256u64);
    let mut ops = Vec::new();
    for base in [ANON, FILE] {
        for i in 0..idle_pages {
            ops.push(tierkit_sim::testing::write(base + i * PAGE_SIZE, 1_000));
        }
    }
    // 60 s of policy time (3 s of machine time) on the hot mapping alone.
    let mut x = 1u64;
    for _ in 0..1_500_000u64 {
        x = x
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        let page = (x >> 33) % hot_pages;
        ops.push(tierkit_sim::testing::read(HOT + page * PAGE_SIZE, 2_000));
    }
    let len = |pages: u64| pages * PAGE_SIZE;
    let w = tierkit_sim::testing::Script::new(len(2 * idle_pages + hot_pages)).process_with_kinds(
        &[
            (ANON, len(idle_pages), VmaKind::Anon),
            (FILE, len(idle_pages), VmaKind::File),
            (HOT, len(hot_pages), VmaKind::Anon),
        ],
        ops,
    );
    let (out, m) = run(&small_machine(64, 64), &sim(), pet(), Box::new(w));
    assert_eq!(
        stat(&out, "captured_pblocks"),
        2.0,
        "the two anonymous mmaps"
    );
    let fast = |base: u64| {
        (0..idle_pages)
            .filter(|i| {
                m.page(Pid(0), (base >> PAGE_SHIFT) + i)
                    .is_some_and(|p| p.tier.is_fast())
            })
            .count() as u64
    };
    assert_eq!(
        fast(FILE),
        idle_pages,
        "file pages stay where first touch put them"
    );
    assert!(
        fast(ANON) < idle_pages / 2,
        "the idle anonymous mapping is demoted: {} of {idle_pages} still fast",
        fast(ANON)
    );
}

#[test]
fn oracle_06_a_block_seen_in_any_tick_of_the_window_stays_normal_an_unseen_one_goes_phase1() {
    // Oracle 6 (§4.2): three 2 MiB blocks, written at the start (before the first
    // sample is drawn). Block 0 is hot throughout; block 1 only for the first 3 s of
    // the first 10 s scan window; block 2 never again. At the first scan (10 s) only
    // block 2 goes to PHASE1; block 1, seen in some ticks of that window, stays
    // NORMAL until the second scan (20 s), having been idle through the second
    // window.
    let steps = |extra: bool| {
        let mut v = vec![step(&[0, 1, 2], &[0, 1], 3.0), step(&[], &[0], 7.4)];
        if extra {
            v.push(step(&[], &[0], 10.0));
        }
        Phases::new(2, 3, 2_000, vec![v])
    };
    let (first, _) = run(
        &small_machine(64, 64),
        &sim(),
        pet(),
        Box::new(steps(false)),
    );
    assert_eq!(
        stat(&first, "scans"),
        1.0,
        "the run ends after the first scan"
    );
    assert_eq!(stat(&first, "to_phase1"), 1.0, "block 2 only");
    assert_eq!(stat(&first, "pblocks_normal"), 2.0, "blocks 0 and 1");
    let (second, _) = run(&small_machine(64, 64), &sim(), pet(), Box::new(steps(true)));
    assert_eq!(stat(&second, "scans"), 2.0);
    assert_eq!(
        stat(&second, "to_phase1"),
        2.0,
        "block 1 at the second scan"
    );
    assert!(
        stat(&second, "pblocks_normal") >= 1.0,
        "block 0 stays NORMAL"
    );
}

#[test]
fn a_sampled_machine_sees_a_hot_block_as_hot() {
    // One 256 MiB block, written, then read at random throughout: PET must keep it
    // NORMAL at every scan, sampled or not. A sampled machine simulates one page in
    // 64; PET's sample page was a uniform offset then 64 probes, which found a
    // simulated page in under 2% of the ticks at 1/64, so the hot block looked idle
    // and went PHASE1 (the faithful BFS cell's 117 PHASE1 entries in 64 scans).
    let strata = [
        ("1", tierkit_core::SampleStrata::Address),
        ("1/64", tierkit_core::SampleStrata::Address),
        ("1/64", tierkit_core::SampleStrata::Mapping),
    ];
    for (rate, strata) in strata {
        let sim = SimConfig {
            sample_rate: tierkit_sim::SampleRate::parse(rate).unwrap(),
            sample_strata: strata,
            ..sim()
        };
        let w = Phases::new(256, 1, 100, vec![vec![step(&[0], &[0], 40.0)]]);
        let (out, _) = run(&small_machine(512, 512), &sim, pet(), Box::new(w));
        assert!(stat(&out, "scans") >= 3.0, "{rate} {strata:?}");
        assert_eq!(
            stat(&out, "to_phase1"),
            0.0,
            "{rate} by {strata:?}: the hot block was taken for idle"
        );
    }
}

#[test]
fn oracle_21_a_shorter_scan_interval_saves_more() {
    // Oracle 21 (§5.3), its saving half: six 4 MiB blocks, written at the start;
    // block 0 hot for 40 s, then blocks 1 and 2 for 40 s (coming back from wherever
    // PET put them). With a 5 s scan interval idle blocks are demoted sooner than
    // with 10 s or 20 s: more fast memory saved against first-touch. The slowdown
    // half is not reproduced here: every slowdown is under 0.3% and the 20 s one is
    // the largest (docs/policies/pet.md).
    let m = optane_machine(64, 64);
    let base = run(
        &m,
        &sim(),
        baseline("first-touch"),
        tuning_workload(&[1, 2]),
    )
    .0;
    let go = |scan_ms: u64| {
        let cfg = PetConfig {
            scan_interval_ms: scan_ms,
            ..PetConfig::default()
        };
        let out = run(
            &m,
            &sim(),
            Box::new(Pet::new(cfg)),
            tuning_workload(&[1, 2]),
        )
        .0;
        (saving(&out, &base), slowdown(&out, &base))
    };
    let (short, default, long) = (go(5_000), go(10_000), go(20_000));
    eprintln!("(saving, slowdown) at 5 s {short:?}, 10 s {default:?}, 20 s {long:?}");
    assert!(
        short.0 >= default.0 && default.0 >= long.0 && short.0 > long.0 + 0.05,
        "saving must grow as the interval shortens"
    );
    assert!(
        short.1 < 0.01 && long.1 < 0.01,
        "returning blocks come back fast"
    );
}

/// Six 4 MiB blocks written at the start; block 0 hot for 40 s, then the blocks of
/// `then_hot` for 40 s, the rest idle: the workload of the tuning oracles 21, 23
/// and 24.
fn tuning_workload(then_hot: &[usize]) -> Box<Phases> {
    Box::new(Phases::new(
        4,
        6,
        2_000,
        vec![vec![
            step(&[0, 1, 2, 3, 4, 5], &[0], 40.0),
            step(&[], then_hot, 40.0),
        ]],
    ))
}

#[test]
fn oracle_23_a_higher_canary_ratio_means_more_canary_faults() {
    // Oracle 23 (§5.3): PHASE2 demotes `canary_ratio_pct` of each temporary block
    // and arms it; the blocks that turn hot again fault on their canaries, so more
    // canaries, more faults. 5%, 10% (the default) and 20%.
    let m = optane_machine(64, 64);
    let faults = |pct: f64| {
        let cfg = PetConfig {
            canary_ratio_pct: pct,
            ..PetConfig::default()
        };
        let out = run(
            &m,
            &sim(),
            Box::new(Pet::new(cfg)),
            tuning_workload(&[0, 1, 2]),
        )
        .0;
        stat(&out, "phase2_canary_faults") + stat(&out, "demoted_canary_faults")
    };
    let (few, default, many) = (faults(5.0), faults(10.0), faults(20.0));
    eprintln!("canary faults at 5% {few}, 10% {default}, 20% {many}");
    assert!(few > 0.0, "returning blocks fault on their canaries");
    assert!(
        few <= default && default <= many && many > few,
        "{few} {default} {many}"
    );
}

#[test]
fn oracle_24_the_maximum_pblock_size_has_little_effect() {
    // Oracle 24 (§5.3): capping P-blocks at 2 MiB (each 4 MiB mmap becomes two)
    // instead of 1 GiB changes the saving and the slowdown only a little.
    let m = optane_machine(64, 64);
    let base = run(
        &m,
        &sim(),
        baseline("first-touch"),
        tuning_workload(&[0, 1, 2]),
    )
    .0;
    let go = |max_mb: u64| {
        let cfg = PetConfig {
            max_pblock_mb: max_mb,
            temp_block_mb: 1,
            ..PetConfig::default()
        };
        let out = run(
            &m,
            &sim(),
            Box::new(Pet::new(cfg)),
            tuning_workload(&[0, 1, 2]),
        )
        .0;
        (
            stat(&out, "captured_pblocks"),
            saving(&out, &base),
            slowdown(&out, &base),
        )
    };
    let (small, large) = (go(2), go(1024));
    eprintln!("(P-blocks, saving, slowdown) with 2 MiB {small:?}, 1 GiB {large:?}");
    assert_eq!((small.0, large.0), (12.0, 6.0));
    assert!(large.1 > 0.2, "PET saves memory here");
    assert!(
        (small.1 - large.1).abs() < 0.1,
        "saving {small:?} vs {large:?}"
    );
    assert!(
        (small.2 - large.2).abs() < 0.02,
        "slowdown {small:?} vs {large:?}"
    );
}

#[test]
fn oracle_05_one_page_per_unit_is_checked_and_one_cleared_every_sampling_interval() {
    // Oracle 5: per tick, per NORMAL block, the previous sample's bit is tested and a
    // new page's bit cleared; over ≈ 9.5 s (before the first scan) with 6 blocks
    // that is 6 × (2 × ticks − 1) test-and-clears and nothing else reads a bit.
    let w = Phases::new(
        2,
        6,
        2_000,
        vec![vec![step(&[0, 1, 2, 3, 4, 5], &[0], 9.2)]],
    );
    let (out, _) = run(&small_machine(64, 64), &sim(), pet(), Box::new(w));
    let units = 6.0;
    let ticks = stat(&out, "sampled_units") / units;
    assert!((17.0..=19.0).contains(&ticks), "{ticks} ticks in ≈ 9.5 s");
    assert_eq!(stat(&out, "last_tick_sampled_units"), units);
    assert_eq!(
        out.summary.counters.young_tests as f64,
        units * (2.0 * ticks - 1.0)
    );
    assert_eq!(stat(&out, "scans"), 0.0);
}

#[test]
fn oracle_07_08_phase1_samples_one_page_per_temporary_block() {
    // Oracle 7 and 8: a hot 16 MiB block and a 16 MiB block idle after its first
    // touch, which ends before the first sample is drawn (0.5 s). At the 10 s scan
    // the idle block becomes PHASE1, cut into 4 MiB temporary blocks: every later
    // tick samples 1 + 4 units.
    let w = Phases::new(
        16,
        2,
        5_000,
        vec![vec![step(&[1, 0], &[0], 0.2), step(&[], &[0], 14.0)]],
    );
    let cfg = PetConfig {
        temp_block_mb: 4,
        ..PetConfig::default()
    };
    let (out, _) = run(
        &small_machine(64, 64),
        &sim(),
        Box::new(Pet::new(cfg)),
        Box::new(w),
    );
    assert_eq!(stat(&out, "scans"), 1.0);
    assert_eq!(
        stat(&out, "pblocks_phase1"),
        1.0,
        "the idle block is PHASE1"
    );
    assert_eq!(stat(&out, "last_tick_sampled_units"), 5.0);
    assert_eq!(out.summary.demoted_pages, 0, "nothing moves in PHASE1");
}

// ----- the demotion timeline (oracles 6, 9, 10, 12) -----------------------------------

#[test]
fn oracle_12_a_block_idle_since_t_has_canaries_demoted_20_30_s_and_the_rest_30_40_s_later() {
    // Block 1 (8 MiB) is accessed until t ≈ 13 s (scan window 1), block 0 all along.
    // With 10 s windows: PHASE1 at 30 s, canaries at 40 s (t + 27), the rest at 50 s
    // (t + 37) — with the fast tier three-quarters free all the time (oracle 12).
    let t_last = 13.0;
    let w = Phases::new(
        8,
        2,
        5_000,
        vec![vec![step(&[0, 1], &[0, 1], t_last), step(&[], &[0], 45.0)]],
    );
    let vpn_of = |b| w.block_vpn(b);
    let (v0, v1) = (vpn_of(0), vpn_of(1));
    let (out, m) = run(&small_machine(64, 64), &sim(), pet(), Box::new(w));
    let rows = &out.series.rows;
    let block_pages = 8 * MIB / PAGE_SIZE;
    let first = rows
        .iter()
        .find(|r| r.demoted_pages > 0)
        .expect("something demoted");
    let mut cum = 0;
    let bulk = rows
        .iter()
        .find(|r| {
            cum += r.demoted_pages;
            cum >= block_pages * 9 / 10
        })
        .expect("the block was demoted");
    let (canary_t, bulk_t) = (policy_s(first) - t_last, policy_s(bulk) - t_last);
    eprintln!("canaries demoted {canary_t:.1} s after the last access, the rest {bulk_t:.1} s");
    assert!(
        (20.0..=30.5).contains(&canary_t),
        "canaries at t + {canary_t}"
    );
    assert!((30.0..=40.5).contains(&bulk_t), "bulk at t + {bulk_t}");
    assert_eq!(
        first.demoted_pages,
        block_pages / 10 + 1,
        "only the 10% canaries move at PHASE2 entry (⌈0.1 × 2048⌉ = 205)"
    );
    assert_eq!(stat(&out, "demoted_blocks"), 1.0);
    assert!(out.summary.demoted_pages >= block_pages);
    // The hot block never left the fast tier; the idle one is all in the slow tier.
    let fast_of = |v: Vpn| {
        (0..block_pages)
            .filter(|i| m.page(Pid(0), v + i).is_some_and(|p| p.tier.is_fast()))
            .count() as u64
    };
    assert_eq!(fast_of(v0), block_pages);
    assert_eq!(fast_of(v1), 0);
    // Proactive: the fast tier (64 MiB) was never short of free memory.
    let max_fast = rows.iter().map(|r| r.fast_used_pages).max().unwrap();
    assert!(
        max_fast <= 17 * MIB / PAGE_SIZE,
        "fast use peaked at {max_fast} pages"
    );
}

// ----- promotion (oracles 13–16, 19) -------------------------------------------------

#[test]
fn oracle_13_19_a_demoted_block_that_turns_hot_is_promoted_whole_by_kpromoted() {
    // Block 1 idle from its first touch to 60 s (demoted at 40 s), then hot again.
    let w = Phases::new(
        8,
        2,
        2_000,
        vec![vec![
            step(&[0, 1], &[0], 1.0),
            step(&[], &[0], 59.0),
            step(&[], &[1], 6.0),
        ]],
    );
    let v1 = w.block_vpn(1);
    let (out, m) = run(&small_machine(64, 64), &sim(), pet(), Box::new(w));
    let block_pages = 8 * MIB / PAGE_SIZE;
    let canaries = (block_pages / 10 + 1) as f64;
    assert_eq!(stat(&out, "demoted_blocks"), 1.0);
    assert_eq!(stat(&out, "promoted_blocks"), 1.0);
    assert!(stat(&out, "promoted_pages") >= (block_pages * 9 / 10) as f64);
    // Only canaries fault, each at most once per sampling interval: the alone
    // DEMOTED block needs th_block = th_total = 180 of its 205 in one interval.
    let faults = stat(&out, "demoted_canary_faults");
    assert!(
        (180.0..=2.0 * canaries).contains(&faults),
        "{faults} canary faults"
    );
    // Promoted within one sampling interval (0.5 s) of the first canary fault.
    let rows = &out.series.rows;
    let first_fault = rows.iter().position(|r| r.hint_faults > 0).unwrap();
    let promoted = rows.iter().position(|r| r.promoted_pages > 0).unwrap();
    let lag = policy_s(&rows[promoted]) - policy_s(&rows[first_fault]);
    assert!(
        (0.0..=0.7).contains(&lag),
        "promoted {lag:.1} s after the first fault"
    );
    assert!(policy_s(&rows[first_fault]) >= 60.0);
    let fast = (0..block_pages)
        .filter(|i| m.page(Pid(0), v1 + i).is_some_and(|p| p.tier.is_fast()))
        .count() as u64;
    assert_eq!(fast, block_pages, "the whole block is back");
}

// ----- behaviour against the baselines (oracles 12, 25, 26, 29) -----------------------

/// DRAM + Optane DC PM as the `optane` preset has it (PET's hardware), sized
/// explicitly, LLC off so every access reaches memory.
pub(crate) fn optane_machine(fast_mib: u64, slow_mib: u64) -> tierkit_sim::MachineConfig {
    let mut m = small_machine(fast_mib, slow_mib);
    m.tiers[1] = tierkit_sim::config::TierSpec {
        name: "pmem".into(),
        load_ns: 300.0,
        store_ns: 100.0,
        bandwidth_gbps: 13.0,
        capacity_mib: Some(slow_mib),
    };
    m
}

pub(crate) fn baseline(name: &str) -> Box<dyn Policy> {
    crate::PolicyConfig::default_for(name)
        .expect("registered")
        .build(&BuildContext::default())
}

#[test]
fn oracle_12_29_a_working_set_that_fits_pet_saves_fast_memory_where_linux_tiering_and_tpp_save_none(
) {
    // Oracles 12 and 29 (PET §5.2.2: 30.7% saving without file demotion, 1.40%
    // slowdown). One process, eight 8 MiB objects written at start; then two are hot,
    // one lukewarm (1% of the accesses), five never touched again. Fast tier 128 MiB.
    let mut hot = vec![0; 50];
    hot.extend([1; 49]);
    hot.push(2);
    let w = || {
        Box::new(Phases::new(
            8,
            8,
            3_000,
            vec![vec![step(&[0, 1, 2, 3, 4, 5, 6, 7], &hot, 100.0)]],
        ))
    };
    let m = optane_machine(128, 128);
    let ft = run(&m, &sim(), baseline("first-touch"), w()).0;
    let pet = run(&m, &sim(), pet(), w()).0;
    let lt = run(&m, &sim(), baseline("linux-tiering"), w()).0;
    let tpp = run(&m, &sim(), baseline("tpp"), w()).0;
    for (name, o) in [("pet", &pet), ("linux-tiering", &lt), ("tpp", &tpp)] {
        eprintln!(
            "{name}: fast-memory saving {:.1}%, slowdown {:.2}% vs first-touch, demoted {} promoted {}",
            100.0 * saving(o, &ft),
            100.0 * slowdown(o, &ft),
            o.summary.demoted_pages,
            o.summary.promoted_pages
        );
    }
    assert!(
        saving(&pet, &ft) > 0.30,
        "PET saves {:.3}",
        saving(&pet, &ft)
    );
    assert!(
        slowdown(&pet, &ft) < 0.02,
        "PET slows by {:.4}",
        slowdown(&pet, &ft)
    );
    for o in [&lt, &tpp] {
        assert_eq!(
            o.summary.demoted_pages, 0,
            "{}: nothing to demote",
            o.summary.policy
        );
        assert!(saving(o, &ft).abs() < 0.01);
    }
    // The two hot objects stayed NORMAL in the fast tier: the fast tier still holds
    // more than them at the end, and far less than everything.
    let end = pet.series.rows.last().unwrap().fast_used_pages;
    let block = 8 * MIB / PAGE_SIZE;
    assert!(
        end >= 2 * block && end < 4 * block,
        "fast use at the end: {end} pages"
    );
}

/// `hot-shift` (PET §5.2.3) shrunk: 2 threads, 6 positions of 4 MiB each, 2 cycles,
/// 45 s of policy time per position (2.25 s of machine time at 20 µs per access).
fn hot_shift() -> (Box<dyn Workload>, u64) {
    let cfg = tierkit_workloads::HotShiftConfig {
        footprint_mib: 48,
        nr_positions: 6,
        nr_cycles: 2,
        interval_accesses: 112_500,
        gap_ns: 20_000,
        nr_threads: 2,
        ..Default::default()
    };
    let w = tierkit_workloads::HotShift::new(&cfg, 1);
    let per_interval = w.interval_accesses() * 2;
    (Box::new(w), per_interval)
}

/// For each interval after the first cycle: policy seconds from its start until a row
/// reaches 95% of the run's best fast-access ratio (PET §5.2.3's reaction time).
fn reaction_times(out: &RunOutput, per_interval: u64, from: u64, to: u64) -> Vec<f64> {
    let rows = &out.series.rows;
    let best = rows
        .iter()
        .filter(|r| r.mem_accesses > 100)
        .map(|r| r.fast_access_ratio)
        .fold(0.0, f64::max);
    let mut cum = 0;
    let starts: Vec<(usize, u64)> = rows
        .iter()
        .enumerate()
        .map(|(i, r)| {
            cum += r.accesses;
            (i, cum)
        })
        .collect();
    (from..to)
        .map(|k| {
            let start = starts
                .iter()
                .find(|(_, c)| *c >= k * per_interval)
                .map(|(i, _)| *i)
                .unwrap();
            let t0 = policy_s(&rows[start]);
            rows[start + 1..]
                .iter()
                .find(|r| r.mem_accesses > 100 && r.fast_access_ratio >= 0.95 * best)
                .map_or(f64::INFINITY, |r| policy_s(r) - t0)
        })
        .collect()
}

#[test]
fn oracle_25_hot_set_shift_pet_promotes_each_returning_hot_set_within_a_few_intervals() {
    // Oracle 25. In the second cycle every hot set comes back to a region PET demoted
    // during the first; canary faults over th_block hand it to kpromoted at once.
    // Fast tier 24 MiB: three hot sets' worth (PET's 64 GB against 8 × 1 GB).
    let m = optane_machine(24, 64);
    let (w, per_interval) = hot_shift();
    let pet_out = run(&m, &sim(), pet(), w).0;
    let (w, _) = hot_shift();
    let pd = run(&m, &sim(), baseline("mglru-pd"), w).0;
    let (w, _) = hot_shift();
    let lt = run(&m, &sim(), baseline("linux-tiering"), w).0;
    let mut reactions = Vec::new();
    for o in [&pet_out, &pd, &lt] {
        let r = reaction_times(o, per_interval, 6, 12);
        eprintln!(
            "{}: reaction times in cycle 2 (s) {:?}, fast-access ratio {:.3}, runtime {:.2} s, accessed-bit tests {}",
            o.summary.policy,
            r.iter().map(|x| (x * 10.0).round() / 10.0).collect::<Vec<_>>(),
            o.summary.fast_access_ratio,
            o.summary.sim_seconds,
            o.summary.counters.young_tests
        );
        reactions.push(r);
    }
    // PET: every returning hot set is back within 2 s (paper: 13 s on 1 GB sets).
    assert!(
        reactions[0].iter().all(|&r| r <= 2.0),
        "PET reaction times {:?}",
        reactions[0]
    );
    assert!(stat(&pet_out, "promoted_blocks") >= 10.0);
    // PET tracks with a small fraction of Base+PD's accessed-bit tests (paper: 0.87%).
    let share =
        pet_out.summary.counters.young_tests as f64 / pd.summary.counters.young_tests as f64;
    eprintln!("PET tests {:.2}% of Base+PD's accessed bits", 100.0 * share);
    assert!(share < 0.10, "PET/Base+PD accessed-bit tests: {share:.3}");
}

#[test]
fn oracle_26_27_oversubscribed_mix_pet_slows_down_less_than_linux_tiering() {
    // Oracles 26 and 27 (PET §5.2.1: aggregate working set 1.5× the fast tier,
    // multi-programmed). Two processes write four 8 MiB objects each (64 MiB, the
    // whole fast tier) and then use one; a third joins at 60 s, writes its four and
    // uses all of them. 96 MiB in all, 48 MiB hot at the end.
    let w = || {
        let early = vec![step(&[0, 1, 2, 3], &[3], 100.0)];
        let late = vec![
            step(&[], &[], 60.0),
            step(&[0, 1, 2, 3], &[0, 1, 2, 3], 60.0),
        ];
        Box::new(Phases::new(8, 4, 5_000, vec![early.clone(), early, late]))
    };
    let m = optane_machine(64, 128);
    let fast = run(&m, &sim(), baseline("all-fast"), w()).0;
    let ft = run(&m, &sim(), baseline("first-touch"), w()).0;
    let pet_out = run(&m, &sim(), pet(), w()).0;
    let lt = run(&m, &sim(), baseline("linux-tiering"), w()).0;
    for o in [&ft, &pet_out, &lt] {
        eprintln!(
            "{}: runtime {:.3} s (slowdown {:.2}% vs all-fast), fast-access ratio {:.3}, mean fast use {:.1} MiB, promoted {} demoted {}",
            o.summary.policy,
            o.summary.sim_seconds,
            100.0 * slowdown(o, &fast),
            o.summary.fast_access_ratio,
            o.summary.fast_mean_used_pages * PAGE_SIZE as f64 / MIB as f64,
            o.summary.promoted_pages,
            o.summary.demoted_pages
        );
    }
    assert!(
        pet_out.summary.sim_seconds < lt.summary.sim_seconds,
        "PET {:.4} s vs linux-tiering {:.4} s",
        pet_out.summary.sim_seconds,
        lt.summary.sim_seconds
    );
    assert!(lt.summary.sim_seconds <= ft.summary.sim_seconds);
    assert!(pet_out.summary.fast_mean_used_pages < lt.summary.fast_mean_used_pages);
    assert!(pet_out.summary.fast_access_ratio > 0.95);
}

/// The temporary-block experiment's workload: three 16 MiB objects written, then
/// two of them hot on 64 of their pages each, at their start or `spread` evenly.
fn temporary_block_work(spread: bool) -> Box<Phases> {
    let mut hot_part = step(&[], &[0, 1], 60.0);
    hot_part.hot_pages = Some(64);
    hot_part.hot_spread = spread;
    Box::new(Phases::new(
        16,
        3,
        2_000,
        vec![vec![step(&[0, 1, 2], &[0, 1], 20.0), hot_part]],
    ))
}

/// Spec §7 oracle 22 (§5.3.3, Fig. 19: a larger temporary block saves more fast
/// memory, and 256 MB costs performance) is not reproduced; this sweep generates the
/// page's table that shows it (`docs/policies/pet.md`, "Temporary block size"). Three
/// 16 MiB objects written at the start, then two of them hot for 60 s on 64 of their
/// pages, at their start or spread evenly over them; temporary blocks of 1 to 16 MiB
/// (the paper's 8 to 128 MB for its objects of gigabytes, scaled to the objects here).
#[test]
fn temporary_block_size_sweep_table() {
    let m = optane_machine(64, 64);
    let mut table = String::from(
        "| hot pages | temporary block | fast memory saved | slowdown | demoted / promoted pages |\n|---|---|---|---|---|\n",
    );
    for spread in [false, true] {
        let work = || temporary_block_work(spread);
        let base = run(&m, &sim(), baseline("first-touch"), work()).0;
        for temp in [1, 2, 4, 8, 16] {
            let cfg = PetConfig {
                temp_block_mb: temp,
                ..PetConfig::default()
            };
            let out = run(&m, &sim(), Box::new(Pet::new(cfg)), work()).0;
            table.push_str(&format!(
                "| {} | {temp} MiB | {:.1}% | {:.2}% | {} / {} |\n",
                if spread {
                    "64, spread"
                } else {
                    "64, at the start"
                },
                100.0 * saving(&out, &base),
                100.0 * slowdown(&out, &base),
                out.summary.demoted_pages,
                out.summary.promoted_pages
            ));
        }
    }
    tierkit_core::doc_tables::check_generated(
        "policies/pet.md",
        "pet-temp-block",
        &table,
        "temporary_block_size_sweep_table",
    );
}

/// Spec §7 oracle 22 (§5.3.3): a larger temporary block saves more fast memory.
/// The sweep's setup with the hot pages at the start of their objects: checked that
/// 16 MiB temporary blocks save more than 1 MiB ones. Not reproduced (the sweep
/// table: 22.7% against 37.1%, docs/policies/pet.md): a block is judged by one
/// sampled page per tick and by its canaries, so small blocks isolate the idle parts
/// of an object and demote them, while a block as large as the object keeps it
/// whole.
#[test]
#[ignore = "not reproduced (docs/policies/pet.md, oracle 22): smaller temporary blocks save more"]
fn oracle_22_a_larger_temporary_block_saves_more() {
    let m = optane_machine(64, 64);
    let work = || temporary_block_work(false);
    let base = run(&m, &sim(), baseline("first-touch"), work()).0;
    let saved = |temp_block_mb| {
        let cfg = PetConfig {
            temp_block_mb,
            ..PetConfig::default()
        };
        saving(&run(&m, &sim(), Box::new(Pet::new(cfg)), work()).0, &base)
    };
    let (small, large) = (saved(1), saved(16));
    assert!(
        large > small,
        "16 MiB temporary blocks save {:.1}%, 1 MiB ones {:.1}%",
        100.0 * large,
        100.0 * small
    );
}

/// Spec §7 oracle 28 (§5.2.4, the no-locality adversary), its PD half: one 48 MiB
/// heap (a JVM's) whose hot pages, 1 in 64, are spread evenly over it, on a 32 MiB
/// fast tier. PET finds almost nothing cold at P-block or temporary-block grain and
/// demotes conservatively (measured: 1 614 pages, under a tenth of Base+PD's
/// 20 271); Base+PD (`mglru-pd`), page-grained, finds the cold pages and makes room
/// for the hot ones, and runs faster than PET (the paper: by 7%; here by 14%, the hot
/// pages being sparser). The DAMON half (PET far fewer false demotions than DAMON)
/// is not checked: tierkit's `damon-tiering` is upstream's watermark-driven `mtier`
/// scheme, which demotes nothing here, not the proactive region demotion the paper
/// ran (docs/policies/pet.md).
#[test]
fn oracle_28_no_locality_pet_is_conservative_and_loses_to_page_grained_pd() {
    let m = optane_machine(32, 64);
    let work = || {
        let mut hot = step(&[], &[0], 90.0);
        hot.hot_pages = Some(192);
        hot.hot_spread = true;
        Box::new(Phases::new(
            48,
            1,
            300,
            vec![vec![step(&[0], &[0], 5.0), hot]],
        ))
    };
    let pet = run(&m, &sim(), baseline("pet"), work()).0;
    let pd = run(&m, &sim(), baseline("mglru-pd"), work()).0;
    let (p, d) = (&pet.summary, &pd.summary);
    assert!(p.demoted_pages > 0, "PET demoted nothing");
    assert!(
        p.demoted_pages * 10 < d.demoted_pages,
        "PET demoted {} pages, Base+PD {}",
        p.demoted_pages,
        d.demoted_pages
    );
    assert!(
        d.sim_seconds < 0.95 * p.sim_seconds,
        "Base+PD {} s, PET {} s",
        d.sim_seconds,
        p.sim_seconds
    );
}
