//! Metrics: running counters, a per-interval time series, and the run summary.
//!
//! Output shapes:
//! - `timeseries.csv`: one row per interval, columns as [`IntervalRow`]'s fields.
//! - `summary.json`: a [`Summary`].

use serde::{Deserialize, Serialize};

/// Counters the machine keeps for the whole run. All page counts are in 4 KiB pages.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct Counters {
    /// Accesses issued by the workload.
    pub accesses: u64,
    /// Accesses served by the LLC.
    pub llc_hits: u64,
    /// Accesses that reached memory, per tier.
    pub mem_accesses_by_tier: Vec<u64>,
    /// Pages moved to a faster tier.
    pub promoted_pages: u64,
    /// Pages moved to a slower tier.
    pub demoted_pages: u64,
    /// Bytes copied by migrations (promotions, demotions, exchanges, collapses).
    pub migrated_bytes: u64,
    /// Migration requests refused (no space, not present, already there).
    pub failed_migrations: u64,
    /// Promoted pages that had been demoted within the ping-pong window.
    pub pingpong_pages: u64,
    /// Hinting faults delivered.
    pub hint_faults: u64,
    /// Samples delivered.
    pub samples: u64,
    /// Accessed-bit test-and-clears.
    pub young_tests: u64,
    /// PTEs armed for hinting faults.
    pub armed_ptes: u64,
    /// First-touch page allocations (4 KiB units).
    pub allocated_pages: u64,
    /// Huge pages split.
    pub huge_splits: u64,
    /// Huge pages collapsed.
    pub huge_collapses: u64,
    /// Tiering CPU time, ns (kernel/daemon threads and task-context tiering work).
    pub tiering_cpu_ns: f64,
    /// Stall time the application paid for tiering (faults, sync migrations, task
    /// work, shared-CPU tiering threads), ns summed over threads.
    pub app_tiering_stall_ns: f64,
}

impl Counters {
    /// The counts of the full machine a sampled run stands for: every count multiplied
    /// by `weight` (events per simulated event, `1 / sample_rate`) and rounded. Times
    /// are left alone: the machine already charges them at full weight.
    pub fn scaled(&self, weight: f64) -> Counters {
        if weight == 1.0 {
            return self.clone();
        }
        let w = |n: u64| (n as f64 * weight).round() as u64;
        Counters {
            accesses: w(self.accesses),
            llc_hits: w(self.llc_hits),
            mem_accesses_by_tier: self.mem_accesses_by_tier.iter().map(|&n| w(n)).collect(),
            promoted_pages: w(self.promoted_pages),
            demoted_pages: w(self.demoted_pages),
            migrated_bytes: w(self.migrated_bytes),
            failed_migrations: w(self.failed_migrations),
            pingpong_pages: w(self.pingpong_pages),
            hint_faults: w(self.hint_faults),
            samples: w(self.samples),
            young_tests: w(self.young_tests),
            armed_ptes: w(self.armed_ptes),
            allocated_pages: w(self.allocated_pages),
            huge_splits: w(self.huge_splits),
            huge_collapses: w(self.huge_collapses),
            tiering_cpu_ns: self.tiering_cpu_ns,
            app_tiering_stall_ns: self.app_tiering_stall_ns,
        }
    }

    /// Memory accesses (LLC misses) over all tiers.
    pub fn mem_accesses(&self) -> u64 {
        self.mem_accesses_by_tier.iter().sum()
    }

    /// Share of memory accesses served by the fast tier (1.0 when there were none).
    pub fn fast_access_ratio(&self) -> f64 {
        ratio(
            self.mem_accesses_by_tier.first().copied().unwrap_or(0),
            self.mem_accesses(),
        )
    }
}

fn ratio(a: u64, b: u64) -> f64 {
    if b == 0 {
        1.0
    } else {
        a as f64 / b as f64
    }
}

/// One row of the time series: what happened during one interval.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct IntervalRow {
    /// End of the interval, simulated seconds.
    pub time_s: f64,
    /// Accesses in the interval.
    pub accesses: u64,
    /// Memory accesses in the interval.
    pub mem_accesses: u64,
    /// Fast-tier share of the interval's memory accesses.
    pub fast_access_ratio: f64,
    /// Pages promoted in the interval.
    pub promoted_pages: u64,
    /// Pages demoted in the interval.
    pub demoted_pages: u64,
    /// Bytes migrated in the interval.
    pub migrated_bytes: u64,
    /// Hinting faults in the interval.
    pub hint_faults: u64,
    /// Samples in the interval.
    pub samples: u64,
    /// Fast-tier pages in use at the end of the interval.
    pub fast_used_pages: u64,
    /// Tiering CPU time in the interval, ms.
    pub tiering_cpu_ms: f64,
}

/// The per-interval recorder.
#[derive(Debug, Default)]
pub struct TimeSeries {
    /// Rows so far.
    pub rows: Vec<IntervalRow>,
    last: Counters,
}

impl TimeSeries {
    /// Close an interval ending at `time_s` with the current counters.
    pub fn record(&mut self, time_s: f64, now: &Counters, fast_used_pages: u64) {
        let d_mem = now.mem_accesses() - self.last.mem_accesses();
        let d_fast = now.mem_accesses_by_tier[0]
            - self.last.mem_accesses_by_tier.first().copied().unwrap_or(0);
        self.rows.push(IntervalRow {
            time_s,
            accesses: now.accesses - self.last.accesses,
            mem_accesses: d_mem,
            fast_access_ratio: ratio(d_fast, d_mem),
            promoted_pages: now.promoted_pages - self.last.promoted_pages,
            demoted_pages: now.demoted_pages - self.last.demoted_pages,
            migrated_bytes: now.migrated_bytes - self.last.migrated_bytes,
            hint_faults: now.hint_faults - self.last.hint_faults,
            samples: now.samples - self.last.samples,
            fast_used_pages,
            tiering_cpu_ms: (now.tiering_cpu_ns - self.last.tiering_cpu_ns) / 1e6,
        });
        self.last = now.clone();
    }

    /// The series as CSV text with a header line.
    pub fn to_csv(&self) -> String {
        let mut s = String::from(
            "time_s,accesses,mem_accesses,fast_access_ratio,promoted_pages,demoted_pages,migrated_bytes,hint_faults,samples,fast_used_pages,tiering_cpu_ms\n",
        );
        for r in &self.rows {
            s.push_str(&format!(
                "{:.3},{},{},{:.6},{},{},{},{},{},{},{:.6}\n",
                r.time_s,
                r.accesses,
                r.mem_accesses,
                r.fast_access_ratio,
                r.promoted_pages,
                r.demoted_pages,
                r.migrated_bytes,
                r.hint_faults,
                r.samples,
                r.fast_used_pages,
                r.tiering_cpu_ms
            ));
        }
        s
    }
}

/// Per-tier facts in the summary.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct TierSummary {
    /// Tier name.
    pub name: String,
    /// Capacity, pages.
    pub capacity_pages: u64,
    /// Pages in use at the end.
    pub used_pages: u64,
    /// Largest number of pages in use at any interval end.
    pub peak_used_pages: u64,
    /// Memory accesses served.
    pub mem_accesses: u64,
}

/// Everything a run reports (`summary.json`). Deterministic: no wall-clock values.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Summary {
    /// Policy name.
    pub policy: String,
    /// Workload name.
    pub workload: String,
    /// Machine preset (or `custom`).
    pub machine: String,
    /// Fast-tier sizing as given (`1:8`, `512MiB`).
    pub fast: String,
    /// Run seed.
    pub seed: u64,
    /// `sim.policy_time_scale`: 1.0 unless policy time constants were shortened.
    pub policy_time_scale: f64,
    /// `sim.sample_rate` (`1` = exact, `1/64`...). Every count below is of the full
    /// machine: the sampled run's counts times `1 / sample_rate`.
    pub sample_rate: String,
    /// `"mapping"` when a sampled run drew its strata by mapping (`sim.sample_strata`);
    /// absent for address strata and exact runs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sample_strata: Option<String>,
    /// How many pages a sampled run simulated in time rather than in space
    /// (`sim.time_sampled_weight`, `docs/sampling.md`); absent when none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub time_sampled_pages: Option<u64>,
    /// What a sampled run did with its dropped accesses' compute
    /// (`sim.sampled_compute`): `"carried"` (the default) or `"kept"`; absent in an
    /// exact run.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sampled_compute: Option<tierkit_core::SampledCompute>,
    /// Simulated runtime (the slowest thread's clock), seconds.
    pub sim_seconds: f64,
    /// Accesses issued.
    pub accesses: u64,
    /// Accesses per simulated second.
    pub throughput_accesses_per_s: f64,
    /// Memory accesses (LLC misses).
    pub mem_accesses: u64,
    /// Fast-tier share of memory accesses.
    pub fast_access_ratio: f64,
    /// Pages promoted.
    pub promoted_pages: u64,
    /// Pages demoted.
    pub demoted_pages: u64,
    /// Bytes migrated.
    pub migrated_bytes: u64,
    /// Migration bytes as a share of all memory traffic (64 B per memory access plus
    /// the migrated bytes).
    pub migration_traffic_share: f64,
    /// Promotions of pages demoted within the ping-pong window.
    pub pingpong_pages: u64,
    /// Refused migrations.
    pub failed_migrations: u64,
    /// Hinting faults.
    pub hint_faults: u64,
    /// Samples.
    pub samples: u64,
    /// Tiering CPU, seconds.
    pub tiering_cpu_seconds: f64,
    /// Application stall caused by tiering, seconds summed over threads.
    pub app_tiering_stall_seconds: f64,
    /// Policy metadata, bytes.
    pub policy_metadata_bytes: u64,
    /// Workload footprint, bytes.
    pub footprint_bytes: u64,
    /// Peak fast-tier pages in use (at interval ends).
    pub fast_peak_used_pages: u64,
    /// Mean fast-tier pages in use over the intervals.
    pub fast_mean_used_pages: f64,
    /// Per tier.
    pub tiers: Vec<TierSummary>,
    /// All machine counters.
    pub counters: Counters,
    /// Mean precision of the fast tier's contents against each epoch's hot set.
    pub placement_precision: f64,
    /// Mean recall of each epoch's hot set in the fast tier.
    pub placement_recall: f64,
    /// Mean F1 of the two.
    pub placement_f1: f64,
    /// Policy-specific counters.
    pub policy_stats: Vec<(String, f64)>,
    /// Mappings of a sampled run too small to be sampled faithfully (absent when none,
    /// and always in exact runs).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub coarse_sampling: Option<CoarseSampling>,
    /// Each process's resident and fast-tier pages at the end of the run, for a
    /// workload of several processes (Chrono §5.1.3 reads them per cgroup from
    /// `numa_stat`); absent for one process, whose pages the tiers' rows give.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub processes: Vec<ProcessSummary>,
}

/// One process's pages at the end of a run (`Summary::processes`), in pages of the
/// full machine (a sampled run's pages times the weight each stands for).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ProcessSummary {
    /// The process's name in the workload (e.g. `pmbench-delay-19`).
    pub name: String,
    /// Its resident base pages.
    pub resident_pages: u64,
    /// Of them, those in the fast tier.
    pub fast_pages: u64,
}

/// Mappings of a sampled run smaller than one sampling stratum (N = 1/rate regions of
/// 2 MiB). The sampler keeps one region per stratum, so such a mapping is either
/// simulated through one region that stands for N, several times its true weight, or
/// not simulated at all (docs/sampling.md, "Limits"): results that depend on it can
/// be far off.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CoarseSampling {
    /// How many mappings were smaller than a stratum.
    pub mappings: u64,
    /// Their total size, bytes.
    pub bytes: u64,
    /// One stratum, bytes (N × 2 MiB).
    pub stratum_bytes: u64,
}

/// Placement quality of one epoch against that epoch's hot set (Chrono reports F1 of
/// hot-page identification the same way).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct EpochRow {
    /// End of the epoch, simulated seconds.
    pub time_s: f64,
    /// Pages in the epoch's hot set (the most-accessed pages, as many as the fast tier
    /// holds).
    pub hot_pages: u64,
    /// Pages in the fast tier at the end of the epoch.
    pub fast_pages: u64,
    /// Share of fast-tier pages that are hot.
    pub precision: f64,
    /// Share of hot pages that are in the fast tier.
    pub recall: f64,
    /// Harmonic mean of precision and recall.
    pub f1: f64,
}

impl EpochRow {
    /// Build a row from counts.
    pub fn new(time_s: f64, hot_pages: u64, fast_pages: u64, hot_in_fast: u64) -> EpochRow {
        let precision = if fast_pages == 0 {
            0.0
        } else {
            hot_in_fast as f64 / fast_pages as f64
        };
        let recall = if hot_pages == 0 {
            1.0
        } else {
            hot_in_fast as f64 / hot_pages as f64
        };
        let f1 = if precision + recall == 0.0 {
            0.0
        } else {
            2.0 * precision * recall / (precision + recall)
        };
        EpochRow {
            time_s,
            hot_pages,
            fast_pages,
            precision,
            recall,
            f1,
        }
    }
}

/// Placement epochs and the access heat map of a run.
#[derive(Debug, Default, Clone, Serialize, Deserialize)]
pub struct Placement {
    /// One row per epoch.
    pub epochs: Vec<EpochRow>,
    /// Per epoch, memory accesses per address bin.
    pub heat: Vec<Vec<u64>>,
}

impl Placement {
    /// Mean precision, recall and F1 over epochs that had a hot set.
    pub fn means(&self) -> (f64, f64, f64) {
        let rows: Vec<&EpochRow> = self.epochs.iter().filter(|r| r.hot_pages > 0).collect();
        if rows.is_empty() {
            return (0.0, 0.0, 0.0);
        }
        let n = rows.len() as f64;
        (
            rows.iter().map(|r| r.precision).sum::<f64>() / n,
            rows.iter().map(|r| r.recall).sum::<f64>() / n,
            rows.iter().map(|r| r.f1).sum::<f64>() / n,
        )
    }

    /// The epochs as CSV.
    pub fn epochs_csv(&self) -> String {
        let mut s = String::from("time_s,hot_pages,fast_pages,precision,recall,f1\n");
        for r in &self.epochs {
            s.push_str(&format!(
                "{:.3},{},{},{:.6},{:.6},{:.6}\n",
                r.time_s, r.hot_pages, r.fast_pages, r.precision, r.recall, r.f1
            ));
        }
        s
    }

    /// The heat map as CSV: one row per epoch, one column per address bin.
    pub fn heat_csv(&self) -> String {
        let mut s = String::new();
        for (r, row) in self.epochs.iter().zip(&self.heat) {
            s.push_str(&format!("{:.3}", r.time_s));
            for v in row {
                s.push_str(&format!(",{v}"));
            }
            s.push('\n');
        }
        s
    }
}
