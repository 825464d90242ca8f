//! `linux-tiering`: Linux NUMA balancing in memory-tiering mode (`numa_balancing=2`,
//! v6.1+), the kernel's own tiering that Chrono, PET, MEMTIS and FreqTier compare
//! against.
//!
//! - **Scan** ([`crate::numa_scan`]): the NUMA-balancing scanner arms only pages
//!   outside the fast tier (`change_pte_range` skips top-tier pages in this mode) and
//!   records the scan time in the page (`folio_xchg_access_time`).
//! - **Promote** (`should_numa_migrate_memory`, kernel/sched/fair.c): on a hinting
//!   fault on a slow-tier page, the hint-fault latency = fault time − scan time is
//!   compared with the hot threshold; a page under it is a promotion *candidate*, and
//!   candidates pass the per-second rate limit (`numa_promotion_rate_limit`). Every
//!   `numa_balancing_scan_period_max` the threshold moves one step toward the rate
//!   limit (`numa_promotion_adjust_threshold`). When the fast tier has plenty of free
//!   memory every faulting page is promoted and the threshold resets
//!   (`pgdat_free_space_enough`). Promotion is synchronous in the fault.
//! - **Make room** (`numamigrate_isolate_folio`, mm/migrate.c): a promotion that would
//!   take the fast tier below `high + its size` fails and wakes kswapd.
//! - **Demote** ([`crate::lru`]): kswapd, woken by that failure or by an allocation
//!   that left the fast tier below its low watermark, demotes from the fast tier's
//!   inactive LRU until free pages reach the promotion watermark `WMARK_PROMO`
//!   (`pgdat_balanced` in tiering mode).
//!
//! The pure decision logic is [`PromotionThrottle`]. Parameters, kernel sources and
//! decisions: `docs/policies/linux-tiering.md`.

use crate::lru::{
    lists_and_kswapd, migrate_balanced, promo_watermark, refusal_reclaims_at_once, Kswapd,
    KswapdConfig, Lru, Victim, LRU_TIERING_REQUIREMENTS,
};
use crate::numa_scan::{ArmFilter, NumaScanConfig, NumaScanner};
use serde::{Deserialize, Serialize};
use tierkit_core::*;

/// `NUMA_MIGRATION_ADJUST_STEPS`: the threshold moves by `2 · default / 16` per step.
const NUMA_MIGRATION_ADJUST_STEPS: u64 = 16;

/// `linux-tiering` parameters: the kernel's sysctls, in the kernel's units.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct LinuxTieringConfig {
    /// The NUMA-balancing scanner (`kernel.numa_balancing_scan_*`); its
    /// `scan_period_max_ms` is also the threshold-adjustment period, as in the kernel.
    pub scan: NumaScanConfig,
    /// Hot threshold on the hint-fault latency, ms (debugfs
    /// `sched/numa_balancing/hot_threshold_ms`, default 1000; range ≥ 1). A slow-tier
    /// page whose fault comes less than this long after its scan is a candidate.
    pub hot_threshold_ms: u64,
    /// Promotion rate limit, MB/s (`kernel.numa_balancing_promote_rate_limit_MBps`,
    /// default 65536 = 64 GiB/s, i.e. effectively unlimited; range ≥ 0, 0 blocks every
    /// promotion outside the free-space bypass). Counted in candidate pages per 1 s
    /// window.
    pub promote_rate_limit_mbps: u64,
    /// Also wake kswapd when an allocation leaves the fast tier below its low
    /// watermark (default false). Upstream does not: a first-touch allocation that
    /// finds the fast node below `low` falls back to the slow node in
    /// `get_page_from_freelist` without waking the fast node's kswapd, so in mode 2
    /// only failed promotions start demotion. `true` gives the textbook "kswapd
    /// wakes at the low watermark" behaviour.
    pub wake_kswapd_on_low_watermark: bool,
    /// Pacing of the kswapd-like demotion thread (not a kernel parameter).
    pub kswapd: KswapdConfig,
}

impl Default for LinuxTieringConfig {
    fn default() -> Self {
        LinuxTieringConfig {
            scan: NumaScanConfig::default(),
            hot_threshold_ms: 1000,
            promote_rate_limit_mbps: 65_536,
            wake_kswapd_on_low_watermark: false,
            kswapd: KswapdConfig::default(),
        }
    }
}

impl LinuxTieringConfig {
    /// Check ranges.
    pub fn validate(&self) -> Result<(), ConfigError> {
        self.scan
            .validate()
            .map_err(|e| format!("policy.scan: {e}"))?;
        if self.hot_threshold_ms == 0 {
            return Err("policy.hot_threshold_ms must be at least 1 (ms)".into());
        }
        if self.promote_rate_limit_mbps > u32::MAX as u64 {
            return Err(format!(
                "policy.promote_rate_limit_mbps must be in [0, {}], got {}",
                u32::MAX,
                self.promote_rate_limit_mbps
            )
            .into());
        }
        self.kswapd.validate().map_err(|e| e.prefixed("policy."))
    }
}

/// What [`PromotionThrottle::decide`] says about a slow-tier hinting fault.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    /// Candidate within the rate limit: promote.
    Promote,
    /// Latency at or above the threshold: not a candidate.
    Cold,
    /// Candidate, but this window's rate limit is used up.
    RateLimited,
}

/// The fast node's promotion state (`pgdat->nbp_*` and `PGPROMOTE_CANDIDATE`) and the
/// kernel's hot-page selection on it, without the machine: threshold, candidate
/// counting, the 1 s rate-limit window and the periodic threshold adjustment.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PromotionThrottle {
    /// `sysctl_numa_balancing_hot_threshold`, ms.
    default_threshold_ms: u64,
    /// Rate limit in pages per second (`MBps << (20 - PAGE_SHIFT)`).
    rate_limit_pages: u64,
    /// `nbp_threshold`: the adjusted threshold, ms; 0 = the default.
    threshold_ms: u64,
    /// `nbp_th_start`, ms.
    th_start_ms: u64,
    /// `nbp_th_nr_cand`: candidates counted at the last adjustment.
    th_nr_cand: u64,
    /// `nbp_rl_start`, ms: start of the current rate-limit window.
    rl_start_ms: u64,
    /// `nbp_rl_nr_cand`: candidates counted at the window start.
    rl_nr_cand: u64,
    /// `PGPROMOTE_CANDIDATE`, pages.
    nr_cand: u64,
}

impl PromotionThrottle {
    /// State at boot: default threshold, windows starting at time 0.
    pub fn new(hot_threshold_ms: u64, rate_limit_mbps: u64) -> PromotionThrottle {
        PromotionThrottle {
            default_threshold_ms: hot_threshold_ms,
            rate_limit_pages: rate_limit_mbps << (20 - PAGE_SHIFT),
            threshold_ms: 0,
            th_start_ms: 0,
            th_nr_cand: 0,
            rl_start_ms: 0,
            rl_nr_cand: 0,
            nr_cand: 0,
        }
    }

    /// The threshold in force, ms.
    pub fn threshold_ms(&self) -> u64 {
        if self.threshold_ms == 0 {
            self.default_threshold_ms
        } else {
            self.threshold_ms
        }
    }

    /// Candidate pages counted so far (`pgpromote_candidate`).
    pub fn nr_candidates(&self) -> u64 {
        self.nr_cand
    }

    /// The rate limit, pages per second.
    pub fn rate_limit_pages(&self) -> u64 {
        self.rate_limit_pages
    }

    /// The fast tier has plenty of free memory: the workload changed, forget the
    /// adjusted threshold (`pgdat_free_space_enough` path).
    pub fn reset_threshold(&mut self) {
        self.threshold_ms = 0;
    }

    /// `numa_promotion_adjust_threshold`: once more than `period_ms` has passed since
    /// the last adjustment, compare the candidates of the period with what the rate
    /// limit allows over it; more than 110% → threshold down one step, less than 90%
    /// → up one step. Step = `2 · default / 16`; range `[step, 2 · default]`.
    /// Returns true if an adjustment period ended now.
    pub fn adjust_threshold(&mut self, now_ms: u64, period_ms: u64) -> bool {
        if now_ms.saturating_sub(self.th_start_ms) <= period_ms {
            return false;
        }
        self.th_start_ms = now_ms;
        let ref_cand = self.rate_limit_pages * period_ms / 1000;
        let diff_cand = self.nr_cand - self.th_nr_cand;
        let unit_th = self.default_threshold_ms * 2 / NUMA_MIGRATION_ADJUST_STEPS;
        let mut th = self.threshold_ms();
        if diff_cand > ref_cand * 11 / 10 {
            th = th.saturating_sub(unit_th).max(unit_th);
        } else if diff_cand < ref_cand * 9 / 10 {
            th = (th + unit_th).min(self.default_threshold_ms * 2);
        }
        self.th_nr_cand = self.nr_cand;
        self.threshold_ms = th;
        true
    }

    /// `numa_promotion_rate_limit`: count `nr_pages` candidates; a window opens at the
    /// first candidate more than 1 s after the last window opened; true if this
    /// window has already let `rate_limit_pages` candidates through.
    pub fn rate_limited(&mut self, now_ms: u64, nr_pages: u64) -> bool {
        self.nr_cand += nr_pages;
        if now_ms.saturating_sub(self.rl_start_ms) > 1000 {
            self.rl_start_ms = now_ms;
            self.rl_nr_cand = self.nr_cand;
        }
        self.nr_cand - self.rl_nr_cand >= self.rate_limit_pages
    }

    /// The tiering branch of `should_numa_migrate_memory` (after the free-space
    /// bypass): adjust the threshold if a period ended, then judge a fault of
    /// hint-fault latency `latency_ms` on a unit of `nr_pages`.
    pub fn decide(
        &mut self,
        now_ms: u64,
        latency_ms: u64,
        nr_pages: u64,
        period_ms: u64,
    ) -> Verdict {
        self.adjust_threshold(now_ms, period_ms);
        if latency_ms >= self.threshold_ms() {
            Verdict::Cold
        } else if self.rate_limited(now_ms, nr_pages) {
            Verdict::RateLimited
        } else {
            Verdict::Promote
        }
    }
}

/// `pgdat_free_space_enough`: the fast tier has more than `WMARK_PROMO` plus
/// max(1 GiB, 1/16 of the tier) free.
pub fn free_space_enough(free: u64, capacity: u64, wm: Watermarks) -> bool {
    let enough = (GIB / PAGE_SIZE).max(capacity >> 4);
    free as f64 > promo_watermark(wm) + enough as f64
}

/// Counters of the tiering promotion path (the kernel's `pgpromote_*` and the
/// reasons a fault did not promote).
#[derive(Debug, Clone, Copy, Default)]
pub struct PromotionStats {
    /// Pages promoted in a hinting fault.
    pub promoted_pages: u64,
    /// Promotions let through by `pgdat_free_space_enough`, pages.
    pub free_space_promotions: u64,
    /// Slow-tier faults whose latency was at or above the threshold.
    pub cold_faults: u64,
    /// Candidate pages refused by the rate limit.
    pub rate_limited_pages: u64,
    /// Promotions refused by `migrate_balanced_pgdat` (each asks for reclaim), pages.
    pub watermark_failed_pages: u64,
    /// Promotions the mover refused, pages.
    pub migrate_failed_pages: u64,
    /// Of `promoted_pages`, those promoted when tried again after a refusal on the
    /// watermark made kswapd reclaim at once (base pages on a sampled machine only:
    /// [`refusal_reclaims_at_once`](crate::lru::refusal_reclaims_at_once)).
    pub promoted_after_reclaim_pages: u64,
}

/// What one hinting fault came to, for the caller's own page lists.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FaultOutcome {
    /// A fast-tier fault, or a slow-tier one that was not promoted.
    Stayed,
    /// The unit at `head` (`pages` base pages) moved to the fast tier.
    Promoted {
        /// Head page of the promoted unit.
        head: Vpn,
        /// Base pages promoted.
        pages: u64,
    },
    /// A promotion was refused because the fast tier is below its high watermark:
    /// the caller wakes its reclaim (kswapd) for a unit of `pages` base pages, as
    /// `numamigrate_isolate_folio` does (`wakeup_kswapd(.., folio_order(folio), ..)`).
    NeedsReclaim {
        /// Base pages of the refused unit (512 for a huge page).
        pages: u64,
    },
}

/// NUMA balancing's hinting-fault path in memory-tiering mode, as `do_numa_page`
/// runs it for every tiering policy built on it (`linux-tiering`, `mglru-pd`): the
/// scanner that arms pages, `should_numa_migrate_memory` (free-space bypass, then
/// [`PromotionThrottle`]) and `migrate_misplaced_folio` (synchronous promotion if the
/// fast tier stays balanced). What the caller keeps (LRU lists, MGLRU generations,
/// its kswapd) it updates from the returned [`FaultOutcome`].
#[derive(Debug)]
pub struct TieringPromotion {
    /// The page-table scanner that arms hinting faults.
    pub scanner: NumaScanner,
    /// The fast node's promotion threshold and rate limit.
    pub throttle: PromotionThrottle,
    /// What the path did.
    pub stats: PromotionStats,
    /// The scanner's longest period, ms: the threshold adjustment period.
    scan_period_max_ms: u64,
    /// How a slow-tier fault is judged.
    selection: HotSelection,
}

/// How `should_numa_migrate_memory` judges a hinting fault on a slow-tier page.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HotSelection {
    /// v6.0 and later ("memory tiering: hot page selection with hint page fault
    /// latency", "rate limit NUMA migration throughput", "adjust hot threshold
    /// automatically"): the free-space bypass, then [`PromotionThrottle`].
    Latency,
    /// v5.18, where tiering mode was merged: every fault on a slow-tier page asks for
    /// promotion (most recently used), with no threshold and no rate limit.
    EveryFault,
}

impl TieringPromotion {
    /// The path with its scanner settings, hot threshold (ms) and rate limit (MB/s).
    pub fn new(
        scan: NumaScanConfig,
        hot_threshold_ms: u64,
        rate_limit_mbps: u64,
    ) -> TieringPromotion {
        TieringPromotion {
            scan_period_max_ms: scan.scan_period_max_ms,
            scanner: NumaScanner::new(scan),
            throttle: PromotionThrottle::new(hot_threshold_ms, rate_limit_mbps),
            stats: PromotionStats::default(),
            selection: HotSelection::Latency,
        }
    }

    /// The v5.18 path: every slow-tier fault asks for promotion
    /// ([`HotSelection::EveryFault`]); the throttle is kept only for its counters.
    pub fn every_fault(scan: NumaScanConfig) -> TieringPromotion {
        TieringPromotion {
            selection: HotSelection::EveryFault,
            ..TieringPromotion::new(scan, 1000, 65_536)
        }
    }

    /// Handle hinting fault `f`: count it for the scanner, and promote a slow-tier
    /// unit if `should_numa_migrate_memory` and `migrate_balanced_pgdat` agree.
    pub fn on_hint_fault(&mut self, f: &HintFault, mech: &mut dyn Mechanisms) -> FaultOutcome {
        let pages = if f.huge { SUBPAGES_PER_HUGE } else { 1 };
        if f.tier.is_fast() {
            self.scanner.record_fault(f.pid, pages, true);
            return FaultOutcome::Stayed;
        }
        let fast = TierId::FAST;
        let wm = mech.watermarks(fast);
        if !self.should_promote(f, pages, wm, mech) {
            self.scanner.record_fault(f.pid, pages, false);
            return FaultOutcome::Stayed;
        }
        let outcome = if !migrate_balanced(mech.free_pages(fast), wm, pages) {
            self.stats.watermark_failed_pages += pages;
            FaultOutcome::NeedsReclaim { pages }
        } else {
            self.promote_now(f, pages, mech)
        };
        let promoted = matches!(outcome, FaultOutcome::Promoted { .. });
        if !promoted {
            self.scanner.record_failed(f.pid, pages);
        }
        self.scanner.record_fault(f.pid, pages, promoted);
        outcome
    }

    /// Try again the promotion of fault `f`, refused on the watermark
    /// ([`FaultOutcome::NeedsReclaim`]), after kswapd reclaimed at once
    /// ([`refusal_reclaims_at_once`](crate::lru::refusal_reclaims_at_once)). The
    /// refusal stays on the scanner's record; this attempt adds nothing to it.
    /// Returns `NeedsReclaim` again if the fast tier is still not balanced.
    pub fn retry_after_reclaim(
        &mut self,
        f: &HintFault,
        mech: &mut dyn Mechanisms,
    ) -> FaultOutcome {
        let pages = if f.huge { SUBPAGES_PER_HUGE } else { 1 };
        let fast = TierId::FAST;
        if !migrate_balanced(mech.free_pages(fast), mech.watermarks(fast), pages) {
            return FaultOutcome::NeedsReclaim { pages };
        }
        let outcome = self.promote_now(f, pages, mech);
        if matches!(outcome, FaultOutcome::Promoted { .. }) {
            self.stats.promoted_after_reclaim_pages += pages;
        }
        outcome
    }

    /// `migrate_misplaced_folio` once the fast tier is balanced: move the faulting
    /// unit (`pages` base pages) to the fast tier synchronously and count the outcome.
    fn promote_now(
        &mut self,
        f: &HintFault,
        pages: u64,
        mech: &mut dyn Mechanisms,
    ) -> FaultOutcome {
        match mech.migrate(f.pid, f.vpn, TierId::FAST, MigrateMode::Sync) {
            Ok(()) => {
                self.stats.promoted_pages += pages;
                let head = if f.huge { huge_head(f.vpn) } else { f.vpn };
                FaultOutcome::Promoted { head, pages }
            }
            Err(_) => {
                self.stats.migrate_failed_pages += pages;
                FaultOutcome::Stayed
            }
        }
    }

    /// `should_numa_migrate_memory` for a slow-tier fault: promote freely while the
    /// fast tier has plenty of free memory, else ask the throttle.
    fn should_promote(
        &mut self,
        f: &HintFault,
        pages: u64,
        wm: Watermarks,
        mech: &dyn Mechanisms,
    ) -> bool {
        if self.selection == HotSelection::EveryFault {
            return true;
        }
        let fast = TierId::FAST;
        let now = mech.now();
        if free_space_enough(mech.free_pages(fast), mech.tiers()[0].capacity_pages, wm) {
            self.throttle.reset_threshold();
            self.stats.free_space_promotions += pages;
            return true;
        }
        let latency_ms = now.saturating_sub(f.armed_at) / NS_PER_MS;
        match self
            .throttle
            .decide(now / NS_PER_MS, latency_ms, pages, self.scan_period_max_ms)
        {
            Verdict::Promote => true,
            Verdict::Cold => {
                self.stats.cold_faults += 1;
                false
            }
            Verdict::RateLimited => {
                self.stats.rate_limited_pages += pages;
                false
            }
        }
    }
}

/// The policy.
pub struct LinuxTiering {
    /// `linux-tiering`, or `linux-nb` for the v5.18 path.
    name: &'static str,
    cfg: LinuxTieringConfig,
    promotion: TieringPromotion,
    lru: Lru,
    kswapd: Kswapd,
    demoted: Vec<Victim>,
}

impl LinuxTiering {
    /// A policy with the given parameters.
    pub fn new(cfg: LinuxTieringConfig) -> LinuxTiering {
        let promotion = TieringPromotion::new(
            cfg.scan.clone(),
            cfg.hot_threshold_ms,
            cfg.promote_rate_limit_mbps,
        );
        LinuxTiering::with_promotion("linux-tiering", cfg, promotion)
    }

    /// Tiering mode as merged in v5.18 (`linux-nb`): every hinting fault on a
    /// slow-tier page promotes while the fast tier stays balanced; kswapd as in
    /// [`LinuxTiering::new`].
    pub fn v5_18(cfg: LinuxNbConfig) -> LinuxTiering {
        let promotion = TieringPromotion::every_fault(cfg.scan.clone());
        let cfg = LinuxTieringConfig {
            scan: cfg.scan,
            wake_kswapd_on_low_watermark: cfg.wake_kswapd_on_low_watermark,
            kswapd: cfg.kswapd,
            ..LinuxTieringConfig::default()
        };
        LinuxTiering::with_promotion("linux-nb", cfg, promotion)
    }

    /// The LRU lists and kswapd around a fault path (`init` sizes them).
    fn with_promotion(
        name: &'static str,
        cfg: LinuxTieringConfig,
        promotion: TieringPromotion,
    ) -> LinuxTiering {
        LinuxTiering {
            name,
            promotion,
            lru: Lru::new(2),
            kswapd: Kswapd::new(cfg.kswapd.clone(), 2),
            demoted: Vec::new(),
            cfg,
        }
    }

    /// The shared tiering fault path; a promoted unit joins the fast tier's LRU, a
    /// refused one wakes the fast tier's kswapd (on a sampled machine, an idle one
    /// reclaims at once and the promotion is tried again: [`refusal_reclaims_at_once`]).
    fn on_hint_fault(&mut self, f: &HintFault, mech: &mut dyn Mechanisms) {
        let mut outcome = self.promotion.on_hint_fault(f, mech);
        if let FaultOutcome::NeedsReclaim { pages } = outcome {
            let mark = promo_watermark(mech.watermarks(TierId::FAST));
            if refusal_reclaims_at_once(mech.pages_per_simulated_page(), pages)
                && self.kswapd.run_at_once_if_idle(
                    TierId::FAST,
                    pages,
                    mark,
                    &mut self.lru,
                    mech,
                    &mut self.demoted,
                )
            {
                self.demoted.clear();
                outcome = self.promotion.retry_after_reclaim(f, mech);
            }
        }
        match outcome {
            FaultOutcome::Promoted { head, pages } => {
                self.lru.on_migrated(f.pid, head, TierId::FAST, pages)
            }
            FaultOutcome::NeedsReclaim { pages } => {
                self.kswapd.wake_for_unit(TierId::FAST, pages, mech)
            }
            FaultOutcome::Stayed => {}
        }
    }
}

impl Policy for LinuxTiering {
    fn name(&self) -> &'static str {
        self.name
    }

    fn requirements(&self) -> Requirements {
        LRU_TIERING_REQUIREMENTS
    }

    fn init(&mut self, mech: &mut dyn Mechanisms) {
        (self.lru, self.kswapd) = lists_and_kswapd(&self.cfg.kswapd, mech);
        self.promotion.scanner.start_all(mech);
    }

    fn on_event(&mut self, event: &Event, mech: &mut dyn Mechanisms) {
        match *event {
            Event::HintFault(ref f) => self.on_hint_fault(f, mech),
            Event::PageAlloc {
                pid,
                vpn,
                tier,
                huge,
            } => self.lru.on_alloc(pid, vpn, tier, huge),
            Event::PageMoved { pid, vpn, to, .. } => self.lru.on_migrated(pid, vpn, to, 1),
            Event::Munmap {
                pid,
                start_vpn,
                nr_pages,
                ..
            } => self.lru.remove_range(pid, start_vpn, nr_pages),
            Event::LowWatermark { tier } => {
                if self.cfg.wake_kswapd_on_low_watermark {
                    self.kswapd.wake(tier, mech);
                }
            }
            Event::Timer { id } => {
                if let Some(tier) = self.kswapd.owns(id) {
                    // pgdat_balanced in tiering mode: reclaim up to WMARK_PROMO.
                    let target = promo_watermark(mech.watermarks(tier));
                    self.kswapd
                        .run(tier, target, &mut self.lru, mech, &mut self.demoted);
                    self.demoted.clear();
                } else if let Some(pid) = self.promotion.scanner.owns(id) {
                    self.promotion.scanner.step(pid, mech, ArmFilter::NotFast);
                }
            }
            Event::Mmap { .. } | Event::Sample(_) => {}
        }
    }

    /// The LRU links and the scan time live in `struct page` (the `lru` list head and
    /// the `last_cpupid` bits reused for the access time); the throttle is a few
    /// words per node. Nothing is added per page: 0.
    fn metadata_bytes(&self) -> u64 {
        0
    }

    fn stats(&self) -> Vec<(&'static str, f64)> {
        let k = self.kswapd.stats();
        vec![
            ("promoted_pages", self.promotion.stats.promoted_pages as f64),
            (
                "promote_candidate_pages",
                self.promotion.throttle.nr_candidates() as f64,
            ),
            ("cold_faults", self.promotion.stats.cold_faults as f64),
            (
                "rate_limited_pages",
                self.promotion.stats.rate_limited_pages as f64,
            ),
            (
                "free_space_promotion_pages",
                self.promotion.stats.free_space_promotions as f64,
            ),
            (
                "watermark_failed_pages",
                self.promotion.stats.watermark_failed_pages as f64,
            ),
            (
                "migrate_failed_pages",
                self.promotion.stats.migrate_failed_pages as f64,
            ),
            (
                "promoted_after_reclaim_pages",
                self.promotion.stats.promoted_after_reclaim_pages as f64,
            ),
            (
                "hot_threshold_ms",
                self.promotion.throttle.threshold_ms() as f64,
            ),
            ("kswapd_wakeups", k.nr_wakeups as f64),
            ("kswapd_scanned", k.nr_scanned as f64),
            ("kswapd_demoted_pages", k.nr_demoted_pages as f64),
            (
                "scan_passes_pid0",
                self.promotion.scanner.passes(Pid(0)) as f64,
            ),
        ]
    }
}

impl LinuxTieringConfig {
    /// Sampled simulation: the promotion rate limit (MB/s of promoted memory) scales.
    /// The hot threshold (ms) and the NUMA scanner's address-space step (MB of
    /// virtual range, which keeps its shape) do not. kswapd's isolation per round
    /// (SWAP_CLUSTER_MAX) scales inside [`crate::lru::Kswapd`] for every policy that
    /// uses it ([`crate::lru::isolated_per_round`]).
    pub fn scale_space(&mut self, s: SpaceScale) {
        self.promote_rate_limit_mbps = s.count(self.promote_rate_limit_mbps);
    }
}

/// `linux-nb` parameters: those of [`LinuxTieringConfig`] that v5.18 has. The hot
/// threshold, the rate limit and the free-space bypass came with v6.0.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct LinuxNbConfig {
    /// The NUMA-balancing scanner (`kernel.numa_balancing_scan_*`).
    pub scan: NumaScanConfig,
    /// As [`LinuxTieringConfig::wake_kswapd_on_low_watermark`] (default false).
    pub wake_kswapd_on_low_watermark: bool,
    /// Pacing of the kswapd-like demotion thread (not a kernel parameter).
    pub kswapd: KswapdConfig,
}

impl Default for LinuxNbConfig {
    fn default() -> Self {
        let t = LinuxTieringConfig::default();
        LinuxNbConfig {
            scan: t.scan,
            wake_kswapd_on_low_watermark: t.wake_kswapd_on_low_watermark,
            kswapd: t.kswapd,
        }
    }
}

/// The registry's view of [`LinuxNbConfig`]. Nothing of it is extensive: with no rate
/// limit there is nothing to scale for a sampled machine.
impl crate::RegisteredConfig for LinuxNbConfig {
    fn check(&self) -> Result<(), ConfigError> {
        self.scan
            .validate()
            .map_err(|e| format!("policy.scan: {e}").into())
    }

    fn build_policy(&self, _ctx: &tierkit_core::BuildContext) -> Box<dyn tierkit_core::Policy> {
        Box::new(LinuxTiering::v5_18(self.clone()))
    }
}

/// The registry's view of [`LinuxTieringConfig`] (`PolicyConfig` in the crate root).
impl crate::RegisteredConfig for LinuxTieringConfig {
    fn check(&self) -> Result<(), ConfigError> {
        self.validate()
    }

    fn scale(&mut self, scale: tierkit_core::SpaceScale) {
        self.scale_space(scale)
    }

    fn build_policy(&self, _ctx: &tierkit_core::BuildContext) -> Box<dyn tierkit_core::Policy> {
        Box::new(LinuxTiering::new(self.clone()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::lru::test_scripts::*;
    use tierkit_sim::testing::*;
    use tierkit_sim::{RunOutput, SimConfig};

    // ----- pure logic: the kernel's formulas ------------------------------------------

    #[test]
    fn latency_below_threshold_is_a_candidate_and_at_or_above_is_not() {
        let mut t = PromotionThrottle::new(1000, 65_536);
        assert_eq!(t.decide(5_000, 200, 1, 60_000), Verdict::Promote);
        assert_eq!(t.decide(5_000, 999, 1, 60_000), Verdict::Promote);
        assert_eq!(t.decide(5_000, 1000, 1, 60_000), Verdict::Cold);
        assert_eq!(t.decide(5_000, 2000, 1, 60_000), Verdict::Cold);
        assert_eq!(
            t.nr_candidates(),
            2,
            "only sub-threshold faults are candidates"
        );
    }

    #[test]
    fn rate_limit_lets_exactly_the_limit_through_per_window() {
        // 1 MB/s = 256 pages/s.
        let mut t = PromotionThrottle::new(1000, 1);
        assert_eq!(t.rate_limit_pages(), 256);
        let passed = (0..1000).filter(|_| !t.rate_limited(1500, 1)).count();
        assert_eq!(passed, 256);
        // Still the same window 1000 ms later (the kernel needs strictly more).
        assert!(t.rate_limited(2500, 1));
        // A new window opens at the first candidate more than 1 s on.
        let passed = (0..1000).filter(|_| !t.rate_limited(2501, 1)).count();
        assert_eq!(passed, 256);
        // The candidate that opens a window always passes and is not charged to it:
        // a 512-page huge page over a 256-page limit goes, and 255 pages after it.
        assert!(!t.rate_limited(4000, 512));
        let passed = (0..1000).filter(|_| !t.rate_limited(4001, 1)).count();
        assert_eq!(passed, 255);
    }

    #[test]
    fn threshold_steps_toward_the_rate_limit_every_period() {
        // 1 MB/s over a 60 s period: ref_cand = 256 * 60 = 15360 pages.
        let mut t = PromotionThrottle::new(1000, 1);
        assert!(!t.adjust_threshold(60_000, 60_000), "period not over yet");
        // Too many candidates (> 110%): down by 2*1000/16 = 125 ms.
        t.nr_cand = 17_000;
        assert!(t.adjust_threshold(60_001, 60_000));
        assert_eq!(t.threshold_ms(), 875);
        // Within ±10%: unchanged.
        t.nr_cand += 15_360;
        assert!(t.adjust_threshold(120_002, 60_000));
        assert_eq!(t.threshold_ms(), 875);
        // Too few (< 90%): up one step, capped at twice the default.
        for i in 0..20 {
            t.adjust_threshold(180_003 + i * 60_001, 60_000);
        }
        assert_eq!(t.threshold_ms(), 2000);
        // Floor at one step.
        for i in 0..40 {
            t.nr_cand += 100_000;
            t.adjust_threshold(10_000_000 + i * 60_001, 60_000);
        }
        assert_eq!(t.threshold_ms(), 125);
        t.reset_threshold();
        assert_eq!(t.threshold_ms(), 1000);
    }

    #[test]
    fn free_space_bypass_needs_a_gibibyte_or_a_sixteenth() {
        let wm = Watermarks::pages(100, 125, 150);
        let gib = GIB / PAGE_SIZE;
        assert!(!free_space_enough(gib, 4 * gib, wm));
        assert!(free_space_enough(gib + 176, 4 * gib, wm));
        // 64 GiB tier: a sixteenth = 4 GiB.
        assert!(!free_space_enough(3 * gib, 64 * gib, wm));
        assert!(free_space_enough(4 * gib + 176, 64 * gib, wm));
    }

    // ----- simulator experiments ------------------------------------------------------

    fn policy(cfg: LinuxTieringConfig) -> Box<dyn Policy> {
        Box::new(LinuxTiering::new(cfg))
    }

    /// One scan at 1 s and none for 10 s after (so each target is faulted exactly once
    /// after that arming), kswapd waking at the low watermark so the start-up phase
    /// demotes the targets to the slow tier.
    fn one_scan_per_10s() -> NumaScanConfig {
        NumaScanConfig {
            scan_period_min_ms: 10_000,
            adaptive_period: false,
            ..NumaScanConfig::default()
        }
    }

    /// Three demoted targets: target 0 read 200 ms after the scan armed it, target 1
    /// 2000 ms after, target 2 never. The run's output and the three targets' tiers.
    fn fault_200ms_and_2000ms_after_the_scan(policy: Box<dyn Policy>) -> (RunOutput, [TierId; 3]) {
        let mut s = DemotedTargets::new(16, 3);
        s.idle_until(1_200 * NS_PER_MS);
        s.read_target(0);
        s.idle_until(3_000 * NS_PER_MS);
        s.read_target(1);
        s.idle_until(3_100 * NS_PER_MS);
        let (out, m) = run(&s.machine(), &SimConfig::default(), policy, s.script());
        let tiers = [0, 1, 2].map(|i| s.tier_of(&m, i));
        (out, tiers)
    }

    #[test]
    fn promotes_a_200ms_fault_and_not_a_2000ms_one() {
        let cfg = LinuxTieringConfig {
            scan: one_scan_per_10s(),
            wake_kswapd_on_low_watermark: true,
            ..LinuxTieringConfig::default()
        };
        let (out, tiers) = fault_200ms_and_2000ms_after_the_scan(policy(cfg));
        assert_eq!(tiers[2], TierId(1), "the untouched target was demoted");
        assert_eq!(tiers[0], TierId::FAST, "200 ms latency is promoted");
        assert_eq!(tiers[1], TierId(1), "2000 ms latency is not");
        assert!(stat(&out, "cold_faults") >= 1.0);
        assert!(stat(&out, "promoted_pages") >= 1.0);
    }

    /// v5.18 (`linux-nb`): the same two faults as above both promote, however long
    /// after the scan they come, and nothing is counted cold or rate-limited.
    #[test]
    fn linux_nb_promotes_every_slow_fault_whatever_its_latency() {
        let cfg = LinuxNbConfig {
            scan: one_scan_per_10s(),
            wake_kswapd_on_low_watermark: true,
            ..LinuxNbConfig::default()
        };
        let nb = Box::new(LinuxTiering::v5_18(cfg));
        assert_eq!(nb.name(), "linux-nb");
        let (out, tiers) = fault_200ms_and_2000ms_after_the_scan(nb);
        assert_eq!(tiers[2], TierId(1), "the untouched target stays demoted");
        assert_eq!(tiers[0], TierId::FAST, "200 ms latency is promoted");
        assert_eq!(tiers[1], TierId::FAST, "so is 2000 ms");
        assert_eq!(stat(&out, "cold_faults"), 0.0);
        assert_eq!(stat(&out, "rate_limited_pages"), 0.0);
        assert_eq!(stat(&out, "free_space_promotion_pages"), 0.0);
    }

    #[test]
    fn promotions_per_second_never_exceed_the_rate_limit() {
        let limited = LinuxTieringConfig {
            promote_rate_limit_mbps: 1, // 256 pages/s
            ..LinuxTieringConfig::default()
        };
        let sweep = || SweepWorkload::new(16, 24, 4_500 * NS_PER_MS);
        let sim = SimConfig {
            interval_ms: 1,
            ..SimConfig::default()
        };
        let w = sweep();
        let (out, _) = run(&w.machine(), &sim, policy(limited), w.script());
        let per_second = per_second(&out.series.rows, |r| r.promoted_pages);
        assert!(per_second.len() >= 4, "ran {} s", per_second.len());
        for (s, &n) in per_second.iter().enumerate() {
            assert!(n <= 256, "second {s}: {n} promotions > 256 allowed");
        }
        assert!(
            stat(&out, "rate_limited_pages") > 0.0,
            "the limit was binding"
        );
        let limited_total = out.summary.promoted_pages;
        assert!(limited_total > 0);
        // The same run without the limit promotes far more.
        let w = sweep();
        let (free_run, _) = run(
            &w.machine(),
            &sim,
            policy(LinuxTieringConfig::default()),
            w.script(),
        );
        eprintln!(
            "rate limit 256 pages/s: promoted per second {per_second:?}, total {limited_total}; \
             unlimited: {}",
            free_run.summary.promoted_pages
        );
        // With the default settings kswapd runs only because promotions failed.
        assert!(stat(&free_run, "watermark_failed_pages") > 0.0);
        assert!(stat(&free_run, "kswapd_demoted_pages") > 0.0);
        assert!(
            free_run.summary.promoted_pages > 3 * limited_total,
            "unlimited {} vs limited {}",
            free_run.summary.promoted_pages,
            limited_total
        );
    }

    /// A sampled fast tier of a few hundred pages (the `freqtier` suite's GAP cells at
    /// 1:32: 34 MiB of a 1.2 GiB machine at 1/16, 134 MiB of 4.7 GiB at 1/64) must
    /// still leave room for one promotion where kswapd stops (the first whole page at
    /// or past the promotion watermark), or nothing is ever promoted. With each
    /// watermark rounded on its own, the first case's step was 1 page: kswapd stopped
    /// at 4 free pages where a promotion needed 5.
    #[test]
    fn a_small_sampled_fast_tier_leaves_room_for_a_promotion_where_kswapd_stops() {
        use tierkit_sim::machine::{linux_watermarks, sampled_watermarks};
        let pages = |mib: u64| mib * MIB / PAGE_SIZE;
        for (fast, total) in [(34, 1_224), (134, 4_515), (16, 80), (4_096, 36_864)] {
            for rate in [1.0 / 8.0, 1.0 / 16.0, 1.0 / 64.0, 1.0 / 256.0] {
                let full = linux_watermarks(pages(fast), pages(total));
                let wm = sampled_watermarks(full, rate);
                assert!(wm.min < wm.low && wm.low < wm.high, "{wm:?}");
                assert!(
                    migrate_balanced(promo_watermark(wm).ceil() as u64, wm, 1),
                    "{fast} MiB of {total} at {rate}: {wm:?}"
                );
            }
        }
        // A tier large enough keeps the full machine's watermarks, each shrunk and
        // kept fractional: a band of 1.8 sampled pages is not rounded to 1 or 2.
        let full = linux_watermarks(pages(4_096), pages(36_864));
        let wm = sampled_watermarks(full, 1.0 / 8.0);
        assert_eq!(
            (wm.min, wm.low, wm.high),
            (full.min / 8.0, full.low / 8.0, full.high / 8.0)
        );
        assert!(
            full.high.fract() == 0.0 && wm.high.fract() != 0.0,
            "{full:?} {wm:?}"
        );
    }

    /// GUPS on 512 MiB with a 64 MiB fast tier, sampled at `rate`: enough pressure
    /// that kswapd runs and promotions are refused on the watermark.
    fn gups_under_pressure(policy: Box<dyn Policy>, rate: &str) -> RunOutput {
        use tierkit_workloads::{GupsConfig, WorkloadConfig};
        let sim = SimConfig {
            sample_rate: tierkit_sim::SampleRate::parse(rate).unwrap(),
            ..SimConfig::default()
        };
        let gups = WorkloadConfig::Gups(GupsConfig {
            footprint_mib: 512,
            nr_updates: 40_000_000,
            ..Default::default()
        })
        .build(3);
        run(&small_machine(64, 1024), &sim, policy, gups).0
    }

    /// On a sampled machine a base page's hinting-fault promotion refused on the
    /// watermark, finding kswapd idle, has it reclaim at once and is tried again
    /// ([`refusal_reclaims_at_once`]); the refusal stays counted. Exactly, nothing is
    /// tried again. Linux tiering and Base+PD, whose kswapd stops at the promotion
    /// watermark, refuse promotions on GUPS; TPP's stops at its higher demotion
    /// watermark and refuses none there (its refusals come while allocations fill the
    /// fast tier, as in zipf-kv's load), so it is not in this cell.
    #[test]
    fn a_sampled_refusal_has_kswapd_reclaim_at_once_and_is_tried_again() {
        let policies: [fn() -> Box<dyn Policy>; 2] = [
            || policy(LinuxTieringConfig::default()),
            || Box::new(crate::MglruPd::new(crate::MglruPdConfig::default())),
        ];
        for make in policies {
            let run_at = |rate: &str| gups_under_pressure(make(), rate);
            let exact = run_at("1");
            let name = exact.summary.policy.clone();
            assert!(stat(&exact, "watermark_failed_pages") > 0.0, "{name}");
            assert_eq!(stat(&exact, "promoted_after_reclaim_pages"), 0.0, "{name}");
            let sampled = run_at("1/8");
            let (refused, retried) = (
                stat(&sampled, "watermark_failed_pages"),
                stat(&sampled, "promoted_after_reclaim_pages"),
            );
            assert!(retried > 0.0, "{name}: nothing tried again");
            assert!(
                retried <= refused,
                "{name}: {retried} retried of {refused} refused"
            );
        }
    }

    /// kswapd demotes `SWAP_CLUSTER_MAX` / N sampled pages a round on a machine
    /// sampled at 1/N before it looks at the watermark again
    /// ([`crate::lru::isolated_per_round`]; the MGLRU forms' evictions likewise), so
    /// its cycles are the full machine's image: about as many wakeups as exactly, each
    /// freeing about as many represented pages. GUPS at 1/8, Linux tiering: 7 548
    /// wakeups exactly, 7 724 sampled; with 32 sampled pages a round it woke 1 624
    /// times, freeing 110 pages a wakeup, not 24; Base+PD, evicting a whole batch of
    /// 32 sampled pages, woke 954 times against 7 406.
    #[test]
    fn a_sampled_kswapd_wakes_as_often_as_the_full_one() {
        let policies: [fn() -> Box<dyn Policy>; 3] = [
            || policy(LinuxTieringConfig::default()),
            || Box::new(crate::MglruPd::new(crate::MglruPdConfig::default())),
            || Box::new(crate::MglruPd::kswapd_only(crate::MglruPdConfig::default())),
        ];
        for make in policies {
            let run_at = |rate: &str| gups_under_pressure(make(), rate);
            let exact = run_at("1");
            let sampled = run_at("1/8");
            let name = exact.summary.policy.clone();
            let (we, ws) = (
                stat(&exact, "kswapd_wakeups"),
                stat(&sampled, "kswapd_wakeups"),
            );
            let (de, ds) = (
                stat(&exact, "kswapd_demoted_pages") / we,
                8.0 * stat(&sampled, "kswapd_demoted_pages") / ws,
            );
            assert!(we > 100.0, "{name}: exact kswapd woke {we} times");
            assert!(
                (ws / we - 1.0).abs() < 0.25,
                "{name}: wakeups {we} exactly, {ws} sampled"
            );
            assert!(
                (ds / de - 1.0).abs() < 0.25,
                "{name}: pages a wakeup {de} exactly, {ds} sampled (represented)"
            );
        }
    }

    #[test]
    fn kswapd_starts_below_low_watermark_and_restores_the_promotion_watermark() {
        let fast_pages = 16 * MIB / PAGE_SIZE;
        let total = fast_pages + 64 * MIB / PAGE_SIZE;
        let wm = tierkit_sim::machine::linux_watermarks(fast_pages, total);
        let low_wakes = || {
            policy(LinuxTieringConfig {
                wake_kswapd_on_low_watermark: true,
                ..LinuxTieringConfig::default()
            })
        };
        // Touching up to exactly `low` free pages never wakes kswapd.
        let at_low = fast_pages - wm.low as u64;
        let w = TouchThenIdle::new(16, 64, at_low);
        let (out, m) = run(&w.machine(), &SimConfig::default(), low_wakes(), w.script());
        assert_eq!(out.summary.demoted_pages, 0);
        assert_eq!(m.free_pages(TierId::FAST) as f64, wm.low);
        // Three times the fast tier: kswapd demotes and leaves WMARK_PROMO free.
        let w = TouchThenIdle::new(16, 64, 3 * fast_pages);
        let (out, m) = run(&w.machine(), &SimConfig::default(), low_wakes(), w.script());
        assert!(out.summary.demoted_pages > 0);
        let free = m.free_pages(TierId::FAST);
        let promo = promo_watermark(wm);
        assert!(free as f64 >= promo, "free {free} < promo {promo}");
        assert!(
            (free as f64) < promo + SWAP_CLUSTER_MAX_PAGES as f64,
            "overshoot: {free}"
        );
        // The oldest pages went first.
        assert_eq!(w.tier_of(&m, 0), TierId(1));
        assert_eq!(w.tier_of(&m, 1), TierId(1));
        // Upstream default: allocations spill to the slow tier, nothing is demoted.
        let (out, m) = run(
            &w.machine(),
            &SimConfig::default(),
            policy(LinuxTieringConfig::default()),
            w.script(),
        );
        assert_eq!(out.summary.demoted_pages, 0);
        assert!((m.free_pages(TierId::FAST) as f64) < wm.low);
    }

    const SWAP_CLUSTER_MAX_PAGES: u64 = crate::lru::SWAP_CLUSTER_MAX;
}
