//! `hemem`: HeMem (Raybuck et al., SOSP '21), user-space tiering by PEBS-sampled
//! access counts with fixed hot thresholds, hot/cold FIFO lists per tier and a
//! background migration thread.
//!
//! Reference: `src/pebs.c`, `src/pebs.h`, `src/fifo.c`, `src/hemem.h` of HeMem's
//! release (commit 57fb561 of the `cuhk-mass/hemem` fork). HeMem manages memory in
//! 2 MiB pages it maps itself from a DAX device; this module tracks every aligned
//! virtual range of `page_kib` (a *region*: 2 MiB by default, 4 KiB for the
//! re-implementation FreqTier compared against) as one HeMem page, whatever the
//! machine's THP mode.
//!
//! How it runs here:
//! - **Sampling** (`pebs_scan_thread`): loads that miss the LLC and all stores are
//!   sampled every `sample_period` events. Each sample bumps the region's DRAM-read,
//!   NVM-read or write counter. A region is hot when reads ≥ `hot_read_threshold` or
//!   writes ≥ `hot_write_threshold`; it moves to its tier's hot (or cold) FIFO list.
//!   A counter above `cooling_threshold` advances a global clock; every region's
//!   counters are halved once per clock tick, lazily, the next time they are looked at.
//! - **Migration** (`pebs_policy_thread`), every `kswapd_interval_us`: take hot regions
//!   of the slow tier oldest first and promote each into free fast memory, demoting the
//!   oldest cold fast region when there is none; stop when no cold fast region is left
//!   (everything in DRAM is hot) or `kswapd_migrate_rate_mb` has been promoted. Then
//!   re-examine up to `cooling_pages` entries of each hot list after a cooling.
//!
//! Parameters and decisions: `docs/policies/hemem.md`.

use serde::{Deserialize, Serialize};
use std::collections::{HashMap, VecDeque};
use tierkit_core::*;

/// The policy thread's timer.
const KSWAPD_TIMER: TimerId = 1;
/// Policy-thread cost of one FIFO operation (lock, unlink, link), ns.
const LIST_OP_NS: u64 = 20;
/// `sizeof(struct hemem_page)` on x86-64 (hemem.h at 57fb561; layout in the docs).
pub const HEMEM_PAGE_STRUCT_BYTES: u64 = 240;
/// Metadata per page of FreqTier's 4 KiB re-implementation of HeMem (§VII-C: "168
/// bytes of metadata for each page").
pub const FREQTIER_HEMEM_PAGE_BYTES: u64 = 168;
/// HeMem's page sizes, KiB: `HUGEPAGE_SIZE` (its `PAGE_SIZE`) and `BASEPAGE_SIZE`.
const PAGE_KIB_CHOICES: [u64; 2] = [2048, 4];

/// `hemem` parameters: HeMem's compile-time constants (`pebs.h`), in its units.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct HememConfig {
    /// One sample every this many qualifying events (LLC load misses; stores), events
    /// (`SAMPLE_PERIOD` 19997). Range ≥ 1.
    pub sample_period: u64,
    /// Read samples (DRAM + NVM loads) that make a page hot, samples
    /// (`HOT_READ_THRESHOLD` 4). Range ≥ 1.
    pub hot_read_threshold: u32,
    /// Write samples that make a page hot, samples (`HOT_WRITE_THRESHOLD` 4). Range ≥ 1.
    pub hot_write_threshold: u32,
    /// A counter above this many samples halves all counters, samples
    /// (`PEBS_COOLING_THRESHOLD` 10). Range ≥ 1.
    pub cooling_threshold: u32,
    /// Interval between wake-ups of the migration thread, µs (`PEBS_KSWAPD_INTERVAL`
    /// 10000). Range ≥ 1.
    pub kswapd_interval_us: u64,
    /// Most bytes promoted per wake-up, MiB (`PEBS_KSWAPD_MIGRATE_RATE` 10 GiB =
    /// 10240). Range ≥ 2 (one HeMem page).
    pub kswapd_migrate_rate_mb: u64,
    /// Hot-list entries re-examined per wake-up after a cooling, pages
    /// (`COOLING_PAGES` 8192). Range ≥ 1.
    pub cooling_pages: u64,
    /// Threads that spin whatever the load: HeMem's `pebs_scan_thread` busy-polls the
    /// PEBS buffers (MEMTIS §6.2: ≈100% of a core).
    /// Reported as the `busy_poll_cpu_seconds` statistic; charged only with
    /// `busy_poll_shared_cores` (see the docs). Range 0–4.
    pub busy_poll_threads: u32,
    /// Cores the busy pollers share with the application, when tiering threads run on
    /// the application's CPUs (`machine.tiering_cpus = "shared"`): each application
    /// thread then loses `busy_poll_threads / (cores + busy_poll_threads)` of its time,
    /// its fair share with the pollers (FreqTier §VI: 16 cores shared by the
    /// application and every tiering system's threads). 0 (the default, HeMem's own
    /// setup: the poller pinned to a core of its own): not charged. Range 0–1024.
    pub busy_poll_shared_cores: u32,
    /// HeMem's page, the unit it counts, lists and migrates, KiB: 2048 (`PAGE_SIZE =
    /// HUGEPAGE_SIZE` in hemem.h, the default) or 4 (`BASEPAGE_SIZE`: FreqTier's
    /// re-implementation for CXL tiered 4 KiB pages, §VII-C). Meant for base pages
    /// (`machine.thp = "never"`): at 4 KiB on a machine with huge pages, promoting a
    /// page moves the huge page holding it. Range: 4 or 2048.
    pub page_kib: u64,
}

impl Default for HememConfig {
    fn default() -> Self {
        HememConfig {
            sample_period: 19_997,
            hot_read_threshold: 4,
            hot_write_threshold: 4,
            cooling_threshold: 10,
            kswapd_interval_us: 10_000,
            kswapd_migrate_rate_mb: 10 * 1024,
            cooling_pages: 8192,
            busy_poll_threads: 1,
            busy_poll_shared_cores: 0,
            page_kib: 2048,
        }
    }
}

impl HememConfig {
    /// Check ranges; the error names the field and its valid range.
    pub fn validate(&self) -> Result<(), ConfigError> {
        let at_least = |name: &str, v: u64, min: u64| {
            if v < min {
                Err(format!("policy.{name} must be at least {min}, got {v}"))
            } else {
                Ok(())
            }
        };
        at_least("sample_period", self.sample_period, 1)?;
        at_least("hot_read_threshold", self.hot_read_threshold as u64, 1)?;
        at_least("hot_write_threshold", self.hot_write_threshold as u64, 1)?;
        at_least("cooling_threshold", self.cooling_threshold as u64, 1)?;
        at_least("kswapd_interval_us", self.kswapd_interval_us, 1)?;
        at_least("kswapd_migrate_rate_mb", self.kswapd_migrate_rate_mb, 2)?;
        at_least("cooling_pages", self.cooling_pages, 1)?;
        if self.busy_poll_threads > 4 {
            return Err(format!(
                "policy.busy_poll_threads must be in 0..=4, got {}",
                self.busy_poll_threads
            )
            .into());
        }
        if !PAGE_KIB_CHOICES.contains(&self.page_kib) {
            return Err(format!(
                "policy.page_kib must be 2048 (HeMem's 2 MiB page) or 4 (FreqTier's 4 KiB re-implementation), got {}",
                self.page_kib
            )
            .into());
        }
        if self.busy_poll_shared_cores > 1024 {
            return Err(format!(
                "policy.busy_poll_shared_cores must be in 0..=1024, got {}",
                self.busy_poll_shared_cores
            )
            .into());
        }
        Ok(())
    }

    fn thresholds(&self) -> Thresholds {
        Thresholds {
            hot_read: self.hot_read_threshold,
            hot_write: self.hot_write_threshold,
            cooling: self.cooling_threshold,
        }
    }
}

// ----- pure logic: counters, hotness, lazy cooling (pebs_scan_thread) ----------------

/// Which PEBS buffer a sample came from (`enum pbuftype` in pebs.h).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SampleSource {
    /// A load served by DRAM (`MEM_LOAD_L3_MISS_RETIRED.LOCAL_DRAM`).
    DramRead = 0,
    /// A load served by NVM (`MEM_LOAD_RETIRED.LOCAL_PMM`).
    NvmRead = 1,
    /// A store (`MEM_INST_RETIRED.ALL_STORES`).
    Write = 2,
}

/// The hot and cooling thresholds, in samples.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Thresholds {
    /// Reads (DRAM + NVM) at which a page is hot.
    pub hot_read: u32,
    /// Writes at which a page is hot.
    pub hot_write: u32,
    /// A counter above this advances the cooling clock.
    pub cooling: u32,
}

/// One HeMem page's sample counters (`accesses[]`, `local_clock` of `hemem_page`).
///
/// Cooling is lazy, as in pebs.c: a global clock counts coolings, and a page's
/// counters are shifted right by the number of coolings it has missed the next time
/// it is looked at.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct AccessCounts {
    /// Samples per [`SampleSource`], as of `local_clock`.
    pub accesses: [u32; 3],
    /// The global cooling clock these counts are current for.
    pub local_clock: u64,
}

impl AccessCounts {
    /// Fresh counters, current for `global_clock`.
    pub fn new(global_clock: u64) -> AccessCounts {
        AccessCounts {
            accesses: [0; 3],
            local_clock: global_clock,
        }
    }

    /// Apply the coolings missed since `local_clock`: halve once per clock tick.
    pub fn catch_up(&mut self, global_clock: u64) {
        let missed = global_clock.saturating_sub(self.local_clock);
        if missed > 0 {
            for a in &mut self.accesses {
                *a = if missed >= 32 { 0 } else { *a >> missed };
            }
            self.local_clock = global_clock;
        }
    }

    /// Hot: writes ≥ the write threshold or reads ≥ the read threshold (pebs.c
    /// checks the two separately; reads of DRAM and NVM are summed).
    pub fn is_hot(&self, t: &Thresholds) -> bool {
        self.accesses[SampleSource::Write as usize] >= t.hot_write
            || self.accesses[SampleSource::DramRead as usize]
                + self.accesses[SampleSource::NvmRead as usize]
                >= t.hot_read
    }

    /// Count one sample and return whether the page is hot now. A counter that passes
    /// the cooling threshold advances `global_clock` (halving every page, lazily).
    pub fn record(&mut self, src: SampleSource, global_clock: &mut u64, t: &Thresholds) -> bool {
        self.catch_up(*global_clock);
        let i = src as usize;
        self.accesses[i] = self.accesses[i].saturating_add(1);
        let hot = self.is_hot(t);
        if self.accesses[i] > t.cooling {
            *global_clock += 1;
        }
        hot
    }
}

// ----- FIFO lists (fifo.c) ------------------------------------------------------------

/// The four lists of pebs.c: hot and cold, per tier.
const FAST_HOT: usize = 0;
const FAST_COLD: usize = 1;
const SLOW_HOT: usize = 2;
const SLOW_COLD: usize = 3;
const NO_LIST: u8 = u8::MAX;

fn list_of(fast: bool, hot: bool) -> usize {
    match (fast, hot) {
        (true, true) => FAST_HOT,
        (true, false) => FAST_COLD,
        (false, true) => SLOW_HOT,
        (false, false) => SLOW_COLD,
    }
}

/// A FIFO of regions: new entries at the back, oldest out first (`enqueue_fifo` adds
/// at `first`, `dequeue_fifo` takes `last`). Removal from the middle invalidates the
/// entry (its sequence number no longer matches the region's) instead of unlinking.
#[derive(Debug, Default)]
struct Fifo {
    q: VecDeque<(u32, u64)>,
    live: u64,
}

/// One HeMem page: a `page_kib`-aligned virtual range of a process.
#[derive(Debug, Clone)]
struct Region {
    pid: Pid,
    head: Vpn,
    counts: AccessCounts,
    /// In DRAM (HeMem's `in_dram`).
    fast: bool,
    hot: bool,
    /// The list holding it, or `NO_LIST` while detached or freed.
    list: u8,
    /// Matches the one valid list entry.
    seq: u64,
    alive: bool,
}

/// A cooling pass over one tier's hot list (`partial_cool_peek_and_move`).
#[derive(Debug, Default, Clone, Copy)]
struct CoolWalk {
    /// A cooling happened since the last completed pass.
    needed: bool,
    /// Entries at the front of the hot list still to examine in this pass.
    left: u64,
    /// The global clock when the pass started.
    started_at: u64,
}

/// The policy.
pub struct Hemem {
    cfg: HememConfig,
    th: Thresholds,
    /// Base pages in one HeMem page (`page_kib` / 4).
    region_pages: u64,
    regions: Vec<Region>,
    free_slots: Vec<u32>,
    index: HashMap<(Pid, u64), u32>,
    lists: [Fifo; 4],
    next_seq: u64,
    global_clock: u64,
    /// Cooling passes for the fast and the slow hot list.
    cool: [CoolWalk; 2],
    list_ops: u64,
    frames: u64,
    slow_tier: TierId,
    last_wakeup_ns: Nanos,
    stats: HememStats,
}

#[derive(Debug, Default, Clone, Copy)]
struct HememStats {
    samples: u64,
    promoted_regions: u64,
    demoted_regions: u64,
    promoted_pages: u64,
    demoted_pages: u64,
    failed_migrations: u64,
    stalled_wakeups: u64,
}

impl Hemem {
    /// A policy with the given parameters.
    pub fn new(cfg: HememConfig) -> Hemem {
        Hemem {
            th: cfg.thresholds(),
            region_pages: (cfg.page_kib * 1024 / PAGE_SIZE).max(1),
            cfg,
            regions: Vec::new(),
            free_slots: Vec::new(),
            index: HashMap::new(),
            lists: Default::default(),
            next_seq: 0,
            global_clock: 0,
            cool: [CoolWalk::default(); 2],
            list_ops: 0,
            frames: 0,
            slow_tier: TierId(1),
            last_wakeup_ns: 0,
            stats: HememStats::default(),
        }
    }

    /// The cooling clock: how many times all counters have been halved.
    pub fn coolings(&self) -> u64 {
        self.global_clock
    }

    // ----- list plumbing ----------------------------------------------------------------

    fn detach(&mut self, r: u32) {
        let reg = &mut self.regions[r as usize];
        if reg.list != NO_LIST {
            self.lists[reg.list as usize].live -= 1;
            reg.list = NO_LIST;
        }
        self.next_seq += 1;
        reg.seq = self.next_seq;
    }

    /// Append `r` to `list` (detaching it from its current one).
    fn link(&mut self, r: u32, list: usize) {
        self.detach(r);
        let seq = self.regions[r as usize].seq;
        self.regions[r as usize].list = list as u8;
        let l = &mut self.lists[list];
        l.q.push_back((r, seq));
        l.live += 1;
        self.list_ops += 1;
        self.maybe_compact(list);
    }

    fn valid(&self, (r, seq): (u32, u64), list: usize) -> bool {
        let reg = &self.regions[r as usize];
        reg.alive && reg.seq == seq && reg.list as usize == list
    }

    /// Take the oldest valid entry of `list`, leaving the region detached.
    fn pop_oldest(&mut self, list: usize) -> Option<u32> {
        while let Some(e) = self.lists[list].q.pop_front() {
            if self.valid(e, list) {
                self.list_ops += 1;
                self.detach(e.0);
                return Some(e.0);
            }
        }
        None
    }

    /// Drop invalidated entries once they outnumber the live ones (not while a cooling
    /// pass counts positions in this list).
    fn maybe_compact(&mut self, list: usize) {
        let walking = match list {
            FAST_HOT => self.cool[0].left > 0,
            SLOW_HOT => self.cool[1].left > 0,
            _ => false,
        };
        let l = &self.lists[list];
        if walking || (l.q.len() as u64) <= 2 * l.live + 1024 {
            return;
        }
        let mut q = std::mem::take(&mut self.lists[list].q);
        q.retain(|&e| self.valid(e, list));
        self.lists[list].q = q;
    }

    // ----- regions ----------------------------------------------------------------------

    /// The region of `(pid, vpn)`, created in `tier`'s cold list if new
    /// (`pebs_allocate_page` enqueues a fresh page as cold).
    fn region_for(&mut self, pid: Pid, vpn: Vpn, tier: TierId) -> u32 {
        let key = (pid, vpn / self.region_pages);
        if let Some(&r) = self.index.get(&key) {
            return r;
        }
        let reg = Region {
            pid,
            head: key.1 * self.region_pages,
            counts: AccessCounts::new(self.global_clock),
            fast: tier.is_fast(),
            hot: false,
            list: NO_LIST,
            seq: 0,
            alive: true,
        };
        let r = match self.free_slots.pop() {
            Some(r) => {
                self.regions[r as usize] = reg;
                r
            }
            None => {
                self.regions.push(reg);
                (self.regions.len() - 1) as u32
            }
        };
        self.index.insert(key, r);
        self.link(r, list_of(tier.is_fast(), false));
        r
    }

    fn remove_region(&mut self, r: u32) {
        self.detach(r);
        let reg = &mut self.regions[r as usize];
        reg.alive = false;
        self.index.remove(&(reg.pid, reg.head / self.region_pages));
        self.free_slots.push(r);
    }

    /// Forget regions wholly inside an unmapped range (`pebs_remove_page`).
    fn on_munmap(&mut self, pid: Pid, start: Vpn, nr_pages: u64) {
        let end = start.saturating_add(nr_pages);
        let first = start.div_ceil(self.region_pages);
        let last = end / self.region_pages; // exclusive
        let mut doomed: Vec<u32> = if last.saturating_sub(first) <= self.index.len() as u64 {
            (first..last)
                .filter_map(|i| self.index.get(&(pid, i)).copied())
                .collect()
        } else {
            self.index
                .iter()
                .filter(|((p, i), _)| *p == pid && *i >= first && *i < last)
                .map(|(_, &r)| r)
                .collect()
        };
        doomed.sort_unstable();
        for r in doomed {
            self.remove_region(r);
        }
    }

    /// Resident page units of region `r` outside tier `to`: (vpn, base pages).
    fn units_to_move(&self, mech: &mut dyn Mechanisms, r: u32, to: TierId) -> Vec<(Vpn, u64)> {
        let reg = &self.regions[r as usize];
        let mut units = Vec::new();
        mech.walk_pages(reg.pid, reg.head, self.region_pages, &mut |vpn, info| {
            let moving = if to.is_fast() {
                !info.tier.is_fast()
            } else {
                info.tier.is_fast()
            };
            if moving {
                units.push((vpn, if info.huge { SUBPAGES_PER_HUGE } else { 1 }));
            }
        });
        units
    }

    /// Migrate the units to `to` from the migration thread; returns base pages moved.
    fn move_units(
        &mut self,
        mech: &mut dyn Mechanisms,
        pid: Pid,
        units: &[(Vpn, u64)],
        to: TierId,
    ) -> u64 {
        let mut moved = 0;
        for &(vpn, pages) in units {
            match mech.migrate(pid, vpn, to, MigrateMode::Async) {
                Ok(()) => moved += pages,
                Err(_) => self.stats.failed_migrations += 1,
            }
        }
        moved
    }

    // ----- events -----------------------------------------------------------------------

    /// `pebs_scan_thread`: count the sample, reclassify the region.
    fn on_sample(&mut self, s: &Sample) {
        self.stats.samples += 1;
        let src = match s.kind {
            SampleKind::Store => SampleSource::Write,
            SampleKind::LlcLoadMiss if s.tier.is_fast() => SampleSource::DramRead,
            SampleKind::LlcLoadMiss => SampleSource::NvmRead,
        };
        let r = self.region_for(s.pid, s.vpn, s.tier);
        let clock_before = self.global_clock;
        let th = self.th;
        let hot = self.regions[r as usize]
            .counts
            .record(src, &mut self.global_clock, &th);
        if self.global_clock != clock_before {
            // need_cool_dram = need_cool_nvm = true
            self.cool[0].needed = true;
            self.cool[1].needed = true;
        }
        let reg = &mut self.regions[r as usize];
        if reg.hot != hot {
            // make_hot / make_cold, done by the policy thread from the rings in
            // pebs.c; applied at once here (the ring is a hand-off, not a delay).
            reg.hot = hot;
            let list = list_of(reg.fast, hot);
            self.link(r, list);
        }
    }

    /// `pebs_policy_thread`, one iteration.
    fn kswapd(&mut self, mech: &mut dyn Mechanisms) {
        self.stall_for_busy_pollers(mech);
        self.last_wakeup_ns = mech.now();
        let interval_ns = self.cfg.kswapd_interval_us * 1000;
        let stalled = self.promote_hot_slow(mech);
        if stalled {
            // "all dram pages are hot": pebs.c jumps past the cooling step.
            self.stats.stalled_wakeups += 1;
        } else {
            self.cool_step(0, FAST_HOT, FAST_COLD);
            self.cool_step(1, SLOW_HOT, SLOW_COLD);
        }
        mech.charge_cpu(std::mem::take(&mut self.list_ops) * LIST_OP_NS);
        mech.schedule(mech.now() + interval_ns, KSWAPD_TIMER, Runner::Kthread);
    }

    /// The time the busy pollers took from each application thread since the last
    /// wake-up, when they share its cores: their fair share of them.
    fn stall_for_busy_pollers(&mut self, mech: &mut dyn Mechanisms) {
        let (pollers, cores) = (
            self.cfg.busy_poll_threads as u64,
            self.cfg.busy_poll_shared_cores as u64,
        );
        if pollers == 0 || cores == 0 {
            return;
        }
        let elapsed = mech.now().saturating_sub(self.last_wakeup_ns);
        mech.stall_app_threads(elapsed * pollers / (cores + pollers));
    }

    /// Move hot slow regions to DRAM, oldest first, demoting cold DRAM regions to make
    /// room. Returns true when it stopped because every DRAM region is hot.
    fn promote_hot_slow(&mut self, mech: &mut dyn Mechanisms) -> bool {
        let budget = self.cfg.kswapd_migrate_rate_mb * MIB;
        let fast_min = mech.watermarks(TierId::FAST).min;
        let mut promoted_bytes = 0;
        while promoted_bytes < budget {
            let Some(r) = self.pop_oldest(SLOW_HOT) else {
                return false; // nothing in NVM is hot
            };
            let clock = self.global_clock;
            let reg = &mut self.regions[r as usize];
            reg.counts.catch_up(clock);
            if !reg.counts.is_hot(&self.th) {
                // Cooled since it was listed.
                reg.hot = false;
                self.link(r, SLOW_COLD);
                continue;
            }
            let units = self.units_to_move(mech, r, TierId::FAST);
            let need: u64 = units.iter().map(|u| u.1).sum();
            if need > 0 && !self.make_room(mech, need, fast_min) {
                self.link(r, SLOW_HOT); // back where it came from
                return true;
            }
            let pid = self.regions[r as usize].pid;
            let moved = self.move_units(mech, pid, &units, TierId::FAST);
            if moved > 0 {
                self.stats.promoted_regions += 1;
                self.stats.promoted_pages += moved;
            }
            self.regions[r as usize].fast = true;
            self.link(r, FAST_HOT);
            promoted_bytes += moved * PAGE_SIZE;
        }
        false
    }

    /// Demote the oldest cold DRAM regions until `need` pages fit above the fast
    /// tier's min watermark (the simulator's stand-in for "a free DRAM page").
    fn make_room(&mut self, mech: &mut dyn Mechanisms, need: u64, fast_min: f64) -> bool {
        while (mech.free_pages(TierId::FAST) as f64) < fast_min + need as f64 {
            let Some(v) = self.pop_oldest(FAST_COLD) else {
                return false;
            };
            let units = self.units_to_move(mech, v, self.slow_tier);
            let pid = self.regions[v as usize].pid;
            let moved = self.move_units(mech, pid, &units, self.slow_tier);
            if moved > 0 {
                self.stats.demoted_regions += 1;
                self.stats.demoted_pages += moved;
            }
            self.regions[v as usize].fast = false;
            self.link(v, SLOW_COLD);
        }
        true
    }

    /// One step of a cooling pass over a hot list: regions no longer hot after their
    /// missed coolings go to the cold list.
    fn cool_step(&mut self, walk: usize, hot: usize, cold: usize) {
        let w = &mut self.cool[walk];
        if !w.needed && w.left == 0 {
            return;
        }
        if w.left == 0 {
            w.left = self.lists[hot].q.len() as u64;
            w.started_at = self.global_clock;
            w.needed = false;
        }
        let mut examined = 0;
        while examined < self.cfg.cooling_pages && self.cool[walk].left > 0 {
            let Some(e) = self.lists[hot].q.pop_front() else {
                self.cool[walk].left = 0;
                break;
            };
            self.cool[walk].left -= 1;
            if !self.valid(e, hot) {
                continue;
            }
            examined += 1;
            self.list_ops += 1;
            let clock = self.global_clock;
            let reg = &mut self.regions[e.0 as usize];
            reg.counts.catch_up(clock);
            if reg.counts.is_hot(&self.th) {
                self.lists[hot].q.push_back(e); // stays, same entry
            } else {
                reg.hot = false;
                self.link(e.0, cold);
            }
        }
        let w = &mut self.cool[walk];
        if w.left == 0 && self.global_clock != w.started_at {
            w.needed = true; // cooled again during the pass
        }
    }
}

impl Policy for Hemem {
    fn name(&self) -> &'static str {
        "hemem"
    }

    fn requirements(&self) -> Requirements {
        // HeMem places every page itself (its missing-fault handler), so it knows
        // each page from allocation on.
        Requirements {
            page_alloc_events: true,
            sampling: true,
            ..Default::default()
        }
    }

    fn init(&mut self, mech: &mut dyn Mechanisms) {
        mech.set_sample_period(SampleKind::LlcLoadMiss, self.cfg.sample_period);
        mech.set_sample_period(SampleKind::Store, self.cfg.sample_period);
        let tiers = mech.tiers();
        self.slow_tier = TierId(tiers.len().min(2) as u8 - 1);
        // HeMem allocates a hemem_page for every frame of DRAM and NVM at start.
        self.frames = tiers
            .iter()
            .map(|t| t.capacity_pages.div_ceil(self.region_pages))
            .sum();
        let first = mech.now() + self.cfg.kswapd_interval_us * 1000;
        mech.schedule(first, KSWAPD_TIMER, Runner::Kthread);
    }

    fn on_event(&mut self, event: &Event, mech: &mut dyn Mechanisms) {
        match event {
            Event::Sample(s) => self.on_sample(s),
            Event::PageAlloc { pid, vpn, tier, .. } => {
                self.region_for(*pid, *vpn, *tier);
            }
            Event::Munmap {
                pid,
                start_vpn,
                nr_pages,
                ..
            } => self.on_munmap(*pid, *start_vpn, *nr_pages),
            Event::Timer { id: KSWAPD_TIMER } => self.kswapd(mech),
            _ => {}
        }
    }

    fn metadata_bytes(&self) -> u64 {
        let per_page = if self.region_pages == 1 {
            FREQTIER_HEMEM_PAGE_BYTES
        } else {
            HEMEM_PAGE_STRUCT_BYTES
        };
        self.frames * per_page
    }

    fn stats(&self) -> Vec<(&'static str, f64)> {
        let s = &self.stats;
        // pebs_scan_thread spins on its own core from start to end.
        let busy_poll = self.last_wakeup_ns as f64 / 1e9 * self.cfg.busy_poll_threads as f64;
        vec![
            ("busy_poll_cpu_seconds", busy_poll),
            ("samples", s.samples as f64),
            ("coolings", self.global_clock as f64),
            ("promoted_regions", s.promoted_regions as f64),
            ("demoted_regions", s.demoted_regions as f64),
            ("promoted_pages", s.promoted_pages as f64),
            ("demoted_pages", s.demoted_pages as f64),
            ("failed_migrations", s.failed_migrations as f64),
            ("stalled_wakeups", s.stalled_wakeups as f64),
            ("fast_hot_regions", self.lists[FAST_HOT].live as f64),
            ("fast_cold_regions", self.lists[FAST_COLD].live as f64),
            ("slow_hot_regions", self.lists[SLOW_HOT].live as f64),
            ("slow_cold_regions", self.lists[SLOW_COLD].live as f64),
        ]
    }
}

impl HememConfig {
    /// Sampled simulation: the migration budget per 10 ms interval (MB) and the pages
    /// cooled per pass scale. The PEBS period and the hot and cooling thresholds are
    /// per page (each sampled page sees all its own events) and do not.
    pub fn scale_space(&mut self, s: SpaceScale) {
        self.kswapd_migrate_rate_mb = s.count(self.kswapd_migrate_rate_mb);
        self.cooling_pages = s.count(self.cooling_pages);
    }
}

/// The registry's view of [`HememConfig`] (`PolicyConfig` in the crate root).
impl crate::RegisteredConfig for HememConfig {
    fn check(&self) -> Result<(), ConfigError> {
        self.validate()
    }

    fn scale(&mut self, scale: tierkit_core::SpaceScale) {
        self.scale_space(scale)
    }

    fn build_policy(&self, _ctx: &tierkit_core::BuildContext) -> Box<dyn tierkit_core::Policy> {
        Box::new(Hemem::new(self.clone()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const TH: Thresholds = Thresholds {
        hot_read: 4,
        hot_write: 4,
        cooling: 10,
    };

    #[test]
    fn reads_make_a_page_hot_at_the_threshold_and_not_before() {
        let mut clock = 0;
        let mut c = AccessCounts::new(0);
        for i in 1..=3 {
            let src = if i % 2 == 0 {
                SampleSource::NvmRead
            } else {
                SampleSource::DramRead
            };
            assert!(!c.record(src, &mut clock, &TH), "hot after {i} reads");
        }
        // DRAM and NVM reads are summed: the fourth read of either kind makes it hot.
        assert!(c.record(SampleSource::NvmRead, &mut clock, &TH));
        assert_eq!(clock, 0, "no counter passed the cooling threshold");
    }

    #[test]
    fn writes_and_reads_are_thresholded_separately() {
        let mut clock = 0;
        let mut c = AccessCounts::new(0);
        for _ in 0..3 {
            assert!(!c.record(SampleSource::Write, &mut clock, &TH));
        }
        for _ in 0..3 {
            assert!(!c.record(SampleSource::DramRead, &mut clock, &TH));
        }
        // 3 writes + 3 reads: not hot; one more write is.
        assert!(!c.is_hot(&TH));
        assert!(c.record(SampleSource::Write, &mut clock, &TH));
    }

    #[test]
    fn passing_the_cooling_threshold_halves_every_counter_lazily() {
        let mut clock = 0;
        let mut a = AccessCounts::new(0);
        let mut b = AccessCounts::new(0);
        for _ in 0..9 {
            a.record(SampleSource::DramRead, &mut clock, &TH);
        }
        for _ in 0..3 {
            a.record(SampleSource::Write, &mut clock, &TH);
        }
        for _ in 0..10 {
            b.record(SampleSource::NvmRead, &mut clock, &TH);
        }
        assert_eq!(clock, 0, "10 is not above the threshold");
        b.record(SampleSource::NvmRead, &mut clock, &TH);
        assert_eq!(clock, 1, "11 > 10 advances the cooling clock");
        // a has not been touched: its stored counts are stale until looked at.
        assert_eq!(a.accesses, [9, 0, 3]);
        a.catch_up(clock);
        assert_eq!(a.accesses, [4, 0, 1]);
        assert!(a.is_hot(&TH), "4 reads after halving");
        b.catch_up(clock);
        assert_eq!(b.accesses, [0, 5, 0]);
        // Two more coolings: a drops to 1 read, no longer hot.
        a.catch_up(clock + 2);
        assert_eq!(a.accesses, [1, 0, 0]);
        assert!(!a.is_hot(&TH));
        a.catch_up(clock + 100);
        assert_eq!(a.accesses, [0, 0, 0]);
    }

    mod sim {
        use super::super::*;
        use tierkit_sim::config::{ThpMode, TieringCpus};
        use tierkit_sim::testing::{read, run, small_machine, wait_then_read, Script};
        use tierkit_sim::{MachineConfig, SimConfig};
        use tierkit_workloads::{GupsConfig, WorkloadConfig};

        const BASE: u64 = 1 << 30;
        /// A 4 MiB mapping that fills the 4 MiB fast tier, then is unmapped.
        const FILL: u64 = BASE;
        /// The watched region; allocated while the fast tier is full, so slow.
        const T: u64 = BASE + 8 * MIB;
        /// A region allocated after the unmap (fast), read to cool.
        const W: u64 = BASE + 16 * MIB;
        /// A region read once at the end, after a wait.
        const X: u64 = BASE + 24 * MIB;

        fn every_access_sampled() -> HememConfig {
            HememConfig {
                sample_period: 1,
                ..Default::default()
            }
        }

        /// Fill the fast tier, put one page of `T` in the slow tier, free the fast
        /// tier, then run `then` and wait 50 ms (five migration wake-ups).
        fn scenario(then: Vec<Op>) -> (tierkit_sim::RunOutput, tierkit_sim::machine::Machine) {
            scenario_with(every_access_sampled(), &[T], then)
        }

        /// [`scenario`] with `cfg`, the pages `slow` (of `T`'s region) allocated while
        /// the fast tier is full.
        fn scenario_with(
            cfg: HememConfig,
            slow: &[u64],
            then: Vec<Op>,
        ) -> (tierkit_sim::RunOutput, tierkit_sim::machine::Machine) {
            let mut ops: Vec<Op> = (0..1024).map(|i| read(FILL + i * PAGE_SIZE, 0)).collect();
            // Allocations: the first sample of each.
            ops.extend(slow.iter().map(|&a| read(a, 0)));
            ops.push(Op::Munmap {
                addr: FILL,
                len: 4 * MIB,
            });
            ops.extend(then);
            wait_then_read(X, 50 * NS_PER_MS, &mut ops);
            let maps = [(FILL, 4 * MIB), (T, 2 * MIB), (W, 2 * MIB), (X, 2 * MIB)];
            let w = Script::new(8 * MIB).process(&maps, ops);
            run(
                &small_machine(4, 64),
                &SimConfig::default(),
                Box::new(Hemem::new(cfg)),
                Box::new(w),
            )
        }

        fn tier_of(m: &tierkit_sim::machine::Machine, addr: u64) -> TierId {
            Mechanisms::page(m, Pid(0), addr >> PAGE_SHIFT)
                .unwrap()
                .tier
        }

        use crate::lru::test_scripts::stat;

        #[test]
        fn a_slow_region_is_promoted_after_its_fourth_read_sample_and_not_before() {
            // 3 samples in all (allocation + 2 reads): stays slow.
            let (out, m) = scenario(vec![read(T, 100), read(T, 100)]);
            assert_eq!(tier_of(&m, T), TierId(1));
            assert_eq!(stat(&out, "promoted_regions"), 0.0);
            // 4 samples: hot, promoted by the next wake-up of the migration thread.
            let (out, m) = scenario(vec![read(T, 100), read(T, 100), read(T, 100)]);
            assert_eq!(tier_of(&m, T), TierId::FAST);
            assert_eq!(stat(&out, "promoted_regions"), 1.0);
            assert_eq!(out.summary.promoted_pages, 1);
        }

        /// Two slow pages of one 2 MiB range, one read four times, the other once: the
        /// 2 MiB page (five samples) is hot and both move; at 4 KiB only the page
        /// with four samples does, and its neighbour (one sample) stays slow.
        #[test]
        fn a_4kib_page_is_promoted_alone_where_a_2mib_page_moves_with_its_neighbour() {
            let neighbour = T + PAGE_SIZE;
            let slow = [T, neighbour];
            let then = || vec![read(T, 100), read(T, 100), read(T, 100)];
            let (_, m) = scenario_with(every_access_sampled(), &slow, vec![]);
            assert_eq!(tier_of(&m, T), TierId(1), "allocated slow");
            assert_eq!(tier_of(&m, neighbour), TierId(1), "allocated slow");
            let (out, m) = scenario_with(every_access_sampled(), &slow, then());
            assert_eq!(tier_of(&m, T), TierId::FAST);
            assert_eq!(tier_of(&m, neighbour), TierId::FAST);
            assert_eq!(out.summary.promoted_pages, 2);
            let base_pages = HememConfig {
                page_kib: 4,
                ..every_access_sampled()
            };
            let (out, m) = scenario_with(base_pages, &slow, then());
            assert_eq!(tier_of(&m, T), TierId::FAST);
            assert_eq!(tier_of(&m, neighbour), TierId(1));
            assert_eq!(out.summary.promoted_pages, 1);
            assert_eq!(stat(&out, "promoted_regions"), 1.0);
        }

        #[test]
        fn a_cooling_between_samples_halves_the_count_and_keeps_the_region_slow() {
            // T: 3 samples, then W is read `w_reads` times, then T twice more.
            let run_with = |w_reads: u64| {
                let mut then = vec![read(T, 100), read(T, 100)];
                then.extend((0..w_reads).map(|_| read(W, 100)));
                then.extend([read(T, 100), read(T, 100)]);
                scenario(then)
            };
            // W read 10 times: no counter above 10, T reaches 5 samples and is hot.
            let (out, m) = run_with(10);
            assert_eq!(tier_of(&m, T), TierId::FAST);
            let coolings_before = stat(&out, "coolings");
            // W read 11 times: one cooling halves T's 3 to 1, +2 = 3: not hot.
            let (out, m) = run_with(11);
            assert_eq!(stat(&out, "coolings"), coolings_before + 1.0);
            assert_eq!(tier_of(&m, T), TierId(1));
        }

        /// Run gups (256 MiB, 1:8, LLC off: a 32 MiB LLC would hold the whole 25.6 MiB
        /// hot set) and return the run's fast access ratio.
        /// GUPS 256 MiB (90% of updates on a hot tenth that starts on the slow tier),
        /// `cxl` preset, fast 1:8, LLC off (a 32 MiB LLC would hold the hot set).
        fn gups(
            policy: Box<dyn Policy>,
            thp: ThpMode,
            cpus: TieringCpus,
            nr_updates: u64,
        ) -> tierkit_sim::RunOutput {
            let machine = MachineConfig {
                fast: "1:8".into(),
                thp,
                llc_enabled: false,
                tiering_cpus: cpus,
                ..MachineConfig::default()
            };
            let w = WorkloadConfig::Gups(GupsConfig {
                footprint_mib: 256,
                nr_updates,
                ..Default::default()
            })
            .build(7);
            let (out, m) = run(&machine, &SimConfig::default(), policy, w);
            eprintln!(
                "  {:.2} s simulated, fast ratio {:.3} (last interval {:.3}), promoted {} demoted {} pages, tiering CPU {:.3} s",
                out.summary.sim_seconds,
                out.summary.fast_access_ratio,
                out.series.rows.last().unwrap().fast_access_ratio,
                out.summary.promoted_pages,
                out.summary.demoted_pages,
                out.summary.tiering_cpu_seconds,
            );
            let wm = Mechanisms::watermarks(&m, TierId::FAST);
            assert!(m.used_pages(TierId(0)) <= m.capacity_pages(TierId(0)) - wm.min as u64);
            out
        }

        fn hemem() -> Box<dyn Policy> {
            Box::new(Hemem::new(HememConfig::default()))
        }

        /// docs/policies/hemem.md ("Measured"): the 13 hot 2 MiB regions (6656 pages)
        /// are promoted, each displacing one cold region, early in the run and nothing
        /// moves afterwards; hot-set ratio over 0.9 at the end; the run at least 1.5×
        /// faster than first-touch; huge pages and shared tiering CPUs change nothing
        /// that matters (HeMem migrates 2 MiB regions either way; its threads are idle
        /// once the hot set is in place).
        #[test]
        fn gups_hot_set_moves_to_the_fast_tier() {
            let d = TieringCpus::Dedicated;
            let n = 12_000_000;
            let ft = gups(Box::new(crate::FirstTouch), ThpMode::Never, d, n);
            let base = gups(hemem(), ThpMode::Never, d, n);
            let thp = gups(hemem(), ThpMode::Always, d, n);
            let shared = gups(hemem(), ThpMode::Never, TieringCpus::Shared, n);
            let (f, b) = (&ft.summary, &base.summary);
            assert!(
                b.fast_access_ratio > f.fast_access_ratio + 0.3,
                "hemem {} vs first-touch {}",
                b.fast_access_ratio,
                f.fast_access_ratio
            );
            assert_eq!((b.promoted_pages, b.demoted_pages), (6656, 6656));
            assert!(base.series.rows.last().unwrap().fast_access_ratio > 0.9);
            let moved_late: u64 = base
                .series
                .rows
                .iter()
                .filter(|r| r.time_s > 0.1)
                .map(|r| r.promoted_pages + r.demoted_pages)
                .sum();
            assert_eq!(moved_late, 0, "hemem kept moving pages after 100 ms");
            assert!(
                f.sim_seconds > 1.5 * b.sim_seconds,
                "hemem {} s vs first-touch {} s",
                b.sim_seconds,
                f.sim_seconds
            );
            let t = &thp.summary;
            assert_eq!(t.promoted_pages, b.promoted_pages, "THP");
            assert!(
                (t.sim_seconds / b.sim_seconds - 1.0).abs() < 0.03,
                "THP: {} s vs {} s",
                t.sim_seconds,
                b.sim_seconds
            );
            // On the application's CPUs, HeMem's tiering time is the one thread's to
            // pay: the run grows by that time, no more, no less.
            let sh = &shared.summary;
            assert_eq!(sh.promoted_pages, b.promoted_pages, "shared CPUs");
            let grew = sh.sim_seconds - b.sim_seconds;
            assert!(
                (grew - sh.tiering_cpu_seconds).abs() < 0.1 * sh.tiering_cpu_seconds,
                "shared CPUs: the run grew {grew} s for {} s of tiering CPU",
                sh.tiering_cpu_seconds
            );
        }

        /// A busy poller sharing C cores with the application takes 1/(C + 1) of every
        /// application thread's time, so the run lasts (C + 1)/C times as long; on
        /// dedicated tiering CPUs, or with the default (not charged), nothing changes.
        #[test]
        fn a_busy_poller_on_shared_cores_takes_its_fair_share() {
            let on = |cores| {
                Box::new(Hemem::new(HememConfig {
                    busy_poll_shared_cores: cores,
                    ..HememConfig::default()
                })) as Box<dyn Policy>
            };
            let (d, sh, n) = (TieringCpus::Dedicated, TieringCpus::Shared, 6_000_000);
            let base = gups(on(0), ThpMode::Never, sh, n).summary;
            let polled = gups(on(3), ThpMode::Never, sh, n).summary;
            let ratio = polled.sim_seconds / base.sim_seconds;
            assert!(
                (ratio - 4.0 / 3.0).abs() < 0.01,
                "one poller on 3 shared cores: the run grew {ratio}x, not 4/3"
            );
            assert_eq!(polled.promoted_pages, base.promoted_pages);
            let stolen = polled.app_tiering_stall_seconds - base.app_tiering_stall_seconds;
            assert!(
                (stolen / polled.sim_seconds - 0.25).abs() < 0.01,
                "stolen {stolen} s of a {} s run",
                polled.sim_seconds
            );
            let dedicated = gups(on(3), ThpMode::Never, d, n).summary;
            let unpolled = gups(on(0), ThpMode::Never, d, n).summary;
            assert_eq!(dedicated.sim_seconds, unpolled.sim_seconds);
        }
    }

    #[test]
    fn config_defaults_are_pebs_h_and_validate() {
        let c = HememConfig::default();
        assert_eq!(c.sample_period, 19_997);
        assert_eq!(c.kswapd_migrate_rate_mb, 10_240);
        c.validate().unwrap();
        let bad = HememConfig {
            hot_read_threshold: 0,
            ..Default::default()
        };
        assert!(bad
            .validate()
            .unwrap_err()
            .to_string()
            .contains("hot_read_threshold"));
        for (kib, ok) in [(4, true), (2048, true), (8, false), (0, false)] {
            let c = HememConfig {
                page_kib: kib,
                ..Default::default()
            };
            match c.validate() {
                Ok(()) => assert!(ok, "page_kib = {kib} accepted"),
                Err(e) => {
                    assert!(!ok, "page_kib = {kib} refused: {e}");
                    assert!(
                        e.to_string().contains("policy.page_kib must be 2048"),
                        "{e}"
                    );
                }
            }
        }
        // The metadata HeMem allocates at start: one struct per frame of both tiers.
        let frames = |kib: u64| {
            let mut p = Hemem::new(HememConfig {
                page_kib: kib,
                ..Default::default()
            });
            p.frames = 1 << 20; // 4 GiB of 4 KiB frames or 2 TiB of 2 MiB ones
            p.metadata_bytes()
        };
        assert_eq!(frames(2048), (1 << 20) * HEMEM_PAGE_STRUCT_BYTES);
        assert_eq!(frames(4), (1 << 20) * FREQTIER_HEMEM_PAGE_BYTES);
    }
}
