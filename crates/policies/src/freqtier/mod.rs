//! `freqtier`: FreqTier (Song, Yang, Liu, Pekhimenko — lightweight frequency-based
//! tiering for CXL memory), a user-space tiering thread that counts PEBS samples of
//! memory accesses per 4 KiB page in a 4-bit counting Bloom filter.
//!
//! How it runs here (paper sections in brackets; spec: `shared/specs/freqtier.md`):
//! - **Sampling** [§III, §V-B2]: LLC load misses are sampled at a *rate* (100 kHz,
//!   10 kHz, 1 kHz per hardware counter per CPU). The machine samples by *period*, so
//!   every 10 ms [`RateController`] estimates the event rate from samples × period and
//!   programs `period = events_per_s / target_rate`, as perf's frequency mode does.
//! - **Promotion**, Algorithm 1 in batches [§IV-C, §V-C-c]: samples are coalesced per
//!   page; after `batch_samples` samples each page's count is raised once in the
//!   tracker ([`cbf`]); slow-tier pages whose estimate reaches the hot threshold are
//!   promoted, all in one migration call (asynchronously, from the tiering thread).
//! - **Demotion**, Algorithm 2 as corrected by spec §2.6 [§V-B1]: when free fast
//!   memory falls below `PROMOTING_WMARK`, a linear scan of the address space
//!   ([`DemotionScan`]) resumes at its checkpoint, reads page placement in pagemap-like
//!   batches, collects fast-tier pages whose estimate is below the threshold until
//!   free memory would reach `DEMOTING_WMARK`, wraps around, and demotes them in one
//!   call. A full pass that finds nothing cold is an *empty demotion scan*.
//! - **Hot threshold** [§V-C-a]: starts at 5; after each batch it moves one step so
//!   that the pages at or above it ([`HotHistogram`]) just fit the fast tier.
//! - **Tiering intensity** [§V-B2]: every minute the fast-tier hit ratio of the
//!   samples is compared with the previous minute's ([`Intensity`]): stable → one level
//!   slower, unstable → one level faster; at the slowest level, or on a promotion
//!   plateau or an empty demotion scan, the policy enters *monitoring*, where samples
//!   are only counted by tier; instability there restarts sampling at the top level.
//!
//! One file per component: `config` (the parameters), `threshold` (histogram and
//! threshold step), `rate` (rate → period), `intensity` (the state machine), `scan`
//! (the demotion scan), `batch` (the coalescing batch) and `cbf` (the trackers): pure
//! logic, unit tested on its own in `tests.rs`; this file is the plumbing that
//! drives them from the machine's events. Parameters, decisions and measurements: `docs/policies/freqtier.md`.

mod batch;
pub mod cbf;
mod config;
mod intensity;
mod rate;
mod scan;
mod threshold;

pub use batch::*;
pub use config::*;
pub use intensity::*;
pub use rate::*;
pub use scan::*;
pub use threshold::*;

use cbf::{CbfLayout, CountingBloomFilter, ExactTracker, FreqTracker, MAX_COUNT};
use serde::{Deserialize, Serialize};
use std::collections::HashMap;
use tierkit_core::*;

/// Timer of the sampling-period controller (perf's per-tick frequency adjustment).
const RATE_TIMER: TimerId = 1;
/// Timer of the hit-ratio window (sampling) or the monitoring check.
const INTENSITY_TIMER: TimerId = 2;
/// How often the sampling period is re-derived from the observed event rate, ms. perf
/// adjusts a frequency-mode event's period every scheduler tick (4 ms at HZ=250).
pub const RATE_TICK_MS: u64 = 10;
/// Smallest sampling period programmed: keeps one interval whose event rate is still
/// unknown (after a quiet phase) from flooding the tiering CPU.
pub const MIN_SAMPLE_PERIOD: u64 = 16;
/// Largest sampling period programmed.
pub const MAX_SAMPLE_PERIOD: u64 = 1 << 32;
/// Period before the first event-rate estimate (perf starts frequency mode from a
/// guess too and corrects it on the first tick).
pub const INITIAL_SAMPLE_PERIOD: u64 = 1_000;
/// A window with fewer samples than this is not judged (no decision, nothing reset).
pub const MIN_WINDOW_SAMPLES: u64 = 50;
/// Samples a monitoring check should see at least: when a short `monitor_check_ms`
/// makes the check so short that `monitor_sample_hz` would give fewer, the counting rate is
/// raised to this (a simulator stand-in for perf-stat's exact counts).
pub const MONITOR_MIN_SAMPLES_PER_CHECK: u64 = 200;
/// Tiering-thread cost of adding one sample to the batch's coalescing table, ns.
pub const COALESCE_NS: u64 = 5;
/// Fixed cost of one `move_pages(2)` call (syscall entry, argument copy), ns; the
/// per-page migration costs are the machine's.
pub const MOVE_PAGES_CALL_NS: u64 = 2_000;
/// Bytes of one buffered sample (address + tier), FreqTier §VII-E2: 16 B × batch.
pub const SAMPLE_RECORD_BYTES: u64 = 16;
/// perf ring buffer per hardware counter per CPU, bytes (§VII-C: 512 KB).
pub const RING_BUFFER_BYTES: u64 = 512 * 1024;

// ----- the policy ---------------------------------------------------------------------

#[derive(Debug, Default, Clone, Copy)]
struct FreqTierStats {
    samples: u64,
    batches: u64,
    batch_samples: u64,
    increment_ops: u64,
    scan_gets: u64,
    agings: u64,
    promoted_pages: u64,
    promotion_calls: u64,
    promotion_nospace_pages: u64,
    promotion_failed_other: u64,
    demotion_rounds: u64,
    demoted_pages: u64,
    demotion_scanned_pages: u64,
    empty_demotion_scans: u64,
    intensity_lowered: u64,
    intensity_raised: u64,
    monitoring_entered: u64,
    monitoring_by_stability: u64,
    monitoring_by_plateau: u64,
    monitoring_by_empty_scan: u64,
    monitoring_left: u64,
    windows_idle: u64,
    last_window_hit_ratio: f64,
    /// Largest share of tracked pages at the saturation count seen after a batch
    /// (§VII-E3, Fig. 14: < 2% on the paper's workloads).
    max_share_at_max_count: f64,
}

/// The policy.
pub struct FreqTier {
    cfg: FreqTierConfig,
    tracker: Box<dyn FreqTracker>,
    hist: HotHistogram,
    threshold: u8,
    batch: Batch,
    scan: DemotionScan,
    intensity: Intensity,
    rate: RateController,
    /// The period last programmed into the machine.
    programmed_period: u64,
    window: WindowStats,
    /// Samples counted since the last aging.
    samples_since_aging: u64,
    aging_every: u64,
    fast_capacity: u64,
    promoting_wmark: u64,
    demoting_wmark: u64,
    stats: FreqTierStats,
}

impl FreqTier {
    /// A policy with the given parameters. The tracker is sized in `init`, once the
    /// fast tier's capacity is known.
    pub fn new(cfg: FreqTierConfig) -> FreqTier {
        let params = IntensityParams {
            nr_levels: cfg.sampling_levels_hz.len(),
            tolerance: cfg.hit_ratio_tolerance_pct / 100.0,
            noise_z: cfg.stability_noise_z,
            min_samples: MIN_WINDOW_SAMPLES,
        };
        FreqTier {
            threshold: cfg.initial_hot_threshold,
            scan: DemotionScan::new(cfg.pagemap_batch_pages),
            intensity: Intensity::new(params),
            tracker: Box::new(ExactTracker::new()),
            hist: HotHistogram::default(),
            batch: Batch::default(),
            rate: RateController::new(INITIAL_SAMPLE_PERIOD, 0),
            programmed_period: 0,
            window: WindowStats::default(),
            samples_since_aging: 0,
            aging_every: 1,
            fast_capacity: 0,
            promoting_wmark: 0,
            demoting_wmark: 0,
            stats: FreqTierStats::default(),
            cfg,
        }
    }

    /// The tracker for a fast tier of `fast_pages` (§V-A sizing unless overridden).
    fn build_tracker(cfg: &FreqTierConfig, fast_pages: u64) -> Box<dyn FreqTracker> {
        let layout = match cfg.tracker {
            TrackerKind::Exact => return Box::new(ExactTracker::new()),
            TrackerKind::Cbf => CbfLayout::Flat,
            TrackerKind::BlockedCbf => CbfLayout::Blocked,
        };
        // Fixed seed: the hash functions are part of the program, not of the run.
        const SEED: u64 = 0x4672_6571_5469_6572;
        Box::new(if cfg.cbf_size_kib > 0 {
            CountingBloomFilter::new(cfg.cbf_size_kib * 1024 * 2, cfg.cbf_hashes, layout, SEED)
        } else {
            CountingBloomFilter::for_items(
                fast_pages,
                cfg.cbf_hashes,
                cfg.cbf_false_positive_rate,
                layout,
                SEED,
            )
        })
    }

    /// The current hot threshold.
    pub fn hot_threshold(&self) -> u8 {
        self.threshold
    }

    /// The current intensity mode.
    pub fn mode(&self) -> Mode {
        self.intensity.mode()
    }

    /// Samples per second the machine should deliver in the current mode.
    fn target_rate(&self) -> f64 {
        match self.intensity.mode() {
            Mode::Sampling { level } => self.cfg.machine_rate(self.cfg.sampling_levels_hz[level]),
            Mode::Monitoring => {
                let check_s =
                    FreqTierConfig::window_ns(self.cfg.monitor_check_ms) as f64 / NS_PER_SEC as f64;
                self.cfg
                    .machine_rate(self.cfg.monitor_sample_hz)
                    .max(MONITOR_MIN_SAMPLES_PER_CHECK as f64 / check_s)
            }
        }
    }

    /// Program `period` unless it is within 1/8 of the current one (reprogramming
    /// restarts the machine's countdown).
    fn program_period(&mut self, period: u64, mech: &mut dyn Mechanisms) {
        let cur = self.programmed_period;
        if cur == 0 || period.abs_diff(cur) * 8 > cur {
            mech.set_sample_period(SampleKind::LlcLoadMiss, period);
            self.programmed_period = period;
        }
    }

    fn on_sample(&mut self, s: &Sample, mech: &mut dyn Mechanisms) {
        if s.kind != SampleKind::LlcLoadMiss {
            return;
        }
        self.stats.samples += 1;
        self.rate.on_sample();
        if s.tier.is_fast() {
            self.window.fast_samples += 1;
        } else {
            self.window.slow_samples += 1;
        }
        if self.intensity.mode() == Mode::Monitoring {
            return; // counting only (perf-stat)
        }
        let vpn = if s.huge { huge_head(s.vpn) } else { s.vpn };
        self.batch.add(s.pid, vpn, s.tier, s.huge);
        mech.charge_cpu(COALESCE_NS);
        if self.batch.nr_samples() >= self.cfg.batch_samples {
            self.process_batch(mech);
        }
    }

    /// Algorithm 1 over one batch (with a demotion round first if free memory is
    /// below `PROMOTING_WMARK`), then aging, the threshold step and, under memory
    /// pressure, another demotion round.
    fn process_batch(&mut self, mech: &mut dyn Mechanisms) {
        if self.batch.nr_samples() == 0 {
            return;
        }
        self.stats.batches += 1;
        self.stats.batch_samples += self.batch.nr_samples();
        let entries = self.batch.take();
        let mut ops = 0u64;
        let mut promote = Vec::new();
        for e in &entries {
            let (old, new) = if self.cfg.coalesce_increments {
                ops += 1;
                self.tracker.increase(page_key(e.pid, e.vpn), e.count)
            } else {
                ops += e.count as u64;
                let key = page_key(e.pid, e.vpn);
                let old = self.tracker.get(key);
                let mut new = old;
                for _ in 0..e.count {
                    new = self.tracker.increment(key).1;
                }
                (old, new)
            };
            self.hist.record(old, new);
            self.samples_since_aging += e.count as u64;
            // Only pages the samples saw on a slow tier move (spec §2.12).
            if new >= self.threshold && !e.tier.is_fast() {
                promote.push(*e);
            }
        }
        self.stats.increment_ops += ops;
        mech.charge_cpu(ops * self.tracker.op_cost_ns());
        // PROMOTING → DEMOTING → PROMOTING (Fig. 6): if first-touch allocations ate
        // the room the last round freed, demote before promoting, or the batch's
        // promotions would all fail.
        if !promote.is_empty() {
            self.maybe_demote(mech);
        }
        self.promote(&promote, mech);
        if self.samples_since_aging >= self.aging_every {
            self.age(mech);
        }
        let tracked = self.hist.hot_pages(1);
        if tracked > 0 {
            let share = self.hist.pages[MAX_COUNT as usize] as f64 / tracked as f64;
            self.stats.max_share_at_max_count = self.stats.max_share_at_max_count.max(share);
        }
        if self.cfg.dynamic_hot_threshold {
            let target = self.fast_capacity.saturating_sub(self.demoting_wmark);
            self.threshold = step_hot_threshold(
                self.threshold,
                &self.hist,
                target,
                self.cfg.min_hot_threshold,
            );
        }
        self.maybe_demote(mech);
    }

    /// One `move_pages` call promoting `pages` (stops at the first "no space": the
    /// rest stay hot and come back with their next samples).
    fn promote(&mut self, pages: &[BatchEntry], mech: &mut dyn Mechanisms) {
        if pages.is_empty() {
            return;
        }
        self.stats.promotion_calls += 1;
        mech.charge_cpu(MOVE_PAGES_CALL_NS);
        for (i, e) in pages.iter().enumerate() {
            let n = if e.huge { SUBPAGES_PER_HUGE } else { 1 };
            match mech.migrate(e.pid, e.vpn, TierId::FAST, MigrateMode::Async) {
                Ok(()) => {
                    self.stats.promoted_pages += n;
                    self.window.promoted_pages += n;
                }
                Err(MigrateError::NoSpace) => {
                    self.stats.promotion_nospace_pages += pages[i..]
                        .iter()
                        .map(|e| if e.huge { SUBPAGES_PER_HUGE } else { 1 })
                        .sum::<u64>();
                    break;
                }
                Err(_) => self.stats.promotion_failed_other += n,
            }
        }
    }

    fn age(&mut self, mech: &mut dyn Mechanisms) {
        self.tracker.age();
        self.hist.age();
        self.samples_since_aging = 0;
        self.stats.agings += 1;
        mech.charge_cpu(self.tracker.age_cost_ns());
    }

    /// Algorithm 2 when free fast memory is below `PROMOTING_WMARK`: demote cold
    /// pages until `DEMOTING_WMARK` would be restored, in one call.
    fn maybe_demote(&mut self, mech: &mut dyn Mechanisms) {
        let free = mech.free_pages(TierId::FAST);
        if free >= self.promoting_wmark {
            return;
        }
        let need = self.demoting_wmark - free;
        let mut space = Vec::new();
        for pid in mech.processes() {
            space.extend(mech.vmas(pid).into_iter().map(|v| (pid, v)));
        }
        let threshold = self.threshold;
        let tracker = &self.tracker;
        let mut gets = 0u64;
        let outcome = self.scan.run(
            &space,
            need,
            &mut |pid, start, n| {
                let mut units = Vec::new();
                mech.walk_pages(pid, start, n, &mut |vpn, info| units.push((vpn, info)));
                units
            },
            &mut |pid, vpn| {
                gets += 1;
                tracker.get(page_key(pid, vpn)) < threshold
            },
        );
        self.stats.scan_gets += gets;
        mech.charge_cpu(gets * self.tracker.op_cost_ns());
        self.stats.demotion_rounds += 1;
        self.stats.demotion_scanned_pages += outcome.scanned_pages;
        if outcome.full_pass && outcome.cold.is_empty() {
            self.window.empty_demotion_scan = true;
            self.stats.empty_demotion_scans += 1;
        }
        if outcome.cold.is_empty() {
            return;
        }
        mech.charge_cpu(MOVE_PAGES_CALL_NS);
        let slow = TierId(1);
        for &(pid, vpn, n) in &outcome.cold {
            if mech.migrate(pid, vpn, slow, MigrateMode::Async).is_ok() {
                self.stats.demoted_pages += n;
            }
        }
    }

    fn on_rate_tick(&mut self, mech: &mut dyn Mechanisms) {
        let now = mech.now();
        let period = self.rate.tick(now, self.target_rate());
        self.program_period(period, mech);
        mech.schedule(now + RATE_TICK_MS * NS_PER_MS, RATE_TIMER, Runner::Kthread);
    }

    /// End of a hit-ratio window (sampling) or a monitoring check.
    fn on_intensity_tick(&mut self, mech: &mut dyn Mechanisms) {
        let now = mech.now();
        if self.intensity.mode() != Mode::Monitoring {
            // The window's samples count in full: process the partial batch, and
            // demote if memory pressure built up without a batch completing.
            self.process_batch(mech);
            self.maybe_demote(mech);
        }
        let w = std::mem::take(&mut self.window);
        let n = w.fast_samples + w.slow_samples;
        if n > 0 {
            self.stats.last_window_hit_ratio = w.fast_samples as f64 / n as f64;
        }
        if self.cfg.dynamic_intensity {
            let d = self.intensity.observe(&w);
            self.apply(d, mech);
        }
        let next = match self.intensity.mode() {
            Mode::Sampling { .. } => FreqTierConfig::window_ns(self.cfg.hit_ratio_window_ms),
            Mode::Monitoring => FreqTierConfig::window_ns(self.cfg.monitor_check_ms),
        };
        mech.schedule(now + next, INTENSITY_TIMER, Runner::Kthread);
    }

    fn apply(&mut self, d: Decision, mech: &mut dyn Mechanisms) {
        match d {
            Decision::Idle => self.stats.windows_idle += 1,
            Decision::Keep => {}
            Decision::Lower { .. } => self.stats.intensity_lowered += 1,
            Decision::Raise { .. } => self.stats.intensity_raised += 1,
            Decision::EnterMonitoring(r) => {
                self.stats.monitoring_entered += 1;
                match r {
                    MonitorReason::StableAtSlowest => self.stats.monitoring_by_stability += 1,
                    MonitorReason::PromotionPlateau => self.stats.monitoring_by_plateau += 1,
                    MonitorReason::EmptyDemotionScan => self.stats.monitoring_by_empty_scan += 1,
                }
                // Samples still in the batch were taken while tiering: use them.
                self.process_batch(mech);
                self.batch.take();
            }
            Decision::LeaveMonitoring => {
                // The distribution changed (§V-B2): the old counts are stale. Halve
                // them once and restart from the initial threshold (NOT IN PAPER; as
                // the authors' later artifact does).
                self.stats.monitoring_left += 1;
                self.age(mech);
                self.threshold = self.cfg.initial_hot_threshold;
            }
        }
        if !matches!(d, Decision::Idle | Decision::Keep) {
            let now = mech.now();
            let period = self.rate.retarget(now, self.target_rate());
            self.program_period(period, mech);
        }
    }
}

impl Policy for FreqTier {
    fn requirements(&self) -> Requirements {
        Requirements {
            sampling: true,
            ..Requirements::default()
        }
    }

    fn name(&self) -> &'static str {
        "freqtier"
    }

    fn init(&mut self, mech: &mut dyn Mechanisms) {
        let fast = mech.tiers()[0].capacity_pages;
        self.fast_capacity = fast;
        self.tracker = Self::build_tracker(&self.cfg, fast);
        let pct = |p: f64| (fast as f64 * p / 100.0).ceil() as u64;
        // The kernel refuses migrations into a node below its min watermark, so
        // FreqTier's trigger must sit above the kernel's watermarks: on a small
        // simulated tier they are a larger share than on the paper's 16 GB node.
        let kernel = mech.watermarks(TierId::FAST);
        self.promoting_wmark =
            pct(self.cfg.promoting_wmark_pct).max(kernel.high.floor() as u64 + 1);
        self.demoting_wmark = pct(self.cfg.demoting_wmark_pct).max(
            self.promoting_wmark + pct(self.cfg.demoting_wmark_pct - self.cfg.promoting_wmark_pct),
        );
        self.aging_every = self
            .cfg
            .aging_samples_per_fast_page
            .saturating_mul(fast)
            .max(1);
        let now = mech.now();
        self.rate = RateController::new(INITIAL_SAMPLE_PERIOD, now);
        self.program_period(INITIAL_SAMPLE_PERIOD, mech);
        mech.schedule(now + RATE_TICK_MS * NS_PER_MS, RATE_TIMER, Runner::Kthread);
        mech.schedule(
            now + FreqTierConfig::window_ns(self.cfg.hit_ratio_window_ms),
            INTENSITY_TIMER,
            Runner::Kthread,
        );
    }

    fn on_event(&mut self, event: &Event, mech: &mut dyn Mechanisms) {
        match event {
            Event::Sample(s) => self.on_sample(s, mech),
            Event::Timer { id: RATE_TIMER } => self.on_rate_tick(mech),
            Event::Timer {
                id: INTENSITY_TIMER,
            } => self.on_intensity_tick(mech),
            _ => {}
        }
    }

    fn metadata_bytes(&self) -> u64 {
        self.tracker.memory_bytes()
    }

    fn stats(&self) -> Vec<(&'static str, f64)> {
        let s = &self.stats;
        let level = match self.intensity.mode() {
            Mode::Sampling { level } => level as f64,
            Mode::Monitoring => self.cfg.sampling_levels_hz.len() as f64,
        };
        vec![
            ("samples", s.samples as f64),
            ("batches", s.batches as f64),
            ("tracker_increment_ops", s.increment_ops as f64),
            ("tracker_scan_gets", s.scan_gets as f64),
            (
                "samples_per_increment_op",
                s.batch_samples as f64 / s.increment_ops.max(1) as f64,
            ),
            ("agings", s.agings as f64),
            ("max_share_of_pages_at_15", s.max_share_at_max_count),
            ("hot_threshold", self.threshold as f64),
            ("promoted_pages", s.promoted_pages as f64),
            ("promotion_calls", s.promotion_calls as f64),
            ("promotion_nospace_pages", s.promotion_nospace_pages as f64),
            (
                "promotion_failed_other_pages",
                s.promotion_failed_other as f64,
            ),
            ("demotion_rounds", s.demotion_rounds as f64),
            ("demoted_pages", s.demoted_pages as f64),
            ("demotion_scanned_pages", s.demotion_scanned_pages as f64),
            ("empty_demotion_scans", s.empty_demotion_scans as f64),
            ("intensity_lowered", s.intensity_lowered as f64),
            ("intensity_raised", s.intensity_raised as f64),
            ("monitoring_entered", s.monitoring_entered as f64),
            ("monitoring_by_stability", s.monitoring_by_stability as f64),
            ("monitoring_by_plateau", s.monitoring_by_plateau as f64),
            (
                "monitoring_by_empty_scan",
                s.monitoring_by_empty_scan as f64,
            ),
            ("monitoring_left", s.monitoring_left as f64),
            ("windows_idle", s.windows_idle as f64),
            ("sampling_level_end", level),
            ("sample_period_end", self.programmed_period as f64),
            ("event_rate_per_s", self.rate.events_per_s().unwrap_or(0.0)),
            ("last_window_hit_ratio", s.last_window_hit_ratio),
            ("tracker_bytes", self.tracker.memory_bytes() as f64),
            (
                "batch_buffer_bytes",
                (self.cfg.batch_samples * SAMPLE_RECORD_BYTES) as f64,
            ),
            (
                "ring_buffer_bytes",
                (RING_BUFFER_BYTES
                    * self.cfg.counters_per_cpu as u64
                    * self.cfg.sampling_cpus as u64) as f64,
            ),
        ]
    }
}

impl FreqTierConfig {
    /// Sampled simulation: the batch (samples of the whole machine), the sampling and
    /// monitoring rates (FreqTier sets a target of samples per second of the whole
    /// machine and derives the period from the event rate, so a fixed Hz on a machine
    /// with 1/rate of the events would sample each page 1/rate times as often) and the
    /// demotion scan's pagemap batch scale. Per-page thresholds, the Bloom filter's
    /// shape (sized from the fast tier, which scales itself), times and percentages do
    /// not.
    pub fn scale_space(&mut self, s: SpaceScale) {
        self.batch_samples = s.count(self.batch_samples);
        for hz in &mut self.sampling_levels_hz {
            *hz = s.count(*hz);
        }
        self.sampling_levels_hz.dedup();
        self.monitor_sample_hz = s.count(self.monitor_sample_hz);
        self.pagemap_batch_pages = s.count(self.pagemap_batch_pages);
    }
}

/// The registry's view of [`FreqTierConfig`] (`PolicyConfig` in the crate root).
impl crate::RegisteredConfig for FreqTierConfig {
    fn check(&self) -> Result<(), ConfigError> {
        self.validate()
    }

    fn scale(&mut self, scale: tierkit_core::SpaceScale) {
        self.scale_space(scale)
    }

    fn build_policy(&self, _ctx: &tierkit_core::BuildContext) -> Box<dyn tierkit_core::Policy> {
        Box::new(FreqTier::new(self.clone()))
    }
}

#[cfg(test)]
mod tests;
