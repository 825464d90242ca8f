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
//! To add a policy: write `src/<name>.rs` with `<Name>Config` and the policy, add a
//! variant to [`PolicyConfig`] and a line to [`PolicyConfig::describe`], and a page
//! under `docs/policies/`.

use serde::{Deserialize, Serialize};
use tierkit_core::{BuildContext, Policy, SpaceScale};

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
pub use autotiering::{Autotiering, AutotieringConfig, AutotieringMode};
pub use chrono::{Chrono, ChronoConfig};
pub use damon_tiering::{DamonTiering, DamonTieringConfig};
pub use first_touch::{FirstTouch, FirstTouchConfig};
pub use freqtier::{FreqTier, FreqTierConfig};
pub use hemem::{Hemem, HememConfig};
pub use linux_tiering::{LinuxTiering, LinuxTieringConfig};
pub use memtis::{Memtis, MemtisConfig};
pub use mglru_pd::{MglruPd, MglruPdConfig};
pub use multiclock::{MultiClock, MultiClockConfig};
pub use nimble::{Nimble, NimbleConfig};
pub use oracle::{Oracle, OracleConfig, OracleStatic, OracleStaticConfig};
pub use pet::{Pet, PetConfig};
pub use thermostat::{Thermostat, ThermostatConfig};
pub use tpp::{Tpp, TppConfig};
// registry: re-exports

/// The policy registry: a policy's name and its configuration.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "name", rename_all = "kebab-case")]
pub enum PolicyConfig {
    /// Unbounded fast tier: the reference for slowdown.
    AllFast(AllFastConfig),
    /// Static first-touch placement, never migrates.
    FirstTouch(FirstTouchConfig),
    /// Linux NUMA balancing (mode 1) on a CPU-less slow node.
    Autonuma(AutonumaConfig),
    /// Clairvoyant per-epoch placement: the bound for online policies (simulator only).
    Oracle(OracleConfig),
    /// Clairvoyant whole-run placement, never moved (simulator only).
    OracleStatic(OracleStaticConfig),
    /// DAMON-based tiering (Linux samples/damon/mtier.c, damo mem_tier.sh).
    DamonTiering(DamonTieringConfig),
    /// Linux NUMA balancing memory-tiering mode (numa_balancing=2, v6.1+).
    LinuxTiering(LinuxTieringConfig),
    /// TPP (ASPLOS'23): active-LRU promotion filter, decoupled demotion watermark.
    Tpp(TppConfig),
    /// HeMem (SOSP'21): PEBS sample counts, fixed hot thresholds, hot/cold FIFO lists, 10 ms migration thread.
    Hemem(HememConfig),
    /// AutoTiering (ATC'21): hint faults, 8-bit LAP history; `mode` cpm / opm / opmx / opm-bd.
    Autotiering(AutotieringConfig),
    /// MEMTIS (SOSP'23): PEBS hotness histogram sized to the fast tier, warm band, cooling, skew-aware huge-page split.
    Memtis(MemtisConfig),
    /// FreqTier: PEBS samples into a 4-bit counting Bloom filter, watermark demotion scan, adaptive intensity.
    Freqtier(FreqTierConfig),
    /// MULTI-CLOCK (HPCA'22): per-tier CLOCK lists with a promote list, kpromoted every 1 s, demotion through reclaim.
    Multiclock(MultiClockConfig),
    /// Nimble's page selection (ASPLOS'19) as MULTI-CLOCK re-implemented it: fixed 1024 top active slow pages per second, exchange when full.
    Nimble(NimbleConfig),
    /// Chrono (EuroSys'25): CIT hotness, two-round filter, DCSC-tuned threshold and rate limit.
    Chrono(ChronoConfig),
    /// Chrono with semi-auto tuning: the user's rate limit, threshold by (1 − δ + δ·r).
    ChronoSemiauto(ChronoConfig),
    /// PET (EuroSys'25): proactive multi-phase demotion of P-blocks (anonymous mmaps), canary pages, R_promo fault budget.
    Pet(PetConfig),
    /// PET's Base+PD: linux-tiering promotion plus proactive demotion of the oldest MGLRU generation every 10 s.
    MglruPd(MglruPdConfig),
    /// Thermostat (ASPLOS'17) as PET describes it: 5% of 2 MiB regions sampled, 50 poisoned pages each, 3% slowdown budget.
    Thermostat(ThermostatConfig),
    // registry: variants (one line each, a doc comment above it)
}

impl PolicyConfig {
    /// Every registered name with a one-line description, in listing order.
    pub fn describe() -> &'static [(&'static str, &'static str)] {
        &[
            ("all-fast", "unbounded fast tier: every page in DRAM; the reference for slowdown"),
            ("first-touch", "static placement: fast tier until full, then slow; never migrates"),
            ("autonuma", "Linux NUMA balancing (numa_balancing=1) on a CPU-less slow node: promote on any hinting fault"),
            ("oracle", "clairvoyant: each epoch (1 s) the pages most accessed in it are placed in the fast tier (simulator only)"),
            ("oracle-static", "clairvoyant: the pages most accessed over the whole run placed at allocation, never moved (simulator only)"),
            ("damon-tiering", "DAMON-based tiering (mtier.c): paddr DAMON per node, migrate_cold from fast / migrate_hot from slow, quotas auto-tuned to 99.7% fast-node use"),
            ("linux-tiering", "Linux memory tiering (numa_balancing=2, v6.1+): promote on hint-fault latency < hot threshold within a rate limit; kswapd demotes the fast tier's inactive LRU"),
            ("tpp", "TPP (ASPLOS'23): promote slow pages faulted while on the active LRU; kswapd keeps a 2% demotion watermark free"),
            ("hemem", "HeMem (SOSP'21): PEBS samples per 2 MiB page, hot at 4 reads or 4 writes, halve all counts when one passes 10; a 10 ms thread promotes hot slow pages, demoting cold fast ones"),
            ("autotiering", "AutoTiering (ATC'21): hint faults build an 8-bit LAP history; mode opm-bd (default) promotes into a pool refilled by background demotion of least-accessed pages, opm/opmx demote/exchange in the fault, cpm promotes only into free space"),
            ("memtis", "MEMTIS (SOSP'23): PEBS samples into an exponential hotness histogram; hot threshold sized to the fast tier, warm band kept, cooling by halving, 500 ms background migration, skewed huge pages split when eHR exceeds rHR"),
            ("freqtier", "FreqTier (CXL, U. Toronto): PEBS samples counted in a 4-bit counting Bloom filter; promote slow pages reaching the hot threshold (sized to the fast tier) per 100K-sample batch; checkpointed linear scan demotes cold pages between two watermarks; sampling 100/10/1 kHz then monitoring as the hit ratio settles"),
            ("multiclock", "MULTI-CLOCK (HPCA'22): accessed-bit CLOCK lists per tier plus a promote list; pages referenced again while active are promoted by kpromoted every 1 s; demotion only through watermark reclaim"),
            ("nimble", "Nimble page selection (ASPLOS'19, as MULTI-CLOCK re-implemented it): Linux CLOCK lists; every 1 s the top 1024 pages of the slow active list move to the fast tier, exchanged with its coldest pages when full"),
            ("chrono", "Chrono (EuroSys'25): Ticking-scan captures idle time (CIT) from scan to hinting fault; pages below the CIT threshold twice in a row queue for rate-limited async promotion; DCSC heat maps of both tiers tune threshold and rate limit; LRU demotion to a pro watermark, thrashing monitor"),
            ("chrono-semiauto", "Chrono with semi-auto tuning (§3.2.1): fixed user rate limit, CIT threshold moved by (1 - d + d*r) each scan period toward enqueue rate = rate limit"),
            ("pet", "PET (EuroSys'25): anonymous mmaps become P-blocks (max 1 GiB); one sampled accessed bit per block every 500 ms; a block cold for a 10 s scan goes PHASE1 (128 MiB temporary blocks), PHASE2 (10% canaries demoted and armed), then its cold runs are demoted whatever the free memory; canary faults over a 360/s budget (th_total, th_block) make kpromoted promote whole blocks"),
            ("mglru-pd", "PET's Base+PD: linux-tiering's hint-fault promotion plus, every 10 s, an MGLRU aging pass (accessed bits of every fast page) and demotion of the oldest of 4 generations, whatever the free memory"),
            ("thermostat", "Thermostat (ASPLOS'17) as PET describes it: every 10 s sample 5% of 2 MiB regions, poison 50 accessed 4 KiB pages each and count their faults; demote the coldest within a 3% / 1 us slow-access budget, promote sampled slow regions over it"),
            // registry: describe
        ]
    }

    /// Registered names.
    pub fn names() -> Vec<&'static str> {
        Self::describe().iter().map(|(n, _)| *n).collect()
    }

    /// The default configuration of `name`.
    pub fn default_for(name: &str) -> Option<PolicyConfig> {
        Some(match name {
            "all-fast" => PolicyConfig::AllFast(Default::default()),
            "first-touch" => PolicyConfig::FirstTouch(Default::default()),
            "autonuma" => PolicyConfig::Autonuma(Default::default()),
            "oracle" => PolicyConfig::Oracle(Default::default()),
            "oracle-static" => PolicyConfig::OracleStatic(Default::default()),
            "damon-tiering" => PolicyConfig::DamonTiering(Default::default()),
            "linux-tiering" => PolicyConfig::LinuxTiering(Default::default()),
            "tpp" => PolicyConfig::Tpp(Default::default()),
            "hemem" => PolicyConfig::Hemem(Default::default()),
            "autotiering" => PolicyConfig::Autotiering(Default::default()),
            "memtis" => PolicyConfig::Memtis(Default::default()),
            "freqtier" => PolicyConfig::Freqtier(Default::default()),
            "multiclock" => PolicyConfig::Multiclock(Default::default()),
            "nimble" => PolicyConfig::Nimble(Default::default()),
            "chrono" => PolicyConfig::Chrono(Default::default()),
            "chrono-semiauto" => PolicyConfig::ChronoSemiauto(Default::default()),
            "pet" => PolicyConfig::Pet(Default::default()),
            "mglru-pd" => PolicyConfig::MglruPd(Default::default()),
            "thermostat" => PolicyConfig::Thermostat(Default::default()),
            // registry: default_for
            _ => return None,
        })
    }

    /// The registered name.
    pub fn name(&self) -> &'static str {
        match self {
            PolicyConfig::AllFast(_) => "all-fast",
            PolicyConfig::FirstTouch(_) => "first-touch",
            PolicyConfig::Autonuma(_) => "autonuma",
            PolicyConfig::Oracle(_) => "oracle",
            PolicyConfig::OracleStatic(_) => "oracle-static",
            PolicyConfig::DamonTiering(_) => "damon-tiering",
            PolicyConfig::LinuxTiering(_) => "linux-tiering",
            PolicyConfig::Tpp(_) => "tpp",
            PolicyConfig::Hemem(_) => "hemem",
            PolicyConfig::Autotiering(_) => "autotiering",
            PolicyConfig::Memtis(_) => "memtis",
            PolicyConfig::Freqtier(_) => "freqtier",
            PolicyConfig::Multiclock(_) => "multiclock",
            PolicyConfig::Nimble(_) => "nimble",
            PolicyConfig::Chrono(_) => "chrono",
            PolicyConfig::ChronoSemiauto(_) => "chrono-semiauto",
            PolicyConfig::Pet(_) => "pet",
            PolicyConfig::MglruPd(_) => "mglru-pd",
            PolicyConfig::Thermostat(_) => "thermostat",
            // registry: name
        }
    }

    /// Check parameter ranges; the error names the field and the valid range.
    pub fn validate(&self) -> Result<(), String> {
        match self {
            PolicyConfig::AllFast(_) | PolicyConfig::FirstTouch(_) => Ok(()),
            PolicyConfig::Autonuma(c) => c.validate(),
            PolicyConfig::Oracle(c) => c.validate(),
            PolicyConfig::OracleStatic(_) => Ok(()),
            PolicyConfig::DamonTiering(c) => c.validate(),
            PolicyConfig::LinuxTiering(c) => c.validate(),
            PolicyConfig::Tpp(c) => c.validate(),
            PolicyConfig::Hemem(c) => c.validate(),
            PolicyConfig::Autotiering(c) => c.validate(),
            PolicyConfig::Memtis(c) => c.validate(),
            PolicyConfig::Freqtier(c) => c.validate(),
            PolicyConfig::Multiclock(c) => c.validate(),
            PolicyConfig::Nimble(c) => c.validate(),
            PolicyConfig::Chrono(c) | PolicyConfig::ChronoSemiauto(c) => c.validate(),
            PolicyConfig::Pet(c) => c.validate(),
            PolicyConfig::MglruPd(c) => c.validate(),
            PolicyConfig::Thermostat(c) => c.validate(),
            // registry: validate
        }
    }

    /// Build the policy, failing with a one-line reason if it cannot run here (a
    /// policy that declares it reads the future, without a replayable workload).
    pub fn try_build(&self, ctx: &BuildContext) -> Result<Box<dyn Policy>, String> {
        let policy = self.build(ctx);
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
        match &mut c {
            // Nothing extensive: they never migrate, or (autonuma, tpp) act only on
            // per-page faults over an address-space scan and on watermarks, which are
            // intensive or scaled by the machine itself.
            PolicyConfig::AllFast(_)
            | PolicyConfig::FirstTouch(_)
            | PolicyConfig::OracleStatic(_)
            | PolicyConfig::Autonuma(_)
            | PolicyConfig::Tpp(_) => {}
            PolicyConfig::Oracle(c) => c.scale_space(scale),
            PolicyConfig::DamonTiering(c) => c.scale_space(scale),
            PolicyConfig::LinuxTiering(c) => c.scale_space(scale),
            PolicyConfig::Hemem(c) => c.scale_space(scale),
            PolicyConfig::Autotiering(c) => c.scale_space(scale),
            PolicyConfig::Memtis(c) => c.scale_space(scale),
            PolicyConfig::Freqtier(c) => c.scale_space(scale),
            PolicyConfig::Multiclock(c) => c.scale_space(scale),
            PolicyConfig::Nimble(c) => c.scale_space(scale),
            PolicyConfig::Chrono(c) | PolicyConfig::ChronoSemiauto(c) => c.scale_space(scale),
            PolicyConfig::Pet(c) => c.scale_space(scale),
            PolicyConfig::MglruPd(c) => c.scale_space(scale),
            PolicyConfig::Thermostat(c) => c.scale_space(scale),
            // registry: scaled
        }
        c
    }

    fn build_exact(&self, ctx: &BuildContext) -> Box<dyn Policy> {
        match self {
            PolicyConfig::AllFast(_) => Box::new(AllFast),
            PolicyConfig::FirstTouch(_) => Box::new(FirstTouch),
            PolicyConfig::Autonuma(c) => Box::new(Autonuma::new(c.clone())),
            PolicyConfig::Oracle(c) => Box::new(Oracle::new(
                c.clone(),
                ctx.fresh_workload.as_ref().map(|f| f()),
            )),
            PolicyConfig::OracleStatic(_) => {
                Box::new(OracleStatic::new(ctx.fresh_workload.as_ref().map(|f| f())))
            }
            PolicyConfig::DamonTiering(c) => Box::new(DamonTiering::new(c.clone())),
            PolicyConfig::LinuxTiering(c) => Box::new(LinuxTiering::new(c.clone())),
            PolicyConfig::Tpp(c) => Box::new(Tpp::new(c.clone())),
            PolicyConfig::Hemem(c) => Box::new(Hemem::new(c.clone())),
            PolicyConfig::Autotiering(c) => Box::new(Autotiering::new(c.clone())),
            PolicyConfig::Memtis(c) => Box::new(Memtis::new(c.clone())),
            PolicyConfig::Freqtier(c) => Box::new(FreqTier::new(c.clone())),
            PolicyConfig::Multiclock(c) => Box::new(MultiClock::new(c.clone())),
            PolicyConfig::Nimble(c) => Box::new(Nimble::new(c.clone())),
            PolicyConfig::Chrono(c) => Box::new(Chrono::new(c.clone(), chrono::Tuning::Dcsc)),
            PolicyConfig::ChronoSemiauto(c) => {
                Box::new(Chrono::new(c.clone(), chrono::Tuning::SemiAuto))
            }
            PolicyConfig::Pet(c) => Box::new(Pet::new(c.clone())),
            PolicyConfig::MglruPd(c) => Box::new(MglruPd::new(c.clone())),
            PolicyConfig::Thermostat(c) => Box::new(Thermostat::new(c.clone())),
            // registry: build
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
            (
                "chrono",
                &["dcsc_min_samples", "min_victim_mb", "rate_limit_mbps"],
            ),
            (
                "chrono-semiauto",
                &["dcsc_min_samples", "min_victim_mb", "rate_limit_mbps"],
            ),
            ("pet", &["mis_demotion_penalty_us"]),
            ("mglru-pd", &["promote_rate_limit_mbps"]),
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
