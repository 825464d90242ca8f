//! # tierkit-policies: the tiering systems, one module each
//!
//! Every policy implements [`tierkit_core::Policy`] and has a config struct whose
//! `Default` holds its paper's (or kernel's) defaults, in the paper's units, with the
//! unit in the field name. [`PolicyConfig`] is the registry: one variant per policy,
//! selected by `name` in TOML, built by [`PolicyConfig::build`].
//!
//! Shared kernel-like machinery that several policies reuse lives beside them:
//! [`numa_scan`] is Linux's NUMA-balancing scanner (`task_numa_work`), [`lru`] the
//! kernel's active/inactive LRU lists with kswapd-like demotion, and [`damon`] DAMON's
//! region-based access monitor with its DAMOS schemes.
//!
//! To add a policy: write `src/<name>.rs` with `<Name>Config` (implementing
//! [`RegisteredConfig`]) and the policy (declaring what it observes in
//! `Policy::requirements`), add its `pub mod`/`pub use` lines and one entry to the
//! `registry!` table below, and a page under `docs/policies/`.

use serde::{Deserialize, Serialize};
use tierkit_core::{BuildContext, ConfigError, Policy, SpaceScale};

pub mod all_fast;
pub mod autonuma;
pub mod autotiering;
pub mod chrono;
pub mod damon;
pub mod damon_tiering;
pub mod first_touch;
pub mod freqtier;
pub mod hemem;
pub mod linux_tiering;
pub mod lru;
pub mod memtis;
pub mod mglru_pd;
pub mod multiclock;
pub mod nimble;
pub mod numa_scan;
pub mod oracle;
pub mod pet;
pub mod thermostat;
pub mod tpp;
// registry: modules (one `pub mod name;` line per policy or shared mechanism, sorted)

pub use all_fast::{AllFast, AllFastConfig};
pub use autonuma::{Autonuma, AutonumaConfig};
pub use autotiering::{Autotiering, AutotieringConfig, AutotieringCpmConfig, AutotieringMode};
pub use chrono::{Chrono, ChronoConfig};
pub use damon_tiering::{DamonTiering, DamonTieringConfig};
pub use first_touch::{FirstTouch, FirstTouchConfig};
pub use freqtier::{FreqTier, FreqTierConfig};
pub use hemem::{Hemem, HememConfig};
pub use linux_tiering::{LinuxNbConfig, LinuxTiering, LinuxTieringConfig};
pub use memtis::{Memtis, MemtisConfig};
pub use mglru_pd::{LinuxTieringMglruConfig, MglruPd, MglruPdConfig};
pub use multiclock::{MultiClock, MultiClockConfig};
pub use nimble::{Nimble, NimbleConfig};
pub use oracle::{Oracle, OracleConfig, OracleStatic, OracleStaticConfig};
pub use pet::{Pet, PetConfig};
pub use thermostat::{Thermostat, ThermostatConfig};
pub use tpp::{Tpp, TppConfig};
// registry: re-exports

/// What the registry asks of a policy's configuration type. Each policy module
/// implements it beside its config; checking and scaling default to nothing.
pub trait RegisteredConfig {
    /// Check parameter ranges; the error names the field and the valid range.
    fn check(&self) -> Result<(), ConfigError> {
        Ok(())
    }
    /// Scale the extensive parameters for a sampled machine (see
    /// [`PolicyConfig::scaled`]); intensive ones stay.
    fn scale(&mut self, _scale: SpaceScale) {}
    /// Build the policy, at the scale the config is already at.
    fn build_policy(&self, ctx: &BuildContext) -> Box<dyn Policy>;
}

/// The registry from one table: the `PolicyConfig` enum (serde's `name` tag is the
/// variant in kebab case, which a test checks against the listed name), its listing
/// with descriptions, defaults, names, validation, scaling and construction.
macro_rules! registry {
    ($( $(#[$doc:meta])* $variant:ident($cfg:ty) = $name:literal, $desc:literal $(, build = $build:expr)? ;)*) => {
        /// The policy registry: a policy's name and its configuration.
        #[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
        #[serde(tag = "name", rename_all = "kebab-case")]
        pub enum PolicyConfig {
            $( $(#[$doc])* $variant($cfg), )*
        }

        impl PolicyConfig {
            /// Every registered name with a one-line description, in listing order.
            pub fn describe() -> &'static [(&'static str, &'static str)] {
                &[ $( ($name, $desc), )* ]
            }

            /// The default configuration of `name`.
            pub fn default_for(name: &str) -> Option<PolicyConfig> {
                Some(match name {
                    $( $name => PolicyConfig::$variant(Default::default()), )*
                    _ => return None,
                })
            }

            /// The registered name.
            pub fn name(&self) -> &'static str {
                match self {
                    $( PolicyConfig::$variant(_) => $name, )*
                }
            }

            /// Check parameter ranges; the error names the field and the valid range.
            pub fn validate(&self) -> Result<(), ConfigError> {
                match self {
                    $( PolicyConfig::$variant(c) => RegisteredConfig::check(c), )*
                }
            }

            fn scale_in_place(&mut self, scale: SpaceScale) {
                match self {
                    $( PolicyConfig::$variant(c) => RegisteredConfig::scale(c, scale), )*
                }
            }

            fn build_exact(&self, ctx: &BuildContext) -> Box<dyn Policy> {
                match self {
                    $( PolicyConfig::$variant(c) => registry!(@build c, ctx $(, $build)?), )*
                }
            }
        }
    };
    (@build $c:ident, $ctx:ident) => { RegisteredConfig::build_policy($c, $ctx) };
    (@build $c:ident, $ctx:ident, $build:expr) => { ($build)($c, $ctx) };
}

registry! {
    /// Unbounded fast tier: the reference for slowdown.
    AllFast(AllFastConfig) = "all-fast",
        "unbounded fast tier: every page in DRAM; the reference for slowdown";
    /// Static first-touch placement, never migrates.
    FirstTouch(FirstTouchConfig) = "first-touch",
        "static placement: fast tier until full, then slow; never migrates";
    /// Linux NUMA balancing (mode 1) on a CPU-less slow node.
    Autonuma(AutonumaConfig) = "autonuma",
        "Linux NUMA balancing (numa_balancing=1) on a CPU-less slow node: promote on any hinting fault";
    /// Clairvoyant per-epoch placement: the bound for online policies (simulator only).
    Oracle(OracleConfig) = "oracle",
        "clairvoyant: each epoch (1 s) the pages most accessed in it are placed in the fast tier (simulator only)";
    /// Clairvoyant whole-run placement, never moved (simulator only).
    OracleStatic(OracleStaticConfig) = "oracle-static",
        "clairvoyant: the pages most accessed over the whole run placed at allocation, never moved (simulator only)";
    /// DAMON-based tiering (Linux samples/damon/mtier.c, damo mem_tier.sh).
    DamonTiering(DamonTieringConfig) = "damon-tiering",
        "DAMON-based tiering (mtier.c): paddr DAMON per node, migrate_cold from fast / migrate_hot from slow, quotas auto-tuned to 99.7% fast-node use";
    /// Linux NUMA balancing memory-tiering mode (numa_balancing=2, v6.1+).
    LinuxTiering(LinuxTieringConfig) = "linux-tiering",
        "Linux memory tiering (numa_balancing=2, v6.1+): promote on hint-fault latency < hot threshold within a rate limit; kswapd demotes the fast tier's inactive LRU";
    /// Linux memory-tiering mode as merged in v5.18 (Chrono's Linux-NB): promote on every slow-tier hinting fault.
    LinuxNb(LinuxNbConfig) = "linux-nb",
        "Linux memory tiering as merged in v5.18 (numa_balancing=2; Chrono's Linux-NB): every hinting fault on a slow-tier page promotes (MRU) while the fast tier stays balanced, no hot threshold or rate limit (v6.0); kswapd demotes the fast tier's inactive LRU";
    /// TPP (ASPLOS'23): active-LRU promotion filter, decoupled demotion watermark.
    Tpp(TppConfig) = "tpp",
        "TPP (ASPLOS'23): promote slow pages faulted while on the active LRU; kswapd keeps a 2% demotion watermark free";
    /// HeMem (SOSP'21): PEBS sample counts, fixed hot thresholds, hot/cold FIFO lists, 10 ms migration thread.
    Hemem(HememConfig) = "hemem",
        "HeMem (SOSP'21): PEBS samples per 2 MiB page, hot at 4 reads or 4 writes, halve all counts when one passes 10; a 10 ms thread promotes hot slow pages, demoting cold fast ones";
    /// AutoTiering (ATC'21): hint faults, 8-bit LAP history; `mode` cpm / opm / opmx / opm-bd.
    Autotiering(AutotieringConfig) = "autotiering",
        "AutoTiering (ATC'21): hint faults build an 8-bit LAP history; mode opm-bd (default) promotes into a pool refilled by background demotion of least-accessed pages, opm/opmx demote/exchange in the fault, cpm promotes only into free space";
    /// AutoTiering-CPM as MULTI-CLOCK compares against it: `autotiering` with `mode = "cpm"` and the kernel's scanner.
    AutotieringCpm(AutotieringCpmConfig) = "autotiering-cpm",
        "AutoTiering-CPM (ATC'21, as MULTI-CLOCK compares): hint faults promote a slow page only while the fast tier has free space; the kernel's NUMA scanner (60 s, 256 MB)";
    /// MEMTIS (SOSP'23): PEBS hotness histogram sized to the fast tier, warm band, cooling, skew-aware huge-page split.
    Memtis(MemtisConfig) = "memtis",
        "MEMTIS (SOSP'23): PEBS samples into an exponential hotness histogram; hot threshold sized to the fast tier, warm band kept, cooling by halving, 500 ms background migration, skewed huge pages split when eHR exceeds rHR";
    /// FreqTier: PEBS samples into a 4-bit counting Bloom filter, watermark demotion scan, adaptive intensity.
    Freqtier(FreqTierConfig) = "freqtier",
        "FreqTier (CXL, U. Toronto): PEBS samples counted in a 4-bit counting Bloom filter; promote slow pages reaching the hot threshold (sized to the fast tier) per 100K-sample batch; checkpointed linear scan demotes cold pages between two watermarks; sampling 100/10/1 kHz then monitoring as the hit ratio settles";
    /// MULTI-CLOCK (HPCA'22): per-tier CLOCK lists with a promote list, kpromoted every 1 s, demotion through reclaim.
    Multiclock(MultiClockConfig) = "multiclock",
        "MULTI-CLOCK (HPCA'22): accessed-bit CLOCK lists per tier plus a promote list; pages referenced again while active are promoted by kpromoted every 1 s; demotion only through watermark reclaim";
    /// Nimble's page selection (ASPLOS'19) as MULTI-CLOCK re-implemented it: fixed 1024 top active slow pages per second, exchange when full.
    Nimble(NimbleConfig) = "nimble",
        "Nimble page selection (ASPLOS'19, as MULTI-CLOCK re-implemented it): Linux CLOCK lists; every 1 s the top 1024 pages of the slow active list move to the fast tier, exchanged with its coldest pages when full";
    /// Chrono (EuroSys'25): CIT hotness, two-round filter, DCSC-tuned threshold and rate limit.
    Chrono(ChronoConfig) = "chrono",
        "Chrono (EuroSys'25): Ticking-scan captures idle time (CIT) from scan to hinting fault; pages below the CIT threshold twice in a row queue for rate-limited async promotion; DCSC heat maps of both tiers tune threshold and rate limit; LRU demotion to a pro watermark, thrashing monitor";
    /// Chrono with semi-auto tuning: the user's rate limit, threshold by (1 − δ + δ·r).
    ChronoSemiauto(ChronoConfig) = "chrono-semiauto",
        "Chrono with semi-auto tuning (§3.2.1): fixed user rate limit, CIT threshold moved by (1 - d + d*r) each scan period toward enqueue rate = rate limit",
        build = |c: &ChronoConfig, _| Box::new(Chrono::new(c.clone(), chrono::Tuning::SemiAuto));
    /// PET (EuroSys'25): proactive multi-phase demotion of P-blocks (anonymous mmaps), canary pages, R_promo fault budget.
    Pet(PetConfig) = "pet",
        "PET (EuroSys'25): anonymous mmaps become P-blocks (max 1 GiB); one sampled accessed bit per block every 500 ms; a block cold for a 10 s scan goes PHASE1 (128 MiB temporary blocks), PHASE2 (10% canaries demoted and armed), then its cold runs are demoted whatever the free memory; canary faults over a 360/s budget (th_total, th_block) make kpromoted promote whole blocks";
    /// PET's Base+PD: linux-tiering promotion plus proactive demotion of the oldest MGLRU generation every 10 s.
    MglruPd(MglruPdConfig) = "mglru-pd",
        "PET's Base+PD: linux-tiering's hint-fault promotion plus, every 10 s, an MGLRU aging pass (accessed bits of every fast page) and demotion of the oldest of 4 generations, whatever the free memory";
    /// Linux 6.2 memory tiering with MGLRU demotion: the "AutoNUMA" FreqTier compares against.
    LinuxTieringMglru(LinuxTieringMglruConfig) = "linux-tiering-mglru",
        "Linux 6.2 memory tiering with MGLRU (FreqTier's AutoNUMA): linux-tiering's hint-fault promotion; kswapd under pressure ages on demand and demotes from the oldest MGLRU generations, never the two youngest";
    /// Thermostat (ASPLOS'17) as PET describes it: 5% of 2 MiB regions sampled, 50 poisoned pages each, 3% slowdown budget.
    Thermostat(ThermostatConfig) = "thermostat",
        "Thermostat (ASPLOS'17) as PET describes it: every 10 s sample 5% of 2 MiB regions, poison 50 accessed 4 KiB pages each and count their faults; demote the coldest within a 3% / 1 us slow-access budget, promote sampled slow regions over it";
    // registry: one entry per policy (a doc comment, the variant and its config, the
    // name, a one-line description)
}

impl PolicyConfig {
    /// Registered names.
    pub fn names() -> Vec<&'static str> {
        Self::describe().iter().map(|(n, _)| *n).collect()
    }

    /// Build the policy, failing with a one-line reason if it cannot run here (a
    /// policy that declares it reads the future, without a replayable workload).
    pub fn try_build(&self, ctx: &BuildContext) -> Result<Box<dyn Policy>, String> {
        let policy = self.build(ctx);
        // A shared future may decline (a tape too large to keep) and fall back to
        // `fresh_workload`, so that alone decides whether the future can be read.
        if policy.requirements().future_knowledge && ctx.fresh_workload.is_none() {
            return Err(format!(
                "policy `{}` reads the future of the workload and runs only in the simulator",
                self.name()
            ));
        }
        Ok(policy)
    }

    /// Build the policy (a clairvoyant policy built without a workload never acts;
    /// use [`try_build`](Self::try_build) to refuse that). `ctx` carries what a few policies need beyond their config.
    pub fn build(&self, ctx: &BuildContext) -> Box<dyn Policy> {
        let scaled;
        let this = if ctx.space_scale.is_exact() {
            self
        } else {
            scaled = self.scaled(ctx.space_scale);
            &scaled
        };
        this.build_exact(ctx)
    }

    /// This configuration for a machine simulated at `scale` (sampled simulation,
    /// `tierkit_core::scale`): every extensive parameter — a fixed count or size per
    /// interval, a rate limit in bytes or pages per second, a sample-counted interval —
    /// multiplied by the sampled share; intensive ones (time constants, per-page
    /// thresholds, virtual address ranges) unchanged. Each policy page under
    /// `docs/policies/` lists which of its parameters scale and why.
    pub fn scaled(&self, scale: SpaceScale) -> PolicyConfig {
        let mut c = self.clone();
        if scale.is_exact() {
            return c;
        }
        c.scale_in_place(scale);
        c
    }
}

#[cfg(test)]
mod faithful;
#[cfg(test)]
mod watched;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn serde_names_each_variant_as_the_registry_lists_it() {
        for name in PolicyConfig::names() {
            let c = PolicyConfig::default_for(name).unwrap();
            let v = serde_json::to_value(&c).unwrap();
            assert_eq!(
                v["name"], name,
                "the variant's kebab-case name is the listed one"
            );
            let back: PolicyConfig = serde_json::from_value(v).unwrap();
            assert_eq!(back, c);
        }
    }

    #[test]
    fn every_described_name_has_a_default_that_round_trips() {
        for name in PolicyConfig::names() {
            let c = PolicyConfig::default_for(name).unwrap();
            assert_eq!(c.name(), name);
            c.validate().unwrap();
            assert_eq!(c.build(&BuildContext::default()).name(), name);
        }
        assert!(PolicyConfig::default_for("nope").is_none());
    }

    /// Every policy's default configuration, scaled to any sample rate, is still a
    /// valid one (autotiering's pool at 1/64 was not, and never promoted).
    #[test]
    fn scaled_defaults_stay_valid_at_every_rate() {
        for name in PolicyConfig::names() {
            let c = PolicyConfig::default_for(name).unwrap();
            for n in (1..=12).map(|k| 1u32 << k) {
                let scaled = c.scaled(SpaceScale::new(1.0 / n as f64));
                assert_eq!(scaled.validate(), Ok(()), "{name} at 1/{n}");
            }
        }
    }

    /// Sampled simulation (issue 15): exact scale changes nothing, and at 1/64 exactly
    /// the extensive parameters each policy page lists change, each by the rate.
    #[test]
    fn scaled_changes_exactly_the_extensive_parameters() {
        let expected: &[(&str, &[&str])] = &[
            ("all-fast", &[]),
            ("first-touch", &[]),
            ("autonuma", &[]),
            ("oracle", &["first_epoch_accesses"]),
            ("oracle-static", &[]),
            ("damon-tiering", &["quota_bytes"]),
            ("linux-tiering", &["promote_rate_limit_mbps"]),
            ("linux-nb", &[]),
            ("tpp", &[]),
            ("hemem", &["cooling_pages", "kswapd_migrate_rate_mb"]),
            (
                "autotiering",
                &[
                    "pool_max_huge_pages",
                    "pool_max_pages",
                    "pool_min_huge_pages",
                    "pool_min_pages",
                ],
            ),
            // CPM never promotes into a pool: nothing of it is extensive.
            ("autotiering-cpm", &[]),
            (
                "memtis",
                &[
                    "adapt_interval_samples",
                    "cooling_interval_samples",
                    "split_batch_huge_pages",
                ],
            ),
            (
                "freqtier",
                &[
                    "batch_samples",
                    "monitor_sample_hz",
                    "pagemap_batch_pages",
                    "sampling_levels_hz",
                ],
            ),
            ("multiclock", &["nr_scan_pages"]),
            ("nimble", &["nr_promote_pages", "nr_scan_pages"]),
            ("chrono", &["dcsc_min_samples", "rate_limit_mbps"]),
            ("chrono-semiauto", &["dcsc_min_samples", "rate_limit_mbps"]),
            ("pet", &["mis_demotion_penalty_us"]),
            ("mglru-pd", &["promote_rate_limit_mbps"]),
            ("linux-tiering-mglru", &["promote_rate_limit_mbps"]),
            ("thermostat", &["slow_access_penalty_us"]),
        ];
        assert_eq!(
            expected.len(),
            PolicyConfig::names().len(),
            "every policy decides"
        );
        let flat = |c: &PolicyConfig| serde_json::to_value(c).unwrap();
        for (name, fields) in expected {
            let c = PolicyConfig::default_for(name).unwrap();
            assert_eq!(c.scaled(SpaceScale::EXACT), c, "{name}");
            let (a, b) = (flat(&c), flat(&c.scaled(SpaceScale::new(1.0 / 64.0))));
            let (a, b) = (a.as_object().unwrap(), b.as_object().unwrap());
            let mut changed: Vec<&str> = a
                .keys()
                .filter(|k| a[*k] != b[*k])
                .map(|k| k.as_str())
                .collect();
            changed.sort();
            assert_eq!(&changed, fields, "{name}");
            // Counts shrink (by the rate, but never to 0); penalties per sampled event grow.
            for f in *fields {
                let (x, y) = (&a[*f], &b[*f]);
                if let (Some(x), Some(y)) = (x.as_u64(), y.as_u64()) {
                    // An integer count: rounded, and never below 1 — but a pool's refill
                    // level stays below the pool's size.
                    let mut want = ((x as f64 / 64.0).round() as u64).max(1);
                    if f.starts_with("pool_min") {
                        want = want.min(b[&f.replace("min", "max")].as_u64().unwrap() - 1);
                    }
                    assert_eq!(y, want, "{name}.{f}");
                } else if let (Some(x), Some(y)) = (x.as_f64(), y.as_f64()) {
                    let want = if f.ends_with("_us") {
                        x * 64.0
                    } else {
                        x / 64.0
                    };
                    assert!((y / want - 1.0).abs() < 1e-9, "{name}.{f}: {x} -> {y}");
                }
            }
        }
    }
}
