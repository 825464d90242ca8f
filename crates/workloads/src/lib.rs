//! # tierkit-workloads: synthetic access-stream generators
//!
//! Each generator implements [`tierkit_core::Workload`]: it declares its processes,
//! threads and footprint, emits its start-up mappings in the prologue, and then
//! produces every thread's stream of [`Op`]s in batches of [`BATCH_OPS`].
//!
//! | name | what it models |
//! | --- | --- |
//! | [`gups`] | HeMem's GUPS: read-modify-write updates, a hot subset that starts on the slow tier |
//! | [`zipf_kv`] | YCSB-C style lookups (scrambled zipfian keys) in a hash-indexed record store |
//! | [`pmbench`] | pmbench: Gaussian page popularity around the middle of one big region |
//!
//! All generators follow the same rules:
//!
//! - **Deterministic.** Thread `(process, thread)` draws from its own
//!   `Xoshiro256PlusPlus` seeded by [`thread_rng`], so its stream depends only on the
//!   workload's seed and its own identity — never on the order in which the machine
//!   fills threads.
//! - **Shaped like the real program.** Every large array is its own anonymous mapping
//!   from a bump [`layout::Layout`], as glibc serves big `malloc`s. Each thread first
//!   initialises its share of the data sequentially (as the real benchmarks do), which
//!   is what decides first-touch placement, and then runs its measured phase.
//! - **Scaled by one knob.** Every config has `scale` (default 1.0, ≈ 4 GiB) that
//!   multiplies the footprint and the number of operations together, so a small
//!   scale gives a quick run of the same shape.
//! - **Fast.** Generation is batched and allocation-free per call, well above the
//!   simulator's consumption rate.
//!
//! [`WorkloadConfig`] is the registry: a serde-tagged enum over every generator's
//! config, as read from a run description (`name = "gups"` plus the fields).

use rand::SeedableRng;
use rand_xoshiro::Xoshiro256PlusPlus;
use serde::{Deserialize, Serialize};
use tierkit_core::{ConfigError, Op, Workload};

pub mod btree;
pub mod cachelib;
mod common;
pub mod graph;
pub mod gups;
pub mod hot_shift;
mod kv;
pub mod liblinear;
pub mod mix;
pub mod pmbench_ladder;
pub mod recorded;
pub mod stencil;
pub mod trace;
pub mod xgboost;
pub mod xsbench;
pub mod ycsb;
// registry: modules (one `pub mod name;` line per workload, sorted)
pub mod kept;
pub mod layout;
pub mod pmbench;
pub mod zipf;
pub mod zipf_kv;

pub use btree::{Btree, BtreeConfig};
pub use cachelib::{Cachelib, CachelibConfig};
pub use graph::bc::{GraphBc, GraphBcConfig};
pub use graph::bfs::{GraphBfs, GraphBfsConfig};
pub use graph::cc::{GraphCc, GraphCcConfig};
pub use graph::pagerank::{GraphPr, GraphPrConfig};
pub use gups::{Gups, GupsConfig};
pub use hot_shift::{HotShift, HotShiftConfig};
pub use liblinear::{Liblinear, LiblinearConfig};
pub use mix::{Mix, MixConfig};
pub use pmbench_ladder::{PmbenchLadder, PmbenchLadderConfig};
pub use stencil::{Bwaves, BwavesConfig, Roms, RomsConfig};
pub use trace::{TraceConfig, TraceWorkload};
pub use xgboost::{Xgboost, XgboostConfig};
pub use xsbench::{Xsbench, XsbenchConfig};
pub use ycsb::{Ycsb, YcsbConfig, YcsbMix};
// registry: re-exports
pub use pmbench::{Pmbench, PmbenchConfig, PmbenchPattern};
pub use zipf_kv::{ZipfKv, ZipfKvConfig};

/// Operations a generator appends per [`Workload::fill`] call (at most): large enough
/// to amortise the call, small enough to stay in L1/L2 while the machine consumes it.
pub const BATCH_OPS: usize = 4096;

/// The random stream of thread `(process, thread)` of a workload seeded with `seed`.
///
/// The seed is mixed with the process and thread ids through SplitMix64 so that
/// streams of different threads are independent and each depends only on its own
/// `(seed, process, thread)`.
pub fn thread_rng(seed: u64, process: usize, thread: usize) -> Xoshiro256PlusPlus {
    let mut h = common::mix64(seed);
    h = common::mix64(h ^ process as u64);
    h = common::mix64(h ^ thread as u64);
    // seed_from_u64 expands the 64-bit key into the 256-bit state with SplitMix64.
    Xoshiro256PlusPlus::seed_from_u64(h)
}

/// Any built-in workload's configuration; the registry of generators.
///
/// Serialised with the workload's name as the `name` tag, e.g.
/// `{"name": "gups", "footprint_mib": 1024}`; omitted fields take their defaults.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(tag = "name", rename_all = "kebab-case")]
pub enum WorkloadConfig {
    /// HeMem-style GUPS.
    Gups(GupsConfig),
    /// YCSB-style zipfian key-value lookups.
    ZipfKv(ZipfKvConfig),
    /// pmbench-like Gaussian page accesses.
    Pmbench(PmbenchConfig),
    /// YCSB core workloads A, B, C, D, F and write-only W.
    Ycsb(YcsbConfig),
    /// CacheLib-like cache with a CDN request mix.
    Cachelib(CachelibConfig),
    /// Chrono's 50-process pmbench delay ladder.
    PmbenchLadder(PmbenchLadderConfig),
    /// PET's shifting hot-set microbenchmark.
    HotShift(HotShiftConfig),
    /// Several workloads as separate competing processes.
    Mix(MixConfig),
    /// GAP direction-optimizing BFS on a Kronecker graph.
    GraphBfs(GraphBfsConfig),
    /// GAP pull PageRank on a Kronecker graph.
    GraphPr(GraphPrConfig),
    /// GAP Afforest connected components on a Kronecker graph.
    GraphCc(GraphCcConfig),
    /// GAP Brandes betweenness centrality on a Kronecker graph.
    GraphBc(GraphBcConfig),
    /// Replay of a native trace file (`tierkit trace record/import/capture`).
    Trace(TraceConfig),
    /// MEMTIS's in-memory B+-tree lookups (Mitosis btree).
    Btree(BtreeConfig),
    /// XSBench unionized-grid cross-section lookups.
    Xsbench(XsbenchConfig),
    /// LIBLINEAR dual coordinate descent on sparse data.
    Liblinear(LiblinearConfig),
    /// XGBoost-like histogram tree training.
    Xgboost(XgboostConfig),
    /// 603.bwaves-style block Jacobian sweeps and BiCGstab.
    Bwaves(BwavesConfig),
    /// 654.roms-style ocean-model stencil sweeps.
    Roms(RomsConfig),
    // registry: variants (one line each, a doc comment above it)
}

impl WorkloadConfig {
    /// The workload's registry name (the serde tag).
    pub fn name(&self) -> &'static str {
        match self {
            WorkloadConfig::Gups(_) => "gups",
            WorkloadConfig::ZipfKv(_) => "zipf-kv",
            WorkloadConfig::Pmbench(_) => "pmbench",
            WorkloadConfig::Ycsb(_) => "ycsb",
            WorkloadConfig::Cachelib(_) => "cachelib",
            WorkloadConfig::PmbenchLadder(_) => "pmbench-ladder",
            WorkloadConfig::HotShift(_) => "hot-shift",
            WorkloadConfig::Mix(_) => "mix",
            WorkloadConfig::GraphBfs(_) => "graph-bfs",
            WorkloadConfig::GraphPr(_) => "graph-pr",
            WorkloadConfig::GraphCc(_) => "graph-cc",
            WorkloadConfig::GraphBc(_) => "graph-bc",
            WorkloadConfig::Trace(_) => "trace",
            WorkloadConfig::Btree(_) => "btree",
            WorkloadConfig::Xsbench(_) => "xsbench",
            WorkloadConfig::Liblinear(_) => "liblinear",
            WorkloadConfig::Xgboost(_) => "xgboost",
            WorkloadConfig::Bwaves(_) => "bwaves",
            WorkloadConfig::Roms(_) => "roms",
            // registry: name
        }
    }

    /// Every registered workload name.
    pub fn names() -> Vec<&'static str> {
        Self::describe().into_iter().map(|(n, _)| n).collect()
    }

    /// The default configuration of the workload called `name`, if there is one.
    pub fn default_for(name: &str) -> Option<WorkloadConfig> {
        match name {
            "gups" => Some(WorkloadConfig::Gups(GupsConfig::default())),
            "zipf-kv" => Some(WorkloadConfig::ZipfKv(ZipfKvConfig::default())),
            "pmbench" => Some(WorkloadConfig::Pmbench(PmbenchConfig::default())),
            "ycsb" => Some(WorkloadConfig::Ycsb(YcsbConfig::default())),
            "cachelib" => Some(WorkloadConfig::Cachelib(CachelibConfig::default())),
            "pmbench-ladder" => Some(WorkloadConfig::PmbenchLadder(PmbenchLadderConfig::default())),
            "hot-shift" => Some(WorkloadConfig::HotShift(HotShiftConfig::default())),
            "mix" => Some(WorkloadConfig::Mix(MixConfig::default())),
            "graph-bfs" => Some(WorkloadConfig::GraphBfs(GraphBfsConfig::default())),
            "graph-pr" => Some(WorkloadConfig::GraphPr(GraphPrConfig::default())),
            "graph-cc" => Some(WorkloadConfig::GraphCc(GraphCcConfig::default())),
            "graph-bc" => Some(WorkloadConfig::GraphBc(GraphBcConfig::default())),
            "trace" => Some(WorkloadConfig::Trace(TraceConfig::default())),
            "btree" => Some(WorkloadConfig::Btree(BtreeConfig::default())),
            "xsbench" => Some(WorkloadConfig::Xsbench(XsbenchConfig::default())),
            "liblinear" => Some(WorkloadConfig::Liblinear(LiblinearConfig::default())),
            "xgboost" => Some(WorkloadConfig::Xgboost(XgboostConfig::default())),
            "bwaves" => Some(WorkloadConfig::Bwaves(BwavesConfig::default())),
            "roms" => Some(WorkloadConfig::Roms(RomsConfig::default())),
            // registry: default_for
            _ => None,
        }
    }

    /// `(name, one-line description)` of every registered workload, for `--help`
    /// style listings.
    pub fn describe() -> Vec<(&'static str, &'static str)> {
        vec![
            (
                "gups",
                "HeMem GUPS: 8-byte read-modify-write updates, 90% to a hot 10% that starts on the slow tier",
            ),
            (
                "zipf-kv",
                "YCSB-C: scrambled-zipfian (theta 0.99) lookups of 1 KiB records through a hash index",
            ),
            (
                "pmbench",
                "pmbench: Gaussian page popularity centred on one region, 50% reads",
            ),
            ("ycsb", "YCSB core workloads (mix = a|b|c|d|f|w) over a hash-indexed store of 1 KiB records; d inserts grow it by mmap"),
            ("cachelib", "CacheLib-like slab cache, CDN mix: zipfian popularity, one-hit wonders, heavy-tailed sizes, LRU per class"),
            ("pmbench-ladder", "Chrono: 50 pmbench processes, uniform pattern, process i waits i x 50 cycles per access"),
            ("hot-shift", "PET: 8 threads, each hot set moves every interval over 15 regions, then returns (2 cycles)"),
            ("mix", "several workloads as separate processes competing for the fast tier (PET multi-programmed)"),
            ("graph-bfs", "GAP direction-optimizing BFS from 10 random sources on a Kronecker graph (scale 22, edge factor 16)"),
            ("graph-pr", "GAP pull PageRank (Gauss-Seidel), 2 iterations, on a Kronecker graph (scale 21, edge factor 16)"),
            ("graph-cc", "GAP Afforest connected components, 3 trials, on a Kronecker graph (scale 22, edge factor 16)"),
            ("graph-bc", "GAP Brandes betweenness centrality from 1 random source on a Kronecker graph (scale 21, edge factor 16)"),
            ("trace", "replay of a native trace file: --workload trace:PATH (from tierkit trace record, import or capture)"),
            ("btree", "MEMTIS Btree: random lookups in an order-6 B+ tree of 26 Mi keys whose nodes are scattered over slab arenas"),
            ("xsbench", "XSBench: unionized-grid binary search, then each nuclide of a random material (355 nuclides, 4 GiB index grid)"),
            ("liblinear", "LIBLINEAR -s 1: dual coordinate descent epochs over sparse rows, w gathered by Zipf-popular feature ids"),
            ("xgboost", "XGBoost hist-like: per level, stream node rows into gradient histograms, subtract siblings, partition rows"),
            ("bwaves", "603.bwaves-like: 7-block Jacobian sweeps and BiCGstab whose work vectors are mapped and freed every step"),
            ("roms", "654.roms-like: barotropic 2-D sub-steps and main3d kernels sweeping 24 3-D and 20 2-D arrays"),
            // registry: describe
        ]
    }

    /// Construct the generator with `seed`.
    ///
    /// # Panics
    /// If the config does not pass [`WorkloadConfig::validate`]; call that first to
    /// report a bad config to the user.
    pub fn build(&self, seed: u64) -> Box<dyn Workload> {
        match self {
            WorkloadConfig::Gups(c) => Box::new(Gups::new(c, seed)),
            WorkloadConfig::ZipfKv(c) => Box::new(ZipfKv::new(c, seed)),
            WorkloadConfig::Pmbench(c) => Box::new(Pmbench::new(c, seed)),
            WorkloadConfig::Ycsb(c) => Box::new(Ycsb::new(c, seed)),
            WorkloadConfig::Cachelib(c) => Box::new(Cachelib::new(c, seed)),
            WorkloadConfig::PmbenchLadder(c) => Box::new(PmbenchLadder::new(c, seed)),
            WorkloadConfig::HotShift(c) => Box::new(HotShift::new(c, seed)),
            WorkloadConfig::Mix(c) => Box::new(Mix::new(c, seed)),
            WorkloadConfig::GraphBfs(c) => Box::new(GraphBfs::new(c, seed)),
            WorkloadConfig::GraphPr(c) => Box::new(GraphPr::new(c, seed)),
            WorkloadConfig::GraphCc(c) => Box::new(GraphCc::new(c, seed)),
            WorkloadConfig::GraphBc(c) => Box::new(GraphBc::new(c, seed)),
            WorkloadConfig::Trace(c) => Box::new(TraceWorkload::from_config(c)),
            WorkloadConfig::Btree(c) => Box::new(Btree::new(c, seed)),
            WorkloadConfig::Xsbench(c) => Box::new(Xsbench::new(c, seed)),
            WorkloadConfig::Liblinear(c) => Box::new(Liblinear::new(c, seed)),
            WorkloadConfig::Xgboost(c) => Box::new(Xgboost::new(c, seed)),
            WorkloadConfig::Bwaves(c) => Box::new(Bwaves::new(c, seed)),
            WorkloadConfig::Roms(c) => Box::new(Roms::new(c, seed)),
            // registry: build
        }
    }

    /// Check every field; the error is one line naming the bad field
    /// (`workload.field`) and its valid range.
    pub fn validate(&self) -> Result<(), ConfigError> {
        match self {
            WorkloadConfig::Gups(c) => c.validate(),
            WorkloadConfig::ZipfKv(c) => c.validate(),
            WorkloadConfig::Pmbench(c) => c.validate(),
            WorkloadConfig::Ycsb(c) => c.validate(),
            WorkloadConfig::Cachelib(c) => c.validate(),
            WorkloadConfig::PmbenchLadder(c) => c.validate(),
            WorkloadConfig::HotShift(c) => c.validate(),
            WorkloadConfig::Mix(c) => c.validate(),
            WorkloadConfig::GraphBfs(c) => c.validate(),
            WorkloadConfig::GraphPr(c) => c.validate(),
            WorkloadConfig::GraphCc(c) => c.validate(),
            WorkloadConfig::GraphBc(c) => c.validate(),
            WorkloadConfig::Trace(c) => c.validate(),
            WorkloadConfig::Btree(c) => c.validate(),
            WorkloadConfig::Xsbench(c) => c.validate(),
            WorkloadConfig::Liblinear(c) => c.validate(),
            WorkloadConfig::Xgboost(c) => c.validate(),
            WorkloadConfig::Bwaves(c) => c.validate(),
            WorkloadConfig::Roms(c) => c.validate(),
            // registry: validate
        }
    }
}

/// Drain `w` and count its accesses: run every process's prologue, then fill the
/// threads round-robin (one batch each per round) until all are finished or at least
/// `limit` accesses were produced. Returns the number of `Op::Access`es generated,
/// which may exceed `limit` by less than one batch per thread.
///
/// Used to measure generation speed independently of the simulator.
pub fn count_accesses(w: &mut dyn Workload, limit: u64) -> u64 {
    let shape = w.shape();
    let mut buf: Vec<Op> = Vec::with_capacity(BATCH_OPS);
    let mut live: Vec<(usize, usize)> = Vec::new();
    for (p, proc_shape) in shape.processes.iter().enumerate() {
        buf.clear();
        w.prologue(p, &mut buf);
        live.extend((0..proc_shape.nr_threads as usize).map(|t| (p, t)));
    }
    let mut count = 0u64;
    while count < limit && !live.is_empty() {
        live.retain(|&(p, t)| {
            if count >= limit {
                return true;
            }
            buf.clear();
            w.fill(p, t, &mut buf);
            count += buf
                .iter()
                .filter(|op| matches!(op, Op::Access { .. }))
                .count() as u64;
            !buf.is_empty()
        });
    }
    count
}

#[cfg(test)]
pub(crate) mod testutil {
    //! Checks every generator's tests share.

    use super::*;
    use layout::Mapping;
    use tierkit_core::{VmaKind, WorkloadShape};

    /// Everything a workload produced: its shape, prologue mappings, and every
    /// thread's full op stream.
    pub struct Drained {
        pub shape: WorkloadShape,
        pub mappings: Vec<Mapping>,
        /// `streams[process][thread]`.
        pub streams: Vec<Vec<Vec<Op>>>,
    }

    /// Run `w` to completion, checking the batching contract on the way: batches
    /// are at most [`BATCH_OPS`] long, and an empty fill stays empty.
    pub fn drain(w: &mut dyn Workload) -> Drained {
        let shape = w.shape();
        let mut mappings = Vec::new();
        let mut streams = Vec::new();
        for (p, ps) in shape.processes.iter().enumerate() {
            let mut pro = Vec::new();
            w.prologue(p, &mut pro);
            for op in pro {
                match op {
                    Op::Mmap { addr, len, kind } => mappings.push(Mapping { addr, len, kind }),
                    other => panic!("prologue may only map, got {other:?}"),
                }
            }
            let mut threads = Vec::new();
            for t in 0..ps.nr_threads as usize {
                let mut all = Vec::new();
                let mut buf = Vec::new();
                loop {
                    buf.clear();
                    w.fill(p, t, &mut buf);
                    assert!(buf.len() <= BATCH_OPS);
                    if buf.is_empty() {
                        break;
                    }
                    all.extend_from_slice(&buf);
                }
                buf.clear();
                w.fill(p, t, &mut buf);
                assert!(buf.is_empty(), "a finished thread must stay finished");
                threads.push(all);
            }
            streams.push(threads);
        }
        Drained {
            shape,
            mappings,
            streams,
        }
    }

    /// Shared structural checks: footprint equals the mapped bytes, mappings are
    /// anonymous, page aligned and disjoint, every access lies inside a mapping, and
    /// `expected_accesses` is exact.
    pub fn check_structure(w: &dyn Workload, d: &Drained) {
        let mapped: u64 = d.mappings.iter().map(|m| m.len).sum();
        assert_eq!(d.shape.footprint_bytes, mapped, "footprint != mapped bytes");
        check_layout(w, d);
    }

    /// The same checks for an imported trace, whose footprint is the pages it
    /// accesses (at most the start-up mappings' bytes, which cover whole 2 MiB ranges).
    pub fn check_imported_structure(w: &dyn Workload, d: &Drained) {
        let mapped: u64 = d.mappings.iter().map(|m| m.len).sum();
        let fp = d.shape.footprint_bytes;
        assert!(
            fp > 0 && fp <= mapped && fp.is_multiple_of(tierkit_core::PAGE_SIZE),
            "footprint {fp} vs mapped {mapped}"
        );
        check_layout(w, d);
    }

    fn check_layout(w: &dyn Workload, d: &Drained) {
        let mut sorted = d.mappings.clone();
        sorted.sort_by_key(|m| m.addr);
        for pair in sorted.windows(2) {
            assert!(pair[0].end() < pair[1].addr, "mappings overlap or touch");
        }
        for m in &d.mappings {
            assert_eq!(m.kind, VmaKind::Anon);
            assert_eq!(m.addr % tierkit_core::PAGE_SIZE, 0);
            assert_eq!(m.len % tierkit_core::PAGE_SIZE, 0);
        }
        let mut n = 0u64;
        for op in d.streams.iter().flatten().flatten() {
            match *op {
                Op::Access { addr, .. } => {
                    n += 1;
                    assert!(
                        d.mappings.iter().any(|m| m.contains(addr)),
                        "access {addr:#x} outside every mapping"
                    );
                }
                other => panic!("unexpected op in a thread stream: {other:?}"),
            }
        }
        assert_eq!(w.expected_accesses(), Some(n));
    }

    /// Restricted generation keeps the law of the filtered stream
    /// ([`Workload::restrict_to`]'s contract): for every thread, a workload restricted
    /// to `sampler` and the same workload's full stream filtered by it give access
    /// counts within `tol` (relative), the same share of accesses per kept 2 MiB
    /// region, of writes and of accesses with a compute gap (each within `tol`,
    /// absolute), and nothing outside the kept regions.
    ///
    /// Then again with the sampler carrying compute
    /// ([`tierkit_core::SampledCompute::Carried`]): the filtered stream carries each
    /// dropped access's gap to its thread's next kept access, and the restricted
    /// stream must carry as much compute in all (within `tol`, relative).
    pub fn check_restricted(
        make: &dyn Fn() -> Box<dyn Workload>,
        sampler: &tierkit_core::RegionSampler,
        tol: f64,
    ) {
        check_restricted_as(make, sampler, tol);
        let carried = sampler
            .clone()
            .with_compute(tierkit_core::SampledCompute::Carried);
        check_restricted_as(make, &carried, tol);
    }

    fn check_restricted_as(
        make: &dyn Fn() -> Box<dyn Workload>,
        sampler: &tierkit_core::RegionSampler,
        tol: f64,
    ) {
        use std::collections::BTreeMap;
        let carried = sampler.carries_compute();
        let full = drain(make().as_mut());
        let mut w = make();
        assert!(w.restrict_to(sampler), "the workload restricts itself");
        let restricted = drain(w.as_mut());
        assert_eq!(full.mappings, restricted.mappings, "mappings are unchanged");
        // Under strata by mapping the mapping an address is in decides (the drained
        // mappings carry no process, so only one-process workloads are checked so).
        let mut stream_sampler = tierkit_core::StreamSampler::new(sampler.clone());
        if sampler.by_mapping() {
            assert_eq!(full.streams.len(), 1, "strata by mapping: one process");
            for m in &full.mappings {
                stream_sampler.observe(0, &m.mmap_op());
            }
        }
        let sampler = &stream_sampler;
        // (accesses, writes, gapped, compute, per-region counts) of one thread's kept
        // accesses; a filtered stream carries its dropped gaps when compute is carried.
        let profile = |pid: usize, ops: &[Op], filter: bool| {
            let mut regions = BTreeMap::<u64, u64>::new();
            let (mut n, mut writes, mut gapped, mut compute) = (0u64, 0u64, 0u64, 0u64);
            let mut carry = tierkit_core::ComputeCarry::default();
            for (addr, write, mut gap) in accesses(ops) {
                let kept = sampler.keeps(pid as u32, addr);
                if filter && !kept {
                    carry.drop_ns(gap as u64);
                    continue;
                }
                assert!(kept, "restricted access {addr:#x} outside the kept regions");
                if filter && carried {
                    gap = carry.keep(gap);
                }
                n += 1;
                writes += write as u64;
                gapped += (gap > 0) as u64;
                compute += gap as u64;
                *regions
                    .entry(addr >> tierkit_core::HUGE_PAGE_SHIFT)
                    .or_default() += 1;
            }
            (n, writes, gapped, compute, regions)
        };
        for (pid, threads) in full.streams.iter().enumerate() {
            for (t, ops) in threads.iter().enumerate() {
                let (nf, wf, gf, cf, rf) = profile(pid, ops, true);
                let (nr, wr, gr, cr, rr) = profile(pid, &restricted.streams[pid][t], false);
                assert!(nf > 0, "the test's sample must keep accesses");
                let rel = (nr as f64 / nf as f64 - 1.0).abs();
                assert!(
                    rel < tol,
                    "thread {pid}/{t}: {nr} accesses vs {nf} filtered"
                );
                let share = |x: u64, n: u64| x as f64 / n.max(1) as f64;
                assert!((share(wr, nr) - share(wf, nf)).abs() < tol, "write share");
                assert!((share(gr, nr) - share(gf, nf)).abs() < tol, "gapped share");
                if carried {
                    assert!(
                        (cr as f64 / cf.max(1) as f64 - 1.0).abs() < tol.max(1e-12) || cr == cf,
                        "thread {pid}/{t}: {cr} ns of compute vs {cf} filtered and carried"
                    );
                }
                for region in rf.keys().chain(rr.keys()) {
                    let a = share(*rf.get(region).unwrap_or(&0), nf);
                    let b = share(*rr.get(region).unwrap_or(&0), nr);
                    assert!(
                        (a - b).abs() < tol,
                        "thread {pid}/{t} region {region:#x}: share {b} vs {a} filtered"
                    );
                }
            }
        }
    }

    /// The accesses of a stream as `(addr, write, gap_ns)`.
    pub fn accesses(ops: &[Op]) -> impl Iterator<Item = (u64, bool, u32)> + '_ {
        ops.iter().filter_map(|op| match *op {
            Op::Access {
                addr,
                write,
                gap_ns,
            } => Some((addr, write, gap_ns)),
            _ => None,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn small(name: &str) -> WorkloadConfig {
        let mut c = WorkloadConfig::default_for(name).unwrap();
        match &mut c {
            WorkloadConfig::Gups(g) => g.scale = 1.0 / 256.0,
            WorkloadConfig::ZipfKv(z) => z.scale = 1.0 / 256.0,
            WorkloadConfig::Pmbench(p) => p.scale = 1.0 / 256.0,
            WorkloadConfig::Ycsb(y) => y.scale = 1.0 / 256.0,
            WorkloadConfig::Cachelib(x) => x.scale = 1.0 / 256.0,
            WorkloadConfig::PmbenchLadder(x) => x.scale = 1.0 / 256.0,
            WorkloadConfig::HotShift(x) => x.scale = 1.0 / 256.0,
            WorkloadConfig::Mix(x) => x.scale = 1.0 / 256.0,
            WorkloadConfig::GraphBfs(x) => x.scale = 1.0 / 256.0,
            WorkloadConfig::GraphPr(x) => x.scale = 1.0 / 256.0,
            WorkloadConfig::GraphCc(x) => x.scale = 1.0 / 256.0,
            WorkloadConfig::GraphBc(x) => x.scale = 1.0 / 256.0,
            WorkloadConfig::Trace(x) => x.scale = 1.0 / 256.0,
            WorkloadConfig::Btree(x) => x.scale = 1.0 / 256.0,
            WorkloadConfig::Xsbench(x) => x.scale = 1.0 / 256.0,
            WorkloadConfig::Liblinear(x) => x.scale = 1.0 / 256.0,
            WorkloadConfig::Xgboost(x) => x.scale = 1.0 / 256.0,
            WorkloadConfig::Bwaves(x) => x.scale = 1.0 / 16.0,
            WorkloadConfig::Roms(x) => x.scale = 1.0 / 64.0,
            // registry: test scale (every workload's `scale` field)
        }
        c
    }

    /// Every registered generator: all workloads but `trace`, which replays a file
    /// (its default has no path) and is tested in `trace`.
    fn generators() -> Vec<&'static str> {
        WorkloadConfig::names()
            .into_iter()
            .filter(|&n| n != "trace")
            .collect()
    }

    #[test]
    fn registry_names_defaults_and_descriptions_agree() {
        assert!(WorkloadConfig::names().starts_with(&["gups", "zipf-kv", "pmbench"]));
        let described: Vec<_> = WorkloadConfig::describe().iter().map(|d| d.0).collect();
        assert_eq!(described, WorkloadConfig::names());
        for name in WorkloadConfig::names() {
            let c = WorkloadConfig::default_for(name).unwrap();
            assert_eq!(c.name(), name);
            if generators().contains(&name) {
                c.validate().unwrap();
            }
        }
        assert!(WorkloadConfig::default_for("nope").is_none());
    }

    /// Generators that make a data-dependent access per element on every pass
    /// (graph kernels, sparse learning, stencil sweeps): within 200 M accesses they
    /// keep their repeated passes at a smaller footprint (docs/workloads.md).
    const SMALLER_DEFAULTS: &[&str] = &[
        "graph-bfs",
        "graph-pr",
        "graph-cc",
        "graph-bc",
        "liblinear",
        "xgboost",
        "bwaves",
        "roms",
    ];

    #[test]
    fn defaults_are_about_4gib_and_at_most_200m_accesses() {
        // One thread per workload (41 s for all of them one after another), but the
        // graph kernels one after another on one thread, those on the same graph in a
        // row: the process keeps the last graph built and builds one at a time
        // (`graph::shared_kronecker`), so interleaved they would rebuild it.
        let (graphs, others): (Vec<_>, Vec<_>) = generators()
            .into_iter()
            .partition(|n| n.starts_with("graph-"));
        std::thread::scope(|scope| {
            scope.spawn(move || {
                let mut graphs = graphs;
                graphs.sort_by_key(|&n| {
                    let cfg = serde_json::to_value(WorkloadConfig::default_for(n).unwrap());
                    cfg.ok()
                        .and_then(|v| v.get("graph_scale").and_then(|s| s.as_u64()))
                });
                for name in graphs {
                    default_is_about_4gib_and_at_most_200m_accesses(name);
                }
            });
            for name in others {
                scope.spawn(move || default_is_about_4gib_and_at_most_200m_accesses(name));
            }
        });
    }

    fn default_is_about_4gib_and_at_most_200m_accesses(name: &'static str) {
        let w = WorkloadConfig::default_for(name).unwrap().build(0);
        let fp = w.shape().footprint_bytes;
        let (gib, mib) = (tierkit_core::GIB, tierkit_core::MIB);
        let min = if SMALLER_DEFAULTS.contains(&name) {
            256 * mib
        } else {
            // "About 4 GiB": page rounding of the arrays may leave a few KiB short.
            4 * gib - 16 * mib
        };
        assert!(
            (min..=4 * gib + 256 * mib).contains(&fp),
            "{name}: footprint {fp}"
        );
        let n = w.expected_accesses().unwrap();
        assert!(
            (50_000_000..=200_000_000).contains(&n),
            "{name}: {n} accesses"
        );
    }

    #[test]
    fn serde_round_trip_uses_name_tag_and_defaults() {
        let c: WorkloadConfig =
            serde_json::from_str(r#"{"name": "zipf-kv", "theta": 0.9}"#).unwrap();
        match &c {
            WorkloadConfig::ZipfKv(z) => {
                assert_eq!(z.theta, 0.9);
                assert_eq!(z.record_bytes, ZipfKvConfig::default().record_bytes);
            }
            other => panic!("wrong variant {other:?}"),
        }
        let json = serde_json::to_string(&c).unwrap();
        assert!(json.contains(r#""name":"zipf-kv""#), "{json}");
        let back: WorkloadConfig = serde_json::from_str(&json).unwrap();
        assert_eq!(back.name(), "zipf-kv");
        // Unknown fields are rejected (a typo must not silently take the default).
        assert!(
            serde_json::from_str::<WorkloadConfig>(r#"{"name": "gups", "footprint": 1}"#).is_err()
        );
        assert!(serde_json::from_str::<WorkloadConfig>(r#"{"name": "nope"}"#).is_err());
    }

    #[test]
    fn thread_rngs_differ_by_seed_process_and_thread() {
        use rand::RngCore;
        let first = |s, p, t| thread_rng(s, p, t).next_u64();
        assert_eq!(first(1, 0, 0), first(1, 0, 0));
        assert_ne!(first(1, 0, 0), first(2, 0, 0));
        assert_ne!(first(1, 0, 0), first(1, 1, 0));
        assert_ne!(first(1, 0, 0), first(1, 0, 1));
        assert_ne!(first(1, 1, 0), first(1, 0, 1));
    }

    #[test]
    fn count_accesses_drains_everything_or_stops_at_the_limit() {
        for name in generators() {
            let c = small(name);
            let mut w = c.build(3);
            let expected = w.expected_accesses().unwrap();
            assert_eq!(count_accesses(w.as_mut(), u64::MAX), expected, "{name}");
            let mut w = c.build(3);
            let n = count_accesses(w.as_mut(), 10_000);
            assert!(
                (10_000..10_000 + BATCH_OPS as u64).contains(&n),
                "{name}: {n}"
            );
        }
    }

    #[test]
    fn build_is_deterministic_for_every_workload() {
        for name in generators() {
            let c = small(name);
            let mut a = c.build(9);
            let mut b = c.build(9);
            let mut c2 = c.build(10);
            let (mut x, mut y, mut z) = (Vec::new(), Vec::new(), Vec::new());
            // Skip past the deterministic init phase to the random part.
            let mut differs = false;
            for _ in 0..200 {
                x.clear();
                y.clear();
                z.clear();
                a.fill(0, 0, &mut x);
                b.fill(0, 0, &mut y);
                c2.fill(0, 0, &mut z);
                assert_eq!(x, y, "{name}");
                differs |= x != z;
            }
            assert!(differs, "{name}: seed has no effect");
        }
    }

    /// Throwaway generation-speed measurement, out of normal runs:
    /// This thread's CPU time in ns (Linux `schedstat`), so the rate holds on a loaded
    /// machine, where wall time also counts the time other processes had the core.
    fn thread_cpu_ns() -> Option<u64> {
        let s = std::fs::read_to_string("/proc/thread-self/schedstat").ok()?;
        s.split_whitespace().next()?.parse().ok()
    }

    /// `cargo test --release -p tierkit-workloads -- --ignored --nocapture generation_speed`
    #[test]
    #[ignore = "a speed measurement (host-dependent, not asserted: speed targets live in tierkit bench); run it in release with --ignored --nocapture"]
    fn generation_speed() {
        for name in generators() {
            let c = WorkloadConfig::default_for(name).unwrap();
            let start = std::time::Instant::now();
            let mut w = c.build(1);
            let built = start.elapsed();
            let start = std::time::Instant::now();
            let cpu_start = thread_cpu_ns();
            let n = count_accesses(w.as_mut(), 60_000_000);
            let secs = start.elapsed().as_secs_f64();
            let cpu = match (cpu_start, thread_cpu_ns()) {
                (Some(a), Some(b)) => format!("{:.1}", n as f64 / ((b - a) as f64 / 1e9) / 1e6),
                _ => "?".into(),
            };
            println!(
                "{name:8} build {:6.1} ms, {n} accesses in {secs:.2} s = {:.1} M accesses/s wall, {cpu} M/s of CPU",
                built.as_secs_f64() * 1e3,
                n as f64 / secs / 1e6
            );
        }
    }
}
