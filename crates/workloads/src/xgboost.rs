//! `xgboost`: the memory behaviour of XGBoost's `hist` tree method (Chen &
//! Guestrin, KDD'16; the CPU `hist` updater): per boosting round, gradients, then a
//! depth-wise tree whose every level builds gradient histograms over the quantized
//! feature matrix, finds splits and partitions the rows.
//!
//! This is an access-pattern model: the data flow, the arrays and the loops are
//! XGBoost's, but the split decisions are drawn from the seed instead of computed
//! from the gradient histograms (computing them would cost the host one histogram
//! update per row and feature per level, several times the generation budget).
//! Which rows go left is still decided by the rows' real bins, so every partition
//! is consistent with the matrix.
//!
//! ## Data and arrays (each its own mapping)
//!
//! - `gmat`: the quantized matrix (XGBoost's `GHistIndexMatrix` for dense data),
//!   `nr_rows × nr_features` one-byte bin indices (two bytes if `max_bin > 256`),
//!   row-major; bins are uniform, drawn by hashing (row, feature) with the seed;
//! - `labels`, `preds` (`float` per row), `gpair` (gradient and hessian, 2 ×
//!   `float` per row);
//! - `row_set`: the row indices, kept partitioned by node (`RowSetCollection`),
//!   and `part_buf`, the partitioner's scratch;
//! - `hist`: the node histograms, `nr_features × max_bin` `GradientPairPrecise`s
//!   (2 × `double`) per node, a pool for two tree levels;
//! - with several threads, `thread_hist`: one partial histogram per thread
//!   (`ParallelGHistBuilder`).
//!
//! ## One boosting round
//!
//! 1. Gradients: stream `preds` and `labels`, write `gpair`.
//! 2. `row_set` = 0..n.
//! 3. For each depth below `max_depth`: build the histograms of the root, or of the
//!    smaller child of each pair, by streaming the node's rows — `row_set[i]`,
//!    `gpair[rid]` and the row's bins — and adding each row's gradient into the
//!    bin of every feature; the larger sibling's histogram is its parent's minus
//!    the smaller's (XGBoost's subtraction trick: three streams over histograms);
//!    evaluate every node's histogram (a stream, features split over the threads);
//!    then partition each node's rows by its split (read `row_set[i]` and the row's
//!    bin of the split feature, append to the left or right run of `part_buf`, copy
//!    back).
//! 4. Update the prediction cache leaf by leaf (`preds[rid]` read and written).
//!
//! ## Replayed rounds
//!
//! FreqTier's XGBoost trained 400 rounds in about an hour; a tiering policy needs
//! minutes of machine time to act, and computing a round on the host costs as much
//! as simulating it. `computed_rounds` (0: all) computes only that many rounds; the
//! remaining rounds replay the computed rounds' accesses in turn, each thread its
//! own (`graph/engine.rs`, "Replayed trials"): a replayed round repeats a computed
//! round's splits, so its rows go to the same leaves. The load before the first
//! round is not replayed. A sampled run ([`Workload::restrict_to`]) generates,
//! records and replays only the kept pages.
//!
//! Histogram updates: a node's histogram (1 MiB at the defaults) is built in the
//! building thread's private cache, where XGBoost sizes its blocks to keep it; only
//! its zeroing, the reductions and the subtraction and evaluation streams reach
//! memory. When a histogram exceeds `private_cache_kib`, every update is emitted (a
//! load and a store of the bin's line), as the updates then miss the private
//! caches.

use rand::RngCore;
use rand_xoshiro::Xoshiro256PlusPlus;
use serde::{Deserialize, Serialize};
use std::collections::VecDeque;
use std::sync::OnceLock;
use tierkit_core::{
    ConfigError, Op, ProcessShape, RegionSampler, VmaKind, Workload, WorkloadShape, PAGE_SIZE,
};

use crate::common;
use crate::graph::engine::{
    self, ParFor, Program, Runner, Schedule, Sink, Stream, LINE_BYTES, TRIAL_MARK,
};
use crate::graph::{tagged_rng, trials_computed};
use crate::layout::{Layout, Mapping};

const NAME: &str = "xgboost";
/// Bytes of a histogram bin (`GradientPairPrecise`: two doubles).
pub const BIN_BYTES: u64 = 16;

/// Configuration of [`Xgboost`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct XgboostConfig {
    /// Training rows before `scale`. Default 3 Mi (a 768 MiB quantized matrix).
    /// Range >= 1.
    pub nr_rows: u64,
    /// Features per row (dense). Default 256. Range [1, 65 536].
    pub nr_features: u32,
    /// Bins per feature (XGBoost's `max_bin`). Default 256 (XGBoost's default).
    /// Range [2, 65 536].
    pub max_bin: u32,
    /// Tree depth (XGBoost's `max_depth`). Default 6 (XGBoost's default). Range
    /// [1, 16].
    pub max_depth: u32,
    /// Boosting rounds (trees). Default 2. Range >= 1.
    pub nr_rounds: u32,
    /// Rounds computed on the host (0: all). The remaining rounds replay the
    /// computed rounds' accesses in turn, each thread its own, as the graph kernels
    /// replay trials (see "Replayed rounds"). Default 0. Range [0, `nr_rounds`].
    pub computed_rounds: u32,
    /// Private cache (L2) per core, in KiB: histograms up to this size are built
    /// in cache. Default 1024 (1 MiB, a server core's L2). Range >= 0.
    pub private_cache_kib: u64,
    /// Compute before each access, in ns. Default 2 (the histogram additions
    /// between a row's lines).
    pub gap_ns: u32,
    /// Multiplies `nr_rows`. Default 1.0.
    pub scale: f64,
    /// Number of threads. Default 1.
    pub nr_threads: u32,
    /// Memory-level parallelism. Default 6.0: rows are streamed with hardware
    /// prefetch.
    pub mlp: f64,
}

impl Default for XgboostConfig {
    fn default() -> Self {
        XgboostConfig {
            nr_rows: 3 << 20,
            nr_features: 256,
            max_bin: 256,
            max_depth: 6,
            nr_rounds: 2,
            computed_rounds: 0,
            private_cache_kib: 1024,
            gap_ns: 2,
            scale: 1.0,
            nr_threads: 1,
            mlp: 6.0,
        }
    }
}

impl XgboostConfig {
    /// Check every field; the error names the field and its valid range.
    pub fn validate(&self) -> Result<(), ConfigError> {
        common::check_positive(NAME, "nr_rows", self.nr_rows)?;
        if !(1..=65_536).contains(&self.nr_features) {
            return Err(format!(
                "{NAME}.nr_features must be in [1, 65536], got {}",
                self.nr_features
            )
            .into());
        }
        if !(2..=65_536).contains(&self.max_bin) {
            return Err(
                format!("{NAME}.max_bin must be in [2, 65536], got {}", self.max_bin).into(),
            );
        }
        if !(1..=16).contains(&self.max_depth) {
            return Err(format!(
                "{NAME}.max_depth must be in [1, 16], got {}",
                self.max_depth
            )
            .into());
        }
        if self.nr_rounds == 0 {
            return Err(format!("{NAME}.nr_rounds must be >= 1, got 0").into());
        }
        if self.computed_rounds > self.nr_rounds {
            return Err(format!(
                "{NAME}.computed_rounds must be in [0, nr_rounds = {}] (0: every round computed), got {}",
                self.nr_rounds, self.computed_rounds
            )
            .into());
        }
        common::check_common(NAME, self.scale, self.nr_threads, self.mlp)?;
        let rows = self.nr_rows as f64 * self.scale;
        if rows > u32::MAX as f64 {
            return Err(format!(
                "{NAME}.nr_rows × scale must be at most {}, got {rows}",
                u32::MAX
            )
            .into());
        }
        let hist = self.nr_features as f64 * self.max_bin as f64 * BIN_BYTES as f64;
        common::check_footprint(
            NAME,
            "nr_rows",
            rows * (self.nr_features as f64 * bin_bytes(self.max_bin) as f64 + 24.0)
                + hist * ((1u64 << self.max_depth) as f64 + self.nr_threads as f64),
        )
    }
}

/// Bytes of one bin index in `gmat`.
fn bin_bytes(max_bin: u32) -> u64 {
    if max_bin <= 256 {
        1
    } else {
        2
    }
}

/// A node being grown: its rows are `row_set[lo..hi]`.
#[derive(Debug, Clone, Copy)]
struct Node {
    lo: u64,
    hi: u64,
    /// Histogram slot.
    slot: u64,
}

/// One parallel loop of a round.
#[derive(Debug, Clone, Copy)]
enum Task {
    Gradients,
    InitRowSet,
    /// Zero the histogram and build it from the node's rows.
    Build(Node),
    /// Sum the threads' partial histograms into the node's.
    Reduce(Node),
    /// `hist[larger] = hist[parent] - hist[smaller]`.
    Subtract {
        larger: u64,
        parent: u64,
        smaller: u64,
    },
    /// Read every histogram of the level (features split over threads).
    Evaluate,
    /// Partition the node's rows by `bin(row, feature) < threshold` into
    /// `part_buf`.
    Partition(Node, u32, u32),
    /// Copy the partitioned rows back into `row_set`.
    CopyBack(Node),
    /// `preds[rid] += leaf` for the leaf's rows.
    Predict(Node),
}

/// Where the round is between queued tasks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    RoundStart,
    Split,
    Descend,
    RoundEnd,
}

#[derive(Debug, Clone)]
struct Booster {
    seed: u64,
    nr_threads: u32,
    nr_rows: u64,
    nr_features: u64,
    max_bin: u64,
    bin_bytes: u64,
    max_depth: u32,
    nr_rounds: u32,
    hist_bytes: u64,
    emit_updates: bool,
    gmat: Mapping,
    labels: Mapping,
    preds: Mapping,
    gpair: Mapping,
    row_set_m: Mapping,
    part_buf: Mapping,
    hist: Mapping,
    thread_hist: Option<Mapping>,
    row_set: Vec<u32>,
    /// The partition being emitted: the node's rows in their new order.
    scratch: Vec<u32>,
    /// `prefix_left[k]`: left rows among the node's first `k` rows (old order).
    prefix_left: Vec<u32>,
    /// Left counts of the level's partitioned nodes, in level order.
    left_counts: Vec<u64>,
    rng: Xoshiro256PlusPlus,
    round: u32,
    depth: u32,
    phase: Phase,
    level: Vec<Node>,
    tasks: VecDeque<Task>,
    current: Option<(Task, ParFor)>,
}

impl Booster {
    /// The bin of `(row, feature)`.
    #[inline]
    fn bin(&self, row: u64, feature: u64) -> u64 {
        common::reduce(
            common::mix64(self.seed ^ (row << 20 ^ feature).wrapping_mul(0x9e37_79b9_7f4a_7c15)),
            self.max_bin,
        )
    }

    #[inline]
    fn hist_addr(&self, slot: u64) -> u64 {
        self.hist.addr + slot * self.hist_bytes
    }

    /// Histogram slot of node `k` of depth `depth` (two levels' worth of slots).
    fn slot(&self, depth: u32, k: u64) -> u64 {
        u64::from(depth % 2) * (1u64 << (self.max_depth - 1)) + k
    }

    /// Queue the histogram builds of the current level; `parents` are the
    /// previous level's slots (pairs of children share one), `None` at the root.
    fn plan_builds(&mut self, parents: Option<Vec<u64>>) {
        let threads = self.nr_threads > 1;
        match parents {
            None => {
                let root = self.level[0];
                self.tasks.push_back(Task::Build(root));
                if threads {
                    self.tasks.push_back(Task::Reduce(root));
                }
            }
            Some(parents) => {
                let mut subtract = Vec::new();
                for (k, pair) in self.level.chunks(2).enumerate() {
                    let (a, b) = (pair[0], pair[1]);
                    let (small, large) = if a.hi - a.lo <= b.hi - b.lo {
                        (a, b)
                    } else {
                        (b, a)
                    };
                    self.tasks.push_back(Task::Build(small));
                    if threads {
                        self.tasks.push_back(Task::Reduce(small));
                    }
                    subtract.push(Task::Subtract {
                        larger: large.slot,
                        parent: parents[k],
                        smaller: small.slot,
                    });
                }
                self.tasks.extend(subtract);
            }
        }
    }

    /// Move to the next phase, queueing its tasks; false once every round is done.
    fn advance<S: Sink>(&mut self, s: &mut S) -> bool {
        match self.phase {
            Phase::RoundStart => {
                if self.round == self.nr_rounds {
                    return false;
                }
                // The trial mark first: `phase(.., "round", ..)` reads up to the next mark.
                s.mark(TRIAL_MARK);
                s.mark("round");
                self.tasks.push_back(Task::Gradients);
                self.tasks.push_back(Task::InitRowSet);
                self.depth = 0;
                self.level = vec![Node {
                    lo: 0,
                    hi: self.nr_rows,
                    slot: self.slot(0, 0),
                }];
                self.plan_builds(None);
                self.phase = Phase::Split;
            }
            Phase::Split => {
                s.mark("split");
                self.tasks.push_back(Task::Evaluate);
                for n in self.level.clone() {
                    let f = common::below(&mut self.rng, self.nr_features) as u32;
                    let frac = 0.2 + 0.6 * (self.rng.next_u64() >> 11) as f64 / (1u64 << 53) as f64;
                    let threshold =
                        ((frac * self.max_bin as f64).round() as u64).clamp(1, self.max_bin - 1);
                    self.tasks
                        .push_back(Task::Partition(n, f, threshold as u32));
                    self.tasks.push_back(Task::CopyBack(n));
                }
                self.phase = Phase::Descend;
            }
            Phase::Descend => {
                let parents: Vec<u64> = self.level.iter().map(|n| n.slot).collect();
                let depth = self.depth + 1;
                let mut next = Vec::with_capacity(self.level.len() * 2);
                for (k, n) in self.level.iter().enumerate() {
                    let mid = n.lo + self.left_counts[k];
                    for (j, (lo, hi)) in [(n.lo, mid), (mid, n.hi)].into_iter().enumerate() {
                        let slot = if depth < self.max_depth {
                            self.slot(depth, (2 * k + j) as u64)
                        } else {
                            0
                        };
                        next.push(Node { lo, hi, slot });
                    }
                }
                self.level = next;
                self.depth = depth;
                self.left_counts.clear();
                if depth < self.max_depth {
                    s.mark("build");
                    self.plan_builds(Some(parents));
                    self.phase = Phase::Split;
                } else {
                    s.mark("predict");
                    for &leaf in &self.level {
                        self.tasks.push_back(Task::Predict(leaf));
                    }
                    self.phase = Phase::RoundEnd;
                }
            }
            Phase::RoundEnd => {
                self.round += 1;
                self.level.clear();
                self.phase = Phase::RoundStart;
            }
        }
        true
    }

    /// Start `task`: host-side work and its parallel loop.
    fn start(&mut self, task: Task) -> ParFor {
        let t = self.nr_threads;
        let lines = self.hist_bytes.div_ceil(LINE_BYTES);
        match task {
            Task::Gradients | Task::InitRowSet => {
                ParFor::new(self.nr_rows, t, Schedule::Blocked, 1024)
            }
            Task::Build(n) | Task::Predict(n) => ParFor::new(n.hi - n.lo, t, Schedule::Blocked, 64),
            Task::Reduce(_) | Task::Subtract { .. } => {
                ParFor::new(lines, t, Schedule::Blocked, 256)
            }
            Task::Evaluate => ParFor::new(self.nr_features, t, Schedule::Blocked, 4),
            Task::Partition(n, f, thr) => {
                // XGBoost's PartitionBuilder keeps the row order on each side.
                let (lo, hi) = (n.lo as usize, n.hi as usize);
                let mut left = Vec::new();
                let mut right = Vec::new();
                self.prefix_left.clear();
                self.prefix_left.push(0);
                for &rid in &self.row_set[lo..hi] {
                    if self.bin(u64::from(rid), u64::from(f)) < u64::from(thr) {
                        left.push(rid);
                    } else {
                        right.push(rid);
                    }
                    self.prefix_left.push(left.len() as u32);
                }
                self.left_counts.push(left.len() as u64);
                left.extend(right);
                self.scratch = left;
                ParFor::new(n.hi - n.lo, t, Schedule::Blocked, 64)
            }
            Task::CopyBack(n) => {
                let (lo, hi) = (n.lo as usize, n.hi as usize);
                self.row_set[lo..hi].copy_from_slice(&self.scratch);
                ParFor::new(n.hi - n.lo, t, Schedule::Blocked, 64)
            }
        }
    }

    /// Iterations `[lo, hi)` of `task`'s loop, run by thread `t`.
    fn piece<S: Sink>(&mut self, task: Task, s: &mut S, t: usize, lo: u64, hi: u64) {
        let row_bytes = self.nr_features * self.bin_bytes;
        match task {
            Task::Gradients => {
                let (mut p, mut l, mut g) =
                    (Stream::default(), Stream::default(), Stream::default());
                for r in lo..hi {
                    p.touch(s, t, self.preds.addr + r * 4, false);
                    l.touch(s, t, self.labels.addr + r * 4, false);
                    g.touch(s, t, self.gpair.addr + r * 8, true);
                }
            }
            Task::InitRowSet => {
                let mut w = Stream::default();
                for r in lo..hi {
                    self.row_set[r as usize] = r as u32;
                    w.touch(s, t, self.row_set_m.addr + r * 4, true);
                }
            }
            Task::Build(n) => {
                let target = match self.thread_hist {
                    Some(m) => m.addr + t as u64 * self.hist_bytes,
                    None => self.hist_addr(n.slot),
                };
                // A thread's first piece zeroes its target histogram.
                if lo == common::share(n.hi - n.lo, self.nr_threads, t).0 {
                    let mut z = Stream::default();
                    for line in 0..self.hist_bytes.div_ceil(LINE_BYTES) {
                        z.touch(s, t, target + line * LINE_BYTES, true);
                    }
                }
                let (mut rs, mut gs, mut ms) =
                    (Stream::default(), Stream::default(), Stream::default());
                for i in n.lo + lo..n.lo + hi {
                    rs.touch(s, t, self.row_set_m.addr + i * 4, false);
                    let rid = u64::from(self.row_set[i as usize]);
                    gs.touch(s, t, self.gpair.addr + rid * 8, false);
                    ms.touch_range(s, t, self.gmat.addr + rid * row_bytes, row_bytes, false);
                    if self.emit_updates {
                        for f in 0..self.nr_features {
                            let at = target + (f * self.max_bin + self.bin(rid, f)) * BIN_BYTES;
                            s.access(t, at, false);
                            s.access(t, at, true);
                        }
                    }
                }
            }
            Task::Reduce(n) => {
                let th = self
                    .thread_hist
                    .expect("partial histograms with several threads");
                let mut w = Stream::default();
                for line in lo..hi {
                    for k in 0..u64::from(self.nr_threads) {
                        s.access(t, th.addr + k * self.hist_bytes + line * LINE_BYTES, false);
                    }
                    w.touch(s, t, self.hist_addr(n.slot) + line * LINE_BYTES, true);
                }
            }
            Task::Subtract {
                larger,
                parent,
                smaller,
            } => {
                for line in lo..hi {
                    let off = line * LINE_BYTES;
                    s.access(t, self.hist_addr(parent) + off, false);
                    s.access(t, self.hist_addr(smaller) + off, false);
                    s.access(t, self.hist_addr(larger) + off, true);
                }
            }
            Task::Evaluate => {
                let per_feature = self.max_bin * BIN_BYTES;
                for k in 0..self.level.len() {
                    let base = self.hist_addr(self.level[k].slot);
                    let mut r = Stream::default();
                    for f in lo..hi {
                        r.touch_range(s, t, base + f * per_feature, per_feature, false);
                    }
                }
            }
            Task::Partition(n, f, _) => {
                let (mut rs, mut lw, mut rw) =
                    (Stream::default(), Stream::default(), Stream::default());
                let left_count = *self.left_counts.last().expect("partition started");
                for k in lo..hi {
                    let at = n.lo + k;
                    rs.touch(s, t, self.row_set_m.addr + at * 4, false);
                    let rid = u64::from(self.row_set[at as usize]);
                    s.access(
                        t,
                        self.gmat.addr + rid * row_bytes + u64::from(f) * self.bin_bytes,
                        false,
                    );
                    let before = u64::from(self.prefix_left[k as usize]);
                    if u64::from(self.prefix_left[k as usize + 1]) > before {
                        lw.touch(s, t, self.part_buf.addr + (n.lo + before) * 4, true);
                    } else {
                        let r = k - before;
                        rw.touch(s, t, self.part_buf.addr + (n.lo + left_count + r) * 4, true);
                    }
                }
            }
            Task::CopyBack(n) => {
                let (mut r, mut w) = (Stream::default(), Stream::default());
                for i in n.lo + lo..n.lo + hi {
                    r.touch(s, t, self.part_buf.addr + i * 4, false);
                    w.touch(s, t, self.row_set_m.addr + i * 4, true);
                }
            }
            Task::Predict(n) => {
                let mut rs = Stream::default();
                for i in n.lo + lo..n.lo + hi {
                    rs.touch(s, t, self.row_set_m.addr + i * 4, false);
                    let rid = u64::from(self.row_set[i as usize]);
                    s.access(t, self.preds.addr + rid * 4, false);
                    s.access(t, self.preds.addr + rid * 4, true);
                }
            }
        }
    }
}

impl Program for Booster {
    fn step<S: Sink>(&mut self, s: &mut S) -> bool {
        loop {
            if let Some((task, par)) = &mut self.current {
                let task = *task;
                if let Some((t, lo, hi)) = par.next_piece() {
                    self.piece(task, s, t, lo, hi);
                    return true;
                }
                self.current = None;
                continue;
            }
            if let Some(task) = self.tasks.pop_front() {
                let par = self.start(task);
                self.current = Some((task, par));
                continue;
            }
            if !self.advance(s) {
                return false;
            }
        }
    }
}

/// A first-touch pass over the mappings, then the booster.
#[derive(Debug, Clone)]
struct Program2 {
    init: Vec<Mapping>,
    init_at: usize,
    init_par: Option<ParFor>,
    nr_threads: u32,
    booster: Booster,
}

impl Program for Program2 {
    fn step<S: Sink>(&mut self, s: &mut S) -> bool {
        while self.init_at < self.init.len() {
            let m = self.init[self.init_at];
            let par = self.init_par.get_or_insert_with(|| {
                ParFor::new(m.len / PAGE_SIZE, self.nr_threads, Schedule::Blocked, 16)
            });
            if let Some((t, lo, hi)) = par.next_piece() {
                engine::first_touch(s, t, m.addr, lo, hi);
                return true;
            }
            self.init_par = None;
            self.init_at += 1;
        }
        self.booster.step(s)
    }
}

/// The XGBoost-like generator (see the module docs).
#[derive(Debug)]
pub struct Xgboost {
    mappings: Vec<Mapping>,
    runner: Runner<Program2>,
    /// The program before its first access: counted on demand, and copied by tests.
    start: Program2,
    nr_threads: u32,
    mlp: f64,
    /// The access count, computed on first request: counting runs the computed
    /// rounds once more, which a sampled run (whose count nobody asks) need not pay.
    expected: OnceLock<u64>,
}

impl Xgboost {
    /// Lay out the arrays for `cfg` with `seed`.
    ///
    /// # Panics
    /// If `cfg` does not pass [`XgboostConfig::validate`].
    pub fn new(cfg: &XgboostConfig, seed: u64) -> Self {
        if let Err(e) = cfg.validate() {
            panic!("invalid {NAME} config: {e}");
        }
        let rows = common::scaled(cfg.nr_rows, cfg.scale).max(1);
        let nr_features = u64::from(cfg.nr_features);
        let max_bin = u64::from(cfg.max_bin);
        let bb = bin_bytes(cfg.max_bin);
        let hist_bytes = nr_features * max_bin * BIN_BYTES;
        let mut layout = Layout::new();
        let gmat = layout.map(rows * nr_features * bb, VmaKind::Anon);
        let labels = layout.map(rows * 4, VmaKind::Anon);
        let preds = layout.map(rows * 4, VmaKind::Anon);
        let gpair = layout.map(rows * 8, VmaKind::Anon);
        let row_set_m = layout.map(rows * 4, VmaKind::Anon);
        let part_buf = layout.map(rows * 4, VmaKind::Anon);
        let hist = layout.map(hist_bytes << cfg.max_depth, VmaKind::Anon);
        let thread_hist = (cfg.nr_threads > 1)
            .then(|| layout.map(hist_bytes * u64::from(cfg.nr_threads), VmaKind::Anon));
        let mut mappings = vec![gmat, labels, preds, gpair, row_set_m, part_buf, hist];
        mappings.extend(thread_hist);
        let booster = Booster {
            seed,
            nr_threads: cfg.nr_threads,
            nr_rows: rows,
            nr_features,
            max_bin,
            bin_bytes: bb,
            max_depth: cfg.max_depth,
            nr_rounds: trials_computed(cfg.nr_rounds, cfg.computed_rounds),
            hist_bytes,
            emit_updates: hist_bytes > cfg.private_cache_kib * 1024,
            gmat,
            labels,
            preds,
            gpair,
            row_set_m,
            part_buf,
            hist,
            thread_hist,
            row_set: vec![0; rows as usize],
            scratch: Vec::new(),
            prefix_left: Vec::new(),
            left_counts: Vec::new(),
            rng: tagged_rng(seed, 40),
            round: 0,
            depth: 0,
            phase: Phase::RoundStart,
            level: Vec::new(),
            tasks: VecDeque::new(),
            current: None,
        };
        // Loading the data writes gmat, labels and preds (base margin); the
        // training arrays are first touched by their first use.
        let program = Program2 {
            init: vec![gmat, labels, preds],
            init_at: 0,
            init_par: None,
            nr_threads: cfg.nr_threads,
            booster,
        };
        let replayed = cfg.nr_rounds - trials_computed(cfg.nr_rounds, cfg.computed_rounds);
        Xgboost {
            mappings,
            start: program.clone(),
            runner: Runner::with_replays(program, cfg.nr_threads, cfg.gap_ns, replayed),
            nr_threads: cfg.nr_threads,
            mlp: cfg.mlp,
            expected: OnceLock::new(),
        }
    }

    /// The mappings: `gmat`, `labels`, `preds`, `gpair`, `row_set`, `part_buf`,
    /// `hist`, and with several threads `thread_hist`.
    pub fn mappings(&self) -> &[Mapping] {
        &self.mappings
    }
}

impl Workload for Xgboost {
    fn shape(&self) -> WorkloadShape {
        WorkloadShape {
            processes: vec![ProcessShape {
                name: NAME.to_string(),
                nr_threads: self.nr_threads,
                mlp: self.mlp,
            }],
            footprint_bytes: self.mappings.iter().map(|m| m.len).sum(),
        }
    }

    fn prologue(&mut self, process: usize, out: &mut Vec<Op>) {
        if process == 0 {
            out.extend(self.mappings.iter().map(|m| m.mmap_op()));
        }
    }

    fn fill(&mut self, process: usize, thread: usize, out: &mut Vec<Op>) {
        if process == 0 {
            self.runner.fill(thread, out);
        }
    }

    /// The whole stream's access count; `None` once restricted to a sample.
    fn expected_accesses(&self) -> Option<u64> {
        if self.runner.is_restricted() {
            return None;
        }
        Some(
            *self.expected.get_or_init(|| {
                engine::count_with_replays(&self.start, self.runner.replayed_trials())
            }),
        )
    }

    /// Generate only the pages `sampler` keeps.
    fn restrict_to(&mut self, sampler: &RegionSampler) -> bool {
        self.runner.keep_only_sampled(sampler, &self.mappings);
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::graph::engine::testing::{accesses_by_trial, phase, record, Event};
    use crate::testutil::{accesses, check_restricted, check_structure, drain};

    fn small(nr_rows: u64, nr_threads: u32) -> XgboostConfig {
        XgboostConfig {
            nr_rows,
            nr_features: 32,
            nr_threads,
            ..XgboostConfig::default()
        }
    }

    #[test]
    fn same_seed_same_stream_different_seed_different_stream() {
        let cfg = small(20_000, 2);
        let a = drain(&mut Xgboost::new(&cfg, 7));
        let b = drain(&mut Xgboost::new(&cfg, 7));
        let c = drain(&mut Xgboost::new(&cfg, 8));
        assert_eq!(a.streams, b.streams);
        assert_ne!(a.streams, c.streams);
        assert!(!a.streams[0][1].is_empty());
    }

    #[test]
    fn footprint_mappings_and_access_count() {
        for threads in [1, 3] {
            let mut w = Xgboost::new(&small(30_000, threads), 1);
            let d = drain(&mut w);
            assert_eq!(d.mappings, w.mappings().to_vec());
            check_structure(&w, &d);
        }
    }

    #[test]
    fn levels_build_the_smaller_child_and_partition_every_row() {
        let cfg = small(40_000, 1);
        let w = Xgboost::new(&cfg, 2);
        let mut p = w.start.clone();
        let events = record(&mut p);
        let (gmat, row_set) = (w.mappings()[0], w.mappings()[4]);
        let row_bytes = 32;
        // Round 0: the root's build reads every row of gmat once (32-byte rows:
        // 20 000 lines), then each deeper level reads at most half of the rows.
        let gmat_reads = |ev: &[Event]| {
            ev.iter()
                .filter(|e| matches!(e, Event::Access { addr, .. } if gmat.contains(*addr)))
                .count() as u64
        };
        let lines = 40_000 * row_bytes / 64;
        let root = phase(&events, "round", 0);
        assert!(gmat_reads(root) >= lines && gmat_reads(root) <= lines + 100);
        for level in 0..5 {
            // The smaller children hold at most half the rows (a 32-byte row lies
            // in one line).
            let b = gmat_reads(phase(&events, "build", level));
            assert!(b <= 20_000 && b > 40_000 / 20, "level {}: {b}", level + 1);
        }
        // Every split phase reads the split feature's bin of every row once and
        // rewrites the whole row set.
        for level in 0..6 {
            let ev = phase(&events, "split", level);
            assert_eq!(gmat_reads(ev), 40_000, "level {level}");
            let rs_writes = ev
                .iter()
                .filter(|e| matches!(e, Event::Access { addr, write: true, .. } if row_set.contains(*addr)))
                .count() as u64;
            assert!(rs_writes >= 40_000 * 4 / 64);
        }
        // The row set stays a permutation, grouped into 64 leaves by their bins.
        let mut rows = p.booster.row_set.clone();
        rows.sort_unstable();
        assert_eq!(rows, (0..40_000).collect::<Vec<u32>>());
        assert_eq!(p.booster.level.len(), 0, "all rounds finished");
    }

    #[test]
    fn big_histograms_emit_every_update() {
        let mut cfg = small(2_000, 1);
        cfg.private_cache_kib = 64; // 32 features × 256 bins × 16 B = 128 KiB > 64
        cfg.nr_rounds = 1;
        cfg.max_depth = 1;
        let w = Xgboost::new(&cfg, 3);
        let hist = w.mappings()[6];
        let mut p = w.start.clone();
        let events = record(&mut p);
        let updates = phase(&events, "round", 0)
            .iter()
            .filter(
                |e| matches!(e, Event::Access { addr, write: false, .. } if hist.contains(*addr)),
            )
            .count() as u64;
        // A load per row and feature (the evaluation stream reads the rest later).
        assert_eq!(updates, 2_000 * 32);
    }

    #[test]
    fn replayed_rounds_repeat_the_computed_rounds_in_turn() {
        // One thread, so the global order is the thread's: 5 rounds of which 2 are
        // computed must be the load, R1, R2, then R1, R2, R1 again.
        let mut cfg = small(5_000, 1);
        cfg.nr_rounds = 2;
        let two = Xgboost::new(&cfg, 9);
        let (load, rounds) = accesses_by_trial(&record(&mut two.start.clone()));
        assert_eq!(rounds.len(), 2);
        let (r1, r2) = (&rounds[0], &rounds[1]);
        assert!(r1 != r2, "the two rounds split differently");
        let want: Vec<(u64, bool)> = [&load, r1, r2, r1, r2, r1]
            .into_iter()
            .flatten()
            .copied()
            .collect();
        cfg.nr_rounds = 5;
        cfg.computed_rounds = 2;
        let mut w = Xgboost::new(&cfg, 9);
        let d = drain(&mut w);
        let got: Vec<(u64, bool)> = accesses(&d.streams[0][0])
            .map(|(a, wr, _)| (a, wr))
            .collect();
        assert_eq!(got, want);
        check_structure(&w, &d);
        assert_eq!(w.expected_accesses(), Some(want.len() as u64));
    }

    #[test]
    fn restricted_boosting_emits_exactly_the_kept_part_of_its_stream() {
        let make = |threads: u32, computed: u32| {
            move || -> Box<dyn Workload> {
                let mut cfg = small(60_000, threads);
                cfg.nr_rounds = 3;
                cfg.computed_rounds = computed;
                Box::new(Xgboost::new(&cfg, 4))
            }
        };
        let sampler = RegionSampler::new(tierkit_core::SpaceScale::new(0.25), 3);
        let by_mapping = sampler
            .clone()
            .with_strata(tierkit_core::SampleStrata::Mapping);
        for s in [&sampler, &by_mapping] {
            check_restricted(&make(1, 0), s, 1e-12);
            check_restricted(&make(2, 1), s, 1e-12);
        }
        let mut w = make(1, 1)();
        assert!(w.restrict_to(&by_mapping));
        assert_eq!(
            w.expected_accesses(),
            None,
            "a sample's count is not announced"
        );
    }

    #[test]
    fn validate_names_the_bad_field() {
        let bad = |f: &dyn Fn(&mut XgboostConfig), field: &str| {
            let mut c = XgboostConfig::default();
            f(&mut c);
            let e = c.validate().unwrap_err();
            assert!(e.to_string().contains(field), "{e:?} should name {field}");
        };
        bad(&|c| c.nr_rows = 0, "nr_rows");
        bad(&|c| c.nr_features = 0, "nr_features");
        bad(&|c| c.max_bin = 1, "max_bin");
        bad(&|c| c.max_depth = 0, "max_depth");
        bad(&|c| c.max_depth = 17, "max_depth");
        bad(&|c| c.nr_rounds = 0, "nr_rounds");
        bad(&|c| c.computed_rounds = 3, "computed_rounds");
        bad(&|c| c.scale = 0.0, "scale");
        bad(&|c| c.nr_threads = 0, "nr_threads");
        bad(&|c| c.nr_rows = 1 << 40, "nr_rows");
        XgboostConfig::default().validate().unwrap();
    }
}
