//! `liblinear`: LIBLINEAR's default solver (`-s 1`, L2-regularised L2-loss SVM,
//! dual coordinate descent; Hsieh et al., ICML'08) training on a sparse data set —
//! the machine-learning workload of MEMTIS and PET (KDD Cup 2010/2012 data).
//!
//! The solver (`solve_l2r_l1l2_svc`) is run for real on host-side data:
//! initialisation computes `QD[i] = 0.5/C + ‖x_i‖²` and adds `y_i α_i x_i` to `w`
//! for every instance; then each outer iteration shuffles the active instances and
//! visits them in that order: `G = y_i w·x_i − 1 + α_i·0.5/C`, the projected
//! gradient with LIBLINEAR's shrinking (instances at the bound whose gradient
//! exceeds last iteration's maximum leave the active set), and when it is not
//! negligible the coordinate step `α_i ← max(α_i − G/QD_i, 0)` and `w += Δα y_i x_i`.
//! The outer loop stops at `nr_epochs` iterations or when the projected gradients
//! fall within `eps = 0.1`, LIBLINEAR's stopping rule (reactivating the shrunk
//! instances once, as LIBLINEAR does).
//!
//! ## Data
//!
//! `nr_rows` instances; row lengths uniform in [½, 1½] × `avg_nnz_per_row`; feature
//! ids drawn from a Zipf(`feature_theta`) popularity over `nr_features`, most
//! popular first (LIBSVM-format conversions number features in order of first
//! appearance, so frequent features get small ids), deduplicated and sorted as
//! LIBSVM format requires; binary values (KDD Cup's features are indicator
//! features); labels from a hidden linear model plus noise, so the problem is
//! learnable and the solver's updates and shrinking behave as on real data.
//!
//! ## Memory layout (LIBLINEAR's allocations)
//!
//! `prob.y` (`double` per instance), `prob.x` (a pointer per instance), `x_space`
//! (16-byte `feature_node`s, each row terminated by an index −1 node), then the
//! solver's `w` (`double` per feature), `QD` (`double`), `index` (`int`), `alpha`
//! (`double`) and `y` (`schar`); each its own mapping.
//!
//! ## The stream
//!
//! Reading the data first-touches `prob.y`, `prob.x` and `x_space` page by page; the
//! solver's loops are emitted access by access: rows are streamed (one access per
//! line of their nodes), `w[feature]` is gathered once per nonzero by the dot
//! product and stored once per nonzero by the update (whose loads hit the lines the
//! dot product just brought in), and `y[i]`, `prob.x[i]`, `alpha[i]`, `QD[i]` are
//! data-dependent per visit; the shuffle swaps `index` entries. With one thread the
//! solver is LIBLINEAR's serial one; with more, the visits of an iteration are split
//! into contiguous blocks of the shuffled order (the parallel dual CD of multi-core
//! LIBLINEAR, updating the shared `w` without locks) and shrinking is off.

use rand_xoshiro::Xoshiro256PlusPlus;
use serde::{Deserialize, Serialize};
use std::sync::Arc;
use tierkit_core::{ConfigError, Op, ProcessShape, VmaKind, Workload, WorkloadShape, PAGE_SIZE};

use crate::common;
use crate::graph::engine::{self, ParFor, Program, Runner, Schedule, Sink, Stream};
use crate::graph::tagged_rng;
use crate::layout::{Layout, Mapping};
use crate::zipf::Zipfian;

const NAME: &str = "liblinear";
/// Bytes of a `feature_node` (`int index; double value;`, padded).
pub const NODE_BYTES: u64 = 16;
/// LIBLINEAR's default stopping tolerance for this solver.
pub const EPS: f64 = 0.1;

/// Configuration of [`Liblinear`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct LiblinearConfig {
    /// Training instances before `scale`. Default 640 Ki (≈ 0.4 GiB of data). Range
    /// >= 1.
    pub nr_rows: u64,
    /// Features before `scale`. Default 4 Mi (a 32 MiB `w`). Range >= 1.
    pub nr_features: u64,
    /// Mean nonzeros per instance (KDD Cup 2010 has ≈ 36, 2012 ≈ 11). Default 32.
    /// Range [1, 100 000].
    pub avg_nnz_per_row: u32,
    /// Zipf skew of feature popularity. Default 0.99. Range (0, 1).
    pub feature_theta: f64,
    /// Most outer iterations of the solver (LIBLINEAR's `max_iter` is 1000; it
    /// usually stops much earlier on the `eps` rule). Default 2. Range >= 1.
    pub nr_epochs: u32,
    /// The SVM's cost `C` (LIBLINEAR's `-c`). Default 1.0. Range > 0.
    pub cost: f64,
    /// Compute before each access, in ns. Default 1.
    pub gap_ns: u32,
    /// Multiplies `nr_rows` and `nr_features` together. Default 1.0.
    pub scale: f64,
    /// Number of threads. Default 1 (LIBLINEAR's solver is serial).
    pub nr_threads: u32,
    /// Memory-level parallelism. Default 4.0: the gathers of `w` within a row are
    /// independent.
    pub mlp: f64,
}

impl Default for LiblinearConfig {
    fn default() -> Self {
        LiblinearConfig {
            nr_rows: 640 << 10,
            nr_features: 4 << 20,
            avg_nnz_per_row: 32,
            feature_theta: 0.99,
            nr_epochs: 2,
            cost: 1.0,
            gap_ns: 1,
            scale: 1.0,
            nr_threads: 1,
            mlp: 4.0,
        }
    }
}

impl LiblinearConfig {
    /// Check every field; the error names the field and its valid range.
    pub fn validate(&self) -> Result<(), ConfigError> {
        common::check_positive(NAME, "nr_rows", self.nr_rows)?;
        common::check_positive(NAME, "nr_features", self.nr_features)?;
        if !(1..=100_000).contains(&self.avg_nnz_per_row) {
            return Err(format!(
                "{NAME}.avg_nnz_per_row must be in [1, 100000], got {}",
                self.avg_nnz_per_row
            )
            .into());
        }
        if !(self.feature_theta > 0.0 && self.feature_theta < 1.0) {
            return Err(format!(
                "{NAME}.feature_theta must be in (0, 1), got {}",
                self.feature_theta
            )
            .into());
        }
        if self.nr_epochs == 0 {
            return Err(format!("{NAME}.nr_epochs must be >= 1, got 0").into());
        }
        if !(self.cost > 0.0 && self.cost.is_finite()) {
            return Err(format!("{NAME}.cost must be > 0, got {}", self.cost).into());
        }
        common::check_common(NAME, self.scale, self.nr_threads, self.mlp)?;
        let rows = self.nr_rows as f64 * self.scale;
        let nnz = rows * self.avg_nnz_per_row as f64 * 1.5;
        if nnz > u32::MAX as f64 || self.nr_features as f64 * self.scale > i32::MAX as f64 {
            return Err(format!(
                "{NAME}.nr_rows × avg_nnz_per_row and nr_features (× scale) must fit LIBLINEAR's int indices"
            ).into());
        }
        common::check_footprint(
            NAME,
            "nr_rows",
            nnz * NODE_BYTES as f64 + rows * 45.0 + self.nr_features as f64 * self.scale * 8.0,
        )
    }
}

/// The data set (host side).
#[derive(Debug)]
struct Data {
    /// Row `i`'s features are `features[row_at[i]..row_at[i + 1]]`.
    row_at: Vec<u64>,
    features: Vec<u32>,
    /// Labels, +1 or −1.
    y: Vec<i8>,
}

impl Data {
    fn generate(cfg: &LiblinearConfig, rows: u64, features: u64, seed: u64) -> Data {
        let zipf = Zipfian::new(features, cfg.feature_theta);
        let mut rng = tagged_rng(seed, 30);
        let avg = u64::from(cfg.avg_nnz_per_row);
        let (lo, hi) = ((avg / 2).max(1), avg + avg / 2);
        let mut row_at = Vec::with_capacity(rows as usize + 1);
        let mut feats: Vec<u32> = Vec::with_capacity((rows * avg) as usize);
        let mut y = Vec::with_capacity(rows as usize);
        row_at.push(0);
        let mut row: Vec<u32> = Vec::new();
        for _ in 0..rows {
            // `len` distinct features: popular ones are drawn again and again, so
            // duplicates are redrawn (a feature occurs once per LIBSVM row).
            let len = (lo + common::below(&mut rng, hi - lo + 1)).min(features);
            row.clear();
            while (row.len() as u64) < len {
                let f = zipf.sample(&mut rng) as u32;
                if let Err(at) = row.binary_search(&f) {
                    row.insert(at, f);
                }
            }
            let start = feats.len();
            feats.extend_from_slice(&row);
            row_at.push(feats.len() as u64);
            // A hidden model: each feature votes ±1 (by a hash), plus noise.
            let score: i64 = feats[start..]
                .iter()
                .map(|&f| {
                    if common::mix64(u64::from(f) ^ seed) & 1 == 0 {
                        1
                    } else {
                        -1
                    }
                })
                .sum::<i64>()
                + common::below(&mut rng, 5) as i64
                - 2;
            y.push(if score > 0 { 1 } else { -1 });
        }
        Data {
            row_at,
            features: feats,
            y,
        }
    }

    fn nr_rows(&self) -> u64 {
        self.y.len() as u64
    }

    fn row(&self, i: u32) -> &[u32] {
        &self.features[self.row_at[i as usize] as usize..self.row_at[i as usize + 1] as usize]
    }
}

/// Addresses of the arrays.
#[derive(Debug, Clone, Copy)]
struct Arrays {
    prob_y: Mapping,
    prob_x: Mapping,
    x_space: Mapping,
    w: Mapping,
    qd: Mapping,
    index: Mapping,
    alpha: Mapping,
    y: Mapping,
}

impl Arrays {
    fn all(&self) -> [Mapping; 8] {
        [
            self.prob_y,
            self.prob_x,
            self.x_space,
            self.w,
            self.qd,
            self.index,
            self.alpha,
            self.y,
        ]
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Stage {
    /// First touch of the loaded data (pages of `prob.y`, `prob.x`, `x_space`).
    Load,
    /// `w = 0` and the solver's `y`, `alpha` initialisations.
    Zero,
    /// `QD[i]`, `axpy(y_i α_i, x_i, w)`, `index[i] = i`.
    InitRows,
    /// The shuffle of an outer iteration.
    Shuffle,
    /// The coordinate-descent visits of an outer iteration.
    Visit,
    Done,
}

/// The solver as an engine program.
#[derive(Debug, Clone)]
struct Solver {
    data: Arc<Data>,
    a: Arrays,
    nr_threads: u32,
    max_iter: u32,
    diag: f64,
    shrinking: bool,
    w: Vec<f64>,
    qd: Vec<f64>,
    alpha: Vec<f64>,
    index: Vec<u32>,
    active_size: u64,
    pg_max_old: f64,
    pg_min_old: f64,
    pg_max_new: f64,
    pg_min_new: f64,
    iter: u32,
    /// Cursor of the serial loops (zeroing, shuffle, visits with shrinking).
    s: u64,
    rng: Xoshiro256PlusPlus,
    stage: Stage,
    par: ParFor,
    load_page: u64,
    updates: u64,
}

impl Solver {
    /// One visit of instance `index[s]` by thread `t`; returns false if shrinking
    /// removed it (the caller then revisits position `s`).
    fn visit<S: Sink>(&mut self, sk: &mut S, t: usize, s: u64, is: &mut Stream) -> bool {
        let a = self.a;
        is.touch(sk, t, a.index.addr + s * 4, false);
        let i = self.index[s as usize];
        let yi = f64::from(self.data.y[i as usize]);
        sk.access(t, a.y.addr + u64::from(i), false);
        sk.access(t, a.prob_x.addr + u64::from(i) * 8, false);
        let row_start = (self.data.row_at[i as usize] + u64::from(i)) * NODE_BYTES;
        let mut rs = Stream::default();
        let mut dot = 0.0;
        for (k, &f) in self.data.row(i).iter().enumerate() {
            rs.touch(
                sk,
                t,
                a.x_space.addr + row_start + k as u64 * NODE_BYTES,
                false,
            );
            sk.access(t, a.w.addr + u64::from(f) * 8, false);
            dot += self.w[f as usize];
        }
        // The terminating node.
        let len = self.data.row(i).len() as u64;
        rs.touch(sk, t, a.x_space.addr + row_start + len * NODE_BYTES, false);
        sk.access(t, a.alpha.addr + u64::from(i) * 8, false);
        let alpha_i = self.alpha[i as usize];
        let g = yi * dot - 1.0 + alpha_i * self.diag;
        let mut pg = 0.0;
        if alpha_i == 0.0 {
            if self.shrinking && g > self.pg_max_old {
                // Shrink: swap index[s] with index[active_size - 1].
                self.active_size -= 1;
                let last = self.active_size;
                self.index.swap(s as usize, last as usize);
                sk.access(t, a.index.addr + s * 4, true);
                sk.access(t, a.index.addr + last * 4, true);
                return false;
            } else if g < 0.0 {
                pg = g;
            }
        } else {
            pg = g;
        }
        self.pg_max_new = self.pg_max_new.max(pg);
        self.pg_min_new = self.pg_min_new.min(pg);
        if pg.abs() > 1e-12 {
            sk.access(t, a.qd.addr + u64::from(i) * 8, false);
            let new_alpha = (alpha_i - g / self.qd[i as usize]).max(0.0);
            self.alpha[i as usize] = new_alpha;
            sk.access(t, a.alpha.addr + u64::from(i) * 8, true);
            let d = (new_alpha - alpha_i) * yi;
            for &f in self.data.row(i) {
                self.w[f as usize] += d;
                sk.access(t, a.w.addr + u64::from(f) * 8, true);
            }
            self.updates += 1;
        }
        true
    }

    fn start_iteration(&mut self) {
        self.pg_max_new = f64::NEG_INFINITY;
        self.pg_min_new = f64::INFINITY;
        self.s = 0;
        self.stage = Stage::Shuffle;
    }

    /// LIBLINEAR's end-of-iteration bookkeeping; returns false when training ends.
    fn end_iteration(&mut self) -> bool {
        self.iter += 1;
        let l = self.data.nr_rows();
        if self.pg_max_new - self.pg_min_new <= EPS {
            if self.active_size == l {
                return false;
            }
            self.active_size = l;
            self.pg_max_old = f64::INFINITY;
            self.pg_min_old = f64::NEG_INFINITY;
        } else {
            self.pg_max_old = if self.pg_max_new <= 0.0 {
                f64::INFINITY
            } else {
                self.pg_max_new
            };
            self.pg_min_old = if self.pg_min_new >= 0.0 {
                f64::NEG_INFINITY
            } else {
                self.pg_min_new
            };
        }
        self.iter < self.max_iter
    }
}

impl Program for Solver {
    fn step<S: Sink>(&mut self, sk: &mut S) -> bool {
        let a = self.a;
        let l = self.data.nr_rows();
        loop {
            match self.stage {
                Stage::Load => {
                    // read_problem fills prob.y, prob.x and x_space as it parses the
                    // file: their pages in order (thread 0).
                    let loaded = [a.prob_y, a.prob_x, a.x_space];
                    let total: u64 = loaded.iter().map(|m| m.len / PAGE_SIZE).sum();
                    if self.load_page < total {
                        let end = (self.load_page + 256).min(total);
                        for p in self.load_page..end {
                            let mut q = p;
                            for m in loaded {
                                let pages = m.len / PAGE_SIZE;
                                if q < pages {
                                    sk.access(0, m.addr + q * PAGE_SIZE, true);
                                    break;
                                }
                                q -= pages;
                            }
                        }
                        self.load_page = end;
                        return true;
                    }
                    sk.mark("train");
                    self.stage = Stage::Zero;
                }
                Stage::Zero => {
                    // w[i] = 0, then y[i] = ±1 from prob.y and alpha[i] = 0: serial
                    // loops, resumed in chunks of 4096 iterations (cursor `s`).
                    let nw = a.w.len / 8;
                    let end = (self.s + 4096).min(nw + l);
                    let (mut ws, mut ps, mut ys, mut al) = (
                        Stream::default(),
                        Stream::default(),
                        Stream::default(),
                        Stream::default(),
                    );
                    for k in self.s..end {
                        if k < nw {
                            ws.touch(sk, 0, a.w.addr + k * 8, true);
                        } else {
                            let i = k - nw;
                            ps.touch(sk, 0, a.prob_y.addr + i * 8, false);
                            ys.touch(sk, 0, a.y.addr + i, true);
                            al.touch(sk, 0, a.alpha.addr + i * 8, true);
                        }
                    }
                    self.s = end;
                    if end == nw + l {
                        self.par = ParFor::new(l, 1, Schedule::Blocked, 256);
                        self.stage = Stage::InitRows;
                    }
                    return true;
                }
                Stage::InitRows => {
                    if let Some((_, lo, hi)) = self.par.next_piece() {
                        let (mut qs, mut xs, mut xs2, mut is) = (
                            Stream::default(),
                            Stream::default(),
                            Stream::default(),
                            Stream::default(),
                        );
                        for i in lo..hi {
                            xs.touch(sk, 0, a.prob_x.addr + i * 8, false);
                            let row = self.data.row(i as u32);
                            let start = (self.data.row_at[i as usize] + i) * NODE_BYTES;
                            // nrm2_sq streams the row; axpy(y_i α_i, x_i, w) streams
                            // it again (L1 hits) and updates w.
                            xs2.touch_range(
                                sk,
                                0,
                                a.x_space.addr + start,
                                (row.len() as u64 + 1) * NODE_BYTES,
                                false,
                            );
                            self.qd[i as usize] = self.diag + row.len() as f64;
                            qs.touch(sk, 0, a.qd.addr + i * 8, true);
                            for &f in row {
                                sk.access(0, a.w.addr + u64::from(f) * 8, false);
                                sk.access(0, a.w.addr + u64::from(f) * 8, true);
                            }
                            self.index[i as usize] = i as u32;
                            is.touch(sk, 0, a.index.addr + i * 4, true);
                        }
                        return true;
                    }
                    self.start_iteration();
                }
                Stage::Shuffle => {
                    // for i: j = i + rand() % (active_size - i); swap(index[i], index[j])
                    // (cursor `s`, chunks of 4096).
                    let n = self.active_size;
                    if self.s == 0 {
                        sk.mark("iteration");
                    }
                    let end = (self.s + 4096).min(n);
                    let mut is = Stream::default();
                    for i in self.s..end {
                        let j = i + common::below(&mut self.rng, n - i);
                        is.touch(sk, 0, a.index.addr + i * 4, false);
                        sk.access(0, a.index.addr + j * 4, false);
                        self.index.swap(i as usize, j as usize);
                        sk.access(0, a.index.addr + i * 4, true);
                        sk.access(0, a.index.addr + j * 4, true);
                    }
                    self.s = end;
                    if end == n {
                        self.s = 0;
                        self.par = ParFor::new(n, self.nr_threads, Schedule::Blocked, 64);
                        self.stage = Stage::Visit;
                    }
                    return true;
                }
                Stage::Visit => {
                    if self.shrinking {
                        if self.s < self.active_size {
                            let mut is = Stream::default();
                            let mut done = 0;
                            while self.s < self.active_size && done < 64 {
                                if self.visit(sk, 0, self.s, &mut is) {
                                    self.s += 1;
                                }
                                done += 1;
                            }
                            return true;
                        }
                    } else if let Some((t, lo, hi)) = self.par.next_piece() {
                        let mut is = Stream::default();
                        for s in lo..hi {
                            self.visit(sk, t, s, &mut is);
                        }
                        return true;
                    }
                    if self.end_iteration() {
                        self.start_iteration();
                    } else {
                        self.stage = Stage::Done;
                    }
                }
                Stage::Done => return false,
            }
        }
    }
}

/// The LIBLINEAR training generator (see the module docs).
#[derive(Debug)]
pub struct Liblinear {
    a: Arrays,
    runner: Runner<Solver>,
    #[cfg(test)]
    start: Solver,
    nr_threads: u32,
    mlp: f64,
    expected: u64,
}

impl Liblinear {
    /// Generate the data set for `cfg` with `seed`.
    ///
    /// # Panics
    /// If `cfg` does not pass [`LiblinearConfig::validate`].
    pub fn new(cfg: &LiblinearConfig, seed: u64) -> Self {
        if let Err(e) = cfg.validate() {
            panic!("invalid {NAME} config: {e}");
        }
        let rows = common::scaled(cfg.nr_rows, cfg.scale).max(1);
        let features = common::scaled(cfg.nr_features, cfg.scale).max(1);
        let data = Arc::new(Data::generate(cfg, rows, features, seed));
        let nnz = data.features.len() as u64;
        let mut layout = Layout::new();
        let a = Arrays {
            prob_y: layout.map(rows * 8, VmaKind::Anon),
            prob_x: layout.map(rows * 8, VmaKind::Anon),
            x_space: layout.map((nnz + rows) * NODE_BYTES, VmaKind::Anon),
            w: layout.map(features * 8, VmaKind::Anon),
            qd: layout.map(rows * 8, VmaKind::Anon),
            index: layout.map(rows * 4, VmaKind::Anon),
            alpha: layout.map(rows * 8, VmaKind::Anon),
            y: layout.map(rows, VmaKind::Anon),
        };
        let solver = Solver {
            data,
            a,
            nr_threads: cfg.nr_threads,
            max_iter: cfg.nr_epochs,
            diag: 0.5 / cfg.cost,
            shrinking: cfg.nr_threads == 1,
            w: vec![0.0; features as usize],
            qd: vec![0.0; rows as usize],
            alpha: vec![0.0; rows as usize],
            index: vec![0; rows as usize],
            active_size: rows,
            pg_max_old: f64::INFINITY,
            pg_min_old: f64::NEG_INFINITY,
            pg_max_new: 0.0,
            pg_min_new: 0.0,
            iter: 0,
            s: 0,
            rng: tagged_rng(seed, 31),
            stage: Stage::Load,
            par: ParFor::new(0, 1, Schedule::Blocked, 1),
            load_page: 0,
            updates: 0,
        };
        let expected = engine::count_accesses(&solver);
        Liblinear {
            a,
            #[cfg(test)]
            start: solver.clone(),
            runner: Runner::new(solver, cfg.nr_threads, cfg.gap_ns),
            nr_threads: cfg.nr_threads,
            mlp: cfg.mlp,
            expected,
        }
    }

    /// The mappings: `prob.y`, `prob.x`, `x_space`, `w`, `QD`, `index`, `alpha`,
    /// `y`.
    pub fn mappings(&self) -> [Mapping; 8] {
        self.a.all()
    }
}

impl Workload for Liblinear {
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
        if process == 0 {
            self.runner.fill(thread, out);
        }
    }

    fn expected_accesses(&self) -> Option<u64> {
        Some(self.expected)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::graph::engine::testing::{phase, record, Event};
    use crate::testutil::{check_structure, drain};

    fn small(nr_rows: u64, nr_epochs: u32, nr_threads: u32) -> LiblinearConfig {
        LiblinearConfig {
            nr_rows,
            nr_features: 20_000,
            nr_epochs,
            nr_threads,
            ..LiblinearConfig::default()
        }
    }

    #[test]
    fn same_seed_same_stream_different_seed_different_stream() {
        let cfg = small(2000, 2, 2);
        let a = drain(&mut Liblinear::new(&cfg, 7));
        let b = drain(&mut Liblinear::new(&cfg, 7));
        let c = drain(&mut Liblinear::new(&cfg, 8));
        assert_eq!(a.streams, b.streams);
        assert_ne!(a.streams, c.streams);
        assert!(!a.streams[0][1].is_empty());
    }

    #[test]
    fn footprint_mappings_and_access_count() {
        for threads in [1, 3] {
            let mut w = Liblinear::new(&small(3000, 3, threads), 1);
            let d = drain(&mut w);
            assert_eq!(d.mappings, w.mappings().to_vec());
            check_structure(&w, &d);
        }
    }

    #[test]
    fn feature_popularity_is_a_power_law_and_rows_are_sorted() {
        let cfg = small(5000, 1, 1);
        let data = Data::generate(&cfg, 5000, 20_000, 3);
        let mut counts = vec![0u64; 20_000];
        for i in 0..5000u32 {
            let r = data.row(i);
            assert!(r.windows(2).all(|w| w[0] < w[1]), "sorted, distinct");
            r.iter().for_each(|&f| counts[f as usize] += 1);
        }
        let nnz = data.features.len() as f64;
        assert!((nnz / 5000.0 - 32.0).abs() < 2.0, "mean row length");
        // Feature 0 appears in most rows; the top 1% of features hold a large share.
        assert!(counts[0] > 2000);
        let top: u64 = counts[..200].iter().sum();
        assert!(top as f64 > 0.3 * nnz, "top 1% share {}", top as f64 / nnz);
        // Both classes are present.
        let pos = data.y.iter().filter(|&&y| y > 0).count();
        assert!(pos > 500 && pos < 4500, "{pos} positives");
    }

    #[test]
    fn each_visit_streams_its_row_and_gathers_w_once_per_nonzero() {
        let w = Liblinear::new(&small(4000, 3, 1), 2);
        let mut p = w.start.clone();
        let events = record(&mut p);
        let a = w.a;
        let nnz = p.data.features.len() as u64;
        // Iteration 1 visits every instance: one w load per nonzero of every row,
        // one x_space line stream per row, one update store per nonzero of the
        // rows whose alpha moved.
        let it = phase(&events, "iteration", 0);
        let count = |m: &Mapping, write: bool| {
            it.iter()
                .filter(|e| matches!(e, Event::Access { addr, write: w, .. } if m.contains(*addr) && *w == write))
                .count() as u64
        };
        assert_eq!(count(&a.w, false), nnz);
        let stores = count(&a.w, true);
        assert!(stores > nnz / 2 && stores <= nnz, "{stores} of {nnz}");
        assert_eq!(count(&a.prob_x, false), 4000);
        let lines = count(&a.x_space, false);
        let bytes = (nnz + 4000) * NODE_BYTES;
        assert!(lines >= bytes / 64 && lines <= bytes / 64 + 2 * 4000);
        // The solver really learns: most training labels are predicted right.
        let correct = (0..4000u32)
            .filter(|&i| {
                let s: f64 = p.data.row(i).iter().map(|&f| p.w[f as usize]).sum();
                (s > 0.0) == (p.data.y[i as usize] > 0)
            })
            .count();
        assert!(correct > 3400, "{correct} of 4000 right");
        // Shrinking removed instances from later iterations.
        assert!(p.active_size < 4000 || p.iter < 3);
    }

    #[test]
    fn validate_names_the_bad_field() {
        let bad = |f: &dyn Fn(&mut LiblinearConfig), field: &str| {
            let mut c = LiblinearConfig::default();
            f(&mut c);
            let e = c.validate().unwrap_err();
            assert!(e.to_string().contains(field), "{e:?} should name {field}");
        };
        bad(&|c| c.nr_rows = 0, "nr_rows");
        bad(&|c| c.nr_features = 0, "nr_features");
        bad(&|c| c.avg_nnz_per_row = 0, "avg_nnz_per_row");
        bad(&|c| c.feature_theta = 1.0, "feature_theta");
        bad(&|c| c.nr_epochs = 0, "nr_epochs");
        bad(&|c| c.cost = 0.0, "cost");
        bad(&|c| c.scale = 0.0, "scale");
        bad(&|c| c.nr_threads = 0, "nr_threads");
        bad(&|c| c.mlp = 0.5, "mlp");
        bad(&|c| c.nr_rows = 1 << 40, "nr_rows");
        LiblinearConfig::default().validate().unwrap();
    }
}
