//! `chrono` and `chrono-semiauto`: Chrono (Qi et al., EuroSys '25) — timer-based
//! page hotness (Captured Idle Time), n-round candidate filtering, a rate-limited
//! asynchronous promotion queue, auto-tuned threshold and rate limit, and proactive
//! LRU demotion with a thrashing monitor. Built, like the paper, on Linux's
//! memory-tiering NUMA balancing.
//!
//! How it runs here (paper sections in brackets; spec `specs/chrono.md` §2):
//! - **Ticking-scan** (Loop A, §3.1.1): [`crate::numa_scan`] with
//!   [`ArmFilter::NotFast`], one pass over each process per `scan_period_ms` in
//!   `scan_step_mb` steps. Arming records the scan time in the PTE (`armed_at`).
//! - **CIT at the hinting fault** (Loop B): `CIT = fault time − armed_at`, hot iff
//!   below the threshold scaled to the page size ([`cit`], §3.4).
//! - **Candidate filter** (Loop C, §3.1.2): [`cit::CandidateFilter`]; candidates are
//!   re-armed at the start of their process's next scan step (the artifact's
//!   timing) and promoted after `filter_rounds` hot samples in a row.
//! - **Promotion queue** (Loop D): a FIFO drained by a [`Runner::Kthread`] worker
//!   every `promote_interval_ms` through a token bucket at the rate limit,
//!   [`MigrateMode::Async`].
//! - **Tuning** (Loops E1/F, §3.2): `chrono-semiauto` keeps the user's rate limit and
//!   moves the threshold every scan period by `(1 − δ + δ·r)`; `chrono` runs DCSC
//!   ([`dcsc`]): every `dcsc_interval_ms` it probes random victims of both tiers,
//!   bins their two-round CIT into per-tier heat maps and sets the rate limit from
//!   the misplacement ratio and the threshold at the overlap point.
//! - **Demotion** (Loop G, §3.3.1): [`crate::lru`]'s kswapd demotes from the fast
//!   tier's inactive list, woken when free memory is below `high`, until free memory
//!   reaches the `pro` watermark ([`demotion::pro_watermark`]).
//! - **Thrashing monitor** (Loop H, §3.3.2): demoted pages are re-armed at once and
//!   watched; [`demotion::ThrashMonitor`] halves the rate limit for the next period.
//!
//! Times are kept in ns internally (huge-page thresholds are sub-millisecond) and in
//! policy time (`sim.policy_time_scale`). Parameters, decisions and measurements:
//! `docs/policies/chrono.md`.

pub mod cit;
pub mod dcsc;
pub mod demotion;

impl ChronoConfig {
    /// Sampled simulation: the promotion rate limit (MB/s) and the samples a DCSC
    /// round needs scale. The Ticking-scan step (MB of virtual address space, which
    /// keeps its shape), every time constant, CIT thresholds (per page), percentages of
    /// memory and the heat map's buckets do not, and neither does the minimum DCSC
    /// victim sample: its victims are drawn over virtual memory, which keeps its shape,
    /// and only the draws that land on a simulated page become probes, 1/N of them, so
    /// scaling it as well shrank the probes N² times (fixed 2026-11-26).
    pub fn scale_space(&mut self, s: SpaceScale) {
        self.rate_limit_mbps = s.amount(self.rate_limit_mbps);
        self.dcsc_min_samples = s.count(self.dcsc_min_samples);
    }
}

/// The registry's view of [`ChronoConfig`] (`PolicyConfig` in the crate root).
impl crate::RegisteredConfig for ChronoConfig {
    fn check(&self) -> Result<(), ConfigError> {
        self.validate()
    }

    fn scale(&mut self, scale: tierkit_core::SpaceScale) {
        self.scale_space(scale)
    }

    fn build_policy(&self, _ctx: &tierkit_core::BuildContext) -> Box<dyn tierkit_core::Policy> {
        Box::new(Chrono::new(self.clone(), Tuning::Dcsc))
    }
}

#[cfg(test)]
mod tests;

use crate::linux_tiering::free_space_enough;
use crate::lru::{
    lists_and_kswapd, migrate_balanced, Kswapd, KswapdConfig, Lru, Victim, LRU_TIERING_REQUIREMENTS,
};
use crate::numa_scan::{ArmFilter, NumaScanConfig, NumaScanner};
use cit::{is_hot, CandidateFilter, FilterOutcome, PageSize, SemiAuto};
use dcsc::{overlap_with_free, rate_limit_bytes_per_s, HeatMaps, OverlapResult, Probes};
use demotion::{pro_watermark, ThrashEvent, ThrashMonitor};
use serde::{Deserialize, Serialize};
use std::collections::{HashSet, VecDeque};
use std::sync::{Arc, Mutex};
use tierkit_core::*;

/// The promotion worker.
const PROMOTE_TIMER: TimerId = 1;
/// A DCSC round.
const DCSC_TIMER: TimerId = 2;
/// The end of a Ticking-scan period (semi-auto update, thrashing check).
const PERIOD_TIMER: TimerId = 3;

/// CPU time of one candidate-set or queue operation (an XArray lookup/insert), ns.
const XARRAY_OP_NS: u64 = 20;
/// CPU time to pick and record one DCSC victim (random draw, VMA lookup), ns.
const VICTIM_PICK_NS: u64 = 50;

/// When round 2 (and later rounds) of the candidate filter is measured (spec §2.15
/// item 1).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Round2Timing {
    /// Re-arm candidates at their process's next scan step (the artifact).
    #[default]
    NextStep,
    /// Let the Ticking-scan's next pass over the page re-arm it (one scan period).
    NextPass,
}

/// How the threshold and rate limit are tuned (§3.2); chosen by the registered name.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Tuning {
    /// `chrono`: DCSC sets both (§3.2.2), the paper's default.
    Dcsc,
    /// `chrono-semiauto`: the user's rate limit, threshold by `(1 − δ + δ·r)` (§3.2.1).
    SemiAuto,
}

/// Chrono's parameters (Table 2 and the text), in the paper's units. Fields marked
/// "tierkit" fill a gap the paper leaves (spec §2.15); `docs/policies/chrono.md` gives
/// the reason for each.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct ChronoConfig {
    /// Scan step: memory a Ticking-scan event marks, MB (Table 2: 256). Range ≥ 1.
    pub scan_step_mb: u64,
    /// Scan period: time for the Ticking-scan to loop over a process's address space,
    /// ms (Table 2: 60 s). Also the period of the semi-auto update, the thrashing
    /// check and DCSC's rate limit. Range ≥ 1.
    pub scan_period_ms: u64,
    /// Delay before a process's first scan step, ms (Linux
    /// `numa_balancing_scan_delay_ms`, 1000; §4: scan defaults are Linux's). Range ≥ 0.
    pub scan_delay_ms: u64,
    /// Let the scan period adapt to fault locality between `scan_period_min_ms` and
    /// `scan_period_ms` as Linux does (default false: Table 2's fixed period).
    pub adaptive_scan_period: bool,
    /// Shortest scan period when `adaptive_scan_period`, ms (Linux
    /// `numa_balancing_scan_period_min_ms`, 1000). Range [1, scan_period_ms].
    pub scan_period_min_ms: u64,
    /// Candidate-filter rounds: hot CIT samples in a row before promotion (§3.1.2:
    /// 2; §5.4: 1 = Chrono-basic, 3 = Chrono-thrice). Range [1, 8].
    pub filter_rounds: u32,
    /// Initial CIT threshold, ms (Table 2: 1000, auto-tuned). Range
    /// [min_threshold_ms, max_threshold_ms].
    pub cit_threshold_ms: f64,
    /// Lower bound of the tuned threshold, ms (tierkit: the paper's 1 ms timer
    /// granularity, §3.1.1). Range > 0.
    pub min_threshold_ms: f64,
    /// Upper bound of the tuned threshold, ms (§4: CITs above 2^27 ms are not key
    /// points; 134217728). Range ≥ min_threshold_ms.
    pub max_threshold_ms: f64,
    /// Promotion rate limit, MB/s: the initial value under DCSC, the user's fixed
    /// value under `chrono-semiauto` (Table 2: 100; §5.4 Chrono-basic: 120).
    /// Range ≥ 0.
    pub rate_limit_mbps: f64,
    /// δ, the semi-auto adaptation step (Table 2: 0.5). Range (0, 1].
    pub delta_step: f64,
    /// Cap on `r = RateLimit / EnqueueRate` in the semi-auto update, and `r` when
    /// nothing was enqueued (tierkit; spec suggests 2–4): TH grows at most
    /// `1 − δ + δ·cap` per period. Range ≥ 1.
    pub semiauto_max_ratio: f64,
    /// P-victim: share of each process's virtual memory DCSC probes per round,
    /// percent (Table 2: 0.003). Range (0, 100].
    pub victim_percent: f64,
    /// Fewest MB DCSC probes per round over all processes (tierkit: the paper's
    /// 0.003% of its 256 GB, ≈ 8 MB, so small simulated footprints keep the paper's
    /// sample size; §4 scales P down on larger systems for the same reason). Range ≥ 0.
    pub min_victim_mb: f64,
    /// B-bucket: heat-map buckets, bucket i = [2^(i−1), 2^i) ms (Table 2, §4: 28).
    /// Range [2, 48].
    pub nr_buckets: u32,
    /// Interval between DCSC rounds, ms (§3.2.2: "per-second scans"). Range ≥ 1.
    pub dcsc_interval_ms: u64,
    /// DCSC rounds the heat maps aggregate (tierkit; the paper gives none). Range ≥ 1.
    pub dcsc_window_rounds: u32,
    /// Longest a probe waits for its fault in one round before it counts as idle that
    /// long, ms (tierkit; the paper's buckets reach 2^27 ms, the artifact counts an
    /// untouched page as the elapsed time). Range ≥ 1.
    pub dcsc_probe_timeout_ms: u64,
    /// Fewest samples in the heat maps before DCSC retunes (the artifact requires
    /// more than 1000 sampled pages). Range ≥ 1.
    pub dcsc_min_samples: u64,
    /// Count the fast tier's free frames above `high` as its coldest pages in the
    /// overlap, at the maps' sampling rate (tierkit; the paper is silent on a fast
    /// tier with free memory, where the plain overlap is 0 and so is DCSC's rate
    /// limit). Default true.
    pub dcsc_count_free_fast: bool,
    /// Thrashing ratio above which the next period's rate limit is halved, percent
    /// (§3.3.2: "e.g. 20%"). Range [0, 100].
    pub thrash_ratio_percent: f64,
    /// What counts as a thrashing event: `candidate` (a demoted page's first CIT is
    /// hot: round 1, the spec's reading of "marked as promotion candidate") or
    /// `promotion` (it passes the whole filter again). §2.15 item 7.
    pub thrash_event: ThrashEvent,
    /// When a candidate's next round is measured (§3.1.2 "during the next scan
    /// cycle", spec §2.15 item 1): `next-step` re-arms every candidate at the start
    /// of its process's next scan step (the artifact), `next-pass` leaves it to the
    /// Ticking-scan, which re-arms it when its next pass reaches the page, one scan
    /// period later.
    pub round2_timing: Round2Timing,
    /// "Default scan interval" of the `pro` watermark gap `2 × interval × RL`, ms
    /// (§3.3.1; tierkit reads it as Linux's default scan interval,
    /// `numa_balancing_scan_period_min_ms` = 1000). Range ≥ 0.
    pub pro_interval_ms: u64,
    /// Largest `pro − high` gap, percent of the fast tier (tierkit safeguard). Range
    /// [0, 100].
    pub pro_max_gap_percent: f64,
    /// Interval of the promotion worker, ms (tierkit). Range ≥ 1.
    pub promote_interval_ms: u64,
    /// Token-bucket depth of the promotion worker, ms of the rate limit (tierkit).
    /// Range ≥ 1.
    pub promote_burst_ms: u64,
    /// Promotion-queue capacity, ms of the rate limit; enqueues beyond it are dropped
    /// (tierkit; the paper gives no capacity). Range ≥ 1.
    pub queue_capacity_ms: u64,
    /// Write faults are hot below `write_bias × TH` (the artifact's
    /// `numa_balancing_write_bias` = 2; the paper has none: 1). Range ≥ 1.
    pub write_bias: f64,
    /// Treat every fault as hot while the fast tier has more than
    /// `WMARK_PROMO + max(1 GiB, 1/16)` free (the artifact's free-space bypass; not in
    /// the paper: false).
    pub free_space_bypass: bool,
    /// Also start demotion when an allocation leaves the fast tier below its low
    /// watermark (default false: in Linux's tiering mode first-touch allocations
    /// spill to the slow tier without waking kswapd; Chrono's promotion path wakes it).
    pub wake_demotion_on_low_watermark: bool,
    /// Pacing of the kswapd-like demotion thread (not a paper parameter).
    pub kswapd: KswapdConfig,
}

impl Default for ChronoConfig {
    fn default() -> Self {
        ChronoConfig {
            scan_step_mb: 256,
            scan_period_ms: 60_000,
            scan_delay_ms: 1000,
            adaptive_scan_period: false,
            scan_period_min_ms: 1000,
            filter_rounds: 2,
            cit_threshold_ms: 1000.0,
            min_threshold_ms: 1.0,
            max_threshold_ms: (1u64 << 27) as f64,
            rate_limit_mbps: 100.0,
            delta_step: 0.5,
            semiauto_max_ratio: 2.0,
            victim_percent: 0.003,
            min_victim_mb: 8.0,
            nr_buckets: dcsc::DEFAULT_NR_BUCKETS as u32,
            dcsc_interval_ms: 1000,
            dcsc_window_rounds: 10,
            dcsc_probe_timeout_ms: 60_000,
            dcsc_min_samples: 1000,
            dcsc_count_free_fast: true,
            thrash_ratio_percent: 20.0,
            thrash_event: ThrashEvent::Candidate,
            round2_timing: Round2Timing::NextStep,
            pro_interval_ms: 1000,
            pro_max_gap_percent: 25.0,
            promote_interval_ms: 10,
            promote_burst_ms: 1000,
            queue_capacity_ms: 10_000,
            write_bias: 1.0,
            free_space_bypass: false,
            wake_demotion_on_low_watermark: false,
            kswapd: KswapdConfig::default(),
        }
    }
}

impl ChronoConfig {
    /// Check ranges; the error names the field and its valid range.
    pub fn validate(&self) -> Result<(), ConfigError> {
        let pos = |name: &str, v: u64| {
            if v == 0 {
                Err(format!("policy.{name} must be at least 1, got 0"))
            } else {
                Ok(())
            }
        };
        let range = |name: &str, v: f64, lo: f64, hi: f64, lo_open: bool| {
            let ok = v.is_finite() && v <= hi && if lo_open { v > lo } else { v >= lo };
            if ok {
                Ok(())
            } else {
                let open = if lo_open { "(" } else { "[" };
                Err(format!(
                    "policy.{name} must be in {open}{lo}, {hi}], got {v}"
                ))
            }
        };
        pos("scan_step_mb", self.scan_step_mb)?;
        pos("scan_period_ms", self.scan_period_ms)?;
        if self.scan_period_min_ms == 0 || self.scan_period_min_ms > self.scan_period_ms {
            return Err(format!(
                "policy.scan_period_min_ms must be in [1, scan_period_ms = {}], got {}",
                self.scan_period_ms, self.scan_period_min_ms
            )
            .into());
        }
        if !(1..=8).contains(&self.filter_rounds) {
            return Err(format!(
                "policy.filter_rounds must be in [1, 8], got {}",
                self.filter_rounds
            )
            .into());
        }
        range(
            "min_threshold_ms",
            self.min_threshold_ms,
            0.0,
            f64::MAX,
            true,
        )?;
        range(
            "max_threshold_ms",
            self.max_threshold_ms,
            self.min_threshold_ms,
            f64::MAX,
            false,
        )?;
        range(
            "cit_threshold_ms",
            self.cit_threshold_ms,
            self.min_threshold_ms,
            self.max_threshold_ms,
            false,
        )?;
        range(
            "rate_limit_mbps",
            self.rate_limit_mbps,
            0.0,
            f64::MAX,
            false,
        )?;
        range("delta_step", self.delta_step, 0.0, 1.0, true)?;
        range(
            "semiauto_max_ratio",
            self.semiauto_max_ratio,
            1.0,
            f64::MAX,
            false,
        )?;
        range("victim_percent", self.victim_percent, 0.0, 100.0, true)?;
        range("min_victim_mb", self.min_victim_mb, 0.0, f64::MAX, false)?;
        if !(2..=48).contains(&self.nr_buckets) {
            return Err(format!(
                "policy.nr_buckets must be in [2, 48], got {}",
                self.nr_buckets
            )
            .into());
        }
        pos("dcsc_interval_ms", self.dcsc_interval_ms)?;
        pos("dcsc_window_rounds", self.dcsc_window_rounds as u64)?;
        pos("dcsc_probe_timeout_ms", self.dcsc_probe_timeout_ms)?;
        pos("dcsc_min_samples", self.dcsc_min_samples)?;
        range(
            "thrash_ratio_percent",
            self.thrash_ratio_percent,
            0.0,
            100.0,
            false,
        )?;
        range(
            "pro_max_gap_percent",
            self.pro_max_gap_percent,
            0.0,
            100.0,
            false,
        )?;
        pos("promote_interval_ms", self.promote_interval_ms)?;
        pos("promote_burst_ms", self.promote_burst_ms)?;
        pos("queue_capacity_ms", self.queue_capacity_ms)?;
        range("write_bias", self.write_bias, 1.0, f64::MAX, false)?;
        self.kswapd.validate().map_err(|e| e.prefixed("policy."))
    }

    /// The NUMA-balancing scanner settings of the Ticking-scan.
    fn scan_config(&self) -> NumaScanConfig {
        NumaScanConfig {
            scan_delay_ms: self.scan_delay_ms,
            scan_period_min_ms: if self.adaptive_scan_period {
                self.scan_period_min_ms
            } else {
                self.scan_period_ms
            },
            scan_period_max_ms: self.scan_period_ms,
            scan_size_mb: self.scan_step_mb,
            adaptive_period: self.adaptive_scan_period,
        }
    }
}

/// One point of the threshold / rate-limit trajectory.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct TracePoint {
    /// Policy time, s.
    pub time_s: f64,
    /// `dcsc` (a DCSC retune) or `period` (end of a scan period).
    pub kind: &'static str,
    /// CIT threshold for 4 KiB pages, ms.
    pub th_ms: f64,
    /// Rate limit in force (thrashing halving included), MB/s.
    pub rate_limit_mbps: f64,
    /// Last DCSC misplacement ratio (0 before the first).
    pub misplacement_ratio: f64,
    /// Pages promoted so far.
    pub promoted_pages: u64,
    /// Pages that passed the filter so far (enqueue attempts).
    pub enqueued_pages: u64,
}

/// One regular-path CIT sample (recorded only when asked for).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CitRecord {
    /// Process.
    pub pid: Pid,
    /// Page (huge-page head).
    pub vpn: Vpn,
    /// The CIT, ns of policy time.
    pub cit_ns: u64,
}

/// What a traced Chrono records for experiments and the documentation.
#[derive(Debug, Clone, Default)]
pub struct ChronoTrace {
    /// Threshold and rate-limit trajectory.
    pub points: Vec<TracePoint>,
    /// Regular-path CIT samples, if `record_cits`.
    pub cits: Vec<CitRecord>,
    /// Record every regular-path CIT.
    pub record_cits: bool,
}

/// A handle on a running Chrono's trace.
pub type TraceHandle = Arc<Mutex<ChronoTrace>>;

#[derive(Debug, Clone, Copy, Default)]
struct Stats {
    cold_faults: u64,
    candidate_pages: u64,
    dropped_candidate_pages: u64,
    enqueued_pages: u64,
    queue_full_pages: u64,
    promoted_pages: u64,
    promote_no_room: u64,
    migrate_failed_pages: u64,
    probe_faults: u64,
    probes_started: u64,
    probes_binned: u64,
    dcsc_rounds: u64,
    dcsc_updates: u64,
    bypass_faults: u64,
}

/// One queued promotion.
#[derive(Debug, Clone, Copy)]
struct Queued {
    pid: Pid,
    vpn: Vpn,
    pages: u64,
}

/// The policy.
pub struct Chrono {
    cfg: ChronoConfig,
    tuning: Tuning,
    scanner: NumaScanner,
    filter: CandidateFilter,
    semiauto: SemiAuto,
    /// The 4 KiB CIT threshold, ns.
    th_ns: f64,
    /// The rate limit before thrashing halving, bytes/s.
    rl_bytes_per_s: f64,
    queue: VecDeque<Queued>,
    queued: HashSet<(Pid, Vpn)>,
    queued_bytes: u64,
    tokens_bytes: f64,
    last_refill: Nanos,
    worker_armed: bool,
    probes: Probes,
    maps: HeatMaps,
    last_overlap: Option<OverlapResult>,
    thrash: ThrashMonitor,
    lru: Lru,
    kswapd: Kswapd,
    demoted: Vec<Victim>,
    /// Bytes that passed the filter in the current scan period.
    period_enqueued_bytes: u64,
    rss_pages: u64,
    last_pro_gap_pages: u64,
    stats: Stats,
    trace: Option<TraceHandle>,
}

impl Chrono {
    /// A policy with the given parameters and tuning mode.
    pub fn new(cfg: ChronoConfig, tuning: Tuning) -> Chrono {
        let semiauto = SemiAuto {
            delta: cfg.delta_step,
            max_ratio: cfg.semiauto_max_ratio,
            min_th_ns: cfg.min_threshold_ms * NS_PER_MS as f64,
            max_th_ns: cfg.max_threshold_ms * NS_PER_MS as f64,
        };
        Chrono {
            scanner: NumaScanner::new(cfg.scan_config()),
            filter: CandidateFilter::new(cfg.filter_rounds),
            semiauto,
            th_ns: cfg.cit_threshold_ms * NS_PER_MS as f64,
            rl_bytes_per_s: cfg.rate_limit_mbps * MIB as f64,
            queue: VecDeque::new(),
            queued: HashSet::new(),
            queued_bytes: 0,
            tokens_bytes: 0.0,
            last_refill: 0,
            worker_armed: false,
            probes: Probes::default(),
            maps: HeatMaps::new(cfg.nr_buckets as usize, cfg.dcsc_window_rounds as usize),
            last_overlap: None,
            thrash: ThrashMonitor::new(cfg.thrash_event),
            lru: Lru::new(2),
            kswapd: Kswapd::new(cfg.kswapd.clone(), 2),
            demoted: Vec::new(),
            period_enqueued_bytes: 0,
            rss_pages: 0,
            last_pro_gap_pages: 0,
            stats: Stats::default(),
            trace: None,
            tuning,
            cfg,
        }
    }

    /// A policy that records its trajectory (and its CIT samples if `record_cits`)
    /// into the returned handle.
    pub fn traced(cfg: ChronoConfig, tuning: Tuning, record_cits: bool) -> (Chrono, TraceHandle) {
        let handle: TraceHandle = Arc::new(Mutex::new(ChronoTrace {
            record_cits,
            ..ChronoTrace::default()
        }));
        let mut c = Chrono::new(cfg, tuning);
        c.trace = Some(handle.clone());
        (c, handle)
    }

    /// The current 4 KiB CIT threshold, ms.
    pub fn threshold_ms(&self) -> f64 {
        self.th_ns / NS_PER_MS as f64
    }

    /// The rate limit in force, bytes/s.
    fn rate_limit(&self) -> f64 {
        self.rl_bytes_per_s * self.thrash.rate_factor()
    }

    fn period_ns(&self) -> u64 {
        self.cfg.scan_period_ms * NS_PER_MS
    }

    fn record_point(&self, now: Nanos, kind: &'static str) {
        if let Some(t) = &self.trace {
            t.lock().expect("trace lock").points.push(TracePoint {
                time_s: now as f64 / NS_PER_SEC as f64,
                kind,
                th_ms: self.threshold_ms(),
                rate_limit_mbps: self.rate_limit() / MIB as f64,
                misplacement_ratio: self.last_overlap.map_or(0.0, |o| o.misplacement_ratio),
                promoted_pages: self.stats.promoted_pages,
                enqueued_pages: self.stats.enqueued_pages,
            });
        }
    }

    // ----- Loop B + C: the hinting fault --------------------------------------------

    fn on_hint_fault(&mut self, f: &HintFault, mech: &mut dyn Mechanisms) {
        let now = mech.now();
        let size = PageSize::of(f.huge);
        let pages = size.base_pages();
        let head = if f.huge { huge_head(f.vpn) } else { f.vpn };
        // DCSC's probes first: a `PG_probed` fault feeds the statistics only.
        let pf = self.probes.on_fault(f.pid, head, f.armed_at, now);
        if let Some(cit) = pf.finished_cit_ns {
            // §3.4: a huge page counts as 512 base pages (in bucket i + 9).
            self.maps.record(f.tier, cit, pages, pages);
            self.stats.probes_binned += 1;
        }
        if pf.probe_armed {
            self.stats.probe_faults += 1;
            return;
        }
        if f.tier.is_fast() || self.queued.contains(&(f.pid, head)) {
            return;
        }
        mech.charge_cpu(XARRAY_OP_NS);
        let cit = now.saturating_sub(f.armed_at);
        if let Some(t) = &self.trace {
            let mut t = t.lock().expect("trace lock");
            if t.record_cits {
                t.cits.push(CitRecord {
                    pid: f.pid,
                    vpn: head,
                    cit_ns: cit,
                });
            }
        }
        let fast = TierId::FAST;
        let hot = if self.cfg.free_space_bypass
            && free_space_enough(
                mech.free_pages(fast),
                mech.tiers()[0].capacity_pages,
                mech.watermarks(fast),
            ) {
            self.stats.bypass_faults += 1;
            true
        } else {
            is_hot(cit, self.th_ns, size, f.write, self.cfg.write_bias)
        };
        let outcome = self.filter.observe(f.pid, head, hot);
        let promote = outcome == FilterOutcome::Promote;
        let period = self.period_ns();
        self.thrash
            .on_fault(f.pid, head, hot, promote, pages, now, period);
        match outcome {
            FilterOutcome::Cold => self.stats.cold_faults += 1,
            FilterOutcome::Candidate(_) => self.stats.candidate_pages += pages,
            FilterOutcome::Dropped => self.stats.dropped_candidate_pages += pages,
            FilterOutcome::Promote => self.enqueue(f.pid, head, pages, mech),
        }
        self.scanner.record_fault(f.pid, pages, false);
    }

    // ----- Loop D: the rate-limited promotion queue ---------------------------------

    fn enqueue(&mut self, pid: Pid, vpn: Vpn, pages: u64, mech: &mut dyn Mechanisms) {
        let bytes = pages * PAGE_SIZE;
        self.stats.enqueued_pages += pages;
        self.period_enqueued_bytes += bytes;
        let cap = self.rate_limit() * self.cfg.queue_capacity_ms as f64 / 1000.0;
        if !self.queue.is_empty() && (self.queued_bytes + bytes) as f64 > cap {
            self.stats.queue_full_pages += pages;
            return;
        }
        self.queue.push_back(Queued { pid, vpn, pages });
        self.queued.insert((pid, vpn));
        self.queued_bytes += bytes;
        if !self.worker_armed {
            self.worker_armed = true;
            mech.schedule(mech.now(), PROMOTE_TIMER, Runner::Kthread);
        }
    }

    fn pop_queue(&mut self) -> Option<Queued> {
        let q = self.queue.pop_front()?;
        self.queued.remove(&(q.pid, q.vpn));
        self.queued_bytes -= q.pages * PAGE_SIZE;
        Some(q)
    }

    /// The promotion worker: refill the token bucket, promote from the head of the
    /// queue while tokens and fast-tier room last, wake demotion below `high`.
    fn promote_worker(&mut self, mech: &mut dyn Mechanisms) {
        self.worker_armed = false;
        let now = mech.now();
        let rl = self.rate_limit();
        let elapsed_s = now.saturating_sub(self.last_refill) as f64 / NS_PER_SEC as f64;
        let head_bytes = self.queue.front().map_or(0, |q| q.pages * PAGE_SIZE) as f64;
        let depth = (rl * self.cfg.promote_burst_ms as f64 / 1000.0).max(head_bytes);
        self.tokens_bytes = (self.tokens_bytes + rl * elapsed_s).min(depth);
        self.last_refill = now;
        let fast = TierId::FAST;
        let wm = mech.watermarks(fast);
        let mut ops = 0u64;
        while let Some(&q) = self.queue.front() {
            let bytes = (q.pages * PAGE_SIZE) as f64;
            if self.tokens_bytes < bytes {
                break;
            }
            ops += 1;
            match mech.page(q.pid, q.vpn) {
                Some(p) if !p.tier.is_fast() => {}
                _ => {
                    self.pop_queue();
                    continue;
                }
            }
            if !migrate_balanced(mech.free_pages(fast), wm, q.pages) {
                self.stats.promote_no_room += 1;
                break;
            }
            match mech.migrate(q.pid, q.vpn, fast, MigrateMode::Async) {
                Ok(()) => {
                    self.pop_queue();
                    self.tokens_bytes -= bytes;
                    self.stats.promoted_pages += q.pages;
                    self.thrash.on_promoted(q.pages);
                    self.lru.on_migrated(q.pid, q.vpn, fast, q.pages);
                }
                Err(MigrateError::NoSpace) => {
                    self.stats.promote_no_room += 1;
                    break;
                }
                Err(_) => {
                    self.pop_queue();
                    self.stats.migrate_failed_pages += q.pages;
                }
            }
        }
        mech.charge_cpu(ops * XARRAY_OP_NS);
        // §3.3.1: demotion starts when free memory falls below the high watermark —
        // here: when the next promotion would not fit above it.
        let next = self.queue.front().map_or(1, |q| q.pages);
        if !migrate_balanced(mech.free_pages(fast), wm, next) {
            self.kswapd.wake(fast, mech);
        }
        if !self.queue.is_empty() {
            self.worker_armed = true;
            let next = now + self.cfg.promote_interval_ms * NS_PER_MS;
            mech.schedule(next, PROMOTE_TIMER, Runner::Kthread);
        }
    }

    // ----- Loop G + H: demotion and the thrashing monitor ---------------------------

    fn run_kswapd(&mut self, tier: TierId, mech: &mut dyn Mechanisms) {
        let wm = mech.watermarks(tier);
        let cap =
            mech.tiers()[tier.index()].capacity_pages as f64 * self.cfg.pro_max_gap_percent / 100.0;
        // The gap always leaves room for the promotion at the head of the queue: a
        // 2 MiB page needs 512 free pages above `high` even when `2 × interval × RL`
        // is smaller (tierkit; the paper sizes the gap for base pages).
        let head = self.queue.front().map_or(0, |q| q.pages);
        let target = pro_watermark(wm, self.cfg.pro_interval_ms, self.rate_limit(), cap as u64)
            .max(wm.high + head as f64);
        self.last_pro_gap_pages = (target - wm.high).round() as u64;
        self.kswapd
            .run(tier, target, &mut self.lru, mech, &mut self.demoted);
        let now = mech.now();
        for v in self.demoted.drain(..) {
            // §3.3.2: flag `demoted`, make it inaccessible at once, and let the
            // demotion time stand in for the scan time.
            mech.arm_hint_fault(v.pid, v.vpn);
            self.thrash.on_demoted(v.pid, v.vpn, now);
            self.filter.remove(v.pid, v.vpn);
        }
    }

    // ----- Loop A: one Ticking-scan step ---------------------------------------------

    fn scan_step(&mut self, pid: Pid, mech: &mut dyn Mechanisms) {
        // The artifact re-arms the process's candidates at the start of every scan
        // event: their next fault is the next round (§3.1.2 "next scan cycle").
        // With `next-pass` the scan below re-arms them when its pass comes round.
        if self.cfg.round2_timing == Round2Timing::NextPass {
            self.scanner.step(pid, mech, ArmFilter::NotFast);
            return;
        }
        let cands = self.filter.candidates(pid);
        for vpn in &cands {
            if !mech.arm_hint_fault(pid, *vpn) {
                self.filter.remove(pid, *vpn);
            }
        }
        mech.charge_cpu(cands.len() as u64 * XARRAY_OP_NS);
        self.scanner.step(pid, mech, ArmFilter::NotFast);
    }

    // ----- Loop F: a DCSC round -------------------------------------------------------

    fn dcsc_round(&mut self, mech: &mut dyn Mechanisms) {
        let now = mech.now();
        self.stats.dcsc_rounds += 1;
        self.maps.next_round();
        let mut finished = Vec::new();
        let timeout = self.cfg.dcsc_probe_timeout_ms * NS_PER_MS;
        self.probes.round(
            now,
            timeout,
            &mut |pid, vpn| mech.arm_hint_fault(pid, vpn),
            &mut |pid, vpn, cit, n| finished.push((pid, vpn, cit, n)),
        );
        for (pid, vpn, cit, n) in finished {
            if let Some(p) = mech.page(pid, vpn) {
                self.maps.record(p.tier, cit, n, n);
                self.stats.probes_binned += 1;
            }
        }
        self.refresh_rss(mech);
        let fast = TierId::FAST;
        let free = Watermarks::whole_pages_above(mech.free_pages(fast), mech.watermarks(fast).high);
        self.dcsc_retune(now, free);
        self.sample_victims(mech);
        mech.schedule(
            now + self.cfg.dcsc_interval_ms * NS_PER_MS,
            DCSC_TIMER,
            Runner::Kthread,
        );
    }

    fn refresh_rss(&mut self, mech: &mut dyn Mechanisms) {
        self.rss_pages = mech.processes().iter().map(|&p| mech.rss_pages(p)).sum();
    }

    /// §3.2.2: rate limit = misplacement ratio × memory in use / scan period;
    /// threshold at the overlap point.
    fn dcsc_retune(&mut self, now: Nanos, free_fast_pages: u64) {
        let (slow, fast) = self.maps.aggregate();
        let samples = slow.total() + fast.total();
        if samples < self.cfg.dcsc_min_samples {
            return;
        }
        // Free fast-tier frames above `high` are the coldest "pages" of the fast tier
        // (tierkit, see docs): counted at the maps' sampling rate, so an empty or
        // partly free fast tier does not read as "nothing misplaced" (RL = 0).
        let free_samples = if self.cfg.dcsc_count_free_fast {
            (free_fast_pages as f64 * samples as f64 / self.rss_pages.max(1) as f64).round() as u64
        } else {
            0
        };
        let r = overlap_with_free(&slow, &fast, free_samples);
        if let Some(th) = r.threshold_ns {
            self.th_ns = th.clamp(self.semiauto.min_th_ns, self.semiauto.max_th_ns);
        }
        self.rl_bytes_per_s = rate_limit_bytes_per_s(
            r.misplacement_ratio,
            self.rss_pages * PAGE_SIZE,
            self.cfg.scan_period_ms,
        );
        self.last_overlap = Some(r);
        self.stats.dcsc_updates += 1;
        self.record_point(now, "dcsc");
    }

    /// Probe P% of each process's virtual memory (at least `min_victim_mb` in all),
    /// drawn uniformly over its VMAs, in both tiers. The share is memory: a drawn huge
    /// page uses 512 pages of it (at least one huge page per process and round) and
    /// counts as 512 base pages (§3.4).
    fn sample_victims(&mut self, mech: &mut dyn Mechanisms) {
        let now = mech.now();
        let procs: Vec<(Pid, Vec<Vma>, u64)> = mech
            .processes()
            .into_iter()
            .map(|p| {
                let vmas = mech.vmas(p);
                let vm = vmas.iter().map(|v| v.nr_pages).sum();
                (p, vmas, vm)
            })
            .collect();
        let total_vm: u64 = procs.iter().map(|p| p.2).sum();
        if total_vm == 0 {
            return;
        }
        let by_share = self.cfg.victim_percent / 100.0 * total_vm as f64;
        let floor = self.cfg.min_victim_mb * MIB as f64 / PAGE_SIZE as f64;
        let victims = by_share.max(floor).min(total_vm as f64);
        let mut picked = 0u64;
        for (pid, vmas, vm) in procs {
            if vm == 0 {
                continue;
            }
            let n = (victims * vm as f64 / total_vm as f64).ceil() as u64;
            let mut budget = n;
            for _ in 0..n {
                if budget == 0 {
                    break;
                }
                let mut off = mech.random() % vm;
                let Some(vma) = vmas.iter().find(|v| {
                    let inside = off < v.nr_pages;
                    if !inside {
                        off -= v.nr_pages;
                    }
                    inside
                }) else {
                    continue;
                };
                let vpn = vma.start_vpn + off;
                let Some(info) = mech.page(pid, vpn) else {
                    continue;
                };
                let head = if info.huge { huge_head(vpn) } else { vpn };
                if self.probes.contains(pid, head) {
                    continue;
                }
                mech.arm_hint_fault(pid, head);
                let unit = PageSize::of(info.huge).base_pages();
                self.probes.start(pid, head, unit, now);
                budget = budget.saturating_sub(unit);
                picked += 1;
            }
        }
        self.stats.probes_started += picked;
        mech.charge_cpu(picked * VICTIM_PICK_NS);
    }

    // ----- Loop E1 + H: the end of a scan period -------------------------------------

    fn end_period(&mut self, mech: &mut dyn Mechanisms) {
        let now = mech.now();
        let rl_in_period = self.rate_limit();
        if self.tuning == Tuning::SemiAuto {
            let er = self.period_enqueued_bytes as f64 * 1000.0 / self.cfg.scan_period_ms as f64;
            self.th_ns = self.semiauto.update(self.th_ns, rl_in_period, er);
        }
        self.thrash
            .end_period(self.cfg.thrash_ratio_percent / 100.0);
        self.thrash.expire(now, self.period_ns());
        self.period_enqueued_bytes = 0;
        self.refresh_rss(mech);
        self.record_point(now, "period");
        mech.schedule(now + self.period_ns(), PERIOD_TIMER, Runner::Kthread);
    }
}

impl Policy for Chrono {
    fn name(&self) -> &'static str {
        match self.tuning {
            Tuning::Dcsc => "chrono",
            Tuning::SemiAuto => "chrono-semiauto",
        }
    }

    fn requirements(&self) -> Requirements {
        LRU_TIERING_REQUIREMENTS
    }

    fn init(&mut self, mech: &mut dyn Mechanisms) {
        (self.lru, self.kswapd) = lists_and_kswapd(&self.cfg.kswapd, mech);
        self.scanner.start_all(mech);
        let now = mech.now();
        self.last_refill = now;
        mech.schedule(now + self.period_ns(), PERIOD_TIMER, Runner::Kthread);
        if self.tuning == Tuning::Dcsc {
            mech.schedule(
                now + self.cfg.dcsc_interval_ms * NS_PER_MS,
                DCSC_TIMER,
                Runner::Kthread,
            );
        }
        self.record_point(now, "period");
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
            } => {
                self.lru.remove_range(pid, start_vpn, nr_pages);
                self.filter.remove_range(pid, start_vpn, nr_pages);
                self.probes.remove_range(pid, start_vpn, nr_pages);
                self.thrash.forget_range(pid, start_vpn, nr_pages);
            }
            Event::LowWatermark { tier } => {
                if self.cfg.wake_demotion_on_low_watermark {
                    self.kswapd.wake(tier, mech);
                }
            }
            Event::Timer { id } => {
                if let Some(tier) = self.kswapd.owns(id) {
                    self.run_kswapd(tier, mech);
                } else if let Some(pid) = self.scanner.owns(id) {
                    self.scan_step(pid, mech);
                } else {
                    match id {
                        PROMOTE_TIMER => self.promote_worker(mech),
                        DCSC_TIMER => self.dcsc_round(mech),
                        PERIOD_TIMER => self.end_period(mech),
                        _ => {}
                    }
                }
            }
            Event::Mmap { .. } | Event::Sample(_) => {}
        }
    }

    /// The CIT timestamp, 4 B per resident page (§3.1.1); the candidate XArrays (16 B
    /// per entry, XArray nodes of 64 slots plus overhead); DCSC's probe records (40 B
    /// each) and heat maps; the promotion queue (24 B per entry). The LRU links and the
    /// `demoted`/`PG_probed` flags live in `struct page`, and a demoted page's time
    /// replaces its scan time (§3.3.2): nothing more.
    fn metadata_bytes(&self) -> u64 {
        4 * self.rss_pages
            + 16 * self.filter.len() as u64
            + 40 * self.probes.len() as u64
            + self.maps.bytes()
            + 24 * self.queue.len() as u64
    }

    fn stats(&self) -> Vec<(&'static str, f64)> {
        let k = self.kswapd.stats();
        let s = &self.stats;
        vec![
            ("cit_threshold_ms", self.threshold_ms()),
            ("rate_limit_mbps", self.rate_limit() / MIB as f64),
            ("filter_rounds", self.cfg.filter_rounds as f64),
            ("cold_faults", s.cold_faults as f64),
            ("candidate_pages", s.candidate_pages as f64),
            ("dropped_candidate_pages", s.dropped_candidate_pages as f64),
            ("candidates_now", self.filter.len() as f64),
            ("enqueued_pages", s.enqueued_pages as f64),
            ("queue_full_pages", s.queue_full_pages as f64),
            ("promoted_pages", s.promoted_pages as f64),
            ("promote_no_room", s.promote_no_room as f64),
            ("migrate_failed_pages", s.migrate_failed_pages as f64),
            ("free_space_bypass_faults", s.bypass_faults as f64),
            ("dcsc_rounds", s.dcsc_rounds as f64),
            ("dcsc_updates", s.dcsc_updates as f64),
            ("dcsc_probes_started", s.probes_started as f64),
            ("dcsc_probes_binned", s.probes_binned as f64),
            ("dcsc_probe_faults", s.probe_faults as f64),
            (
                "dcsc_misplacement_ratio",
                self.last_overlap.map_or(0.0, |o| o.misplacement_ratio),
            ),
            ("thrash_event_pages", self.thrash.nr_events() as f64),
            ("rate_limit_halvings", self.thrash.nr_halvings() as f64),
            ("pro_gap_pages", self.last_pro_gap_pages as f64),
            ("kswapd_wakeups", k.nr_wakeups as f64),
            ("kswapd_demoted_pages", k.nr_demoted_pages as f64),
            ("kswapd_scanned", k.nr_scanned as f64),
            ("kswapd_activated", k.nr_activated as f64),
            (
                "fast_inactive_pages",
                self.lru
                    .nr_pages(TierId::FAST, crate::lru::LruList::Inactive) as f64,
            ),
            (
                "fast_active_pages",
                self.lru.nr_pages(TierId::FAST, crate::lru::LruList::Active) as f64,
            ),
            ("scan_passes_pid0", self.scanner.passes(Pid(0)) as f64),
        ]
    }
}

/// A deterministic generator for the statistical unit tests (splitmix64).
#[cfg(test)]
pub(crate) mod test_rng {
    /// splitmix64 state.
    pub struct Rng(u64);

    impl Rng {
        /// Seeded.
        pub fn new(seed: u64) -> Rng {
            Rng(seed)
        }

        /// Next 64 bits.
        pub fn next_u64(&mut self) -> u64 {
            self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
            let mut z = self.0;
            z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
            z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
            z ^ (z >> 31)
        }

        /// Uniform in [0, 1).
        pub fn unit(&mut self) -> f64 {
            (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64
        }
    }
}
