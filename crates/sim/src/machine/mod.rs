//! The simulated machine: tiers, address spaces, the LLC, per-thread clocks, the
//! mechanisms a policy uses, and the mover that carries out its migrations.
//!
//! The machine is the only owner of page state; its fields are the engine's
//! (`pub(crate)`), and tests read it through accessors ([`Machine::used_pages`],
//! [`Mechanisms`]). One file per job:
//! - this file: the state, its construction, the payer and timers, `mmap`/`munmap`
//!   and the invariants;
//! - `access.rs`: the hot path, [`Machine::access`]: translate, allocate on first
//!   touch, deliver a hinting fault if the page is armed, set the accessed bit, filter
//!   through the LLC, charge the serving tier's latency (plus bandwidth queueing) to
//!   the thread, and count samples;
//! - `mechanisms.rs`: [`Mechanisms`] for policies (observation and requests);
//! - `mover.rs`: carrying out a migration (room, page tables, counters, bandwidth,
//!   copy cost);
//! - `placement.rs`: the per-epoch measurement of placement against the hot set.

use crate::config::{Costs, ResolvedTiers, ThpMode, TieringCpus};
use crate::error::SimError;
use crate::llc::{Llc, LlcResult};
use crate::metrics::Counters;
use crate::space::*;
use rand::{RngCore, SeedableRng};
use rand_xoshiro::Xoshiro256PlusPlus;
use std::cmp::Reverse;
use std::collections::BinaryHeap;
use tierkit_core::*;

/// Who pays for the mechanism calls being made right now.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Payer {
    /// An application thread (global thread index), e.g. inside its hinting fault.
    Thread(usize),
    /// Task-context work for a process, spread over its threads.
    Task(Pid),
    /// A tiering thread.
    Kthread,
}

/// Runtime state of one tier.
#[derive(Debug, Clone)]
pub struct TierState {
    /// Capacity in pages.
    pub capacity: u64,
    /// Pages in use.
    pub used: u64,
    /// Watermarks.
    pub wm: Watermarks,
    /// Time until which the tier's bandwidth is booked, ns. A request arriving earlier
    /// waits: this is the queueing that makes latency rise as demand nears bandwidth.
    busy_until: f64,
    /// The latest time a request was booked at, ns. Threads run in slices and reach
    /// the tier out of time order; see [`book_bandwidth`].
    last_arrival: f64,
    /// Transfer time per byte at peak bandwidth, ns.
    ns_per_byte: f64,
    load_ns: f64,
    store_ns: f64,
    /// Last simulated ms a LowWatermark event was raised (rate limit).
    last_low_event_ms: Option<u64>,
}

impl TierState {
    /// Free pages.
    #[inline]
    pub fn free(&self) -> u64 {
        self.capacity - self.used
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
struct TimerEntry {
    at: Nanos,
    seq: u64,
    id: TimerId,
    task: Option<u32>,
}

/// Linux's watermarks for a tier of `capacity` pages on a machine of `total` pages:
/// `min_free_kbytes = 4·sqrt(lowmem KiB)` clamped to [128 KiB, 256 MiB], shared among
/// nodes by size, then `low = min + max(min/4, 0.1%·managed)` and `high = low + the
/// same step` (`watermark_scale_factor` = 10). See `__setup_per_zone_wmarks`.
pub fn linux_watermarks(capacity: u64, total: u64) -> Watermarks {
    let total_kib = (total * PAGE_SIZE / 1024) as f64;
    let min_free_kib = (4.0 * total_kib.sqrt()).clamp(128.0, 262_144.0);
    let min_total_pages = min_free_kib * 1024.0 / PAGE_SIZE as f64;
    let min = (min_total_pages * capacity as f64 / total.max(1) as f64) as u64;
    let step = (min / 4).max(capacity * 10 / 10_000);
    Watermarks::pages(min, min + step, min + 2 * step)
}

/// The smallest step between a sampled tier's watermarks, in (sampled) pages.
///
/// Linux reclaims up to `high + step` (`WMARK_PROMO`, and `high` itself is
/// `low + step`) and promotes a page only while free memory stays above
/// `high + 1`; kswapd stops at the first whole page past its target, so with a step
/// under a page it can stop where every promotion still fails, and nothing is ever
/// promoted. On a real zone the step is at least 0.1% of it (thousands of pages);
/// shrunk with a small sampled tier it can fall under a page. Two pages is the floor
/// the validation runs were made with (docs/sampling.md, "Watermarks of a small
/// sampled tier"); above it a step keeps its fraction.
pub const MIN_SAMPLED_WATERMARK_STEP: f64 = 2.0;

/// Watermarks `w` of a full tier on the machine sampled at `rate`: each shrinks with
/// it, kept fractional (a band of 1.8 sampled pages stays 1.8, not 1 or 2), but
/// `low` stays at least [`MIN_SAMPLED_WATERMARK_STEP`] above `min` and `high` as far
/// above `low`.
pub fn sampled_watermarks(w: Watermarks, rate: f64) -> Watermarks {
    let min = w.min * rate;
    let low = (w.low * rate).max(min + MIN_SAMPLED_WATERMARK_STEP);
    let high = (w.high * rate).max(low + MIN_SAMPLED_WATERMARK_STEP);
    Watermarks { min, low, high }
}

/// `pages` of the full machine on the machine sampled at `rate`, to the nearest page.
fn shrink_pages(pages: u64, rate: f64) -> u64 {
    (pages as f64 * rate).round() as u64
}

/// The machine.
pub struct Machine {
    /// Tier descriptions handed to policies.
    pub(crate) tier_info: Vec<TierInfo>,
    /// Tier runtime state.
    pub(crate) tiers: Vec<TierState>,
    /// One address space per process.
    pub(crate) spaces: Vec<AddressSpace>,
    /// Per global thread: its virtual clock, ns.
    pub(crate) clocks: Vec<f64>,
    /// Per global thread: its process.
    pub(crate) thread_pid: Vec<u32>,
    /// Per process: its global thread indices.
    pub(crate) proc_threads: Vec<Vec<usize>>,
    /// Counters.
    pub(crate) counters: Counters,
    llc: Option<Llc>,
    costs: Costs,
    thp: bool,
    shared_tiering_cpus: bool,
    /// Stall owed by every thread for tiering threads sharing their CPUs, ns.
    pub(crate) shared_stall_pending: f64,
    /// Stall owed by every running thread to a busy-polling tiering thread on the
    /// application's CPUs ([`tierkit_core::Mechanisms::stall_app_threads`]), machine
    /// ns, settled with the above.
    pub(crate) shared_stall_per_thread_pending: f64,
    sample_period: [u64; 2],
    sample_countdown: [u64; 2],
    timers: BinaryHeap<Reverse<TimerEntry>>,
    timer_seq: u64,
    now: f64,
    payer: Payer,
    rng: Xoshiro256PlusPlus,
    pingpong_window_ms: u64,
    /// Policy-visible time runs this many times faster than machine time.
    policy_time_scale: f64,
    /// Earliest deadline scheduled since the engine last looked (infinity if none):
    /// a timer set inside an access must end the running thread's slice early.
    pub(crate) earliest_new_timer: f64,
    /// Deliver PageAlloc events.
    pub(crate) page_alloc_events: bool,
    /// What the policy declared it observes ([`Policy::requirements`]); debug builds
    /// check every observation against it. None (a machine built without a policy,
    /// in tests): unchecked.
    pub(crate) declared: Option<Requirements>,
    ns_per_copy_byte: f64,
    /// Events each simulated event stands for: `1 / sample_rate` (1 when exact). Scales
    /// every per-event time and cost; see `docs/sampling.md`.
    event_weight: f64,
    /// What a thread's compute gap is multiplied by: the event weight, unless the
    /// stream carries its dropped accesses' compute (`sim.sampled_compute`), whose
    /// kept gaps are already the compute of everything the thread did since its
    /// last kept access; 1 when exact.
    gap_weight: f64,
    /// Capacity of each tier on the full (unsampled) machine, pages, for reports.
    pub(crate) full_capacity: Vec<u64>,
    /// Mappings smaller than one sampling stratum (count, bytes): see
    /// [`crate::metrics::CoarseSampling`].
    pub(crate) coarse_mappings: (u64, u64),
    /// Size of each placement epoch's hot set, pages: the compared machine's fast tier
    /// (`ResolvedTiers::hot_set_pages`, shrunk when sampled).
    hot_set_pages: u64,
    /// The pages a placement epoch found accessed, kept from one epoch to the next so
    /// that each epoch does not ask the host for fresh (zeroed) memory.
    pub(crate) placement_scratch: placement::EpochScratch,
    /// The regions a sampled run simulates; scans skip the others.
    pub(crate) sampler: RegionSampler,
}

/// Settings the machine needs beyond tiers.
pub struct MachineParams {
    /// Resolved tiers.
    pub tiers: ResolvedTiers,
    /// THP mode.
    pub thp: ThpMode,
    /// LLC (size bytes, ways) or none.
    pub llc: Option<(u64, u32)>,
    /// Costs.
    pub costs: Costs,
    /// Tiering CPU placement.
    pub tiering_cpus: TieringCpus,
    /// Seed for [`Mechanisms::random`].
    pub seed: u64,
    /// Ping-pong window, ms.
    pub pingpong_window_ms: u64,
    /// Threads per process.
    pub threads_per_process: Vec<u32>,
    /// Policy-visible time runs this many times faster than machine time
    /// (`sim.policy_time_scale`).
    pub policy_time_scale: f64,
    /// The share of the machine simulated (`sim.sample_rate`); capacities,
    /// watermarks and bandwidths given here are those of the full machine.
    pub space_scale: SpaceScale,
    /// The regions simulated (all when exact); must match the workload's sampling.
    pub sampler: RegionSampler,
}

/// The later of two clocks. `f64::max` also orders NaN, which no clock is, with four
/// more instructions on the booking's dependency chain: 3.5% of the bench with the LLC
/// off once the engine's loop had no call in it (docs/performance.md).
#[inline(always)]
fn later(a: f64, b: f64) -> f64 {
    if b > a {
        b
    } else {
        a
    }
}

/// Book `bytes` of transfer on tier `t`'s bandwidth starting no earlier than `now`;
/// returns the wait, ns.
#[inline]
fn book_bandwidth(t: &mut TierState, now: f64, bytes: f64) -> f64 {
    // The engine runs each thread for a slice before the next, so requests reach the
    // tier out of time order: a lagging thread's request at `now` may come after a
    // leading thread's at a later time. It waits for the backlog the tier has, not
    // for the leader's clock, so its wait is measured from the latest arrival. (Waiting
    // until `busy_until` itself made threads queue behind each other's future
    // requests: 8 pmbench threads on optane ran 5.26 s exactly where their latency
    // bound is ~2 s, and 5.36 s at 1/64; docs/machine.md.) In time order (`now` at or
    // after every earlier arrival, as in every single-threaded run) this is the plain
    // queue.
    //
    // `busy_until` is never below `last_arrival` (each booking ends after its
    // arrival), so the start is `max(now, busy_until)` as in the plain queue, and the
    // latest arrival only enters the wait: off the booking's dependency chain, which
    // bounds the simulator's speed (docs/performance.md).
    let start = later(now, t.busy_until);
    let arrival = later(now, t.last_arrival);
    t.last_arrival = arrival;
    t.busy_until = start + bytes * t.ns_per_byte;
    start - arrival
}

impl Machine {
    /// Build an empty machine.
    pub fn new(p: MachineParams) -> Machine {
        let total: u64 = p.tiers.capacity_pages.iter().sum();
        let rate = p.space_scale.rate();
        let event_weight = 1.0 / rate;

        let capacity_pages: Vec<u64> = p
            .tiers
            .capacity_pages
            .iter()
            .enumerate()
            .map(|(i, &cap)| {
                if p.space_scale.is_exact() {
                    cap
                } else if p.tiers.holds_footprint.get(i).copied().unwrap_or(false) {
                    // A tier sized to hold the whole footprint (the last tier, an
                    // unbounded fast tier) must still hold it when sampled; the sampled
                    // share of a footprint varies around `rate`, so leave room to spare.
                    (cap as f64 * rate).ceil() as u64 * 2 + 2 * SUBPAGES_PER_HUGE
                } else {
                    shrink_pages(cap, rate).max(1)
                }
            })
            .collect();
        let tiers: Vec<TierState> = p
            .tiers
            .specs
            .iter()
            .zip(&p.tiers.capacity_pages)
            .zip(&capacity_pages)
            .map(|((s, &full_cap), &cap)| TierState {
                capacity: cap,
                used: 0,
                wm: {
                    // Watermarks come from the full machine (min_free_kbytes grows
                    // with the square root of memory), then shrink with it like every
                    // other extensive quantity.
                    let w = linux_watermarks(full_cap, total);
                    if p.space_scale.is_exact() {
                        w
                    } else {
                        sampled_watermarks(w, rate)
                    }
                },
                busy_until: 0.0,
                last_arrival: 0.0,
                // Bandwidth shrinks with the machine: a sampled line transfer occupies
                // the tier as long as the 1/rate transfers it stands for.
                ns_per_byte: event_weight / s.bandwidth_gbps,
                load_ns: s.load_ns,
                store_ns: s.store_ns,
                last_low_event_ms: None,
            })
            .collect();
        let tier_info = p
            .tiers
            .specs
            .iter()
            .zip(&capacity_pages)
            .enumerate()
            .map(|(i, (s, &cap))| TierInfo {
                id: TierId(i as u8),
                name: s.name.clone(),
                capacity_pages: cap,
                load_ns: s.load_ns,
                store_ns: s.store_ns,
                bandwidth_bytes_per_s: s.bandwidth_gbps * 1e9 * rate,
            })
            .collect();
        let mut clocks = Vec::new();
        let mut thread_pid = Vec::new();
        let mut proc_threads = Vec::new();
        for (pid, &n) in p.threads_per_process.iter().enumerate() {
            let mut mine = Vec::new();
            for _ in 0..n {
                mine.push(clocks.len());
                clocks.push(0.0);
                thread_pid.push(pid as u32);
            }
            proc_threads.push(mine);
        }
        let counters = Counters {
            mem_accesses_by_tier: vec![0; tiers.len()],
            ..Counters::default()
        };
        Machine {
            tier_info,
            spaces: vec![AddressSpace::default(); p.threads_per_process.len()],
            tiers,
            clocks,
            thread_pid,
            proc_threads,
            counters,
            llc: p.llc.map(|(size, ways)| Llc::new(size, ways)),
            ns_per_copy_byte: 1.0 / p.costs.migrate_copy_gbps,
            event_weight,
            gap_weight: if p.sampler.carries_compute() {
                1.0
            } else {
                event_weight
            },
            full_capacity: p.tiers.capacity_pages.clone(),
            coarse_mappings: (0, 0),
            hot_set_pages: if p.space_scale.is_exact() {
                p.tiers.hot_set_pages
            } else {
                shrink_pages(p.tiers.hot_set_pages, rate).max(1)
            },
            placement_scratch: placement::EpochScratch::default(),
            sampler: p.sampler,
            costs: p.costs,
            thp: p.thp == ThpMode::Always,
            shared_tiering_cpus: p.tiering_cpus == TieringCpus::Shared,
            shared_stall_pending: 0.0,
            shared_stall_per_thread_pending: 0.0,
            sample_period: [0; 2],
            sample_countdown: [0; 2],
            timers: BinaryHeap::new(),
            timer_seq: 0,
            now: 0.0,
            payer: Payer::Kthread,
            rng: Xoshiro256PlusPlus::seed_from_u64(p.seed ^ 0x0074_6965_726b_6974),
            pingpong_window_ms: p.pingpong_window_ms,
            policy_time_scale: p.policy_time_scale,
            earliest_new_timer: f64::INFINITY,
            page_alloc_events: false,
            declared: None,
        }
    }

    /// Machine time (ns, fractional) as the policy sees it.
    #[inline]
    fn policy_time(&self, t: f64) -> Nanos {
        (t * self.policy_time_scale) as Nanos
    }

    /// Set the context for the policy code about to run.
    pub fn enter(&mut self, now: f64, payer: Payer) {
        self.now = now;
        self.payer = payer;
    }

    /// Whether thread `tid`'s slice ends here: its clock reached `horizon`, the run
    /// its access budget, or an operation set a timer due before `horizon`.
    #[inline]
    pub fn slice_over(&self, tid: usize, horizon: f64, max_accesses: u64) -> bool {
        self.slice_over_at(self.clocks[tid], horizon, max_accesses)
    }

    /// [`Machine::slice_over`] for a thread whose clock the caller holds.
    #[inline]
    pub fn slice_over_at(&self, clock: f64, horizon: f64, max_accesses: u64) -> bool {
        clock >= horizon
            || self.counters.accesses >= max_accesses
            || self.earliest_new_timer < horizon
    }

    /// Debug builds: the policy uses an observation it declared in its
    /// `Requirements` (live mode decides what runs where from those declarations).
    #[inline]
    fn observes(&self, declared: fn(&Requirements) -> bool, did: &str, flag: &str) {
        debug_assert!(
            self.declared.is_none_or(|r| declared(&r)),
            "the policy {did} but its Policy::requirements() does not declare `{flag}`"
        );
        let _ = (declared, did, flag);
    }

    /// Events each simulated event stands for (`1 / sample_rate`).
    #[inline]
    pub fn event_weight(&self) -> f64 {
        self.event_weight
    }

    /// What a compute gap of the stream is multiplied by (see `gap_weight`).
    #[inline]
    pub fn gap_weight(&self) -> f64 {
        self.gap_weight
    }

    /// Charge the cost of one simulated event that stands for `event_weight` events
    /// (a fault, a sample, a migration, an accessed-bit test of a sampled page).
    #[inline]
    fn charge_event(&mut self, ns: f64) {
        self.charge(ns * self.event_weight);
    }

    /// Run `f` with the tiering kthread as the payer of whatever it charges, then
    /// restore the current payer (async migrations, `Mechanisms::as_kthread`).
    pub(super) fn as_kthread_payer<R>(&mut self, f: impl FnOnce(&mut Machine) -> R) -> R {
        let saved = std::mem::replace(&mut self.payer, Payer::Kthread);
        let r = f(self);
        self.payer = saved;
        r
    }

    /// Charge `ns` of tiering work to the current payer.
    pub fn charge(&mut self, ns: f64) {
        self.counters.tiering_cpu_ns += ns;
        match self.payer {
            Payer::Thread(t) => {
                self.clocks[t] += ns;
                self.counters.app_tiering_stall_ns += ns;
            }
            Payer::Task(pid) => {
                let threads = &self.proc_threads[pid.index()];
                let share = ns / threads.len().max(1) as f64;
                for &t in threads {
                    self.clocks[t] += share;
                }
                self.counters.app_tiering_stall_ns += ns;
            }
            Payer::Kthread => {
                if self.shared_tiering_cpus {
                    self.shared_stall_pending += ns;
                }
            }
        }
    }

    /// Time of the earliest pending timer.
    pub fn next_timer_at(&self) -> Option<Nanos> {
        self.timers.peek().map(|Reverse(t)| t.at)
    }

    /// Pop the earliest timer: (deadline, id, payer).
    pub fn pop_timer(&mut self) -> Option<(Nanos, TimerId, Payer)> {
        self.timers.pop().map(|Reverse(t)| {
            let payer = t.task.map_or(Payer::Kthread, |p| Payer::Task(Pid(p)));
            (t.at, t.id, payer)
        })
    }

    fn has_room(&self, tier: usize, n: u64) -> bool {
        let t = &self.tiers[tier];
        let last = tier + 1 == self.tiers.len();
        t.free() >= n && (last || (t.free() - n) as f64 >= t.wm.min)
    }

    /// Book `bytes` of transfer on `tier`'s bandwidth starting no earlier than `now`.
    #[inline]
    fn occupy_bandwidth(&mut self, tier: usize, now: f64, bytes: f64) -> f64 {
        book_bandwidth(&mut self.tiers[tier], now, bytes)
    }

    /// Map `[addr, addr+len)` in process `pid`.
    pub fn mmap(&mut self, pid: u32, addr: u64, len: u64, kind: VmaKind) -> Result<Vma, SimError> {
        if !addr.is_multiple_of(PAGE_SIZE) || !len.is_multiple_of(PAGE_SIZE) || len == 0 {
            return Err(SimError::BadMapping {
                pid,
                why: format!("mmap({addr:#x}, {len}) is not page aligned or is empty"),
            });
        }
        let vma = Vma {
            start_vpn: addr >> PAGE_SHIFT,
            nr_pages: len >> PAGE_SHIFT,
            kind,
        };
        let strata = self.sampler.strata_of(vma.start_vpn, vma.nr_pages);
        self.spaces[pid as usize]
            .insert(vma, strata, self.sampler.keeps_one_in())
            .map_err(|why| SimError::BadMapping { pid, why })?;
        self.placement_scratch.note_vmas_changed();
        // Sampled by mapping, no mapping is kept or dropped whole.
        if len < self.stratum_bytes() && !self.sampler.by_mapping() {
            self.coarse_mappings.0 += 1;
            self.coarse_mappings.1 += len;
        }
        Ok(vma)
    }

    /// Bytes of one sampling stratum: the N = 1/rate regions of which the sampler
    /// keeps one; 0 when the run is exact (nothing is sampled).
    pub fn stratum_bytes(&self) -> u64 {
        if self.event_weight > 1.0 {
            self.event_weight.round() as u64 * HUGE_PAGE_SIZE
        } else {
            0
        }
    }

    /// Unmap a range; returns the kind of the first VMA touched, if any.
    pub fn munmap(&mut self, pid: u32, addr: u64, len: u64) -> Result<Option<VmaKind>, SimError> {
        if !addr.is_multiple_of(PAGE_SIZE) || !len.is_multiple_of(PAGE_SIZE) {
            return Err(SimError::BadMapping {
                pid,
                why: format!("munmap({addr:#x}, {len}) is not page aligned"),
            });
        }
        self.placement_scratch.note_vmas_changed();
        let tiers = &mut self.tiers;
        let kinds = self.spaces[pid as usize].unmap(addr >> PAGE_SHIFT, len >> PAGE_SHIFT, |t| {
            tiers[t as usize].used -= 1;
        });
        Ok(kinds.first().copied())
    }

    /// Pages in use on `tier` (base pages; a huge page counts 512). Read-only view for
    /// tests and reports: the engine owns the tier state.
    pub fn used_pages(&self, tier: TierId) -> u64 {
        self.tiers[tier.index()].used
    }

    /// Capacity of `tier` on this (possibly sampled) machine, pages.
    pub fn capacity_pages(&self, tier: TierId) -> u64 {
        self.tiers[tier.index()].capacity
    }

    /// Pages in use over all tiers.
    pub fn used_pages_total(&self) -> u64 {
        self.tiers.iter().map(|t| t.used).sum()
    }

    /// Resident pages over all processes (must equal [`Machine::used_pages_total`]).
    pub fn resident_pages_total(&self) -> u64 {
        self.spaces.iter().map(|s| s.rss_pages).sum()
    }

    /// Check every invariant; used by tests and, in debug builds, at the end of a run.
    pub fn check_invariants(&self) -> Result<(), String> {
        let mut per_tier = vec![0u64; self.tiers.len()];
        for (pid, s) in self.spaces.iter().enumerate() {
            let mut rss = 0;
            for v in &s.vmas {
                if v.pages.len() as u64 != v.vma.nr_pages {
                    return Err(format!("pid {pid}: vma page array length mismatch"));
                }
                let mut i = 0;
                while i < v.pages.len() {
                    let p = v.pages[i];
                    if p.huge() {
                        let vpn = v.vma.start_vpn + i as u64;
                        let head = huge_head(vpn);
                        if head < v.vma.start_vpn || head + SUBPAGES_PER_HUGE > v.vma.end_vpn() {
                            return Err(format!("pid {pid}: huge page {head:#x} crosses its vma"));
                        }
                        let h = v.pages[(head - v.vma.start_vpn) as usize];
                        if !h.huge() || h.tier() != p.tier() {
                            return Err(format!(
                                "pid {pid}: huge page {head:#x} split across tiers"
                            ));
                        }
                    }
                    if p.present() {
                        if p.tier() as usize >= self.tiers.len() {
                            return Err(format!("pid {pid}: page in unknown tier {}", p.tier()));
                        }
                        per_tier[p.tier() as usize] += 1;
                        rss += 1;
                    }
                    i += 1;
                }
            }
            if rss != s.rss_pages {
                return Err(format!(
                    "pid {pid}: rss {} but {} pages resident",
                    s.rss_pages, rss
                ));
            }
        }
        for (i, (t, &n)) in self.tiers.iter().zip(&per_tier).enumerate() {
            if t.used != n {
                return Err(format!(
                    "tier {i}: used {} but {} pages are in it",
                    t.used, n
                ));
            }
            if t.used > t.capacity {
                return Err(format!(
                    "tier {i}: {} pages used over capacity {}",
                    t.used, t.capacity
                ));
            }
        }
        Ok(())
    }
}

mod access;
mod mechanisms;
mod mover;
mod placement;

pub use placement::EpochPlacement;
