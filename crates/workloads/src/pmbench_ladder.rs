//! `pmbench-ladder`: Chrono's 50-process delay ladder (Chrono §5.1.3, Fig. 9; spec
//! §4.3 item 4 and test oracle 10).
//!
//! Chrono runs 50 cgroups, one pmbench process each, every process with its own
//! private working set accessed with pmbench's uniform (random) pattern. Process `i`
//! (i = 0…49) adds a delay of `i` units of 50 CPU cycles before every access, so the
//! processes form a ladder of 50 access-frequency classes: process 0 is the hottest,
//! process 49 the coldest. The question is whether a policy gives the fast tier to
//! the hot processes (Chrono: process 0 ≈ 100% in DRAM, falling with `i`) or spreads
//! it evenly (the baselines: every process ≈ the average fast share).
//!
//! Each process is a [`crate::pmbench`] instance (the same generator, reused through
//! `Pmbench::for_process`) with:
//! - its own region of `process_footprint_mib` (Chrono: 5 GB each, 250 GB in all;
//!   here 82 MiB each, 4100 MiB in all, the same 50 equal parts);
//! - pattern `uniform`, `read_ratio` 0.5 (pmbench's default; the paper does not say);
//! - `delay_ns = round(i × delay_step_cycles / cpu_ghz)`: 50 cycles at the 2.6 GHz
//!   of Chrono's Xeon Gold 6348 is 19.2 ns per step, 942 ns for process 49;
//! - its thread streams seeded by its process id, so every process draws its own
//!   accesses.
//!
//! **Equal run time, not equal work.** In the paper every process runs for the same
//! wall-clock time, so a process's access count is proportional to its rate. A
//! generator must fix counts up front, so process `i` gets a share of `nr_accesses`
//! proportional to `1 / (ref_access_ns + delay_i)`: with a mean cost of
//! `ref_access_ns` per access (memory plus pmbench's loop), every process then runs
//! for the same simulated time. The default 200 ns is the mean access time of the
//! `optane` machine preset at Chrono's 25% fast share with pmbench's 50% reads
//! (0.25 × 80 + 0.75 × (300 + 100) / 2 = 170 ns) plus some loop overhead. Where the
//! real mean differs, the hot processes finish somewhat earlier or later than the
//! cold ones. (Chrono reports process 0 at 2.8× the throughput of process 49 under
//! Linux-NB; with a 942 ns delay gap that means ≈ 520 ns per access on its machine,
//! page walks and pmbench's timing included, which the simulator does not model.)

use serde::{Deserialize, Serialize};
use tierkit_core::{ConfigError, Op, ProcessShape, RegionSampler, Workload, WorkloadShape};

use crate::common;
use crate::pmbench::{Pmbench, PmbenchConfig, PmbenchPattern};

const NAME: &str = "pmbench-ladder";

/// Configuration of [`PmbenchLadder`].
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct PmbenchLadderConfig {
    /// Number of processes (delay classes), in [1, 1024]. Default 50 (Chrono §5.1.3).
    pub nr_processes: u32,
    /// Each process's region in MiB before `scale`. Default 82 (4100 MiB in all;
    /// Chrono: 5 GB each).
    pub process_footprint_mib: u64,
    /// Measured accesses of all processes together, before `scale`, shared as the
    /// module docs describe. Default 120 M (plus the init writes).
    pub nr_accesses: u64,
    /// Delay added per class step, in CPU cycles. Default 50 (Chrono §5.1.3: process
    /// `i` waits `i × 50` cycles before each access). At most 1,000,000.
    pub delay_step_cycles: u64,
    /// CPU clock that turns cycles into ns, in GHz, in [0.1, 10]. Default 2.6 (Xeon
    /// Gold 6348, Chrono §5).
    pub cpu_ghz: f64,
    /// Assumed mean time of one access without delay, in ns, used only to share
    /// `nr_accesses` so every process runs about as long (module docs), in
    /// [1, 100000]. Default 200.
    pub ref_access_ns: f64,
    /// Fraction of accesses that are reads, in [0, 1]. Default 0.5 (pmbench's
    /// default; not stated in the paper).
    pub read_ratio: f64,
    /// Multiplies `process_footprint_mib` and `nr_accesses` together. Default 1.0.
    pub scale: f64,
    /// Threads per process. Default 1 (one pmbench thread per cgroup).
    pub nr_threads: u32,
    /// Memory-level parallelism of every process. Default 1.0, as `pmbench`
    /// (each access is timed on its own).
    pub mlp: f64,
}

impl Default for PmbenchLadderConfig {
    fn default() -> Self {
        PmbenchLadderConfig {
            nr_processes: 50,
            process_footprint_mib: 82,
            nr_accesses: 120_000_000,
            delay_step_cycles: 50,
            cpu_ghz: 2.6,
            ref_access_ns: 200.0,
            read_ratio: 0.5,
            scale: 1.0,
            nr_threads: 1,
            mlp: 1.0,
        }
    }
}

impl PmbenchLadderConfig {
    /// Check every field; the error names the field and its valid range.
    pub fn validate(&self) -> Result<(), ConfigError> {
        if !(1..=1024).contains(&self.nr_processes) {
            return Err(format!(
                "{NAME}.nr_processes must be in [1, 1024], got {}",
                self.nr_processes
            )
            .into());
        }
        common::check_positive(NAME, "process_footprint_mib", self.process_footprint_mib)?;
        if self.delay_step_cycles > 1_000_000 {
            return Err(format!(
                "{NAME}.delay_step_cycles must be in [0, 1000000], got {}",
                self.delay_step_cycles
            )
            .into());
        }
        if !(0.1..=10.0).contains(&self.cpu_ghz) {
            return Err(
                format!("{NAME}.cpu_ghz must be in [0.1, 10], got {}", self.cpu_ghz).into(),
            );
        }
        if !(1.0..=100_000.0).contains(&self.ref_access_ns) {
            return Err(format!(
                "{NAME}.ref_access_ns must be in [1, 100000], got {}",
                self.ref_access_ns
            )
            .into());
        }
        common::check_unit(NAME, "read_ratio", self.read_ratio)?;
        common::check_common(NAME, self.scale, self.nr_threads, self.mlp)?;
        if self.delay_ns(self.nr_processes - 1) > f64::from(u32::MAX) {
            return Err(format!(
                "{NAME}.delay_step_cycles × (nr_processes - 1) / cpu_ghz must fit in a u32 of ns, got {:.0} ns",
                self.delay_ns(self.nr_processes - 1)
            ).into());
        }
        common::check_footprint(
            NAME,
            "process_footprint_mib",
            self.process_footprint_mib as f64
                * f64::from(self.nr_processes)
                * self.scale
                * (1u64 << 20) as f64,
        )
    }

    /// The per-access delay of process `i`, in ns (unrounded).
    fn delay_ns(&self, i: u32) -> f64 {
        f64::from(i) * self.delay_step_cycles as f64 / self.cpu_ghz
    }

    /// The pmbench configuration of process `i` (before the shared `scale`).
    pub fn process_config(&self, i: u32) -> PmbenchConfig {
        // Access share ∝ rate = 1 / (ref + delay), so all run about as long.
        let weight = |j: u32| 1.0 / (self.ref_access_ns + self.delay_ns(j));
        let total: f64 = (0..self.nr_processes).map(weight).sum();
        PmbenchConfig {
            footprint_mib: self.process_footprint_mib,
            nr_accesses: (self.nr_accesses as f64 * weight(i) / total).round() as u64,
            pattern: PmbenchPattern::Uniform,
            read_ratio: self.read_ratio,
            delay_ns: self.delay_ns(i).round() as u32,
            scale: self.scale,
            nr_threads: self.nr_threads,
            mlp: self.mlp,
            ..PmbenchConfig::default()
        }
    }
}

/// The 50-process pmbench delay ladder (see the module docs).
#[derive(Debug, Clone)]
pub struct PmbenchLadder {
    procs: Vec<Pmbench>,
}

impl PmbenchLadder {
    /// Build the generator for `cfg` with `seed`.
    ///
    /// # Panics
    /// If `cfg` does not pass [`PmbenchLadderConfig::validate`].
    pub fn new(cfg: &PmbenchLadderConfig, seed: u64) -> Self {
        if let Err(e) = cfg.validate() {
            panic!("invalid pmbench-ladder config: {e}");
        }
        let procs = (0..cfg.nr_processes)
            .map(|i| Pmbench::for_process(&cfg.process_config(i), seed, i as usize))
            .collect();
        PmbenchLadder { procs }
    }

    /// The pmbench instance running as process `i`.
    pub fn process(&self, i: usize) -> &Pmbench {
        &self.procs[i]
    }
}

impl Workload for PmbenchLadder {
    fn shape(&self) -> WorkloadShape {
        WorkloadShape {
            processes: self
                .procs
                .iter()
                .map(|p| ProcessShape {
                    name: format!("pmbench-delay-{}", p.delay_ns()),
                    nr_threads: p.nr_threads(),
                    mlp: p.mlp(),
                })
                .collect(),
            footprint_bytes: self.procs.iter().map(|p| p.region().len).sum(),
        }
    }

    fn prologue(&mut self, process: usize, out: &mut Vec<Op>) {
        if let Some(p) = self.procs.get(process) {
            p.push_prologue(out);
        }
    }

    fn fill(&mut self, process: usize, thread: usize, out: &mut Vec<Op>) {
        if let Some(p) = self.procs.get_mut(process) {
            p.fill_thread(thread, out);
        }
    }

    fn restrict_to(&mut self, sampler: &RegionSampler) -> bool {
        // Each instance runs as its own process (`Pmbench::for_process`) and samples by
        // that process id, so the run's sampler applies to it unchanged.
        let mut all = true;
        for p in &mut self.procs {
            all &= p.restrict_to(sampler);
        }
        all
    }

    fn expected_accesses(&self) -> Option<u64> {
        self.procs.iter().map(|p| p.expected_accesses()).sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testutil::{accesses, drain};
    use tierkit_core::{MIB, PAGE_SIZE};

    fn small() -> PmbenchLadderConfig {
        PmbenchLadderConfig {
            process_footprint_mib: 1,
            nr_accesses: 500_000,
            ..PmbenchLadderConfig::default()
        }
    }

    #[test]
    fn fifty_processes_each_with_its_own_region_and_stream() {
        let mut w = PmbenchLadder::new(&small(), 1);
        let d = drain(&mut w);
        assert_eq!(d.shape.processes.len(), 50);
        assert_eq!(d.shape.footprint_bytes, 50 * MIB);
        assert_eq!(d.shape.processes[0].name, "pmbench-delay-0");
        assert_eq!(d.shape.processes[49].name, "pmbench-delay-942");
        // One mapping per process (the drain collects all prologues).
        assert_eq!(d.mappings.len(), 50);
        let mut n = 0;
        for (i, s) in d.streams.iter().enumerate() {
            let region = w.process(i).region();
            for (addr, _, _) in accesses(&s[0]) {
                assert!(region.contains(addr));
                n += 1;
            }
        }
        assert_eq!(Some(n), w.expected_accesses());
        // Processes draw different streams (same region layout, own seeds).
        let measured = |i: usize| {
            accesses(&d.streams[i][0])
                .skip(256)
                .take(100)
                .collect::<Vec<_>>()
        };
        assert_ne!(
            measured(0).iter().map(|a| a.0).collect::<Vec<_>>(),
            measured(1).iter().map(|a| a.0).collect::<Vec<_>>()
        );
    }

    #[test]
    fn delay_classes_form_a_ladder_and_access_rates_are_ordered() {
        let cfg = small();
        let mut w = PmbenchLadder::new(&cfg, 2);
        let d = drain(&mut w);
        let pages = MIB / PAGE_SIZE;
        let mut rates = Vec::new();
        let mut durations = Vec::new();
        for (i, s) in d.streams.iter().enumerate() {
            let acc: Vec<_> = accesses(&s[0]).skip(pages as usize).collect();
            let delay = (i as f64 * 50.0 / 2.6).round() as u32;
            assert!(acc.iter().all(|a| a.2 == delay), "process {i}");
            // Simulated time if each access costs ref_access_ns plus its gap.
            let time_ns: f64 = acc.iter().map(|a| f64::from(a.2) + cfg.ref_access_ns).sum();
            rates.push(acc.len() as f64 / time_ns);
            durations.push(time_ns);
        }
        // Access rate strictly falls with the delay class…
        for pair in rates.windows(2) {
            assert!(pair[0] > pair[1], "{rates:?}");
        }
        // …process 0 runs about (200 + 942) / 200 = 5.7× as often as process 49…
        let ratio = rates[0] / rates[49];
        assert!((ratio - 1142.0 / 200.0).abs() < 0.05, "{ratio}");
        // …and all processes run for about the same time.
        let (lo, hi) = durations
            .iter()
            .fold((f64::MAX, 0.0f64), |(lo, hi), &x| (lo.min(x), hi.max(x)));
        assert!(hi / lo < 1.01, "{lo} .. {hi}");
    }

    #[test]
    fn same_seed_same_streams_different_seed_different_streams() {
        let mut cfg = small();
        cfg.nr_processes = 4;
        cfg.nr_threads = 2;
        let a = drain(&mut PmbenchLadder::new(&cfg, 7));
        let b = drain(&mut PmbenchLadder::new(&cfg, 7));
        let c = drain(&mut PmbenchLadder::new(&cfg, 8));
        assert_eq!(a.streams, b.streams);
        assert_ne!(a.streams, c.streams);
    }

    #[test]
    fn restricted_generation_keeps_each_processs_filtered_law() {
        // Four processes of 16 MiB at 1/4: every process keeps its own regions (the
        // sampler hashes the process id), and each process's kept stream has the law of
        // its full stream filtered.
        let sampler = RegionSampler::new(tierkit_core::SpaceScale::new(1.0 / 4.0), 5);
        let cfg = PmbenchLadderConfig {
            nr_processes: 4,
            process_footprint_mib: 16,
            nr_accesses: 4_000_000,
            ..small()
        };
        crate::testutil::check_restricted(
            &|| Box::new(PmbenchLadder::new(&cfg, 3)),
            &sampler,
            0.01,
        );
    }

    #[test]
    fn default_is_about_4_gib_in_50_parts() {
        let w = PmbenchLadder::new(&PmbenchLadderConfig::default(), 0);
        let s = w.shape();
        assert_eq!(s.footprint_bytes, 50 * 82 * MIB);
        let n = w.expected_accesses().unwrap();
        assert!(
            (120_000_000..120_000_000 + 50 * 82 * 256 + 50).contains(&n),
            "{n}"
        );
    }

    #[test]
    fn validate_names_the_bad_field() {
        let bad = |f: &dyn Fn(&mut PmbenchLadderConfig), field: &str| {
            let mut c = PmbenchLadderConfig::default();
            f(&mut c);
            let e = c.validate().unwrap_err();
            assert!(e.to_string().contains(field), "{e:?} should name {field}");
        };
        bad(&|c| c.nr_processes = 0, "nr_processes");
        bad(&|c| c.process_footprint_mib = 0, "process_footprint_mib");
        bad(&|c| c.delay_step_cycles = 2_000_000, "delay_step_cycles");
        bad(&|c| c.cpu_ghz = 0.0, "cpu_ghz");
        bad(&|c| c.ref_access_ns = 0.0, "ref_access_ns");
        bad(&|c| c.read_ratio = 2.0, "read_ratio");
        bad(&|c| c.scale = 0.0, "scale");
        bad(&|c| c.nr_threads = 0, "nr_threads");
        bad(&|c| c.mlp = 0.0, "mlp");
        bad(
            &|c| c.process_footprint_mib = 1 << 40,
            "process_footprint_mib",
        );
        PmbenchLadderConfig::default().validate().unwrap();
    }
}
