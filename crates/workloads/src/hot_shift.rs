//! `hot-shift`: PET's shifting hot-set microbenchmark (PET §5.2.3, Fig. 14; spec §4.3
//! and test oracle 25).
//!
//! In PET's run, 8 threads each access their own 1 GB hot set at random for one
//! minute; then every hot set moves to a fresh region; after 15 such intervals
//! (120 GB touched in all) the hot sets return to their initial regions and the whole
//! cycle runs once more. Data demoted while a region was cold must be found and
//! promoted again when the hot set comes back: the benchmark measures how fast a
//! policy reacts (PET: within ≈ 13 s of a move; a lazy policy never recovers).
//!
//! Here each thread `t` has `nr_positions` regions (default 15), each its own
//! anonymous mapping of `footprint_mib / (nr_threads × nr_positions)` (4096 MiB /
//! 120 ≈ 34 MiB at the defaults, for PET's 1 GB), as if every hot set were its own
//! allocation; all are mapped at start-up. Thread `t` runs `nr_cycles` (2) cycles of
//! `nr_positions` intervals; in interval `k` of a cycle it makes
//! `interval_accesses` accesses to uniformly random cache lines of its region `k`,
//! reads with probability `read_ratio`, each after `gap_ns` of compute.
//!
//! There is no initialisation phase: a region is first touched when its interval
//! begins, so fresh memory is allocated as the hot set moves — what makes the fast
//! tier run out during the first cycle in PET's Fig. 14. (Whether PET's benchmark
//! pre-touched its 120 GB is not stated; a pre-touch would have filled DRAM before
//! the first interval.)
//!
//! **Interval length.** An interval is a number of accesses; its simulated duration
//! is `interval_accesses × (gap_ns + t_mem / mlp)`, where `t_mem` is the mean memory
//! access time (80 ns in the fast tier, 170–300 ns in the slow tier of the machine
//! presets). At the defaults (500,000 accesses, `gap_ns` 0, `mlp` 4) an interval lasts
//! about 10–50 ms of simulated time (≈ 45 ms measured on the `optane` preset at 1:3),
//! against PET's 60 s. Two ways to compare with the
//! paper: scale the policies' time constants down by the same factor (the run's
//! explicit time-scale knob), or set `gap_ns` so that
//! `interval_accesses × gap_ns` ≈ 60 s of compute per interval
//! (`gap_ns` = 120,000 at the defaults) — which keeps PET's timing but makes the
//! workload compute-bound, so placement barely changes its speed.

use rand::distributions::{Bernoulli, Distribution};
use rand_xoshiro::Xoshiro256PlusPlus;
use serde::{Deserialize, Serialize};
use tierkit_core::{
    ComputeCarry, ConfigError, Op, ProcessShape, VmaKind, Workload, WorkloadShape, CACHE_LINE,
    PAGE_SIZE,
};

use crate::common::{self, below};
use crate::kept::{gap_after, skip_to_kept, KeptElements};
use crate::layout::{Layout, Mapping};
use crate::{thread_rng, BATCH_OPS};

const NAME: &str = "hot-shift";

/// Configuration of [`HotShift`].
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct HotShiftConfig {
    /// All regions of all threads together, in MiB before `scale`. Default 4096
    /// (PET: 120 GB). Each region is `footprint_mib / (nr_threads × nr_positions)`,
    /// rounded up to whole pages.
    pub footprint_mib: u64,
    /// Regions per thread, i.e. intervals per cycle, in [1, 1000]. Default 15 (PET:
    /// the hot set moves every minute for 15 minutes).
    pub nr_positions: u32,
    /// Cycles through all positions, in [1, 1000]. Default 2 (PET: the hot sets
    /// return to their initial regions and the cycle runs once more).
    pub nr_cycles: u32,
    /// Accesses of each thread per interval, before `scale`. Default 500,000
    /// (120 M accesses in all at 8 threads × 15 × 2). See the module docs for how it
    /// maps to seconds.
    pub interval_accesses: u64,
    /// Fraction of accesses that are reads, in [0, 1]. Default 1.0 (PET says only
    /// "randomly accessing").
    pub read_ratio: f64,
    /// Compute time before each access, in ns. Default 0 (a memory-bound loop).
    pub gap_ns: u32,
    /// Multiplies `footprint_mib` and `interval_accesses` together. Default 1.0.
    pub scale: f64,
    /// Number of threads, each with its own hot set. Default 8 (PET).
    pub nr_threads: u32,
    /// Memory-level parallelism. Default 4.0: independent random accesses, as GUPS.
    pub mlp: f64,
}

impl Default for HotShiftConfig {
    fn default() -> Self {
        HotShiftConfig {
            footprint_mib: 4096,
            nr_positions: 15,
            nr_cycles: 2,
            interval_accesses: 500_000,
            read_ratio: 1.0,
            gap_ns: 0,
            scale: 1.0,
            nr_threads: 8,
            mlp: 4.0,
        }
    }
}

impl HotShiftConfig {
    /// Check every field; the error names the field and its valid range.
    pub fn validate(&self) -> Result<(), ConfigError> {
        common::check_positive(NAME, "footprint_mib", self.footprint_mib)?;
        if !(1..=1000).contains(&self.nr_positions) {
            return Err(format!(
                "{NAME}.nr_positions must be in [1, 1000], got {}",
                self.nr_positions
            )
            .into());
        }
        if !(1..=1000).contains(&self.nr_cycles) {
            return Err(format!(
                "{NAME}.nr_cycles must be in [1, 1000], got {}",
                self.nr_cycles
            )
            .into());
        }
        common::check_unit(NAME, "read_ratio", self.read_ratio)?;
        common::check_common(NAME, self.scale, self.nr_threads, self.mlp)?;
        common::check_footprint(
            NAME,
            "footprint_mib",
            self.footprint_mib as f64 * self.scale * (1u64 << 20) as f64,
        )
    }
}

/// Per-thread progress.
#[derive(Debug, Clone)]
struct ThreadState {
    rng: Xoshiro256PlusPlus,
    /// Current interval (over all cycles), and accesses left in it.
    interval: u64,
    left_in_interval: u64,
    /// Compute of the accesses a restricted stream dropped, for the next kept one.
    carry: ComputeCarry,
}

/// The shifting hot-set generator (see the module docs).
#[derive(Debug, Clone)]
pub struct HotShift {
    /// `regions[thread][position]`.
    regions: Vec<Vec<Mapping>>,
    lines_per_region: u64,
    nr_positions: u64,
    nr_intervals: u64,
    interval_accesses: u64,
    read: Bernoulli,
    gap_ns: u32,
    nr_threads: u32,
    mlp: f64,
    threads: Vec<ThreadState>,
    /// Set by [`Workload::restrict_to`]: per thread and position, the region's kept
    /// cache lines, to draw only the sampled accesses.
    restricted: Option<Vec<Vec<KeptLines>>>,
    /// The sampler carries the dropped accesses' compute to the kept ones.
    carried: bool,
}

/// The kept cache lines of one region, and the chance that a uniform draw over the
/// region lands on one.
#[derive(Debug, Clone)]
struct KeptLines {
    lines: KeptElements,
    q: f64,
}

impl HotShift {
    /// Build the generator for `cfg` with `seed`.
    ///
    /// # Panics
    /// If `cfg` does not pass [`HotShiftConfig::validate`].
    pub fn new(cfg: &HotShiftConfig, seed: u64) -> Self {
        if let Err(e) = cfg.validate() {
            panic!("invalid hot-shift config: {e}");
        }
        let total = common::scaled_bytes_from_mib(cfg.footprint_mib, cfg.scale);
        let nr_regions = u64::from(cfg.nr_threads) * u64::from(cfg.nr_positions);
        let region_bytes = total.div_ceil(nr_regions).div_ceil(PAGE_SIZE) * PAGE_SIZE;
        let mut layout = Layout::new();
        let regions: Vec<Vec<Mapping>> = (0..cfg.nr_threads)
            .map(|_| {
                (0..cfg.nr_positions)
                    .map(|_| layout.map(region_bytes, VmaKind::Anon))
                    .collect()
            })
            .collect();
        let interval_accesses = common::scaled(cfg.interval_accesses, cfg.scale);
        let threads = (0..cfg.nr_threads as usize)
            .map(|t| ThreadState {
                rng: thread_rng(seed, 0, t),
                interval: 0,
                left_in_interval: interval_accesses,
                carry: ComputeCarry::default(),
            })
            .collect();
        HotShift {
            regions,
            lines_per_region: region_bytes / CACHE_LINE,
            nr_positions: u64::from(cfg.nr_positions),
            nr_intervals: u64::from(cfg.nr_positions) * u64::from(cfg.nr_cycles),
            interval_accesses,
            read: Bernoulli::new(cfg.read_ratio).expect("validated probability"),
            gap_ns: cfg.gap_ns,
            nr_threads: cfg.nr_threads,
            mlp: cfg.mlp,
            threads,
            restricted: None,
            carried: false,
        }
    }

    /// Region `position` of thread `thread`.
    pub fn region(&self, thread: usize, position: usize) -> Mapping {
        self.regions[thread][position]
    }

    /// The region thread `thread` accesses during interval `interval` (counted over
    /// all cycles): position `interval mod nr_positions`.
    pub fn hot_region(&self, thread: usize, interval: u64) -> Mapping {
        self.regions[thread][(interval % self.nr_positions) as usize]
    }

    /// Accesses per thread per interval (after `scale`).
    pub fn interval_accesses(&self) -> u64 {
        self.interval_accesses
    }

    /// Intervals per thread over the whole run.
    pub fn nr_intervals(&self) -> u64 {
        self.nr_intervals
    }
}

impl Workload for HotShift {
    fn shape(&self) -> WorkloadShape {
        WorkloadShape {
            processes: vec![ProcessShape {
                name: NAME.to_string(),
                nr_threads: self.nr_threads,
                mlp: self.mlp,
            }],
            footprint_bytes: self.regions.iter().flatten().map(|m| m.len).sum(),
        }
    }

    fn prologue(&mut self, process: usize, out: &mut Vec<Op>) {
        if process == 0 {
            out.extend(self.regions.iter().flatten().map(|m| m.mmap_op()));
        }
    }

    fn fill(&mut self, process: usize, thread: usize, out: &mut Vec<Op>) {
        if process != 0 || thread >= self.threads.len() {
            return;
        }
        if self.restricted.is_some() {
            return self.fill_restricted(thread, out);
        }
        out.reserve(BATCH_OPS);
        let t = &mut self.threads[thread];
        while out.len() < BATCH_OPS && t.interval < self.nr_intervals {
            if t.left_in_interval == 0 {
                // The hot set moves on (and after the last position, back to the first).
                t.interval += 1;
                t.left_in_interval = self.interval_accesses;
                continue;
            }
            let base = self.regions[thread][(t.interval % self.nr_positions) as usize].addr;
            let n = t.left_in_interval.min((BATCH_OPS - out.len()) as u64);
            for _ in 0..n {
                out.push(Op::Access {
                    addr: base + below(&mut t.rng, self.lines_per_region) * CACHE_LINE,
                    write: !self.read.sample(&mut t.rng),
                    gap_ns: self.gap_ns,
                });
            }
            t.left_in_interval -= n;
        }
    }

    fn restrict_to(&mut self, sampler: &tierkit_core::RegionSampler) -> bool {
        let kept = self
            .regions
            .iter()
            .map(|positions| {
                positions
                    .iter()
                    .map(|&m| {
                        let lines = KeptElements::new(sampler, 0, m, CACHE_LINE);
                        let q = lines.len() as f64 / self.lines_per_region as f64;
                        KeptLines { lines, q }
                    })
                    .collect()
            })
            .collect();
        self.restricted = Some(kept);
        self.carried = sampler.carries_compute();
        true
    }

    fn expected_accesses(&self) -> Option<u64> {
        if self.restricted.is_some() {
            return None;
        }
        Some(u64::from(self.nr_threads) * self.nr_intervals * self.interval_accesses)
    }
}

impl HotShift {
    /// [`Workload::fill`] of a restricted hot-shift: the full stream's law with the
    /// unsampled accesses left out. Within an interval, a geometric skip jumps over
    /// the draws that land on dropped lines (they still count towards the interval's
    /// accesses), then a kept line of the region is drawn uniformly.
    fn fill_restricted(&mut self, thread: usize, out: &mut Vec<Op>) {
        let kept = &self.restricted.as_ref().expect("restricted")[thread];
        let t = &mut self.threads[thread];
        out.reserve(BATCH_OPS);
        while out.len() < BATCH_OPS && t.interval < self.nr_intervals {
            if t.left_in_interval == 0 {
                t.interval += 1;
                t.left_in_interval = self.interval_accesses;
                continue;
            }
            let position = (t.interval % self.nr_positions) as usize;
            let region = &kept[position];
            let skip = skip_to_kept(&mut t.rng, region.q);
            if skip > t.left_in_interval {
                // The interval's remaining accesses are all dropped.
                if self.carried {
                    t.carry
                        .drop_ns(t.left_in_interval.saturating_mul(self.gap_ns as u64));
                }
                t.left_in_interval = 0;
                continue;
            }
            t.left_in_interval -= skip;
            let line = region.lines.nth(below(&mut t.rng, region.lines.len()));
            out.push(Op::Access {
                addr: self.regions[thread][position].addr + line * CACHE_LINE,
                write: !self.read.sample(&mut t.rng),
                gap_ns: gap_after(&mut t.carry, self.carried, skip - 1, self.gap_ns),
            });
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testutil::{accesses, check_structure, drain};
    use proptest::prelude::*;
    use tierkit_core::MIB;

    fn small(nr_threads: u32, interval_accesses: u64) -> HotShiftConfig {
        HotShiftConfig {
            footprint_mib: 30 * u64::from(nr_threads),
            nr_positions: 15,
            interval_accesses,
            nr_threads,
            ..HotShiftConfig::default()
        }
    }

    #[test]
    fn restricted_generation_keeps_the_filtered_law() {
        use tierkit_core::{RegionSampler, SampleStrata, SpaceScale};
        // Regions of 8 MiB (4 huge regions): at 1/4 by address a region keeps 0-2 of
        // them; by mapping exactly one, and a partial tail page by page.
        let cfg = HotShiftConfig {
            footprint_mib: 2 * 15 * 8 + 2,
            read_ratio: 0.7,
            gap_ns: 200,
            ..small(2, 40_000)
        };
        for strata in [SampleStrata::Address, SampleStrata::Mapping] {
            let sampler = RegionSampler::new(SpaceScale::new(1.0 / 4.0), 3).with_strata(strata);
            crate::testutil::check_restricted(&|| Box::new(HotShift::new(&cfg, 9)), &sampler, 0.02);
        }
    }

    #[test]
    fn same_seed_same_stream_different_seed_different_stream() {
        let cfg = small(2, 3_000);
        let a = drain(&mut HotShift::new(&cfg, 7));
        let b = drain(&mut HotShift::new(&cfg, 7));
        let c = drain(&mut HotShift::new(&cfg, 8));
        assert_eq!(a.streams, b.streams);
        assert_ne!(a.streams, c.streams);
    }

    #[test]
    fn footprint_mappings_and_access_count() {
        let mut w = HotShift::new(&small(3, 2_000), 1);
        let d = drain(&mut w);
        assert_eq!(d.mappings.len(), 45);
        assert_eq!(d.shape.footprint_bytes, 90 * MIB);
        assert_eq!(w.region(0, 0).len, 2 * MIB);
        check_structure(&w, &d);
    }

    #[test]
    fn hot_set_moves_every_interval_and_returns_in_the_second_cycle() {
        let cfg = small(2, 5_000);
        let mut w = HotShift::new(&cfg, 2);
        let d = drain(&mut w);
        for t in 0..2 {
            let acc: Vec<_> = accesses(&d.streams[0][t]).collect();
            assert_eq!(acc.len() as u64, 30 * 5_000);
            for (k, chunk) in acc.chunks(5_000).enumerate() {
                let region = w.hot_region(t, k as u64);
                assert_eq!(region, w.region(t, k % 15));
                // Every access of interval k is in its region…
                assert!(
                    chunk.iter().all(|a| region.contains(a.0)),
                    "t{t} interval {k}"
                );
                // …and spread over it, not stuck in a corner.
                let lo = chunk.iter().map(|a| a.0).min().unwrap();
                let hi = chunk.iter().map(|a| a.0).max().unwrap();
                assert!(lo < region.addr + region.len / 10 && hi > region.end() - region.len / 10);
            }
            // Cycle 2 revisits cycle 1's regions in the same order; the regions of
            // one cycle are all different.
            let regions: Vec<_> = (0..30).map(|k| w.hot_region(t, k)).collect();
            assert_eq!(regions[..15], regions[15..]);
            let mut distinct = regions[..15].to_vec();
            distinct.sort_by_key(|m| m.addr);
            distinct.dedup();
            assert_eq!(distinct.len(), 15);
        }
        // Threads have disjoint hot sets.
        assert!((0..15).all(|p| (0..15).all(|q| w.region(0, p) != w.region(1, q))));
    }

    #[test]
    fn reads_writes_and_gap() {
        let mut cfg = small(1, 100_000);
        cfg.nr_positions = 1;
        cfg.nr_cycles = 1;
        cfg.read_ratio = 0.7;
        cfg.gap_ns = 25;
        let mut w = HotShift::new(&cfg, 3);
        let d = drain(&mut w);
        let acc: Vec<_> = accesses(&d.streams[0][0]).collect();
        let reads = acc.iter().filter(|a| !a.1).count() as f64 / acc.len() as f64;
        assert!((reads - 0.7).abs() < 0.01, "{reads}");
        assert!(acc.iter().all(|a| a.2 == 25 && a.0 % 64 == 0));
    }

    #[test]
    fn validate_names_the_bad_field() {
        let bad = |f: &dyn Fn(&mut HotShiftConfig), field: &str| {
            let mut c = HotShiftConfig::default();
            f(&mut c);
            let e = c.validate().unwrap_err();
            assert!(e.to_string().contains(field), "{e:?} should name {field}");
        };
        bad(&|c| c.footprint_mib = 0, "footprint_mib");
        bad(&|c| c.nr_positions = 0, "nr_positions");
        bad(&|c| c.nr_cycles = 0, "nr_cycles");
        bad(&|c| c.read_ratio = -0.5, "read_ratio");
        bad(&|c| c.scale = 0.0, "scale");
        bad(&|c| c.nr_threads = 0, "nr_threads");
        bad(&|c| c.mlp = 65.0, "mlp");
        bad(&|c| c.footprint_mib = 1 << 40, "footprint_mib");
        HotShiftConfig::default().validate().unwrap();
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(24))]
        #[test]
        fn any_valid_config_stays_inside_its_mappings(
            footprint_mib in 1u64..40,
            nr_positions in 1u32..20,
            nr_cycles in 1u32..4,
            interval_accesses in 0u64..3000,
            nr_threads in 1u32..5,
            scale in 0.05f64..2.0,
        ) {
            let cfg = HotShiftConfig {
                footprint_mib, nr_positions, nr_cycles, interval_accesses, nr_threads, scale,
                ..HotShiftConfig::default()
            };
            prop_assert!(cfg.validate().is_ok());
            let mut w = HotShift::new(&cfg, 5);
            let d = drain(&mut w);
            check_structure(&w, &d);
        }
    }
}
