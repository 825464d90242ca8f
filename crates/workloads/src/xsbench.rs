//! `xsbench`: XSBench's macroscopic cross-section lookups (Tramm et al., PHYSOR
//! 2014), unionized-grid method, history-based — the HPC kernel MEMTIS and PET
//! evaluate.
//!
//! XSBench is the key loop of OpenMC's Monte Carlo neutron transport: each lookup
//! draws a neutron energy and a material, binary-searches the *unionized* energy
//! grid (every nuclide's energy points merged and sorted), and for each nuclide of
//! the material reads the nuclide's grid index for that energy from the *index
//! grid* (one `int` per union point and nuclide — by far the largest array) and
//! then the two bracketing points of the nuclide's own energy grid (48-byte
//! `NuclideGridPoint`s: energy and five cross sections), which it interpolates and
//! accumulates weighted by the nuclide's concentration.
//!
//! ## Data (XSBench's, scaled)
//!
//! `n_isotopes` nuclides (355, XSBench's "large") × `n_gridpoints` points each,
//! energies uniform in [0, 1) and sorted per nuclide (stratified: one point per
//! `1 / n_gridpoints` interval, see `Grids`); the unionized grid holds all of
//! them sorted; the index grid is `n_isotopes × n_gridpoints × n_isotopes` `int`s,
//! each the nuclide's grid index at or below the union energy (XSBench's
//! `idx_low` recurrence). The 12 materials have XSBench's nuclide counts
//! (321, 5, 4, 4, 27, 21, 21, 21, 21, 21, 9, 9; fuel is material 0) and its
//! material probabilities (0.140, 0.052, 0.275, 0.134, 0.154, 0.064, 0.066, 0.055,
//! 0.008, 0.015, 0.025, 0.013); which nuclides a material holds is drawn from the
//! seed (XSBench hard-codes lists; only their sizes shape the access stream). Every
//! energy is really generated and every search really performed, so the examined
//! grid points are the real ones.
//!
//! ## The stream
//!
//! Initialisation (thread 0 for the grids, every thread its share of the index
//! grid): one store per page, in allocation order (nuclide grids, unionized grid,
//! index grid, materials, verification). Each lookup: every grid point the binary
//! search examines (`grid_search`: ⌊log2⌋ or ⌈log2⌉ of the union length), the
//! material's nuclide count, then per nuclide its `mats` and `concs` entries
//! (streamed), its index-grid `int`, and the 96 bytes of its two bracketing grid
//! points (two or three lines); finally the lookup's verification entry. Lookups
//! are dealt to threads in chunks of 100, round-robin (`schedule(dynamic, 100)`);
//! each thread draws from its own random stream.
//!
//! The defaults give a 4 GiB footprint whose hot part is small — the union grid's
//! upper search levels, the fuel nuclides' grids — and whose bulk, the index grid,
//! is read one row per lookup at random: MEMTIS §6.2.2's "very skewed hot memory
//! region allocated at an early stage".

use rand::RngCore;
use rand_xoshiro::Xoshiro256PlusPlus;
use serde::{Deserialize, Serialize};
use std::sync::Arc;
use tierkit_core::{ConfigError, Op, ProcessShape, VmaKind, Workload, WorkloadShape, PAGE_SIZE};

use crate::common;
use crate::graph::engine::{access_range, Counter, Sink, Stream};
use crate::graph::tagged_rng;
use crate::layout::{Layout, Mapping};
use crate::{thread_rng, BATCH_OPS};

const NAME: &str = "xsbench";
/// Bytes of a `NuclideGridPoint` (six doubles).
pub const GRID_POINT_BYTES: u64 = 48;
/// XSBench's number of nuclides per material (large problem), fuel first.
pub const NUM_NUCS: [u32; 12] = [321, 5, 4, 4, 27, 21, 21, 21, 21, 21, 9, 9];
/// XSBench's material probabilities (`pick_mat`).
pub const MAT_DIST: [f64; 12] = [
    0.140, 0.052, 0.275, 0.134, 0.154, 0.064, 0.066, 0.055, 0.008, 0.015, 0.025, 0.013,
];
/// Lookups per dealt chunk (`schedule(dynamic, 100)`).
const CHUNK: u64 = 100;

/// Configuration of [`Xsbench`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct XsbenchConfig {
    /// Nuclides (XSBench's `-n`/"large": 355). Default 355. Range [321, 100 000]
    /// (the fuel material holds 321).
    pub n_isotopes: u32,
    /// Energy points per nuclide before `scale` (XSBench's `-g`; "large" has
    /// 11303). Default 8192, which makes the footprint 4 GiB. Range >= 2.
    pub n_gridpoints: u64,
    /// Lookups before `scale` (XSBench's `-l`; 15 M by default there). Default
    /// 600 000 (≈ 150 M accesses). Range >= 0.
    pub nr_lookups: u64,
    /// Compute before each access, in ns. Default 2 (interpolation arithmetic).
    pub gap_ns: u32,
    /// Multiplies `n_gridpoints` and `nr_lookups` together. Default 1.0.
    pub scale: f64,
    /// Number of threads. Default 1.
    pub nr_threads: u32,
    /// Memory-level parallelism. Default 4.0: the binary search is a chain of
    /// dependent loads, but the nuclides of a material are independent.
    pub mlp: f64,
}

impl Default for XsbenchConfig {
    fn default() -> Self {
        XsbenchConfig {
            n_isotopes: 355,
            n_gridpoints: 8192,
            nr_lookups: 600_000,
            gap_ns: 2,
            scale: 1.0,
            nr_threads: 1,
            mlp: 4.0,
        }
    }
}

impl XsbenchConfig {
    /// Check every field; the error names the field and its valid range.
    pub fn validate(&self) -> Result<(), ConfigError> {
        if !(NUM_NUCS[0]..=100_000).contains(&self.n_isotopes) {
            return Err(format!(
                "{NAME}.n_isotopes must be in [{}, 100000], got {}",
                NUM_NUCS[0], self.n_isotopes
            )
            .into());
        }
        common::check_common(NAME, self.scale, self.nr_threads, self.mlp)?;
        let g = common::scaled(self.n_gridpoints, self.scale);
        if g < 2 {
            return Err(format!(
                "{NAME}.n_gridpoints × scale must be >= 2, got {}",
                self.n_gridpoints as f64 * self.scale
            )
            .into());
        }
        let union = g as f64 * self.n_isotopes as f64;
        if union > i32::MAX as f64 {
            return Err(format!(
                "{NAME}.n_gridpoints × scale × n_isotopes must fit XSBench's int indices, got {union}"
            ).into());
        }
        common::check_footprint(
            NAME,
            "n_gridpoints",
            union * (GRID_POINT_BYTES as f64 + 8.0 + 4.0 * self.n_isotopes as f64),
        )
    }
}

/// The grids' contents (host side).
///
/// Nuclide energies are *stratified* uniform: nuclide `n`'s `i`-th point is
/// `(i + u(n, i)) / n_gridpoints` with `u` a seeded hash in [0, 1). XSBench draws
/// them i.i.d. uniform and sorts them; the stratified points have the same
/// distribution per point to within one grid spacing, are sorted by construction,
/// and make a nuclide's grid index for an energy computable in O(1) (one hash)
/// instead of a binary search through 64 KiB of host memory per nuclide and
/// lookup, which would make the generator slower than the simulator. The unionized
/// grid is built from them for real and binary-searched for real.
#[derive(Debug)]
struct Grids {
    seed: u64,
    n_isotopes: u64,
    n_gridpoints: u64,
    /// The unionized grid: every nuclide energy, sorted.
    union: Vec<f64>,
    /// `mats[m]`: the nuclides of material `m`.
    mats: Vec<Vec<u32>>,
    /// Largest material size (XSBench's `max_num_nucs`, the row stride of `mats`).
    max_num_nucs: u64,
}

impl Grids {
    fn generate(n_isotopes: u64, n_gridpoints: u64, seed: u64) -> Grids {
        let mut g = Grids {
            seed,
            n_isotopes,
            n_gridpoints,
            union: Vec::new(),
            mats: Vec::new(),
            max_num_nucs: u64::from(NUM_NUCS[0]),
        };
        let mut union = Vec::with_capacity((n_isotopes * n_gridpoints) as usize);
        for nuc in 0..n_isotopes {
            union.extend((0..n_gridpoints).map(|i| g.energy(nuc, i)));
        }
        union.sort_unstable_by(f64::total_cmp);
        g.union = union;
        // Materials: each gets distinct nuclides; a seeded partial shuffle of the
        // ids decides which.
        let mut rng = tagged_rng(seed, 20);
        let mut ids: Vec<u32> = (0..n_isotopes as u32).collect();
        g.mats = NUM_NUCS
            .iter()
            .map(|&k| {
                for i in 0..k as usize {
                    let j = i + common::below(&mut rng, n_isotopes - i as u64) as usize;
                    ids.swap(i, j);
                }
                let mut m = ids[..k as usize].to_vec();
                m.sort_unstable();
                m
            })
            .collect();
        g
    }

    /// Energy of point `i` of nuclide `nuc`.
    #[inline]
    fn energy(&self, nuc: u64, i: u64) -> f64 {
        let h = common::mix64(self.seed ^ common::mix64(nuc << 32 | i));
        let u = (h >> 11) as f64 / (1u64 << 53) as f64;
        (i as f64 + u) / self.n_gridpoints as f64
    }

    /// The index-grid entry for union point `e` and nuclide `nuc`: the nuclide's
    /// last grid index at or below the union energy (0 before its first point),
    /// XSBench's `idx_low` recurrence.
    #[inline]
    fn index(&self, e: u64, nuc: u64) -> u64 {
        let x = self.union[e as usize];
        let i0 = ((x * self.n_gridpoints as f64) as u64).min(self.n_gridpoints - 1);
        // Points below i0 are below i0 / g <= x; points above i0 are above x.
        if self.energy(nuc, i0) <= x {
            i0
        } else {
            i0.saturating_sub(1)
        }
    }
}

/// Per-thread progress.
#[derive(Debug, Clone)]
struct ThreadState {
    rng: Xoshiro256PlusPlus,
    /// The thread's current chunk of lookups (it gets chunks `t`, `t + T`, ...),
    /// its next lookup index (global numbering) and the chunk's end.
    chunk: u64,
    next: u64,
    chunk_end: u64,
    /// Initialisation pages emitted so far of each mapping.
    init_done: Vec<u64>,
    verify: Stream,
}

/// The XSBench generator (see the module docs).
#[derive(Debug, Clone)]
pub struct Xsbench {
    nuclide_grids: Mapping,
    energy_grid: Mapping,
    index_grid: Mapping,
    materials: Mapping,
    verification: Mapping,
    grids: Arc<Grids>,
    nr_lookups: u64,
    gap_ns: u32,
    nr_threads: u32,
    mlp: f64,
    expected: u64,
    threads: Vec<ThreadState>,
}

/// Most accesses one lookup emits: the search (at most 32 for `int` indices), the
/// count, six per nuclide (mats, concs, index, three grid lines), the verification
/// entry.
fn max_lookup_ops(max_nucs: u64) -> usize {
    (32 + 1 + 6 * max_nucs + 1) as usize
}

impl Xsbench {
    /// Generate the grids for `cfg` with `seed`.
    ///
    /// # Panics
    /// If `cfg` does not pass [`XsbenchConfig::validate`].
    pub fn new(cfg: &XsbenchConfig, seed: u64) -> Self {
        if let Err(e) = cfg.validate() {
            panic!("invalid {NAME} config: {e}");
        }
        let n_isotopes = u64::from(cfg.n_isotopes);
        let n_gridpoints = common::scaled(cfg.n_gridpoints, cfg.scale);
        let nr_lookups = common::scaled(cfg.nr_lookups, cfg.scale);
        let grids = Grids::generate(n_isotopes, n_gridpoints, seed);
        let union_len = n_isotopes * n_gridpoints;
        let mut layout = Layout::new();
        let nuclide_grids = layout.map(union_len * GRID_POINT_BYTES, VmaKind::Anon);
        let energy_grid = layout.map(union_len * 8, VmaKind::Anon);
        let index_grid = layout.map(union_len * n_isotopes * 4, VmaKind::Anon);
        // num_nucs, mats and concs: small heap allocations, one mapping.
        let materials = layout.map(12 * 4 + 12 * grids.max_num_nucs * 12, VmaKind::Anon);
        let verification = layout.map(nr_lookups.max(1) * 4, VmaKind::Anon);
        let maps = [
            nuclide_grids,
            energy_grid,
            index_grid,
            materials,
            verification,
        ];
        let threads = (0..cfg.nr_threads as usize)
            .map(|t| {
                let start = (t as u64 * CHUNK).min(nr_lookups);
                ThreadState {
                    rng: thread_rng(seed, 0, t),
                    chunk: t as u64,
                    next: start,
                    chunk_end: (start + CHUNK).min(nr_lookups),
                    init_done: maps
                        .iter()
                        .enumerate()
                        .map(|(i, m)| Self::init_share(i, m, cfg.nr_threads, t).0)
                        .collect(),
                    verify: Stream::default(),
                }
            })
            .collect();
        let mut w = Xsbench {
            nuclide_grids,
            energy_grid,
            index_grid,
            materials,
            verification,
            grids: Arc::new(grids),
            nr_lookups,
            gap_ns: cfg.gap_ns,
            nr_threads: cfg.nr_threads,
            mlp: cfg.mlp,
            expected: 0,
            threads,
        };
        w.expected = w.count();
        w
    }

    /// The mappings: nuclide grids, unionized energy grid, index grid, materials,
    /// verification.
    pub fn mappings(&self) -> [Mapping; 5] {
        [
            self.nuclide_grids,
            self.energy_grid,
            self.index_grid,
            self.materials,
            self.verification,
        ]
    }

    /// Length of the unionized grid.
    pub fn union_len(&self) -> u64 {
        self.grids.union.len() as u64
    }

    /// Thread `t`'s pages `[lo, hi)` of mapping `i` to first-touch: the index grid
    /// (mapping 2, built by a parallel loop) is split over the threads, the rest
    /// is thread 0's.
    fn init_share(i: usize, m: &Mapping, nr_threads: u32, t: usize) -> (u64, u64) {
        let pages = m.len / PAGE_SIZE;
        if i == 2 {
            common::share(pages, nr_threads, t)
        } else if t == 0 {
            (0, pages)
        } else {
            (pages, pages)
        }
    }

    fn count(&self) -> u64 {
        let mut c = Counter::default();
        let mut pages = 0;
        for (t, st) in self.threads.iter().enumerate() {
            for (i, m) in self.mappings().iter().enumerate() {
                let (lo, hi) = Self::init_share(i, m, self.nr_threads, t);
                pages += hi - lo;
            }
            let mut st = st.clone();
            while self.next_lookup(&mut st) {
                self.lookup(&mut c, &mut st);
            }
        }
        pages + c.accesses
    }

    /// Advance `st` to its next lookup; false once its share is done.
    fn next_lookup(&self, st: &mut ThreadState) -> bool {
        if st.next >= st.chunk_end {
            st.chunk += self.nr_threads as u64;
            let start = st.chunk.saturating_mul(CHUNK);
            if start >= self.nr_lookups {
                return false;
            }
            st.next = start;
            st.chunk_end = (start + CHUNK).min(self.nr_lookups);
        }
        true
    }

    /// XSBench's `grid_search`, emitting every examined point; returns the index.
    #[inline]
    fn grid_search<S: Sink>(&self, s: &mut S, quarry: f64) -> u64 {
        let a = &self.grids.union;
        let mut lower = 0u64;
        let mut upper = a.len() as u64 - 1;
        let mut length = upper - lower;
        while length > 1 {
            let exam = lower + length / 2;
            s.access(0, self.energy_grid.addr + exam * 8, false);
            if a[exam as usize] > quarry {
                upper = exam;
            } else {
                lower = exam;
            }
            length = upper - lower;
        }
        lower
    }

    /// XSBench's `pick_mat`.
    fn pick_mat(rng: &mut Xoshiro256PlusPlus) -> usize {
        let roll = (rng.next_u64() >> 11) as f64 / (1u64 << 53) as f64;
        let mut acc = 0.0;
        for (m, &p) in MAT_DIST.iter().enumerate().skip(1) {
            acc += p;
            if roll < acc {
                return m;
            }
        }
        0
    }

    /// One lookup (`calculate_macro_xs`) by the thread whose state is `st`.
    fn lookup<S: Sink>(&self, s: &mut S, st: &mut ThreadState) {
        let g = &*self.grids;
        let p_energy = (st.rng.next_u64() >> 11) as f64 / (1u64 << 53) as f64;
        let mat = Self::pick_mat(&mut st.rng);
        let idx = self.grid_search(s, p_energy);
        let mats_at = self.materials.addr + 12 * 4;
        let concs_at = mats_at + 12 * g.max_num_nucs * 4;
        s.access(0, self.materials.addr + mat as u64 * 4, false);
        let (mut ms, mut cs) = (Stream::default(), Stream::default());
        for (j, &nuc) in g.mats[mat].iter().enumerate() {
            let slot = mat as u64 * g.max_num_nucs + j as u64;
            ms.touch(s, 0, mats_at + slot * 4, false);
            cs.touch(s, 0, concs_at + slot * 8, false);
            let nuc = u64::from(nuc);
            s.access(
                0,
                self.index_grid.addr + (idx * g.n_isotopes + nuc) * 4,
                false,
            );
            let mut low = g.index(idx, nuc);
            if low >= g.n_gridpoints - 1 {
                low = g.n_gridpoints - 2;
            }
            let at = self.nuclide_grids.addr + (nuc * g.n_gridpoints + low) * GRID_POINT_BYTES;
            access_range(s, 0, at, 2 * GRID_POINT_BYTES, false);
        }
        st.verify
            .touch(s, 0, self.verification.addr + st.next * 4, true);
        st.next += 1;
    }
}

/// A sink appending to a thread's output batch.
struct OutSink<'a> {
    out: &'a mut Vec<Op>,
    gap_ns: u32,
}

impl Sink for OutSink<'_> {
    #[inline]
    fn access(&mut self, _thread: usize, addr: u64, write: bool) {
        self.out.push(Op::Access {
            addr,
            write,
            gap_ns: self.gap_ns,
        });
    }
}

impl Workload for Xsbench {
    fn shape(&self) -> WorkloadShape {
        WorkloadShape {
            processes: vec![ProcessShape {
                name: NAME.to_string(),
                nr_threads: self.nr_threads,
                mlp: self.mlp,
            }],
            footprint_bytes: self.mappings().iter().map(|m| m.len).sum(),
        }
    }

    fn prologue(&mut self, process: usize, out: &mut Vec<Op>) {
        if process == 0 {
            out.extend(self.mappings().iter().map(|m| m.mmap_op()));
        }
    }

    fn fill(&mut self, process: usize, thread: usize, out: &mut Vec<Op>) {
        if process != 0 || thread >= self.threads.len() {
            return;
        }
        out.reserve(BATCH_OPS);
        let mut st = self.threads[thread].clone();
        for (i, m) in self.mappings().iter().enumerate() {
            let (_, hi) = Self::init_share(i, m, self.nr_threads, thread);
            while st.init_done[i] < hi && out.len() < BATCH_OPS {
                out.push(Op::Access {
                    addr: m.addr + st.init_done[i] * PAGE_SIZE,
                    write: true,
                    gap_ns: 0,
                });
                st.init_done[i] += 1;
            }
        }
        let max_ops = max_lookup_ops(self.grids.max_num_nucs);
        let mut sink = OutSink {
            out,
            gap_ns: self.gap_ns,
        };
        while sink.out.len() + max_ops <= BATCH_OPS && self.next_lookup(&mut st) {
            self.lookup(&mut sink, &mut st);
        }
        self.threads[thread] = st;
    }

    fn expected_accesses(&self) -> Option<u64> {
        Some(self.expected)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::graph::engine::testing::{Event, Recorder};
    use crate::testutil::{check_structure, drain};

    fn small(n_gridpoints: u64, nr_lookups: u64, nr_threads: u32) -> XsbenchConfig {
        XsbenchConfig {
            n_gridpoints,
            nr_lookups,
            nr_threads,
            ..XsbenchConfig::default()
        }
    }

    #[test]
    fn same_seed_same_stream_different_seed_different_stream() {
        let cfg = small(16, 2000, 2);
        let a = drain(&mut Xsbench::new(&cfg, 7));
        let b = drain(&mut Xsbench::new(&cfg, 7));
        let c = drain(&mut Xsbench::new(&cfg, 8));
        assert_eq!(a.streams, b.streams);
        assert_ne!(a.streams, c.streams);
        assert_ne!(a.streams[0][0], a.streams[0][1]);
    }

    #[test]
    fn footprint_mappings_and_access_count() {
        let mut w = Xsbench::new(&small(20, 1500, 3), 1);
        let d = drain(&mut w);
        assert_eq!(d.mappings, w.mappings().to_vec());
        check_structure(&w, &d);
        // The default is XSBench-large-like: 4 GiB, nearly all index grid.
        let c = XsbenchConfig::default();
        let union = u64::from(c.n_isotopes) * c.n_gridpoints;
        assert!(union * u64::from(c.n_isotopes) * 4 > 4_000_000_000);
    }

    #[test]
    fn the_index_grid_follows_xsbench_recurrence() {
        let g = Grids::generate(321, 12, 3);
        // The stratified energies are sorted per nuclide and the union is sorted.
        for nuc in 0..321 {
            for i in 1..12 {
                assert!(g.energy(nuc, i - 1) < g.energy(nuc, i));
            }
        }
        assert!(g.union.windows(2).all(|w| w[0] <= w[1]));
        let mut idx_low = vec![0u64; 321];
        for e in 0..g.union.len() as u64 {
            for nuc in 0..321u64 {
                let i = idx_low[nuc as usize];
                if i < 11 && g.union[e as usize] >= g.energy(nuc, i + 1) {
                    idx_low[nuc as usize] += 1;
                }
                assert_eq!(g.index(e, nuc), idx_low[nuc as usize], "e {e} nuc {nuc}");
            }
        }
    }

    #[test]
    fn lookups_binary_search_the_union_grid_then_read_each_nuclide() {
        let w = Xsbench::new(&small(64, 0, 1), 2);
        let n = w.union_len();
        let log2 = ((n - 1) as f64).log2();
        let mut st = w.threads[0].clone();
        let mut fuel = 0;
        let mut total_nucs = 0usize;
        for i in 0..3000 {
            let mut r = Recorder::default();
            let mut probe = st.rng.clone();
            let _ = probe.next_u64();
            let mat = Xsbench::pick_mat(&mut probe);
            st.next = i;
            w.lookup(&mut r, &mut st);
            let addrs: Vec<u64> = r
                .events
                .iter()
                .map(|e| match *e {
                    Event::Access { addr, .. } => addr,
                    _ => unreachable!(),
                })
                .collect();
            // The search comes first: a run of energy-grid reads of ⌊log2⌋ or
            // ⌈log2⌉ of (n - 1) points, each inside the previous interval.
            let search = addrs
                .iter()
                .take_while(|&&a| w.energy_grid.contains(a))
                .count();
            assert!(
                search as f64 >= log2.floor() && search as f64 <= log2.ceil(),
                "{search} probes for {n} points"
            );
            assert!(addrs[search..].iter().all(|&a| !w.energy_grid.contains(a)));
            // One index-grid entry per nuclide of the material, all in one row.
            let index: Vec<u64> = addrs
                .iter()
                .filter(|&&a| w.index_grid.contains(a))
                .map(|&a| (a - w.index_grid.addr) / 4)
                .collect();
            assert_eq!(index.len(), NUM_NUCS[mat] as usize);
            let row = index[0] / 355;
            assert!(index.iter().all(|&x| x / 355 == row));
            // Two bracketing grid points per nuclide: 2 or 3 lines each.
            let points = addrs
                .iter()
                .filter(|&&a| w.nuclide_grids.contains(a))
                .count();
            assert!(points >= 2 * index.len() && points <= 3 * index.len());
            fuel += usize::from(mat == 0);
            total_nucs += index.len();
        }
        // Fuel is drawn 14% of the time; 55.7 nuclides per lookup on average.
        let share = fuel as f64 / 3000.0;
        assert!((share - 0.14).abs() < 0.025, "fuel share {share}");
        let mean = total_nucs as f64 / 3000.0;
        assert!((mean - 55.7).abs() < 6.0, "{mean} nuclides per lookup");
    }

    #[test]
    fn lookups_are_dealt_in_chunks_of_100() {
        let w = Xsbench::new(&small(8, 450, 2), 3);
        let mut seen = Vec::new();
        for t in 0..2 {
            let mut st = w.threads[t].clone();
            let mut mine = Vec::new();
            while w.next_lookup(&mut st) {
                mine.push(st.next);
                st.next += 1;
            }
            seen.extend(mine.iter().copied());
            let expect: Vec<u64> = (0..450).filter(|i| (i / 100) as usize % 2 == t).collect();
            assert_eq!(mine, expect);
        }
        seen.sort_unstable();
        assert_eq!(seen, (0..450).collect::<Vec<_>>());
    }

    #[test]
    fn validate_names_the_bad_field() {
        let bad = |f: &dyn Fn(&mut XsbenchConfig), field: &str| {
            let mut c = XsbenchConfig::default();
            f(&mut c);
            let e = c.validate().unwrap_err();
            assert!(e.to_string().contains(field), "{e:?} should name {field}");
        };
        bad(&|c| c.n_isotopes = 100, "n_isotopes");
        bad(&|c| c.n_gridpoints = 1, "n_gridpoints");
        bad(&|c| c.n_gridpoints = 1 << 30, "n_gridpoints");
        bad(&|c| c.scale = -1.0, "scale");
        bad(&|c| c.nr_threads = 0, "nr_threads");
        bad(&|c| c.mlp = 100.0, "mlp");
        XsbenchConfig::default().validate().unwrap();
    }
}
