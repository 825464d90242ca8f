//! [`LiveMechanisms`]: `tierkit_core::Mechanisms` for real Linux processes (one or
//! several, sharing the fast tier).
//!
//! | mechanism | live facility | what is lost |
//! |---|---|---|
//! | `page`, `walk_pages`, `rss_pages` | a cache of move_pages(2) queries (`nodes = NULL`) over the target's private anonymous VMAs, refreshed every interval | placement changes by others (kernel, app) are seen one interval late; THPs are reported as base pages |
//! | `vmas`, `Mmap`/`Munmap` | diffs of `/proc/PID/maps` between intervals | merged VMAs, short-lived mappings, one interval of lag |
//! | `PageAlloc` | pages that became present between two queries | the exact first-touch time (one interval) |
//! | `PageMoved` | pages a query finds on another tier than the cache (moved by the application, an operator or the kernel), the daemon's budget demotions, moves given up after `migrate` returned | the time of a move by others (one interval) |
//! | `test_and_clear_young` | DAMON region snapshots ([`crate::access`]) | region granularity, probabilistic within a region, ≤ one aggregation of lag |
//! | `arm_hint_fault`, `arm_range`, `HintFault` | armed pages watched through the same snapshots | no PROT_NONE, no fault stall; fault time estimated inside an aggregation window; `write` always false |
//! | `Sample`, `set_sample_period` | PEBS/IBS through perf_event_open(2) ([`crate::sys::sampler`]), `PERF_EVENT_IOC_PERIOD` | samples arrive at the next poll; never run on hardware here (no PMU) |
//! | `migrate`, `exchange` | queued, move_pages(2) `MPOL_MF_MOVE` in bounded batches under a rate cap | the move happens after the call returns; failures (EBUSY...) are counted and the cache corrected |
//! | `split_huge`, `collapse_huge` | unsupported (`None` / `NotPresent`) | all huge-page management |
//! | `free_pages`, `watermarks`, `LowWatermark` | the fast budget (or the node's MemFree) and `/proc/zoneinfo` | allocation-time wake-ups: checked once per interval |
//! | `now`, `schedule` | CLOCK_MONOTONIC since attach, a timer heap | — |

use crate::access::{fault_time, AccessView, Rng, Snapshot};
use crate::mover::{Move, Mover, MoverLimits};
use crate::stats::ProcessStats;
use crate::sys::move_pages::{self, CallError, PageStatus};
use crate::sys::procfs;
use serde::Serialize;
use std::cmp::Reverse;
use std::collections::{BTreeMap, BinaryHeap, HashMap};
use std::time::Instant;
use tierkit_core::*;

/// Cache value of a page that is not present.
pub const NOT_PRESENT: u8 = 255;
/// Cache value of a page on a node that is neither the fast nor the slow one.
pub const OTHER_NODE: u8 = 254;

#[derive(Debug, Clone)]
struct VmaCache {
    start: Vpn,
    tiers: Vec<u8>,
}

impl VmaCache {
    fn end(&self) -> Vpn {
        self.start + self.tiers.len() as u64
    }
}

/// Counters of the live mechanisms (cumulative since attach).
#[derive(Debug, Clone, Default, Serialize)]
pub struct Counters {
    /// PEBS/IBS samples delivered to the policy as `Sample` events.
    pub samples: u64,
    /// Samples dropped: their page is not a tracked, resident page of the target
    /// (stack, file mapping, freed since).
    pub samples_dropped: u64,
    /// Samples the kernel could not write (a ring buffer was full).
    pub samples_lost: u64,
    /// Pages moved to the fast node (move_pages status confirmed).
    pub promoted_pages: u64,
    /// Pages moved to the slow node (confirmed), budget demotions included.
    pub demoted_pages: u64,
    /// Demotions the daemon queued itself to hold the fast budget.
    pub budget_demote_requests: u64,
    /// Pages a move_pages call did not move, any reason (each failed try counts).
    pub migrate_failures: u64,
    /// Moves queued again after a try that failed for a passing reason (EBUSY, ENOMEM,
    /// a call failing with ENOMEM or EAGAIN), at most `mover::MOVE_ATTEMPTS` tries each.
    pub retried_moves: u64,
    /// ... of which `-EBUSY`.
    pub fail_busy: u64,
    /// ... of which `-ENOMEM` (target node full).
    pub fail_nomem: u64,
    /// ... of which `-EFAULT`/`-ENOENT` (unmapped or freed meanwhile).
    pub fail_gone: u64,
    /// ... of which `-EACCES` (shared page) or another error / landed elsewhere.
    pub fail_other: u64,
    /// `migrate` calls refused before queueing (no space, queue full, not present).
    pub refused_migrations: u64,
    /// Hinting faults delivered.
    pub hint_faults: u64,
    /// DAMON snapshots of a process that held no region (a kdamond just started or
    /// restarted), not kept.
    pub empty_snapshots: u64,
    /// Accessed-bit tests answered.
    pub young_tests: u64,
    /// DAMON kdamonds restarted after stopping while the target lived.
    pub damon_restarts: u64,
    /// Pages armed.
    pub armed_ptes: u64,
    /// Pages first seen present (PageAlloc).
    pub allocated_pages: u64,
    /// move_pages(2) calls that moved pages.
    pub move_calls: u64,
    /// move_pages(2) calls (moves or placement queries) that failed as a whole for a
    /// reason that may pass (ENOMEM, EAGAIN...); the daemon backed off and went on.
    pub move_call_failures: u64,
    /// Wall time inside those calls, ns.
    pub move_ns: u64,
    /// Pages whose node a placement refresh asked move_pages(2) for (only pages
    /// pagemap shows resident or swapped are asked).
    pub queried_pages: u64,
    /// Pages handed to those calls.
    pub move_pages_requested: u64,
    /// Wall time of placement queries, ns.
    pub query_ns: u64,
    /// CPU the policy charged itself (its estimate of in-kernel work), ns.
    pub policy_charged_ns: u64,
    /// Pages that would have moved (`--dry-run`).
    pub dry_run_pages: u64,
    /// Timers fired.
    pub timers: u64,
}

/// How the tiers map onto nodes, and the fast budget.
#[derive(Debug, Clone)]
pub struct TierSetup {
    /// Node of tier 0 and of tier 1.
    pub nodes: [u32; 2],
    /// Tier descriptions (capacity: the budget for the fast tier when given).
    pub tiers: Vec<TierInfo>,
    /// Fast budget in pages.
    pub budget_pages: Option<u64>,
    /// Watermarks per tier.
    pub watermarks: [Watermarks; 2],
}

/// Linux's watermark formula (`__setup_per_zone_wmarks`, `watermark_scale_factor`
/// 10) for a tier of `capacity` pages on a machine of `total` pages; used for the
/// fast budget, which has no zone of its own.
pub fn budget_watermarks(capacity: u64, total: u64) -> Watermarks {
    let total_kib = (total * PAGE_SIZE / 1024) as f64;
    let min_free_kib = (4.0 * total_kib.sqrt()).clamp(128.0, 262_144.0);
    let min_total = min_free_kib * 1024.0 / PAGE_SIZE as f64;
    let min = (min_total * capacity as f64 / total.max(1) as f64) as u64;
    let step = (min / 4).max(capacity * 10 / 10_000);
    Watermarks::pages(min, min + step, min + 2 * step)
}

/// What a placement refresh found.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Refresh {
    /// New page ranges `(start, nr_pages)`.
    pub mmaps: Vec<(Vpn, u64)>,
    /// Vanished page ranges `(start, nr_pages)`.
    pub munmaps: Vec<(Vpn, u64)>,
    /// Pages present now that were not before.
    pub allocs: Vec<(Vpn, TierId)>,
}

/// `a \ b` for sorted, disjoint half-open ranges.
pub fn subtract(a: &[(u64, u64)], b: &[(u64, u64)]) -> Vec<(u64, u64)> {
    let mut out = Vec::new();
    let mut j = 0;
    for &(s, e) in a {
        let mut cur = s;
        while j < b.len() && b[j].1 <= cur {
            j += 1;
        }
        let mut k = j;
        while cur < e {
            match b.get(k) {
                Some(&(bs, be)) if bs < e => {
                    if bs > cur {
                        out.push((cur, bs));
                    }
                    cur = cur.max(be);
                    k += 1;
                }
                _ => {
                    out.push((cur, e));
                    break;
                }
            }
        }
    }
    out
}

/// Counters of one tiered process (cumulative since it was first tracked).
#[derive(Debug, Clone, Default)]
struct ProcessCounters {
    promoted_pages: u64,
    demoted_pages: u64,
    migrate_failures: u64,
    hint_faults: u64,
}

/// One tiered process: the placement of its pages, its armed and tested pages, and
/// its DAMON view. Its index in [`LiveMechanisms`] is its policy [`Pid`].
#[derive(Debug, Clone)]
struct Process {
    os_pid: i32,
    vmas: Vec<VmaCache>,
    counts: [u64; 2],
    other_pages: u64,
    armed: BTreeMap<Vpn, Nanos>,
    tested: HashMap<Vpn, Nanos>,
    access: AccessView,
    gone: bool,
    counters: ProcessCounters,
}

impl Process {
    fn new(os_pid: i32) -> Process {
        Process {
            os_pid,
            vmas: Vec::new(),
            counts: [0; 2],
            other_pages: 0,
            armed: BTreeMap::new(),
            tested: HashMap::new(),
            access: AccessView::default(),
            gone: false,
            counters: ProcessCounters::default(),
        }
    }

    fn locate(&self, vpn: Vpn) -> Option<(usize, usize)> {
        let i = self
            .vmas
            .partition_point(|v| v.start <= vpn)
            .checked_sub(1)?;
        let v = &self.vmas[i];
        (vpn < v.end()).then(|| (i, (vpn - v.start) as usize))
    }

    fn tier_of(&self, vpn: Vpn) -> u8 {
        self.locate(vpn)
            .map_or(NOT_PRESENT, |(i, j)| self.vmas[i].tiers[j])
    }

    fn bump(&mut self, t: u8, up: bool) {
        let c = match t {
            0 | 1 => &mut self.counts[t as usize],
            OTHER_NODE => &mut self.other_pages,
            _ => return,
        };
        if up {
            *c += 1;
        } else {
            *c = c.saturating_sub(1);
        }
    }

    fn set_tier(&mut self, vpn: Vpn, t: u8) {
        if let Some((i, j)) = self.locate(vpn) {
            let old = std::mem::replace(&mut self.vmas[i].tiers[j], t);
            self.bump(old, false);
            self.bump(t, true);
        }
    }

    fn ranges(&self) -> Vec<(Vpn, Vpn)> {
        self.vmas.iter().map(|v| (v.start, v.end())).collect()
    }
}

/// What one [`LiveMechanisms::flush_moves`] did.
#[derive(Debug, Default)]
pub struct Flush {
    /// Pages handed to move_pages(2) (or counted, under `--dry-run`).
    pub pages: usize,
    /// Calls that failed as a whole, per process (moves that may pass later are
    /// queued again, the others reverted).
    pub failed: Vec<(Pid, CallError)>,
    /// Pages the kernel could not move for want of memory on the target node.
    pub nomem_pages: usize,
}

/// The live implementation of the mechanisms for the processes tiered. A process's
/// policy [`Pid`] is the order in which it was added (0 for the first); a process that
/// leaves keeps its number, so a pid is never reused for another process.
pub struct LiveMechanisms {
    procs: Vec<Process>,
    start: Instant,
    time_override: Option<Nanos>,
    setup: TierSetup,
    node_free: [u64; 2],
    /// Queued moves.
    pub mover: Mover,
    timers: BinaryHeap<Reverse<(Nanos, u64, TimerId)>>,
    timer_seq: u64,
    rng: Rng,
    /// Counters.
    pub counters: Counters,
    /// DAMON aggregations read (one read covers every process).
    pub nr_snapshots: u64,
    dry_run: bool,
    /// The sample periods the policy asked for (loads, stores), and whether they
    /// changed since the daemon last applied them to its sampler.
    sample_periods: [u64; 2],
    periods_changed: bool,
    /// Tier changes the policy has not been told of, `(pid, vpn, from, to)`: pages a
    /// placement query found elsewhere than the cache had them (moved by someone
    /// else), the daemon's budget demotions, and moves of the policy's that were given
    /// up after its `migrate` call had returned `Ok`. The daemon hands them to the
    /// policy as [`Event::PageMoved`] ([`LiveMechanisms::take_unseen_moves`]).
    unseen_moves: Vec<(Pid, Vpn, TierId, TierId)>,
}

impl LiveMechanisms {
    /// Mechanisms with no process yet, the clock starting now.
    pub fn new(setup: TierSetup, limits: MoverLimits, seed: u64, dry_run: bool) -> LiveMechanisms {
        LiveMechanisms {
            procs: Vec::new(),
            start: Instant::now(),
            time_override: None,
            setup,
            node_free: [u64::MAX; 2],
            mover: Mover::new(limits),
            timers: BinaryHeap::new(),
            timer_seq: 0,
            rng: Rng(seed),
            counters: Counters::default(),
            nr_snapshots: 0,
            dry_run,
            sample_periods: [0; 2],
            periods_changed: false,
            unseen_moves: Vec::new(),
        }
    }

    /// Track OS process `os_pid` (the one already tracked under that pid if it is
    /// still there); returns its policy pid. Its pages appear at its first refresh.
    pub fn add_process(&mut self, os_pid: i32) -> Pid {
        if let Some(i) = self
            .procs
            .iter()
            .position(|p| p.os_pid == os_pid && !p.gone)
        {
            return Pid(i as u32);
        }
        self.procs.push(Process::new(os_pid));
        Pid(self.procs.len() as u32 - 1)
    }

    /// The OS pid of policy pid `pid`.
    pub fn os_pid(&self, pid: Pid) -> Option<i32> {
        self.procs.get(pid.0 as usize).map(|p| p.os_pid)
    }

    /// Processes still tracked: `(policy pid, OS pid)`.
    pub fn live_processes(&self) -> Vec<(Pid, i32)> {
        self.procs
            .iter()
            .enumerate()
            .filter(|(_, p)| !p.gone)
            .map(|(i, p)| (Pid(i as u32), p.os_pid))
            .collect()
    }

    /// Stop tracking `pid` (it exited, or left the cgroup): its queued moves and
    /// armed pages are dropped and its pages no longer count. Returns the page
    /// ranges `(start, nr_pages)` it had, for the policy's Munmap events.
    pub fn remove_process(&mut self, pid: Pid) -> Vec<(Vpn, u64)> {
        let Some(p) = self.procs.get_mut(pid.0 as usize) else {
            return Vec::new();
        };
        if p.gone {
            return Vec::new();
        }
        p.gone = true;
        let ranges: Vec<(Vpn, u64)> = p
            .vmas
            .iter()
            .map(|v| (v.start, v.tiers.len() as u64))
            .collect();
        p.vmas.clear();
        p.counts = [0; 2];
        p.other_pages = 0;
        p.armed.clear();
        p.tested.clear();
        for &(s, n) in &ranges {
            self.mover.forget_range(pid, s, s + n);
        }
        ranges
    }

    /// Every process added is gone (none was added: false).
    pub fn all_gone(&self) -> bool {
        !self.procs.is_empty() && self.procs.iter().all(|p| p.gone)
    }

    /// Whether `pid` is tracked and present.
    pub fn is_live(&self, pid: Pid) -> bool {
        self.procs.get(pid.0 as usize).is_some_and(|p| !p.gone)
    }

    /// Each process's figures for the stats line, in policy-pid order.
    pub fn process_stats(&self) -> Vec<ProcessStats> {
        self.procs
            .iter()
            .map(|p| ProcessStats {
                pid: p.os_pid,
                fast_pages: p.counts[0],
                slow_pages: p.counts[1],
                other_node_pages: p.other_pages,
                promoted_pages: p.counters.promoted_pages,
                demoted_pages: p.counters.demoted_pages,
                migrate_failures: p.counters.migrate_failures,
                hint_faults: p.counters.hint_faults,
                gone: p.gone,
            })
            .collect()
    }

    /// The `Sample` event of a PEBS/IBS sample taken in process `pid`, or None
    /// (counted) when its page is not a tracked, resident page of it.
    pub fn sample_event(&mut self, pid: Pid, s: &crate::sys::sampler::RawSample) -> Option<Sample> {
        let vpn = s.addr >> PAGE_SHIFT;
        let tier = match self.procs.get(pid.0 as usize) {
            Some(p) if !p.gone => p.tier_of(vpn),
            _ => NOT_PRESENT,
        };
        if tier > 1 {
            self.counters.samples_dropped += 1;
            return None;
        }
        self.counters.samples += 1;
        Some(Sample {
            pid,
            vpn,
            tier: TierId(tier),
            huge: false,
            kind: s.kind,
        })
    }

    /// The sample periods (loads, stores) the policy set, if they changed since the
    /// last call.
    pub fn take_sample_periods(&mut self) -> Option<[u64; 2]> {
        std::mem::take(&mut self.periods_changed).then_some(self.sample_periods)
    }

    /// Real time since attach, ns.
    pub fn elapsed(&self) -> Nanos {
        self.start.elapsed().as_nanos() as Nanos
    }

    /// Make `now()` return `t` (a timer's deadline, a fault's time) until cleared.
    pub fn set_time(&mut self, t: Option<Nanos>) {
        self.time_override = t;
    }

    /// Pages of all tracked processes per tier `[fast, slow]`, queued moves counted
    /// as done.
    pub fn tier_pages(&self) -> [u64; 2] {
        self.procs
            .iter()
            .fold([0; 2], |[f, s], p| [f + p.counts[0], s + p.counts[1]])
    }

    /// Pages on other nodes.
    pub fn other_pages(&self) -> u64 {
        self.procs.iter().map(|p| p.other_pages).sum()
    }

    /// The tier setup.
    pub fn setup(&self) -> &TierSetup {
        &self.setup
    }

    /// Update the nodes' free pages (from their meminfo).
    pub fn set_node_free(&mut self, free_pages: [u64; 2]) {
        self.node_free = free_pages;
    }

    /// The earliest pending timer.
    pub fn next_timer(&self) -> Option<Nanos> {
        self.timers.peek().map(|Reverse((at, _, _))| *at)
    }

    /// Pop the earliest timer if it is due at `now`.
    pub fn pop_due_timer(&mut self, now: Nanos) -> Option<(Nanos, TimerId)> {
        match self.timers.peek() {
            Some(Reverse((at, _, _))) if *at <= now => {
                let Reverse((at, _, id)) = self.timers.pop().expect("peeked");
                self.counters.timers += 1;
                Some((at, id))
            }
            _ => None,
        }
    }

    fn proc(&self, pid: Pid) -> Option<&Process> {
        self.procs.get(pid.0 as usize).filter(|p| !p.gone)
    }

    fn set_tier(&mut self, pid: Pid, vpn: Vpn, t: u8) {
        if let Some(p) = self.procs.get_mut(pid.0 as usize) {
            p.set_tier(vpn, t);
        }
    }

    fn tier_of(&self, pid: Pid, vpn: Vpn) -> u8 {
        self.proc(pid).map_or(NOT_PRESENT, |p| p.tier_of(vpn))
    }

    fn node_to_tier(&self, n: i32) -> u8 {
        if n == self.setup.nodes[0] as i32 {
            0
        } else if n == self.setup.nodes[1] as i32 {
            1
        } else {
            OTHER_NODE
        }
    }

    /// The tracked page ranges `(start vpn, end vpn)` of `pid`.
    pub fn ranges(&self, pid: Pid) -> Vec<(Vpn, Vpn)> {
        self.proc(pid).map_or_else(Vec::new, Process::ranges)
    }

    /// Re-read the placement of `pid`'s private anonymous byte ranges `byte_ranges`
    /// (sorted): one move_pages query over every mapped page, pending moves kept as
    /// the policy's view. On `NoProcess` the caller removes the process
    /// ([`LiveMechanisms::remove_process`]) and tells the policy.
    pub fn refresh_placement(
        &mut self,
        pid: Pid,
        byte_ranges: &[(u64, u64)],
    ) -> Result<Refresh, CallError> {
        let Some(os_pid) = self.proc(pid).map(|p| p.os_pid) else {
            return Err(CallError::NoProcess);
        };
        let new: Vec<(Vpn, Vpn)> = byte_ranges
            .iter()
            .map(|&(s, e)| (s >> PAGE_SHIFT, e >> PAGE_SHIFT))
            .filter(|(s, e)| e > s)
            .collect();
        let old = self.ranges(pid);
        let mut r = Refresh {
            mmaps: subtract(&new, &old)
                .into_iter()
                .map(|(s, e)| (s, e - s))
                .collect(),
            munmaps: subtract(&old, &new)
                .into_iter()
                .map(|(s, e)| (s, e - s))
                .collect(),
            allocs: Vec::new(),
        };
        // Only pages pagemap shows mapped are asked for their node: a reserved but
        // untouched mapping (a heap arena, a large MAP_NORESERVE region) costs a page
        // table walk, not a per-page query. Where pagemap cannot be read, every page is.
        let t = Instant::now();
        let mut mapped = Vec::new();
        let mut addrs = Vec::new();
        for &(s, e) in &new {
            let m =
                procfs::mapped_pages(os_pid, s, e).unwrap_or_else(|_| vec![true; (e - s) as usize]);
            addrs.extend(
                (s..e)
                    .zip(&m)
                    .filter(|(_, &on)| on)
                    .map(|(v, _)| v << PAGE_SHIFT),
            );
            mapped.extend(m);
        }
        self.counters.queried_pages += addrs.len() as u64;
        let queried = move_pages::query(os_pid, &addrs);
        self.counters.query_ns += t.elapsed().as_nanos() as u64;
        let queried = queried?;
        let mut queried = queried.into_iter();
        let st: Vec<PageStatus> = mapped
            .iter()
            .map(|&on| {
                if on {
                    queried.next().unwrap_or(PageStatus::Unknown)
                } else {
                    PageStatus::NotPresent
                }
            })
            .collect();
        let mut caches = Vec::with_capacity(new.len());
        let mut moved = Vec::new();
        let mut k = 0;
        for &(s, e) in &new {
            let mut tiers = Vec::with_capacity((e - s) as usize);
            for vpn in s..e {
                let actual = match st[k] {
                    PageStatus::Node(n) => self.node_to_tier(n),
                    _ => NOT_PRESENT,
                };
                k += 1;
                let before = self.tier_of(pid, vpn);
                let mut t = actual;
                if let Some(m) = self.mover.pending(pid, vpn) {
                    if actual == m.from.0 {
                        t = m.to.0;
                    }
                }
                if actual <= 1 && before == NOT_PRESENT {
                    r.allocs.push((vpn, TierId(actual)));
                } else if t <= 1 && before <= 1 && t != before {
                    moved.push((pid, vpn, TierId(before), TierId(t)));
                }
                tiers.push(t);
            }
            caches.push(VmaCache { start: s, tiers });
        }
        for &(s, n) in &r.munmaps {
            self.mover.forget_range(pid, s, s + n);
        }
        let p = &mut self.procs[pid.0 as usize];
        p.vmas = caches;
        for &(s, n) in &r.munmaps {
            let gone: Vec<Vpn> = p.armed.range(s..s + n).map(|(v, _)| *v).collect();
            for v in gone {
                p.armed.remove(&v);
            }
        }
        if !r.munmaps.is_empty() {
            let m = r.munmaps.clone();
            p.tested
                .retain(|v, _| !m.iter().any(|&(s, n)| *v >= s && *v < s + n));
        }
        p.counts = [0; 2];
        p.other_pages = 0;
        for i in 0..p.vmas.len() {
            for j in 0..p.vmas[i].tiers.len() {
                let t = p.vmas[i].tiers[j];
                p.bump(t, true);
            }
        }
        self.counters.allocated_pages += r.allocs.len() as u64;
        self.unseen_moves.extend(moved);
        Ok(r)
    }

    /// Queue demotions of the coldest fast pages of all processes until the fast tier
    /// holds the budget, at most `max_pages` now (the rate cap's worth of one interval,
    /// so the next interval ranks again with fresher snapshots). Coldest = lowest
    /// `nr_accesses`, then oldest, in the newest DAMON snapshot of the page's process;
    /// pages no snapshot covers come after every covered page, in (process, address)
    /// order. The budget is shared: which process gives up pages is decided by
    /// coldness alone. Returns the pages queued.
    pub fn enforce_budget(&mut self, max_pages: u64) -> u64 {
        let Some(budget) = self.setup.budget_pages else {
            return 0;
        };
        let excess = self.tier_pages()[0].saturating_sub(budget).min(max_pages);
        if excess == 0 {
            return 0;
        }
        type Key = ((u32, Reverse<u32>), Pid, Vpn);
        let mut cands: Vec<Key> = Vec::new();
        for (i, p) in self.procs.iter().enumerate().filter(|(_, p)| !p.gone) {
            let pid = Pid(i as u32);
            let snap = p.access.latest();
            for v in &p.vmas {
                for (j, &t) in v.tiers.iter().enumerate() {
                    let vpn = v.start + j as u64;
                    if t == 0 && self.mover.pending(pid, vpn).is_none() {
                        let key = snap
                            .and_then(|s| s.region(vpn))
                            .map_or((u32::MAX, Reverse(0)), |r| (r.nr_accesses, Reverse(r.age)));
                        cands.push((key, pid, vpn));
                    }
                }
            }
        }
        let n = (excess as usize).min(cands.len());
        if n < cands.len() {
            cands.select_nth_unstable(n);
        }
        let mut queued = 0;
        for &(_, pid, vpn) in &cands[..n] {
            if self.mover.enqueue(pid, vpn, TierId(0), TierId(1)) {
                self.set_tier(pid, vpn, 1);
                self.unseen_moves.push((pid, vpn, TierId(0), TierId(1)));
                queued += 1;
            }
        }
        self.counters.budget_demote_requests += queued;
        queued
    }

    /// Carry out the next batch the rate cap allows: one move_pages(2) call per
    /// process in it. A call that fails as a whole is reverted and reported (for a
    /// process found gone, `NoProcess`, the caller removes it and tells the policy).
    pub fn flush_moves(&mut self, now: Nanos) -> Flush {
        let batch = self.mover.next_batch(now);
        let mut out = Flush {
            pages: batch.len(),
            ..Flush::default()
        };
        if batch.is_empty() {
            return out;
        }
        if self.dry_run {
            self.counters.dry_run_pages += batch.len() as u64;
            return out;
        }
        // Group by process, in the order each first appears in the queue.
        let mut groups: Vec<(Pid, Vec<Move>)> = Vec::new();
        for m in batch {
            match groups.iter_mut().find(|(p, _)| *p == m.pid) {
                Some((_, g)) => g.push(m),
                None => groups.push((m.pid, vec![m])),
            }
        }
        for (pid, group) in groups {
            let Some(os_pid) = self.proc(pid).map(|p| p.os_pid) else {
                continue;
            };
            let addrs: Vec<u64> = group.iter().map(|m| m.vpn << PAGE_SHIFT).collect();
            let nodes: Vec<i32> = group
                .iter()
                .map(|m| self.setup.nodes[m.to.index()] as i32)
                .collect();
            let t = Instant::now();
            let res = move_pages::move_to(os_pid, &addrs, &nodes);
            self.counters.move_ns += t.elapsed().as_nanos() as u64;
            self.counters.move_calls += 1;
            self.counters.move_pages_requested += group.len() as u64;
            match res {
                Ok(st) => out.nomem_pages += self.apply_statuses(&group, &st),
                Err(e) => {
                    // A call that may pass (ENOMEM, EAGAIN...) is tried again after the
                    // daemon's back-off; the policy's view keeps the requested tier.
                    let passing = matches!(e, CallError::Other(_));
                    for m in &group {
                        if passing && self.mover.retry(*m) {
                            self.counters.retried_moves += 1;
                        } else {
                            self.revert(m, m.from.0);
                        }
                    }
                    self.counters.migrate_failures += group.len() as u64;
                    self.counters.fail_other += group.len() as u64;
                    if let Some(p) = self.procs.get_mut(pid.0 as usize) {
                        p.counters.migrate_failures += group.len() as u64;
                    }
                    out.failed.push((pid, e));
                }
            }
        }
        out
    }

    fn revert(&mut self, m: &Move, t: u8) {
        if self.tier_of(m.pid, m.vpn) == m.to.0 {
            self.set_tier(m.pid, m.vpn, t);
            if t <= 1 && t != m.to.0 {
                self.unseen_moves.push((m.pid, m.vpn, m.to, TierId(t)));
            }
        }
    }

    /// The tier changes the policy has not been told of since the last call, oldest
    /// first: pages a placement query found elsewhere than the cache had them (moved
    /// by the application, an operator, the kernel), budget demotions queued, and
    /// moves given up (the page is back where it was, or found elsewhere).
    pub fn take_unseen_moves(&mut self) -> Vec<(Pid, Vpn, TierId, TierId)> {
        std::mem::take(&mut self.unseen_moves)
    }

    /// Account one batch's per-page statuses and correct the cache; a page that failed
    /// for a passing reason (EBUSY, ENOMEM) is queued again until its attempts run out.
    /// Returns the pages that failed with ENOMEM (the target node is full).
    pub fn apply_statuses(&mut self, batch: &[Move], st: &[PageStatus]) -> usize {
        let mut nomem = 0;
        for (m, s) in batch.iter().zip(st) {
            let i = m.pid.0 as usize;
            match *s {
                PageStatus::Node(n) if n == self.setup.nodes[m.to.index()] as i32 => {
                    let promoted = m.to.0 < m.from.0;
                    if promoted {
                        self.counters.promoted_pages += 1;
                    } else {
                        self.counters.demoted_pages += 1;
                    }
                    if let Some(p) = self.procs.get_mut(i) {
                        if promoted {
                            p.counters.promoted_pages += 1;
                        } else {
                            p.counters.demoted_pages += 1;
                        }
                    }
                }
                other => {
                    self.counters.migrate_failures += 1;
                    if let Some(p) = self.procs.get_mut(i) {
                        p.counters.migrate_failures += 1;
                    }
                    let back = match other {
                        PageStatus::Node(n) => {
                            self.counters.fail_other += 1;
                            self.node_to_tier(n)
                        }
                        PageStatus::Busy | PageStatus::NoMem => {
                            if matches!(other, PageStatus::Busy) {
                                self.counters.fail_busy += 1;
                            } else {
                                self.counters.fail_nomem += 1;
                                nomem += 1;
                            }
                            // Passing: tried again later, the policy's view kept (as
                            // the kernel keeps a page it could not isolate this time).
                            if self.mover.retry(*m) {
                                self.counters.retried_moves += 1;
                                continue;
                            }
                            m.from.0
                        }
                        PageStatus::NotPresent | PageStatus::Fault => {
                            self.counters.fail_gone += 1;
                            NOT_PRESENT
                        }
                        PageStatus::Shared | PageStatus::Other(_) | PageStatus::Unknown => {
                            self.counters.fail_other += 1;
                            m.from.0
                        }
                    };
                    self.revert(m, back);
                }
            }
        }
        nomem
    }

    /// Add one DAMON read: a snapshot per process. Returns the hinting faults they
    /// reveal for armed pages, `(time, pid, vpn, tier, armed_at)` in time order (the
    /// pages are disarmed).
    pub fn add_snapshots(
        &mut self,
        snaps: Vec<(Pid, Snapshot)>,
    ) -> Vec<(Nanos, Pid, Vpn, TierId, Nanos)> {
        let mut faults = Vec::new();
        for (pid, s) in snaps {
            let Some(p) = self.procs.get_mut(pid.0 as usize).filter(|p| !p.gone) else {
                continue;
            };
            // A snapshot without regions says nothing of any page. Kept, it would hide
            // the last one that did: the budget would rank every page as unknown, by
            // address, and take the first process's hot set (the e2e multi-pid
            // failures, each right after the daemon restarted its kdamond).
            if s.regions.is_empty() {
                self.counters.empty_snapshots += 1;
                continue;
            }
            if !p.armed.is_empty() {
                for r in s.regions.iter().filter(|r| r.nr_accesses > 0) {
                    let hits: Vec<(Vpn, Nanos)> = p
                        .armed
                        .range(r.start..r.end)
                        .map(|(v, a)| (*v, *a))
                        .collect();
                    for (vpn, armed_at) in hits {
                        if let Some(t) = fault_time(&s, r.rate, armed_at, self.rng.unit()) {
                            p.armed.remove(&vpn);
                            let tier = p.tier_of(vpn);
                            if tier <= 1 {
                                p.counters.hint_faults += 1;
                                faults.push((t, pid, vpn, TierId(tier), armed_at));
                            }
                        }
                    }
                }
            }
            p.access.push(s);
        }
        faults.sort_unstable();
        self.counters.hint_faults += faults.len() as u64;
        self.nr_snapshots += 1;
        faults
    }

    /// Whether DAMON has answered for any process.
    pub fn has_snapshot(&self) -> bool {
        self.procs.iter().any(|p| p.access.latest().is_some())
    }

    /// Regions in the newest snapshots, all processes.
    pub fn latest_regions(&self) -> u64 {
        self.procs
            .iter()
            .filter(|p| !p.gone)
            .filter_map(|p| p.access.latest())
            .map(|s| s.regions.len() as u64)
            .sum()
    }

    fn present_tier(&self, pid: Pid, vpn: Vpn) -> Option<TierId> {
        let t = self.tier_of(pid, vpn);
        (t <= 1).then_some(TierId(t))
    }
}

impl Mechanisms for LiveMechanisms {
    fn now(&self) -> Nanos {
        self.time_override.unwrap_or_else(|| self.elapsed())
    }

    fn tiers(&self) -> &[TierInfo] {
        &self.setup.tiers
    }

    fn free_pages(&self, tier: TierId) -> u64 {
        let i = tier.index();
        let Some(info) = self.setup.tiers.get(i) else {
            return 0;
        };
        let used = self.tier_pages()[i.min(1)];
        let by_cap = info.capacity_pages.saturating_sub(used);
        let incoming = self.mover.net_into(tier).max(0) as u64;
        by_cap.min(self.node_free[i].saturating_sub(incoming))
    }

    fn watermarks(&self, tier: TierId) -> Watermarks {
        self.setup.watermarks[tier.index().min(1)]
    }

    fn processes(&self) -> Vec<Pid> {
        self.live_processes().into_iter().map(|(p, _)| p).collect()
    }

    fn vmas(&self, pid: Pid) -> Vec<Vma> {
        self.proc(pid).map_or_else(Vec::new, |p| {
            p.vmas
                .iter()
                .map(|v| Vma {
                    start_vpn: v.start,
                    nr_pages: v.tiers.len() as u64,
                    kind: VmaKind::Anon,
                })
                .collect()
        })
    }

    fn rss_pages(&self, pid: Pid) -> u64 {
        self.proc(pid)
            .map_or(0, |p| p.counts[0] + p.counts[1] + p.other_pages)
    }

    fn page(&self, pid: Pid, vpn: Vpn) -> Option<PageInfo> {
        self.present_tier(pid, vpn)
            .map(|tier| PageInfo { tier, huge: false })
    }

    fn walk_pages(
        &mut self,
        pid: Pid,
        start_vpn: Vpn,
        nr_pages: u64,
        f: &mut dyn FnMut(Vpn, PageInfo),
    ) -> u64 {
        let Some(p) = self.proc(pid) else {
            return 0;
        };
        let end = start_vpn.saturating_add(nr_pages);
        let mut walked = 0;
        let first = p.vmas.partition_point(|v| v.end() <= start_vpn);
        for v in &p.vmas[first..] {
            if v.start >= end {
                break;
            }
            let (s, e) = (v.start.max(start_vpn), v.end().min(end));
            for vpn in s..e {
                walked += 1;
                let t = v.tiers[(vpn - v.start) as usize];
                if t <= 1 {
                    f(
                        vpn,
                        PageInfo {
                            tier: TierId(t),
                            huge: false,
                        },
                    );
                }
            }
        }
        walked
    }

    fn arm_hint_fault(&mut self, pid: Pid, vpn: Vpn) -> bool {
        if self.present_tier(pid, vpn).is_none() {
            return false;
        }
        let now = self.now();
        let p = &mut self.procs[pid.0 as usize];
        if let std::collections::btree_map::Entry::Vacant(e) = p.armed.entry(vpn) {
            e.insert(now);
            self.counters.armed_ptes += 1;
        }
        true
    }

    fn arm_range(
        &mut self,
        pid: Pid,
        start_vpn: Vpn,
        nr_pages: u64,
        tier_filter: Option<TierId>,
    ) -> u64 {
        let mut pages = Vec::new();
        self.walk_pages(pid, start_vpn, nr_pages, &mut |vpn, info| {
            if tier_filter.is_none_or(|t| t == info.tier) {
                pages.push(vpn);
            }
        });
        if pages.is_empty() {
            return 0;
        }
        let now = self.now();
        let p = &mut self.procs[pid.0 as usize];
        let mut n = 0;
        for vpn in pages {
            if let std::collections::btree_map::Entry::Vacant(e) = p.armed.entry(vpn) {
                e.insert(now);
                n += 1;
            }
        }
        self.counters.armed_ptes += n;
        n
    }

    fn test_and_clear_young(&mut self, pid: Pid, vpn: Vpn) -> Option<bool> {
        self.present_tier(pid, vpn)?;
        let now = self.now();
        let p = &mut self.procs[pid.0 as usize];
        let since = p.tested.insert(vpn, now).unwrap_or(0);
        self.counters.young_tests += 1;
        let prob = p.access.p_accessed(vpn, since, now).unwrap_or(0.0);
        Some(prob >= 1.0 || (prob > 0.0 && self.rng.unit() < prob))
    }

    fn set_sample_period(&mut self, kind: SampleKind, period: u64) {
        // The daemon applies it to its PEBS/IBS sampler (PERF_EVENT_IOC_PERIOD).
        self.sample_periods[usize::from(kind == SampleKind::Store)] = period;
        self.periods_changed = true;
    }

    fn schedule(&mut self, at: Nanos, id: TimerId, _runner: Runner) {
        let at = at.max(self.now());
        self.timer_seq += 1;
        self.timers.push(Reverse((at, self.timer_seq, id)));
    }

    fn charge_cpu(&mut self, ns: u64) {
        self.counters.policy_charged_ns += ns;
    }

    fn as_kthread(&mut self, work: &mut dyn FnMut(&mut dyn Mechanisms)) {
        // A live daemon's threads are its own: nothing is charged to another runner.
        work(self)
    }

    fn random(&mut self) -> u64 {
        self.rng.next_u64()
    }

    fn migrate(
        &mut self,
        pid: Pid,
        vpn: Vpn,
        to: TierId,
        _mode: MigrateMode,
    ) -> Result<(), MigrateError> {
        let r = (|| {
            if to.index() > 1 {
                return Err(MigrateError::BadTier);
            }
            let from = self
                .present_tier(pid, vpn)
                .ok_or(MigrateError::NotPresent)?;
            if from == to {
                return Err(MigrateError::AlreadyThere);
            }
            if self.free_pages(to) as f64 <= self.watermarks(to).min {
                return Err(MigrateError::NoSpace);
            }
            // A full queue (the rate cap is behind) refuses like a full tier would.
            if !self.mover.enqueue(pid, vpn, from, to) {
                return Err(MigrateError::NoSpace);
            }
            self.set_tier(pid, vpn, to.0);
            Ok(())
        })();
        if r.is_err() {
            self.counters.refused_migrations += 1;
        }
        r
    }

    fn exchange(
        &mut self,
        a: (Pid, Vpn),
        b: (Pid, Vpn),
        _mode: MigrateMode,
    ) -> Result<(), MigrateError> {
        let ta = self
            .present_tier(a.0, a.1)
            .ok_or(MigrateError::NotPresent)?;
        let tb = self
            .present_tier(b.0, b.1)
            .ok_or(MigrateError::NotPresent)?;
        if ta == tb {
            return Err(MigrateError::AlreadyThere);
        }
        if self.mover.len() + 2 > self.mover_capacity() {
            self.counters.refused_migrations += 1;
            return Err(MigrateError::NoSpace);
        }
        // The demotion half is queued first, so it is never carried out after the
        // promotion half: the fast node holds at most one extra page in between.
        let (down, up) = if ta.0 < tb.0 { (a, b) } else { (b, a) };
        self.mover.enqueue(down.0, down.1, TierId(0), TierId(1));
        self.mover.enqueue(up.0, up.1, TierId(1), TierId(0));
        self.set_tier(down.0, down.1, 1);
        self.set_tier(up.0, up.1, 0);
        Ok(())
    }

    fn split_huge(&mut self, _pid: Pid, _vpn: Vpn, _free_zero_subpages: bool) -> Option<u64> {
        None
    }

    fn collapse_huge(&mut self, _pid: Pid, _vpn: Vpn, _tier: TierId) -> Result<(), MigrateError> {
        Err(MigrateError::NotPresent)
    }
}

impl LiveMechanisms {
    fn mover_capacity(&self) -> usize {
        self.mover.max_queue()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn range_subtraction() {
        assert_eq!(
            subtract(&[(0, 10)], &[(2, 4), (6, 7)]),
            vec![(0, 2), (4, 6), (7, 10)]
        );
        assert_eq!(subtract(&[(0, 10), (20, 30)], &[(0, 10)]), vec![(20, 30)]);
        assert_eq!(subtract(&[(0, 10)], &[]), vec![(0, 10)]);
        assert_eq!(subtract(&[(5, 10)], &[(0, 20)]), Vec::<(u64, u64)>::new());
        // Growth of a heap: only the new tail is an mmap.
        assert_eq!(subtract(&[(100, 150)], &[(100, 120)]), vec![(120, 150)]);
    }

    use crate::sys::damon::Region;

    const P0: Pid = Pid(0);

    /// An anonymous mapping of our own, with `touched` pages written.
    struct Buf {
        p: *mut libc::c_void,
        len: usize,
    }
    impl Buf {
        fn new(pages: usize, touched: &[usize]) -> Buf {
            let len = pages * 4096;
            // SAFETY: a private anonymous mapping owned by the test.
            let p = unsafe {
                libc::mmap(
                    std::ptr::null_mut(),
                    len,
                    libc::PROT_READ | libc::PROT_WRITE,
                    libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                    -1,
                    0,
                )
            };
            assert_ne!(p, libc::MAP_FAILED);
            let b = Buf { p, len };
            for &i in touched {
                b.touch(i);
            }
            b
        }
        fn touch(&self, i: usize) {
            // SAFETY: inside the mapping.
            unsafe { *(self.p as *mut u8).add(i * 4096) = 1 };
        }
        fn vpn(&self) -> Vpn {
            self.p as u64 >> PAGE_SHIFT
        }
        fn range(&self) -> (u64, u64) {
            (self.p as u64, self.p as u64 + self.len as u64)
        }
    }
    impl Drop for Buf {
        fn drop(&mut self) {
            // SAFETY: the mapping made in `new`.
            unsafe { libc::munmap(self.p, self.len) };
        }
    }

    fn own(budget: Option<u64>, dry_run: bool) -> LiveMechanisms {
        let info = |id: u8, cap: u64| TierInfo {
            id: TierId(id),
            name: format!("node{id}"),
            capacity_pages: cap,
            load_ns: 100.0,
            store_ns: 100.0,
            bandwidth_bytes_per_s: 1e10,
        };
        let wm = Watermarks::pages(0, 1, 2);
        let setup = TierSetup {
            nodes: [0, 1],
            tiers: vec![info(0, budget.unwrap_or(1 << 30)), info(1, 1 << 30)],
            budget_pages: budget,
            watermarks: [wm, wm],
        };
        let limits = MoverLimits {
            batch_pages: 8,
            rate_pages_per_s: 1 << 20,
            max_queue_pages: 64,
        };
        let mut m = LiveMechanisms::new(setup, limits, 1, dry_run);
        assert_eq!(m.add_process(std::process::id() as i32), P0);
        m
    }

    fn snap(end_ns: Nanos, regions: &[(Vpn, Vpn, u32)]) -> Snapshot {
        let r: Vec<Region> = regions
            .iter()
            .map(|&(s, e, n)| Region {
                start: s << PAGE_SHIFT,
                end: e << PAGE_SHIFT,
                nr_accesses: n,
                age: 5,
            })
            .collect();
        Snapshot::from_damon(end_ns, 200_000_000, 5_000_000, &r)
    }

    #[test]
    fn refresh_reports_mmap_alloc_munmap_of_a_real_mapping() {
        let b = Buf::new(64, &(0..16).collect::<Vec<_>>());
        let mut m = own(None, true);
        let r = m.refresh_placement(P0, &[b.range()]).unwrap();
        assert_eq!(r.mmaps, vec![(b.vpn(), 64)]);
        assert_eq!(r.allocs.len(), 16);
        assert!(r.allocs.iter().all(|&(_, t)| t == TierId(0)));
        assert_eq!(m.tier_pages(), [16, 0]);
        assert_eq!(m.rss_pages(Pid(0)), 16);
        assert_eq!(m.page(Pid(0), b.vpn() + 3).map(|p| p.tier), Some(TierId(0)));
        assert_eq!(m.page(Pid(0), b.vpn() + 30), None);
        b.touch(20);
        let (s, e) = b.range();
        let r = m.refresh_placement(P0, &[(s, s + (e - s) / 2)]).unwrap();
        assert_eq!(r.munmaps, vec![(b.vpn() + 32, 32)]);
        assert_eq!(r.allocs, vec![(b.vpn() + 20, TierId(0))]);
        let mut n = 0;
        assert_eq!(m.walk_pages(Pid(0), b.vpn(), 1000, &mut |_, _| n += 1), 32);
        assert_eq!(n, 17);
    }

    #[test]
    fn pebs_samples_become_sample_events_of_tracked_pages_and_periods_reach_the_sampler() {
        use crate::sys::sampler::RawSample;
        let b = Buf::new(16, &[0, 1, 2]);
        let mut m = own(None, true);
        m.refresh_placement(P0, &[b.range()]).unwrap();
        let raw = |addr: u64, kind| RawSample {
            pid: 1,
            tid: 1,
            addr,
            kind,
        };
        let (s, _) = b.range();
        let ev = m
            .sample_event(P0, &raw(s + 4096 + 64, SampleKind::Store))
            .unwrap();
        assert_eq!(
            (ev.vpn, ev.tier, ev.kind),
            (b.vpn() + 1, TierId(0), SampleKind::Store)
        );
        // Not resident, and outside every tracked mapping: dropped, counted.
        assert!(m
            .sample_event(P0, &raw(s + 9 * 4096, SampleKind::LlcLoadMiss))
            .is_none());
        assert!(m
            .sample_event(P0, &raw(0x10, SampleKind::LlcLoadMiss))
            .is_none());
        assert_eq!((m.counters.samples, m.counters.samples_dropped), (1, 2));
        // MEMTIS sets its sampling periods at init; the daemon hands them on once.
        let mut memtis = tierkit_policies::PolicyConfig::default_for("memtis")
            .unwrap()
            .try_build(&BuildContext::default())
            .unwrap();
        memtis.init(&mut m);
        let p = m.take_sample_periods().expect("memtis sets its periods");
        assert!(p[0] > 0 && p[1] > 0, "{p:?}");
        assert_eq!(m.take_sample_periods(), None);
        memtis.on_event(&Event::Sample(ev), &mut m);
    }

    #[test]
    fn a_refresh_asks_only_for_mapped_pages_of_a_large_reservation() {
        // 1 GiB reserved (262144 pages), 16 touched. Before: every page was queried,
        // so the refresh cost grew with reserved address space.
        let b = Buf::new(1 << 18, &(0..16).map(|i| i * 1000).collect::<Vec<_>>());
        let mut m = own(None, true);
        let r = m.refresh_placement(P0, &[b.range()]).unwrap();
        // With THP `always` a touch may map a whole 2 MiB page: at most 512 each.
        let mapped = m.tier_pages()[0];
        assert!((16..=16 * 512).contains(&mapped), "{mapped}");
        assert_eq!(r.allocs.len() as u64, mapped);
        assert_eq!(m.counters.queried_pages, mapped);
    }

    #[test]
    fn migrate_queues_checks_space_and_dry_run_does_not_move() {
        let b = Buf::new(8, &[0, 1, 2]);
        let mut m = own(Some(3), true);
        m.refresh_placement(P0, &[b.range()]).unwrap();
        let v = b.vpn();
        assert_eq!(
            m.migrate(Pid(0), v, TierId(0), MigrateMode::Async),
            Err(MigrateError::AlreadyThere)
        );
        assert_eq!(
            m.migrate(Pid(0), v + 5, TierId(1), MigrateMode::Async),
            Err(MigrateError::NotPresent)
        );
        assert_eq!(
            m.migrate(Pid(0), v, TierId(2), MigrateMode::Async),
            Err(MigrateError::BadTier)
        );
        assert_eq!(m.free_pages(TierId(0)), 0, "budget of 3 holds 3 pages");
        // Pretend page 2 sits on the slow node: the full budget refuses its promotion.
        m.set_tier(P0, v + 2, 1);
        assert_eq!(m.free_pages(TierId(0)), 1);
        m.setup.watermarks[0].min = 1.0;
        assert_eq!(
            m.migrate(Pid(0), v + 2, TierId(0), MigrateMode::Async),
            Err(MigrateError::NoSpace)
        );
        m.setup.watermarks[0].min = 0.0;
        assert_eq!(
            m.migrate(Pid(0), v + 2, TierId(0), MigrateMode::Async),
            Ok(())
        );
        assert_eq!(m.tier_pages(), [3, 0]);
        assert_eq!(m.migrate(Pid(0), v, TierId(1), MigrateMode::Async), Ok(()));
        assert_eq!(m.flush_moves(m.elapsed()).pages, 2);
        assert_eq!(m.counters.dry_run_pages, 2);
        assert_eq!(m.counters.move_calls, 0, "dry run never calls move_pages");
        assert_eq!(m.counters.refused_migrations, 4);
        // The next query shows the real tiers, and the policy is told that the page it
        // decided to demote is still fast (the one it decided to promote really is on
        // the fast node: nothing to tell).
        m.refresh_placement(P0, &[b.range()]).unwrap();
        assert_eq!(m.take_unseen_moves(), vec![(P0, v, TierId(1), TierId(0))]);
        assert_eq!(m.tier_pages(), [3, 0]);
    }

    #[test]
    fn a_move_to_a_missing_node_is_a_call_error_and_is_reverted() {
        let b = Buf::new(4, &[0]);
        let mut m = own(None, false);
        m.setup.nodes = [0, 4000];
        m.refresh_placement(P0, &[b.range()]).unwrap();
        assert_eq!(
            m.migrate(Pid(0), b.vpn(), TierId(1), MigrateMode::Async),
            Ok(())
        );
        assert_eq!(m.tier_pages(), [0, 1]);
        let f = m.flush_moves(m.elapsed());
        assert_eq!(f.failed.len(), 1);
        let e = f.failed[0].1;
        assert!(
            matches!(e, CallError::NoNode | CallError::Other(_)),
            "{e:?}"
        );
        assert_eq!(m.tier_pages(), [1, 0], "reverted");
        assert_eq!(m.counters.migrate_failures, 1);
        assert_eq!(
            m.take_unseen_moves(),
            vec![(P0, b.vpn(), TierId(1), TierId(0))],
            "the policy learns its move did not happen"
        );
    }

    #[test]
    fn a_refresh_reports_pages_found_on_another_tier() {
        let b = Buf::new(4, &[0, 1, 2]);
        let mut m = own(None, true);
        let r = m.refresh_placement(P0, &[b.range()]).unwrap();
        assert_eq!(r.allocs.len(), 3);
        assert!(m.take_unseen_moves().is_empty());
        // A move the policy asked for and the mover has not made yet is the policy's
        // view, not a move by someone else.
        let v = b.vpn();
        assert_eq!(m.migrate(P0, v, TierId(1), MigrateMode::Async), Ok(()));
        m.refresh_placement(P0, &[b.range()]).unwrap();
        let told = m.take_unseen_moves();
        assert!(told.is_empty(), "{told:?}");
        // Node 0 now stands for the slow tier: to the cache, every other present page
        // was moved there by someone else (the queued one is where its move goes).
        m.setup.nodes = [1, 0];
        let r = m.refresh_placement(P0, &[b.range()]).unwrap();
        assert_eq!(
            m.take_unseen_moves(),
            vec![
                (P0, v + 1, TierId(0), TierId(1)),
                (P0, v + 2, TierId(0), TierId(1))
            ]
        );
        assert!(r.allocs.is_empty());
        m.refresh_placement(P0, &[b.range()]).unwrap();
        assert!(m.take_unseen_moves().is_empty(), "reported once");
    }

    #[test]
    fn statuses_update_counters_and_cache() {
        let b = Buf::new(4, &[0, 1, 2, 3]);
        let mut m = own(None, false);
        m.refresh_placement(P0, &[b.range()]).unwrap();
        let v = b.vpn();
        for i in 0..4 {
            m.set_tier(P0, v + i, 0);
        }
        let mv = |vpn, attempts| Move {
            pid: P0,
            vpn,
            from: TierId(1),
            to: TierId(0),
            attempts,
        };
        // As if four promotions were queued: one lands, one is busy, one vanished,
        // one found the fast node full on its last try.
        let nomem = m.apply_statuses(
            &[
                mv(v, 0),
                mv(v + 1, 0),
                mv(v + 2, 0),
                mv(v + 3, crate::mover::MOVE_ATTEMPTS - 1),
            ],
            &[
                PageStatus::Node(0),
                PageStatus::Busy,
                PageStatus::NotPresent,
                PageStatus::NoMem,
            ],
        );
        assert_eq!(nomem, 1);
        let c = &m.counters;
        assert_eq!(
            (
                c.promoted_pages,
                c.fail_busy,
                c.fail_gone,
                c.fail_nomem,
                c.migrate_failures,
                c.retried_moves
            ),
            (1, 1, 1, 1, 3, 1)
        );
        // The busy page is tried again: queued, and still the requested tier to the
        // policy. Before, it was put back on the slow tier for good, behind the
        // policy's back (a policy that had moved it between its lists never asked
        // again: seen in the guest's fault-fast-full scenario).
        assert_eq!(m.mover.pending(P0, v + 1).map(|x| x.attempts), Some(1));
        assert_eq!(m.page(P0, v + 1).unwrap().tier, TierId(0));
        assert_eq!(m.page(P0, v + 2), None);
        // Out of attempts: given up, back where it was, and the policy is told (the
        // vanished page is not a move: it left the policy with its mapping).
        assert!(m.mover.pending(P0, v + 3).is_none());
        assert_eq!(m.page(P0, v + 3).unwrap().tier, TierId(1));
        assert_eq!(
            m.take_unseen_moves(),
            vec![(P0, v + 3, TierId(0), TierId(1))]
        );
    }

    #[test]
    fn a_call_that_may_pass_is_retried_and_one_that_cannot_is_reverted() {
        let b = Buf::new(4, &[0]);
        let mut m = own(None, false);
        m.refresh_placement(P0, &[b.range()]).unwrap();
        // A node that does not exist: ENODEV (or EINVAL) for the whole call.
        m.setup.nodes = [0, 4000];
        assert_eq!(
            m.migrate(P0, b.vpn(), TierId(1), MigrateMode::Async),
            Ok(())
        );
        let f = m.flush_moves(m.elapsed());
        let passing = matches!(f.failed[0].1, CallError::Other(_));
        assert_eq!(m.counters.retried_moves, passing as u64);
        assert_eq!(m.mover.len(), passing as usize);
        assert_eq!(
            m.tier_pages(),
            if passing { [0, 1] } else { [1, 0] },
            "{:?}",
            f.failed
        );
    }

    #[test]
    fn budget_demotes_the_coldest_pages() {
        let b = Buf::new(16, &(0..16).collect::<Vec<_>>());
        let mut m = own(Some(10), true);
        m.refresh_placement(P0, &[b.range()]).unwrap();
        let v = b.vpn();
        m.add_snapshots(vec![(
            P0,
            snap(200_000_000, &[(v, v + 8, 40), (v + 8, v + 16, 0)]),
        )]);
        assert_eq!(m.enforce_budget(4), 4, "bounded per call");
        assert_eq!(m.enforce_budget(100), 2);
        assert_eq!(m.tier_pages(), [10, 6]);
        for i in 0..8 {
            assert_eq!(
                m.page(Pid(0), v + i).unwrap().tier,
                TierId(0),
                "hot page {i} stays"
            );
        }
        assert_eq!(m.enforce_budget(100), 0, "already queued");
        let told = m.take_unseen_moves();
        assert_eq!(told.len(), 6, "the policy learns of each budget demotion");
        assert!(told.iter().all(|&(p, vpn, from, to)| p == P0
            && vpn >= v + 8
            && (from, to) == (TierId(0), TierId(1))));
    }

    #[test]
    fn an_empty_snapshot_does_not_hide_the_last_one() {
        let b = Buf::new(16, &(0..16).collect::<Vec<_>>());
        let mut m = own(Some(12), true);
        m.refresh_placement(P0, &[b.range()]).unwrap();
        let v = b.vpn();
        m.add_snapshots(vec![(
            P0,
            snap(200_000_000, &[(v, v + 8, 40), (v + 8, v + 16, 0)]),
        )]);
        // A kdamond restarted: its first aggregation has no region yet.
        m.add_snapshots(vec![(P0, snap(400_000_000, &[]))]);
        assert_eq!(m.counters.empty_snapshots, 1);
        assert_eq!(m.enforce_budget(100), 4);
        for i in 0..8 {
            assert_eq!(
                m.page(Pid(0), v + i).unwrap().tier,
                TierId(0),
                "hot page {i} stays"
            );
        }
    }

    #[test]
    fn pages_no_snapshot_covers_are_demoted_last() {
        let b = Buf::new(16, &(0..16).collect::<Vec<_>>());
        let mut m = own(Some(12), true);
        m.refresh_placement(P0, &[b.range()]).unwrap();
        let v = b.vpn();
        // Only the upper half is covered (and idle); the lower half is unknown.
        m.add_snapshots(vec![(P0, snap(200_000_000, &[(v + 8, v + 16, 0)]))]);
        assert_eq!(m.enforce_budget(100), 4);
        for i in 0..8 {
            assert_eq!(
                m.page(Pid(0), v + i).unwrap().tier,
                TierId(0),
                "unknown page {i} kept"
            );
        }
    }

    #[test]
    fn young_bits_and_faults_follow_snapshots() {
        let b = Buf::new(16, &(0..16).collect::<Vec<_>>());
        let mut m = own(None, true);
        m.refresh_placement(P0, &[b.range()]).unwrap();
        let v = b.vpn();
        m.set_time(Some(0));
        assert!(m.arm_hint_fault(Pid(0), v + 1));
        assert!(m.arm_hint_fault(Pid(0), v + 12));
        assert!(!m.arm_hint_fault(Pid(0), v + 100));
        assert_eq!(m.arm_range(Pid(0), v, 16, Some(TierId(1))), 0);
        let f = m.add_snapshots(vec![(
            P0,
            snap(200_000_000, &[(v, v + 8, 40), (v + 8, v + 16, 0)]),
        )]);
        assert_eq!(f.len(), 1);
        assert_eq!((f[0].1, f[0].2, f[0].3, f[0].4), (P0, v + 1, TierId(0), 0));
        assert!(f[0].0 > 0 && f[0].0 < 200_000_000);
        assert_eq!(m.counters.hint_faults, 1);
        m.set_time(Some(200_000_000));
        assert_eq!(m.test_and_clear_young(Pid(0), v + 2), Some(true));
        assert_eq!(m.test_and_clear_young(Pid(0), v + 9), Some(false));
        m.add_snapshots(vec![(P0, snap(400_000_000, &[(v, v + 16, 0)]))]);
        m.set_time(Some(400_000_000));
        assert_eq!(
            m.test_and_clear_young(Pid(0), v + 2),
            Some(false),
            "idle since the last test"
        );
        assert_eq!(m.test_and_clear_young(Pid(0), v + 40), None);
        // The still-armed cold page faults once its region turns hot.
        let f = m.add_snapshots(vec![(P0, snap(600_000_000, &[(v + 8, v + 16, 40)]))]);
        assert_eq!(f.len(), 1);
        assert_eq!(f[0].2, v + 12);
    }

    /// A second tracked process over the same pages (this test process again, under
    /// policy pid 1): the per-process logic without a second real process.
    fn with_second(m: &mut LiveMechanisms) -> Pid {
        m.procs.push(Process::new(std::process::id() as i32));
        Pid(m.procs.len() as u32 - 1)
    }

    #[test]
    fn the_shared_budget_takes_pages_from_the_colder_process() {
        let b = Buf::new(16, &(0..16).collect::<Vec<_>>());
        let mut m = own(Some(20), true);
        let p1 = with_second(&mut m);
        m.refresh_placement(P0, &[b.range()]).unwrap();
        m.refresh_placement(p1, &[b.range()]).unwrap();
        assert_eq!(m.tier_pages(), [32, 0], "both count against the budget");
        let v = b.vpn();
        // Process 0 is hot throughout, process 1 idle: the 12 pages over the budget
        // all come from process 1, whatever their addresses.
        m.add_snapshots(vec![
            (P0, snap(200_000_000, &[(v, v + 16, 40)])),
            (p1, snap(200_000_000, &[(v, v + 16, 0)])),
        ]);
        assert_eq!(m.enforce_budget(100), 12);
        let st = m.process_stats();
        assert_eq!((st[0].fast_pages, st[1].fast_pages), (16, 4), "{st:?}");
        assert_eq!(st[1].slow_pages, 12);
        assert!((0..16).all(|i| m.page(P0, v + i).unwrap().tier == TierId(0)));
    }

    #[test]
    fn a_process_that_leaves_takes_its_pages_moves_and_armed_pages_with_it() {
        let b = Buf::new(8, &(0..8).collect::<Vec<_>>());
        let mut m = own(None, true);
        let p1 = with_second(&mut m);
        m.refresh_placement(P0, &[b.range()]).unwrap();
        m.refresh_placement(p1, &[b.range()]).unwrap();
        let v = b.vpn();
        assert_eq!(m.migrate(p1, v, TierId(1), MigrateMode::Async), Ok(()));
        assert_eq!(m.migrate(P0, v, TierId(1), MigrateMode::Async), Ok(()));
        assert!(m.arm_hint_fault(p1, v + 1));
        assert_eq!(m.mover.len(), 2, "the same page number in two processes");
        let gone = m.remove_process(p1);
        assert_eq!(gone, vec![(v, 8)]);
        assert_eq!(m.processes(), vec![P0]);
        assert_eq!(
            m.mover.len(),
            1,
            "its queued move is dropped, the other's kept"
        );
        assert!(m.mover.pending(P0, v).is_some());
        assert_eq!(m.page(p1, v + 2), None);
        assert_eq!(m.tier_pages(), [7, 1], "only process 0's pages count");
        assert!(!m.all_gone());
        assert!(m.process_stats()[1].gone);
        // A pid is never reused: a process added later gets a new one.
        assert_eq!(m.add_process(1), Pid(2));
        assert_eq!(m.remove_process(p1), Vec::new(), "leaving twice is nothing");
    }

    #[test]
    fn a_flush_makes_one_move_pages_call_per_process() {
        let b = Buf::new(4, &[0, 1]);
        let mut m = own(None, false);
        // A slow node that does not exist: each call fails as a whole, and says so.
        m.setup.nodes = [0, 4000];
        let p1 = with_second(&mut m);
        m.refresh_placement(P0, &[b.range()]).unwrap();
        m.refresh_placement(p1, &[b.range()]).unwrap();
        let v = b.vpn();
        for (p, i) in [(P0, 0), (p1, 0), (P0, 1)] {
            assert_eq!(m.migrate(p, v + i, TierId(1), MigrateMode::Async), Ok(()));
        }
        let f = m.flush_moves(m.elapsed());
        assert_eq!(f.pages, 3);
        assert_eq!(
            m.counters.move_calls, 2,
            "process 0's two pages in one call"
        );
        let failed: Vec<Pid> = f.failed.iter().map(|(p, _)| *p).collect();
        assert_eq!(failed, vec![P0, p1]);
        let st = m.process_stats();
        assert_eq!((st[0].migrate_failures, st[1].migrate_failures), (2, 1));
        assert_eq!(m.tier_pages(), [4, 0], "all reverted");
    }

    #[test]
    fn budget_watermarks_are_small_and_ordered() {
        let w = budget_watermarks(16384, 16384 + 524288);
        assert!(
            w.min < w.low && w.low < w.high && w.high < (16384 / 10) as f64,
            "{w:?}"
        );
    }
}
