//! FreqTier's parameters (`policy.*`), in the paper's units, and their checks.

use super::*;

/// Which frequency tracker counts samples (`policy.tracker`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum TrackerKind {
    /// Counting Bloom filter with `k` independent hashes over one array (§V-A).
    Cbf,
    /// Blocked counting Bloom filter: a key's counters in one 64-byte line (§V-C-b).
    BlockedCbf,
    /// Exact hash table of per-page counts, for the accuracy comparison (§VII-E).
    Exact,
}

/// `freqtier` parameters, in the paper's units. Where the paper is silent the default
/// is marked NOT IN PAPER and the reason is in `docs/policies/freqtier.md`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct FreqTierConfig {
    /// Frequency tracker: `cbf`, `blocked-cbf` (default: the paper's optimised
    /// implementation, §V-C-b) or `exact` (hash table, §VII-E comparison).
    pub tracker: TrackerKind,
    /// Hash functions per page `k`, count (Fig. 5 and §V-C-b use 3). Range 1–8.
    pub cbf_hashes: u32,
    /// Target false-positive rate the filter is sized for, probability (§V-A: 10⁻³).
    /// Range (0, 0.5].
    pub cbf_false_positive_rate: f64,
    /// Filter size, KiB; 0 sizes it for every fast-tier page at
    /// `cbf_false_positive_rate` (§V-A default). Set it for the §VII-E1 size sweep.
    /// Range 0 or ≥ 1.
    pub cbf_size_kib: u64,
    /// Raise each page's count once per batch by its number of samples instead of
    /// once per sample (§V-C-c increment coalescing). Same state either way.
    pub coalesce_increments: bool,
    /// Halve every counter after this many samples per fast-tier page have been
    /// counted, samples per page (NOT IN PAPER, §V-A says "periodically": TinyLFU's
    /// reset after a sample of W = 10 × capacity additions). Range ≥ 1.
    pub aging_samples_per_fast_page: u64,
    /// Hot threshold at start and after monitoring, sampled accesses (§V-C-a: 5).
    /// Range `min_hot_threshold`–15.
    pub initial_hot_threshold: u8,
    /// Lowest hot threshold the adaptation may reach, sampled accesses (NOT IN PAPER;
    /// 2 so one sample — recency — never promotes). Range 1–15.
    pub min_hot_threshold: u8,
    /// Adapt the hot threshold so hot pages ≈ fast-tier capacity (§V-C-a).
    pub dynamic_hot_threshold: bool,
    /// Samples per promotion batch, samples (§IV-C: 100 000). Range ≥ 1.
    pub batch_samples: u64,
    /// Sampling rates, fastest first, Hz per hardware counter per CPU (§V-B2: 100 000,
    /// 10 000, 1 000). Non-empty, strictly decreasing, each ≥ 1.
    pub sampling_levels_hz: Vec<u64>,
    /// Hardware counters sampled per CPU, count (§VII-C: 2, local DRAM and CXL). The
    /// machine has one load-miss counter covering both tiers; it is sampled at this
    /// many times the level's rate. Range 1–8.
    pub counters_per_cpu: u32,
    /// Application CPUs the per-CPU rate applies to, CPUs (the paper's workloads use
    /// 16, §VI-C; tierkit workloads default to 1 thread — set it to the workload's
    /// `nr_threads`). A machine fact the policy cannot query. Range 1–1024.
    pub sampling_cpus: u32,
    /// Rate at which monitoring mode samples only to count fast and slow accesses,
    /// Hz per counter per CPU (NOT IN PAPER: perf-stat counts every event for free;
    /// the simulator can only sample, so counting is sampling at the slowest level's
    /// rate, whose cost is negligible). Range ≥ 1.
    pub monitor_sample_hz: u64,
    /// Adapt the sampling rate and enter monitoring mode (§V-B2); off keeps the top
    /// rate for the whole run (the spec §7.14 "adaptation OFF" comparison).
    pub dynamic_intensity: bool,
    /// Hit-ratio window while sampling, ms (§V-B2: one minute). Range ≥ 1.
    pub hit_ratio_window_ms: u64,
    /// Hit ratios of consecutive windows within this many percentage points are
    /// stable, % points (§V-B2: 0.5; absolute, spec §2.12). Range 0–100.
    pub hit_ratio_tolerance_pct: f64,
    /// Interval of the hit-ratio check in monitoring mode, ms (NOT IN PAPER; 10 s
    /// reproduces "detected within 30 seconds", §VII-D). Range ≥ 1.
    pub monitor_check_ms: u64,
    /// Widen the stability tolerance to this many standard errors of the difference
    /// of two sampled hit ratios when that exceeds it, σ (NOT IN PAPER: the paper's
    /// counters are exact; sampled ratios are not). 0 disables. Range 0–10.
    pub stability_noise_z: f64,
    /// Free fast memory below which demotion starts (`PROMOTING_WMARK`), % of the fast
    /// tier (NOT IN PAPER as a number; 1.25%–5% reproduces the ≈160k pages per round
    /// at 16 GB of §V-B1). Range 0 to `demoting_wmark_pct`.
    pub promoting_wmark_pct: f64,
    /// Free fast memory demotion restores (`DEMOTING_WMARK`), % of the fast tier.
    /// Range above `promoting_wmark_pct`, at most 50.
    pub demoting_wmark_pct: f64,
    /// Pages whose placement one pagemap read returns in the demotion scan, pages
    /// (§V-B1 reads "a batch of contiguous pages"; NOT IN PAPER as a number: 1024 as
    /// the authors' later artifact). Range ≥ 1.
    pub pagemap_batch_pages: u64,
}

impl Default for FreqTierConfig {
    fn default() -> Self {
        FreqTierConfig {
            tracker: TrackerKind::BlockedCbf,
            cbf_hashes: 3,
            cbf_false_positive_rate: 1e-3,
            cbf_size_kib: 0,
            coalesce_increments: true,
            aging_samples_per_fast_page: 10,
            initial_hot_threshold: 5,
            min_hot_threshold: 2,
            dynamic_hot_threshold: true,
            batch_samples: 100_000,
            sampling_levels_hz: vec![100_000, 10_000, 1_000],
            counters_per_cpu: 2,
            sampling_cpus: 1,
            monitor_sample_hz: 1_000,
            dynamic_intensity: true,
            hit_ratio_window_ms: 60_000,
            hit_ratio_tolerance_pct: 0.5,
            monitor_check_ms: 10_000,
            stability_noise_z: 3.0,
            promoting_wmark_pct: 1.25,
            demoting_wmark_pct: 5.0,
            pagemap_batch_pages: 1024,
        }
    }
}

impl FreqTierConfig {
    /// Check ranges; the error names the field and its valid range.
    pub fn validate(&self) -> Result<(), ConfigError> {
        let range = |name: &str, v: f64, lo: f64, hi: f64| {
            if v.is_finite() && v >= lo && v <= hi {
                Ok(())
            } else {
                Err(ConfigError::out_of_range(
                    format!("policy.{name}"),
                    lo,
                    hi,
                    v,
                ))
            }
        };
        range("cbf_hashes", self.cbf_hashes as f64, 1.0, 8.0)?;
        if !(self.cbf_false_positive_rate > 0.0 && self.cbf_false_positive_rate <= 0.5) {
            return Err(format!(
                "policy.cbf_false_positive_rate must be in (0, 0.5], got {}",
                self.cbf_false_positive_rate
            )
            .into());
        }
        range(
            "aging_samples_per_fast_page",
            self.aging_samples_per_fast_page as f64,
            1.0,
            1e12,
        )?;
        range(
            "min_hot_threshold",
            self.min_hot_threshold as f64,
            1.0,
            MAX_COUNT as f64,
        )?;
        range(
            "initial_hot_threshold",
            self.initial_hot_threshold as f64,
            self.min_hot_threshold as f64,
            MAX_COUNT as f64,
        )?;
        range("batch_samples", self.batch_samples as f64, 1.0, 1e12)?;
        if self.sampling_levels_hz.is_empty()
            || self.sampling_levels_hz.contains(&0)
            || self.sampling_levels_hz.windows(2).any(|w| w[0] <= w[1])
        {
            return Err(format!(
                "policy.sampling_levels_hz must be a non-empty, strictly decreasing list of rates ≥ 1 Hz, got {:?}",
                self.sampling_levels_hz
            ).into());
        }
        range("counters_per_cpu", self.counters_per_cpu as f64, 1.0, 8.0)?;
        range("sampling_cpus", self.sampling_cpus as f64, 1.0, 1024.0)?;
        range("monitor_sample_hz", self.monitor_sample_hz as f64, 1.0, 1e9)?;
        range(
            "hit_ratio_window_ms",
            self.hit_ratio_window_ms as f64,
            1.0,
            1e12,
        )?;
        range(
            "hit_ratio_tolerance_pct",
            self.hit_ratio_tolerance_pct,
            0.0,
            100.0,
        )?;
        range("monitor_check_ms", self.monitor_check_ms as f64, 1.0, 1e12)?;
        range("stability_noise_z", self.stability_noise_z, 0.0, 10.0)?;
        range(
            "promoting_wmark_pct",
            self.promoting_wmark_pct,
            0.0,
            self.demoting_wmark_pct,
        )?;
        if !(self.demoting_wmark_pct > self.promoting_wmark_pct && self.demoting_wmark_pct <= 50.0)
        {
            return Err(format!(
                "policy.demoting_wmark_pct must be above promoting_wmark_pct ({}) and at most 50, got {}",
                self.promoting_wmark_pct, self.demoting_wmark_pct
            ).into());
        }
        range(
            "pagemap_batch_pages",
            self.pagemap_batch_pages as f64,
            1.0,
            1e12,
        )?;
        Ok(())
    }

    /// Samples per second the machine should deliver at `hz` per counter per CPU.
    pub(super) fn machine_rate(&self, hz: u64) -> f64 {
        hz as f64 * self.counters_per_cpu as f64 * self.sampling_cpus as f64
    }

    /// A window length in ms as policy time, ns.
    pub(super) fn window_ns(ms: u64) -> Nanos {
        ms * NS_PER_MS
    }
}
