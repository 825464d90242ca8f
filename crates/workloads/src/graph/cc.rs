//! `graph-cc`: GAP's connected components, Afforest (`cc.cc` / `cc_afforest.cc`,
//! Sutton, Ben-Nun & Barak, IPDPS'18).
//!
//! Afforest restructures Shiloach-Vishkin around subgraph sampling. Each trial:
//! `comp[n] = n`; then `neighbor_rounds` rounds, each linking every vertex with its
//! `r`-th neighbour (`Link`: follow both trees towards their roots and hook the
//! higher root under the lower with a compare-and-swap) followed by `Compress`
//! (pointer jumping until every vertex points at its root); then 1024 random
//! samples of `comp` find the largest intermediate component, and a final link
//! phase processes the remaining neighbours of only the vertices *outside* it; a
//! last `Compress` finishes. On a Kronecker graph nearly every edge of the giant
//! component is skipped, which is Afforest's point — and makes CC the graph kernel
//! with the lightest edge traffic.
//!
//! Arrays: `comp` (`int32` per vertex, its own mapping). Every `comp` load `Link`
//! and `Compress` perform is emitted (they chase data-dependent pointers); vertex
//! loops stream `offsets` and `comp[u]`. Schedules as GAP's: link rounds `static`,
//! `Compress` `static, 2048`, the final link `dynamic, 2048`; the sampling is serial
//! (thread 0). Races between concurrent links resolve in the engine's global order.
//!
//! Marks: `trial`, `link` before each link phase, `compress` before each compress,
//! `sample`.

use rand_xoshiro::Xoshiro256PlusPlus;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use tierkit_core::ConfigError;
use tierkit_core::VmaKind;

use super::engine::{ParFor, Schedule, Sink, Stream};
use super::{Csr, GraphArrays, GraphSetup, GraphWorkload, Kernel, NODE_BYTES};
use crate::common;
use crate::layout::{Layout, Mapping};

const NAME: &str = "graph-cc";
/// Samples of `comp` taken to find the largest intermediate component (GAP's
/// `SampleFrequentElement` default).
pub const NR_SAMPLES: u32 = 1024;

/// Configuration of [`GraphCc`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct GraphCcConfig {
    /// log2 of the number of vertices before `scale` (GAP's `-g`). Default 22
    /// (4 Mi vertices, ≈ 120 M directed edges, ≈ 0.5 GiB). Range: the effective
    /// scale (see [`crate::graph`]) must be in [4, 30].
    pub graph_scale: u32,
    /// Generated edges per vertex (GAP's `-k`). Default 16. Range [1, 1024].
    pub edge_factor: u32,
    /// Number of CC computations on the graph (GAP's `-n`). Default 3 (≈ 50 M
    /// accesses each at the default scale). Range >= 1.
    pub nr_trials: u32,
    /// Trials computed on the host; the other `nr_trials - computed_trials` replay
    /// their accesses in turn (see [`crate::graph`], "Trials"). Default 0: every
    /// trial is computed. Range [0, `nr_trials`].
    pub computed_trials: u32,
    /// Sampling rounds before the final link phase (Afforest's
    /// `neighbor_rounds`). Default 2 (GAP, Afforest §IV). Range [1, 64].
    pub neighbor_rounds: u32,
    /// Compute before each access, in ns. Default 1.
    pub gap_ns: u32,
    /// Grows the graph: effective scale `graph_scale + round(log2(scale))`.
    /// Default 1.0.
    pub scale: f64,
    /// Number of threads. Default 1.
    pub nr_threads: u32,
    /// Memory-level parallelism. Default 2.0: the pointer chases of `Link` and
    /// `Compress` are dependent loads; only separate vertices overlap.
    pub mlp: f64,
}

impl Default for GraphCcConfig {
    fn default() -> Self {
        GraphCcConfig {
            graph_scale: 22,
            edge_factor: 16,
            nr_trials: 3,
            computed_trials: 0,
            neighbor_rounds: 2,
            gap_ns: 1,
            scale: 1.0,
            nr_threads: 1,
            mlp: 2.0,
        }
    }
}

impl GraphCcConfig {
    /// Check every field; the error names the field and its valid range.
    pub fn validate(&self) -> Result<(), ConfigError> {
        if !(1..=64).contains(&self.neighbor_rounds) {
            return Err(format!(
                "{NAME}.neighbor_rounds must be in [1, 64], got {}",
                self.neighbor_rounds
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
            4.0,
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
    /// GAP's Afforest connected components on a Kronecker graph (see the module docs).
    GraphCc,
    CcKernel
);

impl GraphCc {
    /// Build the graph and the kernel for `cfg` with `seed`.
    ///
    /// # Panics
    /// If `cfg` does not pass [`GraphCcConfig::validate`].
    pub fn new(cfg: &GraphCcConfig, seed: u64) -> Self {
        if let Err(e) = cfg.validate() {
            panic!("invalid {NAME} config: {e}");
        }
        let inner = GraphWorkload::new(NAME, &cfg.setup(), seed, |g, layout, maps| {
            CcKernel::new(g, cfg, layout, maps, seed)
        });
        GraphCc { inner }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Stage {
    StartTrial,
    Init,
    LinkRound,
    Compress,
    Sample,
    FinalLink,
    FinalCompress,
}

/// Afforest state (see the module docs).
#[derive(Debug, Clone)]
pub struct CcKernel {
    nr_threads: u32,
    nr_trials: u32,
    neighbor_rounds: u32,
    rng: Xoshiro256PlusPlus,
    comp_at: u64,
    comp: Vec<u32>,
    round: u32,
    largest: u32,
    trial: u32,
    stage: Stage,
    par: ParFor,
}

impl CcKernel {
    fn new(
        g: &Csr,
        cfg: &GraphCcConfig,
        layout: &mut Layout,
        maps: &mut Vec<Mapping>,
        seed: u64,
    ) -> Self {
        let n = g.nr_vertices();
        let comp = layout.map(n * NODE_BYTES, VmaKind::Anon);
        maps.push(comp);
        CcKernel {
            nr_threads: cfg.nr_threads,
            nr_trials: super::trials_computed(cfg.nr_trials, cfg.computed_trials),
            neighbor_rounds: cfg.neighbor_rounds,
            rng: super::tagged_rng(seed, 3),
            comp_at: comp.addr,
            comp: vec![0; n as usize],
            round: 0,
            largest: 0,
            trial: 0,
            stage: Stage::StartTrial,
            par: ParFor::new(0, 1, Schedule::Blocked, 1),
        }
    }

    /// The component labels after the last trial.
    pub fn labels(&self) -> &[u32] {
        &self.comp
    }

    #[inline]
    fn at(&self, v: u32) -> u64 {
        self.comp_at + u64::from(v) * NODE_BYTES
    }

    #[inline]
    fn load<S: Sink>(&self, s: &mut S, t: usize, v: u32) -> u32 {
        s.access(t, self.at(v), false);
        self.comp[v as usize]
    }

    /// GAP's `Link(u, v, comp)`.
    fn link<S: Sink>(&mut self, s: &mut S, t: usize, u: u32, v: u32) {
        let mut p1 = self.load(s, t, u);
        let mut p2 = self.load(s, t, v);
        while p1 != p2 {
            let high = p1.max(p2);
            let low = p1.min(p2);
            let p_high = self.load(s, t, high);
            if p_high == low {
                break;
            }
            if p_high == high {
                // compare_and_swap(comp[high], high, low) succeeds: nothing else ran
                // between the load and the swap in the global order.
                s.access(t, self.at(high), true);
                self.comp[high as usize] = low;
                break;
            }
            // p1 = comp[comp[high]] reuses the value just loaded; p2 = comp[low].
            p1 = self.load(s, t, p_high);
            p2 = self.load(s, t, low);
        }
    }

    fn link_round_piece<S: Sink>(
        &mut self,
        g: &Csr,
        a: &GraphArrays,
        s: &mut S,
        t: usize,
        lo: u64,
        hi: u64,
    ) {
        let (mut os, mut ns) = (Stream::default(), Stream::default());
        let r = u64::from(self.round);
        for u in lo..hi {
            a.stream_offsets(&mut os, s, t, u as u32);
            let start = g.offsets[u as usize] + r;
            if start < g.offsets[u as usize + 1] {
                ns.touch(s, t, a.nb(start), false);
                let v = g.neighbours[start as usize];
                self.link(s, t, u as u32, v);
            }
        }
    }

    fn compress_piece<S: Sink>(&mut self, s: &mut S, t: usize, lo: u64, hi: u64) {
        let mut cs = Stream::default();
        for n in lo..hi {
            cs.touch(s, t, self.at(n as u32), false);
            loop {
                let c = self.comp[n as usize];
                let cc = self.load(s, t, c);
                if c == cc {
                    break;
                }
                self.comp[n as usize] = cc;
                s.access(t, self.at(n as u32), true);
            }
        }
    }

    fn final_link_piece<S: Sink>(
        &mut self,
        g: &Csr,
        a: &GraphArrays,
        s: &mut S,
        t: usize,
        lo: u64,
        hi: u64,
    ) {
        let (mut cs, mut os, mut ns) = (Stream::default(), Stream::default(), Stream::default());
        for u in lo..hi {
            cs.touch(s, t, self.at(u as u32), false);
            if self.comp[u as usize] == self.largest {
                continue;
            }
            a.stream_offsets(&mut os, s, t, u as u32);
            let start = g.offsets[u as usize] + u64::from(self.neighbor_rounds);
            for e in start..g.offsets[u as usize + 1] {
                ns.touch(s, t, a.nb(e), false);
                let v = g.neighbours[e as usize];
                self.link(s, t, u as u32, v);
            }
        }
    }

    /// GAP's `SampleFrequentElement`, serial on thread 0; ties go to the smaller
    /// label so the choice is deterministic.
    fn sample<S: Sink>(&mut self, s: &mut S) {
        let n = self.comp.len() as u64;
        let mut counts: BTreeMap<u32, u32> = BTreeMap::new();
        for _ in 0..NR_SAMPLES {
            let v = common::below(&mut self.rng, n) as u32;
            *counts.entry(self.load(s, 0, v)).or_default() += 1;
        }
        let best = counts.values().copied().max().unwrap_or(0);
        self.largest = counts
            .iter()
            .find(|(_, &c)| c == best)
            .map_or(0, |(&l, _)| l);
    }
}

impl Kernel for CcKernel {
    fn step<S: Sink>(&mut self, g: &Csr, a: &GraphArrays, s: &mut S) -> bool {
        let n = g.nr_vertices();
        let par = |stage| match stage {
            Stage::Init | Stage::LinkRound => Schedule::Blocked,
            Stage::Compress | Stage::FinalCompress => Schedule::Cyclic(2048),
            _ => Schedule::Cyclic(2048),
        };
        loop {
            match self.stage {
                Stage::StartTrial => {
                    if self.trial == self.nr_trials {
                        return false;
                    }
                    s.mark("trial");
                    self.stage = Stage::Init;
                    self.par = ParFor::new(n, self.nr_threads, par(Stage::Init), 64);
                }
                Stage::Sample => {
                    s.mark("sample");
                    self.sample(s);
                    s.mark("link");
                    self.stage = Stage::FinalLink;
                    self.par = ParFor::new(n, self.nr_threads, par(Stage::FinalLink), 64);
                    return true;
                }
                stage => {
                    if let Some((t, lo, hi)) = self.par.next_piece() {
                        match stage {
                            Stage::Init => {
                                let mut ws = Stream::default();
                                for u in lo..hi {
                                    self.comp[u as usize] = u as u32;
                                    ws.touch(s, t, self.at(u as u32), true);
                                }
                            }
                            Stage::LinkRound => self.link_round_piece(g, a, s, t, lo, hi),
                            Stage::Compress | Stage::FinalCompress => {
                                self.compress_piece(s, t, lo, hi)
                            }
                            Stage::FinalLink => self.final_link_piece(g, a, s, t, lo, hi),
                            _ => unreachable!(),
                        }
                        return true;
                    }
                    let next = match stage {
                        Stage::Init => {
                            self.round = 0;
                            s.mark("link");
                            Stage::LinkRound
                        }
                        Stage::LinkRound => {
                            s.mark("compress");
                            Stage::Compress
                        }
                        Stage::Compress => {
                            self.round += 1;
                            if self.round < self.neighbor_rounds {
                                s.mark("link");
                                Stage::LinkRound
                            } else {
                                Stage::Sample
                            }
                        }
                        Stage::FinalLink => {
                            s.mark("compress");
                            Stage::FinalCompress
                        }
                        Stage::FinalCompress => {
                            self.trial += 1;
                            Stage::StartTrial
                        }
                        _ => unreachable!(),
                    };
                    self.stage = next;
                    if !matches!(next, Stage::Sample | Stage::StartTrial) {
                        self.par = ParFor::new(n, self.nr_threads, par(next), 64);
                    }
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::graph::engine::testing::record;
    use crate::testutil::{check_structure, drain};
    use tierkit_core::Workload;

    fn small(graph_scale: u32, nr_threads: u32, nr_trials: u32) -> GraphCcConfig {
        GraphCcConfig {
            graph_scale,
            nr_threads,
            nr_trials,
            ..GraphCcConfig::default()
        }
    }

    /// Reference union-find: the root of each vertex (smallest id of its set).
    fn reference_components(g: &Csr) -> Vec<u32> {
        let n = g.nr_vertices() as usize;
        let mut parent: Vec<u32> = (0..n as u32).collect();
        fn find(p: &mut [u32], mut x: u32) -> u32 {
            while p[x as usize] != x {
                p[x as usize] = p[p[x as usize] as usize];
                x = p[x as usize];
            }
            x
        }
        for u in 0..n as u32 {
            for &v in g.neigh(u) {
                let (a, b) = (find(&mut parent, u), find(&mut parent, v));
                if a != b {
                    parent[a.max(b) as usize] = a.min(b);
                }
            }
        }
        (0..n as u32).map(|u| find(&mut parent, u)).collect()
    }

    #[test]
    fn same_seed_same_stream_different_seed_different_stream() {
        let cfg = small(10, 2, 2);
        let a = drain(&mut GraphCc::new(&cfg, 7));
        let b = drain(&mut GraphCc::new(&cfg, 7));
        let c = drain(&mut GraphCc::new(&cfg, 8));
        assert_eq!(a.streams, b.streams);
        assert_ne!(a.streams, c.streams);
    }

    #[test]
    fn footprint_mappings_and_access_count() {
        let mut w = GraphCc::new(&small(11, 3, 2), 1);
        let d = drain(&mut w);
        assert_eq!(d.mappings, w.mappings());
        check_structure(&w, &d);
    }

    #[test]
    fn labels_match_a_reference_union_find() {
        for (scale, nr_threads) in [(12, 1), (13, 4)] {
            let w = GraphCc::new(&small(scale, nr_threads, 2), 5);
            let g = w.graph().clone();
            let mut p = w.inner.program();
            record(&mut p);
            let reference = reference_components(&g);
            // Afforest hooks higher roots under lower ones, so each label is the
            // smallest vertex id of its component — exactly the union-find root.
            assert_eq!(p.kernel.labels(), &reference[..]);
            let nr_components = reference
                .iter()
                .enumerate()
                .filter(|&(u, &r)| u as u32 == r)
                .count();
            assert!(
                nr_components > 1,
                "isolated vertices are their own components"
            );
        }
    }

    #[test]
    fn the_giant_component_skips_most_edges() {
        // Afforest's final phase skips every vertex of the largest component: the
        // whole run reads far fewer neighbours than there are edges.
        let w = GraphCc::new(&small(14, 1, 1), 6);
        let g = w.graph().clone();
        let neigh = w.mappings()[1];
        let mut p = w.inner.program();
        let events = record(&mut p);
        let neigh_reads = events
            .iter()
            .filter(|e| matches!(e, crate::graph::engine::testing::Event::Access { addr, .. } if neigh.contains(*addr)))
            .count() as u64;
        let neigh_lines = (g.nr_edges_directed() * 4).div_ceil(64);
        assert!(
            neigh_reads < neigh_lines,
            "{neigh_reads} neighbour-line reads, {neigh_lines} lines"
        );
    }

    #[test]
    fn validate_names_the_bad_field() {
        let bad = |f: &dyn Fn(&mut GraphCcConfig), field: &str| {
            let mut c = GraphCcConfig::default();
            f(&mut c);
            let e = c.validate().unwrap_err();
            assert!(e.to_string().contains(field), "{e:?} should name {field}");
        };
        bad(&|c| c.neighbor_rounds = 0, "neighbor_rounds");
        bad(&|c| c.neighbor_rounds = 65, "neighbor_rounds");
        bad(&|c| c.graph_scale = 31, "graph_scale");
        bad(&|c| c.nr_trials = 0, "nr_trials");
        bad(&|c| c.mlp = 65.0, "mlp");
        GraphCcConfig::default().validate().unwrap();
        let w = GraphCc::new(&small(8, 1, 1), 0);
        assert_eq!(w.shape().processes[0].name, NAME);
    }
}
