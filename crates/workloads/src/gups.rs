//! `gups`: HeMem-style GUPS (giga-updates per second) with a hot subset.
//!
//! The benchmark of the HeMem paper (Raybuck et al., SOSP '21) that most tiering
//! papers reuse: one large table of 8-byte elements; each update reads an element and
//! writes it back (a read-modify-write of one cache line). With probability
//! `hot_probability` the element is drawn from a hot subset of the table, otherwise
//! uniformly from the whole table.
//!
//! Why the hot set sits in the middle by default: the real benchmark first `memset`s
//! its table front to back, so first-touch placement fills the fast tier with the
//! *start* of the table. With `hot_offset_fraction = 0.5` the hot set lies beyond
//! what a fast tier smaller than half the footprint can hold, i.e. it starts out on
//! the slow tier and a policy has to find it and promote it. That is the scenario
//! GUPS is used for; set `hot_offset_fraction = 0` to measure the easy case.
//!
//! Stream of each thread:
//! 1. **init**: one write per 4 KiB page of the thread's share of the table
//!    (threads split the table into contiguous shares), in address order, no gap;
//! 2. **updates**: its share of `nr_updates`, each a read (after `gap_ns` of compute)
//!    then a write (no gap) of the same 8-byte-aligned address anywhere in the table.
//!
//! Threads do not wait for each other between the phases (there is no barrier in an
//! access stream); the machine runs them at similar speed, so the init phases overlap
//! much as they do behind the real benchmark's barrier.

use rand::distributions::{Bernoulli, Distribution};
use rand_xoshiro::Xoshiro256PlusPlus;
use serde::{Deserialize, Serialize};
use tierkit_core::{
    ComputeCarry, ConfigError, Op, ProcessShape, RegionSampler, VmaKind, Workload, WorkloadShape,
    PAGE_SIZE,
};

use crate::common::{self, below};
use crate::kept::{gap_after, push_kept_page_writes, skip_to_kept, unit_f64, KeptElements};
use crate::layout::{Layout, Mapping};
use crate::{thread_rng, BATCH_OPS};

const NAME: &str = "gups";
/// Bytes per table element (GUPS updates 64-bit words).
pub const ELEMENT_BYTES: u64 = 8;
const ELEMENTS_PER_PAGE: u64 = PAGE_SIZE / ELEMENT_BYTES;

/// Configuration of [`Gups`].
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct GupsConfig {
    /// Size of the table in MiB before `scale`. Default 4096 (4 GiB).
    pub footprint_mib: u64,
    /// Number of updates (each one read plus one write) before `scale`, split evenly
    /// over the threads. Default 60 M, i.e. 120 M accesses plus the 1 M init writes.
    pub nr_updates: u64,
    /// Probability that an update targets the hot subset. Default 0.9 (HeMem's 90%).
    pub hot_probability: f64,
    /// Size of the hot subset as a fraction of the table. Default 0.1.
    pub hot_fraction: f64,
    /// Start of the hot subset as a fraction of the table. Default 0.5, so the hot
    /// set starts out on the slow tier after first-touch init (see the module docs).
    pub hot_offset_fraction: f64,
    /// Compute time before each update's read, in ns. Default 0: GUPS is a pure
    /// memory benchmark.
    pub gap_ns: u32,
    /// Multiplies `footprint_mib` and `nr_updates` together. Default 1.0.
    pub scale: f64,
    /// Number of threads. Default 1.
    pub nr_threads: u32,
    /// Memory-level parallelism. Default 4.0: updates are independent of one another,
    /// so an out-of-order core keeps several misses in flight; each update's write
    /// depends on its read, which keeps it well below the line-fill-buffer limit.
    pub mlp: f64,
}

impl Default for GupsConfig {
    fn default() -> Self {
        GupsConfig {
            footprint_mib: 4096,
            nr_updates: 60_000_000,
            hot_probability: 0.9,
            hot_fraction: 0.1,
            hot_offset_fraction: 0.5,
            gap_ns: 0,
            scale: 1.0,
            nr_threads: 1,
            mlp: 4.0,
        }
    }
}

impl GupsConfig {
    /// Check every field; the error names the field and its valid range.
    pub fn validate(&self) -> Result<(), ConfigError> {
        common::check_positive(NAME, "footprint_mib", self.footprint_mib)?;
        common::check_unit(NAME, "hot_probability", self.hot_probability)?;
        common::check_unit_nonzero(NAME, "hot_fraction", self.hot_fraction)?;
        common::check_unit(NAME, "hot_offset_fraction", self.hot_offset_fraction)?;
        if self.hot_offset_fraction + self.hot_fraction > 1.0 + 1e-9 {
            return Err(format!(
                "{NAME}.hot_offset_fraction must be in [0, 1 - hot_fraction] = [0, {}], got {}",
                1.0 - self.hot_fraction,
                self.hot_offset_fraction
            )
            .into());
        }
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
    /// Next page (index in the table) to initialise, and the end of the share.
    init_next: u64,
    init_end: u64,
    /// Updates still to generate.
    updates_left: u64,
    /// Compute of the updates a restricted stream dropped, for the next kept one.
    carry: ComputeCarry,
}

/// The GUPS generator (see the module docs).
#[derive(Debug, Clone)]
pub struct Gups {
    table: Mapping,
    nr_elements: u64,
    hot_first_element: u64,
    hot_elements: u64,
    hot: Bernoulli,
    hot_probability: f64,
    gap_ns: u32,
    nr_threads: u32,
    mlp: f64,
    expected_accesses: u64,
    threads: Vec<ThreadState>,
    /// Set by [`Workload::restrict_to`]: generate only the sampled regions.
    restricted: Option<Restriction>,
}

/// What a sampled GUPS needs to draw kept updates directly (see [`crate::kept`]).
#[derive(Debug, Clone)]
struct Restriction {
    sampler: RegionSampler,
    kept: KeptElements,
    /// Kept elements before the hot range: the hot range's first kept one is `nth`
    /// of this.
    kept_before_hot: u64,
    kept_hot: u64,
    kept_all: u64,
    /// Probability that one update of the full stream lands in a kept region.
    q: f64,
    /// Probability that a kept update came from the hot branch.
    hot_given_kept: f64,
    /// The sampler carries the dropped updates' compute to the kept ones.
    carried: bool,
}

impl Gups {
    /// Build the generator for `cfg` with `seed`.
    ///
    /// # Panics
    /// If `cfg` does not pass [`GupsConfig::validate`].
    pub fn new(cfg: &GupsConfig, seed: u64) -> Self {
        if let Err(e) = cfg.validate() {
            panic!("invalid gups config: {e}");
        }
        let bytes = common::scaled_bytes_from_mib(cfg.footprint_mib, cfg.scale);
        let table = Layout::new().map(bytes, VmaKind::Anon);
        let pages = table.len / PAGE_SIZE;
        // The hot set is whole pages so that page-granularity policies see a crisp
        // boundary; with at least one page it is never empty.
        let hot_pages = ((cfg.hot_fraction * pages as f64).round() as u64).clamp(1, pages);
        let hot_first_page =
            ((cfg.hot_offset_fraction * pages as f64).round() as u64).min(pages - hot_pages);
        let nr_updates = common::scaled(cfg.nr_updates, cfg.scale);
        let threads = (0..cfg.nr_threads as usize)
            .map(|t| {
                let (init_next, init_end) = common::share(pages, cfg.nr_threads, t);
                let (lo, hi) = common::share(nr_updates, cfg.nr_threads, t);
                ThreadState {
                    rng: thread_rng(seed, 0, t),
                    init_next,
                    init_end,
                    updates_left: hi - lo,
                    carry: ComputeCarry::default(),
                }
            })
            .collect();
        Gups {
            table,
            nr_elements: pages * ELEMENTS_PER_PAGE,
            hot_first_element: hot_first_page * ELEMENTS_PER_PAGE,
            hot_elements: hot_pages * ELEMENTS_PER_PAGE,
            hot: Bernoulli::new(cfg.hot_probability).expect("validated probability"),
            hot_probability: cfg.hot_probability,
            gap_ns: cfg.gap_ns,
            nr_threads: cfg.nr_threads,
            mlp: cfg.mlp,
            expected_accesses: pages + 2 * nr_updates,
            threads,
            restricted: None,
        }
    }

    /// The table's mapping.
    pub fn table(&self) -> Mapping {
        self.table
    }

    /// The hot subset as an address range `[start, end)`.
    pub fn hot_range(&self) -> (u64, u64) {
        let start = self.table.addr + self.hot_first_element * ELEMENT_BYTES;
        (start, start + self.hot_elements * ELEMENT_BYTES)
    }
}

impl Workload for Gups {
    fn shape(&self) -> WorkloadShape {
        WorkloadShape {
            processes: vec![ProcessShape {
                name: NAME.to_string(),
                nr_threads: self.nr_threads,
                mlp: self.mlp,
            }],
            footprint_bytes: self.table.len,
        }
    }

    fn prologue(&mut self, process: usize, out: &mut Vec<Op>) {
        if process == 0 {
            out.push(self.table.mmap_op());
        }
    }

    fn fill(&mut self, process: usize, thread: usize, out: &mut Vec<Op>) {
        if process != 0 || thread >= self.threads.len() {
            return;
        }
        if self.restricted.is_some() {
            return self.fill_restricted(thread, out);
        }
        let base = self.table.addr;
        let t = &mut self.threads[thread];
        out.reserve(BATCH_OPS);

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

        // Updates: read-modify-write pairs in the rest of the batch.
        let room = (BATCH_OPS - out.len()) as u64 / 2;
        let n_upd = t.updates_left.min(room);
        for _ in 0..n_upd {
            let element = if self.hot.sample(&mut t.rng) {
                self.hot_first_element + below(&mut t.rng, self.hot_elements)
            } else {
                below(&mut t.rng, self.nr_elements)
            };
            let addr = base + element * ELEMENT_BYTES;
            out.push(Op::Access {
                addr,
                write: false,
                gap_ns: self.gap_ns,
            });
            out.push(Op::Access {
                addr,
                write: true,
                gap_ns: 0,
            });
        }
        t.updates_left -= n_upd;
    }

    fn restrict_to(&mut self, sampler: &RegionSampler) -> bool {
        // Its kept elements are listed by region; under strata by mapping the
        // stream filter decides instead.
        if sampler.by_mapping() {
            return false;
        }
        let kept = KeptElements::new(sampler, 0, self.table, ELEMENT_BYTES);
        let (h0, h1) = (
            self.hot_first_element,
            self.hot_first_element + self.hot_elements,
        );
        let kept_hot = kept.count_in(h0, h1);
        let kept_all = kept.count_in(0, self.nr_elements);
        let p = self.hot_probability;
        let from_hot = p * kept_hot as f64 / self.hot_elements as f64;
        let q = from_hot + (1.0 - p) * kept_all as f64 / self.nr_elements as f64;
        self.restricted = Some(Restriction {
            sampler: sampler.clone(),
            kept_before_hot: kept.rank(h0),
            kept,
            kept_hot,
            kept_all,
            q,
            hot_given_kept: if q > 0.0 { from_hot / q } else { 0.0 },
            carried: sampler.carries_compute(),
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

impl Gups {
    /// [`Workload::fill`] of a restricted GUPS: the full stream's law with the
    /// unsampled regions' accesses left out. Init writes only kept pages; updates jump
    /// over the dropped ones by a geometric skip, then draw a kept element from the hot
    /// branch or the uniform one with the probabilities conditioned on being kept.
    fn fill_restricted(&mut self, thread: usize, out: &mut Vec<Op>) {
        let r = self.restricted.as_ref().expect("restricted");
        let base = self.table.addr;
        let t = &mut self.threads[thread];
        out.reserve(BATCH_OPS);

        push_kept_page_writes(&r.sampler, 0, base, &mut t.init_next, t.init_end, out);

        while t.updates_left > 0 && out.len() + 2 <= BATCH_OPS {
            let skip = skip_to_kept(&mut t.rng, r.q);
            if skip > t.updates_left {
                t.updates_left = 0;
                break;
            }
            t.updates_left -= skip;
            let element = if unit_f64(&mut t.rng) < r.hot_given_kept {
                r.kept
                    .nth(r.kept_before_hot + below(&mut t.rng, r.kept_hot))
            } else {
                r.kept.nth(below(&mut t.rng, r.kept_all))
            };
            let addr = base + element * ELEMENT_BYTES;
            out.push(Op::Access {
                addr,
                write: false,
                gap_ns: gap_after(&mut t.carry, r.carried, skip - 1, self.gap_ns),
            });
            out.push(Op::Access {
                addr,
                write: true,
                gap_ns: 0,
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

    fn small(footprint_mib: u64, nr_updates: u64, nr_threads: u32) -> GupsConfig {
        GupsConfig {
            footprint_mib,
            nr_updates,
            nr_threads,
            ..GupsConfig::default()
        }
    }

    #[test]
    fn same_seed_same_stream_different_seed_different_stream() {
        let cfg = small(16, 50_000, 2);
        let a = drain(&mut Gups::new(&cfg, 7));
        let b = drain(&mut Gups::new(&cfg, 7));
        let c = drain(&mut Gups::new(&cfg, 8));
        assert_eq!(a.streams, b.streams);
        assert_ne!(a.streams, c.streams);
        // Threads of one workload draw different streams.
        assert_ne!(a.streams[0][0], a.streams[0][1]);
    }

    #[test]
    fn footprint_mappings_and_access_count() {
        let cfg = small(24, 30_000, 3);
        let mut w = Gups::new(&cfg, 1);
        let d = drain(&mut w);
        assert_eq!(d.shape.footprint_bytes, 24 * MIB);
        assert_eq!(d.mappings, vec![w.table()]);
        check_structure(&w, &d);
    }

    #[test]
    fn init_touches_every_page_once_in_order_then_updates_are_rmw_pairs() {
        let mut cfg = small(8, 10_000, 3);
        cfg.gap_ns = 17;
        let mut w = Gups::new(&cfg, 2);
        let d = drain(&mut w);
        let pages = 8 * MIB / PAGE_SIZE;
        let mut touched = Vec::new();
        let mut updates = 0;
        for stream in &d.streams[0] {
            let acc: Vec<_> = accesses(stream).collect();
            // Init: writes, no gap, consecutive pages.
            let n_init = acc
                .iter()
                .take_while(|&&(a, w, g)| w && g == 0 && a % PAGE_SIZE == 0)
                .count();
            for pair in acc[..n_init].windows(2) {
                assert_eq!(pair[1].0, pair[0].0 + PAGE_SIZE);
            }
            touched.extend(acc[..n_init].iter().map(|x| x.0));
            let rest = &acc[n_init..];
            assert_eq!(rest.len() % 2, 0);
            for pair in rest.chunks(2) {
                let (ra, rw, rg) = pair[0];
                let (wa, ww, wg) = pair[1];
                assert!(!rw && ww && ra == wa && rg == 17 && wg == 0);
                assert_eq!(ra % ELEMENT_BYTES, 0);
            }
            updates += rest.len() / 2;
        }
        // The first update may coincide with a page start and be mistaken for init
        // only if it is a write; it is a read, so the split above is exact.
        touched.sort_unstable();
        let expect: Vec<u64> = (0..pages).map(|p| w.table().addr + p * PAGE_SIZE).collect();
        assert_eq!(touched, expect);
        assert_eq!(updates, 10_000);
    }

    #[test]
    fn hot_fraction_of_updates_matches_probability() {
        let cfg = small(64, 1_000_000, 1);
        let mut w = Gups::new(&cfg, 3);
        let (hot_lo, hot_hi) = w.hot_range();
        // Default hot set: 10% of the table starting at its middle.
        assert_eq!(hot_lo - w.table().addr, 32 * MIB);
        assert_eq!(hot_hi - hot_lo, 1638 * PAGE_SIZE); // round(0.1 × 16384 pages)
        let d = drain(&mut w);
        let pages = 64 * MIB / PAGE_SIZE;
        let mut hot = 0u64;
        let mut total = 0u64;
        for (addr, write, _) in accesses(&d.streams[0][0]).skip(pages as usize) {
            if !write {
                total += 1;
                hot += u64::from(addr >= hot_lo && addr < hot_hi);
            }
        }
        assert_eq!(total, 1_000_000);
        let p = cfg.hot_probability;
        let expected = p + (1.0 - p) * cfg.hot_fraction;
        let measured = hot as f64 / total as f64;
        assert!(
            (measured - expected).abs() < 0.01,
            "hot share {measured}, expected {expected}"
        );
    }

    #[test]
    fn restricted_generation_keeps_the_filtered_law() {
        let sampler = RegionSampler::new(tierkit_core::SpaceScale::new(1.0 / 4.0), 11);
        let cfg = GupsConfig {
            footprint_mib: 128,
            nr_updates: 2_000_000,
            nr_threads: 2,
            gap_ns: 5,
            ..GupsConfig::default()
        };
        crate::testutil::check_restricted(&|| Box::new(Gups::new(&cfg, 4)), &sampler, 0.01);
        // Init writes exactly the kept pages of each thread's share, in order.
        let mut w = Gups::new(&cfg, 4);
        let table = w.table();
        assert!(w.restrict_to(&sampler));
        let d = drain(&mut w);
        let init: Vec<u64> = d.streams[0]
            .iter()
            .flat_map(|s| {
                accesses(s)
                    .take_while(|&(_, w, g)| w && g == 0)
                    .map(|a| a.0)
            })
            .collect();
        let want: Vec<u64> = (0..table.len / PAGE_SIZE)
            .map(|p| table.addr + p * PAGE_SIZE)
            .filter(|&a| sampler.keeps(0, a))
            .collect();
        assert_eq!(init, want);
    }

    #[test]
    fn validate_names_the_bad_field() {
        let bad = |f: &dyn Fn(&mut GupsConfig), field: &str| {
            let mut c = GupsConfig::default();
            f(&mut c);
            let e = c.validate().unwrap_err();
            assert!(e.to_string().contains(field), "{e:?} should name {field}");
        };
        bad(&|c| c.footprint_mib = 0, "footprint_mib");
        bad(&|c| c.hot_probability = 1.5, "hot_probability");
        bad(&|c| c.hot_probability = -0.1, "hot_probability");
        bad(&|c| c.hot_fraction = 0.0, "hot_fraction");
        bad(&|c| c.hot_fraction = 1.01, "hot_fraction");
        bad(&|c| c.hot_offset_fraction = -0.5, "hot_offset_fraction");
        bad(&|c| c.hot_offset_fraction = 0.95, "hot_offset_fraction");
        bad(&|c| c.scale = 0.0, "scale");
        bad(&|c| c.scale = -1.0, "scale");
        bad(&|c| c.scale = f64::NAN, "scale");
        bad(&|c| c.nr_threads = 0, "nr_threads");
        bad(&|c| c.mlp = 0.5, "mlp");
        bad(&|c| c.footprint_mib = u64::MAX / 2, "footprint_mib");
        GupsConfig::default().validate().unwrap();
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(24))]
        #[test]
        fn any_valid_config_stays_inside_its_mapping(
            footprint_mib in 1u64..12,
            nr_updates in 0u64..3000,
            nr_threads in 1u32..5,
            hot_probability in 0.0f64..=1.0,
            hot_fraction in 0.001f64..=1.0,
            offset in 0.0f64..=1.0,
            scale in 0.05f64..2.0,
        ) {
            let cfg = GupsConfig {
                footprint_mib,
                nr_updates,
                nr_threads,
                hot_probability,
                hot_fraction,
                hot_offset_fraction: offset * (1.0 - hot_fraction),
                scale,
                ..GupsConfig::default()
            };
            prop_assert!(cfg.validate().is_ok());
            let mut w = Gups::new(&cfg, 5);
            let (lo, hi) = w.hot_range();
            prop_assert!(w.table().contains(lo) && hi <= w.table().end() && lo < hi);
            let d = drain(&mut w);
            check_structure(&w, &d);
        }
    }
}
