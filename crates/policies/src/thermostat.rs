//! `thermostat`: Thermostat (Agarwal & Wenisch, ASPLOS '17) as the PET paper
//! describes it (PET §2.3, §4.3, §5.1; spec §4.4): huge-page-granular proactive
//! demotion by sampling, with fake page faults on poisoned pages and a tolerable-
//! slowdown budget — the source of PET's R_promo equation.
//!
//! Each sampling period (`sampling_period_ms`):
//! 1. **Sample** `sample_fraction_pct` (5%) of the 2 MiB regions of the anonymous
//!    mappings at random; a region mapped by a huge page is split so its 4 KiB pages
//!    can be watched. Their accessed bits are cleared.
//! 2. After `young_scan_ms`, the accessed 4 KiB pages of each sampled region are
//!    found from their accessed bits, and up to `poisoned_pages_per_huge_page` (50)
//!    of them are **poisoned**: armed for a hinting fault and re-armed at every fault
//!    (BadgerTrap-style), so every access to them is counted.
//! 3. At the end of the period each sampled region's access rate is estimated as
//!    `faults × accessed pages / poisoned pages / poisoning time`. The allowed
//!    slow-memory access rate is `tolerable_slowdown_pct / slow_access_penalty_us`
//!    (3% / 1 µs = 30 000 accesses/s), of which the sample may use its share
//!    (`sample_fraction_pct`). Sampled regions already in the slow tier use it first;
//!    if they exceed it, the hottest are **promoted** until they fit (Thermostat's
//!    correction of mis-classifications); otherwise the coldest sampled fast regions
//!    are **demoted** while their summed rates fit in what is left. Split huge pages
//!    are collapsed again.
//!
//! The pure arithmetic is [`target_rate`], [`estimate_rate`] and [`classify`].
//! Parameters and decisions: `docs/policies/thermostat.md`.

use serde::{Deserialize, Serialize};
use tierkit_core::*;

/// Start of a sampling period (and end of the previous one).
const PERIOD_TIMER: TimerId = 1;
/// End of the accessed-bit phase: poison.
const POISON_TIMER: TimerId = 2;
/// The fault handler's lookup and counting, ns.
const FAULT_COUNT_NS: u64 = 100;

/// `thermostat` parameters.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct ThermostatConfig {
    /// Share of 2 MiB regions sampled per period, percent (PET §2.3: "samples 5% of
    /// 2MB huge pages"). Range (0, 100].
    pub sample_fraction_pct: f64,
    /// 4 KiB pages poisoned per sampled region (PET §2.3: "re-samples 4KB pages (50
    /// pages) within each"). Range 1–512.
    pub poisoned_pages_per_huge_page: u64,
    /// Tolerable slowdown, percent (PET §2.3, §4.3: 3). Range (0, 100].
    pub tolerable_slowdown_pct: f64,
    /// Cost of one slow-memory access in the budget, µs (PET §4.3: Thermostat uses
    /// the slow-memory latency, 1 µs). Range > 0.
    pub slow_access_penalty_us: f64,
    /// Sampling period, ms: one sample, classification and migration per period. Not
    /// given by the PET paper; tierkit uses PET's scan interval, 10 000, so both
    /// classify on the same cadence (see the docs). Range ≥ 2.
    pub sampling_period_ms: u64,
    /// Accessed-bit phase at the start of a period, ms, before the accessed pages are
    /// poisoned (tierkit decision: 10% of the period, 1000). Range [1,
    /// sampling_period_ms).
    pub young_scan_ms: u64,
}

impl Default for ThermostatConfig {
    fn default() -> Self {
        ThermostatConfig {
            sample_fraction_pct: 5.0,
            poisoned_pages_per_huge_page: 50,
            tolerable_slowdown_pct: 3.0,
            slow_access_penalty_us: 1.0,
            sampling_period_ms: 10_000,
            young_scan_ms: 1_000,
        }
    }
}

impl ThermostatConfig {
    /// Check ranges; the error names the field.
    pub fn validate(&self) -> Result<(), ConfigError> {
        for (field, v) in [
            ("sample_fraction_pct", self.sample_fraction_pct),
            ("tolerable_slowdown_pct", self.tolerable_slowdown_pct),
        ] {
            if !(v > 0.0 && v <= 100.0) {
                return Err(format!("policy.{field} must be in (0, 100], got {v}").into());
            }
        }
        if !(1..=SUBPAGES_PER_HUGE).contains(&self.poisoned_pages_per_huge_page) {
            return Err(format!(
                "policy.poisoned_pages_per_huge_page must be in [1, 512], got {}",
                self.poisoned_pages_per_huge_page
            )
            .into());
        }
        if !(self.slow_access_penalty_us.is_finite() && self.slow_access_penalty_us > 0.0) {
            return Err(format!(
                "policy.slow_access_penalty_us must be > 0, got {}",
                self.slow_access_penalty_us
            )
            .into());
        }
        if self.sampling_period_ms < 2 {
            return Err("policy.sampling_period_ms must be at least 2 (ms)".into());
        }
        if self.young_scan_ms == 0 || self.young_scan_ms >= self.sampling_period_ms {
            return Err(format!(
                "policy.young_scan_ms must be in [1, sampling_period_ms = {}), got {}",
                self.sampling_period_ms, self.young_scan_ms
            )
            .into());
        }
        Ok(())
    }
}

/// Allowed slow-memory accesses per second: slowdown / penalty (3% / 1 µs = 30 000).
pub fn target_rate(tolerable_slowdown_pct: f64, penalty_us: f64) -> f64 {
    (tolerable_slowdown_pct / 100.0) / (penalty_us * 1e-6)
}

/// Estimated accesses per second to a region: its poisoned pages' faults scaled up
/// to all its accessed pages, over the poisoning time.
pub fn estimate_rate(faults: u64, nr_accessed: u64, nr_poisoned: u64, seconds: f64) -> f64 {
    if nr_poisoned == 0 || seconds <= 0.0 {
        return 0.0;
    }
    faults as f64 * nr_accessed as f64 / nr_poisoned as f64 / seconds
}

/// What to do with a period's sampled regions.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Classification {
    /// Indices of fast regions to demote.
    pub demote: Vec<usize>,
    /// Indices of slow regions to promote.
    pub promote: Vec<usize>,
}

/// Classify sampled regions `(estimated rate, in slow tier)` against the sample's
/// slow-access budget (accesses per second): slow regions over budget are promoted
/// hottest first until the rest fits; otherwise fast regions are demoted coldest
/// first while the slow total stays within budget. Ties keep index order.
pub fn classify(regions: &[(f64, bool)], budget: f64) -> Classification {
    let mut slow: Vec<usize> = (0..regions.len()).filter(|&i| regions[i].1).collect();
    let mut fast: Vec<usize> = (0..regions.len()).filter(|&i| !regions[i].1).collect();
    let mut slow_rate: f64 = slow.iter().map(|&i| regions[i].0).sum();
    let mut out = Classification::default();
    if slow_rate > budget {
        slow.sort_by(|&a, &b| regions[b].0.total_cmp(&regions[a].0).then(a.cmp(&b)));
        for i in slow {
            if slow_rate <= budget {
                break;
            }
            slow_rate -= regions[i].0;
            out.promote.push(i);
        }
        return out;
    }
    fast.sort_by(|&a, &b| regions[a].0.total_cmp(&regions[b].0).then(a.cmp(&b)));
    for i in fast {
        if slow_rate + regions[i].0 > budget {
            break;
        }
        slow_rate += regions[i].0;
        out.demote.push(i);
    }
    out
}

/// One sampled region.
#[derive(Debug, Clone)]
struct Sampled {
    pid: Pid,
    /// First page (2 MiB aligned, or the mapping's start).
    start: Vpn,
    nr_pages: u64,
    /// It was a huge page, split for sampling.
    was_huge: bool,
    nr_accessed: u64,
    /// Poisoned pages, sorted.
    poisoned: Vec<Vpn>,
    faults: u64,
}

#[derive(Debug, Clone, Copy, Default)]
struct Stats {
    periods: u64,
    sampled_regions: u64,
    poisoned_pages: u64,
    poison_faults: u64,
    demoted_regions: u64,
    demoted_pages: u64,
    promoted_regions: u64,
    promoted_pages: u64,
    splits: u64,
    collapses: u64,
}

/// The policy.
pub struct Thermostat {
    cfg: ThermostatConfig,
    sample: Vec<Sampled>,
    poison_start: Nanos,
    stats: Stats,
}

impl Thermostat {
    /// A policy with the given parameters.
    pub fn new(cfg: ThermostatConfig) -> Thermostat {
        Thermostat {
            cfg,
            sample: Vec::new(),
            poison_start: 0,
            stats: Stats::default(),
        }
    }

    /// Every 2 MiB region of every anonymous mapping: (pid, start, pages).
    fn regions(mech: &dyn Mechanisms) -> Vec<(Pid, Vpn, u64)> {
        let mut out = Vec::new();
        for pid in mech.processes() {
            for vma in mech.vmas(pid) {
                if vma.kind != VmaKind::Anon {
                    continue;
                }
                let mut s = vma.start_vpn;
                while s < vma.end_vpn() {
                    let e = (huge_head(s) + SUBPAGES_PER_HUGE).min(vma.end_vpn());
                    out.push((pid, s, e - s));
                    s = e;
                }
            }
        }
        out
    }

    /// End the running period (classify, migrate), then sample the next one.
    fn period(&mut self, mech: &mut dyn Mechanisms) {
        if !self.sample.is_empty() {
            self.classify_and_migrate(mech);
        }
        self.stats.periods += 1;
        let regions = Self::regions(mech);
        let want = ((regions.len() as f64 * self.cfg.sample_fraction_pct / 100.0).ceil() as usize)
            .min(regions.len());
        // A random subset: the first `want` of a random permutation.
        let mut idx: Vec<usize> = (0..regions.len()).collect();
        for i in 0..want {
            let j = i + (mech.random() % (idx.len() - i) as u64) as usize;
            idx.swap(i, j);
        }
        let mut chosen: Vec<usize> = idx[..want].to_vec();
        chosen.sort_unstable();
        for i in chosen {
            let (pid, start, nr_pages) = regions[i];
            let was_huge = mech.page(pid, start).is_some_and(|p| p.huge);
            if was_huge && mech.split_huge(pid, start, false).is_some() {
                self.stats.splits += 1;
            }
            for vpn in resident(mech, pid, start, nr_pages) {
                mech.test_and_clear_young(pid, vpn);
            }
            self.sample.push(Sampled {
                pid,
                start,
                nr_pages,
                was_huge,
                nr_accessed: 0,
                poisoned: Vec::new(),
                faults: 0,
            });
        }
        self.stats.sampled_regions += self.sample.len() as u64;
        let now = mech.now();
        mech.schedule(
            now + self.cfg.young_scan_ms * NS_PER_MS,
            POISON_TIMER,
            Runner::Kthread,
        );
        mech.schedule(
            now + self.cfg.sampling_period_ms * NS_PER_MS,
            PERIOD_TIMER,
            Runner::Kthread,
        );
    }

    /// The accessed-bit phase is over: poison up to N accessed pages per region.
    fn poison(&mut self, mech: &mut dyn Mechanisms) {
        self.poison_start = mech.now();
        let n = self.cfg.poisoned_pages_per_huge_page as usize;
        for s in &mut self.sample {
            let mut accessed: Vec<Vpn> = resident(mech, s.pid, s.start, s.nr_pages)
                .into_iter()
                .filter(|&v| mech.test_and_clear_young(s.pid, v) == Some(true))
                .collect();
            s.nr_accessed = accessed.len() as u64;
            let k = n.min(accessed.len());
            for i in 0..k {
                let j = i + (mech.random() % (accessed.len() - i) as u64) as usize;
                accessed.swap(i, j);
            }
            s.poisoned = accessed[..k].to_vec();
            s.poisoned.sort_unstable();
            for &v in &s.poisoned {
                mech.arm_hint_fault(s.pid, v);
            }
            self.stats.poisoned_pages += k as u64;
        }
    }

    fn on_hint_fault(&mut self, f: &HintFault, mech: &mut dyn Mechanisms) {
        mech.charge_cpu(FAULT_COUNT_NS);
        let i = self
            .sample
            .partition_point(|s| (s.pid, s.start) <= (f.pid, f.vpn));
        let Some(s) = i.checked_sub(1).map(|i| &mut self.sample[i]) else {
            return;
        };
        if s.pid != f.pid || s.poisoned.binary_search(&f.vpn).is_err() {
            return; // a page poisoned in an earlier period: no longer counted
        }
        s.faults += 1;
        self.stats.poison_faults += 1;
        // BadgerTrap keeps the page poisoned: every access is counted.
        mech.arm_hint_fault(f.pid, f.vpn);
    }

    fn classify_and_migrate(&mut self, mech: &mut dyn Mechanisms) {
        let seconds = mech.now().saturating_sub(self.poison_start) as f64 / 1e9;
        let sample = std::mem::take(&mut self.sample);
        let mut rates = Vec::with_capacity(sample.len());
        let mut tiers = Vec::with_capacity(sample.len());
        for s in &sample {
            let (fast, slow) = tier_counts(mech, s.pid, s.start, s.nr_pages);
            let rate = estimate_rate(s.faults, s.nr_accessed, s.poisoned.len() as u64, seconds);
            rates.push((rate, slow > fast));
            tiers.push(if slow > fast { TierId(1) } else { TierId::FAST });
        }
        let budget = target_rate(
            self.cfg.tolerable_slowdown_pct,
            self.cfg.slow_access_penalty_us,
        ) * self.cfg.sample_fraction_pct
            / 100.0;
        let c = classify(&rates, budget);
        for &i in &c.demote {
            let s = &sample[i];
            self.stats.demoted_regions += 1;
            self.stats.demoted_pages += move_region(mech, s.pid, s.start, s.nr_pages, TierId(1));
            tiers[i] = TierId(1);
        }
        for &i in &c.promote {
            let s = &sample[i];
            self.stats.promoted_regions += 1;
            self.stats.promoted_pages +=
                move_region(mech, s.pid, s.start, s.nr_pages, TierId::FAST);
            tiers[i] = TierId::FAST;
        }
        for (s, tier) in sample.iter().zip(tiers) {
            if s.was_huge && mech.collapse_huge(s.pid, s.start, tier).is_ok() {
                self.stats.collapses += 1;
            }
        }
    }
}

/// Resident page units of a region.
fn resident(mech: &mut dyn Mechanisms, pid: Pid, start: Vpn, nr_pages: u64) -> Vec<Vpn> {
    let mut out = Vec::new();
    mech.walk_pages(pid, start, nr_pages, &mut |vpn, _| out.push(vpn));
    out
}

/// (fast, slow) base pages of a region.
fn tier_counts(mech: &mut dyn Mechanisms, pid: Pid, start: Vpn, nr_pages: u64) -> (u64, u64) {
    let (mut fast, mut slow) = (0, 0);
    mech.walk_pages(pid, start, nr_pages, &mut |_, info| {
        let n = if info.huge { SUBPAGES_PER_HUGE } else { 1 };
        if info.tier.is_fast() {
            fast += n;
        } else {
            slow += n;
        }
    });
    (fast, slow)
}

/// Migrate a region's resident pages to `to` (async; a promotion stops at the fast
/// tier's high watermark): base pages moved.
fn move_region(mech: &mut dyn Mechanisms, pid: Pid, start: Vpn, nr_pages: u64, to: TierId) -> u64 {
    let mut units = Vec::new();
    mech.walk_pages(pid, start, nr_pages, &mut |vpn, info| {
        if info.tier != to {
            units.push((vpn, if info.huge { SUBPAGES_PER_HUGE } else { 1 }));
        }
    });
    let mut moved = 0;
    for (vpn, n) in units {
        if to.is_fast()
            && mech.free_pages(TierId::FAST) as f64 <= mech.watermarks(TierId::FAST).high + n as f64
        {
            break;
        }
        if mech.migrate(pid, vpn, to, MigrateMode::Async).is_ok() {
            moved += n;
        }
    }
    moved
}

impl Policy for Thermostat {
    fn requirements(&self) -> Requirements {
        Requirements {
            hint_faults: true,
            accessed_bits: true,
            ..Requirements::default()
        }
    }

    fn name(&self) -> &'static str {
        "thermostat"
    }

    fn init(&mut self, mech: &mut dyn Mechanisms) {
        // The first sample is drawn one period in, once the workload has memory.
        mech.schedule(
            mech.now() + self.cfg.sampling_period_ms * NS_PER_MS,
            PERIOD_TIMER,
            Runner::Kthread,
        );
    }

    fn on_event(&mut self, event: &Event, mech: &mut dyn Mechanisms) {
        match *event {
            Event::HintFault(ref f) => self.on_hint_fault(f, mech),
            Event::Timer { id: PERIOD_TIMER } => self.period(mech),
            Event::Timer { id: POISON_TIMER } => self.poison(mech),
            Event::Munmap {
                pid,
                start_vpn,
                nr_pages,
                ..
            } => {
                let end = start_vpn + nr_pages;
                self.sample.retain(|s| {
                    s.pid != pid || s.start + s.nr_pages <= start_vpn || s.start >= end
                });
            }
            _ => {}
        }
    }

    /// Per sampled region: its address, counts and up to 50 poisoned page numbers.
    fn metadata_bytes(&self) -> u64 {
        self.sample
            .iter()
            .map(|s| 32 + 8 * s.poisoned.len() as u64)
            .sum()
    }

    fn stats(&self) -> Vec<(&'static str, f64)> {
        let s = &self.stats;
        vec![
            (
                "target_slow_accesses_per_s",
                target_rate(
                    self.cfg.tolerable_slowdown_pct,
                    self.cfg.slow_access_penalty_us,
                ),
            ),
            ("periods", s.periods as f64),
            ("sampled_regions", s.sampled_regions as f64),
            ("poisoned_pages", s.poisoned_pages as f64),
            ("poison_faults", s.poison_faults as f64),
            ("demoted_regions", s.demoted_regions as f64),
            ("demoted_pages", s.demoted_pages as f64),
            ("promoted_regions", s.promoted_regions as f64),
            ("promoted_pages", s.promoted_pages as f64),
            ("huge_splits", s.splits as f64),
            ("huge_collapses", s.collapses as f64),
        ]
    }
}

impl ThermostatConfig {
    /// Sampled simulation: the slow-access budget is accesses per second of the whole
    /// machine; each sampled fault stands for 1/rate accesses, so each costs the budget
    /// 1/rate times the penalty. The sampled share of regions, the poisoned pages per
    /// 2 MiB region (a region keeps its shape) and the periods do not scale.
    pub fn scale_space(&mut self, s: SpaceScale) {
        self.slow_access_penalty_us /= s.rate();
    }
}

/// The registry's view of [`ThermostatConfig`] (`PolicyConfig` in the crate root).
impl crate::RegisteredConfig for ThermostatConfig {
    fn check(&self) -> Result<(), ConfigError> {
        self.validate()
    }

    fn scale(&mut self, scale: tierkit_core::SpaceScale) {
        self.scale_space(scale)
    }

    fn build_policy(&self, _ctx: &tierkit_core::BuildContext) -> Box<dyn tierkit_core::Policy> {
        Box::new(Thermostat::new(self.clone()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn budget_is_slowdown_over_penalty_and_rates_scale_to_accessed_pages() {
        assert!((target_rate(3.0, 1.0) - 30_000.0).abs() < 1e-6);
        // PET's penalty: 3% / 8.3 µs.
        assert!((target_rate(3.0, 8.3) - 3614.46).abs() < 0.01);
        // 100 faults on 50 poisoned of 200 accessed pages over 2 s: 200/s.
        assert_eq!(estimate_rate(100, 200, 50, 2.0), 200.0);
        assert_eq!(estimate_rate(100, 200, 0, 2.0), 0.0);
    }

    #[test]
    fn coldest_fast_regions_are_demoted_while_the_budget_lasts() {
        // Budget 100/s; slow regions already use 30.
        let r = [
            (50.0, false),
            (0.0, false),
            (30.0, true),
            (40.0, false),
            (1e6, false),
        ];
        let c = classify(&r, 100.0);
        assert_eq!(
            c.demote,
            vec![1, 3],
            "0 + 40 fit in the 70 left, 50 more does not"
        );
        assert!(c.promote.is_empty());
    }

    #[test]
    fn slow_regions_over_budget_are_promoted_hottest_first() {
        let r = [(80.0, true), (10.0, true), (50.0, true), (0.0, false)];
        let c = classify(&r, 70.0);
        assert_eq!(c.promote, vec![0], "140 − 80 = 60 ≤ 70");
        assert!(c.demote.is_empty(), "no demotion in a period that promotes");
    }
}

#[cfg(test)]
mod sim_tests {
    use crate::lru::test_scripts::stat;
    use crate::pet::tests::{optane_machine, sim, step, Phases};
    use tierkit_core::*;
    use tierkit_sim::testing::run;

    #[test]
    fn sampled_cold_regions_are_demoted_and_hot_ones_stay_within_the_budget() {
        // Eight 8 MiB objects (32 regions of 2 MiB) written at start; two stay hot.
        // Ten periods sample 2 regions each (⌈5% × 32⌉).
        let w = Phases::new(
            8,
            8,
            2_000,
            vec![vec![step(&[0, 1, 2, 3, 4, 5, 6, 7], &[0, 1], 105.0)]],
        );
        let hot = [w.block_vpn(0), w.block_vpn(1)];
        let (out, m) = run(
            &optane_machine(128, 128),
            &sim(),
            Box::new(super::Thermostat::new(super::ThermostatConfig::default())),
            Box::new(w),
        );
        let periods = stat(&out, "periods");
        assert!(periods >= 9.0, "{periods} periods");
        assert_eq!(stat(&out, "sampled_regions"), 2.0 * periods);
        assert!(stat(&out, "poison_faults") > 0.0, "hot samples are counted");
        let demoted = stat(&out, "demoted_regions");
        eprintln!(
            "thermostat: {demoted} regions demoted, {} poison faults, {} promoted",
            stat(&out, "poison_faults"),
            stat(&out, "promoted_regions")
        );
        assert!(demoted >= 4.0, "{demoted} cold regions demoted");
        let region = SUBPAGES_PER_HUGE;
        assert_eq!(out.summary.demoted_pages, demoted as u64 * region);
        // The hot objects never left the fast tier.
        let block = 8 * MIB / PAGE_SIZE;
        for v in hot {
            let fast = (0..block)
                .filter(|i| m.page(Pid(0), v + i).is_some_and(|p| p.tier.is_fast()))
                .count() as u64;
            assert_eq!(fast, block);
        }
    }
}
