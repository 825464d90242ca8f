//! `tpp`: TPP, Transparent Page Placement (Maruf et al., ASPLOS'23, Meta), as its
//! kernel patch implements it (the `tpp.patch` on Linux 5.13 carried by the NOMAD
//! artifact; the paper itself is not available here).
//!
//! - **Scan**: NUMA-balancing hinting faults on slow-tier pages only (the patch skips
//!   top-tier pages in `change_pte_range`, like `numa_balancing=2`).
//! - **Promote** (`do_numa_page`): a hinting fault on a slow-tier page that is *not*
//!   on its tier's active LRU list only marks it accessed (TPP's active-LRU filter);
//!   a fault on an active page promotes it, synchronously in the fault, if the fast
//!   tier stays above `high + its size` (`migrate_balanced_pgdat`). So a page is
//!   promoted on its second fault in two scan passes. No latency threshold, no rate
//!   limit.
//! - **Demote** ([`crate::lru`]): TPP decouples reclaim from allocation with a
//!   *demotion watermark* `WMARK_DEMOTE = demote_scale_factor/10000 · tier size`,
//!   clamped to `[2 · high, size]`. kswapd is woken whenever the fast tier's free
//!   pages fall below it (on every fast-tier allocation and promotion; the patch also
//!   checks on scheduler ticks) and demotes from the inactive LRU until free pages
//!   are back at it, so new allocations keep finding free fast memory. Demoted pages
//!   are armed for a hinting fault at once (`PG_demoted`, `remove_migration_pte`).
//!
//! Parameters and decisions: `docs/policies/tpp.md`.

use crate::lru::{
    kswapd_balanced_free, lists_and_kswapd, migrate_balanced, refusal_reclaims_at_once, Kswapd,
    KswapdConfig, Lru, LruList, Victim, LRU_TIERING_REQUIREMENTS,
};
use crate::numa_scan::{ArmFilter, NumaScanConfig, NumaScanner};
use serde::{Deserialize, Serialize};
use tierkit_core::*;

/// `tpp` parameters.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct TppConfig {
    /// The NUMA-balancing scanner (`kernel.numa_balancing_scan_*`).
    pub scan: NumaScanConfig,
    /// Demotion watermark in units of 1/10000 of the tier (`vm.demote_scale_factor`,
    /// TPP patch default 200 = 2%; range 1..=10000).
    pub demote_scale_factor: u64,
    /// `false` (default): a fault on an inactive slow-tier page moves it to the
    /// active list, so the next fault promotes it (TPP's "promote on the second
    /// access"). `true`: the fault calls `mark_page_accessed` as the patch does, which
    /// first only sets `PG_referenced`, so activation takes two faults and promotion
    /// a third.
    pub strict_mark_page_accessed: bool,
    /// Arm a page for a hinting fault when it is demoted (the patch's `PG_demoted`;
    /// default true).
    pub arm_demoted: bool,
    /// Pacing of the kswapd-like demotion thread (not a kernel parameter).
    pub kswapd: KswapdConfig,
}

impl Default for TppConfig {
    fn default() -> Self {
        TppConfig {
            scan: NumaScanConfig::default(),
            demote_scale_factor: 200,
            strict_mark_page_accessed: false,
            arm_demoted: true,
            kswapd: KswapdConfig::default(),
        }
    }
}

impl TppConfig {
    /// Check ranges.
    pub fn validate(&self) -> Result<(), ConfigError> {
        self.scan
            .validate()
            .map_err(|e| format!("policy.scan: {e}"))?;
        if !(1..=10_000).contains(&self.demote_scale_factor) {
            return Err(format!(
                "policy.demote_scale_factor must be in [1, 10000] (1/10000 of the tier), got {}",
                self.demote_scale_factor
            )
            .into());
        }
        self.kswapd.validate().map_err(|e| e.prefixed("policy."))
    }
}

/// TPP's demotion watermark of a tier of `capacity` pages (`__setup_per_zone_wmarks`
/// in the patch): `capacity · factor / 10000`, at least twice the high watermark, at
/// most the whole tier.
pub fn demote_watermark(capacity: u64, wm: Watermarks, demote_scale_factor: u64) -> f64 {
    ((capacity * demote_scale_factor / 10_000) as f64)
        .max(2.0 * wm.high)
        .min(capacity as f64)
}

#[derive(Debug, Clone, Copy, Default)]
struct Stats {
    promoted_pages: u64,
    /// Faults on inactive pages (no promotion).
    inactive_faults: u64,
    /// Of those, the ones that moved the page to the active list.
    activations: u64,
    watermark_failed_pages: u64,
    migrate_failed_pages: u64,
    /// Promotions refused on the watermark that went through when tried again after
    /// kswapd reclaimed at once (a sampled machine only: [`refusal_reclaims_at_once`]).
    promoted_after_reclaim_pages: u64,
}

/// What one promotion attempt came to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Promotion {
    Promoted,
    /// Refused on the watermark, then promoted after kswapd reclaimed at once: on the
    /// scanner's record it stays a refusal ([`refusal_reclaims_at_once`]).
    PromotedAfterRefusal,
    Refused,
    Failed,
}

/// The policy.
pub struct Tpp {
    cfg: TppConfig,
    scanner: NumaScanner,
    lru: Lru,
    kswapd: Kswapd,
    demoted: Vec<Victim>,
    stats: Stats,
}

impl Tpp {
    /// A policy with the given parameters.
    pub fn new(cfg: TppConfig) -> Tpp {
        Tpp {
            scanner: NumaScanner::new(cfg.scan.clone()),
            lru: Lru::new(2),
            kswapd: Kswapd::new(cfg.kswapd.clone(), 2),
            demoted: Vec::new(),
            stats: Stats::default(),
            cfg,
        }
    }

    fn demote_wmark(&self, tier: TierId, mech: &dyn Mechanisms) -> f64 {
        let cap = mech.tiers()[tier.index()].capacity_pages;
        demote_watermark(cap, mech.watermarks(tier), self.cfg.demote_scale_factor)
    }

    /// `pgdat_toptier_balanced` failed → `wakeup_kswapd` for an allocation of
    /// `unit_pages` base pages: 1 for the allocation checks (TPP's `rmqueue` hook
    /// wakes at order 0), the refused unit for a promotion that did not fit
    /// (`numamigrate_isolate_page` passes its `compound_order`).
    fn wake_if_unbalanced(&mut self, tier: TierId, unit_pages: u64, mech: &mut dyn Mechanisms) {
        let balanced_free = kswapd_balanced_free(self.demote_wmark(tier, mech), unit_pages, 0);
        if tier.index() + 1 < mech.tiers().len() && (mech.free_pages(tier) as f64) < balanced_free {
            self.kswapd.wake_for_unit(tier, unit_pages, mech);
        }
    }

    fn on_hint_fault(&mut self, f: &HintFault, mech: &mut dyn Mechanisms) {
        let pages = if f.huge { SUBPAGES_PER_HUGE } else { 1 };
        if f.tier.is_fast() {
            self.scanner.record_fault(f.pid, pages, true);
            return;
        }
        let head = if f.huge { huge_head(f.vpn) } else { f.vpn };
        let list = match self.lru.get(f.pid, head) {
            Some(e) => e.list,
            None => {
                self.lru.on_alloc(f.pid, head, f.tier, f.huge);
                LruList::Inactive
            }
        };
        if list == LruList::Inactive {
            // TPP: only active pages are promoted; this fault marks the page.
            self.stats.inactive_faults += 1;
            let now_active = if self.cfg.strict_mark_page_accessed {
                self.lru.mark_page_accessed(f.pid, head) == Some(LruList::Active)
            } else {
                self.lru.activate(f.pid, head)
            };
            if now_active {
                self.stats.activations += 1;
            }
            self.scanner.record_fault(f.pid, pages, false);
            return;
        }
        let local = self.promote(f, head, pages, mech) == Promotion::Promoted;
        if !local {
            self.scanner.record_failed(f.pid, pages);
        }
        self.scanner.record_fault(f.pid, pages, local);
    }

    fn promote(
        &mut self,
        f: &HintFault,
        head: Vpn,
        pages: u64,
        mech: &mut dyn Mechanisms,
    ) -> Promotion {
        let fast = TierId::FAST;
        let mut promoted = Promotion::Promoted;
        if !migrate_balanced(mech.free_pages(fast), mech.watermarks(fast), pages) {
            self.stats.watermark_failed_pages += pages;
            let room_after_reclaim =
                refusal_reclaims_at_once(mech.pages_per_simulated_page(), pages)
                    && self.reclaim_at_once(pages, mech)
                    && migrate_balanced(mech.free_pages(fast), mech.watermarks(fast), pages);
            if !room_after_reclaim {
                self.wake_if_unbalanced(fast, pages, mech);
                return Promotion::Refused;
            }
            promoted = Promotion::PromotedAfterRefusal;
        }
        match mech.migrate(f.pid, f.vpn, fast, MigrateMode::Sync) {
            Ok(()) => {
                self.lru.on_migrated(f.pid, head, fast, pages);
                self.stats.promoted_pages += pages;
                if promoted == Promotion::PromotedAfterRefusal {
                    self.stats.promoted_after_reclaim_pages += pages;
                }
                // The promotion's allocation on the top tier (rmqueue check).
                self.wake_if_unbalanced(fast, 1, mech);
                promoted
            }
            Err(_) => {
                self.stats.migrate_failed_pages += pages;
                Promotion::Failed
            }
        }
    }

    /// For a refusal on a sampled machine ([`refusal_reclaims_at_once`]): the fast
    /// tier's kswapd, if idle, runs its first batch now for a unit of `unit_pages`.
    /// Returns whether it ran.
    fn reclaim_at_once(&mut self, unit_pages: u64, mech: &mut dyn Mechanisms) -> bool {
        let fast = TierId::FAST;
        let target = self.demote_wmark(fast, mech);
        let ran = self.kswapd.run_at_once_if_idle(
            fast,
            unit_pages,
            target,
            &mut self.lru,
            mech,
            &mut self.demoted,
        );
        // Part of kswapd's batch (`demote_folio_list`): the kthread's work too.
        mech.as_kthread(&mut |m| self.arm_demoted(m));
        ran
    }

    /// TPP's `PG_demoted`: the pages kswapd just demoted are armed for a hinting fault.
    fn arm_demoted(&mut self, mech: &mut dyn Mechanisms) {
        for v in self.demoted.drain(..) {
            if self.cfg.arm_demoted {
                mech.arm_hint_fault(v.pid, v.vpn);
            }
        }
    }
}

impl Policy for Tpp {
    fn name(&self) -> &'static str {
        "tpp"
    }

    fn requirements(&self) -> Requirements {
        LRU_TIERING_REQUIREMENTS
    }

    fn init(&mut self, mech: &mut dyn Mechanisms) {
        (self.lru, self.kswapd) = lists_and_kswapd(&self.cfg.kswapd, mech);
        self.scanner.start_all(mech);
    }

    fn on_event(&mut self, event: &Event, mech: &mut dyn Mechanisms) {
        match *event {
            Event::HintFault(ref f) => self.on_hint_fault(f, mech),
            Event::PageAlloc {
                pid,
                vpn,
                tier,
                huge,
            } => {
                self.lru.on_alloc(pid, vpn, tier, huge);
                self.wake_if_unbalanced(tier, 1, mech);
            }
            Event::PageMoved { pid, vpn, to, .. } => self.lru.on_migrated(pid, vpn, to, 1),
            Event::Munmap {
                pid,
                start_vpn,
                nr_pages,
                ..
            } => self.lru.remove_range(pid, start_vpn, nr_pages),
            Event::LowWatermark { tier } => self.kswapd.wake(tier, mech),
            Event::Timer { id } => {
                if let Some(tier) = self.kswapd.owns(id) {
                    // pgdat_toptier_balanced: reclaim up to the demotion watermark.
                    let target = self.demote_wmark(tier, mech);
                    self.kswapd
                        .run(tier, target, &mut self.lru, mech, &mut self.demoted);
                    self.arm_demoted(mech);
                } else if let Some(pid) = self.scanner.owns(id) {
                    self.scanner.step(pid, mech, ArmFilter::NotFast);
                }
            }
            Event::Mmap { .. } | Event::Sample(_) => {}
        }
    }

    /// The LRU lists and `PG_demoted` live in `struct page`; nothing is added per
    /// page: 0.
    fn metadata_bytes(&self) -> u64 {
        0
    }

    fn stats(&self) -> Vec<(&'static str, f64)> {
        let k = self.kswapd.stats();
        vec![
            ("promoted_pages", self.stats.promoted_pages as f64),
            ("inactive_faults", self.stats.inactive_faults as f64),
            ("activations", self.stats.activations as f64),
            (
                "watermark_failed_pages",
                self.stats.watermark_failed_pages as f64,
            ),
            (
                "promoted_after_reclaim_pages",
                self.stats.promoted_after_reclaim_pages as f64,
            ),
            (
                "migrate_failed_pages",
                self.stats.migrate_failed_pages as f64,
            ),
            ("kswapd_wakeups", k.nr_wakeups as f64),
            ("kswapd_scanned", k.nr_scanned as f64),
            ("kswapd_demoted_pages", k.nr_demoted_pages as f64),
            ("scan_passes_pid0", self.scanner.passes(Pid(0)) as f64),
        ]
    }
}

/// The registry's view of [`TppConfig`] (`PolicyConfig` in the crate root).
impl crate::RegisteredConfig for TppConfig {
    fn check(&self) -> Result<(), ConfigError> {
        self.validate()
    }

    fn build_policy(&self, _ctx: &tierkit_core::BuildContext) -> Box<dyn tierkit_core::Policy> {
        Box::new(Tpp::new(self.clone()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::lru::test_scripts::*;
    use tierkit_sim::testing::*;
    use tierkit_sim::SimConfig;

    /// Scan passes at exactly 1 s, 2 s, 3 s...
    fn cfg(strict: bool) -> TppConfig {
        TppConfig {
            scan: NumaScanConfig {
                adaptive_period: false,
                ..NumaScanConfig::default()
            },
            strict_mark_page_accessed: strict,
            ..TppConfig::default()
        }
    }

    #[test]
    fn demote_watermark_follows_the_patch_clamps() {
        let wm = Watermarks::pages(100, 125, 150);
        assert_eq!(demote_watermark(100_000, wm, 200), 2_000.0);
        assert_eq!(demote_watermark(10_000, wm, 200), 300.0, "at least 2·high");
        assert_eq!(
            demote_watermark(10_000, wm, 10_000),
            10_000.0,
            "at most the tier"
        );
    }

    #[test]
    fn promotes_a_page_faulted_twice_but_not_one_faulted_once() {
        let mut s = DemotedTargets::new(16, 3);
        s.idle_until(1_200 * NS_PER_MS);
        s.read_target(0); // first fault: activated
        s.read_target(1); // its only fault: activated, never promoted
        s.idle_until(2_200 * NS_PER_MS);
        s.read_target(0); // second fault, on the active list: promoted
        s.idle_until(2_300 * NS_PER_MS);
        let (out, m) = run(
            &s.machine(),
            &SimConfig::default(),
            Box::new(Tpp::new(cfg(false))),
            s.script(),
        );
        assert_eq!(
            s.tier_of(&m, 2),
            TierId(1),
            "the untouched target was demoted"
        );
        assert_eq!(s.tier_of(&m, 1), TierId(1), "one fault does not promote");
        assert_eq!(s.tier_of(&m, 0), TierId::FAST, "the second fault promotes");
        assert!(stat(&out, "activations") >= 2.0);
    }

    #[test]
    fn strict_mark_page_accessed_needs_a_third_fault() {
        let mut s = DemotedTargets::new(16, 2);
        s.idle_until(1_200 * NS_PER_MS);
        s.read_target(0);
        s.read_target(1);
        s.idle_until(2_200 * NS_PER_MS);
        s.read_target(0);
        s.read_target(1);
        s.idle_until(3_200 * NS_PER_MS);
        s.read_target(1);
        s.idle_until(3_300 * NS_PER_MS);
        let (_, m) = run(
            &s.machine(),
            &SimConfig::default(),
            Box::new(Tpp::new(cfg(true))),
            s.script(),
        );
        assert_eq!(s.tier_of(&m, 0), TierId(1), "two faults only activate");
        assert_eq!(s.tier_of(&m, 1), TierId::FAST, "the third fault promotes");
    }

    #[test]
    fn kswapd_keeps_the_demotion_watermark_free_for_allocations() {
        let fast_pages = 16 * MIB / PAGE_SIZE;
        let total = fast_pages + 64 * MIB / PAGE_SIZE;
        let wm = tierkit_sim::machine::linux_watermarks(fast_pages, total);
        // An exact machine: a whole number of pages.
        let demote = demote_watermark(fast_pages, wm, 200) as u64;
        // Up to the demotion watermark nothing is demoted.
        let w = TouchThenIdle::new(16, 64, fast_pages - demote);
        let (out, _) = run(
            &w.machine(),
            &SimConfig::default(),
            Box::new(Tpp::new(cfg(false))),
            w.script(),
        );
        assert_eq!(out.summary.demoted_pages, 0);
        // Twice the tier: kswapd demotes the oldest and restores the watermark.
        let w = TouchThenIdle::new(16, 64, 2 * fast_pages);
        let (out, m) = run(
            &w.machine(),
            &SimConfig::default(),
            Box::new(Tpp::new(cfg(false))),
            w.script(),
        );
        assert!(out.summary.demoted_pages > 0);
        let free = m.free_pages(TierId::FAST);
        assert!(
            free >= demote && free < demote + crate::lru::SWAP_CLUSTER_MAX,
            "free {free}, demote wmark {demote}"
        );
        assert_eq!(w.tier_of(&m, 0), TierId(1));
    }
}
