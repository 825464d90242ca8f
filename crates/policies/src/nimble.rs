//! `nimble`: Nimble's page selection (Yan et al., ASPLOS'19) as MULTI-CLOCK's
//! authors re-implemented it to compare against (MULTI-CLOCK §II-D, §III-A, §V-C,
//! §V-D; spec `specs/multiclock.md` §2.13).
//!
//! - **Lists**: Linux's CLOCK lists, inactive and active per tier and LRU type, and no
//!   promote list. They are the same lists and the same hand as `multiclock`
//!   ([`crate::multiclock::clock`]): a young page steps IU → IR → AU → AR and stays
//!   AR; a look at a clear accessed bit gives the second chance.
//! - **Promotion**: every `scan_interval_ms` (1 s) a single thread ages each tier's
//!   lists (`nr_scan_pages` per list) and then takes a *fixed* `nr_promote_pages`
//!   (1024) from the top (head: most recently activated) of the slow tier's active
//!   list — fewer only if the list is shorter — and moves them to the bottom (tail)
//!   of the fast tier's active list (Fig. 3 (11)). When the fast tier has no room
//!   (a migration would take it below its low watermark) the page is exchanged with
//!   the least recently used fast page, the tail of the fast inactive list (active
//!   list if that is empty): Nimble's "exchange the most recently accessed lower-tier
//!   pages with the least recently accessed upper-tier pages" (§II-D) with its
//!   two-sided page exchange ([`Mechanisms::exchange`]).
//! - **Demotion**: the kernel's reclaim, as in `multiclock` (Fig. 3 solid arrows):
//!   kswapd below the low watermark demotes the unreferenced inactive tail.
//!
//! Nimble's THP and multi-threaded migration are not part of the comparison (§II-D:
//! "we separated its hot/cold page identification technique and implemented a single
//! threaded Nimble page selection mechanism").
//!
//! Parameters, decisions and results: `docs/policies/nimble.md`.

use crate::lru::KswapdConfig;
use crate::multiclock::clock::{ClockCore, CoreParams, Landing, KPROMOTED_TIMER, LIST_OP_NS};
use crate::multiclock::lists::{ClockList, ClockPage, Edge, End, LruType, PageFlags, ScanMode};
use serde::{Deserialize, Serialize};
use tierkit_core::*;

/// How far from a list's tail an exchange partner of the right size is looked for.
const EXCHANGE_LOOK: usize = 64;

/// `nimble` parameters. Defaults are MULTI-CLOCK's evaluation settings (§V-C).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct NimbleConfig {
    /// Interval of the promotion thread, ms (§V-C, §V-E: 1 s). Range ≥ 1.
    pub scan_interval_ms: u64,
    /// Pages each run ages per list (§V-C "number of page scan", 1024). Range ≥ 1.
    pub nr_scan_pages: u64,
    /// Pages promoted per run, fixed (§V-D: "always 1024"). Range ≥ 1.
    pub nr_promote_pages: u64,
    /// Exchange with the coldest fast page when the fast tier has no room (Nimble's
    /// two-sided exchange; default true). False: promote through reclaim as
    /// `multiclock` does (direct reclaim at the min watermark).
    pub exchange_when_full: bool,
    /// Where promoted pages land (default `active-tail`: Fig. 3 (11) "bottom of the
    /// higher tier's active list").
    pub promoted_landing: Landing,
    /// The thread also ages the fast tier's lists (default true; the exchange
    /// partners are the fast tier's least recently used pages).
    pub scan_top_tier: bool,
    /// Ageing moves active pages found unreferenced to the inactive list (default
    /// true: the scan rule of §III-A, Fig. 3 (4)/(7), which the paper draws for both
    /// systems). Without it they rotate to the head of the active list, and the "top"
    /// Nimble promotes from is just the pages the hand looked at last.
    pub periodic_deactivate: bool,
    /// Reclaim as stock Linux 5.3 (see `multiclock`; default false, the paper's model).
    pub stock_pfra_reclaim: bool,
    /// Pacing of the kswapd threads (not a kernel parameter).
    pub kswapd: KswapdConfig,
    /// Measure the re-access of promoted pages (instrument; see `multiclock`).
    pub measure_reaccess: bool,
}

impl Default for NimbleConfig {
    fn default() -> Self {
        NimbleConfig {
            scan_interval_ms: 1000,
            nr_scan_pages: 1024,
            nr_promote_pages: 1024,
            exchange_when_full: true,
            promoted_landing: Landing::ActiveTail,
            scan_top_tier: true,
            periodic_deactivate: true,
            stock_pfra_reclaim: false,
            kswapd: KswapdConfig::default(),
            measure_reaccess: false,
        }
    }
}

impl NimbleConfig {
    /// Check ranges; the error names the field and its valid range.
    pub fn validate(&self) -> Result<(), ConfigError> {
        for (name, v) in [
            ("scan_interval_ms", self.scan_interval_ms),
            ("nr_scan_pages", self.nr_scan_pages),
            ("nr_promote_pages", self.nr_promote_pages),
        ] {
            if v == 0 {
                return Err(format!("policy.{name} must be at least 1, got 0").into());
            }
        }
        self.kswapd.validate().map_err(|e| e.prefixed("policy."))
    }

    fn core_params(&self) -> CoreParams {
        CoreParams {
            promote_list: false,
            periodic_deactivate: self.periodic_deactivate,
            stock_pfra_reclaim: self.stock_pfra_reclaim,
            promoted_landing: self.promoted_landing.place(),
            kswapd: self.kswapd.clone(),
            measure_reaccess: self.measure_reaccess,
        }
    }
}

/// The policy.
pub struct Nimble {
    cfg: NimbleConfig,
    core: ClockCore,
    nr_runs: u64,
    periodic_promoted: u64,
}

impl Nimble {
    /// A policy with the given parameters.
    pub fn new(cfg: NimbleConfig) -> Nimble {
        Nimble {
            core: ClockCore::new(cfg.core_params(), 2),
            cfg,
            nr_runs: 0,
            periodic_promoted: 0,
        }
    }

    /// The shared machinery (lists, counters), for tests and inspection.
    pub fn core(&self) -> &ClockCore {
        &self.core
    }

    /// One run: age every tier's lists, then promote the top of each slow tier's
    /// active list.
    fn run(&mut self, mech: &mut dyn Mechanisms) {
        self.core.meter.next_window();
        self.nr_runs += 1;
        let nr_tiers = mech.tiers().len();
        let (mut promote, mut demote) = (Vec::new(), Vec::new());
        for t in 0..nr_tiers {
            let tier = TierId(t as u8);
            if !self.core.has_higher(tier) && !self.cfg.scan_top_tier {
                continue;
            }
            for ty in LruType::ALL {
                for list in [ClockList::Active, ClockList::Inactive] {
                    self.core.scan_list(
                        tier,
                        ty,
                        list,
                        self.cfg.nr_scan_pages,
                        ScanMode::Periodic,
                        mech,
                        &mut promote,
                        &mut demote,
                    );
                }
            }
            debug_assert!(promote.is_empty() && demote.is_empty());
        }
        for t in 1..nr_tiers {
            let selected = self.select_top(TierId(t as u8), mech);
            for p in selected {
                self.periodic_promoted += self.promote_one(p, mech) as u64;
            }
        }
        let next = mech.now() + self.cfg.scan_interval_ms * NS_PER_MS;
        mech.schedule(next, KPROMOTED_TIMER, Runner::Kthread);
    }

    /// Isolate the fixed number of pages from the head of `tier`'s active lists
    /// (anonymous first).
    fn select_top(&mut self, tier: TierId, mech: &mut dyn Mechanisms) -> Vec<ClockPage> {
        let mut out = Vec::new();
        for ty in LruType::ALL {
            while (out.len() as u64) < self.cfg.nr_promote_pages {
                match self.core.lists.pop_head(tier, ty, ClockList::Active) {
                    Some(p) => out.push(p),
                    None => break,
                }
            }
        }
        mech.charge_cpu(out.len() as u64 * LIST_OP_NS);
        out
    }

    /// Promote one selected page: migrate if the faster tier has room above its low
    /// watermark, else exchange it with that tier's least recently used page (with
    /// `exchange_when_full` off: make room through reclaim as `multiclock` does).
    /// Returns success.
    fn promote_one(&mut self, p: ClockPage, mech: &mut dyn Mechanisms) -> bool {
        if !self.cfg.exchange_when_full {
            return self.core.promote(&mut vec![p], mech) == 1;
        }
        let to = TierId(p.tier.0 - 1);
        if mech.free_pages(to) as f64 >= mech.watermarks(to).low + p.nr_pages as f64 {
            match mech.migrate(p.pid, p.vpn, to, MigrateMode::Async) {
                Ok(()) => {
                    self.core.land_promoted(p, to, mech);
                    return true;
                }
                Err(MigrateError::NotPresent) => return false,
                Err(_) => {} // no room after all: exchange
            }
        }
        let Some(victim) = self.exchange_partner(to, p.nr_pages) else {
            self.core.promote_failed(p, mech);
            return false;
        };
        match mech.exchange((p.pid, p.vpn), (victim.pid, victim.vpn), MigrateMode::Async) {
            Ok(()) => {
                self.core.lists.remove(victim.pid, victim.vpn);
                // The cold fast page arrives in the slow tier as a demoted page (IU).
                self.core.lists.insert(
                    ClockPage {
                        tier: p.tier,
                        flags: PageFlags::IU,
                        ..victim
                    },
                    End::Head,
                );
                self.core.edges[Edge::Demoted as usize] += 1;
                self.core.stats.demoted_pages += victim.nr_pages;
                self.core.stats.exchanges += 1;
                self.core.land_promoted(p, to, mech);
                true
            }
            Err(MigrateError::NotPresent) => false,
            Err(_) => {
                self.core.promote_failed(p, mech);
                false
            }
        }
    }

    /// The least recently used page of `tier` of the given size: the tail of its
    /// inactive lists, else of its active lists.
    fn exchange_partner(&self, tier: TierId, nr_pages: u64) -> Option<ClockPage> {
        [ClockList::Inactive, ClockList::Active]
            .into_iter()
            .flat_map(|l| LruType::ALL.map(|ty| (l, ty)))
            .find_map(|(l, ty)| {
                self.core
                    .lists
                    .tail_matching(tier, ty, l, nr_pages, EXCHANGE_LOOK)
            })
    }
}

impl Policy for Nimble {
    fn name(&self) -> &'static str {
        "nimble"
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
            Event::Timer { id } if id == KPROMOTED_TIMER => self.run(mech),
            _ => self.core.on_event(event, mech),
        }
    }

    /// The lists are `struct page`'s `lru` links: no added metadata.
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
        ];
        v.extend(self.core.stats_rows());
        v
    }
}

impl NimbleConfig {
    /// Sampled simulation: the pages scanned and promoted per run scale; the interval
    /// does not.
    pub fn scale_space(&mut self, s: SpaceScale) {
        self.nr_scan_pages = s.count(self.nr_scan_pages);
        self.nr_promote_pages = s.count(self.nr_promote_pages);
    }
}

/// The registry's view of [`NimbleConfig`] (`PolicyConfig` in the crate root).
impl crate::RegisteredConfig for NimbleConfig {
    fn check(&self) -> Result<(), ConfigError> {
        self.validate()
    }

    fn scale(&mut self, scale: tierkit_core::SpaceScale) {
        self.scale_space(scale)
    }

    fn build_policy(&self, _ctx: &tierkit_core::BuildContext) -> Box<dyn tierkit_core::Policy> {
        Box::new(Nimble::new(self.clone()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::multiclock::tests::FakeMech;

    const P0: Pid = Pid(0);
    const FAST: TierId = TierId(0);
    const SLOW: TierId = TierId(1);
    const SLOW_BASE: Vpn = 1 << 16;

    fn nimble(cfg: NimbleConfig, m: &mut FakeMech) -> Nimble {
        let mut p = Nimble::new(cfg);
        p.init(m);
        p
    }

    /// Spec §2.13 and oracle 13: each run promotes exactly min(N, |slow active|)
    /// pages from the head of the slow active list — referenced or not — to the
    /// bottom of the fast active list. A page referenced once never becomes active
    /// and is not promoted.
    #[test]
    fn oracle_13_nimble_promotes_a_fixed_number_from_the_top_of_the_slow_active_list() {
        let mut m = FakeMech::with_fast(4096, (16, 20, 24));
        let cfg = NimbleConfig {
            nr_promote_pages: 100,
            ..NimbleConfig::default()
        };
        let mut p = nimble(cfg, &mut m);
        for v in SLOW_BASE..SLOW_BASE + 250 {
            m.alloc(&mut p, v, SLOW);
        }
        let once = SLOW_BASE + 1000;
        m.alloc(&mut p, once, SLOW);
        m.touch(once);
        // Two referenced looks activate all 250 (IU→IR→AU) in run 2, which promotes
        // the 100 at the top; while they stay referenced, runs 3 and 4 promote the
        // rest.
        let mut per_run = Vec::new();
        for run in 1..=5 {
            for v in SLOW_BASE..SLOW_BASE + 250 {
                m.touch(v);
            }
            let before = p.core().stats.promoted_units;
            m.kpromoted(&mut p);
            per_run.push(p.core().stats.promoted_units - before);
            if run == 2 {
                // The top of the slow active list is its most recent end: the last
                // page activated (SLOW_BASE + 249) went first, and each promoted page
                // was put at the bottom (tail) of the fast active list.
                let fast = p.core().lists.pages(FAST, LruType::Anon, ClockList::Active);
                assert_eq!(fast.len(), 100);
                assert_eq!(fast.first(), Some(&(P0, SLOW_BASE + 249)));
                assert_eq!(fast.last(), Some(&(P0, SLOW_BASE + 150)));
            }
        }
        assert_eq!(per_run, vec![0, 100, 100, 50, 0]);
        assert_eq!(m.tier_of(once), SLOW);
        // Without deactivation by the ageing scan, the active list keeps pages that
        // are no longer referenced, and Nimble promotes them all the same.
        let mut m = FakeMech::with_fast(4096, (16, 20, 24));
        let cfg = NimbleConfig {
            nr_promote_pages: 100,
            periodic_deactivate: false,
            ..NimbleConfig::default()
        };
        let mut p = nimble(cfg, &mut m);
        for v in SLOW_BASE..SLOW_BASE + 250 {
            m.alloc(&mut p, v, SLOW);
        }
        let mut per_run = Vec::new();
        for run in 1..=5 {
            if run <= 2 {
                for v in SLOW_BASE..SLOW_BASE + 250 {
                    m.touch(v);
                }
            }
            let before = p.core().stats.promoted_units;
            m.kpromoted(&mut p);
            per_run.push(p.core().stats.promoted_units - before);
        }
        assert_eq!(per_run, vec![0, 100, 100, 50, 0]);
    }

    /// With the fast tier at its min watermark, each promotion is a two-sided
    /// exchange with the fast tier's least recently used page: free pages do not
    /// change and every promoted page has a demoted partner.
    #[test]
    fn exchanges_with_the_coldest_fast_page_when_full() {
        let (min, low, high) = (100, 125, 150);
        let mut m = FakeMech::with_fast(4096, (min, low, high));
        let mut p = nimble(NimbleConfig::default(), &mut m);
        for v in 0..4096 - min {
            m.alloc(&mut p, v, FAST);
        }
        for v in SLOW_BASE..SLOW_BASE + 300 {
            m.alloc(&mut p, v, SLOW);
        }
        for _ in 0..2 {
            for v in SLOW_BASE..SLOW_BASE + 300 {
                m.touch(v);
            }
            m.kpromoted(&mut p);
        }
        let c = p.core();
        assert_eq!(c.stats.promoted_units, 300);
        assert_eq!(c.stats.exchanges, 300);
        assert_eq!(c.stats.demoted_pages, 300);
        assert_eq!(m.free(FAST), min);
        assert_eq!(c.lists.tier_pages(SLOW, ClockList::Inactive), 300);
        for v in SLOW_BASE..SLOW_BASE + 300 {
            assert_eq!(m.tier_of(v), FAST);
        }
        // Without exchange, promotion goes through reclaim like MULTI-CLOCK's.
        let mut m = FakeMech::with_fast(4096, (min, low, high));
        let cfg = NimbleConfig {
            exchange_when_full: false,
            ..NimbleConfig::default()
        };
        let mut p = nimble(cfg, &mut m);
        for v in 0..4096 - min {
            m.alloc(&mut p, v, FAST);
        }
        for v in SLOW_BASE..SLOW_BASE + 300 {
            m.alloc(&mut p, v, SLOW);
        }
        for _ in 0..2 {
            for v in SLOW_BASE..SLOW_BASE + 300 {
                m.touch(v);
            }
            m.kpromoted(&mut p);
        }
        let c = p.core();
        assert_eq!((c.stats.promoted_units, c.stats.exchanges), (300, 0));
        assert!(c.stats.direct_reclaims > 0 && c.stats.demoted_pages >= 300);
    }

    #[test]
    fn config_defaults_are_the_papers_and_validate() {
        let c = NimbleConfig::default();
        assert_eq!(
            (c.scan_interval_ms, c.nr_scan_pages, c.nr_promote_pages),
            (1000, 1024, 1024)
        );
        c.validate().unwrap();
        let bad = NimbleConfig {
            nr_promote_pages: 0,
            ..c
        };
        assert!(bad
            .validate()
            .unwrap_err()
            .to_string()
            .contains("nr_promote_pages"));
    }
}
