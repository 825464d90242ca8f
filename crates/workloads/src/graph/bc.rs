//! `graph-bc`: GAP's betweenness centrality (`bc.cc`): Brandes' algorithm from a few
//! sources, with Madduri et al.'s successor bitmap.
//!
//! Each trial zeroes `scores`, then for each of `nr_sources` random sources:
//! `path_counts` is zeroed, the successor bitmap (one bit per directed edge) reset,
//! `depths` filled with -1, and a level-synchronous BFS (`PBFS`) claims vertices
//! with a compare-and-swap on `depths[v]`, and for every edge into the next level
//! sets the edge's successor bit and adds `path_counts[u]` to `path_counts[v]`. Then
//! `deltas` is zeroed and the levels are walked back from the deepest: every vertex
//! sums `path_counts[u] / path_counts[v] × (1 + deltas[v])` over its successor edges
//! and adds its delta to `scores[u]`. Finally the scores are normalised (a max
//! reduction and a scaling pass). All of it is computed for real, in GAP's types
//! (`float` scores and deltas, `double` path counts).
//!
//! Arrays, each its own mapping: `scores`, `path_counts`, the successor bitmap
//! (`nr_edges_directed` bits), the sliding `queue`, `depths`, `deltas`. (GAP
//! allocates `depths` and `deltas` afresh per source; here they are mapped once and
//! re-initialised, like the other arrays — a glibc that has seen such a free raises
//! its mmap threshold and serves the next allocation from the same heap pages.)
//!
//! Accesses: `offsets[u]` of each queued vertex, `depths[v]` of each neighbour and
//! the `path_counts`/`deltas` gathers are data-dependent and emitted every time; the
//! queue, the neighbour lists and the successor bits of `u`'s edges are streamed;
//! fills stream their array. Loops over the queue are `dynamic, 64`, fills static;
//! the bitmap reset is serial (thread 0).
//!
//! Marks: `trial`, `source` (before the fills of each source), `forward` (start of
//! the BFS), `backward`, `normalize`.

use rand_xoshiro::Xoshiro256PlusPlus;
use serde::{Deserialize, Serialize};
use tierkit_core::ConfigError;
use tierkit_core::VmaKind;

use super::engine::{ParFor, Schedule, Sink, Stream};
use super::{Csr, GraphArrays, GraphSetup, GraphWorkload, Kernel, NODE_BYTES};
use crate::common::prefetch;
use crate::layout::{Layout, Mapping};

const NAME: &str = "graph-bc";
/// How many edges ahead of the one being visited the host prefetches the
/// neighbour's state (host speed only: the stream does not change).
const EDGE_LOOKAHEAD: u64 = 8;
const SCORE_BYTES: u64 = 4;
const COUNT_BYTES: u64 = 8;

/// Configuration of [`GraphBc`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct GraphBcConfig {
    /// log2 of the number of vertices before `scale` (GAP's `-g`). Default 21
    /// (2 Mi vertices, ≈ 60 M directed edges, ≈ 0.3 GiB). Range: the effective
    /// scale (see [`crate::graph`]) must be in [4, 30].
    pub graph_scale: u32,
    /// Generated edges per vertex (GAP's `-k`). Default 16. Range [1, 1024].
    pub edge_factor: u32,
    /// Number of BC computations (GAP's `-n`). Default 1. Range >= 1.
    pub nr_trials: u32,
    /// Trials computed on the host; the other `nr_trials - computed_trials` replay
    /// their accesses in turn (see [`crate::graph`], "Trials"). Default 0: every
    /// trial is computed. Range [0, `nr_trials`].
    pub computed_trials: u32,
    /// Sources per computation (GAP's `-i`, whose default is 1; the GAP benchmark
    /// runs 4). Default 1: each source costs about three passes over the edges.
    /// Range [1, 1024].
    pub nr_sources: u32,
    /// Compute before each access, in ns. Default 1.
    pub gap_ns: u32,
    /// Grows the graph: effective scale `graph_scale + round(log2(scale))`.
    /// Default 1.0.
    pub scale: f64,
    /// Number of threads. Default 1.
    pub nr_threads: u32,
    /// Memory-level parallelism. Default 4.0: a vertex's neighbours are
    /// independent loads.
    pub mlp: f64,
}

impl Default for GraphBcConfig {
    fn default() -> Self {
        GraphBcConfig {
            graph_scale: 21,
            edge_factor: 16,
            nr_trials: 1,
            computed_trials: 0,
            nr_sources: 1,
            gap_ns: 1,
            scale: 1.0,
            nr_threads: 1,
            mlp: 4.0,
        }
    }
}

impl GraphBcConfig {
    /// Check every field; the error names the field and its valid range.
    pub fn validate(&self) -> Result<(), ConfigError> {
        if !(1..=1024).contains(&self.nr_sources) {
            return Err(format!(
                "{NAME}.nr_sources must be in [1, 1024], got {}",
                self.nr_sources
            )
            .into());
        }
        super::check_graph(
            NAME,
            self.graph_scale,
            self.edge_factor,
            self.nr_trials,
            self.computed_trials,
            self.scale,
            self.nr_threads,
            self.mlp,
            // scores, path counts, queue, depths, deltas, plus the successor bits
            // (2 × edge_factor bits per vertex at most).
            4.0 + 8.0 + 4.0 + 4.0 + 4.0 + self.edge_factor as f64 / 4.0,
        )
    }

    fn setup(&self) -> GraphSetup {
        super::setup(
            self.graph_scale,
            self.edge_factor,
            self.nr_trials,
            self.computed_trials,
            self.scale,
            self.nr_threads,
            self.mlp,
            self.gap_ns,
        )
    }
}

super::graph_workload!(
    /// GAP's Brandes betweenness centrality on a Kronecker graph (see the module docs).
    GraphBc,
    BcKernel
);

impl GraphBc {
    /// Build the graph and the kernel for `cfg` with `seed`.
    ///
    /// # Panics
    /// If `cfg` does not pass [`GraphBcConfig::validate`].
    pub fn new(cfg: &GraphBcConfig, seed: u64) -> Self {
        if let Err(e) = cfg.validate() {
            panic!("invalid {NAME} config: {e}");
        }
        let inner = GraphWorkload::new(NAME, &cfg.setup(), seed, |g, layout, maps| {
            BcKernel::new(g, cfg, layout, maps, seed)
        });
        GraphBc { inner }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Stage {
    StartTrial,
    InitScores,
    StartSource,
    FillPathCounts,
    FillDepths,
    Level,
    FillDeltas,
    BackLevel,
    NormMax,
    NormScale,
}

/// One vertex's BFS depth, shortest-path count and dependency.
#[derive(Debug, Clone, Copy, Default)]
struct Vert {
    count: f64,
    depth: i32,
    delta: f32,
}

/// Brandes state (see the module docs).
#[derive(Debug, Clone)]
pub struct BcKernel {
    nr_threads: u32,
    nr_trials: u32,
    nr_sources: u32,
    rng: Xoshiro256PlusPlus,
    scores_at: u64,
    counts_at: u64,
    succ_at: u64,
    queue_at: u64,
    depths_at: u64,
    deltas_at: u64,
    scores: Vec<f32>,
    /// `depths`, `path_counts` and `deltas` of each vertex, packed together on
    /// the host so that one cache miss serves all three (the simulated arrays are
    /// separate, as GAP's).
    vert: Vec<Vert>,
    succ: Vec<u64>,
    queue: Vec<u32>,
    /// Queue positions where each depth starts (and one past the last).
    depth_index: Vec<usize>,
    out_start: usize,
    out_end: usize,
    tail: usize,
    depth: i32,
    /// Level being walked back.
    back: usize,
    biggest: f32,
    source: u32,
    iter: u32,
    trial: u32,
    stage: Stage,
    par: ParFor,
    appends: Vec<Stream>,
}

impl BcKernel {
    fn new(
        g: &Csr,
        cfg: &GraphBcConfig,
        layout: &mut Layout,
        maps: &mut Vec<Mapping>,
        seed: u64,
    ) -> Self {
        let n = g.nr_vertices();
        let succ_words = g.nr_edges_directed().div_ceil(64).max(1);
        let scores = layout.map(n * SCORE_BYTES, VmaKind::Anon);
        let counts = layout.map(n * COUNT_BYTES, VmaKind::Anon);
        let succ = layout.map(succ_words * 8, VmaKind::Anon);
        let queue = layout.map(n * NODE_BYTES, VmaKind::Anon);
        let depths = layout.map(n * NODE_BYTES, VmaKind::Anon);
        let deltas = layout.map(n * SCORE_BYTES, VmaKind::Anon);
        maps.extend([scores, counts, succ, queue, depths, deltas]);
        BcKernel {
            nr_threads: cfg.nr_threads,
            nr_trials: super::trials_computed(cfg.nr_trials, cfg.computed_trials),
            nr_sources: cfg.nr_sources,
            rng: super::tagged_rng(seed, 4),
            scores_at: scores.addr,
            counts_at: counts.addr,
            succ_at: succ.addr,
            queue_at: queue.addr,
            depths_at: depths.addr,
            deltas_at: deltas.addr,
            scores: vec![0.0; n as usize],
            vert: tierkit_core::host::vec_on_huge_pages(Vert::default(), n as usize),
            succ: vec![0; succ_words as usize],
            queue: vec![0; n as usize],
            depth_index: Vec::new(),
            out_start: 0,
            out_end: 0,
            tail: 0,
            depth: 0,
            back: 0,
            biggest: 0.0,
            source: 0,
            iter: 0,
            trial: 0,
            stage: Stage::StartTrial,
            par: ParFor::new(0, 1, Schedule::Blocked, 1),
            appends: vec![Stream::default(); cfg.nr_threads as usize],
        }
    }

    /// The normalised scores after the last trial.
    pub fn scores(&self) -> &[f32] {
        &self.scores
    }

    fn loop_over(&mut self, n: u64, schedule: Schedule, stage: Stage) {
        self.par = ParFor::new(n, self.nr_threads, schedule, 64);
        self.stage = stage;
    }

    #[inline]
    fn queue_addr(&self, i: usize) -> u64 {
        self.queue_at + i as u64 * NODE_BYTES
    }

    fn push<S: Sink>(&mut self, s: &mut S, t: usize, v: u32) {
        self.queue[self.tail] = v;
        let addr = self.queue_addr(self.tail);
        self.appends[t].touch(s, t, addr, true);
        self.tail += 1;
    }

    fn forward_piece<S: Sink>(
        &mut self,
        g: &Csr,
        a: &GraphArrays,
        s: &mut S,
        t: usize,
        lo: u64,
        hi: u64,
    ) {
        let mut qs = Stream::default();
        for i in lo..hi {
            let qi = self.out_start + i as usize;
            prefetch_queued(g, &self.queue[..self.out_end], qi, &self.vert);
            qs.touch(s, t, self.queue_addr(qi), false);
            let u = self.queue[qi];
            a.read_offsets(s, t, u);
            let (mut ns, mut ss) = (Stream::default(), Stream::default());
            let mut count_u_loaded = false;
            let end = g.offsets[u as usize + 1];
            for e in g.offsets[u as usize]..end {
                if e + EDGE_LOOKAHEAD < end {
                    prefetch(&self.vert[g.neighbours[(e + EDGE_LOOKAHEAD) as usize] as usize]);
                }
                ns.touch(s, t, a.nb(e), false);
                let v = g.neighbours[e as usize] as usize;
                let dv = self.depths_at + v as u64 * NODE_BYTES;
                s.access(t, dv, false);
                if self.vert[v].depth == -1 {
                    s.access(t, dv, true);
                    self.vert[v].depth = self.depth;
                    self.push(s, t, v as u32);
                }
                if self.vert[v].depth == self.depth {
                    self.succ[(e / 64) as usize] |= 1 << (e % 64);
                    ss.touch(s, t, self.succ_at + (e / 64) * 8, true);
                    if !count_u_loaded {
                        s.access(t, self.counts_at + u64::from(u) * COUNT_BYTES, false);
                        count_u_loaded = true;
                    }
                    let cv = self.counts_at + v as u64 * COUNT_BYTES;
                    s.access(t, cv, false);
                    s.access(t, cv, true);
                    self.vert[v].count += self.vert[u as usize].count;
                }
            }
        }
    }

    fn backward_piece<S: Sink>(
        &mut self,
        g: &Csr,
        a: &GraphArrays,
        s: &mut S,
        t: usize,
        lo: u64,
        hi: u64,
    ) {
        let mut qs = Stream::default();
        let base = self.depth_index[self.back];
        let level_end = self.depth_index[self.back + 1];
        for i in lo..hi {
            let qi = base + i as usize;
            prefetch_queued(g, &self.queue[..level_end], qi, &self.vert);
            qs.touch(s, t, self.queue_addr(qi), false);
            let u = self.queue[qi] as usize;
            a.read_offsets(s, t, u as u32);
            let (mut ns, mut ss) = (Stream::default(), Stream::default());
            let mut delta_u = 0.0f32;
            let mut count_u_loaded = false;
            let end = g.offsets[u + 1];
            for e in g.offsets[u]..end {
                let ahead = e + EDGE_LOOKAHEAD;
                if ahead < end && self.succ[(ahead / 64) as usize] >> (ahead % 64) & 1 == 1 {
                    prefetch(&self.vert[g.neighbours[ahead as usize] as usize]);
                }
                ns.touch(s, t, a.nb(e), false);
                ss.touch(s, t, self.succ_at + (e / 64) * 8, false);
                if self.succ[(e / 64) as usize] >> (e % 64) & 1 == 1 {
                    let v = g.neighbours[e as usize] as usize;
                    if !count_u_loaded {
                        s.access(t, self.counts_at + u as u64 * COUNT_BYTES, false);
                        count_u_loaded = true;
                    }
                    s.access(t, self.counts_at + v as u64 * COUNT_BYTES, false);
                    s.access(t, self.deltas_at + v as u64 * SCORE_BYTES, false);
                    // C++ promotion: double ratio × (1 + float delta), added to a
                    // float accumulator.
                    delta_u = (f64::from(delta_u)
                        + self.vert[u].count / self.vert[v].count
                            * (1.0 + f64::from(self.vert[v].delta)))
                        as f32;
                }
            }
            self.vert[u].delta = delta_u;
            s.access(t, self.deltas_at + u as u64 * SCORE_BYTES, true);
            let sc = self.scores_at + u as u64 * SCORE_BYTES;
            s.access(t, sc, false);
            s.access(t, sc, true);
            self.scores[u] += delta_u;
        }
    }

    /// A parallel fill of the array at `at` (`bytes` per element) over `lo..hi`.
    fn fill_piece<S: Sink>(s: &mut S, t: usize, at: u64, bytes: u64, lo: u64, hi: u64) {
        let mut ws = Stream::default();
        for i in lo..hi {
            ws.touch(s, t, at + i * bytes, true);
        }
    }

    /// Serial reset of the successor bitmap (thread 0).
    fn reset_succ<S: Sink>(&mut self, s: &mut S) {
        self.succ.iter_mut().for_each(|w| *w = 0);
        let mut ws = Stream::default();
        for i in 0..self.succ.len() as u64 {
            ws.touch(s, 0, self.succ_at + i * 8, true);
        }
    }
}

impl Kernel for BcKernel {
    fn step<S: Sink>(&mut self, g: &Csr, a: &GraphArrays, s: &mut S) -> bool {
        let n = g.nr_vertices();
        loop {
            match self.stage {
                Stage::StartTrial => {
                    if self.trial == self.nr_trials {
                        return false;
                    }
                    s.mark("trial");
                    self.iter = 0;
                    self.loop_over(n, Schedule::Blocked, Stage::InitScores);
                }
                Stage::StartSource => {
                    if self.iter == self.nr_sources {
                        s.mark("normalize");
                        self.biggest = 0.0;
                        self.loop_over(n, Schedule::Blocked, Stage::NormMax);
                        continue;
                    }
                    self.source = super::pick_source(g, &mut self.rng);
                    s.mark("source");
                    self.vert.iter_mut().for_each(|x| x.count = 0.0);
                    self.loop_over(n, Schedule::Blocked, Stage::FillPathCounts);
                }
                _ => {
                    if let Some((t, lo, hi)) = self.par.next_piece() {
                        match self.stage {
                            Stage::InitScores => {
                                self.scores[lo as usize..hi as usize]
                                    .iter_mut()
                                    .for_each(|x| *x = 0.0);
                                Self::fill_piece(s, t, self.scores_at, SCORE_BYTES, lo, hi);
                            }
                            Stage::FillPathCounts => {
                                Self::fill_piece(s, t, self.counts_at, COUNT_BYTES, lo, hi)
                            }
                            Stage::FillDepths => {
                                self.vert[lo as usize..hi as usize]
                                    .iter_mut()
                                    .for_each(|x| x.depth = -1);
                                Self::fill_piece(s, t, self.depths_at, NODE_BYTES, lo, hi);
                            }
                            Stage::FillDeltas => {
                                self.vert[lo as usize..hi as usize]
                                    .iter_mut()
                                    .for_each(|x| x.delta = 0.0);
                                Self::fill_piece(s, t, self.deltas_at, SCORE_BYTES, lo, hi);
                            }
                            Stage::Level => self.forward_piece(g, a, s, t, lo, hi),
                            Stage::BackLevel => self.backward_piece(g, a, s, t, lo, hi),
                            Stage::NormMax => {
                                let mut rs = Stream::default();
                                for u in lo..hi {
                                    rs.touch(s, t, self.scores_at + u * SCORE_BYTES, false);
                                    self.biggest = self.biggest.max(self.scores[u as usize]);
                                }
                            }
                            Stage::NormScale => {
                                let (mut rs, mut ws) = (Stream::default(), Stream::default());
                                for u in lo..hi {
                                    let at = self.scores_at + u * SCORE_BYTES;
                                    rs.touch(s, t, at, false);
                                    self.scores[u as usize] /= self.biggest;
                                    ws.touch(s, t, at, true);
                                }
                            }
                            _ => unreachable!(),
                        }
                        return true;
                    }
                    self.finish_loop(g, s);
                }
            }
        }
    }
}

impl BcKernel {
    fn finish_loop<S: Sink>(&mut self, g: &Csr, s: &mut S) {
        let n = g.nr_vertices();
        match self.stage {
            Stage::InitScores => self.stage = Stage::StartSource,
            Stage::FillPathCounts => {
                self.reset_succ(s);
                self.loop_over(n, Schedule::Blocked, Stage::FillDepths);
            }
            Stage::FillDepths => {
                s.mark("forward");
                let src = self.source as usize;
                self.vert[src].depth = 0;
                s.access(0, self.depths_at + src as u64 * NODE_BYTES, true);
                self.vert[src].count = 1.0;
                s.access(0, self.counts_at + src as u64 * COUNT_BYTES, true);
                self.out_start = 0;
                self.out_end = 0;
                self.tail = 0;
                self.appends.iter_mut().for_each(|a| *a = Stream::default());
                self.push(s, 0, self.source);
                self.depth_index.clear();
                self.depth_index.push(0);
                self.out_end = self.tail;
                self.depth = 1;
                let len = (self.out_end - self.out_start) as u64;
                self.loop_over(len, Schedule::Cyclic(64), Stage::Level);
            }
            Stage::Level => {
                // Slide the window to the level just discovered.
                self.out_start = self.out_end;
                self.out_end = self.tail;
                self.depth_index.push(self.out_start);
                if self.out_start == self.out_end {
                    s.mark("backward");
                    self.loop_over(n, Schedule::Blocked, Stage::FillDeltas);
                } else {
                    self.depth += 1;
                    self.appends.iter_mut().for_each(|a| *a = Stream::default());
                    let len = (self.out_end - self.out_start) as u64;
                    self.loop_over(len, Schedule::Cyclic(64), Stage::Level);
                }
            }
            Stage::FillDeltas | Stage::BackLevel => {
                // Levels are walked from the deepest (depth_index[len - 2]) back to
                // the source's (depth_index[0]).
                let next = if self.stage == Stage::FillDeltas {
                    self.depth_index.len().checked_sub(2)
                } else {
                    self.back.checked_sub(1)
                };
                match next {
                    Some(d) => {
                        self.back = d;
                        let len = (self.depth_index[d + 1] - self.depth_index[d]) as u64;
                        self.loop_over(len, Schedule::Cyclic(64), Stage::BackLevel);
                    }
                    None => {
                        self.iter += 1;
                        self.stage = Stage::StartSource;
                    }
                }
            }
            Stage::NormMax => self.loop_over(n, Schedule::Blocked, Stage::NormScale),
            Stage::NormScale => {
                self.trial += 1;
                self.stage = Stage::StartTrial;
            }
            _ => unreachable!(),
        }
    }
}

/// Host prefetches for the vertices queued after `queue[qi]`, in three stages a few
/// positions apart so that each finds the line the stage before it fetched: the
/// offsets of the vertex 8 ahead, the start of the neighbour list 4 ahead, the
/// state of the first neighbours 2 ahead. A Kronecker graph's vertex state is
/// read at random (a host cache miss per edge), and most queued vertices have few
/// edges, so the in-list lookahead alone leaves their misses exposed. Host speed
/// only: nothing here touches the stream.
#[inline]
fn prefetch_queued(g: &Csr, queue: &[u32], qi: usize, vert: &[Vert]) {
    if let Some(&w) = queue.get(qi + 8) {
        prefetch(&g.offsets[w as usize]);
    }
    if let Some(&w) = queue.get(qi + 4) {
        if let Some(first) = g.neighbours.get(g.offsets[w as usize] as usize) {
            prefetch(first);
        }
    }
    if let Some(&w) = queue.get(qi + 2) {
        let (from, to) = (g.offsets[w as usize], g.offsets[w as usize + 1]);
        for e in from..to.min(from + EDGE_LOOKAHEAD) {
            prefetch(&vert[g.neighbours[e as usize] as usize]);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::graph::engine::testing::{phase, record, Event};
    use crate::testutil::{check_structure, drain};
    use tierkit_core::Workload;

    fn small(graph_scale: u32, nr_threads: u32, nr_sources: u32) -> GraphBcConfig {
        GraphBcConfig {
            graph_scale,
            nr_threads,
            nr_sources,
            ..GraphBcConfig::default()
        }
    }

    /// GAP's serial `BCVerifier` computation, in the same float types.
    fn reference_scores(g: &Csr, sources: &[u32]) -> Vec<f32> {
        let n = g.nr_vertices() as usize;
        let mut scores = vec![0.0f32; n];
        for &src in sources {
            let mut depths = vec![-1i32; n];
            let mut counts = vec![0.0f64; n];
            depths[src as usize] = 0;
            counts[src as usize] = 1.0;
            let mut order = vec![src];
            let mut i = 0;
            while i < order.len() {
                let u = order[i] as usize;
                i += 1;
                for &v in g.neigh(u as u32) {
                    let v = v as usize;
                    if depths[v] == -1 {
                        depths[v] = depths[u] + 1;
                        order.push(v as u32);
                    }
                    if depths[v] == depths[u] + 1 {
                        counts[v] += counts[u];
                    }
                }
            }
            let mut deltas = vec![0.0f32; n];
            for &u in order.iter().rev() {
                let u = u as usize;
                for &v in g.neigh(u as u32) {
                    let v = v as usize;
                    if depths[v] == depths[u] + 1 {
                        deltas[u] = (f64::from(deltas[u])
                            + counts[u] / counts[v] * (1.0 + f64::from(deltas[v])))
                            as f32;
                    }
                }
                scores[u] += deltas[u];
            }
        }
        let biggest = scores.iter().copied().fold(0.0f32, f32::max);
        scores.iter().map(|s| s / biggest).collect()
    }

    #[test]
    fn same_seed_same_stream_different_seed_different_stream() {
        let cfg = small(10, 2, 2);
        let a = drain(&mut GraphBc::new(&cfg, 7));
        let b = drain(&mut GraphBc::new(&cfg, 7));
        let c = drain(&mut GraphBc::new(&cfg, 8));
        assert_eq!(a.streams, b.streams);
        assert_ne!(a.streams, c.streams);
    }

    #[test]
    fn footprint_mappings_and_access_count() {
        let mut w = GraphBc::new(&small(11, 3, 2), 1);
        let d = drain(&mut w);
        assert_eq!(d.mappings, w.mappings());
        check_structure(&w, &d);
    }

    #[test]
    fn scores_match_a_serial_brandes_and_the_bfs_reads_every_reached_edge() {
        for nr_threads in [1, 3] {
            let w = GraphBc::new(&small(12, nr_threads, 3), 9);
            let g = w.graph().clone();
            let depths_map = w.mappings()[6];
            let mut p = w.inner.program();
            let events = record(&mut p);
            let mut rng = super::super::tagged_rng(9, 4);
            let sources: Vec<u32> = (0..3)
                .map(|_| super::super::pick_source(&g, &mut rng))
                .collect();
            let reference = reference_scores(&g, &sources);
            for (u, (&got, &want)) in p.kernel.scores().iter().zip(&reference).enumerate() {
                assert!((got - want).abs() <= 1e-4, "vertex {u}: {got} vs {want}");
            }
            // The forward phase loads depths[v] once per edge out of every reached
            // vertex (= sum of their degrees).
            for (i, &src) in sources.iter().enumerate() {
                let mut reached = vec![false; g.nr_vertices() as usize];
                let mut stack = vec![src];
                reached[src as usize] = true;
                while let Some(u) = stack.pop() {
                    for &v in g.neigh(u) {
                        if !reached[v as usize] {
                            reached[v as usize] = true;
                            stack.push(v);
                        }
                    }
                }
                let edges: u64 = (0..g.nr_vertices() as u32)
                    .filter(|&u| reached[u as usize])
                    .map(|u| g.degree(u))
                    .sum();
                let reads = phase(&events, "forward", i)
                    .iter()
                    .filter(|e| matches!(e, Event::Access { addr, write: false, .. } if depths_map.contains(*addr)))
                    .count() as u64;
                assert_eq!(reads, edges);
            }
        }
    }

    #[test]
    fn validate_names_the_bad_field() {
        let bad = |f: &dyn Fn(&mut GraphBcConfig), field: &str| {
            let mut c = GraphBcConfig::default();
            f(&mut c);
            let e = c.validate().unwrap_err();
            assert!(e.to_string().contains(field), "{e:?} should name {field}");
        };
        bad(&|c| c.nr_sources = 0, "nr_sources");
        bad(&|c| c.graph_scale = 0, "graph_scale");
        bad(&|c| c.nr_trials = 0, "nr_trials");
        bad(&|c| c.scale = f64::INFINITY, "scale");
        GraphBcConfig::default().validate().unwrap();
        let w = GraphBc::new(&small(8, 1, 1), 0);
        assert_eq!(w.shape().processes[0].name, NAME);
    }
}
