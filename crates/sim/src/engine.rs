//! The run loop: interleave threads by virtual time, fire timers, record intervals.
//!
//! Each step reads as the kernel's loop would: pick the thread furthest behind, fire
//! the timers and interval boundaries it has passed, then run it for one quantum (or
//! until the next timer) so threads never drift apart by more than the quantum.

use crate::config::{MachineConfig, SimConfig};
use crate::error::SimError;
use crate::machine::{Machine, MachineParams, Payer};
use crate::metrics::{
    CoarseSampling, Counters, EpochRow, Placement, ProcessSummary, Summary, TierSummary, TimeSeries,
};
use tierkit_core::*;

/// A finished run.
pub struct RunOutput {
    /// Run summary.
    pub summary: Summary,
    /// Interval time series.
    pub series: TimeSeries,
    /// Placement quality per epoch and the access heat map.
    pub placement: Placement,
}

/// Names that identify a run in its summary.
#[derive(Debug, Clone)]
pub struct RunLabels {
    /// Policy name.
    pub policy: String,
    /// Workload name.
    pub workload: String,
    /// Seed.
    pub seed: u64,
}

/// How many operations ahead the engine prefetches simulator state (host-side only).
const PREFETCH_DISTANCE: usize = 12;

struct ThreadRun {
    process: usize,
    local: usize,
    inv_mlp: f64,
    buf: Vec<Op>,
    pos: usize,
    done: bool,
}

/// One simulation: a machine, a policy and a workload.
pub struct Simulation {
    /// The machine (public for tests that inspect state after a run).
    pub machine: Machine,
    policy: Box<dyn Policy>,
    workload: Box<dyn Workload>,
    threads: Vec<ThreadRun>,
    sim: SimConfig,
    labels: RunLabels,
    machine_name: String,
    fast: String,
    footprint_bytes: u64,
    /// The workload's process names, in process-id order.
    process_names: Vec<String>,
    series: TimeSeries,
    placement: Placement,
}

/// The LLC a run with `machine_cfg` and `sim` simulates, as (size in bytes, ways), or
/// `None` when the LLC is off. A sampled machine's LLC holds the sampled share of
/// lines; a rate that would leave it less than one set is refused.
pub fn llc_geometry(
    machine_cfg: &MachineConfig,
    sim: &SimConfig,
) -> Result<Option<(u64, u32)>, SimError> {
    if machine_cfg.llc_enabled {
        let size = machine_cfg.llc_size_mib * MIB;
        let sets = size / CACHE_LINE / machine_cfg.llc_ways as u64;
        if sets < sim.sample_rate.denominator as u64 {
            return Err(SimError::Config {
                what: format!("sim.sample_rate {}", sim.sample_rate),
                why: format!(
                    "shrinks the {} MiB, {}-way LLC below one set ({sets} sets); use a rate of at least 1/{sets} or a larger LLC",
                    machine_cfg.llc_size_mib, machine_cfg.llc_ways
                ),
            });
        }
        // The sampled machine's LLC holds the sampled share of lines.
        Ok(Some((
            size / sim.sample_rate.denominator as u64,
            machine_cfg.llc_ways,
        )))
    } else {
        Ok(None)
    }
}

impl Simulation {
    /// Build a simulation. Fails on an invalid machine or sim config.
    pub fn new(
        machine_cfg: &MachineConfig,
        sim: &SimConfig,
        policy: Box<dyn Policy>,
        workload: Box<dyn Workload>,
        labels: RunLabels,
    ) -> Result<Simulation, SimError> {
        sim.validate()?;
        let shape = workload.shape();
        if shape.processes.is_empty() || shape.processes.iter().any(|p| p.nr_threads == 0) {
            return Err(SimError::Config {
                what: "workload shape".into(),
                why: "needs at least one process with at least one thread".into(),
            });
        }
        if machine_cfg.thp == crate::config::ThpMode::Always
            && sim.sample_strata == tierkit_core::SampleStrata::Page
            && sim.sample_rate != crate::config::SampleRate::EXACT
        {
            return Err(SimError::Config {
                what: "sim.sample_strata".into(),
                why: "\"page\" samples every page alone, so no huge page keeps its shape: use it with machine.thp = \"never\", or \"mapping\" or \"address\" with THP".into(),
            });
        }
        let req = policy.requirements();
        let tiers = machine_cfg.resolve(shape.footprint_bytes, req.unbounded_fast_tier)?;
        let scale = sim.sample_rate.scale();
        let llc = llc_geometry(machine_cfg, sim)?;
        let (workload, sampler) = crate::sampling::sampled_workload(workload, sim, labels.seed);
        let mut machine = Machine::new(MachineParams {
            tiers,
            thp: machine_cfg.thp,
            llc,
            costs: machine_cfg.costs.clone(),
            tiering_cpus: machine_cfg.tiering_cpus,
            seed: labels.seed,
            pingpong_window_ms: sim.pingpong_window_ms,
            threads_per_process: shape.processes.iter().map(|p| p.nr_threads).collect(),
            policy_time_scale: sim.policy_time_scale,
            space_scale: scale,
            sampler,
        });
        machine.page_alloc_events = req.page_alloc_events;
        machine.declared = Some(req);
        let mut threads = Vec::new();
        for (pi, p) in shape.processes.iter().enumerate() {
            for local in 0..p.nr_threads as usize {
                threads.push(ThreadRun {
                    process: pi,
                    local,
                    inv_mlp: 1.0 / p.mlp.max(1e-3),
                    buf: Vec::new(),
                    pos: 0,
                    done: false,
                });
            }
        }
        let machine_name = if machine_cfg.tiers.is_empty() {
            machine_cfg.preset.clone()
        } else {
            "custom".into()
        };
        Ok(Simulation {
            machine,
            policy,
            workload,
            threads,
            sim: sim.clone(),
            labels,
            machine_name,
            fast: machine_cfg.fast.clone(),
            footprint_bytes: shape.footprint_bytes,
            process_names: shape.processes.iter().map(|p| p.name.clone()).collect(),
            series: TimeSeries::default(),
            placement: Placement::default(),
        })
    }

    /// Run to the end of the workload (or `max_accesses`), calling `progress` with the
    /// access count now and then.
    pub fn run(self, progress: &mut dyn FnMut(u64)) -> Result<RunOutput, SimError> {
        self.run_keeping_machine(progress).map(|(out, _)| out)
    }

    /// Like [`run`](Self::run), also handing back the machine so tests can inspect
    /// page placement after the run.
    pub fn run_keeping_machine(
        mut self,
        progress: &mut dyn FnMut(u64),
    ) -> Result<(RunOutput, Machine), SimError> {
        self.machine.enter(0.0, Payer::Kthread);
        self.policy.init(&mut self.machine);
        self.run_prologues()?;
        let interval_ns = (self.sim.interval_ms * NS_PER_MS) as f64;
        // Each simulated access stands for 1/rate accesses, so a thread's slice grows
        // with it; otherwise a sampled run would switch threads on every access.
        let quantum = self.sim.quantum_ns as f64 * self.machine.event_weight();
        let mut next_interval = interval_ns;
        let epoch_ns = (self.sim.epoch_ms * NS_PER_MS) as f64;
        let mut next_epoch = epoch_ns;
        let mut next_progress = 1u64 << 20;
        // The same limit a clairvoyant reference's future ends at.
        let max_accesses = crate::future::run_access_limit(&self.sim).unwrap_or(u64::MAX);
        loop {
            self.settle_shared_stall();
            let Some((t, clock, second)) = self.pick_thread() else {
                break;
            };
            // Timers and interval ends the laggard thread has passed happen first.
            if let Some(at) = self.machine.next_timer_at() {
                if at as f64 <= clock {
                    self.fire_timer();
                    continue;
                }
            }
            if next_interval <= clock {
                self.record_interval(next_interval);
                next_interval += interval_ns;
                continue;
            }
            if next_epoch <= clock {
                self.record_epoch(next_epoch);
                next_epoch += epoch_ns;
                continue;
            }
            self.machine.earliest_new_timer = f64::INFINITY;
            let mut horizon = (second + quantum).min(next_interval).min(next_epoch);
            if let Some(at) = self.machine.next_timer_at() {
                horizon = horizon.min(at as f64);
            }
            self.run_thread(t, horizon, max_accesses)?;
            if self.machine.counters.accesses >= next_progress {
                progress(self.machine.counters.accesses);
                next_progress = self.machine.counters.accesses + (1 << 20);
            }
            if self.machine.counters.accesses >= max_accesses {
                break;
            }
        }
        let end = self.machine.clocks.iter().cloned().fold(0.0, f64::max);
        if self.series.rows.last().is_none_or(|r| r.time_s * 1e9 < end) {
            self.record_interval(end);
        }
        if self
            .placement
            .epochs
            .last()
            .is_none_or(|r| r.time_s * 1e9 < end)
        {
            self.record_epoch(end);
        }
        progress(self.machine.counters.accesses);
        #[cfg(debug_assertions)]
        if let Err(e) = self.machine.check_invariants() {
            panic!("machine invariant broken at end of run: {e}");
        }
        let out = self.finish(end);
        Ok((out, self.machine))
    }

    fn run_prologues(&mut self) -> Result<(), SimError> {
        let nproc = self.machine.spaces.len();
        let mut buf = Vec::new();
        for p in 0..nproc {
            buf.clear();
            self.workload.prologue(p, &mut buf);
            for op in buf.drain(..) {
                match op {
                    Op::Mmap { addr, len, kind } => self.do_mmap(p as u32, addr, len, kind, 0.0)?,
                    other => {
                        return Err(SimError::BadMapping {
                            pid: p as u32,
                            why: format!("only mmap may appear in a prologue, got {other:?}"),
                        })
                    }
                }
            }
        }
        Ok(())
    }

    fn do_mmap(
        &mut self,
        pid: u32,
        addr: u64,
        len: u64,
        kind: VmaKind,
        now: f64,
    ) -> Result<(), SimError> {
        let vma = self.machine.mmap(pid, addr, len, kind)?;
        self.machine.enter(now, Payer::Task(Pid(pid)));
        self.policy
            .on_event(&Event::Mmap { pid: Pid(pid), vma }, &mut self.machine);
        Ok(())
    }

    /// Spread the stall owed to shared-CPU tiering threads over all running threads,
    /// and give each the stall a busy poller took from every one of them.
    fn settle_shared_stall(&mut self) {
        let owed = std::mem::take(&mut self.machine.shared_stall_pending);
        let each = std::mem::take(&mut self.machine.shared_stall_per_thread_pending);
        if owed == 0.0 && each == 0.0 {
            return;
        }
        let live: Vec<usize> = (0..self.threads.len())
            .filter(|&t| !self.threads[t].done)
            .collect();
        if live.is_empty() {
            return;
        }
        let share = owed / live.len() as f64 + each;
        for &t in &live {
            self.machine.clocks[t] += share;
        }
        self.machine.counters.app_tiering_stall_ns += owed + each * live.len() as f64;
    }

    /// The live thread with the smallest clock (lowest index on ties), its clock, and
    /// the smallest clock among the other live threads.
    fn pick_thread(&self) -> Option<(usize, f64, f64)> {
        let mut best: Option<(usize, f64)> = None;
        let mut second = f64::INFINITY;
        for (i, th) in self.threads.iter().enumerate() {
            if th.done {
                continue;
            }
            let c = self.machine.clocks[i];
            match best {
                None => best = Some((i, c)),
                Some((_, bc)) if c < bc => {
                    second = bc;
                    best = Some((i, c));
                }
                Some(_) => second = second.min(c),
            }
        }
        best.map(|(i, c)| (i, c, second))
    }

    fn fire_timer(&mut self) {
        let (at, id, payer) = self.machine.pop_timer().expect("a timer is due");
        self.machine.enter(at as f64, payer);
        self.policy
            .on_event(&Event::Timer { id }, &mut self.machine);
    }

    fn record_interval(&mut self, end_ns: f64) {
        let w = self.machine.event_weight();
        let fast_used = (self.machine.tiers[0].used as f64 * w).round() as u64;
        let counters = self.machine.counters.scaled(w);
        self.series.record(end_ns / 1e9, &counters, fast_used);
    }

    fn record_epoch(&mut self, end_ns: f64) {
        let e = self.machine.placement_epoch(self.sim.heatmap_bins);
        let w = self.machine.event_weight();
        let full = |n: u64| (n as f64 * w).round() as u64;
        self.placement.epochs.push(EpochRow::new(
            end_ns / 1e9,
            full(e.hot_pages),
            full(e.fast_pages),
            full(e.hot_in_fast),
        ));
        self.placement
            .heat
            .push(e.heat.into_iter().map(full).collect());
    }

    /// Run thread `t` until its clock reaches `horizon` (at least one op).
    fn run_thread(&mut self, t: usize, horizon: f64, max_accesses: u64) -> Result<(), SimError> {
        let gap_w = self.machine.gap_weight();
        loop {
            let th = &mut self.threads[t];
            if th.pos == th.buf.len() {
                th.buf.clear();
                th.pos = 0;
                self.workload.fill(th.process, th.local, &mut th.buf);
                if th.buf.is_empty() {
                    th.done = true;
                    return Ok(());
                }
            }
            let inv_mlp = th.inv_mlp;
            let pid = th.process as u32;
            // The common case, accesses back to back on resident pages, runs in this
            // loop without leaving it, and nothing in it calls a function
            // (`Machine::access_fast`); anything else (a fault, a sample, a map change,
            // a slice's end) goes below. The thread's clock lives in `clock` here:
            // `access_fast` takes and returns it (and writes it back for everyone
            // else), so no access waits on the previous one's store of it.
            let mut clock = self.machine.clocks[t];
            while let Some(&Op::Access {
                addr,
                write,
                gap_ns,
            }) = th.buf.get(th.pos)
            {
                // Compute that crosses the horizon ends the slice first, so timers due
                // before this access fire before it, not after.
                if gap_ns > 0 && clock + gap_ns as f64 * gap_w >= horizon {
                    self.machine.clocks[t] = clock + gap_ns as f64 * gap_w;
                    if let Op::Access { gap_ns, .. } = &mut th.buf[th.pos] {
                        *gap_ns = 0;
                    }
                    return Ok(());
                }
                if let Some(Op::Access { addr, .. }) = th.buf.get(th.pos + PREFETCH_DISTANCE) {
                    self.machine.prefetch(t, *addr);
                }
                let Some(after) = self
                    .machine
                    .access_fast(t, clock, addr, write, gap_ns, inv_mlp)
                else {
                    break;
                };
                th.pos += 1;
                clock = after;
                if self.machine.slice_over_at(clock, horizon, max_accesses) {
                    return Ok(());
                }
            }
            let Some(&op) = th.buf.get(th.pos) else {
                continue;
            };
            th.pos += 1;
            match op {
                // One the fast path declined; its gap was checked against the horizon
                // above.
                Op::Access {
                    addr,
                    write,
                    gap_ns,
                } => {
                    self.machine.access(
                        t,
                        clock,
                        addr,
                        write,
                        gap_ns,
                        inv_mlp,
                        self.policy.as_mut(),
                    )?;
                }
                Op::Mmap { addr, len, kind } => {
                    let now = self.machine.clocks[t];
                    self.do_mmap(pid, addr, len, kind, now)?;
                }
                Op::Munmap { addr, len } => {
                    if let Some(kind) = self.machine.munmap(pid, addr, len)? {
                        let now = self.machine.clocks[t];
                        self.machine.enter(now, Payer::Task(Pid(pid)));
                        let ev = Event::Munmap {
                            pid: Pid(pid),
                            start_vpn: addr >> PAGE_SHIFT,
                            nr_pages: len >> PAGE_SHIFT,
                            kind,
                        };
                        self.policy.on_event(&ev, &mut self.machine);
                    }
                }
            }
            if self.machine.slice_over(t, horizon, max_accesses) {
                return Ok(());
            }
        }
    }

    fn finish(&mut self, end_ns: f64) -> RunOutput {
        let w = self.machine.event_weight();
        let scaled = self.machine.counters.scaled(w);
        let c: &Counters = &scaled;
        let sim_seconds = end_ns / 1e9;
        let mem = c.mem_accesses();
        let traffic = mem as f64 * CACHE_LINE as f64 + c.migrated_bytes as f64;
        let rows = &self.series.rows;
        let fast_peak = rows.iter().map(|r| r.fast_used_pages).max().unwrap_or(0);
        let fast_mean = if rows.is_empty() {
            0.0
        } else {
            rows.iter().map(|r| r.fast_used_pages as f64).sum::<f64>() / rows.len() as f64
        };
        let tiers = self
            .machine
            .tiers
            .iter()
            .zip(&self.machine.tier_info)
            .enumerate()
            .map(|(i, (t, info))| TierSummary {
                name: info.name.clone(),
                capacity_pages: self.machine.full_capacity[i],
                used_pages: (t.used as f64 * w).round() as u64,
                peak_used_pages: if i == 0 {
                    fast_peak.max((t.used as f64 * w).round() as u64)
                } else {
                    (t.used as f64 * w).round() as u64
                },
                mem_accesses: c.mem_accesses_by_tier[i],
            })
            .collect();
        let (placement_precision, placement_recall, placement_f1) = self.placement.means();
        let summary = Summary {
            policy: self.labels.policy.clone(),
            workload: self.labels.workload.clone(),
            machine: self.machine_name.clone(),
            fast: self.fast.clone(),
            seed: self.labels.seed,
            policy_time_scale: self.sim.policy_time_scale,
            sample_rate: self.sim.sample_rate.to_string(),
            sample_strata: match self.machine.sampler.strata() {
                _ if !self.machine.sampler.by_mapping() => None,
                tierkit_core::SampleStrata::Page => Some("page".to_string()),
                _ => Some("mapping".to_string()),
            },
            time_sampled_pages: Some(self.machine.sampler.time_sampled().len() as u64)
                .filter(|&n| n > 0),
            sampled_compute: match &self.machine.sampler {
                s if s.keeps_all() => None,
                s if s.carries_compute() => Some(tierkit_core::SampledCompute::Carried),
                _ => Some(tierkit_core::SampledCompute::Kept),
            },
            sim_seconds,
            accesses: c.accesses,
            throughput_accesses_per_s: if sim_seconds > 0.0 {
                c.accesses as f64 / sim_seconds
            } else {
                0.0
            },
            mem_accesses: mem,
            fast_access_ratio: c.fast_access_ratio(),
            promoted_pages: c.promoted_pages,
            demoted_pages: c.demoted_pages,
            migrated_bytes: c.migrated_bytes,
            migration_traffic_share: if traffic > 0.0 {
                c.migrated_bytes as f64 / traffic
            } else {
                0.0
            },
            pingpong_pages: c.pingpong_pages,
            failed_migrations: c.failed_migrations,
            hint_faults: c.hint_faults,
            samples: c.samples,
            tiering_cpu_seconds: c.tiering_cpu_ns / 1e9,
            app_tiering_stall_seconds: c.app_tiering_stall_ns / 1e9,
            policy_metadata_bytes: self.policy.metadata_bytes(),
            footprint_bytes: self.footprint_bytes,
            fast_peak_used_pages: fast_peak,
            fast_mean_used_pages: fast_mean,
            tiers,
            counters: c.clone(),
            placement_precision,
            placement_recall,
            placement_f1,
            policy_stats: self
                .policy
                .stats()
                .into_iter()
                .map(|(k, v)| (k.to_string(), v))
                .collect(),
            coarse_sampling: (self.machine.coarse_mappings.0 > 0).then(|| CoarseSampling {
                mappings: self.machine.coarse_mappings.0,
                bytes: self.machine.coarse_mappings.1,
                stratum_bytes: self.machine.stratum_bytes(),
            }),
            // One process's pages are the tiers' rows already.
            processes: if self.process_names.len() > 1 {
                self.process_names
                    .iter()
                    .zip(self.machine.pages_by_process())
                    .map(|(name, (resident_pages, fast_pages))| ProcessSummary {
                        name: name.clone(),
                        resident_pages,
                        fast_pages,
                    })
                    .collect()
            } else {
                Vec::new()
            },
        };
        RunOutput {
            summary,
            series: std::mem::take(&mut self.series),
            placement: std::mem::take(&mut self.placement),
        }
    }
}
