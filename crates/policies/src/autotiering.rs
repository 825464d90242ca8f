//! `autotiering`: AutoTiering (Kim et al., ATC '21), NUMA-balancing hinting faults
//! plus an 8-bit per-page access history, the least-accessed-page (LAP) history.
//!
//! Reference: the AutoTiering kernel (Linux 5.3, `Sys-KU/AutoTiering`:
//! `mm/page_balancing.c`, `mm/migrate.c` `migrate_misplaced_page` and
//! `try_demote_from_busy_node`, `mm/page_alloc.c` `kdemoted`, `mm/mprotect.c`
//! `change_pte_range`) and its run scripts (`Sys-KU/AutoTiering-userspace`
//! `run-bench.sh`).
//!
//! How it runs here:
//! - **Scan** ([`crate::numa_scan`], every page armed): at each pass a page's history
//!   shifts left and its low bit records whether the page was accessed (took a hinting
//!   fault, or was newly mapped) since the previous pass. The *level* of a page is the
//!   number of set bits (0–8). Fast-tier pages are kept in nine LAP lists by level:
//!   pages just accessed at the tail, the others at the head.
//! - **Fault on a slow page**: promote at once (synchronously) if the fast tier stays
//!   above its high watermark. Otherwise, by mode:
//!   - `cpm`: fail (conservative promotion only);
//!   - `opm-bd` (the default, "OPM with background demotion"): if the page's level is
//!     above the lowest non-empty LAP level, promote into a small pool of fast pages
//!     reserved for promotions; when the pool is at its low mark, wake `kdemoted`,
//!     which demotes the least-accessed fast pages to refill it (and this fault fails);
//!   - `opm`: demote the least-accessed fast page below the page's level in the fault,
//!     then promote if the fast tier is now above its high watermark;
//!   - `opmx`: exchange the page with that least-accessed fast page.
//!
//! Parameters and decisions: `docs/policies/autotiering.md`.

use crate::numa_scan::{ArmFilter, NumaScanConfig, NumaScanner};
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, VecDeque};
use tierkit_core::*;

/// History bits per page (`ACCESS_HISTORY_SIZE`).
pub const HISTORY_BITS: u32 = 8;
/// The highest level (`MAX_ACCESS_LEVEL`); there are `MAX_LEVEL + 1` LAP lists.
pub const MAX_LEVEL: usize = HISTORY_BITS as usize;
/// Scan-time cost per page of the history shift and LAP list move under `lru_lock`
/// (`mod_page_access_lv` + `add_page_for_tracking`), ns.
const LAP_UPDATE_NS: u64 = 20;
/// Bytes per physical 4 KiB frame: `struct page_info` (list_head 16, pfn 8, last_cpu
/// 1, access_bitmap 1, padded to 32) plus the `page_ext` flags word (8).
pub const PAGE_INFO_BYTES: u64 = 40;

/// Which AutoTiering configuration runs (`kernel.numa_balancing_extended` and
/// `/sys/kernel/mm/page_balancing/background_demotion`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum AutotieringMode {
    /// Conservative promotion: only while the fast tier has free space (CPM, 001).
    Cpm,
    /// Opportunistic promotion with on-demand demotion in the fault (OPM, 010).
    Opm,
    /// Opportunistic promotion by page exchange in the fault (OPMX, 110).
    Opmx,
    /// Opportunistic promotion into a pool refilled by background demotion
    /// (OPM-BD: 010 with `background_demotion` = 1), the configuration MEMTIS
    /// (`--opm bg`) and Chrono compare against.
    OpmBd,
}

/// `autotiering` parameters.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct AutotieringConfig {
    /// The variant (default `opm-bd`).
    pub mode: AutotieringMode,
    /// The NUMA-balancing scanner. Defaults are what AutoTiering-userspace
    /// `run-bench.sh` sets for OPM: `scan_period_max_ms` 1000 and `scan_size_mb` 2048
    /// (so one pass per second); its CPM runs use the kernel's 60000 and 256.
    pub scan: NumaScanConfig,
    /// Reserved promotion pool, base pages: kdemoted refills it to this
    /// (`MAX_NR_FREE_PAGES` 16, per CPU). Range ≥ 1.
    pub pool_max_pages: u64,
    /// A pool promotion needs more than this many base pages in the pool; at or below
    /// it a fault wakes kdemoted (`MIN_NR_FREE_PAGES` 4). Range < `pool_max_pages`.
    pub pool_min_pages: u64,
    /// The pool's size in huge pages when THP is on (`MAX_NR_FREE_HPAGES` 4). Range ≥ 1.
    pub pool_max_huge_pages: u64,
    /// Its low mark in huge pages (`MIN_NR_FREE_HPAGES` 3). Range <
    /// `pool_max_huge_pages`.
    pub pool_min_huge_pages: u64,
}

impl Default for AutotieringConfig {
    fn default() -> Self {
        AutotieringConfig {
            mode: AutotieringMode::OpmBd,
            scan: NumaScanConfig {
                scan_period_max_ms: 1000,
                scan_size_mb: 2048,
                ..NumaScanConfig::default()
            },
            pool_max_pages: 16,
            pool_min_pages: 4,
            pool_max_huge_pages: 4,
            pool_min_huge_pages: 3,
        }
    }
}

impl AutotieringConfig {
    /// Check ranges; the error names the field and its valid range.
    pub fn validate(&self) -> Result<(), ConfigError> {
        self.scan
            .validate()
            .map_err(|e| format!("policy.scan: {e}"))?;
        for (what, min, max) in [
            (
                "pool_min_pages / pool_max_pages",
                self.pool_min_pages,
                self.pool_max_pages,
            ),
            (
                "pool_min_huge_pages / pool_max_huge_pages",
                self.pool_min_huge_pages,
                self.pool_max_huge_pages,
            ),
        ] {
            if max == 0 || min >= max {
                return Err(format!(
                    "policy.{what} must satisfy 0 <= min < max and max >= 1, got {min} / {max}"
                )
                .into());
            }
        }
        Ok(())
    }
}

// ----- pure logic: the LAP history ----------------------------------------------------

/// A page's access history: bit 0 is the last scan period, bit 7 the eighth-last
/// (`page_info.access_bitmap`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LapHistory(pub u8);

impl LapHistory {
    /// A newly allocated page: all ones, the hottest level
    /// (`reset_page_access_lv` sets `(u8)~(1 << 8)` = 0xff).
    pub const NEW: LapHistory = LapHistory(0xff);

    /// The level: the number of the last eight periods the page was accessed in
    /// (`__get_page_access_lv`).
    pub fn level(self) -> usize {
        self.0.count_ones() as usize
    }

    /// End of a scan period: shift left, record whether the page was accessed in it
    /// (`mod_page_access_lv`). Returns the level before the shift.
    pub fn shift(&mut self, accessed: bool) -> usize {
        let prev = self.level();
        self.0 = (self.0 << 1) | accessed as u8;
        prev
    }
}

/// The lowest level whose LAP list is non-empty, or `MAX_LEVEL + 1` when all are
/// empty (`bt_lv` in `try_demote_from_busy_node` and `wakeup_kdemoted`).
pub fn bottom_level(live: &[u64; MAX_LEVEL + 1]) -> usize {
    live.iter().position(|&n| n > 0).unwrap_or(MAX_LEVEL + 1)
}

/// A faulting slow page may take a fast page's place only when its level is above the
/// lowest occupied LAP level (else `PGPROMOTE_LOW_FREQ_FAIL`).
pub fn may_displace(fault_level: usize, bottom: usize) -> bool {
    fault_level > bottom
}

// ----- per-page state and LAP lists ---------------------------------------------------

const NO_LAP: u8 = u8::MAX;

/// What AutoTiering keeps for one page unit (`page_info` + the fault since last scan).
#[derive(Debug, Clone, Copy)]
struct AtPage {
    history: LapHistory,
    /// Accessed since the last scan pass: took a hinting fault, or got a fresh PTE
    /// (allocation, migration), which the next scan sees as "not PROT_NONE".
    accessed: bool,
    huge: bool,
    fast: bool,
    /// Its LAP list level, or `NO_LAP`.
    lap: u8,
    seq: u64,
}

/// One LAP list: head = front (pages not accessed in the last period are added
/// there, and victims are taken from there), tail = back.
#[derive(Debug, Default)]
struct LapList {
    q: VecDeque<(Pid, Vpn, u64)>,
    live: u64,
}

/// The policy.
pub struct Autotiering {
    /// The registered name it runs under (`autotiering`, or `autotiering-cpm`).
    name: &'static str,
    cfg: AutotieringConfig,
    scanner: NumaScanner,
    /// Per process: page units by vpn (head vpn for huge pages).
    pages: Vec<BTreeMap<Vpn, AtPage>>,
    laps: [LapList; MAX_LEVEL + 1],
    next_seq: u64,
    /// Reserved promotion pool, in units of base (0) and huge (1) pages.
    pool: [u64; 2],
    /// A huge page has been seen: THP is on, and only huge pages are tracked.
    thp: bool,
    slow_tier: TierId,
    frames: u64,
    stats: AtStats,
}

#[derive(Debug, Default, Clone, Copy)]
struct AtStats {
    promoted_free: u64,
    promoted_pool: u64,
    exchanged: u64,
    demoted_in_fault: u64,
    demoted_kdemoted: u64,
    failed_low_level: u64,
    failed_no_space: u64,
    kdemoted_runs: u64,
}

impl Autotiering {
    /// A policy with the given parameters.
    pub fn new(cfg: AutotieringConfig) -> Autotiering {
        Autotiering::named("autotiering", cfg)
    }

    /// The policy under another registered name (`autotiering-cpm`).
    pub fn named(name: &'static str, cfg: AutotieringConfig) -> Autotiering {
        Autotiering {
            name,
            scanner: NumaScanner::new(cfg.scan.clone()),
            cfg,
            pages: Vec::new(),
            laps: Default::default(),
            next_seq: 0,
            pool: [0; 2],
            thp: false,
            slow_tier: TierId(1),
            frames: 0,
            stats: AtStats::default(),
        }
    }

    fn lap_live(&self) -> [u64; MAX_LEVEL + 1] {
        std::array::from_fn(|l| self.laps[l].live)
    }

    fn procs(&mut self, pid: Pid) -> &mut BTreeMap<Vpn, AtPage> {
        if self.pages.len() <= pid.index() {
            self.pages.resize_with(pid.index() + 1, BTreeMap::new);
        }
        &mut self.pages[pid.index()]
    }

    /// The page unit, created as a new page (`reset_page_access_lv`) if unknown.
    fn page_mut(&mut self, pid: Pid, vpn: Vpn, fast: bool, huge: bool) -> &mut AtPage {
        self.procs(pid).entry(vpn).or_insert(AtPage {
            history: LapHistory::NEW,
            accessed: true,
            huge,
            fast,
            lap: NO_LAP,
            seq: 0,
        })
    }

    // ----- LAP lists --------------------------------------------------------------------

    /// Take the page out of its LAP list (`del_page_from_lap_list`).
    fn lap_remove(&mut self, pid: Pid, vpn: Vpn) {
        let Some(p) = self
            .pages
            .get_mut(pid.index())
            .and_then(|m| m.get_mut(&vpn))
        else {
            return;
        };
        if p.lap != NO_LAP {
            self.laps[p.lap as usize].live -= 1;
            p.lap = NO_LAP;
        }
        self.next_seq += 1;
        p.seq = self.next_seq;
    }

    /// Put the page in the list of its level: tail if accessed in the last period,
    /// head if not (`add_page_for_tracking`).
    fn lap_place(&mut self, pid: Pid, vpn: Vpn) {
        self.lap_remove(pid, vpn);
        let p = self.pages[pid.index()].get_mut(&vpn).expect("page exists");
        let level = p.history.level();
        p.lap = level as u8;
        let entry = (pid, vpn, p.seq);
        let recent = p.history.0 & 1 == 1;
        let l = &mut self.laps[level];
        if recent {
            l.q.push_back(entry);
        } else {
            l.q.push_front(entry);
        }
        l.live += 1;
        if l.q.len() as u64 > 2 * l.live + 1024 {
            let mut q = std::mem::take(&mut self.laps[level].q);
            q.retain(|&e| self.lap_valid(e, level));
            self.laps[level].q = q;
        }
    }

    fn lap_valid(&self, (pid, vpn, seq): (Pid, Vpn, u64), level: usize) -> bool {
        self.pages
            .get(pid.index())
            .and_then(|m| m.get(&vpn))
            .is_some_and(|p| p.seq == seq && p.lap as usize == level)
    }

    /// Take the first page, head to tail, of the lowest non-empty levels in `levels`
    /// that is still resident in the fast tier and passes `want` (pages failing `want`
    /// stay listed); it leaves its list.
    fn take_victim(
        &mut self,
        mech: &mut dyn Mechanisms,
        levels: std::ops::Range<usize>,
        want: impl Fn(&AtPage) -> bool,
    ) -> Option<(Pid, Vpn)> {
        for level in levels {
            let mut skipped = Vec::new();
            let mut found = None;
            while let Some(e) = self.laps[level].q.pop_front() {
                if !self.lap_valid(e, level) {
                    continue;
                }
                let (pid, vpn, _) = e;
                if !want(&self.pages[pid.index()][&vpn]) {
                    skipped.push(e);
                    continue;
                }
                // get_page_from_page_info / PageLRU checks: the page may have moved.
                let resident_fast = mech.page(pid, vpn).is_some_and(|i| i.tier.is_fast());
                self.laps[level].live -= 1;
                self.pages[pid.index()].get_mut(&vpn).unwrap().lap = NO_LAP;
                if resident_fast {
                    found = Some((pid, vpn));
                    break;
                }
                self.pages[pid.index()].get_mut(&vpn).unwrap().fast = false;
            }
            for e in skipped.into_iter().rev() {
                self.laps[level].q.push_front(e);
            }
            if found.is_some() {
                return found;
            }
        }
        None
    }

    // ----- the scan (change_pte_range) ----------------------------------------------------

    /// End of a scan pass of `pid`: shift every page's history and re-file the fast
    /// ones in the LAP lists, in address order as the scan visits them.
    fn end_of_pass(&mut self, pid: Pid, mech: &mut dyn Mechanisms) {
        let thp = self.thp;
        let vpns: Vec<Vpn> = self.procs(pid).keys().copied().collect();
        for &vpn in &vpns {
            let p = self.pages[pid.index()].get_mut(&vpn).unwrap();
            let accessed = std::mem::take(&mut p.accessed);
            p.history.shift(accessed);
            // skip_lower_tier = 1; with THP on only huge pages are tracked.
            let tracked = p.fast && (!thp || p.huge);
            if tracked {
                self.lap_place(pid, vpn);
            } else {
                self.lap_remove(pid, vpn);
            }
        }
        mech.charge_cpu(vpns.len() as u64 * LAP_UPDATE_NS);
    }

    // ----- faults -------------------------------------------------------------------------

    fn on_hint_fault(&mut self, f: &HintFault, mech: &mut dyn Mechanisms) {
        let unit = if f.huge { huge_head(f.vpn) } else { f.vpn };
        let pages = if f.huge { SUBPAGES_PER_HUGE } else { 1 };
        let p = self.page_mut(f.pid, unit, f.tier.is_fast(), f.huge);
        p.accessed = true;
        p.fast = f.tier.is_fast();
        p.huge = f.huge;
        if f.tier.is_fast() {
            self.scanner.record_fault(f.pid, pages, true);
            return;
        }
        let ok = self.promote(f.pid, unit, f.huge, mech);
        if !ok {
            self.scanner.record_failed(f.pid, pages);
        }
        self.scanner.record_fault(f.pid, pages, ok);
    }

    /// Base pages of the pool, after giving back what first-touch allocations took: the
    /// simulator cannot hold pool pages off its allocator.
    fn pool_pages(&mut self, mech: &dyn Mechanisms) -> u64 {
        let avail = Watermarks::whole_pages_above(
            mech.free_pages(TierId::FAST),
            mech.watermarks(TierId::FAST).min,
        );
        while self.pool[0] + self.pool[1] * SUBPAGES_PER_HUGE > avail {
            if self.pool[1] > 0 {
                self.pool[1] -= 1;
            } else {
                self.pool[0] -= 1;
            }
        }
        self.pool[0] + self.pool[1] * SUBPAGES_PER_HUGE
    }

    fn set_tier(&mut self, pid: Pid, vpn: Vpn, fast: bool) {
        if let Some(p) = self.pages[pid.index()].get_mut(&vpn) {
            p.fast = fast;
            p.accessed = true; // a fresh PTE: the next scan sees it as accessed
        }
        if !fast {
            self.lap_remove(pid, vpn);
        }
    }

    /// `migrate_misplaced_page` for a fault on a slow page. True if it was promoted.
    fn promote(&mut self, pid: Pid, vpn: Vpn, huge: bool, mech: &mut dyn Mechanisms) -> bool {
        let n = if huge { SUBPAGES_PER_HUGE } else { 1 };
        let pool = self.pool_pages(mech);
        let wm = mech.watermarks(TierId::FAST);
        // migrate_balanced_pgdat: above the high watermark on the buddy free lists.
        if mech.free_pages(TierId::FAST).saturating_sub(pool) as f64 >= wm.high + n as f64 {
            return self.migrate_up(pid, vpn, mech, |s| s.promoted_free += 1);
        }
        let level = self.pages[pid.index()][&vpn].history.level();
        let bottom = bottom_level(&self.lap_live());
        match self.cfg.mode {
            AutotieringMode::Cpm => {
                self.stats.failed_no_space += 1;
                false
            }
            _ if !may_displace(level, bottom) => {
                self.stats.failed_low_level += 1;
                false
            }
            AutotieringMode::OpmBd => self.promote_from_pool(pid, vpn, huge, mech),
            AutotieringMode::Opm | AutotieringMode::Opmx => {
                self.promote_on_demand(pid, vpn, huge, level, bottom, mech)
            }
        }
    }

    fn migrate_up(
        &mut self,
        pid: Pid,
        vpn: Vpn,
        mech: &mut dyn Mechanisms,
        count: impl FnOnce(&mut AtStats),
    ) -> bool {
        if mech
            .migrate(pid, vpn, TierId::FAST, MigrateMode::Sync)
            .is_err()
        {
            self.stats.failed_no_space += 1;
            return false;
        }
        count(&mut self.stats);
        self.set_tier(pid, vpn, true);
        true
    }

    /// OPM-BD (`wakeup_kdemoted` + `alloc_promote_page`).
    fn promote_from_pool(
        &mut self,
        pid: Pid,
        vpn: Vpn,
        huge: bool,
        mech: &mut dyn Mechanisms,
    ) -> bool {
        if self.thp && !huge {
            // "If THP is enabled, only allow for THP pages to proactively promote".
            self.stats.failed_no_space += 1;
            return false;
        }
        let ty = huge as usize;
        let min = if huge {
            self.cfg.pool_min_huge_pages
        } else {
            self.cfg.pool_min_pages
        };
        if self.pool[ty] > min {
            if self.migrate_up(pid, vpn, mech, |s| s.promoted_pool += 1) {
                self.pool[ty] -= 1;
                return true;
            }
            return false;
        }
        // wake_up kdemoted; this fault fails. kdemoted runs at once (see kdemoted()).
        self.kdemoted(mech);
        self.stats.failed_no_space += 1;
        false
    }

    /// OPM / OPMX without background demotion (`try_demote_from_busy_node`).
    fn promote_on_demand(
        &mut self,
        pid: Pid,
        vpn: Vpn,
        huge: bool,
        level: usize,
        bottom: usize,
        mech: &mut dyn Mechanisms,
    ) -> bool {
        let Some((vpid, vvpn)) = self.take_victim(mech, bottom..level, |_| true) else {
            self.stats.failed_no_space += 1;
            return false;
        };
        if self.cfg.mode == AutotieringMode::Opmx {
            let victim_huge = self.pages[vpid.index()][&vvpn].huge;
            if victim_huge != huge
                || mech
                    .exchange((pid, vpn), (vpid, vvpn), MigrateMode::Sync)
                    .is_err()
            {
                self.stats.failed_no_space += 1;
                return false;
            }
            self.stats.exchanged += 1;
            self.set_tier(vpid, vvpn, false);
            self.set_tier(pid, vpn, true);
            return true;
        }
        if mech
            .migrate(vpid, vvpn, self.slow_tier, MigrateMode::Sync)
            .is_err()
        {
            self.stats.failed_no_space += 1;
            return false;
        }
        self.stats.demoted_in_fault += 1;
        self.set_tier(vpid, vvpn, false);
        // numamigrate_isolate_page checks migrate_balanced_pgdat again.
        let n = if huge { SUBPAGES_PER_HUGE } else { 1 };
        let pool = self.pool_pages(mech);
        let wm = mech.watermarks(TierId::FAST);
        if mech.free_pages(TierId::FAST).saturating_sub(pool) as f64 >= wm.high + n as f64 {
            return self.migrate_up(pid, vpn, mech, |s| s.promoted_free += 1);
        }
        self.stats.failed_no_space += 1;
        false
    }

    /// `kdemoted`: demote least-accessed fast pages (levels 0–7, head first) until the
    /// pool is full again; each freed frame joins the pool.
    ///
    /// The kernel thread runs on another CPU microseconds after the fault wakes it. It
    /// runs here at the wake-up itself, its migrations asynchronous (charged to the
    /// tiering CPU): a timer set from inside a fault would only fire at the end of the
    /// faulting thread's slice, up to one metrics interval later.
    fn kdemoted(&mut self, mech: &mut dyn Mechanisms) {
        self.stats.kdemoted_runs += 1;
        let huge = self.thp;
        let ty = huge as usize;
        let max = if huge {
            self.cfg.pool_max_huge_pages
        } else {
            self.cfg.pool_max_pages
        };
        self.pool_pages(mech);
        while self.pool[ty] < max {
            let Some((pid, vpn)) = self.take_victim(mech, 0..MAX_LEVEL, |p| p.huge == huge) else {
                break;
            };
            if mech
                .migrate(pid, vpn, self.slow_tier, MigrateMode::Async)
                .is_err()
            {
                break;
            }
            self.set_tier(pid, vpn, false);
            self.pool[ty] += 1;
            self.stats.demoted_kdemoted += 1;
        }
    }

    fn on_munmap(&mut self, pid: Pid, start: Vpn, nr_pages: u64) {
        let end = start.saturating_add(nr_pages);
        let gone: Vec<Vpn> = self.procs(pid).range(start..end).map(|(&v, _)| v).collect();
        for vpn in gone {
            self.lap_remove(pid, vpn);
            self.pages[pid.index()].remove(&vpn);
        }
    }
}

impl Policy for Autotiering {
    fn name(&self) -> &'static str {
        self.name
    }

    fn requirements(&self) -> Requirements {
        // Every allocated page gets a fresh history (reset_page_access_lv in
        // __alloc_pages_nodemask).
        Requirements {
            page_alloc_events: true,
            hint_faults: true,
            ..Default::default()
        }
    }

    fn init(&mut self, mech: &mut dyn Mechanisms) {
        let tiers = mech.tiers();
        self.slow_tier = TierId(tiers.len().min(2) as u8 - 1);
        // page_ext is allocated for every frame of every node at boot.
        self.frames = tiers.iter().map(|t| t.capacity_pages).sum();
        self.scanner.start_all(mech);
    }

    fn on_event(&mut self, event: &Event, mech: &mut dyn Mechanisms) {
        match event {
            Event::HintFault(f) => self.on_hint_fault(f, mech),
            Event::PageAlloc {
                pid,
                vpn,
                tier,
                huge,
            } => {
                self.thp |= *huge;
                self.lap_remove(*pid, *vpn);
                self.procs(*pid).remove(vpn);
                self.page_mut(*pid, *vpn, tier.is_fast(), *huge);
            }
            // Moved by someone else (live): as after its own migration.
            Event::PageMoved { pid, vpn, to, .. } => self.set_tier(*pid, *vpn, to.is_fast()),
            Event::Munmap {
                pid,
                start_vpn,
                nr_pages,
                ..
            } => self.on_munmap(*pid, *start_vpn, *nr_pages),
            Event::Timer { id } => {
                if let Some(pid) = self.scanner.owns(*id) {
                    if self.scanner.step(pid, mech, ArmFilter::All).wrapped {
                        self.end_of_pass(pid, mech);
                    }
                }
            }
            _ => {}
        }
    }

    fn metadata_bytes(&self) -> u64 {
        self.frames * PAGE_INFO_BYTES
    }

    fn stats(&self) -> Vec<(&'static str, f64)> {
        const LEVEL_NAMES: [&str; MAX_LEVEL + 1] = [
            "lap_level0_pages",
            "lap_level1_pages",
            "lap_level2_pages",
            "lap_level3_pages",
            "lap_level4_pages",
            "lap_level5_pages",
            "lap_level6_pages",
            "lap_level7_pages",
            "lap_level8_pages",
        ];
        let s = &self.stats;
        let mut v = vec![
            ("promoted_free", s.promoted_free as f64),
            ("promoted_pool", s.promoted_pool as f64),
            ("exchanged", s.exchanged as f64),
            ("demoted_in_fault", s.demoted_in_fault as f64),
            ("demoted_kdemoted", s.demoted_kdemoted as f64),
            ("failed_low_level", s.failed_low_level as f64),
            ("failed_no_space", s.failed_no_space as f64),
            ("kdemoted_runs", s.kdemoted_runs as f64),
            ("pool_pages", self.pool[0] as f64),
            ("pool_huge_pages", self.pool[1] as f64),
            ("scan_passes_pid0", self.scanner.passes(Pid(0)) as f64),
        ];
        for (l, name) in LEVEL_NAMES.iter().enumerate() {
            v.push((name, self.laps[l].live as f64));
        }
        v
    }
}

impl AutotieringConfig {
    /// Sampled simulation: the free-page pool kept for promotions is memory and scales
    /// (at least one page of each kind). The scanner's address-space step does not.
    pub fn scale_space(&mut self, s: SpaceScale) {
        // The refill level stays below the pool's size (a fault promotes only from a
        // pool above it): at 1/64, 16 and 4 pages become 1 and 0, not 1 and 1, which
        // never promoted at all.
        self.pool_max_pages = s.count(self.pool_max_pages);
        self.pool_min_pages = s.count(self.pool_min_pages).min(self.pool_max_pages - 1);
        self.pool_max_huge_pages = s.count(self.pool_max_huge_pages);
        self.pool_min_huge_pages = s
            .count(self.pool_min_huge_pages)
            .min(self.pool_max_huge_pages - 1);
    }
}

/// The registry's view of [`AutotieringConfig`] (`PolicyConfig` in the crate root).
impl crate::RegisteredConfig for AutotieringConfig {
    fn check(&self) -> Result<(), ConfigError> {
        self.validate()
    }

    fn scale(&mut self, scale: tierkit_core::SpaceScale) {
        self.scale_space(scale)
    }

    fn build_policy(&self, _ctx: &tierkit_core::BuildContext) -> Box<dyn tierkit_core::Policy> {
        Box::new(Autotiering::new(self.clone()))
    }
}

/// `autotiering-cpm` parameters: AutoTiering-CPM as MULTI-CLOCK (HPCA'22) compares
/// against it — conservative promotion only (`mode = "cpm"`), with the NUMA scanner
/// of AutoTiering-userspace's CPM runs (the kernel's own 60 s / 256 MB). The pool
/// settings of [`AutotieringConfig`] are absent: CPM never promotes into a pool.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct AutotieringCpmConfig {
    /// The NUMA-balancing scanner (the kernel's defaults: 60 s, 256 MB).
    pub scan: NumaScanConfig,
}

impl AutotieringCpmConfig {
    /// The equivalent `autotiering` configuration.
    pub fn as_autotiering(&self) -> AutotieringConfig {
        AutotieringConfig {
            mode: AutotieringMode::Cpm,
            scan: self.scan.clone(),
            ..AutotieringConfig::default()
        }
    }
}

/// The registry's view of [`AutotieringCpmConfig`].
impl crate::RegisteredConfig for AutotieringCpmConfig {
    fn check(&self) -> Result<(), ConfigError> {
        self.as_autotiering().validate()
    }

    fn build_policy(&self, _ctx: &tierkit_core::BuildContext) -> Box<dyn tierkit_core::Policy> {
        Box::new(Autotiering::named("autotiering-cpm", self.as_autotiering()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn history_shifts_once_per_period_and_level_counts_set_bits() {
        let mut h = LapHistory::NEW;
        assert_eq!(h.level(), 8);
        assert_eq!(h.shift(false), 8);
        assert_eq!(h, LapHistory(0b1111_1110));
        assert_eq!(h.level(), 7);
        h.shift(true);
        assert_eq!(h, LapHistory(0b1111_1101));
        assert_eq!(h.level(), 7);
        // Eight idle periods forget everything.
        for _ in 0..8 {
            h.shift(false);
        }
        assert_eq!(h, LapHistory(0));
        assert_eq!(h.level(), 0);
        // Accessed in 3 of the last 8 periods: level 3 whatever the order.
        for a in [true, false, false, true, false, true, false, false] {
            h.shift(a);
        }
        assert_eq!(h, LapHistory(0b1001_0100));
        assert_eq!(h.level(), 3);
    }

    #[test]
    fn bottom_level_and_displacement() {
        let mut live = [0u64; MAX_LEVEL + 1];
        assert_eq!(bottom_level(&live), MAX_LEVEL + 1);
        // No tracked fast page: nothing can be displaced, even at level 8.
        assert!(!may_displace(8, bottom_level(&live)));
        live[3] = 2;
        live[6] = 1;
        assert_eq!(bottom_level(&live), 3);
        assert!(may_displace(4, 3));
        assert!(!may_displace(3, 3), "equal levels do not displace");
    }

    mod sim {
        use super::super::*;
        use tierkit_sim::machine::Machine;
        use tierkit_sim::testing::{read, run, small_machine, write, Script};
        use tierkit_sim::{MachineConfig, RunOutput, SimConfig};
        use tierkit_workloads::{GupsConfig, WorkloadConfig};

        const BASE: u64 = 1 << 30;
        /// The watched page: written after the 1 MiB fast tier is full, so slow.
        const T: u64 = BASE + 1000 * PAGE_SIZE;

        /// A pass over a 4 MiB process every 10 ms, starting at 1 ms.
        fn quick_scan() -> NumaScanConfig {
            NumaScanConfig {
                scan_delay_ms: 1,
                scan_period_min_ms: 10,
                scan_period_max_ms: 10,
                scan_size_mb: 8,
                adaptive_period: false,
            }
        }

        fn policy(mode: AutotieringMode) -> Box<dyn Policy> {
            Box::new(Autotiering::new(AutotieringConfig {
                mode,
                scan: quick_scan(),
                ..Default::default()
            }))
        }

        /// Write 1024 pages into a 1 MiB fast tier (the first ~253 land there), then
        /// for `ms` milliseconds read `T` every 2 ms, and the first 300 pages (all the
        /// fast ones) too when `fast_busy`.
        fn scenario(mode: AutotieringMode, ms: u64, fast_busy: bool) -> (RunOutput, Machine) {
            let mut ops: Vec<Op> = (0..1024).map(|i| write(BASE + i * PAGE_SIZE, 0)).collect();
            for _ in 0..ms / 2 {
                ops.push(read(T, 2_000_000));
                if fast_busy {
                    ops.extend((0..300).map(|i| read(BASE + i * PAGE_SIZE, 0)));
                }
            }
            let w = Script::new(4 * MIB).process(&[(BASE, 4 * MIB)], ops);
            run(
                &small_machine(1, 64),
                &SimConfig::default(),
                policy(mode),
                Box::new(w),
            )
        }

        fn tier_of(m: &Machine, addr: u64) -> TierId {
            Mechanisms::page(m, Pid(0), addr >> PAGE_SHIFT)
                .unwrap()
                .tier
        }

        use crate::lru::test_scripts::stat;

        #[test]
        fn idle_fast_pages_lose_one_level_per_scan_pass() {
            // Passes at 1, 11, 21, 31, 41 ms: the first records the allocation (level
            // 8), the next four record idle periods: level 4. CPM never migrates, so
            // the fast pages stay put.
            let (out, m) = scenario(AutotieringMode::Cpm, 46, false);
            assert_eq!(stat(&out, "scan_passes_pid0"), 5.0);
            let fast = m.used_pages(TierId(0)) as f64;
            assert_eq!(stat(&out, "lap_level4_pages"), fast);
            let (out, _) = scenario(AutotieringMode::Cpm, 100, false);
            assert_eq!(
                stat(&out, "lap_level0_pages"),
                fast,
                "8 idle passes forget all"
            );
        }

        #[test]
        fn opmx_exchanges_when_the_fast_tier_is_full_and_cpm_does_not() {
            let (out, m) = scenario(AutotieringMode::Opmx, 40, false);
            assert_eq!(tier_of(&m, T), TierId::FAST);
            assert_eq!(stat(&out, "exchanged"), 1.0);
            assert_eq!(out.summary.promoted_pages, 1);
            assert_eq!(out.summary.demoted_pages, 1);
            // OPM without exchange: demote that page in the fault, then promote.
            let (out, m) = scenario(AutotieringMode::Opm, 40, false);
            assert_eq!(tier_of(&m, T), TierId::FAST);
            assert_eq!(stat(&out, "demoted_in_fault"), 1.0);
            assert_eq!(stat(&out, "exchanged"), 0.0);
            let (out, m) = scenario(AutotieringMode::Cpm, 40, false);
            assert_eq!(tier_of(&m, T), TierId(1));
            assert_eq!(stat(&out, "exchanged"), 0.0);
            assert_eq!(out.summary.migrated_bytes, 0);
            assert!(stat(&out, "failed_no_space") > 0.0);
        }

        #[test]
        fn a_slow_page_does_not_displace_fast_pages_as_recently_used_as_itself() {
            // Every fast page (and some slow ones) is read every period, like T: all
            // stay at level 8, so T is never above the lowest LAP level.
            let (out, m) = scenario(AutotieringMode::Opmx, 40, true);
            assert_eq!(tier_of(&m, T), TierId(1));
            assert_eq!(stat(&out, "exchanged"), 0.0);
            assert_eq!(out.summary.migrated_bytes, 0);
            assert!(stat(&out, "failed_low_level") > 0.0);
            assert_eq!(
                stat(&out, "lap_level8_pages"),
                m.used_pages(TierId(0)) as f64
            );
        }

        #[test]
        fn background_demotion_keeps_a_reserve_of_free_fast_pages() {
            let cfg = AutotieringConfig::default();
            let (out, m) = scenario(AutotieringMode::OpmBd, 40, false);
            // An exact machine: whole-page watermarks.
            let wm_min = Mechanisms::watermarks(&m, TierId::FAST).min as u64;
            let free = Mechanisms::free_pages(&m, TierId::FAST);
            // kdemoted refilled the pool to 16 with least-accessed pages; T took one.
            assert_eq!(stat(&out, "demoted_kdemoted"), cfg.pool_max_pages as f64);
            assert_eq!(stat(&out, "promoted_pool"), 1.0);
            assert_eq!(tier_of(&m, T), TierId::FAST);
            assert!(
                free >= wm_min + cfg.pool_min_pages,
                "free {free}, min {wm_min}"
            );
            assert_eq!(free, wm_min + cfg.pool_max_pages - 1);
            // CPM keeps no reserve: first-touch filled the fast tier to its min mark.
            let (_, m) = scenario(AutotieringMode::Cpm, 40, false);
            assert_eq!(Mechanisms::free_pages(&m, TierId::FAST), wm_min);
        }

        /// Run gups (256 MiB, 1:8, LLC off: a 32 MiB LLC would hold the 25.6 MiB hot
        /// set) and return the run's fast access ratio and that of its last interval.
        fn gups(policy: Box<dyn Policy>, nr_updates: u64) -> (f64, f64) {
            let machine = MachineConfig {
                fast: "1:8".into(),
                llc_enabled: false,
                ..MachineConfig::default()
            };
            let w = WorkloadConfig::Gups(GupsConfig {
                footprint_mib: 256,
                nr_updates,
                ..Default::default()
            })
            .build(7);
            let (out, m) = run(&machine, &SimConfig::default(), policy, w);
            let wm = Mechanisms::watermarks(&m, TierId::FAST);
            assert!(m.used_pages(TierId(0)) <= m.capacity_pages(TierId(0)) - wm.min as u64);
            let last = out.series.rows.last().unwrap().fast_access_ratio;
            eprintln!(
                "  {:.2} s simulated, fast ratio {:.3} (last interval {last:.3}), promoted {} demoted {} pages",
                out.summary.sim_seconds,
                out.summary.fast_access_ratio,
                out.summary.promoted_pages,
                out.summary.demoted_pages
            );
            (out.summary.fast_access_ratio, last)
        }

        /// Passes as fast as Linux's scan-rate cap allows for 256 MiB (2560 MB/s).
        fn fast_passes() -> AutotieringConfig {
            AutotieringConfig {
                scan: NumaScanConfig {
                    scan_delay_ms: 10,
                    scan_period_min_ms: 10,
                    scan_period_max_ms: 10,
                    scan_size_mb: 128,
                    adaptive_period: false,
                },
                ..Default::default()
            }
        }

        #[test]
        fn gups_hot_set_moves_to_the_fast_tier() {
            let (ft, _) = gups(Box::new(crate::FirstTouch), 16_000_000);
            let (at, at_last) = gups(Box::new(Autotiering::new(fast_passes())), 16_000_000);
            eprintln!("gups 256 MiB 1:8: first-touch {ft:.3}, autotiering opm-bd {at:.3} (last {at_last:.3})");
            assert!(at > ft + 0.3, "autotiering {at} vs first-touch {ft}");
            assert!(
                at_last > 0.8,
                "hot set in the fast tier by the end: {at_last}"
            );
        }
    }

    #[test]
    fn config_validates_pool_marks() {
        AutotieringConfig::default().validate().unwrap();
        let bad = AutotieringConfig {
            pool_min_pages: 16,
            ..Default::default()
        };
        assert!(bad
            .validate()
            .unwrap_err()
            .to_string()
            .contains("pool_min_pages"));
    }
}
