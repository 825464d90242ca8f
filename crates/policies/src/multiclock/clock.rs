//! The machinery MULTI-CLOCK and `nimble` share: per-tier CLOCK lists fed by
//! allocations, one look of the hand through the accessed bit, promotion with
//! "promotion under pressure causes demotion", and watermark-driven reclaim
//! (kswapd and direct reclaim) that demotes the unreferenced inactive tail.
//!
//! Both systems run on Linux 5.3's page-frame reclaim (§III-C, §II-D): they differ
//! only in how promotion candidates are chosen (the promote list versus the top of
//! the slow tier's active list), which the two policies implement on top of this.
//!
//! **Why not [`crate::lru`].** Those lists follow today's kernel: reclaim deactivates
//! referenced active pages and demotes an inactive page whose PTE is clear even if
//! `PG_referenced` is set. MULTI-CLOCK's Fig. 4 gives referenced pages a second chance
//! on both lists, needs a third list, and needs the same look in a periodic
//! (no-pressure) mode. The kernel's `inactive_ratio` and the kswapd pacing
//! ([`KswapdConfig`]) are reused from there.

use super::lists::*;
use crate::lru::{KswapdConfig, SWAP_CLUSTER_MAX};
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, HashMap};
use tierkit_core::*;

/// CPU time of one list operation (isolate, splice, putback), ns (as [`crate::lru`]).
pub const LIST_OP_NS: u64 = 5;

/// Timer id of the kpromoted threads (one timer runs every tier's thread).
pub const KPROMOTED_TIMER: TimerId = 0x4d43_0001;
/// Timer ids `[KSWAPD_TIMER_BASE, +256)` are the per-tier kswapd threads.
pub const KSWAPD_TIMER_BASE: TimerId = 0x4d43_0100;

/// Passes over a tier's lists without a demotion before kswapd gives up until the
/// next wakeup (`MAX_RECLAIM_RETRIES`' role): a page needs at most two looks (second
/// chance, then demotion) to become demotable.
const MAX_RECLAIM_PASSES: u64 = 3;

/// Where a promoted page lands in the higher tier (spec A6).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Landing {
    /// Head of the active list, unreferenced (AU): MULTI-CLOCK's default.
    ActiveHead,
    /// Tail ("bottom") of the active list, unreferenced: Nimble (Fig. 3 (11)).
    ActiveTail,
    /// Head of the inactive list, unreferenced (IU).
    InactiveHead,
}

impl Landing {
    /// The list and end.
    pub fn place(self) -> (ClockList, End) {
        match self {
            Landing::ActiveHead => (ClockList::Active, End::Head),
            Landing::ActiveTail => (ClockList::Active, End::Tail),
            Landing::InactiveHead => (ClockList::Inactive, End::Head),
        }
    }
}

/// What the shared machinery needs to know of the policy running it.
#[derive(Debug, Clone, PartialEq)]
pub struct CoreParams {
    /// Non-top tiers have a promote list (MULTI-CLOCK) or not (Nimble).
    pub promote_list: bool,
    /// Periodic runs deactivate unreferenced active pages (spec A5; default off).
    pub periodic_deactivate: bool,
    /// Reclaim follows stock Linux 5.3 instead of the paper's second chances (A10).
    pub stock_pfra_reclaim: bool,
    /// Where a promoted page lands in the higher tier (A6): list and end.
    pub promoted_landing: (ClockList, End),
    /// kswapd pacing.
    pub kswapd: KswapdConfig,
    /// Arm a hinting fault on each promoted page to measure re-access (instrument).
    pub measure_reaccess: bool,
}

/// Counters of the shared machinery.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CoreStats {
    /// Base pages promoted.
    pub promoted_pages: u64,
    /// Page units promoted.
    pub promoted_units: u64,
    /// Page units promoted by kswapd's promote-list step (reclaim path).
    pub reclaim_promoted_units: u64,
    /// Selected promotions that failed (no room even after direct reclaim).
    pub promote_failed: u64,
    /// Base pages demoted.
    pub demoted_pages: u64,
    /// Demotions the mover refused.
    pub demote_failed: u64,
    /// Promotions done as an exchange with a fast page (Nimble).
    pub exchanges: u64,
    /// kswapd wakeups.
    pub kswapd_wakeups: u64,
    /// kswapd batches run.
    pub kswapd_batches: u64,
    /// Direct reclaims run by a promotion into a tier at its min watermark.
    pub direct_reclaims: u64,
    /// Pages looked at by reclaim.
    pub reclaim_scanned: u64,
    /// Pages looked at by periodic runs.
    pub periodic_scanned: u64,
}

/// Re-access of promoted pages (§V-D, Fig. 9): the share of the pages promoted by
/// one kpromoted run that are accessed from the fast tier before the next run.
///
/// Not part of either system: a measuring instrument (`measure_reaccess`). It arms a
/// hinting fault on every promoted page, so the first access after promotion is seen
/// without touching the accessed bit the CLOCK lists read; each such fault costs the
/// application one hinting fault.
#[derive(Debug, Clone, Default)]
pub struct ReaccessMeter {
    enabled: bool,
    window: u64,
    watch: HashMap<(Pid, Vpn), u64>,
    /// Promoted page units watched.
    pub tracked: u64,
    /// Of those, accessed from the fast tier within their window.
    pub hits: u64,
}

impl ReaccessMeter {
    /// A meter; `enabled = false` makes every call a no-op.
    pub fn new(enabled: bool) -> ReaccessMeter {
        ReaccessMeter {
            enabled,
            ..ReaccessMeter::default()
        }
    }

    /// A kpromoted run starts: pages promoted before it that were not accessed are
    /// misses.
    pub fn next_window(&mut self) {
        self.window += 1;
        self.watch.clear();
    }

    /// A page was promoted.
    pub fn on_promoted(&mut self, pid: Pid, vpn: Vpn, mech: &mut dyn Mechanisms) {
        if self.enabled && mech.arm_hint_fault(pid, vpn) {
            self.watch.insert((pid, vpn), self.window);
            self.tracked += 1;
        }
    }

    /// A hinting fault (only the meter arms pages).
    pub fn on_fault(&mut self, f: &HintFault) {
        let key = (f.pid, if f.huge { huge_head(f.vpn) } else { f.vpn });
        if self.watch.remove(&key) == Some(self.window) && f.tier.is_fast() {
            self.hits += 1;
        }
    }

    /// Hits as a percentage of tracked promotions (0 when nothing was tracked).
    pub fn pct(&self) -> f64 {
        if self.tracked == 0 {
            0.0
        } else {
            100.0 * self.hits as f64 / self.tracked as f64
        }
    }
}

/// Per-tier CLOCK lists with their scanning, promotion and reclaim.
#[derive(Debug, Clone)]
pub struct ClockCore {
    /// The lists.
    pub lists: ClockLists,
    /// Parameters.
    pub params: CoreParams,
    /// Edge counters, indexed by `Edge as usize`.
    pub edges: [u64; Edge::COUNT],
    /// Counters.
    pub stats: CoreStats,
    /// Re-access instrument.
    pub meter: ReaccessMeter,
    nr_tiers: usize,
    kswapd_awake: Vec<bool>,
    /// Per tier: when its kswapd is done with its last batch.
    kswapd_busy_until: Vec<Nanos>,
    kswapd_idle_scanned: Vec<u64>,
    /// VMA kinds by `(pid, start_vpn)` → `(end_vpn, kind)`: a page's LRU type, which
    /// the kernel reads from the page itself (`PageAnon`).
    vma_kinds: BTreeMap<(Pid, Vpn), (Vpn, VmaKind)>,
}

impl ClockCore {
    /// Machinery for `nr_tiers` tiers.
    pub fn new(params: CoreParams, nr_tiers: usize) -> ClockCore {
        ClockCore {
            lists: ClockLists::new(nr_tiers),
            meter: ReaccessMeter::new(params.measure_reaccess),
            params,
            edges: [0; Edge::COUNT],
            stats: CoreStats::default(),
            nr_tiers,
            kswapd_awake: vec![false; nr_tiers],
            kswapd_busy_until: vec![0; nr_tiers],
            kswapd_idle_scanned: vec![0; nr_tiers],
            vma_kinds: BTreeMap::new(),
        }
    }

    /// The count of one edge.
    pub fn edge(&self, e: Edge) -> u64 {
        self.edges[e as usize]
    }

    fn count(&mut self, e: Option<Edge>, n: u64) {
        if let Some(e) = e {
            self.edges[e as usize] += n;
        }
    }

    /// Whether `tier` has a tier above it.
    pub fn has_higher(&self, tier: TierId) -> bool {
        tier.index() > 0
    }

    /// Whether `tier` has a tier below it.
    pub fn has_lower(&self, tier: TierId) -> bool {
        tier.index() + 1 < self.nr_tiers
    }

    /// Whether `tier` has a promote list.
    pub fn promote_list(&self, tier: TierId) -> bool {
        self.params.promote_list && self.has_higher(tier)
    }

    // ----- pages entering and leaving --------------------------------------------

    /// A mapping was created: remember its kind for the pages that will be born in it.
    pub fn on_mmap(&mut self, pid: Pid, vma: &Vma) {
        self.vma_kinds
            .insert((pid, vma.start_vpn), (vma.end_vpn(), vma.kind));
    }

    /// A range was unmapped: its pages are freed (4), the kind map is trimmed.
    pub fn on_munmap(&mut self, pid: Pid, start_vpn: Vpn, nr_pages: u64) {
        let freed = self.lists.remove_range(pid, start_vpn, nr_pages);
        self.count(Some(Edge::Freed), freed);
        let end = start_vpn.saturating_add(nr_pages);
        let overlapping: Vec<(Vpn, Vpn, VmaKind)> = self
            .vma_kinds
            .range((pid, 0)..(pid, end))
            .filter(|(_, &(e, _))| e > start_vpn)
            .map(|(&(_, s), &(e, k))| (s, e, k))
            .collect();
        for (s, e, k) in overlapping {
            self.vma_kinds.remove(&(pid, s));
            if s < start_vpn {
                self.vma_kinds.insert((pid, s), (start_vpn, k));
            }
            if e > end {
                self.vma_kinds.insert((pid, end), (e, k));
            }
        }
    }

    /// The LRU type of a page of `pid` at `vpn`.
    pub fn lru_type(&self, pid: Pid, vpn: Vpn) -> LruType {
        match self.vma_kinds.range((pid, 0)..=(pid, vpn)).next_back() {
            Some((_, &(end, VmaKind::File))) if vpn < end => LruType::File,
            _ => LruType::Anon,
        }
    }

    /// A page was allocated: it enters the head of its tier's inactive list as IU
    /// (§III-A, Fig. 3 (1), Fig. 4 (5)). An allocation that finds a tier (its own or
    /// one it fell back from) below the low watermark wakes that tier's kswapd
    /// (`wake_all_kswapds`); the machine's `LowWatermark` event is rate-limited to one
    /// per millisecond and would miss the last dip of an allocation burst.
    pub fn on_alloc(
        &mut self,
        pid: Pid,
        vpn: Vpn,
        tier: TierId,
        huge: bool,
        mech: &mut dyn Mechanisms,
    ) {
        for t in 0..=tier.0 {
            let t = TierId(t);
            if self.has_lower(t) && (mech.free_pages(t) as f64) < mech.watermarks(t).low {
                self.kswapd_wake(t, mech);
            }
        }
        let page = ClockPage {
            pid,
            vpn,
            tier,
            ty: self.lru_type(pid, vpn),
            flags: PageFlags::IU,
            nr_pages: if huge { SUBPAGES_PER_HUGE } else { 1 },
        };
        self.lists.insert(page, End::Head);
        self.count(Some(Edge::Added), 1);
    }

    /// A page was moved to `to` by someone else (live: the application, an operator,
    /// the daemon's budget). Migration keeps a page's LRU flags and puts it at the head
    /// of the same list on its new node (`migrate_page_states`, `putback_lru_page`); a
    /// tier without a promote list takes a promote-list page on its active list. A
    /// page never listed (its first touch not seen) joins as a new page would, IU.
    pub fn on_moved(&mut self, pid: Pid, vpn: Vpn, to: TierId) {
        let page = match self.lists.remove(pid, vpn) {
            Some(p) => {
                let mut flags = p.flags;
                if flags.list == ClockList::Promote && !self.promote_list(to) {
                    flags.list = ClockList::Active;
                }
                ClockPage {
                    tier: to,
                    flags,
                    ..p
                }
            }
            None => {
                self.count(Some(Edge::Added), 1);
                ClockPage {
                    pid,
                    vpn,
                    tier: to,
                    ty: self.lru_type(pid, vpn),
                    flags: PageFlags::IU,
                    nr_pages: 1,
                }
            }
        };
        self.lists.insert(page, End::Head);
    }

    // ----- the CLOCK hand --------------------------------------------------------

    /// Scan up to `budget` pages from the tail of one list (never more than the list
    /// held when the scan began, so a page is not looked at twice in one call). Pages
    /// chosen for promotion or demotion are isolated into `promote` / `demote`; the
    /// others are put back. Returns the pages looked at.
    #[allow(clippy::too_many_arguments)]
    pub fn scan_list(
        &mut self,
        tier: TierId,
        ty: LruType,
        list: ClockList,
        budget: u64,
        mode: ScanMode,
        mech: &mut dyn Mechanisms,
        promote: &mut Vec<ClockPage>,
        demote: &mut Vec<ClockPage>,
    ) -> u64 {
        let n = budget.min(self.lists.nr_units(tier, ty, list));
        let mut looked = 0;
        for _ in 0..n {
            let Some(p) = self.lists.pop_tail(tier, ty, list) else {
                break;
            };
            looked += 1;
            if list == ClockList::Promote && mode == ScanMode::Reclaim {
                // §III-C: under pressure every promote-list page is tried.
                promote.push(p);
                continue;
            }
            self.look(p, mode, mech, promote, demote);
        }
        mech.charge_cpu(looked * 2 * LIST_OP_NS);
        match mode {
            ScanMode::Periodic => self.stats.periodic_scanned += looked,
            ScanMode::Reclaim => self.stats.reclaim_scanned += looked,
        }
        looked
    }

    /// One look at an isolated page: read and clear its accessed bit, apply the
    /// state machine and the list's shrink rule.
    fn look(
        &mut self,
        p: ClockPage,
        mode: ScanMode,
        mech: &mut dyn Mechanisms,
        promote: &mut Vec<ClockPage>,
        demote: &mut Vec<ClockPage>,
    ) {
        let Some(young) = mech.test_and_clear_young(p.pid, p.vpn) else {
            // No longer resident: it was freed behind our back.
            self.count(Some(Edge::Freed), 1);
            return;
        };
        let has_lower = self.has_lower(p.tier);
        let (flags, v) = if mode == ScanMode::Reclaim && self.params.stock_pfra_reclaim {
            let (f, v) = stock_reclaim_verdict(p.flags, young, has_lower);
            if f.list == ClockList::Active && p.flags.list == ClockList::Inactive {
                self.count(Some(Edge::Activate), 1);
            }
            (f, v)
        } else {
            let (f, look, e) = observe(p.flags, young, self.promote_list(p.tier));
            self.count(e, 1);
            let low = inactive_is_low(
                self.lists.nr_pages(p.tier, p.ty, ClockList::Inactive),
                self.lists.nr_pages(p.tier, p.ty, ClockList::Active),
                mech.pages_per_simulated_page(),
            );
            let v = verdict(
                p.flags.list,
                look,
                mode,
                low,
                self.params.periodic_deactivate,
                has_lower,
            );
            (f, v)
        };
        let page = ClockPage { flags, ..p };
        match v {
            Verdict::Head => self.lists.insert(page, End::Head),
            Verdict::Promote => promote.push(page),
            Verdict::Demote => demote.push(page),
            Verdict::Deactivate => {
                self.count(Some(Edge::Deactivate), 1);
                let page = ClockPage {
                    flags: PageFlags::IU,
                    ..p
                };
                self.lists.insert(page, End::Head);
            }
            Verdict::ToActive => {
                self.count(Some(Edge::PromoteIdle), 1);
                let page = ClockPage {
                    flags: PageFlags::AU,
                    ..p
                };
                self.lists.insert(page, End::Head);
            }
        }
    }

    // ----- promotion ---------------------------------------------------------------

    /// Make room for `nr_pages` in `tier` the way an allocation in Linux 5.3 does:
    /// below the low watermark wake kswapd; at the min watermark reclaim directly
    /// (`__alloc_pages_direct_reclaim`, `SWAP_CLUSTER_MAX` pages), which is how "promotions
    /// from the lower tier result in immediate page demotions from the higher tier"
    /// (§III-C). Returns whether the migration can go ahead.
    pub fn make_room(&mut self, tier: TierId, nr_pages: u64, mech: &mut dyn Mechanisms) -> bool {
        let wm = mech.watermarks(tier);
        let free = |mech: &dyn Mechanisms| mech.free_pages(tier) as f64;
        let n = nr_pages as f64;
        if free(mech) < wm.low + n {
            self.kswapd_wake(tier, mech);
        }
        if free(mech) < wm.min + n {
            self.direct_reclaim(tier, nr_pages, mech);
        }
        free(mech) >= wm.min + n
    }

    /// Promote isolated pages one tier up (§III-B: every selected page in the same
    /// run). A page that cannot move goes to the head of its own active list (§III-C).
    pub fn promote(&mut self, batch: &mut Vec<ClockPage>, mech: &mut dyn Mechanisms) -> u64 {
        let mut done = 0;
        for p in batch.drain(..) {
            let to = TierId(p.tier.0 - 1);
            let ok = self.make_room(to, p.nr_pages, mech)
                && match mech.migrate(p.pid, p.vpn, to, MigrateMode::Async) {
                    Ok(()) => true,
                    Err(MigrateError::NotPresent) => {
                        self.count(Some(Edge::Freed), 1);
                        continue;
                    }
                    Err(_) => false,
                };
            if ok {
                self.land_promoted(p, to, mech);
                done += 1;
            } else {
                self.promote_failed(p, mech);
            }
        }
        done
    }

    /// A page now in `to`: put it where promoted pages land and count it.
    pub fn land_promoted(&mut self, p: ClockPage, to: TierId, mech: &mut dyn Mechanisms) {
        let (list, end) = self.params.promoted_landing;
        let flags = PageFlags {
            list,
            referenced: false,
        };
        self.lists.insert(
            ClockPage {
                tier: to,
                flags,
                ..p
            },
            end,
        );
        self.count(Some(Edge::Promoted), 1);
        self.stats.promoted_units += 1;
        self.stats.promoted_pages += p.nr_pages;
        mech.charge_cpu(LIST_OP_NS);
        self.meter.on_promoted(p.pid, p.vpn, mech);
    }

    /// A selected page could not be promoted: back to its active list (§III-C), and
    /// the tier above is under pressure.
    pub fn promote_failed(&mut self, p: ClockPage, mech: &mut dyn Mechanisms) {
        self.count(Some(Edge::PromoteFailed), 1);
        self.stats.promote_failed += 1;
        self.lists.insert(
            ClockPage {
                flags: PageFlags::AU,
                ..p
            },
            End::Head,
        );
        self.kswapd_wake(TierId(p.tier.0 - 1), mech);
    }

    // ----- reclaim -------------------------------------------------------------------

    /// Demote isolated pages one tier down; they arrive at the head of its inactive
    /// list as IU (A6). Returns the units demoted.
    fn demote(&mut self, batch: &mut Vec<ClockPage>, mech: &mut dyn Mechanisms) -> u64 {
        let mut done = 0;
        for p in batch.drain(..) {
            let to = TierId(p.tier.0 + 1);
            match mech.migrate(p.pid, p.vpn, to, MigrateMode::Async) {
                Ok(()) => {
                    let page = ClockPage {
                        tier: to,
                        flags: PageFlags::IU,
                        ..p
                    };
                    self.lists.insert(page, End::Head);
                    self.count(Some(Edge::Demoted), 1);
                    self.stats.demoted_pages += p.nr_pages;
                    done += 1;
                }
                Err(MigrateError::NotPresent) => self.count(Some(Edge::Freed), 1),
                Err(_) => {
                    self.stats.demote_failed += 1;
                    let page = ClockPage {
                        flags: PageFlags::IU,
                        ..p
                    };
                    self.lists.insert(page, End::Head);
                }
            }
        }
        done
    }

    /// One reclaim pass over `tier`'s lists, in the paper's order (§III-C): the
    /// promote list (every page tried for promotion), then the active list while the
    /// inactive list is low (√(10·n):1), then the inactive list, whose unreferenced
    /// pages are demoted. `SWAP_CLUSTER_MAX` pages per list and type. Returns (pages
    /// looked at, units demoted).
    pub fn reclaim_pass(&mut self, tier: TierId, mech: &mut dyn Mechanisms) -> (u64, u64) {
        let (mut scanned, mut demoted) = (0, 0);
        let mut promote = Vec::new();
        let mut demote = Vec::new();
        for ty in LruType::ALL {
            if self.promote_list(tier) {
                scanned += self.scan_list(
                    tier,
                    ty,
                    ClockList::Promote,
                    SWAP_CLUSTER_MAX,
                    ScanMode::Reclaim,
                    mech,
                    &mut promote,
                    &mut demote,
                );
                self.stats.reclaim_promoted_units += self.promote(&mut promote, mech);
            }
            if inactive_is_low(
                self.lists.nr_pages(tier, ty, ClockList::Inactive),
                self.lists.nr_pages(tier, ty, ClockList::Active),
                mech.pages_per_simulated_page(),
            ) {
                scanned += self.scan_list(
                    tier,
                    ty,
                    ClockList::Active,
                    SWAP_CLUSTER_MAX,
                    ScanMode::Reclaim,
                    mech,
                    &mut promote,
                    &mut demote,
                );
            }
            scanned += self.scan_list(
                tier,
                ty,
                ClockList::Inactive,
                SWAP_CLUSTER_MAX,
                ScanMode::Reclaim,
                mech,
                &mut promote,
                &mut demote,
            );
            // Reclaim never promotes from the active/inactive lists; be safe anyway.
            self.promote(&mut promote, mech);
            demoted += self.demote(&mut demote, mech);
        }
        (scanned, demoted)
    }

    /// Direct reclaim in `tier` (allocation slow path): passes until `SWAP_CLUSTER_MAX`
    /// units are demoted, `nr_pages` fit above the min watermark again, or nothing more
    /// can be demoted.
    pub fn direct_reclaim(&mut self, tier: TierId, nr_pages: u64, mech: &mut dyn Mechanisms) {
        if !self.has_lower(tier) {
            return;
        }
        self.stats.direct_reclaims += 1;
        let wm = mech.watermarks(tier);
        let (mut demoted, mut idle_passes) = (0, 0);
        while demoted < SWAP_CLUSTER_MAX && idle_passes < MAX_RECLAIM_PASSES {
            let (scanned, d) = self.reclaim_pass(tier, mech);
            demoted += d;
            if scanned == 0 {
                break;
            }
            idle_passes = if d == 0 { idle_passes + 1 } else { 0 };
            if d > 0
                && mech.free_pages(tier) as f64 >= wm.min + (nr_pages + SWAP_CLUSTER_MAX) as f64
            {
                break;
            }
        }
    }

    /// Every event but the owner's kpromoted timer, handled as both MULTI-CLOCK and
    /// Nimble handle it: allocations, moves by others and mappings feed the lists, a
    /// low watermark or a kswapd timer runs reclaim, hinting faults feed the re-access
    /// meter.
    pub fn on_event(&mut self, event: &Event, mech: &mut dyn Mechanisms) {
        match *event {
            Event::PageAlloc {
                pid,
                vpn,
                tier,
                huge,
            } => self.on_alloc(pid, vpn, tier, huge, mech),
            Event::PageMoved { pid, vpn, to, .. } => self.on_moved(pid, vpn, to),
            Event::Mmap { pid, ref vma } => self.on_mmap(pid, vma),
            Event::Munmap {
                pid,
                start_vpn,
                nr_pages,
                ..
            } => self.on_munmap(pid, start_vpn, nr_pages),
            Event::LowWatermark { tier } => self.kswapd_wake(tier, mech),
            Event::Timer { id } => {
                if let Some(tier) = self.kswapd_owns(id) {
                    self.kswapd_run(tier, mech);
                }
            }
            Event::HintFault(ref f) => self.meter.on_fault(f),
            Event::Sample(_) => {}
        }
    }

    /// The tier whose kswapd timer `id` is, if it is one.
    pub fn kswapd_owns(&self, id: TimerId) -> Option<TierId> {
        (KSWAPD_TIMER_BASE..KSWAPD_TIMER_BASE + 256)
            .contains(&id)
            .then(|| TierId((id - KSWAPD_TIMER_BASE) as u8))
    }

    /// Wake `tier`'s kswapd (`wakeup_kswapd`). A no-op if it is awake already or the
    /// tier is the lowest (the simulator has no swap or file write-back to evict to).
    pub fn kswapd_wake(&mut self, tier: TierId, mech: &mut dyn Mechanisms) {
        let t = tier.index();
        if !self.has_lower(tier) || self.kswapd_awake[t] {
            return;
        }
        self.kswapd_awake[t] = true;
        self.kswapd_idle_scanned[t] = 0;
        self.stats.kswapd_wakeups += 1;
        // One thread: a wakeup while it is still busy with its last batch runs when
        // that batch is done.
        mech.schedule(
            mech.now().max(self.kswapd_busy_until[t]),
            KSWAPD_TIMER_BASE + t as TimerId,
            Runner::Kthread,
        );
    }

    /// One batch of `tier`'s kswapd: reclaim passes until free pages reach the high
    /// watermark ([Linux 5.3] `balance_pgdat`), at most `kswapd.batch_pages` demotions,
    /// then sleep for the time that work takes one thread and continue, or stop when
    /// balanced or when nothing more can be demoted.
    pub fn kswapd_run(&mut self, tier: TierId, mech: &mut dyn Mechanisms) {
        let t = tier.index();
        if !self.has_lower(tier) {
            return;
        }
        self.kswapd_awake[t] = false;
        self.stats.kswapd_batches += 1;
        // The first whole number of free pages at or above `high`.
        let high = mech.watermarks(tier).high.ceil() as u64;
        let batch = self.params.kswapd.batch_pages;
        let budget = 4 * batch.max(SWAP_CLUSTER_MAX);
        let (mut scanned, mut demoted) = (0, 0);
        while mech.free_pages(tier) < high && demoted < batch && scanned < budget {
            let (s, d) = self.reclaim_pass(tier, mech);
            scanned += s;
            demoted += d;
            if s == 0 {
                break;
            }
        }
        // The batch occupies the thread whether or not it sleeps after it.
        let busy_ns = self.params.kswapd.busy_ns(demoted, scanned, mech);
        self.kswapd_busy_until[t] = mech.now() + busy_ns;
        if mech.free_pages(tier) >= high {
            return;
        }
        if demoted == 0 {
            self.kswapd_idle_scanned[t] += scanned;
            let units: u64 = LruType::ALL
                .iter()
                .flat_map(|&ty| {
                    [ClockList::Inactive, ClockList::Active, ClockList::Promote]
                        .map(|l| self.lists.nr_units(tier, ty, l))
                })
                .sum();
            if scanned == 0 || self.kswapd_idle_scanned[t] > MAX_RECLAIM_PASSES * units {
                return;
            }
        } else {
            self.kswapd_idle_scanned[t] = 0;
        }
        self.kswapd_awake[t] = true;
        mech.schedule(
            self.kswapd_busy_until[t],
            KSWAPD_TIMER_BASE + t as TimerId,
            Runner::Kthread,
        );
    }

    /// Counters shared by both policies, for `stats()`.
    pub fn stats_rows(&self) -> Vec<(&'static str, f64)> {
        let s = &self.stats;
        let mut v = vec![
            ("promoted_pages", s.promoted_pages as f64),
            ("promoted_units", s.promoted_units as f64),
            ("reclaim_promoted_units", s.reclaim_promoted_units as f64),
            ("promote_failed", s.promote_failed as f64),
            ("demoted_pages", s.demoted_pages as f64),
            ("demote_failed", s.demote_failed as f64),
            ("exchanges", s.exchanges as f64),
            ("kswapd_wakeups", s.kswapd_wakeups as f64),
            ("kswapd_batches", s.kswapd_batches as f64),
            ("direct_reclaims", s.direct_reclaims as f64),
            ("reclaim_scanned", s.reclaim_scanned as f64),
            ("periodic_scanned", s.periodic_scanned as f64),
            ("reaccess_tracked", self.meter.tracked as f64),
            ("reaccess_hits", self.meter.hits as f64),
            ("reaccess_pct", self.meter.pct()),
        ];
        for (e, name) in Edge::NAMES {
            v.push((name, self.edge(e) as f64));
        }
        let last = TierId((self.nr_tiers.max(1) - 1) as u8);
        for (tier, names) in [
            (
                TierId::FAST,
                [
                    "fast_inactive_pages",
                    "fast_active_pages",
                    "fast_promote_pages",
                ],
            ),
            (
                last,
                [
                    "slow_inactive_pages",
                    "slow_active_pages",
                    "slow_promote_pages",
                ],
            ),
        ] {
            for (l, name) in [ClockList::Inactive, ClockList::Active, ClockList::Promote]
                .into_iter()
                .zip(names)
            {
                v.push((name, self.lists.tier_pages(tier, l) as f64));
            }
        }
        v
    }
}
