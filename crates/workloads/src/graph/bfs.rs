//! `graph-bfs`: GAP's direction-optimizing breadth-first search (`bfs.cc`).
//!
//! Beamer's DOBFS, step for step: `InitParent` stores `-degree` in every vertex's
//! parent entry; top-down steps scan the frontier queue and claim unvisited
//! neighbours with a compare-and-swap, appending them to the sliding queue; when the
//! edges leaving the frontier exceed `edges_to_check / alpha` the search converts
//! the queue to a bitmap and runs bottom-up steps (every unvisited vertex scans its
//! neighbours for one in the frontier bitmap and stops at the first), until the
//! frontier shrinks below `n / beta` and stops growing; then back to the queue. A
//! final pass writes `-1` over the parents of unreached vertices.
//!
//! Arrays (each its own mapping, GAP's types): `parent` (`int32` per vertex), the
//! sliding `queue` (`int32` per vertex), two frontier bitmaps (`front`, `curr`, one
//! bit per vertex, swapped after every bottom-up step).
//!
//! Accesses per element as in GAP's loops: the queue, `parent` and the bitmaps are
//! streamed where GAP walks them in order (one access per line); `offsets[u]` of a
//! frontier vertex, `parent[v]` of each neighbour (top-down) and `front[v]` of each
//! neighbour (bottom-up) are data-dependent and emitted every time; a successful
//! claim adds a store to `parent[v]` and a queue append. Schedules: `InitParent`,
//! queue↔bitmap conversions and top-down steps are `static`, bottom-up steps
//! `dynamic, 1024`, as in GAP. Bitmap resets are serial (thread 0), as GAP's
//! `Bitmap::reset`.
//!
//! Marks (for tests): `trial` before `InitParent`, `traverse` when the search
//! starts, `cleanup` at the final pass.

use rand_xoshiro::Xoshiro256PlusPlus;
use serde::{Deserialize, Serialize};
use tierkit_core::ConfigError;
use tierkit_core::VmaKind;

use super::engine::{ParFor, Schedule, Sink, Stream};
use super::{Csr, GraphArrays, GraphSetup, GraphWorkload, Kernel, NODE_BYTES};
use crate::layout::{Layout, Mapping};

const NAME: &str = "graph-bfs";

/// Configuration of [`GraphBfs`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct GraphBfsConfig {
    /// log2 of the number of vertices before `scale` (GAP's `-g`). Default 22
    /// (4 Mi vertices, ≈ 120 M directed edges, ≈ 0.6 GiB). Range: the effective
    /// scale (see [`crate::graph`]) must be in [4, 30].
    pub graph_scale: u32,
    /// Generated edges per vertex (GAP's `-k`, Graph500's edge factor). Default 16.
    /// Range [1, 1024].
    pub edge_factor: u32,
    /// Number of searches, each from a new random source with at least one
    /// neighbour (GAP's `-n` trials). Default 10 (≈ 13 M accesses each at the
    /// default scale: direction optimization skips most edges). Range >= 1.
    pub nr_trials: u32,
    /// Trials computed on the host; the other `nr_trials - computed_trials` replay
    /// their accesses in turn (see [`crate::graph`], "Trials"). Default 0: every
    /// trial is computed. Range [0, `nr_trials`].
    pub computed_trials: u32,
    /// Top-down → bottom-up switch: go bottom-up when the frontier's edges exceed
    /// the unexplored edges divided by `alpha`. Default 15 (GAP, Beamer SC'12 §4).
    /// Range >= 1.
    pub alpha: u32,
    /// Bottom-up → top-down switch: return once the frontier shrinks and holds
    /// fewer than `n / beta` vertices. Default 18 (GAP). Range >= 1.
    pub beta: u32,
    /// Compute before each access, in ns. Default 1 (a compare and a branch).
    pub gap_ns: u32,
    /// Grows the graph: effective scale `graph_scale + round(log2(scale))`.
    /// Default 1.0.
    pub scale: f64,
    /// Number of threads. Default 1.
    pub nr_threads: u32,
    /// Memory-level parallelism. Default 4.0: the neighbours of a frontier vertex
    /// are independent loads an out-of-order core overlaps.
    pub mlp: f64,
}

impl Default for GraphBfsConfig {
    fn default() -> Self {
        GraphBfsConfig {
            graph_scale: 22,
            edge_factor: 16,
            nr_trials: 10,
            computed_trials: 0,
            alpha: 15,
            beta: 18,
            gap_ns: 1,
            scale: 1.0,
            nr_threads: 1,
            mlp: 4.0,
        }
    }
}

impl GraphBfsConfig {
    /// Check every field; the error names the field and its valid range.
    pub fn validate(&self) -> Result<(), ConfigError> {
        for (field, v) in [("alpha", self.alpha), ("beta", self.beta)] {
            if v == 0 {
                return Err(format!("{NAME}.{field} must be >= 1, got 0").into());
            }
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
            8.25,
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
    /// GAP's direction-optimizing BFS on a Kronecker graph (see the module docs).
    GraphBfs,
    BfsKernel
);

impl GraphBfs {
    /// Build the graph and the kernel for `cfg` with `seed`.
    ///
    /// # Panics
    /// If `cfg` does not pass [`GraphBfsConfig::validate`].
    pub fn new(cfg: &GraphBfsConfig, seed: u64) -> Self {
        if let Err(e) = cfg.validate() {
            panic!("invalid {NAME} config: {e}");
        }
        let inner = GraphWorkload::new(NAME, &cfg.setup(), seed, |g, layout, maps| {
            BfsKernel::new(g, cfg, layout, maps, seed)
        });
        GraphBfs { inner }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Stage {
    StartTrial,
    InitParent,
    Decide,
    TopDown,
    QueueToBitmap,
    StartBottomUp,
    BottomUp,
    BitmapToQueue,
    Cleanup,
}

/// DOBFS state (see the module docs).
#[derive(Debug, Clone)]
pub struct BfsKernel {
    nr_threads: u32,
    nr_trials: u32,
    alpha: i64,
    beta: i64,
    rng: Xoshiro256PlusPlus,
    // Addresses.
    parent_at: u64,
    queue_at: u64,
    front_at: u64,
    curr_at: u64,
    // Host state, GAP's names.
    parent: Vec<i32>,
    queue: Vec<u32>,
    /// The sliding window `[out_start, out_end)` and the append position `tail`.
    out_start: usize,
    out_end: usize,
    tail: usize,
    front: Vec<u64>,
    curr: Vec<u64>,
    edges_to_check: i64,
    scout_count: i64,
    awake_count: i64,
    old_awake_count: i64,
    source: u32,
    trial: u32,
    stage: Stage,
    par: ParFor,
    /// Each thread's last queue line written (appends are per-thread buffered in
    /// GAP, so each thread's appends form a sequential stream).
    appends: Vec<Stream>,
}

impl BfsKernel {
    fn new(
        g: &Csr,
        cfg: &GraphBfsConfig,
        layout: &mut Layout,
        maps: &mut Vec<Mapping>,
        seed: u64,
    ) -> Self {
        let n = g.nr_vertices();
        let words = n.div_ceil(64);
        let parent = layout.map(n * NODE_BYTES, VmaKind::Anon);
        let queue = layout.map(n * NODE_BYTES, VmaKind::Anon);
        let front = layout.map(words * 8, VmaKind::Anon);
        let curr = layout.map(words * 8, VmaKind::Anon);
        maps.extend([parent, queue, front, curr]);
        BfsKernel {
            nr_threads: cfg.nr_threads,
            nr_trials: super::trials_computed(cfg.nr_trials, cfg.computed_trials),
            alpha: i64::from(cfg.alpha),
            beta: i64::from(cfg.beta),
            rng: super::tagged_rng(seed, 2),
            parent_at: parent.addr,
            queue_at: queue.addr,
            front_at: front.addr,
            curr_at: curr.addr,
            parent: vec![0; n as usize],
            queue: vec![0; n as usize],
            out_start: 0,
            out_end: 0,
            tail: 0,
            front: vec![0; words as usize],
            curr: vec![0; words as usize],
            edges_to_check: 0,
            scout_count: 0,
            awake_count: 0,
            old_awake_count: 0,
            source: 0,
            trial: 0,
            stage: Stage::StartTrial,
            par: ParFor::new(0, 1, Schedule::Blocked, 1),
            appends: vec![Stream::default(); cfg.nr_threads as usize],
        }
    }

    /// The parent array after the last search (GAP's result encoding: the parent,
    /// the source for itself, -1 if unreached).
    pub fn parents(&self) -> &[i32] {
        &self.parent
    }

    /// The source of the last search started.
    pub fn source(&self) -> u32 {
        self.source
    }

    #[inline]
    fn parent_addr(&self, v: u64) -> u64 {
        self.parent_at + v * NODE_BYTES
    }

    #[inline]
    fn queue_addr(&self, i: usize) -> u64 {
        self.queue_at + i as u64 * NODE_BYTES
    }

    fn loop_over(&mut self, n: u64, schedule: Schedule, stage: Stage) {
        self.par = ParFor::new(n, self.nr_threads, schedule, 64);
        self.stage = stage;
        self.appends.iter_mut().for_each(|s| *s = Stream::default());
    }

    fn push<S: Sink>(&mut self, s: &mut S, t: usize, v: u32) {
        self.queue[self.tail] = v;
        let addr = self.queue_addr(self.tail);
        self.appends[t].touch(s, t, addr, true);
        self.tail += 1;
    }

    fn slide_window(&mut self) {
        self.out_start = self.out_end;
        self.out_end = self.tail;
    }

    /// Serial `Bitmap::reset` of the bitmap at `at` (thread 0 streams it).
    fn reset_bitmap<S: Sink>(s: &mut S, at: u64, bits: &mut [u64]) {
        bits.iter_mut().for_each(|w| *w = 0);
        let mut st = Stream::default();
        for i in 0..bits.len() as u64 {
            st.touch(s, 0, at + 8 * i, true);
        }
    }

    fn init_parent_piece<S: Sink>(
        &mut self,
        g: &Csr,
        a: &GraphArrays,
        s: &mut S,
        t: usize,
        lo: u64,
        hi: u64,
    ) {
        let (mut os, mut ps) = (Stream::default(), Stream::default());
        for n in lo..hi {
            a.stream_offsets(&mut os, s, t, n as u32);
            let d = g.degree(n as u32) as i32;
            self.parent[n as usize] = if d != 0 { -d } else { -1 };
            ps.touch(s, t, self.parent_addr(n), true);
        }
    }

    fn top_down_piece<S: Sink>(
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
            qs.touch(s, t, self.queue_addr(qi), false);
            let u = self.queue[qi];
            a.read_offsets(s, t, u);
            let mut ns = Stream::default();
            for e in g.offsets[u as usize]..g.offsets[u as usize + 1] {
                ns.touch(s, t, a.nb(e), false);
                let v = g.neighbours[e as usize];
                let pv = self.parent_addr(v as u64);
                s.access(t, pv, false);
                let curr_val = self.parent[v as usize];
                if curr_val < 0 {
                    // The compare-and-swap wins: first claimant in global order.
                    s.access(t, pv, true);
                    self.parent[v as usize] = u as i32;
                    self.scout_count += -i64::from(curr_val);
                    self.push(s, t, v);
                }
            }
        }
    }

    fn queue_to_bitmap_piece<S: Sink>(&mut self, s: &mut S, t: usize, lo: u64, hi: u64) {
        let mut qs = Stream::default();
        for i in lo..hi {
            let qi = self.out_start + i as usize;
            qs.touch(s, t, self.queue_addr(qi), false);
            let u = self.queue[qi] as u64;
            self.front[(u / 64) as usize] |= 1 << (u % 64);
            s.access(t, self.front_at + (u / 64) * 8, true);
        }
    }

    fn bottom_up_piece<S: Sink>(
        &mut self,
        g: &Csr,
        a: &GraphArrays,
        s: &mut S,
        t: usize,
        lo: u64,
        hi: u64,
    ) {
        let (mut ps, mut os, mut ns, mut cs) = (
            Stream::default(),
            Stream::default(),
            Stream::default(),
            Stream::default(),
        );
        for u in lo..hi {
            ps.touch(s, t, self.parent_addr(u), false);
            if self.parent[u as usize] >= 0 {
                continue;
            }
            a.stream_offsets(&mut os, s, t, u as u32);
            for e in g.offsets[u as usize]..g.offsets[u as usize + 1] {
                ns.touch(s, t, a.nb(e), false);
                let v = g.neighbours[e as usize] as u64;
                s.access(t, self.front_at + (v / 64) * 8, false);
                if self.front[(v / 64) as usize] >> (v % 64) & 1 == 1 {
                    self.parent[u as usize] = v as i32;
                    s.access(t, self.parent_addr(u), true);
                    self.awake_count += 1;
                    self.curr[(u / 64) as usize] |= 1 << (u % 64);
                    cs.touch(s, t, self.curr_at + (u / 64) * 8, true);
                    break;
                }
            }
        }
    }

    fn bitmap_to_queue_piece<S: Sink>(&mut self, s: &mut S, t: usize, lo: u64, hi: u64) {
        let mut fs = Stream::default();
        for n in lo..hi {
            fs.touch(s, t, self.front_at + (n / 64) * 8, false);
            if self.front[(n / 64) as usize] >> (n % 64) & 1 == 1 {
                self.push(s, t, n as u32);
            }
        }
    }

    fn cleanup_piece<S: Sink>(&mut self, s: &mut S, t: usize, lo: u64, hi: u64) {
        let (mut ps, mut ws) = (Stream::default(), Stream::default());
        for n in lo..hi {
            ps.touch(s, t, self.parent_addr(n), false);
            if self.parent[n as usize] < -1 {
                self.parent[n as usize] = -1;
                ws.touch(s, t, self.parent_addr(n), true);
            }
        }
    }
}

impl Kernel for BfsKernel {
    fn step<S: Sink>(&mut self, g: &Csr, a: &GraphArrays, s: &mut S) -> bool {
        let n = g.nr_vertices();
        loop {
            match self.stage {
                Stage::StartTrial => {
                    if self.trial == self.nr_trials {
                        return false;
                    }
                    self.source = super::pick_source(g, &mut self.rng);
                    s.mark("trial");
                    self.loop_over(n, Schedule::Blocked, Stage::InitParent);
                }
                Stage::Decide => {
                    if self.out_start == self.out_end {
                        s.mark("cleanup");
                        self.loop_over(n, Schedule::Blocked, Stage::Cleanup);
                    } else if self.scout_count > self.edges_to_check / self.alpha {
                        let len = (self.out_end - self.out_start) as u64;
                        self.loop_over(len, Schedule::Blocked, Stage::QueueToBitmap);
                    } else {
                        self.edges_to_check -= self.scout_count;
                        self.scout_count = 0;
                        let len = (self.out_end - self.out_start) as u64;
                        self.loop_over(len, Schedule::Blocked, Stage::TopDown);
                    }
                }
                Stage::StartBottomUp => {
                    self.old_awake_count = self.awake_count;
                    self.awake_count = 0;
                    Self::reset_bitmap(s, self.curr_at, &mut self.curr);
                    self.loop_over(n, Schedule::Cyclic(1024), Stage::BottomUp);
                    return true;
                }
                _ => {
                    if let Some((t, lo, hi)) = self.par.next_piece() {
                        match self.stage {
                            Stage::InitParent => self.init_parent_piece(g, a, s, t, lo, hi),
                            Stage::TopDown => self.top_down_piece(g, a, s, t, lo, hi),
                            Stage::QueueToBitmap => self.queue_to_bitmap_piece(s, t, lo, hi),
                            Stage::BottomUp => self.bottom_up_piece(g, a, s, t, lo, hi),
                            Stage::BitmapToQueue => self.bitmap_to_queue_piece(s, t, lo, hi),
                            Stage::Cleanup => self.cleanup_piece(s, t, lo, hi),
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

impl BfsKernel {
    /// What follows the parallel loop that just ended.
    fn finish_loop<S: Sink>(&mut self, g: &Csr, s: &mut S) {
        let n = g.nr_vertices();
        match self.stage {
            Stage::InitParent => {
                s.mark("traverse");
                let src = self.source as u64;
                self.parent[src as usize] = self.source as i32;
                s.access(0, self.parent_addr(src), true);
                self.out_start = 0;
                self.out_end = 0;
                self.tail = 0;
                self.appends[0] = Stream::default();
                self.push(s, 0, self.source);
                self.slide_window();
                Self::reset_bitmap(s, self.curr_at, &mut self.curr);
                Self::reset_bitmap(s, self.front_at, &mut self.front);
                self.edges_to_check = g.nr_edges_directed() as i64;
                self.scout_count = g.degree(self.source) as i64;
                self.stage = Stage::Decide;
            }
            Stage::TopDown => {
                self.slide_window();
                self.stage = Stage::Decide;
            }
            Stage::QueueToBitmap => {
                self.awake_count = (self.out_end - self.out_start) as i64;
                self.slide_window();
                self.stage = Stage::StartBottomUp;
            }
            Stage::BottomUp => {
                std::mem::swap(&mut self.front, &mut self.curr);
                std::mem::swap(&mut self.front_at, &mut self.curr_at);
                if self.awake_count >= self.old_awake_count
                    || self.awake_count > n as i64 / self.beta
                {
                    self.stage = Stage::StartBottomUp;
                } else {
                    self.loop_over(n, Schedule::Blocked, Stage::BitmapToQueue);
                }
            }
            Stage::BitmapToQueue => {
                self.slide_window();
                self.scout_count = 1;
                self.stage = Stage::Decide;
            }
            Stage::Cleanup => {
                self.trial += 1;
                self.stage = Stage::StartTrial;
            }
            _ => unreachable!(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::graph::engine::testing::{phase, record, Event};
    use crate::testutil::{check_structure, drain};
    use std::collections::BTreeMap;
    use tierkit_core::Workload;

    fn small(graph_scale: u32, nr_threads: u32, nr_trials: u32) -> GraphBfsConfig {
        GraphBfsConfig {
            graph_scale,
            nr_threads,
            nr_trials,
            ..GraphBfsConfig::default()
        }
    }

    /// Host reference BFS: depth of every vertex from `src` (-1 if unreached).
    fn reference_depths(g: &Csr, src: u32) -> Vec<i64> {
        let mut depth = vec![-1i64; g.nr_vertices() as usize];
        depth[src as usize] = 0;
        let mut q = std::collections::VecDeque::from([src]);
        while let Some(u) = q.pop_front() {
            for &v in g.neigh(u) {
                if depth[v as usize] < 0 {
                    depth[v as usize] = depth[u as usize] + 1;
                    q.push_back(v);
                }
            }
        }
        depth
    }

    #[test]
    fn same_seed_same_stream_different_seed_different_stream() {
        let cfg = small(10, 2, 2);
        let a = drain(&mut GraphBfs::new(&cfg, 7));
        let b = drain(&mut GraphBfs::new(&cfg, 7));
        let c = drain(&mut GraphBfs::new(&cfg, 8));
        assert_eq!(a.streams, b.streams);
        assert_ne!(a.streams, c.streams);
        assert!(!a.streams[0][1].is_empty());
    }

    #[test]
    fn footprint_mappings_and_access_count() {
        let mut w = GraphBfs::new(&small(11, 3, 2), 1);
        let d = drain(&mut w);
        assert_eq!(d.mappings, w.mappings());
        check_structure(&w, &d);
    }

    #[test]
    fn every_reachable_vertex_is_claimed_exactly_once_per_search() {
        for nr_threads in [1, 3] {
            let w = GraphBfs::new(&small(13, nr_threads, 3), 3);
            let g = w.graph().clone();
            let mut p = w.inner.program();
            let events = record(&mut p);
            let parent = w.mappings()[2];
            let mut sources = Vec::new();
            {
                // Replay the source picker to know each trial's source.
                let mut rng = super::super::tagged_rng(3, 2);
                for _ in 0..3 {
                    sources.push(super::super::pick_source(&g, &mut rng));
                }
            }
            for (trial, &src) in sources.iter().enumerate() {
                let depth = reference_depths(&g, src);
                let mut writes: BTreeMap<u64, u32> = BTreeMap::new();
                for e in phase(&events, "traverse", trial) {
                    if let Event::Access {
                        addr, write: true, ..
                    } = *e
                    {
                        if parent.contains(addr) {
                            *writes.entry((addr - parent.addr) / NODE_BYTES).or_default() += 1;
                        }
                    }
                }
                let reachable: Vec<u64> = (0..g.nr_vertices())
                    .filter(|&v| depth[v as usize] >= 0)
                    .collect();
                assert!(reachable.len() > 1000, "giant component");
                assert_eq!(writes.keys().copied().collect::<Vec<_>>(), reachable);
                assert!(writes.values().all(|&c| c == 1), "each written once");
            }
            // The final parents form a valid BFS tree of the last search.
            let src = *sources.last().unwrap();
            let depth = reference_depths(&g, src);
            let parents = p.kernel.parents();
            for v in 0..g.nr_vertices() as usize {
                if v as u32 == src {
                    assert_eq!(parents[v], src as i32);
                } else if depth[v] < 0 {
                    assert_eq!(parents[v], -1);
                } else {
                    let u = parents[v] as usize;
                    assert_eq!(depth[u] + 1, depth[v], "parent one level up");
                    assert!(g.neigh(u as u32).contains(&(v as u32)));
                }
            }
        }
    }

    #[test]
    fn direction_optimization_switches_to_bottom_up() {
        // On a Kronecker graph the middle levels run bottom-up: far fewer parent
        // reads than a top-down search would make (one per directed edge).
        let w = GraphBfs::new(&small(14, 1, 1), 4);
        let g = w.graph().clone();
        let mut p = w.inner.program();
        let events = record(&mut p);
        let parent = w.mappings()[2];
        let front_or_curr = [w.mappings()[4], w.mappings()[5]];
        let traverse = phase(&events, "traverse", 0);
        let parent_reads = traverse
            .iter()
            .filter(
                |e| matches!(e, Event::Access { addr, write: false, .. } if parent.contains(*addr)),
            )
            .count() as u64;
        let bitmap_reads = traverse
            .iter()
            .filter(|e| matches!(e, Event::Access { addr, write: false, .. } if front_or_curr.iter().any(|m| m.contains(*addr))))
            .count();
        assert!(bitmap_reads > 0, "bottom-up steps ran");
        assert!(
            parent_reads < g.nr_edges_directed() / 2,
            "{parent_reads} parent reads for {} edges",
            g.nr_edges_directed()
        );
    }

    #[test]
    fn validate_names_the_bad_field() {
        let bad = |f: &dyn Fn(&mut GraphBfsConfig), field: &str| {
            let mut c = GraphBfsConfig::default();
            f(&mut c);
            let e = c.validate().unwrap_err();
            assert!(e.to_string().contains(field), "{e:?} should name {field}");
        };
        bad(&|c| c.graph_scale = 2, "graph_scale");
        bad(&|c| c.graph_scale = 40, "graph_scale");
        bad(&|c| c.scale = 1e-9, "graph_scale");
        bad(&|c| c.edge_factor = 0, "edge_factor");
        bad(&|c| c.nr_trials = 0, "nr_trials");
        bad(&|c| c.alpha = 0, "alpha");
        bad(&|c| c.beta = 0, "beta");
        bad(&|c| c.scale = 0.0, "scale");
        bad(&|c| c.nr_threads = 0, "nr_threads");
        bad(&|c| c.mlp = 0.0, "mlp");
        GraphBfsConfig::default().validate().unwrap();
        let w = GraphBfs::new(&small(8, 1, 1), 0);
        assert_eq!(w.shape().processes[0].name, NAME);
    }
}
