//! `memtis`: MEMTIS (Lee et al., SOSP '23) — PEBS-sampled page hotness in an
//! exponential histogram whose hot set is sized to the fast tier, a warm band that is
//! never migrated, cooling by halving, background migration, and a skew-aware
//! huge-page split.
//!
//! How it runs here (paper sections in brackets; spec: `specs/memtis.md`):
//! - **ksampled** ([`Event::Sample`], §4.1): LLC load misses and stores are sampled
//!   (initial periods 200 and 100 000). Each sample raises the page's hotness `H`
//!   (Eq. 1: +1 for a huge page, +512 for a base page or subpage), moves it between
//!   bins of the page access histogram and of the emulated base-page histogram, counts
//!   rHR/eHR hits, and puts a hot page of the capacity tier on the promotion list.
//!   Every 100 000 samples it re-runs Algorithm 1 (thresholds), every 2 000 000 it
//!   cools (halves every `H`), and when a quarter of the allocated pages' worth of
//!   samples has passed it estimates the benefit of splitting (eHR − rHR).
//!   A timer checks its CPU share (samples × per-sample cost over the window) and
//!   moves the periods along a ladder to stay within 3% ± 0.5% of a core.
//! - **kmigrated** (two [`Runner::Kthread`] timers every 500 ms, §4.2.3, §4.3.3):
//!   the fast-tier instance splits queued huge pages (freeing never-written subpages
//!   and placing the rest by their own hotness), coalesces all-hot regions, and
//!   demotes cold pages, then warm ones, when free memory is short; the capacity-tier
//!   instance promotes the listed hot pages while the fast tier has room.
//!
//! Pure logic lives in [`histogram`] (bins, Algorithm 1), [`sampler`] (the period
//! controller), [`split`] (Eq. 2, Eq. 3, the hit-ratio window) and [`pages`]
//! (per-page metadata, cooling). Parameters and decisions: `docs/policies/memtis.md`.

pub mod histogram;
pub mod pages;
pub mod sampler;
pub mod split;

impl MemtisConfig {
    /// Sampled simulation: the adaptation and cooling intervals are counted in samples
    /// of the whole machine and the split batch in huge pages, so they scale. The PEBS
    /// period ladders (each sampled page sees all its own events), the CPU budget (a
    /// share of one CPU, kept because each sample is charged 1/rate times its cost),
    /// the histogram, alpha/beta and the watermark percentages do not.
    pub fn scale_space(&mut self, s: SpaceScale) {
        self.adapt_interval_samples = s.count(self.adapt_interval_samples);
        self.cooling_interval_samples = s.count(self.cooling_interval_samples);
        self.split_batch_huge_pages = s.count(self.split_batch_huge_pages);
    }
}

/// The registry's view of [`MemtisConfig`] (`PolicyConfig` in the crate root).
impl crate::RegisteredConfig for MemtisConfig {
    fn check(&self) -> Result<(), ConfigError> {
        self.validate()
    }

    fn scale(&mut self, scale: tierkit_core::SpaceScale) {
        self.scale_space(scale)
    }

    fn build_policy(&self, _ctx: &tierkit_core::BuildContext) -> Box<dyn tierkit_core::Policy> {
        Box::new(Memtis::new(self.clone()))
    }
}

#[cfg(test)]
mod tests;

use histogram::{Class, DEFAULT_NR_BINS};
use pages::{Key, Pages, Unit};
use sampler::{PeriodChange, PeriodController};
use serde::{Deserialize, Serialize};
use std::collections::VecDeque;
use std::ops::Bound;
use tierkit_core::*;

/// ksampled's CPU check.
const KSAMPLED_TIMER: TimerId = 1;
/// The fast-tier kmigrated (split, coalesce, demote).
const KMIGRATED_FAST_TIMER: TimerId = 2;
/// The capacity-tier kmigrated (promote).
const KMIGRATED_CAPACITY_TIMER: TimerId = 3;

/// `memtis` parameters: the paper's defaults in its units (sources per field; the
/// artifact `cosmoss-jigu/memtis` where the paper is silent).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct MemtisConfig {
    /// Bins of both histograms; bin n holds hotness [2^n, 2^(n+1)), the last is
    /// unbounded, bins (§4.1.3: 16). Range 2–32.
    pub nr_bins: u32,
    /// LLC-load-miss sampling periods the CPU controller steps through, events per
    /// sample; the first is the initial period (§4.1.1: 200; ladder from the
    /// artifact's `htmm.h`, rounded: 200 … 20 000). Non-empty, strictly increasing,
    /// each ≥ 1.
    pub load_period_ladder_events: Vec<u64>,
    /// Store sampling periods, stepped together with the load ladder and clamped at
    /// its end, events per sample (§4.1.1: initial 100 000; artifact ladder up to
    /// 1 500 000). Non-empty, strictly increasing, each ≥ 1.
    pub store_period_ladder_events: Vec<u64>,
    /// ksampled's CPU budget, percent of one core (§4.1.1: 3). Range (0, 100].
    pub cpu_budget_pct: f64,
    /// Hysteresis around the budget, percent of one core (§4.1.1: 0.5). Range
    /// [0, cpu_budget_pct).
    pub cpu_hysteresis_pct: f64,
    /// Weight of the newest window in the EMA of ksampled's CPU share (§4.1.1 says
    /// EMA without a weight; the artifact's intended 0.8). Range (0, 1].
    pub cpu_ema_new_weight: f64,
    /// Interval between CPU checks, ms (paper: "periodically"; artifact 15 000;
    /// tierkit 1000 so that runs of a few simulated seconds are controlled — see the
    /// docs). Range ≥ 1.
    pub cpu_check_interval_ms: u64,
    /// ksampled CPU per processed sample that the controller counts, ns (tierkit: the
    /// machine's default `costs.sample_ns`, 200; multiply by `sim.policy_time_scale`
    /// when one is set, since the window is measured in policy time). Range ≥ 1.
    pub sample_cost_ns: u64,
    /// Samples between threshold adaptations, samples (§4.2.1: 100 000). Range ≥ 1.
    pub adapt_interval_samples: u64,
    /// Samples between coolings, samples (§4.2.2: 2 000 000). Range ≥ 1.
    pub cooling_interval_samples: u64,
    /// Hot-set fill ratio above which there is no warm band, fraction of the fast
    /// tier (§4.2.1: α = 0.9). Range (0, 1].
    pub alpha: f64,
    /// Start-up `T_hot` (and `T_warm`; `T_cold` one below), bin (§4.2.1: 1). Range
    /// 0 to nr_bins − 1.
    pub initial_hot_bin: u32,
    /// kmigrated wake-up period, ms (§4.2.3: 500). Range ≥ 1.
    pub kmigrated_interval_ms: u64,
    /// Demotion starts when free fast memory falls below this, percent of the fast
    /// tier (§4.2.3: 2). Range [0, 50].
    pub demotion_watermark_pct: f64,
    /// Promotions stop, and demotion refills, at this much free fast memory plus the
    /// pages waiting for promotion, percent of the fast tier (artifact
    /// `htmm_migrater.c`: 3, without its [100 MB, 1500 MB] clamp). Range [0, 50].
    pub promotion_watermark_pct: f64,
    /// A split-benefit estimate is made after this many samples per allocated 4 KiB
    /// page, fraction (§4.3.1: a quarter). Range (0, 16].
    pub split_window_fraction: f64,
    /// Split when eHR − rHR reaches this, hit-ratio percentage points (§4.3.1: 5,
    /// absolute). Range [0, 100].
    pub split_trigger_pct: f64,
    /// β of Eq. (2), the split-count scale factor (§4.3.2: 0.4). Range (0, 10].
    pub beta: f64,
    /// Huge pages split per kmigrated wake-up, huge pages (artifact: 50). Range ≥ 1.
    pub split_batch_huge_pages: u64,
    /// Keep the warm band (§4.2.1); `false` is the paper's no-warm-set ablation
    /// (Fig. 10).
    pub warm_set: bool,
    /// Split skewed huge pages (§4.3); `false` is MEMTIS-NS (Fig. 10–12).
    pub split: bool,
    /// Coalesce 2 MiB regions whose 512 base pages are all hot (§4.3.3); only once the
    /// machine has handed out a huge page (THP enabled).
    pub coalesce: bool,
    /// kmigrated CPU per metadata entry or list node it touches (cooling, demotion
    /// scan, promotion list), ns (tierkit estimate: one cache miss per 8-byte entry
    /// amortised over a line, plus the list work). Range 0–10 000.
    pub scan_entry_ns: u64,
}

impl Default for MemtisConfig {
    fn default() -> Self {
        MemtisConfig {
            nr_bins: DEFAULT_NR_BINS as u32,
            load_period_ladder_events: vec![
                200, 300, 400, 500, 600, 700, 800, 900, 1_000, 1_200, 1_400, 1_600, 1_800, 2_000,
                2_500, 3_000, 3_500, 4_000, 4_500, 5_000, 6_000, 7_000, 8_000, 9_000, 10_000,
                12_000, 14_000, 16_000, 18_000, 20_000,
            ],
            store_period_ladder_events: vec![100_000, 300_000, 600_000, 1_000_000, 1_500_000],
            cpu_budget_pct: 3.0,
            cpu_hysteresis_pct: 0.5,
            cpu_ema_new_weight: 0.8,
            cpu_check_interval_ms: 1_000,
            sample_cost_ns: 200,
            adapt_interval_samples: 100_000,
            cooling_interval_samples: 2_000_000,
            alpha: 0.9,
            initial_hot_bin: 1,
            kmigrated_interval_ms: 500,
            demotion_watermark_pct: 2.0,
            promotion_watermark_pct: 3.0,
            split_window_fraction: 0.25,
            split_trigger_pct: 5.0,
            beta: 0.4,
            split_batch_huge_pages: 50,
            warm_set: true,
            split: true,
            coalesce: true,
            scan_entry_ns: 10,
        }
    }
}

impl MemtisConfig {
    /// Check ranges; the error names the field and its valid range.
    pub fn validate(&self) -> Result<(), ConfigError> {
        let at_least = |name: &str, v: u64, min: u64| {
            if v < min {
                Err(format!("policy.{name} must be at least {min}, got {v}"))
            } else {
                Ok(())
            }
        };
        let within = |name: &str, v: f64, lo: f64, lo_open: bool, hi: f64| {
            let ok = v.is_finite() && (if lo_open { v > lo } else { v >= lo }) && v <= hi;
            if ok {
                Ok(())
            } else {
                let open = if lo_open { "(" } else { "[" };
                Err(format!(
                    "policy.{name} must be in {open}{lo}, {hi}], got {v}"
                ))
            }
        };
        if !(2..=32).contains(&self.nr_bins) {
            return Err(format!("policy.nr_bins must be in 2..=32, got {}", self.nr_bins).into());
        }
        for (name, l) in [
            ("load_period_ladder_events", &self.load_period_ladder_events),
            (
                "store_period_ladder_events",
                &self.store_period_ladder_events,
            ),
        ] {
            if l.is_empty() || l[0] == 0 || l.windows(2).any(|w| w[0] >= w[1]) {
                return Err(format!(
                    "policy.{name} must be a non-empty, strictly increasing list of periods ≥ 1, got {l:?}"
                ).into());
            }
        }
        within("cpu_budget_pct", self.cpu_budget_pct, 0.0, true, 100.0)?;
        if !(self.cpu_hysteresis_pct.is_finite()
            && self.cpu_hysteresis_pct >= 0.0
            && self.cpu_hysteresis_pct < self.cpu_budget_pct)
        {
            return Err(format!(
                "policy.cpu_hysteresis_pct must be in [0, cpu_budget_pct = {}), got {}",
                self.cpu_budget_pct, self.cpu_hysteresis_pct
            )
            .into());
        }
        within(
            "cpu_ema_new_weight",
            self.cpu_ema_new_weight,
            0.0,
            true,
            1.0,
        )?;
        at_least("cpu_check_interval_ms", self.cpu_check_interval_ms, 1)?;
        at_least("sample_cost_ns", self.sample_cost_ns, 1)?;
        at_least("adapt_interval_samples", self.adapt_interval_samples, 1)?;
        at_least("cooling_interval_samples", self.cooling_interval_samples, 1)?;
        within("alpha", self.alpha, 0.0, true, 1.0)?;
        if self.initial_hot_bin >= self.nr_bins {
            return Err(format!(
                "policy.initial_hot_bin must be in 0..{} (nr_bins), got {}",
                self.nr_bins, self.initial_hot_bin
            )
            .into());
        }
        at_least("kmigrated_interval_ms", self.kmigrated_interval_ms, 1)?;
        within(
            "demotion_watermark_pct",
            self.demotion_watermark_pct,
            0.0,
            false,
            50.0,
        )?;
        within(
            "promotion_watermark_pct",
            self.promotion_watermark_pct,
            0.0,
            false,
            50.0,
        )?;
        within(
            "split_window_fraction",
            self.split_window_fraction,
            0.0,
            true,
            16.0,
        )?;
        within(
            "split_trigger_pct",
            self.split_trigger_pct,
            0.0,
            false,
            100.0,
        )?;
        within("beta", self.beta, 0.0, true, 10.0)?;
        at_least("split_batch_huge_pages", self.split_batch_huge_pages, 1)?;
        if self.scan_entry_ns > 10_000 {
            return Err(format!(
                "policy.scan_entry_ns must be in 0..=10000, got {}",
                self.scan_entry_ns
            )
            .into());
        }
        Ok(())
    }
}

/// What one demotion scan found.
#[derive(Debug, Default)]
struct Victims {
    /// Cold units (key, pages), in scan order.
    cold: Vec<(Key, u64)>,
    /// Warm units (key, pages), in scan order.
    warm: Vec<(Key, u64)>,
    /// Fast-tier entries examined.
    examined: u64,
    /// The last entry examined: where the next scan starts.
    last: Option<Key>,
}

/// Running totals reported in the summary.
#[derive(Debug, Clone, Default)]
struct Counts {
    samples: u64,
    adaptations: u64,
    coolings: u64,
    promoted_pages: u64,
    demoted_cold_pages: u64,
    demoted_warm_pages: u64,
    split_estimates: u64,
    split_triggers: u64,
    huge_pages_split: u64,
    split_freed_pages: u64,
    split_promoted_pages: u64,
    split_demoted_pages: u64,
    coalesced: u64,
    /// Sum over estimation windows of samples, rHR hits and eHR hits.
    win_samples: u64,
    win_rhr: u64,
    win_ehr: u64,
    last_rhr: f64,
    last_ehr: f64,
    /// Hot-set size / fast tier at each adaptation.
    hot_fraction: Vec<f64>,
    warm_fraction: Vec<f64>,
    max_window_cpu_pct: f64,
    /// Adaptations that moved `T_hot` up or down.
    t_hot_rises: u64,
    t_hot_falls: u64,
}

/// The policy.
pub struct Memtis {
    cfg: MemtisConfig,
    pages: Pages,
    ctl: PeriodController,
    /// `MS_fast`, 4 KiB pages.
    fast_pages: u64,
    /// `ΔL / L_fast` from the tiers' load latencies (Eq. 2).
    latency_gap_ratio: f64,
    nr_samples: u64,
    cpu_window_samples: u64,
    cpu_window_start: Nanos,
    /// The promotion list: (unit, its pages when listed).
    promotion: VecDeque<(Key, u64)>,
    promotion_pages: u64,
    split_queue: VecDeque<Key>,
    /// Split candidates of the last cooling, most skewed first.
    skewed: VecDeque<Key>,
    /// Coalescing candidates of the last cooling.
    all_hot_regions: Vec<Key>,
    /// Where the next demotion scan starts (any order is the paper's).
    demote_cursor: Option<Key>,
    thp_seen: bool,
    counts: Counts,
}

impl Memtis {
    /// A policy with the given parameters.
    pub fn new(cfg: MemtisConfig) -> Memtis {
        let ctl = PeriodController::new(
            cfg.load_period_ladder_events.clone(),
            cfg.store_period_ladder_events.clone(),
            cfg.cpu_budget_pct,
            cfg.cpu_hysteresis_pct,
            cfg.cpu_ema_new_weight,
        );
        Memtis {
            pages: Pages::new(cfg.nr_bins as usize, cfg.initial_hot_bin as i32),
            ctl,
            cfg,
            fast_pages: 0,
            latency_gap_ratio: 0.0,
            nr_samples: 0,
            cpu_window_samples: 0,
            cpu_window_start: 0,
            promotion: VecDeque::new(),
            promotion_pages: 0,
            split_queue: VecDeque::new(),
            skewed: VecDeque::new(),
            all_hot_regions: Vec::new(),
            demote_cursor: None,
            thp_seen: false,
            counts: Counts::default(),
        }
    }

    fn pct_of_fast(&self, pct: f64) -> u64 {
        (self.fast_pages as f64 * pct / 100.0) as u64
    }

    fn charge_entries(&self, mech: &mut dyn Mechanisms, entries: u64) {
        mech.charge_cpu(entries * self.cfg.scan_entry_ns);
    }

    // ----- ksampled ------------------------------------------------------------------

    fn on_sample(&mut self, s: &Sample, mech: &mut dyn Mechanisms) {
        self.nr_samples += 1;
        self.cpu_window_samples += 1;
        self.counts.samples += 1;
        if let Some((key, n)) = self.pages.record_sample(s.pid, s.vpn, s.tier, s.huge) {
            self.promotion.push_back((key, n));
            self.promotion_pages += n;
        }
        // §4.2.2 / §4.2.1: both counted in samples; a cooling re-adapts too.
        if self
            .nr_samples
            .is_multiple_of(self.cfg.cooling_interval_samples)
        {
            self.cooling(mech);
        } else if self
            .nr_samples
            .is_multiple_of(self.cfg.adapt_interval_samples)
        {
            self.adapt(mech);
        }
        // §4.3.1: estimate once a quarter of the allocated pages' worth was sampled.
        let window = self.pages.window.samples as f64;
        if window > self.cfg.split_window_fraction * self.pages.tracked_pages() as f64 {
            self.split_estimate();
        }
    }

    fn adapt(&mut self, mech: &mut dyn Mechanisms) {
        let before = self.pages.th.hot;
        let a = self
            .pages
            .adapt(self.fast_pages, self.cfg.alpha, self.cfg.warm_set);
        self.counts.adaptations += 1;
        match a.thresholds.hot.cmp(&before) {
            std::cmp::Ordering::Greater => self.counts.t_hot_rises += 1,
            std::cmp::Ordering::Less => self.counts.t_hot_falls += 1,
            std::cmp::Ordering::Equal => {}
        }
        let fast = self.fast_pages.max(1) as f64;
        let (_, warm, _) = self.pages.class_sizes();
        self.counts.hot_fraction.push(a.hot_set_pages as f64 / fast);
        self.counts.warm_fraction.push(warm as f64 / fast);
        // Two passes over the bins of two histograms.
        self.charge_entries(mech, 4 * self.cfg.nr_bins as u64);
    }

    fn cooling(&mut self, mech: &mut dyn Mechanisms) {
        let want_coalesce = self.cfg.coalesce && self.thp_seen;
        let scan = self.pages.cool(self.cfg.split, want_coalesce);
        self.counts.coolings += 1;
        self.skewed = scan.skewed.into_iter().map(|(_, _, k)| k).collect();
        self.all_hot_regions = scan.all_hot_regions;
        // The scan is kmigrated's (§4.2.2); it runs now so that no sample sees a
        // page that the shifted histogram already counts as halved.
        self.charge_entries(mech, scan.entries);
        self.adapt(mech);
    }

    /// §4.3.1–4.3.2: compare eHR with rHR over the window and queue the top-N_s most
    /// skewed huge pages for splitting.
    fn split_estimate(&mut self) {
        let w = self.pages.window.clone();
        let (ehr, rhr) = (w.ehr(), w.rhr());
        self.counts.split_estimates += 1;
        self.counts.win_samples += w.samples;
        self.counts.win_rhr += w.rhr_hits;
        self.counts.win_ehr += w.ehr_hits;
        self.counts.last_ehr = ehr;
        self.counts.last_rhr = rhr;
        self.pages.window.reset();
        if !self.cfg.split || ehr - rhr < self.cfg.split_trigger_pct / 100.0 {
            return;
        }
        self.counts.split_triggers += 1;
        let n = split::split_count(
            ehr,
            rhr,
            self.latency_gap_ratio,
            w.samples,
            w.avg_samples_hp(),
            self.cfg.beta,
        );
        let mut queued = 0;
        while queued < n {
            let Some(key) = self.skewed.pop_front() else {
                break;
            };
            if let Some(Unit::Huge(u)) = self.pages.units.get_mut(&key) {
                if !u.split_queued {
                    u.split_queued = true;
                    self.split_queue.push_back(key);
                    queued += 1;
                }
            }
        }
    }

    /// ksampled's CPU check (§4.1.1): its share over the window is samples × cost.
    fn check_cpu(&mut self, mech: &mut dyn Mechanisms) {
        let now = mech.now();
        let window_ns = now.saturating_sub(self.cpu_window_start) as f64;
        let cpu_ns = (self.cpu_window_samples * self.cfg.sample_cost_ns) as f64;
        if window_ns > 0.0 {
            let change = self.ctl.update(cpu_ns, window_ns);
            self.counts.max_window_cpu_pct = self
                .counts
                .max_window_cpu_pct
                .max(self.ctl.last_window_pct());
            if change != PeriodChange::Unchanged {
                self.apply_periods(mech);
            }
        }
        self.cpu_window_samples = 0;
        self.cpu_window_start = now;
        mech.schedule(
            now + self.cfg.cpu_check_interval_ms * NS_PER_MS,
            KSAMPLED_TIMER,
            Runner::Kthread,
        );
    }

    fn apply_periods(&self, mech: &mut dyn Mechanisms) {
        mech.set_sample_period(SampleKind::LlcLoadMiss, self.ctl.load_period());
        mech.set_sample_period(SampleKind::Store, self.ctl.store_period());
    }

    // ----- kmigrated -----------------------------------------------------------------

    fn kmigrated_fast(&mut self, mech: &mut dyn Mechanisms) {
        self.split_queued(mech);
        self.coalesce(mech);
        self.prune_promotion_list(mech);
        self.demote(mech);
        let now = mech.now();
        mech.schedule(
            now + self.cfg.kmigrated_interval_ms * NS_PER_MS,
            KMIGRATED_FAST_TIMER,
            Runner::Kthread,
        );
    }

    fn kmigrated_capacity(&mut self, mech: &mut dyn Mechanisms) {
        self.promote(mech);
        let now = mech.now();
        mech.schedule(
            now + self.cfg.kmigrated_interval_ms * NS_PER_MS,
            KMIGRATED_CAPACITY_TIMER,
            Runner::Kthread,
        );
    }

    /// §4.3.3: split up to a batch of queued huge pages, free their never-written
    /// subpages, and move each remaining subpage to the tier its own hotness calls
    /// for (hot → fast, otherwise → capacity).
    fn split_queued(&mut self, mech: &mut dyn Mechanisms) {
        for _ in 0..self.cfg.split_batch_huge_pages {
            let Some(key) = self.split_queue.pop_front() else {
                break;
            };
            let (pid, head) = key;
            if !self.pages.units.get(&key).is_some_and(Unit::is_huge) {
                continue;
            }
            let Some(freed) = mech.split_huge(pid, head, true) else {
                // Not huge any more in the machine: forget the stale entry.
                if let Some(Unit::Huge(u)) = self.pages.units.get_mut(&key) {
                    u.split_queued = false;
                }
                continue;
            };
            self.counts.huge_pages_split += 1;
            self.counts.split_freed_pages += freed;
            let survivors = {
                let m: &dyn Mechanisms = &*mech;
                self.pages
                    .convert_split(key, &mut |v| m.page(pid, v).map(|p| p.tier))
            };
            self.charge_entries(mech, SUBPAGES_PER_HUGE);
            // Demote the non-hot subpages first: they make room for the hot ones.
            let mut hot_slow = Vec::new();
            for &(vpn, tier, h) in &survivors {
                let hot = self.pages.th.class(self.pages.bin(h)) == Class::Hot;
                if hot && !tier.is_fast() {
                    hot_slow.push(vpn);
                } else if !hot && tier.is_fast() && self.migrate(mech, (pid, vpn), TierId(1)) {
                    self.counts.split_demoted_pages += 1;
                }
            }
            for vpn in hot_slow {
                let room = mech.free_pages(TierId::FAST)
                    > self.pct_of_fast(self.cfg.promotion_watermark_pct);
                if room && self.migrate(mech, (pid, vpn), TierId::FAST) {
                    self.counts.split_promoted_pages += 1;
                } else if let Some(u) = self.pages.units.get_mut(&(pid, vpn)) {
                    u.set_queued(true);
                    self.promotion.push_back(((pid, vpn), 1));
                    self.promotion_pages += 1;
                }
            }
        }
    }

    /// §4.3.3: collapse 2 MiB regions whose 512 base pages are all hot (found by the
    /// last cooling scan and still all hot) into a huge page in the fast tier.
    fn coalesce(&mut self, mech: &mut dyn Mechanisms) {
        for (pid, head) in std::mem::take(&mut self.all_hot_regions) {
            if !self.pages.all_hot_base(pid, head) {
                continue;
            }
            self.charge_entries(mech, SUBPAGES_PER_HUGE);
            if mech.collapse_huge(pid, head, TierId::FAST).is_ok() {
                self.pages.convert_collapse(pid, head, TierId::FAST);
                self.counts.coalesced += 1;
            }
        }
    }

    /// Drop list entries that no longer need promotion (cooled, already fast, gone),
    /// so the demotion target counts only real demand.
    fn prune_promotion_list(&mut self, mech: &mut dyn Mechanisms) {
        let before = self.promotion.len() as u64;
        let pages = &mut self.pages;
        let mut kept_pages = 0;
        self.promotion.retain(|&(key, n)| {
            let th = pages.th;
            let nr_bins = pages.main.nr_bins();
            let keep = match pages.units.get_mut(&key) {
                Some(u) => {
                    let hot = th.class(histogram::bin_of(u.h(), nr_bins)) == Class::Hot;
                    let keep = hot && !u.tier().is_fast() && u.pages() == n;
                    if !keep {
                        u.set_queued(false);
                    }
                    keep
                }
                None => false,
            };
            if keep {
                kept_pages += n;
            }
            keep
        });
        self.promotion_pages = kept_pages;
        self.charge_entries(mech, before);
    }

    /// §4.2.3: when free fast memory is below the demotion watermark, or too small for
    /// the pages waiting for promotion, demote cold pages, then warm ones, until free
    /// memory reaches the promotion watermark plus the waiting pages. Hot pages are
    /// never demoted. Within a class the order is the scan's (the paper's "no strict
    /// order").
    fn demote(&mut self, mech: &mut dyn Mechanisms) {
        let free = mech.free_pages(TierId::FAST);
        let demotion_wm = self.pct_of_fast(self.cfg.demotion_watermark_pct);
        let want = self.pct_of_fast(self.cfg.promotion_watermark_pct) + self.promotion_pages;
        if free >= demotion_wm && free >= want {
            return;
        }
        let need = want
            .max(demotion_wm)
            .min(self.fast_pages)
            .saturating_sub(free);
        if need == 0 {
            return;
        }
        let v = self.demotion_candidates(need);
        self.charge_entries(mech, v.examined);
        if v.last.is_some() {
            self.demote_cursor = v.last;
        }
        let mut freed = 0;
        for (victims, is_warm) in [(v.cold, false), (v.warm, true)] {
            for (key, n) in victims {
                if freed >= need {
                    break;
                }
                if self.migrate(mech, key, TierId(1)) {
                    freed += n;
                    if is_warm {
                        self.counts.demoted_warm_pages += n;
                    } else {
                        self.counts.demoted_cold_pages += n;
                    }
                }
            }
        }
    }

    /// Scan fast-tier pages from the cursor, wrapping once, for cold victims worth
    /// `need` pages and warm ones worth as much.
    fn demotion_candidates(&self, need: u64) -> Victims {
        let mut v = Victims::default();
        let (mut cold_pages, mut warm_pages) = (0u64, 0u64);
        let units = &self.pages.units;
        let (tail, head) = match self.demote_cursor {
            Some(k) => (
                units.range((Bound::Excluded(k), Bound::Unbounded)),
                units.range(..=k),
            ),
            None => (units.range(..), units.range(..(Pid(0), 0))),
        };
        for (key, unit) in tail.chain(head) {
            if !unit.tier().is_fast() {
                continue;
            }
            v.examined += 1;
            v.last = Some(*key);
            match self.pages.class(unit) {
                Class::Cold => {
                    v.cold.push((*key, unit.pages()));
                    cold_pages += unit.pages();
                    if cold_pages >= need {
                        break;
                    }
                }
                Class::Warm if warm_pages < need => {
                    v.warm.push((*key, unit.pages()));
                    warm_pages += unit.pages();
                }
                _ => {}
            }
        }
        v
    }

    /// The capacity-tier kmigrated (§4.2.3): promote listed hot pages, oldest first,
    /// while the fast tier keeps the promotion watermark free.
    fn promote(&mut self, mech: &mut dyn Mechanisms) {
        let reserve = self.pct_of_fast(self.cfg.promotion_watermark_pct);
        let mut touched = 0;
        while let Some((key, n)) = self.promotion.pop_front() {
            touched += 1;
            self.promotion_pages -= n;
            let Some(unit) = self.pages.units.get_mut(&key) else {
                continue;
            };
            unit.set_queued(false);
            let pages = unit.pages();
            let hot = self.pages.class(&self.pages.units[&key]) == Class::Hot;
            if !hot || self.pages.units[&key].tier().is_fast() {
                continue;
            }
            if mech.free_pages(TierId::FAST) < reserve + pages
                || !self.migrate(mech, key, TierId::FAST)
            {
                // No room: keep it at the head for the next round.
                if let Some(u) = self.pages.units.get_mut(&key) {
                    u.set_queued(true);
                }
                self.promotion.push_front((key, pages));
                self.promotion_pages += pages;
                break;
            }
            self.counts.promoted_pages += pages;
        }
        self.charge_entries(mech, touched);
    }

    /// Migrate a unit in the background and record its new tier.
    fn migrate(&mut self, mech: &mut dyn Mechanisms, key: Key, to: TierId) -> bool {
        match mech.migrate(key.0, key.1, to, MigrateMode::Async) {
            Ok(()) => {
                if let Some(u) = self.pages.units.get_mut(&key) {
                    u.set_tier(to);
                }
                true
            }
            Err(MigrateError::AlreadyThere) => {
                if let Some(u) = self.pages.units.get_mut(&key) {
                    u.set_tier(to);
                }
                false
            }
            Err(_) => false,
        }
    }

    fn mean(v: &[f64]) -> f64 {
        if v.is_empty() {
            0.0
        } else {
            v.iter().sum::<f64>() / v.len() as f64
        }
    }
}

impl Policy for Memtis {
    fn name(&self) -> &'static str {
        "memtis"
    }

    fn requirements(&self) -> Requirements {
        // New pages start at T_hot (§4.2.1): the allocation hook.
        Requirements {
            page_alloc_events: true,
            sampling: true,
            ..Requirements::default()
        }
    }

    fn init(&mut self, mech: &mut dyn Mechanisms) {
        let tiers = mech.tiers();
        self.fast_pages = tiers[0].capacity_pages;
        let (l_fast, l_cap) = (
            tiers[0].load_ns,
            tiers.get(1).map_or(tiers[0].load_ns, |t| t.load_ns),
        );
        self.latency_gap_ratio = ((l_cap - l_fast) / l_fast).max(0.0);
        self.apply_periods(mech);
        let now = mech.now();
        self.cpu_window_start = now;
        mech.schedule(
            now + self.cfg.cpu_check_interval_ms * NS_PER_MS,
            KSAMPLED_TIMER,
            Runner::Kthread,
        );
        let period = self.cfg.kmigrated_interval_ms * NS_PER_MS;
        mech.schedule(now + period, KMIGRATED_FAST_TIMER, Runner::Kthread);
        mech.schedule(now + period, KMIGRATED_CAPACITY_TIMER, Runner::Kthread);
    }

    fn on_event(&mut self, event: &Event, mech: &mut dyn Mechanisms) {
        match event {
            Event::Sample(s) => self.on_sample(s, mech),
            Event::PageAlloc {
                pid,
                vpn,
                tier,
                huge,
            } => {
                self.thp_seen |= *huge;
                self.pages.on_alloc(*pid, *vpn, *tier, *huge);
            }
            Event::PageMoved { pid, vpn, to, .. } => self.pages.on_moved(*pid, *vpn, *to),
            Event::Munmap {
                pid,
                start_vpn,
                nr_pages,
                ..
            } => {
                let touched = {
                    let m: &dyn Mechanisms = &*mech;
                    self.pages
                        .remove_range(*pid, *start_vpn, *nr_pages, &mut |v| {
                            m.page(*pid, v).map(|p| p.tier)
                        })
                };
                self.charge_entries(mech, touched);
            }
            Event::Timer { id } => match *id {
                KSAMPLED_TIMER => self.check_cpu(mech),
                KMIGRATED_FAST_TIMER => self.kmigrated_fast(mech),
                KMIGRATED_CAPACITY_TIMER => self.kmigrated_capacity(mech),
                _ => {}
            },
            // No fault-path work (§3), and kmigrated wakes on its period only (§4.2.3).
            Event::HintFault(_) | Event::Mmap { .. } | Event::LowWatermark { .. } => {}
        }
    }

    /// Base pages: one 4 KiB metadata page per PTE page that maps any (§5: 8 bytes per
    /// base page, at most 0.195%). Huge pages: none (struct pages 3–131 of the THP).
    /// Plus the two 128-byte histograms.
    fn metadata_bytes(&self) -> u64 {
        let mut regions = 0u64;
        let mut last = None;
        for (&(pid, vpn), unit) in &self.pages.units {
            if !unit.is_huge() {
                let r = (pid, huge_head(vpn));
                if last != Some(r) {
                    regions += 1;
                    last = Some(r);
                }
            }
        }
        regions * PAGE_SIZE + 2 * 8 * self.cfg.nr_bins as u64
    }

    fn stats(&self) -> Vec<(&'static str, f64)> {
        let c = &self.counts;
        let (hot, warm, cold) = self.pages.class_sizes();
        let h = &c.hot_fraction;
        let steady = &h[h.len() / 2..];
        let ratio = |a: u64, b: u64| if b == 0 { 0.0 } else { a as f64 / b as f64 };
        vec![
            ("samples", c.samples as f64),
            ("load_period_events", self.ctl.load_period() as f64),
            ("store_period_events", self.ctl.store_period() as f64),
            ("sampler_cpu_pct_ema", self.ctl.usage_pct()),
            ("sampler_cpu_pct_max_window", c.max_window_cpu_pct),
            ("period_steps_up", self.ctl.steps().0 as f64),
            ("period_steps_down", self.ctl.steps().1 as f64),
            ("adaptations", c.adaptations as f64),
            ("coolings", c.coolings as f64),
            ("t_hot", self.pages.th.hot as f64),
            ("t_warm", self.pages.th.warm as f64),
            ("t_cold", self.pages.th.cold as f64),
            ("t_hot_bp", self.pages.t_hot_bp as f64),
            ("t_hot_rises", c.t_hot_rises as f64),
            ("t_hot_falls", c.t_hot_falls as f64),
            ("fast_tier_pages", self.fast_pages as f64),
            ("hot_pages", hot as f64),
            ("warm_pages", warm as f64),
            ("cold_pages", cold as f64),
            ("hist_total_pages", self.pages.tracked_pages() as f64),
            ("hot_set_fraction_mean", Self::mean(h)),
            ("hot_set_fraction_steady_mean", Self::mean(steady)),
            (
                "hot_set_fraction_steady_min",
                steady.iter().cloned().reduce(f64::min).unwrap_or(0.0),
            ),
            (
                "hot_set_fraction_max",
                h.iter().cloned().fold(0.0, f64::max),
            ),
            ("warm_set_fraction_mean", Self::mean(&c.warm_fraction)),
            ("promoted_pages", c.promoted_pages as f64),
            ("demoted_cold_pages", c.demoted_cold_pages as f64),
            ("demoted_warm_pages", c.demoted_warm_pages as f64),
            ("promotion_list_pages", self.promotion_pages as f64),
            ("split_estimates", c.split_estimates as f64),
            ("split_triggers", c.split_triggers as f64),
            ("huge_pages_split", c.huge_pages_split as f64),
            ("split_freed_pages", c.split_freed_pages as f64),
            ("split_promoted_pages", c.split_promoted_pages as f64),
            ("split_demoted_pages", c.split_demoted_pages as f64),
            ("coalesced", c.coalesced as f64),
            ("ehr_last", c.last_ehr),
            ("rhr_last", c.last_rhr),
            ("ehr_mean", ratio(c.win_ehr, c.win_samples)),
            ("rhr_mean", ratio(c.win_rhr, c.win_samples)),
        ]
    }
}
