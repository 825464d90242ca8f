//! Graph analytics in the style of the GAP Benchmark Suite (Beamer et al.) on a
//! Graph500 Kronecker graph: `graph-bfs`, `graph-pr`, `graph-cc` and `graph-bc`.
//!
//! The graph tiering papers evaluate on (FreqTier, MEMTIS, Chrono, MULTI-CLOCK and
//! PET all run GAP kernels or Graph500) is reproduced here, not imitated: the kernels
//! are GAP's algorithms ([`bfs`]: direction-optimizing BFS, [`pagerank`]: pull
//! PageRank, [`cc`]: Afforest, [`bc`]: Brandes), run for real on host-side arrays,
//! and every load and store they make to the graph and to their per-vertex arrays
//! becomes an access at that element's address in the simulated address space.
//!
//! ## The graph
//!
//! [`kronecker`] is GAP's `-g` generator: `2^graph_scale` vertices,
//! `edge_factor × 2^graph_scale` R-MAT edges with the Graph500 initiator
//! (a, b, c, d) = (0.57, 0.19, 0.19, 0.05), vertex ids randomly relabelled (GAP's
//! `PermuteIDs`, which scatters the hubs over the id space — and so over the pages of
//! every per-vertex array; here a seeded bijection rather than a shuffled table, see
//! `Relabel`), symmetrised (GAP symmetrises every synthetic graph), and
//! squished: each neighbour list sorted, duplicates and self-loops removed. The
//! result is GAP's CSR: an offsets array (8-byte `SGOffset`, `n + 1` entries) and one
//! neighbours array (4-byte `NodeID`s), each its own anonymous mapping.
//!
//! The graph is built deterministically from the seed *in host memory* when the
//! workload is constructed; the stream only carries its first touch: one store per
//! 4 KiB page of the offsets and then the neighbours array, each thread writing its
//! contiguous block, which is how GAP's last build step (`SquishCSR`, a parallel
//! copy into freshly allocated arrays) faults them in. Emitting the whole build (a
//! random scatter of every edge) would spend more accesses than the kernel itself.
//!
//! ## Parameters every kernel shares
//!
//! `graph_scale` (log2 of the vertex count), `edge_factor` (16, Graph500's), `nr_trials`
//! (GAP's `-n`: the kernel is run that many times on the same graph, each trial
//! re-initialising its arrays), `gap_ns` (compute before each access), and the
//! common `scale`, `nr_threads` and `mlp`. `scale` grows the graph:
//! the effective graph scale is `graph_scale + round(log2(scale))`, so `scale = 2`
//! doubles vertices, edges and accesses together (R-MAT needs a power-of-two vertex
//! count, hence the rounding).
//!
//! ## Trials
//!
//! GAP runs a kernel `nr_trials` times on one graph (`-n`). A tiering policy acts on
//! periods of seconds to minutes, so a faithful run of a small machine-time kernel
//! needs many trials, and each computed trial costs the host as much as simulating
//! it. `computed_trials` (0: all) computes only that many; the remaining trials
//! replay the computed trials' accesses in turn, each thread its own
//! (`engine.rs`, "Replayed trials"). For PageRank every trial makes the same accesses,
//! so a replay is exact; for BFS and BC a replayed trial repeats a computed trial's
//! source, and for CC its sampled neighbours. A sampled run
//! ([`tierkit_core::Workload::restrict_to`]) records and replays only the kept regions.
//!
//! ## Why the defaults are smaller than 2 GiB
//!
//! Every pass of a graph kernel makes one data-dependent access per edge (4 bytes of
//! the neighbours array), so a footprint of `F` bytes costs about `F / 4` accesses
//! per pass. Within the suite's budget of 100–200 M accesses per default run the
//! defaults therefore keep the kernels' repetition (several BFS sources, PageRank
//! iterations, BC sources) and scale the graph to fit; `scale` grows it (each
//! doubling doubles footprint and run length).
//!
//! ## Threads
//!
//! Each parallel loop is dealt to `nr_threads` threads with the schedule GAP's
//! OpenMP pragma names (static blocks, or round-robin chunks for `dynamic`), and
//! executed by the deterministic engine of `graph/engine.rs`: threads advance together grain
//! by grain, and races (two threads claiming one vertex) resolve in that order.

use std::sync::Arc;
use tierkit_core::ConfigError;

use rand::{RngCore, SeedableRng};
use rand_xoshiro::Xoshiro256PlusPlus;
use tierkit_core::{Op, ProcessShape, RegionSampler, VmaKind, WorkloadShape, PAGE_SIZE};

use crate::common;
use crate::layout::{Layout, Mapping};

pub mod bc;
pub mod bfs;
pub mod cc;
pub(crate) mod engine;
pub mod pagerank;

use engine::{ParFor, Program, Runner, Schedule, Sink, Stream};

/// Graph500's R-MAT initiator probability of quadrant (0, 0).
pub const RMAT_A: f64 = 0.57;
/// Graph500's R-MAT initiator probability of quadrant (0, 1).
pub const RMAT_B: f64 = 0.19;
/// Graph500's R-MAT initiator probability of quadrant (1, 0); quadrant (1, 1) gets
/// the remaining 0.05.
pub const RMAT_C: f64 = 0.19;

/// Bytes of one offsets entry (GAP's `SGOffset`, an `int64_t`).
pub const OFFSET_BYTES: u64 = 8;
/// Bytes of one vertex id (GAP's `NodeID`, an `int32_t`).
pub const NODE_BYTES: u64 = 4;

/// Smallest accepted effective graph scale.
pub const MIN_GRAPH_SCALE: u32 = 4;
/// Largest accepted effective graph scale: GAP's 32-bit `NodeID`s (with negative
/// values reserved by BFS) cap the vertex count below 2^31.
pub const MAX_GRAPH_SCALE: u32 = 30;

/// Edges generated per random-number block: each block draws from its own seeded
/// stream (as GAP's generator does), so the generator can replay the edge list
/// without storing it.
const EDGE_BLOCK: u64 = 1 << 16;
/// log2 of the vertices per bucket of the CSR construction (their low bits fit a
/// `u16`).
const BUCKET_BITS: u32 = 16;

/// An undirected graph in CSR form: `neighbours[offsets[u]..offsets[u + 1]]` are
/// the neighbours of `u`, sorted, without duplicates or self-loops, and every edge
/// appears in both endpoints' lists.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Csr {
    /// `n + 1` offsets into `neighbours`.
    pub offsets: Vec<u64>,
    /// All neighbour lists, concatenated.
    pub neighbours: Vec<u32>,
}

impl Csr {
    /// Number of vertices.
    #[inline]
    pub fn nr_vertices(&self) -> u64 {
        self.offsets.len() as u64 - 1
    }

    /// Number of directed edges (each undirected edge counts twice), i.e. the length
    /// of the neighbours array.
    #[inline]
    pub fn nr_edges_directed(&self) -> u64 {
        self.neighbours.len() as u64
    }

    /// Degree of `u`.
    #[inline]
    pub fn degree(&self, u: u32) -> u64 {
        self.offsets[u as usize + 1] - self.offsets[u as usize]
    }

    /// Neighbours of `u`.
    #[inline]
    pub fn neigh(&self, u: u32) -> &[u32] {
        &self.neighbours[self.offsets[u as usize] as usize..self.offsets[u as usize + 1] as usize]
    }
}

/// Lookup table turning 16 random bits into two R-MAT levels at once: entry `x` is
/// `(src_bits << 2) | dst_bits` of the pair of quadrants whose cumulative
/// probability interval contains `x / 2^16` (quantisation error below 2^-16 per
/// outcome, the rarest outcome having probability 0.0025).
struct RmatTable {
    two: Vec<u8>,
    /// Thresholds (in 2^-16 units) for a single level: `< t[0]` is quadrant A, etc.
    one: [u32; 3],
}

impl RmatTable {
    fn new() -> Self {
        // Quadrant q = (src_bit << 1) | dst_bit: A = (0,0), B = (0,1), C = (1,0), D.
        let p = [RMAT_A, RMAT_B, RMAT_C, 1.0 - RMAT_A - RMAT_B - RMAT_C];
        let mut two = vec![0u8; 1 << 16];
        let mut cum = 0.0;
        let mut start = 0usize;
        for q1 in 0..4usize {
            for q2 in 0..4usize {
                cum += p[q1] * p[q2];
                let end = if q1 == 3 && q2 == 3 {
                    1 << 16
                } else {
                    (cum * 65536.0).round() as usize
                };
                let src = ((q1 >> 1) << 1 | (q2 >> 1)) as u8;
                let dst = ((q1 & 1) << 1 | (q2 & 1)) as u8;
                for e in &mut two[start..end] {
                    *e = src << 2 | dst;
                }
                start = end;
            }
        }
        let t = |x: f64| (x * 65536.0).round() as u32;
        RmatTable {
            two,
            one: [t(p[0]), t(p[0] + p[1]), t(p[0] + p[1] + p[2])],
        }
    }

    /// One R-MAT edge over `2^scale` vertices, before the id permutation.
    #[inline]
    fn edge<R: RngCore>(&self, rng: &mut R, scale: u32) -> (u32, u32) {
        let (mut src, mut dst) = (0u32, 0u32);
        let mut levels = scale;
        let mut bits = 0u64;
        let mut avail = 0;
        while levels >= 2 {
            if avail == 0 {
                bits = rng.next_u64();
                avail = 4;
            }
            let o = self.two[(bits & 0xffff) as usize] as u32;
            bits >>= 16;
            avail -= 1;
            src = src << 2 | o >> 2;
            dst = dst << 2 | (o & 3);
            levels -= 2;
        }
        if levels == 1 {
            let x = (rng.next_u64() & 0xffff) as u32;
            let q = self.one.iter().filter(|&&t| x >= t).count() as u32;
            src = src << 1 | q >> 1;
            dst = dst << 1 | (q & 1);
        }
        (src, dst)
    }
}

/// A random stream derived from `seed` and a purpose tag, independent of every
/// thread stream of [`crate::thread_rng`].
pub(crate) fn tagged_rng(seed: u64, tag: u64) -> Xoshiro256PlusPlus {
    Xoshiro256PlusPlus::seed_from_u64(common::mix64(
        common::mix64(seed ^ 0x6a09_e667_f3bc_c908) ^ tag,
    ))
}

/// A seeded bijection of `[0, 2^bits)`: the stand-in for GAP's Fisher-Yates
/// `PermuteIDs` that needs no table (a table lookup per edge endpoint is a cache
/// miss per endpoint at the sizes that matter). Rounds of xor with a key,
/// multiplication by an odd constant and a xor-shift, each invertible modulo
/// `2^bits`, scatter consecutive ids over the whole range.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Relabel {
    mask: u64,
    shift: u32,
    keys: [u64; 3],
    mults: [u64; 3],
}

impl Relabel {
    pub(crate) fn new(bits: u32, seed: u64) -> Self {
        let mut rng = tagged_rng(seed, 1);
        let mut draw = || rng.next_u64();
        Relabel {
            mask: (1u64 << bits) - 1,
            shift: bits.div_ceil(2).max(1),
            keys: [draw(), draw(), draw()],
            mults: [draw() | 1, draw() | 1, draw() | 1],
        }
    }

    #[inline]
    pub(crate) fn apply(&self, x: u32) -> u32 {
        self.apply64(u64::from(x)) as u32
    }

    #[inline]
    fn apply64(&self, mut x: u64) -> u64 {
        for r in 0..3 {
            x = (x ^ self.keys[r]) & self.mask;
            x = x.wrapping_mul(self.mults[r]) & self.mask;
            x ^= x >> self.shift;
        }
        x
    }
}

/// A seeded bijection of `[0, n)` for any `n >= 1`: a [`Relabel`] of the next power
/// of two, cycle-walked (re-applied until the value falls below `n`, which keeps
/// it a bijection; fewer than two rounds on average).
#[derive(Debug, Clone, Copy)]
pub(crate) struct Shuffle {
    relabel: Relabel,
    n: u64,
}

impl Shuffle {
    /// A bijection of `[0, n)` drawn from `seed`.
    pub(crate) fn new(n: u64, seed: u64) -> Self {
        let bits = (64 - n.max(2).saturating_sub(1).leading_zeros()).max(1);
        Shuffle {
            relabel: Relabel::new(bits, seed),
            n: n.max(1),
        }
    }

    /// The image of `x < n`.
    #[inline]
    pub(crate) fn apply(&self, x: u64) -> u64 {
        let mut y = self.relabel.apply64(x);
        while y >= self.n {
            y = self.relabel.apply64(y);
        }
        y
    }
}

/// Call `f(u, v)` for every R-MAT edge of the graph `(graph_scale, edge_factor,
/// seed)`, after the relabelling `perm`, in a fixed order.
fn for_each_edge(
    table: &RmatTable,
    graph_scale: u32,
    nr_edges: u64,
    seed: u64,
    perm: &Relabel,
    mut f: impl FnMut(u32, u32),
) {
    let mut block = 0;
    while block * EDGE_BLOCK < nr_edges {
        let mut rng = tagged_rng(seed, 1 << 40 | block);
        let end = ((block + 1) * EDGE_BLOCK).min(nr_edges);
        for _ in block * EDGE_BLOCK..end {
            let (u, v) = table.edge(&mut rng, graph_scale);
            f(perm.apply(u), perm.apply(v));
        }
        block += 1;
    }
}

/// GAP's Kronecker graph of `2^graph_scale` vertices and
/// `edge_factor × 2^graph_scale` generated edges, permuted, symmetrised and squished
/// (see the module docs). Deterministic in `seed`.
///
/// # Panics
/// If `graph_scale` is outside [`MIN_GRAPH_SCALE`]`..=`[`MAX_GRAPH_SCALE`].
pub fn kronecker(graph_scale: u32, edge_factor: u32, seed: u64) -> Csr {
    assert!(
        (MIN_GRAPH_SCALE..=MAX_GRAPH_SCALE).contains(&graph_scale),
        "graph scale {graph_scale} out of range"
    );
    let n = 1usize << graph_scale;
    let nr_edges = n as u64 * u64::from(edge_factor);
    let table = RmatTable::new();

    // GAP's PermuteIDs: a random relabelling of the vertices.
    let perm = Relabel::new(graph_scale, seed);

    // Symmetrised CSR of the raw edge list, built without random scatters over the
    // whole graph: the edge list is replayed (not stored) and bucketed by ranges of
    // 2^16 source vertices into the neighbours array, then each bucket is
    // counting-sorted by source within itself (in cache).
    let bucket_of = |u: u32| (u >> BUCKET_BITS) as usize;
    let nr_buckets = n.div_ceil(1 << BUCKET_BITS);
    let mut bucket_at = vec![0usize; nr_buckets + 1];
    for_each_edge(&table, graph_scale, nr_edges, seed, &perm, |u, v| {
        bucket_at[bucket_of(u) + 1] += 1;
        bucket_at[bucket_of(v) + 1] += 1;
    });
    for b in 0..nr_buckets {
        bucket_at[b + 1] += bucket_at[b];
    }
    let total = bucket_at[nr_buckets];
    let mut neighbours = vec![0u32; total];
    let mut low_bits = vec![0u16; total];
    let mut cursor = bucket_at.clone();
    for_each_edge(&table, graph_scale, nr_edges, seed, &perm, |u, v| {
        for (a, b) in [(u, v), (v, u)] {
            let c = &mut cursor[bucket_of(a)];
            neighbours[*c] = b;
            low_bits[*c] = a as u16;
            *c += 1;
        }
    });
    drop(cursor);
    let mut offsets = vec![0u64; n + 1];
    let mut scratch: Vec<u32> = Vec::new();
    let mut count = vec![0usize; (1 << BUCKET_BITS) + 1];
    for b in 0..nr_buckets {
        let (lo, hi) = (bucket_at[b], bucket_at[b + 1]);
        let first = b << BUCKET_BITS;
        let width = (n - first).min(1 << BUCKET_BITS);
        count[..=width].iter_mut().for_each(|c| *c = 0);
        for &l in &low_bits[lo..hi] {
            count[l as usize + 1] += 1;
        }
        for i in 0..width {
            count[i + 1] += count[i];
        }
        for i in 0..width {
            offsets[first + i + 1] = (lo + count[i + 1]) as u64;
        }
        scratch.clear();
        scratch.extend_from_slice(&neighbours[lo..hi]);
        for (i, &v) in scratch.iter().enumerate() {
            let c = &mut count[low_bits[lo + i] as usize];
            neighbours[lo + *c] = v;
            *c += 1;
        }
    }
    drop(low_bits);
    drop(scratch);

    // SquishCSR: sort each list, drop duplicates and self-loops, compact in place
    // (the write cursor never passes the read cursor).
    let mut w = 0usize;
    let mut lo = 0usize;
    for u in 0..n {
        let hi = offsets[u + 1] as usize;
        neighbours[lo..hi].sort_unstable();
        let mut last = u32::MAX;
        for i in lo..hi {
            let v = neighbours[i];
            if v != last && v as usize != u {
                neighbours[w] = v;
                w += 1;
            }
            last = v;
        }
        lo = hi;
        offsets[u + 1] = w as u64;
    }
    neighbours.truncate(w);
    neighbours.shrink_to_fit();
    Csr {
        offsets,
        neighbours,
    }
}

/// The effective graph scale for a configured `graph_scale` and `scale` (see the
/// module docs), possibly out of range (validation reports it).
pub fn effective_graph_scale(graph_scale: u32, scale: f64) -> i64 {
    graph_scale as i64 + scale.log2().round() as i64
}

/// Addresses of the CSR arrays in the simulated address space.
#[derive(Debug, Clone, Copy)]
pub(crate) struct GraphArrays {
    /// Base of the offsets array.
    pub offsets: u64,
    /// Base of the neighbours array.
    pub neighbours: u64,
}

impl GraphArrays {
    /// Address of `offsets[u]`.
    #[inline]
    pub fn off(&self, u: u64) -> u64 {
        self.offsets + u * OFFSET_BYTES
    }

    /// Address of `neighbours[e]`.
    #[inline]
    pub fn nb(&self, e: u64) -> u64 {
        self.neighbours + e * NODE_BYTES
    }

    /// Load `offsets[u]` and `offsets[u + 1]` for a vertex reached at random (one
    /// access, or two when they straddle a line).
    #[inline]
    pub fn read_offsets<S: Sink>(&self, s: &mut S, t: usize, u: u32) {
        let a = self.off(u as u64);
        s.access(t, a, false);
        if (a + OFFSET_BYTES) / engine::LINE_BYTES != a / engine::LINE_BYTES {
            s.access(t, a + OFFSET_BYTES, false);
        }
    }

    /// Load `offsets[u]` and `offsets[u + 1]` in a loop over vertices in order.
    #[inline]
    pub fn stream_offsets<S: Sink>(&self, os: &mut Stream, s: &mut S, t: usize, u: u32) {
        os.touch(s, t, self.off(u as u64), false);
        os.touch(s, t, self.off(u as u64 + 1), false);
    }
}

/// One graph kernel: an algorithm over a [`Csr`] and its own per-vertex arrays.
pub(crate) trait Kernel: Clone + Send {
    /// Run the next piece of the kernel (see [`Program::step`]).
    fn step<S: Sink>(&mut self, g: &Csr, a: &GraphArrays, s: &mut S) -> bool;
}

/// The whole program: first touch of the CSR, then the kernel.
#[derive(Debug, Clone)]
pub(crate) struct GraphProgram<K> {
    g: Arc<Csr>,
    arrays: GraphArrays,
    nr_threads: u32,
    /// 0: offsets' first touch, 1: neighbours', 2: kernel.
    init_stage: u8,
    init: ParFor,
    neighbour_pages: u64,
    pub(crate) kernel: K,
}

impl<K: Kernel> Program for GraphProgram<K> {
    fn step<S: Sink>(&mut self, s: &mut S) -> bool {
        while self.init_stage < 2 {
            if let Some((t, lo, hi)) = self.init.next_piece() {
                let base = if self.init_stage == 0 {
                    self.arrays.offsets
                } else {
                    self.arrays.neighbours
                };
                engine::first_touch(s, t, base, lo, hi);
                return true;
            }
            self.init_stage += 1;
            if self.init_stage == 1 {
                self.init =
                    ParFor::new(self.neighbour_pages, self.nr_threads, Schedule::Blocked, 16);
            } else {
                s.mark("graph-built");
            }
        }
        self.kernel.step(&self.g, &self.arrays, s)
    }
}

/// [`kronecker`], built once for a run of workloads on the same graph: the last graph
/// built is kept (by this process, for as long as it runs) and handed out again for
/// the same scale, edge factor and seed. A `compare` or `claims` process plans each
/// matrix (building every workload for its footprint) and then runs it, and its runs
/// record or generate streams from the same graph; a 2^25-vertex graph takes a minute
/// and 6.5 GB of host memory to build, and 2.3 GB to keep.
fn shared_kronecker(graph_scale: u32, edge_factor: u32, seed: u64) -> Arc<Csr> {
    static LAST: LastGraph = LastGraph::new();
    LAST.get(graph_scale, edge_factor, seed)
}

/// The last graph built, by its (scale, edge factor, seed). Builds are serialised,
/// which also bounds the host's peak memory to one build at a time.
struct LastGraph(std::sync::Mutex<Option<(GraphKey, Arc<Csr>)>>);

/// A Kronecker graph's (scale, edge factor, seed).
type GraphKey = (u32, u32, u64);

impl LastGraph {
    const fn new() -> LastGraph {
        LastGraph(std::sync::Mutex::new(None))
    }

    fn get(&self, graph_scale: u32, edge_factor: u32, seed: u64) -> Arc<Csr> {
        let key = (graph_scale, edge_factor, seed);
        // The slot is written only after a build completes, so a lock poisoned by a
        // panicking build still holds a sound graph (or none).
        let mut last = self.0.lock().unwrap_or_else(|e| e.into_inner());
        if let Some((k, g)) = last.as_ref() {
            if *k == key {
                return Arc::clone(g);
            }
        }
        // Let go of the old graph before building the next: one is kept.
        *last = None;
        let g = Arc::new(kronecker(graph_scale, edge_factor, seed));
        *last = Some((key, Arc::clone(&g)));
        g
    }
}

/// Settings every graph workload shares, after validation and `scale`.
#[derive(Debug, Clone, Copy)]
pub(crate) struct GraphSetup {
    pub graph_scale: u32,
    pub edge_factor: u32,
    pub nr_threads: u32,
    pub mlp: f64,
    pub gap_ns: u32,
    /// Trials replayed after the computed ones (see "Trials").
    pub replayed_trials: u32,
}

/// A graph kernel as a [`Workload`].
#[derive(Debug)]
pub(crate) struct GraphWorkload<K> {
    name: &'static str,
    g: Arc<Csr>,
    mappings: Vec<Mapping>,
    /// The program before its first access: counted on demand, and copied by tests.
    program_start: GraphProgram<K>,
    runner: Runner<GraphProgram<K>>,
    nr_threads: u32,
    mlp: f64,
    /// The access count, computed on first request: counting runs the whole program
    /// once more, which a sampled run (whose count nobody asks) need not pay.
    expected: std::sync::OnceLock<u64>,
}

impl<K: Kernel + std::fmt::Debug> GraphWorkload<K> {
    /// Build the graph for `setup` and `seed`, map the CSR, let `make` map the
    /// kernel's arrays and build its state, and count the program's accesses.
    pub(crate) fn new(
        name: &'static str,
        setup: &GraphSetup,
        seed: u64,
        make: impl FnOnce(&Csr, &mut Layout, &mut Vec<Mapping>) -> K,
    ) -> Self {
        let g = shared_kronecker(setup.graph_scale, setup.edge_factor, seed);
        let mut layout = Layout::new();
        let offsets = layout.map((g.nr_vertices() + 1) * OFFSET_BYTES, VmaKind::Anon);
        let neighbours = layout.map(g.nr_edges_directed().max(1) * NODE_BYTES, VmaKind::Anon);
        let mut mappings = vec![offsets, neighbours];
        let kernel = make(&g, &mut layout, &mut mappings);
        let program = GraphProgram {
            g: Arc::clone(&g),
            arrays: GraphArrays {
                offsets: offsets.addr,
                neighbours: neighbours.addr,
            },
            nr_threads: setup.nr_threads,
            init_stage: 0,
            init: ParFor::new(
                offsets.len / PAGE_SIZE,
                setup.nr_threads,
                Schedule::Blocked,
                16,
            ),
            neighbour_pages: neighbours.len / PAGE_SIZE,
            kernel,
        };
        GraphWorkload {
            name,
            g,
            mappings,
            program_start: program.clone(),
            runner: Runner::with_replays(
                program,
                setup.nr_threads,
                setup.gap_ns,
                setup.replayed_trials,
            ),
            nr_threads: setup.nr_threads,
            mlp: setup.mlp,
            expected: std::sync::OnceLock::new(),
        }
    }

    /// The graph.
    pub(crate) fn graph(&self) -> &Csr {
        &self.g
    }

    /// Every mapping, CSR first (offsets, neighbours), then the kernel's.
    pub(crate) fn mappings(&self) -> &[Mapping] {
        &self.mappings
    }

    /// A fresh copy of the program as it stands before the first access (for tests
    /// that record it with its marks).
    #[cfg(test)]
    pub(crate) fn program(&self) -> GraphProgram<K> {
        self.program_start.clone()
    }

    pub(crate) fn shape(&self) -> WorkloadShape {
        WorkloadShape {
            processes: vec![ProcessShape {
                name: self.name.to_string(),
                nr_threads: self.nr_threads,
                mlp: self.mlp,
            }],
            footprint_bytes: self.mappings.iter().map(|m| m.len).sum(),
        }
    }

    pub(crate) fn prologue(&mut self, process: usize, out: &mut Vec<Op>) {
        if process == 0 {
            out.extend(self.mappings.iter().map(|m| m.mmap_op()));
        }
    }

    pub(crate) fn fill(&mut self, process: usize, thread: usize, out: &mut Vec<Op>) {
        if process == 0 {
            self.runner.fill(thread, out);
        }
    }

    /// The whole stream's access count; `None` once restricted to a sample (as the
    /// other restricting workloads).
    pub(crate) fn expected_accesses(&self) -> Option<u64> {
        if self.runner.is_restricted() {
            return None;
        }
        Some(*self.expected.get_or_init(|| {
            engine::count_with_replays(&self.program_start, self.runner.replayed_trials())
        }))
    }

    /// Generate only the regions `sampler` keeps (one process: the run's process 0).
    pub(crate) fn restrict_to(&mut self, sampler: &RegionSampler) -> bool {
        self.runner.keep_only_sampled(sampler, &self.mappings);
        true
    }

    /// The pages that take at least `min_share` of the first trial's accesses (a copy
    /// of the program run on the host), as `(0, page)`: the kernel's replayed trials
    /// repeat its computed ones, and a GAP kernel's hottest pages (CC's root
    /// component's label) are its data's, not its trial's.
    pub(crate) fn time_sampled_pages(&self, min_share: f64) -> Vec<(u32, tierkit_core::Vpn)> {
        let first = self.mappings.iter().map(|m| m.addr).min().unwrap_or(0);
        let end = self.mappings.iter().map(|m| m.end()).max().unwrap_or(0);
        let span = first / tierkit_core::PAGE_SIZE..end.div_ceil(tierkit_core::PAGE_SIZE);
        engine::hot_pages(&self.program_start, span, min_share)
            .into_iter()
            .map(|vpn| (0, vpn))
            .collect()
    }
}

/// Define a public graph workload type wrapping `GraphWorkload<$kernel>`.
macro_rules! graph_workload {
    ($(#[$doc:meta])* $name:ident, $kernel:ty) => {
        $(#[$doc])*
        #[derive(Debug)]
        pub struct $name {
            pub(crate) inner: crate::graph::GraphWorkload<$kernel>,
        }

        impl $name {
            /// The generated graph.
            pub fn graph(&self) -> &crate::graph::Csr {
                self.inner.graph()
            }

            /// Every mapping: the CSR's offsets and neighbours, then the kernel's
            /// arrays in allocation order.
            pub fn mappings(&self) -> &[crate::layout::Mapping] {
                self.inner.mappings()
            }
        }

        impl tierkit_core::Workload for $name {
            fn shape(&self) -> tierkit_core::WorkloadShape {
                self.inner.shape()
            }
            fn prologue(&mut self, process: usize, out: &mut Vec<tierkit_core::Op>) {
                self.inner.prologue(process, out)
            }
            fn fill(&mut self, process: usize, thread: usize, out: &mut Vec<tierkit_core::Op>) {
                self.inner.fill(process, thread, out)
            }
            fn expected_accesses(&self) -> Option<u64> {
                self.inner.expected_accesses()
            }
            fn restrict_to(&mut self, sampler: &tierkit_core::RegionSampler) -> bool {
                self.inner.restrict_to(sampler)
            }
            fn time_sampled_pages(
                &mut self,
                _sampler: &tierkit_core::RegionSampler,
                min_share: f64,
            ) -> Vec<(u32, tierkit_core::Vpn)> {
                self.inner.time_sampled_pages(min_share)
            }
        }
    };
}
pub(crate) use graph_workload;

/// The checks every graph config shares; `per_vertex_bytes` is the kernel's own
/// array bytes per vertex (for the footprint bound).
#[allow(clippy::too_many_arguments)]
pub(crate) fn check_graph(
    name: &str,
    graph_scale: u32,
    edge_factor: u32,
    nr_trials: u32,
    computed_trials: u32,
    scale: f64,
    nr_threads: u32,
    mlp: f64,
    per_vertex_bytes: f64,
) -> Result<(), ConfigError> {
    common::check_common(name, scale, nr_threads, mlp)?;
    let eff = effective_graph_scale(graph_scale, scale);
    if !(MIN_GRAPH_SCALE as i64..=MAX_GRAPH_SCALE as i64).contains(&eff) {
        return Err(format!(
            "{name}.graph_scale + round(log2(scale)) must be in [{MIN_GRAPH_SCALE}, {MAX_GRAPH_SCALE}], got {graph_scale} + {} = {eff}",
            eff - graph_scale as i64
        ).into());
    }
    if !(1..=1024).contains(&edge_factor) {
        return Err(format!("{name}.edge_factor must be in [1, 1024], got {edge_factor}").into());
    }
    if nr_trials == 0 {
        return Err(format!("{name}.nr_trials must be >= 1, got 0").into());
    }
    if computed_trials > nr_trials {
        return Err(format!(
            "{name}.computed_trials must be in [0, nr_trials = {nr_trials}] (0: every trial computed), got {computed_trials}"
        )
        .into());
    }
    let n = (1u64 << eff) as f64;
    // Upper bound: no duplicate removal.
    let bytes = n * (OFFSET_BYTES as f64 + per_vertex_bytes)
        + 2.0 * n * edge_factor as f64 * NODE_BYTES as f64;
    common::check_footprint(name, "graph_scale", bytes)
}

/// The setup of a validated config.
#[allow(clippy::too_many_arguments)]
pub(crate) fn setup(
    graph_scale: u32,
    edge_factor: u32,
    nr_trials: u32,
    computed_trials: u32,
    scale: f64,
    nr_threads: u32,
    mlp: f64,
    gap_ns: u32,
) -> GraphSetup {
    GraphSetup {
        graph_scale: effective_graph_scale(graph_scale, scale) as u32,
        edge_factor,
        nr_threads,
        mlp,
        gap_ns,
        replayed_trials: nr_trials - trials_computed(nr_trials, computed_trials),
    }
}

/// The trials a kernel computes for `nr_trials` and `computed_trials` (0: all).
pub(crate) fn trials_computed(nr_trials: u32, computed_trials: u32) -> u32 {
    if computed_trials == 0 {
        nr_trials
    } else {
        computed_trials
    }
}

/// GAP's `SourcePicker`: a uniformly random vertex with at least one neighbour.
pub(crate) fn pick_source<R: RngCore>(g: &Csr, rng: &mut R) -> u32 {
    let n = g.nr_vertices();
    if g.nr_edges_directed() == 0 {
        return 0;
    }
    loop {
        let u = common::below(rng, n) as u32;
        if g.degree(u) > 0 {
            return u;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::engine::testing::{accesses_by_trial, record};
    use super::*;
    use crate::testutil::{accesses, check_restricted, check_structure, drain};
    use crate::{
        GraphBc, GraphBcConfig, GraphBfs, GraphBfsConfig, GraphCc, GraphCcConfig, GraphPr,
        GraphPrConfig,
    };
    use tierkit_core::Workload;

    #[test]
    fn kronecker_is_a_deterministic_simple_undirected_csr() {
        let g = kronecker(10, 16, 5);
        assert_eq!(g, kronecker(10, 16, 5));
        assert_ne!(g, kronecker(10, 16, 6));
        assert_eq!(g.nr_vertices(), 1024);
        let mut pairs = Vec::new();
        for u in 0..1024u32 {
            let l = g.neigh(u);
            assert!(l.windows(2).all(|w| w[0] < w[1]), "sorted, no duplicates");
            assert!(!l.contains(&u), "no self-loops");
            pairs.extend(l.iter().map(|&v| (u, v)));
        }
        // Symmetric: (u, v) present iff (v, u) present.
        let mut rev: Vec<_> = pairs.iter().map(|&(u, v)| (v, u)).collect();
        rev.sort_unstable();
        assert_eq!(pairs, rev);
        // Duplicates and self-loops were removed, but most of the 2 × 16 × 1024
        // directed edge slots survive.
        let e = g.nr_edges_directed();
        assert!(e < 2 * 16 * 1024 && e > 16 * 1024, "{e}");
    }

    #[test]
    fn workloads_on_the_same_graph_share_one_build() {
        let last = LastGraph::new();
        let a = last.get(9, 8, 3);
        let b = last.get(9, 8, 3);
        assert!(Arc::ptr_eq(&a, &b), "the same graph is built once");
        assert_eq!(*a, kronecker(9, 8, 3));
        let c = last.get(9, 8, 4);
        assert_eq!(*c, kronecker(9, 8, 4), "another seed is another graph");
        assert!(
            !Arc::ptr_eq(&last.get(9, 8, 3), &a),
            "only the last graph is kept"
        );
    }

    #[test]
    fn rmat_degrees_are_skewed() {
        let g = kronecker(16, 16, 1);
        let n = g.nr_vertices();
        let mean = g.nr_edges_directed() as f64 / n as f64;
        let max = (0..n as u32).map(|u| g.degree(u)).max().unwrap() as f64;
        // A uniform random graph of this density has max degree ≈ 2× the mean; R-MAT
        // with Graph500's initiator has hubs hundreds of times the mean.
        assert!(max > 100.0 * mean, "max {max}, mean {mean}");
        // And many vertices of degree 0 (R-MAT leaves a large share isolated).
        let isolated = (0..n as u32).filter(|&u| g.degree(u) == 0).count() as f64;
        assert!(isolated > 0.2 * n as f64, "{isolated} isolated of {n}");
        // The hubs are scattered by the permutation: the ten largest are not packed
        // at the start of the id space.
        let mut by_degree: Vec<u32> = (0..n as u32).collect();
        by_degree.sort_by_key(|&u| std::cmp::Reverse(g.degree(u)));
        assert!(by_degree[..10].iter().any(|&u| u as u64 > n / 2));
    }

    #[test]
    fn rmat_table_matches_the_initiator() {
        let t = RmatTable::new();
        let mut counts = [0u32; 16];
        for &o in &t.two {
            counts[o as usize] += 1;
        }
        // Outcome (src 00, dst 00) is A², (11, 11) is D².
        assert!((counts[0] as f64 / 65536.0 - RMAT_A * RMAT_A).abs() < 1e-4);
        let d = 1.0 - RMAT_A - RMAT_B - RMAT_C;
        assert!((counts[15] as f64 / 65536.0 - d * d).abs() < 1e-4);
    }

    #[test]
    fn relabelling_is_a_bijection() {
        for bits in [4u32, 5, 11] {
            let r = Relabel::new(bits, 3);
            let mut seen: Vec<u32> = (0..1u32 << bits).map(|x| r.apply(x)).collect();
            seen.sort_unstable();
            assert_eq!(seen, (0..1u32 << bits).collect::<Vec<_>>());
        }
    }

    #[test]
    fn shuffles_are_bijections_of_any_range() {
        for n in [1u64, 2, 3, 1000, 4097] {
            let sh = Shuffle::new(n, 9);
            let mut seen: Vec<u64> = (0..n).map(|x| sh.apply(x)).collect();
            seen.sort_unstable();
            assert_eq!(seen, (0..n).collect::<Vec<_>>());
        }
    }

    fn pr(nr_trials: u32, computed_trials: u32, nr_threads: u32) -> Box<dyn Workload> {
        Box::new(GraphPr::new(
            &GraphPrConfig {
                graph_scale: 10,
                nr_trials,
                computed_trials,
                nr_threads,
                ..GraphPrConfig::default()
            },
            5,
        ))
    }

    fn bfs(nr_trials: u32, computed_trials: u32, nr_threads: u32) -> Box<dyn Workload> {
        Box::new(GraphBfs::new(
            &GraphBfsConfig {
                graph_scale: 10,
                nr_trials,
                computed_trials,
                nr_threads,
                ..GraphBfsConfig::default()
            },
            5,
        ))
    }

    fn bc(nr_trials: u32, computed_trials: u32, nr_threads: u32) -> Box<dyn Workload> {
        Box::new(GraphBc::new(
            &GraphBcConfig {
                graph_scale: 10,
                nr_trials,
                computed_trials,
                nr_threads,
                ..GraphBcConfig::default()
            },
            5,
        ))
    }

    #[test]
    fn replayed_pagerank_trials_are_the_computed_stream() {
        // Every PageRank trial makes the same accesses, so replaying one computed trial
        // twice must give, thread by thread, exactly the stream of three computed ones.
        for threads in [1, 3] {
            let computed = drain(pr(3, 0, threads).as_mut());
            let mut w = pr(3, 1, threads);
            let replayed = drain(w.as_mut());
            assert_eq!(computed.streams, replayed.streams, "{threads} threads");
            check_structure(w.as_ref(), &replayed);
            assert_eq!(
                w.expected_accesses(),
                Some(replayed.streams[0].iter().flat_map(|t| accesses(t)).count() as u64)
            );
        }
    }

    #[test]
    fn replayed_bfs_trials_repeat_the_computed_trials_in_turn() {
        // One thread, so the global order is the thread's: the computed trials are the
        // slices between "trial" marks, and 5 trials of which 2 are computed must be
        // the build, T1, T2, then T1, T2, T1 again.
        let cfg = GraphBfsConfig {
            graph_scale: 10,
            nr_trials: 2,
            ..GraphBfsConfig::default()
        };
        let two = GraphBfs::new(&cfg, 5);
        let (build, trials) = accesses_by_trial(&record(&mut two.inner.program()));
        assert_eq!(trials.len(), 2);
        let (t1, t2) = (&trials[0], &trials[1]);
        assert!(t1 != t2, "the two sources differ");
        let want: Vec<(u64, bool)> = [&build, t1, t2, t1, t2, t1]
            .into_iter()
            .flatten()
            .copied()
            .collect();
        let mut w = bfs(5, 2, 1);
        let d = drain(w.as_mut());
        let got: Vec<(u64, bool)> = accesses(&d.streams[0][0])
            .map(|(a, wr, _)| (a, wr))
            .collect();
        assert_eq!(got, want);
        check_structure(w.as_ref(), &d);
        assert_eq!(w.expected_accesses(), Some(want.len() as u64));
    }

    #[test]
    fn restricted_graphs_emit_exactly_the_kept_part_of_their_stream() {
        use tierkit_core::SampleStrata;
        let sampler = tierkit_core::RegionSampler::new(tierkit_core::SpaceScale::new(0.25), 3);
        for strata in [
            SampleStrata::Address,
            SampleStrata::Mapping,
            SampleStrata::Page,
        ] {
            let sampler = sampler.clone().with_strata(strata);
            check_restricted(&|| pr(4, 1, 2), &sampler, 1e-12);
            check_restricted(&|| bfs(3, 2, 2), &sampler, 1e-12);
            check_restricted(&|| bfs(6, 2, 1), &sampler, 1e-12);
            check_restricted(&|| bc(3, 2, 2), &sampler, 1e-12);
        }
        let mut w = pr(2, 1, 1);
        assert!(w.restrict_to(&sampler));
        assert_eq!(
            w.expected_accesses(),
            None,
            "a sample's count is not announced"
        );
    }

    #[test]
    fn cc_pages_sampled_in_time_are_thinned_as_a_filter_thins_them() {
        use tierkit_core::{RegionSampler, SampleStrata, SpaceScale, StreamSampler, TimeThinning};
        let cc = || -> Box<dyn Workload> {
            Box::new(GraphCc::new(
                &GraphCcConfig {
                    graph_scale: 12,
                    nr_trials: 2,
                    nr_threads: 2,
                    ..GraphCcConfig::default()
                },
                5,
            ))
        };
        let sampler =
            RegionSampler::new(SpaceScale::new(0.25), 3).with_strata(SampleStrata::Mapping);
        let hot = cc().time_sampled_pages(&sampler, 0.01);
        // The giant component's root is vertex 0: the first page of `comp` (the
        // kernel's array, mapped after the CSR's two) is the hottest.
        let full = drain(cc().as_mut());
        let comp = full.mappings[2].addr >> tierkit_core::PAGE_SHIFT;
        assert_eq!(hot.first(), Some(&(0, comp)), "{hot:?}");
        let in_time = sampler.clone().with_time_sampled(hot.clone());
        let mut w = cc();
        assert!(w.restrict_to(&in_time));
        let restricted = drain(w.as_mut());
        // The filter a sampled run applies to a workload that does not restrict
        // itself: by mapping, and one access in N of each thread to each hot page.
        let mut stream = StreamSampler::new(in_time.clone());
        for m in &full.mappings {
            stream.observe(0, &m.mmap_op());
        }
        for (t, ops) in full.streams[0].iter().enumerate() {
            let mut thinning = TimeThinning::default();
            let (mut to_hot, mut kept_hot) = (0u64, 0u64);
            let filtered: Vec<(u64, bool)> = accesses(ops)
                .filter(|&(addr, _, _)| {
                    match in_time.time_sampled_index(0, addr >> tierkit_core::PAGE_SHIFT) {
                        Some(i) => {
                            to_hot += 1;
                            let keep = thinning.keeps(&in_time, 0, t as u32, i);
                            kept_hot += keep as u64;
                            keep
                        }
                        None => stream.keeps(0, addr),
                    }
                })
                .map(|(a, w, _)| (a, w))
                .collect();
            let got: Vec<(u64, bool)> = accesses(&restricted.streams[0][t])
                .map(|(a, w, _)| (a, w))
                .collect();
            assert_eq!(got, filtered, "thread {t}");
            // One in four of each hot page's accesses, give or take one per page.
            let n = hot.len() as u64;
            assert!(to_hot > 1000, "{to_hot}");
            assert!(
                kept_hot + n >= to_hot / 4 && kept_hot <= to_hot / 4 + n,
                "{kept_hot} of {to_hot}"
            );
        }
        // The hot pages are sampled in time only when asked.
        assert!(cc().time_sampled_pages(&sampler, 0.99).is_empty());
    }

    #[test]
    fn more_computed_trials_than_trials_is_refused() {
        let cfg = GraphPrConfig {
            nr_trials: 2,
            computed_trials: 3,
            ..GraphPrConfig::default()
        };
        let e = cfg.validate().unwrap_err().to_string();
        assert!(
            e.contains("graph-pr.computed_trials must be in [0, nr_trials = 2]"),
            "{e}"
        );
    }

    #[test]
    fn effective_scale_rounds_log2() {
        assert_eq!(effective_graph_scale(20, 1.0), 20);
        assert_eq!(effective_graph_scale(20, 2.0), 21);
        assert_eq!(effective_graph_scale(20, 1.0 / 256.0), 12);
        assert_eq!(effective_graph_scale(20, 3.0), 22);
    }
}

#[cfg(test)]
mod report {
    use crate::{count_accesses, WorkloadConfig};

    /// CPU time of the calling thread, in seconds (Linux `schedstat`), so that the
    /// measurement is not inflated by other processes sharing the cores.
    fn thread_cpu_secs() -> f64 {
        std::fs::read_to_string("/proc/thread-self/schedstat")
            .ok()
            .and_then(|s| s.split_whitespace().next()?.parse::<f64>().ok())
            .map_or(0.0, |ns| ns / 1e9)
    }

    /// Footprint, length, build time and generation speed of the default configs
    /// of the workloads named in `TIERKIT_REPORT` (comma separated; default: the
    /// four graph kernels), optionally at `TIERKIT_REPORT_SCALE`; times are CPU
    /// seconds of the measuring thread:
    /// `TIERKIT_REPORT=graph-bfs cargo test --release -p tierkit-workloads --lib -- --ignored --nocapture report_defaults`
    #[test]
    #[ignore = "a speed measurement (host-dependent, not asserted: speed targets live in tierkit bench); run it in release with --ignored --nocapture"]
    fn report_defaults() {
        let names = std::env::var("TIERKIT_REPORT")
            .unwrap_or_else(|_| "graph-bfs,graph-pr,graph-cc,graph-bc".to_string());
        let scale: Option<f64> = std::env::var("TIERKIT_REPORT_SCALE")
            .ok()
            .map(|s| s.parse().expect("a number"));
        for name in names.split(',') {
            let mut c = WorkloadConfig::default_for(name).expect("a registered name");
            if let Some(scale) = scale {
                let mut v = serde_json::to_value(&c).unwrap();
                v["scale"] = serde_json::json!(scale);
                c = serde_json::from_value(v).unwrap();
            }
            let start = thread_cpu_secs();
            let mut w = c.build(1);
            let built = thread_cpu_secs() - start;
            let shape = w.shape();
            let expected = w.expected_accesses().unwrap_or(0);
            let start = thread_cpu_secs();
            let n = count_accesses(w.as_mut(), 60_000_000);
            let secs = thread_cpu_secs() - start;
            println!(
                "{name:10} footprint {:7.1} MiB, {:6.1} M accesses, build {built:5.2} s, {:6.1} M accesses/s",
                shape.footprint_bytes as f64 / (1u64 << 20) as f64,
                expected as f64 / 1e6,
                n as f64 / secs / 1e6
            );
        }
    }
}

#[cfg(test)]
mod timing {
    /// `cargo test --release -p tierkit-workloads --lib -- --ignored --nocapture time_kronecker`
    #[test]
    #[ignore = "a speed measurement (host-dependent, not asserted: speed targets live in tierkit bench); run it in release with --ignored --nocapture"]
    fn time_kronecker() {
        let scale: u32 = std::env::var("GS")
            .map(|s| s.parse().unwrap())
            .unwrap_or(20);
        let start = std::time::Instant::now();
        let g = super::kronecker(scale, 16, 1);
        println!(
            "kronecker({scale}): {} edges in {:.2} s",
            g.nr_edges_directed(),
            start.elapsed().as_secs_f64()
        );
    }
}
