//! `bwaves` and `roms`: stencil and streaming kernels in the style of SPEC CPU2017
//! 603.bwaves_s and 654.roms_s, the two SPEC benchmarks MEMTIS evaluates (§6.2.6).
//!
//! Both are access-pattern models of the real programs' sweeps: the arrays, their
//! layout, the order of the sweeps and which arrays each sweep reads and writes
//! follow the Fortran sources' structure; the floating-point work itself is not
//! performed (it does not change a single address).
//!
//! ## Common machinery
//!
//! A *sweep* walks every point of a grid in memory order (`i` fastest, then `j`,
//! then `k`, as Fortran's `DO k / DO j / DO i` nests do) and, per point, touches a
//! set of *streams*: an array read or written at the point or at a vertical
//! neighbour `k ± 1`. Each stream emits one access per cache line it enters, so a
//! sweep is a handful of concurrent sequential streams — the horizontal neighbours
//! (`i ± 1`, `j ± 1`) lie within a few rows of the current point and hit in the
//! core's caches. Threads split every sweep into contiguous blocks of points
//! (OpenMP `static` over the outer loop; ROMS's tiles, which partition the same
//! loops, amount to the same thing for memory).
//!
//! ## `bwaves` (603.bwaves_s: blast waves, an implicit CFD solver)
//!
//! Five conserved variables per point of an `nx × ny × nz` periodic grid. Long-lived
//! arrays: `q`, `dq`, `rhs` (5 doubles per point) and the seven 5×5 Jacobian blocks
//! of the 7-point implicit operator, `a, axp, axm, ayp, aym, azp, azm` (25 doubles
//! per point each: 1400 of the 1760 bytes per point). Each time step: compute the
//! Jacobian and right-hand side (read `q` at `k−1, k, k+1`, write the eight arrays),
//! then solve with BiCGstab — its six work vectors `r, r̂, p, v, s, t` are allocated
//! at the start of the solve and freed at its end (the short-lived allocations
//! MEMTIS §6.2.6 names as bwaves's defining trait): `mmap`/`munmap` operations in the
//! stream, each thread allocating its own block of each vector. Every BiCGstab
//! iteration makes two block matrix-vector products (stream all seven Jacobian
//! blocks plus the operand at `k−1, k, k+1`) and seven vector sweeps (dot products,
//! axpys); `solver_iterations` per step (the real solver iterates to a tolerance).
//! Finally `q += dq`. With several threads, a thread's `k ± 1` neighbours of a work
//! vector wrap around within its own block (its own allocation), a small deviation
//! at block edges that keeps every access inside a mapping of its own thread.
//!
//! ## `roms` (654.roms_s: a regional ocean model)
//!
//! `nr_3d_arrays` 3-D arrays (`lm × mm × n_levels` doubles: velocities, tracers,
//! density, vertical velocity, layer thicknesses, fluxes, mixing coefficients,
//! tridiagonal work arrays) and `nr_2d_arrays` 2-D arrays (`lm × mm`: free surface,
//! barotropic velocities, metrics, forcing). Each baroclinic step runs `ndtfast`
//! barotropic sub-steps (`step2d`: one sweep of the 2-D grid over 11 arrays read
//! and 8 written), then the 3-D kernels of ROMS's `main3d` in order: `set_depth`,
//! `rho_eos`, `omega`, `rhs3d`, `pre_step3d`, `step3d_uv`, `step3d_t`, `t3dmix`,
//! `uv3dmix`, `set_massflux`, each with its arrays (vertical neighbours `k ± 1`
//! clamped at the bottom and surface). The 2-D arrays are small and swept dozens of
//! times per step — the hot set — while the 3-D bulk is swept about ten times per
//! step.

use serde::{Deserialize, Serialize};
use tierkit_core::{ConfigError, Op, ProcessShape, VmaKind, Workload, WorkloadShape, PAGE_SIZE};

use crate::common;
use crate::graph::engine::{self, ParFor, Program, Runner, Schedule, Sink, Stream};
use crate::layout::{Layout, Mapping};

/// Points per piece of a sweep.
const GRAIN: u64 = 512;

/// Where an array lives.
#[derive(Debug, Clone, Copy)]
enum Home {
    /// A long-lived mapping.
    Long(Mapping),
    /// Short-lived work vector `i`: each thread's block is its own mapping.
    Temp(usize),
}

/// One array of a stencil program.
#[derive(Debug, Clone, Copy)]
struct Field {
    home: Home,
    /// Bytes per grid point.
    bytes: u64,
    /// A 2-D field (one value per column `(i, j)`).
    flat: bool,
}

/// One stream of a sweep: `field` at vertical offset `dk`, read or written.
#[derive(Debug, Clone, Copy)]
struct Touch {
    field: usize,
    dk: i64,
    write: bool,
}

/// One step of a stencil program's schedule.
#[derive(Debug, Clone)]
enum Item {
    /// First touch of a long-lived field, page by page, split over the threads.
    FirstTouch(usize),
    /// A sweep over the 3-D grid (`flat == false`) or the 2-D grid.
    Sweep {
        name: &'static str,
        flat: bool,
        touches: Vec<Touch>,
    },
    /// Every thread maps its blocks of the work vectors.
    MapTemps,
    /// Every thread unmaps them.
    UnmapTemps,
}

/// A stencil program: fields, per-thread work-vector mappings, and the schedule.
#[derive(Debug, Clone)]
struct StencilProgram {
    nx: u64,
    ny: u64,
    nz: u64,
    periodic: bool,
    nr_threads: u32,
    fields: Vec<Field>,
    /// `temps[t][i]`: thread `t`'s block of work vector `i`.
    temps: Vec<Vec<Mapping>>,
    schedule: Vec<Item>,
    at: usize,
    par: Option<ParFor>,
}

impl StencilProgram {
    fn points(&self, flat: bool) -> u64 {
        if flat {
            self.nx * self.ny
        } else {
            self.nx * self.ny * self.nz
        }
    }

    /// Thread `t`'s block of the grid: whole `k`-planes of the 3-D grid (OpenMP
    /// `static` over the outer loop), whole `j`-rows of the 2-D grid.
    fn block(&self, t: usize, flat: bool) -> (u64, u64) {
        if flat {
            let (lo, hi) = common::share(self.ny, self.nr_threads, t);
            (lo * self.nx, hi * self.nx)
        } else {
            let plane = self.nx * self.ny;
            let (lo, hi) = common::share(self.nz, self.nr_threads, t);
            (lo * plane, hi * plane)
        }
    }

    /// Address of `touch` at point `p` of a sweep (3-D point index unless `flat`)
    /// run by thread `t`.
    #[inline]
    fn addr(&self, t: usize, touch: &Touch, p: u64, flat_sweep: bool) -> u64 {
        let f = &self.fields[touch.field];
        let plane = self.nx * self.ny;
        if flat_sweep || f.flat {
            let at = p % plane;
            return match f.home {
                Home::Long(m) => m.addr + at * f.bytes,
                Home::Temp(_) => unreachable!("work vectors are 3-D"),
            };
        }
        let n = self.points(false);
        match f.home {
            Home::Long(m) => {
                let q = if touch.dk == 0 {
                    p
                } else if self.periodic {
                    (p as i64 + touch.dk * plane as i64).rem_euclid(n as i64) as u64
                } else {
                    let k = (p / plane) as i64 + touch.dk;
                    let k = k.clamp(0, self.nz as i64 - 1) as u64;
                    k * plane + p % plane
                };
                m.addr + q * f.bytes
            }
            Home::Temp(i) => {
                let (lo, hi) = self.block(t, false);
                let len = (hi - lo) as i64;
                let q = (p as i64 - lo as i64 + touch.dk * plane as i64).rem_euclid(len) as u64;
                self.temps[t][i].addr + q * f.bytes
            }
        }
    }

    /// Points `[lo, hi)` of a sweep by thread `t`. Within one plane every stream's
    /// address is linear in the point, so the streams advance together in chunks
    /// of about one line of the narrowest field, in the loop body's order.
    fn sweep_piece<S: Sink>(
        &self,
        s: &mut S,
        t: usize,
        touches: &[Touch],
        flat: bool,
        lo: u64,
        hi: u64,
    ) {
        let mut streams = [Stream::default(); 24];
        debug_assert!(touches.len() <= streams.len());
        let mut bases = [0u64; 24];
        let narrowest = touches
            .iter()
            .map(|x| self.fields[x.field].bytes)
            .min()
            .unwrap_or(8);
        let chunk = (engine::LINE_BYTES / narrowest).max(1);
        let plane = self.nx * self.ny;
        let mut a = lo;
        while a < hi {
            let b = if flat {
                hi
            } else {
                hi.min((a / plane + 1) * plane)
            };
            for (k, x) in touches.iter().enumerate() {
                bases[k] = self.addr(t, x, a, flat);
            }
            let mut c = a;
            while c < b {
                let n = chunk.min(b - c);
                for (k, x) in touches.iter().enumerate() {
                    let bytes = self.fields[x.field].bytes;
                    streams[k].touch_range(s, t, bases[k] + (c - a) * bytes, n * bytes, x.write);
                }
                c += n;
            }
            a = b;
        }
    }
}

impl Program for StencilProgram {
    fn step<S: Sink>(&mut self, s: &mut S) -> bool {
        while self.at < self.schedule.len() {
            let item = self.schedule[self.at].clone();
            match item {
                Item::MapTemps | Item::UnmapTemps => {
                    for (t, blocks) in self.temps.iter().enumerate() {
                        for m in blocks {
                            let op = match item {
                                Item::MapTemps => m.mmap_op(),
                                _ => Op::Munmap {
                                    addr: m.addr,
                                    len: m.len,
                                },
                            };
                            s.op(t, op);
                        }
                    }
                    self.at += 1;
                    return true;
                }
                Item::FirstTouch(f) => {
                    let Home::Long(m) = self.fields[f].home else {
                        unreachable!("only long-lived fields are first-touched")
                    };
                    let nr = self.nr_threads;
                    let par = self.par.get_or_insert_with(|| {
                        ParFor::new(m.len / PAGE_SIZE, nr, Schedule::Blocked, 16)
                    });
                    if let Some((t, lo, hi)) = par.next_piece() {
                        engine::first_touch(s, t, m.addr, lo, hi);
                        return true;
                    }
                }
                Item::Sweep {
                    name,
                    flat,
                    touches,
                } => {
                    if self.par.is_none() {
                        s.mark(name);
                        let blocks: Vec<(u64, u64)> = (0..self.nr_threads as usize)
                            .map(|t| self.block(t, flat))
                            .collect();
                        self.par = Some(ParFor::with_blocks(&blocks, GRAIN));
                    }
                    let par = self.par.as_mut().expect("just set");
                    if let Some((t, lo, hi)) = par.next_piece() {
                        self.sweep_piece(s, t, &touches, flat, lo, hi);
                        return true;
                    }
                }
            }
            self.par = None;
            self.at += 1;
        }
        false
    }
}

/// A stencil workload: its long-lived mappings, its work-vector mappings and its
/// program.
#[derive(Debug)]
struct StencilWorkload {
    name: &'static str,
    long: Vec<Mapping>,
    temps: Vec<Mapping>,
    runner: Runner<StencilProgram>,
    #[cfg(test)]
    start: StencilProgram,
    nr_threads: u32,
    mlp: f64,
    expected: u64,
}

impl StencilWorkload {
    fn new(
        name: &'static str,
        program: StencilProgram,
        long: Vec<Mapping>,
        gap_ns: u32,
        mlp: f64,
    ) -> Self {
        let temps = program.temps.iter().flatten().copied().collect();
        let expected = engine::count_accesses(&program);
        let nr_threads = program.nr_threads;
        StencilWorkload {
            name,
            long,
            temps,
            #[cfg(test)]
            start: program.clone(),
            runner: Runner::new(program, nr_threads, gap_ns),
            nr_threads,
            mlp,
            expected,
        }
    }

    fn shape(&self) -> WorkloadShape {
        WorkloadShape {
            processes: vec![ProcessShape {
                name: self.name.to_string(),
                nr_threads: self.nr_threads,
                mlp: self.mlp,
            }],
            // Peak: the long-lived arrays plus every thread's work vectors.
            footprint_bytes: self.long.iter().chain(&self.temps).map(|m| m.len).sum(),
        }
    }
}

/// Implement [`Workload`] for a wrapper around [`StencilWorkload`].
macro_rules! stencil_workload {
    ($name:ident) => {
        impl Workload for $name {
            fn shape(&self) -> WorkloadShape {
                self.inner.shape()
            }
            fn prologue(&mut self, process: usize, out: &mut Vec<Op>) {
                if process == 0 {
                    out.extend(self.inner.long.iter().map(|m| m.mmap_op()));
                }
            }
            fn fill(&mut self, process: usize, thread: usize, out: &mut Vec<Op>) {
                if process == 0 {
                    self.inner.runner.fill(thread, out);
                }
            }
            fn expected_accesses(&self) -> Option<u64> {
                Some(self.inner.expected)
            }
        }

        impl $name {
            /// The long-lived mappings, in allocation order.
            pub fn mappings(&self) -> &[Mapping] {
                &self.inner.long
            }

            /// The short-lived work-vector mappings (each thread's blocks), mapped
            /// and unmapped within the run.
            pub fn temp_mappings(&self) -> &[Mapping] {
                &self.inner.temps
            }
        }
    };
}

/// A layout whose first mapping starts a seed-dependent number of 2 MiB steps
/// (1–1024) above the usual base, the way address-space layout randomisation moves
/// a real program's `mmap` area from run to run. The stencils have no random input,
/// so this is the only thing their seed changes: same seed, same stream; another
/// seed, the same sweeps at other addresses.
pub fn randomized_layout(seed: u64) -> Layout {
    let mut layout = Layout::new();
    let steps = common::mix64(seed ^ 0x5eed_a51a) % 1024;
    // Skip the address range without mapping it.
    let _ = layout.map((steps + 1) * tierkit_core::HUGE_PAGE_SIZE, VmaKind::Anon);
    layout
}

/// The grid, thread, compute and `scale` checks both configs share.
fn check_grid(
    name: &str,
    dims: [(&str, u64); 3],
    scale: f64,
    nr_threads: u32,
    mlp: f64,
) -> Result<(), ConfigError> {
    for (field, v) in dims {
        if !(3..=1 << 20).contains(&v) {
            return Err(format!("{name}.{field} must be in [3, 1048576], got {v}").into());
        }
    }
    common::check_common(name, scale, nr_threads, mlp)?;
    let scaled = (dims[2].1 as f64 * scale).round();
    if scaled < 3.0 {
        return Err(format!("{name}.{} × scale must be >= 3, got {scaled}", dims[2].0).into());
    }
    Ok(())
}

// ---------------------------------------------------------------------------------
// bwaves

const BWAVES: &str = "bwaves";
/// Bytes of a 5-variable vector at one point.
const VEC5: u64 = 5 * 8;
/// Bytes of a 5×5 Jacobian block at one point.
const BLOCK25: u64 = 25 * 8;

/// Configuration of [`Bwaves`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct BwavesConfig {
    /// Grid points along `i` (fastest). Default 64. Range [3, 2^20].
    pub nx: u64,
    /// Grid points along `j`. Default 64. Range [3, 2^20].
    pub ny: u64,
    /// Grid points along `k` before `scale`. Default 176 (≈ 1.3 GiB). Range: `nz ×
    /// scale` >= 3.
    pub nz: u64,
    /// Time steps (each: Jacobian, one BiCGstab solve with its allocations, update).
    /// Default 2. Range >= 1.
    pub nr_steps: u32,
    /// BiCGstab iterations per solve. Default 1 (the real solver iterates to a
    /// tolerance, a handful of times per step; one keeps two steps within the
    /// default budget). Range >= 1.
    pub solver_iterations: u32,
    /// Compute before each access, in ns. Default 4 (25 multiply-adds per
    /// 64-byte Jacobian line).
    pub gap_ns: u32,
    /// Multiplies `nz` (the grid and the run). Default 1.0.
    pub scale: f64,
    /// Number of threads. Default 1.
    pub nr_threads: u32,
    /// Memory-level parallelism. Default 8.0: a dozen independent sequential
    /// streams the hardware prefetchers follow.
    pub mlp: f64,
}

impl Default for BwavesConfig {
    fn default() -> Self {
        BwavesConfig {
            nx: 64,
            ny: 64,
            nz: 176,
            nr_steps: 2,
            solver_iterations: 1,
            gap_ns: 4,
            scale: 1.0,
            nr_threads: 1,
            mlp: 8.0,
        }
    }
}

impl BwavesConfig {
    /// Check every field; the error names the field and its valid range.
    pub fn validate(&self) -> Result<(), ConfigError> {
        check_grid(
            BWAVES,
            [("nx", self.nx), ("ny", self.ny), ("nz", self.nz)],
            self.scale,
            self.nr_threads,
            self.mlp,
        )?;
        if self.nr_steps == 0 {
            return Err(format!("{BWAVES}.nr_steps must be >= 1, got 0").into());
        }
        if self.solver_iterations == 0 {
            return Err(format!("{BWAVES}.solver_iterations must be >= 1, got 0").into());
        }
        let points = self.nx as f64 * self.ny as f64 * self.nz as f64 * self.scale;
        if points / (self.nr_threads as f64) < (self.nx * self.ny) as f64 {
            return Err(format!(
                "{BWAVES}.nr_threads must be at most the number of k-planes (nz × scale), got {}",
                self.nr_threads
            )
            .into());
        }
        common::check_footprint(BWAVES, "nz", points * (7 * BLOCK25 + 9 * VEC5) as f64)
    }
}

/// The 603.bwaves-style generator (see the module docs).
#[derive(Debug)]
pub struct Bwaves {
    inner: StencilWorkload,
}

stencil_workload!(Bwaves);

impl Bwaves {
    /// Lay out the grid for `cfg`; `seed` only places the mappings (see
    /// [`randomized_layout`]): the sweeps are fully determined by the grid.
    ///
    /// # Panics
    /// If `cfg` does not pass [`BwavesConfig::validate`].
    pub fn new(cfg: &BwavesConfig, seed: u64) -> Self {
        if let Err(e) = cfg.validate() {
            panic!("invalid {BWAVES} config: {e}");
        }
        let (nx, ny) = (cfg.nx, cfg.ny);
        let nz = (cfg.nz as f64 * cfg.scale).round() as u64;
        let points = nx * ny * nz;
        let mut layout = randomized_layout(seed);
        // Long-lived: q, dq, rhs, then the seven Jacobian blocks.
        let mut fields = Vec::new();
        let mut long = Vec::new();
        for bytes in [VEC5, VEC5, VEC5].into_iter().chain([BLOCK25; 7]) {
            let m = layout.map(points * bytes, VmaKind::Anon);
            long.push(m);
            fields.push(Field {
                home: Home::Long(m),
                bytes,
                flat: false,
            });
        }
        let (q, dq, rhs) = (0, 1, 2);
        let jac: Vec<usize> = (3..10).collect();
        // Work vectors r, r̂, p, v, s, t: each thread's block its own mapping.
        let nr_temps = 6;
        let temps: Vec<Vec<Mapping>> = (0..cfg.nr_threads as usize)
            .map(|t| {
                // A thread's block: whole k-planes (see StencilProgram::block).
                let (lo, hi) = common::share(nz, cfg.nr_threads, t);
                let (lo, hi) = (lo * nx * ny, hi * nx * ny);
                (0..nr_temps)
                    .map(|_| layout.map((hi - lo) * VEC5, VmaKind::Anon))
                    .collect()
            })
            .collect();
        for i in 0..nr_temps {
            fields.push(Field {
                home: Home::Temp(i),
                bytes: VEC5,
                flat: false,
            });
        }
        let (r, rh, p, v, s, t) = (10, 11, 12, 13, 14, 15);
        let rd = |field| Touch {
            field,
            dk: 0,
            write: false,
        };
        let wr = |field| Touch {
            field,
            dk: 0,
            write: true,
        };
        let around = |field| {
            [-1, 0, 1].map(|dk| Touch {
                field,
                dk,
                write: false,
            })
        };
        let sweep = |name, touches: Vec<Touch>| Item::Sweep {
            name,
            flat: false,
            touches,
        };
        // y = A x: the seven blocks, x at k-1, k, k+1 (the i, j neighbours are in
        // cache), then y.
        let matvec = |name, x: usize, y: usize, extra: &[Touch]| {
            let mut t: Vec<Touch> = jac.iter().map(|&f| rd(f)).collect();
            t.extend(around(x));
            t.extend_from_slice(extra);
            t.push(wr(y));
            sweep(name, t)
        };
        let mut schedule = vec![Item::FirstTouch(q), Item::FirstTouch(dq)];
        for _ in 0..cfg.nr_steps {
            let mut jt: Vec<Touch> = around(q).to_vec();
            jt.extend(jac.iter().map(|&f| wr(f)));
            jt.push(wr(rhs));
            schedule.push(sweep("jacobian", jt));
            schedule.push(Item::MapTemps);
            // r = rhs - A dq; r̂ = p = r; rho = (r̂, r).
            schedule.push(matvec("residual", dq, r, &[rd(rhs)]));
            schedule.push(sweep("copy", vec![rd(r), wr(rh), wr(p)]));
            schedule.push(sweep("dot", vec![rd(rh), rd(r)]));
            for _ in 0..cfg.solver_iterations {
                schedule.push(matvec("matvec", p, v, &[]));
                schedule.push(sweep("dot", vec![rd(rh), rd(v)]));
                schedule.push(sweep("axpy", vec![rd(r), rd(v), wr(s)]));
                schedule.push(matvec("matvec", s, t, &[]));
                schedule.push(sweep("dot", vec![rd(t), rd(s)]));
                schedule.push(sweep("axpy", vec![rd(dq), rd(p), rd(s), wr(dq)]));
                schedule.push(sweep("axpy", vec![rd(s), rd(t), wr(r)]));
                schedule.push(sweep("dot", vec![rd(rh), rd(r)]));
                schedule.push(sweep("axpy", vec![rd(r), rd(p), rd(v), wr(p)]));
            }
            schedule.push(Item::UnmapTemps);
            schedule.push(sweep("update", vec![rd(q), rd(dq), wr(q)]));
        }
        let program = StencilProgram {
            nx,
            ny,
            nz,
            periodic: true,
            nr_threads: cfg.nr_threads,
            fields,
            temps,
            schedule,
            at: 0,
            par: None,
        };
        Bwaves {
            inner: StencilWorkload::new(BWAVES, program, long, cfg.gap_ns, cfg.mlp),
        }
    }
}

// ---------------------------------------------------------------------------------
// roms

const ROMS: &str = "roms";

/// The 3-D arrays of the `roms` model, in allocation order (the first
/// `nr_3d_arrays` are used).
const ROMS_3D: [&str; 24] = [
    "u", "v", "temp", "salt", "rho", "W", "Hz", "z_r", "z_w", "Huon", "Hvom", "ru", "rv", "Akv",
    "Akt", "diff4", "visc4", "u_old", "v_old", "t_old", "s_old", "FC", "BC", "DC",
];
/// The 2-D arrays.
const ROMS_2D: [&str; 20] = [
    "zeta", "ubar", "vbar", "h", "pm", "pn", "f", "DUon", "DVom", "rufrc", "rvfrc", "Zt_avg1",
    "DU_avg1", "DV_avg1", "rzeta", "rubar", "rvbar", "bustr", "bvstr", "mask",
];

/// Configuration of [`Roms`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct RomsConfig {
    /// Interior points along `i` (ROMS's `Lm`). Default 512. Range [3, 2^20].
    pub lm: u64,
    /// Interior points along `j` (ROMS's `Mm`) before `scale`. Default 480. Range:
    /// `mm × scale` >= 3.
    pub mm: u64,
    /// Vertical levels (ROMS's `N`). Default 30. Range [3, 2^20].
    pub n_levels: u64,
    /// 3-D arrays. Default 24 (every array the kernels use). Range [24, 24].
    pub nr_3d_arrays: u32,
    /// 2-D arrays. Default 20. Range [20, 20].
    pub nr_2d_arrays: u32,
    /// Barotropic sub-steps per baroclinic step (ROMS's `NDTFAST`). Default 30.
    /// Range >= 1.
    pub ndtfast: u32,
    /// Baroclinic time steps. Default 2. Range >= 1.
    pub nr_steps: u32,
    /// Compute before each access, in ns. Default 4.
    pub gap_ns: u32,
    /// Multiplies `mm` (the grid and the run). Default 1.0.
    pub scale: f64,
    /// Number of threads. Default 1.
    pub nr_threads: u32,
    /// Memory-level parallelism. Default 8.0: a dozen independent sequential
    /// streams.
    pub mlp: f64,
}

impl Default for RomsConfig {
    fn default() -> Self {
        RomsConfig {
            lm: 512,
            mm: 480,
            n_levels: 30,
            nr_3d_arrays: 24,
            nr_2d_arrays: 20,
            ndtfast: 30,
            nr_steps: 2,
            gap_ns: 4,
            scale: 1.0,
            nr_threads: 1,
            mlp: 8.0,
        }
    }
}

impl RomsConfig {
    /// Check every field; the error names the field and its valid range.
    pub fn validate(&self) -> Result<(), ConfigError> {
        check_grid(
            ROMS,
            [
                ("lm", self.lm),
                ("n_levels", self.n_levels),
                ("mm", self.mm),
            ],
            self.scale,
            self.nr_threads,
            self.mlp,
        )?;
        if self.nr_3d_arrays != ROMS_3D.len() as u32 {
            return Err(format!(
                "{ROMS}.nr_3d_arrays must be {} (the arrays the modelled kernels use), got {}",
                ROMS_3D.len(),
                self.nr_3d_arrays
            )
            .into());
        }
        if self.nr_2d_arrays != ROMS_2D.len() as u32 {
            return Err(format!(
                "{ROMS}.nr_2d_arrays must be {}, got {}",
                ROMS_2D.len(),
                self.nr_2d_arrays
            )
            .into());
        }
        if self.ndtfast == 0 {
            return Err(format!("{ROMS}.ndtfast must be >= 1, got 0").into());
        }
        if self.nr_steps == 0 {
            return Err(format!("{ROMS}.nr_steps must be >= 1, got 0").into());
        }
        let plane = self.lm as f64 * self.mm as f64 * self.scale;
        common::check_footprint(
            ROMS,
            "mm",
            plane * 8.0 * (self.n_levels as f64 * 24.0 + 20.0),
        )
    }
}

/// The 654.roms-style generator (see the module docs).
#[derive(Debug)]
pub struct Roms {
    inner: StencilWorkload,
}

stencil_workload!(Roms);

impl Roms {
    /// Lay out the grid for `cfg`; `seed` only places the mappings (see
    /// [`randomized_layout`]): the sweeps are fully determined by the grid.
    ///
    /// # Panics
    /// If `cfg` does not pass [`RomsConfig::validate`].
    pub fn new(cfg: &RomsConfig, seed: u64) -> Self {
        if let Err(e) = cfg.validate() {
            panic!("invalid {ROMS} config: {e}");
        }
        let (nx, nz) = (cfg.lm, cfg.n_levels);
        let ny = (cfg.mm as f64 * cfg.scale).round() as u64;
        let mut layout = randomized_layout(seed);
        let mut fields = Vec::new();
        let mut long = Vec::new();
        for _ in ROMS_3D {
            let m = layout.map(nx * ny * nz * 8, VmaKind::Anon);
            long.push(m);
            fields.push(Field {
                home: Home::Long(m),
                bytes: 8,
                flat: false,
            });
        }
        for _ in ROMS_2D {
            let m = layout.map(nx * ny * 8, VmaKind::Anon);
            long.push(m);
            fields.push(Field {
                home: Home::Long(m),
                bytes: 8,
                flat: true,
            });
        }
        let a3 = |name: &str| {
            ROMS_3D
                .iter()
                .position(|&n| n == name)
                .expect("a 3-D array")
        };
        let a2 = |name: &str| {
            ROMS_3D.len()
                + ROMS_2D
                    .iter()
                    .position(|&n| n == name)
                    .expect("a 2-D array")
        };
        let rd = |field| Touch {
            field,
            dk: 0,
            write: false,
        };
        let wr = |field| Touch {
            field,
            dk: 0,
            write: true,
        };
        let at = |field, dk| Touch {
            field,
            dk,
            write: false,
        };
        let kernel = |name, reads: Vec<Touch>, writes: &[&str]| {
            let mut t = reads;
            t.extend(writes.iter().map(|n| wr(a3(n))));
            Item::Sweep {
                name,
                flat: false,
                touches: t,
            }
        };
        let mut schedule: Vec<Item> = (0..fields.len()).map(Item::FirstTouch).collect();
        for _ in 0..cfg.nr_steps {
            for _ in 0..cfg.ndtfast {
                let mut t: Vec<Touch> = [
                    "zeta", "ubar", "vbar", "h", "pm", "pn", "f", "rufrc", "rvfrc", "DUon", "DVom",
                ]
                .iter()
                .map(|n| rd(a2(n)))
                .collect();
                t.extend(
                    [
                        "zeta", "ubar", "vbar", "DUon", "DVom", "Zt_avg1", "DU_avg1", "DV_avg1",
                    ]
                    .iter()
                    .map(|n| wr(a2(n))),
                );
                schedule.push(Item::Sweep {
                    name: "step2d",
                    flat: true,
                    touches: t,
                });
            }
            schedule.push(kernel(
                "set_depth",
                vec![rd(a3("Hz")), rd(a2("zeta")), rd(a2("h"))],
                &["z_r", "z_w", "Hz"],
            ));
            schedule.push(kernel(
                "rho_eos",
                vec![rd(a3("temp")), rd(a3("salt")), rd(a3("z_r"))],
                &["rho"],
            ));
            schedule.push(kernel(
                "omega",
                vec![
                    rd(a3("Huon")),
                    rd(a3("Hvom")),
                    at(a3("z_w"), -1),
                    rd(a3("z_w")),
                ],
                &["W"],
            ));
            schedule.push(kernel(
                "rhs3d",
                vec![
                    rd(a3("u")),
                    rd(a3("v")),
                    rd(a3("W")),
                    at(a3("W"), 1),
                    rd(a3("Hz")),
                    rd(a3("rho")),
                    rd(a3("Huon")),
                    rd(a3("Hvom")),
                    rd(a2("pm")),
                    rd(a2("pn")),
                ],
                &["ru", "rv"],
            ));
            schedule.push(kernel(
                "pre_step3d",
                ["u", "v", "temp", "salt", "ru", "rv"]
                    .iter()
                    .map(|n| rd(a3(n)))
                    .collect(),
                &["u_old", "v_old", "t_old", "s_old"],
            ));
            schedule.push(kernel(
                "step3d_uv",
                vec![
                    rd(a3("u")),
                    rd(a3("v")),
                    rd(a3("ru")),
                    rd(a3("rv")),
                    rd(a3("Hz")),
                    at(a3("Akv"), -1),
                    rd(a3("Akv")),
                    at(a3("Akv"), 1),
                ],
                &["u", "v", "FC", "BC", "DC"],
            ));
            schedule.push(kernel(
                "step3d_t",
                vec![
                    rd(a3("temp")),
                    rd(a3("salt")),
                    rd(a3("Huon")),
                    rd(a3("Hvom")),
                    rd(a3("W")),
                    rd(a3("Hz")),
                    at(a3("Akt"), -1),
                    rd(a3("Akt")),
                    at(a3("Akt"), 1),
                ],
                &["temp", "salt", "FC", "DC"],
            ));
            schedule.push(kernel(
                "t3dmix",
                vec![
                    rd(a3("temp")),
                    rd(a3("salt")),
                    rd(a3("diff4")),
                    rd(a3("Hz")),
                    rd(a2("pm")),
                ],
                &["temp", "salt"],
            ));
            schedule.push(kernel(
                "uv3dmix",
                vec![
                    rd(a3("u")),
                    rd(a3("v")),
                    rd(a3("visc4")),
                    rd(a3("Hz")),
                    rd(a2("pn")),
                ],
                &["u", "v"],
            ));
            schedule.push(kernel(
                "set_massflux",
                vec![rd(a3("u")), rd(a3("v")), rd(a3("Hz"))],
                &["Huon", "Hvom"],
            ));
        }
        let program = StencilProgram {
            nx,
            ny,
            nz,
            periodic: false,
            nr_threads: cfg.nr_threads,
            fields,
            temps: Vec::new(),
            schedule,
            at: 0,
            par: None,
        };
        Roms {
            inner: StencilWorkload::new(ROMS, program, long, cfg.gap_ns, cfg.mlp),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::graph::engine::testing::{record, Event};
    use crate::testutil::drain;
    use std::collections::BTreeMap;

    fn small_bwaves(nz: u64, nr_threads: u32) -> BwavesConfig {
        BwavesConfig {
            nx: 16,
            ny: 12,
            nz,
            nr_threads,
            ..BwavesConfig::default()
        }
    }

    fn small_roms(mm: u64, nr_threads: u32) -> RomsConfig {
        RomsConfig {
            lm: 24,
            mm,
            n_levels: 6,
            ndtfast: 4,
            nr_threads,
            ..RomsConfig::default()
        }
    }

    /// Structural checks with short-lived mappings: every access lies in a mapping
    /// that is mapped at that point of its thread's stream, footprint = long-lived
    /// plus work vectors, and the access count is exact.
    fn check(w: &mut dyn Workload, long: &[Mapping], temps: &[Mapping]) {
        let d = drain(w);
        assert_eq!(d.mappings, long.to_vec());
        let fp: u64 = long.iter().chain(temps).map(|m| m.len).sum();
        assert_eq!(d.shape.footprint_bytes, fp);
        let mut n = 0u64;
        for stream in &d.streams[0] {
            let mut live: Vec<Mapping> = Vec::new();
            for op in stream {
                match *op {
                    Op::Access { addr, .. } => {
                        n += 1;
                        assert!(
                            long.iter().chain(&live).any(|m| m.contains(addr)),
                            "access {addr:#x} outside every live mapping"
                        );
                    }
                    Op::Mmap { addr, len, kind } => {
                        assert!(temps.contains(&Mapping { addr, len, kind }));
                        live.push(Mapping { addr, len, kind });
                    }
                    Op::Munmap { addr, .. } => {
                        let before = live.len();
                        live.retain(|m| m.addr != addr);
                        assert_eq!(live.len(), before - 1, "unmaps what it mapped");
                    }
                }
            }
            assert!(live.is_empty(), "every work vector freed");
        }
        assert_eq!(w.expected_accesses(), Some(n));
    }

    #[test]
    fn same_seed_same_stream_different_seed_different_stream() {
        for (a, b, c) in [
            (
                drain(&mut Bwaves::new(&small_bwaves(8, 2), 7)),
                drain(&mut Bwaves::new(&small_bwaves(8, 2), 7)),
                drain(&mut Bwaves::new(&small_bwaves(8, 2), 8)),
            ),
            (
                drain(&mut Roms::new(&small_roms(10, 2), 7)),
                drain(&mut Roms::new(&small_roms(10, 2), 7)),
                drain(&mut Roms::new(&small_roms(10, 2), 8)),
            ),
        ] {
            assert_eq!(a.streams, b.streams);
            assert_ne!(a.streams, c.streams, "the seed moves the layout");
            assert_eq!(
                a.streams[0][0].len(),
                c.streams[0][0].len(),
                "not the sweeps"
            );
        }
    }

    #[test]
    fn bwaves_maps_its_work_vectors_per_solve_and_stays_inside_mappings() {
        for threads in [1, 3] {
            let mut w = Bwaves::new(&small_bwaves(9, threads), 1);
            let (long, temps) = (w.mappings().to_vec(), w.temp_mappings().to_vec());
            assert_eq!(long.len(), 10);
            assert_eq!(temps.len(), 6 * threads as usize);
            check(&mut w, &long, &temps);
        }
        // Two steps: each thread maps and unmaps its six vectors twice.
        let mut w = Bwaves::new(&small_bwaves(9, 2), 1);
        let d = drain(&mut w);
        for stream in &d.streams[0] {
            let maps = stream
                .iter()
                .filter(|o| matches!(o, Op::Mmap { .. }))
                .count();
            let unmaps = stream
                .iter()
                .filter(|o| matches!(o, Op::Munmap { .. }))
                .count();
            assert_eq!((maps, unmaps), (12, 12));
        }
    }

    #[test]
    fn roms_footprint_mappings_and_access_count() {
        for threads in [1, 4] {
            let mut w = Roms::new(&small_roms(12, threads), 2);
            let long = w.mappings().to_vec();
            assert_eq!(long.len(), 44);
            assert!(w.temp_mappings().is_empty());
            check(&mut w, &long, &[]);
        }
    }

    /// Fraction of a sweep's accesses that continue a sequential stream: the
    /// access's line follows (by one) a line the same thread touched recently in
    /// the same mapping.
    fn sequential_share(events: &[Event], maps: &[Mapping]) -> f64 {
        let mut recent: BTreeMap<(usize, usize), Vec<u64>> = BTreeMap::new();
        let (mut seq, mut all) = (0u64, 0u64);
        for e in events {
            match *e {
                Event::Mark(_) => recent.clear(),
                Event::Access { thread, addr, .. } => {
                    let Some(m) = maps.iter().position(|m| m.contains(addr)) else {
                        continue;
                    };
                    let line = addr / 64;
                    let r = recent.entry((thread, m)).or_default();
                    all += 1;
                    // Continuing a stream: the next line, or the line just touched
                    // (an array read and written by the same sweep, a clamped
                    // neighbour plane).
                    if r.iter().any(|&l| l + 1 == line || l == line) {
                        seq += 1;
                    }
                    r.retain(|&l| l != line && l + 1 != line);
                    r.push(line);
                    if r.len() > 8 {
                        r.remove(0);
                    }
                }
                Event::Op(..) => {}
            }
        }
        seq as f64 / all as f64
    }

    #[test]
    fn sweeps_are_sequential_streams() {
        let w = Bwaves::new(&small_bwaves(40, 2), 3);
        let mut p = w.inner.start.clone();
        let events = record(&mut p);
        let maps: Vec<Mapping> = w
            .mappings()
            .iter()
            .chain(w.temp_mappings())
            .copied()
            .collect();
        let share = sequential_share(&events, &maps);
        assert!(share > 0.97, "bwaves: {share}");
        let w = Roms::new(&small_roms(64, 2), 3);
        let mut p = w.inner.start.clone();
        let events = record(&mut p);
        let share = sequential_share(&events, w.mappings());
        assert!(share > 0.97, "roms: {share}");
        // A matrix-vector product reads each Jacobian block exactly once per
        // point: 25 doubles, 200 bytes, 3.125 lines.
        let w = Bwaves::new(&small_bwaves(20, 1), 3);
        let mut p = w.inner.start.clone();
        let events = record(&mut p);
        let start = events
            .iter()
            .position(|e| matches!(e, Event::Mark("matvec")))
            .unwrap()
            + 1;
        let end = start
            + events[start..]
                .iter()
                .position(|e| matches!(e, Event::Mark(_)))
                .unwrap();
        let a = w.mappings()[3];
        let reads = events[start..end]
            .iter()
            .filter(|e| matches!(e, Event::Access { addr, .. } if a.contains(*addr)))
            .count() as u64;
        assert_eq!(reads, 16 * 12 * 20 * 200 / 64);
    }

    #[test]
    fn roms_2d_arrays_are_the_hot_set() {
        let mut cfg = small_roms(32, 1);
        cfg.ndtfast = 30;
        let w = Roms::new(&cfg, 4);
        let mut p = w.inner.start.clone();
        let events = record(&mut p);
        let mut per_map = vec![0u64; w.mappings().len()];
        for e in &events {
            if let Event::Access { addr, .. } = *e {
                per_map[w.mappings().iter().position(|m| m.contains(addr)).unwrap()] += 1;
            }
        }
        // Per byte, a 2-D array is accessed many times more than a 3-D one.
        let density = |i: usize| per_map[i] as f64 / w.mappings()[i].len as f64;
        let zeta = 24; // first 2-D array
        assert!(
            density(zeta) > 4.0 * density(0),
            "{} vs {}",
            density(zeta),
            density(0)
        );
    }

    #[test]
    fn validate_names_the_bad_field() {
        let bad_b = |f: &dyn Fn(&mut BwavesConfig), field: &str| {
            let mut c = BwavesConfig::default();
            f(&mut c);
            let e = c.validate().unwrap_err();
            assert!(e.to_string().contains(field), "{e:?} should name {field}");
        };
        bad_b(&|c| c.nx = 2, "nx");
        bad_b(&|c| c.ny = 0, "ny");
        bad_b(&|c| c.nz = 1, "nz");
        bad_b(&|c| c.scale = 0.001, "nz");
        bad_b(&|c| c.nr_steps = 0, "nr_steps");
        bad_b(&|c| c.solver_iterations = 0, "solver_iterations");
        bad_b(&|c| c.nr_threads = 1000, "nr_threads");
        bad_b(
            &|c| {
                c.nx = 1 << 20;
                c.nz = 1 << 20;
            },
            "nz",
        );
        BwavesConfig::default().validate().unwrap();
        let bad_r = |f: &dyn Fn(&mut RomsConfig), field: &str| {
            let mut c = RomsConfig::default();
            f(&mut c);
            let e = c.validate().unwrap_err();
            assert!(e.to_string().contains(field), "{e:?} should name {field}");
        };
        bad_r(&|c| c.lm = 1, "lm");
        bad_r(&|c| c.n_levels = 2, "n_levels");
        bad_r(&|c| c.mm = 2, "mm");
        bad_r(&|c| c.nr_3d_arrays = 10, "nr_3d_arrays");
        bad_r(&|c| c.nr_2d_arrays = 3, "nr_2d_arrays");
        bad_r(&|c| c.ndtfast = 0, "ndtfast");
        bad_r(&|c| c.nr_steps = 0, "nr_steps");
        bad_r(&|c| c.mlp = 0.0, "mlp");
        RomsConfig::default().validate().unwrap();
    }
}
