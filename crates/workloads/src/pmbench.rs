//! `pmbench`: a pmbench-like page-popularity benchmark.
//!
//! pmbench (Yang & Seymour) maps one region, touches it, and then times accesses whose
//! page is drawn from a chosen distribution. tierkit reproduces its access pattern,
//! not its timing loop:
//!
//! - **`normal_ih`** (default): the page index is drawn from a Gaussian centred on the
//!   middle of the region with standard deviation `stddev_fraction × pages`. The
//!   default 0.125 puts ~68% of accesses on the central quarter of the region and
//!   ~95% on its central half, a smooth hot-to-cold gradient with no sharp boundary —
//!   the case where the *ranking* quality of a policy matters. Draws that fall outside
//!   the region are folded back in by reflection at its edges (rare at the default:
//!   the edges are 4 standard deviations away), so the density stays continuous.
//! - **`uniform`**: every page equally likely (no locality; a baseline).
//!
//! Within the chosen page, the byte offset advances by `stride_bytes` per access of
//! the thread, wrapping at the page end, so successive accesses walk through a page's
//! lines instead of always hitting line 0.
//!
//! Two options model how Chrono (EuroSys'25 §5.1.1) ran pmbench: 50 tasks with 5 GB
//! private working sets, `stride` 2, so that "each 2 MB huge page has only half of its
//! 4 KB regions accessed":
//!
//! - **`page_stride`** (default 1): the measured accesses land only on every
//!   `page_stride`-th page; the distribution is drawn over those pages (its *slots*)
//!   as it would be over all pages. Init still writes every page.
//! - **`private_maps`** (default false): each thread draws only within its own share
//!   of the region, the one it initialises, as a pmbench task does in its private map;
//!   by default all threads share the one region and sample all of it.
//!
//! Stream of each thread:
//! 1. **init**: one write per 4 KiB page of the thread's contiguous share of the
//!    region, in address order, no gap (pmbench touches its map before measuring);
//! 2. **accesses**: its share of `nr_accesses`, each a read with probability
//!    `read_ratio` (else a write), after `delay_ns` of compute. pmbench's `-d`
//!    delay counts busy-loop iterations; here it is given directly in simulated ns.

use rand::distributions::{Bernoulli, Distribution};
use rand_distr::StandardNormal;
use rand_xoshiro::Xoshiro256PlusPlus;
use serde::{Deserialize, Serialize};
use tierkit_core::{
    ComputeCarry, ConfigError, Op, ProcessShape, RegionSampler, VmaKind, Workload, WorkloadShape,
    PAGE_SIZE,
};

use crate::common::{self, below};
use crate::kept::{gap_after, push_kept_page_writes, skip_to_kept, AliasTable, KeptElements};
use crate::layout::{Layout, Mapping};
use crate::{thread_rng, BATCH_OPS};

const NAME: &str = "pmbench";

/// How pmbench picks the page of each access.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum PmbenchPattern {
    /// Every page equally likely.
    Uniform,
    /// Gaussian around the middle of the region, reflected at the edges.
    NormalIh,
}

/// Configuration of [`Pmbench`].
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct PmbenchConfig {
    /// Size of the region in MiB before `scale`. Default 4096 (4 GiB).
    pub footprint_mib: u64,
    /// Number of measured accesses before `scale`, split evenly over the threads.
    /// Default 120 M (plus the 1 M init writes).
    pub nr_accesses: u64,
    /// Page distribution. Default `normal_ih`.
    pub pattern: PmbenchPattern,
    /// Standard deviation of the `normal_ih` pattern as a fraction of the region's
    /// pages, in (0, 1]. Default 0.125 (see the module docs). Ignored by `uniform`.
    pub stddev_fraction: f64,
    /// Advance of the in-page offset per access, in bytes, in [1, 4096]. Default 64
    /// (the next cache line each time).
    pub stride_bytes: u64,
    /// Fraction of accesses that are reads, in [0, 1]. Default 0.5 (pmbench -r 50).
    pub read_ratio: f64,
    /// Compute time before each measured access, in ns. Default 0.
    pub delay_ns: u32,
    /// Multiplies `footprint_mib` and `nr_accesses` together. Default 1.0.
    pub scale: f64,
    /// Number of threads. Default 1.
    pub nr_threads: u32,
    /// Measured accesses land only on every `page_stride`-th page of a thread's
    /// range, in [1, 512]. Default 1 (every page). Chrono's pmbench runs use 2.
    pub page_stride: u64,
    /// Each thread draws only within its own share of the region (pmbench tasks
    /// with private maps) instead of over all of it. Default false.
    pub private_maps: bool,
    /// Memory-level parallelism. Default 1.0: pmbench times every access
    /// individually (a serialising timestamp read around each), so its misses never
    /// overlap.
    pub mlp: f64,
}

impl Default for PmbenchConfig {
    fn default() -> Self {
        PmbenchConfig {
            footprint_mib: 4096,
            nr_accesses: 120_000_000,
            pattern: PmbenchPattern::NormalIh,
            stddev_fraction: 0.125,
            stride_bytes: 64,
            read_ratio: 0.5,
            delay_ns: 0,
            scale: 1.0,
            nr_threads: 1,
            page_stride: 1,
            private_maps: false,
            mlp: 1.0,
        }
    }
}

impl PmbenchConfig {
    /// Check every field; the error names the field and its valid range.
    pub fn validate(&self) -> Result<(), ConfigError> {
        common::check_positive(NAME, "footprint_mib", self.footprint_mib)?;
        common::check_unit_nonzero(NAME, "stddev_fraction", self.stddev_fraction)?;
        if !(1..=PAGE_SIZE).contains(&self.stride_bytes) {
            return Err(format!(
                "{NAME}.stride_bytes must be in [1, {PAGE_SIZE}], got {}",
                self.stride_bytes
            )
            .into());
        }
        common::check_unit(NAME, "read_ratio", self.read_ratio)?;
        if !(1..=MAX_PAGE_STRIDE).contains(&self.page_stride) {
            return Err(format!(
                "{NAME}.page_stride must be in [1, {MAX_PAGE_STRIDE}] pages, got {}",
                self.page_stride
            )
            .into());
        }
        common::check_common(NAME, self.scale, self.nr_threads, self.mlp)?;
        let bytes = self.footprint_mib as f64 * self.scale * (1u64 << 20) as f64;
        common::check_footprint(NAME, "footprint_mib", bytes)?;
        if self.private_maps && bytes / (PAGE_SIZE as f64) < self.nr_threads as f64 {
            return Err(format!(
                "{NAME}.private_maps gives each of the {} threads its own share of the \
                 region, which needs at least one page per thread; raise footprint_mib or \
                 lower nr_threads",
                self.nr_threads
            )
            .into());
        }
        Ok(())
    }
}

/// The largest `page_stride`: one huge page.
const MAX_PAGE_STRIDE: u64 = 512;

/// Fold an integer page index into `[0, n)` by reflecting at both edges:
/// `-1 → 0`, `n → n - 1`, `n + 1 → n - 2`, … (period `2n`).
#[inline]
pub fn reflect(idx: i64, n: u64) -> u64 {
    let n = n as i64;
    let m = idx.rem_euclid(2 * n);
    (if m >= n { 2 * n - 1 - m } else { m }) as u64
}

/// Per-thread progress.
#[derive(Debug, Clone)]
struct ThreadState {
    rng: Xoshiro256PlusPlus,
    /// Next page to initialise, and the end of the thread's share.
    init_next: u64,
    init_end: u64,
    /// Measured accesses still to generate.
    accesses_left: u64,
    /// In-page offset of the next access.
    offset: u64,
    /// Compute of the accesses a restricted stream dropped, for the next kept one.
    carry: ComputeCarry,
}

/// The pmbench generator (see the module docs).
#[derive(Debug, Clone)]
pub struct Pmbench {
    region: Mapping,
    pages: u64,
    pattern: PmbenchPattern,
    /// What each thread draws its pages from: one shared domain, or one per thread
    /// with `private_maps`.
    domains: Vec<Domain>,
    page_stride: u64,
    stride_bytes: u64,
    read: Bernoulli,
    delay_ns: u32,
    nr_threads: u32,
    mlp: f64,
    expected_accesses: u64,
    threads: Vec<ThreadState>,
    /// Process id the instance runs as (the sampler's `pid`).
    process: usize,
    /// Set by [`Workload::restrict_to`]: generate only the sampled regions.
    restricted: Option<Restricted>,
}

/// A sampled pmbench: its sampler (for the init writes) and one [`Restriction`] per
/// domain.
#[derive(Debug, Clone)]
struct Restricted {
    sampler: RegionSampler,
    domains: Vec<Restriction>,
}

/// The pages a thread's measured accesses are drawn over: `slots` pages starting at
/// page `first`, `page_stride` apart; `normal_ih` centres on the middle slot.
#[derive(Debug, Clone)]
struct Domain {
    first: u64,
    slots: u64,
    centre: f64,
    stddev: f64,
}

impl Domain {
    fn new(first: u64, pages: u64, page_stride: u64, stddev_fraction: f64) -> Domain {
        let slots = pages.div_ceil(page_stride);
        Domain {
            first,
            slots,
            centre: slots as f64 / 2.0,
            stddev: stddev_fraction * slots as f64,
        }
    }
}

/// What a sampled pmbench needs to draw one domain's kept accesses directly (see
/// [`crate::kept`]).
#[derive(Debug, Clone)]
struct Restriction {
    /// The domain's slots whose region is kept, as page indices in address order.
    kept_pages: Vec<u64>,
    /// `normal_ih`: draws the `i`-th kept page by its probability (`None` for
    /// `uniform`, where every kept page is equally likely).
    table: Option<AliasTable>,
    /// Probability that one access of the full stream lands in a kept region.
    q: f64,
}

impl Pmbench {
    /// Build the generator for `cfg` with `seed`.
    ///
    /// # Panics
    /// If `cfg` does not pass [`PmbenchConfig::validate`].
    pub fn new(cfg: &PmbenchConfig, seed: u64) -> Self {
        Self::for_process(cfg, seed, 0)
    }

    /// Build one pmbench instance that runs as process `process` of a larger
    /// workload (`pmbench-ladder`): its threads draw from
    /// `thread_rng(seed, process, thread)`, so every instance has its own streams.
    /// Drive it with [`Pmbench::fill_thread`].
    ///
    /// # Panics
    /// If `cfg` does not pass [`PmbenchConfig::validate`].
    pub(crate) fn for_process(cfg: &PmbenchConfig, seed: u64, process: usize) -> Self {
        if let Err(e) = cfg.validate() {
            panic!("invalid pmbench config: {e}");
        }
        let bytes = common::scaled_bytes_from_mib(cfg.footprint_mib, cfg.scale);
        let region = Layout::new().map(bytes, VmaKind::Anon);
        let pages = region.len / PAGE_SIZE;
        let nr_accesses = common::scaled(cfg.nr_accesses, cfg.scale);
        let domains = if cfg.private_maps {
            (0..cfg.nr_threads as usize)
                .map(|t| {
                    let (lo, hi) = common::share(pages, cfg.nr_threads, t);
                    Domain::new(lo, hi - lo, cfg.page_stride, cfg.stddev_fraction)
                })
                .collect()
        } else {
            vec![Domain::new(0, pages, cfg.page_stride, cfg.stddev_fraction)]
        };
        let threads = (0..cfg.nr_threads as usize)
            .map(|t| {
                let (init_next, init_end) = common::share(pages, cfg.nr_threads, t);
                let (lo, hi) = common::share(nr_accesses, cfg.nr_threads, t);
                ThreadState {
                    rng: thread_rng(seed, process, t),
                    init_next,
                    init_end,
                    accesses_left: hi - lo,
                    offset: 0,
                    carry: ComputeCarry::default(),
                }
            })
            .collect();
        Pmbench {
            region,
            pages,
            pattern: cfg.pattern,
            domains,
            page_stride: cfg.page_stride,
            stride_bytes: cfg.stride_bytes,
            read: Bernoulli::new(cfg.read_ratio).expect("validated probability"),
            delay_ns: cfg.delay_ns,
            nr_threads: cfg.nr_threads,
            mlp: cfg.mlp,
            expected_accesses: pages + nr_accesses,
            threads,
            process,
            restricted: None,
        }
    }

    /// The region's mapping.
    pub fn region(&self) -> Mapping {
        self.region
    }

    /// Centre and standard deviation of thread 0's `normal_ih` pattern, in slots
    /// (pages when `page_stride` is 1) from the first page of its range.
    pub fn normal_params_pages(&self) -> (f64, f64) {
        (self.domains[0].centre, self.domains[0].stddev)
    }

    /// The domain thread `thread` draws from.
    fn domain_of(&self, thread: usize) -> usize {
        if self.domains.len() == 1 {
            0
        } else {
            thread
        }
    }
}

impl Workload for Pmbench {
    fn shape(&self) -> WorkloadShape {
        WorkloadShape {
            processes: vec![ProcessShape {
                name: NAME.to_string(),
                nr_threads: self.nr_threads,
                mlp: self.mlp,
            }],
            footprint_bytes: self.region.len,
        }
    }

    fn prologue(&mut self, process: usize, out: &mut Vec<Op>) {
        if process == 0 {
            self.push_prologue(out);
        }
    }

    fn fill(&mut self, process: usize, thread: usize, out: &mut Vec<Op>) {
        if process == 0 {
            self.fill_thread(thread, out);
        }
    }

    fn restrict_to(&mut self, sampler: &RegionSampler) -> bool {
        // Its kept elements are listed by region; under strata by mapping the
        // stream filter decides instead.
        if sampler.by_mapping() {
            return false;
        }
        let kept = KeptElements::new(sampler, self.process as u32, self.region, PAGE_SIZE);
        let domains = self
            .domains
            .iter()
            .map(|d| {
                // The domain's slots in kept regions, in address order.
                let end = (d.first + d.slots * self.page_stride).min(self.pages);
                let kept_pages: Vec<u64> = kept
                    .runs()
                    .iter()
                    .flat_map(|&(a, b)| a.max(d.first)..b.min(end))
                    .filter(|page| (page - d.first) % self.page_stride == 0)
                    .collect();
                let (table, q) = match self.pattern {
                    PmbenchPattern::Uniform => (None, kept_pages.len() as f64 / d.slots as f64),
                    PmbenchPattern::NormalIh => {
                        let weights: Vec<f64> = kept_pages
                            .iter()
                            .map(|&page| {
                                normal_ih_probability(d, (page - d.first) / self.page_stride)
                            })
                            .collect();
                        let table = AliasTable::new(&weights);
                        let q = table.as_ref().map_or(0.0, AliasTable::total);
                        (table, q)
                    }
                };
                Restriction {
                    kept_pages,
                    table,
                    q,
                }
            })
            .collect();
        self.restricted = Some(Restricted {
            sampler: sampler.clone(),
            domains,
        });
        true
    }

    fn expected_accesses(&self) -> Option<u64> {
        if self.restricted.is_some() {
            return None;
        }
        Some(self.expected_accesses)
    }
}

impl Pmbench {
    /// The mapping of the instance's region (what its process's prologue maps).
    pub(crate) fn push_prologue(&self, out: &mut Vec<Op>) {
        out.push(self.region.mmap_op());
    }

    /// Number of threads.
    pub(crate) fn nr_threads(&self) -> u32 {
        self.nr_threads
    }

    /// Memory-level parallelism.
    pub(crate) fn mlp(&self) -> f64 {
        self.mlp
    }

    /// Compute time before each measured access, in ns.
    pub(crate) fn delay_ns(&self) -> u32 {
        self.delay_ns
    }

    /// The next batch of thread `thread` of this instance, whatever process id it
    /// runs as (the body of [`Workload::fill`], shared with `pmbench-ladder`).
    pub(crate) fn fill_thread(&mut self, thread: usize, out: &mut Vec<Op>) {
        if thread >= self.threads.len() {
            return;
        }
        if self.restricted.is_some() {
            return self.fill_restricted(thread, out);
        }
        out.reserve(BATCH_OPS);
        let base = self.region.addr;
        let d = &self.domains[self.domain_of(thread)];
        let t = &mut self.threads[thread];

        // Init: sequential first touch, one write per page.
        let n_init = (t.init_end - t.init_next).min(BATCH_OPS as u64);
        for page in t.init_next..t.init_next + n_init {
            out.push(Op::Access {
                addr: base + page * PAGE_SIZE,
                write: true,
                gap_ns: 0,
            });
        }
        t.init_next += n_init;

        // Measured accesses in the rest of the batch.
        let n = t.accesses_left.min((BATCH_OPS - out.len()) as u64);
        for _ in 0..n {
            let slot = match self.pattern {
                PmbenchPattern::Uniform => below(&mut t.rng, d.slots),
                PmbenchPattern::NormalIh => {
                    let z: f64 = StandardNormal.sample(&mut t.rng);
                    // `as i64` saturates, and reflect handles any i64.
                    let x = (d.centre + d.stddev * z).floor() as i64;
                    reflect(x, d.slots)
                }
            };
            let page = d.first + slot * self.page_stride;
            out.push(Op::Access {
                addr: base + page * PAGE_SIZE + t.offset,
                write: !self.read.sample(&mut t.rng),
                gap_ns: self.delay_ns,
            });
            t.offset += self.stride_bytes;
            if t.offset >= PAGE_SIZE {
                t.offset -= PAGE_SIZE;
            }
        }
        t.accesses_left -= n;
    }

    /// [`Pmbench::fill_thread`] of a restricted instance: the full stream's law with
    /// the unsampled regions' accesses left out. Init writes only kept pages; the
    /// measured accesses jump over the dropped ones by a geometric skip (the in-page
    /// offset advances for every skipped access, as in the full stream), then draw a
    /// kept page with its probability conditioned on being kept.
    fn fill_restricted(&mut self, thread: usize, out: &mut Vec<Op>) {
        let domain = self.domain_of(thread);
        let restricted = self.restricted.as_ref().expect("restricted");
        let r = &restricted.domains[domain];
        let base = self.region.addr;
        let pid = self.process as u32;
        let carried = restricted.sampler.carries_compute();
        let t = &mut self.threads[thread];
        out.reserve(BATCH_OPS);
        push_kept_page_writes(
            &restricted.sampler,
            pid,
            base,
            &mut t.init_next,
            t.init_end,
            out,
        );
        while t.accesses_left > 0 && out.len() < BATCH_OPS {
            let skip = skip_to_kept(&mut t.rng, r.q);
            if skip > t.accesses_left {
                t.accesses_left = 0;
                break;
            }
            t.accesses_left -= skip;
            // The offset of the skip-th access: skip - 1 strides after the current one.
            let offset = (t.offset + ((skip - 1) % PAGE_SIZE) * self.stride_bytes) % PAGE_SIZE;
            let i = match &r.table {
                Some(table) => table.sample(&mut t.rng) as u64,
                None => below(&mut t.rng, r.kept_pages.len() as u64),
            };
            let page = r.kept_pages[i as usize];
            out.push(Op::Access {
                addr: base + page * PAGE_SIZE + offset,
                write: !self.read.sample(&mut t.rng),
                gap_ns: gap_after(&mut t.carry, carried, skip - 1, self.delay_ns),
            });
            t.offset = (offset + self.stride_bytes) % PAGE_SIZE;
        }
    }
}

/// `normal_ih`'s probability of slot `slot` of domain `d`: the Gaussian's mass over
/// every integer index that [`reflect`] folds onto it (period `2 · slots`).
fn normal_ih_probability(d: &Domain, slot: u64) -> f64 {
    let (c, s, n) = (d.centre, d.stddev, d.slots as f64);
    // Mass of floor(c + s·z) = j, i.e. z in [(j - c)/s, (j + 1 - c)/s).
    let mass = |j: f64| normal_mass((j - c) / s, (j + 1.0 - c) / s);
    // Folds beyond 8 periods each side lie more than 16 standard deviations away
    // (the stddev is at most the domain).
    (-8..=8)
        .map(|m| {
            let shift = 2.0 * n * m as f64;
            mass(shift + slot as f64) + mass(shift + 2.0 * n - 1.0 - slot as f64)
        })
        .sum()
}

/// P(a <= Z < b) for a standard normal Z, accurate in both tails (complementary
/// error functions rather than a difference of CDFs near 1).
fn normal_mass(a: f64, b: f64) -> f64 {
    let r = std::f64::consts::FRAC_1_SQRT_2;
    let m = if a >= 0.0 {
        0.5 * (libm::erfc(a * r) - libm::erfc(b * r))
    } else if b <= 0.0 {
        0.5 * (libm::erfc(-b * r) - libm::erfc(-a * r))
    } else {
        1.0 - 0.5 * libm::erfc(-a * r) - 0.5 * libm::erfc(b * r)
    };
    m.max(0.0)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testutil::{accesses, check_structure, drain};
    use proptest::prelude::*;
    use tierkit_core::MIB;

    fn small(footprint_mib: u64, nr_accesses: u64, nr_threads: u32) -> PmbenchConfig {
        PmbenchConfig {
            footprint_mib,
            nr_accesses,
            nr_threads,
            ..PmbenchConfig::default()
        }
    }

    /// The measured (post-init) accesses of thread 0 of a single-threaded run.
    fn measured(w: &mut Pmbench) -> Vec<(u64, bool, u32)> {
        let pages = w.pages as usize;
        let d = drain(w);
        accesses(&d.streams[0][0]).skip(pages).collect()
    }

    #[test]
    fn same_seed_same_stream_different_seed_different_stream() {
        let cfg = small(16, 50_000, 2);
        let a = drain(&mut Pmbench::new(&cfg, 7));
        let b = drain(&mut Pmbench::new(&cfg, 7));
        let c = drain(&mut Pmbench::new(&cfg, 8));
        assert_eq!(a.streams, b.streams);
        assert_ne!(a.streams, c.streams);
        assert_ne!(a.streams[0][0], a.streams[0][1]);
    }

    #[test]
    fn footprint_mappings_and_access_count() {
        for pattern in [PmbenchPattern::Uniform, PmbenchPattern::NormalIh] {
            let mut cfg = small(24, 30_000, 3);
            cfg.pattern = pattern;
            let mut w = Pmbench::new(&cfg, 1);
            let d = drain(&mut w);
            assert_eq!(d.shape.footprint_bytes, 24 * MIB);
            assert_eq!(d.mappings, vec![w.region()]);
            check_structure(&w, &d);
        }
    }

    #[test]
    fn init_touches_every_page_once_in_order() {
        let mut w = Pmbench::new(&small(8, 0, 3), 2);
        let d = drain(&mut w);
        let all: Vec<u64> = d.streams[0]
            .iter()
            .flat_map(|s| {
                accesses(s).map(|(a, wr, g)| {
                    assert!(wr && g == 0);
                    a
                })
            })
            .collect();
        let expect: Vec<u64> = (0..8 * MIB / PAGE_SIZE)
            .map(|p| w.region().addr + p * PAGE_SIZE)
            .collect();
        assert_eq!(all, expect);
    }

    #[test]
    fn normal_pattern_puts_68_percent_within_one_stddev() {
        let mut w = Pmbench::new(&small(64, 1_000_000, 1), 3);
        let (centre, sd) = w.normal_params_pages();
        assert_eq!(centre, 8192.0);
        assert_eq!(sd, 2048.0);
        let base = w.region().addr;
        let acc = measured(&mut w);
        assert_eq!(acc.len(), 1_000_000);
        let within = acc
            .iter()
            .filter(|&&(a, _, _)| {
                let page = ((a - base) / PAGE_SIZE) as f64 + 0.5;
                (page - centre).abs() <= sd
            })
            .count() as f64
            / acc.len() as f64;
        assert!((within - 0.6827).abs() < 0.01, "within 1 sd: {within}");
    }

    #[test]
    fn uniform_pattern_is_flat() {
        let mut cfg = small(64, 1_000_000, 1);
        cfg.pattern = PmbenchPattern::Uniform;
        let mut w = Pmbench::new(&cfg, 4);
        let base = w.region().addr;
        let acc = measured(&mut w);
        // The central quarter gets a quarter of the accesses (vs 68%+ for normal_ih).
        let central = acc
            .iter()
            .filter(|&&(a, _, _)| {
                let page = (a - base) / PAGE_SIZE;
                (6144..10240).contains(&page)
            })
            .count() as f64
            / acc.len() as f64;
        assert!((central - 0.25).abs() < 0.01, "central quarter: {central}");
    }

    #[test]
    fn read_ratio_delay_and_stride() {
        let mut cfg = small(16, 500_000, 1);
        cfg.read_ratio = 0.8;
        cfg.delay_ns = 30;
        cfg.stride_bytes = 192;
        let mut w = Pmbench::new(&cfg, 5);
        let acc = measured(&mut w);
        let reads = acc.iter().filter(|a| !a.1).count() as f64 / acc.len() as f64;
        assert!((reads - 0.8).abs() < 0.01, "read share {reads}");
        for (i, &(addr, _, gap)) in acc.iter().enumerate() {
            assert_eq!(gap, 30);
            assert_eq!(addr % PAGE_SIZE, (i as u64 * 192) % PAGE_SIZE);
        }
    }

    #[test]
    fn default_read_ratio_is_half() {
        let mut w = Pmbench::new(&small(16, 500_000, 1), 6);
        let acc = measured(&mut w);
        let reads = acc.iter().filter(|a| !a.1).count() as f64 / acc.len() as f64;
        assert!((reads - 0.5).abs() < 0.01, "read share {reads}");
    }

    #[test]
    fn restricted_generation_keeps_the_filtered_law() {
        let sampler = RegionSampler::new(tierkit_core::SpaceScale::new(1.0 / 4.0), 5);
        for pattern in [PmbenchPattern::NormalIh, PmbenchPattern::Uniform] {
            let cfg = PmbenchConfig {
                pattern,
                read_ratio: 0.7,
                stride_bytes: 192,
                // A gap, so that the carried compute is checked too.
                delay_ns: 40,
                ..small(128, 2_000_000, 2)
            };
            crate::testutil::check_restricted(&|| Box::new(Pmbench::new(&cfg, 8)), &sampler, 0.01);
        }
    }

    #[test]
    fn page_stride_draws_over_every_nth_page_and_init_still_writes_all() {
        let cfg = PmbenchConfig {
            page_stride: 2,
            ..small(64, 1_000_000, 1)
        };
        let mut w = Pmbench::new(&cfg, 3);
        let (centre, sd) = w.normal_params_pages();
        assert_eq!((centre, sd), (4096.0, 1024.0), "slots, not pages");
        let base = w.region().addr;
        let pages = w.pages;
        let d = drain(&mut w);
        let all: Vec<(u64, bool, u32)> = accesses(&d.streams[0][0]).collect();
        let init: Vec<u64> = all[..pages as usize].iter().map(|a| a.0).collect();
        let expect: Vec<u64> = (0..pages).map(|p| base + p * PAGE_SIZE).collect();
        assert_eq!(init, expect, "init writes every page, strided or not");
        let acc = &all[pages as usize..];
        assert_eq!(acc.len(), 1_000_000);
        assert!(acc
            .iter()
            .all(|a| ((a.0 - base) / PAGE_SIZE).is_multiple_of(2)));
        // The Gaussian over slots: 68% within one stddev of the centre slot, which is
        // the same central fraction of the region as without the stride.
        let within = acc
            .iter()
            .filter(|&&(a, _, _)| {
                let slot = ((a - base) / PAGE_SIZE / 2) as f64 + 0.5;
                (slot - centre).abs() <= sd
            })
            .count() as f64
            / acc.len() as f64;
        assert!((within - 0.6827).abs() < 0.01, "within 1 sd: {within}");
        // Every 2 MiB region holds measured accesses on exactly half its pages.
        let touched: std::collections::BTreeSet<u64> =
            acc.iter().map(|a| (a.0 - base) / PAGE_SIZE).collect();
        let in_centre = touched
            .iter()
            .filter(|&&p| (8192..8704).contains(&p))
            .count();
        assert_eq!(in_centre, 256);
    }

    #[test]
    fn private_maps_keep_each_thread_in_its_own_share() {
        let cfg = PmbenchConfig {
            private_maps: true,
            ..small(32, 400_000, 4)
        };
        let mut w = Pmbench::new(&cfg, 9);
        let base = w.region().addr;
        let share = w.pages / 4;
        let d = drain(&mut w);
        for (t, stream) in d.streams[0].iter().enumerate() {
            let acc: Vec<u64> = accesses(stream)
                .skip(share as usize)
                .map(|a| (a.0 - base) / PAGE_SIZE)
                .collect();
            assert_eq!(acc.len(), 100_000);
            let (lo, hi) = (t as u64 * share, (t as u64 + 1) * share);
            assert!(acc.iter().all(|p| (lo..hi).contains(p)), "thread {t}");
            // Centred on the middle of its own share.
            let mean = acc.iter().sum::<u64>() as f64 / acc.len() as f64;
            let mid = (lo + hi) as f64 / 2.0;
            assert!(
                (mean - mid).abs() < 0.01 * share as f64,
                "thread {t}: {mean} vs {mid}"
            );
        }
        // Shared (the default): every thread draws over the whole region.
        let mut shared = Pmbench::new(&small(32, 400_000, 4), 9);
        let d = drain(&mut shared);
        let last: Vec<u64> = accesses(&d.streams[0][3])
            .skip(share as usize)
            .map(|a| (a.0 - base) / PAGE_SIZE)
            .collect();
        assert!(last.iter().any(|&p| p < 3 * share));
    }

    #[test]
    fn restricted_generation_keeps_the_filtered_law_with_stride_and_private_maps() {
        let sampler = RegionSampler::new(tierkit_core::SpaceScale::new(1.0 / 4.0), 5);
        for pattern in [PmbenchPattern::NormalIh, PmbenchPattern::Uniform] {
            let cfg = PmbenchConfig {
                pattern,
                page_stride: 2,
                private_maps: true,
                ..small(128, 2_000_000, 3)
            };
            crate::testutil::check_restricted(&|| Box::new(Pmbench::new(&cfg, 8)), &sampler, 0.01);
        }
    }

    #[test]
    fn normal_ih_probabilities_sum_to_one() {
        for stddev_fraction in [0.125, 0.6, 1.0] {
            let w = Pmbench::new(
                &PmbenchConfig {
                    stddev_fraction,
                    ..small(8, 0, 1)
                },
                1,
            );
            let d = &w.domains[0];
            let total: f64 = (0..d.slots).map(|p| normal_ih_probability(d, p)).sum();
            assert!((total - 1.0).abs() < 1e-9, "{stddev_fraction}: {total}");
        }
    }

    #[test]
    fn reflect_folds_at_both_edges() {
        assert_eq!(reflect(0, 10), 0);
        assert_eq!(reflect(9, 10), 9);
        assert_eq!(reflect(10, 10), 9);
        assert_eq!(reflect(11, 10), 8);
        assert_eq!(reflect(-1, 10), 0);
        assert_eq!(reflect(-3, 10), 2);
        assert_eq!(reflect(20, 10), 0);
        assert!(reflect(i64::MIN, 10) < 10 && reflect(i64::MAX, 10) < 10);
    }

    #[test]
    fn validate_names_the_bad_field() {
        let bad = |f: &dyn Fn(&mut PmbenchConfig), field: &str| {
            let mut c = PmbenchConfig::default();
            f(&mut c);
            let e = c.validate().unwrap_err();
            assert!(e.to_string().contains(field), "{e:?} should name {field}");
        };
        bad(&|c| c.footprint_mib = 0, "footprint_mib");
        bad(&|c| c.stddev_fraction = 0.0, "stddev_fraction");
        bad(&|c| c.stddev_fraction = -0.1, "stddev_fraction");
        bad(&|c| c.stddev_fraction = 1.5, "stddev_fraction");
        bad(&|c| c.stride_bytes = 0, "stride_bytes");
        bad(&|c| c.stride_bytes = 4097, "stride_bytes");
        bad(&|c| c.read_ratio = 1.01, "read_ratio");
        bad(&|c| c.read_ratio = -1.0, "read_ratio");
        bad(&|c| c.scale = 0.0, "scale");
        bad(&|c| c.nr_threads = 0, "nr_threads");
        bad(&|c| c.mlp = f64::INFINITY, "mlp");
        bad(&|c| c.page_stride = 0, "page_stride");
        bad(&|c| c.page_stride = 513, "page_stride");
        bad(
            &|c| {
                c.private_maps = true;
                c.footprint_mib = 1;
                c.nr_threads = 257;
            },
            "private_maps",
        );
        PmbenchConfig::default().validate().unwrap();
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(24))]
        #[test]
        fn any_valid_config_stays_inside_its_mapping(
            footprint_mib in 1u64..12,
            nr_accesses in 0u64..5000,
            nr_threads in 1u32..5,
            uniform in any::<bool>(),
            stddev_fraction in 0.001f64..=1.0,
            stride_bytes in 1u64..=4096,
            read_ratio in 0.0f64..=1.0,
            scale in 0.05f64..2.0,
            page_stride in 1u64..=512,
            private_maps in any::<bool>(),
        ) {
            let cfg = PmbenchConfig {
                footprint_mib,
                nr_accesses,
                nr_threads,
                pattern: if uniform { PmbenchPattern::Uniform } else { PmbenchPattern::NormalIh },
                stddev_fraction,
                stride_bytes,
                read_ratio,
                scale,
                page_stride,
                private_maps,
                ..PmbenchConfig::default()
            };
            prop_assert!(cfg.validate().is_ok());
            let mut w = Pmbench::new(&cfg, 5);
            let d = drain(&mut w);
            check_structure(&w, &d);
        }

        #[test]
        fn reflect_lands_in_range_and_is_identity_inside(idx in any::<i64>(), n in 1u64..1_000_000) {
            let r = reflect(idx, n);
            prop_assert!(r < n);
            if idx >= 0 && (idx as u64) < n {
                prop_assert_eq!(r, idx as u64);
            }
        }
    }
}
