//! `damon-tiering`: DAMON-based memory tiering as upstream Linux's
//! `samples/damon/mtier.c` and damo's `scripts/mem_tier.sh` set it up (v6.16+).
//!
//! Two DAMON contexts on the physical address space ([`crate::damon::PaddrOps`]), one
//! per node, each with one DAMOS scheme:
//! - on the **slow** node, `migrate_hot` to the fast node: regions with at least one
//!   accessed sample per aggregation, hottest first; only pages accessed since last
//!   checked (`young` filter, allow); quota goal: fast-node used memory
//!   (`node_mem_used_bp`) up to 99.7%;
//! - on the **fast** node, `migrate_cold` to the slow node: regions with no accessed
//!   sample, coldest first; pages accessed since last checked are skipped (`young`
//!   filter, reject); quota goal: fast-node free memory (`node_mem_free_bp`) at least
//!   0.5%.
//!
//! Both schemes apply every second with at most 200 MiB per second, and DAMON's
//! feedback loop scales each effective quota towards its goal. The two goals overlap
//! on purpose: between 99.5% and 99.7% fast-node use both schemes run, so cold pages
//! keep making room for hot ones ("aiming resulting 99.6 % node 0 utilization"). The
//! monitor is the reusable [`crate::damon`] module; this file only configures it.
//! Parameters and decisions: `docs/policies/damon-tiering.md`.

use crate::damon::schemes::{
    AccessPattern, Damos, DamosAction, DamosFilter, GoalMetric, Quota, QuotaGoal,
};
use crate::damon::{DamonAttrs, DamonCtx, PaddrOps, PhysView, Target, DAMON_TIMER_BASE};
use serde::{Deserialize, Serialize};
use tierkit_core::*;

/// `damon-tiering` parameters. Defaults: `samples/damon/mtier.c` (and the same values
/// in damo's `mem_tier.sh`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct DamonTieringConfig {
    /// Monitoring attributes of both contexts (mtier.c: 5 ms / 100 ms / 60 s,
    /// 10–1000 regions, intervals goal 4% over 3 aggregations in [5 ms, 10 s]).
    pub monitor: DamonAttrs,
    /// How often each scheme is applied, ms (mtier.c `apply_interval` 1 s). 0 = every
    /// aggregation interval (DAMOS's default).
    pub apply_interval_ms: u64,
    /// Size quota per reset interval of each scheme, bytes (mtier.c 200 MiB). 0 = no
    /// size limit.
    pub quota_bytes: u64,
    /// CPU-time quota per reset interval of each scheme, ms (mtier.c: unset, 0 = none).
    pub quota_ms: u64,
    /// Quota charge window, ms (mtier.c `reset_interval` 1000). At least 1.
    pub quota_reset_interval_ms: u64,
    /// Prioritization weight of region size (mtier.c 0: "ignore size of region when
    /// prioritizing"; the hot/cold scores never use it).
    pub weight_sz_permil: u32,
    /// Prioritization weight of access frequency (mtier.c 100).
    pub weight_nr_accesses_permil: u32,
    /// Prioritization weight of age (mtier.c 100).
    pub weight_age_permil: u32,
    /// Fewest accessed samples per aggregation of a region to promote (mtier.c
    /// `min_nr_accesses` 1; mem_tier.sh `--damos_access_rate 5%` = 1 of 20 samples).
    pub promote_min_nr_accesses: u32,
    /// Most accessed samples per aggregation of a region to demote (mtier.c
    /// `max_nr_accesses` 0).
    pub demote_max_nr_accesses: u32,
    /// Goal of the promotion quota: fast-node used memory, basis points (mtier.c
    /// `node0_mem_used_bp` 9970). 0 = no goal (the plain size quota). Range 0..=10000.
    pub promote_goal_used_bp: u64,
    /// Goal of the demotion quota: fast-node free memory, basis points (mtier.c
    /// `node0_mem_free_bp` 50). 0 = no goal. Range 0..=10000.
    pub demote_goal_free_bp: u64,
    /// Apply the `young` page filters (mtier.c: promote allows only young pages,
    /// demote rejects young pages).
    pub young_filter: bool,
}

impl Default for DamonTieringConfig {
    fn default() -> Self {
        DamonTieringConfig {
            monitor: DamonAttrs::default(),
            apply_interval_ms: 1000,
            quota_bytes: 200 * MIB,
            quota_ms: 0,
            quota_reset_interval_ms: 1000,
            weight_sz_permil: 0,
            weight_nr_accesses_permil: 100,
            weight_age_permil: 100,
            promote_min_nr_accesses: 1,
            demote_max_nr_accesses: 0,
            promote_goal_used_bp: 9970,
            demote_goal_free_bp: 50,
            young_filter: true,
        }
    }
}

impl DamonTieringConfig {
    /// Check ranges; the error names the field.
    pub fn validate(&self) -> Result<(), ConfigError> {
        self.monitor
            .validate()
            .map_err(|e| format!("policy.monitor.{e}"))?;
        if self.quota_reset_interval_ms == 0 {
            return Err("quota_reset_interval_ms must be at least 1".into());
        }
        for (name, v) in [
            ("promote_goal_used_bp", self.promote_goal_used_bp),
            ("demote_goal_free_bp", self.demote_goal_free_bp),
        ] {
            if v > 10_000 {
                return Err(format!("{name} must be in 0..=10000, got {v}").into());
            }
        }
        if self.promote_min_nr_accesses == 0 {
            return Err(
                "promote_min_nr_accesses must be at least 1 (0 would promote idle regions)".into(),
            );
        }
        Ok(())
    }

    /// The scheme of one context, as `damon_sample_mtier_build_ctx(promote)` builds it.
    pub fn scheme(&self, promote: bool, fast: TierId, slow: TierId) -> Damos {
        let pattern = AccessPattern {
            min_nr_accesses: if promote {
                self.promote_min_nr_accesses
            } else {
                0
            },
            max_nr_accesses: if promote {
                u32::MAX
            } else {
                self.demote_max_nr_accesses
            },
            ..AccessPattern::ANY
        };
        let mut quota = Quota::new(
            self.quota_ms,
            self.quota_bytes,
            self.quota_reset_interval_ms,
            (
                self.weight_sz_permil,
                self.weight_nr_accesses_permil,
                self.weight_age_permil,
            ),
        );
        let (metric, target) = if promote {
            (GoalMetric::NodeMemUsedBp, self.promote_goal_used_bp)
        } else {
            (GoalMetric::NodeMemFreeBp, self.demote_goal_free_bp)
        };
        if target > 0 {
            quota.goals.push(QuotaGoal {
                metric,
                target_value: target,
                nid: fast,
                current_value: 0,
            });
        }
        let (action, to) = if promote {
            (DamosAction::MigrateHot, fast)
        } else {
            (DamosAction::MigrateCold, slow)
        };
        let mut s = Damos::new(
            pattern,
            action,
            self.apply_interval_ms * 1000,
            quota,
            Some(to),
        );
        if self.young_filter {
            s.filters.push(DamosFilter {
                matching: true,
                allow: promote,
            });
        }
        s
    }
}

/// Index of the promotion context (mtier.c `ctxs[0]`, on the slow node).
const PROMOTE: usize = 0;
/// Index of the demotion context (mtier.c `ctxs[1]`, on the fast node).
const DEMOTE: usize = 1;

/// The policy: two DAMON contexts sharing one physical view.
pub struct DamonTiering {
    cfg: DamonTieringConfig,
    view: PhysView,
    ctxs: Vec<DamonCtx>,
    /// The node each context monitors.
    ctx_tier: Vec<[TierId; 1]>,
}

impl DamonTiering {
    /// A policy with the given parameters.
    pub fn new(cfg: DamonTieringConfig) -> DamonTiering {
        DamonTiering {
            cfg,
            view: PhysView::new(),
            ctxs: Vec::new(),
            ctx_tier: Vec::new(),
        }
    }

    /// The DAMON contexts: `[promote, demote]` (empty before `init`).
    pub fn contexts(&self) -> &[DamonCtx] {
        &self.ctxs
    }

    fn sample(&mut self, i: usize, mech: &mut dyn Mechanisms) {
        let mut ops = PaddrOps {
            view: &mut self.view,
            tiers: &self.ctx_tier[i],
        };
        let out = self.ctxs[i].on_sample(&mut ops, mech);
        mech.schedule(
            mech.now() + out.next_sample_ns,
            DAMON_TIMER_BASE + i as TimerId,
            Runner::Kthread,
        );
    }
}

impl Policy for DamonTiering {
    fn requirements(&self) -> Requirements {
        Requirements {
            accessed_bits: true,
            ..Requirements::default()
        }
    }

    fn name(&self) -> &'static str {
        "damon-tiering"
    }

    fn init(&mut self, mech: &mut dyn Mechanisms) {
        // A two-node setup, as mtier.c: node 0 fast, node 1 slow. Further tiers are
        // left alone.
        if mech.tiers().len() < 2 {
            return;
        }
        let (fast, slow) = (TierId::FAST, TierId(1));
        for (promote, tier) in [(true, slow), (false, fast)] {
            let scheme = self.cfg.scheme(promote, fast, slow);
            self.ctxs.push(DamonCtx::new(
                self.cfg.monitor.clone(),
                vec![Target::default()],
                vec![scheme],
            ));
            self.ctx_tier.push([tier]);
        }
        for i in 0..self.ctxs.len() {
            let mut ops = PaddrOps {
                view: &mut self.view,
                tiers: &self.ctx_tier[i],
            };
            let first = self.ctxs[i].start(&mut ops, mech);
            // The two kdamonds are independent threads; start the second half a
            // sampling interval after the first rather than in lockstep (decision in
            // docs/policies/damon-tiering.md: in lockstep, the promote scheme's young
            // filter clears the accessed bit of the pages it promotes and the demote
            // scheme, at the same instant, finds them old and sends them back).
            let phase = i as u64 * first / 2;
            mech.schedule(
                mech.now() + first + phase,
                DAMON_TIMER_BASE + i as TimerId,
                Runner::Kthread,
            );
        }
    }

    fn on_event(&mut self, event: &Event, mech: &mut dyn Mechanisms) {
        match event {
            Event::Timer { id } if *id >= DAMON_TIMER_BASE => {
                let i = (*id - DAMON_TIMER_BASE) as usize;
                if i < self.ctxs.len() {
                    self.sample(i, mech);
                }
            }
            Event::Munmap { .. } => self.view.mark_dirty(),
            _ => {}
        }
    }

    fn metadata_bytes(&self) -> u64 {
        self.ctxs.iter().map(DamonCtx::metadata_bytes).sum()
    }

    fn stats(&self) -> Vec<(&'static str, f64)> {
        let mib = |b: u64| b as f64 / MIB as f64;
        let get = |i: usize| self.ctxs.get(i);
        let scheme = |i: usize| get(i).map(|c| &c.schemes[0]);
        vec![
            (
                "promote_applied_mib",
                scheme(PROMOTE).map_or(0.0, |s| mib(s.stat.sz_applied)),
            ),
            (
                "demote_applied_mib",
                scheme(DEMOTE).map_or(0.0, |s| mib(s.stat.sz_applied)),
            ),
            (
                "promote_tried_mib",
                scheme(PROMOTE).map_or(0.0, |s| mib(s.stat.sz_tried)),
            ),
            (
                "demote_tried_mib",
                scheme(DEMOTE).map_or(0.0, |s| mib(s.stat.sz_tried)),
            ),
            (
                "promote_esz_mib",
                scheme(PROMOTE).map_or(0.0, |s| mib(s.quota.esz())),
            ),
            (
                "demote_esz_mib",
                scheme(DEMOTE).map_or(0.0, |s| mib(s.quota.esz())),
            ),
            (
                "promote_qt_exceeds",
                scheme(PROMOTE).map_or(0.0, |s| s.stat.qt_exceeds as f64),
            ),
            (
                "demote_qt_exceeds",
                scheme(DEMOTE).map_or(0.0, |s| s.stat.qt_exceeds as f64),
            ),
            (
                "promote_ctx_regions",
                get(PROMOTE).map_or(0.0, |c| c.nr_regions() as f64),
            ),
            (
                "demote_ctx_regions",
                get(DEMOTE).map_or(0.0, |c| c.nr_regions() as f64),
            ),
            (
                "promote_ctx_sample_us",
                get(PROMOTE).map_or(0.0, |c| c.attrs.sample_us as f64),
            ),
            (
                "demote_ctx_sample_us",
                get(DEMOTE).map_or(0.0, |c| c.attrs.sample_us as f64),
            ),
            ("phys_view_refreshes", self.view.nr_refreshes() as f64),
        ]
    }
}

impl DamonTieringConfig {
    /// Sampled simulation: the quota of bytes migrated per reset interval is a size of
    /// memory and scales. Intervals, access-count thresholds, goals in basis points and
    /// the monitor's region counts (DAMON adapts region sizes to whatever space it
    /// watches) do not.
    pub fn scale_space(&mut self, s: SpaceScale) {
        self.quota_bytes = s.count(self.quota_bytes);
    }
}

/// The registry's view of [`DamonTieringConfig`] (`PolicyConfig` in the crate root).
impl crate::RegisteredConfig for DamonTieringConfig {
    fn check(&self) -> Result<(), ConfigError> {
        self.validate()
    }

    fn scale(&mut self, scale: tierkit_core::SpaceScale) {
        self.scale_space(scale)
    }

    fn build_policy(&self, _ctx: &tierkit_core::BuildContext) -> Box<dyn tierkit_core::Policy> {
        Box::new(DamonTiering::new(self.clone()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tierkit_sim::machine::Machine;
    use tierkit_sim::testing::{read, run, small_machine, wait_then_read, write, Script};
    use tierkit_sim::SimConfig;

    const BASE: u64 = 1 << 30;

    fn page(i: u64) -> u64 {
        BASE + i * PAGE_SIZE
    }

    fn tier_of(m: &Machine, i: u64) -> TierId {
        m.page(Pid(0), page(i) >> PAGE_SHIFT)
            .expect("resident")
            .tier
    }

    fn share_in(m: &Machine, pages: std::ops::Range<u64>, tier: TierId) -> f64 {
        let n = pages.end - pages.start;
        pages.filter(|&i| tier_of(m, i) == tier).count() as f64 / n as f64
    }

    /// mtier.c's schemes with the quota goals off (the plain 200 MiB/s size quota)
    /// and fixed 5 ms / 100 ms intervals, so schemes apply exactly every second.
    fn no_goals() -> DamonTieringConfig {
        let mut c = DamonTieringConfig {
            promote_goal_used_bp: 0,
            demote_goal_free_bp: 0,
            ..DamonTieringConfig::default()
        };
        c.monitor.intervals_goal.aggrs = 0;
        c
    }

    #[test]
    fn defaults_are_mtier_and_validate() {
        let c = DamonTieringConfig::default();
        c.validate().unwrap();
        assert_eq!((c.monitor.sample_us, c.monitor.aggr_us), (5_000, 100_000));
        assert_eq!(
            (c.monitor.min_nr_regions, c.monitor.max_nr_regions),
            (10, 1000)
        );
        assert_eq!((c.promote_goal_used_bp, c.demote_goal_free_bp), (9970, 50));
        assert_eq!(c.quota_bytes, 200 * MIB);
        let bad = DamonTieringConfig {
            demote_goal_free_bp: 10_001,
            ..c.clone()
        };
        assert!(bad
            .validate()
            .unwrap_err()
            .to_string()
            .contains("demote_goal_free_bp"));
        let bad = DamonTieringConfig {
            monitor: DamonAttrs {
                min_nr_regions: 2,
                ..DamonAttrs::default()
            },
            ..c
        };
        assert!(bad
            .validate()
            .unwrap_err()
            .to_string()
            .contains("min_nr_regions"));
    }

    #[test]
    fn demotes_an_idle_region_and_promotes_a_hot_one() {
        // 8 MiB fast tier (2048 pages). Pages 0..1536 (A) are written once and then
        // left idle; pages 1536..3072 (B) follow, so most of B lands in the slow tier;
        // then B's last 512 pages (H, all slow) are read over and over for 3.5 s.
        let mut ops: Vec<Op> = (0..3072).map(|i| write(page(i), 0)).collect();
        for _ in 0..3500 {
            ops.extend((2560..3072).map(|i| read(page(i), 2_000)));
        }
        let w = Script::new(12 * MIB).process(&[(BASE, 12 * MIB)], ops);
        let (out, m) = run(
            &small_machine(8, 64),
            &SimConfig::default(),
            Box::new(DamonTiering::new(no_goals())),
            Box::new(w),
        );
        let idle_slow = share_in(&m, 0..1536, TierId(1));
        let hot_fast = share_in(&m, 2560..3072, TierId::FAST);
        assert!(
            idle_slow > 0.9,
            "only {idle_slow:.2} of the idle region was demoted"
        );
        assert!(
            hot_fast > 0.9,
            "only {hot_fast:.2} of the hot region was promoted"
        );
        assert!(out.summary.promoted_pages >= 460 && out.summary.demoted_pages >= 1380);
        // Never more than was needed: hot pages are not demoted again.
        assert_eq!(out.summary.pingpong_pages, 0);
    }

    #[test]
    fn quota_limits_bytes_demoted_per_reset_interval() {
        // Fill the 8 MiB fast tier with pages written once, then idle for 2.5 s: the
        // demotion scheme applies at 1 s and 2 s, 1 MiB (256 pages) each time.
        let mut ops: Vec<Op> = (0..2304).map(|i| write(page(i), 0)).collect();
        wait_then_read(page(2303), 2_500 * NS_PER_MS, &mut ops);
        let w = Script::new(9 * MIB).process(&[(BASE, 9 * MIB)], ops);
        let cfg = DamonTieringConfig {
            quota_bytes: MIB,
            young_filter: false,
            ..no_goals()
        };
        let (out, _) = run(
            &small_machine(8, 64),
            &SimConfig::default(),
            Box::new(DamonTiering::new(cfg)),
            Box::new(w),
        );
        let stat = |k: &str| {
            out.summary
                .policy_stats
                .iter()
                .find(|(n, _)| n == k)
                .unwrap()
                .1
        };
        assert!(
            out.summary.demoted_pages <= 2 * 256,
            "{}",
            out.summary.demoted_pages
        );
        assert!(
            out.summary.demoted_pages >= 2 * 250,
            "{}",
            out.summary.demoted_pages
        );
        assert!(stat("demote_tried_mib") <= 2.0);
        assert_eq!(
            stat("demote_qt_exceeds"),
            1.0,
            "the 1 s window ran out of quota"
        );
    }

    /// A workload that first idles `wait_ns` (one read of its first mapped page after a
    /// long gap), then runs the wrapped workload.
    struct WarmUp {
        inner: Box<dyn Workload>,
        wait_ns: u64,
        first_addr: Option<u64>,
        waited: bool,
    }

    impl Workload for WarmUp {
        fn shape(&self) -> WorkloadShape {
            self.inner.shape()
        }
        fn prologue(&mut self, p: usize, out: &mut Vec<Op>) {
            self.inner.prologue(p, out);
            if let Some(Op::Mmap { addr, .. }) = out.first() {
                self.first_addr.get_or_insert(*addr);
            }
        }
        fn fill(&mut self, p: usize, t: usize, out: &mut Vec<Op>) {
            if !self.waited && (p, t) == (0, 0) {
                self.waited = true;
                wait_then_read(self.first_addr.expect("a mapping"), self.wait_ns, out);
                return;
            }
            self.inner.fill(p, t, out)
        }
    }

    fn gups_after_warm_up() -> Box<dyn Workload> {
        let inner = tierkit_workloads::WorkloadConfig::Gups(tierkit_workloads::GupsConfig {
            footprint_mib: 256,
            nr_updates: 5_000_000,
            gap_ns: 1_000,
            ..Default::default()
        })
        .build(3);
        Box::new(WarmUp {
            inner,
            wait_ns: 3_000 * NS_PER_MS,
            first_addr: None,
            waited: false,
        })
    }

    #[test]
    fn gups_ends_with_more_fast_accesses_than_first_touch() {
        // GUPS, 256 MiB at 1:8: first touch fills the fast tier with the table's
        // start while the hot tenth sits in the middle, on the slow tier.
        // Adaptations to a small, short run (docs/policies/damon-tiering.md):
        // - policy time runs 10× faster (sim.policy_time_scale), so the 1 s quota
        //   windows the goal feedback needs pass 10× as often;
        // - the machine idles 3 s (30 policy seconds) first, as a tiering daemon runs
        //   on a system before a job arrives: the promotion quota grows while the fast
        //   node is empty, as it does on a long-running system;
        // - the goals sit 1 point lower (98.7% used / 1.5% free) because this fast
        //   tier's min watermark alone is 0.71% (mtier.c's 0.5% assumes large nodes);
        // - fixed 5 ms / 100 ms intervals (DAMON's default): after the idle start the
        //   auto-tuning would have stretched sampling to its 10 s maximum.
        let machine = tierkit_sim::MachineConfig {
            fast: "1:8".into(),
            llc_enabled: false,
            ..Default::default()
        };
        let sim = SimConfig {
            policy_time_scale: 10.0,
            ..SimConfig::default()
        };
        let mut cfg = DamonTieringConfig {
            promote_goal_used_bp: 9870,
            demote_goal_free_bp: 150,
            ..DamonTieringConfig::default()
        };
        cfg.monitor.intervals_goal.aggrs = 0;
        let (ft, _) = run(
            &machine,
            &sim,
            Box::new(crate::FirstTouch),
            gups_after_warm_up(),
        );
        let (dt, _) = run(
            &machine,
            &sim,
            Box::new(DamonTiering::new(cfg)),
            gups_after_warm_up(),
        );
        let (f, d) = (ft.summary.fast_access_ratio, dt.summary.fast_access_ratio);
        assert!(
            d > 2.0 * f && d > f + 0.05,
            "damon-tiering {d:.4} vs first-touch {f:.4}"
        );
        assert!(dt.summary.promoted_pages > 0 && dt.summary.demoted_pages > 0);
        assert!(dt.summary.policy_metadata_bytes > 0);
    }
}
