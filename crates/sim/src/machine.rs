//! The simulated machine: tiers, address spaces, the LLC, per-thread clocks, the
//! mechanisms a policy uses, and the mover that carries out its migrations.
//!
//! The machine is the only owner of page state. [`Machine::access`] is the hot path:
//! translate, allocate on first touch, deliver a hinting fault if the page is armed,
//! set the accessed bit, filter through the LLC, charge the serving tier's latency
//! (plus bandwidth queueing) to the thread, and count samples.

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
    Watermarks {
        min,
        low: min + step,
        high: min + 2 * step,
    }
}

/// The machine.
pub struct Machine {
    /// Tier descriptions handed to policies.
    pub tier_info: Vec<TierInfo>,
    /// Tier runtime state.
    pub tiers: Vec<TierState>,
    /// One address space per process.
    pub spaces: Vec<AddressSpace>,
    /// Per global thread: its virtual clock, ns.
    pub clocks: Vec<f64>,
    /// Per global thread: its process.
    pub thread_pid: Vec<u32>,
    /// Per process: its global thread indices.
    pub proc_threads: Vec<Vec<usize>>,
    /// Counters.
    pub counters: Counters,
    llc: Option<Llc>,
    costs: Costs,
    thp: bool,
    shared_tiering_cpus: bool,
    /// Stall owed by every thread for tiering threads sharing their CPUs, ns.
    pub shared_stall_pending: f64,
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
    pub earliest_new_timer: f64,
    /// Deliver PageAlloc events.
    pub page_alloc_events: bool,
    /// What the policy declared it observes ([`Policy::requirements`]); debug builds
    /// check every observation against it. None (a machine built without a policy,
    /// in tests): unchecked.
    pub declared: Option<Requirements>,
    ns_per_copy_byte: f64,
    /// Events each simulated event stands for: `1 / sample_rate` (1 when exact). Scales
    /// every per-event time and cost; see `docs/sampling.md`.
    event_weight: f64,
    /// Capacity of each tier on the full (unsampled) machine, pages, for reports.
    pub full_capacity: Vec<u64>,
    /// Size of each placement epoch's hot set, pages: the compared machine's fast tier
    /// (`ResolvedTiers::hot_set_pages`, shrunk when sampled).
    hot_set_pages: u64,
    /// The regions a sampled run simulates; scans skip the others.
    sampler: RegionSampler,
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

/// Book `bytes` of transfer on tier `t`'s bandwidth starting no earlier than `now`;
/// returns the wait, ns.
#[inline]
fn book_bandwidth(t: &mut TierState, now: f64, bytes: f64) -> f64 {
    let start = now.max(t.busy_until);
    t.busy_until = start + bytes * t.ns_per_byte;
    start - now
}

impl Machine {
    /// Build an empty machine.
    pub fn new(p: MachineParams) -> Machine {
        let total: u64 = p.tiers.capacity_pages.iter().sum();
        let rate = p.space_scale.rate();
        let event_weight = 1.0 / rate;

        // Watermarks come from the full machine (min_free_kbytes grows with the square
        // root of memory), then shrink with it like every other extensive quantity.
        let shrink = |pages: u64| (pages as f64 * rate).round() as u64;
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
                    shrink(cap).max(1)
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
                    let w = linux_watermarks(full_cap, total);
                    if p.space_scale.is_exact() {
                        w
                    } else {
                        Watermarks {
                            min: shrink(w.min),
                            low: shrink(w.low),
                            high: shrink(w.high),
                        }
                    }
                },
                busy_until: 0.0,
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
            full_capacity: p.tiers.capacity_pages.clone(),
            hot_set_pages: if p.space_scale.is_exact() {
                p.tiers.hot_set_pages
            } else {
                shrink(p.tiers.hot_set_pages).max(1)
            },
            sampler: p.sampler,
            costs: p.costs,
            thp: p.thp == ThpMode::Always,
            shared_tiering_cpus: p.tiering_cpus == TieringCpus::Shared,
            shared_stall_pending: 0.0,
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

    /// Charge the cost of one simulated event that stands for `event_weight` events
    /// (a fault, a sample, a migration, an accessed-bit test of a sampled page).
    #[inline]
    fn charge_event(&mut self, ns: f64) {
        self.charge(ns * self.event_weight);
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
        t.free() >= n && (last || t.free() - n >= t.wm.min)
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
        self.spaces[pid as usize]
            .insert(vma)
            .map_err(|why| SimError::BadMapping { pid, why })?;
        Ok(vma)
    }

    /// Unmap a range; returns the kind of the first VMA touched, if any.
    pub fn munmap(&mut self, pid: u32, addr: u64, len: u64) -> Result<Option<VmaKind>, SimError> {
        if !addr.is_multiple_of(PAGE_SIZE) || !len.is_multiple_of(PAGE_SIZE) {
            return Err(SimError::BadMapping {
                pid,
                why: format!("munmap({addr:#x}, {len}) is not page aligned"),
            });
        }
        let tiers = &mut self.tiers;
        let kinds = self.spaces[pid as usize].unmap(addr >> PAGE_SHIFT, len >> PAGE_SHIFT, |t| {
            tiers[t as usize].used -= 1;
        });
        Ok(kinds.first().copied())
    }

    /// Allocate the page unit holding `vpn` on first touch: the fastest tier with free
    /// pages above its min watermark (Linux's zonelist fallback). Returns (tier, huge).
    fn allocate(&mut self, pid: u32, vi: usize, vpn: Vpn) -> Result<(u8, bool), SimError> {
        let v = &self.spaces[pid as usize].vmas[vi];
        // A 2 MiB range gets a huge page only if none of it is resident yet (after a
        // split, the remaining base pages keep the range on PTEs, as in Linux).
        let huge = self.thp && v.huge_eligible(vpn) && {
            let head = (huge_head(vpn) - v.vma.start_vpn) as usize;
            v.pages[head..head + SUBPAGES_PER_HUGE as usize]
                .iter()
                .all(|p| !p.present())
        };
        let room = |m: &Self, n: u64| (0..m.tiers.len()).find(|&t| m.has_room(t, n));
        // A huge page that fits in no tier falls back to a base page, as Linux's THP
        // fault does when the huge allocation fails.
        let huge_tier = if huge {
            room(self, SUBPAGES_PER_HUGE)
        } else {
            None
        };
        let (huge, n, tier) = match huge_tier {
            Some(t) => (true, SUBPAGES_PER_HUGE, Some(t)),
            None => (false, 1, room(self, 1)),
        };
        let Some(tier) = tier else {
            return Err(SimError::OutOfMemory {
                pid,
                capacities: self
                    .tiers
                    .iter()
                    .map(|t| t.capacity.to_string())
                    .collect::<Vec<_>>()
                    .join("/"),
            });
        };
        let v = &mut self.spaces[pid as usize].vmas[vi];
        if huge {
            let head = (huge_head(vpn) - v.vma.start_vpn) as usize;
            for p in &mut v.pages[head..head + n as usize] {
                debug_assert!(!p.present());
                *p = PageState {
                    tier: tier as u8,
                    flags: F_HUGE,
                    ..PageState::EMPTY
                };
            }
        } else {
            let i = (vpn - v.vma.start_vpn) as usize;
            v.pages[i] = PageState {
                tier: tier as u8,
                ..PageState::EMPTY
            };
        }
        self.spaces[pid as usize].rss_pages += n;
        self.tiers[tier].used += n;
        self.counters.allocated_pages += n;
        Ok((tier as u8, huge))
    }

    /// Tiers (other than the last) whose free pages fell below `low` and that may
    /// raise a LowWatermark event now (at most one per ms per tier).
    fn low_watermark_tiers(&mut self, upto: usize) -> Vec<TierId> {
        let now_ms = self.now as u64 / NS_PER_MS;
        let last = self.tiers.len() - 1;
        let mut out = Vec::new();
        for (i, t) in self
            .tiers
            .iter_mut()
            .enumerate()
            .take(upto.min(last - 1) + 1)
        {
            if t.free() < t.wm.low && t.last_low_event_ms != Some(now_ms) {
                t.last_low_event_ms = Some(now_ms);
                out.push(TierId(i as u8));
            }
        }
        out
    }

    /// Ask the host CPU to start loading the page state and LLC set that an access of
    /// thread `tid` to `addr` will touch. The engine calls this a few operations
    /// ahead: random accesses over gigabytes of simulated memory otherwise stall on a
    /// host cache miss for every simulated access. Only a hint; it changes nothing.
    #[inline]
    pub fn prefetch(&self, tid: usize, addr: u64) {
        let pid = self.thread_pid[tid] as usize;
        let vpn = addr >> PAGE_SHIFT;
        if let Some(v) = self.spaces[pid].cached_vma() {
            if v.vma.contains(vpn) {
                crate::prefetch::prefetch(&v.pages[(vpn - v.vma.start_vpn) as usize]);
            }
        }
        if let Some(llc) = &self.llc {
            llc.prefetch(pid as u32, addr);
        }
    }

    /// One access by global thread `tid` whose memory-level parallelism is
    /// `1 / inv_mlp`, its clock `clock` when it starts; returns the clock after it.
    /// The hot path: on the common path (page resident, not armed) the page state is
    /// looked up once and updated in place.
    #[inline]
    #[allow(clippy::too_many_arguments)]
    pub fn access(
        &mut self,
        tid: usize,
        clock: f64,
        addr: u64,
        write: bool,
        gap_ns: u32,
        inv_mlp: f64,
        policy: &mut dyn Policy,
    ) -> Result<f64, SimError> {
        let pid = self.thread_pid[tid];
        let w = self.event_weight;
        // The thread's clock comes in and goes out in a register (the engine's loop
        // keeps it there from one access to the next, off the store-to-load path); it
        // is written back before anything else (the fault path, a policy) can read it.
        let mut clock = clock + gap_ns as f64 * w;
        self.counters.accesses += 1;
        let vpn = addr >> PAGE_SHIFT;
        let space = &mut self.spaces[pid as usize];
        let Some(mut vi) = space.find(vpn) else {
            self.clocks[tid] = clock;
            return Err(SimError::Unmapped { pid, addr });
        };
        // Common path: resident and not armed; anything else takes the slow path,
        // which faults the page in and delivers the hinting fault, then looks again.
        let common = {
            let v = &space.vmas[vi];
            let p = &v.pages[(vpn - v.vma.start_vpn) as usize];
            p.present() && v.pages[v.unit_index(vpn)].flags & F_ARMED == 0
        };
        if !common {
            self.clocks[tid] = clock;
            vi = self.fault_in(tid, pid, vi, vpn, addr, write, policy)?;
            clock = self.clocks[tid];
        }
        // From here on one borrow of the VMA's pages serves the whole access; the
        // tiers and the LLC are other fields of the machine.
        let v = &mut self.spaces[pid as usize].vmas[vi];
        let exact = (vpn - v.vma.start_vpn) as usize;
        let ui = v.unit_index(vpn);
        let pages = &mut v.pages;
        let unit = &mut pages[ui];
        unit.flags |= F_ACCESSED;
        let tier = unit.tier;
        let huge = unit.huge();
        let page = &mut pages[exact];
        page.flags |= if write { F_WRITTEN } else { 0 };
        let miss = match &mut self.llc {
            None => true,
            Some(llc) => match llc.access(pid, addr, write, tier) {
                LlcResult::Hit => false,
                LlcResult::Miss { writeback } => {
                    if let Some(wt) = writeback {
                        book_bandwidth(&mut self.tiers[wt as usize], clock, CACHE_LINE as f64);
                    }
                    true
                }
            },
        };
        let latency = if miss {
            page.epoch_accesses = page.epoch_accesses.saturating_add(1);
            self.counters.mem_accesses_by_tier[tier as usize] += 1;
            // The wait is already in machine time: on a sampled machine the tier's
            // bandwidth is shrunk, so one line occupies it for 1/rate line times.
            let t = &mut self.tiers[tier as usize];
            let wait = book_bandwidth(t, clock, CACHE_LINE as f64);
            (if write { t.store_ns } else { t.load_ns }) * w + wait
        } else {
            self.counters.llc_hits += 1;
            self.costs.llc_hit_ns * w
        };
        clock += latency * inv_mlp;
        self.clocks[tid] = clock;
        // PEBS-like counters: LLC load misses, and all stores.
        let k = write as usize;
        if self.sample_period[k] != 0 && (write || miss) {
            self.sample_countdown[k] -= 1;
            if self.sample_countdown[k] == 0 {
                self.sample_countdown[k] = self.sample_period[k];
                let kind = if write {
                    SampleKind::Store
                } else {
                    SampleKind::LlcLoadMiss
                };
                self.deliver_sample(tid, pid, vpn, tier, huge, kind, policy);
                // The policy may have charged the thread.
                return Ok(self.clocks[tid]);
            }
        }
        Ok(clock)
    }

    /// The slow path of an access: fault the page in if it is not resident, and
    /// deliver the hinting fault if it is armed. The handler may migrate or split the
    /// page, or free the subpage (a split that drops zero subpages): then this access
    /// faults it back in. Returns the VMA index to use afterwards.
    #[cold]
    #[inline(never)]
    #[allow(clippy::too_many_arguments)]
    fn fault_in(
        &mut self,
        tid: usize,
        pid: u32,
        vi: usize,
        vpn: Vpn,
        addr: u64,
        write: bool,
        policy: &mut dyn Policy,
    ) -> Result<usize, SimError> {
        self.ensure_present(tid, pid, vi, vpn, policy)?;
        let v = &mut self.spaces[pid as usize].vmas[vi];
        let ui = v.unit_index(vpn);
        if v.pages[ui].flags & F_ARMED == 0 {
            return Ok(vi);
        }
        v.pages[ui].flags &= !F_ARMED;
        let fault = HintFault {
            pid: Pid(pid),
            vpn,
            tier: TierId(v.pages[ui].tier),
            huge: v.pages[ui].huge(),
            write,
            armed_at: (v.pages[ui].armed_at as f64 * self.policy_time_scale) as Nanos,
        };
        self.counters.hint_faults += 1;
        self.enter(self.clocks[tid], Payer::Thread(tid));
        self.charge_event(self.costs.hint_fault_ns);
        policy.on_event(&Event::HintFault(fault), self);
        let Some(vi) = self.spaces[pid as usize].find(vpn) else {
            return Err(SimError::Unmapped { pid, addr });
        };
        self.ensure_present(tid, pid, vi, vpn, policy)?;
        Ok(vi)
    }

    #[allow(clippy::too_many_arguments)]
    fn deliver_sample(
        &mut self,
        tid: usize,
        pid: u32,
        vpn: Vpn,
        tier: u8,
        huge: bool,
        kind: SampleKind,
        policy: &mut dyn Policy,
    ) {
        self.counters.samples += 1;
        self.enter(self.clocks[tid], Payer::Kthread);
        self.charge_event(self.costs.sample_ns);
        let s = Sample {
            pid: Pid(pid),
            vpn,
            tier: TierId(tier),
            huge,
            kind,
        };
        policy.on_event(&Event::Sample(s), self);
    }

    /// Fault the page of `vpn` in if it is not resident. A policy reacting to the
    /// allocation may split the new huge page and free this still-zero subpage; the
    /// access then faults again, as it would in Linux — a few times at most.
    #[inline]
    fn ensure_present(
        &mut self,
        tid: usize,
        pid: u32,
        vi: usize,
        vpn: Vpn,
        policy: &mut dyn Policy,
    ) -> Result<(), SimError> {
        for _ in 0..8 {
            let v = &self.spaces[pid as usize].vmas[vi];
            if v.pages[(vpn - v.vma.start_vpn) as usize].present() {
                return Ok(());
            }
            self.first_touch(tid, pid, vi, vpn, policy)?;
        }
        Err(SimError::Policy {
            why: format!(
                "process {pid} page {vpn:#x} was freed by the policy on each of 8 faults in a row"
            ),
        })
    }

    #[cold]
    fn first_touch(
        &mut self,
        tid: usize,
        pid: u32,
        vi: usize,
        vpn: Vpn,
        policy: &mut dyn Policy,
    ) -> Result<(), SimError> {
        let (tier, huge) = self.allocate(pid, vi, vpn)?;
        self.enter(self.clocks[tid], Payer::Thread(tid));
        if self.page_alloc_events {
            let v = if huge { huge_head(vpn) } else { vpn };
            let ev = Event::PageAlloc {
                pid: Pid(pid),
                vpn: v,
                tier: TierId(tier),
                huge,
            };
            policy.on_event(&ev, self);
        }
        for t in self.low_watermark_tiers(tier as usize) {
            self.enter(self.clocks[tid], Payer::Kthread);
            policy.on_event(&Event::LowWatermark { tier: t }, self);
        }
        Ok(())
    }

    /// Set up a migration's page-table effects and counters; `n` pages from `from` to
    /// `to`. Shared by migrate, exchange and collapse. An exchange passes through a
    /// transient over-capacity state between its two halves, so capacity is checked by
    /// the callers once the whole move is done.
    fn account_move(&mut self, from: usize, to: usize, n: u64) {
        self.tiers[from].used -= n;
        self.tiers[to].used += n;
        let bytes = n * PAGE_SIZE;
        self.counters.migrated_bytes += bytes;
        if to < from {
            self.counters.promoted_pages += n;
        } else {
            self.counters.demoted_pages += n;
        }
        let now = self.now;
        self.occupy_bandwidth(from, now, bytes as f64);
        self.occupy_bandwidth(to, now, bytes as f64);
    }

    fn charge_migration(&mut self, bytes: u64, mode: MigrateMode) {
        let cost = (self.costs.migrate_fixed_ns + bytes as f64 * self.ns_per_copy_byte)
            * self.event_weight;
        if mode == MigrateMode::Async {
            let saved = self.payer;
            self.payer = Payer::Kthread;
            self.charge(cost);
            self.payer = saved;
        } else {
            self.charge(cost);
        }
    }

    /// Locate the unit of `(pid, vpn)`: (vma index, unit index).
    fn locate(&self, pid: Pid, vpn: Vpn) -> Option<(usize, usize)> {
        let space = self.spaces.get(pid.index())?;
        let vi = space.find_const(vpn)?;
        let v = &space.vmas[vi];
        let ui = v.unit_index(vpn);
        v.pages[ui].present().then_some((vi, ui))
    }

    /// Change the tier of a located unit (all 512 entries of a huge page) and stamp
    /// its demotion time; returns the number of base pages.
    fn retier(&mut self, pid: Pid, vi: usize, ui: usize, to: u8) -> u64 {
        let now_ms = (self.now as u64 / NS_PER_MS).max(1) as u32;
        let window = self.pingpong_window_ms;
        let v = &mut self.spaces[pid.index()].vmas[vi];
        let from = v.pages[ui].tier;
        let n = if v.pages[ui].huge() {
            SUBPAGES_PER_HUGE as usize
        } else {
            1
        };
        let mut pingpong = false;
        for p in &mut v.pages[ui..ui + n] {
            p.tier = to;
        }
        let head = &mut v.pages[ui];
        if to < from {
            pingpong = head.demoted_at_ms != 0 && (now_ms - head.demoted_at_ms) as u64 <= window;
        } else {
            head.demoted_at_ms = now_ms;
        }
        if pingpong {
            self.counters.pingpong_pages += n as u64;
        }
        n as u64
    }

    #[inline]
    fn debug_check_capacity(&self) {
        debug_assert!(
            self.tiers.iter().all(|t| t.used <= t.capacity),
            "a tier is over capacity after a migration"
        );
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
                        if !h.huge() || h.tier != p.tier {
                            return Err(format!(
                                "pid {pid}: huge page {head:#x} split across tiers"
                            ));
                        }
                    }
                    if p.present() {
                        if p.tier as usize >= self.tiers.len() {
                            return Err(format!("pid {pid}: page in unknown tier {}", p.tier));
                        }
                        per_tier[p.tier as usize] += 1;
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

    fn for_each_unit(
        &mut self,
        pid: Pid,
        start_vpn: Vpn,
        nr_pages: u64,
        mut f: impl FnMut(Vpn, &mut PageState),
    ) -> u64 {
        let Some(space) = self.spaces.get_mut(pid.index()) else {
            return 0;
        };
        let end = start_vpn.saturating_add(nr_pages);
        let first = space.vmas.partition_point(|v| v.vma.end_vpn() <= start_vpn);
        let mut walked = 0;
        let sampler = self.sampler;
        let pid32 = pid.0;
        for v in &mut space.vmas[first..] {
            if v.vma.start_vpn >= end {
                break;
            }
            let mut vpn = start_vpn.max(v.vma.start_vpn);
            let stop = end.min(v.vma.end_vpn());
            while vpn < stop {
                // A region a sampled run does not simulate holds no page: count its
                // entries as walked (the real walk would visit them) without reading.
                if !sampler.keeps_region(pid32, vpn >> (HUGE_PAGE_SHIFT - PAGE_SHIFT)) {
                    let next = (huge_head(vpn) + SUBPAGES_PER_HUGE).min(stop);
                    walked += next - vpn;
                    vpn = next;
                    continue;
                }
                let i = (vpn - v.vma.start_vpn) as usize;
                let p = &mut v.pages[i];
                walked += 1;
                if p.huge() {
                    let head = huge_head(vpn);
                    let hi = (head - v.vma.start_vpn) as usize;
                    f(head, &mut v.pages[hi]);
                    vpn = head + SUBPAGES_PER_HUGE;
                } else {
                    if p.present() {
                        f(vpn, p);
                    }
                    vpn += 1;
                }
            }
        }
        walked
    }
}

impl Mechanisms for Machine {
    fn now(&self) -> Nanos {
        self.policy_time(self.now)
    }

    fn tiers(&self) -> &[TierInfo] {
        &self.tier_info
    }

    fn free_pages(&self, tier: TierId) -> u64 {
        self.tiers.get(tier.index()).map_or(0, |t| t.free())
    }

    fn watermarks(&self, tier: TierId) -> Watermarks {
        self.tiers[tier.index()].wm
    }

    fn processes(&self) -> Vec<Pid> {
        (0..self.spaces.len() as u32).map(Pid).collect()
    }

    fn vmas(&self, pid: Pid) -> Vec<Vma> {
        self.spaces
            .get(pid.index())
            .map(|s| s.vmas.iter().map(|v| v.vma).collect())
            .unwrap_or_default()
    }

    fn rss_pages(&self, pid: Pid) -> u64 {
        self.spaces.get(pid.index()).map_or(0, |s| s.rss_pages)
    }

    fn pages_per_simulated_page(&self) -> u64 {
        self.sampler.keeps_one_in()
    }

    fn access_count(&self) -> Option<u64> {
        Some(self.counters.accesses)
    }

    fn page(&self, pid: Pid, vpn: Vpn) -> Option<PageInfo> {
        let (vi, ui) = self.locate(pid, vpn)?;
        let p = self.spaces[pid.index()].vmas[vi].pages[ui];
        Some(PageInfo {
            tier: TierId(p.tier),
            huge: p.huge(),
        })
    }

    fn walk_pages(
        &mut self,
        pid: Pid,
        start_vpn: Vpn,
        nr_pages: u64,
        f: &mut dyn FnMut(Vpn, PageInfo),
    ) -> u64 {
        let walked = self.for_each_unit(pid, start_vpn, nr_pages, |vpn, p| {
            f(
                vpn,
                PageInfo {
                    tier: TierId(p.tier),
                    huge: p.huge(),
                },
            )
        });
        self.charge(walked as f64 * self.costs.pte_scan_ns);
        walked
    }

    fn arm_hint_fault(&mut self, pid: Pid, vpn: Vpn) -> bool {
        self.observes(|r| r.hint_faults, "armed a hinting fault", "hint_faults");
        let Some((vi, ui)) = self.locate(pid, vpn) else {
            return false;
        };
        let now = self.now as Nanos;
        let p = &mut self.spaces[pid.index()].vmas[vi].pages[ui];
        // Already PROT_NONE: the kernel leaves the PTE (and its scan time) alone.
        if p.flags & F_ARMED == 0 {
            p.flags |= F_ARMED;
            p.armed_at = now;
            self.counters.armed_ptes += 1;
        }
        self.charge_event(self.costs.pte_scan_ns);
        true
    }

    fn arm_range(
        &mut self,
        pid: Pid,
        start_vpn: Vpn,
        nr_pages: u64,
        tier_filter: Option<TierId>,
    ) -> u64 {
        self.observes(|r| r.hint_faults, "armed hinting faults", "hint_faults");
        let now = self.now as Nanos;
        let mut armed = 0;
        let walked = self.for_each_unit(pid, start_vpn, nr_pages, |_, p| {
            if p.flags & F_ARMED == 0 && tier_filter.is_none_or(|t| t.0 == p.tier) {
                p.flags |= F_ARMED;
                p.armed_at = now;
                armed += 1;
            }
        });
        self.counters.armed_ptes += armed;
        self.charge(walked as f64 * self.costs.pte_scan_ns);
        armed
    }

    fn test_and_clear_young(&mut self, pid: Pid, vpn: Vpn) -> Option<bool> {
        self.observes(
            |r| r.accessed_bits,
            "tested an accessed bit",
            "accessed_bits",
        );
        let (vi, ui) = self.locate(pid, vpn)?;
        let p = &mut self.spaces[pid.index()].vmas[vi].pages[ui];
        let young = p.flags & F_ACCESSED != 0;
        p.flags &= !F_ACCESSED;
        self.counters.young_tests += 1;
        self.charge_event(self.costs.young_test_ns);
        Some(young)
    }

    fn set_sample_period(&mut self, kind: SampleKind, period: u64) {
        self.observes(|r| r.sampling, "set a sample period", "sampling");
        let k = (kind == SampleKind::Store) as usize;
        self.sample_period[k] = period;
        self.sample_countdown[k] = period;
    }

    fn schedule(&mut self, at: Nanos, id: TimerId, runner: Runner) {
        // Policy time back to machine time.
        let at = ((at as f64 / self.policy_time_scale) as Nanos).max(self.now as Nanos);
        self.timer_seq += 1;
        let task = match runner {
            Runner::Kthread => None,
            Runner::Task(p) => Some(p.0),
        };
        self.timers.push(Reverse(TimerEntry {
            at,
            seq: self.timer_seq,
            id,
            task,
        }));
        self.earliest_new_timer = self.earliest_new_timer.min(at as f64);
    }

    fn charge_cpu(&mut self, ns: u64) {
        // A policy's own work is per page or per event it handles, so on a sampled
        // machine each unit of it stands for 1/rate units.
        self.charge_event(ns as f64);
    }

    fn random(&mut self) -> u64 {
        self.rng.next_u64()
    }

    fn migrate(
        &mut self,
        pid: Pid,
        vpn: Vpn,
        to: TierId,
        mode: MigrateMode,
    ) -> Result<(), MigrateError> {
        let r = self.try_migrate(pid, vpn, to, mode);
        if r.is_err() {
            self.counters.failed_migrations += 1;
        }
        r
    }

    fn exchange(
        &mut self,
        a: (Pid, Vpn),
        b: (Pid, Vpn),
        mode: MigrateMode,
    ) -> Result<(), MigrateError> {
        let r = (|| {
            let (avi, aui) = self.locate(a.0, a.1).ok_or(MigrateError::NotPresent)?;
            let (bvi, bui) = self.locate(b.0, b.1).ok_or(MigrateError::NotPresent)?;
            let pa = self.spaces[a.0.index()].vmas[avi].pages[aui];
            let pb = self.spaces[b.0.index()].vmas[bvi].pages[bui];
            if pa.tier == pb.tier {
                return Err(MigrateError::AlreadyThere);
            }
            if pa.huge() != pb.huge() {
                return Err(MigrateError::NoSpace);
            }
            let n = self.retier(a.0, avi, aui, pb.tier);
            self.retier(b.0, bvi, bui, pa.tier);
            self.account_move(pa.tier as usize, pb.tier as usize, n);
            self.account_move(pb.tier as usize, pa.tier as usize, n);
            self.debug_check_capacity();
            self.charge_migration(n * PAGE_SIZE, mode);
            self.charge_migration(n * PAGE_SIZE, mode);
            Ok(())
        })();
        if r.is_err() {
            self.counters.failed_migrations += 1;
        }
        r
    }

    fn split_huge(&mut self, pid: Pid, vpn: Vpn, free_zero_subpages: bool) -> Option<u64> {
        let (vi, _) = self.locate(pid, vpn)?;
        let v = &mut self.spaces[pid.index()].vmas[vi];
        if !v.split_unit(vpn) {
            return None;
        }
        let mut freed = 0;
        if free_zero_subpages {
            let head = (huge_head(vpn) - v.vma.start_vpn) as usize;
            for p in &mut v.pages[head..head + SUBPAGES_PER_HUGE as usize] {
                if p.flags & F_WRITTEN == 0 {
                    self.tiers[p.tier as usize].used -= 1;
                    *p = PageState::EMPTY;
                    freed += 1;
                }
            }
            self.spaces[pid.index()].rss_pages -= freed;
        }
        self.counters.huge_splits += 1;
        self.charge_event(self.costs.split_ns);
        Some(freed)
    }

    fn collapse_huge(&mut self, pid: Pid, vpn: Vpn, tier: TierId) -> Result<(), MigrateError> {
        let head = huge_head(vpn);
        let space = self
            .spaces
            .get(pid.index())
            .ok_or(MigrateError::NotPresent)?;
        let vi = space.find_const(head).ok_or(MigrateError::NotPresent)?;
        let v = &space.vmas[vi];
        if !v.huge_eligible(head) {
            return Err(MigrateError::NotPresent);
        }
        if tier.index() >= self.tiers.len() {
            return Err(MigrateError::BadTier);
        }
        let hi = (head - v.vma.start_vpn) as usize;
        let range = hi..hi + SUBPAGES_PER_HUGE as usize;
        if v.pages[range.clone()]
            .iter()
            .any(|p| !p.present() || p.huge())
        {
            return Err(MigrateError::NotPresent);
        }
        let mut incoming = vec![0u64; self.tiers.len()];
        for p in &v.pages[range.clone()] {
            if p.tier != tier.0 {
                incoming[p.tier as usize] += 1;
            }
        }
        let need: u64 = incoming.iter().sum();
        if need > 0 && !self.has_room(tier.index(), need) {
            self.counters.failed_migrations += 1;
            return Err(MigrateError::NoSpace);
        }
        let v = &mut self.spaces[pid.index()].vmas[vi];
        let young = v.pages[range.clone()]
            .iter()
            .any(|p| p.flags & F_ACCESSED != 0);
        for p in &mut v.pages[range.clone()] {
            p.tier = tier.0;
            p.flags = (p.flags & F_WRITTEN) | F_HUGE;
        }
        if young {
            v.pages[hi].flags |= F_ACCESSED;
        }
        for (from, &n) in incoming.iter().enumerate() {
            if n > 0 {
                self.account_move(from, tier.index(), n);
            }
        }
        self.debug_check_capacity();
        self.counters.huge_collapses += 1;
        self.charge_migration(HUGE_PAGE_SIZE, MigrateMode::Async);
        Ok(())
    }
}

impl Machine {
    fn try_migrate(
        &mut self,
        pid: Pid,
        vpn: Vpn,
        to: TierId,
        mode: MigrateMode,
    ) -> Result<(), MigrateError> {
        if to.index() >= self.tiers.len() {
            return Err(MigrateError::BadTier);
        }
        let (vi, ui) = self.locate(pid, vpn).ok_or(MigrateError::NotPresent)?;
        let p = self.spaces[pid.index()].vmas[vi].pages[ui];
        if p.tier == to.0 {
            return Err(MigrateError::AlreadyThere);
        }
        let n = if p.huge() { SUBPAGES_PER_HUGE } else { 1 };
        if !self.has_room(to.index(), n) {
            return Err(MigrateError::NoSpace);
        }
        self.retier(pid, vi, ui, to.0);
        self.account_move(p.tier as usize, to.index(), n);
        self.debug_check_capacity();
        self.charge_migration(n * PAGE_SIZE, mode);
        Ok(())
    }
}

/// Placement quality of one epoch: the fast tier's contents against the epoch's hot
/// set (the pages with the most memory accesses in the epoch, as many as the fast tier
/// holds), plus the epoch's memory accesses binned by address for the heat map.
#[derive(Debug, Clone, PartialEq)]
pub struct EpochPlacement {
    /// Pages in the hot set.
    pub hot_pages: u64,
    /// Pages in the fast tier at the end of the epoch.
    pub fast_pages: u64,
    /// Hot pages that are in the fast tier.
    pub hot_in_fast: u64,
    /// Memory accesses per address bin (pages of all processes in address order).
    pub heat: Vec<u64>,
}

impl Machine {
    /// Close a placement epoch: measure, then reset the per-page epoch counters.
    pub fn placement_epoch(&mut self, bins: usize) -> EpochPlacement {
        let budget = self.hot_set_pages;
        let sampler = self.sampler;
        let total_pages: u64 = self
            .spaces
            .iter()
            .flat_map(|s| s.vmas.iter())
            .map(|v| v.vma.nr_pages)
            .sum();
        let mut counts: Vec<u16> = Vec::new();
        for (pid, s) in self.spaces.iter().enumerate() {
            for v in &s.vmas {
                for_sampled_chunks(&sampler, pid as u32, v, |range| {
                    counts.extend(
                        v.pages[range]
                            .iter()
                            .map(|p| p.epoch_accesses)
                            .filter(|&c| c > 0),
                    );
                });
            }
        }
        // Hot set: counts above the threshold, plus ties at it in address order.
        let (threshold, mut tie_room) = if (counts.len() as u64) <= budget {
            (1u16, u64::MAX)
        } else {
            let k = counts.len() - budget as usize;
            let (_, t, _) = counts.select_nth_unstable(k);
            let t = *t;
            let above = counts.iter().filter(|&&c| c > t).count() as u64;
            (t, budget - above)
        };
        let bins = bins.max(1);
        let mut out = EpochPlacement {
            hot_pages: 0,
            fast_pages: 0,
            hot_in_fast: 0,
            heat: vec![0; bins],
        };
        // Pages of all processes in address order, for the heat map's bins.
        let mut vma_base = 0u64;
        let mut chunks = Vec::new();
        for (pid, s) in self.spaces.iter_mut().enumerate() {
            for v in s.vmas.iter_mut() {
                let base = vma_base;
                vma_base += v.vma.nr_pages;
                chunks.clear();
                for_sampled_chunks(&sampler, pid as u32, v, |range| chunks.push(range));
                for range in chunks.drain(..) {
                    let first = base + range.start as u64;
                    for (index, p) in (first..).zip(v.pages[range].iter_mut()) {
                        let c = p.epoch_accesses;
                        let fast = p.tier == 0;
                        let hot = c > threshold
                            || (c == threshold && c > 0 && tie_room > 0 && {
                                tie_room -= 1;
                                true
                            });
                        out.fast_pages += fast as u64;
                        out.hot_pages += hot as u64;
                        out.hot_in_fast += (hot && fast) as u64;
                        if c > 0 {
                            out.heat[(index * bins as u64 / total_pages.max(1)) as usize] +=
                                c as u64;
                        }
                        p.epoch_accesses = 0;
                    }
                }
            }
        }
        out
    }
}

/// Call `f` with each index range of `v`'s pages that the sampler keeps (the whole
/// VMA when exact), in address order.
fn for_sampled_chunks(
    sampler: &RegionSampler,
    pid: u32,
    v: &VmaState,
    mut f: impl FnMut(std::ops::Range<usize>),
) {
    if sampler.keeps_all() {
        f(0..v.pages.len());
        return;
    }
    let (start, end) = (v.vma.start_vpn, v.vma.end_vpn());
    let mut vpn = start;
    while vpn < end {
        let next = (huge_head(vpn) + SUBPAGES_PER_HUGE).min(end);
        if sampler.keeps_region(pid, vpn >> (HUGE_PAGE_SHIFT - PAGE_SHIFT)) {
            f((vpn - start) as usize..(next - start) as usize);
        }
        vpn = next;
    }
}
