//! `graph-pr`: GAP's PageRank (`pr.cc`, `PageRankPullGS`).
//!
//! Pull-direction PageRank with Gauss-Seidel updates, damping 0.85, float scores:
//! each trial fills `scores` with `1/n` and `outgoing_contrib` with
//! `score / degree`, then iterates: every vertex `u` sums `outgoing_contrib[v]` over
//! its neighbours, stores its new score and immediately its new contribution (the
//! Gauss-Seidel part: later vertices of the same iteration already pull it). The
//! iterations stop when the summed absolute change drops below `tolerance` or after
//! `max_iterations`, as GAP's `-t` and `-i` do; the scores are really computed, so
//! the number of iterations is the real one.
//!
//! Arrays: `scores` and `outgoing_contrib` (`float` per vertex), each its own
//! mapping. Per iteration the stream reads the offsets and the neighbours array in
//! order (one access per line), `outgoing_contrib[v]` once per directed edge (the
//! data-dependent gather: exactly `nr_edges_directed` per iteration), and streams
//! `scores` (read and write) and `outgoing_contrib` (write) in vertex order. The
//! iteration loop is `schedule(dynamic, 16384)`, the initialisation loops static.
//!
//! Marks: `trial`, then `iteration` before each iteration.

use serde::{Deserialize, Serialize};
use tierkit_core::ConfigError;
use tierkit_core::VmaKind;

use super::engine::{ParFor, Schedule, Sink, Stream};
use super::{Csr, GraphArrays, GraphSetup, GraphWorkload, Kernel};
use crate::common::prefetch;
use crate::layout::{Layout, Mapping};

const NAME: &str = "graph-pr";
/// GAP's damping factor `kDamp`.
pub const DAMPING: f32 = 0.85;
/// Bytes of a score (GAP's `ScoreT`, a `float`).
const SCORE_BYTES: u64 = 4;
/// How many edges ahead the host prefetches a neighbour's contribution.
const EDGE_LOOKAHEAD: u64 = 16;

/// Configuration of [`GraphPr`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct GraphPrConfig {
    /// log2 of the number of vertices before `scale` (GAP's `-g`). Default 21
    /// (2 Mi vertices, ≈ 60 M directed edges, ≈ 0.27 GiB). Range: the effective
    /// scale (see [`crate::graph`]) must be in [4, 30].
    pub graph_scale: u32,
    /// Generated edges per vertex (GAP's `-k`). Default 16. Range [1, 1024].
    pub edge_factor: u32,
    /// Number of PageRank computations on the graph (GAP's `-n`). Default 1.
    /// Range >= 1.
    pub nr_trials: u32,
    /// Trials computed on the host; the other `nr_trials - computed_trials` replay
    /// their accesses in turn (see [`crate::graph`], "Trials"). Default 0: every
    /// trial is computed. Range [0, `nr_trials`].
    pub computed_trials: u32,
    /// Most iterations per trial (GAP's `-i`). Default 2, where GAP's is 20: at
    /// tolerance 1e-4 a Kronecker graph converges in about 9 iterations of one
    /// access per edge each (≈ 66 M at the default scale), which would put the
    /// default run far over the suite's 200 M-access budget; 2 iterations keep a
    /// repeated sweep. Set 20 for GAP's full run. Range >= 1.
    pub max_iterations: u32,
    /// Stop once the summed absolute score change of an iteration is below this
    /// (GAP's `-t`). Default 1e-4 (GAP). Range >= 0 (0: always `max_iterations`).
    pub tolerance: f64,
    /// Compute before each access, in ns. Default 1 (one float add).
    pub gap_ns: u32,
    /// Grows the graph: effective scale `graph_scale + round(log2(scale))`.
    /// Default 1.0.
    pub scale: f64,
    /// Number of threads. Default 1.
    pub nr_threads: u32,
    /// Memory-level parallelism. Default 6.0: the gathers of one vertex are
    /// independent and the neighbour stream is prefetched.
    pub mlp: f64,
}

impl Default for GraphPrConfig {
    fn default() -> Self {
        GraphPrConfig {
            graph_scale: 21,
            edge_factor: 16,
            nr_trials: 1,
            computed_trials: 0,
            max_iterations: 2,
            tolerance: 1e-4,
            gap_ns: 1,
            scale: 1.0,
            nr_threads: 1,
            mlp: 6.0,
        }
    }
}

impl GraphPrConfig {
    /// Check every field; the error names the field and its valid range.
    pub fn validate(&self) -> Result<(), ConfigError> {
        if self.max_iterations == 0 {
            return Err(format!("{NAME}.max_iterations must be >= 1, got 0").into());
        }
        if !(self.tolerance >= 0.0 && self.tolerance.is_finite()) {
            return Err(format!(
                "{NAME}.tolerance must be a finite number >= 0, got {}",
                self.tolerance
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
            8.0,
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
    /// GAP's pull PageRank on a Kronecker graph (see the module docs).
    GraphPr,
    PrKernel
);

impl GraphPr {
    /// Build the graph and the kernel for `cfg` with `seed`.
    ///
    /// # Panics
    /// If `cfg` does not pass [`GraphPrConfig::validate`].
    pub fn new(cfg: &GraphPrConfig, seed: u64) -> Self {
        if let Err(e) = cfg.validate() {
            panic!("invalid {NAME} config: {e}");
        }
        let inner = GraphWorkload::new(NAME, &cfg.setup(), seed, |g, layout, maps| {
            PrKernel::new(g, cfg, layout, maps)
        });
        GraphPr { inner }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Stage {
    StartTrial,
    InitScores,
    InitContrib,
    StartIteration,
    Iterate,
}

/// PageRank state (see the module docs).
#[derive(Debug, Clone)]
pub struct PrKernel {
    nr_threads: u32,
    nr_trials: u32,
    max_iterations: u32,
    tolerance: f64,
    scores_at: u64,
    contrib_at: u64,
    scores: Vec<f32>,
    contrib: Vec<f32>,
    error: f64,
    iteration: u32,
    trial: u32,
    iterations_run: Vec<u32>,
    stage: Stage,
    par: ParFor,
}

impl PrKernel {
    fn new(g: &Csr, cfg: &GraphPrConfig, layout: &mut Layout, maps: &mut Vec<Mapping>) -> Self {
        let n = g.nr_vertices();
        let scores = layout.map(n * SCORE_BYTES, VmaKind::Anon);
        let contrib = layout.map(n * SCORE_BYTES, VmaKind::Anon);
        maps.extend([scores, contrib]);
        PrKernel {
            nr_threads: cfg.nr_threads,
            nr_trials: super::trials_computed(cfg.nr_trials, cfg.computed_trials),
            max_iterations: cfg.max_iterations,
            tolerance: cfg.tolerance,
            scores_at: scores.addr,
            contrib_at: contrib.addr,
            scores: vec![0.0; n as usize],
            contrib: tierkit_core::host::vec_on_huge_pages(0.0, n as usize),
            error: 0.0,
            iteration: 0,
            trial: 0,
            iterations_run: Vec::new(),
            stage: Stage::StartTrial,
            par: ParFor::new(0, 1, Schedule::Blocked, 1),
        }
    }

    /// The scores after the last iteration run.
    pub fn scores(&self) -> &[f32] {
        &self.scores
    }

    /// Iterations each finished trial ran.
    pub fn iterations_run(&self) -> &[u32] {
        &self.iterations_run
    }

    fn loop_over(&mut self, n: u64, schedule: Schedule, stage: Stage) {
        self.par = ParFor::new(n, self.nr_threads, schedule, 64);
        self.stage = stage;
    }

    fn iterate_piece<S: Sink>(
        &mut self,
        g: &Csr,
        a: &GraphArrays,
        s: &mut S,
        t: usize,
        lo: u64,
        hi: u64,
    ) {
        let n = g.nr_vertices() as f32;
        let base_score = (1.0 - DAMPING) / n;
        // The neighbour lists of consecutive vertices are contiguous: one stream.
        let (mut os, mut ns, mut rs, mut ws, mut cs) = (
            Stream::default(),
            Stream::default(),
            Stream::default(),
            Stream::default(),
            Stream::default(),
        );
        for u in lo..hi {
            a.stream_offsets(&mut os, s, t, u as u32);
            let mut incoming_total = 0.0f32;
            for e in g.offsets[u as usize]..g.offsets[u as usize + 1] {
                // Host speed only: the contribution of the edge 16 ahead, whichever
                // vertex it belongs to (the lists are contiguous in vertex order).
                if let Some(&w) = g.neighbours.get((e + EDGE_LOOKAHEAD) as usize) {
                    prefetch(&self.contrib[w as usize]);
                }
                ns.touch(s, t, a.nb(e), false);
                let v = g.neighbours[e as usize] as u64;
                s.access(t, self.contrib_at + v * SCORE_BYTES, false);
                incoming_total += self.contrib[v as usize];
            }
            let at = self.scores_at + u * SCORE_BYTES;
            rs.touch(s, t, at, false);
            let old_score = self.scores[u as usize];
            let new_score = base_score + DAMPING * incoming_total;
            self.scores[u as usize] = new_score;
            ws.touch(s, t, at, true);
            self.error += f64::from((new_score - old_score).abs());
            self.contrib[u as usize] = new_score / g.degree(u as u32) as f32;
            cs.touch(s, t, self.contrib_at + u * SCORE_BYTES, true);
        }
    }
}

impl Kernel for PrKernel {
    fn step<S: Sink>(&mut self, g: &Csr, a: &GraphArrays, s: &mut S) -> bool {
        let n = g.nr_vertices();
        loop {
            match self.stage {
                Stage::StartTrial => {
                    if self.trial == self.nr_trials {
                        return false;
                    }
                    s.mark("trial");
                    self.loop_over(n, Schedule::Blocked, Stage::InitScores);
                }
                Stage::StartIteration => {
                    s.mark("iteration");
                    self.error = 0.0;
                    self.loop_over(n, Schedule::Cyclic(16384), Stage::Iterate);
                }
                _ => {
                    if let Some((t, lo, hi)) = self.par.next_piece() {
                        match self.stage {
                            Stage::InitScores => {
                                let init = 1.0 / n as f32;
                                let mut ws = Stream::default();
                                for u in lo..hi {
                                    self.scores[u as usize] = init;
                                    ws.touch(s, t, self.scores_at + u * SCORE_BYTES, true);
                                }
                            }
                            Stage::InitContrib => {
                                let init = 1.0 / n as f32;
                                let (mut os, mut ws) = (Stream::default(), Stream::default());
                                for u in lo..hi {
                                    a.stream_offsets(&mut os, s, t, u as u32);
                                    self.contrib[u as usize] = init / g.degree(u as u32) as f32;
                                    ws.touch(s, t, self.contrib_at + u * SCORE_BYTES, true);
                                }
                            }
                            Stage::Iterate => self.iterate_piece(g, a, s, t, lo, hi),
                            _ => unreachable!(),
                        }
                        return true;
                    }
                    match self.stage {
                        Stage::InitScores => {
                            self.loop_over(n, Schedule::Blocked, Stage::InitContrib);
                        }
                        Stage::InitContrib => {
                            self.iteration = 0;
                            self.stage = Stage::StartIteration;
                        }
                        Stage::Iterate => {
                            self.iteration += 1;
                            if self.error < self.tolerance || self.iteration == self.max_iterations
                            {
                                self.iterations_run.push(self.iteration);
                                self.trial += 1;
                                self.stage = Stage::StartTrial;
                            } else {
                                self.stage = Stage::StartIteration;
                            }
                        }
                        _ => unreachable!(),
                    }
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::graph::engine::testing::{phase, record, Event};
    use crate::testutil::{check_structure, drain};
    use tierkit_core::Workload;

    fn small(graph_scale: u32, nr_threads: u32) -> GraphPrConfig {
        GraphPrConfig {
            graph_scale,
            nr_threads,
            max_iterations: 20,
            ..GraphPrConfig::default()
        }
    }

    #[test]
    fn same_seed_same_stream_different_seed_different_stream() {
        let cfg = small(10, 2);
        let a = drain(&mut GraphPr::new(&cfg, 7));
        let b = drain(&mut GraphPr::new(&cfg, 7));
        let c = drain(&mut GraphPr::new(&cfg, 8));
        assert_eq!(a.streams, b.streams);
        assert_ne!(a.streams, c.streams);
    }

    #[test]
    fn footprint_mappings_and_access_count() {
        let mut w = GraphPr::new(&small(11, 3), 1);
        let d = drain(&mut w);
        assert_eq!(d.mappings, w.mappings());
        check_structure(&w, &d);
    }

    #[test]
    fn each_iteration_gathers_once_per_edge_and_streams_the_graph() {
        let w = GraphPr::new(&small(13, 2), 2);
        let g = w.graph().clone();
        let maps = w.mappings().to_vec();
        let (neigh, contrib) = (maps[1], maps[3]);
        let mut p = w.inner.program();
        let events = record(&mut p);
        let iterations = p.kernel.iterations_run()[0] as usize;
        assert!(
            (3..20).contains(&iterations),
            "converged in {iterations} iterations"
        );
        let neigh_lines = neigh.len / 64;
        for it in 0..iterations {
            let ev = phase(&events, "iteration", it);
            let count = |m: &Mapping, write: bool| {
                ev.iter()
                    .filter(|e| matches!(e, Event::Access { addr, write: w, .. } if m.contains(*addr) && *w == write))
                    .count() as u64
            };
            assert_eq!(
                count(&contrib, false),
                g.nr_edges_directed(),
                "iteration {it}"
            );
            // Each neighbour line once (a line shared by two pieces of 64 vertices
            // is read by both).
            let nl = count(&neigh, false);
            let used_lines = (g.nr_edges_directed() * 4).div_ceil(64);
            let pieces = g.nr_vertices() / 64;
            assert!(
                nl >= used_lines && nl <= used_lines + pieces,
                "{nl} vs {used_lines}"
            );
            assert!(used_lines <= neigh_lines);
        }
        // The real computation converged: at the fixed point the vertices with
        // edges hold their share of the mass, isolated ones only the base score
        // (1 - 0.85) / n, so the scores sum to 1 - 0.85 × isolated / n.
        let n = g.nr_vertices() as f64;
        let isolated = (0..g.nr_vertices() as u32)
            .filter(|&u| g.degree(u) == 0)
            .count() as f64;
        let sum: f64 = p.kernel.scores().iter().map(|&x| f64::from(x)).sum();
        let expected = 1.0 - 0.85 * isolated / n;
        assert!(
            (sum - expected).abs() < 0.01,
            "sum of scores {sum}, expected {expected}"
        );
    }

    #[test]
    fn validate_names_the_bad_field() {
        let bad = |f: &dyn Fn(&mut GraphPrConfig), field: &str| {
            let mut c = GraphPrConfig::default();
            f(&mut c);
            let e = c.validate().unwrap_err();
            assert!(e.to_string().contains(field), "{e:?} should name {field}");
        };
        bad(&|c| c.max_iterations = 0, "max_iterations");
        bad(&|c| c.tolerance = -1.0, "tolerance");
        bad(&|c| c.tolerance = f64::NAN, "tolerance");
        bad(&|c| c.graph_scale = 3, "graph_scale");
        bad(&|c| c.edge_factor = 5000, "edge_factor");
        bad(&|c| c.nr_trials = 0, "nr_trials");
        bad(&|c| c.nr_threads = 5000, "nr_threads");
        GraphPrConfig::default().validate().unwrap();
        let w = GraphPr::new(&small(8, 1), 0);
        assert_eq!(w.shape().processes[0].name, NAME);
    }
}
