//! Machine configuration: tiers and their presets, fast-tier sizing, the LLC, THP mode,
//! mechanism costs, and where tiering threads run.
//!
//! Every default is documented in `docs/machine.md` with its source.

use crate::error::SimError;
use serde::{Deserialize, Serialize};
use tierkit_core::{ConfigError, MIB, PAGE_SIZE};

/// One memory tier as configured.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TierSpec {
    /// Short name (`dram`, `cxl`, `pmem`).
    pub name: String,
    /// Unloaded load latency, ns.
    pub load_ns: f64,
    /// Unloaded store latency, ns.
    pub store_ns: f64,
    /// Peak bandwidth, GB/s (10^9 bytes per second).
    pub bandwidth_gbps: f64,
    /// Capacity in MiB. For tier 0 it is normally left out and derived from
    /// [`MachineConfig::fast`]; for the last tier, left out means "enough for the whole
    /// footprint"; middle tiers must give it.
    #[serde(default)]
    pub capacity_mib: Option<u64>,
}

/// Transparent huge page mode for anonymous memory (`/sys/kernel/mm/transparent_hugepage/enabled`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum ThpMode {
    /// Only 4 KiB pages.
    Never,
    /// Every 2 MiB-aligned range of an anonymous mapping is backed by a huge page on
    /// first touch.
    Always,
}

/// Where tiering threads (kswapd-like, kpromoted, samplers) run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum TieringCpus {
    /// On CPUs of their own: their time is reported but does not slow the application.
    Dedicated,
    /// On the application's CPUs: their time is also spread as stall over every
    /// application thread (FreqTier's and HeMem's user-space threads behave so).
    Shared,
}

/// The cost the machine charges for each mechanism. See `docs/machine.md`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Costs {
    /// A hinting fault (PROT_NONE fault, PTE restore), charged to the faulting thread, ns.
    pub hint_fault_ns: f64,
    /// One page-table entry walked or changed by a scan (`change_prot_numa`, pagemap), ns.
    pub pte_scan_ns: f64,
    /// One accessed-bit test-and-clear (rmap walk, PTE update, TLB flush share), ns.
    pub young_test_ns: f64,
    /// Processing one PEBS-like sample on a tiering CPU, ns.
    pub sample_ns: f64,
    /// Fixed cost of migrating one page unit (isolate, unmap, TLB shootdown, remap), ns.
    pub migrate_fixed_ns: f64,
    /// Copy bandwidth of a migration, GB/s.
    pub migrate_copy_gbps: f64,
    /// Splitting a huge page, ns.
    pub split_ns: f64,
    /// A load or store served by the LLC, ns.
    pub llc_hit_ns: f64,
}

impl Default for Costs {
    fn default() -> Self {
        Costs {
            hint_fault_ns: 1_000.0,
            pte_scan_ns: 10.0,
            young_test_ns: 50.0,
            sample_ns: 200.0,
            migrate_fixed_ns: 3_000.0,
            migrate_copy_gbps: 8.0,
            split_ns: 10_000.0,
            llc_hit_ns: 20.0,
        }
    }
}

/// The simulated machine.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct MachineConfig {
    /// A preset name (`cxl`, `cxl-lowbw`, `optane`) giving the tiers; ignored when
    /// `tiers` is given.
    pub preset: String,
    /// Fast-tier size: a `fast:slow` ratio of the workload footprint (`1:8` → fast is
    /// 1/9 of the footprint, as MEMTIS states it), a multiple of the footprint
    /// (`1.42x`: everything fits) or a size (`512MiB`, `2GiB`).
    pub fast: String,
    /// Explicit tiers, fastest first (at least 2). Empty: use the preset.
    pub tiers: Vec<TierSpec>,
    /// Transparent huge pages for anonymous mappings.
    pub thp: ThpMode,
    /// Model the last-level cache (only misses reach memory and can be sampled).
    pub llc_enabled: bool,
    /// LLC size in MiB.
    pub llc_size_mib: u64,
    /// LLC associativity.
    pub llc_ways: u32,
    /// Where tiering threads run.
    pub tiering_cpus: TieringCpus,
    /// Mechanism costs.
    pub costs: Costs,
}

impl Default for MachineConfig {
    fn default() -> Self {
        MachineConfig {
            preset: "cxl".into(),
            fast: "1:8".into(),
            tiers: Vec::new(),
            thp: ThpMode::Never,
            llc_enabled: true,
            llc_size_mib: 32,
            llc_ways: 16,
            tiering_cpus: TieringCpus::Dedicated,
            costs: Costs::default(),
        }
    }
}

/// A named set of tiers with a one-line description.
pub struct Preset {
    /// Name used in configs and on the command line.
    pub name: &'static str,
    /// What it models.
    pub description: &'static str,
    /// Its tiers, fastest first.
    pub tiers: fn() -> Vec<TierSpec>,
}

fn tier(name: &str, load_ns: f64, store_ns: f64, bandwidth_gbps: f64) -> TierSpec {
    TierSpec {
        name: name.into(),
        load_ns,
        store_ns,
        bandwidth_gbps,
        capacity_mib: None,
    }
}

/// Local DRAM as MEMTIS's artifact models it (80 ns); bandwidth of a 6-channel
/// DDR4-2666 socket at a realistic ~75% of its 128 GB/s peak.
fn dram() -> TierSpec {
    tier("dram", 80.0, 80.0, 96.0)
}

/// The machine presets. Values and sources: `docs/machine.md`.
pub const PRESETS: &[Preset] = &[
    Preset {
        name: "cxl",
        description: "DRAM (80 ns, 96 GB/s) + high-bandwidth CXL (170 ns, 64 GB/s): MEMTIS's emulated CXL, FreqTier's CXL-1",
        tiers: || vec![dram(), tier("cxl", 170.0, 170.0, 64.0)],
    },
    Preset {
        name: "cxl-lowbw",
        description: "DRAM + one-channel CXL (180 ns, 8 GB/s): FreqTier's CXL-2",
        tiers: || vec![dram(), tier("cxl", 180.0, 180.0, 8.0)],
    },
    Preset {
        name: "optane",
        description: "DRAM + Optane DC PM (300 ns load, 100 ns store, 13 GB/s): MEMTIS setting 1, Chrono/PET/MULTI-CLOCK hardware",
        tiers: || vec![dram(), tier("pmem", 300.0, 100.0, 13.0)],
    },
];

/// Names of all presets, for error messages and `tierkit list`.
pub fn preset_names() -> Vec<&'static str> {
    PRESETS.iter().map(|p| p.name).collect()
}

/// How the fast tier is sized.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum FastSize {
    /// `fast:slow` parts of the footprint.
    Ratio {
        /// Fast parts.
        fast: f64,
        /// Slow parts.
        slow: f64,
    },
    /// A multiple of the footprint (`1.42x`): a fast tier the whole footprint fits in
    /// when over 1, as in PET's "working set fits" runs (45 GB in 64 GB of DRAM).
    Multiple(f64),
    /// An absolute size.
    Bytes(u64),
}

impl FastSize {
    /// Parse `1:8`, `1:2.5`, `1.42x`, `512MiB`, `2GiB`, `4096KiB` or plain bytes.
    pub fn parse(s: &str) -> Result<FastSize, SimError> {
        let s = s.trim();
        const EXPECTED: &str =
            "expected a ratio like `1:8`, a multiple of the footprint like `1.42x` or a size like `512MiB`";
        let bad = |why: &str| SimError::Config {
            what: format!("fast-tier size `{s}`"),
            why: format!("{why}; {EXPECTED}"),
        };
        if let Some(m) = s.strip_suffix('x') {
            let m: f64 = m
                .trim()
                .parse()
                .map_err(|_| bad("the multiple is not a number"))?;
            if !(m.is_finite() && m > 0.0) {
                return Err(bad("the multiple must be > 0"));
            }
            return Ok(FastSize::Multiple(m));
        }
        if let Some((a, b)) = s.split_once(':') {
            let fast: f64 = a
                .trim()
                .parse()
                .map_err(|_| bad("fast part is not a number"))?;
            let slow: f64 = b
                .trim()
                .parse()
                .map_err(|_| bad("slow part is not a number"))?;
            if !(fast.is_finite() && slow.is_finite()) || fast <= 0.0 || slow < 0.0 {
                return Err(bad("the fast part must be > 0 and the slow part ≥ 0"));
            }
            return Ok(FastSize::Ratio { fast, slow });
        }
        parse_size(s)
            .map(FastSize::Bytes)
            .map_err(|e| bad(&e.to_string()))
    }

    /// Fast-tier bytes for a footprint.
    pub fn bytes_for(&self, footprint_bytes: u64) -> u64 {
        match *self {
            FastSize::Ratio { fast, slow } => {
                (footprint_bytes as f64 * fast / (fast + slow)).round() as u64
            }
            FastSize::Multiple(m) => (footprint_bytes as f64 * m).round() as u64,
            FastSize::Bytes(b) => b,
        }
    }
}

/// Parse a byte size with an optional binary suffix (`KiB`, `MiB`, `GiB`, `TiB`, or
/// `K`, `M`, `G`, `T`). Errors are a short reason.
pub fn parse_size(s: &str) -> Result<u64, ConfigError> {
    let s = s.trim();
    let idx = s
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(s.len());
    let (num, unit) = s.split_at(idx);
    let value: f64 = num
        .parse()
        .map_err(|_| format!("`{s}` does not start with a number"))?;
    let mult: u64 = match unit.trim().to_ascii_lowercase().as_str() {
        "" | "b" => 1,
        "k" | "kib" | "kb" => 1 << 10,
        "m" | "mib" | "mb" => 1 << 20,
        "g" | "gib" | "gb" => 1 << 30,
        "t" | "tib" | "tb" => 1 << 40,
        other => {
            return Err(format!("unknown size unit `{other}` (use KiB, MiB, GiB, TiB)").into())
        }
    };
    let bytes = value * mult as f64;
    if !(bytes.is_finite() && bytes >= 1.0) {
        return Err(format!("`{s}` must be a positive size").into());
    }
    Ok(bytes as u64)
}

/// Tiers resolved to page capacities for one workload.
#[derive(Debug, Clone)]
pub struct ResolvedTiers {
    /// Specs, fastest first.
    pub specs: Vec<TierSpec>,
    /// Capacity of each tier in base pages.
    pub capacity_pages: Vec<u64>,
    /// Per tier: sized to hold the whole footprint (an unbounded fast tier, or a last
    /// tier without a capacity) rather than given. A sampled machine leaves such a tier
    /// room for the sampling variance of the footprint instead of shrinking it exactly.
    pub holds_footprint: Vec<bool>,
    /// The fast tier of the compared machine, in base pages: what `machine.fast` gives
    /// even when a policy (`all-fast`) asks for an unbounded fast tier. The size of
    /// each epoch's hot set, so that every policy's F1 is measured against the same set.
    pub hot_set_pages: u64,
}

impl MachineConfig {
    /// Largest LLC the model accepts, MiB.
    pub const MAX_LLC_MIB: u64 = 4096;
    /// Largest LLC associativity the model accepts.
    pub const MAX_LLC_WAYS: u32 = 1024;

    /// Check the configuration without a workload; the error names the field and its
    /// valid range.
    pub fn validate(&self) -> Result<(), SimError> {
        let tiers = self.tier_specs()?;
        if tiers.len() < 2 {
            return Err(SimError::Config {
                what: "machine.tiers".into(),
                why: format!(
                    "{} tier(s) given; a tiered machine needs at least 2",
                    tiers.len()
                ),
            });
        }
        for (i, t) in tiers.iter().enumerate() {
            for (field, v) in [
                ("load_ns", t.load_ns),
                ("store_ns", t.store_ns),
                ("bandwidth_gbps", t.bandwidth_gbps),
            ] {
                if !(v.is_finite() && v > 0.0) {
                    return Err(SimError::Config {
                        what: format!("machine.tiers[{i}].{field}"),
                        why: format!("{v} is not a positive number"),
                    });
                }
            }
            if t.capacity_mib == Some(0) {
                return Err(SimError::Config {
                    what: format!("machine.tiers[{i}].capacity_mib"),
                    why: "0 is not a positive size".into(),
                });
            }
            if i > 0 && i + 1 < tiers.len() && t.capacity_mib.is_none() {
                return Err(SimError::Config {
                    what: format!("machine.tiers[{i}].capacity_mib"),
                    why: "a middle tier needs an explicit capacity".into(),
                });
            }
        }
        FastSize::parse(&self.fast)?;
        if self.llc_enabled {
            if self.llc_ways == 0 || self.llc_size_mib == 0 {
                return Err(SimError::Config {
                    what: "machine.llc_size_mib / llc_ways".into(),
                    why: "must be positive".into(),
                });
            }
            // The model keeps 8 bytes of tag state per line: 4 GiB of cache is 512 MiB
            // of host memory, and far beyond any real LLC.
            if self.llc_size_mib > Self::MAX_LLC_MIB || self.llc_ways > Self::MAX_LLC_WAYS {
                return Err(SimError::Config {
                    what: "machine.llc_size_mib / llc_ways".into(),
                    why: format!(
                        "llc_size_mib must be in [1, {}] and llc_ways in [1, {}], got {} and {}",
                        Self::MAX_LLC_MIB,
                        Self::MAX_LLC_WAYS,
                        self.llc_size_mib,
                        self.llc_ways
                    ),
                });
            }
            let lines = self.llc_size_mib * MIB / tierkit_core::CACHE_LINE;
            let sets = lines / self.llc_ways as u64;
            if sets == 0 || !sets.is_power_of_two() || !lines.is_multiple_of(self.llc_ways as u64) {
                return Err(SimError::Config {
                    what: "machine.llc_size_mib / llc_ways".into(),
                    why: format!(
                        "{} MiB with {} ways gives {} sets; the set count must be a power of two",
                        self.llc_size_mib, self.llc_ways, sets
                    ),
                });
            }
        }
        let c = &self.costs;
        for (field, v) in [
            ("hint_fault_ns", c.hint_fault_ns),
            ("pte_scan_ns", c.pte_scan_ns),
            ("young_test_ns", c.young_test_ns),
            ("sample_ns", c.sample_ns),
            ("migrate_fixed_ns", c.migrate_fixed_ns),
            ("split_ns", c.split_ns),
            ("llc_hit_ns", c.llc_hit_ns),
        ] {
            if !(v.is_finite() && v >= 0.0) {
                return Err(SimError::Config {
                    what: format!("machine.costs.{field}"),
                    why: format!("{v} must be a non-negative number"),
                });
            }
        }
        if !(c.migrate_copy_gbps.is_finite() && c.migrate_copy_gbps > 0.0) {
            return Err(SimError::Config {
                what: "machine.costs.migrate_copy_gbps".into(),
                why: format!("{} must be positive", c.migrate_copy_gbps),
            });
        }
        Ok(())
    }

    /// The tier specs: explicit ones, or the preset's.
    pub fn tier_specs(&self) -> Result<Vec<TierSpec>, SimError> {
        if !self.tiers.is_empty() {
            return Ok(self.tiers.clone());
        }
        PRESETS
            .iter()
            .find(|p| p.name == self.preset)
            .map(|p| (p.tiers)())
            .ok_or_else(|| SimError::UnknownName {
                kind: "machine",
                name: self.preset.clone(),
                valid: preset_names().join(", "),
            })
    }

    /// Resolve capacities for a workload of `footprint_bytes`. `unbounded_fast` makes
    /// the fast tier hold everything (the `all-fast` reference).
    pub fn resolve(
        &self,
        footprint_bytes: u64,
        unbounded_fast: bool,
    ) -> Result<ResolvedTiers, SimError> {
        self.validate()?;
        let specs = self.tier_specs()?;
        let footprint_pages = footprint_bytes.div_ceil(PAGE_SIZE).max(1);
        // Headroom for watermarks and huge-page rounding, so a footprint that "fits"
        // really fits.
        let whole = footprint_pages + footprint_pages / 16 + 1024;
        let n = specs.len();
        let mut capacity_pages = Vec::with_capacity(n);
        let mut holds_footprint = Vec::with_capacity(n);
        let hot_set_pages = match specs[0].capacity_mib {
            Some(mib) => mib * MIB / PAGE_SIZE,
            None => FastSize::parse(&self.fast)?.bytes_for(footprint_bytes) / PAGE_SIZE,
        };
        for (i, s) in specs.iter().enumerate() {
            let pages = if i == 0 {
                if unbounded_fast {
                    whole
                } else {
                    hot_set_pages
                }
            } else if let Some(mib) = s.capacity_mib {
                mib * MIB / PAGE_SIZE
            } else {
                whole
            };
            capacity_pages.push(pages);
            holds_footprint.push(pages == whole);
        }
        if hot_set_pages == 0 {
            return Err(SimError::Config {
                what: format!("fast-tier size `{}`", self.fast),
                why: format!(
                    "gives a fast tier of 0 pages for a footprint of {} pages ({} KiB); give a larger ratio or size",
                    footprint_bytes.div_ceil(PAGE_SIZE),
                    footprint_bytes.div_ceil(1024)
                ),
            });
        }
        Ok(ResolvedTiers {
            specs,
            capacity_pages,
            holds_footprint,
            hot_set_pages,
        })
    }
}

/// Simulation settings that are not the machine.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct SimConfig {
    /// Length of one time-series interval, ms of simulated time.
    pub interval_ms: u64,
    /// Threads run ahead of the slowest thread by at most this much simulated time
    /// before the machine switches threads, ns. Smaller is more exact and slower.
    pub quantum_ns: u64,
    /// A page promoted within this many ms of its demotion counts as ping-pong.
    pub pingpong_window_ms: u64,
    /// Stop after this many accesses (0: run the workload to its end).
    pub max_accesses: u64,
    /// Length of a placement-quality epoch (precision/recall/F1 against the epoch's
    /// hot set, and one heat-map row), ms of simulated time.
    pub epoch_ms: u64,
    /// Address bins of the access heat map.
    pub heatmap_bins: usize,
    /// Policies see time run this many times faster than the machine: every policy
    /// time constant (scan periods, thresholds, intervals, rates per second) is
    /// effectively divided by it. 1.0 is faithful; larger values shorten experiments
    /// on small workloads, and reports say so.
    pub policy_time_scale: f64,
    /// Spatially sampled simulation (`docs/sampling.md`): simulate only this share of
    /// each process's 2 MiB regions, on a machine shrunk by the same factor in space
    /// (capacities, LLC, bandwidths, policies' extensive parameters) but not in time;
    /// each simulated event stands for `1/rate` events. `1` (the default) is exact;
    /// otherwise `1/N` with N a power of two up to 4096, given as `"1/64"` or `0.015625`.
    pub sample_rate: SampleRate,
    /// Where a sampled run draws its strata: `"address"` (the default: blocks of
    /// N consecutive 2 MiB regions of each address space) or `"mapping"` (inside each
    /// mapping, page by page where a mapping has fewer than N regions left;
    /// `docs/sampling.md`, "Strata by mapping"). No effect on an exact run. Written
    /// into a run's resolved config only when not the default and the run is sampled,
    /// so configs and outputs from before it stay byte-identical and an exact run is
    /// one run whatever strata its matrix names.
    #[serde(skip_serializing_if = "is_address_strata")]
    pub sample_strata: tierkit_core::SampleStrata,
    /// A page that would carry at least this share of a sampled run's accesses if it
    /// were sampled in space (its share of the workload's accesses, by the workload's
    /// own profile such as a graph kernel's first trial, times N) is simulated in time
    /// instead: kept in every sample, with one access in N of each thread kept
    /// (`docs/sampling.md`, "Pages sampled in time"). `0` (the default) samples every
    /// page in space; workloads without a profile ignore it. No effect on an exact run.
    /// Written into a resolved config only when not 0 and the run is sampled.
    #[serde(skip_serializing_if = "is_zero")]
    pub time_sampled_weight: f64,
    /// What a sampled run does with the compute time of the accesses it drops:
    /// `"carried"` (the default since 2026-11-30: compute is not sampled; a kept
    /// access carries the compute its thread's dropped accesses had since its last
    /// kept one, and gaps are not weighted by N) or `"kept"` (the default before: each
    /// kept access keeps its own gap, weighted by N, and the rest is gone;
    /// `docs/sampling.md`, "The compute between accesses"). Absent means the default;
    /// read it with [`SimConfig::sampled_compute`]. A resolved config names it for
    /// every sampled run and never for an exact one (no effect there): a sampled run
    /// resolved by a build before the default changed named only "carried", so its
    /// config, without the key, was kept, and `compare` must not reuse it as a run of
    /// the new default.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sampled_compute: Option<tierkit_core::SampledCompute>,
}

fn is_zero(x: &f64) -> bool {
    *x == 0.0
}

/// The share of 2 MiB regions a run simulates: `1/denominator`, a power-of-two
/// fraction so the sampled LLC keeps a power-of-two set count.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SampleRate {
    /// N in `1/N`.
    pub denominator: u32,
}

impl SampleRate {
    /// Every region simulated.
    pub const EXACT: SampleRate = SampleRate { denominator: 1 };
    /// The largest denominator accepted.
    pub const MAX_DENOMINATOR: u32 = 4096;

    /// The rate as a number in (0, 1].
    pub fn rate(&self) -> f64 {
        1.0 / self.denominator as f64
    }

    /// The space scale handed to the machine and the policies.
    pub fn scale(&self) -> tierkit_core::SpaceScale {
        tierkit_core::SpaceScale::new(self.rate())
    }

    /// Parse `1`, `1/64` or `0.015625`. Errors say what is valid.
    pub fn parse(s: &str) -> Result<SampleRate, ConfigError> {
        let t = s.trim();
        let denominator = if let Some((a, b)) = t.split_once('/') {
            if a.trim() != "1" {
                return Err(format!("`{t}`: write the rate as 1/N").into());
            }
            b.trim()
                .parse::<u64>()
                .map_err(|_| format!("`{t}`: N in 1/N is not a whole number"))?
        } else {
            let x: f64 = t
                .parse()
                .map_err(|_| format!("`{t}` is not a number or 1/N"))?;
            if !(x.is_finite() && x > 0.0 && x <= 1.0) {
                return Err(format!("`{t}` is not in (0, 1]").into());
            }
            let n = (1.0 / x).round();
            if (1.0 / n - x).abs() > 1e-12 * x.max(1e-300) * 1e3 {
                return Err(format!("`{t}` is not 1/N for a whole N").into());
            }
            n as u64
        };
        if denominator == 0
            || !denominator.is_power_of_two()
            || denominator > Self::MAX_DENOMINATOR as u64
        {
            return Err(format!(
                "`{t}`: N in 1/N must be a power of two from 1 to {}",
                Self::MAX_DENOMINATOR
            )
            .into());
        }
        Ok(SampleRate {
            denominator: denominator as u32,
        })
    }
}

impl std::fmt::Display for SampleRate {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.denominator == 1 {
            write!(f, "1")
        } else {
            write!(f, "1/{}", self.denominator)
        }
    }
}

impl Serialize for SampleRate {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&self.to_string())
    }
}

impl<'de> Deserialize<'de> for SampleRate {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        #[derive(Deserialize)]
        #[serde(untagged)]
        enum Raw {
            Int(i64),
            Float(f64),
            Text(String),
        }
        let text = match Raw::deserialize(d)? {
            Raw::Int(i) => i.to_string(),
            Raw::Float(x) => format!("{x}"),
            Raw::Text(t) => t,
        };
        SampleRate::parse(&text).map_err(|e| {
            serde::de::Error::custom(format!(
                "sim.sample_rate {e}; valid: 1 (exact) or 1/N with N a power of two up to 4096, e.g. \"1/64\""
            ))
        })
    }
}

fn is_address_strata(s: &tierkit_core::SampleStrata) -> bool {
    *s == tierkit_core::SampleStrata::Address
}

impl Default for SimConfig {
    fn default() -> Self {
        SimConfig {
            interval_ms: 100,
            quantum_ns: 1_000,
            pingpong_window_ms: 10_000,
            max_accesses: 0,
            epoch_ms: 1000,
            heatmap_bins: 64,
            policy_time_scale: 1.0,
            sample_rate: SampleRate::EXACT,
            sample_strata: tierkit_core::SampleStrata::Address,
            time_sampled_weight: 0.0,
            sampled_compute: None,
        }
    }
}

impl SimConfig {
    /// What this run does with its dropped accesses' compute (`sampled_compute`, the
    /// default when absent).
    pub fn sampled_compute(&self) -> tierkit_core::SampledCompute {
        self.sampled_compute.unwrap_or_default()
    }

    /// Largest `heatmap_bins`: a bin is a column of the report's heat map, and each
    /// epoch keeps one counter per bin.
    pub const MAX_HEATMAP_BINS: usize = 4096;
    /// Largest `policy_time_scale`. Beyond it the shortest policy periods (HeMem's
    /// 10 ms, a 1 ms sampling tick) shrink below a microsecond and the engine spends
    /// its time firing timers: at 10^5 a short run already takes hours.
    pub const MAX_POLICY_TIME_SCALE: f64 = 10_000.0;

    /// Check ranges.
    pub fn validate(&self) -> Result<(), SimError> {
        if self.interval_ms == 0 {
            return Err(SimError::Config {
                what: "sim.interval_ms".into(),
                why: "must be at least 1".into(),
            });
        }
        if self.epoch_ms == 0 {
            return Err(SimError::Config {
                what: "sim.epoch_ms".into(),
                why: "must be at least 1".into(),
            });
        }
        if !(1..=Self::MAX_HEATMAP_BINS).contains(&self.heatmap_bins) {
            return Err(SimError::Config {
                what: "sim.heatmap_bins".into(),
                why: format!(
                    "must be in [1, {}] (one column of the report's heat map per bin), got {}",
                    Self::MAX_HEATMAP_BINS,
                    self.heatmap_bins
                ),
            });
        }
        if !(self.policy_time_scale.is_finite()
            && self.policy_time_scale > 0.0
            && self.policy_time_scale <= Self::MAX_POLICY_TIME_SCALE)
        {
            return Err(SimError::Config {
                what: "sim.policy_time_scale".into(),
                why: format!(
                    "must be in (0, {}] (1 = the papers' time constants), got {}",
                    Self::MAX_POLICY_TIME_SCALE,
                    self.policy_time_scale
                ),
            });
        }
        if self.quantum_ns == 0 {
            return Err(SimError::Config {
                what: "sim.quantum_ns".into(),
                why: "must be at least 1".into(),
            });
        }
        if !(0.0..1.0).contains(&self.time_sampled_weight) {
            return Err(SimError::Config {
                what: "sim.time_sampled_weight".into(),
                why: format!(
                    "must be in [0, 1) (the share of a sampled run's accesses above which a page is sampled in time; 0 samples every page in space), got {}",
                    self.time_sampled_weight
                ),
            });
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sample_rates_parse_and_print() {
        for (s, n) in [
            ("1", 1),
            ("1/64", 64),
            ("0.015625", 64),
            (" 1/4096 ", 4096),
            ("0.5", 2),
        ] {
            let r = SampleRate::parse(s).unwrap();
            assert_eq!(r.denominator, n, "{s}");
            assert_eq!(SampleRate::parse(&r.to_string()).unwrap(), r);
        }
        for s in ["0", "1/3", "2", "1/8192", "0.3", "x", "2/64", "-1", "1/0"] {
            assert!(SampleRate::parse(s).is_err(), "{s} should be rejected");
        }
    }

    #[test]
    fn size_like_and_time_scale_settings_are_bounded() {
        let bad = |f: &dyn Fn(&mut SimConfig), what: &str| {
            let mut c = SimConfig::default();
            f(&mut c);
            let e = c.validate().unwrap_err().to_string();
            assert!(e.contains(what), "{e} should name {what}");
        };
        bad(&|c| c.heatmap_bins = 4_000_000_000, "sim.heatmap_bins");
        bad(&|c| c.heatmap_bins = 0, "sim.heatmap_bins");
        bad(&|c| c.policy_time_scale = 1e5, "sim.policy_time_scale");
        bad(&|c| c.policy_time_scale = 1e12, "sim.policy_time_scale");
        bad(&|c| c.policy_time_scale = 0.0, "sim.policy_time_scale");
        bad(&|c| c.policy_time_scale = f64::NAN, "sim.policy_time_scale");
        let ok = SimConfig {
            heatmap_bins: SimConfig::MAX_HEATMAP_BINS,
            policy_time_scale: SimConfig::MAX_POLICY_TIME_SCALE,
            ..SimConfig::default()
        };
        ok.validate().unwrap();
    }

    #[test]
    fn ratio_means_fast_share_of_footprint() {
        let f = FastSize::parse("1:8").unwrap();
        assert_eq!(f.bytes_for(9 * 1024), 1024);
        let f = FastSize::parse("512MiB").unwrap();
        assert_eq!(f.bytes_for(1), 512 * MIB);
        let f = FastSize::parse("1.5x").unwrap();
        assert_eq!(f.bytes_for(2048), 3072);
    }

    #[test]
    fn malformed_sizes_are_rejected() {
        for s in [
            "1:", ":8", "0:8", "-1:8", "abc", "1:x", "12XB", "0", "-5MiB", "", "x", "0x", "-1x",
            "infx", "ax",
        ] {
            assert!(FastSize::parse(s).is_err(), "{s} should be rejected");
        }
    }

    #[test]
    fn presets_validate_and_unknown_preset_lists_valid() {
        for p in PRESETS {
            let m = MachineConfig {
                preset: p.name.into(),
                ..Default::default()
            };
            m.validate().unwrap();
        }
        let m = MachineConfig {
            preset: "nvram".into(),
            ..Default::default()
        };
        let e = m.validate().unwrap_err().to_string();
        assert!(e.contains("nvram") && e.contains("cxl-lowbw"), "{e}");
    }

    #[test]
    fn three_tiers_need_middle_capacity() {
        let mut m = MachineConfig {
            tiers: vec![
                dram(),
                tier("cxl", 170.0, 170.0, 64.0),
                tier("pmem", 300.0, 100.0, 13.0),
            ],
            ..Default::default()
        };
        assert!(m.validate().is_err());
        m.tiers[1].capacity_mib = Some(256);
        let r = m.resolve(1 << 30, false).unwrap();
        assert_eq!(r.capacity_pages.len(), 3);
        assert_eq!(r.capacity_pages[1], 256 * MIB / PAGE_SIZE);
    }

    #[test]
    fn llc_geometry_must_be_power_of_two_sets() {
        let m = MachineConfig {
            llc_size_mib: 24,
            llc_ways: 16,
            ..Default::default()
        };
        assert!(m.validate().is_err());
        let m = MachineConfig {
            llc_size_mib: 32,
            llc_ways: 16,
            ..Default::default()
        };
        assert!(m.validate().is_ok());
    }
}
