//! `multiclock`: MULTI-CLOCK (Maruf et al., HPCA'22), per-tier CLOCK lists with a
//! promote list, as specified in `specs/multiclock.md` from the paper.
//!
//! - **Lists** ([`lists`]): each tier keeps inactive and active lists per LRU type,
//!   and every tier with a tier above it a *promote* list. A page climbs IU → IR →
//!   AU → AR → P one step per look of the CLOCK hand that finds its accessed bit set
//!   (unsupervised accesses, §III-A); a look that finds it clear steps it back
//!   (second chance) or leaves it for the list's shrink rule.
//! - **kpromoted** (§III-B): a thread per tier woken every `scan_interval_ms` (1 s).
//!   Each run looks at up to `nr_scan_pages` (1024) pages of each list, promote list
//!   first: referenced promote-list pages are promoted in the same run, idle ones
//!   return to the active list (spec A1 reading B). It never demotes (A5).
//! - **Demotion** (§III-C) only through watermark-driven reclaim ([`clock`]): kswapd,
//!   woken below the low watermark (an allocation's `LowWatermark` event, or a
//!   promotion into a tier short of room), reclaims to the high watermark — promote
//!   list first, then the active list while the inactive list is below
//!   1/√(10·GB) of it, then the unreferenced inactive tail, demoted one tier down.
//!   A promotion into a tier at its min watermark reclaims directly, so under
//!   pressure every promotion causes a demotion.
//!
//! There are no supervised (`read`/`write` syscall) accesses in the simulator — every
//! access is a load or store through a mapping — so `mark_page_accessed` is reached
//! only from a scan that found the accessed bit set (spec A11).
//!
//! Parameters, decisions and results: `docs/policies/multiclock.md`.

pub mod clock;
pub mod lists;

impl MultiClockConfig {
    /// Sampled simulation: kpromoted's scan budget (pages per run) scales. The scan
    /// interval and the lists' reference rules do not; kswapd's batch is a reclaim
    /// granularity bounded by the watermarks, which scale themselves.
    pub fn scale_space(&mut self, s: SpaceScale) {
        self.nr_scan_pages = s.count(self.nr_scan_pages);
    }
}

#[cfg(test)]
pub(crate) mod tests;

use crate::lru::KswapdConfig;
use clock::{ClockCore, CoreParams, Landing, KPROMOTED_TIMER};
use lists::{ClockList, LruType, ScanMode};
use serde::{Deserialize, Serialize};
use tierkit_core::*;

/// Spec A1: which promote-list pages a periodic run promotes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum PromoteReading {
    /// Reading B (default): the promote list is scanned first; pages referenced since
    /// they entered it stay (12) and are promoted (13), idle ones return to the
    /// active list (11). Five consecutive referenced looks from IU to promotion.
    Referenced,
    /// Reading A: the inactive and active lists are scanned, then *every* page on the
    /// promote list is promoted ("kpromoted uses (13) to promote all the pages found
    /// in this state"). Four looks.
    All,
}

/// Spec A3: what the `nr_scan_pages` budget of a kpromoted run applies to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum ScanBudget {
    /// Each list of each LRU type of the tier gets the whole budget (default).
    PerList,
    /// The budget is shared by all lists of the tier, in scan order.
    PerNode,
}

/// `multiclock` parameters. Defaults are the paper's (§V-C) and Linux 5.3's.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct MultiClockConfig {
    /// kpromoted wake-up interval, ms (§III-B, §V-C, §V-E: 1 s; the paper sweeps
    /// 100 ms–60 s). Range ≥ 1.
    pub scan_interval_ms: u64,
    /// Pages one kpromoted run looks at, per list unless `scan_budget = "per-node"`
    /// (§V-C "number of page scan", 1024; spec A3). Range ≥ 1.
    pub nr_scan_pages: u64,
    /// What `nr_scan_pages` applies to (spec A3): `per-list` (default) or `per-node`.
    pub scan_budget: ScanBudget,
    /// Which promote-list pages a run promotes (spec A1): `referenced` (reading B,
    /// default) or `all` (reading A).
    pub promote_reading: PromoteReading,
    /// Where promoted pages land in the faster tier (spec A6): `active-head`
    /// (default, state AU), `active-tail` or `inactive-head`.
    pub promoted_landing: Landing,
    /// kpromoted also runs on the top tier, ageing its lists without promoting
    /// (spec A7; default true, one thread per node as §IV says).
    pub scan_top_tier: bool,
    /// Periodic runs deactivate unreferenced active pages (spec A5; default false:
    /// the paper gives kpromoted no deactivation or demotion role, §V-E).
    pub periodic_deactivate: bool,
    /// Reclaim as stock Linux 5.3 instead of the paper's Fig. 4 (spec A10; default
    /// false): referenced active pages are deactivated too, and an inactive page with
    /// a young PTE is activated at once.
    pub stock_pfra_reclaim: bool,
    /// Pacing of the kswapd threads (not a kernel parameter; shared with
    /// `linux-tiering` and `tpp`).
    pub kswapd: KswapdConfig,
    /// Measure the re-access of promoted pages (§V-D, Fig. 9) by arming a hinting
    /// fault on each; an instrument, not part of MULTI-CLOCK (default false).
    pub measure_reaccess: bool,
}

impl Default for MultiClockConfig {
    fn default() -> Self {
        MultiClockConfig {
            scan_interval_ms: 1000,
            nr_scan_pages: 1024,
            scan_budget: ScanBudget::PerList,
            promote_reading: PromoteReading::Referenced,
            promoted_landing: Landing::ActiveHead,
            scan_top_tier: true,
            periodic_deactivate: false,
            stock_pfra_reclaim: false,
            kswapd: KswapdConfig::default(),
            measure_reaccess: false,
        }
    }
}

impl MultiClockConfig {
    /// Check ranges; the error names the field and its valid range.
    pub fn validate(&self) -> Result<(), ConfigError> {
        if self.scan_interval_ms == 0 {
            return Err("policy.scan_interval_ms must be at least 1 (ms)".into());
        }
        if self.nr_scan_pages == 0 {
            return Err("policy.nr_scan_pages must be at least 1 (pages)".into());
        }
        self.kswapd.validate().map_err(|e| e.prefixed("policy."))
    }

    fn core_params(&self) -> CoreParams {
        CoreParams {
            promote_list: true,
            periodic_deactivate: self.periodic_deactivate,
            stock_pfra_reclaim: self.stock_pfra_reclaim,
            promoted_landing: self.promoted_landing.place(),
            kswapd: self.kswapd.clone(),
            measure_reaccess: self.measure_reaccess,
        }
    }
}

/// Linux 5.3's zone watermarks for a tier of `capacity` pages on a machine of
/// `total` pages (`__setup_per_zone_wmarks`, spec §2.11).
///
/// `min_free_kbytes = int_sqrt(16 · lowmem KiB)` clamped to [128, 65536] KiB and
/// shared by size; the step is `max(min/4, capacity · 10/10000)`; `low = min + step`,
/// `high = min + 2 · step`. The simulator's machine uses the same formula with the
/// newer 256 MiB clamp, so the two agree on every machine below 256 GiB (tested);
/// MULTI-CLOCK reads the machine's.
pub fn linux53_watermarks(capacity: u64, total: u64) -> Watermarks {
    let total_kib = total * PAGE_SIZE / 1024;
    let min_free_kib = ((16.0 * total_kib as f64).sqrt() as u64).clamp(128, 65_536);
    let min_total_pages = min_free_kib as f64 * 1024.0 / PAGE_SIZE as f64;
    let min = (min_total_pages * capacity as f64 / total.max(1) as f64) as u64;
    let step = (min / 4).max(capacity * 10 / 10_000);
    Watermarks::pages(min, min + step, min + 2 * step)
}

/// The policy.
pub struct MultiClock {
    cfg: MultiClockConfig,
    core: ClockCore,
    nr_runs: u64,
    periodic_promoted: u64,
    max_promoted_per_run: u64,
}

impl MultiClock {
    /// A policy with the given parameters.
    pub fn new(cfg: MultiClockConfig) -> MultiClock {
        MultiClock {
            core: ClockCore::new(cfg.core_params(), 2),
            cfg,
            nr_runs: 0,
            periodic_promoted: 0,
            max_promoted_per_run: 0,
        }
    }

    /// The shared machinery (lists, counters), for tests and inspection.
    pub fn core(&self) -> &ClockCore {
        &self.core
    }

    /// kpromoted runs so far.
    pub fn nr_runs(&self) -> u64 {
        self.nr_runs
    }

    /// One wake-up of every tier's kpromoted (§III-B).
    fn kpromoted(&mut self, mech: &mut dyn Mechanisms) {
        self.core.meter.next_window();
        self.nr_runs += 1;
        let mut promoted = 0;
        for t in 0..mech.tiers().len() {
            let tier = TierId(t as u8);
            if self.core.has_higher(tier) || self.cfg.scan_top_tier {
                promoted += self.kpromoted_tier(tier, mech);
            }
        }
        self.periodic_promoted += promoted;
        self.max_promoted_per_run = self.max_promoted_per_run.max(promoted);
        let next = mech.now() + self.cfg.scan_interval_ms * NS_PER_MS;
        mech.schedule(next, KPROMOTED_TIMER, Runner::Kthread);
    }

    /// One run of `tier`'s kpromoted: scan the lists of each LRU type in the order
    /// the reading of A1 needs, promoting what it selects in the same run. Returns
    /// the units promoted.
    fn kpromoted_tier(&mut self, tier: TierId, mech: &mut dyn Mechanisms) -> u64 {
        let has_promote = self.core.promote_list(tier);
        let order: &[ClockList] = match self.cfg.promote_reading {
            // Reading B scans P first: pages entering P in this run were just looked
            // at and must not fall straight back through (11).
            PromoteReading::Referenced => {
                &[ClockList::Promote, ClockList::Active, ClockList::Inactive]
            }
            PromoteReading::All => &[ClockList::Inactive, ClockList::Active],
        };
        let mut left = self.cfg.nr_scan_pages;
        let (mut promote, mut demote) = (Vec::new(), Vec::new());
        let mut promoted = 0;
        for ty in LruType::ALL {
            for &list in order {
                if list == ClockList::Promote && !has_promote {
                    continue;
                }
                let budget = match self.cfg.scan_budget {
                    ScanBudget::PerList => self.cfg.nr_scan_pages,
                    ScanBudget::PerNode => left,
                };
                let looked = self.core.scan_list(
                    tier,
                    ty,
                    list,
                    budget,
                    ScanMode::Periodic,
                    mech,
                    &mut promote,
                    &mut demote,
                );
                left = left.saturating_sub(looked);
                promoted += self.core.promote(&mut promote, mech);
                debug_assert!(demote.is_empty(), "periodic runs never demote (A5)");
            }
            if self.cfg.promote_reading == PromoteReading::All && has_promote {
                while let Some(p) = self.core.lists.pop_tail(tier, ty, ClockList::Promote) {
                    promote.push(p);
                }
                mech.charge_cpu(promote.len() as u64 * clock::LIST_OP_NS);
                promoted += self.core.promote(&mut promote, mech);
            }
        }
        promoted
    }
}

impl Policy for MultiClock {
    fn name(&self) -> &'static str {
        "multiclock"
    }

    fn requirements(&self) -> Requirements {
        Requirements {
            page_alloc_events: true,
            accessed_bits: true,
            // The re-access meter (a measuring instrument, not part of the system)
            // arms hinting faults.
            hint_faults: self.cfg.measure_reaccess,
            ..Requirements::default()
        }
    }

    fn init(&mut self, mech: &mut dyn Mechanisms) {
        self.core = ClockCore::new(self.cfg.core_params(), mech.tiers().len());
        let first = mech.now() + self.cfg.scan_interval_ms * NS_PER_MS;
        mech.schedule(first, KPROMOTED_TIMER, Runner::Kthread);
    }

    fn on_event(&mut self, event: &Event, mech: &mut dyn Mechanisms) {
        match *event {
            Event::Timer { id } if id == KPROMOTED_TIMER => self.kpromoted(mech),
            _ => self.core.on_event(event, mech),
        }
    }

    /// Table I "Space Overhead: No": the promote list reuses `struct page`'s `lru`
    /// link and `PagePromote` a spare page-flag bit (§IV).
    fn metadata_bytes(&self) -> u64 {
        0
    }

    fn stats(&self) -> Vec<(&'static str, f64)> {
        let per_run = if self.nr_runs == 0 {
            0.0
        } else {
            self.periodic_promoted as f64 / self.nr_runs as f64
        };
        let mut v = vec![
            ("kpromoted_runs", self.nr_runs as f64),
            ("promoted_per_run", per_run),
            ("max_promoted_per_run", self.max_promoted_per_run as f64),
        ];
        v.extend(self.core.stats_rows());
        v
    }
}

/// The registry's view of [`MultiClockConfig`] (`PolicyConfig` in the crate root).
impl crate::RegisteredConfig for MultiClockConfig {
    fn check(&self) -> Result<(), ConfigError> {
        self.validate()
    }

    fn scale(&mut self, scale: tierkit_core::SpaceScale) {
        self.scale_space(scale)
    }

    fn build_policy(&self, _ctx: &tierkit_core::BuildContext) -> Box<dyn tierkit_core::Policy> {
        Box::new(MultiClock::new(self.clone()))
    }
}
